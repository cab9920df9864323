/* The sampler chain. See sampler.h for the definitions of each step.
 *
 * Working set: the caller's logits are read in place. The steps that change
 * single tokens by id (bias, penalties, DRY) write their results to a sparse
 * overlay (`pval` where `patched` is set, listed in `plist`), so no per-call
 * copy of the vocabulary is made. The survivors then live in `cand`, an
 * array of (score, logit, p, id) that the truncation steps shrink in place. `n_sorted` says how
 * many leading entries are known to be the best ones in descending order; steps that need an order
 * ask for just the prefix they need (select_sorted), so a top-k of 40 over 150k tokens orders 40
 * entries, not 150k.
 */
#include "engine/sample/sampler.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RLX_SAMPLER_BUCKETS = 1024 };

typedef struct cand {
    float score; /* the ordering key: the logit, except inside typical-p */
    float logit;
    float p;
    int32_t id;
} cand;

struct rlx_sampler {
    rlx_sampler_params params; /* the arrays in here point at our copies */
    int32_t n_vocab;

    rlx_sampler_logit_bias *bias;
    uint8_t *is_breaker; /* [n_vocab] */

    /* Accepted tokens: a ring of params.history_size entries. */
    int32_t *hist;
    int32_t hist_len;
    int32_t hist_next; /* where the next token goes */

    const float *logits; /* the caller's row, during one call */
    float *pval;         /* [n_vocab]: changed logits, where patched */
    uint8_t *patched;    /* [n_vocab], all zero between calls */
    int32_t *plist;      /* [n_vocab]: the patched ids */
    int32_t np;
    float greedy_logit;
    int32_t *counts;  /* [n_vocab], all zero between calls */
    int32_t *touched; /* [history_size] */
    int32_t *rev;     /* [history_size]: the DRY window, newest first */
    int32_t *z;       /* [history_size]: Z-function of rev */
    cand *cand;       /* [n_vocab] */
    int32_t n;        /* live entries in cand */
    int32_t n_sorted; /* cand[0..n_sorted) are the best, in order */
    double lse;       /* log-sum-exp of the live logits, set by softmax() */
    double bucket_mass[RLX_SAMPLER_BUCKETS];
    int32_t bucket_count[RLX_SAMPLER_BUCKETS];
    rlx_sampler_candidate *out; /* [n_vocab], rlx_sampler_apply's answer */

    uint64_t rng[4];
    float mu;
    char message[256];
};

/* ---- random numbers: xoshiro256** seeded through splitmix64 ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static void rng_seed(uint64_t st[4], uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        st[i] = splitmix64(&x);
}

static uint64_t rng_next(uint64_t st[4])
{
    uint64_t result = rotl64(st[1] * 5, 7) * 9;
    uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t st[4])
{
    return (double)(rng_next(st) >> 11) * 0x1.0p-53;
}

/* ---- parameters ---- */

rlx_sampler_params rlx_sampler_default_params(void)
{
    rlx_sampler_params p;
    memset(&p, 0, sizeof p);
    p.seed = RLX_SAMPLER_DEFAULT_SEED;
    p.temperature = 0.8f;
    p.dynatemp_range = 0.0f;
    p.dynatemp_exponent = 1.0f;
    p.top_k = 40;
    p.typical_p = 1.0f;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.top_n_sigma = -1.0f;
    p.xtc_probability = 0.0f;
    p.xtc_threshold = 0.1f;
    p.history_size = 4096;
    p.penalty_last_n = 64;
    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.0f;
    p.dry_multiplier = 0.0f;
    p.dry_base = 1.75f;
    p.dry_allowed_length = 2;
    p.dry_penalty_last_n = -1;
    p.mirostat = 0;
    p.mirostat_tau = 5.0f;
    p.mirostat_eta = 0.1f;
    p.min_keep = 1;
    return p;
}

static rlx_status invalid(rlx_error **err, const char *fmt, ...) RLX_PRINTF(2, 3);
static rlx_status invalid(rlx_error **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rlx_error_setv(err, RLX_ERR_INVALID_ARG, fmt, ap);
    va_end(ap);
    return RLX_ERR_INVALID_ARG;
}

/* v must lie in the interval from lo to hi, each end open or closed; an
 * infinite end is written as a one-sided bound. NaN and infinities fail. */
static rlx_status check_float(rlx_error **err, const char *name, float v, double lo, bool lo_open,
                              double hi, bool hi_open)
{
    bool ok = isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (ok)
        return RLX_OK;
    double dv = v;
    if (isinf(lo) && isinf(hi))
        return invalid(err, "%s must be a finite number, got %g", name, dv);
    if (isinf(hi))
        return invalid(err, "%s must be %s %g, got %g", name, lo_open ? ">" : ">=", lo, dv);
    if (isinf(lo))
        return invalid(err, "%s must be %s %g, got %g", name, hi_open ? "<" : "<=", hi, dv);
    return invalid(err, "%s must be in %c%g, %g%c, got %g", name, lo_open ? '(' : '[', lo, hi,
                   hi_open ? ')' : ']', dv);
}

