/* A random-weight whisper-tiny as ggml .bin and HF folder: see whisper-writer.h
 * for the generator, which tests/reference/whisper_reference.py reproduces. */
#include "name-hash.h"
#include "whisper-writer.h"

#include "backends/cpu/kernels.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/base/dtype.h"

/* the most tensors a layout may have (8 + 8 layers: 5 + 8 * 15 + 4 + 8 * 24 + 2) */
#define MAX_TENSORS 400

const rlx_ww_config rlx_ww_tiny = {
    .name = "tiny",
    .n_vocab = RLX_WW_N_VOCAB,
    .n_audio_ctx = RLX_WW_N_AUDIO_CTX,
    .n_state = RLX_WW_N_STATE,
    .n_head = RLX_WW_N_HEAD,
    .n_audio_layer = RLX_WW_N_LAYER,
    .n_text_ctx = RLX_WW_N_TEXT_CTX,
    .n_text_layer = RLX_WW_N_LAYER,
    .n_mels = RLX_WW_N_MELS,
};

const rlx_ww_config rlx_ww_v3 = {
    .name = "v3",
    .n_vocab = 51866,
    .n_audio_ctx = 1500,
    .n_state = 256,
    .n_head = 4,
    .n_audio_layer = 2,
    .n_text_ctx = 448,
    .n_text_layer = 4,
    .n_mels = 128,
};

/* ---- the tensor table ---- */

typedef struct table {
    const rlx_ww_config *c;
    rlx_ww_tensor t[MAX_TENSORS];
    char names[MAX_TENSORS][2][96];
    size_t n;
} table;

static void add(table *tb, const char *name, const char *hf, int rank, int64_t d0, int64_t d1,
                int64_t d2, rlx_ww_kind kind)
{
    if (tb->n >= MAX_TENSORS)
        return;
    rlx_ww_tensor *t = &tb->t[tb->n];
    snprintf(tb->names[tb->n][0], 96, "%s", name);
    snprintf(tb->names[tb->n][1], 96, "%s", hf);
    t->name = tb->names[tb->n][0];
    t->hf_name = tb->names[tb->n][1];
    t->rank = rank;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->shape[2] = d2;
    t->kind = kind;
    t->fan_in = kind == RLX_WW_MATRIX ? (rank == 3 ? d1 * d2 : d1) : 0;
    tb->n++;
}

/* a layer norm, or a linear: weight [out, in] (+ bias) */
static void add_ln(table *tb, const char *p, const char *hp)
{
    char a[96], b[96];
    int64_t n = tb->c->n_state;
    snprintf(a, sizeof a, "%s.weight", p);
    snprintf(b, sizeof b, "%s.weight", hp);
    add(tb, a, b, 1, n, 0, 0, RLX_WW_LN_WEIGHT);
    snprintf(a, sizeof a, "%s.bias", p);
    snprintf(b, sizeof b, "%s.bias", hp);
    add(tb, a, b, 1, n, 0, 0, RLX_WW_BIAS);
}

static void add_linear(table *tb, const char *p, const char *hp, int64_t out, int64_t in, bool bias)
{
    char a[96], b[96];
    snprintf(a, sizeof a, "%s.weight", p);
    snprintf(b, sizeof b, "%s.weight", hp);
    add(tb, a, b, 2, out, in, 0, RLX_WW_MATRIX);
    if (bias) {
        snprintf(a, sizeof a, "%s.bias", p);
        snprintf(b, sizeof b, "%s.bias", hp);
        add(tb, a, b, 1, out, 0, 0, RLX_WW_BIAS);
    }
}

