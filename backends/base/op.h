/* The operation set shared by the IR (engine/ir), the compiler and every
 * backend. It lives in backends/base because backends are the lowest layer:
 * a backend answers `supports_op` and runs LIR instructions made of these.
 *
 * Shapes are row-major: the LAST dimension is the fastest-varying (PyTorch
 * order). A GGUF tensor with ne = {K, N} is the shape [N, K].
 *
 * Dims may be symbolic: an affine expression k + m0*s0 + m1*s1 over symbols
 * (SEQ, PAST, BATCH, ...) that are given values at run time, each with an
 * upper bound known at compile time.
 *
 * Thread safety: plain data and pure functions.
 */
/* Semantics the compiler relies on (and backends implement):
 * - Dtypes: float results are F32 unless the node is a CAST; F16/BF16 params
 *   may feed any float input (backends read them, or refuse in supports_op
 *   and the compiler inserts a CAST). Integer elementwise ops on I32 give
 *   I32. CMP gives U8; WHERE's cond is U8 (nonzero = true).
 * - Elementwise: inputs broadcast numpy-style to the node's shape.
 * - MATMUL (a, b[, bias]): out = act(alpha * op(a) @ op(b) + bias); batch dims
 *   broadcast; bias [N]; b may be block-quantized (then rank 2, trans_b).
 * - SOFTMAX (x[, mask]): s = x*scale (scale 0 = 1); softcap c: s = c*tanh(s/c);
 *   s += mask (broadcast); softmax over the last axis.
 * - LAYER_NORM / RMS_NORM over the last axis, then * weight (+ bias);
 *   GROUP_NORM over (C/groups x spatial) of x [N, C, ...], weight/bias [C].
 *   Inputs after x are present per has_weight / has_bias.
 * - ADD_RMS_NORM (a, b, weight): rms_norm(a + b) * weight. With
 *   norm.keep_sum the output is a's shape with a dim of 2 inserted before the
 *   last ([..., 2, D]): index 0 the sum a + b, index 1 the norm. A pre-norm
 *   transformer's residual stream (the sum, read again by the next residual
 *   add) and the next block's input come from one pass; the fusion pass hands
 *   them on as views (rows D apart, whatever the symbolic dims before them).
 * - ROPE (x, pos I32 [S][, freq_factors F32 [n_rot/2]]): for pair i < n_rot/2,
 *   theta = pos * freq_scale * freq_base^(-2i/n_rot) / freq_factors[i];
 *   NORMAL rotates (2i, 2i+1), NEOX rotates (i, i + n_rot/2); dims >= n_rot
 *   pass through. seq_axis is the axis of x that pos indexes; the head dim is
 *   the last axis.
 * - ATTENTION (q, k, v[, bias]): per head h (kv head h / (Hq/Hkv)),
 *   s = q.k * scale (0 = 1/sqrt(D)); softcap; + bias; masked (query i at
 *   absolute position T-S+i sees key j when j <= pos, and for WINDOW also
 *   j > pos - window); softmax over keys; @ v. Output [B, Hq, S, Dv].
 * - CONV1D/CONV2D/CONV_TRANSPOSE2D, POOL2D (avg divides by the kernel area),
 *   RESIZE (output size = the node's last two dims): as PyTorch.
 * - SLICE: params.slice.start (+ step, 0 = 1) along axis; length from the
 *   output shape. PAD: constant value. PERMUTE: out dim i = in dim perm[i].
 * - GATHER (table [V, D], ids I32 [...]) -> F32 [..., D].
 * - SCATTER (state, src): state[.., offset : offset + src.shape[axis], ..] = src
 *   in place; the output is the state itself (same home).
 * - TOPK: sorted, the k largest (or smallest); values or I32 indices.
 * - FUSED_ELEMENTWISE: registers 0..n_in-1 are the inputs broadcast to the
 *   output shape, computed in F32; step ops are elementwise ops (SCALE uses
 *   p0/p1 as mul/add, CLAMP p0/p1 as lo/hi, CMP/GELU take aux).
 */
