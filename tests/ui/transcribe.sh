#!/bin/sh
# The Transcribe page under Xvfb, driven with xdotool and real XDND drags
# (drag-source.c) on the real app and a real Whisper model. The app's state
# is read back from what it persists: the transcript JSON files under a
# temporary XDG_DATA_HOME, the settings keyfile, the exports.
#
#   1. Alt+3: the empty page. jfk.wav dropped with no model chosen: a toast
#      says to choose one; the model file dropped next becomes the model (the
#      whisper-model setting) and the waiting recording is transcribed: its
#      segments appear and are saved; the transcript ends "done".
#                                                  (light, 1280x800)
#      A click on a segment's times plays from there (or, with no sound
#      card, a toast says why); Ctrl+R records (or a toast says why).
#   2. Ctrl+E, SRT: GTK's save dialog, a path typed: the export is SRT with
#      every segment. Then a path that cannot be written: an error toast.
#   3. A text file dropped: "Cannot transcribe" with the reader's sentence;
#      no transcript is kept for it. A broken model: "Cannot load the
#      Whisper model" and its sentence.
#   4. A long recording (jfk.wav ten times over); Escape after its first
#      segment: the transcript ends "stopped", its segments kept, fewer than
#      the whole recording would give.
#   5. Another long one, dropped on the Chat page (it goes to the Transcribe
#      page), kill -9 after its first segments; restart: the
#      transcript is there with every segment saved before the kill (shown
#      as unfinished). Ctrl+Q mid-file: a clean exit, the transcript kept as
#      stopped.                                    (dark, 800x600)
# A screenshot after each goes to ARTIFACT_DIR.
#
# The model: $RLX_TEST_WHISPER_MODEL (a whisper.cpp ggml .bin, say a real
# ggml-tiny.bin) if set, else the random-weight whisper-tiny that WRITER
# (write-whisper-model.c) writes from HEADER_SRC (for-tests-ggml-tiny.bin):
# random weights give gibberish, but real segments through the real runner.
#
# usage: transcribe.sh RLX_STUDIO DRAG_SOURCE ARTIFACT_DIR AUDIO.wav WRITER HEADER_SRC
set -u

app=$1
source_app=$2
art=$3
audio=$4
writer=$5
header_src=$6
model=${RLX_TEST_WHISPER_MODEL:-}

ui_log=transcribe
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_TRANSCRIBE_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import python3
    . "$(dirname "$0")/../need-data.sh"
    if [ -n "$model" ]; then
        [ -f "$model" ] || {
            echo "SKIP: RLX_TEST_WHISPER_MODEL=$model is not a file"
            exit 77
        }
        rlx_need_data "$audio"
    else
        rlx_need_data "$audio" "$header_src"
    fi
    ui_enter_xvfb RLX_TRANSCRIBE_IN_XVFB "$@"
fi

ui_env "$art/transcribe"
transcripts=$work/data/rlx-studio/transcripts
mkdir -p "$work/export"
# GTK's own file chooser, not a portal's (none runs under this private bus).
GTK_USE_PORTAL=0
G_MESSAGES_DEBUG=RlxStudio
export GTK_USE_PORTAL G_MESSAGES_DEBUG
# Sound goes to ALSA's null output, here as on a machine without a sound
# card (where PortAudio finds no output otherwise). Where PortAudio offers
# the null device as an input too, it gives sound faster than real time,
# which the page refuses as no microphone (Ctrl+R below).
if [ -f /usr/share/alsa/alsa.conf ]; then
    printf '</usr/share/alsa/alsa.conf>\npcm.!default {\n    type null\n}\n' >"$work/asound.conf"
    ALSA_CONFIG_PATH=$work/asound.conf
    export ALSA_CONFIG_PATH
fi

# The model under a name of its own, so that its drop reads as a model.
if [ -n "$model" ]; then
    ln -s "$(realpath "$model")" "$work/ggml-test-model.bin" || fail "cannot link $model"
else
    "$writer" "$header_src" "$work/ggml-test-model.bin" || fail "cannot write the random model"
fi
model=$work/ggml-test-model.bin

