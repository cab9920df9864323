/* See flux2-writer.h. The values: tests/reference/flux2_dit_reference.py. */
#include "name-hash.h"
#include "flux2-writer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/formats/gguf.h"
#include "f8-ref.h"

#define D_ 128

void rlx_flux2_writer_fill(const char *name, int64_t n, float *dst)
{
    uint64_t seed = rlx_test_fnv1a64(name);
    for (int64_t i = 0; i < n; i++)
        dst[i] = rlx_test_uniform(seed, i);
}

/* A piece of an output tensor: rows [row0, row0 + n_rows) of a diffusers tensor. */
typedef struct piece {
    char src[96];
    int64_t row0, n_rows;
} piece;

typedef struct otensor {
    char name[128];
    int64_t rows, cols; /* rows 0: 1-D of cols */
    bool norm;
    piece p[3];
    int n_p;
} otensor;

typedef struct model {
    otensor *t;
    int n, cap;
    int in_ch;
    int64_t C, M, J; /* hidden, MLP, joint_dim */
    int n_double, n_single;
} model;

static void add(model *m, const char *name, int64_t rows, int64_t cols, bool norm, int n_p,
                const char *const *src, const int64_t *row0, const int64_t *n_rows)
{
    if (m->n == m->cap)
        return; /* cannot happen: build() sizes the table */
    otensor *t = &m->t[m->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows;
    t->cols = cols;
    t->norm = norm;
    t->n_p = n_p;
    for (int i = 0; i < n_p; i++) {
        snprintf(t->p[i].src, sizeof t->p[i].src, "%s", src[i]);
        t->p[i].row0 = row0 ? row0[i] : 0;
        t->p[i].n_rows = n_rows ? n_rows[i] : (rows ? rows : 1);
    }
}

/* one output tensor = one diffusers tensor */
static void add1(model *m, const char *name, const char *src, int64_t rows, int64_t cols, bool norm)
{
    add(m, name, rows, cols, norm, 1, (const char *const[]){src}, NULL, NULL);
}

static void build(model *m, rlx_f2w_format f, int in_ch, bool guidance)
{
    bool bfl = f == RLX_F2W_BFL || f == RLX_F2W_GGUF;
    const int64_t C_ = m->C, M_ = m->M;
    m->n = 0;
    m->in_ch = in_ch;
    char bn[128], dn[128];
#define G(bn, dn, r, c) add1(m, bfl ? bn : dn, dn, r, c, false)
    G("img_in.weight", "x_embedder.weight", C_, in_ch);
    G("txt_in.weight", "context_embedder.weight", C_, m->J);
    G("time_in.in_layer.weight", "time_guidance_embed.timestep_embedder.linear_1.weight", C_, 256);
    G("time_in.out_layer.weight", "time_guidance_embed.timestep_embedder.linear_2.weight", C_, C_);
    G("double_stream_modulation_img.lin.weight", "double_stream_modulation_img.linear.weight",
      6 * C_, C_);
    G("double_stream_modulation_txt.lin.weight", "double_stream_modulation_txt.linear.weight",
      6 * C_, C_);
    G("single_stream_modulation.lin.weight", "single_stream_modulation.linear.weight", 3 * C_, C_);
    for (int b = 0; b < m->n_double; b++) {
#define BN(fmt) (snprintf(bn, sizeof bn, "double_blocks.%d." fmt, b), bn)
#define DN(fmt) (snprintf(dn, sizeof dn, "transformer_blocks.%d." fmt, b), dn)
        if (bfl) {
            char s0[3][96], s1[3][96];
            static const char *const a[3] = {"to_q", "to_k", "to_v"};
            static const char *const t[3] = {"add_q_proj", "add_k_proj", "add_v_proj"};
            for (int i = 0; i < 3; i++) {
                snprintf(s0[i], sizeof s0[i], "transformer_blocks.%d.attn.%s.weight", b, a[i]);
                snprintf(s1[i], sizeof s1[i], "transformer_blocks.%d.attn.%s.weight", b, t[i]);
            }
            const char *const src[3] = {s0[0], s0[1], s0[2]};
            const char *const srt[3] = {s1[0], s1[1], s1[2]};
            const int64_t r0[3] = {0, 0, 0}, nr[3] = {C_, C_, C_};
            add(m, BN("img_attn.qkv.weight"), 3 * C_, C_, false, 3, src, r0, nr);
            add(m, BN("txt_attn.qkv.weight"), 3 * C_, C_, false, 3, srt, r0, nr);
        } else {
            static const char *const qkv[6] = {"to_q",       "to_k",       "to_v",
                                               "add_q_proj", "add_k_proj", "add_v_proj"};
            for (int i = 0; i < 6; i++) {
                char nm[96];
                snprintf(nm, sizeof nm, "transformer_blocks.%d.attn.%s.weight", b, qkv[i]);
                add1(m, nm, nm, C_, C_, false);
            }
        }
        /* BN() and DN() write different buffers: both may appear in one call */
        G(BN("img_attn.proj.weight"), DN("attn.to_out.0.weight"), C_, C_);
        G(BN("txt_attn.proj.weight"), DN("attn.to_add_out.weight"), C_, C_);
#define N(b_, d_) add1(m, bfl ? b_ : d_, d_, 0, D_, true)
        N(BN("img_attn.norm.query_norm.scale"), DN("attn.norm_q.weight"));
        N(BN("img_attn.norm.key_norm.scale"), DN("attn.norm_k.weight"));
        N(BN("txt_attn.norm.query_norm.scale"), DN("attn.norm_added_q.weight"));
        N(BN("txt_attn.norm.key_norm.scale"), DN("attn.norm_added_k.weight"));
        G(BN("img_mlp.0.weight"), DN("ff.linear_in.weight"), 2 * M_, C_);
        G(BN("img_mlp.2.weight"), DN("ff.linear_out.weight"), C_, M_);
        G(BN("txt_mlp.0.weight"), DN("ff_context.linear_in.weight"), 2 * M_, C_);
        G(BN("txt_mlp.2.weight"), DN("ff_context.linear_out.weight"), C_, M_);
#undef BN
#undef DN
    }
    for (int b = 0; b < m->n_single; b++) {
#define BN(fmt) (snprintf(bn, sizeof bn, "single_blocks.%d." fmt, b), bn)
#define DN(fmt) (snprintf(dn, sizeof dn, "single_transformer_blocks.%d.attn." fmt, b), dn)
        G(BN("linear1.weight"), DN("to_qkv_mlp_proj.weight"), 3 * C_ + 2 * M_, C_);
        G(BN("linear2.weight"), DN("to_out.weight"), C_, C_ + M_);
        N(BN("norm.query_norm.scale"), DN("norm_q.weight"));
        N(BN("norm.key_norm.scale"), DN("norm_k.weight"));
#undef BN
#undef DN
    }
    if (bfl) {
        /* BFL keeps [shift; scale], diffusers [scale; shift] */
        const char *const src[2] = {"norm_out.linear.weight", "norm_out.linear.weight"};
        const int64_t r0[2] = {C_, 0}, nr[2] = {C_, C_};
        add(m, "final_layer.adaLN_modulation.1.weight", 2 * C_, C_, false, 2, src, r0, nr);
    } else {
        add1(m, "norm_out.linear.weight", "norm_out.linear.weight", 2 * C_, C_, false);
    }
    G("final_layer.linear.weight", "proj_out.weight", in_ch, C_);
    if (guidance) {
        G("guidance_in.in_layer.weight", "time_guidance_embed.guidance_embedder.linear_1.weight",
          C_, 256);
        G("guidance_in.out_layer.weight", "time_guidance_embed.guidance_embedder.linear_2.weight",
          C_, C_);
    }
#undef G
#undef N
}

/* the diffusers tensor's columns (for the fan-in) */
static int64_t src_cols(const otensor *t)
{
    return t->cols;
}

/* elements [first, first + n) of output tensor t as float32 */
static void values(const otensor *t, int64_t first, int64_t n, float *dst)
{
    int64_t cols = src_cols(t);
    float gain = t->norm ? 0.0f : (float)sqrt(3.0 / (double)cols);
    int64_t done = 0, base = 0;
    for (int p = 0; p < t->n_p && done < n; p++) {
        int64_t pn = t->p[p].n_rows * (t->rows ? cols : t->cols);
        if (t->rows == 0)
            pn = t->cols;
        int64_t lo = first + done;
        if (lo < base + pn) {
            uint64_t seed = rlx_test_fnv1a64(t->p[p].src);
            int64_t k0 = lo - base, cnt = base + pn - lo;
            if (cnt > n - done)
                cnt = n - done;
            int64_t off = t->p[p].row0 * cols;
            for (int64_t k = 0; k < cnt; k++) {
                float u = rlx_test_uniform(seed, off + k0 + k);
                float v = t->norm ? 1.0f + u / 8.0f : u * gain;
                /* the reference's weights are the BF16 values whatever the file's dtype */
                dst[done + k] = rlx_bf16_to_f32(rlx_f32_to_bf16(v));
            }
            done += cnt;
        }
        base += pn;
    }
}

static int64_t numel(const otensor *t)
{
    return t->rows ? t->rows * t->cols : t->cols;
}

static rlx_dtype tensor_dtype(const otensor *t, rlx_dtype want)
{
    if (t->norm)
        return RLX_DTYPE_F32;
    return want;
}

static uint64_t nbytes(const otensor *t, rlx_dtype dt)
{
    int64_t n = numel(t);
    switch (dt) {
    case RLX_DTYPE_F32:
        return (uint64_t)n * 4;
    case RLX_DTYPE_Q8_0:
        return (uint64_t)n / 32 * 34;
    default:
        return (uint64_t)n * 2;
    }
}

/* elements [e0, e0 + n) encoded in dt into out (n a multiple of 32 for Q8_0) */
static void encode(const float *x, int64_t n, rlx_dtype dt, uint8_t *out)
{
    if (dt == RLX_DTYPE_F32) {
        memcpy(out, x, (size_t)n * 4);
    } else if (dt == RLX_DTYPE_F16 || dt == RLX_DTYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = dt == RLX_DTYPE_F16 ? rlx_f32_to_f16(x[i]) : rlx_f32_to_bf16(x[i]);
            memcpy(out + 2 * i, &h, 2);
        }
    } else { /* Q8_0: llama.cpp's reference quantizer */
        for (int64_t b = 0; b < n / 32; b++) {
            const float *v = x + 32 * b;
            float amax = 0.0f;
            for (int i = 0; i < 32; i++)
                amax = fmaxf(amax, fabsf(v[i]));
            float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t dh = rlx_f32_to_f16(d);
            uint8_t *o = out + 34 * b;
            memcpy(o, &dh, 2);
            for (int i = 0; i < 32; i++)
                o[2 + i] = (uint8_t)(int8_t)roundf(v[i] * id);
        }
    }
}

