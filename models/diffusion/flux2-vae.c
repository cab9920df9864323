/* FLUX.2 VAE: the weight table (diffusers and BFL names), the file check, the
 * decoder and encoder graphs, the host packing and the runner. The weight
 * table is built from the widths once at open; the check and the graph both
 * read it, so they cannot disagree on a name or a shape. */
#include "models/diffusion/flux2-vae.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/base/dtype.h"
#include "engine/formats/safetensors.h"
#include "engine/ir/graph.h"
#include "engine/runtime/session.h"

#define LAT       RLX_FLUX2_VAE_LATENT_CHANNELS
#define PACKED    RLX_FLUX2_VAE_PACKED_CHANNELS
#define GROUPS    32
#define GN_EPS    1e-6f
#define MAX_WIDTH 2048
#define N_LEVELS  4
#define N_ENC_RES 2 /* layers_per_block */
#define N_DEC_RES 3 /* layers_per_block + 1 */
/* At most this many attention scores per query block: 64 MiB of F32 where a
 * backend spells attention as matmul + softmax + matmul. */
#define ATTN_SCORES (1 << 24)

/* ---- weight table ------------------------------------------------------- */

typedef struct {
    char dn[80];  /* diffusers name (what the graph builder asks for) */
    char fn[112]; /* the name in the file, prefix included */
    int rank;     /* the shape the graph uses */
    int64_t dims[4];
    int frank; /* the file's rank (4 for BFL's 1x1-conv attention weights) */
    rlx_dtype dt;
} wspec;

struct rlx_flux2_vae {
    rlx_flux2_vae_config cfg;
    rlx_session *s;
    rlx_safetensors *st;
    wspec *w;
    int n_w, cap_w;
    float bn_mean[PACKED], bn_std[PACKED];
    int attn_block; /* rlx_flux2_vae_params.attn_block */
    char path[512];
};

typedef struct {
    rlx_flux2_vae *v;
    bool oom;
} lister;

/* Add a tensor by its diffusers name `dn` and BFL name `bn`. */
static void add(lister *l, int rank, const int64_t *dims, bool attn_w, const char *dn,
                const char *bn)
{
    rlx_flux2_vae *v = l->v;
    if (v->n_w == v->cap_w) {
        int cap = v->cap_w ? 2 * v->cap_w : 256;
        wspec *nw = realloc(v->w, (size_t)cap * sizeof *nw);
        if (!nw) {
            l->oom = true;
            return;
        }
        v->w = nw;
        v->cap_w = cap;
    }
    wspec *w = &v->w[v->n_w++];
    memset(w, 0, sizeof *w);
    snprintf(w->dn, sizeof w->dn, "%s", dn);
    snprintf(w->fn, sizeof w->fn, "%s%s", v->cfg.prefix, v->cfg.bfl_names ? bn : dn);
    w->rank = rank;
    memcpy(w->dims, dims, (size_t)rank * sizeof dims[0]);
    w->frank = attn_w && v->cfg.bfl_names ? 4 : rank;
}

/* `dn` + ".weight" / ".bias" and the same for `bn` */
static void add_pair(lister *l, const char *dn, const char *bn, int wrank, const int64_t *wd,
                     int64_t nb, bool attn_w)
{
    char d[112], f[112];
    snprintf(d, sizeof d, "%s.weight", dn);
    snprintf(f, sizeof f, "%s.weight", bn);
    add(l, wrank, wd, attn_w, d, f);
    snprintf(d, sizeof d, "%s.bias", dn);
    snprintf(f, sizeof f, "%s.bias", bn);
    add(l, 1, (int64_t[]){nb}, false, d, f);
}

static void add_conv(lister *l, const char *dn, const char *bn, int cin, int cout, int k)
{
    add_pair(l, dn, bn, 4, (int64_t[]){cout, cin, k, k}, cout, false);
}

static void add_norm(lister *l, const char *dn, const char *bn, int c)
{
    add_pair(l, dn, bn, 1, (int64_t[]){c}, c, false);
}

/* A ResnetBlock2D under the prefixes `dn` / `bn`. */
static void add_resnet(lister *l, const char *dn, const char *bn, int cin, int cout)
{
    char d[112], f[112];
#define PART(ds, bs) (snprintf(d, sizeof d, "%s." ds, dn), snprintf(f, sizeof f, "%s." bs, bn))
    PART("norm1", "norm1");
    add_norm(l, d, f, cin);
    PART("conv1", "conv1");
    add_conv(l, d, f, cin, cout, 3);
    PART("norm2", "norm2");
    add_norm(l, d, f, cout);
    PART("conv2", "conv2");
    add_conv(l, d, f, cout, cout, 3);
    if (cin != cout) {
        PART("conv_shortcut", "nin_shortcut");
        add_conv(l, d, f, cin, cout, 1);
    }
#undef PART
}

