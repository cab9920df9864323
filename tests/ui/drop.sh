#!/bin/sh
# Drag and drop onto rlx-studio under Xvfb: a real XDND drag. DRAG_SOURCE
# (drag-source.c) shows a small GTK window offering one file; xdotool presses
# the mouse on it, moves onto the studio's window and releases, so the file
# travels as text/uri-list between two processes exactly as from a file
# manager. The drag is not timed: each step waits for what the source reports
# (drag-begin, then the target's "action copy") before the next one.
#
#   1. a text file (not a GGUF): an error toast, and the window lives on.
#                                                  (light, 1280x800)
#   2. stories260K.gguf: the model loads (its name in the log's "is ready"),
#      and a greedy reply to "Once upon a time" is the documented one.
#                                                  (dark, 800x600)
# A screenshot after each goes to ARTIFACT_DIR.
#
# usage: drop.sh RLX_STUDIO DRAG_SOURCE ARTIFACT_DIR MODEL.gguf
set -u

app=$1
source_app=$2
art=$3
model=$4

ui_log=drop
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_DROP_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import python3
    . "$(dirname "$0")/../need-data.sh"
    rlx_need_data "$model"
    ui_enter_xvfb RLX_DROP_IN_XVFB "$@"
fi

ui_env "$art/drop"

settings() {
    printf '[org/rlx/Studio]\ntemperature=0.0\nmax-tokens=40\nwindow-width=%s\nwindow-height=%s\n' \
        "$1" "$2" >"$keyfile"
}

start() {
    name=$1
    "$app" >"$art/drop-$name.log" 2>&1 &
    pid=$!
    wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window ($name)"
}

# drag FILE X Y: drag FILE from a drag-source window onto the screen point
# X,Y (inside the studio's window) and drop it there.
drag() {
    ui_drag "$art/drop-source-$name-$(basename "$1").log" "$@"
}

# 1. not a GGUF (light, 1280x800) --------------------------------------------
settings 1280 760
printf 'Shopping list: milk, eggs.\n' >"$work/notes.txt"
start light
drag "$work/notes.txt" 500 400
wait_log "Cannot load the model: notes.txt: not a GGUF file"
kill -0 "$pid" 2>/dev/null || fail "rlx-studio died on a dropped text file"
xdotool search --onlyvisible --name 'RLX Studio$' >/dev/null || fail "the window is gone"
shot light-not-gguf
quit
check_log light

# 2. the model (dark, 800x600) -------------------------------------------------
settings 800 600
ADW_DEBUG_COLOR_SCHEME=prefer-dark
export ADW_DEBUG_COLOR_SCHEME
start dark
unset ADW_DEBUG_COLOR_SCHEME
drag "$model" 400 300
wait_log "is ready"
grep -q "is ready" "$art/drop-dark.log" || fail "the dropped model did not load"
xdotool windowfocus --sync "$wid" type --delay 15 "Once upon a time"
xdotool key --clearmodifiers Return
expected=", there was a little girl named Lily. She loved to play outside in the park."
check_reply() {
    f=$(newest)
    [ -n "$f" ] || return 1
    r=$(field "$f" reply)
    case "$r" in
    "$expected"*) return 0 ;;
    esac
    return 1
}
wait_for "no reply '$expected' from the dropped model" check_reply
echo "reply from the dropped model: $(field "$(newest)" reply)"
shot dark-800x600-model
quit
check_log dark

echo "PASS"
