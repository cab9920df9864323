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
#include "engine/runtime/session.h"
#include "models/onnx/onnx-model.h"

#define MAXD RLX_MAX_DIMS

typedef enum { V_NONE, V_CONST, V_NODE, V_POISON } vkind;

typedef struct {
    const char *name;
    vkind kind;
    int32_t elem; /* ONNX elem type */
    int rank;
    int64_t dims[MAXD];
    double *c;                   /* V_CONST: numel values (NULL while only `init` holds them) */
    const rlx_onnx_tensor *init; /* the initializer behind a constant, if any */
    rlx_node node;               /* graph node (V_NODE, or a materialized const) */
} val;

typedef struct {
    const rlx_onnx_tensor *t;
    rlx_node node; /* its PARAM (cast to F32 where stored narrower) */
    rlx_node raw;  /* the PARAM itself, in its stored dtype */
} weight;

struct rlx_onnx_import {
    const rlx_onnx_model *m;
    rlx_graph *g;
    int64_t opset;
    val *vals;
    int32_t n_vals, cap_vals;
    weight *weights;
    int32_t n_weights, cap_weights;
    rlx_onnx_io *ins, *outs;
    int32_t n_ins, n_outs;
    /* unsupported things, each once */
    char **unsup;
    int32_t n_unsup, cap_unsup;
    int64_t folded; /* elements of host constants so far (RLX_ONNX_FOLD_TOTAL) */
    char *fail;     /* the first other error */
    rlx_status fail_code;
    const rlx_onnx_node *cur;
};

typedef rlx_onnx_import ctx;

static bool is_float_elem(int32_t e)
{
    return e == RLX_ONNX_FLOAT || e == RLX_ONNX_FLOAT16 || e == RLX_ONNX_DOUBLE ||
           e == RLX_ONNX_BFLOAT16;
}

static bool is_int_elem(int32_t e)
{
    return e == RLX_ONNX_INT8 || e == RLX_ONNX_UINT8 || e == RLX_ONNX_INT16 ||
           e == RLX_ONNX_INT32 || e == RLX_ONNX_INT64 || e == RLX_ONNX_UINT16 ||
           e == RLX_ONNX_UINT32;
}

static rlx_dtype graph_dtype(int32_t e)
{
    if (is_float_elem(e))
        return RLX_DTYPE_F32;
    if (e == RLX_ONNX_BOOL)
        return RLX_DTYPE_U8;
    if (is_int_elem(e))
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

static void unsupported(ctx *c, const char *fmt, ...) RLX_PRINTF(2, 3);
static void unsupported(ctx *c, const char *fmt, ...)
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

static void failf(ctx *c, rlx_status code, const char *fmt, ...) RLX_PRINTF(3, 4);
static void failf(ctx *c, rlx_status code, const char *fmt, ...)
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

static int64_t numel_of(int rank, const int64_t *dims)
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

static int64_t vnumel(const val *v)
{
    return numel_of(v->rank, v->dims);
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
static double *cdata(ctx *c, val *v)
{
    if (v->kind != V_CONST)
        return NULL;
    if (v->c || vnumel(v) == 0)
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

static int64_t to_i64(double x)
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
static double fit_elem(int32_t e, double x)
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
        return (double)to_i64(trunc(x));
    }
}

/* room for n folded values; NULL when n is negative or over the limit */
static double *alloc_d(int64_t n)
{
    if (n < 0 || n > RLX_ONNX_FOLD_LIMIT)
        return NULL;
    return malloc((size_t)(n ? n : 1) * sizeof(double));
}

static val *set_const(ctx *c, const char *name, int32_t elem, int rank, const int64_t *dims,
                      double *data)
{
    if (data) {
        /* a hostile model could fold many large constants: cap the sum */
        c->folded += numel_of(rank, dims);
        if (c->folded > RLX_ONNX_FOLD_TOTAL) {
            free(data);
            unsupported(c, "folding more than %d elements of constants in all",
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

static val *set_node(ctx *c, const char *name, int32_t elem, rlx_node n)
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
static rlx_node node_of(ctx *c, val *v)
{
    if (v->kind == V_NODE || v->node != RLX_NODE_INVALID)
        return v->node;
    if (v->kind != V_CONST)
        return RLX_NODE_INVALID;
    rlx_shape s = rlx_shape_make(v->rank, v->dims);
    const rlx_onnx_tensor *t = v->init;
    int64_t n = vnumel(v);
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
    double *d = cdata(c, v);
    if (!d) {
        failf(c, RLX_ERR_UNSUPPORTED, "the constant '%s' is too large to convert", v->name);
        return RLX_NODE_INVALID;
    }
    rlx_dtype gdt = graph_dtype(v->elem);
    if (gdt == RLX_DTYPE_INVALID) {
        unsupported(c, "tensors of type %s", rlx_onnx_elem_type_name(v->elem));
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
                unsupported(c, "integer constants outside the int32 range");
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

static const rlx_onnx_attr *attr(const rlx_onnx_node *n, const char *name)
{
    return rlx_onnx_node_attr(n, name);
}

static int64_t attr_i(const rlx_onnx_node *n, const char *name, int64_t def)
{
    const rlx_onnx_attr *a = attr(n, name);
    return a && a->type == RLX_ONNX_ATTR_INT ? a->i : def;
}

static float attr_f(const rlx_onnx_node *n, const char *name, float def)
{
    const rlx_onnx_attr *a = attr(n, name);
    return a && a->type == RLX_ONNX_ATTR_FLOAT ? a->f : def;
}

static const char *attr_s(const rlx_onnx_node *n, const char *name, const char *def)
{
    const rlx_onnx_attr *a = attr(n, name);
    return a && a->type == RLX_ONNX_ATTR_STRING ? a->s : def;
}

/* INTS attribute into out (at most cap); returns the count or -1 if absent */
static int attr_ints(const rlx_onnx_node *n, const char *name, int64_t *out, int cap)
{
    const rlx_onnx_attr *a = attr(n, name);
    if (!a || a->type != RLX_ONNX_ATTR_INTS)
        return -1;
    int k = a->n_ints < cap ? a->n_ints : cap;
    for (int i = 0; i < k; i++)
        out[i] = a->ints[i];
    return a->n_ints > cap ? cap + 1 : k;
}

/* ---- inputs of the current node --------------------------------------------- */

static val *in_val(ctx *c, int i)
{
    const rlx_onnx_node *n = c->cur;
    if (i >= n->n_inputs || !n->inputs[i][0])
        return NULL;
    return lookup(c, n->inputs[i]);
}

/* a constant input's values as int64 (at most cap); -1 when absent or not
 * constant */
static int const_ints(ctx *c, int i, int64_t *out, int cap)
{
    val *v = in_val(c, i);
    if (!v || v->kind != V_CONST)
        return -1;
    int64_t n = vnumel(v);
    double *d = cdata(c, v);
    if (!d || n > cap)
        return -1;
    for (int64_t k = 0; k < n; k++)
        out[k] = to_i64(d[k]);
    return (int)n;
}

static int norm_axis(int64_t axis, int rank, bool *ok)
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

static rlx_node reshape(ctx *c, rlx_node x, int rank, const int64_t *dims)
{
    return rlx_graph_reshape(c->g, NULL, x, rlx_shape_make(rank, dims));
}

static rlx_node scalar_like(ctx *c, rlx_node x, double value)
{
    rlx_dtype dt = rlx_graph_node_dtype(c->g, x);
    if (dt == RLX_DTYPE_I32) {
        int32_t v = (int32_t)value;
        return rlx_graph_const_i32(c->g, NULL, rlx_shape_make(0, NULL), &v);
    }
    return rlx_graph_scalar(c->g, (float)value);
}

static rlx_shape shape_of(ctx *c, rlx_node x)
{
    return rlx_graph_node_shape(c->g, x);
}

/* slice with a step (the IR's slice takes step 1): pad to a multiple of the
 * step, split the axis into [n, step] and keep index 0 */
static rlx_node slice_step(ctx *c, rlx_node x, int axis, int64_t start, int64_t len, int64_t step)
{
    if (len <= 0)
        return RLX_NODE_INVALID;
    if (step == 1)
        return rlx_graph_slice(c->g, NULL, x, axis, rlx_dim_const(start), rlx_dim_const(len));
    rlx_shape s = shape_of(c, x);
    int64_t dim = s.d[axis].k, span = len * step;
    if (start + span > dim) {
        int64_t before[MAXD] = {0}, after[MAXD] = {0};
        after[axis] = start + span - dim;
        x = rlx_graph_pad(c->g, NULL, x, before, after, 0.0f);
    }
    x = rlx_graph_slice(c->g, NULL, x, axis, rlx_dim_const(start), rlx_dim_const(span));
    if (s.rank + 1 > MAXD) {
        unsupported(c, "strided slices of rank-%d tensors", s.rank);
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
    x = reshape(c, x, r, d);
    x = rlx_graph_slice(c->g, NULL, x, axis + 1, rlx_dim_const(0), rlx_dim_const(1));
    d[axis + 1] = 1;
    int64_t o[MAXD];
    r = 0;
    for (int i = 0; i < s.rank; i++)
        o[r++] = i == axis ? len : s.d[i].k;
    return reshape(c, x, s.rank, o);
}

/* ---- host folding ---------------------------------------------------------------- */

static bool broadcast_dims(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o)
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
static int64_t bidx(int64_t oi, int ro, const int64_t *od, int r, const int64_t *d)
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
    if (is_int_elem(e))
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
        v[i] = in_val(c, i);
        if (!v[i] || v[i]->kind != V_CONST || !(d[i] = cdata(c, v[i])))
            return false;
        if (i == 0) {
            ro = v[0]->rank;
            memcpy(od, v[0]->dims, sizeof od);
        } else if (!broadcast_dims(ro, od, v[i]->rank, v[i]->dims, &ro, od))
            return false;
    }
    int64_t total = numel_of(ro, od);
    if (total < 0 || total > RLX_ONNX_FOLD_LIMIT)
        return false;
    int32_t elem = fo->to_bool ? RLX_ONNX_BOOL : v[strcmp(fo->op, "Where") == 0 ? 1 : 0]->elem;
    double *out = alloc_d(total);
    if (!out)
        return false;
    int32_t in_elem = v[strcmp(fo->op, "Where") == 0 ? 1 : 0]->elem;
    for (int64_t i = 0; i < total; i++) {
        double a = d[0][bidx(i, ro, od, v[0]->rank, v[0]->dims)];
        double b = nin > 1 ? d[1][bidx(i, ro, od, v[1]->rank, v[1]->dims)] : 0;
        double cc = nin > 2 ? d[2][bidx(i, ro, od, v[2]->rank, v[2]->dims)] : 0;
        out[i] = fit_elem(elem, fo->fn(a, b, cc, n, in_elem));
    }
    return set_const(c, n->outputs[0], elem, ro, od, out) != NULL;
}

/* ---- the op table ------------------------------------------------------------ */

typedef bool (*emit_fn)(ctx *c);

typedef struct {
    const char *op;
    emit_fn fn;
} op_entry;

/* outputs: the first output only (the ops below that have more refuse to
 * be asked for them) */
static bool out1(ctx *c, int32_t elem, rlx_node n)
{
    return set_node(c, c->cur->outputs[0], elem, n) != NULL;
}

static bool extra_outputs_unused(ctx *c, int keep)
{
    for (int i = keep; i < c->cur->n_outputs; i++)
        if (c->cur->outputs[i][0]) {
            unsupported(c, "output %d", i);
            return false;
        }
    return true;
}

/* x's graph node and value; NULL (and unsupported) for a missing input */
static val *need(ctx *c, int i)
{
    val *v = in_val(c, i);
    if (!v)
        failf(c, RLX_ERR_FORMAT, "input %d is missing", i);
    return v;
}

static rlx_node nd(ctx *c, int i)
{
    val *v = need(c, i);
    return v ? node_of(c, v) : RLX_NODE_INVALID;
}

/* ---- elementwise ---- */

static bool emit_binary_op(ctx *c, rlx_op op)
{
    val *a = need(c, 0), *b = need(c, 1);
    if (!a || !b)
        return false;
    if (a->elem != b->elem && !(op == RLX_OP_POW)) {
        unsupported(c, "inputs of different types (%s, %s)", rlx_onnx_elem_type_name(a->elem),
                    rlx_onnx_elem_type_name(b->elem));
        return false;
    }
    if (!is_float_elem(a->elem) && (op == RLX_OP_DIV || op == RLX_OP_POW)) {
        unsupported(c, "%s inputs", rlx_onnx_elem_type_name(a->elem));
        return false;
    }
    if (op == RLX_OP_POW && !is_float_elem(b->elem)) {
        unsupported(c, "%s exponents", rlx_onnx_elem_type_name(b->elem));
        return false;
    }
    rlx_node x = node_of(c, a), y = node_of(c, b);
    return out1(c, a->elem, rlx_graph_binary(c->g, NULL, op, x, y));
}

static bool e_add(ctx *c)
{
    return emit_binary_op(c, RLX_OP_ADD);
}
static bool e_sub(ctx *c)
{
    return emit_binary_op(c, RLX_OP_SUB);
}
static bool e_mul(ctx *c)
{
    return emit_binary_op(c, RLX_OP_MUL);
}
static bool e_div(ctx *c)
{
    return emit_binary_op(c, RLX_OP_DIV);
}
static bool e_pow(ctx *c)
{
    return emit_binary_op(c, RLX_OP_POW);
}

/* Max, Min, Sum, Mean: variadic, folded pairwise */
static bool emit_variadic(ctx *c, rlx_op op, bool mean)
{
    const rlx_onnx_node *n = c->cur;
    if (n->n_inputs < 1)
        return false;
    val *v0 = need(c, 0);
    if (!v0)
        return false;
    if (!is_float_elem(v0->elem) && mean) {
        unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v0->elem));
        return false;
    }
    rlx_node acc = node_of(c, v0);
    for (int i = 1; i < n->n_inputs; i++) {
        val *v = need(c, i);
        if (!v)
            return false;
        if (v->elem != v0->elem) {
            unsupported(c, "inputs of different types");
            return false;
        }
        acc = rlx_graph_binary(c->g, NULL, op, acc, node_of(c, v));
    }
    if (n->n_inputs == 1)
        acc = rlx_graph_copy(c->g, NULL, acc);
    if (mean)
        acc = rlx_graph_scale(c->g, NULL, acc, 1.0f / (float)n->n_inputs, 0.0f);
    return out1(c, v0->elem, acc);
}

static bool e_max(ctx *c)
{
    return emit_variadic(c, RLX_OP_MAX, false);
}
static bool e_min(ctx *c)
{
    return emit_variadic(c, RLX_OP_MIN, false);
}
static bool e_sum(ctx *c)
{
    return emit_variadic(c, RLX_OP_ADD, false);
}
static bool e_mean(ctx *c)
{
    return emit_variadic(c, RLX_OP_ADD, true);
}

static bool emit_cmp(ctx *c, rlx_cmp kind)
{
    val *a = need(c, 0), *b = need(c, 1);
    if (!a || !b)
        return false;
    if (a->elem != b->elem) {
        unsupported(c, "inputs of different types");
        return false;
    }
    return out1(c, RLX_ONNX_BOOL, rlx_graph_cmp(c->g, NULL, kind, node_of(c, a), node_of(c, b)));
}

static bool e_equal(ctx *c)
{
    return emit_cmp(c, RLX_CMP_EQ);
}
static bool e_less(ctx *c)
{
    return emit_cmp(c, RLX_CMP_LT);
}
static bool e_greater(ctx *c)
{
    return emit_cmp(c, RLX_CMP_GT);
}
static bool e_less_eq(ctx *c)
{
    return emit_cmp(c, RLX_CMP_LE);
}
static bool e_greater_eq(ctx *c)
{
    return emit_cmp(c, RLX_CMP_GE);
}

static bool e_not(ctx *c)
{
    rlx_node x = nd(c, 0);
    rlx_node zero =
        rlx_graph_const(c->g, NULL, RLX_DTYPE_U8, rlx_shape_make(0, NULL), (const uint8_t[]){0});
    return out1(c, RLX_ONNX_BOOL, rlx_graph_cmp(c->g, NULL, RLX_CMP_EQ, x, zero));
}

/* And/Or/Xor on 0/1 bytes: min, max, not-equal */
static bool emit_logic(ctx *c, int kind)
{
    rlx_node a = nd(c, 0), b = nd(c, 1);
    rlx_node r = kind == 0   ? rlx_graph_binary(c->g, NULL, RLX_OP_MIN, a, b)
                 : kind == 1 ? rlx_graph_binary(c->g, NULL, RLX_OP_MAX, a, b)
                             : rlx_graph_cmp(c->g, NULL, RLX_CMP_NE, a, b);
    return out1(c, RLX_ONNX_BOOL, r);
}

static bool e_and(ctx *c)
{
    return emit_logic(c, 0);
}
static bool e_or(ctx *c)
{
    return emit_logic(c, 1);
}
static bool e_xor(ctx *c)
{
    return emit_logic(c, 2);
}

static bool e_where(ctx *c)
{
    val *cond = need(c, 0), *a = need(c, 1), *b = need(c, 2);
    if (!cond || !a || !b)
        return false;
    if (a->elem != b->elem) {
        unsupported(c, "inputs of different types");
        return false;
    }
    return out1(c, a->elem,
                rlx_graph_where(c->g, NULL, node_of(c, cond), node_of(c, a), node_of(c, b)));
}

/* unary float ops */
static val *float_in(ctx *c, int i)
{
    val *v = need(c, i);
    if (v && !is_float_elem(v->elem)) {
        unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v->elem));
        return NULL;
    }
    return v;
}

static bool emit_unary(ctx *c, rlx_op op)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    bool int_ok = op == RLX_OP_NEG || op == RLX_OP_ABS || op == RLX_OP_RELU;
    if (!is_float_elem(v->elem) && !int_ok) {
        unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v->elem));
        return false;
    }
    return out1(c, v->elem, rlx_graph_unary(c->g, NULL, op, node_of(c, v)));
}

