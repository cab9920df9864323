/* The ONNX runner (onnx-model.h): import, weights, one compiled program,
 * and the element conversions between the model's types and the graph's
 * (the only host work: no part of the network runs here). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph.h"
#include "engine/runtime/session.h"
#include "models/onnx/onnx-model.h"

struct rlx_onnx_runner {
    rlx_session *s;
    rlx_onnx_import *im;
    rlx_session_program *prog;
    int32_t *in_slot, *out_slot; /* ONNX order -> program binding */
    void **in_buf, **out_buf;
};

rlx_onnx_runner_params rlx_onnx_runner_default_params(void)
{
    return (rlx_onnx_runner_params){.device = "cpu"};
}

void rlx_onnx_runner_free(rlx_onnx_runner *r)
{
    if (!r)
        return;
    rlx_session_free(r->s);
    int32_t ni = rlx_onnx_import_n_inputs(r->im), no = rlx_onnx_import_n_outputs(r->im);
    for (int32_t i = 0; r->in_buf && i < ni; i++)
        free(r->in_buf[i]);
    for (int32_t i = 0; r->out_buf && i < no; i++)
        free(r->out_buf[i]);
    free(r->in_buf);
    free(r->out_buf);
    free(r->in_slot);
    free(r->out_slot);
    rlx_onnx_import_free(r->im);
    free(r);
}

