/* The compiler: graph (engine/ir) -> scheduled, memory-planned LIR.
 *
 * Usage:
 *     rlx_compile_opts opts = rlx_compile_default_opts();
 *     opts.backend = rlx_backend_find("cpu");   // legalize against it (NULL: accept all)
 *     opts.device = dev;                        // passed to supports_op (may be NULL)
 *     rlx_lir *lir = NULL;
 *     if (rlx_compile(g, &opts, &lir, &err) != RLX_OK) ...
 *     be->program_create(dev, lir, &prog, &err);
 *     ...
 *     be->program_free(prog);
 *     rlx_lir_free(lir);                        // after the program made from it
 *
 * Pipeline (each pass in its own file, each can be dumped after):
 *   verify -> shapes -> dce -> const-fold -> cse -> layout -> legalize -> fusion
 *   -> (legality re-check) -> schedule + memory plan -> LIR
 * Legalization runs before fusion so that decomposed ops (GELU -> tanh form,
 * ATTENTION -> matmul/softmax/matmul) are fused too; fusion only forms ops the
 * backend's supports_op accepts. Nothing falls back to the host: an op the
 * backend lacks and that cannot be decomposed fails with the op's name.
 *
 * rlx_compile never modifies the caller's graph (it works on a copy).
 * The LIR is owned by the caller (rlx_lir_free); its strings and const data
 * are owned by the LIR. Backends must keep the LIR alive as long as a program
 * made from it, or copy what they need in program_create.
 *
 * Thread safety: rlx_compile is reentrant (no global state); one graph may be
 * compiled by several threads at once since it is only read.
 */
#ifndef RLX_ENGINE_COMPILE_COMPILE_H
#define RLX_ENGINE_COMPILE_COMPILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backends/backend.h"
#include "backends/base/lir.h"
#include "backends/base/status.h"
#include "engine/ir/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Passes, as bits for rlx_compile_opts.passes / .dump_after. VERIFY, SHAPES,
 * LEGALIZE and SCHEDULE always run; the others are optimizations that can be
 * turned off (e.g. for equivalence tests). */
typedef enum rlx_pass_id {
    RLX_PASS_VERIFY = 1u << 0,
    RLX_PASS_SHAPES = 1u << 1,
    RLX_PASS_DCE = 1u << 2,
    RLX_PASS_CONST_FOLD = 1u << 3,
    RLX_PASS_CSE = 1u << 4,
    RLX_PASS_LAYOUT = 1u << 5,
    RLX_PASS_LEGALIZE = 1u << 6,
    RLX_PASS_FUSION = 1u << 7,
    RLX_PASS_INPLACE = 1u << 8, /* memory planner: elementwise ops reuse a dying input */
    RLX_PASS_SCHEDULE = 1u << 9,
} rlx_pass_id;
#define RLX_PASS_ALL 0x3ffu
#define RLX_PASS_REQUIRED \
    (RLX_PASS_VERIFY | RLX_PASS_SHAPES | RLX_PASS_LEGALIZE | RLX_PASS_SCHEDULE)

typedef struct rlx_compile_opts {
    uint32_t passes; /* enabled passes (required ones run regardless) */

    /* Legalize/fuse against this backend's supports_op; NULL = accept all. */
    const rlx_backend_i *backend;
    rlx_device *device; /* handed to supports_op; may be NULL */

    /* rlx_compile_split across devices (partial offload): the nodes of
     * segment i are legalized, fused and scheduled against
     * segment_backends[i] / segment_devices[i]. Segments at or past
     * n_segment_targets, and NULL backends, use backend/device. Both arrays
     * are borrowed for the call. */
    int32_t n_segment_targets;
    const rlx_backend_i *const *segment_backends;
    rlx_device *const *segment_devices;

    /* Dumps after the passes in dump_after (bits): text to dump_file
     * (with a header per pass), and/or one file per pass in dump_dir named
     * "<nn>-<pass>.txt" and, with dump_dot, "<nn>-<pass>.dot" (the
     * scheduled LIR: "<nn>-lir.txt" / "<nn>-lir.dot", per segment
     * "<nn>-lir-seg<i>.*"). */
    uint32_t dump_after;
    FILE *dump_file;
    const char *dump_dir;
    bool dump_dot;
} rlx_compile_opts;

/* All passes on, no backend (accept all ops), no dumps. */
RLX_API rlx_compile_opts rlx_compile_default_opts(void);

/* Compile g (not modified) into one LIR. A graph with segments (see
 * rlx_graph_set_segment) is compiled as a whole here; use rlx_compile_split
 * for one LIR per segment. */
RLX_API rlx_status rlx_compile(const rlx_graph *g, const rlx_compile_opts *opts, rlx_lir **out,
                               rlx_error **err);

/* Compile g into one LIR per segment (segment ids 0..n-1 as set by
 * rlx_graph_set_segment; empty segments give empty programs). A value made
 * in segment i and used in segment j > i is an OUTPUT of i and an INPUT of j,
 * both bound under the same name "seg<i>:<node name>"; the caller copies it
 * across devices between the runs. Source nodes (params, consts, inputs,
 * states) are bound in each segment that uses them. *out is a malloc'd array
 * of *n_out LIRs; free with rlx_lir_free_array. */
RLX_API rlx_status rlx_compile_split(const rlx_graph *g, const rlx_compile_opts *opts,
                                     rlx_lir ***out, int32_t *n_out, rlx_error **err);

RLX_API void rlx_lir_free(rlx_lir *lir);
RLX_API void rlx_lir_free_array(rlx_lir **lirs, int32_t n);

/* A 64-bit hash of the graph's structure (ops, params, dtypes, shapes, names
 * of bindings, const data) and its symbols' bounds: the session's program
 * cache key. Equal graphs hash equally. */
RLX_API uint64_t rlx_graph_hash(const rlx_graph *g);

/* Text dump of an LIR (one line per instruction and value). */
RLX_API void rlx_lir_dump(const rlx_lir *lir, FILE *f);

/* Graphviz dot of an LIR: one box per instruction in schedule order (op,
 * output value, dtype, where it lives), grey boxes for the params, states,
 * inputs and constants it reads, dashed boxes for views no instruction
 * writes, edges from each value's producer to its readers; instructions
 * writing an output are ellipses. */
RLX_API void rlx_lir_dump_dot(const rlx_lir *lir, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
