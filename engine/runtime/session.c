/* rlx_session: device, budget, weights, programs, states. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/base/dtype.h"
#include "engine/formats/gguf.h"
#include "engine/formats/safetensors.h"
#include "engine/runtime/session-internal.h"

enum { SRC_HOST, SRC_GGUF, SRC_ST };

typedef struct weight_src {
    int kind;
    const void *reader; /* rlx_gguf / rlx_safetensors */
    char *prefix;       /* owned; NULL for none (files only) */
    /* SRC_HOST */
    char *name;
    rlx_dtype dtype;
    int rank;
    int64_t dims[RLX_MAX_DIMS];
    const void *data;
    uint64_t n_bytes;
} weight_src;

typedef struct named_buf {
    char *name;
    rlx_dtype dtype;
    rlx_buffer *buf;
    uint64_t bytes;
} named_buf;

struct rlx_session_program {
    rlx_session *s;
    const rlx_lir *lir;
    rlx_lir *owned;
    void (*lir_free)(rlx_lir *);
    uint64_t key;
    rlx_program *prog;
    rlx_buffer_ref *params, *states;
    /* per run: inputs then outputs (n_inputs + n_outputs of each) */
    rlx_buffer_ref *io_refs;
    uint64_t *io_sizes;
    /* Where the backend cannot read host memory in place: device buffers
     * for the inputs and outputs, kept from run to run so that a GPU
     * program binds the same buffers every step and replays the commands
     * it recorded once (a fresh buffer per run would make it record again).
     * io_bound: each one's bytes at the symbols' bounds. */
    rlx_buffer **io;
    uint64_t *io_bound;
    uint64_t io_total; /* the sum of io_bound, counted in the session's activations */
    rlx_session_program *next;
};

struct rlx_session {
    const rlx_backend_i *be;
    rlx_device *dev;
    int dev_index;
    bool zero_copy; /* host memory is device memory (the CPU) */
    uint64_t budget;

    weight_src *srcs;
    int n_srcs;
    named_buf *weights;
    int n_weights;
    named_buf *states;
    int n_states;
    rlx_buffer *arena;

    rlx_session_program *programs;

    rlx_progress_fn progress;
    void *progress_user;
    volatile int own_cancel;
    volatile int *cancel;

    pthread_mutex_t mu; /* guards the figures below for rlx_session_memory */
    uint64_t weights_bytes, state_bytes, arena_bytes;
    uint64_t io_bytes; /* the programs' kept input/output buffers, at their bounds */

    /* rlx_session_set_profiling: per-op-kind totals over every run */
    bool profiling;
    double *prof_buf; /* one run's per-instruction times */
    int32_t prof_cap;
    rlx_session_op_profile prof[RLX_OP_COUNT];
};

rlx_session_params rlx_session_default_params(void)
{
    return (rlx_session_params){.device = "cpu", .n_threads = 0, .memory_budget = 0};
}

char *rlx_format_bytes(uint64_t bytes, char *buf, size_t cap)
{
    const double k = 1024.0;
    double b = (double)bytes;
    if (b >= k * k * k)
        snprintf(buf, cap, "%.1f GiB", b / (k * k * k));
    else if (b >= 10 * k * k)
        snprintf(buf, cap, "%.0f MiB", b / (k * k));
    else if (b >= k * k)
        snprintf(buf, cap, "%.1f MiB", b / (k * k));
    else if (b >= k)
        snprintf(buf, cap, "%.0f KiB", b / k);
    else
        snprintf(buf, cap, "%llu bytes", (unsigned long long)bytes);
    return buf;
}

rlx_status rlx_session_create(const rlx_session_params *p, rlx_session **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_session_create: no output given");
    rlx_session_params dp = rlx_session_default_params();
    if (!p)
        p = &dp;
    const rlx_backend_i *be = NULL;
    int index = 0;
    rlx_status st = rlx_device_parse(p->device ? p->device : "cpu", &be, &index, err);
    if (st != RLX_OK)
        return st;
    rlx_session *s = calloc(1, sizeof *s);
    if (!s)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a session");
    pthread_mutex_init(&s->mu, NULL);
    s->be = be;
    s->dev_index = index;
    s->cancel = &s->own_cancel;
    s->zero_copy = strcmp(be->name, "cpu") == 0;
    rlx_device_opts dopts = {.n_threads = p->n_threads,
                             .force_f32 = p->force_f32,
                             .max_binding_bytes = p->max_binding_bytes,
                             .cuda_unfused = p->cuda_unfused,
                             .cuda_plain_matvec = p->cuda_plain_matvec};
    st = be->device_open(index, &dopts, &s->dev, err);
    if (st != RLX_OK) {
        rlx_session_free(s);
        return st;
    }
    s->budget = p->memory_budget;
    if (!s->budget) {
        rlx_device_info info;
        /* A GPU: what is free now (VK_EXT_memory_budget: other programs'
         * use taken off) where it reports less than its total. The CPU
         * keeps its total: mapped weights are page cache the kernel can
         * reclaim, which "available" does not promise. */
        if (be->device_query(s->dev, &info, NULL) == RLX_OK)
            s->budget = !s->zero_copy && info.free_memory && info.free_memory < info.total_memory
                            ? info.free_memory
                            : info.total_memory;
        if (!s->budget)
            s->budget = UINT64_MAX;
    }
    *out = s;
    return RLX_OK;
}

