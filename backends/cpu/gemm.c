/* f32 GEMM: OpenBLAS, or our packed kernel (Goto-style: B packed per
 * KC x NC block into NR-wide panels, A packed into MR-tall panels, a
 * register-blocked MR x NR micro-kernel), threaded over a 2-D grid of
 * (MC rows x NB columns) tiles of C. */
#include <cblas.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RLX_GEMM_X86 1
#else
#define RLX_GEMM_X86 0
#endif
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/kernels-internal.h"

#define MR RLX_GEMM_MR
#define NR RLX_GEMM_NR
#define KC 256  /* KC x NR panel of B = 32 KB: stays in L1 while A streams */
#define MC 96   /* MC x KC block of A = 96 KB: stays in L2 */
#define NB 256  /* columns of C per task */
#define NC 4096 /* KC x NC packed B = 4 MB: in L3 */

/* Does the OpenBLAS in use run AVX-512 kernels? (DYNAMIC_ARCH builds pick a
 * core at load time; openblas_get_corename() names it.) */
static bool blas_has_avx512(void)
{
    static int cached = -1; /* a racing first call computes the same value */
    if (cached < 0) {
        const char *core = openblas_get_corename();
        cached = core && (strstr(core, "SkylakeX") || strstr(core, "skylakex") ||
                          strstr(core, "Cooperlake") || strstr(core, "cooperlake") ||
                          strstr(core, "SapphireRapids") || strstr(core, "sapphirerapids"));
    }
    return cached == 1;
}

/* OpenBLAS runs single-threaded, in whichever thread calls it, and a product
 * is split over our pool: OpenBLAS's own threads would spin (sched_yield)
 * beside our workers between calls, and a BLAS call made from inside a pool
 * task would start yet more of them. */
static pthread_once_t g_blas_once = PTHREAD_ONCE_INIT;

static void blas_single_thread(void)
{
    openblas_set_num_threads(1);
}

typedef struct {
    bool ta, tb, by_rows;
    int64_t M, N, K, lda, ldb, ldc, chunk;
    float alpha, beta;
    const float *A, *B;
    float *C;
} blas_ctx;

static void blas_task(void *vc, int64_t task, int thread)
{
    (void)thread;
    const blas_ctx *c = vc;
    int64_t lo = task * c->chunk, len = c->by_rows ? c->M : c->N;
    int64_t n = len - lo < c->chunk ? len - lo : c->chunk;
    const float *A = c->A, *B = c->B;
    float *C = c->C;
    int64_t M = c->M, N = c->N;
    if (c->by_rows) {
        A += c->ta ? lo : lo * c->lda;
        C += lo * c->ldc;
        M = n;
    } else {
        B += c->tb ? lo * c->ldb : lo;
        C += lo;
        N = n;
    }
    cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)c->K, c->alpha, A, (int)c->lda, B, (int)c->ldb, c->beta, C,
                (int)c->ldc);
}

static void blas_sgemm(rlx_threadpool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                       float beta, float *C, int64_t ldc)
{
    pthread_once(&g_blas_once, blas_single_thread);
    blas_ctx c = {.ta = ta,
                  .tb = tb,
                  .by_rows = M >= N,
                  .M = M,
                  .N = N,
                  .K = K,
                  .lda = lda,
                  .ldb = ldb,
                  .ldc = ldc,
                  .alpha = alpha,
                  .beta = beta,
                  .A = A,
                  .B = B,
                  .C = C};
    int nth = rlx_threadpool_size(pool);
    /* slices of at least 16 rows/columns and ~1 MFLOP, one per thread */
    int64_t len = c.by_rows ? M : N, other = c.by_rows ? N : M;
    int64_t min_len = 16;
    while (min_len * other * K < (1 << 19) && min_len < len)
        min_len *= 2;
    int64_t parts = len / min_len < nth ? len / min_len : nth;
    if (parts < 1)
        parts = 1;
    c.chunk = (len + parts - 1) / parts;
    if (parts > 1)
        c.chunk = (c.chunk + 15) & ~(int64_t)15;
    rlx_parallel_for(parts > 1 ? pool : NULL, (len + c.chunk - 1) / c.chunk, blas_task, &c);
}

