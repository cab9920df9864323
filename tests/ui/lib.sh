# Sourced by the UI tests (POSIX sh) once they have set
#   app     the rlx-studio binary
#   art     the artifacts directory
#   ui_log  the prefix of their logs and screenshots: $art/$ui_log-NAME.log
#           and $art/$ui_log-NAME.png, NAME being the current run ($name)
# The test itself keeps $pid (the running app) and $wid (its window).
. "$(dirname "$0")/leaks.sh"

pid=
spid= # a second process of the test's own (drop.sh's drag source)
name=
wid=

# ui_need TOOL...: skip the test (exit 77) unless every TOOL is on PATH.
ui_need() {
    for tool in "$@"; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "SKIP: $tool not found"
            exit 77
        fi
    done
}

# ui_enter_xvfb GUARD ARGS...: run this script again with ARGS inside a new
# Xvfb server (1280x800) and a private session bus, with the variable GUARD
# set so that the second run knows it is there. The private bus keeps the app
# from reaching a running rlx-studio of the person running the tests
# (GApplication would hand over to it and exit).
ui_enter_xvfb() {
    guard=$1
    shift
    mkdir -p "$art" || exit 1
    bus=
    if command -v dbus-run-session >/dev/null 2>&1; then
        bus="dbus-run-session --"
    else
        DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent
        export DBUS_SESSION_BUS_ADDRESS
    fi
    eval "$guard=1; export $guard"
    # shellcheck disable=SC2086
    # -a alone starts at :99 for every caller, and two test runs starting at
    # once can pick the same number; start the search at a number of our own.
    exec xvfb-run -a -n $((100 + $$ % 800)) -s "-screen 0 1280x800x24 -nolisten tcp -noreset" $bus "$0" "$@"
}

# ui_env WORK: a fresh WORK with the app's settings (a keyfile, so the
# person's dconf stays untouched) and data under it; no accessibility bus;
# criticals abort. Sets $convs (the conversation files) and $keyfile.
ui_env() {
    work=$1
    rm -rf "$work"
    mkdir -p "$work/config/glib-2.0/settings" "$work/data"
    XDG_CONFIG_HOME=$work/config
    XDG_DATA_HOME=$work/data
    GSETTINGS_BACKEND=keyfile
    GTK_A11Y=none
    NO_AT_BRIDGE=1
    GDK_BACKEND=x11
    G_DEBUG=fatal-criticals
    export XDG_CONFIG_HOME XDG_DATA_HOME GSETTINGS_BACKEND GTK_A11Y NO_AT_BRIDGE GDK_BACKEND G_DEBUG
    unset ADW_DEBUG_COLOR_SCHEME
    convs=$work/data/rlx-studio/conversations
    keyfile=$work/config/glib-2.0/settings/keyfile
}

fail() {
    echo "FAIL: $*"
    for p in "$pid" "$spid"; do
        if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
            kill "$p"
        fi
    done
    for log in "$art/$ui_log"-*.log; do
        [ -f "$log" ] && { echo "--- $log"; cat "$log"; }
    done
    exit 1
}

# wait_for WHAT COMMAND...: up to 30 s (or $ui_wait_s) for COMMAND to succeed
# while the app lives.
wait_for() {
    what=$1
    shift
    i=0
    until "$@"; do
        [ $i -lt $((${ui_wait_s:-30} * 5)) ] || fail "$what (after ${ui_wait_s:-30} s)"
        kill -0 "$pid" 2>/dev/null || fail "rlx-studio died waiting for: $what"
        sleep 0.2
        i=$((i + 1))
    done
}

# wait_window REGEX: up to 30 s for a visible window so named while the app
# lives; prints its id.
wait_window() {
    i=0
    while [ $i -lt 150 ]; do
        w=$(xdotool search --onlyvisible --name "$1" 2>/dev/null | head -n 1)
        [ -n "$w" ] && { echo "$w"; return 0; }
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.2
        i=$((i + 1))
    done
    return 1
}

# wait_log PATTERN: up to 30 s for PATTERN in the current run's log.
wait_log() {
    wait_for "no '$1' in the log of run $name" grep -q -e "$1" "$art/$ui_log-$name.log"
}

