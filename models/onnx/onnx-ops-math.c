/* The ONNX importer's op builders for elementwise and unary ops, casts,
 * MatMul/Gemm and the reductions (see onnx-import-internal.h). */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph.h"
#include "models/onnx/onnx-import-internal.h"

/* ---- elementwise ---- */

static bool emit_binary_op(ctx *c, rlx_op op)
{
    val *a = ox_need(c, 0), *b = ox_need(c, 1);
    if (!a || !b)
        return false;
    if (a->elem != b->elem && !(op == RLX_OP_POW)) {
        ox_unsupported(c, "inputs of different types (%s, %s)", rlx_onnx_elem_type_name(a->elem),
                       rlx_onnx_elem_type_name(b->elem));
        return false;
    }
    if (!ox_is_float_elem(a->elem) && (op == RLX_OP_DIV || op == RLX_OP_POW)) {
        ox_unsupported(c, "%s inputs", rlx_onnx_elem_type_name(a->elem));
        return false;
    }
    if (op == RLX_OP_POW && !ox_is_float_elem(b->elem)) {
        ox_unsupported(c, "%s exponents", rlx_onnx_elem_type_name(b->elem));
        return false;
    }
    rlx_node x = ox_node_of(c, a), y = ox_node_of(c, b);
    return ox_out1(c, a->elem, rlx_graph_binary(c->g, NULL, op, x, y));
}

bool ox_e_add(ctx *c)
{
    return emit_binary_op(c, RLX_OP_ADD);
}
bool ox_e_sub(ctx *c)
{
    return emit_binary_op(c, RLX_OP_SUB);
}
bool ox_e_mul(ctx *c)
{
    return emit_binary_op(c, RLX_OP_MUL);
}
bool ox_e_div(ctx *c)
{
    return emit_binary_op(c, RLX_OP_DIV);
}
bool ox_e_pow(ctx *c)
{
    return emit_binary_op(c, RLX_OP_POW);
}

/* Max, Min, Sum, Mean: variadic, folded pairwise */
static bool emit_variadic(ctx *c, rlx_op op, bool mean)
{
    const rlx_onnx_node *n = c->cur;
    if (n->n_inputs < 1)
        return false;
    val *v0 = ox_need(c, 0);
    if (!v0)
        return false;
    if (!ox_is_float_elem(v0->elem) && mean) {
        ox_unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v0->elem));
        return false;
    }
    rlx_node acc = ox_node_of(c, v0);
    for (int i = 1; i < n->n_inputs; i++) {
        val *v = ox_need(c, i);
        if (!v)
            return false;
        if (v->elem != v0->elem) {
            ox_unsupported(c, "inputs of different types");
            return false;
        }
        acc = rlx_graph_binary(c->g, NULL, op, acc, ox_node_of(c, v));
    }
    if (n->n_inputs == 1)
        acc = rlx_graph_copy(c->g, NULL, acc);
    if (mean)
        acc = rlx_graph_scale(c->g, NULL, acc, 1.0f / (float)n->n_inputs, 0.0f);
    return ox_out1(c, v0->elem, acc);
}

bool ox_e_max(ctx *c)
{
    return emit_variadic(c, RLX_OP_MAX, false);
}
bool ox_e_min(ctx *c)
{
    return emit_variadic(c, RLX_OP_MIN, false);
}
bool ox_e_sum(ctx *c)
{
    return emit_variadic(c, RLX_OP_ADD, false);
}
bool ox_e_mean(ctx *c)
{
    return emit_variadic(c, RLX_OP_ADD, true);
}

static bool emit_cmp(ctx *c, rlx_cmp kind)
{
    val *a = ox_need(c, 0), *b = ox_need(c, 1);
    if (!a || !b)
        return false;
    if (a->elem != b->elem) {
        ox_unsupported(c, "inputs of different types");
        return false;
    }
    return ox_out1(c, RLX_ONNX_BOOL,
                   rlx_graph_cmp(c->g, NULL, kind, ox_node_of(c, a), ox_node_of(c, b)));
}