static rlx_status check_window(rlx_error **err, const char *name, int32_t v, int32_t history)
{
    if (v == -1 || (v >= 0 && v <= history))
        return RLX_OK;
    return invalid(err, "%s must be -1 (the whole history) or in [0, history_size = %d], got %d",
                   name, (int)history, (int)v);
}

static rlx_status validate(const rlx_sampler_params *p, int32_t n_vocab, rlx_error **err)
{
    rlx_status st;
    if (n_vocab <= 0)
        return invalid(err, "n_vocab must be > 0, got %d", (int)n_vocab);
    if ((st = check_float(err, "temperature", p->temperature, -INFINITY, false, INFINITY, false)))
        return st;
    if ((st = check_float(err, "dynatemp_range", p->dynatemp_range, 0, false, INFINITY, false)))
        return st;
    if ((st =
             check_float(err, "dynatemp_exponent", p->dynatemp_exponent, 0, true, INFINITY, false)))
        return st;
    if (p->top_k < 0)
        return invalid(err, "top_k must be >= 0 (0 turns it off), got %d", (int)p->top_k);
    if ((st = check_float(err, "typical_p", p->typical_p, 0, true, 1, false)))
        return st;
    if ((st = check_float(err, "top_p", p->top_p, 0, true, 1, false)))
        return st;
    if ((st = check_float(err, "min_p", p->min_p, 0, false, 1, false)))
        return st;
    if ((st = check_float(err, "top_n_sigma", p->top_n_sigma, -INFINITY, false, INFINITY, false)))
        return st;
    if ((st = check_float(err, "xtc_probability", p->xtc_probability, 0, false, 1, false)))
        return st;
    if ((st = check_float(err, "xtc_threshold", p->xtc_threshold, 0, true, 1, false)))
        return st;
    if (p->history_size < 0 || p->history_size > RLX_SAMPLER_MAX_HISTORY)
        return invalid(err, "history_size must be in [0, %d], got %d", RLX_SAMPLER_MAX_HISTORY,
                       (int)p->history_size);
    if ((st = check_window(err, "penalty_last_n", p->penalty_last_n, p->history_size)))
        return st;
    if ((st = check_float(err, "repeat_penalty", p->repeat_penalty, 0, true, INFINITY, false)))
        return st;
    if ((st = check_float(err, "frequency_penalty", p->frequency_penalty, -INFINITY, false,
                          INFINITY, false)))
        return st;
    if ((st = check_float(err, "presence_penalty", p->presence_penalty, -INFINITY, false, INFINITY,
                          false)))
        return st;
    if ((st = check_float(err, "dry_multiplier", p->dry_multiplier, 0, false, INFINITY, false)))
        return st;
    if ((st = check_float(err, "dry_base", p->dry_base, 1, false, INFINITY, false)))
        return st;
    if (p->dry_allowed_length < 1)
        return invalid(err, "dry_allowed_length must be >= 1, got %d", (int)p->dry_allowed_length);
    if ((st = check_window(err, "dry_penalty_last_n", p->dry_penalty_last_n, p->history_size)))
        return st;
    if (p->n_dry_sequence_breakers > 0 && !p->dry_sequence_breakers)
        return invalid(err, "dry_sequence_breakers is NULL but n_dry_sequence_breakers is %zu",
                       p->n_dry_sequence_breakers);
    for (size_t i = 0; i < p->n_dry_sequence_breakers; i++) {
        int32_t t = p->dry_sequence_breakers[i];
        if (t < 0 || t >= n_vocab)
            return invalid(err, "dry_sequence_breakers[%zu] must be a token in [0, %d), got %d", i,
                           (int)n_vocab, (int)t);
    }
    if (p->mirostat < 0 || p->mirostat > 2)
        return invalid(err, "mirostat must be 0 (off), 1 or 2, got %d", (int)p->mirostat);
    if ((st = check_float(err, "mirostat_tau", p->mirostat_tau, 0, true, INFINITY, false)))
        return st;
    if ((st = check_float(err, "mirostat_eta", p->mirostat_eta, 0, true, INFINITY, false)))
        return st;
    if (p->min_keep < 1)
        return invalid(err, "min_keep must be >= 1, got %d", (int)p->min_keep);
    if (p->n_logit_bias > 0 && !p->logit_bias)
        return invalid(err, "logit_bias is NULL but n_logit_bias is %zu", p->n_logit_bias);
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const rlx_sampler_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return invalid(err, "logit_bias[%zu].token must be in [0, %d), got %d", i, (int)n_vocab,
                           (int)b->token);
        if (isnan(b->bias) || b->bias == INFINITY)
            return invalid(err, "logit_bias[%zu].bias must be a finite number or -INFINITY, got %g",
                           i, (double)b->bias);
    }
    return RLX_OK;
}

/* ---- create / free / state ---- */