static void add_mid(lister *l, const char *side, int c)
{
    char d[112], f[112];
    snprintf(d, sizeof d, "%s.mid_block.resnets.0", side);
    snprintf(f, sizeof f, "%s.mid.block_1", side);
    add_resnet(l, d, f, c, c);
    snprintf(d, sizeof d, "%s.mid_block.attentions.0.group_norm", side);
    snprintf(f, sizeof f, "%s.mid.attn_1.norm", side);
    add_norm(l, d, f, c);
    static const char *const dl[4] = {"to_q", "to_k", "to_v", "to_out.0"};
    static const char *const bl[4] = {"q", "k", "v", "proj_out"};
    for (int i = 0; i < 4; i++) {
        snprintf(d, sizeof d, "%s.mid_block.attentions.0.%s", side, dl[i]);
        snprintf(f, sizeof f, "%s.mid.attn_1.%s", side, bl[i]);
        add_pair(l, d, f, 2, (int64_t[]){c, c}, c, true);
    }
    snprintf(d, sizeof d, "%s.mid_block.resnets.1", side);
    snprintf(f, sizeof f, "%s.mid.block_2", side);
    add_resnet(l, d, f, c, c);
}

static rlx_status list_weights(rlx_flux2_vae *v, rlx_error **err)
{
    const int *dc = v->cfg.dec_channels, *ec = v->cfg.enc_channels;
    lister l = {.v = v};
    char d[112], f[112];
    add(&l, 1, (int64_t[]){PACKED}, false, "bn.running_mean", "bn.running_mean");
    add(&l, 1, (int64_t[]){PACKED}, false, "bn.running_var", "bn.running_var");
    /* decoder: diffusers' up_blocks.i is BFL's up.(3 - i) */
    add_conv(&l, "post_quant_conv", "decoder.post_quant_conv", LAT, LAT, 1);
    add_conv(&l, "decoder.conv_in", "decoder.conv_in", LAT, dc[3], 3);
    add_mid(&l, "decoder", dc[3]);
    for (int i = 0; i < N_LEVELS; i++) {
        int lvl = N_LEVELS - 1 - i, out = dc[lvl], in = i == 0 ? dc[3] : dc[lvl + 1];
        for (int j = 0; j < N_DEC_RES; j++) {
            snprintf(d, sizeof d, "decoder.up_blocks.%d.resnets.%d", i, j);
            snprintf(f, sizeof f, "decoder.up.%d.block.%d", lvl, j);
            add_resnet(&l, d, f, j == 0 ? in : out, out);
        }
        if (lvl > 0) {
            snprintf(d, sizeof d, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            snprintf(f, sizeof f, "decoder.up.%d.upsample.conv", lvl);
            add_conv(&l, d, f, out, out, 3);
        }
    }
    add_norm(&l, "decoder.conv_norm_out", "decoder.norm_out", dc[0]);
    add_conv(&l, "decoder.conv_out", "decoder.conv_out", dc[0], 3, 3);
    /* encoder */
    if (v->cfg.has_encoder) {
        add_conv(&l, "encoder.conv_in", "encoder.conv_in", 3, ec[0], 3);
        for (int i = 0; i < N_LEVELS; i++) {
            int in = i == 0 ? ec[0] : ec[i - 1], out = ec[i];
            for (int j = 0; j < N_ENC_RES; j++) {
                snprintf(d, sizeof d, "encoder.down_blocks.%d.resnets.%d", i, j);
                snprintf(f, sizeof f, "encoder.down.%d.block.%d", i, j);
                add_resnet(&l, d, f, j == 0 ? in : out, out);
            }
            if (i < N_LEVELS - 1) {
                snprintf(d, sizeof d, "encoder.down_blocks.%d.downsamplers.0.conv", i);
                snprintf(f, sizeof f, "encoder.down.%d.downsample.conv", i);
                add_conv(&l, d, f, out, out, 3);
            }
        }
        add_mid(&l, "encoder", ec[3]);
        add_norm(&l, "encoder.conv_norm_out", "encoder.norm_out", ec[3]);
        add_conv(&l, "encoder.conv_out", "encoder.conv_out", ec[3], 2 * LAT, 3);
        add_conv(&l, "quant_conv", "encoder.quant_conv", 2 * LAT, 2 * LAT, 1);
    }
    if (l.oom)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory listing the VAE's tensors");
    return RLX_OK;
}

static const wspec *find_spec(const rlx_flux2_vae *v, const char *dn)
{
    for (int i = 0; i < v->n_w; i++)
        if (strcmp(v->w[i].dn, dn) == 0)
            return &v->w[i];
    return NULL;
}

static void dims_str(int rank, const int64_t *d, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* ---- reading the file ----------------------------------------------------- */

static const rlx_st_tensor *findp(const rlx_safetensors *st, const char *prefix, const char *name)
{
    char full[160];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return rlx_safetensors_find(st, full);
}

/* The output width of a block's first conv, or a sentence. */
static rlx_status width_of(rlx_flux2_vae *v, const char *name, int *out, rlx_error **err)
{
    const rlx_st_tensor *t = findp(v->st, v->cfg.prefix, name);
    if (!t)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s is not a FLUX.2 VAE: it has no tensor '%s%s'",
                             v->path, v->cfg.prefix, name);
    if (t->n_dims != 4 || t->shape[0] == 0 || t->shape[0] > MAX_WIDTH || t->shape[0] % GROUPS)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is not a FLUX.2 VAE: tensor '%s%s' gives a block width of "
                             "%llu, not a multiple of %d up to %d",
                             v->path, v->cfg.prefix, name,
                             (unsigned long long)(t->n_dims ? t->shape[0] : 0), GROUPS, MAX_WIDTH);
    *out = (int)t->shape[0];
    return RLX_OK;
}

