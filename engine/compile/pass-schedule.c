/* schedule: lower the (compacted, hence already ordered) graph to LIR.
 *
 * One value per node. Sources get their homes (param/state/input/const).
 * RESHAPE of a contiguous value, SLICE at a constant start, and PERMUTE are
 * views: they share their source's home with their own offset and strides
 * (the instruction stays in the program; a backend treats an instruction
 * whose output is a view as a no-op). SCATTER writes in place into its
 * state. A graph output computed by a plain instruction is written straight
 * into its OUTPUT binding; otherwise a COPY fills the binding.
 *
 * Segments: with segment >= 0 only that segment's nodes are lowered; a value
 * from another segment is an INPUT named "seg<k>:<node>", and a value used by
 * another segment is an OUTPUT under the same name. A state written by an
 * earlier segment is read here through the state itself. */
#include "engine/compile/passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct bind_list {
    rlx_lir_binding *b;
    int32_t n, cap;
} bind_list;

typedef struct sched {
    const rlx_graph *g;
    const rlx_compile_opts *opts;
    int seg;
    rlx_lir_value *values;
    int32_t n_values, cap_values;
    rlx_lir_instr *instrs;
    int32_t n_instrs, cap_instrs;
    bind_list params, states, inputs, outputs;
    uint8_t *cdata;
    uint64_t cbytes, ccap;
    int32_t *val;     /* node -> value */
    bool *used_here;  /* node is read by a node of this segment */
    bool *used_later; /* node is read by a node of another segment */
    int32_t *out_idx; /* node -> first output binding it fills directly, or -1 */
    rlx_error **err;
    rlx_status st;
} sched;

static bool is_source(rlx_op op)
{
    return op == RLX_OP_INPUT || op == RLX_OP_PARAM || op == RLX_OP_STATE || op == RLX_OP_CONST;
}

static bool grow(void **arr, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    int32_t nc = *cap ? *cap * 2 : 32;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = nc;
    return true;
}

static rlx_status oom(sched *s)
{
    if (s->st == RLX_OK)
        s->st = rlx_error_set(s->err, RLX_ERR_NO_MEMORY, "schedule: out of memory");
    return s->st;
}

static char *dupstr(const char *x)
{
    size_t n = strlen(x) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, x, n);
    return d;
}

static uint64_t value_bytes(const rlx_graph *g, rlx_dtype dt, const rlx_shape *s,
                            const rlx_dim *stride)
{
    const rlx_dtype_info *ti = rlx_dtype_get(dt);
    if (ti->quantized) {
        uint64_t b = 0;
        if (rlx_dtype_row_bytes(dt, (uint64_t)rlx_graph_numel_upper(g, s), &b) != RLX_OK)
            return 0;
        return b;
    }
    uint64_t ext = 1;
    for (int d = 0; d < s->rank; d++) {
        int64_t n = rlx_dim_upper(s->d[d], g->sym_max);
        if (n <= 0)
            return 0;
        ext += (uint64_t)(n - 1) * (uint64_t)rlx_dim_upper(stride[d], g->sym_max);
    }
    return ext * ti->type_size;
}

/* The symbols that a value of shape s pins to 1 whenever it has any
 * element: a dim that is a lone symbol bounded by 1 (a decode step's SEQ)
 * is 0 or 1, and at 0 there is nothing to address. A bit per symbol. */
/* The symbol a dim is alone (k = 0, one term of factor 1), else -1. */
static int lone_sym(rlx_dim x)
{
    int sym = x.sym[0];
    if (x.k != 0 || sym < 0 || sym >= RLX_MAX_SYMBOLS || x.mul[0] != 1 || x.sym[1] >= 0)
        return -1;
    return sym;
}

static uint32_t pinned_ones(const rlx_graph *g, const rlx_shape *s)
{
    uint32_t m = 0;
    for (int d = 0; d < s->rank; d++) {
        int sym = lone_sym(s->d[d]);
        if (sym >= 0 && g->sym_max[sym] == 1)
            m |= 1u << sym;
    }
    return m;
}

