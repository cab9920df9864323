#!/bin/sh
# rlx info on real files: the facts of ../shared/data/README.md, JSON that
# parses, and one-line errors with exit status 1.
set -u
rlx=$1
data=$2
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$data/README.md" "$data/llm/stories260K.gguf" "$data/vae/taef2_encoder.safetensors" "$data/whisper/for-tests-ggml-tiny.bin"
fail=0
check() { # check DESCRIPTION COMMAND...
    desc=$1
    shift
    if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; fail=1; fi
}
out=$("$rlx" info "$data/llm/stories260K.gguf")
check "exit 0 on stories260K" [ $? -eq 0 ]
for want in "architecture:  llama" "embedding_length                   64" \
    "block_count                        5" "attention.head_count               8" \
    "attention.head_count_kv            4" "512 tokens" "tensors:       48"; do
    check "stories260K shows '$want'" sh -c 'printf "%s\n" "$1" | grep -qF -- "$2"' _ "$out" "$want"
done
json=$("$rlx" info --json --tensors "$data/llm/stories260K.gguf")
check "--json --tensors is valid JSON with the same facts" python3 -c '
import json, sys
o = json.loads(sys.argv[1])
hp = o["hyperparameters"]
assert o["architecture"] == "llama"
assert (hp["embedding_length"], hp["block_count"], hp["attention.head_count"],
        hp["attention.head_count_kv"]) == (64, 5, 8, 4)
assert o["tokenizer"]["vocab_size"] == 512
t = {x["name"]: x for x in o["tensors"]}
assert t["token_embd.weight"]["shape"] == [64, 512] and t["token_embd.weight"]["bytes"] == 64 * 512 * 4
assert sum(x["bytes"] for x in o["tensors"]) == o["weight_bytes"]
' "$json"
out=$("$rlx" info "$data/vae/taef2_encoder.safetensors")
check "safetensors: 79 F16 tensors" sh -c 'printf "%s\n" "$1" | grep -qE "F16 +79 tensors"' _ "$out"
# devices: the CPU always; a Vulkan device's line names its kernel variant
devs=$("$rlx" info --devices --json)
check "info --devices lists the CPU" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d[0]["id"] == "cpu" and d[0]["memory"] > 0
for x in d:
    if x["id"].startswith("vulkan:"):
        f = x["features"]
        assert f.endswith(", f16 kernels") == (" storage16" in f and " float16" in f), f
        assert f.endswith(" kernels"), f
' "$devs"
# whisper.cpp ggml .bin: openai's tiny dimensions, its languages and special ids
out=$("$rlx" info "$data/whisper/for-tests-ggml-tiny.bin")
check "exit 0 on for-tests-ggml-tiny.bin" [ $? -eq 0 ]
for want in "format:        whisper.cpp ggml .bin" "whisper:       tiny, multilingual, 99 languages" \
    "n_audio_state                      384" "n_text_layer                       4" \
    "n_mels                             80" "eot 50257, sot 50258" "tensors:       0"; do
    check "ggml tiny shows '$want'" sh -c 'printf "%s\n" "$1" | grep -qF -- "$2"' _ "$out" "$want"
done
json=$("$rlx" info --json "$data/whisper/for-tests-ggml-tiny.bin")
check "whisper --json has the facts" python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["architecture"] == "whisper" and o["format"] == "ggml"
assert o["hyperparameters"]["n_vocab"] == 51865 and o["whisper"]["kind"] == "tiny"
assert o["whisper"]["language_codes"][:3] == ["en", "zh", "de"]
assert o["n_tensors"] == 0
' "$json"
# PyTorch checkpoints (tests/fixtures/torch, written by torch.save): described, and a
# pickle that would call os.system refused in one line
fx=$(dirname "$0")/../fixtures/torch
json=$("$rlx" info --json --tensors "$fx/torch-nested.pt")
check "pytorch --json: format, state-dict key, flattened names" python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["format"] == "pytorch" and o["state_dict_key"] == "model" and o["n_tensors"] == 5
t = {x["name"]: x for x in o["tensors"]}
assert t["enc.proj.weight"]["shape"] == [2, 2] and t["blocks.1.norm.weight"]["dtype"] == "F32"
' "$json"
out=$("$rlx" info "$fx/torch-basic.pt")
check "pytorch: the text names the format" sh -c 'printf "%s\n" "$1" | grep -qF "PyTorch checkpoint"' _ "$out"
cut=$(mktemp)
trap 'rm -f "$cut"' EXIT
head -c 5000 "$data/whisper/for-tests-ggml-tiny.bin" >"$cut"
for bad in /nonexistent-file "$cut" "$data/README.md" "$fx/torch-evil.pt"; do
    err=$("$rlx" info "$bad" 2>&1 >/dev/null)
    rc=$?
    check "exit 1 on $bad" [ $rc -eq 1 ]
    check "one-line error on $bad" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
done
exit $fail
