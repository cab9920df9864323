#!/bin/sh
# rlx transcribe with the random-weight whisper-tiny of tests/whisper-writer.h
# (written by write-whisper-model as a ggml F16 file): its text is noise, so
# the checks are about the command: the "[mm:ss.mmm --> mm:ss.mmm] text"
# lines, transcript files that parse (SRT, VTT, JSON, TXT), --offset and
# --duration bounding the times, Ctrl+C (exit 130, the file keeps what was
# printed), live transcription through the capture path (--mic-file), and one
# line on stderr with exit 1 for bad audio, bad models and bad options; and
# large-v3's layout (write-whisper-model ... v3): Cantonese to English, language
# detection over 100 languages.
# Usage: transcribe.sh RLX DATA_DIR WRITE_WHISPER_MODEL
set -u
rlx=$1
data=$2
writer=$3
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$data/whisper/for-tests-ggml-tiny.bin" "$data/audio/jfk.wav" \
    "$data/audio/jfk.mp3" "$data/llm/stories260K.gguf"
fail=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fail=1; }
tmp=${TMPDIR:-/tmp}/rlx-transcribe.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
jfk="$data/audio/jfk.wav"
model="$tmp/tiny-random-f16.bin"
if ! "$writer" "$data/whisper/for-tests-ggml-tiny.bin" "$model"; then
    echo "not ok - write-whisper-model failed"
    exit 1
fi

# run ARGS...: exit code in $rc, stdout in $tmp/out, stderr in $tmp/err
run() {
    "$rlx" transcribe -t 2 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
}

# every stdout line is "[mm:ss.mmm --> mm:ss.mmm] text" (or with hours)
lines_ok() {
    [ -s "$1" ] || return 1
    ! grep -Ev '^\[([0-9]{2}:)?[0-9]{2}:[0-9]{2}\.[0-9]{3} --> ([0-9]{2}:)?[0-9]{2}:[0-9]{2}\.[0-9]{3}\] ' "$1" |
        grep -q .
}

# SRT: numbered cues from 1, "hh:mm:ss,mmm --> hh:mm:ss,mmm", text, blank line
srt_ok() {
    awk 'BEGIN { state = 0; n = 0 }
        state == 0 { if ($0 != n + 1) exit 1; n++; state = 1; next }
        state == 1 { if ($0 !~ /^[0-9][0-9]+:[0-9][0-9]:[0-9][0-9],[0-9][0-9][0-9] --> [0-9][0-9]+:[0-9][0-9]:[0-9][0-9],[0-9][0-9][0-9]$/) exit 1; state = 2; next }
        state == 2 { if ($0 == "") exit 1; state = 3; next }
        state == 3 { if ($0 == "") state = 0; next }
        END { if (n == 0 || state != 0) exit 1 }' "$1"
}

# VTT: the header, then cues with dot times
vtt_ok() {
    [ "$(head -n 1 "$1")" = "WEBVTT" ] &&
        grep -Eq '^[0-9]{2,}:[0-9]{2}:[0-9]{2}\.[0-9]{3} --> [0-9]{2,}:[0-9]{2}:[0-9]{2}\.[0-9]{3}$' "$1" &&
        ! grep -q ',[0-9][0-9][0-9] -->' "$1"
}

# JSON: parses (strict UTF-8), and each segment has the fields; prints the count
json_segments() {
    /usr/bin/python3 - "$1" <<'EOF'
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
segs = d["segments"]
last = 0.0
for s in segs:
    for k in ("start", "end", "text", "tokens", "avg_logprob", "no_speech_prob"):
        assert k in s, k
    assert last <= s["start"] <= s["end"], (last, s["start"], s["end"])
    last = s["end"]
    for t in s["tokens"]:
        assert isinstance(t["id"], int) and 0 <= t["p"] <= 1
print(len(segs))
EOF
}

# the largest end time printed, in ms, and the smallest start
seg_times() {
    sed -n 's/^\[\([0-9:.]*\) --> \([0-9:.]*\)\].*/\1 \2/p' "$1" |
        awk 'function ms(t,   a, n) { n = split(t, a, ":"); return (n == 3 ? a[1] * 3600 + a[2] * 60 + a[3] : a[1] * 60 + a[2]) * 1000 }
             { s = ms($1); e = ms($2); if (NR == 1 || s < lo) lo = s; if (e > hi) hi = e; if (e < s) bad = 1 }
             END { printf "%d %d %d\n", lo, hi, bad }'
}

