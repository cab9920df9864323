/* RlxTranscriber (ui/rlx-transcriber.c) on the random-weight whisper-tiny
 * (tests/whisper-writer.h) and jfk.wav, without a display: the signals arrive
 * on the main loop in order (loading, started, language, segments and
 * progress, finished), everything the worker posted while the main loop was
 * busy comes in one dispatch, a second job while one runs is refused, the
 * runner is kept for the next job, Stop ends a long recording early with
 * RLX_ERR_CANCELLED, a job continued at an offset times its segments in the
 * whole recording, bad files and models finish with the runner's sentence,
 * and dropping the transcriber mid-job joins its thread.
 *
 * usage: test-transcriber HEADER_SRC (for-tests-ggml-tiny.bin) AUDIO (jfk.wav) */
#include "rlx-transcriber.h"

#include "backends/base/status.h"
#include "engine/audio/audio.h"
#include "tests/whisper-writer.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *model_path, *audio_path, *long_path, *tmp_dir;

typedef struct {
    GString *order; /* one letter a signal: L(oading) S(tarted) l(anguage) s(egment) p(rogress) F */
    int n_segments, n_progress, n_loading;
    gint64 last_t1, first_t0;
    double total_s;
    char *kind, *language;
    gboolean finished;
    int status;
    char *message;
    RlxTranscriber *cancel_on_segment; /* cancelled at the first segment */
} Rec;

static void on_loading(RlxTranscriber *t, const char *stage, double f, Rec *r)
{
    g_string_append_c(r->order, 'L');
    r->n_loading++;
    g_assert_cmpfloat(f, >=, 0.0);
    g_assert_cmpfloat(f, <=, 1.0);
}

static void on_started(RlxTranscriber *t, const char *kind, gboolean multilingual, Rec *r)
{
    g_string_append_c(r->order, 'S');
    g_free(r->kind);
    r->kind = g_strdup(kind);
}

static void on_language(RlxTranscriber *t, const char *code, double p, Rec *r)
{
    g_string_append_c(r->order, 'l');
    g_free(r->language);
    r->language = g_strdup(code);
}

static void on_segment(RlxTranscriber *t, gint64 t0, gint64 t1, const char *text, Rec *r)
{
    g_string_append_c(r->order, 's');
    g_assert_cmpint(t0, >=, 0);
    g_assert_cmpint(t1, >=, t0);
    g_assert_nonnull(text);
    r->last_t1 = t1;
    if (r->first_t0 < 0)
        r->first_t0 = t0;
    r->n_segments++;
    if (r->cancel_on_segment) {
        rlx_transcriber_cancel(r->cancel_on_segment);
        r->cancel_on_segment = NULL;
    }
}

static void on_progress(RlxTranscriber *t, double done, double total, Rec *r)
{
    g_string_append_c(r->order, 'p');
    g_assert_cmpfloat(done, <=, total + 1e-6);
    r->total_s = total;
    r->n_progress++;
}

static void on_finished(RlxTranscriber *t, int status, const char *message, Rec *r)
{
    g_string_append_c(r->order, 'F');
    g_assert_false(rlx_transcriber_is_busy(t)); /* a handler may start the next job */
    r->finished = TRUE;
    r->status = status;
    r->message = g_strdup(message);
}

static RlxTranscriber *transcriber_new(Rec *r)
{
    memset(r, 0, sizeof *r);
    r->first_t0 = -1;
    r->order = g_string_new(NULL);
    RlxTranscriber *t = rlx_transcriber_new();
    g_signal_connect(t, "loading", G_CALLBACK(on_loading), r);
    g_signal_connect(t, "started", G_CALLBACK(on_started), r);
    g_signal_connect(t, "language", G_CALLBACK(on_language), r);
    g_signal_connect(t, "segment", G_CALLBACK(on_segment), r);
    g_signal_connect(t, "progress", G_CALLBACK(on_progress), r);
    g_signal_connect(t, "finished", G_CALLBACK(on_finished), r);
    return t;
}

static void rec_reset(Rec *r)
{
    g_string_truncate(r->order, 0);
    r->n_segments = r->n_progress = r->n_loading = 0;
    r->finished = FALSE;
    r->status = 0;
    g_clear_pointer(&r->message, g_free);
}

static void rec_clear(Rec *r)
{
    g_string_free(r->order, TRUE);
    g_free(r->kind);
    g_free(r->language);
    g_free(r->message);
}

/* Iterates the main loop until "finished", at most 120 s. */
static void wait_finished(Rec *r)
{
    gint64 end = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;
    while (!r->finished) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_main_context_iteration(NULL, TRUE);
    }
}

