/* The ONNX importer's op builders for convolution, pooling, the
 * normalizations and Resize (see onnx-import-internal.h). */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph.h"
#include "models/onnx/onnx-import-internal.h"

/* ---- convolution and pooling ---- */

typedef struct {
    int nsp;                                /* spatial dims: 1 or 2 */
    int64_t k[2], s[2], d[2], pb[2], pe[2]; /* kernel, stride, dilation, pads begin/end */
} window;

/* kernel/strides/dilations/pads/auto_pad of a conv or pool node over
 * input spatial dims `in` */
static bool read_window(ctx *c, int nsp, const int64_t *in, const int64_t *kernel, window *w,
                        bool ceil_mode)
{
    const rlx_onnx_node *n = c->cur;
    w->nsp = nsp;
    int64_t tmp[8];
    for (int i = 0; i < nsp; i++) {
        w->k[i] = kernel[i];
        w->s[i] = 1;
        w->d[i] = 1;
        w->pb[i] = w->pe[i] = 0;
    }
    int k;
    if ((k = ox_attr_ints(n, "strides", tmp, 4)) >= 0) {
        if (k != nsp)
            goto bad;
        for (int i = 0; i < nsp; i++)
            w->s[i] = tmp[i];
    }
    if ((k = ox_attr_ints(n, "dilations", tmp, 4)) >= 0) {
        if (k != nsp)
            goto bad;
        for (int i = 0; i < nsp; i++)
            w->d[i] = tmp[i];
    }
    if ((k = ox_attr_ints(n, "pads", tmp, 8)) >= 0) {
        if (k != 2 * nsp)
            goto bad;
        for (int i = 0; i < nsp; i++) {
            w->pb[i] = tmp[i];
            w->pe[i] = tmp[nsp + i];
        }
    }
    for (int i = 0; i < nsp; i++)
        if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0 ||
            w->k[i] > 1 << 16 || w->s[i] > 1 << 16 || w->d[i] > 1 << 16 || w->pb[i] > 1 << 16 ||
            w->pe[i] > 1 << 16)
            goto bad;
    const char *ap = ox_attr_s(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        for (int i = 0; i < nsp; i++) {
            int64_t out = (in[i] + w->s[i] - 1) / w->s[i];
            int64_t span = w->d[i] * (w->k[i] - 1) + 1;
            int64_t total = (out - 1) * w->s[i] + span - in[i];
            if (total < 0)
                total = 0;
            int64_t small = total / 2, big = total - small;
            bool upper = ap[5] == 'U';
            w->pb[i] = upper ? small : big;
            w->pe[i] = upper ? big : small;
        }
    } else if (strcmp(ap, "VALID") == 0) {
        for (int i = 0; i < nsp; i++)
            w->pb[i] = w->pe[i] = 0;
    } else if (strcmp(ap, "NOTSET") != 0) {
        ox_unsupported(c, "auto_pad '%s'", ap);
        return false;
    }
    if (ceil_mode)
        for (int i = 0; i < nsp; i++) {
            /* extra end padding so that floor gives the ceil count, but no
             * window may start in the end padding alone */
            int64_t span = w->d[i] * (w->k[i] - 1) + 1;
            int64_t len = in[i] + w->pb[i] + w->pe[i] - span;
            if (len < 0)
                continue;
            int64_t out = (len + w->s[i] - 1) / w->s[i] + 1;
            if ((out - 1) * w->s[i] >= in[i] + w->pb[i])
                out--;
            int64_t ox_need = (out - 1) * w->s[i] + span - (in[i] + w->pb[i] + w->pe[i]);
            if (ox_need > 0)
                w->pe[i] += ox_need;
        }
    return true;
bad:
    ox_failf(c, RLX_ERR_FORMAT, "bad strides, dilations or pads");
    return false;
}

/* pad explicitly where the IR's symmetric padding cannot express it;
 * returns the symmetric pads left for the op */
static rlx_node pre_pad(ctx *c, rlx_node x, window *w, float value, int sym[2])
{
    int rank = ox_shape_of(c, x).rank;
    int64_t before[MAXD] = {0}, after[MAXD] = {0};
    bool ox_need = false;
    for (int i = 0; i < w->nsp; i++) {
        if (w->pb[i] == w->pe[i]) {
            sym[i] = (int)w->pb[i];
            continue;
        }
        int64_t m = w->pb[i] < w->pe[i] ? w->pb[i] : w->pe[i];
        sym[i] = (int)m;
        before[rank - w->nsp + i] = w->pb[i] - m;
        after[rank - w->nsp + i] = w->pe[i] - m;
        ox_need = true;
    }
    if (ox_need)
        x = rlx_graph_pad(c->g, NULL, x, before, after, value);
    return x;
}

