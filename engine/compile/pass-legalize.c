/* legalize: every node must be one the backend claims (supports_op). A node
 * it does not claim is rewritten into ops it may claim; the rewritten nodes
 * are checked in turn. When no rewrite exists the compile fails naming the
 * op, the node and the backend: nothing falls back to the host.
 *
 * Rewrites: GELU (erf via Abramowitz-Stegun 7.1.26, |err| < 1.5e-7; tanh
 * form), SILU, SIGMOID, TANH, RSQRT, SQUARE, RELU, CLAMP, SCALE; RMS/LAYER/
 * GROUP norm and ADD_RMS_NORM into reductions; SOFTMAX into max/exp/sum;
 * ATTENTION into matmul + softmax + matmul (causal/window masks built from
 * position constants, GQA by broadcasting k/v over the query group), and
 * one with a grid-decomposed bias first into one with the full bias; CONV1D
 * into CONV2D; a matmul
 * epilogue into separate nodes; a FUSED_ELEMENTWISE back into its steps.
 * Before rewriting, an op refused only for its F16/BF16 operands gets CASTs
 * to F32 in front of them. */
#include "engine/compile/passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lz {
    rlx_graph *g;
    char base[200];
    int k;
} lz;

static const char *nm(lz *z, const char *what)
{
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "%s.%s%d", z->base, what, z->k++);
    return buf;
}

static rlx_node op1(lz *z, rlx_op op, rlx_node x)
{
    return rlx_graph_node_new(z->g, nm(z, rlx_op_name(op)), op, NULL, 1, &x, RLX_DTYPE_INVALID,
                              NULL);
}

static rlx_node op2(lz *z, rlx_op op, rlx_node a, rlx_node b)
{
    rlx_node in[2] = {a, b};
    return rlx_graph_node_new(z->g, nm(z, rlx_op_name(op)), op, NULL, 2, in, RLX_DTYPE_INVALID,
                              NULL);
}

static rlx_node scale(lz *z, rlx_node x, double mul, double add)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.scale.mul = (float)mul;
    p.scale.add = (float)add;
    return rlx_graph_node_new(z->g, nm(z, "scale"), RLX_OP_SCALE, &p, 1, &x, RLX_DTYPE_INVALID,
                              NULL);
}

