#!/bin/sh
# A reply on the Chat page as a person meets it, under Xvfb with xdotool and
# the real tiny llama (stories260K), checked against what the app saves and
# logs and looked at in screenshots:
#
#   1. Thinking: a copy of stories260K whose token "▁little" reads
#      "</think>\n", so that its greedy reply to "Once upon a time" is
#      ", there was a</think>\n girl named Lily…" (the reasoning of a model
#      whose template opens <think> in the prompt). The page shows a
#      collapsed "Thinking" section with the 5 tokens up to the tag (",",
#      " there", " was", " a", the tag: rlx tokenize's pieces), the answer
#      below it; the saved reply is the model's text, tag and all.
#   2. A saved reply that starts with <think>…</think> and one with a code
#      block of long lines, opened from the sidebar: the reasoning folded,
#      the code drawn (not an empty box).
#   3. A run that fails (a conversation longer than its 32-token context):
#      a card where the reply would be with a heading, a sentence and what
#      to do; no empty reply saved; its Retry button (clicked) runs again.
#   4. Regenerate clicked with the mouse, then Escape: the reply stops
#      (Escape works wherever the focus went). Focus on the header bar's
#      device menu: Ctrl+N starts a conversation, Ctrl+F reaches the search.
#
# usage: reply.sh RLX_STUDIO ARTIFACT_DIR MODEL.gguf
set -u

app=$1
art=$2
model=$3

ui_log=reply
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_REPLY_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import convert python3
    . "$(dirname "$0")/../need-data.sh"
    rlx_need_data "$model"
    ui_enter_xvfb RLX_REPLY_IN_XVFB "$@"
fi

ui_env "$art/reply"
mkdir -p "$convs"

extra=
settings() {
    printf '[org/rlx/Studio]\ntemperature=0.0\nmax-tokens=%s\nwindow-width=1280\nwindow-height=760\n%s\n' \
        "$1" "$extra" >"$keyfile"
}

start() {
    name=$1
    shift
    G_MESSAGES_DEBUG=RlxStudio "$app" "$@" >"$art/reply-$name.log" 2>&1 &
    pid=$!
    wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window after 30 s ($name)"
    xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
    xdotool mousemove 1279 799 # no tooltip over what is looked at
}

