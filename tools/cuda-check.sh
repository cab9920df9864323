#!/bin/sh
# The CUDA backend's checks and benchmarks on a machine with an NVIDIA GPU
# (CI has none: there the GPU tests skip). Run from a release build:
#   tools/cuda-check.sh [BUILD_DIR] [OUT_DIR] [quick|full|bench|matvec|profile|segment|imagine] [MODELS]
# quick: the CUDA device tests, the Vulkan backend's tests (records in
# device memory, as on every discrete GPU), the op conformance suite (every backend,
# Vulkan through NVIDIA's driver included), stories260K, TAEF2 and Whisper
# through the stack on every device, stories260K greedy on cuda:0 against
# the CPU's tokens, and `rlx bench ops` on cuda:0 and vulkan:0.
# full: quick, then random-weight Qwen3-0.6B and Llama-3.2-1B files
# (Q4_K_M, Q8_0, F16) through `rlx bench` on cuda:0 and (Q4_K_M) vulkan:0.
# segment: Segment Anything on every device (test-sam devices: SAM and
# MobileSAM on cuda:0 and Vulkan through NVIDIA's driver), the partial
# offload on cuda:0, conformance, tools/bench-vulkan-large.sh (real-size
# random-weight Qwen3-0.6B and Llama-3.2-1B files on vulkan:0 against the
# CPU's perplexity), `rlx bench sam` at ViT-B on cuda:0 and vulkan:0, and
# `rlx segment` with a SAM 2.1 file on cuda:0.
# imagine: FLUX.2's transformer (BF16 and FP8) on every device against the
# CPU (test-flux2-dit-tiny), then random-weight klein 4B files (an FP8
# transformer, a Qwen3-4B Q4_K_M text encoder, the VAE) through
# `rlx bench flux2` at 512 and 1024 on cuda:0 and vulkan:0.
# profile: Nsight Compute (ncu, where the machine has it) times every
# kernel of a few decode steps of random-weight Llama-3.2-1B and
# Qwen3-0.6B Q4_K_M files, with the launch fusions and without
# (--unfused); tools/ncu-step.py prints one step kernel by kernel.
# matvec: the streamed matrix-vector products against the plain ones:
# test-cuda-device, the conformance suite and stories260K greedy (the
# correctness of both forms), `rlx bench ops --section matvec` (each
# quantized product streamed and "(plain)") and `--section qgemm` (the
# prompt products beside cuBLAS), then random-weight
# Llama-3.2-1B and Qwen3-0.6B Q4_K_M files through `rlx bench` with and
# without --plain-matvec.
# bench: the full run's benchmarks alone. MODELS (full, bench): which of
# the random-weight files to bench on cuda:0, e.g. "llama-3.2-1b-q4_k_m
# qwen3-0.6b-f16" (default: all six; Vulkan benches only with the default);
# the first of them is benched again with --unfused (the launch fusions off)
# and with --plain-matvec (no streamed products).
# Each step has its own time limit, so one hang costs one step. Logs go to
# OUT_DIR/logs.tar.gz (refreshed after every step, so a run cut short still
# returns what it did); a summary is printed last.
set -u
build=${1:-build-release}
out=${2:-/tmp/cuda-check}
mode=${3:-full}
only=${4:-}
data=${RLX_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
logs=$(mktemp -d)
mkdir -p "$out"
rlx="$build/app/rlx"
summary=""
pack() { tar -C "$logs" -czf "$out/logs.tar.gz" . 2>/dev/null; }
note() {
    summary="$summary$1
"
    echo "== $1"
    printf '%s\n' "$1" >>"$logs/summary.txt"
}
step() { # name timeout command...
    name=$1; t=$2; shift 2
    start=$(date +%s)
    timeout -k 5 "$t" "$@" >"$logs/$name.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    note "$(printf '%-30s rc=%-3s %4ss  %s' "$name" "$rc" "$secs" \
        "$(grep -E 'PASSED|FAILED|passed|failed|t/s|error' "$logs/$name.log" | tail -1 | cut -c1-90)")"
    pack
    return $rc
}
# stories260K greedy: cuda:0 must give the CPU's tokens
stories_greedy() {
    p="Once upon a time"
    "$rlx" generate -m "$data/llm/stories260K.gguf" -p "$p" -n 96 --temp 0 \
        >"$logs/stories-cpu.txt" 2>/dev/null
    timeout 60 "$rlx" generate -m "$data/llm/stories260K.gguf" -p "$p" -n 96 --temp 0 \
        --device cuda:0 >"$logs/stories-cuda.txt" 2>"$logs/stories-cuda.err"
    if cmp -s "$logs/stories-cpu.txt" "$logs/stories-cuda.txt"; then
        note "stories260K greedy: cuda:0 = cpu"
    else
        note "stories260K greedy: cuda:0 DIFFERS from cpu"
    fi
}
# the two published shapes the decode figures are for, each with its vocabulary
two_models="llama-3.2-1b:ggml-vocab-llama-bpe qwen3-0.6b:ggml-vocab-qwen2"
# q4km SHAPE:VOCAB: a random-weight Q4_K_M file of that shape, made once,
# its path in f and the shape in shape
q4km() {
    shape=${1%%:*}
    f="/tmp/rlx-models/$shape-q4_k_m.gguf"
    mkdir -p /tmp/rlx-models
    [ -f "$f" ] || { "$rlx" make-model --shape "$shape" --vocab "$data/tokenizers/${1#*:}.gguf" \
        --out "/tmp/rlx-models/$shape-f16.gguf" --dtype f16 -t "$(nproc)" >/dev/null 2>&1 &&
        "$rlx" quantize "/tmp/rlx-models/$shape-f16.gguf" "$f" Q4_K_M -t "$(nproc)" \
            >/dev/null 2>&1; }
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem \
    --format=csv >"$logs/gpu.txt" 2>&1
cat "$logs/gpu.txt"
"$rlx" info --devices >"$logs/devices.txt" 2>&1
cat "$logs/devices.txt"
# the GPU's memory bandwidth (a device-to-device copy, bytes read + written),
# the floor `rlx bench` decode is put against; PyTorch is on the lent machines
env -u LD_LIBRARY_PATH python3 - >"$logs/d2d.txt" 2>&1 <<'EOF'
import torch
n = 1 << 30
x = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
a.record()
for _ in range(20): y.copy_(x)
b.record(); b.synchronize()
print("d2d copy GB/s (read+write): %.0f" % (2 * n * 20 / (a.elapsed_time(b) / 1e3) / 1e9))
EOF
cat "$logs/d2d.txt"
pack

if [ "$mode" = imagine ]; then
    step flux2-dit-tiny 120 env CMOCKA_MESSAGE_OUTPUT=stdout "$build/tests/test-flux2-dit-tiny"
    f=/tmp/rlx-flux2
    mkdir -p "$f"
    "$build/tests/write-flux2-model" --klein4b "$f/k4-fp8.safetensors" --fp8 >"$logs/write-k4.log" 2>&1
    "$build/tests/write-flux2-model" --vae "$f/ae.safetensors" >"$logs/write-vae.log" 2>&1
    "$rlx" make-model --shape qwen3-4b --vocab "$data/tokenizers/ggml-vocab-qwen2.gguf" \
        --out "$f/te-f16.gguf" --dtype f16 >"$logs/write-te.log" 2>&1 &&
        "$rlx" quantize "$f/te-f16.gguf" "$f/te-q4km.gguf" Q4_K_M -q >>"$logs/write-te.log" 2>&1
    rm -f "$f/te-f16.gguf"
    for d in cuda:0 vulkan:0; do
        step "bench-flux2-$d" 240 "$rlx" bench flux2 -m "$f/k4-fp8.safetensors" \
            --text-encoder "$f/te-q4km.gguf" --vae "$f/ae.safetensors" -s 512,1024 --steps 2 \
            --device "$d"
    done
    pack
    echo
    echo "$summary"
    exit 0
fi

if [ "$mode" = profile ]; then
    ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null |
        head -1)
    [ -n "$ncu" ] || { echo "no ncu on this machine"; exit 1; }
    for m in $two_models; do
        q4km "$m"
        for how in fused unfused; do
            flag=""
            [ "$how" = unfused ] && flag=--unfused
            csv="$logs/ncu-$shape-$how.csv"
            timeout 150 "$ncu" --clock-control none --cache-control none --csv --page raw \
                --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__registers_per_thread \
                --launch-count 1500 "$rlx" bench -m "$f" -p 8 -n 8 -r 1 --device cuda:0 $flag \
                >"$csv" 2>"$logs/ncu-$shape-$how.err"
            python3 "$(dirname "$0")/ncu-step.py" "$csv" --launches >"$logs/step-$shape-$how.txt" 2>&1
            note "ncu $shape $how: $(head -1 "$logs/step-$shape-$how.txt")"
            head -12 "$logs/step-$shape-$how.txt"
            pack
        done
    done
    echo
    echo "$summary"
    exit 0
fi

if [ "$mode" = segment ]; then
    # the most telling first: a run cut short by its limit still reports these
    root=$(cd "$(dirname "$0")/.." && pwd)
    step sam-devices 200 env CMOCKA_MESSAGE_OUTPUT=stdout "$build/tests/test-sam" devices
    step llm-offload-cuda 60 "$build/tests/test-llm-offload" cuda
    vit=/tmp/sam-vit_b.safetensors
    "$build/tests/write-sam-model" "$vit" --layout vit_b >"$logs/write-vit.log" 2>&1
    step bench-sam-cuda 60 "$rlx" bench sam -m "$vit" -r 3 --device cuda:0
    s2=/tmp/sam2t.pth
    "$build/tests/write-sam-model" "$s2" pt --layout sam2.1_hiera_tiny >"$logs/write-sam2.log" 2>&1
    for d in cpu cuda:0; do
        step "segment-sam2-$d" 60 "$rlx" segment -m "$s2" \
            -i "$root/tests/fixtures/image/photo-astronaut.png" --point 40,30 --box 10,10,80,90 \
            --json --device "$d"
    done
    step vulkan-large 300 env CTX=16 RLX_DATA="$data" "$root/tools/bench-vulkan-large.sh" "$build" \
        /tmp/rlx-large vulkan:0
    step bench-sam-cpu 60 "$rlx" bench sam -m "$vit" -r 2
    step bench-sam-vulkan 90 "$rlx" bench sam -m "$vit" -r 2 --device vulkan:0
    step conformance 120 env CMOCKA_MESSAGE_OUTPUT=stdout "$build/tests/test-conformance"
    pack
    echo
    echo "$summary"
    exit 0
fi

if [ "$mode" = matvec ]; then
    step cuda-device 90 "$build/tests/test-cuda-device"
    step conformance 150 env CMOCKA_MESSAGE_OUTPUT=stdout "$build/tests/test-conformance"
    stories_greedy
    step bench-ops-matvec 120 "$rlx" bench ops --device cuda:0 --section matvec
    step bench-ops-qgemm 120 "$rlx" bench ops --device cuda:0 --section qgemm -r 3
    for m in $two_models; do
        q4km "$m"
        step "bench-$shape" 60 "$rlx" bench -m "$f" -p 512 -n 64 -r 3 --device cuda:0
        step "bench-$shape-plain" 60 "$rlx" bench -m "$f" -p 512 -n 64 -r 3 --device cuda:0 \
            --plain-matvec
    done
    pack
    echo
    cat "$logs/d2d.txt"
    echo "$summary"
    exit 0
fi

if [ "$mode" != bench ]; then
    step cuda-host 30 "$build/tests/test-cuda-host"
    step cuda-device 90 "$build/tests/test-cuda-device"
    step backend-vulkan 90 "$build/tests/test-backend-vulkan"
    step conformance 150 env CMOCKA_MESSAGE_OUTPUT=stdout "$build/tests/test-conformance"
    step llm-stories 90 "$build/tests/test-llm-stories"
    step llm-offload 90 "$build/tests/test-llm-offload"
    step llm-offload-cuda 90 "$build/tests/test-llm-offload" cuda
    step taef2 90 "$build/tests/test-taef2"
    step whisper-devices 120 "$build/tests/test-whisper" devices

    stories_greedy

    step bench-ops-cuda 120 "$rlx" bench ops --device cuda:0
    step bench-ops-vulkan 90 "$rlx" bench ops --device vulkan:0 --section gemm
    step bench-ops-vulkan-matvec 90 "$rlx" bench ops --device vulkan:0 --section matvec
    step bench-ops-vulkan-qgemm 120 "$rlx" bench ops --device vulkan:0 --section qgemm
fi

if [ "$mode" != quick ]; then
    models=/tmp/rlx-models
    mkdir -p "$models"
    threads=$(nproc)
    mk() { # shape vocab out
        [ -f "$3" ] || "$rlx" make-model --shape "$1" --vocab "$2" --out "$3" --dtype f16 \
            -t "$threads" >/dev/null 2>&1
    }
    mk qwen3-0.6b "$data/tokenizers/ggml-vocab-qwen2.gguf" "$models/qwen3-0.6b-f16.gguf"
    mk llama-3.2-1b "$data/tokenizers/ggml-vocab-llama-bpe.gguf" "$models/llama-3.2-1b-f16.gguf"
    for m in qwen3-0.6b llama-3.2-1b; do
        for q in Q4_K_M Q8_0; do
            f="$models/$m-$(echo $q | tr A-Z a-z).gguf"
            [ -f "$f" ] || "$rlx" quantize "$models/$m-f16.gguf" "$f" "$q" -t "$threads" \
                >/dev/null 2>&1
        done
    done
    all="llama-3.2-1b-q4_k_m qwen3-0.6b-q4_k_m llama-3.2-1b-q8_0 llama-3.2-1b-f16
         qwen3-0.6b-q8_0 qwen3-0.6b-f16"
    for b in ${only:-$all}; do
        step "bench-cuda-$b" 60 "$rlx" bench -m "$models/$b.gguf" -p 512 -n 64 -r 3 \
            --device cuda:0
    done
    # what the launch fusions gain: the first file again, one launch per
    # instruction (rlx bench --unfused), in the same session
    first=$(echo ${only:-$all} | cut -d' ' -f1)
    step "bench-cuda-$first-unfused" 60 "$rlx" bench -m "$models/$first.gguf" -p 512 -n 64 \
        -r 3 --device cuda:0 --unfused
    step "bench-cuda-$first-plain" 60 "$rlx" bench -m "$models/$first.gguf" -p 512 -n 64 \
        -r 3 --device cuda:0 --plain-matvec
    [ -z "$only" ] || { pack; echo; cat "$logs/d2d.txt"; echo "$summary"; exit 0; }
    for b in llama-3.2-1b-q4_k_m qwen3-0.6b-q4_k_m; do
        step "bench-vulkan-$b" 60 "$rlx" bench -m "$models/$b.gguf" -p 512 -n 64 -r 3 \
            --device vulkan:0
    done
fi
pack
echo
cat "$logs/d2d.txt"
echo "$summary"
