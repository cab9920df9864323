#!/bin/sh
# Real-size models on a Vulkan device (issue 22): random-weight files of the
# published Qwen3-0.6B and Llama-3.2-1B shapes, whose token embeddings,
# output heads and prefill logits exceed a small binding limit (lavapipe:
# 128 MiB), give the CPU's perplexity on the same text, and `rlx bench`
# runs on each. Not a CI test: lavapipe takes minutes per model.
#
# For a quantized file the CPU's own kernels are not the yardstick alone:
# like llama.cpp's, they quantize the activations to 8 bits for the Q8_0 and
# K-quant dot products, which moves perplexity by tenths of a percent (more
# on tiny models), while the GPU kernels multiply float activations. So each
# quantized file is also dequantized to F32 (`rlx quantize ... F32`: the
# same weights, exactly) and scored on the CPU: the "exact" column. The
# device passes when it is within 0.1% of the CPU on the same file or of
# the exact figure.
#
# usage: tools/bench-vulkan-large.sh [BUILD_DIR] [MODEL_DIR] [DEVICE]
#   BUILD_DIR  the meson build (default build-release)
#   MODEL_DIR  where the model files are made once and kept (default /tmp/rlx-large)
#   DEVICE     default vulkan:0
# Environment: RLX_DATA (the test data, default ../shared/data), CTX (default 16) tokens per perplexity window, MODELS (default
# all five: qwen3-f16 qwen3-q8_0 qwen3-q4_k_m llama-q8_0 llama-q4_k_m),
# BENCH_P / BENCH_N (default 8 / 2) for rlx bench.
# Prints one line per model and exits non-zero when a perplexity differs from
# the CPU's by more than 0.1% or a run fails.
set -u
BUILD=${1:-build-release}
DIR=${2:-/tmp/rlx-large}
DEV=${3:-vulkan:0}
CTX=${CTX:-16}
BENCH_P=${BENCH_P:-8}
BENCH_N=${BENCH_N:-2}
MODELS=${MODELS:-"qwen3-f16 qwen3-q8_0 qwen3-q4_k_m llama-q8_0 llama-q4_k_m"}
HERE=$(cd "$(dirname "$0")/.." && pwd)
RLX="$BUILD/app/rlx"
VOCAB="${RLX_DATA:-$HERE/../shared/data}/tokenizers"
[ -x "$RLX" ] || { echo "no $RLX: build first" >&2; exit 2; }
mkdir -p "$DIR" || exit 2

# a short text (our own words): two windows of 16 tokens
TEXT="$DIR/text.txt"
cat > "$TEXT" <<'EOF'
The harbour was quiet in the early morning. A few boats rocked against the
pier, their ropes creaking as the tide came in, and a gull walked along the
railing looking for bread.
EOF

make_one() { # name -> file
    case $1 in
    qwen3-f16) f="$DIR/qwen3-0.6b-f16.gguf"
        [ -f "$f" ] || "$RLX" make-model --shape qwen3-0.6b --vocab "$VOCAB/ggml-vocab-qwen2.gguf" \
            --out "$f" --dtype f16 >&2 || return 1 ;;
    qwen3-q8_0 | qwen3-q4_k_m) t=${1#qwen3-}; f="$DIR/qwen3-0.6b-$t.gguf"
        src=$(make_one qwen3-f16) || return 1
        [ -f "$f" ] || "$RLX" quantize "$src" "$f" "$(echo "$t" | tr a-z A-Z)" -q >&2 || return 1 ;;
    llama-f16) f="$DIR/llama3.2-1b-f16.gguf"
        [ -f "$f" ] || "$RLX" make-model --shape llama-3.2-1b \
            --vocab "$VOCAB/ggml-vocab-llama-bpe.gguf" --out "$f" --dtype f16 >&2 || return 1 ;;
    llama-q8_0 | llama-q4_k_m) t=${1#llama-}; f="$DIR/llama3.2-1b-$t.gguf"
        src=$(make_one llama-f16) || return 1
        [ -f "$f" ] || "$RLX" quantize "$src" "$f" "$(echo "$t" | tr a-z A-Z)" -q >&2 || return 1 ;;
    *) echo "unknown model $1" >&2; return 1 ;;
    esac
    echo "$f"
}

ppl() { # file device -> "PPL seconds"
    t0=$(date +%s.%N)
    out=$("$RLX" perplexity -m "$1" -f "$TEXT" --ctx "$CTX" --device "$2" 2>"$DIR/err.txt") || {
        sed 's/^/    /' "$DIR/err.txt" >&2
        return 1
    }
    t1=$(date +%s.%N)
    p=$(echo "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
    [ -n "$p" ] || return 1
    echo "$p $(awk "BEGIN { print $t1 - $t0 }")"
}

rc=0
printf '%-14s %14s %14s %14s %10s %10s %8s %8s  %s\n' model "cpu PPL" "exact PPL" "$DEV PPL" \
    "vs cpu" "vs exact" "cpu s" "dev s" "bench ($DEV)"
for m in $MODELS; do
    f=$(make_one "$m") || { echo "$m: could not make the file"; rc=1; continue; }
    c=$(ppl "$f" cpu) || { echo "$m: perplexity on the CPU failed"; rc=1; continue; }
    g=$(ppl "$f" "$DEV") || { echo "$m: perplexity on $DEV failed"; rc=1; continue; }
    x=$c
    case $m in
    *-f16) ;;
    *)  e="$DIR/$(basename "$f" .gguf)-exact-f32.gguf"
        [ -f "$e" ] || "$RLX" quantize "$f" "$e" F32 -q >&2 || { echo "$m: could not dequantize"; rc=1; continue; }
        x=$(ppl "$e" cpu) || { echo "$m: perplexity of the dequantized file failed"; rc=1; continue; }
        rm -f "$e" ;;
    esac
    set -- $c $g $x
    # awk, not bc: a bare machine (a lent GPU's) may lack bc
    rel=$(awk "BEGIN { d = ($3 - $1) / $1; if (d < 0) d = -d; printf \"%.6f\", d * 100 }")
    relx=$(awk "BEGIN { d = ($3 - $5) / $5; if (d < 0) d = -d; printf \"%.6f\", d * 100 }")
    ok=$(awk "BEGIN { print ($rel <= 0.1 || $relx <= 0.1) ? 1 : 0 }")
    b=$("$RLX" bench -m "$f" --device "$DEV" -p "$BENCH_P" -n "$BENCH_N" -r 1 --json 2>"$DIR/err.txt") ||
        { sed 's/^/    /' "$DIR/err.txt" >&2; b="FAILED"; rc=1; }
    bs=FAILED
    [ "$b" = FAILED ] || bs=$(echo "$b" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(", ".join("%s %.2f tok/s" % (t["test"], t["tps_mean"]) for t in j["tests"]))')
    printf '%-14s %14s %14s %14s %9s%% %9s%% %8.1f %8.1f  %s\n' "$m" "$1" "$5" "$3" "$rel" "$relx" \
        "$2" "$4" "$bs"
    [ "$ok" = 1 ] || { echo "  $m: differs from the CPU and from the exact figure by more than 0.1%"; rc=1; }
done
exit $rc
