/* dce: keep what the outputs need, plus every state write (a SCATTER has an
 * effect beyond its result) and every declared INPUT (the program's inputs
 * stay the ones the model declared, in order, so a runner's input list does
 * not shift when one goes unused), drop the rest. */
#include "engine/compile/passes.h"

#include <stdlib.h>

rlx_status rlx_pass_dce(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    (void)opts;
    int32_t n = g->n_nodes;
    bool *live = calloc((size_t)n + 1, sizeof *live);
    if (!live)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "dce: out of memory");
    for (int32_t i = 0; i < g->n_outputs; i++)
        live[g->outputs[i].node] = true;
    for (int32_t i = 0; i < n; i++)
        if (g->nodes[i].op == RLX_OP_SCATTER || g->nodes[i].op == RLX_OP_INPUT)
            live[i] = true;
    /* inputs have smaller ids, so one backward sweep reaches everything */
    for (int32_t i = n - 1; i >= 0; i--)
        if (live[i])
            for (int k = 0; k < g->nodes[i].n_in; k++)
                live[g->nodes[i].in[k]] = true;
    for (int32_t i = 0; i < n; i++)
        if (!live[i])
            g->nodes[i].op = RLX_OP_NONE;
    free(live);
    return rlx_compile_compact(g, err);
}