typedef struct {
    const rlx_cpu_table *t;
    bool ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    const uint8_t *Bh; /* F16/BF16/FP8 rows of B (tb), widened while packing */
    rlx_dtype bt;
    int64_t bes; /* bytes of an element of Bh */
    bool avx512; /* panels packed by pack_half_avx512 / pack_a_avx512 */
    int64_t lda, ldb;
    float *C;
    int64_t ldc;
    /* current block */
    int64_t pc, kc, jc, nc;
    float *Ap; /* ceil(M/MR) panels of kc x MR */
    float *Bp; /* ceil(nc/NR) panels of kc x NR */
    int64_t m_blocks, n_blocks;
} gemm_ctx;

#if RLX_GEMM_X86
/* r[j] lane i <- r[i] lane j */
__attribute__((target("avx512f,avx512dq"))) static inline void transpose16(__m512 *r)
{
    __m512 t[16];
    for (int j = 0; j < 16; j += 2) {
        t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
        t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
    }
    for (int j = 0; j < 16; j += 4) {
        __m512d a = _mm512_castps_pd(t[j]), b = _mm512_castps_pd(t[j + 1]);
        __m512d c = _mm512_castps_pd(t[j + 2]), d = _mm512_castps_pd(t[j + 3]);
        r[j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int g = 0; g < 16; g += 8)
        for (int j = 0; j < 4; j++) {
            t[g + j] = _mm512_shuffle_f32x4(r[g + j], r[g + j + 4], 0x88);
            t[g + j + 4] = _mm512_shuffle_f32x4(r[g + j], r[g + j + 4], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
}

/* MR rows of a row-major A, 16 columns at a time transposed in registers
 * into the panel's k-rows of MR (rows past `rows` are zeros). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) static void
pack_a_avx512(const float *A, int64_t lda, int64_t rows, int64_t kc, float *dst)
{
    __m512 r[16];
    _Static_assert(MR <= 16, "an A panel row is one masked vector");
    const __mmask16 mr_mask = (__mmask16)((1u << MR) - 1u);
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
        int64_t rem = kc - k0 < 16 ? kc - k0 : 16;
        __mmask16 km = (__mmask16)(rem >= 16 ? 0xFFFFu : (1u << rem) - 1u);
        /* a masked load only for the last columns: from memory not yet in
         * cache they measured far slower than plain loads on AMD Zen */
        for (int j = 0; j < 16; j++)
            r[j] = j >= rows   ? _mm512_setzero_ps()
                   : rem == 16 ? _mm512_loadu_ps(A + j * lda + k0)
                               : _mm512_maskz_loadu_ps(km, A + j * lda + k0);
        transpose16(r);
        for (int j = 0; j < rem; j++)
            _mm512_mask_storeu_ps(dst + (k0 + j) * MR, mr_mask, r[j]);
    }
}
#endif

static void pack_a_task(void *vc, int64_t panel, int thread)
{
    const gemm_ctx *g = vc;
    int64_t i0 = panel * MR;
    float *dst = g->Ap + panel * g->kc * MR;
    int64_t rows = g->M - i0 < MR ? g->M - i0 : MR;
#if RLX_GEMM_X86
    if (g->avx512 && !g->ta) {
        pack_a_avx512(g->A + i0 * g->lda + g->pc, g->lda, rows, g->kc, dst);
        return;
    }
#endif
    for (int64_t k = 0; k < g->kc; k++) {
        int64_t kk = g->pc + k;
        int64_t r = 0;
        if (!g->ta) {
            for (; r < rows; r++)
                dst[k * MR + r] = g->A[(i0 + r) * g->lda + kk];
        } else {
            const float *src = g->A + kk * g->lda + i0;
            for (; r < rows; r++)
                dst[k * MR + r] = src[r];
        }
        for (; r < MR; r++)
            dst[k * MR + r] = 0.0f;
    }
}

#if RLX_GEMM_X86
/* Half B panel with AVX-512: 16 rows x 16 halves widened into 16 registers
 * and transposed there, stored as 16 k-rows of the panel (no row buffer and
 * no scalar scatter); the same rows of the next panel are prefetched, as
 * these short stretches of rows far apart leave the hardware prefetchers
 * to memory latency. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma"))) static void
pack_half_avx512(const uint8_t *B, int64_t ldb, int64_t rows, int64_t kc, rlx_dtype bt,
                 bool prefetch_next, float *dst)
{
    _Static_assert(NR % 16 == 0, "a B panel is 16-column halves");
    const int64_t es = bt == RLX_DTYPE_F16 || bt == RLX_DTYPE_BF16 ? 2 : 1;
    for (int h = 0; h < NR / 16; h++) {
        __m512 r[16];
        const uint8_t *src[16];
        for (int j = 0; j < 16; j++) /* rows past `rows` are not read */
            src[j] = B + (h * 16 + j < rows ? h * 16 + j : 0) * ldb * es;
        if (prefetch_next)
            for (int j = 0; j < 16; j++) {
                const char *nx = (const char *)(src[j] + NR * ldb * es);
                for (int64_t o = 0; o < kc * es; o += 64)
                    _mm_prefetch(nx + o, _MM_HINT_T0);
            }
        for (int64_t k0 = 0; k0 < kc; k0 += 16) {
            int64_t rem = kc - k0 < 16 ? kc - k0 : 16;
            __mmask16 km = (__mmask16)(rem >= 16 ? 0xFFFFu : (1u << rem) - 1u);
            for (int j = 0; j < 16; j++) {
                if (h * 16 + j >= rows) {
                    r[j] = _mm512_setzero_ps();
                    continue;
                }
                if (es == 2) {
                    /* plain loads but for the last columns (see pack_a_avx512) */
                    const uint16_t *p = (const uint16_t *)(const void *)src[j] + k0;
                    __m256i v = rem == 16 ? _mm256_loadu_si256((const __m256i *)(const void *)p)
                                          : _mm256_maskz_loadu_epi16(km, p);
                    r[j] =
                        bt == RLX_DTYPE_BF16
                            ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16))
                            : _mm512_cvtph_ps(v);
                    continue;
                }
                /* FP8 through the half with the same bits: E5M2 is a half's
                 * top byte; E4M3's exponent and mantissa, 7 bits up, are a
                 * half 2^-8 the value (subnormals too), its NaN codes
                 * (x111 1111) set apart */
                const uint8_t *p = src[j] + k0;
                __m128i b = rem == 16 ? _mm_loadu_si128((const __m128i *)(const void *)p)
                                      : _mm_maskz_loadu_epi8(km, p);
                __m256i w = _mm256_cvtepu8_epi16(b);
                if (bt == RLX_DTYPE_F8_E5M2) {
                    r[j] = _mm512_cvtph_ps(_mm256_slli_epi16(w, 8));
                } else {
                    __m256i mag = _mm256_and_si256(w, _mm256_set1_epi16(0x7F));
                    __m256i hb = _mm256_or_si256(_mm256_slli_epi16(mag, 7),
                                                 _mm256_slli_epi16(_mm256_srli_epi16(w, 7), 15));
                    __m512 f = _mm512_mul_ps(_mm512_cvtph_ps(hb), _mm512_set1_ps(256.0f));
                    __mmask16 nan = _mm256_cmpeq_epi16_mask(mag, _mm256_set1_epi16(0x7F));
                    r[j] = _mm512_mask_mov_ps(f, nan, _mm512_set1_ps(NAN));
                }
            }
            transpose16(r);
            for (int j = 0; j < rem; j++)
                _mm512_storeu_ps(dst + (k0 + j) * NR + h * 16, r[j]);
        }
    }
}
#endif

