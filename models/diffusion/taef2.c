/* TAEF2 encoder/decoder: architecture table, weight-name resolver, graph
 * builders and the runner. The layer table below is the one description of
 * the network; the weight check, the session's weight list and the graph
 * are all derived from it, so they cannot disagree. */
#include "models/diffusion/taef2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/base/dtype.h"
#include "engine/formats/safetensors.h"
#include "engine/ir/graph.h"
#include "engine/runtime/session.h"

/* Layer kinds, named after what the checkpoint's nn.Sequential holds at that
 * index. */
typedef enum {
    L_CONV,       /* conv3x3 with bias: <i>.weight, <i>.bias */
    L_CONV_NB,    /* conv3x3 without bias (the down/up-sampling convs), stride s */
    L_BLOCK,      /* conv-relu-conv-relu-conv + identity, relu */
    L_BLOCK_POOL, /* the same, after adding the pool branch to its input */
    L_RELU,
    L_UP,        /* nearest 2x */
    L_SOFTCLAMP, /* tanh(x / 3) * 3 */
    L_CLAMP01,
} layer_kind;

typedef struct {
    int idx;
    layer_kind kind;
    int c_in, c_out, stride;
} layer;

#define CH          64 /* working channels on both sides */
#define POOL_GROUPS 4
#define GN_EPS      1e-5f

static const layer enc_layers[] = {
    {0, L_CONV, RLX_TAEF2_IMAGE_CHANNELS, CH, 1},
    {1, L_BLOCK, CH, CH, 1},
    {2, L_CONV_NB, CH, CH, 2},
    {3, L_BLOCK, CH, CH, 1},
    {4, L_BLOCK, CH, CH, 1},
    {5, L_BLOCK, CH, CH, 1},
    {6, L_CONV_NB, CH, CH, 2},
    {7, L_BLOCK, CH, CH, 1},
    {8, L_BLOCK, CH, CH, 1},
    {9, L_BLOCK, CH, CH, 1},
    {10, L_CONV_NB, CH, CH, 2},
    {11, L_BLOCK_POOL, CH, CH, 1},
    {12, L_BLOCK_POOL, CH, CH, 1},
    {13, L_BLOCK_POOL, CH, CH, 1},
    {14, L_CONV, CH, RLX_TAEF2_LATENT_CHANNELS, 1},
};

static const layer dec_layers[] = {
    {0, L_SOFTCLAMP, 0, 0, 1},    {1, L_CONV, RLX_TAEF2_LATENT_CHANNELS, CH, 1},
    {2, L_RELU, 0, 0, 1},         {3, L_BLOCK_POOL, CH, CH, 1},
    {4, L_BLOCK_POOL, CH, CH, 1}, {5, L_BLOCK_POOL, CH, CH, 1},
    {6, L_UP, 0, 0, 1},           {7, L_CONV_NB, CH, CH, 1},
    {8, L_BLOCK, CH, CH, 1},      {9, L_BLOCK, CH, CH, 1},
    {10, L_BLOCK, CH, CH, 1},     {11, L_UP, 0, 0, 1},
    {12, L_CONV_NB, CH, CH, 1},   {13, L_BLOCK, CH, CH, 1},
    {14, L_BLOCK, CH, CH, 1},     {15, L_BLOCK, CH, CH, 1},
    {16, L_UP, 0, 0, 1},          {17, L_CONV_NB, CH, CH, 1},
    {18, L_BLOCK, CH, CH, 1},     {19, L_CONV, CH, RLX_TAEF2_IMAGE_CHANNELS, 1},
    {20, L_CLAMP01, 0, 0, 1},
};

static const layer *part_layers(rlx_taef2_part part, int *n)
{
    if (part == RLX_TAEF2_ENCODER) {
        *n = (int)(sizeof enc_layers / sizeof enc_layers[0]);
        return enc_layers;
    }
    *n = (int)(sizeof dec_layers / sizeof dec_layers[0]);
    return dec_layers;
}

static const char *part_name(rlx_taef2_part part)
{
    return part == RLX_TAEF2_ENCODER ? "encoder" : "decoder";
}

