#!/bin/sh
# rlx quantize on the real stories260K (rows of 64 and 172: the fallback
# types) checked with rlx info; rlx make-model; one-line errors.
set -u
rlx=$1
data=$2
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$data/README.md" "$data/llm/stories260K.gguf"
fail=0
check() { # check DESCRIPTION COMMAND...
    desc=$1
    shift
    if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; fail=1; fi
}
has() { printf '%s\n' "$1" | grep -qE -- "$2"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stories="$data/llm/stories260K.gguf"

out=$("$rlx" quantize "$stories" "$tmp/q4km.gguf" Q4_K_M -t 2)
check "Q4_K_M: exit 0" [ $? -eq 0 ]
check "Q4_K_M: one line per tensor and a total" [ "$(printf '%s\n' "$out" | wc -l)" -eq 49 ]
check "Q4_K_M: token_embd falls back to Q5_0 (row 64)" has "$out" "token_embd.weight .* F32 -> Q5_0 .*not a multiple of 256"
json=$("$rlx" info --json --tensors "$tmp/q4km.gguf")
check "Q4_K_M: the llama.cpp mix for rows of 64 and 172" python3 -c '
import json, sys
o = json.loads(sys.argv[1])
t = {x["name"]: x["dtype"] for x in o["tensors"]}
assert len(t) == 48
# untied output.weight: row 64 is not a multiple of 256 -> Q8_0
assert t["output.weight"] == "Q8_0", t["output.weight"]
assert t["token_embd.weight"] == "Q5_0"
for l in range(5):
    # use_more_bits(l, 5): layers 2 and 4 get Q6_K, which falls back to Q8_0
    want_v = "Q8_0" if l in (2, 4) else "Q5_0"
    assert t["blk.%d.attn_v.weight" % l] == want_v, (l, t["blk.%d.attn_v.weight" % l])
    # ffn_down rows are 172: neither Q5_0 nor Q8_0 fits -> F16
    assert t["blk.%d.ffn_down.weight" % l] == "F16"
    for n in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
        assert t["blk.%d.%s.weight" % (l, n)] == "Q5_0"
    assert t["blk.%d.attn_norm.weight" % l] == "F32"
' "$json"
info=$("$rlx" info "$tmp/q4km.gguf")
check "Q4_K_M: rlx info reads the file" has "$info" "tensors: +48"
check "Q4_K_M: metadata kept" has "$info" "512 tokens"

out=$("$rlx" quantize "$stories" "$tmp/q8.gguf" q8_0 -q)
check "Q8_0 -q: only the total" [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ]
json=$("$rlx" info --json --tensors "$tmp/q8.gguf")
check "Q8_0: 2-D tensors Q8_0 except the 172-row ffn_down (F16)" python3 -c '
import json, sys
o = json.loads(sys.argv[1])
for x in o["tensors"]:
    n, d = x["name"], x["dtype"]
    want = "F32" if len(x["shape"]) == 1 else "F16" if "ffn_down" in n else "Q8_0"
    assert d == want, (n, d, want)
' "$json"
out=$("$rlx" quantize "$tmp/q8.gguf" "$tmp/q8-q4.gguf" Q4_0 | grep -c "re-quantized from Q8_0")
check "re-quantizing says so" [ "$out" -gt 0 ]

# an existing output is replaced
printf 'old' >"$tmp/exists.gguf"
"$rlx" quantize -q "$stories" "$tmp/exists.gguf" F16 >/dev/null
check "overwrite: exit 0 and a GGUF" sh -c '"$1" info "$2" >/dev/null' _ "$rlx" "$tmp/exists.gguf"

for args in "$stories $tmp/x.gguf Q3_K_M" "$data/README.md $tmp/x.gguf Q8_0" \
    "/nonexistent.gguf $tmp/x.gguf Q8_0" "$stories" "$stories $tmp/x.gguf Q8_0 -t nope"; do
    # shellcheck disable=SC2086
    err=$("$rlx" quantize $args 2>&1 >/dev/null)
    rc=$?
    check "exit 1 on: quantize $args" [ $rc -eq 1 ]
    check "one-line error on: quantize $args" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
done
err=$("$rlx" quantize "$stories" "$tmp/x.gguf" Q3_K_M 2>&1)
check "unknown type lists the valid ones" has "$err" "valid types: .*Q4_K_M"
check "no output after errors" [ ! -e "$tmp/x.gguf" ]

"$rlx" make-model --shape tiny --arch qwen3 --vocab "$stories" --out "$tmp/tiny.gguf" --seed 3 >/dev/null
check "make-model tiny: exit 0" [ $? -eq 0 ]
info=$("$rlx" info "$tmp/tiny.gguf")
check "make-model tiny: qwen3, 2 layers, 24 tensors" sh -c 'printf "%s\n" "$1" | grep -q "architecture:  qwen3" && printf "%s\n" "$1" | grep -qE "block_count +2" && printf "%s\n" "$1" | grep -qE "tensors: +24"' _ "$info"
"$rlx" make-model --shape tiny --vocab "$stories" --out "$tmp/tiny2.gguf" --seed 3 --dtype f16 >/dev/null
check "make-model --dtype f16" has "$("$rlx" info "$tmp/tiny2.gguf")" "F16 +15 tensors"
err=$("$rlx" make-model --shape huge --vocab "$stories" --out "$tmp/h.gguf" 2>&1)
check "make-model: unknown shape is one line listing the shapes" sh -c '[ "$(printf "%s\n" "$1" | wc -l)" -eq 1 ] && printf "%s\n" "$1" | grep -q "qwen3-0.6b"' _ "$err"
exit $fail
