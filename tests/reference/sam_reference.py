#!/usr/bin/python3
"""Reference outputs for tests/test-sam.c: a small random-weight SAM in PyTorch.

    /usr/bin/python3 tests/reference/sam_reference.py tests/fixtures

The network is written here from the published description of Segment Anything
(segment_anything/modeling: image_encoder.py, prompt_encoder.py, mask_decoder.py,
transformer.py, common.py), not from models/sam. Sizes: the image encoder at the
real 1024 x 1024 input (64 x 64 tokens) but narrow, D = 64, depth 4, 2 heads,
window 14 with global attention in blocks 1 and 3; prompt encoder and mask
decoder at their real width (256, 8 heads, MLP 2048).

Weights: every tensor of the official state dict, by name, from the generator of
tests/whisper-writer.h (the same splitmix64 / fnv1a64 formula),

    u(name, i) = 2 * (splitmix64(fnv1a64(name) + (i + 1) * 0x9e3779b97f4a7c15) >> 40) / 2^24 - 1

scaled by kind, in float32:
    linear / conv weights       u * (float)sqrt(3 / fan_in)  (fan_in: in_features,
                                Cin * kh * kw; for the transposed convs Cin)
    layer-norm weights          1 + u / 8
    biases                      u / 16
    pos_embed, rel_pos_*, point / not-a-point / no-mask embeddings, iou / mask tokens
                                u / 2
    the gaussian matrix         u
tests/sam-writer.c writes the same tensors as safetensors (official and Hugging
Face names). The image is u("image", i) over [1, 3, 1024, 1024].

Fixtures (float32 little-endian unless said):
    sam-ref-embedding.f32   [256][8][8] the embedding at rows/cols 4 + 8k, then
                            [256] the sum of each channel over the 64 x 64 grid
    sam-ref-<case>.f32      iou[n], then [n][64][64] the low-res mask logits at
                            rows/cols 2 + 4k
    sam-ref-<case>.bits     [n][256 * 256 / 8] mask > 0, bit (y * 256 + x) LSB first
Cases: point (one positive point, multimask), box (a box, single mask), mixed (a
positive and a negative point and a box, single mask), refine (a mask prompt: the
point case's best low-res logits as mask_input, through the prompt encoder's
mask_downscaling, with the point and a negative click, single mask). The mask
prompt's weights (mask_downscaling.*: convs as linear weights, its two
LayerNorm2d weights as layer-norm weights) were added after the other fixtures;
they touch only the refine case.
"""
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

D, DEPTH, HEADS, WINDOW, GLOBAL = 64, 4, 2, 14, (1, 3)
E, DEC_HEADS, DEC_MLP = 256, 8, 2048
GRID = 64
IMG = 1024

