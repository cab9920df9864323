#!/usr/bin/python3
"""MobileSAM reference for tests/test-sam.c: TinyViT-5M (MobileSAM's image encoder,
written here from the published architecture: ChaoningZhang/MobileSAM
mobile_sam/modeling/tiny_vit_sam.py and build_sam.py's build_sam_vit_t) at its
real shapes, with SAM's prompt encoder and mask decoder from sam_reference.py.

Weights: every tensor of mobile_sam.pt that the forward pass reads, values from
sam_reference.py's hash generator (uniform(name, n) in [-1, 1)) by kind: conv and
linear weights u * sqrt(3 / fan_in) (fan_in = in / groups * k * k), biases u / 16,
LayerNorm and BatchNorm weights 1 + u / 8, attention_biases u / 2, BatchNorm
running_mean u / 4 and running_var 1 + u / 2 (positive). tests/sam-writer.c
(layout "mobile_sam") writes the same tensors. BatchNorm runs in eval mode
(F.batch_norm with the running statistics, eps 1e-5).

Usage: /usr/bin/python3 tests/reference/mobile_sam_reference.py [OUT_DIR]
Writes (little-endian f32 unless said):
    mobile-sam-ref-embedding.f32  [256][8][8] the embedding at rows/cols 4 + 8k,
                                  then [256] each channel's sum over the grid
    mobile-sam-ref-<case>.f32     iou[n], then [n][64][64] the low-res mask
                                  logits at rows/cols 2 + 4k
    mobile-sam-ref-<case>.bits    [n][256 * 256 / 8] mask > 0, LSB first
Cases: point (one positive point, multimask) and box (single mask), as
sam_reference.py's.
"""
import itertools
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sam_reference as sr  # noqa: E402

DIMS, DEPTHS, HEADS, WINDOWS = (64, 128, 160, 320), (2, 2, 6, 2), (2, 4, 5, 10), (7, 7, 14, 7)
MLP_RATIO, MBCONV_EXPAND = 4, 4
BN_EPS, LN_EPS = 1e-5, 1e-5
CASES = ('point', 'box')


def merge_stride(out_dim):
    # MobileSAM's PatchMerging keeps the 64 x 64 grid into its last stages
    return 1 if out_dim in (320, 448, 576) else 2


