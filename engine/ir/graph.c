#include "engine/ir/graph-internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- basics */

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

rlx_graph *rlx_graph_create(void)
{
    rlx_graph *g = calloc(1, sizeof *g);
    return g;
}

void rlx_graph_free(rlx_graph *g)
{
    if (!g)
        return;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].data);
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        free(g->outputs[i].name);
    for (int32_t i = 0; i < g->n_symbols; i++)
        free(g->sym_names[i]);
    free(g->nodes);
    free(g->outputs);
    free(g->error);
    free(g);
}

size_t rlx_graph_const_bytes(const rlx_gnode *n)
{
    int64_t numel = rlx_shape_numel(&n->shape, NULL);
    return (size_t)numel * rlx_dtype_get(n->dtype)->type_size;
}

rlx_graph *rlx_graph_clone(const rlx_graph *g)
{
    rlx_graph *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    *c = *g;
    c->nodes = NULL;
    c->outputs = NULL;
    c->error = NULL;
    c->cap_nodes = g->n_nodes > 0 ? g->n_nodes : 1;
    c->cap_outputs = g->n_outputs > 0 ? g->n_outputs : 1;
    c->nodes = calloc((size_t)c->cap_nodes, sizeof *c->nodes);
    c->outputs = calloc((size_t)c->cap_outputs, sizeof *c->outputs);
    for (int32_t i = 0; i < g->n_symbols; i++)
        c->sym_names[i] = NULL;
    if (!c->nodes || !c->outputs)
        goto fail;
    c->n_nodes = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        c->nodes[i] = g->nodes[i];
        c->nodes[i].name = NULL;
        c->nodes[i].data = NULL;
        c->n_nodes = i + 1;
        c->nodes[i].name = dupstr(g->nodes[i].name);
        if (!c->nodes[i].name)
            goto fail;
        if (g->nodes[i].data) {
            size_t nb = rlx_graph_const_bytes(&g->nodes[i]);
            c->nodes[i].data = malloc(nb ? nb : 1);
            if (!c->nodes[i].data)
                goto fail;
            memcpy(c->nodes[i].data, g->nodes[i].data, nb);
        }
    }
    c->n_outputs = 0;
    for (int32_t i = 0; i < g->n_outputs; i++) {
        c->outputs[i].node = g->outputs[i].node;
        c->outputs[i].name = dupstr(g->outputs[i].name);
        c->n_outputs = i + 1;
        if (!c->outputs[i].name)
            goto fail;
    }
    for (int32_t i = 0; i < g->n_symbols; i++) {
        c->sym_names[i] = dupstr(g->sym_names[i]);
        if (!c->sym_names[i])
            goto fail;
    }
    if (g->error && !(c->error = dupstr(g->error)))
        goto fail;
    return c;
fail:
    rlx_graph_free(c);
    return NULL;
}

rlx_status rlx_graph_fail(rlx_graph *g, rlx_status code, const char *fmt, ...)
{
    if (g->status != RLX_OK)
        return code;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g->status = code;
    g->error = dupstr(buf);
    return code;
}

rlx_status rlx_graph_status(const rlx_graph *g)
{
    return g ? g->status : RLX_ERR_INVALID_ARG;
}

const char *rlx_graph_error(const rlx_graph *g)
{
    if (!g)
        return "no graph";
    if (g->status == RLX_OK)
        return NULL;
    return g->error ? g->error : "out of memory while building the graph";
}

rlx_status rlx_graph_take_error(const rlx_graph *g, rlx_error **err)
{
    if (!g)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no graph");
    if (g->status == RLX_OK)
        return RLX_OK;
    return rlx_error_set(err, g->status, "%s", rlx_graph_error(g));
}

/* ---------------------------------------------------------------- symbols */

int rlx_graph_add_symbol(rlx_graph *g, const char *name, int64_t max)
{
    if (!g || !name)
        return -1;
    int found = rlx_graph_find_symbol(g, name);
    if (found >= 0) {
        if (g->sym_max[found] != max) {
            rlx_graph_fail(g, RLX_ERR_INVALID_ARG,
                           "symbol '%s' declared twice with bounds %lld and %lld", name,
                           (long long)g->sym_max[found], (long long)max);
            return -1;
        }
        return found;
    }
    if (max < 1) {
        rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "symbol '%s' needs an upper bound >= 1, not %lld",
                       name, (long long)max);
        return -1;
    }
    if (g->n_symbols >= RLX_MAX_SYMBOLS) {
        rlx_graph_fail(g, RLX_ERR_UNSUPPORTED, "too many symbols (at most %d): cannot add '%s'",
                       RLX_MAX_SYMBOLS, name);
        return -1;
    }
    char *s = dupstr(name);
    if (!s) {
        rlx_graph_fail(g, RLX_ERR_NO_MEMORY, "out of memory");
        return -1;
    }
    g->sym_names[g->n_symbols] = s;
    g->sym_max[g->n_symbols] = max;
    return g->n_symbols++;
}

int rlx_graph_find_symbol(const rlx_graph *g, const char *name)
{
    for (int i = 0; i < g->n_symbols; i++)
        if (strcmp(g->sym_names[i], name) == 0)
            return i;
    return -1;
}

int rlx_graph_symbol_count(const rlx_graph *g)
{
    return g->n_symbols;
}

const char *rlx_graph_symbol_name(const rlx_graph *g, int sym)
{
    return sym >= 0 && sym < g->n_symbols ? g->sym_names[sym] : NULL;
}

int64_t rlx_graph_symbol_max(const rlx_graph *g, int sym)
{
    return sym >= 0 && sym < g->n_symbols ? g->sym_max[sym] : 0;
}

void rlx_graph_set_segment(rlx_graph *g, int seg)
{
    if (seg >= 0)
        g->cur_segment = seg;
}

/* ---------------------------------------------------------------- formatting */

void rlx_graph_format_dim(const rlx_graph *g, rlx_dim d, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    bool any = false;
    for (int i = 0; i < RLX_DIM_TERMS; i++) {
        if (d.sym[i] < 0 || d.mul[i] == 0)
            continue;
        const char *sn = g && d.sym[i] < g->n_symbols ? g->sym_names[d.sym[i]] : NULL;
        char tmp[16];
        if (!sn) {
            snprintf(tmp, sizeof tmp, "S%d", d.sym[i]);
            sn = tmp;
        }
        int m = d.mul[i];
        const char *sep = any ? (m < 0 ? "-" : "+") : (m < 0 ? "-" : "");
        if (m < 0)
            m = -m;
        if (m == 1)
            len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s%s", sep, sn);
        else
            len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s%d*%s", sep, m, sn);
        any = true;
    }
    if (!any)
        snprintf(buf, size, "%lld", (long long)d.k);
    else if (d.k != 0 && len < size)
        snprintf(buf + len, size - len, "%s%lld", d.k < 0 ? "-" : "+",
                 (long long)(d.k < 0 ? -d.k : d.k));
}

void rlx_graph_format_shape(const rlx_graph *g, const rlx_shape *s, char *buf, size_t size)
{
    size_t len = 0;
    if (size == 0)
        return;
    len += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s->rank && len < size; i++) {
        char d[64];
        rlx_graph_format_dim(g, s->d[i], d, sizeof d);
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", d);
    }
    if (len < size)
        snprintf(buf + len, size - len, "]");
}

/* ---------------------------------------------------------------- helpers */

static bool dt_float(rlx_dtype t)
{
    return rlx_dtype_get(t)->is_float;
}

static bool dt_int(rlx_dtype t)
{
    return rlx_dtype_get(t)->is_int;
}

static bool dt_quant(rlx_dtype t)
{
    return rlx_dtype_get(t)->quantized;
}

bool rlx_op_is_elementwise(rlx_op op)
{
    return rlx_op_get_info(op)->elementwise;
}

static bool dim_is_one(rlx_dim d)
{
    return rlx_dim_is_const(d) && d.k == 1;
}

bool rlx_shape_broadcast(const rlx_shape *a, const rlx_shape *b, rlx_shape *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    rlx_shape o = rlx_shape_make(r, NULL);
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        rlx_dim da = ia >= 0 ? a->d[ia] : rlx_dim_const(1);
        rlx_dim db = ib >= 0 ? b->d[ib] : rlx_dim_const(1);
        if (rlx_dim_equal(da, db) || dim_is_one(db))
            o.d[i] = da;
        else if (dim_is_one(da))
            o.d[i] = db;
        else
            return false;
    }
    *out = o;
    return true;
}

int64_t rlx_graph_numel_upper(const rlx_graph *g, const rlx_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= rlx_dim_upper(s->d[i], g->sym_max);
    return n;
}

static bool shape_ok_bounds(const rlx_graph *g, const rlx_shape *s)
{
    for (int i = 0; i < s->rank; i++) {
        for (int t = 0; t < RLX_DIM_TERMS; t++)
            if (s->d[i].sym[t] >= g->n_symbols && s->d[i].mul[t] != 0)
                return false;
        if (rlx_dim_upper(s->d[i], g->sym_max) < 0)
            return false;
    }
    return true;
}

static int norm_axis(int axis, int rank)
{
    return axis < 0 ? axis + rank : axis;
}

#define FAILF(...)                            \
    do {                                      \
        snprintf(msg, msg_size, __VA_ARGS__); \
        return RLX_ERR_INVALID_ARG;           \
    } while (0)

#define SHP(var, s) \
    char var[160];  \
    rlx_graph_format_shape(g, (s), var, sizeof var)

static const rlx_gnode *in_node(const rlx_graph *g, const rlx_gnode *n, int i)
{
    return &g->nodes[n->in[i]];
}

/* Output length of a convolution/pool along one axis; affine only when the
 * stride is 1. */
static bool conv_len(rlx_dim in, int64_t k, int64_t s, int64_t p, int64_t dil, rlx_dim *out)
{
    int64_t span = dil * (k - 1) + 1;
    if (rlx_dim_is_const(in)) {
        int64_t v = (in.k + 2 * p - span) / s + 1;
        if (in.k + 2 * p - span < 0)
            v = 0;
        *out = rlx_dim_const(v);
        return true;
    }
    if (s != 1)
        return false;
    return rlx_dim_add(in, rlx_dim_const(2 * p - span + 1), out);
}