#define UNARY(fname, op)          \
    static bool fname(ctx *c)     \
    {                             \
        return emit_unary(c, op); \
    }
UNARY(e_neg, RLX_OP_NEG)
UNARY(e_abs, RLX_OP_ABS)
UNARY(e_exp, RLX_OP_EXP)
UNARY(e_log, RLX_OP_LOG)
UNARY(e_sqrt, RLX_OP_SQRT)
UNARY(e_tanh, RLX_OP_TANH)
UNARY(e_sigmoid, RLX_OP_SIGMOID)
UNARY(e_relu, RLX_OP_RELU)
UNARY(e_sin, RLX_OP_SIN)
UNARY(e_cos, RLX_OP_COS)

static bool e_reciprocal(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    rlx_node x = node_of(c, v);
    return out1(c, v->elem, rlx_graph_div(c->g, NULL, rlx_graph_scalar(c->g, 1.0f), x));
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

static bool e_erf(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    return out1(c, v->elem, erf_node(c, node_of(c, v)));
}

static bool e_leaky_relu(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    float alpha = attr_f(c->cur, "alpha", 0.01f);
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, v);
    /* relu(x) - alpha * relu(-x) */
    rlx_node neg = rlx_graph_relu(g, NULL, rlx_graph_neg(g, NULL, x));
    return out1(c, v->elem,
                rlx_graph_sub(g, NULL, rlx_graph_relu(g, NULL, x),
                              rlx_graph_scale(g, NULL, neg, alpha, 0.0f)));
}

static bool e_prelu(ctx *c)
{
    val *v = float_in(c, 0), *s = float_in(c, 1);
    if (!v || !s)
        return false;
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, v);
    rlx_node neg = rlx_graph_relu(g, NULL, rlx_graph_neg(g, NULL, x));
    return out1(c, v->elem,
                rlx_graph_sub(g, NULL, rlx_graph_relu(g, NULL, x),
                              rlx_graph_mul(g, NULL, neg, node_of(c, s))));
}

static bool e_elu(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    float alpha = attr_f(c->cur, "alpha", 1.0f);
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, v);
    rlx_node mn = rlx_graph_binary(g, NULL, RLX_OP_MIN, x, rlx_graph_scalar(g, 0.0f));
    rlx_node e = rlx_graph_scale(g, NULL, rlx_graph_exp(g, NULL, mn), alpha, -alpha);
    return out1(c, v->elem, rlx_graph_add(g, NULL, rlx_graph_relu(g, NULL, x), e));
}

static bool e_selu(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    float alpha = attr_f(c->cur, "alpha", 1.67326319217681884765625f);
    float gamma = attr_f(c->cur, "gamma", 1.05070102214813232421875f);
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, v);
    rlx_node mn = rlx_graph_binary(g, NULL, RLX_OP_MIN, x, rlx_graph_scalar(g, 0.0f));
    rlx_node e = rlx_graph_scale(g, NULL, rlx_graph_exp(g, NULL, mn), alpha, -alpha);
    rlx_node y = rlx_graph_add(g, NULL, rlx_graph_relu(g, NULL, x), e);
    return out1(c, v->elem, rlx_graph_scale(g, NULL, y, gamma, 0.0f));
}

static bool e_hard_sigmoid(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    float alpha = attr_f(c->cur, "alpha", 0.2f), beta = attr_f(c->cur, "beta", 0.5f);
    rlx_node y = rlx_graph_scale(c->g, NULL, node_of(c, v), alpha, beta);
    return out1(c, v->elem, rlx_graph_clamp(c->g, NULL, y, 0.0f, 1.0f));
}

static bool e_hard_swish(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    rlx_node x = node_of(c, v);
    rlx_node y =
        rlx_graph_clamp(c->g, NULL, rlx_graph_scale(c->g, NULL, x, 1.0f / 6.0f, 0.5f), 0.0f, 1.0f);
    return out1(c, v->elem, rlx_graph_mul(c->g, NULL, x, y));
}

static bool e_softplus(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, v);
    /* log(1 + exp(x)) = relu(x) + log(1 + exp(-|x|)), without overflow */
    rlx_node t =
        rlx_graph_exp(g, NULL, rlx_graph_neg(g, NULL, rlx_graph_unary(g, NULL, RLX_OP_ABS, x)));
    rlx_node l = rlx_graph_unary(g, NULL, RLX_OP_LOG, rlx_graph_scale(g, NULL, t, 1.0f, 1.0f));
    return out1(c, v->elem, rlx_graph_add(g, NULL, rlx_graph_relu(g, NULL, x), l));
}

static bool e_softsign(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, v);
    rlx_node d = rlx_graph_scale(g, NULL, rlx_graph_unary(g, NULL, RLX_OP_ABS, x), 1.0f, 1.0f);
    return out1(c, v->elem, rlx_graph_div(g, NULL, x, d));
}

static bool e_thresholded_relu(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    float alpha = attr_f(c->cur, "alpha", 1.0f);
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, v);
    rlx_node m = rlx_graph_cmp(g, NULL, RLX_CMP_GT, x, rlx_graph_scalar(g, alpha));
    return out1(c, v->elem, rlx_graph_where(g, NULL, m, x, rlx_graph_scalar(g, 0.0f)));
}

static bool e_clip(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    if (!is_float_elem(v->elem)) {
        unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v->elem));
        return false;
    }
    double lo = -FLT_MAX, hi = FLT_MAX;
    if (c->opset < 11) {
        lo = attr_f(c->cur, "min", -FLT_MAX);
        hi = attr_f(c->cur, "max", FLT_MAX);
    } else {
        for (int i = 1; i <= 2; i++) {
            val *b = in_val(c, i);
            if (!b)
                continue;
            double *d = b->kind == V_CONST ? cdata(c, b) : NULL;
            if (!d && is_float_elem(b->elem) && vnumel(b) == 1)
                continue; /* applied below, as max / min with the tensor */
            if (!d || vnumel(b) != 1) {
                unsupported(c, "min/max that are not single numbers");
                return false;
            }
            if (i == 1)
                lo = d[0];
            else
                hi = d[0];
        }
    }
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, v);
    val *rmin = in_val(c, 1), *rmax = in_val(c, 2);
    if (c->opset >= 11 && ((rmin && rmin->kind != V_CONST) || (rmax && rmax->kind != V_CONST))) {
        /* min(max(x, lo), hi), as ONNX's reference computes it */
        if (rmin)
            x = rlx_graph_binary(g, NULL, RLX_OP_MAX, x, node_of(c, rmin));
        if (rmax)
            x = rlx_graph_binary(g, NULL, RLX_OP_MIN, x, node_of(c, rmax));
        return out1(c, v->elem, x);
    }
    if (lo > hi) /* ONNX: every element becomes max */
        return out1(c, v->elem, rlx_graph_clamp(g, NULL, x, (float)hi, (float)hi));
    return out1(c, v->elem, rlx_graph_clamp(g, NULL, x, (float)lo, (float)hi));
}

static bool e_identity(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    if (strcmp(c->cur->op_type, "Dropout") == 0) {
        bool want_mask = c->cur->n_outputs > 1 && c->cur->outputs[1][0];
        /* inference only: a training_mode that is not a constant false is refused */
        val *tm = in_val(c, 2);
        double *d = tm && tm->kind == V_CONST ? cdata(c, tm) : NULL;
        if (tm && (!d || vnumel(tm) != 1 || d[0] != 0)) {
            unsupported(c, "training_mode");
            return false;
        }
        /* in inference every element is kept: the mask is all true */
        if (want_mask) {
            double *ones = alloc_d(vnumel(v));
            if (!ones) {
                unsupported(c, "masks of more than %d elements", RLX_ONNX_FOLD_LIMIT);
                return false;
            }
            for (int64_t i = 0; i < vnumel(v); i++)
                ones[i] = 1;
            if (!set_const(c, c->cur->outputs[1], RLX_ONNX_BOOL, v->rank, v->dims, ones))
                return false;
        }
    }
    if (v->kind == V_CONST) {
        val *o = set_const(c, c->cur->outputs[0], v->elem, v->rank, v->dims, NULL);
        if (!o)
            return false;
        o->init = v->init;
        if (cdata(c, v)) {
            o->c = alloc_d(vnumel(v));
            if (!o->c)
                return false;
            memcpy(o->c, v->c, (size_t)vnumel(v) * sizeof(double));
        }
        o->node = v->node;
        return true;
    }
    return out1(c, v->elem, node_of(c, v));
}

static bool emit_cast(ctx *c, int32_t to);

static bool e_cast(ctx *c)
{
    return emit_cast(c, (int32_t)attr_i(c->cur, "to", 0));
}

static bool e_cast_like(ctx *c)
{
    val *t = need(c, 1);
    return t && emit_cast(c, t->elem);
}

static bool emit_cast(ctx *c, int32_t to)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    /* ONNX leaves float -> bfloat16 rounding open (its 1.12 test data
     * truncates, runtimes round to nearest even): refused rather than
     * guessed */
    if (to == RLX_ONNX_BFLOAT16 && v->elem != RLX_ONNX_BFLOAT16) {
        unsupported(c, "casts to bfloat16 (the rounding is not specified)");
        return false;
    }

    rlx_dtype gto = graph_dtype(to);
    if (gto == RLX_DTYPE_INVALID || graph_dtype(v->elem) == RLX_DTYPE_INVALID) {
        unsupported(c, "casts from %s to %s", rlx_onnx_elem_type_name(v->elem),
                    rlx_onnx_elem_type_name(to));
        return false;
    }
    if (v->kind == V_CONST && cdata(c, v)) {
        int64_t n = vnumel(v);
        double *d = alloc_d(n);
        if (!d)
            return false;
        for (int64_t i = 0; i < n; i++)
            d[i] = fit_elem(to, v->c[i]);
        return set_const(c, c->cur->outputs[0], to, v->rank, v->dims, d) != NULL;
    }
    /* float16 values are kept in F32 holding exactly the narrower type's
     * values: the cast rounds through it (to nearest even, as IEEE) */
    rlx_dtype narrow = to == RLX_ONNX_FLOAT16    ? RLX_DTYPE_F16
                       : to == RLX_ONNX_BFLOAT16 ? RLX_DTYPE_BF16
                                                 : RLX_DTYPE_INVALID;
    rlx_node x = node_of(c, v);
    rlx_dtype from = rlx_graph_node_dtype(c->g, x);
    rlx_node y;
    if (to == RLX_ONNX_BOOL)
        y = rlx_graph_cmp(c->g, NULL, RLX_CMP_NE, x, scalar_like(c, x, 0));
    else if (narrow != RLX_DTYPE_INVALID)
        y = rlx_graph_cast(c->g, NULL, rlx_graph_cast(c->g, NULL, x, narrow), RLX_DTYPE_F32);
    else if (from == gto)
        y = rlx_graph_copy(c->g, NULL, x);
    else
        y = rlx_graph_cast(c->g, NULL, x, gto);
    return out1(c, to, y);
}

