/* The FLUX.2 transformer runner: finding the files, telling the variant from
 * the tensors, the host-side inputs (token rows, timestep sinusoid, RoPE
 * tables) and one cached program per shape. The graph is in
 * flux2-dit-graph.c. */
#include "models/diffusion/flux2-dit.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/formats/gguf.h"
#include "engine/formats/safetensors.h"
#include "engine/runtime/session.h"
#include "models/diffusion/flux2-dit-internal.h"

/* ---- names -------------------------------------------------------------- */

/* global roles: no %d; block roles: one %d */
static const char *const diffusers_names[F2_ROLE_COUNT] = {
    [F2_IMG_IN] = "x_embedder.weight",
    [F2_TXT_IN] = "context_embedder.weight",
    [F2_TIME_1] = "time_guidance_embed.timestep_embedder.linear_1.weight",
    [F2_TIME_2] = "time_guidance_embed.timestep_embedder.linear_2.weight",
    [F2_GUID_1] = "time_guidance_embed.guidance_embedder.linear_1.weight",
    [F2_GUID_2] = "time_guidance_embed.guidance_embedder.linear_2.weight",
    [F2_MOD_IMG] = "double_stream_modulation_img.linear.weight",
    [F2_MOD_TXT] = "double_stream_modulation_txt.linear.weight",
    [F2_MOD_SINGLE] = "single_stream_modulation.linear.weight",
    [F2_FINAL_MOD] = "norm_out.linear.weight",
    [F2_FINAL] = "proj_out.weight",
    [F2_D_IMG_Q] = "transformer_blocks.%d.attn.to_q.weight",
    [F2_D_IMG_K] = "transformer_blocks.%d.attn.to_k.weight",
    [F2_D_IMG_V] = "transformer_blocks.%d.attn.to_v.weight",
    [F2_D_TXT_Q] = "transformer_blocks.%d.attn.add_q_proj.weight",
    [F2_D_TXT_K] = "transformer_blocks.%d.attn.add_k_proj.weight",
    [F2_D_TXT_V] = "transformer_blocks.%d.attn.add_v_proj.weight",
    [F2_D_IMG_OUT] = "transformer_blocks.%d.attn.to_out.0.weight",
    [F2_D_TXT_OUT] = "transformer_blocks.%d.attn.to_add_out.weight",
    [F2_D_IMG_NQ] = "transformer_blocks.%d.attn.norm_q.weight",
    [F2_D_IMG_NK] = "transformer_blocks.%d.attn.norm_k.weight",
    [F2_D_TXT_NQ] = "transformer_blocks.%d.attn.norm_added_q.weight",
    [F2_D_TXT_NK] = "transformer_blocks.%d.attn.norm_added_k.weight",
    [F2_D_IMG_MLP_IN] = "transformer_blocks.%d.ff.linear_in.weight",
    [F2_D_IMG_MLP_OUT] = "transformer_blocks.%d.ff.linear_out.weight",
    [F2_D_TXT_MLP_IN] = "transformer_blocks.%d.ff_context.linear_in.weight",
    [F2_D_TXT_MLP_OUT] = "transformer_blocks.%d.ff_context.linear_out.weight",
    [F2_S_IN] = "single_transformer_blocks.%d.attn.to_qkv_mlp_proj.weight",
    [F2_S_OUT] = "single_transformer_blocks.%d.attn.to_out.weight",
    [F2_S_NQ] = "single_transformer_blocks.%d.attn.norm_q.weight",
    [F2_S_NK] = "single_transformer_blocks.%d.attn.norm_k.weight",
};

static const char *const bfl_names[F2_ROLE_COUNT] = {
    [F2_IMG_IN] = "img_in.weight",
    [F2_TXT_IN] = "txt_in.weight",
    [F2_TIME_1] = "time_in.in_layer.weight",
    [F2_TIME_2] = "time_in.out_layer.weight",
    [F2_GUID_1] = "guidance_in.in_layer.weight",
    [F2_GUID_2] = "guidance_in.out_layer.weight",
    [F2_MOD_IMG] = "double_stream_modulation_img.lin.weight",
    [F2_MOD_TXT] = "double_stream_modulation_txt.lin.weight",
    [F2_MOD_SINGLE] = "single_stream_modulation.lin.weight",
    [F2_FINAL_MOD] = "final_layer.adaLN_modulation.1.weight",
    [F2_FINAL] = "final_layer.linear.weight",
    [F2_D_IMG_QKV] = "double_blocks.%d.img_attn.qkv.weight",
    [F2_D_TXT_QKV] = "double_blocks.%d.txt_attn.qkv.weight",
    [F2_D_IMG_OUT] = "double_blocks.%d.img_attn.proj.weight",
    [F2_D_TXT_OUT] = "double_blocks.%d.txt_attn.proj.weight",
    [F2_D_IMG_NQ] = "double_blocks.%d.img_attn.norm.query_norm.scale",
    [F2_D_IMG_NK] = "double_blocks.%d.img_attn.norm.key_norm.scale",
    [F2_D_TXT_NQ] = "double_blocks.%d.txt_attn.norm.query_norm.scale",
    [F2_D_TXT_NK] = "double_blocks.%d.txt_attn.norm.key_norm.scale",
    [F2_D_IMG_MLP_IN] = "double_blocks.%d.img_mlp.0.weight",
    [F2_D_IMG_MLP_OUT] = "double_blocks.%d.img_mlp.2.weight",
    [F2_D_TXT_MLP_IN] = "double_blocks.%d.txt_mlp.0.weight",
    [F2_D_TXT_MLP_OUT] = "double_blocks.%d.txt_mlp.2.weight",
    [F2_S_IN] = "single_blocks.%d.linear1.weight",
    [F2_S_OUT] = "single_blocks.%d.linear2.weight",
    [F2_S_NQ] = "single_blocks.%d.norm.query_norm.scale",
    [F2_S_NK] = "single_blocks.%d.norm.key_norm.scale",
};

