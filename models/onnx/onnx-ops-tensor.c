/* The ONNX importer's op builders for shapes and data movement: Shape,
 * Reshape, Squeeze, Transpose, Concat, Slice, Gather, Expand, Split, Pad,
 * Tile, ... (see onnx-import-internal.h). Many fold on the host when their
 * inputs are constants (shape arithmetic). */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph.h"
#include "models/onnx/onnx-import-internal.h"

/* ---- shapes and data movement ---- */

bool ox_e_shape(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    int64_t start = ox_attr_i(c->cur, "start", 0), end = ox_attr_i(c->cur, "end", v->rank);
    if (start < 0)
        start += v->rank;
    if (end < 0)
        end += v->rank;
    if (start < 0)
        start = 0;
    if (end > v->rank)
        end = v->rank;
    int64_t n = end > start ? end - start : 0;
    double *d = ox_alloc_d(n);
    if (!d)
        return false;
    for (int64_t i = 0; i < n; i++)
        d[i] = (double)v->dims[start + i];
    return ox_set_const(c, c->cur->outputs[0], RLX_ONNX_INT64, 1, &n, d) != NULL;
}

bool ox_e_size(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    double *d = malloc(sizeof *d);
    if (!d)
        return false;
    d[0] = (double)ox_vnumel(v);
    return ox_set_const(c, c->cur->outputs[0], RLX_ONNX_INT64, 0, NULL, d) != NULL;
}

bool ox_set_const_from_tensor(ctx *c, const char *name, const rlx_onnx_tensor *t)
{
    if (t->rank > MAXD || (!t->data && t->numel) || t->dtype == RLX_DTYPE_INVALID) {
        ox_unsupported(c, "a constant of %d dims or type %s", t->rank,
                       rlx_onnx_elem_type_name(t->elem_type));
        return false;
    }
    val *v = ox_set_const(c, name, t->elem_type, t->rank, t->dims, NULL);
    if (!v)
        return false;
    v->init = t;
    return true;
}

bool ox_e_constant(ctx *c)
{
    const rlx_onnx_node *n = c->cur;
    const rlx_onnx_attr *a;
    if ((a = ox_attr(n, "value")) && a->type == RLX_ONNX_ATTR_TENSOR)
        return ox_set_const_from_tensor(c, n->outputs[0], a->t);
    double *d;
    if ((a = ox_attr(n, "value_float")) || (a = ox_attr(n, "value_int"))) {
        if (!(d = malloc(sizeof *d)))
            return false;
        bool f = a->type == RLX_ONNX_ATTR_FLOAT;
        d[0] = f ? a->f : (double)a->i;
        return ox_set_const(c, n->outputs[0], f ? RLX_ONNX_FLOAT : RLX_ONNX_INT64, 0, NULL, d) !=
               NULL;
    }
    if ((a = ox_attr(n, "value_floats")) || (a = ox_attr(n, "value_ints"))) {
        bool f = a->type == RLX_ONNX_ATTR_FLOATS;
        int64_t k = f ? a->n_floats : a->n_ints;
        if (!(d = ox_alloc_d(k)))
            return false;
        for (int64_t i = 0; i < k; i++)
            d[i] = f ? a->floats[i] : (double)a->ints[i];
        return ox_set_const(c, n->outputs[0], f ? RLX_ONNX_FLOAT : RLX_ONNX_INT64, 1, &k, d) !=
               NULL;
    }
    ox_unsupported(c, "a value that is not a tensor, float(s) or int(s)");
    return false;
}

static bool shape_input(ctx *c, int i, int64_t *dims, int *rank)
{
    int64_t tmp[MAXD + 1];
    int k = ox_const_ints(c, i, tmp, MAXD + 1);
    if (k < 0) {
        ox_unsupported(c, "a shape that is not known at import time");
        return false;
    }
    if (k > MAXD) {
        ox_unsupported(c, "shapes of more than %d dims", MAXD);
        return false;
    }
    memcpy(dims, tmp, (size_t)k * sizeof *dims);
    *rank = k;
    return true;
}