/* A conv's weight as the PARAM in its stored dtype where that is F16 or
 * BF16: the conv kernels widen such weights as they read them, where a cast
 * node would write an F32 copy of every weight on every run (ISNet's 84 MiB
 * of float16 weights: 10% of its CPU time). The cast stays for any other use
 * of the weight. */
static rlx_node conv_weight(ctx *c, val *v)
{
    rlx_node n = ox_node_of(c, v);
    if (n == RLX_NODE_INVALID || v->kind != V_CONST || !v->init)
        return n;
    for (int32_t i = 0; i < c->n_weights; i++)
        if (c->weights[i].t == v->init && c->weights[i].node == n)
            return c->weights[i].raw;
    return n;
}

bool ox_e_conv(ctx *c)
{
    val *xv = ox_float_in(c, 0), *wv = ox_float_in(c, 1);
    if (!xv || !wv)
        return false;
    int nsp = xv->rank - 2;
    if (nsp < 1 || nsp > 2 || wv->rank != xv->rank) {
        ox_unsupported(c, "%d-D convolutions", nsp);
        return false;
    }
    int64_t kernel[2] = {wv->dims[2], nsp == 2 ? wv->dims[3] : 1}, ks[4];
    int k = ox_attr_ints(c->cur, "kernel_shape", ks, 4);
    if (k >= 0 && (k != nsp || ks[0] != kernel[0] || (nsp == 2 && ks[1] != kernel[1]))) {
        ox_failf(c, RLX_ERR_FORMAT, "kernel_shape disagrees with the weight");
        return false;
    }
    window w;
    if (!read_window(c, nsp, xv->dims + 2, kernel, &w, false))
        return false;
    int64_t group = ox_attr_i(c->cur, "group", 1);
    if (group < 1 || xv->dims[1] % group || wv->dims[0] % group ||
        wv->dims[1] * group != xv->dims[1]) {
        ox_failf(c, RLX_ERR_FORMAT, "channels do not match the groups");
        return false;
    }
    rlx_node x = ox_node_of(c, xv), wn = conv_weight(c, wv);
    val *bv = ox_in_val(c, 2);
    rlx_node b = bv ? ox_node_of(c, bv) : RLX_NODE_INVALID;
    int sym[2] = {0, 0};
    x = pre_pad(c, x, &w, 0.0f, sym);
    rlx_node y;
    if (nsp == 1)
        y = rlx_graph_conv1d(c->g, NULL, x, wn, b, (int)w.s[0], sym[0], (int)w.d[0], (int)group);
    else
        y = rlx_graph_conv2d(c->g, NULL, x, wn, b, (int[]){(int)w.s[0], (int)w.s[1]}, sym,
                             (int[]){(int)w.d[0], (int)w.d[1]}, (int)group);
    return ox_out1(c, xv->elem, y);
}