/* ---- shapes and data movement ---- */

static bool e_shape(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    int64_t start = attr_i(c->cur, "start", 0), end = attr_i(c->cur, "end", v->rank);
    if (start < 0)
        start += v->rank;
    if (end < 0)
        end += v->rank;
    if (start < 0)
        start = 0;
    if (end > v->rank)
        end = v->rank;
    int64_t n = end > start ? end - start : 0;
    double *d = alloc_d(n);
    if (!d)
        return false;
    for (int64_t i = 0; i < n; i++)
        d[i] = (double)v->dims[start + i];
    return set_const(c, c->cur->outputs[0], RLX_ONNX_INT64, 1, &n, d) != NULL;
}

static bool e_size(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    double *d = malloc(sizeof *d);
    if (!d)
        return false;
    d[0] = (double)vnumel(v);
    return set_const(c, c->cur->outputs[0], RLX_ONNX_INT64, 0, NULL, d) != NULL;
}

static bool set_const_from_tensor(ctx *c, const char *name, const rlx_onnx_tensor *t)
{
    if (t->rank > MAXD || (!t->data && t->numel) || t->dtype == RLX_DTYPE_INVALID) {
        unsupported(c, "a constant of %d dims or type %s", t->rank,
                    rlx_onnx_elem_type_name(t->elem_type));
        return false;
    }
    val *v = set_const(c, name, t->elem_type, t->rank, t->dims, NULL);
    if (!v)
        return false;
    v->init = t;
    return true;
}

static bool e_constant(ctx *c)
{
    const rlx_onnx_node *n = c->cur;
    const rlx_onnx_attr *a;
    if ((a = attr(n, "value")) && a->type == RLX_ONNX_ATTR_TENSOR)
        return set_const_from_tensor(c, n->outputs[0], a->t);
    double *d;
    if ((a = attr(n, "value_float")) || (a = attr(n, "value_int"))) {
        if (!(d = malloc(sizeof *d)))
            return false;
        bool f = a->type == RLX_ONNX_ATTR_FLOAT;
        d[0] = f ? a->f : (double)a->i;
        return set_const(c, n->outputs[0], f ? RLX_ONNX_FLOAT : RLX_ONNX_INT64, 0, NULL, d) != NULL;
    }
    if ((a = attr(n, "value_floats")) || (a = attr(n, "value_ints"))) {
        bool f = a->type == RLX_ONNX_ATTR_FLOATS;
        int64_t k = f ? a->n_floats : a->n_ints;
        if (!(d = alloc_d(k)))
            return false;
        for (int64_t i = 0; i < k; i++)
            d[i] = f ? a->floats[i] : (double)a->ints[i];
        return set_const(c, n->outputs[0], f ? RLX_ONNX_FLOAT : RLX_ONNX_INT64, 1, &k, d) != NULL;
    }
    unsupported(c, "a value that is not a tensor, float(s) or int(s)");
    return false;
}

static bool shape_input(ctx *c, int i, int64_t *dims, int *rank)
{
    int64_t tmp[MAXD + 1];
    int k = const_ints(c, i, tmp, MAXD + 1);
    if (k < 0) {
        unsupported(c, "a shape that is not known at import time");
        return false;
    }
    if (k > MAXD) {
        unsupported(c, "shapes of more than %d dims", MAXD);
        return false;
    }
    memcpy(dims, tmp, (size_t)k * sizeof *dims);
    *rank = k;
    return true;
}

static bool e_constant_of_shape(ctx *c)
{
    int64_t dims[MAXD];
    int rank;
    if (!shape_input(c, 0, dims, &rank))
        return false;
    int64_t n = numel_of(rank, dims);
    if (n < 0 || n > RLX_ONNX_FOLD_LIMIT) {
        unsupported(c, "constants of more than %d elements", RLX_ONNX_FOLD_LIMIT);
        return false;
    }
    double value = 0;
    int32_t elem = RLX_ONNX_FLOAT;
    const rlx_onnx_attr *a = attr(c->cur, "value");
    if (a && a->type == RLX_ONNX_ATTR_TENSOR) {
        val tmp = {.kind = V_CONST, .init = a->t, .rank = 0, .node = RLX_NODE_INVALID};
        tmp.rank = a->t->rank <= MAXD ? a->t->rank : 0;
        for (int i = 0; i < tmp.rank; i++)
            tmp.dims[i] = a->t->dims[i];
        double *d = a->t->numel == 1 ? cdata(c, &tmp) : NULL;
        if (!d) {
            unsupported(c, "a value that is not one number");
            return false;
        }
        value = d[0];
        free(tmp.c);
        elem = a->t->elem_type;
    }
    double *d = alloc_d(n);
    if (!d)
        return false;
    for (int64_t i = 0; i < n; i++)
        d[i] = value;
    return set_const(c, c->cur->outputs[0], elem, rank, dims, d) != NULL;
}

static bool e_range(ctx *c)
{
    val *vs[3];
    double s[3];
    for (int i = 0; i < 3; i++) {
        vs[i] = need(c, i);
        double *d = vs[i] && vs[i]->kind == V_CONST ? cdata(c, vs[i]) : NULL;
        if (!d) {
            unsupported(c, "inputs that are not known at import time");
            return false;
        }
        s[i] = d[0];
    }
    if (s[2] == 0) {
        failf(c, RLX_ERR_FORMAT, "the step is 0");
        return false;
    }
    double cnt = ceil((s[1] - s[0]) / s[2]);
    int64_t n = cnt > 0 ? (int64_t)cnt : 0;
    if (n > RLX_ONNX_FOLD_LIMIT) {
        unsupported(c, "ranges of more than %d elements", RLX_ONNX_FOLD_LIMIT);
        return false;
    }
    double *d = alloc_d(n);
    if (!d)
        return false;
    for (int64_t i = 0; i < n; i++)
        d[i] = fit_elem(vs[0]->elem, s[0] + (double)i * s[2]);
    return set_const(c, c->cur->outputs[0], vs[0]->elem, 1, &n, d) != NULL;
}

/* a value reshaped (constants stay constants) */
static bool out_reshaped(ctx *c, val *v, int rank, const int64_t *dims)
{
    if (rank > MAXD) {
        unsupported(c, "results of more than %d dims", MAXD);
        return false;
    }
    if (numel_of(rank, dims) != vnumel(v)) {
        failf(c, RLX_ERR_FORMAT, "cannot reshape %lld elements to that shape",
              (long long)vnumel(v));
        return false;
    }
    if (v->kind == V_CONST && (v->c || cdata(c, v))) {
        int64_t n = vnumel(v);
        double *d = alloc_d(n);
        if (!d)
            return false;
        memcpy(d, v->c, (size_t)n * sizeof *d);
        return set_const(c, c->cur->outputs[0], v->elem, rank, dims, d) != NULL;
    }
    if (v->kind == V_CONST && v->init) {
        /* a large initializer keeps its bytes: same data, another shape */
        val *o = set_const(c, c->cur->outputs[0], v->elem, rank, dims, NULL);
        if (!o)
            return false;
        o->kind = V_NODE;
        o->node = reshape(c, node_of(c, v), rank, dims);
        return o->node != RLX_NODE_INVALID;
    }
    return out1(c, v->elem, reshape(c, node_of(c, v), rank, dims));
}

static bool e_reshape(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    int64_t dims[MAXD];
    int rank;
    if (c->opset < 5) {
        int k = attr_ints(c->cur, "shape", dims, MAXD);
        if (k < 0 || k > MAXD) {
            unsupported(c, "this shape attribute");
            return false;
        }
        rank = k;
    } else if (!shape_input(c, 1, dims, &rank))
        return false;
    bool allowzero = attr_i(c->cur, "allowzero", 0) != 0;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0 && !allowzero) {
            if (i >= v->rank) {
                failf(c, RLX_ERR_FORMAT, "shape copies dim %d of a rank-%d input", i, v->rank);
                return false;
            }
            dims[i] = v->dims[i];
        }
        if (dims[i] == -1) {
            if (infer >= 0) {
                failf(c, RLX_ERR_FORMAT, "the shape has two -1 dims");
                return false;
            }
            infer = i;
            continue;
        }
        if (dims[i] < 0) {
            failf(c, RLX_ERR_FORMAT, "the shape has a negative dim");
            return false;
        }
        known *= dims[i];
    }
    if (infer >= 0)
        dims[infer] = known ? vnumel(v) / known : 0;
    return out_reshaped(c, v, rank, dims);
}

static bool axes_of(ctx *c, int input, const char *attr_name, int64_t *axes, int *n)
{
    int k;
    if (c->cur->n_inputs > input && c->cur->inputs[input][0])
        k = const_ints(c, input, axes, MAXD + 1);
    else
        k = attr_ints(c->cur, attr_name, axes, MAXD + 1);
    if (k > MAXD)
        k = -2;
    if (k == -2 || (k < 0 && c->cur->n_inputs > input && c->cur->inputs[input][0])) {
        unsupported(c, "axes that are not known at import time");
        return false;
    }
    *n = k;
    return true;
}

static bool e_squeeze(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    int64_t axes[MAXD + 1];
    int na;
    if (!axes_of(c, 1, "axes", axes, &na))
        return false;
    bool drop[MAXD] = {false};
    if (na < 0) {
        for (int i = 0; i < v->rank; i++)
            drop[i] = v->dims[i] == 1;
    } else
        for (int i = 0; i < na; i++) {
            bool ok = true;
            int a = norm_axis(axes[i], v->rank, &ok);
            if (!ok || v->dims[a] != 1) {
                failf(c, RLX_ERR_FORMAT, "cannot squeeze axis %lld", (long long)axes[i]);
                return false;
            }
            drop[a] = true;
        }
    int64_t dims[MAXD];
    int r = 0;
    for (int i = 0; i < v->rank; i++)
        if (!drop[i])
            dims[r++] = v->dims[i];
    return out_reshaped(c, v, r, dims);
}

static bool e_unsqueeze(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    int64_t axes[MAXD + 1];
    int na;
    if (!axes_of(c, 1, "axes", axes, &na))
        return false;
    if (na < 0) {
        failf(c, RLX_ERR_FORMAT, "no axes given");
        return false;
    }
    int r = v->rank + na;
    if (r > MAXD) {
        unsupported(c, "results of more than %d dims", MAXD);
        return false;
    }
    bool ins[MAXD] = {false};
    for (int i = 0; i < na; i++) {
        bool ok = true;
        int a = norm_axis(axes[i], r, &ok);
        if (!ok || ins[a]) {
            failf(c, RLX_ERR_FORMAT, "bad axis %lld", (long long)axes[i]);
            return false;
        }
        ins[a] = true;
    }
    int64_t dims[MAXD];
    for (int i = 0, k = 0; i < r; i++)
        dims[i] = ins[i] ? 1 : v->dims[k++];
    return out_reshaped(c, v, r, dims);
}

static bool e_flatten(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    int64_t axis = attr_i(c->cur, "axis", 1);
    if (axis < 0)
        axis += v->rank;
    if (axis < 0 || axis > v->rank) {
        failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    int64_t d[2] = {1, 1};
    for (int i = 0; i < v->rank; i++)
        d[i < axis ? 0 : 1] *= v->dims[i];
    return out_reshaped(c, v, 2, d);
}

static bool e_transpose(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    int64_t perm[MAXD + 1];
    int k = attr_ints(c->cur, "perm", perm, MAXD + 1);
    if (k < 0) {
        k = v->rank;
        for (int i = 0; i < k; i++)
            perm[i] = k - 1 - i;
    }
    if (k != v->rank) {
        failf(c, RLX_ERR_FORMAT, "perm has %d entries for a rank-%d input", k, v->rank);
        return false;
    }
    int p[MAXD];
    for (int i = 0; i < k; i++)
        p[i] = (int)perm[i];
    if (v->kind == V_CONST && cdata(c, v)) {
        int64_t n = vnumel(v), od[MAXD], ist[MAXD];
        for (int i = 0; i < k; i++)
            od[i] = v->dims[p[i]];
        int64_t s = 1;
        for (int i = k - 1; i >= 0; i--) {
            ist[i] = s;
            s *= v->dims[i];
        }
        double *d = alloc_d(n);
        if (!d)
            return false;
        for (int64_t o = 0; o < n; o++) {
            int64_t rem = o, src = 0;
            for (int i = k - 1; i >= 0; i--) {
                src += (rem % od[i]) * ist[p[i]];
                rem /= od[i];
            }
            d[o] = v->c[src];
        }
        return set_const(c, c->cur->outputs[0], v->elem, k, od, d) != NULL;
    }
    return out1(c, v->elem, rlx_graph_permute(c->g, NULL, node_of(c, v), p));
}

static bool e_concat(ctx *c)
{
    const rlx_onnx_node *n = c->cur;
    val *v0 = need(c, 0);
    if (!v0)
        return false;
    bool ok = true;
    int axis = norm_axis(attr_i(n, "axis", 0), v0->rank, &ok);
    if (!ok) {
        failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    bool all_const = true;
    int64_t total = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        val *v = need(c, i);
        if (!v)
            return false;
        if (v->rank != v0->rank) {
            failf(c, RLX_ERR_FORMAT, "inputs of different ranks");
            return false;
        }
        all_const &= v->kind == V_CONST && cdata(c, v) != NULL;
        total += v->dims[axis];
    }
    int64_t od[MAXD];
    memcpy(od, v0->dims, sizeof od);
    od[axis] = total;
    if (all_const) {
        int64_t n_out = numel_of(v0->rank, od), outer = 1, inner = 1;
        for (int i = 0; i < axis; i++)
            outer *= od[i];
        for (int i = axis + 1; i < v0->rank; i++)
            inner *= od[i];
        double *d = alloc_d(n_out);
        if (!d)
            return false;
        int64_t pos = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int i = 0; i < n->n_inputs; i++) {
                val *v = in_val(c, i);
                int64_t blk = v->dims[axis] * inner;
                memcpy(d + pos, v->c + o * blk, (size_t)blk * sizeof *d);
                pos += blk;
            }
        return set_const(c, n->outputs[0], v0->elem, v0->rank, od, d) != NULL;
    }
    rlx_node xs[64];
    int k = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        val *v = in_val(c, i);
        if (v->dims[axis] == 0)
            continue;
        if (k == 64) {
            unsupported(c, "more than 64 inputs");
            return false;
        }
        xs[k++] = node_of(c, v);
    }
    if (k == 1)
        return out1(c, v0->elem, rlx_graph_copy(c->g, NULL, xs[0]));
    return out1(c, v0->elem, rlx_graph_concat(c->g, NULL, k, xs, axis));
}