bool ox_e_equal(ctx *c)
{
    return emit_cmp(c, RLX_CMP_EQ);
}
bool ox_e_less(ctx *c)
{
    return emit_cmp(c, RLX_CMP_LT);
}
bool ox_e_greater(ctx *c)
{
    return emit_cmp(c, RLX_CMP_GT);
}
bool ox_e_less_eq(ctx *c)
{
    return emit_cmp(c, RLX_CMP_LE);
}
bool ox_e_greater_eq(ctx *c)
{
    return emit_cmp(c, RLX_CMP_GE);
}

bool ox_e_not(ctx *c)
{
    rlx_node x = ox_nd(c, 0);
    rlx_node zero =
        rlx_graph_const(c->g, NULL, RLX_DTYPE_U8, rlx_shape_make(0, NULL), (const uint8_t[]){0});
    return ox_out1(c, RLX_ONNX_BOOL, rlx_graph_cmp(c->g, NULL, RLX_CMP_EQ, x, zero));
}

/* And/Or/Xor on 0/1 bytes: min, max, not-equal */
static bool emit_logic(ctx *c, int kind)
{
    rlx_node a = ox_nd(c, 0), b = ox_nd(c, 1);
    rlx_node r = kind == 0   ? rlx_graph_binary(c->g, NULL, RLX_OP_MIN, a, b)
                 : kind == 1 ? rlx_graph_binary(c->g, NULL, RLX_OP_MAX, a, b)
                             : rlx_graph_cmp(c->g, NULL, RLX_CMP_NE, a, b);
    return ox_out1(c, RLX_ONNX_BOOL, r);
}

bool ox_e_and(ctx *c)
{
    return emit_logic(c, 0);
}
bool ox_e_or(ctx *c)
{
    return emit_logic(c, 1);
}
bool ox_e_xor(ctx *c)
{
    return emit_logic(c, 2);
}

bool ox_e_where(ctx *c)
{
    val *cond = ox_need(c, 0), *a = ox_need(c, 1), *b = ox_need(c, 2);
    if (!cond || !a || !b)
        return false;
    if (a->elem != b->elem) {
        ox_unsupported(c, "inputs of different types");
        return false;
    }
    return ox_out1(
        c, a->elem,
        rlx_graph_where(c->g, NULL, ox_node_of(c, cond), ox_node_of(c, a), ox_node_of(c, b)));
}

/* unary float ops */
val *ox_float_in(ctx *c, int i)
{
    val *v = ox_need(c, i);
    if (v && !ox_is_float_elem(v->elem)) {
        ox_unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v->elem));
        return NULL;
    }
    return v;
}

static bool emit_unary(ctx *c, rlx_op op)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    bool int_ok = op == RLX_OP_NEG || op == RLX_OP_ABS || op == RLX_OP_RELU;
    if (!ox_is_float_elem(v->elem) && !int_ok) {
        ox_unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v->elem));
        return false;
    }
    return ox_out1(c, v->elem, rlx_graph_unary(c->g, NULL, op, ox_node_of(c, v)));
}

#define UNARY(fname, op)          \
    bool fname(ctx *c)            \
    {                             \
        return emit_unary(c, op); \
    }
UNARY(ox_e_neg, RLX_OP_NEG)
UNARY(ox_e_abs, RLX_OP_ABS)
UNARY(ox_e_exp, RLX_OP_EXP)
UNARY(ox_e_log, RLX_OP_LOG)
UNARY(ox_e_sqrt, RLX_OP_SQRT)
UNARY(ox_e_tanh, RLX_OP_TANH)
UNARY(ox_e_sigmoid, RLX_OP_SIGMOID)
UNARY(ox_e_relu, RLX_OP_RELU)
UNARY(ox_e_sin, RLX_OP_SIN)
UNARY(ox_e_cos, RLX_OP_COS)

bool ox_e_reciprocal(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    rlx_node x = ox_node_of(c, v);
    return ox_out1(c, v->elem, rlx_graph_div(c->g, NULL, rlx_graph_scalar(c->g, 1.0f), x));
}

/* erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), since the IR has
 * no erf: sign(x) * (1 - poly(t) * exp(-x^2)), t = 1 / (1 + p|x|) */
static rlx_node erf_node(ctx *c, rlx_node x)
{
    rlx_graph *g = c->g;
    const float p = 0.3275911f, a1 = 0.254829592f, a2 = -0.284496736f, a3 = 1.421413741f,
                a4 = -1.453152027f, a5 = 1.061405429f;
    rlx_node ax = rlx_graph_unary(g, NULL, RLX_OP_ABS, x);
    rlx_node t =
        rlx_graph_div(g, NULL, rlx_graph_scalar(g, 1.0f), rlx_graph_scale(g, NULL, ax, p, 1.0f));
    rlx_node poly = rlx_graph_scale(g, NULL, t, a5, a4);
    poly = rlx_graph_scale(g, NULL, rlx_graph_mul(g, NULL, poly, t), 1.0f, a3);
    poly = rlx_graph_scale(g, NULL, rlx_graph_mul(g, NULL, poly, t), 1.0f, a2);
    poly = rlx_graph_scale(g, NULL, rlx_graph_mul(g, NULL, poly, t), 1.0f, a1);
    poly = rlx_graph_mul(g, NULL, poly, t);
    rlx_node e =
        rlx_graph_exp(g, NULL, rlx_graph_neg(g, NULL, rlx_graph_unary(g, NULL, RLX_OP_SQUARE, x)));
    rlx_node y = rlx_graph_scale(g, NULL, rlx_graph_mul(g, NULL, poly, e), -1.0f, 1.0f);
    /* sign(x) * y, with sign(0) irrelevant since y(0) ~ 0 */
    rlx_node zero = rlx_graph_scalar(g, 0.0f);
    rlx_node pos = rlx_graph_cmp(g, NULL, RLX_CMP_GE, x, zero);
    return rlx_graph_where(g, NULL, pos, y, rlx_graph_neg(g, NULL, y));
}

bool ox_e_erf(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    return ox_out1(c, v->elem, erf_node(c, ox_node_of(c, v)));
}

bool ox_e_leaky_relu(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    float alpha = ox_attr_f(c->cur, "alpha", 0.01f);
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, v);
    /* relu(x) - alpha * relu(-x) */
    rlx_node neg = rlx_graph_relu(g, NULL, rlx_graph_neg(g, NULL, x));
    return ox_out1(c, v->elem,
                   rlx_graph_sub(g, NULL, rlx_graph_relu(g, NULL, x),
                                 rlx_graph_scale(g, NULL, neg, alpha, 0.0f)));
}

bool ox_e_prelu(ctx *c)
{
    val *v = ox_float_in(c, 0), *s = ox_float_in(c, 1);
    if (!v || !s)
        return false;
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, v);
    rlx_node neg = rlx_graph_relu(g, NULL, rlx_graph_neg(g, NULL, x));
    return ox_out1(c, v->elem,
                   rlx_graph_sub(g, NULL, rlx_graph_relu(g, NULL, x),
                                 rlx_graph_mul(g, NULL, neg, ox_node_of(c, s))));
}

bool ox_e_elu(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    float alpha = ox_attr_f(c->cur, "alpha", 1.0f);
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, v);
    rlx_node mn = rlx_graph_binary(g, NULL, RLX_OP_MIN, x, rlx_graph_scalar(g, 0.0f));
    rlx_node e = rlx_graph_scale(g, NULL, rlx_graph_exp(g, NULL, mn), alpha, -alpha);
    return ox_out1(c, v->elem, rlx_graph_add(g, NULL, rlx_graph_relu(g, NULL, x), e));
}

bool ox_e_selu(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    float alpha = ox_attr_f(c->cur, "alpha", 1.67326319217681884765625f);
    float gamma = ox_attr_f(c->cur, "gamma", 1.05070102214813232421875f);
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, v);
    rlx_node mn = rlx_graph_binary(g, NULL, RLX_OP_MIN, x, rlx_graph_scalar(g, 0.0f));
    rlx_node e = rlx_graph_scale(g, NULL, rlx_graph_exp(g, NULL, mn), alpha, -alpha);
    rlx_node y = rlx_graph_add(g, NULL, rlx_graph_relu(g, NULL, x), e);
    return ox_out1(c, v->elem, rlx_graph_scale(g, NULL, y, gamma, 0.0f));
}

