/* Test helper: compile a graph and run it once on the CPU backend. */
#ifndef RLX_TESTS_COMPILE_EXEC_H
#define RLX_TESTS_COMPILE_EXEC_H

#include "engine/compile/compile.h"

typedef struct rlx_test_tensor {
    const char *name;
    const void *data; /* host bytes, contiguous at this run's symbol values */
} rlx_test_tensor;

typedef struct rlx_test_run {
    const rlx_test_tensor *params;
    int n_params;
    const rlx_test_tensor *inputs;
    int n_inputs;
    rlx_test_tensor *states; /* initial contents (NULL data = zeros); not written back */
    int n_states;
    rlx_sym_values syms;
    int runs; /* run the program this many times (states persist); 0 = 1 */
} rlx_test_run;

/* True when the CPU backend is compiled in. */
int rlx_test_have_cpu(void);
/* Compile g with opts and run it on the CPU backend (opts.backend defaults to
 * the CPU backend; a test may pass a wrapper of it with another supports_op;
 * opts.device is filled in here). On success
 * outs[i] holds output i (malloc'd, as float for F32 outputs or raw bytes
 * otherwise) and n_elems[i] its element count; returns RLX_OK. */
rlx_status rlx_test_compile_run(const rlx_graph *g, rlx_compile_opts opts, const rlx_test_run *run,
                                void **outs, int64_t *n_elems, int max_outs, rlx_lir **keep_lir,
                                rlx_error **err);

/* Count the nodes of op `op` in g. */
int rlx_test_count_op(const rlx_graph *g, rlx_op op);
/* The CPU backend's interface with supports_op replaced by one that refuses
 * the ops whose bits are set in refuse (bit = 1ull << op) and asks the CPU
 * backend otherwise. Not thread-safe (one wrapper per process). */
const rlx_backend_i *rlx_test_refusing_backend(uint64_t refuse);
/* The CPU backend's interface refusing F16/BF16 operands except matmul
 * weights, gather tables and data movement. */
const rlx_backend_i *rlx_test_f32_only_backend(void);
/* The CPU backend's interface refusing strided operands (except for COPY
 * and no-op views). */
const rlx_backend_i *rlx_test_contiguous_backend(void);
/* Largest |a-b| over n floats. */
float rlx_test_max_diff(const float *a, const float *b, int64_t n);

#endif
