/* LIR: the scheduled, memory-planned program a backend receives.
 *
 * The compiler (engine/compile) lowers a graph into one rlx_lir per device
 * segment: a flat list of instructions in execution order over numbered
 * values. Every value has a dtype, a (possibly symbolic) shape, element
 * strides, and a home:
 *   ARENA  - bytes [offset, offset+max_bytes) of the program's one scratch arena
 *   PARAM  - weight `index` (bound by the session, in the file's dtype)
 *   STATE  - persistent state tensor `index` (e.g. a KV cache), updated in place
 *   INPUT  - run-time input `index`
 *   OUTPUT - run-time output `index`
 *   CONST  - bytes inside lir->const_data at `offset`
 * A view (reshape, slice, permute) shares its source's home with its own
 * byte offset and strides; `view_of` names the source value.
 *
 * A model can be cut into segments placed on different devices (partial
 * offload): each segment is its own rlx_lir; a value crossing a cut is an
 * OUTPUT of the earlier segment and an INPUT of the later one.
 *
 * Conventions of the compiler's output (engine/compile):
 * - An instruction whose output value is a view (view_of >= 0: RESHAPE,
 *   SLICE at a constant start, PERMUTE) moves no data; a backend treats it
 *   as a no-op. It stays in the list so instruction i maps to graph node.
 * - Any operand may be a strided view (contiguous == false). A backend that
 *   needs contiguous operands refuses the instruction in supports_op; the
 *   compiler then copies the operand into a contiguous value first.
 * - SCATTER has in_place set: its output is the state (same home, offset,
 *   strides) written in place. Elementwise instructions with in_place write
 *   over in[0], which has the same shape and dtype and dies there.
 * - Strides of symbolic shapes are affine in the symbols; where a product of
 *   two symbolic dims would be needed, an ARENA value is laid out at the
 *   bounds (constant strides, contiguous == false). Inputs and outputs are
 *   always contiguous at the run's actual sizes.
 * - Inputs are the graph's declared inputs in declaration order; outputs
 *   are the graph's outputs in order (then, for a segment, the values later
 *   segments read).
 *
 * Thread safety: an rlx_lir is immutable once built; backends only read it.
 */
#ifndef RLX_BASE_LIR_H
#define RLX_BASE_LIR_H

#include <stdint.h>

#include "backends/base/op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rlx_home {
    RLX_HOME_ARENA,
    RLX_HOME_PARAM,
    RLX_HOME_STATE,
    RLX_HOME_INPUT,
    RLX_HOME_OUTPUT,
    RLX_HOME_CONST,
} rlx_home;

typedef struct rlx_lir_value {
    rlx_dtype dtype;
    rlx_shape shape;
    /* Strides in elements per dim (for block-quantized dtypes, only
     * contiguous rows are allowed: stride of the last dim is 1 and the
     * row stride is a whole number of blocks' worth of elements). A dim's
     * stride may be symbolic in principle, so it is an rlx_dim too. */
    rlx_dim stride[RLX_MAX_DIMS];
    rlx_home home;
    int32_t index;      /* param/state/input/output index */
    int32_t view_of;    /* source value id for views, else -1 */
    uint64_t offset;    /* bytes from the start of its home */
    uint64_t max_bytes; /* extent at the symbols' upper bounds */
    bool contiguous;    /* true when strides are the row-major defaults */
} rlx_lir_value;

typedef struct rlx_lir_instr {
    rlx_op op;
    rlx_op_params p;
    int32_t n_in;
    int32_t in[RLX_MAX_INPUTS];
    int32_t out;
    int32_t node;  /* graph node id it came from (for dumps and timing) */
    bool in_place; /* out shares the home of in[0] */
} rlx_lir_instr;

/* A named external tensor (param, state, input or output). */
typedef struct rlx_lir_binding {
    const char *name;
    rlx_dtype dtype;
    rlx_shape shape; /* at upper bounds for inputs/outputs/states */
    uint64_t max_bytes;
} rlx_lir_binding;

typedef struct rlx_lir_symbol {
    const char *name; /* "SEQ" */
    int64_t max;      /* upper bound */
} rlx_lir_symbol;

typedef struct rlx_lir {
    int32_t n_values;
    rlx_lir_value *values;
    int32_t n_instrs;
    rlx_lir_instr *instrs;

    int32_t n_symbols;
    rlx_lir_symbol symbols[RLX_MAX_SYMBOLS];

    int32_t n_params, n_states, n_inputs, n_outputs;
    rlx_lir_binding *params, *states, *inputs, *outputs;

    uint64_t arena_bytes; /* peak scratch bytes at the symbols' upper bounds */
    uint64_t const_bytes;
    const uint8_t *const_data;
} rlx_lir;

#ifdef __cplusplus
}
#endif
#endif
