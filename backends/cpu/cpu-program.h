/* CPU programs: LIR validation, kernel selection and the executor. The
 * functions fill rlx_cpu_backend's program slots (see backends/backend.h for
 * their contracts). Not installed. */
#ifndef RLX_BACKENDS_CPU_CPU_PROGRAM_H
#define RLX_BACKENDS_CPU_CPU_PROGRAM_H

#include "backends/backend.h"

bool cpu_supports_op(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins);
rlx_status cpu_program_create(rlx_device *dev, const rlx_lir *lir, rlx_program **out,
                              rlx_error **err);
rlx_status cpu_program_run(rlx_program *prog, const rlx_program_bindings *b,
                           const rlx_sym_values *syms, rlx_error **err);
void cpu_program_free(rlx_program *prog);
void cpu_program_set_timing(rlx_program *prog, bool enabled);
rlx_status cpu_program_timings(rlx_program *prog, double *ms, int32_t n, rlx_error **err);

#endif