# --- jfk.wav into all four formats at once ---
run -m "$model" -f "$jfk" --language en -o "$tmp/jfk.srt" -o "$tmp/jfk.vtt" \
    -o "$tmp/jfk.json" -o "$tmp/jfk.txt"
cp "$tmp/out" "$tmp/jfk.out"
if [ $rc -eq 0 ] && lines_ok "$tmp/jfk.out"; then
    ok "jfk.wav: exit 0, $(wc -l <"$tmp/jfk.out") [mm:ss.mmm --> mm:ss.mmm] lines"
else
    bad "jfk.wav: exit $rc: $(head -c 300 "$tmp/out") / $(cat "$tmp/err")"
fi
n=$(wc -l <"$tmp/jfk.out")
srt_ok "$tmp/jfk.srt" && [ "$(grep -c -- ' --> ' "$tmp/jfk.srt")" -eq "$n" ] &&
    ok "jfk.srt: $n numbered cues with comma times" || bad "jfk.srt does not parse: $(head -n 8 "$tmp/jfk.srt")"
vtt_ok "$tmp/jfk.vtt" && [ "$(grep -c -- ' --> ' "$tmp/jfk.vtt")" -eq "$n" ] &&
    ok "jfk.vtt: WEBVTT, $n cues with dot times" || bad "jfk.vtt does not parse: $(head -n 6 "$tmp/jfk.vtt")"
js=$(json_segments "$tmp/jfk.json" 2>&1)
[ "$js" = "$n" ] && ok "jfk.json parses: $n segments with start, end, text, tokens, avg_logprob, no_speech_prob" ||
    bad "jfk.json: $js"
[ -s "$tmp/jfk.txt" ] && [ "$(grep -c . "$tmp/jfk.txt")" -ge 1 ] && ok "jfk.txt has the text" ||
    bad "jfk.txt is empty"
t=$(seg_times "$tmp/jfk.out")
set -- $t
[ "$3" -eq 0 ] && [ "$2" -le 11000 ] && ok "times inside the 11 s of jfk.wav (last end $2 ms)" ||
    bad "times outside jfk.wav: $t"
ls "$tmp" | grep -q '\.tmp' && bad "a temporary file was left: $(ls "$tmp")" || ok "no temporary files left"

# --- jfk.mp3 ---
run -m "$model" -f "$data/audio/jfk.mp3" --language en -o "$tmp/mp3.json"
js=$(json_segments "$tmp/mp3.json" 2>&1)
[ $rc -eq 0 ] && lines_ok "$tmp/out" && [ "$js" = "$(wc -l <"$tmp/out")" ] &&
    ok "jfk.mp3: exit 0, lines and JSON ($js segments)" || bad "jfk.mp3: exit $rc, json: $js, $(cat "$tmp/err")"

# --- WAV files written byte by byte ---
le32() {
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"
}
le16() {
    printf "$(printf '\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)))"
}
# wav OUT RATE CHANNELS DATA_BYTES (16-bit PCM; the data read from stdin)
wav() {
    {
        printf 'RIFF'
        le32 $((36 + $4))
        printf 'WAVEfmt '
        le32 16
        le16 1
        le16 "$3"
        le32 "$2"
        le32 $(($2 * $3 * 2))
        le16 $(($3 * 2))
        le16 16
        printf 'data'
        le32 "$4"
        cat
    } >"$1"
}
wav "$tmp/empty.wav" 16000 1 0 </dev/null
head -c 3200 /dev/zero | wav "$tmp/rate1.wav" 1 1 3200
head -c 12800 /dev/zero | wav "$tmp/ch64.wav" 16000 64 12800
head -c 96000 /dev/zero | wav "$tmp/silence.wav" 16000 1 96000
# jfk.wav's samples ten times over (110 s): its data chunk starts 8 bytes after "data"
off=$(grep -obUa 'data' "$jfk" | head -n 1 | cut -d: -f1)
size=$(($(wc -c <"$jfk") - off - 8))
i=0
: >"$tmp/pcm"
while [ $i -lt 10 ]; do
    tail -c +$((off + 9)) "$jfk" >>"$tmp/pcm"
    i=$((i + 1))
