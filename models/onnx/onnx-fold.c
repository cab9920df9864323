/* Host constant folding for the ONNX importer (see onnx-import-internal.h):
 * an elementwise op whose inputs are all host constants is computed here,
 * in double, broadcasting as ONNX does. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph.h"
#include "models/onnx/onnx-import-internal.h"

/* ---- host folding ---------------------------------------------------------------- */

bool ox_broadcast_dims(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o)
{
    int r = ra > rb ? ra : rb;
    if (r > MAXD)
        return false;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - ra), ib = i - (r - rb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da == db || db == 1)
            o[i] = da;
        else if (da == 1)
            o[i] = db;
        else
            return false;
    }
    *ro = r;
    return true;
}

/* flat index into a broadcast operand for output index `oi` */
int64_t ox_bidx(int64_t oi, int ro, const int64_t *od, int r, const int64_t *d)
{
    int64_t idx = 0, stride = 1;
    for (int i = ro - 1; i >= 0; i--) {
        int64_t coord = oi % od[i];
        oi /= od[i];
        int k = i - (ro - r);
        if (k >= 0) {
            if (d[k] != 1)
                idx += coord * stride;
            stride *= d[k];
        }
    }
    return idx;
}

typedef double (*fold_fn)(double a, double b, double cc, const rlx_onnx_node *n, int32_t elem);

static double f_add(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a + b;
}
static double f_sub(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a - b;
}
static double f_mul(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a * b;
}
static double f_div(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    if (ox_is_int_elem(e))
        return b == 0 ? 0 : trunc(a / b);
    return a / b;
}
static double f_pow(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return pow(a, b);
}
static double f_max(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a > b ? a : b;
}
static double f_min(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a < b ? a : b;
}
static double f_eq(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a == b;
}
static double f_lt(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a < b;
}
static double f_gt(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a > b;
}
static double f_le(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a <= b;
}
static double f_ge(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a >= b;
}
static double f_and(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a != 0 && b != 0;
}
static double f_or(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a != 0 || b != 0;
}
static double f_where(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a != 0 ? b : cc;
}
static double f_neg(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return -a;
}
static double f_not(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a == 0;
}
static double f_abs(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return fabs(a);
}
static double f_sqrt(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return sqrt(a);
}
static double f_floor(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return floor(a);
}
static double f_ceil(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return ceil(a);
}
static double f_relu(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a > 0 ? a : 0;
}
static double f_exp(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return exp(a);
}
static double f_id(double a, double b, double cc, const rlx_onnx_node *n, int32_t e)
{
    return a;
}

typedef struct {
    const char *op;
    int n_in; /* 1, 2 or 3 (Where); 0 = variadic binary (Max, Min, Sum) */
    fold_fn fn;
    bool to_bool;
} fold_op;

static const fold_op fold_ops[] = {
    {"Add", 2, f_add, false},          {"Sub", 2, f_sub, false},   {"Mul", 2, f_mul, false},
    {"Div", 2, f_div, false},          {"Pow", 2, f_pow, false},   {"Max", 0, f_max, false},
    {"Min", 0, f_min, false},          {"Sum", 0, f_add, false},   {"Equal", 2, f_eq, true},
    {"Less", 2, f_lt, true},           {"Greater", 2, f_gt, true}, {"LessOrEqual", 2, f_le, true},
    {"GreaterOrEqual", 2, f_ge, true}, {"And", 2, f_and, true},    {"Or", 2, f_or, true},
    {"Where", 3, f_where, false},      {"Neg", 1, f_neg, false},   {"Not", 1, f_not, true},
    {"Abs", 1, f_abs, false},          {"Sqrt", 1, f_sqrt, false}, {"Floor", 1, f_floor, false},
    {"Ceil", 1, f_ceil, false},        {"Relu", 1, f_relu, false}, {"Exp", 1, f_exp, false},
    {"Identity", 1, f_id, false},
};

/* Elementwise fold over constant inputs; false when not applicable. */
static bool fold_elementwise(ctx *c, const fold_op *fo)
{
    const rlx_onnx_node *n = c->cur;
    int nin = fo->n_in ? fo->n_in : n->n_inputs;
    if (nin < 1 || nin > 3 || n->n_inputs < nin || n->n_outputs < 1)
        return false;
    val *v[3] = {NULL, NULL, NULL};
    double *d[3];
    int ro = 0;
    int64_t od[MAXD];
    for (int i = 0; i < nin; i++) {
        v[i] = ox_in_val(c, i);
        if (!v[i] || v[i]->kind != V_CONST || !(d[i] = ox_cdata(c, v[i])))
            return false;
        if (i == 0) {
            ro = v[0]->rank;
            memcpy(od, v[0]->dims, sizeof od);
        } else if (!ox_broadcast_dims(ro, od, v[i]->rank, v[i]->dims, &ro, od))
            return false;
    }
    int64_t total = ox_numel_of(ro, od);
    if (total < 0 || total > RLX_ONNX_FOLD_LIMIT)
        return false;
    int32_t elem = fo->to_bool ? RLX_ONNX_BOOL : v[strcmp(fo->op, "Where") == 0 ? 1 : 0]->elem;
    double *out = ox_alloc_d(total);
    if (!out)
        return false;
    int32_t in_elem = v[strcmp(fo->op, "Where") == 0 ? 1 : 0]->elem;
    for (int64_t i = 0; i < total; i++) {
        double a = d[0][ox_bidx(i, ro, od, v[0]->rank, v[0]->dims)];
        double b = nin > 1 ? d[1][ox_bidx(i, ro, od, v[1]->rank, v[1]->dims)] : 0;
        double cc = nin > 2 ? d[2][ox_bidx(i, ro, od, v[2]->rank, v[2]->dims)] : 0;
        out[i] = ox_fit_elem(elem, fo->fn(a, b, cc, n, in_elem));
    }
    return ox_set_const(c, n->outputs[0], elem, ro, od, out) != NULL;
}

bool ox_fold_node(ctx *c)
{
    for (size_t i = 0; i < sizeof fold_ops / sizeof fold_ops[0]; i++)
        if (strcmp(fold_ops[i].op, c->cur->op_type) == 0)
            return fold_elementwise(c, &fold_ops[i]);
    return false;
}
