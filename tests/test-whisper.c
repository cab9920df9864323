/* The Whisper runner (models/whisper) against the independent PyTorch
 * reference (tests/reference/whisper_reference.py), on a random-weight model
 * with whisper-tiny's real shapes that tests/whisper-writer.c writes with the
 * same counter-based weights the script builds, as a whisper.cpp ggml .bin
 * (F32 and F16) and as a Hugging Face folder, on every backend with a device.
 *
 * What is compared, and the tolerances (float32 here, float64 in the
 * reference, from the same float32 weights):
 * - the normalized log-mel of jfk.wav at 356 frames: 1e-4 absolute (values in
 *   about [-1, 1.5]; float32 FFT against float64, measured 1e-5);
 * - the encoder output at 48 rows of 384: 2e-3 absolute on values of O(1)
 *   (float32 sums over 4 layers of 384- and 1536-long dots and 1500-long
 *   softmaxes; a wrong scale, mask, layout or norm is off by 1e-1 and more);
 *   our encoder reads our own mel, so the mel's error is inside this too;
 * - the decoder's logits for an 8-token prompt at all 8 positions on 2,119
 *   vocabulary columns, and each position's argmax over the whole
 *   vocabulary: 5e-3 absolute on logits of O(10), the argmax exact where the
 *   reference's top-2 gap exceeds that;
 * - the language probabilities over 99 languages: 1e-3 absolute;
 * - the no-speech probability, as a log-probability: 2e-2 absolute;
 * - greedy decoding of the window with openai's suppression and timestamp
 *   rules: the same tokens up to the first step the reference marks as a
 *   near tie (a margin under 2e-2), at least 32 of them.
 * The F16 file is compared with the reference's F16-rounded weights
 * (the -f16 fixtures); the two F32 files with the F32 ones. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "engine/audio/audio.h"
#include "models/whisper/whisper-file.h"
#include "models/whisper/whisper-internal.h"
#include "models/whisper/whisper.h"
#include "test-util.h"
#include "whisper-writer.h"

#define N_VOCAB     51865
#define N_STATE     384
#define N_MELS      80
#define N_FRAMES    3000
#define MEL_COLS    356
#define ENC_ROWS    48
#define N_PROMPT    8
#define LOGIT_COLS  2119
#define N_LANGS     99
#define MAX_GREEDY  448
#define MAX_DEVICES 4

#define MEL_TOL    1e-4
#define ENC_TOL    2e-3
#define LOGIT_TOL  5e-3
#define LANG_TOL   1e-3
#define NOSP_TOL   2e-2
#define TIE_MARGIN 2e-2

static const int32_t prompt[N_PROMPT] = {50258, 50259, 50359, 50364, 400, 1012, 11, 1029};

typedef struct {
    float *mel, *enc, *logits, *stats, *lang;
    int32_t greedy[MAX_GREEDY];
    double margin[MAX_GREEDY];
    int n_greedy;
    double no_speech_logprob;
} reference;

typedef struct {
    char f32[512], f16[512], hf[512];
    float *audio;
    int64_t n_audio;
    reference ref[2]; /* [0] f32, [1] f16 */
    int mel_frames[MEL_COLS], enc_rows[ENC_ROWS], logit_cols[LOGIT_COLS];
    char dev[MAX_DEVICES][32];
    bool soft[MAX_DEVICES];
    int n_dev;
} fixture;

static void *read_fixture(const char *name, size_t bytes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", RLX_TEST_SOURCE_DIR, name);
    size_t size = 0;
    void *p = rlx_test_read_file(path, &size);
    if (p && size != bytes) {
        fprintf(stderr, "%s: %zu bytes, expected %zu\n", name, size, bytes);
        free(p);
        return NULL;
    }
    if (!p)
        fprintf(stderr, "cannot read %s\n", path);
    return p;
}

static bool read_greedy(const char *name, reference *r)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", RLX_TEST_SOURCE_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char key[64];
    double v;
    r->n_greedy = 0;
    r->no_speech_logprob = NAN;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%63s %lf", key, &v) == 2 && !strcmp(key, "no_speech_logprob")) {
            r->no_speech_logprob = v;
            continue;
        }
        int id;
        char m[32];
        if (sscanf(line, "%d %31s", &id, m) == 2 && r->n_greedy < MAX_GREEDY) {
            r->greedy[r->n_greedy] = id;
            r->margin[r->n_greedy] = strtod(m, NULL); /* "inf" parses */
            r->n_greedy++;
        }
    }
    fclose(f);
    return r->n_greedy > 0 && !isnan(r->no_speech_logprob);
}

