/* engine/audio/mel: the Slaney filterbank and Whisper's log-mel spectrogram
 * against tests/reference/mel_reference.py (NumPy float64, written from
 * openai-whisper's published algorithm) on the real jfk.wav and the real
 * filterbank of ../shared/data/whisper/for-tests-ggml-tiny.bin.
 *
 * Tolerances:
 * - Filterbank: ours and librosa's are the same double formula rounded to
 *   float32 the same way; the file's 80x201 bank (made by librosa) must match
 *   to 1e-7 absolute (the weights are at most 0.026, so that is a few float32
 *   ulps: it allows libm's log/exp to differ in the last double bit).
 * - Log-mel: our FFT is FFTW in float32, the reference is float64. Float32
 *   rounding in a 400-point FFT is a relative error of ~1e-6 of a frame's
 *   energy, so a mel bin far quieter than its frame's loud bins carries a
 *   large relative error, and log10 turns relative into absolute error
 *   (0.43 x relative). Above whisper's floor (max - 8, i.e. within 80 dB of
 *   the loudest bin) that stays below ~1e-4 (torch's own float32 stft differs
 *   from the float64 reference by 9e-5 there, and by 2e-3 in bins below the
 *   floor). So: raw log10 values above the floor within 1e-3, the normalized
 *   values ((max(x, max-8) + 4) / 4, what the model sees) everywhere within
 *   1e-3, the max within 1e-4.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/audio/audio.h"
#include "engine/audio/mel.h"
#include "test-util.h"

#define NM     80
#define NB     RLX_MEL_N_BINS
#define BLK    100
#define RAW_OK 1e-3
#define NRM_OK 1e-3
#define MAX_OK 1e-4

static void *read_fixture(const char *name, size_t want)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", RLX_TEST_SOURCE_DIR, name);
    size_t n = 0;
    void *p = rlx_test_read_file(path, &n);
    if (!p || n != want)
        fail_msg("fixture %s: expected %zu bytes, got %zu (run tests/reference/mel_reference.py)",
                 path, want, p ? n : 0);
    return p;
}

/* The filterbank stored in whisper.cpp's ggml file, after the 11 hparams. */
static float *file_filters(void)
{
    size_t n = 0;
    uint8_t *b = rlx_test_read_file(rlx_test_data("whisper/for-tests-ggml-tiny.bin"), &n);
    assert_non_null(b);
    assert_true(n > 56 + (size_t)NM * NB * 4);
    int32_t nm, nf;
    memcpy(&nm, b + 48, 4);
    memcpy(&nf, b + 52, 4);
    assert_int_equal(nm, NM);
    assert_int_equal(nf, NB);
    float *f = malloc((size_t)NM * NB * sizeof(float));
    memcpy(f, b + 56, (size_t)NM * NB * sizeof(float));
    free(b);
    return f;
}

static void test_filters_80_match_file(void **state)
{
    (void)state;
    float *ref = file_filters();
    float *ours = malloc((size_t)NM * NB * sizeof(float));
    assert_int_equal(rlx_mel_filters_slaney(NM, 400, 16000, ours), RLX_OK);
    double worst = 0.0;
    for (size_t i = 0; i < (size_t)NM * NB; i++)
        worst = fmax(worst, fabs((double)ours[i] - ref[i]));
    printf("80-mel filterbank vs the ggml file: max abs diff %.3g\n", worst);
    assert_true(worst <= 1e-7);
    free(ref);
    free(ours);
}

static void test_filters_128_match_reference(void **state)
{
    (void)state;
    size_t nf = (size_t)128 * NB;
    float *ref = read_fixture("mel-filters-128-ref.f32", nf * sizeof(float));
    float *ours = malloc(nf * sizeof(float));
    assert_int_equal(rlx_mel_filters_slaney(128, 400, 16000, ours), RLX_OK);
    double worst = 0.0;
    for (size_t i = 0; i < nf; i++)
        worst = fmax(worst, fabs((double)ours[i] - ref[i]));
    printf("128-mel filterbank vs the reference: max abs diff %.3g\n", worst);
    assert_true(worst <= 1e-7);
    free(ref);
    free(ours);
}

static void test_filters_bad_args(void **state)
{
    (void)state;
    float f[NB];
    assert_int_equal(rlx_mel_filters_slaney(0, 400, 16000, f), RLX_ERR_INVALID_ARG);
    assert_int_equal(rlx_mel_filters_slaney(1, 400, 0, f), RLX_ERR_INVALID_ARG);
    assert_int_equal(rlx_mel_filters_slaney(1, 1, 16000, f), RLX_ERR_INVALID_ARG);
    assert_int_equal(rlx_mel_filters_slaney(100000, 400, 16000, NULL), RLX_ERR_INVALID_ARG);
}

typedef struct {
    float *audio;
    int64_t n;
    float *filters;
    float *ref; /* the fixture */
} jfk;