/* bytes [off, off + n) of tensor t in dt */
typedef struct gen_ctx {
    const otensor *t;
    rlx_dtype dt;
} gen_ctx;

static rlx_status gen_bytes(void *user, uint64_t off, void *buf, uint64_t n, rlx_error **err)
{
    const gen_ctx *g = user;
    uint64_t bs = g->dt == RLX_DTYPE_Q8_0 ? 34 : g->dt == RLX_DTYPE_F32 ? 4 : 2;
    uint64_t eb = g->dt == RLX_DTYPE_Q8_0 ? 32 : 1;
    uint64_t b0 = off / bs, b1 = (off + n + bs - 1) / bs;
    float *x = malloc(sizeof(float) * (b1 - b0) * eb);
    uint8_t *tmp = malloc((b1 - b0) * bs);
    if (!x || !tmp) {
        free(x);
        free(tmp);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "flux2-writer: out of memory");
    }
    values(g->t, (int64_t)(b0 * eb), (int64_t)((b1 - b0) * eb), x);
    encode(x, (int64_t)((b1 - b0) * eb), g->dt, tmp);
    memcpy(buf, tmp + (off - b0 * bs), n);
    free(x);
    free(tmp);
    return RLX_OK;
}

static const char *st_dtype(rlx_dtype dt)
{
    return dt == RLX_DTYPE_F32 ? "F32" : dt == RLX_DTYPE_F16 ? "F16" : "BF16";
}

