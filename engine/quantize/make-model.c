/* Random-weight model files in real models' shapes; see make-model.h. */
#include "engine/quantize/make-model.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/threadpool.h"
#include "engine/formats/gguf.h"

typedef struct shape_def {
    const char *name, *arch, *general_name;
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
    float rope_base, rms_eps;
    /* llama3 rope scaling (0 factor: none) */
    float rope_factor, low_freq_factor, high_freq_factor;
    uint32_t orig_ctx;
} shape_def;

static const shape_def shapes[] = {
    {"qwen3-0.6b", "qwen3", "Qwen3 0.6B", 28, 1024, 16, 8, 128, 3072, 151936, 40960, 1e6f, 1e-6f, 0,
     0, 0, 0},
    /* FLUX.2 [klein] 4B's text encoder */
    {"qwen3-4b", "qwen3", "Qwen3 4B", 36, 2560, 32, 8, 128, 9728, 151936, 40960, 1e6f, 1e-6f, 0, 0,
     0, 0},
    {"llama-3.2-1b", "llama", "Llama 3.2 1B", 16, 2048, 32, 8, 64, 8192, 128256, 131072, 5e5f,
     1e-5f, 32.0f, 1.0f, 4.0f, 8192},
    {"tiny", "llama", "tiny", 2, 256, 4, 2, 64, 512, 512, 4096, 1e4f, 1e-5f, 0, 0, 0, 0},
};

rlx_make_model_params rlx_make_model_default_params(void)
{
    return (rlx_make_model_params){.shape = "tiny", .seed = 42, .dtype = RLX_DTYPE_F32};
}

const char *rlx_make_model_shapes(void)
{
    return "qwen3-0.6b, qwen3-4b, llama-3.2-1b, tiny";
}

/* ---- random weights ---------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define FILL_BLOCK 4096

typedef struct fill_ctx {
    void *data; /* element `first` of the tensor */
    rlx_dtype dtype;
    uint64_t n, seed; /* n: the tensor's element count */
    uint64_t first, block0;
    float std;
} fill_ctx;

/* Block b (counted from block0) of FILL_BLOCK elements from its own stream:
 * the values do not depend on the thread count or on how the tensor is cut
 * into chunks. Box-Muller pairs. */
static void fill_task(void *p, int64_t bt, int thread)
{
    const fill_ctx *c = p;
    uint64_t b = c->block0 + (uint64_t)bt;
    uint64_t s = c->seed ^ (b * 0xd1342543de82ef95ull);
    uint64_t i0 = (uint64_t)b * FILL_BLOCK, i1 = i0 + FILL_BLOCK;
    if (i1 > c->n)
        i1 = c->n;
    float tmp[FILL_BLOCK];
    for (uint64_t i = i0; i < i1; i += 2) {
        double u1 = ((double)(splitmix64(&s) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
        double u2 = (double)(splitmix64(&s) >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1)) * c->std;
        tmp[i - i0] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < i1)
            tmp[i + 1 - i0] = (float)(r * sin(6.283185307179586 * u2));
    }
    if (c->dtype == RLX_DTYPE_F16)
        rlx_cpu_f32_to_f16_row(tmp, (uint16_t *)c->data + (i0 - c->first), (int64_t)(i1 - i0));
    else
        memcpy((float *)c->data + (i0 - c->first), tmp, (i1 - i0) * sizeof(float));
}

/* A random tensor, produced chunk by chunk while the file is written. */
typedef struct gen_tensor {
    rlx_threadpool *pool;
    rlx_dtype dtype;
    uint64_t n, seed;
} gen_tensor;

static rlx_status gen_random(void *user, uint64_t off, void *buf, uint64_t n, rlx_error **err)
{
    const gen_tensor *g = user;
    const uint64_t esz = g->dtype == RLX_DTYPE_F16 ? 2 : 4;
    /* chunks are RLX_GGUF_GEN_CHUNK bytes, a multiple of FILL_BLOCK elements */
    if (off % (esz * FILL_BLOCK) != 0 || n % esz != 0)
        return rlx_error_set(err, RLX_ERR_INTERNAL, "make-model: unaligned chunk");
    uint64_t first = off / esz, count = n / esz;
    fill_ctx c = {.data = buf,
                  .dtype = g->dtype,
                  .n = first + count,
                  .seed = g->seed,
                  .first = first,
                  .block0 = first / FILL_BLOCK,
                  .std = 0.02f};
    rlx_parallel_for(g->pool, (int64_t)((count + FILL_BLOCK - 1) / FILL_BLOCK), fill_task, &c);
    return RLX_OK;
}

typedef struct builder {
    rlx_gguf_writer *w;
    rlx_threadpool *pool;
    void **bufs;
    size_t n_bufs, cap_bufs;
    uint64_t seed, tensor_index;
    rlx_dtype wtype;
    rlx_status bad;
} builder;

