#!/usr/bin/python3
"""Independent PyTorch reference for the Whisper tests (models/whisper).

Rerun (about a minute or two on 2 cores; rewrites tests/fixtures/whisper-ref-*):

    /usr/bin/python3 tests/reference/whisper_reference.py [--data ../shared/data]

and for large-v3's layout (under a minute; rewrites tests/fixtures/whisper-v3-ref-*,
for tests/test-whisper-v3.c; see use_layout and main_v3):

    /usr/bin/python3 tests/reference/whisper_reference.py --layout v3

What it is. A random-weight model with whisper-tiny's real shapes (n_vocab 51865,
audio ctx 1500, state 384, 6 heads, 4 + 4 layers, text ctx 448, 80 mels) whose
weights come from a counter-based generator that tests/whisper-writer.c
reproduces bit for bit (the C side writes the same model as a whisper.cpp ggml
.bin and as a Hugging Face folder). The network is written here from the
published architecture (openai-whisper's model.py: AudioEncoder, TextDecoder,
ResidualAttentionBlock), not from our C code, and runs in float64 from the
float32 weights. The log-mel spectrogram is openai's log_mel_spectrogram
(written here with numpy's FFT in float64) on ../shared/data/audio/jfk.wav with
the real 80 x 201 filterbank read from for-tests-ggml-tiny.bin. The decoding is
openai's DecodingTask for one 30-s window at temperature 0 (greedy), with its
logit filters SuppressBlank, SuppressTokens and ApplyTimestampRules.

The generator (same text in tests/whisper-writer.h):
  u(name, i) = 2 * (splitmix64(fnv1a64(name) + (i + 1) * 0x9e3779b97f4a7c15) >> 40) / 2^24 - 1
  name = the canonical openai state-dict name, i = row-major element index;
  value in float32:
    linear / conv weights   u * float32(gain * sqrt(3 / fan_in))  (fan_in = in, or in_ch * 3:
                            variance gain^2 / fan_in, so each layer keeps its input's
                            scale); gain 4 for every attention's query and key weights
                            (random attention is otherwise nearly uniform and greedy
                            decoding repeats one token forever), 1/4 for
                            decoder.blocks.*.cross_attn.out.weight (the audio context is
                            nearly the same at every position and would swamp the
                            residual stream), else 1
    layer-norm weights      1 + u / 8
    all biases (LN too)     u / 16
    token embedding,
    decoder positions       u / 2
    encoder positions       openai's sinusoids(1500, 384), in double, rounded to float32

Every output is float32 little-endian unless said otherwise; fixture layouts:
  whisper-ref-weights.f32    [5][16] 16 values of each of WEIGHT_PROBES (element
                             indices PROBE_INDEX modulo the tensor's size), for
                             tests/test-whisper-writer.c
  whisper-ref-mel.f32        [80][MEL_FRAMES] the normalized log-mel ((max(x, M - 8) + 4) / 4)
                             of jfk.wav at the frames MEL_FRAMES (0..255 and 1050..1149),
                             mel-major (row = mel bin, columns in the order listed)
  whisper-ref-mel-log.f32    [80][MEL_FRAMES] the same frames before normalization
                             (log10(max(mel, 1e-10)))
  whisper-ref-mel-max.f32    [2] M = the max of log10 over all 4100 frames (jfk.wav + 30 s
                             of zeros, last frame dropped), and the frame count 4100
  whisper-ref-mel-input-a.f32, whisper-ref-mel-input-b.f32
                             [80][551] each: the normalized mel at frames 0..550 and
                             551..1101; with frames 1102..2999, which all equal
                             (M - 4) / 4 (only padding zeros reach them), they are the
                             encoder's whole input (two files to stay under 300 KB)
  whisper-ref-encoder.f32    [48][384] encoder output (after ln_post) rows ENC_ROWS
                             (0..15, 740..755, 1484..1499); input: the first 3000 frames
                             of the normalized mel above
  whisper-ref-logits.f32     [8][N_COLS] decoder logits for PROMPT (all 8 positions) at the
                             vocabulary columns LOGIT_COLS: every id i < 50265 with
                             i % 97 == 0 (519 ids), then 50265..51864 (1600 ids), N_COLS 2119
  whisper-ref-logits-stats.f32 [8][3] per position over the whole vocabulary: argmax id
                             (as float, exact), max logit, logsumexp
  whisper-ref-lang.f32       [99] language probabilities (softmax over the 99 language
                             tokens 50259..50357 of the logits at [sot]), in token order
  whisper-ref-greedy.txt     text: `no_speech_prob <p>`, `no_speech_logprob <log p>` (the
                             softmax of the logits at the sot position of the first
                             step, at <|nocaptions|> 50362), then one line per sampled token
                             `<id> <margin> <ts_margin>`: margin = chosen logit minus the
                             best other allowed logit after the filters (inf when only one
                             was allowed), ts_margin = log P(any timestamp) - max log P(text)
                             before the last rule (the timestamp-only decision),
                             `<logit> <lse>`: that token's raw logit (before the filters)
                             and the logsumexp of the raw logits at that step. inf and
                             -inf appear where one side is fully suppressed (first step:
                             text; after a lone timestamp: timestamps).
The *-f16 variants (whisper-ref-{encoder,logits,logits-stats,lang}-f16.f32,
whisper-ref-greedy-f16.txt) are the same with every weight that whisper.cpp's
convert-pt-to-ggml.py stores in F16 rounded to float16 first (2-D+ tensors except
the positional embeddings and conv biases), for the F16 .bin.

Cross-check: tests/reference/whisper_openai_check.py runs openai-whisper's own
model.py and decoding.py (release 20250625, float32) on the same weights and mel.
It found: the suppress list equal to its tokenizer's non_speech_tokens + specials,
the ggml filterbank equal to its mel_filters.npz (exactly), encoder rows within
1.6e-4, prompt logits within 2.4e-3, language probabilities within 3.6e-3,
no-speech probability within 2e-4 relative, and all 224 greedy tokens equal (F32
and F16 weights); its torch.stft float32 mel is within 2.3e-5 of ours.

Tolerances to expect from a float32 implementation of the same network:
  mel (normalized): ~5e-5 absolute (float32 FFT/filterbank vs float64; the log10 of
    bins near the 1e-10 clamp or the max - 8 floor can differ more: compare
    after normalization, which clamps them);
  encoder output: ~1e-3 absolute (values O(1); openai's float32 is within 1.6e-4);
  logits: ~1e-2 absolute (values O(5..30); openai's float32 is within 2.4e-3);
  language probs: ~1e-2 absolute (openai's float32: 3.6e-3); no-speech prob: compare
    no_speech_logprob, ~1e-2 absolute (the probability is ~2e-12);
  greedy tokens: exact wherever the recorded margin and |ts_margin| exceed ~2e-2
    (the smallest margins are 0.015..0.05 at a few steps; openai's float32 run
    agrees on all 224); a step with a smaller margin is a near tie, and a float32
    run may take the other branch from there on; the per-step logit and lse
    columns compare like the logits (~1e-2).
F16 weights: compare against the -f16 fixtures with the same tolerances (the
weights are identical; only the arithmetic differs).

The suppress list is openai/whisper-tiny's generation_config suppress_tokens (the
same set as openai's tokenizer.non_speech_tokens plus sot, translate, transcribe,
startoflm, startofprev, nospeech), used as a fixed list; the vocabulary here has
no BPE merges, so encode(" ") is taken as the single token 220 (both confirmed by
whisper_openai_check.py with openai's tokenizer and its multilingual ranks).
ApplyTimestampRules is openai's current version (timestamps non-decreasing, and
a segment may not end at the time it began: the last closed pair's timestamp + 1
is the lowest allowed timestamp after a text token).
"""
import argparse
import math
import os
import struct
import sys
import wave

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

