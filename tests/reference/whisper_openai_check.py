#!/usr/bin/python3
"""Optional cross-check of whisper_reference.py against openai-whisper itself.

Runs openai-whisper's own Whisper model (model.py) and decoding (decoding.py,
tokenizer.py) in float32 on the reference's weights and mel, and compares with
the committed fixtures tests/fixtures/whisper-ref-*. Not part of the test suite:
it needs openai-whisper's Python sources (a checkout of github.com/openai/whisper
or the installed package) on the path:

    /usr/bin/python3 tests/reference/whisper_openai_check.py --whisper /path/to/checkout [--f16]

openai-whisper imports tiktoken, numba and tqdm; where they are not installed,
small stand-ins are put in their place: numba.jit does nothing (only the
word-timing code uses it), tqdm is a no-op, and tiktoken.Encoding is a plain
byte-level BPE over the ranks file (merge the adjacent pair of lowest rank until
none is left). That BPE skips tiktoken's regex pre-split, which is the same for
the short punctuation strings the tokenizer encodes to build non_speech_tokens
(each is a single pre-split piece).
"""
import argparse
import os
import sys
import types

import numpy as np
import torch


def stub_modules():
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        class Encoding:
            def __init__(self, name, explicit_n_vocab, pat_str, mergeable_ranks,
                         special_tokens):
                self.name = name
                self.ranks = mergeable_ranks
                self.special = special_tokens
                self.special_tokens_set = set(special_tokens)
                self.eot_token = special_tokens['<|endoftext|>']
                self.n_vocab = explicit_n_vocab
                self.inverse = {v: k for k, v in mergeable_ranks.items()}

            def encode_single_token(self, s):
                return self.special[s] if s in self.special else self.ranks[s.encode()]

            def encode(self, text, **kw):
                parts = [bytes([b]) for b in text.encode()]
                while True:
                    best = None
                    for i in range(len(parts) - 1):
                        r = self.ranks.get(parts[i] + parts[i + 1])
                        if r is not None and (best is None or r < best[0]):
                            best = (r, i)
                    if best is None:
                        break
                    i = best[1]
                    parts[i:i + 2] = [parts[i] + parts[i + 1]]
                return [self.ranks[p] for p in parts]

            def decode_bytes(self, ids):
                return b''.join(self.inverse.get(i, b'') for i in ids)

            def decode(self, ids, **kw):
                return self.decode_bytes(ids).decode('utf-8', 'replace')

        sys.modules['tiktoken'] = types.SimpleNamespace(Encoding=Encoding)
    try:
        import numba  # noqa: F401
    except ImportError:
        def jit(*a, **k):
            return a[0] if a and callable(a[0]) else (lambda f: f)
        sys.modules['numba'] = types.SimpleNamespace(jit=jit, njit=jit)
    try:
        import tqdm  # noqa: F401
    except ImportError:
        class Bar:
            def __init__(self, *a, **k):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *a):
                pass

            def update(self, *a):
                pass
        sys.modules['tqdm'] = types.SimpleNamespace(tqdm=Bar)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument('--whisper', help='folder holding the whisper package')
    ap.add_argument('--data', default=os.path.join(root, '..', 'shared', 'data'))
    ap.add_argument('--f16', action='store_true', help='the F16-rounded weights')
    args = ap.parse_args()
    if args.whisper:
        sys.path.insert(0, args.whisper)
    sys.path.insert(0, here)
    stub_modules()
    import whisper_reference as R
    from whisper.decoding import DecodingOptions, decode, detect_language
    from whisper.model import ModelDimensions, Whisper
    from whisper.tokenizer import get_tokenizer
    torch.set_default_dtype(torch.float32)  # the reference module sets float64
    torch.set_num_threads(2)
    fx = os.path.join(root, 'tests', 'fixtures')
    sfx = '-f16' if args.f16 else ''

    tok = get_tokenizer(True, num_languages=R.N_LANGS, language='en', task='transcribe')
    ours = sorted(set(list(tok.non_speech_tokens) +
                      [tok.transcribe, tok.translate, tok.sot, tok.sot_prev, tok.sot_lm,
                       tok.no_speech]))
    print('suppress list equal:', ours == sorted(R.SUPPRESS), '| encode(" "):', tok.encode(' '),
          '| eot', tok.eot, '| no_speech', tok.no_speech)

    dims = ModelDimensions(n_mels=80, n_audio_ctx=1500, n_audio_state=384, n_audio_head=6,
                           n_audio_layer=4, n_vocab=51865, n_text_ctx=448, n_text_state=384,
                           n_text_head=6, n_text_layer=4)
    model = Whisper(dims).eval()
    sd = {}
    for name, shape, kind in R.tensor_specs():
        v = R.make_tensor(name, shape, kind)
        if args.f16 and R.f16_stored(name, shape):
            v = v.astype(np.float16).astype(np.float32)
        sd[name] = torch.from_numpy(v.copy())
    print(model.load_state_dict(sd, strict=False))

    filters = R.read_ggml_filters(os.path.join(args.data, 'whisper', 'for-tests-ggml-tiny.bin'))
    npz = os.path.join(os.path.dirname(sys.modules['whisper.model'].__file__), 'assets',
                       'mel_filters.npz')
    if os.path.exists(npz):
        print('filterbank max |diff| vs mel_filters.npz:',
              np.abs(np.load(npz)['mel_80'] - filters).max())
    _, norm, _ = R.log_mel(R.read_wav(os.path.join(args.data, 'audio', 'jfk.wav')), filters)
    mel = torch.from_numpy(norm[:, :R.N_FRAMES].astype(np.float32))

    def fixture(name, shape):
        return np.fromfile(os.path.join(fx, name), '<f4').reshape(shape)

    with torch.no_grad():
        xa = model.encoder(mel[None])[0]
        ref = fixture(f'whisper-ref-encoder{sfx}.f32', (len(R.ENC_ROWS), R.N_STATE))
        print('encoder max |diff|:', np.abs(xa[R.ENC_ROWS].numpy() - ref).max())
        lo = model.decoder(torch.tensor([R.PROMPT]), xa[None])[0]
        ref = fixture(f'whisper-ref-logits{sfx}.f32', (len(R.PROMPT), len(R.LOGIT_COLS)))
        print('logits max |diff|:', np.abs(lo[:, R.LOGIT_COLS].numpy() - ref).max())
        _, probs = detect_language(model, mel)
        ref = fixture(f'whisper-ref-lang{sfx}.f32', (R.N_LANGS,))
        print('language probs max |diff|:',
              max(abs(p - ref[i]) for i, p in enumerate(probs.values())))
        res = decode(model, mel, DecodingOptions(language='en', task='transcribe', fp16=False))
    lines = [ln.split() for ln in open(os.path.join(fx, f'whisper-ref-greedy{sfx}.txt'))]
    kv = {ln[0]: float(ln[1]) for ln in lines if not ln[0][0].isdigit()}
    ref_tokens = [int(ln[0]) for ln in lines if ln[0][0].isdigit()]
    print('no-speech prob: openai', res.no_speech_prob, 'reference', kv['no_speech_prob'])
    n = 0
    while n < min(len(ref_tokens), len(res.tokens)) and ref_tokens[n] == res.tokens[n]:
        n += 1
    print(f'greedy: openai {len(res.tokens)} tokens, reference {len(ref_tokens)}, '
          f'equal for the first {n}')
    return 0 if n == len(ref_tokens) == len(res.tokens) else 1


if __name__ == '__main__':
    sys.exit(main())
