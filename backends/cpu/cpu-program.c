/* CPU programs: validate an LIR once, pick each instruction's op function,
 * then run: resolve dims for this run's symbols, bind homes, execute. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu-backend.h"
#include "backends/cpu/cpu-internal.h"
#include "backends/cpu/cpu-program.h"
#include "backends/cpu/kernels.h"

typedef struct cpu_instr {
    cpu_op_fn fn;
    cpu_op_ctx ctx; /* tensor pointers point into prog->tv */
    rlx_dim start;  /* SLICE start / SCATTER offset */
    rlx_op op;
    /* the first of `group` consecutive matrix-vector-able MATMULs of one x
     * (cpu_matvec_groupable), run as one job when x has one row */
    int group;
} cpu_instr;

typedef struct cpu_program {
    rlx_program base;
    cpu_device *dev;
    int32_t n_values, n_instrs, n_symbols;
    rlx_lir_value *values;
    rlx_lir_instr *instrs;
    cpu_instr *ci;
    cpu_tensor *tv;
    int64_t sym_max[RLX_MAX_SYMBOLS];
    char sym_name[RLX_MAX_SYMBOLS][32];
    int32_t n_bind[4]; /* params, states, inputs, outputs */
    uint64_t arena_bytes;
    uint8_t *const_data;
    uint64_t const_bytes;
    float *scratch;
    size_t scratch_floats;
    void *kscratch;
    size_t kscratch_bytes;
    bool timing;
    double *ms;
    /* cos/sin tables each shared by ROPEs of the same angles */
    cpu_rope_table *ropes;
    int n_ropes;
    uint64_t run; /* runs so far: a table filled in an earlier one is stale */
    uint64_t runs_done;
    int threads; /* what the ops' contexts hold now (see pick_threads) */
} cpu_program;

static const char *const home_names[] = {"arena", "param", "state", "input", "output", "const"};

static bool dim_ok(rlx_dim d, int n_symbols)
{
    for (int t = 0; t < RLX_DIM_TERMS; t++)
        if (d.sym[t] >= 0 && (d.sym[t] >= n_symbols || d.sym[t] >= RLX_MAX_SYMBOLS))
            return false;
    return true;
}

static int64_t dim_eval(rlx_dim d, const int64_t *sv)
{
    int64_t v = d.k;
    for (int t = 0; t < RLX_DIM_TERMS; t++)
        if (d.sym[t] >= 0)
            v += (int64_t)d.mul[t] * sv[d.sym[t]];
    return v;
}

/* Bytes spanned by a value with these dims/strides (0 when empty). */
static uint64_t extent_bytes(rlx_dtype dt, int rank, const int64_t *ne, const int64_t *st)
{
    int64_t last = 0;
    for (int d = 0; d < rank; d++) {
        if (ne[d] == 0)
            return 0;
        last += (ne[d] - 1) * st[d];
    }
    const rlx_dtype_info *ti = rlx_dtype_get(dt);
    uint64_t n = (uint64_t)last + 1;
    return (n + ti->block_size - 1) / ti->block_size * ti->type_size;
}

static const char *op_label(const rlx_lir_instr *ins, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s, graph node %d", rlx_op_name(ins->op), (int)ins->node);
    return buf;
}

