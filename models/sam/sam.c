/* SAM runner: the weight table (official and Hugging Face names), the variant read
 * from the shapes, the session and its programs. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/safetensors.h"
#include "engine/ir/graph.h"
#include "engine/runtime/session.h"
#include "models/sam/sam-internal.h"

#define NTOK     (RLX_SAM_EMBED_SIDE * RLX_SAM_EMBED_SIDE)
#define MASK_PIX (RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE)
#define MAX_TOKS (RLX_SAM_MAX_POINTS + 3) /* points, a padding point or two box corners */

/* ---- names ---------------------------------------------------------------- */

/* The renames of transformers' convert_sam_to_hf.py, applied in its order, each to
 * every occurrence. */
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
    {"image_encoder", "vision_encoder"},
    {"neck.0", "neck.conv1"},
    {"neck.1", "neck.layer_norm1"},
    {"neck.2", "neck.conv2"},
    {"neck.3", "neck.layer_norm2"},
    {"patch_embed.proj", "patch_embed.projection"},
    {".norm", ".layer_norm"},
    {"blocks", "layers"},
};

void sam_replace_all(char *s, size_t cap, const char *from, const char *to)
{
    char tmp[SAM_NAME_MAX * 2];
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    const char *p = s;
    bool any = false;
    while (*p && n + 1 < sizeof tmp) {
        if (strncmp(p, from, fl) == 0 && n + tl < sizeof tmp) {
            memcpy(tmp + n, to, tl);
            n += tl;
            p += fl;
            any = true;
        } else {
            tmp[n++] = *p++;
        }
    }
    tmp[n] = '\0';
    if (any)
        snprintf(s, cap, "%s", tmp);
}

/* The Hugging Face SamModel name of an official segment_anything name. */
static void hf_name(const char *official, char *out, size_t cap)
{
    snprintf(out, cap, "%s", official);
    for (size_t i = 0; i < sizeof hf_rules / sizeof hf_rules[0]; i++)
        sam_replace_all(out, cap, hf_rules[i][0], hf_rules[i][1]);
    /* hypernetwork MLPs: layers.0 / 1 / 2 -> proj_in / layers.0 / proj_out */
    const char *h = strstr(out, "output_hypernetworks_mlps.");
    if (h) {
        char *l = strstr(h, ".layers.");
        if (l && (l[8] == '0' || l[8] == '1' || l[8] == '2') && l[9] == '.') {
            const char *rep = l[8] == '0' ? ".proj_in" : l[8] == '1' ? ".layers.0" : ".proj_out";
            char rest[SAM_NAME_MAX];
            snprintf(rest, sizeof rest, "%s", l + 9);
            snprintf(l, cap - (size_t)(l - out), "%s%s", rep, rest);
        }
    }
}

typedef sam_lister lister;
#define add sam_list_add

void sam_list_add(sam_lister *L, int rank, const int64_t *dims, const char *fmt, ...)
{
    sam_model *m = L->m;
    if (m->n_w == L->cap) {
        int nc = L->cap ? 2 * L->cap : 256;
        sam_weight *nw = realloc(m->w, sizeof *nw * (size_t)nc);
        if (!nw) {
            L->oom = true;
            return;
        }
        m->w = nw;
        L->cap = nc;
    }
    sam_weight *w = &m->w[m->n_w++];
    memset(w, 0, sizeof *w);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->name, sizeof w->name, fmt, ap);
    va_end(ap);
    if (L->hf_names)
        hf_name(w->name, w->hf, sizeof w->hf);
    else
        snprintf(w->hf, sizeof w->hf, "%s", w->name); /* no second naming scheme */
    w->rank = rank;
    memcpy(w->dims, dims, sizeof dims[0] * (size_t)rank);
    w->dtype = RLX_DTYPE_F32;
}

#define V1(a)         \
    (const int64_t[]) \
    {                 \
        a             \
    }
#define V2(a, b)      \
    (const int64_t[]) \
    {                 \
        a, b          \
    }
#define V4(a, b, c, d) \
    (const int64_t[])  \
    {                  \
        a, b, c, d     \
    }

static void add_linear(lister *L, int64_t out, int64_t in, const char *pre)
{
    add(L, 2, V2(out, in), "%s.weight", pre);
    add(L, 1, V1(out), "%s.bias", pre);
}

static void add_norm(lister *L, int64_t n, const char *pre)
{
    add(L, 1, V1(n), "%s.weight", pre);
    add(L, 1, V1(n), "%s.bias", pre);
}

static void add_dec_attention(lister *L, const char *pre, int64_t inner)
{
    const char *p[3] = {"q_proj", "k_proj", "v_proj"};
    char nm[SAM_NAME_MAX];
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "%s.%s", pre, p[i]);
        add_linear(L, inner, RLX_SAM_EMBED_DIM, nm);
    }
    snprintf(nm, sizeof nm, "%s.out_proj", pre);
    add_linear(L, RLX_SAM_EMBED_DIM, inner, nm);
}

static void add_mlp3(lister *L, const char *pre, int64_t out)
{
    char nm[SAM_NAME_MAX];
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "%s.layers.%d", pre, i);
        add_linear(L, i == 2 ? out : RLX_SAM_EMBED_DIM, RLX_SAM_EMBED_DIM, nm);
    }
}

/* Conv2d_BN: a bias-free conv and its BatchNorm (eval: the running statistics). */
static void add_conv_bn(lister *L, int64_t cout, int64_t cin_per_group, int64_t k, const char *pre)
{
    add(L, 4, V4(cout, cin_per_group, k, k), "%s.c.weight", pre);
    add(L, 1, V1(cout), "%s.bn.weight", pre);
    add(L, 1, V1(cout), "%s.bn.bias", pre);
    add(L, 1, V1(cout), "%s.bn.running_mean", pre);
    add(L, 1, V1(cout), "%s.bn.running_var", pre);
}

