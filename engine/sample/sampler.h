/* The token sampler: turns one row of logits into the next token id.
 *
 * Usage:
 *     rlx_sampler_params sp = rlx_sampler_default_params();
 *     sp.seed = 1234;
 *     sp.temperature = 0.7f;
 *     rlx_sampler *s = NULL;
 *     rlx_error *err = NULL;
 *     if (rlx_sampler_create(sp, n_vocab, &s, &err) != RLX_OK) {
 *         fprintf(stderr, "%s\n", rlx_error_message(err));  // "top_p must be in (0, 1], got 1.5"
 *         ...
 *     }
 *     for (each prompt token t) rlx_sampler_accept(s, t);  // penalties and DRY see the prompt
 *     for (;;) {
 *         int32_t tok;
 *         if (rlx_sampler_sample(s, logits, &tok) != RLX_OK)
 *             fprintf(stderr, "%s\n", rlx_sampler_last_error(s));
 *         rlx_sampler_accept(s, tok);
 *         ...
 *     }
 *     rlx_sampler_free(s);
 *
 * The chain, in the order llama.cpp applies its samplers:
 *
 *   1. logit bias (logit += bias; -INFINITY bans a token)
 *   2. repetition / frequency / presence penalties over the last
 *      penalty_last_n accepted tokens: a token seen c > 0 times has its logit
 *      divided by repeat_penalty when positive, multiplied when <= 0, and then
 *      lowered by c * frequency_penalty + presence_penalty
 *   3. DRY ("don't repeat yourself"): a token that would extend a repeat of an
 *      earlier stretch of the last dry_penalty_last_n tokens by a match of
 *      length L >= dry_allowed_length loses
 *      dry_multiplier * dry_base^(L - dry_allowed_length) from its logit;
 *      matches never reach across a sequence-breaker token
 *   -> temperature <= 0: greedy, the argmax of the logits so far (lowest id on
 *      a tie); nothing below runs and no random number is drawn
 *   4. temperature (logit / T), or dynamic temperature when dynatemp_range > 0:
 *      T = T_min + (T_max - T_min) * (H / ln n)^dynatemp_exponent with H the
 *      entropy of the softmax over the n candidates, T_min = max(0, T - range),
 *      T_max = T + range
 *   5. top-k (keep the k highest; 0 turns it off)
 *   6. typical-p (keep the tokens whose surprise -ln p is closest to the
 *      entropy, fewest first, until their probabilities reach typical_p)
 *   7. top-p (keep the most probable tokens, fewest first, until their
 *      probabilities reach top_p)
 *   8. min-p (keep p >= min_p * p_max)
 *   9. top-n-sigma (keep logit >= max - top_n_sigma * stddev of the logits)
 *  10. XTC: with probability xtc_probability, when two or more tokens have
 *      p >= xtc_threshold, remove all of them but the least probable one
 *  11. the pick: a random draw from the softmax of what is left, or mirostat
 *      v1/v2 (which replaces steps 5-10 with its own truncation, as llama.cpp
 *      does, and carries its own state mu = 2 * tau at create and reset)
 *
 * Every step keeps at least min_keep tokens (mirostat v2 at least one).
 * Probabilities are renormalised over the remaining tokens before each step
 * that reads them. NaN logits are treated as -INFINITY. Ties are broken
 * towards the lower token id everywhere, so results do not depend on the
 * order of the work inside.
 *
 * Randomness comes from the sampler's own xoshiro256** generator seeded from
 * params.seed: the same seed, params, logits and accepted tokens give the same
 * tokens on every machine. XTC (when enabled) and the final draw each use one
 * number per call. Pick a fresh seed yourself if you want variety.
 *
 * Cost: create allocates every buffer (a few bytes per vocabulary entry);
 * sample, apply, accept and reset allocate nothing. The caller's logits
 * are read in place, never copied. When top-k is on, one pass keeps the k
 * best and only those are ever ordered; without it, top-p and typical-p
 * bucket the scores and order only the bucket where their cut falls.
 *
 * Ownership: params' arrays (logit_bias, dry_sequence_breakers) belong to the
 * caller and are copied by rlx_sampler_create. The sampler owns everything
 * else; free it with rlx_sampler_free.
 *
 * Thread safety: a sampler is used by one thread at a time; different
 * samplers are independent.
 */
#ifndef RLX_ENGINE_SAMPLE_SAMPLER_H
#define RLX_ENGINE_SAMPLE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_SAMPLER_DEFAULT_SEED 0x5eed5eedu
/* Largest accepted history_size (tokens remembered for penalties and DRY). */
#define RLX_SAMPLER_MAX_HISTORY (1 << 24)

