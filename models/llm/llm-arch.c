/* Decoder-only LLMs: config from GGUF metadata, GGUF tensor names, and the
 * decoder graph. Every per-architecture difference is a field of
 * rlx_llm_config set in one place (config_from_gguf), so the builder reads
 * as one network with switches. */
#include "models/llm/llm-arch.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/formats/gguf.h"
#include "engine/ir/graph.h"

static const struct {
    const char *name;
    rlx_llm_arch arch;
} arch_names[] = {
    {"llama", RLX_LLM_ARCH_LLAMA},   {"mistral", RLX_LLM_ARCH_MISTRAL},
    {"qwen2", RLX_LLM_ARCH_QWEN2},   {"qwen3", RLX_LLM_ARCH_QWEN3},
    {"gemma2", RLX_LLM_ARCH_GEMMA2}, {"gemma3", RLX_LLM_ARCH_GEMMA3},
    {"phi3", RLX_LLM_ARCH_PHI3},
};

const char *rlx_llm_supported_architectures(void)
{
    return "llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3";
}

/* ---- metadata ---------------------------------------------------------- */

static const char *key(char *buf, size_t cap, const char *arch, const char *suffix)
{
    snprintf(buf, cap, "%s.%s", arch, suffix);
    return buf;
}

/* An integer key of the architecture; RLX_ERR_NOT_FOUND leaves *out alone
 * when !required. */
static rlx_status get_i32(const rlx_gguf *g, const char *arch, const char *suffix, int32_t *out,
                          bool required, rlx_error **err)
{
    char k[128];
    key(k, sizeof k, arch, suffix);
    const rlx_gguf_value *v = rlx_gguf_find(g, k);
    if (!v)
        return required ? rlx_error_set(err, RLX_ERR_FORMAT, "%s: the model has no '%s' key",
                                        rlx_gguf_path(g), k)
                        : RLX_OK;
    if (v->type == RLX_GGUF_TYPE_ARRAY) {
        /* per-layer arrays (head counts): all layers must agree for us */
        rlx_gguf_value e;
        if (v->v.arr.count == 0 || rlx_gguf_array_get(g, v, 0, &e, err) != RLX_OK)
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: '%s' is an empty array",
                                 rlx_gguf_path(g), k);
        for (uint64_t i = 1; i < v->v.arr.count; i++) {
            rlx_gguf_value e2;
            if (rlx_gguf_array_get(g, v, i, &e2, err) != RLX_OK)
                return rlx_error_code(*err);
            if (e2.v.u64 != e.v.u64)
                return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                     "%s: '%s' differs between layers, which is not supported",
                                     rlx_gguf_path(g), k);
        }
        *out = (int32_t)e.v.i64;
        return RLX_OK;
    }
    uint32_t u;
    rlx_status st = rlx_gguf_get_u32(g, k, &u, err);
    if (st == RLX_OK) {
        if (u > INT32_MAX)
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: '%s' is %u, too large", rlx_gguf_path(g),
                                 k, u);
        *out = (int32_t)u;
    }
    return st;
}

static rlx_status get_f32(const rlx_gguf *g, const char *arch, const char *suffix, float *out,
                          rlx_error **err)
{
    char k[128];
    key(k, sizeof k, arch, suffix);
    if (!rlx_gguf_find(g, k))
        return RLX_OK;
    return rlx_gguf_get_f32(g, k, out, err);
}

static bool get_str(const rlx_gguf *g, const char *arch, const char *suffix, char *buf, size_t cap)
{
    char k[128];
    key(k, sizeof k, arch, suffix);
    if (!rlx_gguf_find(g, k))
        return false;
    return rlx_gguf_get_string(g, k, buf, cap, NULL) == RLX_OK;
}

/* llama 3.x frequency scaling (as Meta's reference apply_scaling): long
 * wavelengths divided by the factor, short ones kept, a smooth ramp between.
 * Stored as divisors of the frequency (the ROPE op's freq_factors). */
static void llama3_factors(rlx_llm_config *c, float factor, float low, float high, float orig)
{
    int n = c->n_rot / 2;
    float low_wl = orig / low, high_wl = orig / high;
    for (int i = 0; i < n; i++) {
        double freq = pow(c->rope_base, -2.0 * i / c->n_rot);
        double wl = 2 * M_PI / freq;
        double div;
        if (wl < high_wl)
            div = 1;
        else if (wl > low_wl)
            div = factor;
        else {
            double smooth = (orig / wl - low) / (high - low);
            div = 1.0 / ((1 - smooth) / factor + smooth);
        }
        c->rope_factors[i] = (float)div;
    }
    c->n_rope_factors = n;
}