done
wav "$tmp/long.wav" 16000 1 $((size * 10)) <"$tmp/pcm"
rm -f "$tmp/pcm"
echo "just some text, not audio" >"$tmp/text.wav"
# a corrupt MP3: its first 20 kB with the frames after the header garbled
head -c 20000 "$data/audio/jfk.mp3" >"$tmp/bad.mp3"
awk 'BEGIN { srand(7); for (i = 0; i < 8000; i++) printf "%c", 1 + int(rand() * 254) }' |
    dd of="$tmp/bad.mp3" bs=1 seek=1500 conv=notrunc 2>/dev/null
mkdir -p "$tmp/no-config" "$tmp/folder.srt"
echo '{}' >"$tmp/no-config/tokenizer.json"

# --- errors: exit 1, one line on stderr, nothing on stdout ---
while IFS='|' read -r pat args; do
    [ -z "$pat" ] && continue
    # shellcheck disable=SC2086
    eval "set -- $args"
    run "$@"
    line=$(cat "$tmp/err")
    if [ $rc -ne 1 ]; then
        bad "$args: exit $rc, not 1 (stderr: $line)"
    elif [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
        bad "$args: $(wc -l <"$tmp/err") lines on stderr, not 1: $line"
    elif [ -s "$tmp/out" ]; then
        bad "$args: wrote to stdout: $(head -n 2 "$tmp/out")"
    else
        case "$line" in
        $pat) ok "$args: $line" ;;
        *) bad "$args: '$line' does not match '$pat'" ;;
        esac
    fi
done <<EOF
*must end in .txt, .srt, .vtt or .json*|-m "$model" -f "$jfk" -o "$tmp/out.mp3"
*cannot write*no-such-folder*|-m "$model" -f "$jfk" -o "$tmp/no-such-folder/out.srt"
*cannot write*is a folder*|-m "$model" -f "$jfk" -o "$tmp/folder.srt"
*cannot write*Not a directory*|-m "$model" -f "$jfk" -o "$tmp/text.wav/out.srt"
*missing.wav*|-m "$model" -f "$tmp/missing.wav"
*empty.wav*no audio*|-m "$model" -f "$tmp/empty.wav"
*text.wav*not an audio file*|-m "$model" -f "$tmp/text.wav"
*bad.mp3*|-m "$model" -f "$tmp/bad.mp3"
*rate1.wav*1 Hz*|-m "$model" -f "$tmp/rate1.wav"
*ch64.wav*64 channels*|-m "$model" -f "$tmp/ch64.wav"
*no weights*|-m "$data/whisper/for-tests-ggml-tiny.bin" -f "$jfk"
*stories260K.gguf*GGUF*|-m "$data/llm/stories260K.gguf" -f "$jfk"
*no-config*config.json*|-m "$tmp/no-config" -f "$jfk"
*missing.bin*|-m "$tmp/missing.bin" -f "$jfk"
*--language xx*|-m "$model" -f "$jfk" --language xx
*--beam-size*|-m "$model" -f "$jfk" --beam-size 0
*--offset*|-m "$model" -f "$jfk" --offset -1
*--duration*|-m "$model" -f "$jfk" --duration 0
*-f AUDIO or --mic*|-m "$model"
*not both*|-m "$model" -f "$jfk" --mic
*-m MODEL*|-f "$jfk"
*unknown option*|-m "$model" -f "$jfk" --bogus
EOF

# --- pure silence: no crash, exit 0 ---
run -m "$model" -f "$tmp/silence.wav" -o "$tmp/silence.json"
js=$(json_segments "$tmp/silence.json" 2>&1)
[ $rc -eq 0 ] && [ "$js" -ge 0 ] 2>/dev/null && ok "3 s of silence: exit 0 ($js segments)" ||
    bad "silence: exit $rc, json $js, $(cat "$tmp/err")"

# --- --offset and --duration bound the times printed ---
run -m "$model" -f "$jfk" --language en --offset 2 --duration 5
t=$(seg_times "$tmp/out")
set -- $t
[ $rc -eq 0 ] && [ "$1" -ge 2000 ] && [ "$2" -le 7000 ] && [ "$3" -eq 0 ] &&
    ok "--offset 2 --duration 5: times within 2 s .. 7 s ($1 .. $2 ms)" ||
    bad "--offset 2 --duration 5: exit $rc, times $t: $(cat "$tmp/out")"

# --- Ctrl+C mid-file: exit 130, the file has the segments printed ---
"$rlx" transcribe -t 2 -m "$model" -f "$tmp/long.wav" --language en -o "$tmp/long.srt" \
    >"$tmp/long.out" 2>"$tmp/long.err" &