static RlxTranscribeJob job(const char *audio)
{
    return (RlxTranscribeJob){.model = model_path, .device = "cpu", .audio = audio};
}

static void test_jfk(void)
{
    Rec r;
    RlxTranscriber *t = transcriber_new(&r);
    RlxTranscribeJob j = job(audio_path);
    g_assert_true(rlx_transcriber_start(t, &j));
    g_assert_true(rlx_transcriber_is_busy(t));
    g_assert_false(rlx_transcriber_start(t, &j)); /* one at a time */
    wait_finished(&r);
    g_test_message("signals: %s", r.order->str);
    g_assert_cmpint(r.status, ==, RLX_OK);
    g_assert_null(r.message);
    g_assert_cmpstr(r.kind, ==, "tiny");
    g_assert_nonnull(r.language);
    g_assert_cmpint(r.n_segments, >=, 1);
    g_assert_cmpint(r.n_loading, >=, 1);
    /* jfk.wav is 11.0 s */
    g_assert_cmpfloat(fabs(r.total_s - 11.0), <, 0.1);
    /* loading before the model is ready, everything else after, finished last */
    const char *o = r.order->str;
    const char *started = strchr(o, 'S');
    g_assert_nonnull(started);
    for (const char *c = o; c < started; c++)
        g_assert_cmpint(*c, ==, 'L');
    g_assert_null(strchr(started, 'L'));
    g_assert_true(strchr(o, 'F') == o + strlen(o) - 1);

    /* The runner is kept: the next job on the same model loads nothing. */
    rec_reset(&r);
    g_assert_true(rlx_transcriber_start(t, &j));
    wait_finished(&r);
    g_assert_cmpint(r.status, ==, RLX_OK);
    g_assert_cmpint(r.n_loading, ==, 0);
    g_assert_cmpint(r.n_segments, >=, 1);
    g_object_unref(t);
    rec_clear(&r);
}

/* While the main loop is busy, what the worker posts waits behind one idle
 * source: one iteration delivers all of it, progress merged to its latest. */
static void test_batching(void)
{
    Rec r;
    RlxTranscriber *t = transcriber_new(&r);
    RlxTranscribeJob j = job(audio_path);
    g_assert_true(rlx_transcriber_start(t, &j));
    /* The main loop busy for 10 s: the job runs meanwhile (about 2 s on two
     * cores, so mostly or wholly done). */
    g_usleep(10 * G_USEC_PER_SEC);
    g_main_context_iteration(NULL, FALSE);
    g_test_message("one dispatch: %s", r.order->str);
    /* something arrived in that one dispatch (on a quiet machine: loading,
     * started, language, segments; under heavy load, as in a sanitizer build
     * beside other tests, perhaps only the loading: no count is asserted,
     * since it would depend on timing) */
    g_assert_cmpuint(r.order->len, >=, 1);
    /* no progress report right behind another: merged to the latest */
    g_assert_null(strstr(r.order->str, "pp"));
    g_assert_null(strstr(r.order->str, "LL"));
    wait_finished(&r);
    g_assert_cmpint(r.status, ==, RLX_OK);
    g_object_unref(t);
    rec_clear(&r);
}

static void test_cancel(void)
{
    Rec r;
    RlxTranscriber *t = transcriber_new(&r);
    r.cancel_on_segment = t;
    RlxTranscribeJob j = job(long_path);
    g_assert_true(rlx_transcriber_start(t, &j));
    wait_finished(&r);
    g_test_message("signals: %s", r.order->str);
    g_assert_cmpint(r.status, ==, RLX_ERR_CANCELLED);
    /* 110 s of audio: stopped long before its end (the window under way ends) */
    g_assert_cmpint(r.last_t1, <, 90000);
    g_assert_cmpint(r.n_segments, >=, 1);
    g_object_unref(t);
    rec_clear(&r);
}

/* A job continued 90 s into the 110-s recording (what the page's Continue
 * does): its segments are timed in the whole recording, from there on. */
static void test_offset(void)
{
    Rec r;
    RlxTranscriber *t = transcriber_new(&r);
    r.first_t0 = -1;
    RlxTranscribeJob j = job(long_path);
    j.offset_ms = 90000;
    g_assert_true(rlx_transcriber_start(t, &j));
    wait_finished(&r);
    g_test_message("signals: %s, first segment at %" G_GINT64_FORMAT " ms", r.order->str,
                   r.first_t0);
    g_assert_cmpint(r.status, ==, RLX_OK);
    g_assert_cmpint(r.n_segments, >=, 1);
    g_assert_cmpint(r.first_t0, >=, 90000);
    g_object_unref(t);
    rec_clear(&r);
}