/* d with the symbols of `ones` at 1 (canonical again) */
static rlx_dim pin_ones(rlx_dim d, uint32_t ones)
{
    rlx_dim r = rlx_dim_const(d.k);
    for (int t = 0; t < RLX_DIM_TERMS; t++) {
        int sym = d.sym[t];
        if (sym < 0 || d.mul[t] == 0)
            continue;
        if (sym < RLX_MAX_SYMBOLS && (ones >> sym & 1u))
            r.k += d.mul[t];
        else if (!rlx_dim_add(r, rlx_dim_scale(rlx_dim_sym(sym), d.mul[t]), &r))
            return d;
    }
    return r;
}

/* Are these strides the row-major defaults of the shape? Dims of one
 * element take any stride; so do dims of a symbol that must be 1 for the
 * value to have elements, and strides are compared with it at 1 (the
 * attention output of a decode step, [SEQ, H, D] permuted from [H, SEQ,
 * D], is then contiguous and its reshape a view, not a copy). */
static bool strides_contiguous(const rlx_graph *g, const rlx_shape *s, const rlx_dim *stride)
{
    rlx_dim def[RLX_MAX_DIMS];
    bool exact;
    rlx_contiguous_strides(s, g->sym_max, def, &exact);
    if (!exact)
        return false;
    uint32_t ones = pinned_ones(g, s);
    for (int d = 0; d < s->rank; d++) {
        rlx_dim x = s->d[d];
        int sym = lone_sym(x);
        bool one = (rlx_dim_is_const(x) && x.k == 1) || (sym >= 0 && (ones >> sym & 1u));
        if (!one && !rlx_dim_equal(pin_ones(def[d], ones), pin_ones(stride[d], ones)))
            return false;
    }
    return true;
}

static int32_t new_value(sched *s, rlx_dtype dt, const rlx_shape *shape)
{
    if (!grow((void **)&s->values, &s->cap_values, s->n_values + 1, sizeof *s->values)) {
        oom(s);
        return -1;
    }
    rlx_lir_value *v = &s->values[s->n_values];
    bool exact;
    memset(v, 0, sizeof *v);
    v->dtype = dt;
    v->shape = *shape;
    rlx_contiguous_strides(shape, s->g->sym_max, v->stride, &exact);
    v->contiguous = exact;
    v->home = RLX_HOME_ARENA;
    v->index = -1;
    v->view_of = -1;
    v->max_bytes = value_bytes(s->g, dt, shape, v->stride);
    return s->n_values++;
}

static int32_t add_binding(sched *s, bind_list *l, const char *name, rlx_dtype dt,
                           const rlx_shape *shape)
{
    for (int32_t i = 0; i < l->n; i++)
        if (strcmp(l->b[i].name, name) == 0)
            return i;
    if (!grow((void **)&l->b, &l->cap, l->n + 1, sizeof *l->b)) {
        oom(s);
        return -1;
    }
    rlx_lir_binding *b = &l->b[l->n];
    memset(b, 0, sizeof *b);
    b->name = dupstr(name);
    if (!b->name) {
        oom(s);
        return -1;
    }
    b->dtype = dt;
    b->shape = *shape;
    for (int d = 0; d < shape->rank; d++)
        b->shape.d[d] = rlx_dim_const(rlx_dim_upper(shape->d[d], s->g->sym_max));
    rlx_dim st[RLX_MAX_DIMS];
    bool exact;
    rlx_contiguous_strides(&b->shape, s->g->sym_max, st, &exact);
    b->max_bytes = value_bytes(s->g, dt, &b->shape, st);
    return l->n++;
}

static int32_t add_instr(sched *s, rlx_op op, const rlx_op_params *p, int n_in, const int32_t *in,
                         int32_t out, int32_t node)
{
    if (!grow((void **)&s->instrs, &s->cap_instrs, s->n_instrs + 1, sizeof *s->instrs)) {
        oom(s);
        return -1;
    }
    rlx_lir_instr *ins = &s->instrs[s->n_instrs];
    memset(ins, 0, sizeof *ins);
    ins->op = op;
    if (p)
        ins->p = *p;
    ins->n_in = n_in;
    for (int k = 0; k < n_in; k++)
        ins->in[k] = in[k];
    ins->out = out;
    ins->node = node;
    return s->n_instrs++;
}