bool ox_e_constant_of_shape(ctx *c)
{
    int64_t dims[MAXD];
    int rank;
    if (!shape_input(c, 0, dims, &rank))
        return false;
    int64_t n = ox_numel_of(rank, dims);
    if (n < 0 || n > RLX_ONNX_FOLD_LIMIT) {
        ox_unsupported(c, "constants of more than %d elements", RLX_ONNX_FOLD_LIMIT);
        return false;
    }
    double value = 0;
    int32_t elem = RLX_ONNX_FLOAT;
    const rlx_onnx_attr *a = ox_attr(c->cur, "value");
    if (a && a->type == RLX_ONNX_ATTR_TENSOR) {
        val tmp = {.kind = V_CONST, .init = a->t, .rank = 0, .node = RLX_NODE_INVALID};
        tmp.rank = a->t->rank <= MAXD ? a->t->rank : 0;
        for (int i = 0; i < tmp.rank; i++)
            tmp.dims[i] = a->t->dims[i];
        double *d = a->t->numel == 1 ? ox_cdata(c, &tmp) : NULL;
        if (!d) {
            ox_unsupported(c, "a value that is not one number");
            return false;
        }
        value = d[0];
        free(tmp.c);
        elem = a->t->elem_type;
    }
    double *d = ox_alloc_d(n);
    if (!d)
        return false;
    for (int64_t i = 0; i < n; i++)
        d[i] = value;
    return ox_set_const(c, c->cur->outputs[0], elem, rank, dims, d) != NULL;
}

bool ox_e_range(ctx *c)
{
    val *vs[3];
    double s[3];
    for (int i = 0; i < 3; i++) {
        vs[i] = ox_need(c, i);
        double *d = vs[i] && vs[i]->kind == V_CONST ? ox_cdata(c, vs[i]) : NULL;
        if (!d) {
            ox_unsupported(c, "inputs that are not known at import time");
            return false;
        }
        s[i] = d[0];
    }
    if (s[2] == 0) {
        ox_failf(c, RLX_ERR_FORMAT, "the step is 0");
        return false;
    }
    double cnt = ceil((s[1] - s[0]) / s[2]);
    int64_t n = cnt > 0 ? (int64_t)cnt : 0;
    if (n > RLX_ONNX_FOLD_LIMIT) {
        ox_unsupported(c, "ranges of more than %d elements", RLX_ONNX_FOLD_LIMIT);
        return false;
    }
    double *d = ox_alloc_d(n);
    if (!d)
        return false;
    for (int64_t i = 0; i < n; i++)
        d[i] = ox_fit_elem(vs[0]->elem, s[0] + (double)i * s[2]);
    return ox_set_const(c, c->cur->outputs[0], vs[0]->elem, 1, &n, d) != NULL;
}

/* a value reshaped (constants stay constants) */
static bool out_reshaped(ctx *c, val *v, int rank, const int64_t *dims)
{
    if (rank > MAXD) {
        ox_unsupported(c, "results of more than %d dims", MAXD);
        return false;
    }
    if (ox_numel_of(rank, dims) != ox_vnumel(v)) {
        ox_failf(c, RLX_ERR_FORMAT, "cannot reshape %lld elements to that shape",
                 (long long)ox_vnumel(v));
        return false;
    }
    if (v->kind == V_CONST && (v->c || ox_cdata(c, v))) {
        int64_t n = ox_vnumel(v);
        double *d = ox_alloc_d(n);
        if (!d)
            return false;
        memcpy(d, v->c, (size_t)n * sizeof *d);
        return ox_set_const(c, c->cur->outputs[0], v->elem, rank, dims, d) != NULL;
    }
    if (v->kind == V_CONST && v->init) {
        /* a large initializer keeps its bytes: same data, another shape */
        val *o = ox_set_const(c, c->cur->outputs[0], v->elem, rank, dims, NULL);
        if (!o)
            return false;
        o->kind = V_NODE;
        o->node = ox_reshape(c, ox_node_of(c, v), rank, dims);
        return o->node != RLX_NODE_INVALID;
    }
    return ox_out1(c, v->elem, ox_reshape(c, ox_node_of(c, v), rank, dims));
}

bool ox_e_reshape(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    int64_t dims[MAXD];
    int rank;
    if (c->opset < 5) {
        int k = ox_attr_ints(c->cur, "shape", dims, MAXD);
        if (k < 0 || k > MAXD) {
            ox_unsupported(c, "this shape attribute");
            return false;
        }
        rank = k;
    } else if (!shape_input(c, 1, dims, &rank))
        return false;
    bool allowzero = ox_attr_i(c->cur, "allowzero", 0) != 0;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0 && !allowzero) {
            if (i >= v->rank) {
                ox_failf(c, RLX_ERR_FORMAT, "shape copies dim %d of a rank-%d input", i, v->rank);
                return false;
            }
            dims[i] = v->dims[i];
        }
        if (dims[i] == -1) {
            if (infer >= 0) {
                ox_failf(c, RLX_ERR_FORMAT, "the shape has two -1 dims");
                return false;
            }
            infer = i;
            continue;
        }
        if (dims[i] < 0) {
            ox_failf(c, RLX_ERR_FORMAT, "the shape has a negative dim");
            return false;
        }
        known *= dims[i];
    }
    if (infer >= 0)
        dims[infer] = known ? ox_vnumel(v) / known : 0;
    return out_reshaped(c, v, rank, dims);
}

