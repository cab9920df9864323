/* The decoder graph of every supported architecture against an independent
 * PyTorch implementation (tests/reference/llm_reference.py, written from the
 * Hugging Face modeling code). Each case writes a tiny random-weight model
 * with the project's GGUF writer, from a counter-based generator the script
 * reproduces, then compares our logits with the committed fixture
 * tests/fixtures/llm-ref-<case>.f32 three ways: all 12 positions in one run,
 * a 5-token prefill's last position, and 7 single-token decode steps that
 * read the KV cache.
 *
 * Tolerance: the KV cache is F32 here and the reference computes in float64
 * from the same float32 weights, so what remains is float32 rounding in
 * ~10 ops per layer: max |ours - ref| / max |ref| <= 1e-4 (a wrong rope
 * layout, mask, norm or scale gives errors of 1e-2 and more).
 *
 * Keep CASES in sync with the script. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "backends/cpu/kernels.h"
#include "engine/formats/gguf.h"
#include "models/llm/llm.h"
#include "test-util.h"

#define VOCAB     64
#define N_TOK     12
#define REL_OK    1e-4
#define Q8_KV_TOL 2e-2
#define KQ_TOL    3e-2

static const rlx_token tokens[N_TOK] = {1, 17, 5, 42, 63, 8, 8, 30, 2, 55, 11, 40};

typedef struct {
    const char *name, *arch;
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    float rope_base, eps;
    int window;
    float attn_softcap, final_softcap, rope_linear;
    bool llama3; /* rope.scaling.type llama3, factor 8, low 1, high 4, original context 64 */
    bool yarn;   /* rope.scaling.type yarn, factor 4, original context 64 */
    bool rope_freqs, qkv_bias, qk_norm, post_norms, fused_qkv, fused_up, tied;
} arch_case;

#define BASE(layers, hd) \
    .n_layer = layers, .n_embd = 32, .n_head = 4, .n_head_kv = 2, .head_dim = hd, .n_ff = 48
