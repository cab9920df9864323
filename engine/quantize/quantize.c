/* GGUF quantization with llama.cpp's per-tensor type mix; see quantize.h.
 *
 * The type rules follow llama.cpp's src/llama-quant.cpp
 * (tensor_allows_quantization, llama_tensor_get_type_impl and
 * tensor_type_fallback) for the presets rlx offers; the file's comments name
 * each rule where it is applied. */
#include "engine/quantize/quantize.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/threadpool.h"
#include "engine/formats/gguf.h"

/* GGML_QNT_VERSION, written as general.quantization_version. */
#define QNT_VERSION 2

static const struct {
    const char *name;
    rlx_quantize_type type;
    rlx_dtype base;
} presets[] = {
    {"F32", RLX_QUANTIZE_F32, RLX_DTYPE_F32},
    {"F16", RLX_QUANTIZE_F16, RLX_DTYPE_F16},
    {"BF16", RLX_QUANTIZE_BF16, RLX_DTYPE_BF16},
    {"Q4_0", RLX_QUANTIZE_Q4_0, RLX_DTYPE_Q4_0},
    {"Q4_1", RLX_QUANTIZE_Q4_1, RLX_DTYPE_Q4_1},
    {"Q5_0", RLX_QUANTIZE_Q5_0, RLX_DTYPE_Q5_0},
    {"Q5_1", RLX_QUANTIZE_Q5_1, RLX_DTYPE_Q5_1},
    {"Q8_0", RLX_QUANTIZE_Q8_0, RLX_DTYPE_Q8_0},
    {"Q4_K_S", RLX_QUANTIZE_Q4_K_S, RLX_DTYPE_Q4_K},
    {"Q4_K_M", RLX_QUANTIZE_Q4_K_M, RLX_DTYPE_Q4_K},
    {"Q5_K_S", RLX_QUANTIZE_Q5_K_S, RLX_DTYPE_Q5_K},
    {"Q5_K_M", RLX_QUANTIZE_Q5_K_M, RLX_DTYPE_Q5_K},
    {"Q6_K", RLX_QUANTIZE_Q6_K, RLX_DTYPE_Q6_K},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

rlx_status rlx_quantize_type_from_name(const char *name, rlx_quantize_type *out)
{
    if (!name || !out)
        return RLX_ERR_INVALID_ARG;
    /* llama-quantize's aliases */
    if (!strcasecmp(name, "Q4_K"))
        name = "Q4_K_M";
    else if (!strcasecmp(name, "Q5_K"))
        name = "Q5_K_M";
    for (size_t i = 0; i < N_PRESETS; i++)
        if (!strcasecmp(name, presets[i].name)) {
            *out = presets[i].type;
            return RLX_OK;
        }
    return RLX_ERR_INVALID_ARG;
}

const char *rlx_quantize_type_name(rlx_quantize_type t)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (presets[i].type == t)
            return presets[i].name;
    return NULL;
}

const char *rlx_quantize_type_list(void)
{
    return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K_S, Q4_K_M (Q4_K), Q5_K_S, "
           "Q5_K_M (Q5_K), Q6_K";
}

rlx_dtype rlx_quantize_base_dtype(rlx_quantize_type t)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (presets[i].type == t)
            return presets[i].base;
    return RLX_DTYPE_INVALID;
}

rlx_quantize_params rlx_quantize_default_params(void)
{
    return (rlx_quantize_params){.n_threads = 0};
}

/* ---- type selection ------------------------------------------------------ */

typedef enum cat {
    CAT_TOKEN_EMBD,
    CAT_ATTN_Q,
    CAT_ATTN_V,
    CAT_ATTN_K,
    CAT_ATTN_QKV,
    CAT_ATTN_KV_B,
    CAT_ATTN_OUTPUT,
    CAT_FFN_UP,
    CAT_FFN_GATE,
    CAT_FFN_DOWN,
    CAT_OUTPUT,
    CAT_OTHER,
} cat;