/* ---- weight list ---------------------------------------------------------- */

typedef struct {
    char name[32];
    int rank;
    int64_t dims[4];
} wspec;

#define MAX_WEIGHTS 96

static void push(wspec *ws, int *n, int rank, const int64_t *dims, const char *fmt, int idx,
                 const char *sub)
{
    if (*n >= MAX_WEIGHTS)
        return;
    wspec *w = &ws[(*n)++];
    snprintf(w->name, sizeof w->name, fmt, idx, sub);
    w->rank = rank;
    memcpy(w->dims, dims, (size_t)rank * sizeof dims[0]);
}

static void push_conv(wspec *ws, int *n, int idx, const char *sub, int cin, int cout, int k,
                      bool bias)
{
    int64_t wd[4] = {cout, cin, k, k}, bd[1] = {cout};
    push(ws, n, 4, wd, "%d.%sweight", idx, sub);
    if (bias)
        push(ws, n, 1, bd, "%d.%sbias", idx, sub);
}

/* Every tensor of `part`, in the file's order. */
static int list_weights(rlx_taef2_part part, wspec *ws)
{
    int nl, n = 0;
    const layer *ls = part_layers(part, &nl);
    for (int i = 0; i < nl; i++) {
        const layer *l = &ls[i];
        switch (l->kind) {
        case L_CONV:
            push_conv(ws, &n, l->idx, "", l->c_in, l->c_out, 3, true);
            break;
        case L_CONV_NB:
            push_conv(ws, &n, l->idx, "", l->c_in, l->c_out, 3, false);
            break;
        case L_BLOCK:
        case L_BLOCK_POOL:
            push_conv(ws, &n, l->idx, "conv.0.", l->c_in, l->c_out, 3, true);
            push_conv(ws, &n, l->idx, "conv.2.", l->c_out, l->c_out, 3, true);
            push_conv(ws, &n, l->idx, "conv.4.", l->c_out, l->c_out, 3, true);
            if (l->kind == L_BLOCK_POOL) {
                int64_t gd[1] = {4 * l->c_in};
                push_conv(ws, &n, l->idx, "pool.0.", l->c_in, 4 * l->c_in, 1, false);
                push(ws, &n, 1, gd, "%d.%sweight", l->idx, "pool.1.");
                push(ws, &n, 1, gd, "%d.%sbias", l->idx, "pool.1.");
                push_conv(ws, &n, l->idx, "pool.3.", 4 * l->c_in, l->c_in, 1, false);
            }
            break;
        default:
            break;
        }
    }
    return n;
}

