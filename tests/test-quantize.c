/* rlx_quantize_file: llama.cpp's per-tensor type mix for every preset (the
 * expected table is written by hand from llama.cpp's src/llama-quant.cpp),
 * metadata preserved, values within each type's error bound, re-quantizing,
 * atomic replacement, cancellation and bad input; rlx_make_model's tensors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/cpu/kernels.h"
#include "engine/formats/gguf.h"
#include "engine/quantize/make-model.h"
#include "engine/quantize/quantize.h"
#include "test-util.h"

/* The test model: 8 layers, so llama.cpp's use_more_bits(i, 8) holds for
 * i < 8/8 = 1, i >= 7*8/8 = 7 and (i - 1) % 3 == 2, i.e. layers 0, 3, 6, 7.
 * No output.weight: the embeddings are tied, so token_embd.weight takes the
 * output tensor's rule. Row lengths: 256 (fits every block), 96 and 64
 * (multiples of 32 only: the K-quant fallbacks), 48 (fits nothing: F16). */
#define N_LAYER 8

typedef struct tdesc {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[2];
    float *data;
} tdesc;

static tdesc model[64];
static int n_model;

static uint64_t rng_state = 0x1234567;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng_state >> 11) + 0.5) * 0x1.0p-53;
}
static float gauss(void)
{
    return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()));
}

static void add_t(const char *name, uint64_t ne0, uint64_t ne1, bool ones)
{
    tdesc *t = &model[n_model++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    uint64_t n = t->ne[0] * t->ne[1];
    t->data = malloc(n * sizeof(float));
    for (uint64_t i = 0; i < n; i++)
        t->data[i] = ones ? 1.0f + 0.01f * gauss() : 0.05f * gauss();
}

static char src_path[4096];

static void write_source(const char *path)
{
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_str(w, "general.architecture", "llama");
    rlx_gguf_writer_set_str(w, "general.name", "quantize test");
    rlx_gguf_writer_set_u32(w, "general.file_type", 0);
    rlx_gguf_writer_set_u32(w, "llama.block_count", N_LAYER);
    rlx_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
    rlx_gguf_writer_set_u64(w, "test.u64", 0x123456789abcull);
    rlx_gguf_writer_set_bool(w, "test.bool", true);
    const char *toks[] = {"<s>", "</s>", "hello", "world"};
    rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", toks, 4);
    int32_t types[] = {3, 3, 1, 1};
    rlx_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RLX_GGUF_TYPE_INT32, types, 4);
    rlx_gguf_writer_set_u32(w, "split.count", 1); /* dropped by the quantizer */
    for (int i = 0; i < n_model; i++)
        rlx_gguf_writer_add_tensor_ref(w, model[i].name, RLX_DTYPE_F32, model[i].n_dims,
                                       model[i].ne, model[i].data,
                                       model[i].ne[0] * model[i].ne[1] * sizeof(float));
    rlx_error *err = NULL;
    rlx_status s = rlx_gguf_writer_write(w, path, &err);
    if (s != RLX_OK)
        fprintf(stderr, "%s\n", rlx_error_message(err));
    assert_int_equal(s, RLX_OK);
    rlx_gguf_writer_free(w);
}

static int setup(void **state)
{
    (void)state;
    add_t("token_embd.weight", 256, 64, false);
    add_t("output_norm.weight", 256, 0, true);
    for (int l = 0; l < N_LAYER; l++) {
        char n[64];
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l);
        add_t(n, 256, 0, true);
        snprintf(n, sizeof n, "blk.%d.attn_q.weight", l);
        add_t(n, 96, 16, false);
        snprintf(n, sizeof n, "blk.%d.attn_k.weight", l);
        add_t(n, 64, 16, false);
        snprintf(n, sizeof n, "blk.%d.attn_v.weight", l);
        add_t(n, 256, 8, false);
        snprintf(n, sizeof n, "blk.%d.ffn_down.weight", l);
        add_t(n, 256, 8, false);
    }
    add_t("blk.0.ffn_up.weight", 48, 4, false);
    snprintf(src_path, sizeof src_path, "%s", rlx_test_tmp("src.gguf"));
    write_source(src_path);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < n_model; i++)
        free(model[i].data);
    return 0;
}