rlx_status rlx_sampler_create(rlx_sampler_params params, int32_t n_vocab, rlx_sampler **out,
                              rlx_error **err)
{
    if (!out)
        return invalid(err, "rlx_sampler_create: out is NULL");
    *out = NULL;
    rlx_status st = validate(&params, n_vocab, err);
    if (st != RLX_OK)
        return st;

    rlx_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a sampler");
    size_t nv = (size_t)n_vocab;
    size_t nh = params.history_size > 0 ? (size_t)params.history_size : 1;
    size_t nb = params.n_logit_bias > 0 ? params.n_logit_bias : 1;
    s->n_vocab = n_vocab;
    s->bias = malloc(nb * sizeof *s->bias);
    s->is_breaker = calloc(nv, 1);
    s->hist = malloc(nh * sizeof *s->hist);
    s->pval = malloc(nv * sizeof *s->pval);
    s->patched = calloc(nv, 1);
    s->plist = malloc(nv * sizeof *s->plist);
    s->counts = calloc(nv, sizeof *s->counts);
    s->touched = malloc(nh * sizeof *s->touched);
    s->rev = malloc(nh * sizeof *s->rev);
    s->z = malloc(nh * sizeof *s->z);
    s->cand = malloc(nv * sizeof *s->cand);
    s->out = malloc(nv * sizeof *s->out);
    if (!s->bias || !s->is_breaker || !s->hist || !s->pval || !s->patched || !s->plist ||
        !s->counts || !s->touched || !s->rev || !s->z || !s->cand || !s->out) {
        rlx_sampler_free(s);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY,
                             "out of memory creating a sampler for %d tokens", (int)n_vocab);
    }
    if (params.n_logit_bias > 0)
        memcpy(s->bias, params.logit_bias, params.n_logit_bias * sizeof *s->bias);
    for (size_t i = 0; i < params.n_dry_sequence_breakers; i++)
        s->is_breaker[params.dry_sequence_breakers[i]] = 1;
    s->params = params;
    s->params.logit_bias = s->bias;
    /* The breakers live on as the is_breaker table; the list is not kept. */
    s->params.dry_sequence_breakers = NULL;
    rlx_sampler_reset(s);
    *out = s;
    return RLX_OK;
}

void rlx_sampler_free(rlx_sampler *s)
{
    if (!s)
        return;
    free(s->bias);
    free(s->is_breaker);
    free(s->hist);
    free(s->pval);
    free(s->patched);
    free(s->plist);
    free(s->counts);
    free(s->touched);
    free(s->rev);
    free(s->z);
    free(s->cand);
    free(s->out);
    free(s);
}

void rlx_sampler_reset(rlx_sampler *s)
{
    if (!s)
        return;
    s->hist_len = 0;
    s->hist_next = 0;
    rng_seed(s->rng, s->params.seed);
    s->mu = 2.0f * s->params.mirostat_tau;
    s->message[0] = '\0';
}

float rlx_sampler_mirostat_mu(const rlx_sampler *s)
{
    return s ? s->mu : 0.0f;
}

const char *rlx_sampler_last_error(const rlx_sampler *s)
{
    return s && s->message[0] ? s->message : "no error";
}

static rlx_status fail(rlx_sampler *s, const char *fmt, ...) RLX_PRINTF(2, 3);
static rlx_status fail(rlx_sampler *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->message, sizeof s->message, fmt, ap);
    va_end(ap);
    return RLX_ERR_INVALID_ARG;
}

rlx_status rlx_sampler_accept(rlx_sampler *s, int32_t token)
{
    if (!s)
        return RLX_ERR_INVALID_ARG;
    if (token < 0 || token >= s->n_vocab)
        return fail(s, "accepted token %d is outside the vocabulary [0, %d)", (int)token,
                    (int)s->n_vocab);
    int32_t cap = s->params.history_size;
    if (cap == 0)
        return RLX_OK;
    s->hist[s->hist_next] = token;
    s->hist_next = s->hist_next + 1 == cap ? 0 : s->hist_next + 1;
    if (s->hist_len < cap)
        s->hist_len++;
    return RLX_OK;
}

/* The k-th most recent accepted token (k = 0 is the last one). */
static int32_t recent(const rlx_sampler *s, int32_t k)
{
    int32_t i = s->hist_next - 1 - k;
    if (i < 0)
        i += s->params.history_size;
    return s->hist[i];
}

static int32_t window_len(const rlx_sampler *s, int32_t last_n)
{
    if (last_n < 0 || last_n > s->hist_len)
        return s->hist_len;
    return last_n;
}

/* ---- steps on token-indexed logits ---- */

/* NaN counts as -inf; +inf passes and is refused when candidates are built. */
static float clean(float l)
{
    return l == l ? l : -INFINITY;
}

static float logit_of(const rlx_sampler *s, int32_t t)
{
    return s->patched[t] ? s->pval[t] : clean(s->logits[t]);
}

static void set_logit(rlx_sampler *s, int32_t t, float v)
{
    if (!s->patched[t]) {
        s->patched[t] = 1;
        s->plist[s->np++] = t;
    }
    s->pval[t] = v;
}

static void clear_patches(rlx_sampler *s)
{
    for (int32_t i = 0; i < s->np; i++)
        s->patched[s->plist[i]] = 0;
    s->np = 0;
    s->logits = NULL;
}