void f2_role_name(rlx_flux2_names names, f2_role role, int blk, char *buf, size_t cap)
{
    const char *f = (names == RLX_FLUX2_NAMES_BFL ? bfl_names : diffusers_names)[role];
    if (!f) {
        snprintf(buf, cap, "(none)");
        return;
    }
    if (strchr(f, '%'))
        snprintf(buf, cap, f, blk);
    else
        snprintf(buf, cap, "%s", f);
}

/* The per-tensor scale beside an FP8 matrix `full` ("….weight"): one
 * float (F32, F16 or BF16, of any shape holding one value). */
static void find_scale(const rlx_flux2_dit *d, const char *full, f2_tensor *out)
{
    out->scale = 1.0f;
    size_t n = strlen(full);
    if (!d->st || n < 7 || strcmp(full + n - 7, ".weight"))
        return;
    char nm[240];
    const rlx_st_tensor *s = NULL;
    snprintf(nm, sizeof nm, "%s_scale", full);
    s = rlx_safetensors_find(d->st, nm);
    if (!s) {
        snprintf(nm, sizeof nm, "%.*s.scale_weight", (int)(n - 7), full);
        s = rlx_safetensors_find(d->st, nm);
    }
    if (!s)
        return;
    uint64_t count = 1;
    for (uint32_t i = 0; i < s->n_dims; i++)
        count *= s->shape[i];
    const uint8_t *p = rlx_safetensors_data(d->st, s);
    float v = NAN;
    if (count == 1 && p && s->dtype == RLX_DTYPE_F32)
        memcpy(&v, p, sizeof v);
    else if (count == 1 && p && (s->dtype == RLX_DTYPE_F16 || s->dtype == RLX_DTYPE_BF16)) {
        uint16_t h;
        memcpy(&h, p, sizeof h);
        v = s->dtype == RLX_DTYPE_F16 ? rlx_f16_to_f32(h) : rlx_bf16_to_f32(h);
    }
    bool is_f =
        s->dtype == RLX_DTYPE_F32 || s->dtype == RLX_DTYPE_F16 || s->dtype == RLX_DTYPE_BF16;
    if (count != 1)
        snprintf(out->scale_bad, sizeof out->scale_bad,
                 "'%s' holds %llu values (one scale per tensor is read)", nm,
                 (unsigned long long)count);
    else if (!is_f)
        snprintf(out->scale_bad, sizeof out->scale_bad, "'%s' is %s, not a float", nm,
                 rlx_dtype_name(s->dtype));
    else if (!isfinite(v) || v == 0.0f)
        snprintf(out->scale_bad, sizeof out->scale_bad, "'%s' is not a finite, nonzero number", nm);
    else
        out->scale = v;
}

static bool find_full(const rlx_flux2_dit *d, const char *full, f2_tensor *out)
{
    memset(out, 0, sizeof *out);
    out->scale = 1.0f;
    if (d->st) {
        const rlx_st_tensor *t = rlx_safetensors_find(d->st, full);
        if (!t)
            return false;
        find_scale(d, full, out);
        if (t->n_dims < 1 || t->n_dims > 2) {
            out->rank = -1; /* found, but of a rank no role has */
            return true;
        }
        out->dtype = t->dtype;
        out->rank = (int)t->n_dims;
        for (uint32_t i = 0; i < t->n_dims; i++)
            out->dims[i] = (int64_t)t->shape[i];
        out->bytes = t->n_bytes;
        return true;
    }
    if (d->gg) {
        const rlx_gguf_tensor *t = rlx_gguf_find_tensor(d->gg, full);
        if (!t)
            return false;
        if (t->n_dims < 1 || t->n_dims > 2) {
            out->rank = -1;
            return true;
        }
        out->dtype = t->dtype;
        out->rank = (int)t->n_dims;
        /* ggml ne {K, N} is the row-major [N, K] */
        for (uint32_t i = 0; i < t->n_dims; i++)
            out->dims[t->n_dims - 1 - i] = (int64_t)t->ne[i];
        out->bytes = t->n_bytes;
        return true;
    }
    return false;
}

bool f2_find(const rlx_flux2_dit *d, f2_role role, int blk, f2_tensor *out)
{
    char nm[160], full[200];
    f2_role_name(d->cfg.names, role, blk, nm, sizeof nm);
    snprintf(full, sizeof full, "%s%s", d->prefix, nm);
    return find_full(d, full, out);
}

/* ---- opening -------------------------------------------------------------- */

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

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static bool gguf_magic(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char m[4] = {0};
    size_t n = fread(m, 1, 4, f);
    fclose(f);
    return n == 4 && !memcmp(m, "GGUF", 4);
}

