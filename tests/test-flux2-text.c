/* The FLUX.2 [klein] text encoder (models/diffusion/flux2-text.h) and its
 * schedule, noise and image-to-image start (flux2-sched.h) against
 * tests/reference/flux2_text_reference.py.
 *
 * Models, written here at test time from the generator the script uses
 * (weights keyed by their GGUF names):
 *   wide:  Qwen3-4B's attention widths (hidden 2560, 32 / 8 heads, head_dim
 *          128), FFN 1024, 2 layers, BF16, as a diffusers folder
 *          (model_index.json, text_encoder/ with config.json + safetensors,
 *          tokenizer/ = a link to ../shared/data/tokenizers/hf-qwen3); hidden
 *          states (0, 1, 2), the real (9, 18, 27) of 36 layers remapped.
 *   small: hidden 64, 4 / 2 heads, head_dim 16, 5 layers, F32 GGUF; hidden
 *          states (3, 1, 4) in that order, so the last layer is never built.
 * Both have a 512-token vocabulary: the numbers are checked from token ids
 * (rlx_flux2_text_encode_ids, padding with id 500), and the chat format and
 * tokens separately on the real Qwen3 tokenizer, whose ids are the Hugging
 * Face tokenizer's (ggml-vocab-qwen2.gguf.out) around the template's pieces.
 *
 * Tolerances: the reference computes in float64 from the same (BF16-rounded)
 * weights; we compute in float32 (f32 K/V, no cache), so the error is float32
 * rounding through a few layers: max |ours - ref| <= 2e-4 * max |ref| on the
 * CPU (a wrong mask, rope, norm, layer index or join order is off by 1e-1 and
 * more; the padding rows alone differ from each other by 0.4). Other devices
 * may run f16 arithmetic: 1e-2 there. Sigmas: within 1e-6 (the reference
 * rounds each float32 op, we round once from double). Noise: the reference
 * evaluates the same formula with Python's doubles: within 1e-6, and the
 * mean / variance of 65536 values within 1e-4 of the reference's (and near
 * 0 / 1). Image-to-image start steps: exact.
 *
 * argv[1]: "cpu" (default) or "devices" (every other device; 77 without one). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "backends/base/dtype.h"
#include "engine/formats/gguf.h"
#include "models/diffusion/flux2-sched.h"
#include "models/diffusion/flux2-text.h"
#include "qwen3-writer.h"
#include "test-util.h"

#define VOCAB  512
#define PAD_ID 500

typedef struct {
    int D, H, HKV, DH, F, NL, L;
    int n_layers, layers[3];
} shape;

static const shape WIDE = {2560, 32, 8, 128, 1024, 2, 24, 3, {0, 1, 2}};
static const shape SMALL = {64, 4, 2, 16, 96, 5, 16, 3, {3, 1, 4}};
static const int32_t WIDE_IDS[] = {151, 7, 300, 42, 511, 0, 256, 99, 13, 400, 77, 3, 198};
static const int32_t SMALL_IDS[] = {5, 17, 260, 42, 8, 8, 301, 2, 499};
#define N_WIDE_IDS  13
#define N_SMALL_IDS 9
#define WIDE_COLS   960 /* the fixture keeps columns 3 + 8j */

static const int SCHED[][2] = {{1, 256},   {4, 1024},   {4, 4096}, {28, 4096}, {50, 1024},
                               {50, 4301}, {20, 16384}, {9, 1},    {100, 2000}};
static const uint64_t SEEDS[] = {0, 42, 0xFFFFFFFFFFFFFFFFull};
static const struct {
    int steps;
    double strength;
} I2I[] = {{10, 0.6}, {10, 0.7}, {50, 0.8}, {4, 1.0}, {4, 0.2}, {28, 0.35}, {100, 0.29}, {3, 0.5}};
#define N_SCHED (int)(sizeof SCHED / sizeof SCHED[0])
#define N_SEEDS (int)(sizeof SEEDS / sizeof SEEDS[0])
#define N_I2I   (int)(sizeof I2I / sizeof I2I[0])

/* ---- the models (tests/qwen3-writer.h: the reference's generator) ------- */