static void free_program(rlx_session_program *p)
{
    rlx_session *s = p->s;
    if (p->prog)
        s->be->program_free(p->prog);
    int32_t n_io = p->lir->n_inputs + p->lir->n_outputs;
    for (int32_t i = 0; p->io && i < n_io; i++)
        if (p->io[i])
            s->be->buffer_free(p->io[i]);
    if (p->io_total) {
        pthread_mutex_lock(&s->mu);
        s->io_bytes -= p->io_total;
        pthread_mutex_unlock(&s->mu);
    }
    if (p->owned && p->lir_free)
        p->lir_free(p->owned);
    free(p->params);
    free(p->states);
    free(p->io_refs);
    free(p->io_sizes);
    free(p->io);
    free(p->io_bound);
    free(p);
}

void rlx_session_free(rlx_session *s)
{
    if (!s)
        return;
    while (s->programs) {
        rlx_session_program *n = s->programs->next;
        free_program(s->programs);
        s->programs = n;
    }
    for (int i = 0; i < s->n_weights; i++) {
        if (s->weights[i].buf)
            s->be->buffer_free(s->weights[i].buf);
        free(s->weights[i].name);
    }
    for (int i = 0; i < s->n_states; i++) {
        if (s->states[i].buf)
            s->be->buffer_free(s->states[i].buf);
        free(s->states[i].name);
    }
    if (s->arena)
        s->be->buffer_free(s->arena);
    for (int i = 0; i < s->n_srcs; i++) {
        free(s->srcs[i].name);
        free(s->srcs[i].prefix);
    }
    free(s->srcs);
    free(s->prof_buf);
    free(s->weights);
    free(s->states);
    if (s->dev)
        s->be->device_close(s->dev);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

const rlx_backend_i *rlx_session_backend(const rlx_session *s)
{
    return s ? s->be : NULL;
}

rlx_device *rlx_session_device(const rlx_session *s)
{
    return s ? s->dev : NULL;
}

rlx_status rlx_session_device_info(const rlx_session *s, rlx_device_info *out, rlx_error **err)
{
    if (!s || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_session_device_info: no session");
    return s->be->device_query(s->dev, out, err);
}

void rlx_session_set_progress(rlx_session *s, rlx_progress_fn fn, void *user)
{
    if (!s)
        return;
    s->progress = fn;
    s->progress_user = user;
}

void rlx_session_set_cancel_flag(rlx_session *s, volatile int *flag)
{
    if (s)
        s->cancel = flag ? flag : &s->own_cancel;
}

void rlx_session_cancel(rlx_session *s, bool cancel)
{
    if (s)
        __atomic_store_n(s->cancel, cancel ? 1 : 0, __ATOMIC_RELAXED);
}

bool rlx_session_progress(rlx_session *s, const char *stage, double fraction)
{
    if (__atomic_load_n(s->cancel, __ATOMIC_RELAXED))
        return false;
    if (s->progress && !s->progress(s->progress_user, stage, fraction))
        return false;
    return true;
}

/* ---- weights ------------------------------------------------------------ */

typedef struct found_weight {
    rlx_dtype dtype;
    int rank;
    int64_t dims[8];
    const void *data;
    uint64_t n_bytes;
    const char *where;
    bool loaded; /* already in the session */
} found_weight;

static const char *src_where(const weight_src *src)
{
    if (src->kind == SRC_GGUF)
        return rlx_gguf_path(src->reader);
    if (src->kind == SRC_ST)
        return rlx_safetensors_shard_path(src->reader, 0);
    return "host memory";
}

/* `name` is the full name a program binds; a file source only answers for
 * names under its prefix, looked up without it. f may be NULL. */
static bool src_find(const weight_src *src, const char *name, found_weight *f)
{
    if (src->kind == SRC_HOST) {
        if (strcmp(src->name, name) != 0)
            return false;
        if (f) {
            f->dtype = src->dtype;
            f->rank = src->rank;
            memcpy(f->dims, src->dims, sizeof src->dims);
            f->data = src->data;
            f->n_bytes = src->n_bytes;
            f->where = "host memory";
        }
        return true;
    }
    if (src->prefix) {
        size_t n = strlen(src->prefix);
        if (strncmp(name, src->prefix, n) != 0)
            return false;
        name += n;
    }
    if (src->kind == SRC_GGUF) {
        const rlx_gguf *g = src->reader;
        const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, name);
        if (!t)
            return false;
        if (f) {
            f->dtype = t->dtype;
            /* ggml ne[0] is fastest: reverse into row-major */
            f->rank = (int)t->n_dims;
            for (uint32_t d = 0; d < t->n_dims && d < 8; d++)
                f->dims[t->n_dims - 1 - d] = (int64_t)t->ne[d];
            f->data = rlx_gguf_tensor_data(g, t);
            f->n_bytes = t->n_bytes;
            f->where = rlx_gguf_path(g);
        }
        return true;
    }
    const rlx_safetensors *st = src->reader;
    const rlx_st_tensor *t = rlx_safetensors_find(st, name);
    if (!t)
        return false;
    if (f) {
        f->dtype = t->dtype;
        f->rank = (int)t->n_dims;
        for (uint32_t d = 0; d < t->n_dims && d < 8; d++)
            f->dims[d] = (int64_t)t->shape[d];
        f->data = rlx_safetensors_data(st, t);
        f->n_bytes = t->n_bytes;
        f->where = rlx_safetensors_shard_path(st, t->shard);
    }
    return true;
}

static bool find_weight(const rlx_session *s, const char *name, found_weight *f)
{
    for (int i = 0; i < s->n_srcs; i++)
        if (src_find(&s->srcs[i], name, f))
            return true;
    return false;
}

/* The full name (prefix + name) of a new source's tensor must not already be
 * provided: with two answers, which one a program got would depend on the
 * order the files were added. */
static rlx_status check_unique(const rlx_session *s, const weight_src *src, const char *name,
                               rlx_error **err)
{
    char stack[256];
    const char *full = name;
    char *heap = NULL;
    if (src->prefix) {
        size_t n = strlen(src->prefix) + strlen(name) + 1;
        char *buf = n <= sizeof stack ? stack : (heap = malloc(n));
        if (!buf)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory adding weights");
        snprintf(buf, n, "%s%s", src->prefix, name);
        full = buf;
    }
    rlx_status st = RLX_OK;
    for (int i = 0; i < s->n_srcs && st == RLX_OK; i++)
        if (src_find(&s->srcs[i], full, NULL))
            st =
                rlx_error_set(err, RLX_ERR_INVALID_ARG, "weight '%s' is provided by both %s and %s",
                              full, src_where(&s->srcs[i]), src_where(src));
    free(heap);
    return st;
}

static rlx_status add_src(rlx_session *s, weight_src src, rlx_error **err)
{
    rlx_status st = RLX_OK;
    if (src.kind == SRC_HOST) {
        st = check_unique(s, &src, src.name, err);
    } else if (src.kind == SRC_GGUF) {
        uint64_t n = rlx_gguf_n_tensors(src.reader);
        for (uint64_t i = 0; i < n && st == RLX_OK; i++)
            st = check_unique(s, &src, rlx_gguf_tensor_at(src.reader, i)->name, err);
    } else {
        uint64_t n = rlx_safetensors_n_tensors(src.reader);
        for (uint64_t i = 0; i < n && st == RLX_OK; i++)
            st = check_unique(s, &src, rlx_safetensors_tensor_at(src.reader, i)->name, err);
    }
    weight_src *n = st == RLX_OK ? realloc(s->srcs, (size_t)(s->n_srcs + 1) * sizeof *n) : NULL;
    if (!n) {
        free(src.name);
        free(src.prefix);
        return st != RLX_OK ? st
                            : rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory adding weights");
    }
    s->srcs = n;
    s->srcs[s->n_srcs++] = src;
    return RLX_OK;
}

static rlx_status file_src(rlx_session *s, int kind, const void *reader, const char *prefix,
                           const char *fn, rlx_error **err)
{
    if (!s || !reader)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s: missing argument", fn);
    weight_src src = {.kind = kind, .reader = reader};
    if (prefix && *prefix && !(src.prefix = strdup(prefix)))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory adding weights");
    return add_src(s, src, err);
}

rlx_status rlx_session_add_gguf(rlx_session *s, const struct rlx_gguf *g, rlx_error **err)
{
    return file_src(s, SRC_GGUF, g, NULL, "rlx_session_add_gguf", err);
}

rlx_status rlx_session_add_gguf_prefixed(rlx_session *s, const struct rlx_gguf *g,
                                         const char *prefix, rlx_error **err)
{
    return file_src(s, SRC_GGUF, g, prefix, "rlx_session_add_gguf_prefixed", err);
}

rlx_status rlx_session_add_safetensors(rlx_session *s, const struct rlx_safetensors *st,
                                       rlx_error **err)
{
    return file_src(s, SRC_ST, st, NULL, "rlx_session_add_safetensors", err);
}

rlx_status rlx_session_add_safetensors_prefixed(rlx_session *s, const struct rlx_safetensors *st,
                                                const char *prefix, rlx_error **err)
{
    return file_src(s, SRC_ST, st, prefix, "rlx_session_add_safetensors_prefixed", err);
}

rlx_status rlx_session_add_weight(rlx_session *s, const char *name, rlx_dtype dtype, int rank,
                                  const int64_t *dims, const void *data, uint64_t n_bytes,
                                  rlx_error **err)
{
    if (!s || !name || (!data && n_bytes) || rank < 0 || rank > RLX_MAX_DIMS || (rank && !dims))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_session_add_weight: bad argument");
    weight_src w = {
        .kind = SRC_HOST, .dtype = dtype, .rank = rank, .data = data, .n_bytes = n_bytes};
    for (int d = 0; d < rank; d++)
        w.dims[d] = dims[d];
    w.name = strdup(name);
    if (!w.name)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory adding a weight");
    return add_src(s, w, err);
}

static void shape_str(int rank, const int64_t *dims, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < rank && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* Leading 1s do not count: a GGUF [1, N] bias may serve an [N] binding. */
static bool shapes_match(int ra, const int64_t *a, int rb, const int64_t *b)
{
    while (ra > rb && a[0] == 1)
        a++, ra--;
    while (rb > ra && b[0] == 1)
        b++, rb--;
    if (ra != rb)
        return false;
    for (int d = 0; d < ra; d++)
        if (a[d] != b[d])
            return false;
    return true;
}

static named_buf *find_named(named_buf *arr, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(arr[i].name, name) == 0)
            return &arr[i];
    return NULL;
}

/* ---- programs ----------------------------------------------------------- */

rlx_session_program *rlx_session_find_cached(rlx_session *s, uint64_t key)
{
    for (rlx_session_program *p = s->programs; p; p = p->next)
        if (key && p->key == key)
            return p;
    return NULL;
}

static uint64_t value_extent(const rlx_lir_value *v, const rlx_sym_values *sv)
{
    int64_t last = 0;
    for (int d = 0; d < v->shape.rank; d++) {
        int64_t ne = rlx_dim_eval(v->shape.d[d], sv);
        if (ne <= 0)
            return 0;
        last += (ne - 1) * rlx_dim_eval(v->stride[d], sv);
    }
    const rlx_dtype_info *ti = rlx_dtype_get(v->dtype);
    return v->offset + ((uint64_t)last + ti->block_size) / ti->block_size * ti->type_size;
}

static uint64_t home_bytes(const rlx_lir *lir, rlx_home home, int i, const rlx_sym_values *sv)
{
    uint64_t m = 0;
    for (int32_t v = 0; v < lir->n_values; v++) {
        const rlx_lir_value *val = &lir->values[v];
        if (val->home != home || val->index != i)
            continue;
        uint64_t e = value_extent(val, sv);
        if (e > m)
            m = e;
    }
    return m;
}

static rlx_status load_fail(rlx_lir *lir, void (*lir_free)(rlx_lir *), rlx_status st)
{
    if (lir && lir_free)
        lir_free(lir);
    return st;
}

static rlx_status grow(void **arr, int n, size_t elem, rlx_error **err)
{
    void *p = realloc(*arr, (size_t)(n + 1) * elem);
    if (!p)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory loading a program");
    *arr = p;
    return RLX_OK;
}

rlx_status rlx_session_load_internal(rlx_session *s, rlx_lir *lir, void (*lir_free)(rlx_lir *),
                                     uint64_t key, rlx_session_program **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!s || !lir || !out)
        return load_fail(lir, lir_free,
                         rlx_error_set(err, RLX_ERR_INVALID_ARG, "loading a program: no LIR"));
    char a[32], b[32];

    /* 1. resolve and check everything; count what is new */
    uint64_t new_w = 0, new_s = 0;
    found_weight *fw = calloc((size_t)(lir->n_params ? lir->n_params : 1), sizeof *fw);
    if (!fw)
        return load_fail(lir, lir_free,
                         rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory loading a program"));
    rlx_status st = RLX_OK;
    for (int32_t i = 0; i < lir->n_params && st == RLX_OK; i++) {
        const rlx_lir_binding *bd = &lir->params[i];
        if (!bd->name) {
            st = rlx_error_set(err, RLX_ERR_INVALID_ARG, "param %d has no name", i);
            break;
        }
        named_buf *have = find_named(s->weights, s->n_weights, bd->name);
        if (have) {
            fw[i].loaded = true;
            if (have->dtype != bd->dtype || have->bytes < bd->max_bytes)
                st = rlx_error_set(err, RLX_ERR_TYPE,
                                   "weight '%s' is loaded as %s (%llu bytes), but this program "
                                   "wants %s (%llu bytes)",
                                   bd->name, rlx_dtype_name(have->dtype),
                                   (unsigned long long)have->bytes, rlx_dtype_name(bd->dtype),
                                   (unsigned long long)bd->max_bytes);
            continue;
        }
        if (!find_weight(s, bd->name, &fw[i])) {
            st = rlx_error_set(err, RLX_ERR_NOT_FOUND, "weight '%s' is not in the model file%s",
                               bd->name, s->n_srcs ? "" : " (no weights were added)");
            break;
        }
        int64_t want[RLX_MAX_DIMS];
        for (int d = 0; d < bd->shape.rank; d++)
            want[d] = bd->shape.d[d].k;
        if (fw[i].dtype != bd->dtype) {
            st = rlx_error_set(err, RLX_ERR_TYPE, "weight '%s' in %s is %s, but the graph wants %s",
                               bd->name, fw[i].where ? fw[i].where : "?",
                               rlx_dtype_name(fw[i].dtype), rlx_dtype_name(bd->dtype));
        } else if (!shapes_match(fw[i].rank, fw[i].dims, bd->shape.rank, want) ||
                   fw[i].n_bytes < bd->max_bytes) {
            char sa[96], sb[96];
            shape_str(fw[i].rank, fw[i].dims, sa, sizeof sa);
            shape_str(bd->shape.rank, want, sb, sizeof sb);
            st = rlx_error_set(err, RLX_ERR_TYPE,
                               "weight '%s' in %s has shape %s, but the graph wants %s", bd->name,
                               fw[i].where ? fw[i].where : "?", sa, sb);
        } else {
            /* a name bound twice in one LIR counts once */
            bool dup = false;
            for (int32_t j = 0; j < i; j++)
                if (lir->params[j].name && strcmp(lir->params[j].name, bd->name) == 0)
                    dup = true;
            if (!dup)
                new_w += fw[i].n_bytes;
        }
    }
    for (int32_t i = 0; i < lir->n_states && st == RLX_OK; i++) {
        const rlx_lir_binding *bd = &lir->states[i];
        if (!bd->name) {
            st = rlx_error_set(err, RLX_ERR_INVALID_ARG, "state %d has no name", i);
            break;
        }
        named_buf *have = find_named(s->states, s->n_states, bd->name);
        if (have) {
            if (have->dtype != bd->dtype || have->bytes < bd->max_bytes)
                st = rlx_error_set(
                    err, RLX_ERR_TYPE,
                    "state '%s' exists as %s (%s), but this program wants %s (%s)", bd->name,
                    rlx_dtype_name(have->dtype), rlx_format_bytes(have->bytes, a, sizeof a),
                    rlx_dtype_name(bd->dtype), rlx_format_bytes(bd->max_bytes, b, sizeof b));
            continue;
        }
        new_s += bd->max_bytes;
    }
    if (st != RLX_OK) {
        free(fw);
        return load_fail(lir, lir_free, st);
    }

    /* 2. the budget, before allocating anything. Activations: the shared
     * arena, and where the device cannot use host memory in place, every
     * program's input/output buffers at the symbols' bounds (kept between
     * runs, see io_buffer). */
    rlx_sym_values bounds = {{0}};
    for (int i = 0; i < lir->n_symbols && i < RLX_MAX_SYMBOLS; i++)
        bounds.v[i] = lir->symbols[i].max;
    uint64_t new_io = rlx_session_io_bytes(s, lir);
    uint64_t w_total = s->weights_bytes + new_w, s_total = s->state_bytes + new_s;
    uint64_t a_total = lir->arena_bytes > s->arena_bytes ? lir->arena_bytes : s->arena_bytes;
    a_total += s->io_bytes + new_io;
    uint64_t total = w_total + s_total + a_total;
    if (total > s->budget || total < w_total) {
        char fw_[32], fs_[32], fa_[32], ft_[32], fb_[32];
        free(fw);
        return load_fail(lir, lir_free,
                         rlx_error_set(err, RLX_ERR_BUDGET,
                                       "needs %s of weights + %s of KV cache + %s of activations "
                                       "= %s, but the budget is %s",
                                       rlx_format_bytes(w_total, fw_, sizeof fw_),
                                       rlx_format_bytes(s_total, fs_, sizeof fs_),
                                       rlx_format_bytes(a_total, fa_, sizeof fa_),
                                       rlx_format_bytes(total, ft_, sizeof ft_),
                                       rlx_format_bytes(s->budget, fb_, sizeof fb_)));
    }

    /* 2b. the device's limits, also before anything is uploaded: every
     * buffer fits one allocation, and the backend takes the program (it
     * splits what exceeds its binding limit, or says which tensor it
     * cannot) */
    rlx_device_info dinfo;
    if (s->be->device_query(s->dev, &dinfo, NULL) == RLX_OK && dinfo.max_buffer_bytes) {
        const char *what = NULL, *name = NULL;
        uint64_t big = 0;
        for (int32_t i = 0; i < lir->n_params && !what; i++)
            if (!fw[i].loaded && fw[i].n_bytes > dinfo.max_buffer_bytes)
                what = "weight", name = lir->params[i].name, big = fw[i].n_bytes;
        for (int32_t i = 0; i < lir->n_states && !what; i++)
            if (lir->states[i].max_bytes > dinfo.max_buffer_bytes)
                what = "state", name = lir->states[i].name, big = lir->states[i].max_bytes;
        if (!what && lir->arena_bytes > dinfo.max_buffer_bytes)
            what = "activation arena", name = "", big = lir->arena_bytes;
        if (what) {
            char f1[32], f2[32];
            free(fw);
            return load_fail(lir, lir_free,
                             rlx_error_set(err, RLX_ERR_NO_MEMORY,
                                           "the %s%s%s%s is %s, more than the %s one buffer on %s "
                                           "may hold",
                                           what, name[0] ? " '" : "", name, name[0] ? "'" : "",
                                           rlx_format_bytes(big, f1, sizeof f1),
                                           rlx_format_bytes(dinfo.max_buffer_bytes, f2, sizeof f2),
                                           dinfo.id));
        }
    }
    rlx_program *prog = NULL;
    st = s->be->program_create(s->dev, lir, &prog, err);
    if (st != RLX_OK) {
        free(fw);
        return load_fail(lir, lir_free, st);
    }

    /* 3. weights (an upload with progress on a GPU), states, arena */
    for (int32_t i = 0; i < lir->n_params && st == RLX_OK; i++) {
        const rlx_lir_binding *bd = &lir->params[i];
        if (fw[i].loaded || find_named(s->weights, s->n_weights, bd->name))
            continue;
        if (!rlx_session_progress(s, "weights", (double)i / (double)lir->n_params)) {
            st = rlx_error_set(err, RLX_ERR_CANCELLED, "loading weights cancelled");
            break;
        }
        if ((st = grow((void **)&s->weights, s->n_weights, sizeof *s->weights, err)) != RLX_OK)
            break;
        named_buf nb = {.dtype = fw[i].dtype, .bytes = fw[i].n_bytes};
        nb.name = strdup(bd->name);
        if (!nb.name) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory loading weights");
            break;
        }
        const rlx_dtype_info *ti = rlx_dtype_get(fw[i].dtype);
        size_t align = ti->quantized ? 4 : (ti->type_size < 8 ? ti->type_size : 8);
        if (((uintptr_t)fw[i].data % align) == 0) {
            st = s->be->buffer_from_host(s->dev, fw[i].data, fw[i].n_bytes, &nb.buf, err);
        } else {
            /* a tensor at an odd offset in its file: an aligned copy */
            st = s->be->buffer_alloc(s->dev, fw[i].n_bytes, &nb.buf, err);
            if (st == RLX_OK)
                st = s->be->buffer_write(nb.buf, 0, fw[i].data, fw[i].n_bytes, err);
            if (st != RLX_OK && nb.buf) {
                s->be->buffer_free(nb.buf);
                nb.buf = NULL;
            }
        }
        if (st != RLX_OK) {
            rlx_error_prefix(err, "loading weight '%s': ", bd->name);
            free(nb.name);
            break;
        }
        s->weights[s->n_weights++] = nb;
        pthread_mutex_lock(&s->mu);
        s->weights_bytes += nb.bytes;
        pthread_mutex_unlock(&s->mu);
    }
    free(fw);
    if (st == RLX_OK && lir->n_params && !rlx_session_progress(s, "weights", 1.0))
        st = rlx_error_set(err, RLX_ERR_CANCELLED, "loading weights cancelled");
    for (int32_t i = 0; i < lir->n_states && st == RLX_OK; i++) {
        const rlx_lir_binding *bd = &lir->states[i];
        if (find_named(s->states, s->n_states, bd->name))
            continue;
        if ((st = grow((void **)&s->states, s->n_states, sizeof *s->states, err)) != RLX_OK)
            break;
        named_buf nb = {.dtype = bd->dtype, .bytes = bd->max_bytes};
        nb.name = strdup(bd->name);
        if (!nb.name) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating state");
            break;
        }
        st = s->be->buffer_alloc(s->dev, bd->max_bytes, &nb.buf, err);
        if (st == RLX_OK && !s->zero_copy) {
            /* buffers of other backends are not promised to start zeroed */
            void *z = calloc(1, (size_t)(bd->max_bytes ? bd->max_bytes : 1));
            st = z ? s->be->buffer_write(nb.buf, 0, z, bd->max_bytes, err)
                   : rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory zeroing state");
            free(z);
        }
        if (st != RLX_OK) {
            rlx_error_prefix(err, "creating state '%s': ", bd->name);
            if (nb.buf)
                s->be->buffer_free(nb.buf);
            free(nb.name);
            break;
        }
        s->states[s->n_states++] = nb;
        pthread_mutex_lock(&s->mu);
        s->state_bytes += nb.bytes;
        pthread_mutex_unlock(&s->mu);
    }
    if (st == RLX_OK && lir->arena_bytes > s->arena_bytes) {
        uint64_t old = s->arena_bytes;
        if (s->arena)
            s->be->buffer_free(s->arena);
        s->arena = NULL;
        pthread_mutex_lock(&s->mu);
        s->arena_bytes = 0;
        pthread_mutex_unlock(&s->mu);
        st = s->be->buffer_alloc(s->dev, lir->arena_bytes, &s->arena, err);
        if (st != RLX_OK) {
            rlx_error_prefix(err, "allocating %s of activations: ",
                             rlx_format_bytes(lir->arena_bytes, a, sizeof a));
            /* the programs loaded before keep an arena of the old size */
            if (old && s->be->buffer_alloc(s->dev, old, &s->arena, NULL) != RLX_OK)
                s->arena = NULL;
        }
        pthread_mutex_lock(&s->mu);
        s->arena_bytes = s->arena ? s->arena->size : 0;
        pthread_mutex_unlock(&s->mu);
    }
    if (st != RLX_OK) {
        s->be->program_free(prog);
        return load_fail(lir, lir_free, st);
    }

    /* 4. the program and its bindings */
    rlx_session_program *p = calloc(1, sizeof *p);
    if (!p) {
        s->be->program_free(prog);
        return load_fail(lir, lir_free,
                         rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory loading a program"));
    }
    p->prog = prog;
    p->s = s;
    p->lir = lir;
    if (lir_free) {
        p->owned = lir;
        p->lir_free = lir_free;
    }
    p->key = key;
    p->params = calloc((size_t)(lir->n_params ? lir->n_params : 1), sizeof *p->params);
    p->states = calloc((size_t)(lir->n_states ? lir->n_states : 1), sizeof *p->states);
    size_t n_io = (size_t)(lir->n_inputs + lir->n_outputs) + 1;
    p->io_refs = calloc(n_io, sizeof *p->io_refs);
    p->io_sizes = calloc(n_io, sizeof *p->io_sizes);
    p->io = calloc(n_io, sizeof *p->io);
    p->io_bound = calloc(n_io, sizeof *p->io_bound);
    if (!p->params || !p->states || !p->io_refs || !p->io_sizes || !p->io || !p->io_bound) {
        free_program(p); /* frees prog too */
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory loading a program");
    }
    for (int32_t i = 0; i < lir->n_params; i++) {
        named_buf *nb = find_named(s->weights, s->n_weights, lir->params[i].name);
        if (!nb) {
            free_program(p);
            return rlx_error_set(err, RLX_ERR_INTERNAL, "weight '%s' was not loaded",
                                 lir->params[i].name);
        }
        p->params[i].buf = nb->buf;
    }
    for (int32_t i = 0; i < lir->n_states; i++) {
        named_buf *nb = find_named(s->states, s->n_states, lir->states[i].name);
        if (!nb) {
            free_program(p);
            return rlx_error_set(err, RLX_ERR_INTERNAL, "state '%s' was not created",
                                 lir->states[i].name);
        }
        p->states[i].buf = nb->buf;
    }
    for (int32_t i = 0; i < lir->n_inputs; i++)
        p->io_bound[i] = home_bytes(lir, RLX_HOME_INPUT, i, &bounds);
    for (int32_t i = 0; i < lir->n_outputs; i++)
        p->io_bound[lir->n_inputs + i] = home_bytes(lir, RLX_HOME_OUTPUT, i, &bounds);

    p->io_total = new_io;
    pthread_mutex_lock(&s->mu);
    s->io_bytes += new_io;
    pthread_mutex_unlock(&s->mu);
    p->next = s->programs;
    s->programs = p;
    if (s->profiling && s->be->program_set_timing)
        s->be->program_set_timing(p->prog, true);
    *out = p;
    return RLX_OK;
}

