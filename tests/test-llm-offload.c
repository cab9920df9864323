/* Partial offload: a model that does not fit the GPU device's budget runs
 * its embedding, a prefix of its decoder layers and its output on the
 * device and the other layers on the CPU.
 *
 * - stories260K under budgets that hold only some layers: the split is the
 *   one the budget implies, counted here from the file's tensor sizes and
 *   the KV cache's shape (plus the activation figure the runner reports),
 *   the two sessions hold exactly those weights and caches, and the greedy
 *   tokens equal a CPU-only run. A budget below the embedding and output is
 *   a clear RLX_ERR_BUDGET.
 * - a tiny random llama written with the project's GGUF writer, split at
 *   every layer count: the logits of a chunked prefill, single-token decode
 *   steps and all-position evaluation match the CPU-only run to 1e-4 of
 *   their range (F32 cache: only float32 rounding differs), with the
 *   device's default kernels and once with its f32 kernels.
 *
 * Exits 77 (skipped) without a Vulkan device; on lavapipe the models are
 * tiny and the runs short. With the argument "cuda" the two split tests run
 * on cuda:0 instead (tools/cuda-check.sh on a machine with a GPU; 77
 * without one); the binding-limit tests are Vulkan's alone. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "engine/formats/gguf.h"
#include "engine/quantize/quantize.h"
#include "engine/runtime/session.h"
#include "models/llm/llm.h"
#include "test-util.h"

static const char *device_ = "vulkan:0";
#define DEVICE device_

/* ---- stories260K --------------------------------------------------------- */

#define STORIES_CTX 128
#define N_GEN       12

typedef struct {
    uint64_t fixed; /* token_embd, output_norm (the output is tied) */
    uint64_t layer[16];
    uint64_t kv; /* per layer, F16 K and V over the whole context */
    int32_t n_layer;
} file_sizes;

/* Sizes from the file itself, independent of the runner's accounting. */
static void sizes_of(const char *path, int32_t n_ctx, file_sizes *fs)
{
    memset(fs, 0, sizeof *fs);
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_gguf_open(path, &g, &err), RLX_OK);
    uint32_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0;
    assert_int_equal(rlx_gguf_get_u32(g, "llama.block_count", &n_layer, &err), RLX_OK);
    assert_int_equal(rlx_gguf_get_u32(g, "llama.embedding_length", &n_embd, &err), RLX_OK);
    assert_int_equal(rlx_gguf_get_u32(g, "llama.attention.head_count", &n_head, &err), RLX_OK);
    assert_int_equal(rlx_gguf_get_u32(g, "llama.attention.head_count_kv", &n_head_kv, &err),
                     RLX_OK);
    assert_true(n_layer <= 16);
    fs->n_layer = (int32_t)n_layer;
    fs->kv = 2ull * n_head_kv * (uint64_t)n_ctx * (n_embd / n_head) * 2;
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        int il = -1;
        if (sscanf(t->name, "blk.%d.", &il) == 1) {
            assert_true(il >= 0 && il < (int)n_layer);
            fs->layer[il] += t->n_bytes;
        } else {
            fs->fixed += t->n_bytes;
        }
    }
    rlx_gguf_close(g);
}

static bool force_f32 = false;
static uint64_t bind_limit = 0; /* rlx_llm_params.max_binding_bytes */
static bool unfused = false;    /* rlx_llm_params.cuda_unfused */

static rlx_llm *load(const char *path, const char *device, uint64_t budget, int32_t gpu_layers,
                     int32_t n_ctx, rlx_dtype kv, int32_t n_batch)
{
    rlx_llm_params p = rlx_llm_default_params();
    p.force_f32 = force_f32;
    p.max_binding_bytes = bind_limit;
    p.cuda_unfused = unfused;
    p.cuda_plain_matvec = unfused; /* and no streamed products */
    p.device = device;
    p.memory_budget = budget;
    p.gpu_layers = gpu_layers;
    p.n_ctx = n_ctx;
    p.kv_dtype = kv;
    p.n_batch = n_batch;
    p.n_threads = 2;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    if (rlx_llm_load(path, &p, &m, &err) != RLX_OK)
        fail_msg("load %s on %s: %s", path, device, rlx_error_message(err));
    return m;
}

