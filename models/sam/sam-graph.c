/* SAM's image encoder and prompt encoder + mask decoder as graphs of the IR.
 *
 * Encoder (ImageEncoderViT): patch conv 16x16/16, + pos_embed, pre-LN blocks whose
 * attention runs over 14x14 windows (the 64x64 grid zero-padded to 70x70, 25
 * windows as the batch) or, in the global blocks, over all 4096 tokens. The
 * decomposed relative positions become the attention's additive bias: rel_h
 * (q against rel_pos_h gathered at q_row - k_row + w - 1) and rel_w (the same
 * along columns), side by side as a bias decomposed over the key grid
 * (bias_grid_w): the attention adds rel_h[k_row] + rel_w[k_col] per key.
 * MLP with erf GELU. Neck: 1x1 conv (a matmul on the tokens), LayerNorm over
 * channels, 3x3 conv, LayerNorm. The embedding is written token-major into a
 * state; the dense positional encoding of the grid (sin/cos of the grid
 * coordinates times the gaussian matrix) is computed by the same program into
 * another state, so a click does not redo it.
 *
 * Decoder: the prompt tokens' random-Fourier positional encoding (zeroed for the
 * padding point) plus their kind's embedding, after the IoU and mask tokens;
 * two TwoWayAttentionBlocks, the final token-to-image attention, the
 * transposed-conv upscaling to 256x256 (as matmuls on the tokens, channels-last)
 * and the hypernetwork MLPs, whose product with the upscaled features gives the
 * four masks; the IoU head.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph.h"
#include "models/sam/sam-internal.h"

#define GRID       RLX_SAM_EMBED_SIDE
#define NTOK       (GRID * GRID)
#define C          RLX_SAM_EMBED_DIM
#define LN_VIT     1e-6f /* ViT norms and LayerNorm2d */
#define LN_DEC     1e-5f /* nn.LayerNorm defaults in the two-way transformer */
#define SAM_TWO_PI 6.283185307179586f
#define MS_        RLX_SAM_MASK_SIDE

typedef sam_builder sb;