rlx_status rlx_session_load_lir(rlx_session *s, const rlx_lir *lir, rlx_session_program **out,
                                rlx_error **err)
{
    return rlx_session_load_internal(s, (rlx_lir *)(uintptr_t)lir, NULL, 0, out, err);
}

void rlx_session_unload(rlx_session *s, rlx_session_program *p)
{
    if (!s || !p)
        return;
    for (rlx_session_program **pp = &s->programs; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            free_program(p);
            return;
        }
    }
}

const rlx_lir *rlx_session_program_lir(const rlx_session_program *p)
{
    return p ? p->lir : NULL;
}

int rlx_session_program_symbol(const rlx_session_program *p, const char *name)
{
    if (!p || !name)
        return -1;
    for (int i = 0; i < p->lir->n_symbols; i++)
        if (p->lir->symbols[i].name && strcmp(p->lir->symbols[i].name, name) == 0)
            return i;
    return -1;
}

static int find_binding(const rlx_lir_binding *b, int n, const char *name)
{
    for (int i = 0; i < n && name; i++)
        if (b[i].name && strcmp(b[i].name, name) == 0)
            return i;
    return -1;
}

int rlx_session_program_input(const rlx_session_program *p, const char *name)
{
    return p ? find_binding(p->lir->inputs, p->lir->n_inputs, name) : -1;
}

