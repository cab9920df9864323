/* The graph IR: typed nodes built through a C API, the input of the compiler.
 *
 * Usage:
 *     rlx_graph *g = rlx_graph_create();
 *     int seq = rlx_graph_add_symbol(g, "SEQ", 2048);
 *     rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32,
 *                                  rlx_shape_make_dims(2, (rlx_dim[]){rlx_dim_sym(seq),
 *                                                                    rlx_dim_const(64)}));
 *     rlx_node w = rlx_graph_param(g, "ffn.w", RLX_DTYPE_Q8_0, rlx_shape_make(2, (int64_t[]){96,
 * 64})); rlx_node y = rlx_graph_matmul(g, "ffn", x, w, false, true);   // [SEQ, 96]
 *     rlx_graph_output(g, "y", rlx_graph_gelu(g, NULL, y, RLX_GELU_TANH));
 *     if (rlx_graph_status(g) != RLX_OK)
 *         fprintf(stderr, "%s\n", rlx_graph_error(g));
 *
 * Errors accumulate: every builder call checks dtypes and shapes when the node
 * is added. The first failure is kept in the graph (rlx_graph_error) and that
 * call and every later builder call return RLX_NODE_INVALID, so model code can
 * build a whole graph and check once at the end. Messages name the op and the
 * node, e.g. "matmul 'blk.3.ffn_up': inner dims differ: a is [SEQ, 64], b is
 * [128, 96]".
 *
 * Conventions: shapes are row-major (last dim fastest). Token ids and
 * positions are I32. Block-quantized dtypes appear only as PARAMs, and such a
 * param may only feed matmul's b (with trans_b: [N, K] rows) or gather's table;
 * the one exception is a Q8_0 STATE (a quantized KV cache): float rows are
 * scattered into it (quantized on the write, along an axis other than the
 * last), its views (slice along an axis other than the last, reshape,
 * permute) address its elements in the state's flat order, and attention
 * reads such views as k / v.
 * Symbolic dims are affine expressions over symbols declared with
 * rlx_graph_add_symbol (at most RLX_MAX_SYMBOLS), each with an upper bound;
 * rlx_dim_add etc. (op.h) build e.g. PAST+SEQ.
 *
 * Names: `name` arguments may be NULL (the node gets "#<id>"). For sources
 * (input, param, state) and outputs the name is the binding name the session
 * uses and must be unique within its kind. Strings and const data are copied.
 *
 * Ownership: the graph owns its nodes, names and const data; free it with
 * rlx_graph_free. Thread safety: a graph belongs to one thread at a time;
 * read-only functions on a finished graph may be called concurrently.
 */
#ifndef RLX_ENGINE_IR_GRAPH_H
#define RLX_ENGINE_IR_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backends/base/dtype.h"
#include "backends/base/op.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_graph rlx_graph;
typedef int32_t rlx_node;
#define RLX_NODE_INVALID ((rlx_node)-1)

RLX_API rlx_graph *rlx_graph_create(void);
RLX_API void rlx_graph_free(rlx_graph *g);
/* A deep copy (NULL on allocation failure). */
RLX_API rlx_graph *rlx_graph_clone(const rlx_graph *g);

/* RLX_OK, or the status of the first builder error. */
RLX_API rlx_status rlx_graph_status(const rlx_graph *g);
/* The first builder error's message, or NULL when there is none. */
RLX_API const char *rlx_graph_error(const rlx_graph *g);
/* Copy the first builder error (if any) into *err and return its status. */
RLX_API rlx_status rlx_graph_take_error(const rlx_graph *g, rlx_error **err);

/* Symbols: returns the symbol id (>= 0) to use with rlx_dim_sym, or -1 (and
 * records an error). Adding an existing name with the same bound returns its
 * id. */
RLX_API int rlx_graph_add_symbol(rlx_graph *g, const char *name, int64_t max);
RLX_API int rlx_graph_find_symbol(const rlx_graph *g, const char *name);
RLX_API int rlx_graph_symbol_count(const rlx_graph *g);
RLX_API const char *rlx_graph_symbol_name(const rlx_graph *g, int sym);
RLX_API int64_t rlx_graph_symbol_max(const rlx_graph *g, int sym);

/* Partial offload: nodes added after this call belong to segment `seg`
 * (>= 0, default 0). rlx_compile_split makes one program per segment. */
RLX_API void rlx_graph_set_segment(rlx_graph *g, int seg);