rlx_status rlx_onnx_runner_create(const rlx_onnx_runner_params *p, const rlx_onnx_model *m,
                                  rlx_onnx_runner **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!m || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_onnx_runner_create: bad argument");
    rlx_onnx_runner_params dp = rlx_onnx_runner_default_params();
    if (!p)
        p = &dp;
    rlx_onnx_runner *r = calloc(1, sizeof *r);
    if (!r)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    /* the graph first: unsupported ops are reported before any weight is
     * handed to a device */
    rlx_status st = rlx_onnx_import_graph(m, &p->import, &r->im, err);
    if (st == RLX_OK) {
        rlx_session_params sp = rlx_session_default_params();
        sp.device = p->device ? p->device : "cpu";
        sp.n_threads = p->n_threads;
        sp.memory_budget = p->memory_budget;
        st = rlx_session_create(&sp, &r->s, err);
    }
    if (st == RLX_OK)
        st = rlx_onnx_import_add_weights(r->im, r->s, err);
    if (st == RLX_OK)
        st = rlx_session_compile(r->s, rlx_onnx_import_get_graph(r->im), &r->prog, err);
    int32_t ni = rlx_onnx_import_n_inputs(r->im), no = rlx_onnx_import_n_outputs(r->im);
    /* the host copies of inputs and outputs count against the budget too:
     * refuse before allocating them */
    uint64_t budget = st == RLX_OK ? rlx_session_memory(r->s).budget_bytes : 0;
    for (int32_t i = 0; st == RLX_OK && i < ni + no; i++) {
        const rlx_onnx_io *io =
            i < ni ? rlx_onnx_import_input(r->im, i) : rlx_onnx_import_output(r->im, i - ni);
        uint64_t bytes = (uint64_t)io->numel * 8;
        if (io->numel > (int64_t)(UINT64_MAX / 16) || (budget && bytes > budget)) {
            char b1[32], b2[32];
            st = rlx_error_set(err, RLX_ERR_BUDGET,
                               "%s '%s' has %lld elements (%s with its host copy), more than the "
                               "memory budget of %s",
                               i < ni ? "input" : "output", io->name, (long long)io->numel,
                               rlx_format_bytes(bytes, b1, sizeof b1),
                               rlx_format_bytes(budget, b2, sizeof b2));
        }
    }
    if (st == RLX_OK) {
        r->in_slot = calloc((size_t)ni + 1, sizeof *r->in_slot);
        r->out_slot = calloc((size_t)no + 1, sizeof *r->out_slot);
        r->in_buf = calloc((size_t)ni + 1, sizeof *r->in_buf);
        r->out_buf = calloc((size_t)no + 1, sizeof *r->out_buf);
        if (!r->in_slot || !r->out_slot || !r->in_buf || !r->out_buf)
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    for (int32_t i = 0; st == RLX_OK && i < ni; i++) {
        const rlx_onnx_io *io = rlx_onnx_import_input(r->im, i);
        r->in_slot[i] = rlx_session_program_input(r->prog, io->name);
        /* an input no output depends on is dropped by the compiler */
        if (r->in_slot[i] >= 0 && !(r->in_buf[i] = malloc((size_t)(io->numel ? io->numel : 1) * 4)))
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    for (int32_t i = 0; st == RLX_OK && i < no; i++) {
        const rlx_onnx_io *io = rlx_onnx_import_output(r->im, i);
        r->out_slot[i] = rlx_session_program_output(r->prog, io->name);
        if (r->out_slot[i] < 0)
            st = rlx_error_set(err, RLX_ERR_INTERNAL, "output '%s' is missing from the program",
                               io->name);
        else if (!(r->out_buf[i] = malloc((size_t)(io->numel ? io->numel : 1) * 4)))
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    if (st != RLX_OK) {
        rlx_onnx_runner_free(r);
        return st;
    }
    *out = r;
    return RLX_OK;
}

int32_t rlx_onnx_runner_n_inputs(const rlx_onnx_runner *r)
{
    return r ? rlx_onnx_import_n_inputs(r->im) : 0;
}

const rlx_onnx_io *rlx_onnx_runner_input(const rlx_onnx_runner *r, int32_t i)
{
    return r ? rlx_onnx_import_input(r->im, i) : NULL;
}

int32_t rlx_onnx_runner_n_outputs(const rlx_onnx_runner *r)
{
    return r ? rlx_onnx_import_n_outputs(r->im) : 0;
}

const rlx_onnx_io *rlx_onnx_runner_output(const rlx_onnx_runner *r, int32_t i)
{
    return r ? rlx_onnx_import_output(r->im, i) : NULL;
}

rlx_session *rlx_onnx_runner_session(rlx_onnx_runner *r)
{
    return r ? r->s : NULL;
}

double rlx_onnx_elem_get(const void *p, int32_t e, int64_t i)
{
    const uint8_t *b = p;
    switch (e) {
    case RLX_ONNX_FLOAT: {
        float f;
        memcpy(&f, b + 4 * i, 4);
        return f;
    }
    case RLX_ONNX_DOUBLE: {
        double d;
        memcpy(&d, b + 8 * i, 8);
        return d;
    }
    case RLX_ONNX_FLOAT16: {
        uint16_t h;
        memcpy(&h, b + 2 * i, 2);
        return rlx_f16_to_f32(h);
    }
    case RLX_ONNX_BFLOAT16: {
        uint16_t h;
        memcpy(&h, b + 2 * i, 2);
        return rlx_bf16_to_f32(h);
    }
    case RLX_ONNX_INT64: {
        int64_t x;
        memcpy(&x, b + 8 * i, 8);
        return (double)x;
    }
    case RLX_ONNX_INT32: {
        int32_t x;
        memcpy(&x, b + 4 * i, 4);
        return x;
    }
    case RLX_ONNX_UINT32: {
        uint32_t x;
        memcpy(&x, b + 4 * i, 4);
        return x;
    }
    case RLX_ONNX_INT16: {
        int16_t x;
        memcpy(&x, b + 2 * i, 2);
        return x;
    }
    case RLX_ONNX_UINT16: {
        uint16_t x;
        memcpy(&x, b + 2 * i, 2);
        return x;
    }
    case RLX_ONNX_INT8:
        return (int8_t)b[i];
    default:
        return b[i];
    }
}

static void store_elem(void *p, int32_t e, int64_t i, double v)
{
    uint8_t *b = p;
    switch (e) {
    case RLX_ONNX_FLOAT: {
        float f = (float)v;
        memcpy(b + 4 * i, &f, 4);
        break;
    }
    case RLX_ONNX_DOUBLE:
        memcpy(b + 8 * i, &v, 8);
        break;
    case RLX_ONNX_FLOAT16: {
        uint16_t h = rlx_f32_to_f16((float)v);
        memcpy(b + 2 * i, &h, 2);
        break;
    }
    case RLX_ONNX_BFLOAT16: {
        uint16_t h = rlx_f32_to_bf16((float)v);
        memcpy(b + 2 * i, &h, 2);
        break;
    }
    case RLX_ONNX_INT64: {
        int64_t x = (int64_t)v;
        memcpy(b + 8 * i, &x, 8);
        break;
    }
    case RLX_ONNX_INT32:
    case RLX_ONNX_UINT32: {
        int32_t x = (int32_t)v;
        memcpy(b + 4 * i, &x, 4);
        break;
    }
    case RLX_ONNX_INT16:
    case RLX_ONNX_UINT16: {
        int16_t x = (int16_t)v;
        memcpy(b + 2 * i, &x, 2);
        break;
    }
    default:
        b[i] = (uint8_t)(int64_t)v;
        break;
    }
}

/* Output i is float in the file and F32 in the graph: the run writes it
 * straight into the caller's buffer. An output bound twice (two names for
 * one value) still goes through the runner's buffers. */
static bool float_out(const rlx_onnx_runner *r, int32_t i)
{
    const rlx_onnx_io *io = rlx_onnx_import_output(r->im, i);
    if (io->elem_type != RLX_ONNX_FLOAT || io->graph_dtype != RLX_DTYPE_F32)
        return false;
    for (int32_t j = 0; j < rlx_onnx_import_n_outputs(r->im); j++)
        if (j != i && r->out_slot[j] == r->out_slot[i])
            return false;
    return true;
}

rlx_status rlx_onnx_runner_run(rlx_onnx_runner *r, const void *const *inputs, void *const *outputs,
                               rlx_error **err)
{
    if (!r || (!inputs && rlx_onnx_runner_n_inputs(r)) || !outputs)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_onnx_runner_run: bad argument");
    const rlx_lir *lir = rlx_session_program_lir(r->prog);
    int32_t ni = rlx_onnx_import_n_inputs(r->im), no = rlx_onnx_import_n_outputs(r->im);
    const void **ins = calloc((size_t)lir->n_inputs + 1, sizeof *ins);
    void **outs = calloc((size_t)lir->n_outputs + 1, sizeof *outs);
    if (!ins || !outs) {
        free(ins);
        free(outs);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    rlx_status st = RLX_OK;
    for (int32_t i = 0; i < ni && st == RLX_OK; i++) {
        if (r->in_slot[i] < 0)
            continue;
        const rlx_onnx_io *io = rlx_onnx_import_input(r->im, i);
        if (io->elem_type == RLX_ONNX_FLOAT && io->graph_dtype == RLX_DTYPE_F32) {
            ins[r->in_slot[i]] = inputs[i]; /* float as the graph holds it: no copy */
            continue;
        }
        for (int64_t k = 0; k < io->numel; k++) {
            double v = rlx_onnx_elem_get(inputs[i], io->elem_type, k);
            if (io->graph_dtype == RLX_DTYPE_F32) {
                float f = (float)v;
                memcpy((uint8_t *)r->in_buf[i] + 4 * k, &f, 4);
            } else if (io->graph_dtype == RLX_DTYPE_I32) {
                if (v < -2147483648.0 || v > 2147483647.0) {
                    st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                       "input '%s': element %lld (%.17g) is outside the int32 "
                                       "range the graph computes in",
                                       io->name, (long long)k, v);
                    break;
                }
                int32_t x = (int32_t)v;
                memcpy((uint8_t *)r->in_buf[i] + 4 * k, &x, 4);
            } else {
                ((uint8_t *)r->in_buf[i])[k] = v != 0;
            }
        }
        ins[r->in_slot[i]] = r->in_buf[i];
    }
    for (int32_t i = 0; i < no; i++)
        outs[r->out_slot[i]] = float_out(r, i) ? outputs[i] : r->out_buf[i];
    if (st == RLX_OK) {
        rlx_sym_values sv = {{0}};
        st =
            rlx_session_run(r->s, r->prog, &sv, (const void *const *)ins, (void *const *)outs, err);
    }
    for (int32_t i = 0; i < no && st == RLX_OK; i++) {
        const rlx_onnx_io *io = rlx_onnx_import_output(r->im, i);
        if (float_out(r, i))
            continue; /* written in place by the run */
        for (int64_t k = 0; k < io->numel; k++) {
            double v;
            if (io->graph_dtype == RLX_DTYPE_F32) {
                float f;
                memcpy(&f, (uint8_t *)r->out_buf[i] + 4 * k, 4);
                v = f;
            } else if (io->graph_dtype == RLX_DTYPE_I32) {
                int32_t x;
                memcpy(&x, (uint8_t *)r->out_buf[i] + 4 * k, 4);
                v = x;
            } else
                v = ((uint8_t *)r->out_buf[i])[k];
            store_elem(outputs[i], io->elem_type, k, v);
        }
    }
    free(ins);
    free(outs);
    return st;
}