static void greedy(rlx_llm *m, rlx_token *out)
{
    rlx_token *prompt = NULL;
    size_t n = 0;
    rlx_error *err = NULL;
    assert_int_equal(rlx_llm_tokenize(m, "Once upon a time", true, false, &prompt, &n, &err),
                     RLX_OK);
    rlx_llm_generate_params gp = rlx_llm_generate_default_params();
    gp.max_tokens = N_GEN;
    gp.sampler.temperature = 0;
    gp.ignore_eos = true;
    rlx_token *gen = NULL;
    size_t n_gen = 0;
    if (rlx_llm_generate(m, prompt, n, &gp, NULL, NULL, NULL, &gen, &n_gen, &err) != RLX_OK)
        fail_msg("generate: %s", rlx_error_message(err));
    assert_int_equal(n_gen, N_GEN);
    memcpy(out, gen, sizeof *gen * N_GEN);
    free(gen);
    free(prompt);
}

static void test_stories_split(void **state)
{
    (void)state;
    const char *path = rlx_test_data("llm/stories260K.gguf");
    file_sizes fs;
    sizes_of(path, STORIES_CTX, &fs);
    assert_int_equal(fs.n_layer, 5);

    rlx_token want[N_GEN], got[N_GEN];
    rlx_llm *cpu = load(path, "cpu", 0, 0, STORIES_CTX, RLX_DTYPE_F16, 0);
    greedy(cpu, want);
    int32_t n_gpu = -1, n_total = -1;
    rlx_llm_placement(cpu, &n_gpu, &n_total);
    assert_int_equal(n_gpu, 0);
    assert_int_equal(n_total, 5);
    assert_false(rlx_llm_get_placement(cpu).on_gpu);
    rlx_llm_free(cpu);

    /* the whole model on the device: weights and cache as the file says */
    rlx_llm *all = load(path, DEVICE, 0, 0, STORIES_CTX, RLX_DTYPE_F16, 0);
    rlx_llm_placement_info pi = rlx_llm_get_placement(all);
    assert_true(pi.on_gpu);
    assert_string_equal(pi.device, DEVICE);
    assert_int_equal(pi.n_gpu_layers, 5);
    assert_null(rlx_llm_cpu_session(all));
    uint64_t act = pi.activation_bytes;
    assert_true(act > 0);
    assert_int_equal(pi.fixed_bytes, fs.fixed);
    uint64_t whole = fs.fixed + act;
    for (int i = 0; i < 5; i++)
        whole += fs.layer[i] + fs.kv;
    assert_int_equal(pi.device_bytes, whole);
    rlx_llm_free(all);

    /* budgets that hold the embedding, output, activations and k layers
     * with half a layer to spare */
    for (int32_t k = 0; k < 5; k++) {
        uint64_t budget = fs.fixed + act + (fs.layer[k] + fs.kv) / 2;
        for (int32_t i = 0; i < k; i++)
            budget += fs.layer[i] + fs.kv;
        rlx_llm *m = load(path, DEVICE, budget, 0, STORIES_CTX, RLX_DTYPE_F16, 0);
        pi = rlx_llm_get_placement(m);
        assert_int_equal(pi.n_gpu_layers, k);
        assert_int_equal(pi.n_layers, 5);
        assert_int_equal(pi.budget_bytes, budget);
        assert_true(pi.device_bytes <= budget);
        rlx_llm_placement(m, &n_gpu, &n_total);
        assert_int_equal(n_gpu, k);
        assert_int_equal(n_total, 5);

        /* the device holds the embedding and the first k layers, the CPU
         * the others and their caches */
        rlx_session_memory_info gm = rlx_session_memory(rlx_llm_session(m));
        rlx_session_memory_info cm = rlx_session_memory(rlx_llm_cpu_session(m));
        uint64_t gw = fs.fixed, cw = 0;
        for (int32_t i = 0; i < 5; i++)
            *(i < k ? &gw : &cw) += fs.layer[i];
        assert_int_equal(gm.weights_bytes, gw);
        assert_int_equal(gm.state_bytes, (uint64_t)k * fs.kv);
        assert_int_equal(cm.weights_bytes, cw);
        assert_int_equal(cm.state_bytes, (uint64_t)(5 - k) * fs.kv);
        assert_int_equal(pi.cpu_bytes, cm.weights_bytes + cm.state_bytes + cm.arena_bytes);

        if (k == 2 || k == 0) { /* lavapipe is slow: two generations */
            greedy(m, got);
            assert_memory_equal(got, want, sizeof want);
        }
        rlx_llm_free(m);
    }

    /* not even the embedding and output */
    rlx_llm_params p = rlx_llm_default_params();
    p.device = DEVICE;
    p.memory_budget = fs.fixed + act / 2;
    p.n_ctx = STORIES_CTX;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_llm_load(path, &p, &m, &err), RLX_ERR_BUDGET);
    assert_null(m);
    assert_non_null(strstr(rlx_error_message(err), "embedding and output"));
    assert_non_null(strstr(rlx_error_message(err), DEVICE));
    rlx_error_free(err);
    err = NULL;

    /* a layer count that does not fit is refused, not silently lowered */
    p.memory_budget = fs.fixed + act + fs.layer[0] + fs.kv + fs.layer[1] / 2;
    p.gpu_layers = 3;
    assert_int_equal(rlx_llm_load(path, &p, &m, &err), RLX_ERR_BUDGET);
    assert_null(m);
    rlx_error_free(err);
}