/* ONNX Slice semantics for one axis: clamp start/end, count */
static bool slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *s0,
                        int64_t *len)
{
    if (step <= 0)
        return false;
    if (start < 0)
        start += dim;
    if (end < 0)
        end += dim;
    start = start < 0 ? 0 : start > dim ? dim : start;
    end = end < 0 ? 0 : end > dim ? dim : end;
    *s0 = start;
    *len = end > start ? (end - start + step - 1) / step : 0;
    return true;
}

static bool e_slice(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    int64_t starts[MAXD + 1], ends[MAXD + 1], axes[MAXD + 1], steps[MAXD + 1];
    int ns, ne, na, nst;
    if (c->opset < 10) {
        ns = attr_ints(c->cur, "starts", starts, MAXD + 1);
        ne = attr_ints(c->cur, "ends", ends, MAXD + 1);
        na = attr_ints(c->cur, "axes", axes, MAXD + 1);
        nst = -1;
    } else {
        ns = const_ints(c, 1, starts, MAXD + 1);
        ne = const_ints(c, 2, ends, MAXD + 1);
        na = in_val(c, 3) ? const_ints(c, 3, axes, MAXD + 1) : -1;
        nst = in_val(c, 4) ? const_ints(c, 4, steps, MAXD + 1) : -1;
        if ((in_val(c, 3) && na < 0) || (in_val(c, 4) && nst < 0)) {
            unsupported(c, "axes or steps that are not known at import time");
            return false;
        }
    }
    if (ns < 0 || ne < 0 || ns != ne || ns > MAXD) {
        unsupported(c, "starts/ends that are not known at import time");
        return false;
    }
    if (na < 0) {
        na = ns;
        for (int i = 0; i < ns; i++)
            axes[i] = i;
    }
    if (nst < 0) {
        nst = ns;
        for (int i = 0; i < ns; i++)
            steps[i] = 1;
    }
    if (na != ns || nst != ns) {
        failf(c, RLX_ERR_FORMAT, "starts, ends, axes and steps differ in length");
        return false;
    }
    int64_t s0[MAXD], len[MAXD], st[MAXD];
    for (int i = 0; i < v->rank; i++) {
        s0[i] = 0;
        len[i] = v->dims[i];
        st[i] = 1;
    }
    for (int i = 0; i < ns; i++) {
        bool ok = true;
        int a = norm_axis(axes[i], v->rank, &ok);
        if (!ok) {
            failf(c, RLX_ERR_FORMAT, "axis %lld out of range", (long long)axes[i]);
            return false;
        }
        if (steps[i] <= 0) {
            unsupported(c, "negative or zero steps");
            return false;
        }
        if (!slice_range(v->dims[a], starts[i], ends[i], steps[i], &s0[a], &len[a]))
            return false;
        st[a] = steps[i];
    }
    if (numel_of(v->rank, len) == 0) {
        unsupported(c, "empty results");
        return false;
    }
    if (v->kind == V_CONST && cdata(c, v)) {
        int64_t n = numel_of(v->rank, len), ist[MAXD], s = 1;
        for (int i = v->rank - 1; i >= 0; i--) {
            ist[i] = s;
            s *= v->dims[i];
        }
        double *d = alloc_d(n);
        if (!d)
            return false;
        for (int64_t o = 0; o < n; o++) {
            int64_t rem = o, src = 0;
            for (int i = v->rank - 1; i >= 0; i--) {
                src += (s0[i] + (rem % len[i]) * st[i]) * ist[i];
                rem /= len[i];
            }
            d[o] = v->c[src];
        }
        return set_const(c, c->cur->outputs[0], v->elem, v->rank, len, d) != NULL;
    }
    rlx_node x = node_of(c, v);
    for (int i = 0; i < v->rank && x != RLX_NODE_INVALID; i++)
        if (s0[i] != 0 || len[i] != v->dims[i])
            x = slice_step(c, x, i, s0[i], len[i], st[i]);
    return out1(c, v->elem, rlx_graph_copy(c->g, NULL, x));
}

static bool e_gather(ctx *c)
{
    val *v = need(c, 0), *iv = need(c, 1);
    if (!v || !iv)
        return false;
    bool ok = true;
    int axis = norm_axis(attr_i(c->cur, "axis", 0), v->rank, &ok);
    if (!ok) {
        failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    int orank = v->rank - 1 + iv->rank;
    if (orank > MAXD) {
        unsupported(c, "results of more than %d dims", MAXD);
        return false;
    }
    int64_t od[MAXD], dimv = v->dims[axis];
    for (int i = 0, k = 0; i < v->rank; i++) {
        if (i == axis)
            for (int j = 0; j < iv->rank; j++)
                od[k++] = iv->dims[j];
        else
            od[k++] = v->dims[i];
    }
    int64_t ni = vnumel(iv);
    double *idx = iv->kind == V_CONST ? cdata(c, iv) : NULL;
    if (idx)
        for (int64_t i = 0; i < ni; i++) {
            int64_t x = to_i64(idx[i]);
            if (x < -dimv || x >= dimv) {
                failf(c, RLX_ERR_FORMAT, "index %lld is out of range for a dim of %lld",
                      (long long)x, (long long)dimv);
                return false;
            }
        }
    if (idx && v->kind == V_CONST && cdata(c, v)) {
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < axis; i++)
            outer *= v->dims[i];
        for (int i = axis + 1; i < v->rank; i++)
            inner *= v->dims[i];
        int64_t n = outer * ni * inner;
        double *d = alloc_d(n);
        if (!d)
            return false;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < ni; j++) {
                int64_t x = to_i64(idx[j]);
                if (x < 0)
                    x += dimv;
                memcpy(d + (o * ni + j) * inner, v->c + (o * dimv + x) * inner,
                       (size_t)inner * sizeof *d);
            }
        return set_const(c, c->cur->outputs[0], v->elem, orank, od, d) != NULL;
    }
    rlx_node x = node_of(c, v);
    if (idx && ni <= 16) {
        /* a few constant indices: slices and a concat */
        rlx_node parts[16];
        for (int64_t j = 0; j < ni; j++) {
            int64_t k = to_i64(idx[j]);
            if (k < 0)
                k += dimv;
            parts[j] = rlx_graph_slice(c->g, NULL, x, axis, rlx_dim_const(k), rlx_dim_const(1));
        }
        rlx_node y = ni == 1 ? parts[0] : rlx_graph_concat(c->g, NULL, (int)ni, parts, axis);
        if (ni == 0) {
            unsupported(c, "empty indices");
            return false;
        }
        return out1(c, v->elem, reshape(c, y, orank, od));
    }
    if (!is_float_elem(v->elem)) {
        unsupported(c, "gathering %s data by computed indices", rlx_onnx_elem_type_name(v->elem));
        return false;
    }
    /* the axis to the front, [V, rest], the IR's row gather, then back */
    int perm[MAXD], k = 0;
    perm[k++] = axis;
    for (int i = 0; i < v->rank; i++)
        if (i != axis)
            perm[k++] = i;
    rlx_node t = x;
    if (axis != 0)
        t = rlx_graph_permute(c->g, NULL, x, perm);
    int64_t rest = vnumel(v) / (dimv ? dimv : 1);
    t = reshape(c, t, 2, (int64_t[]){dimv, rest});
    rlx_node ids = node_of(c, iv);
    if (!idx) {
        /* negative indices count from the end */
        rlx_node zero = scalar_like(c, ids, 0);
        rlx_node neg = rlx_graph_cmp(c->g, NULL, RLX_CMP_LT, ids, zero);
        ids =
            rlx_graph_where(c->g, NULL, neg,
                            rlx_graph_add(c->g, NULL, ids, scalar_like(c, ids, (double)dimv)), ids);
    }
    rlx_node y = rlx_graph_gather(c->g, NULL, t, ids); /* [idx..., rest] */
    int64_t gd[MAXD];
    int gr = 0;
    for (int j = 0; j < iv->rank; j++)
        gd[gr++] = iv->dims[j];
    for (int i = 0; i < v->rank; i++)
        if (i != axis)
            gd[gr++] = v->dims[i];
    if (gr > MAXD) {
        unsupported(c, "results of more than %d dims", MAXD);
        return false;
    }
    y = reshape(c, y, gr, gd);
    if (axis != 0) {
        /* gd = [idx..., before..., after...] -> [before..., idx..., after...] */
        int p[MAXD], q = 0;
        for (int i = 0; i < axis; i++)
            p[q++] = iv->rank + i;
        for (int j = 0; j < iv->rank; j++)
            p[q++] = j;
        for (int i = axis + 1; i < v->rank; i++)
            p[q++] = iv->rank + i - 1;
        y = rlx_graph_permute(c->g, NULL, y, p);
    }
    return out1(c, v->elem, y);
}

static bool e_expand(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    int64_t sd[MAXD], od[MAXD];
    int sr, orank;
    if (!shape_input(c, 1, sd, &sr))
        return false;
    if (!broadcast_dims(v->rank, v->dims, sr, sd, &orank, od)) {
        failf(c, RLX_ERR_FORMAT, "the shape does not broadcast with the input");
        return false;
    }
    /* add zeros whose dims are 1 except where the input is broadcast */
    int64_t zd[MAXD];
    for (int i = 0; i < orank; i++) {
        int k = i - (orank - v->rank);
        int64_t in = k >= 0 ? v->dims[k] : 1;
        zd[i] = in == od[i] ? 1 : od[i];
    }
    int64_t zn = numel_of(orank, zd);
    if (zn > RLX_ONNX_FOLD_LIMIT) {
        unsupported(c, "expansions by more than %d elements", RLX_ONNX_FOLD_LIMIT);
        return false;
    }
    double *z = calloc((size_t)(zn ? zn : 1), sizeof *z);
    if (!z)
        return false;
    val *zv = set_const(c, "", v->elem, orank, zd, z);
    if (!zv)
        return false;
    if (v->kind == V_CONST && cdata(c, v)) {
        int64_t n = numel_of(orank, od);
        if (n > RLX_ONNX_FOLD_LIMIT) {
            unsupported(c, "expansions by more than %d elements", RLX_ONNX_FOLD_LIMIT);
            return false;
        }
        double *d = alloc_d(n);
        if (!d)
            return false;
        for (int64_t i = 0; i < n; i++)
            d[i] = v->c[bidx(i, orank, od, v->rank, v->dims)];
        return set_const(c, c->cur->outputs[0], v->elem, orank, od, d) != NULL;
    }
    rlx_node x = node_of(c, v);
    rlx_node zn_node = node_of(c, zv);
    rlx_node y = v->elem == RLX_ONNX_BOOL ? rlx_graph_binary(c->g, NULL, RLX_OP_MAX, x, zn_node)
                                          : rlx_graph_add(c->g, NULL, x, zn_node);
    return out1(c, v->elem, y);
}

