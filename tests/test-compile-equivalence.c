/* The optimizations must not change results: each small graph runs on the
 * CPU backend with no optional pass, with every pass, and with each pass
 * turned off in turn (and with ops refused so that legalization rewrites
 * them), and the outputs are compared. */
#include "pass-test.h"

#define TOL 1e-4f

typedef rlx_graph *(*builder)(void);

static void fill(float *p, int n, float a, float b)
{
    for (int i = 0; i < n; i++)
        p[i] = sinf((float)i * a + b) * 0.5f;
}

/* ---- MLP with GELU (GeGLU), bias, residual and layer norm ---- */
static float mlp_x[5 * 8], mlp_up[32 * 8], mlp_upb[32], mlp_gate[32 * 8], mlp_down[8 * 32],
    mlp_g[8], mlp_b[8];

static rlx_graph *mlp(void)
{
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 8);
    rlx_dim S = rlx_dim_sym(seq);
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32,
                                 rlx_shape_make_dims(2, (rlx_dim[]){S, rlx_dim_const(8)}));
    rlx_node up = rlx_graph_param(g, "up.w", RLX_DTYPE_F32, pt_c2(32, 8));
    rlx_node upb = rlx_graph_param(g, "up.b", RLX_DTYPE_F32, pt_c1(32));
    rlx_node gate = rlx_graph_param(g, "gate.w", RLX_DTYPE_F32, pt_c2(32, 8));
    rlx_node down = rlx_graph_param(g, "down.w", RLX_DTYPE_F32, pt_c2(8, 32));
    rlx_node gm = rlx_graph_param(g, "ln.w", RLX_DTYPE_F32, pt_c1(8));
    rlx_node bt = rlx_graph_param(g, "ln.b", RLX_DTYPE_F32, pt_c1(8));
    rlx_node h = rlx_graph_linear(g, "up", x, up, upb);
    rlx_node a = rlx_graph_gelu(g, "act", rlx_graph_linear(g, "gate", x, gate, RLX_NODE_INVALID),
                                RLX_GELU_ERF);
    rlx_node y =
        rlx_graph_linear(g, "down", rlx_graph_mul(g, "geglu", a, h), down, RLX_NODE_INVALID);
    /* written twice on purpose (CSE) and with a constant subexpression */
    float half = 0.5f;
    rlx_node c = rlx_graph_scale(
        g, "c", rlx_graph_const_f32(g, "half", rlx_shape_make(0, NULL), &half), 2.0f, 0.0f);
    rlx_node r1 = rlx_graph_add(g, "res1", x, rlx_graph_mul(g, "yc", y, c));
    rlx_node r2 = rlx_graph_add(g, "res2", x, rlx_graph_mul(g, "yc2", y, c));
    rlx_node ln = rlx_graph_layer_norm(g, "ln", rlx_graph_add(g, "rr", r1, r2), gm, bt, 1e-5f);
    rlx_graph_silu(g, "unused", ln);
    rlx_graph_output(g, "y", ln);
    return g;
}

static rlx_test_tensor mlp_params[] = {{"up.w", mlp_up},     {"up.b", mlp_upb},
                                       {"gate.w", mlp_gate}, {"down.w", mlp_down},
                                       {"ln.w", mlp_g},      {"ln.b", mlp_b}};

/* ---- attention block with RoPE, GQA and a KV-cache state ---- */
#define MAXT 12
static float at_x[3 * 16], at_nw[16], at_wq[16 * 16], at_wk[8 * 16], at_wv[8 * 16], at_wo[16 * 16],
    at_ck[2 * MAXT * 4], at_cv[2 * MAXT * 4];
static int32_t at_pos[3] = {2, 3, 4};

static rlx_node heads(rlx_graph *g, const char *name, rlx_node t, rlx_dim S, int h, rlx_node pos)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s.split", name);
    rlx_node r = rlx_graph_reshape(
        g, nm, t, rlx_shape_make_dims(3, (rlx_dim[]){S, rlx_dim_const(h), rlx_dim_const(4)}));
    if (pos != RLX_NODE_INVALID) {
        snprintf(nm, sizeof nm, "%s.rope", name);
        r = rlx_graph_rope(g, nm, r, pos, RLX_NODE_INVALID,
                           (rlx_rope_params){.mode = RLX_ROPE_NEOX, .freq_base = 10000.0f});
    }
    snprintf(nm, sizeof nm, "%s.b", name);
    r = rlx_graph_reshape(g, nm, r,
                          rlx_shape_make_dims(4, (rlx_dim[]){rlx_dim_const(1), S, rlx_dim_const(h),
                                                             rlx_dim_const(4)}));
    snprintf(nm, sizeof nm, "%s.t", name);
    return rlx_graph_permute(g, nm, r, (int[]){0, 2, 1, 3});
}

