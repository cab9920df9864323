/* const-fold: evaluate nodes whose inputs are all constants, on the host, at
 * compile time (position tables, masks built from constants, scaled
 * constants). A small scalar evaluator in double precision covers the
 * elementwise ops, data movement and reductions; anything else (and any
 * result above FOLD_MAX elements) is left for the device. */
#include "engine/compile/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FOLD_MAX (1 << 20)

static double load(const void *p, rlx_dtype dt, int64_t i)
{
    switch (dt) {
    case RLX_DTYPE_F64:
        return ((const double *)p)[i];
    case RLX_DTYPE_F32:
        return ((const float *)p)[i];
    case RLX_DTYPE_F16:
        return rlx_f16_to_f32(((const uint16_t *)p)[i]);
    case RLX_DTYPE_BF16:
        return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
    case RLX_DTYPE_I64:
        return (double)((const int64_t *)p)[i];
    case RLX_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case RLX_DTYPE_I16:
        return ((const int16_t *)p)[i];
    case RLX_DTYPE_I8:
        return ((const int8_t *)p)[i];
    case RLX_DTYPE_U8:
    case RLX_DTYPE_BOOL:
        return ((const uint8_t *)p)[i];
    default:
        return 0;
    }
}

static void store(void *p, rlx_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case RLX_DTYPE_F64:
        ((double *)p)[i] = v;
        break;
    case RLX_DTYPE_F32:
        ((float *)p)[i] = (float)v;
        break;
    case RLX_DTYPE_F16:
        ((uint16_t *)p)[i] = rlx_f32_to_f16((float)v);
        break;
    case RLX_DTYPE_BF16:
        ((uint16_t *)p)[i] = rlx_f32_to_bf16((float)v);
        break;
    case RLX_DTYPE_I64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    case RLX_DTYPE_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case RLX_DTYPE_I16:
        ((int16_t *)p)[i] = (int16_t)v;
        break;
    case RLX_DTYPE_I8:
        ((int8_t *)p)[i] = (int8_t)v;
        break;
    case RLX_DTYPE_U8:
    case RLX_DTYPE_BOOL:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    default:
        break;
    }
}

static bool plain(rlx_dtype dt)
{
    const rlx_dtype_info *ti = rlx_dtype_get(dt);
    return (ti->is_float || ti->is_int) && dt != RLX_DTYPE_F8_E4M3 && dt != RLX_DTYPE_F8_E5M2;
}

/* Row-major strides of a constant shape; broadcast dims (size 1 against a
 * larger output) get stride 0 when aligned to an output of rank `orank`. */
static void bstrides(const rlx_shape *s, int orank, const rlx_shape *o, int64_t *st)
{
    int64_t acc = 1;
    for (int d = orank - 1; d >= 0; d--) {
        int sd = d - (orank - s->rank);
        if (sd < 0) {
            st[d] = 0;
            continue;
        }
        int64_t n = s->d[sd].k;
        st[d] = (n == 1 && o->d[d].k != 1) ? 0 : acc;
        acc *= n;
    }
}

static bool next_index(int64_t *idx, const rlx_shape *s)
{
    for (int d = s->rank - 1; d >= 0; d--) {
        if (++idx[d] < s->d[d].k)
            return true;
        idx[d] = 0;
    }
    return false;
}

static double unary(const rlx_gnode *n, rlx_op op, double x)
{
    switch (op) {
    case RLX_OP_NEG:
        return -x;
    case RLX_OP_ABS:
        return fabs(x);
    case RLX_OP_EXP:
        return exp(x);
    case RLX_OP_LOG:
        return log(x);
    case RLX_OP_SQRT:
        return sqrt(x);
    case RLX_OP_RSQRT:
        return 1.0 / sqrt(x);
    case RLX_OP_TANH:
        return tanh(x);
    case RLX_OP_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case RLX_OP_RELU:
        return x > 0 ? x : 0;
    case RLX_OP_GELU:
        if (n->p.gelu.approx == RLX_GELU_TANH)
            return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    case RLX_OP_SILU:
        return x / (1.0 + exp(-x));
    case RLX_OP_SIN:
        return sin(x);
    case RLX_OP_COS:
        return cos(x);
    case RLX_OP_SQUARE:
        return x * x;
    case RLX_OP_CAST:
        return x;
    case RLX_OP_CLAMP:
        return x < n->p.clamp.lo ? n->p.clamp.lo : x > n->p.clamp.hi ? n->p.clamp.hi : x;
    case RLX_OP_SCALE:
        return x * n->p.scale.mul + n->p.scale.add;
    default:
        return 0;
    }
}