/* ---- quantized weights ------------------------------------------------------ */

static const char *write_llama(const char *file, int n_layer, int d, int f, int h, int hkv, int dh,
                               int vocab);
static const char *write_arch(const char *file, const char *arch, int n_layer, int d, int f, int h,
                              int hkv, int dh, int vocab);

/* `src` quantized to `type`: a prompt, then one-token steps (the device's
 * integer matrix-vector kernels, the q, k and v products sharing one
 * rounding of their input, which a norm of a 128-multiple width rounds as
 * it writes), against the CPU. Both round the activations to 8-bit blocks
 * for these products, in their own order, and the device's prompt runs on
 * f16 tensor cores: the logits agree to 3% of their range, far inside what
 * a wrong block (a whole 32-value term) moves. On CUDA, with
 * both_fusings, a third model runs the same steps without the launch
 * fusions (rlx_llm_params.cuda_unfused: every instruction its own
 * launch, the paths a fusion does not take) and with every matrix-vector
 * product in its plain form (cuda_plain_matvec; the fused model's large
 * ones stream their weights where they have more column tiles than the
 * SMs hold blocks: the emulator's 8). */
static void quant_vs_cpu(const char *src, rlx_quantize_type type, int want, bool both_fusings)
{
    char path[256];
    snprintf(path, sizeof path, "%s/rlx-offload-q-%d-%s.gguf",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
             rlx_quantize_type_name(type));
    rlx_quantize_params qp = rlx_quantize_default_params();
    /* the _M mixes: Q6_K v and down in some layers */
    qp.pure = type != RLX_QUANTIZE_Q4_K_M && type != RLX_QUANTIZE_Q5_K_M;
    qp.n_threads = 2;
    rlx_error *err = NULL;
    if (rlx_quantize_file(src, path, type, qp, NULL, &err) != RLX_OK)
        fail_msg("quantize: %s", rlx_error_message(err));
    int nm = both_fusings && !strncmp(DEVICE, "cuda", 4) ? 3 : 2;
    rlx_llm *ms[3] = {load(path, "cpu", 0, 0, 64, RLX_DTYPE_F16, 0),
                      load(path, DEVICE, 0, 0, 64, RLX_DTYPE_F16, 0), NULL};
    if (nm == 3) {
        unfused = true;
        ms[2] = load(path, DEVICE, 0, 0, 64, RLX_DTYPE_F16, 0);
        unfused = false;
    }
    int32_t nv = rlx_llm_get_config(ms[0])->n_vocab;
    float *lg[3];
    for (int k = 0; k < 3; k++)
        lg[k] = malloc(sizeof(float) * (size_t)nv);
    rlx_token toks[14] = {1, 40, 47, 21, 37, 30, 29, 28, 27, 26, 35, 33, 31, 29};
    for (int step = 0; step < 9; step++) {
        size_t off = step == 0 ? 0 : (size_t)step + 5, n = step == 0 ? 6 : 1;
        for (int k = 0; k < nm; k++)
            if (rlx_llm_eval(ms[k], toks + off, n, lg[k], &err) != RLX_OK)
                fail_msg("eval on %s%s: %s", k ? DEVICE : "cpu", k == 2 ? " (unfused)" : "",
                         rlx_error_message(err));
        for (int k = 1; k < nm; k++) {
            float lo = lg[0][0], hi = lg[0][0], worst = 0;
            for (int32_t i = 0; i < nv; i++) {
                lo = fminf(lo, lg[0][i]);
                hi = fmaxf(hi, lg[0][i]);
                worst = fmaxf(worst, fabsf(lg[0][i] - lg[k][i]));
            }
            if (!(worst <= 0.03f * (hi - lo)))
                fail_msg("%s %s%s step %d: logits differ by %g, range %g", src,
                         rlx_quantize_type_name(type), k == 2 ? " (unfused)" : "", step,
                         (double)worst, (double)(hi - lo));
        }
    }
    if (!strncmp(DEVICE, "cuda", 4)) {
        /* a decode step's launches: the same step timed op by op launches
         * each alone; untimed, q, k and v are one launch (2 fewer a layer
         * at the least; one of mixed weight types in the layers where
         * Q4_K_M's mix gives v Q6_K weights). Either way the cache appends launch nothing (the
         * key rope and the value product write the cache), and where the
         * weights are quantized the q and k products rope their heads
         * (a Qwen3's norm them first) in their own launch, gate, up and
         * their product are one launch and the norms after the o and down
         * products run in those products' launches (the last layer's
         * down product runs the output norm): a Llama or Qwen3 layer is
         * then 5 launches, plus
         * the embedding, the first norm, the last layer's copies of its
         * one row (the attention's, which rounds it for the output
         * projection, and the residual's: one launch) and the head's
         * product. want: that total (0: not checked) */
        rlx_llm_decode_info grouped, alone;
        rlx_llm_decode_stats(ms[1], &grouped);
        rlx_session_set_profiling(rlx_llm_session(ms[1]), true);
        if (rlx_llm_eval(ms[1], toks + 13, 1, lg[1], &err) != RLX_OK)
            fail_msg("timed eval: %s", rlx_error_message(err));
        rlx_session_set_profiling(rlx_llm_session(ms[1]), false);
        rlx_llm_decode_stats(ms[1], &alone);
        int32_t nl = rlx_llm_get_config(ms[1])->n_layer;
        printf("%s %s: a decode step in %llu launches, %llu timed op by op (%d layers)\n", src,
               rlx_quantize_type_name(type), (unsigned long long)grouped.launches,
               (unsigned long long)alone.launches, (int)nl);
        assert_true(grouped.launches > 0);
        assert_true(grouped.launches + 2 * (uint64_t)nl <= alone.launches);
        if (want > 0)
            assert_int_equal(grouped.launches, (uint64_t)want);
        if (nm == 3) {
            /* without the fusions: q, k and v, the two ropes, the two
             * appends, gate and up and their product, the o and down
             * products and their norms, and attention and its output's
             * rounding each launch alone: 9 launches more a layer at the
             * least */
            rlx_llm_decode_info plain;
            rlx_llm_decode_stats(ms[2], &plain);
            printf("%s %s: a decode step in %llu launches unfused\n", src,
                   rlx_quantize_type_name(type), (unsigned long long)plain.launches);
            assert_true(plain.launches >= grouped.launches + 9 * (uint64_t)nl);
        }
    }
    for (int k = 0; k < 3; k++) {
        free(lg[k]);
        rlx_llm_free(ms[k]);
    }
    remove(path);
}