rlx_node sam_param(sam_builder *b, const char *fmt, ...)
{
    char name[SAM_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const sam_weight *w = sam_find_weight(b->m, name);
    if (!w) {
        if (!b->missing[0])
            snprintf(b->missing, sizeof b->missing, "the graph needs '%s', which is not listed",
                     name);
        return RLX_NODE_INVALID;
    }
    rlx_node p = rlx_graph_param(b->g, w->name, w->dtype, rlx_shape_make(w->rank, w->dims));
    if (w->dtype == RLX_DTYPE_F32)
        return p;
    return rlx_graph_cast(b->g, NULL, p, RLX_DTYPE_F32);
}

rlx_node sam_reshape(sam_builder *b, rlx_node x, int rank, const int64_t *d)
{
    return rlx_graph_reshape(b->g, NULL, x, rlx_shape_make(rank, d));
}

rlx_node sam_permute(sam_builder *b, rlx_node x, const int *perm)
{
    return rlx_graph_permute(b->g, NULL, x, perm);
}

static rlx_dim K(int64_t k)
{
    return rlx_dim_const(k);
}

static rlx_node linear(sb *b, rlx_node x, const char *pre)
{
    return rlx_graph_linear(b->g, NULL, x, sam_param(b, "%s.weight", pre),
                            sam_param(b, "%s.bias", pre));
}

static rlx_node layer_norm(sb *b, rlx_node x, const char *pre, float eps)
{
    return rlx_graph_layer_norm(b->g, NULL, x, sam_param(b, "%s.weight", pre),
                                sam_param(b, "%s.bias", pre), eps);
}

/* ---- encoder ------------------------------------------------------------ */

/* rel_pos (2w-1, hd) gathered at i - j + w - 1: [w, w, hd] (q index, k index). */
static rlx_node rel_table(sb *b, rlx_node table, int w)
{
    int32_t *idx = malloc(sizeof *idx * (size_t)w * (size_t)w);
    if (!idx) {
        snprintf(b->missing, sizeof b->missing, "out of memory");
        return RLX_NODE_INVALID;
    }
    for (int i = 0; i < w; i++)
        for (int j = 0; j < w; j++)
            idx[i * w + j] = i - j + w - 1;
    rlx_node ids = rlx_graph_const_i32(b->g, NULL, rlx_shape_make(2, (int64_t[]){w, w}), idx);
    free(idx);
    return rlx_graph_gather(b->g, NULL, table, ids);
}

/* The heads [h0, h0 + hn) of one block's attention: x's qkv [nb * S, 3D] -> [nb * S, hn * hd]. */
static rlx_node vit_heads(sb *b, rlx_node qkv, rlx_node rh, rlx_node rw, int64_t nb, int w,
                          int64_t h0, int64_t hn)
{
    rlx_graph *g = b->g;
    const sam_hparams *hp = &b->m->hp;
    const int64_t D = hp->dim, hd = hp->head_dim, S = (int64_t)w * w;
    rlx_node hs[3];
    for (int i = 0; i < 3; i++) {
        rlx_node t = rlx_graph_slice(g, NULL, qkv, 1, K(i * D + h0 * hd), K(hn * hd));
        t = sam_reshape(b, t, 4, (int64_t[]){nb, S, hn, hd});
        hs[i] = sam_permute(b, t, (const int[]){0, 2, 1, 3}); /* [nb, hn, S, hd] */
    }
    /* decomposed relative positions, from the unscaled q */
    rlx_node q4 = sam_reshape(b, hs[0], 4, (int64_t[]){nb * hn, w, w, hd}); /* [BH, qh, qw, c] */
    rlx_node rel_h = rlx_graph_matmul(g, NULL, q4, rh, false, true);        /* [BH, qh, qw, kh] */
    rlx_node qt = sam_permute(b, q4, (const int[]){0, 2, 1, 3});            /* [BH, qw, qh, c] */
    rlx_node rel_w = rlx_graph_matmul(g, NULL, qt, rw, false, true);        /* [BH, qw, qh, kw] */
    rel_w = sam_permute(b, rel_w, (const int[]){0, 2, 1, 3});               /* [BH, qh, qw, kw] */
    rel_h = sam_reshape(b, rel_h, 4, (int64_t[]){nb, hn, S, w});
    rel_w = sam_reshape(b, rel_w, 4, (int64_t[]){nb, hn, S, w});
    /* key (kh, kw) gets rel_h[kh] + rel_w[kw]: the attention adds them per key
     * (bias_grid_w), the [S, S] sum is never written where the backend can */
    rlx_node bias = rlx_graph_concat(g, NULL, 2, (rlx_node[]){rel_h, rel_w}, 3);
    rlx_attention_params ap = {
        .mask = RLX_MASK_NONE, .scale = 1.0f / sqrtf((float)hd), .bias_grid_w = w};
    rlx_node a = rlx_graph_attention(g, NULL, hs[0], hs[1], hs[2], bias, ap); /* [nb,hn,S,hd] */
    a = sam_permute(b, a, (const int[]){0, 2, 1, 3});
    return sam_reshape(b, a, 2, (int64_t[]){nb * S, hn * hd});
}

/* x [nb * w * w, D] tokens of nb windows of w x w -> attention output, same shape.
 * Where the backend cannot add the decomposed bias per key, the compiler builds
 * the full one, [nb, H, S, S] floats (1 GiB for ViT-H's global blocks), so the
 * heads go in groups whose full bias stays under the chunk size, each its own
 * attention: smaller peaks, and bindings that fit GPUs with small
 * storage-buffer limits. */
static rlx_node vit_attention(sb *b, rlx_node x, int il, int64_t nb, int w)
{
    rlx_graph *g = b->g;
    const sam_hparams *hp = &b->m->hp;
    const int64_t H = hp->heads, S = (int64_t)w * w;
    char pre[64], nm[80];
    snprintf(pre, sizeof pre, "image_encoder.blocks.%d.attn", il);
    snprintf(nm, sizeof nm, "%s.qkv", pre);
    rlx_node qkv = linear(b, x, nm); /* [nb*S, 3D]: (q|k|v) x heads x hd */
    rlx_node rh = rel_table(b, sam_param(b, "%s.rel_pos_h", pre), w); /* [qh, kh, c] */
    rlx_node rw = rel_table(b, sam_param(b, "%s.rel_pos_w", pre), w); /* [qw, kw, c] */
    uint64_t per_head = (uint64_t)nb * (uint64_t)S * (uint64_t)S * sizeof(float);
    int64_t group = (int64_t)(b->m->chunk_bytes / per_head);
    group = group < 1 ? 1 : group > H ? H : group;
    rlx_node parts[SAM_MAX_HEADS];
    int n = 0;
    for (int64_t h0 = 0; h0 < H && n < SAM_MAX_HEADS; h0 += group)
        parts[n++] = vit_heads(b, qkv, rh, rw, nb, w, h0, H - h0 < group ? H - h0 : group);
    rlx_node a = n == 1 ? parts[0] : rlx_graph_concat(g, NULL, n, parts, 1);
    snprintf(nm, sizeof nm, "%s.proj", pre);
    return linear(b, a, nm);
}

static rlx_node vit_block(sb *b, rlx_node x, int il)
{
    rlx_graph *g = b->g;
    const sam_hparams *hp = &b->m->hp;
    const int64_t D = hp->dim;
    char pre[64], nm[96];
    snprintf(pre, sizeof pre, "image_encoder.blocks.%d", il);
    snprintf(nm, sizeof nm, "%s.norm1", pre);
    rlx_node h = layer_norm(b, x, nm, LN_VIT); /* [4096, D] */
    int w = hp->window[il];
    if (w == 0) {
        h = vit_attention(b, h, il, 1, GRID);
    } else {
        int64_t nw = (GRID + w - 1) / w, side = nw * w; /* padded side */
        h = sam_reshape(b, h, 3, (int64_t[]){GRID, GRID, D});
        if (side != GRID)
            h = rlx_graph_pad(g, NULL, h, (int64_t[]){0, 0, 0},
                              (int64_t[]){side - GRID, side - GRID, 0}, 0.0f);
        h = sam_reshape(b, h, 5, (int64_t[]){nw, w, nw, w, D});
        h = sam_permute(b, h, (const int[]){0, 2, 1, 3, 4}); /* [nw, nw, w, w, D] */
        h = sam_reshape(b, h, 2, (int64_t[]){nw * nw * w * w, D});
        h = vit_attention(b, h, il, nw * nw, w);
        h = sam_reshape(b, h, 5, (int64_t[]){nw, nw, w, w, D});
        h = sam_permute(b, h, (const int[]){0, 2, 1, 3, 4}); /* [nw, w, nw, w, D] */
        h = sam_reshape(b, h, 3, (int64_t[]){side, side, D});
        if (side != GRID) {
            h = rlx_graph_slice(g, NULL, h, 0, K(0), K(GRID));
            h = rlx_graph_slice(g, NULL, h, 1, K(0), K(GRID));
        }
        h = sam_reshape(b, h, 2, (int64_t[]){NTOK, D});
    }
    x = rlx_graph_add(g, NULL, x, h);
    snprintf(nm, sizeof nm, "%s.norm2", pre);
    h = layer_norm(b, x, nm, LN_VIT);
    snprintf(nm, sizeof nm, "%s.mlp.lin1", pre);
    h = rlx_graph_gelu(g, NULL, linear(b, h, nm), RLX_GELU_ERF);
    snprintf(nm, sizeof nm, "%s.mlp.lin2", pre);
    return rlx_graph_add(g, NULL, x, linear(b, h, nm));
}

/* The grid's coordinates, ((x + 0.5) / 64, (y + 0.5) / 64) mapped to [-1, 1], times
 * the gaussian matrix, as [sin | cos]: [4096, 256]. */
rlx_node sam_dense_pe(sam_builder *b, const char *gaussian)
{
    float *xy = malloc(sizeof *xy * NTOK * 2);
    if (!xy) {
        snprintf(b->missing, sizeof b->missing, "out of memory");
        return RLX_NODE_INVALID;
    }
    for (int y = 0; y < GRID; y++)
        for (int x = 0; x < GRID; x++) {
            xy[(y * GRID + x) * 2 + 0] = 2.0f * (((float)x + 0.5f) / GRID) - 1.0f;
            xy[(y * GRID + x) * 2 + 1] = 2.0f * (((float)y + 0.5f) / GRID) - 1.0f;
        }
    rlx_node c = rlx_graph_const_f32(b->g, "grid", rlx_shape_make(2, (int64_t[]){NTOK, 2}), xy);
    free(xy);
    rlx_node pe = rlx_graph_matmul(b->g, NULL, c, sam_param(b, "%s", gaussian), false, false);
    pe = rlx_graph_scale(b->g, NULL, pe, SAM_TWO_PI, 0.0f);
    rlx_node sc[2] = {rlx_graph_unary(b->g, NULL, RLX_OP_SIN, pe),
                      rlx_graph_unary(b->g, NULL, RLX_OP_COS, pe)};
    return rlx_graph_concat(b->g, NULL, 2, sc, 1);
}

rlx_status sam_build_finish(sam_builder *b, rlx_graph **out, const char *what, rlx_error **err)
{
    if (b->missing[0]) {
        rlx_graph_free(b->g);
        return rlx_error_set(err, RLX_ERR_INTERNAL, "building the %s: %s", what, b->missing);
    }
    if (rlx_graph_status(b->g) != RLX_OK) {
        rlx_status st = rlx_graph_take_error(b->g, err);
        rlx_error_prefix(err, "building the %s: ", what);
        rlx_graph_free(b->g);
        return st;
    }
    *out = b->g;
    return RLX_OK;
}

rlx_status sam_finish_encoder(const sam_model *m, rlx_graph *g, rlx_node x, int64_t D,
                              const char *missing, rlx_graph **out, rlx_error **err)
{
    sb b = {.g = g, .m = m};
    snprintf(b.missing, sizeof b.missing, "%s", missing ? missing : "");
    const int st1[2] = {1, 1}, p1[2] = {1, 1};
    /* neck: the 1x1 conv is a matmul on the tokens */
    rlx_node w0 =
        sam_reshape(&b, sam_param(&b, "image_encoder.neck.0.weight"), 2, (int64_t[]){C, D});
    x = rlx_graph_matmul(g, "neck.0", x, w0, false, true); /* [4096, 256] */
    x = layer_norm(&b, x, "image_encoder.neck.1", LN_VIT);
    x = sam_reshape(&b, sam_permute(&b, x, (const int[]){1, 0}), 4, (int64_t[]){1, C, GRID, GRID});
    x = rlx_graph_conv2d(g, "neck.2", x, sam_param(&b, "image_encoder.neck.2.weight"),
                         RLX_NODE_INVALID, st1, p1, st1, 1);
    x = sam_reshape(&b, sam_permute(&b, x, (const int[]){0, 2, 3, 1}), 2, (int64_t[]){NTOK, C});
    x = layer_norm(&b, x, "image_encoder.neck.3", LN_VIT);

    rlx_node se = rlx_graph_state(g, SAM_STATE_EMBEDDING, RLX_DTYPE_F32,
                                  rlx_shape_make(2, (int64_t[]){NTOK, C}));
    rlx_graph_scatter(g, NULL, se, x, 0, K(0));
    rlx_node sp = rlx_graph_state(g, SAM_STATE_IMAGE_PE, RLX_DTYPE_F32,
                                  rlx_shape_make(2, (int64_t[]){NTOK, C}));
    rlx_graph_scatter(
        g, NULL, sp,
        sam_dense_pe(&b, "prompt_encoder.pe_layer.positional_encoding_gaussian_matrix"), 0, K(0));
    rlx_node probe = rlx_graph_slice(g, NULL, x, 0, K(0), K(1));
    rlx_graph_output(g, "probe", rlx_graph_slice(g, NULL, probe, 1, K(0), K(1)));
    return sam_build_finish(&b, out, "SAM image encoder", err);
}

rlx_status sam_build_encoder(const sam_model *m, rlx_graph **out, rlx_error **err)
{
    *out = NULL;
    if (m->enc == SAM_ENCODER_TINYVIT)
        return sam_build_tinyvit_encoder(m, out, err);
    sb b = {.g = rlx_graph_create(), .m = m};
    if (!b.g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the SAM encoder");
    rlx_graph *g = b.g;
    const int64_t D = m->hp.dim;
    rlx_node img = rlx_graph_input(
        g, "image", RLX_DTYPE_F32,
        rlx_shape_make(4, (int64_t[]){1, 3, RLX_SAM_IMAGE_SIZE, RLX_SAM_IMAGE_SIZE}));
    const int st16[2] = {SAM_PATCH, SAM_PATCH}, st1[2] = {1, 1}, p0[2] = {0, 0};
    rlx_node x = rlx_graph_conv2d(
        g, "patch_embed", img, sam_param(&b, "image_encoder.patch_embed.proj.weight"),
        sam_param(&b, "image_encoder.patch_embed.proj.bias"), st16, p0, st1, 1);
    x = sam_reshape(&b, sam_permute(&b, x, (const int[]){0, 2, 3, 1}), 2, (int64_t[]){NTOK, D});
    x = rlx_graph_add(
        g, NULL, x,
        sam_reshape(&b, sam_param(&b, "image_encoder.pos_embed"), 2, (int64_t[]){NTOK, D}));
    for (int il = 0; il < m->hp.depth; il++)
        x = vit_block(&b, x, il);
    return sam_finish_encoder(m, g, x, D, b.missing, out, err);
}

/* ---- decoder ------------------------------------------------------------ */

/* The decoder's Attention: q [Nq, 256], k / v [Nk, 256] -> [Nq, 256]. */
static rlx_node dec_attention(sb *b, const char *pre, rlx_node q, rlx_node k, rlx_node v,
                              int64_t nq, int64_t nk, int64_t inner)
{
    rlx_graph *g = b->g;
    const int64_t H = SAM_DEC_HEADS, hd = inner / H;
    char nm[128];
    rlx_node in[3] = {q, k, v};
    const char *which[3] = {"q_proj", "k_proj", "v_proj"};
    int64_t len[3] = {nq, nk, nk};
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "%s.%s", pre, which[i]);
        rlx_node t = linear(b, in[i], nm);
        t = sam_reshape(b, t, 3, (int64_t[]){len[i], H, hd});
        t = sam_permute(b, t, (const int[]){1, 0, 2});
        in[i] = sam_reshape(b, t, 4, (int64_t[]){1, H, len[i], hd});
    }
    rlx_attention_params ap = {.mask = RLX_MASK_NONE};
    rlx_node a = rlx_graph_attention(g, NULL, in[0], in[1], in[2], RLX_NODE_INVALID, ap);
    a = sam_reshape(b, a, 3, (int64_t[]){H, nq, hd});
    a = sam_reshape(b, sam_permute(b, a, (const int[]){1, 0, 2}), 2, (int64_t[]){nq, inner});
    snprintf(nm, sizeof nm, "%s.out_proj", pre);
    return linear(b, a, nm);
}