static bool e_split(ctx *c)
{
    const rlx_onnx_node *n = c->cur;
    val *v = need(c, 0);
    if (!v)
        return false;
    bool ok = true;
    int axis = norm_axis(attr_i(n, "axis", 0), v->rank, &ok);
    if (!ok) {
        failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    int64_t sizes[64];
    int k;
    if (c->opset >= 13 && in_val(c, 1))
        k = const_ints(c, 1, sizes, 64);
    else
        k = attr_ints(n, "split", sizes, 64);
    int nout = n->n_outputs;
    if (nout > 64) {
        unsupported(c, "more than 64 outputs");
        return false;
    }
    if (k < 0) {
        if (in_val(c, 1)) {
            unsupported(c, "split sizes that are not known at import time");
            return false;
        }
        int64_t dim = v->dims[axis], each = (dim + nout - 1) / nout;
        for (int i = 0; i < nout; i++) {
            int64_t left = dim - each * i;
            sizes[i] = left < each ? (left > 0 ? left : 0) : each;
        }
        k = nout;
    }
    if (k != nout) {
        failf(c, RLX_ERR_FORMAT, "%d split sizes for %d outputs", k, nout);
        return false;
    }
    int64_t off = 0;
    rlx_node x = node_of(c, v);
    for (int i = 0; i < nout; i++) {
        if (sizes[i] <= 0 || off + sizes[i] > v->dims[axis]) {
            unsupported(c, "empty or out-of-range parts");
            return false;
        }
        rlx_node y =
            rlx_graph_slice(c->g, NULL, x, axis, rlx_dim_const(off), rlx_dim_const(sizes[i]));
        if (!set_node(c, n->outputs[i], v->elem, rlx_graph_copy(c->g, NULL, y)))
            return false;
        off += sizes[i];
    }
    return true;
}

static bool e_pad(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    const char *mode = attr_s(c->cur, "mode", "constant");
    if (strcmp(mode, "constant") != 0) {
        unsupported(c, "mode '%s'", mode);
        return false;
    }
    int64_t pads[2 * MAXD + 1];
    int k;
    double value = 0;
    if (c->opset < 11) {
        k = attr_ints(c->cur, "pads", pads, 2 * MAXD + 1);
        value = attr_f(c->cur, "value", 0.0f);
    } else {
        k = const_ints(c, 1, pads, 2 * MAXD + 1);
        val *cv = in_val(c, 2);
        if (cv) {
            double *d = cv->kind == V_CONST ? cdata(c, cv) : NULL;
            if (!d) {
                unsupported(c, "a pad value that is not known at import time");
                return false;
            }
            value = d[0];
        }
        if (in_val(c, 3)) {
            unsupported(c, "the axes input");
            return false;
        }
    }
    if (k != 2 * v->rank) {
        unsupported(c, "pads that are not known at import time");
        return false;
    }
    int64_t before[MAXD] = {0}, after[MAXD] = {0};
    bool any = false;
    rlx_node x = node_of(c, v);
    for (int i = 0; i < v->rank; i++) {
        int64_t b = pads[i], a = pads[v->rank + i];
        /* negative pads crop */
        if (b < 0 || a < 0) {
            int64_t s = b < 0 ? -b : 0, e = v->dims[i] - (a < 0 ? -a : 0);
            if (e <= s) {
                unsupported(c, "pads that crop everything");
                return false;
            }
            x = rlx_graph_slice(c->g, NULL, x, i, rlx_dim_const(s), rlx_dim_const(e - s));
        }
        before[i] = b > 0 ? b : 0;
        after[i] = a > 0 ? a : 0;
        any |= before[i] || after[i];
    }
    if (!is_float_elem(v->elem) && any) {
        unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v->elem));
        return false;
    }
    rlx_node y = any ? rlx_graph_pad(c->g, NULL, x, before, after, (float)value)
                     : rlx_graph_copy(c->g, NULL, x);
    return out1(c, v->elem, y);
}

static bool e_depth_space(ctx *c, bool to_space)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    if (v->rank != 4) {
        unsupported(c, "inputs that are not 4-D");
        return false;
    }
    int64_t b = attr_i(c->cur, "blocksize", 0);
    if (b <= 0) {
        failf(c, RLX_ERR_FORMAT, "blocksize must be positive");
        return false;
    }
    int64_t N = v->dims[0], C = v->dims[1], H = v->dims[2], W = v->dims[3];
    rlx_node x = node_of(c, v);
    if (to_space) {
        if (C % (b * b)) {
            failf(c, RLX_ERR_FORMAT, "channels are not a multiple of blocksize^2");
            return false;
        }
        bool crd = strcmp(attr_s(c->cur, "mode", "DCR"), "CRD") == 0;
        int64_t d6[6];
        int perm[6];
        if (crd) {
            memcpy(d6, (int64_t[]){N, C / (b * b), b, b, H, W}, sizeof d6);
            memcpy(perm, (int[]){0, 1, 4, 2, 5, 3}, sizeof perm);
        } else {
            memcpy(d6, (int64_t[]){N, b, b, C / (b * b), H, W}, sizeof d6);
            memcpy(perm, (int[]){0, 3, 4, 1, 5, 2}, sizeof perm);
        }
        x = rlx_graph_permute(c->g, NULL, reshape(c, x, 6, d6), perm);
        return out1(c, v->elem, reshape(c, x, 4, (int64_t[]){N, C / (b * b), H * b, W * b}));
    }
    if (H % b || W % b) {
        failf(c, RLX_ERR_FORMAT, "spatial dims are not multiples of blocksize");
        return false;
    }
    x = reshape(c, x, 6, (int64_t[]){N, C, H / b, b, W / b, b});
    x = rlx_graph_permute(c->g, NULL, x, (int[]){0, 3, 5, 1, 2, 4});
    return out1(c, v->elem, reshape(c, x, 4, (int64_t[]){N, C * b * b, H / b, W / b}));
}

static bool e_depth_to_space(ctx *c)
{
    return e_depth_space(c, true);
}
static bool e_space_to_depth(ctx *c)
{
    return e_depth_space(c, false);
}

static bool e_tile(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    int64_t rep[MAXD + 1];
    int k = const_ints(c, 1, rep, MAXD + 1);
    if (k != v->rank) {
        unsupported(c, "repeats that are not known at import time");
        return false;
    }
    rlx_node x = node_of(c, v);
    for (int i = 0; i < v->rank; i++) {
        if (rep[i] < 1 || rep[i] > 64) {
            unsupported(c, "repeats outside 1..64");
            return false;
        }
        if (rep[i] == 1)
            continue;
        rlx_node parts[64];
        for (int j = 0; j < rep[i]; j++)
            parts[j] = x;
        x = rlx_graph_concat(c->g, NULL, (int)rep[i], parts, i);
    }
    return out1(c, v->elem, rlx_graph_copy(c->g, NULL, x));
}

static bool e_trilu(ctx *c)
{
    val *v = need(c, 0);
    if (!v)
        return false;
    if (v->rank < 2) {
        failf(c, RLX_ERR_FORMAT, "the input needs 2 dims");
        return false;
    }
    int64_t k = 0;
    if (in_val(c, 1)) {
        int64_t t[2];
        if (const_ints(c, 1, t, 1) != 1) {
            unsupported(c, "a k that is not known at import time");
            return false;
        }
        k = t[0];
    }
    bool upper = attr_i(c->cur, "upper", 1) != 0;
    int64_t rows = v->dims[v->rank - 2], cols = v->dims[v->rank - 1];
    /* keep (i, j) with j - i >= k (upper) or j - i <= k (lower) */
    double *keep = alloc_d(rows * cols);
    if (!keep) {
        unsupported(c, "matrices of more than %d elements", RLX_ONNX_FOLD_LIMIT);
        return false;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            keep[i * cols + j] = upper ? (j - i >= k) : (j - i <= k);
    val *mv = set_const(c, "", RLX_ONNX_BOOL, 2, (int64_t[]){rows, cols}, keep);
    if (!mv)
        return false;
    val *zv = set_const(c, "", v->elem, 0, NULL, calloc(1, sizeof(double)));
    if (!zv)
        return false;
    return out1(c, v->elem,
                rlx_graph_where(c->g, NULL, node_of(c, mv), node_of(c, v), node_of(c, zv)));
}

/* ---- linear algebra ---- */

static bool e_matmul(ctx *c)
{
    val *a = float_in(c, 0), *b = float_in(c, 1);
    if (!a || !b)
        return false;
    rlx_node x = node_of(c, a), y = node_of(c, b);
    bool va = a->rank == 1, vb = b->rank == 1;
    if (va)
        x = reshape(c, x, 2, (int64_t[]){1, a->dims[0]});
    if (vb)
        y = reshape(c, y, 2, (int64_t[]){b->dims[0], 1});
    rlx_node z = rlx_graph_matmul(c->g, NULL, x, y, false, false);
    if (z == RLX_NODE_INVALID)
        return out1(c, a->elem, z);
    if (va || vb) {
        rlx_shape s = shape_of(c, z);
        int64_t d[MAXD];
        int r = 0;
        for (int i = 0; i < s.rank; i++) {
            if ((va && i == s.rank - 2) || (vb && i == s.rank - 1))
                continue;
            d[r++] = s.d[i].k;
        }
        z = reshape(c, z, r, d);
    }
    return out1(c, a->elem, z);
}

static bool e_gemm(ctx *c)
{
    val *a = float_in(c, 0), *b = float_in(c, 1);
    if (!a || !b)
        return false;
    float alpha = attr_f(c->cur, "alpha", 1.0f), beta = attr_f(c->cur, "beta", 1.0f);
    bool ta = attr_i(c->cur, "transA", 0) != 0, tb = attr_i(c->cur, "transB", 0) != 0;
    if (a->rank != 2 || b->rank != 2) {
        failf(c, RLX_ERR_FORMAT, "A and B must be 2-D");
        return false;
    }
    rlx_graph *g = c->g;
    rlx_node y = rlx_graph_matmul(g, NULL, node_of(c, a), node_of(c, b), ta, tb);
    if (alpha != 1.0f)
        y = rlx_graph_scale(g, NULL, y, alpha, 0.0f);
    val *cv = in_val(c, 2);
    if (cv && beta != 0.0f) {
        rlx_node cn = node_of(c, cv);
        if (beta != 1.0f)
            cn = rlx_graph_scale(g, NULL, cn, beta, 0.0f);
        y = rlx_graph_add(g, NULL, y, cn);
    }
    return out1(c, a->elem, y);
}

/* ---- convolution and pooling ---- */

typedef struct {
    int nsp;                                /* spatial dims: 1 or 2 */
    int64_t k[2], s[2], d[2], pb[2], pe[2]; /* kernel, stride, dilation, pads begin/end */
} window;

/* kernel/strides/dilations/pads/auto_pad of a conv or pool node over
 * input spatial dims `in` */
static bool read_window(ctx *c, int nsp, const int64_t *in, const int64_t *kernel, window *w,
                        bool ceil_mode)
{
    const rlx_onnx_node *n = c->cur;
    w->nsp = nsp;
    int64_t tmp[8];
    for (int i = 0; i < nsp; i++) {
        w->k[i] = kernel[i];
        w->s[i] = 1;
        w->d[i] = 1;
        w->pb[i] = w->pe[i] = 0;
    }
    int k;
    if ((k = attr_ints(n, "strides", tmp, 4)) >= 0) {
        if (k != nsp)
            goto bad;
        for (int i = 0; i < nsp; i++)
            w->s[i] = tmp[i];
    }
    if ((k = attr_ints(n, "dilations", tmp, 4)) >= 0) {
        if (k != nsp)
            goto bad;
        for (int i = 0; i < nsp; i++)
            w->d[i] = tmp[i];
    }
    if ((k = attr_ints(n, "pads", tmp, 8)) >= 0) {
        if (k != 2 * nsp)
            goto bad;
        for (int i = 0; i < nsp; i++) {
            w->pb[i] = tmp[i];
            w->pe[i] = tmp[nsp + i];
        }
    }
    for (int i = 0; i < nsp; i++)
        if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0 ||
            w->k[i] > 1 << 16 || w->s[i] > 1 << 16 || w->d[i] > 1 << 16 || w->pb[i] > 1 << 16 ||
            w->pe[i] > 1 << 16)
            goto bad;
    const char *ap = attr_s(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        for (int i = 0; i < nsp; i++) {
            int64_t out = (in[i] + w->s[i] - 1) / w->s[i];
            int64_t span = w->d[i] * (w->k[i] - 1) + 1;
            int64_t total = (out - 1) * w->s[i] + span - in[i];
            if (total < 0)
                total = 0;
            int64_t small = total / 2, big = total - small;
            bool upper = ap[5] == 'U';
            w->pb[i] = upper ? small : big;
            w->pe[i] = upper ? big : small;
        }
    } else if (strcmp(ap, "VALID") == 0) {
        for (int i = 0; i < nsp; i++)
            w->pb[i] = w->pe[i] = 0;
    } else if (strcmp(ap, "NOTSET") != 0) {
        unsupported(c, "auto_pad '%s'", ap);
        return false;
    }
    if (ceil_mode)
        for (int i = 0; i < nsp; i++) {
            /* extra end padding so that floor gives the ceil count, but no
             * window may start in the end padding alone */
            int64_t span = w->d[i] * (w->k[i] - 1) + 1;
            int64_t len = in[i] + w->pb[i] + w->pe[i] - span;
            if (len < 0)
                continue;
            int64_t out = (len + w->s[i] - 1) / w->s[i] + 1;
            if ((out - 1) * w->s[i] >= in[i] + w->pb[i])
                out--;
            int64_t need = (out - 1) * w->s[i] + span - (in[i] + w->pb[i] + w->pe[i]);
            if (need > 0)
                w->pe[i] += need;
        }
    return true;
bad:
    failf(c, RLX_ERR_FORMAT, "bad strides, dilations or pads");
    return false;
}

/* pad explicitly where the IR's symmetric padding cannot express it;
 * returns the symmetric pads left for the op */
static rlx_node pre_pad(ctx *c, rlx_node x, window *w, float value, int sym[2])
{
    int rank = shape_of(c, x).rank;
    int64_t before[MAXD] = {0}, after[MAXD] = {0};
    bool need = false;
    for (int i = 0; i < w->nsp; i++) {
        if (w->pb[i] == w->pe[i]) {
            sym[i] = (int)w->pb[i];
            continue;
        }
        int64_t m = w->pb[i] < w->pe[i] ? w->pb[i] : w->pe[i];
        sym[i] = (int)m;
        before[rank - w->nsp + i] = w->pb[i] - m;
        after[rank - w->nsp + i] = w->pe[i] - m;
        need = true;
    }
    if (need)
        x = rlx_graph_pad(c->g, NULL, x, before, after, value);
    return x;
}

/* A conv's weight as the PARAM in its stored dtype where that is F16 or
 * BF16: the conv kernels widen such weights as they read them, where a cast
 * node would write an F32 copy of every weight on every run (ISNet's 84 MiB
 * of float16 weights: 10% of its CPU time). The cast stays for any other use
 * of the weight. */
static rlx_node conv_weight(ctx *c, val *v)
{
    rlx_node n = node_of(c, v);
    if (n == RLX_NODE_INVALID || v->kind != V_CONST || !v->init)
        return n;
    for (int32_t i = 0; i < c->n_weights; i++)
        if (c->weights[i].t == v->init && c->weights[i].node == n)
            return c->weights[i].raw;
    return n;
}

