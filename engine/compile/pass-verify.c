/* verify: structural checks before anything else runs. The builder already
 * checks shapes; this pass catches graphs assembled or rewritten by hand
 * (tests, passes) and ties the graph to the compile options. */
#include "engine/compile/passes.h"

#include <string.h>

static rlx_status fail(rlx_error **err, const rlx_graph *g, int32_t i, const char *what)
{
    const rlx_gnode *n = &g->nodes[i];
    return rlx_error_set(err, RLX_ERR_INVALID_ARG, "verify: %s '%s' (node %d): %s",
                         rlx_op_name(n->op), n->name, i, what);
}

rlx_status rlx_pass_verify(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    (void)opts;
    if (g->status != RLX_OK)
        return rlx_compile_graph_error(g, err);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const rlx_gnode *n = &g->nodes[i];
        const rlx_op_info *info = rlx_op_get_info(n->op);
        if (n->op <= RLX_OP_NONE || n->op >= RLX_OP_COUNT)
            return fail(err, g, i, "unknown op");
        if (n->n_in < info->min_inputs || n->n_in > info->max_inputs)
            return fail(err, g, i, "wrong number of inputs");
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] < 0 || n->in[k] >= i)
                return fail(err, g, i, "an input is not an earlier node");
        if (n->op == RLX_OP_CONST && !n->data)
            return fail(err, g, i, "a constant without data");
        if (n->op == RLX_OP_INPUT || n->op == RLX_OP_PARAM || n->op == RLX_OP_STATE)
            for (int32_t j = 0; j < i; j++)
                if (g->nodes[j].op == n->op && strcmp(g->nodes[j].name, n->name) == 0)
                    return fail(err, g, i, "the name is bound twice");
        for (int k = 0; k < n->n_in; k++) {
            const rlx_gnode *x = &g->nodes[n->in[k]];
            if (!rlx_dtype_get(x->dtype)->quantized)
                continue;
            bool ok = (n->op == RLX_OP_MATMUL && k == 1) || (n->op == RLX_OP_GATHER && k == 0) ||
                      (n->op == RLX_OP_RESHAPE || n->op == RLX_OP_SLICE);
            /* a Q8_0 KV cache: appended to, viewed, read by attention */
            if (x->dtype == RLX_DTYPE_Q8_0)
                ok |= (k == 0 && (n->op == RLX_OP_SCATTER || n->op == RLX_OP_PERMUTE)) ||
                      (n->op == RLX_OP_ATTENTION && (k == 1 || k == 2));
            if (!ok)
                return fail(err, g, i, "reads a block-quantized tensor");
        }
    }
    if (g->n_outputs == 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "verify: the graph has no outputs");
    for (int32_t i = 0; i < g->n_outputs; i++) {
        if (g->outputs[i].node < 0 || g->outputs[i].node >= g->n_nodes)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "verify: output '%s' is not a node",
                                 g->outputs[i].name);
        for (int32_t j = 0; j < i; j++)
            if (strcmp(g->outputs[i].name, g->outputs[j].name) == 0)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG, "verify: output '%s' is bound twice",
                                     g->outputs[i].name);
    }
    return RLX_OK;
}
