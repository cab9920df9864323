/* Sampler chain tests.
 *
 * Expected values: the per-step cases (temperature, top-k, top-p, min-p,
 * typical-p, top-n-sigma, XTC, dynamic temperature, penalties, DRY, the
 * default chain, mirostat v1's k and v2's cut) come from the independent
 * NumPy reference tests/reference/gen-sampler-ref.py, written out as
 * tests/reference/sampler-ref-data.h; tolerance 2e-6 on probabilities and
 * 1e-5 relative on logits. Mirostat v2's mu update, greedy, seeding, errors
 * and the large-vocabulary checks are derived by hand or by a plain full sort
 * in this file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/sample/sampler.h"
#include "tests/reference/sampler-ref-data.h"

/* Counting allocations: this program's malloc family forwards to glibc's and
 * counts while `counting` is set. Not under ASan, whose allocator must stay
 * the only one. */
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
#define COUNT_ALLOCS 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
static volatile int counting; /* volatile: the compiler assumes malloc reads no globals */
static volatile long n_allocs;
void *malloc(size_t n);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t n);
void *malloc(size_t n)
{
    n_allocs += counting;
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t size)
{
    n_allocs += counting;
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n)
{
    n_allocs += counting;
    return __libc_realloc(p, n);
}
#endif

#define NV 16

/* Every step off, temperature 1: the starting point of the per-step cases. */
static rlx_sampler_params plain_params(void)
{
    rlx_sampler_params p = rlx_sampler_default_params();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.penalty_last_n = 0;
    return p;
}

static rlx_sampler *make(rlx_sampler_params p, int32_t n_vocab)
{
    rlx_sampler *s = NULL;
    rlx_error *err = NULL;
    rlx_status st = rlx_sampler_create(p, n_vocab, &s, &err);
    if (st != RLX_OK)
        fail_msg("create failed: %s", rlx_error_message(err));
    assert_non_null(s);
    return s;
}

static void accept_all(rlx_sampler *s, const int32_t *toks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(rlx_sampler_accept(s, toks[i]), RLX_OK);
}

/* apply() on ref_logits must give exactly the reference survivors. */
static void check_ref_once(rlx_sampler_params p, const int32_t *hist, size_t n_hist,
                           const int32_t *tokens, const float *logits, const float *probs,
                           int32_t n)
{
    rlx_sampler *s = make(p, NV);
    accept_all(s, hist, n_hist);
    const rlx_sampler_candidate *c = NULL;
    int32_t nc = 0;
    assert_int_equal(rlx_sampler_apply(s, ref_logits, &c, &nc), RLX_OK);
    if (nc != n) {
        for (int32_t i = 0; i < nc; i++)
            print_message("  got %d: logit %g p %g\n", (int)c[i].token, (double)c[i].logit,
                          (double)c[i].p);
    }
    assert_int_equal(nc, n);
    for (int32_t i = 0; i < n; i++) {
        assert_int_equal(c[i].token, tokens[i]);
        assert_float_equal(c[i].logit, logits[i], 1e-5 * fmax(1.0, fabs(logits[i])));
        assert_float_equal(c[i].p, probs[i], 2e-6);
    }
    rlx_sampler_free(s);
}

/* The reference case as given and, where top-k is off, again through the
 * top-k-first path (which reads the logits through the bias/penalty overlay):
 * with k = NV it must change nothing, and with k = 5 it must keep the first
 * five reference survivors, renormalised. */
static void check_ref(rlx_sampler_params p, const int32_t *hist, size_t n_hist,
                      const int32_t *tokens, const float *logits, const float *probs, int32_t n)
{
    check_ref_once(p, hist, n_hist, tokens, logits, probs, n);
    if (p.top_k != 0 || p.mirostat != 0 || p.dynatemp_range > 0.0f || p.top_p < 1.0f ||
        p.typical_p < 1.0f || p.min_p > 0.0f || p.top_n_sigma > 0.0f || p.xtc_probability > 0.0f)
        return;
    p.top_k = NV;
    check_ref_once(p, hist, n_hist, tokens, logits, probs, n);
    if (n < 5)
        return;
    float p5[5];
    double sum = 0.0;
    for (int i = 0; i < 5; i++)
        sum += probs[i];
    for (int i = 0; i < 5; i++)
        p5[i] = (float)(probs[i] / sum);
    p.top_k = 5;
    check_ref_once(p, hist, n_hist, tokens, logits, p5, 5);
}