static void add_attn(table *tb, const char *p, const char *hp)
{
    char a[96], b[96];
    static const char *const ours[4] = {"query", "key", "value", "out"};
    static const char *const theirs[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    for (int k = 0; k < 4; k++) {
        snprintf(a, sizeof a, "%s.%s", p, ours[k]);
        snprintf(b, sizeof b, "%s.%s", hp, theirs[k]);
        add_linear(tb, a, b, tb->c->n_state, tb->c->n_state, k != 1);
    }
}

static void add_block(table *tb, const char *stack, int i, bool cross)
{
    char p[96], hp[96], a[96], b[96];
    int64_t n = tb->c->n_state;
    snprintf(p, sizeof p, "%s.blocks.%d", stack, i);
    snprintf(hp, sizeof hp, "model.%s.layers.%d", stack, i);
    /* openai's ResidualAttentionBlock registers attn, attn_ln, cross_attn,
     * cross_attn_ln, mlp, mlp_ln in that order */
    snprintf(a, sizeof a, "%s.attn", p);
    snprintf(b, sizeof b, "%s.self_attn", hp);
    add_attn(tb, a, b);
    snprintf(a, sizeof a, "%s.attn_ln", p);
    snprintf(b, sizeof b, "%s.self_attn_layer_norm", hp);
    add_ln(tb, a, b);
    if (cross) {
        snprintf(a, sizeof a, "%s.cross_attn", p);
        snprintf(b, sizeof b, "%s.encoder_attn", hp);
        add_attn(tb, a, b);
        snprintf(a, sizeof a, "%s.cross_attn_ln", p);
        snprintf(b, sizeof b, "%s.encoder_attn_layer_norm", hp);
        add_ln(tb, a, b);
    }
    snprintf(a, sizeof a, "%s.mlp.0", p);
    snprintf(b, sizeof b, "%s.fc1", hp);
    add_linear(tb, a, b, 4 * n, n, true);
    snprintf(a, sizeof a, "%s.mlp.2", p);
    snprintf(b, sizeof b, "%s.fc2", hp);
    add_linear(tb, a, b, n, 4 * n, true);
    snprintf(a, sizeof a, "%s.mlp_ln", p);
    snprintf(b, sizeof b, "%s.final_layer_norm", hp);
    add_ln(tb, a, b);
}

static void build_table(table *tb, const rlx_ww_config *c)
{
    int64_t n = c->n_state;
    tb->c = c;
    tb->n = 0;
    add(tb, "encoder.positional_embedding", "model.encoder.embed_positions.weight", 2,
        c->n_audio_ctx, n, 0, RLX_WW_SINUSOIDS);
    add(tb, "encoder.conv1.weight", "model.encoder.conv1.weight", 3, n, c->n_mels, 3,
        RLX_WW_MATRIX);
    add(tb, "encoder.conv1.bias", "model.encoder.conv1.bias", 1, n, 0, 0, RLX_WW_BIAS);
    add(tb, "encoder.conv2.weight", "model.encoder.conv2.weight", 3, n, n, 3, RLX_WW_MATRIX);
    add(tb, "encoder.conv2.bias", "model.encoder.conv2.bias", 1, n, 0, 0, RLX_WW_BIAS);
    for (int i = 0; i < c->n_audio_layer; i++)
        add_block(tb, "encoder", i, false);
    add_ln(tb, "encoder.ln_post", "model.encoder.layer_norm");
    add(tb, "decoder.positional_embedding", "model.decoder.embed_positions.weight", 2,
        c->n_text_ctx, n, 0, RLX_WW_EMBEDDING);
    add(tb, "decoder.token_embedding.weight", "model.decoder.embed_tokens.weight", 2, c->n_vocab, n,
        0, RLX_WW_EMBEDDING);
    for (int i = 0; i < c->n_text_layer; i++)
        add_block(tb, "decoder", i, true);
    add_ln(tb, "decoder.ln", "model.decoder.layer_norm");
}

static const table *get_table(const rlx_ww_config *c)
{
    /* built once per layout; a table is a pure function of its layout, so a
     * racing second build writes the same bytes (and tests are
     * single-threaded); two slots: tiny and v3 */
    static table tb[2];
    static int ready[2];
    int k = c == &rlx_ww_tiny ? 0 : 1;
    if (!ready[k] || tb[k].c != c) {
        build_table(&tb[k], c);
        ready[k] = 1;
    }
    return &tb[k];
}

size_t rlx_ww_n_tensors(const rlx_ww_config *c)
{
    return get_table(c)->n;
}

const rlx_ww_tensor *rlx_ww_tensor_at(const rlx_ww_config *c, size_t i)
{
    const table *tb = get_table(c);
    return i < tb->n ? &tb->t[i] : NULL;
}

const rlx_ww_tensor *rlx_ww_find(const rlx_ww_config *c, const char *name)
{
    const table *tb = get_table(c);
    for (size_t i = 0; i < tb->n; i++)
        if (!strcmp(tb->t[i].name, name) || !strcmp(tb->t[i].hf_name, name))
            return &tb->t[i];
    return NULL;
}

size_t rlx_whisper_writer_n_tensors(void)
{
    return rlx_ww_n_tensors(&rlx_ww_tiny);
}

const rlx_ww_tensor *rlx_whisper_writer_tensor(size_t i)
{
    return rlx_ww_tensor_at(&rlx_ww_tiny, i);
}

const rlx_ww_tensor *rlx_whisper_writer_find(const char *name)
{
    return rlx_ww_find(&rlx_ww_tiny, name);
}

int64_t rlx_whisper_writer_numel(const rlx_ww_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= t->shape[d];
    return n;
}

/* ---- the generator (tests/name-hash.h) and its scales ---- */

/* element i of openai's sinusoids(length, width) */
static float sinusoid(int64_t i, int64_t width)
{
    int64_t t = i / width, c = i % width, half = width / 2;
    double inc = log(10000.0) / (double)(half - 1);
    double x = (double)t * exp(-inc * (double)(c % half));
    return (float)(c < half ? sin(x) : cos(x));
}

double rlx_whisper_writer_gain(const rlx_ww_tensor *t)
{
    if (t->kind != RLX_WW_MATRIX)
        return 1.0;
    if (strstr(t->name, ".query.weight") || strstr(t->name, ".key.weight"))
        return 4.0;
    if (strstr(t->name, "cross_attn.out.weight"))
        return 0.25;
    return 1.0;
}

void rlx_whisper_writer_fill(const rlx_ww_tensor *t, int64_t first, int64_t n, float *dst)
{
    uint64_t seed = rlx_test_fnv1a64(t->name);
    float scale = t->kind == RLX_WW_MATRIX
                      ? (float)(rlx_whisper_writer_gain(t) * sqrt(3.0 / (double)t->fan_in))
                      : 0.0f;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = first + k;
        switch (t->kind) {
        case RLX_WW_MATRIX:
            dst[k] = rlx_test_uniform(seed, i) * scale;
            break;
        case RLX_WW_LN_WEIGHT:
            dst[k] = 1.0f + rlx_test_uniform(seed, i) * 0.125f;
            break;
        case RLX_WW_BIAS:
            dst[k] = rlx_test_uniform(seed, i) * 0.0625f;
            break;
        case RLX_WW_EMBEDDING:
            dst[k] = rlx_test_uniform(seed, i) * 0.5f;
            break;
        case RLX_WW_SINUSOIDS:
        default:
            dst[k] = sinusoid(i, t->shape[1]);
            break;
        }
    }
}

