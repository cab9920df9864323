/* The random-weight SAM of tests/reference/sam_reference.py as safetensors or
 * as torch.save writes it. */
#include "name-hash.h"
#include "sam-writer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/base/dtype.h"
#include "models/sam/sam-internal.h"
#include "torch-writer.h"

#define IMG 1024

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The value kinds of sam_reference.py's make(). */
static void fill(const sam_weight *w, float *dst)
{
    static const char *const emb[] = {"pos_embed",        "rel_pos_h",         "rel_pos_w",
                                      "point_embeddings", "not_a_point_embed", "no_mask_embed",
                                      "iou_token",        "mask_tokens",       "obj_score_token",
                                      "no_mem_embed",     "attention_biases"};
    static const char *const lnw[] = {"norm1.weight",
                                      "norm2.weight",
                                      "norm3.weight",
                                      "norm4.weight",
                                      "norm_final_attn.weight",
                                      "neck.1.weight",
                                      "neck.3.weight",
                                      "output_upscaling.1.weight",
                                      ".norm.weight",
                                      "norm_head.weight",
                                      "bn.weight",
                                      "mask_downscaling.1.weight",
                                      "mask_downscaling.4.weight"};
    int64_t n = 1;
    for (int d = 0; d < w->rank; d++)
        n *= w->dims[d];
    uint64_t seed = rlx_test_fnv1a64(w->name);
    /* 0 matrix, 1 bias, 2 ln / bn weight, 3 embedding, 4 gaussian, 5 bn mean, 6 bn var */
    int kind = 0;
    if (ends_with(w->name, ".bias"))
        kind = 1;
    if (ends_with(w->name, ".running_mean"))
        kind = 5;
    if (ends_with(w->name, ".running_var"))
        kind = 6;
    for (size_t i = 0; !kind && i < sizeof lnw / sizeof lnw[0]; i++)
        if (ends_with(w->name, lnw[i]))
            kind = 2;
    for (size_t i = 0; !kind && i < sizeof emb / sizeof emb[0]; i++)
        if (strstr(w->name, emb[i]))
            kind = 3;
    if (!kind && ends_with(w->name, "positional_encoding_gaussian_matrix"))
        kind = 4;
    float scale = 0.0f;
    if (kind == 0) {
        int64_t fan_in = w->rank == 4 ? w->dims[1] * w->dims[2] * w->dims[3] : w->dims[1];
        if (strstr(w->name, "output_upscaling"))
            fan_in = w->dims[0];
        scale = (float)sqrt(3.0 / (double)fan_in);
    }
    for (int64_t i = 0; i < n; i++) {
        float u = rlx_test_uniform(seed, i);
        switch (kind) {
        case 0:
            dst[i] = u * scale;
            break;
        case 1:
            dst[i] = u * 0.0625f;
            break;
        case 2:
            dst[i] = 1.0f + u * 0.125f;
            break;
        case 3:
            dst[i] = u * 0.5f;
            break;
        case 5:
            dst[i] = u * 0.25f;
            break;
        case 6:
            dst[i] = 1.0f + u * 0.5f; /* positive: [0.5, 1.5) */
            break;
        default:
            dst[i] = u;
            break;
        }
    }
}

void rlx_sam_writer_image(float *chw)
{
    uint64_t seed = rlx_test_fnv1a64("image");
    for (int64_t i = 0; i < 3 * (int64_t)IMG * IMG; i++)
        chw[i] = rlx_test_uniform(seed, i);
}

/* SamMaskEmbedding's parts for the layers of segment_anything's mask_downscaling
 * Sequential (2, 5: the GELUs, which hold no tensors). */
static const char *mask_embed_part(int k)
{
    static const char *const parts[7] = {"conv1",       "layer_norm1", "?",    "conv2",
                                         "layer_norm2", "?",           "conv3"};
    return k >= 0 && k < 7 ? parts[k] : "?";
}