static rlx_qwen3_writer_shape wshape(const shape *s)
{
    return (rlx_qwen3_writer_shape){.hidden = s->D,
                                    .heads = s->H,
                                    .kv_heads = s->HKV,
                                    .head_dim = s->DH,
                                    .ffn = s->F,
                                    .layers = s->NL,
                                    .vocab = VOCAB};
}

static void write_gguf(const shape *s, const char *arch, const char *path)
{
    rlx_qwen3_writer_shape w = wshape(s);
    rlx_error *err = NULL;
    if (rlx_qwen3_writer_write_gguf(path, &w, arch, &err) != RLX_OK)
        fail_msg("write %s: %s", path, rlx_error_message(err));
}

/* text_encoder/config.json + model.safetensors (BF16, Hugging Face names) */
static void write_hf(const shape *s, const char *dir)
{
    rlx_qwen3_writer_shape w = wshape(s);
    rlx_error *err = NULL;
    if (rlx_qwen3_writer_write_hf(dir, &w, &err) != RLX_OK)
        fail_msg("write %s: %s", dir, rlx_error_message(err));
}

/* ---- fixtures ---------------------------------------------------------- */

typedef struct {
    char root[4096];       /* the diffusers folder of the wide model */
    char small_gguf[4096]; /* the small model */
    float *wide_ref, *small_ref, *sched_ref;
    size_t n_sched;
    char dev[4][32];
    int n_dev;
} fixture;

static float *load_fixture(const char *name, size_t want, size_t *n_out)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", RLX_TEST_SOURCE_DIR, name);
    size_t size = 0;
    float *v = rlx_test_read_file(path, &size);
    if (!v || size % 4 || (want && size != want * 4))
        fail_msg("%s: missing or %zu bytes (want %zu floats)", path, size, want);
    if (n_out)
        *n_out = size / 4;
    return v;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    f->wide_ref = load_fixture("flux2-text-ref-wide.f32", (size_t)WIDE.L * WIDE_COLS, NULL);
    f->small_ref = load_fixture("flux2-text-ref-small.f32", (size_t)SMALL.L * 3 * SMALL.D, NULL);
    f->sched_ref = load_fixture("flux2-sched-ref.f32", 0, &f->n_sched);

    snprintf(f->small_gguf, sizeof f->small_gguf, "%s", rlx_test_tmp("flux2-te-small.gguf"));
    write_gguf(&SMALL, "qwen3", f->small_gguf);

    snprintf(f->root, sizeof f->root, "%s", rlx_test_tmp("klein"));
    char p[4200];
    mkdir(f->root, 0700);
    snprintf(p, sizeof p, "%s/model_index.json", f->root);
    rlx_test_write_file(p, "{\"_class_name\": \"Flux2KleinPipeline\"}\n", 38);
    snprintf(p, sizeof p, "%s/text_encoder", f->root);
    mkdir(p, 0700);
    write_hf(&WIDE, p);
    snprintf(p, sizeof p, "%s/tokenizer", f->root);
    if (symlink(rlx_test_data("tokenizers/hf-qwen3"), p) != 0)
        fail_msg("cannot link %s", p);

    for (int b = 0; b < rlx_backend_count() && f->n_dev < 4; b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if (be && be->device_count && be->device_count() >= 1)
            snprintf(f->dev[f->n_dev++], sizeof f->dev[0], "%s", be->name);
    }
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    /* the wide model is 130 MB: leave nothing behind */
    const char *rel[] = {"text_encoder/config.json",
                         "text_encoder/model.safetensors",
                         "text_encoder",
                         "tokenizer",
                         "model_index.json",
                         ""};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", f->root, rel[i]);
        remove(p);
    }
    remove(f->small_gguf);
    free(f->wide_ref);
    free(f->small_ref);
    free(f->sched_ref);
    free(f);
    return 0;
}

/* ---- helpers ----------------------------------------------------------- */

static rlx_flux2_text_params params(const shape *s, const char *device)
{
    rlx_flux2_text_params p = rlx_flux2_text_default_params();
    p.device = device;
    p.n_threads = 2;
    p.max_length = s->L;
    p.pad_id = PAD_ID;
    p.n_layers = s->n_layers;
    for (int i = 0; i < s->n_layers; i++)
        p.layers[i] = s->layers[i];
    p.tokenizer = rlx_test_data("tokenizers/hf-qwen3");
    return p;
}