static bool load_ref(reference *r, bool f16)
{
    char name[96];
    const char *sfx = f16 ? "-f16" : "";
    r->mel = read_fixture("whisper-ref-mel.f32", sizeof(float) * N_MELS * MEL_COLS);
    snprintf(name, sizeof name, "whisper-ref-encoder%s.f32", sfx);
    r->enc = read_fixture(name, sizeof(float) * ENC_ROWS * N_STATE);
    snprintf(name, sizeof name, "whisper-ref-logits%s.f32", sfx);
    r->logits = read_fixture(name, sizeof(float) * N_PROMPT * LOGIT_COLS);
    snprintf(name, sizeof name, "whisper-ref-logits-stats%s.f32", sfx);
    r->stats = read_fixture(name, sizeof(float) * N_PROMPT * 3);
    snprintf(name, sizeof name, "whisper-ref-lang%s.f32", sfx);
    r->lang = read_fixture(name, sizeof(float) * N_LANGS);
    snprintf(name, sizeof name, "whisper-ref-greedy%s.txt", sfx);
    return r->mel && r->enc && r->logits && r->stats && r->lang && read_greedy(name, r);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    if (!f)
        return -1;
    rlx_error *err = NULL;
    const char *src = rlx_test_data("whisper/for-tests-ggml-tiny.bin");
    char srcpath[512];
    snprintf(srcpath, sizeof srcpath, "%s", src);
    snprintf(f->f32, sizeof f->f32, "%s", rlx_test_tmp("tiny-f32.bin"));
    snprintf(f->f16, sizeof f->f16, "%s", rlx_test_tmp("tiny-f16.bin"));
    snprintf(f->hf, sizeof f->hf, "%s", rlx_test_tmp("tiny-hf"));
    if (rlx_whisper_writer_ggml(srcpath, f->f32, false, &err) != RLX_OK ||
        rlx_whisper_writer_ggml(srcpath, f->f16, true, &err) != RLX_OK ||
        rlx_whisper_writer_hf(srcpath, f->hf, &err) != RLX_OK) {
        fprintf(stderr, "writer: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return -1;
    }
    if (rlx_audio_load(rlx_test_data("audio/jfk.wav"), 16000, &f->audio, &f->n_audio, &err) !=
        RLX_OK) {
        fprintf(stderr, "jfk.wav: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return -1;
    }
    if (!load_ref(&f->ref[0], false) || !load_ref(&f->ref[1], true))
        return -1;
    int k = 0;
    for (int i = 0; i < 256; i++)
        f->mel_frames[k++] = i;
    for (int i = 1050; i < 1150; i++)
        f->mel_frames[k++] = i;
    k = 0;
    for (int i = 0; i < 16; i++)
        f->enc_rows[k++] = i;
    for (int i = 740; i < 756; i++)
        f->enc_rows[k++] = i;
    for (int i = 1484; i < 1500; i++)
        f->enc_rows[k++] = i;
    k = 0;
    for (int i = 0; i < 50265; i += 97)
        f->logit_cols[k++] = i;
    for (int i = 50265; i < N_VOCAB; i++)
        f->logit_cols[k++] = i;
    assert_int_equal(k, LOGIT_COLS);
    for (int b = 0; b < rlx_backend_count() && f->n_dev < MAX_DEVICES; b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if (!be || !be->device_count || be->device_count() < 1)
            continue;
        snprintf(f->dev[f->n_dev], sizeof f->dev[0], "%s", be->name);
        rlx_device_info info;
        f->soft[f->n_dev] =
            be->device_info(0, &info, NULL) == RLX_OK && info.type == RLX_DEVICE_GPU_SOFTWARE;
        f->n_dev++;
    }
    return 0;
}

static void free_ref(reference *r)
{
    free(r->mel), free(r->enc), free(r->logits), free(r->stats), free(r->lang);
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f) {
        free_ref(&f->ref[0]);
        free_ref(&f->ref[1]);
        free(f->audio);
        free(f);
    }
    return 0;
}

static rlx_whisper *open_model(const char *path, const char *dev)
{
    rlx_whisper_params p = rlx_whisper_default_params();
    p.device = dev;
    p.max_beams = 1;
    rlx_whisper *w = NULL;
    rlx_error *err = NULL;
    if (rlx_whisper_create(path, &p, &w, &err) != RLX_OK) {
        fprintf(stderr, "%s on %s: %s\n", path, dev, rlx_error_message(err));
        rlx_error_free(err);
    }
    return w;
}

#define CHECK(expr)                                                      \
    do {                                                                 \
        rlx_error *err_ = NULL;                                          \
        rlx_status st_ = (expr);                                         \
        if (st_ != RLX_OK)                                               \
            fprintf(stderr, "%s: %s\n", #expr, rlx_error_message(err_)); \
        rlx_error_free(err_);                                            \
        assert_int_equal(st_, RLX_OK);                                   \
    } while (0)

/* Everything one model file on one device is checked for. A software device
 * (lavapipe runs the whole encoder in minutes) skips the second encoder run
 * of the language detection and decodes 32 tokens. */
static void check_model(fixture *f, const char *path, const char *dev, const reference *ref,
                        bool soft)
{
    rlx_whisper *w = open_model(path, dev);
    assert_non_null(w);
    rlx_error *err = NULL;
    float *mel = malloc(sizeof(float) * N_MELS * N_FRAMES);
    float *enc = malloc(sizeof(float) * 1500 * N_STATE);
    float *logits = malloc(sizeof(float) * N_PROMPT * N_VOCAB);
    assert_true(mel && enc && logits);

    /* mel */
    assert_int_equal(rlx_whisper_mel(w, f->audio, f->n_audio, 0, mel, &err), RLX_OK);
    double dm = 0;
    for (int m = 0; m < N_MELS; m++)
        for (int c = 0; c < MEL_COLS; c++)
            dm = fmax(dm, fabs(mel[m * N_FRAMES + f->mel_frames[c]] - ref->mel[m * MEL_COLS + c]));
    /* encoder */
    assert_int_equal(rlx_whisper_encode(w, mel, enc, &err), RLX_OK);
    double de = 0;
    for (int r = 0; r < ENC_ROWS; r++)
        for (int c = 0; c < N_STATE; c++)
            de = fmax(de, fabs(enc[f->enc_rows[r] * N_STATE + c] - ref->enc[r * N_STATE + c]));
    printf("[ %s ] encoder: %.2g from the reference\n", dev, de); /* before the slow part */
    fflush(stdout);
    /* prompt logits, every position */
    if (rlx_whisper_decode(w, prompt, N_PROMPT, 0, true, logits, &err) != RLX_OK)
        fprintf(stderr, "decode: %s\n", rlx_error_message(err));
    assert_null(err);
    double dl = 0;
    int argmax_bad = 0;
    for (int t = 0; t < N_PROMPT; t++) {
        const float *row = logits + (size_t)t * N_VOCAB;
        for (int c = 0; c < LOGIT_COLS; c++)
            dl = fmax(dl, fabs(row[f->logit_cols[c]] - ref->logits[t * LOGIT_COLS + c]));
        int best = 0;
        for (int i = 1; i < N_VOCAB; i++)
            best = row[i] > row[best] ? i : best;
        int want = (int)ref->stats[t * 3];
        /* a near tie may go either way: then the two logits must agree */
        if (best != want && fabs(row[best] - row[want]) > LOGIT_TOL)
            argmax_bad++;
    }
    /* greedy window with openai's rules (English, transcribe) */
    rlx_whisper_decode_params dp = rlx_whisper_decode_default_params();
    dp.language = "en";
    if (soft)
        dp.max_tokens_per_window = 32;
    int32_t toks[MAX_GREEDY];
    int32_t n = 0;
    float avg = 0, nosp = 0;
    if (rlx_whisper_decode_window(w, &dp, toks, MAX_GREEDY, &n, &avg, &nosp, &err) != RLX_OK)
        fprintf(stderr, "decode_window: %s\n", rlx_error_message(err));
    assert_null(err);
    int same = 0, sure = 0;
    while (sure < ref->n_greedy && sure < n && ref->margin[sure] >= TIE_MARGIN)
        sure++;
    while (same < n && same < ref->n_greedy && toks[same] == ref->greedy[same])
        same++;
    double dns = fabs(log(nosp) - ref->no_speech_logprob);
    /* language probabilities */
    float probs[128];
    int32_t np = 0;
    double dg = 0;
    if (!soft) {
        assert_int_equal(
            rlx_whisper_detect_language(w, f->audio, f->n_audio, probs, 128, &np, &err), RLX_OK);
        assert_int_equal(np, N_LANGS);
        for (int i = 0; i < N_LANGS; i++)
            dg = fmax(dg, fabs(probs[i] - ref->lang[i]));
    }

    printf("[ %s ] %s: mel %.2g, encoder %.2g, logits %.2g (argmax off %d), language %.2g, "
           "no-speech log %.2g, greedy %d/%d same (first near tie at %d, ours has %d)\n",
           dev, strrchr(path, '/') + 1, dm, de, dl, argmax_bad, dg, dns, same, ref->n_greedy, sure,
           n);
    assert_true(dm <= MEL_TOL);
    assert_true(de <= ENC_TOL);
    assert_true(dl <= LOGIT_TOL);
    assert_int_equal(argmax_bad, 0);
    assert_true(dg <= LANG_TOL);
    assert_true(dns <= NOSP_TOL);
    assert_true(sure >= 16);
    assert_true(same >= sure);
    free(mel), free(enc), free(logits);
    rlx_whisper_free(w);
}

static void cpu_ggml_f32(void **state)
{
    fixture *f = *state;
    check_model(f, f->f32, "cpu", &f->ref[0], false);
}

static void cpu_ggml_f16(void **state)
{
    fixture *f = *state;
    check_model(f, f->f16, "cpu", &f->ref[1], false);
}

static void cpu_hf_folder(void **state)
{
    fixture *f = *state;
    check_model(f, f->hf, "cpu", &f->ref[0], false);
}

/* Word timestamps against tests/reference/whisper_words_reference.py, in
 * its two halves:
 * - the alignment matrix (the alignment heads' cross-attention over the jfk
 *   transcript's tokens, softmax, standardized, median-filtered, averaged):
 *   1e-2 absolute on standardized values up to about 5 (float32 against
 *   float64; dividing by the standard deviation over 29 tokens of
 *   probabilities near 1/550 amplifies the scores' 1e-5 errors, measured
 *   4.5e-3; a wrong head, scale or filter is off by 1e-1 and more);
 * - the words that DTW of the reference's own matrix gives: exact (the
 *   same float32 DTW as openai's dtw_cpu, on the same input).
 * End to end (our matrix into our DTW) the random model's attention is flat,
 * so near ties may send the warp elsewhere: only order and range are checked
 * there. */
static const int32_t jfk_text[] = {400, 370,  452, 7177, 6280, 11,   1029, 406,  437,
                                   428, 1941, 393, 360,  337,  291,  11,   1029, 437,
                                   291, 393,  360, 337,  428,  1941, 13};
#define N_JFK  ((int)(sizeof jfk_text / sizeof jfk_text[0]))
#define WORD_F 550

static void cpu_word_timestamps(void **state)
{
    fixture *f = *state;
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/whisper-ref-words.txt", RLX_TEST_SOURCE_DIR);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    double ref_t0[64], ref_t1[64];
    int ref_first[64], ref_cnt[64], nw = 0;
    while (nw < 64 &&
           fscanf(fp, "%lf %lf %d %d", &ref_t0[nw], &ref_t1[nw], &ref_first[nw], &ref_cnt[nw]) == 4)
        nw++;
    fclose(fp);
    float *ref_mat =
        read_fixture("whisper-ref-words-matrix.f32", sizeof(float) * (N_JFK + 1) * WORD_F);
    assert_non_null(ref_mat);
    /* each text token's probability in the alignment pass (openai's
     * find_alignment), from the same reference */
    double ref_p[N_JFK];
    snprintf(path, sizeof path, "%s/tests/fixtures/whisper-ref-words-probs.txt",
             RLX_TEST_SOURCE_DIR);
    fp = fopen(path, "r");
    assert_non_null(fp);
    int np_ = 0;
    while (np_ < N_JFK && fscanf(fp, "%lf", &ref_p[np_]) == 1)
        np_++;
    fclose(fp);
    assert_int_equal(np_, N_JFK);
    rlx_whisper *w = open_model(f->f32, "cpu");
    assert_non_null(w);
    float *mel = rlx_ww_fixture_mel_input();
    assert_non_null(mel);
    CHECK(rlx_whisper_encode(w, mel, NULL, &err_));
    free(mel);
    const int32_t sot[3] = {50258, 50259, 50359};
    float *mat = malloc(sizeof(float) * (N_JFK + 1) * 1500);
    assert_non_null(mat);
    int F = 0;
    float probs[N_JFK];
    CHECK(rlx_whisper_align_matrix(w, sot, 3, jfk_text, N_JFK, 1100, mat, &F, probs, &err_));
    assert_int_equal(F, WORD_F);
    double dm = 0;
    for (int i = 0; i < (N_JFK + 1) * WORD_F; i++)
        dm = fmax(dm, fabs(mat[i] - ref_mat[i]));
    /* log-probabilities: our f32 logits are within about 2e-3 of the float64
     * reference's, a log-softmax within twice that; 1e-2 leaves room for
     * other builds' summation orders and still sees a softmax over the wrong
     * tokens (all 51,865 instead of those below end-of-text: 0.031) */
    double dp = 0;
    for (int i = 0; i < N_JFK; i++)
        dp = fmax(dp, fabs(log(probs[i]) - log(ref_p[i])));
    float t0[N_JFK], t1[N_JFK];
    int first[N_JFK], cnt[N_JFK];
    int n = rlx_whisper_words_from_matrix(w, jfk_text, N_JFK, ref_mat, WORD_F, t0, t1, first, cnt,
                                          NULL);
    assert_int_equal(n, nw);
    int exact = 0;
    for (int i = 0; i < nw; i++)
        exact += first[i] == ref_first[i] && cnt[i] == ref_cnt[i] &&
                 lround(t0[i] * 1000) == lround(ref_t0[i] * 1000) &&
                 lround(t1[i] * 1000) == lround(ref_t1[i] * 1000);
    /* end to end, through a segment */
    rlx_whisper_token toks[N_JFK];
    for (int i = 0; i < N_JFK; i++)
        toks[i] = (rlx_whisper_token){.id = jfk_text[i], .p = 0.5f, .t0_ms = -1, .t1_ms = -1};
    rlx_whisper_segment seg = {.t0_ms = 0, .t1_ms = 11000, .n_tokens = N_JFK, .tokens = toks};
    CHECK(rlx_whisper_add_words(w, sot, 3, &seg, 1, 1100, 0, NULL, &err_));
    /* the two commas and the full stop join the words before them; a word's
     * probability is its tokens' mean (openai's word_probabilities) */
    double want_p[64];
    int want_n[64], m = 0;
    for (int i = 0; i < nw; i++) {
        int t = jfk_text[ref_first[i]];
        double s = 0;
        for (int k = 0; k < ref_cnt[i]; k++)
            s += ref_p[ref_first[i] + k];
        if (ref_cnt[i] == 1 && (t == 11 || t == 13) && m > 0) {
            want_p[m - 1] += s;
            want_n[m - 1] += 1;
        } else {
            want_p[m] = s;
            want_n[m++] = ref_cnt[i];
        }
    }
    bool ordered = seg.n_words == nw - 3 && m == seg.n_words;
    double dwp = 0;
    for (int i = 0; i < seg.n_words && ordered; i++) {
        ordered = seg.words[i].t0_ms <= seg.words[i].t1_ms &&
                  (i == 0 || seg.words[i - 1].t1_ms <= seg.words[i].t0_ms) &&
                  seg.words[i].t1_ms <= 11000;
        dwp = fmax(dwp, fabs(log(seg.words[i].p) - log(want_p[i] / want_n[i])));
    }
    printf("[ cpu ] word timestamps: matrix %.2g, token log-probs %.2g, DTW words %d of %d exact, "
           "end to end %s, word log-probs %.2g ('%s' %lld..%lld ms)\n",
           dm, dp, exact, nw, ordered ? "ordered" : "NOT ordered", dwp,
           seg.n_words ? seg.words[0].text : "", seg.n_words ? (long long)seg.words[0].t0_ms : 0LL,
           seg.n_words ? (long long)seg.words[0].t1_ms : 0LL);
    assert_true(dm <= 1e-2);
    assert_true(dp <= 1e-2);
    assert_true(dwp <= 1e-2);
    assert_int_equal(exact, nw);
    assert_true(ordered);
    for (int i = 0; i < seg.n_words; i++)
        free(seg.words[i].text);
    free(seg.words);
    free(mat);
    free(ref_mat);
    rlx_whisper_free(w);
}

/* A Q8_0 file (whisper.cpp quantize's layout: the matrices in blocks, the
 * conv weights F16) against the same weights decoded to F32 in an F32 file.
 * The quantized kernels also round the activations to 8 bits (as ggml's
 * do), and this random model amplifies small errors about 150-fold (F16
 * rounding of its weights, 0.05%, moves its logits by 1.0 of 21), so the
 * two agree only statistically: the relative RMS difference is bounded by
 * 0.5 for the encoder output and the logits (measured 0.16 and 0.25); a
 * wrong block layout, scale or row order gives 1 and more. */
static void cpu_ggml_q8_0(void **state)
{
    fixture *f = *state;
    char path[2][512];
    const char *src = rlx_test_data("whisper/for-tests-ggml-tiny.bin");
    char srcpath[512];
    snprintf(srcpath, sizeof srcpath, "%s", src);
    float *enc[2], *logits[2];
    float *mel = rlx_ww_fixture_mel_input();
    assert_non_null(mel);
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "%s",
                 rlx_test_tmp(k ? "tiny-q8_0-f32.bin" : "tiny-q8_0.bin"));
        rlx_error *err = NULL;
        assert_int_equal(rlx_whisper_writer_ggml_q8_0(srcpath, path[k], k == 1, &err), RLX_OK);
        rlx_whisper *w = open_model(path[k], "cpu");
        assert_non_null(w);
        rlx_dtype dt;
        rlx_shape sh;
        assert_true(rlx_whisper_file_tensor(rlx_whisper_model_file(w),
                                            "decoder.blocks.0.mlp.0.weight", &dt, &sh));
        assert_int_equal(dt, k ? RLX_DTYPE_F32 : RLX_DTYPE_Q8_0);
        enc[k] = malloc(sizeof(float) * 1500 * N_STATE);
        logits[k] = malloc(sizeof(float) * N_PROMPT * N_VOCAB);
        assert_true(enc[k] && logits[k]);
        assert_int_equal(rlx_whisper_encode(w, mel, enc[k], &err), RLX_OK);
        assert_int_equal(rlx_whisper_decode(w, prompt, N_PROMPT, 0, true, logits[k], &err), RLX_OK);
        rlx_whisper_free(w);
    }
    double de = 0, dl = 0, se = 0, sx = 0, sl = 0, sy = 0;
    for (size_t i = 0; i < (size_t)1500 * N_STATE; i++) {
        de = fmax(de, fabs(enc[0][i] - enc[1][i]));
        se += (enc[0][i] - enc[1][i]) * (double)(enc[0][i] - enc[1][i]);
        sx += enc[1][i] * (double)enc[1][i];
    }
    for (size_t i = 0; i < (size_t)N_PROMPT * N_VOCAB; i++) {
        dl = fmax(dl, fabs(logits[0][i] - logits[1][i]));
        sl += (logits[0][i] - logits[1][i]) * (double)(logits[0][i] - logits[1][i]);
        sy += logits[1][i] * (double)logits[1][i];
    }
    printf("[ cpu ] tiny-q8_0.bin against its weights in F32: encoder %.3g (rms %.3g), logits "
           "%.3g (rms %.3g)\n",
           de, sqrt(se / sx), dl, sqrt(sl / sy));
    assert_true(sqrt(se / sx) <= 0.5);
    assert_true(sqrt(sl / sy) <= 0.5);
    (void)f;
    free(mel);
    for (int k = 0; k < 2; k++)
        free(enc[k]), free(logits[k]);
}