bool ox_e_conv_transpose(ctx *c)
{
    val *xv = ox_float_in(c, 0), *wv = ox_float_in(c, 1);
    if (!xv || !wv)
        return false;
    int nsp = xv->rank - 2;
    if (nsp < 1 || nsp > 2 || wv->rank != xv->rank) {
        ox_unsupported(c, "%d-D transposed convolutions", nsp);
        return false;
    }
    const rlx_onnx_node *n = c->cur;
    int64_t kernel[2] = {wv->dims[2], nsp == 2 ? wv->dims[3] : 1};
    int64_t in2[2] = {xv->dims[2], nsp == 2 ? xv->dims[3] : 1};
    window w;
    if (!read_window(c, nsp, in2, kernel, &w, false))
        return false;
    for (int i = 0; i < nsp; i++)
        if (w.d[i] != 1) {
            ox_unsupported(c, "dilations other than 1");
            return false;
        }
    int64_t group = ox_attr_i(n, "group", 1);
    if (group < 1 || xv->dims[1] != wv->dims[0] || xv->dims[1] % group) {
        ox_failf(c, RLX_ERR_FORMAT, "channels do not match the weight");
        return false;
    }
    int64_t op[2] = {0, 0}, tmp[4];
    int k = ox_attr_ints(n, "output_padding", tmp, 4);
    if (k >= 0) {
        if (k != nsp) {
            ox_failf(c, RLX_ERR_FORMAT, "bad output_padding");
            return false;
        }
        for (int i = 0; i < nsp; i++)
            op[i] = tmp[i];
    }
    /* full output (no pads), then crop: out = (in-1)*s + k + out_pad */
    int64_t full[2];
    for (int i = 0; i < nsp; i++)
        full[i] = (in2[i] - 1) * w.s[i] + w.k[i] + op[i];
    const char *ap = ox_attr_s(n, "auto_pad", "NOTSET");
    int64_t os[4];
    int ko = ox_attr_ints(n, "output_shape", os, 4);
    if (ko >= 0 || strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        for (int i = 0; i < nsp; i++) {
            int64_t want = ko >= 0 ? os[ko - nsp + i] : in2[i] * w.s[i];
            int64_t total = full[i] - want;
            if (ko >= 0 && ko != nsp && ko != nsp + 2) {
                ox_failf(c, RLX_ERR_FORMAT, "bad output_shape");
                return false;
            }
            if (total < 0) {
                ox_unsupported(c, "output shapes larger than the full result");
                return false;
            }
            bool lower = strcmp(ap, "SAME_LOWER") == 0;
            w.pb[i] = lower ? total - total / 2 : total / 2;
            w.pe[i] = total - w.pb[i];
        }
    }
    rlx_node x = ox_node_of(c, xv), wn = ox_node_of(c, wv);
    if (nsp == 1) {
        x = ox_reshape(c, x, 4, (int64_t[]){xv->dims[0], xv->dims[1], 1, xv->dims[2]});
        wn = ox_reshape(c, wn, 4, (int64_t[]){wv->dims[0], wv->dims[1], 1, wv->dims[2]});
    }
    val *bv = ox_in_val(c, 2);
    rlx_node b = bv ? ox_node_of(c, bv) : RLX_NODE_INVALID;
    int st2[2] = {nsp == 2 ? (int)w.s[0] : 1, nsp == 2 ? (int)w.s[1] : (int)w.s[0]};
    int opd[2] = {nsp == 2 ? (int)op[0] : 0, nsp == 2 ? (int)op[1] : (int)op[0]};
    /* the IR's out_pad must be smaller than the stride; larger ones are
     * added as zero padding at the end, where bias alone lands */
    int extra[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        if (opd[i] >= st2[i]) {
            extra[i] = opd[i];
            opd[i] = 0;
        }
    rlx_node y =
        rlx_graph_conv_transpose2d(c->g, NULL, x, wn, extra[0] || extra[1] ? RLX_NODE_INVALID : b,
                                   st2, (int[]){0, 0}, opd, (int)group);
    if (extra[0] || extra[1]) {
        int64_t before[MAXD] = {0}, after[MAXD] = {0};
        after[2] = extra[0];
        after[3] = extra[1];
        y = rlx_graph_pad(c->g, NULL, y, before, after, 0.0f);
        if (b != RLX_NODE_INVALID)
            y = rlx_graph_add(c->g, NULL, y,
                              ox_reshape(c, b, 3, (int64_t[]){wv->dims[1] * group, 1, 1}));
    }
    for (int i = 0; i < nsp; i++) {
        int ax = nsp == 2 ? 2 + i : 3;
        if (w.pb[i] || w.pe[i]) {
            int64_t len = full[i] - w.pb[i] - w.pe[i];
            if (len <= 0) {
                ox_failf(c, RLX_ERR_FORMAT, "pads leave nothing");
                return false;
            }
            y = rlx_graph_slice(c->g, NULL, y, ax, rlx_dim_const(w.pb[i]), rlx_dim_const(len));
        }
    }
    if (nsp == 1) {
        rlx_shape s = ox_shape_of(c, y);
        y = ox_reshape(c, y, 3, (int64_t[]){s.d[0].k, s.d[1].k, s.d[3].k});
    } else
        y = rlx_graph_copy(c->g, NULL, y);
    return ox_out1(c, xv->elem, y);
}

static bool emit_pool(ctx *c, rlx_pool_mode mode)
{
    val *xv = ox_float_in(c, 0);
    if (!xv)
        return false;
    const rlx_onnx_node *n = c->cur;
    if (!ox_extra_outputs_unused(c, 1))
        return false;
    int nsp = xv->rank - 2;
    if (nsp < 1 || nsp > 2) {
        ox_unsupported(c, "%d-D pooling", nsp);
        return false;
    }
    int64_t kernel[4];
    if (ox_attr_ints(n, "kernel_shape", kernel, 4) != nsp) {
        ox_failf(c, RLX_ERR_FORMAT, "kernel_shape must have %d entries", nsp);
        return false;
    }
    bool ceil_mode = ox_attr_i(n, "ceil_mode", 0) != 0;
    int64_t in2[2] = {xv->dims[2], nsp == 2 ? xv->dims[3] : 1};
    window w;
    if (!read_window(c, nsp, in2, kernel, &w, ceil_mode))
        return false;
    for (int i = 0; i < nsp; i++)
        if (w.d[i] != 1) {
            ox_unsupported(c, "dilations other than 1");
            return false;
        }
    bool count_pad = ox_attr_i(n, "count_include_pad", 0) != 0;
    rlx_node x = ox_node_of(c, xv);
    if (nsp == 1) {
        x = ox_reshape(c, x, 4, (int64_t[]){xv->dims[0], xv->dims[1], 1, xv->dims[2]});
        w = (window){.nsp = 2,
                     .k = {1, w.k[0]},
                     .s = {1, w.s[0]},
                     .d = {1, 1},
                     .pb = {0, w.pb[0]},
                     .pe = {0, w.pe[0]}};
    }
    bool padded = false;
    for (int i = 0; i < 2; i++)
        padded |= w.pb[i] || w.pe[i];
    /* all padding explicit (max: -inf-like; avg: zeros), so the IR's pool
     * sees none and its divisor is the kernel area */
    int64_t before[MAXD] = {0}, after[MAXD] = {0};
    for (int i = 0; i < 2; i++) {
        before[2 + i] = w.pb[i];
        after[2 + i] = w.pe[i];
    }
    if (padded)
        x = rlx_graph_pad(c->g, NULL, x, before, after, mode == RLX_POOL_MAX ? -FLT_MAX : 0.0f);
    int kk[2] = {(int)w.k[0], (int)w.k[1]}, ss[2] = {(int)w.s[0], (int)w.s[1]}, zero[2] = {0, 0};
    rlx_node y = rlx_graph_pool2d(c->g, NULL, x, mode, kk, ss, zero);
    if (y == RLX_NODE_INVALID)
        return ox_out1(c, xv->elem, y);
    rlx_shape ys = ox_shape_of(c, y);
    int64_t oh = ys.d[2].k, ow = ys.d[3].k;
    if (mode == RLX_POOL_AVG && padded) {
        /* divisor per output position: the window's cells inside the
         * input (and, with count_include_pad, inside the pads given, but
         * never the extra ceil_mode cells) */
        int64_t pe_given[2] = {0, 0}, tmp[8];
        int k = ox_attr_ints(n, "pads", tmp, 8);
        if (k == 2 * nsp)
            for (int i = 0; i < nsp; i++)
                pe_given[nsp == 1 ? 1 : i] = tmp[nsp + i];
        if (strncmp(ox_attr_s(n, "auto_pad", "NOTSET"), "SAME", 4) == 0 && count_pad) {
            ox_unsupported(c, "count_include_pad with auto_pad SAME");
            return false;
        }
        int64_t inl[2] = {nsp == 1 ? 1 : xv->dims[2], xv->dims[nsp == 1 ? 2 : 3]};
        double *f = ox_alloc_d(oh * ow);
        if (!f)
            return false;
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
                int64_t cnt[2];
                int64_t pos[2] = {i, j};
                for (int a = 0; a < 2; a++) {
                    int64_t s0 = pos[a] * w.s[a] - w.pb[a], e0 = s0 + w.k[a];
                    int64_t lo = count_pad ? -w.pb[a] : 0;
                    int64_t hi = count_pad ? inl[a] + pe_given[a] : inl[a];
                    int64_t s1 = s0 > lo ? s0 : lo, e1 = e0 < hi ? e0 : hi;
                    cnt[a] = e1 > s1 ? e1 - s1 : 1;
                }
                f[i * ow + j] = (double)(w.k[0] * w.k[1]) / (double)(cnt[0] * cnt[1]);
            }
        val *fv = ox_set_const(c, "", RLX_ONNX_FLOAT, 2, (int64_t[]){oh, ow}, f);
        if (!fv)
            return false;
        y = rlx_graph_mul(c->g, NULL, y, ox_node_of(c, fv));
    }
    if (nsp == 1)
        y = ox_reshape(c, y, 3, (int64_t[]){xv->dims[0], xv->dims[1], ow});
    return ox_out1(c, xv->elem, y);
}