/* Which naming and prefix the file uses; false when neither embedder is there. */
static bool detect_names(rlx_flux2_dit *d)
{
    static const char *const prefixes[] = {"", "model.diffusion_model.", "diffusion_model.",
                                           "transformer.", "model."};
    f2_tensor t;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        snprintf(d->prefix, sizeof d->prefix, "%s", prefixes[i]);
        d->cfg.names = RLX_FLUX2_NAMES_DIFFUSERS;
        if (f2_find(d, F2_IMG_IN, 0, &t))
            return true;
        d->cfg.names = RLX_FLUX2_NAMES_BFL;
        if (f2_find(d, F2_IMG_IN, 0, &t))
            return true;
    }
    d->prefix[0] = 0;
    return false;
}

static bool has_name(const rlx_flux2_dit *d, const char *nm)
{
    char full[200];
    f2_tensor t;
    snprintf(full, sizeof full, "%s%s", d->prefix, nm);
    return find_full(d, full, &t);
}

/* ComfyUI's quantized checkpoints name each quantized matrix's format in a
 * "<base>.comfy_quant" tensor (U8, a JSON object with "format"): true with
 * the format when there is one. `nm` is the matrix's name ("….weight"). */
static bool comfy_format(const rlx_flux2_dit *d, const char *nm, char *fmt, size_t cap)
{
    size_t n = strlen(nm);
    if (!d->st || n < 7 || strcmp(nm + n - 7, ".weight"))
        return false;
    char q[240];
    snprintf(q, sizeof q, "%s%.*s.comfy_quant", d->prefix, (int)(n - 7), nm);
    const rlx_st_tensor *t = rlx_safetensors_find(d->st, q);
    if (!t)
        return false;
    snprintf(fmt, cap, "unknown");
    const char *p = rlx_safetensors_data(d->st, t);
    if (!p || t->n_bytes == 0 || t->n_bytes > 4096)
        return true;
    char *txt = malloc(t->n_bytes + 1);
    if (!txt)
        return true;
    memcpy(txt, p, t->n_bytes);
    txt[t->n_bytes] = 0;
    json_object *o = json_tokener_parse(txt);
    json_object *f = NULL;
    if (o && json_object_object_get_ex(o, "format", &f) && json_object_is_type(f, json_type_string))
        snprintf(fmt, cap, "%s", json_object_get_string(f));
    json_object_put(o);
    free(txt);
    return true;
}

static rlx_status check_tensor(rlx_flux2_dit *d, f2_role role, int blk, int64_t rows, int64_t cols,
                               rlx_error **err)
{
    char nm[160];
    f2_tensor t;
    f2_role_name(d->cfg.names, role, blk, nm, sizeof nm);
    if (!f2_find(d, role, blk, &t))
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the tensor '%s%s' is missing, so this is not a complete FLUX.2 "
                             "transformer",
                             d->path, d->prefix, nm);
    /* before the shape: a packed format (nvfp4: two values a byte) has
     * another one */
    char fmt[64];
    if (comfy_format(d, nm, fmt, sizeof fmt) && strcmp(fmt, "float8_e4m3fn") &&
        strcmp(fmt, "float8_e5m2"))
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: the tensor '%s%s' is stored in ComfyUI's '%s' format, which the "
                             "FLUX.2 runner cannot read (it reads ComfyUI's FP8 formats, "
                             "float8_e4m3fn and float8_e5m2)",
                             d->path, d->prefix, nm, fmt);
    int rank = rows > 0 ? 2 : 1;
    if (t.rank != rank || (rank == 2 && (t.dims[0] != rows || t.dims[1] != cols)) ||
        (rank == 1 && t.dims[0] != cols))
        return rlx_error_set(
            err, RLX_ERR_FORMAT,
            "%s: the tensor '%s%s' has shape [%lld, %lld], expected [%lld, %lld] for a FLUX.2 "
            "transformer of hidden size %d",
            d->path, d->prefix, nm, (long long)t.dims[0], (long long)(t.rank > 1 ? t.dims[1] : 0),
            (long long)(rank == 2 ? rows : cols), (long long)(rank == 2 ? cols : 0), d->cfg.hidden);
    const rlx_dtype_info *di = rlx_dtype_get(t.dtype);
    bool ok = t.dtype == RLX_DTYPE_F32 || t.dtype == RLX_DTYPE_F16 || t.dtype == RLX_DTYPE_BF16 ||
              t.dtype == RLX_DTYPE_F8_E4M3 || t.dtype == RLX_DTYPE_F8_E5M2 ||
              (rank == 2 && di->quantized && cols % (int64_t)di->block_size == 0);
    if (!ok)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: the tensor '%s%s' is stored as %s, which the FLUX.2 runner "
                             "cannot read (F32, F16, BF16, FP8 or a GGUF block format)",
                             d->path, d->prefix, nm, rlx_dtype_name(t.dtype));
    if (t.scale_bad[0])
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: the scale of the tensor '%s%s' cannot be read: %s", d->path,
                             d->prefix, nm, t.scale_bad);
    d->cfg.weight_bytes += t.bytes;
    return RLX_OK;
}