/* openai's merge_punctuations, on words worked out by hand from its rules:
 * an opening mark after a space joins the next word, a closing mark the
 * word before (unless that ends in a space); merged words keep their own
 * times. */
static void cpu_merge_punctuation(void **state)
{
    (void)state;
    const char *in[] = {" Ask", " not", ",", " \"", "what", "\"", " you", " (", "can", ")", "."};
    const int n = 11;
    char *texts[11];
    int first[11], count[11];
    float t0[11], t1[11];
    for (int i = 0; i < n; i++) {
        texts[i] = strdup(in[i]);
        first[i] = i;
        count[i] = 1;
        t0[i] = (float)i;
        t1[i] = (float)i + 0.5f;
    }
    int k = rlx_whisper_merge_punctuation(texts, first, count, t0, t1, n);
    assert_int_equal(k, 5);
    const char *want[] = {" Ask", " not,", " \"what\"", " you", " (can)."};
    const int wf[] = {0, 1, 3, 6, 7}, wc[] = {1, 2, 3, 1, 4};
    const float wt[] = {0, 1, 4, 6, 8};
    for (int i = 0; i < k; i++) {
        assert_string_equal(texts[i], want[i]);
        assert_int_equal(first[i], wf[i]);
        assert_int_equal(count[i], wc[i]);
        assert_true(t0[i] == wt[i] && t1[i] == wt[i] + 0.5f);
        free(texts[i]);
    }
}