static rlx_status validate(const rlx_lir *lir, int64_t *max_dim, rlx_error **err)
{
    if (lir->n_values < 0 || lir->n_instrs < 0 || (lir->n_values && !lir->values) ||
        (lir->n_instrs && !lir->instrs))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: missing values or instrs");
    if (lir->n_symbols < 0 || lir->n_symbols > RLX_MAX_SYMBOLS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: %d symbols (at most %d)",
                             lir->n_symbols, RLX_MAX_SYMBOLS);
    int32_t nb[4] = {lir->n_params, lir->n_states, lir->n_inputs, lir->n_outputs};
    for (int i = 0; i < 4; i++)
        if (nb[i] < 0)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: negative binding count");
    if (lir->const_bytes && !lir->const_data)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: const bytes without data");
    int64_t bound[RLX_MAX_SYMBOLS] = {0};
    for (int s = 0; s < lir->n_symbols; s++) {
        if (lir->symbols[s].max < 0)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: symbol %d has bound %lld",
                                 s, (long long)lir->symbols[s].max);
        bound[s] = lir->symbols[s].max;
    }
    *max_dim = 1;
    for (int32_t v = 0; v < lir->n_values; v++) {
        const rlx_lir_value *val = &lir->values[v];
        if (val->dtype <= RLX_DTYPE_INVALID || val->dtype >= RLX_DTYPE_COUNT)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: value %d has dtype %d", v,
                                 (int)val->dtype);
        if (val->shape.rank < 0 || val->shape.rank > RLX_MAX_DIMS)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: value %d has rank %d", v,
                                 val->shape.rank);
        if ((int)val->home < RLX_HOME_ARENA || val->home > RLX_HOME_CONST)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: value %d has home %d", v,
                                 (int)val->home);
        if (val->home >= RLX_HOME_PARAM && val->home <= RLX_HOME_OUTPUT) {
            int32_t n = nb[val->home - RLX_HOME_PARAM];
            if (val->index < 0 || val->index >= n)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "invalid LIR: value %d is %s %d of %d", v,
                                     home_names[val->home], val->index, n);
        }
        if (val->view_of < -1 || val->view_of >= lir->n_values)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "invalid LIR: value %d is a view of value %d", v, val->view_of);
        int64_t ne[RLX_MAX_DIMS], st[RLX_MAX_DIMS];
        for (int d = 0; d < val->shape.rank; d++) {
            if (!dim_ok(val->shape.d[d], lir->n_symbols) || !dim_ok(val->stride[d], lir->n_symbols))
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "invalid LIR: value %d dim %d uses an unknown symbol", v, d);
            ne[d] = dim_eval(val->shape.d[d], bound);
            st[d] = dim_eval(val->stride[d], bound);
            if (ne[d] < 0 || st[d] < 0)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "invalid LIR: value %d dim %d is negative at the bounds", v,
                                     d);
            if (ne[d] > *max_dim)
                *max_dim = ne[d];
        }
        uint64_t ext = extent_bytes(val->dtype, val->shape.rank, ne, st);
        if (val->home == RLX_HOME_ARENA &&
            (val->offset > lir->arena_bytes || ext > lir->arena_bytes - val->offset))
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "invalid LIR: value %d (%llu bytes at %llu) runs past the "
                                 "%llu-byte arena",
                                 v, (unsigned long long)ext, (unsigned long long)val->offset,
                                 (unsigned long long)lir->arena_bytes);
        if (val->home == RLX_HOME_CONST &&
            (val->offset > lir->const_bytes || ext > lir->const_bytes - val->offset))
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "invalid LIR: constant value %d runs past the constant data", v);
    }
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if ((int)ins->op < 0 || ins->op >= RLX_OP_COUNT)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: instruction %d has op %d",
                                 i, (int)ins->op);
        if (ins->n_in < 0 || ins->n_in > RLX_MAX_INPUTS)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "invalid LIR: instruction %d has %d inputs", i, ins->n_in);
        for (int k = 0; k < ins->n_in; k++)
            if (ins->in[k] < 0 || ins->in[k] >= lir->n_values)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "invalid LIR: instruction %d reads value %d of %d", i,
                                     ins->in[k], lir->n_values);
        if (ins->out < 0 || ins->out >= lir->n_values)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "invalid LIR: instruction %d writes value %d of %d", i, ins->out,
                                 lir->n_values);
        if (ins->op == RLX_OP_SLICE && !dim_ok(ins->p.slice.start, lir->n_symbols))
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "invalid LIR: instruction %d slices at an unknown symbol", i);
        if (ins->op == RLX_OP_SCATTER && !dim_ok(ins->p.scatter.offset, lir->n_symbols))
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "invalid LIR: instruction %d scatters at an unknown symbol", i);
    }
    return RLX_OK;
}

