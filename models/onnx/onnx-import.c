/* See onnx-model.h. One pass over the nodes in topological order: each
 * ONNX value becomes either a host constant (double elements, folded here)
 * or a graph node with a static shape. An unsupported node "poisons" its
 * outputs, so that the pass goes on and reports every unsupported op of
 * the model at once instead of the first. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph.h"
#include "models/onnx/onnx-import-internal.h"
#include "engine/runtime/session.h"

bool ox_is_float_elem(int32_t e)
{
    return e == RLX_ONNX_FLOAT || e == RLX_ONNX_FLOAT16 || e == RLX_ONNX_DOUBLE ||
           e == RLX_ONNX_BFLOAT16;
}

bool ox_is_int_elem(int32_t e)
{
    return e == RLX_ONNX_INT8 || e == RLX_ONNX_UINT8 || e == RLX_ONNX_INT16 ||
           e == RLX_ONNX_INT32 || e == RLX_ONNX_INT64 || e == RLX_ONNX_UINT16 ||
           e == RLX_ONNX_UINT32;
}

rlx_dtype ox_graph_dtype(int32_t e)
{
    if (ox_is_float_elem(e))
        return RLX_DTYPE_F32;
    if (e == RLX_ONNX_BOOL)
        return RLX_DTYPE_U8;
    if (ox_is_int_elem(e))
        return RLX_DTYPE_I32;
    return RLX_DTYPE_INVALID;
}

size_t rlx_onnx_elem_size(int32_t e)
{
    switch (e) {
    case RLX_ONNX_FLOAT:
    case RLX_ONNX_INT32:
    case RLX_ONNX_UINT32:
        return 4;
    case RLX_ONNX_DOUBLE:
    case RLX_ONNX_INT64:
        return 8;
    case RLX_ONNX_FLOAT16:
    case RLX_ONNX_BFLOAT16:
    case RLX_ONNX_INT16:
    case RLX_ONNX_UINT16:
        return 2;
    case RLX_ONNX_INT8:
    case RLX_ONNX_UINT8:
    case RLX_ONNX_BOOL:
        return 1;
    default:
        return 0;
    }
}

/* ---- diagnostics ----------------------------------------------------------- */

void ox_unsupported(ctx *c, const char *fmt, ...)
{
    char what[256], line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *op = c->cur ? c->cur->op_type : "";
    snprintf(line, sizeof line, "%s%s%s", op, op[0] ? ": " : "", what);
    for (int32_t i = 0; i < c->n_unsup; i++)
        if (strncmp(c->unsup[i], line, strlen(line)) == 0 &&
            (c->unsup[i][strlen(line)] == '\0' || c->unsup[i][strlen(line)] == ' '))
            return;
    if (c->n_unsup == c->cap_unsup) {
        int32_t nc = c->cap_unsup ? 2 * c->cap_unsup : 16;
        char **nu = realloc(c->unsup, (size_t)nc * sizeof *nu);
        if (!nu)
            return;
        c->unsup = nu;
        c->cap_unsup = nc;
    }
    char full[512];
    if (c->cur && c->cur->name[0])
        snprintf(full, sizeof full, "%s (node '%s')", line, c->cur->name);
    else
        snprintf(full, sizeof full, "%s", line);
    c->unsup[c->n_unsup] = strdup(full);
    if (c->unsup[c->n_unsup])
        c->n_unsup++;
}

void ox_failf(ctx *c, rlx_status code, const char *fmt, ...)
{
    if (c->fail)
        return;
    char msg[512], full[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->cur)
        snprintf(full, sizeof full, "node '%s' (%s): %s", c->cur->name, c->cur->op_type, msg);
    else
        snprintf(full, sizeof full, "%s", msg);
    c->fail = strdup(full);
    c->fail_code = code;
}

/* ---- values ------------------------------------------------------------------ */

int64_t ox_numel_of(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return -1;
        if (dims[i] && n > INT64_MAX / dims[i])
            return -1;
        n *= dims[i];
    }
    return n;
}

int64_t ox_vnumel(const val *v)
{
    return ox_numel_of(v->rank, v->dims);
}

static val *lookup(ctx *c, const char *name)
{
    for (int32_t i = c->n_vals - 1; i >= 0; i--)
        if (strcmp(c->vals[i].name, name) == 0)
            return &c->vals[i];
    return NULL;
}

