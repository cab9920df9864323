/* tests/whisper-writer.c against tests/reference/whisper_reference.py: the C
 * writer and the Python generator must produce the same weights, bit for bit
 * (whisper-ref-weights.f32 holds 16 values of 4 tensors, computed by the
 * script), and the files it writes must hold them where the formats say.
 * The ggml file is parsed here by hand (whisper.cpp's layout), the
 * safetensors file with engine/formats/safetensors.h. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/base/dtype.h"
#include "engine/formats/safetensors.h"
#include "test-util.h"
#include "whisper-writer.h"

#define N_PROBES 5

/* keep in sync with WEIGHT_PROBES / PROBE_INDEX in whisper_reference.py */
static const char *const PROBES[N_PROBES] = {
    "encoder.conv1.weight", "encoder.blocks.2.attn.key.weight", "decoder.token_embedding.weight",
    "decoder.blocks.3.cross_attn_ln.bias", "encoder.positional_embedding"};
static const int64_t PROBE_INDEX[16] = {0,     1,     2,     3,      100,    1000,   4095, 12345,
                                        40000, 65535, 99999, 123456, 147455, 147449, 17,   383};

static float *ref_probes(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/whisper-ref-weights.f32", RLX_TEST_SOURCE_DIR);
    size_t size = 0;
    float *v = rlx_test_read_file(path, &size);
    assert_non_null(v);
    assert_int_equal(size, N_PROBES * 16 * sizeof(float));
    return v;
}

static int64_t probe_index(const rlx_ww_tensor *t, int k)
{
    return PROBE_INDEX[k] % rlx_whisper_writer_numel(t);
}

/* the generator itself, bit for bit */
static void test_generator_matches_python(void **state)
{
    (void)state;
    float *ref = ref_probes();
    for (int p = 0; p < N_PROBES; p++) {
        const rlx_ww_tensor *t = rlx_whisper_writer_find(PROBES[p]);
        assert_non_null(t);
        for (int k = 0; k < 16; k++) {
            float v = rlx_whisper_writer_value(t, probe_index(t, k));
            if (memcmp(&v, &ref[p * 16 + k], 4) != 0)
                fail_msg("%s[%lld]: C %.9g, Python %.9g", PROBES[p], (long long)probe_index(t, k),
                         v, ref[p * 16 + k]);
        }
    }
    free(ref);
    /* the table: 167 tensors, names both ways, k_proj without a bias */
    assert_int_equal(rlx_whisper_writer_n_tensors(), 167);
    assert_non_null(rlx_whisper_writer_find("model.decoder.layers.3.encoder_attn.k_proj.weight"));
    assert_null(rlx_whisper_writer_find("decoder.blocks.0.attn.key.bias"));
    /* the sinusoids: [t][0] = sin(t), [t][192] = cos(t) */
    const rlx_ww_tensor *pe = rlx_whisper_writer_find("encoder.positional_embedding");
    assert_float_equal(rlx_whisper_writer_value(pe, 7 * 384), 0.6569866f, 1e-6);
    assert_float_equal(rlx_whisper_writer_value(pe, 7 * 384 + 192), 0.7539023f, 1e-6);
}

/* the v3 layout's generator against whisper-v3-ref-weights.f32 (WEIGHT_PROBES_V3
 * of whisper_reference.py --layout v3: its 2 encoder blocks, the 128-mel conv1,
 * the sinusoids at width 256), bit for bit, and its table */
static void test_generator_v3_matches_python(void **state)
{
    (void)state;
    static const char *const probes[N_PROBES] = {
        "encoder.conv1.weight", "encoder.blocks.1.attn.key.weight",
        "decoder.token_embedding.weight", "decoder.blocks.3.cross_attn_ln.bias",
        "encoder.positional_embedding"};
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/whisper-v3-ref-weights.f32",
             RLX_TEST_SOURCE_DIR);
    size_t size = 0;
    float *ref = rlx_test_read_file(path, &size);
    assert_non_null(ref);
    assert_int_equal(size, N_PROBES * 16 * sizeof(float));
    for (int p = 0; p < N_PROBES; p++) {
        const rlx_ww_tensor *t = rlx_ww_find(&rlx_ww_v3, probes[p]);
        assert_non_null(t);
        for (int k = 0; k < 16; k++) {
            float v = rlx_whisper_writer_value(t, probe_index(t, k));
            if (memcmp(&v, &ref[p * 16 + k], 4) != 0)
                fail_msg("v3 %s[%lld]: C %.9g, Python %.9g", probes[p],
                         (long long)probe_index(t, k), v, ref[p * 16 + k]);
        }
    }
    free(ref);
    /* 5 + 2 * 15 + 2 + 2 + 4 * 24 + 2 tensors; conv1 reads 128 mels */
    assert_int_equal(rlx_ww_n_tensors(&rlx_ww_v3), 137);
    const rlx_ww_tensor *c1 = rlx_ww_find(&rlx_ww_v3, "encoder.conv1.weight");
    assert_int_equal(c1->shape[0], 256);
    assert_int_equal(c1->shape[1], 128);
    assert_int_equal(rlx_ww_find(&rlx_ww_v3, "decoder.token_embedding.weight")->shape[0], 51866);
    assert_null(rlx_ww_find(&rlx_ww_v3, "encoder.blocks.2.attn.key.weight"));
    assert_non_null(rlx_ww_find(&rlx_ww_v3, "model.decoder.layers.3.encoder_attn.k_proj.weight"));
    /* the tiny table is untouched by the other one's use */
    assert_int_equal(rlx_whisper_writer_n_tensors(), 167);
}

