/* The live loop (models/whisper/whisper-live.h).
 *
 * With a scripted decoder: the "recording" has segments at known times; the
 * stand-in decoder reports those that overlap the audio it is given (the
 * last one cut at the audio's end, as Whisper ends a segment where speech is
 * cut), so the settling rules can be checked exactly: every segment comes out
 * once, in order, only once it ends settle_s before the audio captured, and
 * the flush gives the rest; silence does not make the kept audio grow; a
 * cancelled decode settles nothing; the longest window forces settling.
 *
 * With the random-weight whisper-tiny (tests/whisper-writer.h): jfk.wav
 * pushed in 0.1-s chunks as a capture delivers them. The text is noise, so
 * the checks are structural: indices 0..n-1 in order, once each, times non-
 * decreasing and inside the audio, the callback's segments are the result's,
 * and after the flush nothing is pending.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/audio/audio.h"
#include "models/whisper/whisper-live-internal.h"
#include "models/whisper/whisper-live.h"
#include "test-util.h"
#include "whisper-writer.h"

#define SR 16000

/* ---- the scripted decoder ---- */

typedef struct {
    int64_t t0, t1; /* ms in the recording */
} span;

typedef struct {
    const span *script;
    int n_script;
    int calls;
    bool cancel_next;     /* the next decode returns RLX_ERR_CANCELLED */
    int64_t max_window_n; /* the most samples one decode was given */
} fake;

/* Sample i of the recording holds i / 2^20 (exact in float32 below 2^24 samples:
 * 17 minutes), so the decoder knows where its audio starts. */
static float stamp(int64_t i)
{
    return (float)i / 1048576.0f;
}

static rlx_status fake_decode(void *user, const float *x, int64_t n,
                              const rlx_whisper_decode_params *dp, rlx_whisper_result **out,
                              rlx_error **err)
{
    (void)dp;
    fake *f = user;
    f->calls++;
    if (n > f->max_window_n)
        f->max_window_n = n;
    if (f->cancel_next) {
        f->cancel_next = false;
        return rlx_error_set(err, RLX_ERR_CANCELLED, "the transcription was stopped");
    }
    int64_t base = (int64_t)((double)x[0] * 1048576.0 + 0.5);
    int64_t b_ms = base * 1000 / SR, e_ms = (base + n) * 1000 / SR;
    rlx_whisper_result *r = calloc(1, sizeof *r);
    r->segments = calloc((size_t)f->n_script + 1, sizeof *r->segments);
    snprintf(r->language, sizeof r->language, "en");
    r->language_p = 1;
    for (int i = 0; i < f->n_script; i++) {
        span s = f->script[i];
        if (s.t1 <= b_ms || s.t0 >= e_ms)
            continue;
        if (s.t0 < b_ms)
            s.t0 = b_ms;
        if (s.t1 > e_ms)
            s.t1 = e_ms; /* speech cut by the end of the audio */
        rlx_whisper_segment *g = &r->segments[r->n_segments];
        g->index = r->n_segments;
        g->t0_ms = s.t0 - b_ms;
        g->t1_ms = s.t1 - b_ms;
        char buf[32];
        snprintf(buf, sizeof buf, " seg%d", i);
        g->text = strdup(buf);
        g->tokens = malloc(sizeof *g->tokens);
        g->tokens[0] = (rlx_whisper_token){.id = i, .p = 0.5f, .t0_ms = -1, .t1_ms = -1};
        g->n_tokens = 1;
        r->n_segments++;
    }
    *out = r;
    return RLX_OK;
}

typedef struct {
    int n;
    int64_t t0[64], t1[64];
    char text[64][512];
    int64_t audio_at[64]; /* samples pushed when it came out */
    int64_t *pushed;
    int stop_after; /* return false from this segment's callback (0: never) */
} seen;

static bool on_segment(void *user, const rlx_whisper_segment *s)
{
    seen *v = user;
    assert_int_equal(s->index, v->n);
    if (v->n < 64) {
        v->t0[v->n] = s->t0_ms;
        v->t1[v->n] = s->t1_ms;
        snprintf(v->text[v->n], sizeof v->text[v->n], "%s", s->text);
        v->audio_at[v->n] = *v->pushed;
    }
    v->n++;
    return v->stop_after == 0 || v->n < v->stop_after;
}

