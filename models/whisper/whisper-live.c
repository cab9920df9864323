/* Live transcription: re-decode the unsettled audio every few seconds and
 * hand out the segments that can no longer change (whisper-live.h). */
#include <stdlib.h>
#include <string.h>

#include "models/whisper/whisper-live-internal.h"

#define SR      RLX_WHISPER_SAMPLE_RATE
#define MS(n)   ((n)*1000 / SR)
#define CTX_CAP 600 /* bytes of settled text kept as the next prompt (~150 tokens) */

struct rlx_whisper_live {
    rlx_whisper_live_decode_fn decode;
    void *decode_user;
    rlx_whisper_decode_params dp;
    rlx_whisper_live_params lp;
    rlx_whisper_callbacks cb;
    bool has_cb;
    float *buf; /* samples [base, base + n) of the recording */
    int64_t base, n, cap;
    int64_t since;   /* samples pushed since the last decode */
    int64_t last_t1; /* ms: the end of the last settled segment */
    char lang[16];   /* kept once detected */
    char ctx[CTX_CAP + 1];
    rlx_whisper_result res;
    int seg_cap;
};

rlx_whisper_live_params rlx_whisper_live_default_params(void)
{
    return (rlx_whisper_live_params){.step_s = 3.0, .settle_s = 2.0, .max_window_s = 24.0};
}

static rlx_status decode_runner(void *user, const float *x, int64_t n,
                                const rlx_whisper_decode_params *dp, rlx_whisper_result **out,
                                rlx_error **err)
{
    return rlx_whisper_transcribe(user, x, n, dp, NULL, out, err);
}

rlx_status rlx_whisper_live_create_with(rlx_whisper_live_decode_fn decode, void *decode_user,
                                        const rlx_whisper_decode_params *dp,
                                        const rlx_whisper_live_params *lp,
                                        const rlx_whisper_callbacks *cb, rlx_whisper_live **out,
                                        rlx_error **err)
{
    *out = NULL;
    rlx_whisper_live_params def = rlx_whisper_live_default_params();
    if (!lp)
        lp = &def;
    if (!decode)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "live transcription needs a model");
    if (!(lp->step_s > 0) || !(lp->settle_s > 0) ||
        !(lp->max_window_s > lp->settle_s + lp->step_s) || lp->max_window_s > 30)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "live transcription: the step (%g s) and settle time (%g s) must be "
                             "above 0 and their sum below the longest window (%g s, at most 30)",
                             lp->step_s, lp->settle_s, lp->max_window_s);
    rlx_whisper_live *l = calloc(1, sizeof *l);
    if (!l)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    l->decode = decode;
    l->decode_user = decode_user;
    l->dp = dp ? *dp : rlx_whisper_decode_default_params();
    l->dp.offset_ms = 0;
    l->dp.duration_ms = 0;
    l->lp = *lp;
    if (cb) {
        l->cb = *cb;
        l->has_cb = true;
    }
    if (l->dp.initial_prompt)
        snprintf(l->ctx, sizeof l->ctx, "%s", l->dp.initial_prompt);
    *out = l;
    return RLX_OK;
}

rlx_status rlx_whisper_live_create(rlx_whisper *w, const rlx_whisper_decode_params *dp,
                                   const rlx_whisper_live_params *lp,
                                   const rlx_whisper_callbacks *cb, rlx_whisper_live **out,
                                   rlx_error **err)
{
    *out = NULL;
    if (!w)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "live transcription needs a model");
    return rlx_whisper_live_create_with(decode_runner, w, dp, lp, cb, out, err);
}

void rlx_whisper_live_free(rlx_whisper_live *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->res.n_segments; i++) {
        rlx_whisper_segment *s = &l->res.segments[i];
        free(s->text);
        free(s->tokens);
        for (int k = 0; k < s->n_words; k++)
            free(s->words[k].text);
        free(s->words);
    }
    free(l->res.segments);
    free(l->buf);
    free(l);
}

const rlx_whisper_result *rlx_whisper_live_result(const rlx_whisper_live *l)
{
    return &l->res;
}

double rlx_whisper_live_pending_s(const rlx_whisper_live *l)
{
    return (double)l->n / SR;
}

/* Drop the first k kept samples: the settled point moves on. */
static void drop(rlx_whisper_live *l, int64_t k)
{
    if (k > l->n)
        k = l->n;
    if (k <= 0)
        return;
    memmove(l->buf, l->buf + k, sizeof(float) * (size_t)(l->n - k));
    l->n -= k;
    l->base += k;
}

/* The settled text as the next prompt: its last CTX_CAP bytes, from a space
 * (so no word and no UTF-8 sequence is cut). */
