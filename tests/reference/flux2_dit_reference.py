#!/usr/bin/python3
"""Reference velocities for tests/test-flux2-dit.c: a FLUX.2 transformer in plain PyTorch.

    /usr/bin/python3 tests/reference/flux2_dit_reference.py tests/fixtures

The network is written here from the published description of FLUX.2
(diffusers' transformer_flux2.py and pipeline_flux2_klein.py, read for facts),
not from models/diffusion: double-stream blocks (separate image / text weights,
joint attention over [text, image]), single-stream "parallel" blocks (one
projection to q, k, v and the SwiGLU MLP input, one output projection over
[attention, MLP]), modulation shared by all blocks of a kind, RMSNorm on q and k,
4-axis RoPE (32 dims an axis, theta 2000, interleaved pairs), no biases.

Sizes: klein 4B's widths (hidden 3072 = 24 heads x 128, joint_attention_dim 7680,
MLP 3 x 3072 = 9216, in_channels 128, 256 timestep channels) with one
double-stream block and one single-stream block; no guidance embedder (klein).

Weights: every tensor of diffusers' state dict, by its diffusers name, from the
generator of tests/whisper-writer.h (the formula in sam_reference.py's
docstring): linear weights u * (float)sqrt(3 / in_features), RMSNorm weights
1 + u / 8, then rounded to BF16 (round to nearest even), as tests/flux2-writer.c
stores them. The arithmetic is float64 (the weights' BF16 values are exact in
it), so the fixtures carry no float32 rounding of their own. Inputs: latents u("latents", i) over [128][4][4] (CHW, packed),
text u("text", i) over [8][7680], sigma 0.75; the reference-image case adds
u("ref0", i) over [128][2][3].

Fixtures (float32 little-endian):
    flux2-dit-ref-plain.f32   [128][4][4] the velocity (the pipeline's noise_pred
                              for the image tokens)
    flux2-dit-ref-edit.f32    [128][4][4] the same with the reference image
    flux2-dit-ref-guidance.f32 [128][4][4] the plain case on the same model plus a
                              guidance embedder (FLUX.2 dev's layout), guidance 3.5
    flux2-dit-ref-lora.f32    [128][4][4] the plain case with a LoRA of rank 4 at
                              strength 0.8 merged into the weights (W + 0.8 B A, as
                              diffusers' fuse_lora does), on the modules of LORA_MODULES

The LoRA: for each module (named as below, diffusers-style; "attn.qkv" is the
double block's fused image q/k/v, whose B splits into to_q, to_k, to_v rows with
one shared A, as BFL-named files store it), A [4, in] = u("lora_A." + module) *
(float)sqrt(3 / in) and B [out, 4] = u("lora_B." + module) * (float)(0.5 *
sqrt(3 / 4)), both float32. tests/test-flux2-dit.c writes them in diffusers/PEFT
names and in kohya's BFL names (with an alpha) and expects this fixture from both.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HIDDEN, HEADS, HEAD_DIM = 3072, 24, 128
JOINT, MLP, IN_CH, TCH = 7680, 9216, 128, 256
N_DOUBLE, N_SINGLE = 1, 1
AXES, THETA, EPS = (32, 32, 32, 32), 2000.0, 1e-6
LH, LW, N_TEXT, SIGMA = 4, 4, 8, 0.75
REF_H, REF_W = 2, 3


def fnv1a64(name):
    h = 0xcbf29ce484222325
    for ch in name.encode():
        h = ((h ^ ch) * 0x100000001b3) & 0xffffffffffffffff
    return h


def uniform(name, n):
    out = np.empty(n, dtype=np.float32)
    base = np.uint64(fnv1a64(name))
    step = 1 << 22
    with np.errstate(over='ignore'):
        for a in range(0, n, step):
            b = min(n, a + step)
            i = np.arange(a + 1, b + 1, dtype=np.uint64)
            z = base + i * np.uint64(0x9e3779b97f4a7c15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
            z = z ^ (z >> np.uint64(31))
            k = (z >> np.uint64(40)).astype(np.int64) - (1 << 23)
            out[a:b] = k.astype(np.float32) / np.float32(8388608.0)
    return out


GUIDANCE = 3.5
GUIDANCE_NAMES = ('time_guidance_embed.guidance_embedder.linear_1.weight',
                  'time_guidance_embed.guidance_embedder.linear_2.weight')


def specs():
    """(diffusers name, shape, kind) of every tensor; kind 'w' linear, 'n' norm.
    The guidance embedder (FLUX.2 dev's; klein has none) is listed last."""
    s = [('x_embedder.weight', (HIDDEN, IN_CH), 'w'),
         ('context_embedder.weight', (HIDDEN, JOINT), 'w'),
         ('time_guidance_embed.timestep_embedder.linear_1.weight', (HIDDEN, TCH), 'w'),
         ('time_guidance_embed.timestep_embedder.linear_2.weight', (HIDDEN, HIDDEN), 'w'),
         ('double_stream_modulation_img.linear.weight', (6 * HIDDEN, HIDDEN), 'w'),
         ('double_stream_modulation_txt.linear.weight', (6 * HIDDEN, HIDDEN), 'w'),
         ('single_stream_modulation.linear.weight', (3 * HIDDEN, HIDDEN), 'w')]
    for b in range(N_DOUBLE):
        p = 'transformer_blocks.%d.' % b
        for n in ('to_q', 'to_k', 'to_v', 'to_out.0', 'add_q_proj', 'add_k_proj', 'add_v_proj',
                  'to_add_out'):
            s.append((p + 'attn.' + n + '.weight', (HIDDEN, HIDDEN), 'w'))
        for n in ('norm_q', 'norm_k', 'norm_added_q', 'norm_added_k'):
            s.append((p + 'attn.' + n + '.weight', (HEAD_DIM,), 'n'))
        for ff in ('ff', 'ff_context'):
            s.append((p + ff + '.linear_in.weight', (2 * MLP, HIDDEN), 'w'))
            s.append((p + ff + '.linear_out.weight', (HIDDEN, MLP), 'w'))
    for b in range(N_SINGLE):
        p = 'single_transformer_blocks.%d.attn.' % b
        s.append((p + 'to_qkv_mlp_proj.weight', (3 * HIDDEN + 2 * MLP, HIDDEN), 'w'))
        s.append((p + 'to_out.weight', (HIDDEN, HIDDEN + MLP), 'w'))
        s.append((p + 'norm_q.weight', (HEAD_DIM,), 'n'))
        s.append((p + 'norm_k.weight', (HEAD_DIM,), 'n'))
    s.append(('norm_out.linear.weight', (2 * HIDDEN, HIDDEN), 'w'))
    s.append(('proj_out.weight', (IN_CH, HIDDEN), 'w'))
    s.append((GUIDANCE_NAMES[0], (HIDDEN, TCH), 'w'))
    s.append((GUIDANCE_NAMES[1], (HIDDEN, HIDDEN), 'w'))
    return s


def make_weights():
    w = {}
    for name, shape, kind in specs():
        u = uniform(name, int(np.prod(shape))).reshape(shape)
        if kind == 'w':
            v = u * np.float32(math.sqrt(3.0 / shape[1]))
        else:
            v = np.float32(1.0) + u / np.float32(8.0)
        w[name] = torch.from_numpy(v).to(torch.bfloat16).to(torch.float32)
    return w


LORA_RANK, LORA_STRENGTH = 4, 0.8
# (module, in, out); the weights each changes are in lora_merge
LORA_MODULES = (('transformer_blocks.0.attn.qkv', HIDDEN, 3 * HIDDEN),
                ('transformer_blocks.0.attn.add_k_proj', HIDDEN, HIDDEN),
                ('transformer_blocks.0.attn.to_add_out', HIDDEN, HIDDEN),
                ('transformer_blocks.0.ff.linear_in', HIDDEN, 2 * MLP),
                ('single_transformer_blocks.0.attn.to_qkv_mlp_proj', HIDDEN, 3 * HIDDEN + 2 * MLP),
                ('single_transformer_blocks.0.attn.to_out', HIDDEN + MLP, HIDDEN),
                ('norm_out.linear', HIDDEN, 2 * HIDDEN),
                ('x_embedder', IN_CH, HIDDEN))


def lora_merge(w):
    """The weights with every LoRA module's 0.8 * B @ A added (float64)."""
    w = dict(w)
    for m, n_in, n_out in LORA_MODULES:
        a = uniform('lora_A.' + m, LORA_RANK * n_in).reshape(LORA_RANK, n_in) * \
            np.float32(math.sqrt(3.0 / n_in))
        b = uniform('lora_B.' + m, n_out * LORA_RANK).reshape(n_out, LORA_RANK) * \
            np.float32(0.5 * math.sqrt(3.0 / LORA_RANK))
        d = LORA_STRENGTH * (torch.from_numpy(b).double() @ torch.from_numpy(a).double())
        if m.endswith('attn.qkv'):
            p = m[:-len('qkv')]
            for i, n in enumerate(('to_q', 'to_k', 'to_v')):
                w[p + n + '.weight'] = w[p + n + '.weight'].double() + d[i * HIDDEN:(i + 1) * HIDDEN]
        else:
            w[m + '.weight'] = w[m + '.weight'].double() + d
    return w


def lin(x, w):
    # the weights stay float32 (BF16 values, exact); the arithmetic is float64
    return x @ w.to(torch.float64).t()


def timestep_proj(t):
    half = TCH // 2
    # float64 throughout (diffusers: float32, whose rounding moves 1000 * 3.5 rad by 2e-4)
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64) / half)
    a = torch.tensor([t * 1000.0], dtype=torch.float64)[:, None] * freqs[None, :]
    return torch.cat([torch.cos(a), torch.sin(a)], dim=-1)  # flip_sin_to_cos


