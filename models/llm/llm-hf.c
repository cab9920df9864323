/* Hugging Face checkpoints (config.json + safetensors) for the LLM runner:
 * the config mapped onto rlx_llm_config and the tensors onto GGUF names. */
#include "models/llm/llm-hf.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/base/dtype.h"
#include "engine/formats/safetensors.h"
#include "engine/runtime/session.h"

typedef struct {
    char name[96]; /* GGUF name */
    rlx_dtype dtype;
    int n_dims;
    int64_t dims[2]; /* row-major */
    const void *data;
    uint64_t bytes;
    float *owned; /* a widened 1-D tensor */
} hf_tensor;

struct rlx_llm_hf {
    char dir[4096];
    rlx_safetensors *st;
    rlx_llm_config cfg;
    hf_tensor *t;
    int n_t;
};

static const struct {
    const char *hf, *gguf;
} layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

/* The GGUF name of an HF tensor; false for tensors the graph does not read
 * (rotary inv_freq buffers and the like). */
static bool gguf_name(const char *hf, char *out, size_t cap)
{
    if (!strcmp(hf, "model.embed_tokens.weight"))
        return snprintf(out, cap, "token_embd.weight") > 0;
    if (!strcmp(hf, "model.norm.weight"))
        return snprintf(out, cap, "output_norm.weight") > 0;
    if (!strcmp(hf, "lm_head.weight"))
        return snprintf(out, cap, "output.weight") > 0;
    int il = -1, used = 0;
    if (sscanf(hf, "model.layers.%d.%n", &il, &used) != 1 || il < 0 || used <= 0)
        return false;
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++)
        if (!strcmp(hf + used, layer_names[i].hf))
            return snprintf(out, cap, "blk.%d.%s", il, layer_names[i].gguf) > 0;
    return false;
}

static const hf_tensor *find(const rlx_llm_hf *h, const char *name)
{
    for (int i = 0; i < h->n_t; i++)
        if (!strcmp(h->t[i].name, name))
            return &h->t[i];
    return NULL;
}

static bool weights_find(const void *user, const char *name, rlx_llm_tensor_info *out)
{
    const hf_tensor *t = find(user, name);
    if (!t)
        return false;
    out->dtype = t->dtype;
    out->n_dims = t->n_dims;
    out->ne[0] = (uint64_t)t->dims[t->n_dims - 1];
    out->ne[1] = t->n_dims > 1 ? (uint64_t)t->dims[0] : 1;
    out->ne[2] = out->ne[3] = 1;
    return true;
}

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static void dir_of(const char *path, char *dir, size_t cap)
{
    if (is_dir(path)) {
        snprintf(dir, cap, "%s", path);
    } else {
        const char *slash = strrchr(path, '/');
        if (!slash)
            snprintf(dir, cap, ".");
        else
            snprintf(dir, cap, "%.*s", (int)(slash - path), path);
    }
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = 0;
}

bool rlx_llm_hf_is_checkpoint(const char *path)
{
    if (!path)
        return false;
    size_t n = strlen(path);
    bool ok = is_dir(path) || (n > 12 && !strcmp(path + n - 12, ".safetensors")) ||
              (n > 5 && !strcmp(path + n - 5, ".json"));
    if (!ok)
        return false;
    char dir[4096], cfg[4200];
    dir_of(path, dir, sizeof dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    return is_file(cfg);
}

/* ---- config.json ---------------------------------------------------------- */

static json_object *jget(json_object *o, const char *k)
{
    json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, k, &v))
        return NULL;
    return v; /* NULL for a JSON null too */
}

static bool jnum(json_object *o, const char *k, double *out)
{
    json_object *v = jget(o, k);
    if (!v || !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
        return false;
    *out = json_object_get_double(v);
    return true;
}

static rlx_status jint(const char *dir, json_object *o, const char *k, int32_t *out, bool required,
                       rlx_error **err)
{
    double d;
    if (!jnum(o, k, &d)) {
        if (jget(o, k) || required)
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s/config.json: '%s' %s", dir, k,
                                 jget(o, k) ? "is not a number" : "is missing");
        return RLX_OK;
    }
    if (d < 0 || d > 2147483647.0 || d != (double)(int64_t)d)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s/config.json: '%s' is %g, not a count", dir, k,
                             d);
    *out = (int32_t)d;
    return RLX_OK;
}