/* Minimum inputs per op: the CPU checks arity itself so a malformed
 * instruction is an error, not an out-of-bounds read. */
static int min_inputs(rlx_op op)
{
    switch (op) {
    case RLX_OP_NONE:
    case RLX_OP_INPUT:
    case RLX_OP_PARAM:
    case RLX_OP_CONST:
    case RLX_OP_STATE:
        return 0;
    case RLX_OP_ADD:
    case RLX_OP_SUB:
    case RLX_OP_MUL:
    case RLX_OP_DIV:
    case RLX_OP_MAX:
    case RLX_OP_MIN:
    case RLX_OP_POW:
    case RLX_OP_CMP:
    case RLX_OP_MATMUL:
    case RLX_OP_ROPE:
    case RLX_OP_CONV1D:
    case RLX_OP_CONV2D:
    case RLX_OP_CONV_TRANSPOSE2D:
    case RLX_OP_GATHER:
    case RLX_OP_SCATTER:
        return 2;
    case RLX_OP_WHERE:
    case RLX_OP_ATTENTION:
    case RLX_OP_ADD_RMS_NORM:
        return 3;
    default:
        return 1;
    }
}

static cpu_op_fn select_checked(const rlx_lir *lir, const rlx_lir_instr *ins, char *why, size_t cap)
{
    if (ins->n_in < min_inputs(ins->op)) {
        snprintf(why, cap, "needs at least %d inputs, has %d", min_inputs(ins->op), ins->n_in);
        return NULL;
    }
    return cpu_op_select(lir, ins, why, cap);
}

bool cpu_supports_op(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins)
{
    (void)dev;
    if (!lir || !ins || (int)ins->op < 0 || ins->op >= RLX_OP_COUNT || ins->n_in < 0 ||
        ins->n_in > RLX_MAX_INPUTS || ins->out < 0 || ins->out >= lir->n_values)
        return false;
    for (int k = 0; k < ins->n_in; k++)
        if (ins->in[k] < 0 || ins->in[k] >= lir->n_values)
            return false;
    char why[160];
    return select_checked(lir, ins, why, sizeof why) != NULL;
}

void cpu_program_free(rlx_program *prog)
{
    cpu_program *P = (cpu_program *)prog;
    if (!P)
        return;
    free(P->values);
    free(P->instrs);
    free(P->ci);
    free(P->tv);
    free(P->const_data);
    free(P->scratch);
    free(P->kscratch);
    free(P->ms);
    for (int i = 0; i < P->n_ropes; i++)
        free(P->ropes[i].data);
    free(P->ropes);
    free(P);
}

/* ROPEs that turn the same positions by the same angles (a model's q and k
 * in every layer) share one cos/sin table, filled by the first of them to
 * run in each program run */
static rlx_status share_rope_tables(cpu_program *P, const rlx_lir *lir,
                                    const rlx_sym_values *bounds)
{
    int32_t *group = malloc((size_t)(lir->n_instrs ? lir->n_instrs : 1) * sizeof *group);
    if (!group)
        return RLX_ERR_NO_MEMORY;
    for (int32_t i = 0; i < lir->n_instrs; i++)
        group[i] = -1;
    rlx_status st = RLX_OK;
    for (int32_t i = 0; i < lir->n_instrs && st == RLX_OK; i++) {
        if (P->instrs[i].op != RLX_OP_ROPE || group[i] >= 0)
            continue;
        int n = 1;
        size_t cap = cpu_rope_table_floats(lir, &P->instrs[i], bounds);
        for (int32_t j = i + 1; j < lir->n_instrs; j++)
            if (group[j] < 0 && cpu_rope_same_angles(lir, &P->instrs[i], &P->instrs[j])) {
                size_t need = cpu_rope_table_floats(lir, &P->instrs[j], bounds);
                cap = need > cap ? need : cap;
                n++;
            }
        if (n < 2 || cap == 0)
            continue;
        for (int32_t j = i; j < lir->n_instrs; j++)
            if (j == i || (group[j] < 0 && cpu_rope_same_angles(lir, &P->instrs[i], &P->instrs[j])))
                group[j] = P->n_ropes;
        cpu_rope_table *grown = realloc(P->ropes, (size_t)(P->n_ropes + 1) * sizeof *grown);
        if (!grown) {
            st = RLX_ERR_NO_MEMORY;
            break;
        }
        P->ropes = grown;
        cpu_rope_table *t = &P->ropes[P->n_ropes];
        *t = (cpu_rope_table){.run = &P->run, .cap = cap, .data = malloc(cap * sizeof(float))};
        P->n_ropes++;
        if (!t->data)
            st = RLX_ERR_NO_MEMORY;
    }
    /* pointers into P->ropes only once it stops moving */
    for (int32_t i = 0; i < lir->n_instrs && st == RLX_OK; i++)
        if (group[i] >= 0 && group[i] < P->n_ropes)
            P->ci[i].ctx.rope = &P->ropes[group[i]];
    free(group);
    return st;
}