static bool axes_of(ctx *c, int input, const char *attr_name, int64_t *axes, int *n)
{
    int k;
    if (c->cur->n_inputs > input && c->cur->inputs[input][0])
        k = ox_const_ints(c, input, axes, MAXD + 1);
    else
        k = ox_attr_ints(c->cur, attr_name, axes, MAXD + 1);
    if (k > MAXD)
        k = -2;
    if (k == -2 || (k < 0 && c->cur->n_inputs > input && c->cur->inputs[input][0])) {
        ox_unsupported(c, "axes that are not known at import time");
        return false;
    }
    *n = k;
    return true;
}

bool ox_e_squeeze(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    int64_t axes[MAXD + 1];
    int na;
    if (!axes_of(c, 1, "axes", axes, &na))
        return false;
    bool drop[MAXD] = {false};
    if (na < 0) {
        for (int i = 0; i < v->rank; i++)
            drop[i] = v->dims[i] == 1;
    } else
        for (int i = 0; i < na; i++) {
            bool ok = true;
            int a = ox_norm_axis(axes[i], v->rank, &ok);
            if (!ok || v->dims[a] != 1) {
                ox_failf(c, RLX_ERR_FORMAT, "cannot squeeze axis %lld", (long long)axes[i]);
                return false;
            }
            drop[a] = true;
        }
    int64_t dims[MAXD];
    int r = 0;
    for (int i = 0; i < v->rank; i++)
        if (!drop[i])
            dims[r++] = v->dims[i];
    return out_reshaped(c, v, r, dims);
}

bool ox_e_unsqueeze(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    int64_t axes[MAXD + 1];
    int na;
    if (!axes_of(c, 1, "axes", axes, &na))
        return false;
    if (na < 0) {
        ox_failf(c, RLX_ERR_FORMAT, "no axes given");
        return false;
    }
    int r = v->rank + na;
    if (r > MAXD) {
        ox_unsupported(c, "results of more than %d dims", MAXD);
        return false;
    }
    bool ins[MAXD] = {false};
    for (int i = 0; i < na; i++) {
        bool ok = true;
        int a = ox_norm_axis(axes[i], r, &ok);
        if (!ok || ins[a]) {
            ox_failf(c, RLX_ERR_FORMAT, "bad axis %lld", (long long)axes[i]);
            return false;
        }
        ins[a] = true;
    }
    int64_t dims[MAXD];
    for (int i = 0, k = 0; i < r; i++)
        dims[i] = ins[i] ? 1 : v->dims[k++];
    return out_reshaped(c, v, r, dims);
}

