/* SAM 2's image encoder and prompt encoder + mask decoder as graphs of the IR.
 *
 * Encoder (image mode): the 7x7 / 4 patch conv to a 256 x 256 grid; the position
 * embedding (the background one bicubic-resized to the grid, as two matmuls with the
 * interpolation matrix built here, plus the window one tiled); Hiera blocks, token-
 * major ([H * W, C]): windowed attention over zero-padded windows or global attention,
 * and at each stage change the queries (and the projected shortcut) max-pooled 2 x 2,
 * which halves the grid and the window; the FPN neck's 1x1 convs (matmuls on the
 * tokens), the 32 x 32 level nearest-upsampled into the 64 x 64 one, the 32 x 32
 * level then dropped (scalp 1); no_mem_embed added to the 64 x 64 features (what
 * SAM2ImagePredictor does in image mode); conv_s0 / conv_s1 on the 256 x 256 and
 * 128 x 128 levels, precomputed once per image as forward_image does. Four states:
 * the embedding, the dense PE of the 64 x 64 grid, and the two high-res maps.
 *
 * Decoder: SAM's, with the object-score token first, the high-res maps added after
 * each transposed conv of the upscaling, the IoU through a sigmoid and the object
 * score MLP.
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
#define SIDE0      (RLX_SAM_IMAGE_SIZE / 4) /* the patch grid */
#define LN_HIERA   1e-6f
#define LN_DEC     1e-5f
#define SAM_TWO_PI 6.283185307179586f

typedef sam_builder sb;

static rlx_dim K(int64_t k)
{
    return rlx_dim_const(k);
}

