/* Whisper's search and segmenting, as openai-whisper's decoding.py and
 * transcribe.py define them: the initial tokens (previous text, start of
 * transcript, language, task), the logit filters (suppress-blank, the
 * suppress list, the timestamp rules), greedy, sampling with best-of and beam
 * search, temperature fallback on compression ratio and average
 * log-probability, the no-speech skip, and the 30-s windows that move on from
 * the last timestamp. The network runs on the session's device; this file
 * only chooses tokens. */
#include "models/whisper/whisper-internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "engine/audio/audio.h"

rlx_whisper_decode_params rlx_whisper_decode_default_params(void)
{
    return (rlx_whisper_decode_params){
        .language = "auto",
        .beam_size = 0,
        .best_of = 5,
        .temperature = 0.0f,
        .temperature_inc = 0.2f,
        .compression_ratio_threshold = 2.4f,
        .logprob_threshold = -1.0f,
        .no_speech_threshold = 0.6f,
        .condition_on_previous_text = true,
        .max_tokens_per_window = 224,
    };
}

/* ---- token lists ---- */

typedef struct {
    int32_t *v;
    int n, cap;
} ilist;

static bool ilist_push(ilist *l, int32_t x)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        int32_t *v = realloc(l->v, sizeof(int32_t) * (size_t)cap);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

/* ---- one decode of a window ---- */

/* Whisper's text context is 448 positions (rlx_whisper_create refuses more) */
#define MAX_TOK 448

typedef struct {
    int32_t tok[MAX_TOK];
    float p[MAX_TOK];
    int n;
    double sum_logprob;
} seq;

typedef struct {
    int32_t tokens[MAX_TOK]; /* sampled tokens, without the final eot */
    float p[MAX_TOK];
    int n;
    double avg_logprob;
    float no_speech_prob;
    float temperature;
    float compression_ratio;
} window_result;

typedef struct {
    rlx_whisper *w;
    const rlx_whisper_decode_params *dp;
    int32_t initial[MAX_TOK];
    int n_initial, sot_index;
    int sample_len;
    int32_t lang_token;
    uint64_t rng;
    float *lp; /* scratch log-probs [n_vocab] */
} decoder;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double log_softmax(const float *x, int n, float *out)
{
    float m = -INFINITY;
    for (int i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] == -INFINITY ? 0.0 : exp((double)x[i] - m);
    double lse = m + log(s);
    if (out)
        for (int i = 0; i < n; i++)
            out[i] = x[i] == -INFINITY ? -INFINITY : (float)(x[i] - lse);
    return lse;
}

/* openai's logit filters, in its order: SuppressBlank, SuppressTokens,
 * ApplyTimestampRules. `s` holds the tokens sampled so far. */
static void apply_filters(decoder *d, const int32_t *s, int n, float *logits)
{
    rlx_whisper *w = d->w;
    const rlx_whisper_special *sp = w->sp;
    const int V = w->hp->n_vocab, tb = sp->timestamp_begin;
    /* the file's lists: SuppressBlank's (" " and the end of text, or
     * generation_config's) and the non-speech tokens with the specials */
    size_t nl = 0;
    const int32_t *list;
    if (n == 0) {
        list = rlx_whisper_file_begin_suppress_tokens(w->file, &nl);
        for (size_t i = 0; i < nl; i++)
            logits[list[i]] = -INFINITY;
    }
    list = rlx_whisper_file_suppress_tokens(w->file, &nl);
    for (size_t i = 0; i < nl; i++)
        logits[list[i]] = -INFINITY;
    if (d->dp->no_timestamps)
        return;
    logits[sp->no_timestamps] = -INFINITY;
    bool last_ts = n >= 1 && s[n - 1] >= tb;
    bool penult_ts = n < 2 || s[n - 2] >= tb;
    if (last_ts) {
        if (penult_ts)
            for (int i = tb; i < V; i++)
                logits[i] = -INFINITY;
        else
            for (int i = 0; i < sp->eot; i++)
                logits[i] = -INFINITY;
    }
    int last_seen = -1;
    for (int i = 0; i < n; i++)
        if (s[i] >= tb)
            last_seen = s[i];
    if (last_seen >= 0) {
        int upto = last_ts && !penult_ts ? last_seen : last_seen + 1;
        for (int i = tb; i < upto && i < V; i++)
            logits[i] = -INFINITY;
    }
    if (n == 0) {
        for (int i = 0; i < tb; i++)
            logits[i] = -INFINITY;
        int last_allowed = tb + 50; /* max_initial_timestamp 1.0 s at 0.02 s */
        for (int i = last_allowed + 1; i < V; i++)
            logits[i] = -INFINITY;
    }
    /* when the timestamps together are likelier than any text token, a
     * timestamp comes next */
    log_softmax(logits, V, d->lp);
    double m = -INFINITY, ts = -INFINITY;
    for (int i = 0; i < tb; i++)
        m = d->lp[i] > m ? d->lp[i] : m;
    float tmax = -INFINITY;
    for (int i = tb; i < V; i++)
        tmax = d->lp[i] > tmax ? d->lp[i] : tmax;
    if (tmax > -INFINITY) {
        double acc = 0;
        for (int i = tb; i < V; i++)
            if (d->lp[i] > -INFINITY)
                acc += exp((double)d->lp[i] - tmax);
        ts = tmax + log(acc);
    }
    if (ts > m)
        for (int i = 0; i < tb; i++)
            logits[i] = -INFINITY;
}

void rlx_whisper_filter_logits(rlx_whisper *w, const rlx_whisper_decode_params *dp,
                               const int32_t *sampled, int n, float *logits, float *scratch)
{
    decoder d = {.w = w, .dp = dp, .lp = scratch};
    apply_filters(&d, sampled, n, logits);
}

static bool cancelled(rlx_whisper *w)
{
    return __atomic_load_n(&w->cancel, __ATOMIC_RELAXED) != 0;
}

/* Feed the initial tokens to nb beams; the no-speech probability is read at
 * the start-of-transcript token. Leaves each beam's last logits in
 * w->logits. */