static const arch_case cases[] = {
    {"llama", "llama", BASE(2, 8), .rope_base = 10000, .eps = 1e-5f, .rope_freqs = true},
    {"llama3", "llama", BASE(2, 8), .rope_base = 10000, .eps = 1e-5f, .llama3 = true},
    {"mistral", "mistral", BASE(2, 8), .rope_base = 10000, .eps = 1e-5f, .window = 4},
    {"qwen2", "qwen2", BASE(2, 8), .rope_base = 1e6f, .eps = 1e-6f, .qkv_bias = true},
    {"qwen3", "qwen3", BASE(2, 16), .rope_base = 10000, .eps = 1e-6f, .qk_norm = true,
     .tied = true},
    {"gemma2", "gemma2", BASE(2, 16), .rope_base = 10000, .eps = 1e-6f, .window = 4,
     .attn_softcap = 2.f, .final_softcap = 8.f, .post_norms = true, .tied = true},
    {"gemma3", "gemma3", BASE(6, 16), .rope_base = 1e6f, .eps = 1e-6f, .window = 4,
     .rope_linear = 2.f, .qk_norm = true, .post_norms = true, .tied = true},
    {"phi3", "phi3", BASE(2, 8), .rope_base = 10000, .eps = 1e-5f, .fused_qkv = true,
     .fused_up = true},
    {"qwen3-yarn", "qwen3", BASE(2, 16), .rope_base = 10000, .eps = 1e-6f, .qk_norm = true,
     .tied = true, .yarn = true},
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

enum kind { MAT, EMB, NORM, BIAS, FREQ };

/* How the writer stores matrices (MAT and EMB) whose rows are whole blocks:
 * F32, F16 or Q8_0 (llama.cpp's layout: an f16 scale d = max|x| / 127 and 32
 * int8 values round(x / d) per block). */
static rlx_dtype store_as = RLX_DTYPE_F32;
/* With Q4_0, Q4_K or Q6_K: write the dequantized values as F32 instead of
 * the blocks. */
static bool q4_dequantized;

static void write_tensor(rlx_gguf_writer *w, const char *name, int64_t rows, int64_t cols,
                         const float *v, bool matrix)
{
    uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
    int64_t n = rows ? rows * cols : cols;
    if (!matrix || store_as == RLX_DTYPE_F32 ||
        ((store_as == RLX_DTYPE_Q8_0 || store_as == RLX_DTYPE_Q4_0) && cols % 32) ||
        ((store_as == RLX_DTYPE_Q4_K || store_as == RLX_DTYPE_Q6_K) && cols % 256)) {
        rlx_gguf_writer_add_tensor(w, name, RLX_DTYPE_F32, rows ? 2 : 1, ne, v,
                                   sizeof *v * (size_t)n);
        return;
    }
    if (store_as == RLX_DTYPE_Q4_K || store_as == RLX_DTYPE_Q6_K) {
        /* the CPU backend's own quantizer (per-sub-block scale/min search)
         * and dequantizer, so the F32 twin holds exactly the decoded values */
        uint64_t rb = 0;
        if (rlx_dtype_row_bytes(store_as, cols, &rb) != RLX_OK)
            fail_msg("%s: row bytes", name);
        uint8_t *q = malloc(rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r++)
            if (rlx_cpu_quantize_row(store_as, v + r * cols, q + (size_t)r * rb, cols) != RLX_OK)
                fail_msg("%s: quantize", name);
        if (q4_dequantized) {
            float *f = malloc(sizeof *f * (size_t)n);
            for (int64_t r = 0; r < rows; r++)
                if (rlx_cpu_dequantize_row(store_as, q + (size_t)r * rb, f + r * cols, cols) !=
                    RLX_OK)
                    fail_msg("%s: dequantize", name);
            rlx_gguf_writer_add_tensor(w, name, RLX_DTYPE_F32, 2, ne, f, sizeof *f * (size_t)n);
            free(f);
        } else
            rlx_gguf_writer_add_tensor(w, name, store_as, 2, ne, q, rb * (size_t)rows);
        free(q);
        return;
    }
    if (store_as == RLX_DTYPE_F16) {
        uint16_t *h = malloc(sizeof *h * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            h[i] = rlx_f32_to_f16(v[i]);
        rlx_gguf_writer_add_tensor(w, name, RLX_DTYPE_F16, 2, ne, h, sizeof *h * (size_t)n);
        free(h);
        return;
    }
    int64_t nb = n / 32;
    if (store_as == RLX_DTYPE_Q4_0) {
        /* llama.cpp's Q4_0: d = (the value of largest magnitude) / -8, 16
         * bytes of nibbles q = x / d + 8 (low nibbles the first half) */
        uint8_t *q4 = malloc((size_t)nb * 18);
        for (int64_t b = 0; b < nb; b++) {
            const float *x = v + b * 32;
            float amax = 0, mx = 0;
            for (int i = 0; i < 32; i++)
                if (fabsf(x[i]) > amax) {
                    amax = fabsf(x[i]);
                    mx = x[i];
                }
            float d = mx / -8.f, id = d ? 1.f / d : 0.f;
            uint16_t dh = rlx_f32_to_f16(d);
            memcpy(q4 + b * 18, &dh, 2);
            for (int i = 0; i < 16; i++) {
                int lo = (int)(x[i] * id + 8.5f), hi = (int)(x[i + 16] * id + 8.5f);
                lo = lo > 15 ? 15 : lo;
                hi = hi > 15 ? 15 : hi;
                q4[b * 18 + 2 + i] = (uint8_t)(lo | hi << 4);
            }
        }
        if (q4_dequantized) {
            float *f = malloc(sizeof *f * (size_t)n);
            for (int64_t b = 0; b < nb; b++) {
                uint16_t dh;
                memcpy(&dh, q4 + b * 18, 2);
                float d = rlx_f16_to_f32(dh);
                for (int i = 0; i < 16; i++) {
                    f[b * 32 + i] = (float)((q4[b * 18 + 2 + i] & 15) - 8) * d;
                    f[b * 32 + i + 16] = (float)((q4[b * 18 + 2 + i] >> 4) - 8) * d;
                }
            }
            rlx_gguf_writer_add_tensor(w, name, RLX_DTYPE_F32, 2, ne, f, sizeof *f * (size_t)n);
            free(f);
        } else
            rlx_gguf_writer_add_tensor(w, name, RLX_DTYPE_Q4_0, 2, ne, q4, (size_t)nb * 18);
        free(q4);
        return;
    }
    uint8_t *q = malloc((size_t)nb * 34);
    for (int64_t b = 0; b < nb; b++) {
        const float *x = v + b * 32;
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        float d = amax / 127.f, id = d ? 1.f / d : 0.f;
        uint16_t dh = rlx_f32_to_f16(d);
        memcpy(q + b * 34, &dh, 2);
        for (int i = 0; i < 32; i++)
            q[b * 34 + 2 + i] = (uint8_t)(int8_t)lroundf(x[i] * id);
    }
    rlx_gguf_writer_add_tensor(w, name, RLX_DTYPE_Q8_0, 2, ne, q, (size_t)nb * 34);
    free(q);
}

/* splitmix64(fnv1a(name) + (i + 1) * golden) -> [-1, 1), then scaled */
static void add(rlx_gguf_writer *w, const char *name, int64_t rows, int64_t cols, enum kind k)
{
    int64_t n = rows ? rows * cols : cols;
    float *v = malloc(sizeof *v * (size_t)n);
    uint64_t seed = fnv1a(name);
    float mat = (float)(1.5 / sqrt((double)cols));
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = seed + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        float u = (float)(2.0 * ((double)(z >> 40) / 16777216.0) - 1.0);
        switch (k) {
        case MAT:
            v[i] = u * mat;
            break;
        case EMB:
            v[i] = u;
            break;
        case NORM:
            v[i] = 1.0f + u * 0.2f;
            break;
        case BIAS:
            v[i] = u * 0.1f;
            break;
        case FREQ:
            v[i] = 2.5f + u * 1.5f;
            break;
        }
    }
    write_tensor(w, name, rows, cols, v, k == MAT || k == EMB);
    free(v);
}

static void addl(rlx_gguf_writer *w, int il, const char *what, int64_t rows, int64_t cols,
                 enum kind k)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    add(w, name, rows, cols, k);
}

static void kv_u32(rlx_gguf_writer *w, const char *arch, const char *key, uint32_t v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    rlx_gguf_writer_set_u32(w, k, v);
}

static void kv_f32(rlx_gguf_writer *w, const char *arch, const char *key, float v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    rlx_gguf_writer_set_f32(w, k, v);
}