static int jfk_setup(void **state)
{
    jfk *j = calloc(1, sizeof *j);
    rlx_error *err = NULL;
    if (rlx_audio_load(rlx_test_data("audio/jfk.wav"), 16000, &j->audio, &j->n, &err) != RLX_OK) {
        printf("%s\n", rlx_error_message(err));
        rlx_error_free(err);
        return -1;
    }
    j->filters = file_filters();
    j->ref = read_fixture("mel-jfk-ref.f32", (4 + 2 * (size_t)NM * BLK) * sizeof(float));
    *state = j;
    return 0;
}

static int jfk_teardown(void **state)
{
    jfk *j = *state;
    free(j->audio);
    free(j->filters);
    free(j->ref);
    free(j);
    return 0;
}

/* Compares frames [start, start + BLK) of our log-mel against a fixture block. */
static void compare_block(const float *ours, int64_t ours_frames, int64_t first, const float *ref,
                          float max_ref, const char *what)
{
    double worst_raw = 0.0, worst_nrm = 0.0;
    for (int m = 0; m < NM; m++)
        for (int t = 0; t < BLK; t++) {
            double a = ours[(size_t)m * ours_frames + first + t], b = ref[m * BLK + t];
            if (b > max_ref - 8.0)
                worst_raw = fmax(worst_raw, fabs(a - b));
            double na = (fmax(a, max_ref - 8.0) + 4.0) / 4.0;
            double nb = (fmax(b, max_ref - 8.0) + 4.0) / 4.0;
            worst_nrm = fmax(worst_nrm, fabs(na - nb));
        }
    printf("%s: max abs diff %.3g (log10, above the floor), %.3g (normalized)\n", what, worst_raw,
           worst_nrm);
    assert_true(worst_raw <= RAW_OK);
    assert_true(worst_nrm <= NRM_OK);
}

static void test_jfk_log_mel(void **state)
{
    jfk *j = *state;
    assert_int_equal(j->n, (int64_t)j->ref[3]);
    rlx_mel *m = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_mel_create(NM, j->filters, &m, &err), RLX_OK);
    int64_t total = (j->n + RLX_MEL_PAD) / RLX_MEL_HOP;
    assert_int_equal(total, (int64_t)j->ref[2]);
    float *x = malloc((size_t)NM * total * sizeof(float));
    assert_int_equal(rlx_mel_log(m, j->audio, j->n, 0, total, x, &err), RLX_OK);

    float max3000 = -INFINITY, max_all = -INFINITY;
    for (int i = 0; i < NM; i++)
        for (int64_t t = 0; t < total; t++) {
            float v = x[(size_t)i * total + t];
            max_all = fmaxf(max_all, v);
            if (t < 3000)
                max3000 = fmaxf(max3000, v);
        }
    printf("max over frames 0..2999: ours %.6f reference %.6f\n", max3000, j->ref[0]);
    assert_true(fabs(max3000 - j->ref[0]) <= MAX_OK);
    assert_true(fabs(max_all - j->ref[1]) <= MAX_OK);
    compare_block(x, total, 0, j->ref + 4, j->ref[0], "frames 0..99");
    compare_block(x, total, 1000, j->ref + 4 + NM * BLK, j->ref[0], "frames 1000..1099");
    /* past the audio and the padding it is silence: log10(1e-10) */
    assert_float_equal(x[(size_t)5 * total + total - 1], -10.0f, 1e-6);

    /* A window computed on its own equals the same frames of the whole. */
    float *w = malloc((size_t)NM * BLK * sizeof(float));
    assert_int_equal(rlx_mel_log(m, j->audio, j->n, 1000, BLK, w, &err), RLX_OK);
    for (int i = 0; i < NM; i++)
        assert_memory_equal(w + (size_t)i * BLK, x + (size_t)i * total + 1000, BLK * sizeof(float));

    /* Streaming: with only the first 100000 samples known, every frame whose
     * 400 samples lie inside them is already final. */
    int64_t known = 100000, last_full = (known - 200) / RLX_MEL_HOP; /* exclusive */
    float *p = malloc((size_t)NM * last_full * sizeof(float));
    assert_int_equal(rlx_mel_log(m, j->audio, known, 0, last_full, p, &err), RLX_OK);
    for (int i = 0; i < NM; i++)
        assert_memory_equal(p + (size_t)i * last_full, x + (size_t)i * total,
                            (size_t)last_full * sizeof(float));

    /* Normalizing the first 3000 frames against the reference's. */
    float *seg = malloc((size_t)NM * 3000 * sizeof(float));
    assert_int_equal(rlx_mel_log(m, j->audio, j->n, 0, 3000, seg, &err), RLX_OK);
    float used = rlx_mel_normalize(seg, (size_t)NM * 3000);
    assert_true(fabs(used - j->ref[0]) <= MAX_OK);
    double worst = 0.0;
    for (int i = 0; i < NM; i++)
        for (int t = 0; t < BLK; t++) {
            double b = (fmax(j->ref[4 + i * BLK + t], j->ref[0] - 8.0) + 4.0) / 4.0;
            worst = fmax(worst, fabs(seg[(size_t)i * 3000 + t] - b));
        }
    assert_true(worst <= NRM_OK);

    free(seg);
    free(p);
    free(w);
    free(x);
    rlx_mel_free(m);
}