static rlx_node reduce(lz *z, rlx_op op, rlx_node x, int axis)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.reduce.axis = axis;
    p.reduce.keepdim = true;
    return rlx_graph_node_new(z->g, nm(z, rlx_op_name(op)), op, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

static rlx_node reshape(lz *z, rlx_node x, rlx_shape s)
{
    return rlx_graph_node_new(z->g, nm(z, "reshape"), RLX_OP_RESHAPE, NULL, 1, &x,
                              RLX_DTYPE_INVALID, &s);
}

static rlx_node one(lz *z)
{
    float v = 1.0f;
    return rlx_graph_const(z->g, nm(z, "one"), RLX_DTYPE_F32, rlx_shape_make(0, NULL), &v);
}

static rlx_node sigmoid(lz *z, rlx_node x)
{
    /* 1 / (1 + exp(-x)) */
    return op2(z, RLX_OP_DIV, one(z), scale(z, op1(z, RLX_OP_EXP, scale(z, x, -1, 0)), 1, 1));
}

static rlx_node gelu_erf(lz *z, rlx_node x)
{
    /* gelu = 0.5 x (1 + erf(x/sqrt2)) = 0.5 x + 0.5 |x| erf(|x|/sqrt2), and
     * for a >= 0: erf(a) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-a^2),
     * t = 1 / (1 + p a) */
    static const double p = 0.3275911, a1 = 0.254829592, a2 = -0.284496736, a3 = 1.421413741,
                        a4 = -1.453152027, a5 = 1.061405429;
    rlx_node ax = op1(z, RLX_OP_ABS, x);
    rlx_node a = scale(z, ax, 0.7071067811865476, 0);
    rlx_node t = op2(z, RLX_OP_DIV, one(z), scale(z, a, p, 1));
    rlx_node poly = scale(z, t, a5, a4);
    poly = scale(z, op2(z, RLX_OP_MUL, poly, t), 1, a3);
    poly = scale(z, op2(z, RLX_OP_MUL, poly, t), 1, a2);
    poly = scale(z, op2(z, RLX_OP_MUL, poly, t), 1, a1);
    poly = op2(z, RLX_OP_MUL, poly, t);
    rlx_node e = op1(z, RLX_OP_EXP, scale(z, op2(z, RLX_OP_MUL, a, a), -1, 0));
    rlx_node erf_a = scale(z, op2(z, RLX_OP_MUL, poly, e), -1, 1);
    rlx_node half_abs = op2(z, RLX_OP_MUL, scale(z, ax, 0.5, 0), erf_a);
    return op2(z, RLX_OP_ADD, scale(z, x, 0.5, 0), half_abs);
}

static rlx_node gelu_tanh(lz *z, rlx_node x)
{
    rlx_node x3 = op2(z, RLX_OP_MUL, op2(z, RLX_OP_MUL, x, x), x);
    rlx_node inner =
        scale(z, op2(z, RLX_OP_ADD, x, scale(z, x3, 0.044715, 0)), 0.7978845608028654, 0);
    rlx_node u = scale(z, op1(z, RLX_OP_TANH, inner), 0.5, 0.5);
    return op2(z, RLX_OP_MUL, x, u);
}

static rlx_node mean_sq_norm(lz *z, rlx_node x, float eps, bool center)
{
    int axis = z->g->nodes[x].shape.rank - 1;
    if (center)
        x = op2(z, RLX_OP_SUB, x, reduce(z, RLX_OP_REDUCE_MEAN, x, axis));
    rlx_node ms = reduce(z, RLX_OP_REDUCE_MEAN, op2(z, RLX_OP_MUL, x, x), axis);
    rlx_node r = op1(z, RLX_OP_RSQRT, scale(z, ms, 1, eps));
    return op2(z, RLX_OP_MUL, x, r);
}

/* Positions 0..len-1 as F32 (a constant at the dim's upper bound, sliced). */
static rlx_node positions(lz *z, rlx_dim start, rlx_dim len, int64_t bound)
{
    float *v = malloc(sizeof *v * (size_t)(bound > 0 ? bound : 1));
    if (!v) {
        rlx_graph_fail(z->g, RLX_ERR_NO_MEMORY, "out of memory");
        return RLX_NODE_INVALID;
    }
    for (int64_t i = 0; i < bound; i++)
        v[i] = (float)i;
    rlx_node c = rlx_graph_const(z->g, nm(z, "iota"), RLX_DTYPE_F32, rlx_shape_make(1, &bound), v);
    free(v);
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.slice.start = start;
    p.slice.step = 1;
    rlx_shape s = rlx_shape_make_dims(1, &len);
    return rlx_graph_node_new(z->g, nm(z, "pos"), RLX_OP_SLICE, &p, 1, &c, RLX_DTYPE_INVALID, &s);
}

static rlx_node cmp(lz *z, rlx_cmp kind, rlx_node a, rlx_node b)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.cmp.kind = kind;
    rlx_node in[2] = {a, b};
    return rlx_graph_node_new(z->g, nm(z, "cmp"), RLX_OP_CMP, &p, 2, in, RLX_DTYPE_INVALID, NULL);
}

/* The additive [S, T] mask of a causal / window attention: query i sits at
 * absolute position T - S + i and sees key j when j <= pos (and, for a
 * window, j > pos - window). Built from position constants, so it works for
 * every S and T up to their bounds. */