#ifndef RLX_BASE_OP_H
#define RLX_BASE_OP_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_MAX_DIMS    6
#define RLX_DIM_TERMS   2
#define RLX_MAX_SYMBOLS 8
#define RLX_MAX_INPUTS  6

/* A dimension: k + mul[0]*sym[0] + mul[1]*sym[1]; sym[i] < 0 means unused. */
typedef struct rlx_dim {
    int64_t k;
    int16_t sym[RLX_DIM_TERMS];
    int32_t mul[RLX_DIM_TERMS];
} rlx_dim;

typedef struct rlx_shape {
    int32_t rank;
    rlx_dim d[RLX_MAX_DIMS];
} rlx_shape;

/* Values of the symbols for one run (index = symbol id). */
typedef struct rlx_sym_values {
    int64_t v[RLX_MAX_SYMBOLS];
} rlx_sym_values;

typedef enum rlx_op {
    RLX_OP_NONE = 0,
    /* sources */
    RLX_OP_INPUT, /* bound at run time */
    RLX_OP_PARAM, /* a weight, by name, in its file dtype */
    RLX_OP_CONST, /* small constant data owned by the graph */
    RLX_OP_STATE, /* a persistent device tensor (KV cache), by name */
    /* elementwise unary */
    RLX_OP_NEG,
    RLX_OP_ABS,
    RLX_OP_EXP,
    RLX_OP_LOG,
    RLX_OP_SQRT,
    RLX_OP_RSQRT,
    RLX_OP_TANH,
    RLX_OP_SIGMOID,
    RLX_OP_RELU,
    RLX_OP_GELU, /* params.act.approx: erf or tanh form */
    RLX_OP_SILU,
    RLX_OP_SIN,
    RLX_OP_COS,
    RLX_OP_SQUARE,
    RLX_OP_CAST,  /* to the node's dtype */
    RLX_OP_CLAMP, /* params.clamp */
    RLX_OP_SCALE, /* x * params.scale.mul + params.scale.add */
    /* elementwise binary (numpy broadcasting) */
    RLX_OP_ADD,
    RLX_OP_SUB,
    RLX_OP_MUL,
    RLX_OP_DIV,
    RLX_OP_MAX,
    RLX_OP_MIN,
    RLX_OP_POW,
    RLX_OP_CMP,   /* params.cmp; output U8 (0/1) */
    RLX_OP_WHERE, /* (cond, a, b) */
    /* a fused chain of elementwise ops (made by the fusion pass) */
    RLX_OP_FUSED_ELEMENTWISE,
    /* linear algebra */
    RLX_OP_MATMUL, /* (a, b[, bias]) with params.matmul; b may be block-quantized */
    /* reductions over one axis */
    RLX_OP_REDUCE_SUM,
    RLX_OP_REDUCE_MEAN,
    RLX_OP_REDUCE_MAX,
    RLX_OP_ARGMAX, /* output I32 */
    RLX_OP_TOPK,   /* params.topk; output values or I32 indices */
    /* normalization */
    RLX_OP_SOFTMAX,      /* (x[, mask]) over the last axis, params.softmax */
    RLX_OP_LAYER_NORM,   /* (x[, weight[, bias]]) over the last axis */
    RLX_OP_RMS_NORM,     /* (x[, weight]) over the last axis */
    RLX_OP_GROUP_NORM,   /* (x[, weight[, bias]]) NCHW... */
    RLX_OP_ADD_RMS_NORM, /* fused (a, b, weight): rms_norm(a+b)*weight; see fusion pass */
    /* positional */
    RLX_OP_ROPE, /* (x [.., S, H, D] or per params, positions I32[S][, freq_factors]) */
    /* attention: (q, k, v[, bias]) q [B,Hq,S,D], k [B,Hkv,T,D], v [B,Hkv,T,Dv] */
    RLX_OP_ATTENTION,
    /* convolution, NCHW / NCL */
    RLX_OP_CONV1D,           /* (x, w[, bias]) */
    RLX_OP_CONV2D,           /* (x, w[, bias]) */
    RLX_OP_CONV_TRANSPOSE2D, /* (x, w[, bias]) */
    RLX_OP_RESIZE,           /* nearest / bilinear on the last two dims */
    RLX_OP_POOL2D,           /* max / avg */
    /* data movement */
    RLX_OP_RESHAPE, /* a view when the input is contiguous */
    RLX_OP_PERMUTE,
    RLX_OP_SLICE, /* one axis, start (may be symbolic) + length from the output shape */
    RLX_OP_CONCAT,
    RLX_OP_PAD,
    RLX_OP_COPY,    /* materialize (contiguous copy) */
    RLX_OP_GATHER,  /* (table [V, D] any dtype incl. quantized, ids I32[...]) -> [..., D] f32 */
    RLX_OP_SCATTER, /* (state, src): write src into the state along an axis at an offset, in place
                     */
    RLX_OP_COUNT
} rlx_op;

