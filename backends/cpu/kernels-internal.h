/* Private to backends/cpu: ggml block structs, the per-ISA function tables and
 * helpers shared by the scalar, AVX2 and AVX-512 translation units.
 *
 * Every ISA-specific file exports exactly one function or table named with its
 * ISA suffix; the dispatcher (dispatch.c) picks one set at init. Nothing in an
 * ISA file may be reached except through those tables, so the -mavx512* code
 * never runs on a CPU without it.
 */
#ifndef RLX_BACKENDS_CPU_KERNELS_INTERNAL_H
#define RLX_BACKENDS_CPU_KERNELS_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "backends/cpu/kernels.h"

/* ---- ggml block layouts (sizes checked below) ---- */

typedef struct {
    uint16_t d; /* f16 scale */
    uint8_t qs[16];
} blk_q4_0;
typedef struct {
    uint16_t d, m;
    uint8_t qs[16];
} blk_q4_1;
typedef struct {
    uint16_t d;
    uint8_t qh[4]; /* bit j: 5th bit of element j */
    uint8_t qs[16];
} blk_q5_0;
typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
} blk_q5_1;
typedef struct {
    uint16_t d;
    int8_t qs[32];
} blk_q8_0;
typedef struct {
    uint8_t scales[16]; /* low nibble scale, high nibble min, per 16 elements */
    uint8_t qs[64];
    uint16_t d, dmin;
} blk_q2_k;
typedef struct {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12]; /* 16 x 6-bit signed (bias 32) */
    uint16_t d;
} blk_q3_k;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12]; /* 8 x (6-bit scale, 6-bit min) */
    uint8_t qs[128];
} blk_q4_k;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
} blk_q5_k;
typedef struct {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
} blk_q6_k;
typedef struct {
    float d;
    int8_t qs[256];
    int16_t bsums[16]; /* sum of each 16 consecutive qs */
} blk_q8_k;

_Static_assert(sizeof(blk_q4_0) == 18, "q4_0");
_Static_assert(sizeof(blk_q4_1) == 20, "q4_1");
_Static_assert(sizeof(blk_q5_0) == 22, "q5_0");
_Static_assert(sizeof(blk_q5_1) == 24, "q5_1");
_Static_assert(sizeof(blk_q8_0) == 34, "q8_0");
_Static_assert(sizeof(blk_q2_k) == 84, "q2_k");
_Static_assert(sizeof(blk_q3_k) == 110, "q3_k");
_Static_assert(sizeof(blk_q4_k) == 144, "q4_k");
_Static_assert(sizeof(blk_q5_k) == 176, "q5_k");
_Static_assert(sizeof(blk_q6_k) == 210, "q6_k");
_Static_assert(sizeof(blk_q8_k) == 292, "q8_k");

/* 6-bit scale and min j (0..7) of a Q4_K/Q5_K block's packed scales[12]. */
static inline void rlx_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All 8 scales and mins of a Q4_K/Q5_K block at once, branch-free: the same
 * values as rlx_k4_scale_min(0..7) (bits 6-7 of bytes 0-7 are the high bits of
 * entries 4-7; bytes 8-11 hold their low nibbles). */
static inline void rlx_k4_unpack(const uint8_t *s, uint8_t sc[8], uint8_t mn[8])
{
    uint32_t a, b, c;
    memcpy(&a, s, 4);
    memcpy(&b, s + 4, 4);
    memcpy(&c, s + 8, 4);
    uint32_t sc_lo = a & 0x3f3f3f3fu, mn_lo = b & 0x3f3f3f3fu;
    uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
    uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
    memcpy(sc, &sc_lo, 4);
    memcpy(sc + 4, &sc_hi, 4);
    memcpy(mn, &mn_lo, 4);
    memcpy(mn + 4, &mn_hi, 4);
}

/* Scalar half conversion without a function call into dtype.c in hot loops
 * of the portable path (same rounding as rlx_f16_to_f32). */
static inline float rlx_h2f(uint16_t h)
{
    return rlx_f16_to_f32(h);
}

/* ---- per-ISA tables ---- */

/* s = dot(weight row w, activation row a) over n elements. The activation
 * format depends on the weight type: Q8_0 blocks (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0),
 * Q8_K blocks (Q4_K/Q5_K/Q6_K), f32 (F32/F16/BF16). */
typedef void (*rlx_vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);

/* C tile (mr <= MR rows, nr <= NR cols) = alpha * Ap.Bp + beta * C
 * (beta == 0: C is not read). Ap: kc x MR packed k-major; Bp: kc x NR. */
typedef void (*rlx_gemm_ukernel_fn)(int64_t kc, const float *Ap, const float *Bp, float *C,
                                    int64_t ldc, int mr, int nr, float alpha, float beta);

typedef void (*rlx_gemm_ukernel_rows_fn)(int64_t kc, const float *Ap, const float *const *Brows,
                                         float *C, int64_t ldc, int mr, int nr, float beta);

#define RLX_GEMM_MR 12
#define RLX_GEMM_NR 32