static rlx_node causal_mask(lz *z, const rlx_gnode *n, rlx_dim S, rlx_dim T)
{
    rlx_graph *g = z->g;
    rlx_dim off;
    if (!rlx_dim_sub(T, S, &off))
        return RLX_NODE_INVALID;
    int64_t tmax = rlx_dim_upper(T, g->sym_max);
    rlx_node kp = positions(z, rlx_dim_const(0), T, tmax);
    rlx_node qp = positions(z, off, S, tmax);
    rlx_shape qs = rlx_shape_make_dims(2, (rlx_dim[]){S, rlx_dim_const(1)});
    qp = reshape(z, qp, qs);
    rlx_node masked = cmp(z, RLX_CMP_GT, kp, qp); /* [S, T] */
    float ninf = -INFINITY, zero = 0.0f;
    rlx_node cn = rlx_graph_const(g, nm(z, "ninf"), RLX_DTYPE_F32, rlx_shape_make(0, NULL), &ninf);
    rlx_node cz = rlx_graph_const(g, nm(z, "zero"), RLX_DTYPE_F32, rlx_shape_make(0, NULL), &zero);
    if (n->p.attn.mask == RLX_MASK_WINDOW) {
        /* also masked when j <= pos - window */
        rlx_node far = cmp(z, RLX_CMP_LE, kp, scale(z, qp, 1, -(double)n->p.attn.window));
        masked = op2(z, RLX_OP_MAX, masked, far);
    }
    rlx_node in[3] = {masked, cn, cz};
    return rlx_graph_node_new(g, nm(z, "mask"), RLX_OP_WHERE, NULL, 3, in, RLX_DTYPE_INVALID, NULL);
}

/* ATTENTION as matmul + softmax + matmul. Grouped-query attention keeps k/v
 * shared by viewing q as [B, Hkv, G, S, D] against k as [B, Hkv, 1, T, D]. */
static rlx_node attention(lz *z, const rlx_gnode *n, char *why, size_t why_size)
{
    rlx_graph *g = z->g;
    rlx_shape qs = g->nodes[n->in[0]].shape, ks = g->nodes[n->in[1]].shape,
              vs = g->nodes[n->in[2]].shape;
    int64_t hq = qs.d[1].k, hk = ks.d[1].k, grp = hq / hk;
    rlx_dim S = qs.d[2], T = ks.d[2];
    rlx_node q = n->in[0], k = n->in[1], v = n->in[2];
    rlx_node mask = RLX_NODE_INVALID;
    if (n->p.attn.mask != RLX_MASK_NONE) {
        mask = causal_mask(z, n, S, T);
        if (mask == RLX_NODE_INVALID) {
            snprintf(why, why_size, "the key length minus the query length is not expressible");
            return RLX_NODE_INVALID;
        }
    }
    if (n->p.attn.has_bias) {
        rlx_node b = n->in[3];
        if (grp > 1) {
            rlx_shape bs = g->nodes[b].shape, b4 = rlx_shape_make(4, NULL), b5;
            for (int d = 0; d < bs.rank; d++)
                b4.d[4 - bs.rank + d] = bs.d[d];
            bool per_head = !(rlx_dim_is_const(b4.d[1]) && b4.d[1].k == 1);
            b5 = rlx_shape_make_dims(5, (rlx_dim[]){b4.d[0], rlx_dim_const(per_head ? hk : 1),
                                                    rlx_dim_const(per_head ? grp : 1), b4.d[2],
                                                    b4.d[3]});
            b = reshape(z, b, b5);
        }
        mask = mask == RLX_NODE_INVALID ? b : op2(z, RLX_OP_ADD, b, mask);
    }
    if (grp > 1) {
        q = reshape(z, q,
                    rlx_shape_make_dims(5, (rlx_dim[]){qs.d[0], rlx_dim_const(hk),
                                                       rlx_dim_const(grp), S, qs.d[3]}));
        k = reshape(z, k,
                    rlx_shape_make_dims(
                        5, (rlx_dim[]){ks.d[0], rlx_dim_const(hk), rlx_dim_const(1), T, ks.d[3]}));
        v = reshape(z, v,
                    rlx_shape_make_dims(
                        5, (rlx_dim[]){vs.d[0], rlx_dim_const(hk), rlx_dim_const(1), T, vs.d[3]}));
    }
    rlx_op_params mp;
    memset(&mp, 0, sizeof mp);
    mp.matmul.trans_b = true;
    rlx_node in[2] = {q, k};
    rlx_node sc =
        rlx_graph_node_new(g, nm(z, "scores"), RLX_OP_MATMUL, &mp, 2, in, RLX_DTYPE_INVALID, NULL);
    rlx_op_params sp;
    memset(&sp, 0, sizeof sp);
    sp.softmax.scale = n->p.attn.scale;
    sp.softmax.softcap = n->p.attn.softcap;
    sp.softmax.has_mask = mask != RLX_NODE_INVALID;
    rlx_node sin[2] = {sc, mask};
    rlx_node pr = rlx_graph_node_new(g, nm(z, "softmax"), RLX_OP_SOFTMAX, &sp,
                                     sp.softmax.has_mask ? 2 : 1, sin, RLX_DTYPE_INVALID, NULL);
    memset(&mp, 0, sizeof mp);
    rlx_node pv[2] = {pr, v};
    rlx_node o =
        rlx_graph_node_new(g, nm(z, "pv"), RLX_OP_MATMUL, &mp, 2, pv, RLX_DTYPE_INVALID, NULL);
    return grp > 1 ? reshape(z, o, n->shape) : o;
}