/* ---- the expected mix, by hand from llama_tensor_get_type_impl ---------- */

static bool more_bits(int l) /* use_more_bits(l, 8) */
{
    return l == 0 || l == 3 || l == 6 || l == 7;
}

static rlx_dtype expected(rlx_quantize_type q, const char *name)
{
    rlx_dtype base = rlx_quantize_base_dtype(q);
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    /* 1-D tensors (norms) are never quantized: they keep F32 */
    if (strstr(name, "_norm.weight"))
        return RLX_DTYPE_F32;
    /* not a K-quant or legacy quant: no mix at all */
    if (q == RLX_QUANTIZE_F16 || q == RLX_QUANTIZE_BF16 || q == RLX_QUANTIZE_F32)
        return base;
    /* row 48 fits no block: tensor_type_fallback ends at F16 (llama.cpp
     * throws for the 32-block presets; rlx writes F16 there as well) */
    if (strstr(name, "ffn_up"))
        return RLX_DTYPE_F16;
    /* tied token_embd = the output rule: Q6_K unless the base is Q8_0 */
    if (!strcmp(name, "token_embd.weight"))
        return q == RLX_QUANTIZE_Q8_0 ? RLX_DTYPE_Q8_0 : RLX_DTYPE_Q6_K;
    rlx_dtype t = base;
    if (strstr(name, "attn_v.weight")) {
        /* Q4_K_M/Q5_K_M: Q6_K on use_more_bits layers; Q4_K_S: Q5_K on the
         * first four attn_v */
        if ((q == RLX_QUANTIZE_Q4_K_M || q == RLX_QUANTIZE_Q5_K_M) && more_bits(layer))
            t = RLX_DTYPE_Q6_K;
        else if (q == RLX_QUANTIZE_Q4_K_S && layer < 4)
            t = RLX_DTYPE_Q5_K;
    } else if (strstr(name, "ffn_down")) {
        /* Q4_K_M/Q5_K_M: Q6_K on use_more_bits layers; Q4_K_S: Q5_K for
         * layers < n/8 */
        if ((q == RLX_QUANTIZE_Q4_K_M || q == RLX_QUANTIZE_Q5_K_M) && more_bits(layer))
            t = RLX_DTYPE_Q6_K;
        else if (q == RLX_QUANTIZE_Q4_K_S && layer < 1)
            t = RLX_DTYPE_Q5_K;
    }
    /* rows of 96 and 64: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0 */
    if (strstr(name, "attn_q.weight") || strstr(name, "attn_k.weight")) {
        if (t == RLX_DTYPE_Q4_K)
            t = RLX_DTYPE_Q5_0;
        else if (t == RLX_DTYPE_Q5_K)
            t = RLX_DTYPE_Q5_1;
        else if (t == RLX_DTYPE_Q6_K)
            t = RLX_DTYPE_Q8_0;
    }
    return t;
}

/* Relative RMS error bound (RMS(y - x) / RMS(x)) per output type, for the
 * Gaussian test data. A uniform quantizer with step s has RMS error
 * s/sqrt(12); a block of 32 Gaussians spans about +-2.1 sigma:
 *   Q8_0 s = amax/127      -> ~0.5%,  bound 1%
 *   Q6_K s = amax/32 per 16 -> ~1.6%, bound 2%
 *   Q5_K s = range/31      -> ~3.7%  before the scale search; bound 4%
 *   Q5_0 s = amax/16, Q5_1 s = range/31 -> ~4%, bound 5%
 *   Q4_K s = range/15      -> ~7.7%  before the scale search; bound 8%
 *   Q4_0 s = amax/8, Q4_1 s = range/15 -> ~8%, bound 10%
 *   F16 (11-bit mantissa) 0.03%, BF16 (8-bit) 0.2%; bounds 0.1%, 0.5%.
 * Measured maxima over this file (fixed seed), re-quantized Q8_0 -> Q4_K_M
 * included: Q8_0 0.55%, Q6_K 1.83%, Q5_K 3.62%, Q5_1 4.04%, Q5_0 4.48%,
 * Q4_K 7.23%, Q4_1 8.11%, Q4_0 8.86%, F16 0.022%, BF16 0.17%. */