static rlx_graph *attn(void)
{
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 4);
    int past = rlx_graph_add_symbol(g, "PAST", 8);
    rlx_dim S = rlx_dim_sym(seq), P = rlx_dim_sym(past), T;
    rlx_dim_add(P, S, &T);
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32,
                                 rlx_shape_make_dims(2, (rlx_dim[]){S, rlx_dim_const(16)}));
    rlx_node pos = rlx_graph_input(g, "pos", RLX_DTYPE_I32, rlx_shape_make_dims(1, &S));
    rlx_node nw = rlx_graph_param(g, "norm.w", RLX_DTYPE_F32, pt_c1(16));
    rlx_node wq = rlx_graph_param(g, "q.w", RLX_DTYPE_F32, pt_c2(16, 16));
    rlx_node wk = rlx_graph_param(g, "k.w", RLX_DTYPE_F32, pt_c2(8, 16));
    rlx_node wv = rlx_graph_param(g, "v.w", RLX_DTYPE_F32, pt_c2(8, 16));
    rlx_node wo = rlx_graph_param(g, "o.w", RLX_DTYPE_F32, pt_c2(16, 16));
    rlx_node ck = rlx_graph_state(g, "cache.k", RLX_DTYPE_F32, pt_c4(1, 2, MAXT, 4));
    rlx_node cv = rlx_graph_state(g, "cache.v", RLX_DTYPE_F32, pt_c4(1, 2, MAXT, 4));
    rlx_node h = rlx_graph_rms_norm(g, "norm", x, RLX_NODE_INVALID, 1e-6f);
    h = rlx_graph_mul(g, "norm.scale", h, nw);
    rlx_node q = heads(g, "q", rlx_graph_linear(g, "q", h, wq, RLX_NODE_INVALID), S, 4, pos);
    rlx_node k = heads(g, "k", rlx_graph_linear(g, "k", h, wk, RLX_NODE_INVALID), S, 2, pos);
    rlx_node v =
        heads(g, "v", rlx_graph_linear(g, "v", h, wv, RLX_NODE_INVALID), S, 2, RLX_NODE_INVALID);
    rlx_node kst = rlx_graph_scatter(g, "k.store", ck, k, 2, P);
    rlx_node vst = rlx_graph_scatter(g, "v.store", cv, v, 2, P);
    rlx_node kk = rlx_graph_slice(g, "k.all", kst, 2, rlx_dim_const(0), T);
    rlx_node vv = rlx_graph_slice(g, "v.all", vst, 2, rlx_dim_const(0), T);
    rlx_node a = rlx_graph_attention(g, "attn", q, kk, vv, RLX_NODE_INVALID,
                                     (rlx_attention_params){.mask = RLX_MASK_CAUSAL});
    a = rlx_graph_permute(g, "attn.t", a, (int[]){0, 2, 1, 3});
    a = rlx_graph_reshape(g, "attn.m", a,
                          rlx_shape_make_dims(2, (rlx_dim[]){S, rlx_dim_const(16)}));
    rlx_node o = rlx_graph_add(g, "res", x, rlx_graph_linear(g, "o", a, wo, RLX_NODE_INVALID));
    /* a second pre-norm block on the residual stream: the fusion pass turns
     * res + norm2 into one add_rms_norm that keeps the sum for res2 */
    rlx_node h2 = rlx_graph_rms_norm(g, "norm2", o, RLX_NODE_INVALID, 1e-6f);
    h2 = rlx_graph_mul(g, "norm2.scale", h2, nw);
    o = rlx_graph_add(g, "res2", o, rlx_graph_linear(g, "o2", h2, wo, RLX_NODE_INVALID));
    rlx_graph_output(g, "y", o);
    return g;
}

