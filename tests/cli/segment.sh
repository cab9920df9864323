#!/bin/sh
# rlx segment with the small random-weight SAM of tests/sam-writer.h (written
# by write-sam-model, official and Hugging Face names, and as a torch.save
# .pth) on a picture of our own: the mask and cut-out PNGs at the picture's
# size, the same result from both namings and from the .pth (which rlx info
# describes), JSON that parses, nothing replaced without --force, and bad
# input refused with one line and exit status 1. Random weights make the
# masks meaningless: test-sam checks the numbers against PyTorch.
set -u
rlx=$1
writer=$2
tmp=${TMPDIR:-/tmp}/rlx-segment.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fail=1; }

"$writer" "$tmp/sam.safetensors" || exit 1
"$writer" "$tmp/sam-hf.safetensors" hf || exit 1
"$writer" "$tmp/sam.pth" pt || exit 1
# a 300x200 picture: a sky, a lawn and a disc (PNG written by hand)
python3 - "$tmp/pic.png" <<'PY' || exit 1
import struct, sys, zlib
w, h = 300, 200
raw = b"".join(b"\0" + b"".join(
    bytes((200, 40, 40) if (x - 150) ** 2 + (y - 110) ** 2 < 50 ** 2 else
          (120, 170, 230) if y < 80 else (60, 150, 60)) for x in range(w)) for y in range(h))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY

png_is() { # png_is FILE WIDTH HEIGHT COLOUR_TYPE (0 gray, 6 RGBA), 8-bit
    python3 - "$@" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
w, h, depth, ct = struct.unpack(">IIBB", d[16:26])
want = tuple(int(a) for a in sys.argv[2:5])
sys.exit(0 if d[:8] == b"\x89PNG\r\n\x1a\n" and depth == 8 and (w, h, ct) == want else 1)
PY
}

if "$rlx" segment -m "$tmp/sam.safetensors" -i "$tmp/pic.png" --point 150,110 \
    -o "$tmp/mask.png" --cutout "$tmp/cut.png" --json >"$tmp/out.json" 2>"$tmp/err"; then
    ok "a point: exit 0"
else
    bad "a point: $(cat "$tmp/err")"
fi
png_is "$tmp/mask.png" 300 200 0 && ok "the mask is a 300x200 gray PNG" || bad "the mask PNG"
png_is "$tmp/cut.png" 300 200 6 && ok "the cut-out is a 300x200 RGBA PNG" || bad "the cut-out PNG"
python3 - "$tmp/out.json" <<'PY' && ok "--json: three proposals, the chosen one the best" || bad "--json"
import json, struct, sys, zlib
o = json.load(open(sys.argv[1]))
p = o["proposals"]
assert (o["width"], o["height"]) == (300, 200) and len(p) == 3
assert max(range(3), key=lambda k: p[k]["iou"]) == o["chosen"]
for q in p:
    assert 0 <= q["area"] <= 300 * 200 and len(q["box"]) == 4 and 0 <= q["stability"] <= 1
PY
"$rlx" segment -m "$tmp/sam-hf.safetensors" -i "$tmp/pic.png" --point 150,110 \
    -o "$tmp/mask-hf.png" 2>/dev/null && cmp -s "$tmp/mask.png" "$tmp/mask-hf.png" &&
    ok "Hugging Face names: the same mask" || bad "Hugging Face names give another mask"
"$rlx" segment -m "$tmp/sam.pth" -i "$tmp/pic.png" --point 150,110 \
    -o "$tmp/mask-pth.png" 2>/dev/null && cmp -s "$tmp/mask.png" "$tmp/mask-pth.png" &&
    ok "the same weights as a torch.save .pth: the same mask" || bad "the .pth gives another mask"
"$rlx" info --json "$tmp/sam.pth" 2>/dev/null | python3 -c '
import json, struct, sys, zlib
o = json.load(sys.stdin)
assert o["format"] == "pytorch" and o["n_tensors"] > 100, o' &&
    ok "rlx info describes the .pth (format pytorch, over 100 tensors)" || bad "rlx info on the .pth"
"$rlx" segment -m "$tmp/sam.safetensors" -i "$tmp/pic.png" --point 150,110 --point 20,20,0 \
    --box 80,50,230,180 --json 2>/dev/null | python3 -c '