static double bound_of(rlx_dtype t)
{
    switch (t) {
    case RLX_DTYPE_F32:
        return 0.0;
    case RLX_DTYPE_F16:
        return 0.001;
    case RLX_DTYPE_BF16:
        return 0.005;
    case RLX_DTYPE_Q8_0:
        return 0.01;
    case RLX_DTYPE_Q6_K:
        return 0.02;
    case RLX_DTYPE_Q5_K:
        return 0.04;
    case RLX_DTYPE_Q5_0:
    case RLX_DTYPE_Q5_1:
        return 0.05;
    case RLX_DTYPE_Q4_K:
        return 0.08;
    default:
        return 0.10;
    }
}

static float *dequant(const rlx_gguf *g, const rlx_gguf_tensor *t)
{
    float *y = malloc(t->n_elements * sizeof(float));
    uint64_t row;
    assert_int_equal(rlx_dtype_row_bytes(t->dtype, t->ne[0], &row), RLX_OK);
    const uint8_t *d = rlx_gguf_tensor_data(g, t);
    for (uint64_t r = 0; r < t->n_elements / t->ne[0]; r++)
        assert_int_equal(
            rlx_cpu_dequantize_row(t->dtype, d + r * row, y + r * t->ne[0], (int64_t)t->ne[0]),
            RLX_OK);
    return y;
}

static bool same_value(const rlx_gguf_value *a, const rlx_gguf_value *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case RLX_GGUF_TYPE_STRING:
        return a->v.str.len == b->v.str.len && !memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len);
    case RLX_GGUF_TYPE_ARRAY:
        return a->v.arr.elem_type == b->v.arr.elem_type && a->v.arr.count == b->v.arr.count &&
               a->v.arr.data_len == b->v.arr.data_len &&
               !memcmp(a->v.arr.data, b->v.arr.data, a->v.arr.data_len);
    case RLX_GGUF_TYPE_FLOAT32:
    case RLX_GGUF_TYPE_FLOAT64:
        return a->v.f64 == b->v.f64;
    default:
        return a->v.u64 == b->v.u64;
    }
}

/* Quantize src to `q`, then check every tensor's type against the table,
 * every value against its bound (orig: the F32 data), and the metadata. */