static void apply_penalties(rlx_sampler *s)
{
    const rlx_sampler_params *p = &s->params;
    if (p->penalty_last_n == 0 ||
        (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f))
        return;
    int32_t w = window_len(s, p->penalty_last_n), nt = 0;
    for (int32_t k = 0; k < w; k++) {
        int32_t t = recent(s, k);
        if (s->counts[t]++ == 0)
            s->touched[nt++] = t;
    }
    for (int32_t i = 0; i < nt; i++) {
        int32_t t = s->touched[i];
        float l = logit_of(s, t);
        if (l <= 0.0f)
            l *= p->repeat_penalty;
        else
            l /= p->repeat_penalty;
        l -= (float)s->counts[t] * p->frequency_penalty + p->presence_penalty;
        set_logit(s, t, l);
        s->counts[t] = 0;
    }
}

/* DRY, after the definition by its author (p-e-w): for every earlier place
 * where the newest token also occurred, the match length is how far the
 * stretch ending there agrees with the stretch ending now, counted in tokens
 * and stopped at a sequence breaker; the token that followed that earlier
 * place is penalised by its longest such match. The lengths for all earlier
 * places at once are the Z-function of the window read newest-first, so this
 * is linear in the window. */
static void apply_dry(rlx_sampler *s)
{
    const rlx_sampler_params *p = &s->params;
    if (p->dry_multiplier <= 0.0f || p->dry_penalty_last_n == 0)
        return;
    int32_t len = window_len(s, p->dry_penalty_last_n);
    if (len < 2)
        return;
    int32_t *rev = s->rev, *z = s->z;
    int32_t limit = len;
    for (int32_t k = 0; k < len; k++) {
        rev[k] = recent(s, k);
        if (limit == len && s->is_breaker[rev[k]])
            limit = k;
    }
    if (limit < p->dry_allowed_length)
        return;

    z[0] = len;
    int32_t lo = 0, hi = 0; /* the rightmost match [lo, hi) found so far */
    for (int32_t k = 1; k < len; k++) {
        int32_t zk = 0;
        if (k < hi) {
            zk = z[k - lo];
            if (zk > hi - k)
                zk = hi - k;
        }
        while (k + zk < len && rev[zk] == rev[k + zk])
            zk++;
        z[k] = zk;
        if (k + zk > hi) {
            lo = k;
            hi = k + zk;
        }
    }

    int32_t nt = 0;
    for (int32_t k = 1; k < len; k++) {
        int32_t m = z[k] < limit ? z[k] : limit;
        if (m < p->dry_allowed_length)
            continue;
        int32_t next = rev[k - 1];
        if (s->is_breaker[next])
            continue;
        if (s->counts[next] == 0)
            s->touched[nt++] = next;
        if (m > s->counts[next])
            s->counts[next] = m;
    }
    for (int32_t i = 0; i < nt; i++) {
        int32_t t = s->touched[i];
        double pen =
            (double)p->dry_multiplier * pow(p->dry_base, s->counts[t] - p->dry_allowed_length);
        /* Very long repeats would overflow the float: cap so logits stay finite. */
        if (!(pen < 1e30))
            pen = 1e30;
        set_logit(s, t, logit_of(s, t) - (float)pen);
        s->counts[t] = 0;
    }
}

/* ---- ordering of candidates ---- */

/* a ranks below b: lower score, or the same score and a higher id. */
static bool worse(const cand *a, const cand *b)
{
    return a->score < b->score || (a->score == b->score && a->id > b->id);
}

/* Min-heap by rank: h[0] is the worst of h[0..size). */
static void sift_down(cand *h, int32_t size, int32_t i)
{
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= size)
            return;
        if (c + 1 < size && worse(&h[c + 1], &h[c]))
            c++;
        if (!worse(&h[c], &h[i]))
            return;
        cand t = h[c];
        h[c] = h[i];
        h[i] = t;
        i = c;
    }
}

/* Afterwards cand[0..m) are the m best of cand[0..n), best first. A heap of m
 * scanned over the rest: O(n log m) at worst, about n comparisons in the usual
 * case where few entries beat the heap's worst. */
static void heap_select(cand *h, int32_t n, int32_t m)
{
    for (int32_t i = m / 2 - 1; i >= 0; i--)
        sift_down(h, m, i);
    for (int32_t i = m; i < n; i++) {
        if (worse(&h[0], &h[i])) {
            cand t = h[0];
            h[0] = h[i];
            h[i] = t;
            sift_down(h, m, 0);
        }
    }
    for (int32_t end = m - 1; end > 0; end--) {
        cand t = h[0];
        h[0] = h[end];
        h[end] = t;
        sift_down(h, end, 0);
    }
}

static void select_sorted(rlx_sampler *s, int32_t m)
{
    if (m > s->n)
        m = s->n;
    if (m <= s->n_sorted || m <= 0)
        return;
    heap_select(s->cand, s->n, m);
    s->n_sorted = m;
}

static float max_logit(const rlx_sampler *s)
{
    if (s->n_sorted > 0)
        return s->cand[0].logit;
    float m = -INFINITY;
    for (int32_t i = 0; i < s->n; i++)
        if (s->cand[i].logit > m)
            m = s->cand[i].logit;
    return m;
}