static rlx_flux2_text *open_te(const char *path, const rlx_flux2_text_params *p)
{
    rlx_flux2_text *t = NULL;
    rlx_error *err = NULL;
    if (rlx_flux2_text_open(path, p, &t, &err) != RLX_OK)
        fail_msg("open %s: %s", path, rlx_error_message(err));
    return t;
}

static float *encode_ids(rlx_flux2_text *t, const int32_t *ids, int n, int want_rows, int want_dim)
{
    float *out = NULL;
    int rows = 0, dim = 0;
    rlx_error *err = NULL;
    if (rlx_flux2_text_encode_ids(t, ids, n, &out, &rows, &dim, &err) != RLX_OK)
        fail_msg("encode: %s", rlx_error_message(err));
    assert_int_equal(rows, want_rows);
    assert_int_equal(dim, want_dim);
    return out;
}

/* max |got - want| / max |want| over rows x cols of got (stride gs, column
 * map cm or NULL) against want (dense rows x cols) */
static double rel_err(const float *got, int gs, const int *cm, const float *want, int rows,
                      int cols)
{
    double md = 0, mr = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double g = got[(size_t)r * gs + (cm ? cm[c] : c)], w = want[(size_t)r * cols + c];
            double d = fabs(g - w);
            if (!(d <= md))
                md = d;
            if (fabs(w) > mr)
                mr = fabs(w);
        }
    return md / (mr > 0 ? mr : 1);
}

static void check_small(fixture *f, const char *device, double tol)
{
    rlx_flux2_text_params p = params(&SMALL, device);
    rlx_flux2_text *t = open_te(f->small_gguf, &p);
    const int D3 = 3 * SMALL.D;
    assert_int_equal(rlx_flux2_text_dim(t), D3);
    float *h = encode_ids(t, SMALL_IDS, N_SMALL_IDS, SMALL.L, D3);
    double e = rel_err(h, D3, NULL, f->small_ref, SMALL.L, D3);
    printf("[ flux2-text ] small on %s: relative error %.3g\n", device, e);
    if (!(e <= tol))
        fail_msg("small model on %s: relative error %.3g > %.0e", device, e, tol);
    /* a second call reuses the compiled program */
    float *h2 = encode_ids(t, SMALL_IDS, N_SMALL_IDS, SMALL.L, D3);
    assert_memory_equal(h, h2, sizeof(float) * (size_t)SMALL.L * D3);
    free(h);
    free(h2);
    rlx_flux2_text_free(t);

    /* padded to 300: a padding row sees the prompt keys only, so the first
     * 16 rows are those of the 16-row reference (through the long-sequence,
     * mostly masked attention tiles) */
    p.max_length = 300;
    t = open_te(f->small_gguf, &p);
    h = encode_ids(t, SMALL_IDS, N_SMALL_IDS, 300, D3);
    e = rel_err(h, D3, NULL, f->small_ref, SMALL.L, D3);
    if (!(e <= tol))
        fail_msg("small model padded to 300 on %s: relative error %.3g", device, e);
    free(h);
    rlx_flux2_text_free(t);
    p.max_length = SMALL.L;

    /* without padding: the prompt's rows, the same numbers (a causal model) */
    p.pad = false;
    t = open_te(f->small_gguf, &p);
    h = encode_ids(t, SMALL_IDS, N_SMALL_IDS, N_SMALL_IDS, D3);
    e = rel_err(h, D3, NULL, f->small_ref, N_SMALL_IDS, D3);
    if (!(e <= tol))
        fail_msg("small model without padding on %s: relative error %.3g", device, e);
    free(h);
    rlx_flux2_text_free(t);
}