static void check_output(const char *out, rlx_quantize_type q, const rlx_gguf *src)
{
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_gguf_open(out, &g, &err), RLX_OK);
    assert_int_equal(rlx_gguf_n_tensors(g), (uint64_t)n_model);
    for (int i = 0; i < n_model; i++) {
        const tdesc *m = &model[i];
        const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, m->name);
        assert_non_null(t);
        rlx_dtype want = expected(q, m->name);
        if (t->dtype != want)
            fail_msg("%s %s: got %s, want %s", rlx_quantize_type_name(q), m->name,
                     rlx_dtype_name(t->dtype), rlx_dtype_name(want));
        assert_int_equal(t->ne[0], m->ne[0]);
        assert_int_equal(t->ne[1], m->ne[1]);
        float *y = dequant(g, t);
        double se = 0, sx = 0;
        uint64_t n = m->ne[0] * m->ne[1];
        for (uint64_t k = 0; k < n; k++) {
            double e = (double)y[k] - m->data[k];
            se += e * e;
            sx += (double)m->data[k] * m->data[k];
        }
        double rel = sqrt(se / sx);
        if (rel > bound_of(t->dtype))
            fail_msg("%s %s (%s): relative RMS error %.4f > %.4f", rlx_quantize_type_name(q),
                     m->name, rlx_dtype_name(t->dtype), rel, bound_of(t->dtype));
        if (t->dtype == RLX_DTYPE_Q8_0) {
            /* per element: |x - q*d16| <= d/2 + 127*|d - d16| < 0.57 d,
             * d = amax/127 of the block */
            for (uint64_t b = 0; b < n / 32; b++) {
                float amax = 0;
                for (int k = 0; k < 32; k++)
                    amax = fmaxf(amax, fabsf(m->data[32 * b + k]));
                for (int k = 0; k < 32; k++)
                    assert_true(fabsf(y[32 * b + k] - m->data[32 * b + k]) <=
                                0.57f * amax / 127.0f + 1e-12f);
            }
        }
        free(y);
    }
    /* metadata: every source key but general.file_type and split.* is
     * unchanged; file_type and quantization_version are llama.cpp's */
    for (uint64_t i = 0; i < rlx_gguf_n_kv(src); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(src, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        const rlx_gguf_value *v = rlx_gguf_find(g, key);
        if (!strcmp(key, "general.file_type"))
            continue;
        if (!strncmp(key, "split.", 6)) {
            assert_null(v);
            continue;
        }
        assert_non_null(v);
        if (!same_value(&kv->value, v))
            fail_msg("key %s changed", key);
    }
    uint32_t ft = 99, qv = 0;
    assert_int_equal(rlx_gguf_get_u32(g, "general.file_type", &ft, NULL), RLX_OK);
    assert_int_equal(ft, (uint32_t)q);
    assert_int_equal(rlx_gguf_get_u32(g, "general.quantization_version", &qv, NULL), RLX_OK);
    assert_int_equal(qv, 2);
    rlx_gguf_close(g);
}

static void every_preset(void **state)
{
    (void)state;
    static const rlx_quantize_type all[] = {
        RLX_QUANTIZE_Q8_0,   RLX_QUANTIZE_Q4_0,   RLX_QUANTIZE_Q4_1,   RLX_QUANTIZE_Q5_0,
        RLX_QUANTIZE_Q5_1,   RLX_QUANTIZE_Q4_K_S, RLX_QUANTIZE_Q4_K_M, RLX_QUANTIZE_Q5_K_S,
        RLX_QUANTIZE_Q5_K_M, RLX_QUANTIZE_Q6_K,   RLX_QUANTIZE_F16,    RLX_QUANTIZE_BF16,
        RLX_QUANTIZE_F32,
    };
    rlx_gguf *src = NULL;
    assert_int_equal(rlx_gguf_open(src_path, &src, NULL), RLX_OK);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "out-%s.gguf", rlx_quantize_type_name(all[i]));
        const char *out = rlx_test_tmp(name);
        char outp[4096];
        snprintf(outp, sizeof outp, "%s", out);
        rlx_quantize_params p = rlx_quantize_default_params();
        p.n_threads = 3;
        rlx_quantize_stats st;
        rlx_error *err = NULL;
        rlx_status s = rlx_quantize_file(src_path, outp, all[i], p, &st, &err);
        if (s != RLX_OK)
            fail_msg("%s: %s", rlx_quantize_type_name(all[i]), rlx_error_message(err));
        assert_int_equal(st.n_tensors, (uint64_t)n_model);
        check_output(outp, all[i], src);
        unlink(outp);
    }
    rlx_gguf_close(src);
}