/* Written from transformers' SamModel layout, part by part. */
void rlx_sam_writer_hf_name(const char *o, char *out, size_t cap)
{
    int n = 0, k = 0, pos = 0;
    char rest[SAM_NAME_MAX];
    if (strcmp(o, "prompt_encoder.pe_layer.positional_encoding_gaussian_matrix") == 0) {
        /* SamModel's own copy (the prompt encoder's is tied to it) */
        snprintf(out, cap, "shared_image_embedding.positional_embedding");
    } else if (sscanf(o, "image_encoder.patch_embed.proj.%100s", rest) == 1) {
        snprintf(out, cap, "vision_encoder.patch_embed.projection.%s", rest);
    } else if (sscanf(o, "image_encoder.blocks.%d.norm%d.%100s", &n, &k, rest) == 3) {
        snprintf(out, cap, "vision_encoder.layers.%d.layer_norm%d.%s", n, k, rest);
    } else if (sscanf(o, "image_encoder.blocks.%d.%100s", &n, rest) == 2) {
        snprintf(out, cap, "vision_encoder.layers.%d.%s", n, rest);
    } else if (sscanf(o, "image_encoder.neck.%d.%100s", &k, rest) == 2) {
        static const char *const neck[4] = {"conv1", "layer_norm1", "conv2", "layer_norm2"};
        snprintf(out, cap, "vision_encoder.neck.%s.%s", neck[k & 3], rest);
    } else if (strncmp(o, "image_encoder.", 14) == 0) {
        snprintf(out, cap, "vision_encoder.%s", o + 14);
    } else if (sscanf(o, "prompt_encoder.mask_downscaling.%d.%100s", &k, rest) == 2) {
        snprintf(out, cap, "prompt_encoder.mask_embed.%s.%s", mask_embed_part(k), rest);
    } else if (sscanf(o, "prompt_encoder.point_embeddings.%d.%100s", &k, rest) == 2) {
        snprintf(out, cap, "prompt_encoder.point_embed.%d.%s", k, rest);
    } else if (sscanf(o, "mask_decoder.transformer.layers.%d.norm%d.%100s", &n, &k, rest) == 3) {
        snprintf(out, cap, "mask_decoder.transformer.layers.%d.layer_norm%d.%s", n, k, rest);
    } else if (sscanf(o, "mask_decoder.transformer.norm_final_attn.%100s", rest) == 1) {
        snprintf(out, cap, "mask_decoder.transformer.layer_norm_final_attn.%s", rest);
    } else if (sscanf(o, "mask_decoder.output_upscaling.%d.%100s", &k, rest) == 2) {
        snprintf(out, cap, "mask_decoder.%s.%s",
                 k == 0   ? "upscale_conv1"
                 : k == 1 ? "upscale_layer_norm"
                          : "upscale_conv2",
                 rest);
    } else if (sscanf(o, "mask_decoder.output_hypernetworks_mlps.%d.layers.%d.%100s", &n, &k,
                      rest) == 3) {
        snprintf(out, cap, "mask_decoder.output_hypernetworks_mlps.%d.%s.%s", n,
                 k == 0   ? "proj_in"
                 : k == 1 ? "layers.0"
                          : "proj_out",
                 rest);
    } else if (sscanf(o, "mask_decoder.iou_prediction_head.layers.%d.%100s", &k, rest) == 2) {
        snprintf(out, cap, "mask_decoder.iou_prediction_head.%s.%s",
                 k == 0   ? "proj_in"
                 : k == 1 ? "layers.0"
                          : "proj_out",
                 rest);
    } else {
        snprintf(out, cap, "%s", o);
    }
    (void)pos;
}

/* The name transformers' Sam2Model gives a SAM 2 tensor, written part by part from
 * its convert_sam2_to_hf.py (the test's own mapping, independent of sam2.c's rule
 * table). The four point_embeddings.<i> are stacked into one tensor (written by
 * rlx_sam_writer_write). */