static val *new_val(ctx *c, const char *name)
{
    if (c->n_vals == c->cap_vals) {
        int32_t nc = c->cap_vals ? 2 * c->cap_vals : 256;
        val *nv = realloc(c->vals, (size_t)nc * sizeof *nv);
        if (!nv)
            return NULL;
        c->vals = nv;
        c->cap_vals = nc;
    }
    val *v = &c->vals[c->n_vals++];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->node = RLX_NODE_INVALID;
    return v;
}

/* Reading a value's constant data: initializers are converted on demand. */
double *ox_cdata(ctx *c, val *v)
{
    if (v->kind != V_CONST)
        return NULL;
    if (v->c || ox_vnumel(v) == 0)
        return v->c ? v->c : (v->c = calloc(1, sizeof(double)));
    const rlx_onnx_tensor *t = v->init;
    if (!t || t->numel > RLX_ONNX_FOLD_LIMIT || !t->data ||
        c->folded + t->numel > RLX_ONNX_FOLD_TOTAL)
        return NULL;
    double *d = malloc((size_t)t->numel * sizeof *d);
    if (!d)
        return NULL;
    c->folded += t->numel;
    const uint8_t *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case RLX_DTYPE_F32: {
            float f;
            memcpy(&f, p + 4 * i, 4);
            d[i] = f;
            break;
        }
        case RLX_DTYPE_F64:
            memcpy(&d[i], p + 8 * i, 8);
            break;
        case RLX_DTYPE_F16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            d[i] = rlx_f16_to_f32(h);
            break;
        }
        case RLX_DTYPE_BF16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            d[i] = rlx_bf16_to_f32(h);
            break;
        }
        case RLX_DTYPE_I64: {
            int64_t x;
            memcpy(&x, p + 8 * i, 8);
            d[i] = (double)x;
            break;
        }
        case RLX_DTYPE_I32: {
            int32_t x;
            memcpy(&x, p + 4 * i, 4);
            d[i] = x;
            break;
        }
        case RLX_DTYPE_I16: {
            int16_t x;
            memcpy(&x, p + 2 * i, 2);
            d[i] = x;
            break;
        }
        case RLX_DTYPE_I8:
            d[i] = (int8_t)p[i];
            break;
        default: /* U8, BOOL */
            d[i] = p[i];
            break;
        }
    }
    v->c = d;
    return d;
}

int64_t ox_to_i64(double x)
{
    if (!(x == x))
        return 0;
    if (x >= 9.2e18)
        return INT64_MAX;
    if (x <= -9.2e18)
        return INT64_MIN;
    return (int64_t)x;
}

/* Round a double to what the elem type can hold (folded results). */
double ox_fit_elem(int32_t e, double x)
{
    switch (e) {
    case RLX_ONNX_FLOAT:
        return (double)(float)x;
    case RLX_ONNX_FLOAT16:
        return rlx_f16_to_f32(rlx_f32_to_f16((float)x));
    case RLX_ONNX_BFLOAT16:
        return rlx_bf16_to_f32(rlx_f32_to_bf16((float)x));
    case RLX_ONNX_BOOL:
        return x != 0;
    case RLX_ONNX_DOUBLE:
        return x;
    default:
        return (double)ox_to_i64(trunc(x));
    }
}

/* room for n folded values; NULL when n is negative or over the limit */
double *ox_alloc_d(int64_t n)
{
    if (n < 0 || n > RLX_ONNX_FOLD_LIMIT)
        return NULL;
    return malloc((size_t)(n ? n : 1) * sizeof(double));
}

val *ox_set_const(ctx *c, const char *name, int32_t elem, int rank, const int64_t *dims,
                  double *data)
{
    if (data) {
        /* a hostile model could fold many large constants: cap the sum */
        c->folded += ox_numel_of(rank, dims);
        if (c->folded > RLX_ONNX_FOLD_TOTAL) {
            free(data);
            ox_unsupported(c, "folding more than %d elements of constants in all",
                           RLX_ONNX_FOLD_TOTAL);
            return NULL;
        }
    }
    val *v = new_val(c, name);
    if (!v) {
        free(data);
        return NULL;
    }
    v->kind = V_CONST;
    v->elem = elem;
    v->rank = rank;
    if (rank)
        memcpy(v->dims, dims, (size_t)rank * sizeof *dims);
    v->c = data;
    return v;
}

