/* fusion: fewer, larger kernels. Every fused form is checked with the
 * backend's supports_op before it replaces anything.
 *   matmul -> scale -> add(bias [N]) -> activation  => one matmul (alpha,
 *       bias, act epilogue)
 *   conv -> activation                               => one conv (act epilogue)
 *   rms_norm/layer_norm(x) * w [D] (+ b [D])        => the norm's weight/bias
 *   rms_norm(a + b, w), the sum used only there     => ADD_RMS_NORM(a, b, w)
 *   rms_norm(a + b, w), the sum read again (the residual stream of a pre-norm
 *       transformer)                                 => ADD_RMS_NORM(a, b, w) with
 *       keep_sum, [..., 2, D], its sum and norm halves as views
 *   scatter(state, cast(x)) into a float state       => scatter(state, x)
 *   trees of elementwise ops (same shape, single use) => FUSED_ELEMENTWISE,
 *       e.g. SwiGLU silu(g) * u, GeGLU, residual + scale chains
 */
#include "engine/compile/passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct fz {
    rlx_graph *g;
    const rlx_compile_opts *opts;
    int32_t *uses;
    int32_t *user; /* the consumer of a node with one use (kept up to date) */
    bool *is_output;
    bool changed;
} fz;

/* The single consumer of node i (node inputs only; an output use makes it
 * not fusable), or -1. */
static int32_t single_user(const fz *f, int32_t i)
{
    if (f->uses[i] != 1 || f->is_output[i])
        return -1;
    return f->user[i];
}

/* Is node v a rank-1 vector of length len? */
static bool is_vec(const rlx_graph *g, int32_t v, rlx_dim len)
{
    const rlx_gnode *n = &g->nodes[v];
    return n->shape.rank == 1 && rlx_dim_equal(n->shape.d[0], len) &&
           rlx_dtype_get(n->dtype)->is_float;
}

/* The other operand of binary node u, given one operand x. */
static int32_t other(const rlx_gnode *u, int32_t x)
{
    if (u->n_in != 2)
        return -1;
    if (u->in[0] == x && u->in[1] != x)
        return u->in[1];
    if (u->in[1] == x && u->in[0] != x)
        return u->in[0];
    return -1;
}

/* Replace node u by node m (m takes u's uses); u is dropped. */
static void absorb(fz *f, int32_t m, int32_t u)
{
    rlx_graph_replace_uses(f->g, u, m);
    f->uses[m] = f->uses[u];
    f->user[m] = f->user[u];
    f->is_output[m] = f->is_output[u];
    f->g->nodes[u].op = RLX_OP_NONE;
    f->changed = true;
}

static bool try_update(fz *f, int32_t i, const rlx_op_params *p, int n_in, const rlx_node *in)
{
    rlx_gnode *n = &f->g->nodes[i];
    if (!rlx_compile_supports_desc(f->opts, f->g, n->segment, n->op, p, n_in, in, n->dtype,
                                   &n->shape))
        return false;
    n->p = *p;
    n->n_in = n_in;
    for (int k = 0; k < n_in; k++) {
        n->in[k] = in[k];
        f->user[in[k]] = i;
    }
    return true;
}

static rlx_act act_of(const rlx_gnode *u)
{
    switch (u->op) {
    case RLX_OP_RELU:
        return RLX_ACT_RELU;
    case RLX_OP_GELU:
        return u->p.gelu.approx == RLX_GELU_TANH ? RLX_ACT_GELU_TANH : RLX_ACT_GELU_ERF;
    case RLX_OP_SILU:
        return RLX_ACT_SILU;
    case RLX_OP_SIGMOID:
        return RLX_ACT_SIGMOID;
    case RLX_OP_TANH:
        return RLX_ACT_TANH;
    default:
        return RLX_ACT_NONE;
    }
}