static void sam2_hf_name_of(const char *o, char *out, size_t cap)
{
    int n = 0, k = 0;
    char a[SAM_NAME_MAX], rest[SAM_NAME_MAX];
    static const char *const three[3] = {"proj_in", "layers.0", "proj_out"};
    static const char *const two[2] = {"proj_in", "proj_out"};
    static const char *const up[4] = {"upscale_conv1", "upscale_layer_norm", "", "upscale_conv2"};
    const char *tb = "image_encoder.trunk.blocks.", *md = "sam_mask_decoder.";
    if (sscanf(o, "image_encoder.trunk.patch_embed.proj.%100s", rest) == 1) {
        snprintf(out, cap, "vision_encoder.backbone.patch_embed.projection.%s", rest);
    } else if (sscanf(o, "image_encoder.trunk.blocks.%d.norm%d.%100s", &n, &k, rest) == 3) {
        snprintf(out, cap, "vision_encoder.backbone.blocks.%d.layer_norm%d.%s", n, k, rest);
    } else if (sscanf(o, "image_encoder.trunk.blocks.%d.mlp.layers.%d.%100s", &n, &k, rest) == 3) {
        snprintf(out, cap, "vision_encoder.backbone.blocks.%d.mlp.%s.%s", n, two[k & 1], rest);
    } else if (strncmp(o, tb, strlen(tb)) == 0) {
        snprintf(out, cap, "vision_encoder.backbone.blocks.%s", o + strlen(tb));
    } else if (strncmp(o, "image_encoder.trunk.", 20) == 0) {
        snprintf(out, cap, "vision_encoder.backbone.%s", o + 20);
    } else if (sscanf(o, "image_encoder.neck.convs.%d.conv.%100s", &k, rest) == 2) {
        snprintf(out, cap, "vision_encoder.neck.convs.%d.%s", k, rest);
    } else if (strcmp(o, "no_mem_embed") == 0) {
        snprintf(out, cap, "no_memory_embedding");
    } else if (strcmp(o, "sam_prompt_encoder.pe_layer.positional_encoding_gaussian_matrix") == 0) {
        snprintf(out, cap, "prompt_encoder.shared_embedding.positional_embedding");
    } else if (sscanf(o, "sam_prompt_encoder.mask_downscaling.%d.%100s", &k, rest) == 2) {
        snprintf(out, cap, "prompt_encoder.mask_embed.%s.%s", mask_embed_part(k), rest);
    } else if (strncmp(o, "sam_prompt_encoder.", 19) == 0) {
        snprintf(out, cap, "prompt_encoder.%s", o + 19);
    } else if (sscanf(o, "sam_mask_decoder.transformer.layers.%d.norm%d.%100s", &n, &k, rest) ==
               3) {
        snprintf(out, cap, "mask_decoder.transformer.layers.%d.layer_norm%d.%s", n, k, rest);
    } else if (sscanf(o, "sam_mask_decoder.transformer.layers.%d.mlp.layers.%d.%100s", &n, &k,
                      rest) == 3) {
        snprintf(out, cap, "mask_decoder.transformer.layers.%d.mlp.%s.%s", n, two[k & 1], rest);
    } else if (sscanf(o, "sam_mask_decoder.transformer.layers.%d.%100[^.].out_proj.%100s", &n, a,
                      rest) == 3) {
        snprintf(out, cap, "mask_decoder.transformer.layers.%d.%s.o_proj.%s", n, a, rest);
    } else if (sscanf(o, "sam_mask_decoder.transformer.final_attn_token_to_image.out_proj.%100s",
                      rest) == 1) {
        snprintf(out, cap, "mask_decoder.transformer.final_attn_token_to_image.o_proj.%s", rest);
    } else if (sscanf(o, "sam_mask_decoder.transformer.norm_final_attn.%100s", rest) == 1) {
        snprintf(out, cap, "mask_decoder.transformer.layer_norm_final_attn.%s", rest);
    } else if (sscanf(o, "sam_mask_decoder.output_upscaling.%d.%100s", &k, rest) == 2) {
        snprintf(out, cap, "mask_decoder.%s.%s", up[k & 3], rest);
    } else if (sscanf(o, "sam_mask_decoder.output_hypernetworks_mlps.%d.layers.%d.%100s", &n, &k,
                      rest) == 3) {
        snprintf(out, cap, "mask_decoder.output_hypernetworks_mlps.%d.%s.%s", n, three[k % 3],
                 rest);
    } else if (sscanf(o, "sam_mask_decoder.%100[a-z_].layers.%d.%100s", a, &k, rest) == 3 &&
               (!strcmp(a, "iou_prediction_head") || !strcmp(a, "pred_obj_score_head"))) {
        snprintf(out, cap, "mask_decoder.%s.%s.%s", a, three[k % 3], rest); /* iou, obj score */
    } else if (strncmp(o, md, strlen(md)) == 0) {
        snprintf(out, cap, "mask_decoder.%s", o + strlen(md));
    } else {
        snprintf(out, cap, "%s", o);
    }
}