static rlx_node linear(sb *b, rlx_node x, const char *fmt, ...) RLX_PRINTF(3, 4);
static rlx_node linear(sb *b, rlx_node x, const char *fmt, ...)
{
    char pre[SAM_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    return rlx_graph_linear(b->g, NULL, x, sam_param(b, "%s.weight", pre),
                            sam_param(b, "%s.bias", pre));
}

static rlx_node layer_norm(sb *b, rlx_node x, float eps, const char *fmt, ...) RLX_PRINTF(4, 5);
static rlx_node layer_norm(sb *b, rlx_node x, float eps, const char *fmt, ...)
{
    char pre[SAM_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    return rlx_graph_layer_norm(b->g, NULL, x, sam_param(b, "%s.weight", pre),
                                sam_param(b, "%s.bias", pre), eps);
}

/* A 1x1 conv on tokens [n, cin] -> [n, cout] (weight [cout, cin, 1, 1]). */
static rlx_node conv1x1(sb *b, rlx_node x, int64_t cout, int64_t cin, const char *pre)
{
    rlx_node w = sam_reshape(b, sam_param(b, "%s.weight", pre), 2, (int64_t[]){cout, cin});
    return rlx_graph_linear(b->g, NULL, x, w, sam_param(b, "%s.bias", pre));
}

/* ---- encoder ------------------------------------------------------------ */

/* PyTorch's bicubic resize (align_corners false, A = -0.75, source indices clamped at
 * the border) from n to out samples as a matrix [out, n]. */
static float *bicubic_matrix(int n, int out)
{
    float *a = calloc((size_t)out * (size_t)n, sizeof *a);
    if (!a)
        return NULL;
    const double A = -0.75, scale = (double)(float)((float)n / (float)out);
    for (int o = 0; o < out; o++) {
        double src = ((double)o + 0.5) * scale - 0.5;
        double x0 = floor(src), t = src - x0;
        double w[4];
        double t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
        w[0] = ((A * t1 - 5 * A) * t1 + 8 * A) * t1 - 4 * A;
        w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
        w[2] = ((A + 2) * t2 - (A + 3)) * t2 * t2 + 1;
        w[3] = ((A * t3 - 5 * A) * t3 + 8 * A) * t3 - 4 * A;
        for (int k = 0; k < 4; k++) {
            int i = (int)x0 - 1 + k;
            i = i < 0 ? 0 : i >= n ? n - 1 : i;
            a[(size_t)o * (size_t)n + (size_t)i] += (float)w[k];
        }
    }
    return a;
}

/* The trunk's position embedding as tokens [256 * 256, E0]. */
static rlx_node position_embedding(sb *b)
{
    const sam2_hparams *h = &b->m->h2;
    const int64_t E0 = h->embed, n = h->bkg, w0 = h->win0, S = SIDE0;
    float *a = bicubic_matrix((int)n, (int)S);
    if (!a) {
        snprintf(b->missing, sizeof b->missing, "out of memory");
        return RLX_NODE_INVALID;
    }
    rlx_node am = rlx_graph_const_f32(b->g, "bicubic", rlx_shape_make(2, (int64_t[]){S, n}), a);
    free(a);
    /* rows: [E0 * n, n] @ A^T -> [E0, n(y), S(x)]; then columns: A @ [n(y), S * E0] */
    rlx_node p =
        sam_reshape(b, sam_param(b, "image_encoder.trunk.pos_embed"), 2, (int64_t[]){E0 * n, n});
    p = rlx_graph_matmul(b->g, NULL, p, am, false, true);
    p = sam_reshape(b, p, 3, (int64_t[]){E0, n, S});
    p = sam_reshape(b, sam_permute(b, p, (const int[]){1, 2, 0}), 2, (int64_t[]){n, S * E0});
    p = rlx_graph_matmul(b->g, NULL, am, p, false, false); /* [S(y), S(x) * E0] */
    p = sam_reshape(b, p, 5, (int64_t[]){S / w0, w0, S / w0, w0, E0});
    rlx_node win = sam_reshape(b, sam_param(b, "image_encoder.trunk.pos_embed_window"), 3,
                               (int64_t[]){E0, w0, w0});
    win = sam_reshape(b, sam_permute(b, win, (const int[]){1, 2, 0}), 5,
                      (int64_t[]){1, w0, 1, w0, E0});
    p = rlx_graph_add(b->g, NULL, p, win);
    return sam_reshape(b, p, 2, (int64_t[]){S * S, E0});
}

/* 2 x 2 max pool of nb grids side x side, tokens [nb * side * side, c]. */
static rlx_node pool2(sb *b, rlx_node x, int64_t nb, int64_t side, int64_t c)
{
    const int64_t hs = side / 2;
    x = sam_reshape(b, x, 5, (int64_t[]){nb * hs, 2, hs, 2, c});
    rlx_node q[4];
    for (int dy = 0; dy < 2; dy++)
        for (int dx = 0; dx < 2; dx++) {
            rlx_node t = rlx_graph_slice(b->g, NULL, x, 1, K(dy), K(1));
            q[dy * 2 + dx] = rlx_graph_slice(b->g, NULL, t, 3, K(dx), K(1));
        }
    rlx_node m0 = rlx_graph_binary(b->g, NULL, RLX_OP_MAX, q[0], q[1]);
    rlx_node m1 = rlx_graph_binary(b->g, NULL, RLX_OP_MAX, q[2], q[3]);
    rlx_node m = rlx_graph_binary(b->g, NULL, RLX_OP_MAX, m0, m1);
    return sam_reshape(b, m, 2, (int64_t[]){nb * hs * hs, c});
}

/* [side^2, c] -> nb = (padded / w)^2 windows, [nb * w * w, c]. */
static rlx_node partition(sb *b, rlx_node x, int64_t side, int64_t w, int64_t c)
{
    int64_t n = (side + w - 1) / w, padded = n * w;
    x = sam_reshape(b, x, 3, (int64_t[]){side, side, c});
    if (padded != side)
        x = rlx_graph_pad(b->g, NULL, x, (int64_t[]){0, 0, 0},
                          (int64_t[]){padded - side, padded - side, 0}, 0.0f);
    x = sam_reshape(b, x, 5, (int64_t[]){n, w, n, w, c});
    x = sam_permute(b, x, (const int[]){0, 2, 1, 3, 4});
    return sam_reshape(b, x, 2, (int64_t[]){n * n * w * w, c});
}

/* The inverse for n x n windows of w, cropped to side. */
static rlx_node unpartition(sb *b, rlx_node x, int64_t n, int64_t w, int64_t side, int64_t c)
{
    x = sam_reshape(b, x, 5, (int64_t[]){n, n, w, w, c});
    x = sam_permute(b, x, (const int[]){0, 2, 1, 3, 4});
    x = sam_reshape(b, x, 3, (int64_t[]){n * w, n * w, c});
    if (n * w != side) {
        x = rlx_graph_slice(b->g, NULL, x, 0, K(0), K(side));
        x = rlx_graph_slice(b->g, NULL, x, 1, K(0), K(side));
    }
    return sam_reshape(b, x, 2, (int64_t[]){side * side, c});
}

/* One Hiera block on x [side^2, dim]; *side becomes the output grid's. */
static rlx_node hiera_block(sb *b, rlx_node x, int il, int64_t *side_io)
{
    rlx_graph *g = b->g;
    const sam2_block *blk = &b->m->h2.blk[il];
    const int64_t din = blk->dim, dout = blk->dim_out, H = blk->heads, hd = dout / H;
    const int64_t side = *side_io, oside = blk->pool ? side / 2 : side;
    char pre[64];
    snprintf(pre, sizeof pre, "image_encoder.trunk.blocks.%d", il);
    rlx_node h = layer_norm(b, x, LN_HIERA, "%s.norm1", pre);
    rlx_node shortcut = x;
    if (din != dout) {
        shortcut = linear(b, h, "%s.proj", pre);
        if (blk->pool)
            shortcut = pool2(b, shortcut, 1, side, dout);
    }
    int64_t w = blk->window ? blk->window : side, n = blk->window ? (side + w - 1) / w : 1;
    if (blk->window)
        h = partition(b, h, side, w, din);
    rlx_node qkv = linear(b, h, "%s.attn.qkv", pre); /* [n * n * w * w, 3 * dout] */
    const int64_t nb = n * n, S = w * w;
    int64_t qw = w;
    rlx_node t[3];
    for (int i = 0; i < 3; i++)
        t[i] = rlx_graph_slice(g, NULL, qkv, 1, K(i * dout), K(dout));
    if (blk->pool) {
        t[0] = pool2(b, t[0], nb, w, dout);
        qw = w / 2;
    }
    const int64_t len[3] = {qw * qw, S, S};
    for (int i = 0; i < 3; i++) {
        t[i] = sam_reshape(b, t[i], 4, (int64_t[]){nb, len[i], H, hd});
        t[i] = sam_permute(b, t[i], (const int[]){0, 2, 1, 3});
    }
    rlx_attention_params ap = {.mask = RLX_MASK_NONE, .scale = 1.0f / sqrtf((float)hd)};
    rlx_node a = rlx_graph_attention(g, NULL, t[0], t[1], t[2], RLX_NODE_INVALID, ap);
    a = sam_permute(b, a, (const int[]){0, 2, 1, 3});
    a = sam_reshape(b, a, 2, (int64_t[]){nb * len[0], dout});
    a = linear(b, a, "%s.attn.proj", pre);
    if (blk->window)
        a = unpartition(b, a, n, qw, oside, dout);
    x = rlx_graph_add(g, NULL, shortcut, a);
    h = layer_norm(b, x, LN_HIERA, "%s.norm2", pre);
    h = rlx_graph_gelu(g, NULL, linear(b, h, "%s.mlp.layers.0", pre), RLX_GELU_ERF);
    *side_io = oside;
    return rlx_graph_add(g, NULL, x, linear(b, h, "%s.mlp.layers.1", pre));
}

static void write_state(sb *b, const char *name, rlx_node x, int64_t rows, int64_t cols)
{
    rlx_node s =
        rlx_graph_state(b->g, name, RLX_DTYPE_F32, rlx_shape_make(2, (int64_t[]){rows, cols}));
    rlx_graph_scatter(b->g, NULL, s, x, 0, K(0));
}

rlx_status sam2_build_encoder(const sam_model *m, rlx_graph **out, rlx_error **err)
{
    *out = NULL;
    sb b = {.g = rlx_graph_create(), .m = m};
    if (!b.g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the SAM 2 encoder");
    rlx_graph *g = b.g;
    const sam2_hparams *h = &m->h2;
    const int64_t E0 = h->embed;
    rlx_node img = rlx_graph_input(
        g, "image", RLX_DTYPE_F32,
        rlx_shape_make(4, (int64_t[]){1, 3, RLX_SAM_IMAGE_SIZE, RLX_SAM_IMAGE_SIZE}));
    const int st4[2] = {4, 4}, st1[2] = {1, 1}, p3[2] = {3, 3};
    rlx_node x = rlx_graph_conv2d(
        g, "patch_embed", img, sam_param(&b, "image_encoder.trunk.patch_embed.proj.weight"),
        sam_param(&b, "image_encoder.trunk.patch_embed.proj.bias"), st4, p3, st1, 1);
    x = sam_reshape(&b, sam_permute(&b, x, (const int[]){0, 2, 3, 1}), 2,
                    (int64_t[]){(int64_t)SIDE0 * SIDE0, E0});
    x = rlx_graph_add(g, NULL, x, position_embedding(&b));
    rlx_node feats[4];
    int64_t side = SIDE0, sides[4];
    for (int il = 0, s = 0; il < h->depth; il++) {
        x = hiera_block(&b, x, il, &side);
        if (s < 4 && il == h->stage_end[s]) {
            feats[s] = x;
            sides[s++] = side;
        }
    }
    if (sides[0] != SIDE0 || sides[1] != SIDE0 / 2 || sides[2] != GRID || sides[3] != GRID / 2) {
        rlx_graph_free(g);
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "SAM 2: the Hiera stages give grids of %lld, %lld, %lld and %lld; "
                             "256, 128, 64 and 32 are expected",
                             (long long)sides[0], (long long)sides[1], (long long)sides[2],
                             (long long)sides[3]);
    }
    /* FPN: convs.k reads stage 3 - k; top-down (nearest, x2) only into the 64 x 64 level */
    char nm[64];
    rlx_node lat[4];
    for (int s = 0; s < 4; s++) {
        snprintf(nm, sizeof nm, "image_encoder.neck.convs.%d.conv", 3 - s);
        lat[s] = conv1x1(&b, feats[s], C, h->blk[h->stage_end[s]].dim_out, nm);
    }
    const int64_t G2 = GRID / 2;
    rlx_node up = sam_reshape(&b, lat[3], 5, (int64_t[]){G2, 1, G2, 1, C});
    rlx_node emb = sam_reshape(&b, lat[2], 5, (int64_t[]){G2, 2, G2, 2, C});
    emb = sam_reshape(&b, rlx_graph_add(g, NULL, emb, up), 2, (int64_t[]){NTOK, C});
    emb = rlx_graph_add(g, NULL, emb,
                        sam_reshape(&b, sam_param(&b, "no_mem_embed"), 1, (int64_t[]){C}));
    rlx_node s0 = conv1x1(&b, lat[0], C / 8, C, "sam_mask_decoder.conv_s0");
    rlx_node s1 = conv1x1(&b, lat[1], C / 4, C, "sam_mask_decoder.conv_s1");

    write_state(&b, SAM_STATE_EMBEDDING, emb, NTOK, C);
    write_state(&b, SAM_STATE_IMAGE_PE,
                sam_dense_pe(&b, "sam_prompt_encoder.pe_layer.positional_encoding_gaussian_matrix"),
                NTOK, C);
    write_state(&b, SAM2_STATE_FEAT_S0, s0, (int64_t)SIDE0 * SIDE0, C / 8);
    write_state(&b, SAM2_STATE_FEAT_S1, s1, (int64_t)SIDE0 * SIDE0 / 4, C / 4);
    rlx_node probe = rlx_graph_slice(g, NULL, emb, 0, K(0), K(1));
    rlx_graph_output(g, "probe", rlx_graph_slice(g, NULL, probe, 1, K(0), K(1)));
    return sam_build_finish(&b, out, "SAM 2 image encoder", err);
}

/* ---- decoder ------------------------------------------------------------ */

static rlx_node dec_attention(sb *b, const char *pre, rlx_node q, rlx_node k, rlx_node v,
                              int64_t nq, int64_t nk, int64_t inner)
{
    const int64_t H = SAM_DEC_HEADS, hd = inner / H;
    rlx_node in[3] = {q, k, v};
    const char *which[3] = {"q_proj", "k_proj", "v_proj"};
    const int64_t len[3] = {nq, nk, nk};
    for (int i = 0; i < 3; i++) {
        rlx_node t = linear(b, in[i], "%s.%s", pre, which[i]);
        t = sam_permute(b, sam_reshape(b, t, 3, (int64_t[]){len[i], H, hd}),
                        (const int[]){1, 0, 2});
        in[i] = sam_reshape(b, t, 4, (int64_t[]){1, H, len[i], hd});
    }
    rlx_attention_params ap = {.mask = RLX_MASK_NONE};
    rlx_node a = rlx_graph_attention(b->g, NULL, in[0], in[1], in[2], RLX_NODE_INVALID, ap);
    a = sam_reshape(b, a, 3, (int64_t[]){H, nq, hd});
    a = sam_reshape(b, sam_permute(b, a, (const int[]){1, 0, 2}), 2, (int64_t[]){nq, inner});
    return linear(b, a, "%s.out_proj", pre);
}

/* ConvTranspose2d 2x2 / 2 on tokens [side^2, cin] -> [(2 side)^2, cout] (as in
 * sam-graph.c: one matmul and one permute, channels-last throughout). */
static rlx_node upscale(sb *b, rlx_node x, int64_t side, int64_t cin, int64_t cout, const char *pre)
{
    rlx_node w = sam_reshape(b, sam_param(b, "%s.weight", pre), 2, (int64_t[]){cin, cout * 4});
    rlx_node y = rlx_graph_matmul(b->g, NULL, x, w, false, false);
    y = sam_reshape(b, y, 5, (int64_t[]){side, side, cout, 2, 2});
    y = sam_permute(b, y, (const int[]){0, 3, 1, 4, 2});
    y = sam_reshape(b, y, 2, (int64_t[]){4 * side * side, cout});
    return rlx_graph_add(b->g, NULL, y, sam_param(b, "%s.bias", pre));
}

static rlx_node mlp3(sb *b, rlx_node x, const char *pre)
{
    for (int i = 0; i < 3; i++) {
        x = linear(b, x, "%s.layers.%d", pre, i);
        if (i < 2)
            x = rlx_graph_relu(b->g, NULL, x);
    }
    return x;
}

rlx_status sam2_build_decoder(const sam_model *m, int n_tokens, bool with_mask, rlx_graph **out,
                              rlx_error **err)
{
    *out = NULL;
    if (n_tokens < 1 || n_tokens > RLX_SAM_MAX_POINTS + 3)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "SAM 2 decoder: %d prompt tokens", n_tokens);
    sb b = {.g = rlx_graph_create(), .m = m};
    if (!b.g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the SAM 2 decoder");
    rlx_graph *g = b.g;
    const int64_t NP = n_tokens, NQ = 6 + NP, CI = C / 2;
    const char *d = "sam_mask_decoder", *pe_name = "sam_prompt_encoder";
    rlx_node coords =
        rlx_graph_input(g, "coords", RLX_DTYPE_F32, rlx_shape_make(2, (int64_t[]){NP, 2}));
    rlx_node kinds = rlx_graph_input(g, "kinds", RLX_DTYPE_I32, rlx_shape_make(1, (int64_t[]){NP}));

    rlx_node c = rlx_graph_scale(g, NULL, coords, 1.0f, 0.5f);
    c = rlx_graph_scale(g, NULL, c, 1.0f / RLX_SAM_IMAGE_SIZE, 0.0f);
    c = rlx_graph_scale(g, NULL, c, 2.0f, -1.0f);
    rlx_node pe = rlx_graph_matmul(
        g, NULL, c, sam_param(&b, "%s.pe_layer.positional_encoding_gaussian_matrix", pe_name),
        false, false);
    pe = rlx_graph_scale(g, NULL, pe, SAM_TWO_PI, 0.0f);
    rlx_node sc[2] = {rlx_graph_unary(g, NULL, RLX_OP_SIN, pe),
                      rlx_graph_unary(g, NULL, RLX_OP_COS, pe)};
    pe = rlx_graph_concat(g, NULL, 2, sc, 1);
    const float keep_tab[5] = {0, 1, 1, 1, 1};
    rlx_node keep = rlx_graph_gather(
        g, NULL, rlx_graph_const_f32(g, "keep", rlx_shape_make(2, (int64_t[]){5, 1}), keep_tab),
        kinds);
    rlx_node kind_rows[5] = {sam_param(&b, "%s.not_a_point_embed.weight", pe_name),
                             sam_param(&b, "%s.point_embeddings.0.weight", pe_name),
                             sam_param(&b, "%s.point_embeddings.1.weight", pe_name),
                             sam_param(&b, "%s.point_embeddings.2.weight", pe_name),
                             sam_param(&b, "%s.point_embeddings.3.weight", pe_name)};
    rlx_node kind_tab = rlx_graph_concat(g, NULL, 5, kind_rows, 0);
    rlx_node sparse = rlx_graph_add(g, NULL, rlx_graph_mul(g, NULL, pe, keep),
                                    rlx_graph_gather(g, NULL, kind_tab, kinds));
    rlx_node toks[4] = {sam_param(&b, "%s.obj_score_token.weight", d),
                        sam_param(&b, "%s.iou_token.weight", d),
                        sam_param(&b, "%s.mask_tokens.weight", d), sparse};
    rlx_node tokens = rlx_graph_concat(g, "tokens", 4, toks, 0); /* [NQ, 256] */

    rlx_node emb = rlx_graph_state(g, SAM_STATE_EMBEDDING, RLX_DTYPE_F32,
                                   rlx_shape_make(2, (int64_t[]){NTOK, C}));
    rlx_node kpe = rlx_graph_state(g, SAM_STATE_IMAGE_PE, RLX_DTYPE_F32,
                                   rlx_shape_make(2, (int64_t[]){NTOK, C}));
    rlx_node fs0 = rlx_graph_state(g, SAM2_STATE_FEAT_S0, RLX_DTYPE_F32,
                                   rlx_shape_make(2, (int64_t[]){(int64_t)SIDE0 * SIDE0, C / 8}));
    rlx_node fs1 =
        rlx_graph_state(g, SAM2_STATE_FEAT_S1, RLX_DTYPE_F32,
                        rlx_shape_make(2, (int64_t[]){(int64_t)SIDE0 * SIDE0 / 4, C / 4}));
    const int64_t MSIDE = RLX_SAM_MASK_SIDE;
    rlx_node dense =
        with_mask ? sam_mask_dense(&b,
                                   rlx_graph_input(g, "mask", RLX_DTYPE_F32,
                                                   rlx_shape_make(2, (int64_t[]){MSIDE, MSIDE})),
                                   pe_name)
                  : sam_param(&b, "%s.no_mask_embed.weight", pe_name);
    rlx_node keys = rlx_graph_add(g, NULL, emb, dense);
    rlx_node queries = tokens;
    char pre[96], nm[128];
    for (int il = 0; il < SAM_DEC_DEPTH; il++) {
        snprintf(pre, sizeof pre, "%s.transformer.layers.%d", d, il);
        snprintf(nm, sizeof nm, "%s.self_attn", pre);
        if (il == 0) {
            queries = dec_attention(&b, nm, queries, queries, queries, NQ, NQ, C);
        } else {
            rlx_node q = rlx_graph_add(g, NULL, queries, tokens);
            queries =
                rlx_graph_add(g, NULL, queries, dec_attention(&b, nm, q, q, queries, NQ, NQ, C));
        }
        queries = layer_norm(&b, queries, LN_DEC, "%s.norm1", pre);
        rlx_node q = rlx_graph_add(g, NULL, queries, tokens);
        rlx_node k = rlx_graph_add(g, NULL, keys, kpe);
        snprintf(nm, sizeof nm, "%s.cross_attn_token_to_image", pre);
        queries = rlx_graph_add(g, NULL, queries, dec_attention(&b, nm, q, k, keys, NQ, NTOK, CI));
        queries = layer_norm(&b, queries, LN_DEC, "%s.norm2", pre);
        rlx_node hm = rlx_graph_relu(g, NULL, linear(&b, queries, "%s.mlp.layers.0", pre));
        queries = rlx_graph_add(g, NULL, queries, linear(&b, hm, "%s.mlp.layers.1", pre));
        queries = layer_norm(&b, queries, LN_DEC, "%s.norm3", pre);
        q = rlx_graph_add(g, NULL, queries, tokens);
        k = rlx_graph_add(g, NULL, keys, kpe);
        snprintf(nm, sizeof nm, "%s.cross_attn_image_to_token", pre);
        keys = rlx_graph_add(g, NULL, keys, dec_attention(&b, nm, k, q, queries, NTOK, NQ, CI));
        keys = layer_norm(&b, keys, LN_DEC, "%s.norm4", pre);
    }
    {
        rlx_node q = rlx_graph_add(g, NULL, queries, tokens);
        rlx_node k = rlx_graph_add(g, NULL, keys, kpe);
        snprintf(nm, sizeof nm, "%s.transformer.final_attn_token_to_image", d);
        queries = rlx_graph_add(g, NULL, queries, dec_attention(&b, nm, q, k, keys, NQ, NTOK, CI));
        queries = layer_norm(&b, queries, LN_DEC, "%s.transformer.norm_final_attn", d);
    }

    /* upscaling with the high-res features: act(ln(dc1(src) + s1)), act(dc2(.) + s0) */
    snprintf(nm, sizeof nm, "%s.output_upscaling.0", d);
    rlx_node u = rlx_graph_add(g, NULL, upscale(&b, keys, GRID, C, C / 4, nm), fs1);
    u = layer_norm(&b, u, LN_HIERA, "%s.output_upscaling.1", d);
    u = rlx_graph_gelu(g, NULL, u, RLX_GELU_ERF);
    snprintf(nm, sizeof nm, "%s.output_upscaling.3", d);
    u = rlx_graph_add(g, NULL, upscale(&b, u, 2 * GRID, C / 4, C / 8, nm), fs0);
    u = rlx_graph_gelu(g, NULL, u, RLX_GELU_ERF);
    const int64_t MS = RLX_SAM_MASK_SIDE;

    rlx_node hyper[RLX_SAM_MAX_MASKS];
    for (int i = 0; i < RLX_SAM_MAX_MASKS; i++) {
        rlx_node t = rlx_graph_slice(g, NULL, queries, 0, K(2 + i), K(1));
        snprintf(nm, sizeof nm, "%s.output_hypernetworks_mlps.%d", d, i);
        hyper[i] = mlp3(&b, t, nm);
    }
    rlx_node hin = rlx_graph_concat(g, NULL, RLX_SAM_MAX_MASKS, hyper, 0);
    rlx_node masks = rlx_graph_matmul(g, "masks", hin, u, false, true);
    rlx_graph_output(g, "masks", sam_reshape(&b, masks, 3, (int64_t[]){RLX_SAM_MAX_MASKS, MS, MS}));
    snprintf(nm, sizeof nm, "%s.iou_prediction_head", d);
    rlx_node iou = mlp3(&b, rlx_graph_slice(g, NULL, queries, 0, K(1), K(1)), nm);
    rlx_graph_output(g, "iou", rlx_graph_sigmoid(g, NULL, iou));
    snprintf(nm, sizeof nm, "%s.pred_obj_score_head", d);
    rlx_graph_output(g, "object", mlp3(&b, rlx_graph_slice(g, NULL, queries, 0, K(0), K(1)), nm));
    return sam_build_finish(&b, out, "SAM 2 mask decoder", err);
}