static rlx_status infer_elementwise(const rlx_graph *g, const rlx_gnode *n, rlx_dtype *dt,
                                    rlx_shape *shape, char *msg, size_t msg_size)
{
    rlx_shape s = in_node(g, n, 0)->shape;
    for (int i = 1; i < n->n_in; i++) {
        rlx_shape o;
        if (!rlx_shape_broadcast(&s, &in_node(g, n, i)->shape, &o)) {
            SHP(a, &s);
            SHP(b, &in_node(g, n, i)->shape);
            FAILF("shapes do not broadcast: %s and %s", a, b);
        }
        s = o;
    }
    *shape = s;
    bool any_float = false, all_int = true;
    for (int i = 0; i < n->n_in; i++) {
        rlx_dtype t = in_node(g, n, i)->dtype;
        if (dt_quant(t))
            FAILF("input %d is block-quantized (%s): only matmul and gather read those", i,
                  rlx_dtype_name(t));
        if (n->op == RLX_OP_WHERE && i == 0) {
            if (!dt_int(t))
                FAILF("the condition must be U8/BOOL/integer, not %s", rlx_dtype_name(t));
            continue;
        }
        any_float |= dt_float(t);
        all_int &= dt_int(t);
    }
    if (n->op == RLX_OP_FUSED_ELEMENTWISE) {
        int ns = n->p.fused.n_steps;
        bool defined[256] = {false};
        if (ns < 1 || ns > RLX_FUSED_MAX_STEPS)
            FAILF("a fused program needs 1 to %d steps, has %d", RLX_FUSED_MAX_STEPS, ns);
        for (int r = 0; r < n->n_in; r++)
            defined[r] = true;
        for (int si = 0; si < ns; si++) {
            const rlx_fused_step *st = &n->p.fused.steps[si];
            rlx_op sop = (rlx_op)st->op;
            if (!rlx_op_get_info(sop)->elementwise || sop == RLX_OP_FUSED_ELEMENTWISE ||
                sop == RLX_OP_CAST)
                FAILF("step %d: %s cannot be fused", si, rlx_op_name(sop));
            int ni = rlx_op_get_info(sop)->min_inputs;
            uint8_t regs[3] = {st->a, st->b, st->c};
            for (int k = 0; k < ni; k++)
                if (!defined[regs[k]])
                    FAILF("step %d reads register %d before it is written", si, regs[k]);
            if (st->dst < n->n_in)
                FAILF("step %d overwrites input register %d", si, st->dst);
            defined[st->dst] = true;
        }
        *dt = n->dtype != RLX_DTYPE_INVALID ? n->dtype : RLX_DTYPE_F32;
        return RLX_OK;
    }
    if (n->op == RLX_OP_CAST) {
        if (n->dtype == RLX_DTYPE_INVALID || dt_quant(n->dtype))
            FAILF("cannot cast to %s", rlx_dtype_name(n->dtype));
        *dt = n->dtype;
        return RLX_OK;
    }
    if (any_float && !all_int) {
        for (int i = n->op == RLX_OP_WHERE ? 1 : 0; i < n->n_in; i++)
            if (!dt_float(in_node(g, n, i)->dtype))
                FAILF("mixes float and %s inputs: cast first",
                      rlx_dtype_name(in_node(g, n, i)->dtype));
    }
    if (n->op == RLX_OP_CMP) {
        *dt = RLX_DTYPE_U8;
        return RLX_OK;
    }
    if (all_int) {
        switch (n->op) {
        case RLX_OP_NEG:
        case RLX_OP_ABS:
        case RLX_OP_RELU:
        case RLX_OP_SQUARE:
        case RLX_OP_CLAMP:
        case RLX_OP_ADD:
        case RLX_OP_SUB:
        case RLX_OP_MUL:
        case RLX_OP_DIV:
        case RLX_OP_MAX:
        case RLX_OP_MIN:
        case RLX_OP_WHERE:
            break;
        default:
            FAILF("needs float inputs, got %s: cast first",
                  rlx_dtype_name(in_node(g, n, n->n_in - 1)->dtype));
        }
        rlx_dtype t0 = in_node(g, n, n->op == RLX_OP_WHERE ? 1 : 0)->dtype;
        for (int i = n->op == RLX_OP_WHERE ? 1 : 0; i < n->n_in; i++)
            if (in_node(g, n, i)->dtype != t0)
                FAILF("integer inputs of different types (%s, %s)", rlx_dtype_name(t0),
                      rlx_dtype_name(in_node(g, n, i)->dtype));
        *dt = t0;
        return RLX_OK;
    }
    *dt = RLX_DTYPE_F32;
    return RLX_OK;
}

static rlx_status need_float(const rlx_graph *g, const rlx_gnode *n, int i, const char *what,
                             char *msg, size_t msg_size)
{
    rlx_dtype t = in_node(g, n, i)->dtype;
    if (!dt_float(t))
        FAILF("%s must be a float tensor, not %s", what, rlx_dtype_name(t));
    return RLX_OK;
}

static rlx_status need_vec(const rlx_graph *g, const rlx_gnode *n, int i, rlx_dim len,
                           const char *what, char *msg, size_t msg_size)
{
    const rlx_gnode *v = in_node(g, n, i);
    if (need_float(g, n, i, what, msg, msg_size) != RLX_OK)
        return RLX_ERR_INVALID_ARG;
    if (v->shape.rank != 1 || !rlx_dim_equal(v->shape.d[0], len)) {
        SHP(a, &v->shape);
        char d[64];
        rlx_graph_format_dim(g, len, d, sizeof d);
        FAILF("%s is %s, expected [%s]", what, a, d);
    }
    return RLX_OK;
}

#define TRY(x)                          \
    do {                                \
        if ((x) != RLX_OK)              \
            return RLX_ERR_INVALID_ARG; \
    } while (0)

static rlx_status infer_matmul(const rlx_graph *g, const rlx_gnode *n, rlx_dtype *dt,
                               rlx_shape *shape, char *msg, size_t msg_size)
{
    const rlx_gnode *a = in_node(g, n, 0), *b = in_node(g, n, 1);
    bool ta = n->p.matmul.trans_a, tb = n->p.matmul.trans_b;
    SHP(sa, &a->shape);
    SHP(sb, &b->shape);
    if (a->shape.rank < 2 || b->shape.rank < 2)
        FAILF("needs rank >= 2 operands: a is %s, b is %s", sa, sb);
    if (!dt_float(a->dtype))
        FAILF("a must be a float tensor, not %s", rlx_dtype_name(a->dtype));
    if (dt_quant(b->dtype)) {
        if (b->op != RLX_OP_PARAM || b->shape.rank != 2 || !tb)
            FAILF("a block-quantized b (%s) must be a rank-2 param used with trans_b",
                  rlx_dtype_name(b->dtype));
    } else if (!dt_float(b->dtype)) {
        FAILF("b must be a float or block-quantized tensor, not %s", rlx_dtype_name(b->dtype));
    }
    int ra = a->shape.rank, rb = b->shape.rank;
    rlx_dim m = ta ? a->shape.d[ra - 1] : a->shape.d[ra - 2];
    rlx_dim ka = ta ? a->shape.d[ra - 2] : a->shape.d[ra - 1];
    rlx_dim kb = tb ? b->shape.d[rb - 1] : b->shape.d[rb - 2];
    rlx_dim nn = tb ? b->shape.d[rb - 2] : b->shape.d[rb - 1];
    if (!rlx_dim_equal(ka, kb))
        FAILF("inner dims differ: a is %s%s, b is %s%s", sa, ta ? " (transposed)" : "", sb,
              tb ? " (transposed)" : "");
    rlx_shape ba = a->shape, bb = b->shape, bo;
    ba.rank -= 2;
    bb.rank -= 2;
    if (!rlx_shape_broadcast(&ba, &bb, &bo))
        FAILF("batch dims do not broadcast: a is %s, b is %s", sa, sb);
    if (bo.rank + 2 > RLX_MAX_DIMS)
        FAILF("too many dims");
    bo.d[bo.rank] = m;
    bo.d[bo.rank + 1] = nn;
    bo.rank += 2;
    if (n->p.matmul.has_bias != (n->n_in == 3))
        FAILF("has_bias does not match the number of inputs");
    if (n->n_in == 3)
        TRY(need_vec(g, n, 2, nn, "bias", msg, msg_size));
    *shape = bo;
    *dt = RLX_DTYPE_F32;
    return RLX_OK;
}

static rlx_status infer_conv(const rlx_graph *g, const rlx_gnode *n, rlx_dtype *dt,
                             rlx_shape *shape, char *msg, size_t msg_size)
{
    const rlx_gnode *x = in_node(g, n, 0), *w = in_node(g, n, 1);
    int sp = n->op == RLX_OP_CONV1D ? 1 : 2; /* spatial dims */
    SHP(sx, &x->shape);
    SHP(sw, &w->shape);
    if (x->shape.rank != 2 + sp || w->shape.rank != 2 + sp)
        FAILF("x is %s and w is %s: expected rank %d for both", sx, sw, 2 + sp);
    TRY(need_float(g, n, 0, "x", msg, msg_size));
    TRY(need_float(g, n, 1, "w", msg, msg_size));
    for (int i = 0; i < w->shape.rank; i++)
        if (!rlx_dim_is_const(w->shape.d[i]))
            FAILF("w must have a constant shape, is %s", sw);
    rlx_dim cin = x->shape.d[1];
    if (!rlx_dim_is_const(cin))
        FAILF("the channel dim of x must be constant, x is %s", sx);
    int64_t groups = n->p.conv.groups > 0 ? n->p.conv.groups : 1;
    int64_t cout;
    if (n->op == RLX_OP_CONV_TRANSPOSE2D) {
        if (w->shape.d[0].k != cin.k || cin.k % groups)
            FAILF("x is %s, w is %s: w[0] must equal the %lld input channels", sx, sw,
                  (long long)cin.k);
        cout = w->shape.d[1].k * groups;
    } else {
        cout = w->shape.d[0].k;
        if (cin.k % groups || cout % groups || w->shape.d[1].k * groups != cin.k)
            FAILF("x is %s, w is %s: channels do not match with groups = %lld", sx, sw,
                  (long long)groups);
    }
    rlx_shape o = x->shape;
    o.d[1] = rlx_dim_const(cout);
    for (int i = 0; i < sp; i++) {
        int64_t k = w->shape.d[2 + i].k;
        int64_t s = n->p.conv.stride[i] > 0 ? n->p.conv.stride[i] : 1;
        int64_t p = n->p.conv.pad[i];
        int64_t d = n->p.conv.dilation[i] > 0 ? n->p.conv.dilation[i] : 1;
        rlx_dim in = x->shape.d[2 + i];
        if (p < 0)
            FAILF("negative padding");
        if (n->op == RLX_OP_CONV_TRANSPOSE2D) {
            int64_t op = n->p.conv.out_pad[i];
            rlx_dim t = rlx_dim_scale(in, s), r;
            if (op < 0 || op >= s)
                FAILF("out_pad %lld must be in [0, stride)", (long long)op);
            if (!rlx_dim_add(t, rlx_dim_const(-s - 2 * p + d * (k - 1) + op + 1), &r))
                FAILF("output size not expressible");
            o.d[2 + i] = r;
        } else if (!conv_len(in, k, s, p, d, &o.d[2 + i])) {
            FAILF("a symbolic spatial dim (x is %s) needs stride 1", sx);
        }
        if (rlx_dim_upper(o.d[2 + i], g->sym_max) <= 0)
            FAILF("x is %s, w is %s: the output would be empty", sx, sw);
    }
    if (n->p.conv.has_bias != (n->n_in == 3))
        FAILF("has_bias does not match the number of inputs");
    if (n->n_in == 3)
        TRY(need_vec(g, n, 2, rlx_dim_const(cout), "bias", msg, msg_size));
    *shape = o;
    *dt = RLX_DTYPE_F32;
    return RLX_OK;
}