val *ox_set_node(ctx *c, const char *name, int32_t elem, rlx_node n)
{
    val *v = new_val(c, name);
    if (!v)
        return NULL;
    if (n == RLX_NODE_INVALID) {
        v->kind = V_POISON;
        return v;
    }
    v->kind = V_NODE;
    v->elem = elem;
    v->node = n;
    rlx_shape s = rlx_graph_node_shape(c->g, n);
    v->rank = s.rank;
    for (int i = 0; i < s.rank; i++)
        v->dims[i] = s.d[i].k;
    return v;
}

/* The graph node of a value (constants are added on first use). */
rlx_node ox_node_of(ctx *c, val *v)
{
    if (v->kind == V_NODE || v->node != RLX_NODE_INVALID)
        return v->node;
    if (v->kind != V_CONST)
        return RLX_NODE_INVALID;
    rlx_shape s = rlx_shape_make(v->rank, v->dims);
    const rlx_onnx_tensor *t = v->init;
    int64_t n = ox_vnumel(v);
    if (t && t->data &&
        (t->dtype == RLX_DTYPE_F32 || t->dtype == RLX_DTYPE_F16 || t->dtype == RLX_DTYPE_BF16) &&
        n >= 64) {
        /* a weight: a PARAM read from the model's bytes, one per initializer */
        for (int32_t i = 0; i < c->n_weights; i++)
            if (c->weights[i].t == t)
                return v->node = c->weights[i].node;
        if (c->n_weights == c->cap_weights) {
            int32_t nc = c->cap_weights ? 2 * c->cap_weights : 64;
            weight *nw = realloc(c->weights, (size_t)nc * sizeof *nw);
            if (!nw)
                return RLX_NODE_INVALID;
            c->weights = nw;
            c->cap_weights = nc;
        }
        rlx_node raw = rlx_graph_param(c->g, t->name, t->dtype, s), p = raw;
        if (t->dtype != RLX_DTYPE_F32)
            p = rlx_graph_cast(c->g, NULL, p, RLX_DTYPE_F32);
        c->weights[c->n_weights++] = (weight){.t = t, .node = p, .raw = raw};
        v->node = p;
        return p;
    }
    double *d = ox_cdata(c, v);
    if (!d) {
        ox_failf(c, RLX_ERR_UNSUPPORTED, "the constant '%s' is too large to convert", v->name);
        return RLX_NODE_INVALID;
    }
    rlx_dtype gdt = ox_graph_dtype(v->elem);
    if (gdt == RLX_DTYPE_INVALID) {
        ox_unsupported(c, "tensors of type %s", rlx_onnx_elem_type_name(v->elem));
        return RLX_NODE_INVALID;
    }
    size_t es = gdt == RLX_DTYPE_U8 ? 1 : 4;
    uint8_t *buf = malloc((size_t)(n ? n : 1) * es);
    if (!buf)
        return RLX_NODE_INVALID;
    for (int64_t i = 0; i < n; i++) {
        if (gdt == RLX_DTYPE_F32) {
            float f = (float)d[i];
            memcpy(buf + 4 * i, &f, 4);
        } else if (gdt == RLX_DTYPE_I32) {
            if (d[i] < -2147483648.0 || d[i] > 2147483647.0) {
                free(buf);
                ox_unsupported(c, "integer constants outside the int32 range");
                return RLX_NODE_INVALID;
            }
            int32_t x = (int32_t)d[i];
            memcpy(buf + 4 * i, &x, 4);
        } else {
            buf[i] = d[i] != 0;
        }
    }
    rlx_node k = rlx_graph_const(c->g, NULL, gdt, s, buf);
    free(buf);
    v->node = k;
    return k;
}

/* ---- attributes ------------------------------------------------------------ */

const rlx_onnx_attr *ox_attr(const rlx_onnx_node *n, const char *name)
{
    return rlx_onnx_node_attr(n, name);
}

int64_t ox_attr_i(const rlx_onnx_node *n, const char *name, int64_t def)
{
    const rlx_onnx_attr *a = ox_attr(n, name);
    return a && a->type == RLX_ONNX_ATTR_INT ? a->i : def;
}

float ox_attr_f(const rlx_onnx_node *n, const char *name, float def)
{
    const rlx_onnx_attr *a = ox_attr(n, name);
    return a && a->type == RLX_ONNX_ATTR_FLOAT ? a->f : def;
}

const char *ox_attr_s(const rlx_onnx_node *n, const char *name, const char *def)
{
    const rlx_onnx_attr *a = ox_attr(n, name);
    return a && a->type == RLX_ONNX_ATTR_STRING ? a->s : def;
}