/* The dims a weight is written with (o->misshape's reversed) and its count. */
static int weight_dims(const rlx_sam_writer_opts *o, const sam_weight *w, int64_t *dims,
                       uint64_t *n)
{
    int rank = w->rank;
    *n = 1;
    for (int d = 0; d < rank; d++) {
        dims[d] = w->dims[d];
        *n *= (uint64_t)w->dims[d];
    }
    if (o->misshape && strcmp(o->misshape, w->name) == 0) {
        if (rank == 1)
            dims[rank++] = 1;
        else
            for (int d = 0; d < rank / 2; d++) {
                int64_t t = dims[d];
                dims[d] = dims[rank - 1 - d];
                dims[rank - 1 - d] = t;
            }
    }
    return rank;
}

/* mobile_sam.pt also holds tensors the runner never reads: each BatchNorm's
 * num_batches_tracked (an I64 scalar) and TinyViT's classifier (norm_head, head),
 * which MobileSAM's strict load_state_dict requires; written in state-dict order.
 * (attention_bias_idxs is a non-persistent buffer: not in the file.) */
static rlx_status add_unread(sam_model *m, rlx_error **err)
{
    if (m->enc != SAM_ENCODER_TINYVIT)
        return RLX_OK;
    int n_bn = 0;
    for (int i = 0; i < m->n_w; i++)
        n_bn += ends_with(m->w[i].name, ".bn.running_var");
    sam_weight *w = calloc((size_t)(m->n_w + n_bn + 4), sizeof *w);
    if (!w)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    int n = 0;
    const int64_t dim = m->tv.dims[SAM_TV_STAGES - 1];
    for (int i = 0; i < m->n_w; i++) {
        if (strcmp(m->w[i].name, "image_encoder.neck.0.weight") == 0) {
            static const char *const head[4] = {"norm_head.weight", "norm_head.bias", "head.weight",
                                                "head.bias"};
            for (int k = 0; k < 4; k++) {
                sam_weight *h = &w[n++];
                snprintf(h->name, sizeof h->name, "image_encoder.%s", head[k]);
                snprintf(h->hf, sizeof h->hf, "%s", h->name);
                h->dtype = RLX_DTYPE_F32;
                h->rank = k == 2 ? 2 : 1;
                h->dims[0] = k < 2 ? dim : 1000;
                h->dims[1] = dim;
            }
        }
        w[n++] = m->w[i];
        if (ends_with(m->w[i].name, ".bn.running_var")) {
            sam_weight *t = &w[n++];
            *t = m->w[i];
            size_t len = strlen(t->name) - strlen("running_var");
            snprintf(t->name + len, sizeof t->name - len, "num_batches_tracked");
            snprintf(t->hf, sizeof t->hf, "%s", t->name);
            t->dtype = RLX_DTYPE_I64;
            t->rank = 0;
        }
    }
    free(m->w);
    m->w = w;
    m->n_w = n;
    return RLX_OK;
}

/* The same tensors as torch.save(OrderedDict) would write them, under the
 * archive folder torch names after the file ("sam_vit_b_01ec64.pth" ->
 * "sam_vit_b_01ec64/"). */
static rlx_status write_torch(const char *path, const rlx_sam_writer_opts *o, const sam_model *m,
                              float *buf, rlx_error **err)
{
    char prefix[256];
    const char *base = strrchr(path, '/');
    snprintf(prefix, sizeof prefix, "%s", base ? base + 1 : path);
    char *dot = strrchr(prefix, '.');
    if (dot && dot != prefix)
        *dot = '\0';
    if (!*prefix)
        snprintf(prefix, sizeof prefix, "archive");
    rlx_torch_writer *tw = NULL;
    rlx_status st = rlx_torch_writer_create(path, prefix, &tw, err);
    for (int i = 0; st == RLX_OK && i < m->n_w; i++) {
        const sam_weight *w = &m->w[i];
        if (o->skip && strcmp(o->skip, w->name) == 0)
            continue;
        char name[SAM_NAME_MAX];
        if (o->hf_names)
            rlx_sam_writer_hf_name(w->name, name, sizeof name);
        else
            snprintf(name, sizeof name, "%s", w->name);
        int64_t dims[RLX_SAM_MAX_DIMS + 1];
        uint64_t n = 1;
        int rank = weight_dims(o, w, dims, &n);
        if (w->dtype == RLX_DTYPE_I64) {
            int64_t zero = 0; /* num_batches_tracked: never read */
            st = rlx_torch_writer_add(tw, name, RLX_DTYPE_I64, 0, dims, &zero, err);
            continue;
        }
        fill(w, buf);
        st = rlx_torch_writer_add(tw, name, RLX_DTYPE_F32, rank, dims, buf, err);
    }
    if (tw && st == RLX_OK)
        return rlx_torch_writer_finish(tw, err);
    rlx_torch_writer_free(tw);
    return st;
}

