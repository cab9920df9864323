/* Quantized GEMM for M > 1 (prompt processing): y = x . W^T with W in Q8_0,
 * Q4_0, Q4_K, Q5_K or Q6_K blocks.
 *
 * 1. Every row of x is quantized once, exactly as the dot products quantize
 *    it (Q8_0 blocks for Q8_0/Q4_0, Q8_K for the K-quants), and stored split
 *    for the kernel: int8 rows, float scales, and per sub-block the term that
 *    carries the weights' offset (-offset * sum(q)) or, for Q4_K/Q5_K, sum(q)
 *    for the min term.
 * 2. W is cut into panels of RLX_QG_NC rows; a task takes one panel, repacks
 *    it into the thread's scratch (interleaved unsigned quants + float
 *    scales) and runs every row of x over it with the ISA's register-blocked
 *    kernel (t->qgemm, qgemm-<isa>.c). The panel stays in L1/L2 while x
 *    streams, so W is read once per call and x once per panel.
 * Each output element is computed by one task in a fixed order, so results do
 * not depend on the thread count. */
#include <stdlib.h>

#include "backends/cpu/kernels-internal.h"

static size_t align64(size_t v)
{
    return (v + 63) & ~(size_t)63;
}

static bool k_type(rlx_dtype t)
{
    return t == RLX_DTYPE_Q4_K || t == RLX_DTYPE_Q5_K || t == RLX_DTYPE_Q6_K;
}

static bool qgemm_type(rlx_dtype t)
{
    return t == RLX_DTYPE_Q8_0 || t == RLX_DTYPE_Q4_0 || k_type(t);
}

bool rlx_cpu_qgemm_available(const rlx_cpu_table *t, rlx_dtype wtype)
{
    return wtype >= 0 && wtype < RLX_DTYPE_COUNT && qgemm_type(wtype) && t->qgemm[wtype];
}

/* per activation row: quants, scales, offsets/sums */
static size_t q_row(int64_t K)
{
    return align64((size_t)K);
}
static size_t d_row(int64_t K)
{
    return (size_t)(K / 32) * sizeof(float);
}
static size_t o_row(int64_t K)
{
    return (size_t)(K / 16) * sizeof(int32_t);
}
/* one row quantized in the dot products' block format */
static size_t tmp_row(rlx_dtype t, int64_t K)
{
    return align64(k_type(t) ? (size_t)(K / 256) * sizeof(blk_q8_k)
                             : (size_t)(K / 32) * sizeof(blk_q8_0));
}

size_t rlx_cpu_qgemm_scratch_bytes(rlx_dtype wtype, int64_t M, int64_t K, int n_threads)
{
    if (!qgemm_type(wtype) || M < 1 || K <= 0 || n_threads < 1)
        return 0;
    size_t m = (size_t)M;
    size_t bytes = align64(q_row(K) * m) + align64(d_row(K) * m) + 2 * align64(o_row(K) * m);
    bytes += (size_t)n_threads * (tmp_row(wtype, K) + align64(rlx_qg_panel_bytes(wtype, K)));
    return bytes + 64;
}

typedef struct {
    const rlx_cpu_table *t;
    rlx_dtype wtype;
    const float *x;
    int64_t ldx, K;
    int8_t *q;
    float *d;
    int32_t *ofs;
    float *msum;
    char *tmp; /* per thread */
    size_t tmp_stride;
} act_ctx;

static void act_task(void *vc, int64_t m, int thread)
{
    const act_ctx *c = vc;
    const int64_t K = c->K;
    void *tmp = c->tmp + (size_t)thread * c->tmp_stride;
    int8_t *q = c->q + (size_t)m * q_row(K);
    float *d = c->d + m * (K / 32);
    int32_t *o = c->ofs + m * (K / 16);
    float *ms = c->msum + m * (K / 16);
    if (!k_type(c->wtype)) {
        c->t->vec.quantize_q8_0(c->x + m * c->ldx, tmp, K);
        const blk_q8_0 *b = tmp;
        const int off = c->wtype == RLX_DTYPE_Q8_0 ? 128 : 8;
        for (int64_t i = 0; i < K / 32; i++) {
            memcpy(q + 32 * i, b[i].qs, 32);
            d[i] = rlx_f16_to_f32(b[i].d);
            int s = 0;
            for (int j = 0; j < 32; j++)
                s += b[i].qs[j];
            o[i] = -off * s;
        }
        return;
    }
    c->t->vec.quantize_q8_k(c->x + m * c->ldx, tmp, K);
    const blk_q8_k *b = tmp;
    for (int64_t i = 0; i < K / 256; i++) {
        memcpy(q + 256 * i, b[i].qs, 256);
        d[i] = b[i].d;
        if (c->wtype == RLX_DTYPE_Q6_K) {
            for (int j = 0; j < 16; j++)
                o[16 * i + j] = -32 * b[i].bsums[j];
        } else {
            for (int j = 0; j < 8; j++)
                ms[8 * i + j] = (float)(b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
        }
    }
}

typedef struct {
    rlx_qgemm_panel_fn fn;
    const char *w;
    size_t rb;
    int64_t N, K, M;
    rlx_qg_act act;
    float *y;
    int64_t ldy;
    char *panels;
    size_t panel_stride;
} panel_ctx;

static void panel_task(void *vc, int64_t p, int thread)
{
    const panel_ctx *c = vc;
    int64_t n0 = p * RLX_QG_NC;
    int rows = (int)(c->N - n0 < RLX_QG_NC ? c->N - n0 : RLX_QG_NC);
    c->fn(c->w + (size_t)n0 * c->rb, c->rb, rows, c->K, &c->act, c->M, c->y + n0, c->ldy,
          c->panels + (size_t)thread * c->panel_stride);
}

void rlx_cpu_qgemm(rlx_threadpool *pool, const rlx_cpu_table *t, rlx_dtype wtype, const void *w,
                   size_t w_row_bytes, int64_t N, int64_t K, const float *x, int64_t ldx, int64_t M,
                   float *y, int64_t ldy, void *scratch)
{
    const int nth = rlx_threadpool_size(pool);
    const size_t m = (size_t)M;
    char *sp = (char *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    act_ctx a = {.t = t, .wtype = wtype, .x = x, .ldx = ldx, .K = K};
    a.q = (int8_t *)sp;
    sp += align64(q_row(K) * m);
    a.d = (float *)(void *)sp;
    sp += align64(d_row(K) * m);
    a.ofs = (int32_t *)(void *)sp;
    sp += align64(o_row(K) * m);
    a.msum = (float *)(void *)sp;
    sp += align64(o_row(K) * m);
    a.tmp = sp;
    a.tmp_stride = tmp_row(wtype, K);
    sp += (size_t)nth * a.tmp_stride;
    rlx_parallel_for(pool, M, act_task, &a);

    panel_ctx c = {
        .fn = t->qgemm[wtype],
        .w = w,
        .rb = w_row_bytes,
        .N = N,
        .K = K,
        .M = M,
        .act =
            {
                .q = a.q,
                .ldq = (int64_t)q_row(K),
                .d = a.d,
                .ldd = K / 32,
                .ofs = a.ofs,
                .msum = a.msum,
                .ldo = K / 16,
            },
        .y = y,
        .ldy = ldy,
        .panels = sp,
        .panel_stride = align64(rlx_qg_panel_bytes(wtype, K)),
    };
    rlx_parallel_for(pool, (N + RLX_QG_NC - 1) / RLX_QG_NC, panel_task, &c);
}
