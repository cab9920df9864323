/* CPU kernels of librlx: quantized rows, matmul, GEMM, norms, softmax, rope,
 * attention, conv2d, activations. Internal to the library (the CPU backend's
 * program executor calls these); the API is kept stable.
 *
 * Usage:
 *     rlx_cpu_kernels_init();                       // once; cheap to repeat
 *     rlx_threadpool *pool; rlx_threadpool_create(0, &pool);
 *     // y[M x N] = x[M x K] . W^T, W = N rows of K elements in Q4_K blocks
 *     rlx_cpu_matmul(pool, RLX_DTYPE_Q4_K, w, w_row_bytes, N, K,
 *                    x, K, M, y, N, NULL, 0);
 *
 * Conventions (everything here):
 *   - Row-major. A "stride" is the distance between consecutive rows counted in
 *     ELEMENTS of the array's own type (floats for f32, halves for f16), except
 *     where a name ends in _bytes. Strides may exceed the row length, so a
 *     kernel can read a slice of a bigger tensor (a KV cache, one head).
 *   - Quantized data uses ggml's block layouts bit for bit (GGUF files are
 *     consumed as they are mapped); a quantized row is ceil(K/block) blocks,
 *     K must be a multiple of the block size (32, or 256 for the K-quants).
 *   - Threading: every function taking a pool splits its work over it (NULL =
 *     serial on the caller) and returns when the work is done. Results do not
 *     depend on the thread count: each output element is computed by one task
 *     in a fixed order.
 *   - ISA: the fastest path the CPU and OS support (AVX-512 VNNI, AVX2+FMA, or
 *     portable C) is chosen once in rlx_cpu_kernels_init(); functions called
 *     before it initialize lazily. Paths agree with the scalar reference within
 *     the tolerances stated in tests/test-cpu-quant.c (integer dot products are
 *     exact; only float summation order differs).
 *   - Inputs and outputs must not overlap unless a function says "in place".
 *   - Nothing here allocates on the steady path except where a scratch pointer
 *     is NULL (then the kernel mallocs and frees); status returns are used only
 *     for bad arguments and allocation failure.
 *
 * Thread safety: all kernels are reentrant; concurrent calls must use
 * different pools (a pool runs one rlx_parallel_for at a time).
 */
#ifndef RLX_BACKENDS_CPU_KERNELS_H
#define RLX_BACKENDS_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"
#include "backends/cpu/threadpool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ISA selection ----------------------------------------------------- */

typedef enum rlx_cpu_isa {
    RLX_CPU_ISA_SCALAR = 0, /* portable C */
    RLX_CPU_ISA_AVX2,       /* AVX2 + FMA + F16C */
    RLX_CPU_ISA_AVX512,     /* AVX-512 F/BW/DQ/VL (+VNNI) + FMA + F16C */
} rlx_cpu_isa;

/* Detect the CPU and select the kernels (pthread_once; thread-safe). */
void rlx_cpu_kernels_init(void);
rlx_cpu_isa rlx_cpu_kernels_isa(void);
const char *rlx_cpu_isa_name(rlx_cpu_isa isa);
/* Best ISA this CPU can run. */
rlx_cpu_isa rlx_cpu_isa_best(void);
/* Select a path for tests and benchmarks; an ISA above rlx_cpu_isa_best() is
 * refused (RLX_ERR_UNSUPPORTED). Not thread-safe against running kernels. */
rlx_status rlx_cpu_kernels_set_isa(rlx_cpu_isa isa);

/* ---- rows: conversion, (de)quantization ----------------------------------- */

/* F16 / BF16 rows (round to nearest even, NaN stays NaN). */
void rlx_cpu_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
void rlx_cpu_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n);
void rlx_cpu_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
void rlx_cpu_f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n);
/* FP8 (F8_E4M3 / F8_E5M2) rows, exactly (NaN codes give NaN); the table of
 * the 256 values of t's codes (NULL for another dtype). */
void rlx_cpu_f8_to_f32_row(rlx_dtype t, const uint8_t *src, float *dst, int64_t n);
const float *rlx_cpu_f8_lut(rlx_dtype t);

