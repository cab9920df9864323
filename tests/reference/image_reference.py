#!/usr/bin/python3
"""Independent reference for engine/image/image.c (tests/test-image.c).

Writes small fixtures under tests/fixtures/image/ (every file < 200 KB):

PNG decoding: png-<case>.png, 13x7 pixels, written here byte by byte (zlib,
  filter 0, Adam7 where the name says "interlaced") in every colour type and
  bit depth, and png-<case>.rgba: the expected 8-bit RGBA (alpha 255 where the
  file has none). Expectations follow the PNG specification's sample scaling:
  gray of 1/2/4 bits times 255/(2^bits-1) (libpng's expand), 16-bit samples
  keep their high byte (libpng's strip_16; PIL's RGB;16B does the same, which
  is checked here for the 8- and 16-bit RGB(A) and palette cases).
JPEG decoding: jpeg-orient<N>.jpg, a 48x32 crop of skimage's astronaut with
  EXIF Orientation N (1..8), jpeg-gray.jpg, jpeg-cmyk.jpg, jpeg-1x1.jpg; each
  .rgb is PIL's decoding (the same system libjpeg-turbo) after
  ImageOps.exif_transpose, converted to RGB.
Preprocessing: photo-<name>.png (astronaut 96x96, coffee 96x64, chelsea
  90x60, scaled down here with PIL so the fixtures stay small) and, with
  target 64 (the same code path as 1024),
  prep-sam-<name>.u8   the uint8 image SAM's ResizeLongestSide.apply_image
                       makes: PIL Image.resize((neww, newh), BILINEAR), which
                       is what torchvision's F.resize does to a PIL image
                       (torchvision is not installed here; _functional_pil
                       .resize calls img.resize(size[::-1], interpolation) and
                       BILINEAR maps to PIL's BILINEAR)
  prep-sam-<name>.f32  Sam.preprocess: (x - pixel_mean) / pixel_std in torch
                       float32, F.pad to 64x64 at the bottom/right, [3][64][64]
  prep-sam2-<name>.f32 SAM2Transforms: ToTensor (x / 255), Resize((64, 64))
                       on the tensor = F.interpolate(bilinear,
                       align_corners=False, antialias=True), Normalize
  prep-up-chelsea.u8   chelsea to longest side 160 (an upscale), PIL BILINEAR
Masks: mask-lowres.f32 (16x16 logits), mask-sam.f32 (Sam.postprocess_masks for
  coffee at target 64: interpolate to 64x64, crop to 43x64, interpolate to
  64x96) and mask-sam2.f32 (SAM2: interpolate straight to 64x96).
Hostile: png-huge-header.png (IHDR 30000x30000), png-1x1.png, not-image.txt.

Run: /usr/bin/python3 tests/reference/image_reference.py tests/fixtures/image
"""
import io
import os
import struct
import sys
import zlib

import numpy as np
import skimage.data
import torch
import torch.nn.functional as F
from PIL import Image, ImageOps

W, H = 13, 7
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/image"
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(18)


def put(name, data):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(data)
    assert len(data) < 200 * 1024, name


def chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def pack_row(samples, bits):
    """One scanline's samples (flat, already per channel) packed MSB first."""
    if bits == 16:
        return b"".join(struct.pack(">H", int(v)) for v in samples)
    if bits == 8:
        return bytes(int(v) for v in samples)
    out, acc, n = bytearray(), 0, 0
    for v in samples:
        acc = (acc << bits) | int(v)
        n += bits
        if n == 8:
            out.append(acc)
            acc, n = 0, 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]


def write_png(samples, bits, ctype, interlaced=False, extra=b""):
    """samples: [H][W][channels] ints at the file's bit depth."""
    h, w = samples.shape[:2]
    raw = bytearray()
    if interlaced:
        for x0, y0, dx, dy in ADAM7:
            sub = samples[y0::dy, x0::dx]
            if sub.size == 0:
                continue
            for row in sub:
                raw += b"\0" + pack_row(row.reshape(-1), bits)
    else:
        for row in samples:
            raw += b"\0" + pack_row(row.reshape(-1), bits)
    ihdr = struct.pack(">IIBBBBB", w, h, bits, ctype, 0, 0, 1 if interlaced else 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra +
            chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))