static const char *write_model(const arch_case *c)
{
    const int64_t D = c->n_embd, H = c->n_head, HKV = c->n_head_kv, DH = c->head_dim, F = c->n_ff;
    const char *a = c->arch;
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_str(w, "general.architecture", a);
    kv_u32(w, a, "block_count", (uint32_t)c->n_layer);
    kv_u32(w, a, "embedding_length", (uint32_t)D);
    kv_u32(w, a, "feed_forward_length", (uint32_t)F);
    kv_u32(w, a, "attention.head_count", (uint32_t)H);
    kv_u32(w, a, "attention.head_count_kv", (uint32_t)HKV);
    kv_u32(w, a, "attention.key_length", (uint32_t)DH);
    kv_u32(w, a, "attention.value_length", (uint32_t)DH);
    kv_u32(w, a, "rope.dimension_count", (uint32_t)DH);
    kv_u32(w, a, "context_length", 64);
    kv_f32(w, a, "rope.freq_base", c->rope_base);
    kv_f32(w, a, "attention.layer_norm_rms_epsilon", c->eps);
    if (c->window)
        kv_u32(w, a, "attention.sliding_window", (uint32_t)c->window);
    if (c->attn_softcap > 0)
        kv_f32(w, a, "attn_logit_softcapping", c->attn_softcap);
    if (c->final_softcap > 0)
        kv_f32(w, a, "final_logit_softcapping", c->final_softcap);
    /* rope scaling: the type, its factor, then the type's own keys */
    const char *scaling = c->rope_linear > 0 ? "linear"
                          : c->llama3        ? "llama3"
                          : c->yarn          ? "yarn"
                                             : NULL;
    if (scaling) {
        char k[128];
        snprintf(k, sizeof k, "%s.rope.scaling.type", a);
        rlx_gguf_writer_set_str(w, k, scaling);
        kv_f32(w, a, "rope.scaling.factor",
               c->rope_linear > 0 ? c->rope_linear
               : c->llama3        ? 8.f
                                  : 4.f);
    }
    if (c->llama3) {
        kv_f32(w, a, "rope.scaling.low_freq_factor", 1.f);
        kv_f32(w, a, "rope.scaling.high_freq_factor", 4.f);
    }
    if (c->llama3 || c->yarn)
        kv_u32(w, a, "rope.scaling.original_context_length", 64);

    add(w, "token_embd.weight", VOCAB, D, EMB);
    if (c->rope_freqs)
        add(w, "rope_freqs.weight", 0, DH / 2, FREQ);
    for (int il = 0; il < c->n_layer; il++) {
        addl(w, il, "attn_norm.weight", 0, D, NORM);
        if (c->fused_qkv)
            addl(w, il, "attn_qkv.weight", (H + 2 * HKV) * DH, D, MAT);
        else {
            addl(w, il, "attn_q.weight", H * DH, D, MAT);
            addl(w, il, "attn_k.weight", HKV * DH, D, MAT);
            addl(w, il, "attn_v.weight", HKV * DH, D, MAT);
        }
        if (c->qkv_bias) {
            addl(w, il, "attn_q.bias", 0, H * DH, BIAS);
            addl(w, il, "attn_k.bias", 0, HKV * DH, BIAS);
            addl(w, il, "attn_v.bias", 0, HKV * DH, BIAS);
        }
        if (c->qk_norm) {
            addl(w, il, "attn_q_norm.weight", 0, DH, NORM);
            addl(w, il, "attn_k_norm.weight", 0, DH, NORM);
        }
        addl(w, il, "attn_output.weight", D, H * DH, MAT);
        if (c->post_norms) {
            addl(w, il, "post_attention_norm.weight", 0, D, NORM);
            addl(w, il, "post_ffw_norm.weight", 0, D, NORM);
        }
        addl(w, il, "ffn_norm.weight", 0, D, NORM);
        if (c->fused_up)
            addl(w, il, "ffn_up.weight", 2 * F, D, MAT);
        else {
            addl(w, il, "ffn_gate.weight", F, D, MAT);
            addl(w, il, "ffn_up.weight", F, D, MAT);
        }
        addl(w, il, "ffn_down.weight", D, F, MAT);
    }
    add(w, "output_norm.weight", 0, D, NORM);
    if (!c->tied)
        add(w, "output.weight", VOCAB, D, MAT);

    char fname[64];
    snprintf(fname, sizeof fname, "llm-%s.gguf", c->name);
    const char *path = rlx_test_tmp(fname);
    rlx_error *err = NULL;
    if (rlx_gguf_writer_write(w, path, &err) != RLX_OK)
        fail_msg("write %s: %s", path, rlx_error_message(err));
    rlx_gguf_writer_free(w);
    return path;
}

static double rel_err(const float *got, const float *want, int n)
{
    double md = 0, mr = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= md)) /* NaN counts */
            md = d;
        if (fabs(want[i]) > mr)
            mr = fabs(want[i]);
    }
    return md / (mr > 0 ? mr : 1);
}

static double tolerance = REL_OK;
static const char *cur_device = "cpu";

static void check(const char *what, const char *name, int row, const float *got, const float *ref,
                  int n_rows)
{
    double e = rel_err(got, ref + (size_t)row * VOCAB, VOCAB * n_rows);
    if (!(e <= tolerance))
        fail_msg("%s on %s, %s, row %d: relative error %.3g > %.0e (got %.5f, want %.5f)", name,
                 cur_device, what, row, e, tolerance, got[0], ref[(size_t)row * VOCAB]);
}