static void dims_str(int rank, const int64_t *d, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

rlx_status rlx_taef2_check_weights(const rlx_safetensors *st, rlx_taef2_part part, const char *what,
                                   rlx_dtype *dtype, rlx_error **err)
{
    if (dtype)
        *dtype = RLX_DTYPE_INVALID;
    if (!st || (part != RLX_TAEF2_ENCODER && part != RLX_TAEF2_DECODER))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_taef2_check_weights: bad argument");
    if (!what)
        what = "the weight file";
    const char *pn = part_name(part);

    /* The two files share most names; each has a first/last conv the other
     * lacks, which tells a swapped file apart from a damaged one. */
    bool enc_like = rlx_safetensors_find(st, "0.weight") && rlx_safetensors_find(st, "14.weight");
    bool dec_like = rlx_safetensors_find(st, "19.weight") && !rlx_safetensors_find(st, "0.weight");
    if (part == RLX_TAEF2_DECODER && enc_like && !dec_like)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is a TAEF2 encoder, but it was given as the decoder", what);
    if (part == RLX_TAEF2_ENCODER && dec_like && !enc_like)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is a TAEF2 decoder, but it was given as the encoder", what);

    wspec ws[MAX_WEIGHTS];
    int n = list_weights(part, ws);
    rlx_dtype dt = RLX_DTYPE_INVALID;
    for (int i = 0; i < n; i++) {
        const rlx_st_tensor *t = rlx_safetensors_find(st, ws[i].name);
        char want[64], have[64];
        dims_str(ws[i].rank, ws[i].dims, want, sizeof want);
        if (!t)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s is not a TAEF2 %s: it has no tensor '%s' %s", what, pn,
                                 ws[i].name, want);
        bool same = t->n_dims == (uint32_t)ws[i].rank;
        for (int d = 0; same && d < ws[i].rank; d++)
            same = t->shape[d] == (uint64_t)ws[i].dims[d];
        if (!same) {
            int64_t hd[RLX_ST_MAX_DIMS];
            for (uint32_t d = 0; d < t->n_dims && d < RLX_ST_MAX_DIMS; d++)
                hd[d] = (int64_t)t->shape[d];
            dims_str((int)t->n_dims, hd, have, sizeof have);
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s is not a TAEF2 %s: tensor '%s' is %s, expected %s", what, pn,
                                 ws[i].name, have, want);
        }
        if (t->dtype != RLX_DTYPE_F16 && t->dtype != RLX_DTYPE_BF16 && t->dtype != RLX_DTYPE_F32)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' is %s; TAEF2 weights must be F16, BF16 or F32",
                                 what, ws[i].name, rlx_dtype_name(t->dtype));
        if (i == 0)
            dt = t->dtype;
        else if (t->dtype != dt)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' is %s but '%s' is %s; mixed dtypes are not "
                                 "supported",
                                 what, ws[i].name, rlx_dtype_name(t->dtype), ws[0].name,
                                 rlx_dtype_name(dt));
    }
    if (dtype)
        *dtype = dt;
    return RLX_OK;
}

/* ---- sizes ------------------------------------------------------------ */

/* `unit` is 1 for an image (pixels) and 8 for a latent (one latent cell per
 * 8x8 pixels). Sizes are int64 so that the products cannot overflow. */
static rlx_status check_size(const char *what, int64_t h, int64_t w, int64_t unit, rlx_error **err)
{
    if (h <= 0 || w <= 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the %s is %lldx%lld: TAEF2 needs %s", what,
                             (long long)h, (long long)w,
                             unit == 1 ? "an image of at least 8x8 pixels"
                                       : "a latent of at least 1x1");
    if (unit == 1 && (h % RLX_TAEF2_SCALE || w % RLX_TAEF2_SCALE)) {
        long long ch = (long long)(h / 8 * 8), cw = (long long)(w / 8 * 8);
        long long ph = (long long)((h + 7) / 8 * 8), pw = (long long)((w + 7) / 8 * 8);
        char crop[64] = "";
        if (ch > 0 && cw > 0)
            snprintf(crop, sizeof crop, "crop it to %lldx%lld or ", ch, cw);
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the image is %lldx%lld pixels: TAEF2 needs both sides to be "
                             "multiples of 8 (%spad it to %lldx%lld)",
                             (long long)h, (long long)w, crop, ph, pw);
    }
    int64_t ih = h * unit, iw = w * unit;
    if (ih > RLX_TAEF2_MAX_SIDE || iw > RLX_TAEF2_MAX_SIDE || ih * iw > RLX_TAEF2_MAX_PIXELS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the %s is %lldx%lld%s: TAEF2 handles images of at most %d pixels a "
                             "side and %d megapixels",
                             what, (long long)h, (long long)w,
                             unit == 1 ? " pixels" : " (an image 8 times larger)",
                             RLX_TAEF2_MAX_SIDE, RLX_TAEF2_MAX_PIXELS / (1024 * 1024));
    return RLX_OK;
}

rlx_status rlx_taef2_check_size(int h, int w, rlx_error **err)
{
    return check_size("image", h, w, 1, err);
}

/* ---- graph ------------------------------------------------------------ */

typedef struct {
    rlx_graph *g;
    const char *prefix;
    const char *side; /* "enc" / "dec", for node names */
    rlx_dtype wdt;
} builder;

/* A weight as an F32 value: the param in its file dtype, cast on the device
 * (F16 and BF16 convert to F32 exactly). */