bool ox_e_flatten(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    int64_t axis = ox_attr_i(c->cur, "axis", 1);
    if (axis < 0)
        axis += v->rank;
    if (axis < 0 || axis > v->rank) {
        ox_failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    int64_t d[2] = {1, 1};
    for (int i = 0; i < v->rank; i++)
        d[i < axis ? 0 : 1] *= v->dims[i];
    return out_reshaped(c, v, 2, d);
}

bool ox_e_transpose(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    int64_t perm[MAXD + 1];
    int k = ox_attr_ints(c->cur, "perm", perm, MAXD + 1);
    if (k < 0) {
        k = v->rank;
        for (int i = 0; i < k; i++)
            perm[i] = k - 1 - i;
    }
    if (k != v->rank) {
        ox_failf(c, RLX_ERR_FORMAT, "perm has %d entries for a rank-%d input", k, v->rank);
        return false;
    }
    int p[MAXD];
    for (int i = 0; i < k; i++)
        p[i] = (int)perm[i];
    if (v->kind == V_CONST && ox_cdata(c, v)) {
        int64_t n = ox_vnumel(v), od[MAXD], ist[MAXD];
        for (int i = 0; i < k; i++)
            od[i] = v->dims[p[i]];
        int64_t s = 1;
        for (int i = k - 1; i >= 0; i--) {
            ist[i] = s;
            s *= v->dims[i];
        }
        double *d = ox_alloc_d(n);
        if (!d)
            return false;
        for (int64_t o = 0; o < n; o++) {
            int64_t rem = o, src = 0;
            for (int i = k - 1; i >= 0; i--) {
                src += (rem % od[i]) * ist[p[i]];
                rem /= od[i];
            }
            d[o] = v->c[src];
        }
        return ox_set_const(c, c->cur->outputs[0], v->elem, k, od, d) != NULL;
    }
    return ox_out1(c, v->elem, rlx_graph_permute(c->g, NULL, ox_node_of(c, v), p));
}

bool ox_e_concat(ctx *c)
{
    const rlx_onnx_node *n = c->cur;
    val *v0 = ox_need(c, 0);
    if (!v0)
        return false;
    bool ok = true;
    int axis = ox_norm_axis(ox_attr_i(n, "axis", 0), v0->rank, &ok);
    if (!ok) {
        ox_failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    bool all_const = true;
    int64_t total = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        val *v = ox_need(c, i);
        if (!v)
            return false;
        if (v->rank != v0->rank) {
            ox_failf(c, RLX_ERR_FORMAT, "inputs of different ranks");
            return false;
        }
        all_const &= v->kind == V_CONST && ox_cdata(c, v) != NULL;
        total += v->dims[axis];
    }
    int64_t od[MAXD];
    memcpy(od, v0->dims, sizeof od);
    od[axis] = total;
    if (all_const) {
        int64_t n_out = ox_numel_of(v0->rank, od), outer = 1, inner = 1;
        for (int i = 0; i < axis; i++)
            outer *= od[i];
        for (int i = axis + 1; i < v0->rank; i++)
            inner *= od[i];
        double *d = ox_alloc_d(n_out);
        if (!d)
            return false;
        int64_t pos = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int i = 0; i < n->n_inputs; i++) {
                val *v = ox_in_val(c, i);
                int64_t blk = v->dims[axis] * inner;
                memcpy(d + pos, v->c + o * blk, (size_t)blk * sizeof *d);
                pos += blk;
            }
        return ox_set_const(c, n->outputs[0], v0->elem, v0->rank, od, d) != NULL;
    }
    rlx_node xs[64];
    int k = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        val *v = ox_in_val(c, i);
        if (v->dims[axis] == 0)
            continue;
        if (k == 64) {
            ox_unsupported(c, "more than 64 inputs");
            return false;
        }
        xs[k++] = ox_node_of(c, v);
    }
    if (k == 1)
        return ox_out1(c, v0->elem, rlx_graph_copy(c->g, NULL, xs[0]));
    return ox_out1(c, v0->elem, rlx_graph_concat(c->g, NULL, k, xs, axis));
}

/* ONNX Slice semantics for one axis: clamp start/end, count */
static bool slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *s0,
                        int64_t *len)
{
    if (step <= 0)
        return false;
    if (start < 0)
        start += dim;
    if (end < 0)
        end += dim;
    start = start < 0 ? 0 : start > dim ? dim : start;
    end = end < 0 ? 0 : end > dim ? dim : end;
    *s0 = start;
    *len = end > start ? (end - start + step - 1) / step : 0;
    return true;
}