/* A ConvTranspose2d of kernel 2, stride 2 on a side x side grid, token-major: each
 * input pixel's cin values times the weight [cin, cout * 2 * 2] give the cout
 * values of its four output pixels (2y + dy, 2x + dx). As one matmul and one
 * permute it keeps the whole upscaling channels-last, so LayerNorm2d is a plain
 * layer norm and nothing is transposed to NCHW and back (a click's largest
 * copies before). x: [side * side, cin] -> [(2 side)^2, cout]. */
static rlx_node upscale(sb *b, rlx_node x, int64_t side, int64_t cin, int64_t cout, const char *pre)
{
    rlx_node w = sam_reshape(b, sam_param(b, "%s.weight", pre), 2, (int64_t[]){cin, cout * 4});
    rlx_node y = rlx_graph_matmul(b->g, NULL, x, w, false, false); /* [s*s, (co, dy, dx)] */
    y = sam_reshape(b, y, 5, (int64_t[]){side, side, cout, 2, 2});
    y = sam_permute(b, y, (const int[]){0, 3, 1, 4, 2}); /* [y, dy, x, dx, co] */
    y = sam_reshape(b, y, 2, (int64_t[]){4 * side * side, cout});
    return rlx_graph_add(b->g, NULL, y, sam_param(b, "%s.bias", pre));
}

