#!/bin/sh
# The Chat page under Xvfb, driven with xdotool on the real app and a real
# tiny llama (stories260K). The app's state is read back from what it
# persists: the conversation JSON files under a temporary XDG_DATA_HOME.
#
#   1. --model FILE, type "Once upon a time", Enter: the greedy reply holds
#      the documented continuation.
#   2. Restart: the conversation is still there. A long reply, Escape (Stop):
#      the saved reply stops growing within a second.
#   3. Ctrl+Q while a reply streams: a clean exit (status 0).
#   4. kill -9 mid-reply, restart: everything saved before the kill is kept.
#   5. --model on a file that is not a GGUF: an error toast, a live window.
# A screenshot after each (light 1280x800, dark 800x600) goes to ARTIFACT_DIR.
#
# usage: chat.sh RLX_STUDIO ARTIFACT_DIR MODEL.gguf
set -u

app=$1
art=$2
model=$3

if [ -z "${RLX_CHAT_IN_XVFB:-}" ]; then
    for tool in xvfb-run xdotool import python3; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "SKIP: $tool not found"
            exit 77
        fi
    done
    [ -f "$model" ] || { echo "SKIP: no $model"; exit 77; }
    mkdir -p "$art" || exit 1
    bus=
    if command -v dbus-run-session >/dev/null 2>&1; then
        bus="dbus-run-session --"
    else
        DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent
        export DBUS_SESSION_BUS_ADDRESS
    fi
    RLX_CHAT_IN_XVFB=1
    export RLX_CHAT_IN_XVFB
    # shellcheck disable=SC2086
    # -a alone starts at :99 for every caller, and two test runs starting at
    # once can pick the same number; start the search at a number of our own.
    exec xvfb-run -a -n $((100 + $$ % 800)) -s "-screen 0 1280x800x24 -nolisten tcp -noreset" $bus "$0" "$@"
fi

. "$(dirname "$0")/leaks.sh"

work=$art/chat
rm -rf "$work"
mkdir -p "$work/config/glib-2.0/settings" "$work/data"
XDG_CONFIG_HOME=$work/config
XDG_DATA_HOME=$work/data
GSETTINGS_BACKEND=keyfile
GTK_A11Y=none
NO_AT_BRIDGE=1
GDK_BACKEND=x11
G_DEBUG=fatal-criticals
export XDG_CONFIG_HOME XDG_DATA_HOME GSETTINGS_BACKEND GTK_A11Y NO_AT_BRIDGE GDK_BACKEND G_DEBUG
unset ADW_DEBUG_COLOR_SCHEME
convs=$work/data/rlx-studio/conversations
keyfile=$work/config/glib-2.0/settings/keyfile

# settings MAX_TOKENS: greedy sampling, at most MAX_TOKENS per reply.
# $extra: more key=value lines.
extra=
settings() {
    printf '[org/rlx/Studio]\ntemperature=0.0\nmax-tokens=%s\nwindow-width=%s\nwindow-height=%s\n%s\n' \
        "$1" "${2:-1280}" "${3:-760}" "$extra" >"$keyfile"
}

pid=
fail() {
    echo "FAIL: $*"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
    fi
    for log in "$art"/chat-*.log; do
        [ -f "$log" ] && { echo "--- $log"; cat "$log"; }
    done
    exit 1
}

# start NAME [ARGS...]: run rlx-studio, wait for its window, set $wid.
# In the ASan build leaks are checked too: quit() accepts only GLib's quark
# block, which GLib drops by design (see leaks.sh).
start() {
    name=$1
    shift
    "$app" "$@" >"$art/chat-$name.log" 2>&1 &
    pid=$!
    wid=
    i=0
    while [ $i -lt 150 ]; do
        wid=$(xdotool search --onlyvisible --name '^RLX Studio$' 2>/dev/null | head -n 1)
        [ -n "$wid" ] && break
        kill -0 "$pid" 2>/dev/null || fail "rlx-studio ($name) exited before showing a window"
        sleep 0.2
        i=$((i + 1))
    done
    [ -n "$wid" ] || fail "no rlx-studio window after 30 s ($name)"
    xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
}