bool ox_e_hard_sigmoid(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    float alpha = ox_attr_f(c->cur, "alpha", 0.2f), beta = ox_attr_f(c->cur, "beta", 0.5f);
    rlx_node y = rlx_graph_scale(c->g, NULL, ox_node_of(c, v), alpha, beta);
    return ox_out1(c, v->elem, rlx_graph_clamp(c->g, NULL, y, 0.0f, 1.0f));
}

bool ox_e_hard_swish(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    rlx_node x = ox_node_of(c, v);
    rlx_node y =
        rlx_graph_clamp(c->g, NULL, rlx_graph_scale(c->g, NULL, x, 1.0f / 6.0f, 0.5f), 0.0f, 1.0f);
    return ox_out1(c, v->elem, rlx_graph_mul(c->g, NULL, x, y));
}

bool ox_e_softplus(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, v);
    /* log(1 + exp(x)) = relu(x) + log(1 + exp(-|x|)), without overflow */
    rlx_node t =
        rlx_graph_exp(g, NULL, rlx_graph_neg(g, NULL, rlx_graph_unary(g, NULL, RLX_OP_ABS, x)));
    rlx_node l = rlx_graph_unary(g, NULL, RLX_OP_LOG, rlx_graph_scale(g, NULL, t, 1.0f, 1.0f));
    return ox_out1(c, v->elem, rlx_graph_add(g, NULL, rlx_graph_relu(g, NULL, x), l));
}

bool ox_e_softsign(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, v);
    rlx_node d = rlx_graph_scale(g, NULL, rlx_graph_unary(g, NULL, RLX_OP_ABS, x), 1.0f, 1.0f);
    return ox_out1(c, v->elem, rlx_graph_div(g, NULL, x, d));
}

bool ox_e_thresholded_relu(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    float alpha = ox_attr_f(c->cur, "alpha", 1.0f);
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, v);
    rlx_node m = rlx_graph_cmp(g, NULL, RLX_CMP_GT, x, rlx_graph_scalar(g, alpha));
    return ox_out1(c, v->elem, rlx_graph_where(g, NULL, m, x, rlx_graph_scalar(g, 0.0f)));
}

bool ox_e_clip(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    if (!ox_is_float_elem(v->elem)) {
        ox_unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v->elem));
        return false;
    }
    double lo = -FLT_MAX, hi = FLT_MAX;
    if (c->opset < 11) {
        lo = ox_attr_f(c->cur, "min", -FLT_MAX);
        hi = ox_attr_f(c->cur, "max", FLT_MAX);
    } else {
        for (int i = 1; i <= 2; i++) {
            val *b = ox_in_val(c, i);
            if (!b)
                continue;
            double *d = b->kind == V_CONST ? ox_cdata(c, b) : NULL;
            if (!d && ox_is_float_elem(b->elem) && ox_vnumel(b) == 1)
                continue; /* applied below, as max / min with the tensor */
            if (!d || ox_vnumel(b) != 1) {
                ox_unsupported(c, "min/max that are not single numbers");
                return false;
            }
            if (i == 1)
                lo = d[0];
            else
                hi = d[0];
        }
    }
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, v);
    val *rmin = ox_in_val(c, 1), *rmax = ox_in_val(c, 2);
    if (c->opset >= 11 && ((rmin && rmin->kind != V_CONST) || (rmax && rmax->kind != V_CONST))) {
        /* min(max(x, lo), hi), as ONNX's reference computes it */
        if (rmin)
            x = rlx_graph_binary(g, NULL, RLX_OP_MAX, x, ox_node_of(c, rmin));
        if (rmax)
            x = rlx_graph_binary(g, NULL, RLX_OP_MIN, x, ox_node_of(c, rmax));
        return ox_out1(c, v->elem, x);
    }
    if (lo > hi) /* ONNX: every element becomes max */
        return ox_out1(c, v->elem, rlx_graph_clamp(g, NULL, x, (float)hi, (float)hi));
    return ox_out1(c, v->elem, rlx_graph_clamp(g, NULL, x, (float)lo, (float)hi));
}