typedef enum rlx_cmp {
    RLX_CMP_EQ,
    RLX_CMP_NE,
    RLX_CMP_LT,
    RLX_CMP_LE,
    RLX_CMP_GT,
    RLX_CMP_GE
} rlx_cmp;
typedef enum rlx_gelu_approx { RLX_GELU_ERF, RLX_GELU_TANH } rlx_gelu_approx;
typedef enum rlx_act {
    RLX_ACT_NONE,
    RLX_ACT_RELU,
    RLX_ACT_GELU_ERF,
    RLX_ACT_GELU_TANH,
    RLX_ACT_SILU,
    RLX_ACT_SIGMOID,
    RLX_ACT_TANH,
} rlx_act;
typedef enum rlx_rope_mode { RLX_ROPE_NORMAL, RLX_ROPE_NEOX } rlx_rope_mode;
typedef enum rlx_mask_kind {
    RLX_MASK_NONE,
    RLX_MASK_CAUSAL, /* query i (absolute pos T-S+i) sees keys j <= its position */
    RLX_MASK_WINDOW, /* causal and j > pos - window */
} rlx_mask_kind;
typedef enum rlx_resize_mode { RLX_RESIZE_NEAREST, RLX_RESIZE_BILINEAR } rlx_resize_mode;
typedef enum rlx_pool_mode { RLX_POOL_MAX, RLX_POOL_AVG } rlx_pool_mode;

/* A fused elementwise program: a tiny register machine over broadcast inputs.
 * Each step computes reg[dst] = op(reg[a], reg[b], reg[c]); registers
 * 0..n_inputs-1 hold the node's inputs; the last step's dst is the output. */
#define RLX_FUSED_MAX_STEPS 16
typedef struct rlx_fused_step {
    uint8_t op; /* an elementwise rlx_op */
    uint8_t dst, a, b, c;
    uint8_t aux;  /* cmp kind / gelu approx */
    float p0, p1; /* scale mul/add, clamp lo/hi */
} rlx_fused_step;

