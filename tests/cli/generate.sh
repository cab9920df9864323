#!/bin/sh
# rlx generate on the real stories260K: the greedy continuation of
# "Once upon a time", stop strings, and one-line errors with exit status 1.
set -u
rlx=$1
data=$2
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$data/llm/stories260K.gguf" "$data/tokenizers/ggml-vocab-qwen2.gguf"
fail=0
check() { # check DESCRIPTION COMMAND...
    desc=$1
    shift
    if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; fail=1; fi
}
stories="$data/llm/stories260K.gguf"
want=", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high."
out=$("$rlx" generate -m "$stories" -p "Once upon a time" -n 60 --temp 0 -t 1 2>/dev/null)
check "exit 0 on stories260K" [ $? -eq 0 ]
case "$out" in
"$want"*) check "greedy continuation" true ;;
*) echo "# got: $out"; check "greedy continuation" false ;;
esac
out=$("$rlx" generate -m "$stories" -p "Once upon a time" -n 60 --temp 0 -t 1 --stop Lily 2>/dev/null)
check "--stop ends before the stop string" [ "$out" = ", there was a little girl named " ]
err=$("$rlx" generate -m "$stories" -p "Once upon a time there was a little girl" --ctx 4 2>&1 >/dev/null)
rc=$?
check "prompt longer than the context: exit 1" [ $rc -eq 1 ]
check "prompt longer than the context: one line" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
case "$err" in *"longer than the context"*) check "names the problem" true ;; *) echo "# $err"; check "names the problem" false ;; esac
# --context-shift: 100 tokens through a 32-token context keep going, and the
# context used stays within it
err=$("$rlx" generate -m "$stories" -p "Once upon a time" -n 100 --temp 0 -t 1 --ctx 32 --batch 8 --context-shift 2>&1 >/dev/null)
check "--context-shift: exit 0" [ $? -eq 0 ]
case "$err" in *"generated 100 tokens"*"context "[0-9]*"/32 ("*"context shifts dropped"*) check "--context-shift: 100 tokens, shifts reported" true ;;
*) echo "# $err"; check "--context-shift: 100 tokens, shifts reported" false ;; esac
used=$(printf '%s\n' "$err" | sed -n 's/.*context \([0-9]*\)\/32.*/\1/p')
check "--context-shift: context used <= 32" [ "${used:-99}" -le 32 ]
err=$("$rlx" generate -m "$stories" -p "Once upon a time there was a little girl" --ctx 4 --context-shift -n 4 -t 1 2>&1 >/dev/null)
check "--context-shift: a prompt longer than the context is cut, exit 0" [ $? -eq 0 ]
err=$("$rlx" generate -m "$stories" -p x --kv-type q4 2>&1 >/dev/null)
check "bad --kv-type: exit 1" [ $? -eq 1 ]
err=$("$rlx" generate -m "$data/tokenizers/ggml-vocab-qwen2.gguf" -p hi 2>&1 >/dev/null)
check "a vocab-only file: exit 1" [ $? -eq 1 ]
case "$err" in *"holds no weights"*) check "a vocab-only file: says so" true ;; *) echo "# $err"; check "a vocab-only file: says so" false ;; esac
# a file that is not a GGUF: the error names it once
tmp=${TMPDIR:-/tmp}/rlx-notes.$$.gguf
echo "These are notes" >"$tmp"
err=$("$rlx" generate -m "$tmp" -p hi 2>&1 >/dev/null)
check "not a GGUF: exit 1" [ $? -eq 1 ]
n=$(printf '%s\n' "$err" | grep -o "rlx-notes.$$.gguf" | wc -l)
case "$err" in *"not a GGUF file"*) check "not a GGUF: says so, naming the file once" [ "$n" -eq 1 ] ;; *) echo "# $err"; check "not a GGUF: says so, naming the file once" false ;; esac
rm -f "$tmp"
err=$("$rlx" generate -m "$stories" 2>&1 >/dev/null)
check "no prompt: exit 1" [ $? -eq 1 ]
err=$("$rlx" generate -m "$stories" -p x --temp abc 2>&1 >/dev/null)
check "bad --temp: exit 1" [ $? -eq 1 ]
# --logit-bias: token 298 is " g" in this vocabulary (the greedy text's
# " girl" starts with it); banning it must change the continuation there,
# a bias of 0 must not change anything
out=$("$rlx" generate -m "$stories" -p "Once upon a time" -n 12 --temp 0 -t 1 --logit-bias 298-inf 2>/dev/null)
check "--logit-bias ID-inf: exit 0" [ $? -eq 0 ]
case "$out" in
", there was a little "*) case "$out" in ", there was a little g"*) check "--logit-bias ID-inf bans the token" false ;;
    *) check "--logit-bias ID-inf bans the token" true ;; esac ;;