bool ox_e_identity(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    if (strcmp(c->cur->op_type, "Dropout") == 0) {
        bool want_mask = c->cur->n_outputs > 1 && c->cur->outputs[1][0];
        /* inference only: a training_mode that is not a constant false is refused */
        val *tm = ox_in_val(c, 2);
        double *d = tm && tm->kind == V_CONST ? ox_cdata(c, tm) : NULL;
        if (tm && (!d || ox_vnumel(tm) != 1 || d[0] != 0)) {
            ox_unsupported(c, "training_mode");
            return false;
        }
        /* in inference every element is kept: the mask is all true */
        if (want_mask) {
            double *ones = ox_alloc_d(ox_vnumel(v));
            if (!ones) {
                ox_unsupported(c, "masks of more than %d elements", RLX_ONNX_FOLD_LIMIT);
                return false;
            }
            for (int64_t i = 0; i < ox_vnumel(v); i++)
                ones[i] = 1;
            if (!ox_set_const(c, c->cur->outputs[1], RLX_ONNX_BOOL, v->rank, v->dims, ones))
                return false;
        }
    }
    if (v->kind == V_CONST) {
        val *o = ox_set_const(c, c->cur->outputs[0], v->elem, v->rank, v->dims, NULL);
        if (!o)
            return false;
        o->init = v->init;
        if (ox_cdata(c, v)) {
            o->c = ox_alloc_d(ox_vnumel(v));
            if (!o->c)
                return false;
            memcpy(o->c, v->c, (size_t)ox_vnumel(v) * sizeof(double));
        }
        o->node = v->node;
        return true;
    }
    return ox_out1(c, v->elem, ox_node_of(c, v));
}

static bool emit_cast(ctx *c, int32_t to);

bool ox_e_cast(ctx *c)
{
    return emit_cast(c, (int32_t)ox_attr_i(c->cur, "to", 0));
}

bool ox_e_cast_like(ctx *c)
{
    val *t = ox_need(c, 1);
    return t && emit_cast(c, t->elem);
}

static bool emit_cast(ctx *c, int32_t to)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    /* ONNX leaves float -> bfloat16 rounding open (its 1.12 test data
     * truncates, runtimes round to nearest even): refused rather than
     * guessed */
    if (to == RLX_ONNX_BFLOAT16 && v->elem != RLX_ONNX_BFLOAT16) {
        ox_unsupported(c, "casts to bfloat16 (the rounding is not specified)");
        return false;
    }

    rlx_dtype gto = ox_graph_dtype(to);
    if (gto == RLX_DTYPE_INVALID || ox_graph_dtype(v->elem) == RLX_DTYPE_INVALID) {
        ox_unsupported(c, "casts from %s to %s", rlx_onnx_elem_type_name(v->elem),
                       rlx_onnx_elem_type_name(to));
        return false;
    }
    if (v->kind == V_CONST && ox_cdata(c, v)) {
        int64_t n = ox_vnumel(v);
        double *d = ox_alloc_d(n);
        if (!d)
            return false;
        for (int64_t i = 0; i < n; i++)
            d[i] = ox_fit_elem(to, v->c[i]);
        return ox_set_const(c, c->cur->outputs[0], to, v->rank, v->dims, d) != NULL;
    }
    /* float16 values are kept in F32 holding exactly the narrower type's
     * values: the cast rounds through it (to nearest even, as IEEE) */
    rlx_dtype narrow = to == RLX_ONNX_FLOAT16    ? RLX_DTYPE_F16
                       : to == RLX_ONNX_BFLOAT16 ? RLX_DTYPE_BF16
                                                 : RLX_DTYPE_INVALID;
    rlx_node x = ox_node_of(c, v);
    rlx_dtype from = rlx_graph_node_dtype(c->g, x);
    rlx_node y;
    if (to == RLX_ONNX_BOOL)
        y = rlx_graph_cmp(c->g, NULL, RLX_CMP_NE, x, ox_scalar_like(c, x, 0));
    else if (narrow != RLX_DTYPE_INVALID)
        y = rlx_graph_cast(c->g, NULL, rlx_graph_cast(c->g, NULL, x, narrow), RLX_DTYPE_F32);
    else if (from == gto)
        y = x; /* float16 -> float: the value already is one (as Identity) */
    else
        y = rlx_graph_cast(c->g, NULL, x, gto);
    return ox_out1(c, to, y);
}

