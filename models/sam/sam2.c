/* SAM 2 / 2.1 in image mode: the Hiera variants of the published configs, the variant
 * read from a checkpoint's shapes, and the tensors the image path uses, by their
 * official state-dict names (sam2.1_hiera_*.pt holds {"model": state_dict}; the
 * video-memory tensors it also holds are not asked for). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/sam/sam-internal.h"

#define E RLX_SAM_EMBED_DIM

/* configs/sam2.1/sam2.1_hiera_{t,s,b+,l}.yaml with Hiera's defaults (hieradet.py):
 * q_pool 3, q_stride 2, dim_mul and head_mul 2, window_spec (8, 4, 14, 7). */
static const struct {
    const char *name;
    int embed, heads, stages[4], global[3], bkg, window[4];
} variants[] = {
    {"sam2.1_hiera_tiny", 96, 1, {1, 2, 7, 2}, {5, 7, 9}, 7, {8, 4, 14, 7}},
    {"sam2.1_hiera_small", 96, 1, {1, 2, 11, 2}, {7, 10, 13}, 7, {8, 4, 14, 7}},
    {"sam2.1_hiera_base_plus", 112, 2, {2, 3, 16, 3}, {12, 16, 20}, 14, {8, 4, 14, 7}},
    {"sam2.1_hiera_large", 144, 2, {2, 6, 36, 4}, {23, 33, 43}, 7, {8, 4, 16, 8}},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

static void set_from(sam2_hparams *h, int k)
{
    memset(h, 0, sizeof *h);
    h->variant = variants[k].name;
    h->embed = variants[k].embed;
    h->bkg = variants[k].bkg;
    h->win0 = variants[k].window[0];
    h->n_stages = 4;
    int end = -1;
    for (int s = 0; s < 4; s++) {
        end += variants[k].stages[s];
        h->stage_end[s] = end;
    }
    h->depth = end + 1;
    /* hieradet.py: the window lags a block behind the stage (the first block of a
     * stage pools with the previous stage's window) */
    int dim = h->embed, heads = variants[k].heads, stage = 0;
    for (int i = 0; i < h->depth; i++) {
        sam2_block *b = &h->blk[i];
        b->dim = dim;
        b->window = variants[k].window[stage];
        for (int g = 0; g < 3; g++)
            if (variants[k].global[g] == i)
                b->window = 0;
        if (stage < 3 && i - 1 == h->stage_end[stage]) {
            dim *= 2;
            heads *= 2;
            stage++;
            b->pool = true;
        }
        b->dim_out = dim;
        b->heads = heads;
    }
}

bool sam2_set_variant(sam2_hparams *h, const char *name)
{
    for (int k = 0; k < N_VARIANTS; k++)
        if (strcmp(variants[k].name, name) == 0) {
            set_from(h, k);
            return true;
        }
    return false;
}

/* convert_sam2_to_hf.py's plain renames that reach the image path's tensors, in
 * the order it applies them (each to every occurrence, on the name as renamed so
 * far). */
static const char *const hf_rules[][2] = {
    {"iou_prediction_head.layers.0", "iou_prediction_head.proj_in"},
    {"iou_prediction_head.layers.1", "iou_prediction_head.layers.0"},
    {"iou_prediction_head.layers.2", "iou_prediction_head.proj_out"},
    {"mask_decoder.output_upscaling.0", "mask_decoder.upscale_conv1"},
    {"mask_decoder.output_upscaling.1", "mask_decoder.upscale_layer_norm"},
    {"mask_decoder.output_upscaling.3", "mask_decoder.upscale_conv2"},
    {"mask_downscaling.0", "mask_embed.conv1"},
    {"mask_downscaling.1", "mask_embed.layer_norm1"},
    {"mask_downscaling.3", "mask_embed.conv2"},
    {"mask_downscaling.4", "mask_embed.layer_norm2"},
    {"mask_downscaling.6", "mask_embed.conv3"},
    {"point_embeddings", "point_embed"},
    {"pe_layer.positional_encoding_gaussian_matrix", "shared_embedding.positional_embedding"},
    {"sam_prompt_encoder", "prompt_encoder"},
    {"sam_mask_decoder", "mask_decoder"},
    {"image_encoder.neck", "vision_encoder.neck"},
    {"image_encoder", "vision_encoder.backbone"},
    {"patch_embed.proj", "patch_embed.projection"},
    {"no_mem_embed", "no_memory_embedding"},
    {".norm", ".layer_norm"},
    {"trunk.", ""},
    {"out_proj", "o_proj"},
};

/* "<pre><n>.<mid><k>.<rest>" with <mid> one of "layers." / "mlp.layers.": k, and
 * the offset of <mid> in s; -1 when s does not start so. */
static int layer_at(const char *s, const char *pre, const char *mid, size_t *at)
{
    size_t pl = strlen(pre);
    if (strncmp(s, pre, pl) != 0)
        return -1;
    const char *p = s + pl;
    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p++ != '.' || strncmp(p, mid, strlen(mid)) != 0)
        return -1;
    const char *d = p + strlen(mid);
    if (*d < '0' || *d > '9' || d[1] != '.')
        return -1;
    *at = (size_t)(p - s);
    return *d - '0';
}