static void test_quantized(void **state)
{
    (void)state;
    /* stories260K: rows of 64 */
    /* (its down product's K, 172, is no whole number of blocks: it stays
     * f32, so its norm launches alone) */
    quant_vs_cpu(rlx_test_data("llm/stories260K.gguf"), RLX_QUANTIZE_Q8_0, 0, false);
    quant_vs_cpu(rlx_test_data("llm/stories260K.gguf"), RLX_QUANTIZE_Q4_0, 0, false);
    /* a random llama with rows of 256 (Q4_K blocks, norms that round):
     * 2 layers of 5 launches, and 4 */
    const char *wide = write_llama("llm-offload-wide.gguf", 2, 256, 512, 4, 2, 64, 64);
    quant_vs_cpu(wide, RLX_QUANTIZE_Q8_0, 14, false);
    quant_vs_cpu(wide, RLX_QUANTIZE_Q4_K_M, 14, true);
    quant_vs_cpu(wide, RLX_QUANTIZE_Q5_K_M, 14, true);
    /* a random Qwen3 (per-head q and k norms, NeoX rope) with Qwen3's head
     * dim, 128: 5 launches a layer, and 4 */
    const char *qw = write_arch("llm-offload-qwen3.gguf", "qwen3", 2, 256, 512, 4, 2, 128, 64);
    quant_vs_cpu(qw, RLX_QUANTIZE_Q4_K_M, 14, true);
}