static uint64_t add_const(sched *s, const void *data, uint64_t n)
{
    uint64_t off = (s->cbytes + 63) / 64 * 64;
    if (n == 0)
        return off; /* an empty constant (a 0-element tensor): nothing to store */
    if (off + n > s->ccap) {
        uint64_t nc = s->ccap ? s->ccap * 2 : 4096;
        while (nc < off + n)
            nc *= 2;
        uint8_t *p = realloc(s->cdata, (size_t)nc);
        if (!p) {
            oom(s);
            return 0;
        }
        s->cdata = p;
        s->ccap = nc;
    }
    memset(s->cdata + s->cbytes, 0, (size_t)(off - s->cbytes));
    memcpy(s->cdata + off, data, (size_t)n);
    s->cbytes = off + n;
    return off;
}

static bool in_segment(const sched *s, const rlx_gnode *n)
{
    return s->seg < 0 || n->segment == s->seg;
}

/* Through scatters to the STATE node they write. */
static int32_t state_root(const rlx_graph *g, int32_t i)
{
    while (g->nodes[i].op == RLX_OP_SCATTER)
        i = g->nodes[i].in[0];
    return i;
}

static void seg_name(const sched *s, int32_t node, char *buf, size_t size)
{
    snprintf(buf, size, "seg%d:%s", s->g->nodes[node].segment, s->g->nodes[node].name);
}

/* The value of a node produced elsewhere (another segment). */
static int32_t external_value(sched *s, int32_t i)
{
    const rlx_gnode *n = &s->g->nodes[i];
    int32_t v = new_value(s, n->dtype, &n->shape);
    if (v < 0)
        return -1;
    int32_t r = state_root(s->g, i);
    if (s->g->nodes[r].op == RLX_OP_STATE) {
        const rlx_gnode *st = &s->g->nodes[r];
        s->values[v].home = RLX_HOME_STATE;
        s->values[v].index = add_binding(s, &s->states, st->name, st->dtype, &st->shape);
        return v;
    }
    if (!s->values[v].contiguous) {
        s->st = rlx_error_set(s->err, RLX_ERR_UNSUPPORTED,
                              "schedule: '%s' crosses segments with a shape whose layout is not "
                              "affine in the symbols",
                              n->name);
        return -1;
    }
    char nm[512];
    seg_name(s, i, nm, sizeof nm);
    s->values[v].home = RLX_HOME_INPUT;
    s->values[v].index = add_binding(s, &s->inputs, nm, n->dtype, &n->shape);
    return v;
}

static int32_t source_value(sched *s, int32_t i)
{
    const rlx_gnode *n = &s->g->nodes[i];
    int32_t v = new_value(s, n->dtype, &n->shape);
    if (v < 0)
        return -1;
    rlx_lir_value *val = &s->values[v];
    switch (n->op) {
    case RLX_OP_PARAM:
        val->home = RLX_HOME_PARAM;
        val->index = add_binding(s, &s->params, n->name, n->dtype, &n->shape);
        break;
    case RLX_OP_STATE:
        val->home = RLX_HOME_STATE;
        val->index = add_binding(s, &s->states, n->name, n->dtype, &n->shape);
        break;
    case RLX_OP_INPUT:
        if (!val->contiguous) {
            s->st = rlx_error_set(s->err, RLX_ERR_UNSUPPORTED,
                                  "schedule: input '%s' has a shape whose layout is not affine in "
                                  "the symbols",
                                  n->name);
            return -1;
        }
        val->home = RLX_HOME_INPUT;
        val->index = add_binding(s, &s->inputs, n->name, n->dtype, &n->shape);
        break;
    case RLX_OP_CONST:
        val->home = RLX_HOME_CONST;
        val->offset = add_const(s, n->data, rlx_graph_const_bytes(n));
        break;
    default:
        break;
    }
    return v;
}