typedef struct rlx_sampler_logit_bias {
    int32_t token;
    float bias; /* added to the logit; -INFINITY bans the token */
} rlx_sampler_logit_bias;

typedef struct rlx_sampler_params {
    uint64_t seed;

    /* <= 0: greedy. Default 0.8. */
    float temperature;
    /* Dynamic temperature: off at 0 (default); exponent default 1. */
    float dynatemp_range;
    float dynatemp_exponent;

    int32_t top_k;     /* 0 = off; default 40 */
    float typical_p;   /* (0, 1], 1 = off (default) */
    float top_p;       /* (0, 1], 1 = off; default 0.95 */
    float min_p;       /* [0, 1], 0 = off; default 0.05 */
    float top_n_sigma; /* <= 0 = off (default -1) */

    float xtc_probability; /* [0, 1], 0 = off (default) */
    float xtc_threshold;   /* (0, 1], default 0.1; above 0.5 it can never fire */

    /* Tokens the last-N windows below can reach: the accepted-token ring. */
    int32_t history_size; /* default 4096 */

    /* Penalties: a window of -1 means the whole history. */
    int32_t penalty_last_n;  /* default 64; 0 = off */
    float repeat_penalty;    /* > 0, 1 = off (default) */
    float frequency_penalty; /* 0 = off (default) */
    float presence_penalty;  /* 0 = off (default) */

    /* DRY. Sequence breakers are token ids: the caller maps its breaker
     * strings (llama.cpp's default: "\n", ":", "\"", "*") to every vocabulary
     * token whose text contains one. */
    float dry_multiplier;       /* >= 0, 0 = off (default) */
    float dry_base;             /* >= 1, default 1.75 */
    int32_t dry_allowed_length; /* >= 1, default 2 */
    int32_t dry_penalty_last_n; /* -1 = whole history (default), 0 = off */
    const int32_t *dry_sequence_breakers;
    size_t n_dry_sequence_breakers;

    /* Mirostat: 0 = off (default), 1 or 2; tau default 5, eta default 0.1. */
    int32_t mirostat;
    float mirostat_tau;
    float mirostat_eta;

    int32_t min_keep; /* >= 1, default 1 */

    const rlx_sampler_logit_bias *logit_bias;
    size_t n_logit_bias;
} rlx_sampler_params;

/* One surviving candidate, as reported by rlx_sampler_apply. */
typedef struct rlx_sampler_candidate {
    int32_t token;
    float logit; /* after bias, penalties, DRY and temperature */
    float p;     /* softmax over the survivors */
} rlx_sampler_candidate;

typedef struct rlx_sampler rlx_sampler;

RLX_API rlx_sampler_params rlx_sampler_default_params(void);

/* Checks every field (the message names the field, its allowed range and the
 * value given) and allocates all buffers for a vocabulary of n_vocab tokens.
 * *out is set to NULL first. */
RLX_API rlx_status rlx_sampler_create(rlx_sampler_params params, int32_t n_vocab, rlx_sampler **out,
                                      rlx_error **err);
RLX_API void rlx_sampler_free(rlx_sampler *s);

/* Picks the next token from logits[n_vocab]. Does not accept it: call
 * rlx_sampler_accept with the token that is actually used. Fails (with a
 * message in rlx_sampler_last_error) when no token has a finite logit after
 * bias and penalties. */
RLX_API rlx_status rlx_sampler_sample(rlx_sampler *s, const float *logits, int32_t *out_token);

/* Runs the chain without the final pick and reports the survivors, most
 * probable first (lowest id on a tie); *out points into the sampler and stays
 * valid until the next call on it. Meant for showing candidates and for
 * tests: it draws XTC's random number like sample does, does not touch
 * mirostat's mu, and sorts its output (O(n log n) in the survivors). */
RLX_API rlx_status rlx_sampler_apply(rlx_sampler *s, const float *logits,
                                     const rlx_sampler_candidate **out, int32_t *n_out);

/* Appends a token to the history the penalties and DRY look at. */
RLX_API rlx_status rlx_sampler_accept(rlx_sampler *s, int32_t token);

/* Forgets the history, reseeds the generator from params.seed and sets
 * mirostat's mu back to 2 * tau. */
RLX_API void rlx_sampler_reset(rlx_sampler *s);

/* Mirostat's current mu (2 * tau until a mirostat pick updates it). */
RLX_API float rlx_sampler_mirostat_mu(const rlx_sampler *s);

/* The message of the last failed sample/apply/accept, or "no error". */
RLX_API const char *rlx_sampler_last_error(const rlx_sampler *s);

#ifdef __cplusplus
}
#endif
#endif