static const char *jstr(json_object *o, const char *k)
{
    json_object *v = jget(o, k);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static rlx_status read_config(rlx_llm_hf *h, json_object *o, rlx_error **err)
{
    rlx_llm_config *c = &h->cfg;
    const char *dir = h->dir;
    memset(c, 0, sizeof *c);
    const char *mt = jstr(o, "model_type");
    static const struct {
        const char *model_type, *class_name;
        rlx_llm_arch arch;
    } archs[] = {
        {"llama", "LlamaForCausalLM", RLX_LLM_ARCH_LLAMA},
        {"mistral", "MistralForCausalLM", RLX_LLM_ARCH_MISTRAL},
        {"qwen2", "Qwen2ForCausalLM", RLX_LLM_ARCH_QWEN2},
        {"qwen3", "Qwen3ForCausalLM", RLX_LLM_ARCH_QWEN3},
    };
    json_object *al = jget(o, "architectures");
    const char *cls =
        al && json_object_is_type(al, json_type_array) && json_object_array_length(al) > 0 &&
                json_object_is_type(json_object_array_get_idx(al, 0), json_type_string)
            ? json_object_get_string(json_object_array_get_idx(al, 0))
            : NULL;
    bool known = false;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0] && !known; i++)
        if ((mt && !strcmp(mt, archs[i].model_type)) ||
            (!mt && cls && !strcmp(cls, archs[i].class_name))) {
            c->arch = archs[i].arch;
            snprintf(c->arch_name, sizeof c->arch_name, "%s", archs[i].model_type);
            known = true;
        }
    if (!known)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s/config.json: model_type '%s' is not supported from a Hugging "
                             "Face checkpoint (supported: llama, mistral, qwen2, qwen3)",
                             dir,
                             mt    ? mt
                             : cls ? cls
                                   : "(none)");
    rlx_status st;
    if ((st = jint(dir, o, "num_hidden_layers", &c->n_layer, true, err)) ||
        (st = jint(dir, o, "hidden_size", &c->n_embd, true, err)) ||
        (st = jint(dir, o, "intermediate_size", &c->n_ff, true, err)) ||
        (st = jint(dir, o, "num_attention_heads", &c->n_head, true, err)))
        return st;
    c->n_head_kv = c->n_head;
    c->n_ctx_train = 2048;
    if ((st = jint(dir, o, "num_key_value_heads", &c->n_head_kv, false, err)) ||
        (st = jint(dir, o, "max_position_embeddings", &c->n_ctx_train, false, err)))
        return st;
    if (c->n_layer <= 0 || c->n_embd <= 0 || c->n_ff <= 0 || c->n_head <= 0 || c->n_head_kv <= 0 ||
        c->n_head % c->n_head_kv)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s/config.json: inconsistent sizes (%d layers, width %d, ffn %d, %d "
                             "heads, %d kv heads)",
                             dir, c->n_layer, c->n_embd, c->n_ff, c->n_head, c->n_head_kv);
    c->head_dim = c->n_embd / c->n_head;
    if ((st = jint(dir, o, "head_dim", &c->head_dim, false, err)))
        return st;
    c->head_dim_v = c->head_dim;
    c->n_rot = c->head_dim;
    double prf;
    if (jnum(o, "partial_rotary_factor", &prf) && prf > 0 && prf < 1)
        c->n_rot = (int32_t)(c->head_dim * prf) & ~1;
    if (c->head_dim <= 0 || c->n_rot <= 0 || c->n_rot % 2 ||
        c->n_rot / 2 > RLX_LLM_MAX_ROPE_FACTORS)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s/config.json: inconsistent head size %d", dir,
                             c->head_dim);
    double d;
    c->norm_eps = 1e-6f;
    if (jnum(o, "rms_norm_eps", &d))
        c->norm_eps = (float)d;
    c->rope_base = 10000.f;
    if (jnum(o, "rope_theta", &d))
        c->rope_base = (float)d;
    c->rope_scale = 1.f;
    /* HF keeps Q/K in rotate_half order: NEOX for every architecture */
    c->rope_mode = RLX_ROPE_NEOX;

    json_object *rs = jget(o, "rope_scaling");
    if (rs && json_object_is_type(rs, json_type_object)) {
        const char *type = jstr(rs, "rope_type");
        if (!type)
            type = jstr(rs, "type");
        double factor = 0, low = 1, high = 4, orig = 8192;
        jnum(rs, "factor", &factor);
        jnum(rs, "low_freq_factor", &low);
        jnum(rs, "high_freq_factor", &high);
        jnum(rs, "original_max_position_embeddings", &orig);
        if (type && !strcmp(type, "llama3") && factor > 0)
            rlx_llm_rope_llama3(c, (float)factor, (float)low, (float)high, (float)orig);
        else if (type && !strcmp(type, "yarn") && factor > 1) {
            double beta_fast = 32, beta_slow = 1, attn = 0;
            jnum(rs, "beta_fast", &beta_fast);
            jnum(rs, "beta_slow", &beta_slow);
            jnum(rs, "attention_factor", &attn);
            if (!jget(rs, "original_max_position_embeddings"))
                orig = c->n_ctx_train;
            /* attention_factor given is the whole scale; else 0.1 ln(factor) + 1 */
            rlx_llm_rope_yarn(c, (float)factor, (float)orig, (float)beta_fast, (float)beta_slow,
                              1.f);
            if (attn > 0)
                c->rope_attn_factor = (float)attn;
        } else if (type && !strcmp(type, "linear") && factor > 0)
            c->rope_scale = (float)(1.0 / factor);
        else if (type && strcmp(type, "default") && jget(rs, "original_max_position_embeddings") &&
                 orig > 0 && orig < c->n_ctx_train)
            c->n_ctx_train = (int32_t)orig; /* yarn etc.: stay within the unscaled context */
    }
    c->rope_base_swa = c->rope_base;
    c->rope_scale_swa = c->rope_scale;

    json_object *sw = jget(o, "sliding_window");
    json_object *use_sw = jget(o, "use_sliding_window");
    bool sw_on =
        c->arch == RLX_LLM_ARCH_MISTRAL ? sw != NULL : use_sw && json_object_get_boolean(use_sw);
    if (sw_on) {
        if (c->arch != RLX_LLM_ARCH_MISTRAL)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "%s/config.json: use_sliding_window (on some layers only) is not "
                                 "supported for %s",
                                 dir, c->arch_name);
        if ((st = jint(dir, o, "sliding_window", &c->sliding_window, false, err)))
            return st;
        if (c->sliding_window > 0)
            c->swa_pattern = 1;
    }

    const hf_tensor *emb = find(h, "token_embd.weight");
    if (!emb || emb->n_dims != 2)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: no 2-D tensor 'model.embed_tokens.weight' in the checkpoint",
                             dir);
    c->n_vocab = (int32_t)emb->dims[0];
    json_object *tie = jget(o, "tie_word_embeddings");
    c->tied_output = !find(h, "output.weight") || (tie && json_object_get_boolean(tie));
    c->qkv_bias = find(h, "blk.0.attn_q.bias") != NULL;
    c->qk_norm = c->arch == RLX_LLM_ARCH_QWEN3 || find(h, "blk.0.attn_q_norm.weight") != NULL;
    return RLX_OK;
}