#define CHECK_REF(p, hist, n_hist, name)                                                       \
    check_ref((p), (hist), (n_hist), ref_##name##_tokens, ref_##name##_logits, ref_##name##_p, \
              (int32_t)(sizeof ref_##name##_tokens / sizeof ref_##name##_tokens[0]))

/* ---- defaults and validation ---- */

static void defaults_are_llama_like(void **state)
{
    rlx_sampler_params p = rlx_sampler_default_params();
    assert_float_equal(p.temperature, 0.8f, 0);
    assert_int_equal(p.top_k, 40);
    assert_float_equal(p.top_p, 0.95f, 0);
    assert_float_equal(p.min_p, 0.05f, 0);
    assert_float_equal(p.typical_p, 1.0f, 0);
    assert_float_equal(p.repeat_penalty, 1.0f, 0);
    assert_int_equal(p.penalty_last_n, 64);
    assert_float_equal(p.dry_multiplier, 0.0f, 0);
    assert_float_equal(p.dry_base, 1.75f, 0);
    assert_int_equal(p.dry_allowed_length, 2);
    assert_int_equal(p.mirostat, 0);
    assert_float_equal(p.mirostat_tau, 5.0f, 0);
    assert_float_equal(p.mirostat_eta, 0.1f, 0);
    assert_true(p.top_n_sigma <= 0.0f);
    assert_float_equal(p.xtc_probability, 0.0f, 0);
    rlx_sampler *s = make(p, 150000);
    rlx_sampler_free(s);
}

static void expect_invalid(rlx_sampler_params p, int32_t n_vocab, const char *message)
{
    rlx_sampler *s = (rlx_sampler *)(uintptr_t)1; /* must be reset to NULL */
    rlx_error *err = NULL;
    assert_int_equal(rlx_sampler_create(p, n_vocab, &s, &err), RLX_ERR_INVALID_ARG);
    assert_null(s);
    assert_int_equal(rlx_error_code(err), RLX_ERR_INVALID_ARG);
    assert_string_equal(rlx_error_message(err), message);
    rlx_error_free(err);
}

static void invalid_params(void **state)
{
    rlx_sampler_params p;
    expect_invalid(rlx_sampler_default_params(), 0, "n_vocab must be > 0, got 0");

#define BAD(field, value, message)        \
    do {                                  \
        p = rlx_sampler_default_params(); \
        p.field = value;                  \
        expect_invalid(p, NV, message);   \
    } while (0)

    BAD(top_p, 1.5f, "top_p must be in (0, 1], got 1.5");
    BAD(top_p, 0.0f, "top_p must be in (0, 1], got 0");
    BAD(top_p, NAN, "top_p must be in (0, 1], got nan");
    BAD(temperature, INFINITY, "temperature must be a finite number, got inf");
    BAD(dynatemp_range, -0.5f, "dynatemp_range must be >= 0, got -0.5");
    BAD(dynatemp_exponent, 0.0f, "dynatemp_exponent must be > 0, got 0");
    BAD(top_k, -1, "top_k must be >= 0 (0 turns it off), got -1");
    BAD(typical_p, 2.0f, "typical_p must be in (0, 1], got 2");
    BAD(min_p, -0.1f, "min_p must be in [0, 1], got -0.1");
    BAD(min_p, 1.25f, "min_p must be in [0, 1], got 1.25");
    BAD(top_n_sigma, NAN, "top_n_sigma must be a finite number, got nan");
    BAD(xtc_probability, 1.5f, "xtc_probability must be in [0, 1], got 1.5");
    BAD(xtc_threshold, 0.0f, "xtc_threshold must be in (0, 1], got 0");
    BAD(history_size, -2, "history_size must be in [0, 16777216], got -2");
    BAD(penalty_last_n, 5000,
        "penalty_last_n must be -1 (the whole history) or in [0, history_size = 4096], got 5000");
    BAD(penalty_last_n, -2,
        "penalty_last_n must be -1 (the whole history) or in [0, history_size = 4096], got -2");
    BAD(repeat_penalty, 0.0f, "repeat_penalty must be > 0, got 0");
    BAD(frequency_penalty, INFINITY, "frequency_penalty must be a finite number, got inf");
    BAD(presence_penalty, NAN, "presence_penalty must be a finite number, got nan");
    BAD(dry_multiplier, -1.0f, "dry_multiplier must be >= 0, got -1");
    BAD(dry_base, 0.5f, "dry_base must be >= 1, got 0.5");
    BAD(dry_allowed_length, 0, "dry_allowed_length must be >= 1, got 0");
    BAD(dry_penalty_last_n, 10000,
        "dry_penalty_last_n must be -1 (the whole history) or in [0, history_size = 4096], got "
        "10000");
    BAD(mirostat, 3, "mirostat must be 0 (off), 1 or 2, got 3");
    BAD(mirostat_tau, 0.0f, "mirostat_tau must be > 0, got 0");
    BAD(mirostat_eta, -0.1f, "mirostat_eta must be > 0, got -0.1");
    BAD(min_keep, 0, "min_keep must be >= 1, got 0");
#undef BAD

    p = rlx_sampler_default_params();
    rlx_sampler_logit_bias bias[2] = {{1, 2.0f}, {NV, 1.0f}};
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    expect_invalid(p, NV, "logit_bias[1].token must be in [0, 16), got 16");
    bias[1] = (rlx_sampler_logit_bias){3, INFINITY};
    expect_invalid(p, NV, "logit_bias[1].bias must be a finite number or -INFINITY, got inf");
    p.logit_bias = NULL;
    expect_invalid(p, NV, "logit_bias is NULL but n_logit_bias is 2");

    p = rlx_sampler_default_params();
    int32_t breakers[] = {2, -1};
    p.dry_sequence_breakers = breakers;
    p.n_dry_sequence_breakers = 2;
    expect_invalid(p, NV, "dry_sequence_breakers[1] must be a token in [0, 16), got -1");

    rlx_error *err = NULL;
    assert_int_equal(rlx_sampler_create(rlx_sampler_default_params(), NV, NULL, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
}

static void bad_input_at_sample_time(void **state)
{
    rlx_sampler_params p = plain_params();
    rlx_sampler_logit_bias ban = {5, -INFINITY};
    p.logit_bias = &ban;
    p.n_logit_bias = 1;
    rlx_sampler *s = make(p, NV);
    float logits[NV];
    for (int i = 0; i < NV; i++)
        logits[i] = -INFINITY;
    logits[3] = NAN;
    logits[5] = 10.0f; /* banned by the bias */
    int32_t tok = 7;
    assert_int_equal(rlx_sampler_sample(s, logits, &tok), RLX_ERR_INVALID_ARG);
    assert_int_equal(tok, -1);
    assert_string_equal(rlx_sampler_last_error(s), "no token can be sampled: every logit is -inf "
                                                   "or NaN after logit bias and penalties");
    logits[9] = INFINITY;
    assert_int_equal(rlx_sampler_sample(s, logits, &tok), RLX_ERR_INVALID_ARG);
    assert_string_equal(rlx_sampler_last_error(s), "the logit of token 9 is +inf");
    {
        rlx_sampler_params q = p;
        q.top_k = 3;
        rlx_sampler *s2 = make(q, NV);
        assert_int_equal(rlx_sampler_sample(s2, logits, &tok), RLX_ERR_INVALID_ARG);
        assert_string_equal(rlx_sampler_last_error(s2), "the logit of token 9 is +inf");
        q.temperature = 0.0f;
        rlx_sampler_free(s2);
        s2 = make(q, NV);
        assert_int_equal(rlx_sampler_sample(s2, logits, &tok), RLX_ERR_INVALID_ARG);
        assert_string_equal(rlx_sampler_last_error(s2), "the logit of token 9 is +inf");
        rlx_sampler_free(s2);
    }
    /* NaN is -inf: the one finite logit wins. */
    logits[9] = -INFINITY;
    logits[11] = -3.0f;
    assert_int_equal(rlx_sampler_sample(s, logits, &tok), RLX_OK);
    assert_int_equal(tok, 11);
    assert_string_equal(rlx_sampler_last_error(s), "no error");

    assert_int_equal(rlx_sampler_accept(s, NV), RLX_ERR_INVALID_ARG);
    assert_string_equal(rlx_sampler_last_error(s),
                        "accepted token 16 is outside the vocabulary [0, 16)");
    assert_int_equal(rlx_sampler_accept(s, -1), RLX_ERR_INVALID_ARG);
    assert_int_equal(rlx_sampler_sample(s, NULL, &tok), RLX_ERR_INVALID_ARG);
    rlx_sampler_free(s);
    rlx_sampler_free(NULL);
}

/* ---- each step against the reference ---- */

static void temperature_scales(void **state)
{
    rlx_sampler_params p = plain_params();
    p.temperature = 0.5f;
    CHECK_REF(p, NULL, 0, temp05);
}

static void top_k_keeps_k(void **state)
{
    rlx_sampler_params p = plain_params();
    p.top_k = 5;
    CHECK_REF(p, NULL, 0, top_k5);
    /* min_keep wins over a smaller k. */
    p.top_k = 2;
    p.min_keep = 5;
    CHECK_REF(p, NULL, 0, top_k5);
}

static void top_p_smallest_prefix(void **state)
{
    rlx_sampler_params p = plain_params();
    p.top_p = 0.6f;
    CHECK_REF(p, NULL, 0, top_p06);
}

static void min_p_relative_to_max(void **state)
{
    rlx_sampler_params p = plain_params();
    p.min_p = 0.2f;
    CHECK_REF(p, NULL, 0, min_p02);
}

static void typical_p(void **state)
{
    rlx_sampler_params p = plain_params();
    p.typical_p = 0.5f;
    CHECK_REF(p, NULL, 0, typical05);
}

static void top_n_sigma(void **state)
{
    rlx_sampler_params p = plain_params();
    p.top_n_sigma = 1.0f;
    CHECK_REF(p, NULL, 0, top_n_sigma1);
}

static void xtc_removes_top_choices(void **state)
{
    rlx_sampler_params p = plain_params();
    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.1f;
    CHECK_REF(p, NULL, 0, xtc01);
    /* Above 0.5 at most one token can qualify: nothing is removed. */
    p.xtc_threshold = 0.6f;
    CHECK_REF(p, NULL, 0, plain);
    /* Never fires at probability 0. */
    p.xtc_threshold = 0.1f;
    p.xtc_probability = 0.0f;
    CHECK_REF(p, NULL, 0, plain);
}

static void dynamic_temperature(void **state)
{
    rlx_sampler_params p = plain_params();
    p.temperature = 1.0f;
    p.dynatemp_range = 0.5f;
    p.dynatemp_exponent = 1.0f;
    CHECK_REF(p, NULL, 0, dynatemp);
    /* By hand from the reference entropy: T = 0.5 + 1.0 * H / ln 16. */
    double t = 0.5 + REF_DYNATEMP_ENTROPY / log(16.0);
    assert_float_equal(t, REF_DYNATEMP_T, 1e-12);
    p.temperature = 0.8f;
    p.dynatemp_range = 0.6f;
    p.dynatemp_exponent = 2.0f;
    CHECK_REF(p, NULL, 0, dynatemp_exp2);
}

static void penalties_arithmetic(void **state)
{
    static const int32_t hist[] = {3, 6, 3, 1, 8, 3, 1, 5};
    rlx_sampler_params p = plain_params();
    p.penalty_last_n = 7;
    p.repeat_penalty = 1.3f;
    p.frequency_penalty = 0.2f;
    p.presence_penalty = 0.5f;
    CHECK_REF(p, hist, 8, penalties);
    /* By hand: token 3 (logit 3.1, twice in the window) -> 3.1/1.3 - 0.4 - 0.5;
     * token 8 (logit -2.2, once) -> -2.2*1.3 - 0.2 - 0.5. */
    assert_float_equal(ref_penalties_logits[4], 3.1 / 1.3 - 0.9, 1e-6);
    assert_float_equal(ref_penalties_logits[15], -2.2 * 1.3 - 0.7, 1e-6);

    /* A history ring of 7 forgets the first token the same way. */
    p.history_size = 7;
    p.penalty_last_n = -1;
    CHECK_REF(p, hist, 8, penalties);
}

static void dry_on_repeats(void **state)
{
    static const int32_t hist[] = {4, 5, 6, 7, 2, 5, 9, 10, 11, 4, 5, 6};
    int32_t breakers[] = {10};
    rlx_sampler_params p = plain_params();
    p.dry_multiplier = 0.8f;
    p.dry_base = 1.75f;
    p.dry_allowed_length = 2;
    p.dry_sequence_breakers = breakers;
    p.n_dry_sequence_breakers = 1;
    CHECK_REF(p, hist, 12, dry);
    /* By hand: "4 5 6" recurs, 7 followed it: match 3, penalty 0.8*1.75^1. */
    assert_float_equal(ref_dry_logits[13], 0.0 - 0.8 * 1.75, 1e-6);

    int32_t breakers2[] = {10, 5};
    p.dry_sequence_breakers = breakers2;
    p.n_dry_sequence_breakers = 2;
    CHECK_REF(p, hist, 12, dry_breaker);

    /* A window of 3 tokens ("4 5 6") holds no earlier 6: no penalty. */
    p.dry_sequence_breakers = breakers;
    p.n_dry_sequence_breakers = 1;
    p.dry_penalty_last_n = 3;
    CHECK_REF(p, hist, 12, plain);

    static const int32_t run[] = {12, 12, 12, 12, 12};
    p = plain_params();
    p.dry_multiplier = 1.0f;
    p.dry_base = 2.0f;
    p.dry_allowed_length = 2;
    CHECK_REF(p, run, 5, dry_run);
}

static void default_chain(void **state)
{
    rlx_sampler_params p = rlx_sampler_default_params();
    p.top_k = 10;
    CHECK_REF(p, NULL, 0, chain);
}

static void logit_bias(void **state)
{
    rlx_sampler_logit_bias bias[] = {{3, -INFINITY}, {6, -INFINITY}, {8, 5.5f}, {8, 0.1f}};
    rlx_sampler_params p = plain_params();
    p.top_k = 3;
    p.logit_bias = bias;
    p.n_logit_bias = 4;
    rlx_sampler *s = make(p, NV);
    bias[0].bias = 100.0f; /* copied at create: this changes nothing */
    const rlx_sampler_candidate *c;
    int32_t n;
    assert_int_equal(rlx_sampler_apply(s, ref_logits, &c, &n), RLX_OK);
    assert_int_equal(n, 3);
    assert_int_equal(c[0].token, 8); /* -2.2 + 5.6 = 3.4 */
    assert_float_equal(c[0].logit, 3.4f, 1e-5);
    assert_int_equal(c[1].token, 13);
    assert_int_equal(c[2].token, 0);
    rlx_sampler_free(s);
}

/* ---- mirostat ---- */

static void mirostat_v1_k(void **state)
{
    rlx_sampler_params p = plain_params();
    p.mirostat = 1;
    p.mirostat_tau = 2.5f; /* mu starts at 5 */
    CHECK_REF(p, NULL, 0, mirostat1);
}

static void mirostat_v2_mu_update(void **state)
{
    rlx_sampler_params p = plain_params();
    p.mirostat = 2;
    p.mirostat_tau = 1.5f;
    p.mirostat_eta = 0.1f;
    p.top_k = 1; /* ignored under mirostat */
    CHECK_REF(p, NULL, 0, mirostat2);

    rlx_sampler *s = make(p, NV);
    double mu = 3.0;
    assert_float_equal(rlx_sampler_mirostat_mu(s), mu, 0);
    for (int step = 0; step < 20; step++) {
        const rlx_sampler_candidate *c;
        int32_t n, tok;
        /* apply shows the cut at the current mu and draws nothing */
        assert_int_equal(rlx_sampler_apply(s, ref_logits, &c, &n), RLX_OK);
        assert_int_equal(rlx_sampler_sample(s, ref_logits, &tok), RLX_OK);
        double pt = -1.0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].token == tok)
                pt = c[i].p;
        assert_true(pt > 0.0);
        /* mu <- mu - eta * (-log2 p(tok) - tau), p renormalised over the cut */
        mu = (float)(mu - 0.1 * (-log2(pt) - 1.5));
        assert_float_equal(rlx_sampler_mirostat_mu(s), mu, 1e-5);
    }
    /* First step by hand: from mu = 3 the cut is {3, 6} (p >= 1/8), so the
     * new mu is 3 - 0.1 * (-log2 p - 1.5) for p = 0.59869 or 0.40131. */
    rlx_sampler_reset(s);
    int32_t tok;
    assert_int_equal(rlx_sampler_sample(s, ref_logits, &tok), RLX_OK);
    double pt = tok == 3 ? ref_mirostat2_p[0] : ref_mirostat2_p[1];
    assert_true(tok == 3 || tok == 6);
    assert_float_equal(rlx_sampler_mirostat_mu(s), 3.0 - 0.1 * (-log2(pt) - 1.5), 1e-5);
    rlx_sampler_free(s);
}

/* ---- greedy, seeds, distribution ---- */

static void greedy_is_argmax(void **state)
{
    static const int32_t hist[] = {3, 3, 3};
    rlx_sampler_params p = rlx_sampler_default_params();
    p.temperature = 0.0f;
    p.repeat_penalty = 2.0f; /* 3.1 -> 1.55: 6 (2.7) becomes the max */
    rlx_sampler *s = make(p, NV);
    int32_t tok;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(rlx_sampler_sample(s, ref_logits, &tok), RLX_OK);
        assert_int_equal(tok, 3);
    }
    accept_all(s, hist, 3);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(rlx_sampler_sample(s, ref_logits, &tok), RLX_OK);
        assert_int_equal(tok, 6);
    }
    const rlx_sampler_candidate *c;
    int32_t n;
    assert_int_equal(rlx_sampler_apply(s, ref_logits, &c, &n), RLX_OK);
    assert_int_equal(n, 1);
    assert_int_equal(c[0].token, 6);
    assert_float_equal(c[0].p, 1.0f, 0);
    rlx_sampler_free(s);

    /* Ties go to the lowest id. */
    float flat[NV];
    for (int i = 0; i < NV; i++)
        flat[i] = i == 4 || i == 9 ? 1.0f : 0.0f;
    p = plain_params();
    p.temperature = -1.0f;
    s = make(p, NV);
    assert_int_equal(rlx_sampler_sample(s, flat, &tok), RLX_OK);
    assert_int_equal(tok, 4);
    rlx_sampler_free(s);
}

