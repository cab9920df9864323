/* MobileSAM's image encoder (TinyViT, tiny_vit_sam.py) as a graph of the IR.
 *
 * patch_embed: two 3x3 stride-2 Conv2d_BN with a GELU between (1024 -> 256 grid).
 * Stage 0: MBConv blocks (1x1 expand x4, GELU, 3x3 depthwise, GELU, 1x1, + the
 * input, GELU), channels-first. Stages 1-3: TinyViT blocks on tokens [H * W, C]:
 * the grid zero-padded to whole windows and cut into them (the padding goes
 * through the attention's LayerNorm as the reference's does, so padded keys are
 * the norm's bias, not zeros), attention whose qkv rows are per head (q, k, v of
 * head 0, then head 1, ...) with the learned bias attention_biases[h, idx[q, k]]
 * added to the scaled scores, the windows put back and cropped, + the input; a 3x3
 * depthwise Conv2d_BN (no residual), then x + MLP(LayerNorm). Each stage but the
 * last ends in a PatchMerging (1x1, GELU, 3x3 depthwise with stride 2, or 1 into
 * MobileSAM's 320 channels, GELU, 1x1). The neck and the states are SAM's
 * (sam_finish_encoder).
 *
 * BatchNorm runs in eval mode: scale = weight / sqrt(running_var + eps) and shift =
 * bias - running_mean * scale are folded into the conv's weight and bias by ops of
 * the graph (a few thousand values per run), so the file's tensors are bound as
 * they are, mapped and never rewritten on the host.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph.h"
#include "models/sam/sam-internal.h"

#define BN_EPS 1e-5f /* nn.BatchNorm2d */
#define LN_EPS 1e-5f /* nn.LayerNorm in Attention and Mlp */

typedef sam_builder tb;

int sam_tinyvit_bias_index(int ws, int32_t *idx)
{
    /* offsets (dy, dx) in 0..ws-1 each: a table of their numbers, -1 unseen */
    int *num = malloc(sizeof *num * (size_t)ws * (size_t)ws);
    if (!num)
        return -1;
    for (int i = 0; i < ws * ws; i++)
        num[i] = -1;
    int n = 0;
    const int S = ws * ws;
    for (int p = 0; p < S; p++)
        for (int q = 0; q < S; q++) {
            int dy = abs(p / ws - q / ws), dx = abs(p % ws - q % ws);
            int *slot = &num[dy * ws + dx];
            if (*slot < 0)
                *slot = n++;
            if (idx)
                idx[(size_t)p * (size_t)S + (size_t)q] = *slot;
        }
    free(num);
    return n;
}

int sam_tinyvit_merge_stride(int out_dim)
{
    return out_dim == 320 || out_dim == 448 || out_dim == 576 ? 1 : 2;
}

static rlx_node gelu(tb *b, rlx_node x)
{
    return rlx_graph_gelu(b->g, NULL, x, RLX_GELU_ERF); /* nn.GELU() */
}

static rlx_node linear(tb *b, rlx_node x, const char *pre, const char *part)
{
    return rlx_graph_linear(b->g, NULL, x, sam_param(b, "%s.%s.weight", pre, part),
                            sam_param(b, "%s.%s.bias", pre, part));
}

static rlx_node layer_norm(tb *b, rlx_node x, const char *pre, const char *part)
{
    return rlx_graph_layer_norm(b->g, NULL, x, sam_param(b, "%s.%s.weight", pre, part),
                                sam_param(b, "%s.%s.bias", pre, part), LN_EPS);
}

/* Conv2d_BN "<pre>" on x [1, cin, H, W]: k x k, pad k / 2, BatchNorm folded in. */
static rlx_node conv_bn(tb *b, rlx_node x, const char *pre, int64_t cout, int k, int stride,
                        int groups)
{
    rlx_graph *g = b->g;
    rlx_node var = rlx_graph_scale(g, NULL, sam_param(b, "%s.bn.running_var", pre), 1.0f, BN_EPS);
    rlx_node scale =
        rlx_graph_div(g, NULL, sam_param(b, "%s.bn.weight", pre), rlx_graph_sqrt(g, NULL, var));
    rlx_node shift =
        rlx_graph_sub(g, NULL, sam_param(b, "%s.bn.bias", pre),
                      rlx_graph_mul(g, NULL, sam_param(b, "%s.bn.running_mean", pre), scale));
    rlx_node w = rlx_graph_mul(g, NULL, sam_param(b, "%s.c.weight", pre),
                               sam_reshape(b, scale, 4, (int64_t[]){cout, 1, 1, 1}));
    const int st[2] = {stride, stride}, pad[2] = {k / 2, k / 2}, dil[2] = {1, 1};
    return rlx_graph_conv2d(g, NULL, x, w, shift, st, pad, dil, groups);
}

