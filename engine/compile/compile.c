/* The compiler driver: runs the passes in order, dumps, hashes, frees LIR. */
#include "engine/compile/passes.h"

#include <stdlib.h>
#include <string.h>

rlx_compile_opts rlx_compile_default_opts(void)
{
    rlx_compile_opts o;
    memset(&o, 0, sizeof o);
    o.passes = RLX_PASS_ALL;
    return o;
}

typedef struct pass_entry {
    uint32_t bit;
    const char *name;
    rlx_pass_fn fn;
} pass_entry;

static const pass_entry pipeline[] = {
    {RLX_PASS_VERIFY, "verify", rlx_pass_verify},
    {RLX_PASS_SHAPES, "shapes", rlx_pass_shapes},
    {RLX_PASS_DCE, "dce", rlx_pass_dce},
    {RLX_PASS_CONST_FOLD, "const-fold", rlx_pass_const_fold},
    {RLX_PASS_CSE, "cse", rlx_pass_cse},
    {RLX_PASS_LAYOUT, "layout", rlx_pass_layout},
    {RLX_PASS_LEGALIZE, "legalize", rlx_pass_legalize},
    {RLX_PASS_FUSION, "fusion", rlx_pass_fusion},
};

rlx_status rlx_compile_graph_error(rlx_graph *g, rlx_error **err)
{
    if (g->status == RLX_OK)
        return RLX_OK;
    return rlx_error_set(err, g->status, "%s", rlx_graph_error(g));
}

rlx_status rlx_compile_compact(rlx_graph *g, rlx_error **err)
{
    rlx_status s = rlx_graph_compact(g);
    if (s == RLX_OK)
        return RLX_OK;
    if (g->status != RLX_OK)
        return rlx_compile_graph_error(g, err);
    return rlx_error_set(err, s, "out of memory while compacting the graph");
}

static void dump_graph(const rlx_graph *g, const rlx_compile_opts *opts, int step, const char *name)
{
    if (opts->dump_file) {
        fprintf(opts->dump_file, "=== after %s ===\n", name);
        rlx_graph_dump_text(g, opts->dump_file);
        if (opts->dump_dot)
            rlx_graph_dump_dot(g, opts->dump_file);
    }
    if (opts->dump_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%02d-%s.txt", opts->dump_dir, step, name);
        FILE *f = fopen(path, "w");
        if (f) {
            rlx_graph_dump_text(g, f);
            fclose(f);
        }
        if (opts->dump_dot) {
            snprintf(path, sizeof path, "%s/%02d-%s.dot", opts->dump_dir, step, name);
            f = fopen(path, "w");
            if (f) {
                rlx_graph_dump_dot(g, f);
                fclose(f);
            }
        }
    }
}

static void dump_lir(const rlx_lir *lir, const rlx_compile_opts *opts, int step, int segment)
{
    if (!(opts->dump_after & RLX_PASS_SCHEDULE))
        return;
    if (opts->dump_file) {
        fprintf(opts->dump_file, "=== lir (segment %d) ===\n", segment);
        rlx_lir_dump(lir, opts->dump_file);
        if (opts->dump_dot)
            rlx_lir_dump_dot(lir, opts->dump_file);
    }
    if (opts->dump_dir) {
        for (int dot = 0; dot < (opts->dump_dot ? 2 : 1); dot++) {
            char path[4096];
            const char *ext = dot ? "dot" : "txt";
            if (segment < 0)
                snprintf(path, sizeof path, "%s/%02d-lir.%s", opts->dump_dir, step, ext);
            else
                snprintf(path, sizeof path, "%s/%02d-lir-seg%d.%s", opts->dump_dir, step, segment,
                         ext);
            FILE *f = fopen(path, "w");
            if (f) {
                if (dot)
                    rlx_lir_dump_dot(lir, f);
                else
                    rlx_lir_dump(lir, f);
                fclose(f);
            }
        }
    }
}