/* Attention work item: one head, query rows [q0, q0+nq). */
typedef void (*rlx_attn_tile_fn)(const rlx_cpu_attn_params *p, int64_t head, int64_t q0, int64_t nq,
                                 float *scratch);
/* Heads [head, head+nh) sharing one KV head, query rows [q0, q0+nq), with
 * nh * nq <= RLX_ATTN_BQ (decode with grouped-query attention). */
typedef void (*rlx_attn_group_fn)(const rlx_cpu_attn_params *p, int64_t head, int64_t nh,
                                  int64_t q0, int64_t nq, float *scratch);
/* floats of scratch one rlx_attn_tile_fn / rlx_attn_group_fn call needs */
#define RLX_ATTN_BQ 16
#define RLX_ATTN_BK 64
/* query tiles of 16 per AVX-512 prefill call (each K/V tile widened once
 * for all of them) */
#define RLX_ATTN_PF_TILES 4
static inline size_t rlx_attn_tile_scratch_floats(int64_t head_dim)
{
    /* Q and O tiles of up to two heads (the AVX-512 prefill pairs the heads
     * of a KV head) for each of its query tiles, scores of two heads, K and
     * V tiles */
    return (size_t)RLX_ATTN_PF_TILES * RLX_ATTN_BQ * (size_t)head_dim * 4 +
           (size_t)RLX_ATTN_BK * 2 * (size_t)head_dim + (size_t)RLX_ATTN_BQ * RLX_ATTN_BK * 2 +
           4 * RLX_ATTN_BQ + 64;
}

