/* The FLUX.2 transformer as one graph (see flux2-dit.h for the architecture).
 * Token rows are [text, image]; every weight is a PARAM in its file dtype,
 * matrices feed matmul directly (the backends read F16/BF16 and GGUF blocks
 * in their GEMMs), 1-D norm weights are cast to F32. */
#include <stdio.h>
#include <string.h>

#include "engine/ir/graph.h"
#include "models/diffusion/flux2-dit-internal.h"

typedef struct fb {
    const rlx_flux2_dit *d;
    rlx_graph *g;
    int64_t C, H, D, M; /* hidden, heads, head dim, MLP width */
    float eps;
    rlx_node cos, sin; /* [S, 1, D] */
    bool missing;
    char miss[160];
} fb;

/* The weight of `role` as a PARAM in its file dtype; a 1-D one cast to F32
 * and multiplied by its file's scale, a matrix's scale left in *scale (1
 * when the file has none) for the product to apply. */
static rlx_node weight_scaled(fb *b, f2_role role, int blk, float *scale)
{
    f2_tensor t;
    *scale = 1.0f;
    char nm[160], full[200];
    f2_role_name(b->d->cfg.names, role, blk, nm, sizeof nm);
    if (!f2_find(b->d, role, blk, &t)) {
        if (!b->missing)
            snprintf(b->miss, sizeof b->miss, "the tensor '%s%s' is missing", b->d->prefix, nm);
        b->missing = true;
        return RLX_NODE_INVALID;
    }
    snprintf(full, sizeof full, "%s%s", b->d->prefix, nm);
    rlx_node p = rlx_graph_param(b->g, full, t.dtype, rlx_shape_make(t.rank, t.dims));
    if (t.rank == 1 && t.dtype != RLX_DTYPE_F32)
        p = rlx_graph_cast(b->g, NULL, p, RLX_DTYPE_F32);
    if (t.rank == 1 && t.scale != 1.0f)
        p = rlx_graph_scale(b->g, NULL, p, t.scale, 0.0f);
    else
        *scale = t.scale;
    return p;
}

static rlx_node weight(fb *b, f2_role role, int blk)
{
    float unused;
    return weight_scaled(b, role, blk, &unused);
}

/* One LoRA module's change of x's product: scale * (x A^T) B^T, [S, out]
 * in the LoRA file's layout. */
static rlx_node lora_delta(fb *b, rlx_node x, const f2_lora *e)
{
    int64_t da[2] = {e->rank, e->in}, db[2] = {e->out, e->rank};
    rlx_node a = rlx_graph_param(b->g, e->a, e->a_dtype, rlx_shape_make(2, da));
    rlx_node up = rlx_graph_param(b->g, e->b, e->b_dtype, rlx_shape_make(2, db));
    rlx_node t = rlx_graph_matmul(b->g, NULL, x, a, false, true);
    t = rlx_graph_matmul(b->g, NULL, t, up, false, true);
    return rlx_graph_scale(b->g, NULL, t, e->scale, 0.0f);
}

static rlx_node cols(fb *b, rlx_node x, int64_t start, int64_t len);

/* x W^T plus every LoRA module on this weight. A module in the other
 * scheme's names is the same product here, except the final modulation:
 * diffusers' norm_out.linear is [scale; shift], BFL's [shift; scale]. (The
 * fused and separate q/k/v, which differ in shape, are joined in qkv().) */
static rlx_node lin(fb *b, rlx_node x, f2_role role, int blk)
{
    float s;
    rlx_node w = weight_scaled(b, role, blk, &s);
    rlx_node y = rlx_graph_matmul(b->g, NULL, x, w, false, true);
    if (s != 1.0f) /* an FP8 matrix's scale: the fusion pass makes it the product's alpha */
        y = rlx_graph_scale(b->g, NULL, y, s, 0.0f);
    for (int i = 0; i < b->d->n_lora; i++) {
        const f2_lora *e = &b->d->lora[i];
        if (e->role != role || e->blk != blk)
            continue;
        rlx_node dl = lora_delta(b, x, e);
        if (role == F2_FINAL_MOD && e->scheme != b->d->cfg.names) {
            rlx_node halves[2] = {cols(b, dl, b->C, b->C), cols(b, dl, 0, b->C)};
            dl = rlx_graph_concat(b->g, NULL, 2, halves, 1);
        }
        y = rlx_graph_add(b->g, NULL, y, dl);
    }
    return y;
}

