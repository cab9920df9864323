#!/bin/sh
# rlx info and rlx run on an ONNX model of ONNX's node test suite (Debian
# libonnx-testdata): Conv with strides 2 and pads (1, 0, 1, 0) on x = 0..34
# as [1, 1, 7, 5] and a 3x3 kernel of ones. The expected output is the
# one ONNX's operator documentation gives for that example; and one-line
# errors with exit status 1 for bad inputs.
set -u
rlx=$1
py=/usr/bin/python3
model=/usr/share/libonnx-testdata/data/node/test_conv_with_strides_and_asymmetric_padding/model.onnx
if [ ! -f "$model" ]; then
    echo "no $model: install libonnx-testdata (tools/setup.sh)"
    exit 1
fi
fail=0
check() { # check DESCRIPTION COMMAND...
    desc=$1
    shift
    if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; fail=1; fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$("$rlx" info "$model")
check "info: exit 0" [ $? -eq 0 ]
check "info: the opset" sh -c "printf '%s' \"\$1\" | grep -q 'ai.onnx 11'" _ "$out"
check "info: input x with its shape" sh -c "printf '%s' \"\$1\" | grep -q 'x .*float .*\[1, 1, 7, 5\]'" _ "$out"
check "info: nothing missing" sh -c "printf '%s' \"\$1\" | grep -q 'missing ops:   none'" _ "$out"
out=$("$rlx" info --json "$model")
check "info --json: the op histogram" sh -c "printf '%s' \"\$1\" | grep -q '\"Conv\": *1'" _ "$out"

"$py" -c "
import numpy as np
np.save('$tmp/x.npy', np.arange(35, dtype=np.float32).reshape(1, 1, 7, 5))
np.save('$tmp/w.npy', np.ones((1, 1, 3, 3), dtype=np.float32))
np.save('$tmp/wi.npy', np.ones((1, 1, 3, 3), dtype=np.int64))
"
"$rlx" run "$model" --input x="$tmp/x.npy" --input W="$tmp/w.npy" --output "$tmp/out" >/dev/null 2>&1
check "run: exit 0" [ $? -eq 0 ]
check "run: y as ONNX's documentation gives it" "$py" -c "
import numpy as np
y = np.load('$tmp/out/y.npy')
want = np.array([[[[21, 33], [99, 117], [189, 207], [171, 183]]]], dtype=np.float32)
assert y.dtype == np.float32 and y.shape == want.shape, (y.dtype, y.shape)
assert np.array_equal(y, want), y
"

# bad invocations: exit 1, one line on stderr
for args in "" "$model" "$model --output $tmp/o" "$model --input x=$tmp/x.npy --output $tmp/o" \
    "$model --input x=$tmp/x.npy --input W=$tmp/wi.npy --output $tmp/o" \
    "$model --input x=$tmp/nonexistent.npy --input W=$tmp/w.npy --output $tmp/o" \
    "$model --input q=$tmp/x.npy --output $tmp/o" "$model --input x --output $tmp/o" \
    "$model --input x=$model --input W=$tmp/w.npy --output $tmp/o"; do
    # shellcheck disable=SC2086
    err=$("$rlx" run $args 2>&1 >/dev/null)
    rc=$?
    check "run $args: exit 1" [ $rc -eq 1 ]
    check "run $args: one line" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
done
exit $fail