typedef struct rlx_vec_ops {
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    void (*f16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    void (*f32_to_f16)(const float *src, uint16_t *dst, int64_t n);
    void (*bf16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    void (*f32_to_bf16)(const float *src, uint16_t *dst, int64_t n);
    void (*quantize_q8_0)(const float *x, void *y, int64_t n);
    void (*quantize_q8_k)(const float *x, void *y, int64_t n);
    void (*rms_norm_row)(const float *x, float *y, int64_t n, const float *w, float eps);
    void (*layer_norm_row)(const float *x, float *y, int64_t n, const float *w, const float *b,
                           float eps);
    void (*softmax_row)(const float *x, float *y, int64_t n, float scale, const float *mask,
                        float softcap);
    void (*act)(rlx_cpu_act_kind act, const float *x, float *y, int64_t n);
    void (*act_gated)(rlx_cpu_act_kind act, const float *g, const float *u, float *y, int64_t n);
    rlx_attn_tile_fn attn_tile;
    rlx_attn_group_fn attn_group;
    rlx_gemm_ukernel_fn gemm_ukernel;
    rlx_gemm_ukernel_fn gemm_ukernel8; /* the same with A panels of 8 rows */
    /* B's rows where they lie (RLX_GEMM_NR readable floats each), alpha 1 */
    rlx_gemm_ukernel_rows_fn gemm_ukernel_rows, gemm_ukernel8_rows;
    rlx_vec_dot_fn dot_f32w, dot_f16w, dot_bf16w; /* weight rows vs f32 activations */
    /* d[t] = a <= t < b ? s[t] : 0 for t < n <= RLX_GEMM_NR (a run of a
     * conv's implicit im2col): s[t] is read only for t in [a, b), so s may
     * point before or past the row it reads */
    void (*pack_run)(float *d, const float *s, int64_t n, int64_t a, int64_t b);
    /* Winograd F(2x2, 3x3) over RLX_GEMM_NR tiles of a row (vec-ops.c says
     * the layouts): the input transform of one channel's 4 patch rows (only
     * columns [a, b) read, zeros elsewhere) into 16 rows vs floats apart,
     * and the output transform of 16 product rows ms floats apart into two
     * output rows, with a bias and optional ReLU */
    void (*wino_in)(const float *const *rows, int64_t a, int64_t b, float *V, int64_t vs);
    void (*wino_out)(const float *m, int64_t ms, float bias, int relu, float *y0, float *y1);
    /* o[i] = max of a[2i], a[2i+1], b[2i], b[2i+1] (2x2 max pool, stride 2) */
    void (*max_pool2_row)(const float *a, const float *b, float *o, int64_t n);
    /* o[i] = (1 - l) a[i] + l b[i] (a bilinear resize's rows) */
    void (*lerp_rows)(const float *a, const float *b, float l, float *o, int64_t n);
} rlx_vec_ops;

extern const rlx_vec_ops rlx_vec_ops_scalar;
extern const rlx_vec_ops rlx_vec_ops_avx2;
extern const rlx_vec_ops rlx_vec_ops_avx512;

/* ---- quantized GEMM for M > 1 (qgemm.c + qgemm-<isa>.c) ----
 * Activations are quantized once per call as for the dot products (Q8_0
 * blocks for Q4_0/Q8_0, Q8_K for the K-quants: the integer sums equal the
 * dot products' exactly) and stored split: int8 rows, float scales, and per
 * sub-block terms. A panel kernel repacks up to RLX_QG_NC weight rows into an
 * interleaved unsigned layout and runs every activation row over it. */
#define RLX_QG_NC 32 /* weight rows per panel */

typedef struct rlx_qg_act {
    const int8_t *q;    /* row m at q + m*ldq: K int8 */
    int64_t ldq;        /* bytes */
    const float *d;     /* row m at d + m*ldd: one scale per 32 (Q8_0 family) or 256 */
    int64_t ldd;        /* floats */
    const int32_t *ofs; /* row m at ofs + m*ldo, per sub-block: -offset * sum(q)
                         * (Q8_0: 128 per 32, Q4_0: 8 per 32, Q6_K: 32 per 16) */
    const float *msum;  /* Q4_K/Q5_K: row m at msum + m*ldo, sum(q) per 32 */
    int64_t ldo;        /* entries (K / 16) */
} rlx_qg_act;

/* y[m*ldy + j] = row j of w (j < n_rows <= RLX_QG_NC) . activation row m, for
 * m < M; panel: rlx_qg_panel_bytes(type, K) bytes of 64-aligned scratch. */
typedef void (*rlx_qgemm_panel_fn)(const void *w, size_t w_row_bytes, int n_rows, int64_t K,
                                   const rlx_qg_act *a, int64_t M, float *y, int64_t ldy,
                                   void *panel);

static inline size_t rlx_qg_panel_bytes(rlx_dtype t, int64_t K)
{
    /* per 32 elements: 32 columns x 32 bytes of quants, then per sub-block 32
     * float scales (and 32 float mins for Q4_K/Q5_K) */
    size_t per32 = 32 * 32 + 128;
    if (t == RLX_DTYPE_Q4_K || t == RLX_DTYPE_Q5_K)
        per32 += 128;
    if (t == RLX_DTYPE_Q6_K)
        per32 += 128; /* sub-blocks of 16 */
    return (size_t)(K / 32) * per32 + 64;
}

/* gemm.c: C (M x N, ldc) = A (M x K, lda) . B^T with B N rows of F16, BF16,
 * F8_E4M3 or F8_E5M2 (ldb elements apart), widened to f32 as B is packed,
 * through our own kernel; false on allocation failure or another dtype
 * (nothing written). */
bool rlx_cpu_sgemm_half_b(rlx_threadpool *pool, rlx_dtype bt, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t lda, const void *B, int64_t ldb, float *C,
                          int64_t ldc);

/* qgemm.c: M > 1 products through t->qgemm (true when it ran; false: the
 * type has no panel kernel on this ISA, nothing was written). */
struct rlx_cpu_table;
bool rlx_cpu_qgemm_available(const struct rlx_cpu_table *t, rlx_dtype wtype);
size_t rlx_cpu_qgemm_scratch_bytes(rlx_dtype wtype, int64_t M, int64_t K, int n_threads);
void rlx_cpu_qgemm(rlx_threadpool *pool, const struct rlx_cpu_table *t, rlx_dtype wtype,
                   const void *w, size_t w_row_bytes, int64_t N, int64_t K, const float *x,
                   int64_t ldx, int64_t M, float *y, int64_t ldy, void *scratch);

typedef struct rlx_cpu_table {
    rlx_cpu_isa isa;
    rlx_vec_dot_fn dot[RLX_DTYPE_COUNT];
    rlx_vec_ops vec;
    rlx_qgemm_panel_fn qgemm[RLX_DTYPE_COUNT]; /* NULL: per-row dots for M > 1 */
    /* n_q > 1 attention over F32/F16 K/V, no softcap (a bias is fine), head_dim % 16
     * == 0 (attn-<isa>.c); NULL: vec.attn_tile */
    /* nh = 1 or 2 heads of one KV head, nq <= RLX_ATTN_PF_TILES * RLX_ATTN_BQ */
    rlx_attn_group_fn attn_prefill;
    /* a few queries (nh * nq <= 4 rows of one KV head) over F32/F16 K/V, no
     * bias or softcap, head_dim % 16 == 0 and <= 256; NULL: vec.attn_group */
    rlx_attn_group_fn attn_decode;
} rlx_cpu_table;

/* The active table (set by rlx_cpu_kernels_init / set_isa). */
const rlx_cpu_table *rlx_cpu_table_get(void);

/* Fill `t->dot` for each ISA; the AVX2/AVX-512 fills start from the scalar one
 * and override what they accelerate. */
void rlx_cpu_fill_dots_scalar(rlx_cpu_table *t);
void rlx_cpu_fill_dots_avx2(rlx_cpu_table *t);
void rlx_cpu_fill_dots_avx512(rlx_cpu_table *t);
/* qgemm-avx512.c: the M > 1 panel kernels (AVX-512 VNNI). */
void rlx_cpu_fill_qgemm_avx512(rlx_cpu_table *t);
/* attn-avx512.c: the prompt-processing attention tile. */
void rlx_cpu_fill_attn_avx512(rlx_cpu_table *t);

#endif