/* openai's add_word_timestamps heuristics on times worked out by hand from
 * its source: a sentence end longer than twice the median word is cut; the
 * first word after a pause is cut to twice the median, a segment takes its
 * start from its first word, and a last word running 0.5 s past the
 * segment ends with it. */
static void cpu_word_heuristics(void **state)
{
    (void)state;
    char a[] = " a", b[] = " b", dot[] = ".", c[] = " c";
    char *texts[4] = {a, b, dot, c};
    float t0[4] = {0, 0.2f, 0.4f, 2.4f}, t1[4] = {0.2f, 0.4f, 2.4f, 2.6f};
    float median = 0, max_dur = 0;
    rlx_whisper_clip_long_words(texts, t0, t1, 4, &median, &max_dur);
    assert_true(fabsf(median - 0.2f) < 1e-6f && fabsf(max_dur - 0.4f) < 1e-6f);
    assert_true(fabsf(t1[2] - 0.8f) < 1e-6f && t0[2] == 0.4f && t1[3] == 2.6f);

    rlx_whisper_word words[3] = {{.text = a, .t0_ms = 0, .t1_ms = 2000},
                                 {.text = b, .t0_ms = 2000, .t1_ms = 2200},
                                 {.text = c, .t0_ms = 2200, .t1_ms = 6000}};
    rlx_whisper_segment seg = {.t0_ms = 1000, .t1_ms = 5000, .n_words = 3, .words = words};
    double last = 0;
    rlx_whisper_fit_segment_words(&seg, 0.2f, 0.4f, &last);
    assert_int_equal(seg.t0_ms, 1600);
    assert_int_equal(seg.t1_ms, 5000);
    assert_int_equal(words[0].t0_ms, 1600);
    assert_int_equal(words[0].t1_ms, 2000);
    assert_int_equal(words[2].t1_ms, 5000);
    assert_true(last == 5.0);
}