static rlx_status run_passes(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    int n = (int)(sizeof pipeline / sizeof pipeline[0]);
    for (int i = 0; i < n; i++) {
        const pass_entry *p = &pipeline[i];
        if (!(opts->passes & p->bit) && !(RLX_PASS_REQUIRED & p->bit))
            continue;
        rlx_status s = p->fn(g, opts, err);
        if (s == RLX_OK)
            s = rlx_compile_graph_error(g, err);
        if (s != RLX_OK) {
            rlx_error_prefix(err, "compile (%s): ", p->name);
            return s;
        }
        if (opts->dump_after & p->bit)
            dump_graph(g, opts, i, p->name);
    }
    /* The rewrites must leave a graph whose shapes still derive. */
    rlx_status s = rlx_pass_shapes(g, opts, err);
    if (s != RLX_OK)
        rlx_error_prefix(err, "compile (after the passes): ");
    return s;
}

static rlx_status prepare(const rlx_graph *g, const rlx_compile_opts *opts, rlx_graph **out,
                          rlx_error **err)
{
    *out = NULL;
    if (!g)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "compile: no graph");
    if (g->status != RLX_OK)
        return rlx_error_set(err, g->status, "compile: the graph has an error: %s",
                             rlx_graph_error(g));
    if (g->n_outputs == 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "compile: the graph has no outputs");
    rlx_graph *c = rlx_graph_clone(g);
    if (!c)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "compile: out of memory");
    rlx_status s = run_passes(c, opts, err);
    if (s != RLX_OK) {
        rlx_graph_free(c);
        return s;
    }
    *out = c;
    return RLX_OK;
}

/* The last word: the backend sees the program exactly as scheduled (views,
 * strides, in-place outputs, the COPYs into outputs) and must claim every
 * instruction; a backend is never handed one it refused. */
static rlx_status check_program(const rlx_lir *lir, const rlx_compile_opts *opts, int32_t segment,
                                const rlx_graph *g, rlx_error **err)
{
    const rlx_backend_i *be;
    rlx_device *dev;
    rlx_compile_target(opts, segment, &be, &dev);
    if (!be || !be->supports_op)
        return RLX_OK;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if (be->supports_op(dev, lir, ins))
            continue;
        const char *name =
            ins->node >= 0 && ins->node < g->n_nodes ? g->nodes[ins->node].name : "?";
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "compile: the %s backend refuses instruction %d, %s '%s', as "
                             "scheduled (operand layout or dtype)",
                             be->name, i, rlx_op_name(ins->op), name);
    }
    return RLX_OK;
}

rlx_status rlx_compile(const rlx_graph *g, const rlx_compile_opts *opts, rlx_lir **out,
                       rlx_error **err)
{
    if (out)
        *out = NULL;
    rlx_compile_opts def = rlx_compile_default_opts();
    if (!opts)
        opts = &def;
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "compile: no output pointer");
    rlx_graph *c = NULL;
    rlx_status s = prepare(g, opts, &c, err);
    if (s != RLX_OK)
        return s;
    s = rlx_pass_schedule(c, opts, -1, out, err);
    if (s == RLX_OK) {
        dump_lir(*out, opts, 99, -1);
        s = check_program(*out, opts, -1, c, err);
        if (s != RLX_OK) {
            rlx_lir_free(*out);
            *out = NULL;
        }
    } else {
        rlx_error_prefix(err, "compile (schedule): ");
    }
    rlx_graph_free(c);
    return s;
}