static void run_seq(uint64_t seed, int32_t *out, int n, bool reset_midway)
{
    rlx_sampler_params p = plain_params();
    p.seed = seed;
    p.temperature = 1.5f;
    p.xtc_probability = 0.5f;
    rlx_sampler *s = make(p, NV);
    for (int i = 0; i < n; i++) {
        if (reset_midway && i == n / 2)
            rlx_sampler_reset(s);
        assert_int_equal(rlx_sampler_sample(s, ref_logits, &out[i]), RLX_OK);
        rlx_sampler_accept(s, out[i]);
    }
    rlx_sampler_free(s);
}

static void seeds_reproduce(void **state)
{
    enum { N = 200 };
    int32_t a[N], b[N], c[N], d[N];
    run_seq(1234, a, N, false);
    run_seq(1234, b, N, false);
    run_seq(1235, c, N, false);
    assert_memory_equal(a, b, sizeof a);
    int differ = 0;
    for (int i = 0; i < N; i++)
        differ += a[i] != c[i];
    assert_true(differ > N / 4);
    /* reset reseeds: the second half repeats the first */
    run_seq(1234, d, N, true);
    assert_memory_equal(d, a, sizeof(int32_t) * (N / 2));
    assert_memory_equal(d + N / 2, a, sizeof(int32_t) * (N / 2));
}

