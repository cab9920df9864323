#!/bin/sh
# The CUDA backend's checks and benchmarks on a machine with an NVIDIA GPU
# (CI has none: there the GPU tests skip). Run from a release build:
#   tools/cuda-check.sh [BUILD_DIR] [OUT_DIR] [quick|full]
# It runs the CUDA device tests, the op conformance suite (every backend,
# Vulkan through NVIDIA's driver included), stories260K and TAEF2 through
# the stack, stories260K greedy on cuda:0 against the CPU's tokens, then
# (full) random-weight Qwen3-0.6B and Llama-3.2-1B files through `rlx bench`
# on cuda:0 and vulkan:0 and `rlx bench ops --device cuda:0`. Logs go to
# OUT_DIR; a summary is printed last.
set -u
build=${1:-build-release}
out=${2:-/tmp/cuda-check}
mode=${3:-full}
data=${RLX_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
mkdir -p "$out"
rlx="$build/app/rlx"
summary=""
note() { summary="$summary$1
"; echo "== $1"; }
step() { # name timeout command...
    name=$1; t=$2; shift 2
    start=$(date +%s)
    timeout "$t" "$@" >"$out/$name.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    note "$(printf '%-26s rc=%-3s %4ss  %s' "$name" "$rc" "$secs" "$(grep -E 'PASSED|FAILED|passed|failed' "$out/$name.log" | tail -1)")"
    return $rc
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >"$out/gpu.txt" 2>&1
"$rlx" info --devices >"$out/devices.txt" 2>&1
cat "$out/devices.txt"

step cuda-device 300 "$build/tests/test-cuda-device"
step cuda-host 60 "$build/tests/test-cuda-host"
step conformance 600 env CMOCKA_MESSAGE_OUTPUT=stdout "$build/tests/test-conformance"
step llm-stories 300 "$build/tests/test-llm-stories"
step taef2 300 "$build/tests/test-taef2"

# stories260K greedy: cuda:0 must give the CPU's tokens
p="Once upon a time"
"$rlx" generate -m "$data/llm/stories260K.gguf" -p "$p" -n 96 --temp 0 >"$out/stories-cpu.txt" 2>/dev/null
"$rlx" generate -m "$data/llm/stories260K.gguf" -p "$p" -n 96 --temp 0 --device cuda:0 >"$out/stories-cuda.txt" 2>"$out/stories-cuda.err"
if cmp -s "$out/stories-cpu.txt" "$out/stories-cuda.txt"; then note "stories260K greedy: cuda:0 = cpu"; else note "stories260K greedy: cuda:0 DIFFERS from cpu"; fi

step bench-ops-cuda 200 "$rlx" bench ops --device cuda:0

[ "$mode" = full ] || { echo; echo "$summary"; exit 0; }

models=/tmp/rlx-models
mkdir -p "$models"
threads=$(nproc)
mk() { # shape vocab out
    [ -f "$3" ] || "$rlx" make-model --shape "$1" --vocab "$2" --out "$3" --dtype f16 -t "$threads" >/dev/null 2>&1
}
mk qwen3-0.6b "$data/tokenizers/ggml-vocab-qwen2.gguf" "$models/qwen3-0.6b-f16.gguf"
mk llama-3.2-1b "$data/tokenizers/ggml-vocab-llama-bpe.gguf" "$models/llama-3.2-1b-f16.gguf"
for m in qwen3-0.6b llama-3.2-1b; do
    for q in Q4_K_M Q8_0; do
        f="$models/$m-$(echo $q | tr A-Z a-z).gguf"
        [ -f "$f" ] || "$rlx" quantize "$models/$m-f16.gguf" "$f" "$q" -t "$threads" >/dev/null 2>&1
    done
done
for f in "$models"/*.gguf; do
    b=$(basename "$f" .gguf)
    step "bench-cuda-$b" 240 "$rlx" bench -m "$f" -p 512 -n 64 -r 3 --device cuda:0
done
for f in "$models"/qwen3-0.6b-q4_k_m.gguf "$models"/llama-3.2-1b-q4_k_m.gguf; do
    b=$(basename "$f" .gguf)
    step "bench-vulkan-$b" 240 "$rlx" bench -m "$f" -p 512 -n 64 -r 3 --device vulkan:0
done
echo
echo "$summary"