/* INTS attribute into out (at most cap); returns the count or -1 if absent */
int ox_attr_ints(const rlx_onnx_node *n, const char *name, int64_t *out, int cap)
{
    const rlx_onnx_attr *a = ox_attr(n, name);
    if (!a || a->type != RLX_ONNX_ATTR_INTS)
        return -1;
    int k = a->n_ints < cap ? a->n_ints : cap;
    for (int i = 0; i < k; i++)
        out[i] = a->ints[i];
    return a->n_ints > cap ? cap + 1 : k;
}

/* ---- inputs of the current node --------------------------------------------- */

val *ox_in_val(ctx *c, int i)
{
    const rlx_onnx_node *n = c->cur;
    if (i >= n->n_inputs || !n->inputs[i][0])
        return NULL;
    return lookup(c, n->inputs[i]);
}

/* a constant input's values as int64 (at most cap); -1 when absent or not
 * constant */
int ox_const_ints(ctx *c, int i, int64_t *out, int cap)
{
    val *v = ox_in_val(c, i);
    if (!v || v->kind != V_CONST)
        return -1;
    int64_t n = ox_vnumel(v);
    double *d = ox_cdata(c, v);
    if (!d || n > cap)
        return -1;
    for (int64_t k = 0; k < n; k++)
        out[k] = ox_to_i64(d[k]);
    return (int)n;
}

int ox_norm_axis(int64_t axis, int rank, bool *ok)
{
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= (rank ? rank : 1)) {
        *ok = false;
        return 0;
    }
    return (int)axis;
}

/* ---- graph helpers ------------------------------------------------------------ */

rlx_node ox_reshape(ctx *c, rlx_node x, int rank, const int64_t *dims)
{
    return rlx_graph_reshape(c->g, NULL, x, rlx_shape_make(rank, dims));
}

rlx_node ox_scalar_like(ctx *c, rlx_node x, double value)
{
    rlx_dtype dt = rlx_graph_node_dtype(c->g, x);
    if (dt == RLX_DTYPE_I32) {
        int32_t v = (int32_t)value;
        return rlx_graph_const_i32(c->g, NULL, rlx_shape_make(0, NULL), &v);
    }
    return rlx_graph_scalar(c->g, (float)value);
}

rlx_shape ox_shape_of(ctx *c, rlx_node x)
{
    return rlx_graph_node_shape(c->g, x);
}

/* slice with a step (the IR's slice takes step 1): pad to a multiple of the
 * step, split the axis into [n, step] and keep index 0 */
rlx_node ox_slice_step(ctx *c, rlx_node x, int axis, int64_t start, int64_t len, int64_t step)
{
    if (len <= 0)
        return RLX_NODE_INVALID;
    if (step == 1)
        return rlx_graph_slice(c->g, NULL, x, axis, rlx_dim_const(start), rlx_dim_const(len));
    rlx_shape s = ox_shape_of(c, x);
    int64_t dim = s.d[axis].k, span = len * step;
    if (start + span > dim) {
        int64_t before[MAXD] = {0}, after[MAXD] = {0};
        after[axis] = start + span - dim;
        x = rlx_graph_pad(c->g, NULL, x, before, after, 0.0f);
    }
    x = rlx_graph_slice(c->g, NULL, x, axis, rlx_dim_const(start), rlx_dim_const(span));
    if (s.rank + 1 > MAXD) {
        ox_unsupported(c, "strided slices of rank-%d tensors", s.rank);
        return RLX_NODE_INVALID;
    }
    int64_t d[MAXD + 1];
    int r = 0;
    for (int i = 0; i < s.rank; i++) {
        if (i == axis) {
            d[r++] = len;
            d[r++] = step;
        } else
            d[r++] = s.d[i].k;
    }
    x = ox_reshape(c, x, r, d);
    x = rlx_graph_slice(c->g, NULL, x, axis + 1, rlx_dim_const(0), rlx_dim_const(1));
    d[axis + 1] = 1;
    int64_t o[MAXD];
    r = 0;
    for (int i = 0; i < s.rank; i++)
        o[r++] = i == axis ? len : s.d[i].k;
    return ox_reshape(c, x, s.rank, o);
}

/* ---- the op table ------------------------------------------------------------ */

typedef bool (*emit_fn)(ctx *c);

typedef struct {
    const char *op;
    emit_fn fn;
} op_entry;

/* outputs: the first output only (the ops below that have more refuse to
 * be asked for them) */