static bool numel_equal(const rlx_graph *g, const rlx_shape *a, const rlx_shape *b)
{
    /* Compare the element counts at the bounds and at a second assignment;
     * products of symbolic dims are not affine, so this is a numeric check. */
    rlx_sym_values hi, lo;
    for (int i = 0; i < RLX_MAX_SYMBOLS; i++) {
        hi.v[i] = i < g->n_symbols ? g->sym_max[i] : 0;
        lo.v[i] = i < g->n_symbols ? g->sym_max[i] / 2 + 1 : 0;
    }
    return rlx_shape_numel(a, &hi) == rlx_shape_numel(b, &hi) &&
           rlx_shape_numel(a, &lo) == rlx_shape_numel(b, &lo);
}

/* A Q8_0 KV cache: a Q8_0 STATE seen through scatters, slices, reshapes and
 * permutes. Its elements keep their flat order in the state's blocks, so
 * such views are addressed element by element (block e / 32, entry e % 32)
 * by the ops that read them (attention); nothing copies them. */
static bool q8_state_view(const rlx_graph *g, const rlx_gnode *n)
{
    while (n->dtype == RLX_DTYPE_Q8_0 &&
           (n->op == RLX_OP_SCATTER || n->op == RLX_OP_SLICE || n->op == RLX_OP_RESHAPE ||
            n->op == RLX_OP_PERMUTE) &&
           n->n_in > 0)
        n = &g->nodes[n->in[0]];
    return n->op == RLX_OP_STATE && n->dtype == RLX_DTYPE_Q8_0;
}

/* A SCATTER's target must be a STATE, possibly through earlier scatters. */
static const rlx_gnode *scatter_root(const rlx_graph *g, const rlx_gnode *n)
{
    while (n->op == RLX_OP_SCATTER)
        n = &g->nodes[n->in[0]];
    return n->op == RLX_OP_STATE ? n : NULL;
}

