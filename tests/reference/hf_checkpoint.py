#!/usr/bin/python3
"""Hugging Face folders of the llm_reference.py models, and their check.

test-llm-reference.c (test_hf_checkpoints) writes each tiny model as a
Hugging Face checkpoint (config.json + model.safetensors, or two shards and
model.safetensors.index.json) into the build folder and compares what
rlx_llm_load makes of it with the PyTorch logits in
tests/fixtures/llm-ref-<case>.f32. This script is the Python side of that
layout, from transformers' conventions rather than our C code:

    /usr/bin/python3 tests/reference/hf_checkpoint.py write OUT_DIR [CASE...]
        writes OUT_DIR/hf-<case>/ for llama3 and qwen3 (or the cases named):
        HF tensor names, Q/K in rotate_half order (llama.cpp's permute undone,
        as llm_reference.py does), F32, and config.json
    /usr/bin/python3 tests/reference/hf_checkpoint.py check DIR CASE
        reads a folder (this script's or the C test's: build/tests/tmp-*/hf-*),
        maps the HF tensors back onto the reference's names, runs
        llm_reference.forward on them and compares with the fixture (1e-5)

It needs only numpy and torch (Debian's python3-numpy, python3-torch).
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llm_reference as ref  # noqa: E402

LAYER = {
    'attn_norm.weight': 'input_layernorm.weight',
    'ffn_norm.weight': 'post_attention_layernorm.weight',
    'attn_q.weight': 'self_attn.q_proj.weight',
    'attn_k.weight': 'self_attn.k_proj.weight',
    'attn_v.weight': 'self_attn.v_proj.weight',
    'attn_output.weight': 'self_attn.o_proj.weight',
    'attn_q.bias': 'self_attn.q_proj.bias',
    'attn_k.bias': 'self_attn.k_proj.bias',
    'attn_v.bias': 'self_attn.v_proj.bias',
    'attn_q_norm.weight': 'self_attn.q_norm.weight',
    'attn_k_norm.weight': 'self_attn.k_norm.weight',
    'ffn_gate.weight': 'mlp.gate_proj.weight',
    'ffn_up.weight': 'mlp.up_proj.weight',
    'ffn_down.weight': 'mlp.down_proj.weight',
}
CLASS = {'llama': 'LlamaForCausalLM', 'mistral': 'MistralForCausalLM',
         'qwen2': 'Qwen2ForCausalLM', 'qwen3': 'Qwen3ForCausalLM'}


def hf_name(gguf):
    if gguf == 'token_embd.weight':
        return 'model.embed_tokens.weight'
    if gguf == 'output_norm.weight':
        return 'model.norm.weight'
    if gguf == 'output.weight':
        return 'lm_head.weight'
    _, il, rest = gguf.split('.', 2)
    return 'model.layers.%s.%s' % (il, LAYER[rest])


def gguf_tensors(c):
    """(name, rows, cols, kind) of the model as the C test writes it."""
    D, H, HKV, DH, F = c['n_embd'], c['n_head'], c['n_head_kv'], c['head_dim'], c['n_ff']
    out = [('token_embd.weight', ref.VOCAB, D, 'emb')]
    for il in range(c['n_layer']):
        p = 'blk.%d.' % il
        out += [(p + 'attn_norm.weight', 0, D, 'norm'), (p + 'attn_q.weight', H * DH, D, 'mat'),
                (p + 'attn_k.weight', HKV * DH, D, 'mat'), (p + 'attn_v.weight', HKV * DH, D, 'mat')]
        if c['qkv_bias']:
            out += [(p + 'attn_q.bias', 0, H * DH, 'bias'), (p + 'attn_k.bias', 0, HKV * DH, 'bias'),
                    (p + 'attn_v.bias', 0, HKV * DH, 'bias')]
        if c['qk_norm']:
            out += [(p + 'attn_q_norm.weight', 0, DH, 'norm'),
                    (p + 'attn_k_norm.weight', 0, DH, 'norm')]
        out += [(p + 'attn_output.weight', D, H * DH, 'mat'), (p + 'ffn_norm.weight', 0, D, 'norm'),
                (p + 'ffn_gate.weight', F, D, 'mat'), (p + 'ffn_up.weight', F, D, 'mat'),
                (p + 'ffn_down.weight', D, F, 'mat')]
    out.append(('output_norm.weight', 0, D, 'norm'))
    if not c['tied']:
        out.append(('output.weight', ref.VOCAB, D, 'mat'))
    return out


def permuted(c):
    return c['arch'] in ('llama', 'mistral')


def write_safetensors(path, tensors):
    header, blobs, off = {'__metadata__': {'format': 'pt'}}, [], 0
    for name, arr in tensors:
        b = arr.astype('<f4').tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(arr.shape), 'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def read_safetensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == '__metadata__':
            continue
        assert t['dtype'] in ('F32', 'BF16'), t['dtype']
        a, b = t['data_offsets']
        if t['dtype'] == 'F32':
            v = np.frombuffer(data[a:b], '<f4')
        else:
            v = (np.frombuffer(data[a:b], '<u2').astype(np.uint32) << 16).view('<f4')
        out[name] = v.reshape(t['shape']).astype(np.float64)
    return out


def write(out_dir, name):
    c = ref.CASES[name]
    folder = os.path.join(out_dir, 'hf-' + name)
    os.makedirs(folder, exist_ok=True)
    tensors = []
    for gname, rows, cols, kind in gguf_tensors(c):
        t = ref.tensor(gname, rows, cols, kind)
        if permuted(c) and (gname.endswith('attn_q.weight') or gname.endswith('attn_k.weight')):
            t = ref.unpermute(t, c['n_head'] if 'attn_q' in gname else c['n_head_kv'])
        tensors.append((hf_name(gname), t.numpy().astype(np.float32)))
    write_safetensors(os.path.join(folder, 'model.safetensors'), tensors)
    cfg = {'architectures': [CLASS[c['arch']]], 'model_type': c['arch'],
           'hidden_size': c['n_embd'], 'intermediate_size': c['n_ff'],
           'num_hidden_layers': c['n_layer'], 'num_attention_heads': c['n_head'],
           'num_key_value_heads': c['n_head_kv'], 'head_dim': c['head_dim'],
           'max_position_embeddings': 64, 'rms_norm_eps': c['eps'], 'rope_theta': c['rope_base'],
           'tie_word_embeddings': c['tied'], 'vocab_size': ref.VOCAB, 'torch_dtype': 'float32'}
    if c['llama3']:
        f, lo, hi, old = c['llama3']
        cfg['rope_scaling'] = {'rope_type': 'llama3', 'factor': f, 'low_freq_factor': lo,
                               'high_freq_factor': hi, 'original_max_position_embeddings': int(old)}
    if c['window']:
        cfg['sliding_window'] = c['window']
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=1)
    print(folder)


def check(folder, name):
    c = ref.CASES[name]
    hf = {}
    files = sorted(x for x in os.listdir(folder) if x.endswith('.safetensors'))
    for x in files:
        hf.update(read_safetensors(os.path.join(folder, x)))
    cfg = json.load(open(os.path.join(folder, 'config.json')))
    assert cfg['model_type'] == c['arch'] and cfg['hidden_size'] == c['n_embd']
    # the reference draws tensors by GGUF name: serve them from the folder,
    # re-permuting Q/K of llama/mistral (forward undoes that permutation)
    def from_folder(gname, rows, cols, kind):
        t = torch.from_numpy(hf[hf_name(gname)].copy())
        if permuted(c) and (gname.endswith('attn_q.weight') or gname.endswith('attn_k.weight')):
            nh = c['n_head'] if 'attn_q' in gname else c['n_head_kv']
            r, k = t.shape
            t = t.reshape(nh, 2, r // nh // 2, k).transpose(1, 2).reshape(r, k)
        return t
    ref.tensor = from_folder
    logits = ref.forward(c, ref.TOKENS).to(torch.float32).numpy()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    want = np.fromfile(os.path.join(root, 'fixtures', 'llm-ref-%s.f32' % name), '<f4')
    err = np.abs(logits.ravel() - want).max() / np.abs(want).max()
    print('%s (%s): relative error %.3g against the fixture' % (folder, name, err))
    return err <= 1e-5


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == 'write':
        for name in sys.argv[3:] or ['llama3', 'qwen3']:
            write(sys.argv[2], name)
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == 'check':
        return 0 if check(sys.argv[2], sys.argv[3]) else 1
    print(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main())
