#!/usr/bin/python3
"""Reference outputs for tests/test-sam.c's SAM 2.1 tests: a random-weight SAM 2.1
(Hiera tiny) in image mode, in PyTorch.

    /usr/bin/python3 tests/reference/sam2_reference.py tests/fixtures

Written here from the published description of SAM 2 (facebookresearch/sam2:
modeling/backbones/hieradet.py, image_encoder.py, sam2_base.py forward_image,
sam/prompt_encoder.py, sam/mask_decoder.py, sam/transformer.py,
sam2_image_predictor.py and configs/sam2.1/sam2.1_hiera_t.yaml), not from
models/sam. Shapes are the real ones of sam2.1_hiera_tiny.pt: Hiera embed 96, one
head, stages 1 2 7 2, global attention in blocks 5 7 9, windows 8 4 14 7, the
background position embedding 7 x 7 plus an 8 x 8 window embedding; the FPN neck to
256 channels, nearest top-down on levels 2 and 3, scalp 1; no_mem_embed added to the
64 x 64 features; conv_s0 / conv_s1 on the two high-resolution levels; SAM 2's
prompt encoder and mask decoder (object-score token and MLP head, IoU through a
sigmoid, high-resolution fusion in the upscaling, dynamic multimask via stability
with delta 0.05 and threshold 0.98 when one mask is asked for).

Weights: every tensor the image path uses, by its official state-dict name, from
the generator of tests/reference/sam_reference.py (same formula and scaling by
kind; obj_score_token and no_mem_embed are embeddings, u / 2).
The image is u("image", i) over [1, 3, 1024, 1024] as for SAM v1.

Fixtures (float32 little-endian unless said):
    sam2-ref-embedding.f32  [256][8][8] the image embedding at rows/cols 4 + 8k, then
                            [256] the sum of each channel over the 64 x 64 grid
    sam2-ref-highres.f32    [32][16][16] conv_s0's features at 8 + 16k, [32] their
                            channel sums, [64][16][16] conv_s1's at 4 + 8k, [64] sums
    sam2-ref-<case>.f32     iou[n], object score logit, then [n][64][64] low-res mask
                            logits at rows/cols 2 + 4k
    sam2-ref-<case>.bits    [n][256 * 256 / 8] mask > 0, bit (y * 256 + x) LSB first
Cases: point (one positive click, multimask), click (the same click, one mask: the
dynamic choice), box (one mask), mixed (a box, a positive and a negative click),
refine (a mask prompt: the point case's best low-res logits as mask_input through
mask_downscaling, the click and a negative one, one mask). The mask_downscaling
weights were added after the other fixtures; they touch only the refine case.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sam_reference import uniform  # noqa: E402

EMBED, HEADS0, STAGES = 96, 1, (1, 2, 7, 2)
GLOBAL = (5, 7, 9)
WINDOW_SPEC = (8, 4, 14, 7)
BKG = 7
CHANNELS = (768, 384, 192, 96)  # the neck's convs 0..3, lowest resolution first
E, DEC_HEADS, DEC_MLP = 256, 8, 2048
IMG, GRID = 1024, 64
DELTA, THRESH = 0.05, 0.98

CASES = {
    'point': dict(points=[(500.0, 375.0, 1)], box=None, multimask=True),
    'click': dict(points=[(500.0, 375.0, 1)], box=None, multimask=False),
    'box': dict(points=[], box=(75.0, 275.0, 700.0, 850.0), multimask=False),
    'mixed': dict(points=[(400.0, 600.0, 1), (800.0, 300.0, 0)],
                  box=(100.0, 200.0, 900.0, 800.0), multimask=False),
    # a mask prompt: the point case's best low-res logits as mask_input, the click
    # again with a negative one, one mask (the dynamic choice applies)
    'refine': dict(points=[(500.0, 375.0, 1), (620.0, 450.0, 0)], box=None, multimask=False,
                   refine=True),
}


def blocks():
    """(dim, dim_out, heads, window, q_pool) of every Hiera block (hieradet.py's rule)."""
    depth = sum(STAGES)
    ends = [sum(STAGES[:i]) - 1 for i in range(1, len(STAGES) + 1)]
    pool_blocks = [e + 1 for e in ends[:-1]]
    out, dim, heads, stage = [], EMBED, HEADS0, 1
    for i in range(depth):
        dim_out = dim
        window = 0 if i in GLOBAL else WINDOW_SPEC[stage - 1]
        if i - 1 in ends:
            dim_out, heads, stage = dim * 2, heads * 2, stage + 1
        out.append((dim, dim_out, heads, window, i in pool_blocks))
        dim = dim_out
    return out, ends


def specs():
    s = []

    def lin(p, o, i):
        s.append((p + '.weight', (o, i)))
        s.append((p + '.bias', (o,)))

    def norm(p, n):
        s.append((p + '.weight', (n,)))
        s.append((p + '.bias', (n,)))

    t = 'image_encoder.trunk'
    s.append((t + '.pos_embed', (1, EMBED, BKG, BKG)))
    s.append((t + '.pos_embed_window', (1, EMBED, WINDOW_SPEC[0], WINDOW_SPEC[0])))
    s.append((t + '.patch_embed.proj.weight', (EMBED, 3, 7, 7)))
    s.append((t + '.patch_embed.proj.bias', (EMBED,)))
    for i, (dim, dout, _, _, _) in enumerate(blocks()[0]):
        p = '%s.blocks.%d' % (t, i)
        norm(p + '.norm1', dim)
        lin(p + '.attn.qkv', 3 * dout, dim)
        lin(p + '.attn.proj', dout, dout)
        norm(p + '.norm2', dout)
        lin(p + '.mlp.layers.0', 4 * dout, dout)
        lin(p + '.mlp.layers.1', dout, 4 * dout)
        if dim != dout:
            lin(p + '.proj', dout, dim)
    for k, c in enumerate(CHANNELS):
        s.append(('image_encoder.neck.convs.%d.conv.weight' % k, (E, c, 1, 1)))
        s.append(('image_encoder.neck.convs.%d.conv.bias' % k, (E,)))
    s.append(('no_mem_embed', (1, 1, E)))
    pe = 'sam_prompt_encoder'
    s.append((pe + '.pe_layer.positional_encoding_gaussian_matrix', (2, E // 2)))
    for i in range(4):
        s.append((pe + '.point_embeddings.%d.weight' % i, (1, E)))
    s.append((pe + '.not_a_point_embed.weight', (1, E)))
    s.append((pe + '.no_mask_embed.weight', (1, E)))
    md = pe + '.mask_downscaling.'  # mask_in_chans 16, as SAM v1's
    s.append((md + '0.weight', (4, 1, 2, 2)))
    s.append((md + '0.bias', (4,)))
    norm(md + '1', 4)
    s.append((md + '3.weight', (16, 4, 2, 2)))
    s.append((md + '3.bias', (16,)))
    norm(md + '4', 16)
    s.append((md + '6.weight', (E, 16, 1, 1)))
    s.append((md + '6.bias', (E,)))
    d = 'sam_mask_decoder'
    s.append((d + '.iou_token.weight', (1, E)))
    s.append((d + '.mask_tokens.weight', (4, E)))
    s.append((d + '.obj_score_token.weight', (1, E)))

    def attn(p, inner):
        for q in ('q_proj', 'k_proj', 'v_proj'):
            lin('%s.%s' % (p, q), inner, E)
        lin(p + '.out_proj', E, inner)

    for i in range(2):
        p = '%s.transformer.layers.%d' % (d, i)
        attn(p + '.self_attn', E)
        attn(p + '.cross_attn_token_to_image', E // 2)
        attn(p + '.cross_attn_image_to_token', E // 2)
        lin(p + '.mlp.layers.0', DEC_MLP, E)
        lin(p + '.mlp.layers.1', E, DEC_MLP)
        for k in range(1, 5):
            norm('%s.norm%d' % (p, k), E)
    attn(d + '.transformer.final_attn_token_to_image', E // 2)
    norm(d + '.transformer.norm_final_attn', E)
    s.append((d + '.output_upscaling.0.weight', (E, E // 4, 2, 2)))
    s.append((d + '.output_upscaling.0.bias', (E // 4,)))
    norm(d + '.output_upscaling.1', E // 4)
    s.append((d + '.output_upscaling.3.weight', (E // 4, E // 8, 2, 2)))
    s.append((d + '.output_upscaling.3.bias', (E // 8,)))
    s.append((d + '.conv_s0.weight', (E // 8, E, 1, 1)))
    s.append((d + '.conv_s0.bias', (E // 8,)))
    s.append((d + '.conv_s1.weight', (E // 4, E, 1, 1)))
    s.append((d + '.conv_s1.bias', (E // 4,)))
    for i in range(4):
        for k in range(3):
            lin('%s.output_hypernetworks_mlps.%d.layers.%d' % (d, i, k),
                E // 8 if k == 2 else E, E)
    for k in range(3):
        lin('%s.iou_prediction_head.layers.%d' % (d, k), 4 if k == 2 else E, E)
    for k in range(3):
        lin('%s.pred_obj_score_head.layers.%d' % (d, k), 1 if k == 2 else E, E)
    return s


EMBEDDINGS = ('pos_embed', 'point_embeddings', 'not_a_point_embed', 'no_mask_embed',
              'iou_token', 'mask_tokens', 'obj_score_token', 'no_mem_embed')
LN_WEIGHTS = ('norm1.weight', 'norm2.weight', 'norm3.weight', 'norm4.weight',
              'norm_final_attn.weight', 'output_upscaling.1.weight', 'mask_downscaling.1.weight',
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


# ---- Hiera ----

def lin(x, W, p):
    return F.linear(x, W[p + '.weight'], W[p + '.bias'])


def pool(x):
    """2 x 2 max pool of [B, H, W, C]."""
    return F.max_pool2d(x.permute(0, 3, 1, 2), 2, 2).permute(0, 2, 3, 1)


def partition(x, w):
    b, h, wd, c = x.shape
    ph, pw = (w - h % w) % w, (w - wd % w) % w
    x = F.pad(x, (0, 0, 0, pw, 0, ph))
    hp, wp = h + ph, wd + pw
    x = x.reshape(b, hp // w, w, wp // w, w, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, w, w, c), (hp, wp)


def unpartition(x, w, pad_hw, hw):
    hp, wp = pad_hw
    b = x.shape[0] // (hp * wp // w // w)
    x = x.reshape(b, hp // w, wp // w, w, w, -1).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, hp, wp, -1)[:, :hw[0], :hw[1], :]


def attention(x, W, p, heads, dout, q_pool):
    b, h, w, _ = x.shape
    qkv = lin(x, W, p + '.qkv').reshape(b, h * w, 3, heads, dout // heads)
    q, k, v = qkv.unbind(2)
    if q_pool:
        q = pool(q.reshape(b, h, w, dout))
        h, w = q.shape[1:3]
        q = q.reshape(b, h * w, heads, dout // heads)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    a = ((q @ k.transpose(-2, -1)) / math.sqrt(dout // heads)).softmax(-1) @ v
    a = a.transpose(1, 2).reshape(b, h, w, dout)
    return lin(a, W, p + '.proj')


def hiera_block(x, W, i, spec):
    dim, dout, heads, window, q_pool = spec
    p = 'image_encoder.trunk.blocks.%d' % i
    shortcut = x
    x = F.layer_norm(x, (dim,), W[p + '.norm1.weight'], W[p + '.norm1.bias'], 1e-6)
    if dim != dout:
        shortcut = lin(x, W, p + '.proj')
        if q_pool:
            shortcut = pool(shortcut)
    h, w = x.shape[1:3]
    if window > 0:
        x, pad_hw = partition(x, window)
    x = attention(x, W, p + '.attn', heads, dout, q_pool)
    ws = window
    if q_pool:
        ws = window // 2
        h, w = shortcut.shape[1:3]
        pad_hw = (h + (ws - h % ws) % ws, w + (ws - w % ws) % ws)
    if window > 0:
        x = unpartition(x, ws, pad_hw, (h, w))
    x = shortcut + x
    y = F.layer_norm(x, (dout,), W[p + '.norm2.weight'], W[p + '.norm2.bias'], 1e-6)
    y = lin(F.gelu(lin(y, W, p + '.mlp.layers.0')), W, p + '.mlp.layers.1')
    return x + y


def trunk(img, W):
    t = 'image_encoder.trunk'
    x = F.conv2d(img, W[t + '.patch_embed.proj.weight'], W[t + '.patch_embed.proj.bias'],
                 stride=4, padding=3).permute(0, 2, 3, 1)
    pos = F.interpolate(W[t + '.pos_embed'], size=x.shape[1:3], mode='bicubic')
    win = W[t + '.pos_embed_window']
    pos = pos + win.tile([a // b for a, b in zip(pos.shape, win.shape)])
    x = x + pos.permute(0, 2, 3, 1)
    spec, ends = blocks()
    outs = []
    for i, s in enumerate(spec):
        x = hiera_block(x, W, i, s)
        if i in ends:
            outs.append(x.permute(0, 3, 1, 2))
    return outs  # strides 4, 8, 16, 32


def image_encoder(img, W):
    xs = trunk(img, W)
    n = len(xs) - 1
    out = [None] * len(xs)
    prev = None
    for i in range(n, -1, -1):
        lat = F.conv2d(xs[i], W['image_encoder.neck.convs.%d.conv.weight' % (n - i)],
                       W['image_encoder.neck.convs.%d.conv.bias' % (n - i)])
        if i in (2, 3) and prev is not None:
            prev = lat + F.interpolate(prev, scale_factor=2.0, mode='nearest')
        else:
            prev = lat
        out[i] = prev
    feats = out[:-1]  # scalp 1
    d = 'sam_mask_decoder'
    s0 = F.conv2d(feats[0], W[d + '.conv_s0.weight'], W[d + '.conv_s0.bias'])
    s1 = F.conv2d(feats[1], W[d + '.conv_s1.weight'], W[d + '.conv_s1.bias'])
    emb = feats[2] + W['no_mem_embed'].reshape(1, E, 1, 1)
    return emb, s0, s1


# ---- prompt encoder, mask decoder ----

def fourier(xy01, W):
    g = W['sam_prompt_encoder.pe_layer.positional_encoding_gaussian_matrix']
    c = 2 * math.pi * ((2 * xy01 - 1) @ g)
    return torch.cat([torch.sin(c), torch.cos(c)], -1)


def dense_pe(W):
    v = (torch.arange(GRID, dtype=torch.float32) + 0.5) / GRID
    grid = torch.stack([v[None, :].expand(GRID, GRID), v[:, None].expand(GRID, GRID)], -1)
    return fourier(grid, W).permute(2, 0, 1)[None]


def prompt_encoder(points, box, W):
    """SAM2ImagePredictor: box corners first (labels 2, 3), then the clicks, then
    the padding point (the encoder is called with boxes=None, so it always pads)."""
    pts = []
    if box is not None:
        pts += [(box[0], box[1], 2), (box[2], box[3], 3)]
    pts += list(points) + [(0.0, 0.0, -1)]
    xy = torch.tensor([[x + 0.5, y + 0.5] for x, y, _ in pts], dtype=torch.float32) / IMG
    pe = fourier(xy, W)
    rows = []
    for j, (_, _, lab) in enumerate(pts):
        if lab == -1:
            rows.append(W['sam_prompt_encoder.not_a_point_embed.weight'][0])
        else:
            rows.append(pe[j] + W['sam_prompt_encoder.point_embeddings.%d.weight' % lab][0])
    return torch.stack(rows)[None]


def dec_attention(q, k, v, W, p):
    q, k, v = lin(q, W, p + '.q_proj'), lin(k, W, p + '.k_proj'), lin(v, W, p + '.v_proj')
    b, nq, inner = q.shape
    hd = inner // DEC_HEADS

    def heads(t):
        return t.reshape(b, t.shape[1], DEC_HEADS, hd).transpose(1, 2)

    a = (heads(q) @ heads(k).transpose(2, 3) / math.sqrt(hd)).softmax(-1) @ heads(v)
    return lin(a.transpose(1, 2).reshape(b, nq, inner), W, p + '.out_proj')


def ln(x, W, p, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), W[p + '.weight'], W[p + '.bias'], eps)


def two_way(img, pe, tokens, W):
    d = 'sam_mask_decoder.transformer'
    keys, kpe, queries = img.flatten(2).permute(0, 2, 1), pe.flatten(2).permute(0, 2, 1), tokens
    for i in range(2):
        p = '%s.layers.%d' % (d, i)
        if i == 0:
            queries = dec_attention(queries, queries, queries, W, p + '.self_attn')
        else:
            q = queries + tokens
            queries = queries + dec_attention(q, q, queries, W, p + '.self_attn')
        queries = ln(queries, W, p + '.norm1')
        queries = queries + dec_attention(queries + tokens, keys + kpe, keys, W,
                                          p + '.cross_attn_token_to_image')
        queries = ln(queries, W, p + '.norm2')
        h = F.relu(lin(queries, W, p + '.mlp.layers.0'))
        queries = ln(queries + lin(h, W, p + '.mlp.layers.1'), W, p + '.norm3')
        keys = keys + dec_attention(keys + kpe, queries + tokens, queries, W,
                                    p + '.cross_attn_image_to_token')
        keys = ln(keys, W, p + '.norm4')
    queries = queries + dec_attention(queries + tokens, keys + kpe, keys, W,
                                      d + '.final_attn_token_to_image')
    return ln(queries, W, d + '.norm_final_attn'), keys


def mlp3(x, W, p):
    for k in range(3):
        x = lin(x, W, '%s.layers.%d' % (p, k))
        if k < 2:
            x = F.relu(x)
    return x


def norm2d(x, W, p):
    mean = x.mean(1, keepdim=True)
    var = ((x - mean) ** 2).mean(1, keepdim=True)
    x = (x - mean) / torch.sqrt(var + 1e-6)
    return W[p + '.weight'][:, None, None] * x + W[p + '.bias'][:, None, None]


def mask_dense(mask, W):
    """PromptEncoder._embed_masks: mask [1, 1, 256, 256] -> [1, 256, 64, 64]."""
    p = 'sam_prompt_encoder.mask_downscaling.'
    x = F.conv2d(mask, W[p + '0.weight'], W[p + '0.bias'], stride=2)
    x = F.gelu(norm2d(x, W, p + '1'))
    x = F.conv2d(x, W[p + '3.weight'], W[p + '3.bias'], stride=2)
    x = F.gelu(norm2d(x, W, p + '4'))
    return F.conv2d(x, W[p + '6.weight'], W[p + '6.bias'])


def mask_decoder(emb, s0, s1, pe, sparse, multimask, W, mask=None):
    d = 'sam_mask_decoder'
    out_tokens = torch.cat([W[d + '.obj_score_token.weight'], W[d + '.iou_token.weight'],
                            W[d + '.mask_tokens.weight']], 0)[None]
    tokens = torch.cat([out_tokens, sparse], 1)
    if mask is not None:
        src = emb + mask_dense(mask, W)
    else:
        src = emb + W['sam_prompt_encoder.no_mask_embed.weight'].reshape(1, E, 1, 1)
    hs, keys = two_way(src, pe, tokens, W)
    src = keys.transpose(1, 2).reshape(1, E, GRID, GRID)
    up = F.conv_transpose2d(src, W[d + '.output_upscaling.0.weight'],
                            W[d + '.output_upscaling.0.bias'], stride=2)
    up = F.gelu(norm2d(up + s1, W, d + '.output_upscaling.1'))
    up = F.gelu(F.conv_transpose2d(up, W[d + '.output_upscaling.3.weight'],
                                   W[d + '.output_upscaling.3.bias'], stride=2) + s0)
    hyper = torch.stack([mlp3(hs[:, 2 + i], W, '%s.output_hypernetworks_mlps.%d' % (d, i))
                         for i in range(4)], 1)
    masks = (hyper @ up.reshape(1, E // 8, -1)).reshape(1, 4, 256, 256)[0]
    iou = torch.sigmoid(mlp3(hs[:, 1], W, d + '.iou_prediction_head'))[0]
    obj = mlp3(hs[:, 0], W, d + '.pred_obj_score_head')[0]
    if multimask:
        return masks[1:], iou[1:], obj, None
    # _dynamic_multimask_via_stability
    flat = masks[0].flatten()
    area_i = float((flat > DELTA).sum())
    area_u = float((flat > -DELTA).sum())
    stability = area_i / area_u if area_u > 0 else 1.0
    if stability >= THRESH:
        return masks[0:1], iou[0:1], obj, stability
    best = int(torch.argmax(iou[1:])) + 1
    return masks[best:best + 1], iou[best:best + 1], obj, stability


def write(path, arrays):
    with open(path, 'wb') as f:
        for a in arrays:
            f.write(np.ascontiguousarray(a, dtype='<f4').tobytes())


def sums(a):
    return a.astype(np.float64).sum(axis=(1, 2)).astype(np.float32)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else 'tests/fixtures'
    torch.set_num_threads(2)
    W = weights()
    img = torch.from_numpy(uniform('image', 3 * IMG * IMG).reshape(1, 3, IMG, IMG))
    with torch.no_grad():
        emb, s0, s1 = image_encoder(img, W)
        e, a0, a1 = emb[0].numpy(), s0[0].numpy(), s1[0].numpy()
        write(os.path.join(out, 'sam2-ref-embedding.f32'), [e[:, 4::8, 4::8], sums(e)])
        write(os.path.join(out, 'sam2-ref-highres.f32'),
              [a0[:, 8::16, 8::16], sums(a0), a1[:, 4::8, 4::8], sums(a1)])
        pe = dense_pe(W)
        prev = None  # the point case's best proposal: the refine case's mask_input
        for name, case in CASES.items():
            sparse = prompt_encoder(case['points'], case['box'], W)
            mask_in = prev if case.get('refine') else None
            masks, iou, obj, stab = mask_decoder(emb, s0, s1, pe, sparse, case['multimask'], W,
                                                 mask_in)
            if name == 'point':
                prev = masks[int(torch.argmax(iou))][None, None].clone()
            m = masks.numpy()
            write(os.path.join(out, 'sam2-ref-%s.f32' % name),
                  [iou.numpy(), obj.numpy(), m[:, 2::4, 2::4]])
            bits = np.packbits((m > 0).reshape(m.shape[0], -1), axis=1, bitorder='little')
            with open(os.path.join(out, 'sam2-ref-%s.bits' % name), 'wb') as f:
                f.write(bits.tobytes())
            print(name, 'iou', iou.numpy(), 'obj', float(obj[0]), 'stability', stab,
                  'positive', int((m > 0).sum()), 'min |logit|', float(np.abs(m).min()),
                  'range', float(m.min()), float(m.max()))
    print('embedding range', float(e.min()), float(e.max()), 's0', float(a0.min()),
          float(a0.max()), 's1', float(a1.min()), float(a1.max()))


if __name__ == '__main__':
    main()
