#!/usr/bin/env python3
"""Where a decode step's device time goes, kernel by kernel.

Reads the CSV that `ncu --csv --page raw --metrics gpu__time_duration.sum,
dram__bytes_read.sum,...` writes for a run of `rlx bench -p P -n N` (every
kernel of the warm-up and the run, in launch order), finds the decode steps
(a step starts at the embedding's rlx_gather; the steps of the most common
length are taken), and prints one of them: each kernel name's launches,
time, share and DRAM read rate, then the step launch by launch.

Usage: tools/ncu-step.py NCU.csv [--launches]
ncu runs every kernel alone (its caches and clocks left as they are with
--cache-control none --clock-control none), so the sum is close to, and
not the same as, the device time `rlx bench` reports for a replayed step.
"""
import collections
import csv
import sys


def load(path):
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{path}: no ncu raw CSV table (was ncu run with --csv --page raw?)")
    rows = list(csv.reader(lines[start:]))
    head = {h: i for i, h in enumerate(rows[0])}
    need = ["Kernel Name", "gpu__time_duration.sum"]
    for n in need:
        if n not in head:
            sys.exit(f"{path}: no column {n}")

    def num(r, k):
        if k not in head or head[k] >= len(r):
            return 0.0
        try:
            return float(r[head[k]].replace(",", ""))
        except ValueError:
            return 0.0

    out = []
    for r in rows[2:]:  # the second row holds the units
        if len(r) <= head["gpu__time_duration.sum"]:
            continue
        out.append(
            {
                "name": r[head["Kernel Name"]],
                "ns": num(r, "gpu__time_duration.sum"),
                "read": num(r, "dram__bytes_read.sum"),
                "grid": r[head["Grid Size"]] if "Grid Size" in head else "",
                "block": r[head["Block Size"]] if "Block Size" in head else "",
                "regs": r[head["launch__registers_per_thread"]]
                if "launch__registers_per_thread" in head
                else "",
            }
        )
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    ks = load(sys.argv[1])
    starts = [i for i, k in enumerate(ks) if k["name"] == "rlx_gather"]
    spans = [(a, b) for a, b in zip(starts, starts[1:])]
    if not spans:
        sys.exit("no decode steps found (no two rlx_gather launches)")
    length = collections.Counter(b - a for a, b in spans).most_common(1)[0][0]
    steps = [(a, b) for a, b in spans if b - a == length]
    a, b = steps[len(steps) // 2]
    step = ks[a:b]
    total = sum(k["ns"] for k in step)
    read = sum(k["read"] for k in step)
    print(
        f"a decode step: {length} launches, {total / 1e3:.1f} us, {read / 1e6:.1f} MB read "
        f"from DRAM ({len(steps)} steps of this length in the file)"
    )
    agg = collections.OrderedDict()
    for k in step:
        e = agg.setdefault(k["name"], [0, 0.0, 0.0])
        e[0] += 1
        e[1] += k["ns"]
        e[2] += k["read"]
    print(f"{'kernel':26s} {'launches':>8s} {'us':>9s} {'share':>6s} {'us each':>8s} {'GB/s':>6s}")
    for name, (n, ns, rd) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(
            f"{name:26s} {n:8d} {ns / 1e3:9.1f} {100 * ns / total:5.1f}% {ns / n / 1e3:8.1f} "
            f"{rd / ns if ns else 0:6.0f}"
        )
    if "--launches" in sys.argv:
        print()
        for k in step:
            print(
                f"{k['name']:26s} {k['ns'] / 1e3:8.1f} us {k['read'] / 1e6:8.2f} MB "
                f"grid {k['grid']:>14s} block {k['block']:>12s} regs {k['regs']}"
            )


if __name__ == "__main__":
    main()