bool ox_e_max_pool(ctx *c)
{
    if (ox_attr_i(c->cur, "storage_order", 0) != 0) {
        ox_unsupported(c, "storage_order 1");
        return false;
    }
    return emit_pool(c, RLX_POOL_MAX);
}

bool ox_e_avg_pool(ctx *c)
{
    return emit_pool(c, RLX_POOL_AVG);
}

/* ---- normalization ---- */

/* x moved so that `axis` is last (perm written), or x itself */
static rlx_node axis_last(ctx *c, rlx_node x, int rank, int axis, int *perm)
{
    for (int i = 0; i < rank; i++)
        perm[i] = i;
    if (axis == rank - 1)
        return x;
    perm[axis] = rank - 1;
    perm[rank - 1] = axis;
    return rlx_graph_permute(c->g, NULL, x, perm);
}

static bool emit_softmax(ctx *c, bool log)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    rlx_graph *g = c->g;
    int64_t def = c->opset >= 13 ? -1 : 1;
    bool ok = true;
    int rank = v->rank ? v->rank : 1;
    int axis = ox_norm_axis(ox_attr_i(c->cur, "axis", def), rank, &ok);
    if (!ok) {
        ox_failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    rlx_node x = ox_node_of(c, v);
    int perm[MAXD];
    rlx_node t;
    bool coerce = c->opset < 13;
    if (coerce) {
        int64_t d[2] = {1, 1};
        for (int i = 0; i < v->rank; i++)
            d[i < axis ? 0 : 1] *= v->dims[i];
        t = ox_reshape(c, x, 2, d);
    } else {
        if (v->rank == 0)
            x = ox_reshape(c, x, 1, (int64_t[]){1});
        t = axis_last(c, x, rank, axis, perm);
    }
    rlx_node y;
    if (log) {
        rlx_node mx = rlx_graph_reduce(g, NULL, RLX_OP_REDUCE_MAX, t, -1, true);
        rlx_node s = rlx_graph_sub(g, NULL, t, mx);
        rlx_node lse = rlx_graph_unary(
            g, NULL, RLX_OP_LOG,
            rlx_graph_reduce(g, NULL, RLX_OP_REDUCE_SUM, rlx_graph_exp(g, NULL, s), -1, true));
        y = rlx_graph_sub(g, NULL, s, lse);
    } else
        y = rlx_graph_softmax(g, NULL, t, RLX_NODE_INVALID, 0.0f);
    if (coerce)
        y = ox_reshape(c, y, v->rank, v->dims);
    else {
        if (axis != rank - 1)
            y = rlx_graph_permute(g, NULL, y, perm);
        if (v->rank == 0)
            y = ox_reshape(c, y, 0, NULL);
    }
    return ox_out1(c, v->elem, y);
}

