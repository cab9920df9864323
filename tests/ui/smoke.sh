#!/bin/sh
# Smoke test of rlx-studio under Xvfb: start it, wait for its window, take
# screenshots (wide, narrow, shortcuts window, about window, dark style), check
# it is still alive, then quit it with Ctrl+Q and expect exit status 0.
# Needs xvfb-run (xvfb), xdotool, import (imagemagick); dbus-run-session
# (dbus-daemon) and gdbus (libglib2.0-bin) are used when present.
# Exits 77 (skipped) when a required tool is missing.
#
# usage: smoke.sh RLX_STUDIO ARTIFACT_DIR
set -u

app=$1
art=$2

if [ -z "${RLX_SMOKE_IN_XVFB:-}" ]; then
    for tool in xvfb-run xdotool import; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "SKIP: $tool not found (Debian: xvfb xdotool imagemagick)"
            exit 77
        fi
    done
    mkdir -p "$art" || exit 1
    # A private session bus: the app must not reach a running rlx-studio of the
    # person running the tests (GApplication would hand over to it and exit).
    bus=
    if command -v dbus-run-session >/dev/null 2>&1; then
        bus="dbus-run-session --"
    else
        DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent
        export DBUS_SESSION_BUS_ADDRESS
    fi
    RLX_SMOKE_IN_XVFB=1
    export RLX_SMOKE_IN_XVFB
    # shellcheck disable=SC2086
    # -a alone starts at :99 for every caller, and two test runs starting at
    # once can pick the same number; start the search at a number of our own.
    exec xvfb-run -a -n $((100 + $$ % 800)) -s "-screen 0 1280x800x24 -nolisten tcp -noreset" $bus "$0" "$@"
fi

# Settings go to a keyfile under the artifacts (the person's dconf stays
# untouched, and the second run can check the size the first one saved);
# no accessibility bus; criticals abort.
rm -rf "$art/config"
XDG_CONFIG_HOME=$art/config
GSETTINGS_BACKEND=keyfile
export XDG_CONFIG_HOME
GTK_A11Y=none
NO_AT_BRIDGE=1
GDK_BACKEND=x11
G_DEBUG=fatal-criticals
export GSETTINGS_BACKEND GTK_A11Y NO_AT_BRIDGE GDK_BACKEND G_DEBUG
unset ADW_DEBUG_COLOR_SCHEME

pid=
fail() {
    echo "FAIL: $*"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
    fi
    for log in "$art"/rlx-studio-*.log; do
        [ -f "$log" ] && { echo "--- $log"; cat "$log"; }
    done
    exit 1
}

# start NAME [VAR=value...]: run rlx-studio, wait for its window, set $wid.
start() {
    name=$1
    shift
    env "$@" "$app" >"$art/rlx-studio-$name.log" 2>&1 &
    pid=$!
    wid=
    i=0
    while [ $i -lt 150 ]; do
        wid=$(xdotool search --onlyvisible --name '^RLX Studio$' 2>/dev/null | head -n 1)
        [ -n "$wid" ] && break
        kill -0 "$pid" 2>/dev/null || fail "rlx-studio ($name) exited before showing a window"
        sleep 0.2
        i=$((i + 1))
    done
    [ -n "$wid" ] || fail "no rlx-studio window after 30 s ($name)"
    xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
    sleep 2 # first frames, icons
}

shot() {
    import -window root "$art/rlx-studio-$1.png" || fail "screenshot $1"
    kill -0 "$pid" 2>/dev/null || fail "rlx-studio died while taking screenshot $1"
    echo "screenshot: $art/rlx-studio-$1.png"
}

# quit: Ctrl+Q on the main window, then expect a clean exit.
quit() {
    xdotool windowfocus --sync "$wid" key --clearmodifiers ctrl+q
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
        sleep 0.2
        i=$((i + 1))
    done
    kill -0 "$pid" 2>/dev/null && fail "rlx-studio still running 10 s after Ctrl+Q"
    wait "$pid"
    rc=$?
    pid=
    [ "$rc" -eq 0 ] || fail "rlx-studio exited with status $rc"
}

check_log() {
    if grep -E -e '-(CRITICAL|WARNING)' "$art/rlx-studio-$1.log"; then
        fail "warnings in the log of run $1"
    fi
}

start light
shot light

# win.view through its accelerator.
xdotool key --clearmodifiers alt+4
sleep 1
shot imagine
xdotool key --clearmodifiers alt+1
sleep 0.5

xdotool windowsize "$wid" 400 720 || fail "resize"
sleep 1.5
shot narrow
# The size the next run must come back with.
xdotool windowsize "$wid" 900 640
sleep 1

xdotool key --clearmodifiers ctrl+question
sleep 1.5
shot shortcuts
xdotool key --clearmodifiers Escape
sleep 0.5

if command -v gdbus >/dev/null 2>&1 && [ "${DBUS_SESSION_BUS_ADDRESS#unix:path=/nonexistent}" = "$DBUS_SESSION_BUS_ADDRESS" ]; then
    gdbus call --session --dest org.rlx.Studio --object-path /org/rlx/Studio \
        --method org.gtk.Actions.Activate about '[]' '{}' >/dev/null || fail "app.about over D-Bus"
    sleep 1.5
    shot about
    xdotool key --clearmodifiers Escape
    sleep 0.5
fi

quit
check_log light

start dark ADW_DEBUG_COLOR_SCHEME=prefer-dark
shot dark
size=$(xdotool getwindowgeometry "$wid" | sed -n 's/^ *Geometry: *//p')
[ "$size" = "900x640" ] || fail "window size not remembered: $size, expected 900x640"
quit
check_log dark

echo "PASS"