/* Draw counts against the softmax: Pearson's chi-square with k - 1 degrees
 * of freedom must stay under the 0.1% critical value, and every count within
 * 5 standard deviations of its expectation. With a fixed seed the outcome is
 * fixed; the bound is what a fair sampler passes 999 times in 1000. */
static void check_distribution(rlx_sampler_params p, const float *logits, int32_t nv,
                               const double *expect_p, double chi2_crit)
{
    enum { DRAWS = 200000 };
    rlx_sampler *s = make(p, nv);
    long counts[NV] = {0};
    for (int i = 0; i < DRAWS; i++) {
        int32_t tok;
        assert_int_equal(rlx_sampler_sample(s, logits, &tok), RLX_OK);
        assert_true(tok >= 0 && tok < nv);
        counts[tok]++;
    }
    double chi2 = 0.0;
    int cells = 0;
    for (int32_t t = 0; t < nv; t++) {
        double e = expect_p[t] * DRAWS;
        if (expect_p[t] == 0.0) {
            assert_int_equal(counts[t], 0);
            continue;
        }
        cells++;
        chi2 += (counts[t] - e) * (counts[t] - e) / e;
        double sd = sqrt(DRAWS * expect_p[t] * (1 - expect_p[t]));
        assert_true(fabs(counts[t] - e) <= 5 * sd);
    }
    print_message("    chi-square %.2f over %d cells (critical %.2f)\n", chi2, cells, chi2_crit);
    assert_true(chi2 < chi2_crit);
    rlx_sampler_free(s);
}