/* llama.cpp's tensor_get_category: the first match in this order wins. */
static cat category_of(const char *name)
{
    if (!strcmp(name, "output.weight"))
        return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
        return CAT_TOKEN_EMBD;
    static const struct {
        const char *sub;
        cat c;
    } subs[] = {
        {"attn_qkv.weight", CAT_ATTN_QKV},
        {"attn_kv_b.weight", CAT_ATTN_KV_B},
        {"attn_v.weight", CAT_ATTN_V},
        {"attn_k.weight", CAT_ATTN_K},
        {"attn_q.weight", CAT_ATTN_Q},
        {"attn_output.weight", CAT_ATTN_OUTPUT},
        {"ffn_up", CAT_FFN_UP},
        {"ffn_gate", CAT_FFN_GATE},
        {"ffn_down", CAT_FFN_DOWN},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strstr(name, subs[i].sub))
            return subs[i].c;
    return CAT_OTHER;
}

static bool cat_is_attn_v(cat c)
{
    return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B;
}

/* ggml_n_dims: trailing dims of 1 do not count. */
static uint32_t n_dims_of(const rlx_gguf_tensor *t)
{
    uint32_t n = 1;
    for (uint32_t d = 1; d < RLX_GGUF_MAX_DIMS; d++)
        if (t->ne[d] > 1)
            n = d + 1;
    return n;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !memcmp(s + a - b, suffix, b);
}

/* llama.cpp's tensor_allows_quantization: 2-D (or more) tensors whose name
 * ends in "weight", except norms, MoE routers, positional embeddings and a
 * list of small special tensors. Everything else keeps its type. */
static bool allows_quantization(const rlx_gguf_tensor *t)
{
    if (n_dims_of(t) < 2 || !ends_with(t->name, "weight"))
        return false;
    static const char *const keep[] = {
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (strstr(t->name, keep[i]))
            return false;
    /* LLM_TENSOR_POS_EMBD / TOKEN_TYPES (BERT-style models) */
    return strcmp(t->name, "position_embd.weight") && strcmp(t->name, "token_types.weight");
}

typedef struct mix_state {
    rlx_quantize_type ftype;
    bool falcon, tied;
    int n_expert;
    int n_attention_wv, i_attention_wv;
    int n_ffn_down, i_ffn_down;
} mix_state;

/* llama.cpp's use_more_bits: the first and last eighth of the layers, and
 * every third layer in between. */
static bool use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static int layer_of(const char *name)
{
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1)
        return -1;
    return l;
}

/* llama_tensor_get_type_impl, restricted to the presets above. Counters
 * advance in visiting order, as in llama.cpp. */
static rlx_dtype mix_type(mix_state *s, rlx_dtype t, const rlx_gguf_tensor *tensor, cat c)
{
    const rlx_quantize_type f = s->ftype;
    if (c == CAT_OUTPUT || (s->tied && c == CAT_TOKEN_EMBD)) {
        /* output.weight, or token_embd.weight when it doubles as the output:
         * Q8_0 when the row does not fit the base type's block (or Falcon),
         * else Q6_K unless the base is Q8_0 */
        if (s->falcon || tensor->ne[0] % rlx_dtype_get(t)->block_size != 0)
            t = RLX_DTYPE_Q8_0;
        else if (t != RLX_DTYPE_Q8_0)
            t = RLX_DTYPE_Q6_K;
    } else if (c == CAT_TOKEN_EMBD) {
        /* untied token_embd: only the IQ/TQ presets change it */
    } else if (cat_is_attn_v(c)) {
        /* attn_v (and attn_qkv, attn_kv_b, which llama.cpp routes here):
         * Q6_K on use_more_bits layers for Q4_K_M / Q5_K_M; Q5_K on the first
         * four for Q4_K_S; Q8_0 for 8-expert models */
        if ((f == RLX_QUANTIZE_Q4_K_M || f == RLX_QUANTIZE_Q5_K_M) &&
            use_more_bits(s->i_attention_wv, s->n_attention_wv))
            t = RLX_DTYPE_Q6_K;
        else if (f == RLX_QUANTIZE_Q4_K_S && s->i_attention_wv < 4)
            t = RLX_DTYPE_Q5_K;
        if (s->n_expert == 8)
            t = RLX_DTYPE_Q8_0;
        s->i_attention_wv++;
    } else if (c == CAT_ATTN_K) {
        if (s->n_expert == 8)
            t = RLX_DTYPE_Q8_0;
    } else if (c == CAT_FFN_DOWN) {
        int i = s->i_ffn_down, n = s->n_ffn_down;
        if (s->n_expert > 1) {
            /* expert tensors are not one per layer in order: use the name */
            int l = layer_of(tensor->name);
            if (l >= 0)
                i = l;
        }
        if (f == RLX_QUANTIZE_Q4_K_M) {
            if (s->falcon)
                t = i < n / 16            ? RLX_DTYPE_Q6_K
                    : use_more_bits(i, n) ? RLX_DTYPE_Q5_K
                                          : RLX_DTYPE_Q4_K;
            else if (use_more_bits(i, n))
                t = RLX_DTYPE_Q6_K;
        } else if (f == RLX_QUANTIZE_Q5_K_M && use_more_bits(i, n)) {
            t = RLX_DTYPE_Q6_K;
        } else if (f == RLX_QUANTIZE_Q4_K_S && !s->falcon && i < n / 8) {
            t = RLX_DTYPE_Q5_K;
        }
        s->i_ffn_down++;
    } else if (c == CAT_ATTN_OUTPUT) {
        if (!s->falcon && s->n_expert == 8 &&
            (f == RLX_QUANTIZE_Q4_K_S || f == RLX_QUANTIZE_Q4_K_M))
            t = RLX_DTYPE_Q5_K;
    }
    return t;
}