/* ---- sources ---- */
RLX_API rlx_node rlx_graph_input(rlx_graph *g, const char *name, rlx_dtype dt, rlx_shape shape);
RLX_API rlx_node rlx_graph_param(rlx_graph *g, const char *name, rlx_dtype dt, rlx_shape shape);
/* A persistent tensor (KV cache) that lives on the device between runs. */
RLX_API rlx_node rlx_graph_state(rlx_graph *g, const char *name, rlx_dtype dt, rlx_shape shape);
/* Constants: data is copied; the shape must be constant. */
RLX_API rlx_node rlx_graph_const(rlx_graph *g, const char *name, rlx_dtype dt, rlx_shape shape,
                                 const void *data);
RLX_API rlx_node rlx_graph_const_f32(rlx_graph *g, const char *name, rlx_shape shape,
                                     const float *data);
RLX_API rlx_node rlx_graph_const_i32(rlx_graph *g, const char *name, rlx_shape shape,
                                     const int32_t *data);
/* A rank-0 F32 constant. */
RLX_API rlx_node rlx_graph_scalar(rlx_graph *g, float value);

/* ---- elementwise ---- */
/* Any unary elementwise op without params (NEG .. SQUARE except GELU). */
RLX_API rlx_node rlx_graph_unary(rlx_graph *g, const char *name, rlx_op op, rlx_node x);
/* Any binary elementwise op without params (ADD .. POW), numpy broadcasting. */
RLX_API rlx_node rlx_graph_binary(rlx_graph *g, const char *name, rlx_op op, rlx_node a,
                                  rlx_node b);