static rlx_status check_all(rlx_flux2_dit *d, rlx_error **err)
{
    const rlx_flux2_dit_config *c = &d->cfg;
    int64_t C = c->hidden, M = c->mlp_hidden, D = c->head_dim;
    bool bfl = c->names == RLX_FLUX2_NAMES_BFL;
    struct {
        f2_role r;
        int64_t rows, cols;
    } glob[] = {
        {F2_IMG_IN, C, c->in_channels},
        {F2_TXT_IN, C, c->joint_dim},
        {F2_TIME_1, C, c->timestep_channels},
        {F2_TIME_2, C, C},
        {F2_GUID_1, C, c->timestep_channels},
        {F2_GUID_2, C, C},
        {F2_MOD_IMG, 6 * C, C},
        {F2_MOD_TXT, 6 * C, C},
        {F2_MOD_SINGLE, 3 * C, C},
        {F2_FINAL_MOD, 2 * C, C},
        {F2_FINAL, c->in_channels, C},
    };
    rlx_status st = RLX_OK;
    for (size_t i = 0; i < sizeof glob / sizeof *glob && st == RLX_OK; i++) {
        if ((glob[i].r == F2_GUID_1 || glob[i].r == F2_GUID_2) && !c->guidance_embeds)
            continue;
        st = check_tensor(d, glob[i].r, 0, glob[i].rows, glob[i].cols, err);
    }
    for (int b = 0; b < c->n_double && st == RLX_OK; b++) {
        struct {
            f2_role r;
            int64_t rows, cols;
        } dl[] = {
            {bfl ? F2_D_IMG_QKV : F2_D_IMG_Q, bfl ? 3 * C : C, C},
            {bfl ? F2_D_TXT_QKV : F2_D_TXT_Q, bfl ? 3 * C : C, C},
            {bfl ? F2_D_IMG_QKV : F2_D_IMG_K, bfl ? 3 * C : C, C},
            {bfl ? F2_D_TXT_QKV : F2_D_TXT_K, bfl ? 3 * C : C, C},
            {bfl ? F2_D_IMG_QKV : F2_D_IMG_V, bfl ? 3 * C : C, C},
            {bfl ? F2_D_TXT_QKV : F2_D_TXT_V, bfl ? 3 * C : C, C},
            {F2_D_IMG_OUT, C, C},
            {F2_D_TXT_OUT, C, C},
            {F2_D_IMG_NQ, 0, D},
            {F2_D_IMG_NK, 0, D},
            {F2_D_TXT_NQ, 0, D},
            {F2_D_TXT_NK, 0, D},
            {F2_D_IMG_MLP_IN, 2 * M, C},
            {F2_D_IMG_MLP_OUT, C, M},
            {F2_D_TXT_MLP_IN, 2 * M, C},
            {F2_D_TXT_MLP_OUT, C, M},
        };
        /* BFL's fused qkv is listed three times: count its bytes once */
        for (size_t i = 0; i < sizeof dl / sizeof *dl && st == RLX_OK; i++) {
            if (bfl && i >= 2 && i < 6)
                continue;
            st = check_tensor(d, dl[i].r, b, dl[i].rows, dl[i].cols, err);
        }
    }
    for (int b = 0; b < c->n_single && st == RLX_OK; b++) {
        st = check_tensor(d, F2_S_IN, b, 3 * C + 2 * M, C, err);
        if (st == RLX_OK)
            st = check_tensor(d, F2_S_OUT, b, C, C + M, err);
        if (st == RLX_OK)
            st = check_tensor(d, F2_S_NQ, b, 0, D, err);
        if (st == RLX_OK)
            st = check_tensor(d, F2_S_NK, b, 0, D, err);
    }
    return st;
}

static int count_blocks(const rlx_flux2_dit *d, f2_role role)
{
    f2_tensor t;
    int n = 0;
    while (n < 1000 && f2_find(d, role, n, &t))
        n++;
    return n;
}