/* tensors [a, b) of m into one safetensors file */
static rlx_status write_st(const char *path, const model *m, int a, int b, const char *prefix,
                           rlx_dtype want, const char *skip, bool no_data, rlx_error **err)
{
    size_t cap = 64 * 1024, len = 0;
    char *hdr = malloc(cap);
    if (!hdr)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "flux2-writer: out of memory");
    len += (size_t)snprintf(hdr + len, cap - len, "{");
    uint64_t off = 0;
    for (int i = a; i < b; i++) {
        const otensor *t = &m->t[i];
        if (skip && !strcmp(skip, t->p[0].src))
            continue;
        rlx_dtype dt = tensor_dtype(t, want);
        uint64_t nb = nbytes(t, dt);
        if (t->rows)
            len += (size_t)snprintf(hdr + len, cap - len,
                                    "%s\"%s%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],"
                                    "\"data_offsets\":[%llu,%llu]}",
                                    off ? "," : "", prefix, t->name, st_dtype(dt),
                                    (long long)t->rows, (long long)t->cols, (unsigned long long)off,
                                    (unsigned long long)(off + nb));
        else
            len +=
                (size_t)snprintf(hdr + len, cap - len,
                                 "%s\"%s%s\":{\"dtype\":\"%s\",\"shape\":[%lld],"
                                 "\"data_offsets\":[%llu,%llu]}",
                                 off ? "," : "", prefix, t->name, st_dtype(dt), (long long)t->cols,
                                 (unsigned long long)off, (unsigned long long)(off + nb));
        off += nb;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8)
        hdr[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(hdr);
        return rlx_error_set(err, RLX_ERR_IO, "flux2-writer: cannot create %s", path);
    }
    uint64_t hl = len;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, len, f);
    free(hdr);
    if (no_data) {
        bool ok = fflush(f) == 0 && ftruncate(fileno(f), (off_t)(8 + len + off)) == 0;
        if (fclose(f) != 0 || !ok)
            return rlx_error_set(err, RLX_ERR_IO, "flux2-writer: writing %s failed: %s", path,
                                 strerror(errno));
        return RLX_OK;
    }
    const int64_t chunk = 1 << 22;
    float *x = malloc(sizeof(float) * chunk);
    uint8_t *enc = malloc((size_t)chunk * 4);
    bool ok = x && enc;
    for (int i = a; i < b && ok; i++) {
        const otensor *t = &m->t[i];
        if (skip && !strcmp(skip, t->p[0].src))
            continue;
        rlx_dtype dt = tensor_dtype(t, want);
        int64_t n = numel(t);
        for (int64_t e = 0; e < n && ok; e += chunk) {
            int64_t k = n - e < chunk ? n - e : chunk;
            values(t, e, k, x);
            encode(x, k, dt, enc);
            ok = fwrite(enc, 1, (size_t)k * (dt == RLX_DTYPE_F32 ? 4 : 2), f) ==
                 (size_t)k * (dt == RLX_DTYPE_F32 ? 4 : 2);
        }
    }
    free(x);
    free(enc);
    if (fclose(f) != 0 || !ok)
        return rlx_error_set(err, RLX_ERR_IO, "flux2-writer: writing %s failed: %s", path,
                             strerror(errno));
    return RLX_OK;
}