static void draws_match_probabilities(void **state)
{
    /* 8 tokens, all kept: 7 degrees of freedom, chi2(0.999, 7) = 24.32. */
    float logits[8] = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 0.25f, -1.0f, 1.5f};
    double ep[8], sum = 0.0;
    for (int i = 0; i < 8; i++)
        sum += exp(logits[i]);
    for (int i = 0; i < 8; i++)
        ep[i] = exp(logits[i]) / sum;
    rlx_sampler_params p = plain_params();
    check_distribution(p, logits, 8, ep, 24.32);

    /* After the default chain with top_k 10: the reference survivors'
     * renormalised probabilities; 6 degrees of freedom, chi2 = 22.46. */
    double ep2[NV] = {0};
    for (int i = 0; i < REF_CHAIN_N; i++)
        ep2[ref_chain_tokens[i]] = ref_chain_p[i];
    p = rlx_sampler_default_params();
    p.top_k = 10;
    p.seed = 99;
    check_distribution(p, ref_logits, NV, ep2, 22.46);
}

/* ---- large vocabularies ---- */

static uint64_t lcg_state = 88172645463325252ull;
static float rand_logit(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(lcg_state >> 11) * 0x1.0p-53;
    /* roughly the spread of a real LM's logits */
    return (float)(12.0 * u * u * u - 4.0);
}