/* ---- a tiny random llama, split everywhere -------------------------------- */

#define T_VOCAB 64
#define T_D     32
#define T_H     4
#define T_HKV   2
#define T_DH    8
#define T_F     48
#define T_L     4
#define T_TOK   10

static void add_rand(rlx_gguf_writer *w, const char *name, int64_t rows, int64_t cols, float scale,
                     float bias, uint64_t seed)
{
    int64_t n = rows ? rows * cols : cols;
    float *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = seed + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        v[i] = bias + scale * (float)(2.0 * ((double)(z >> 40) / 16777216.0) - 1.0);
    }
    uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
    rlx_gguf_writer_add_tensor(w, name, RLX_DTYPE_F32, rows ? 2 : 1, ne, v, sizeof *v * (size_t)n);
    free(v);
}

/* a random llama of the given shape, written to the test folder */
static const char *write_llama(const char *file, int n_layer, int d, int f, int h, int hkv, int dh,
                               int vocab)
{
    return write_arch(file, "llama", n_layer, d, f, h, hkv, dh, vocab);
}

/* A random model of architecture "llama" or "qwen3" (a Qwen3 adds the
 * per-head q and k norms and rotates halves, NeoX style) */
static const char *write_arch(const char *file, const char *arch, int n_layer, int d, int f, int h,
                              int hkv, int dh, int vocab)
{
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    bool qwen3 = !strcmp(arch, "qwen3");
    char key[96];
#define KEY(k) (snprintf(key, sizeof key, "%s.%s", arch, k), key)
    rlx_gguf_writer_set_str(w, "general.architecture", arch);
    rlx_gguf_writer_set_u32(w, KEY("block_count"), n_layer);
    rlx_gguf_writer_set_u32(w, KEY("embedding_length"), d);
    rlx_gguf_writer_set_u32(w, KEY("feed_forward_length"), f);
    rlx_gguf_writer_set_u32(w, KEY("attention.head_count"), h);
    rlx_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), hkv);
    rlx_gguf_writer_set_u32(w, KEY("context_length"), 64);
    rlx_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    if (qwen3) {
        rlx_gguf_writer_set_u32(w, KEY("attention.key_length"), dh);
        rlx_gguf_writer_set_u32(w, KEY("attention.value_length"), dh);
    }
