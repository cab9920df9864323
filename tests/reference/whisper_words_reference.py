#!/usr/bin/python3
"""Word timestamps for the Whisper tests: openai-whisper's timing.find_alignment
written here from its published algorithm, on the random-weight model and the
jfk.wav mel of whisper_reference.py (same weights, same float64 network).

Rerun (rewrites tests/fixtures/whisper-ref-words.txt):

    /usr/bin/python3 tests/reference/whisper_words_reference.py [--data ../shared/data]

The decoder runs over [sot, en, transcribe, no_timestamps, *TEXT, eot] with the
mel of jfk.wav (its first 3000 frames, as the encoder fixtures); the
cross-attention scores (q.k / sqrt(d), before the softmax) of whisper-tiny's
alignment heads are kept; per head a softmax over the first 550 audio
positions (jfk.wav is 1100 mel frames: openai's num_frames // 2), standardized
over the tokens (population std), median-filtered with width 7 along time
(reflect padding, as scipy's / openai's median_filter); the heads' mean; rows
of the no-timestamps token and the text (not sot..task, not eot); DTW on the
negated matrix (openai's dtw_cpu and backtrace); words split at tokens that
start with a space or are punctuation; a word starts where the warp path
enters its first token's row and ends where it enters the next word's (the
last: the row after the text), at 50 rows per second.

Outputs: whisper-ref-words-matrix.f32, the matrix [26][550] (float32, the
DTW's input, negated there; float32 as openai's dtw_cpu computes),
whisper-ref-words.txt, one line per word: `<start> <end> <first token index> <n tokens>`,
times in seconds, and whisper-ref-words-probs.txt, each text token's
probability in the same pass as find_alignment takes it (the logits at the
position before the token, from the no-timestamps token on, softmax over the
tokens below end-of-text). TEXT is the jfk transcript in Whisper's GPT-2 vocabulary
(the words need not be what the random model would say)."""
import argparse
import math
import os
import string
import sys

import numpy as np
import torch

import whisper_reference as ref

TEXT = [400, 370, 452, 7177, 6280, 11, 1029, 406, 437, 428, 1941, 393, 360, 337, 291, 11, 1029,
        437, 291, 393, 360, 337, 428, 1941, 13]
HEADS = [(2, 2), (3, 0), (3, 2), (3, 3), (3, 4), (3, 5)]  # whisper-tiny's alignment heads
NUM_FRAMES = 1100


def cross_qk(tokens, xa, w):
    """The decoder's cross-attention scores per (layer, head), [T, 1500]."""
    out = {}
    T = len(tokens)
    x = w['decoder.token_embedding.weight'][torch.tensor(tokens)] + \
        w['decoder.positional_embedding'][:T]
    d = ref.N_STATE // ref.N_HEAD
    for i in range(ref.N_LAYER):
        p = f'decoder.blocks.{i}'
        x = x + ref.attention(ref.layer_norm(x, w, p + '.attn_ln'), None, w, p + '.attn', True)
        h = ref.layer_norm(x, w, p + '.cross_attn_ln')
        q = ref.linear(h, w, p + '.cross_attn.query').view(T, ref.N_HEAD, d).permute(1, 0, 2)
        k = ref.linear(xa, w, p + '.cross_attn.key', bias=False).view(-1, ref.N_HEAD, d)
        k = k.permute(1, 2, 0)
        qk = (q * d ** -0.25) @ (k * d ** -0.25)
        for hh in range(ref.N_HEAD):
            out[(i, hh)] = qk[hh]
        x = x + ref.attention(h, xa, w, p + '.cross_attn', False)
        x = x + ref.mlp(ref.layer_norm(x, w, p + '.mlp_ln'), w, p + '.mlp')
    return out


def median_filter(x, width):
    pad = width // 2
    xp = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode='reflect')
    win = np.lib.stride_tricks.sliding_window_view(xp, width, axis=-1)
    return np.median(win, axis=-1)


