#!/bin/sh
# The Segment page under Xvfb, driven with xdotool on the real app and a real
# (small, random-weight) Segment Anything model written by write-sam-model
# (tests/sam-writer.h: the PyTorch reference's weights). Random weights give
# meaningless masks, so this checks the path, not the masks' quality: the
# page's debug log (G_MESSAGES_DEBUG=RlxStudio) says what it shows.
#
#   1. The sam-model setting names the model; `rlx-studio PICTURE` opens the
#      picture on the Segment page, which encodes it once ("encoded").
#   2. A click on the picture: three proposals and a mask drawn over it;
#      Tab shows the next proposal.
#   3. A right-click beside it (a "not this" point): one mask for the two
#      points, decoded with the shown mask's logits as the mask prompt (SAM's
#      refinement); Ctrl+Z takes the point back and shows the first click's
#      three proposals as they were (no decode); Ctrl+Y puts the point and
#      its refined mask back.
#   4. Ctrl+S through GTK's file chooser: the mask PNG, the picture's size.
#   5. A text file named .png, given to the running app: "Cannot open the
#      picture" and the reader's sentence (the file's name, not its path);
#      the page keeps the picture, and a third point still segments it.
#   6. Ctrl+E segments everything: the page reports the masks it kept.
# A screenshot after each goes to ARTIFACT_DIR.
#
# usage: segment.sh RLX_STUDIO ARTIFACT_DIR WRITER
set -u

app=$1
art=$2
writer=$3

ui_log=segment
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_SEGMENT_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import python3
    ui_enter_xvfb RLX_SEGMENT_IN_XVFB "$@"
fi

ui_env "$art/segment"
GTK_USE_PORTAL=0
G_MESSAGES_DEBUG=RlxStudio
export GTK_USE_PORTAL G_MESSAGES_DEBUG

model=$work/sam-test.safetensors
"$writer" "$model" || fail "cannot write the random SAM model"
pic=$work/garden.png
# A picture of our own: a sky, a lawn and a red disc, 640x480.
python3 - "$pic" <<'EOF' || fail "cannot write the picture"
import struct, sys, zlib
w, h = 640, 480
rows = []
for y in range(h):
    row = bytearray([0])
    for x in range(w):
        if (x - 320) ** 2 + (y - 260) ** 2 < 90 ** 2:
            px = (200, 40, 40)
        elif y < 200:
            px = (120, 170, 230)
        else:
            px = (60, 150 + (x * 7 + y * 3) % 20, 60)
        row += bytes(px)
    rows.append(bytes(row))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(b"".join(rows), 6)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
EOF
# a 4x4 grid for Segment Everything (16 clicks, not 256: the ASan build is slow)
printf '[org/rlx/Studio]\nwindow-width=1280\nwindow-height=800\ndevice=%s\nsam-model=%s\nsam-points-per-side=4\n' \
    "'cpu'" "'$model'" >"$keyfile"

keys() {
    xdotool key --clearmodifiers "$@"
}

# count PATTERN: how many lines of the run's log match
count() {
    grep -c -e "$1" "$art/$ui_log-$name.log"
}

# wait_count PATTERN N: up to 30 s for the N-th line matching PATTERN
wait_count() {
    wait_for "no $2 lines '$1' in the log" sh -c "[ \$(grep -c -e '$1' '$art/$ui_log-$name.log') -ge $2 ]"
}

name=main
"$app" "$pic" >"$art/segment-$name.log" 2>&1 &
pid=$!
wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window"
xdotool windowfocus --sync "$wid" || fail "cannot focus the window"

# 1. encoded once
wait_log "segment encoded in"
sleep 0.5
shot encoded