/* The shapes decide the variant. */
static rlx_status detect_config(rlx_flux2_dit *d, rlx_error **err)
{
    rlx_flux2_dit_config *c = &d->cfg;
    bool found = detect_names(d);
    if (has_name(d, "double_blocks.0.img_mod.lin.weight") ||
        has_name(d, "transformer_blocks.0.norm1.linear.weight"))
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is a FLUX.1 transformer (per-block modulation), not FLUX.2",
                             d->path);
    if (!found) {
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is not a FLUX.2 transformer: it has neither 'x_embedder.weight' "
                             "(diffusers) nor 'img_in.weight' (BFL)",
                             d->path);
    }
    f2_tensor xe, te, nq;
    f2_find(d, F2_IMG_IN, 0, &xe);
    bool have_te = f2_find(d, F2_TXT_IN, 0, &te);
    bool have_nq = f2_find(d, F2_D_IMG_NQ, 0, &nq);
    f2_tensor mo;
    if (xe.rank != 2 || !have_te || te.rank != 2 || !have_nq || nq.rank != 1 ||
        !f2_find(d, F2_MOD_IMG, 0, &mo))
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is not a FLUX.2 transformer of a known layout: it lacks the text "
                             "embedder, the first block's query norm or the shared modulation",
                             d->path);
    c->hidden = (int)xe.dims[0];
    c->in_channels = (int)xe.dims[1];
    c->joint_dim = (int)te.dims[1];
    c->head_dim = (int)nq.dims[0];
    if (c->in_channels != RLX_FLUX2_IN_CHANNELS || c->head_dim != RLX_FLUX2_HEAD_DIM ||
        c->hidden <= 0 || c->hidden % c->head_dim || c->hidden > 65536 || c->joint_dim <= 0 ||
        c->joint_dim > 1 << 20)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is an unknown FLUX.2 variant: %d input channels (expected 128), "
                             "head size %d (expected 128), hidden size %d",
                             d->path, c->in_channels, c->head_dim, c->hidden);
    c->heads = c->hidden / c->head_dim;
    /* mlp_ratio 3 in every published config; taken from the first MLP so that
     * another ratio is read rather than refused */
    f2_tensor mi;
    c->mlp_hidden = f2_find(d, F2_D_IMG_MLP_IN, 0, &mi) && mi.rank == 2 && mi.dims[0] % 2 == 0 &&
                            mi.dims[0] / 2 > 0 && mi.dims[0] / 2 <= 16 * (int64_t)c->hidden
                        ? (int)(mi.dims[0] / 2)
                        : 3 * c->hidden;
    c->timestep_channels = 256;
    c->n_double = count_blocks(d, c->names == RLX_FLUX2_NAMES_BFL ? F2_D_IMG_QKV : F2_D_IMG_Q);
    c->n_single = count_blocks(d, F2_S_IN);
    f2_tensor gt;
    c->guidance_embeds = f2_find(d, F2_GUID_1, 0, &gt);
    c->distilled = -1;
    for (int i = 0; i < 4; i++)
        c->axes_dims_rope[i] = 32;
    c->rope_theta = 2000.0f;
    c->eps = 1e-6f;
    if (c->n_double < 1 || c->n_single < 1)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is an unknown FLUX.2 variant: %d double-stream and %d "
                             "single-stream blocks",
                             d->path, c->n_double, c->n_single);
    const char *name = "custom";
    if (c->hidden == 3072 && c->n_double == 5 && c->n_single == 20 && c->joint_dim == 7680)
        name = "klein-4b";
    else if (c->hidden == 4096 && c->n_double == 8 && c->n_single == 24 && c->joint_dim == 12288)
        name = "klein-9b";
    else if (c->hidden == 6144 && c->n_double == 8 && c->n_single == 48)
        name = "dev";
    snprintf(c->name, sizeof c->name, "%s", name);
    rlx_status st = check_all(d, err);
    if (st != RLX_OK)
        return st;
    /* the big matrices' dtype: the first single block's (an FP8 file keeps
     * its embedders in BF16) */
    f2_tensor s0;
    c->weight_dtype = f2_find(d, F2_S_IN, 0, &s0) ? s0.dtype : xe.dtype;
    return RLX_OK;
}

static json_object *jget(json_object *o, const char *k)
{
    json_object *v = NULL;
    return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

/* config.json beside the weights: must agree with the tensors. Beside a
 * single file, only a transformer config counts (a download folder may hold
 * any model's config.json). */
static rlx_status check_config_json(rlx_flux2_dit *d, const char *path, bool from_folder,
                                    rlx_error **err)
{
    json_object *o = json_object_from_file(path);
    if (!o)
        return from_folder ? rlx_error_set(err, RLX_ERR_FORMAT, "%s is not valid JSON", path)
                           : RLX_OK;
    json_object *cls = jget(o, "_class_name");
    if (!from_folder && !(cls && json_object_is_type(cls, json_type_string) &&
                          !strncmp(json_object_get_string(cls), "Flux2", 5))) {
        json_object_put(o);
        return RLX_OK;
    }
    rlx_flux2_dit_config *c = &d->cfg;
    struct {
        const char *key;
        int have;
    } ints[] = {
        {"num_layers", c->n_double},           {"num_single_layers", c->n_single},
        {"num_attention_heads", c->heads},     {"attention_head_dim", c->head_dim},
        {"joint_attention_dim", c->joint_dim}, {"in_channels", c->in_channels},
    };
    rlx_status st = RLX_OK;
    for (size_t i = 0; i < sizeof ints / sizeof *ints && st == RLX_OK; i++) {
        json_object *v = jget(o, ints[i].key);
        if (v && json_object_is_type(v, json_type_int) &&
            json_object_get_int64(v) != (int64_t)ints[i].have)
            st =
                rlx_error_set(err, RLX_ERR_FORMAT,
                              "%s says %s is %lld, but the weights have %d: the config and the "
                              "weights belong to different models",
                              path, ints[i].key, (long long)json_object_get_int64(v), ints[i].have);
    }
    json_object *g = jget(o, "guidance_embeds");
    if (st == RLX_OK && g && json_object_is_type(g, json_type_boolean) &&
        json_object_get_boolean(g) != c->guidance_embeds)
        st = rlx_error_set(err, RLX_ERR_FORMAT,
                           "%s says guidance_embeds is %s, but the weights %s a guidance embedder",
                           path, c->guidance_embeds ? "false" : "true",
                           c->guidance_embeds ? "have" : "lack");
    json_object *th = jget(o, "rope_theta");
    if (st == RLX_OK && th &&
        (json_object_is_type(th, json_type_int) || json_object_is_type(th, json_type_double))) {
        double t = json_object_get_double(th);
        if (t > 1.0 && t < 1e9)
            c->rope_theta = (float)t;
    }
    json_object *ax = jget(o, "axes_dims_rope");
    if (st == RLX_OK && ax && json_object_is_type(ax, json_type_array)) {
        bool ok = json_object_array_length(ax) == 4;
        int sum = 0;
        for (size_t i = 0; ok && i < 4; i++) {
            json_object *e = json_object_array_get_idx(ax, i);
            ok = e && json_object_is_type(e, json_type_int) && json_object_get_int(e) > 0 &&
                 json_object_get_int(e) % 2 == 0 && json_object_get_int(e) <= c->head_dim;
            if (ok)
                sum += json_object_get_int(e);
        }
        if (!ok || sum != c->head_dim)
            st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                               "%s: axes_dims_rope must be four even sizes adding up to the head "
                               "size %d",
                               path, c->head_dim);
        for (size_t i = 0; ok && st == RLX_OK && i < 4; i++)
            c->axes_dims_rope[i] = json_object_get_int(json_object_array_get_idx(ax, i));
    }
    json_object_put(o);
    return st;
}