/* every device but the CPU (the F16 file: the GPU kernels' F16 paths) */
static void devices_other_than_cpu(void **state)
{
    fixture *f = *state;
    int n = 0;
    for (int d = 0; d < f->n_dev; d++)
        if (strcmp(f->dev[d], "cpu")) {
            check_model(f, f->f16, f->dev[d], &f->ref[1], f->soft[d]);
            n++;
        }
    if (!n)
        printf("[ whisper ] no device but the CPU here\n");
}

/* argv[1]: "cpu" (the CPU tests), "devices" (the other devices), or a test's
 * name; none: all of them */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(!strcmp(argv[1], "cpu")       ? "cpu_*"
                               : !strcmp(argv[1], "devices") ? "devices_*"
                                                             : argv[1]);
    rlx_test_need_data("whisper/for-tests-ggml-tiny.bin", "audio/jfk.wav", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_ggml_f32),        cmocka_unit_test(cpu_ggml_f16),
        cmocka_unit_test(cpu_hf_folder),       cmocka_unit_test(cpu_word_timestamps),
        cmocka_unit_test(cpu_ggml_q8_0),       cmocka_unit_test(cpu_merge_punctuation),
        cmocka_unit_test(cpu_word_heuristics), cmocka_unit_test(devices_other_than_cpu),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