/* ---- tensors ---------------------------------------------------------------- */

static rlx_status map_tensors(rlx_llm_hf *h, rlx_error **err)
{
    uint64_t n = rlx_safetensors_n_tensors(h->st);
    h->t = calloc(n ? n : 1, sizeof *h->t);
    if (!h->t)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        const rlx_st_tensor *s = rlx_safetensors_tensor_at(h->st, i);
        hf_tensor *t = &h->t[h->n_t];
        if (!gguf_name(s->name, t->name, sizeof t->name))
            continue;
        if (s->dtype != RLX_DTYPE_F32 && s->dtype != RLX_DTYPE_F16 && s->dtype != RLX_DTYPE_BF16)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' is %s; F32, F16 and BF16 weights are read",
                                 h->dir, s->name, rlx_dtype_name(s->dtype));
        if (s->n_dims < 1 || s->n_dims > 2)
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' has %u dims, not 1 or 2",
                                 h->dir, s->name, s->n_dims);
        t->n_dims = (int)s->n_dims;
        for (int d = 0; d < t->n_dims; d++)
            t->dims[d] = (int64_t)s->shape[d];
        t->dtype = s->dtype;
        t->data = rlx_safetensors_data(h->st, s);
        t->bytes = s->n_bytes;
        if (t->n_dims == 1 && s->dtype != RLX_DTYPE_F32) {
            /* norms and biases: small, and read as f32 by every kernel */
            t->owned = malloc(sizeof(float) * (size_t)(s->n_elements ? s->n_elements : 1));
            if (!t->owned)
                return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            const uint16_t *src = t->data;
            for (uint64_t k = 0; k < s->n_elements; k++) {
                uint16_t v;
                memcpy(&v, src + k, 2);
                if (s->dtype == RLX_DTYPE_F16)
                    t->owned[k] = rlx_f16_to_f32(v);
                else {
                    uint32_t u = (uint32_t)v << 16;
                    memcpy(&t->owned[k], &u, 4);
                }
            }
            t->dtype = RLX_DTYPE_F32;
            t->data = t->owned;
            t->bytes = sizeof(float) * s->n_elements;
        }
        if (find(h, t->name))
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' appears twice", h->dir,
                                 s->name);
        h->n_t++;
    }
    return RLX_OK;
}