/* An attention whose bias is decomposed over a key grid (bias_grid_w) as
 * the same attention with the full bias: row terms [..., kh, 1] plus
 * column terms [..., 1, kw], viewed as [..., T]. Checked in turn, so a
 * backend that refuses attention altogether gets the matmul form next. */
static rlx_node grid_bias_attention(lz *z, const rlx_gnode *n)
{
    rlx_graph *g = z->g;
    rlx_shape bs = g->nodes[n->in[3]].shape;
    int r = bs.rank;
    int64_t kw = n->p.attn.bias_grid_w, kh = bs.d[r - 1].k - kw;
    rlx_shape rs = bs, cs = bs, fs = bs;
    rs.rank = cs.rank = r + 1;
    rs.d[r - 1] = rlx_dim_const(kh);
    rs.d[r] = rlx_dim_const(1);
    cs.d[r - 1] = rlx_dim_const(1);
    cs.d[r] = rlx_dim_const(kw);
    fs.d[r - 1] = rlx_dim_const(kh * kw);
    rlx_node rows =
        rlx_graph_slice(g, nm(z, "rows"), n->in[3], r - 1, rlx_dim_const(0), rlx_dim_const(kh));
    rlx_node cols =
        rlx_graph_slice(g, nm(z, "cols"), n->in[3], r - 1, rlx_dim_const(kh), rlx_dim_const(kw));
    rlx_node full = op2(z, RLX_OP_ADD, reshape(z, rows, rs), reshape(z, cols, cs));
    rlx_node in[4] = {n->in[0], n->in[1], n->in[2], reshape(z, full, fs)};
    rlx_op_params p = n->p;
    p.attn.bias_grid_w = 0;
    return rlx_graph_node_new(g, nm(z, "attention"), RLX_OP_ATTENTION, &p, 4, in, RLX_DTYPE_INVALID,
                              NULL);
}

/* Rewrite node i (a copy in n) into other nodes; RLX_NODE_INVALID with a
 * reason in why when there is no rewrite. */