/* Naming, prefix and widths from the file. */
static rlx_status read_config(rlx_flux2_vae *v, rlx_error **err)
{
    static const char *const prefixes[] = {"", "vae.", "first_stage_model."};
    const rlx_safetensors *st = v->st;
    rlx_flux2_vae_config *c = &v->cfg;
    bool found = false;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0] && !found; i++) {
        if (findp(st, prefixes[i], "decoder.conv_in.weight")) {
            c->prefix = prefixes[i];
            found = true;
        }
    }
    if (!found)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is not a FLUX.2 VAE: it has no tensor 'decoder.conv_in.weight' "
                             "(nor one under 'vae.' or 'first_stage_model.')",
                             v->path);
    /* FLUX.1's and SD3's VAE share the layout with 16 latent channels (and
     * neither quant convs nor bn): say so rather than name a missing tensor */
    const rlx_st_tensor *ci = findp(st, c->prefix, "decoder.conv_in.weight");
    if (ci->n_dims == 4 && ci->shape[1] != LAT)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is not a FLUX.2 VAE: its decoder takes %llu latent channels, "
                             "FLUX.2's takes %d%s",
                             v->path, (unsigned long long)ci->shape[1], LAT,
                             ci->shape[1] == 16 ? " (16: a FLUX.1 or SD3 VAE)" : "");
    c->bfl_names = findp(st, c->prefix, "decoder.up.0.block.0.conv1.weight") ||
                   findp(st, c->prefix, "decoder.mid.block_1.conv1.weight");
    c->has_encoder = findp(st, c->prefix, "encoder.conv_in.weight") != NULL;
    char nm[96];
    rlx_status s = RLX_OK;
    for (int k = 0; k < N_LEVELS && s == RLX_OK; k++) {
        if (c->bfl_names)
            snprintf(nm, sizeof nm, "decoder.up.%d.block.0.conv1.weight", k);
        else
            snprintf(nm, sizeof nm, "decoder.up_blocks.%d.resnets.0.conv1.weight",
                     N_LEVELS - 1 - k);
        s = width_of(v, nm, &c->dec_channels[k], err);
        if (s == RLX_OK && c->has_encoder) {
            snprintf(nm, sizeof nm,
                     c->bfl_names ? "encoder.down.%d.block.0.conv1.weight"
                                  : "encoder.down_blocks.%d.resnets.0.conv1.weight",
                     k);
            s = width_of(v, nm, &c->enc_channels[k], err);
        }
    }
    return s;
}

/* Every tensor present with its shape and a float dtype. */
static rlx_status check_weights(rlx_flux2_vae *v, rlx_error **err)
{
    for (int i = 0; i < v->n_w; i++) {
        wspec *w = &v->w[i];
        int64_t fd[4];
        memcpy(fd, w->dims, sizeof fd);
        if (w->frank == 4 && w->rank == 2)
            fd[2] = fd[3] = 1;
        char want[64], have[64];
        dims_str(w->frank, fd, want, sizeof want);
        const rlx_st_tensor *t = rlx_safetensors_find(v->st, w->fn);
        if (!t)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s is not a FLUX.2 VAE: it has no tensor '%s' %s", v->path, w->fn,
                                 want);
        bool same = t->n_dims == (uint32_t)w->frank;
        for (int d = 0; same && d < w->frank; d++)
            same = t->shape[d] == (uint64_t)fd[d];
        if (!same) {
            int64_t hd[RLX_ST_MAX_DIMS];
            for (uint32_t d = 0; d < t->n_dims && d < RLX_ST_MAX_DIMS; d++)
                hd[d] = (int64_t)t->shape[d];
            dims_str((int)t->n_dims, hd, have, sizeof have);
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s is not a FLUX.2 VAE: tensor '%s' is %s, expected %s", v->path,
                                 w->fn, have, want);
        }
        if (t->dtype != RLX_DTYPE_F16 && t->dtype != RLX_DTYPE_BF16 && t->dtype != RLX_DTYPE_F32)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' is %s; the FLUX.2 VAE's weights must be F32, "
                                 "F16 or BF16",
                                 v->path, w->fn, rlx_dtype_name(t->dtype));
        w->dt = t->dtype;
    }
    return RLX_OK;
}