static rlx_test_tensor at_params[] = {
    {"norm.w", at_nw}, {"q.w", at_wq}, {"k.w", at_wk}, {"v.w", at_wv}, {"o.w", at_wo}};

/* ---- conv + group norm block (VAE / UNet style) ---- */
static float cv_x[1 * 4 * 8 * 8], cv_w[8 * 4 * 3 * 3], cv_b[8], cv_g[8], cv_gb[8],
    cv_tw[8 * 4 * 2 * 2];

static rlx_graph *convblock(void)
{
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c4(1, 4, 8, 8));
    rlx_node w = rlx_graph_param(g, "conv.w", RLX_DTYPE_F32, pt_c4(8, 4, 3, 3));
    rlx_node b = rlx_graph_param(g, "conv.b", RLX_DTYPE_F32, pt_c1(8));
    rlx_node gw = rlx_graph_param(g, "gn.w", RLX_DTYPE_F32, pt_c1(8));
    rlx_node gb = rlx_graph_param(g, "gn.b", RLX_DTYPE_F32, pt_c1(8));
    rlx_node tw = rlx_graph_param(g, "up.w", RLX_DTYPE_F32, pt_c4(8, 4, 2, 2));
    rlx_node c =
        rlx_graph_conv2d(g, "conv", x, w, b, (int[]){1, 1}, (int[]){1, 1}, (int[]){1, 1}, 1);
    rlx_node n = rlx_graph_group_norm(g, "gn", c, 2, gw, gb, 1e-6f);
    rlx_node s = rlx_graph_silu(g, "silu", n);
    rlx_node u = rlx_graph_conv_transpose2d(g, "up", s, tw, RLX_NODE_INVALID, (int[]){2, 2},
                                            (int[]){0, 0}, (int[]){0, 0}, 1);
    rlx_node d = rlx_graph_resize(g, "down", u, 8, 8, RLX_RESIZE_BILINEAR, false);
    rlx_node y = rlx_graph_add(g, "res", rlx_graph_scale(g, "half", d, 0.5f, 0.0f), x);
    rlx_graph_output(g, "y", y);
    return g;
}

static rlx_test_tensor cv_params[] = {
    {"conv.w", cv_w}, {"conv.b", cv_b}, {"gn.w", cv_g}, {"gn.b", cv_gb}, {"up.w", cv_tw}};

/* ---- SAM-style windowed attention: pad, window partition by reshape/
 * permute, relative position bias as an additive attention bias ---- */
static float sam_x[6 * 6 * 8], sam_qkv[24 * 8], sam_rel[2 * 16 * 16];

static rlx_graph *sam_window(void)
{
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c4(1, 6, 6, 8));
    rlx_node wqkv = rlx_graph_param(g, "qkv.w", RLX_DTYPE_F32, pt_c2(24, 8));
    rlx_node rel =
        rlx_graph_param(g, "rel", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){2, 16, 16}));
    rlx_node p = rlx_graph_pad(g, "pad", x, (int64_t[]){0, 0, 0, 0}, (int64_t[]){0, 2, 2, 0}, 0.0f);
    rlx_node w = rlx_graph_reshape(g, "win", p, rlx_shape_make(6, (int64_t[]){1, 2, 4, 2, 4, 8}));
    w = rlx_graph_permute(g, "win.t", w, (int[]){0, 1, 3, 2, 4, 5});
    w = rlx_graph_reshape(g, "win.m", w, rlx_shape_make(3, (int64_t[]){4, 16, 8}));
    rlx_node qkv = rlx_graph_linear(g, "qkv", w, wqkv, RLX_NODE_INVALID);
    qkv = rlx_graph_reshape(g, "qkv.s", qkv, rlx_shape_make(5, (int64_t[]){4, 16, 3, 2, 4}));
    qkv = rlx_graph_permute(g, "qkv.t", qkv, (int[]){2, 0, 3, 1, 4}); /* [3, 4, 2, 16, 4] */
    rlx_node part[3];
    for (int i = 0; i < 3; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "part%d", i);
        part[i] = rlx_graph_slice(g, nm, qkv, 0, rlx_dim_const(i), rlx_dim_const(1));
        part[i] = rlx_graph_reshape(g, NULL, part[i], pt_c4(4, 2, 16, 4));
    }
    rlx_node a =
        rlx_graph_attention(g, "attn", part[0], part[1], part[2], rel, (rlx_attention_params){0});
    a = rlx_graph_permute(g, "attn.t", a, (int[]){0, 2, 1, 3});
    a = rlx_graph_reshape(g, "unwin", a, rlx_shape_make(6, (int64_t[]){1, 2, 2, 4, 4, 8}));
    a = rlx_graph_permute(g, "unwin.t", a, (int[]){0, 1, 3, 2, 4, 5});
    a = rlx_graph_reshape(g, "unwin.m", a, pt_c4(1, 8, 8, 8));
    a = rlx_graph_slice(g, "crop.h", a, 1, rlx_dim_const(0), rlx_dim_const(6));
    a = rlx_graph_slice(g, "crop.w", a, 2, rlx_dim_const(0), rlx_dim_const(6));
    rlx_graph_output(g, "y", rlx_graph_add(g, "res", x, a));
    return g;
}