rlx_status cpu_program_create(rlx_device *dev, const rlx_lir *lir, rlx_program **out,
                              rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!dev || !lir || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_create: missing argument");
    int64_t max_dim = 1;
    rlx_status s = validate(lir, &max_dim, err);
    if (s != RLX_OK)
        return s;

    cpu_program *P = calloc(1, sizeof *P);
    if (!P)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    P->base.iface = &rlx_cpu_backend;
    P->dev = (cpu_device *)dev;
    P->n_values = lir->n_values;
    P->n_instrs = lir->n_instrs;
    P->n_symbols = lir->n_symbols;
    P->n_bind[0] = lir->n_params;
    P->n_bind[1] = lir->n_states;
    P->n_bind[2] = lir->n_inputs;
    P->n_bind[3] = lir->n_outputs;
    P->arena_bytes = lir->arena_bytes;
    for (int i = 0; i < lir->n_symbols; i++) {
        P->sym_max[i] = lir->symbols[i].max;
        snprintf(P->sym_name[i], sizeof P->sym_name[i], "%s",
                 lir->symbols[i].name ? lir->symbols[i].name : "?");
    }
    size_t nv = (size_t)(lir->n_values ? lir->n_values : 1);
    size_t ni = (size_t)(lir->n_instrs ? lir->n_instrs : 1);
    P->values = malloc(nv * sizeof *P->values);
    P->instrs = malloc(ni * sizeof *P->instrs);
    P->ci = calloc(ni, sizeof *P->ci);
    P->tv = calloc(nv, sizeof *P->tv);
    P->ms = calloc(ni, sizeof *P->ms);
    P->const_bytes = lir->const_bytes;
    P->const_data = malloc(lir->const_bytes ? (size_t)lir->const_bytes : 1);
    if (!P->values || !P->instrs || !P->ci || !P->tv || !P->ms || !P->const_data) {
        cpu_program_free(&P->base);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    }
    if (lir->n_values)
        memcpy(P->values, lir->values, (size_t)lir->n_values * sizeof *P->values);
    if (lir->n_instrs)
        memcpy(P->instrs, lir->instrs, (size_t)lir->n_instrs * sizeof *P->instrs);
    if (lir->const_bytes)
        memcpy(P->const_data, lir->const_data, (size_t)lir->const_bytes);

    size_t scratch = 64, kscratch = 0;
    rlx_sym_values bounds = {{0}};
    for (int s2 = 0; s2 < lir->n_symbols; s2++)
        bounds.v[s2] = lir->symbols[s2].max;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &P->instrs[i];
        char why[160], lab[64];
        cpu_instr *c = &P->ci[i];
        c->fn = select_checked(lir, ins, why, sizeof why);
        if (!c->fn) {
            rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                          "the CPU backend cannot run instruction %d (%s): %s", i,
                          op_label(ins, lab, sizeof lab), why);
            cpu_program_free(&P->base);
            return RLX_ERR_UNSUPPORTED;
        }
        c->op = ins->op;
        c->ctx.p = &ins->p;
        c->ctx.n_in = ins->n_in;
        for (int k = 0; k < ins->n_in; k++)
            c->ctx.in[k] = &P->tv[ins->in[k]];
        c->ctx.out = &P->tv[ins->out];
        if (ins->op == RLX_OP_SLICE)
            c->start = ins->p.slice.start;
        else if (ins->op == RLX_OP_SCATTER)
            c->start = ins->p.scatter.offset;
        else
            c->start = (rlx_dim){.k = 0, .sym = {-1, -1}};
        size_t need = cpu_op_scratch(lir, ins, max_dim);
        if (need > scratch)
            scratch = need;
        need = cpu_op_kscratch(lir, ins, &bounds, P->dev->n_threads);
        if (need > kscratch)
            kscratch = need;
    }
    /* runs of MATMULs of one x (a layer's q, k, v; gate and up): one pool
     * job per run in a decode step, not one per product */
    for (int32_t i = 0; i < lir->n_instrs;) {
        int n = 1;
        while (i + n < lir->n_instrs && n < RLX_CPU_MV_MULTI_MAX) {
            bool ok = true;
            for (int k = 0; k < n && ok; k++)
                ok = cpu_matvec_groupable(lir, &P->instrs[i + k], &P->instrs[i + n]);
            if (!ok)
                break;
            n++;
        }
        if (n > 1) {
            P->ci[i].group = n;
            size_t need = cpu_matvec_group_kscratch(lir, &P->instrs[i], n, &bounds);
            if (need > kscratch)
                kscratch = need;
        }
        i += n;
    }
    P->scratch_floats = scratch;
    P->scratch = malloc(scratch * sizeof(float));
    P->kscratch_bytes = (kscratch + 63) / 64 * 64;
    P->kscratch = P->kscratch_bytes ? aligned_alloc(64, P->kscratch_bytes) : NULL;
    if (!P->scratch || (P->kscratch_bytes && !P->kscratch)) {
        cpu_program_free(&P->base);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    }
    if (share_rope_tables(P, lir, &bounds) != RLX_OK) {
        cpu_program_free(&P->base);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    }
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        P->ci[i].ctx.scratch = P->scratch;
        P->ci[i].ctx.scratch_floats = scratch;
        P->ci[i].ctx.pool = P->dev->pool;
        P->ci[i].ctx.n_threads = P->dev->n_threads;
        P->threads = P->dev->n_threads;
        P->ci[i].ctx.kscratch = P->kscratch;
        P->ci[i].ctx.kscratch_bytes = P->kscratch_bytes;
    }
    *out = &P->base;
    return RLX_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Base pointer and usable size of one external home. */