/* MobileSAM's TinyViT (tiny_vit_sam.py): the tensors its forward pass reads (not
 * num_batches_tracked, norm_head / head, nor the attention_bias_idxs buffer,
 * which is recomputed). */
static int64_t list_tinyvit(lister *L, const sam_tinyvit *tv)
{
    char pre[SAM_NAME_MAX], nm[SAM_NAME_MAX];
    const int64_t d0 = tv->dims[0];
    add_conv_bn(L, d0 / 2, 3, 3, "image_encoder.patch_embed.seq.0");
    add_conv_bn(L, d0, d0 / 2, 3, "image_encoder.patch_embed.seq.2");
    for (int s = 0; s < SAM_TV_STAGES; s++) {
        const int64_t d = tv->dims[s];
        for (int i = 0; i < tv->depths[s]; i++) {
            snprintf(pre, sizeof pre, "image_encoder.layers.%d.blocks.%d", s, i);
            if (s == 0) { /* MBConv, expansion 4 */
                snprintf(nm, sizeof nm, "%s.conv1", pre);
                add_conv_bn(L, 4 * d, d, 1, nm);
                snprintf(nm, sizeof nm, "%s.conv2", pre);
                add_conv_bn(L, 4 * d, 1, 3, nm);
                snprintf(nm, sizeof nm, "%s.conv3", pre);
                add_conv_bn(L, d, 4 * d, 1, nm);
                continue;
            }
            int n_off = sam_tinyvit_bias_index(tv->windows[s], NULL);
            if (n_off < 0)
                L->oom = true;
            add(L, 2, V2(tv->heads[s], n_off), "%s.attn.attention_biases", pre);
            snprintf(nm, sizeof nm, "%s.attn.norm", pre);
            add_norm(L, d, nm);
            snprintf(nm, sizeof nm, "%s.attn.qkv", pre);
            add_linear(L, 3 * d, d, nm);
            snprintf(nm, sizeof nm, "%s.attn.proj", pre);
            add_linear(L, d, d, nm);
            snprintf(nm, sizeof nm, "%s.local_conv", pre);
            add_conv_bn(L, d, 1, 3, nm);
            snprintf(nm, sizeof nm, "%s.mlp.norm", pre);
            add_norm(L, d, nm);
            snprintf(nm, sizeof nm, "%s.mlp.fc1", pre);
            add_linear(L, 4 * d, d, nm);
            snprintf(nm, sizeof nm, "%s.mlp.fc2", pre);
            add_linear(L, d, 4 * d, nm);
        }
        if (s + 1 < SAM_TV_STAGES) { /* PatchMerging into the next stage's width */
            const int64_t o = tv->dims[s + 1];
            snprintf(nm, sizeof nm, "image_encoder.layers.%d.downsample.conv1", s);
            add_conv_bn(L, o, d, 1, nm);
            snprintf(nm, sizeof nm, "image_encoder.layers.%d.downsample.conv2", s);
            add_conv_bn(L, o, 1, 3, nm);
            snprintf(nm, sizeof nm, "image_encoder.layers.%d.downsample.conv3", s);
            add_conv_bn(L, o, o, 1, nm);
        }
    }
    return tv->dims[SAM_TV_STAGES - 1];
}

static int64_t list_vit(lister *L, const sam_hparams *hp)
{
    const int64_t D = hp->dim, G = RLX_SAM_EMBED_SIDE;
    char pre[SAM_NAME_MAX], nm[SAM_NAME_MAX];
    add(L, 4, V4(D, 3, SAM_PATCH, SAM_PATCH), "image_encoder.patch_embed.proj.weight");
    add(L, 1, V1(D), "image_encoder.patch_embed.proj.bias");
    add(L, 4, V4(1, G, G, D), "image_encoder.pos_embed");
    for (int i = 0; i < hp->depth; i++) {
        snprintf(pre, sizeof pre, "image_encoder.blocks.%d", i);
        int64_t w = hp->window[i] ? hp->window[i] : G;
        snprintf(nm, sizeof nm, "%s.norm1", pre);
        add_norm(L, D, nm);
        snprintf(nm, sizeof nm, "%s.attn.qkv", pre);
        add_linear(L, 3 * D, D, nm);
        snprintf(nm, sizeof nm, "%s.attn.proj", pre);
        add_linear(L, D, D, nm);
        add(L, 2, V2(2 * w - 1, hp->head_dim), "%s.attn.rel_pos_h", pre);
        add(L, 2, V2(2 * w - 1, hp->head_dim), "%s.attn.rel_pos_w", pre);
        snprintf(nm, sizeof nm, "%s.norm2", pre);
        add_norm(L, D, nm);
        snprintf(nm, sizeof nm, "%s.mlp.lin1", pre);
        add_linear(L, 4 * D, D, nm);
        snprintf(nm, sizeof nm, "%s.mlp.lin2", pre);
        add_linear(L, D, 4 * D, nm);
    }
    return D;
}