static void fuse_matmul(fz *f, int32_t m)
{
    rlx_graph *g = f->g;
    for (;;) {
        const rlx_gnode *n = &g->nodes[m];
        int32_t u = single_user(f, m);
        if (u < 0)
            return;
        const rlx_gnode *un = &g->nodes[u];
        if (!rlx_shape_equal(&un->shape, &n->shape) || un->segment != n->segment)
            return;
        rlx_op_params p = n->p;
        rlx_node in[3] = {n->in[0], n->in[1], n->n_in > 2 ? n->in[2] : 0};
        int n_in = n->n_in;
        rlx_dim cols = n->shape.d[n->shape.rank - 1];
        if (un->op == RLX_OP_SCALE && un->p.scale.add == 0.0f && !p.matmul.has_bias &&
            p.matmul.act == RLX_ACT_NONE) {
            float a = p.matmul.alpha == 0.0f ? 1.0f : p.matmul.alpha;
            p.matmul.alpha = a * un->p.scale.mul;
        } else if (un->op == RLX_OP_ADD && !p.matmul.has_bias && p.matmul.act == RLX_ACT_NONE &&
                   other(un, m) >= 0 && is_vec(g, other(un, m), cols)) {
            p.matmul.has_bias = true;
            in[2] = other(un, m);
            n_in = 3;
        } else if (act_of(un) != RLX_ACT_NONE && p.matmul.act == RLX_ACT_NONE) {
            p.matmul.act = act_of(un);
        } else {
            return;
        }
        if (!try_update(f, m, &p, n_in, in))
            return;
        absorb(f, m, u);
    }
}

/* conv -> activation => one conv with the activation as its epilogue
 * (U-Nets' conv + ReLU: the output is written once, already activated) */
static void fuse_conv(fz *f, int32_t i)
{
    const rlx_gnode *n = &f->g->nodes[i];
    int32_t u = single_user(f, i);
    if (u < 0 || n->p.conv.act != RLX_ACT_NONE)
        return;
    const rlx_gnode *un = &f->g->nodes[u];
    if (act_of(un) == RLX_ACT_NONE || !rlx_shape_equal(&un->shape, &n->shape) ||
        un->segment != n->segment || un->dtype != n->dtype)
        return;
    rlx_op_params p = n->p;
    p.conv.act = act_of(un);
    rlx_node in[RLX_MAX_INPUTS];
    for (int k = 0; k < n->n_in; k++)
        in[k] = n->in[k];
    if (try_update(f, i, &p, n->n_in, in))
        absorb(f, i, u);
}

static bool float_dt(rlx_dtype dt)
{
    return dt == RLX_DTYPE_F32 || dt == RLX_DTYPE_F16 || dt == RLX_DTYPE_BF16;
}

/* scatter(state, cast(x)) with the cast to the state's dtype used only
 * there => scatter(state, x): the store into a float state rounds as the
 * cast did (a KV cache's f32 keys and values into an f16 cache, once per
 * layer and token, without the halves written and read back between) */
static void fuse_cast_scatter(fz *f, int32_t i)
{
    const rlx_gnode *n = &f->g->nodes[i];
    int32_t c = n->in[1];
    const rlx_gnode *cn = &f->g->nodes[c];
    if (cn->op != RLX_OP_CAST || single_user(f, c) != i || cn->segment != n->segment ||
        cn->dtype != n->dtype || !float_dt(n->dtype) || !float_dt(f->g->nodes[cn->in[0]].dtype))
        return;
    rlx_node in[2] = {n->in[0], cn->in[0]};
    rlx_op_params p = n->p;
    if (!try_update(f, i, &p, 2, in))
        return;
    f->uses[c] = 0;
    f->g->nodes[c].op = RLX_OP_NONE;
    f->changed = true;
}

static void fuse_norm(fz *f, int32_t i)
{
    rlx_graph *g = f->g;
    for (;;) {
        const rlx_gnode *n = &g->nodes[i];
        int32_t u = single_user(f, i);
        if (u < 0)
            return;
        const rlx_gnode *un = &g->nodes[u];
        rlx_dim len = n->shape.d[n->shape.rank - 1];
        int32_t v = other(un, i);
        if (v < 0 || !is_vec(g, v, len) || !rlx_shape_equal(&un->shape, &n->shape))
            return;
        rlx_op_params p = n->p;
        rlx_node in[3] = {n->in[0], n->n_in > 1 ? n->in[1] : 0, 0};
        int n_in = n->n_in;
        if (un->op == RLX_OP_MUL && !p.norm.has_weight) {
            p.norm.has_weight = true;
            in[1] = v;
            n_in = 2;
        } else if (un->op == RLX_OP_ADD && n->op == RLX_OP_LAYER_NORM && p.norm.has_weight &&
                   !p.norm.has_bias) {
            p.norm.has_bias = true;
            in[2] = v;
            n_in = 3;
        } else {
            return;
        }
        if (!try_update(f, i, &p, n_in, in))
            return;
        absorb(f, i, u);
    }
}