static rlx_test_tensor sam_params[] = {{"qkv.w", sam_qkv}, {"rel", sam_rel}};

/* ---- FLUX-style joint attention over two streams ---- */
static float fx_t[5 * 8], fx_i[7 * 8], fx_w[8][8 * 8];

static rlx_node fx_heads(rlx_graph *g, rlx_node t, int64_t s)
{
    t = rlx_graph_reshape(g, NULL, t, pt_c4(1, s, 2, 4));
    return rlx_graph_permute(g, NULL, t, (int[]){0, 2, 1, 3});
}

static rlx_graph *flux_joint(void)
{
    rlx_graph *g = rlx_graph_create();
    rlx_node txt = rlx_graph_input(g, "txt", RLX_DTYPE_F32, pt_c2(5, 8));
    rlx_node img = rlx_graph_input(g, "img", RLX_DTYPE_F32, pt_c2(7, 8));
    rlx_node w[8];
    for (int i = 0; i < 8; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "w%d", i);
        w[i] = rlx_graph_param(g, nm, RLX_DTYPE_F32, pt_c2(8, 8));
    }
    rlx_node q[2], k[2], v[2];
    rlx_node src[2] = {txt, img};
    int64_t len[2] = {5, 7};
    for (int s = 0; s < 2; s++) {
        rlx_node h =
            rlx_graph_layer_norm(g, NULL, src[s], RLX_NODE_INVALID, RLX_NODE_INVALID, 1e-6f);
        q[s] = fx_heads(g, rlx_graph_linear(g, NULL, h, w[3 * s], RLX_NODE_INVALID), len[s]);
        k[s] = fx_heads(g, rlx_graph_linear(g, NULL, h, w[3 * s + 1], RLX_NODE_INVALID), len[s]);
        v[s] = fx_heads(g, rlx_graph_linear(g, NULL, h, w[3 * s + 2], RLX_NODE_INVALID), len[s]);
    }
    rlx_node a = rlx_graph_attention(
        g, "joint", rlx_graph_concat(g, "q", 2, q, 2), rlx_graph_concat(g, "k", 2, k, 2),
        rlx_graph_concat(g, "v", 2, v, 2), RLX_NODE_INVALID, (rlx_attention_params){0});
    for (int s = 0; s < 2; s++) {
        rlx_node o =
            rlx_graph_slice(g, NULL, a, 2, rlx_dim_const(s ? 5 : 0), rlx_dim_const(len[s]));
        o = rlx_graph_permute(g, NULL, o, (int[]){0, 2, 1, 3});
        o = rlx_graph_reshape(g, NULL, o, pt_c2(len[s], 8));
        o = rlx_graph_add(g, NULL, src[s],
                          rlx_graph_linear(g, NULL, o, w[6 + s], RLX_NODE_INVALID));
        rlx_graph_output(g, s ? "img" : "txt", o);
    }
    return g;
}

static rlx_test_tensor fx_params[] = {{"w0", fx_w[0]}, {"w1", fx_w[1]}, {"w2", fx_w[2]},
                                      {"w3", fx_w[3]}, {"w4", fx_w[4]}, {"w5", fx_w[5]},
                                      {"w6", fx_w[6]}, {"w7", fx_w[7]}};

