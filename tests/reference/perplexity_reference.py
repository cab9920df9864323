#!/usr/bin/python3
"""Independent reference for tests/cli/perplexity.sh: llama.cpp's perplexity
of stories260K on tests/fixtures/perplexity-story.txt with a 64-token window.

    /usr/bin/python3 tests/reference/perplexity_reference.py [MODEL.gguf]

writes tests/fixtures/perplexity-stories260K-ctx64.txt. Nothing here comes
from librlx:
  - the GGUF (metadata and F32 tensors) is read by gguf_reader.py;
  - the text is tokenized by tests/reference/spm-tokenize.py (SentencePiece
    BPE from the published algorithm), with BOS first as the model's
    tokenizer.ggml.add_bos_token says (SentencePiece's default: yes);
  - the network is llm_reference.py's PyTorch llama (HF's formulation, in
    float64), fed the file's weights instead of its generated ones;
  - the method is llama.cpp's perplexity: non-overlapping windows of n_ctx
    tokens (a shorter tail dropped), the first token of each replaced by BOS,
    every window evaluated from an empty cache, and only its second half
    scored: -log softmax(logits[i])[token i + 1] for i in [n_ctx/2, n_ctx-2];
    PPL = exp(mean NLL).
"""
import importlib.util
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
sys.path.insert(0, HERE)
import gguf_reader  # noqa: E402
import llm_reference  # noqa: E402

N_CTX = 64


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_gguf(path):
    """(metadata dict, {name: float64 torch tensor [ne1, ne0] or [ne0]})."""
    kv, infos, data, base = gguf_reader.read(path)
    tensors = {}
    for name, ne, gtype, offset in infos:
        assert gtype == 0, '%s: only F32 tensors are read here' % name
        n = int(np.prod(ne))
        a = np.frombuffer(data, dtype='<f4', count=n, offset=base + offset)
        t = torch.from_numpy(a.astype(np.float64))
        tensors[name] = t.reshape(ne[1], ne[0]) if len(ne) == 2 else t
    return kv, tensors


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        REPO, '..', 'shared', 'data', 'llm', 'stories260K.gguf')
    text_path = os.path.join(TESTS, 'fixtures', 'perplexity-story.txt')
    kv, W = read_gguf(model)
    spm = load_module('spm_tokenize', os.path.join(HERE, 'spm-tokenize.py'))
    with open(text_path, encoding='utf-8') as f:
        text = f.read()
    bos = kv['tokenizer.ggml.bos_token_id']
    add_bos = kv.get('tokenizer.ggml.add_bos_token', True)
    tokens = ([bos] if add_bos else []) + spm.tokenize(kv, text)

    arch = kv['general.architecture'].decode()
    assert arch == 'llama'
    n_embd = kv['llama.embedding_length']
    n_head = kv['llama.attention.head_count']
    c = dict(llm_reference.BASE, arch='llama',
             n_layer=kv['llama.block_count'], n_embd=n_embd, n_head=n_head,
             n_head_kv=kv.get('llama.attention.head_count_kv', n_head),
             head_dim=n_embd // n_head, n_ff=kv['llama.feed_forward_length'],
             rope_base=kv.get('llama.rope.freq_base', 10000.0),
             eps=kv['llama.attention.layer_norm_rms_epsilon'],
             tied='output.weight' not in W)

    def tensor(name, rows, cols, kind):
        t = W[name]
        assert tuple(t.shape) == ((rows, cols) if rows else (cols,)), (name, t.shape)
        return t

    llm_reference.tensor = tensor  # the file's weights instead of generated ones
    llm_reference.VOCAB = len(kv['tokenizer.ggml.tokens'])

    n_chunk = len(tokens) // N_CTX
    assert n_chunk >= 2
    first = N_CTX // 2
    nll, count, running = 0.0, 0, []
    for ci in range(n_chunk):
        window = tokens[ci * N_CTX:(ci + 1) * N_CTX]
        if add_bos:
            window[0] = bos
        with torch.no_grad():
            logits = llm_reference.forward(c, window)
        logp = torch.log_softmax(logits, dim=-1)
        for i in range(first, N_CTX - 1):
            nll -= float(logp[i, window[i + 1]])
            count += 1
        running.append(math.exp(nll / count))
    ppl = math.exp(nll / count)
    out = os.path.join(TESTS, 'fixtures', 'perplexity-stories260K-ctx64.txt')
    with open(out, 'w') as f:
        f.write('# written by tests/reference/perplexity_reference.py\n')
        f.write('n_tokens %d\n' % len(tokens))
        f.write('windows %d\n' % n_chunk)
        f.write('scored %d\n' % count)
        f.write('running %s\n' % ','.join('%.4f' % r for r in running))
        f.write('ppl %.9f\n' % ppl)
    print('%s: %d tokens, %d windows, PPL = %.9f' % (out, len(tokens), n_chunk, ppl))


if __name__ == '__main__':
    main()