static rlx_status prefill(decoder *d, int nb, float *no_speech, rlx_error **err)
{
    rlx_whisper *w = d->w;
    const int V = w->hp->n_vocab;
    int first = d->sot_index + 1;
    int32_t *t = malloc(sizeof(int32_t) * (size_t)nb * (size_t)d->n_initial);
    if (!t)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    rlx_status st = RLX_OK;
    for (int part = 0; part < 2 && st == RLX_OK; part++) {
        int a = part ? first : 0, b = part ? d->n_initial : first;
        if (b <= a)
            continue;
        for (int j = 0; j < nb; j++)
            memcpy(t + (size_t)j * (b - a), d->initial + a, sizeof(int32_t) * (size_t)(b - a));
        st = rlx_whisper_run_decoder(w, nb, t, b - a, a, w->logits, err);
        if (st == RLX_OK && part == 0) {
            log_softmax(w->logits, V, d->lp);
            *no_speech = expf(d->lp[w->sp->no_speech]);
        }
    }
    free(t);
    return st;
}

/* One character of UTF-8 at s (n bytes left): its length when valid, else 0
 * with *skip = the bytes Python's decode(errors="replace") turns into one
 * U+FFFD (the longest start of a valid sequence, at least 1). */
static int utf8_char(const unsigned char *s, size_t n, int *skip)
{
    unsigned char b = s[0];
    int len = b < 0x80                 ? 1
              : b >= 0xC2 && b <= 0xDF ? 2
              : b >= 0xE0 && b <= 0xEF ? 3
              : b >= 0xF0 && b <= 0xF4 ? 4
                                       : 0;
    *skip = 1;
    if (len <= 1)
        return len;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (b == 0xE0)
        lo = 0xA0;
    else if (b == 0xED)
        hi = 0x9F;
    else if (b == 0xF0)
        lo = 0x90;
    else if (b == 0xF4)
        hi = 0x8F;
    for (int k = 1; k < len; k++) {
        if ((size_t)k >= n || s[k] < (k == 1 ? lo : 0x80) || s[k] > (k == 1 ? hi : 0xBF)) {
            *skip = k;
            return 0;
        }
    }
    return len;
}

/* Python's str.isspace for the code point of a valid UTF-8 character */
static bool py_space(const unsigned char *s, int len)
{
    uint32_t c = len == 1   ? s[0]
                 : len == 2 ? (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F)
                 : len == 3
                     ? (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F)
                     : 0;
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* openai's compression_ratio(tokenizer.decode(tokens).strip()): the bytes of
 * the tokens below <|0.00|> (special tokens by their "<|...|>" names), read as
 * UTF-8 with each invalid stretch one U+FFFD, surrounding whitespace removed,
 * against their zlib-compressed (level 6, as zlib.compress) length. */
float rlx_whisper_compression_ratio(rlx_whisper *w, const int32_t *tok, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        size_t l = 0;
        if (tok[i] >= 0 && tok[i] < w->sp->timestamp_begin &&
            rlx_whisper_file_token(w->file, tok[i], &l))
            len += l;
    }
    /* raw bytes, then the decoded text (a replaced byte grows to at most 3) */
    unsigned char *raw = malloc(len + 1), *text = malloc(3 * len + 1);
    float r = 0;
    if (!raw || !text)
        goto out;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t l = 0;
        const char *s = tok[i] >= 0 && tok[i] < w->sp->timestamp_begin
                            ? rlx_whisper_file_token(w->file, tok[i], &l)
                            : NULL;
        if (s) {
            memcpy(raw + k, s, l);
            k += l;
        }
    }
    size_t tl = 0, first = SIZE_MAX, end = 0; /* [first, end): the text without its spaces */
    for (size_t i = 0; i < len;) {
        int skip, cl = utf8_char(raw + i, len - i, &skip);
        const unsigned char *c = cl ? raw + i : (const unsigned char *)"\xEF\xBF\xBD";
        int out = cl ? cl : 3;
        if (!py_space(c, out)) {
            if (first == SIZE_MAX)
                first = tl;
            end = tl + (size_t)out;
        }
        memcpy(text + tl, c, (size_t)out);
        tl += (size_t)out;
        i += cl ? (size_t)cl : (size_t)skip;
    }
    if (first == SIZE_MAX)
        goto out; /* empty: openai divides by the 8 bytes of an empty zlib stream, 0 */
    size_t m = end - first;
    uLongf zlen = compressBound(m);
    unsigned char *z = malloc(zlen);
    if (z && compress2(z, &zlen, text + first, m, Z_DEFAULT_COMPRESSION) == Z_OK)
        r = (float)((double)m / (double)zlen);
    free(z);
out:
    free(raw);
    free(text);
    return r;
}

static int pick(decoder *d, const float *logits, float temperature, float *lp_out)
{
    const int V = d->w->hp->n_vocab;
    log_softmax(logits, V, d->lp);
    int best = 0;
    if (temperature <= 0) {
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best])
                best = i;
    } else {
        /* categorical over softmax(logits / T) */
        float m = -INFINITY;
        for (int i = 0; i < V; i++)
            m = logits[i] > m ? logits[i] : m;
        double s = 0;
        for (int i = 0; i < V; i++)
            s += logits[i] == -INFINITY ? 0 : exp((logits[i] - m) / temperature);
        double u = (double)(splitmix(&d->rng) >> 11) * 0x1.0p-53 * s, acc = 0;
        best = -1;
        for (int i = 0; i < V; i++) {
            if (logits[i] == -INFINITY)
                continue;
            acc += exp((logits[i] - m) / temperature);
            best = i;
            if (acc >= u)
                break;
        }
        if (best < 0)
            best = d->w->sp->eot;
    }
    *lp_out = d->lp[best];
    return best;
}

/* Greedy or sampled: one sequence. */
static rlx_status sample_one(decoder *d, float temperature, seq *out, float *no_speech,
                             rlx_error **err)
{
    rlx_whisper *w = d->w;
    const int eot = w->sp->eot;
    out->n = 0;
    out->sum_logprob = 0;
    rlx_status st = prefill(d, 1, no_speech, err);
    int past = d->n_initial;
    for (int i = 0; st == RLX_OK && i < d->sample_len; i++) {
        apply_filters(d, out->tok, out->n, w->logits);
        float lp;
        int tok = pick(d, w->logits, temperature, &lp);
        out->sum_logprob += lp;
        if (tok == eot)
            break;
        out->tok[out->n] = tok;
        out->p[out->n] = expf(lp);
        out->n++;
        /* openai stops once the tokens outgrow the text context: the last
         * one is kept, with no position left to feed it */
        if (past + 1 > w->hp->n_text_ctx)
            break;
        if (cancelled(w))
            return RLX_ERR_CANCELLED;
        st = rlx_whisper_run_decoder(w, 1, (int32_t[]){tok}, 1, past, w->logits, err);
        past++;
    }
    return st;
}