static void pack_b_task(void *vc, int64_t panel, int thread)
{
    const gemm_ctx *g = vc;
    int64_t j0 = g->jc + panel * NR;
    float *dst = g->Bp + panel * g->kc * NR;
    int64_t cols = g->jc + g->nc - j0 < NR ? g->jc + g->nc - j0 : NR;
#if RLX_GEMM_X86
    if (g->Bh && g->avx512) {
        pack_half_avx512(g->Bh + (j0 * g->ldb + g->pc) * g->bes, g->ldb, cols, g->kc, g->bt,
                         j0 + 2 * NR <= g->jc + g->nc, dst);
        return;
    }
#endif
    if (g->Bh) { /* half / FP8 rows: widen kc elements of a row, then scatter */
        float row[KC];
        for (int64_t j = 0; j < NR; j++) {
            if (j < cols) {
                const uint8_t *src = g->Bh + ((j0 + j) * g->ldb + g->pc) * g->bes;
                if (g->bt == RLX_DTYPE_F16)
                    g->t->vec.f16_to_f32((const uint16_t *)(const void *)src, row, g->kc);
                else if (g->bt == RLX_DTYPE_BF16)
                    g->t->vec.bf16_to_f32((const uint16_t *)(const void *)src, row, g->kc);
                else
                    rlx_cpu_f8_to_f32_row(g->bt, src, row, g->kc);
            } else {
                memset(row, 0, sizeof(float) * (size_t)g->kc);
            }
            for (int64_t k = 0; k < g->kc; k++)
                dst[k * NR + j] = row[k];
        }
        return;
    }
    for (int64_t k = 0; k < g->kc; k++) {
        int64_t kk = g->pc + k;
        float *d = dst + k * NR;
        int64_t j = 0;
        if (!g->tb) {
            const float *src = g->B + kk * g->ldb + j0;
            for (; j < cols; j++)
                d[j] = src[j];
        } else {
            for (; j < cols; j++)
                d[j] = g->B[(j0 + j) * g->ldb + kk];
        }
        for (; j < NR; j++)
            d[j] = 0.0f;
    }
}