/* llama.cpp's tensor_type_fallback: a row that is not a whole number of
 * blocks takes a 32-element type of similar size; where even that does not
 * fit, F16. (llama.cpp stops with an error for the 32-block presets; rlx
 * writes F16 there too.) */
static rlx_dtype fallback_type(rlx_dtype t, uint64_t ne0)
{
    if (ne0 % rlx_dtype_get(t)->block_size == 0)
        return t;
    switch (t) {
    case RLX_DTYPE_Q4_K:
        t = RLX_DTYPE_Q5_0;
        break;
    case RLX_DTYPE_Q5_K:
        t = RLX_DTYPE_Q5_1;
        break;
    case RLX_DTYPE_Q6_K:
        t = RLX_DTYPE_Q8_0;
        break;
    default:
        t = RLX_DTYPE_F16;
        break;
    }
    if (ne0 % rlx_dtype_get(t)->block_size != 0)
        t = RLX_DTYPE_F16;
    return t;
}

/* ---- plan ---------------------------------------------------------------- */

typedef struct plan_entry {
    const rlx_gguf_tensor *t;
    rlx_dtype to;
    uint64_t bytes_out, offset;
    bool fallback, requant;
    char note[160];
} plan_entry;

static int cmp_order(const void *pa, const void *pb)
{
    /* llama_model_loader's weight_name_comparer */
    const plan_entry *a = pa, *b = pb;
    int la = layer_of(a->t->name), lb = layer_of(b->t->name);
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(a->t->name, b->t->name);
}

static uint64_t meta_u64(const rlx_gguf *g, const char *arch, const char *suffix, uint64_t dflt)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint64_t v;
    if (rlx_gguf_get_u64(g, key, &v, NULL) == RLX_OK)
        return v;
    return dflt;
}