rlx_status rlx_compile_split(const rlx_graph *g, const rlx_compile_opts *opts, rlx_lir ***out,
                             int32_t *n_out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (n_out)
        *n_out = 0;
    rlx_compile_opts def = rlx_compile_default_opts();
    if (!opts)
        opts = &def;
    if (!out || !n_out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "compile: no output pointer");
    rlx_graph *c = NULL;
    rlx_status s = prepare(g, opts, &c, err);
    if (s != RLX_OK)
        return s;
    int32_t n = 0;
    for (int32_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].segment + 1 > n)
            n = c->nodes[i].segment + 1;
    if (n < 1)
        n = 1;
    rlx_lir **arr = calloc((size_t)n, sizeof *arr);
    if (!arr) {
        rlx_graph_free(c);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "compile: out of memory");
    }
    for (int32_t i = 0; i < n && s == RLX_OK; i++) {
        s = rlx_pass_schedule(c, opts, i, &arr[i], err);
        if (s == RLX_OK) {
            dump_lir(arr[i], opts, 99, i);
            s = check_program(arr[i], opts, i, c, err);
        } else
            rlx_error_prefix(err, "compile (schedule of segment %d): ", i);
    }
    rlx_graph_free(c);
    if (s != RLX_OK) {
        rlx_lir_free_array(arr, n);
        return s;
    }
    *out = arr;
    *n_out = n;
    return RLX_OK;
}

static void free_bindings(rlx_lir_binding *b, int32_t n)
{
    if (!b)
        return;
    for (int32_t i = 0; i < n; i++)
        free((char *)b[i].name);
    free(b);
}

void rlx_lir_free(rlx_lir *lir)
{
    if (!lir)
        return;
    free(lir->values);
    free(lir->instrs);
    for (int32_t i = 0; i < lir->n_symbols; i++)
        free((char *)lir->symbols[i].name);
    free_bindings(lir->params, lir->n_params);
    free_bindings(lir->states, lir->n_states);
    free_bindings(lir->inputs, lir->n_inputs);
    free_bindings(lir->outputs, lir->n_outputs);
    free((uint8_t *)lir->const_data);
    free(lir);
}

void rlx_lir_free_array(rlx_lir **lirs, int32_t n)
{
    if (!lirs)
        return;
    for (int32_t i = 0; i < n; i++)
        rlx_lir_free(lirs[i]);
    free(lirs);
}

/* ---------------------------------------------------------------- hash */

typedef struct fnv {
    uint64_t h;
} fnv;

static void fnv_bytes(fnv *f, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        f->h ^= b[i];
        f->h *= 0x100000001b3ull;
    }
}

static void fnv_i64(fnv *f, int64_t v)
{
    fnv_bytes(f, &v, sizeof v);
}

static void fnv_str(fnv *f, const char *s)
{
    fnv_bytes(f, s, strlen(s) + 1);
}

static void fnv_dim(fnv *f, rlx_dim d)
{
    fnv_i64(f, d.k);
    for (int t = 0; t < RLX_DIM_TERMS; t++) {
        bool used = d.sym[t] >= 0 && d.mul[t] != 0;
        fnv_i64(f, used ? d.sym[t] : -1);
        fnv_i64(f, used ? d.mul[t] : 0);
    }
}

uint64_t rlx_graph_hash(const rlx_graph *g)
{
    fnv f = {0xcbf29ce484222325ull};
    if (!g)
        return 0;
    fnv_i64(&f, g->n_symbols);
    for (int i = 0; i < g->n_symbols; i++) {
        fnv_str(&f, g->sym_names[i]);
        fnv_i64(&f, g->sym_max[i]);
    }
    fnv_i64(&f, g->n_nodes);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const rlx_gnode *n = &g->nodes[i];
        fnv_i64(&f, n->op);
        fnv_i64(&f, n->dtype);
        fnv_i64(&f, n->segment);
        fnv_i64(&f, n->shape.rank);
        for (int d = 0; d < n->shape.rank; d++)
            fnv_dim(&f, n->shape.d[d]);
        /* params are zero-initialized by the builder, so their bytes are
         * deterministic */
        fnv_bytes(&f, &n->p, sizeof n->p);
        fnv_i64(&f, n->n_in);
        for (int k = 0; k < n->n_in; k++)
            fnv_i64(&f, n->in[k]);
        if (n->op == RLX_OP_INPUT || n->op == RLX_OP_PARAM || n->op == RLX_OP_STATE)
            fnv_str(&f, n->name);
        if (n->op == RLX_OP_CONST && n->data)
            fnv_bytes(&f, n->data, rlx_graph_const_bytes(n));
    }
    fnv_i64(&f, g->n_outputs);
    for (int32_t i = 0; i < g->n_outputs; i++) {
        fnv_str(&f, g->outputs[i].name);
        fnv_i64(&f, g->outputs[i].node);
    }
    return f.h;
}