#undef KEY
    uint64_t seed = 1;
    float mat = (float)(1.5 / sqrt((double)d));
    add_rand(w, "token_embd.weight", vocab, d, 1.f, 0.f, seed++ * 7919);
    char name[64];
    for (int il = 0; il < n_layer; il++) {
#define L(what, rows, cols, sc, b)                           \
    do {                                                     \
        snprintf(name, sizeof name, "blk.%d.%s", il, what);  \
        add_rand(w, name, rows, cols, sc, b, seed++ * 7919); \
    } while (0)
        L("attn_norm.weight", 0, d, 0.2f, 1.f);
        L("attn_q.weight", h * dh, d, mat, 0.f);
        L("attn_k.weight", hkv * dh, d, mat, 0.f);
        L("attn_v.weight", hkv * dh, d, mat, 0.f);
        if (qwen3) {
            L("attn_q_norm.weight", 0, dh, 0.2f, 1.f);
            L("attn_k_norm.weight", 0, dh, 0.2f, 1.f);
        }
        L("attn_output.weight", d, h * dh, mat, 0.f);
        L("ffn_norm.weight", 0, d, 0.2f, 1.f);
        L("ffn_gate.weight", f, d, mat, 0.f);
        L("ffn_up.weight", f, d, mat, 0.f);
        L("ffn_down.weight", d, f, (float)(1.5 / sqrt((double)f)), 0.f);
#undef L
    }
    add_rand(w, "output_norm.weight", 0, d, 0.2f, 1.f, seed++ * 7919);
    add_rand(w, "output.weight", vocab, d, mat, 0.f, seed++ * 7919);
    const char *path = rlx_test_tmp(file);
    rlx_error *err = NULL;
    if (rlx_gguf_writer_write(w, path, &err) != RLX_OK)
        fail_msg("write %s: %s", path, rlx_error_message(err));
    rlx_gguf_writer_free(w);
    return path;
}

static const char *write_tiny(void)
{
    return write_llama("llm-offload-tiny.gguf", T_L, T_D, T_F, T_H, T_HKV, T_DH, T_VOCAB);
}

static const rlx_token tiny_tokens[T_TOK] = {1, 17, 5, 42, 63, 8, 8, 30, 2, 55};

/* logits[0..T_TOK) rows: a 5-token prefill (chunks of 3: two prefill runs)
 * gives row 4, then 5 single-token decodes rows 5..9; then, from position
 * 0 again, all positions of the first 4 tokens in one eval_all (rows 0..3). */
static void tiny_logits(rlx_llm *m, float *out)
{
    rlx_error *err = NULL;
    rlx_llm_reset(m);
    assert_int_equal(rlx_llm_prefill(m, tiny_tokens, 5, out + 4 * T_VOCAB, &err), RLX_OK);
    for (int i = 5; i < T_TOK; i++)
        if (rlx_llm_eval(m, &tiny_tokens[i], 1, out + i * T_VOCAB, &err) != RLX_OK)
            fail_msg("eval: %s", rlx_error_message(err));
    rlx_llm_reset(m);
    if (rlx_llm_eval_all(m, tiny_tokens, 3, out, &err) != RLX_OK)
        fail_msg("eval_all: %s", rlx_error_message(err));
    if (rlx_llm_eval(m, &tiny_tokens[3], 1, out + 3 * T_VOCAB, &err) != RLX_OK)
        fail_msg("eval: %s", rlx_error_message(err));
}