/* Push [from, to) samples of the stamped recording in chunks of `chunk`. */
static rlx_status push_range(rlx_whisper_live *l, int64_t from, int64_t to, int chunk,
                             int64_t *pushed, rlx_error **err)
{
    float *x = malloc(sizeof(float) * (size_t)chunk);
    rlx_status st = RLX_OK;
    for (int64_t i = from; i < to && st == RLX_OK;) {
        int64_t k = to - i < chunk ? to - i : chunk;
        for (int64_t j = 0; j < k; j++)
            x[j] = stamp(i + j);
        *pushed = i + k;
        st = rlx_whisper_live_push(l, x, (size_t)k, err);
        i += k;
    }
    free(x);
    return st;
}

static const span speech[] = {
    {0, 1500}, {1500, 4000}, {4200, 7200}, {7300, 10000}, {10500, 12600},
};

static void test_settle_in_order(void **state)
{
    (void)state;
    fake f = {.script = speech, .n_script = 5};
    int64_t pushed = 0;
    seen v = {.pushed = &pushed};
    rlx_whisper_callbacks cb = {.segment = on_segment, .user = &v};
    rlx_whisper_live *l = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_whisper_live_create_with(fake_decode, &f, NULL, NULL, &cb, &l, &err),
                     RLX_OK);
    /* 12.6 s in 0.1-s chunks: decodes at 3, 6, 9, 12 s */
    assert_int_equal(push_range(l, 0, 12600 * 16, 1600, &pushed, &err), RLX_OK);
    assert_int_equal(f.calls, 4);
    int before_flush = v.n;
    /* at 12 s, segments ending by 10 s have settled: the first four */
    assert_int_equal(before_flush, 4);
    for (int i = 0; i < before_flush; i++) {
        /* settled only once it ended 2 s before the audio captured */
        assert_true(v.t1[i] * 16 <= v.audio_at[i] - 2 * SR);
    }
    assert_true(rlx_whisper_live_pending_s(l) < 3.0);
    assert_int_equal(rlx_whisper_live_flush(l, &err), RLX_OK);
    assert_int_equal(v.n, 5);
    assert_float_equal(rlx_whisper_live_pending_s(l), 0, 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(v.t0[i], speech[i].t0);
        assert_int_equal(v.t1[i], speech[i].t1);
        char want[32];
        snprintf(want, sizeof want, " seg%d", i);
        assert_string_equal(v.text[i], want);
    }
    const rlx_whisper_result *r = rlx_whisper_live_result(l);
    assert_int_equal(r->n_segments, 5);
    assert_string_equal(r->language, "en");
    assert_float_equal(r->timings.audio_s, 12.6, 1e-9);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(r->segments[i].index, i);
        assert_int_equal(r->segments[i].t0_ms, speech[i].t0);
    }
    /* a flush with nothing new settles nothing more */
    assert_int_equal(rlx_whisper_live_flush(l, &err), RLX_OK);
    assert_int_equal(v.n, 5);
    rlx_whisper_live_free(l);
}

/* Chunks of odd sizes, one of them longer than a step: the same segments. */
static void test_odd_chunks(void **state)
{
    (void)state;
    fake f = {.script = speech, .n_script = 5};
    int64_t pushed = 0;
    seen v = {.pushed = &pushed};
    rlx_whisper_callbacks cb = {.segment = on_segment, .user = &v};
    rlx_whisper_live *l = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_whisper_live_create_with(fake_decode, &f, NULL, NULL, &cb, &l, &err),
                     RLX_OK);
    assert_int_equal(push_range(l, 0, 5 * SR, 777, &pushed, &err), RLX_OK);
    assert_int_equal(push_range(l, 5 * SR, 12600 * 16, 4 * SR + 13, &pushed, &err), RLX_OK);
    assert_int_equal(rlx_whisper_live_flush(l, &err), RLX_OK);
    assert_int_equal(v.n, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(v.t0[i], speech[i].t0);
        assert_int_equal(v.t1[i], speech[i].t1);
    }
    rlx_whisper_live_free(l);
}