RLX_API rlx_node rlx_graph_neg(rlx_graph *g, const char *name, rlx_node x);
RLX_API rlx_node rlx_graph_exp(rlx_graph *g, const char *name, rlx_node x);
RLX_API rlx_node rlx_graph_sqrt(rlx_graph *g, const char *name, rlx_node x);
RLX_API rlx_node rlx_graph_tanh(rlx_graph *g, const char *name, rlx_node x);
RLX_API rlx_node rlx_graph_sigmoid(rlx_graph *g, const char *name, rlx_node x);
RLX_API rlx_node rlx_graph_relu(rlx_graph *g, const char *name, rlx_node x);
RLX_API rlx_node rlx_graph_silu(rlx_graph *g, const char *name, rlx_node x);
RLX_API rlx_node rlx_graph_gelu(rlx_graph *g, const char *name, rlx_node x, rlx_gelu_approx approx);
RLX_API rlx_node rlx_graph_cast(rlx_graph *g, const char *name, rlx_node x, rlx_dtype to);
RLX_API rlx_node rlx_graph_clamp(rlx_graph *g, const char *name, rlx_node x, float lo, float hi);
/* x * mul + add */
RLX_API rlx_node rlx_graph_scale(rlx_graph *g, const char *name, rlx_node x, float mul, float add);
RLX_API rlx_node rlx_graph_add(rlx_graph *g, const char *name, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_graph_sub(rlx_graph *g, const char *name, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_graph_mul(rlx_graph *g, const char *name, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_graph_div(rlx_graph *g, const char *name, rlx_node a, rlx_node b);
/* Output U8 0/1. */
RLX_API rlx_node rlx_graph_cmp(rlx_graph *g, const char *name, rlx_cmp kind, rlx_node a,
                               rlx_node b);
RLX_API rlx_node rlx_graph_where(rlx_graph *g, const char *name, rlx_node cond, rlx_node a,
                                 rlx_node b);

/* ---- linear algebra ---- */
/* a [.., M, K] (or [.., K, M] with trans_a) times b [.., K, N] (or [.., N, K]
 * with trans_b, the weight layout); leading dims broadcast. b may be a
 * block-quantized param (then trans_b is required and b is rank 2). */
RLX_API rlx_node rlx_graph_matmul(rlx_graph *g, const char *name, rlx_node a, rlx_node b,
                                  bool trans_a, bool trans_b);
/* x @ w^T (+ bias): w is [N, K] as stored in GGUF/safetensors; bias [N] or
 * RLX_NODE_INVALID. Builds matmul + add (the fusion pass merges them). */
RLX_API rlx_node rlx_graph_linear(rlx_graph *g, const char *name, rlx_node x, rlx_node w,
                                  rlx_node bias);

/* ---- reductions (one axis; negative axes count from the end) ---- */
RLX_API rlx_node rlx_graph_reduce(rlx_graph *g, const char *name, rlx_op op, rlx_node x, int axis,
                                  bool keepdim);
RLX_API rlx_node rlx_graph_argmax(rlx_graph *g, const char *name, rlx_node x, int axis);
RLX_API rlx_node rlx_graph_topk(rlx_graph *g, const char *name, rlx_node x, int axis, int k,
                                bool largest, bool indices);

/* ---- normalization ---- */
/* softmax(x * scale + mask) over the last axis; mask may be RLX_NODE_INVALID;
 * scale 0 means 1. */
RLX_API rlx_node rlx_graph_softmax(rlx_graph *g, const char *name, rlx_node x, rlx_node mask,
                                   float scale);
/* weight / bias may be RLX_NODE_INVALID. */
RLX_API rlx_node rlx_graph_layer_norm(rlx_graph *g, const char *name, rlx_node x, rlx_node weight,
                                      rlx_node bias, float eps);
RLX_API rlx_node rlx_graph_rms_norm(rlx_graph *g, const char *name, rlx_node x, rlx_node weight,
                                    float eps);
/* rms_norm(a + b) * weight as one op (the sum is not available separately). */
RLX_API rlx_node rlx_graph_add_rms_norm(rlx_graph *g, const char *name, rlx_node a, rlx_node b,
                                        rlx_node weight, float eps);
/* The same, keeping the sum: one ADD_RMS_NORM (keep_sum) node, [..., 2, D],
 * whose two halves come back as views, *sum = a + b and the result
 * rms_norm(a + b) * weight (for a pre-norm block, whose residual stream
 * reads the sum again). */
RLX_API rlx_node rlx_graph_add_rms_norm_sum(rlx_graph *g, const char *name, rlx_node a, rlx_node b,
                                            rlx_node weight, float eps, rlx_node *sum);
/* x [N, C, ...]; weight/bias [C]. */
RLX_API rlx_node rlx_graph_group_norm(rlx_graph *g, const char *name, rlx_node x, int groups,
                                      rlx_node weight, rlx_node bias, float eps);

/* ---- positional ---- */
typedef struct rlx_rope_params {
    rlx_rope_mode mode;
    int32_t n_rot;    /* 0 = the whole head dim */
    float freq_base;  /* 0 = 10000 */
    float freq_scale; /* 0 = 1 */
    int32_t seq_axis; /* axis of x that positions index; 0 = rank-3 (x [.., S, H, D]) */
} rlx_rope_params;
/* x [.., S, H, D] (or per seq_axis), positions I32 [S], freq_factors F32
 * [n_rot/2] or RLX_NODE_INVALID. */
RLX_API rlx_node rlx_graph_rope(rlx_graph *g, const char *name, rlx_node x, rlx_node positions,
                                rlx_node freq_factors, rlx_rope_params p);

/* ---- attention ---- */
typedef struct rlx_attention_params {
    rlx_mask_kind mask;
    int32_t window; /* RLX_MASK_WINDOW */
    float scale;    /* 0 = 1/sqrt(D) */
    float softcap;  /* 0 = off */
    /* > 0: the keys form a grid of T / bias_grid_w rows of bias_grid_w
     * columns and the bias is decomposed over it: it broadcasts to
     * [B, Hq, S, T / w + w], and key t gets bias[..., t / w] (its row's
     * term) + bias[..., T / w + t % w] (its column's). Backends without it
     * get the full [B, Hq, S, T] bias built by the compiler (legalize). */
    int32_t bias_grid_w;
} rlx_attention_params;
/* q [B, Hq, S, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv], Hq % Hkv == 0 (GQA),
 * bias (additive, broadcast to [B, Hq, S, T]; see bias_grid_w) or
 * RLX_NODE_INVALID.
 * Output [B, Hq, S, Dv]. Causal masks put query i at absolute position
 * T - S + i. */
RLX_API rlx_node rlx_graph_attention(rlx_graph *g, const char *name, rlx_node q, rlx_node k,
                                     rlx_node v, rlx_node bias, rlx_attention_params p);

/* ---- convolution / image ---- */
/* x [N, Cin, L], w [Cout, Cin/groups, K], bias [Cout] or RLX_NODE_INVALID. */
RLX_API rlx_node rlx_graph_conv1d(rlx_graph *g, const char *name, rlx_node x, rlx_node w,
                                  rlx_node bias, int stride, int pad, int dilation, int groups);
/* x [N, Cin, H, W], w [Cout, Cin/groups, KH, KW]; arrays are {h, w}. */
RLX_API rlx_node rlx_graph_conv2d(rlx_graph *g, const char *name, rlx_node x, rlx_node w,
                                  rlx_node bias, const int stride[2], const int pad[2],
                                  const int dilation[2], int groups);
/* x [N, Cin, H, W], w [Cin, Cout/groups, KH, KW] (PyTorch layout);
 * out = (H-1)*stride - 2*pad + dilation*(K-1) + out_pad + 1. */
RLX_API rlx_node rlx_graph_conv_transpose2d(rlx_graph *g, const char *name, rlx_node x, rlx_node w,
                                            rlx_node bias, const int stride[2], const int pad[2],
                                            const int out_pad[2], int groups);
/* Resize the last two dims to out_h x out_w. */
RLX_API rlx_node rlx_graph_resize(rlx_graph *g, const char *name, rlx_node x, int64_t out_h,
                                  int64_t out_w, rlx_resize_mode mode, bool align_corners);
RLX_API rlx_node rlx_graph_pool2d(rlx_graph *g, const char *name, rlx_node x, rlx_pool_mode mode,
                                  const int kernel[2], const int stride[2], const int pad[2]);

/* ---- data movement ---- */
/* Same element count (checked at the symbols' bounds). */
RLX_API rlx_node rlx_graph_reshape(rlx_graph *g, const char *name, rlx_node x, rlx_shape shape);
/* out dim i = in dim perm[i] */
RLX_API rlx_node rlx_graph_permute(rlx_graph *g, const char *name, rlx_node x, const int *perm);
/* Swap two axes. */
RLX_API rlx_node rlx_graph_transpose(rlx_graph *g, const char *name, rlx_node x, int ax0, int ax1);
/* Elements [start, start+len) along axis; start and len may be symbolic. */
RLX_API rlx_node rlx_graph_slice(rlx_graph *g, const char *name, rlx_node x, int axis,
                                 rlx_dim start, rlx_dim len);
RLX_API rlx_node rlx_graph_concat(rlx_graph *g, const char *name, int n, const rlx_node *xs,
                                  int axis);
/* Constant padding; before/after have one entry per dim of x. */
RLX_API rlx_node rlx_graph_pad(rlx_graph *g, const char *name, rlx_node x, const int64_t *before,
                               const int64_t *after, float value);
RLX_API rlx_node rlx_graph_copy(rlx_graph *g, const char *name, rlx_node x);
/* table [V, D] (any dtype, incl. quantized), ids I32 [...] -> F32 [..., D]. */
RLX_API rlx_node rlx_graph_gather(rlx_graph *g, const char *name, rlx_node table, rlx_node ids);
/* Write src into `state` (a STATE node or the result of an earlier scatter
 * into it) along axis at offset; src matches state except along axis. The
 * result is the updated state (same shape), to be read by later nodes; reads
 * of the state that do not depend on the result happen before the write. */
RLX_API rlx_node rlx_graph_scatter(rlx_graph *g, const char *name, rlx_node state, rlx_node src,
                                   int axis, rlx_dim offset);

/* Any op with explicit params and inputs (including FUSED_ELEMENTWISE), for
 * tests and tools; `dt`/`shape` are the requested dtype/shape for ops whose
 * result is given rather than derived (RLX_DTYPE_INVALID / NULL otherwise).
 * The same checks apply as for the named builders. */
RLX_API rlx_node rlx_graph_op(rlx_graph *g, const char *name, rlx_op op, const rlx_op_params *p,
                              int n_in, const rlx_node *in, rlx_dtype dt, const rlx_shape *shape);

/* ---- outputs ---- */
RLX_API void rlx_graph_output(rlx_graph *g, const char *name, rlx_node node);

/* ---- inspection ---- */
RLX_API int32_t rlx_graph_node_count(const rlx_graph *g);
RLX_API int32_t rlx_graph_output_count(const rlx_graph *g);
RLX_API rlx_op rlx_graph_node_op(const rlx_graph *g, rlx_node n);
RLX_API rlx_dtype rlx_graph_node_dtype(const rlx_graph *g, rlx_node n);
RLX_API rlx_shape rlx_graph_node_shape(const rlx_graph *g, rlx_node n);
RLX_API const char *rlx_graph_node_name(const rlx_graph *g, rlx_node n);
/* Format a shape with the graph's symbol names, e.g. "[SEQ, 64]". */
RLX_API void rlx_graph_format_shape(const rlx_graph *g, const rlx_shape *s, char *buf, size_t size);
/* One line per node. */
RLX_API void rlx_graph_dump_text(const rlx_graph *g, FILE *f);
/* Graphviz dot. */
RLX_API void rlx_graph_dump_dot(const rlx_graph *g, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