/* p = softmax(logit) over the live candidates; also sets s->lse. */
static void softmax(rlx_sampler *s)
{
    float mx = max_logit(s);
    double sum = 0.0;
    for (int32_t i = 0; i < s->n; i++) {
        float e = expf(s->cand[i].logit - mx);
        s->cand[i].p = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int32_t i = 0; i < s->n; i++)
        s->cand[i].p *= inv;
    s->lse = (double)mx + log(sum);
}

/* Keeps the candidates whose score is >= thr (at least min_keep of them, the
 * best ones), in their current order. Valid while score is the logit. */
static void keep_at_least(rlx_sampler *s, float thr, int32_t min_keep)
{
    int32_t kept = 0;
    for (int32_t i = 0; i < s->n; i++)
        kept += s->cand[i].score >= thr;
    if (kept == s->n)
        return;
    if (kept < min_keep) {
        select_sorted(s, min_keep);
        s->n = s->n_sorted = min_keep < s->n ? min_keep : s->n;
        return;
    }
    int32_t j = 0;
    for (int32_t i = 0; i < s->n; i++)
        if (s->cand[i].score >= thr)
            s->cand[j++] = s->cand[i];
    s->n = j;
    /* Everything kept ranks above everything dropped, so the sorted prefix
     * survives as a prefix. */
    if (s->n_sorted > j)
        s->n_sorted = j;
}

/* Keeps the shortest run of best-ranked candidates whose probabilities add up
 * to at least mass (and at least min_keep of them). p must be current. Orders
 * only as far as needed: a prefix of 256, then 8 times more each round. */
static void keep_mass_sorted(rlx_sampler *s, double mass)
{
    int32_t min_keep = s->params.min_keep;
    int32_t m = s->n <= 1024 ? s->n : 256;
    double cum = 0.0;
    int32_t i = 0;
    for (;;) {
        select_sorted(s, m);
        for (; i < m; i++) {
            cum += s->cand[i].p;
            if (cum >= mass && i + 1 >= min_keep) {
                s->n = s->n_sorted = i + 1;
                return;
            }
        }
        if (m >= s->n)
            return;
        m = s->n / 8 < m ? s->n : m * 8;
    }
}

static int32_t bucket_of(float score, float smax, float inv_width)
{
    int32_t b = (int32_t)((smax - score) * inv_width);
    return b < RLX_SAMPLER_BUCKETS ? b : RLX_SAMPLER_BUCKETS - 1;
}

static void swap_cand(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

/* keep_mass for many candidates without sorting them: bucket the scores
 * (bucket 0 holds the best), add up each bucket's mass, and order only the
 * bucket where the running mass crosses the target. Buckets are monotone in
 * the score, so the result is the same as sorting everything. */
static void keep_mass(rlx_sampler *s, double mass)
{
    cand *c = s->cand;
    int32_t n = s->n, min_keep = s->params.min_keep;
    if (n <= 4096 || s->n_sorted >= 4096) {
        keep_mass_sorted(s, mass);
        return;
    }
    float smax = -INFINITY, smin = INFINITY;
    for (int32_t i = 0; i < n; i++) {
        smax = c[i].score > smax ? c[i].score : smax;
        smin = c[i].score < smin ? c[i].score : smin;
    }
    float inv_width = (float)RLX_SAMPLER_BUCKETS / (smax - smin);
    if (!(smax > smin) || !isfinite(inv_width)) {
        keep_mass_sorted(s, mass);
        return;
    }
    memset(s->bucket_mass, 0, sizeof s->bucket_mass);
    memset(s->bucket_count, 0, sizeof s->bucket_count);
    for (int32_t i = 0; i < n; i++) {
        int32_t b = bucket_of(c[i].score, smax, inv_width);
        s->bucket_mass[b] += c[i].p;
        s->bucket_count[b]++;
    }
    double cum = 0.0;
    int32_t cnt = 0, cut = 0;
    for (; cut < RLX_SAMPLER_BUCKETS; cut++) {
        if (cum + s->bucket_mass[cut] >= mass && cnt + s->bucket_count[cut] >= min_keep)
            break;
        cum += s->bucket_mass[cut];
        cnt += s->bucket_count[cut];
    }
    if (cut == RLX_SAMPLER_BUCKETS)
        return; /* rounding kept the total under the target: keep everything */
    int32_t lo = 0;
    for (int32_t i = 0; i < n; i++)
        if (bucket_of(c[i].score, smax, inv_width) < cut)
            swap_cand(&c[lo++], &c[i]);
    int32_t hi = lo;
    for (int32_t i = lo; i < n; i++)
        if (bucket_of(c[i].score, smax, inv_width) == cut)
            swap_cand(&c[hi++], &c[i]);
    heap_select(c + lo, hi - lo, hi - lo);
    cum = 0.0;
    for (int32_t i = 0; i < lo; i++)
        cum += c[i].p;
    for (int32_t i = lo; i < hi; i++) {
        cum += c[i].p;
        if (cum >= mass && i + 1 >= min_keep) {
            s->n = i + 1;
            s->n_sorted = lo == 0 ? i + 1 : 0;
            return;
        }
    }
    /* Summed in another order the bucket fell just short: do it the slow way. */
    s->n_sorted = lo == 0 ? hi : 0;
    keep_mass_sorted(s, mass);
}

/* ---- steps on candidates ---- */

/* Collects the tokens with a finite logit, divided by t unless t is 1. */
static rlx_status build_candidates(rlx_sampler *s, float t)
{
    int32_t n = 0;
    bool scale = t != 1.0f;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        float l = s->patched[i] ? s->pval[i] : s->logits[i];
        if (l > -INFINITY) { /* false for NaN too */
            if (l == INFINITY)
                return fail(s, "the logit of token %d is +inf", (int)i);
            if (scale) {
                l /= t;
                if (l > FLT_MAX)
                    l = FLT_MAX;
                else if (l < -FLT_MAX)
                    l = -FLT_MAX;
            }
            s->cand[n].score = l;
            s->cand[n].logit = l;
            s->cand[n].p = 0.0f;
            s->cand[n].id = i;
            n++;
        }
    }
    s->n = n;
    s->n_sorted = 0;
    if (n == 0)
        return fail(s, "no token can be sampled: every logit is -inf or NaN after logit bias and "
                       "penalties");
    return RLX_OK;
}