/* A minute of silence keeps only the last settle_s (+ a step) of audio. */
static void test_silence_bounded(void **state)
{
    (void)state;
    fake f = {.script = NULL, .n_script = 0};
    int64_t pushed = 0;
    seen v = {.pushed = &pushed};
    rlx_whisper_callbacks cb = {.segment = on_segment, .user = &v};
    rlx_whisper_live *l = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_whisper_live_create_with(fake_decode, &f, NULL, NULL, &cb, &l, &err),
                     RLX_OK);
    assert_int_equal(push_range(l, 0, 60 * SR, 1600, &pushed, &err), RLX_OK);
    assert_int_equal(v.n, 0);
    assert_true(f.max_window_n <= 5 * SR + 1600);
    assert_true(rlx_whisper_live_pending_s(l) <= 5.0);
    assert_int_equal(rlx_whisper_live_flush(l, &err), RLX_OK);
    assert_int_equal(v.n, 0);
    assert_int_equal(rlx_whisper_live_result(l)->n_segments, 0);
    rlx_whisper_live_free(l);
}

/* One segment that never ends: at the longest window it settles anyway, and
 * no decode is given much more than that window. */
static void test_longest_window(void **state)
{
    (void)state;
    static const span talk[] = {{0, 100000}};
    fake f = {.script = talk, .n_script = 1};
    int64_t pushed = 0;
    seen v = {.pushed = &pushed};
    rlx_whisper_callbacks cb = {.segment = on_segment, .user = &v};
    rlx_whisper_live_params lp = rlx_whisper_live_default_params();
    rlx_whisper_live *l = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_whisper_live_create_with(fake_decode, &f, NULL, &lp, &cb, &l, &err),
                     RLX_OK);
    assert_int_equal(push_range(l, 0, 60 * SR, 1600, &pushed, &err), RLX_OK);
    assert_true(v.n >= 1);
    assert_true(f.max_window_n <= (int64_t)((lp.max_window_s + lp.step_s) * SR));
    for (int i = 1; i < v.n && i < 64; i++)
        assert_true(v.t0[i] >= v.t1[i - 1]);
    assert_int_equal(rlx_whisper_live_flush(l, &err), RLX_OK);
    assert_int_equal(v.t1[v.n - 1], 60000);
    rlx_whisper_live_free(l);
}

/* A cancelled decode settles nothing; the next one decodes that audio again. */
static void test_cancel(void **state)
{
    (void)state;
    fake f = {.script = speech, .n_script = 5};
    int64_t pushed = 0;
    seen v = {.pushed = &pushed};
    rlx_whisper_callbacks cb = {.segment = on_segment, .user = &v};
    rlx_whisper_live *l = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_whisper_live_create_with(fake_decode, &f, NULL, NULL, &cb, &l, &err),
                     RLX_OK);
    assert_int_equal(push_range(l, 0, 6 * SR - 1, 1600, &pushed, &err), RLX_OK);
    int n = v.n;
    f.cancel_next = true;
    assert_int_equal(push_range(l, 6 * SR - 1, 6 * SR, 1, &pushed, &err), RLX_ERR_CANCELLED);
    rlx_error_free(err);
    err = NULL;
    assert_int_equal(v.n, n);
    assert_int_equal(rlx_whisper_live_flush(l, &err), RLX_OK);
    /* 6 s: segments 0..2 (the third cut at 6 s) */
    assert_int_equal(v.n, 3);
    assert_int_equal(v.t1[2], 6000);
    rlx_whisper_live_free(l);
}

/* A callback returning false stops after that segment. */
static void test_callback_stops(void **state)
{
    (void)state;
    fake f = {.script = speech, .n_script = 5};
    int64_t pushed = 0;
    seen v = {.pushed = &pushed, .stop_after = 2};
    rlx_whisper_callbacks cb = {.segment = on_segment, .user = &v};
    rlx_whisper_live *l = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_whisper_live_create_with(fake_decode, &f, NULL, NULL, &cb, &l, &err),
                     RLX_OK);
    /* the decode at 6 s settles segments 0 and 1; the second callback says stop */
    assert_int_equal(push_range(l, 0, 9 * SR, 1600, &pushed, &err), RLX_ERR_CANCELLED);
    rlx_error_free(err);
    err = NULL;
    assert_int_equal(v.n, 2);
    assert_int_equal(pushed, 6 * SR);
    v.stop_after = 0;
    assert_int_equal(rlx_whisper_live_flush(l, &err), RLX_OK);
    /* the rest from where it stopped: segment 2 (cut at 6 s), none twice */
    assert_int_equal(v.n, 3);
    assert_int_equal(v.t0[2], speech[2].t0);
    assert_int_equal(v.t1[2], 6000);
    rlx_whisper_live_free(l);
}