static void test_tiny_every_split(void **state)
{
    (void)state;
    const char *path = write_tiny();
    float *want = malloc(sizeof(float) * T_TOK * T_VOCAB);
    float *got = malloc(sizeof(float) * T_TOK * T_VOCAB);
    rlx_llm *cpu = load(path, "cpu", 0, 0, 32, RLX_DTYPE_F32, 3);
    tiny_logits(cpu, want);
    rlx_llm_free(cpu);
    float range = 0;
    for (int i = 0; i < T_TOK * T_VOCAB; i++)
        range = fmaxf(range, fabsf(want[i]));
    assert_true(range > 0.1f);

    /* gpu_layers < 0: none; 1..3: a split; 4: all (no CPU part); the last
     * run again with the device's f32 kernels */
    const int32_t splits[] = {-1, 1, 2, 3, 4, 2};
    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        force_f32 = s == sizeof splits / sizeof splits[0] - 1;
        rlx_llm *m = load(path, DEVICE, 0, splits[s], 32, RLX_DTYPE_F32, 3);
        rlx_device_info di;
        assert_int_equal(rlx_session_device_info(rlx_llm_session(m), &di, NULL), RLX_OK);
        if (force_f32)
            assert_non_null(strstr(di.features, "f32 kernels"));
        int32_t n_gpu, n_total;
        rlx_llm_placement(m, &n_gpu, &n_total);
        assert_int_equal(n_gpu, splits[s] < 0 ? 0 : splits[s]);
        assert_int_equal(n_total, T_L);
        assert_true((rlx_llm_cpu_session(m) != NULL) == (n_gpu < T_L));
        tiny_logits(m, got);
        double worst = 0;
        for (int i = 0; i < T_TOK * T_VOCAB; i++)
            worst = fmax(worst, fabs((double)got[i] - want[i]) / range);
        if (worst > 1e-4)
            fail_msg("%d GPU layers (%s): logits differ from the CPU by %.3g of their range",
                     (int)n_gpu, di.features, worst);
        rlx_llm_free(m);
    }
    force_f32 = false;
    free(want);
    free(got);
}
/* Logits of stories260K for a prompt (chunked prefill, every position) and
 * then single tokens (the decode path, replayed command buffers). */
#define SB_VOCAB 512
#define SB_DEC   6
static int stories_logits(rlx_llm *m, float *out)
{
    rlx_token *prompt = NULL;
    size_t n = 0;
    rlx_error *err = NULL;
    assert_int_equal(
        rlx_llm_tokenize(m, "Once upon a time there was", true, false, &prompt, &n, &err), RLX_OK);
    assert_true(n >= 5 && n <= 16);
    rlx_llm_reset(m);
    if (rlx_llm_eval_all(m, prompt, n, out, &err) != RLX_OK)
        fail_msg("eval_all: %s", rlx_error_message(err));
    const rlx_token dec[SB_DEC] = {7, 300, 45, 511, 2, 128};
    for (int i = 0; i < SB_DEC; i++)
        if (rlx_llm_eval(m, &dec[i], 1, out + (n + (size_t)i) * SB_VOCAB, &err) != RLX_OK)
            fail_msg("eval: %s", rlx_error_message(err));
    free(prompt);
    return (int)n + SB_DEC;
}

/* Bindings lowered to 8 KiB: the token embedding (128 KiB), the feed-forward
 * weights (44 KiB), the output head, the KV caches and the prefill's
 * activations all run split into chunks over windows. A split changes no
 * arithmetic, so the logits must equal the unsplit run's exactly, in both
 * kernel variants; and they stay within 1e-4 of their range of the CPU's. */