int rlx_session_program_output(const rlx_session_program *p, const char *name)
{
    return p ? find_binding(p->lir->outputs, p->lir->n_outputs, name) : -1;
}

uint64_t rlx_session_program_input_bytes(const rlx_session_program *p, int i,
                                         const rlx_sym_values *sv)
{
    if (!p || i < 0 || i >= p->lir->n_inputs)
        return 0;
    return home_bytes(p->lir, RLX_HOME_INPUT, i, sv);
}

uint64_t rlx_session_program_output_bytes(const rlx_session_program *p, int i,
                                          const rlx_sym_values *sv)
{
    if (!p || i < 0 || i >= p->lir->n_outputs)
        return 0;
    return home_bytes(p->lir, RLX_HOME_OUTPUT, i, sv);
}

/* p's device buffer for input/output k (inputs first), at least `need`
 * bytes. A bigger need than the buffer holds replaces it with one of twice
 * the size (at most the size at the symbols' bounds), so a run of growing
 * lengths reallocates, and re-records, a few times rather than every run. */
static rlx_status io_buffer(rlx_session *s, rlx_session_program *p, int32_t k, uint64_t need,
                            rlx_error **err)
{
    rlx_buffer *b = p->io[k];
    if (b && b->size >= need)
        return RLX_OK;
    uint64_t cap = b && b->size <= UINT64_MAX / 2 ? b->size * 2 : need;
    if (cap > p->io_bound[k])
        cap = p->io_bound[k];
    if (cap < need)
        cap = need;
    if (b)
        s->be->buffer_free(b);
    p->io[k] = NULL;
    rlx_status st = s->be->buffer_alloc(s->dev, cap, &p->io[k], err);
    if (st != RLX_OK) {
        const rlx_lir *lir = p->lir;
        const rlx_lir_binding *bd =
            k < lir->n_inputs ? &lir->inputs[k] : &lir->outputs[k - lir->n_inputs];
        rlx_error_prefix(err, "the buffer for %s '%s': ", k < lir->n_inputs ? "input" : "output",
                         bd->name ? bd->name : "?");
    }
    return st;
}