/* The thread count does not change a byte. */
static void threads_do_not_matter(void **state)
{
    (void)state;
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s", rlx_test_tmp("t1.gguf"));
    snprintf(b, sizeof b, "%s", rlx_test_tmp("t4.gguf"));
    rlx_quantize_params p = rlx_quantize_default_params();
    p.n_threads = 1;
    assert_int_equal(rlx_quantize_file(src_path, a, RLX_QUANTIZE_Q4_K_M, p, NULL, NULL), RLX_OK);
    p.n_threads = 4;
    assert_int_equal(rlx_quantize_file(src_path, b, RLX_QUANTIZE_Q4_K_M, p, NULL, NULL), RLX_OK);
    size_t na, nb;
    void *da = rlx_test_read_file(a, &na), *db = rlx_test_read_file(b, &nb);
    assert_non_null(da);
    assert_non_null(db);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    free(da);
    free(db);
    unlink(a);
    unlink(b);
}

/* A quantized file quantized again: dequantized first, same type table,
 * reported as re-quantized; the error stays within both steps' bounds. */
static bool count_notes(const rlx_quantize_tensor_report *r, void *user)
{
    if (r->note && strstr(r->note, "re-quantized"))
        (*(int *)user)++;
    return true;
}

static void requantize(void **state)
{
    (void)state;
    char q8[4096], q4[4096];
    snprintf(q8, sizeof q8, "%s", rlx_test_tmp("rq8.gguf"));
    snprintf(q4, sizeof q4, "%s", rlx_test_tmp("rq4.gguf"));
    rlx_quantize_params p = rlx_quantize_default_params();
    assert_int_equal(rlx_quantize_file(src_path, q8, RLX_QUANTIZE_Q8_0, p, NULL, NULL), RLX_OK);
    int notes = 0;
    p.progress = count_notes;
    p.progress_user = &notes;
    rlx_quantize_stats st;
    assert_int_equal(rlx_quantize_file(q8, q4, RLX_QUANTIZE_Q4_K_M, p, &st, NULL), RLX_OK);
    /* every 2-D tensor was Q8_0 except the F16 ffn_up; all change type
     * except the Q8_0 -> Q8_0 fallbacks (attn_q/attn_k of layers 0, 3, 6, 7)
     * and the ffn_up kept at F16 */
    int want = 0;
    for (int i = 0; i < n_model; i++) {
        rlx_dtype e = expected(RLX_QUANTIZE_Q4_K_M, model[i].name);
        rlx_dtype was = expected(RLX_QUANTIZE_Q8_0, model[i].name);
        want += e != was && rlx_dtype_get(was)->quantized;
    }
    assert_int_equal(notes, want);
    assert_int_equal(st.n_requantized, (uint64_t)want);
    rlx_gguf *src = NULL;
    assert_int_equal(rlx_gguf_open(src_path, &src, NULL), RLX_OK);
    check_output(q4, RLX_QUANTIZE_Q4_K_M, src);
    rlx_gguf_close(src);
    unlink(q8);
    unlink(q4);
}

/* --pure: the base type everywhere the shape allows it. */
static void pure(void **state)
{
    (void)state;
    char out[4096];
    snprintf(out, sizeof out, "%s", rlx_test_tmp("pure.gguf"));
    rlx_quantize_params p = rlx_quantize_default_params();
    p.pure = true;
    assert_int_equal(rlx_quantize_file(src_path, out, RLX_QUANTIZE_Q4_K_M, p, NULL, NULL), RLX_OK);
    rlx_gguf *g = NULL;
    assert_int_equal(rlx_gguf_open(out, &g, NULL), RLX_OK);
    for (int i = 0; i < n_model; i++) {
        const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, model[i].name);
        rlx_dtype want = model[i].n_dims == 1       ? RLX_DTYPE_F32
                         : model[i].ne[0] == 256    ? RLX_DTYPE_Q4_K
                         : model[i].ne[0] % 32 == 0 ? RLX_DTYPE_Q5_0
                                                    : RLX_DTYPE_F16;
        assert_int_equal(t->dtype, want);
    }
    rlx_gguf_close(g);
    unlink(out);
}

static bool stop_at_3(const rlx_quantize_tensor_report *r, void *user)
{
    (void)user;
    return r->index < 3;
}