/* s[at..] starts with `from`: that part replaced by `to`. */
static void splice(char *s, size_t cap, size_t at, const char *from, const char *to)
{
    char rest[SAM_NAME_MAX * 2];
    snprintf(rest, sizeof rest, "%s", s + at + strlen(from));
    snprintf(s + at, cap - at, "%s%s", to, rest);
}

void sam2_hf_name(const char *official, char *out, size_t cap)
{
    snprintf(out, cap, "%s", official);
    for (size_t i = 0; i < sizeof hf_rules / sizeof hf_rules[0]; i++)
        sam_replace_all(out, cap, hf_rules[i][0], hf_rules[i][1]);
    /* the MLPs: two layers -> proj_in / proj_out, three -> proj_in / layers.0 / proj_out */
    static const char *const two[2][2] = {{"layers.0", "proj_in"}, {"layers.1", "proj_out"}};
    static const char *const three[3][2] = {
        {"layers.0", "proj_in"}, {"layers.1", "layers.0"}, {"layers.2", "proj_out"}};
    size_t at = 0;
    int k;
    if ((k = layer_at(out, "vision_encoder.backbone.blocks.", "mlp.layers.", &at)) >= 0 && k < 2)
        splice(out, cap, at + 4, two[k][0], two[k][1]);
    else if ((k = layer_at(out, "mask_decoder.transformer.layers.", "mlp.layers.", &at)) >= 0 &&
             k < 2)
        splice(out, cap, at + 4, two[k][0], two[k][1]);
    else if ((k = layer_at(out, "mask_decoder.output_hypernetworks_mlps.", "layers.", &at)) >= 0 &&
             k < 3)
        splice(out, cap, at, three[k][0], three[k][1]);
    else if (strncmp(out, "mask_decoder.pred_obj_score_head.layers.", 40) == 0 && out[40] >= '0' &&
             out[40] <= '2' && out[41] == '.')
        splice(out, cap, 33, three[out[40] - '0'][0], three[out[40] - '0'][1]);
    /* the neck: convs.<k>.conv.weight -> convs.<k>.weight */
    char *c = strstr(out, ".conv.");
    if (strncmp(out, "vision_encoder.neck.convs.", 26) == 0 && c)
        splice(out, cap, (size_t)(c - out), ".conv.", ".");
}

bool sam2_hf_point_embed(rlx_sam_lookup_fn lookup, void *user, int row, rlx_sam_tensor *t)
{
    memset(t, 0, sizeof *t);
    if (!lookup(user, "prompt_encoder.point_embed.weight", t))
        return false;
    size_t esz = t->dtype == RLX_DTYPE_F32                                 ? 4
                 : t->dtype == RLX_DTYPE_F16 || t->dtype == RLX_DTYPE_BF16 ? 2
                                                                           : 0;
    if (t->rank != 2 || row < 0 || t->dims[0] != 4 || t->dims[1] != E || !esz || !t->data ||
        t->n_bytes != 4 * E * esz)
        return true;
    t->dims[0] = 1;
    t->data = (const uint8_t *)t->data + (size_t)row * E * esz;
    t->n_bytes = E * esz;
    return true;
}

static bool width(rlx_sam_lookup_fn lookup, void *user, bool hf, const char *fmt, int i, int64_t *n)
{
    char nm[SAM_NAME_MAX], off[SAM_NAME_MAX];
    snprintf(off, sizeof off, fmt, i);
    if (hf)
        sam2_hf_name(off, nm, sizeof nm);
    else
        snprintf(nm, sizeof nm, "%s", off);
    rlx_sam_tensor t;
    memset(&t, 0, sizeof t);
    if (!lookup(user, nm, &t) || t.rank != 1 || t.dims[0] < 1)
        return false;
    *n = t.dims[0];
    return true;
}