rlx_status rlx_llm_config_from_gguf(const rlx_gguf *g, rlx_llm_config *out, rlx_error **err)
{
    memset(out, 0, sizeof *out);
    rlx_llm_config *c = out;
    const char *path = rlx_gguf_path(g);
    if (!rlx_gguf_find(g, "general.architecture"))
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: no general.architecture key; is this a language model?", path);
    rlx_status st =
        rlx_gguf_get_string(g, "general.architecture", c->arch_name, sizeof c->arch_name, err);
    if (st != RLX_OK)
        return st;
    bool known = false;
    for (size_t i = 0; i < sizeof arch_names / sizeof arch_names[0]; i++)
        if (!strcmp(arch_names[i].name, c->arch_name)) {
            c->arch = arch_names[i].arch;
            known = true;
        }
    if (!known)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: architecture '%s' is not supported (supported: %s)", path,
                             c->arch_name, rlx_llm_supported_architectures());
    const char *a = c->arch_name;

    if ((st = get_i32(g, a, "block_count", &c->n_layer, true, err)) ||
        (st = get_i32(g, a, "embedding_length", &c->n_embd, true, err)) ||
        (st = get_i32(g, a, "feed_forward_length", &c->n_ff, true, err)) ||
        (st = get_i32(g, a, "attention.head_count", &c->n_head, true, err)))
        return st;
    c->n_head_kv = c->n_head;
    c->n_ctx_train = 2048;
    if ((st = get_i32(g, a, "attention.head_count_kv", &c->n_head_kv, false, err)) ||
        (st = get_i32(g, a, "context_length", &c->n_ctx_train, false, err)))
        return st;
    if (c->n_layer <= 0 || c->n_embd <= 0 || c->n_ff <= 0 || c->n_head <= 0 || c->n_head_kv <= 0 ||
        c->n_head % c->n_head_kv)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: inconsistent sizes (%d layers, width %d, ffn %d, %d heads, "
                             "%d kv heads)",
                             path, c->n_layer, c->n_embd, c->n_ff, c->n_head, c->n_head_kv);
    c->head_dim = c->n_embd / c->n_head;
    if ((st = get_i32(g, a, "attention.key_length", &c->head_dim, false, err)))
        return st;
    c->head_dim_v = c->head_dim;
    if ((st = get_i32(g, a, "attention.value_length", &c->head_dim_v, false, err)))
        return st;
    c->n_rot = c->head_dim;
    if ((st = get_i32(g, a, "rope.dimension_count", &c->n_rot, false, err)))
        return st;
    if (c->head_dim <= 0 || c->head_dim_v <= 0 || c->n_rot <= 0 || c->n_rot > c->head_dim ||
        c->n_rot % 2 || c->n_rot / 2 > RLX_LLM_MAX_ROPE_FACTORS)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: inconsistent head sizes (head %d, value %d, rope dims %d)", path,
                             c->head_dim, c->head_dim_v, c->n_rot);
    c->norm_eps = 1e-5f;
    if ((st = get_f32(g, a, "attention.layer_norm_rms_epsilon", &c->norm_eps, err)))
        return st;
    c->rope_base = 10000.f;
    c->rope_scale = 1.f;
    if ((st = get_f32(g, a, "rope.freq_base", &c->rope_base, err)))
        return st;

    const rlx_gguf_tensor *emb = rlx_gguf_find_tensor(g, "token_embd.weight");
    if (!emb && rlx_gguf_n_tensors(g) == 0)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s holds no weights (a vocabulary-only file?); open the model's "
                             "GGUF with its tensors",
                             path);
    if (!emb || emb->n_dims != 2)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: no 2-D tensor 'token_embd.weight'", path);
    c->n_vocab = (int32_t)emb->ne[1];
    c->tied_output = rlx_gguf_find_tensor(g, "output.weight") == NULL;

    /* rope scaling */
    char type[32] = "";
    float factor = 0;
    if ((st = get_f32(g, a, "rope.scaling.factor", &factor, err)))
        return st;
    if (!get_str(g, a, "rope.scaling.type", type, sizeof type) && factor > 0)
        strcpy(type, "linear");
    int32_t orig_ctx = 0;
    if ((st = get_i32(g, a, "rope.scaling.original_context_length", &orig_ctx, false, err)))
        return st;
    if (!strcmp(type, "linear") && factor > 0)
        c->rope_scale = 1.f / factor;
    else if (!strcmp(type, "llama3") && factor > 0) {
        float low = 1, high = 4;
        if ((st = get_f32(g, a, "rope.scaling.low_freq_factor", &low, err)) ||
            (st = get_f32(g, a, "rope.scaling.high_freq_factor", &high, err)))
            return st;
        llama3_factors(c, factor, low, high, orig_ctx > 0 ? (float)orig_ctx : 8192.f);
    } else if (!strcmp(type, "yarn") && factor > 1) {
        float attn_factor = 1, beta_fast = 32, beta_slow = 1;
        if ((st = get_f32(g, a, "rope.scaling.attn_factor", &attn_factor, err)) ||
            (st = get_f32(g, a, "rope.scaling.yarn_beta_fast", &beta_fast, err)) ||
            (st = get_f32(g, a, "rope.scaling.yarn_beta_slow", &beta_slow, err)))
            return st;
        rlx_llm_rope_yarn(c, factor, (float)(orig_ctx > 0 ? orig_ctx : c->n_ctx_train), beta_fast,
                          beta_slow, attn_factor);
    } else if (type[0] && strcmp(type, "none") && orig_ctx > 0 && orig_ctx < c->n_ctx_train)
        c->n_ctx_train = orig_ctx; /* an unknown scaling: stay within the unscaled context */
    if (rlx_gguf_find_tensor(g, "rope_freqs.weight"))
        snprintf(c->rope_factors_tensor, sizeof c->rope_factors_tensor, "rope_freqs.weight");

    c->rope_mode = RLX_ROPE_NEOX;
    c->rope_base_swa = c->rope_base;
    c->rope_scale_swa = c->rope_scale;
    switch (c->arch) {
    case RLX_LLM_ARCH_LLAMA:
    case RLX_LLM_ARCH_MISTRAL:
        c->rope_mode = RLX_ROPE_NORMAL;
        if ((st = get_i32(g, a, "attention.sliding_window", &c->sliding_window, false, err)))
            return st;
        if (c->sliding_window > 0)
            c->swa_pattern = 1;
        break;
    case RLX_LLM_ARCH_QWEN2:
        c->qkv_bias = true;
        break;
    case RLX_LLM_ARCH_QWEN3:
        c->qk_norm = true;
        break;
    case RLX_LLM_ARCH_GEMMA2:
    case RLX_LLM_ARCH_GEMMA3: {
        c->embd_scale = true;
        c->post_norms = true;
        c->gelu_ffn = true;
        c->qk_norm = c->arch == RLX_LLM_ARCH_GEMMA3;
        c->norm_eps = 1e-6f;
        if ((st = get_f32(g, a, "attention.layer_norm_rms_epsilon", &c->norm_eps, err)))
            return st;
        c->sliding_window = 4096;
        c->swa_pattern = c->arch == RLX_LLM_ARCH_GEMMA2 ? 2 : 6;
        if ((st = get_i32(g, a, "attention.sliding_window", &c->sliding_window, false, err)) ||
            (st = get_i32(g, a, "attention.sliding_window_pattern", &c->swa_pattern, false, err)))
            return st;
        /* the 27B models scale queries by 1/sqrt(n_embd / n_head), the
         * others by 1/sqrt(head_dim) (query_pre_attn_scalar) */
        bool is27b = (c->arch == RLX_LLM_ARCH_GEMMA2 && c->n_layer == 46) ||
                     (c->arch == RLX_LLM_ARCH_GEMMA3 && c->n_layer == 62);
        c->attn_scale = 1.f / sqrtf((float)(is27b ? c->n_embd / c->n_head : c->head_dim));
        if (c->arch == RLX_LLM_ARCH_GEMMA2) {
            c->attn_softcap = 50.f;
            c->final_softcap = 30.f;
            if ((st = get_f32(g, a, "attn_logit_softcapping", &c->attn_softcap, err)) ||
                (st = get_f32(g, a, "final_logit_softcapping", &c->final_softcap, err)))
                return st;
        } else {
            if ((st = get_f32(g, a, "final_logit_softcapping", &c->final_softcap, err)))
                return st;
            c->rope_base_swa = 10000.f;
            c->rope_scale_swa = 1.f;
        }
        break;
    }
    case RLX_LLM_ARCH_PHI3:
        /* Phi-3 attends within a sliding window on every layer (2047 for
         * mini-4k), as the HF model's mask does */
        if ((st = get_i32(g, a, "attention.sliding_window", &c->sliding_window, false, err)))
            return st;
        if (c->sliding_window > 0)
            c->swa_pattern = 1;
        c->fused_qkv = rlx_gguf_find_tensor(g, "blk.0.attn_qkv.weight") != NULL;
        c->fused_gate_up = rlx_gguf_find_tensor(g, "blk.0.ffn_gate.weight") == NULL;
        if (rlx_gguf_find_tensor(g, "rope_factors_short.weight")) {
            snprintf(c->rope_factors_tensor, sizeof c->rope_factors_tensor,
                     "rope_factors_short.weight");
            if (orig_ctx > 0 && orig_ctx < c->n_ctx_train)
                c->n_ctx_train = orig_ctx; /* the long factors are not used */
        }
        break;
    }
    if (c->rope_factors_tensor[0])
        c->n_rope_factors = 0;
    return RLX_OK;
}

