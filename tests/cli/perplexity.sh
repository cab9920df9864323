#!/bin/sh
# rlx perplexity against an independent PyTorch reference: stories260K on
# tests/fixtures/perplexity-story.txt with 64-token windows, the value in
# tests/fixtures/perplexity-stories260K-ctx64.txt written by
# tests/reference/perplexity_reference.py (float64 throughout, its own GGUF
# reader and SentencePiece tokenizer). Ours runs in float32 with an F32 KV
# cache (an F16 cache would add its own rounding), so the NLL sums differ by
# float32 rounding only: ~1e-6 relative per logit over 5 layers, far inside
# the 1e-3 relative allowed for PPL = exp(mean NLL). Also the token count,
# the windows printed, another batch size giving the same figure, and
# one-line errors (missing files, a text too short for two windows).
set -u
rlx=$1
data=$2
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$data/llm/stories260K.gguf"
src=$(dirname "$0")/..
fail=0
check() { # check DESCRIPTION COMMAND...
    desc=$1
    shift
    if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; fail=1; fi
}
stories="$data/llm/stories260K.gguf"
text="$src/fixtures/perplexity-story.txt"
ref="$src/fixtures/perplexity-stories260K-ctx64.txt"
want_ppl=$(sed -n 's/^ppl //p' "$ref")
want_tokens=$(sed -n 's/^n_tokens //p' "$ref")
want_windows=$(sed -n 's/^windows //p' "$ref")

errf=$(mktemp)
trap 'rm -f "$errf" "$errf.short"' EXIT
out=$("$rlx" perplexity -m "$stories" -f "$text" --ctx 64 --kv-type f32 -t 2 2>"$errf")
check "exit 0" [ $? -eq 0 ]
ppl=$(printf '%s\n' "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- [0-9.]*$/\1/p')
echo "# PPL $ppl, reference $want_ppl"
check "PPL within 1e-3 relative of the reference" \
    awk -v a="$ppl" -v b="$want_ppl" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-3 * b) }'
check "the same token count as the reference tokenizer ($want_tokens)" \
    grep -q "^perplexity: $want_tokens tokens, $want_windows windows of 64" "$errf"
running=$(printf '%s\n' "$out" | head -1)
check "running PPL for each of the $want_windows windows" \
    sh -c 'printf "%s" "$1" | grep -Eq "^(\[[0-9]+\][0-9]+\.[0-9]{4},){$2}$" && printf "%s" "$1" | grep -q "\[$2\]"' _ "$running" "$want_windows"
last=$(printf '%s' "$running" | sed 's/.*\]\([0-9.]*\),$/\1/')
check "the last running value is the final estimate" \
    awk -v a="$last" -v b="$ppl" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }'
out=$("$rlx" perplexity -m "$stories" -f "$text" --ctx 64 --batch 24 --kv-type f32 -t 2 2>/dev/null)
ppl2=$(printf '%s\n' "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p')
check "batches of 24 give the same PPL ($ppl2)" \
    awk -v a="$ppl2" -v b="$want_ppl" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-3 * b) }'

# a Q8_0 KV cache (8-bit blocks, ~0.4% relative error per K/V value) moves
# the figure a little: within 1%
out=$("$rlx" perplexity -m "$stories" -f "$text" --ctx 64 --kv-type q8_0 -t 2 2>/dev/null)
ppl4=$(printf '%s\n' "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p')
check "--kv-type q8_0: PPL within 1% of the reference ($ppl4)" \
    awk -v a="$ppl4" -v b="$want_ppl" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-2 * b) }'

# the same on the first Vulkan device, when there is one
out=$("$rlx" perplexity -m "$stories" -f "$text" --ctx 64 --kv-type f32 --device vulkan:0 2>&1)
if [ $? -eq 0 ]; then
    ppl3=$(printf '%s\n' "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p')
    check "vulkan:0: PPL within 1e-3 relative of the reference ($ppl3)" \
        awk -v a="$ppl3" -v b="$want_ppl" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-3 * b) }'
elif printf '%s' "$out" | grep -Eqi "no vulkan|no device"; then
    echo "# no Vulkan run: $(printf '%s' "$out" | tail -1)"
else
    check "vulkan:0 runs ($out)" false
fi

head -c 100 "$text" >"$errf.short"
for args in "-m $stories -f $errf.short --ctx 64" "-m /nonexistent.gguf -f $text" \
    "-m $stories -f /nonexistent.txt" "-m $stories" "-f $text" "-m $stories -f $text --ctx x" \
    "-m $stories -f $text --kv-type q9" "-m $stories -f $text --bogus 1"; do
    # shellcheck disable=SC2086
    err=$("$rlx" perplexity $args 2>&1 >/dev/null)
    rc=$?
    check "error exit 1: $args" [ $rc -eq 1 ]
    check "one line: $args" \
        sh -c '[ "$(printf "%s\n" "$1" | wc -l)" -eq 1 ] && printf "%s" "$1" | grep -q "^rlx: perplexity: "' _ "$err"
done
err=$("$rlx" perplexity -m "$stories" -f "$errf.short" --ctx 64 2>&1 >/dev/null)
check "too short: says how many tokens are needed" \
    sh -c 'printf "%s" "$1" | grep -q "needs at least 128"' _ "$err"
exit $fail