static float value_at(const void *p, rlx_dtype dt, int i)
{
    const uint8_t *b = p;
    if (dt == RLX_DTYPE_F32) {
        float f;
        memcpy(&f, b + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, b + 2 * i, 2);
    return dt == RLX_DTYPE_F16 ? rlx_f16_to_f32(h) : rlx_bf16_to_f32(h);
}

static rlx_status read_bn(rlx_flux2_vae *v, rlx_error **err)
{
    const wspec *m = find_spec(v, "bn.running_mean"), *var = find_spec(v, "bn.running_var");
    const rlx_st_tensor *tm = rlx_safetensors_find(v->st, m->fn);
    const rlx_st_tensor *tv = rlx_safetensors_find(v->st, var->fn);
    const void *pm = rlx_safetensors_data(v->st, tm), *pv = rlx_safetensors_data(v->st, tv);
    if (!pm || !pv)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: the bn statistics cannot be read", v->path);
    for (int c = 0; c < PACKED; c++) {
        float mean = value_at(pm, m->dt, c), var_c = value_at(pv, var->dt, c);
        double sd = sqrt((double)var_c + (double)RLX_FLUX2_VAE_BN_EPS);
        if (!isfinite(mean) || !isfinite(var_c) || !(var_c + RLX_FLUX2_VAE_BN_EPS > 0.0f) ||
            !isfinite(sd))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: bn statistic %d is unusable (mean %g, variance %g)", v->path,
                                 c, (double)mean, (double)var_c);
        v->bn_mean[c] = mean;
        /* the pipeline computes sqrt(var + eps) in the latents' dtype (F32) */
        v->bn_std[c] = sqrtf(var_c + RLX_FLUX2_VAE_BN_EPS);
    }
    return RLX_OK;
}

/* ---- sizes ------------------------------------------------------------ */

rlx_status rlx_flux2_vae_check_size(int h, int w, rlx_error **err)
{
    if (h < RLX_FLUX2_VAE_SCALE || w < RLX_FLUX2_VAE_SCALE)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the image is %dx%d pixels: the FLUX.2 VAE needs at least 16x16", h,
                             w);
    if (h % RLX_FLUX2_VAE_SCALE || w % RLX_FLUX2_VAE_SCALE) {
        int ch = h / 16 * 16, cw = w / 16 * 16;
        long long ph = ((long long)h + 15) / 16 * 16, pw = ((long long)w + 15) / 16 * 16;
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the image is %dx%d pixels: the FLUX.2 VAE needs both sides to be "
                             "multiples of 16 (crop it to %dx%d or pad it to %lldx%lld)",
                             h, w, ch, cw, ph, pw);
    }
    if (h > RLX_FLUX2_VAE_MAX_SIDE || w > RLX_FLUX2_VAE_MAX_SIDE ||
        (int64_t)h * w > RLX_FLUX2_VAE_MAX_PIXELS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the image is %dx%d pixels: the FLUX.2 VAE handles at most %d pixels "
                             "a side and %d megapixels",
                             h, w, RLX_FLUX2_VAE_MAX_SIDE,
                             RLX_FLUX2_VAE_MAX_PIXELS / (1024 * 1024));
    return RLX_OK;
}

/* lh, lw: packed latent cells; checked before multiplying so that a huge
 * value cannot overflow. */
static rlx_status check_packed(int lh, int lw, rlx_error **err)
{
    if (lh < 1 || lw < 1 || lh > RLX_FLUX2_VAE_MAX_SIDE / 16 || lw > RLX_FLUX2_VAE_MAX_SIDE / 16)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the packed latent is %dx%d: the FLUX.2 VAE takes 1 to %d cells a "
                             "side (16 pixels each)",
                             lh, lw, RLX_FLUX2_VAE_MAX_SIDE / 16);
    return rlx_flux2_vae_check_size(lh * 16, lw * 16, err);
}

/* ---- graph ------------------------------------------------------------ */

typedef struct {
    rlx_graph *g;
    const rlx_flux2_vae *v;
    char missing[112]; /* a name the table lacks (a bug, reported once) */
} builder;

/* A weight by diffusers name in the graph's shape: as F32 (cast on the
 * device, exact from F16 and BF16), or with `raw` in the file's dtype. */
static rlx_node weight_as(builder *b, const char *dn, bool raw)
{
    const wspec *w = find_spec(b->v, dn);
    if (!w) {
        if (!b->missing[0])
            snprintf(b->missing, sizeof b->missing, "%s", dn);
        return RLX_NODE_INVALID;
    }
    int64_t fd[4];
    memcpy(fd, w->dims, sizeof fd);
    if (w->frank == 4 && w->rank == 2)
        fd[2] = fd[3] = 1;
    rlx_node p = rlx_graph_param(b->g, w->fn, w->dt, rlx_shape_make(w->frank, fd));
    if (w->dt != RLX_DTYPE_F32 && !raw)
        p = rlx_graph_cast(b->g, NULL, p, RLX_DTYPE_F32);
    if (w->frank != w->rank)
        p = rlx_graph_reshape(b->g, NULL, p, rlx_shape_make(w->rank, w->dims));
    return p;
}

static rlx_node weight(builder *b, const char *dn)
{
    return weight_as(b, dn, false);
}

static rlx_node wfmt(builder *b, const char *pre, const char *suffix)
{
    char nm[112];
    snprintf(nm, sizeof nm, "%s.%s", pre, suffix);
    return weight(b, nm);
}