rlx_status sam_list_weights(sam_model *m, rlx_error **err)
{
    if (m->kind == SAM_KIND_SAM2)
        return sam2_list_weights(m, err);
    free(m->w);
    m->w = NULL;
    m->n_w = 0;
    lister L = {.m = m, .hf_names = true};
    const int64_t E = RLX_SAM_EMBED_DIM;
    char pre[SAM_NAME_MAX], nm[SAM_NAME_MAX];
    const int64_t D =
        m->enc == SAM_ENCODER_TINYVIT ? list_tinyvit(&L, &m->tv) : list_vit(&L, &m->hp);
    add(&L, 4, V4(E, D, 1, 1), "image_encoder.neck.0.weight");
    add_norm(&L, E, "image_encoder.neck.1");
    add(&L, 4, V4(E, E, 3, 3), "image_encoder.neck.2.weight");
    add_norm(&L, E, "image_encoder.neck.3");

    add(&L, 2, V2(2, E / 2), "prompt_encoder.pe_layer.positional_encoding_gaussian_matrix");
    for (int i = 0; i < 4; i++)
        add(&L, 2, V2(1, E), "prompt_encoder.point_embeddings.%d.weight", i);
    add(&L, 2, V2(1, E), "prompt_encoder.not_a_point_embed.weight");
    add(&L, 2, V2(1, E), "prompt_encoder.no_mask_embed.weight");
    sam_list_mask_downscaling(&L, "prompt_encoder");

    add(&L, 2, V2(1, E), "mask_decoder.iou_token.weight");
    add(&L, 2, V2(RLX_SAM_MAX_MASKS, E), "mask_decoder.mask_tokens.weight");
    for (int i = 0; i < SAM_DEC_DEPTH; i++) {
        snprintf(pre, sizeof pre, "mask_decoder.transformer.layers.%d", i);
        snprintf(nm, sizeof nm, "%s.self_attn", pre);
        add_dec_attention(&L, nm, E);
        snprintf(nm, sizeof nm, "%s.cross_attn_token_to_image", pre);
        add_dec_attention(&L, nm, E / 2);
        snprintf(nm, sizeof nm, "%s.cross_attn_image_to_token", pre);
        add_dec_attention(&L, nm, E / 2);
        snprintf(nm, sizeof nm, "%s.mlp.lin1", pre);
        add_linear(&L, SAM_DEC_MLP, E, nm);
        snprintf(nm, sizeof nm, "%s.mlp.lin2", pre);
        add_linear(&L, E, SAM_DEC_MLP, nm);
        for (int k = 1; k <= 4; k++) {
            snprintf(nm, sizeof nm, "%s.norm%d", pre, k);
            add_norm(&L, E, nm);
        }
    }
    add_dec_attention(&L, "mask_decoder.transformer.final_attn_token_to_image", E / 2);
    add_norm(&L, E, "mask_decoder.transformer.norm_final_attn");
    add(&L, 4, V4(E, E / 4, 2, 2), "mask_decoder.output_upscaling.0.weight");
    add(&L, 1, V1(E / 4), "mask_decoder.output_upscaling.0.bias");
    add_norm(&L, E / 4, "mask_decoder.output_upscaling.1");
    add(&L, 4, V4(E / 4, E / 8, 2, 2), "mask_decoder.output_upscaling.3.weight");
    add(&L, 1, V1(E / 8), "mask_decoder.output_upscaling.3.bias");
    for (int i = 0; i < RLX_SAM_MAX_MASKS; i++) {
        snprintf(nm, sizeof nm, "mask_decoder.output_hypernetworks_mlps.%d", i);
        add_mlp3(&L, nm, E / 8);
    }
    add_mlp3(&L, "mask_decoder.iou_prediction_head", RLX_SAM_MAX_MASKS);
    if (L.oom)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory listing the SAM weights");
    return RLX_OK;
}

void sam_list_mask_downscaling(sam_lister *L, const char *pe)
{
    const int64_t E = RLX_SAM_EMBED_DIM, CM = 16;
    char nm[SAM_NAME_MAX];
    add(L, 4, V4(CM / 4, 1, 2, 2), "%s.mask_downscaling.0.weight", pe);
    add(L, 1, V1(CM / 4), "%s.mask_downscaling.0.bias", pe);
    snprintf(nm, sizeof nm, "%s.mask_downscaling.1", pe);
    add_norm(L, CM / 4, nm);
    add(L, 4, V4(CM, CM / 4, 2, 2), "%s.mask_downscaling.3.weight", pe);
    add(L, 1, V1(CM), "%s.mask_downscaling.3.bias", pe);
    snprintf(nm, sizeof nm, "%s.mask_downscaling.4", pe);
    add_norm(L, CM, nm);
    add(L, 4, V4(E, CM, 1, 1), "%s.mask_downscaling.6.weight", pe);
    add(L, 1, V1(E), "%s.mask_downscaling.6.bias", pe);
}

const sam_weight *sam_find_weight(const sam_model *m, const char *name)
{
    for (int i = 0; i < m->n_w; i++)
        if (strcmp(m->w[i].name, name) == 0)
            return &m->w[i];
    return NULL;
}

/* ---- runner --------------------------------------------------------------- */

struct rlx_sam {
    rlx_session *s;
    rlx_safetensors *st; /* rlx_sam_create_file's file, or NULL */
    sam_model m;
    bool hf;
    bool encoded;
    rlx_session_program *enc;
    rlx_session_program *dec[2][MAX_TOKS + 1]; /* [with a mask prompt][tokens] */
    float *masks;                              /* [4][256][256], the decoder's output */
    float object;                              /* SAM 2: the last decode's object-score logit */
};

rlx_sam_params rlx_sam_default_params(void)
{
    return (rlx_sam_params){.device = "cpu"};
}