static rlx_node rewrite(lz *z, int32_t i, const rlx_gnode *n, char *why, size_t why_size)
{
    rlx_graph *g = z->g;
    rlx_node x = n->n_in > 0 ? n->in[0] : RLX_NODE_INVALID;
    why[0] = 0;
    switch (n->op) {
    case RLX_OP_GELU:
        return n->p.gelu.approx == RLX_GELU_TANH ? gelu_tanh(z, x) : gelu_erf(z, x);
    case RLX_OP_SILU:
        return op2(z, RLX_OP_MUL, x, sigmoid(z, x));
    case RLX_OP_SIGMOID:
        return sigmoid(z, x);
    case RLX_OP_TANH: /* 2 sigmoid(2x) - 1 */
        return scale(z, sigmoid(z, scale(z, x, 2, 0)), 2, -1);
    case RLX_OP_RSQRT:
        return op2(z, RLX_OP_DIV, one(z), op1(z, RLX_OP_SQRT, x));
    case RLX_OP_SQUARE:
        return op2(z, RLX_OP_MUL, x, x);
    case RLX_OP_RELU: {
        float zero = 0.0f;
        rlx_node c =
            rlx_graph_const(g, nm(z, "zero"), RLX_DTYPE_F32, rlx_shape_make(0, NULL), &zero);
        return op2(z, RLX_OP_MAX, x, c);
    }
    case RLX_OP_CLAMP: {
        float lo = n->p.clamp.lo, hi = n->p.clamp.hi;
        rlx_node l = rlx_graph_const(g, nm(z, "lo"), RLX_DTYPE_F32, rlx_shape_make(0, NULL), &lo);
        rlx_node h = rlx_graph_const(g, nm(z, "hi"), RLX_DTYPE_F32, rlx_shape_make(0, NULL), &hi);
        return op2(z, RLX_OP_MIN, op2(z, RLX_OP_MAX, x, l), h);
    }
    case RLX_OP_SCALE: {
        float m = n->p.scale.mul, a = n->p.scale.add;
        rlx_node cm = rlx_graph_const(g, nm(z, "mul"), RLX_DTYPE_F32, rlx_shape_make(0, NULL), &m);
        rlx_node ca = rlx_graph_const(g, nm(z, "add"), RLX_DTYPE_F32, rlx_shape_make(0, NULL), &a);
        return op2(z, RLX_OP_ADD, op2(z, RLX_OP_MUL, x, cm), ca);
    }
    case RLX_OP_RMS_NORM: {
        rlx_node y = mean_sq_norm(z, x, n->p.norm.eps, false);
        return n->p.norm.has_weight ? op2(z, RLX_OP_MUL, y, n->in[1]) : y;
    }
    case RLX_OP_ADD_RMS_NORM: {
        rlx_op_params p;
        memset(&p, 0, sizeof p);
        p.norm.eps = n->p.norm.eps;
        p.norm.has_weight = true;
        rlx_node in[2] = {op2(z, RLX_OP_ADD, n->in[0], n->in[1]), n->in[2]};
        rlx_node y = rlx_graph_node_new(g, nm(z, "rms_norm"), RLX_OP_RMS_NORM, &p, 2, in,
                                        RLX_DTYPE_INVALID, NULL);
        if (!n->p.norm.keep_sum || y == RLX_NODE_INVALID)
            return y;
        /* [..., 2, D]: the sum, then the norm */
        rlx_shape unit = g->nodes[y].shape;
        int r = unit.rank;
        unit.rank = r + 1;
        unit.d[r] = unit.d[r - 1];
        unit.d[r - 1] = rlx_dim_const(1);
        rlx_node parts[2] = {reshape(z, in[0], unit), reshape(z, y, unit)};
        return rlx_graph_concat(g, nm(z, "stack"), 2, parts, r - 1);
    }
    case RLX_OP_LAYER_NORM: {
        rlx_node y = mean_sq_norm(z, x, n->p.norm.eps, true);
        if (n->p.norm.has_weight)
            y = op2(z, RLX_OP_MUL, y, n->in[1]);
        if (n->p.norm.has_bias)
            y = op2(z, RLX_OP_ADD, y, n->in[2]);
        return y;
    }
    case RLX_OP_GROUP_NORM: {
        const rlx_shape xs = n->shape;
        int64_t groups = n->p.norm.groups, c = xs.d[1].k;
        rlx_dim rest = rlx_dim_const(c / groups);
        for (int d = 2; d < xs.rank; d++) {
            if (rlx_dim_is_const(xs.d[d]))
                rest = rlx_dim_scale(rest, xs.d[d].k);
            else if (rlx_dim_is_const(rest))
                rest = rlx_dim_scale(xs.d[d], rest.k);
            else {
                snprintf(why, why_size, "more than one symbolic spatial dim");
                return RLX_NODE_INVALID;
            }
        }
        rlx_shape gs = rlx_shape_make_dims(3, (rlx_dim[]){xs.d[0], rlx_dim_const(groups), rest});
        rlx_node y = mean_sq_norm(z, reshape(z, x, gs), n->p.norm.eps, true);
        y = reshape(z, y, xs);
        rlx_shape cs = rlx_shape_make(xs.rank - 1, NULL);
        cs.d[0] = rlx_dim_const(c);
        if (n->p.norm.has_weight)
            y = op2(z, RLX_OP_MUL, y, reshape(z, n->in[1], cs));
        if (n->p.norm.has_bias)
            y = op2(z, RLX_OP_ADD, y, reshape(z, n->in[2], cs));
        return y;
    }
    case RLX_OP_SOFTMAX: {
        int axis = n->shape.rank - 1;
        rlx_node s = x;
        if (n->p.softmax.scale != 0.0f && n->p.softmax.scale != 1.0f)
            s = scale(z, s, n->p.softmax.scale, 0);
        if (n->p.softmax.softcap != 0.0f) {
            double c = n->p.softmax.softcap;
            s = scale(z, op1(z, RLX_OP_TANH, scale(z, s, 1.0 / c, 0)), c, 0);
        }
        if (n->p.softmax.has_mask)
            s = op2(z, RLX_OP_ADD, s, n->in[1]);
        rlx_node e =
            op1(z, RLX_OP_EXP, op2(z, RLX_OP_SUB, s, reduce(z, RLX_OP_REDUCE_MAX, s, axis)));
        return op2(z, RLX_OP_DIV, e, reduce(z, RLX_OP_REDUCE_SUM, e, axis));
    }
    case RLX_OP_ATTENTION:
        if (n->p.attn.bias_grid_w > 0)
            return grid_bias_attention(z, n);
        return attention(z, n, why, why_size);
    case RLX_OP_CONV1D: {
        rlx_shape xs = g->nodes[x].shape, ws = g->nodes[n->in[1]].shape;
        rlx_shape x4 =
            rlx_shape_make_dims(4, (rlx_dim[]){xs.d[0], xs.d[1], rlx_dim_const(1), xs.d[2]});
        rlx_shape w4 =
            rlx_shape_make_dims(4, (rlx_dim[]){ws.d[0], ws.d[1], rlx_dim_const(1), ws.d[2]});
        rlx_op_params p;
        memset(&p, 0, sizeof p);
        p.conv.stride[0] = 1;
        p.conv.stride[1] = n->p.conv.stride[0];
        p.conv.pad[1] = n->p.conv.pad[0];
        p.conv.dilation[0] = 1;
        p.conv.dilation[1] = n->p.conv.dilation[0];
        p.conv.groups = n->p.conv.groups;
        p.conv.has_bias = n->p.conv.has_bias;
        rlx_node in[3] = {reshape(z, x, x4), reshape(z, n->in[1], w4),
                          n->p.conv.has_bias ? n->in[2] : RLX_NODE_INVALID};
        rlx_node y = rlx_graph_node_new(g, nm(z, "conv2d"), RLX_OP_CONV2D, &p, n->n_in, in,
                                        RLX_DTYPE_INVALID, NULL);
        return reshape(z, y, n->shape);
    }
    case RLX_OP_MATMUL: {
        float alpha = n->p.matmul.alpha;
        if (!n->p.matmul.has_bias && n->p.matmul.act == RLX_ACT_NONE &&
            (alpha == 0.0f || alpha == 1.0f)) {
            snprintf(why, why_size, "no simpler form");
            return RLX_NODE_INVALID;
        }
        rlx_op_params p;
        memset(&p, 0, sizeof p);
        p.matmul.trans_a = n->p.matmul.trans_a;
        p.matmul.trans_b = n->p.matmul.trans_b;
        rlx_node y = rlx_graph_node_new(g, nm(z, "matmul"), RLX_OP_MATMUL, &p, 2, n->in,
                                        RLX_DTYPE_INVALID, NULL);
        if (alpha != 0.0f && alpha != 1.0f)
            y = scale(z, y, alpha, 0);
        if (n->p.matmul.has_bias)
            y = op2(z, RLX_OP_ADD, y, n->in[2]);
        switch (n->p.matmul.act) {
        case RLX_ACT_RELU:
            return op1(z, RLX_OP_RELU, y);
        case RLX_ACT_GELU_ERF:
        case RLX_ACT_GELU_TANH: {
            rlx_op_params gp;
            memset(&gp, 0, sizeof gp);
            gp.gelu.approx = n->p.matmul.act == RLX_ACT_GELU_TANH ? RLX_GELU_TANH : RLX_GELU_ERF;
            return rlx_graph_node_new(g, nm(z, "gelu"), RLX_OP_GELU, &gp, 1, &y, RLX_DTYPE_INVALID,
                                      NULL);
        }
        case RLX_ACT_SILU:
            return op1(z, RLX_OP_SILU, y);
        case RLX_ACT_SIGMOID:
            return op1(z, RLX_OP_SIGMOID, y);
        case RLX_ACT_TANH:
            return op1(z, RLX_OP_TANH, y);
        default:
            return y;
        }
    }
    case RLX_OP_FUSED_ELEMENTWISE: {
        rlx_node reg[RLX_MAX_INPUTS + RLX_FUSED_MAX_STEPS + 8];
        rlx_node last = RLX_NODE_INVALID;
        for (int k = 0; k < n->n_in; k++)
            reg[k] = n->in[k];
        for (int s = 0; s < n->p.fused.n_steps; s++) {
            const rlx_fused_step *st = &n->p.fused.steps[s];
            rlx_op op = (rlx_op)st->op;
            rlx_op_params p;
            memset(&p, 0, sizeof p);
            if (op == RLX_OP_SCALE) {
                p.scale.mul = st->p0;
                p.scale.add = st->p1;
            } else if (op == RLX_OP_CLAMP) {
                p.clamp.lo = st->p0;
                p.clamp.hi = st->p1;
            } else if (op == RLX_OP_CMP) {
                p.cmp.kind = (rlx_cmp)st->aux;
            } else if (op == RLX_OP_GELU) {
                p.gelu.approx = (rlx_gelu_approx)st->aux;
            }
            int ni = rlx_op_get_info(op)->min_inputs;
            rlx_node in[3] = {reg[st->a], ni > 1 ? reg[st->b] : 0, ni > 2 ? reg[st->c] : 0};
            last = rlx_graph_node_new(g, nm(z, rlx_op_name(op)), op, &p, ni, in, RLX_DTYPE_INVALID,
                                      NULL);
            reg[st->dst] = last;
        }
        return last;
    }
    default:
        break;
    }
    (void)i;
    snprintf(why, why_size, "there is no decomposition for it");
    return RLX_NODE_INVALID;
}