static bool e_conv(ctx *c)
{
    val *xv = float_in(c, 0), *wv = float_in(c, 1);
    if (!xv || !wv)
        return false;
    int nsp = xv->rank - 2;
    if (nsp < 1 || nsp > 2 || wv->rank != xv->rank) {
        unsupported(c, "%d-D convolutions", nsp);
        return false;
    }
    int64_t kernel[2] = {wv->dims[2], nsp == 2 ? wv->dims[3] : 1}, ks[4];
    int k = attr_ints(c->cur, "kernel_shape", ks, 4);
    if (k >= 0 && (k != nsp || ks[0] != kernel[0] || (nsp == 2 && ks[1] != kernel[1]))) {
        failf(c, RLX_ERR_FORMAT, "kernel_shape disagrees with the weight");
        return false;
    }
    window w;
    if (!read_window(c, nsp, xv->dims + 2, kernel, &w, false))
        return false;
    int64_t group = attr_i(c->cur, "group", 1);
    if (group < 1 || xv->dims[1] % group || wv->dims[0] % group ||
        wv->dims[1] * group != xv->dims[1]) {
        failf(c, RLX_ERR_FORMAT, "channels do not match the groups");
        return false;
    }
    rlx_node x = node_of(c, xv), wn = conv_weight(c, wv);
    val *bv = in_val(c, 2);
    rlx_node b = bv ? node_of(c, bv) : RLX_NODE_INVALID;
    int sym[2] = {0, 0};
    x = pre_pad(c, x, &w, 0.0f, sym);
    rlx_node y;
    if (nsp == 1)
        y = rlx_graph_conv1d(c->g, NULL, x, wn, b, (int)w.s[0], sym[0], (int)w.d[0], (int)group);
    else
        y = rlx_graph_conv2d(c->g, NULL, x, wn, b, (int[]){(int)w.s[0], (int)w.s[1]}, sym,
                             (int[]){(int)w.d[0], (int)w.d[1]}, (int)group);
    return out1(c, xv->elem, y);
}

static bool e_conv_transpose(ctx *c)
{
    val *xv = float_in(c, 0), *wv = float_in(c, 1);
    if (!xv || !wv)
        return false;
    int nsp = xv->rank - 2;
    if (nsp < 1 || nsp > 2 || wv->rank != xv->rank) {
        unsupported(c, "%d-D transposed convolutions", nsp);
        return false;
    }
    const rlx_onnx_node *n = c->cur;
    int64_t kernel[2] = {wv->dims[2], nsp == 2 ? wv->dims[3] : 1};
    int64_t in2[2] = {xv->dims[2], nsp == 2 ? xv->dims[3] : 1};
    window w;
    if (!read_window(c, nsp, in2, kernel, &w, false))
        return false;
    for (int i = 0; i < nsp; i++)
        if (w.d[i] != 1) {
            unsupported(c, "dilations other than 1");
            return false;
        }
    int64_t group = attr_i(n, "group", 1);
    if (group < 1 || xv->dims[1] != wv->dims[0] || xv->dims[1] % group) {
        failf(c, RLX_ERR_FORMAT, "channels do not match the weight");
        return false;
    }
    int64_t op[2] = {0, 0}, tmp[4];
    int k = attr_ints(n, "output_padding", tmp, 4);
    if (k >= 0) {
        if (k != nsp) {
            failf(c, RLX_ERR_FORMAT, "bad output_padding");
            return false;
        }
        for (int i = 0; i < nsp; i++)
            op[i] = tmp[i];
    }
    /* full output (no pads), then crop: out = (in-1)*s + k + out_pad */
    int64_t full[2];
    for (int i = 0; i < nsp; i++)
        full[i] = (in2[i] - 1) * w.s[i] + w.k[i] + op[i];
    const char *ap = attr_s(n, "auto_pad", "NOTSET");
    int64_t os[4];
    int ko = attr_ints(n, "output_shape", os, 4);
    if (ko >= 0 || strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        for (int i = 0; i < nsp; i++) {
            int64_t want = ko >= 0 ? os[ko - nsp + i] : in2[i] * w.s[i];
            int64_t total = full[i] - want;
            if (ko >= 0 && ko != nsp && ko != nsp + 2) {
                failf(c, RLX_ERR_FORMAT, "bad output_shape");
                return false;
            }
            if (total < 0) {
                unsupported(c, "output shapes larger than the full result");
                return false;
            }
            bool lower = strcmp(ap, "SAME_LOWER") == 0;
            w.pb[i] = lower ? total - total / 2 : total / 2;
            w.pe[i] = total - w.pb[i];
        }
    }
    rlx_node x = node_of(c, xv), wn = node_of(c, wv);
    if (nsp == 1) {
        x = reshape(c, x, 4, (int64_t[]){xv->dims[0], xv->dims[1], 1, xv->dims[2]});
        wn = reshape(c, wn, 4, (int64_t[]){wv->dims[0], wv->dims[1], 1, wv->dims[2]});
    }
    val *bv = in_val(c, 2);
    rlx_node b = bv ? node_of(c, bv) : RLX_NODE_INVALID;
    int st2[2] = {nsp == 2 ? (int)w.s[0] : 1, nsp == 2 ? (int)w.s[1] : (int)w.s[0]};
    int opd[2] = {nsp == 2 ? (int)op[0] : 0, nsp == 2 ? (int)op[1] : (int)op[0]};
    /* the IR's out_pad must be smaller than the stride; larger ones are
     * added as zero padding at the end, where bias alone lands */
    int extra[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        if (opd[i] >= st2[i]) {
            extra[i] = opd[i];
            opd[i] = 0;
        }
    rlx_node y =
        rlx_graph_conv_transpose2d(c->g, NULL, x, wn, extra[0] || extra[1] ? RLX_NODE_INVALID : b,
                                   st2, (int[]){0, 0}, opd, (int)group);
    if (extra[0] || extra[1]) {
        int64_t before[MAXD] = {0}, after[MAXD] = {0};
        after[2] = extra[0];
        after[3] = extra[1];
        y = rlx_graph_pad(c->g, NULL, y, before, after, 0.0f);
        if (b != RLX_NODE_INVALID)
            y = rlx_graph_add(c->g, NULL, y,
                              reshape(c, b, 3, (int64_t[]){wv->dims[1] * group, 1, 1}));
    }
    for (int i = 0; i < nsp; i++) {
        int ax = nsp == 2 ? 2 + i : 3;
        if (w.pb[i] || w.pe[i]) {
            int64_t len = full[i] - w.pb[i] - w.pe[i];
            if (len <= 0) {
                failf(c, RLX_ERR_FORMAT, "pads leave nothing");
                return false;
            }
            y = rlx_graph_slice(c->g, NULL, y, ax, rlx_dim_const(w.pb[i]), rlx_dim_const(len));
        }
    }
    if (nsp == 1) {
        rlx_shape s = shape_of(c, y);
        y = reshape(c, y, 3, (int64_t[]){s.d[0].k, s.d[1].k, s.d[3].k});
    } else
        y = rlx_graph_copy(c->g, NULL, y);
    return out1(c, xv->elem, y);
}

static bool emit_pool(ctx *c, rlx_pool_mode mode)
{
    val *xv = float_in(c, 0);
    if (!xv)
        return false;
    const rlx_onnx_node *n = c->cur;
    if (!extra_outputs_unused(c, 1))
        return false;
    int nsp = xv->rank - 2;
    if (nsp < 1 || nsp > 2) {
        unsupported(c, "%d-D pooling", nsp);
        return false;
    }
    int64_t kernel[4];
    if (attr_ints(n, "kernel_shape", kernel, 4) != nsp) {
        failf(c, RLX_ERR_FORMAT, "kernel_shape must have %d entries", nsp);
        return false;
    }
    bool ceil_mode = attr_i(n, "ceil_mode", 0) != 0;
    int64_t in2[2] = {xv->dims[2], nsp == 2 ? xv->dims[3] : 1};
    window w;
    if (!read_window(c, nsp, in2, kernel, &w, ceil_mode))
        return false;
    for (int i = 0; i < nsp; i++)
        if (w.d[i] != 1) {
            unsupported(c, "dilations other than 1");
            return false;
        }
    bool count_pad = attr_i(n, "count_include_pad", 0) != 0;
    rlx_node x = node_of(c, xv);
    if (nsp == 1) {
        x = reshape(c, x, 4, (int64_t[]){xv->dims[0], xv->dims[1], 1, xv->dims[2]});
        w = (window){.nsp = 2,
                     .k = {1, w.k[0]},
                     .s = {1, w.s[0]},
                     .d = {1, 1},
                     .pb = {0, w.pb[0]},
                     .pe = {0, w.pe[0]}};
    }
    bool padded = false;
    for (int i = 0; i < 2; i++)
        padded |= w.pb[i] || w.pe[i];
    /* all padding explicit (max: -inf-like; avg: zeros), so the IR's pool
     * sees none and its divisor is the kernel area */
    int64_t before[MAXD] = {0}, after[MAXD] = {0};
    for (int i = 0; i < 2; i++) {
        before[2 + i] = w.pb[i];
        after[2 + i] = w.pe[i];
    }
    if (padded)
        x = rlx_graph_pad(c->g, NULL, x, before, after, mode == RLX_POOL_MAX ? -FLT_MAX : 0.0f);
    int kk[2] = {(int)w.k[0], (int)w.k[1]}, ss[2] = {(int)w.s[0], (int)w.s[1]}, zero[2] = {0, 0};
    rlx_node y = rlx_graph_pool2d(c->g, NULL, x, mode, kk, ss, zero);
    if (y == RLX_NODE_INVALID)
        return out1(c, xv->elem, y);
    rlx_shape ys = shape_of(c, y);
    int64_t oh = ys.d[2].k, ow = ys.d[3].k;
    if (mode == RLX_POOL_AVG && padded) {
        /* divisor per output position: the window's cells inside the
         * input (and, with count_include_pad, inside the pads given, but
         * never the extra ceil_mode cells) */
        int64_t pe_given[2] = {0, 0}, tmp[8];
        int k = attr_ints(n, "pads", tmp, 8);
        if (k == 2 * nsp)
            for (int i = 0; i < nsp; i++)
                pe_given[nsp == 1 ? 1 : i] = tmp[nsp + i];
        if (strncmp(attr_s(n, "auto_pad", "NOTSET"), "SAME", 4) == 0 && count_pad) {
            unsupported(c, "count_include_pad with auto_pad SAME");
            return false;
        }
        int64_t inl[2] = {nsp == 1 ? 1 : xv->dims[2], xv->dims[nsp == 1 ? 2 : 3]};
        double *f = alloc_d(oh * ow);
        if (!f)
            return false;
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
                int64_t cnt[2];
                int64_t pos[2] = {i, j};
                for (int a = 0; a < 2; a++) {
                    int64_t s0 = pos[a] * w.s[a] - w.pb[a], e0 = s0 + w.k[a];
                    int64_t lo = count_pad ? -w.pb[a] : 0;
                    int64_t hi = count_pad ? inl[a] + pe_given[a] : inl[a];
                    int64_t s1 = s0 > lo ? s0 : lo, e1 = e0 < hi ? e0 : hi;
                    cnt[a] = e1 > s1 ? e1 - s1 : 1;
                }
                f[i * ow + j] = (double)(w.k[0] * w.k[1]) / (double)(cnt[0] * cnt[1]);
            }
        val *fv = set_const(c, "", RLX_ONNX_FLOAT, 2, (int64_t[]){oh, ow}, f);
        if (!fv)
            return false;
        y = rlx_graph_mul(c->g, NULL, y, node_of(c, fv));
    }
    if (nsp == 1)
        y = reshape(c, y, 3, (int64_t[]){xv->dims[0], xv->dims[1], ow});
    return out1(c, xv->elem, y);
}

static bool e_max_pool(ctx *c)
{
    if (attr_i(c->cur, "storage_order", 0) != 0) {
        unsupported(c, "storage_order 1");
        return false;
    }
    return emit_pool(c, RLX_POOL_MAX);
}

static bool e_avg_pool(ctx *c)
{
    return emit_pool(c, RLX_POOL_AVG);
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
    val *v = float_in(c, 0);
    if (!v)
        return false;
    const rlx_onnx_node *n = c->cur;
    int64_t axes[MAXD + 1];
    int na;
    bool axes_input = (strcmp(n->op_type, "ReduceSum") == 0 && c->opset >= 13) || c->opset >= 18;
    if (axes_input) {
        if (in_val(c, 1)) {
            na = const_ints(c, 1, axes, MAXD + 1);
            if (na < 0 || na > MAXD) {
                unsupported(c, "axes that are not known at import time");
                return false;
            }
        } else
            na = -1;
    } else {
        na = attr_ints(n, "axes", axes, MAXD + 1);
        if (na > MAXD) {
            failf(c, RLX_ERR_FORMAT, "too many axes");
            return false;
        }
    }
    bool keep = attr_i(n, "keepdims", 1) != 0;
    bool red[MAXD] = {false};
    if (na <= 0) {
        if (na == 0 && attr_i(n, "noop_with_empty_axes", 0)) {
            return out1(c, v->elem, rlx_graph_copy(c->g, NULL, node_of(c, v)));
        }
        for (int i = 0; i < v->rank; i++)
            red[i] = true;
    } else
        for (int i = 0; i < na; i++) {
            bool ok = true;
            int a = norm_axis(axes[i], v->rank, &ok);
            if (!ok) {
                failf(c, RLX_ERR_FORMAT, "axis %lld out of range", (long long)axes[i]);
                return false;
            }
            red[a] = true;
        }
    for (int i = 0; i < v->rank; i++)
        if (red[i] && v->dims[i] == 0) {
            unsupported(c, "reductions over empty dims");
            return false;
        }
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, v), y;
    if (v->rank == 0) {
        x = reshape(c, x, 1, (int64_t[]){1});
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
        return out1(c, v->elem, y);
    int64_t od[MAXD];
    int orank = 0;
    for (int i = 0; i < v->rank; i++) {
        if (!red[i])
            od[orank++] = v->dims[i];
        else if (keep)
            od[orank++] = 1;
    }
    return out1(c, v->elem, reshape(c, y, orank, od));
}

#define REDUCE(fname, kind)          \
    static bool fname(ctx *c)        \
    {                                \
        return emit_reduce(c, kind); \
    }