# 2. a click on the disc, in the middle of the page's picture
eval "$(xdotool getwindowgeometry --shell "$wid")"
cx=$((WIDTH / 2))
cy=$((HEIGHT / 2 + 60))
xdotool mousemove --window "$wid" --sync "$cx" "$cy" click 1
wait_log "segment masks: object 0, 3 proposals"
# area_of PATTERN: the area in the last masks line matching PATTERN
area_of() {
    grep -e "$1" "$art/$ui_log-$name.log" | tail -1 | sed 's/.*area \([0-9]*\),.*/\1/'
}
sleep 0.5
shot click
keys Tab
wait_log "(the next proposal)"
a3=$(area_of "segment masks: object 0, 3 proposals")
sleep 0.5
shot next-proposal

# 3. a "not this" point beside it, then undo and redo
xdotool mousemove --window "$wid" --sync "$((cx + 150))" "$((cy - 100))" click 3
wait_log "segment masks: object 0, 1 proposals"
grep -q "segment prompt [0-9]*: 2 points, the earlier mask's logits" "$art/$ui_log-$name.log" ||
    fail "the second point was not decoded with the first mask's logits"
a1=$(area_of "segment masks: object 0, 1 proposals")
sleep 0.5
shot negative
n3=$(count "segment masks: object 0, 3 proposals")
np=$(count "segment prompt [0-9]*:")
keys ctrl+z
wait_count "segment masks: object 0, 3 proposals" $((n3 + 1))
grep -e "segment masks: object 0, 3 proposals" "$art/$ui_log-$name.log" | tail -1 | grep -q "(as shown before)" ||
    fail "undo did not show the first click's proposals as they were"
[ "$(area_of "segment masks: object 0, 3 proposals")" = "$a3" ] || fail "undo showed another mask"
n1=$(count "segment masks: object 0, 1 proposals")
keys ctrl+y
wait_count "segment masks: object 0, 1 proposals" $((n1 + 1))
[ "$(area_of "segment masks: object 0, 1 proposals")" = "$a1" ] || fail "redo showed another mask"
[ "$(count "segment prompt [0-9]*:")" = "$np" ] || fail "undo or redo decoded again"

# 4. the mask through GTK's save dialog
out=$work/mask.png
keys ctrl+s
dlg=$(wait_window '^Save the Mask$') || fail "no save dialog"
xdotool windowfocus --sync "$dlg"
sleep 0.5
keys ctrl+a
xdotool type --delay 10 "$out"
keys Return
wait_log "segment saved: $out"
python3 - "$out" <<'EOF' || fail "the saved mask is not a 640x480 8-bit gray PNG"
import struct, sys
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n"
w, h, depth, ctype = struct.unpack(">IIBB", d[16:26])
assert (w, h, depth, ctype) == (640, 480, 8, 0), (w, h, depth, ctype)
EOF
sleep 0.5
shot saved

# 5. not a picture
bad=$work/notes.png
echo "these are notes, not a picture" >"$bad"
timeout 20 "$app" "$bad" >>"$art/segment-second.log" 2>&1 || fail "a second launch failed"
wait_log "segment failed: Cannot open the picture: notes.png: this is not an image"
sleep 0.8
shot not-a-picture
# the picture before stays, encoded: another point still segments it
n1=$(count "segment masks: object 0, 1 proposals")
xdotool mousemove --window "$wid" --sync "$((cx - 40))" "$cy" click 1
wait_count "segment masks: object 0, 1 proposals" $((n1 + 1))

# 6. segment everything (Ctrl+E): a grid of clicks; random weights keep
# few masks or none (the page then says to click instead), then Escape
keys ctrl+e
wait_for "no end of 'segment everything'" grep -q -e "segment everything: " -e "segment failed: Cannot segment everything" "$art/$ui_log-$name.log"
grep -q "segment everything: [0-9]* masks" "$art/$ui_log-$name.log" ||
    fail "segment everything failed: $(grep 'segment failed' "$art/$ui_log-$name.log")"
sleep 0.8
shot everything
keys Escape

keys ctrl+q
wait "$pid"
check_log main
echo "PASS"
