#!/usr/bin/python3
"""Reference for the Whisper search and segmenting (tests/test-whisper-decode.c).

Rerun (a few minutes on 2 cores; rewrites tests/fixtures/whisper-ref-{beam,transcribe,
rules,fallback}.txt):

    /usr/bin/python3 tests/reference/whisper_decode_reference.py [--data ../shared/data]

It imports whisper_reference.py (the same random-weight whisper-tiny, network and
log-mel, in float64; see its docstring) and adds, written from openai-whisper's
decoding.py and transcribe.py (release 20250625) for facts only:

  * BeamSearchDecoder (beam_size 5, patience 1: max_candidates 5) with
    MaximumLikelihoodRanker(length_penalty None: sum_logprob / length) on the
    encoder input of the other fixtures (jfk.wav, frames 0..2999 of the padded mel),
    language en, task transcribe, timestamps, the same logit filters as greedy.
    Each step: every beam's top beam_size + 1 tokens by log-probability make
    candidates (a sequence met twice counts once), sorted by cumulative
    log-probability; those ending in <|endoftext|> are set aside as finished (up to 5),
    the first 5 others are the next beams. It stops when 5 have finished; too few:
    the live beams are added. The ranker picks the best sum / length (the length
    without the eot).
  * transcribe(): the whole padded log-mel of the recording, normalized with its
    maximum; windows mel[:, seek : seek + min(3000, content_frames - seek)] padded with
    zeros to 3000 frames; temperature 0 only (no fallback: the thresholds then only
    decide the no-speech skip: no_speech_prob > 0.6 and not avg_logprob > -1);
    condition_on_previous_text: the prompt is <|startofprev|> + the last 223 tokens
    of the segments kept so far; the segments from consecutive timestamp pairs (and
    a single timestamp at the end), seek moved to the last timestamp (or by the
    window when it ends with a single timestamp or has no pair); a segment whose
    start equals its end or whose text is blank is emptied (its tokens are not part
    of the next prompt). Segment times are time_offset + position * 0.02 s.
    Three runs: jfk.wav (11 s: one window, sample_len 224); jfk.wav three times over
    (33 s) with openai's sample_len option at 32, and jfk.wav with sample_len 100,
    where the windows end before the random model's near ties: several windows,
    each after the first with the previous text as its prompt (jfk100: timestamp
    pairs and unfinished tails, seek from the last timestamp).
  * The compression ratio as openai computes it: tokenizer.decode (tokens below
    <|0.00|>, special tokens as their "<|...|>" text, bytes decoded as UTF-8 with
    errors replaced), .strip(), UTF-8 bytes, len / len(zlib.compress(bytes)). The
    token bytes are the vocabulary of for-tests-ggml-tiny.bin.
  * decode_with_fallback's decision and the no-speech skip for a table of (compression
    ratio, average log-probability, no-speech probability) values, with the default
    thresholds 2.4, -1.0, 0.6.
  * The logit filters (SuppressBlank, SuppressTokens, ApplyTimestampRules) on
    hand-made sampled prefixes and synthetic logits, listing the ids left allowed.

Fixture layouts (text; `inf` where a gap has no second side):

whisper-ref-beam.txt
  `sum_logprob <s>`, `avg_logprob <sum / (n + 1)>`, `score <sum / n>`,
  `rank_gap <g>` (chosen score minus the best other finished score),
  `min_step_gap <g> <step>` (the smallest over steps of the gaps that decide which
  candidates survive: the last kept beam against the first dropped one, and every
  finished candidate against the last kept beam), `no_speech_prob <p>`,
  `tokens <n> <id> ...` (the chosen sequence without the eot),
  then `step <i> <gap>` per step.
whisper-ref-transcribe.txt, per run (`audio jfk`, `audio jfk3`, `audio jfk100`):
  `sample_len <n>`, `content_frames <n>`, then per window `window <seek> <segment_size> <n_tokens>
  <avg_logprob> <no_speech_prob> <compression_ratio> <min_margin> <n_prompt>`
  (min_margin: the smallest greedy margin or |ts_margin| of that window, near tie
  when < 2e-2), `wtokens <id> ...` (the window's sampled tokens), `wmargins <m> ...` (that
  margin at each step, the eot step included), then per segment
  `segment <start_ms> <end_ms> <emptied 0|1> <n> <id> ...` (times in integer ms:
  seek * 10 + position * 20, exact; the tokens of the window it was cut from, also
  for an emptied one, whose tokens openai then drops), and `end`.
whisper-ref-rules.txt
  logits: x[i] = ((i * 2654435761 mod 2^32) >> 7 mod 1024) / 64 - 8 (exact in float32),
  plus `ts_bias` on every timestamp id (>= 50364); per case:
  `case <k> ts_bias <b> no_timestamps <0|1> prefix <n> <id> ...` (the sampled tokens
  after sot, en, transcribe), `ts_margin <log P(ts) - max log P(text)>`,
  `allowed <n_ranges> <a>-<b> ...` (inclusive ranges of ids left finite), `argmax <id>`.
whisper-ref-fallback.txt
  `fallback <cr> <avg_logprob> <no_speech_prob> <needs_fallback 0|1> <skip 0|1>`
  (thresholds 2.4, -1.0, 0.6), and `window1 <cr> <avg_logprob> <no_speech_prob>
  <needs_fallback> <skip>` for jfk.wav's first transcription window.
"""
import argparse
import math
import os
import struct
import sys
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whisper_reference as R  # noqa: E402