pid=$!
i=0
while [ $i -lt 300 ] && ! [ -s "$tmp/long.out" ] && kill -0 $pid 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
printed=$(wc -l <"$tmp/long.out")
if [ $rc -eq 130 ] && [ "$printed" -ge 1 ] && srt_ok "$tmp/long.srt" &&
    [ "$(grep -c -- ' --> ' "$tmp/long.srt")" -eq "$printed" ]; then
    ok "Ctrl+C: exit 130, long.srt keeps the $printed segments printed"
else
    bad "Ctrl+C: exit $rc, $printed lines printed, long.srt: $(head -n 4 "$tmp/long.srt" 2>&1), stderr: $(cat "$tmp/long.err")"
fi
t=$(seg_times "$tmp/long.out")
set -- $t
[ "$2" -lt 110000 ] && ok "Ctrl+C stopped before the end ($2 ms of 110 s)" ||
    bad "Ctrl+C did not stop early: $t"

# --- live: jfk.wav through the capture path as a microphone ---
run -m "$model" --mic-file "$jfk" --language en -o "$tmp/live.json"
js=$(json_segments "$tmp/live.json" 2>&1)
t=$(seg_times "$tmp/out")
set -- $t
[ $rc -eq 0 ] && lines_ok "$tmp/out" && [ "$js" = "$(wc -l <"$tmp/out")" ] && [ "$3" -eq 0 ] &&
    [ "$2" -le 11000 ] &&
    ok "--mic-file jfk.wav: exit 0, $js settled segments in order, the same in live.json" ||
    bad "--mic-file: exit $rc, json $js, times $t, $(cat "$tmp/err")"

# --- large-v3's layout (write-whisper-model ... v3): 128 mels, 100 languages ---
v3="$tmp/v3-random-f16.bin"
if "$writer" "$data/whisper/for-tests-ggml-tiny.bin" "$v3" v3; then
    run -m "$v3" -f "$jfk" --language yue --translate --no-fallback -o "$tmp/v3.json"
    lang=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["language"])' \
        "$tmp/v3.json" 2>/dev/null)
    [ $rc -eq 0 ] && lines_ok "$tmp/out" && [ "$lang" = yue ] &&
        ok "v3 layout, --language yue --translate: exit 0, language yue in v3.json" ||
        bad "v3 layout, --language yue --translate: exit $rc, language '$lang', $(cat "$tmp/err")"
    run -m "$v3" -f "$jfk" --detect-language
    [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 5 ] &&
        ok "v3 layout, --detect-language: $(head -n 1 "$tmp/out")" ||
        bad "v3 layout, --detect-language: exit $rc, $(cat "$tmp/err")"
    # tiny has 99 languages: Cantonese is not one of them
    run -m "$model" -f "$jfk" --language yue
    [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
        ok "--language yue on tiny: $(cat "$tmp/err")" ||
        bad "--language yue on tiny: exit $rc, $(cat "$tmp/err")"
else
    bad "write-whisper-model v3 failed"
fi

# --- devices: listing never fails; --mic without an input device is one line ---
run --list-devices
[ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && [ -s "$tmp/out" ] && ok "--list-devices: $(head -n 1 "$tmp/out")" ||
    bad "--list-devices: exit $rc, $(cat "$tmp/err")"
if grep -q '^no audio input devices' "$tmp/out"; then
    run -m "$model" --mic
    [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'no audio input device' "$tmp/err" &&
        ok "--mic without an input device: $(cat "$tmp/err")" ||
        bad "--mic without an input device: exit $rc, $(cat "$tmp/err")"
fi
# ALSA's null device as the default, as on a machine without a sound card:
# where PortAudio offers it as an input, it gives sound far faster than
# real time, and --mic stops with a sentence (exit 1) within seconds instead
# of filling the memory; where it does not, --mic finds no input device.
if [ -f /usr/share/alsa/alsa.conf ]; then
    printf '</usr/share/alsa/alsa.conf>\npcm.!default {\n    type null\n}\n' >"$tmp/asound.conf"
    ALSA_CONFIG_PATH=$tmp/asound.conf timeout 60 "$rlx" transcribe -t 2 -m "$model" --mic \
        >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    { [ $rc -eq 1 ] && grep -q -e 'so it is not a microphone' -e 'no audio input device' "$tmp/err"; } &&
        ok "--mic on ALSA's null device: $(grep -e 'not a microphone' -e 'no audio input' "$tmp/err")" ||
        bad "--mic on ALSA's null device: exit $rc, $(tail -n 3 "$tmp/err")"
fi
exit $fail