static void read_model_index(rlx_flux2_dit *d, const char *path)
{
    json_object *o = json_object_from_file(path);
    json_object *v = jget(o, "is_distilled");
    if (v && json_object_is_type(v, json_type_boolean))
        d->cfg.distilled = json_object_get_boolean(v) ? 1 : 0;
    if (o)
        json_object_put(o);
}

rlx_flux2_dit_params rlx_flux2_dit_default_params(void)
{
    return (rlx_flux2_dit_params){.device = "cpu", .n_threads = 0, .memory_budget = 0};
}

static rlx_status open_weights(rlx_flux2_dit *d, const char *path, char *dir, size_t dcap,
                               char *model_index, size_t mcap, rlx_error **err)
{
    char buf[1200];
    dir[0] = 0;
    model_index[0] = 0;
    if (is_dir(path)) {
        char tdir[1100];
        snprintf(buf, sizeof buf, "%s/transformer", path);
        if (is_dir(buf)) {
            snprintf(tdir, sizeof tdir, "%s", buf);
            snprintf(model_index, mcap, "%s/model_index.json", path);
        } else {
            snprintf(tdir, sizeof tdir, "%s", path);
            snprintf(model_index, mcap, "%s/../model_index.json", path);
        }
        snprintf(dir, dcap, "%s", tdir);
        static const char *const files[] = {"diffusion_pytorch_model.safetensors.index.json",
                                            "diffusion_pytorch_model.safetensors",
                                            "model.safetensors.index.json", "model.safetensors"};
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
            snprintf(buf, sizeof buf, "%s/%s", tdir, files[i]);
            if (is_file(buf))
                return rlx_safetensors_open(buf, &d->st, err);
        }
        return rlx_error_set(err, RLX_ERR_IO,
                             "%s holds no transformer weights (no transformer/ folder and no "
                             "diffusion_pytorch_model.safetensors or its index)",
                             path);
    }
    if (!is_file(path))
        return rlx_error_set(err, RLX_ERR_IO, "%s: no such file or folder", path);
    if (ends_with(path, ".gguf") || gguf_magic(path))
        return rlx_gguf_open(path, &d->gg, err);
    rlx_status st = rlx_safetensors_open(path, &d->st, err);
    if (st == RLX_OK) {
        /* a single file inside a diffusers transformer/ folder still has its config */
        const char *slash = strrchr(path, '/');
        int n = slash ? (int)(slash - path) : 1;
        snprintf(dir, dcap, "%.*s", n, slash ? path : ".");
    }
    return st;
}

rlx_status rlx_flux2_dit_open(const char *path, const rlx_flux2_dit_params *p, rlx_flux2_dit **out,
                              rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_dit_open: missing argument");
    rlx_flux2_dit_params dp = rlx_flux2_dit_default_params();
    if (!p)
        p = &dp;
    rlx_flux2_dit *d = calloc(1, sizeof *d);
    if (!d)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory opening the FLUX.2 model");
    snprintf(d->path, sizeof d->path, "%s", path);
    char dir[1100], model_index[1200], cfgp[1200];
    rlx_status st = open_weights(d, path, dir, sizeof dir, model_index, sizeof model_index, err);
    if (st == RLX_OK)
        st = detect_config(d, err);
    if (st == RLX_OK && dir[0]) {
        snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
        if (is_file(cfgp))
            st = check_config_json(d, cfgp, is_dir(path), err);
    }
    if (st == RLX_OK && model_index[0] && is_file(model_index))
        read_model_index(d, model_index);
    if (st == RLX_OK) {
        rlx_session_params sp = rlx_session_default_params();
        sp.device = p->device ? p->device : "cpu";
        sp.n_threads = p->n_threads;
        sp.memory_budget = p->memory_budget;
        st = rlx_session_create(&sp, &d->s, err);
    }
    if (st == RLX_OK)
        st = d->st ? rlx_session_add_safetensors(d->s, d->st, err)
                   : rlx_session_add_gguf(d->s, d->gg, err);
    if (st == RLX_OK && p->n_loras)
        st = f2_lora_load(d, p->loras, p->n_loras, err);
    if (st != RLX_OK) {
        rlx_flux2_dit_free(d);
        return st;
    }
    *out = d;
    return RLX_OK;
}

