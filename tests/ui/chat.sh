#!/bin/sh
# The Chat page under Xvfb, driven with xdotool on the real app and a real
# tiny llama (stories260K). The app's state is read back from what it
# persists: the conversation JSON files under a temporary XDG_DATA_HOME.
#
#   1. --model FILE, type "Once upon a time", Enter: the greedy reply holds
#      the documented continuation.
#   2. Restart: the conversation is still there. A long reply, Escape (Stop)
#      right behind Enter: the saved reply stops growing within a second,
#      far short of its 1500 tokens.
#   3. Ctrl+Q while a reply streams: a clean exit (status 0).
#   4. kill -9 mid-reply, restart: everything shown or saved before the
#      kill is kept.
#   5. --model on a file that is not a GGUF: an error toast, a live window;
#      then a second launch with --model FILE and with FILE: the running
#      instance opens them.
#   6. A memory budget the model does not fit: the toast gives the figures.
#   7. A context the reply fills: the context-full toast.
#   8. An unsupported architecture: named once, without the file's path.
# A screenshot after each (light 1280x800, dark 800x600) goes to ARTIFACT_DIR.
#
# usage: chat.sh RLX_STUDIO ARTIFACT_DIR MODEL.gguf
set -u

app=$1
art=$2
model=$3

ui_log=chat
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_CHAT_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import python3
    . "$(dirname "$0")/../need-data.sh"
    rlx_need_data "$model"
    ui_enter_xvfb RLX_CHAT_IN_XVFB "$@"
fi

ui_env "$art/chat"

# settings MAX_TOKENS: greedy sampling, at most MAX_TOKENS per reply.
# $extra: more key=value lines.
extra=
settings() {
    printf '[org/rlx/Studio]\ntemperature=0.0\nmax-tokens=%s\nwindow-width=%s\nwindow-height=%s\n%s\n' \
        "$1" "${2:-1280}" "${3:-760}" "$extra" >"$keyfile"
}

# start NAME [ARGS...]: run rlx-studio, wait for its window, set $wid.
start() {
    name=$1
    shift
    "$app" "$@" >"$art/chat-$name.log" 2>&1 &
    pid=$!
    wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window after 30 s ($name)"
    xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
}