/* True when rlx_cpu_dequantize_row() handles t: F32, F16, BF16, F8, Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K. */
bool rlx_cpu_can_dequantize(rlx_dtype t);
/* True when rlx_cpu_quantize_row() produces t: the list above minus Q2_K/Q3_K
 * and F8. */
bool rlx_cpu_can_quantize(rlx_dtype t);
/* n elements (a multiple of the block size) of src into dst (f32). */
rlx_status rlx_cpu_dequantize_row(rlx_dtype t, const void *src, float *dst, int64_t n);
/* n f32 elements into ceil(n/block) blocks of t. Q4_0/Q5_0/Q8_0/Q4_1/Q5_1 and
 * Q8_K follow ggml's reference rounding (absmax / min-max); the K-quants search
 * per-sub-block scale (and min) minimizing squared error. Deterministic. */
rlx_status rlx_cpu_quantize_row(rlx_dtype t, const float *src, void *dst, int64_t n);

/* ---- matmul with packed weights ------------------------------------------- */

/* Weight types rlx_cpu_matmul() consumes directly: F32, F16, BF16, F8_E4M3,
 * F8_E5M2, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K. */
bool rlx_cpu_matmul_supports(rlx_dtype wtype);

/* Scratch bytes rlx_cpu_matmul() needs for these shapes (the quantized copy of
 * x plus per-thread row buffers); 0 on bad arguments. */
size_t rlx_cpu_matmul_scratch_bytes(rlx_dtype wtype, int64_t M, int64_t K, int n_threads);

/* y[m*ldy + n] = sum_k x[m*ldx + k] * W[n][k]  for m < M, n < N.
 * W: N rows of K elements of type wtype, row n at (char *)w + n*w_row_bytes
 *    (w_row_bytes >= the packed row size; usually equal).
 * x: f32, row stride ldx >= K. y: f32, row stride ldy >= N.
 * Activations are quantized once per call (Q8_0 blocks for the 32-element
 * formats, Q8_K for the K-quants), then integer dot products run over the
 * packed blocks. Threads split N; for M > 1 each weight tile is reused across
 * all rows of x while it is in cache. F16/BF16 rows are converted on the fly;
 * F32 weights with M >= 16 go to rlx_cpu_sgemm().
 * scratch: NULL (allocated here) or at least rlx_cpu_matmul_scratch_bytes()
 * bytes, 64-byte aligned. */
rlx_status rlx_cpu_matmul(rlx_threadpool *pool, rlx_dtype wtype, const void *w, size_t w_row_bytes,
                          int64_t N, int64_t K, const float *x, int64_t ldx, int64_t M, float *y,
                          int64_t ldy, void *scratch, size_t scratch_bytes);

/* One row of W for a matrix-vector product of several weights (a group of
 * products of the same x, e.g. a layer's q, k and v): y[n] = x . W[n] for
 * n < N. */
typedef struct rlx_cpu_mv_seg {
    rlx_dtype wtype;
    const void *w;
    size_t w_row_bytes;
    int64_t N;
    float *y;
} rlx_cpu_mv_seg;

#define RLX_CPU_MV_MULTI_MAX 4

/* Scratch bytes rlx_cpu_matvec_multi() needs for n segments of K columns. */
size_t rlx_cpu_matvec_multi_scratch_bytes(int n, int64_t K);

/* The n <= RLX_CPU_MV_MULTI_MAX products x . W_s^T as one job on the pool:
 * x laid out once per kernel, every thread's shares of all the weights in
 * one run of tasks, one wait at the end (instead of one per product).
 * Each y equals what rlx_cpu_matmul() gives for that weight alone, bit for
 * bit. false (nothing written) when a weight type has no matrix-vector
 * kernel on this CPU: call rlx_cpu_matmul() per weight. scratch: at least
 * rlx_cpu_matvec_multi_scratch_bytes(), 64-byte aligned. */
bool rlx_cpu_matvec_multi(rlx_threadpool *pool, int n, const rlx_cpu_mv_seg *seg, const float *x,
                          int64_t K, void *scratch, size_t scratch_bytes);

/* ---- f32 GEMM --------------------------------------------------------------- */