REDUCE(e_reduce_sum, R_SUM)
REDUCE(e_reduce_mean, R_MEAN)
REDUCE(e_reduce_max, R_MAX)
REDUCE(e_reduce_min, R_MIN)
REDUCE(e_reduce_l1, R_L1)
REDUCE(e_reduce_l2, R_L2)
REDUCE(e_reduce_sumsq, R_SUMSQ)
REDUCE(e_reduce_logsum, R_LOGSUM)
REDUCE(e_reduce_logsumexp, R_LOGSUMEXP)

static bool emit_global_pool(ctx *c, rlx_op op)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    if (v->rank < 3) {
        failf(c, RLX_ERR_FORMAT, "the input needs a spatial dim");
        return false;
    }
    int64_t sp = 1;
    for (int i = 2; i < v->rank; i++)
        sp *= v->dims[i];
    rlx_node x = reshape(c, node_of(c, v), 3, (int64_t[]){v->dims[0], v->dims[1], sp});
    x = rlx_graph_reduce(c->g, NULL, op, x, 2, true);
    int64_t od[MAXD];
    for (int i = 0; i < v->rank; i++)
        od[i] = i < 2 ? v->dims[i] : 1;
    return out1(c, v->elem, reshape(c, x, v->rank, od));
}

static bool e_global_avg_pool(ctx *c)
{
    return emit_global_pool(c, RLX_OP_REDUCE_MEAN);
}
static bool e_global_max_pool(ctx *c)
{
    return emit_global_pool(c, RLX_OP_REDUCE_MAX);
}

static bool emit_arg(ctx *c, bool is_min)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    if (attr_i(c->cur, "select_last_index", 0)) {
        unsupported(c, "select_last_index 1");
        return false;
    }
    bool ok = true;
    int axis = norm_axis(attr_i(c->cur, "axis", 0), v->rank, &ok);
    if (!ok) {
        failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    bool keep = attr_i(c->cur, "keepdims", 1) != 0;
    rlx_node x = node_of(c, v);
    if (is_min)
        x = rlx_graph_neg(c->g, NULL, x);
    rlx_node y = rlx_graph_argmax(c->g, NULL, x, axis);
    int64_t od[MAXD];
    int r = 0;
    for (int i = 0; i < v->rank; i++)
        if (i != axis || keep)
            od[r++] = i == axis ? 1 : v->dims[i];
    return out1(c, RLX_ONNX_INT64, reshape(c, y, r, od));
}

static bool e_argmax(ctx *c)
{
    return emit_arg(c, false);
}
static bool e_argmin(ctx *c)
{
    return emit_arg(c, true);
}

static bool e_topk(ctx *c)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    int64_t k;
    if (c->opset < 10)
        k = attr_i(c->cur, "k", -1);
    else if (const_ints(c, 1, &k, 1) != 1) {
        unsupported(c, "a k that is not known at import time");
        return false;
    }
    bool ok = true;
    int axis = norm_axis(attr_i(c->cur, "axis", -1), v->rank, &ok);
    if (!ok || k < 1 || k > v->dims[axis]) {
        unsupported(c, "this k or axis");
        return false;
    }
    if (attr_i(c->cur, "sorted", 1) == 0) {
        unsupported(c, "sorted 0");
        return false;
    }
    bool largest = attr_i(c->cur, "largest", 1) != 0;
    rlx_node x = node_of(c, v);
    rlx_node vals = rlx_graph_topk(c->g, NULL, x, axis, (int)k, largest, false);
    if (!set_node(c, c->cur->outputs[0], v->elem, vals))
        return false;
    if (c->cur->n_outputs > 1 && c->cur->outputs[1][0]) {
        rlx_node idx = rlx_graph_topk(c->g, NULL, x, axis, (int)k, largest, true);
        if (!set_node(c, c->cur->outputs[1], RLX_ONNX_INT64, idx))
            return false;
    }
    return true;
}

/* ---- normalization ---- */

/* x moved so that `axis` is last (perm written), or x itself */
static rlx_node axis_last(ctx *c, rlx_node x, int rank, int axis, int *perm)
{
    for (int i = 0; i < rank; i++)
        perm[i] = i;
    if (axis == rank - 1)
        return x;
    perm[axis] = rank - 1;
    perm[rank - 1] = axis;
    return rlx_graph_permute(c->g, NULL, x, perm);
}

static bool emit_softmax(ctx *c, bool log)
{
    val *v = float_in(c, 0);
    if (!v)
        return false;
    rlx_graph *g = c->g;
    int64_t def = c->opset >= 13 ? -1 : 1;
    bool ok = true;
    int rank = v->rank ? v->rank : 1;
    int axis = norm_axis(attr_i(c->cur, "axis", def), rank, &ok);
    if (!ok) {
        failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    rlx_node x = node_of(c, v);
    int perm[MAXD];
    rlx_node t;
    bool coerce = c->opset < 13;
    if (coerce) {
        int64_t d[2] = {1, 1};
        for (int i = 0; i < v->rank; i++)
            d[i < axis ? 0 : 1] *= v->dims[i];
        t = reshape(c, x, 2, d);
    } else {
        if (v->rank == 0)
            x = reshape(c, x, 1, (int64_t[]){1});
        t = axis_last(c, x, rank, axis, perm);
    }
    rlx_node y;
    if (log) {
        rlx_node mx = rlx_graph_reduce(g, NULL, RLX_OP_REDUCE_MAX, t, -1, true);
        rlx_node s = rlx_graph_sub(g, NULL, t, mx);
        rlx_node lse = rlx_graph_unary(
            g, NULL, RLX_OP_LOG,
            rlx_graph_reduce(g, NULL, RLX_OP_REDUCE_SUM, rlx_graph_exp(g, NULL, s), -1, true));
        y = rlx_graph_sub(g, NULL, s, lse);
    } else
        y = rlx_graph_softmax(g, NULL, t, RLX_NODE_INVALID, 0.0f);
    if (coerce)
        y = reshape(c, y, v->rank, v->dims);
    else {
        if (axis != rank - 1)
            y = rlx_graph_permute(g, NULL, y, perm);
        if (v->rank == 0)
            y = reshape(c, y, 0, NULL);
    }
    return out1(c, v->elem, y);
}

static bool e_softmax(ctx *c)
{
    return emit_softmax(c, false);
}
static bool e_log_softmax(ctx *c)
{
    return emit_softmax(c, true);
}

/* a per-channel [C] tensor as [C, 1, ...] to broadcast against NC... */
static rlx_node per_channel(ctx *c, val *v, int rank)
{
    int64_t d[MAXD];
    d[0] = vnumel(v);
    for (int i = 1; i < rank - 1; i++)
        d[i] = 1;
    return reshape(c, node_of(c, v), rank - 1, d);
}

static bool e_batch_norm(ctx *c)
{
    val *xv = float_in(c, 0), *sv = float_in(c, 1), *bv = float_in(c, 2), *mv = float_in(c, 3),
        *vv = float_in(c, 4);
    if (!xv || !sv || !bv || !mv || !vv)
        return false;
    if (attr_i(c->cur, "training_mode", 0)) {
        unsupported(c, "training_mode");
        return false;
    }
    if (!extra_outputs_unused(c, 1))
        return false;
    if (xv->rank < 2) {
        failf(c, RLX_ERR_FORMAT, "the input needs a channel dim");
        return false;
    }
    float eps = attr_f(c->cur, "epsilon", 1e-5f);
    rlx_graph *g = c->g;
    int r = xv->rank;
    rlx_node x = node_of(c, xv);
    rlx_node inv = rlx_graph_div(
        g, NULL, per_channel(c, sv, r),
        rlx_graph_sqrt(g, NULL, rlx_graph_scale(g, NULL, per_channel(c, vv, r), 1.0f, eps)));
    rlx_node y = rlx_graph_mul(g, NULL, rlx_graph_sub(g, NULL, x, per_channel(c, mv, r)), inv);
    return out1(c, xv->elem, rlx_graph_add(g, NULL, y, per_channel(c, bv, r)));
}

static bool e_instance_norm(ctx *c)
{
    val *xv = float_in(c, 0), *sv = float_in(c, 1), *bv = float_in(c, 2);
    if (!xv || !sv || !bv)
        return false;
    if (xv->rank < 3) {
        failf(c, RLX_ERR_FORMAT, "the input needs a spatial dim");
        return false;
    }
    float eps = attr_f(c->cur, "epsilon", 1e-5f);
    rlx_node y = rlx_graph_group_norm(c->g, NULL, node_of(c, xv), (int)xv->dims[1], node_of(c, sv),
                                      node_of(c, bv), eps);
    return out1(c, xv->elem, y);
}

static bool e_layer_norm(ctx *c)
{
    val *xv = float_in(c, 0);
    if (!xv)
        return false;
    if (!extra_outputs_unused(c, 3))
        return false;
    val *sv = in_val(c, 1), *bv = in_val(c, 2);
    bool ok = true;
    int axis = norm_axis(attr_i(c->cur, "axis", -1), xv->rank, &ok);
    if (!ok || !sv) {
        failf(c, RLX_ERR_FORMAT, "bad axis or no scale");
        return false;
    }
    float eps = attr_f(c->cur, "epsilon", 1e-5f);
    rlx_graph *g = c->g;
    rlx_node x = node_of(c, xv);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < xv->rank; i++) {
        if (i < axis)
            outer *= xv->dims[i];
        else
            inner *= xv->dims[i];
    }
    rlx_node t = axis == xv->rank - 1 ? x : reshape(c, x, 2, (int64_t[]){outer, inner});
    bool direct = axis == xv->rank - 1 && sv->rank <= 1 && (!bv || bv->rank <= 1) &&
                  vnumel(sv) == inner && (!bv || vnumel(bv) == inner);
    rlx_node y;
    if (direct) {
        y = rlx_graph_layer_norm(g, NULL, t, node_of(c, sv), bv ? node_of(c, bv) : RLX_NODE_INVALID,
                                 eps);
    } else {
        y = rlx_graph_layer_norm(g, NULL, t, RLX_NODE_INVALID, RLX_NODE_INVALID, eps);
        y = reshape(c, y, xv->rank, xv->dims);
        y = rlx_graph_mul(g, NULL, y, node_of(c, sv));
        if (bv)
            y = rlx_graph_add(g, NULL, y, node_of(c, bv));
    }
    /* the optional Mean and InvStdDev outputs: x's shape with the
     * normalized dims 1 */
    bool want_mean = c->cur->n_outputs > 1 && c->cur->outputs[1][0];
    bool want_inv = c->cur->n_outputs > 2 && c->cur->outputs[2][0];
    if (want_mean || want_inv) {
        int64_t sd[MAXD];
        for (int i = 0; i < xv->rank; i++)
            sd[i] = i < axis ? xv->dims[i] : 1;
        rlx_node t2 = reshape(c, x, 2, (int64_t[]){outer, inner});
        rlx_node mean = rlx_graph_reduce(g, NULL, RLX_OP_REDUCE_MEAN, t2, 1, true);
        if (want_mean && !set_node(c, c->cur->outputs[1], xv->elem, reshape(c, mean, xv->rank, sd)))
            return false;
        if (want_inv) {
            rlx_node d = rlx_graph_unary(g, NULL, RLX_OP_SQUARE, rlx_graph_sub(g, NULL, t2, mean));
            rlx_node var = rlx_graph_reduce(g, NULL, RLX_OP_REDUCE_MEAN, d, 1, true);
            rlx_node inv =
                rlx_graph_unary(g, NULL, RLX_OP_RSQRT, rlx_graph_scale(g, NULL, var, 1.0f, eps));
            if (!set_node(c, c->cur->outputs[2], xv->elem, reshape(c, inv, xv->rank, sd)))
                return false;
        }
    }
    return out1(c, xv->elem, y);
}

/* ---- resize ---- */

/* what the ONNX mode reads for output index `o` along one axis: the two
 * source indices and the second's weight */
typedef struct {
    int64_t i0, i1;
    double w;
} tap;

/* ONNX's source coordinate of output index o along one axis. Its
 * formulas use the resized length in * scale, which is not an integer
 * when the scale was given rather than the size. */
static bool onnx_coord(const char *ctm, int64_t o, int64_t in, double scale, double *x)
{
    double len = (double)in * scale;
    if (strcmp(ctm, "half_pixel") == 0)
        *x = ((double)o + 0.5) / scale - 0.5;
    else if (strcmp(ctm, "pytorch_half_pixel") == 0)
        *x = len > 1 ? ((double)o + 0.5) / scale - 0.5 : 0.0;
    else if (strcmp(ctm, "align_corners") == 0)
        *x = len > 1 ? (double)o * (double)(in - 1) / (len - 1) : 0.0;
    else if (strcmp(ctm, "asymmetric") == 0)
        *x = (double)o / scale;
    else
        return false;
    return true;
}

static tap linear_tap(double x, int64_t in)
{
    if (x < 0)
        x = 0;
    int64_t i0 = (int64_t)floor(x);
    if (i0 >= in - 1)
        return (tap){in - 1, in - 1, 0.0};
    return (tap){i0, i0 + 1, x - (double)i0};
}