static void fuse_add_rms(fz *f, int32_t i)
{
    rlx_graph *g = f->g;
    const rlx_gnode *n = &g->nodes[i];
    if (!n->p.norm.has_weight)
        return;
    int32_t a = n->in[0];
    const rlx_gnode *an = &g->nodes[a];
    if (an->op != RLX_OP_ADD || single_user(f, a) != i)
        return;
    const rlx_gnode *x = &g->nodes[an->in[0]], *y = &g->nodes[an->in[1]];
    if (!rlx_shape_equal(&x->shape, &n->shape) || !rlx_shape_equal(&y->shape, &n->shape) ||
        !rlx_dtype_get(x->dtype)->is_float || !rlx_dtype_get(y->dtype)->is_float)
        return;
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.norm.eps = n->p.norm.eps;
    p.norm.has_weight = true;
    rlx_node in[3] = {an->in[0], an->in[1], n->in[1]};
    rlx_gnode *nn = &g->nodes[i];
    if (!rlx_compile_supports_desc(f->opts, g, nn->segment, RLX_OP_ADD_RMS_NORM, &p, 3, in,
                                   nn->dtype, &nn->shape))
        return;
    nn->op = RLX_OP_ADD_RMS_NORM;
    nn->p = p;
    nn->n_in = 3;
    for (int k = 0; k < 3; k++) {
        nn->in[k] = in[k];
        f->user[in[k]] = i;
    }
    g->nodes[a].op = RLX_OP_NONE;
    f->changed = true;
}

/* rms_norm(a + b, w) whose sum has other readers too: one keep_sum node
 * writes both, and the sum's readers take its sum half (a view). Runs
 * before the elementwise trees claim the add, on the nodes there were when
 * the pass started (f's arrays are not extended to the new ones). */
static void fuse_add_rms_keep(fz *f, int32_t i)
{
    rlx_graph *g = f->g;
    const rlx_gnode *n = &g->nodes[i];
    if (!n->p.norm.has_weight || n->n_in != 2 || f->is_output[i])
        return;
    int32_t a = n->in[0];
    const rlx_gnode *an = &g->nodes[a];
    /* the same segment: across a device boundary the sum is the one value
     * that crosses, and moving the add over would send both its inputs */
    if (an->op != RLX_OP_ADD || f->uses[a] < 2 || f->is_output[a] || an->segment != n->segment)
        return;
    const rlx_gnode *x = &g->nodes[an->in[0]], *y = &g->nodes[an->in[1]];
    if (!rlx_shape_equal(&x->shape, &n->shape) || !rlx_shape_equal(&y->shape, &n->shape) ||
        !rlx_dtype_get(x->dtype)->is_float || !rlx_dtype_get(y->dtype)->is_float ||
        an->dtype != RLX_DTYPE_F32 || n->shape.rank + 1 > RLX_MAX_DIMS)
        return;
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.norm.eps = n->p.norm.eps;
    p.norm.has_weight = true;
    p.norm.keep_sum = true;
    rlx_node in[3] = {an->in[0], an->in[1], n->in[1]};
    rlx_shape both = n->shape;
    both.rank = n->shape.rank + 1;
    both.d[n->shape.rank - 1] = rlx_dim_const(2);
    both.d[n->shape.rank] = n->shape.d[n->shape.rank - 1];
    if (!rlx_compile_supports_desc(f->opts, g, n->segment, RLX_OP_ADD_RMS_NORM, &p, 3, in,
                                   RLX_DTYPE_F32, &both))
        return;
    int32_t seg = g->cur_segment;
    g->cur_segment = n->segment;
    char name[160];
    snprintf(name, sizeof name, "%s", n->name);
    rlx_node sum = RLX_NODE_INVALID;
    rlx_node norm = rlx_graph_add_rms_norm_sum(g, name, in[0], in[1], in[2], p.norm.eps, &sum);
    g->cur_segment = seg;
    if (norm == RLX_NODE_INVALID) /* the graph's status says why */
        return;
    rlx_graph_replace_uses(g, a, sum);
    rlx_graph_replace_uses(g, i, norm);
    g->nodes[a].op = RLX_OP_NONE;
    g->nodes[i].op = RLX_OP_NONE;
    f->changed = true;
}