/* ---- FP8 (BFL names, as BFL's and ComfyUI's FP8 checkpoints) ------------ */

static uint8_t f8_code(rlx_dtype dt, float x)
{
    return dt == RLX_DTYPE_F8_E4M3 ? rlx_f32_to_f8_e4m3(x) : rlx_f32_to_f8_e5m2(x);
}

static bool fp8_quantized(const otensor *t)
{
    return t->rows && !t->norm &&
           (!strncmp(t->name, "double_blocks.", 14) || !strncmp(t->name, "single_blocks.", 14));
}

#define COMFY_E4M3 "{\"format\": \"float8_e4m3fn\"}"

/* The block matrices in FP8 with a per-tensor scale (largest |value| over
 * the format's largest), everything else BF16 (norms F32). E4M3: BFL's and
 * ComfyUI's names ("<name>_scale", an "input_scale" our runner does not
 * use, "comfy_quant"); E5M2: ComfyUI's older "scale_weight". With
 * `dequantized`, the same matrices as F32 holding code value x scale. */
static rlx_status write_st_fp8(const char *path, const model *m, const char *prefix, rlx_dtype f8,
                               bool dequantized, rlx_error **err)
{
    const int64_t chunk = 1 << 22;
    float *x = malloc(sizeof(float) * chunk);
    uint8_t *enc = malloc((size_t)chunk * 4);
    float *scale = calloc((size_t)m->n, sizeof *scale);
    size_t cap = 256 * 1024, len = 0;
    char *hdr = malloc(cap);
    if (!x || !enc || !scale || !hdr) {
        free(x), free(enc), free(scale), free(hdr);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "flux2-writer: out of memory");
    }
    double f8_max = f8 == RLX_DTYPE_F8_E4M3 ? 448.0 : 57344.0;
    uint64_t off = 0;
    len += (size_t)snprintf(hdr + len, cap - len, "{");