BEAM = 5
SAMPLE_LEN = R.N_TEXT_CTX // 2  # 224
LANG_CODES = ('en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro '
              'da hu ta no th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu '
              'is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo '
              'uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su').split()
assert len(LANG_CODES) == R.N_LANGS

# ---------------------------------------------------------------- text


def read_vocab(path):
    d = open(path, 'rb').read()
    off = 56 + R.N_MELS * (R.N_FFT // 2 + 1) * 4
    n = struct.unpack_from('<i', d, off)[0]
    off += 4
    words = []
    for _ in range(n):
        ln = struct.unpack_from('<I', d, off)[0]
        words.append(d[off + 4:off + 4 + ln])
        off += 4 + ln
    return words


def special_text(t):
    names = {R.EOT: 'endoftext', R.SOT: 'startoftranscript', R.TRANSLATE: 'translate',
             R.TRANSCRIBE: 'transcribe', R.SOLM: 'startoflm', R.PREV: 'startofprev',
             R.NO_SPEECH: 'nospeech', R.NO_TIMESTAMPS: 'notimestamps'}
    if t in names:
        return f'<|{names[t]}|>'.encode()
    if R.LANG0 <= t < R.LANG0 + R.N_LANGS:
        return f'<|{LANG_CODES[t - R.LANG0]}|>'.encode()
    raise ValueError(t)


def decode_text(vocab, tokens):
    """openai Tokenizer.decode: timestamps dropped, specials as text, errors replaced"""
    b = b''.join(vocab[t] if t < R.EOT else special_text(t) for t in tokens if t < R.TS_BEGIN)
    return b.decode('utf-8', errors='replace')


def compression_ratio(text):
    b = text.encode('utf-8')
    return len(b) / len(zlib.compress(b))


# ---------------------------------------------------------------- decoding


def initial_tokens(prompt):
    init = []
    if prompt:
        init = [R.PREV] + prompt[-(R.N_TEXT_CTX // 2 - 1):]
    return init + [R.SOT, R.LANG0, R.TRANSCRIBE]


def greedy(xa, w, prompt, sample_len=SAMPLE_LEN):
    """one window at temperature 0: tokens (no eot), sum_logprob, no_speech_prob,
    per-step margins (min of the greedy margin and |ts_margin|)"""
    init = initial_tokens(prompt)
    sot_index = init.index(R.SOT)
    tokens = list(init)
    cache = {}
    out, sum_lp, margins, no_speech = [], 0.0, [], None
    for i in range(sample_len):
        if i == 0:
            all_logits = R.decoder(tokens, xa, w, cache=cache)
            no_speech = float(torch.softmax(all_logits[sot_index], -1)[R.NO_SPEECH])
            logits = all_logits[-1]
        else:
            logits = R.decoder(tokens[-1:], xa, w, last_only=True, cache=cache,
                               offset=len(tokens) - 1)
        f, ts_margin = R.apply_filters(logits, tokens, len(init))
        top2 = torch.topk(f, 2)
        nxt = int(top2.indices[0])
        margins.append(min(float(top2.values[0] - top2.values[1]), abs(ts_margin)))
        sum_lp += float(torch.log_softmax(f, -1)[nxt])
        tokens.append(nxt)
        if nxt == R.EOT:
            break
        out.append(nxt)
        if len(tokens) > R.N_TEXT_CTX:
            break
    return out, sum_lp, no_speech, margins


def beam_search(xa, w):
    init = initial_tokens(None)
    sb = len(init)
    cache0 = {}
    all_logits = R.decoder(init, xa, w, cache=cache0)
    no_speech = float(torch.softmax(all_logits[init.index(R.SOT)], -1)[R.NO_SPEECH])
    beams = [list(init) for _ in range(BEAM)]
    sums = [0.0] * BEAM
    caches = [cache0] * BEAM
    logits = [all_logits[-1]] * BEAM
    finished = {}
    steps = []
    for step in range(SAMPLE_LEN):
        scores, sources = {}, {}
        for j in range(BEAM):
            f, _ = R.apply_filters(logits[j], beams[j], sb)
            lp = torch.log_softmax(f, -1)
            top = torch.topk(lp, BEAM + 1)
            for v, t in zip(top.values.tolist(), top.indices.tolist()):
                seq = tuple(beams[j] + [t])
                scores[seq] = sums[j] + v
                sources[seq] = j
        order = sorted(scores, key=scores.get, reverse=True)
        kept, fin_new, cut_next = [], {}, None
        for seq in order:
            if len(kept) == BEAM:
                if seq[-1] != R.EOT:
                    cut_next = scores[seq]
                    break
                continue
            if seq[-1] == R.EOT:
                fin_new[seq] = scores[seq]
            else:
                kept.append(seq)
        # the gaps that decide who survives: the last kept beam against the first
        # dropped one, and each finished candidate against the last kept beam
        last = scores[kept[-1]]
        gaps = [last - cut_next] if cut_next is not None else []
        gaps += [abs(s - last) for s in fin_new.values()]
        # and the eot candidates just below the cut, which were not finished
        gaps += [last - scores[s] for s in order if s[-1] == R.EOT and s not in fin_new
                 and scores[s] <= last]
        steps.append(min(gaps) if gaps else math.inf)
        for seq in sorted(fin_new, key=fin_new.get, reverse=True):
            if len(finished) >= BEAM:
                break
            finished[seq] = fin_new[seq]
        new_caches = [dict(caches[sources[s]]) for s in kept]
        beams = [list(s) for s in kept]
        sums = [scores[s] for s in kept]
        if len(finished) >= BEAM or len(beams[0]) > R.N_TEXT_CTX:
            break
        caches = new_caches
        logits = [R.decoder(b[-1:], xa, w, last_only=True, cache=c, offset=len(b) - 1)
                  for b, c in zip(beams, caches)]
    if len(finished) < BEAM:
        for j in list(np.argsort(sums))[::-1]:
            finished[tuple(beams[j] + [R.EOT])] = sums[j]
            if len(finished) >= BEAM:
                break
    cands = [(list(s[sb:s.index(R.EOT, sb)]), lp) for s, lp in finished.items()]
    ranked = [lp / len(t) for t, lp in cands]
    best = int(np.argmax(ranked))
    others = [r for i, r in enumerate(ranked) if i != best]
    rank_gap = ranked[best] - max(others) if others else math.inf
    toks, lp = cands[best]
    return dict(tokens=toks, sum_logprob=lp, avg=lp / (len(toks) + 1), score=ranked[best],
                rank_gap=rank_gap, steps=steps, no_speech=no_speech,
                candidates=[(t, l, r) for (t, l), r in zip(cands, ranked)])


# ---------------------------------------------------------------- transcribe


def needs_fallback(cr, avg, nsp, crt=2.4, lpt=-1.0, nst=0.6):
    fb = False
    if crt is not None and cr > crt:
        fb = True
    if lpt is not None and avg < lpt:
        fb = True
    if nst is not None and nsp > nst and lpt is not None and avg < lpt:
        fb = False
    return fb


def should_skip(avg, nsp, lpt=-1.0, nst=0.6):
    skip = nsp > nst
    if lpt is not None and avg > lpt:
        skip = False
    return skip


def transcribe(audio, w, filters, vocab, log, sample_len):
    _, norm, _ = R.log_mel(audio, filters)
    content_frames = norm.shape[1] - R.N_FRAMES
    seek, all_tokens, segments, windows = 0, [], [], []
    prompt_reset_since = 0
    while seek < content_frames:
        size = min(R.N_FRAMES, content_frames - seek)
        mel = np.zeros((R.N_MELS, R.N_FRAMES))
        mel[:, :size] = norm[:, seek:seek + size]
        xa = R.encoder(torch.from_numpy(mel), w)
        prompt = all_tokens[prompt_reset_since:]
        toks, sum_lp, nsp, margins = greedy(xa, w, prompt, sample_len)
        mm = min(margins)
        text = decode_text(vocab, toks).strip()
        cr = compression_ratio(text)
        avg = sum_lp / (len(toks) + 1)
        n_prompt = len(initial_tokens(prompt)) - 3
        windows.append(dict(seek=seek, size=size, tokens=toks, avg=avg, nsp=nsp, cr=cr,
                            margin=mm, margins=margins, n_prompt=n_prompt, segments=[]))
        tie = next((i for i, m in enumerate(margins) if m < 2e-2), None)
        log(f'  window at {seek}: {len(toks)} tokens, avg {avg:.4f}, cr {cr:.4f}, '
            f'margin {mm:.3g} (first near tie at step {tie}), prompt {n_prompt}')
        if should_skip(avg, nsp):
            seek += size
            continue
        ts = [t >= R.TS_BEGIN for t in toks]
        single_end = ts[-2:] == [False, True]
        consecutive = [i + 1 for i in range(len(ts) - 1) if ts[i] and ts[i + 1]]
        cur = []
        t_off = seek * 10  # ms: seek * 160 / 16000 s

        def seg(a, b, tk):
            text = decode_text(vocab, [t for t in tk if t < R.EOT])
            return dict(start=a, end=b, tokens=list(tk), text=text)

        if consecutive:
            slices = consecutive + ([len(toks)] if single_end else [])
            last = 0
            for c in slices:
                s = toks[last:c]
                cur.append(seg(t_off + (s[0] - R.TS_BEGIN) * 20,
                               t_off + (s[-1] - R.TS_BEGIN) * 20, s))
                last = c
            if single_end:
                seek += size
            else:
                seek += (toks[last - 1] - R.TS_BEGIN) * 2
        else:
            dur = size * 10
            stamps = [t for t in toks if t >= R.TS_BEGIN]
            if stamps and stamps[-1] != R.TS_BEGIN:
                dur = (stamps[-1] - R.TS_BEGIN) * 20
            cur.append(seg(t_off, t_off + dur, toks))
            seek += size
        for s in cur:
            # openai empties it: no text, and no tokens for the next prompt
            s['emptied'] = s['start'] == s['end'] or s['text'].strip() == ''
        segments += cur
        windows[-1]['segments'] = cur
        all_tokens += [t for s in cur if not s['emptied'] for t in s['tokens']]
        # condition_on_previous_text at temperature 0: the prompt is never reset
    return content_frames, windows, segments


# ---------------------------------------------------------------- rules


def rule_logits(ts_bias):
    i = np.arange(R.N_VOCAB, dtype=np.uint64)
    h = ((i * np.uint64(2654435761)) & np.uint64(0xffffffff)) >> np.uint64(7)
    x = (h % np.uint64(1024)).astype(np.float64) / 64.0 - 8.0
    x[R.TS_BEGIN:] += ts_bias
    return torch.from_numpy(x)


RULE_CASES = [
    # (sampled prefix, timestamp bias, no_timestamps)
    ([], 0.0, False),
    ([], -6.0, False),
    ([50364 + 10], 0.0, False),
    ([50364 + 10, 400], 0.0, False),
    ([50364 + 10, 400], -9.0, False),
    ([50364 + 10, 400, 50364 + 40], 0.0, False),
    ([50364 + 10, 400, 50364 + 40], -9.0, False),
    ([50364 + 10, 400, 50364 + 40, 50364 + 40], 0.0, False),
    ([50364 + 10, 400, 50364 + 40, 50364 + 40, 1012], 0.0, False),
    ([50364 + 10, 400, 50364 + 40, 50364 + 40, 1012], -9.0, False),
    ([50364 + 10, 400, 50364 + 40, 50364 + 55, 1012, 11], 0.0, False),
    ([50364 + 10, 400, 50364 + 40, 50364 + 55, 1012, 11], -9.0, False),
    ([50364, 220, 50364 + 1500], 0.0, False),
    ([50364, 1029, 50364 + 1499, 50364 + 1499, 1029], 0.0, False),
    ([50364 + 3, 50313, 50364 + 7], 0.0, False),
    ([], 0.0, True),
    ([400, 50364 + 20, 1012], 0.0, True),
]


def rules(out):
    for k, (prefix, bias, no_ts) in enumerate(RULE_CASES):
        x = rule_logits(bias)
        tokens = [R.SOT, R.LANG0, R.TRANSCRIBE] + prefix
        if no_ts:
            # without timestamps (sot sequence + <|notimestamps|>): SuppressBlank and
            # SuppressTokens only
            f = x.clone()
            if not prefix:
                f[[R.BLANK, R.EOT]] = -math.inf
            f[R.SUPPRESS] = -math.inf
            ts_margin = math.nan
        else:
            f, ts_margin = R.apply_filters(x, tokens, 3)
        fin = torch.isfinite(f).numpy()
        ranges, i = [], 0
        while i < R.N_VOCAB:
            if fin[i]:
                j = i
                while j + 1 < R.N_VOCAB and fin[j + 1]:
                    j += 1
                ranges.append(f'{i}-{j}')
                i = j + 1
            else:
                i += 1
        out.write(f'case {k} ts_bias {bias:g} no_timestamps {int(no_ts)} prefix '
                  f'{len(prefix)} {" ".join(map(str, prefix))}\n'.replace('  ', ' '))
        out.write(f'ts_margin {ts_margin:.6g}\n')
        out.write(f'allowed {len(ranges)} {" ".join(ranges)}\n')
        out.write(f'argmax {int(torch.argmax(f))}\n')


# ---------------------------------------------------------------- main


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument('--data', default=os.path.join(root, '..', 'shared', 'data'))
    ap.add_argument('--fixtures', default=os.path.join(root, 'tests', 'fixtures'))
    ap.add_argument('--only', default='rules,fallback,beam,transcribe')
    args = ap.parse_args()
    only = args.only.split(',')
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    log = lambda s: print(s, flush=True)
    fx = lambda n: os.path.join(args.fixtures, n)

    if 'rules' in only:
        with open(fx('whisper-ref-rules.txt'), 'w') as f:
            rules(f)
        log('rules: done')

    ggml = os.path.join(args.data, 'whisper', 'for-tests-ggml-tiny.bin')
    filters = R.read_ggml_filters(ggml)
    vocab = read_vocab(ggml)
    audio = R.read_wav(os.path.join(args.data, 'audio', 'jfk.wav'))
    w = R.make_weights(False)

    with torch.no_grad():
        if 'beam' in only:
            _, norm, _ = R.log_mel(audio, filters)
            xa = R.encoder(torch.from_numpy(norm[:, :R.N_FRAMES].copy()), w)
            b = beam_search(xa, w)
            with open(fx('whisper-ref-beam.txt'), 'w') as f:
                f.write(f'sum_logprob {b["sum_logprob"]:.9g}\n')
                f.write(f'avg_logprob {b["avg"]:.9g}\n')
                f.write(f'score {b["score"]:.9g}\n')
                f.write(f'rank_gap {b["rank_gap"]:.6g}\n')
                mi = int(np.argmin(b['steps']))
                f.write(f'min_step_gap {b["steps"][mi]:.6g} {mi}\n')
                f.write(f'no_speech_prob {b["no_speech"]:.9g}\n')
                f.write(f'tokens {len(b["tokens"])} {" ".join(map(str, b["tokens"]))}\n')
                for i, g in enumerate(b['steps']):
                    f.write(f'step {i} {g:.6g}\n')
            log(f'beam: {len(b["tokens"])} tokens, sum {b["sum_logprob"]:.5f}, rank gap '
                f'{b["rank_gap"]:.4g}, min step gap {b["steps"][mi]:.4g} at {mi}, '
                f'{len(b["steps"])} steps')
            for t, lp, r in b['candidates']:
                log(f'  candidate: {len(t)} tokens, sum {lp:.4f}, score {r:.4f}')

        if 'transcribe' in only or 'fallback' in only:
            # with openai's sample_len option shorter, the windows end before the
            # random model's first near tie, so that every window compares
            runs = [('jfk', audio, SAMPLE_LEN),
                    ('jfk3', np.concatenate([audio, audio, audio]), 32),
                    ('jfk100', audio, 100)]
            if 'transcribe' not in only:
                runs = runs[:1]
            results = []
            with open(fx('whisper-ref-transcribe.txt'), 'w') as f:
                for name, a, sl in runs:
                    log(f'transcribe {name}:')
                    cf, windows, segs = transcribe(a, w, filters, vocab, log, sl)
                    results.append(windows)
                    f.write(f'audio {name}\nsample_len {sl}\ncontent_frames {cf}\n')
                    for wd in windows:
                        f.write(f'window {wd["seek"]} {wd["size"]} {len(wd["tokens"])} '
                                f'{wd["avg"]:.9g} {wd["nsp"]:.9g} {wd["cr"]:.9g} '
                                f'{wd["margin"]:.6g} {wd["n_prompt"]}\n')
                        f.write(f'wtokens {" ".join(map(str, wd["tokens"]))}\n')
                        f.write(f'wmargins {" ".join(f"{m:.3g}" for m in wd["margins"])}\n')
                        for s in wd['segments']:
                            f.write(f'segment {s["start"]} {s["end"]} {int(s["emptied"])} '
                                    f'{len(s["tokens"])} {" ".join(map(str, s["tokens"]))}'
                                    .rstrip() + '\n')
                            log(f'    [{s["start"]} -> {s["end"]}] {len(s["tokens"])} '
                                f'tokens{" (emptied)" if s["emptied"] else ""}')
                    f.write('end\n')
            w1 = results[0][0]
            with open(fx('whisper-ref-fallback.txt'), 'w') as f:
                table = [(2.5, -0.5, 0.1), (2.3, -0.5, 0.1), (2.3, -1.5, 0.1),
                         (2.5, -1.5, 0.1), (2.5, -1.5, 0.7), (2.3, -1.5, 0.7),
                         (2.5, -0.5, 0.7), (2.3, -0.5, 0.7), (2.4, -1.0, 0.6),
                         (2.41, -0.99, 0.61), (1.2, -0.99, 0.61), (1.2, -1.01, 0.61),
                         (1.2, -1.01, 0.59), (3.1, -0.2, 0.95), (0.9, -3.0, 0.99)]
                for cr, avg, nsp in table:
                    f.write(f'fallback {cr:g} {avg:g} {nsp:g} '
                            f'{int(needs_fallback(cr, avg, nsp))} {int(should_skip(avg, nsp))}\n')
                f.write(f'window1 {w1["cr"]:.9g} {w1["avg"]:.9g} {w1["nsp"]:.9g} '
                        f'{int(needs_fallback(w1["cr"], w1["avg"], w1["nsp"]))} '
                        f'{int(should_skip(w1["avg"], w1["nsp"]))}\n')
            log('fallback: done')


if __name__ == '__main__':
    sys.exit(main())