*) echo "# got: $out"; check "--logit-bias ID-inf bans the token" false ;;
esac
out=$("$rlx" generate -m "$stories" -p "Once upon a time" -n 12 --temp 0 -t 1 --logit-bias 298+0 2>/dev/null)
case "$want" in "$out"*) check "--logit-bias ID+0 changes nothing" [ -n "$out" ] ;;
*) echo "# got: $out"; check "--logit-bias ID+0 changes nothing" false ;; esac
# every sampler flag reaches the chain: a seeded run is reproducible, and
# an out-of-range value is refused naming the field
samp="--seed 7 --temp 0.9 --dynatemp-range 0.3 --dynatemp-exp 1.5 --typical 0.9 --top-nsigma 2
 --xtc-probability 0.5 --xtc-threshold 0.2 --repeat-last-n -1 --frequency-penalty 0.2
 --presence-penalty 0.3 --mirostat 2 --mirostat-ent 4 --mirostat-lr 0.2"
# shellcheck disable=SC2086
a=$("$rlx" generate -m "$stories" -p "Once upon a time" -n 24 -t 1 $samp 2>/dev/null)
check "all sampler flags: exit 0" [ $? -eq 0 ]
# shellcheck disable=SC2086
b=$("$rlx" generate -m "$stories" -p "Once upon a time" -n 24 -t 1 $samp 2>/dev/null)
check "all sampler flags: same seed, same text" [ -n "$a" ] && [ "$a" = "$b" ]
for bad in "--typical 2" "--mirostat 3" "--logit-bias 99999+1" "--logit-bias 5" "--xtc-threshold x"; do
    # shellcheck disable=SC2086
    err=$("$rlx" generate -m "$stories" -p x -n 1 $bad 2>&1 >/dev/null)
    rc=$?
    check "$bad: exit 1, one line" [ $rc -eq 1 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
done
# Ctrl+C during an endless generation (EOS banned, context shifts): the
# text so far and the figures are printed, exit 130. Sent once output
# streams (sh starts a background job with SIGINT ignored until rlx sets its
# handler, before generating); the loops bound a hang, they time nothing.
tmp=${TMPDIR:-/tmp}/rlx-gen-int.$$
: >"$tmp.out"
"$rlx" generate -m "$stories" -p "Once upon a time" -n 1000000 --context-shift --logit-bias 2-inf \
    --temp 0 -t 1 >"$tmp.out" 2>"$tmp.err" &
pid=$!
i=0
while [ "$(wc -c <"$tmp.out")" -lt 200 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -INT $pid
# a lost signal must fail the test, not hang it
i=0
while kill -0 $pid 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 $pid 2>/dev/null
wait $pid
check "Ctrl+C: exit 130" [ $? -eq 130 ]
case "$(cat "$tmp.err")" in *"generated "*" tokens"*"stopped by Ctrl+C"*) check "Ctrl+C: figures printed" true ;;
*) sed 's/^/# /' "$tmp.err"; check "Ctrl+C: figures printed" false ;; esac
case "$(cat "$tmp.out")" in "$want"*) check "Ctrl+C: the text so far" true ;; *) check "Ctrl+C: the text so far" false ;; esac
rm -f "$tmp.out" "$tmp.err"
# a Q8_0 KV cache on the first Vulkan device (its append quantizes on the
# GPU, attention decodes the blocks) gives the CPU's greedy text
cpu=$("$rlx" generate -m "$stories" -p "Once upon a time" -n 32 --temp 0 -t 1 --kv-type q8_0 2>/dev/null)
case "$want" in
"$cpu"*) check "--kv-type q8_0 on the CPU: greedy continuation" [ -n "$cpu" ] ;;
*) echo "# got: $cpu"; check "--kv-type q8_0 on the CPU: greedy continuation" false ;;
esac
out=$("$rlx" generate -m "$stories" -p "Once upon a time" -n 32 --temp 0 -t 1 --kv-type q8_0 --device vulkan:0 2>&1 >"${TMPDIR:-/tmp}/rlx-gen-vk.$$")
rc=$?
vk=$(cat "${TMPDIR:-/tmp}/rlx-gen-vk.$$")
rm -f "${TMPDIR:-/tmp}/rlx-gen-vk.$$"
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -Eqi "no vulkan|no device"; then
    echo "# no Vulkan device: $out"
    [ $fail -eq 0 ] && exit 77
    exit 1
fi
check "--kv-type q8_0 --device vulkan:0: exit 0" [ $rc -eq 0 ]
[ "$vk" = "$cpu" ] || echo "# vulkan:0: $vk"
check "--kv-type q8_0 --device vulkan:0: the CPU's text" [ "$vk" = "$cpu" ]
exit $fail
