#!/bin/sh
# rlx chat over stdin on stories260K (no template: a plain transcript):
# a turn, /stats, /system, a second turn that reuses the cache, /reset, /quit.
set -u
rlx=$1
data=$2
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
err=$("$rlx" chat 2>&1 </dev/null)
check "no model: exit 1" [ $? -eq 1 ]
exit $fail