static void run_on(const char *device, const arch_case *c, rlx_dtype weights, rlx_dtype kv,
                   double tol)
{
    char rel[128];
    snprintf(rel, sizeof rel, "%s/tests/fixtures/llm-ref-%s.f32", RLX_TEST_SOURCE_DIR, c->name);
    size_t size = 0;
    float *ref = rlx_test_read_file(rel, &size);
    if (!ref || size != sizeof(float) * N_TOK * VOCAB)
        fail_msg("fixture %s missing or of the wrong size", rel);

    store_as = weights;
    tolerance = tol;
    const char *path = write_model(c);
    store_as = RLX_DTYPE_F32;
    rlx_llm_params p = rlx_llm_default_params();
    p.kv_dtype = kv;
    p.n_ctx = 64;
    p.n_batch = 16;
    p.n_threads = 1;
    p.device = device;
    cur_device = device;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    if (rlx_llm_load(path, &p, &m, &err) != RLX_OK)
        fail_msg("%s on %s: load: %s", c->name, device, rlx_error_message(err));

    float *all = malloc(sizeof(float) * N_TOK * VOCAB);
    if (rlx_llm_eval_all(m, tokens, N_TOK, all, &err) != RLX_OK)
        fail_msg("%s on %s: eval_all: %s", c->name, device, rlx_error_message(err));
    for (int r = 0; r < N_TOK; r++)
        check("one run, all positions", c->name, r, all + (size_t)r * VOCAB, ref, 1);

    rlx_llm_reset(m);
    float last[VOCAB];
    if (rlx_llm_eval(m, tokens, 5, last, &err) != RLX_OK)
        fail_msg("%s on %s: prefill: %s", c->name, device, rlx_error_message(err));
    check("prefill of 5", c->name, 4, last, ref, 1);
    for (int t = 5; t < N_TOK; t++) {
        if (rlx_llm_eval(m, tokens + t, 1, last, &err) != RLX_OK)
            fail_msg("%s on %s: decode: %s", c->name, device, rlx_error_message(err));
        check("decode step", c->name, t, last, ref, 1);
    }
    free(all);
    free(ref);
    rlx_llm_free(m);
}

/* Every backend of the registry that has a device. */
static void run_case_as(const arch_case *c, rlx_dtype weights, rlx_dtype kv, double tol)
{
    int n = 0;
    for (int b = 0; b < rlx_backend_count(); b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if (!be || !be->device_count || be->device_count() < 1)
            continue;
        run_on(be->name, c, weights, kv, tol);
        n++;
    }
    assert_true(n > 0);
}

static void run_case(const arch_case *c)
{
    run_case_as(c, RLX_DTYPE_F32, RLX_DTYPE_F32, REL_OK);
}

/* The default F16 cache rounds K and V to 11 bits: 2e-3 relative. */
static void test_llama_f16_cache(void **state)
{
    (void)state;
    run_case_as(&cases[0], RLX_DTYPE_F32, RLX_DTYPE_F16, 2e-3);
}

/* F16 weights (read by the kernels as stored): the reference saw the f32
 * values, so the weights' own rounding shows, about 1e-3. */
static void test_qwen3_f16_weights(void **state)
{
    (void)state;
    run_case_as(&cases[4], RLX_DTYPE_F16, RLX_DTYPE_F32, 5e-3);
}

/* Q8_0 weights stay packed: matmuls and the embedding gather read the
 * blocks (the matmuls quantize activations to Q8_0 too, as llama.cpp does);
 * against the f32 reference that costs about 1e-2. */
static void test_llama_q8_0(void **state)
{
    (void)state;
    run_case_as(&cases[0], RLX_DTYPE_Q8_0, RLX_DTYPE_F16, 3e-2);
}

/* A Q8_0 KV cache (on every backend: Vulkan's append quantizes on the
 * device and its attention decodes the blocks): K and V are rounded per
 * block of 32 to an f16 scale d = max|x| / 127 and int8 steps, an error of
 * at most d / 2 = max|x| / 254 (0.4% of the block's largest entry) per
 * element, seen through softmax and the value sum and then the rest of the
 * network. That step is 8x the F16 cache's (2^-11 relative, bounded by 2e-3
 * above), so 8 x 2e-3 = 1.6e-2, rounded to 2e-2; measured up to 6e-3 here.
 * qwen3 (qk norms) and gemma2 (sliding window, soft-capping) have 2 kv
 * heads x 16 = 32-entry rows: one block per token spanning both heads. A
 * model whose rows are not a multiple of 32 (llama here: 2 x 8) is refused
 * at load, naming the sizes. */
static void test_q8_0_cache(void **state)
{
    (void)state;
    run_case_as(&cases[4], RLX_DTYPE_F32, RLX_DTYPE_Q8_0, Q8_KV_TOL);
    run_case_as(&cases[5], RLX_DTYPE_F32, RLX_DTYPE_Q8_0, Q8_KV_TOL);
    const char *path = write_model(&cases[0]);
    rlx_llm_params p = rlx_llm_default_params();
    p.kv_dtype = RLX_DTYPE_Q8_0;
    p.n_ctx = 64;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_llm_load(path, &p, &m, &err), RLX_ERR_UNSUPPORTED);
    assert_null(m);
    assert_non_null(strstr(rlx_error_message(err), "multiples of 32"));
    rlx_error_free(err);
}

/* The model of case c written with its matrices packed as t, against the
 * same model written with the dequantized values as F32: logits within tol. */