float rlx_whisper_writer_value(const rlx_ww_tensor *t, int64_t i)
{
    float v;
    rlx_whisper_writer_fill(t, i, 1, &v);
    return v;
}

/* ---- output helpers ---- */

#define CHUNK (1 << 18) /* elements generated and written at a time */

typedef struct out {
    FILE *f;
    const char *path;
    bool failed;
} out;

static void put(out *o, const void *p, size_t n)
{
    if (!o->failed && n && fwrite(p, 1, n, o->f) != n)
        o->failed = true;
}

static void put_i32(out *o, int32_t v)
{
    put(o, &v, 4);
}

static rlx_status out_open(out *o, const char *path, rlx_error **err)
{
    o->path = path;
    o->failed = false;
    o->f = fopen(path, "wb");
    if (!o->f)
        return rlx_error_set(err, RLX_ERR_IO, "Could not create %s: %s.", path, strerror(errno));
    setvbuf(o->f, NULL, _IOFBF, 4 << 20);
    return RLX_OK;
}

static rlx_status out_close(out *o, rlx_error **err)
{
    int rc = fclose(o->f);
    if (o->failed || rc != 0)
        return rlx_error_set(err, RLX_ERR_IO, "Could not write %s (disk full?).", o->path);
    return RLX_OK;
}

/* the whole tensor as F32 or F16 (little-endian hosts only, as the project) */
static void put_tensor(out *o, const rlx_ww_tensor *t, bool f16, float *buf)
{
    int64_t n = rlx_whisper_writer_numel(t);
    for (int64_t at = 0; at < n; at += CHUNK) {
        int64_t k = n - at < CHUNK ? n - at : CHUNK;
        rlx_whisper_writer_fill(t, at, k, buf);
        if (f16) {
            uint16_t *h = (uint16_t *)buf;
            for (int64_t j = 0; j < k; j++)
                h[j] = rlx_f32_to_f16(buf[j]); /* in place: h[j] is behind buf[j] */
            put(o, h, (size_t)k * 2);
        } else {
            put(o, buf, (size_t)k * 4);
        }
    }
}

/* ---- the source header: hparams, filterbank, vocabulary ---- */

typedef struct source {
    uint8_t *data;
    size_t size;
    size_t header_end; /* end of the vocabulary */
    size_t vocab_at;   /* the vocabulary's count */
    int32_t n_words;
} source;

static int32_t rd_i32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static rlx_status source_read(const char *path, source *s, rlx_error **err)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f)
        return rlx_error_set(err, RLX_ERR_IO, "Could not open %s: %s.", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || ftell(f) < 0) {
        fclose(f);
        return rlx_error_set(err, RLX_ERR_IO, "Could not read %s.", path);
    }
    s->size = (size_t)ftell(f);
    rewind(f);
    s->data = malloc(s->size ? s->size : 1);
    if (!s->data || fread(s->data, 1, s->size, f) != s->size) {
        fclose(f);
        free(s->data);
        s->data = NULL;
        return rlx_error_set(err, RLX_ERR_IO, "Could not read %s.", path);
    }
    fclose(f);
    static const int32_t want[10] = {
        RLX_WW_N_VOCAB,    RLX_WW_N_AUDIO_CTX, RLX_WW_N_STATE, RLX_WW_N_HEAD,  RLX_WW_N_LAYER,
        RLX_WW_N_TEXT_CTX, RLX_WW_N_STATE,     RLX_WW_N_HEAD,  RLX_WW_N_LAYER, RLX_WW_N_MELS};
    const char *why = NULL;
    size_t at = 48;
    if (s->size < 56 || rd_i32(s->data) != 0x67676d6c) {
        why = "it is not a whisper.cpp ggml file";
    } else {
        for (int k = 0; k < 10 && !why; k++)
            if (rd_i32(s->data + 4 + 4 * k) != want[k])
                why = "its hyperparameters are not whisper-tiny's";
    }
    if (!why) {
        int32_t nm = rd_i32(s->data + at), nf = rd_i32(s->data + at + 4);
        at += 8;
        if (nm != RLX_WW_N_MELS || nf != 201 || s->size - at < (size_t)nm * nf * 4 + 4)
            why = "its mel filterbank is not 80 x 201";
        else
            at += (size_t)nm * nf * 4;
    }
    if (!why) {
        s->vocab_at = at;
        s->n_words = rd_i32(s->data + at);
        at += 4;
        if (s->n_words <= 0 || s->n_words > RLX_WW_N_VOCAB)
            why = "its vocabulary count is out of range";
        for (int32_t k = 0; k < s->n_words && !why; k++) {
            if (s->size - at < 4) {
                why = "its vocabulary is truncated";
                break;
            }
            int32_t len = rd_i32(s->data + at);
            at += 4;
            if (len < 0 || (size_t)len > s->size - at)
                why = "its vocabulary is truncated";
            else
                at += (size_t)len;
        }
    }
    if (why) {
        free(s->data);
        s->data = NULL;
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s cannot serve as the header: %s.", path, why);
    }
    s->header_end = at;
    return RLX_OK;
}