/* ---- elementwise trees ---- */

static bool chainable(const rlx_gnode *n)
{
    if (!rlx_op_is_elementwise(n->op) || n->op == RLX_OP_CAST || n->op == RLX_OP_FUSED_ELEMENTWISE)
        return false;
    return n->dtype == RLX_DTYPE_F32 || n->op == RLX_OP_CMP;
}

typedef struct tree {
    int32_t leaves[RLX_MAX_INPUTS];
    int n_leaves;
    int32_t nodes[RLX_FUSED_MAX_STEPS]; /* ascending ids: a valid step order */
    int n_nodes;
} tree;

static bool has(const int32_t *a, int n, int32_t v)
{
    for (int i = 0; i < n; i++)
        if (a[i] == v)
            return true;
    return false;
}

/* Leaves of the member set; false when there are more than fit. */
static bool collect_leaves(const rlx_graph *g, tree *t)
{
    t->n_leaves = 0;
    for (int m = 0; m < t->n_nodes; m++) {
        const rlx_gnode *n = &g->nodes[t->nodes[m]];
        for (int k = 0; k < n->n_in; k++) {
            int32_t x = n->in[k];
            if (has(t->nodes, t->n_nodes, x) || has(t->leaves, t->n_leaves, x))
                continue;
            if (t->n_leaves == RLX_MAX_INPUTS)
                return false;
            t->leaves[t->n_leaves++] = x;
        }
    }
    return true;
}

static int reg_of(const tree *t, int32_t v)
{
    for (int k = 0; k < t->n_leaves; k++)
        if (t->leaves[k] == v)
            return k;
    for (int k = 0; k < t->n_nodes; k++)
        if (t->nodes[k] == v)
            return t->n_leaves + k;
    return -1;
}

/* Fuse the elementwise tree rooted at r: members are added breadth-first
 * from the root (single-use elementwise inputs of the same shape) up to the
 * step limit; while the leaves do not fit the input limit the last-added
 * member is given back (it becomes a leaf and later roots its own tree). */
static void fuse_tree(fz *f, int32_t r)
{
    rlx_graph *g = f->g;
    const rlx_gnode *root = &g->nodes[r];
    if (!chainable(root) || root->dtype != RLX_DTYPE_F32)
        return;
    int32_t mem[RLX_FUSED_MAX_STEPS];
    int nm = 1;
    mem[0] = r;
    for (int i = 0; i < nm; i++) {
        const rlx_gnode *n = &g->nodes[mem[i]];
        for (int k = 0; k < n->n_in && nm < RLX_FUSED_MAX_STEPS; k++) {
            int32_t x = n->in[k];
            const rlx_gnode *xn = &g->nodes[x];
            if (chainable(xn) && single_user(f, x) == mem[i] &&
                rlx_shape_equal(&xn->shape, &root->shape) && xn->segment == root->segment &&
                !has(mem, nm, x))
                mem[nm++] = x;
        }
    }
    tree t;
    memset(&t, 0, sizeof t);
    for (;;) {
        if (nm < 2)
            return;
        /* ascending ids */
        for (int a = 0; a < nm; a++)
            t.nodes[a] = mem[a];
        t.n_nodes = nm;
        for (int a = 1; a < nm; a++) {
            int32_t v = t.nodes[a];
            int b = a - 1;
            while (b >= 0 && t.nodes[b] > v) {
                t.nodes[b + 1] = t.nodes[b];
                b--;
            }
            t.nodes[b + 1] = v;
        }
        if (collect_leaves(g, &t))
            break;
        nm--;
    }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.fused.n_steps = (uint8_t)t.n_nodes;
    for (int s = 0; s < t.n_nodes; s++) {
        const rlx_gnode *n = &g->nodes[t.nodes[s]];
        rlx_fused_step *st = &p.fused.steps[s];
        st->op = (uint8_t)n->op;
        st->dst = (uint8_t)(t.n_leaves + s);
        st->a = (uint8_t)reg_of(&t, n->in[0]);
        st->b = (uint8_t)(n->n_in > 1 ? reg_of(&t, n->in[1]) : 0);
        st->c = (uint8_t)(n->n_in > 2 ? reg_of(&t, n->in[2]) : 0);
        if (n->op == RLX_OP_SCALE) {
            st->p0 = n->p.scale.mul;
            st->p1 = n->p.scale.add;
        } else if (n->op == RLX_OP_CLAMP) {
            st->p0 = n->p.clamp.lo;
            st->p1 = n->p.clamp.hi;
        } else if (n->op == RLX_OP_CMP) {
            st->aux = (uint8_t)n->p.cmp.kind;
        } else if (n->op == RLX_OP_GELU) {
            st->aux = (uint8_t)n->p.gelu.approx;
        }
    }
    if (!rlx_compile_supports_desc(f->opts, g, root->segment, RLX_OP_FUSED_ELEMENTWISE, &p,
                                   t.n_leaves, t.leaves, RLX_DTYPE_F32, &root->shape))
        return;
    rlx_gnode *rn = &g->nodes[r];
    rn->op = RLX_OP_FUSED_ELEMENTWISE;
    rn->p = p;
    rn->n_in = t.n_leaves;
    for (int k = 0; k < t.n_leaves; k++)
        rn->in[k] = t.leaves[k];
    for (int k = 0; k < t.n_nodes; k++)
        if (t.nodes[k] != r)
            g->nodes[t.nodes[k]].op = RLX_OP_NONE;
    for (int k = 0; k < t.n_leaves; k++)
        f->user[t.leaves[k]] = r;
    f->changed = true;
}