static void compute_task(void *vc, int64_t task, int thread)
{
    const gemm_ctx *g = vc;
    int64_t mb = task / g->n_blocks, nb = task % g->n_blocks;
    int64_t i_lo = mb * MC, i_hi = i_lo + MC < g->M ? i_lo + MC : g->M;
    int64_t j_lo = nb * NB, j_hi = j_lo + NB < g->nc ? j_lo + NB : g->nc;
    float beta = g->pc == 0 ? g->beta : 1.0f;
    rlx_gemm_ukernel_fn uk = g->t->vec.gemm_ukernel;
    for (int64_t j = j_lo; j < j_hi; j += NR) {
        int nr = (int)(j_hi - j < NR ? j_hi - j : NR);
        const float *bp = g->Bp + (j / NR) * g->kc * NR;
        for (int64_t i = i_lo; i < i_hi; i += MR) {
            int mr = (int)(i_hi - i < MR ? i_hi - i : MR);
            const float *ap = g->Ap + (i / MR) * g->kc * MR;
            uk(g->kc, ap, bp, g->C + i * g->ldc + g->jc + j, g->ldc, mr, nr, g->alpha, beta);
        }
    }
}

static void scale_c_task(void *vc, int64_t i, int thread)
{
    const gemm_ctx *g = vc;
    float *c = g->C + i * g->ldc;
    for (int64_t j = 0; j < g->N; j++)
        c[j] = g->beta == 0.0f ? 0.0f : c[j] * g->beta;
}