static double binary(const rlx_gnode *n, double a, double b, bool is_int)
{
    switch (n->op) {
    case RLX_OP_ADD:
        return a + b;
    case RLX_OP_SUB:
        return a - b;
    case RLX_OP_MUL:
        return a * b;
    case RLX_OP_DIV:
        if (is_int)
            return b != 0 ? trunc(a / b) : 0;
        return a / b;
    case RLX_OP_MAX:
        return a > b ? a : b;
    case RLX_OP_MIN:
        return a < b ? a : b;
    case RLX_OP_POW:
        return pow(a, b);
    case RLX_OP_CMP:
        switch (n->p.cmp.kind) {
        case RLX_CMP_EQ:
            return a == b;
        case RLX_CMP_NE:
            return a != b;
        case RLX_CMP_LT:
            return a < b;
        case RLX_CMP_LE:
            return a <= b;
        case RLX_CMP_GT:
            return a > b;
        case RLX_CMP_GE:
            return a >= b;
        }
        return 0;
    default:
        return 0;
    }
}

/* Evaluate node n (all inputs CONST) into out; false when not foldable. */
static bool eval(const rlx_graph *g, const rlx_gnode *n, void *out)
{
    const rlx_shape *o = &n->shape;
    int64_t idx[RLX_MAX_DIMS] = {0};
    int64_t numel = rlx_shape_numel(o, NULL);
    const rlx_gnode *x = &g->nodes[n->in[0]];
    if (numel == 0)
        return true;
    if (rlx_op_is_elementwise(n->op) && n->op != RLX_OP_FUSED_ELEMENTWISE) {
        int64_t st[RLX_MAX_INPUTS][RLX_MAX_DIMS];
        for (int k = 0; k < n->n_in; k++)
            bstrides(&g->nodes[n->in[k]].shape, o->rank, o, st[k]);
        bool is_int = rlx_dtype_get(n->dtype)->is_int;
        for (int64_t i = 0; i < numel; i++) {
            double v[3] = {0};
            for (int k = 0; k < n->n_in; k++) {
                int64_t off = 0;
                for (int d = 0; d < o->rank; d++)
                    off += idx[d] * st[k][d];
                v[k] = load(g->nodes[n->in[k]].data, g->nodes[n->in[k]].dtype, off);
            }
            double r;
            if (n->n_in == 1)
                r = unary(n, n->op, v[0]);
            else if (n->op == RLX_OP_WHERE)
                r = v[0] != 0 ? v[1] : v[2];
            else
                r = binary(n, v[0], v[1], is_int);
            store(out, n->dtype, i, r);
            next_index(idx, o);
        }
        return true;
    }
    switch (n->op) {
    case RLX_OP_RESHAPE:
    case RLX_OP_COPY:
        memcpy(out, x->data, rlx_graph_const_bytes(n));
        return true;
    case RLX_OP_PERMUTE:
    case RLX_OP_SLICE:
    case RLX_OP_PAD: {
        int64_t xst[RLX_MAX_DIMS], acc = 1;
        for (int d = x->shape.rank - 1; d >= 0; d--) {
            xst[d] = acc;
            acc *= x->shape.d[d].k;
        }
        if (n->op == RLX_OP_SLICE && !rlx_dim_is_const(n->p.slice.start))
            return false;
        for (int64_t i = 0; i < numel; i++) {
            int64_t off = 0;
            bool inside = true;
            for (int d = 0; d < o->rank; d++) {
                if (n->op == RLX_OP_PERMUTE) {
                    off += idx[d] * xst[n->p.permute.perm[d]];
                } else if (n->op == RLX_OP_SLICE) {
                    int64_t s = d == n->p.slice.axis ? n->p.slice.start.k : 0;
                    off += (idx[d] + s) * xst[d];
                } else {
                    int64_t j = idx[d] - n->p.pad.before[d];
                    if (j < 0 || j >= x->shape.d[d].k)
                        inside = false;
                    off += j * xst[d];
                }
            }
            store(out, n->dtype, i, inside ? load(x->data, x->dtype, off) : n->p.pad.value);
            next_index(idx, o);
        }
        return true;
    }
    case RLX_OP_CONCAT: {
        int ax = n->p.concat.axis;
        for (int64_t i = 0; i < numel; i++) {
            int64_t pos = idx[ax];
            int k = 0;
            while (pos >= g->nodes[n->in[k]].shape.d[ax].k) {
                pos -= g->nodes[n->in[k]].shape.d[ax].k;
                k++;
            }
            const rlx_gnode *y = &g->nodes[n->in[k]];
            int64_t off = 0, acc = 1;
            for (int d = o->rank - 1; d >= 0; d--) {
                off += (d == ax ? pos : idx[d]) * acc;
                acc *= y->shape.d[d].k;
            }
            store(out, n->dtype, i, load(y->data, y->dtype, off));
            next_index(idx, o);
        }
        return true;
    }
    case RLX_OP_REDUCE_SUM:
    case RLX_OP_REDUCE_MEAN:
    case RLX_OP_REDUCE_MAX: {
        int ax = n->p.reduce.axis;
        int64_t outer = 1, len = x->shape.d[ax].k, inner = 1;
        for (int d = 0; d < ax; d++)
            outer *= x->shape.d[d].k;
        for (int d = ax + 1; d < x->shape.rank; d++)
            inner *= x->shape.d[d].k;
        for (int64_t a = 0; a < outer; a++)
            for (int64_t c = 0; c < inner; c++) {
                double acc = n->op == RLX_OP_REDUCE_MAX ? -INFINITY : 0;
                for (int64_t j = 0; j < len; j++) {
                    double v = load(x->data, x->dtype, (a * len + j) * inner + c);
                    acc = n->op == RLX_OP_REDUCE_MAX ? (v > acc ? v : acc) : acc + v;
                }
                if (n->op == RLX_OP_REDUCE_MEAN && len > 0)
                    acc /= (double)len;
                store(out, n->dtype, a * inner + c, acc);
            }
        return true;
    }
    default:
        return false;
    }
}