rlx_status sam2_read_hparams(rlx_sam_lookup_fn lookup, void *user, bool hf, const char *what,
                             sam2_hparams *h, rlx_error **err)
{
    rlx_sam_tensor t;
    memset(&t, 0, sizeof t);
    const char *pe = hf ? "vision_encoder.backbone.patch_embed.projection.weight"
                        : "image_encoder.trunk.patch_embed.proj.weight";
    if (!lookup(user, pe, &t) || t.rank != 4 || t.dims[1] != 3 || t.dims[2] != 7 || t.dims[3] != 7)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is not a SAM 2 checkpoint: its tensor '%s' is not [D, 3, 7, 7]",
                             what, pe);
    int64_t embed = t.dims[0];
    /* the stages from the blocks' widths: a stage starts where norm2 doubles norm1 */
    int stages[SAM_MAX_DEPTH] = {0}, n_stages = 0, depth = 0;
    for (; depth < SAM_MAX_DEPTH; depth++) {
        int64_t din, dout;
        if (!width(lookup, user, hf, "image_encoder.trunk.blocks.%d.norm1.weight", depth, &din))
            break;
        if (!width(lookup, user, hf, "image_encoder.trunk.blocks.%d.norm2.weight", depth, &dout))
            return rlx_error_set(
                err, RLX_ERR_FORMAT, "%s has no tensor '%s.%d.%s' (or it is not a vector)", what,
                hf ? "vision_encoder.backbone.blocks" : "image_encoder.trunk.blocks", depth,
                hf ? "layer_norm2.weight" : "norm2.weight");
        if (depth == 0 || dout != din) {
            if (n_stages == 4)
                break;
            n_stages++;
        }
        stages[n_stages - 1]++;
    }
    for (int k = 0; k < N_VARIANTS; k++) {
        bool same = variants[k].embed == embed && n_stages == 4;
        for (int s = 0; same && s < 4; s++)
            same = variants[k].stages[s] == stages[s];
        if (same) {
            set_from(h, k);
            return RLX_OK;
        }
    }
    return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                         "%s: a Hiera image encoder of width %lld with %d blocks in stages "
                         "%d, %d, %d, %d is none of the published SAM 2.1 models (tiny, small, "
                         "base_plus, large)",
                         what, (long long)embed, depth, stages[0], stages[1], stages[2], stages[3]);
}

typedef sam_lister lister;
#define add sam_list_add

#define D1(a)          ((const int64_t[]){a})
#define D2(a, b)       ((const int64_t[]){a, b})
#define D3(a, b, c)    ((const int64_t[]){a, b, c})
#define D4(a, b, c, d) ((const int64_t[]){a, b, c, d})