N_VOCAB = 51865
N_AUDIO_CTX = 1500
N_STATE = 384
N_HEAD = 6
N_AUDIO_LAYER = 4
N_TEXT_LAYER = 4
N_TEXT_CTX = 448
N_MELS = 80
N_FFT = 400
HOP = 160
N_SAMPLES = 480000
N_FRAMES = 3000

EOT = 50257
SOT = 50258
LANG0 = 50259
N_LANGS = 99
TRANSLATE = 50358
TRANSCRIBE = 50359
SOLM = 50360
PREV = 50361
NO_SPEECH = 50362
NO_TIMESTAMPS = 50363
TS_BEGIN = 50364

SUPPRESS = [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92,
            93, 359, 503, 522, 542, 873, 893, 902, 918, 922, 931, 1350, 1853, 1982, 2460, 2627,
            3246, 3253, 3268, 3536, 3846, 3961, 4183, 4667, 6585, 6647, 7273, 9061, 9383, 10428,
            10929, 11938, 12033, 12331, 12562, 13793, 14157, 14635, 15265, 15618, 16553, 16604,
            18362, 18956, 20075, 21675, 22520, 26130, 26161, 26435, 28279, 29464, 31650, 32302,
            32470, 36865, 42863, 47425, 49870, 50254, 50258, 50358, 50359, 50360, 50361, 50362]
