/* See qwen3-writer.h. The values: tests/reference/flux2_text_reference.py. */
#include "name-hash.h"
#include "qwen3-writer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/base/dtype.h"
#include "engine/formats/gguf.h"

enum kind { MAT, EMB, NORM };

static void gen(const char *name, int64_t rows, int64_t cols, enum kind k, float *v)
{
    int64_t n = rows ? rows * cols : cols;
    uint64_t seed = rlx_test_fnv1a64(name);
    float mat = (float)(1.5 / sqrt((double)cols));
    for (int64_t i = 0; i < n; i++) {
        float u = rlx_test_uniform(seed, i);
        v[i] = k == MAT ? u * mat : k == EMB ? u : 1.0f + u * 0.2f;
    }
}

/* every tensor of a Qwen3: GGUF name, HF name, rows (0: 1-D), cols, kind */
typedef struct {
    char gguf[64], hf[96];
    int64_t rows, cols;
    enum kind k;
} wdesc;

static bool shape_ok(const rlx_qwen3_writer_shape *s)
{
    return s && s->hidden > 0 && s->hidden <= 16384 && s->heads > 0 && s->kv_heads > 0 &&
           s->heads % s->kv_heads == 0 && s->head_dim > 0 && s->head_dim <= 512 && s->ffn > 0 &&
           s->ffn <= 65536 && s->layers > 0 && s->layers <= 256 && s->vocab > 0 &&
           s->vocab <= 1 << 20;
}

/* w: room for 2 + 11 * layers */
static int list_weights(const rlx_qwen3_writer_shape *s, wdesc *w)
{
    int n = 0;
#define ADD(g, h, r, c, kk)                             \
    do {                                                \
        snprintf(w[n].gguf, sizeof w[n].gguf, "%s", g); \
        snprintf(w[n].hf, sizeof w[n].hf, "%s", h);     \
        w[n].rows = r, w[n].cols = c, w[n].k = kk;      \
        n++;                                            \
    } while (0)
    ADD("token_embd.weight", "model.embed_tokens.weight", s->vocab, s->hidden, EMB);
    static const struct {
        const char *g, *h;
        int r, c; /* 0 D, 1 H*DH, 2 HKV*DH, 3 DH, 4 F */
        enum kind k;
    } per[] = {
        {"attn_norm.weight", "input_layernorm.weight", -1, 0, NORM},
        {"attn_q.weight", "self_attn.q_proj.weight", 1, 0, MAT},
        {"attn_k.weight", "self_attn.k_proj.weight", 2, 0, MAT},
        {"attn_v.weight", "self_attn.v_proj.weight", 2, 0, MAT},
        {"attn_q_norm.weight", "self_attn.q_norm.weight", -1, 3, NORM},
        {"attn_k_norm.weight", "self_attn.k_norm.weight", -1, 3, NORM},
        {"attn_output.weight", "self_attn.o_proj.weight", 0, 1, MAT},
        {"ffn_norm.weight", "post_attention_layernorm.weight", -1, 0, NORM},
        {"ffn_gate.weight", "mlp.gate_proj.weight", 4, 0, MAT},
        {"ffn_up.weight", "mlp.up_proj.weight", 4, 0, MAT},
        {"ffn_down.weight", "mlp.down_proj.weight", 0, 4, MAT},
    };
    const int64_t dim[5] = {s->hidden, (int64_t)s->heads * s->head_dim,
                            (int64_t)s->kv_heads * s->head_dim, s->head_dim, s->ffn};
    for (int il = 0; il < s->layers; il++)
        for (size_t j = 0; j < sizeof per / sizeof per[0]; j++) {
            char g[64], h[96];
            snprintf(g, sizeof g, "blk.%d.%s", il, per[j].g);
            snprintf(h, sizeof h, "model.layers.%d.%s", il, per[j].h);
            ADD(g, h, per[j].r < 0 ? 0 : dim[per[j].r], dim[per[j].c], per[j].k);
        }
    ADD("output_norm.weight", "model.norm.weight", 0, s->hidden, NORM);
#undef ADD
    return n;
}

static wdesc *weights(const rlx_qwen3_writer_shape *s, int *n, rlx_error **err)
{
    if (!shape_ok(s)) {
        rlx_error_set(err, RLX_ERR_INVALID_ARG, "qwen3-writer: a bad shape");
        return NULL;
    }
    wdesc *w = calloc((size_t)(2 + 11 * s->layers), sizeof *w);
    if (!w) {
        rlx_error_set(err, RLX_ERR_NO_MEMORY, "qwen3-writer: out of memory");
        return NULL;
    }
    *n = list_weights(s, w);
    return w;
}

rlx_status rlx_qwen3_writer_write_gguf(const char *path, const rlx_qwen3_writer_shape *s,
                                       const char *arch, rlx_error **err)
{
    int n = 0;
    wdesc *w = weights(s, &n, err);
    if (!w)
        return rlx_error_code(*err);
    rlx_gguf_writer *g = rlx_gguf_writer_create();
    if (!g) {
        free(w);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "qwen3-writer: out of memory");
    }
    char k[128];