CASES = {
    'point': dict(points=[(500.0, 375.0, 1)], box=None, multimask=True),
    'box': dict(points=[], box=(75.0, 275.0, 700.0, 850.0), multimask=False),
    'mixed': dict(points=[(400.0, 600.0, 1), (800.0, 300.0, 0)],
                  box=(100.0, 200.0, 900.0, 800.0), multimask=False),
    # SamPredictor's refinement: the point again with a negative click, and the best
    # (highest predicted IoU) of the point case's three low-res logits as mask_input
    'refine': dict(points=[(500.0, 375.0, 1), (620.0, 450.0, 0)], box=None, multimask=False,
                   refine=True),
}


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
    """(official name, shape) of every tensor the model uses."""
    s = []

    def lin(p, o, i):
        s.append((p + '.weight', (o, i)))
        s.append((p + '.bias', (o,)))

    def norm(p, n):
        s.append((p + '.weight', (n,)))
        s.append((p + '.bias', (n,)))

    s.append(('image_encoder.patch_embed.proj.weight', (D, 3, 16, 16)))
    s.append(('image_encoder.patch_embed.proj.bias', (D,)))
    s.append(('image_encoder.pos_embed', (1, GRID, GRID, D)))
    for i in range(DEPTH):
        p = 'image_encoder.blocks.%d' % i
        w = GRID if i in GLOBAL else WINDOW
        norm(p + '.norm1', D)
        lin(p + '.attn.qkv', 3 * D, D)
        lin(p + '.attn.proj', D, D)
        s.append((p + '.attn.rel_pos_h', (2 * w - 1, D // HEADS)))
        s.append((p + '.attn.rel_pos_w', (2 * w - 1, D // HEADS)))
        norm(p + '.norm2', D)
        lin(p + '.mlp.lin1', 4 * D, D)
        lin(p + '.mlp.lin2', D, 4 * D)
    s.append(('image_encoder.neck.0.weight', (E, D, 1, 1)))
    norm('image_encoder.neck.1', E)
    s.append(('image_encoder.neck.2.weight', (E, E, 3, 3)))
    norm('image_encoder.neck.3', E)
    s.append(('prompt_encoder.pe_layer.positional_encoding_gaussian_matrix', (2, E // 2)))
    for i in range(4):
        s.append(('prompt_encoder.point_embeddings.%d.weight' % i, (1, E)))
    s.append(('prompt_encoder.not_a_point_embed.weight', (1, E)))
    s.append(('prompt_encoder.no_mask_embed.weight', (1, E)))
    # mask_downscaling (mask_in_chans 16): conv 2x2/2, LayerNorm2d, GELU, conv 2x2/2,
    # LayerNorm2d, GELU, conv 1x1
    md = 'prompt_encoder.mask_downscaling.'
    s.append((md + '0.weight', (4, 1, 2, 2)))
    s.append((md + '0.bias', (4,)))
    norm(md + '1', 4)
    s.append((md + '3.weight', (16, 4, 2, 2)))
    s.append((md + '3.bias', (16,)))
    norm(md + '4', 16)
    s.append((md + '6.weight', (E, 16, 1, 1)))
    s.append((md + '6.bias', (E,)))
    s.append(('mask_decoder.iou_token.weight', (1, E)))
    s.append(('mask_decoder.mask_tokens.weight', (4, E)))

    def attn(p, inner):
        for q in ('q_proj', 'k_proj', 'v_proj'):
            lin('%s.%s' % (p, q), inner, E)
        lin(p + '.out_proj', E, inner)

    for i in range(2):
        p = 'mask_decoder.transformer.layers.%d' % i
        attn(p + '.self_attn', E)
        attn(p + '.cross_attn_token_to_image', E // 2)
        attn(p + '.cross_attn_image_to_token', E // 2)
        lin(p + '.mlp.lin1', DEC_MLP, E)
        lin(p + '.mlp.lin2', E, DEC_MLP)
        for k in range(1, 5):
            norm('%s.norm%d' % (p, k), E)
    attn('mask_decoder.transformer.final_attn_token_to_image', E // 2)
    norm('mask_decoder.transformer.norm_final_attn', E)
    s.append(('mask_decoder.output_upscaling.0.weight', (E, E // 4, 2, 2)))
    s.append(('mask_decoder.output_upscaling.0.bias', (E // 4,)))
    norm('mask_decoder.output_upscaling.1', E // 4)
    s.append(('mask_decoder.output_upscaling.3.weight', (E // 4, E // 8, 2, 2)))
    s.append(('mask_decoder.output_upscaling.3.bias', (E // 8,)))
    for i in range(4):
        for k in range(3):
            lin('mask_decoder.output_hypernetworks_mlps.%d.layers.%d' % (i, k),
                E // 8 if k == 2 else E, E)
    for k in range(3):
        lin('mask_decoder.iou_prediction_head.layers.%d' % k, 4 if k == 2 else E, E)
    return s


EMBEDDINGS = ('pos_embed', 'rel_pos_h', 'rel_pos_w', 'point_embeddings', 'not_a_point_embed',
              'no_mask_embed', 'iou_token', 'mask_tokens')
LN_WEIGHTS = ('norm1.weight', 'norm2.weight', 'norm3.weight', 'norm4.weight',
              'norm_final_attn.weight', 'neck.1.weight', 'neck.3.weight',
              'output_upscaling.1.weight', 'mask_downscaling.1.weight',
              'mask_downscaling.4.weight')


def make(name, shape):
    n = int(np.prod(shape))
    u = uniform(name, n)
    if name.endswith('.bias'):
        v = u * np.float32(0.0625)
    elif any(name.endswith(k) for k in LN_WEIGHTS):
        v = np.float32(1.0) + u * np.float32(0.125)
    elif any(k in name for k in EMBEDDINGS):
        v = u * np.float32(0.5)
    elif name.endswith('positional_encoding_gaussian_matrix'):
        v = u
    else:
        if 'output_upscaling' in name:
            fan_in = shape[0]
        elif len(shape) == 4:
            fan_in = shape[1] * shape[2] * shape[3]
        else:
            fan_in = shape[1]
        v = u * np.float32(math.sqrt(3.0 / fan_in))
    return torch.from_numpy(v.astype(np.float32).reshape(shape))


def weights():
    return {n: make(n, s) for n, s in specs()}


# ---- image encoder ----

def rel_positions(table, size):
    """rel_pos rows for every (query, key) pair along one axis: [size, size, C]."""
    q = torch.arange(size)[:, None]
    k = torch.arange(size)[None, :]
    return table[q - k + size - 1]


def vit_attention(x, W, p):
    nb, h, w, _ = x.shape
    hd = D // HEADS
    qkv = F.linear(x.reshape(nb, h * w, D), W[p + '.qkv.weight'], W[p + '.qkv.bias'])
    qkv = qkv.reshape(nb, h * w, 3, HEADS, hd).permute(2, 0, 3, 1, 4)
    q, k, v = (t.reshape(nb * HEADS, h * w, hd) for t in qkv)
    scores = (q / math.sqrt(hd)) @ k.transpose(1, 2)
    rh = rel_positions(W[p + '.rel_pos_h'], h)  # [qh, kh, c]
    rw = rel_positions(W[p + '.rel_pos_w'], w)  # [qw, kw, c]
    qg = q.reshape(nb * HEADS, h, w, hd)
    add_h = torch.einsum('bywc,ykc->bywk', qg, rh)
    add_w = torch.einsum('bywc,wkc->bywk', qg, rw)
    scores = scores.reshape(nb * HEADS, h, w, h, w) + add_h[..., :, None] + add_w[..., None, :]
    probs = scores.reshape(nb * HEADS, h * w, h * w).softmax(-1)
    out = (probs @ v).reshape(nb, HEADS, h, w, hd).permute(0, 2, 3, 1, 4).reshape(nb, h, w, D)
    return F.linear(out, W[p + '.proj.weight'], W[p + '.proj.bias'])


def vit_block(x, W, i):
    p = 'image_encoder.blocks.%d' % i
    h = F.layer_norm(x, (D,), W[p + '.norm1.weight'], W[p + '.norm1.bias'], 1e-6)
    if i in GLOBAL:
        h = vit_attention(h, W, p + '.attn')
    else:
        n = (GRID + WINDOW - 1) // WINDOW
        side = n * WINDOW
        h = F.pad(h, (0, 0, 0, side - GRID, 0, side - GRID))
        h = h.reshape(1, n, WINDOW, n, WINDOW, D).permute(0, 1, 3, 2, 4, 5)
        h = vit_attention(h.reshape(n * n, WINDOW, WINDOW, D), W, p + '.attn')
        h = h.reshape(1, n, n, WINDOW, WINDOW, D).permute(0, 1, 3, 2, 4, 5)
        h = h.reshape(1, side, side, D)[:, :GRID, :GRID, :]
    x = x + h
    h = F.layer_norm(x, (D,), W[p + '.norm2.weight'], W[p + '.norm2.bias'], 1e-6)
    h = F.linear(F.gelu(F.linear(h, W[p + '.mlp.lin1.weight'], W[p + '.mlp.lin1.bias'])),
                 W[p + '.mlp.lin2.weight'], W[p + '.mlp.lin2.bias'])
    return x + h


def norm2d(x, W, p):
    mean = x.mean(1, keepdim=True)
    var = ((x - mean) ** 2).mean(1, keepdim=True)
    x = (x - mean) / torch.sqrt(var + 1e-6)
    return W[p + '.weight'][:, None, None] * x + W[p + '.bias'][:, None, None]


def image_encoder(img, W):
    x = F.conv2d(img, W['image_encoder.patch_embed.proj.weight'],
                 W['image_encoder.patch_embed.proj.bias'], stride=16)
    x = x.permute(0, 2, 3, 1) + W['image_encoder.pos_embed']
    for i in range(DEPTH):
        x = vit_block(x, W, i)
    x = x.permute(0, 3, 1, 2)
    x = norm2d(F.conv2d(x, W['image_encoder.neck.0.weight']), W, 'image_encoder.neck.1')
    x = norm2d(F.conv2d(x, W['image_encoder.neck.2.weight'], padding=1), W,
               'image_encoder.neck.3')
    return x  # [1, 256, 64, 64]


# ---- prompt encoder ----

def fourier(xy01, W):
    g = W['prompt_encoder.pe_layer.positional_encoding_gaussian_matrix']
    c = (2 * xy01 - 1) @ g
    c = 2 * math.pi * c
    return torch.cat([torch.sin(c), torch.cos(c)], -1)


def dense_pe(W):
    ys = (torch.arange(GRID, dtype=torch.float32) + 0.5) / GRID
    xs = (torch.arange(GRID, dtype=torch.float32) + 0.5) / GRID
    grid = torch.stack([xs[None, :].expand(GRID, GRID), ys[:, None].expand(GRID, GRID)], -1)
    return fourier(grid, W).permute(2, 0, 1)[None]  # [1, 256, 64, 64]


def mask_dense(mask, W):
    """PromptEncoder._embed_masks: mask [1, 1, 256, 256] -> [1, 256, 64, 64]."""
    p = 'prompt_encoder.mask_downscaling.'
    x = F.conv2d(mask, W[p + '0.weight'], W[p + '0.bias'], stride=2)
    x = F.gelu(norm2d(x, W, p + '1'))
    x = F.conv2d(x, W[p + '3.weight'], W[p + '3.bias'], stride=2)
    x = F.gelu(norm2d(x, W, p + '4'))
    return F.conv2d(x, W[p + '6.weight'], W[p + '6.bias'])


def prompt_encoder(points, box, W, mask=None):
    rows = []
    pts = [(x, y, lab) for x, y, lab in points]
    if box is None:
        pts.append((0.0, 0.0, -1))
    if pts:
        xy = torch.tensor([[x + 0.5, y + 0.5] for x, y, _ in pts], dtype=torch.float32) / IMG
        pe = fourier(xy, W)
        for j, (_, _, lab) in enumerate(pts):
            if lab == -1:
                rows.append(W['prompt_encoder.not_a_point_embed.weight'][0])
            else:
                rows.append(pe[j] + W['prompt_encoder.point_embeddings.%d.weight' % lab][0])
    if box is not None:
        xy = (torch.tensor([[box[0], box[1]], [box[2], box[3]]], dtype=torch.float32) + 0.5) / IMG
        pe = fourier(xy, W)
        rows.append(pe[0] + W['prompt_encoder.point_embeddings.2.weight'][0])
        rows.append(pe[1] + W['prompt_encoder.point_embeddings.3.weight'][0])
    sparse = torch.stack(rows)[None]  # [1, N, 256]
    if mask is not None:
        dense = mask_dense(mask, W)
    else:
        dense = W['prompt_encoder.no_mask_embed.weight'].reshape(1, E, 1, 1).expand(
            1, E, GRID, GRID)
    return sparse, dense


# ---- mask decoder ----

def dec_attention(q, k, v, W, p):
    q = F.linear(q, W[p + '.q_proj.weight'], W[p + '.q_proj.bias'])
    k = F.linear(k, W[p + '.k_proj.weight'], W[p + '.k_proj.bias'])
    v = F.linear(v, W[p + '.v_proj.weight'], W[p + '.v_proj.bias'])
    b, nq, inner = q.shape
    hd = inner // DEC_HEADS

    def heads(t):
        return t.reshape(b, t.shape[1], DEC_HEADS, hd).transpose(1, 2)

    a = (heads(q) @ heads(k).transpose(2, 3) / math.sqrt(hd)).softmax(-1) @ heads(v)
    a = a.transpose(1, 2).reshape(b, nq, inner)
    return F.linear(a, W[p + '.out_proj.weight'], W[p + '.out_proj.bias'])


def ln(x, W, p):
    return F.layer_norm(x, (E,), W[p + '.weight'], W[p + '.bias'], 1e-5)


def two_way(img, pe, tokens, W):
    keys = img.flatten(2).permute(0, 2, 1)
    kpe = pe.flatten(2).permute(0, 2, 1)
    queries = tokens
    for i in range(2):
        p = 'mask_decoder.transformer.layers.%d' % i
        if i == 0:
            queries = dec_attention(queries, queries, queries, W, p + '.self_attn')
        else:
            q = queries + tokens
            queries = queries + dec_attention(q, q, queries, W, p + '.self_attn')
        queries = ln(queries, W, p + '.norm1')
        queries = queries + dec_attention(queries + tokens, keys + kpe, keys, W,
                                          p + '.cross_attn_token_to_image')
        queries = ln(queries, W, p + '.norm2')
        h = F.relu(F.linear(queries, W[p + '.mlp.lin1.weight'], W[p + '.mlp.lin1.bias']))
        queries = queries + F.linear(h, W[p + '.mlp.lin2.weight'], W[p + '.mlp.lin2.bias'])
        queries = ln(queries, W, p + '.norm3')
        keys = keys + dec_attention(keys + kpe, queries + tokens, queries, W,
                                    p + '.cross_attn_image_to_token')
        keys = ln(keys, W, p + '.norm4')
    p = 'mask_decoder.transformer.final_attn_token_to_image'
    queries = queries + dec_attention(queries + tokens, keys + kpe, keys, W, p)
    queries = ln(queries, W, 'mask_decoder.transformer.norm_final_attn')
    return queries, keys


def mlp3(x, W, p):
    for k in range(3):
        x = F.linear(x, W['%s.layers.%d.weight' % (p, k)], W['%s.layers.%d.bias' % (p, k)])
        if k < 2:
            x = F.relu(x)
    return x


def mask_decoder(embedding, pe, sparse, dense, multimask, W):
    out_tokens = torch.cat([W['mask_decoder.iou_token.weight'],
                            W['mask_decoder.mask_tokens.weight']], 0)[None]
    tokens = torch.cat([out_tokens, sparse], 1)
    hs, keys = two_way(embedding + dense, pe, tokens, W)
    src = keys.transpose(1, 2).reshape(1, E, GRID, GRID)
    up = F.conv_transpose2d(src, W['mask_decoder.output_upscaling.0.weight'],
                            W['mask_decoder.output_upscaling.0.bias'], stride=2)
    up = F.gelu(norm2d(up, W, 'mask_decoder.output_upscaling.1'))
    up = F.gelu(F.conv_transpose2d(up, W['mask_decoder.output_upscaling.3.weight'],
                                   W['mask_decoder.output_upscaling.3.bias'], stride=2))
    hyper = torch.stack([mlp3(hs[:, 1 + i], W, 'mask_decoder.output_hypernetworks_mlps.%d' % i)
                         for i in range(4)], 1)  # [1, 4, 32]
    masks = (hyper @ up.reshape(1, E // 8, -1)).reshape(1, 4, 256, 256)
    iou = mlp3(hs[:, 0], W, 'mask_decoder.iou_prediction_head')
    sl = slice(1, 4) if multimask else slice(0, 1)
    return masks[0, sl], iou[0, sl]


def write(path, arrays):
    with open(path, 'wb') as f:
        for a in arrays:
            f.write(np.ascontiguousarray(a, dtype='<f4').tobytes())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else 'tests/fixtures'
    torch.set_num_threads(2)
    W = weights()
    img = torch.from_numpy(uniform('image', 3 * IMG * IMG).reshape(1, 3, IMG, IMG))
    with torch.no_grad():
        emb = image_encoder(img, W)
        e = emb[0].numpy()
        write(os.path.join(out, 'sam-ref-embedding.f32'),
              [e[:, 4::8, 4::8], e.astype(np.float64).sum(axis=(1, 2)).astype(np.float32)])
        pe = dense_pe(W)
        prev = None  # the point case's best proposal: the refine case's mask_input
        for name, case in CASES.items():
            mask_in = prev if case.get('refine') else None
            sparse, dense = prompt_encoder(case['points'], case['box'], W, mask_in)
            masks, iou = mask_decoder(emb, pe, sparse, dense, case['multimask'], W)
            if name == 'point':
                prev = masks[int(torch.argmax(iou))][None, None].clone()
            m = masks.numpy()
            write(os.path.join(out, 'sam-ref-%s.f32' % name), [iou.numpy(), m[:, 2::4, 2::4]])
            bits = np.packbits((m > 0).reshape(m.shape[0], -1), axis=1, bitorder='little')
            with open(os.path.join(out, 'sam-ref-%s.bits' % name), 'wb') as f:
                f.write(bits.tobytes())
            print(name, 'iou', iou.numpy(), 'positive', int((m > 0).sum()),
                  'min |logit|', float(np.abs(m).min()), 'range', float(m.min()), float(m.max()))
    print('embedding range', float(e.min()), float(e.max()))


if __name__ == '__main__':
    main()
