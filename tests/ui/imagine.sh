#!/bin/sh
# The Imagine page under Xvfb, driven with xdotool on the real app. The
# pipeline is whatever librlx links as models/diffusion/flux2.h: until the
# FLUX.2 pipeline lands, the stand-in flux2-fake.c (0.2 s a step, synthetic
# pictures, previews when a preview decoder is set), with a model folder
# named "*-base" (the fake takes it as a base model: 50 steps, a negative
# prompt), so that a run lasts long enough to be stopped. With the real
# pipeline, $RLX_TEST_FLUX2_MODEL names a FLUX.2 diffusers folder (a base
# model, for the same reason); without it the empty folder cannot be opened:
# the page's error is checked, and the rest is skipped (77). The previews
# use the TAEF2 decoder TAEF2 (../shared/data/vae). The page's debug log
# (G_MESSAGES_DEBUG=RlxStudio) says what it shows.
#
#   1. The imagine-model setting names the model; Alt+4 shows the page, the
#      prompt has the focus: a prompt typed, Ctrl+Enter generates. The width
#      in the settings (500, or 250 on a real model) is rounded to 496 (256)
#      with a note. A real model is set to 24 steps first.
#   2. Previews arrive after each step and differ from step to step; Escape
#      stops mid-run: nothing is added to the gallery.
#   3. Ctrl+Enter again runs to the end: the PNG (with its "parameters" text
#      chunk) and the JSON sidecar are in the gallery folder with the
#      prompt, seed, steps and size.
#   4. (the stand-in only) A prompt the fake fails on: a toast and the error page with Retry;
#      the gallery keeps its picture.
#   5. A narrow window (800 px), the shortcuts window.
#   6. Restarted, the gallery shows the picture again; a click on its
#      thumbnail shows it with its settings; "Use These Settings Again" puts
#      its seed back. A picture dropped on the page (a real XDND drag from
#      DRAG_SOURCE, as in drop.sh) becomes the start picture: the next run
#      is image-to-image, as its JSON and parameters say. The memory popover
#      lists the model's parts. Save As (Ctrl+S) copies the PNG; Delete
#      removes it and its JSON.
# A screenshot after each goes to ARTIFACT_DIR.
#
# usage: imagine.sh RLX_STUDIO DRAG_SOURCE ARTIFACT_DIR TAEF2
set -u

app=$1
source_app=$2
art=$3
taef2=$4

ui_log=imagine
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_IMAGINE_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import python3
    ui_enter_xvfb RLX_IMAGINE_IN_XVFB "$@"
fi

ui_env "$art/imagine"
GTK_USE_PORTAL=0
G_MESSAGES_DEBUG=RlxStudio
export GTK_USE_PORTAL G_MESSAGES_DEBUG

if [ -n "${RLX_TEST_FLUX2_MODEL:-}" ]; then
    model=$RLX_TEST_FLUX2_MODEL
    fake=
else
    model=$work/FLUX.2-klein-base
    mkdir -p "$model/transformer" || fail "cannot make the model folder"
    echo '{"_class_name": "Flux2Pipeline"}' >"$model/model_index.json"
    fake=1
fi
if [ ! -f "$taef2" ]; then
    [ -n "$fake" ] || { echo "SKIP: no TAEF2 decoder at $taef2"; exit 77; }
    taef2=$work/taef2_decoder.safetensors
    echo "the stand-in only checks that it exists" >"$taef2"
fi
gallery=$work/data/rlx-studio/imagine
# the size asked for (a width not a multiple of 16) and the size made; a real
# model (the tiny one of tests/flux2-model-writer.h on 2 cores) gets a smaller
# one: its TAEF2 previews cost about a second a step at 256 x 256, five at
# 496 x 512
if [ -n "$fake" ]; then
    sw=500 sh=512 rw=496 rh=512
else
    sw=250 sh=256 rw=256 rh=256
fi
printf '[org/rlx/Studio]\nwindow-width=1280\nwindow-height=760\ndevice=%s\nimagine-model=%s\nimagine-preview-decoder=%s\nimagine-width=%s\nimagine-height=%s\n' \
    "'cpu'" "'$model'" "'$taef2'" "$sw" "$sh" >"$keyfile"

keys() {
    xdotool key --clearmodifiers "$@"
}

count() {
    grep -c -e "$1" "$art/$ui_log-$name.log"
}

wait_count() {
    wait_for "no $2 lines '$1' in the log" sh -c "[ \$(grep -c -e '$1' '$art/$ui_log-$name.log') -ge $2 ]"
}

