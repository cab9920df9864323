#!/bin/sh
# rlx imagine end to end on the tiny random-weight FLUX.2 [klein] folders of
# tests/flux2-model-writer.h (written by write-flux2-model; the tokenizer and
# the TAEF2 preview decoder are the real ones of ../shared/data): a 256x256
# PNG with its settings in a "parameters" text chunk, a TAEF2 preview PNG per
# step that changes from step to step, the same seed giving the same picture,
# nothing replaced without --force, the same transformer as one BFL-named
# file (safetensors: the same pixels; GGUF Q8_0: within 35 dB), a size
# rounded to a multiple of 16 with a note, the base model with a negative
# prompt, and bad input refused with exit status 1, one line and no PNG. Random weights make the pictures
# noise: test-flux2 checks the numbers against PyTorch.
set -u
rlx=$1
writer=$2
data=$3
. "$(dirname "$0")/../need-data.sh"
rlx_need_data "$data/tokenizers/hf-qwen3/tokenizer.json" "$data/vae/taef2_decoder.safetensors"
taef2=$data/vae/taef2_decoder.safetensors
tmp=${TMPDIR:-/tmp}/rlx-imagine.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fail=1; }

"$writer" "$tmp/tiny" || exit 1
"$writer" "$tmp/tiny-base" --base || exit 1
run() { "$rlx" imagine -t 2 -W 256 -H 256 --steps 2 "$@"; }

png_is() { # png_is FILE WIDTH HEIGHT: an 8-bit RGB PNG of that size
    python3 - "$@" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
w, h, depth, ct = struct.unpack(">IIBB", d[16:26])
sys.exit(0 if d[:8] == b"\x89PNG\r\n\x1a\n" and (w, h, depth, ct) ==
         (int(sys.argv[2]), int(sys.argv[3]), 8, 2) else 1)
PY
}
params() { # the PNG's "parameters" tEXt chunk
    python3 - "$1" <<'PY'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
i = 8
while i < len(d):
    n, t = struct.unpack(">I4s", d[i:i + 8])
    body = d[i + 8:i + 8 + n]
    if t == b"tEXt" and body.startswith(b"parameters\0"):
        sys.stdout.write(body[len(b"parameters\0"):].decode("latin-1"))
    elif t == b"iTXt" and body.startswith(b"parameters\0"):
        rest = body[len(b"parameters\0"):]
        flag, method = rest[0], rest[1]
        rest = rest[2:]
        rest = rest[rest.index(b"\0") + 1:]
        rest = rest[rest.index(b"\0") + 1:]
        sys.stdout.write((zlib.decompress(rest) if flag else rest).decode("utf-8"))
    i += 12 + n
PY
}

# a picture, with previews
if run -m "$tmp/tiny" -p "a red cat" --seed 7 -o "$tmp/cat.png" --preview-dir "$tmp/prev" \
    --preview-decoder "$taef2" 2>"$tmp/err"; then
    ok "a picture: exit 0"
else
    bad "a picture: $(cat "$tmp/err")"
fi
png_is "$tmp/cat.png" 256 256 && ok "a 256x256 RGB PNG" || bad "the PNG"
params "$tmp/cat.png" >"$tmp/params.txt"
p=$(cat "$tmp/params.txt")
case $p in
"a red cat"*"Steps: 2"*"Seed: 7"*"Size: 256x256"*"Model: tiny (FLUX.2 custom)"*)
    ok "the parameters chunk: prompt, steps, seed, size, model" ;;
*) bad "the parameters chunk: '$p'" ;;
esac
grep -q "step 2 of 2" "$tmp/err" && ok "progress per step on stderr" || bad "no progress lines"
png_is "$tmp/prev/step-01.png" 256 256 && png_is "$tmp/prev/step-02.png" 256 256 &&
    ok "--preview-dir: a 256x256 preview PNG per step (the folder made)" || bad "the previews"
cmp -s "$tmp/prev/step-01.png" "$tmp/prev/step-02.png" && bad "the previews do not change" ||
    ok "the previews change from step to step"

# the same seed, the same picture; another seed, another one
run -m "$tmp/tiny" -p "a red cat" --seed 7 -o "$tmp/cat2.png" 2>/dev/null &&
    cmp -s "$tmp/cat.png" "$tmp/cat2.png" && ok "the same seed: the same PNG" ||
    bad "the same seed gives another PNG"
run -m "$tmp/tiny" -p "a red cat" --seed 8 -o "$tmp/cat3.png" 2>/dev/null &&
    ! cmp -s "$tmp/cat.png" "$tmp/cat3.png" && ok "another seed: another PNG" ||
    bad "another seed gives the same PNG"