/* ---- ggml ---- */

/* Q8_0 rows (blocks of 32) of a tensor whose last dim is a multiple of 32 */
static rlx_status put_q8_0(out *o, const rlx_ww_tensor *t, float *buf)
{
    int64_t k = t->shape[t->rank - 1], rows = rlx_whisper_writer_numel(t) / k;
    size_t bytes = (size_t)(k / 32) * 34;
    uint8_t *q = malloc(bytes);
    if (!q || k % 32 || k > CHUNK) {
        free(q);
        return RLX_ERR_INVALID_ARG;
    }
    for (int64_t r = 0; r < rows; r++) {
        rlx_whisper_writer_fill(t, r * k, k, buf);
        if (rlx_cpu_quantize_row(RLX_DTYPE_Q8_0, buf, q, k) != RLX_OK) {
            free(q);
            return RLX_ERR_INVALID_ARG;
        }
        put(o, q, bytes);
    }
    free(q);
    return RLX_OK;
}

static rlx_status write_ggml(const rlx_ww_config *c, const char *header_src, const char *out_path,
                             int kind, rlx_error **err);

rlx_status rlx_whisper_writer_ggml(const char *header_src, const char *out_path, bool f16,
                                   rlx_error **err)
{
    return write_ggml(&rlx_ww_tiny, header_src, out_path, f16 ? 1 : 0, err);
}

rlx_status rlx_ww_write_ggml(const rlx_ww_config *c, const char *header_src, const char *out_path,
                             bool f16, rlx_error **err)
{
    return write_ggml(c, header_src, out_path, f16 ? 1 : 0, err);
}

rlx_status rlx_whisper_writer_ggml_q8_0(const char *header_src, const char *out_path, bool as_f32,
                                        rlx_error **err)
{
    return write_ggml(&rlx_ww_tiny, header_src, out_path, as_f32 ? -7 : 7, err);
}

/* F32 rows holding what Q8_0 blocks of them decode to */
static rlx_status put_q8_0_f32(out *o, const rlx_ww_tensor *t, float *buf)
{
    int64_t k = t->shape[t->rank - 1], rows = rlx_whisper_writer_numel(t) / k;
    uint8_t *q = malloc((size_t)(k / 32) * 34);
    if (!q || k % 32 || k > CHUNK) {
        free(q);
        return RLX_ERR_INVALID_ARG;
    }
    for (int64_t r = 0; r < rows; r++) {
        rlx_whisper_writer_fill(t, r * k, k, buf);
        if (rlx_cpu_quantize_row(RLX_DTYPE_Q8_0, buf, q, k) != RLX_OK ||
            rlx_cpu_dequantize_row(RLX_DTYPE_Q8_0, q, buf, k) != RLX_OK) {
            free(q);
            return RLX_ERR_INVALID_ARG;
        }
        put(o, buf, (size_t)k * 4);
    }
    free(q);
    return RLX_OK;
}

/* kind: ggml's ftype: 0 F32, 1 F16, 7 Q8_0; -7: F32 with the Q8_0 file's
 * values (its matrices quantized and decoded again, its conv weights F16-rounded) */
