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
void cpu_program_stats(const rlx_program *prog, rlx_program_stats *out);

/* Multiply-adds (or elements, for ops without a product) per instruction
 * below which a run takes one thread: waking the pool for each of its jobs
 * would cost more than splitting them saves. Set between the two cases
 * measured on 2 cores: stories260K's decode step (about 1,400 per
 * instruction) ran at 8,889 tokens/s on two threads and 14,086 on one,
 * Qwen3-0.6B's (about 520,000) at 86 on two and 49 on one; a 64-token
 * prompt of stories260K (about 80,000) takes the pool. */
#define RLX_CPU_POOL_MIN_WORK 32768

#endif