static int count_tmp_files(const char *dir_of)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", dir_of);
    char *slash = strrchr(dir, '/');
    *slash = 0;
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* An existing output is replaced only by a complete file: a cancelled run
 * leaves it as it was and no temporary file behind. */
static void atomic_and_cancel(void **state)
{
    (void)state;
    char out[4096];
    snprintf(out, sizeof out, "%s", rlx_test_tmp("atomic.gguf"));
    assert_int_equal(rlx_test_write_file(out, "old", 3), 0);
    rlx_quantize_params p = rlx_quantize_default_params();
    p.progress = stop_at_3;
    rlx_error *err = NULL;
    assert_int_equal(rlx_quantize_file(src_path, out, RLX_QUANTIZE_Q8_0, p, NULL, &err),
                     RLX_ERR_CANCELLED);
    rlx_error_free(err);
    size_t n;
    char *d = rlx_test_read_file(out, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(d, "old", 3);
    free(d);
    assert_int_equal(count_tmp_files(out), 0);
    p.progress = NULL;
    assert_int_equal(rlx_quantize_file(src_path, out, RLX_QUANTIZE_Q8_0, p, NULL, NULL), RLX_OK);
    rlx_gguf *g = NULL;
    assert_int_equal(rlx_gguf_open(out, &g, NULL), RLX_OK);
    rlx_gguf_close(g);
    struct stat sb;
    assert_int_equal(stat(out, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);
    unlink(out);
}

static void errors(void **state)
{
    (void)state;
    rlx_quantize_type t;
    assert_int_equal(rlx_quantize_type_from_name("Q4_K_M", &t), RLX_OK);
    assert_int_equal(t, RLX_QUANTIZE_Q4_K_M);
    assert_int_equal(rlx_quantize_type_from_name("q4_k", &t), RLX_OK);
    assert_int_equal(t, RLX_QUANTIZE_Q4_K_M);
    assert_int_equal(rlx_quantize_type_from_name("q5_k", &t), RLX_OK);
    assert_int_equal(t, RLX_QUANTIZE_Q5_K_M);
    assert_int_equal(rlx_quantize_type_from_name("Q3_K_M", &t), RLX_ERR_INVALID_ARG);
    assert_int_equal(rlx_quantize_type_from_name("", &t), RLX_ERR_INVALID_ARG);
    assert_int_equal(rlx_quantize_type_from_name(NULL, &t), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_quantize_type_list(), "Q4_K_M"));

    char out[4096];
    snprintf(out, sizeof out, "%s", rlx_test_tmp("err.gguf"));
    rlx_quantize_params p = rlx_quantize_default_params();
    rlx_error *err = NULL;
    /* not a preset */
    assert_int_equal(rlx_quantize_file(src_path, out, (rlx_quantize_type)5, p, NULL, &err),
                     RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "Q4_K_M"));
    rlx_error_free(err);
    err = NULL;
    /* missing input */
    assert_int_equal(
        rlx_quantize_file("/nonexistent/x.gguf", out, RLX_QUANTIZE_Q8_0, p, NULL, &err),
        RLX_ERR_IO);
    rlx_error_free(err);
    err = NULL;
    /* truncated input: every cut is a format error, and no output appears */
    size_t n;
    uint8_t *d = rlx_test_read_file(src_path, &n);
    assert_non_null(d);
    char cut[4096];
    snprintf(cut, sizeof cut, "%s", rlx_test_tmp("cut.gguf"));
    size_t cuts[] = {0, 3, 20, 100, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        assert_int_equal(rlx_test_write_file(cut, d, cuts[i]), 0);
        rlx_status s = rlx_quantize_file(cut, out, RLX_QUANTIZE_Q8_0, p, NULL, &err);
        assert_int_equal(s, RLX_ERR_FORMAT);
        assert_non_null(rlx_error_message(err));
        rlx_error_free(err);
        err = NULL;
        assert_int_equal(access(out, F_OK), -1);
    }
    free(d);
    unlink(cut);
    /* an output folder that does not exist */
    assert_int_equal(
        rlx_quantize_file(src_path, "/nonexistent/dir/out.gguf", RLX_QUANTIZE_Q8_0, p, NULL, &err),
        RLX_ERR_IO);
    rlx_error_free(err);
}