/* ---- ggml, parsed by hand ---- */

typedef struct ggml_t {
    int32_t n_dims, ttype;
    int32_t ne[4];
    const uint8_t *data;
} ggml_t;

static int32_t i32_at(const uint8_t *d, size_t size, size_t at)
{
    assert_true(at + 4 <= size);
    int32_t v;
    memcpy(&v, d + at, 4);
    return v;
}

/* finds `name` in a whisper.cpp .bin; also checks the header was copied */
static bool ggml_find(const uint8_t *d, size_t size, const char *name, ggml_t *out, int32_t *ftype)
{
    assert_int_equal(i32_at(d, size, 0), 0x67676d6c);
    assert_int_equal(i32_at(d, size, 4), RLX_WW_N_VOCAB);
    *ftype = i32_at(d, size, 44);
    size_t at = 48;
    int32_t nm = i32_at(d, size, at), nf = i32_at(d, size, at + 4);
    at += 8 + (size_t)nm * (size_t)nf * 4;
    int32_t nw = i32_at(d, size, at);
    at += 4;
    for (int32_t k = 0; k < nw; k++)
        at += 4 + (size_t)i32_at(d, size, at);
    while (at < size) {
        ggml_t t = {0};
        t.n_dims = i32_at(d, size, at);
        int32_t len = i32_at(d, size, at + 4);
        t.ttype = i32_at(d, size, at + 8);
        at += 12;
        assert_true(t.n_dims >= 1 && t.n_dims <= 4 && len > 0 && (t.ttype == 0 || t.ttype == 1));
        int64_t n = 1;
        for (int k = 0; k < t.n_dims; k++) {
            t.ne[k] = i32_at(d, size, at);
            n *= t.ne[k];
            at += 4;
        }
        assert_true(at + (size_t)len <= size);
        bool hit = (size_t)len == strlen(name) && !memcmp(d + at, name, (size_t)len);
        at += (size_t)len;
        t.data = d + at;
        at += (size_t)n * (t.ttype ? 2 : 4);
        assert_true(at <= size);
        if (hit) {
            *out = t;
            return true;
        }
    }
    return false;
}

static float ggml_value(const ggml_t *t, int64_t i)
{
    if (t->ttype == 1) {
        uint16_t h;
        memcpy(&h, t->data + i * 2, 2);
        return rlx_f16_to_f32(h);
    }
    float v;
    memcpy(&v, t->data + i * 4, 4);
    return v;
}

