/* layout: remove data movement that cancels out.
 *   permute(permute(x))      -> one permute (or x when they cancel)
 *   reshape(reshape(x))      -> one reshape (or x when the shape is x's)
 *   identity permute/reshape -> x
 *   matmul(transpose(a), b)  -> matmul(a, b) with trans_a flipped (same for b)
 * Attention blocks are written with explicit transposes (k^T, head
 * splitting); folding them into matmul flags and cancelling pairs saves
 * copies on backends that materialize permutes. */
#include "engine/compile/passes.h"

#include <stdlib.h>

static bool identity_perm(const rlx_gnode *n)
{
    for (int d = 0; d < n->shape.rank; d++)
        if (n->p.permute.perm[d] != d)
            return false;
    return true;
}

/* A permute that swaps only the last two axes. */
static bool swaps_last_two(const rlx_gnode *n)
{
    int r = n->shape.rank;
    if (n->op != RLX_OP_PERMUTE || r < 2)
        return false;
    for (int d = 0; d < r - 2; d++)
        if (n->p.permute.perm[d] != d)
            return false;
    return n->p.permute.perm[r - 2] == r - 1 && n->p.permute.perm[r - 1] == r - 2;
}

rlx_status rlx_pass_layout(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    bool changed = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        rlx_gnode *n = &g->nodes[i];
        if (n->op == RLX_OP_PERMUTE) {
            const rlx_gnode *x = &g->nodes[n->in[0]];
            if (x->op == RLX_OP_PERMUTE) {
                /* n[i] = x[p2[i]] = x_in[p1[p2[i]]] */
                int32_t perm[RLX_MAX_DIMS];
                for (int d = 0; d < n->shape.rank; d++)
                    perm[d] = x->p.permute.perm[n->p.permute.perm[d]];
                for (int d = 0; d < n->shape.rank; d++)
                    n->p.permute.perm[d] = perm[d];
                n->in[0] = x->in[0];
                changed = true;
            }
            if (identity_perm(n)) {
                rlx_graph_replace_uses(g, i, n->in[0]);
                n->op = RLX_OP_NONE;
                changed = true;
            }
        } else if (n->op == RLX_OP_RESHAPE || n->op == RLX_OP_COPY) {
            const rlx_gnode *x = &g->nodes[n->in[0]];
            if (n->op == RLX_OP_RESHAPE && x->op == RLX_OP_RESHAPE) {
                n->in[0] = x->in[0];
                x = &g->nodes[n->in[0]];
                changed = true;
            }
            if (n->op == RLX_OP_RESHAPE && rlx_shape_equal(&x->shape, &n->shape) &&
                x->dtype == n->dtype) {
                rlx_graph_replace_uses(g, i, n->in[0]);
                n->op = RLX_OP_NONE;
                changed = true;
            }
        } else if (n->op == RLX_OP_MATMUL) {
            for (int k = 0; k < 2; k++) {
                const rlx_gnode *t = &g->nodes[n->in[k]];
                if (!swaps_last_two(t))
                    continue;
                rlx_op_params p = n->p;
                rlx_node in[RLX_MAX_INPUTS];
                for (int j = 0; j < n->n_in; j++)
                    in[j] = n->in[j];
                in[k] = t->in[0];
                if (k == 0)
                    p.matmul.trans_a = !p.matmul.trans_a;
                else
                    p.matmul.trans_b = !p.matmul.trans_b;
                if (!rlx_compile_supports_desc(opts, g, n->segment, RLX_OP_MATMUL, &p, n->n_in, in,
                                               n->dtype, &n->shape))
                    continue;
                n->p = p;
                n->in[k] = in[k];
                changed = true;
            }
        }
    }
    if (!changed)
        return RLX_OK;
    /* the inner halves of merged pairs may be dead now */
    rlx_status s = rlx_compile_compact(g, err);
    if (s != RLX_OK)
        return s;
    int32_t *uses = rlx_graph_use_counts(g);
    if (!uses)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "layout: out of memory");
    bool dead = false;
    for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
        rlx_gnode *n = &g->nodes[i];
        if (uses[i] == 0 && (n->op == RLX_OP_PERMUTE || n->op == RLX_OP_RESHAPE)) {
            for (int k = 0; k < n->n_in; k++)
                uses[n->in[k]]--;
            n->op = RLX_OP_NONE;
            dead = true;
        }
    }
    free(uses);
    return dead ? rlx_compile_compact(g, err) : RLX_OK;
}