/* A view of value `src` with the given shape, strides and extra offset. */
static int32_t view_value(sched *s, int32_t src, rlx_dtype dt, const rlx_shape *shape,
                          const rlx_dim *stride, uint64_t delta)
{
    /* callers may pass the source's own strides: copy them before
     * new_value can move the values array */
    rlx_dim st[RLX_MAX_DIMS];
    for (int d = 0; d < RLX_MAX_DIMS; d++)
        st[d] = d < shape->rank ? stride[d] : rlx_dim_const(0);
    int32_t v = new_value(s, dt, shape);
    if (v < 0)
        return -1;
    rlx_lir_value *val = &s->values[v];
    const rlx_lir_value *sv = &s->values[src];
    for (int d = 0; d < RLX_MAX_DIMS; d++)
        val->stride[d] = st[d];
    val->home = sv->home;
    val->index = sv->index;
    val->offset = sv->offset + delta;
    val->view_of = src;
    val->contiguous = strides_contiguous(s->g, shape, val->stride);
    val->max_bytes = value_bytes(s->g, dt, shape, val->stride);
    return v;
}

static bool dim_is_unit(rlx_dim d)
{
    return rlx_dim_is_const(d) && d.k == 1;
}

/* A reshape that only inserts or drops size-1 dims keeps a strided source's
 * layout, so it is a view too: the KV cache read ([HKV, T, D] slice of the
 * state -> [1, HKV, T, D]) stays in place instead of being copied on every
 * token. Strides of the other dims are the source's; a size-1 dim gets the
 * next dim's extent (any value is valid for it). */
static bool unit_dims_reshape(const rlx_lir_value *sv, const rlx_shape *shape, rlx_dim *st)
{
    /* block-quantized rows have no per-element strides, but for a Q8_0 KV
     * cache (the only Q8_0 value that is reshaped) every reader addresses
     * elements by their flat index in the state */
    if (rlx_dtype_get(sv->dtype)->quantized && sv->dtype != RLX_DTYPE_Q8_0)
        return false;
    int map[RLX_MAX_DIMS], j = 0;
    for (int d = 0; d < shape->rank; d++) {
        if (dim_is_unit(shape->d[d])) {
            map[d] = -1;
            continue;
        }
        while (j < sv->shape.rank && dim_is_unit(sv->shape.d[j]))
            j++;
        if (j >= sv->shape.rank || !rlx_dim_equal(sv->shape.d[j], shape->d[d]))
            return false;
        map[d] = j++;
    }
    while (j < sv->shape.rank && dim_is_unit(sv->shape.d[j]))
        j++;
    if (j != sv->shape.rank)
        return false;
    for (int d = shape->rank - 1; d >= 0; d--) {
        if (map[d] >= 0) {
            st[d] = sv->stride[map[d]];
        } else if (d == shape->rank - 1) {
            st[d] = rlx_dim_const(1);
        } else {
            rlx_dim nx = shape->d[d + 1], ns = st[d + 1];
            st[d] = rlx_dim_is_const(nx) && rlx_dim_is_const(ns) ? rlx_dim_const(nx.k * ns.k) : ns;
        }
    }
    return true;
}