static rlx_status make_plan(const rlx_gguf *g, rlx_quantize_type ftype, bool pure, plan_entry **out,
                            uint64_t *out_n, rlx_error **err)
{
    *out = NULL;
    uint64_t n = rlx_gguf_n_tensors(g);
    plan_entry *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    for (uint64_t i = 0; i < n; i++)
        p[i].t = rlx_gguf_tensor_at(g, i);
    qsort(p, n, sizeof *p, cmp_order);

    char arch[128] = "";
    rlx_gguf_get_string(g, "general.architecture", arch, sizeof arch, NULL);
    mix_state s = {.ftype = ftype, .falcon = !strcmp(arch, "falcon"), .tied = true};
    s.n_expert = (int)meta_u64(g, arch, "expert_count", 0);
    int n_ffn_down = 0;
    for (uint64_t i = 0; i < n; i++) {
        cat c = category_of(p[i].t->name);
        if (cat_is_attn_v(c))
            s.n_attention_wv++;
        if (c == CAT_FFN_DOWN)
            n_ffn_down++;
        if (c == CAT_OUTPUT)
            s.tied = false;
    }
    /* llama.cpp uses the layer count; a file without one counts ffn_down */
    s.n_ffn_down = (int)meta_u64(g, arch, "block_count", (uint64_t)n_ffn_down);

    const rlx_dtype base = rlx_quantize_base_dtype(ftype);
    const bool quantized_base = rlx_dtype_get(base)->quantized;
    for (uint64_t i = 0; i < n; i++) {
        plan_entry *e = &p[i];
        const rlx_gguf_tensor *t = e->t;
        rlx_dtype to = t->dtype;
        if (allows_quantization(t) && rlx_cpu_can_dequantize(t->dtype)) {
            to = base;
            if (quantized_base) {
                if (!pure)
                    to = mix_type(&s, base, t, category_of(t->name));
                rlx_dtype fb = fallback_type(to, t->ne[0]);
                if (fb != to) {
                    snprintf(e->note, sizeof e->note,
                             "row length %" PRIu64 " is not a multiple of %" PRIu32
                             ": %s instead of %s",
                             t->ne[0], rlx_dtype_get(to)->block_size, rlx_dtype_name(fb),
                             rlx_dtype_name(to));
                    e->fallback = true;
                    to = fb;
                }
            }
        }
        if (to != t->dtype && rlx_dtype_get(t->dtype)->quantized) {
            size_t l = strlen(e->note);
            snprintf(e->note + l, sizeof e->note - l, "%sre-quantized from %s (dequantized first)",
                     l ? "; " : "", rlx_dtype_name(t->dtype));
            e->requant = true;
        }
        e->to = to;
        if (to == t->dtype) {
            e->bytes_out = t->n_bytes;
        } else {
            uint64_t row;
            if (rlx_dtype_row_bytes(to, t->ne[0], &row) != RLX_OK) {
                free(p);
                return rlx_error_set(err, RLX_ERR_INTERNAL, "tensor '%s': no row size for %s",
                                     t->name, rlx_dtype_name(to));
            }
            e->bytes_out = row * (t->n_elements / (t->ne[0] ? t->ne[0] : 1));
            if (t->ne[0] == 0)
                e->bytes_out = 0;
        }
    }
    *out = p;
    *out_n = n;
    return RLX_OK;
}

/* ---- header -------------------------------------------------------------- */

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t pad_to(uint64_t n, uint64_t a)
{
    return (a - n % a) % a;
}

/* Bytes of one value as it follows its type field in a file. */
static uint64_t value_enc_len(const rlx_gguf_value *v)
{
    switch (v->type) {
    case RLX_GGUF_TYPE_UINT8:
    case RLX_GGUF_TYPE_INT8:
    case RLX_GGUF_TYPE_BOOL:
        return 1;
    case RLX_GGUF_TYPE_UINT16:
    case RLX_GGUF_TYPE_INT16:
        return 2;
    case RLX_GGUF_TYPE_UINT32:
    case RLX_GGUF_TYPE_INT32:
    case RLX_GGUF_TYPE_FLOAT32:
        return 4;
    case RLX_GGUF_TYPE_UINT64:
    case RLX_GGUF_TYPE_INT64:
    case RLX_GGUF_TYPE_FLOAT64:
        return 8;
    case RLX_GGUF_TYPE_STRING:
        return 8 + v->v.str.len;
    case RLX_GGUF_TYPE_ARRAY:
        return 4 + 8 + v->v.arr.data_len;
    default:
        return 0;
    }
}

/* The metadata of the output, serialized by the GGUF writer (so every value
 * is encoded and checked in one place): the 24-byte preamble and the
 * key/value bytes. */