/* A k x k, stride k conv on a token-major [side * side, cin] map as one matmul:
 * each output pixel's k * k * cin inputs gathered in the weight's (c, dy, dx)
 * order. -> [(side / k)^2, cout]. */
static rlx_node patch_conv(sb *b, rlx_node x, int64_t side, int64_t cin, int64_t cout, int64_t k,
                           const char *pre, int idx)
{
    const int64_t s = side / k;
    x = sam_reshape(b, x, 5, (int64_t[]){s, k, s, k, cin});
    x = sam_permute(b, x, (const int[]){0, 2, 4, 1, 3}); /* [y, x, c, dy, dx] */
    x = sam_reshape(b, x, 2, (int64_t[]){s * s, cin * k * k});
    rlx_node w = sam_reshape(b, sam_param(b, "%s.mask_downscaling.%d.weight", pre, idx), 2,
                             (int64_t[]){cout, cin * k * k});
    return rlx_graph_linear(b->g, NULL, x, w,
                            sam_param(b, "%s.mask_downscaling.%d.bias", pre, idx));
}

rlx_node sam_mask_dense(sam_builder *b, rlx_node mask, const char *pe)
{
    char nm[SAM_NAME_MAX];
    const int64_t MS = RLX_SAM_MASK_SIDE, CM = 16;
    rlx_node x = sam_reshape(b, mask, 2, (int64_t[]){MS * MS, 1});
    x = patch_conv(b, x, MS, 1, CM / 4, 2, pe, 0); /* [128 * 128, 4] */
    snprintf(nm, sizeof nm, "%s.mask_downscaling.1", pe);
    x = rlx_graph_gelu(b->g, NULL, layer_norm(b, x, nm, LN_VIT), RLX_GELU_ERF);
    x = patch_conv(b, x, MS / 2, CM / 4, CM, 2, pe, 3); /* [64 * 64, 16] */
    snprintf(nm, sizeof nm, "%s.mask_downscaling.4", pe);
    x = rlx_graph_gelu(b->g, NULL, layer_norm(b, x, nm, LN_VIT), RLX_GELU_ERF);
    return patch_conv(b, x, GRID, CM, C, 1, pe, 6); /* [4096, 256] */
}

