/* Shared by the ONNX importer's files (not installed): the importer's state
 * and its values, and the helpers the op builders use.
 *
 *   onnx-import.c      values, attributes, diagnostics, the op table, the pass
 *   onnx-fold.c        host constants: elementwise folding over constant inputs
 *   onnx-ops-math.c    elementwise and unary ops, casts, MatMul/Gemm, reductions
 *   onnx-ops-tensor.c  shapes and data movement (Reshape, Slice, Gather, ...)
 *   onnx-ops-nn.c      convolution, pooling, normalizations, Resize
 *
 * Each ONNX value becomes either a host constant (double elements) or a
 * graph node with a static shape; see onnx-import.c. An op builder (ox_e_*)
 * reads the current node (ctx.cur), sets its outputs and returns false
 * after reporting why (ox_unsupported, ox_failf).
 * Thread safety: an import is used by one thread. */
#ifndef RLX_MODELS_ONNX_ONNX_IMPORT_INTERNAL_H
#define RLX_MODELS_ONNX_ONNX_IMPORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/ir/graph.h"
#include "models/onnx/onnx-model.h"

#define MAXD RLX_MAX_DIMS

typedef enum { V_NONE, V_CONST, V_NODE, V_POISON } vkind;

typedef struct {
    const char *name;
    vkind kind;
    int32_t elem; /* ONNX elem type */
    int rank;
    int64_t dims[MAXD];
    double *c;                   /* V_CONST: numel values (NULL while only `init` holds them) */
    const rlx_onnx_tensor *init; /* the initializer behind a constant, if any */
    rlx_node node;               /* graph node (V_NODE, or a materialized const) */
} val;

typedef struct {
    const rlx_onnx_tensor *t;
    rlx_node node; /* its PARAM (cast to F32 where stored narrower) */
    rlx_node raw;  /* the PARAM itself, in its stored dtype */
} weight;

struct rlx_onnx_import {
    const rlx_onnx_model *m;
    rlx_graph *g;
    int64_t opset;
    val *vals;
    int32_t n_vals, cap_vals;
    weight *weights;
    int32_t n_weights, cap_weights;
    rlx_onnx_io *ins, *outs;
    int32_t n_ins, n_outs;
    /* unsupported things, each once */
    char **unsup;
    int32_t n_unsup, cap_unsup;
    int64_t folded; /* elements of host constants so far (RLX_ONNX_FOLD_TOTAL) */
    char *fail;     /* the first other error */
    rlx_status fail_code;
    const rlx_onnx_node *cur;
};

typedef rlx_onnx_import ctx;

/* ---- element types, diagnostics, values, attributes, inputs, graph helpers (onnx-import.c) ----
 */

bool ox_is_float_elem(int32_t e);
bool ox_is_int_elem(int32_t e);
rlx_dtype ox_graph_dtype(int32_t e);
void ox_unsupported(ctx *c, const char *fmt, ...) RLX_PRINTF(2, 3);
void ox_failf(ctx *c, rlx_status code, const char *fmt, ...) RLX_PRINTF(3, 4);
int64_t ox_numel_of(int rank, const int64_t *dims);
int64_t ox_vnumel(const val *v);
double *ox_cdata(ctx *c, val *v);
int64_t ox_to_i64(double x);
double ox_fit_elem(int32_t e, double x);
double *ox_alloc_d(int64_t n);
val *ox_set_const(ctx *c, const char *name, int32_t elem, int rank, const int64_t *dims,
                  double *data);
val *ox_set_node(ctx *c, const char *name, int32_t elem, rlx_node n);
rlx_node ox_node_of(ctx *c, val *v);
const rlx_onnx_attr *ox_attr(const rlx_onnx_node *n, const char *name);
int64_t ox_attr_i(const rlx_onnx_node *n, const char *name, int64_t def);
float ox_attr_f(const rlx_onnx_node *n, const char *name, float def);
const char *ox_attr_s(const rlx_onnx_node *n, const char *name, const char *def);
int ox_attr_ints(const rlx_onnx_node *n, const char *name, int64_t *out, int cap);
val *ox_in_val(ctx *c, int i);
int ox_const_ints(ctx *c, int i, int64_t *out, int cap);
int ox_norm_axis(int64_t axis, int rank, bool *ok);
rlx_node ox_reshape(ctx *c, rlx_node x, int rank, const int64_t *dims);
rlx_node ox_scalar_like(ctx *c, rlx_node x, double value);
rlx_shape ox_shape_of(ctx *c, rlx_node x);
rlx_node ox_slice_step(ctx *c, rlx_node x, int axis, int64_t start, int64_t len, int64_t step);
bool ox_out1(ctx *c, int32_t elem, rlx_node n);
bool ox_extra_outputs_unused(ctx *c, int keep);
val *ox_need(ctx *c, int i);
rlx_node ox_nd(ctx *c, int i);

/* ---- host folding (onnx-fold.c) ---- */