bool ox_out1(ctx *c, int32_t elem, rlx_node n)
{
    return ox_set_node(c, c->cur->outputs[0], elem, n) != NULL;
}

bool ox_extra_outputs_unused(ctx *c, int keep)
{
    for (int i = keep; i < c->cur->n_outputs; i++)
        if (c->cur->outputs[i][0]) {
            ox_unsupported(c, "output %d", i);
            return false;
        }
    return true;
}

/* x's graph node and value; NULL (and unsupported) for a missing input */
val *ox_need(ctx *c, int i)
{
    val *v = ox_in_val(c, i);
    if (!v)
        ox_failf(c, RLX_ERR_FORMAT, "input %d is missing", i);
    return v;
}

rlx_node ox_nd(ctx *c, int i)
{
    val *v = ox_need(c, i);
    return v ? ox_node_of(c, v) : RLX_NODE_INVALID;
}

/* ---- the table ---- */

static const op_entry ops[] = {
    {"Abs", ox_e_abs},
    {"Add", ox_e_add},
    {"And", ox_e_and},
    {"ArgMax", ox_e_argmax},
    {"ArgMin", ox_e_argmin},
    {"AveragePool", ox_e_avg_pool},
    {"BatchNormalization", ox_e_batch_norm},
    {"Cast", ox_e_cast},
    {"CastLike", ox_e_cast_like},
    {"Clip", ox_e_clip},
    {"Concat", ox_e_concat},
    {"Constant", ox_e_constant},
    {"ConstantOfShape", ox_e_constant_of_shape},
    {"Conv", ox_e_conv},
    {"ConvTranspose", ox_e_conv_transpose},
    {"Cos", ox_e_cos},
    {"DepthToSpace", ox_e_depth_to_space},
    {"Div", ox_e_div},
    {"Dropout", ox_e_identity},
    {"Elu", ox_e_elu},
    {"Equal", ox_e_equal},
    {"Erf", ox_e_erf},
    {"Exp", ox_e_exp},
    {"Expand", ox_e_expand},
    {"Flatten", ox_e_flatten},
    {"Gather", ox_e_gather},
    {"Gemm", ox_e_gemm},
    {"GlobalAveragePool", ox_e_global_avg_pool},
    {"GlobalMaxPool", ox_e_global_max_pool},
    {"Greater", ox_e_greater},
    {"GreaterOrEqual", ox_e_greater_eq},
    {"HardSigmoid", ox_e_hard_sigmoid},
    {"HardSwish", ox_e_hard_swish},
    {"Identity", ox_e_identity},
    {"InstanceNormalization", ox_e_instance_norm},
    {"LayerNormalization", ox_e_layer_norm},
    {"LeakyRelu", ox_e_leaky_relu},
    {"Less", ox_e_less},
    {"LessOrEqual", ox_e_less_eq},
    {"Log", ox_e_log},
    {"LogSoftmax", ox_e_log_softmax},
    {"MatMul", ox_e_matmul},
    {"Max", ox_e_max},
    {"MaxPool", ox_e_max_pool},
    {"Mean", ox_e_mean},
    {"Min", ox_e_min},
    {"Mul", ox_e_mul},
    {"Neg", ox_e_neg},
    {"Not", ox_e_not},
    {"Or", ox_e_or},
    {"PRelu", ox_e_prelu},
    {"Pad", ox_e_pad},
    {"Pow", ox_e_pow},
    {"Range", ox_e_range},
    {"Reciprocal", ox_e_reciprocal},
    {"ReduceL1", ox_e_reduce_l1},
    {"ReduceL2", ox_e_reduce_l2},
    {"ReduceLogSum", ox_e_reduce_logsum},
    {"ReduceLogSumExp", ox_e_reduce_logsumexp},
    {"ReduceMax", ox_e_reduce_max},
    {"ReduceMean", ox_e_reduce_mean},
    {"ReduceMin", ox_e_reduce_min},
    {"ReduceSum", ox_e_reduce_sum},
    {"ReduceSumSquare", ox_e_reduce_sumsq},
    {"Relu", ox_e_relu},
    {"Reshape", ox_e_reshape},
    {"Resize", ox_e_resize},
    {"Selu", ox_e_selu},
    {"Shape", ox_e_shape},
    {"Sigmoid", ox_e_sigmoid},
    {"Sin", ox_e_sin},
    {"Size", ox_e_size},
    {"Slice", ox_e_slice},
    {"Softmax", ox_e_softmax},
    {"Softplus", ox_e_softplus},
    {"Softsign", ox_e_softsign},
    {"SpaceToDepth", ox_e_space_to_depth},
    {"Split", ox_e_split},
    {"Sqrt", ox_e_sqrt},
    {"Squeeze", ox_e_squeeze},
    {"Sub", ox_e_sub},
    {"Sum", ox_e_sum},
    {"Tanh", ox_e_tanh},
    {"ThresholdedRelu", ox_e_thresholded_relu},
    {"Tile", ox_e_tile},
    {"TopK", ox_e_topk},
    {"Transpose", ox_e_transpose},
    {"Trilu", ox_e_trilu},
    {"Unsqueeze", ox_e_unsqueeze},
    {"Upsample", ox_e_resize},
    {"Where", ox_e_where},
    {"Xor", ox_e_xor},
};