static void dims_str(int rank, const int64_t *d, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

typedef struct {
    rlx_sam_lookup_fn fn;
    void *user;
    const char *what;
    bool hf;
    bool sam2; /* with hf: transformers' Sam2Model names */
} source;

/* A tensor by its official name, under the source's naming scheme. */
static bool find(const source *src, const char *official, rlx_sam_tensor *t, char *used, size_t cap)
{
    char nm[SAM_NAME_MAX];
    if (src->hf && src->sam2)
        sam2_hf_name(official, nm, sizeof nm);
    else if (src->hf)
        hf_name(official, nm, sizeof nm);
    else
        snprintf(nm, sizeof nm, "%s", official);
    memset(t, 0, sizeof *t);
    if (used)
        snprintf(used, cap, "%s", nm);
    int row = -1;
    if (src->hf && src->sam2 &&
        sscanf(official, "sam_prompt_encoder.point_embeddings.%d.weight", &row) == 1)
        return sam2_hf_point_embed(src->fn, src->user, row, t);
    if (src->fn(src->user, nm, t))
        return true;
    /* SamModel ties the prompt encoder's matrix to shared_image_embedding, and a
     * saved model may keep only that copy */
    if (src->hf && strcmp(nm, "prompt_encoder.shared_embedding.positional_embedding") == 0)
        return src->fn(src->user, "shared_image_embedding.positional_embedding", t);
    return false;
}

static rlx_status read_hparams(const source *src, sam_hparams *hp, rlx_error **err)
{
    memset(hp, 0, sizeof *hp);
    rlx_sam_tensor t;
    char nm[SAM_NAME_MAX], used[SAM_NAME_MAX], a[64];
    if (!find(src, "image_encoder.patch_embed.proj.weight", &t, used, sizeof used) || t.rank != 4 ||
        t.dims[1] != 3 || t.dims[2] != SAM_PATCH || t.dims[3] != SAM_PATCH || t.dims[0] < 1 ||
        t.dims[0] > 8192) {
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is not a SAM checkpoint: its tensor '%s' is missing or not "
                             "[D, 3, 16, 16]",
                             src->what, used);
    }
    hp->dim = (int)t.dims[0];
    if (!find(src, "image_encoder.pos_embed", &t, used, sizeof used))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s is not a SAM checkpoint: it has no '%s'",
                             src->what, used);
    if (t.rank != 4 || t.dims[0] != 1 || t.dims[1] != RLX_SAM_EMBED_SIDE ||
        t.dims[2] != RLX_SAM_EMBED_SIDE || t.dims[3] != hp->dim) {
        dims_str(t.rank, t.dims, a, sizeof a);
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: '%s' is %s; only SAM models for 1024 x 1024 input "
                             "([1, 64, 64, %d]) are supported",
                             src->what, used, a, hp->dim);
    }
    for (hp->depth = 0; hp->depth < SAM_MAX_DEPTH; hp->depth++) {
        snprintf(nm, sizeof nm, "image_encoder.blocks.%d.norm1.weight", hp->depth);
        if (!find(src, nm, &t, NULL, 0))
            break;
    }
    if (hp->depth == 0)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s has no image encoder blocks", src->what);
    /* a block without its first norm would end the count early */
    snprintf(nm, sizeof nm, "image_encoder.blocks.%d.attn.qkv.weight", hp->depth);
    if (find(src, nm, &t, NULL, 0)) {
        snprintf(nm, sizeof nm, "image_encoder.blocks.%d.norm1.weight", hp->depth);
        find(src, nm, &t, used, sizeof used);
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s cannot be used as SAM: it has no tensor '%s', but later ones "
                             "of that block",
                             src->what, used);
    }
    for (int i = 0; i < hp->depth; i++) {
        snprintf(nm, sizeof nm, "image_encoder.blocks.%d.attn.rel_pos_h", i);
        if (!find(src, nm, &t, used, sizeof used))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s has no tensor '%s' (SAM's relative positions)", src->what,
                                 used);
        dims_str(t.rank, t.dims, a, sizeof a);
        if (t.rank != 2 || t.dims[1] < 1 || hp->dim % t.dims[1] ||
            (i > 0 && t.dims[1] != hp->head_dim))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: '%s' is %s, which gives no head size dividing %d", src->what,
                                 used, a, hp->dim);
        hp->head_dim = (int)t.dims[1];
        int64_t rows = t.dims[0];
        if (rows == 2 * RLX_SAM_EMBED_SIDE - 1)
            hp->window[i] = 0;
        else if (rows >= 1 && rows % 2 == 1 && rows < 2 * RLX_SAM_EMBED_SIDE - 1)
            hp->window[i] = (int)(rows + 1) / 2;
        else
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "%s: '%s' is %s; its rows must be 2 * window - 1 for a window "
                                 "of at most 64 (relative positions are not interpolated)",
                                 src->what, used, a);
    }
    hp->heads = hp->dim / hp->head_dim;
    if (hp->heads > SAM_MAX_HEADS)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: %d attention heads (head size %d); at most %d are supported",
                             src->what, hp->heads, hp->head_dim, SAM_MAX_HEADS);
    return RLX_OK;
}

/* TinyViT's shapes: each stage's width from its first tensor, the block counts from
 * the blocks present, heads and window from attention_biases [heads, window^2]. */