/* Tokens [side * side, c] <-> channels-first [1, c, side, side]. */
static rlx_node to_chw(tb *b, rlx_node x, int64_t side, int64_t c)
{
    return sam_reshape(b, sam_permute(b, x, (const int[]){1, 0}), 4, (int64_t[]){1, c, side, side});
}

static rlx_node to_tokens(tb *b, rlx_node x, int64_t side, int64_t c)
{
    return sam_permute(b, sam_reshape(b, x, 2, (int64_t[]){c, side * side}), (const int[]){1, 0});
}

static rlx_node mbconv(tb *b, rlx_node x, int il, int64_t d)
{
    char pre[96];
    snprintf(pre, sizeof pre, "image_encoder.layers.0.blocks.%d.conv1", il);
    rlx_node h = gelu(b, conv_bn(b, x, pre, 4 * d, 1, 1, 1));
    snprintf(pre, sizeof pre, "image_encoder.layers.0.blocks.%d.conv2", il);
    h = gelu(b, conv_bn(b, h, pre, 4 * d, 3, 1, (int)(4 * d)));
    snprintf(pre, sizeof pre, "image_encoder.layers.0.blocks.%d.conv3", il);
    h = conv_bn(b, h, pre, d, 1, 1, 1);
    return gelu(b, rlx_graph_add(b->g, NULL, x, h));
}

/* PatchMerging at the end of stage s: [1, d, side, side] -> [1, o, side', side']. */
static rlx_node merge(tb *b, rlx_node x, int s, int64_t o)
{
    char pre[96];
    snprintf(pre, sizeof pre, "image_encoder.layers.%d.downsample.conv1", s);
    rlx_node h = gelu(b, conv_bn(b, x, pre, o, 1, 1, 1));
    snprintf(pre, sizeof pre, "image_encoder.layers.%d.downsample.conv2", s);
    h = gelu(b, conv_bn(b, h, pre, o, 3, sam_tinyvit_merge_stride((int)o), (int)o));
    snprintf(pre, sizeof pre, "image_encoder.layers.%d.downsample.conv3", s);
    return conv_bn(b, h, pre, o, 1, 1, 1);
}

/* attention_biases [heads, n] gathered at the window's index: [1, heads, S, S]. */
static rlx_node attn_bias(tb *b, const char *pre, int64_t heads, int ws)
{
    const int64_t S = (int64_t)ws * ws;
    int32_t *idx = malloc(sizeof *idx * (size_t)(S * S));
    if (!idx || sam_tinyvit_bias_index(ws, idx) < 0) {
        free(idx);
        snprintf(b->missing, sizeof b->missing, "out of memory");
        return RLX_NODE_INVALID;
    }
    rlx_node ids = rlx_graph_const_i32(b->g, NULL, rlx_shape_make(2, (int64_t[]){S, S}), idx);
    free(idx);
    rlx_node tab =
        sam_permute(b, sam_param(b, "%s.attn.attention_biases", pre), (const int[]){1, 0});
    rlx_node bias = rlx_graph_gather(b->g, NULL, tab, ids); /* [S, S, heads] */
    bias = sam_permute(b, bias, (const int[]){2, 0, 1});
    return sam_reshape(b, bias, 4, (int64_t[]){1, heads, S, S});
}

