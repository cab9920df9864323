/* Internals of the CPU backend shared by cpu-backend.c, cpu-program.c,
 * cpu-ops.c and cpu-quant.c. Not installed.
 *
 * A program resolves every LIR value, once per run, into a cpu_tensor: a
 * base pointer, the dims at this run's symbol values and element strides.
 * Each op is a function over cpu_tensors (one per op: the seam where a
 * kernel from kernels.h replaces a reference loop).
 */
#ifndef RLX_BACKENDS_CPU_CPU_INTERNAL_H
#define RLX_BACKENDS_CPU_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "backends/cpu/threadpool.h"

typedef struct cpu_device {
    rlx_device base;
    int index;
    int n_threads;
    rlx_threadpool *pool; /* the kernels' workers */
} cpu_device;

typedef struct cpu_buffer {
    rlx_buffer base;
    bool owned;       /* false when wrapping host memory */
    void *map_base;   /* owned and mapped (large buffers): the mapping to unmap */
    size_t map_bytes; /* its length; 0 when host_ptr came from aligned_alloc */
} cpu_buffer;

typedef struct cpu_tensor {
    uint8_t *p; /* first element */
    rlx_dtype dt;
    int rank;
    int64_t ne[RLX_MAX_DIMS];
    int64_t st[RLX_MAX_DIMS]; /* elements */
} cpu_tensor;

/* The cos/sin table (rlx_cpu_rope_table) shared by a program's ROPEs of
 * one position value with the same parameters (a model's q and k in every
 * layer): the first of them in a run fills it, the others reuse it. A value
 * is written once per run, so the table holds while `filled` is the
 * program's current run and the token count matches. */
typedef struct cpu_rope_table {
    const uint64_t *run; /* the program's run counter */
    uint64_t filled;     /* the run that filled it (0: none yet) */
    int64_t n_tokens;    /* ... for this many tokens */
    size_t cap;          /* floats `data` holds */
    float *data;
} cpu_rope_table;

/* Everything an op function gets. `scratch` holds at least
 * scratch_floats floats, sized at program_create for the symbols' bounds. */
typedef struct cpu_op_ctx {
    const rlx_op_params *p;
    const cpu_tensor *in[RLX_MAX_INPUTS];
    int n_in;
    const cpu_tensor *out;
    float *scratch;
    size_t scratch_floats;
    int64_t slice_start;  /* SLICE start / SCATTER offset at this run's symbols */
    rlx_threadpool *pool; /* NULL: serial */
    int n_threads;
    void *kscratch; /* kernels.h scratch, 64-byte aligned */
    size_t kscratch_bytes;
    cpu_rope_table *rope; /* ROPE sharing its angles with others, or NULL */
} cpu_op_ctx;

typedef rlx_status (*cpu_op_fn)(const cpu_op_ctx *c);

/* Returns the op's function for this instruction, or NULL with a reason in
 * `why` when the CPU backend does not take it. */
cpu_op_fn cpu_op_select(const rlx_lir *lir, const rlx_lir_instr *ins, char *why, size_t why_len);

/* Scratch floats an instruction needs at the given dims bound (the largest
 * dim of any of its values). */
size_t cpu_op_scratch(const rlx_lir *lir, const rlx_lir_instr *ins, int64_t max_dim);

/* Scratch bytes the kernels.h fast path of an instruction needs when the
 * symbols are at `bounds` (0 when it needs none). */
size_t cpu_op_kscratch(const rlx_lir *lir, const rlx_lir_instr *ins, const rlx_sym_values *bounds,
                       int n_threads);

/* Can instructions a..b (consecutive) run as one matrix-vector job when x
 * has one row: MATMULs of the same x by packed weights [N, K] (trans_b, no
 * bias or scale; an activation is applied after), none reading another's
 * output? */
bool cpu_matvec_groupable(const rlx_lir *lir, const rlx_lir_instr *a, const rlx_lir_instr *b);

/* Scratch bytes such a group of n needs at `bounds`. */
size_t cpu_matvec_group_kscratch(const rlx_lir *lir, const rlx_lir_instr *first, int n,
                                 const rlx_sym_values *bounds);

/* Runs the group's n products as one job (rlx_cpu_matvec_multi) when x has
 * one row this run and every weight has a matrix-vector kernel; false, with
 * nothing written, otherwise (run them one by one). */
bool cpu_matvec_group_run(const cpu_op_ctx *const *c, int n);

/* Do two ROPEs turn the same positions by the same angles (one position
 * value, one frequency-factor value, the same parameters and rotated
 * dims)? Then one cos/sin table serves both. */
bool cpu_rope_same_angles(const rlx_lir *lir, const rlx_lir_instr *a, const rlx_lir_instr *b);

/* Floats of a ROPE's cos/sin table at `bounds` (0 when it takes none). */
size_t cpu_rope_table_floats(const rlx_lir *lir, const rlx_lir_instr *ins,
                             const rlx_sym_values *bounds);

/* scalar loads/stores of any plain dtype */
float cpu_load_f32(const uint8_t *base, rlx_dtype dt, int64_t i);
double cpu_load_f64(const uint8_t *base, rlx_dtype dt, int64_t i);
void cpu_store_f32(uint8_t *base, rlx_dtype dt, int64_t i, float v);
void cpu_store_f64(uint8_t *base, rlx_dtype dt, int64_t i, double v);
bool cpu_dtype_plain(rlx_dtype dt);
size_t cpu_dtype_size(rlx_dtype dt); /* bytes per element of a plain dtype */
/* Alignment the CPU backend needs for a tensor of dt (its scalar fields). */
size_t cpu_dtype_align(rlx_dtype dt);

/* Block dequantization: row of n elements (n a multiple of the block size)
 * starting at the block-aligned bytes `src`. */
bool cpu_quant_supported(rlx_dtype dt);
void cpu_dequant_row(rlx_dtype dt, const void *src, float *dst, int64_t n);
/* Any dtype (plain or block) row of n contiguous elements to f32. */
void cpu_row_to_f32(rlx_dtype dt, const void *src, float *dst, int64_t n);

#endif