static rlx_status read_tinyvit(const source *src, sam_tinyvit *tv, rlx_error **err)
{
    memset(tv, 0, sizeof *tv);
    rlx_sam_tensor t;
    char nm[SAM_NAME_MAX], a[64];
    for (int s = 0; s < SAM_TV_STAGES; s++) {
        if (s == 0)
            snprintf(nm, sizeof nm, "image_encoder.patch_embed.seq.2.c.weight");
        else
            snprintf(nm, sizeof nm, "image_encoder.layers.%d.downsample.conv1.c.weight", s - 1);
        if (!find(src, nm, &t, NULL, 0))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s cannot be used as MobileSAM: it has no tensor '%s'", src->what,
                                 nm);
        if (t.rank != 4 || t.dims[0] < 2 || t.dims[0] > SAM_TV_MAX_DIM || t.dims[0] % 2) {
            dims_str(t.rank < 0 || t.rank > RLX_SAM_MAX_DIMS ? 0 : t.rank, t.dims, a, sizeof a);
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: '%s' is %s, not [C, C_in, K, K] with an even C of at most "
                                 "%d",
                                 src->what, nm, a, SAM_TV_MAX_DIM);
        }
        tv->dims[s] = (int)t.dims[0];
        for (tv->depths[s] = 0; tv->depths[s] < SAM_TV_MAX_DEPTH; tv->depths[s]++) {
            snprintf(nm, sizeof nm, "image_encoder.layers.%d.blocks.%d.%s", s, tv->depths[s],
                     s == 0 ? "conv1.c.weight" : "attn.attention_biases");
            if (!find(src, nm, &t, NULL, 0))
                break;
            if (s == 0 || tv->depths[s] > 0)
                continue;
            /* the stage's heads and window, from its first block */
            int ws = 1;
            while (t.rank == 2 && ws < SAM_TV_MAX_WIN && ws * ws < t.dims[1])
                ws++;
            if (t.rank != 2 || t.dims[0] < 1 || t.dims[0] > SAM_MAX_HEADS ||
                tv->dims[s] % t.dims[0] || ws * ws != t.dims[1] ||
                sam_tinyvit_bias_index(ws, NULL) != t.dims[1]) {
                dims_str(t.rank < 0 || t.rank > RLX_SAM_MAX_DIMS ? 0 : t.rank, t.dims, a, sizeof a);
                return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                     "%s: '%s' is %s; it must be [heads, window * window] with "
                                     "heads dividing %d and a window of at most %d",
                                     src->what, nm, a, tv->dims[s], SAM_TV_MAX_WIN);
            }
            tv->heads[s] = (int)t.dims[0];
            tv->windows[s] = ws;
        }
        if (tv->depths[s] == 0)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s cannot be used as MobileSAM: it has no tensor '%s'", src->what,
                                 nm);
    }
    /* the grid through the stages: 1024 / 4, then each PatchMerging's stride */
    int side = SAM_TV_SIDE;
    for (int s = 0; s + 1 < SAM_TV_STAGES; s++)
        side = (side - 1) / sam_tinyvit_merge_stride(tv->dims[s + 1]) + 1;
    if (side != RLX_SAM_EMBED_SIDE)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: a TinyViT with widths %d, %d, %d, %d ends on a %d x %d grid; "
                             "the mask decoder needs 64 x 64",
                             src->what, tv->dims[0], tv->dims[1], tv->dims[2], tv->dims[3], side,
                             side);
    return RLX_OK;
}

static bool float_dtype(rlx_dtype dt)
{
    return dt == RLX_DTYPE_F32 || dt == RLX_DTYPE_F16 || dt == RLX_DTYPE_BF16;
}

static rlx_status load_weights(rlx_sam *sam, const source *src, rlx_error **err)
{
    sam_model *m = &sam->m;
    char used[SAM_NAME_MAX], want[64], have[64];
    for (int i = 0; i < m->n_w; i++) {
        sam_weight *w = &m->w[i];
        rlx_sam_tensor t;
        dims_str(w->rank, w->dims, want, sizeof want);
        if (!find(src, w->name, &t, used, sizeof used))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s cannot be used as SAM: it has no tensor '%s' %s", src->what,
                                 used, want);
        bool same = t.rank == w->rank;
        for (int d = 0; same && d < w->rank; d++)
            same = t.dims[d] == w->dims[d];
        if (!same) {
            dims_str(t.rank < 0                  ? 0
                     : t.rank > RLX_SAM_MAX_DIMS ? RLX_SAM_MAX_DIMS
                                                 : t.rank,
                     t.dims, have, sizeof have);
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s cannot be used as SAM: tensor '%s' is %s, expected %s",
                                 src->what, used, have, want);
        }
        if (!float_dtype(t.dtype))
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' is %s; SAM weights must be F32, F16 or BF16",
                                 src->what, used, rlx_dtype_name(t.dtype));
        uint64_t n = 1;
        for (int d = 0; d < w->rank; d++)
            n *= (uint64_t)w->dims[d];
        uint64_t need = n * (t.dtype == RLX_DTYPE_F32 ? 4u : 2u);
        if (!t.data || t.n_bytes != need)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: tensor '%s' holds %llu bytes, expected %llu", src->what, used,
                                 (unsigned long long)t.n_bytes, (unsigned long long)need);
        w->dtype = t.dtype;
        rlx_status st = rlx_session_add_weight(sam->s, w->name, t.dtype, w->rank, w->dims, t.data,
                                               t.n_bytes, err);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