/* make-model: llama.cpp's tensor names and shapes for the tiny qwen3, and
 * its Q4_K_M mix (2 layers: use_more_bits(i, 2) holds for layer 1 only). */
static void make_model_tiny(void **state)
{
    (void)state;
    char out[4096], q[4096];
    snprintf(out, sizeof out, "%s", rlx_test_tmp("tiny.gguf"));
    snprintf(q, sizeof q, "%s", rlx_test_tmp("tiny-q4km.gguf"));
    rlx_make_model_params p = rlx_make_model_default_params();
    p.shape = "tiny";
    p.arch = "qwen3";
    p.vocab_path = rlx_test_data("llm/stories260K.gguf");
    p.n_threads = 2;
    rlx_error *err = NULL;
    rlx_status s = rlx_make_model(out, p, &err);
    if (s != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    rlx_gguf *g = NULL;
    assert_int_equal(rlx_gguf_open(out, &g, NULL), RLX_OK);
    assert_int_equal(rlx_gguf_n_tensors(g), 2 + 2 * 11);
    static const struct {
        const char *name;
        uint64_t ne0, ne1;
    } want[] = {
        {"token_embd.weight", 256, 512},     {"output_norm.weight", 256, 1},
        {"blk.1.attn_q.weight", 256, 256},   {"blk.1.attn_k.weight", 256, 128},
        {"blk.1.attn_v.weight", 256, 128},   {"blk.1.attn_output.weight", 256, 256},
        {"blk.1.attn_q_norm.weight", 64, 1}, {"blk.1.attn_k_norm.weight", 64, 1},
        {"blk.1.ffn_gate.weight", 256, 512}, {"blk.1.ffn_up.weight", 256, 512},
        {"blk.1.ffn_down.weight", 512, 256}, {"blk.1.attn_norm.weight", 256, 1},
        {"blk.1.ffn_norm.weight", 256, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, want[i].name);
        if (!t)
            fail_msg("no %s", want[i].name);
        assert_int_equal(t->ne[0], want[i].ne0);
        assert_int_equal(t->ne[1], want[i].ne1);
    }
    assert_null(rlx_gguf_find_tensor(g, "output.weight"));
    uint32_t v = 0;
    assert_int_equal(rlx_gguf_get_u32(g, "qwen3.attention.key_length", &v, NULL), RLX_OK);
    assert_int_equal(v, 64);
    assert_non_null(rlx_gguf_find(g, "tokenizer.ggml.tokens"));
    rlx_gguf_close(g);

    rlx_quantize_params qp = rlx_quantize_default_params();
    assert_int_equal(rlx_quantize_file(out, q, RLX_QUANTIZE_Q4_K_M, qp, NULL, NULL), RLX_OK);
    assert_int_equal(rlx_gguf_open(q, &g, NULL), RLX_OK);
    assert_int_equal(rlx_gguf_find_tensor(g, "token_embd.weight")->dtype, RLX_DTYPE_Q6_K);
    assert_int_equal(rlx_gguf_find_tensor(g, "blk.0.attn_v.weight")->dtype, RLX_DTYPE_Q4_K);
    assert_int_equal(rlx_gguf_find_tensor(g, "blk.1.attn_v.weight")->dtype, RLX_DTYPE_Q6_K);
    assert_int_equal(rlx_gguf_find_tensor(g, "blk.0.ffn_down.weight")->dtype, RLX_DTYPE_Q4_K);
    assert_int_equal(rlx_gguf_find_tensor(g, "blk.1.ffn_down.weight")->dtype, RLX_DTYPE_Q6_K);
    assert_int_equal(rlx_gguf_find_tensor(g, "blk.1.attn_q_norm.weight")->dtype, RLX_DTYPE_F32);
    rlx_gguf_close(g);

    /* bad shape / arch / missing vocab are clean errors */
    p.shape = "qwen3-9000b";
    assert_int_equal(rlx_make_model(out, p, &err), RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
    err = NULL;
    p.shape = "tiny";
    p.arch = "gpt-neox";
    assert_int_equal(rlx_make_model(out, p, &err), RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
    err = NULL;
    p.arch = NULL;
    p.vocab_path = NULL;
    assert_int_equal(rlx_make_model(out, p, &err), RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
    unlink(out);
    unlink(q);
}

/* The K-quant scale search was rewritten for speed (one vectorizable pass
 * per candidate scale, errors from running sums, no lroundf): the relative
 * RMS error of quantize -> dequantize must not be worse than the previous
 * search's (two passes per candidate with lroundf and double sums, commit
 * b417867), whose figures on these exact inputs are below. They were
 * measured by running this function's code against that commit's
 * backends/cpu/quant.c. Three distributions: Gaussian, uniform and Laplace
 * (heavy tails, like trained weights). */
static uint64_t kq_state;
static double kq_urand(void)
{
    kq_state = kq_state * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(kq_state >> 11) + 0.5) * 0x1.0p-53;
}

static double kq_rel_rmse(rlx_dtype t, int kind)
{
    const int64_t n = 65536;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    void *q = malloc(n * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(q);
    kq_state = 0x9e3779b97f4a7c15ull + (uint64_t)kind;
    for (int64_t i = 0; i < n; i++) {
        double u1 = kq_urand(), u2 = kq_urand();
        x[i] = (float)(kind == 0   ? 0.02 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2)
                       : kind == 1 ? 0.02 * (2 * u1 - 1)
                                   : 0.02 * (u2 < 0.5 ? 1 : -1) * log(u1));
    }
    assert_int_equal(rlx_cpu_quantize_row(t, x, q, n), RLX_OK);
    assert_int_equal(rlx_cpu_dequantize_row(t, q, y, n), RLX_OK);
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; i++) {
        se += (double)(y[i] - x[i]) * (y[i] - x[i]);
        sx += (double)x[i] * x[i];
    }
    free(x);
    free(y);
    free(q);
    return sqrt(se / sx);
}

static void kquant_error_not_worse(void **state)
{
    (void)state;
    static const rlx_dtype types[3] = {RLX_DTYPE_Q4_K, RLX_DTYPE_Q5_K, RLX_DTYPE_Q6_K};
    static const char *kinds[3] = {"gauss", "uniform", "laplace"};
    static const double before[3][3] = {
        {0.071597, 0.035816, 0.017258}, /* gauss: Q4_K, Q5_K, Q6_K */
        {0.055036, 0.027465, 0.012823}, /* uniform */
        {0.084495, 0.042771, 0.021112}, /* laplace */
    };
    rlx_cpu_kernels_init();
    for (int k = 0; k < 3; k++)
        for (int t = 0; t < 3; t++) {
            double e = kq_rel_rmse(types[t], k);
            print_message("  %-7s %-4s relative RMS error %.6f (before %.6f)\n", kinds[k],
                          rlx_dtype_name(types[t]), e, before[k][t]);
            /* 5e-7: the figures above are rounded to 6 digits */
            if (e > before[k][t] + 5e-7)
                fail_msg("%s %s: relative RMS error %.6f is worse than %.6f", kinds[k],
                         rlx_dtype_name(types[t]), e, before[k][t]);
        }
}

int main(void)
{
    rlx_test_need_data("llm/stories260K.gguf", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kquant_error_not_worse),
        cmocka_unit_test(every_preset),
        cmocka_unit_test(threads_do_not_matter),
        cmocka_unit_test(requantize),
        cmocka_unit_test(pure),
        cmocka_unit_test(atomic_and_cancel),
        cmocka_unit_test(errors),
        cmocka_unit_test(make_model_tiny),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