count() {
    ls "$convs"/*.json 2>/dev/null | wc -l
}

say() {
    xdotool windowfocus --sync "$wid" type --delay 15 "$1"
    xdotool key --clearmodifiers Return ${2:-}
}

# wait_count N: up to 30 s for N lines matching $2 in the log.
wait_count() {
    i=0
    while [ "$(grep -c -e "$2" "$art/reply-$name.log")" -lt "$1" ]; do
        [ $i -lt 150 ] || fail "fewer than $1 '$2' in the log of run $name after 30 s"
        kill -0 "$pid" 2>/dev/null || fail "rlx-studio died waiting for '$2'"
        sleep 0.2
        i=$((i + 1))
    done
}

# find_box PNG X0 Y0 X1 Y1 R G B: the centre "X Y" of the pixels of colour
# R G B (within 24) inside the rectangle, or nothing.
find_box() {
    convert "$1" -depth 8 ppm:- | python3 -c '
import sys
x0, y0, x1, y1, r, g, b = map(int, sys.argv[1:])
d = sys.stdin.buffer.read()
# P6\nW H\n255\n
parts = d.split(b"\n", 3)
w, h = map(int, parts[1].split())
px = parts[3]
xs, ys = [], []
for y in range(y0, min(y1, h)):
    row = y * w * 3
    for x in range(x0, min(x1, w)):
        i = row + 3 * x
        if abs(px[i] - r) < 24 and abs(px[i + 1] - g) < 24 and abs(px[i + 2] - b) < 24:
            xs.append(x)
            ys.append(y)
if len(xs) > 50:
    print((min(xs) + max(xs)) // 2, (min(ys) + max(ys)) // 2)
' "$2" "$3" "$4" "$5" "$6" "$7" "$8"
}

# 1. thinking ---------------------------------------------------------------
python3 - "$model" "$work/thinking.gguf" <<'EOF'
import struct, sys
d = open(sys.argv[1], "rb").read()
old = struct.pack("<Q", 9) + "\u2581little".encode()
new = struct.pack("<Q", 9) + b"</think>\n"
assert d.count(old) == 1, "stories260K has one token '\u2581little'"
open(sys.argv[2], "wb").write(d.replace(old, new))
EOF
settings 40
start thinking --model "$work/thinking.gguf"
wait_log "is ready"
say "Once upon a time"
wait_log "stream finished"
wait_log "thinking shown: Thinking · 5 tokens · "
sleep 1 # the last save
reply=$(field "$(ls -t "$convs"/*.json | head -n 1)" reply)
case "$reply" in
", there was a</think>
 girl named Lily."*) echo "saved as written: $(printf '%s' "$reply" | head -c 60)" ;;
*) fail "the saved reply is not the model's text: '$reply'" ;;
esac
shot thinking
quit
check_log thinking

# 2. saved replies opened from the sidebar ------------------------------------
python3 - "$convs" <<'EOF'
import json, sys, time
now = int(time.time())
code = "```python\n" + "".join(
    "values_%02d = [%s]  # a line far longer than the message column is wide\n"
    % (i, ", ".join(str(i * 100 + k) for k in range(30))) for i in range(12)) + "```\n"
for cid, title, reply, extra, t in [
    ("saved-thinking", "Saved thinking",
     "<think>\nThe person asks for 2 + 2. That is 4.\n</think>\n\nThe answer is **4**.",
     {"thinking_tokens": 21, "thinking_ms": 1500}, now - 100),
    ("long-code", "Long code", "Here is the table:\n\n" + code + "\nThat is all.", {}, now - 50),
]:
    a = {"role": "assistant", "content": reply}
    a.update(extra)
    json.dump({"version": 1, "id": cid, "title": title, "system": "", "created": t,
               "updated": t, "messages": [{"role": "user", "content": title}, a]},
              open("%s/%s.json" % (sys.argv[1], cid), "w"))
EOF
settings 40
start saved
# the newest, Long code, opens first; open the other from the sidebar and back
xdotool key --clearmodifiers ctrl+f
xdotool type --delay 15 "Saved thinking"
xdotool key --clearmodifiers Return
sleep 1
xdotool mousemove 1279 799
shot saved-thinking
wait_log "thinking shown: Thinking · 21 tokens · 1.5 s"
xdotool key --clearmodifiers ctrl+f ctrl+a
xdotool type --delay 15 "Long code"
xdotool key --clearmodifiers Return
sleep 1
xdotool mousemove 1279 799
shot long-code
# The code block's text is drawn: dark glyph pixels inside its grey box.
ink=$(convert "$art/reply-long-code.png" -crop 700x200+380+300 -threshold 40% -negate -format '%[fx:mean*w*h]' info:)
echo "dark pixels in the code block: $ink"
[ "${ink%.*}" -gt 500 ] || fail "the code block is empty after opening it from the sidebar"
# Everything in view is drawn (the page skips drawing what lies outside the
# view): the text of the first message and the answer's first paragraph,
# above the code block, have ink too.
ink=$(convert "$art/reply-long-code.png" -crop 500x140+370+110 -threshold 40% -negate -format '%[fx:mean*w*h]' info:)
echo "dark pixels above the code block: $ink"
[ "${ink%.*}" -gt 300 ] || fail "the messages above the code block are not drawn"
quit
check_log saved

# 3. a run that fails: the card, and Retry ---------------------------------------
extra='context-length=32'
settings 1500
start failure --model "$model"
wait_log "is ready"
xdotool key --clearmodifiers ctrl+n
sleep 0.3
say "Once upon a time" # fills the 32 tokens
wait_log "The context is full. Start"
say "The dog"          # does not fit at all
wait_count 1 "reply failed: The conversation is too long"
sleep 1
file=$(ls -t "$convs"/*.json | head -n 1)
[ "$(field "$file" nmsg)" = 3 ] || fail "after the failure the file holds $(field "$file" nmsg) messages, not 3"
shot failure
# Retry: the blue button inside the card (above the message entry).
at=$(find_box "$art/reply-failure.png" 250 100 1180 680 53 132 228)
[ -n "$at" ] || fail "no Retry button on the failure card"
# shellcheck disable=SC2086
xdotool mousemove $at click 1
wait_count 2 "reply failed: The conversation is too long"
sleep 1
[ "$(field "$file" nmsg)" = 3 ] || fail "Retry left $(field "$file" nmsg) messages, not 3"
shot failure-retried
quit
check_log failure

# 4. Escape after a click on Regenerate; keys with the focus in the header bar ------
extra=
settings 1500
start keys --model "$model"
wait_log "is ready"
xdotool key --clearmodifiers ctrl+n
sleep 0.3
say "Once upon a time"
wait_log "stream finished"
sleep 1
file=$(ls -t "$convs"/*.json | head -n 1)
full=$(field "$file" reply | wc -c)
# Regenerate is left of the Send button at the bottom right.
eval "$(xdotool getwindowgeometry --shell "$wid")"
xdotool mousemove $((WIDTH - 75)) $((HEIGHT - 34)) click 1 key Escape
wait_count 2 "stream finished"
sleep 1
now=$(field "$file" reply | wc -c)
echo "regenerated reply: $now characters (the whole one: $full)"
[ "$now" -lt "$full" ] || fail "Escape after a click on Regenerate did not stop the reply ($now of $full)"
shot keys-stopped
# The device menu in the header bar: open it, close it, the focus stays there.
xdotool mousemove 60 28 click 1
sleep 0.5
xdotool key Escape
sleep 0.3
before=$(count)
xdotool key --clearmodifiers ctrl+n
sleep 0.3
say "Hello"
i=0
while [ "$(count)" -le "$before" ]; do
    [ $i -lt 50 ] || fail "Ctrl+N with the focus on the device menu made no conversation"
    sleep 0.2
    i=$((i + 1))
done
xdotool mousemove 60 28 click 1
sleep 0.5
xdotool key Escape
sleep 0.3
xdotool key --clearmodifiers ctrl+f
xdotool type --delay 15 "zzz"
sleep 0.5
xdotool mousemove 1279 799
shot keys-search
# In the search, Enter with no match does nothing; in the message entry it
# would have sent "zzz".
xdotool key Return
sleep 1
if grep -l zzz "$convs"/*.json; then
    fail "Ctrl+F with the focus on the device menu did not reach the search: zzz was sent"
fi
quit
check_log keys

echo "PASS"
