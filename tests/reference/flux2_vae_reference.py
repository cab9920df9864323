#!/usr/bin/python3
"""Reference outputs for tests/test-flux2-vae.c: the FLUX.2 VAE in plain PyTorch.

    /usr/bin/python3 tests/reference/flux2_vae_reference.py tests/fixtures

The network is written here from the published description (diffusers'
AutoencoderKLFlux2 with its Encoder / Decoder / ResnetBlock2D / UNetMidBlock2D
/ Attention, and Flux2KleinPipeline's _patchify_latents, _unpatchify_latents
and bn normalization), not from models/diffusion. It runs at the real widths
of FLUX.2 [klein]'s VAE: block_out_channels 128 256 512 512, 2 resnets per
encoder level and 3 per decoder level, 32 latent channels, GroupNorm(32,
eps 1e-6), one 512-wide attention head in each mid block, quant_conv and
post_quant_conv, bn over the 128 packed channels with eps 1e-4.

Weights: every tensor of the diffusers state dict, by its diffusers name, from
the generator of tests/whisper-writer.h (splitmix64 / fnv1a64),

    u(name, i) = 2 * (splitmix64(fnv1a64(name) + (i + 1) * 0x9e3779b97f4a7c15) >> 40) / 2^24 - 1

scaled by kind in float32, then rounded to float16 (the test writes F16 files):
    conv / linear weights     u * (float)sqrt(3 / fan_in)   (fan_in = Cin * kh * kw)
    GroupNorm weights         1 + u / 8
    biases                    u / 16
    bn.running_mean           u / 4
    bn.running_var            1 + u / 2
tests/flux2-vae-writer.c writes the same values under diffusers and BFL names
(a BFL tensor hashes its diffusers name: the two files hold equal weights).

Inputs: the packed latent [128][4][6] is u("packed", i) * 2; the image
[3][64][96] (rows x columns; not square, so a swapped axis shows) is
(u("image", i) + 1) / 2, in [0, 1).

Fixture tests/fixtures/flux2-vae-ref.f32 (float32 little-endian), in order:
    [3][64][96]    decode(packed): RGB in [0, 1]
    [128][4][6]    encode(image): the packed, normalized distribution mean
    [32][8][12]    the raw latent of `packed` (bn de-normalized, unpatchified)
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

CH = (128, 256, 512, 512)
LAT = 32
GROUPS = 32
GN_EPS = 1e-6
BN_EPS = 1e-4
LH, LW = 4, 6  # packed latent; the image is 16x larger
IMG_H, IMG_W = 16 * LH, 16 * LW


def fnv1a64(name):
    h = 0xcbf29ce484222325
    for ch in name.encode():
        h = ((h ^ ch) * 0x100000001b3) & 0xffffffffffffffff
    return h


def uniform(name, n):
    with np.errstate(over='ignore'):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(fnv1a64(name)) + i * np.uint64(0x9e3779b97f4a7c15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        z = z ^ (z >> np.uint64(31))
    k = (z >> np.uint64(40)).astype(np.int64) - (1 << 23)
    return (k.astype(np.float32) / np.float32(8388608.0)).astype(np.float32)


def specs():
    """(diffusers name, shape) of every tensor."""
    s = []

    def conv(p, cin, cout, k):
        s.append((p + '.weight', (cout, cin, k, k)))
        s.append((p + '.bias', (cout,)))

    def gn(p, c):
        s.append((p + '.weight', (c,)))
        s.append((p + '.bias', (c,)))

    def res(p, cin, cout):
        gn(p + '.norm1', cin)
        conv(p + '.conv1', cin, cout, 3)
        gn(p + '.norm2', cout)
        conv(p + '.conv2', cout, cout, 3)
        if cin != cout:
            conv(p + '.conv_shortcut', cin, cout, 1)

    def mid(p, c):
        res(p + '.mid_block.resnets.0', c, c)
        gn(p + '.mid_block.attentions.0.group_norm', c)
        for n in ('to_q', 'to_k', 'to_v', 'to_out.0'):
            s.append((p + '.mid_block.attentions.0.%s.weight' % n, (c, c)))
            s.append((p + '.mid_block.attentions.0.%s.bias' % n, (c,)))
        res(p + '.mid_block.resnets.1', c, c)

    s.append(('bn.running_mean', (4 * LAT,)))
    s.append(('bn.running_var', (4 * LAT,)))
    conv('encoder.conv_in', 3, CH[0], 3)
    cin = CH[0]
    for i, c in enumerate(CH):
        for j in range(2):
            res('encoder.down_blocks.%d.resnets.%d' % (i, j), cin, c)
            cin = c
        if i < 3:
            conv('encoder.down_blocks.%d.downsamplers.0.conv' % i, c, c, 3)
    mid('encoder', CH[3])
    gn('encoder.conv_norm_out', CH[3])
    conv('encoder.conv_out', CH[3], 2 * LAT, 3)
    conv('quant_conv', 2 * LAT, 2 * LAT, 1)
    conv('post_quant_conv', LAT, LAT, 1)
    conv('decoder.conv_in', LAT, CH[3], 3)
    mid('decoder', CH[3])
    cin = CH[3]
    for i, c in enumerate(reversed(CH)):
        for j in range(3):
            res('decoder.up_blocks.%d.resnets.%d' % (i, j), cin, c)
            cin = c
        if i < 3:
            conv('decoder.up_blocks.%d.upsamplers.0.conv' % i, c, c, 3)
    gn('decoder.conv_norm_out', CH[0])
    conv('decoder.conv_out', CH[0], 3, 3)
    return s


def make(name, shape):
    n = int(np.prod(shape))
    u = uniform(name, n)
    if name == 'bn.running_mean':
        v = u * np.float32(0.25)
    elif name == 'bn.running_var':
        v = np.float32(1.0) + u * np.float32(0.5)
    elif name.endswith('.bias'):
        v = u * np.float32(0.0625)
    elif len(shape) == 1:  # GroupNorm weights
        v = np.float32(1.0) + u * np.float32(0.125)
    else:
        fan_in = int(np.prod(shape[1:]))
        v = u * np.float32(math.sqrt(3.0 / fan_in))
    v = v.astype(np.float16).astype(np.float32)  # the F16 file's values
    return torch.from_numpy(v.reshape(shape))


def weights():
    return {n: make(n, s) for n, s in specs()}


def group_norm(W, p, x):
    return F.group_norm(x, GROUPS, W[p + '.weight'], W[p + '.bias'], GN_EPS)


def conv2d(W, p, x, stride=1, padding=None):
    w = W[p + '.weight']
    if padding is None:
        padding = w.shape[-1] // 2
    return F.conv2d(x, w, W[p + '.bias'], stride=stride, padding=padding)


def resnet(W, p, x):
    h = conv2d(W, p + '.conv1', F.silu(group_norm(W, p + '.norm1', x)))
    h = conv2d(W, p + '.conv2', F.silu(group_norm(W, p + '.norm2', h)))
    if p + '.conv_shortcut.weight' in W:
        x = conv2d(W, p + '.conv_shortcut', x)
    return x + h


def attention(W, p, x):
    b, c, h, w = x.shape
    t = group_norm(W, p + '.group_norm', x).view(b, c, h * w).transpose(1, 2)
    q = F.linear(t, W[p + '.to_q.weight'], W[p + '.to_q.bias'])
    k = F.linear(t, W[p + '.to_k.weight'], W[p + '.to_k.bias'])
    v = F.linear(t, W[p + '.to_v.weight'], W[p + '.to_v.bias'])
    a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(c), dim=-1) @ v
    o = F.linear(a, W[p + '.to_out.0.weight'], W[p + '.to_out.0.bias'])
    return x + o.transpose(1, 2).reshape(b, c, h, w)


def mid(W, p, x):
    x = resnet(W, p + '.mid_block.resnets.0', x)
    x = attention(W, p + '.mid_block.attentions.0', x)
    return resnet(W, p + '.mid_block.resnets.1', x)


def encoder(W, x):
    x = conv2d(W, 'encoder.conv_in', x)
    for i in range(4):
        for j in range(2):
            x = resnet(W, 'encoder.down_blocks.%d.resnets.%d' % (i, j), x)
        if i < 3:
            x = F.pad(x, (0, 1, 0, 1))
            x = conv2d(W, 'encoder.down_blocks.%d.downsamplers.0.conv' % i, x, 2, 0)
    x = mid(W, 'encoder', x)
    x = conv2d(W, 'encoder.conv_out', F.silu(group_norm(W, 'encoder.conv_norm_out', x)))
    return conv2d(W, 'quant_conv', x)


def decoder(W, z):
    x = conv2d(W, 'post_quant_conv', z)
    x = conv2d(W, 'decoder.conv_in', x)
    x = mid(W, 'decoder', x)
    for i in range(4):
        for j in range(3):
            x = resnet(W, 'decoder.up_blocks.%d.resnets.%d' % (i, j), x)
        if i < 3:
            x = F.interpolate(x, scale_factor=2.0, mode='nearest')
            x = conv2d(W, 'decoder.up_blocks.%d.upsamplers.0.conv' % i, x)
    x = F.silu(group_norm(W, 'decoder.conv_norm_out', x))
    return conv2d(W, 'decoder.conv_out', x)


def patchify(z):
    b, c, h, w = z.shape
    z = z.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4)
    return z.reshape(b, c * 4, h // 2, w // 2)


def unpatchify(z):
    b, c, h, w = z.shape
    z = z.reshape(b, c // 4, 2, 2, h, w).permute(0, 1, 4, 2, 5, 3)
    return z.reshape(b, c // 4, h * 2, w * 2)


def bn_stats(W):
    mean = W['bn.running_mean'].view(1, -1, 1, 1)
    std = torch.sqrt(W['bn.running_var'].view(1, -1, 1, 1) + BN_EPS)
    return mean, std


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else 'tests/fixtures'
    torch.set_grad_enabled(False)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    W = weights()
    mean, std = bn_stats(W)

    packed = torch.from_numpy(uniform('packed', 4 * LAT * LH * LW) * np.float32(2.0))
    packed = packed.view(1, 4 * LAT, LH, LW)
    latent = unpatchify(packed * std + mean)
    rgb = (decoder(W, latent) / 2 + 0.5).clamp(0, 1)

    image = (torch.from_numpy(uniform('image', 3 * IMG_H * IMG_W)) + 1) / 2
    image = image.view(1, 3, IMG_H, IMG_W)
    moments = encoder(W, image * 2 - 1)
    enc = (patchify(moments[:, :LAT]) - mean) / std

    blob = np.concatenate([
        rgb.numpy().astype('<f4').ravel(),
        enc.numpy().astype('<f4').ravel(),
        latent.numpy().astype('<f4').ravel(),
    ])
    path = os.path.join(out_dir, 'flux2-vae-ref.f32')
    blob.tofile(path)
    clamped = float(((rgb == 0) | (rgb == 1)).float().mean())
    print('wrote %s (%d floats); rgb mean %.4f, %.1f%% clamped; encode |max| %.3f' %
          (path, blob.size, float(rgb.mean()), 100 * clamped, float(enc.abs().max())))


if __name__ == '__main__':
    main()