/* ---- linear algebra ---- */

bool ox_e_matmul(ctx *c)
{
    val *a = ox_float_in(c, 0), *b = ox_float_in(c, 1);
    if (!a || !b)
        return false;
    rlx_node x = ox_node_of(c, a), y = ox_node_of(c, b);
    bool va = a->rank == 1, vb = b->rank == 1;
    if (va)
        x = ox_reshape(c, x, 2, (int64_t[]){1, a->dims[0]});
    if (vb)
        y = ox_reshape(c, y, 2, (int64_t[]){b->dims[0], 1});
    rlx_node z = rlx_graph_matmul(c->g, NULL, x, y, false, false);
    if (z == RLX_NODE_INVALID)
        return ox_out1(c, a->elem, z);
    if (va || vb) {
        rlx_shape s = ox_shape_of(c, z);
        int64_t d[MAXD];
        int r = 0;
        for (int i = 0; i < s.rank; i++) {
            if ((va && i == s.rank - 2) || (vb && i == s.rank - 1))
                continue;
            d[r++] = s.d[i].k;
        }
        z = ox_reshape(c, z, r, d);
    }
    return ox_out1(c, a->elem, z);
}

bool ox_e_gemm(ctx *c)
{
    val *a = ox_float_in(c, 0), *b = ox_float_in(c, 1);
    if (!a || !b)
        return false;
    float alpha = ox_attr_f(c->cur, "alpha", 1.0f), beta = ox_attr_f(c->cur, "beta", 1.0f);
    bool ta = ox_attr_i(c->cur, "transA", 0) != 0, tb = ox_attr_i(c->cur, "transB", 0) != 0;
    if (a->rank != 2 || b->rank != 2) {
        ox_failf(c, RLX_ERR_FORMAT, "A and B must be 2-D");
        return false;
    }
    rlx_graph *g = c->g;
    rlx_node y = rlx_graph_matmul(g, NULL, ox_node_of(c, a), ox_node_of(c, b), ta, tb);
    if (alpha != 1.0f)
        y = rlx_graph_scale(g, NULL, y, alpha, 0.0f);
    val *cv = ox_in_val(c, 2);
    if (cv && beta != 0.0f) {
        rlx_node cn = ox_node_of(c, cv);
        if (beta != 1.0f)
            cn = rlx_graph_scale(g, NULL, cn, beta, 0.0f);
        y = rlx_graph_add(g, NULL, y, cn);
    }
    return ox_out1(c, a->elem, y);
}

/* ---- reductions ---- */

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_L1, R_L2, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP } rkind;

/* reduce x over the axes flagged in `red` (keepdim), then drop them unless
 * keepdims */
static rlx_node reduce_axes(ctx *c, rlx_node x, const bool *red, int rank, rlx_op op)
{
    for (int i = 0; i < rank && x != RLX_NODE_INVALID; i++)
        if (red[i])
            x = rlx_graph_reduce(c->g, NULL, op, x, i, true);
    return x;
}