bool rlx_llm_layer_is_swa(const rlx_llm_config *c, int32_t il)
{
    if (c->sliding_window <= 0 || c->swa_pattern <= 0)
        return false;
    return c->swa_pattern == 1 || il % c->swa_pattern < c->swa_pattern - 1;
}

rlx_llm_graph_params rlx_llm_graph_default_params(void)
{
    return (rlx_llm_graph_params){
        .n_ctx = 2048, .seq_max = 1, .kv_dtype = RLX_DTYPE_F16, .all_logits = false};
}

/* ---- graph ------------------------------------------------------------- */

typedef struct {
    rlx_graph *g;
    const rlx_llm_weights *w;
    const rlx_llm_config *c;
    rlx_error **err;
    rlx_status st;
} builder;

static rlx_status fail(builder *b, rlx_status code, const char *fmt, ...) RLX_PRINTF(3, 4);
static rlx_status fail(builder *b, rlx_status code, const char *fmt, ...)
{
    if (b->st == RLX_OK) {
        va_list ap;
        va_start(ap, fmt);
        char msg[512];
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        b->st = rlx_error_set(b->err, code, "%s: %s", b->w->path, msg);
    }
    return b->st;
}

/* A weight PARAM by its exact GGUF name, checked against the expected
 * row-major shape ([rows, cols] or [cols] when rows is 0). Optional weights
 * that are absent give RLX_NODE_INVALID. */