rlx_status rlx_session_program_stats(const rlx_session_program *p, rlx_program_stats *out,
                                     rlx_error **err)
{
    if (!p || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_session_program_stats: no program");
    *out = (rlx_program_stats){0};
    if (!p->s->be->program_stats)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "the %s backend does not count its program runs", p->s->be->name);
    p->s->be->program_stats(p->prog, out);
    return RLX_OK;
}

/* Add the last run's per-instruction times to the per-op totals. */
static rlx_status profile_add(rlx_session *s, rlx_session_program *p, rlx_error **err)
{
    const rlx_lir *lir = p->lir;
    if (!s->be->program_timings || lir->n_instrs <= 0)
        return RLX_OK;
    if (lir->n_instrs > s->prof_cap) {
        double *b = realloc(s->prof_buf, (size_t)lir->n_instrs * sizeof *b);
        if (!b)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory profiling a program");
        s->prof_buf = b;
        s->prof_cap = lir->n_instrs;
    }
    rlx_status st = s->be->program_timings(p->prog, s->prof_buf, lir->n_instrs, err);
    if (st != RLX_OK)
        return st;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        rlx_op op = lir->instrs[i].op;
        if ((int)op < 0 || op >= RLX_OP_COUNT)
            continue;
        s->prof[op].count++;
        s->prof[op].ms += s->prof_buf[i];
    }
    return RLX_OK;
}