def png_cases():
    cases = []
    for bits in (1, 2, 4, 8, 16):
        g = rng.integers(0, 1 << bits, size=(H, W, 1))
        exp = g[..., 0] * 255 // ((1 << bits) - 1) if bits < 16 else g[..., 0] >> 8
        cases.append((f"gray{bits}", g, bits, 0, False, b"",
                      np.stack([exp] * 3 + [np.full_like(exp, 255)], -1)))
    # gray 2-bit, interlaced (sub-byte samples in Adam7 passes)
    g = rng.integers(0, 4, size=(H, W, 1))
    exp = g[..., 0] * 85
    cases.append(("gray2-interlaced", g, 2, 0, True, b"",
                  np.stack([exp] * 3 + [np.full_like(exp, 255)], -1)))
    # gray 8-bit with a tRNS colour: that value becomes transparent
    g = rng.integers(0, 4, size=(H, W, 1)) * 60
    exp = g[..., 0]
    cases.append(("gray8-trns", g, 8, 0, False, chunk(b"tRNS", struct.pack(">H", 120)),
                  np.stack([exp] * 3 + [np.where(exp == 120, 0, 255)], -1)))
    for bits in (8, 16):
        for il in (False, True):
            rgb = rng.integers(0, 1 << bits, size=(H, W, 3))
            e = rgb if bits == 8 else rgb >> 8
            cases.append((f"rgb{bits}" + ("-interlaced" if il else ""), rgb, bits, 2, il, b"",
                          np.concatenate([e, np.full((H, W, 1), 255)], -1)))
            ga = rng.integers(0, 1 << bits, size=(H, W, 2))
            e = ga if bits == 8 else ga >> 8
            cases.append((f"ga{bits}" + ("-interlaced" if il else ""), ga, bits, 4, il, b"",
                          np.stack([e[..., 0]] * 3 + [e[..., 1]], -1)))
            rgba = rng.integers(0, 1 << bits, size=(H, W, 4))
            e = rgba if bits == 8 else rgba >> 8
            cases.append((f"rgba{bits}" + ("-interlaced" if il else ""), rgba, bits, 6, il, b"",
                          e))
    for bits in (1, 2, 4, 8):
        n = 1 << bits
        pal = rng.integers(0, 256, size=(n, 3))
        idx = rng.integers(0, n, size=(H, W, 1))
        trns = rng.integers(0, 256, size=max(1, n // 2)) if bits in (4, 8) else None
        extra = chunk(b"PLTE", bytes(pal.reshape(-1).astype(np.uint8)))
        alpha = np.full(n, 255)
        if trns is not None:
            extra += chunk(b"tRNS", bytes(trns.astype(np.uint8)))
            alpha[:len(trns)] = trns
        e = np.concatenate([pal[idx[..., 0]], alpha[idx[..., 0]][..., None]], -1)
        cases.append((f"pal{bits}" + ("-trns" if trns is not None else ""), idx, bits, 3,
                      bits == 4, extra, e))
    return cases


def pil_rgba(data):
    im = Image.open(io.BytesIO(data))
    if im.mode == "RGB":
        return np.concatenate([np.array(im), np.full(im.size[::-1] + (1,), 255, np.uint8)], -1)
    return np.array(im.convert("RGBA"))


names = []
for name, s, bits, ctype, il, extra, exp in png_cases():
    data = write_png(s, bits, ctype, il, extra)
    exp = exp.astype(np.uint8)
    # the hand-written file must be the picture we think it is: PIL agrees
    # wherever it reads the mode to 8-bit RGB(A) itself
    if ctype in (2, 6, 3) or (ctype == 4 and bits == 8):
        assert np.array_equal(pil_rgba(data), exp), name
    put(f"png-{name}.png", data)
    put(f"png-{name}.rgba", exp.tobytes())
    names.append(name)
print("PNG cases:", " ".join(names))

# ---- JPEG ---------------------------------------------------------------
astro = skimage.data.astronaut()  # 512x512 RGB
crop = Image.fromarray(astro[64:448, 0:512]).resize((48, 32), Image.BILINEAR)
for o in range(1, 9):
    buf = io.BytesIO()
    if o == 1:
        crop.save(buf, "JPEG", quality=90)
    else:
        ex = Image.Exif()
        ex[0x0112] = o
        crop.save(buf, "JPEG", quality=90, exif=ex.tobytes())
    data = buf.getvalue()
    im = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
    if o >= 5:
        assert im.size == (32, 48)
    put(f"jpeg-orient{o}.jpg", data)
    put(f"jpeg-orient{o}.rgb", np.array(im).tobytes())
for name, mode in (("gray", "L"), ("cmyk", "CMYK")):
    buf = io.BytesIO()
    crop.convert(mode).save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    put(f"jpeg-{name}.jpg", data)
    put(f"jpeg-{name}.rgb", np.array(Image.open(io.BytesIO(data)).convert("RGB")).tobytes())
buf = io.BytesIO()
Image.new("RGB", (1, 1), (200, 30, 90)).save(buf, "JPEG", quality=95)
put("jpeg-1x1.jpg", buf.getvalue())
put("jpeg-1x1.rgb", np.array(Image.open(io.BytesIO(buf.getvalue())).convert("RGB")).tobytes())

# ---- Preprocessing --------------------------------------------------------
MEAN1 = torch.tensor([123.675, 116.28, 103.53]).view(-1, 1, 1)
STD1 = torch.tensor([58.395, 57.12, 57.375]).view(-1, 1, 1)
MEAN2 = torch.tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
STD2 = torch.tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
T = 64


def preprocess_shape(oldh, oldw, long_side):
    # segment_anything/utils/transforms.py ResizeLongestSide.get_preprocess_shape
    scale = long_side * 1.0 / max(oldh, oldw)
    newh, neww = oldh * scale, oldw * scale
    return int(newh + 0.5), int(neww + 0.5)


photos = {
    "astronaut": Image.fromarray(skimage.data.astronaut()).resize((96, 96), Image.BILINEAR),
    "coffee": Image.fromarray(skimage.data.coffee()).resize((96, 64), Image.BILINEAR),
    "chelsea": Image.fromarray(skimage.data.chelsea()).resize((90, 60), Image.BILINEAR),
}
for name, im in photos.items():
    buf = io.BytesIO()
    im.save(buf, "PNG")
    put(f"photo-{name}.png", buf.getvalue())
    arr = np.array(im)
    h, w = preprocess_shape(arr.shape[0], arr.shape[1], T)
    # ResizeLongestSide.apply_image: np.array(resize(to_pil_image(image), (h, w)))
    r = np.array(Image.fromarray(arr).resize((w, h), Image.BILINEAR))
    put(f"prep-sam-{name}.u8", r.tobytes())
    x = torch.as_tensor(r).permute(2, 0, 1).contiguous()
    x = (x - MEAN1) / STD1  # Sam.preprocess, uint8 - float32 -> float32
    x = F.pad(x, (0, T - w, 0, T - h))
    assert x.dtype == torch.float32
    put(f"prep-sam-{name}.f32", x.numpy().astype("<f4").tobytes())
    # SAM2Transforms: ToTensor, Resize((T, T)) (antialias on tensors), Normalize
    y = torch.from_numpy(arr).permute(2, 0, 1).contiguous().to(torch.float32).div(255)
    y = F.interpolate(y[None], (T, T), mode="bilinear", align_corners=False, antialias=True)[0]
    y = (y - MEAN2) / STD2
    put(f"prep-sam2-{name}.f32", y.numpy().astype("<f4").tobytes())
arr = np.array(photos["chelsea"])
h, w = preprocess_shape(arr.shape[0], arr.shape[1], 160)
put("prep-up-chelsea.u8", np.array(Image.fromarray(arr).resize((w, h), Image.BILINEAR)).tobytes())
print("upscaled chelsea:", w, h)

# ---- Masks ------------------------------------------------------------------
yy, xx = np.mgrid[0:16, 0:16].astype(np.float32)
lo = (6.0 * np.exp(-((xx - 6.5) ** 2 + (yy - 5.0) ** 2) / 18.0) - 2.0 +
      0.5 * rng.standard_normal((16, 16))).astype(np.float32)
put("mask-lowres.f32", lo.astype("<f4").tobytes())
m = torch.from_numpy(lo)[None, None]
oh, ow = 64, 96  # coffee
ih, iw = preprocess_shape(oh, ow, T)
# Sam.postprocess_masks
s1 = F.interpolate(m, (T, T), mode="bilinear", align_corners=False)
s1 = s1[..., :ih, :iw]
s1 = F.interpolate(s1, (oh, ow), mode="bilinear", align_corners=False)
put("mask-sam.f32", s1[0, 0].numpy().astype("<f4").tobytes())
# SAM2Transforms.postprocess_masks
s2 = F.interpolate(m, (oh, ow), mode="bilinear", align_corners=False)
put("mask-sam2.f32", s2[0, 0].numpy().astype("<f4").tobytes())
print("mask: resized", iw, ih, "positive", int((s1 > 0).sum()), int((s2 > 0).sum()))

# ---- Hostile and tiny -----------------------------------------------------------
ihdr = struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0)
put("png-huge-header.png", b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
    chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))
put("png-1x1.png", write_png(np.array([[[10, 20, 30]]]), 8, 2))
put("not-image.txt", b"This is a text file, not a picture.\n" * 4)