typedef struct {
    int32_t tok[MAX_TOK];
    float p[MAX_TOK];
    int n;
    int src; /* the beam it continues */
    double score;
} cand;

/* openai's BeamSearchDecoder with patience 1: each step keeps the nb best
 * unfinished continuations of the nb beams' top nb+1 tokens; a sequence that
 * ends is kept aside until nb have ended. */
static rlx_status beam_search(decoder *d, int nb, seq *best, float *no_speech, rlx_error **err)
{
    rlx_whisper *w = d->w;
    const int V = w->hp->n_vocab, eot = w->sp->eot;
    seq *beams = calloc((size_t)nb, sizeof(seq));
    cand *cands = calloc((size_t)nb * (size_t)(nb + 1), sizeof(cand));
    cand *fin = calloc((size_t)nb * 2, sizeof(cand));
    float *lps = malloc(sizeof(float) * (size_t)V);
    if (!beams || !cands || !fin || !lps) {
        free(beams), free(cands), free(fin), free(lps);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the beam search");
    }
    int n_fin = 0, past = d->n_initial;
    rlx_status st = prefill(d, nb, no_speech, err);
    int32_t src[RLX_WHISPER_MAX_BEAMS], next[RLX_WHISPER_MAX_BEAMS];
    for (int step = 0; st == RLX_OK && step < d->sample_len; step++) {
        int nc = 0;
        for (int j = 0; j < nb; j++) {
            float *lg = w->logits + (size_t)j * V;
            apply_filters(d, beams[j].tok, beams[j].n, lg);
            log_softmax(lg, V, lps);
            /* top nb+1 tokens of this beam */
            int top[RLX_WHISPER_MAX_BEAMS + 1];
            int nt = 0;
            for (int i = 0; i < V; i++) {
                if (lps[i] == -INFINITY)
                    continue;
                if (nt < nb + 1)
                    top[nt++] = i;
                else if (lps[i] > lps[top[nt - 1]])
                    top[nt - 1] = i;
                else
                    continue;
                for (int k = nt - 1; k > 0 && lps[top[k]] > lps[top[k - 1]]; k--) {
                    int t = top[k];
                    top[k] = top[k - 1];
                    top[k - 1] = t;
                }
            }
            for (int k = 0; k < nt; k++) {
                /* the same sequence from an identical beam counts once */
                bool dup = false;
                for (int c = 0; c < nc && !dup; c++)
                    dup = cands[c].n == beams[j].n + 1 && cands[c].tok[beams[j].n] == top[k] &&
                          !memcmp(cands[c].tok, beams[j].tok, sizeof(int32_t) * beams[j].n);
                if (dup)
                    continue;
                cand *c = &cands[nc++];
                memcpy(c->tok, beams[j].tok, sizeof(int32_t) * beams[j].n);
                memcpy(c->p, beams[j].p, sizeof(float) * beams[j].n);
                c->tok[beams[j].n] = top[k];
                c->p[beams[j].n] = expf(lps[top[k]]);
                c->n = beams[j].n + 1;
                c->score = beams[j].sum_logprob + lps[top[k]];
                c->src = j;
            }
        }
        /* stable order by score */
        for (int c = 0; c < nc; c++)
            for (int e = c; e > 0 && cands[e].score > cands[e - 1].score; e--) {
                cand t = cands[e];
                cands[e] = cands[e - 1];
                cands[e - 1] = t;
            }
        int kept = 0, new_fin = 0;
        for (int c = 0; c < nc && kept < nb; c++) {
            if (cands[c].tok[cands[c].n - 1] == eot) {
                if (n_fin + new_fin < nb) {
                    fin[n_fin + new_fin] = cands[c];
                    fin[n_fin + new_fin].n--; /* without the eot */
                    new_fin++;
                }
                continue;
            }
            src[kept] = cands[c].src;
            beams[kept].n = cands[c].n;
            memcpy(beams[kept].tok, cands[c].tok, sizeof(int32_t) * cands[c].n);
            memcpy(beams[kept].p, cands[c].p, sizeof(float) * cands[c].n);
            beams[kept].sum_logprob = cands[c].score;
            next[kept] = cands[c].tok[cands[c].n - 1];
            kept++;
        }
        n_fin += new_fin;
        if (n_fin >= nb || kept < nb || past + 1 > w->hp->n_text_ctx)
            break;
        if (cancelled(w)) {
            st = RLX_ERR_CANCELLED;
            break;
        }
        bool identity = true;
        for (int j = 0; j < nb; j++)
            identity = identity && src[j] == j;
        if (!identity && (st = rlx_whisper_run_reorder(w, nb, src, err)) != RLX_OK)
            break;
        st = rlx_whisper_run_decoder(w, nb, next, 1, past, w->logits, err);
        past++;
    }
    if (st == RLX_OK) {
        /* too few ended: the live beams count as ended here */
        for (int j = 0; j < nb && n_fin < nb; j++) {
            fin[n_fin].n = beams[j].n;
            memcpy(fin[n_fin].tok, beams[j].tok, sizeof(int32_t) * beams[j].n);
            memcpy(fin[n_fin].p, beams[j].p, sizeof(float) * beams[j].n);
            fin[n_fin].score = beams[j].sum_logprob;
            n_fin++;
        }
        int bi = 0;
        double bs = -INFINITY;
        for (int i = 0; i < n_fin; i++) {
            double s = fin[i].score / (fin[i].n > 0 ? fin[i].n : 1);
            if (s > bs) {
                bs = s;
                bi = i;
            }
        }
        best->n = fin[bi].n;
        memcpy(best->tok, fin[bi].tok, sizeof(int32_t) * fin[bi].n);
        memcpy(best->p, fin[bi].p, sizeof(float) * fin[bi].n);
        best->sum_logprob = fin[bi].score;
    }
    free(beams), free(cands), free(fin), free(lps);
    return st;
}