static void packed_vs_dequantized(rlx_dtype t, const arch_case *c, double tol, const char *what)
{
    float *logits[2];
    for (int k = 0; k < 2; k++) {
        store_as = t;
        q4_dequantized = k == 1;
        const char *path = write_model(c);
        store_as = RLX_DTYPE_F32;
        q4_dequantized = false;
        rlx_llm_params p = rlx_llm_default_params();
        p.kv_dtype = RLX_DTYPE_F32;
        p.n_ctx = 64;
        p.n_batch = 16;
        p.n_threads = 1;
        rlx_llm *m = NULL;
        rlx_error *err = NULL;
        if (rlx_llm_load(path, &p, &m, &err) != RLX_OK)
            fail_msg("%s: load: %s", what, rlx_error_message(err));
        logits[k] = malloc(sizeof(float) * N_TOK * VOCAB);
        if (rlx_llm_eval_all(m, tokens, N_TOK, logits[k], &err) != RLX_OK)
            fail_msg("%s: eval_all: %s", what, rlx_error_message(err));
        rlx_llm_free(m);
    }
    tolerance = tol;
    cur_device = "cpu";
    for (int r = 0; r < N_TOK; r++)
        check(what, c->name, r, logits[0] + (size_t)r * VOCAB, logits[1], 1);
    free(logits[0]);
    free(logits[1]);
}

/* Q4_0 weights stay packed too. Their own rounding (1/16 of a block's
 * range) is far above what the reference comparison could resolve, so the
 * packed model is compared with the same model written with the dequantized
 * values as F32 (itself verified above): what remains is the Q8_0
 * quantization of the activations inside the quantized matmuls, ~1e-2. */
static void test_qwen2_q4_0(void **state)
{
    (void)state;
    packed_vs_dequantized(RLX_DTYPE_Q4_0, &cases[3], 2e-2, "Q4_0 vs its dequantized F32");
}

/* Q4_K (and Q6_K) weights, packed, against the same model written with the
 * dequantized values as F32, as for Q4_0 above. K-quant blocks hold 256
 * values, so this qwen2 variant has rows of 256 (hidden 256, 4 x 64 heads)
 * and 512 (FFN): every matrix, the token embedding included, is stored in
 * the K-quant type. What remains is the activations' quantization to Q8_K
 * (8-bit, one f32 scale per 256 values) inside the K-quant matmuls: measured
 * (worst row, max |diff| / max |logit|) 2.2e-2 for Q4_K and 2.1e-2 for Q6_K
 * (Q4_0 with Q8_0 activations on this model: 1.6e-2). Tolerance KQ_TOL =
 * 3e-2, the cap for this check, so the margin is only ~1.4x; writing the
 * original f32 weights as the twin instead fails at 0.16. */
static const arch_case qwen2_256[] = {
    {"qwen2-256", "qwen2", .n_layer = 2, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
     .n_ff = 512, .rope_base = 1e6f, .eps = 1e-6f, .qkv_bias = true},
};

static void test_qwen2_q4_k(void **state)
{
    (void)state;
    packed_vs_dequantized(RLX_DTYPE_Q4_K, &qwen2_256[0], KQ_TOL, "Q4_K");
    packed_vs_dequantized(RLX_DTYPE_Q6_K, &qwen2_256[0], KQ_TOL, "Q6_K");
}

/* ---- Hugging Face checkpoints ------------------------------------------------
 * The same models as Hugging Face folders: the GGUF written above is turned
 * back into what transformers saves (the HF tensor names, Q/K rows of
 * llama/mistral un-permuted to rotate_half order as llm_reference.py does,
 * config.json), loaded by rlx_llm_load from the folder and compared with the
 * same PyTorch reference logits at the F32 tolerance. */

