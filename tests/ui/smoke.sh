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

ui_log=rlx-studio
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_SMOKE_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import
    ui_enter_xvfb RLX_SMOKE_IN_XVFB "$@"
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

# start NAME [VAR=value...]: run rlx-studio, wait for its window, set $wid.
start() {
    name=$1
    shift
    env "$@" "$app" >"$art/rlx-studio-$name.log" 2>&1 &
    pid=$!
    wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window after 30 s ($name)"
    xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
    sleep 2 # first frames, icons
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

# The other application-wide shortcuts the Shortcuts window lists (the Chat
# ones are driven by chat.sh and conversations.sh).
xdotool key --clearmodifiers ctrl+comma
w=$(wait_window '^Preferences$') || fail "Ctrl+, opened no Preferences window"
xdotool key --clearmodifiers Escape
sleep 0.5
xdotool search --onlyvisible --name '^Preferences$' >/dev/null 2>&1 && fail "Escape left Preferences open"
# (Not Ctrl+O: each opening of GTK 4.8's file chooser leaks at exit, and
# under ASan its GIO thread has crashed in g_content_type_guess; the
# chooser is opened only where conversations.sh exports, twice.)
xdotool windowfocus --sync "$wid"
xdotool key --clearmodifiers F10
sleep 1
shot main-menu
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