static void test_bad_params(void **state)
{
    (void)state;
    rlx_whisper_live_params lp = rlx_whisper_live_default_params();
    rlx_whisper_live *l = (rlx_whisper_live *)1;
    rlx_error *err = NULL;
    lp.step_s = 0;
    assert_int_equal(rlx_whisper_live_create_with(fake_decode, NULL, NULL, &lp, NULL, &l, &err),
                     RLX_ERR_INVALID_ARG);
    assert_null(l);
    assert_non_null(strstr(rlx_error_message(err), "step"));
    rlx_error_free(err);
    err = NULL;
    lp = rlx_whisper_live_default_params();
    lp.max_window_s = 40;
    assert_int_equal(rlx_whisper_live_create_with(fake_decode, NULL, NULL, &lp, NULL, &l, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
    err = NULL;
    assert_int_equal(rlx_whisper_live_create(NULL, NULL, NULL, NULL, &l, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
}

/* ---- jfk.wav through the random-weight model ---- */

static void test_jfk_random_model(void **state)
{
    (void)state;
    rlx_error *err = NULL;
    const char *model = rlx_test_tmp("whisper-live-f16.bin");
    char src[4096];
    snprintf(src, sizeof src, "%s", rlx_test_data("whisper/for-tests-ggml-tiny.bin"));
    if (rlx_whisper_writer_ggml(src, model, true, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    float *x = NULL;
    int64_t n = 0;
    if (rlx_audio_load(rlx_test_data("audio/jfk.wav"), SR, &x, &n, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    rlx_whisper_params p = rlx_whisper_default_params();
    rlx_whisper *w = NULL;
    if (rlx_whisper_create(model, &p, &w, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    rlx_whisper_decode_params dp = rlx_whisper_decode_default_params();
    dp.language = "en";
    int64_t pushed = 0;
    seen v = {.pushed = &pushed};
    rlx_whisper_callbacks cb = {.segment = on_segment, .user = &v};
    rlx_whisper_live *l = NULL;
    assert_int_equal(rlx_whisper_live_create(w, &dp, NULL, &cb, &l, &err), RLX_OK);
    int during = -1;
    for (int64_t i = 0; i < n; i += 1600) {
        int64_t k = n - i < 1600 ? n - i : 1600;
        pushed = i + k;
        if (rlx_whisper_live_push(l, x + i, (size_t)k, &err) != RLX_OK)
            fail_msg("%s", rlx_error_message(err));
    }
    during = v.n;
    for (int i = 0; i < during && i < 64; i++)
        assert_true(v.t1[i] * 16 <= v.audio_at[i] - 2 * SR);
    if (rlx_whisper_live_flush(l, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    print_message("# %d segments while pushing, %d after the flush\n", during, v.n);
    const rlx_whisper_result *r = rlx_whisper_live_result(l);
    assert_int_equal(r->n_segments, v.n);
    assert_true(v.n >= 1); /* random weights still write something over 11 s */
    assert_float_equal(rlx_whisper_live_pending_s(l), 0, 0);
    assert_float_equal(r->timings.audio_s, (double)n / SR, 1e-9);
    int64_t end_ms = n * 1000 / SR;
    for (int i = 0; i < r->n_segments; i++) {
        const rlx_whisper_segment *s = &r->segments[i];
        assert_int_equal(s->index, i);
        assert_true(s->t0_ms >= 0 && s->t0_ms <= s->t1_ms && s->t1_ms <= end_ms);
        if (i > 0)
            assert_true(s->t0_ms >= r->segments[i - 1].t1_ms);
        if (i < 64) {
            assert_int_equal(s->t0_ms, v.t0[i]);
            assert_int_equal(strncmp(s->text, v.text[i], sizeof v.text[i] - 1), 0);
        }
        assert_true(s->n_tokens > 0);
    }
    assert_string_equal(r->language, "en");
    rlx_whisper_live_free(l);
    rlx_whisper_free(w);
    free(x);
    remove(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settle_in_order), cmocka_unit_test(test_odd_chunks),
        cmocka_unit_test(test_silence_bounded), cmocka_unit_test(test_longest_window),
        cmocka_unit_test(test_cancel),          cmocka_unit_test(test_callback_stops),
        cmocka_unit_test(test_bad_params),      cmocka_unit_test(test_jfk_random_model),
    };
    rlx_test_need_data("whisper/for-tests-ggml-tiny.bin", "audio/jfk.wav", NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