static rlx_node cols(fb *b, rlx_node x, int64_t start, int64_t len)
{
    return rlx_graph_slice(b->g, NULL, x, 1, rlx_dim_const(start), rlx_dim_const(len));
}

static rlx_node rows(fb *b, rlx_node x, int64_t start, int64_t len)
{
    return rlx_graph_slice(b->g, NULL, x, 0, rlx_dim_const(start), rlx_dim_const(len));
}

/* LN(x) * (1 + scale) + shift; shift / scale [1, C] */
static rlx_node modulate(fb *b, rlx_node x, rlx_node shift, rlx_node scale)
{
    rlx_node n = rlx_graph_layer_norm(b->g, NULL, x, RLX_NODE_INVALID, RLX_NODE_INVALID, b->eps);
    rlx_node s1 = rlx_graph_scale(b->g, NULL, scale, 1.0f, 1.0f);
    return rlx_graph_add(b->g, NULL, rlx_graph_mul(b->g, NULL, n, s1), shift);
}

/* x + gate * y */
static rlx_node gated(fb *b, rlx_node x, rlx_node gate, rlx_node y)
{
    return rlx_graph_add(b->g, NULL, x, rlx_graph_mul(b->g, NULL, gate, y));
}

static rlx_node swiglu(fb *b, rlx_node x, int64_t m)
{
    rlx_node a = cols(b, x, 0, m), g = cols(b, x, m, m);
    return rlx_graph_mul(b->g, NULL, rlx_graph_silu(b->g, NULL, a), g);
}

/* [S, C] -> [S, H, D] */
static rlx_node heads(fb *b, rlx_node x, int64_t s)
{
    int64_t dims[3] = {s, b->H, b->D};
    return rlx_graph_reshape(b->g, NULL, x, rlx_shape_make(3, dims));
}

/* RoPE on interleaved pairs: x * cos + swap_pairs(x) * sin_signed, with the
 * host's sin table negated on even lanes (rot = [-x1, x0] per pair). */
static rlx_node rope(fb *b, rlx_node x, int64_t s)
{
    int64_t d4[4] = {s, b->H, b->D / 2, 2}, d3[3] = {s, b->H, b->D};
    rlx_node x4 = rlx_graph_reshape(b->g, NULL, x, rlx_shape_make(4, d4));
    rlx_node parts[2] = {
        rlx_graph_slice(b->g, NULL, x4, 3, rlx_dim_const(1), rlx_dim_const(1)),
        rlx_graph_slice(b->g, NULL, x4, 3, rlx_dim_const(0), rlx_dim_const(1)),
    };
    rlx_node sw = rlx_graph_reshape(b->g, NULL, rlx_graph_concat(b->g, NULL, 2, parts, 3),
                                    rlx_shape_make(3, d3));
    return rlx_graph_add(b->g, NULL, rlx_graph_mul(b->g, NULL, x, b->cos),
                         rlx_graph_mul(b->g, NULL, sw, b->sin));
}

