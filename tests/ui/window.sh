#!/bin/sh
# The window as a person sees it, under Xvfb with xdotool and the real tiny
# llama (stories260K), looked at in screenshots and measured in them:
#
#   1. Toasts: a file that is not a model (an error toast), then at once the
#      model from a second launch ("… is ready"): the toast on screen is the
#      short "ready" one, above the message entry (never over it); 7 s later
#      no toast is left (the old error does not come back).
#   2. The title: a copy of stories260K named "Tales" (general.name) gives a
#      window titled "Tales — RLX Studio"; one without general.name is named
#      after its file. The empty conversation says what to do.
#   3. Narrow (360 px): the window stays 360 px wide, 380 with its frame (nothing forces it
#      wider), the sidebar folds away.
#
# usage: window.sh RLX_STUDIO ARTIFACT_DIR MODEL.gguf
set -u

app=$1
art=$2
model=$3

ui_log=window
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_WINDOW_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import convert python3
    . "$(dirname "$0")/../need-data.sh"
    rlx_need_data "$model"
    ui_enter_xvfb RLX_WINDOW_IN_XVFB "$@"
fi

ui_env "$art/window"
# the page logs its layout once a model is ready (sidebar, model name, empty page)
G_MESSAGES_DEBUG=RlxStudio
export G_MESSAGES_DEBUG

settings() {
    printf '[org/rlx/Studio]\nwindow-width=%s\nwindow-height=%s\n' "$1" "$2" >"$keyfile"
}

start() {
    name=$1
    shift
    "$app" "$@" >"$art/window-$name.log" 2>&1 &
    pid=$!
    wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window after 30 s ($name)"
    xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
    xdotool mousemove 1279 799
}

# pill PNG: "X0 Y0 X1 Y1" of the toast (the dark rounded box near the bottom
# of the window: rows with a long run of dark grey), or nothing.
pill() {
    convert "$1" -depth 8 ppm:- | python3 -c '
import sys
d = sys.stdin.buffer.read()
parts = d.split(b"\n", 3)
w, h = map(int, parts[1].split())
px = parts[3]
rows = []
for y in range(h // 2, h):
    run = best = 0
    x0 = bx0 = bx1 = 0
    for x in range(w):
        i = 3 * (y * w + x)
        r, g, b = px[i], px[i + 1], px[i + 2]
        if 30 < max(r, g, b) < 100 and max(r, g, b) - min(r, g, b) < 10:
            if run == 0:
                x0 = x
            run += 1
            if run > best:
                best, bx0, bx1 = run, x0, x
        else:
            run = 0
    if best > 60:
        rows.append((y, bx0, bx1))
if rows:
    print(min(r[1] for r in rows), rows[0][0], max(r[2] for r in rows), rows[-1][0])
'
}

# 1. toasts ------------------------------------------------------------------
settings 1280 760
printf 'This is not a model.\n' >"$work/notes.gguf"
start toasts --model "$work/notes.gguf"
wait_log "Cannot load the model"
timeout 20 "$app" --model "$model" >>"$art/window-second.log" 2>&1 || fail "a second launch with --model failed"
wait_log "is ready"
sleep 0.8
shot toast-ready
box=$(pill "$art/window-toast-ready.png")
echo "toast at: $box"
[ -n "$box" ] || fail "no toast on screen after '… is ready'"
# shellcheck disable=SC2086
set -- $box
width=$(($3 - $1))
[ "$width" -lt 400 ] || fail "the toast on screen is $width px wide: the old error, not '… is ready'"
# The message entry is the last 60 px of the window's content.
eval "$(xdotool getwindowgeometry --shell "$wid")"
[ "$4" -lt $((HEIGHT - 60)) ] || fail "the toast (bottom at $4) covers the message entry (window $HEIGHT px high)"
sleep 7
shot toast-gone
box=$(pill "$art/window-toast-gone.png")
[ -z "$box" ] || fail "a toast is still on screen 7 s later (at $box): the old error came back"
quit
check_log toasts

# 2. the title, and what an empty conversation says --------------------------------
python3 - "$model" "$work/tales.gguf" "$work/nameless.gguf" <<'EOF2'
import struct, sys
d = open(sys.argv[1], "rb").read()
key = b"general.name"
i = d.index(key + struct.pack("<I", 8) + struct.pack("<Q", 5) + b"llama")
j = i + len(key) + 4 + 8
open(sys.argv[2], "wb").write(d[:j] + b"Tales" + d[j + 5:])
open(sys.argv[3], "wb").write(d[:i] + b"general.nome" + d[i + len(key):])
EOF2
settings 1280 760
start title --model "$work/tales.gguf"
wait_log "is ready"
sleep 0.5
xdotool search --onlyvisible --name '^Tales — RLX Studio$' >/dev/null ||
    fail "the window is not titled 'Tales — RLX Studio': $(xdotool getwindowname "$wid")"
wait_log "layout: "
grep -q 'empty page says "[0-9]* tokens of context, on the CPU. Type a message below and press Enter."' \
    "$art/$ui_log-title.log" || fail "the empty conversation does not say what to do: $(grep 'layout: ' "$art/$ui_log-title.log")"
sleep 6 # the toast goes
shot empty-conversation
timeout 20 "$app" --model "$work/nameless.gguf" >>"$art/window-second.log" 2>&1 || fail "a second launch failed"
wait_log "nameless is ready"
sleep 0.5
xdotool search --onlyvisible --name '^nameless — RLX Studio$' >/dev/null ||
    fail "a model without general.name is not named after its file: $(xdotool getwindowname "$wid")"
quit
check_log title

# 3. narrow ----------------------------------------------------------------------
settings 360 640
start narrow --model "$model"
wait_log "is ready"
sleep 1
eval "$(xdotool getwindowgeometry --shell "$wid")"
echo "narrow window: ${WIDTH}x$HEIGHT"
shot narrow
[ "$WIDTH" -le 380 ] || fail "the window is $WIDTH px wide: something forces it past 360"
wait_log "layout: "
line=$(grep 'layout: ' "$art/$ui_log-narrow.log" | tail -1)
echo "$line"
case $line in *"sidebar folded away, model name whole"*) ;;
*) fail "at 360 px the sidebar must fold away and the model's name show whole: $line" ;; esac
quit
check_log narrow

echo "PASS"