/* SAM 2 under Hugging Face names: the row of a point_embeddings.<i> weight in
 * Sam2Model's stacked prompt_encoder.point_embed.weight, else -1. */
static int stacked_row(const rlx_sam_writer_opts *o, const sam_model *m, const sam_weight *w)
{
    int k = -1;
    if (!o->hf_names || m->kind != SAM_KIND_SAM2 ||
        sscanf(w->name, "sam_prompt_encoder.point_embeddings.%d.weight", &k) != 1)
        return -1;
    return k;
}

/* The image encoder's shapes for a layout name; false when unknown. */
static bool set_layout(const char *name, sam_model *m)
{
    if (strcmp(name, "mobile_sam") == 0) { /* build_sam_vit_t */
        m->enc = SAM_ENCODER_TINYVIT;
        m->tv = (sam_tinyvit){.dims = {64, 128, 160, 320},
                              .depths = {2, 2, 6, 2},
                              .heads = {2, 4, 5, 10},
                              .windows = {7, 7, 14, 7}};
        return true;
    }
    sam_hparams *hp = &m->hp;
    static const struct {
        const char *name;
        int dim, depth, heads, global[4];
    } L[] = {{"test", 64, 4, 2, {1, 3, -1, -1}},
             {"vit_b", 768, 12, 12, {2, 5, 8, 11}},
             {"vit_l", 1024, 24, 16, {5, 11, 17, 23}},
             {"vit_h", 1280, 32, 16, {7, 15, 23, 31}}};
    for (size_t k = 0; k < sizeof L / sizeof L[0]; k++) {
        if (strcmp(name, L[k].name) != 0)
            continue;
        memset(hp, 0, sizeof *hp);
        hp->dim = L[k].dim;
        hp->depth = L[k].depth;
        hp->heads = L[k].heads;
        hp->head_dim = L[k].dim / L[k].heads;
        for (int i = 0; i < hp->depth; i++) {
            hp->window[i] = 14;
            for (int j = 0; j < 4; j++)
                if (L[k].global[j] == i)
                    hp->window[i] = 0;
        }
        return true;
    }
    return false;
}