static rlx_status build_kv(const rlx_gguf *src, rlx_quantize_type ftype, uint8_t **out,
                           uint64_t *out_len, uint64_t *out_n_kv, rlx_error **err)
{
    *out = NULL;
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    if (!w)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    for (uint64_t i = 0; i < rlx_gguf_n_kv(src); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(src, i);
        char *key = malloc((size_t)kv->key.len + 1);
        if (!key) {
            rlx_gguf_writer_free(w);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
        memcpy(key, kv->key.ptr, (size_t)kv->key.len);
        key[kv->key.len] = 0;
        /* a quantized model is one file: llama-quantize drops split.* */
        if (strcmp(key, "split.no") && strcmp(key, "split.count") &&
            strcmp(key, "split.tensors.count"))
            rlx_gguf_writer_set_value(w, key, &kv->value);
        free(key);
    }
    rlx_gguf_writer_set_u32(w, "general.quantization_version", QNT_VERSION);
    rlx_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    void *img = NULL;
    size_t img_len = 0;
    rlx_status s = rlx_gguf_writer_to_memory(w, &img, &img_len, err);
    rlx_gguf_writer_free(w);
    if (s != RLX_OK)
        return s;
    rlx_gguf *g = NULL;
    s = rlx_gguf_open_memory(img, img_len, "(metadata)", &g, err);
    if (s != RLX_OK) {
        free(img);
        return s;
    }
    uint64_t len = 24, n_kv = rlx_gguf_n_kv(g);
    for (uint64_t i = 0; i < n_kv; i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        len += 8 + kv->key.len + 4 + value_enc_len(&kv->value);
    }
    rlx_gguf_close(g);
    if (len > img_len) {
        free(img);
        return rlx_error_set(err, RLX_ERR_INTERNAL, "quantize: metadata size mismatch");
    }
    *out = img;
    *out_len = len;
    *out_n_kv = n_kv;
    return RLX_OK;
}

/* ---- conversion ---------------------------------------------------------- */

typedef struct conv_ctx {
    const uint8_t *src;
    rlx_dtype st, dt;
    uint64_t src_row_bytes, dst_row_bytes;
    int64_t ne0, n_rows, rows_per_task;
    uint8_t *dst; /* row 0 of this chunk */
    float *scratch;
    atomic_int failed;
} conv_ctx;

static void conv_task(void *p, int64_t task, int thread)
{
    conv_ctx *c = p;
    int64_t r0 = task * c->rows_per_task, r1 = r0 + c->rows_per_task;
    if (r1 > c->n_rows)
        r1 = c->n_rows;
    float *f = c->scratch + (size_t)thread * (size_t)c->ne0;
    for (int64_t r = r0; r < r1; r++) {
        const void *in = c->src + (uint64_t)r * c->src_row_bytes;
        void *out = c->dst + (uint64_t)r * c->dst_row_bytes;
        const float *x = in;
        if (c->st != RLX_DTYPE_F32) {
            if (rlx_cpu_dequantize_row(c->st, in, f, c->ne0) != RLX_OK) {
                atomic_store(&c->failed, 1);
                return;
            }
            x = f;
        }
        if (c->dt == RLX_DTYPE_F32)
            memcpy(out, x, (size_t)c->ne0 * sizeof(float));
        else if (rlx_cpu_quantize_row(c->dt, x, out, c->ne0) != RLX_OK) {
            atomic_store(&c->failed, 1);
            return;
        }
    }
}

static int write_all(int fd, const void *p, uint64_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t k = write(fd, b, chunk);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b += k;
        n -= (uint64_t)k;
    }
    return 0;
}

static int write_zeros(int fd, uint64_t n)
{
    static const uint8_t zeros[4096];
    while (n > 0) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        if (write_all(fd, zeros, k) != 0)
            return -1;
        n -= k;
    }
    return 0;
}

/* Output bytes converted per chunk (then written): bounds the memory. */
#define CHUNK_BYTES ((uint64_t)32 << 20)

typedef struct run {
    const char *out_path;
    int fd;
    rlx_threadpool *pool;
    uint8_t *buf;
    uint64_t buf_cap;
    float *scratch;
    uint64_t scratch_elems;
} run;