static void scale_logits(rlx_sampler *s, float t)
{
    for (int32_t i = 0; i < s->n; i++) {
        float l = s->cand[i].logit / t;
        if (l > FLT_MAX)
            l = FLT_MAX;
        else if (l < -FLT_MAX)
            l = -FLT_MAX;
        s->cand[i].logit = s->cand[i].score = l;
    }
}

/* build_candidates followed by top-k in one pass over the caller's row: a
 * heap of the k + np best raw logits (np = tokens the overlay changed), then
 * the changed tokens swapped for their new values. Of the untouched tokens at
 * least k stay in the heap, so every token that can make the top k is there.
 * Temperature then scales only the k survivors: dividing by a positive
 * temperature keeps the order, so this equals scaling first. */
static rlx_status build_top_k(rlx_sampler *s, int32_t k, float t)
{
    cand *h = s->cand;
    const float *lg = s->logits;
    int64_t want = (int64_t)k + s->np;
    int32_t k2 = want < s->n_vocab ? (int32_t)want : s->n_vocab;
    int32_t n = 0, i = 0;
    for (; i < s->n_vocab && n < k2; i++) {
        float l = lg[i];
        if (l > -INFINITY)
            h[n++] = (cand){l, l, 0.0f, i};
    }
    if (n == k2) {
        for (int32_t j = k2 / 2 - 1; j >= 0; j--)
            sift_down(h, k2, j);
        /* Ids only grow from here, so a tie with the worst kept entry loses;
         * NaN never compares greater. */
        float floor = h[0].score;
        for (; i < s->n_vocab; i++) {
            float l = lg[i];
            if (l > floor) {
                h[0] = (cand){l, l, 0.0f, i};
                sift_down(h, k2, 0);
                floor = h[0].score;
            }
        }
    }
    if (s->np > 0) {
        int32_t j = 0;
        for (int32_t a = 0; a < n; a++)
            if (!s->patched[h[a].id])
                h[j++] = h[a];
        n = j;
        for (int32_t a = 0; a < s->np; a++) {
            int32_t id = s->plist[a];
            float l = s->pval[id];
            if (l > -INFINITY)
                h[n++] = (cand){l, l, 0.0f, id};
        }
    }
    s->n = n;
    s->n_sorted = 0;
    if (n == 0)
        return fail(s, "no token can be sampled: every logit is -inf or NaN after logit bias and "
                       "penalties");
    for (int32_t a = 0; a < n; a++)
        if (h[a].logit == INFINITY)
            return fail(s, "the logit of token %d is +inf", (int)h[a].id);
    select_sorted(s, k);
    s->n = s->n_sorted;
    if (t != 1.0f) {
        scale_logits(s, t);
        /* Rounding can turn two close logits into a tie that the id must now
         * order: one insertion pass over the nearly sorted k restores it. */
        for (int32_t a = 1; a < s->n_sorted; a++) {
            cand c = h[a];
            int32_t b = a;
            while (b > 0 && worse(&h[b - 1], &c)) {
                h[b] = h[b - 1];
                b--;
            }
            h[b] = c;
        }
    }
    return RLX_OK;
}

static void keep_best_one(rlx_sampler *s)
{
    select_sorted(s, 1);
    s->n = s->n_sorted = 1;
}

/* Dynamic temperature: the flatter the distribution (entropy near ln n), the
 * closer to T + range; the more peaked, the closer to max(0, T - range). */
static void apply_dynatemp(rlx_sampler *s)
{
    const rlx_sampler_params *p = &s->params;
    if (s->n <= 1)
        return;
    softmax(s);
    double h = 0.0;
    for (int32_t i = 0; i < s->n; i++)
        if (s->cand[i].p > 0.0f)
            h += (double)s->cand[i].p * (s->lse - (double)s->cand[i].logit);
    double t_min = fmax(0.0, (double)p->temperature - p->dynatemp_range);
    double t_max = (double)p->temperature + p->dynatemp_range;
    double norm = h / log((double)s->n);
    if (norm < 0.0)
        norm = 0.0;
    double t = t_min + (t_max - t_min) * pow(norm, p->dynatemp_exponent);
    if (!(t > 0.0)) {
        keep_best_one(s);
        return;
    }
    scale_logits(s, (float)t);
}