/* C11 aligned_alloc wants the size to be a multiple of the alignment */
static size_t round64(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* Packing buffers are kept per thread between calls (freed when the thread
 * exits): a fresh multi-megabyte allocation per product came back from mmap
 * every time, and its page faults cost as much as a 512^3 product. */
typedef struct {
    void *p;
    size_t cap;
} pack_buf;

static pthread_key_t g_pack_key;
static pthread_once_t g_pack_once = PTHREAD_ONCE_INIT;
static bool g_pack_key_ok;

static void pack_buf_free(void *v)
{
    pack_buf *b = v;
    free(b->p);
    free(b);
}

static void pack_key_init(void)
{
    g_pack_key_ok = pthread_key_create(&g_pack_key, pack_buf_free) == 0;
}

/* The calling thread's buffer of at least `bytes` (64-aligned); NULL when
 * out of memory. */
static void *pack_scratch(size_t bytes)
{
    pthread_once(&g_pack_once, pack_key_init);
    if (!g_pack_key_ok)
        return NULL;
    pack_buf *b = pthread_getspecific(g_pack_key);
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b)
            return NULL;
        if (pthread_setspecific(g_pack_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (b->cap < bytes) {
        free(b->p);
        b->p = aligned_alloc(64, round64(bytes));
        b->cap = b->p ? round64(bytes) : 0;
    }
    return b->p;
}

static bool own_sgemm_b(rlx_threadpool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                        float alpha, const float *A, int64_t lda, const float *B, const uint8_t *Bh,
                        rlx_dtype bt, int64_t ldb, float beta, float *C, int64_t ldc)
{
    gemm_ctx g = {
        .Bh = Bh,
        .bt = bt,
        .bes = Bh ? (int64_t)rlx_dtype_get(bt)->type_size : 0,
        .avx512 = rlx_cpu_kernels_isa() == RLX_CPU_ISA_AVX512,
        .t = rlx_cpu_table_get(),
        .ta = ta,
        .tb = tb,
        .M = M,
        .N = N,
        .K = K,
        .alpha = alpha,
        .beta = beta,
        .A = A,
        .B = B,
        .lda = lda,
        .ldb = ldb,
        .C = C,
        .ldc = ldc,
    };
    if (K == 0 || alpha == 0.0f) {
        rlx_parallel_for(pool, M, scale_c_task, &g);
        return true;
    }
    int64_t m_panels = (M + MR - 1) / MR;
    int64_t ncap = N < NC ? N : NC;
    int64_t kcap = K < KC ? K : KC;
    size_t a_bytes = round64((size_t)(m_panels * MR * kcap) * sizeof(float));
    size_t b_bytes = round64((size_t)(((ncap + NR - 1) / NR) * NR * kcap) * sizeof(float));
    char *buf = pack_scratch(a_bytes + b_bytes);
    if (!buf)
        return false;
    float *Ap = (float *)(void *)buf, *Bp = (float *)(void *)(buf + a_bytes);
    g.Ap = Ap;
    g.Bp = Bp;
    g.m_blocks = (M + MC - 1) / MC;
    for (int64_t jc = 0; jc < N; jc += NC) {
        g.jc = jc;
        g.nc = N - jc < NC ? N - jc : NC;
        g.n_blocks = (g.nc + NB - 1) / NB;
        for (int64_t pc = 0; pc < K; pc += KC) {
            g.pc = pc;
            g.kc = K - pc < KC ? K - pc : KC;
            rlx_parallel_for(pool, (g.nc + NR - 1) / NR, pack_b_task, &g);
            rlx_parallel_for(pool, m_panels, pack_a_task, &g);
            rlx_parallel_for(pool, g.m_blocks * g.n_blocks, compute_task, &g);
        }
    }
    return true;
}

/* Each thread runs the whole blocked product serially on its own slice of
 * C's rows or columns (packing its own panels): no barrier between the
 * packing and compute phases, which at mid sizes (512^3) cost more than the
 * B panels packed twice. */
typedef struct {
    bool ta, tb, by_rows;
    int64_t M, N, K, lda, ldb, ldc, chunk;
    float alpha, beta;
    const float *A, *B;
    const uint8_t *Bh;
    rlx_dtype bt;
    float *C;
    atomic_bool failed;
} slice_ctx;

static void slice_task(void *vc, int64_t task, int thread)
{
    (void)thread;
    slice_ctx *c = vc;
    int64_t lo = task * c->chunk, len = c->by_rows ? c->M : c->N;
    int64_t n = len - lo < c->chunk ? len - lo : c->chunk;
    const float *A = c->A, *B = c->B;
    const uint8_t *Bh = c->Bh;
    float *C = c->C;
    int64_t M = c->M, N = c->N;
    if (c->by_rows) {
        A += c->ta ? lo : lo * c->lda;
        C += lo * c->ldc;
        M = n;
    } else {
        if (Bh) /* half B is always N rows (trans_b) */
            Bh += lo * c->ldb * (int64_t)rlx_dtype_get(c->bt)->type_size;
        else
            B += c->tb ? lo * c->ldb : lo;
        C += lo;
        N = n;
    }
    if (own_sgemm_b(NULL, c->ta, c->tb, M, N, c->K, c->alpha, A, c->lda, B, Bh, c->bt, c->ldb,
                    c->beta, C, c->ldc))
        return;
    /* out of memory before anything was written: f32 slices take OpenBLAS,
     * a half B reports it (the caller recomputes everything, beta 0) */
    if (Bh) {
        atomic_store(&c->failed, true);
        return;
    }
    pthread_once(&g_blas_once, blas_single_thread);
    cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)c->K, c->alpha, A, (int)c->lda, B, (int)c->ldb, c->beta, C,
                (int)c->ldc);
}