static rlx_status write_tensor(run *r, const rlx_gguf *g, const plan_entry *e, rlx_error **err)
{
    const rlx_gguf_tensor *t = e->t;
    const uint8_t *data = rlx_gguf_tensor_data(g, t);
    if (e->to == t->dtype) {
        if (write_all(r->fd, data, t->n_bytes) != 0)
            return rlx_error_set(err, RLX_ERR_IO, "cannot write '%s': %s", r->out_path,
                                 strerror(errno));
        return RLX_OK;
    }
    const int64_t ne0 = (int64_t)t->ne[0];
    const int64_t n_rows = ne0 ? (int64_t)(t->n_elements / (uint64_t)ne0) : 0;
    if (n_rows == 0)
        return RLX_OK;
    uint64_t src_row = 0, dst_row = 0;
    if (rlx_dtype_row_bytes(t->dtype, (uint64_t)ne0, &src_row) != RLX_OK ||
        rlx_dtype_row_bytes(e->to, (uint64_t)ne0, &dst_row) != RLX_OK)
        return rlx_error_set(err, RLX_ERR_INTERNAL, "tensor '%s': bad row size", t->name);
    int nt = rlx_threadpool_size(r->pool);
    uint64_t need_scratch = (uint64_t)nt * (uint64_t)ne0;
    if (need_scratch > r->scratch_elems) {
        float *p = realloc(r->scratch, need_scratch * sizeof(float));
        if (!p)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        r->scratch = p;
        r->scratch_elems = need_scratch;
    }
    int64_t rows_per_chunk = (int64_t)(CHUNK_BYTES / dst_row);
    if (rows_per_chunk < 1)
        rows_per_chunk = 1;
    if (rows_per_chunk > n_rows)
        rows_per_chunk = n_rows;
    uint64_t need_buf = (uint64_t)rows_per_chunk * dst_row;
    if (need_buf > r->buf_cap) {
        uint8_t *p = realloc(r->buf, (size_t)need_buf);
        if (!p)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        r->buf = p;
        r->buf_cap = need_buf;
    }
    /* tasks of about 64K elements: enough to balance, few enough to be cheap */
    int64_t rows_per_task = 65536 / (ne0 ? ne0 : 1);
    if (rows_per_task < 1)
        rows_per_task = 1;
    for (int64_t row0 = 0; row0 < n_rows; row0 += rows_per_chunk) {
        int64_t rows = n_rows - row0 < rows_per_chunk ? n_rows - row0 : rows_per_chunk;
        conv_ctx c = {
            .src = data + (uint64_t)row0 * src_row,
            .st = t->dtype,
            .dt = e->to,
            .src_row_bytes = src_row,
            .dst_row_bytes = dst_row,
            .ne0 = ne0,
            .n_rows = rows,
            .rows_per_task = rows_per_task,
            .dst = r->buf,
            .scratch = r->scratch,
        };
        atomic_init(&c.failed, 0);
        rlx_parallel_for(r->pool, (rows + rows_per_task - 1) / rows_per_task, conv_task, &c);
        if (atomic_load(&c.failed))
            return rlx_error_set(err, RLX_ERR_INTERNAL, "tensor '%s': cannot convert %s to %s",
                                 t->name, rlx_dtype_name(t->dtype), rlx_dtype_name(e->to));
        if (write_all(r->fd, r->buf, (uint64_t)rows * dst_row) != 0)
            return rlx_error_set(err, RLX_ERR_IO, "cannot write '%s': %s", r->out_path,
                                 strerror(errno));
    }
    return RLX_OK;
}