bool ox_e_slice(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    int64_t starts[MAXD + 1], ends[MAXD + 1], axes[MAXD + 1], steps[MAXD + 1];
    int ns, ne, na, nst;
    if (c->opset < 10) {
        ns = ox_attr_ints(c->cur, "starts", starts, MAXD + 1);
        ne = ox_attr_ints(c->cur, "ends", ends, MAXD + 1);
        na = ox_attr_ints(c->cur, "axes", axes, MAXD + 1);
        nst = -1;
    } else {
        ns = ox_const_ints(c, 1, starts, MAXD + 1);
        ne = ox_const_ints(c, 2, ends, MAXD + 1);
        na = ox_in_val(c, 3) ? ox_const_ints(c, 3, axes, MAXD + 1) : -1;
        nst = ox_in_val(c, 4) ? ox_const_ints(c, 4, steps, MAXD + 1) : -1;
        if ((ox_in_val(c, 3) && na < 0) || (ox_in_val(c, 4) && nst < 0)) {
            ox_unsupported(c, "axes or steps that are not known at import time");
            return false;
        }
    }
    if (ns < 0 || ne < 0 || ns != ne || ns > MAXD) {
        ox_unsupported(c, "starts/ends that are not known at import time");
        return false;
    }
    if (na < 0) {
        na = ns;
        for (int i = 0; i < ns; i++)
            axes[i] = i;
    }
    if (nst < 0) {
        nst = ns;
        for (int i = 0; i < ns; i++)
            steps[i] = 1;
    }
    if (na != ns || nst != ns) {
        ox_failf(c, RLX_ERR_FORMAT, "starts, ends, axes and steps differ in length");
        return false;
    }
    int64_t s0[MAXD], len[MAXD], st[MAXD];
    for (int i = 0; i < v->rank; i++) {
        s0[i] = 0;
        len[i] = v->dims[i];
        st[i] = 1;
    }
    for (int i = 0; i < ns; i++) {
        bool ok = true;
        int a = ox_norm_axis(axes[i], v->rank, &ok);
        if (!ok) {
            ox_failf(c, RLX_ERR_FORMAT, "axis %lld out of range", (long long)axes[i]);
            return false;
        }
        if (steps[i] <= 0) {
            ox_unsupported(c, "negative or zero steps");
            return false;
        }
        if (!slice_range(v->dims[a], starts[i], ends[i], steps[i], &s0[a], &len[a]))
            return false;
        st[a] = steps[i];
    }
    if (ox_numel_of(v->rank, len) == 0) {
        ox_unsupported(c, "empty results");
        return false;
    }
    if (v->kind == V_CONST && ox_cdata(c, v)) {
        int64_t n = ox_numel_of(v->rank, len), ist[MAXD], s = 1;
        for (int i = v->rank - 1; i >= 0; i--) {
            ist[i] = s;
            s *= v->dims[i];
        }
        double *d = ox_alloc_d(n);
        if (!d)
            return false;
        for (int64_t o = 0; o < n; o++) {
            int64_t rem = o, src = 0;
            for (int i = v->rank - 1; i >= 0; i--) {
                src += (s0[i] + (rem % len[i]) * st[i]) * ist[i];
                rem /= len[i];
            }
            d[o] = v->c[src];
        }
        return ox_set_const(c, c->cur->outputs[0], v->elem, v->rank, len, d) != NULL;
    }
    rlx_node x = ox_node_of(c, v);
    for (int i = 0; i < v->rank && x != RLX_NODE_INVALID; i++)
        if (s0[i] != 0 || len[i] != v->dims[i])
            x = ox_slice_step(c, x, i, s0[i], len[i], st[i]);
    return ox_out1(c, v->elem, rlx_graph_copy(c->g, NULL, x));
}

bool ox_e_gather(ctx *c)
{
    val *v = ox_need(c, 0), *iv = ox_need(c, 1);
    if (!v || !iv)
        return false;
    bool ok = true;
    int axis = ox_norm_axis(ox_attr_i(c->cur, "axis", 0), v->rank, &ok);
    if (!ok) {
        ox_failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    int orank = v->rank - 1 + iv->rank;
    if (orank > MAXD) {
        ox_unsupported(c, "results of more than %d dims", MAXD);
        return false;
    }
    int64_t od[MAXD], dimv = v->dims[axis];
    for (int i = 0, k = 0; i < v->rank; i++) {
        if (i == axis)
            for (int j = 0; j < iv->rank; j++)
                od[k++] = iv->dims[j];
        else
            od[k++] = v->dims[i];
    }
    int64_t ni = ox_vnumel(iv);
    double *idx = iv->kind == V_CONST ? ox_cdata(c, iv) : NULL;
    if (idx)
        for (int64_t i = 0; i < ni; i++) {
            int64_t x = ox_to_i64(idx[i]);
            if (x < -dimv || x >= dimv) {
                ox_failf(c, RLX_ERR_FORMAT, "index %lld is out of range for a dim of %lld",
                         (long long)x, (long long)dimv);
                return false;
            }
        }
    if (idx && v->kind == V_CONST && ox_cdata(c, v)) {
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < axis; i++)
            outer *= v->dims[i];
        for (int i = axis + 1; i < v->rank; i++)
            inner *= v->dims[i];
        int64_t n = outer * ni * inner;
        double *d = ox_alloc_d(n);
        if (!d)
            return false;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < ni; j++) {
                int64_t x = ox_to_i64(idx[j]);
                if (x < 0)
                    x += dimv;
                memcpy(d + (o * ni + j) * inner, v->c + (o * dimv + x) * inner,
                       (size_t)inner * sizeof *d);
            }
        return ox_set_const(c, c->cur->outputs[0], v->elem, orank, od, d) != NULL;
    }
    rlx_node x = ox_node_of(c, v);
    if (idx && ni <= 16) {
        /* a few constant indices: slices and a concat */
        rlx_node parts[16];
        for (int64_t j = 0; j < ni; j++) {
            int64_t k = ox_to_i64(idx[j]);
            if (k < 0)
                k += dimv;
            parts[j] = rlx_graph_slice(c->g, NULL, x, axis, rlx_dim_const(k), rlx_dim_const(1));
        }
        rlx_node y = ni == 1 ? parts[0] : rlx_graph_concat(c->g, NULL, (int)ni, parts, axis);
        if (ni == 0) {
            ox_unsupported(c, "empty indices");
            return false;
        }
        return ox_out1(c, v->elem, ox_reshape(c, y, orank, od));
    }
    if (!ox_is_float_elem(v->elem)) {
        ox_unsupported(c, "gathering %s data by computed indices",
                       rlx_onnx_elem_type_name(v->elem));
        return false;
    }
    /* the axis to the front, [V, rest], the IR's row gather, then back */
    int perm[MAXD], k = 0;
    perm[k++] = axis;
    for (int i = 0; i < v->rank; i++)
        if (i != axis)
            perm[k++] = i;
    rlx_node t = x;
    if (axis != 0)
        t = rlx_graph_permute(c->g, NULL, x, perm);
    int64_t rest = ox_vnumel(v) / (dimv ? dimv : 1);
    t = ox_reshape(c, t, 2, (int64_t[]){dimv, rest});
    rlx_node ids = ox_node_of(c, iv);
    if (!idx) {
        /* negative indices count from the end */
        rlx_node zero = ox_scalar_like(c, ids, 0);
        rlx_node neg = rlx_graph_cmp(c->g, NULL, RLX_CMP_LT, ids, zero);
        ids = rlx_graph_where(c->g, NULL, neg,
                              rlx_graph_add(c->g, NULL, ids, ox_scalar_like(c, ids, (double)dimv)),
                              ids);
    }
    rlx_node y = rlx_graph_gather(c->g, NULL, t, ids); /* [idx..., rest] */
    int64_t gd[MAXD];
    int gr = 0;
    for (int j = 0; j < iv->rank; j++)
        gd[gr++] = iv->dims[j];
    for (int i = 0; i < v->rank; i++)
        if (i != axis)
            gd[gr++] = v->dims[i];
    if (gr > MAXD) {
        ox_unsupported(c, "results of more than %d dims", MAXD);
        return false;
    }
    y = ox_reshape(c, y, gr, gd);
    if (axis != 0) {
        /* gd = [idx..., before..., after...] -> [before..., idx..., after...] */
        int p[MAXD], q = 0;
        for (int i = 0; i < axis; i++)
            p[q++] = iv->rank + i;
        for (int j = 0; j < iv->rank; j++)
            p[q++] = j;
        for (int i = axis + 1; i < v->rank; i++)
            p[q++] = iv->rank + i - 1;
        y = rlx_graph_permute(c->g, NULL, y, p);
    }
    return ox_out1(c, v->elem, y);
}