bool ox_e_softmax(ctx *c)
{
    return emit_softmax(c, false);
}
bool ox_e_log_softmax(ctx *c)
{
    return emit_softmax(c, true);
}

/* a per-channel [C] tensor as [C, 1, ...] to broadcast against NC... */
static rlx_node per_channel(ctx *c, val *v, int rank)
{
    int64_t d[MAXD];
    d[0] = ox_vnumel(v);
    for (int i = 1; i < rank - 1; i++)
        d[i] = 1;
    return ox_reshape(c, ox_node_of(c, v), rank - 1, d);
}

bool ox_e_batch_norm(ctx *c)
{
    val *xv = ox_float_in(c, 0), *sv = ox_float_in(c, 1), *bv = ox_float_in(c, 2),
        *mv = ox_float_in(c, 3), *vv = ox_float_in(c, 4);
    if (!xv || !sv || !bv || !mv || !vv)
        return false;
    if (ox_attr_i(c->cur, "training_mode", 0)) {
        ox_unsupported(c, "training_mode");
        return false;
    }
    if (!ox_extra_outputs_unused(c, 1))
        return false;
    if (xv->rank < 2) {
        ox_failf(c, RLX_ERR_FORMAT, "the input needs a channel dim");
        return false;
    }
    float eps = ox_attr_f(c->cur, "epsilon", 1e-5f);
    rlx_graph *g = c->g;
    int r = xv->rank;
    rlx_node x = ox_node_of(c, xv);
    rlx_node inv = rlx_graph_div(
        g, NULL, per_channel(c, sv, r),
        rlx_graph_sqrt(g, NULL, rlx_graph_scale(g, NULL, per_channel(c, vv, r), 1.0f, eps)));
    rlx_node y = rlx_graph_mul(g, NULL, rlx_graph_sub(g, NULL, x, per_channel(c, mv, r)), inv);
    return ox_out1(c, xv->elem, rlx_graph_add(g, NULL, y, per_channel(c, bv, r)));
}

