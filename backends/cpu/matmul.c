/* y = x . W^T over packed weight rows: quantize x once, then each task runs
 * integer dot products over a contiguous range of W's rows. For M > 1:
 * Q8_0/Q4_0/Q4_K/Q5_K/Q6_K go to the quantized GEMM (qgemm.c) and F16/BF16/
 * FP8 to our f32 GEMM (widened while packing) where the ISA has them; otherwise a
 * task walks its rows in small tiles and sweeps every row of x over a tile
 * while the tile is hot in L1/L2, so weights stream from memory once per
 * call. */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/cpu/gemv.h"
#include "backends/cpu/kernels-internal.h"

/* Rows of W processed together for M > 1 (about 40-150 KB of weights). */
#define TILE_ROWS 16

typedef enum { ACT_F32, ACT_Q8_0, ACT_Q8_K } act_kind;

static act_kind act_kind_for(rlx_dtype t)
{
    switch (t) {
    case RLX_DTYPE_Q4_0:
    case RLX_DTYPE_Q4_1:
    case RLX_DTYPE_Q5_0:
    case RLX_DTYPE_Q5_1:
    case RLX_DTYPE_Q8_0:
        return ACT_Q8_0;
    case RLX_DTYPE_Q4_K:
    case RLX_DTYPE_Q5_K:
    case RLX_DTYPE_Q6_K:
        return ACT_Q8_K;
    default:
        return ACT_F32;
    }
}

