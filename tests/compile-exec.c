#include "compile-exec.h"

#include <stdlib.h>
#include <string.h>

int rlx_test_have_cpu(void)
{
    return rlx_backend_find("cpu") != NULL;
}

static const void *lookup(const rlx_test_tensor *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return t[i].data;
    return NULL;
}

static uint64_t actual_bytes(const rlx_lir *lir, rlx_home home, int32_t idx,
                             const rlx_sym_values *sv, int64_t *numel)
{
    for (int32_t v = 0; v < lir->n_values; v++) {
        const rlx_lir_value *val = &lir->values[v];
        if (val->home == home && val->index == idx && val->view_of < 0) {
            *numel = rlx_shape_numel(&val->shape, sv);
            uint64_t b = 0;
            rlx_dtype_row_bytes(val->dtype, (uint64_t)*numel, &b);
            return b;
        }
    }
    *numel = 0;
    return 0;
}

rlx_status rlx_test_compile_run(const rlx_graph *g, rlx_compile_opts opts, const rlx_test_run *run,
                                void **outs, int64_t *n_elems, int max_outs, rlx_lir **keep_lir,
                                rlx_error **err)
{
    const rlx_backend_i *be = rlx_backend_find("cpu");
    if (!be)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no cpu backend");
    rlx_device *dev = NULL;
    rlx_device_opts dopts = {.n_threads = 1};
    rlx_status s = be->device_open(0, &dopts, &dev, err);
    if (s != RLX_OK)
        return s;
    if (!opts.backend)
        opts.backend = be; /* a test may wrap the CPU backend's supports_op */
    opts.device = dev;
    rlx_lir *lir = NULL;
    rlx_program *prog = NULL;
    rlx_buffer *arena = NULL;
    rlx_buffer *bufs[64] = {0};
    int nb = 0;
    rlx_buffer_ref refs[4][16];
    memset(refs, 0, sizeof refs);
    s = rlx_compile(g, &opts, &lir, err);
    if (s != RLX_OK)
        goto out;
    s = be->program_create(dev, lir, &prog, err);
    if (s != RLX_OK)
        goto out;
    s = be->buffer_alloc(dev, lir->arena_bytes ? lir->arena_bytes : 64, &arena, err);
    if (s != RLX_OK)
        goto out;
    for (int32_t i = 0; i < lir->n_params && s == RLX_OK; i++) {
        const void *d = lookup(run->params, run->n_params, lir->params[i].name);
        if (!d) {
            s = rlx_error_set(err, RLX_ERR_NOT_FOUND, "test: no param '%s'", lir->params[i].name);
            break;
        }
        s = be->buffer_from_host(dev, d, lir->params[i].max_bytes, &bufs[nb], err);
        refs[0][i].buf = bufs[nb++];
    }
    for (int32_t i = 0; i < lir->n_states && s == RLX_OK; i++) {
        s = be->buffer_alloc(dev, lir->states[i].max_bytes, &bufs[nb], err);
        if (s != RLX_OK)
            break;
        refs[1][i].buf = bufs[nb++];
        const void *d = lookup(run->states, run->n_states, lir->states[i].name);
        void *z = calloc(1, lir->states[i].max_bytes);
        s = be->buffer_write(refs[1][i].buf, 0, d ? d : z, lir->states[i].max_bytes, err);
        free(z);
    }
    for (int32_t i = 0; i < lir->n_inputs && s == RLX_OK; i++) {
        const void *d = lookup(run->inputs, run->n_inputs, lir->inputs[i].name);
        int64_t ne;
        uint64_t bytes = actual_bytes(lir, RLX_HOME_INPUT, i, &run->syms, &ne);
        if (!d) {
            s = rlx_error_set(err, RLX_ERR_NOT_FOUND, "test: no input '%s'", lir->inputs[i].name);
            break;
        }
        s = be->buffer_alloc(dev, lir->inputs[i].max_bytes, &bufs[nb], err);
        if (s != RLX_OK)
            break;
        refs[2][i].buf = bufs[nb++];
        s = be->buffer_write(refs[2][i].buf, 0, d, bytes, err);
    }
    for (int32_t i = 0; i < lir->n_outputs && s == RLX_OK; i++) {
        s = be->buffer_alloc(dev, lir->outputs[i].max_bytes, &bufs[nb], err);
        refs[3][i].buf = bufs[nb++];
    }
    if (s != RLX_OK)
        goto out;
    rlx_program_bindings b = {
        .arena = {arena, 0},
        .params = refs[0],
        .states = refs[1],
        .inputs = refs[2],
        .outputs = refs[3],
    };
    for (int r = 0; r < (run->runs ? run->runs : 1) && s == RLX_OK; r++)
        s = be->program_run(prog, &b, &run->syms, err);
    for (int32_t i = 0; i < lir->n_outputs && i < max_outs && s == RLX_OK; i++) {
        int64_t ne;
        uint64_t bytes = actual_bytes(lir, RLX_HOME_OUTPUT, i, &run->syms, &ne);
        outs[i] = malloc(bytes ? bytes : 1);
        n_elems[i] = ne;
        s = be->buffer_read(refs[3][i].buf, 0, outs[i], bytes, err);
    }
out:
    for (int i = 0; i < nb; i++)
        if (bufs[i])
            be->buffer_free(bufs[i]);
    if (arena)
        be->buffer_free(arena);
    if (prog)
        be->program_free(prog);
    if (keep_lir && s == RLX_OK)
        *keep_lir = lir;
    else
        rlx_lir_free(lir);
    be->device_close(dev);
    return s;
}