bool ox_e_instance_norm(ctx *c)
{
    val *xv = ox_float_in(c, 0), *sv = ox_float_in(c, 1), *bv = ox_float_in(c, 2);
    if (!xv || !sv || !bv)
        return false;
    if (xv->rank < 3) {
        ox_failf(c, RLX_ERR_FORMAT, "the input needs a spatial dim");
        return false;
    }
    float eps = ox_attr_f(c->cur, "epsilon", 1e-5f);
    rlx_node y = rlx_graph_group_norm(c->g, NULL, ox_node_of(c, xv), (int)xv->dims[1],
                                      ox_node_of(c, sv), ox_node_of(c, bv), eps);
    return ox_out1(c, xv->elem, y);
}

bool ox_e_layer_norm(ctx *c)
{
    val *xv = ox_float_in(c, 0);
    if (!xv)
        return false;
    if (!ox_extra_outputs_unused(c, 3))
        return false;
    val *sv = ox_in_val(c, 1), *bv = ox_in_val(c, 2);
    bool ok = true;
    int axis = ox_norm_axis(ox_attr_i(c->cur, "axis", -1), xv->rank, &ok);
    if (!ok || !sv) {
        ox_failf(c, RLX_ERR_FORMAT, "bad axis or no scale");
        return false;
    }
    float eps = ox_attr_f(c->cur, "epsilon", 1e-5f);
    rlx_graph *g = c->g;
    rlx_node x = ox_node_of(c, xv);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < xv->rank; i++) {
        if (i < axis)
            outer *= xv->dims[i];
        else
            inner *= xv->dims[i];
    }
    rlx_node t = axis == xv->rank - 1 ? x : ox_reshape(c, x, 2, (int64_t[]){outer, inner});
    bool direct = axis == xv->rank - 1 && sv->rank <= 1 && (!bv || bv->rank <= 1) &&
                  ox_vnumel(sv) == inner && (!bv || ox_vnumel(bv) == inner);
    rlx_node y;
    if (direct) {
        y = rlx_graph_layer_norm(g, NULL, t, ox_node_of(c, sv),
                                 bv ? ox_node_of(c, bv) : RLX_NODE_INVALID, eps);
    } else {
        y = rlx_graph_layer_norm(g, NULL, t, RLX_NODE_INVALID, RLX_NODE_INVALID, eps);
        y = ox_reshape(c, y, xv->rank, xv->dims);
        y = rlx_graph_mul(g, NULL, y, ox_node_of(c, sv));
        if (bv)
            y = rlx_graph_add(g, NULL, y, ox_node_of(c, bv));
    }
    /* the optional Mean and InvStdDev outputs: x's shape with the
     * normalized dims 1 */
    bool want_mean = c->cur->n_outputs > 1 && c->cur->outputs[1][0];
    bool want_inv = c->cur->n_outputs > 2 && c->cur->outputs[2][0];
    if (want_mean || want_inv) {
        int64_t sd[MAXD];
        for (int i = 0; i < xv->rank; i++)
            sd[i] = i < axis ? xv->dims[i] : 1;
        rlx_node t2 = ox_reshape(c, x, 2, (int64_t[]){outer, inner});
        rlx_node mean = rlx_graph_reduce(g, NULL, RLX_OP_REDUCE_MEAN, t2, 1, true);
        if (want_mean &&
            !ox_set_node(c, c->cur->outputs[1], xv->elem, ox_reshape(c, mean, xv->rank, sd)))
            return false;
        if (want_inv) {
            rlx_node d = rlx_graph_unary(g, NULL, RLX_OP_SQUARE, rlx_graph_sub(g, NULL, t2, mean));
            rlx_node var = rlx_graph_reduce(g, NULL, RLX_OP_REDUCE_MEAN, d, 1, true);
            rlx_node inv =
                rlx_graph_unary(g, NULL, RLX_OP_RSQRT, rlx_graph_scale(g, NULL, var, 1.0f, eps));
            if (!ox_set_node(c, c->cur->outputs[2], xv->elem, ox_reshape(c, inv, xv->rank, sd)))
                return false;
        }
    }
    return ox_out1(c, xv->elem, y);
}

