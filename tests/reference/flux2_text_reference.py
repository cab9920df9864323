#!/usr/bin/python3
"""Reference outputs for tests/test-flux2-text.c: the FLUX.2 [klein] text encoder
(the Qwen3 trunk's hidden states, joined), its chat format and tokens, the
sampling schedule, the seeded noise and the image-to-image start.

    /usr/bin/python3 tests/reference/flux2_text_reference.py tests/fixtures [DATA_DIR]

Written from the published code (facts, not copied): diffusers
pipeline_flux2_klein.py (_get_qwen3_prompt_embeds, compute_empirical_mu, the
timesteps), pipeline_flux2_klein_img2img.py (get_timesteps, prepare_latents),
scheduling_flow_match_euler_discrete.py (set_timesteps with mu, time_shift,
scale_noise), black-forest-labs/flux2 sampling.py (get_schedule) and
text_encoder.py (Qwen3Embedder), and transformers' Qwen3 modeling
(Qwen3RMSNorm, the q/k norms over head_dim, rotate_half rope, GQA, the causal
mask combined with a right-padded attention_mask, output_hidden_states).
transformers is not used: the Qwen3 forward is written below in float64.

Models (weights from the generator of tests/test-llm-reference.c, keyed by the
GGUF tensor name even where the C test writes a Hugging Face folder):
    u(name, i) = 2 * (splitmix64(fnv1a64(name) + (i + 1) * 0x9e3779b97f4a7c15) >> 40) / 2^24 - 1
    matrices u * 1.5 / sqrt(columns), token_embd u, norm weights 1 + u / 5
  wide:  Qwen3-4B's attention widths (hidden 2560, 32 query heads, 8 KV heads,
         head_dim 128, rope theta 1e6, eps 1e-6, tied embedding) with a narrow
         FFN (1024, not 9728: the FFN width selects no other code path, and the
         real one would make a 0.4 GB test file) and 2 layers; hidden states
         (0, 1, 2) are taken, i.e. the embedding, an intermediate layer and the
         last one (which transformers returns after the final norm): the real
         (9, 18, 27) of 36 layers remapped onto a 2-layer model. Every weight is
         rounded to bfloat16 (the published text_encoder/ is BF16; the C test
         writes BF16 safetensors). Vocabulary 512 (ids chosen below it).
         Prompt ids WIDE_IDS padded with PAD_ID to max_length 24.
  small: hidden 64, 4 heads, 2 KV heads, head_dim 16, FFN 96, 5 layers, F32
         GGUF; hidden states (3, 1, 4) in that order (layer 5 is never built),
         prompt SMALL_IDS padded to 16.
Padding as the pipeline: tokenizer(padding="max_length") pads on the right
(Qwen2Tokenizer's default side) with <|endoftext|>; the model gets
attention_mask 1/0 and positions 0..L-1, so query q sees key k when k <= q and
k is not padding: padding rows attend to every prompt key only.

Fixtures (float32 little-endian):
    flux2-text-ref-wide.f32   [24][960]: the joined [24][7680] at columns 3 + 8j
    flux2-text-ref-small.f32  [16][192]: the joined states, whole
    flux2-sched-ref.f32       for each SCHED_CASES (steps, seq_len): mu, then the
                              steps + 1 sigmas as diffusers computes them (numpy
                              float32); then for each NOISE_SEEDS the first 9
                              values and the mean and variance of the first
                              65536; then for each IMG2IMG_CASES the start step
    flux2-text-ref-tokens.txt for prompts 16, 20, 32 and 43 of
                              ggml-vocab-qwen2.gguf.inp: "index: ids" of the
                              chat-formatted prompt, from the Hugging Face ids of
                              the prompt in .out (HF's own tokenizer) and the ids
                              of the template's other pieces in
                              tokenizers/hf-qwen3/tokenizer.json
Noise (models/diffusion/flux2-sched.h): xoshiro256** seeded with splitmix64,
Box-Muller in double; computed here with Python integers and math.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

MASK64 = (1 << 64) - 1
GOLD = 0x9e3779b97f4a7c15

WIDE = dict(D=2560, H=32, HKV=8, DH=128, F=1024, NL=2, V=512, theta=1e6, eps=1e-6,
            layers=(0, 1, 2), L=24, bf16=True)
SMALL = dict(D=64, H=4, HKV=2, DH=16, F=96, NL=5, V=512, theta=1e6, eps=1e-6,
             layers=(3, 1, 4), L=16, bf16=False)
WIDE_IDS = [151 % 512, 7, 300, 42, 511, 0, 256, 99, 13, 400, 77, 3, 198]
SMALL_IDS = [5, 17, 260, 42, 8, 8, 301, 2, 499]
PAD_ID = 500
WIDE_COLS = [3 + 8 * j for j in range(960)]

SCHED_CASES = [(1, 256), (4, 1024), (4, 4096), (28, 4096), (50, 1024), (50, 4301),
               (20, 16384), (9, 1), (100, 2000)]
NOISE_SEEDS = [0, 42, 0xFFFFFFFFFFFFFFFF]
IMG2IMG_CASES = [(10, 0.6), (10, 0.7), (50, 0.8), (4, 1.0), (4, 0.2), (28, 0.35), (100, 0.29),
                 (3, 0.5)]
TOKEN_PROMPTS = [16, 20, 32, 43]


def fnv1a64(s):
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & MASK64
    return h


def uniform(name, n):
    seed = np.uint64(fnv1a64(name))
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over='ignore'):
        z = seed + i * np.uint64(GOLD)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        z = z ^ (z >> np.uint64(31))
    return (2.0 * ((z >> np.uint64(40)).astype(np.float64) / 16777216.0) - 1.0).astype(np.float32)


def tensor(name, shape, kind, bf16):
    n = int(np.prod(shape))
    u = uniform(name, n)
    if kind == 'mat':
        v = u * np.float32(1.5 / math.sqrt(shape[-1]))
    elif kind == 'emb':
        v = u
    else:  # norm
        v = np.float32(1.0) + u * np.float32(0.2)
    t = torch.from_numpy(v.reshape(shape).astype(np.float32))
    if bf16:
        t = t.to(torch.bfloat16).to(torch.float32)
    return t.to(torch.float64)


def rms(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, pos, theta):
    # x [L, heads, dh]; rotate_half layout (transformers' Qwen3)
    dh = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, dh, 2, dtype=torch.float64) / dh))
    f = pos[:, None].to(torch.float64) * inv[None, :]
    emb = torch.cat([f, f], -1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    x1, x2 = x[..., :dh // 2], x[..., dh // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def encode(m, ids):
    D, H, HKV, DH, F, NL, V = m['D'], m['H'], m['HKV'], m['DH'], m['F'], m['NL'], m['V']
    bf, eps, L = m['bf16'], m['eps'], m['L']
    n = len(ids)
    toks = torch.tensor(ids + [PAD_ID] * (L - n))
    pos = torch.arange(L)
    emb = tensor('token_embd.weight', (V, D), 'emb', bf)
    x = emb[toks]
    hs = [x]
    q_idx = torch.arange(L)[:, None]
    k_idx = torch.arange(L)[None, :]
    allowed = (k_idx <= q_idx) & (k_idx < n)
    for il in range(NL):
        def w(what, shape, kind):
            return tensor('blk.%d.%s' % (il, what), shape, kind, bf)
        h = rms(x, w('attn_norm.weight', (D,), 'norm'), eps)
        q = (h @ w('attn_q.weight', (H * DH, D), 'mat').T).view(L, H, DH)
        k = (h @ w('attn_k.weight', (HKV * DH, D), 'mat').T).view(L, HKV, DH)
        v = (h @ w('attn_v.weight', (HKV * DH, D), 'mat').T).view(L, HKV, DH)
        q = rms(q, w('attn_q_norm.weight', (DH,), 'norm'), eps)
        k = rms(k, w('attn_k_norm.weight', (DH,), 'norm'), eps)
        q, k = rope(q, pos, m['theta']), rope(k, pos, m['theta'])
        rep = H // HKV
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = torch.einsum('qhd,khd->hqk', q, k) / math.sqrt(DH)
        s = s.masked_fill(~allowed[None], float('-inf'))
        a = torch.einsum('hqk,khd->qhd', torch.softmax(s, -1), v).reshape(L, H * DH)
        x = x + a @ w('attn_output.weight', (D, H * DH), 'mat').T
        h = rms(x, w('ffn_norm.weight', (D,), 'norm'), eps)
        g = h @ w('ffn_gate.weight', (F, D), 'mat').T
        u = h @ w('ffn_up.weight', (F, D), 'mat').T
        x = x + (torch.nn.functional.silu(g) * u) @ w('ffn_down.weight', (D, F), 'mat').T
        hs.append(x)
    hs[NL] = rms(x, tensor('output_norm.weight', (D,), 'norm', bf), eps)
    out = torch.stack([hs[k] for k in m['layers']], 0)  # [3, L, D]
    return out.permute(1, 0, 2).reshape(L, len(m['layers']) * D)


def empirical_mu(seq_len, steps):
    a1, b1 = 8.73809524e-05, 1.89833333
    a2, b2 = 0.00016927, 0.45666666
    if seq_len > 4300:
        return a2 * seq_len + b2
    m200 = a2 * seq_len + b2
    m10 = a1 * seq_len + b1
    a = (m200 - m10) / 190.0
    b = m200 - 200.0 * a
    return a * steps + b


def diffusers_sigmas(steps, seq_len):
    mu = empirical_mu(seq_len, steps)
    s = np.linspace(1.0, 1 / steps, steps)
    s = np.array(s).astype(np.float32)
    with np.errstate(divide='ignore'):
        s = math.exp(mu) / (math.exp(mu) + (1 / s - 1) ** 1.0)
    s = np.asarray(s, dtype=np.float32)
    return mu, np.concatenate([s, np.zeros(1, np.float32)])


def bfl_sigmas(steps, seq_len):
    mu = empirical_mu(seq_len, steps)
    t = torch.linspace(1, 0, steps + 1)
    return (math.exp(mu) / (math.exp(mu) + (1 / t - 1) ** 1.0)).numpy()


def noise(seed, n):
    sm = seed

    def split():
        nonlocal sm
        sm = (sm + GOLD) & MASK64
        z = sm
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK64
        return z ^ (z >> 31)
    s = [split() for _ in range(4)]

    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & MASK64

    def nxt():
        r = (rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return r
    out = []
    while len(out) < n:
        a, b = nxt(), nxt()
        u1 = ((a >> 11) + 1) * 2.0 ** -53
        u2 = (b >> 11) * 2.0 ** -53
        r = math.sqrt(-2.0 * math.log(u1))
        out.append(r * math.cos(2 * math.pi * u2))
        out.append(r * math.sin(2 * math.pi * u2))
    return np.array(out[:n], dtype=np.float32)


def token_lines(data):
    tdir = os.path.join(data, 'tokenizers')
    inp = open(os.path.join(tdir, 'ggml-vocab-qwen2.gguf.inp'), encoding='utf-8').read()
    cases = inp.split('\n__ggml_vocab_test__\n')
    outs = open(os.path.join(tdir, 'ggml-vocab-qwen2.gguf.out')).read().split('\n')
    tj = json.load(open(os.path.join(tdir, 'hf-qwen3', 'tokenizer.json'), encoding='utf-8'))
    added = {t['content']: t['id'] for t in tj['added_tokens']}
    vocab = tj['model']['vocab']
    # byte-level forms: "\n" is "Ċ" (U+010A)
    nl, nl2 = vocab['\u010a'], vocab['\u010a\u010a']
    pre = [added['<|im_start|>'], vocab['user'], nl]
    post = [added['<|im_end|>'], nl, added['<|im_start|>'], vocab['assistant'], nl,
            added['<think>'], nl2, added['</think>'], nl2]
    lines = []
    for i in TOKEN_PROMPTS:
        assert cases[i] and not cases[i][0].isspace()
        ids = pre + [int(x) for x in outs[i].split()] + post
        lines.append('%d: %s' % (i, ' '.join(str(x) for x in ids)))
    return lines


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else 'tests/fixtures'
    here = os.path.dirname(os.path.abspath(__file__))
    data = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, '..', '..', '..', 'shared',
                                                             'data')
    torch.set_num_threads(2)

    small = encode(SMALL, SMALL_IDS).to(torch.float32).numpy()
    small.astype('<f4').tofile(os.path.join(out, 'flux2-text-ref-small.f32'))
    # the rows of the prompt do not depend on the padding (a causal model)
    nopad = encode(dict(SMALL, L=len(SMALL_IDS)), SMALL_IDS).to(torch.float32).numpy()
    assert np.abs(nopad - small[:len(SMALL_IDS)]).max() < 1e-5
    print('small: %s, |x| max %.3f' % (small.shape, np.abs(small).max()))

    wide = encode(WIDE, WIDE_IDS).to(torch.float32).numpy()
    wide[:, WIDE_COLS].astype('<f4').tofile(os.path.join(out, 'flux2-text-ref-wide.f32'))
    print('wide: %s, |x| max %.3f, pad rows differ: %.3g' %
          (wide.shape, np.abs(wide).max(), np.abs(wide[-1] - wide[-2]).max()))

    vals = []
    for steps, seq in SCHED_CASES:
        mu, sig = diffusers_sigmas(steps, seq)
        bfl = bfl_sigmas(steps, seq)
        assert np.abs(sig - bfl).max() < 1e-6, (steps, seq)
        vals += [mu] + list(sig)
    for seed in NOISE_SEEDS:
        z = noise(seed, 65536)
        vals += list(z[:9]) + [float(z.astype(np.float64).mean()),
                               float(z.astype(np.float64).var())]
    for steps, strength in IMG2IMG_CASES:
        init = min(int(steps * strength), steps)
        vals.append(max(steps - init, 0))
    np.array(vals, dtype='<f4').tofile(os.path.join(out, 'flux2-sched-ref.f32'))

    lines = token_lines(data)
    with open(os.path.join(out, 'flux2-text-ref-tokens.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