bool ox_broadcast_dims(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o);
int64_t ox_bidx(int64_t oi, int ro, const int64_t *od, int r, const int64_t *d);
/* The current node computed on the host when it is an elementwise op whose
 * inputs are all constants (its output set); false otherwise. */
bool ox_fold_node(ctx *c);

/* ---- op builders: elementwise, casts, linear algebra, reductions (onnx-ops-math.c) ---- */

bool ox_e_add(ctx *c);
bool ox_e_sub(ctx *c);
bool ox_e_mul(ctx *c);
bool ox_e_div(ctx *c);
bool ox_e_pow(ctx *c);
bool ox_e_max(ctx *c);
bool ox_e_min(ctx *c);
bool ox_e_sum(ctx *c);
bool ox_e_mean(ctx *c);
bool ox_e_equal(ctx *c);
bool ox_e_less(ctx *c);
bool ox_e_greater(ctx *c);
bool ox_e_less_eq(ctx *c);
bool ox_e_greater_eq(ctx *c);
bool ox_e_not(ctx *c);
bool ox_e_and(ctx *c);
bool ox_e_or(ctx *c);
bool ox_e_xor(ctx *c);
bool ox_e_where(ctx *c);
val *ox_float_in(ctx *c, int i);
bool ox_e_reciprocal(ctx *c);
bool ox_e_erf(ctx *c);
bool ox_e_leaky_relu(ctx *c);
bool ox_e_prelu(ctx *c);
bool ox_e_elu(ctx *c);
bool ox_e_selu(ctx *c);
bool ox_e_hard_sigmoid(ctx *c);
bool ox_e_hard_swish(ctx *c);
bool ox_e_softplus(ctx *c);
bool ox_e_softsign(ctx *c);
bool ox_e_thresholded_relu(ctx *c);
bool ox_e_clip(ctx *c);
bool ox_e_identity(ctx *c);
bool ox_e_cast(ctx *c);
bool ox_e_cast_like(ctx *c);
bool ox_e_matmul(ctx *c);
bool ox_e_gemm(ctx *c);
bool ox_e_global_avg_pool(ctx *c);
bool ox_e_global_max_pool(ctx *c);
bool ox_e_argmax(ctx *c);
bool ox_e_argmin(ctx *c);
bool ox_e_topk(ctx *c);
bool ox_e_neg(ctx *c);
bool ox_e_abs(ctx *c);
bool ox_e_exp(ctx *c);
bool ox_e_log(ctx *c);
bool ox_e_sqrt(ctx *c);
bool ox_e_tanh(ctx *c);
bool ox_e_sigmoid(ctx *c);
bool ox_e_relu(ctx *c);
bool ox_e_sin(ctx *c);
bool ox_e_cos(ctx *c);
bool ox_e_reduce_sum(ctx *c);
bool ox_e_reduce_mean(ctx *c);
bool ox_e_reduce_max(ctx *c);
bool ox_e_reduce_min(ctx *c);
bool ox_e_reduce_l1(ctx *c);
bool ox_e_reduce_l2(ctx *c);
bool ox_e_reduce_sumsq(ctx *c);
bool ox_e_reduce_logsum(ctx *c);
bool ox_e_reduce_logsumexp(ctx *c);

/* ---- op builders: shapes and data movement (onnx-ops-tensor.c) ---- */

bool ox_e_shape(ctx *c);
bool ox_e_size(ctx *c);
bool ox_set_const_from_tensor(ctx *c, const char *name, const rlx_onnx_tensor *t);
bool ox_e_constant(ctx *c);
bool ox_e_constant_of_shape(ctx *c);
bool ox_e_range(ctx *c);
bool ox_e_reshape(ctx *c);
bool ox_e_squeeze(ctx *c);
bool ox_e_unsqueeze(ctx *c);
bool ox_e_flatten(ctx *c);
bool ox_e_transpose(ctx *c);
bool ox_e_concat(ctx *c);
bool ox_e_slice(ctx *c);
bool ox_e_gather(ctx *c);
bool ox_e_expand(ctx *c);
bool ox_e_split(ctx *c);
bool ox_e_pad(ctx *c);
bool ox_e_depth_to_space(ctx *c);
bool ox_e_space_to_depth(ctx *c);
bool ox_e_tile(ctx *c);
bool ox_e_trilu(ctx *c);

/* ---- op builders: convolution, pooling, normalization, resize (onnx-ops-nn.c) ---- */

bool ox_e_conv(ctx *c);
bool ox_e_conv_transpose(ctx *c);
bool ox_e_max_pool(ctx *c);
bool ox_e_avg_pool(ctx *c);
bool ox_e_softmax(ctx *c);
bool ox_e_log_softmax(ctx *c);
bool ox_e_batch_norm(ctx *c);
bool ox_e_instance_norm(ctx *c);
bool ox_e_layer_norm(ctx *c);
bool ox_e_resize(ctx *c);

#endif