static rlx_status bind_home(const cpu_program *P, const rlx_buffer_ref *refs, int home, int32_t idx,
                            uint8_t **base, uint64_t *size, rlx_error **err)
{
    const rlx_buffer_ref *r = refs ? &refs[idx] : NULL;
    if (!r || !r->buf)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no buffer bound for %s %d",
                             home_names[home], idx);
    if (!r->buf->host_ptr || r->buf->iface != &rlx_cpu_backend)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the buffer bound for %s %d is not a CPU buffer", home_names[home],
                             idx);
    if (r->offset > r->buf->size)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the offset bound for %s %d is past its buffer", home_names[home],
                             idx);
    (void)P;
    *base = (uint8_t *)r->buf->host_ptr + r->offset;
    *size = r->buf->size - r->offset;
    return RLX_OK;
}

/* Work of one instruction at this run's dims: multiply-adds of a product
 * or an attention, else the elements it writes. */
static double instr_work(const cpu_program *P, const rlx_lir_instr *ins)
{
    const cpu_tensor *o = &P->tv[ins->out];
    double out = 1;
    for (int d = 0; d < o->rank; d++)
        out *= (double)o->ne[d];
    if (ins->op == RLX_OP_MATMUL && ins->n_in >= 2) {
        const cpu_tensor *a = &P->tv[ins->in[0]];
        int ra = a->rank;
        if (ra < 1)
            return out;
        int64_t K = ins->p.matmul.trans_a && ra >= 2 ? a->ne[ra - 2] : a->ne[ra - 1];
        return out * (double)K;
    }
    if (ins->op == RLX_OP_ATTENTION && ins->n_in >= 3) {
        /* q [B,Hq,S,D], k [B,Hkv,T,D]: S*T*D per head for the scores, as
         * many for the weighted sum of v */
        const cpu_tensor *q = &P->tv[ins->in[0]], *k = &P->tv[ins->in[1]];
        if (q->rank < 2 || k->rank < 2)
            return out;
        double qe = 1;
        for (int d = 0; d < q->rank; d++)
            qe *= (double)q->ne[d];
        return 2.0 * qe * (double)k->ne[k->rank - 2];
    }
    return out;
}