rlx_status rlx_quantize_file(const char *in_path, const char *out_path, rlx_quantize_type type,
                             rlx_quantize_params params, rlx_quantize_stats *stats, rlx_error **err)
{
    if (stats)
        memset(stats, 0, sizeof *stats);
    if (!in_path || !out_path || !in_path[0] || !out_path[0])
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "quantize: no input or output path");
    if (!rlx_quantize_type_name(type))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "quantize: unknown type %d; valid types: %s",
                             (int)type, rlx_quantize_type_list());
    rlx_cpu_kernels_init();

    rlx_gguf *g = NULL;
    rlx_status s = rlx_gguf_open(in_path, &g, err);
    if (s != RLX_OK)
        return s;
    plan_entry *plan = NULL;
    uint64_t n = 0;
    uint8_t *kv = NULL;
    uint64_t kv_len = 0, n_kv = 0;
    char *tmp = NULL;
    run r = {.out_path = out_path, .fd = -1};
    uint8_t *hdr = NULL;

    s = make_plan(g, type, params.pure, &plan, &n, err);
    if (s != RLX_OK)
        goto done;
    s = build_kv(g, type, &kv, &kv_len, &n_kv, err);
    if (s != RLX_OK)
        goto done;

    /* header: preamble + metadata + tensor infos, padded */
    const uint64_t align = rlx_gguf_alignment(g);
    uint64_t hl = kv_len;
    for (uint64_t i = 0; i < n; i++)
        hl += 8 + strlen(plan[i].t->name) + 4 + 8 * (uint64_t)plan[i].t->n_dims + 4 + 8;
    hl += pad_to(hl, align);
    hdr = calloc(1, (size_t)hl);
    if (!hdr) {
        s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    memcpy(hdr, kv, (size_t)kv_len);
    put_le(hdr + 4, 3, 4);
    put_le(hdr + 8, n, 8);
    put_le(hdr + 16, n_kv, 8);
    uint64_t o = kv_len, off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const rlx_gguf_tensor *t = plan[i].t;
        size_t nl = strlen(t->name);
        put_le(hdr + o, nl, 8);
        memcpy(hdr + o + 8, t->name, nl);
        o += 8 + nl;
        put_le(hdr + o, t->n_dims, 4);
        o += 4;
        for (uint32_t d = 0; d < t->n_dims; d++, o += 8)
            put_le(hdr + o, t->ne[d], 8);
        put_le(hdr + o, (uint64_t)rlx_dtype_to_ggml(plan[i].to), 4);
        put_le(hdr + o + 4, off, 8);
        o += 12;
        plan[i].offset = off;
        off += plan[i].bytes_out + pad_to(plan[i].bytes_out, align);
    }

    s = rlx_threadpool_create(params.n_threads, &r.pool);
    if (s != RLX_OK) {
        s = rlx_error_set(err, s, "quantize: cannot start the thread pool");
        goto done;
    }
    size_t pl = strlen(out_path);
    tmp = malloc(pl + 16);
    if (!tmp) {
        s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    memcpy(tmp, out_path, pl);
    memcpy(tmp + pl, ".tmp-XXXXXX", 12);
    r.fd = mkostemp(tmp, O_CLOEXEC);
    if (r.fd < 0) {
        s = rlx_error_set(err, RLX_ERR_IO, "cannot create a temporary file beside '%s': %s",
                          out_path, strerror(errno));
        free(tmp);
        tmp = NULL;
        goto done;
    }
    if (write_all(r.fd, hdr, hl) != 0) {
        s = rlx_error_set(err, RLX_ERR_IO, "cannot write '%s': %s", out_path, strerror(errno));
        goto done;
    }
    rlx_quantize_stats st = {.n_tensors = n};
    for (uint64_t i = 0; i < n; i++) {
        const plan_entry *e = &plan[i];
        s = write_tensor(&r, g, e, err);
        if (s == RLX_OK && write_zeros(r.fd, pad_to(e->bytes_out, align)) != 0)
            s = rlx_error_set(err, RLX_ERR_IO, "cannot write '%s': %s", out_path, strerror(errno));
        if (s != RLX_OK)
            goto done;
        st.bytes_in += e->t->n_bytes;
        st.bytes_out += e->bytes_out;
        st.n_quantized += e->to != e->t->dtype && rlx_dtype_get(e->to)->quantized;
        st.n_fallback += e->fallback;
        st.n_requantized += e->requant;
        if (params.progress) {
            rlx_quantize_tensor_report rep = {
                .index = i,
                .n_tensors = n,
                .name = e->t->name,
                .n_dims = e->t->n_dims,
                .ne = e->t->ne,
                .from = e->t->dtype,
                .to = e->to,
                .bytes_in = e->t->n_bytes,
                .bytes_out = e->bytes_out,
                .note = e->note[0] ? e->note : NULL,
            };
            if (!params.progress(&rep, params.progress_user)) {
                s = rlx_error_set(err, RLX_ERR_CANCELLED, "quantize: cancelled");
                goto done;
            }
        }
    }
    const char *step = "set permissions of";
    int rc = fchmod(r.fd, 0644);
    if (rc == 0) {
        step = "fsync";
        rc = fsync(r.fd);
    }
    int e = errno;
    if (close(r.fd) != 0 && rc == 0) {
        e = errno;
        step = "close";
        rc = -1;
    }
    r.fd = -1;
    if (rc == 0 && rename(tmp, out_path) != 0) {
        e = errno;
        step = "rename the temporary file to";
        rc = -1;
    }
    if (rc != 0) {
        s = rlx_error_set(err, RLX_ERR_IO, "cannot %s '%s': %s", step, out_path, strerror(e));
        goto done;
    }
    free(tmp);
    tmp = NULL;
    if (stats)
        *stats = st;

done:
    if (r.fd >= 0)
        close(r.fd);
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    rlx_threadpool_free(r.pool);
    free(r.buf);
    free(r.scratch);
    free(hdr);
    free(kv);
    free(plan);
    rlx_gguf_close(g);
    return s;
}