def rope_tables(ids):
    cos, sin = [], []
    pos = ids.to(torch.float64)
    for i, d in enumerate(AXES):
        freqs = 1.0 / (THETA ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        a = pos[:, i:i + 1] * freqs[None, :]
        cos.append(torch.cos(a).repeat_interleave(2, dim=1))
        sin.append(torch.sin(a).repeat_interleave(2, dim=1))
    return torch.cat(cos, 1), torch.cat(sin, 1)


def apply_rope(x, cos, sin):  # x [S, H, D]
    xr, xi = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    rot = torch.stack([-xi, xr], dim=-1).flatten(2)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w.double()


def ln(x):
    return F.layer_norm(x, (x.shape[-1],), eps=EPS)


def attention(q, k, v, cos, sin):  # [S, H, D]
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [H, S, D]
    a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(HEAD_DIM), dim=-1)
    return (a @ v).transpose(0, 1).reshape(q.shape[1], -1)


def heads(x):
    return x.reshape(x.shape[0], HEADS, HEAD_DIM)


def swiglu(x):
    a, b = x.chunk(2, dim=-1)
    return F.silu(a) * b


def forward(w, latents, refs, text, sigma, guidance=None):
    """latents [128][lh][lw]; refs: list of [128][h][w]; text [n][JOINT]; guidance
    only for a model with the guidance embedder."""
    lh, lw = latents.shape[1:]
    img = [latents.reshape(IN_CH, -1).t()]
    ids = [torch.tensor([[0, y, x, 0] for y in range(lh) for x in range(lw)])]
    for r, ref in enumerate(refs):
        img.append(ref.reshape(IN_CH, -1).t())
        tt = 10 + 10 * r
        ids.append(torch.tensor([[tt, y, x, 0] for y in range(ref.shape[1])
                                 for x in range(ref.shape[2])]))
    n_img = lh * lw
    x = torch.cat(img, 0)
    n_txt = text.shape[0]
    txt_ids = torch.tensor([[0, 0, 0, l] for l in range(n_txt)])
    cos, sin = rope_tables(torch.cat([txt_ids] + ids, 0))

    temb = lin(F.silu(lin(timestep_proj(sigma),
                          w['time_guidance_embed.timestep_embedder.linear_1.weight'])),
               w['time_guidance_embed.timestep_embedder.linear_2.weight'])
    if guidance is not None:
        temb = temb + lin(F.silu(lin(timestep_proj(guidance), w[GUIDANCE_NAMES[0]])),
                          w[GUIDANCE_NAMES[1]])
    st = F.silu(temb)
    mi = lin(st, w['double_stream_modulation_img.linear.weight']).chunk(6, dim=-1)
    mt = lin(st, w['double_stream_modulation_txt.linear.weight']).chunk(6, dim=-1)
    ms = lin(st, w['single_stream_modulation.linear.weight']).chunk(3, dim=-1)

    h = lin(x, w['x_embedder.weight'])
    c = lin(text, w['context_embedder.weight'])
    for b in range(N_DOUBLE):
        p = 'transformer_blocks.%d.' % b
        A = lambda n: w[p + 'attn.' + n + '.weight']
        nh = ln(h) * (1 + mi[1]) + mi[0]
        nc = ln(c) * (1 + mt[1]) + mt[0]
        q = torch.cat([rms(heads(lin(nc, A('add_q_proj'))), A('norm_added_q')),
                       rms(heads(lin(nh, A('to_q'))), A('norm_q'))], 0)
        k = torch.cat([rms(heads(lin(nc, A('add_k_proj'))), A('norm_added_k')),
                       rms(heads(lin(nh, A('to_k'))), A('norm_k'))], 0)
        v = torch.cat([heads(lin(nc, A('add_v_proj'))), heads(lin(nh, A('to_v')))], 0)
        o = attention(q, k, v, cos, sin)
        oc, oh = o[:n_txt], o[n_txt:]
        h = h + mi[2] * lin(oh, A('to_out.0'))
        c = c + mt[2] * lin(oc, A('to_add_out'))
        nh = ln(h) * (1 + mi[4]) + mi[3]
        h = h + mi[5] * lin(swiglu(lin(nh, w[p + 'ff.linear_in.weight'])),
                            w[p + 'ff.linear_out.weight'])
        nc = ln(c) * (1 + mt[4]) + mt[3]
        c = c + mt[5] * lin(swiglu(lin(nc, w[p + 'ff_context.linear_in.weight'])),
                            w[p + 'ff_context.linear_out.weight'])
    s = torch.cat([c, h], 0)
    for b in range(N_SINGLE):
        p = 'single_transformer_blocks.%d.attn.' % b
        ns = ln(s) * (1 + ms[1]) + ms[0]
        y = lin(ns, w[p + 'to_qkv_mlp_proj.weight'])
        qkv, mlp = y[:, :3 * HIDDEN], y[:, 3 * HIDDEN:]
        q, k, v = qkv.chunk(3, dim=-1)
        o = attention(rms(heads(q), w[p + 'norm_q.weight']), rms(heads(k), w[p + 'norm_k.weight']),
                      heads(v), cos, sin)
        s = s + ms[2] * lin(torch.cat([o, swiglu(mlp)], -1), w[p + 'to_out.weight'])
    h = s[n_txt:n_txt + n_img]
    scale, shift = lin(st, w['norm_out.linear.weight']).chunk(2, dim=-1)
    h = ln(h) * (1 + scale) + shift
    out = lin(h, w['proj_out.weight'])  # [n_img, 128]
    return out.t().reshape(IN_CH, lh, lw)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else 'tests/fixtures'
    torch.set_num_threads(2)
    with torch.no_grad():
        w = make_weights()
        lat = torch.from_numpy(uniform('latents', IN_CH * LH * LW).reshape(IN_CH, LH, LW)).double()
        text = torch.from_numpy(uniform('text', N_TEXT * JOINT).reshape(N_TEXT, JOINT)).double()
        ref = torch.from_numpy(uniform('ref0', IN_CH * REF_H * REF_W).reshape(
            IN_CH, REF_H, REF_W)).double()
        for name, refs, g in (('plain', [], None), ('edit', [ref], None),
                              ('guidance', [], GUIDANCE)):
            v = forward(w, lat, refs, text, SIGMA, g).numpy().astype('<f4')
            path = os.path.join(out_dir, 'flux2-dit-ref-%s.f32' % name)
            v.tofile(path)
            print('%s: mean %.5f, std %.5f, max |v| %.5f' % (path, v.mean(), v.std(),
                                                              np.abs(v).max()))
        v = forward(lora_merge(w), lat, [], text, SIGMA).numpy().astype('<f4')
        path = os.path.join(out_dir, 'flux2-dit-ref-lora.f32')
        v.tofile(path)
        print('%s: mean %.5f, std %.5f, max |v| %.5f' % (path, v.mean(), v.std(), np.abs(v).max()))


if __name__ == '__main__':
    main()