void rlx_flux2_dit_free(rlx_flux2_dit *d)
{
    if (!d)
        return;
    /* the session borrows the mapped weights: it goes first */
    rlx_session_free(d->s);
    f2_lora_close(d);
    rlx_safetensors_close(d->st);
    rlx_gguf_close(d->gg);
    free(d);
}

const rlx_flux2_dit_config *rlx_flux2_dit_get_config(const rlx_flux2_dit *d)
{
    return d ? &d->cfg : NULL;
}

rlx_session *rlx_flux2_dit_session(rlx_flux2_dit *d)
{
    return d ? d->s : NULL;
}

void rlx_flux2_dit_cancel(rlx_flux2_dit *d, bool cancel)
{
    if (d && d->s)
        rlx_session_cancel(d->s, cancel);
}

/* ---- running -------------------------------------------------------------- */

/* diffusers' Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=0) of
 * 1000 * v: [cos, sin] with frequencies exp(-ln(10000) j / 128). In double:
 * 1000 * guidance reaches thousands of radians, where one float32 ulp of a
 * frequency or of the product moves the angle by 2e-4 (diffusers' float32
 * has that noise; the double result is the value it approximates). */
static void timestep_proj(float v, int ch, float *out)
{
    int half = ch / 2;
    double t = (double)v * 1000.0;
    for (int j = 0; j < half; j++) {
        double f = exp(-log(10000.0) * (double)j / (double)half);
        out[j] = (float)cos(t * f);
        out[half + j] = (float)sin(t * f);
    }
}

/* cos / signed sin for one token at 4-axis position pos (see the graph's rope) */
static void rope_row(const rlx_flux2_dit_config *c, const int pos[4], float *cs, float *sn)
{
    int o = 0;
    for (int a = 0; a < 4; a++) {
        int dim = c->axes_dims_rope[a];
        for (int i = 0; i < dim / 2; i++) {
            double f = pow((double)c->rope_theta, -(double)(2 * i) / (double)dim);
            double ang = (double)pos[a] * f;
            float cv = (float)cos(ang), sv = (float)sin(ang);
            cs[o + 2 * i] = cv;
            cs[o + 2 * i + 1] = cv;
            sn[o + 2 * i] = -sv;
            sn[o + 2 * i + 1] = sv;
        }
        o += dim;
    }
}

static rlx_status check_input(const rlx_flux2_dit *d, const rlx_flux2_dit_input *in, int64_t *n_all,
                              rlx_error **err)
{
    if (!in->latents || !in->text)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_flux2_dit_velocity: no latents or no text embedding given");
    if (in->lh < 1 || in->lw < 1 || in->lh > RLX_FLUX2_DIT_MAX_SIDE ||
        in->lw > RLX_FLUX2_DIT_MAX_SIDE)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the latent grid %d x %d is out of range (1 to %d tokens a side)",
                             in->lh, in->lw, RLX_FLUX2_DIT_MAX_SIDE);
    if (in->n_text < 1 || in->n_text > RLX_FLUX2_MAX_TEXT)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the text embedding has %d tokens; 1 to %d are accepted", in->n_text,
                             RLX_FLUX2_MAX_TEXT);
    if (in->n_refs < 0 || in->n_refs > RLX_FLUX2_DIT_MAX_REFS ||
        (in->n_refs > 0 && (!in->ref_latents || !in->ref_lh || !in->ref_lw)))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "%d reference images: 0 to %d are accepted, each with its latents "
                             "and size",
                             in->n_refs, RLX_FLUX2_DIT_MAX_REFS);
    if (!(in->t >= 0.0f && in->t <= 1.0f))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the timestep %g is not a sigma in [0, 1]",
                             (double)in->t);
    int64_t n = (int64_t)in->lh * in->lw;
    for (int r = 0; r < in->n_refs; r++) {
        if (!in->ref_latents[r] || in->ref_lh[r] < 1 || in->ref_lw[r] < 1 ||
            in->ref_lh[r] > RLX_FLUX2_DIT_MAX_SIDE || in->ref_lw[r] > RLX_FLUX2_DIT_MAX_SIDE)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "reference image %d has no latents or a grid out of range", r);
        n += (int64_t)in->ref_lh[r] * in->ref_lw[r];
    }
    if (n > RLX_FLUX2_MAX_IMAGE_TOKENS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "%lld image tokens (target and references) exceed the limit of %d",
                             (long long)n, RLX_FLUX2_MAX_IMAGE_TOKENS);
    (void)d;
    *n_all = n;
    return RLX_OK;
}

