#!/usr/bin/python3
"""Independent NumPy reference for tests/test-sampler.c.

Each sampler step is written here straight from its published definition, in
the plainest way (full sorts, naive loops, float64), sharing nothing with the
C implementation (which uses partial selection, a Z-function for DRY, logit
thresholds instead of probability ratios). For a fixed row of logits and a
fixed token history it writes the surviving tokens, their logits and their
renormalised probabilities, most probable first, as a C header:

    /usr/bin/python3 tests/reference/gen-sampler-ref.py > tests/reference/sampler-ref-data.h

Definitions used (the same ones sampler.h states):
  penalties   llama.cpp's convention: a token seen c > 0 times in the window
              has its logit divided by the repeat penalty if positive,
              multiplied if <= 0, then lowered by c*freq + presence.
  DRY         p-e-w's definition: for each earlier occurrence of the newest
              token, extend the match backwards while the tokens agree and
              are not breakers; the token that followed that occurrence gets
              multiplier * base^(len - allowed) for its longest match >= allowed.
  dynatemp    T = Tmin + (Tmax - Tmin) * (H / ln n)^exponent.
  typical     rank by |-ln p - H|, keep the smallest prefix with mass >= p.
  top-p       smallest most-probable prefix with mass >= p.
  min-p       p >= min_p * max p.
  top-n-sigma logit >= max - n * std (population std).
  XTC         drop all tokens with p >= threshold but the least probable one,
              when there are at least two.
  mirostat    v1: Zipf exponent from the top 100, k from mu; v2: keep
              -log2 p <= mu.
"""
import numpy as np

LOGITS = np.array([2.0, -1.0, 0.5, 3.1, 1.2, -0.3, 2.7, 0.0,
                   -2.2, 1.9, 0.8, -0.7, 1.5, 2.2, -1.5, 0.3], dtype=np.float64)
N = len(LOGITS)


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


class Cands:
    """The live candidates: token ids and their logits."""

    def __init__(self, ids, logits):
        self.ids = np.array(ids, dtype=np.int64)
        self.logits = np.array(logits, dtype=np.float64)

    def p(self):
        return softmax(self.logits)

    def keep(self, mask):
        return Cands(self.ids[mask], self.logits[mask])

    def ordered(self):
        # most probable first, lowest id on a tie
        order = sorted(range(len(self.ids)), key=lambda i: (-self.logits[i], self.ids[i]))
        return Cands(self.ids[order], self.logits[order])


def all_tokens(logits):
    return Cands(np.arange(len(logits)), logits)


def penalties(logits, history, last_n, rep, freq, pres):
    out = logits.copy()
    window = history[-last_n:] if last_n > 0 else []
    for t in set(window):
        c = window.count(t)
        v = out[t]
        v = v * rep if v <= 0 else v / rep
        out[t] = v - (c * freq + pres)
    return out


def dry(logits, history, mult, base, allowed, breakers):
    out = logits.copy()
    h = list(history)
    last = h[-1]
    if last in breakers:
        return out
    best = {}
    for i in range(len(h) - 1):
        if h[i] != last:
            continue
        nxt = h[i + 1]
        if nxt in breakers:
            continue
        length = 1
        while True:
            j = i - length
            if j < 0:
                break
            prev = h[-(length + 1)]
            if h[j] != prev or prev in breakers:
                break
            length += 1
        best[nxt] = max(best.get(nxt, 0), length)
    for t, length in best.items():
        if length >= allowed:
            out[t] -= mult * base ** (length - allowed)
    return out


def top_k(c, k):
    o = c.ordered()
    return Cands(o.ids[:k], o.logits[:k])


def mass_prefix(ids, logits, probs, order, mass):
    cum = 0.0
    for n, i in enumerate(order):
        cum += probs[i]
        if cum >= mass:
            sel = order[:n + 1]
            return Cands(ids[sel], logits[sel])
    return Cands(ids[order], logits[order])


def top_p(c, p):
    probs = c.p()
    order = sorted(range(len(c.ids)), key=lambda i: (-probs[i], c.ids[i]))
    return mass_prefix(c.ids, c.logits, probs, order, p)


def typical(c, mass):
    probs = c.p()
    ent = -np.sum(probs * np.log(probs))
    dist = np.abs(-np.log(probs) - ent)
    order = sorted(range(len(c.ids)), key=lambda i: (dist[i], c.ids[i]))
    return mass_prefix(c.ids, c.logits, probs, order, mass)


def min_p(c, m):
    probs = c.p()
    return c.keep(probs >= m * probs.max())


def top_n_sigma(c, n):
    return c.keep(c.logits >= c.logits.max() - n * c.logits.std())


def xtc(c, thr):
    probs = c.p()
    above = [i for i in range(len(c.ids)) if probs[i] >= thr]
    if len(above) < 2:
        return c
    keep_one = min(above, key=lambda i: (probs[i], -c.ids[i]))
    mask = np.array([probs[i] < thr or i == keep_one for i in range(len(c.ids))])
    return c.keep(mask)