/* ---- Whisper-style: conv1d front end, token embedding, cross attention ---- */
static float wh_mel[4 * 10], wh_c1[8 * 4 * 3], wh_c2[8 * 8 * 3], wh_pos[5 * 8], wh_emb[10 * 8],
    wh_wq[8 * 8], wh_wk[8 * 8], wh_wv[8 * 8];
static int32_t wh_tok[3] = {1, 7, 3};

static rlx_graph *whisper(void)
{
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 6);
    rlx_dim S = rlx_dim_sym(seq);
    rlx_node mel =
        rlx_graph_input(g, "mel", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){1, 4, 10}));
    rlx_node tok = rlx_graph_input(g, "tok", RLX_DTYPE_I32, rlx_shape_make_dims(1, &S));
    rlx_node c1 = rlx_graph_param(g, "c1", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){8, 4, 3}));
    rlx_node c2 = rlx_graph_param(g, "c2", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){8, 8, 3}));
    rlx_node pos = rlx_graph_param(g, "pos", RLX_DTYPE_F32, pt_c2(5, 8));
    rlx_node emb = rlx_graph_param(g, "emb", RLX_DTYPE_F32, pt_c2(10, 8));
    rlx_node wq = rlx_graph_param(g, "wq", RLX_DTYPE_F32, pt_c2(8, 8));
    rlx_node wk = rlx_graph_param(g, "wk", RLX_DTYPE_F32, pt_c2(8, 8));
    rlx_node wv = rlx_graph_param(g, "wv", RLX_DTYPE_F32, pt_c2(8, 8));
    rlx_node e = rlx_graph_gelu(
        g, NULL, rlx_graph_conv1d(g, "conv1", mel, c1, RLX_NODE_INVALID, 1, 1, 1, 1), RLX_GELU_ERF);
    e = rlx_graph_gelu(g, NULL, rlx_graph_conv1d(g, "conv2", e, c2, RLX_NODE_INVALID, 2, 1, 1, 1),
                       RLX_GELU_ERF);
    e = rlx_graph_transpose(g, NULL, e, 1, 2); /* [1, 5, 8] */
    e = rlx_graph_add(g, "enc", e, pos);
    rlx_node k = rlx_graph_permute(
        g, NULL,
        rlx_graph_reshape(g, NULL, rlx_graph_linear(g, NULL, e, wk, RLX_NODE_INVALID),
                          pt_c4(1, 5, 2, 4)),
        (int[]){0, 2, 1, 3});
    rlx_node v = rlx_graph_permute(
        g, NULL,
        rlx_graph_reshape(g, NULL, rlx_graph_linear(g, NULL, e, wv, RLX_NODE_INVALID),
                          pt_c4(1, 5, 2, 4)),
        (int[]){0, 2, 1, 3});
    rlx_node x = rlx_graph_gather(g, "tok_emb", emb, tok);
    rlx_node q = rlx_graph_linear(g, NULL, x, wq, RLX_NODE_INVALID);
    q = rlx_graph_reshape(g, NULL, q,
                          rlx_shape_make_dims(4, (rlx_dim[]){rlx_dim_const(1), S, rlx_dim_const(2),
                                                             rlx_dim_const(4)}));
    q = rlx_graph_permute(g, NULL, q, (int[]){0, 2, 1, 3});
    rlx_node a =
        rlx_graph_attention(g, "cross", q, k, v, RLX_NODE_INVALID, (rlx_attention_params){0});
    a = rlx_graph_reshape(g, NULL, rlx_graph_permute(g, NULL, a, (int[]){0, 2, 1, 3}),
                          rlx_shape_make_dims(2, (rlx_dim[]){S, rlx_dim_const(8)}));
    rlx_node logits = rlx_graph_matmul(g, "logits", rlx_graph_add(g, NULL, x, a), emb, false, true);
    rlx_graph_output(g, "logits", logits);
    return g;
}

static rlx_test_tensor wh_params[] = {{"c1", wh_c1},   {"c2", wh_c2}, {"pos", wh_pos},
                                      {"emb", wh_emb}, {"wq", wh_wq}, {"wk", wh_wk},
                                      {"wv", wh_wv}};