static rlx_node weight(builder *b, const char *name, int rank, const int64_t *dims)
{
    char full[160];
    snprintf(full, sizeof full, "%s%s", b->prefix, name);
    rlx_node p = rlx_graph_param(b->g, full, b->wdt, rlx_shape_make(rank, dims));
    if (b->wdt == RLX_DTYPE_F32)
        return p;
    return rlx_graph_cast(b->g, NULL, p, RLX_DTYPE_F32);
}

/* `base` is the tensor name stem ("3.conv.0." or "0."). */
static rlx_node conv(builder *b, rlx_node x, const char *base, int cin, int cout, int k, int stride,
                     bool bias)
{
    char nm[64], node[80];
    int64_t wd[4] = {cout, cin, k, k}, bd[1] = {cout};
    snprintf(nm, sizeof nm, "%sweight", base);
    rlx_node w = weight(b, nm, 4, wd);
    rlx_node bn = RLX_NODE_INVALID;
    if (bias) {
        snprintf(nm, sizeof nm, "%sbias", base);
        bn = weight(b, nm, 1, bd);
    }
    int st[2] = {stride, stride}, pad[2] = {k / 2, k / 2}, dil[2] = {1, 1};
    snprintf(node, sizeof node, "%s.%sconv", b->side, base);
    return rlx_graph_conv2d(b->g, node, x, w, bn, st, pad, dil, 1);
}

static rlx_node block(builder *b, rlx_node x, const layer *l)
{
    char base[32];
    rlx_graph *g = b->g;
    if (l->kind == L_BLOCK_POOL) {
        int64_t gd[1] = {4 * l->c_in};
        snprintf(base, sizeof base, "%d.pool.0.", l->idx);
        rlx_node y = conv(b, x, base, l->c_in, 4 * l->c_in, 1, 1, false);
        char gw[32], gb[32];
        snprintf(gw, sizeof gw, "%d.pool.1.weight", l->idx);
        snprintf(gb, sizeof gb, "%d.pool.1.bias", l->idx);
        y = rlx_graph_group_norm(g, NULL, y, POOL_GROUPS, weight(b, gw, 1, gd),
                                 weight(b, gb, 1, gd), GN_EPS);
        y = rlx_graph_relu(g, NULL, y);
        snprintf(base, sizeof base, "%d.pool.3.", l->idx);
        y = conv(b, y, base, 4 * l->c_in, l->c_in, 1, 1, false);
        x = rlx_graph_add(g, NULL, x, y);
    }
    snprintf(base, sizeof base, "%d.conv.0.", l->idx);
    rlx_node h = rlx_graph_relu(g, NULL, conv(b, x, base, l->c_in, l->c_out, 3, 1, true));
    snprintf(base, sizeof base, "%d.conv.2.", l->idx);
    h = rlx_graph_relu(g, NULL, conv(b, h, base, l->c_out, l->c_out, 3, 1, true));
    snprintf(base, sizeof base, "%d.conv.4.", l->idx);
    h = conv(b, h, base, l->c_out, l->c_out, 3, 1, true);
    /* every block keeps its channel count, so the skip is the identity */
    return rlx_graph_relu(g, NULL, rlx_graph_add(g, NULL, h, x));
}