int rlx_test_count_op(const rlx_graph *g, rlx_op op)
{
    int n = 0;
    for (int32_t i = 0; i < rlx_graph_node_count(g); i++)
        n += rlx_graph_node_op(g, i) == op;
    return n;
}

static rlx_backend_i refusing;
static uint64_t refuse_bits;

static bool refusing_supports(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins)
{
    if ((int)ins->op < 64 && (refuse_bits & (1ull << ins->op)))
        return false;
    const rlx_backend_i *cpu = rlx_backend_find("cpu");
    if (!cpu || !dev)
        return true;
    return cpu->supports_op(dev, lir, ins);
}

const rlx_backend_i *rlx_test_refusing_backend(uint64_t refuse)
{
    const rlx_backend_i *cpu = rlx_backend_find("cpu");
    if (cpu)
        refusing = *cpu;
    else
        memset(&refusing, 0, sizeof refusing);
    refusing.name = "test";
    refusing.supports_op = refusing_supports;
    refuse_bits = refuse;
    return &refusing;
}

float rlx_test_max_diff(const float *a, const float *b, int64_t n)
{
    float m = 0;
    for (int64_t i = 0; i < n; i++) {
        float d = a[i] - b[i];
        if (d != d)
            return 1e30f; /* NaN */
        if (d < 0)
            d = -d;
        if (d > m)
            m = d;
    }
    return m;
}

static rlx_backend_i f32_only;

static bool f32_only_supports(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins)
{
    bool moves = ins->op == RLX_OP_CAST || ins->op == RLX_OP_COPY || ins->op == RLX_OP_RESHAPE ||
                 ins->op == RLX_OP_SLICE || ins->op == RLX_OP_PERMUTE || ins->op == RLX_OP_SCATTER;
    for (int k = 0; k < ins->n_in && !moves; k++) {
        rlx_dtype dt = lir->values[ins->in[k]].dtype;
        bool packed = (ins->op == RLX_OP_MATMUL && k == 1) || (ins->op == RLX_OP_GATHER && k == 0);
        if (!packed && (dt == RLX_DTYPE_F16 || dt == RLX_DTYPE_BF16))
            return false;
    }
    const rlx_backend_i *cpu = rlx_backend_find("cpu");
    if (!cpu || !dev)
        return true;
    return cpu->supports_op(dev, lir, ins);
}

const rlx_backend_i *rlx_test_f32_only_backend(void)
{
    const rlx_backend_i *cpu = rlx_backend_find("cpu");
    if (cpu)
        f32_only = *cpu;
    else
        memset(&f32_only, 0, sizeof f32_only);
    f32_only.name = "f32-only";
    f32_only.supports_op = f32_only_supports;
    return &f32_only;
}

static rlx_backend_i contiguous_only;

static bool contiguous_supports(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins)
{
    if (ins->op != RLX_OP_COPY && lir->values[ins->out].view_of < 0)
        for (int k = 0; k < ins->n_in; k++)
            if (!lir->values[ins->in[k]].contiguous)
                return false;
    const rlx_backend_i *cpu = rlx_backend_find("cpu");
    if (!cpu || !dev)
        return true;
    return cpu->supports_op(dev, lir, ins);
}

const rlx_backend_i *rlx_test_contiguous_backend(void)
{
    const rlx_backend_i *cpu = rlx_backend_find("cpu");
    if (cpu)
        contiguous_only = *cpu;
    else
        memset(&contiguous_only, 0, sizeof contiguous_only);
    contiguous_only.name = "contiguous-only";
    contiguous_only.supports_op = contiguous_supports;
    return &contiguous_only;
}