static void test_stories_small_bindings(void **state)
{
    (void)state;
    const char *path = rlx_test_data("llm/stories260K.gguf");
    size_t cap = 32 * SB_VOCAB;
    float *cpu_l = malloc(cap * sizeof(float)), *whole = malloc(cap * sizeof(float)),
          *split = malloc(cap * sizeof(float));
    assert_non_null(cpu_l);
    assert_non_null(whole);
    assert_non_null(split);
    rlx_llm *cpu = load(path, "cpu", 0, 0, STORIES_CTX, RLX_DTYPE_F16, 16);
    int n = stories_logits(cpu, cpu_l);
    rlx_llm_free(cpu);
    float range = 0;
    for (int i = 0; i < n * SB_VOCAB; i++)
        range = fmaxf(range, fabsf(cpu_l[i]));
    for (int f = 0; f < 2; f++) {
        force_f32 = f == 1;
        bind_limit = 0;
        rlx_llm *m = load(path, DEVICE, 0, 0, STORIES_CTX, RLX_DTYPE_F16, 16);
        assert_int_equal(stories_logits(m, whole), n);
        rlx_llm_free(m);
        bind_limit = 8192;
        m = load(path, DEVICE, 0, 0, STORIES_CTX, RLX_DTYPE_F16, 16);
        rlx_device_info di;
        assert_int_equal(rlx_session_device_info(rlx_llm_session(m), &di, NULL), RLX_OK);
        assert_int_equal(di.max_binding_bytes, 8192);
        if (force_f32)
            assert_non_null(strstr(di.features, "f32 kernels"));
        assert_int_equal(rlx_llm_get_placement(m).n_gpu_layers, 5);
        assert_int_equal(stories_logits(m, split), n);
        rlx_llm_free(m);
        double worst = 0;
        for (int i = 0; i < n * SB_VOCAB; i++) {
            if (split[i] != whole[i])
                fail_msg("%s kernels: logit %d is %.9g split and %.9g whole",
                         force_f32 ? "f32" : "default", i, split[i], whole[i]);
            worst = fmax(worst, fabs((double)split[i] - cpu_l[i]) / range);
        }
        print_message("  %s: split logits equal the unsplit run; %.3g of the range from the CPU\n",
                      di.features, worst);
        assert_true(worst < 1e-2);
    }
    force_f32 = false;
    bind_limit = 0;
    free(cpu_l);
    free(whole);
    free(split);
}

static bool count_progress(void *user, const char *stage, double fraction)
{
    (void)fraction;
    if (strcmp(stage, "weights") == 0)
        (*(int *)user)++;
    return true;
}

/* Bindings of 1 KiB: a reshape of 4 KiB that cannot be cut (its operands
 * are not contiguous runs) stops the load with a sentence naming the value,
 * its size and the limit, before any weight goes up. */
static void test_stories_binding_error(void **state)
{
    (void)state;
    rlx_llm_params p = rlx_llm_default_params();
    p.device = DEVICE;
    p.n_ctx = STORIES_CTX;
    p.max_binding_bytes = 1024;
    int calls = 0;
    p.progress = count_progress;
    p.progress_user = &calls;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    assert_int_not_equal(rlx_llm_load(rlx_test_data("llm/stories260K.gguf"), &p, &m, &err), RLX_OK);
    assert_null(m);
    const char *msg = rlx_error_message(err);
    print_message("  %s\n", msg);
    assert_non_null(strstr(msg, "in one binding, more than the 1.0 KiB this device's bindings "
                                "reach"));
    assert_int_equal(calls, 0);
    rlx_error_free(err);
}

#ifdef RLX_TEST_CUDA_EMU
#include "backends/cuda/cuda-internal.h"
#endif

int main(int argc, char **argv)
{
    rlx_test_need_data("llm/stories260K.gguf", NULL);
#ifdef RLX_TEST_CUDA_EMU
    /* the CUDA backend on the CPU emulator of its driver (tests/cuda-emu) */
    cu_driver_use(RLX_TEST_CUDA_EMU);
    cu_blas_use(RLX_TEST_CUDA_EMU);
#endif
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        const rlx_backend_i *cu = rlx_backend_find("cuda");
        if (!cu || cu->device_count() < 1) {
            printf("no CUDA device: skipped\n");
            return 77;
        }
        device_ = "cuda:0";
        const struct CMUnitTest cuda_tests[] = {
            cmocka_unit_test(test_tiny_every_split),
            cmocka_unit_test(test_stories_split),
            cmocka_unit_test(test_quantized),
        };
        return cmocka_run_group_tests(cuda_tests, NULL, NULL);
    }
    const rlx_backend_i *vk = rlx_backend_find("vulkan");
    if (!vk || vk->device_count() < 1) {
        printf("no Vulkan device: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_every_split),
        cmocka_unit_test(test_stories_split),
        cmocka_unit_test(test_quantized),
        cmocka_unit_test(test_stories_small_bindings),
        cmocka_unit_test(test_stories_binding_error),
    };
    if (argc > 1) /* one test by name, e.g. test_stories_small_bindings */
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