static void apply_top_k(rlx_sampler *s)
{
    int32_t k = s->params.top_k;
    if (k <= 0)
        return;
    if (k < s->params.min_keep)
        k = s->params.min_keep;
    if (k >= s->n)
        return;
    select_sorted(s, k);
    s->n = k;
}

/* Locally typical sampling (Meister et al.): rank by how close each token's
 * surprise -ln p is to the entropy, keep the closest until typical_p mass. */
static void apply_typical(rlx_sampler *s)
{
    if (s->params.typical_p >= 1.0f || s->n <= 1)
        return;
    softmax(s);
    double h = 0.0;
    for (int32_t i = 0; i < s->n; i++)
        h += (double)s->cand[i].p * (s->lse - (double)s->cand[i].logit);
    for (int32_t i = 0; i < s->n; i++)
        s->cand[i].score = (float)-fabs((s->lse - (double)s->cand[i].logit) - h);
    s->n_sorted = 0;
    keep_mass(s, s->params.typical_p);
    for (int32_t i = 0; i < s->n; i++)
        s->cand[i].score = s->cand[i].logit;
    s->n_sorted = 0;
}

static void apply_top_p(rlx_sampler *s)
{
    if (s->params.top_p >= 1.0f || s->n <= 1)
        return;
    softmax(s);
    keep_mass(s, s->params.top_p);
}

static void apply_min_p(rlx_sampler *s)
{
    if (s->params.min_p <= 0.0f || s->n <= 1)
        return;
    /* p_i >= min_p * p_max  <=>  logit_i >= logit_max + ln(min_p). */
    keep_at_least(s, max_logit(s) + logf(s->params.min_p), s->params.min_keep);
}

/* Top-n-sigma (Tang et al.): keep the logits within n standard deviations
 * (population, over the live candidates) of the largest. */
static void apply_top_n_sigma(rlx_sampler *s)
{
    float nsig = s->params.top_n_sigma;
    if (nsig <= 0.0f || s->n <= 1)
        return;
    double sum = 0.0, sq = 0.0;
    for (int32_t i = 0; i < s->n; i++)
        sum += s->cand[i].logit;
    double mean = sum / s->n;
    for (int32_t i = 0; i < s->n; i++) {
        double d = s->cand[i].logit - mean;
        sq += d * d;
    }
    double sd = sqrt(sq / s->n);
    keep_at_least(s, (float)((double)max_logit(s) - nsig * sd), s->params.min_keep);
}

/* XTC (exclude top choices, by p-e-w): sometimes drop every token at or over
 * the threshold but the least likely of them, when there are two or more. */
static void apply_xtc(rlx_sampler *s)
{
    const rlx_sampler_params *p = &s->params;
    if (p->xtc_probability <= 0.0f || s->n < 2)
        return;
    if (rng_uniform(s->rng) >= p->xtc_probability)
        return;
    softmax(s);
    int32_t above = 0, last = -1;
    for (int32_t i = 0; i < s->n; i++) {
        if (s->cand[i].p >= p->xtc_threshold) {
            above++;
            if (last < 0 || worse(&s->cand[i], &s->cand[last]))
                last = i;
        }
    }
    if (above < 2 || s->n - (above - 1) < p->min_keep)
        return;
    int32_t j = 0;
    for (int32_t i = 0; i < s->n; i++)
        if (i == last || s->cand[i].p < p->xtc_threshold)
            s->cand[j++] = s->cand[i];
    s->n = j;
    /* The removed tokens were the best-ranked ones: a sorted prefix that
     * covered all of them loses exactly them. */
    s->n_sorted = s->n_sorted >= above ? s->n_sorted - (above - 1) : 0;
}

/* Mirostat v1 (Basu et al.): estimate the Zipf exponent s from the best 100
 * tokens, then keep the k that make the expected surprise mu. */
static void mirostat_v1_truncate(rlx_sampler *s)
{
    if (s->n <= 1)
        return;
    const int32_t m = 100;
    select_sorted(s, m);
    int32_t pairs = (m - 1 < s->n - 1) ? m - 1 : s->n - 1;
    double num = 0.0, den = 0.0;
    for (int32_t i = 0; i < pairs; i++) {
        double t = log((double)(i + 2) / (double)(i + 1));
        double b = (double)s->cand[i].logit - (double)s->cand[i + 1].logit; /* ln(p_i/p_i+1) */
        num += t * b;
        den += t * t;
    }
    double s_hat = num / den;
    double eps = s_hat - 1.0;
    double nv = (double)s->n_vocab;
    double ratio; /* eps / (1 - N^-eps), whose limit at eps = 0 is 1 / ln N */
    if (fabs(eps) < 1e-7)
        ratio = 1.0 / log(nv);
    else
        ratio = eps / (1.0 - pow(nv, -eps));
    double k = pow(ratio * pow(2.0, (double)s->mu), 1.0 / s_hat);
    int32_t ki;
    if (isnan(k) || k >= (double)s->n)
        ki = s->n;
    else if (k < 1.0)
        ki = 1;
    else
        ki = (int32_t)k;
    select_sorted(s, ki);
    s->n = ki;
}