rlx_status rlx_sam_create(const rlx_sam_params *p, rlx_sam_lookup_fn lookup, void *user,
                          const char *what, rlx_sam **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || !lookup)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_sam_create: missing argument");
    rlx_sam_params dp = rlx_sam_default_params();
    if (!p)
        p = &dp;
    source src = {.fn = lookup, .user = user, .what = what ? what : "the SAM weights"};
    rlx_sam_tensor t;
    /* SAM 2 (Hiera) and MobileSAM (TinyViT) by their first tensors; else the naming
     * scheme of SAM v1, from the first tensor of either */
    bool sam2 = lookup(user, "image_encoder.trunk.patch_embed.proj.weight", &t);
    if (!sam2 && lookup(user, "vision_encoder.backbone.patch_embed.projection.weight", &t))
        sam2 = src.hf = src.sam2 = true; /* transformers' Sam2Model */
    bool tiny = !sam2 && lookup(user, "image_encoder.patch_embed.seq.0.c.weight", &t);
    if (!sam2 && !tiny && !lookup(user, "image_encoder.patch_embed.proj.weight", &t)) {
        /* SAM v1 */
        if (lookup(user, "vision_encoder.patch_embed.projection.weight", &t))
            src.hf = true;
        else
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s is not a SAM checkpoint: it has neither "
                                 "'image_encoder.patch_embed.proj.weight' nor the Hugging Face "
                                 "'vision_encoder.patch_embed.projection.weight' (nor "
                                 "MobileSAM's 'image_encoder.patch_embed.seq.0.c.weight', nor "
                                 "SAM 2's 'image_encoder.trunk.patch_embed.proj.weight' or "
                                 "'vision_encoder.backbone.patch_embed.projection.weight')",
                                 src.what);
    }
    rlx_sam *sam = calloc(1, sizeof *sam);
    if (!sam)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating the SAM runner");
    sam->hf = src.hf;
    sam->m.chunk_bytes = p->attention_chunk_bytes ? p->attention_chunk_bytes : SAM_CHUNK_DEFAULT;
    rlx_status st;
    if (sam2) {
        sam->m.kind = SAM_KIND_SAM2;
        st = sam2_read_hparams(lookup, user, src.hf, src.what, &sam->m.h2, err);
    } else {
        sam->m.enc = tiny ? SAM_ENCODER_TINYVIT : SAM_ENCODER_VIT;
        st = tiny ? read_tinyvit(&src, &sam->m.tv, err) : read_hparams(&src, &sam->m.hp, err);
    }
    if (st == RLX_OK)
        st = sam_list_weights(&sam->m, err);
    if (st == RLX_OK) {
        sam->masks = malloc(sizeof(float) * RLX_SAM_MAX_MASKS * MASK_PIX);
        if (!sam->masks)
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating the SAM runner");
    }
    if (st == RLX_OK) {
        rlx_session_params sp = rlx_session_default_params();
        sp.device = p->device ? p->device : "cpu";
        sp.n_threads = p->n_threads;
        sp.memory_budget = p->memory_budget;
        sp.force_f32 = p->force_f32;
        sp.max_binding_bytes = p->max_binding_bytes;
        st = rlx_session_create(&sp, &sam->s, err);
    }
    if (st == RLX_OK)
        st = load_weights(sam, &src, err);
    if (st != RLX_OK) {
        rlx_sam_free(sam);
        return st;
    }
    *out = sam;
    return RLX_OK;
}

static bool st_lookup(void *user, const char *name, rlx_sam_tensor *out)
{
    const rlx_safetensors *st = user;
    const rlx_st_tensor *t = rlx_safetensors_find(st, name);
    if (!t)
        return false;
    out->dtype = t->dtype;
    out->rank = (int)(t->n_dims > RLX_SAM_MAX_DIMS ? RLX_SAM_MAX_DIMS + 1 : t->n_dims);
    for (int i = 0; i < RLX_SAM_MAX_DIMS && i < (int)t->n_dims; i++)
        out->dims[i] = (int64_t)t->shape[i];
    out->data = rlx_safetensors_data(st, t);
    out->n_bytes = t->n_bytes;
    return true;
}

rlx_status rlx_sam_create_file(const rlx_sam_params *p, const char *path, rlx_sam **out,
                               rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_sam_create_file: missing argument");
    rlx_safetensors *st = NULL;
    rlx_status s = rlx_safetensors_open(path, &st, err);
    if (s != RLX_OK) {
        rlx_error_prefix(err, "SAM: ");
        return s;
    }
    s = rlx_sam_create(p, st_lookup, st, path, out, err);
    if (s != RLX_OK) {
        rlx_safetensors_close(st);
        return s;
    }
    (*out)->st = st;
    return RLX_OK;
}

void rlx_sam_free(rlx_sam *sam)
{
    if (!sam)
        return;
    rlx_session_free(sam->s); /* borrows the mapped weights: first */
    rlx_safetensors_close(sam->st);
    free(sam->m.w);
    free(sam->masks);
    free(sam);
}

rlx_session *rlx_sam_session(rlx_sam *sam)
{
    return sam ? sam->s : NULL;
}