/* One TinyViTBlock on tokens x [side * side, d]. */
static rlx_node vit_block(tb *b, rlx_node x, int s, int il, int64_t side)
{
    rlx_graph *g = b->g;
    const sam_tinyvit *tv = &b->m->tv;
    const int64_t d = tv->dims[s], H = tv->heads[s], hd = d / H;
    const int ws = tv->windows[s];
    const int64_t nw = (side + ws - 1) / ws, ps = nw * ws, nb = nw * nw, S = (int64_t)ws * ws;
    char pre[96];
    snprintf(pre, sizeof pre, "image_encoder.layers.%d.blocks.%d", s, il);

    /* windows: pad, [nw, ws, nw, ws, d] -> [nw, nw, ws, ws, d] */
    rlx_node h = sam_reshape(b, x, 3, (int64_t[]){side, side, d});
    if (ps != side)
        h = rlx_graph_pad(g, NULL, h, (int64_t[]){0, 0, 0}, (int64_t[]){ps - side, ps - side, 0},
                          0.0f);
    h = sam_reshape(b, h, 5, (int64_t[]){nw, ws, nw, ws, d});
    h = sam_permute(b, h, (const int[]){0, 2, 1, 3, 4});
    h = sam_reshape(b, h, 2, (int64_t[]){nb * S, d});
    h = layer_norm(b, h, pre, "attn.norm");
    rlx_node qkv = linear(b, h, pre, "attn.qkv"); /* [nb * S, heads x (q | k | v)] */
    qkv = sam_reshape(b, qkv, 5, (int64_t[]){nb, S, H, 3, hd});
    qkv = sam_permute(b, qkv, (const int[]){3, 0, 2, 1, 4}); /* [3, nb, H, S, hd] */
    rlx_node q[3];
    for (int i = 0; i < 3; i++)
        q[i] = sam_reshape(b, rlx_graph_slice(g, NULL, qkv, 0, rlx_dim_const(i), rlx_dim_const(1)),
                           4, (int64_t[]){nb, H, S, hd});
    rlx_attention_params ap = {.mask = RLX_MASK_NONE, .scale = 1.0f / sqrtf((float)hd)};
    rlx_node a = rlx_graph_attention(g, NULL, q[0], q[1], q[2], attn_bias(b, pre, H, ws), ap);
    a = sam_permute(b, a, (const int[]){0, 2, 1, 3}); /* [nb, S, H, hd] */
    a = linear(b, sam_reshape(b, a, 2, (int64_t[]){nb * S, d}), pre, "attn.proj");
    /* windows back, cropped */
    a = sam_reshape(b, a, 5, (int64_t[]){nw, nw, ws, ws, d});
    a = sam_permute(b, a, (const int[]){0, 2, 1, 3, 4});
    a = sam_reshape(b, a, 3, (int64_t[]){ps, ps, d});
    if (ps != side) {
        a = rlx_graph_slice(g, NULL, a, 0, rlx_dim_const(0), rlx_dim_const(side));
        a = rlx_graph_slice(g, NULL, a, 1, rlx_dim_const(0), rlx_dim_const(side));
    }
    x = rlx_graph_add(g, NULL, x, sam_reshape(b, a, 2, (int64_t[]){side * side, d}));

    char nm[112];
    snprintf(nm, sizeof nm, "%s.local_conv", pre);
    x = to_tokens(b, conv_bn(b, to_chw(b, x, side, d), nm, d, 3, 1, (int)d), side, d);

    h = layer_norm(b, x, pre, "mlp.norm");
    h = linear(b, gelu(b, linear(b, h, pre, "mlp.fc1")), pre, "mlp.fc2");
    return rlx_graph_add(g, NULL, x, h);
}

rlx_status sam_build_tinyvit_encoder(const sam_model *m, rlx_graph **out, rlx_error **err)
{
    *out = NULL;
    tb b = {.g = rlx_graph_create(), .m = m};
    if (!b.g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the SAM encoder");
    rlx_graph *g = b.g;
    const sam_tinyvit *tv = &m->tv;
    rlx_node x = rlx_graph_input(
        g, "image", RLX_DTYPE_F32,
        rlx_shape_make(4, (int64_t[]){1, 3, RLX_SAM_IMAGE_SIZE, RLX_SAM_IMAGE_SIZE}));
    x = gelu(&b, conv_bn(&b, x, "image_encoder.patch_embed.seq.0", tv->dims[0] / 2, 3, 2, 1));
    x = conv_bn(&b, x, "image_encoder.patch_embed.seq.2", tv->dims[0], 3, 2, 1);
    int64_t side = SAM_TV_SIDE;
    for (int il = 0; il < tv->depths[0]; il++)
        x = mbconv(&b, x, il, tv->dims[0]);
    for (int s = 0; s + 1 < SAM_TV_STAGES; s++) {
        x = merge(&b, x, s, tv->dims[s + 1]); /* channels-first in, channels-first out */
        side = (side - 1) / sam_tinyvit_merge_stride(tv->dims[s + 1]) + 1;
        x = to_tokens(&b, x, side, tv->dims[s + 1]);
        for (int il = 0; il < tv->depths[s + 1]; il++)
            x = vit_block(&b, x, s + 1, il, side);
        if (s + 2 < SAM_TV_STAGES)
            x = to_chw(&b, x, side, tv->dims[s + 1]);
    }
    if (side != RLX_SAM_EMBED_SIDE && !b.missing[0])
        snprintf(b.missing, sizeof b.missing, "TinyViT ends on a %lld x %lld grid", (long long)side,
                 (long long)side);
    return sam_finish_encoder(m, g, x, tv->dims[SAM_TV_STAGES - 1], b.missing, out, err);
}