BLANK = 220  # encode(" "), single token

PROMPT = [SOT, LANG0, TRANSCRIBE, TS_BEGIN, 400, 1012, 11, 1029]
MEL_FRAMES = list(range(0, 256)) + list(range(1050, 1150))
ENC_ROWS = list(range(0, 16)) + list(range(740, 756)) + list(range(1484, 1500))
LOGIT_COLS = [i for i in range(0, 50265) if i % 97 == 0] + list(range(50265, N_VOCAB))
WEIGHT_PROBES = ['encoder.conv1.weight', 'encoder.blocks.2.attn.key.weight',
                 'decoder.token_embedding.weight', 'decoder.blocks.3.cross_attn_ln.bias',
                 'encoder.positional_embedding']
# the v3 layout has 2 encoder blocks
WEIGHT_PROBES_V3 = ['encoder.conv1.weight', 'encoder.blocks.1.attn.key.weight',
                    'decoder.token_embedding.weight', 'decoder.blocks.3.cross_attn_ln.bias',
                    'encoder.positional_embedding']
PROBE_INDEX = [0, 1, 2, 3, 100, 1000, 4095, 12345, 40000, 65535, 99999, 123456, 147455,
               147449, 17, 383]  # taken modulo the tensor size

M64 = (1 << 64) - 1

PREFIX = 'whisper-ref'


def use_layout(name):
    """Switch the module's shapes and special ids to a layout of
    tests/whisper-writer.h: 'tiny' (the defaults above) or 'v3', large-v3's
    128 mels and 51,866-token vocabulary at small widths (d_model 256 in 4
    heads, 2 encoder and 4 decoder layers like large-v3-turbo's decoder).
    The v3 special ids follow openai's tokenizer.py get_encoding with
    num_languages=100: after the 50,257 text tokens come <|endoftext|>,
    <|startoftranscript|>, the 100 languages (LANGUAGES' order, "yue" last at
    50358), translate, transcribe, startoflm, startofprev, nospeech,
    notimestamps, then the 1501 timestamps; whisper.cpp's loader gets the same
    ids from n_vocab (num_languages = n_vocab - 51765 - 1)."""
    global N_VOCAB, N_STATE, N_HEAD, N_AUDIO_LAYER, N_TEXT_LAYER, N_MELS, N_LANGS
    global TRANSLATE, TRANSCRIBE, SOLM, PREV, NO_SPEECH, NO_TIMESTAMPS, TS_BEGIN
    global SUPPRESS, PROMPT, LOGIT_COLS, PREFIX
    if name == 'tiny':
        return
    assert name == 'v3', name
    N_VOCAB, N_STATE, N_HEAD, N_AUDIO_LAYER, N_TEXT_LAYER, N_MELS = 51866, 256, 4, 2, 4, 128
    N_LANGS = N_VOCAB - 51765 - 1
    TRANSLATE = LANG0 + N_LANGS
    TRANSCRIBE, SOLM, PREV = TRANSLATE + 1, TRANSLATE + 2, TRANSLATE + 3
    NO_SPEECH, NO_TIMESTAMPS, TS_BEGIN = TRANSLATE + 4, TRANSLATE + 5, TRANSLATE + 6
    assert (TRANSLATE, NO_SPEECH, TS_BEGIN, TS_BEGIN + 1500) == (50359, 50363, 50365, 51865)
    # openai's DecodingTask._get_suppress_tokens: the non-speech text tokens
    # (the same text ids in both vocabularies) + translate, transcribe, sot,
    # startofprev, startoflm, nospeech (openai/whisper-large-v3's
    # generation_config suppress_tokens ends in 50258, 50359..50363 alike)
    SUPPRESS = [t for t in SUPPRESS if t < EOT] + [SOT, TRANSLATE, TRANSCRIBE, SOLM, PREV,
                                                   NO_SPEECH]
    PROMPT = [SOT, LANG0, TRANSCRIBE, TS_BEGIN, 400, 1012, 11, 1029]
    LOGIT_COLS = [i for i in range(0, EOT) if i % 97 == 0] + list(range(EOT, N_VOCAB))
    PREFIX = 'whisper-v3-ref'



