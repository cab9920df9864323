/* shapes: re-derive every node's dtype and shape from its inputs. Passes
 * rewrite the graph; this pass is what proves they kept it well-typed. */
#include "engine/compile/passes.h"

rlx_status rlx_pass_shapes(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    (void)opts;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        rlx_gnode *n = &g->nodes[i];
        char msg[768];
        rlx_dtype dt;
        rlx_shape sh;
        if (rlx_graph_infer(g, n, &dt, &sh, msg, sizeof msg) != RLX_OK)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "shapes: %s '%s': %s",
                                 rlx_op_name(n->op), n->name, msg);
        if (dt != n->dtype || !rlx_shape_equal(&sh, &n->shape)) {
            char a[160], b[160];
            rlx_graph_format_shape(g, &n->shape, a, sizeof a);
            rlx_graph_format_shape(g, &sh, b, sizeof b);
            return rlx_error_set(
                err, RLX_ERR_INTERNAL, "shapes: %s '%s' holds %s %s but its inputs give %s %s",
                rlx_op_name(n->op), n->name, rlx_dtype_name(n->dtype), a, rlx_dtype_name(dt), b);
        }
    }
    return RLX_OK;
}