def dtw(x):
    N, M = x.shape
    # float32, as openai's dtw_cpu
    cost = np.ones((N + 1, M + 1), dtype=np.float32) * np.inf
    trace = -np.ones((N + 1, M + 1), dtype=np.float32)
    cost[0, 0] = 0
    for j in range(1, M + 1):
        for i in range(1, N + 1):
            c0, c1, c2 = cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]
            if c0 < c1 and c0 < c2:
                c, t = c0, 0
            elif c1 < c0 and c1 < c2:
                c, t = c1, 1
            else:
                c, t = c2, 2
            cost[i, j] = x[i - 1, j - 1] + c
            trace[i, j] = t
    i, j = N, M
    trace[0, :] = 2
    trace[:, 0] = 1
    res = []
    while i > 0 or j > 0:
        res.append((i - 1, j - 1))
        t = trace[i, j]
        if t == 0:
            i, j = i - 1, j - 1
        elif t == 1:
            i -= 1
        else:
            j -= 1
    res = np.array(res)[::-1]
    return res[:, 0], res[:, 1]


def token_bytes(data_dir):
    """The vocabulary's bytes from the ggml file (for the word split)."""
    path = os.path.join(data_dir, 'whisper', 'for-tests-ggml-tiny.bin')
    with open(path, 'rb') as f:
        b = f.read()
    off = 4 + 11 * 4
    n_mel, n_fft = np.frombuffer(b, '<i4', 2, off)
    off += 8 + 4 * n_mel * n_fft
    n = int(np.frombuffer(b, '<i4', 1, off)[0])
    off += 4
    words = []
    for _ in range(n):
        ln = int(np.frombuffer(b, '<i4', 1, off)[0])
        words.append(b[off + 4:off + 4 + ln])
        off += 4 + ln
    return words


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument('--data', default=os.path.join(root, '..', 'shared', 'data'))
    ap.add_argument('--fixtures', default=os.path.join(root, 'tests', 'fixtures'))
    args = ap.parse_args()
    torch.set_num_threads(2)
    filters = ref.read_ggml_filters(os.path.join(args.data, 'whisper', 'for-tests-ggml-tiny.bin'))
    audio = ref.read_wav(os.path.join(args.data, 'audio', 'jfk.wav'))
    _, norm, _ = ref.log_mel(audio, filters)
    mel = torch.from_numpy(norm[:, :ref.N_FRAMES].copy())
    vocab = token_bytes(args.data)
    with torch.no_grad():
        w = ref.make_weights(False)
        xa = ref.encoder(mel, w)
        sot_seq = [ref.SOT, ref.LANG0, ref.TRANSCRIBE]
        tokens = sot_seq + [ref.NO_TIMESTAMPS] + TEXT + [ref.EOT]
        qks = cross_qk(tokens, xa, w)
        logits = ref.decoder(tokens, xa, w)
        token_probs = logits[len(sot_seq):, :ref.EOT].softmax(dim=-1)
        text_probs = token_probs[torch.arange(len(TEXT)), torch.tensor(TEXT)].numpy()
    weights = torch.stack([qks[h] for h in HEADS]).numpy()[:, :, :NUM_FRAMES // 2]
    weights = torch.from_numpy(weights).softmax(dim=-1).numpy()
    mean = weights.mean(axis=-2, keepdims=True)
    std = weights.std(axis=-2, keepdims=True)
    weights = median_filter((weights - mean) / std, 7)
    matrix = weights.mean(axis=0)[len(sot_seq):-1].astype(np.float32)
    matrix.tofile(os.path.join(args.fixtures, 'whisper-ref-words-matrix.f32'))
    text_idx, time_idx = dtw(-matrix)
    # words: split at a leading space or punctuation (all of TEXT is whole UTF-8)
    words = []
    for i, t in enumerate(TEXT):
        s = vocab[t].decode('utf-8')
        if not words or s.startswith(' ') or s.strip() in string.punctuation:
            words.append([i, 1])
        else:
            words[-1][1] += 1
    jumps = np.pad(np.diff(text_idx), (1, 0), constant_values=1).astype(bool)
    jump_times = time_idx[jumps] / 50.0
    with open(os.path.join(args.fixtures, 'whisper-ref-words-probs.txt'), 'w') as f:
        for p in text_probs:
            f.write(f'{p:.9e}\n')
    with open(os.path.join(args.fixtures, 'whisper-ref-words.txt'), 'w') as f:
        for first, n in words:
            f.write(f'{jump_times[first]:.2f} {jump_times[first + n]:.2f} {first} {n}\n')
    print(f'{len(words)} words:', [(round(float(jump_times[a]), 2), round(float(jump_times[a + n]), 2))
                                   for a, n in words])


if __name__ == '__main__':
    sys.exit(main())