#define N_OPS ((int32_t)(sizeof ops / sizeof ops[0]))

int32_t rlx_onnx_n_supported_ops(void)
{
    return N_OPS;
}

const char *rlx_onnx_supported_op(int32_t i)
{
    return i >= 0 && i < N_OPS ? ops[i].op : NULL;
}

static const op_entry *find_op(const char *domain, const char *op)
{
    if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0)
        return NULL;
    for (int32_t i = 0; i < N_OPS; i++)
        if (strcmp(ops[i].op, op) == 0)
            return &ops[i];
    return NULL;
}

bool rlx_onnx_op_supported(const char *domain, const char *op_type)
{
    return op_type && find_op(domain, op_type) != NULL;
}

/* ---- the pass ---------------------------------------------------------------- */

static void poison_outputs(ctx *c)
{
    for (int i = 0; i < c->cur->n_outputs; i++)
        if (c->cur->outputs[i][0] && !lookup(c, c->cur->outputs[i])) {
            val *v = new_val(c, c->cur->outputs[i]);
            if (v)
                v->kind = V_POISON;
        }
}

static void import_node(ctx *c, const rlx_onnx_node *n)
{
    c->cur = n;
    const op_entry *e = find_op(n->domain, n->op_type);
    if (!e) {
        if (n->domain[0])
            ox_unsupported(c, "the op %s of domain '%s'", n->op_type, n->domain);
        else
            ox_unsupported(c, "the op itself");
        poison_outputs(c);
        return;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        if (!n->inputs[i][0])
            continue;
        val *v = lookup(c, n->inputs[i]);
        if (!v || v->kind == V_POISON) {
            poison_outputs(c);
            return;
        }
        if (v->kind == V_CONST && ox_graph_dtype(v->elem) == RLX_DTYPE_INVALID) {
            ox_unsupported(c, "tensors of type %s", rlx_onnx_elem_type_name(v->elem));
            poison_outputs(c);
            return;
        }
    }
    if (n->n_outputs < 1) {
        poison_outputs(c);
        return;
    }
    /* constant inputs: fold elementwise ops on the host */
    if (ox_fold_node(c))
        return;
    int32_t unsup_before = c->n_unsup;
    bool ok = e->fn(c);
    if (!ok && !c->fail && c->n_unsup == unsup_before && rlx_graph_status(c->g) == RLX_OK)
        ox_failf(c, RLX_ERR_NO_MEMORY, "out of memory importing it");
    if (!ok || rlx_graph_status(c->g) != RLX_OK) {
        if (ok && !c->fail)
            ox_failf(c, RLX_ERR_UNSUPPORTED, "%s", rlx_graph_error(c->g));
        poison_outputs(c);
        return;
    }
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i][0] && !lookup(c, n->outputs[i]))
            ox_failf(c, RLX_ERR_INTERNAL, "output '%s' was not produced", n->outputs[i]);
}