rlx_status rlx_sam_info_get(const rlx_sam *sam, rlx_sam_info *out, rlx_error **err)
{
    if (!sam || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_sam_info_get: missing argument");
    memset(out, 0, sizeof *out);
    out->hf_names = sam->hf;
    if (sam->m.kind == SAM_KIND_SAM2) {
        const sam2_hparams *h = &sam->m.h2;
        out->variant = h->variant;
        out->embed_dim = h->embed;
        out->depth = h->depth;
        out->heads = h->blk[0].heads;
        out->window = h->win0;
        for (int i = 0; i < h->depth && out->n_global < 64; i++)
            if (h->blk[i].window == 0)
                out->global[out->n_global++] = i;
        out->sam2 = true;
        out->encoder = "hiera";
        return RLX_OK;
    }
    if (sam->m.enc == SAM_ENCODER_TINYVIT) {
        const sam_tinyvit *tv = &sam->m.tv;
        static const sam_tinyvit mobile = {
            .dims = {64, 128, 160, 320}, .depths = {2, 2, 6, 2}, .heads = {0, 4, 5, 10}};
        out->encoder = "tinyvit";
        out->embed_dim = tv->dims[SAM_TV_STAGES - 1];
        out->heads = tv->heads[SAM_TV_STAGES - 1];
        out->window = tv->windows[SAM_TV_STAGES - 1];
        bool same = tv->windows[1] == 7 && tv->windows[2] == 14 && tv->windows[3] == 7;
        for (int s = 0; s < SAM_TV_STAGES; s++) {
            out->depth += tv->depths[s];
            same = same && tv->dims[s] == mobile.dims[s] && tv->depths[s] == mobile.depths[s] &&
                   (s == 0 || tv->heads[s] == mobile.heads[s]);
        }
        out->variant = same ? "mobile_sam" : "custom";
        return RLX_OK;
    }
    out->encoder = "vit";
    const sam_hparams *hp = &sam->m.hp;
    out->embed_dim = hp->dim;
    out->depth = hp->depth;
    out->heads = hp->heads;
    for (int i = 0; i < hp->depth; i++) {
        if (hp->window[i] == 0) {
            if (out->n_global < 64)
                out->global[out->n_global++] = i;
        } else {
            out->window = hp->window[i];
        }
    }
    out->variant = "custom";
    static const struct {
        const char *name;
        int dim, depth, heads, g[4];
    } known[] = {{"vit_b", 768, 12, 12, {2, 5, 8, 11}},
                 {"vit_l", 1024, 24, 16, {5, 11, 17, 23}},
                 {"vit_h", 1280, 32, 16, {7, 15, 23, 31}}};
    for (int k = 0; k < 3; k++) {
        bool same = known[k].dim == hp->dim && known[k].depth == hp->depth &&
                    known[k].heads == hp->heads && out->n_global == 4 && out->window == 14;
        for (int j = 0; same && j < 4; j++)
            same = out->global[j] == known[k].g[j];
        if (same)
            out->variant = known[k].name;
    }
    return RLX_OK;
}

rlx_status rlx_sam_encode(rlx_sam *sam, const float *chw, rlx_error **err)
{
    if (!sam || !chw)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_sam_encode: missing argument");
    rlx_status st;
    if (!sam->enc) {
        rlx_graph *g = NULL;
        st = sam->m.kind == SAM_KIND_SAM2 ? sam2_build_encoder(&sam->m, &g, err)
                                          : sam_build_encoder(&sam->m, &g, err);
        if (st != RLX_OK)
            return st;
        st = rlx_session_compile(sam->s, g, &sam->enc, err);
        rlx_graph_free(g);
        if (st != RLX_OK) {
            rlx_error_prefix(err, "SAM image encoder: ");
            return st;
        }
    }
    float probe = 0.0f;
    const void *ins[1] = {chw};
    void *outs[1] = {&probe};
    rlx_sym_values sv = {{0}};
    sam->encoded = false;
    st = rlx_session_run(sam->s, sam->enc, &sv, ins, outs, err);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "SAM image encoder: ");
        return st;
    }
    sam->encoded = true;
    return RLX_OK;
}

rlx_status rlx_sam_embedding(rlx_sam *sam, float *chw_out, rlx_error **err)
{
    if (!sam || !chw_out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_sam_embedding: missing argument");
    if (!sam->encoded)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "SAM: no image has been encoded yet");
    const size_t n = (size_t)NTOK * RLX_SAM_EMBED_DIM;
    float *tok = malloc(sizeof *tok * n);
    if (!tok)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading the SAM embedding");
    rlx_status st =
        rlx_session_state_read(sam->s, SAM_STATE_EMBEDDING, 0, tok, sizeof *tok * n, err);
    if (st == RLX_OK)
        for (int t = 0; t < NTOK; t++)
            for (int c = 0; c < RLX_SAM_EMBED_DIM; c++)
                chw_out[(size_t)c * NTOK + (size_t)t] = tok[(size_t)t * RLX_SAM_EMBED_DIM + c];
    free(tok);
    return st;
}

static rlx_status decoder_for(rlx_sam *sam, int n, bool mask, rlx_session_program **out,
                              rlx_error **err)
{
    rlx_session_program **slot = &sam->dec[mask][n];
    if (*slot) {
        *out = *slot;
        return RLX_OK;
    }
    rlx_graph *g = NULL;
    rlx_status st = sam->m.kind == SAM_KIND_SAM2 ? sam2_build_decoder(&sam->m, n, mask, &g, err)
                                                 : sam_build_decoder(&sam->m, n, mask, &g, err);
    if (st != RLX_OK)
        return st;
    st = rlx_session_compile(sam->s, g, slot, err);
    rlx_graph_free(g);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "SAM mask decoder: ");
        return st;
    }
    *out = *slot;
    return RLX_OK;
}