static bool emit_reduce(ctx *c, rkind kind)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    const rlx_onnx_node *n = c->cur;
    int64_t axes[MAXD + 1];
    int na;
    bool axes_input = (strcmp(n->op_type, "ReduceSum") == 0 && c->opset >= 13) || c->opset >= 18;
    if (axes_input) {
        if (ox_in_val(c, 1)) {
            na = ox_const_ints(c, 1, axes, MAXD + 1);
            if (na < 0 || na > MAXD) {
                ox_unsupported(c, "axes that are not known at import time");
                return false;
            }
        } else
            na = -1;
    } else {
        na = ox_attr_ints(n, "axes", axes, MAXD + 1);
        if (na > MAXD) {
            ox_failf(c, RLX_ERR_FORMAT, "too many axes");
            return false;
        }
    }
    bool keep = ox_attr_i(n, "keepdims", 1) != 0;
    bool red[MAXD] = {false};
    if (na <= 0) {
        if (na == 0 && ox_attr_i(n, "noop_with_empty_axes", 0)) {
            return ox_out1(c, v->elem, rlx_graph_copy(c->g, NULL, ox_node_of(c, v)));
        }
        for (int i = 0; i < v->rank; i++)
            red[i] = true;
    } else
        for (int i = 0; i < na; i++) {
            bool ok = true;
            int a = ox_norm_axis(axes[i], v->rank, &ok);
            if (!ok) {
                ox_failf(c, RLX_ERR_FORMAT, "axis %lld out of range", (long long)axes[i]);
                return false;
            }
            red[a] = true;
        }
    for (int i = 0; i < v->rank; i++)
        if (red[i] && v->dims[i] == 0) {
            ox_unsupported(c, "reductions over empty dims");
            return false;
        }
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, v), y;
    if (v->rank == 0) {
        x = ox_reshape(c, x, 1, (int64_t[]){1});
        red[0] = true;
    }
    int rank = v->rank ? v->rank : 1;
    switch (kind) {
    case R_SUM:
        y = reduce_axes(c, x, red, rank, RLX_OP_REDUCE_SUM);
        break;
    case R_MEAN:
        y = reduce_axes(c, x, red, rank, RLX_OP_REDUCE_MEAN);
        break;
    case R_MAX:
        y = reduce_axes(c, x, red, rank, RLX_OP_REDUCE_MAX);
        break;
    case R_MIN:
        y = rlx_graph_neg(g, NULL,
                          reduce_axes(c, rlx_graph_neg(g, NULL, x), red, rank, RLX_OP_REDUCE_MAX));
        break;
    case R_L1:
        y = reduce_axes(c, rlx_graph_unary(g, NULL, RLX_OP_ABS, x), red, rank, RLX_OP_REDUCE_SUM);
        break;
    case R_L2:
        y = rlx_graph_sqrt(g, NULL,
                           reduce_axes(c, rlx_graph_unary(g, NULL, RLX_OP_SQUARE, x), red, rank,
                                       RLX_OP_REDUCE_SUM));
        break;
    case R_SUMSQ:
        y = reduce_axes(c, rlx_graph_unary(g, NULL, RLX_OP_SQUARE, x), red, rank,
                        RLX_OP_REDUCE_SUM);
        break;
    case R_LOGSUM:
        y = rlx_graph_unary(g, NULL, RLX_OP_LOG, reduce_axes(c, x, red, rank, RLX_OP_REDUCE_SUM));
        break;
    default: { /* max + log(sum(exp(x - max))) */
        rlx_node mx = reduce_axes(c, x, red, rank, RLX_OP_REDUCE_MAX);
        rlx_node e = rlx_graph_exp(g, NULL, rlx_graph_sub(g, NULL, x, mx));
        y = rlx_graph_add(
            g, NULL, mx,
            rlx_graph_unary(g, NULL, RLX_OP_LOG, reduce_axes(c, e, red, rank, RLX_OP_REDUCE_SUM)));
        break;
    }
    }
    if (y == RLX_NODE_INVALID)
        return ox_out1(c, v->elem, y);
    int64_t od[MAXD];
    int orank = 0;
    for (int i = 0; i < v->rank; i++) {
        if (!red[i])
            od[orank++] = v->dims[i];
        else if (keep)
            od[orank++] = 1;
    }
    return ox_out1(c, v->elem, ox_reshape(c, y, orank, od));
}

#define REDUCE(fname, kind)          \
    bool fname(ctx *c)               \
    {                                \
        return emit_reduce(c, kind); \
    }
