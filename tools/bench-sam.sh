#!/bin/sh
# SAM speed on the CPU, ours beside PyTorch's (Debian's python3-torch), on the
# same weights, input and thread count, one after the other:
#   tools/bench-sam.sh [BUILD] [THREADS] [RUNS] [LAYOUT]
# BUILD is a release build folder (default build; it needs -Dtests=true for
# tests/write-sam-model), THREADS default 2, RUNS the timed repetitions after
# a warm-up (default 3; clicks: 4 x RUNS), LAYOUT vit_b (default), vit_l or
# vit_h. The random-weight model is written once, as
# ${TMPDIR:-/tmp}/rlx-bench-sam-LAYOUT.safetensors, and reused; PyTorch's side
# (tests/reference/sam_bench_torch.py) generates the same weights and checks
# them against that file bit for bit, then compares the two embeddings and a
# click's masks, so a speed-up that breaks the numbers shows here.
set -eu
build=${1:-build} threads=${2:-2} runs=${3:-3} layout=${4:-vit_b}
root=$(cd "$(dirname "$0")/.." && pwd)
model=${TMPDIR:-/tmp}/rlx-bench-sam-$layout.safetensors
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -s "$model" ]; then
    "$build/tests/write-sam-model" "$model.part" --layout "$layout"
    mv "$model.part" "$model"
fi
"$build/app/rlx" bench sam -m "$model" -t "$threads" -r "$runs" --dump "$tmp" >"$tmp/rlx"
/usr/bin/python3 "$root/tests/reference/sam_bench_torch.py" --layout "$layout" \
    --threads "$threads" --runs "$runs" --check "$model" --compare "$tmp" >"$tmp/torch"
cat "$tmp/rlx"
echo
cat "$tmp/torch"
echo
num() { sed -n "s/^$1 *\([0-9.]*\) ms.*/\1/p" "$2"; }
printf '%-32s %10s %10s %8s\n' "$layout, $threads threads, median" "rlx" "PyTorch" "ratio"
for row in "encoder:encoder, ms per image" "click:click, ms (1 point, 3 masks)" \
    "masks:masks to 1024x1024, ms"; do
    key=${row%%:*} what=${row#*:}
    r=$(num "$key" "$tmp/rlx") t=$(num "$key" "$tmp/torch")
    printf '%-32s %10s %10s %7.2fx\n' "$what" "$r" "$t" "$(awk "BEGIN { print $t / $r }")"
done