# wait_log NAME PATTERN: up to 20 s for PATTERN in the log of run NAME.
wait_log() {
    i=0
    while ! grep -q -e "$2" "$art/chat-$1.log"; do
        [ $i -lt 100 ] || fail "no '$2' in the log of run $1"
        kill -0 "$pid" 2>/dev/null || fail "rlx-studio died in run $1"
        sleep 0.2
        i=$((i + 1))
    done
}

shot() {
    import -window root "$art/chat-$1.png" || fail "screenshot $1"
    kill -0 "$pid" 2>/dev/null || fail "rlx-studio died while taking screenshot $1"
    echo "screenshot: $art/chat-$1.png"
}

quit() {
    xdotool windowfocus --sync "$wid" key --clearmodifiers ctrl+q
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
        sleep 0.2
        i=$((i + 1))
    done
    kill -0 "$pid" 2>/dev/null && fail "rlx-studio still running 10 s after Ctrl+Q"
    wait "$pid"
    rc=$?
    pid=
    app_exit_ok "$rc" "$art/chat-$name.log" || fail "rlx-studio exited with status $rc"
}

check_log() {
    if grep -E -e '-(CRITICAL|WARNING)' "$art/chat-$1.log"; then
        fail "warnings in the log of run $1"
    fi
}

# newest: the most recently written conversation file.
newest() {
    ls -t "$convs"/*.json 2>/dev/null | head -n 1
}

# field FILE WHAT: reply (last assistant text), nmsg, title, or all (every text).
field() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    c = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
m = c.get("messages", [])
w = sys.argv[2]
if w == "reply":
    r = [x["content"] for x in m if x["role"] == "assistant"]
    sys.stdout.write(r[-1] if r else "")
elif w == "nmsg":
    print(len(m))
elif w == "title":
    sys.stdout.write(c.get("title", ""))
else:
    sys.stdout.write("\x1e".join(x["role"] + ":" + x["content"] for x in m))
EOF
}

count() {
    ls "$convs"/*.json 2>/dev/null | wc -l
}

# new_conversation: Ctrl+N, then say TEXT; waits for its file and sets $only
# to it, so that wait_reply reads that one and not an older conversation.
new_conversation() {
    before=$(count)
    xdotool key --clearmodifiers ctrl+n
    sleep 0.3
    say "$1"
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

say() {
    xdotool windowfocus --sync "$wid" type --delay 15 "$1"
    xdotool key --clearmodifiers Return
}

expected=", there was a little girl named Lily. She loved to play outside in the park."

# 1. the documented greedy continuation ------------------------------------
settings 40
start reply --model "$model"
wait_log reply "is ready"
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
wait_log stop "is ready"
[ "$(field "$first" all)" = "$first_all" ] || fail "the first conversation changed on restart"
if command -v gdbus >/dev/null 2>&1 && [ "${DBUS_SESSION_BUS_ADDRESS#unix:path=/nonexistent}" = "$DBUS_SESSION_BUS_ADDRESS" ]; then
    activate show-memory
    sleep 1
    shot dark-memory
    xdotool key --clearmodifiers Escape
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
new_conversation "Once upon a time"
wait_reply 120
xdotool key --clearmodifiers Escape
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

# 4. kill -9 mid-reply; nothing saved is lost ---------------------------------
start kill --model "$model"
wait_log kill "is ready"
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
wait_log bad "Cannot load the model"
sleep 1.2
shot light-800x600-not-gguf
kill -0 "$pid" 2>/dev/null || fail "rlx-studio died on a file that is not a GGUF"
quit
check_log bad

# 6. a budget the model does not fit: the toast names the figures ----------------
extra='memory-budget-mib=1'
settings 40
start budget --model "$model"
wait_log budget "Cannot load the model"
grep -q "but the budget is 1.0 MiB" "$art/chat-budget.log" || fail "the budget error does not give the figures"
sleep 1.2
shot budget
quit
check_log budget

echo "PASS"