static void *keep_buf(builder *b, size_t bytes)
{
    if (b->n_bufs == b->cap_bufs) {
        size_t cap = b->cap_bufs ? 2 * b->cap_bufs : 64;
        void **p = realloc(b->bufs, cap * sizeof *p);
        if (!p)
            return NULL;
        b->bufs = p;
        b->cap_bufs = cap;
    }
    void *d = malloc(bytes ? bytes : 1);
    if (d)
        b->bufs[b->n_bufs++] = d;
    return d;
}

/* kind: 'w' random weight (dtype b->wtype when 2-D), 'b' random bias (F32),
 * '1' ones (F32) */
static void add(builder *b, const char *name, char kind, uint64_t ne0, uint64_t ne1)
{
    if (b->bad != RLX_OK)
        return;
    uint32_t n_dims = ne1 ? 2 : 1;
    uint64_t ne[2] = {ne0, ne1 ? ne1 : 1};
    uint64_t n = ne0 * ne[1];
    rlx_dtype t = (kind == 'w' && n_dims == 2) ? b->wtype : RLX_DTYPE_F32;
    size_t esz = t == RLX_DTYPE_F16 ? 2 : 4;
    uint64_t ti = b->tensor_index++;
    rlx_status st;
    if (kind == '1') { /* small: kept in memory */
        float *d = keep_buf(b, (size_t)n * esz);
        if (!d) {
            b->bad = RLX_ERR_NO_MEMORY;
            return;
        }
        for (uint64_t i = 0; i < n; i++)
            d[i] = 1.0f;
        st = rlx_gguf_writer_add_tensor_ref(b->w, name, t, n_dims, ne, d, n * esz);
    } else { /* generated while the file is written */
        gen_tensor *g = keep_buf(b, sizeof *g);
        if (!g) {
            b->bad = RLX_ERR_NO_MEMORY;
            return;
        }
        uint64_t s = b->seed + 0x632be59bd9b4e019ull * (ti + 1);
        *g = (gen_tensor){.pool = b->pool, .dtype = t, .n = n, .seed = splitmix64(&s)};
        st = rlx_gguf_writer_add_tensor_gen(b->w, name, t, n_dims, ne, n * esz, gen_random, g);
    }
    if (st != RLX_OK)
        b->bad = RLX_ERR_INVALID_ARG;
}

static void kset_u32(rlx_gguf_writer *w, const char *arch, const char *suffix, uint32_t v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    rlx_gguf_writer_set_u32(w, key, v);
}

static void kset_f32(rlx_gguf_writer *w, const char *arch, const char *suffix, float v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    rlx_gguf_writer_set_f32(w, key, v);
}