settings() {
    printf '[org/rlx/Studio]\nwindow-width=%s\nwindow-height=%s\ndevice=%s\n%s\n' "$1" "$2" \
        "'cpu'" "${3:-}" >"$keyfile"
}

visible() {
    xdotool search --onlyvisible --name "$1" 2>/dev/null | head -n 1
}

keys() {
    xdotool key --clearmodifiers "$@"
}

# start NAME [PAGE [ASAN_OPTIONS]]: run rlx-studio, wait for its window, set
# $wid; Alt+3 (the Transcribe page) unless PAGE is "chat".
start() {
    name=$1
    ASAN_OPTIONS=${3:-${ASAN_OPTIONS:-}} "$app" >"$art/transcribe-$name.log" 2>&1 &
    pid=$!
    wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window ($name)"
    xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
    [ "${2:-}" = chat ] || keys alt+3
}

# drag FILE X Y: a real XDND drag of FILE from drag-source onto X,Y (ui_drag in lib.sh).
drag() {
    ui_drag "$art/transcribe-source-$name-$(basename "$1").log" "$@"
    # Off the window again: no tooltip over what the screenshots show.
    xdotool mousemove 1279 799
    xdotool windowfocus --sync "$wid"
}

# tfield FILE WHAT: state, n (segments), title, srt (every segment as SRT
# would time it, one "t0 --> t1 text" a line).
tfield() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    t = json.load(open(sys.argv[1], encoding="utf-8"))
except Exception:
    sys.exit(0)
w = sys.argv[2]
s = t.get("segments", [])
if w == "state":
    sys.stdout.write(t.get("state", ""))
elif w == "n":
    print(len(s))
elif w == "title":
    sys.stdout.write(t.get("title", ""))
else:
    for x in s:
        print(x["start_ms"], x["end_ms"], x["text"].strip())
EOF
}