/* One window at one temperature: the best of its candidates. */
static rlx_status decode_at(decoder *d, float temperature, window_result *r, rlx_error **err)
{
    const rlx_whisper_decode_params *dp = d->dp;
    seq *best = calloc(1, sizeof(seq)), *s = calloc(1, sizeof(seq));
    if (!best || !s) {
        free(best), free(s);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    rlx_status st = RLX_OK;
    float no_speech = 0;
    double best_score = -INFINITY;
    if (temperature <= 0 && dp->beam_size > 1) {
        st = beam_search(d, dp->beam_size, best, &no_speech, err);
    } else {
        int n_cand = temperature > 0 ? (dp->best_of > 0 ? dp->best_of : 1) : 1;
        for (int c = 0; c < n_cand && st == RLX_OK; c++) {
            float ns = 0;
            st = sample_one(d, temperature, s, &ns, err);
            if (c == 0)
                no_speech = ns;
            double score = s->sum_logprob / (s->n > 0 ? s->n : 1);
            if (st == RLX_OK && score > best_score) {
                best_score = score;
                seq *t = best;
                best = s;
                s = t;
            }
        }
    }
    if (st == RLX_OK) {
        r->n = best->n;
        memcpy(r->tokens, best->tok, sizeof(int32_t) * best->n);
        memcpy(r->p, best->p, sizeof(float) * best->n);
        r->avg_logprob = best->sum_logprob / (best->n + 1);
        r->no_speech_prob = no_speech;
        r->temperature = temperature;
        r->compression_ratio = rlx_whisper_compression_ratio(d->w, r->tokens, r->n);
    }
    free(best), free(s);
    return st;
}

/* openai's decode_with_fallback: too repetitive or too unlikely falls back,
 * unless the window is silence: likely no speech AND the text unlikely (a
 * likely text that repeats itself still falls back). A threshold of 0 (the
 * log-probability's) or below (the others) is openai's None. */
bool rlx_whisper_needs_fallback(const rlx_whisper_decode_params *dp, float compression_ratio,
                                double avg_logprob, float no_speech_prob)
{
    bool lp_set = dp->logprob_threshold != 0;
    bool fallback = false;
    if (dp->compression_ratio_threshold > 0 && compression_ratio > dp->compression_ratio_threshold)
        fallback = true;
    if (lp_set && avg_logprob < dp->logprob_threshold)
        fallback = true;
    if (dp->no_speech_threshold > 0 && no_speech_prob > dp->no_speech_threshold && lp_set &&
        avg_logprob < dp->logprob_threshold)
        fallback = false;
    return fallback;
}

/* openai's no-speech skip: likely no speech, unless the text is likely. */
bool rlx_whisper_should_skip(const rlx_whisper_decode_params *dp, double avg_logprob,
                             float no_speech_prob)
{
    bool skip = dp->no_speech_threshold > 0 && no_speech_prob > dp->no_speech_threshold;
    if (skip && dp->logprob_threshold != 0 && avg_logprob > dp->logprob_threshold)
        skip = false;
    return skip;
}

static rlx_status decode_with_fallback(decoder *d, window_result *r, rlx_error **err)
{
    const rlx_whisper_decode_params *dp = d->dp;
    float t = dp->temperature < 0 ? 0 : dp->temperature;
    for (;;) {
        rlx_status st = decode_at(d, t, r, err);
        if (st != RLX_OK)
            return st;
        bool fallback =
            rlx_whisper_needs_fallback(dp, r->compression_ratio, r->avg_logprob, r->no_speech_prob);
        float next = t + dp->temperature_inc;
        if (!fallback || dp->no_fallback || dp->temperature_inc <= 0 || next > 1.0f + 1e-6f)
            return RLX_OK;
        t = next;
    }
}

/* ---- the audio: a sliding buffer over a reader, or samples in memory ---- */

typedef struct {
    rlx_audio_reader *reader; /* NULL: mem */
    const float *mem;
    int64_t n_mem;
    float *buf;
    int64_t b0, n, cap; /* buf holds samples [b0, b0 + n) */
    bool eof;
    int64_t total; /* known when eof (or mem) */
} source;

/* Make [from, upto) available (as far as the audio goes). */
static rlx_status source_fill(source *src, int64_t from, int64_t upto, rlx_error **err)
{
    if (!src->reader)
        return RLX_OK;
    if (from > src->b0 + src->n && !src->eof) {
        /* a jump ahead (--offset): seek there instead of buffering the gap */
        rlx_status st = rlx_audio_seek(src->reader, from, err);
        if (st != RLX_OK)
            return st;
        src->b0 = from;
        src->n = 0;
    }
    if (from > src->b0) {
        int64_t drop = from - src->b0;
        if (drop > src->n)
            drop = src->n;
        memmove(src->buf, src->buf + drop, sizeof(float) * (size_t)(src->n - drop));
        src->n -= drop;
        src->b0 += drop;
    }
    int64_t want = upto - src->b0;
    if (want > src->cap) {
        float *nb = realloc(src->buf, sizeof(float) * (size_t)want);
        if (!nb)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the audio window");
        src->buf = nb;
        src->cap = want;
    }
    while (!src->eof && src->n < want) {
        int64_t got = rlx_audio_read(src->reader, src->buf + src->n, want - src->n, err);
        if (got < 0)
            return RLX_ERR_IO;
        if (got == 0) {
            src->eof = true;
            src->total = src->b0 + src->n;
        }
        src->n += got;
    }
    return RLX_OK;
}

/* samples from absolute index `at`, and how many are known from there */
static const float *source_at(const source *src, int64_t at, int64_t *avail)
{
    if (!src->reader) {
        *avail = src->n_mem - at;
        return src->mem + at;
    }
    *avail = src->b0 + src->n - at;
    return src->buf + (at - src->b0);
}

/* openai (and whisper.cpp) normalize the log-mel with the maximum over the
 * whole recording (plus its 30 s of zero padding, whose frames are -10):
 * one pass over the audio finds it, window by window, before decoding. */
static rlx_status mel_max(rlx_whisper *w, source *src, float *mel, float *out, rlx_error **err)
{
    const int NM = w->hp->n_mels, NF = RLX_WHISPER_N_FRAMES, H = RLX_WHISPER_HOP;
    float m = -10.0f; /* a frame of the padding */
    rlx_status st = RLX_OK;
    for (int64_t f0 = 0;; f0 += NF) {
        int64_t s0 = f0 * H - 3 * H;
        if (s0 < 0)
            s0 = 0;
        if ((st = source_fill(src, s0, (f0 + NF) * H + RLX_WHISPER_N_FFT, err)) != RLX_OK)
            return st;
        int64_t total = src->reader ? (src->eof ? src->total : INT64_MAX) : src->n_mem;
        /* the last frame holding any audio: frame t covers [160t - 200, 160t + 200) */
        int64_t last = total == INT64_MAX ? INT64_MAX : (total + 199) / H;
        if (f0 > last)
            break;
        int64_t nf = last - f0 < NF ? last - f0 + 1 : NF, avail = 0; /* no overflow at INT64_MAX */
        const float *a = source_at(src, s0, &avail);
        if ((st = rlx_mel_log(w->mel, a, avail, f0 - s0 / H, nf, mel, err)) != RLX_OK)
            return st;
        for (int64_t i = 0; i < (int64_t)NM * nf; i++)
            m = mel[i] > m ? mel[i] : m;
    }
    *out = m;
    if (src->reader) {
        if ((st = rlx_audio_seek(src->reader, 0, err)) != RLX_OK)
            return st;
        src->b0 = src->n = 0;
        src->eof = false;
    }
    return RLX_OK;
}

/* ---- segments ---- */

static char *tokens_text(rlx_whisper *w, const int32_t *tok, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        size_t l = 0;
        if (tok[i] < w->sp->eot && rlx_whisper_file_token(w->file, tok[i], &l))
            len += l;
    }
    char *s = malloc(len + 1), *p = s;
    if (!s)
        return NULL;
    for (int i = 0; i < n; i++) {
        size_t l = 0;
        const char *t = tok[i] < w->sp->eot ? rlx_whisper_file_token(w->file, tok[i], &l) : NULL;
        if (t) {
            memcpy(p, t, l);
            p += l;
        }
    }
    *p = 0;
    return s;
}