import json, sys
assert len(json.load(sys.stdin)["proposals"]) == 1' && ok "points and a box: one mask" ||
    bad "points and a box"

# refining the first mask: it goes back in as the mask prompt with one more click
"$rlx" segment -m "$tmp/sam.safetensors" -i "$tmp/pic.png" --point 150,110 --point 20,20,0 \
    --mask-input "$tmp/mask.png" -o "$tmp/refined.png" --json 2>"$tmp/err" | python3 -c '
import json, sys
assert len(json.load(sys.stdin)["proposals"]) == 1' && png_is "$tmp/refined.png" 300 200 0 &&
    ok "--mask-input: one refined 300x200 mask" || bad "--mask-input: $(cat "$tmp/err")"
"$rlx" segment -m "$tmp/sam-hf.safetensors" -i "$tmp/pic.png" --point 150,110 --point 20,20,0 \
    --mask-input "$tmp/mask.png" -o "$tmp/refined-hf.png" 2>/dev/null &&
    cmp -s "$tmp/refined.png" "$tmp/refined-hf.png" &&
    ok "--mask-input, Hugging Face names (mask_embed.*): the same mask" ||
    bad "--mask-input with Hugging Face names gives another mask"

# segment everything: a 4x4 grid, every proposal kept before the suppression
"$rlx" segment -m "$tmp/sam.safetensors" -i "$tmp/pic.png" --all --points-per-side 4 \
    --iou-threshold 0 --stability-threshold 0 -o "$tmp/labels.png" --json >"$tmp/all.json" \
    2>"$tmp/err" && ok "--all: exit 0" || bad "--all: $(cat "$tmp/err")"
png_is "$tmp/labels.png" 300 200 0 && ok "--all: a 300x200 label PNG" || bad "--all: the label PNG"
python3 - "$tmp/all.json" "$tmp/labels.png" <<'PY' && ok "--all: masks largest first, no two boxes overlapping past 0.7, labels 0..n" || bad "--all: the JSON or the labels"
import json, struct, sys, zlib
o = json.load(open(sys.argv[1]))
m = o["masks"]
assert o["points_per_side"] == 4 and 1 <= len(m) <= 48
assert all(m[i]["area"] >= m[i + 1]["area"] for i in range(len(m) - 1))
def iou(a, b):
    ix = min(a[2], b[2]) - max(a[0], b[0]); iy = min(a[3], b[3]) - max(a[1], b[1])
    inter = ix * iy if ix > 0 and iy > 0 else 0
    ua = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / ua if ua > 0 else 0
for i in range(len(m)):
    for j in range(i + 1, len(m)):
        assert iou(m[i]["box"], m[j]["box"]) <= 0.7 + 1e-6
# the label PNG's values (8-bit gray, PNG's row filters undone)
d = open(sys.argv[2], "rb").read()
w, h = struct.unpack(">II", d[16:24])
idat, at = b"", 8
while at < len(d):
    n, t = struct.unpack(">I4s", d[at:at + 8])
    if t == b"IDAT":
        idat += d[at + 8:at + 8 + n]
    at += 12 + n
raw, prev, hi = zlib.decompress(idat), bytearray(w), 0
for y in range(h):
    f, line = raw[y * (w + 1)], bytearray(raw[y * (w + 1) + 1:(y + 1) * (w + 1)])
    for x in range(w):
        a = line[x - 1] if x else 0
        b, c = prev[x], prev[x - 1] if x else 0
        p = a + b - c
        pr = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
        line[x] = (line[x] + (0, a, b, (a + b) // 2, pr)[f]) & 255
    hi, prev = max(hi, max(line)), line
assert hi <= len(m) and (hi >= 1 or not m), (hi, len(m))
PY

# one line, exit 1
refuse() { # refuse DESCRIPTION PATTERN ARGS...
    desc=$1 pat=$2
    shift 2
    "$rlx" segment "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    line=$(cat "$tmp/err")
    if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; then
        case "$line" in
        $pat) ok "$desc: $line" ;;
        *) bad "$desc: '$line' is not '$pat'" ;;
        esac
    else
        bad "$desc: exit $rc, stderr: $line"
    fi
}
m=$tmp/sam.safetensors
before=$(cksum <"$tmp/mask.png")
refuse "an existing -o" "rlx: segment: */mask.png exists; give --force to replace it" \
    -m "$m" -i "$tmp/pic.png" --point 1,1 -o "$tmp/mask.png"
