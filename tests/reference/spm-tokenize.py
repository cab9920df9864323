#!/usr/bin/env python3
"""Independent SentencePiece-BPE reference for tests/test-tokenizer.c.

Reads tokenizer.ggml.tokens / scores / token_type straight from a GGUF file
(tests/reference/gguf_reader.py, not librlx) and tokenizes a text the way
SentencePiece's BPE model does with llama.cpp's conventions:
  1. put one space before the text and write every space as U+2581;
  2. start from single characters; repeatedly merge the adjacent pair whose
     concatenation is a vocabulary piece with the highest score (leftmost
     on ties);
  3. a character that is no piece becomes its UTF-8 bytes as <0xNN> pieces.
This is a plain O(n^2) loop: slow, but obviously right.

    python3 tests/reference/spm-tokenize.py FILE.gguf "Once upon a time"
prints the ids (without BOS) and the pieces.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_reader  # noqa: E402


def read_gguf_kv(path):
    return gguf_reader.read(path)[0]


def tokenize(kv, text):
    tokens = kv['tokenizer.ggml.tokens']
    scores = kv['tokenizer.ggml.scores']
    ids = {}
    for i, t in enumerate(tokens):
        ids[t] = i
    s = (' ' + text).replace(' ', '\u2581')
    syms = [c.encode() for c in s]
    while True:
        best = None
        for i in range(len(syms) - 1):
            j = ids.get(syms[i] + syms[i + 1])
            if j is not None and (best is None or scores[j] > best[0]):
                best = (scores[j], i)
        if best is None:
            break
        i = best[1]
        syms[i:i + 2] = [syms[i] + syms[i + 1]]
    out = []
    for sym in syms:
        if sym in ids:
            out.append(ids[sym])
        else:
            out.extend(ids[b'<0x%02X>' % b] for b in sym)
    return out


if __name__ == '__main__':
    kv = read_gguf_kv(sys.argv[1])
    res = tokenize(kv, sys.argv[2])
    print(' '.join(str(i) for i in res))
    print(' '.join(kv['tokenizer.ggml.tokens'][i].decode() for i in res))