static void check_wide(fixture *f, const char *device, double tol)
{
    rlx_flux2_text_params p = params(&WIDE, device);
    p.tokenizer = NULL; /* the folder's tokenizer/ */
    rlx_flux2_text *t = open_te(f->root, &p);
    const rlx_llm_config *c = rlx_flux2_text_config(t);
    assert_int_equal(c->n_embd, 2560);
    assert_int_equal(c->n_head, 32);
    assert_int_equal(c->n_head_kv, 8);
    assert_int_equal(c->head_dim, 128);
    const int D3 = 3 * WIDE.D;
    float *h = encode_ids(t, WIDE_IDS, N_WIDE_IDS, WIDE.L, D3);
    int cm[WIDE_COLS];
    for (int j = 0; j < WIDE_COLS; j++)
        cm[j] = 3 + 8 * j;
    double e = rel_err(h, D3, cm, f->wide_ref, WIDE.L, WIDE_COLS);
    printf("[ flux2-text ] Qwen3-4B widths on %s: relative error %.3g\n", device, e);
    if (!(e <= tol))
        fail_msg("wide model on %s: relative error %.3g > %.0e", device, e, tol);
    free(h);
    rlx_flux2_text_free(t);
}

/* ---- CPU tests --------------------------------------------------------- */

static void cpu_schedule(void **state)
{
    fixture *f = *state;
    size_t k = 0;
    float sig[RLX_FLUX2_MAX_STEPS + 1];
    for (int i = 0; i < N_SCHED; i++) {
        int steps = SCHED[i][0], seq = SCHED[i][1];
        assert_true(k + 1 + (size_t)steps + 1 <= f->n_sched);
        double mu = rlx_flux2_empirical_mu(seq, steps);
        if (!(fabs(mu - f->sched_ref[k]) <= 1e-6 * fabs(mu) + 1e-6))
            fail_msg("mu(%d, %d) = %.8f, want %.8f", steps, seq, mu, f->sched_ref[k]);
        k++;
        assert_int_equal(rlx_flux2_sigmas(steps, seq, sig), steps + 1);
        for (int j = 0; j <= steps; j++, k++)
            if (!(fabs(sig[j] - f->sched_ref[k]) <= 1e-6))
                fail_msg("sigma %d of (%d steps, %d tokens) = %.8f, want %.8f", j, steps, seq,
                         sig[j], f->sched_ref[k]);
        assert_true(sig[steps] == 0.0f);
    }
    /* bad input: nothing written */
    sig[0] = 7.0f;
    assert_int_equal(rlx_flux2_sigmas(0, 4096, sig), 0);
    assert_int_equal(rlx_flux2_sigmas(RLX_FLUX2_MAX_STEPS + 1, 4096, sig), 0);
    assert_int_equal(rlx_flux2_sigmas(4, 0, sig), 0);
    assert_int_equal(rlx_flux2_sigmas(4, 4096, NULL), 0);
    assert_true(sig[0] == 7.0f);

    float *z = malloc(sizeof *z * 65536), z5[5];
    for (int s = 0; s < N_SEEDS; s++) {
        rlx_flux2_noise(SEEDS[s], z, 65536);
        for (int j = 0; j < 9; j++, k++)
            if (!(fabs(z[j] - f->sched_ref[k]) <= 1e-6))
                fail_msg("noise %d of seed %llu = %.8f, want %.8f", j, (unsigned long long)SEEDS[s],
                         z[j], f->sched_ref[k]);
        double m = 0, v = 0;
        for (int j = 0; j < 65536; j++)
            m += z[j];
        m /= 65536;
        for (int j = 0; j < 65536; j++)
            v += (z[j] - m) * (z[j] - m);
        v /= 65536;
        /* N(0, 1): the mean of 65536 is within 4 sigma = 0.016 of 0, the
         * variance within 4 * sqrt(2 / 65536) = 0.022 of 1 */
        assert_true(fabs(m) < 0.016 && fabs(v - 1) < 0.022);
        assert_true(fabs(m - f->sched_ref[k]) < 1e-4 && fabs(v - f->sched_ref[k + 1]) < 1e-4);
        k += 2;
        /* a shorter (odd) call is a prefix */
        rlx_flux2_noise(SEEDS[s], z5, 5);
        assert_memory_equal(z5, z, sizeof z5);
    }
    free(z);

    for (int i = 0; i < N_I2I; i++, k++)
        assert_int_equal(rlx_flux2_img2img_start(I2I[i].steps, I2I[i].strength),
                         (int)f->sched_ref[k]);
    assert_int_equal(k, f->n_sched);
    assert_int_equal(rlx_flux2_img2img_start(10, 0.0), -1);
    assert_int_equal(rlx_flux2_img2img_start(10, 1.5), -1);
    assert_int_equal(rlx_flux2_img2img_start(10, NAN), -1);
    assert_int_equal(rlx_flux2_img2img_start(0, 0.5), -1);
    const float init[3] = {1, 2, -4}, noise[3] = {0.5f, -1, 2};
    float x[3];
    rlx_flux2_img2img_noise(init, noise, 0.25f, x, 3);
    assert_true(x[0] == 0.875f && x[1] == 1.25f && x[2] == -2.5f);
}