# ---------------------------------------------------------------- generator


def fnv1a64(name):
    h = 0xcbf29ce484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001b3) & M64
    return h


def uniform(name, first, n):
    """u(name, i) for i in [first, first + n), float32 (exact)."""
    with np.errstate(over='ignore'):
        i = np.arange(first + 1, first + n + 1, dtype=np.uint64)
        z = np.uint64(fnv1a64(name)) + i * np.uint64(0x9e3779b97f4a7c15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        z = z ^ (z >> np.uint64(31))
    k = (z >> np.uint64(40)).astype(np.int64) - (1 << 23)
    return (k.astype(np.float64) / float(1 << 23)).astype(np.float32)


def sinusoids(length, channels):
    """openai's sinusoids(length, channels, max_timescale=10000) in double
    (math.sin/exp: the C library's, as the C writer), rounded to float32."""
    half = channels // 2
    inc = math.log(10000.0) / (half - 1)
    inv = [math.exp(-inc * k) for k in range(half)]
    out = np.empty((length, channels), dtype=np.float32)
    for t in range(length):
        row = [t * v for v in inv]
        out[t, :half] = [math.sin(x) for x in row]
        out[t, half:] = [math.cos(x) for x in row]
    return out


def tensor_specs():
    """(canonical name, shape, kind) in openai's state-dict order."""
    S, FF = N_STATE, 4 * N_STATE
    specs = [('encoder.positional_embedding', (N_AUDIO_CTX, S), 'sin'),
             ('encoder.conv1.weight', (S, N_MELS, 3), 'mat'),
             ('encoder.conv1.bias', (S,), 'bias'),
             ('encoder.conv2.weight', (S, S, 3), 'mat'),
             ('encoder.conv2.bias', (S,), 'bias')]

    def attn(p):
        for k in ('query', 'key', 'value', 'out'):
            specs.append((f'{p}.{k}.weight', (S, S), 'mat'))
            if k != 'key':
                specs.append((f'{p}.{k}.bias', (S,), 'bias'))

    def ln(p):
        specs.append((f'{p}.weight', (S,), 'lnw'))
        specs.append((f'{p}.bias', (S,), 'bias'))

    def block(p, cross):
        attn(p + '.attn')
        ln(p + '.attn_ln')
        if cross:
            attn(p + '.cross_attn')
            ln(p + '.cross_attn_ln')
        specs.append((p + '.mlp.0.weight', (FF, S), 'mat'))
        specs.append((p + '.mlp.0.bias', (FF,), 'bias'))
        specs.append((p + '.mlp.2.weight', (S, FF), 'mat'))
        specs.append((p + '.mlp.2.bias', (S,), 'bias'))
        ln(p + '.mlp_ln')

    for i in range(N_AUDIO_LAYER):
        block(f'encoder.blocks.{i}', False)
    ln('encoder.ln_post')
    specs.append(('decoder.positional_embedding', (N_TEXT_CTX, S), 'emb'))
    specs.append(('decoder.token_embedding.weight', (N_VOCAB, S), 'emb'))
    for i in range(N_TEXT_LAYER):
        block(f'decoder.blocks.{i}', True)
    ln('decoder.ln')
    return specs


def gain(name):
    if '.query.weight' in name or '.key.weight' in name:
        return 4.0
    if 'cross_attn.out.weight' in name:
        return 0.25
    return 1.0


def make_tensor(name, shape, kind):
    n = int(np.prod(shape))
    if kind == 'sin':
        return sinusoids(*shape)
    u = uniform(name, 0, n)
    if kind == 'mat':
        fan_in = int(np.prod(shape[1:]))
        v = u * np.float32(gain(name) * math.sqrt(3.0 / fan_in))
    elif kind == 'lnw':
        v = np.float32(1.0) + u * np.float32(0.125)
    elif kind == 'bias':
        v = u * np.float32(0.0625)
    else:
        v = u * np.float32(0.5)
    assert v.dtype == np.float32
    return v.reshape(shape)


def f16_stored(name, shape):
    """whisper.cpp convert-pt-to-ggml.py with use_f16: F16 unless 1-D, a conv
    bias (stored [n, 1], 2-D, but kept F32) or a positional embedding."""
    return (len(shape) >= 2 and 'positional_embedding' not in name)


def make_weights(f16):
    w = {}
    for name, shape, kind in tensor_specs():
        v = make_tensor(name, shape, kind)
        if f16 and f16_stored(name, shape):
            v = v.astype(np.float16).astype(np.float32)
        w[name] = torch.from_numpy(v.astype(np.float64))
    return w


# ---------------------------------------------------------------- model


def layer_norm(x, w, p):
    return F.layer_norm(x, (x.shape[-1],), w[p + '.weight'], w[p + '.bias'], eps=1e-5)


def linear(x, w, p, bias=True):
    y = x @ w[p + '.weight'].T
    return y + w[p + '.bias'] if bias else y


def attention(x, xa, w, p, causal, cache=None):
    """openai MultiHeadAttention.qkv_attention: q and k both scaled by d^-0.25.
    cache (a dict, as openai's kv_cache hooks) keeps the cross-attention keys
    and values of xa, which do not change between decoding steps, and the
    self-attention keys and values of the tokens seen so far (x holds only the
    new ones)."""
    src = x if xa is None else xa
    q = linear(x, w, p + '.query')
    if cache is not None and xa is not None and p in cache:
        k, v = cache[p]
    else:
        k = linear(src, w, p + '.key', bias=False)
        v = linear(src, w, p + '.value')
        if cache is not None and xa is None and p in cache:
            k = torch.cat([cache[p][0], k])
            v = torch.cat([cache[p][1], v])
        if cache is not None:
            cache[p] = (k, v)
    T, S = q.shape[0], k.shape[0]
    d = N_STATE // N_HEAD
    scale = d ** -0.25
    q = q.view(T, N_HEAD, d).permute(1, 0, 2) * scale
    k = k.view(S, N_HEAD, d).permute(1, 2, 0) * scale
    v = v.view(S, N_HEAD, d).permute(1, 0, 2)
    qk = q @ k
    if causal:
        mask = torch.full((T, S), -math.inf).triu(1 + S - T)
        qk = qk + mask
    a = torch.softmax(qk, dim=-1) @ v
    return linear(a.permute(1, 0, 2).reshape(T, N_STATE), w, p + '.out')


def mlp(x, w, p):
    return linear(F.gelu(linear(x, w, p + '.0')), w, p + '.2')


def encoder(mel, w):
    """mel [N_MELS, 3000] -> [N_AUDIO_CTX, N_STATE]"""
    x = F.gelu(F.conv1d(mel[None], w['encoder.conv1.weight'], w['encoder.conv1.bias'],
                        padding=1))
    x = F.gelu(F.conv1d(x, w['encoder.conv2.weight'], w['encoder.conv2.bias'], stride=2,
                        padding=1))
    x = x[0].T + w['encoder.positional_embedding']
    for i in range(N_AUDIO_LAYER):
        p = f'encoder.blocks.{i}'
        x = x + attention(layer_norm(x, w, p + '.attn_ln'), None, w, p + '.attn', False)
        x = x + mlp(layer_norm(x, w, p + '.mlp_ln'), w, p + '.mlp')
    return layer_norm(x, w, 'encoder.ln_post')


def decoder(tokens, xa, w, last_only=False, cache=None, offset=0):
    """tokens (list) -> logits [T, n_vocab] (or [n_vocab] of the last); with a
    cache, tokens are the ones after the first `offset` already in it."""
    T = len(tokens)
    x = w['decoder.token_embedding.weight'][torch.tensor(tokens)] + \
        w['decoder.positional_embedding'][offset:offset + T]
    for i in range(N_TEXT_LAYER):
        p = f'decoder.blocks.{i}'
        x = x + attention(layer_norm(x, w, p + '.attn_ln'), None, w, p + '.attn', True, cache)
        x = x + attention(layer_norm(x, w, p + '.cross_attn_ln'), xa, w, p + '.cross_attn',
                          False, cache)
        x = x + mlp(layer_norm(x, w, p + '.mlp_ln'), w, p + '.mlp')
    x = layer_norm(x, w, 'decoder.ln')
    if last_only:
        x = x[-1:]
    logits = x @ w['decoder.token_embedding.weight'].T
    return logits[-1] if last_only else logits


# ---------------------------------------------------------------- mel


def read_ggml_filters(path):
    d = open(path, 'rb').read()
    assert struct.unpack_from('<I', d, 0)[0] == 0x67676d6c
    n_mel, n_fft = struct.unpack_from('<2i', d, 48)
    assert (n_mel, n_fft) == (N_MELS, N_FFT // 2 + 1)
    f = np.frombuffer(d, dtype='<f4', count=n_mel * n_fft, offset=56)
    return f.reshape(n_mel, n_fft).astype(np.float64)


def read_wav(path):
    with wave.open(path) as wf:
        assert wf.getframerate() == 16000 and wf.getsampwidth() == 2
        ch = wf.getnchannels()
        x = np.frombuffer(wf.readframes(wf.getnframes()), dtype='<i2').astype(np.float64)
    x = x.reshape(-1, ch).mean(axis=1)
    return (x / 32768.0).astype(np.float32)  # openai: ffmpeg s16le / 32768, float32


def log_mel(audio, filters):
    """openai log_mel_spectrogram(audio, padding=N_SAMPLES) in float64; returns
    (log10 spectrum [80, frames], normalized [80, frames], max)."""
    x = np.concatenate([audio.astype(np.float64), np.zeros(N_SAMPLES)])
    x = np.pad(x, (N_FFT // 2, N_FFT // 2), mode='reflect')  # torch.stft center=True
    n_frames = 1 + (len(x) - N_FFT) // HOP
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    spec = np.fft.rfft(x[idx] * window, axis=1)  # [frames, 201]
    mag = (np.abs(spec) ** 2)[:-1].T  # drop the last frame -> [201, frames]
    mel = filters @ mag
    lg = np.log10(np.maximum(mel, 1e-10))
    mx = lg.max()
    norm = (np.maximum(lg, mx - 8.0) + 4.0) / 4.0
    return lg, norm, mx


# ---------------------------------------------------------------- decoding


def apply_filters(logits, tokens, sample_begin):
    """openai SuppressBlank, SuppressTokens, ApplyTimestampRules; returns the
    filtered logits and ts_margin (log P(timestamps) - max log P(text))."""
    logits = logits.clone()
    if len(tokens) == sample_begin:
        logits[[BLANK, EOT]] = -math.inf
    logits[SUPPRESS] = -math.inf
    logits[NO_TIMESTAMPS] = -math.inf
    seq = tokens[sample_begin:]
    last_ts = len(seq) >= 1 and seq[-1] >= TS_BEGIN
    penult_ts = len(seq) < 2 or seq[-2] >= TS_BEGIN
    if last_ts:
        if penult_ts:
            logits[TS_BEGIN:] = -math.inf
        else:
            logits[:EOT] = -math.inf
    stamps = [t for t in seq if t >= TS_BEGIN]
    if stamps:
        last = stamps[-1] if (last_ts and not penult_ts) else stamps[-1] + 1
        logits[TS_BEGIN:last] = -math.inf
    if len(tokens) == sample_begin:
        logits[:TS_BEGIN] = -math.inf
        logits[TS_BEGIN + 50 + 1:] = -math.inf  # max_initial_timestamp 1.0 s
    logprobs = torch.log_softmax(logits, dim=-1)
    ts_lp = torch.logsumexp(logprobs[TS_BEGIN:], dim=-1)
    text_lp = logprobs[:TS_BEGIN].max()
    ts_margin = float(ts_lp - text_lp)
    if ts_lp > text_lp:
        logits[:TS_BEGIN] = -math.inf
    return logits, ts_margin


def greedy(xa, w, sample_len=N_TEXT_CTX // 2, start=None):
    tokens = list(start or [SOT, LANG0, TRANSCRIBE])
    sample_begin = len(tokens)
    no_speech = None
    out = []
    cache = {}
    for i in range(sample_len):
        if i == 0:
            logits_all = decoder(tokens, xa, w, cache=cache)
            no_speech = float(torch.log_softmax(logits_all[0], -1)[NO_SPEECH])
            logits = logits_all[-1]
        else:
            logits = decoder(tokens[-1:], xa, w, last_only=True, cache=cache,
                             offset=len(tokens) - 1)
            if i % 50 == 7:  # the cache against a full recomputation
                full = decoder(tokens, xa, w, last_only=True)
                assert float((full - logits).abs().max()) < 1e-9
        f, ts_margin = apply_filters(logits, tokens, sample_begin)
        top2 = torch.topk(f, 2)
        nxt = int(top2.indices[0])
        margin = float(top2.values[0] - top2.values[1])
        out.append((nxt, margin, ts_margin, float(logits[nxt]),
                    float(torch.logsumexp(logits, -1))))
        tokens.append(nxt)
        if nxt == EOT:
            break
    return out, no_speech


# ---------------------------------------------------------------- main


def write_f32(path, a):
    a = np.ascontiguousarray(np.asarray(a, dtype='<f4'))
    assert a.nbytes < 300 * 1024, path
    a.tofile(path)


def run_model(w, mel3000, fixtures, suffix, log):
    xa = encoder(mel3000, w)
    log(f'encoder{suffix}: mean {float(xa.mean()):.4f} std {float(xa.std()):.4f}')
    write_f32(os.path.join(fixtures, f'{PREFIX}-encoder{suffix}.f32'),
              xa[ENC_ROWS].numpy())

    logits = decoder(PROMPT, xa, w)
    write_f32(os.path.join(fixtures, f'{PREFIX}-logits{suffix}.f32'),
              logits[:, LOGIT_COLS].numpy())
    mx = logits.max(dim=-1)
    stats = torch.stack([mx.indices.double(), mx.values, torch.logsumexp(logits, -1)], 1)
    write_f32(os.path.join(fixtures, f'{PREFIX}-logits-stats{suffix}.f32'), stats.numpy())
    log(f'logits{suffix}: std {float(logits.std()):.3f} argmax {mx.indices.tolist()}')

    at_sot = decoder([SOT], xa, w)[0]
    lang = torch.softmax(at_sot[LANG0:LANG0 + N_LANGS], -1)
    write_f32(os.path.join(fixtures, f'{PREFIX}-lang{suffix}.f32'), lang.numpy())
    top = torch.topk(lang, 5)
    log(f'lang{suffix}: top ids {[LANG0 + int(i) for i in top.indices]} '
        f'p {[round(float(p), 5) for p in top.values]}')

    steps, no_speech = greedy(xa, w)
    with open(os.path.join(fixtures, f'{PREFIX}-greedy{suffix}.txt'), 'w') as f:
        f.write(f'no_speech_prob {math.exp(no_speech):.9g}\n')
        f.write(f'no_speech_logprob {no_speech:.9g}\n')
        for t, m, tm, lo, lse in steps:
            f.write(f'{t} {m:.6g} {tm:.6g} {lo:.7g} {lse:.7g}\n')
    log(f'greedy{suffix}: no_speech logprob {no_speech:.6g}, {len(steps)} tokens: '
        f'{[s[0] for s in steps]}')
    log(f'greedy{suffix}: min margin {min(s[1] for s in steps):.4g}, '
        f'min |ts_margin| {min(abs(s[2]) for s in steps):.4g}')
    return xa


def read_filters_fixture(path, n_mels):
    """[n_mels][201] float32: tests/fixtures/mel-filters-<n>-ref.f32, librosa's
    slaney filterbank as tests/reference/mel_reference.py writes it (openai's
    mel_filters.npz holds librosa's "mel_128" for large-v3)."""
    f = np.fromfile(path, dtype='<f4')
    assert f.size == n_mels * (N_FFT // 2 + 1), path
    return f.reshape(n_mels, N_FFT // 2 + 1).astype(np.float64)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument('--data', default=os.path.join(root, '..', 'shared', 'data'))
    ap.add_argument('--fixtures', default=os.path.join(root, 'tests', 'fixtures'))
    ap.add_argument('--no-f16', action='store_true', help='skip the -f16 fixtures')
    ap.add_argument('--layout', choices=['tiny', 'v3'], default='tiny',
                    help='v3: the whisper-v3-ref-* fixtures (F32 only)')
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    log = lambda s: print(s, flush=True)
    use_layout(args.layout)
    if args.layout == 'v3':
        return main_v3(args, log)

    # the generator's probes for test-whisper-writer.c
    specs = {n: (s, k) for n, s, k in tensor_specs()}
    probes = []
    for name in WEIGHT_PROBES:
        shape, kind = specs[name]
        v = make_tensor(name, shape, kind).reshape(-1)
        probes.append(v[[i % v.size for i in PROBE_INDEX]])
    write_f32(os.path.join(args.fixtures, f'{PREFIX}-weights.f32'), np.stack(probes))

    filters = read_ggml_filters(os.path.join(args.data, 'whisper', 'for-tests-ggml-tiny.bin'))
    audio = read_wav(os.path.join(args.data, 'audio', 'jfk.wav'))
    lg, norm, mx = log_mel(audio, filters)
    log(f'mel: {lg.shape[1]} frames, max {mx:.6f}')
    write_f32(os.path.join(args.fixtures, 'whisper-ref-mel.f32'), norm[:, MEL_FRAMES])
    write_f32(os.path.join(args.fixtures, 'whisper-ref-mel-log.f32'), lg[:, MEL_FRAMES])
    write_f32(os.path.join(args.fixtures, 'whisper-ref-mel-max.f32'), [mx, lg.shape[1]])
    assert (norm[:, 1102:N_FRAMES] == (mx - 4.0) / 4.0).all()
    write_f32(os.path.join(args.fixtures, 'whisper-ref-mel-input-a.f32'), norm[:, 0:551])
    write_f32(os.path.join(args.fixtures, 'whisper-ref-mel-input-b.f32'), norm[:, 551:1102])
    mel3000 = torch.from_numpy(norm[:, :N_FRAMES].copy())

    with torch.no_grad():
        run_model(make_weights(False), mel3000, args.fixtures, '', log)
        if not args.no_f16:
            run_model(make_weights(True), mel3000, args.fixtures, '-f16', log)


def main_v3(args, log):
    """The v3 layout's fixtures (layouts as the tiny ones, with 128 mel rows,
    N_STATE 256 columns, LOGIT_COLS of use_layout, 100 languages):
      whisper-v3-ref-weights.f32 (WEIGHT_PROBES_V3), -mel.f32 [128][356], -mel-max.f32,
      -encoder.f32 [48][256], -logits.f32 [8][2128], -logits-stats.f32,
      -lang.f32 [100], -greedy.txt (sot, <|en|>, <|transcribe|>), and
      -greedy-yue.txt: greedy with sot, <|yue|> (50358), <|translate|> (50359),
      at most 64 tokens: the two ids where a tiny-shaped reading of the
      vocabulary sees translate and transcribe."""
    specs = {n: (s, k) for n, s, k in tensor_specs()}
    probes = []
    for name in WEIGHT_PROBES_V3:
        shape, kind = specs[name]
        v = make_tensor(name, shape, kind).reshape(-1)
        probes.append(v[[i % v.size for i in PROBE_INDEX]])
    write_f32(os.path.join(args.fixtures, f'{PREFIX}-weights.f32'), np.stack(probes))

    filters = read_filters_fixture(
        os.path.join(args.fixtures, f'mel-filters-{N_MELS}-ref.f32'), N_MELS)
    audio = read_wav(os.path.join(args.data, 'audio', 'jfk.wav'))
    lg, norm, mx = log_mel(audio, filters)
    log(f'mel: {N_MELS} x {lg.shape[1]} frames, max {mx:.6f}')
    write_f32(os.path.join(args.fixtures, f'{PREFIX}-mel.f32'), norm[:, MEL_FRAMES])
    write_f32(os.path.join(args.fixtures, f'{PREFIX}-mel-max.f32'), [mx, lg.shape[1]])
    mel3000 = torch.from_numpy(norm[:, :N_FRAMES].copy())

    with torch.no_grad():
        w = make_weights(False)
        xa = run_model(w, mel3000, args.fixtures, '', log)
        yue = LANG0 + N_LANGS - 1
        steps, no_speech = greedy(xa, w, sample_len=64, start=[SOT, yue, TRANSLATE])
        with open(os.path.join(args.fixtures, f'{PREFIX}-greedy-yue.txt'), 'w') as f:
            f.write(f'no_speech_prob {math.exp(no_speech):.9g}\n')
            f.write(f'no_speech_logprob {no_speech:.9g}\n')
            for t, m, tm, lo, lse in steps:
                f.write(f'{t} {m:.6g} {tm:.6g} {lo:.7g} {lse:.7g}\n')
        log(f'greedy-yue: {len(steps)} tokens: {[s[0] for s in steps]}')
        log(f'greedy-yue: min margin {min(s[1] for s in steps):.4g}')


if __name__ == '__main__':
    sys.exit(main())