static bool blank_text(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n')
            return false;
    return true;
}

typedef struct {
    rlx_whisper *w;
    rlx_whisper_result *r;
    const rlx_whisper_callbacks *cb;
    int cap, reported;
    bool stop;
} collector;

/* A segment of the window's tokens. openai empties an instantaneous or
 * blank one and leaves its tokens out of the next window's prompt; the
 * others' tokens go to ctx, the previous text (also those of a segment
 * dropped below for starting past the audio, which openai keeps). */
static rlx_status add_segment(collector *c, int64_t t0, int64_t t1, int64_t t_end,
                              const int32_t *tok, const float *p, int n, const window_result *wr,
                              ilist *ctx, rlx_error **err)
{
    char *text = tokens_text(c->w, tok, n);
    if (!text)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    if (blank_text(text) || t1 <= t0) {
        free(text);
        return RLX_OK;
    }
    for (int i = 0; i < n; i++)
        if (!ilist_push(ctx, tok[i])) {
            free(text);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
    /* a timestamp token can name a time past the audio decoded (the window's
     * padding): a segment ends where the audio does, and one that would start
     * there is dropped */
    if (t1 > t_end)
        t1 = t_end;
    if (t0 > t_end)
        t0 = t_end;
    if (t1 <= t0) {
        free(text);
        return RLX_OK;
    }
    rlx_whisper_result *r = c->r;
    if (r->n_segments == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        rlx_whisper_segment *ns = realloc(r->segments, sizeof *ns * (size_t)cap);
        if (!ns) {
            free(text);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
        r->segments = ns;
        c->cap = cap;
    }
    rlx_whisper_segment *s = &r->segments[r->n_segments];
    memset(s, 0, sizeof *s);
    s->index = r->n_segments;
    s->t0_ms = t0;
    s->t1_ms = t1;
    s->text = text;
    s->tokens = malloc(sizeof(rlx_whisper_token) * (size_t)(n > 0 ? n : 1));
    if (!s->tokens) {
        free(text);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    for (int i = 0; i < n; i++)
        s->tokens[i] = (rlx_whisper_token){.id = tok[i], .p = p[i], .t0_ms = -1, .t1_ms = -1};
    s->n_tokens = n;
    s->avg_logprob = (float)wr->avg_logprob;
    s->no_speech_prob = wr->no_speech_prob;
    s->temperature = wr->temperature;
    s->compression_ratio = wr->compression_ratio;
    r->n_segments++;
    return RLX_OK;
}

/* The segments added since the last report, to the callback. */
static void report(collector *c)
{
    for (; c->reported < c->r->n_segments; c->reported++)
        if (c->cb && c->cb->segment && !c->cb->segment(c->cb->user, &c->r->segments[c->reported]))
            c->stop = true;
}

/* ---- the transcription ---- */

static rlx_status set_language(rlx_whisper *w, const rlx_whisper_decode_params *dp,
                               const float *mel, decoder *d, rlx_whisper_result *r,
                               const rlx_whisper_callbacks *cb, rlx_error **err)
{
    const rlx_whisper_special *sp = w->sp;
    const char *lang = dp->language;
    if (!rlx_whisper_file_multilingual(w->file)) {
        if (lang && strcmp(lang, "auto") && strcmp(lang, "en"))
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "this Whisper model is English-only; it cannot transcribe '%s'",
                                 lang);
        snprintf(r->language, sizeof r->language, "en");
        r->language_p = 1;
        d->lang_token = -1;
    } else if (lang && strcmp(lang, "auto")) {
        int i = rlx_whisper_language_find(lang);
        if (i < 0 || i >= sp->n_langs)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "'%s' is not a language this Whisper model knows (use a code "
                                 "such as en, de or ja, or auto)",
                                 lang);
        snprintf(r->language, sizeof r->language, "%s", rlx_whisper_language_code(i));
        r->language_p = 1;
        d->lang_token = sp->lang_first + i;
    } else {
        /* detect: [sot] -> the likeliest language token */
        (void)mel;
        rlx_status st = rlx_whisper_run_decoder(w, 1, (int32_t[]){sp->sot}, 1, 0, w->logits, err);
        if (st != RLX_OK)
            return st;
        float m = -INFINITY;
        int best = 0;
        for (int i = 0; i < sp->n_langs; i++)
            if (w->logits[sp->lang_first + i] > m) {
                m = w->logits[sp->lang_first + i];
                best = i;
            }
        double s = 0;
        for (int i = 0; i < sp->n_langs; i++)
            s += exp((double)w->logits[sp->lang_first + i] - m);
        snprintf(r->language, sizeof r->language, "%s", rlx_whisper_language_code(best));
        r->language_p = (float)(1.0 / s);
        d->lang_token = sp->lang_first + best;
    }
    if (cb && cb->language)
        cb->language(cb->user, r->language, r->language_p);
    return RLX_OK;
}

static void build_initial(decoder *d, const ilist *ctx, int ctx_from)
{
    rlx_whisper *w = d->w;
    const rlx_whisper_special *sp = w->sp;
    int n = 0;
    int have = ctx->n - ctx_from;
    if (have > 0) {
        int keep = w->hp->n_text_ctx / 2 - 1;
        if (have > keep)
            have = keep;
        d->initial[n++] = sp->prev;
        memcpy(d->initial + n, ctx->v + ctx->n - have, sizeof(int32_t) * (size_t)have);
        n += have;
    }
    d->sot_index = n;
    d->initial[n++] = sp->sot;
    if (d->lang_token >= 0) {
        d->initial[n++] = d->lang_token;
        d->initial[n++] = d->dp->translate ? sp->translate : sp->transcribe;
    }
    if (d->dp->no_timestamps)
        d->initial[n++] = sp->no_timestamps;
    d->n_initial = n;
    /* tokens at positions n..n_text_ctx-1 are fed back; one more is sampled
     * from the last position */
    int room = w->hp->n_text_ctx + 1 - n;
    int len = d->dp->max_tokens_per_window > 0 ? d->dp->max_tokens_per_window : 224;
    if (len > w->hp->n_text_ctx / 2)
        len = w->hp->n_text_ctx / 2;
    d->sample_len = len < room ? len : room;
}

static rlx_status transcribe(rlx_whisper *w, source *src, const rlx_whisper_decode_params *dp,
                             const rlx_whisper_callbacks *cb, rlx_whisper_result *r,
                             rlx_error **err)
{
    const rlx_whisper_special *sp = w->sp;
    const int NM = w->hp->n_mels, NF = RLX_WHISPER_N_FRAMES;
    const int tb = sp->timestamp_begin;
    if (dp->beam_size > w->max_beams)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "a beam size of %d is more than this model was loaded for (%d, "
                             "rlx_whisper_params.max_beams)",
                             dp->beam_size, w->max_beams);
    decoder d = {.w = w, .dp = dp, .rng = dp->seed ^ 0x5EEDull, .lang_token = -1};
    float *mel = malloc(sizeof(float) * (size_t)NM * NF);
    d.lp = malloc(sizeof(float) * (size_t)w->hp->n_vocab);
    window_result *wr = malloc(sizeof *wr);
    ilist ctx = {0};
    collector col = {.w = w, .r = r, .cb = cb};
    rlx_status st = RLX_OK;
    if (!mel || !d.lp || !wr) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    if (dp->initial_prompt && dp->initial_prompt[0]) {
        /* openai encodes " " + prompt.strip() */
        const char *p = dp->initial_prompt;
        while (*p == ' ')
            p++;
        size_t l = strlen(p);
        while (l && p[l - 1] == ' ')
            l--;
        char *tmp = malloc(l + 2);
        int32_t *ids = NULL;
        size_t nid = 0;
        if (!tmp) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            goto done;
        }
        tmp[0] = ' ';
        memcpy(tmp + 1, p, l);
        tmp[l + 1] = 0;
        st = rlx_whisper_file_encode(w->file, tmp, l + 1, &ids, &nid, err);
        free(tmp);
        for (size_t i = 0; st == RLX_OK && i < nid; i++)
            if (!ilist_push(&ctx, ids[i]))
                st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        free(ids);
        if (st != RLX_OK)
            goto done;
    }
    int ctx_from = 0;
    int64_t seek =
        dp->offset_ms > 0 ? dp->offset_ms * RLX_WHISPER_SAMPLE_RATE / 1000 / RLX_WHISPER_HOP : 0;
    const int64_t seek0 = seek; /* the timings count the audio from here */
    int64_t seek_end_limit =
        dp->duration_ms > 0
            ? seek + dp->duration_ms * RLX_WHISPER_SAMPLE_RATE / 1000 / RLX_WHISPER_HOP
            : INT64_MAX;
    bool language_set = false;
    double last_speech = 0; /* openai's last_speech_timestamp (word timestamps) */
    float mel_top = 0;
    double tmx = rlx_whisper_now_ms();
    if ((st = mel_max(w, src, mel, &mel_top, err)) != RLX_OK)
        goto done;
    if (w->timing)
        w->timing->mel_ms += rlx_whisper_now_ms() - tmx;
    for (;;) {
        /* the window's samples: from 3 hops before it (so no frame of it
         * sees the buffer's edge) to 200 samples past its end */
        int64_t s0 = seek * RLX_WHISPER_HOP - 3 * RLX_WHISPER_HOP;
        if (s0 < 0)
            s0 = 0;
        int64_t s1 = (seek + NF) * RLX_WHISPER_HOP + RLX_WHISPER_N_FFT;
        double tl = rlx_whisper_now_ms();
        if ((st = source_fill(src, s0, s1, err)) != RLX_OK)
            goto done;
        if (w->timing)
            w->timing->load_ms += rlx_whisper_now_ms() - tl;
        int64_t total = src->reader ? (src->eof ? src->total : INT64_MAX) : src->n_mem;
        int64_t content = total == INT64_MAX ? INT64_MAX : total / RLX_WHISPER_HOP;
        int64_t seek_end = content < seek_end_limit ? content : seek_end_limit;
        if (seek >= seek_end)
            break;
        int64_t avail = 0;
        const float *a = source_at(src, s0, &avail);
        int64_t seg = seek_end - seek < NF ? seek_end - seek : NF;
        if (!language_set && seg < NF && rlx_whisper_file_multilingual(w->file) &&
            (!dp->language || !strcmp(dp->language, "auto"))) {
            /* openai's transcribe() detects the language on pad_or_trim(mel,
             * N_FRAMES) of the whole padded log-mel: past a clip shorter than
             * a window those frames hold the padding's own log-mel, not the
             * zeros the window gets below, so the detection has an encoder
             * run of its own (a window of real audio is the same input) */
            double td = rlx_whisper_now_ms();
            if ((st = rlx_mel_log(w->mel, a, avail, seek - s0 / RLX_WHISPER_HOP, NF, mel, err)) !=
                RLX_OK)
                goto done;
            rlx_mel_normalize_with(mel, (size_t)NM * (size_t)NF, mel_top);
            if (w->timing)
                w->timing->mel_ms += rlx_whisper_now_ms() - td;
            if ((st = rlx_whisper_encode(w, mel, NULL, err)) != RLX_OK)
                goto done;
            if ((st = set_language(w, dp, mel, &d, r, cb, err)) != RLX_OK)
                goto done;
            language_set = true;
        }
        double tm = rlx_whisper_now_ms();
        if ((st = rlx_mel_log(w->mel, a, avail, seek - s0 / RLX_WHISPER_HOP, seg, mel, err)) !=
            RLX_OK)
            goto done;
        rlx_mel_normalize_with(mel, (size_t)NM * (size_t)seg, mel_top);
        /* openai pads a short last window with zeros after normalizing */
        if (seg < NF)
            for (int m = NM - 1; m >= 0; m--) {
                memmove(mel + (size_t)m * NF, mel + (size_t)m * seg, sizeof(float) * (size_t)seg);
                memset(mel + (size_t)m * NF + seg, 0, sizeof(float) * (size_t)(NF - seg));
            }
        if (w->timing)
            w->timing->mel_ms += rlx_whisper_now_ms() - tm;
        if ((st = rlx_whisper_encode(w, mel, NULL, err)) != RLX_OK)
            goto done;
        if (!language_set) {
            if ((st = set_language(w, dp, mel, &d, r, cb, err)) != RLX_OK)
                goto done;
            language_set = true;
        }
        build_initial(&d, &ctx, ctx_from);
        if ((st = decode_with_fallback(&d, wr, err)) != RLX_OK)
            goto done;
        int64_t t_off = seek * RLX_WHISPER_HOP * 1000 / RLX_WHISPER_SAMPLE_RATE;
        int64_t t_end = (seek + seg) * RLX_WHISPER_HOP * 1000 / RLX_WHISPER_SAMPLE_RATE;
        int first_new = r->n_segments;
        bool single_end = false;
        if (rlx_whisper_should_skip(dp, wr->avg_logprob, wr->no_speech_prob)) {
            seek += seg;
        } else {
            const int32_t *t = wr->tokens;
            int n = wr->n;
            single_end = n >= 2 && t[n - 2] < tb && t[n - 1] >= tb;
            int slices[MAX_TOK + 1], ns = 0;
            for (int i = 1; i < n; i++)
                if (t[i] >= tb && t[i - 1] >= tb)
                    slices[ns++] = i;
            if (ns > 0) {
                if (single_end)
                    slices[ns++] = n;
                int last = 0;
                for (int k = 0; k < ns && !col.stop; k++) {
                    int cur = slices[k];
                    int64_t a0 = (t[last] - tb) * 20, a1 = (t[cur - 1] - tb) * 20;
                    if ((st = add_segment(&col, t_off + a0, t_off + a1, t_end, t + last,
                                          wr->p + last, cur - last, wr, &ctx, err)) != RLX_OK)
                        goto done;
                    last = cur;
                }
                if (single_end)
                    seek += seg;
                else
                    seek += (int64_t)(t[last - 1] - tb) * 2;
            } else {
                int64_t dur = seg * RLX_WHISPER_HOP * 1000 / RLX_WHISPER_SAMPLE_RATE;
                int last_ts = -1;
                for (int i = 0; i < n; i++)
                    if (t[i] >= tb)
                        last_ts = t[i];
                if (last_ts >= 0 && last_ts != tb)
                    dur = (int64_t)(last_ts - tb) * 20;
                if ((st = add_segment(&col, t_off, t_off + dur, t_end, t, wr->p, n, wr, &ctx,
                                      err)) != RLX_OK)
                    goto done;
                seek += seg;
            }
            if (!dp->condition_on_previous_text || wr->temperature > 0.5f)
                ctx_from = ctx.n;
        }
        if (dp->word_timestamps && r->n_segments > first_new &&
            (st = rlx_whisper_add_words(w, d.initial + d.sot_index, d.lang_token >= 0 ? 3 : 1,
                                        r->segments + first_new, r->n_segments - first_new, seg,
                                        t_off, &last_speech, err)) != RLX_OK)
            goto done;
        if (dp->word_timestamps && r->n_segments > first_new) {
            /* openai: with word timestamps the next window starts at the last
             * word's end (unless the window ended on a lone timestamp) */
            int64_t end_ms = -1;
            for (int k = r->n_segments - 1; k >= first_new && end_ms < 0; k--)
                if (r->segments[k].n_words > 0)
                    end_ms = r->segments[k].words[r->segments[k].n_words - 1].t1_ms;
            if (end_ms < 0)
                end_ms = r->segments[r->n_segments - 1].t1_ms;
            if (!single_end && end_ms > t_off)
                seek = (end_ms + 5) / 10; /* 100 frames a second */
            last_speech = end_ms / 1000.0;
        }
        report(&col);
        double done_s =
            (double)(seek < seek_end ? seek : seek_end) * RLX_WHISPER_HOP / RLX_WHISPER_SAMPLE_RATE;
        r->timings.audio_s = done_s - (double)seek0 * RLX_WHISPER_HOP / RLX_WHISPER_SAMPLE_RATE;
        if (cb && cb->progress) {
            int64_t est = src->reader
                              ? (src->eof ? src->total : rlx_audio_reader_length(src->reader))
                              : src->n_mem;
            if (!cb->progress(cb->user, done_s, (double)est / RLX_WHISPER_SAMPLE_RATE))
                col.stop = true;
        }
        if (col.stop || cancelled(w)) {
            st = rlx_error_set(err, RLX_ERR_CANCELLED, "the transcription was stopped");
            r->cancelled = true;
            goto done;
        }
    }