typedef union rlx_op_params {
    struct {
        rlx_gelu_approx approx;
    } gelu;
    struct {
        rlx_cmp kind;
    } cmp;
    struct {
        float lo, hi;
    } clamp;
    struct {
        float mul, add;
    } scale;
    struct {
        uint8_t n_steps;
        rlx_fused_step steps[RLX_FUSED_MAX_STEPS];
    } fused;
    struct {
        bool trans_a, trans_b; /* b is [N, K] when trans_b (the weight layout) */
        bool has_bias;
        rlx_act act; /* fused epilogue */
        float alpha; /* 0 means 1 */
    } matmul;
    struct {
        int32_t axis;
        bool keepdim;
    } reduce;
    struct {
        int32_t axis;
        int32_t k;
        bool largest;
        bool indices;
    } topk;
    struct {
        float scale;
        float softcap;
        bool has_mask;
    } softmax; /* softcap 0 = off */
    struct {
        float eps;
        int32_t groups;
        bool has_weight, has_bias;
        bool keep_sum; /* ADD_RMS_NORM only: output [..., 2, D]: sum, norm */
    } norm;
    struct {
        rlx_rope_mode mode;
        int32_t n_rot; /* rotated dims from the start of head_dim */
        float freq_base, freq_scale;
        bool has_freq_factors;
        /* x layout: [B, S, H, D] (heads_axis 2) or [B, H, S, D] (heads_axis 1) */
        int32_t seq_axis;
    } rope;
    struct {
        rlx_mask_kind mask;
        int32_t window;
        float scale;   /* 0 = 1/sqrt(D) */
        float softcap; /* 0 = off */
        bool has_bias;
        /* > 0: the bias is decomposed over a key grid of bias_grid_w columns
         * (key t = row t / w, column t % w): its last axis holds T / w row
         * terms then w column terms, and key t gets row term t / w plus
         * column term t % w (SAM's relative positions) */
        int32_t bias_grid_w;
    } attn;
    struct {
        int32_t stride[2], pad[2], dilation[2], out_pad[2];
        int32_t groups;
        bool has_bias;
        rlx_act act; /* fused epilogue (the fusion pass, where the backend has it) */
    } conv;
    struct {
        rlx_resize_mode mode;
        bool align_corners;
    } resize;
    struct {
        rlx_pool_mode mode;
        int32_t kernel[2], stride[2], pad[2];
    } pool;
    struct {
        int32_t perm[RLX_MAX_DIMS];
    } permute;
    struct {
        int32_t axis;
        rlx_dim start;
        int64_t step;
    } slice;
    struct {
        int32_t axis;
    } concat;
    struct {
        int64_t before[RLX_MAX_DIMS], after[RLX_MAX_DIMS];
        float value;
    } pad;
    struct {
        int32_t axis;
        rlx_dim offset;
    } scatter;
} rlx_op_params;

/* Static facts about an op. */
typedef struct rlx_op_info {
    const char *name; /* "matmul" */
    int8_t min_inputs, max_inputs;
    bool elementwise; /* unary/binary/ternary elementwise with broadcasting */
    bool view;        /* may alias its input (reshape, contiguous slice) */
} rlx_op_info;

RLX_API const rlx_op_info *rlx_op_get_info(rlx_op op);
RLX_API const char *rlx_op_name(rlx_op op);

/* Shape helpers. */
RLX_API rlx_dim rlx_dim_const(int64_t k);
RLX_API rlx_dim rlx_dim_sym(int sym);
RLX_API bool rlx_dim_is_const(rlx_dim d);
RLX_API bool rlx_dim_equal(rlx_dim a, rlx_dim b);
RLX_API int64_t rlx_dim_eval(rlx_dim d, const rlx_sym_values *sv);
/* dims may be NULL: all ones. */
RLX_API rlx_shape rlx_shape_make(int rank, const int64_t *dims);
RLX_API int64_t rlx_shape_numel(const rlx_shape *s, const rlx_sym_values *sv);

/* Symbolic dim arithmetic. Results stay canonical (terms sorted by symbol,
 * unused terms sym -1 / mul 0). These return false when the result does not
 * fit the affine form (more than RLX_DIM_TERMS symbols). */
RLX_API rlx_shape rlx_shape_make_dims(int rank, const rlx_dim *dims);
RLX_API bool rlx_dim_add(rlx_dim a, rlx_dim b, rlx_dim *out);
RLX_API bool rlx_dim_sub(rlx_dim a, rlx_dim b, rlx_dim *out);
RLX_API rlx_dim rlx_dim_scale(rlx_dim a, int64_t m);
/* The value of d with every symbol at its upper bound (max[sym]). */
RLX_API int64_t rlx_dim_upper(rlx_dim d, const int64_t *max);
RLX_API bool rlx_shape_equal(const rlx_shape *a, const rlx_shape *b);

#ifdef __cplusplus
}
#endif
#endif