/* The value for compute node i, a view where the op allows it. */
static int32_t compute_value(sched *s, int32_t i, bool *in_place)
{
    const rlx_gnode *n = &s->g->nodes[i];
    *in_place = false;
    int32_t src = n->n_in > 0 ? s->val[n->in[0]] : -1;
    const rlx_lir_value *sv = src >= 0 ? &s->values[src] : NULL;
    switch (n->op) {
    case RLX_OP_RESHAPE: {
        rlx_dim st[RLX_MAX_DIMS];
        bool exact;
        rlx_contiguous_strides(&n->shape, s->g->sym_max, st, &exact);
        if (sv->contiguous && exact)
            return view_value(s, src, n->dtype, &n->shape, st, 0);
        if (unit_dims_reshape(sv, &n->shape, st))
            return view_value(s, src, n->dtype, &n->shape, st, 0);
        break;
    }
    case RLX_OP_SLICE: {
        int ax = n->p.slice.axis;
        rlx_dim start = n->p.slice.start;
        if (!rlx_dim_is_const(start) || !rlx_dim_is_const(sv->stride[ax]))
            break;
        const rlx_dtype_info *ti = rlx_dtype_get(n->dtype);
        uint64_t delta;
        if (ti->quantized) {
            if (rlx_dtype_row_bytes(n->dtype, (uint64_t)(start.k * sv->stride[ax].k), &delta) !=
                RLX_OK)
                break;
        } else {
            delta = (uint64_t)(start.k * sv->stride[ax].k) * ti->type_size;
        }
        return view_value(s, src, n->dtype, &n->shape, sv->stride, delta);
    }
    case RLX_OP_PERMUTE: {
        rlx_dim st[RLX_MAX_DIMS];
        for (int d = 0; d < n->shape.rank; d++)
            st[d] = sv->stride[n->p.permute.perm[d]];
        return view_value(s, src, n->dtype, &n->shape, st, 0);
    }
    case RLX_OP_SCATTER: {
        int32_t v = new_value(s, n->dtype, &n->shape);
        if (v < 0)
            return -1;
        rlx_lir_value *val = &s->values[v];
        sv = &s->values[src];
        memcpy(val->stride, sv->stride, sizeof val->stride);
        val->home = sv->home;
        val->index = sv->index;
        val->offset = sv->offset;
        val->contiguous = sv->contiguous;
        val->max_bytes = sv->max_bytes;
        *in_place = true;
        return v;
    }
    default:
        break;
    }
    int32_t v = new_value(s, n->dtype, &n->shape);
    if (v >= 0 && s->out_idx[i] >= 0 && s->values[v].contiguous) {
        s->values[v].home = RLX_HOME_OUTPUT;
        s->values[v].index = s->out_idx[i];
    }
    return v;
}

/* Fill output binding `idx` from node i's value (directly or by a COPY). */
static void bind_output(sched *s, int32_t i, int32_t idx)
{
    int32_t v = s->val[i];
    if (v < 0)
        return;
    if (s->values[v].home == RLX_HOME_OUTPUT && s->values[v].index == idx &&
        s->values[v].view_of < 0)
        return;
    const rlx_gnode *n = &s->g->nodes[i];
    int32_t o = new_value(s, n->dtype, &n->shape);
    if (o < 0)
        return;
    if (!s->values[o].contiguous) {
        s->st = rlx_error_set(s->err, RLX_ERR_UNSUPPORTED,
                              "schedule: output '%s' has a shape whose layout is not affine in the "
                              "symbols",
                              s->outputs.b[idx].name);
        return;
    }
    s->values[o].home = RLX_HOME_OUTPUT;
    s->values[o].index = idx;
    add_instr(s, RLX_OP_COPY, NULL, 1, &v, o, i);
}

/* Would the backend run this instruction over the values made so far? */
static bool backend_takes(sched *s, const rlx_lir_instr *ins)
{
    const rlx_backend_i *be;
    rlx_device *dev;
    rlx_compile_target(s->opts, s->seg, &be, &dev);
    if (!be || !be->supports_op)
        return true;
    rlx_lir tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.n_values = s->n_values;
    tmp.values = s->values;
    tmp.n_instrs = s->n_instrs;
    tmp.instrs = s->instrs;
    tmp.n_symbols = s->g->n_symbols;
    for (int i = 0; i < s->g->n_symbols; i++) {
        tmp.symbols[i].name = s->g->sym_names[i];
        tmp.symbols[i].max = s->g->sym_max[i];
    }
    return be->supports_op(dev, &tmp, ins);
}

/* A backend may refuse strided operands (views of permutes and slices). Copy
 * such operands into contiguous values first when that makes the
 * instruction acceptable; the final check in rlx_compile reports the rest. */