static rlx_node weight(builder *b, const char *name, int64_t rows, int64_t cols, bool optional)
{
    if (b->st != RLX_OK)
        return RLX_NODE_INVALID;
    rlx_llm_tensor_info ti, *t = &ti;
    if (!b->w->find(b->w->user, name, &ti)) {
        if (!optional)
            fail(b, RLX_ERR_FORMAT, "the tensor '%s' is missing", name);
        return RLX_NODE_INVALID;
    }
    int rank = rows > 0 ? 2 : 1;
    bool ok = (int)t->n_dims == rank && (int64_t)t->ne[0] == cols &&
              (rank == 1 || (int64_t)t->ne[1] == rows);
    if (!ok) {
        fail(b, RLX_ERR_FORMAT, "the tensor '%s' has ne {%llu, %llu}, expected {%lld, %lld}", name,
             (unsigned long long)t->ne[0], (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 1),
             (long long)cols, (long long)(rank > 1 ? rows : 1));
        return RLX_NODE_INVALID;
    }
    int64_t dims[2] = {rows, cols};
    return rlx_graph_param(b->g, name, t->dtype,
                           rank == 2 ? rlx_shape_make(2, dims) : rlx_shape_make(1, &cols));
}

static rlx_node lw(builder *b, int il, const char *what, int64_t rows, int64_t cols, bool optional)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    return weight(b, name, rows, cols, optional);
}

static bool gguf_find(const void *user, const char *name, rlx_llm_tensor_info *out)
{
    const rlx_gguf_tensor *t = rlx_gguf_find_tensor(user, name);
    if (!t)
        return false;
    out->dtype = t->dtype;
    out->n_dims = (int)t->n_dims;
    for (int i = 0; i < 4; i++)
        out->ne[i] = i < (int)t->n_dims ? t->ne[i] : 1;
    return true;
}

rlx_llm_weights rlx_llm_weights_gguf(const rlx_gguf *g)
{
    return (rlx_llm_weights){.path = rlx_gguf_path(g), .find = gguf_find, .user = g};
}

void rlx_llm_rope_llama3(rlx_llm_config *c, float factor, float low, float high, float orig)
{
    llama3_factors(c, factor, low, high, orig);
}

/* YaRN (Peng et al. 2023, as HF's _compute_yarn_parameters and ggml's
 * rope_yarn): frequencies that turn fewer than beta_slow times over the
 * original context are interpolated (divided by the factor), those that turn
 * more than beta_fast times are kept, a linear ramp over the dimension index
 * between; q and k are scaled by attn_factor * (0.1 ln(factor) + 1). */
void rlx_llm_rope_yarn(rlx_llm_config *c, float factor, float orig_ctx, float beta_fast,
                       float beta_slow, float attn_factor)
{
    int n = c->n_rot / 2;
    double d = c->n_rot, base = c->rope_base;
    /* the dimension index where a frequency turns r times over orig_ctx */
#define CORR_DIM(r) (d * log(orig_ctx / ((r)*2 * M_PI)) / (2 * log(base)))
    double lo = floor(CORR_DIM(beta_fast)), hi = ceil(CORR_DIM(beta_slow));
#undef CORR_DIM
    if (lo < 0)
        lo = 0;
    if (hi > d - 1)
        hi = d - 1;
    if (hi == lo)
        hi += 0.001;
    for (int i = 0; i < n; i++) {
        double ramp = (i - lo) / (hi - lo);
        double keep = 1 - (ramp < 0 ? 0 : ramp > 1 ? 1 : ramp); /* 1: extrapolate */
        c->rope_factors[i] = (float)(1.0 / ((1 - keep) / factor + keep));
    }
    c->n_rope_factors = n;
    c->rope_attn_factor = attn_factor * (factor > 1 ? 0.1f * logf(factor) + 1.f : 1.f);
}

