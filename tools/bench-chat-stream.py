#!/usr/bin/env python3
"""How fast the Chat page receives a long reply, against `rlx generate`.

Streams one long reply (2,048 tokens by default) through the real
rlx-studio under Xvfb, drawn by GTK's cairo renderer (GSK_RENDERER=cairo,
GDK_DEBUG=gl-disable), and reads what the page logs with
G_MESSAGES_DEBUG=RlxStudio: every 100 tokens, the tokens received, the time
since the first one and the main thread's CPU time. Then runs `rlx generate`
on the same model with the same settings (greedy, the same context length
and threads) and reads its decode speed. Prints:

  - the tokens/s the page received and the CLI's, and their ratio;
  - the main thread's CPU seconds per 1,000 tokens over the first 1,000
    tokens and over the last 1,000, its share of the time passed, and the
    page's tokens/s, over the same two windows;
  - the same CPU per 1,000 tokens and per showing over each 500 tokens (the
    first window draws less than a page of text: the view is not full yet).

Each pair runs back to back, --repeat times (default 2), app first then CLI.

usage: tools/bench-chat-stream.py -m MODEL.gguf [--build build-release]
           [-n 2048] [--ctx 4096] [-t THREADS] [--repeat 2] [--step 500] [--json]
Needs xvfb-run, xdotool and dbus-run-session.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

PROMPT = "Write a long story about a lighthouse keeper"
LINE = re.compile(r"stream (progress|finished): (\d+) tokens, ([0-9.]+) s since the first, "
                  r"main thread ([0-9.]+) s CPU, (\d+) showings")


def in_xvfb(args):
    """Run this script again inside a fresh Xvfb and session bus."""
    env = dict(os.environ, RLX_BENCH_IN_XVFB="1")
    cmd = ["xvfb-run", "-a", "-n", str(100 + os.getpid() % 800), "-s",
           "-screen 0 1280x800x24 -nolisten tcp", "dbus-run-session", "--",
           sys.executable] + sys.argv
    return subprocess.call(cmd, env=env)


def app_run(args, work):
    """One reply through the page; returns [(tokens, seconds, cpu), ...]."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "config/glib-2.0/settings"))
    os.makedirs(os.path.join(work, "data"))
    with open(os.path.join(work, "config/glib-2.0/settings/keyfile"), "w") as f:
        f.write("[org/rlx/Studio]\ntemperature=0.0\nmax-tokens=%d\ncontext-length=%d\n"
                "threads=%d\nwindow-width=1280\nwindow-height=760\n"
                % (args.n, args.ctx, args.threads))
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
               XDG_DATA_HOME=os.path.join(work, "data"), GSETTINGS_BACKEND="keyfile",
               GTK_A11Y="none", NO_AT_BRIDGE="1", GDK_BACKEND="x11",
               GSK_RENDERER="cairo", GDK_DEBUG="gl-disable", G_MESSAGES_DEBUG="RlxStudio")
    log_path = os.path.join(work, "app.log")
    log = open(log_path, "w")
    app = subprocess.Popen([os.path.join(args.build, "app/rlx-studio"), "--model", args.model],
                           stdout=log, stderr=subprocess.STDOUT, env=env)

    def wait(pattern, seconds):
        t0 = time.time()
        while time.time() - t0 < seconds:
            if app.poll() is not None:
                sys.exit("rlx-studio exited (see %s)" % log_path)
            if re.search(pattern, open(log_path, errors="replace").read()):
                return
            time.sleep(0.2)
        app.kill()
        sys.exit("no '%s' after %d s (see %s)" % (pattern, seconds, log_path))

    try:
        wait("is ready", 120)
        wid = subprocess.check_output(["xdotool", "search", "--onlyvisible", "--name",
                                       "RLX Studio"]).split()[0]
        subprocess.check_call(["xdotool", "windowfocus", "--sync", wid])
        subprocess.check_call(["xdotool", "mousemove", "1279", "799"])
        subprocess.check_call(["xdotool", "type", "--delay", "15", PROMPT])
        subprocess.check_call(["xdotool", "key", "--clearmodifiers", "Return"])
        wait("stream finished", 3600)
        subprocess.call(["xdotool", "key", "--clearmodifiers", "ctrl+q"])
        app.wait(timeout=30)
    finally:
        if app.poll() is None:
            app.kill()
    points = []
    for line in open(log_path, errors="replace"):
        m = LINE.search(line)
        if m:
            points.append((int(m.group(2)), float(m.group(3)), float(m.group(4)),
                           int(m.group(5))))
    return points


def cli_run(args):
    cmd = [os.path.join(args.build, "app/rlx"), "generate", "-m", args.model, "-p", PROMPT,
           "-n", str(args.n), "--temp", "0", "--ctx", str(args.ctx)]
    if args.threads:
        cmd += ["-t", str(args.threads)]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    m = re.search(r"generated (\d+) tokens in ([0-9.]+) ms \(([0-9.]+) tok/s\)", r.stderr)
    if not m:
        sys.exit("cannot read rlx generate's timing:\n" + r.stderr)
    return int(m.group(1)), float(m.group(3))