static void materialize_refused(sched *s, const rlx_gnode *n, int32_t *in, int32_t out,
                                bool in_place)
{
    rlx_lir_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.op = n->op;
    ins.p = n->p;
    ins.n_in = n->n_in;
    for (int k = 0; k < n->n_in; k++)
        ins.in[k] = in[k];
    ins.out = out;
    ins.in_place = in_place;
    if (backend_takes(s, &ins))
        return;
    for (int k = in_place ? 1 : 0; k < n->n_in; k++) {
        const rlx_lir_value *v = &s->values[in[k]];
        if (v->contiguous || rlx_dtype_get(v->dtype)->quantized)
            continue;
        rlx_dtype dt = v->dtype;
        rlx_shape sh = v->shape;
        int32_t c = new_value(s, dt, &sh);
        if (c < 0 || !s->values[c].contiguous)
            return;
        int32_t src = in[k];
        add_instr(s, RLX_OP_COPY, NULL, 1, &src, c, -1);
        s->instrs[s->n_instrs - 1].node = (int32_t)(n - s->g->nodes);
        in[k] = c;
    }
}

static void free_bind(bind_list *l)
{
    for (int32_t i = 0; i < l->n; i++)
        free((char *)l->b[i].name);
    free(l->b);
}

rlx_status rlx_pass_schedule(const rlx_graph *g, const rlx_compile_opts *opts, int segment,
                             rlx_lir **out, rlx_error **err)
{
    *out = NULL;
    sched s;
    memset(&s, 0, sizeof s);
    s.g = g;
    s.opts = opts;
    s.seg = segment;
    s.err = err;
    int32_t nn = g->n_nodes;
    s.val = malloc(sizeof *s.val * (size_t)(nn + 1));
    s.used_here = calloc((size_t)nn + 1, sizeof *s.used_here);
    s.used_later = calloc((size_t)nn + 1, sizeof *s.used_later);
    s.out_idx = malloc(sizeof *s.out_idx * (size_t)(nn + 1));
    rlx_lir *lir = calloc(1, sizeof *lir);
    if (!s.val || !s.used_here || !s.used_later || !s.out_idx || !lir) {
        oom(&s);
        goto fail;
    }
    for (int32_t i = 0; i < nn; i++) {
        s.val[i] = -1;
        s.out_idx[i] = -1;
    }
    for (int32_t i = 0; i < nn; i++) {
        const rlx_gnode *n = &g->nodes[i];
        if (is_source(n->op))
            continue;
        for (int k = 0; k < n->n_in; k++) {
            if (in_segment(&s, n))
                s.used_here[n->in[k]] = true;
            else
                s.used_later[n->in[k]] = true;
        }
    }
    /* output bindings: the graph's outputs of this segment, then values
     * crossing to other segments */
    int32_t n_cross = 0;
    for (int32_t o = 0; o < g->n_outputs; o++) {
        int32_t i = g->outputs[o].node;
        if (!in_segment(&s, &g->nodes[i]))
            continue;
        int32_t idx =
            add_binding(&s, &s.outputs, g->outputs[o].name, g->nodes[i].dtype, &g->nodes[i].shape);
        if (idx < 0)
            goto fail;
        if (s.out_idx[i] < 0 && !is_source(g->nodes[i].op))
            s.out_idx[i] = idx;
    }
    if (segment >= 0) {
        for (int32_t i = 0; i < nn; i++) {
            const rlx_gnode *n = &g->nodes[i];
            if (is_source(n->op) || !in_segment(&s, n) || !s.used_later[i])
                continue;
            if (g->nodes[state_root(g, i)].op == RLX_OP_STATE)
                continue; /* the state itself carries it */
            char nm[512];
            seg_name(&s, i, nm, sizeof nm);
            int32_t idx = add_binding(&s, &s.outputs, nm, n->dtype, &n->shape);
            if (idx < 0)
                goto fail;
            if (s.out_idx[i] < 0)
                s.out_idx[i] = idx;
            n_cross++;
        }
    }
    for (int32_t i = 0; i < nn && s.st == RLX_OK; i++) {
        const rlx_gnode *n = &g->nodes[i];
        bool mine = in_segment(&s, n);
        if (is_source(n->op)) {
            bool out_here = false;
            for (int32_t o = 0; o < g->n_outputs; o++)
                out_here |= g->outputs[o].node == i;
            /* declared inputs are bound even when unused (stable indices) */
            bool keep = segment < 0 && n->op == RLX_OP_INPUT;
            if (s.used_here[i] || (mine && out_here) || keep)
                s.val[i] = source_value(&s, i);
            continue;
        }
        if (!mine) {
            if (s.used_here[i])
                s.val[i] = external_value(&s, i);
            continue;
        }
        bool in_place;
        int32_t v = compute_value(&s, i, &in_place);
        if (v < 0)
            break;
        s.val[i] = v;
        int32_t in[RLX_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++)
            in[k] = s.val[n->in[k]];
        if (s.values[v].view_of < 0)
            materialize_refused(&s, n, in, v, in_place);
        int32_t ii = add_instr(&s, n->op, &n->p, n->n_in, in, v, i);
        if (ii >= 0)
            s.instrs[ii].in_place = in_place;
    }
    if (s.st != RLX_OK)
        goto fail;
    {
        int32_t idx = 0;
        for (int32_t o = 0; o < g->n_outputs; o++) {
            int32_t i = g->outputs[o].node;
            if (!in_segment(&s, &g->nodes[i]))
                continue;
            bind_output(&s, i, idx++);
        }
        if (segment >= 0)
            for (int32_t i = 0; i < nn; i++) {
                const rlx_gnode *n = &g->nodes[i];
                if (is_source(n->op) || !in_segment(&s, n) || !s.used_later[i] ||
                    g->nodes[state_root(g, i)].op == RLX_OP_STATE)
                    continue;
                bind_output(&s, i, idx++);
            }
        (void)n_cross;
    }
    if (s.st != RLX_OK)
        goto fail;

    lir->n_values = s.n_values;
    lir->values = s.values;
    lir->n_instrs = s.n_instrs;
    lir->instrs = s.instrs;
    s.values = NULL;
    s.instrs = NULL;
    lir->n_symbols = g->n_symbols;
    for (int i = 0; i < g->n_symbols; i++) {
        lir->symbols[i].name = dupstr(g->sym_names[i]);
        lir->symbols[i].max = g->sym_max[i];
        if (!lir->symbols[i].name) {
            oom(&s);
            goto fail;
        }
    }
    lir->n_params = s.params.n;
    lir->params = s.params.b;
    lir->n_states = s.states.n;
    lir->states = s.states.b;
    lir->n_inputs = s.inputs.n;
    lir->inputs = s.inputs.b;
    lir->n_outputs = s.outputs.n;
    lir->outputs = s.outputs.b;
    memset(&s.params, 0, sizeof s.params);
    memset(&s.states, 0, sizeof s.states);
    memset(&s.inputs, 0, sizeof s.inputs);
    memset(&s.outputs, 0, sizeof s.outputs);
    lir->const_bytes = s.cbytes;
    lir->const_data = s.cdata;
    s.cdata = NULL;
    {
        bool inplace = !opts || (opts->passes & RLX_PASS_INPLACE);
        const rlx_backend_i *be;
        rlx_device *dev;
        rlx_compile_target(opts, segment, &be, &dev);
        rlx_status st = rlx_memplan(lir, inplace, be && be->spaced_reuse, err);
        if (st != RLX_OK) {
            s.st = st;
            goto fail;
        }
    }
    free(s.val);
    free(s.used_here);
    free(s.used_later);
    free(s.out_idx);
    *out = lir;
    return RLX_OK;
fail:
    free(s.val);
    free(s.used_here);
    free(s.used_later);
    free(s.out_idx);
    free(s.values);
    free(s.instrs);
    free(s.cdata);
    free_bind(&s.params);
    free_bind(&s.states);
    free_bind(&s.inputs);
    free_bind(&s.outputs);
    rlx_lir_free(lir);
    return s.st != RLX_OK ? s.st : rlx_error_set(err, RLX_ERR_INTERNAL, "schedule failed");
}