static rlx_status get_program(rlx_flux2_dit *d, int n_txt, int n_img, int n_all,
                              rlx_session_program **out, rlx_error **err)
{
    for (int i = 0; i < 4; i++)
        if (d->cache[i].prog && d->cache[i].n_txt == n_txt && d->cache[i].n_img == n_img &&
            d->cache[i].n_all == n_all) {
            *out = d->cache[i].prog;
            return RLX_OK;
        }
    rlx_graph *g = NULL;
    rlx_status st = f2_build_graph(d, n_txt, n_img, n_all, &g, err);
    if (st != RLX_OK)
        return st;
    rlx_session_program *prog = NULL;
    st = rlx_session_compile(d->s, g, &prog, err);
    rlx_graph_free(g);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "FLUX.2 transformer for %d text and %d image tokens: ", n_txt, n_all);
        return st;
    }
    int k = d->cache_next;
    d->cache_next = (k + 1) % 4;
    if (d->cache[k].prog)
        rlx_session_unload(d->s, d->cache[k].prog);
    d->cache[k].n_txt = n_txt;
    d->cache[k].n_img = n_img;
    d->cache[k].n_all = n_all;
    d->cache[k].prog = prog;
    *out = prog;
    return RLX_OK;
}

/* CHW [128][h][w] -> token rows [h*w][128] */
static void to_rows(const float *chw, int h, int w, float *rows)
{
    int64_t n = (int64_t)h * w;
    for (int ch = 0; ch < RLX_FLUX2_IN_CHANNELS; ch++)
        for (int64_t i = 0; i < n; i++)
            rows[i * RLX_FLUX2_IN_CHANNELS + ch] = chw[(int64_t)ch * n + i];
}

rlx_status rlx_flux2_dit_velocity(rlx_flux2_dit *d, const rlx_flux2_dit_input *in, float *velocity,
                                  rlx_error **err)
{
    if (!d || !in || !velocity)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_dit_velocity: missing argument");
    const rlx_flux2_dit_config *c = &d->cfg;
    int64_t n_all = 0;
    rlx_status st = check_input(d, in, &n_all, err);
    if (st != RLX_OK)
        return st;
    int n_txt = in->n_text, n_img = in->lh * in->lw;
    int64_t s = n_txt + n_all;
    int D = c->head_dim;
    float *img = malloc(sizeof(float) * (size_t)n_all * RLX_FLUX2_IN_CHANNELS);
    float *cs = malloc(sizeof(float) * (size_t)s * D);
    float *sn = malloc(sizeof(float) * (size_t)s * D);
    float *vrows = malloc(sizeof(float) * (size_t)n_img * RLX_FLUX2_IN_CHANNELS);
    float *tproj = malloc(sizeof(float) * (size_t)c->timestep_channels * 2);
    if (!img || !cs || !sn || !vrows || !tproj) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the FLUX.2 inputs");
        goto done;
    }
    /* rows and positions: text (0, 0, 0, l), image (0, y, x, 0), ref r (10 + 10 r, y, x, 0) */
    for (int l = 0; l < n_txt; l++)
        rope_row(c, (const int[4]){0, 0, 0, l}, cs + (size_t)l * D, sn + (size_t)l * D);
    int64_t row = 0;
    for (int r = -1; r < in->n_refs; r++) {
        int h = r < 0 ? in->lh : in->ref_lh[r], w = r < 0 ? in->lw : in->ref_lw[r];
        const float *lat = r < 0 ? in->latents : in->ref_latents[r];
        to_rows(lat, h, w, img + row * RLX_FLUX2_IN_CHANNELS);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++, row++) {
                size_t o = (size_t)(n_txt + row) * D;
                rope_row(c, (const int[4]){r < 0 ? 0 : 10 + 10 * r, y, x, 0}, cs + o, sn + o);
            }
    }
    timestep_proj(in->t, c->timestep_channels, tproj);
    timestep_proj(in->guidance, c->timestep_channels, tproj + c->timestep_channels);

    rlx_session_program *prog = NULL;
    st = get_program(d, n_txt, n_img, (int)n_all, &prog, err);
    if (st != RLX_OK)
        goto done;
    static const char *const names[] = {"img", "txt", "tproj", "rope_cos", "rope_sin", "gproj"};
    const void *data[] = {img, in->text, tproj, cs, sn, tproj + c->timestep_channels};
    int n_in = c->guidance_embeds ? 6 : 5;
    const void *ins[6] = {0};
    const rlx_lir *lir = rlx_session_program_lir(prog);
    if (!lir || (int)lir->n_inputs != n_in || lir->n_outputs != 1) {
        st = rlx_error_set(err, RLX_ERR_INTERNAL,
                           "FLUX.2 transformer: the compiled program has unexpected bindings");
        goto done;
    }
    for (int i = 0; i < n_in; i++) {
        int k = rlx_session_program_input(prog, names[i]);
        if (k < 0 || k >= n_in) {
            st = rlx_error_set(err, RLX_ERR_INTERNAL,
                               "FLUX.2 transformer: the program lacks the input '%s'", names[i]);
            goto done;
        }
        ins[k] = data[i];
    }
    void *outs[1] = {vrows};
    rlx_sym_values sv = {{0}};
    st = rlx_session_run(d->s, prog, &sv, ins, outs, err);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "FLUX.2 transformer: ");
        goto done;
    }
    for (int i = 0; i < n_img; i++)
        for (int ch = 0; ch < RLX_FLUX2_IN_CHANNELS; ch++)
            velocity[(size_t)ch * n_img + i] = vrows[(size_t)i * RLX_FLUX2_IN_CHANNELS + ch];
done:
    free(img);
    free(cs);
    free(sn);
    free(vrows);
    free(tproj);
    return st;
}