done:
    if (st == RLX_ERR_CANCELLED && !r->cancelled) {
        r->cancelled = true;
        if (err && !*err)
            rlx_error_set(err, RLX_ERR_CANCELLED, "the transcription was stopped");
    }
    free(mel);
    free(d.lp);
    free(wr);
    free(ctx.v);
    return st;
}

static rlx_status run_transcription(rlx_whisper *w, source *src,
                                    const rlx_whisper_decode_params *dp,
                                    const rlx_whisper_callbacks *cb, rlx_whisper_result **out,
                                    rlx_error **err)
{
    rlx_whisper_decode_params def = rlx_whisper_decode_default_params();
    if (!dp)
        dp = &def;
    rlx_whisper_result *r = calloc(1, sizeof *r);
    if (!r)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    __atomic_store_n(&w->cancel, 0, __ATOMIC_RELAXED);
    double t0 = rlx_whisper_now_ms();
    w->timing = &r->timings;
    rlx_status st = transcribe(w, src, dp, cb, r, err);
    w->timing = NULL;
    r->timings.total_ms = rlx_whisper_now_ms() - t0;
    __atomic_store_n(&w->cancel, 0, __ATOMIC_RELAXED);
    if (st != RLX_OK && st != RLX_ERR_CANCELLED) {
        rlx_whisper_result_free(r);
        return st;
    }
    *out = r;
    return st;
}