static rlx_status build_graph(rlx_taef2_part part, int h, int w, const char *prefix,
                              rlx_dtype wdtype, rlx_graph **out, rlx_error **err)
{
    *out = NULL;
    if (part != RLX_TAEF2_ENCODER && part != RLX_TAEF2_DECODER)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_taef2_build_graph: unknown part %d",
                             (int)part);
    if (wdtype != RLX_DTYPE_F16 && wdtype != RLX_DTYPE_BF16 && wdtype != RLX_DTYPE_F32)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_taef2_build_graph: weights must be F16, BF16 or F32, not %s",
                             rlx_dtype_name(wdtype));
    rlx_status st = rlx_taef2_check_size(h, w, err);
    if (st != RLX_OK)
        return st;
    rlx_graph *g = rlx_graph_create();
    if (!g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the TAEF2 graph");
    bool enc = part == RLX_TAEF2_ENCODER;
    builder b = {
        .g = g, .prefix = prefix ? prefix : "", .side = enc ? "enc" : "dec", .wdt = wdtype};
    int64_t cur_h = enc ? h : h / RLX_TAEF2_SCALE, cur_w = enc ? w : w / RLX_TAEF2_SCALE;
    int64_t in_dims[4] = {1, enc ? RLX_TAEF2_IMAGE_CHANNELS : RLX_TAEF2_LATENT_CHANNELS, cur_h,
                          cur_w};
    rlx_node x =
        rlx_graph_input(g, enc ? "image" : "latent", RLX_DTYPE_F32, rlx_shape_make(4, in_dims));
    int nl;
    const layer *ls = part_layers(part, &nl);
    for (int i = 0; i < nl; i++) {
        const layer *l = &ls[i];
        char base[16];
        snprintf(base, sizeof base, "%d.", l->idx);
        switch (l->kind) {
        case L_CONV:
        case L_CONV_NB:
            x = conv(&b, x, base, l->c_in, l->c_out, 3, l->stride, l->kind == L_CONV);
            break;
        case L_BLOCK:
        case L_BLOCK_POOL:
            x = block(&b, x, l);
            break;
        case L_RELU:
            x = rlx_graph_relu(g, NULL, x);
            break;
        case L_UP:
            cur_h *= 2;
            cur_w *= 2;
            x = rlx_graph_resize(g, NULL, x, cur_h, cur_w, RLX_RESIZE_NEAREST, false);
            break;
        case L_SOFTCLAMP:
            x = rlx_graph_scale(g, NULL, x, 1.0f / 3.0f, 0.0f);
            x = rlx_graph_tanh(g, NULL, x);
            x = rlx_graph_scale(g, NULL, x, 3.0f, 0.0f);
            break;
        case L_CLAMP01:
            x = rlx_graph_clamp(g, NULL, x, 0.0f, 1.0f);
            break;
        }
    }
    rlx_graph_output(g, enc ? "latent" : "image", x);
    st = rlx_graph_take_error(g, err);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "building the TAEF2 %s: ", part_name(part));
        rlx_graph_free(g);
        return st;
    }
    *out = g;
    return RLX_OK;
}

rlx_graph *rlx_taef2_build_graph(rlx_taef2_part part, int h, int w, const char *prefix,
                                 rlx_dtype wdtype, rlx_error **err)
{
    rlx_graph *g = NULL;
    build_graph(part, h, w, prefix, wdtype, &g, err);
    return g;
}

/* ---- runner ----------------------------------------------------------- */

struct rlx_taef2 {
    rlx_session *s;
    rlx_safetensors *st[2]; /* indexed by rlx_taef2_part */
    rlx_dtype wdt[2];
};

static const char *const prefixes[2] = {"taef2.encoder.", "taef2.decoder."};

rlx_taef2_params rlx_taef2_default_params(void)
{
    return (rlx_taef2_params){.device = "cpu", .n_threads = 0, .memory_budget = 0};
}

static rlx_status open_part(rlx_taef2 *t, rlx_taef2_part part, const char *path, rlx_error **err)
{
    rlx_status st = rlx_safetensors_open(path, &t->st[part], err);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "TAEF2 %s: ", part_name(part));
        return st;
    }
    st = rlx_taef2_check_weights(t->st[part], part, path, &t->wdt[part], err);
    if (st != RLX_OK)
        return st;
    /* the encoder and decoder files use the same tensor names */
    return rlx_session_add_safetensors_prefixed(t->s, t->st[part], prefixes[part], err);
}