/* q, k, v [S, H, D] (q, k normed and rotated) -> [S, C] */
static rlx_node attend(fb *b, rlx_node q, rlx_node k, rlx_node v, int64_t s)
{
    int perm[3] = {1, 0, 2};
    int64_t d4[4] = {1, b->H, s, b->D}, d3[3] = {b->H, s, b->D}, d2[2] = {s, b->C};
    rlx_node t[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        t[i] = rlx_graph_reshape(b->g, NULL, rlx_graph_permute(b->g, NULL, t[i], perm),
                                 rlx_shape_make(4, d4));
    rlx_attention_params ap = {.mask = RLX_MASK_NONE, .scale = 0.0f};
    rlx_node o = rlx_graph_attention(b->g, NULL, t[0], t[1], t[2], RLX_NODE_INVALID, ap);
    o = rlx_graph_reshape(b->g, NULL, o, rlx_shape_make(3, d3));
    o = rlx_graph_permute(b->g, NULL, o, perm);
    return rlx_graph_reshape(b->g, NULL, o, rlx_shape_make(2, d2));
}

/* q, k, v of one stream [S, H, D], q and k RMS-normed */
static void qkv(fb *b, rlx_node x, int64_t s, int blk, bool img, rlx_node out[3])
{
    bool bfl = b->d->cfg.names == RLX_FLUX2_NAMES_BFL;
    rlx_node q, k, v;
    if (bfl) {
        rlx_node y = lin(b, x, img ? F2_D_IMG_QKV : F2_D_TXT_QKV, blk);
        q = cols(b, y, 0, b->C);
        k = cols(b, y, b->C, b->C);
        v = cols(b, y, 2 * b->C, b->C);
    } else {
        q = lin(b, x, img ? F2_D_IMG_Q : F2_D_TXT_Q, blk);
        k = lin(b, x, img ? F2_D_IMG_K : F2_D_TXT_K, blk);
        v = lin(b, x, img ? F2_D_IMG_V : F2_D_TXT_V, blk);
    }
    /* LoRA modules named in the other scheme: separate q, k, v changes on
     * a fused model, a fused change on a separate one */
    rlx_node *part[3] = {&q, &k, &v};
    for (int i = 0; i < b->d->n_lora; i++) {
        const f2_lora *e = &b->d->lora[i];
        if (e->blk != blk || e->scheme == b->d->cfg.names)
            continue;
        f2_role fused = img ? F2_D_IMG_QKV : F2_D_TXT_QKV;
        f2_role sep = img ? F2_D_IMG_Q : F2_D_TXT_Q;
        if (e->role == fused) {
            rlx_node dl = lora_delta(b, x, e);
            for (int j = 0; j < 3; j++)
                *part[j] = rlx_graph_add(b->g, NULL, *part[j], cols(b, dl, j * b->C, b->C));
        } else if (e->role >= sep && e->role <= sep + 2) {
            int j = (int)(e->role - sep);
            *part[j] = rlx_graph_add(b->g, NULL, *part[j], lora_delta(b, x, e));
        }
    }
    out[0] = rlx_graph_rms_norm(b->g, NULL, heads(b, q, s),
                                weight(b, img ? F2_D_IMG_NQ : F2_D_TXT_NQ, blk), b->eps);
    out[1] = rlx_graph_rms_norm(b->g, NULL, heads(b, k, s),
                                weight(b, img ? F2_D_IMG_NK : F2_D_TXT_NK, blk), b->eps);
    out[2] = heads(b, v, s);
}

static void double_block(fb *b, int blk, rlx_node *h, rlx_node *c, const rlx_node *mi,
                         const rlx_node *mt, int64_t n_txt, int64_t n_all)
{
    rlx_graph *g = b->g;
    int64_t s = n_txt + n_all;
    rlx_node nh = modulate(b, *h, mi[0], mi[1]);
    rlx_node nc = modulate(b, *c, mt[0], mt[1]);
    rlx_node ti[3], tt[3], j[3];
    qkv(b, nh, n_all, blk, true, ti);
    qkv(b, nc, n_txt, blk, false, tt);
    for (int i = 0; i < 3; i++) {
        rlx_node pair[2] = {tt[i], ti[i]};
        j[i] = rlx_graph_concat(g, NULL, 2, pair, 0);
    }
    rlx_node o = attend(b, rope(b, j[0], s), rope(b, j[1], s), j[2], s);
    *h = gated(b, *h, mi[2], lin(b, rows(b, o, n_txt, n_all), F2_D_IMG_OUT, blk));
    *c = gated(b, *c, mt[2], lin(b, rows(b, o, 0, n_txt), F2_D_TXT_OUT, blk));
    nh = modulate(b, *h, mi[3], mi[4]);
    *h = gated(b, *h, mi[5],
               lin(b, swiglu(b, lin(b, nh, F2_D_IMG_MLP_IN, blk), b->M), F2_D_IMG_MLP_OUT, blk));
    nc = modulate(b, *c, mt[3], mt[4]);
    *c = gated(b, *c, mt[5],
               lin(b, swiglu(b, lin(b, nc, F2_D_TXT_MLP_IN, blk), b->M), F2_D_TXT_MLP_OUT, blk));
}

static rlx_node single_block(fb *b, int blk, rlx_node x, const rlx_node *ms, int64_t s)
{
    rlx_graph *g = b->g;
    rlx_node y = lin(b, modulate(b, x, ms[0], ms[1]), F2_S_IN, blk);
    rlx_node q = rlx_graph_rms_norm(g, NULL, heads(b, cols(b, y, 0, b->C), s),
                                    weight(b, F2_S_NQ, blk), b->eps);
    rlx_node k = rlx_graph_rms_norm(g, NULL, heads(b, cols(b, y, b->C, b->C), s),
                                    weight(b, F2_S_NK, blk), b->eps);
    rlx_node v = heads(b, cols(b, y, 2 * b->C, b->C), s);
    rlx_node o = attend(b, rope(b, q, s), rope(b, k, s), v, s);
    rlx_node cat[2] = {o, swiglu(b, cols(b, y, 3 * b->C, 2 * b->M), b->M)};
    return gated(b, x, ms[2], lin(b, rlx_graph_concat(g, NULL, 2, cat, 1), F2_S_OUT, blk));
}

/* silu(temb) [1, C] times a modulation matrix, cut into n chunks of C */
static void mod_chunks(fb *b, rlx_node st, f2_role role, int n, rlx_node *out)
{
    rlx_node m = lin(b, st, role, 0);
    for (int i = 0; i < n; i++)
        out[i] = cols(b, m, i * b->C, b->C);
}

rlx_status f2_build_graph(const rlx_flux2_dit *d, int n_txt, int n_img, int n_all, rlx_graph **out,
                          rlx_error **err)
{
    *out = NULL;
    const rlx_flux2_dit_config *c = &d->cfg;
    rlx_graph *g = rlx_graph_create();
    if (!g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the FLUX.2 graph");
    fb b = {.d = d,
            .g = g,
            .C = c->hidden,
            .H = c->heads,
            .D = c->head_dim,
            .M = c->mlp_hidden,
            .eps = c->eps};
    int64_t s = (int64_t)n_txt + n_all;
    int64_t di[2] = {n_all, c->in_channels}, dt[2] = {n_txt, c->joint_dim};
    int64_t dp[2] = {1, c->timestep_channels}, dr[3] = {s, 1, c->head_dim};
    rlx_node img = rlx_graph_input(g, "img", RLX_DTYPE_F32, rlx_shape_make(2, di));
    rlx_node txt = rlx_graph_input(g, "txt", RLX_DTYPE_F32, rlx_shape_make(2, dt));
    rlx_node tp = rlx_graph_input(g, "tproj", RLX_DTYPE_F32, rlx_shape_make(2, dp));
    b.cos = rlx_graph_input(g, "rope_cos", RLX_DTYPE_F32, rlx_shape_make(3, dr));
    b.sin = rlx_graph_input(g, "rope_sin", RLX_DTYPE_F32, rlx_shape_make(3, dr));

    rlx_node temb = lin(&b, rlx_graph_silu(g, NULL, lin(&b, tp, F2_TIME_1, 0)), F2_TIME_2, 0);
    if (c->guidance_embeds) {
        rlx_node gp = rlx_graph_input(g, "gproj", RLX_DTYPE_F32, rlx_shape_make(2, dp));
        temb = rlx_graph_add(
            g, NULL, temb,
            lin(&b, rlx_graph_silu(g, NULL, lin(&b, gp, F2_GUID_1, 0)), F2_GUID_2, 0));
    }
    rlx_node st = rlx_graph_silu(g, NULL, temb);
    rlx_node mi[6], mt[6], ms[3], mf[2];
    mod_chunks(&b, st, F2_MOD_IMG, 6, mi);
    mod_chunks(&b, st, F2_MOD_TXT, 6, mt);
    mod_chunks(&b, st, F2_MOD_SINGLE, 3, ms);
    mod_chunks(&b, st, F2_FINAL_MOD, 2, mf);

    rlx_node h = lin(&b, img, F2_IMG_IN, 0);
    rlx_node x = lin(&b, txt, F2_TXT_IN, 0);
    for (int i = 0; i < c->n_double; i++)
        double_block(&b, i, &h, &x, mi, mt, n_txt, n_all);
    rlx_node pair[2] = {x, h};
    x = rlx_graph_concat(g, NULL, 2, pair, 0);
    for (int i = 0; i < c->n_single; i++)
        x = single_block(&b, i, x, ms, s);
    x = rows(&b, x, n_txt, n_img);
    /* diffusers' norm_out.linear is [scale; shift], BFL's adaLN [shift; scale] */
    bool bfl = c->names == RLX_FLUX2_NAMES_BFL;
    x = modulate(&b, x, bfl ? mf[0] : mf[1], bfl ? mf[1] : mf[0]);
    rlx_graph_output(g, "velocity", lin(&b, x, F2_FINAL, 0));

    if (b.missing) {
        rlx_graph_free(g);
        return rlx_error_set(err, RLX_ERR_FORMAT, "FLUX.2 transformer: %s", b.miss);
    }
    rlx_status stt = rlx_graph_take_error(g, err);
    if (stt != RLX_OK) {
        rlx_error_prefix(err, "building the FLUX.2 transformer graph: ");
        rlx_graph_free(g);
        return stt;
    }
    *out = g;
    return RLX_OK;
}