/* The kernel goes to the conv in its file dtype: the backends widen F16 /
 * BF16 kernels as they read them, where a cast would copy all of them to
 * F32 in the arena on every run. */
static rlx_node conv(builder *b, rlx_node x, const char *pre, int stride, int pad)
{
    int st[2] = {stride, stride}, pd[2] = {pad, pad}, dil[2] = {1, 1};
    char nm[112];
    snprintf(nm, sizeof nm, "%s.weight", pre);
    return rlx_graph_conv2d(b->g, pre, x, weight_as(b, nm, true), wfmt(b, pre, "bias"), st, pd, dil,
                            1);
}

static rlx_node norm(builder *b, rlx_node x, const char *pre)
{
    return rlx_graph_group_norm(b->g, pre, x, GROUPS, wfmt(b, pre, "weight"), wfmt(b, pre, "bias"),
                                GN_EPS);
}

static rlx_node resnet(builder *b, rlx_node x, const char *pre, int cin, int cout)
{
    rlx_graph *g = b->g;
    char nm[112];
    snprintf(nm, sizeof nm, "%s.norm1", pre);
    rlx_node h = rlx_graph_silu(g, NULL, norm(b, x, nm));
    snprintf(nm, sizeof nm, "%s.conv1", pre);
    h = conv(b, h, nm, 1, 1);
    snprintf(nm, sizeof nm, "%s.norm2", pre);
    h = rlx_graph_silu(g, NULL, norm(b, h, nm));
    snprintf(nm, sizeof nm, "%s.conv2", pre);
    h = conv(b, h, nm, 1, 1);
    if (cin != cout) {
        snprintf(nm, sizeof nm, "%s.conv_shortcut", pre);
        x = conv(b, x, nm, 1, 0);
    }
    return rlx_graph_add(g, NULL, x, h);
}

/* The mid block's single-head self-attention over the h x w tokens, plus its
 * input. Token-major in between: [n, c] rows for the linears, [1, 1, n, c]
 * for the attention op, queries in blocks of at most ATTN_SCORES / n. */
static rlx_node attention(builder *b, rlx_node x, const char *side, int c, int64_t h, int64_t w)
{
    rlx_graph *g = b->g;
    char pre[96], nm[112];
    snprintf(pre, sizeof pre, "%s.mid_block.attentions.0", side);
    const int64_t n = h * w;
    snprintf(nm, sizeof nm, "%s.group_norm", pre);
    rlx_node t = norm(b, x, nm);
    t = rlx_graph_reshape(g, NULL, t, rlx_shape_make(2, (int64_t[]){c, n}));
    t = rlx_graph_transpose(g, NULL, t, 0, 1); /* [n, c] */
    static const char *const which[3] = {"to_q", "to_k", "to_v"};
    rlx_node qkv[3];
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "%s.%s", pre, which[i]);
        rlx_node y = rlx_graph_linear(g, nm, t, wfmt(b, nm, "weight"), wfmt(b, nm, "bias"));
        qkv[i] = rlx_graph_reshape(g, NULL, y, rlx_shape_make(4, (int64_t[]){1, 1, n, c}));
    }
    rlx_attention_params ap = {.mask = RLX_MASK_NONE};
    int64_t blk = b->v->attn_block > 0 ? b->v->attn_block : ATTN_SCORES / n;
    blk = blk < 1 ? 1 : blk > n ? n : blk;
    int64_t nb = (n + blk - 1) / blk;
    rlx_node a;
    if (nb == 1) {
        a = rlx_graph_attention(g, NULL, qkv[0], qkv[1], qkv[2], RLX_NODE_INVALID, ap);
    } else {
        rlx_node *parts = malloc((size_t)nb * sizeof *parts);
        if (!parts) {
            snprintf(b->missing, sizeof b->missing, "(out of memory)");
            return RLX_NODE_INVALID;
        }
        for (int64_t k = 0; k < nb; k++) {
            int64_t s0 = k * blk, len = n - s0 < blk ? n - s0 : blk;
            rlx_node q = rlx_graph_slice(g, NULL, qkv[0], 2, rlx_dim_const(s0), rlx_dim_const(len));
            parts[k] = rlx_graph_attention(g, NULL, q, qkv[1], qkv[2], RLX_NODE_INVALID, ap);
        }
        /* concat takes at most RLX_MAX_INPUTS inputs: join in rounds */
        while (nb > 1) {
            int64_t m = 0;
            for (int64_t k = 0; k < nb; k += RLX_MAX_INPUTS) {
                int cnt = (int)(nb - k < RLX_MAX_INPUTS ? nb - k : RLX_MAX_INPUTS);
                parts[m++] = cnt == 1 ? parts[k] : rlx_graph_concat(g, NULL, cnt, parts + k, 2);
            }
            nb = m;
        }
        a = parts[0];
        free(parts);
    }
    a = rlx_graph_reshape(g, NULL, a, rlx_shape_make(2, (int64_t[]){n, c}));
    snprintf(nm, sizeof nm, "%s.to_out.0", pre);
    a = rlx_graph_linear(g, nm, a, wfmt(b, nm, "weight"), wfmt(b, nm, "bias"));
    a = rlx_graph_transpose(g, NULL, a, 0, 1); /* [c, n] */
    a = rlx_graph_reshape(g, NULL, a, rlx_shape_make(4, (int64_t[]){1, c, h, w}));
    return rlx_graph_add(g, NULL, x, a);
}