rlx_status rlx_graph_infer(const rlx_graph *g, const rlx_gnode *n, rlx_dtype *dt, rlx_shape *shape,
                           char *msg, size_t msg_size)
{
    const rlx_op_info *info = rlx_op_get_info(n->op);
    msg[0] = 0;
    if (n->op <= RLX_OP_NONE || n->op >= RLX_OP_COUNT)
        FAILF("unknown op %d", (int)n->op);
    if (n->n_in < info->min_inputs || n->n_in > info->max_inputs)
        FAILF("takes %d to %d inputs, got %d", info->min_inputs, info->max_inputs, n->n_in);
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] < 0 || n->in[i] >= g->n_nodes || g->nodes[n->in[i]].op == RLX_OP_NONE)
            FAILF("input %d is not a node of this graph", i);
    const rlx_gnode *x = n->n_in > 0 ? in_node(g, n, 0) : NULL;
    SHP(sx, x ? &x->shape : &n->shape);
    int rank = x ? x->shape.rank : 0;

    switch (n->op) {
    case RLX_OP_INPUT:
    case RLX_OP_PARAM:
    case RLX_OP_CONST:
    case RLX_OP_STATE: {
        SHP(s, &n->shape);
        if (n->dtype <= RLX_DTYPE_INVALID || n->dtype >= RLX_DTYPE_COUNT)
            FAILF("invalid dtype");
        if (n->shape.rank < 0 || n->shape.rank > RLX_MAX_DIMS || !shape_ok_bounds(g, &n->shape))
            FAILF("invalid shape %s", s);
        if (dt_quant(n->dtype)) {
            if (n->op != RLX_OP_PARAM && !(n->op == RLX_OP_STATE && n->dtype == RLX_DTYPE_Q8_0))
                FAILF("block-quantized %s is only allowed for params (and Q8_0 for states)",
                      rlx_dtype_name(n->dtype));
            uint32_t bs = rlx_dtype_get(n->dtype)->block_size;
            rlx_dim last = n->shape.d[n->shape.rank - 1];
            if (n->shape.rank < 1 || !rlx_dim_is_const(last) || last.k % bs)
                FAILF("shape %s: the last dim must be a multiple of %s's block of %u", s,
                      rlx_dtype_name(n->dtype), bs);
        }
        if (n->op == RLX_OP_CONST || n->op == RLX_OP_STATE || n->op == RLX_OP_PARAM)
            for (int i = 0; i < n->shape.rank; i++)
                if (!rlx_dim_is_const(n->shape.d[i]))
                    FAILF("shape %s must be constant (use the upper bound)", s);
        *dt = n->dtype;
        *shape = n->shape;
        return RLX_OK;
    }
    case RLX_OP_MATMUL:
        return infer_matmul(g, n, dt, shape, msg, msg_size);
    case RLX_OP_REDUCE_SUM:
    case RLX_OP_REDUCE_MEAN:
    case RLX_OP_REDUCE_MAX:
    case RLX_OP_ARGMAX:
    case RLX_OP_TOPK: {
        int axis = norm_axis(n->op == RLX_OP_TOPK ? n->p.topk.axis : n->p.reduce.axis, rank);
        if (axis < 0 || axis >= rank)
            FAILF("axis out of range for %s", sx);
        TRY(need_float(g, n, 0, "x", msg, msg_size));
        rlx_shape o = x->shape;
        if (n->op == RLX_OP_TOPK) {
            rlx_dim d = x->shape.d[axis];
            if (n->p.topk.k < 1 || (rlx_dim_is_const(d) && n->p.topk.k > d.k))
                FAILF("k = %d is out of range for %s", n->p.topk.k, sx);
            o.d[axis] = rlx_dim_const(n->p.topk.k);
            *dt = n->p.topk.indices ? RLX_DTYPE_I32 : RLX_DTYPE_F32;
        } else {
            if (n->p.reduce.keepdim) {
                o.d[axis] = rlx_dim_const(1);
            } else {
                for (int i = axis; i + 1 < rank; i++)
                    o.d[i] = o.d[i + 1];
                o.rank--;
            }
            *dt = n->op == RLX_OP_ARGMAX ? RLX_DTYPE_I32 : RLX_DTYPE_F32;
        }
        *shape = o;
        return RLX_OK;
    }
    case RLX_OP_SOFTMAX:
        TRY(need_float(g, n, 0, "x", msg, msg_size));
        if (rank < 1)
            FAILF("x must have rank >= 1");
        if (n->p.softmax.has_mask != (n->n_in == 2))
            FAILF("has_mask does not match the number of inputs");
        if (n->n_in == 2) {
            rlx_shape o;
            TRY(need_float(g, n, 1, "mask", msg, msg_size));
            if (!rlx_shape_broadcast(&x->shape, &in_node(g, n, 1)->shape, &o) ||
                !rlx_shape_equal(&o, &x->shape)) {
                SHP(sm, &in_node(g, n, 1)->shape);
                FAILF("mask %s does not broadcast to x %s", sm, sx);
            }
        }
        *dt = RLX_DTYPE_F32;
        *shape = x->shape;
        return RLX_OK;
    case RLX_OP_LAYER_NORM:
    case RLX_OP_RMS_NORM:
    case RLX_OP_GROUP_NORM:
    case RLX_OP_ADD_RMS_NORM: {
        TRY(need_float(g, n, 0, "x", msg, msg_size));
        if (rank < 1)
            FAILF("x must have rank >= 1");
        rlx_dim len = x->shape.d[rank - 1];
        int first = 1;
        if (n->op == RLX_OP_ADD_RMS_NORM) {
            TRY(need_float(g, n, 1, "b", msg, msg_size));
            if (!rlx_shape_equal(&x->shape, &in_node(g, n, 1)->shape)) {
                SHP(sb, &in_node(g, n, 1)->shape);
                FAILF("a is %s, b is %s: must be equal", sx, sb);
            }
            first = 2;
        } else if (n->op == RLX_OP_GROUP_NORM) {
            int64_t gr = n->p.norm.groups;
            if (rank < 2 || !rlx_dim_is_const(x->shape.d[1]) || gr < 1 || x->shape.d[1].k % gr)
                FAILF("x %s: channels (dim 1) must be constant and divisible by %lld groups", sx,
                      (long long)gr);
            len = x->shape.d[1];
        }
        int want = first + (n->op == RLX_OP_ADD_RMS_NORM ? 1 : 0) + (n->p.norm.has_weight ? 1 : 0) +
                   (n->p.norm.has_bias ? 1 : 0);
        if (n->op == RLX_OP_ADD_RMS_NORM)
            want = 3;
        if (n->n_in != want)
            FAILF("has_weight/has_bias do not match the number of inputs");
        for (int i = first; i < n->n_in; i++)
            TRY(need_vec(g, n, i, len, i == first ? "weight" : "bias", msg, msg_size));
        *dt = RLX_DTYPE_F32;
        *shape = x->shape;
        if (n->p.norm.keep_sum) {
            if (n->op != RLX_OP_ADD_RMS_NORM)
                FAILF("keep_sum is a parameter of add_rms_norm only");
            if (rank + 1 > RLX_MAX_DIMS)
                FAILF("keep_sum stacks the sum and the norm: x %s has no room for one more dim "
                      "(at most %d)",
                      sx, RLX_MAX_DIMS);
            shape->rank = rank + 1;
            shape->d[rank - 1] = rlx_dim_const(2);
            shape->d[rank] = x->shape.d[rank - 1];
        }
        return RLX_OK;
    }
    case RLX_OP_ROPE: {
        TRY(need_float(g, n, 0, "x", msg, msg_size));
        int sa = n->p.rope.seq_axis;
        if (rank < 2 || sa < 0 || sa >= rank - 1)
            FAILF("x is %s: needs rank >= 2 with seq_axis %d before the last", sx, sa);
        rlx_dim hd = x->shape.d[rank - 1];
        int nr = n->p.rope.n_rot;
        if (!rlx_dim_is_const(hd) || nr < 2 || nr % 2 || nr > hd.k)
            FAILF("x is %s: n_rot %d must be even and at most the head dim", sx, nr);
        const rlx_gnode *pos = in_node(g, n, 1);
        if (pos->dtype != RLX_DTYPE_I32 || pos->shape.rank != 1 ||
            !rlx_dim_equal(pos->shape.d[0], x->shape.d[sa])) {
            SHP(sp, &pos->shape);
            FAILF("positions must be I32 of length x's dim %d, x is %s, positions %s %s", sa, sx,
                  rlx_dtype_name(pos->dtype), sp);
        }
        if (n->p.rope.has_freq_factors != (n->n_in == 3))
            FAILF("has_freq_factors does not match the number of inputs");
        if (n->n_in == 3)
            TRY(need_vec(g, n, 2, rlx_dim_const(nr / 2), "freq_factors", msg, msg_size));
        *dt = RLX_DTYPE_F32;
        *shape = x->shape;
        return RLX_OK;
    }
    case RLX_OP_ATTENTION: {
        const rlx_gnode *k = in_node(g, n, 1), *v = in_node(g, n, 2);
        SHP(sk, &k->shape);
        SHP(sv, &v->shape);
        TRY(need_float(g, n, 0, "q", msg, msg_size));
        /* k and v may be a Q8_0 KV cache (a view of a Q8_0 state), read
         * block by block by the kernels */
        for (int i = 1; i < 3; i++)
            if (in_node(g, n, i)->dtype != RLX_DTYPE_Q8_0)
                TRY(need_float(g, n, i, i == 1 ? "k" : "v", msg, msg_size));
        if (rank != 4 || k->shape.rank != 4 || v->shape.rank != 4)
            FAILF("q %s, k %s, v %s must be rank 4 [B, H, S, D]", sx, sk, sv);
        if (!rlx_dim_equal(x->shape.d[0], k->shape.d[0]) ||
            !rlx_dim_equal(k->shape.d[0], v->shape.d[0]))
            FAILF("batch dims differ: q %s, k %s, v %s", sx, sk, sv);
        rlx_dim hq = x->shape.d[1], hk = k->shape.d[1];
        if (!rlx_dim_is_const(hq) || !rlx_dim_is_const(hk) || hk.k < 1 || hq.k % hk.k ||
            !rlx_dim_equal(hk, v->shape.d[1]))
            FAILF("q heads (%s) must be a multiple of k/v heads (k %s, v %s)", sx, sk, sv);
        if (!rlx_dim_equal(x->shape.d[3], k->shape.d[3]))
            FAILF("head dims differ: q %s, k %s", sx, sk);
        if (!rlx_dim_equal(k->shape.d[2], v->shape.d[2]))
            FAILF("k %s and v %s have different lengths", sk, sv);
        if (n->p.attn.mask == RLX_MASK_WINDOW && n->p.attn.window < 1)
            FAILF("a window mask needs window >= 1");
        rlx_shape o = x->shape;
        o.d[3] = v->shape.d[3];
        if (n->p.attn.has_bias != (n->n_in == 4))
            FAILF("has_bias does not match the number of inputs");
        if (n->p.attn.bias_grid_w < 0 || (n->p.attn.bias_grid_w > 0 && n->n_in != 4))
            FAILF("bias_grid_w %d needs a bias and must be >= 0", (int)n->p.attn.bias_grid_w);
        if (n->n_in == 4) {
            rlx_shape sc = o, b;
            sc.d[3] = k->shape.d[2];
            int64_t gw = n->p.attn.bias_grid_w;
            if (gw > 0) { /* the bias holds T / w row terms, then w column terms */
                if (!rlx_dim_is_const(sc.d[3]) || sc.d[3].k % gw)
                    FAILF("the key length (%s) must be a constant multiple of bias_grid_w %lld", sk,
                          (long long)gw);
                sc.d[3] = rlx_dim_const(sc.d[3].k / gw + gw);
            }
            TRY(need_float(g, n, 3, "bias", msg, msg_size));
            if (!rlx_shape_broadcast(&sc, &in_node(g, n, 3)->shape, &b) ||
                !rlx_shape_equal(&b, &sc)) {
                SHP(sb, &in_node(g, n, 3)->shape);
                SHP(ss, &sc);
                FAILF("bias %s does not broadcast to the scores %s", sb, ss);
            }
            const rlx_shape *bsh = &in_node(g, n, 3)->shape;
            if (gw > 0 && !rlx_dim_equal(bsh->d[bsh->rank - 1], sc.d[3]))
                FAILF("a grid-decomposed bias holds its %lld row and column terms on its last "
                      "axis (not broadcast)",
                      (long long)sc.d[3].k);
        }
        *dt = RLX_DTYPE_F32;
        *shape = o;
        return RLX_OK;
    }
    case RLX_OP_CONV1D:
    case RLX_OP_CONV2D:
    case RLX_OP_CONV_TRANSPOSE2D:
        return infer_conv(g, n, dt, shape, msg, msg_size);
    case RLX_OP_RESIZE: {
        TRY(need_float(g, n, 0, "x", msg, msg_size));
        if (rank < 2 || n->shape.rank != rank)
            FAILF("x is %s: needs rank >= 2", sx);
        rlx_shape o = x->shape;
        o.d[rank - 2] = n->shape.d[rank - 2];
        o.d[rank - 1] = n->shape.d[rank - 1];
        if (!rlx_dim_is_const(o.d[rank - 2]) || !rlx_dim_is_const(o.d[rank - 1]) ||
            o.d[rank - 2].k < 1 || o.d[rank - 1].k < 1)
            FAILF("the output size must be constant and positive");
        *dt = RLX_DTYPE_F32;
        *shape = o;
        return RLX_OK;
    }
    case RLX_OP_POOL2D: {
        TRY(need_float(g, n, 0, "x", msg, msg_size));
        if (rank != 4)
            FAILF("x is %s: needs [N, C, H, W]", sx);
        rlx_shape o = x->shape;
        for (int i = 0; i < 2; i++) {
            int64_t k = n->p.pool.kernel[i], s = n->p.pool.stride[i] > 0 ? n->p.pool.stride[i] : k;
            if (k < 1 || n->p.pool.pad[i] < 0 || 2 * n->p.pool.pad[i] > k)
                FAILF("bad kernel/pad");
            if (!conv_len(x->shape.d[2 + i], k, s, n->p.pool.pad[i], 1, &o.d[2 + i]) ||
                rlx_dim_upper(o.d[2 + i], g->sym_max) < 1)
                FAILF("x is %s: bad pooling geometry", sx);
        }
        *dt = RLX_DTYPE_F32;
        *shape = o;
        return RLX_OK;
    }
    case RLX_OP_RESHAPE: {
        SHP(so, &n->shape);
        if (dt_quant(x->dtype) && !q8_state_view(g, x))
            FAILF("cannot reshape block-quantized %s", rlx_dtype_name(x->dtype));
        if (n->shape.rank < 0 || n->shape.rank > RLX_MAX_DIMS || !shape_ok_bounds(g, &n->shape))
            FAILF("invalid shape %s", so);
        if (!numel_equal(g, &x->shape, &n->shape))
            FAILF("element counts differ: x is %s, new shape %s", sx, so);
        *dt = x->dtype;
        *shape = n->shape;
        return RLX_OK;
    }
    case RLX_OP_PERMUTE: {
        bool seen[RLX_MAX_DIMS] = {0};
        rlx_shape o = x->shape;
        if (dt_quant(x->dtype) && !q8_state_view(g, x))
            FAILF("cannot permute block-quantized %s", rlx_dtype_name(x->dtype));
        for (int i = 0; i < rank; i++) {
            int p = n->p.permute.perm[i];
            if (p < 0 || p >= rank || seen[p])
                FAILF("not a permutation of the %d dims of %s", rank, sx);
            seen[p] = true;
            o.d[i] = x->shape.d[p];
        }
        *dt = x->dtype;
        *shape = o;
        return RLX_OK;
    }
    case RLX_OP_SLICE: {
        int axis = n->p.slice.axis;
        if (axis < 0 || axis >= rank || n->shape.rank != rank)
            FAILF("axis %d out of range for %s", axis, sx);
        if (dt_quant(x->dtype) && axis == rank - 1)
            FAILF("cannot slice the last dim of block-quantized %s", rlx_dtype_name(x->dtype));
        if (n->p.slice.step > 1)
            FAILF("step %lld is not supported", (long long)n->p.slice.step);
        rlx_dim len = n->shape.d[axis], end;
        if (!rlx_dim_add(n->p.slice.start, len, &end))
            FAILF("start + length is not expressible");
        /* a symbolic start such as SEQ-1 is checked per run by the backend */
        if (rlx_dim_upper(n->p.slice.start, g->sym_max) < 0 ||
            (rlx_dim_is_const(n->p.slice.start) && n->p.slice.start.k < 0) ||
            rlx_dim_upper(len, g->sym_max) < 1)
            FAILF("empty or negative range along axis %d of %s", axis, sx);
        if (rlx_dim_upper(end, g->sym_max) > rlx_dim_upper(x->shape.d[axis], g->sym_max)) {
            char e[64];
            rlx_graph_format_dim(g, end, e, sizeof e);
            FAILF("range end %s exceeds dim %d of %s at the symbols' bounds", e, axis, sx);
        }
        rlx_shape o = x->shape;
        o.d[axis] = len;
        *dt = x->dtype;
        *shape = o;
        return RLX_OK;
    }
    case RLX_OP_CONCAT: {
        int axis = n->p.concat.axis;
        if (axis < 0 || axis >= rank)
            FAILF("axis %d out of range for %s", axis, sx);
        rlx_shape o = x->shape;
        for (int i = 1; i < n->n_in; i++) {
            const rlx_gnode *y = in_node(g, n, i);
            SHP(sy, &y->shape);
            if (y->dtype != x->dtype)
                FAILF("dtypes differ: %s and %s", rlx_dtype_name(x->dtype),
                      rlx_dtype_name(y->dtype));
            if (y->shape.rank != rank)
                FAILF("ranks differ: %s and %s", sx, sy);
            for (int d = 0; d < rank; d++)
                if (d != axis && !rlx_dim_equal(y->shape.d[d], x->shape.d[d]))
                    FAILF("dim %d differs: %s and %s", d, sx, sy);
            if (!rlx_dim_add(o.d[axis], y->shape.d[axis], &o.d[axis]))
                FAILF("the concatenated length is not expressible (too many symbols)");
        }
        if (dt_quant(x->dtype))
            FAILF("cannot concat block-quantized tensors");
        *dt = x->dtype;
        *shape = o;
        return RLX_OK;
    }
    case RLX_OP_PAD: {
        rlx_shape o = x->shape;
        if (dt_quant(x->dtype))
            FAILF("cannot pad block-quantized tensors");
        for (int i = 0; i < rank; i++) {
            if (n->p.pad.before[i] < 0 || n->p.pad.after[i] < 0)
                FAILF("negative padding");
            rlx_dim_add(o.d[i], rlx_dim_const(n->p.pad.before[i] + n->p.pad.after[i]), &o.d[i]);
        }
        *dt = x->dtype;
        *shape = o;
        return RLX_OK;
    }
    case RLX_OP_COPY:
        if (dt_quant(x->dtype))
            FAILF("cannot copy block-quantized tensors");
        *dt = x->dtype;
        *shape = x->shape;
        return RLX_OK;
    case RLX_OP_GATHER: {
        const rlx_gnode *ids = in_node(g, n, 1);
        SHP(si, &ids->shape);
        if (rank != 2)
            FAILF("table is %s: must be [V, D]", sx);
        if (dt_quant(x->dtype) ? x->op != RLX_OP_PARAM : !dt_float(x->dtype))
            FAILF("table must be a float tensor or a block-quantized param, not %s",
                  rlx_dtype_name(x->dtype));
        if (ids->dtype != RLX_DTYPE_I32)
            FAILF("ids must be I32, not %s", rlx_dtype_name(ids->dtype));
        if (ids->shape.rank + 1 > RLX_MAX_DIMS)
            FAILF("ids %s have too many dims", si);
        rlx_shape o = ids->shape;
        o.d[o.rank++] = x->shape.d[1];
        *dt = RLX_DTYPE_F32;
        *shape = o;
        return RLX_OK;
    }
    case RLX_OP_SCATTER: {
        const rlx_gnode *src = in_node(g, n, 1);
        SHP(ss, &src->shape);
        int axis = n->p.scatter.axis;
        if (!scatter_root(g, x))
            FAILF("the target must be a state (or an earlier scatter into one)");
        if (src->shape.rank != rank || axis < 0 || axis >= rank)
            FAILF("src %s does not match state %s along axis %d", ss, sx, axis);
        if (x->dtype == RLX_DTYPE_Q8_0) {
            /* the append into a Q8_0 cache quantizes whole rows */
            if (!dt_float(src->dtype) || axis == rank - 1)
                FAILF("a Q8_0 state takes float rows along an axis other than the last, not %s "
                      "along axis %d",
                      rlx_dtype_name(src->dtype), axis);
        } else if (!dt_float(src->dtype) || !dt_float(x->dtype)) {
            if (src->dtype != x->dtype)
                FAILF("src %s cannot be written into a %s state", rlx_dtype_name(src->dtype),
                      rlx_dtype_name(x->dtype));
        }
        for (int d = 0; d < rank; d++)
            if (d != axis && !rlx_dim_equal(src->shape.d[d], x->shape.d[d]))
                FAILF("src %s does not match state %s except along axis %d", ss, sx, axis);
        rlx_dim end;
        if (!rlx_dim_add(n->p.scatter.offset, src->shape.d[axis], &end) ||
            rlx_dim_upper(n->p.scatter.offset, g->sym_max) < 0 ||
            (rlx_dim_is_const(n->p.scatter.offset) && n->p.scatter.offset.k < 0) ||
            rlx_dim_upper(end, g->sym_max) > rlx_dim_upper(x->shape.d[axis], g->sym_max)) {
            char e[64];
            rlx_graph_format_dim(g, end, e, sizeof e);
            FAILF("write end %s exceeds the state %s along axis %d at the symbols' bounds", e, sx,
                  axis);
        }
        *dt = x->dtype;
        *shape = x->shape;
        return RLX_OK;
    }
    default:
        break;
    }
    if (info->elementwise)
        return infer_elementwise(g, n, dt, shape, msg, msg_size);
    FAILF("no shape rule");
}