#define KV(key, v)                             \
    snprintf(k, sizeof k, "%s.%s", arch, key); \
    rlx_gguf_writer_set_u32(g, k, v)
    rlx_gguf_writer_set_str(g, "general.architecture", arch);
    KV("block_count", (uint32_t)s->layers);
    KV("embedding_length", (uint32_t)s->hidden);
    KV("feed_forward_length", (uint32_t)s->ffn);
    KV("attention.head_count", (uint32_t)s->heads);
    KV("attention.head_count_kv", (uint32_t)s->kv_heads);
    KV("attention.key_length", (uint32_t)s->head_dim);
    KV("attention.value_length", (uint32_t)s->head_dim);
    KV("rope.dimension_count", (uint32_t)s->head_dim);
    KV("context_length", 4096);
#undef KV
    snprintf(k, sizeof k, "%s.rope.freq_base", arch);
    rlx_gguf_writer_set_f32(g, k, 1e6f);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
    rlx_gguf_writer_set_f32(g, k, 1e-6f);
    rlx_status st = RLX_OK;
    for (int i = 0; i < n && st == RLX_OK; i++) {
        int64_t cnt = w[i].rows ? w[i].rows * w[i].cols : w[i].cols;
        float *v = malloc(sizeof *v * (size_t)cnt);
        if (!v) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "qwen3-writer: out of memory");
            break;
        }
        gen(w[i].gguf, w[i].rows, w[i].cols, w[i].k, v);
        uint64_t ne[2] = {(uint64_t)w[i].cols, (uint64_t)w[i].rows};
        if (rlx_gguf_writer_add_tensor(g, w[i].gguf, RLX_DTYPE_F32, w[i].rows ? 2 : 1, ne, v,
                                       sizeof *v * (size_t)cnt) != RLX_OK)
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "qwen3-writer: cannot add %s", w[i].gguf);
        free(v);
    }
    if (st == RLX_OK)
        st = rlx_gguf_writer_write(g, path, err);
    rlx_gguf_writer_free(g);
    free(w);
    return st;
}

rlx_status rlx_qwen3_writer_write_hf(const char *dir, const rlx_qwen3_writer_shape *s,
                                     rlx_error **err)
{
    int n = 0;
    wdesc *w = weights(s, &n, err);
    if (!w)
        return rlx_error_code(*err);
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        free(w);
        return rlx_error_set(err, RLX_ERR_IO, "qwen3-writer: cannot create %s", path);
    }
    fprintf(f,
            "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
            "\"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d, "
            "\"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
            "\"rope_theta\": 1000000, \"rms_norm_eps\": 1e-06, \"max_position_embeddings\": "
            "40960, \"tie_word_embeddings\": true, \"vocab_size\": %d, \"torch_dtype\": "
            "\"bfloat16\"}\n",
            s->hidden, s->ffn, s->layers, s->heads, s->kv_heads, s->head_dim, s->vocab);
    if (fclose(f) != 0) {
        free(w);
        return rlx_error_set(err, RLX_ERR_IO, "qwen3-writer: cannot write %s", path);
    }
    size_t cap = 256 + (size_t)n * 160, hl = 0;
    char *hdr = malloc(cap);
    if (!hdr) {
        free(w);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "qwen3-writer: out of memory");
    }
    uint64_t off = 0;
    hl += (size_t)snprintf(hdr + hl, cap - hl, "{");
    for (int i = 0; i < n; i++) {
        uint64_t cnt = (uint64_t)(w[i].rows ? w[i].rows * w[i].cols : w[i].cols);
        if (w[i].rows)
            hl +=
                (size_t)snprintf(hdr + hl, cap - hl,
                                 "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld,%lld],"
                                 "\"data_offsets\":[%llu,%llu]}",
                                 i ? "," : "", w[i].hf, (long long)w[i].rows, (long long)w[i].cols,
                                 (unsigned long long)off, (unsigned long long)(off + 2 * cnt));
        else
            hl += (size_t)snprintf(hdr + hl, cap - hl,
                                   "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld],"
                                   "\"data_offsets\":[%llu,%llu]}",
                                   i ? "," : "", w[i].hf, (long long)w[i].cols,
                                   (unsigned long long)off, (unsigned long long)(off + 2 * cnt));
        off += 2 * cnt;
    }
    hl += (size_t)snprintf(hdr + hl, cap - hl, "}");
    while (hl % 8)
        hdr[hl++] = ' ';
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    bool ok = f != NULL;
    uint8_t len[8];
    for (int b = 0; b < 8; b++)
        len[b] = (uint8_t)((uint64_t)hl >> (8 * b));
    if (ok)
        ok = fwrite(len, 1, 8, f) == 8 && fwrite(hdr, 1, hl, f) == hl;
    for (int i = 0; i < n && ok; i++) {
        int64_t cnt = w[i].rows ? w[i].rows * w[i].cols : w[i].cols;
        float *v = malloc(sizeof *v * (size_t)cnt);
        uint16_t *h = malloc(sizeof *h * (size_t)cnt);
        ok = v && h;
        if (ok) {
            gen(w[i].gguf, w[i].rows, w[i].cols, w[i].k, v);
            for (int64_t j = 0; j < cnt; j++)
                h[j] = rlx_f32_to_bf16(v[j]); /* round to nearest even */
            ok = fwrite(h, 2, (size_t)cnt, f) == (size_t)cnt;
        }
        free(v);
        free(h);
    }
    if (f && fclose(f) != 0)
        ok = false;
    free(hdr);
    free(w);
    return ok ? RLX_OK : rlx_error_set(err, RLX_ERR_IO, "qwen3-writer: cannot write %s", path);
}