static void hf_name(const char *gguf, char *out, size_t cap)
{
    static const char *const map[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"},
        {"attn_k.bias", "self_attn.k_proj.bias"},
        {"attn_v.bias", "self_attn.v_proj.bias"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"},
        {"attn_k_norm.weight", "self_attn.k_norm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
    };
    int il, used = 0;
    if (!strcmp(gguf, "token_embd.weight"))
        snprintf(out, cap, "model.embed_tokens.weight");
    else if (!strcmp(gguf, "output_norm.weight"))
        snprintf(out, cap, "model.norm.weight");
    else if (!strcmp(gguf, "output.weight"))
        snprintf(out, cap, "lm_head.weight");
    else if (sscanf(gguf, "blk.%d.%n", &il, &used) == 1 && used > 0) {
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (!strcmp(gguf + used, map[i][0])) {
                snprintf(out, cap, "model.layers.%d.%s", il, map[i][1]);
                return;
            }
        fail_msg("no HF name for %s", gguf);
    } else
        fail_msg("no HF name for %s", gguf);
}

typedef struct {
    char name[96];
    int rank;
    int64_t dims[2];
    float *v;
} hf_t;

/* A safetensors file: 8-byte header length, JSON header, F32 or BF16 data. */
static void write_safetensors(const char *path, hf_t *t, int n, bool bf16)
{
    char *hdr = malloc(65536);
    size_t at = 0, off = 0, es = bf16 ? 2 : 4;
    at += (size_t)snprintf(hdr + at, 65536 - at, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t bytes = es * (size_t)(t[i].rank == 2 ? t[i].dims[0] * t[i].dims[1] : t[i].dims[0]);
        at += (size_t)snprintf(hdr + at, 65536 - at, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld",
                               t[i].name, bf16 ? "BF16" : "F32", (long long)t[i].dims[0]);
        if (t[i].rank == 2)
            at += (size_t)snprintf(hdr + at, 65536 - at, ",%lld", (long long)t[i].dims[1]);
        at += (size_t)snprintf(hdr + at, 65536 - at, "],\"data_offsets\":[%zu,%zu]}", off,
                               off + bytes);
        off += bytes;
    }
    at += (size_t)snprintf(hdr + at, 65536 - at, "}");
    while (at % 8)
        hdr[at++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t hl = at;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, at, f);
    for (int i = 0; i < n; i++) {
        int64_t ne = t[i].rank == 2 ? t[i].dims[0] * t[i].dims[1] : t[i].dims[0];
        for (int64_t k = 0; k < ne; k++) {
            if (bf16) {
                uint16_t h = rlx_f32_to_bf16(t[i].v[k]);
                fwrite(&h, 2, 1, f);
            } else
                fwrite(&t[i].v[k], 4, 1, f);
        }
    }
    fclose(f);
    free(hdr);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The HF folder of case c: one model.safetensors, or two shards and an
 * index when `sharded`. Returns the folder. */
static const char *write_hf(const arch_case *c, bool sharded, bool bf16)
{
    const char *gpath = write_model(c);
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    if (rlx_gguf_open(gpath, &g, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    static char dir[512];
    char rel[96];
    snprintf(rel, sizeof rel, "hf-%s%s%s", c->name, sharded ? "-sharded" : "", bf16 ? "-bf16" : "");
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp(rel));
    mkdir(dir, 0755);
    int n = (int)rlx_gguf_n_tensors(g);
    hf_t *t = calloc((size_t)n, sizeof *t);
    int k = 0;
    bool permuted = !strcmp(c->arch, "llama") || !strcmp(c->arch, "mistral");
    for (int i = 0; i < n; i++) {
        const rlx_gguf_tensor *gt = rlx_gguf_tensor_at(g, (uint64_t)i);
        if (!strcmp(gt->name, "rope_freqs.weight"))
            fail_msg("rope_freqs has no HF tensor");
        assert_int_equal(gt->dtype, RLX_DTYPE_F32);
        hf_name(gt->name, t[k].name, sizeof t[k].name);
        t[k].rank = (int)gt->n_dims;
        t[k].dims[0] = gt->n_dims == 2 ? (int64_t)gt->ne[1] : (int64_t)gt->ne[0];
        t[k].dims[1] = gt->n_dims == 2 ? (int64_t)gt->ne[0] : 1;
        int64_t rows = t[k].rank == 2 ? t[k].dims[0] : 1,
                cols = t[k].rank == 2 ? t[k].dims[1] : t[k].dims[0];
        t[k].v = malloc(sizeof(float) * (size_t)(rows * cols));
        const float *src = rlx_gguf_tensor_data(g, gt);
        const char *q = strstr(gt->name, "attn_q.weight"), *kk = strstr(gt->name, "attn_k.weight");
        if (permuted && (q || kk)) {
            /* llama.cpp's permute undone: GGUF row h*2*half + i*2 + j is
             * HF row h*2*half + j*half + i */
            int64_t nh = q ? c->n_head : c->n_head_kv, half = rows / nh / 2;
            for (int64_t h = 0; h < nh; h++)
                for (int64_t i2 = 0; i2 < half; i2++)
                    for (int j = 0; j < 2; j++)
                        memcpy(t[k].v + (h * 2 * half + j * half + i2) * cols,
                               src + (h * 2 * half + i2 * 2 + j) * cols, sizeof(float) * cols);
        } else
            memcpy(t[k].v, src, sizeof(float) * (size_t)(rows * cols));
        k++;
    }
    rlx_gguf_close(g);
    char p[600];
    if (sharded) {
        int half = k / 2;
        snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
        write_safetensors(p, t, half, bf16);
        snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
        write_safetensors(p, t + half, k - half, bf16);
        char *idx = malloc(65536);
        size_t at = (size_t)snprintf(idx, 65536, "{\"metadata\":{},\"weight_map\":{");
        for (int i = 0; i < k; i++)
            at += (size_t)snprintf(idx + at, 65536 - at,
                                   "%s\"%s\":\"model-0000%d-of-00002.safetensors\"", i ? "," : "",
                                   t[i].name, i < half ? 1 : 2);
        snprintf(idx + at, 65536 - at, "}}");
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
        write_text(p, idx);
        free(idx);
    } else {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        write_safetensors(p, t, k, bf16);
    }
    for (int i = 0; i < k; i++)
        free(t[i].v);
    free(t);

    char cfg[2048], extra[512] = "";
    size_t ea = 0;
    if (c->llama3)
        ea += (size_t)snprintf(extra + ea, sizeof extra - ea,
                               ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,"
                               "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                               "\"original_max_position_embeddings\":64}");
    if (c->yarn)
        ea += (size_t)snprintf(extra + ea, sizeof extra - ea,
                               ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,"
                               "\"original_max_position_embeddings\":64}");
    if (c->window)
        ea += (size_t)snprintf(extra + ea, sizeof extra - ea, ",\"sliding_window\":%d", c->window);
    static const char *const cls[][2] = {{"llama", "LlamaForCausalLM"},
                                         {"mistral", "MistralForCausalLM"},
                                         {"qwen2", "Qwen2ForCausalLM"},
                                         {"qwen3", "Qwen3ForCausalLM"}};
    const char *cl = "?";
    for (int i = 0; i < 4; i++)
        if (!strcmp(cls[i][0], c->arch))
            cl = cls[i][1];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"%s\"],\"model_type\":\"%s\",\"hidden_size\":%d,"
             "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
             "\"num_key_value_heads\":%d,\"head_dim\":%d,\"max_position_embeddings\":64,"
             "\"rms_norm_eps\":%.9g,\"rope_theta\":%.9g,\"tie_word_embeddings\":%s,"
             "\"vocab_size\":%d,\"torch_dtype\":\"%s\"%s}\n",
             cl, c->arch, c->n_embd, c->n_ff, c->n_layer, c->n_head, c->n_head_kv, c->head_dim,
             (double)c->eps, (double)c->rope_base, c->tied ? "true" : "false", VOCAB,
             bf16 ? "bfloat16" : "float32", extra);
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_text(p, cfg);
    return dir;
}

static void run_hf(const arch_case *c, bool sharded, bool bf16, double tol)
{
    char rel[128];
    snprintf(rel, sizeof rel, "%s/tests/fixtures/llm-ref-%s.f32", RLX_TEST_SOURCE_DIR, c->name);
    size_t size = 0;
    float *ref = rlx_test_read_file(rel, &size);
    if (!ref || size != sizeof(float) * N_TOK * VOCAB)
        fail_msg("fixture %s missing or of the wrong size", rel);
    const char *dir = write_hf(c, sharded, bf16);
    rlx_llm_params p = rlx_llm_default_params();
    p.kv_dtype = RLX_DTYPE_F32;
    p.n_ctx = 64;
    p.n_batch = 16;
    p.n_threads = 1;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    if (rlx_llm_load(dir, &p, &m, &err) != RLX_OK)
        fail_msg("%s: load %s: %s", c->name, dir, rlx_error_message(err));
    const rlx_llm_config *cfg = rlx_llm_get_config(m);
    assert_int_equal(cfg->n_vocab, VOCAB);
    assert_int_equal(cfg->tied_output, c->tied);
    assert_int_equal(cfg->rope_mode, RLX_ROPE_NEOX);
    assert_null(rlx_llm_get_tokenizer(m));
    tolerance = tol;
    cur_device = "cpu (HF folder)";
    float *all = malloc(sizeof(float) * N_TOK * VOCAB);
    if (rlx_llm_eval_all(m, tokens, N_TOK, all, &err) != RLX_OK)
        fail_msg("%s: eval_all: %s", c->name, rlx_error_message(err));
    for (int r = 0; r < N_TOK; r++)
        check("HF checkpoint, all positions", c->name, r, all + (size_t)r * VOCAB, ref, 1);
    free(all);
    free(ref);
    rlx_llm_free(m);
}

/* llama (llama3 rope scaling, un-permuted Q/K, two shards and an index),
 * qwen3 (q/k norms, tied head), qwen2 (biases) and mistral (sliding
 * window) in F32 at 1e-4; qwen3 in BF16 too, where the weights' 8-bit
 * mantissas alone move the logits (5e-3 at the first position; the bound
 * is 4e-2). */
static void test_hf_checkpoints(void **state)
{
    (void)state;
    run_hf(&cases[1], true, false, REL_OK);
    run_hf(&cases[4], false, false, REL_OK);
    run_hf(&cases[3], false, false, REL_OK);
    run_hf(&cases[2], false, false, REL_OK);
    run_hf(&cases[4], false, true, 4e-2);
    run_hf(&cases[8], false, false, REL_OK); /* YaRN from rope_scaling */

    /* config.json errors name the file and the key */
    const char *dir = write_hf(&cases[4], false, false);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_text(p, "{\"model_type\":\"gpt_neox\",\"hidden_size\":32}");
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_llm_load(dir, NULL, &m, &err), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "gpt_neox"));
    rlx_error_free(err);
    err = NULL;
    write_text(p, "{\"model_type\":\"qwen3\",\"hidden_size\":32}");
    assert_int_equal(rlx_llm_load(dir, NULL, &m, &err), RLX_ERR_FORMAT);
    assert_non_null(strstr(rlx_error_message(err), "'num_hidden_layers' is missing"));
    rlx_error_free(err);
    err = NULL;
    write_text(p, "{\"model_type\": ");
    assert_true(rlx_llm_load(dir, NULL, &m, &err) != RLX_OK);
    assert_null(m);
    rlx_error_free(err);
}

/* A Hugging Face folder with the real Qwen3 tokenizer.json and
 * tokenizer_config.json beside random weights (vocabulary 151936, width 32,
 * BF16): the tokenizer and the chat template come from the folder, the chat
 * prompt is ChatML, and greedy generation runs. */
static void test_hf_with_tokenizer(void **state)
{
    (void)state;
    const char *dir = rlx_test_tmp("hf-qwen3-tok");
    mkdir(dir, 0755);
    const int64_t V = 151936, D = 32, F = 64, H = 4, HKV = 2, DH = 16;
    struct {
        const char *name;
        int64_t rows, cols;
        float center, spread;
    } spec[] = {
        {"model.embed_tokens.weight", V, D, 0, 2},
        {"model.norm.weight", 0, D, 1, 0.2f},
        {"model.layers.0.input_layernorm.weight", 0, D, 1, 0.2f},
        {"model.layers.0.post_attention_layernorm.weight", 0, D, 1, 0.2f},
        {"model.layers.0.self_attn.q_proj.weight", H * DH, D, 0, 0.5f},
        {"model.layers.0.self_attn.k_proj.weight", HKV * DH, D, 0, 0.5f},
        {"model.layers.0.self_attn.v_proj.weight", HKV * DH, D, 0, 0.5f},
        {"model.layers.0.self_attn.o_proj.weight", D, H * DH, 0, 0.5f},
        {"model.layers.0.self_attn.q_norm.weight", 0, DH, 1, 0.2f},
        {"model.layers.0.self_attn.k_norm.weight", 0, DH, 1, 0.2f},
        {"model.layers.0.mlp.gate_proj.weight", F, D, 0, 0.5f},
        {"model.layers.0.mlp.up_proj.weight", F, D, 0, 0.5f},
        {"model.layers.0.mlp.down_proj.weight", D, F, 0, 0.5f},
    };
    int n = (int)(sizeof spec / sizeof spec[0]);
    hf_t t[16];
    uint32_t rs = 11;
    for (int i = 0; i < n; i++) {
        snprintf(t[i].name, sizeof t[i].name, "%s", spec[i].name);
        t[i].rank = spec[i].rows ? 2 : 1;
        t[i].dims[0] = spec[i].rows ? spec[i].rows : spec[i].cols;
        t[i].dims[1] = spec[i].rows ? spec[i].cols : 1;
        int64_t ne = spec[i].rows ? spec[i].rows * spec[i].cols : spec[i].cols;
        t[i].v = malloc(sizeof(float) * (size_t)ne);
        for (int64_t k = 0; k < ne; k++) {
            rs = rs * 1664525u + 1013904223u;
            t[i].v[k] = spec[i].center + spec[i].spread * ((float)(rs >> 8) / 16777216.f - 0.5f);
        }
    }
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    write_safetensors(p, t, n, true);
    for (int i = 0; i < n; i++)
        free(t[i].v);
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_text(p, "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\","
                  "\"hidden_size\":32,\"intermediate_size\":64,\"num_hidden_layers\":1,"
                  "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,"
                  "\"max_position_embeddings\":40960,\"rms_norm_eps\":1e-06,"
                  "\"rope_theta\":1000000,\"tie_word_embeddings\":true,\"vocab_size\":151936,"
                  "\"torch_dtype\":\"bfloat16\",\"rope_scaling\":null,\"head_dim_unused\":null}");
    const char *files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        char src[600];
        snprintf(src, sizeof src, "%s", rlx_test_data("tokenizers/hf-qwen3"));
        size_t len = strlen(src);
        snprintf(src + len, sizeof src - len, "/%s", files[i]);
        size_t sz = 0;
        char *data = rlx_test_read_file(src, &sz);
        assert_non_null(data);
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        FILE *f = fopen(p, "wb");
        assert_non_null(f);
        fwrite(data, 1, sz, f);
        fclose(f);
        free(data);
    }

    rlx_llm_params lp = rlx_llm_default_params();
    lp.n_ctx = 128;
    lp.n_threads = 1;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    if (rlx_llm_load(dir, &lp, &m, &err) != RLX_OK)
        fail_msg("load %s: %s", dir, rlx_error_message(err));
    assert_int_equal(rlx_llm_n_ctx(m), 128);
    const rlx_tokenizer *tok = rlx_llm_get_tokenizer(m);
    assert_non_null(tok);
    assert_non_null(rlx_llm_chat_template(m));
    rlx_chat_message msg = {.role = "user", .content = "Hello there"};
    rlx_token *ids = NULL;
    size_t n_ids = 0;
    if (rlx_llm_chat_prompt(m, &msg, 1, true, &ids, &n_ids, &err) != RLX_OK)
        fail_msg("chat prompt: %s", rlx_error_message(err));
    assert_int_equal(ids[0], rlx_tokenizer_find(tok, "<|im_start|>", 12));
    rlx_llm_generate_params gp = rlx_llm_generate_default_params();
    gp.sampler.temperature = 0;
    gp.max_tokens = 5;
    gp.ignore_eos = true;
    rlx_llm_stats st;
    rlx_token *gen = NULL;
    size_t n_gen = 0;
    assert_int_equal(rlx_llm_generate(m, ids, n_ids, &gp, NULL, NULL, &st, &gen, &n_gen, &err),
                     RLX_OK);
    assert_int_equal(n_gen, 5);
    for (size_t i = 0; i < n_gen; i++)
        assert_true(gen[i] >= 0 && gen[i] < 151936);
    free(gen);
    free(ids);
    rlx_llm_free(m);
}