static void cpu_small(void **state)
{
    check_small(*state, "cpu", 2e-4);
}

static void cpu_wide(void **state)
{
    check_wide(*state, "cpu", 2e-4);
}

static char *inp_case(int idx)
{
    size_t size = 0;
    char *all = rlx_test_read_file(rlx_test_data("tokenizers/ggml-vocab-qwen2.gguf.inp"), &size);
    assert_non_null(all);
    all = realloc(all, size + 1);
    all[size] = 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    char *p = all;
    for (int i = 0; i < idx; i++) {
        p = strstr(p, sep);
        assert_non_null(p);
        p += strlen(sep);
    }
    char *e = strstr(p, sep);
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char *out = malloc(n + 1);
    memcpy(out, p, n);
    out[n] = 0;
    free(all);
    return out;
}

/* the chat format and ids on the real Qwen3 tokenizer, with the folder's
 * template (wide: tokenizer/ = hf-qwen3) and with the built-in text (the
 * small GGUF has no template), and truncated to 20 tokens */
static void cpu_tokens(void **state)
{
    fixture *f = *state;
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/fixtures/flux2-text-ref-tokens.txt", RLX_TEST_SOURCE_DIR);
    size_t size = 0;
    char *txt = rlx_test_read_file(path, &size);
    assert_non_null(txt);
    txt = realloc(txt, size + 1);
    txt[size] = 0;

    rlx_flux2_text_params pw = params(&WIDE, "cpu");
    pw.tokenizer = NULL;
    pw.max_length = 512;
    rlx_flux2_text *tw = open_te(f->root, &pw);
    rlx_flux2_text_params ps = params(&SMALL, "cpu");
    /* a tokenizer.json given as a file: no template beside it is read, so
     * the GGUF model (which has none) uses the built-in text */
    ps.tokenizer = rlx_test_data("tokenizers/hf-qwen3/tokenizer.json");
    ps.max_length = 512;
    rlx_flux2_text *ts = open_te(f->small_gguf, &ps);
    rlx_flux2_text_params pt = pw;
    pt.max_length = 20; /* truncation */
    rlx_flux2_text *tt = open_te(f->root, &pt);

    int lines = 0;
    for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
        int idx = atoi(line), want[600], nw = 0;
        char *q = strchr(line, ':');
        assert_non_null(q);
        for (char *tok = q + 1; *tok;) {
            char *end;
            long v = strtol(tok, &end, 10);
            if (end == tok)
                break;
            want[nw++] = (int)v;
            tok = end;
        }
        char *prompt = inp_case(idx);
        rlx_flux2_text *ts3[3] = {tw, ts, tt};
        for (int w = 0; w < 3; w++) {
            int32_t *ids = NULL;
            int n = 0;
            rlx_error *err = NULL;
            if (rlx_flux2_text_tokenize(ts3[w], prompt, &ids, &n, &err) != RLX_OK)
                fail_msg("tokenize %d: %s", idx, rlx_error_message(err));
            int expect = w == 2 && nw > 20 ? 20 : nw;
            if (n != expect)
                fail_msg("prompt %d (runner %d): %d tokens, want %d", idx, w, n, expect);
            for (int i = 0; i < n; i++)
                if (ids[i] != want[i])
                    fail_msg("prompt %d (runner %d): token %d is %d, want %d", idx, w, i, ids[i],
                             want[i]);
            free(ids);
        }
        /* the text itself, both ways */
        char *a = NULL, *b = NULL;
        assert_int_equal(rlx_flux2_text_format(tw, prompt, &a, NULL), RLX_OK);
        assert_int_equal(rlx_flux2_text_format(ts, prompt, &b, NULL), RLX_OK);
        assert_string_equal(a, b);
        assert_true(strncmp(a, "<|im_start|>user\n", 17) == 0);
        assert_true(strstr(a, "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n") !=
                    NULL);
        free(a);
        free(b);
        free(prompt);
        lines++;
    }
    assert_int_equal(lines, 4);

    /* a real prompt's ids are beyond this test model's 512-token vocabulary */
    float *out = NULL;
    int n = 0, dim = 0;
    rlx_error *err = NULL;
    assert_int_equal(rlx_flux2_text_encode(tw, "a red fox", &out, &n, &dim, &err),
                     RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "vocabulary"));
    assert_null(out);
    rlx_error_free(err);
    free(txt);
    rlx_flux2_text_free(tw);
    rlx_flux2_text_free(ts);
    rlx_flux2_text_free(tt);
}