bool ox_e_expand(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    int64_t sd[MAXD], od[MAXD];
    int sr, orank;
    if (!shape_input(c, 1, sd, &sr))
        return false;
    if (!ox_broadcast_dims(v->rank, v->dims, sr, sd, &orank, od)) {
        ox_failf(c, RLX_ERR_FORMAT, "the shape does not broadcast with the input");
        return false;
    }
    /* add zeros whose dims are 1 except where the input is broadcast */
    int64_t zd[MAXD];
    for (int i = 0; i < orank; i++) {
        int k = i - (orank - v->rank);
        int64_t in = k >= 0 ? v->dims[k] : 1;
        zd[i] = in == od[i] ? 1 : od[i];
    }
    int64_t zn = ox_numel_of(orank, zd);
    if (zn > RLX_ONNX_FOLD_LIMIT) {
        ox_unsupported(c, "expansions by more than %d elements", RLX_ONNX_FOLD_LIMIT);
        return false;
    }
    double *z = calloc((size_t)(zn ? zn : 1), sizeof *z);
    if (!z)
        return false;
    val *zv = ox_set_const(c, "", v->elem, orank, zd, z);
    if (!zv)
        return false;
    if (v->kind == V_CONST && ox_cdata(c, v)) {
        int64_t n = ox_numel_of(orank, od);
        if (n > RLX_ONNX_FOLD_LIMIT) {
            ox_unsupported(c, "expansions by more than %d elements", RLX_ONNX_FOLD_LIMIT);
            return false;
        }
        double *d = ox_alloc_d(n);
        if (!d)
            return false;
        for (int64_t i = 0; i < n; i++)
            d[i] = v->c[ox_bidx(i, orank, od, v->rank, v->dims)];
        return ox_set_const(c, c->cur->outputs[0], v->elem, orank, od, d) != NULL;
    }
    rlx_node x = ox_node_of(c, v);
    rlx_node zn_node = ox_node_of(c, zv);
    rlx_node y = v->elem == RLX_ONNX_BOOL ? rlx_graph_binary(c->g, NULL, RLX_OP_MAX, x, zn_node)
                                          : rlx_graph_add(c->g, NULL, x, zn_node);
    return ox_out1(c, v->elem, y);
}