static void init_data(void)
{
    fill(mlp_x, 40, 0.31f, 0.1f);
    fill(mlp_up, 256, 0.17f, 0.2f);
    fill(mlp_upb, 32, 0.5f, 0.3f);
    fill(mlp_gate, 256, 0.23f, 0.4f);
    fill(mlp_down, 256, 0.29f, 0.5f);
    fill(mlp_g, 8, 0.7f, 1.0f);
    fill(mlp_b, 8, 0.9f, 0.2f);
    fill(at_x, 48, 0.37f, 0.3f);
    fill(at_nw, 16, 0.2f, 1.2f);
    fill(at_wq, 256, 0.13f, 0.1f);
    fill(at_wk, 128, 0.19f, 0.7f);
    fill(at_wv, 128, 0.11f, 0.9f);
    fill(at_wo, 256, 0.07f, 0.4f);
    fill(at_ck, 2 * MAXT * 4, 0.41f, 0.0f);
    fill(at_cv, 2 * MAXT * 4, 0.43f, 0.5f);
    fill(cv_x, 256, 0.05f, 0.3f);
    fill(cv_w, 288, 0.09f, 0.1f);
    fill(cv_b, 8, 0.8f, 0.1f);
    fill(cv_g, 8, 0.3f, 1.3f);
    fill(cv_gb, 8, 0.6f, 0.2f);
    fill(cv_tw, 128, 0.15f, 0.6f);
    fill(sam_x, 288, 0.21f, 0.1f);
    fill(sam_qkv, 192, 0.19f, 0.3f);
    fill(sam_rel, 512, 0.05f, 0.7f);
    fill(fx_t, 40, 0.33f, 0.2f);
    fill(fx_i, 56, 0.27f, 0.6f);
    for (int i = 0; i < 8; i++)
        fill(fx_w[i], 64, 0.1f + 0.03f * (float)i, (float)i);
    fill(wh_mel, 40, 0.4f, 0.0f);
    fill(wh_c1, 96, 0.12f, 0.3f);
    fill(wh_c2, 192, 0.08f, 0.5f);
    fill(wh_pos, 40, 0.3f, 0.9f);
    fill(wh_emb, 80, 0.22f, 0.1f);
    fill(wh_wq, 64, 0.14f, 0.2f);
    fill(wh_wk, 64, 0.16f, 0.4f);
    fill(wh_wv, 64, 0.18f, 0.8f);
}

static void compare_variants(builder build, const rlx_test_run *run)
{
    rlx_graph *g = build();
    if (rlx_graph_error(g))
        fprintf(stderr, "%s\n", rlx_graph_error(g));
    assert_null(rlx_graph_error(g));
    void *ref[4] = {0};
    int64_t nref[4];
    int n_out = rlx_graph_output_count(g);
    rlx_error *err = NULL;
    rlx_compile_opts o = rlx_compile_default_opts();
    o.passes = RLX_PASS_REQUIRED;
    rlx_lir *lir_none = NULL, *lir_all = NULL;
    rlx_status s = rlx_test_compile_run(g, o, run, ref, nref, 4, &lir_none, &err);
    if (s != RLX_OK)
        fprintf(stderr, "%s\n", rlx_error_message(err));
    assert_int_equal(s, RLX_OK);

    static const uint32_t optional[] = {RLX_PASS_DCE,    RLX_PASS_CONST_FOLD, RLX_PASS_CSE,
                                        RLX_PASS_LAYOUT, RLX_PASS_FUSION,     RLX_PASS_INPLACE};
    int nv = (int)(sizeof optional / sizeof optional[0]);
    for (int v = -3; v < nv; v++) {
        rlx_compile_opts ov = rlx_compile_default_opts();
        if (v >= 0)
            ov.passes &= ~optional[v];
        if (v == -3) /* a backend that takes contiguous operands only */
            ov.backend = rlx_test_contiguous_backend();
        if (v == -2) /* everything, with ops refused so that legalize rewrites them */
            ov.backend =
                rlx_test_refusing_backend((1ull << RLX_OP_GELU) | (1ull << RLX_OP_LAYER_NORM) |
                                          (1ull << RLX_OP_RMS_NORM) | (1ull << RLX_OP_GROUP_NORM) |
                                          (1ull << RLX_OP_SILU) | (1ull << RLX_OP_ADD_RMS_NORM) |
                                          (1ull << RLX_OP_ATTENTION) | (1ull << RLX_OP_CONV1D));
        void *got[4] = {0};
        int64_t n[4];
        err = NULL;
        s = rlx_test_compile_run(g, ov, run, got, n, 4, v == -1 ? &lir_all : NULL, &err);
        if (s != RLX_OK)
            fprintf(stderr, "variant %d: %s\n", v, rlx_error_message(err));
        assert_int_equal(s, RLX_OK);
        for (int k = 0; k < n_out; k++) {
            assert_int_equal(n[k], nref[k]);
            float d = rlx_test_max_diff(ref[k], got[k], n[k]);
            if (!(d <= TOL))
                fprintf(stderr, "variant %d, output %d differs by %g\n", v, k, (double)d);
            assert_true(d <= TOL);
            free(got[k]);
        }
    }
    /* the optimizations never make the program longer, nor its arena larger
     * but by one trade: an add_rms_norm that keeps its sum holds both halves
     * in one block, so its norm half lives as long as the sum (at most half
     * the block's bytes each) */
    assert_true(lir_all->n_instrs <= lir_none->n_instrs);
    uint64_t kept = 0;
    for (int32_t i = 0; i < lir_all->n_instrs; i++)
        if (lir_all->instrs[i].op == RLX_OP_ADD_RMS_NORM && lir_all->instrs[i].p.norm.keep_sum)
            kept += lir_all->values[lir_all->instrs[i].out].max_bytes / 2;
    assert_true(lir_all->arena_bytes <= lir_none->arena_bytes + kept);
    rlx_lir_free(lir_none);
    rlx_lir_free(lir_all);
    for (int k = 0; k < n_out; k++)
        free(ref[k]);
    rlx_graph_free(g);
}

