#include "backends/base/op.h"

#include <string.h>

#define U(o, n)       [RLX_OP_##o] = {n, 1, 1, true, false}
#define B(o, n)       [RLX_OP_##o] = {n, 2, 2, true, false}
#define X(o, n, a, b) [RLX_OP_##o] = {n, a, b, false, false}
#define V(o, n, a, b) [RLX_OP_##o] = {n, a, b, false, true}

static const rlx_op_info infos[RLX_OP_COUNT] = {
    X(NONE, "none", 0, 0),
    X(INPUT, "input", 0, 0),
    X(PARAM, "param", 0, 0),
    X(CONST, "const", 0, 0),
    X(STATE, "state", 0, 0),
    U(NEG, "neg"),
    U(ABS, "abs"),
    U(EXP, "exp"),
    U(LOG, "log"),
    U(SQRT, "sqrt"),
    U(RSQRT, "rsqrt"),
    U(TANH, "tanh"),
    U(SIGMOID, "sigmoid"),
    U(RELU, "relu"),
    U(GELU, "gelu"),
    U(SILU, "silu"),
    U(SIN, "sin"),
    U(COS, "cos"),
    U(SQUARE, "square"),
    U(CAST, "cast"),
    U(CLAMP, "clamp"),
    U(SCALE, "scale"),
    B(ADD, "add"),
    B(SUB, "sub"),
    B(MUL, "mul"),
    B(DIV, "div"),
    B(MAX, "max"),
    B(MIN, "min"),
    B(POW, "pow"),
    B(CMP, "cmp"),
    [RLX_OP_WHERE] = {"where", 3, 3, true, false},
    [RLX_OP_FUSED_ELEMENTWISE] = {"fused_elementwise", 1, RLX_MAX_INPUTS, true, false},
    X(MATMUL, "matmul", 2, 3),
    X(REDUCE_SUM, "reduce_sum", 1, 1),
    X(REDUCE_MEAN, "reduce_mean", 1, 1),
    X(REDUCE_MAX, "reduce_max", 1, 1),
    X(ARGMAX, "argmax", 1, 1),
    X(TOPK, "topk", 1, 1),
    X(SOFTMAX, "softmax", 1, 2),
    X(LAYER_NORM, "layer_norm", 1, 3),
    X(RMS_NORM, "rms_norm", 1, 2),
    X(GROUP_NORM, "group_norm", 1, 3),
    X(ADD_RMS_NORM, "add_rms_norm", 3, 3),
    X(ROPE, "rope", 2, 3),
    X(ATTENTION, "attention", 3, 4),
    X(CONV1D, "conv1d", 2, 3),
    X(CONV2D, "conv2d", 2, 3),
    X(CONV_TRANSPOSE2D, "conv_transpose2d", 2, 3),
    X(RESIZE, "resize", 1, 1),
    X(POOL2D, "pool2d", 1, 1),
    V(RESHAPE, "reshape", 1, 1),
    V(PERMUTE, "permute", 1, 1),
    V(SLICE, "slice", 1, 1),
    X(CONCAT, "concat", 1, RLX_MAX_INPUTS),
    X(PAD, "pad", 1, 1),
    X(COPY, "copy", 1, 1),
    X(GATHER, "gather", 2, 2),
    X(SCATTER, "scatter", 2, 2),
};

const rlx_op_info *rlx_op_get_info(rlx_op op)
{
    if ((int)op < 0 || op >= RLX_OP_COUNT)
        return &infos[RLX_OP_NONE];
    return &infos[op];
}

const char *rlx_op_name(rlx_op op)
{
    return rlx_op_get_info(op)->name;
}

rlx_dim rlx_dim_const(int64_t k)
{
    rlx_dim d = {.k = k};
    for (int i = 0; i < RLX_DIM_TERMS; i++) {
        d.sym[i] = -1;
        d.mul[i] = 0;
    }
    return d;
}

rlx_dim rlx_dim_sym(int sym)
{
    rlx_dim d = rlx_dim_const(0);
    if (sym >= 0 && sym < RLX_MAX_SYMBOLS) {
        d.sym[0] = (int16_t)sym;
        d.mul[0] = 1;
    }
    return d;
}

bool rlx_dim_is_const(rlx_dim d)
{
    for (int i = 0; i < RLX_DIM_TERMS; i++)
        if (d.sym[i] >= 0 && d.mul[i] != 0)
            return false;
    return true;
}

