#!/usr/bin/python3
"""Independent PyTorch reference for tests/test-llm-reference.c.

For each tiny random-weight model (one per architecture) this computes the
logits of every position of a fixed token sequence and writes them, float32
little-endian [T, vocab], to tests/fixtures/llm-ref-<case>.f32:

    /usr/bin/python3 tests/reference/llm_reference.py

The networks are written from the architectures' published descriptions
(the Hugging Face transformers modeling code of LlamaForCausalLM,
MistralForCausalLM, Qwen2/Qwen3ForCausalLM, Gemma2/Gemma3ForCausalLM and
Phi3ForCausalLM: HF weight layouts, rotate_half rope, repeat_kv GQA, explicit
masks), not from our C code. The weights come from a counter-based generator
(splitmix64 over FNV-1a(name) + index) that the C test reproduces to write
the same model as a GGUF with the project's writer; the only GGUF knowledge
here is the converter's documented transformations, undone to get the HF
tensors back:
  - llama/mistral: Q and K rows are permuted (llama.cpp convert_hf_to_gguf
    `permute`), so GGUF uses interleaved-pair rope; we un-permute and use HF's
    rotate_half;
  - gemma2/gemma3: every RMSNorm weight is stored as 1 + w (HF computes
    x * (1 + w)); we subtract 1 and apply HF's formula;
  - rope_freqs.weight holds per-frequency divisors (llama 3 scaling);
  - YaRN comes from rope.scaling.type/factor/original_context_length, as
    HF's _compute_yarn_parameters (beta_fast 32, beta_slow 1, truncated
    correction range, attention factor 0.1 ln(factor) + 1 on cos and sin).

Keep the CASES table in sync with test-llm-reference.c.
"""
import math
import os
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)

VOCAB = 64
TOKENS = [1, 17, 5, 42, 63, 8, 8, 30, 2, 55, 11, 40]

BASE = dict(n_layer=2, n_embd=32, n_head=4, n_head_kv=2, head_dim=8, n_ff=48,
            rope_base=10000.0, eps=1e-5, window=0, swa_pattern=0,
            attn_softcap=0.0, final_softcap=0.0, rope_linear=0.0, rope_freqs=False, llama3=None, yarn=None,
            qkv_bias=False, qk_norm=False, post_norms=False, fused_qkv=False,
            fused_up=False, tied=False, gemma=False)

CASES = {
    'llama': dict(BASE, arch='llama', rope_freqs=True),
    # llama 3 rope scaling from rope.scaling.* metadata: factor, low/high
    # frequency factors, original context (wavelengths 6.3, 63, 628, 6283
    # cover the kept, smoothed and divided bands)
    'llama3': dict(BASE, arch='llama', llama3=(8.0, 1.0, 4.0, 64.0)),
    'mistral': dict(BASE, arch='mistral', window=4, swa_pattern=1),
    # YaRN: factor 4 over an original context of 64 (with head_dim 16 the
    # correction range is dims 0..3: kept, two ramped, the rest interpolated)
    'qwen3-yarn': dict(BASE, arch='qwen3', head_dim=16, qk_norm=True, tied=True, eps=1e-6,
                       yarn=(4.0, 64.0)),
    'qwen2': dict(BASE, arch='qwen2', qkv_bias=True, rope_base=1000000.0, eps=1e-6),
    'qwen3': dict(BASE, arch='qwen3', head_dim=16, qk_norm=True, tied=True, eps=1e-6),
    'gemma2': dict(BASE, arch='gemma2', head_dim=16, gemma=True, post_norms=True, tied=True,
                   window=4, swa_pattern=2, attn_softcap=2.0, final_softcap=8.0, eps=1e-6),
    'gemma3': dict(BASE, arch='gemma3', n_layer=6, head_dim=16, gemma=True, post_norms=True,
                   qk_norm=True, tied=True, window=4, swa_pattern=6, rope_base=1000000.0,
                   rope_linear=2.0, eps=1e-6),
    'phi3': dict(BASE, arch='phi3', fused_qkv=True, fused_up=True),
}

M64 = (1 << 64) - 1


def fnv1a(name):
    h = 0xcbf29ce484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001b3) & M64
    return h