static rlx_node mid_block(builder *b, rlx_node x, const char *side, int c, int64_t h, int64_t w)
{
    char nm[96];
    snprintf(nm, sizeof nm, "%s.mid_block.resnets.0", side);
    x = resnet(b, x, nm, c, c);
    x = attention(b, x, side, c, h, w);
    snprintf(nm, sizeof nm, "%s.mid_block.resnets.1", side);
    return resnet(b, x, nm, c, c);
}

/* The decoder for an h x w image: "latent" [1, 32, h/8, w/8] (raw, as the
 * unpack gives it) -> "image" [1, 3, h, w] in [0, 1]. */
static rlx_node build_decoder(builder *b, int h, int w)
{
    rlx_graph *g = b->g;
    const int *dc = b->v->cfg.dec_channels;
    int64_t ch = h / 8, cw = w / 8;
    rlx_node x =
        rlx_graph_input(g, "latent", RLX_DTYPE_F32, rlx_shape_make(4, (int64_t[]){1, LAT, ch, cw}));
    x = conv(b, x, "post_quant_conv", 1, 0);
    x = conv(b, x, "decoder.conv_in", 1, 1);
    x = mid_block(b, x, "decoder", dc[3], ch, cw);
    int cur = dc[3];
    char nm[96];
    for (int i = 0; i < N_LEVELS; i++) {
        int out = dc[N_LEVELS - 1 - i];
        for (int j = 0; j < N_DEC_RES; j++) {
            snprintf(nm, sizeof nm, "decoder.up_blocks.%d.resnets.%d", i, j);
            x = resnet(b, x, nm, cur, out);
            cur = out;
        }
        if (i < N_LEVELS - 1) {
            ch *= 2;
            cw *= 2;
            x = rlx_graph_resize(g, NULL, x, ch, cw, RLX_RESIZE_NEAREST, false);
            snprintf(nm, sizeof nm, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            x = conv(b, x, nm, 1, 1);
        }
    }
    x = rlx_graph_silu(g, NULL, norm(b, x, "decoder.conv_norm_out"));
    x = conv(b, x, "decoder.conv_out", 1, 1);
    /* [-1, 1] -> [0, 1], as the pipeline's image processor */
    x = rlx_graph_scale(g, NULL, x, 0.5f, 0.5f);
    return rlx_graph_clamp(g, NULL, x, 0.0f, 1.0f);
}

/* The encoder: "image" [1, 3, h, w] in [0, 1] -> "latent" [1, 32, h/8, w/8],
 * the mean (quant_conv's first 32 channels). */
static rlx_node build_encoder(builder *b, int h, int w)
{
    rlx_graph *g = b->g;
    const int *ec = b->v->cfg.enc_channels;
    rlx_node x =
        rlx_graph_input(g, "image", RLX_DTYPE_F32, rlx_shape_make(4, (int64_t[]){1, 3, h, w}));
    x = rlx_graph_scale(g, NULL, x, 2.0f, -1.0f);
    x = conv(b, x, "encoder.conv_in", 1, 1);
    int cur = ec[0];
    int64_t ch = h, cw = w;
    char nm[96];
    for (int i = 0; i < N_LEVELS; i++) {
        for (int j = 0; j < N_ENC_RES; j++) {
            snprintf(nm, sizeof nm, "encoder.down_blocks.%d.resnets.%d", i, j);
            x = resnet(b, x, nm, cur, ec[i]);
            cur = ec[i];
        }
        if (i < N_LEVELS - 1) {
            /* one zero row and column after the image, then 3x3 stride 2 */
            const int64_t before[4] = {0, 0, 0, 0}, after[4] = {0, 0, 1, 1};
            x = rlx_graph_pad(g, NULL, x, before, after, 0.0f);
            snprintf(nm, sizeof nm, "encoder.down_blocks.%d.downsamplers.0.conv", i);
            x = conv(b, x, nm, 2, 0);
            ch /= 2;
            cw /= 2;
        }
    }
    x = mid_block(b, x, "encoder", ec[3], ch, cw);
    x = rlx_graph_silu(g, NULL, norm(b, x, "encoder.conv_norm_out"));
    x = conv(b, x, "encoder.conv_out", 1, 1);
    x = conv(b, x, "quant_conv", 1, 0);
    return rlx_graph_slice(g, NULL, x, 1, rlx_dim_const(0), rlx_dim_const(LAT));
}

static rlx_status build_graph(const rlx_flux2_vae *v, bool enc, int h, int w, rlx_graph **out,
                              rlx_error **err)
{
    *out = NULL;
    rlx_graph *g = rlx_graph_create();
    if (!g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the FLUX.2 VAE graph");
    builder b = {.g = g, .v = v};
    rlx_node y = enc ? build_encoder(&b, h, w) : build_decoder(&b, h, w);
    rlx_graph_output(g, enc ? "latent" : "image", y);
    rlx_status st = rlx_graph_take_error(g, err);
    if (st == RLX_OK && b.missing[0])
        st = rlx_error_set(err, RLX_ERR_INTERNAL, "the FLUX.2 VAE graph asks for '%s' (a bug)",
                           b.missing);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "building the FLUX.2 VAE %s: ", enc ? "encoder" : "decoder");
        rlx_graph_free(g);
        return st;
    }
    *out = g;
    return RLX_OK;
}