newest() {
    ls -t "$transcripts"/*.json 2>/dev/null | head -n 1
}

count() {
    ls "$transcripts"/*.json 2>/dev/null | wc -l
}

# more_than N: more than N transcript files.
more_than() {
    [ "$(count)" -gt "$1" ]
}

# segments_at_least FILE N: FILE holds N segments or more.
segments_at_least() {
    [ "$(tfield "$1" n)" -ge "$2" ] 2>/dev/null
}

# 1. drop a recording, then the model (light, 1280x800) ------------------------
# This run opens GTK's file chooser (the exports), which leaks at exit in GTK
# 4.8 itself (see conversations.sh): it alone is not leak-checked under ASan
# (memory errors still are); the runs of step 5 are.
settings 1280 760
start light transcribe "${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
wait_log "transcribe page shown"
sleep 1
shot light-empty
drag "$audio" 640 420
wait_log "Choose a Whisper model first"
[ "$(count)" = 0 ] || fail "a transcript was kept without a model"
drag "$model" 640 420
wait_log "transcribing with whisper"
wait_for "no transcript of $(basename "$audio") saved" more_than 0
wait_log "transcription done"
file=$(newest)
[ "$(tfield "$file" state)" = done ] || fail "state $(tfield "$file" state), expected done"
n=$(tfield "$file" n)
[ "$n" -ge 1 ] || fail "no segments in $file"
[ "$(tfield "$file" title)" = "$(basename "$audio")" ] || fail "title $(tfield "$file" title)"
grep -q "^whisper-model='$model'" "$keyfile" || fail "the model was not remembered: $(cat "$keyfile")"
echo "$(basename "$audio"): $n segments"
tfield "$file" srt | head -n 5
sleep 0.5
shot light-done

# A click on the first segment's times plays the recording from there (on
# ALSA's null output, see below), its row highlighted; without ALSA's
# configuration a toast says why it cannot.
played() {
    grep -q -e "playing segment 0" -e "Cannot play: " "$art/transcribe-$name.log"
}
xdotool mousemove --sync 440 133 click 1
wait_for "a click on the first segment neither played nor said why" played
grep -e "playing from" -e "playing segment" -e "Cannot play: " "$art/transcribe-light.log"
xdotool mousemove 1279 799
keys Escape # stops the playback, if any

# Ctrl+R records from the microphone, or (none, as on CI) says why; so it
# does, after a moment, where the default input is no microphone but gives
# sound faster than real time (ALSA's null device).
recorded() {
    grep -q -e "RlxStudio-DEBUG.*: recording$" -e "Cannot record: " "$art/transcribe-$name.log"
}
keys ctrl+r
wait_for "Ctrl+R neither recorded nor said why" recorded
grep -q "Cannot record: " "$art/transcribe-light.log" || sleep 2
if grep -q "Cannot record: " "$art/transcribe-light.log"; then
    grep "Cannot record: " "$art/transcribe-light.log" | tail -n 1
    sleep 0.5 # the toast slides in
    shot light-no-microphone
    [ -z "$(ls "$work/data/rlx-studio/recordings" 2>/dev/null)" ] ||
        fail "a recording was kept from no microphone"
else
    shot light-recording
    before=$(count)
    keys Escape # stop and transcribe
    wait_log "recording saved: "
    wait_for "the recording was not transcribed" more_than "$before"
    # the first "done" was jfk.wav's
    two_done() {
        [ "$(grep -c "transcription done" "$art/transcribe-light.log")" -ge 2 ]
    }
    wait_for "the recording's transcription did not end" two_done
    # The recording is the newest transcript: it ends "done". Its file is
    # what export_srt below exports (jfk.wav's checks then read it too).
    file=$(newest)
    [ "$(tfield "$file" state)" = done ] || fail "the recording's transcript: $(tfield "$file" state)"
fi

# 2. export SRT, then to a path that cannot be written -------------------------
export_srt() {
    keys ctrl+e
    sleep 1.5 # the menu opens (slower beside a long transcript)
    keys Down Return # Text, SRT, ...: the second
    dlg=$(wait_window '^Export as SRT$') || fail "Ctrl+E, SRT opened no 'Export as SRT' dialog"
    xdotool windowfocus --sync "$dlg" || fail "cannot focus the export dialog"
    keys ctrl+a
    xdotool type --delay 20 "$1"
    keys Return
    i=0
    while [ -n "$(visible '^Export as SRT$')" ]; do
        [ $i -lt 150 ] || fail "the export dialog is still open"
        sleep 0.2
        i=$((i + 1))
    done
    xdotool windowfocus --sync "$wid"
}
srt=$work/export/jfk.srt
export_srt "$srt"
wait_for "no $srt" test -s "$srt"
python3 - "$srt" "$file" <<'EOF' || fail "the SRT export is wrong"
import json, re, sys
srt = open(sys.argv[1], encoding="utf-8").read()
t = json.load(open(sys.argv[2], encoding="utf-8"))
blocks = [b for b in srt.strip().split("\n\n") if b.strip()]
if len(blocks) != len(t["segments"]):
    print(f"{len(blocks)} SRT blocks for {len(t['segments'])} segments:\n{srt}")
    sys.exit(1)
def ms(h, m, s, f):
    return ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + int(f)
for i, (b, s) in enumerate(zip(blocks, t["segments"])):
    lines = b.split("\n")
    m = re.fullmatch(r"(\d+):(\d\d):(\d\d),(\d\d\d) --> (\d+):(\d\d):(\d\d),(\d\d\d)", lines[1])
    if lines[0] != str(i + 1) or not m:
        print("bad block:", b)
        sys.exit(1)
    if ms(*m.groups()[:4]) != s["start_ms"] or ms(*m.groups()[4:]) != s["end_ms"]:
        print("times differ:", b, s)
        sys.exit(1)
    if " ".join(lines[2:]).strip() != s["text"].strip():
        print("text differs:", b, s)
        sys.exit(1)
print(f"SRT: {len(blocks)} blocks match the transcript")
EOF
# /proc takes no new files, even from root (GTK's dialog itself refuses a
# folder that does not exist, and root writes anywhere else).
export_srt /proc/jfk.srt
wait_log "Cannot export: "
grep "Cannot export: " "$art/transcribe-light.log" | tail -n 1
sleep 0.5 # the toast slides in
shot light-export-error

# 3. not a recording ----------------------------------------------------------------
before=$(count)
printf 'Shopping list: milk, eggs.\n' >"$work/notes.txt"
drag "$work/notes.txt" 640 420
wait_log "Cannot transcribe notes.txt: "
[ "$(count)" = "$before" ] || fail "a transcript was kept for a text file"
grep "Cannot transcribe notes.txt: " "$art/transcribe-light.log" | tail -n 1
sleep 0.5 # the toast slides in
shot light-not-audio

# A model that is not one: its load fails with a toast, nothing is kept.
head -c 100000 "$audio" >"$work/ggml-broken.bin"
drag "$work/ggml-broken.bin" 640 420
wait_log "Model: ggml-broken.bin"
drag "$audio" 640 420
wait_log "Cannot load the Whisper model: "
[ "$(count)" = "$before" ] || fail "a transcript was kept for a model that did not load"
grep "Cannot load the Whisper model: " "$art/transcribe-light.log" | tail -n 1
sleep 0.5 # the toast slides in
shot light-bad-model
drag "$model" 640 420
wait_log "Model: ggml-test-model.bin"

# 4. Stop mid-file --------------------------------------------------------------------
long=$work/long.wav
python3 - "$audio" "$long" <<'EOF' || fail "cannot write $long"
import sys, wave
r = wave.open(sys.argv[1], "rb")
frames = r.readframes(r.getnframes())
w = wave.open(sys.argv[2], "wb")
w.setparams(r.getparams())
for _ in range(10):
    w.writeframes(frames)
w.close()
EOF
drag "$long" 640 420
wait_for "no transcript of long.wav" more_than "$before"
file=$(newest)
wait_for "no segment of long.wav saved" segments_at_least "$file" 1
keys Escape
wait_log "transcription stopped"
n=$(tfield "$file" n)
[ "$(tfield "$file" state)" = stopped ] || fail "state $(tfield "$file" state) after Stop"
[ "$n" -ge 1 ] || fail "the segments before Stop were lost"
last=$(tfield "$file" srt | tail -n 1 | cut -d' ' -f2)
[ "$last" -lt 100000 ] || fail "Stop came after the whole recording ($last ms)"
echo "stopped at $last ms with $n segments"
sleep 0.5
shot light-stopped
quit
check_log light

# 5. kill -9 mid-file, restart (dark, 800x600) ------------------------------------------
settings 800 600 "whisper-model='$model'"
ADW_DEBUG_COLOR_SCHEME=prefer-dark
export ADW_DEBUG_COLOR_SCHEME
start dark chat
before=$(count)
# Dropped on the Chat page: a recording goes to the Transcribe page.
drag "$long" 400 300
wait_log "transcribe page shown"
wait_for "no transcript of long.wav" more_than "$before"
file=$(newest)
wait_for "no segments of long.wav saved" segments_at_least "$file" 2
shot dark-running
kill -9 "$pid"
wait "$pid" 2>/dev/null
saved=$(tfield "$file" srt)
nsaved=$(tfield "$file" n)
# Every segment drawn was saved first: the log's last "saved" count is what
# the file holds.
shown=$(grep "transcript saved: " "$art/transcribe-dark.log" | tail -n 1 | sed 's/.*saved: \([0-9]*\).*/\1/')
[ "$shown" = "$nsaved" ] || fail "the log says $shown segments were saved, the file holds $nsaved"
start dark-restart
unset ADW_DEBUG_COLOR_SCHEME
id=$(basename "$file" .json)
wait_log "showing transcript $id: $nsaved segments, interrupted"
[ "$(tfield "$file" srt)" = "$saved" ] || fail "the restart changed the saved segments"
echo "kill -9: $nsaved segments kept"
sleep 0.5
shot dark-after-kill

# Ctrl+Q mid-file: a clean exit, the transcript kept as stopped.
before=$(count)
drag "$long" 400 300
wait_for "no transcript of long.wav" more_than "$before"
file=$(newest)
wait_for "no segment of long.wav saved" segments_at_least "$file" 1
quit
check_log dark-restart
[ "$(tfield "$file" state)" = stopped ] || fail "state $(tfield "$file" state) after Ctrl+Q"
echo "Ctrl+Q mid-file: $(tfield "$file" n) segments kept"

echo "PASS"