typedef enum rlx_cpu_gemm_impl {
    RLX_CPU_GEMM_AUTO = 0, /* OpenBLAS, except large products on an AVX-512 CPU
                            * whose loaded OpenBLAS core is AVX2-only: ours */
    RLX_CPU_GEMM_BLAS,     /* cblas_sgemm (OpenBLAS) */
    RLX_CPU_GEMM_OWN,      /* packed register-blocked kernel (AVX-512 or C) */
} rlx_cpu_gemm_impl;

/* C[M x N] = alpha * op(A) * op(B) + beta * C, row-major.
 * op(A) is M x K: A is M x K (lda >= K) or, with trans_a, K x M (lda >= M).
 * op(B) is K x N: B is K x N (ldb >= N) or, with trans_b, N x K (ldb >= K).
 * beta == 0 ignores C's previous contents (NaNs included).
 * OpenBLAS threads itself (its thread count is set to the pool's size); our
 * kernel runs on the pool. */
void rlx_cpu_sgemm(rlx_threadpool *pool, rlx_cpu_gemm_impl impl, bool trans_a, bool trans_b,
                   int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* ---- normalization ---------------------------------------------------------- */

/* Per row r < n_rows of n_cols: y = x / sqrt(mean(x^2) + eps) * (w ? w : 1).
 * x and y may be the same array (in place). */
/* Rows of rms_norm(a + b) * w, the sum also stored in `sum` when that is
 * not NULL (f32 a + b rounded once, then normalized as rlx_cpu_rms_norm). */
void rlx_cpu_add_rms_norm(rlx_threadpool *pool, const float *a, int64_t lda, const float *b,
                          int64_t ldb, float *sum, int64_t lds, float *y, int64_t ldy,
                          int64_t n_rows, int64_t n_cols, const float *w, float eps);
void rlx_cpu_rms_norm(rlx_threadpool *pool, const float *x, int64_t ldx, float *y, int64_t ldy,
                      int64_t n_rows, int64_t n_cols, const float *w, float eps);
/* y = (x - mean) / sqrt(var + eps) * (w ? w : 1) + (b ? b : 0). In place ok. */
void rlx_cpu_layer_norm(rlx_threadpool *pool, const float *x, int64_t ldx, float *y, int64_t ldy,
                        int64_t n_rows, int64_t n_cols, const float *w, const float *b, float eps);
/* NCHW contiguous x, y [n][c][hw]: C channels in n_groups groups (C % n_groups
 * == 0); statistics over (C/n_groups) x HW; per-channel affine w, b (NULL =
 * 1 / 0). In place ok. */
void rlx_cpu_group_norm(rlx_threadpool *pool, const float *x, float *y, int64_t n, int64_t c,
                        int64_t hw, int64_t n_groups, const float *w, const float *b, float eps);

/* ---- softmax ---------------------------------------------------------------- */

/* Per row: s = x*scale (+ mask row); if softcap > 0, s = softcap*tanh(s/softcap)
 * (applied before the mask, as Gemma 2 caps logits); y = softmax(s).
 * mask: NULL or f32 rows with stride ld_mask (0 = one row for all); -INFINITY
 * entries exclude. A row with every entry excluded yields zeros. In place ok. */
void rlx_cpu_softmax(rlx_threadpool *pool, const float *x, int64_t ldx, float *y, int64_t ldy,
                     int64_t n_rows, int64_t n_cols, float scale, const float *mask,
                     int64_t ld_mask, float softcap);

/* ---- rotary position embedding ------------------------------------------ */

typedef enum rlx_cpu_rope_mode {
    RLX_CPU_ROPE_NORMAL = 0, /* pairs (2i, 2i+1): GPT-J / Llama in GGUF */
    RLX_CPU_ROPE_NEOX,       /* pairs (i, i + n_rot/2): NeoX / HF Llama, Qwen */
} rlx_cpu_rope_mode;

typedef struct rlx_cpu_rope_params {
    rlx_cpu_rope_mode mode;
    int n_rot;                 /* rotated dims (even, <= head_dim); the rest pass through */
    float freq_base;           /* theta, e.g. 10000 or 500000 */
    float freq_scale;          /* linear position scale (1 = none) */
    const float *freq_factors; /* NULL or n_rot/2 divisors of each pair's
                                * frequency (Llama-3 rope_freqs, LongRoPE) */
    float attn_factor;         /* multiplies cos and sin (YaRN mscale); 1 = none */
} rlx_cpu_rope_params;

rlx_cpu_rope_params rlx_cpu_rope_default_params(void);

/* x: n_tokens x n_heads x head_dim, token stride ld_tok and head stride
 * ld_head (elements). Angle for pair i of token t:
 *   pos[t] * freq_scale * freq_base^(-2i/n_rot) / (freq_factors ? ff[i] : 1).
 * In place (x == y allowed, same strides) or out of place with y's strides. */
void rlx_cpu_rope(rlx_threadpool *pool, const rlx_cpu_rope_params *p, const float *x,
                  int64_t ld_tok, int64_t ld_head, float *y, int64_t ldy_tok, int64_t ldy_head,
                  int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t *pos);

/* The cos and sin (times attn_factor) of every token's angles, as
 * rlx_cpu_rope takes them: token t's n_rot/2 cosines, then its n_rot/2
 * sines, at table + t * n_rot. The ropes of a model's q and k in every layer
 * turn the same positions by the same angles: one table serves them all
 * through rlx_cpu_rope_apply, which gives rlx_cpu_rope's results bit for bit. */
void rlx_cpu_rope_table(rlx_threadpool *pool, const rlx_cpu_rope_params *p, const int32_t *pos,
                        int64_t n_tokens, float *table);
void rlx_cpu_rope_apply(rlx_threadpool *pool, const rlx_cpu_rope_params *p, const float *table,
                        const float *x, int64_t ld_tok, int64_t ld_head, float *y, int64_t ldy_tok,
                        int64_t ldy_head, int64_t n_tokens, int64_t n_heads, int64_t head_dim);

/* ---- attention ------------------------------------------------------------ */

typedef enum rlx_cpu_attn_mask {
    RLX_CPU_ATTN_NONE = 0,
    RLX_CPU_ATTN_CAUSAL,  /* key j visible to query i iff j <= q_pos0 + i */
    RLX_CPU_ATTN_SLIDING, /* causal and j > q_pos0 + i - window */
    RLX_CPU_ATTN_BIAS,    /* additive f32 bias rows (may hold -INFINITY) */
} rlx_cpu_attn_mask;

typedef struct rlx_cpu_attn_params {
    int64_t n_q, n_kv;                 /* query tokens, key/value tokens */
    int n_heads, n_kv_heads, head_dim; /* n_heads % n_kv_heads == 0 */
    /* q: f32, element (t, h, d) at q[t*q_ld_tok + h*q_ld_head + d] */
    const float *q;
    int64_t q_ld_tok, q_ld_head;
    /* k, v: F32, F16 or Q8_0 (kv_type), element (t, h, d) at
     * [t*ld_tok + h*ld_head + d] counted in elements of kv_type: point them
     * at a KV cache. Q8_0: k and v point at a block boundary, element e is
     * entry e % 32 of block e / 32 (rows may start inside a block), decoded
     * per key tile. */
    rlx_dtype kv_type;
    const void *k;
    int64_t k_ld_tok, k_ld_head;
    const void *v;
    int64_t v_ld_tok, v_ld_head;
    /* out: f32, same indexing as q */
    float *out;
    int64_t o_ld_tok, o_ld_head;
    float scale;   /* usually 1/sqrt(head_dim) */
    float softcap; /* > 0: s = cap*tanh(s/cap) before masking */
    rlx_cpu_attn_mask mask;
    int64_t q_pos0; /* absolute position of query 0 among keys (n_kv - n_q
                     * for a decode/prefill step over a cache) */
    int64_t window; /* RLX_CPU_ATTN_SLIDING */
    /* RLX_CPU_ATTN_BIAS: bias[h*bias_ld_head + i*bias_ld_q + j]; bias_ld_head
     * may be 0 to share one matrix across heads */
    const float *bias;
    int64_t bias_ld_q, bias_ld_head;
    /* > 0: the bias is decomposed over a key grid of bias_grid_w columns
     * (n_kv a multiple of it): a bias row holds n_kv / w row terms, then w
     * column terms, and key j gets row[j / w] + row[n_kv / w + j % w] */
    int64_t bias_grid_w;
} rlx_cpu_attn_params;

/* out = softmax(scale * Q K^T (+ mask)) V, computed flash-style: key tiles
 * with an online softmax, never a full n_q x n_kv matrix. Query heads h use
 * KV head h / (n_heads / n_kv_heads). A query with no visible key gets zeros.
 * Threads split (head, query tile). scratch: NULL (allocated here) or
 * rlx_cpu_attention_scratch_bytes(). */
size_t rlx_cpu_attention_scratch_bytes(const rlx_cpu_attn_params *p, int n_threads);
rlx_status rlx_cpu_attention(rlx_threadpool *pool, const rlx_cpu_attn_params *p, void *scratch,
                             size_t scratch_bytes);

/* ---- convolution ------------------------------------------------------------ */

typedef struct rlx_cpu_conv2d_params {
    int64_t n, c_in, h_in, w_in; /* input NCHW, contiguous */
    int64_t c_out, kh, kw;       /* weight [c_out][c_in/groups][kh][kw]; for the
                                  * transposed conv [c_in][c_out/groups][kh][kw] */
    int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
    int64_t out_pad_h, out_pad_w; /* transposed conv only */
    bool wino;    /* a 3x3 conv of stride 1 may run as Winograd F(2x2, 3x3) (default) */
    bool has_act; /* the output passes through act (ReLU inside the kernel) */
    int act;      /* rlx_cpu_act_kind */
    /* working memory the caller keeps between calls (NULL: the kernel
     * allocates its own), rlx_cpu_conv2d_scratch_floats long, 64-byte aligned */
    float *scratch;
    size_t scratch_floats;
} rlx_cpu_conv2d_params;

rlx_cpu_conv2d_params rlx_cpu_conv2d_default_params(void);
/* Output height/width; <= 0 when the shapes are impossible. */
int64_t rlx_cpu_conv2d_out_h(const rlx_cpu_conv2d_params *p);
int64_t rlx_cpu_conv2d_out_w(const rlx_cpu_conv2d_params *p);
int64_t rlx_cpu_conv_transpose2d_out_h(const rlx_cpu_conv2d_params *p);
int64_t rlx_cpu_conv_transpose2d_out_w(const rlx_cpu_conv2d_params *p);
/* y [n][c_out][h_out][w_out] = conv(x, w) + bias (NULL = none); im2col + GEMM
 * per (image, group), or Winograd (p->wino). Allocates its column buffer. */
rlx_status rlx_cpu_conv2d(rlx_threadpool *pool, const rlx_cpu_conv2d_params *p, const float *x,
                          const float *w, const float *bias, float *y);
/* Floats of p->scratch that rlx_cpu_conv2d uses on a pool of n_threads
 * (0: it needs none). */
size_t rlx_cpu_conv2d_scratch_floats(const rlx_cpu_conv2d_params *p, int n_threads);
/* Transposed conv (gradient of conv2d w.r.t. its input): GEMM + col2im. */
rlx_status rlx_cpu_conv_transpose2d(rlx_threadpool *pool, const rlx_cpu_conv2d_params *p,
                                    const float *x, const float *w, const float *bias, float *y);

/* ---- activations (vector helpers, y may equal x) -------------------------- */

typedef enum rlx_cpu_act_kind {
    RLX_CPU_ACT_SILU = 0,   /* x * sigmoid(x) */
    RLX_CPU_ACT_GELU,       /* erf form: x/2 (1 + erf(x/sqrt2)) */
    RLX_CPU_ACT_GELU_TANH,  /* tanh approximation */
    RLX_CPU_ACT_GELU_QUICK, /* x * sigmoid(1.702 x) */
    RLX_CPU_ACT_RELU,
    RLX_CPU_ACT_SIGMOID,
    RLX_CPU_ACT_TANH,
    RLX_CPU_ACT_EXP,
} rlx_cpu_act_kind;

void rlx_cpu_act(rlx_cpu_act_kind act, const float *x, float *y, int64_t n);
/* Gated: y = act(g) * u (SwiGLU / GeGLU). */
void rlx_cpu_act_gated(rlx_cpu_act_kind act, const float *g, const float *u, float *y, int64_t n);
/* Threaded over contiguous chunks. */
void rlx_cpu_act_pool(rlx_threadpool *pool, rlx_cpu_act_kind act, const float *x, float *y,
                      int64_t n);

#ifdef __cplusplus
}
#endif
#endif