/* ---- host packing ----------------------------------------------------- */

rlx_status rlx_flux2_vae_unpack(const rlx_flux2_vae *v, const float *packed, int lh, int lw,
                                float *latent32)
{
    if (!v || !packed || !latent32 || lh < 1 || lw < 1)
        return RLX_ERR_INVALID_ARG;
    const size_t H = (size_t)lh, W = (size_t)lw;
    for (size_t pc = 0; pc < PACKED; pc++) {
        size_t c = pc / 4, dy = pc / 2 % 2, dx = pc % 2;
        float s = v->bn_std[pc], m = v->bn_mean[pc];
        const float *src = packed + pc * H * W;
        float *dst = latent32 + c * 4 * H * W;
        for (size_t y = 0; y < H; y++)
            for (size_t x = 0; x < W; x++)
                dst[(2 * y + dy) * 2 * W + 2 * x + dx] = src[y * W + x] * s + m;
    }
    return RLX_OK;
}

rlx_status rlx_flux2_vae_pack(const rlx_flux2_vae *v, const float *latent32, int lh, int lw,
                              float *packed)
{
    if (!v || !packed || !latent32 || lh < 1 || lw < 1)
        return RLX_ERR_INVALID_ARG;
    const size_t H = (size_t)lh, W = (size_t)lw;
    for (size_t pc = 0; pc < PACKED; pc++) {
        size_t c = pc / 4, dy = pc / 2 % 2, dx = pc % 2;
        float s = v->bn_std[pc], m = v->bn_mean[pc];
        const float *src = latent32 + c * 4 * H * W;
        float *dst = packed + pc * H * W;
        for (size_t y = 0; y < H; y++)
            for (size_t x = 0; x < W; x++)
                dst[y * W + x] = (src[(2 * y + dy) * 2 * W + 2 * x + dx] - m) / s;
    }
    return RLX_OK;
}

/* ---- runner ----------------------------------------------------------- */

rlx_flux2_vae_params rlx_flux2_vae_default_params(void)
{
    return (rlx_flux2_vae_params){
        .device = "cpu", .n_threads = 0, .memory_budget = 0, .attn_block = 0};
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

/* A diffusers root (vae/ inside), the vae/ folder, or a file. */
static rlx_status resolve(const char *path, char *out, size_t cap, rlx_error **err)
{
    if (strlen(path) + 64 > cap) /* room for "/vae/diffusion_pytorch_model..." */
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the path %.64s... is too long (%zu bytes)",
                             path, strlen(path));
    if (!is_dir(path)) {
        if (!is_file(path))
            return rlx_error_set(err, RLX_ERR_IO, "%s: no such file or folder", path);
        snprintf(out, cap, "%s", path);
        return RLX_OK;
    }
    char dir[512], cand[600];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(cand, sizeof cand, "%s/vae", path);
    if (is_dir(cand))
        snprintf(dir, sizeof dir, "%s", cand);
    static const char *const names[] = {"diffusion_pytorch_model.safetensors",
                                        "diffusion_pytorch_model.safetensors.index.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(cand, sizeof cand, "%s/%s", dir, names[i]);
        if (is_file(cand)) {
            snprintf(out, cap, "%s", cand);
            return RLX_OK;
        }
    }
    return rlx_error_set(err, RLX_ERR_IO,
                         "%s holds no FLUX.2 VAE: neither vae/ nor the folder itself has "
                         "diffusion_pytorch_model.safetensors",
                         path);
}

rlx_status rlx_flux2_vae_open(const char *path, const rlx_flux2_vae_params *p, rlx_flux2_vae **out,
                              rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_vae_open: missing argument");
    rlx_flux2_vae_params dp = rlx_flux2_vae_default_params();
    if (!p)
        p = &dp;
    rlx_flux2_vae *v = calloc(1, sizeof *v);
    if (!v)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory opening the FLUX.2 VAE");
    v->attn_block = p->attn_block;
    rlx_status st = resolve(path, v->path, sizeof v->path, err);
    if (st == RLX_OK)
        st = rlx_safetensors_open(v->path, &v->st, err);
    if (st == RLX_OK)
        st = read_config(v, err);
    if (st == RLX_OK)
        st = list_weights(v, err);
    if (st == RLX_OK)
        st = check_weights(v, err);
    if (st == RLX_OK)
        st = read_bn(v, err);
    if (st == RLX_OK) {
        rlx_session_params sp = rlx_session_default_params();
        sp.device = p->device ? p->device : "cpu";
        sp.n_threads = p->n_threads;
        sp.memory_budget = p->memory_budget;
        st = rlx_session_create(&sp, &v->s, err);
    }
    if (st == RLX_OK)
        st = rlx_session_add_safetensors(v->s, v->st, err);
    if (st != RLX_OK) {
        rlx_flux2_vae_free(v);
        return st;
    }
    *out = v;
    return RLX_OK;
}