static rlx_status write_ggml(const rlx_ww_config *c, const char *header_src, const char *out_path,
                             int kind, rlx_error **err)
{
    bool as_f32 = kind == -7;
    if (as_f32)
        kind = 7;
    bool f16 = kind != 0;
    source s;
    if (source_read(header_src, &s, err) != RLX_OK)
        return RLX_ERR_FORMAT;
    /* the layout's own filterbank: the source's 80 rows, or the reference's
     * 128-row Slaney bank (openai's mel_filters.npz "mel_128" is librosa's) */
    float *filters = NULL;
    if (c->n_mels != RLX_WW_N_MELS) {
        char name[64];
        snprintf(name, sizeof name, "mel-filters-%d-ref.f32", c->n_mels);
        filters = rlx_ww_fixture_f32(name, (size_t)c->n_mels * 201);
        if (!filters) {
            free(s.data);
            return rlx_error_set(err, RLX_ERR_IO,
                                 "tests/fixtures/%s (the %d-mel filterbank) is missing or the "
                                 "wrong size.",
                                 name, c->n_mels);
        }
    }
    /* quantized files carry ggml's quantization version (2) as ftype + 1000 * 2 */
    int32_t ftype = as_f32 ? 1 : kind == 7 ? kind + 2000 : kind;
    int32_t hp[12] = {0x67676d6c, c->n_vocab,       c->n_audio_ctx, c->n_state,
                      c->n_head,  c->n_audio_layer, c->n_text_ctx,  c->n_state,
                      c->n_head,  c->n_text_layer,  c->n_mels,      ftype};
    out o;
    if (out_open(&o, out_path, err) != RLX_OK) {
        free(s.data);
        free(filters);
        return RLX_ERR_IO;
    }
    put(&o, hp, sizeof hp);
    put_i32(&o, c->n_mels);
    put_i32(&o, 201);
    if (filters)
        put(&o, filters, sizeof(float) * (size_t)c->n_mels * 201);
    else
        put(&o, s.data + 56, sizeof(float) * (size_t)RLX_WW_N_MELS * 201);
    /* the vocabulary as it is: whisper.cpp's files hold the 50,257 text
     * words only, and every layout derives its special ids from n_vocab */
    put(&o, s.data + s.vocab_at, s.header_end - s.vocab_at);
    free(s.data);
    free(filters);
    float *buf = malloc(sizeof(float) * CHUNK);
    if (!buf) {
        fclose(o.f);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory writing %s.", out_path);
    }
    for (size_t i = 0; i < rlx_ww_n_tensors(c); i++) {
        const rlx_ww_tensor *t = rlx_ww_tensor_at(c, i);
        bool conv_bias =
            !strcmp(t->name, "encoder.conv1.bias") || !strcmp(t->name, "encoder.conv2.bias");
        int n_dims = conv_bias ? 2 : t->rank;
        /* convert-pt-to-ggml.py: F32 for 1-D tensors, the conv biases and
         * the positional embeddings */
        bool half = f16 && n_dims >= 2 && !conv_bias && !strstr(t->name, "positional_embedding");
        /* whisper.cpp's quantize: the 2-D matrices but the positional
         * embeddings; the 3-D conv weights keep their F16 */
        bool q8 = kind == 7 && half && n_dims == 2;
        int32_t name_len = (int32_t)strlen(t->name);
        put_i32(&o, n_dims);
        put_i32(&o, name_len);
        put_i32(&o, as_f32 ? (q8 ? 0 : half ? 1 : 0) : q8 ? 8 : half ? 1 : 0);
        if (conv_bias) {
            put_i32(&o, 1);
            put_i32(&o, (int32_t)t->shape[0]);
        } else {
            for (int d = t->rank - 1; d >= 0; d--)
                put_i32(&o, (int32_t)t->shape[d]);
        }
        put(&o, t->name, (size_t)name_len);
        if (q8) {
            if ((as_f32 ? put_q8_0_f32(&o, t, buf) : put_q8_0(&o, t, buf)) != RLX_OK) {
                free(buf);
                fclose(o.f);
                return rlx_error_set(err, RLX_ERR_INTERNAL, "Q8_0 rows of %s failed.", t->name);
            }
        } else {
            put_tensor(&o, t, half, buf);
        }
    }
    free(buf);
    return out_close(&o, err);
}

/* ---- Hugging Face ---- */

/* openai-whisper's LANGUAGES, in token order (<|en|> = 50259); tiny has the
 * first 99, large-v3 all 100 ("yue" last) */