/* A backend may claim an op for F32 operands only: read F16/BF16/F64
 * operands through a CAST to F32 when that makes the node acceptable. Matmul
 * weights and gather tables keep their dtype (kernels read those packed). */
static rlx_node with_f32_inputs(lz *z, const rlx_compile_opts *opts, int32_t i, const rlx_gnode *n)
{
    rlx_graph *g = z->g;
    if (n->op == RLX_OP_CAST || n->op == RLX_OP_COPY || rlx_op_get_info(n->op)->view ||
        n->op == RLX_OP_SCATTER || n->op == RLX_OP_CONCAT || n->op == RLX_OP_PAD)
        return RLX_NODE_INVALID;
    rlx_node in[RLX_MAX_INPUTS];
    int32_t first_new = g->n_nodes;
    bool any = false;
    for (int k = 0; k < n->n_in; k++) {
        rlx_dtype dt = g->nodes[n->in[k]].dtype;
        bool keep = (n->op == RLX_OP_MATMUL && k == 1) || (n->op == RLX_OP_GATHER && k == 0);
        in[k] = n->in[k];
        if (!keep && rlx_dtype_get(dt)->is_float && dt != RLX_DTYPE_F32) {
            in[k] = rlx_graph_node_new(g, nm(z, "f32"), RLX_OP_CAST, NULL, 1, &n->in[k],
                                       RLX_DTYPE_F32, NULL);
            any = true;
        }
    }
    rlx_node r = RLX_NODE_INVALID;
    if (any && g->status == RLX_OK &&
        rlx_compile_supports_desc(opts, g, n->segment, n->op, &n->p, n->n_in, in, n->dtype,
                                  &n->shape))
        r = rlx_graph_node_new(g, n->name, n->op, &n->p, n->n_in, in, n->dtype, &n->shape);
    if (r == RLX_NODE_INVALID || g->nodes[r].dtype != n->dtype ||
        !rlx_shape_equal(&g->nodes[r].shape, &n->shape)) {
        for (int32_t j = first_new; j < g->n_nodes; j++)
            g->nodes[j].op = RLX_OP_NONE;
        return RLX_NODE_INVALID;
    }
    (void)i;
    return r;
}

