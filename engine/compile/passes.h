/* The compiler's passes (one file each) and what they share. Internal to
 * engine/compile and its tests.
 *
 * Every graph pass takes the graph it rewrites in place and leaves it
 * compacted (graph-internal.h's order invariant holds on return).
 */
#ifndef RLX_ENGINE_COMPILE_PASSES_H
#define RLX_ENGINE_COMPILE_PASSES_H

#include "engine/compile/compile.h"
#include "engine/ir/graph-internal.h"

typedef rlx_status (*rlx_pass_fn)(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err);

/* Structural checks: inputs exist and come earlier, input counts, binding
 * names unique, outputs valid, quantized tensors only where allowed. */
rlx_status rlx_pass_verify(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err);
/* Re-derive every node's dtype and shape and fail on any disagreement. */
rlx_status rlx_pass_shapes(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err);
/* Drop nodes that no output (or state write) depends on. */
rlx_status rlx_pass_dce(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err);
/* Evaluate ops whose inputs are all constants. */
rlx_status rlx_pass_const_fold(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err);
/* Merge nodes with the same op, params and inputs. */
rlx_status rlx_pass_cse(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err);
/* Cancel permute pairs, fold transposes into matmul flags, drop identity
 * reshapes/permutes, merge reshape chains. */
rlx_status rlx_pass_layout(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err);
/* Decompose ops the backend does not claim into ops it does, or fail. */
rlx_status rlx_pass_legalize(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err);
/* Matmul epilogues, norm weights, add+rms_norm, elementwise chains. */
rlx_status rlx_pass_fusion(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err);

/* Lower a compacted graph to LIR: values with homes and strides, bindings,
 * const data, then the memory plan (see pass-memplan.c). `segment` < 0 takes
 * every node; otherwise only that segment's nodes, with crossing values bound
 * as inputs/outputs named "seg<i>:<node name>". */
rlx_status rlx_pass_schedule(const rlx_graph *g, const rlx_compile_opts *opts, int segment,
                             rlx_lir **out, rlx_error **err);
/* Arena offsets for every ARENA value: liveness over the instruction order,
 * views and in-place outputs share their source's storage, largest first.
 * Sets lir->arena_bytes (the peak). With allow_inplace, elementwise
 * instructions whose in[0] dies there write over it. With spaced, a
 * buffer's last reader and the first writer of the next class placed
 * there are never neighbours (rlx_backend_i.spaced_reuse). */
rlx_status rlx_memplan(rlx_lir *lir, bool allow_inplace, bool spaced, rlx_error **err);

/* The backend and device that segment `segment` is compiled for (the
 * per-segment targets of rlx_compile_opts, else opts->backend/device). */
void rlx_compile_target(const rlx_compile_opts *opts, int32_t segment, const rlx_backend_i **be,
                        rlx_device **dev);
/* Whether any segment has a backend to legalize against. */
bool rlx_compile_has_target(const rlx_compile_opts *opts);
/* Ask the backend (if any) of n's segment whether it runs node n as it stands. */
bool rlx_compile_supports(const rlx_compile_opts *opts, const rlx_graph *g, const rlx_gnode *n);
/* Ask the backend of `segment` whether it runs a FUSED_ELEMENTWISE / other
 * node that is not in the graph yet, described by op, params, inputs and
 * result. */
bool rlx_compile_supports_desc(const rlx_compile_opts *opts, const rlx_graph *g, int32_t segment,
                               rlx_op op, const rlx_op_params *p, int n_in, const rlx_node *in,
                               rlx_dtype dt, const rlx_shape *shape);

/* Row-major strides of a shape as dims; a stride that is not affine falls
 * back to the constant product at the upper bounds (and *exact is false). */
void rlx_contiguous_strides(const rlx_shape *s, const int64_t *sym_max, rlx_dim *stride,
                            bool *exact);
/* rlx_graph_compact with its failure reported through err. */
rlx_status rlx_compile_compact(rlx_graph *g, rlx_error **err);
/* Copy the graph's error into *err when it holds one (returns its status). */
rlx_status rlx_compile_graph_error(rlx_graph *g, rlx_error **err);

#endif