static void test_mlp(void **state)
{
    (void)state;
    if (!rlx_test_have_cpu())
        skip();
    rlx_test_tensor in = {"x", mlp_x};
    rlx_test_run run = {.params = mlp_params, .n_params = 6, .inputs = &in, .n_inputs = 1};
    run.syms.v[0] = 5;
    compare_variants(mlp, &run);
}

static void test_attention_kv(void **state)
{
    (void)state;
    if (!rlx_test_have_cpu())
        skip();
    rlx_test_tensor in[] = {{"x", at_x}, {"pos", at_pos}};
    rlx_test_tensor st[] = {{"cache.k", at_ck}, {"cache.v", at_cv}};
    rlx_test_run run = {.params = at_params,
                        .n_params = 5,
                        .inputs = in,
                        .n_inputs = 2,
                        .states = st,
                        .n_states = 2};
    run.syms.v[0] = 3; /* SEQ */
    run.syms.v[1] = 2; /* PAST: two cached rows */
    compare_variants(attn, &run);
}

static void test_conv_group_norm(void **state)
{
    (void)state;
    if (!rlx_test_have_cpu())
        skip();
    rlx_test_tensor in = {"x", cv_x};
    rlx_test_run run = {.params = cv_params, .n_params = 5, .inputs = &in, .n_inputs = 1};
    compare_variants(convblock, &run);
}

static void test_sam_window(void **state)
{
    (void)state;
    if (!rlx_test_have_cpu())
        skip();
    rlx_test_tensor in = {"x", sam_x};
    rlx_test_run run = {.params = sam_params, .n_params = 2, .inputs = &in, .n_inputs = 1};
    compare_variants(sam_window, &run);
}

static void test_flux_joint(void **state)
{
    (void)state;
    if (!rlx_test_have_cpu())
        skip();
    rlx_test_tensor in[] = {{"txt", fx_t}, {"img", fx_i}};
    rlx_test_run run = {.params = fx_params, .n_params = 8, .inputs = in, .n_inputs = 2};
    compare_variants(flux_joint, &run);
}

static void test_whisper(void **state)
{
    (void)state;
    if (!rlx_test_have_cpu())
        skip();
    rlx_test_tensor in[] = {{"mel", wh_mel}, {"tok", wh_tok}};
    rlx_test_run run = {.params = wh_params, .n_params = 7, .inputs = in, .n_inputs = 2};
    run.syms.v[0] = 3;
    compare_variants(whisper, &run);
}

int main(void)
{
    init_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_attention_kv),
        cmocka_unit_test(test_conv_group_norm),
        cmocka_unit_test(test_sam_window),
        cmocka_unit_test(test_flux_joint),
        cmocka_unit_test(test_whisper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