rlx_status rlx_pass_legalize(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    if (!rlx_compile_has_target(opts))
        return RLX_OK;
    int32_t limit = g->n_nodes * 40 + 1000;
    bool changed = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op == RLX_OP_NONE || rlx_compile_supports(opts, g, &g->nodes[i]))
            continue;
        rlx_gnode n = g->nodes[i];
        const rlx_backend_i *be;
        rlx_device *dev;
        rlx_compile_target(opts, n.segment, &be, &dev);
        const char *be_name = be ? be->name : "?";
        char shp[160], why[200];
        rlx_graph_format_shape(g, &n.shape, shp, sizeof shp);
        if (g->n_nodes > limit)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "legalize: the %s backend cannot run %s '%s' and its rewrites "
                                 "do not converge",
                                 be_name, rlx_op_name(n.op), n.name);
        lz z = {.g = g};
        snprintf(z.base, sizeof z.base, "%s", n.name);
        g->cur_segment = n.segment;
        rlx_node r = with_f32_inputs(&z, opts, i, &n);
        if (r == RLX_NODE_INVALID && g->status == RLX_OK)
            r = rewrite(&z, i, &n, why, sizeof why);
        if (r == RLX_NODE_INVALID) {
            if (g->status != RLX_OK)
                return rlx_compile_graph_error(g, err);
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "legalize: the %s backend cannot run %s '%s' (%s %s) and it "
                                 "cannot be rewritten: %s",
                                 be_name, rlx_op_name(n.op), n.name, rlx_dtype_name(n.dtype), shp,
                                 why);
        }
        if (g->nodes[r].dtype != n.dtype || !rlx_shape_equal(&g->nodes[r].shape, &n.shape))
            return rlx_error_set(err, RLX_ERR_INTERNAL,
                                 "legalize: the rewrite of %s '%s' changed its type",
                                 rlx_op_name(n.op), n.name);
        rlx_graph_replace_uses(g, i, r);
        g->nodes[i].op = RLX_OP_NONE;
        changed = true;
    }
    return changed ? rlx_compile_compact(g, err) : RLX_OK;
}