#define ENTRY(nm, dts, shp, nb)                                                        \
    do {                                                                               \
        len += (size_t)snprintf(                                                       \
            hdr + len, cap - len,                                                      \
            "%s\"%s%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%llu,%llu]}", \
            off ? "," : "", prefix, nm, dts, shp, (unsigned long long)off,             \
            (unsigned long long)(off + (nb)));                                         \
        off += (nb);                                                                   \
    } while (0)
    for (int i = 0; i < m->n; i++) {
        const otensor *t = &m->t[i];
        int64_t n = numel(t);
        char shp[64], nm[200];
        if (t->rows)
            snprintf(shp, sizeof shp, "[%lld,%lld]", (long long)t->rows, (long long)t->cols);
        else
            snprintf(shp, sizeof shp, "[%lld]", (long long)t->cols);
        if (!fp8_quantized(t)) {
            rlx_dtype dt = t->norm ? RLX_DTYPE_F32 : RLX_DTYPE_BF16;
            ENTRY(t->name, st_dtype(dt), shp, nbytes(t, dt));
            continue;
        }
        double amax = 0;
        for (int64_t e = 0; e < n; e += chunk) {
            int64_t k = n - e < chunk ? n - e : chunk;
            values(t, e, k, x);
            for (int64_t j = 0; j < k; j++)
                amax = fmax(amax, fabs((double)x[j]));
        }
        scale[i] = (float)(amax / f8_max);
        if (dequantized) {
            ENTRY(t->name, "F32", shp, (uint64_t)n * 4);
            continue;
        }
        ENTRY(t->name, f8 == RLX_DTYPE_F8_E4M3 ? "F8_E4M3" : "F8_E5M2", shp, (uint64_t)n);
        size_t bl = strlen(t->name) - 7; /* without ".weight" */
        if (f8 == RLX_DTYPE_F8_E4M3) {
            snprintf(nm, sizeof nm, "%s_scale", t->name);
            ENTRY(nm, "F32", "[]", 4);
            snprintf(nm, sizeof nm, "%.*s.input_scale", (int)bl, t->name);
            ENTRY(nm, "F32", "[]", 4);
            snprintf(nm, sizeof nm, "%.*s.comfy_quant", (int)bl, t->name);
            snprintf(shp, sizeof shp, "[%zu]", strlen(COMFY_E4M3));
            ENTRY(nm, "U8", shp, strlen(COMFY_E4M3));
        } else {
            snprintf(nm, sizeof nm, "%.*s.scale_weight", (int)bl, t->name);
            ENTRY(nm, "F32", "[1]", 4);
        }
    }
