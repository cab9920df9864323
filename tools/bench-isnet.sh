#!/bin/sh
# ISNet (or any ONNX model with one float input) on the CPU, ours beside ONNX
# Runtime's (npm onnxruntime-node@1.30.0), on the same input and thread count,
# in rounds that alternate the two so that a busy machine slows both alike:
#   tools/bench-isnet.sh MODEL.onnx [BUILD] [THREADS] [RUNS] [ROUNDS] [INPUT.npy]
# BUILD is a release build folder (default build), THREADS default 2, RUNS the
# timed runs per round after an untimed one (default 3), ROUNDS default 2.
# INPUT.npy is the input (default: a fixed pseudo-random [1, 3, 1024, 1024],
# ISNet's). ORT_NODE_MODULES names the node_modules folder that holds
# onnxruntime-node (default /tmp/ort/node_modules). Compare ratios within one
# run: absolute times on a shared machine move from run to run. Each round
# prints the median wall time and the CPU time per run (all threads; ONNX
# Runtime's spin while waiting, which counts against it).
set -eu
model=${1:?usage: tools/bench-isnet.sh MODEL.onnx [BUILD] [THREADS] [RUNS] [ROUNDS] [INPUT.npy]}
build=${2:-build} threads=${3:-2} runs=${4:-3} rounds=${5:-2} input=${6:-}
root=$(cd "$(dirname "$0")/.." && pwd)
mods=${ORT_NODE_MODULES:-/tmp/ort/node_modules}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the input as .npy for rlx and as raw f32 (with its dims) for ONNX Runtime
/usr/bin/python3 - "$tmp" "$input" <<'PY'
import sys, numpy as np
tmp, src = sys.argv[1], sys.argv[2]
x = np.load(src).astype(np.float32) if src else \
    np.random.default_rng(21).random((1, 3, 1024, 1024), dtype=np.float32)
np.save(tmp + "/in.npy", x)
x.tofile(tmp + "/in.f32")
open(tmp + "/dims", "w").write(",".join(map(str, x.shape)))
PY
name=$("$build/app/rlx" info "$model" | awk '/^inputs:/ { getline; print $1; exit }')
dims=$(cat "$tmp/dims")
echo "$model: input $name [$dims], $threads threads, $runs runs per round, $rounds rounds"
i=1
while [ "$i" -le "$rounds" ]; do
    "$build/app/rlx" bench onnx "$model" --input "$name=$tmp/in.npy" -t "$threads" -r "$runs" \
        >"$tmp/rlx.$i"
    NODE_PATH=$mods node "$root/tests/reference/onnx_ort_bench.js" "$model" "$name" "$tmp/in.f32" \
        "$dims" "$threads" "$runs" >"$tmp/ort.$i"
    r=$(sed -n 's/.*median \([0-9.]*\) s.*/\1/p' "$tmp/rlx.$i")
    o=$(sed -n 's/.*median \([0-9.]*\) s.*/\1/p' "$tmp/ort.$i")
    rc=$(sed -n 's/.*CPU time \([0-9.]*\) s.*/\1/p' "$tmp/rlx.$i")
    oc=$(sed -n 's/.*CPU time \([0-9.]*\) s.*/\1/p' "$tmp/ort.$i")
    printf 'round %d: median rlx %s s, onnxruntime %s s, rlx/ort %.2f; CPU time per run rlx %s s, onnxruntime %s s, rlx/ort %.2f\n' \
        "$i" "$r" "$o" "$(awk "BEGIN { print $r / $o }")" "$rc" "$oc" "$(awk "BEGIN { print $rc / $oc }")"
    i=$((i + 1))
done