bool rlx_cpu_matmul_supports(rlx_dtype t)
{
    switch (t) {
    case RLX_DTYPE_F32:
    case RLX_DTYPE_F16:
    case RLX_DTYPE_BF16:
    case RLX_DTYPE_F8_E4M3:
    case RLX_DTYPE_F8_E5M2:
    case RLX_DTYPE_Q4_0:
    case RLX_DTYPE_Q4_1:
    case RLX_DTYPE_Q5_0:
    case RLX_DTYPE_Q5_1:
    case RLX_DTYPE_Q8_0:
    case RLX_DTYPE_Q4_K:
    case RLX_DTYPE_Q5_K:
    case RLX_DTYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

/* plain weights widened to f32 tiles for several rows of x (or packed into
 * our GEMM's panels) */
static bool widened(rlx_dtype t)
{
    return t == RLX_DTYPE_F16 || t == RLX_DTYPE_BF16 || t == RLX_DTYPE_F8_E4M3 ||
           t == RLX_DTYPE_F8_E5M2;
}

static size_t align64(size_t v)
{
    return (v + 63) & ~(size_t)63;
}

static size_t act_row_bytes(act_kind k, int64_t K)
{
    switch (k) {
    case ACT_Q8_0:
        return (size_t)(K / 32) * sizeof(blk_q8_0);
    case ACT_Q8_K:
        return (size_t)(K / 256) * sizeof(blk_q8_k);
    default:
        return 0;
    }
}

size_t rlx_cpu_matmul_scratch_bytes(rlx_dtype wtype, int64_t M, int64_t K, int n_threads)
{
    if (!rlx_cpu_matmul_supports(wtype) || M < 0 || K <= 0 || n_threads < 1)
        return 0;
    act_kind k = act_kind_for(wtype);
    size_t bytes = align64(act_row_bytes(k, K) * (size_t)M);
    if (M == 1 && k != ACT_F32) /* or the matrix-vector kernel's own layout */
        bytes = align64(bytes > RLX_GEMV_ACT_BYTES_MAX(K) ? bytes : RLX_GEMV_ACT_BYTES_MAX(K));
    if (widened(wtype) && M > 1)
        bytes += (size_t)n_threads * align64((size_t)TILE_ROWS * (size_t)K * sizeof(float));
    bytes += 64;
    if (M > 1) { /* the quantized GEMM (qgemm.c), whichever ISA runs */
        size_t qg = rlx_cpu_qgemm_scratch_bytes(wtype, M, K, n_threads);
        bytes = qg > bytes ? qg : bytes;
    }
    return bytes;
}

/* The activation layout of a matrix-vector product is written by the first
 * task to run, not before the job is published: in practice the caller
 * takes it right after waking the pool. A task that finds it still being
 * written first asks for the first lines of its four weight streams, then
 * waits. The wake-up of the other threads, the layout (about 1 us at K =
 * 3072) and the first DRAM reads of every thread then overlap; done before
 * publishing, they came one after the other, about a tenth of a 1.8 MB
 * product. */
typedef struct {
    atomic_int state; /* 0: not started, 1: being written, 2: written */
} mv_layout_state;

typedef void (*mv_layout_fn)(void *ctx);

static void mv_layout_wait(mv_layout_state *l, mv_layout_fn fn, void *ctx, const char *w, size_t rb,
                           int64_t q, int64_t q0, int64_t q1)
{
    if (atomic_load_explicit(&l->state, memory_order_acquire) == 2)
        return;
    int expect = 0;
    if (atomic_compare_exchange_strong_explicit(&l->state, &expect, 1, memory_order_acq_rel,
                                                memory_order_acquire)) {
        fn(ctx);
        atomic_store_explicit(&l->state, 2, memory_order_release);
        return;
    }
    /* what the kernel's first step asks for (RLX_GEMV_PF_AHEAD bytes of
     * each of the slice's four streams), while the layout is written */
    size_t len = (size_t)(q1 - q0) * rb;
    len = len < RLX_GEMV_PF_AHEAD ? len : RLX_GEMV_PF_AHEAD;
    for (int st = 0; st < 4; st++) {
        const char *p = w + ((size_t)st * (size_t)q + (size_t)q0) * rb;
        for (size_t o = 0; o < len; o += 64)
            __builtin_prefetch(p + o, 0, 3);
    }
    /* about a microsecond; yielding after a while lets the writer run if
     * the machine has fewer cores free than the pool has threads */
    for (int spins = 0; atomic_load_explicit(&l->state, memory_order_acquire) != 2; spins++) {
        if (spins < 4096)
            rlx_cpu_relax();
        else
            sched_yield();
    }
}

/* fewest rows of a matrix-vector task, tasks per thread (see rlx_cpu_matmul) */
#define MV_MIN_ROWS 8
#define MV_TASKS    6

typedef struct {
    const rlx_cpu_table *t;
    const rlx_gemv_kernel *gv; /* M == 1 with a matrix-vector kernel */
    rlx_vec_dot_fn dot;
    rlx_dtype wtype;
    const char *w;
    size_t w_row_bytes;
    int64_t N, K, M;
    const char *act;
    size_t act_stride; /* bytes between activation rows */
    float *y;
    int64_t ldy;
    int64_t rows_per_task;
    float *conv; /* per-thread f32 tiles (F16/BF16/FP8 with M > 1) */
    size_t conv_stride;
    /* M == 1: MV_TASKS tasks per thread's share of the rows (see
     * rlx_cpu_matmul); 0 for M > 1 */
    int nth;
    /* M == 1 with a kernel that lays x out: x, laid out into act by the
     * first task to run (see mv_layout_wait) */
    const float *x;
    mv_layout_state lay;
} mm_ctx;

/* slice k < MV_TASKS of len rows: two long runs of 3/8 each, then four
 * short ones of the rest (none shorter than MV_MIN_ROWS; the last ones may
 * be empty) */
static void mv_slice(int64_t len, int64_t k, int64_t *r0, int64_t *r1)
{
    int64_t big = (3 * len + 7) / 8;
    big = big < MV_MIN_ROWS ? MV_MIN_ROWS : big;
    int64_t rest = len - 2 * big > 0 ? len - 2 * big : 0;
    int64_t small = (rest + 3) / 4;
    small = small < MV_MIN_ROWS ? MV_MIN_ROWS : small;
    int64_t a = k < 2 ? k * big : 2 * big + (k - 2) * small;
    int64_t b = k < 2 ? a + big : a + small;
    *r0 = a < len ? a : len;
    *r1 = b < len ? b : len;
}

/* Share r's slice k of a matrix-vector product: four streams, one per
 * quarter of the share (see rlx_cpu_matmul's M == 1 case) */
static void mv_share_slice(const rlx_gemv_kernel *gv, const char *w, size_t w_row_bytes, int64_t N,
                           int64_t K, const char *act, float *y, int nth, int64_t r, int64_t k,
                           mv_layout_state *lay, mv_layout_fn lay_fn, void *lay_ctx)
{
    int64_t s0 = N * r / nth, s1 = N * (r + 1) / nth;
    int64_t q = (s1 - s0) / 4, q0, q1;
    mv_slice(q, k, &q0, &q1);
    w += (size_t)s0 * w_row_bytes;
    if (lay)
        mv_layout_wait(lay, lay_fn, lay_ctx, w, w_row_bytes, q, q0, q1);
    if (q0 < q1)
        gv->streams(K, w, w_row_bytes, q, q0, q1, act, y + s0);
    if (k == MV_TASKS - 1 && s0 + 4 * q < s1)
        gv->rows(K, w + (size_t)(4 * q) * w_row_bytes, w_row_bytes, s1 - s0 - 4 * q, act,
                 y + s0 + 4 * q);
}

static void mm_layout(void *vc)
{
    mm_ctx *c = vc;
    c->gv->prep(c->x, (void *)c->act, c->K);
}

static void mm_task(void *vc, int64_t task, int thread)
{
    mm_ctx *c = vc;
    int64_t n0 = task * c->rows_per_task;
    int64_t n1 = n0 + c->rows_per_task < c->N ? n0 + c->rows_per_task : c->N;
    if (c->nth && c->gv) {
        /* Share r of the rows is read as four streams, one per quarter (see
         * gemv.h); task k takes the next slice of all four: two long ones
         * of 3/8 of a quarter, then four short ones of the rest, which the
         * pool lets an idle thread take from the back, keeping the finishing
         * times close. Slices follow each other in each stream, so the
         * hardware prefetchers keep four long sequential streams per
         * thread. The last task also does the share's len % 4 rows. */
        mv_share_slice(c->gv, c->w, c->w_row_bytes, c->N, c->K, c->act, c->y, c->nth,
                       task / MV_TASKS, task % MV_TASKS, c->x ? &c->lay : NULL, mm_layout, c);
        return;
    }
    if (c->nth) {
        /* share r of the rows (the dot-product path): the same sizes of
         * task over the share's rows, in one run */
        int64_t r = task / MV_TASKS, k = task % MV_TASKS;
        int64_t s0 = c->N * r / c->nth, s1 = c->N * (r + 1) / c->nth;
        mv_slice(s1 - s0, k, &n0, &n1);
        n0 += s0;
        n1 += s0;
        if (n0 >= n1)
            return;
    }
    if (c->M == 1) {
        for (int64_t n = n0; n < n1; n++)
            c->dot(c->K, &c->y[n], c->w + (size_t)n * c->w_row_bytes, c->act);
        return;
    }
    for (int64_t nt = n0; nt < n1; nt += TILE_ROWS) {
        int64_t ne = nt + TILE_ROWS < n1 ? nt + TILE_ROWS : n1;
        if (c->conv) {
            /* half / FP8 weights: widen the tile once, reuse it for every row of x */
            float *tile = (float *)(void *)((char *)c->conv + (size_t)thread * c->conv_stride);
            for (int64_t n = nt; n < ne; n++) {
                const void *src = c->w + (size_t)n * c->w_row_bytes;
                float *dst = tile + (n - nt) * c->K;
                if (c->wtype == RLX_DTYPE_F16)
                    c->t->vec.f16_to_f32(src, dst, c->K);
                else if (c->wtype == RLX_DTYPE_BF16)
                    c->t->vec.bf16_to_f32(src, dst, c->K);
                else
                    rlx_cpu_f8_to_f32_row(c->wtype, src, dst, c->K);
            }
            for (int64_t m = 0; m < c->M; m++) {
                const float *a = (const float *)(const void *)(c->act + (size_t)m * c->act_stride);
                float *yr = c->y + m * c->ldy;
                for (int64_t n = nt; n < ne; n++)
                    yr[n] = c->t->vec.dot_f32(tile + (n - nt) * c->K, a, c->K);
            }
            continue;
        }
        for (int64_t m = 0; m < c->M; m++) {
            const char *a = c->act + (size_t)m * c->act_stride;
            float *yr = c->y + m * c->ldy;
            for (int64_t n = nt; n < ne; n++)
                c->dot(c->K, &yr[n], c->w + (size_t)n * c->w_row_bytes, a);
        }
    }
}

typedef struct {
    const rlx_cpu_mv_seg *seg;
    const rlx_gemv_kernel *gv[RLX_CPU_MV_MULTI_MAX];
    const char *act[RLX_CPU_MV_MULTI_MAX];
    bool lays_out[RLX_CPU_MV_MULTI_MAX]; /* segment s writes act[s] */
    int n, nth;
    int64_t K;
    const float *x;
    mv_layout_state lay;
} mv_multi_ctx;

static void mv_multi_layout(void *vc)
{
    mv_multi_ctx *c = vc;
    for (int s = 0; s < c->n; s++)
        if (c->lays_out[s])
            c->gv[s]->prep(c->x, (void *)c->act[s], c->K);
}

/* Task order: thread share r of every weight in turn, so the pool's
 * contiguous range for thread r is its share of all of them (and what an
 * idle thread steals from the back is the last weight's short slices). */
static void mv_multi_task(void *vc, int64_t task, int thread)
{
    mv_multi_ctx *c = vc;
    int64_t per = (int64_t)c->n * MV_TASKS;
    int64_t r = task / per, s = task % per / MV_TASKS, k = task % MV_TASKS;
    const rlx_cpu_mv_seg *g = &c->seg[s];
    mv_share_slice(c->gv[s], g->w, g->w_row_bytes, g->N, c->K, c->act[s], g->y, c->nth, r, k,
                   &c->lay, mv_multi_layout, c);
}

size_t rlx_cpu_matvec_multi_scratch_bytes(int n, int64_t K)
{
    return (size_t)(n > 0 ? n : 0) * align64(RLX_GEMV_ACT_BYTES_MAX(K)) + 64;
}

bool rlx_cpu_matvec_multi(rlx_threadpool *pool, int n, const rlx_cpu_mv_seg *seg, const float *x,
                          int64_t K, void *scratch, size_t scratch_bytes)
{
    const rlx_cpu_table *t = rlx_cpu_table_get();
    if (n < 1 || n > RLX_CPU_MV_MULTI_MAX || K <= 0 || !x || t->isa != RLX_CPU_ISA_AVX512 ||
        !scratch || scratch_bytes < rlx_cpu_matvec_multi_scratch_bytes(n, K))
        return false;
    mv_multi_ctx c = {.seg = seg, .n = n, .nth = rlx_threadpool_size(pool), .K = K, .x = x};
    atomic_init(&c.lay.state, 0);
    for (int s = 0; s < n; s++) {
        uint64_t packed;
        if (!seg[s].w || !seg[s].y || seg[s].N < 1 ||
            rlx_dtype_row_bytes(seg[s].wtype, (uint64_t)K, &packed) != RLX_OK ||
            seg[s].w_row_bytes < packed)
            return false;
        c.gv[s] = rlx_cpu_gemv_avx512(seg[s].wtype);
        if (!c.gv[s])
            return false;
    }
    /* x laid out once per kernel (weights of one type share it) */
    char *sp = (char *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    for (int s = 0; s < n; s++) {
        int same = -1;
        for (int p = 0; p < s && same < 0; p++)
            if (c.gv[p] == c.gv[s])
                same = p;
        if (same >= 0) {
            c.act[s] = c.act[same];
        } else if (!c.gv[s]->prep) {
            c.act[s] = (const char *)x;
        } else { /* written by the first task (mv_layout_wait) */
            c.lays_out[s] = true;
            c.act[s] = sp;
            sp += align64(RLX_GEMV_ACT_BYTES_MAX(K));
        }
    }
    rlx_parallel_for(pool, (int64_t)c.nth * n * MV_TASKS, mv_multi_task, &c);
    return true;
}

typedef struct {
    void (*quant)(const float *x, void *y, int64_t n);
    const float *x;
    int64_t ldx, K;
    char *dst;
    size_t dst_stride;
} q_ctx;

static void quant_task(void *vc, int64_t m, int thread)
{
    const q_ctx *c = vc;
    c->quant(c->x + m * c->ldx, c->dst + (size_t)m * c->dst_stride, c->K);
}

rlx_status rlx_cpu_matmul(rlx_threadpool *pool, rlx_dtype wtype, const void *w, size_t w_row_bytes,
                          int64_t N, int64_t K, const float *x, int64_t ldx, int64_t M, float *y,
                          int64_t ldy, void *scratch, size_t scratch_bytes)
{
    if (!rlx_cpu_matmul_supports(wtype) || N < 0 || M < 0 || K <= 0 || ldx < K || ldy < N)
        return RLX_ERR_INVALID_ARG;
    if (N == 0 || M == 0)
        return RLX_OK;
    if (!w || !x || !y)
        return RLX_ERR_INVALID_ARG;
    uint64_t packed;
    if (rlx_dtype_row_bytes(wtype, (uint64_t)K, &packed) != RLX_OK || w_row_bytes < packed)
        return RLX_ERR_INVALID_ARG;
    const rlx_cpu_table *t = rlx_cpu_table_get();
    const int nth = rlx_threadpool_size(pool);

    if (wtype == RLX_DTYPE_F32 && M >= 16 && w_row_bytes % sizeof(float) == 0) {
        rlx_cpu_sgemm(pool, RLX_CPU_GEMM_AUTO, false, true, M, N, K, 1.0f, x, ldx, w,
                      (int64_t)(w_row_bytes / sizeof(float)), 0.0f, y, ldy);
        return RLX_OK;
    }

    /* half or FP8 weights, several rows: widened panel by panel into our f32 GEMM */
    size_t wes = rlx_dtype_get(wtype)->type_size;
    if (M > 1 && widened(wtype) && t->isa == RLX_CPU_ISA_AVX512 && w_row_bytes % wes == 0 &&
        rlx_cpu_sgemm_half_b(pool, wtype, M, N, K, x, ldx, w, (int64_t)(w_row_bytes / wes), y, ldy))
        return RLX_OK;

    size_t need = rlx_cpu_matmul_scratch_bytes(wtype, M, K, nth);
    void *owned = NULL;
    if (!scratch || scratch_bytes < need) {
        if (scratch)
            return RLX_ERR_INVALID_ARG;
        owned = aligned_alloc(64, align64(need));
        if (!owned)
            return RLX_ERR_NO_MEMORY;
        scratch = owned;
    }
    if (M > 1 && rlx_cpu_qgemm_available(t, wtype)) {
        rlx_cpu_qgemm(pool, t, wtype, w, w_row_bytes, N, K, x, ldx, M, y, ldy, scratch);
        free(owned);
        return RLX_OK;
    }

    mm_ctx c = {
        .t = t,
        .dot = t->dot[wtype],
        .wtype = wtype,
        .w = w,
        .w_row_bytes = w_row_bytes,
        .N = N,
        .K = K,
        .M = M,
        .y = y,
        .ldy = ldy,
    };
    act_kind ak = act_kind_for(wtype);
    char *sp = scratch;
    if (M == 1 && t->isa == RLX_CPU_ISA_AVX512)
        c.gv = rlx_cpu_gemv_avx512(wtype);
    if (c.gv && !c.gv->prep) {
        c.act = (const char *)x;
    } else if (c.gv) { /* the scratch's 64 spare bytes align the layout */
        c.act = (const char *)(((uintptr_t)sp + 63) & ~(uintptr_t)63);
        c.x = x; /* written by the first task (mv_layout_wait) */
        atomic_init(&c.lay.state, 0);
    } else if (ak == ACT_F32) {
        c.act = (const char *)x;
        c.act_stride = (size_t)ldx * sizeof(float);
    } else {
        q_ctx q = {
            .quant = ak == ACT_Q8_0 ? t->vec.quantize_q8_0 : t->vec.quantize_q8_k,
            .x = x,
            .ldx = ldx,
            .K = K,
            .dst = sp,
            .dst_stride = act_row_bytes(ak, K),
        };
        rlx_parallel_for(M >= 4 ? pool : NULL, M, quant_task, &q);
        c.act = sp;
        c.act_stride = q.dst_stride;
        sp += align64(q.dst_stride * (size_t)M);
    }
    if (widened(wtype) && M > 1) {
        c.conv = (float *)(void *)sp;
        c.conv_stride = align64((size_t)TILE_ROWS * (size_t)K * sizeof(float));
    }

    if (M == 1) {
        /* Each thread's share of the rows in two sizes of task: three
         * quarters in two long runs (long streams for the prefetchers), the
         * rest in four short ones, which a thread that finishes its share
         * first takes over from the back, keeping the finishing times close
         * (with equal tasks the last one left a thread idle for a quarter of
         * its share on a decode step's 1-3 MB products) */
        c.nth = nth;
        rlx_parallel_for(pool, (int64_t)nth * MV_TASKS, mm_task, &c);
        free(owned);
        return RLX_OK;
    }

    /* M > 1 (per-row dots, no quantized GEMM for this type or ISA): ~4
     * tasks per thread of whole tiles, rows contiguous per task */
    int64_t tasks = (int64_t)nth * 4;
    int64_t rpt = (N + tasks - 1) / tasks;
    if (rpt < TILE_ROWS)
        rpt = TILE_ROWS;
    rpt = (rpt + TILE_ROWS - 1) / TILE_ROWS * TILE_ROWS;
    c.rows_per_task = rpt;
    rlx_parallel_for(pool, (N + rpt - 1) / rpt, mm_task, &c);
    free(owned);
    return RLX_OK;
}