rlx_status rlx_session_run(rlx_session *s, rlx_session_program *p, const rlx_sym_values *sv,
                           const void *const *inputs, void *const *outputs, rlx_error **err)
{
    if (!s || !p || p->s != s)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_session_run: no session or program");
    const rlx_lir *lir = p->lir;
    if ((lir->n_inputs && !inputs) || (lir->n_outputs && !outputs))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_session_run: the program has %d inputs and %d outputs",
                             lir->n_inputs, lir->n_outputs);
    if (__atomic_load_n(s->cancel, __ATOMIC_RELAXED))
        return rlx_error_set(err, RLX_ERR_CANCELLED, "cancelled");
    rlx_sym_values zero = {{0}};
    if (!sv)
        sv = &zero;
    for (int i = 0; i < lir->n_symbols; i++)
        if (sv->v[i] < 0 || sv->v[i] > lir->symbols[i].max)
            return rlx_error_set(
                err, RLX_ERR_INVALID_ARG,
                "%s = %lld is out of range: this program was built for %s <= "
                "%lld",
                lir->symbols[i].name ? lir->symbols[i].name : "?", (long long)sv->v[i],
                lir->symbols[i].name ? lir->symbols[i].name : "?", (long long)lir->symbols[i].max);

    /* The CPU reads and writes the caller's memory in place (a wrapper per
     * run, no copy); elsewhere the program's own device buffers are filled,
     * run and read back. */
    int32_t n_io = lir->n_inputs + lir->n_outputs;
    rlx_buffer_ref *refs = p->io_refs;
    uint64_t *sizes = p->io_sizes;
    rlx_status st = RLX_OK;
    for (int32_t k = 0; k < n_io && st == RLX_OK; k++) {
        bool is_in = k < lir->n_inputs;
        int32_t i = is_in ? k : k - lir->n_inputs;
        const void *host = is_in ? inputs[i] : outputs[i];
        sizes[k] = home_bytes(lir, is_in ? RLX_HOME_INPUT : RLX_HOME_OUTPUT, i, sv);
        refs[k] = (rlx_buffer_ref){0};
        if (!host && sizes[k]) {
            const rlx_lir_binding *bd = is_in ? &lir->inputs[i] : &lir->outputs[i];
            st = rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s '%s' was not given",
                               is_in ? "input" : "output", bd->name ? bd->name : "?");
        } else if (s->zero_copy) {
            st = s->be->buffer_from_host(s->dev, host, sizes[k], &refs[k].buf, err);
        } else {
            st = io_buffer(s, p, k, sizes[k], err);
            if (st == RLX_OK && is_in)
                st = s->be->buffer_write(p->io[k], 0, host, sizes[k], err);
            refs[k].buf = p->io[k];
        }
    }
    if (st == RLX_OK) {
        rlx_program_bindings bind = {
            .arena = {.buf = s->arena, .offset = 0},
            .params = p->params,
            .states = p->states,
            .inputs = refs,
            .outputs = refs + lir->n_inputs,
            .cancel = s->cancel,
        };
        st = s->be->program_run(p->prog, &bind, sv, err);
        if (st == RLX_OK && !s->zero_copy) {
            st = s->be->synchronize(s->dev, err);
            for (int32_t i = 0; i < lir->n_outputs && st == RLX_OK; i++)
                st = s->be->buffer_read(refs[lir->n_inputs + i].buf, 0, outputs[i],
                                        sizes[lir->n_inputs + i], err);
        }
    }
    for (int32_t k = 0; s->zero_copy && k < n_io; k++)
        if (refs[k].buf)
            s->be->buffer_free(refs[k].buf);
    if (st == RLX_OK && s->profiling)
        st = profile_add(s, p, err);
    return st;
}