count() {
    ls "$convs"/*.json 2>/dev/null | wc -l
}

# new_conversation TEXT [KEY]: Ctrl+N, then say TEXT [KEY]; waits for its
# file and sets $only to it, so that wait_reply reads that one and not an
# older conversation.
new_conversation() {
    before=$(count)
    xdotool key --clearmodifiers ctrl+n
    sleep 0.3
    say "$1" "${2:-}"
    i=0
    while [ "$(count)" -le "$before" ]; do
        [ $i -lt 50 ] || fail "no new conversation file after 10 s"
        sleep 0.2
        i=$((i + 1))
    done
    only=$(newest)
}

# wait_reply MIN_CHARS: up to 30 s for the reply of $only (else the newest
# conversation) to reach MIN_CHARS characters; sets $file.
only=
wait_reply() {
    i=0
    while :; do
        file=${only:-$(newest)}
        if [ -n "$file" ]; then
            n=$(field "$file" reply | wc -c)
            [ "$n" -ge "$1" ] && return 0
        fi
        [ $i -lt 150 ] || fail "no reply of $1 characters after 30 s"
        kill -0 "$pid" 2>/dev/null || fail "rlx-studio died while replying"
        sleep 0.2
        i=$((i + 1))
    done
}

# say TEXT [KEY]: type TEXT, press Enter (and KEY right behind it)
say() {
    xdotool windowfocus --sync "$wid" type --delay 15 "$1"
    xdotool key --clearmodifiers Return ${2:-}
}

expected=", there was a little girl named Lily. She loved to play outside in the park."

# 1. the documented greedy continuation ------------------------------------
settings 40
start reply --model "$model"
wait_log "is ready"
say "Once upon a time"
wait_reply ${#expected}
sleep 1.5 # the reply ends at 40 tokens; the final save follows
reply=$(field "$file" reply)
case "$reply" in
"$expected"*) echo "reply: $reply" ;;
*) fail "reply was '$reply', expected it to start with '$expected'" ;;
esac
[ "$(field "$file" title)" = "Once upon a time" ] || fail "title: $(field "$file" title)"
# Regenerate (Ctrl+R): greedy, so the same reply replaces the old one.
xdotool key --clearmodifiers ctrl+r
sleep 3
[ "$(field "$file" nmsg)" = 2 ] || fail "regenerate left $(field "$file" nmsg) messages"
[ "$(field "$file" reply)" = "$reply" ] || fail "regenerated reply differs: $(field "$file" reply)"
shot reply
first=$file
first_all=$(field "$first" all)
quit
check_log reply

# activate NAME [PATH]: a window (default) or app action over D-Bus.
activate() {
    gdbus call --session --dest org.rlx.Studio --object-path "${2:-/org/rlx/Studio/window/1}" \
        --method org.gtk.Actions.Activate "$1" '[]' '{}' >/dev/null || fail "action $1 over D-Bus"
}

# 2. restart (dark); the popovers and Preferences; Stop during a long reply ----
settings 1500
ADW_DEBUG_COLOR_SCHEME=prefer-dark
export ADW_DEBUG_COLOR_SCHEME
start stop --model "$model"
unset ADW_DEBUG_COLOR_SCHEME
wait_log "is ready"
[ "$(field "$first" all)" = "$first_all" ] || fail "the first conversation changed on restart"
if command -v gdbus >/dev/null 2>&1 && [ "${DBUS_SESSION_BUS_ADDRESS#unix:path=/nonexistent}" = "$DBUS_SESSION_BUS_ADDRESS" ]; then
    activate show-memory
    sleep 1
    # The focus is not in the budget: a digit typed does not change it.
    xdotool key --clearmodifiers 7
    sleep 0.3
    shot dark-memory
    xdotool key --clearmodifiers Escape
    sleep 0.3
    if grep -q '^memory-budget-mib' "$keyfile"; then
        fail "typing in the memory popover changed the budget: $(grep '^memory-budget-mib' "$keyfile")"
    fi
    activate show-sampling
    sleep 1
    shot dark-sampling
    xdotool key --clearmodifiers Escape
    activate preferences /org/rlx/Studio
    sleep 1.5
    shot dark-preferences
    xdotool key --clearmodifiers Escape
    sleep 0.5
    xdotool windowfocus --sync "$wid"
fi
# Escape right behind Enter: the tiny model writes the whole 1500-token
# reply in well under a second here, so waiting to see part of it first
# raced its end (and failed whenever the model won)
new_conversation "Once upon a time" Escape
file=$only
sleep 1
a=$(field "$file" reply)
sleep 2
b=$(field "$file" reply)
[ "$a" = "$b" ] || fail "the reply still grew more than a second after Stop (${#a} then ${#b} characters)"
[ ${#b} -lt 3000 ] || fail "Stop did not stop: ${#b} characters"
echo "stopped at ${#b} characters"
shot stopped

# 3. Ctrl+Q while a reply streams: clean shutdown ------------------------
new_conversation "The dog"
wait_reply 20
quit
[ "$(field "$file" nmsg)" = 2 ] || fail "the reply interrupted by Ctrl+Q was not saved"
check_log stop

# 4. kill -9 mid-reply; nothing shown or saved is lost ---------------------------
# With G_MESSAGES_DEBUG the app logs each text it puts on screen for a reply
# ("reply shown: N bytes ending \"...\"", before it is drawn); the last one
# before the kill must be a prefix of the reply on disk after it.
G_MESSAGES_DEBUG=RlxStudio
export G_MESSAGES_DEBUG
start kill --model "$model"
unset G_MESSAGES_DEBUG
wait_log "is ready"
new_conversation "Once upon a time"
wait_reply 200
saved_file=$file
saved=$(field "$saved_file" reply)
kill -9 "$pid"
wait "$pid" 2>/dev/null
pid=
after=$(field "$saved_file" reply)
case "$after" in
"$saved"*) ;;
*) fail "the reply saved before kill -9 was not kept intact" ;;
esac
shown=$(python3 - "$art/chat-kill.log" "$saved_file" <<'EOF'
import codecs, json, re, sys
def fail(why):
    print(why)
    sys.exit(1)
lines = [l for l in open(sys.argv[1], encoding="utf-8", errors="replace")
         if "reply shown: " in l]
if not lines:
    fail("no 'reply shown' line in the log")
m = re.search(r'reply shown: (\d+) bytes ending "(.*)"$', lines[-1].rstrip("\n"))
if not m:
    fail("cannot read: " + lines[-1])
n = int(m.group(1))
tail = codecs.escape_decode(m.group(2).encode())[0]
c = json.load(open(sys.argv[2]))
reply = [x["content"] for x in c["messages"] if x["role"] == "assistant"][-1].encode()
if len(reply) < n or not reply[:n].endswith(tail):
    fail("%d bytes ending %r were on screen, the file keeps %d bytes ending %r"
             % (n, tail, len(reply), reply[max(0, n - len(tail)):n]))
print(n)
EOF
) || fail "text shown before kill -9 was lost: $shown"
echo "the $shown bytes on screen at kill -9 are in the file"
settings 40 800 600
ADW_DEBUG_COLOR_SCHEME=prefer-dark
export ADW_DEBUG_COLOR_SCHEME
start restart
unset ADW_DEBUG_COLOR_SCHEME
sleep 2
after=$(field "$saved_file" reply)
case "$after" in
"$saved"*) echo "kept ${#after} characters saved before kill -9" ;;
*) fail "the restart lost what was saved before kill -9" ;;
esac
[ "$(field "$first" all)" = "$first_all" ] || fail "the first conversation changed"
shot dark-800x600
quit
check_log restart

# 5. not a GGUF: a toast, and the window lives on -------------------------------
# (light, 800x600, over a saved conversation written in Markdown)
settings 40 800 600
printf 'This is not a model.\n' >"$work/notes.gguf"
python3 - "$convs/markdown-sample.json" <<'EOF'
import json, sys, time
md = ("## A small *plan*\n\nSteps, **in order**:\n\n1. Read the `config`\n2. Build it\n"
      "   - with ~~care~~ speed\n\n> Quoted wisdom.\n\n"
      "```c\nint main(void)\n{\n    return 0;\n}\n```\n\nDone, see [the docs](https://example.org).")
json.dump({"version": 1, "id": "markdown-sample", "title": "Markdown sample", "system": "",
           "created": int(time.time()), "updated": int(time.time()) + 100,
           "messages": [{"role": "user", "content": "Show me some Markdown"},
                        {"role": "assistant", "content": md}]}, open(sys.argv[1], "w"))
EOF
start bad --model "$work/notes.gguf"
wait_log "Cannot load the model"
sleep 1.2
shot light-800x600-not-gguf
kill -0 "$pid" 2>/dev/null || fail "rlx-studio died on a file that is not a GGUF"
# A second launch hands its file to this one (and exits): --model FILE, then FILE.
timeout 20 "$app" --model "$model" >>"$art/chat-second.log" 2>&1 || fail "rlx-studio --model FILE as a second instance failed"
wait_log "is ready"
timeout 20 "$app" "$work/notes.gguf" >>"$art/chat-second.log" 2>&1 || fail "rlx-studio FILE as a second instance failed"
loaded_twice() {
    [ "$(grep -c "Cannot load the model" "$art/chat-bad.log")" -ge 2 ]
}
wait_for "the second instance's FILE was not opened" loaded_twice
kill -0 "$pid" 2>/dev/null || fail "rlx-studio died opening a second instance's files"
quit
check_log bad

# 6. a budget the model does not fit: the toast names the figures ----------------
extra='memory-budget-mib=1'
settings 40
start budget --model "$model"
wait_log "Cannot load the model"
grep -q "but the budget is 1.0 MiB" "$art/chat-budget.log" || fail "the budget error does not give the figures"
sleep 1.2
shot budget
quit
check_log budget

# 7. a context of 32 tokens: the reply fills it; an error toast, at once ---------
extra='context-length=32'
settings 1500
start context --model "$model"
wait_log "is ready"
# A conversation of its own: the newest one (Markdown sample) is longer than
# 32 tokens already, which the engine refuses before any reply.
new_conversation "Once upon a time"
wait_log "The context is full. Start"
sleep 0.5
shot context-full # the error, not the "is ready" notice still due
quit
check_log context

# 8. an architecture the engine does not know: named once, the path not at all ----
extra=
settings 40
python3 - "$model" "$work/llamx.gguf" <<'EOF'
import sys
d = open(sys.argv[1], "rb").read()
i = d.index(b"general.architecture")
j = d.index(b"llama", i)
open(sys.argv[2], "wb").write(d[:j] + b"llamx" + d[j + 5:])
EOF
start arch --model "$work/llamx.gguf"
wait_log "Cannot load the model"
line=$(grep "Cannot load the model" "$art/chat-arch.log")
echo "$line"
[ "$(printf '%s' "$line" | grep -o "'llamx'" | wc -l)" = 1 ] || fail "the toast does not name 'llamx' once: $line"
case "$line" in
*"$work/llamx.gguf"*) fail "the toast shows the full path: $line" ;;
esac
quit
check_log arch

echo "PASS"