static rlx_node reshape(builder *b, rlx_node x, int rank, const rlx_dim *dims)
{
    return rlx_graph_reshape(b->g, NULL, x, rlx_shape_make_dims(rank, dims));
}

/* A Q8_0 cache is token-major, [n_ctx, HKV * D] with ggml's blocks of 32
 * running along each token's row across the heads (as llama.cpp's cache),
 * so head sizes below 32 work too: the f32 rows of this run are scattered
 * (quantized) at PAST, and attention reads the [1, HKV, T, D] view of the
 * blocks, decoding them per key tile. */
static void kv_q8_0(builder *b, int il, rlx_node k, rlx_node v, int32_t n_ctx, int past, rlx_dim T,
                    rlx_node *ka, rlx_node *va)
{
    rlx_graph *g = b->g;
    const rlx_llm_config *c = b->c;
    const int64_t HKV = c->n_head_kv, DH = c->head_dim, DV = c->head_dim_v;
    rlx_dim S = rlx_graph_node_shape(g, k).d[0], one = rlx_dim_const(1);
    const int perm[3] = {1, 0, 2};
    rlx_node src[2] = {k, v}, *out[2] = {ka, va};
    const int64_t dd[2] = {DH, DV};
    for (int i = 0; i < 2; i++) {
        char name[64];
        snprintf(name, sizeof name, "cache.%c.%d", i ? 'v' : 'k', il);
        rlx_node st = rlx_graph_state(g, name, RLX_DTYPE_Q8_0,
                                      rlx_shape_make(2, (int64_t[]){n_ctx, HKV * dd[i]}));
        rlx_node rows = reshape(b, src[i], 2, (rlx_dim[]){S, rlx_dim_const(HKV * dd[i])});
        st = rlx_graph_scatter(g, NULL, st, rows, 0, rlx_dim_sym(past));
        rlx_node all = rlx_graph_slice(g, NULL, st, 0, rlx_dim_const(0), T);
        all = reshape(b, all, 3, (rlx_dim[]){T, rlx_dim_const(HKV), rlx_dim_const(dd[i])});
        all = rlx_graph_permute(g, NULL, all, perm);
        *out[i] = reshape(b, all, 4, (rlx_dim[]){one, rlx_dim_const(HKV), T, rlx_dim_const(dd[i])});
    }
}

rlx_status rlx_llm_build_graph(const rlx_llm_config *c, const rlx_gguf *gguf,
                               const rlx_llm_graph_params *p, rlx_graph **out, rlx_error **err)
{
    rlx_llm_weights w = rlx_llm_weights_gguf(gguf);
    return rlx_llm_build_graph_w(c, &w, p, out, err);
}