static void fz_free(fz *f)
{
    free(f->uses);
    free(f->user);
    free(f->is_output);
    f->uses = f->user = NULL;
    f->is_output = NULL;
}

/* (Re)count uses, single consumers and outputs over the graph as it is. */
static bool fz_index(fz *f)
{
    rlx_graph *g = f->g;
    fz_free(f);
    f->uses = rlx_graph_use_counts(g);
    f->user = malloc(sizeof *f->user * (size_t)(g->n_nodes + 1));
    f->is_output = calloc((size_t)g->n_nodes + 1, sizeof *f->is_output);
    if (!f->uses || !f->user || !f->is_output) {
        fz_free(f);
        return false;
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        f->user[i] = -1;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op != RLX_OP_NONE)
            for (int k = 0; k < g->nodes[i].n_in; k++)
                f->user[g->nodes[i].in[k]] = i;
    for (int32_t o = 0; o < g->n_outputs; o++)
        f->is_output[g->outputs[o].node] = true;
    return true;
}

rlx_status rlx_pass_fusion(rlx_graph *g, const rlx_compile_opts *opts, rlx_error **err)
{
    fz f = {.g = g, .opts = opts};
    if (!fz_index(&f))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "fusion: out of memory");
    for (int32_t i = 0; i < g->n_nodes; i++) {
        rlx_op op = g->nodes[i].op;
        if (op == RLX_OP_MATMUL)
            fuse_matmul(&f, i);
        else if (op == RLX_OP_CONV1D || op == RLX_OP_CONV2D || op == RLX_OP_CONV_TRANSPOSE2D)
            fuse_conv(&f, i);
        else if (op == RLX_OP_RMS_NORM || op == RLX_OP_LAYER_NORM)
            fuse_norm(&f, i);
        else if (op == RLX_OP_SCATTER)
            fuse_cast_scatter(&f, i);
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == RLX_OP_RMS_NORM)
            fuse_add_rms(&f, i);
    int32_t n0 = g->n_nodes;
    for (int32_t i = 0; i < n0; i++)
        if (g->nodes[i].op == RLX_OP_RMS_NORM)
            fuse_add_rms_keep(&f, i);
    if (g->status != RLX_OK) {
        fz_free(&f);
        return rlx_compile_graph_error(g, err);
    }
    if (g->n_nodes != n0 && !fz_index(&f))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "fusion: out of memory");
    /* roots last-first, so a tree is seen whole before its members */
    for (int32_t i = g->n_nodes - 1; i >= 0; i--)
        if (g->nodes[i].op != RLX_OP_NONE)
            fuse_tree(&f, i);
    fz_free(&f);
    return f.changed ? rlx_compile_compact(g, err) : RLX_OK;
}