/* ---------------------------------------------------------------- support queries */

void rlx_compile_target(const rlx_compile_opts *opts, int32_t segment, const rlx_backend_i **be,
                        rlx_device **dev)
{
    *be = opts ? opts->backend : NULL;
    *dev = opts ? opts->device : NULL;
    if (opts && segment >= 0 && segment < opts->n_segment_targets && opts->segment_backends &&
        opts->segment_backends[segment]) {
        *be = opts->segment_backends[segment];
        *dev = opts->segment_devices ? opts->segment_devices[segment] : NULL;
    }
}

bool rlx_compile_has_target(const rlx_compile_opts *opts)
{
    if (!opts)
        return false;
    if (opts->backend && opts->backend->supports_op)
        return true;
    for (int32_t i = 0; opts->segment_backends && i < opts->n_segment_targets; i++)
        if (opts->segment_backends[i] && opts->segment_backends[i]->supports_op)
            return true;
    return false;
}

bool rlx_compile_supports_desc(const rlx_compile_opts *opts, const rlx_graph *g, int32_t segment,
                               rlx_op op, const rlx_op_params *p, int n_in, const rlx_node *in,
                               rlx_dtype dt, const rlx_shape *shape)
{
    const rlx_backend_i *be;
    rlx_device *dev;
    rlx_compile_target(opts, segment, &be, &dev);
    if (!be || !be->supports_op)
        return true;
    rlx_lir_value vals[RLX_MAX_INPUTS + 1];
    rlx_lir lir;
    rlx_lir_instr ins;
    memset(vals, 0, sizeof vals);
    memset(&lir, 0, sizeof lir);
    memset(&ins, 0, sizeof ins);
    for (int i = 0; i <= n_in; i++) {
        rlx_lir_value *v = &vals[i];
        const rlx_gnode *src = i < n_in ? &g->nodes[in[i]] : NULL;
        bool exact;
        v->dtype = src ? src->dtype : dt;
        v->shape = src ? src->shape : *shape;
        rlx_contiguous_strides(&v->shape, g->sym_max, v->stride, &exact);
        v->contiguous = exact;
        v->view_of = -1;
        v->home = RLX_HOME_ARENA;
        if (src) {
            switch (src->op) {
            case RLX_OP_PARAM:
                v->home = RLX_HOME_PARAM;
                break;
            case RLX_OP_INPUT:
                v->home = RLX_HOME_INPUT;
                break;
            case RLX_OP_STATE:
                v->home = RLX_HOME_STATE;
                break;
            default:
                break;
            }
        }
    }
    lir.n_values = n_in + 1;
    lir.values = vals;
    lir.n_instrs = 1;
    lir.instrs = &ins;
    lir.n_symbols = g->n_symbols;
    for (int i = 0; i < g->n_symbols; i++) {
        lir.symbols[i].name = g->sym_names[i];
        lir.symbols[i].max = g->sym_max[i];
    }
    ins.op = op;
    if (p)
        ins.p = *p;
    ins.n_in = n_in;
    for (int i = 0; i < n_in; i++)
        ins.in[i] = i;
    ins.out = n_in;
    ins.node = -1;
    if (op == RLX_OP_SCATTER) {
        ins.in_place = true;
        vals[n_in].home = vals[0].home;
    }
    return be->supports_op(dev, &lir, &ins);
}

bool rlx_compile_supports(const rlx_compile_opts *opts, const rlx_graph *g, const rlx_gnode *n)
{
    if (n->op <= RLX_OP_STATE)
        return true;
    return rlx_compile_supports_desc(opts, g, n->segment, n->op, &n->p, n->n_in, n->in, n->dtype,
                                     &n->shape);
}