# the same transformer as a single file with BFL names (BF16 safetensors: the
# same pixels; GGUF Q8_0 and FP8 (E4M3 with per-tensor scales, as BFL's FP8
# file): within the quantization's error, measured 50 and 52 dB), with the
# folder's text encoder and VAE
pixels_psnr() { # pixels_psnr A.png B.png: the PSNR of two 8-bit RGB PNGs (99 when equal)
    python3 - "$1" "$2" <<'PY'
import math, struct, sys, zlib
def rgb(path):
    d = open(path, "rb").read()
    w, h = struct.unpack(">II", d[16:24])
    i, idat = 8, b""
    while i < len(d):
        n, t = struct.unpack(">I4s", d[i:i + 8])
        if t == b"IDAT":
            idat += d[i + 8:i + 8 + n]
        i += 12 + n
    raw, out, prev, s = zlib.decompress(idat), bytearray(), bytearray(3 * w), 3 * w + 1
    for y in range(h):
        f, line = raw[y * s], bytearray(raw[y * s + 1:(y + 1) * s])
        for x in range(3 * w):
            a = line[x - 3] if x >= 3 else 0
            b, c = prev[x], prev[x - 3] if x >= 3 else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += line
        prev = line
    return out
a, b = rgb(sys.argv[1]), rgb(sys.argv[2])
se = sum((x - y) ** 2 for x, y in zip(a, b))
print(99 if se == 0 else round(10 * math.log10(255 ** 2 * len(a) / se), 1))
PY
}
"$writer" --transformer "$tmp/t.safetensors" && "$writer" --transformer "$tmp/t.gguf" &&
    "$writer" --transformer "$tmp/t-fp8.safetensors" --fp8 || exit 1
for f in t.safetensors t.gguf t-fp8.safetensors; do
    if run -m "$tmp/$f" --text-encoder "$tmp/tiny/text_encoder" --vae "$tmp/tiny/vae" \
        -p "a red cat" --seed 7 -o "$tmp/$f.png" 2>"$tmp/err"; then
        db=$(pixels_psnr "$tmp/cat.png" "$tmp/$f.png")
        case $f in
        t-fp8.safetensors) python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 35 else 1)" "$db" &&
            ok "a single FP8 $f: $db dB from the folder's picture (>= 35)" ||
            bad "a single FP8 $f: $db dB from the folder's picture" ;;
        *.safetensors) [ "$db" = 99 ] && ok "a single BFL-named $f: the same pixels" ||
            bad "a single BFL-named $f: $db dB from the folder's picture" ;;
        *) python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 35 else 1)" "$db" &&
            ok "a single Q8_0 $f: $db dB from the folder's picture (>= 35)" ||
            bad "a single Q8_0 $f: $db dB from the folder's picture" ;;
        esac
    else
        bad "a single transformer file $f: $(cat "$tmp/err")"
    fi
done

# nothing replaced without --force
cp "$tmp/cat3.png" "$tmp/keep.png"
if run -m "$tmp/tiny" -p "a red cat" --seed 7 -o "$tmp/cat3.png" 2>"$tmp/err"; then
    bad "an existing OUT.png replaced without --force"
else
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && cmp -s "$tmp/cat3.png" "$tmp/keep.png" &&
        ok "an existing OUT.png: exit 1, one line, untouched ($(cat "$tmp/err"))" ||
        bad "an existing OUT.png: $(cat "$tmp/err")"
fi
run -m "$tmp/tiny" -p "a red cat" --seed 7 -o "$tmp/cat3.png" --force 2>/dev/null &&
    cmp -s "$tmp/cat.png" "$tmp/cat3.png" && ok "--force replaces it" || bad "--force"

# a size not a multiple of 16: rounded with a note
if "$rlx" imagine -t 2 -W 250 -H 200 --steps 1 -m "$tmp/tiny" -p "a red cat" \
    -o "$tmp/odd.png" 2>"$tmp/err"; then
    grep -q "note: 250 x 200 is not a multiple of 16" "$tmp/err" && png_is "$tmp/odd.png" 256 208 &&
        ok "250x200: rounded to 256x208 with a note" || bad "250x200: $(cat "$tmp/err")"
else
    bad "250x200: $(cat "$tmp/err")"
fi

# the base model: classifier-free guidance with a negative prompt
if run -m "$tmp/tiny-base" -p "a red cat" --negative "dark" --guidance 4 --seed 7 \
    -o "$tmp/base.png" 2>"$tmp/err"; then
    params "$tmp/base.png" | grep -q "Negative prompt: dark" &&
        grep -q "(base)" "$tmp/err" && ok "the base model with a negative prompt" ||
        bad "the base model: $(cat "$tmp/err")"
else
    bad "the base model: $(cat "$tmp/err")"
fi

# bad input: exit 1, one line, no PNG
mkdir "$tmp/no-vae"
for part in model_index.json transformer text_encoder tokenizer; do
    ln -s "$tmp/tiny/$part" "$tmp/no-vae/$part"
done
mkdir "$tmp/unknown"
cp -r "$tmp/tiny/transformer" "$tmp/unknown/transformer"
for part in model_index.json text_encoder tokenizer vae; do
    ln -s "$tmp/tiny/$part" "$tmp/unknown/$part"