static void expect_open_error(const char *path, const rlx_flux2_text_params *p, rlx_status code,
                              const char *words)
{
    rlx_flux2_text *t = (rlx_flux2_text *)1;
    rlx_error *err = NULL;
    rlx_status st = rlx_flux2_text_open(path, p, &t, &err);
    if (st != code || !err || !strstr(rlx_error_message(err), words))
        fail_msg("open %s: status %d (want %d), message '%s' (want '%s')", path, st, code,
                 err ? rlx_error_message(err) : "(none)", words);
    assert_null(t);
    printf("[ flux2-text ] %s\n", rlx_error_message(err));
    rlx_error_free(err);
}

static void cpu_bad_input(void **state)
{
    fixture *f = *state;
    rlx_flux2_text_params p = params(&SMALL, "cpu");
    char dir[4200], sub[4300];

    /* a diffusers folder without text_encoder/, then without tokenizer/ */
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp("klein-parts"));
    mkdir(dir, 0700);
    snprintf(sub, sizeof sub, "%s/model_index.json", dir);
    rlx_test_write_file(sub, "{}\n", 3);
    expect_open_error(dir, &p, RLX_ERR_NOT_FOUND, "text_encoder/");
    /* a text_encoder/ of its own (a link to the other one would find that
     * one's ../tokenizer) holding links to the wide model's files */
    snprintf(sub, sizeof sub, "%s/text_encoder", dir);
    mkdir(sub, 0700);
    const char *files[2] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char from[4400], to[4400];
        snprintf(from, sizeof from, "%s/text_encoder/%s", f->root, files[i]);
        snprintf(to, sizeof to, "%s/%s", sub, files[i]);
        assert_int_equal(symlink(from, to), 0);
    }
    p.tokenizer = NULL;
    expect_open_error(dir, &p, RLX_ERR_NOT_FOUND, "tokenizer/");
    /* the text_encoder/ folder alone: no tokenizer.json, no tokenizer/ beside */
    expect_open_error(sub, &p, RLX_ERR_NOT_FOUND, "tokenizer");
    expect_open_error(rlx_test_tmp("no-such-model"), &p, RLX_ERR_NOT_FOUND, "no such file");
    /* a tokenizer given in the params stands in for the missing one */
    rlx_flux2_text_params pw = params(&WIDE, "cpu");
    rlx_flux2_text_free(open_te(dir, &pw));
    rlx_flux2_text_free(open_te(sub, &pw));
    p.tokenizer = rlx_test_data("tokenizers/hf-qwen3");

    /* a llama GGUF, and a file that is no model */
    const char *llama = rlx_test_tmp("flux2-te-llama.gguf");
    write_gguf(&SMALL, "llama", llama);
    expect_open_error(llama, &p, RLX_ERR_UNSUPPORTED, "Qwen3");
    remove(llama);
    char junk[4200];
    snprintf(junk, sizeof junk, "%s", rlx_test_tmp("junk.bin"));
    rlx_test_write_file(junk, "not a model", 11);
    expect_open_error(junk, &p, RLX_ERR_UNSUPPORTED, "gguf");
    /* a truncated GGUF */
    size_t size = 0;
    void *g = rlx_test_read_file(f->small_gguf, &size);
    const char *cut = rlx_test_tmp("cut.gguf");
    rlx_test_write_file(cut, g, size / 3);
    free(g);
    rlx_flux2_text *t = NULL;
    rlx_error *err = NULL;
    assert_int_not_equal(rlx_flux2_text_open(cut, &p, &t, &err), RLX_OK);
    assert_null(t);
    printf("[ flux2-text ] %s\n", rlx_error_message(err));
    rlx_error_free(err);
    err = NULL;
    remove(cut);

    /* klein's layers (9, 18, 27) on a 5-layer model; bad params */
    rlx_flux2_text_params d = rlx_flux2_text_default_params();
    d.tokenizer = p.tokenizer;
    expect_open_error(f->small_gguf, &d, RLX_ERR_FORMAT, "has 5 layers");
    rlx_flux2_text_params b = p;
    b.max_length = 0;
    expect_open_error(f->small_gguf, &b, RLX_ERR_INVALID_ARG, "max_length");
    b = p;
    b.n_layers = 0;
    expect_open_error(f->small_gguf, &b, RLX_ERR_INVALID_ARG, "hidden states");

    /* prompts and ids */
    t = open_te(f->small_gguf, &p);
    float *out = NULL;
    int n = 0, dim = 0;
    const char *empties[] = {"", "  \n\t", NULL};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rlx_flux2_text_encode(t, empties[i], &out, &n, &dim, &err),
                         RLX_ERR_INVALID_ARG);
        assert_non_null(strstr(rlx_error_message(err), "empty"));
        assert_null(out);
        rlx_error_free(err);
        err = NULL;
    }
    const int32_t bad[2] = {5, VOCAB};
    assert_int_equal(rlx_flux2_text_encode_ids(t, bad, 2, &out, &n, &dim, &err),
                     RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "vocabulary"));
    rlx_error_free(err);
    err = NULL;
    int32_t many[17] = {0};
    assert_int_equal(rlx_flux2_text_encode_ids(t, many, 17, &out, &n, &dim, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
    err = NULL;
    assert_int_equal(rlx_flux2_text_encode_ids(t, many, 0, &out, &n, &dim, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
    rlx_flux2_text_free(t);
    for (int i = 0; i < 2; i++) {
        char to[4400];
        snprintf(to, sizeof to, "%s/%s", sub, files[i]);
        remove(to);
    }
    remove(sub);
    snprintf(sub, sizeof sub, "%s/model_index.json", dir);
    remove(sub);
    remove(dir);
    remove(junk);
}

/* ---- other devices ----------------------------------------------------- */

static void devices_reference(void **state)
{
    fixture *f = *state;
    int n = 0;
    for (int d = 0; d < f->n_dev; d++) {
        if (!strcmp(f->dev[d], "cpu"))
            continue;
        check_small(f, f->dev[d], 1e-2);
        check_wide(f, f->dev[d], 1e-2);
        n++;
    }
    if (!n) {
        printf("[ flux2-text ] no device but the CPU here\n");
        skip();
    }
}

int main(int argc, char **argv)
{
    rlx_test_need_data("tokenizers/hf-qwen3", "tokenizers/ggml-vocab-qwen2.gguf",
                       "tokenizers/ggml-vocab-qwen2.gguf.inp", NULL);
    if (argc > 1 && !strcmp(argv[1], "devices")) {
        if (!rlx_test_other_devices()) {
            printf("[ flux2-text ] no device but the CPU here: skipped\n");
            return 77;
        }
    }
    if (argc > 1)
        cmocka_set_test_filter(!strcmp(argv[1], "cpu")       ? "cpu_*"
                               : !strcmp(argv[1], "devices") ? "devices_*"
                                                             : argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_schedule),  cmocka_unit_test(cpu_small),
        cmocka_unit_test(cpu_wide),      cmocka_unit_test(cpu_tokens),
        cmocka_unit_test(cpu_bad_input), cmocka_unit_test(devices_reference),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
