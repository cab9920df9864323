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
/* Compile g with opts (backend/device filled in here) and run it. On success
 * outs[i] holds output i (malloc'd, as float for F32 outputs or raw bytes
 * otherwise) and n_elems[i] its element count; returns RLX_OK. */
rlx_status rlx_test_compile_run(const rlx_graph *g, rlx_compile_opts opts, const rlx_test_run *run,
                                void **outs, int64_t *n_elems, int max_outs, rlx_lir **keep_lir,
                                rlx_error **err);

#endif