void rlx_session_program_set_timing(rlx_session_program *p, bool enabled)
{
    if (p && p->s->be->program_set_timing)
        p->s->be->program_set_timing(p->prog, enabled);
}

rlx_status rlx_session_program_timings(rlx_session_program *p, double *ms, int32_t n,
                                       rlx_error **err)
{
    if (!p || !p->s->be->program_timings)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "this backend does not time programs");
    return p->s->be->program_timings(p->prog, ms, n, err);
}

void rlx_session_set_profiling(rlx_session *s, bool enabled)
{
    if (!s)
        return;
    s->profiling = enabled;
    memset(s->prof, 0, sizeof s->prof);
    if (s->be->program_set_timing)
        for (rlx_session_program *p = s->programs; p; p = p->next)
            s->be->program_set_timing(p->prog, enabled);
}

int32_t rlx_session_profile(const rlx_session *s, rlx_session_op_profile *out, int32_t cap)
{
    int32_t n = 0;
    if (!s)
        return 0;
    for (int op = 0; op < RLX_OP_COUNT; op++) {
        if (!s->prof[op].count)
            continue;
        if (out && n < cap) {
            out[n] = s->prof[op];
            out[n].op = (rlx_op)op;
        }
        n++;
    }
    return n;
}

/* ---- state -------------------------------------------------------------- */