/* ---------------------------------------------------------------- building */

static bool grow(void **arr, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    int32_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return false;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = p;
    *cap = nc;
    return true;
}

static rlx_node push_node(rlx_graph *g, const rlx_gnode *n, const char *name)
{
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes)) {
        rlx_graph_fail(g, RLX_ERR_NO_MEMORY, "out of memory");
        return RLX_NODE_INVALID;
    }
    rlx_node id = g->n_nodes;
    char auto_name[32];
    if (!name) {
        snprintf(auto_name, sizeof auto_name, "#%d", id);
        name = auto_name;
    }
    char *nm = dupstr(name);
    if (!nm) {
        rlx_graph_fail(g, RLX_ERR_NO_MEMORY, "out of memory");
        return RLX_NODE_INVALID;
    }
    g->nodes[id] = *n;
    g->nodes[id].name = nm;
    g->nodes[id].segment = g->cur_segment;
    g->n_nodes++;
    return id;
}

rlx_node rlx_graph_node_new(rlx_graph *g, const char *name, rlx_op op, const rlx_op_params *p,
                            int n_in, const rlx_node *in, rlx_dtype dt, const rlx_shape *shape)
{
    if (!g || g->status != RLX_OK)
        return RLX_NODE_INVALID;
    rlx_gnode n;
    memset(&n, 0, sizeof n);
    n.op = op;
    if (p)
        n.p = *p;
    n.dtype = dt;
    if (shape)
        n.shape = *shape;
    char autoname[32];
    snprintf(autoname, sizeof autoname, "#%d", g->n_nodes);
    const char *shown = name ? name : autoname;
    if (n_in < 0 || n_in > RLX_MAX_INPUTS) {
        rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "%s '%s': too many inputs (%d)", rlx_op_name(op),
                       shown, n_in);
        return RLX_NODE_INVALID;
    }
    n.n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        if (in[i] < 0 || in[i] >= g->n_nodes) {
            rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "%s '%s': input %d is not a valid node",
                           rlx_op_name(op), shown, i);
            return RLX_NODE_INVALID;
        }
        n.in[i] = in[i];
    }
    char msg[768];
    rlx_dtype odt;
    rlx_shape osh;
    if (rlx_graph_infer(g, &n, &odt, &osh, msg, sizeof msg) != RLX_OK) {
        rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "%s '%s': %s", rlx_op_name(op), shown, msg);
        return RLX_NODE_INVALID;
    }
    n.dtype = odt;
    n.shape = osh;
    return push_node(g, &n, name);
}

static rlx_node source(rlx_graph *g, rlx_op op, const char *name, rlx_dtype dt, rlx_shape shape)
{
    if (!g || g->status != RLX_OK)
        return RLX_NODE_INVALID;
    if (!name) {
        rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "%s: needs a name", rlx_op_name(op));
        return RLX_NODE_INVALID;
    }
    if (op != RLX_OP_CONST)
        for (int32_t i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].op == op && strcmp(g->nodes[i].name, name) == 0) {
                rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "%s '%s': declared twice", rlx_op_name(op),
                               name);
                return RLX_NODE_INVALID;
            }
    return rlx_graph_node_new(g, name, op, NULL, 0, NULL, dt, &shape);
}

rlx_node rlx_graph_input(rlx_graph *g, const char *name, rlx_dtype dt, rlx_shape shape)
{
    return source(g, RLX_OP_INPUT, name, dt, shape);
}

rlx_node rlx_graph_param(rlx_graph *g, const char *name, rlx_dtype dt, rlx_shape shape)
{
    return source(g, RLX_OP_PARAM, name, dt, shape);
}

rlx_node rlx_graph_state(rlx_graph *g, const char *name, rlx_dtype dt, rlx_shape shape)
{
    return source(g, RLX_OP_STATE, name, dt, shape);
}

rlx_node rlx_graph_const(rlx_graph *g, const char *name, rlx_dtype dt, rlx_shape shape,
                         const void *data)
{
    if (!g || g->status != RLX_OK)
        return RLX_NODE_INVALID;
    if (!data) {
        rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "const '%s': no data", name ? name : "?");
        return RLX_NODE_INVALID;
    }
    rlx_node id = rlx_graph_node_new(g, name, RLX_OP_CONST, NULL, 0, NULL, dt, &shape);
    if (id == RLX_NODE_INVALID)
        return id;
    size_t nb = rlx_graph_const_bytes(&g->nodes[id]);
    void *d = malloc(nb ? nb : 1);
    if (!d) {
        rlx_graph_fail(g, RLX_ERR_NO_MEMORY, "out of memory");
        return RLX_NODE_INVALID;
    }
    memcpy(d, data, nb);
    g->nodes[id].data = d;
    return id;
}

rlx_node rlx_graph_const_f32(rlx_graph *g, const char *name, rlx_shape shape, const float *data)
{
    return rlx_graph_const(g, name, RLX_DTYPE_F32, shape, data);
}

rlx_node rlx_graph_const_i32(rlx_graph *g, const char *name, rlx_shape shape, const int32_t *data)
{
    return rlx_graph_const(g, name, RLX_DTYPE_I32, shape, data);
}

rlx_node rlx_graph_scalar(rlx_graph *g, float value)
{
    return rlx_graph_const_f32(g, NULL, rlx_shape_make(0, NULL), &value);
}

static rlx_op_params zero_params(void)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static rlx_node bad_op(rlx_graph *g, const char *fn, rlx_op op)
{
    if (g && g->status == RLX_OK)
        rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "%s: %s is not allowed here", fn, rlx_op_name(op));
    return RLX_NODE_INVALID;
}