REDUCE(ox_e_reduce_sum, R_SUM)
REDUCE(ox_e_reduce_mean, R_MEAN)
REDUCE(ox_e_reduce_max, R_MAX)
REDUCE(ox_e_reduce_min, R_MIN)
REDUCE(ox_e_reduce_l1, R_L1)
REDUCE(ox_e_reduce_l2, R_L2)
REDUCE(ox_e_reduce_sumsq, R_SUMSQ)
REDUCE(ox_e_reduce_logsum, R_LOGSUM)
REDUCE(ox_e_reduce_logsumexp, R_LOGSUMEXP)

static bool emit_global_pool(ctx *c, rlx_op op)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    if (v->rank < 3) {
        ox_failf(c, RLX_ERR_FORMAT, "the input needs a spatial dim");
        return false;
    }
    int64_t sp = 1;
    for (int i = 2; i < v->rank; i++)
        sp *= v->dims[i];
    rlx_node x = ox_reshape(c, ox_node_of(c, v), 3, (int64_t[]){v->dims[0], v->dims[1], sp});
    x = rlx_graph_reduce(c->g, NULL, op, x, 2, true);
    int64_t od[MAXD];
    for (int i = 0; i < v->rank; i++)
        od[i] = i < 2 ? v->dims[i] : 1;
    return ox_out1(c, v->elem, ox_reshape(c, x, v->rank, od));
}

bool ox_e_global_avg_pool(ctx *c)
{
    return emit_global_pool(c, RLX_OP_REDUCE_MEAN);
}
bool ox_e_global_max_pool(ctx *c)
{
    return emit_global_pool(c, RLX_OP_REDUCE_MAX);
}

static bool emit_arg(ctx *c, bool is_min)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    if (ox_attr_i(c->cur, "select_last_index", 0)) {
        ox_unsupported(c, "select_last_index 1");
        return false;
    }
    bool ok = true;
    int axis = ox_norm_axis(ox_attr_i(c->cur, "axis", 0), v->rank, &ok);
    if (!ok) {
        ox_failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    bool keep = ox_attr_i(c->cur, "keepdims", 1) != 0;
    rlx_node x = ox_node_of(c, v);
    if (is_min)
        x = rlx_graph_neg(c->g, NULL, x);
    rlx_node y = rlx_graph_argmax(c->g, NULL, x, axis);
    int64_t od[MAXD];
    int r = 0;
    for (int i = 0; i < v->rank; i++)
        if (i != axis || keep)
            od[r++] = i == axis ? 1 : v->dims[i];
    return ox_out1(c, RLX_ONNX_INT64, ox_reshape(c, y, r, od));
}

bool ox_e_argmax(ctx *c)
{
    return emit_arg(c, false);
}
bool ox_e_argmin(ctx *c)
{
    return emit_arg(c, true);
}

bool ox_e_topk(ctx *c)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    int64_t k;
    if (c->opset < 10)
        k = ox_attr_i(c->cur, "k", -1);
    else if (ox_const_ints(c, 1, &k, 1) != 1) {
        ox_unsupported(c, "a k that is not known at import time");
        return false;
    }
    bool ok = true;
    int axis = ox_norm_axis(ox_attr_i(c->cur, "axis", -1), v->rank, &ok);
    if (!ok || k < 1 || k > v->dims[axis]) {
        ox_unsupported(c, "this k or axis");
        return false;
    }
    if (ox_attr_i(c->cur, "sorted", 1) == 0) {
        ox_unsupported(c, "sorted 0");
        return false;
    }
    bool largest = ox_attr_i(c->cur, "largest", 1) != 0;
    rlx_node x = ox_node_of(c, v);
    rlx_node vals = rlx_graph_topk(c->g, NULL, x, axis, (int)k, largest, false);
    if (!ox_set_node(c, c->cur->outputs[0], v->elem, vals))
        return false;
    if (c->cur->n_outputs > 1 && c->cur->outputs[1][0]) {
        rlx_node idx = rlx_graph_topk(c->g, NULL, x, axis, (int)k, largest, true);
        if (!ox_set_node(c, c->cur->outputs[1], RLX_ONNX_INT64, idx))
            return false;
    }
    return true;
}