static bool own_sliced(rlx_threadpool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       float alpha, const float *A, int64_t lda, const float *B, const uint8_t *Bh,
                       rlx_dtype bt, int64_t ldb, float beta, float *C, int64_t ldc)
{
    int nth = rlx_threadpool_size(pool);
    /* rows when there are enough MR-row panels per thread, else columns
     * (half B: columns, so each thread widens only its own rows of B) */
    bool by_rows = !Bh && M >= N && M >= (int64_t)nth * 4 * MR;
    int64_t len = by_rows ? M : N, unit = by_rows ? MR : NR;
    int64_t parts = len / (2 * unit) < nth ? len / (2 * unit) : nth;
    if (parts <= 1 || K == 0 || alpha == 0.0f)
        return own_sgemm_b(pool, ta, tb, M, N, K, alpha, A, lda, B, Bh, bt, ldb, beta, C, ldc);
    slice_ctx c = {.ta = ta,
                   .tb = tb,
                   .by_rows = by_rows,
                   .M = M,
                   .N = N,
                   .K = K,
                   .lda = lda,
                   .ldb = ldb,
                   .ldc = ldc,
                   .alpha = alpha,
                   .beta = beta,
                   .A = A,
                   .B = B,
                   .Bh = Bh,
                   .bt = bt,
                   .C = C};
    atomic_init(&c.failed, false);
    int64_t chunk = (len + parts - 1) / parts;
    c.chunk = (chunk + unit - 1) / unit * unit;
    rlx_parallel_for(pool, (len + c.chunk - 1) / c.chunk, slice_task, &c);
    return !atomic_load(&c.failed);
}

static bool own_sgemm(rlx_threadpool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                      float beta, float *C, int64_t ldc)
{
    return own_sliced(pool, ta, tb, M, N, K, alpha, A, lda, B, NULL, RLX_DTYPE_F32, ldb, beta, C,
                      ldc);
}

bool rlx_cpu_sgemm_half_b(rlx_threadpool *pool, rlx_dtype bt, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t lda, const void *B, int64_t ldb, float *C,
                          int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return true;
    if (bt != RLX_DTYPE_F16 && bt != RLX_DTYPE_BF16 && bt != RLX_DTYPE_F8_E4M3 &&
        bt != RLX_DTYPE_F8_E5M2)
        return false;
    return own_sliced(pool, false, true, M, N, K, 1.0f, A, lda, NULL, B, bt, ldb, 0.0f, C, ldc);
}

void rlx_cpu_sgemm(rlx_threadpool *pool, rlx_cpu_gemm_impl impl, bool trans_a, bool trans_b,
                   int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (impl == RLX_CPU_GEMM_AUTO) {
        /* Measured (rlx bench ops, best of many runs, 1 thread, Xeon with
         * AVX-512): with OpenBLAS's own AVX-512 (SkylakeX) kernels loaded the
         * two are at par (~110 GFLOP/s at 512^3) and OpenBLAS is ahead on
         * large shapes, so it keeps those. Where the loaded OpenBLAS core is an
         * AVX2 one (e.g. a Haswell-only build) our AVX-512 kernel has twice
         * its vector width and takes the large products. */
        bool big = M >= 64 && N >= 64 && K >= 64 && (double)M * N * K >= 4.0e6;
        impl = (big && rlx_cpu_kernels_isa() == RLX_CPU_ISA_AVX512 && !blas_has_avx512())
                   ? RLX_CPU_GEMM_OWN
                   : RLX_CPU_GEMM_BLAS;
    }
    if (impl == RLX_CPU_GEMM_OWN &&
        own_sgemm(pool, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    blas_sgemm(pool, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