static int64_t nearest_idx(const char *nm, double x, int64_t in)
{
    double r;
    if (strcmp(nm, "floor") == 0)
        r = floor(x);
    else if (strcmp(nm, "ceil") == 0)
        r = ceil(x);
    else if (strcmp(nm, "round_prefer_ceil") == 0)
        r = floor(x + 0.5);
    else /* round_prefer_floor */
        r = ceil(x - 0.5);
    int64_t i = (int64_t)r;
    return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* Does the IR's resize (PyTorch semantics) read the same taps as the ONNX
 * attributes for this axis? */
static bool same_taps(const char *mode, const char *ctm, const char *nm, int64_t in, int64_t out,
                      double scale, bool align)
{
    for (int64_t o = 0; o < out; o++) {
        double x;
        if (!onnx_coord(ctm, o, in, scale, &x))
            return false;
        if (mode[0] == 'n') {
            int64_t a = nearest_idx(nm, x, in);
            /* PyTorch nearest: floor(o * in / out) */
            int64_t b = (int64_t)floor((double)o * (double)in / (double)out);
            if (b > in - 1)
                b = in - 1;
            if (a != b)
                return false;
        } else {
            tap a = linear_tap(x, in);
            double px = align ? (out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0)
                              : ((double)o + 0.5) * (double)in / (double)out - 0.5;
            tap b = linear_tap(px, in);
            /* compare what is read, weights included */
            double wa0 = 1 - a.w, wb0 = 1 - b.w;
            bool same = (a.i0 == b.i0 && a.i1 == b.i1 && fabs(a.w - b.w) < 1e-6) ||
                        (a.i0 == a.i1 && b.i0 == b.i1 && a.i0 == b.i0) ||
                        (fabs(a.w) < 1e-6 && fabs(b.w) < 1e-6 && a.i0 == b.i0) ||
                        (fabs(wa0) < 1e-6 && fabs(wb0) < 1e-6 && a.i1 == b.i1);
            if (!same)
                return false;
        }
    }
    return true;
}

static bool e_resize(ctx *c)
{
    const rlx_onnx_node *n = c->cur;
    bool upsample = strcmp(n->op_type, "Upsample") == 0;
    val *v = float_in(c, 0);
    if (!v)
        return false;
    const char *mode = attr_s(n, "mode", "nearest");
    const char *ctm = upsample || c->opset < 11
                          ? "asymmetric"
                          : attr_s(n, "coordinate_transformation_mode", "half_pixel");
    const char *nm =
        upsample || c->opset < 11 ? "floor" : attr_s(n, "nearest_mode", "round_prefer_floor");
    if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0 &&
        strcmp(mode, "bilinear") != 0) {
        unsupported(c, "mode '%s'", mode);
        return false;
    }
    bool linear = mode[0] != 'n';
    if (strcmp(ctm, "tf_crop_and_resize") == 0 || strcmp(ctm, "tf_half_pixel_for_nn") == 0) {
        unsupported(c, "coordinate_transformation_mode '%s'", ctm);
        return false;
    }
    if (attr_i(n, "antialias", 0) || attr(n, "axes")) {
        unsupported(c, "antialias or axes");
        return false;
    }
    double scales[MAXD];
    int64_t out[MAXD];
    int r = v->rank;
    int64_t tmp[MAXD + 1];
    bool have = false;
    if (upsample && c->opset < 9) {
        const rlx_onnx_attr *a = attr(n, "scales");
        if (a && a->type == RLX_ONNX_ATTR_FLOATS && a->n_floats == r) {
            for (int i = 0; i < r; i++)
                scales[i] = a->floats[i];
            have = true;
        }
    } else {
        /* Upsample 9: (X, scales); Resize 10: (X, scales); 11+: (X, roi, scales, sizes) */
        int si = upsample || c->opset < 11 ? 1 : 2, zi = upsample || c->opset < 11 ? -1 : 3;
        val *sz = zi >= 0 ? in_val(c, zi) : NULL;
        if (sz && vnumel(sz) > 0) {
            int k = const_ints(c, zi, tmp, MAXD + 1);
            if (k != r) {
                unsupported(c, "sizes that are not known at import time");
                return false;
            }
            for (int i = 0; i < r; i++) {
                out[i] = tmp[i];
                scales[i] = (double)tmp[i] / (double)v->dims[i];
            }
            have = true;
        } else {
            val *sc = in_val(c, si);
            double *d = sc && sc->kind == V_CONST ? cdata(c, sc) : NULL;
            if (d && vnumel(sc) == r) {
                for (int i = 0; i < r; i++)
                    scales[i] = d[i];
                have = true;
            }
        }
        if (have && !(sz && vnumel(sz) > 0))
            for (int i = 0; i < r; i++)
                out[i] = (int64_t)floor((double)v->dims[i] * scales[i]);
    }
    if (!have) {
        unsupported(c, "scales or sizes that are not known at import time");
        return false;
    }
    if (upsample && c->opset < 9)
        for (int i = 0; i < r; i++)
            out[i] = (int64_t)floor((double)v->dims[i] * scales[i]);
    if (r < 2) {
        unsupported(c, "inputs of fewer than 2 dims");
        return false;
    }
    for (int i = 0; i < r - 2; i++)
        if (out[i] != v->dims[i]) {
            unsupported(c, "resizing dims other than the last two");
            return false;
        }
    for (int i = r - 2; i < r; i++)
        if (out[i] < 1 || out[i] > (1 << 20)) {
            failf(c, RLX_ERR_FORMAT, "output size %lld out of range", (long long)out[i]);
            return false;
        }
    /* pick the IR mode whose taps equal ONNX's on both axes */
    bool align = false;
    bool ok = true;
    for (int i = r - 2; i < r && ok; i++)
        ok = same_taps(mode, ctm, nm, v->dims[i], out[i], scales[i], false);
    if (!ok && linear) {
        ok = true;
        align = true;
        for (int i = r - 2; i < r && ok; i++)
            ok = same_taps(mode, ctm, nm, v->dims[i], out[i], scales[i], true);
    }
    if (!ok) {
        unsupported(c, "mode '%s' with coordinate_transformation_mode '%s'%s%s at these sizes",
                    mode, ctm, linear ? "" : " and nearest_mode ", linear ? "" : nm);
        return false;
    }
    rlx_node y = rlx_graph_resize(c->g, NULL, node_of(c, v), out[r - 2], out[r - 1],
                                  linear ? RLX_RESIZE_BILINEAR : RLX_RESIZE_NEAREST, align);
    return out1(c, v->elem, y);
}

/* ---- the table ---- */

static const op_entry ops[] = {
    {"Abs", e_abs},
    {"Add", e_add},
    {"And", e_and},
    {"ArgMax", e_argmax},
    {"ArgMin", e_argmin},
    {"AveragePool", e_avg_pool},
    {"BatchNormalization", e_batch_norm},
    {"Cast", e_cast},
    {"CastLike", e_cast_like},
    {"Clip", e_clip},
    {"Concat", e_concat},
    {"Constant", e_constant},
    {"ConstantOfShape", e_constant_of_shape},
    {"Conv", e_conv},
    {"ConvTranspose", e_conv_transpose},
    {"Cos", e_cos},
    {"DepthToSpace", e_depth_to_space},
    {"Div", e_div},
    {"Dropout", e_identity},
    {"Elu", e_elu},
    {"Equal", e_equal},
    {"Erf", e_erf},
    {"Exp", e_exp},
    {"Expand", e_expand},
    {"Flatten", e_flatten},
    {"Gather", e_gather},
    {"Gemm", e_gemm},
    {"GlobalAveragePool", e_global_avg_pool},
    {"GlobalMaxPool", e_global_max_pool},
    {"Greater", e_greater},
    {"GreaterOrEqual", e_greater_eq},
    {"HardSigmoid", e_hard_sigmoid},
    {"HardSwish", e_hard_swish},
    {"Identity", e_identity},
    {"InstanceNormalization", e_instance_norm},
    {"LayerNormalization", e_layer_norm},
    {"LeakyRelu", e_leaky_relu},
    {"Less", e_less},
    {"LessOrEqual", e_less_eq},
    {"Log", e_log},
    {"LogSoftmax", e_log_softmax},
    {"MatMul", e_matmul},
    {"Max", e_max},
    {"MaxPool", e_max_pool},
    {"Mean", e_mean},
    {"Min", e_min},
    {"Mul", e_mul},
    {"Neg", e_neg},
    {"Not", e_not},
    {"Or", e_or},
    {"PRelu", e_prelu},
    {"Pad", e_pad},
    {"Pow", e_pow},
    {"Range", e_range},
    {"Reciprocal", e_reciprocal},
    {"ReduceL1", e_reduce_l1},
    {"ReduceL2", e_reduce_l2},
    {"ReduceLogSum", e_reduce_logsum},
    {"ReduceLogSumExp", e_reduce_logsumexp},
    {"ReduceMax", e_reduce_max},
    {"ReduceMean", e_reduce_mean},
    {"ReduceMin", e_reduce_min},
    {"ReduceSum", e_reduce_sum},
    {"ReduceSumSquare", e_reduce_sumsq},
    {"Relu", e_relu},
    {"Reshape", e_reshape},
    {"Resize", e_resize},
    {"Selu", e_selu},
    {"Shape", e_shape},
    {"Sigmoid", e_sigmoid},
    {"Sin", e_sin},
    {"Size", e_size},
    {"Slice", e_slice},
    {"Softmax", e_softmax},
    {"Softplus", e_softplus},
    {"Softsign", e_softsign},
    {"SpaceToDepth", e_space_to_depth},
    {"Split", e_split},
    {"Sqrt", e_sqrt},
    {"Squeeze", e_squeeze},
    {"Sub", e_sub},
    {"Sum", e_sum},
    {"Tanh", e_tanh},
    {"ThresholdedRelu", e_thresholded_relu},
    {"Tile", e_tile},
    {"TopK", e_topk},
    {"Transpose", e_transpose},
    {"Trilu", e_trilu},
    {"Unsqueeze", e_unsqueeze},
    {"Upsample", e_resize},
    {"Where", e_where},
    {"Xor", e_xor},
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
            unsupported(c, "the op %s of domain '%s'", n->op_type, n->domain);
        else
            unsupported(c, "the op itself");
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
        if (v->kind == V_CONST && graph_dtype(v->elem) == RLX_DTYPE_INVALID) {
            unsupported(c, "tensors of type %s", rlx_onnx_elem_type_name(v->elem));
            poison_outputs(c);
            return;
        }
    }
    if (n->n_outputs < 1) {
        poison_outputs(c);
        return;
    }
    /* constant inputs: fold elementwise ops on the host */
    for (size_t i = 0; i < sizeof fold_ops / sizeof fold_ops[0]; i++)
        if (strcmp(fold_ops[i].op, n->op_type) == 0) {
            if (fold_elementwise(c, &fold_ops[i]))
                return;
            break;
        }
    int32_t unsup_before = c->n_unsup;
    bool ok = e->fn(c);
    if (!ok && !c->fail && c->n_unsup == unsup_before && rlx_graph_status(c->g) == RLX_OK)
        failf(c, RLX_ERR_NO_MEMORY, "out of memory importing it");
    if (!ok || rlx_graph_status(c->g) != RLX_OK) {
        if (ok && !c->fail)
            failf(c, RLX_ERR_UNSUPPORTED, "%s", rlx_graph_error(c->g));
        poison_outputs(c);
        return;
    }
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i][0] && !lookup(c, n->outputs[i]))
            failf(c, RLX_ERR_INTERNAL, "output '%s' was not produced", n->outputs[i]);
}

static bool io_shape(ctx *c, const rlx_onnx_value *v, const rlx_onnx_import_params *p,
                     rlx_onnx_io *io)
{
    memset(io, 0, sizeof *io);
    io->name = v->name;
    io->elem_type = v->elem_type;
    io->graph_dtype = graph_dtype(v->elem_type);
    for (int32_t i = 0; p && i < p->n_shapes; i++)
        if (p->shapes[i].name && strcmp(p->shapes[i].name, v->name) == 0) {
            if (p->shapes[i].rank < 0 || p->shapes[i].rank > MAXD)
                return false;
            io->rank = p->shapes[i].rank;
            memcpy(io->dims, p->shapes[i].dims, sizeof io->dims);
            io->numel = numel_of(io->rank, io->dims);
            return io->numel >= 0;
        }
    if (v->rank < 0 || v->rank > MAXD) {
        failf(c, RLX_ERR_UNSUPPORTED, "input '%s' has %s", v->name,
              v->rank < 0 ? "no known shape: give one" : "more than 6 dims");
        return false;
    }
    io->rank = v->rank;
    for (int i = 0; i < v->rank; i++) {
        if (v->dims[i] < 0) {
            failf(c, RLX_ERR_UNSUPPORTED, "input '%s' has the symbolic dim '%s': give its shape",
                  v->name, v->dim_params[i] ? v->dim_params[i] : "?");
            return false;
        }
        io->dims[i] = v->dims[i];
    }
    io->numel = numel_of(io->rank, io->dims);
    if (io->numel < 0) {
        failf(c, RLX_ERR_FORMAT, "input '%s' has more elements than can exist", v->name);
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
        val *v = set_const(c, t->name, t->elem_type, t->rank, t->dims, NULL);
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
                failf(c, RLX_ERR_INVALID_ARG, "the value given for input '%s' is %s, not %s",
                      v->name, rlx_onnx_elem_type_name(fixed->elem_type),
                      rlx_onnx_elem_type_name(v->elem_type));
                break;
            }
            if (!set_const_from_tensor(c, v->name, fixed)) {
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
            unsupported(c, "input '%s' of type %s", v->name, rlx_onnx_elem_type_name(v->elem_type));
            val *pv = new_val(c, v->name);
            if (pv)
                pv->kind = V_POISON;
            continue;
        }
        rlx_node x =
            rlx_graph_input(c->g, v->name, io->graph_dtype, rlx_shape_make(io->rank, io->dims));
        set_node(c, v->name, v->elem_type, x);
        c->n_ins++;
    }
    for (int32_t i = 0; i < rlx_onnx_n_nodes(m) && !c->fail; i++)
        import_node(c, rlx_onnx_node_at(m, i));
    c->cur = NULL;
    for (int32_t i = 0; i < no && !c->fail && !c->n_unsup; i++) {
        const rlx_onnx_value *ov = rlx_onnx_output_at(m, i);
        val *v = lookup(c, ov->name);
        rlx_node x = v && v->kind != V_POISON ? node_of(c, v) : RLX_NODE_INVALID;
        if (x == RLX_NODE_INVALID) {
            /* never an output quietly left out */
            failf(c, RLX_ERR_UNSUPPORTED, "graph output '%s' could not be computed", ov->name);
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
        io->numel = vnumel(v);
        if (rlx_onnx_elem_size(io->elem_type) == 0)
            unsupported(c, "output '%s' of type %s", ov->name, rlx_onnx_elem_type_name(v->elem));
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