shot() {
    import -window root "$art/$ui_log-$1.png" || fail "screenshot $1"
    kill -0 "$pid" 2>/dev/null || fail "rlx-studio died while taking screenshot $1"
    echo "screenshot: $art/$ui_log-$1.png"
}

# gone PID: up to 10 s for the process to exit; false if it still runs.
gone() {
    _g=0
    while kill -0 "$1" 2>/dev/null && [ $_g -lt 50 ]; do
        sleep 0.2
        _g=$((_g + 1))
    done
    ! kill -0 "$1" 2>/dev/null
}

# quit: Ctrl+Q on the main window, then a clean exit (in the ASan build leaks
# are checked too: only GLib's quark block passes, see leaks.sh).
quit() {
    xdotool windowfocus --sync "$wid" key --clearmodifiers ctrl+q
    gone "$pid" || fail "rlx-studio still running 10 s after Ctrl+Q"
    wait "$pid"
    rc=$?
    pid=
    app_exit_ok "$rc" "$art/$ui_log-$name.log" || fail "rlx-studio exited with status $rc"
}

# check_log NAME: no GLib warnings or criticals in the log of run NAME.
check_log() {
    if grep -E -e '-(CRITICAL|WARNING)' "$art/$ui_log-$1.log"; then
        fail "warnings in the log of run $1"
    fi
}

# newest: the most recently written conversation file.
newest() {
    ls -t "$convs"/*.json 2>/dev/null | head -n 1
}

# field FILE WHAT: reply (last assistant text), nmsg, title, or all (every text).
field() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    c = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
m = c.get("messages", [])
w = sys.argv[2]
if w == "reply":
    r = [x["content"] for x in m if x["role"] == "assistant"]
    sys.stdout.write(r[-1] if r else "")
elif w == "nmsg":
    print(len(m))
elif w == "title":
    sys.stdout.write(c.get("title", ""))
else:
    sys.stdout.write("\x1e".join(x["role"] + ":" + x["content"] for x in m))
EOF
}

# source_says WORDS: the drag source (its report in $slog) said a line
# starting with WORDS.
source_says() {
    grep -q "^$1" "$slog" 2>/dev/null
}

# ui_drag LOG FILE X Y: a real XDND drag of FILE from a drag-source window
# ($source_app, tests/ui/drag-source.c, its report in LOG) onto the screen
# point X,Y, dropped there; fails the test unless the drop was taken. The
# drag is not timed: each step waits for what the source reports. Sets spid
# (the source's pid, empty once it has exited) for the caller's cleanup.
ui_drag() {
    slog=$1
    "$source_app" "$2" >"$slog" 2>&1 &
    spid=$!
    wait_for "the drag source shows no window" source_says ready
    # ready is said as the window is mapped; on a busy machine it becomes
    # visible to xdotool a moment later
    swid=$(wait_window '^rlx drag source$') || fail "no drag source window"
    # No window manager: the source goes where we put it, above the studio
    # (mapped last), clear of the drop point.
    xdotool windowmove --sync "$swid" 1040 640 || fail "cannot move the drag source"
    xdotool mousemove --sync 1140 700 mousedown 1
    # Past GTK's drag threshold, a few pixels at a time.
    x=1140
    i=0
    until source_says drag-begin; do
        [ $i -lt 100 ] || fail "the drag did not begin"
        x=$((x - 4))
        xdotool mousemove --sync "$x" 700
        sleep 0.1
        i=$((i + 1))
    done
    # Over the studio's window, wiggling until its drop target answers.
    xdotool mousemove --sync "$3" "$4"
    i=0
    until source_says "action copy"; do
        [ $i -lt 150 ] || fail "the studio never accepted the drag ($(tr '\n' ' ' <"$slog"))"
        xdotool mousemove --sync "$(($3 + i % 2))" "$4"
        sleep 0.2
        i=$((i + 1))
    done
    xdotool mouseup 1
    wait_for "the drag did not end" source_says "drag-"'\(end\|cancel\)'
    source_says drag-end || fail "the drop was refused: $(tr '\n' ' ' <"$slog")"
    gone "$spid" || fail "the drag source did not exit"
    wait "$spid" || fail "the drag source failed"
    spid=
}
