#!/bin/sh
# rlx chat over stdin on stories260K (no template: a plain transcript):
# a turn, /stats, /system, a second turn that reuses the cache, /reset, /quit.
set -u
rlx=$1
data=$2
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$data/llm/stories260K.gguf"
fail=0
check() { # check DESCRIPTION COMMAND...
    desc=$1
    shift
    if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; fail=1; fi
}
stories="$data/llm/stories260K.gguf"
err=$(printf 'Once upon a time\n/stats\nThe cat\n/stats\n/reset\n/system Be kind\n/quit\nnever read\n' |
    "$rlx" chat -m "$stories" -n 8 --temp 0 -t 1 2>&1 >/dev/null)
check "exit 0" [ $? -eq 0 ]
case "$err" in *"prompt: 18 tokens (0 reused)"*) check "first turn" true ;; *) echo "# $err"; check "first turn" false ;; esac
# the second prompt resends the first (18 tokens): at least those come from the cache
reused=$(printf '%s\n' "$err" | sed -n 's/.*prompt: [0-9]* tokens (\([0-9]*\) reused).*/\1/p' | sed -n 2p)
check "second turn reuses the first" [ "${reused:-0}" -ge 18 ]
case "$err" in *"(conversation cleared)"*"(system prompt set)"*) check "/reset, /system" true ;; *) check "/reset, /system" false ;; esac
# a 48-token context: the third turn does not fit; with --context-shift the
# oldest turns are dropped and the chat goes on within the context
turns='Hello there\nTell me a story\nAnd another one please\n/stats\n'
err=$(printf "$turns" | "$rlx" chat -m "$stories" --ctx 48 -n 30 --temp 0 -t 1 2>&1 >/dev/null)
check "full context: the chat goes on, exit 0" [ $? -eq 0 ]
# the turn that does not fit is refused with the history counted and what to do
case "$err" in *"does not fit: with the 2 earlier messages ("*" tokens) the prompt is "*" tokens, and the context holds 48; /reset"*"--context-shift"*) check "full context: the message" true ;; *) echo "# $err"; check "full context: the message" false ;; esac
# ...and the chat went on: /stats after it still answers
case "$err" in *"context 47/48"*) check "full context: /stats after it" true ;; *) echo "# $err"; check "full context: /stats after it" false ;; esac
# a first message longer than the context: only a larger --ctx helps, and it says so
err=$(printf 'Once upon a time there was a little girl named Lily who loved to play\n/stats\n' |
    "$rlx" chat -m "$stories" --ctx 8 -t 1 2>&1 >/dev/null)
check "a message longer than the context: exit 0" [ $? -eq 0 ]
case "$err" in *"this message does not fit: in the chat template it is "*" tokens, and the context holds 8; a larger --ctx"*"context 0/8"*) check "a message longer than the context: said, and the chat goes on" true ;; *) echo "# $err"; check "a message longer than the context: said, and the chat goes on" false ;; esac
# a reply cut by the full context says so at once (EOS banned, no -n limit)
err=$(printf 'Once upon a time\n' | "$rlx" chat -m "$stories" --ctx 32 -n 0 --temp 0 -t 1 --logit-bias 2-inf 2>&1 >/dev/null)
check "reply cut by the context: exit 0" [ $? -eq 0 ]
case "$err" in *"(the reply was cut: the context of 32 tokens is full; /reset"*) check "reply cut by the context: said" true ;; *) echo "# $err"; check "reply cut by the context: said" false ;; esac
err=$(printf "$turns" | "$rlx" chat -m "$stories" --ctx 48 -n 30 --temp 0 -t 1 --context-shift 2>&1 >/dev/null)
check "--context-shift: exit 0" [ $? -eq 0 ]
case "$err" in *"does not fit"*) echo "# $err"; check "--context-shift: no error" false ;; *"dropped the oldest"*) check "--context-shift: drops old turns" true ;; *) echo "# $err"; check "--context-shift: drops old turns" false ;; esac
used=$(printf '%s\n' "$err" | sed -n 's/.*context \([0-9]*\)\/48.*/\1/p' | tail -n 1)
check "--context-shift: context used <= 48" [ "${used:-99}" -le 48 ]
err=$("$rlx" chat 2>&1 </dev/null)
check "no model: exit 1" [ $? -eq 1 ]

# Ctrl+C (SIGINT) during an endless reply (EOS banned, context shifts) stops
# the reply, not the chat: the next commands still run and it exits 0. The
# signal is sent once the reply has started streaming; the waits are bounds
# on a hang, not timings.
tmp=${TMPDIR:-/tmp}/rlx-chat-int.$$
mkfifo "$tmp.in"
: >"$tmp.out"
: >"$tmp.err"
"$rlx" chat -m "$stories" -n 1000000 --context-shift --logit-bias 2-inf --temp 0 -t 1 \
    <"$tmp.in" >"$tmp.out" 2>"$tmp.err" &
pid=$!
exec 3>"$tmp.in"
printf 'Once upon a time\n' >&3
i=0
while [ "$(wc -c <"$tmp.out")" -lt 200 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -INT $pid
i=0
while ! grep -q "reply stopped" "$tmp.err" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
printf '/stats\n/quit\n' >&3
exec 3>&-
i=0
while kill -0 $pid 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 $pid 2>/dev/null
wait $pid
rc=$?
check "Ctrl+C: the chat goes on and exits 0" [ $rc -eq 0 ]
case "$(cat "$tmp.err")" in *"reply stopped"*"generated "*" tokens"*) check "Ctrl+C: reply stopped, /stats after it" true ;;
*) cat "$tmp.err" | sed 's/^/# /'; check "Ctrl+C: reply stopped, /stats after it" false ;; esac
rm -f "$tmp.in" "$tmp.out" "$tmp.err"
exit $fail