rlx_status rlx_llm_hf_open(const char *path, rlx_llm_hf **out, rlx_error **err)
{
    *out = NULL;
    rlx_llm_hf *h = calloc(1, sizeof *h);
    if (!h)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    dir_of(path, h->dir, sizeof h->dir);
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/config.json", h->dir);
    json_object *o = NULL;
    rlx_status st;
    if (!is_file(cfg)) {
        st = rlx_error_set(err, RLX_ERR_NOT_FOUND, "%s: no config.json beside the weights", h->dir);
        goto fail;
    }
    o = json_object_from_file(cfg);
    if (!o || !json_object_is_type(o, json_type_object)) {
        st = rlx_error_set(err, RLX_ERR_FORMAT, "%s: not a JSON object (%s)", cfg,
                           json_util_get_last_err() ? json_util_get_last_err() : "unreadable");
        goto fail;
    }
    if ((st = rlx_safetensors_open(path, &h->st, err)) != RLX_OK)
        goto fail;
    if ((st = map_tensors(h, err)) != RLX_OK || (st = read_config(h, o, err)) != RLX_OK)
        goto fail;
    json_object_put(o);
    *out = h;
    return RLX_OK;
fail:
    json_object_put(o);
    rlx_llm_hf_close(h);
    return st;
}

void rlx_llm_hf_close(rlx_llm_hf *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->n_t; i++)
        free(h->t[i].owned);
    free(h->t);
    rlx_safetensors_close(h->st);
    free(h);
}

const rlx_llm_config *rlx_llm_hf_config(const rlx_llm_hf *h)
{
    return &h->cfg;
}

const char *rlx_llm_hf_dir(const rlx_llm_hf *h)
{
    return h->dir;
}

rlx_llm_weights rlx_llm_hf_weights(const rlx_llm_hf *h)
{
    return (rlx_llm_weights){.path = h->dir, .find = weights_find, .user = h};
}

rlx_status rlx_llm_hf_add_to_session(const rlx_llm_hf *h, rlx_session *s, rlx_error **err)
{
    for (int i = 0; i < h->n_t; i++) {
        const hf_tensor *t = &h->t[i];
        rlx_status st = rlx_session_add_weight(s, t->name, t->dtype, t->n_dims, t->dims, t->data,
                                               t->bytes, err);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

char *rlx_llm_hf_chat_template(const rlx_llm_hf *h)
{
    return rlx_llm_hf_chat_template_in(h->dir);
}

char *rlx_llm_hf_chat_template_in(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    char *out = NULL;
    json_object *o = is_file(p) ? json_object_from_file(p) : NULL;
    json_object *ct = jget(o, "chat_template");
    if (ct && json_object_is_type(ct, json_type_string)) {
        out = strdup(json_object_get_string(ct));
    } else if (ct && json_object_is_type(ct, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(ct) && !out; i++) {
            json_object *e = json_object_array_get_idx(ct, i);
            const char *name = jstr(e, "name"), *tmpl = jstr(e, "template");
            if (name && tmpl && !strcmp(name, "default"))
                out = strdup(tmpl);
        }
    }
    json_object_put(o);
    if (out)
        return out;
    snprintf(p, sizeof p, "%s/chat_template.jinja", dir);
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n >= 0 && (out = malloc((size_t)n + 1))) {
        size_t got = fread(out, 1, (size_t)n, f);
        out[got] = 0;
    }
    fclose(f);
    return out;
}