rlx_status rlx_sam_decode(rlx_sam *sam, const rlx_sam_prompt *pr, bool multimask,
                          float *low_res_masks, float *iou, int *n_out, rlx_error **err)
{
    if (n_out)
        *n_out = 0;
    if (!sam || !pr || !low_res_masks || !iou)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_sam_decode: missing argument");
    if (!sam->encoded)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "SAM: encode an image before asking for masks");
    if (pr->n_points < 0 || pr->n_points > RLX_SAM_MAX_POINTS || (pr->n_points && !pr->points))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "SAM: a prompt holds 0 to %d points, not %d",
                             RLX_SAM_MAX_POINTS, pr->n_points);
    if (pr->n_points == 0 && !pr->has_box)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "SAM: a prompt needs at least one point or a box");
    float coords[MAX_TOKS * 2];
    int32_t kinds[MAX_TOKS];
    int n = 0;
    for (int i = 0; i < pr->n_points; i++) {
        const rlx_sam_point *q = &pr->points[i];
        if (q->label != RLX_SAM_NEGATIVE && q->label != RLX_SAM_POSITIVE)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "SAM: point %d has label %d; labels are 0 (background) or 1 "
                                 "(foreground)",
                                 i, q->label);
    }
    const bool sam2 = sam->m.kind == SAM_KIND_SAM2;
    /* SAM2ImagePredictor puts the box corners before the clicks */
    if (sam2 && pr->has_box)
        for (int c = 0; c < 2; c++) {
            coords[2 * n] = pr->box[2 * c];
            coords[2 * n + 1] = pr->box[2 * c + 1];
            kinds[n++] = 3 + c;
        }
    for (int i = 0; i < pr->n_points; i++) {
        coords[2 * n] = pr->points[i].x;
        coords[2 * n + 1] = pr->points[i].y;
        kinds[n++] = pr->points[i].label + 1;
    }
    if (!sam2 && pr->has_box) {
        for (int c = 0; c < 2; c++) {
            coords[2 * n] = pr->box[2 * c];
            coords[2 * n + 1] = pr->box[2 * c + 1];
            kinds[n++] = 3 + c;
        }
    }
    if (!pr->has_box || sam2) {
        /* SAM pads the points with a "not a point" when there is no box; SAM 2's
         * predictor hands the box over as points, so it always pads */
        coords[2 * n] = 0.0f;
        coords[2 * n + 1] = 0.0f;
        kinds[n++] = 0;
    }
    const bool mask = pr->mask_input != NULL;
    if (mask)
        for (int p = 0; p < MASK_PIX; p++)
            if (!isfinite(pr->mask_input[p]))
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "SAM: the mask prompt holds a value that is not a finite "
                                     "number (at x %d, y %d)",
                                     p % RLX_SAM_MASK_SIDE, p / RLX_SAM_MASK_SIDE);
    rlx_session_program *prog = NULL;
    rlx_status st = decoder_for(sam, n, mask, &prog, err);
    if (st != RLX_OK)
        return st;
    const int n_outs = sam2 ? 3 : 2, n_ins = mask ? 3 : 2;
    int ic = rlx_session_program_input(prog, "coords"),
        ik = rlx_session_program_input(prog, "kinds"),
        ix = mask ? rlx_session_program_input(prog, "mask") : -1;
    if (mask && (ix < 0 || ix >= n_ins || ix == ic || ix == ik))
        return rlx_error_set(err, RLX_ERR_INTERNAL,
                             "SAM mask decoder: the compiled program has unexpected bindings");
    int om = rlx_session_program_output(prog, "masks"),
        oi = rlx_session_program_output(prog, "iou"),
        oo = sam2 ? rlx_session_program_output(prog, "object") : -1;
    if (ic < 0 || ik < 0 || ic >= n_ins || ik >= n_ins || ic == ik || om < 0 || oi < 0 ||
        om >= n_outs || oi >= n_outs || om == oi ||
        (sam2 && (oo < 0 || oo >= n_outs || oo == om || oo == oi)))
        return rlx_error_set(err, RLX_ERR_INTERNAL,
                             "SAM mask decoder: the compiled program has unexpected bindings");
    float all_iou[RLX_SAM_MAX_MASKS], object = 0.0f;
    const void *ins[3];
    void *outs[3];
    ins[ic] = coords;
    ins[ik] = kinds;
    if (mask)
        ins[ix] = pr->mask_input;
    outs[om] = sam->masks;
    outs[oi] = all_iou;
    if (sam2)
        outs[oo] = &object;
    rlx_sym_values sv = {{0}};
    st = rlx_session_run(sam->s, prog, &sv, ins, outs, err);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "SAM mask decoder: ");
        return st;
    }
    sam->object = object;
    int first = multimask ? 1 : 0, count = multimask ? RLX_SAM_MAX_MASKS - 1 : 1;
    if (sam2 && !multimask) {
        /* MaskDecoder._dynamic_multimask_via_stability (SAM 2.1's predictor turns it
         * on): when the single mask's logits are unstable around 0 (area above +0.05
         * over area above -0.05 under 0.98), the multimask output with the best
         * predicted IoU is given instead. A selection among the decoder's outputs. */
        int64_t area_i = 0, area_u = 0;
        for (int p = 0; p < MASK_PIX; p++) {
            area_i += sam->masks[p] > SAM2_STABILITY_DELTA;
            area_u += sam->masks[p] > -SAM2_STABILITY_DELTA;
        }
        double stability = area_u > 0 ? (double)area_i / (double)area_u : 1.0;
        if (stability < SAM2_STABILITY_THRESH) {
            first = 1;
            for (int k = 2; k < RLX_SAM_MAX_MASKS; k++)
                if (all_iou[k] > all_iou[first])
                    first = k;
        }
    }
    memcpy(low_res_masks, sam->masks + (size_t)first * MASK_PIX,
           sizeof(float) * MASK_PIX * (size_t)count);
    memcpy(iou, all_iou + first, sizeof(float) * (size_t)count);
    if (n_out)
        *n_out = count;
    return RLX_OK;
}

rlx_status rlx_sam_object_score(const rlx_sam *sam, float *logit, rlx_error **err)
{
    if (!sam || !logit)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_sam_object_score: missing argument");
    if (sam->m.kind != SAM_KIND_SAM2)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "SAM: this model has no object score (SAM 2 models have one)");
    *logit = sam->object;
    return RLX_OK;
}