rlx_status rlx_taef2_create(const rlx_taef2_params *p, const char *encoder_path,
                            const char *decoder_path, rlx_taef2 **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_taef2_create: no output given");
    if (!encoder_path && !decoder_path)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_taef2_create: give an encoder file, a decoder file or both");
    rlx_taef2_params dp = rlx_taef2_default_params();
    if (!p)
        p = &dp;
    rlx_taef2 *t = calloc(1, sizeof *t);
    if (!t)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating the TAEF2 runner");
    rlx_session_params sp = rlx_session_default_params();
    sp.device = p->device ? p->device : "cpu";
    sp.n_threads = p->n_threads;
    sp.memory_budget = p->memory_budget;
    rlx_status st = rlx_session_create(&sp, &t->s, err);
    if (st == RLX_OK && encoder_path)
        st = open_part(t, RLX_TAEF2_ENCODER, encoder_path, err);
    if (st == RLX_OK && decoder_path)
        st = open_part(t, RLX_TAEF2_DECODER, decoder_path, err);
    if (st != RLX_OK) {
        rlx_taef2_free(t);
        return st;
    }
    *out = t;
    return RLX_OK;
}

void rlx_taef2_free(rlx_taef2 *t)
{
    if (!t)
        return;
    /* the session borrows the mapped weights: it goes first */
    rlx_session_free(t->s);
    for (int i = 0; i < 2; i++)
        rlx_safetensors_close(t->st[i]);
    free(t);
}

bool rlx_taef2_has_encoder(const rlx_taef2 *t)
{
    return t && t->st[RLX_TAEF2_ENCODER];
}

bool rlx_taef2_has_decoder(const rlx_taef2 *t)
{
    return t && t->st[RLX_TAEF2_DECODER];
}

rlx_session *rlx_taef2_session(rlx_taef2 *t)
{
    return t ? t->s : NULL;
}

/* h, w: image pixels. */
static rlx_status run_part(rlx_taef2 *t, rlx_taef2_part part, int h, int w, const float *in,
                           float *out, rlx_error **err)
{
    if (!t->st[part])
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "this TAEF2 runner was created without %s file",
                             part == RLX_TAEF2_ENCODER ? "an encoder" : "a decoder");
    rlx_graph *g = NULL;
    rlx_status st = build_graph(part, h, w, prefixes[part], t->wdt[part], &g, err);
    if (st != RLX_OK)
        return st;
    rlx_session_program *prog = NULL;
    st = rlx_session_compile(t->s, g, &prog, err);
    rlx_graph_free(g);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "TAEF2 %s for %dx%d: ", part_name(part), h, w);
        return st;
    }
    const rlx_lir *lir = rlx_session_program_lir(prog);
    int ii = rlx_session_program_input(prog, part == RLX_TAEF2_ENCODER ? "image" : "latent");
    int oi = rlx_session_program_output(prog, part == RLX_TAEF2_ENCODER ? "latent" : "image");
    if (!lir || lir->n_inputs != 1 || lir->n_outputs != 1 || ii != 0 || oi != 0)
        return rlx_error_set(err, RLX_ERR_INTERNAL,
                             "TAEF2 %s: the compiled program has unexpected bindings",
                             part_name(part));
    const void *ins[1] = {in};
    void *outs[1] = {out};
    rlx_sym_values sv = {{0}};
    st = rlx_session_run(t->s, prog, &sv, ins, outs, err);
    if (st != RLX_OK)
        rlx_error_prefix(err, "TAEF2 %s: ", part_name(part));
    return st;
}

rlx_status rlx_taef2_encode(rlx_taef2 *t, const float *rgb_chw, int h, int w, float *latent_out,
                            rlx_error **err)
{
    if (!t || !rgb_chw || !latent_out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_taef2_encode: missing argument");
    rlx_status st = rlx_taef2_check_size(h, w, err);
    if (st != RLX_OK)
        return st;
    return run_part(t, RLX_TAEF2_ENCODER, h, w, rgb_chw, latent_out, err);
}

rlx_status rlx_taef2_decode(rlx_taef2 *t, const float *latent, int lh, int lw, float *rgb_out,
                            rlx_error **err)
{
    if (!t || !latent || !rgb_out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_taef2_decode: missing argument");
    rlx_status st = check_size("latent", lh, lw, RLX_TAEF2_SCALE, err);
    if (st != RLX_OK)
        return st;
    return run_part(t, RLX_TAEF2_DECODER, lh * RLX_TAEF2_SCALE, lw * RLX_TAEF2_SCALE, latent,
                    rgb_out, err);
}