static bool io_shape(ctx *c, const rlx_onnx_value *v, const rlx_onnx_import_params *p,
                     rlx_onnx_io *io)
{
    memset(io, 0, sizeof *io);
    io->name = v->name;
    io->elem_type = v->elem_type;
    io->graph_dtype = ox_graph_dtype(v->elem_type);
    for (int32_t i = 0; p && i < p->n_shapes; i++)
        if (p->shapes[i].name && strcmp(p->shapes[i].name, v->name) == 0) {
            if (p->shapes[i].rank < 0 || p->shapes[i].rank > MAXD)
                return false;
            io->rank = p->shapes[i].rank;
            memcpy(io->dims, p->shapes[i].dims, sizeof io->dims);
            io->numel = ox_numel_of(io->rank, io->dims);
            return io->numel >= 0;
        }
    if (v->rank < 0 || v->rank > MAXD) {
        ox_failf(c, RLX_ERR_UNSUPPORTED, "input '%s' has %s", v->name,
                 v->rank < 0 ? "no known shape: give one" : "more than 6 dims");
        return false;
    }
    io->rank = v->rank;
    for (int i = 0; i < v->rank; i++) {
        if (v->dims[i] < 0) {
            ox_failf(c, RLX_ERR_UNSUPPORTED, "input '%s' has the symbolic dim '%s': give its shape",
                     v->name, v->dim_params[i] ? v->dim_params[i] : "?");
            return false;
        }
        io->dims[i] = v->dims[i];
    }
    io->numel = ox_numel_of(io->rank, io->dims);
    if (io->numel < 0) {
        ox_failf(c, RLX_ERR_FORMAT, "input '%s' has more elements than can exist", v->name);
        return false;
    }
    return true;
}

void rlx_onnx_import_free(rlx_onnx_import *c)
{
    if (!c)
        return;
    rlx_graph_free(c->g);
    for (int32_t i = 0; i < c->n_vals; i++)
        free(c->vals[i].c);
    free(c->vals);
    free(c->weights);
    free(c->ins);
    free(c->outs);
    for (int32_t i = 0; i < c->n_unsup; i++)
        free(c->unsup[i]);
    free(c->unsup);
    free(c->fail);
    free(c);
}