void rlx_contiguous_strides(const rlx_shape *s, const int64_t *sym_max, rlx_dim *stride,
                            bool *exact)
{
    rlx_dim acc = rlx_dim_const(1);
    bool ok = true;
    int64_t acc_max = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        stride[i] = ok ? acc : rlx_dim_const(acc_max);
        rlx_dim d = s->d[i];
        int64_t dmax = rlx_dim_upper(d, sym_max);
        if (ok) {
            if (rlx_dim_is_const(acc))
                acc = rlx_dim_scale(d, acc.k);
            else if (rlx_dim_is_const(d))
                acc = rlx_dim_scale(acc, d.k);
            else
                ok = false;
            if (ok && acc.k < 0 && !rlx_dim_is_const(acc))
                ok = false;
        }
        acc_max *= dmax;
    }
    for (int i = s->rank; i < RLX_MAX_DIMS; i++)
        stride[i] = rlx_dim_const(0);
    /* A stride only matters for dims that can exceed 1; only the strides
     * actually used decide exactness. */
    *exact = true;
    rlx_dim a2 = rlx_dim_const(1);
    for (int i = s->rank - 1; i >= 0; i--) {
        if (!rlx_dim_equal(stride[i], a2)) {
            bool one = rlx_dim_is_const(s->d[i]) && s->d[i].k == 1;
            if (!one)
                *exact = false;
        }
        if (rlx_dim_is_const(a2))
            a2 = rlx_dim_scale(s->d[i], a2.k);
        else if (rlx_dim_is_const(s->d[i]))
            a2 = rlx_dim_scale(a2, s->d[i].k);
        else
            a2 = rlx_dim_const(-1); /* not affine: later strides cannot match */
    }
}

/* ---------------------------------------------------------------- LIR dump */

static const char *home_name(rlx_home h)
{
    static const char *names[] = {"arena", "param", "state", "input", "output", "const"};
    return (int)h >= 0 && h <= RLX_HOME_CONST ? names[h] : "?";
}

static void fmt_dim(const rlx_lir *lir, rlx_dim d, char *buf, size_t size)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, size, "%lld", (long long)d.k);
    for (int t = 0; t < RLX_DIM_TERMS && len < size; t++)
        if (d.sym[t] >= 0 && d.mul[t] != 0) {
            const char *sn = d.sym[t] < lir->n_symbols ? lir->symbols[d.sym[t]].name : "?";
            len += (size_t)snprintf(buf + len, size - len, "%+d*%s", d.mul[t], sn);
        }
}

void rlx_lir_dump_dot(const rlx_lir *lir, FILE *f)
{
    fprintf(f, "digraph lir {\n  node [shape=box, fontname=\"monospace\"];\n");
    /* the instruction writing each value, or -1 (a value it reads from
     * outside: a binding, a constant, or a view of one) */
    int32_t *producer = malloc((size_t)(lir->n_values > 0 ? lir->n_values : 1) * sizeof *producer);
    if (!producer) {
        fprintf(f, "}\n");
        return;
    }
    for (int32_t v = 0; v < lir->n_values; v++)
        producer[v] = -1;
    for (int32_t i = 0; i < lir->n_instrs; i++)
        if (lir->instrs[i].out >= 0 && lir->instrs[i].out < lir->n_values)
            producer[lir->instrs[i].out] = i;
    for (int32_t v = 0; v < lir->n_values; v++) {
        if (producer[v] >= 0)
            continue;
        const rlx_lir_value *val = &lir->values[v];
        if (val->view_of >= 0 && val->view_of < lir->n_values) {
            /* a view no instruction writes: dashed, from what it views */
            fprintf(f, "  v%d [label=\"v%d view\\n%s\", style=dashed];\n", v, v,
                    rlx_dtype_name(val->dtype));
            if (producer[val->view_of] >= 0)
                fprintf(f, "  i%d -> v%d [style=dashed];\n", producer[val->view_of], v);
            else
                fprintf(f, "  v%d -> v%d [style=dashed];\n", val->view_of, v);
            continue;
        }
        fprintf(f, "  v%d [label=\"v%d %s#%d\\n%s\", style=filled, fillcolor=lightgrey];\n", v, v,
                home_name(val->home), val->index, rlx_dtype_name(val->dtype));
    }
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        const rlx_lir_value *o = &lir->values[ins->out];
        fprintf(f, "  i%d [label=\"%d: %s\\nv%d %s %s", i, i, rlx_op_name(ins->op), ins->out,
                rlx_dtype_name(o->dtype), home_name(o->home));
        if (o->home != RLX_HOME_ARENA && o->home != RLX_HOME_CONST)
            fprintf(f, "#%d", o->index);
        fprintf(f, "%s\"%s];\n", ins->in_place ? " in-place" : "",
                o->home == RLX_HOME_OUTPUT ? ", shape=ellipse" : "");
        for (int k = 0; k < ins->n_in; k++) {
            int32_t v = ins->in[k];
            if (v < 0 || v >= lir->n_values)
                continue;
            if (producer[v] >= 0)
                fprintf(f, "  i%d -> i%d [label=\"v%d\"];\n", producer[v], i, v);
            else
                fprintf(f, "  v%d -> i%d;\n", v, i);
        }
    }
    free(producer);
    fprintf(f, "}\n");
}