static rlx_status state_zero(rlx_session *s, named_buf *nb, rlx_error **err)
{
    if (nb->buf->host_ptr) {
        memset(nb->buf->host_ptr, 0, (size_t)nb->bytes);
        return RLX_OK;
    }
    void *z = calloc(1, (size_t)(nb->bytes ? nb->bytes : 1));
    if (!z)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory zeroing state");
    rlx_status st = s->be->buffer_write(nb->buf, 0, z, nb->bytes, err);
    free(z);
    return st;
}

rlx_status rlx_session_state_reset(rlx_session *s, const char *name, rlx_error **err)
{
    if (!s)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_session_state_reset: no session");
    if (!name) {
        for (int i = 0; i < s->n_states; i++) {
            rlx_status st = state_zero(s, &s->states[i], err);
            if (st != RLX_OK)
                return st;
        }
        return RLX_OK;
    }
    named_buf *nb = find_named(s->states, s->n_states, name);
    if (!nb)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no state named '%s'", name);
    return state_zero(s, nb, err);
}

rlx_status rlx_session_state_read(rlx_session *s, const char *name, uint64_t offset, void *dst,
                                  uint64_t size, rlx_error **err)
{
    named_buf *nb = s && name ? find_named(s->states, s->n_states, name) : NULL;
    if (!nb)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no state named '%s'", name ? name : "");
    return s->be->buffer_read(nb->buf, offset, dst, size, err);
}

rlx_status rlx_session_state_write(rlx_session *s, const char *name, uint64_t offset,
                                   const void *src, uint64_t size, rlx_error **err)
{
    named_buf *nb = s && name ? find_named(s->states, s->n_states, name) : NULL;
    if (!nb)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no state named '%s'", name ? name : "");
    return s->be->buffer_write(nb->buf, offset, src, size, err);
}

uint64_t rlx_session_io_bytes(const rlx_session *s, const rlx_lir *lir)
{
    if (!s || !lir || s->zero_copy)
        return 0;
    rlx_sym_values bounds = {{0}};
    for (int i = 0; i < lir->n_symbols && i < RLX_MAX_SYMBOLS; i++)
        bounds.v[i] = lir->symbols[i].max;
    uint64_t n = 0;
    for (int32_t i = 0; i < lir->n_inputs; i++)
        n += home_bytes(lir, RLX_HOME_INPUT, i, &bounds);
    for (int32_t i = 0; i < lir->n_outputs; i++)
        n += home_bytes(lir, RLX_HOME_OUTPUT, i, &bounds);
    return n;
}

rlx_session_memory_info rlx_session_memory(const rlx_session *s)
{
    rlx_session_memory_info m = {0};
    if (!s)
        return m;
    rlx_session *ms = (rlx_session *)(uintptr_t)s;
    pthread_mutex_lock(&ms->mu);
    m.weights_bytes = s->weights_bytes;
    m.state_bytes = s->state_bytes;
    m.arena_bytes = s->arena_bytes + s->io_bytes;
    m.budget_bytes = s->budget;
    pthread_mutex_unlock(&ms->mu);
    return m;
}