rlx_status rlx_llm_build_graph_w(const rlx_llm_config *c, const rlx_llm_weights *w,
                                 const rlx_llm_graph_params *p, rlx_graph **out, rlx_error **err)
{
    *out = NULL;
    if (p->n_ctx <= 0 || p->seq_max <= 0 || p->seq_max > p->n_ctx)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "llm graph: need 0 < seq_max (%d) <= n_ctx (%d)", p->seq_max,
                             p->n_ctx);
    if (p->kv_dtype != RLX_DTYPE_F16 && p->kv_dtype != RLX_DTYPE_F32 &&
        p->kv_dtype != RLX_DTYPE_Q8_0)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "llm graph: the KV cache can be F16, F32 or Q8_0, not %s",
                             rlx_dtype_name(p->kv_dtype));
    if (p->kv_dtype == RLX_DTYPE_Q8_0 && (((int64_t)c->n_head_kv * c->head_dim) % 32 ||
                                          ((int64_t)c->n_head_kv * c->head_dim_v) % 32))
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "a Q8_0 KV cache needs KV rows (kv heads x head size: %d x %d) that "
                             "are multiples of 32; use f16",
                             c->n_head_kv, c->head_dim);
    /* how many decoder layers to build: all, or up to the deepest hidden
     * state taken */
    int32_t n_build = c->n_layer;
    if (p->n_hidden < 0 || p->n_hidden > RLX_LLM_MAX_HIDDEN)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "llm graph: %d hidden states asked for; at most %d can be taken",
                             p->n_hidden, RLX_LLM_MAX_HIDDEN);
    if (p->n_hidden > 0) {
        if (p->split)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "llm graph: hidden-state output does not combine with split");
        n_build = 0;
        for (int i = 0; i < p->n_hidden; i++) {
            int32_t k = p->hidden_layers[i];
            if (k < 0 || k > c->n_layer)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "llm graph: hidden state %d asked for, but the model has %d "
                                     "layers (0 is the embedding, %d the last layer's output)",
                                     k, c->n_layer, c->n_layer);
            if (k > n_build)
                n_build = k;
        }
    }
    if (p->stateless && p->seq_max != p->n_ctx)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "llm graph: without a KV cache n_ctx (%d) must equal seq_max (%d)",
                             p->n_ctx, p->seq_max);
    rlx_graph *g = rlx_graph_create();
    if (!g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "llm graph: out of memory");
    builder bb = {.g = g, .w = w, .c = c, .err = err, .st = RLX_OK}, *b = &bb;

    const int64_t D = c->n_embd, H = c->n_head, HKV = c->n_head_kv, DH = c->head_dim,
                  DV = c->head_dim_v, F = c->n_ff, V = c->n_vocab;
    int seq = rlx_graph_add_symbol(g, "SEQ", p->seq_max);
    /* bounds are per symbol, so PAST + SEQ <= n_ctx caps PAST at n_ctx -
     * seq_max: the runner appends the last few tokens of a full context with
     * the SEQ = 1 program */
    rlx_dim S = rlx_dim_sym(seq), T = S, one = rlx_dim_const(1);
    int past = -1;
    if (!p->stateless) {
        past = rlx_graph_add_symbol(g, "PAST", p->n_ctx - p->seq_max);
        rlx_dim_add(rlx_dim_sym(past), S, &T);
    }

    rlx_node tokens = rlx_graph_input(g, "tokens", RLX_DTYPE_I32, rlx_shape_make_dims(1, &S));
    rlx_node pos = rlx_graph_input(g, "pos", RLX_DTYPE_I32, rlx_shape_make_dims(1, &S));
    rlx_node kmask = RLX_NODE_INVALID;
    if (p->key_mask)
        kmask = rlx_graph_input(g, "key_mask", RLX_DTYPE_F32, rlx_shape_make_dims(1, &T));
    rlx_node hidden[RLX_LLM_MAX_HIDDEN];

    rlx_node emb = weight(b, "token_embd.weight", V, D, false);
    rlx_node x = rlx_graph_gather(g, "embd", emb, tokens); /* [S, D] */
    if (c->embd_scale)
        x = rlx_graph_scale(g, "embd.scale", x, sqrtf((float)D), 0.f);
    for (int i = 0; i < p->n_hidden; i++)
        if (p->hidden_layers[i] == 0)
            hidden[i] = x;

    rlx_node freq = RLX_NODE_INVALID;
    if (c->rope_factors_tensor[0])
        freq = weight(b, c->rope_factors_tensor, 0, c->n_rot / 2, false);
    else if (c->n_rope_factors > 0) {
        int64_t n = c->n_rope_factors;
        freq = rlx_graph_const_f32(g, "rope.factors", rlx_shape_make(1, &n), c->rope_factors);
    }

    /* YaRN scales q and k, so the scores by its square */
    float attn_scale = c->attn_scale;
    if (c->rope_attn_factor > 0 && c->rope_attn_factor != 1.f) {
        if (attn_scale == 0)
            attn_scale = 1.f / sqrtf((float)c->head_dim);
        attn_scale *= c->rope_attn_factor * c->rope_attn_factor;
    }

    if (p->split && (p->split_layer < 0 || p->split_layer > c->n_layer)) {
        rlx_graph_free(g);
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "llm graph: split at layer %d of %d",
                             p->split_layer, c->n_layer);
    }
    /* the last row alone from the last layer's attention on (logits of
     * the last token) */
    bool last_only = !p->all_logits && p->n_hidden == 0 && n_build == c->n_layer && c->n_layer > 0;
    for (int il = 0; il < n_build && b->st == RLX_OK; il++) {
        if (p->split && il == p->split_layer)
            rlx_graph_set_segment(g, 1);
        bool swa = rlx_llm_layer_is_swa(c, il);
        rlx_node h =
            rlx_graph_rms_norm(g, NULL, x, lw(b, il, "attn_norm.weight", 0, D, false), c->norm_eps);
        rlx_node q, k, v;
        if (c->fused_qkv) {
            rlx_node qkv = rlx_graph_linear(
                g, NULL, h, lw(b, il, "attn_qkv.weight", H * DH + HKV * DH + HKV * DV, D, false),
                RLX_NODE_INVALID);
            q = rlx_graph_slice(g, NULL, qkv, 1, rlx_dim_const(0), rlx_dim_const(H * DH));
            k = rlx_graph_slice(g, NULL, qkv, 1, rlx_dim_const(H * DH), rlx_dim_const(HKV * DH));
            v = rlx_graph_slice(g, NULL, qkv, 1, rlx_dim_const(H * DH + HKV * DH),
                                rlx_dim_const(HKV * DV));
        } else {
            q = rlx_graph_linear(g, NULL, h, lw(b, il, "attn_q.weight", H * DH, D, false),
                                 lw(b, il, "attn_q.bias", 0, H * DH, !c->qkv_bias));
            k = rlx_graph_linear(g, NULL, h, lw(b, il, "attn_k.weight", HKV * DH, D, false),
                                 lw(b, il, "attn_k.bias", 0, HKV * DH, !c->qkv_bias));
            v = rlx_graph_linear(g, NULL, h, lw(b, il, "attn_v.weight", HKV * DV, D, false),
                                 lw(b, il, "attn_v.bias", 0, HKV * DV, !c->qkv_bias));
        }
        q = reshape(b, q, 3, (rlx_dim[]){S, rlx_dim_const(H), rlx_dim_const(DH)});
        k = reshape(b, k, 3, (rlx_dim[]){S, rlx_dim_const(HKV), rlx_dim_const(DH)});
        v = reshape(b, v, 3, (rlx_dim[]){S, rlx_dim_const(HKV), rlx_dim_const(DV)});
        if (c->qk_norm) {
            q = rlx_graph_rms_norm(g, NULL, q, lw(b, il, "attn_q_norm.weight", 0, DH, false),
                                   c->norm_eps);
            k = rlx_graph_rms_norm(g, NULL, k, lw(b, il, "attn_k_norm.weight", 0, DH, false),
                                   c->norm_eps);
        }
        rlx_rope_params rp = {.mode = c->rope_mode,
                              .n_rot = c->n_rot,
                              .freq_base = swa ? c->rope_base_swa : c->rope_base,
                              .freq_scale = swa ? c->rope_scale_swa : c->rope_scale,
                              .seq_axis = 0};
        q = rlx_graph_rope(g, NULL, q, pos, freq, rp);
        k = rlx_graph_rope(g, NULL, k, pos, freq, rp);

        /* [S, H, D] -> [H, S, D]; the cache is [HKV, n_ctx, D], appended at PAST */
        const int perm[3] = {1, 0, 2};
        q = reshape(b, rlx_graph_permute(g, NULL, q, perm), 4,
                    (rlx_dim[]){one, rlx_dim_const(H), S, rlx_dim_const(DH)});
        rlx_node ka, va;
        if (p->stateless) {
            /* T = SEQ: this run's own keys and values */
            ka = reshape(b, rlx_graph_permute(g, NULL, k, perm), 4,
                         (rlx_dim[]){one, rlx_dim_const(HKV), S, rlx_dim_const(DH)});
            va = reshape(b, rlx_graph_permute(g, NULL, v, perm), 4,
                         (rlx_dim[]){one, rlx_dim_const(HKV), S, rlx_dim_const(DV)});
        } else if (p->kv_dtype == RLX_DTYPE_Q8_0)
            kv_q8_0(b, il, k, v, p->n_ctx, past, T, &ka, &va);
        else {
            k = rlx_graph_permute(g, NULL, k, perm);
            v = rlx_graph_permute(g, NULL, v, perm);
            if (p->kv_dtype == RLX_DTYPE_F16) {
                k = rlx_graph_cast(g, NULL, k, p->kv_dtype);
                v = rlx_graph_cast(g, NULL, v, p->kv_dtype);
            }
            char name[64];
            snprintf(name, sizeof name, "cache.k.%d", il);
            rlx_node kc = rlx_graph_state(g, name, p->kv_dtype,
                                          rlx_shape_make(3, (int64_t[]){HKV, p->n_ctx, DH}));
            snprintf(name, sizeof name, "cache.v.%d", il);
            rlx_node vc = rlx_graph_state(g, name, p->kv_dtype,
                                          rlx_shape_make(3, (int64_t[]){HKV, p->n_ctx, DV}));
            kc = rlx_graph_scatter(g, NULL, kc, k, 1, rlx_dim_sym(past));
            vc = rlx_graph_scatter(g, NULL, vc, v, 1, rlx_dim_sym(past));
            ka = rlx_graph_slice(g, NULL, kc, 1, rlx_dim_const(0), T);
            va = rlx_graph_slice(g, NULL, vc, 1, rlx_dim_const(0), T);
            ka = reshape(b, ka, 4, (rlx_dim[]){one, rlx_dim_const(HKV), T, rlx_dim_const(DH)});
            va = reshape(b, va, 4, (rlx_dim[]){one, rlx_dim_const(HKV), T, rlx_dim_const(DV)});
        }
        rlx_attention_params ap = {.mask = swa ? RLX_MASK_WINDOW : RLX_MASK_CAUSAL,
                                   .window = swa ? c->sliding_window : 0,
                                   .scale = attn_scale,
                                   .softcap = c->attn_softcap};
        rlx_node att = rlx_graph_attention(g, NULL, q, ka, va, kmask, ap);
        att = reshape(b, att, 3, (rlx_dim[]){rlx_dim_const(H), S, rlx_dim_const(DV)});
        att = rlx_graph_permute(g, NULL, att, perm);
        att = reshape(b, att, 2, (rlx_dim[]){S, rlx_dim_const(H * DV)});
        if (last_only && il == c->n_layer - 1) {
            /* only the last row's logits are wanted: past the attention
             * (which wrote every row's keys and values) the last layer
             * carries that row alone, so its output projection and FFN
             * run for one row and its residual add meets the output norm
             * (one add + norm) */
            rlx_dim last;
            rlx_dim_sub(S, one, &last);
            att = rlx_graph_slice(g, "last.att", att, 0, last, one);
            x = rlx_graph_slice(g, "last", x, 0, last, one);
        }
        rlx_node o = rlx_graph_linear(
            g, NULL, att, lw(b, il, "attn_output.weight", D, H * DV, false), RLX_NODE_INVALID);
        if (c->post_norms)
            o = rlx_graph_rms_norm(g, NULL, o, lw(b, il, "post_attention_norm.weight", 0, D, false),
                                   c->norm_eps);
        x = rlx_graph_add(g, NULL, x, o);

        h = rlx_graph_rms_norm(g, NULL, x, lw(b, il, "ffn_norm.weight", 0, D, false), c->norm_eps);
        rlx_node gate, up;
        if (c->fused_gate_up) {
            rlx_node gu = rlx_graph_linear(g, NULL, h, lw(b, il, "ffn_up.weight", 2 * F, D, false),
                                           RLX_NODE_INVALID);
            gate = rlx_graph_slice(g, NULL, gu, 1, rlx_dim_const(0), rlx_dim_const(F));
            up = rlx_graph_slice(g, NULL, gu, 1, rlx_dim_const(F), rlx_dim_const(F));
        } else {
            gate = rlx_graph_linear(g, NULL, h, lw(b, il, "ffn_gate.weight", F, D, false),
                                    RLX_NODE_INVALID);
            up = rlx_graph_linear(g, NULL, h, lw(b, il, "ffn_up.weight", F, D, false),
                                  RLX_NODE_INVALID);
        }
        gate = c->gelu_ffn ? rlx_graph_gelu(g, NULL, gate, RLX_GELU_TANH)
                           : rlx_graph_silu(g, NULL, gate);
        rlx_node f = rlx_graph_linear(g, NULL, rlx_graph_mul(g, NULL, gate, up),
                                      lw(b, il, "ffn_down.weight", D, F, false), RLX_NODE_INVALID);
        if (c->post_norms)
            f = rlx_graph_rms_norm(g, NULL, f, lw(b, il, "post_ffw_norm.weight", 0, D, false),
                                   c->norm_eps);
        x = rlx_graph_add(g, NULL, x, f);
        for (int i = 0; i < p->n_hidden; i++)
            if (p->hidden_layers[i] == il + 1 && il + 1 < c->n_layer)
                hidden[i] = x;
    }

    if (p->n_hidden > 0) {
        rlx_node normed = RLX_NODE_INVALID;
        for (int i = 0; i < p->n_hidden; i++) {
            if (p->hidden_layers[i] != c->n_layer)
                continue;
            if (normed == RLX_NODE_INVALID)
                normed = rlx_graph_rms_norm(
                    g, "output_norm", x, weight(b, "output_norm.weight", 0, D, false), c->norm_eps);
            hidden[i] = normed;
        }
        rlx_node h = p->n_hidden == 1 ? hidden[0]
                                      : rlx_graph_concat(g, "hidden.join", p->n_hidden, hidden, 1);
        rlx_graph_output(g, "hidden", h);
    } else {
        if (!last_only && !p->all_logits) { /* no layers: the embedding's last row */
            rlx_dim last;
            rlx_dim_sub(S, one, &last);
            x = rlx_graph_slice(g, "last", x, 0, last, one);
        }
        if (p->split)
            rlx_graph_set_segment(g, 2);
        x = rlx_graph_rms_norm(g, "output_norm", x, weight(b, "output_norm.weight", 0, D, false),
                               c->norm_eps);
        rlx_node head = c->tied_output ? emb : weight(b, "output.weight", V, D, false);
        rlx_node logits = rlx_graph_linear(g, "lm_head", x, head, RLX_NODE_INVALID);
        if (c->final_softcap > 0) {
            logits = rlx_graph_scale(g, NULL, logits, 1.f / c->final_softcap, 0.f);
            logits =
                rlx_graph_scale(g, NULL, rlx_graph_tanh(g, NULL, logits), c->final_softcap, 0.f);
        }
        rlx_graph_output(g, "logits", logits);
    }

    if (b->st == RLX_OK && rlx_graph_status(g) != RLX_OK) {
        rlx_graph_take_error(g, err);
        b->st = rlx_graph_status(g);
    }
    if (b->st != RLX_OK) {
        rlx_graph_free(g);
        return b->st;
    }
    *out = g;
    return RLX_OK;
}