bool ox_e_split(ctx *c)
{
    const rlx_onnx_node *n = c->cur;
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    bool ok = true;
    int axis = ox_norm_axis(ox_attr_i(n, "axis", 0), v->rank, &ok);
    if (!ok) {
        ox_failf(c, RLX_ERR_FORMAT, "axis out of range");
        return false;
    }
    int64_t sizes[64];
    int k;
    if (c->opset >= 13 && ox_in_val(c, 1))
        k = ox_const_ints(c, 1, sizes, 64);
    else
        k = ox_attr_ints(n, "split", sizes, 64);
    int nout = n->n_outputs;
    if (nout > 64) {
        ox_unsupported(c, "more than 64 outputs");
        return false;
    }
    if (k < 0) {
        if (ox_in_val(c, 1)) {
            ox_unsupported(c, "split sizes that are not known at import time");
            return false;
        }
        int64_t dim = v->dims[axis], each = (dim + nout - 1) / nout;
        for (int i = 0; i < nout; i++) {
            int64_t left = dim - each * i;
            sizes[i] = left < each ? (left > 0 ? left : 0) : each;
        }
        k = nout;
    }
    if (k != nout) {
        ox_failf(c, RLX_ERR_FORMAT, "%d split sizes for %d outputs", k, nout);
        return false;
    }
    int64_t off = 0;
    rlx_node x = ox_node_of(c, v);
    for (int i = 0; i < nout; i++) {
        if (sizes[i] <= 0 || off + sizes[i] > v->dims[axis]) {
            ox_unsupported(c, "empty or out-of-range parts");
            return false;
        }
        rlx_node y =
            rlx_graph_slice(c->g, NULL, x, axis, rlx_dim_const(off), rlx_dim_const(sizes[i]));
        if (!ox_set_node(c, n->outputs[i], v->elem, rlx_graph_copy(c->g, NULL, y)))
            return false;
        off += sizes[i];
    }
    return true;
}

bool ox_e_pad(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    const char *mode = ox_attr_s(c->cur, "mode", "constant");
    if (strcmp(mode, "constant") != 0) {
        ox_unsupported(c, "mode '%s'", mode);
        return false;
    }
    int64_t pads[2 * MAXD + 1];
    int k;
    double value = 0;
    if (c->opset < 11) {
        k = ox_attr_ints(c->cur, "pads", pads, 2 * MAXD + 1);
        value = ox_attr_f(c->cur, "value", 0.0f);
    } else {
        k = ox_const_ints(c, 1, pads, 2 * MAXD + 1);
        val *cv = ox_in_val(c, 2);
        if (cv) {
            double *d = cv->kind == V_CONST ? ox_cdata(c, cv) : NULL;
            if (!d) {
                ox_unsupported(c, "a pad value that is not known at import time");
                return false;
            }
            value = d[0];
        }
        if (ox_in_val(c, 3)) {
            ox_unsupported(c, "the axes input");
            return false;
        }
    }
    if (k != 2 * v->rank) {
        ox_unsupported(c, "pads that are not known at import time");
        return false;
    }
    int64_t before[MAXD] = {0}, after[MAXD] = {0};
    bool any = false;
    rlx_node x = ox_node_of(c, v);
    for (int i = 0; i < v->rank; i++) {
        int64_t b = pads[i], a = pads[v->rank + i];
        /* negative pads crop */
        if (b < 0 || a < 0) {
            int64_t s = b < 0 ? -b : 0, e = v->dims[i] - (a < 0 ? -a : 0);
            if (e <= s) {
                ox_unsupported(c, "pads that crop everything");
                return false;
            }
            x = rlx_graph_slice(c->g, NULL, x, i, rlx_dim_const(s), rlx_dim_const(e - s));
        }
        before[i] = b > 0 ? b : 0;
        after[i] = a > 0 ? a : 0;
        any |= before[i] || after[i];
    }
    if (!ox_is_float_elem(v->elem) && any) {
        ox_unsupported(c, "%s inputs", rlx_onnx_elem_type_name(v->elem));
        return false;
    }
    rlx_node y = any ? rlx_graph_pad(c->g, NULL, x, before, after, (float)value)
                     : rlx_graph_copy(c->g, NULL, x);
    return ox_out1(c, v->elem, y);
}