typedef struct pair {
    float logit;
    int32_t id;
} pair;

static int by_logit_desc(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* top-p without top-k on 150k tokens: the progressive partial sort must agree
 * with a full sort. */
static void large_vocab_top_p(void **state)
{
    enum { V = 150000 };
    float *logits = malloc(V * sizeof *logits);
    pair *pairs = malloc(V * sizeof *pairs);
    assert_non_null(logits);
    assert_non_null(pairs);
    for (int i = 0; i < V; i++) {
        logits[i] = rand_logit();
        pairs[i] = (pair){logits[i], i};
    }
    qsort(pairs, V, sizeof *pairs, by_logit_desc);
    double sum = 0.0;
    for (int i = 0; i < V; i++)
        sum += exp((double)pairs[i].logit - pairs[0].logit);

    const float tps[] = {0.3f, 0.9f, 0.999f};
    for (size_t k = 0; k < sizeof tps / sizeof tps[0]; k++) {
        rlx_sampler_params p = plain_params();
        p.top_p = tps[k];
        rlx_sampler *s = make(p, V);
        const rlx_sampler_candidate *c;
        int32_t n;
        assert_int_equal(rlx_sampler_apply(s, logits, &c, &n), RLX_OK);
        double cum = 0.0;
        int32_t want = V;
        for (int i = 0; i < V; i++) {
            cum += exp((double)pairs[i].logit - pairs[0].logit) / sum;
            if (cum >= tps[k]) {
                want = i + 1;
                break;
            }
        }
        print_message("    top_p %.3f keeps %d of %d\n", (double)tps[k], (int)n, V);
        /* float vs double accumulation may move the cut by a token at most */
        assert_true(abs(n - want) <= 1);
        for (int32_t i = 0; i < n && i < want; i++)
            assert_int_equal(c[i].token, pairs[i].id);
        rlx_sampler_free(s);
    }
    free(logits);
    free(pairs);
}

typedef struct dist_pair {
    double d;
    int32_t id;
} dist_pair;

static int by_dist(const void *a, const void *b)
{
    const dist_pair *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return x->id - y->id;
}

/* typical-p on 150k tokens against a plain double-precision version: rank by
 * |-ln p - H|, keep the shortest prefix reaching the mass. */
static void large_vocab_typical(void **state)
{
    enum { V = 150000 };
    float *logits = malloc(V * sizeof *logits);
    dist_pair *d = malloc(V * sizeof *d);
    char *seen = calloc(V, 1);
    double *pr = malloc(V * sizeof *pr);
    assert_non_null(logits);
    assert_non_null(d);
    assert_non_null(seen);
    assert_non_null(pr);
    double mx = -INFINITY, sum = 0.0, h = 0.0;
    for (int i = 0; i < V; i++) {
        logits[i] = rand_logit();
        mx = fmax(mx, logits[i]);
    }
    for (int i = 0; i < V; i++)
        sum += exp(logits[i] - mx);
    for (int i = 0; i < V; i++) {
        pr[i] = exp(logits[i] - mx) / sum;
        h -= pr[i] * log(pr[i]);
    }
    for (int i = 0; i < V; i++)
        d[i] = (dist_pair){fabs(-log(pr[i]) - h), i};
    qsort(d, V, sizeof *d, by_dist);

    const float tps[] = {0.2f, 0.9f};
    for (size_t k = 0; k < sizeof tps / sizeof tps[0]; k++) {
        rlx_sampler_params p = plain_params();
        p.typical_p = tps[k];
        rlx_sampler *s = make(p, V);
        const rlx_sampler_candidate *c;
        int32_t n;
        assert_int_equal(rlx_sampler_apply(s, logits, &c, &n), RLX_OK);
        double cum = 0.0;
        int32_t want = V;
        for (int i = 0; i < V; i++) {
            cum += pr[d[i].id];
            if (cum >= tps[k]) {
                want = i + 1;
                break;
            }
        }
        print_message("    typical_p %.2f keeps %d of %d\n", (double)tps[k], (int)n, V);
        assert_true(abs(n - want) <= 1);
        memset(seen, 0, V);
        for (int32_t i = 0; i < n; i++)
            seen[c[i].token] = 1;
        for (int32_t i = 0; i < n && i < want; i++)
            assert_true(seen[d[i].id]);
        rlx_sampler_free(s);
    }
    free(logits);
    free(d);
    free(seen);
    free(pr);
}

static void large_vocab_speed(void **state)
{
    enum { V = 151936, CALLS = 200 };
    float *logits = malloc(V * sizeof *logits);
    assert_non_null(logits);
    for (int i = 0; i < V; i++)
        logits[i] = rand_logit();
    rlx_sampler_params p = rlx_sampler_default_params();
    p.repeat_penalty = 1.1f;
    rlx_sampler *s = make(p, V);
    for (int i = 0; i < 64; i++)
        rlx_sampler_accept(s, (i * 7919) % V);
    /* The default chain's top-k of 40 must match a full sort's first 40. */
    const rlx_sampler_candidate *c;
    int32_t n;
    p.repeat_penalty = 1.0f;
    rlx_sampler *plain = make(p, V);
    assert_int_equal(rlx_sampler_apply(plain, logits, &c, &n), RLX_OK);
    pair *pairs = malloc(V * sizeof *pairs);
    assert_non_null(pairs);
    for (int i = 0; i < V; i++)
        pairs[i] = (pair){logits[i], i};
    qsort(pairs, V, sizeof *pairs, by_logit_desc);
    assert_true(n >= 1 && n <= 40);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(c[i].token, pairs[i].id);
    free(pairs);
    rlx_sampler_free(plain);

    double t0 = now_s();
    for (int i = 0; i < CALLS; i++) {
        int32_t tok;
        assert_int_equal(rlx_sampler_sample(s, logits, &tok), RLX_OK);
        rlx_sampler_accept(s, tok);
    }
    double per = (now_s() - t0) / CALLS;
    print_message("    default chain, %d-token vocabulary: %.3f ms per token\n", V, per * 1e3);
    /* Loose enough for sanitizer and debug builds; a release build is far
     * below a millisecond. */
    assert_true(per < 0.050);
    rlx_sampler_free(s);
    free(logits);
}

/* sample, apply, accept and reset never allocate, whatever steps are on. */
static void no_allocation_per_token(void **state)
{
#ifdef COUNT_ALLOCS
    enum { V = 5000 };
    float *logits = malloc(V * sizeof *logits);
    assert_non_null(logits);
    for (int i = 0; i < V; i++)
        logits[i] = rand_logit();
    /* the counter itself works */
    counting = 1;
    void *volatile probe = malloc(16);
    counting = 0;
    free(probe);
    assert_int_equal(n_allocs, 1);
    n_allocs = 0;
    int32_t breakers[] = {7, 11};
    rlx_sampler_logit_bias bias[] = {{3, 2.0f}, {9, -INFINITY}};
    for (int variant = 0; variant < 4; variant++) {
        rlx_sampler_params p = rlx_sampler_default_params();
        p.repeat_penalty = 1.2f;
        p.frequency_penalty = 0.1f;
        p.dry_multiplier = 0.8f;
        p.dry_sequence_breakers = breakers;
        p.n_dry_sequence_breakers = 2;
        p.logit_bias = bias;
        p.n_logit_bias = 2;
        p.xtc_probability = 0.5f;
        p.top_n_sigma = 2.0f;
        if (variant == 1) {
            p.top_k = 0;
            p.typical_p = 0.9f;
            p.dynatemp_range = 0.3f;
        }
        p.mirostat = variant == 2 ? 1 : variant == 3 ? 2 : 0;
        rlx_sampler *s = make(p, V);
        const rlx_sampler_candidate *c;
        int32_t n, tok = 0;
        long fails = 0;
        counting = 1;
        for (int i = 0; i < 300; i++) {
            fails += rlx_sampler_sample(s, logits, &tok) != RLX_OK;
            fails += rlx_sampler_accept(s, i % 3 ? tok : 42) != RLX_OK;
            if (i % 50 == 0)
                fails += rlx_sampler_apply(s, logits, &c, &n) != RLX_OK;
            if (i == 150)
                rlx_sampler_reset(s);
        }
        counting = 0;
        assert_int_equal(fails, 0);
        assert_int_equal(n_allocs, 0);
        rlx_sampler_free(s);
    }
    free(logits);
#else
    skip();
#endif
}

static void huge_top_k(void **state)
{
    rlx_sampler_params p = plain_params();
    p.top_k = INT32_MAX;
    p.repeat_penalty = 1.5f;
    p.penalty_last_n = 4;
    static const int32_t hist[] = {1, 2};
    CHECK_REF(p, NULL, 0, plain);
    rlx_sampler *s = make(p, NV);
    accept_all(s, hist, 2);
    int32_t tok;
    assert_int_equal(rlx_sampler_sample(s, ref_logits, &tok), RLX_OK);
    rlx_sampler_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_llama_like),
        cmocka_unit_test(invalid_params),
        cmocka_unit_test(bad_input_at_sample_time),
        cmocka_unit_test(temperature_scales),
        cmocka_unit_test(top_k_keeps_k),
        cmocka_unit_test(top_p_smallest_prefix),
        cmocka_unit_test(min_p_relative_to_max),
        cmocka_unit_test(typical_p),
        cmocka_unit_test(top_n_sigma),
        cmocka_unit_test(xtc_removes_top_choices),
        cmocka_unit_test(dynamic_temperature),
        cmocka_unit_test(penalties_arithmetic),
        cmocka_unit_test(dry_on_repeats),
        cmocka_unit_test(default_chain),
        cmocka_unit_test(logit_bias),
        cmocka_unit_test(mirostat_v1_k),
        cmocka_unit_test(mirostat_v2_mu_update),
        cmocka_unit_test(greedy_is_argmax),
        cmocka_unit_test(seeds_reproduce),
        cmocka_unit_test(draws_match_probabilities),
        cmocka_unit_test(large_vocab_top_p),
        cmocka_unit_test(large_vocab_typical),
        cmocka_unit_test(large_vocab_speed),
        cmocka_unit_test(no_allocation_per_token),
        cmocka_unit_test(huge_top_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