rlx_node rlx_graph_unary(rlx_graph *g, const char *name, rlx_op op, rlx_node x)
{
    if (op < RLX_OP_NEG || op > RLX_OP_SQUARE || op == RLX_OP_GELU)
        return bad_op(g, "rlx_graph_unary", op);
    return rlx_graph_node_new(g, name, op, NULL, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_binary(rlx_graph *g, const char *name, rlx_op op, rlx_node a, rlx_node b)
{
    if (op < RLX_OP_ADD || op > RLX_OP_POW)
        return bad_op(g, "rlx_graph_binary", op);
    rlx_node in[2] = {a, b};
    return rlx_graph_node_new(g, name, op, NULL, 2, in, RLX_DTYPE_INVALID, NULL);
}

#define UNARY(fn, OP)                                                   \
    rlx_node rlx_graph_##fn(rlx_graph *g, const char *name, rlx_node x) \
    {                                                                   \
        return rlx_graph_unary(g, name, RLX_OP_##OP, x);                \
    }
#define BINARY(fn, OP)                                                              \
    rlx_node rlx_graph_##fn(rlx_graph *g, const char *name, rlx_node a, rlx_node b) \
    {                                                                               \
        return rlx_graph_binary(g, name, RLX_OP_##OP, a, b);                        \
    }
UNARY(neg, NEG)
UNARY(exp, EXP)
UNARY(sqrt, SQRT)
UNARY(tanh, TANH)
UNARY(sigmoid, SIGMOID)
UNARY(relu, RELU)
UNARY(silu, SILU)
BINARY(add, ADD)
BINARY(sub, SUB)
BINARY(mul, MUL)
BINARY(div, DIV)

rlx_node rlx_graph_gelu(rlx_graph *g, const char *name, rlx_node x, rlx_gelu_approx approx)
{
    rlx_op_params p = zero_params();
    p.gelu.approx = approx;
    return rlx_graph_node_new(g, name, RLX_OP_GELU, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_cast(rlx_graph *g, const char *name, rlx_node x, rlx_dtype to)
{
    return rlx_graph_node_new(g, name, RLX_OP_CAST, NULL, 1, &x, to, NULL);
}

rlx_node rlx_graph_clamp(rlx_graph *g, const char *name, rlx_node x, float lo, float hi)
{
    rlx_op_params p = zero_params();
    p.clamp.lo = lo;
    p.clamp.hi = hi;
    return rlx_graph_node_new(g, name, RLX_OP_CLAMP, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_scale(rlx_graph *g, const char *name, rlx_node x, float mul, float add)
{
    rlx_op_params p = zero_params();
    p.scale.mul = mul;
    p.scale.add = add;
    return rlx_graph_node_new(g, name, RLX_OP_SCALE, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_cmp(rlx_graph *g, const char *name, rlx_cmp kind, rlx_node a, rlx_node b)
{
    rlx_op_params p = zero_params();
    p.cmp.kind = kind;
    rlx_node in[2] = {a, b};
    return rlx_graph_node_new(g, name, RLX_OP_CMP, &p, 2, in, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_where(rlx_graph *g, const char *name, rlx_node cond, rlx_node a, rlx_node b)
{
    rlx_node in[3] = {cond, a, b};
    return rlx_graph_node_new(g, name, RLX_OP_WHERE, NULL, 3, in, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_matmul(rlx_graph *g, const char *name, rlx_node a, rlx_node b, bool trans_a,
                          bool trans_b)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.matmul.trans_a = trans_a;
    p.matmul.trans_b = trans_b;
    rlx_node in[2] = {a, b};
    return rlx_graph_node_new(g, name, RLX_OP_MATMUL, &p, 2, in, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_linear(rlx_graph *g, const char *name, rlx_node x, rlx_node w, rlx_node bias)
{
    rlx_node y = rlx_graph_matmul(g, name, x, w, false, true);
    if (bias == RLX_NODE_INVALID)
        return y;
    char bn[256];
    snprintf(bn, sizeof bn, "%s.bias_add", name ? name : "linear");
    return rlx_graph_add(g, bn, y, bias);
}

rlx_node rlx_graph_reduce(rlx_graph *g, const char *name, rlx_op op, rlx_node x, int axis,
                          bool keepdim)
{
    if (op != RLX_OP_REDUCE_SUM && op != RLX_OP_REDUCE_MEAN && op != RLX_OP_REDUCE_MAX)
        return bad_op(g, "rlx_graph_reduce", op);
    if (!g || g->status != RLX_OK || x < 0 || x >= g->n_nodes)
        return rlx_graph_node_new(g, name, op, NULL, 1, &x, RLX_DTYPE_INVALID, NULL);
    rlx_op_params p = zero_params();
    p.reduce.axis = norm_axis(axis, g->nodes[x].shape.rank);
    p.reduce.keepdim = keepdim;
    return rlx_graph_node_new(g, name, op, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_argmax(rlx_graph *g, const char *name, rlx_node x, int axis)
{
    rlx_op_params p = zero_params();
    p.reduce.axis = axis;
    p.reduce.keepdim = false;
    if (g && x >= 0 && x < g->n_nodes)
        p.reduce.axis = norm_axis(axis, g->nodes[x].shape.rank);
    return rlx_graph_node_new(g, name, RLX_OP_ARGMAX, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_topk(rlx_graph *g, const char *name, rlx_node x, int axis, int k, bool largest,
                        bool indices)
{
    rlx_op_params p = zero_params();
    p.topk.axis = axis;
    p.topk.k = k;
    p.topk.largest = largest;
    p.topk.indices = indices;
    if (g && x >= 0 && x < g->n_nodes)
        p.topk.axis = norm_axis(axis, g->nodes[x].shape.rank);
    return rlx_graph_node_new(g, name, RLX_OP_TOPK, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

/* Collect optional inputs, skipping RLX_NODE_INVALID ones. */
static int opt_inputs(rlx_node *in, int n, rlx_node a, rlx_node b)
{
    if (a != RLX_NODE_INVALID)
        in[n++] = a;
    if (b != RLX_NODE_INVALID)
        in[n++] = b;
    return n;
}

rlx_node rlx_graph_softmax(rlx_graph *g, const char *name, rlx_node x, rlx_node mask, float scale)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.softmax.scale = scale == 0.0f ? 1.0f : scale;
    p.softmax.has_mask = mask != RLX_NODE_INVALID;
    rlx_node in[2] = {x};
    int n = opt_inputs(in, 1, mask, RLX_NODE_INVALID);
    return rlx_graph_node_new(g, name, RLX_OP_SOFTMAX, &p, n, in, RLX_DTYPE_INVALID, NULL);
}

static rlx_node norm(rlx_graph *g, const char *name, rlx_op op, rlx_node x, rlx_node w, rlx_node b,
                     float eps, int groups)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.norm.eps = eps;
    p.norm.groups = groups;
    p.norm.has_weight = w != RLX_NODE_INVALID;
    p.norm.has_bias = b != RLX_NODE_INVALID;
    if (p.norm.has_bias && !p.norm.has_weight) {
        if (g && g->status == RLX_OK)
            rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "%s '%s': a bias needs a weight",
                           rlx_op_name(op), name ? name : "?");
        return RLX_NODE_INVALID;
    }
    rlx_node in[3] = {x};
    int n = opt_inputs(in, 1, w, b);
    return rlx_graph_node_new(g, name, op, &p, n, in, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_layer_norm(rlx_graph *g, const char *name, rlx_node x, rlx_node weight,
                              rlx_node bias, float eps)
{
    return norm(g, name, RLX_OP_LAYER_NORM, x, weight, bias, eps, 0);
}

rlx_node rlx_graph_rms_norm(rlx_graph *g, const char *name, rlx_node x, rlx_node weight, float eps)
{
    return norm(g, name, RLX_OP_RMS_NORM, x, weight, RLX_NODE_INVALID, eps, 0);
}

rlx_node rlx_graph_add_rms_norm(rlx_graph *g, const char *name, rlx_node a, rlx_node b,
                                rlx_node weight, float eps)
{
    rlx_op_params p = zero_params();
    p.norm.eps = eps;
    p.norm.has_weight = true;
    rlx_node in[3] = {a, b, weight};
    return rlx_graph_node_new(g, name, RLX_OP_ADD_RMS_NORM, &p, 3, in, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_add_rms_norm_sum(rlx_graph *g, const char *name, rlx_node a, rlx_node b,
                                    rlx_node weight, float eps, rlx_node *sum)
{
    if (sum)
        *sum = RLX_NODE_INVALID;
    rlx_op_params p = zero_params();
    p.norm.eps = eps;
    p.norm.has_weight = true;
    p.norm.keep_sum = true;
    rlx_node in[3] = {a, b, weight};
    rlx_node both =
        rlx_graph_node_new(g, name, RLX_OP_ADD_RMS_NORM, &p, 3, in, RLX_DTYPE_INVALID, NULL);
    if (both == RLX_NODE_INVALID)
        return RLX_NODE_INVALID;
    rlx_shape half = g->nodes[a].shape;
    rlx_node part[2];
    for (int k = 0; k < 2; k++) {
        char nm[160];
        snprintf(nm, sizeof nm, "%s.%s", name ? name : g->nodes[both].name, k ? "norm" : "sum");
        rlx_node s =
            rlx_graph_slice(g, NULL, both, half.rank - 1, rlx_dim_const(k), rlx_dim_const(1));
        part[k] = rlx_graph_reshape(g, nm, s, half);
        if (part[k] == RLX_NODE_INVALID)
            return RLX_NODE_INVALID;
    }
    if (sum)
        *sum = part[0];
    return part[1];
}

rlx_node rlx_graph_op(rlx_graph *g, const char *name, rlx_op op, const rlx_op_params *p, int n_in,
                      const rlx_node *in, rlx_dtype dt, const rlx_shape *shape)
{
    if (op <= RLX_OP_STATE || op >= RLX_OP_COUNT)
        return bad_op(g, "rlx_graph_op", op);
    return rlx_graph_node_new(g, name, op, p, n_in, in, dt, shape);
}

rlx_node rlx_graph_group_norm(rlx_graph *g, const char *name, rlx_node x, int groups,
                              rlx_node weight, rlx_node bias, float eps)
{
    return norm(g, name, RLX_OP_GROUP_NORM, x, weight, bias, eps, groups);
}

rlx_node rlx_graph_rope(rlx_graph *g, const char *name, rlx_node x, rlx_node positions,
                        rlx_node freq_factors, rlx_rope_params rp)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.rope.mode = rp.mode;
    p.rope.freq_base = rp.freq_base != 0.0f ? rp.freq_base : 10000.0f;
    p.rope.freq_scale = rp.freq_scale != 0.0f ? rp.freq_scale : 1.0f;
    p.rope.has_freq_factors = freq_factors != RLX_NODE_INVALID;
    p.rope.n_rot = rp.n_rot;
    p.rope.seq_axis = rp.seq_axis;
    if (g && x >= 0 && x < g->n_nodes) {
        const rlx_shape *s = &g->nodes[x].shape;
        if (rp.n_rot == 0 && s->rank > 0)
            p.rope.n_rot = (int32_t)s->d[s->rank - 1].k;
        if (rp.seq_axis == 0 && s->rank >= 3)
            p.rope.seq_axis = s->rank - 3;
    }
    rlx_node in[3] = {x, positions};
    int n = opt_inputs(in, 2, freq_factors, RLX_NODE_INVALID);
    return rlx_graph_node_new(g, name, RLX_OP_ROPE, &p, n, in, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_attention(rlx_graph *g, const char *name, rlx_node q, rlx_node k, rlx_node v,
                             rlx_node bias, rlx_attention_params ap)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.attn.mask = ap.mask;
    p.attn.window = ap.window;
    p.attn.scale = ap.scale;
    p.attn.softcap = ap.softcap;
    p.attn.has_bias = bias != RLX_NODE_INVALID;
    p.attn.bias_grid_w = ap.bias_grid_w;
    if (g && q >= 0 && q < g->n_nodes && p.attn.scale == 0.0f) {
        const rlx_shape *s = &g->nodes[q].shape;
        if (s->rank == 4 && rlx_dim_is_const(s->d[3]) && s->d[3].k > 0)
            p.attn.scale = 1.0f / sqrtf((float)s->d[3].k);
    }
    rlx_node in[4] = {q, k, v};
    int n = opt_inputs(in, 3, bias, RLX_NODE_INVALID);
    return rlx_graph_node_new(g, name, RLX_OP_ATTENTION, &p, n, in, RLX_DTYPE_INVALID, NULL);
}

static rlx_node conv(rlx_graph *g, const char *name, rlx_op op, rlx_node x, rlx_node w,
                     rlx_node bias, const int *stride, const int *pad, const int *dil,
                     const int *out_pad, int groups, int sp)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < sp; i++) {
        p.conv.stride[i] = stride ? stride[i] : 1;
        p.conv.pad[i] = pad ? pad[i] : 0;
        p.conv.dilation[i] = dil ? dil[i] : 1;
        p.conv.out_pad[i] = out_pad ? out_pad[i] : 0;
    }
    p.conv.groups = groups > 0 ? groups : 1;
    p.conv.has_bias = bias != RLX_NODE_INVALID;
    rlx_node in[3] = {x, w};
    int n = opt_inputs(in, 2, bias, RLX_NODE_INVALID);
    return rlx_graph_node_new(g, name, op, &p, n, in, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_conv1d(rlx_graph *g, const char *name, rlx_node x, rlx_node w, rlx_node bias,
                          int stride, int pad, int dilation, int groups)
{
    return conv(g, name, RLX_OP_CONV1D, x, w, bias, &stride, &pad, &dilation, NULL, groups, 1);
}

rlx_node rlx_graph_conv2d(rlx_graph *g, const char *name, rlx_node x, rlx_node w, rlx_node bias,
                          const int stride[2], const int pad[2], const int dilation[2], int groups)
{
    return conv(g, name, RLX_OP_CONV2D, x, w, bias, stride, pad, dilation, NULL, groups, 2);
}

rlx_node rlx_graph_conv_transpose2d(rlx_graph *g, const char *name, rlx_node x, rlx_node w,
                                    rlx_node bias, const int stride[2], const int pad[2],
                                    const int out_pad[2], int groups)
{
    return conv(g, name, RLX_OP_CONV_TRANSPOSE2D, x, w, bias, stride, pad, NULL, out_pad, groups,
                2);
}

rlx_node rlx_graph_resize(rlx_graph *g, const char *name, rlx_node x, int64_t out_h, int64_t out_w,
                          rlx_resize_mode mode, bool align_corners)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.resize.mode = mode;
    p.resize.align_corners = align_corners;
    rlx_shape s = rlx_shape_make(0, NULL);
    if (g && x >= 0 && x < g->n_nodes) {
        s = g->nodes[x].shape;
        if (s.rank >= 2) {
            s.d[s.rank - 2] = rlx_dim_const(out_h);
            s.d[s.rank - 1] = rlx_dim_const(out_w);
        }
    }
    return rlx_graph_node_new(g, name, RLX_OP_RESIZE, &p, 1, &x, RLX_DTYPE_INVALID, &s);
}

rlx_node rlx_graph_pool2d(rlx_graph *g, const char *name, rlx_node x, rlx_pool_mode mode,
                          const int kernel[2], const int stride[2], const int pad[2])
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.pool.mode = mode;
    for (int i = 0; i < 2; i++) {
        p.pool.kernel[i] = kernel[i];
        p.pool.stride[i] = stride ? stride[i] : kernel[i];
        p.pool.pad[i] = pad ? pad[i] : 0;
    }
    return rlx_graph_node_new(g, name, RLX_OP_POOL2D, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_reshape(rlx_graph *g, const char *name, rlx_node x, rlx_shape shape)
{
    return rlx_graph_node_new(g, name, RLX_OP_RESHAPE, NULL, 1, &x, RLX_DTYPE_INVALID, &shape);
}

rlx_node rlx_graph_permute(rlx_graph *g, const char *name, rlx_node x, const int *perm)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    int rank = g && x >= 0 && x < g->n_nodes ? g->nodes[x].shape.rank : 0;
    for (int i = 0; i < rank; i++)
        p.permute.perm[i] = perm[i];
    return rlx_graph_node_new(g, name, RLX_OP_PERMUTE, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_transpose(rlx_graph *g, const char *name, rlx_node x, int ax0, int ax1)
{
    int perm[RLX_MAX_DIMS];
    int rank = g && x >= 0 && x < g->n_nodes ? g->nodes[x].shape.rank : 0;
    ax0 = norm_axis(ax0, rank);
    ax1 = norm_axis(ax1, rank);
    for (int i = 0; i < RLX_MAX_DIMS; i++)
        perm[i] = i;
    if (ax0 >= 0 && ax0 < rank && ax1 >= 0 && ax1 < rank) {
        perm[ax0] = ax1;
        perm[ax1] = ax0;
    }
    return rlx_graph_permute(g, name, x, perm);
}

rlx_node rlx_graph_slice(rlx_graph *g, const char *name, rlx_node x, int axis, rlx_dim start,
                         rlx_dim len)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    rlx_shape s = rlx_shape_make(0, NULL);
    if (g && x >= 0 && x < g->n_nodes) {
        s = g->nodes[x].shape;
        axis = norm_axis(axis, s.rank);
        if (axis >= 0 && axis < s.rank)
            s.d[axis] = len;
    }
    p.slice.axis = axis;
    p.slice.start = start;
    p.slice.step = 1;
    return rlx_graph_node_new(g, name, RLX_OP_SLICE, &p, 1, &x, RLX_DTYPE_INVALID, &s);
}

rlx_node rlx_graph_concat(rlx_graph *g, const char *name, int n, const rlx_node *xs, int axis)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    if (n > 0 && g && xs[0] >= 0 && xs[0] < g->n_nodes)
        axis = norm_axis(axis, g->nodes[xs[0]].shape.rank);
    p.concat.axis = axis;
    return rlx_graph_node_new(g, name, RLX_OP_CONCAT, &p, n, xs, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_pad(rlx_graph *g, const char *name, rlx_node x, const int64_t *before,
                       const int64_t *after, float value)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    int rank = g && x >= 0 && x < g->n_nodes ? g->nodes[x].shape.rank : 0;
    for (int i = 0; i < rank; i++) {
        p.pad.before[i] = before ? before[i] : 0;
        p.pad.after[i] = after ? after[i] : 0;
    }
    p.pad.value = value;
    return rlx_graph_node_new(g, name, RLX_OP_PAD, &p, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_copy(rlx_graph *g, const char *name, rlx_node x)
{
    return rlx_graph_node_new(g, name, RLX_OP_COPY, NULL, 1, &x, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_gather(rlx_graph *g, const char *name, rlx_node table, rlx_node ids)
{
    rlx_node in[2] = {table, ids};
    return rlx_graph_node_new(g, name, RLX_OP_GATHER, NULL, 2, in, RLX_DTYPE_INVALID, NULL);
}

rlx_node rlx_graph_scatter(rlx_graph *g, const char *name, rlx_node state, rlx_node src, int axis,
                           rlx_dim offset)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    if (g && state >= 0 && state < g->n_nodes)
        axis = norm_axis(axis, g->nodes[state].shape.rank);
    p.scatter.axis = axis;
    p.scatter.offset = offset;
    rlx_node in[2] = {state, src};
    return rlx_graph_node_new(g, name, RLX_OP_SCATTER, &p, 2, in, RLX_DTYPE_INVALID, NULL);
}

void rlx_graph_output(rlx_graph *g, const char *name, rlx_node node)
{
    if (!g || g->status != RLX_OK)
        return;
    if (!name || node < 0 || node >= g->n_nodes) {
        rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "output '%s': %s", name ? name : "?",
                       name ? "not a valid node" : "needs a name");
        return;
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0) {
            rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "output '%s': declared twice", name);
            return;
        }
    if (rlx_dtype_get(g->nodes[node].dtype)->quantized) {
        rlx_graph_fail(g, RLX_ERR_INVALID_ARG, "output '%s': cannot output block-quantized %s",
                       name, rlx_dtype_name(g->nodes[node].dtype));
        return;
    }
    char *nm = dupstr(name);
    if (!nm || !grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof *g->outputs)) {
        free(nm);
        rlx_graph_fail(g, RLX_ERR_NO_MEMORY, "out of memory");
        return;
    }
    g->outputs[g->n_outputs].name = nm;
    g->outputs[g->n_outputs].node = node;
    g->n_outputs++;
}

/* ---------------------------------------------------------------- inspection */

int32_t rlx_graph_node_count(const rlx_graph *g)
{
    return g->n_nodes;
}

int32_t rlx_graph_output_count(const rlx_graph *g)
{
    return g->n_outputs;
}

static const rlx_gnode *get(const rlx_graph *g, rlx_node n)
{
    return g && n >= 0 && n < g->n_nodes ? &g->nodes[n] : NULL;
}

rlx_op rlx_graph_node_op(const rlx_graph *g, rlx_node n)
{
    const rlx_gnode *x = get(g, n);
    return x ? x->op : RLX_OP_NONE;
}

rlx_dtype rlx_graph_node_dtype(const rlx_graph *g, rlx_node n)
{
    const rlx_gnode *x = get(g, n);
    return x ? x->dtype : RLX_DTYPE_INVALID;
}

rlx_shape rlx_graph_node_shape(const rlx_graph *g, rlx_node n)
{
    const rlx_gnode *x = get(g, n);
    return x ? x->shape : rlx_shape_make(0, NULL);
}

const char *rlx_graph_node_name(const rlx_graph *g, rlx_node n)
{
    const rlx_gnode *x = get(g, n);
    return x ? x->name : NULL;
}

/* ---------------------------------------------------------------- mutation */

void rlx_graph_replace_uses(rlx_graph *g, rlx_node from, rlx_node to)
{
    for (int32_t i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++)
            if (g->nodes[i].in[j] == from && i != to)
                g->nodes[i].in[j] = to;
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i].node == from)
            g->outputs[i].node = to;
}

int32_t *rlx_graph_use_counts(const rlx_graph *g)
{
    int32_t *u = calloc((size_t)g->n_nodes + 1, sizeof *u);
    if (!u)
        return NULL;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op != RLX_OP_NONE)
            for (int j = 0; j < g->nodes[i].n_in; j++)
                u[g->nodes[i].in[j]]++;
    for (int32_t i = 0; i < g->n_outputs; i++)
        u[g->outputs[i].node]++;
    return u;
}

/* Extra ordering edges for the scatter write-after-read hazard: a scatter S
 * into T must come after every other reader of T. */
typedef struct topo {
    const rlx_graph *g;
    int32_t *state; /* 0 new, 1 on stack, 2 done */
    int32_t *order;
    int32_t n_order;
    int32_t **readers; /* per node: list of readers (for scatter targets only) */
    int32_t *n_readers;
} topo;

static bool topo_visit(topo *t, int32_t v)
{
    /* Iterative DFS would avoid deep recursion; graphs here have at most a
     * few tens of thousands of nodes and shallow-ish depth per chain, but to
     * be safe we use an explicit stack. */
    const rlx_graph *g = t->g;
    int32_t cap = 64, sp = 0;
    int32_t *stk = malloc(sizeof *stk * (size_t)cap * 2);
    if (!stk)
        return false;
    stk[0] = v;
    stk[1] = 0;
    sp = 1;
    if (t->state[v] != 0) {
        free(stk);
        return true;
    }
    t->state[v] = 1;
    while (sp > 0) {
        int32_t u = stk[2 * (sp - 1)], k = stk[2 * (sp - 1) + 1];
        const rlx_gnode *n = &g->nodes[u];
        int32_t n_extra = n->op == RLX_OP_SCATTER ? t->n_readers[n->in[0]] : 0;
        int32_t total = n->n_in + n_extra;
        if (k < total) {
            stk[2 * (sp - 1) + 1] = k + 1;
            int32_t w = k < n->n_in ? n->in[k] : t->readers[n->in[0]][k - n->n_in];
            if (w == u)
                continue;
            if (t->state[w] == 1) {
                free(stk);
                return false;
            }
            if (t->state[w] == 0) {
                if (sp == cap) {
                    cap *= 2;
                    int32_t *ns = realloc(stk, sizeof *stk * (size_t)cap * 2);
                    if (!ns) {
                        free(stk);
                        return false;
                    }
                    stk = ns;
                }
                t->state[w] = 1;
                stk[2 * sp] = w;
                stk[2 * sp + 1] = 0;
                sp++;
            }
            continue;
        }
        t->state[u] = 2;
        t->order[t->n_order++] = u;
        sp--;
    }
    free(stk);
    return true;
}

rlx_status rlx_graph_compact(rlx_graph *g)
{
    int32_t n = g->n_nodes;
    topo t = {.g = g};
    rlx_status st = RLX_OK;
    t.state = calloc((size_t)n + 1, sizeof *t.state);
    t.order = calloc((size_t)n + 1, sizeof *t.order);
    t.readers = calloc((size_t)n + 1, sizeof *t.readers);
    t.n_readers = calloc((size_t)n + 1, sizeof *t.n_readers);
    int32_t *remap = calloc((size_t)n + 1, sizeof *remap);
    rlx_gnode *nn = calloc((size_t)n + 1, sizeof *nn);
    if (!t.state || !t.order || !t.readers || !t.n_readers || !remap || !nn) {
        st = RLX_ERR_NO_MEMORY;
        goto out;
    }
    /* readers of scatter targets, other than the scatter itself and nodes
     * that depend on it (a reader of T that uses S cannot precede S; those
     * are exactly later scatters' consumers and S's own users, which read S,
     * not T) */
    for (int32_t i = 0; i < n; i++) {
        const rlx_gnode *x = &g->nodes[i];
        if (x->op != RLX_OP_SCATTER)
            continue;
        int32_t tg = x->in[0];
        if (t.readers[tg])
            continue;
        int32_t cnt = 0;
        for (int32_t j = 0; j < n; j++)
            for (int k = 0; k < g->nodes[j].n_in; k++)
                if (g->nodes[j].op != RLX_OP_NONE && g->nodes[j].in[k] == tg && j != i)
                    cnt++;
        t.readers[tg] = calloc((size_t)cnt + 1, sizeof **t.readers);
        if (!t.readers[tg]) {
            st = RLX_ERR_NO_MEMORY;
            goto out;
        }
        for (int32_t j = 0; j < n; j++) {
            if (g->nodes[j].op == RLX_OP_NONE)
                continue;
            for (int k = 0; k < g->nodes[j].n_in; k++)
                if (g->nodes[j].in[k] == tg && j != i) {
                    t.readers[tg][t.n_readers[tg]++] = j;
                    break;
                }
        }
    }
    /* Visit in id order so that the result stays close to builder order. */
    for (int32_t i = 0; i < n; i++) {
        if (g->nodes[i].op == RLX_OP_NONE || t.state[i])
            continue;
        if (!topo_visit(&t, i)) {
            st = rlx_graph_fail(g, RLX_ERR_INVALID_ARG,
                                "the graph has a cycle (or a state is read after it is "
                                "overwritten) around node '%s'",
                                g->nodes[i].name);
            goto out;
        }
    }
    for (int32_t i = 0; i < n; i++)
        remap[i] = -1;
    for (int32_t i = 0; i < t.n_order; i++)
        remap[t.order[i]] = i;
    for (int32_t i = 0; i < t.n_order; i++) {
        nn[i] = g->nodes[t.order[i]];
        for (int k = 0; k < nn[i].n_in; k++)
            nn[i].in[k] = remap[nn[i].in[k]];
    }
    for (int32_t i = 0; i < n; i++)
        if (g->nodes[i].op == RLX_OP_NONE) {
            free(g->nodes[i].name);
            free(g->nodes[i].data);
        }
    for (int32_t i = 0; i < g->n_outputs; i++)
        g->outputs[i].node = remap[g->outputs[i].node];
    free(g->nodes);
    g->nodes = nn;
    nn = NULL;
    g->cap_nodes = n + 1;
    g->n_nodes = t.n_order;
out:
    if (t.readers)
        for (int32_t i = 0; i < n; i++)
            free(t.readers[i]);
    free(t.readers);
    free(t.n_readers);
    free(t.state);
    free(t.order);
    free(remap);
    free(nn);
    return st;
}

/* ---------------------------------------------------------------- dumps */

static void params_text(const rlx_graph *g, const rlx_gnode *n, char *buf, size_t size)
{
    const rlx_op_params *p = &n->p;
    buf[0] = 0;
    switch (n->op) {
    case RLX_OP_MATMUL:
        snprintf(buf, size, " ta=%d tb=%d bias=%d act=%d alpha=%g", p->matmul.trans_a,
                 p->matmul.trans_b, p->matmul.has_bias, (int)p->matmul.act,
                 (double)p->matmul.alpha);
        break;
    case RLX_OP_SCALE:
        snprintf(buf, size, " mul=%g add=%g", (double)p->scale.mul, (double)p->scale.add);
        break;
    case RLX_OP_CLAMP:
        snprintf(buf, size, " lo=%g hi=%g", (double)p->clamp.lo, (double)p->clamp.hi);
        break;
    case RLX_OP_FUSED_ELEMENTWISE: {
        size_t len = (size_t)snprintf(buf, size, " steps=");
        for (int i = 0; i < p->fused.n_steps && len < size; i++)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "",
                                    rlx_op_name((rlx_op)p->fused.steps[i].op));
        break;
    }
    case RLX_OP_PERMUTE: {
        size_t len = (size_t)snprintf(buf, size, " perm=");
        for (int i = 0; i < n->shape.rank && len < size; i++)
            len +=
                (size_t)snprintf(buf + len, size - len, "%s%d", i ? "," : "", p->permute.perm[i]);
        break;
    }
    case RLX_OP_SLICE: {
        char s[64];
        rlx_graph_format_dim(g, p->slice.start, s, sizeof s);
        snprintf(buf, size, " axis=%d start=%s", p->slice.axis, s);
        break;
    }
    case RLX_OP_SCATTER: {
        char s[64];
        rlx_graph_format_dim(g, p->scatter.offset, s, sizeof s);
        snprintf(buf, size, " axis=%d offset=%s", p->scatter.axis, s);
        break;
    }
    case RLX_OP_REDUCE_SUM:
    case RLX_OP_REDUCE_MEAN:
    case RLX_OP_REDUCE_MAX:
    case RLX_OP_ARGMAX:
        snprintf(buf, size, " axis=%d", p->reduce.axis);
        break;
    case RLX_OP_CONCAT:
        snprintf(buf, size, " axis=%d", p->concat.axis);
        break;
    case RLX_OP_ATTENTION:
        snprintf(buf, size, " mask=%d scale=%g%s", (int)p->attn.mask, (double)p->attn.scale,
                 p->attn.bias_grid_w ? " grid-bias" : "");
        break;
    default:
        break;
    }
}

void rlx_graph_dump_text(const rlx_graph *g, FILE *f)
{
    for (int i = 0; i < g->n_symbols; i++)
        fprintf(f, "symbol %s <= %lld\n", g->sym_names[i], (long long)g->sym_max[i]);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const rlx_gnode *n = &g->nodes[i];
        char s[160], p[256];
        rlx_graph_format_shape(g, &n->shape, s, sizeof s);
        params_text(g, n, p, sizeof p);
        fprintf(f, "%%%d = %s %s %s '%s'", i, rlx_op_name(n->op), rlx_dtype_name(n->dtype), s,
                n->name);
        for (int k = 0; k < n->n_in; k++)
            fprintf(f, "%s%%%d", k ? ", " : " (", n->in[k]);
        fprintf(f, "%s%s\n", n->n_in ? ")" : "", p);
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        fprintf(f, "output '%s' = %%%d\n", g->outputs[i].name, g->outputs[i].node);
}

void rlx_graph_dump_dot(const rlx_graph *g, FILE *f)
{
    fprintf(f, "digraph rlx {\n  node [shape=box, fontname=\"monospace\"];\n");
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const rlx_gnode *n = &g->nodes[i];
        char s[160];
        rlx_graph_format_shape(g, &n->shape, s, sizeof s);
        fprintf(f, "  n%d [label=\"%s\\n", i, rlx_op_name(n->op));
        for (const char *c = n->name; *c; c++)
            if (*c != '"' && *c != '\\')
                fputc(*c, f);
        fprintf(f, "\\n%s %s\"%s];\n", rlx_dtype_name(n->dtype), s,
                n->op <= RLX_OP_STATE ? ", style=filled, fillcolor=lightgrey" : "");
        for (int k = 0; k < n->n_in; k++)
            fprintf(f, "  n%d -> n%d;\n", n->in[k], i);
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        fprintf(f, "  out%d [label=\"%s\", shape=ellipse];\n  n%d -> out%d;\n", i,
                g->outputs[i].name, g->outputs[i].node, i);
    fprintf(f, "}\n");
}