rlx_status rlx_make_model(const char *out_path, rlx_make_model_params p, rlx_error **err)
{
    if (!out_path || !out_path[0])
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "make-model: no output path");
    const shape_def *sh = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (p.shape && !strcmp(p.shape, shapes[i].name))
            sh = &shapes[i];
    if (!sh)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "make-model: unknown shape '%s'; valid shapes: %s",
                             p.shape ? p.shape : "(none)", rlx_make_model_shapes());
    const char *arch = p.arch ? p.arch : sh->arch;
    bool qwen2 = !strcmp(arch, "qwen2"), qwen3 = !strcmp(arch, "qwen3"),
         llama = !strcmp(arch, "llama");
    if (!qwen2 && !qwen3 && !llama)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "make-model: unknown architecture '%s'; valid: llama, qwen2, qwen3",
                             arch);
    if (p.dtype != RLX_DTYPE_F32 && p.dtype != RLX_DTYPE_F16)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "make-model: dtype must be F32 or F16");
    if (!p.vocab_path)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "make-model: a vocab GGUF is required for the tokenizer (e.g. "
                             "../shared/data/tokenizers/ggml-vocab-qwen2.gguf)");
    rlx_gguf *voc = NULL;
    rlx_status s = rlx_gguf_open(p.vocab_path, &voc, err);
    if (s != RLX_OK)
        return s;
    const rlx_gguf_value *toks = rlx_gguf_find(voc, "tokenizer.ggml.tokens");
    if (!toks || toks->type != RLX_GGUF_TYPE_ARRAY || toks->v.arr.count == 0 ||
        toks->v.arr.count > UINT32_MAX) {
        rlx_gguf_close(voc);
        return rlx_error_set(err, RLX_ERR_FORMAT, "make-model: '%s' has no tokenizer.ggml.tokens",
                             p.vocab_path);
    }
    const uint32_t n_vocab = (uint32_t)toks->v.arr.count;
    rlx_cpu_kernels_init();

    builder b = {.seed = p.seed, .wtype = p.dtype};
    b.w = rlx_gguf_writer_create();
    if (!b.w || rlx_threadpool_create(p.n_threads, &b.pool) != RLX_OK) {
        rlx_gguf_writer_free(b.w);
        rlx_gguf_close(voc);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "make-model: out of memory");
    }
    rlx_gguf_writer *w = b.w;

    /* the keys convert_hf_to_gguf.py writes, in its order */
    char gname[96];
    snprintf(gname, sizeof gname, "%s (random weights)", sh->general_name);
    rlx_gguf_writer_set_str(w, "general.architecture", arch);
    rlx_gguf_writer_set_str(w, "general.type", "model");
    rlx_gguf_writer_set_str(w, "general.name", gname);
    kset_u32(w, arch, "block_count", sh->n_layer);
    kset_u32(w, arch, "context_length", sh->n_ctx);
    kset_u32(w, arch, "embedding_length", sh->n_embd);
    kset_u32(w, arch, "feed_forward_length", sh->n_ff);
    kset_u32(w, arch, "attention.head_count", sh->n_head);
    kset_u32(w, arch, "attention.head_count_kv", sh->n_head_kv);
    kset_f32(w, arch, "rope.freq_base", sh->rope_base);
    kset_f32(w, arch, "attention.layer_norm_rms_epsilon", sh->rms_eps);
    kset_u32(w, arch, "attention.key_length", sh->head_dim);
    kset_u32(w, arch, "attention.value_length", sh->head_dim);
    rlx_gguf_writer_set_u32(w, "general.file_type", p.dtype == RLX_DTYPE_F16 ? 1 : 0);
    if (llama) {
        kset_u32(w, arch, "vocab_size", n_vocab);
        kset_u32(w, arch, "rope.dimension_count", sh->head_dim);
    }
    rlx_gguf_writer_set_u32(w, "general.quantization_version", 2);
    for (uint64_t i = 0; i < rlx_gguf_n_kv(voc); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(voc, i);
        char key[256];
        if (kv->key.len < 10 || kv->key.len >= sizeof key || memcmp(kv->key.ptr, "tokenizer.", 10))
            continue;
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        rlx_gguf_writer_set_value(w, key, &kv->value);
    }

    const uint64_t H = sh->n_embd, F = sh->n_ff, hd = sh->head_dim;
    const uint64_t q_dim = sh->n_head * hd, kv_dim = sh->n_head_kv * hd;
    if (llama && sh->rope_factor > 0) {
        /* llama3 rope scaling as the converter stores it: one divisor per
         * rotated pair */
        float *ff = keep_buf(&b, hd / 2 * sizeof(float));
        if (!ff)
            b.bad = RLX_ERR_NO_MEMORY;
        for (uint64_t i = 0; ff && i < hd / 2; i++) {
            double freq = 1.0 / pow(sh->rope_base, (double)(2 * i) / (double)hd);
            double wavelen = 2.0 * M_PI / freq;
            double low_wl = sh->orig_ctx / sh->low_freq_factor;
            double high_wl = sh->orig_ctx / sh->high_freq_factor;
            if (wavelen < high_wl)
                ff[i] = 1.0f;
            else if (wavelen > low_wl)
                ff[i] = sh->rope_factor;
            else {
                double smooth = (sh->orig_ctx / wavelen - sh->low_freq_factor) /
                                (sh->high_freq_factor - sh->low_freq_factor);
                ff[i] = (float)(1.0 / ((1.0 - smooth) / sh->rope_factor + smooth));
            }
        }
        uint64_t ne = hd / 2;
        if (ff)
            rlx_gguf_writer_add_tensor_ref(w, "rope_freqs.weight", RLX_DTYPE_F32, 1, &ne, ff,
                                           ne * sizeof(float));
    }
    add(&b, "token_embd.weight", 'w', H, n_vocab);
    for (uint32_t l = 0; l < sh->n_layer; l++) {
        char n[64];
#define T(suffix, kind, a, c)                          \
    do {                                               \
        snprintf(n, sizeof n, "blk.%u.%s", l, suffix); \
        add(&b, n, kind, a, c);                        \
    } while (0)
        T("attn_norm.weight", '1', H, 0);
        T("attn_q.weight", 'w', H, q_dim);
        T("attn_k.weight", 'w', H, kv_dim);
        T("attn_v.weight", 'w', H, kv_dim);
        if (qwen2) {
            T("attn_q.bias", 'b', q_dim, 0);
            T("attn_k.bias", 'b', kv_dim, 0);
            T("attn_v.bias", 'b', kv_dim, 0);
        }
        if (qwen3) {
            T("attn_q_norm.weight", '1', hd, 0);
            T("attn_k_norm.weight", '1', hd, 0);
        }
        T("attn_output.weight", 'w', q_dim, H);
        T("ffn_norm.weight", '1', H, 0);
        T("ffn_gate.weight", 'w', H, F);
        T("ffn_up.weight", 'w', H, F);
        T("ffn_down.weight", 'w', F, H);
#undef T
    }
    add(&b, "output_norm.weight", '1', H, 0);

    if (b.bad != RLX_OK)
        s = rlx_error_set(err, b.bad, "make-model: %s",
                          rlx_gguf_writer_error(w) ? rlx_gguf_writer_error(w) : "out of memory");
    else
        s = rlx_gguf_writer_write(w, out_path, err);
    rlx_gguf_writer_free(w);
    rlx_threadpool_free(b.pool);
    for (size_t i = 0; i < b.n_bufs; i++)
        free(b.bufs[i]);
    free(b.bufs);
    rlx_gguf_close(voc);
    return s;
}