/* MLP with ReLU between its n layers: "<pre>.layers.<i>". */
static rlx_node dec_mlp(sb *b, rlx_node x, const char *pre, int n)
{
    char nm[128];
    for (int i = 0; i < n; i++) {
        snprintf(nm, sizeof nm, "%s.layers.%d", pre, i);
        x = linear(b, x, nm);
        if (i + 1 < n)
            x = rlx_graph_relu(b->g, NULL, x);
    }
    return x;
}

rlx_status sam_build_decoder(const sam_model *m, int n_tokens, bool with_mask, rlx_graph **out,
                             rlx_error **err)
{
    *out = NULL;
    if (n_tokens < 1 || n_tokens > RLX_SAM_MAX_POINTS + 3)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "SAM decoder: %d prompt tokens", n_tokens);
    sb b = {.g = rlx_graph_create(), .m = m};
    if (!b.g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the SAM decoder");
    rlx_graph *g = b.g;
    const int64_t NP = n_tokens, NQ = 5 + NP, CI = C / 2;
    rlx_node coords =
        rlx_graph_input(g, "coords", RLX_DTYPE_F32, rlx_shape_make(2, (int64_t[]){NP, 2}));
    rlx_node kinds = rlx_graph_input(g, "kinds", RLX_DTYPE_I32, rlx_shape_make(1, (int64_t[]){NP}));

    /* prompt encoder: 2 * (p + 0.5) / 1024 - 1, @ gaussian, * 2 pi, [sin | cos] */
    rlx_node c = rlx_graph_scale(g, NULL, coords, 1.0f, 0.5f);
    c = rlx_graph_scale(g, NULL, c, 1.0f / RLX_SAM_IMAGE_SIZE, 0.0f);
    c = rlx_graph_scale(g, NULL, c, 2.0f, -1.0f);
    rlx_node pe = rlx_graph_matmul(
        g, NULL, c, sam_param(&b, "prompt_encoder.pe_layer.positional_encoding_gaussian_matrix"),
        false, false);
    pe = rlx_graph_scale(g, NULL, pe, SAM_TWO_PI, 0.0f);
    rlx_node sc[2] = {rlx_graph_unary(g, NULL, RLX_OP_SIN, pe),
                      rlx_graph_unary(g, NULL, RLX_OP_COS, pe)};
    pe = rlx_graph_concat(g, NULL, 2, sc, 1); /* [NP, 256] */
    /* the padding point has no positional part, only not_a_point_embed */
    const float keep_tab[5] = {0, 1, 1, 1, 1};
    rlx_node keep = rlx_graph_gather(
        g, NULL, rlx_graph_const_f32(g, "keep", rlx_shape_make(2, (int64_t[]){5, 1}), keep_tab),
        kinds);
    rlx_node kind_rows[5] = {sam_param(&b, "prompt_encoder.not_a_point_embed.weight"),
                             sam_param(&b, "prompt_encoder.point_embeddings.0.weight"),
                             sam_param(&b, "prompt_encoder.point_embeddings.1.weight"),
                             sam_param(&b, "prompt_encoder.point_embeddings.2.weight"),
                             sam_param(&b, "prompt_encoder.point_embeddings.3.weight")};
    rlx_node kind_tab = rlx_graph_concat(g, NULL, 5, kind_rows, 0); /* [5, 256] */
    rlx_node sparse = rlx_graph_add(g, NULL, rlx_graph_mul(g, NULL, pe, keep),
                                    rlx_graph_gather(g, NULL, kind_tab, kinds));
    rlx_node toks[3] = {sam_param(&b, "mask_decoder.iou_token.weight"),
                        sam_param(&b, "mask_decoder.mask_tokens.weight"), sparse};
    rlx_node tokens = rlx_graph_concat(g, "tokens", 3, toks, 0); /* [NQ, 256] */

    rlx_node emb = rlx_graph_state(g, SAM_STATE_EMBEDDING, RLX_DTYPE_F32,
                                   rlx_shape_make(2, (int64_t[]){NTOK, C}));
    rlx_node kpe = rlx_graph_state(g, SAM_STATE_IMAGE_PE, RLX_DTYPE_F32,
                                   rlx_shape_make(2, (int64_t[]){NTOK, C}));
    rlx_node dense = with_mask
                         ? sam_mask_dense(&b,
                                          rlx_graph_input(g, "mask", RLX_DTYPE_F32,
                                                          rlx_shape_make(2, (int64_t[]){MS_, MS_})),
                                          "prompt_encoder")
                         : sam_param(&b, "prompt_encoder.no_mask_embed.weight");
    rlx_node keys = rlx_graph_add(g, NULL, emb, dense);
    rlx_node queries = tokens;
    char pre[96], nm[128];
    for (int il = 0; il < SAM_DEC_DEPTH; il++) {
        snprintf(pre, sizeof pre, "mask_decoder.transformer.layers.%d", il);
        snprintf(nm, sizeof nm, "%s.self_attn", pre);
        if (il == 0) {
            queries = dec_attention(&b, nm, queries, queries, queries, NQ, NQ, C);
        } else {
            rlx_node q = rlx_graph_add(g, NULL, queries, tokens);
            queries =
                rlx_graph_add(g, NULL, queries, dec_attention(&b, nm, q, q, queries, NQ, NQ, C));
        }
        snprintf(nm, sizeof nm, "%s.norm1", pre);
        queries = layer_norm(&b, queries, nm, LN_DEC);

        rlx_node q = rlx_graph_add(g, NULL, queries, tokens);
        rlx_node k = rlx_graph_add(g, NULL, keys, kpe);
        snprintf(nm, sizeof nm, "%s.cross_attn_token_to_image", pre);
        queries = rlx_graph_add(g, NULL, queries, dec_attention(&b, nm, q, k, keys, NQ, NTOK, CI));
        snprintf(nm, sizeof nm, "%s.norm2", pre);
        queries = layer_norm(&b, queries, nm, LN_DEC);

        snprintf(nm, sizeof nm, "%s.mlp.lin1", pre);
        rlx_node h = rlx_graph_relu(g, NULL, linear(&b, queries, nm));
        snprintf(nm, sizeof nm, "%s.mlp.lin2", pre);
        queries = rlx_graph_add(g, NULL, queries, linear(&b, h, nm));
        snprintf(nm, sizeof nm, "%s.norm3", pre);
        queries = layer_norm(&b, queries, nm, LN_DEC);

        q = rlx_graph_add(g, NULL, queries, tokens);
        k = rlx_graph_add(g, NULL, keys, kpe);
        snprintf(nm, sizeof nm, "%s.cross_attn_image_to_token", pre);
        keys = rlx_graph_add(g, NULL, keys, dec_attention(&b, nm, k, q, queries, NTOK, NQ, CI));
        snprintf(nm, sizeof nm, "%s.norm4", pre);
        keys = layer_norm(&b, keys, nm, LN_DEC);
    }
    {
        rlx_node q = rlx_graph_add(g, NULL, queries, tokens);
        rlx_node k = rlx_graph_add(g, NULL, keys, kpe);
        queries =
            rlx_graph_add(g, NULL, queries,
                          dec_attention(&b, "mask_decoder.transformer.final_attn_token_to_image", q,
                                        k, keys, NQ, NTOK, CI));
        queries = layer_norm(&b, queries, "mask_decoder.transformer.norm_final_attn", LN_DEC);
    }

    /* upscaling, token-major: [4096, 256] -> [128 * 128, 64] -> [256 * 256, 32] */
    rlx_node u = upscale(&b, keys, GRID, C, C / 4, "mask_decoder.output_upscaling.0");
    u = layer_norm(&b, u, "mask_decoder.output_upscaling.1", LN_VIT);
    u = rlx_graph_gelu(g, NULL, u, RLX_GELU_ERF);
    u = upscale(&b, u, 2 * GRID, C / 4, C / 8, "mask_decoder.output_upscaling.3");
    u = rlx_graph_gelu(g, NULL, u, RLX_GELU_ERF);
    const int64_t MS = RLX_SAM_MASK_SIDE;

    rlx_node hyper[RLX_SAM_MAX_MASKS];
    for (int i = 0; i < RLX_SAM_MAX_MASKS; i++) {
        rlx_node t = rlx_graph_slice(g, NULL, queries, 0, K(1 + i), K(1));
        snprintf(nm, sizeof nm, "mask_decoder.output_hypernetworks_mlps.%d", i);
        hyper[i] = dec_mlp(&b, t, nm, 3); /* [1, 32] */
    }
    rlx_node hin = rlx_graph_concat(g, NULL, RLX_SAM_MAX_MASKS, hyper, 0); /* [4, 32] */
    rlx_node masks = rlx_graph_matmul(g, "masks", hin, u, false, true);    /* [4, 65536] */
    rlx_graph_output(g, "masks", sam_reshape(&b, masks, 3, (int64_t[]){RLX_SAM_MAX_MASKS, MS, MS}));
    rlx_node iou_tok = rlx_graph_slice(g, NULL, queries, 0, K(0), K(1));
    rlx_graph_output(g, "iou", dec_mlp(&b, iou_tok, "mask_decoder.iou_prediction_head", 3));
    return sam_build_finish(&b, out, "SAM mask decoder", err);
}