drag() {
    ui_drag "$art/imagine-source-$name.log" "$@"
}

pngs() {
    ls "$gallery"/*.png 2>/dev/null | wc -l
}

start() {
    "$app" >"$art/imagine-$name.log" 2>&1 &
    pid=$!
    wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window"
    xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
}

name=main
start
wait_for "the model neither opened nor failed" grep -q -e "imagine model ready: " -e "imagine failed: Cannot open the model" "$art/$ui_log-$name.log"
if ! grep -q "imagine model ready: " "$art/$ui_log-$name.log"; then
    # the real pipeline and no model: the error page, then nothing to run
    keys alt+4
    sleep 0.8
    shot no-model
    quit
    check_log main
    echo "SKIP: the pipeline cannot open $model (set RLX_TEST_FLUX2_MODEL to a FLUX.2 folder)"
    exit 77
fi
ready=$(sed -n 's/.*imagine model ready: \(.*\)$/\1/p' "$art/$ui_log-$name.log" | head -n 1)
variant=${ready%%,*}
steps=$(echo "$ready" | sed -n 's/^[^,]*, \([0-9]*\) steps.*/\1/p')
mname="$(basename "$model") ($variant)"
[ -n "$fake" ] && [ "$ready" != "klein-4b-base, 50 steps, negative 1, previews 1" ] &&
    fail "the stand-in's model is not the base one: $ready"
echo "$ready" | grep -q "previews 1" || fail "no previews: $ready"
keys alt+4
sleep 0.8
shot empty

# a real model runs 24 steps, not the base model's 50, so that a run to the
# end stays short while one stopped after 4 still stops mid-run (with 8, the
# screenshot between the fourth step and Escape let a loaded machine finish
# the last four first): the Steps field typed into, then the prompt clicked
if [ -z "$fake" ]; then
    xdotool mousemove --window "$wid" --sync 201 441 click --repeat 3 1
    xdotool type --delay 15 "24"
    keys Tab
    steps=24
    xdotool mousemove --window "$wid" --sync 150 185 click 1
    sleep 0.3
fi

# 1. a prompt, Ctrl+Enter
xdotool type --delay 15 "a lighthouse at dawn, oil on canvas"
keys ctrl+Return
wait_log "imagine size rounded: ${sw}x$sh to ${rw}x$rh"
wait_log "imagine generate: ${rw}x$rh, $steps steps"

# 2. previews that change, then Escape mid-run
wait_count "imagine progress: step" 4
python3 - "$art/$ui_log-$name.log" <<'EOF' || fail "the previews did not change from step to step"
import re, sys
h = re.findall(r"imagine progress: step \d+ of \d+, [0-9.]+ s, preview \d+x\d+ hash ([0-9a-f]+)",
               open(sys.argv[1]).read())
assert len(h) >= 3 and len(set(h)) == len(h), h
EOF
shot running
keys Escape
wait_log "imagine stopped: step"
grep -q "imagine finished" "$art/$ui_log-$name.log" && fail "a stopped run was finished"
[ "$(pngs)" -eq 0 ] || fail "a stopped run left a picture in the gallery"
sleep 0.5
shot stopped

# 3. to the end
keys ctrl+Return
wait_log "imagine finished: $gallery/"
sleep 0.8
shot finished
[ "$(pngs)" -eq 1 ] || fail "not one picture in the gallery: $(ls "$gallery")"
png=$(ls "$gallery"/*.png)
json=${png%.png}.json
python3 - "$png" "$json" "$steps" "$mname" "$rw" "$rh" <<'EOF' || fail "the PNG or its JSON sidecar is not right"
import json, struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n"
w, h, depth, ctype = struct.unpack(">IIBB", d[16:26])
rw, rh = int(sys.argv[5]), int(sys.argv[6])
assert (w, h, depth, ctype) == (rw, rh, 8, 2), (w, h, depth, ctype)
text = {}
at = 8
while at < len(d):
    n, t = struct.unpack(">I4s", d[at:at + 8])
    if t == b"tEXt":
        k, v = d[at + 8:at + 8 + n].split(b"\0", 1)
        text[k.decode()] = v.decode("latin-1")
    at += 12 + n
p = text.get("parameters", "")
assert p.startswith("a lighthouse at dawn, oil on canvas\n"), p
assert "Steps: %s," % sys.argv[3] in p and "Size: %dx%d" % (rw, rh) in p and "Model: " + sys.argv[4] in p, p
j = json.load(open(sys.argv[2]))
assert j["prompt"] == "a lighthouse at dawn, oil on canvas", j
assert (j["width"], j["height"], j["steps"]) == (rw, rh, int(sys.argv[3])), j
assert "Seed: %d," % j["seed"] in p, (j["seed"], p)
assert j["model"] == sys.argv[4] and j["time"] > 0, j
print("PNG and JSON:", p.replace("\n", " | "))
EOF

# 4. a run that fails (the stand-in fails on a word): a toast and the error
# page; the gallery stays
if [ -n "$fake" ]; then
    keys ctrl+a
    xdotool type --delay 15 "a storm [fake-fail]"
    keys ctrl+Return
    wait_log "imagine failed: Cannot make the picture: the device stopped answering"
    sleep 0.5
    shot failed
    [ "$(pngs)" -eq 1 ] || fail "the failed run changed the gallery"
fi

# 5. narrow, and the shortcuts
xdotool windowsize --sync "$wid" 800 700
sleep 1
shot narrow
keys ctrl+question
sleep 1.5
shot shortcuts
keys Escape
sleep 0.3
xdotool windowsize --sync "$wid" 1280 760
sleep 0.3
quit
check_log main

# 6. the gallery after a restart
name=restart
start
wait_log "imagine gallery: 1 pictures"
keys alt+4
sleep 0.8
eval "$(xdotool getwindowgeometry --shell "$wid")"
# the first thumbnail: right of the form (300 px), above the bottom edge
xdotool mousemove --window "$wid" --sync 360 "$((HEIGHT - 62))" click 1
wait_log "imagine shown: $png"
seed=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["seed"])' "$json")
# "Use These Settings Again", under the picture's details
xdotool mousemove --window "$wid" --sync 430 "$((HEIGHT - 169))" click 1
wait_log "imagine reuse: seed $seed"
xdotool mousemove --window "$wid" --sync 10 10
sleep 0.5
shot gallery

# a picture dropped on the page starts the next one
start_pic=$work/start.png
cp "$png" "$start_pic"
drag "$start_pic" 800 300
wait_log "imagine start picture: start.png"
xdotool mousemove --window "$wid" --sync 150 185 click 1
keys ctrl+Return
wait_log "imagine generate: ${rw}x$rh, $steps steps, seed $seed"
wait_log "imagine finished: $gallery/"
sleep 0.8
shot image-to-image
[ "$(pngs)" -eq 2 ] || fail "not two pictures in the gallery: $(ls "$gallery")"
json2=$(ls -t "$gallery"/*.json | head -n 1)
python3 - "${json2%.json}.png" "$json2" "$seed" <<'EOF' || fail "the image-to-image picture's settings are not right"
import json, sys
d = open(sys.argv[1], "rb").read()
j = json.load(open(sys.argv[2]))
assert j["start"] == "init" and abs(j["strength"] - 0.6) < 1e-6 and j["seed"] == int(sys.argv[3]), j
assert b"Denoising strength: 0.60" in d and b"Seed: " + sys.argv[3].encode() in d
EOF

# Save As (Ctrl+S, GTK's file chooser): the same file, its parameters kept;
# then Delete (the trash icon beside "Use These Settings Again")
png2=${json2%.json}.png
keys ctrl+s
dlg=$(wait_window '^Save the Picture$') || fail "no save dialog"
xdotool windowfocus --sync "$dlg"
sleep 0.5
keys ctrl+a
xdotool type --delay 10 "$work/saved.png"
keys Return
wait_log "imagine saved: $work/saved.png"
cmp -s "$png2" "$work/saved.png" || fail "the saved picture is not the gallery's"
xdotool windowfocus --sync "$wid"
sleep 0.5
xdotool mousemove --window "$wid" --sync 642 "$((HEIGHT - 169))" click 1
wait_log "imagine deleted: $png2"
[ "$(pngs)" -eq 1 ] && [ ! -e "$json2" ] || fail "Delete left $(ls "$gallery")"
sleep 0.5
shot deleted

# the memory popover: the model's parts
if command -v gdbus >/dev/null 2>&1 && [ "${DBUS_SESSION_BUS_ADDRESS#unix:path=/nonexistent}" = "$DBUS_SESSION_BUS_ADDRESS" ]; then
    gdbus call --session --dest org.rlx.Studio --object-path /org/rlx/Studio/window/1 \
        --method org.gtk.Actions.Activate show-memory '[]' '{}' >/dev/null ||
        fail "show-memory over D-Bus"
    sleep 1
    shot memory
    keys Escape
    sleep 0.3
fi
quit
check_log restart
echo "PASS"