def uniform(name, n):
    """n values in [-1, 1): splitmix64(fnv1a(name) + (i + 1) * golden)."""
    with np.errstate(over='ignore'):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(fnv1a(name)) + i * np.uint64(0x9e3779b97f4a7c15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    return (2.0 * u - 1.0).astype(np.float32)


def tensor(name, rows, cols, kind):
    """The GGUF tensor as the C test writes it (row-major [rows, cols]) in
    float32, returned as float64 torch."""
    n = rows * cols if rows else cols
    u = uniform(name, n)
    if kind == 'mat':
        v = u * np.float32(1.5 / math.sqrt(cols))
    elif kind == 'emb':
        v = u
    elif kind == 'norm':
        v = np.float32(1.0) + u * np.float32(0.2)
    elif kind == 'bias':
        v = u * np.float32(0.1)
    elif kind == 'freq':
        v = np.float32(2.5) + u * np.float32(1.5)  # divisors in [1, 4]
    v = v.astype(np.float32)
    t = torch.from_numpy(v.astype(np.float64))
    return t.reshape(rows, cols) if rows else t


def unpermute(w, n_head):
    rows, cols = w.shape
    return w.reshape(n_head, rows // n_head // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def rms_norm(x, w, eps, gemma):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * ((1.0 + (w - 1.0)) if gemma else w)  # gemma: HF (1 + w_hf), w_hf = w_gguf - 1


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def llama3_inv_freq(inv, factor, low, high, old_ctx):
    # HF _compute_llama3_parameters
    low_wl, high_wl = old_ctx / low, old_ctx / high
    wl = 2 * math.pi / inv
    out = torch.where(wl > low_wl, inv / factor, inv)
    smooth = (old_ctx / wl - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wl < high_wl) & ~(wl > low_wl)
    return torch.where(medium, smoothed, out)


def yarn_inv_freq(base, d, factor, orig_ctx, beta_fast=32.0, beta_slow=1.0):
    # HF _compute_yarn_parameters (truncate=True); returns inv_freq and the
    # attention factor applied to cos and sin
    def corr_dim(rot):
        return (d * math.log(orig_ctx / (rot * 2 * math.pi))) / (2 * math.log(base))
    low = max(math.floor(corr_dim(beta_fast)), 0)
    high = min(math.ceil(corr_dim(beta_slow)), d - 1)
    if low == high:
        high += 0.001
    pos_freqs = base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    extra, inter = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    ramp = torch.clamp((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
    extra_factor = 1 - ramp
    inv = inter * (1 - extra_factor) + extra * extra_factor
    return inv, 0.1 * math.log(factor) + 1.0


def rope(x, pos, base, d, linear, freq_div, llama3=None, yarn=None):
    # HF: inv_freq = 1 / base^(2i/d); linear scaling divides it by the factor;
    # rope_freqs.weight divides by per-frequency factors
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    if linear:
        inv = inv / linear
    if freq_div is not None:
        inv = inv / freq_div
    if llama3:
        inv = llama3_inv_freq(inv, *llama3)
    mscale = 1.0
    if yarn:
        inv, mscale = yarn_inv_freq(base, d, *yarn)
    ang = pos[:, None].double() * inv[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos()[:, None, :] * mscale, emb.sin()[:, None, :] * mscale
    return x * cos + rotate_half(x) * sin


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def forward(c, tokens):
    D, H, HKV, DH, F = c['n_embd'], c['n_head'], c['n_head_kv'], c['head_dim'], c['n_ff']
    T = len(tokens)
    gemma = c['gemma']
    eps = c['eps']
    emb = tensor('token_embd.weight', VOCAB, D, 'emb')
    x = emb[torch.tensor(tokens)]
    if gemma:
        x = x * math.sqrt(D)
    pos = torch.arange(T)
    freq_div = tensor('rope_freqs.weight', 0, DH // 2, 'freq') if c['rope_freqs'] else None
    for il in range(c['n_layer']):
        p = 'blk.%d.' % il

        def W(what, rows, cols, kind='mat'):
            return tensor(p + what, rows, cols, kind)

        sw = c['swa_pattern']
        swa = c['window'] > 0 and (sw == 1 or (sw > 1 and il % sw < sw - 1))
        h = rms_norm(x, W('attn_norm.weight', 0, D, 'norm'), eps, gemma)
        if c['fused_qkv']:
            qkv = h @ W('attn_qkv.weight', (H + 2 * HKV) * DH, D).T
            q, k, v = qkv.split([H * DH, HKV * DH, HKV * DH], dim=-1)
        else:
            wq, wk = W('attn_q.weight', H * DH, D), W('attn_k.weight', HKV * DH, D)
            if c['arch'] in ('llama', 'mistral'):
                wq, wk = unpermute(wq, H), unpermute(wk, HKV)
            q = h @ wq.T
            k = h @ wk.T
            v = h @ W('attn_v.weight', HKV * DH, D).T
            if c['qkv_bias']:
                q = q + W('attn_q.bias', 0, H * DH, 'bias')
                k = k + W('attn_k.bias', 0, HKV * DH, 'bias')
                v = v + W('attn_v.bias', 0, HKV * DH, 'bias')
        q = q.reshape(T, H, DH)
        k = k.reshape(T, HKV, DH)
        v = v.reshape(T, HKV, DH)
        if c['qk_norm']:
            q = rms_norm(q, W('attn_q_norm.weight', 0, DH, 'norm'), eps, gemma)
            k = rms_norm(k, W('attn_k_norm.weight', 0, DH, 'norm'), eps, gemma)
        base, linear = c['rope_base'], c['rope_linear']
        if c['arch'] == 'gemma3' and swa:
            base, linear = 10000.0, 0.0  # rope_local_base_freq, unscaled
        q = rope(q, pos, base, DH, linear, freq_div, c['llama3'], c['yarn'])
        k = rope(k, pos, base, DH, linear, freq_div, c['llama3'], c['yarn'])
        # repeat_kv: query head h reads kv head h // (H / HKV)
        rep = H // HKV
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scale = 1.0 / math.sqrt(DH)  # gemma: query_pre_attn_scalar = head_dim
        s = torch.einsum('ihd,jhd->hij', q, k) * scale
        if c['attn_softcap']:
            s = torch.tanh(s / c['attn_softcap']) * c['attn_softcap']
        i = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        allowed = j <= i
        if swa:
            allowed = allowed & (j > i - c['window'])
        s = s.masked_fill(~allowed[None], float('-inf'))
        a = torch.softmax(s, dim=-1)
        o = torch.einsum('hij,jhd->ihd', a, v).reshape(T, H * DH)
        o = o @ W('attn_output.weight', D, H * DH).T
        if c['post_norms']:
            o = rms_norm(o, W('post_attention_norm.weight', 0, D, 'norm'), eps, gemma)
        x = x + o
        h = rms_norm(x, W('ffn_norm.weight', 0, D, 'norm'), eps, gemma)
        if c['fused_up']:
            gate, up = (h @ W('ffn_up.weight', 2 * F, D).T).chunk(2, dim=-1)
        else:
            gate = h @ W('ffn_gate.weight', F, D).T
            up = h @ W('ffn_up.weight', F, D).T
        act = gelu_tanh(gate) if gemma else torch.nn.functional.silu(gate)
        f = (act * up) @ W('ffn_down.weight', D, F).T
        if c['post_norms']:
            f = rms_norm(f, W('post_ffw_norm.weight', 0, D, 'norm'), eps, gemma)
        x = x + f
    x = rms_norm(x, tensor('output_norm.weight', 0, D, 'norm'), eps, gemma)
    head = emb if c['tied'] else tensor('output.weight', VOCAB, D, 'mat')
    logits = x @ head.T
    if c['final_softcap']:
        logits = torch.tanh(logits / c['final_softcap']) * c['final_softcap']
    return logits


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    only = sys.argv[1:]
    for name, c in CASES.items():
        if only and name not in only:
            continue
        logits = forward(c, TOKENS).to(torch.float32).numpy()
        path = os.path.join(root, 'fixtures', 'llm-ref-%s.f32' % name)
        logits.astype('<f4').tofile(path)
        print('%s: %s, |logits| max %.3f' % (path, logits.shape, float(np.abs(logits).max())))


if __name__ == '__main__':
    main()