rlx_status rlx_onnx_import_graph(const rlx_onnx_model *m, const rlx_onnx_import_params *p,
                                 rlx_onnx_import **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!m || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_onnx_import_graph: bad argument");
    ctx *c = calloc(1, sizeof *c);
    if (!c || !(c->g = rlx_graph_create())) {
        free(c);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory importing the ONNX graph");
    }
    c->m = m;
    c->opset = rlx_onnx_opset_version(m, "");
    if (c->opset < 0)
        c->opset = 1;
    int32_t ni = rlx_onnx_n_inputs(m), no = rlx_onnx_n_outputs(m);
    c->ins = calloc((size_t)ni + 1, sizeof *c->ins);
    c->outs = calloc((size_t)no + 1, sizeof *c->outs);
    if (!c->ins || !c->outs) {
        rlx_onnx_import_free(c);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory importing the ONNX graph");
    }
    for (int32_t i = 0; i < rlx_onnx_n_initializers(m) && !c->fail; i++) {
        const rlx_onnx_tensor *t = rlx_onnx_initializer_at(m, i);
        if (t->rank > MAXD || (!t->data && t->numel)) {
            val *v = new_val(c, t->name);
            if (v)
                v->kind = V_POISON; /* reported if a node reads it */
            continue;
        }
        val *v = ox_set_const(c, t->name, t->elem_type, t->rank, t->dims, NULL);
        if (v)
            v->init = t;
    }
    for (int32_t i = 0; i < ni && !c->fail; i++) {
        const rlx_onnx_value *v = rlx_onnx_input_at(m, i);
        const rlx_onnx_tensor *fixed = NULL;
        for (int32_t k = 0; p && k < p->n_consts; k++)
            if (p->consts[k].name && p->consts[k].value && !strcmp(p->consts[k].name, v->name))
                fixed = p->consts[k].value;
        if (fixed) {
            if (fixed->elem_type != v->elem_type && v->elem_type) {
                ox_failf(c, RLX_ERR_INVALID_ARG, "the value given for input '%s' is %s, not %s",
                         v->name, rlx_onnx_elem_type_name(fixed->elem_type),
                         rlx_onnx_elem_type_name(v->elem_type));
                break;
            }
            if (!ox_set_const_from_tensor(c, v->name, fixed)) {
                val *pv = new_val(c, v->name);
                if (pv)
                    pv->kind = V_POISON;
            }
            continue;
        }
        rlx_onnx_io *io = &c->ins[c->n_ins];
        if (!io_shape(c, v, p, io))
            break;
        if (io->graph_dtype == RLX_DTYPE_INVALID || rlx_onnx_elem_size(io->elem_type) == 0) {
            c->cur = NULL;
            ox_unsupported(c, "input '%s' of type %s", v->name,
                           rlx_onnx_elem_type_name(v->elem_type));
            val *pv = new_val(c, v->name);
            if (pv)
                pv->kind = V_POISON;
            continue;
        }
        rlx_node x =
            rlx_graph_input(c->g, v->name, io->graph_dtype, rlx_shape_make(io->rank, io->dims));
        ox_set_node(c, v->name, v->elem_type, x);
        c->n_ins++;
    }
    for (int32_t i = 0; i < rlx_onnx_n_nodes(m) && !c->fail; i++)
        import_node(c, rlx_onnx_node_at(m, i));
    c->cur = NULL;
    for (int32_t i = 0; i < no && !c->fail && !c->n_unsup; i++) {
        const rlx_onnx_value *ov = rlx_onnx_output_at(m, i);
        val *v = lookup(c, ov->name);
        rlx_node x = v && v->kind != V_POISON ? ox_node_of(c, v) : RLX_NODE_INVALID;
        if (x == RLX_NODE_INVALID) {
            /* never an output quietly left out */
            ox_failf(c, RLX_ERR_UNSUPPORTED, "graph output '%s' could not be computed", ov->name);
            break;
        }
        rlx_op op = rlx_graph_node_op(c->g, x);
        if (op == RLX_OP_INPUT || op == RLX_OP_PARAM || op == RLX_OP_CONST || op == RLX_OP_RESHAPE)
            x = rlx_graph_copy(c->g, NULL, x);
        rlx_graph_output(c->g, ov->name, x);
        rlx_onnx_io *io = &c->outs[c->n_outs++];
        io->name = ov->name;
        io->elem_type = v->elem;
        io->graph_dtype = rlx_graph_node_dtype(c->g, x);
        io->rank = v->rank;
        memcpy(io->dims, v->dims, sizeof io->dims);
        io->numel = ox_vnumel(v);
        if (rlx_onnx_elem_size(io->elem_type) == 0)
            ox_unsupported(c, "output '%s' of type %s", ov->name, rlx_onnx_elem_type_name(v->elem));
    }
    if (c->n_unsup) {
        size_t cap = 64;
        for (int32_t i = 0; i < c->n_unsup; i++)
            cap += strlen(c->unsup[i]) + 4;
        char *msg = malloc(cap);
        if (msg) {
            size_t len =
                (size_t)snprintf(msg, cap, "%d unsupported op%s or attribute%s: ", (int)c->n_unsup,
                                 c->n_unsup == 1 ? "" : "s", c->n_unsup == 1 ? "" : "s");
            for (int32_t i = 0; i < c->n_unsup && len < cap; i++)
                len += (size_t)snprintf(msg + len, cap - len, "%s%s", i ? "; " : "", c->unsup[i]);
        }
        rlx_status st = rlx_error_set(err, RLX_ERR_UNSUPPORTED, "%s", msg ? msg : "out of memory");
        free(msg);
        rlx_onnx_import_free(c);
        return st;
    }
    if (c->fail) {
        rlx_status st = rlx_error_set(err, c->fail_code, "%s", c->fail);
        rlx_onnx_import_free(c);
        return st;
    }
    if (rlx_graph_status(c->g) != RLX_OK) {
        rlx_status st = rlx_graph_take_error(c->g, err);
        rlx_onnx_import_free(c);
        return st;
    }
    *out = c;
    return RLX_OK;
}

const rlx_graph *rlx_onnx_import_get_graph(const rlx_onnx_import *im)
{
    return im ? im->g : NULL;
}

int32_t rlx_onnx_import_n_inputs(const rlx_onnx_import *im)
{
    return im ? im->n_ins : 0;
}

const rlx_onnx_io *rlx_onnx_import_input(const rlx_onnx_import *im, int32_t i)
{
    return im && i >= 0 && i < im->n_ins ? &im->ins[i] : NULL;
}

int32_t rlx_onnx_import_n_outputs(const rlx_onnx_import *im)
{
    return im ? im->n_outs : 0;
}

const rlx_onnx_io *rlx_onnx_import_output(const rlx_onnx_import *im, int32_t i)
{
    return im && i >= 0 && i < im->n_outs ? &im->outs[i] : NULL;
}

rlx_status rlx_onnx_import_add_weights(const rlx_onnx_import *im, rlx_session *s, rlx_error **err)
{
    for (int32_t i = 0; i < im->n_weights; i++) {
        const rlx_onnx_tensor *t = im->weights[i].t;
        rlx_status st = rlx_session_add_weight(s, t->name, t->dtype, t->rank, t->dims, t->data,
                                               t->n_bytes, err);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}