static void linear(lister *L, int64_t out, int64_t in, const char *fmt, ...) RLX_PRINTF(4, 5);
static void linear(lister *L, int64_t out, int64_t in, const char *fmt, ...)
{
    char pre[SAM_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    add(L, 2, D2(out, in), "%s.weight", pre);
    add(L, 1, D1(out), "%s.bias", pre);
}

static void norm(lister *L, int64_t n, const char *pre)
{
    add(L, 1, D1(n), "%s.weight", pre);
    add(L, 1, D1(n), "%s.bias", pre);
}

static void dec_attention(lister *L, const char *pre, int64_t inner)
{
    linear(L, inner, E, "%s.q_proj", pre);
    linear(L, inner, E, "%s.k_proj", pre);
    linear(L, inner, E, "%s.v_proj", pre);
    linear(L, E, inner, "%s.out_proj", pre);
}

rlx_status sam2_list_weights(sam_model *m, rlx_error **err)
{
    free(m->w);
    m->w = NULL;
    m->n_w = 0;
    lister L = {.m = m};
    const sam2_hparams *h = &m->h2;
    const char *t = "image_encoder.trunk";
    char pre[SAM_NAME_MAX], nm[SAM_NAME_MAX];
    add(&L, 4, D4(1, h->embed, h->bkg, h->bkg), "%s.pos_embed", t);
    add(&L, 4, D4(1, h->embed, h->win0, h->win0), "%s.pos_embed_window", t);
    add(&L, 4, D4(h->embed, 3, 7, 7), "%s.patch_embed.proj.weight", t);
    add(&L, 1, D1(h->embed), "%s.patch_embed.proj.bias", t);
    for (int i = 0; i < h->depth; i++) {
        const sam2_block *b = &h->blk[i];
        snprintf(pre, sizeof pre, "%s.blocks.%d", t, i);
        snprintf(nm, sizeof nm, "%s.norm1", pre);
        norm(&L, b->dim, nm);
        linear(&L, 3 * b->dim_out, b->dim, "%s.attn.qkv", pre);
        linear(&L, b->dim_out, b->dim_out, "%s.attn.proj", pre);
        snprintf(nm, sizeof nm, "%s.norm2", pre);
        norm(&L, b->dim_out, nm);
        linear(&L, 4 * b->dim_out, b->dim_out, "%s.mlp.layers.%d", pre, 0);
        linear(&L, b->dim_out, 4 * b->dim_out, "%s.mlp.layers.%d", pre, 1);
        if (b->dim != b->dim_out)
            linear(&L, b->dim_out, b->dim, "%s.proj", pre);
    }
    /* the neck's convs, lowest resolution (the last stage) first */
    for (int k = 0; k < 4; k++) {
        int64_t c = h->blk[h->stage_end[3 - k]].dim_out;
        add(&L, 4, D4(E, c, 1, 1), "image_encoder.neck.convs.%d.conv.weight", k);
        add(&L, 1, D1(E), "image_encoder.neck.convs.%d.conv.bias", k);
    }
    add(&L, 3, D3(1, 1, E), "no_mem_embed");

    const char *pe = "sam_prompt_encoder", *d = "sam_mask_decoder";
    add(&L, 2, D2(2, E / 2), "%s.pe_layer.positional_encoding_gaussian_matrix", pe);
    for (int i = 0; i < 4; i++)
        add(&L, 2, D2(1, E), "%s.point_embeddings.%d.weight", pe, i);
    add(&L, 2, D2(1, E), "%s.not_a_point_embed.weight", pe);
    add(&L, 2, D2(1, E), "%s.no_mask_embed.weight", pe);
    sam_list_mask_downscaling(&L, pe);

    add(&L, 2, D2(1, E), "%s.iou_token.weight", d);
    add(&L, 2, D2(RLX_SAM_MAX_MASKS, E), "%s.mask_tokens.weight", d);
    add(&L, 2, D2(1, E), "%s.obj_score_token.weight", d);
    for (int i = 0; i < SAM_DEC_DEPTH; i++) {
        snprintf(pre, sizeof pre, "%s.transformer.layers.%d", d, i);
        snprintf(nm, sizeof nm, "%s.self_attn", pre);
        dec_attention(&L, nm, E);
        snprintf(nm, sizeof nm, "%s.cross_attn_token_to_image", pre);
        dec_attention(&L, nm, E / 2);
        snprintf(nm, sizeof nm, "%s.cross_attn_image_to_token", pre);
        dec_attention(&L, nm, E / 2);
        linear(&L, SAM_DEC_MLP, E, "%s.mlp.layers.%d", pre, 0);
        linear(&L, E, SAM_DEC_MLP, "%s.mlp.layers.%d", pre, 1);
        for (int k = 1; k <= 4; k++) {
            snprintf(nm, sizeof nm, "%s.norm%d", pre, k);
            norm(&L, E, nm);
        }
    }
    snprintf(nm, sizeof nm, "%s.transformer.final_attn_token_to_image", d);
    dec_attention(&L, nm, E / 2);
    snprintf(nm, sizeof nm, "%s.transformer.norm_final_attn", d);
    norm(&L, E, nm);
    add(&L, 4, D4(E, E / 4, 2, 2), "%s.output_upscaling.0.weight", d);
    add(&L, 1, D1(E / 4), "%s.output_upscaling.0.bias", d);
    snprintf(nm, sizeof nm, "%s.output_upscaling.1", d);
    norm(&L, E / 4, nm);
    add(&L, 4, D4(E / 4, E / 8, 2, 2), "%s.output_upscaling.3.weight", d);
    add(&L, 1, D1(E / 8), "%s.output_upscaling.3.bias", d);
    add(&L, 4, D4(E / 8, E, 1, 1), "%s.conv_s0.weight", d);
    add(&L, 1, D1(E / 8), "%s.conv_s0.bias", d);
    add(&L, 4, D4(E / 4, E, 1, 1), "%s.conv_s1.weight", d);
    add(&L, 1, D1(E / 4), "%s.conv_s1.bias", d);
    for (int i = 0; i < RLX_SAM_MAX_MASKS; i++)
        for (int k = 0; k < 3; k++) {
            snprintf(pre, sizeof pre, "%s.output_hypernetworks_mlps.%d", d, i);
            linear(&L, k == 2 ? E / 8 : E, E, "%s.layers.%d", pre, k);
        }
    for (int k = 0; k < 3; k++) {
        snprintf(pre, sizeof pre, "%s.iou_prediction_head", d);
        linear(&L, k == 2 ? RLX_SAM_MAX_MASKS : E, E, "%s.layers.%d", pre, k);
    }
    for (int k = 0; k < 3; k++) {
        snprintf(pre, sizeof pre, "%s.pred_obj_score_head", d);
        linear(&L, k == 2 ? 1 : E, E, "%s.layers.%d", pre, k);
    }
    if (L.oom)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory listing the SAM 2 weights");
    return RLX_OK;
}