static bool e_depth_space(ctx *c, bool to_space)
{
    val *v = ox_float_in(c, 0);
    if (!v)
        return false;
    if (v->rank != 4) {
        ox_unsupported(c, "inputs that are not 4-D");
        return false;
    }
    int64_t b = ox_attr_i(c->cur, "blocksize", 0);
    if (b <= 0) {
        ox_failf(c, RLX_ERR_FORMAT, "blocksize must be positive");
        return false;
    }
    int64_t N = v->dims[0], C = v->dims[1], H = v->dims[2], W = v->dims[3];
    rlx_node x = ox_node_of(c, v);
    if (to_space) {
        if (C % (b * b)) {
            ox_failf(c, RLX_ERR_FORMAT, "channels are not a multiple of blocksize^2");
            return false;
        }
        bool crd = strcmp(ox_attr_s(c->cur, "mode", "DCR"), "CRD") == 0;
        int64_t d6[6];
        int perm[6];
        if (crd) {
            memcpy(d6, (int64_t[]){N, C / (b * b), b, b, H, W}, sizeof d6);
            memcpy(perm, (int[]){0, 1, 4, 2, 5, 3}, sizeof perm);
        } else {
            memcpy(d6, (int64_t[]){N, b, b, C / (b * b), H, W}, sizeof d6);
            memcpy(perm, (int[]){0, 3, 4, 1, 5, 2}, sizeof perm);
        }
        x = rlx_graph_permute(c->g, NULL, ox_reshape(c, x, 6, d6), perm);
        return ox_out1(c, v->elem, ox_reshape(c, x, 4, (int64_t[]){N, C / (b * b), H * b, W * b}));
    }
    if (H % b || W % b) {
        ox_failf(c, RLX_ERR_FORMAT, "spatial dims are not multiples of blocksize");
        return false;
    }
    x = ox_reshape(c, x, 6, (int64_t[]){N, C, H / b, b, W / b, b});
    x = rlx_graph_permute(c->g, NULL, x, (int[]){0, 3, 5, 1, 2, 4});
    return ox_out1(c, v->elem, ox_reshape(c, x, 4, (int64_t[]){N, C * b * b, H / b, W / b}));
}

bool ox_e_depth_to_space(ctx *c)
{
    return e_depth_space(c, true);
}
bool ox_e_space_to_depth(ctx *c)
{
    return e_depth_space(c, false);
}

bool ox_e_tile(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    int64_t rep[MAXD + 1];
    int k = ox_const_ints(c, 1, rep, MAXD + 1);
    if (k != v->rank) {
        ox_unsupported(c, "repeats that are not known at import time");
        return false;
    }
    rlx_node x = ox_node_of(c, v);
    for (int i = 0; i < v->rank; i++) {
        if (rep[i] < 1 || rep[i] > 64) {
            ox_unsupported(c, "repeats outside 1..64");
            return false;
        }
        if (rep[i] == 1)
            continue;
        rlx_node parts[64];
        for (int j = 0; j < rep[i]; j++)
            parts[j] = x;
        x = rlx_graph_concat(c->g, NULL, (int)rep[i], parts, i);
    }
    return ox_out1(c, v->elem, rlx_graph_copy(c->g, NULL, x));
}

bool ox_e_trilu(ctx *c)
{
    val *v = ox_need(c, 0);
    if (!v)
        return false;
    if (v->rank < 2) {
        ox_failf(c, RLX_ERR_FORMAT, "the input needs 2 dims");
        return false;
    }
    int64_t k = 0;
    if (ox_in_val(c, 1)) {
        int64_t t[2];
        if (ox_const_ints(c, 1, t, 1) != 1) {
            ox_unsupported(c, "a k that is not known at import time");
            return false;
        }
        k = t[0];
    }
    bool upper = ox_attr_i(c->cur, "upper", 1) != 0;
    int64_t rows = v->dims[v->rank - 2], cols = v->dims[v->rank - 1];
    /* keep (i, j) with j - i >= k (upper) or j - i <= k (lower) */
    double *keep = ox_alloc_d(rows * cols);
    if (!keep) {
        ox_unsupported(c, "matrices of more than %d elements", RLX_ONNX_FOLD_LIMIT);
        return false;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            keep[i * cols + j] = upper ? (j - i >= k) : (j - i <= k);
    val *mv = ox_set_const(c, "", RLX_ONNX_BOOL, 2, (int64_t[]){rows, cols}, keep);
    if (!mv)
        return false;
    val *zv = ox_set_const(c, "", v->elem, 0, NULL, calloc(1, sizeof(double)));
    if (!zv)
        return false;
    return ox_out1(
        c, v->elem,
        rlx_graph_where(c->g, NULL, ox_node_of(c, mv), ox_node_of(c, v), ox_node_of(c, zv)));
}