void rlx_lir_dump(const rlx_lir *lir, FILE *f)
{
    fprintf(f, "lir: %d values, %d instrs, arena %llu bytes, const %llu bytes\n", lir->n_values,
            lir->n_instrs, (unsigned long long)lir->arena_bytes,
            (unsigned long long)lir->const_bytes);
    for (int i = 0; i < lir->n_symbols; i++)
        fprintf(f, "symbol %d %s <= %lld\n", i, lir->symbols[i].name,
                (long long)lir->symbols[i].max);
    const struct {
        const char *kind;
        int32_t n;
        const rlx_lir_binding *b;
    } kinds[] = {{"param", lir->n_params, lir->params},
                 {"state", lir->n_states, lir->states},
                 {"input", lir->n_inputs, lir->inputs},
                 {"output", lir->n_outputs, lir->outputs}};
    for (int k = 0; k < 4; k++)
        for (int32_t i = 0; i < kinds[k].n; i++)
            fprintf(f, "%s %d '%s' %s %llu bytes\n", kinds[k].kind, i, kinds[k].b[i].name,
                    rlx_dtype_name(kinds[k].b[i].dtype),
                    (unsigned long long)kinds[k].b[i].max_bytes);
    for (int32_t i = 0; i < lir->n_values; i++) {
        const rlx_lir_value *v = &lir->values[i];
        fprintf(f, "v%d %s [", i, rlx_dtype_name(v->dtype));
        for (int d = 0; d < v->shape.rank; d++) {
            char b[64];
            fmt_dim(lir, v->shape.d[d], b, sizeof b);
            fprintf(f, "%s%s", d ? ", " : "", b);
        }
        fprintf(f, "] strides [");
        for (int d = 0; d < v->shape.rank; d++) {
            char b[64];
            fmt_dim(lir, v->stride[d], b, sizeof b);
            fprintf(f, "%s%s", d ? ", " : "", b);
        }
        fprintf(f, "] %s", home_name(v->home));
        if (v->home != RLX_HOME_ARENA && v->home != RLX_HOME_CONST)
            fprintf(f, "#%d", v->index);
        fprintf(f, " @%llu +%llu%s", (unsigned long long)v->offset,
                (unsigned long long)v->max_bytes, v->contiguous ? "" : " strided");
        if (v->view_of >= 0)
            fprintf(f, " view of v%d", v->view_of);
        fprintf(f, "\n");
    }
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        fprintf(f, "%4d: v%d = %s(", i, ins->out, rlx_op_name(ins->op));
        for (int k = 0; k < ins->n_in; k++)
            fprintf(f, "%sv%d", k ? ", " : "", ins->in[k]);
        fprintf(f, ")%s  ; node %d\n", ins->in_place ? " in-place" : "", ins->node);
    }
}