#undef ENTRY
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8)
        hdr[len++] = ' ';
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL;
    uint64_t hl = len;
    if (ok)
        ok = fwrite(&hl, 8, 1, f) == 1 && fwrite(hdr, 1, len, f) == len;
    for (int i = 0; i < m->n && ok; i++) {
        const otensor *t = &m->t[i];
        int64_t n = numel(t);
        bool q = fp8_quantized(t);
        rlx_dtype dt = t->norm ? RLX_DTYPE_F32 : RLX_DTYPE_BF16;
        for (int64_t e = 0; e < n && ok; e += chunk) {
            int64_t k = n - e < chunk ? n - e : chunk;
            values(t, e, k, x);
            size_t nb;
            if (!q) {
                encode(x, k, dt, enc);
                nb = (size_t)k * (dt == RLX_DTYPE_F32 ? 4 : 2);
            } else if (dequantized) {
                float *d = (float *)(void *)enc;
                for (int64_t j = 0; j < k; j++)
                    d[j] = (float)(rlx_test_f8_value(f8, f8_code(f8, x[j] / scale[i])) * scale[i]);
                nb = (size_t)k * 4;
            } else {
                for (int64_t j = 0; j < k; j++)
                    enc[j] = f8_code(f8, x[j] / scale[i]);
                nb = (size_t)k;
            }
            ok = fwrite(enc, 1, nb, f) == nb;
        }
        if (q && !dequantized && ok) {
            float one = 1.0f;
            ok = fwrite(&scale[i], 4, 1, f) == 1;
            if (ok && f8 == RLX_DTYPE_F8_E4M3)
                ok = fwrite(&one, 4, 1, f) == 1 &&
                     fwrite(COMFY_E4M3, 1, strlen(COMFY_E4M3), f) == strlen(COMFY_E4M3);
        }
    }
    free(x);
    free(enc);
    free(scale);
    free(hdr);
    if (!f || fclose(f) != 0 || !ok)
        return rlx_error_set(err, RLX_ERR_IO, "flux2-writer: writing %s failed: %s", path,
                             strerror(errno));
    return RLX_OK;
}

static rlx_status write_text(const char *path, const char *text, rlx_error **err)
{
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0) {
        if (f)
            fclose(f);
        return rlx_error_set(err, RLX_ERR_IO, "flux2-writer: cannot write %s: %s", path,
                             strerror(errno));
    }
    return fclose(f) ? rlx_error_set(err, RLX_ERR_IO, "flux2-writer: cannot write %s: %s", path,
                                     strerror(errno))
                     : RLX_OK;
}

static rlx_status write_folder(const char *root, const model *m, rlx_dtype want,
                               const rlx_flux2_writer_opts *o, rlx_error **err)
{
    char dir[1024], p[1200];
    snprintf(dir, sizeof dir, "%s/transformer", root);
    mkdir(root, 0755);
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/model_index.json", root);
    rlx_status st =
        write_text(p, "{\"_class_name\": \"Flux2KleinPipeline\", \"is_distilled\": true}\n", err);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"_class_name\": \"Flux2Transformer2DModel\", \"attention_head_dim\": 128, "
             "\"axes_dims_rope\": [32, 32, 32, 32], \"eps\": 1e-06, \"guidance_embeds\": %s, "
             "\"in_channels\": %d, \"joint_attention_dim\": %lld, \"mlp_ratio\": 3.0, "
             "\"num_attention_heads\": %lld, \"num_layers\": %d, \"num_single_layers\": %d, "
             "\"out_channels\": null, \"patch_size\": 1, \"rope_theta\": 2000, "
             "\"timestep_guidance_channels\": 256}\n",
             o->guidance ? "true" : "false", m->in_ch, (long long)m->J, (long long)(m->C / D_),
             m->n_double, m->n_single);
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (st == RLX_OK)
        st = write_text(p, o->config ? o->config : cfg, err);
    int half = m->n / 2;
    static const char *const shard[2] = {"diffusion_pytorch_model-00001-of-00002.safetensors",
                                         "diffusion_pytorch_model-00002-of-00002.safetensors"};
    for (int s = 0; s < 2 && st == RLX_OK; s++) {
        snprintf(p, sizeof p, "%s/%s", dir, shard[s]);
        st = write_st(p, m, s ? half : 0, s ? m->n : half, "", want, o->skip, o->no_data, err);
    }
    if (st != RLX_OK)
        return st;
    size_t cap = 256 + (size_t)m->n * 256, len = 0;
    char *idx = malloc(cap);
    if (!idx)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "flux2-writer: out of memory");
    len += (size_t)snprintf(idx + len, cap - len, "{\"metadata\": {}, \"weight_map\": {");
    bool first = true;
    for (int i = 0; i < m->n; i++) {
        if (o->skip && !strcmp(o->skip, m->t[i].p[0].src))
            continue;
        len += (size_t)snprintf(idx + len, cap - len, "%s\"%s\": \"%s\"", first ? "" : ", ",
                                m->t[i].name, shard[i >= half]);
        first = false;
    }
    len += (size_t)snprintf(idx + len, cap - len, "}}\n");
    snprintf(p, sizeof p, "%s/diffusion_pytorch_model.safetensors.index.json", dir);
    st = write_text(p, idx, err);
    free(idx);
    return st;
}