def dynatemp_t(logits, t, rng, exp):
    probs = softmax(logits)
    ent = -np.sum(probs * np.log(probs))
    norm = ent / np.log(len(logits))
    lo, hi = max(0.0, t - rng), t + rng
    return lo + (hi - lo) * norm ** exp, ent


def mirostat_v1_k(c, mu, n_vocab, m=100):
    o = c.ordered()
    probs = o.p()
    pairs = min(m - 1, len(probs) - 1)
    ti = np.log(np.arange(2, pairs + 2) / np.arange(1, pairs + 1))
    bi = np.log(probs[:pairs] / probs[1:pairs + 1])
    s_hat = np.sum(ti * bi) / np.sum(ti * ti)
    eps = s_hat - 1
    k = ((eps * 2 ** mu) / (1 - n_vocab ** (-eps))) ** (1 / s_hat)
    return max(1, min(len(probs), int(k))), s_hat, k


def mirostat_v2(c, mu):
    probs = c.p()
    keep = -np.log2(probs) <= mu
    if not keep.any():
        return top_k(c, 1)
    return c.keep(keep)


# ---- output ----

out = []


def emit(name, c, extra=None):
    c = c.ordered()
    probs = c.p()
    out.append('static const int32_t ref_%s_tokens[] = {%s};' %
               (name, ','.join(str(int(t)) for t in c.ids)))
    out.append('static const float ref_%s_logits[] = {%s};' %
               (name, ','.join('%.9ef' % v for v in c.logits)))
    out.append('static const float ref_%s_p[] = {%s};' %
               (name, ','.join('%.9ef' % v for v in probs)))
    out.append('#define REF_%s_N %d' % (name.upper(), len(c.ids)))
    for k, v in (extra or {}).items():
        out.append('#define REF_%s_%s %.12e' % (name.upper(), k.upper(), v))


out.append('static const float ref_logits[%d] = {%s};' %
           (N, ','.join('%.9ef' % v for v in LOGITS)))

emit('plain', all_tokens(LOGITS))
emit('temp05', Cands(np.arange(N), LOGITS / 0.5))
emit('top_k5', top_k(all_tokens(LOGITS), 5))
emit('top_p06', top_p(all_tokens(LOGITS), 0.6))
emit('min_p02', min_p(all_tokens(LOGITS), 0.2))
emit('typical05', typical(all_tokens(LOGITS), 0.5))
emit('top_n_sigma1', top_n_sigma(all_tokens(LOGITS), 1.0))
emit('xtc01', xtc(all_tokens(LOGITS), 0.1))

t, ent = dynatemp_t(LOGITS, 1.0, 0.5, 1.0)
emit('dynatemp', Cands(np.arange(N), LOGITS / t), {'t': t, 'entropy': ent})
t2, _ = dynatemp_t(LOGITS, 0.8, 0.6, 2.0)
emit('dynatemp_exp2', Cands(np.arange(N), LOGITS / t2), {'t': t2})

PEN_HISTORY = [3, 6, 3, 1, 8, 3, 1, 5]  # a window of 7 leaves out the first 3
pen = penalties(LOGITS, PEN_HISTORY, 7, 1.3, 0.2, 0.5)
emit('penalties', all_tokens(pen))

# DRY: "4 5 6 7 ... 4 5 6" makes 7 the repeat-extending token (match 3); the
# earlier "5 9" after a lone 5 is a match of 1 only. 10 is a breaker.
DRY_HISTORY = [4, 5, 6, 7, 2, 5, 9, 10, 11, 4, 5, 6]
DRY_BREAKERS = {10}
d = dry(LOGITS, DRY_HISTORY, 0.8, 1.75, 2, DRY_BREAKERS)
emit('dry', all_tokens(d))
# Same, with 5 as a breaker: the match "5 6" cannot pass it, so 7 gets a
# match of only 1 (< allowed 2) and nothing is penalised.
d2 = dry(LOGITS, DRY_HISTORY, 0.8, 1.75, 2, {5, 10})
emit('dry_breaker', all_tokens(d2))
# A long run of one token (allowed length 2): 12 12 12 12 12.
DRY_RUN = [12, 12, 12, 12, 12]
emit('dry_run', all_tokens(dry(LOGITS, DRY_RUN, 1.0, 2.0, 2, set())))

# The default llama.cpp-like chain: temp 0.8, top_k 10, top_p 0.95, min_p 0.05.
c = all_tokens(LOGITS / 0.8)
c = top_k(c, 10)
c = top_p(c, 0.95)
c = min_p(c, 0.05)
emit('chain', c)

# Mirostat v1 at mu = 2 * tau = 5 over a vocabulary of 16: the k it keeps.
k1, s_hat, k_raw = mirostat_v1_k(all_tokens(LOGITS), 5.0, N)
emit('mirostat1', top_k(all_tokens(LOGITS), k1), {'s_hat': s_hat, 'k': k_raw})
# Mirostat v2 at mu = 2 * tau = 3 (tau 1.5).
emit('mirostat2', mirostat_v2(all_tokens(LOGITS), 3.0))

print('/* Generated by tests/reference/gen-sampler-ref.py: do not edit. */')
print('/* clang-format off */')
print('\n'.join(out))
print('/* clang-format on */')