/* A run whose work per instruction is below RLX_CPU_POOL_MIN_WORK takes one
 * thread: each instruction is a pool job (or a few), and a small model's
 * decode step spent more on waking the pool and waiting for it than the
 * second thread saved (stories260K: 8,900 tokens/s on two threads, 14,100
 * on one). Decided per run from this run's dims, so one program can
 * decode a token on one thread and take a long prompt on all of them. */
static void pick_threads(cpu_program *P)
{
    int want = P->dev->n_threads;
    if (want > 1 && P->n_instrs > 0) {
        double work = 0;
        for (int32_t i = 0; i < P->n_instrs; i++)
            work += instr_work(P, &P->instrs[i]);
        if (work < (double)RLX_CPU_POOL_MIN_WORK * (double)P->n_instrs)
            want = 1;
    }
    if (want == P->threads)
        return;
    for (int32_t i = 0; i < P->n_instrs; i++) {
        P->ci[i].ctx.pool = want > 1 ? P->dev->pool : NULL;
        P->ci[i].ctx.n_threads = want;
    }
    P->threads = want;
}

rlx_status cpu_program_run(rlx_program *prog, const rlx_program_bindings *b,
                           const rlx_sym_values *syms, rlx_error **err)
{
    cpu_program *P = (cpu_program *)prog;
    if (!P || !b)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_run: missing argument");
    int64_t sv[RLX_MAX_SYMBOLS] = {0};
    for (int s = 0; s < P->n_symbols; s++) {
        int64_t v = syms ? syms->v[s] : 0;
        if (v < 0 || v > P->sym_max[s])
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "%s = %lld is out of range: this program was built for %s <= "
                                 "%lld",
                                 P->sym_name[s], (long long)v, P->sym_name[s],
                                 (long long)P->sym_max[s]);
        sv[s] = v;
    }
    P->run++; /* the shared rope tables of earlier runs are stale */

    /* resolve every value for this run; check it lies inside its home */
    const rlx_buffer_ref *refs[4] = {b->params, b->states, b->inputs, b->outputs};
    for (int32_t v = 0; v < P->n_values; v++) {
        const rlx_lir_value *val = &P->values[v];
        cpu_tensor *t = &P->tv[v];
        t->dt = val->dtype;
        t->rank = val->shape.rank;
        for (int d = 0; d < val->shape.rank; d++) {
            t->ne[d] = dim_eval(val->shape.d[d], sv);
            t->st[d] = dim_eval(val->stride[d], sv);
        }
        if (t->rank == 0) { /* scalars as [1] so every op sees rank >= 1 */
            t->rank = 1;
            t->ne[0] = 1;
            t->st[0] = 1;
        }
        uint8_t *base = NULL;
        uint64_t size = 0;
        rlx_status s;
        switch (val->home) {
        case RLX_HOME_ARENA:
            if (P->arena_bytes == 0) {
                base = NULL;
                size = 0;
                break;
            }
            if (!b->arena.buf || !b->arena.buf->host_ptr ||
                b->arena.buf->iface != &rlx_cpu_backend || b->arena.offset > b->arena.buf->size)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no CPU arena buffer bound");
            base = (uint8_t *)b->arena.buf->host_ptr + b->arena.offset;
            size = b->arena.buf->size - b->arena.offset;
            break;
        case RLX_HOME_CONST:
            base = P->const_data;
            size = P->const_bytes;
            break;
        default:
            s = bind_home(P, refs[val->home - RLX_HOME_PARAM], val->home, val->index, &base, &size,
                          err);
            if (s != RLX_OK)
                return s;
        }
        uint64_t ext = extent_bytes(val->dtype, t->rank, t->ne, t->st);
        if (ext && (!base || val->offset > size || ext > size - val->offset))
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "value %d needs %llu bytes at offset %llu of its %s buffer, "
                                 "which holds %llu",
                                 v, (unsigned long long)ext, (unsigned long long)val->offset,
                                 home_names[val->home], (unsigned long long)size);
        t->p = base ? base + val->offset : NULL;
        /* ops read elements as their C types: natural alignment required */
        if (ext && ((uintptr_t)t->p % cpu_dtype_align(val->dtype)) != 0)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "value %d (%s, in its %s buffer) is not aligned to %zu bytes", v,
                                 rlx_dtype_name(val->dtype), home_names[val->home],
                                 cpu_dtype_align(val->dtype));
    }

    pick_threads(P);
    for (int32_t i = 0; i < P->n_instrs; i++) {
        if (b->cancel && __atomic_load_n(b->cancel, __ATOMIC_RELAXED))
            return rlx_error_set(err, RLX_ERR_CANCELLED, "cancelled");
        cpu_instr *c = &P->ci[i];
        c->ctx.slice_start = dim_eval(c->start, sv);
        double t0 = P->timing ? now_ms() : 0.0;
        if (c->group > 1) {
            const cpu_op_ctx *g[RLX_CPU_MV_MULTI_MAX];
            for (int k = 0; k < c->group; k++)
                g[k] = &P->ci[i + k].ctx;
            if (cpu_matvec_group_run(g, c->group)) {
                if (P->timing) { /* the job's time on its first product */
                    P->ms[i] = now_ms() - t0;
                    for (int k = 1; k < c->group; k++)
                        P->ms[i + k] = 0.0;
                }
                i += c->group - 1;
                continue;
            }
        }
        rlx_status s = c->fn(&c->ctx);
        if (P->timing)
            P->ms[i] = now_ms() - t0;
        if (s != RLX_OK) {
            char lab[64];
            return rlx_error_set(err, s, "instruction %d (%s) failed: %s", i,
                                 op_label(&P->instrs[i], lab, sizeof lab),
                                 c->op == RLX_OP_GATHER ? "a token id is out of the table's range"
                                 : c->op == RLX_OP_SLICE || c->op == RLX_OP_SCATTER
                                     ? "the offset is out of range for this run"
                                     : "invalid shapes for this run");
        }
    }
    P->runs_done++;
    return RLX_OK;
}

void cpu_program_stats(const rlx_program *prog, rlx_program_stats *out)
{
    const cpu_program *P = (const cpu_program *)prog;
    *out = (rlx_program_stats){0};
    if (!P)
        return;
    out->runs = P->runs_done;
    out->threads = P->runs_done ? P->threads : 0;
}

void cpu_program_set_timing(rlx_program *prog, bool enabled)
{
    cpu_program *P = (cpu_program *)prog;
    if (!P)
        return;
    P->timing = enabled;
    if (enabled)
        memset(P->ms, 0, (size_t)(P->n_instrs ? P->n_instrs : 1) * sizeof *P->ms);
}

rlx_status cpu_program_timings(rlx_program *prog, double *ms, int32_t n, rlx_error **err)
{
    cpu_program *P = (cpu_program *)prog;
    if (!P)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_timings: missing argument");
    return rlx_backend_copy_timings(P->timing, P->ms, P->n_instrs, ms, n, err);
}