static rlx_status write_gguf(const char *path, const model *m, rlx_dtype want, const char *prefix,
                             const char *skip, rlx_error **err)
{
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    if (!w)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "flux2-writer: out of memory");
    gen_ctx *ctx = calloc((size_t)m->n, sizeof *ctx);
    if (!ctx) {
        rlx_gguf_writer_free(w);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "flux2-writer: out of memory");
    }
    rlx_gguf_writer_set_str(w, "general.architecture", "flux");
    for (int i = 0; i < m->n; i++) {
        const otensor *t = &m->t[i];
        if (skip && !strcmp(skip, t->p[0].src))
            continue;
        rlx_dtype dt = tensor_dtype(t, want);
        ctx[i] = (gen_ctx){.t = t, .dt = dt};
        uint64_t ne[2] = {(uint64_t)t->cols, (uint64_t)t->rows};
        char nm[160];
        snprintf(nm, sizeof nm, "%s%s", prefix, t->name);
        rlx_gguf_writer_add_tensor_gen(w, nm, dt, t->rows ? 2 : 1, ne, nbytes(t, dt), gen_bytes,
                                       &ctx[i]);
    }
    rlx_status st = rlx_gguf_writer_write(w, path, err);
    rlx_gguf_writer_free(w);
    free(ctx);
    return st;
}

rlx_status rlx_flux2_writer_write(const char *path, const rlx_flux2_writer_opts *o, rlx_error **err)
{
    rlx_flux2_writer_opts dflt = {0};
    if (!o)
        o = &dflt;
    if (!path)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "flux2-writer: no path");
    int in_ch = o->in_channels ? o->in_channels : 128;
    if (in_ch < 1 || in_ch > 4096)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "flux2-writer: in_channels %d", in_ch);
    int hidden = o->hidden ? o->hidden : RLX_F2W_HIDDEN;
    int n_double = o->n_double ? o->n_double : 1, n_single = o->n_single ? o->n_single : 1;
    int joint = o->joint_dim ? o->joint_dim : RLX_F2W_JOINT;
    if (hidden < D_ || hidden % D_ || hidden > 16384 || n_double < 1 || n_double > 64 ||
        n_single < 1 || n_single > 128 || joint < 1 || joint > 65536)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "flux2-writer: hidden %d (a multiple of 128), %d double and %d single "
                             "blocks, joint_dim %d",
                             hidden, n_double, n_single, joint);
    model *m = calloc(1, sizeof *m);
    if (m) {
        m->cap = 16 + 14 * n_double + 4 * n_single;
        m->t = calloc((size_t)m->cap, sizeof *m->t);
    }
    if (!m || !m->t) {
        free(m);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "flux2-writer: out of memory");
    }
    m->C = hidden;
    m->M = 3 * (int64_t)hidden;
    m->J = joint;
    m->n_double = n_double;
    m->n_single = n_single;
    build(m, o->format, in_ch, o->guidance);
    const char *prefix = o->prefix ? o->prefix : "";
    rlx_dtype dt = o->dtype;
    rlx_status st;
    switch (o->format) {
    case RLX_F2W_GGUF:
        if (dt == RLX_DTYPE_INVALID)
            dt = RLX_DTYPE_Q8_0;
        st = write_gguf(path, m, dt, prefix, o->skip, err);
        break;
    case RLX_F2W_DIFFUSERS_FOLDER:
        st = write_folder(path, m, dt ? dt : RLX_DTYPE_BF16, o, err);
        break;
    default:
        if (dt == RLX_DTYPE_F8_E4M3 || dt == RLX_DTYPE_F8_E5M2) {
            st = o->format == RLX_F2W_BFL
                     ? write_st_fp8(path, m, prefix, dt, o->fp8_dequantized, err)
                     : rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "flux2-writer: FP8 files have BFL names");
            break;
        }
        st = write_st(path, m, 0, m->n, prefix, dt ? dt : RLX_DTYPE_BF16, o->skip, o->no_data, err);
        break;
    }
    free(m->t);
    free(m);
    return st;
}