static void test_bad_audio(void)
{
    Rec r;
    RlxTranscriber *t = transcriber_new(&r);
    g_autofree char *txt = g_build_filename(tmp_dir, "notes.txt", NULL);
    g_assert_true(g_file_set_contents(txt, "Shopping list: milk, eggs.\n", -1, NULL));
    RlxTranscribeJob j = job(txt);
    g_assert_true(rlx_transcriber_start(t, &j));
    wait_finished(&r);
    g_assert_cmpint(r.status, !=, RLX_OK);
    g_assert_cmpint(r.status, !=, RLX_ERR_CANCELLED);
    g_assert_nonnull(r.message);
    g_assert_cmpuint(strlen(r.message), >, 10);
    g_assert_cmpint(r.n_segments, ==, 0);
    g_test_message("%s", r.message);
    g_object_unref(t);
    rec_clear(&r);
}

static void test_bad_model(void)
{
    Rec r;
    RlxTranscriber *t = transcriber_new(&r);
    RlxTranscribeJob j = job(audio_path);
    j.model = audio_path; /* a WAV is no model */
    g_assert_true(rlx_transcriber_start(t, &j));
    wait_finished(&r);
    g_assert_cmpint(r.status, !=, RLX_OK);
    g_assert_nonnull(r.message);
    g_assert_null(strchr(r.order->str, 'S'));
    g_test_message("%s", r.message);
    g_object_unref(t);
    rec_clear(&r);
}

/* The last reference dropped mid-job: cancels, joins, delivers nothing more. */
static void test_dispose_mid_job(void)
{
    Rec r;
    RlxTranscriber *t = transcriber_new(&r);
    RlxTranscribeJob j = job(long_path);
    g_assert_true(rlx_transcriber_start(t, &j));
    gint64 end = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
    while (r.n_progress == 0 && !r.finished) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_main_context_iteration(NULL, TRUE);
    }
    gint64 t0 = g_get_monotonic_time();
    g_object_unref(t);
    g_test_message("joined in %.2f s", (double)(g_get_monotonic_time() - t0) / 1e6);
    while (g_main_context_iteration(NULL, FALSE))
        ;
    rec_clear(&r);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    if (argc != 3) {
        fprintf(stderr, "usage: test-transcriber HEADER_SRC AUDIO\n");
        return 2;
    }
    for (int i = 1; i < 3; i++) {
        if (!g_file_test(argv[i], G_FILE_TEST_EXISTS)) {
            printf("RLX-TEST-DATA-MISSING: %s is absent: this test reads the real files of "
                   "../shared/data beside the checkout (see its README.md), so it is skipped\n",
                   argv[i]);
            return 77;
        }
    }
    audio_path = argv[2];
    tmp_dir = g_dir_make_tmp("rlx-test-transcriber-XXXXXX", NULL);
    g_assert_nonnull(tmp_dir);
    model_path = g_build_filename(tmp_dir, "ggml-random-tiny.bin", NULL);
    rlx_error *err = NULL;
    if (rlx_whisper_writer_ggml(argv[1], model_path, true, &err) != RLX_OK)
        g_error("cannot write the model: %s", rlx_error_message(err));
    /* jfk.wav ten times over: 110 s, four 30-s windows */
    float *x = NULL;
    int64_t n = 0;
    if (rlx_audio_load(audio_path, 16000, &x, &n, &err) != RLX_OK)
        g_error("%s", rlx_error_message(err));
    float *y = malloc(sizeof *y * (size_t)n * 10);
    for (int k = 0; k < 10; k++)
        memcpy(y + k * n, x, sizeof *x * (size_t)n);
    long_path = g_build_filename(tmp_dir, "long.wav", NULL);
    if (rlx_audio_write_wav(long_path, y, n * 10, 16000, &err) != RLX_OK)
        g_error("%s", rlx_error_message(err));
    free(x);
    free(y);

    g_test_add_func("/transcriber/jfk", test_jfk);
    g_test_add_func("/transcriber/batching", test_batching);
    g_test_add_func("/transcriber/cancel", test_cancel);
    g_test_add_func("/transcriber/offset", test_offset);
    g_test_add_func("/transcriber/bad-audio", test_bad_audio);
    g_test_add_func("/transcriber/bad-model", test_bad_model);
    g_test_add_func("/transcriber/dispose-mid-job", test_dispose_mid_job);
    int rc = g_test_run();

    g_unlink(model_path);
    g_unlink(long_path);
    g_autofree char *txt = g_build_filename(tmp_dir, "notes.txt", NULL);
    g_unlink(txt);
    g_rmdir(tmp_dir);
    g_free(model_path);
    g_free(long_path);
    g_free(tmp_dir);
    return rc;
}