/* Mirostat v2: keep the tokens whose surprise -log2 p is at most mu. */
static void mirostat_v2_truncate(rlx_sampler *s)
{
    if (s->n <= 1)
        return;
    softmax(s);
    /* -log2 p_i <= mu  <=>  logit_i >= lse - mu ln 2 */
    keep_at_least(s, (float)(s->lse - (double)s->mu * log(2.0)), 1);
}

/* Everything but the final pick. On success the live candidates are in
 * cand[0..n) with score == logit; *greedy is the argmax when temperature <= 0
 * (then cand is not filled). */
static rlx_status run_chain(rlx_sampler *s, const float *logits, int32_t *greedy)
{
    const rlx_sampler_params *p = &s->params;
    *greedy = -1;
    s->message[0] = '\0';
    s->logits = logits;
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        int32_t t = s->bias[i].token;
        set_logit(s, t, logit_of(s, t) + s->bias[i].bias);
    }
    apply_penalties(s);
    apply_dry(s);

    if (p->temperature <= 0.0f) {
        int32_t best = -1;
        float bl = -INFINITY;
        for (int32_t i = 0; i < s->n_vocab; i++) {
            float l = s->patched[i] ? s->pval[i] : logits[i];
            if (l > bl) {
                bl = l;
                best = i;
            }
        }
        if (best < 0)
            return fail(s, "no token can be sampled: every logit is -inf or NaN after logit bias "
                           "and penalties");
        if (bl == INFINITY)
            return fail(s, "the logit of token %d is +inf", (int)best);
        *greedy = best;
        s->greedy_logit = bl;
        return RLX_OK;
    }

    bool dyn = p->dynatemp_range > 0.0f;
    rlx_status st;
    if (!dyn && p->mirostat == 0 && p->top_k > 0)
        st = build_top_k(s, p->top_k > p->min_keep ? p->top_k : p->min_keep, p->temperature);
    else
        st = build_candidates(s, dyn ? 1.0f : p->temperature);
    if (st != RLX_OK)
        return st;
    if (dyn)
        apply_dynatemp(s);

    if (p->mirostat == 1) {
        mirostat_v1_truncate(s);
        return RLX_OK;
    }
    if (p->mirostat == 2) {
        mirostat_v2_truncate(s);
        return RLX_OK;
    }
    apply_top_k(s);
    apply_typical(s);
    apply_top_p(s);
    apply_min_p(s);
    apply_top_n_sigma(s);
    apply_xtc(s);
    return RLX_OK;
}

/* A draw from the softmax of the live candidates; returns the index in cand. */
static int32_t draw(rlx_sampler *s)
{
    softmax(s);
    double u = rng_uniform(s->rng), total = 0.0;
    for (int32_t i = 0; i < s->n; i++)
        total += s->cand[i].p;
    double target = u * total, cum = 0.0;
    int32_t last = 0;
    for (int32_t i = 0; i < s->n; i++) {
        if (s->cand[i].p <= 0.0f)
            continue;
        cum += s->cand[i].p;
        last = i;
        if (target < cum)
            return i;
    }
    return last;
}

rlx_status rlx_sampler_sample(rlx_sampler *s, const float *logits, int32_t *out_token)
{
    if (!s)
        return RLX_ERR_INVALID_ARG;
    if (!logits || !out_token)
        return fail(s, "rlx_sampler_sample: logits and out_token must not be NULL");
    *out_token = -1;
    int32_t greedy;
    rlx_status st = run_chain(s, logits, &greedy);
    clear_patches(s);
    if (st != RLX_OK)
        return st;
    if (greedy >= 0) {
        *out_token = greedy;
        return RLX_OK;
    }
    int32_t i = draw(s);
    *out_token = s->cand[i].id;
    if (s->params.mirostat != 0) {
        /* The surprise of the pick under the truncated, renormalised
         * distribution pulls mu towards tau. */
        double surprise = -log2((double)s->cand[i].p);
        s->mu -= (float)((double)s->params.mirostat_eta * (surprise - s->params.mirostat_tau));
    }
    return RLX_OK;
}

rlx_status rlx_sampler_apply(rlx_sampler *s, const float *logits, const rlx_sampler_candidate **out,
                             int32_t *n_out)
{
    if (!s)
        return RLX_ERR_INVALID_ARG;
    if (!logits || !out || !n_out)
        return fail(s, "rlx_sampler_apply: logits, out and n_out must not be NULL");
    *out = NULL;
    *n_out = 0;
    int32_t greedy;
    rlx_status st = run_chain(s, logits, &greedy);
    clear_patches(s);
    if (st != RLX_OK)
        return st;
    if (greedy >= 0) {
        s->out[0] = (rlx_sampler_candidate){greedy, s->greedy_logit, 1.0f};
        *out = s->out;
        *n_out = 1;
        return RLX_OK;
    }
    softmax(s);
    select_sorted(s, s->n);
    for (int32_t i = 0; i < s->n; i++)
        s->out[i] = (rlx_sampler_candidate){s->cand[i].id, s->cand[i].logit, s->cand[i].p};
    *out = s->out;
    *n_out = s->n;
    return RLX_OK;
}