#define CASE_TEST(i, n)                         \
    static void test_##n(void **state)          \
    {                                           \
        (void)state;                            \
        assert_string_equal(cases[i].name, #n); \
        run_case(&cases[i]);                    \
    }
CASE_TEST(0, llama)
CASE_TEST(1, llama3)
CASE_TEST(2, mistral)
CASE_TEST(3, qwen2)
CASE_TEST(4, qwen3)
CASE_TEST(5, gemma2)
CASE_TEST(6, gemma3)
CASE_TEST(7, phi3)

static void test_qwen3_yarn(void **state)
{
    (void)state;
    assert_string_equal(cases[8].name, "qwen3-yarn");
    run_case(&cases[8]);
}

int main(void)
{
    rlx_test_need_data("tokenizers/hf-qwen3", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_qwen3_yarn),
        cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_gemma2),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_llama_f16_cache),
        cmocka_unit_test(test_qwen3_f16_weights),
        cmocka_unit_test(test_llama_q8_0),
        cmocka_unit_test(test_qwen2_q4_0),
        cmocka_unit_test(test_qwen2_q4_k), /* and Q6_K */
        cmocka_unit_test(test_q8_0_cache),
        cmocka_unit_test(test_hf_checkpoints),
        cmocka_unit_test(test_hf_with_tokenizer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