static void test_default_filters_and_empty_audio(void **state)
{
    (void)state;
    rlx_mel *m = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_mel_create(128, NULL, &m, &err), RLX_OK);
    assert_int_equal(rlx_mel_n_mels(m), 128);
    float out[128 * 3];
    /* no audio at all: openai pads with zeros, so every frame is the floor */
    assert_int_equal(rlx_mel_log(m, NULL, 0, 0, 3, out, &err), RLX_OK);
    for (int i = 0; i < 128 * 3; i++)
        assert_float_equal(out[i], -10.0f, 1e-6);
    /* a window far past the end: still silence, no out-of-range read */
    float tiny[10] = {0.5f, -0.5f, 0.25f};
    assert_int_equal(rlx_mel_log(m, tiny, 10, 1000000, 3, out, &err), RLX_OK);
    assert_float_equal(out[0], -10.0f, 1e-6);
    /* frame 0 of a 10-sample signal reflects around sample 0 and is not silent */
    assert_int_equal(rlx_mel_log(m, tiny, 10, 0, 1, out, &err), RLX_OK);
    float mx = -INFINITY;
    for (int i = 0; i < 128; i++)
        mx = fmaxf(mx, out[i]);
    assert_true(mx > -10.0f);
    rlx_mel_free(m);
}

static void test_bad_args(void **state)
{
    (void)state;
    rlx_mel *m = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_mel_create(0, NULL, &m, &err), RLX_ERR_INVALID_ARG);
    assert_null(m);
    assert_true(strlen(rlx_error_message(err)) > 10);
    rlx_error_clear(&err);
    assert_int_equal(rlx_mel_create(80, NULL, &m, &err), RLX_OK);
    float out[80];
    float a[4] = {0};
    assert_int_equal(rlx_mel_log(m, a, 4, -1, 1, out, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(rlx_mel_log(m, a, -4, 0, 1, out, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(rlx_mel_log(m, a, 4, 0, 1, NULL, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(rlx_mel_log(m, a, 4, INT64_MAX / 2, 1, out, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    rlx_mel_free(m);
    rlx_mel_free(NULL);
}

static void test_normalize(void **state)
{
    (void)state;
    float x[4] = {2.0f, -7.0f, 0.0f, -5.9f};
    float mx = rlx_mel_normalize(x, 4);
    assert_float_equal(mx, 2.0f, 0.0f);
    assert_float_equal(x[0], 1.5f, 1e-7);  /* (2 + 4) / 4 */
    assert_float_equal(x[1], -0.5f, 1e-7); /* clamped to -6: (-6 + 4) / 4 */
    assert_float_equal(x[2], 1.0f, 1e-7);
    assert_float_equal(x[3], (-5.9f + 4.0f) / 4.0f, 1e-7);
    assert_true(isinf(rlx_mel_normalize(x, 0)));
}

/* Creating and freeing mels on several threads at once (FFTW's planner is
 * not thread-safe on its own); each computes the same frame. */
static void *worker(void *arg)
{
    float *res = arg;
    float sig[800];
    for (int i = 0; i < 800; i++)
        sig[i] = sinf(0.05f * (float)i);
    for (int k = 0; k < 20; k++) {
        rlx_mel *m = NULL;
        if (rlx_mel_create(80, NULL, &m, NULL) != RLX_OK)
            return NULL;
        rlx_mel_log(m, sig, 800, 2, 1, res, NULL);
        rlx_mel_free(m);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    enum { T = 4 };
    pthread_t th[T];
    float res[T][80];
    memset(res, 0, sizeof res);
    for (int i = 0; i < T; i++)
        pthread_create(&th[i], NULL, worker, res[i]);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    for (int i = 1; i < T; i++)
        assert_memory_equal(res[0], res[i], sizeof res[0]);
    assert_true(res[0][10] != 0.0f);
}

int main(void)
{
    rlx_test_need_data("whisper/for-tests-ggml-tiny.bin", "audio/jfk.wav", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filters_80_match_file),
        cmocka_unit_test(test_filters_128_match_reference),
        cmocka_unit_test(test_filters_bad_args),
        cmocka_unit_test_setup_teardown(test_jfk_log_mel, jfk_setup, jfk_teardown),
        cmocka_unit_test(test_default_filters_and_empty_audio),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