rlx_status rlx_whisper_transcribe(rlx_whisper *w, const float *samples, int64_t n,
                                  const rlx_whisper_decode_params *dp,
                                  const rlx_whisper_callbacks *cb, rlx_whisper_result **out,
                                  rlx_error **err)
{
    *out = NULL;
    if (!samples || n <= 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "there is no audio to transcribe");
    source src = {.mem = samples, .n_mem = n, .eof = true, .total = n};
    return run_transcription(w, &src, dp, cb, out, err);
}

rlx_status rlx_whisper_transcribe_file(rlx_whisper *w, const char *path,
                                       const rlx_whisper_decode_params *dp,
                                       const rlx_whisper_callbacks *cb, rlx_whisper_result **out,
                                       rlx_error **err)
{
    *out = NULL;
    source src = {0};
    rlx_status st = rlx_audio_open(path, RLX_WHISPER_SAMPLE_RATE, &src.reader, err);
    if (st != RLX_OK)
        return st;
    /* check there is audio before anything runs */
    if ((st = source_fill(&src, 0, RLX_WHISPER_HOP, err)) == RLX_OK && src.n == 0)
        st = rlx_error_set(err, RLX_ERR_FORMAT, "%s holds no audio samples", path);
    if (st == RLX_OK)
        st = run_transcription(w, &src, dp, cb, out, err);
    rlx_audio_close(src.reader);
    free(src.buf);
    return st;
}