static const char *const LANGS[100] = {
    "en", "zh", "de", "es",  "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
    "it", "id", "hi", "fi",  "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
    "th", "ur", "hr", "bg",  "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
    "az", "sl", "kn", "et",  "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si",  "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
    "am", "yi", "lo", "uz",  "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
    "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};

/* openai's tokenizer.py lays the specials out after the 50,257 text words:
 * <|endoftext|>, <|startoftranscript|>, one token per language, translate,
 * transcribe, startoflm, startofprev, nospeech, notimestamps, then 1501
 * timestamps; n_vocab 51865 is 99 languages, 51866 (large-v3) 100 */
typedef struct specials {
    int n_langs, eot, sot, lang0, translate, transcribe, solm, prev, nospeech, notimestamps, ts0;
} specials;

static specials specials_of(const rlx_ww_config *c)
{
    specials k;
    k.n_langs = c->n_vocab - 51765 - 1;
    k.eot = 50257;
    k.sot = 50258;
    k.lang0 = 50259;
    k.translate = k.lang0 + k.n_langs;
    k.transcribe = k.translate + 1;
    k.solm = k.translate + 2;
    k.prev = k.translate + 3;
    k.nospeech = k.translate + 4;
    k.notimestamps = k.translate + 5;
    k.ts0 = k.translate + 6;
    return k;
}

/* openai/whisper-tiny's (and large-v3's) suppress_tokens below the
 * specials: openai's non_speech_tokens, text ids the same in both
 * vocabularies; the specials sot, translate, transcribe, startoflm,
 * startofprev and nospeech follow (put_suppress) */
static const int SUPPRESS[] = {
    1,     2,     7,     8,     9,     10,    14,    25,    26,    27,    28,    29,
    31,    58,    59,    60,    61,    62,    63,    90,    91,    92,    93,    359,
    503,   522,   542,   873,   893,   902,   918,   922,   931,   1350,  1853,  1982,
    2460,  2627,  3246,  3253,  3268,  3536,  3846,  3961,  4183,  4667,  6585,  6647,
    7273,  9061,  9383,  10428, 10929, 11938, 12033, 12331, 12562, 13793, 14157, 14635,
    15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161, 26435,
    28279, 29464, 31650, 32302, 32470, 36865, 42863, 47425, 49870, 50254};

static void put_str(out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void put_fmt(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_fmt(out *o, const char *fmt, ...)
{
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(o, b, (size_t)n < sizeof b ? (size_t)n : sizeof b - 1);
}

static void put_suppress(out *o, const specials *k)
{
    put_str(o, "[");
    for (size_t i = 0; i < sizeof SUPPRESS / sizeof SUPPRESS[0]; i++)
        put_fmt(o, "%s%d", i ? ", " : "", SUPPRESS[i]);
    put_fmt(o, ", %d, %d, %d, %d, %d, %d]", k->sot, k->translate, k->transcribe, k->solm, k->prev,
            k->nospeech);
}

static rlx_status write_config(const rlx_ww_config *c, const char *dir, rlx_error **err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    specials k = specials_of(c);
    bool tiny = c == &rlx_ww_tiny;
    out o;
    if (out_open(&o, path, err) != RLX_OK)
        return RLX_ERR_IO;
    put_fmt(&o,
            "{\n"
            "  \"_name_or_path\": \"%s\",\n"
            "  \"activation_dropout\": 0.0,\n"
            "  \"activation_function\": \"gelu\",\n"
            "  \"architectures\": [\n    \"WhisperForConditionalGeneration\"\n  ],\n"
            "  \"attention_dropout\": 0.0,\n"
            "  \"begin_suppress_tokens\": [\n    220,\n    %d\n  ],\n"
            "  \"bos_token_id\": %d,\n"
            "  \"d_model\": %d,\n"
            "  \"decoder_attention_heads\": %d,\n"
            "  \"decoder_ffn_dim\": %d,\n"
            "  \"decoder_layerdrop\": 0.0,\n"
            "  \"decoder_layers\": %d,\n"
            "  \"decoder_start_token_id\": %d,\n",
            tiny ? "openai/whisper-tiny" : "rlx-tests/whisper-v3-layout", k.eot, k.eot, c->n_state,
            c->n_head, 4 * c->n_state, c->n_text_layer, k.sot);
    put_fmt(&o,
            "  \"dropout\": 0.0,\n"
            "  \"encoder_attention_heads\": %d,\n"
            "  \"encoder_ffn_dim\": %d,\n"
            "  \"encoder_layerdrop\": 0.0,\n"
            "  \"encoder_layers\": %d,\n"
            "  \"eos_token_id\": %d,\n"
            "  \"forced_decoder_ids\": [\n    [\n      1,\n      %d\n    ],\n    [\n"
            "      2,\n      %d\n    ],\n    [\n      3,\n      %d\n    ]\n  ],\n",
            c->n_head, 4 * c->n_state, c->n_audio_layer, k.eot, k.lang0, k.transcribe,
            k.notimestamps);
    put_fmt(&o,
            "  \"init_std\": 0.02,\n"
            "  \"is_encoder_decoder\": true,\n"
            "  \"max_length\": %d,\n"
            "  \"max_source_positions\": %d,\n"
            "  \"max_target_positions\": %d,\n"
            "  \"model_type\": \"whisper\",\n"
            "  \"num_hidden_layers\": %d,\n"
            "  \"num_mel_bins\": %d,\n"
            "  \"pad_token_id\": %d,\n"
            "  \"scale_embedding\": false,\n"
            "  \"suppress_tokens\": ",
            c->n_text_ctx, c->n_audio_ctx, c->n_text_ctx, c->n_audio_layer, c->n_mels, k.eot);
    put_suppress(&o, &k);
    put_fmt(&o,
            ",\n"
            "  \"torch_dtype\": \"float32\",\n"
            "  \"transformers_version\": \"4.27.0.dev0\",\n"
            "  \"use_cache\": true,\n"
            "  \"vocab_size\": %d\n"
            "}\n",
            c->n_vocab);
    return out_close(&o, err);
}

static rlx_status write_generation_config(const rlx_ww_config *c, const char *dir, rlx_error **err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    specials k = specials_of(c);
    out o;
    if (out_open(&o, path, err) != RLX_OK)
        return RLX_ERR_IO;
    /* tiny's alignment heads; the v3 layout's 4 heads a layer take three of
     * its last two layers' */
    put_fmt(&o,
            "{\n"
            "  \"alignment_heads\": %s,\n"
            "  \"begin_suppress_tokens\": [220, %d],\n"
            "  \"bos_token_id\": %d,\n"
            "  \"decoder_start_token_id\": %d,\n"
            "  \"eos_token_id\": %d,\n"
            "  \"forced_decoder_ids\": [[1, null], [2, %d]],\n"
            "  \"is_multilingual\": true,\n"
            "  \"lang_to_id\": {",
            c == &rlx_ww_tiny ? "[[2, 2], [3, 0], [3, 2], [3, 3], [3, 4], [3, 5]]"
                              : "[[2, 1], [3, 0], [3, 2]]",
            k.eot, k.eot, k.sot, k.eot, k.transcribe);
    for (int i = 0; i < k.n_langs; i++)
        put_fmt(&o, "%s\n    \"<|%s|>\": %d", i ? "," : "", LANGS[i], k.lang0 + i);
    put_fmt(&o,
            "\n  },\n"
            "  \"max_initial_timestamp_index\": 50,\n"
            "  \"max_length\": %d,\n"
            "  \"no_timestamps_token_id\": %d,\n"
            "  \"pad_token_id\": %d,\n"
            "  \"prev_sot_token_id\": %d,\n"
            "  \"return_timestamps\": false,\n"
            "  \"suppress_tokens\": ",
            c->n_text_ctx, k.notimestamps, k.eot, k.prev);
    put_suppress(&o, &k);
    put_fmt(&o,
            ",\n"
            "  \"task_to_id\": {\n    \"transcribe\": %d,\n    \"translate\": %d\n  },\n"
            "  \"transformers_version\": \"4.31.0.dev0\"\n"
            "}\n",
            k.transcribe, k.translate);
    return out_close(&o, err);
}

/* GPT-2's byte-to-unicode: printable Latin-1 bytes stand for themselves, the
 * rest map to U+0100 onwards in byte order; written as UTF-8, JSON-escaped */
static void put_json_bytes(out *o, const uint8_t *b, int32_t n)
{
    uint16_t map[256];
    int next = 256;
    for (int c = 0; c < 256; c++) {
        bool keep = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE);
        map[c] = keep ? (uint16_t)c : (uint16_t)next++;
    }
    put_str(o, "\"");
    for (int32_t k = 0; k < n; k++) {
        unsigned cp = map[b[k]];
        char u[3];
        if (cp == '"' || cp == '\\') {
            u[0] = '\\';
            u[1] = (char)cp;
            put(o, u, 2);
        } else if (cp < 0x80) {
            u[0] = (char)cp;
            put(o, u, 1);
        } else {
            u[0] = (char)(0xC0 | (cp >> 6));
            u[1] = (char)(0x80 | (cp & 0x3F));
            put(o, u, 2);
        }
    }
    put_str(o, "\"");
}

static bool has_replacement(const uint8_t *w, int32_t n)
{
    for (int32_t k = 0; k + 2 < n; k++)
        if (w[k] == 0xEF && w[k + 1] == 0xBF && w[k + 2] == 0xBD)
            return true;
    return false;
}

static rlx_status write_vocab(const rlx_ww_config *c, const char *dir, const source *s,
                              rlx_error **err)
{
    specials k = specials_of(c);
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    out o;
    if (out_open(&o, path, err) != RLX_OK)
        return RLX_ERR_IO;
    /* the words, except those we cannot spell: the empty id 50256, and the
     * 1,480 that for-tests-ggml-tiny.bin stores lossily (partial UTF-8
     * sequences decoded to U+FFFD when the file was made, so many ids share
     * one spelling); a reader sees those ids as absent */
    size_t at = s->vocab_at + 4;
    bool first = true;
    for (int32_t id = 0; id < s->n_words; id++) {
        int32_t len = rd_i32(s->data + at);
        const uint8_t *w = s->data + at + 4;
        at += 4 + (size_t)len;
        if (len == 0 || has_replacement(w, len))
            continue;
        put_str(&o, first ? "{" : ", ");
        put_json_bytes(&o, w, len);
        put_fmt(&o, ": %d", id);
        first = false;
    }
    put_str(&o, first ? "{}\n" : "}\n");
    if (out_close(&o, err) != RLX_OK)
        return RLX_ERR_IO;

    snprintf(path, sizeof path, "%s/added_tokens.json", dir);
    if (out_open(&o, path, err) != RLX_OK)
        return RLX_ERR_IO;
    put_fmt(&o, "{\n  \"<|endoftext|>\": %d,\n  \"<|startoftranscript|>\": %d", k.eot, k.sot);
    for (int i = 0; i < k.n_langs; i++)
        put_fmt(&o, ",\n  \"<|%s|>\": %d", LANGS[i], k.lang0 + i);
    /* transformers calls tiny's no-speech token <|nocaptions|>, large-v3's
     * <|nospeech|> */
    put_fmt(&o,
            ",\n  \"<|translate|>\": %d,\n  \"<|transcribe|>\": %d,\n  \"<|startoflm|>\": %d,\n"
            "  \"<|startofprev|>\": %d,\n  \"<|%s|>\": %d,\n  \"<|notimestamps|>\": %d",
            k.translate, k.transcribe, k.solm, k.prev, k.n_langs == 100 ? "nospeech" : "nocaptions",
            k.nospeech, k.notimestamps);
    for (int i = 0; k.ts0 + i < c->n_vocab; i++)
        put_fmt(&o, ",\n  \"<|%d.%02d|>\": %d", i / 50, (i % 50) * 2, k.ts0 + i);
    put_str(&o, "\n}\n");
    return out_close(&o, err);
}

static rlx_status write_safetensors(const rlx_ww_config *c, const char *dir, rlx_error **err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t cap = 64 << 10, at = 0;
    char *hdr = malloc(cap);
    if (!hdr)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory writing %s.", path);
    uint64_t off = 0;
    at += (size_t)snprintf(hdr + at, cap - at, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < rlx_ww_n_tensors(c); i++) {
        const rlx_ww_tensor *t = rlx_ww_tensor_at(c, i);
        uint64_t bytes = (uint64_t)rlx_whisper_writer_numel(t) * 4;
        at += (size_t)snprintf(hdr + at, cap - at, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[",
                               t->hf_name);
        for (int d = 0; d < t->rank; d++)
            at += (size_t)snprintf(hdr + at, cap - at, "%s%lld", d ? "," : "",
                                   (long long)t->shape[d]);
        at += (size_t)snprintf(hdr + at, cap - at, "],\"data_offsets\":[%llu,%llu]}",
                               (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    at += (size_t)snprintf(hdr + at, cap - at, "}");
    while (at % 8 && at < cap - 1)
        hdr[at++] = ' ';
    out o;
    if (out_open(&o, path, err) != RLX_OK) {
        free(hdr);
        return RLX_ERR_IO;
    }
    uint64_t hl = at;
    put(&o, &hl, 8);
    put(&o, hdr, at);
    free(hdr);
    float *buf = malloc(sizeof(float) * CHUNK);
    if (!buf) {
        fclose(o.f);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory writing %s.", path);
    }
    for (size_t i = 0; i < rlx_ww_n_tensors(c); i++)
        put_tensor(&o, rlx_ww_tensor_at(c, i), false, buf);
    free(buf);
    return out_close(&o, err);
}

rlx_status rlx_whisper_writer_hf(const char *header_src, const char *out_dir, rlx_error **err)
{
    return rlx_ww_write_hf(&rlx_ww_tiny, header_src, out_dir, err);
}

rlx_status rlx_ww_write_hf(const rlx_ww_config *c, const char *header_src, const char *out_dir,
                           rlx_error **err)
{
    source s;
    if (source_read(header_src, &s, err) != RLX_OK)
        return RLX_ERR_FORMAT;
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
        free(s.data);
        return rlx_error_set(err, RLX_ERR_IO, "Could not create the folder %s: %s.", out_dir,
                             strerror(errno));
    }
    rlx_status st = write_config(c, out_dir, err);
    if (st == RLX_OK)
        st = write_generation_config(c, out_dir, err);
    if (st == RLX_OK)
        st = write_vocab(c, out_dir, &s, err);
    free(s.data);
    if (st == RLX_OK)
        st = write_safetensors(c, out_dir, err);
    return st;
}

/* ---- fixtures ---- */

const int32_t rlx_ww_prompt[RLX_WW_PROMPT_LEN] = {50258, 50259, 50359, 50364, 400, 1012, 11, 1029};

int rlx_ww_mel_frame(int j)
{
    return j < 256 ? j : 1050 + (j - 256);
}

int rlx_ww_enc_row(int j)
{
    return j < 16 ? j : j < 32 ? 740 + (j - 16) : 1484 + (j - 32);
}

int rlx_ww_logit_col(int j)
{
    return j < 519 ? 97 * j : 50265 + (j - 519);
}

static FILE *open_fixture(const char *name, const char *mode)
{
#ifdef RLX_TEST_SOURCE_DIR
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", RLX_TEST_SOURCE_DIR, name);
    return fopen(path, mode);
#else
    (void)name;
    (void)mode;
    return NULL;
#endif
}

float *rlx_ww_fixture_f32(const char *name, size_t n)
{
    FILE *f = open_fixture(name, "rb");
    if (!f)
        return NULL;
    float *v = malloc(n * sizeof(float) + 1);
    char extra;
    if (!v || fread(v, sizeof(float), n, f) != n || fread(&extra, 1, 1, f) != 0) {
        free(v);
        v = NULL;
    }
    fclose(f);
    return v;
}

float *rlx_ww_fixture_mel_input(void)
{
    float *a = rlx_ww_fixture_f32("whisper-ref-mel-input-a.f32", 80 * 551);
    float *b = rlx_ww_fixture_f32("whisper-ref-mel-input-b.f32", 80 * 551);
    float *mx = rlx_ww_fixture_f32("whisper-ref-mel-max.f32", 2);
    float *mel = a && b && mx ? malloc(sizeof(float) * 80 * 3000) : NULL;
    if (mel) {
        /* frames past 1101 see only the padding zeros: log10 clamps to -10,
         * below the max - 8 floor, so they are (M - 8 + 4) / 4 */
        float pad = (mx[0] - 4.0f) / 4.0f;
        for (int m = 0; m < 80; m++)
            for (int t = 0; t < 3000; t++)
                mel[m * 3000 + t] = t < 551    ? a[m * 551 + t]
                                    : t < 1102 ? b[m * 551 + t - 551]
                                               : pad;
    }
    free(a);
    free(b);
    free(mx);
    return mel;
}

bool rlx_ww_fixture_greedy(const char *name, rlx_ww_greedy *g)
{
    memset(g, 0, sizeof *g);
    FILE *f = open_fixture(name, "r");
    if (!f)
        return false;
    char line[512];
    int keys = 0;
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        if (sscanf(line, "no_speech_prob %lf", &g->no_speech_prob) == 1) {
            keys++;
        } else if (sscanf(line, "no_speech_logprob %lf", &g->no_speech_logprob) == 1) {
            keys++;
        } else if (line[0] >= '0' && line[0] <= '9') {
            int k = g->n;
            ok = k < 224 && sscanf(line, "%d %lf %lf %lf %lf", &g->id[k], &g->margin[k],
                                   &g->ts_margin[k], &g->logit[k], &g->lse[k]) == 5;
            g->n += ok;
        } else if (line[0] != '\n' && line[0] != '#') {
            ok = false;
        }
    }
    fclose(f);
    return ok && keys == 2 && g->n > 0;
}
