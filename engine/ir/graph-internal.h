/* The graph's representation, for the compiler passes (engine/compile) and
 * tests. Model code uses graph.h only.
 *
 * Invariant kept by the builder and restored by rlx_graph_compact: every
 * node's inputs have smaller ids, and node id order is a valid execution
 * order (it also respects the write-after-read order of SCATTER: a node that
 * reads a state, or an earlier scatter result, without depending on a later
 * scatter into it comes before that scatter). Passes may append nodes that
 * break the invariant and must call rlx_graph_compact afterwards.
 *
 * A removed node has op RLX_OP_NONE until compaction drops it.
 */
#ifndef RLX_ENGINE_IR_GRAPH_INTERNAL_H
#define RLX_ENGINE_IR_GRAPH_INTERNAL_H

#include <stddef.h>

#include "engine/ir/graph.h"

typedef struct rlx_gnode {
    rlx_op op;
    rlx_dtype dtype;
    rlx_shape shape;
    rlx_op_params p;
    int32_t n_in;
    rlx_node in[RLX_MAX_INPUTS];
    char *name; /* never NULL */
    int32_t segment;
    void *data; /* CONST: rlx_graph_const_bytes(node) bytes, owned */
} rlx_gnode;

typedef struct rlx_goutput {
    char *name;
    rlx_node node;
} rlx_goutput;

struct rlx_graph {
    rlx_gnode *nodes;
    int32_t n_nodes, cap_nodes;
    rlx_goutput *outputs;
    int32_t n_outputs, cap_outputs;
    int32_t n_symbols;
    char *sym_names[RLX_MAX_SYMBOLS];
    int64_t sym_max[RLX_MAX_SYMBOLS];
    int32_t cur_segment;
    rlx_status status;
    char *error;
};

/* Add a node after checking and deriving its dtype and shape (the builder's
 * core, also used by passes). dt/shape are the requested values for ops whose
 * result is given rather than derived (sources, CAST's dtype, RESHAPE, SLICE's
 * length along its axis, RESIZE's size); NULL shape / RLX_DTYPE_INVALID
 * otherwise. Returns RLX_NODE_INVALID and records the error in g on failure,
 * and does nothing once g holds an error. */
rlx_node rlx_graph_node_new(rlx_graph *g, const char *name, rlx_op op, const rlx_op_params *p,
                            int n_in, const rlx_node *in, rlx_dtype dt, const rlx_shape *shape);

/* Derive the dtype and shape of node `n` (which need not be in g yet, but
 * whose inputs are) from its op, params and inputs; uses n->dtype/n->shape as
 * the requested values described above. On failure writes a message without
 * the op/node prefix to msg. */
rlx_status rlx_graph_infer(const rlx_graph *g, const rlx_gnode *n, rlx_dtype *dt, rlx_shape *shape,
                           char *msg, size_t msg_size);

/* Record an error (the first one wins). Returns `code`. */
rlx_status rlx_graph_fail(rlx_graph *g, rlx_status code, const char *fmt, ...) RLX_PRINTF(3, 4);

/* Point every use of `from` (node inputs and outputs) at `to`. */
void rlx_graph_replace_uses(rlx_graph *g, rlx_node from, rlx_node to);
/* Drop RLX_OP_NONE nodes and renumber into a valid execution order (see the
 * invariant above). Fails only on a cycle or allocation failure. */
rlx_status rlx_graph_compact(rlx_graph *g);

/* Bytes of a CONST node's data. */
size_t rlx_graph_const_bytes(const rlx_gnode *n);
/* Element count at the symbols' upper bounds. */
int64_t rlx_graph_numel_upper(const rlx_graph *g, const rlx_shape *s);
/* Number of uses of each node (node inputs + outputs); caller frees. */
int32_t *rlx_graph_use_counts(const rlx_graph *g);
/* True when `op` is a pure elementwise op (what fusion may chain). */
bool rlx_op_is_elementwise(rlx_op op);
/* Broadcast two shapes numpy-style; false when they are incompatible. */
bool rlx_shape_broadcast(const rlx_shape *a, const rlx_shape *b, rlx_shape *out);
/* Format one dim with symbol names. */
void rlx_graph_format_dim(const rlx_graph *g, rlx_dim d, char *buf, size_t size);

#endif