def tinyvit_specs():
    s = []

    def conv_bn(p, cout, cin_g, k):
        s.append((p + '.c.weight', (cout, cin_g, k, k)))
        for n in ('weight', 'bias', 'running_mean', 'running_var'):
            s.append(('%s.bn.%s' % (p, n), (cout,)))

    def lin(p, o, i):
        s.append((p + '.weight', (o, i)))
        s.append((p + '.bias', (o,)))

    def norm(p, n):
        s.append((p + '.weight', (n,)))
        s.append((p + '.bias', (n,)))

    e = 'image_encoder'
    conv_bn(e + '.patch_embed.seq.0', DIMS[0] // 2, 3, 3)
    conv_bn(e + '.patch_embed.seq.2', DIMS[0], DIMS[0] // 2, 3)
    for st in range(4):
        d = DIMS[st]
        for i in range(DEPTHS[st]):
            p = '%s.layers.%d.blocks.%d' % (e, st, i)
            if st == 0:
                h = d * MBCONV_EXPAND
                conv_bn(p + '.conv1', h, d, 1)
                conv_bn(p + '.conv2', h, 1, 3)
                conv_bn(p + '.conv3', d, h, 1)
                continue
            s.append((p + '.attn.attention_biases', (HEADS[st], n_offsets(WINDOWS[st]))))
            norm(p + '.attn.norm', d)
            lin(p + '.attn.qkv', 3 * d, d)
            lin(p + '.attn.proj', d, d)
            conv_bn(p + '.local_conv', d, 1, 3)
            norm(p + '.mlp.norm', d)
            lin(p + '.mlp.fc1', MLP_RATIO * d, d)
            lin(p + '.mlp.fc2', d, MLP_RATIO * d)
        if st < 3:
            o = DIMS[st + 1]
            p = '%s.layers.%d.downsample' % (e, st)
            conv_bn(p + '.conv1', o, d, 1)
            conv_bn(p + '.conv2', o, 1, 3)
            conv_bn(p + '.conv3', o, o, 1)
    return s


def bias_index(ws):
    """attention_bias_idxs: offsets (|dy|, |dx|) numbered by first appearance."""
    pts = list(itertools.product(range(ws), range(ws)))
    seen, idx = {}, []
    for a in pts:
        for b in pts:
            off = (abs(a[0] - b[0]), abs(a[1] - b[1]))
            if off not in seen:
                seen[off] = len(seen)
            idx.append(seen[off])
    return torch.tensor(idx, dtype=torch.long).view(len(pts), len(pts)), len(seen)


def n_offsets(ws):
    return bias_index(ws)[1]


def make(name, shape):
    n = int(np.prod(shape))
    u = sr.uniform(name, n)
    if name.endswith('.bias'):
        v = u * np.float32(0.0625)
    elif name.endswith('.running_mean'):
        v = u * np.float32(0.25)
    elif name.endswith('.running_var'):
        v = np.float32(1.0) + u * np.float32(0.5)
    elif name.endswith('bn.weight') or name.endswith('.norm.weight'):
        v = np.float32(1.0) + u * np.float32(0.125)
    elif 'attention_biases' in name:
        v = u * np.float32(0.5)
    else:
        return sr.make(name, shape)
    return torch.from_numpy(v.astype(np.float32).reshape(shape))


def weights():
    w = {n: make(n, s) for n, s in tinyvit_specs()}
    for n, s in sr.specs():  # neck (at the last stage's width), prompt encoder, decoder
        if n == 'image_encoder.neck.0.weight':
            s = (sr.E, DIMS[3], 1, 1)
        elif n.startswith('image_encoder.') and '.neck.' not in n:
            continue
        w[n] = sr.make(n, s)
    return w


# ---- TinyViT ----

def conv_bn(x, W, p, stride=1, groups=1):
    wt = W[p + '.c.weight']
    x = F.conv2d(x, wt, None, stride, wt.shape[-1] // 2, 1, groups)
    return F.batch_norm(x, W[p + '.bn.running_mean'], W[p + '.bn.running_var'],
                        W[p + '.bn.weight'], W[p + '.bn.bias'], False, 0.0, BN_EPS)


def mbconv(x, W, p):
    h = F.gelu(conv_bn(x, W, p + '.conv1'))
    h = F.gelu(conv_bn(h, W, p + '.conv2', groups=h.shape[1]))
    h = conv_bn(h, W, p + '.conv3')
    return F.gelu(x + h)


def patch_merging(x, W, p, out_dim):
    x = F.gelu(conv_bn(x, W, p + '.conv1'))
    x = F.gelu(conv_bn(x, W, p + '.conv2', merge_stride(out_dim), out_dim))
    x = conv_bn(x, W, p + '.conv3')
    return x.flatten(2).transpose(1, 2)  # [B, L, C]


def attention(x, W, p, heads, ws):
    b, n, c = x.shape
    kd = c // heads
    x = F.layer_norm(x, (c,), W[p + '.norm.weight'], W[p + '.norm.bias'], LN_EPS)
    qkv = F.linear(x, W[p + '.qkv.weight'], W[p + '.qkv.bias'])
    q, k, v = qkv.view(b, n, heads, -1).split([kd, kd, kd], dim=3)
    q, k, v = (t.permute(0, 2, 1, 3) for t in (q, k, v))
    idx, _ = bias_index(ws)
    a = (q @ k.transpose(-2, -1)) * kd ** -0.5 + W[p + '.attention_biases'][:, idx]
    x = (a.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c)
    return F.linear(x, W[p + '.proj.weight'], W[p + '.proj.bias'])


def tinyvit_block(x, W, p, res, heads, ws):
    b, L, c = x.shape
    shortcut = x
    x = x.view(b, res, res, c)
    pad = (ws - res % ws) % ws
    x = F.pad(x, (0, 0, 0, pad, 0, pad))  # zeros, normalised inside the attention
    pr = res + pad
    nw = pr // ws
    x = x.view(b, nw, ws, nw, ws, c).transpose(2, 3).reshape(b * nw * nw, ws * ws, c)
    x = attention(x, W, p + '.attn', heads, ws)
    x = x.view(b, nw, nw, ws, ws, c).transpose(2, 3).reshape(b, pr, pr, c)
    x = x[:, :res, :res].reshape(b, L, c)
    x = shortcut + x
    x = x.transpose(1, 2).reshape(b, c, res, res)
    x = conv_bn(x, W, p + '.local_conv', groups=c)
    x = x.view(b, c, L).transpose(1, 2)
    h = F.layer_norm(x, (c,), W[p + '.mlp.norm.weight'], W[p + '.mlp.norm.bias'], LN_EPS)
    h = F.linear(F.gelu(F.linear(h, W[p + '.mlp.fc1.weight'], W[p + '.mlp.fc1.bias'])),
                 W[p + '.mlp.fc2.weight'], W[p + '.mlp.fc2.bias'])
    return x + h


def image_encoder(img, W):
    e = 'image_encoder'
    x = F.gelu(conv_bn(img, W, e + '.patch_embed.seq.0', 2))
    x = conv_bn(x, W, e + '.patch_embed.seq.2', 2)  # [1, 64, 256, 256]
    for i in range(DEPTHS[0]):
        x = mbconv(x, W, '%s.layers.0.blocks.%d' % (e, i))
    x = patch_merging(x, W, e + '.layers.0.downsample', DIMS[1])
    res = 256
    for st in range(1, 4):
        # the published input_resolution of each stage: 256 // 2 ** (1, 2, 2)
        res = 256 // (2 ** (st - 1 if st == 3 else st))
        for i in range(DEPTHS[st]):
            x = tinyvit_block(x, W, '%s.layers.%d.blocks.%d' % (e, st, i), res, HEADS[st],
                              WINDOWS[st])
        if st < 3:
            b, L, c = x.shape
            x = x.view(b, res, res, c).permute(0, 3, 1, 2)
            x = patch_merging(x, W, '%s.layers.%d.downsample' % (e, st), DIMS[st + 1])
    b, L, c = x.shape
    x = x.view(b, 64, 64, c).permute(0, 3, 1, 2)
    x = sr.norm2d(F.conv2d(x, W[e + '.neck.0.weight']), W, e + '.neck.1')
    x = sr.norm2d(F.conv2d(x, W[e + '.neck.2.weight'], padding=1), W, e + '.neck.3')
    return x  # [1, 256, 64, 64]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else 'tests/fixtures'
    torch.set_num_threads(2)
    W = weights()
    print('parameters', sum(int(t.numel()) for t in W.values()))
    img = torch.from_numpy(sr.uniform('image', 3 * sr.IMG * sr.IMG).reshape(1, 3, sr.IMG, sr.IMG))
    with torch.no_grad():
        emb = image_encoder(img, W)
        e = emb[0].numpy()
        sr.write(os.path.join(out, 'mobile-sam-ref-embedding.f32'),
                 [e[:, 4::8, 4::8], e.astype(np.float64).sum(axis=(1, 2)).astype(np.float32)])
        pe = sr.dense_pe(W)
        for name in CASES:
            case = sr.CASES[name]
            sparse, dense = sr.prompt_encoder(case['points'], case['box'], W)
            masks, iou = sr.mask_decoder(emb, pe, sparse, dense, case['multimask'], W)
            m = masks.numpy()
            sr.write(os.path.join(out, 'mobile-sam-ref-%s.f32' % name),
                     [iou.numpy(), m[:, 2::4, 2::4]])
            bits = np.packbits((m > 0).reshape(m.shape[0], -1), axis=1, bitorder='little')
            with open(os.path.join(out, 'mobile-sam-ref-%s.bits' % name), 'wb') as f:
                f.write(bits.tobytes())
            print(name, 'iou', iou.numpy(), 'positive', int((m > 0).sum()),
                  'min |logit|', float(np.abs(m).min()), 'range', float(m.min()), float(m.max()))
    print('embedding range', float(e.min()), float(e.max()), 'std', float(e.std()))


if __name__ == '__main__':
    main()