rlx_status rlx_whisper_decode_window(rlx_whisper *w, const rlx_whisper_decode_params *dp,
                                     int32_t *tokens, int32_t cap, int32_t *n, float *avg_logprob,
                                     float *no_speech_prob, rlx_error **err)
{
    *n = 0;
    rlx_whisper_decode_params def = rlx_whisper_decode_default_params();
    if (!dp)
        dp = &def;
    if (dp->beam_size > w->max_beams)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "a beam size of %d is more than this model was loaded for (%d, "
                             "rlx_whisper_params.max_beams)",
                             dp->beam_size, w->max_beams);
    decoder d = {.w = w, .dp = dp, .rng = dp->seed ^ 0x5EEDull, .lang_token = -1};
    d.lp = malloc(sizeof(float) * (size_t)w->hp->n_vocab);
    window_result *wr = malloc(sizeof *wr);
    rlx_whisper_result *r = calloc(1, sizeof *r);
    ilist ctx = {0};
    rlx_status st = RLX_OK;
    if (!d.lp || !wr || !r)
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    if (st == RLX_OK)
        st = set_language(w, dp, NULL, &d, r, NULL, err);
    if (st == RLX_OK) {
        build_initial(&d, &ctx, 0);
        st = decode_at(&d, dp->temperature, wr, err);
    }
    if (st == RLX_OK) {
        int k = wr->n < cap ? wr->n : cap;
        memcpy(tokens, wr->tokens, sizeof(int32_t) * (size_t)k);
        *n = k;
        if (avg_logprob)
            *avg_logprob = (float)wr->avg_logprob;
        if (no_speech_prob)
            *no_speech_prob = wr->no_speech_prob;
    }
    free(d.lp);
    free(wr);
    free(r);
    return st;
}

void rlx_whisper_result_free(rlx_whisper_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_segments; i++) {
        rlx_whisper_segment *s = &r->segments[i];
        free(s->text);
        free(s->tokens);
        for (int k = 0; k < s->n_words; k++)
            free(s->words[k].text);
        free(s->words);
    }
    free(r->segments);
    free(r);
}

rlx_status rlx_whisper_detect_language(rlx_whisper *w, const float *samples, int64_t n,
                                       float *probs, int32_t cap, int32_t *n_probs, rlx_error **err)
{
    *n_probs = 0;
    if (!rlx_whisper_file_multilingual(w->file))
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "this Whisper model is English-only and detects no language");
    if (!samples || n <= 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "there is no audio to listen to");
    const int NM = w->hp->n_mels, NF = RLX_WHISPER_N_FRAMES;
    float *mel = malloc(sizeof(float) * (size_t)NM * NF);
    if (!mel)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    rlx_status st = rlx_whisper_mel(w, samples, n, 0, mel, err);
    if (st == RLX_OK)
        st = rlx_whisper_encode(w, mel, NULL, err);
    free(mel);
    if (st == RLX_OK)
        st = rlx_whisper_run_decoder(w, 1, (int32_t[]){w->sp->sot}, 1, 0, w->logits, err);
    if (st != RLX_OK)
        return st;
    const rlx_whisper_special *sp = w->sp;
    float m = -INFINITY;
    for (int i = 0; i < sp->n_langs; i++)
        m = w->logits[sp->lang_first + i] > m ? w->logits[sp->lang_first + i] : m;
    double s = 0;
    for (int i = 0; i < sp->n_langs; i++)
        s += exp((double)w->logits[sp->lang_first + i] - m);
    int32_t k = sp->n_langs < cap ? sp->n_langs : cap;
    for (int i = 0; i < k; i++)
        probs[i] = (float)(exp((double)w->logits[sp->lang_first + i] - m) / s);
    *n_probs = k;
    return RLX_OK;
}
