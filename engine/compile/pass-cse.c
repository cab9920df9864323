/* cse: two nodes with the same op, params, dtype, shape and inputs compute
 * the same value; keep the first. Model builders repeat work freely (the
 * same mask or position table per layer, equal constants); this merges it.
 * Named sources are distinct by definition, and a SCATTER is an effect, so
 * neither is merged. */
#include "engine/compile/passes.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t node_hash(const rlx_gnode *n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    int32_t head[4] = {(int32_t)n->op, (int32_t)n->dtype, n->n_in, n->shape.rank};
    h = mix(h, head, sizeof head);
    h = mix(h, n->in, sizeof n->in[0] * (size_t)n->n_in);
    for (int d = 0; d < n->shape.rank; d++)
        h = mix(h, &n->shape.d[d].k, sizeof n->shape.d[d].k);
    h = mix(h, &n->p, sizeof n->p);
    if (n->op == RLX_OP_CONST && n->data)
        h = mix(h, n->data, rlx_graph_const_bytes(n));
    return h;
}

static bool same(const rlx_gnode *a, const rlx_gnode *b)
{
    if (a->op != b->op || a->dtype != b->dtype || a->n_in != b->n_in || a->segment != b->segment ||
        !rlx_shape_equal(&a->shape, &b->shape) || memcmp(&a->p, &b->p, sizeof a->p) != 0)
        return false;
    for (int k = 0; k < a->n_in; k++)
        if (a->in[k] != b->in[k])
            return false;
    if (a->op == RLX_OP_CONST)
        return memcmp(a->data, b->data, rlx_graph_const_bytes(a)) == 0;
    return true;
}

rlx_status rlx_pass_cse(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    (void)opts;
    int32_t n = g->n_nodes;
    size_t cap = 16;
    while (cap < (size_t)n * 2)
        cap *= 2;
    int32_t *table = malloc(sizeof *table * cap);
    int32_t *remap = malloc(sizeof *remap * (size_t)(n + 1));
    if (!table || !remap) {
        free(table);
        free(remap);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "cse: out of memory");
    }
    for (size_t i = 0; i < cap; i++)
        table[i] = -1;
    bool changed = false;
    for (int32_t i = 0; i < n; i++) {
        rlx_gnode *x = &g->nodes[i];
        remap[i] = i;
        for (int k = 0; k < x->n_in; k++)
            x->in[k] = remap[x->in[k]];
        if (x->op == RLX_OP_INPUT || x->op == RLX_OP_PARAM || x->op == RLX_OP_STATE ||
            x->op == RLX_OP_SCATTER || x->op == RLX_OP_NONE)
            continue;
        size_t slot = (size_t)node_hash(x) & (cap - 1);
        while (table[slot] >= 0 && !same(&g->nodes[table[slot]], x))
            slot = (slot + 1) & (cap - 1);
        if (table[slot] < 0) {
            table[slot] = i;
        } else {
            remap[i] = table[slot];
            x->op = RLX_OP_NONE;
            changed = true;
        }
    }
    for (int32_t o = 0; o < g->n_outputs; o++)
        g->outputs[o].node = remap[g->outputs[o].node];
    free(table);
    free(remap);
    return changed ? rlx_compile_compact(g, err) : RLX_OK;
}