[ "$(cksum <"$tmp/mask.png")" = "$before" ] && ok "the existing mask is untouched" || bad "the mask changed"
"$rlx" segment -m "$m" -i "$tmp/pic.png" --point 20,20 -o "$tmp/mask.png" --force 2>/dev/null &&
    ok "--force replaces it" || bad "--force"
echo "not a picture" >"$tmp/notes.png"
refuse "a text file as the picture" "rlx: */notes.png: this is not an image*" \
    -m "$m" -i "$tmp/notes.png" --point 1,1 --json
head -c $(($(wc -c <"$tmp/pic.png") / 2)) "$tmp/pic.png" >"$tmp/cut-short.png"
refuse "a truncated PNG" "rlx: *truncated*" -m "$m" -i "$tmp/cut-short.png" --point 1,1 --json
refuse "a point outside" "rlx: segment: the point 301,5 is outside the image, which is 300x200 pixels" \
    -m "$m" -i "$tmp/pic.png" --point 301,5 --json
refuse "a text file as the model" "rlx: *" -m "$tmp/notes.png" -i "$tmp/pic.png" --point 1,1 --json
head -c 100000 "$m" >"$tmp/short.safetensors"
refuse "a truncated model" "rlx: *" -m "$tmp/short.safetensors" -i "$tmp/pic.png" --point 1,1 --json
refuse "no prompt" "rlx: segment: say what to segment*" -m "$m" -i "$tmp/pic.png" --json
refuse "a bad label" "rlx: segment: --point wants X,Y or X,Y,1*" -m "$m" -i "$tmp/pic.png" --point 1,1,2 --json
refuse "an empty box" "rlx: segment: --box wants X0,Y0,X1,Y1*" -m "$m" -i "$tmp/pic.png" --box 5,5,5,9 --json
refuse "--all with a point" "rlx: segment: --all finds every object by itself*" \
    -m "$tmp/sam.safetensors" -i "$tmp/pic.png" --all --point 1,1 --json
refuse "--mask-input alone" "rlx: segment: --mask-input refines a mask with points or a box*" \
    -m "$m" -i "$tmp/pic.png" --mask-input "$tmp/mask.png" --json
python3 - "$tmp/small.png" <<'PY' || exit 1
import struct, sys, zlib
w, h = 30, 20
raw = b"".join(b"\0" + bytes(w) for y in range(h))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
    + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY
refuse "a mask input of another size" \
    "rlx: segment: */small.png: the mask is 30x20 pixels; a mask prompt must have the image's size, 300x200" \
    -m "$m" -i "$tmp/pic.png" --point 1,1 --mask-input "$tmp/small.png" --json
refuse "a grid too fine" "rlx: segment: --points-per-side wants 1 to 64, not '65'" \
    -m "$tmp/sam.safetensors" -i "$tmp/pic.png" --all --points-per-side 65 --json
# an .onnx model removes the background: no prompt, and other ONNX models are refused
cp "$tmp/notes.png" "$tmp/notes.onnx"
refuse ".onnx with a point" "rlx: segment: */notes.onnx removes the background by itself: leave --point*" \
    -m "$tmp/notes.onnx" -i "$tmp/pic.png" --point 1,1 --json
refuse ".onnx with --all" "rlx: segment: *removes the background by itself*" \
    -m "$tmp/notes.onnx" -i "$tmp/pic.png" --all --json
refuse ".onnx, nothing to write" "rlx: segment: nothing to write: give --cutout OUT.png*" \
    -m "$tmp/notes.onnx" -i "$tmp/pic.png"
refuse "a text file as the .onnx model" "rlx: *notes.onnx*" -m "$tmp/notes.onnx" -i "$tmp/pic.png" --json
conv=/usr/share/libonnx-testdata/data/node/test_conv_with_strides_and_asymmetric_padding/model.onnx
if [ -f "$conv" ]; then
    refuse "an ONNX model of another kind" "rlx: segment: */model.onnx is not a background-removal model*" \
        -m "$conv" -i "$tmp/pic.png" --json
fi
exit $fail