rlx_status rlx_pass_const_fold(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    (void)opts;
    int32_t n0 = g->n_nodes;
    bool changed = false;
    for (int32_t i = 0; i < n0; i++) {
        rlx_gnode n = g->nodes[i];
        if (n.op <= RLX_OP_STATE || n.op == RLX_OP_SCATTER || n.n_in == 0)
            continue;
        bool all_const = true;
        for (int k = 0; k < n.n_in; k++)
            all_const &= g->nodes[n.in[k]].op == RLX_OP_CONST && plain(g->nodes[n.in[k]].dtype);
        if (!all_const || !plain(n.dtype))
            continue;
        bool const_shape = true;
        for (int d = 0; d < n.shape.rank; d++)
            const_shape &= rlx_dim_is_const(n.shape.d[d]);
        if (!const_shape || rlx_shape_numel(&n.shape, NULL) > FOLD_MAX)
            continue;
        size_t bytes = rlx_graph_const_bytes(&n);
        void *buf = calloc(1, bytes ? bytes : 1);
        if (!buf)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "const-fold: out of memory");
        if (!eval(g, &n, buf)) {
            free(buf);
            continue;
        }
        g->cur_segment = n.segment;
        rlx_node c = rlx_graph_const(g, n.name, n.dtype, n.shape, buf);
        free(buf);
        if (c == RLX_NODE_INVALID)
            return rlx_compile_graph_error(g, err);
        rlx_graph_replace_uses(g, i, c);
        g->nodes[i].op = RLX_OP_NONE;
        changed = true;
    }
    if (!changed)
        return RLX_OK;
    /* constants that fed only folded nodes are dead now */
    int32_t *uses = rlx_graph_use_counts(g);
    if (!uses)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "const-fold: out of memory");
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == RLX_OP_CONST && uses[i] == 0)
            g->nodes[i].op = RLX_OP_NONE;
    free(uses);
    return rlx_compile_compact(g, err);
}