def window(points, first):
    """The first or last ~1,000 tokens: (tokens, seconds, CPU seconds, showings)."""
    n_end = points[-1][0]
    if first:
        a = (0, 0.0, 0.0, 0)
        b = next(p for p in points if p[0] >= 1000)
    else:
        b = points[-1]
        a = [p for p in points if p[0] <= n_end - 1000][-1]
    return b[0] - a[0], b[1] - a[1], b[2] - a[2], b[3] - a[3]


def series(points, step=500):
    """Per window of `step` tokens: (first token, CPU s per 1,000 tokens, ms per showing).
    The windows show whether the cost settles once the view is full of text (the
    first window draws less than a page) or keeps growing with the reply."""
    out = []
    prev = (0, 0.0, 0.0, 0)
    for p in points:
        if p[0] - prev[0] >= step:
            n, cpu, k = p[0] - prev[0], p[2] - prev[2], p[3] - prev[3]
            out.append((prev[0], round(cpu / n * 1000, 3), round(cpu / k * 1000, 1) if k else 0))
            prev = p
    return out


def cpu_per_1000(points, first):
    """Main-thread CPU seconds per 1,000 tokens over the first or last ~1,000."""
    n, _, cpu, _ = window(points, first)
    return cpu / n * 1000


def cpu_per_showing(points, first):
    """Main-thread CPU milliseconds per showing of the reply, same windows."""
    _, _, cpu, k = window(points, first)
    return cpu / k * 1000 if k else 0


def busy(points, first):
    """The main thread's CPU time as a share of the time passed, same windows."""
    _, s, cpu, _ = window(points, first)
    return cpu / s if s > 0 else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--build", default="build-release")
    ap.add_argument("-n", type=int, default=2048)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--step", type=int, default=500,
                    help="tokens per window of the per-window figures (default 500)")
    args = ap.parse_args()
    args.model = os.path.abspath(args.model)
    args.build = os.path.abspath(args.build)
    if not os.environ.get("RLX_BENCH_IN_XVFB"):
        for tool in ("xvfb-run", "xdotool", "dbus-run-session"):
            if not shutil.which(tool):
                sys.exit("bench-chat-stream: %s is needed" % tool)
        sys.exit(in_xvfb(args))
    results = []
    with tempfile.TemporaryDirectory(prefix="rlx-bench-chat-") as tmp:
        for i in range(args.repeat):
            points = app_run(args, os.path.join(tmp, "run%d" % i))
            n, s, _, _ = points[-1]
            if n < 2000:
                print("note: the reply ended at %d tokens" % n, file=sys.stderr)
            page_tps = (n - 1) / s if s > 0 else 0
            cli_n, cli_tps = cli_run(args)
            r = {"page_tokens": n, "page_tps": round(page_tps, 1), "cli_tokens": cli_n,
                 "cli_tps": round(cli_tps, 1), "ratio": round(page_tps / cli_tps, 3),
                 "cpu_per_1000_first": round(cpu_per_1000(points, True), 3),
                 "cpu_per_1000_last": round(cpu_per_1000(points, False), 3),
                 "busy_first": round(busy(points, True), 3),
                 "ms_per_showing_first": round(cpu_per_showing(points, True), 2),
                 "ms_per_showing_last": round(cpu_per_showing(points, False), 2),
                 "showings_first": window(points, True)[3],
                 "showings_last": window(points, False)[3],
                 "busy_last": round(busy(points, False), 3),
                 "page_tps_first": round(window(points, True)[0] / window(points, True)[1], 1),
                 "page_tps_last": round(window(points, False)[0] / window(points, False)[1], 1),
                 "by_window": series(points, args.step)}
            results.append(r)
            if not args.json:
                print("run %d: page %d tokens at %.1f tokens/s, rlx generate %d at %.1f "
                      "(page/CLI %.0f%%); main thread CPU per 1,000 tokens: first %.3f s, "
                      "last %.3f s (main thread busy %.0f%% then %.0f%% of the time; the page "
                      "received %.1f then %.1f tokens/s; shown %d then %d times, %.1f then "
                      "%.1f ms of main-thread CPU per showing)"
                      % (i + 1, n, page_tps, cli_n, cli_tps, 100 * r["ratio"],
                         r["cpu_per_1000_first"], r["cpu_per_1000_last"], 100 * r["busy_first"],
                         100 * r["busy_last"], r["page_tps_first"], r["page_tps_last"],
                         r["showings_first"], r["showings_last"], r["ms_per_showing_first"],
                         r["ms_per_showing_last"]))
                print("  by %d tokens (from token: main-thread CPU s per 1,000 tokens, ms "
                      "per showing): " % args.step + "; ".join("%d: %.3f s, %.1f ms" % w
                                                               for w in r["by_window"]))
                sys.stdout.flush()
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