static void check_ggml(const char *path, bool f16, const float *ref)
{
    size_t size = 0;
    uint8_t *d = rlx_test_read_file(path, &size);
    assert_non_null(d);
    int32_t ftype = -1;
    for (int p = 0; p < N_PROBES; p++) {
        const rlx_ww_tensor *w = rlx_whisper_writer_find(PROBES[p]);
        ggml_t t;
        assert_true(ggml_find(d, size, PROBES[p], &t, &ftype));
        assert_int_equal(t.n_dims, w->rank);
        for (int k = 0; k < w->rank; k++)
            assert_int_equal(t.ne[k], w->shape[w->rank - 1 - k]);
        /* convert-pt-to-ggml.py keeps the positional embeddings F32 */
        assert_int_equal(t.ttype, f16 && w->rank >= 2 && !strstr(w->name, "positional") ? 1 : 0);
        for (int k = 0; k < 16; k++) {
            float want = ref[p * 16 + k];
            if (t.ttype == 1)
                want = rlx_f16_to_f32(rlx_f32_to_f16(want));
            assert_float_equal(ggml_value(&t, probe_index(w, k)), want, 0.0);
        }
    }
    assert_int_equal(ftype, f16 ? 1 : 0);
    /* whisper.cpp's conventions: conv biases [n, 1] in F32, positions F32 */
    ggml_t t;
    assert_true(ggml_find(d, size, "encoder.conv2.bias", &t, &ftype));
    assert_int_equal(t.n_dims, 2);
    assert_int_equal(t.ne[0], 1);
    assert_int_equal(t.ne[1], 384);
    assert_int_equal(t.ttype, 0);
    assert_true(ggml_find(d, size, "decoder.positional_embedding", &t, &ftype));
    assert_int_equal(t.ttype, 0);
    assert_int_equal(t.ne[0], 384);
    assert_int_equal(t.ne[1], 448);
    assert_true(ggml_find(d, size, "decoder.ln.bias", &t, &ftype)); /* the last one */
    free(d);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_ggml_files(void **state)
{
    (void)state;
    float *ref = ref_probes();
    const char *src = rlx_test_data("whisper/for-tests-ggml-tiny.bin");
    char s[4096];
    snprintf(s, sizeof s, "%s", src);
    for (int f16 = 0; f16 < 2; f16++) {
        const char *path = rlx_test_tmp(f16 ? "whisper-f16.bin" : "whisper-f32.bin");
        rlx_error *err = NULL;
        double t0 = now();
        rlx_status st = rlx_whisper_writer_ggml(s, path, f16, &err);
        if (st != RLX_OK)
            fail_msg("%s", rlx_error_message(err));
        printf("wrote %s in %.2f s\n", path, now() - t0);
        check_ggml(path, f16, ref);
        remove(path);
    }
    free(ref);
}

static void test_hf_folder(void **state)
{
    (void)state;
    float *ref = ref_probes();
    char src[4096], dir[4096], p[4200];
    snprintf(src, sizeof src, "%s", rlx_test_data("whisper/for-tests-ggml-tiny.bin"));
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp("whisper-hf"));
    rlx_error *err = NULL;
    double t0 = now();
    if (rlx_whisper_writer_hf(src, dir, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    printf("wrote %s in %.2f s\n", dir, now() - t0);
    rlx_safetensors *st = NULL;
    if (rlx_safetensors_open(dir, &st, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_equal(rlx_safetensors_n_tensors(st), 167);
    for (int k = 0; k < N_PROBES; k++) {
        const rlx_ww_tensor *w = rlx_whisper_writer_find(PROBES[k]);
        const rlx_st_tensor *t = rlx_safetensors_find(st, w->hf_name);
        assert_non_null(t);
        assert_int_equal(t->dtype, RLX_DTYPE_F32);
        assert_int_equal(t->n_dims, (uint32_t)w->rank);
        for (int d = 0; d < w->rank; d++)
            assert_int_equal(t->shape[d], w->shape[d]);
        const float *v = rlx_safetensors_data(st, t);
        for (int j = 0; j < 16; j++)
            assert_float_equal(v[probe_index(w, j)], ref[k * 16 + j], 0.0);
    }
    const rlx_st_tensor *cb = rlx_safetensors_find(st, "model.encoder.conv1.bias");
    assert_non_null(cb);
    assert_int_equal(cb->n_dims, 1);
    assert_null(rlx_safetensors_find(st, "model.decoder.layers.0.self_attn.k_proj.bias"));
    rlx_safetensors_close(st);
    static const char *const files[] = {"config.json", "generation_config.json", "vocab.json",
                                        "added_tokens.json"};
    for (int k = 0; k < 4; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[k]);
        size_t size = 0;
        char *text = rlx_test_read_file(p, &size);
        assert_non_null(text);
        assert_true(size > 100);
        free(text);
        remove(p);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    remove(p);
    rmdir(dir);
    free(ref);
}

static void test_bad_header(void **state)
{
    (void)state;
    const char *path = rlx_test_tmp("not-ggml.bin");
    assert_int_equal(rlx_test_write_file(path, "GGUF and nothing else", 21), 0);
    char src[4096];
    snprintf(src, sizeof src, "%s", path);
    rlx_error *err = NULL;
    assert_int_equal(rlx_whisper_writer_ggml(src, rlx_test_tmp("out.bin"), false, &err),
                     RLX_ERR_FORMAT);
    assert_non_null(strstr(rlx_error_message(err), "not a whisper.cpp ggml file"));
    rlx_error_free(err);
    remove(path);
}

/* the fixtures load through the helpers and are consistent with each other
 * (facts that hold for any correct reference, not our numbers pasted back) */
static void test_fixtures(void **state)
{
    (void)state;
    static const char *const sfx[2] = {"", "-f16"};
    char name[128];
    for (int v = 0; v < 2; v++) {
        snprintf(name, sizeof name, "whisper-ref-lang%s.f32", sfx[v]);
        float *lang = rlx_ww_fixture_f32(name, 99);
        assert_non_null(lang);
        double sum = 0;
        for (int k = 0; k < 99; k++)
            sum += lang[k];
        assert_float_equal(sum, 1.0, 1e-5);
        free(lang);

        snprintf(name, sizeof name, "whisper-ref-logits-stats%s.f32", sfx[v]);
        float *stats = rlx_ww_fixture_f32(name, 8 * 3);
        snprintf(name, sizeof name, "whisper-ref-logits%s.f32", sfx[v]);
        float *logits = rlx_ww_fixture_f32(name, 8 * RLX_WW_LOGIT_COLS);
        assert_non_null(stats);
        assert_non_null(logits);
        for (int t = 0; t < 8; t++) {
            assert_true(stats[t * 3 + 2] >= stats[t * 3 + 1]); /* logsumexp >= max */
            for (int j = 0; j < RLX_WW_LOGIT_COLS; j++) {
                assert_true(logits[t * RLX_WW_LOGIT_COLS + j] <= stats[t * 3 + 1]);
                if (rlx_ww_logit_col(j) == (int)stats[t * 3])
                    assert_float_equal(logits[t * RLX_WW_LOGIT_COLS + j], stats[t * 3 + 1], 0);
            }
        }
        free(stats);
        free(logits);

        snprintf(name, sizeof name, "whisper-ref-encoder%s.f32", sfx[v]);
        float *enc = rlx_ww_fixture_f32(name, RLX_WW_ENC_ROWS * 384);
        assert_non_null(enc);
        free(enc);

        rlx_ww_greedy g;
        snprintf(name, sizeof name, "whisper-ref-greedy%s.txt", sfx[v]);
        assert_true(rlx_ww_fixture_greedy(name, &g));
        /* openai's rules: the first token is a timestamp within 1.0 s */
        assert_true(g.id[0] >= 50364 && g.id[0] <= 50414);
        assert_float_equal(g.no_speech_prob, exp(g.no_speech_logprob), 1e-6 * g.no_speech_prob);
        for (int k = 0; k < g.n; k++) {
            assert_true(g.id[k] >= 0 && g.id[k] < RLX_WW_N_VOCAB);
            assert_true(g.logit[k] <= g.lse[k] + 1e-4);
            assert_true(g.margin[k] > 0);
        }
    }
    assert_int_equal(rlx_ww_prompt[0], 50258);
    assert_int_equal(rlx_ww_enc_row(47), 1499);
    assert_int_equal(rlx_ww_logit_col(RLX_WW_LOGIT_COLS - 1), RLX_WW_N_VOCAB - 1);
    assert_int_equal(rlx_ww_mel_frame(RLX_WW_MEL_COLS - 1), 1149);

    /* the mel: normalized = (max(log, M - 8) + 4) / 4, and frames past the
     * audio (176000 samples = frame 1100, plus the 200-sample half window)
     * see only padding zeros: log10(1e-10) clamped to M - 8 */
    float *mel = rlx_ww_fixture_f32("whisper-ref-mel.f32", 80 * RLX_WW_MEL_COLS);
    float *lg = rlx_ww_fixture_f32("whisper-ref-mel-log.f32", 80 * RLX_WW_MEL_COLS);
    float *mx = rlx_ww_fixture_f32("whisper-ref-mel-max.f32", 2);
    assert_non_null(mel);
    assert_non_null(lg);
    assert_non_null(mx);
    assert_float_equal(mx[1], 4100, 0);
    for (int m = 0; m < 80; m++)
        for (int j = 0; j < RLX_WW_MEL_COLS; j++) {
            float l = lg[m * RLX_WW_MEL_COLS + j], want = (fmaxf(l, mx[0] - 8) + 4) / 4;
            assert_float_equal(mel[m * RLX_WW_MEL_COLS + j], want, 1e-6);
            assert_true(l <= mx[0]);
            if (rlx_ww_mel_frame(j) >= 1102)
                assert_float_equal(mel[m * RLX_WW_MEL_COLS + j], (mx[0] - 4) / 4, 1e-6);
        }
    /* the encoder input agrees with the mel fixture where both have frames */
    float *in = rlx_ww_fixture_mel_input();
    assert_non_null(in);
    for (int m = 0; m < 80; m++)
        for (int j = 0; j < RLX_WW_MEL_COLS; j++)
            assert_float_equal(in[m * 3000 + rlx_ww_mel_frame(j)], mel[m * RLX_WW_MEL_COLS + j], 0);
    free(in);
    free(mel);
    free(lg);
    free(mx);
}

int main(void)
{
    rlx_test_need_data("whisper/for-tests-ggml-tiny.bin", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generator_matches_python),
        cmocka_unit_test(test_generator_v3_matches_python),
        cmocka_unit_test(test_ggml_files),
        cmocka_unit_test(test_hf_folder),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