done
# a transformer config that does not match its weights
sed 's/"num_attention_heads": 2/"num_attention_heads": 3/' "$tmp/tiny/transformer/config.json" \
    >"$tmp/unknown/transformer/config.json"
echo "not a picture" >"$tmp/junk.png"
n=0
# A LoRA (kohya names, on proj_out: B [128, 4], A [4, 256], alpha 4) made
# here; the same seed with it gives another picture, with strength 0 the
# same one, and the parameters chunk names it. wide-lora is the same module
# at klein 4B's width (3072), which this model lacks.
python3 - "$tmp" <<'PY'
import json, math, struct, sys
def st(path, tensors):
    hdr, off, body = {}, 0, b""
    for name, shape, vals in tensors:
        data = struct.pack("<%df" % len(vals), *vals)
        hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        body += data
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + body)
def lora(path, width):
    a = [math.sin(i * 0.37) * 0.2 for i in range(4 * width)]
    b = [math.cos(i * 0.11) * 0.5 for i in range(128 * 4)]
    st(path, [("lora_unet_final_layer_linear.lora_down.weight", [4, width], a),
              ("lora_unet_final_layer_linear.lora_up.weight", [128, 4], b),
              ("lora_unet_final_layer_linear.alpha", [], [4.0])])
lora(sys.argv[1] + "/style-lora.safetensors", 256)
lora(sys.argv[1] + "/wide-lora.safetensors", 3072)
PY
run -m "$tmp/tiny" -p "a red cat" --seed 7 -o "$tmp/plain.png" 2>"$tmp/err" || bad "without a LoRA: $(cat "$tmp/err")"
if run -m "$tmp/tiny" -p "a red cat" --seed 7 -o "$tmp/lora.png" \
    --lora "$tmp/style-lora.safetensors:0.9" 2>"$tmp/err"; then
    ok "a LoRA: exit 0"
else
    bad "a LoRA: $(cat "$tmp/err")"
fi
run -m "$tmp/tiny" -p "a red cat" --seed 7 -o "$tmp/lora0.png" \
    --lora "$tmp/style-lora.safetensors:0" 2>"$tmp/err" || bad "a LoRA at 0: $(cat "$tmp/err")"
pixels() { python3 -c "
import sys, zlib, struct
d = open(sys.argv[1], 'rb').read(); i = 8; idat = b''
while i < len(d):
    n, t = struct.unpack('>I4s', d[i:i + 8])
    if t == b'IDAT': idat += d[i + 8:i + 8 + n]
    i += 12 + n
print(zlib.crc32(zlib.decompress(idat)))" "$1"; }
if [ -f "$tmp/lora.png" ] && [ "$(pixels "$tmp/lora.png")" != "$(pixels "$tmp/plain.png")" ]; then
    ok "a LoRA changes the picture"
else
    bad "the LoRA left the picture as it was"
fi
[ -f "$tmp/lora0.png" ] && [ "$(pixels "$tmp/lora0.png")" = "$(pixels "$tmp/plain.png")" ] &&
    ok "a LoRA at strength 0 changes nothing" || bad "a LoRA at strength 0 changed the picture"
case $(params "$tmp/lora.png") in
*"LoRA: style-lora.safetensors:0.9"*) ok "the parameters chunk names the LoRA" ;;
*) bad "the parameters chunk: $(params "$tmp/lora.png")" ;;
esac

while IFS='|' read -r what words args; do
    n=$((n + 1))
    out=$tmp/bad-$n.png
    # shellcheck disable=SC2086
    eval "set -- $args"
    if "$rlx" imagine -t 2 -W 256 -H 256 --steps 1 -o "$out" "$@" 2>"$tmp/err"; then
        bad "$what: exit 0"
    elif [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -qi -- "$words" "$tmp/err"; then
        bad "$what: $(cat "$tmp/err")"
    elif [ -e "$out" ]; then
        bad "$what: a PNG was left"
    else
        ok "$what: exit 1, one line ($(cat "$tmp/err"))"
    fi
done <<EOF2
a folder missing its VAE|no vae folder|-m "$tmp/no-vae" -p cat
a transformer that is not what its config says|different models|-m "$tmp/unknown" -p cat
a folder that does not exist|does not exist|-m "$tmp/nowhere" -p cat
an empty prompt|prompt is empty|-m "$tmp/tiny" -p "  "
0 steps|--steps|-m "$tmp/tiny" -p cat --steps 0
a LoRA file that does not exist|the LoRA file|-m "$tmp/tiny" -p cat --lora "$tmp/style.safetensors:0.8"
a LoRA for another model|not for this FLUX.2 model|-m "$tmp/tiny" -p cat --lora "$tmp/wide-lora.safetensors"
an init picture that cannot be read|--init|-m "$tmp/tiny" -p cat --init "$tmp/junk.png"
a budget too small|budget|-m "$tmp/tiny" -p cat --memory-budget 1M
a single transformer file without a text encoder|text encoder|-m "$tmp/tiny/transformer/diffusion_pytorch_model-00001-of-00002.safetensors" -p cat
EOF2
exit $fail
