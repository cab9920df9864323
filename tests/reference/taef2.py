#!/usr/bin/python3
"""Independent PyTorch reference for the TAEF2 tiny autoencoder.

Builds the network from the structure described in ../shared/data/README.md
(not from our C code), loads the real fp16 safetensors weights, and writes
small fixtures for tests/test-taef2.c:

  tests/fixtures/taef2-image-256.u8   256x256 RGB crop (the face) of skimage's astronaut, HWC u8
  tests/fixtures/taef2-latent-32.f32  encoder(image): 32x32x32 CHW f32
  tests/fixtures/taef2-decoded-16.f32 decoder(top-left 16x16 of that latent): 3x128x128 CHW f32

It also prints encode->decode PSNRs (about 32 dB for the crop, about 9 dB
for random latents, as the weights' publisher states).

Run: /usr/bin/python3 tests/reference/taef2.py ../shared/data/vae tests/fixtures
(needs Debian's python3-torch, python3-numpy and python3-skimage).
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F16"
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype="<f2").reshape(info["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float32))
    return out


def conv(w, p, x, stride=1, bias=True):
    k = w[p + ".weight"]
    return F.conv2d(x, k, w[p + ".bias"] if bias else None, stride=stride,
                    padding=k.shape[-1] // 2)


def block(w, p, x, pooled):
    # the deepest blocks first add a "pool" branch to their input
    if pooled:
        y = F.conv2d(x, w[p + ".pool.0.weight"])
        y = F.group_norm(y, 4, w[p + ".pool.1.weight"], w[p + ".pool.1.bias"], eps=1e-5)
        y = F.conv2d(F.relu(y), w[p + ".pool.3.weight"])
        x = x + y
    h = F.relu(conv(w, p + ".conv.0", x))
    h = F.relu(conv(w, p + ".conv.2", h))
    h = conv(w, p + ".conv.4", h)
    return F.relu(h + x)  # channels never change inside these blocks: identity skip


def encode(w, img):
    x = conv(w, "0", img)
    x = block(w, "1", x, False)
    for down, blocks in (("2", "345"), ("6", "789"), ("10", ["11", "12", "13"])):
        x = conv(w, down, x, stride=2, bias=False)
        for b in blocks:
            x = block(w, b, x, down == "10")
    return conv(w, "14", x)


def decode(w, z):
    x = torch.tanh(z / 3) * 3
    x = F.relu(conv(w, "1", x))
    for b in "345":
        x = block(w, b, x, True)
    for up, blocks in (("7", ["8", "9", "10"]), ("12", ["13", "14", "15"]), ("17", ["18"])):
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        x = conv(w, up, x, bias=False)
        for b in blocks:
            x = block(w, b, x, False)
    return conv(w, "19", x).clamp(0, 1)


def psnr(a, b):
    mse = float(((a - b) ** 2).mean())
    return 10 * np.log10(1.0 / mse)


def main():
    vae, out = sys.argv[1], sys.argv[2]
    from skimage import data
    enc = load_safetensors(vae + "/taef2_encoder.safetensors")
    dec = load_safetensors(vae + "/taef2_decoder.safetensors")
    full = data.astronaut()  # 512x512x3 u8, public domain (NASA)
    crop = np.ascontiguousarray(full[0:256, 128:384])
    crop.tofile(out + "/taef2-image-256.u8")
    img = torch.from_numpy(crop.astype(np.float32) / 255).permute(2, 0, 1)[None]
    with torch.no_grad():
        torch.set_num_threads(1)
        lat = encode(enc, img)
        rec = decode(dec, lat)
        print("latent", tuple(lat.shape), "PSNR 256 crop: %.2f dB" % psnr(rec.numpy(), img.numpy()))
        part = decode(dec, lat[:, :, :16, :16].contiguous())
        big = torch.from_numpy(full.astype(np.float32) / 255).permute(2, 0, 1)[None]
        print("PSNR full 512: %.2f dB" % psnr(decode(dec, encode(enc, big)).numpy(), big.numpy()))
        noise = torch.randn(1, 32, 16, 16, generator=torch.Generator().manual_seed(0))
        print("PSNR random latents: %.2f dB" % psnr(decode(dec, noise).numpy(), img[:, :, :128, :128].numpy()))
    lat[0].numpy().astype("<f4").tofile(out + "/taef2-latent-32.f32")
    part[0].numpy().astype("<f4").tofile(out + "/taef2-decoded-16.f32")


if __name__ == "__main__":
    main()