void rlx_flux2_vae_free(rlx_flux2_vae *v)
{
    if (!v)
        return;
    /* the session borrows the mapped weights: it goes first */
    rlx_session_free(v->s);
    rlx_safetensors_close(v->st);
    free(v->w);
    free(v);
}

const rlx_flux2_vae_config *rlx_flux2_vae_get_config(const rlx_flux2_vae *v)
{
    return v ? &v->cfg : NULL;
}

rlx_session *rlx_flux2_vae_session(rlx_flux2_vae *v)
{
    return v ? v->s : NULL;
}

/* The cached program for an h x w image (compiled on first use). */
static rlx_status program(rlx_flux2_vae *v, bool enc, int h, int w, rlx_session_program **out,
                          rlx_error **err)
{
    const char *part = enc ? "encoder" : "decoder";
    rlx_graph *g = NULL;
    rlx_status st = build_graph(v, enc, h, w, &g, err);
    if (st != RLX_OK)
        return st;
    rlx_session_program *prog = NULL;
    st = rlx_session_compile(v->s, g, &prog, err);
    rlx_graph_free(g);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "FLUX.2 VAE %s for %dx%d: ", part, h, w);
        return st;
    }
    const rlx_lir *lir = rlx_session_program_lir(prog);
    int ii = rlx_session_program_input(prog, enc ? "image" : "latent");
    int oi = rlx_session_program_output(prog, enc ? "latent" : "image");
    if (!lir || lir->n_inputs != 1 || lir->n_outputs != 1 || ii != 0 || oi != 0)
        return rlx_error_set(err, RLX_ERR_INTERNAL,
                             "FLUX.2 VAE %s: the compiled program has unexpected bindings", part);
    *out = prog;
    return RLX_OK;
}

static rlx_status run(rlx_flux2_vae *v, bool enc, int h, int w, const float *in, float *out,
                      rlx_error **err)
{
    rlx_session_program *prog = NULL;
    rlx_status st = program(v, enc, h, w, &prog, err);
    if (st != RLX_OK)
        return st;
    const void *ins[1] = {in};
    void *outs[1] = {out};
    rlx_sym_values sv = {{0}};
    st = rlx_session_run(v->s, prog, &sv, ins, outs, err);
    if (st != RLX_OK)
        rlx_error_prefix(err, "FLUX.2 VAE %s: ", enc ? "encoder" : "decoder");
    return st;
}

rlx_status rlx_flux2_vae_prepare(rlx_flux2_vae *v, bool encoder, int h, int w, rlx_error **err)
{
    if (!v)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_vae_prepare: missing argument");
    if (encoder && !v->cfg.has_encoder)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "%s holds only the FLUX.2 VAE's decoder: it cannot encode an image",
                             v->path);
    rlx_status st = rlx_flux2_vae_check_size(h, w, err);
    if (st != RLX_OK)
        return st;
    rlx_session_program *prog = NULL;
    return program(v, encoder, h, w, &prog, err);
}

rlx_status rlx_flux2_vae_decode(rlx_flux2_vae *v, const float *packed, int lh, int lw, float *rgb,
                                rlx_error **err)
{
    if (!v || !packed || !rgb)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_vae_decode: missing argument");
    rlx_status st = check_packed(lh, lw, err);
    if (st != RLX_OK)
        return st;
    float *lat = malloc(sizeof(float) * LAT * 4 * (size_t)lh * (size_t)lw);
    if (!lat)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory decoding with the FLUX.2 VAE");
    rlx_flux2_vae_unpack(v, packed, lh, lw, lat);
    st = run(v, false, lh * 16, lw * 16, lat, rgb, err);
    free(lat);
    return st;
}

rlx_status rlx_flux2_vae_encode(rlx_flux2_vae *v, const float *rgb, int h, int w, float *packed,
                                rlx_error **err)
{
    if (!v || !rgb || !packed)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_vae_encode: missing argument");
    if (!v->cfg.has_encoder)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "%s holds only the FLUX.2 VAE's decoder: it cannot encode an image",
                             v->path);
    rlx_status st = rlx_flux2_vae_check_size(h, w, err);
    if (st != RLX_OK)
        return st;
    float *lat = malloc(sizeof(float) * LAT * (size_t)(h / 8) * (size_t)(w / 8));
    if (!lat)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory encoding with the FLUX.2 VAE");
    st = run(v, true, h, w, rgb, lat, err);
    if (st == RLX_OK)
        rlx_flux2_vae_pack(v, lat, h / 16, w / 16, packed);
    free(lat);
    return st;
}