static void add_context(rlx_whisper_live *l, const char *text)
{
    size_t have = strlen(l->ctx), add = strlen(text);
    if (have + add > CTX_CAP) {
        char tmp[2 * CTX_CAP + 2];
        snprintf(tmp, sizeof tmp, "%s%s", l->ctx, add > CTX_CAP ? text + add - CTX_CAP : text);
        const char *p = tmp + strlen(tmp) - CTX_CAP;
        const char *sp = strchr(p, ' ');
        p = sp ? sp : p;
        while ((unsigned char)*p >= 0x80 && (((unsigned char)*p) & 0xC0) == 0x80)
            p++;
        memmove(l->ctx, p, strlen(p) + 1);
    } else {
        memcpy(l->ctx + have, text, add + 1);
    }
}

/* A deep copy of s into the result with recording times [t0, t1]. */
static rlx_status settle(rlx_whisper_live *l, const rlx_whisper_segment *s, int64_t t0, int64_t t1,
                         bool *go_on, rlx_error **err)
{
    rlx_whisper_result *r = &l->res;
    if (r->n_segments == l->seg_cap) {
        int cap = l->seg_cap ? 2 * l->seg_cap : 16;
        rlx_whisper_segment *ns = realloc(r->segments, sizeof *ns * (size_t)cap);
        if (!ns)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        r->segments = ns;
        l->seg_cap = cap;
    }
    rlx_whisper_segment c = *s;
    c.index = r->n_segments;
    c.t0_ms = t0;
    c.t1_ms = t1;
    c.text = strdup(s->text ? s->text : "");
    c.tokens = malloc(sizeof *c.tokens * (size_t)(s->n_tokens > 0 ? s->n_tokens : 1));
    c.words = s->n_words > 0 ? calloc((size_t)s->n_words, sizeof *c.words) : NULL;
    bool ok = c.text && c.tokens && (s->n_words <= 0 || c.words);
    for (int k = 0; ok && k < s->n_words; k++) {
        c.words[k] = s->words[k];
        c.words[k].text = strdup(s->words[k].text ? s->words[k].text : "");
        ok = c.words[k].text != NULL;
        /* word times shift with the segment's */
        c.words[k].t0_ms += t0 - s->t0_ms;
        c.words[k].t1_ms += t0 - s->t0_ms;
    }
    if (!ok) {
        for (int k = 0; c.words && k < s->n_words; k++)
            free(c.words[k].text);
        free(c.words);
        free(c.tokens);
        free(c.text);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    if (s->n_tokens > 0)
        memcpy(c.tokens, s->tokens, sizeof *c.tokens * (size_t)s->n_tokens);
    for (int k = 0; k < s->n_tokens; k++)
        if (c.tokens[k].t0_ms >= 0) {
            c.tokens[k].t0_ms += t0 - s->t0_ms;
            c.tokens[k].t1_ms += t0 - s->t0_ms;
        }
    c.n_words = s->n_words > 0 ? s->n_words : 0;
    r->segments[r->n_segments++] = c;
    l->last_t1 = t1;
    if (l->dp.condition_on_previous_text)
        add_context(l, c.text);
    if (l->has_cb && l->cb.segment && !l->cb.segment(l->cb.user, &r->segments[r->n_segments - 1]))
        *go_on = false;
    return RLX_OK;
}

static void add_timings(rlx_whisper_timings *a, const rlx_whisper_timings *b)
{
    a->load_ms += b->load_ms;
    a->mel_ms += b->mel_ms;
    a->encode_ms += b->encode_ms;
    a->n_windows += b->n_windows;
    a->decode_ms += b->decode_ms;
    a->n_decode_tokens += b->n_decode_tokens;
    a->total_ms += b->total_ms;
}

/* Transcribe the kept audio, settle what can no longer change (all of it when
 * final) and move the settled point. */
static rlx_status decode_pending(rlx_whisper_live *l, bool final, rlx_error **err)
{
    l->since = 0;
    /* less than one mel frame (10 ms) holds nothing to transcribe */
    if (l->n < RLX_WHISPER_HOP) {
        if (final)
            drop(l, l->n);
        return RLX_OK;
    }
    rlx_whisper_decode_params dp = l->dp;
    if (l->lang[0])
        dp.language = l->lang;
    dp.initial_prompt = l->ctx[0] ? l->ctx : NULL;
    rlx_whisper_result *r = NULL;
    rlx_status st = l->decode(l->decode_user, l->buf, l->n, &dp, &r, err);
    if (st != RLX_OK) {
        /* a cancelled decode settles nothing: its audio is decoded again later */
        if (r)
            rlx_whisper_result_free(r);
        return st;
    }
    add_timings(&l->res.timings, &r->timings);
    const int64_t base_ms = MS(l->base), end_ms = MS(l->base + l->n);
    const int64_t settle_ms = (int64_t)(l->lp.settle_s * 1000);
    int n_settle = 0;
    if (final) {
        n_settle = r->n_segments;
    } else {
        for (int i = 0; i < r->n_segments; i++) {
            if (base_ms + r->segments[i].t1_ms > end_ms - settle_ms)
                break;
            n_settle = i + 1;
        }
        /* at the longest window, settle all but the last segment anyway */
        if (n_settle == 0 && l->n >= (int64_t)(l->lp.max_window_s * SR) && r->n_segments > 0)
            n_settle = r->n_segments > 1 ? r->n_segments - 1 : 1;
    }
    if (n_settle > 0 && !l->lang[0] && r->language[0] &&
        (!l->dp.language || !strcmp(l->dp.language, "auto"))) {
        snprintf(l->lang, sizeof l->lang, "%s", r->language);
        snprintf(l->res.language, sizeof l->res.language, "%s", r->language);
        l->res.language_p = r->language_p;
        if (l->has_cb && l->cb.language)
            l->cb.language(l->cb.user, r->language, r->language_p);
    } else if (n_settle > 0 && !l->res.language[0]) {
        snprintf(l->res.language, sizeof l->res.language, "%s", r->language);
        l->res.language_p = r->language_p;
        if (l->has_cb && l->cb.language)
            l->cb.language(l->cb.user, r->language, r->language_p);
    }
    bool go_on = true;
    int64_t cut_ms = -1; /* the recording time the kept audio starts from next */
    for (int i = 0; i < n_settle && go_on && st == RLX_OK; i++) {
        const rlx_whisper_segment *s = &r->segments[i];
        /* recording times, never before the last settled end, never past the audio */
        int64_t t0 = base_ms + s->t0_ms, t1 = base_ms + s->t1_ms;
        if (t0 < l->last_t1)
            t0 = l->last_t1;
        if (t1 > end_ms)
            t1 = end_ms;
        if (t1 < t0)
            t1 = t0;
        if (t0 > t1)
            t0 = t1;
        st = settle(l, s, t0, t1, &go_on, err);
        cut_ms = t1;
    }
    int64_t cut;
    if (final && go_on)
        cut = l->n;
    else if (cut_ms >= 0)
        cut = (cut_ms - base_ms) * SR / 1000;
    else if (r->n_segments == 0 && l->n > (int64_t)(l->lp.settle_s * SR))
        /* no speech in the older audio: keep the last settle_s only, from a whole ms */
        cut = (l->n - (int64_t)(l->lp.settle_s * SR)) / (SR / 1000) * (SR / 1000);
    else
        cut = 0;
    drop(l, cut);
    /* never let the kept audio outgrow a window, whatever the decoder said */
    int64_t max_n = (int64_t)(l->lp.max_window_s * SR);
    if (l->n > max_n)
        drop(l, (l->n - max_n) / (SR / 1000) * (SR / 1000) + SR / 1000);
    if (MS(l->base) > l->last_t1 && l->res.n_segments > 0)
        l->last_t1 = MS(l->base);
    rlx_whisper_result_free(r);
    if (st == RLX_OK && !go_on)
        st = rlx_error_set(err, RLX_ERR_CANCELLED, "the transcription was stopped");
    return st;
}

rlx_status rlx_whisper_live_push(rlx_whisper_live *l, const float *samples, size_t n,
                                 rlx_error **err)
{
    if (n == 0)
        return RLX_OK;
    if (!samples)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no samples to push");
    if (l->n + (int64_t)n > l->cap) {
        int64_t cap = l->cap ? l->cap : SR * 8;
        while (cap < l->n + (int64_t)n)
            cap *= 2;
        float *nb = realloc(l->buf, sizeof(float) * (size_t)cap);
        if (!nb)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the live audio");
        l->buf = nb;
        l->cap = cap;
    }
    memcpy(l->buf + l->n, samples, sizeof(float) * n);
    l->n += (int64_t)n;
    l->since += (int64_t)n;
    l->res.timings.audio_s = (double)(l->base + l->n) / SR;
    if (l->since < (int64_t)(l->lp.step_s * SR))
        return RLX_OK;
    return decode_pending(l, false, err);
}

rlx_status rlx_whisper_live_flush(rlx_whisper_live *l, rlx_error **err)
{
    return decode_pending(l, true, err);
}