rlx_status rlx_sam_writer_write(const char *path, const rlx_sam_writer_opts *o, rlx_error **err)
{
    rlx_sam_writer_opts none = {0};
    if (!o)
        o = &none;
    sam_model m = {0};
    const char *layout = o->layout ? o->layout : "test";
    if (sam2_set_variant(&m.h2, layout))
        m.kind = SAM_KIND_SAM2;
    else if (!set_layout(layout, &m))
        return rlx_error_set(
            err, RLX_ERR_INVALID_ARG,
            "no SAM layout '%s'; there are test, vit_b, vit_l, vit_h, mobile_sam and "
            "sam2.1_hiera_tiny (_small, _base_plus, _large)",
            layout);
    const bool sam2 = m.kind == SAM_KIND_SAM2;
    rlx_status st = sam_list_weights(&m, err);
    if (st == RLX_OK)
        st = add_unread(&m, err);
    if (st == RLX_OK && sam2 && o->hf_names && o->torch)
        st = rlx_error_set(err, RLX_ERR_INVALID_ARG, "no SAM 2 .pt with Hugging Face names");
    /* the stacked point_embed: 4 rows in one buffer */
    for (int i = 0; st == RLX_OK && i < m.n_w; i++)
        if (stacked_row(o, &m, &m.w[i]) == 0 &&
            (i + 3 >= m.n_w || stacked_row(o, &m, &m.w[i + 3]) != 3))
            st = rlx_error_set(err, RLX_ERR_INVALID_ARG, "the point embeddings are not in order");
    if (st != RLX_OK) {
        free(m.w);
        return st;
    }
    const size_t esz = o->f16 ? 2 : 4;
    int64_t most = 0; /* the largest tensor's elements: the buffer */
    for (int i = 0; i < m.n_w; i++) {
        int64_t n = 1;
        for (int d = 0; d < m.w[i].rank; d++)
            n *= m.w[i].dims[d];
        n *= 4; /* room for the stacked point_embed */
        most = n > most ? n : most;
    }
    size_t hcap = 1 << 20, hl = 0;
    char *hdr = malloc(hcap);
    float *buf = malloc(sizeof(float) * (size_t)most);
    uint16_t *half = o->f16 ? malloc(sizeof(uint16_t) * (size_t)most) : NULL;
    FILE *f = NULL;
    if (!hdr || !buf || (o->f16 && !half)) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    if (o->torch) {
        st = write_torch(path, o, &m, buf, err);
        goto done;
    }
    hl += (size_t)snprintf(hdr + hl, hcap - hl, "{");
    uint64_t off = 0;
    bool first = true;
    for (int i = 0; i < m.n_w; i++) {
        const sam_weight *w = &m.w[i];
        if (o->skip && strcmp(o->skip, w->name) == 0)
            continue;
        char name[SAM_NAME_MAX];
        if (o->hf_names && sam2)
            sam2_hf_name_of(w->name, name, sizeof name);
        else if (o->hf_names)
            rlx_sam_writer_hf_name(w->name, name, sizeof name);
        else
            snprintf(name, sizeof name, "%s", w->name);
        int64_t dims[RLX_SAM_MAX_DIMS + 1];
        uint64_t n = 1;
        int rank = weight_dims(o, w, dims, &n);
        int row = stacked_row(o, &m, w);
        if (row > 0)
            continue; /* in row 0's tensor */
        if (row == 0) {
            snprintf(name, sizeof name, "prompt_encoder.point_embed.weight");
            dims[0] = 4;
            n *= 4;
        }
        bool i64 = w->dtype == RLX_DTYPE_I64;
        uint64_t sz = i64 ? 8 : esz * n;
        hl += (size_t)snprintf(hdr + hl, hcap - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                               first ? "" : ",", name,
                               i64      ? "I64"
                               : o->f16 ? "F16"
                                        : "F32");
        for (int d = 0; d < rank; d++)
            hl += (size_t)snprintf(hdr + hl, hcap - hl, "%s%lld", d ? "," : "", (long long)dims[d]);
        hl += (size_t)snprintf(hdr + hl, hcap - hl, "],\"data_offsets\":[%llu,%llu]}",
                               (unsigned long long)off, (unsigned long long)(off + sz));
        off += sz;
        first = false;
    }
    hl += (size_t)snprintf(hdr + hl, hcap - hl, "}");
    while (hl % 8)
        hdr[hl++] = ' ';
    f = fopen(path, "wb");
    if (!f) {
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s", path);
        goto done;
    }
    uint8_t len[8];
    for (int b = 0; b < 8; b++)
        len[b] = (uint8_t)((uint64_t)hl >> (8 * b));
    fwrite(len, 1, 8, f);
    fwrite(hdr, 1, hl, f);
    for (int i = 0; i < m.n_w; i++) {
        const sam_weight *w = &m.w[i];
        if (o->skip && strcmp(o->skip, w->name) == 0)
            continue;
        int64_t n = 1;
        for (int d = 0; d < w->rank; d++)
            n *= w->dims[d];
        if (w->dtype == RLX_DTYPE_I64) {
            int64_t zero = 0;
            fwrite(&zero, sizeof zero, 1, f);
            continue;
        }
        int row = stacked_row(o, &m, w);
        if (row > 0)
            continue;
        if (row == 0) { /* the four rows, each with its official name's values */
            for (int r = 0; r < 4; r++)
                fill(w + r, buf + r * n);
            n *= 4;
        } else {
            fill(w, buf); /* little-endian hosts only, as the tests run */
        }
        if (o->f16) {
            for (int64_t k = 0; k < n; k++)
                half[k] = rlx_f32_to_f16(buf[k]);
            fwrite(half, sizeof(uint16_t), (size_t)n, f);
        } else {
            fwrite(buf, sizeof(float), (size_t)n, f);
        }
    }
    if (ferror(f))
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s", path);
done:
    if (f && fclose(f) != 0 && st == RLX_OK)
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s", path);
    free(hdr);
    free(buf);
    free(half);
    free(m.w);
    return st;
}