/* ---- resize ---- */

/* what the ONNX mode reads for output index `o` along one axis: the two
 * source indices and the second's weight */
typedef struct {
    int64_t i0, i1;
    double w;
} tap;

/* ONNX's source coordinate of output index o along one axis. Its
 * formulas use the resized length in * scale, which is not an integer
 * when the scale was given rather than the size. */
static bool onnx_coord(const char *ctm, int64_t o, int64_t in, double scale, double *x)
{
    double len = (double)in * scale;
    if (strcmp(ctm, "half_pixel") == 0)
        *x = ((double)o + 0.5) / scale - 0.5;
    else if (strcmp(ctm, "pytorch_half_pixel") == 0)
        *x = len > 1 ? ((double)o + 0.5) / scale - 0.5 : 0.0;
    else if (strcmp(ctm, "align_corners") == 0)
        *x = len > 1 ? (double)o * (double)(in - 1) / (len - 1) : 0.0;
    else if (strcmp(ctm, "asymmetric") == 0)
        *x = (double)o / scale;
    else
        return false;
    return true;
}

static tap linear_tap(double x, int64_t in)
{
    if (x < 0)
        x = 0;
    int64_t i0 = (int64_t)floor(x);
    if (i0 >= in - 1)
        return (tap){in - 1, in - 1, 0.0};
    return (tap){i0, i0 + 1, x - (double)i0};
}