/* Collect terms by symbol into a dense array, then rebuild canonically. */
static bool dim_from_dense(int64_t k, const int64_t *mul, rlx_dim *out)
{
    rlx_dim d = rlx_dim_const(k);
    int n = 0;
    for (int s = 0; s < RLX_MAX_SYMBOLS; s++) {
        if (mul[s] == 0)
            continue;
        if (n == RLX_DIM_TERMS || mul[s] > INT32_MAX || mul[s] < INT32_MIN)
            return false;
        d.sym[n] = (int16_t)s;
        d.mul[n] = (int32_t)mul[s];
        n++;
    }
    *out = d;
    return true;
}

static void dim_to_dense(rlx_dim d, int64_t *mul)
{
    for (int i = 0; i < RLX_DIM_TERMS; i++)
        if (d.sym[i] >= 0 && d.sym[i] < RLX_MAX_SYMBOLS)
            mul[d.sym[i]] += d.mul[i];
}

bool rlx_dim_equal(rlx_dim a, rlx_dim b)
{
    int64_t ma[RLX_MAX_SYMBOLS] = {0}, mb[RLX_MAX_SYMBOLS] = {0};
    if (a.k != b.k)
        return false;
    dim_to_dense(a, ma);
    dim_to_dense(b, mb);
    return memcmp(ma, mb, sizeof ma) == 0;
}

int64_t rlx_dim_eval(rlx_dim d, const rlx_sym_values *sv)
{
    int64_t v = d.k;
    for (int i = 0; i < RLX_DIM_TERMS; i++)
        if (d.sym[i] >= 0 && d.sym[i] < RLX_MAX_SYMBOLS && d.mul[i] != 0)
            v += (int64_t)d.mul[i] * (sv ? sv->v[d.sym[i]] : 0);
    return v;
}

int64_t rlx_dim_upper(rlx_dim d, const int64_t *max)
{
    int64_t v = d.k;
    for (int i = 0; i < RLX_DIM_TERMS; i++)
        if (d.sym[i] >= 0 && d.sym[i] < RLX_MAX_SYMBOLS && d.mul[i] != 0)
            v += (int64_t)d.mul[i] * (d.mul[i] > 0 ? max[d.sym[i]] : 0);
    return v;
}

bool rlx_dim_add(rlx_dim a, rlx_dim b, rlx_dim *out)
{
    int64_t m[RLX_MAX_SYMBOLS] = {0};
    dim_to_dense(a, m);
    dim_to_dense(b, m);
    return dim_from_dense(a.k + b.k, m, out);
}

rlx_dim rlx_dim_scale(rlx_dim a, int64_t m)
{
    int64_t mm[RLX_MAX_SYMBOLS] = {0};
    rlx_dim out;
    dim_to_dense(a, mm);
    for (int s = 0; s < RLX_MAX_SYMBOLS; s++)
        mm[s] *= m;
    if (!dim_from_dense(a.k * m, mm, &out))
        return rlx_dim_const(-1);
    return out;
}

bool rlx_dim_sub(rlx_dim a, rlx_dim b, rlx_dim *out)
{
    return rlx_dim_add(a, rlx_dim_scale(b, -1), out);
}

rlx_shape rlx_shape_make(int rank, const int64_t *dims)
{
    rlx_shape s;
    memset(&s, 0, sizeof s);
    if (rank < 0 || rank > RLX_MAX_DIMS)
        rank = 0;
    s.rank = rank;
    for (int i = 0; i < RLX_MAX_DIMS; i++)
        s.d[i] = rlx_dim_const(i < rank && dims ? dims[i] : 1);
    return s;
}

rlx_shape rlx_shape_make_dims(int rank, const rlx_dim *dims)
{
    rlx_shape s = rlx_shape_make(0, NULL);
    if (rank < 0 || rank > RLX_MAX_DIMS)
        return s;
    s.rank = rank;
    for (int i = 0; i < rank; i++) {
        rlx_dim d;
        int64_t m[RLX_MAX_SYMBOLS] = {0};
        dim_to_dense(dims[i], m);
        s.d[i] = dim_from_dense(dims[i].k, m, &d) ? d : dims[i];
    }
    return s;
}

int64_t rlx_shape_numel(const rlx_shape *s, const rlx_sym_values *sv)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= rlx_dim_eval(s->d[i], sv);
    return n;
}

bool rlx_shape_equal(const rlx_shape *a, const rlx_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (!rlx_dim_equal(a->d[i], b->d[i]))
            return false;
    return true;
}