static int64_t nearest_idx(const char *nm, double x, int64_t in)
{
    double r;
    if (strcmp(nm, "floor") == 0)
        r = floor(x);
    else if (strcmp(nm, "ceil") == 0)
        r = ceil(x);
    else if (strcmp(nm, "round_prefer_ceil") == 0)
        r = floor(x + 0.5);
    else /* round_prefer_floor */
        r = ceil(x - 0.5);
    int64_t i = (int64_t)r;
    return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* Does the IR's resize (PyTorch semantics) read the same taps as the ONNX
 * attributes for this axis? */
static bool same_taps(const char *mode, const char *ctm, const char *nm, int64_t in, int64_t out,
                      double scale, bool align)
{
    for (int64_t o = 0; o < out; o++) {
        double x;
        if (!onnx_coord(ctm, o, in, scale, &x))
            return false;
        if (mode[0] == 'n') {
            int64_t a = nearest_idx(nm, x, in);
            /* PyTorch nearest: floor(o * in / out) */
            int64_t b = (int64_t)floor((double)o * (double)in / (double)out);
            if (b > in - 1)
                b = in - 1;
            if (a != b)
                return false;
        } else {
            tap a = linear_tap(x, in);
            double px = align ? (out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0)
                              : ((double)o + 0.5) * (double)in / (double)out - 0.5;
            tap b = linear_tap(px, in);
            /* compare what is read, weights included */
            double wa0 = 1 - a.w, wb0 = 1 - b.w;
            bool same = (a.i0 == b.i0 && a.i1 == b.i1 && fabs(a.w - b.w) < 1e-6) ||
                        (a.i0 == a.i1 && b.i0 == b.i1 && a.i0 == b.i0) ||
                        (fabs(a.w) < 1e-6 && fabs(b.w) < 1e-6 && a.i0 == b.i0) ||
                        (fabs(wa0) < 1e-6 && fabs(wb0) < 1e-6 && a.i1 == b.i1);
            if (!same)
                return false;
        }
    }
    return true;
}

bool ox_e_resize(ctx *c)
{
    const rlx_onnx_node *n = c->cur;
    bool upsample = strcmp(n->op_type, "Upsample") == 0;
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    const char *mode = ox_attr_s(n, "mode", "nearest");
    const char *ctm = upsample || c->opset < 11
                          ? "asymmetric"
                          : ox_attr_s(n, "coordinate_transformation_mode", "half_pixel");
    const char *nm =
        upsample || c->opset < 11 ? "floor" : ox_attr_s(n, "nearest_mode", "round_prefer_floor");
    if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0 &&
        strcmp(mode, "bilinear") != 0) {
        ox_unsupported(c, "mode '%s'", mode);
        return false;
    }
    bool linear = mode[0] != 'n';
    if (strcmp(ctm, "tf_crop_and_resize") == 0 || strcmp(ctm, "tf_half_pixel_for_nn") == 0) {
        ox_unsupported(c, "coordinate_transformation_mode '%s'", ctm);
        return false;
    }
    if (ox_attr_i(n, "antialias", 0) || ox_attr(n, "axes")) {
        ox_unsupported(c, "antialias or axes");
        return false;
    }
    double scales[MAXD];
    int64_t out[MAXD];
    int r = v->rank;
    int64_t tmp[MAXD + 1];
    bool have = false;
    if (upsample && c->opset < 9) {
        const rlx_onnx_attr *a = ox_attr(n, "scales");
        if (a && a->type == RLX_ONNX_ATTR_FLOATS && a->n_floats == r) {
            for (int i = 0; i < r; i++)
                scales[i] = a->floats[i];
            have = true;
        }
    } else {
        /* Upsample 9: (X, scales); Resize 10: (X, scales); 11+: (X, roi, scales, sizes) */
        int si = upsample || c->opset < 11 ? 1 : 2, zi = upsample || c->opset < 11 ? -1 : 3;
        val *sz = zi >= 0 ? ox_in_val(c, zi) : NULL;
        if (sz && ox_vnumel(sz) > 0) {
            int k = ox_const_ints(c, zi, tmp, MAXD + 1);
            if (k != r) {
                ox_unsupported(c, "sizes that are not known at import time");
                return false;
            }
            for (int i = 0; i < r; i++) {
                out[i] = tmp[i];
                scales[i] = (double)tmp[i] / (double)v->dims[i];
            }
            have = true;
        } else {
            val *sc = ox_in_val(c, si);
            double *d = sc && sc->kind == V_CONST ? ox_cdata(c, sc) : NULL;
            if (d && ox_vnumel(sc) == r) {
                for (int i = 0; i < r; i++)
                    scales[i] = d[i];
                have = true;
            }
        }
        if (have && !(sz && ox_vnumel(sz) > 0))
            for (int i = 0; i < r; i++)
                out[i] = (int64_t)floor((double)v->dims[i] * scales[i]);
    }
    if (!have) {
        ox_unsupported(c, "scales or sizes that are not known at import time");
        return false;
    }
    if (upsample && c->opset < 9)
        for (int i = 0; i < r; i++)
            out[i] = (int64_t)floor((double)v->dims[i] * scales[i]);
    if (r < 2) {
        ox_unsupported(c, "inputs of fewer than 2 dims");
        return false;
    }
    for (int i = 0; i < r - 2; i++)
        if (out[i] != v->dims[i]) {
            ox_unsupported(c, "resizing dims other than the last two");
            return false;
        }
    for (int i = r - 2; i < r; i++)
        if (out[i] < 1 || out[i] > (1 << 20)) {
            ox_failf(c, RLX_ERR_FORMAT, "output size %lld out of range", (long long)out[i]);
            return false;
        }
    /* pick the IR mode whose taps equal ONNX's on both axes */
    bool align = false;
    bool ok = true;
    for (int i = r - 2; i < r && ok; i++)
        ok = same_taps(mode, ctm, nm, v->dims[i], out[i], scales[i], false);
    if (!ok && linear) {
        ok = true;
        align = true;
        for (int i = r - 2; i < r && ok; i++)
            ok = same_taps(mode, ctm, nm, v->dims[i], out[i], scales[i], true);
    }
    if (!ok) {
        ox_unsupported(c, "mode '%s' with coordinate_transformation_mode '%s'%s%s at these sizes",
                       mode, ctm, linear ? "" : " and nearest_mode ", linear ? "" : nm);
        return false;
    }
    rlx_node y = rlx_graph_resize(c->g, NULL, ox_node_of(c, v), out[r - 2], out[r - 1],
                                  linear ? RLX_RESIZE_BILINEAR : RLX_RESIZE_NEAREST, align);
    return ox_out1(c, v->elem, y);
}
