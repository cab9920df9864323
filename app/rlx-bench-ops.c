/* `rlx bench ops`: micro-benchmarks of the kernels. Not a test: it prints
 * figures for humans (memory bandwidth, GEMM GFLOP/s against OpenBLAS,
 * quantized matvec bandwidth, attention time). With --device vulkan:N the
 * GEMM, matvec and attention cases run on that device instead, as
 * one-instruction programs through the backend interface, timed by the
 * device's own timestamps around the kernel (and by the wall clock around
 * the submit and wait). */
#include "app/rlx-bench-ops.h"

#include <cblas.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <strings.h>
#include <time.h>

#include "backends/backend.h"
#include "backends/base/lir.h"
#include "backends/base/op.h"
#include "backends/cpu/cpu-features.h"
#include "backends/cpu/kernels.h"
#include "rlx-cli.h"
#include "rlx-config.h"
#if RLX_HAVE_CUDA
#include "backends/cuda/cuda-backend.h"
#endif

static uint64_t g_rng = 0x853c49e6748fea9bull;

static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 4503599627370496.0 - 1.0);
}

static void *xalloc(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "rlx bench ops: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* Large buffers for streaming (the weights of the matrix-vector cases and
 * the reads of the bandwidth): 2 MiB aligned, with huge pages asked for
 * before the first touch, as the model loader maps weight files (see
 * engine/formats/mapfile.h). With 4 KiB pages a read of this machine ran up
 * to a third slower (a TLB miss every 4 KiB, each a two-level walk in a
 * virtual machine), which understated the bandwidth the weights see. */
void *rlx_bench_big_alloc(size_t bytes)
{
    const size_t align = (size_t)2 << 20;
    size_t len = (bytes + align - 1) / align * align;
    void *p = aligned_alloc(align, len);
    if (!p) {
        fprintf(stderr, "rlx bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE);
#endif
    return p;
}

/* ---------------------------------------------------------- bandwidth */

typedef struct {
    const uint64_t *buf;
    size_t words_per_task;
    uint64_t sums[256];
} bw_ctx;

/* 16-byte vectors: plain C, any x86-64 (the read is bound by memory, not
 * by the width of the loads: 16- and 64-byte loads measured alike) */
typedef uint64_t bw_vec __attribute__((vector_size(16)));

static void bw_task(void *vc, int64_t task, int thread)
{
    bw_ctx *c = vc;
    /* the task's bytes as four sequential streams read side by side, each
     * asking for its lines 1.5 KiB ahead: of the reads tried on this machine
     * (one, two, four or eight streams, 8/16/64-byte loads, software
     * prefetches 0.5-8 KiB ahead or none), this was the fastest, four
     * streams by 5-20% and the prefetches by another 10-15%. It is the
     * pattern the matrix-vector kernels read their weights in, so their
     * ratio to it is not flattered by a slow reference. */
    size_t qn = c->words_per_task / 4 / 8 * 8; /* words per stream, whole lines */
    const bw_vec *p = (const bw_vec *)(const void *)(c->buf + (size_t)task * c->words_per_task);
    const size_t qv = qn / 2; /* vectors per stream */
    bw_vec a0 = {0, 0}, a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 4 <= qv; i += 4)
        for (int s = 0; s < 4; s++) {
            const bw_vec *q = p + (size_t)s * qv + i;
            __builtin_prefetch((const char *)q + 1536, 0, 3);
            a0 ^= q[0];
            a1 ^= q[1];
            a2 ^= q[2];
            a3 ^= q[3];
        }
    bw_vec x = a0 ^ a1 ^ a2 ^ a3;
    c->sums[thread & 255] += x[0] ^ x[1];
}

/* buf[0..bytes) read in `tasks` tasks of the pool; the bytes read (whole
 * lines of each task's four quarters, see bw_task) */
static size_t bw_read(rlx_threadpool *pool, const void *buf, size_t bytes, int64_t tasks)
{
    bw_ctx c = {.buf = buf, .words_per_task = bytes / 8 / (size_t)tasks};
    rlx_parallel_for(pool, tasks, bw_task, &c);
    return c.words_per_task / 4 / 8 * 8 * 4 * 8 * (size_t)tasks;
}

/* one streaming read of buf[0..bytes) over the pool, GB/s */
static double bw_pass(rlx_threadpool *pool, const uint64_t *buf, size_t bytes)
{
    /* 16 tasks per thread: dynamic balancing, long sequential streams */
    double t0 = rlx_cli_now();
    size_t read = bw_read(pool, buf, bytes, (int64_t)rlx_threadpool_size(pool) * 16);
    return (double)read / (rlx_cli_now() - t0) / 1e9;
}

double rlx_bench_read_bandwidth(rlx_threadpool *pool, const void *buf, size_t bytes)
{
    return bw_pass(pool, buf, bytes);
}

double rlx_bench_measure_bandwidth(rlx_threadpool *pool, int repeats, size_t bytes)
{
    uint64_t *buf = rlx_bench_big_alloc(bytes);
    memset(buf, 1, bytes);
    double best = 0;
    for (int r = 0; r < repeats + 1; r++) {
        double gbs = bw_pass(pool, buf, bytes);
        if (r > 0 && gbs > best)
            best = gbs;
    }
    free(buf);
    return best;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double rlx_bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ------------------------------------------------------------ FMA peak */

/* The machine's f32 arithmetic limit as the GEMM kernels see it: twelve
 * independent chains of vector FMAs in registers (enough to cover a 4-cycle
 * latency on two pipes), nothing loaded or stored, on every thread of the
 * pool, with the widest vectors of the active kernels. The GEMM figures are
 * printed as a share of it. On this development VM it is not a constant:
 * one core gave 228 GFLOP/s on one host behind it and 116 on another (one
 * 512-bit FMA per cycle), so it is measured in the same run as the GEMMs. */
#define FMA_CHAINS(T, FMA, SET1)                                               \
    T a0 = SET1(1.0f), a1 = SET1(2.0f), a2 = SET1(3.0f), a3 = SET1(4.0f);      \
    T a4 = SET1(5.0f), a5 = SET1(6.0f), a6 = SET1(7.0f), a7 = SET1(8.0f);      \
    T a8 = SET1(9.0f), a9 = SET1(10.0f), a10 = SET1(11.0f), a11 = SET1(12.0f); \
    const T b = SET1(0.9999999f), c = SET1(1e-7f);                             \
    for (int64_t i = 0; i < n; i++) {                                          \
        a0 = FMA(a0, b, c), a1 = FMA(a1, b, c), a2 = FMA(a2, b, c);            \
        a3 = FMA(a3, b, c), a4 = FMA(a4, b, c), a5 = FMA(a5, b, c);            \
        a6 = FMA(a6, b, c), a7 = FMA(a7, b, c), a8 = FMA(a8, b, c);            \
        a9 = FMA(a9, b, c), a10 = FMA(a10, b, c), a11 = FMA(a11, b, c);        \
    }                                                                          \
    T s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11

#if defined(__x86_64__)
__attribute__((target("avx512f,fma"))) static float fma_chains_avx512(int64_t n)
{
    FMA_CHAINS(__m512, _mm512_fmadd_ps, _mm512_set1_ps);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float fma_chains_avx2(int64_t n)
{
    FMA_CHAINS(__m256, _mm256_fmadd_ps, _mm256_set1_ps);
    float v[8];
    _mm256_storeu_ps(v, s);
    return v[0] + v[7];
}
#endif
#undef FMA_CHAINS

typedef struct {
    int64_t iters;
    int lanes; /* f32 lanes per vector, 0: no vector FMA measured */
    float sink[256];
} fma_ctx;

static void fma_task(void *vc, int64_t task, int thread)
{
    (void)task;
    fma_ctx *c = vc;
    float r = 0.0f;
#if defined(__x86_64__)
    r = c->lanes == 16 ? fma_chains_avx512(c->iters) : fma_chains_avx2(c->iters);
#endif
    c->sink[thread & 255] += r;
}

/* GFLOP/s of the FMA chains on the pool's threads, best of `repeats`; 0
 * where the active kernels have no vector FMA (the scalar ISA, not x86) */
static double fma_peak(rlx_threadpool *pool, int repeats)
{
    fma_ctx c = {.iters = 1 << 20};
#if defined(__x86_64__)
    rlx_cpu_isa isa = rlx_cpu_kernels_isa();
    c.lanes = isa == RLX_CPU_ISA_AVX512 ? 16 : isa == RLX_CPU_ISA_AVX2 ? 8 : 0;
#endif
    if (!c.lanes)
        return 0.0;
    /* eight tasks per thread: a thread woken late still gets its share */
    int64_t tasks = (int64_t)rlx_threadpool_size(pool) * 8;
    double best = 0.0;
    for (int r = 0; r < repeats + 1; r++) {
        double t0 = rlx_cli_now();
        rlx_parallel_for(pool, tasks, fma_task, &c);
        double g =
            (double)tasks * (double)c.iters * 12.0 * c.lanes * 2.0 / (rlx_cli_now() - t0) / 1e9;
        if (r > 0 && g > best) /* round 0 wakes the threads and the clocks */
            best = g;
    }
    return best;
}

/* ---------------------------------------------------------------- gemm */

/* Best-of-N GFLOP/s for each implementation, runs interleaved so a busy
 * neighbour on a shared machine penalizes all of them alike.
 * out[0] = ours, out[1] = OpenBLAS called directly, out[2] = the dispatcher. */
static void time_gemm(rlx_threadpool *pool, int64_t M, int64_t N, int64_t K, int repeats,
                      double out[3])
{
    float *A = xalloc((size_t)(M * K) * 4), *B = xalloc((size_t)(K * N) * 4);
    float *C = xalloc((size_t)(M * N) * 4);
    for (int64_t i = 0; i < M * K; i++)
        A[i] = frand();
    for (int64_t i = 0; i < K * N; i++)
        B[i] = frand();
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < repeats + 1; r++) {
        for (int impl = 0; impl < 3; impl++) {
            if (impl == 2) {
                /* OpenBLAS's own threads, used by the call just timed, spin
                 * (yielding) for about 2^28 cycles before they sleep: a
                 * product timed while they did shared its cores with them
                 * (ours then varied from 100 to 200 GFLOP/s on two
                 * threads). Wait them out, then wake our pool and the cores
                 * with one untimed call. */
                nanosleep(&(struct timespec){.tv_nsec = 150 * 1000 * 1000}, NULL);
                rlx_cpu_sgemm(pool, RLX_CPU_GEMM_AUTO, false, false, M, N, K, 1.0f, A, K, B, N,
                              0.0f, C, N);
            }
            double t0 = rlx_cli_now();
            if (impl == 1) {
                /* OpenBLAS on its own threads for this call only: the
                 * dispatcher (auto) calls it single-threaded from each of
                 * our pool's threads, and left at several threads it ran
                 * at half speed there (two threaded OpenBLAS calls at once) */
                openblas_set_num_threads(rlx_threadpool_size(pool));
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                            A, (int)K, B, (int)N, 0.0f, C, (int)N);
                openblas_set_num_threads(1);
            } else
                rlx_cpu_sgemm(pool, impl == 0 ? RLX_CPU_GEMM_OWN : RLX_CPU_GEMM_AUTO, false, false,
                              M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
            double t = rlx_cli_now() - t0;
            if (r > 0 && t < best[impl]) /* round 0 warms caches and threads */
                best[impl] = t;
        }
    }
    for (int i = 0; i < 3; i++)
        out[i] = 2.0 * (double)M * (double)N * (double)K / best[i] / 1e9;
    free(A);
    free(B);
    free(C);
}

double rlx_bench_gemm_peak(rlx_threadpool *pool, int repeats)
{
    double g[3];
    time_gemm(pool, 1024, 1024, 1024, repeats, g);
    double best = g[0];
    for (int i = 1; i < 3; i++)
        if (g[i] > best)
            best = g[i];
    return best;
}

/* --------------------------------------------------------------- matvec */

/* A random row of K floats (returned, the caller frees it), quantized to
 * type t into each of the N rows of w (rb bytes apart). */
static float *random_rows(rlx_dtype t, uint8_t *w, size_t rb, int64_t N, int64_t K)
{
    float *row = xalloc((size_t)K * 4);
    for (int64_t k = 0; k < K; k++)
        row[k] = frand();
    rlx_cpu_quantize_row(t, row, w, K);
    for (int64_t n = 1; n < N; n++)
        memcpy(w + (size_t)n * rb, w, rb);
    return row;
}

static void bench_matvec(rlx_threadpool *pool, rlx_dtype t, int64_t N, int64_t K,
                         const uint64_t *bwbuf)
{
    uint64_t rb64;
    if (rlx_dtype_row_bytes(t, (uint64_t)K, &rb64) != RLX_OK)
        return;
    size_t rb = (size_t)rb64, bytes = rb * (size_t)N;
    /* enough copies to exceed the last-level cache several times over, so
     * every call streams its weights from DRAM as a real decode step does */
    const size_t min_total = (size_t)512 << 20;
    int copies = (int)((min_total + bytes - 1) / bytes);
    if (copies < 1)
        copies = 1;
    uint8_t *w = rlx_bench_big_alloc(bytes * (size_t)copies);
    float *row = random_rows(t, w, rb, N, K);
    for (int c = 1; c < copies; c++)
        memcpy(w + (size_t)c * bytes, w, bytes);
    float *y = xalloc((size_t)N * 4);
    size_t sb = rlx_cpu_matmul_scratch_bytes(t, 1, K, rlx_threadpool_size(pool));
    void *scratch = xalloc(sb);
    /* warm-up pass over every copy (page faults, pool spin-up) */
    for (int c = 0; c < copies; c++)
        rlx_cpu_matmul(pool, t, w + (size_t)c * bytes, rb, N, K, row, K, 1, y, N, scratch, sb);
    /* Rounds of (a pass over the copies, then a streaming read of as many
     * bytes): the machine's bandwidth drifts by tens of percent within a
     * minute when neighbours share it, so each product is compared with
     * the read measured right beside it, and the median of those ratios is
     * reported (with the median time and bandwidth) */
    enum { ROUNDS = 15 };
    int iters = copies < 8 ? 8 : copies;
    size_t bw_bytes = (size_t)iters * bytes;
    bw_bytes = bw_bytes < ((size_t)256 << 20) ? bw_bytes : ((size_t)256 << 20);
    /* Beside them, a plain read of the same copies, one call of one task per
     * thread each (four streams per share, as the products read): the
     * dispatch and the prefetchers' ramp that every call of this size pays,
     * which the long streaming read does not show */
    double dts[ROUNDS], bws[ROUNDS], ratios[ROUNDS], rts[ROUNDS], rratios[ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        double t0 = rlx_cli_now();
        for (int i = 0; i < iters; i++)
            rlx_cpu_matmul(pool, t, w + (size_t)(i % copies) * bytes, rb, N, K, row, K, 1, y, N,
                           scratch, sb);
        dts[round] = (rlx_cli_now() - t0) / iters;
        bws[round] = bw_pass(pool, bwbuf, bw_bytes);
        ratios[round] = (double)bytes / dts[round] / 1e9 / bws[round];
        size_t read = 0;
        t0 = rlx_cli_now();
        for (int i = 0; i < iters; i++)
            read =
                bw_read(pool, w + (size_t)(i % copies) * bytes, bytes, rlx_threadpool_size(pool));
        rts[round] = (rlx_cli_now() - t0) / iters * (double)bytes / (double)read;
        rratios[round] = rts[round] / dts[round];
    }
    double dt = rlx_bench_median(dts, ROUNDS), bw = rlx_bench_median(bws, ROUNDS),
           ratio = rlx_bench_median(ratios, ROUNDS), rt = rlx_bench_median(rts, ROUNDS),
           rratio = rlx_bench_median(rratios, ROUNDS);
    double gbs = (double)bytes / dt / 1e9;
    printf("  %-5s %7lld x %-5lld %8.1f MB %9.1f us %7.2f GB/s  (read bw %5.2f) %5.1f%%"
           "  | %8.1f us %5.1f%%\n",
           rlx_dtype_name(t), (long long)N, (long long)K, (double)bytes / 1e6, dt * 1e6, gbs, bw,
           100.0 * ratio, rt * 1e6, 100.0 * rratio);
    free(w);
    free(row);
    free(y);
    free(scratch);
}

/* The kernel's own rate, with the weights in L2 and one thread: how fast
 * its arithmetic consumes weight bytes when memory is no limit. A product
 * streamed from DRAM runs at most at this rate times the thread count, so
 * when that ceiling is near the machine's streaming read the kernel, not
 * the memory, decides the DRAM figures above (the hosts behind this
 * development VM differ: Q4_K has measured 36 GB/s per thread on one and
 * 44-55 on another).
 * Two sizes of about 192 and 384 KiB are timed and their difference taken,
 * so the per-call costs (the activation's layout, the call itself) drop
 * out. */
static double matvec_cache_time(rlx_dtype t, int64_t N, int64_t K, size_t rb)
{
    uint8_t *w = xalloc(rb * (size_t)N);
    float *x = random_rows(t, w, rb, N, K), *y = xalloc((size_t)N * 4);
    size_t sb = rlx_cpu_matmul_scratch_bytes(t, 1, K, 1);
    void *scratch = xalloc(sb);
    enum { CALLS = 64, ROUNDS = 25 };
    double best = 1e30;
    for (int r = 0; r < ROUNDS + 1; r++) {
        double t0 = rlx_cli_now();
        for (int i = 0; i < CALLS; i++)
            rlx_cpu_matmul(NULL, t, w, rb, N, K, x, K, 1, y, N, scratch, sb);
        double dt = (rlx_cli_now() - t0) / CALLS;
        if (r > 0 && dt < best) /* round 0 brings the weights into L2 */
            best = dt;
    }
    free(w);
    free(x);
    free(y);
    free(scratch);
    return best;
}

static void bench_matvec_cache(rlx_dtype t, int threads, double bw)
{
    const int64_t K = 3072;
    uint64_t rb64;
    if (rlx_dtype_row_bytes(t, (uint64_t)K, &rb64) != RLX_OK)
        return;
    size_t rb = (size_t)rb64;
    int64_t n1 = (int64_t)((size_t)192 << 10) / (int64_t)rb / 8 * 8, n2 = 2 * n1;
    double d = matvec_cache_time(t, n2, K, rb) - matvec_cache_time(t, n1, K, rb);
    if (d <= 0) { /* the machine's noise exceeded the difference */
        printf("  %-5s not measurable this run (the larger size was not the slower)\n",
               rlx_dtype_name(t));
        return;
    }
    double gbs = (double)rb * (double)(n2 - n1) / d / 1e9;
    printf("  %-5s %7.1f GB/s per thread; x %d threads: %6.1f GB/s, %5.0f%% of the streaming "
           "read\n",
           rlx_dtype_name(t), gbs, threads, gbs * threads, 100.0 * gbs * threads / bw);
}

/* ------------------------------------------------------------ attention */

/* A causal attention case over an f16 cache laid out as the models' caches
 * are ([heads, tokens, dim]), its last query at the last key; q, k and v
 * filled with random values (k and v: n_kv tokens of nkv heads). */
static rlx_cpu_attn_params attn_case(int64_t n_q, int64_t n_kv, int nh, int nkv, int D, float *q,
                                     uint16_t *k, uint16_t *v, float *o)
{
    for (int64_t i = 0; i < n_q * nh * D; i++)
        q[i] = frand();
    for (int64_t i = 0; i < n_kv * nkv * D; i++) {
        k[i] = rlx_f32_to_f16(frand());
        v[i] = rlx_f32_to_f16(frand());
    }
    return (rlx_cpu_attn_params){
        .n_q = n_q,
        .n_kv = n_kv,
        .n_heads = nh,
        .n_kv_heads = nkv,
        .head_dim = D,
        .q = q,
        .q_ld_tok = (int64_t)nh * D,
        .q_ld_head = D,
        .kv_type = RLX_DTYPE_F16,
        .k = k,
        .k_ld_tok = D,
        .k_ld_head = n_kv * D,
        .v = v,
        .v_ld_tok = D,
        .v_ld_head = n_kv * D,
        .out = o,
        .o_ld_tok = (int64_t)nh * D,
        .o_ld_head = D,
        .scale = 1.0f / sqrtf((float)D),
        .mask = RLX_CPU_ATTN_CAUSAL,
        .q_pos0 = n_kv - n_q,
    };
}

static void bench_attention(rlx_threadpool *pool, int64_t n_q, int64_t n_kv, int nh, int nkv, int D,
                            int repeats)
{
    float *q = xalloc((size_t)(n_q * nh * D) * 4), *o = xalloc((size_t)(n_q * nh * D) * 4);
    uint16_t *k = xalloc((size_t)(n_kv * nkv * D) * 2), *v = xalloc((size_t)(n_kv * nkv * D) * 2);
    rlx_cpu_attn_params p = attn_case(n_q, n_kv, nh, nkv, D, q, k, v, o);
    size_t sb = rlx_cpu_attention_scratch_bytes(&p, rlx_threadpool_size(pool));
    void *scratch = xalloc(sb);
    double best = 1e30;
    for (int r = 0; r < repeats + 1; r++) {
        double t0 = rlx_cli_now();
        rlx_cpu_attention(pool, &p, scratch, sb);
        double t = rlx_cli_now() - t0;
        if (r > 0 || repeats == 0)
            best = t < best ? t : best;
    }
    /* causal: about half of the n_q x n_kv scores are computed */
    double pairs = n_q == n_kv ? 0.5 * (double)n_q * (double)(n_kv + 1) : (double)n_q * n_kv;
    double gflops = 4.0 * pairs * D * nh / best / 1e9;
    printf("  q %5lld kv %5lld  heads %2d/%d  dim %3d  f16 KV causal %9.2f ms  %6.1f GFLOP/s\n",
           (long long)n_q, (long long)n_kv, nh, nkv, D, best * 1e3, gflops);
    free(q);
    free(o);
    free(k);
    free(v);
    free(scratch);
}

/* One decode step's attention (one query, causal) over n_kv cached tokens,
 * the caches of enough layers in turn that each call reads its K and V from
 * DRAM, as a decode step over a long conversation does (the in-cache case
 * above reads them from L3): time per call and KV bytes per second. */
static void bench_attention_dram(rlx_threadpool *pool, int64_t n_kv, int nh, int nkv, int D)
{
    const size_t per = (size_t)n_kv * (size_t)nkv * (size_t)D; /* elements of K (or V) */
    const int layers = (int)(((size_t)512 << 20) / (per * 4) + 1);
    uint16_t *k = rlx_bench_big_alloc(per * 2 * (size_t)layers);
    uint16_t *v = rlx_bench_big_alloc(per * 2 * (size_t)layers);
    float *q = xalloc((size_t)(nh * D) * 4), *o = xalloc((size_t)(nh * D) * 4);
    rlx_cpu_attn_params p = attn_case(1, n_kv, nh, nkv, D, q, k, v, o);
    for (int l = 1; l < layers; l++) {
        memcpy(k + per * (size_t)l, k, per * 2);
        memcpy(v + per * (size_t)l, v, per * 2);
    }
    size_t sb = rlx_cpu_attention_scratch_bytes(&p, rlx_threadpool_size(pool));
    void *scratch = xalloc(sb);
    double best = 1e30;
    for (int pass = 0; pass < 4; pass++) {
        double t0 = rlx_cli_now();
        for (int l = 0; l < layers; l++) {
            p.k = k + per * (size_t)l;
            p.v = v + per * (size_t)l;
            rlx_cpu_attention(pool, &p, scratch, sb);
        }
        double t = (rlx_cli_now() - t0) / layers;
        if (pass > 0 && t < best) /* pass 0: page faults */
            best = t;
    }
    printf("  q %5d kv %5lld  heads %2d/%d  dim %3d  f16 KV from DRAM %6.2f ms  %6.1f GB/s\n", 1,
           (long long)n_kv, nh, nkv, D, best * 1e3, (double)(per * 4) / best / 1e9);
    free(k);
    free(v);
    free(q);
    free(o);
    free(scratch);
}

/* ---------------------------------------------------- a GPU device (--device) */

typedef struct {
    rlx_lir lir;
    rlx_lir_value v[4];
    rlx_lir_instr ins;
    rlx_lir_binding in[3], out[1];
    const rlx_backend_i *be;
    rlx_device *dev;
    rlx_buffer *buf[4];
} gpu_op;

static const char *const gpu_in_names[] = {"a", "b", "c"};

/* Value i, contiguous row-major, INPUT i (or the OUTPUT when i == n_in). */
static void gpu_value(gpu_op *o, int i, int n_in, rlx_dtype dt, int rank, const int64_t *ne)
{
    rlx_lir_value *v = &o->v[i];
    memset(v, 0, sizeof *v);
    v->dtype = dt;
    v->shape.rank = rank;
    int64_t st = 1;
    for (int d = rank - 1; d >= 0; d--) {
        v->shape.d[d] = rlx_dim_const(ne[d]);
        v->stride[d] = rlx_dim_const(st);
        st *= ne[d];
    }
    uint64_t rows = 1, rb = 0;
    for (int d = 0; d < rank - 1; d++)
        rows *= (uint64_t)ne[d];
    rlx_dtype_row_bytes(dt, (uint64_t)ne[rank - 1], &rb);
    v->max_bytes = rows * rb;
    v->contiguous = true;
    v->view_of = -1;
    v->home = i < n_in ? RLX_HOME_INPUT : RLX_HOME_OUTPUT;
    v->index = i < n_in ? i : 0;
    rlx_lir_binding *b = i < n_in ? &o->in[i] : &o->out[0];
    b->name = i < n_in ? gpu_in_names[i] : "out";
    b->dtype = dt;
    b->shape = v->shape;
    b->max_bytes = v->max_bytes;
}

/* Random contents for value i: floats in [-1, 1) in its dtype. */
static void gpu_fill(gpu_op *o, int i)
{
    const rlx_lir_value *v = &o->v[i];
    int64_t K = v->shape.d[v->shape.rank - 1].k;
    uint64_t rb = 0, bytes = v->max_bytes;
    rlx_dtype_row_bytes(v->dtype, (uint64_t)K, &rb);
    uint8_t *host = xalloc(bytes);
    float *row = xalloc((size_t)K * 4);
    for (uint64_t r = 0; r < bytes / rb; r++) {
        for (int64_t k = 0; k < K; k++)
            row[k] = frand();
        uint8_t *dst = host + r * rb;
        if (v->dtype == RLX_DTYPE_F32)
            memcpy(dst, row, (size_t)K * 4);
        else if (v->dtype == RLX_DTYPE_F16)
            for (int64_t k = 0; k < K; k++)
                ((uint16_t *)dst)[k] = rlx_f32_to_f16(row[k]);
        else
            rlx_cpu_quantize_row(v->dtype, row, dst, K);
    }
    rlx_error *err = NULL;
    if (o->be->buffer_from_host(o->dev, host, bytes, &o->buf[i], &err) != RLX_OK) {
        fprintf(stderr, "rlx bench ops: upload: %s\n", rlx_error_message(err));
        exit(1);
    }
    free(host);
    free(row);
}

/* Free the first n buffers and the program of a timed case. */
/* "failed: " and err's sentence (err is freed), in a buffer that lives
 * until the next call: the timed cases' reason for a failed run. */
static const char *gpu_failed(rlx_error *err)
{
    static char why[512];
    snprintf(why, sizeof why, "failed: %s", rlx_error_message(err));
    rlx_error_free(err);
    return why;
}

static void gpu_release(gpu_op *o, int n, rlx_program *prog)
{
    for (int i = 0; i < n; i++) {
        if (o->buf[i])
            o->be->buffer_free(o->buf[i]);
        o->buf[i] = NULL;
    }
    if (prog)
        o->be->program_free(prog);
}

/* Run the instruction (one warm-up, then `repeats` runs); the best device
 * time by timestamps (ms, < 0 without timestamps) and the best wall time
 * around submit + wait. NULL when it ran, else why not (declined, or the
 * device's error, e.g. an operand larger than a storage buffer window);
 * the message lives until the next call. */
static const char *gpu_time(gpu_op *o, rlx_op op, const rlx_op_params *p, int n_in, int repeats,
                            double *dev_ms, double *wall_ms)
{
    o->ins.op = op;
    o->ins.p = *p;
    o->ins.n_in = n_in;
    for (int i = 0; i < n_in; i++)
        o->ins.in[i] = i;
    o->ins.out = n_in;
    o->ins.node = -1;
    o->lir.n_values = n_in + 1;
    o->lir.values = o->v;
    o->lir.n_instrs = 1;
    o->lir.instrs = &o->ins;
    o->lir.n_inputs = n_in;
    o->lir.inputs = o->in;
    o->lir.n_outputs = 1;
    o->lir.outputs = o->out;
    if (!o->be->supports_op(o->dev, &o->lir, &o->ins))
        return "declined by the device";
    rlx_error *err = NULL;
    rlx_program *prog = NULL;
    const char *res = NULL;
    if (o->be->program_create(o->dev, &o->lir, &prog, &err) != RLX_OK)
        goto fail;
    for (int i = 0; i < n_in; i++)
        gpu_fill(o, i);
    if (o->be->buffer_alloc(o->dev, o->v[n_in].max_bytes, &o->buf[n_in], &err) != RLX_OK)
        goto fail;
    rlx_buffer_ref in[3], out = {o->buf[n_in], 0};
    for (int i = 0; i < n_in; i++)
        in[i] = (rlx_buffer_ref){o->buf[i], 0};
    rlx_program_bindings b = {.inputs = in, .outputs = &out};
    o->be->program_set_timing(prog, true);
    *dev_ms = *wall_ms = 1e30;
    for (int r = 0; r < repeats + 1; r++) {
        double t0 = rlx_cli_now();
        if (o->be->program_run(prog, &b, NULL, &err) != RLX_OK)
            goto fail;
        double t = (rlx_cli_now() - t0) * 1e3, ms = -1;
        if (o->be->program_timings(prog, &ms, 1, &err) != RLX_OK) {
            rlx_error_clear(&err);
            ms = -1;
        }
        if (r == 0) /* the warm-up records the command buffer */
            continue;
        if (t < *wall_ms)
            *wall_ms = t;
        if (ms < 0)
            *dev_ms = -1;
        else if (*dev_ms >= 0 && ms < *dev_ms)
            *dev_ms = ms;
    }
    goto done;
fail:
    res = gpu_failed(err);
done:
    gpu_release(o, n_in + 1, prog);
    return res;
}

/* gpu_time of an f32 [M, K] times weights of type wt [N, K] transposed,
 * on device dev (the bench's own or a second open of it) */
static const char *gpu_time_wt(gpu_op *o, rlx_device *dev, int64_t M, int64_t N, int64_t K,
                               rlx_dtype wt, int repeats, double *dev_ms, double *wall_ms)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.matmul.trans_b = true;
    gpu_value(o, 0, 2, RLX_DTYPE_F32, 2, (int64_t[]){M, K});
    gpu_value(o, 1, 2, wt, 2, (int64_t[]){N, K});
    gpu_value(o, 2, 2, RLX_DTYPE_F32, 2, (int64_t[]){M, N});
    rlx_device *keep = o->dev;
    o->dev = dev;
    const char *ran = gpu_time(o, RLX_OP_MATMUL, &p, 2, repeats, dev_ms, wall_ms);
    o->dev = keep;
    return ran;
}

static void gpu_print(const char *what, const char *why, double dev_ms, double wall_ms, double work,
                      const char *unit)
{
    if (why) {
        printf("  %-34s %s\n", what, why);
        return;
    }
    double ms = dev_ms > 0 ? dev_ms : wall_ms;
    printf("  %-34s %10.3f ms %10.3f ms  %9.3f %s\n", what, dev_ms > 0 ? dev_ms : NAN, wall_ms,
           work / (ms * 1e-3) / 1e9, unit);
}

/* a copy of n floats on the device: GB/s of bytes read plus written */
static double gpu_copy_bw(gpu_op *o, int64_t n, int repeats, const char **why)
{
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    gpu_value(o, 0, 1, RLX_DTYPE_F32, 1, (int64_t[]){n});
    gpu_value(o, 1, 1, RLX_DTYPE_F32, 1, (int64_t[]){n});
    double dm = 0, wm = 0;
    *why = gpu_time(o, RLX_OP_COPY, &p, 1, repeats, &dm, &wm);
    double ms = dm > 0 ? dm : wm;
    return *why || ms <= 0 ? 0 : 2.0 * (double)n * 4 / (ms * 1e-3) / 1e9;
}

/* What one launch costs when a program of many small ones is replayed:
 * n_ops adds of two n-float vectors into one output, each its own launch
 * (a decode step is some 300 such). Per launch: device microseconds from
 * the program's statistics (CUDA's timestamps around the whole run), and
 * wall microseconds around submit and wait. */
static const char *gpu_launch_cost(gpu_op *o, int n_ops, int64_t n, int repeats, double *dev_us,
                                   double *wall_us)
{
    gpu_value(o, 0, 2, RLX_DTYPE_F32, 1, (int64_t[]){n});
    gpu_value(o, 1, 2, RLX_DTYPE_F32, 1, (int64_t[]){n});
    gpu_value(o, 2, 2, RLX_DTYPE_F32, 1, (int64_t[]){n});
    rlx_lir_instr *ins = calloc((size_t)n_ops, sizeof *ins);
    if (!ins)
        return "out of memory";
    for (int i = 0; i < n_ops; i++) {
        ins[i].op = RLX_OP_ADD;
        ins[i].n_in = 2;
        ins[i].in[0] = 0;
        ins[i].in[1] = 1;
        ins[i].out = 2;
        ins[i].node = -1;
    }
    rlx_lir lir = {.n_values = 3,
                   .values = o->v,
                   .n_instrs = n_ops,
                   .instrs = ins,
                   .n_inputs = 2,
                   .inputs = o->in,
                   .n_outputs = 1,
                   .outputs = o->out};
    rlx_error *err = NULL;
    rlx_program *prog = NULL;
    const char *res = NULL;
    if (o->be->program_create(o->dev, &lir, &prog, &err) != RLX_OK)
        goto fail;
    gpu_fill(o, 0);
    gpu_fill(o, 1);
    if (o->be->buffer_alloc(o->dev, o->v[2].max_bytes, &o->buf[2], &err) != RLX_OK)
        goto fail;
    rlx_buffer_ref in[2] = {{o->buf[0], 0}, {o->buf[1], 0}}, out = {o->buf[2], 0};
    rlx_program_bindings b = {.inputs = in, .outputs = &out};
    *wall_us = 1e30;
    rlx_program_stats s0 = {0}, s1 = {0};
    for (int r = 0; r < repeats + 2; r++) { /* two warm-ups: the second records */
        if (r == 2 && o->be->program_stats)
            o->be->program_stats(prog, &s0);
        double t0 = rlx_cli_now();
        if (o->be->program_run(prog, &b, NULL, &err) != RLX_OK)
            goto fail;
        double t = (rlx_cli_now() - t0) * 1e6 / n_ops;
        if (r >= 2 && t < *wall_us)
            *wall_us = t;
    }
    if (o->be->program_stats)
        o->be->program_stats(prog, &s1);
    *dev_us = s1.device_ns > s0.device_ns
                  ? (double)(s1.device_ns - s0.device_ns) / 1e3 / repeats / n_ops
                  : -1;
    goto done;
fail:
    res = gpu_failed(err);
done:
    gpu_release(o, 3, prog);
    free(ins);
    return res;
}

/* On CUDA, a second open of the device with other options (a kernel
 * choice to time beside the default); NULL elsewhere or if it fails. */
static rlx_device *cuda_alt_device(const rlx_backend_i *be, int index, const rlx_device_opts *o)
{
    rlx_device *d = NULL;
    rlx_error *err = NULL;
    if (strcmp(be->name, "cuda") || be->device_open(index, o, &d, &err) != RLX_OK) {
        rlx_error_free(err);
        return NULL;
    }
    return d;
}

static int bench_gpu(const char *spec, bool force_f32, const char *section, int repeats)
{
    const rlx_backend_i *be = NULL;
    int index = 0;
    rlx_error *err = NULL;
    if (rlx_device_parse(spec, &be, &index, &err) != RLX_OK) {
        fprintf(stderr, "rlx bench ops: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return 1;
    }
    gpu_op o;
    memset(&o, 0, sizeof o);
    o.be = be;
    rlx_device_opts opts = {.force_f32 = force_f32};
    if (be->device_open(index, &opts, &o.dev, &err) != RLX_OK) {
        fprintf(stderr, "rlx bench ops: %s: %s\n", spec, rlx_error_message(err));
        rlx_error_free(err);
        return 1;
    }
    rlx_device_info info;
    if (be->device_query(o.dev, &info, &err) != RLX_OK) {
        fprintf(stderr, "rlx bench ops: %s: %s\n", spec, rlx_error_message(err));
        rlx_error_free(err);
        be->device_close(o.dev);
        return 1;
    }
    rlx_cpu_kernels_init(); /* quantizing the weights on the host */
    /* a software device (lavapipe) gets the smaller cases only */
    bool big = info.type != RLX_DEVICE_GPU_SOFTWARE;
    printf("device: %s, %s (%.0f MiB), repeats: %d\n", info.id, info.name,
           (double)info.total_memory / 1048576.0, repeats);
    printf("features: %s\n", info.features);
    printf("times: best of %d runs; 'device' from the GPU's timestamps around the kernel, "
           "'wall' around submit and wait\n",
           repeats);
    bool all = !strcmp(section, "all");
    rlx_op_params p;

    if (all || !strcmp(section, "bw")) {
        /* our elementwise copy kernel: a floor for what the GPU's memory
         * moves, not its limit (a driver copy moves more) */
        printf("\ncopy kernel (f32, read+written)   %13s %13s  %11s\n", "device", "wall",
               "bandwidth");
        int64_t n = big ? 64ll << 20 : 4ll << 20;
        const char *why = NULL;
        double bw = gpu_copy_bw(&o, n, repeats, &why);
        char what[64];
        snprintf(what, sizeof what, "%lld MiB f32", (long long)(n * 4 >> 20));
        if (why)
            printf("  %-34s %s\n", what, why);
        else
            printf("  %-34s %24s  %9.1f GB/s\n", what, "", bw);
    }

    if (all || !strcmp(section, "launch")) {
        printf("\nlaunches (a program of 256 adds, replayed) %6s %13s\n", "device", "wall");
        static const int64_t sizes[] = {2048, 1 << 20};
        for (int i = 0; i < (big ? 2 : 1); i++) {
            double du = 0, wu = 0;
            const char *why = gpu_launch_cost(&o, 256, sizes[i], repeats, &du, &wu);
            char what[64];
            snprintf(what, sizeof what, "add of %lld floats", (long long)sizes[i]);
            if (why)
                printf("  %-34s %s\n", what, why);
            else if (du > 0)
                printf("  %-34s %8.2f us %10.2f us  a launch\n", what, du, wu);
            else
                printf("  %-34s %11s %10.2f us  a launch\n", what, "-", wu);
        }
    }

    if (all || !strcmp(section, "gemm")) {
        printf("\nf32 GEMM (C = A.B, row-major)    %13s %13s  %11s\n", "device", "wall",
               "throughput");
        static const int64_t shapes[][3] = {{256, 256, 256},
                                            {512, 512, 512},
                                            {1024, 1024, 1024},
                                            {2048, 2048, 2048},
                                            {512, 4096, 4096}};
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            int64_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
            if (!big && M * N * K > 1024ll * 1024 * 1024)
                continue;
            memset(&p, 0, sizeof p);
            gpu_value(&o, 0, 2, RLX_DTYPE_F32, 2, (int64_t[]){M, K});
            gpu_value(&o, 1, 2, RLX_DTYPE_F32, 2, (int64_t[]){K, N});
            gpu_value(&o, 2, 2, RLX_DTYPE_F32, 2, (int64_t[]){M, N});
            double dm = 0, wm = 0;
            const char *ran = gpu_time(&o, RLX_OP_MATMUL, &p, 2, repeats, &dm, &wm);
            char what[64];
            snprintf(what, sizeof what, "%lld x %lld x %lld", (long long)M, (long long)N,
                     (long long)K);
            gpu_print(what, ran, dm, wm, 2.0 * (double)M * (double)N * (double)K, "GFLOP/s");
        }
    }

    if (all || !strcmp(section, "matvec")) {
        printf("\nmatvec (M = 1, weights [N, K])  %13s %13s  %11s\n", "device", "wall",
               "weight GB/s");
        static const rlx_dtype types[] = {RLX_DTYPE_Q4_0, RLX_DTYPE_Q8_0, RLX_DTYPE_Q4_K,
                                          RLX_DTYPE_Q5_K, RLX_DTYPE_Q6_K, RLX_DTYPE_F16};
        /* Qwen3-0.6B's and Llama-3.2-1B's decode products (k/v, gate/up,
         * down, the output head) and a 4096-square one */
        static const int64_t shapes[][2] = {{1024, 3072}, {4096, 4096}, {151936, 1024},
                                            {8192, 2048}, {2048, 8192}, {128256, 2048}};
        /* CUDA: the quantized products also in their plain form ("(plain)":
         * registers, a block a few columns), beside the streamed one that
         * the large ones take */
        rlx_device_opts po = opts;
        po.cuda_plain_matvec = true;
        rlx_device *plain = cuda_alt_device(be, index, &po);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
                for (int alt = 0; alt < (plain && types[ti] != RLX_DTYPE_F16 ? 2 : 1); alt++) {
                    int64_t N = shapes[i][0], K = shapes[i][1];
                    if (!big && N * K > 4096 * 4096)
                        continue;
                    double dm = 0, wm = 0;
                    const char *ran =
                        gpu_time_wt(&o, alt ? plain : o.dev, 1, N, K, types[ti], repeats, &dm, &wm);
                    char what[64];
                    snprintf(what, sizeof what, "%-5s %6lld x %-5lld%s", rlx_dtype_name(types[ti]),
                             (long long)N, (long long)K, alt ? " (plain)" : "");
                    gpu_print(what, ran, dm, wm, (double)o.v[1].max_bytes, "GB/s");
                }
        if (plain)
            be->device_close(plain);
    }

    if (all || !strcmp(section, "qgemm")) {
        /* a prompt of 512 tokens through the weight shapes of Qwen3-0.6B and
         * Llama-3.2-1B; on CUDA beside cuBLAS's F16 GEMM on the same shape */
        printf("\nprompt matmul (M = 512, weights [N, K]) %6s %13s  %11s\n", "device", "wall",
               "throughput");
        static const rlx_dtype types[] = {RLX_DTYPE_Q4_K, RLX_DTYPE_Q5_K, RLX_DTYPE_Q6_K,
                                          RLX_DTYPE_Q8_0, RLX_DTYPE_Q4_0, RLX_DTYPE_F16};
        static const int64_t shapes[][2] = {
            {3072, 1024}, {1024, 3072}, {2048, 2048}, {8192, 2048}, {2048, 8192}};
        const int64_t M = 512;
        /* CUDA: the quantized products also through the first tensor-core
         * kernel ("(tc)", the activations converted in the tiles) */
        rlx_device_opts to = opts;
        to.cuda_convert_a_in_tiles = true;
        rlx_device *tiles = cuda_alt_device(be, index, &to);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            int64_t N = shapes[i][0], K = shapes[i][1];
            if (!big && N * K > 2048 * 2048)
                continue;
            for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
                for (int alt = 0; alt < (tiles && types[ti] != RLX_DTYPE_F16 ? 2 : 1); alt++) {
                    double dm = 0, wm = 0;
                    const char *ran =
                        gpu_time_wt(&o, alt ? tiles : o.dev, M, N, K, types[ti], repeats, &dm, &wm);
                    char what[64];
                    snprintf(what, sizeof what, "%-5s %4lld x %4lld x %-4lld%s",
                             rlx_dtype_name(types[ti]), (long long)M, (long long)N, (long long)K,
                             alt ? " (tc)" : "");
                    gpu_print(what, ran, dm, wm, 2.0 * (double)M * (double)N * (double)K,
                              "GFLOP/s");
                }
#if RLX_HAVE_CUDA
            if (!strcmp(be->name, "cuda")) {
                double ms = 0;
                char what[64];
                snprintf(what, sizeof what, "cuBLAS F16 %4lld x %4lld x %-4lld", (long long)M,
                         (long long)N, (long long)K);
                if (rlx_cuda_bench_cublas_f16(o.dev, M, N, K, repeats, &ms, &err) != RLX_OK) {
                    printf("  %-34s %s\n", what, rlx_error_message(err));
                    rlx_error_clear(&err);
                } else {
                    gpu_print(what, NULL, ms, ms, 2.0 * (double)M * (double)N * (double)K,
                              "GFLOP/s");
                }
            }
#endif
        }
        if (tiles)
            be->device_close(tiles);
    }

    if (all || !strcmp(section, "attn")) {
        printf("\nattention (f16 KV, causal)       %13s %13s  %11s\n", "device", "wall",
               "throughput");
        static const int64_t cases[][2] = {
            {1, 512}, {1, 2048}, {128, 128}, {512, 512}, {2048, 2048}};
        static const int dims[] = {64, 128};
        const int H = 16, HKV = 8;
        for (int di = 0; di < 2; di++)
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                int64_t S = cases[i][0], T = cases[i][1], D = dims[di];
                if (!big && S * T > 128 * 128 && S > 1)
                    continue;
                memset(&p, 0, sizeof p);
                p.attn.mask = RLX_MASK_CAUSAL;
                p.attn.scale = 1.0f / sqrtf((float)D);
                gpu_value(&o, 0, 3, RLX_DTYPE_F32, 4, (int64_t[]){1, H, S, D});
                gpu_value(&o, 1, 3, RLX_DTYPE_F16, 4, (int64_t[]){1, HKV, T, D});
                gpu_value(&o, 2, 3, RLX_DTYPE_F16, 4, (int64_t[]){1, HKV, T, D});
                gpu_value(&o, 3, 3, RLX_DTYPE_F32, 4, (int64_t[]){1, H, S, D});
                double dm = 0, wm = 0;
                const char *ran = gpu_time(&o, RLX_OP_ATTENTION, &p, 3, repeats, &dm, &wm);
                double pairs = S == T ? 0.5 * (double)S * (double)(T + 1) : (double)S * T;
                char what[64];
                snprintf(what, sizeof what, "q %4lld kv %4lld heads %d/%d dim %lld", (long long)S,
                         (long long)T, H, HKV, (long long)D);
                gpu_print(what, ran, dm, wm, 4.0 * pairs * (double)D * H, "GFLOP/s");
            }
    }
    /* long prompts with f32 operands, run on software devices too: Whisper's
     * encoder (no mask, 1500 frames, 6 heads) and an LLM prefill (causal) */
    if (all || !strcmp(section, "attn") || !strcmp(section, "attn-long")) {
        printf("\nattention (f32, long prompts)    %13s %13s  %11s\n", "device", "wall",
               "throughput");
        static const struct {
            int64_t H, S, D;
            int mask;
        } cases[] = {{6, 1500, 64, RLX_MASK_NONE}, {32, 512, 64, RLX_MASK_CAUSAL}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            int64_t H = cases[i].H, S = cases[i].S, D = cases[i].D;
            memset(&p, 0, sizeof p);
            p.attn.mask = cases[i].mask;
            p.attn.scale = 1.0f / sqrtf((float)D);
            for (int v = 0; v < 4; v++)
                gpu_value(&o, v, 3, RLX_DTYPE_F32, 4, (int64_t[]){1, H, S, D});
            double dm = 0, wm = 0;
            const char *ran = gpu_time(&o, RLX_OP_ATTENTION, &p, 3, repeats, &dm, &wm);
            double pairs = cases[i].mask ? 0.5 * (double)S * (double)(S + 1) : (double)S * S;
            char what[64];
            snprintf(what, sizeof what, "q/kv %4lld heads %lld dim %lld %s", (long long)S,
                     (long long)H, (long long)D, cases[i].mask ? "causal" : "no mask");
            gpu_print(what, ran, dm, wm, 4.0 * pairs * (double)D * H, "GFLOP/s");
        }
    }
    be->device_close(o.dev);
    return 0;
}

static void usage(void)
{
    printf("usage: rlx bench ops [-t THREADS] [-r REPEATS] [--section S] [--type T]\n"
           "                     [--isa ISA] [--device DEV [--f32]]\n"
           "  sections: all (default), bw, gemm, matvec, attn, attn-long; with --device also qgemm "
           "(prompt-sized\n"
           "            matmuls of quantized weights, on CUDA beside cuBLAS F16) and launch (what "
           "one\n"
           "            of 256 small launches replayed together costs)\n"
           "  --type T           the matrix-vector products of weight type T only (Q8_0, F16...)\n"
           "  --isa ISA          the CPU kernels of ISA avx2 or scalar instead of the best this\n"
           "                     CPU runs (how a machine without AVX-512 would fare)\n"
           "  --device vulkan:N  the GEMM, matvec and attention cases on that device, timed by\n"
           "                     its timestamps (default: cpu, the CPU kernels)\n"
           "  --f32              with a GPU device: its f32 kernels even where it has f16 ones\n");
}

int rlx_bench_ops_main(int argc, char **argv)
{
    int threads = 0, repeats = 3;
    const char *section = "all", *device = "cpu", *only_type = NULL, *isa = NULL;
    bool force_f32 = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--f32")) {
            force_f32 = true;
            continue;
        }
        if (strcmp(a, "-t") && strcmp(a, "-r") && strcmp(a, "--section") && strcmp(a, "--device") &&
            strcmp(a, "--type") && strcmp(a, "--isa"))
            return rlx_cli_fail("bench ops: %s '%s' (see rlx bench ops --help)",
                                a[0] == '-' ? "unknown option" : "unexpected argument", a);
        if (i + 1 >= argc)
            return rlx_cli_fail("bench ops: %s needs a value (see rlx bench ops --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-t")) {
            int rc = rlx_cli_parse_threads("bench ops", a, v, &threads);
            if (rc)
                return rc;
        } else if (!strcmp(a, "-r")) {
            long n;
            if (!rlx_cli_parse_long(v, 1, 1000, &n))
                return rlx_cli_fail("bench ops: -r wants a repetition count from 1 to 1000, not "
                                    "'%s'",
                                    v);
            repeats = (int)n;
        } else if (!strcmp(a, "--section"))
            section = v;
        else if (!strcmp(a, "--device"))
            device = v;
        else if (!strcmp(a, "--type"))
            only_type = v;
        else
            isa = v;
    }
    if (strcmp(section, "all") && strcmp(section, "bw") && strcmp(section, "gemm") &&
        strcmp(section, "matvec") && strcmp(section, "attn") &&
        ((strcmp(section, "qgemm") && strcmp(section, "attn-long") && strcmp(section, "launch")) ||
         !strcmp(device, "cpu"))) {
        fprintf(stderr,
                "rlx bench ops: no section '%s' (all, bw, gemm, matvec, attn; qgemm, "
                "attn-long and launch with --device)\n",
                section);
        return 1;
    }
    if (strcmp(device, "cpu") != 0)
        return bench_gpu(device, force_f32, section, repeats);
    bool all = !strcmp(section, "all");
    rlx_cpu_kernels_init();
    if (isa) {
        static const rlx_cpu_isa isas[] = {RLX_CPU_ISA_SCALAR, RLX_CPU_ISA_AVX2,
                                           RLX_CPU_ISA_AVX512};
        bool set = false;
        for (size_t k = 0; k < sizeof isas / sizeof isas[0] && !set; k++)
            if (!strcmp(isa, rlx_cpu_isa_name(isas[k]))) {
                if (rlx_cpu_kernels_set_isa(isas[k]) != RLX_OK) {
                    fprintf(stderr, "rlx bench ops: this CPU cannot run the %s kernels\n", isa);
                    return 1;
                }
                set = true;
            }
        if (!set) {
            fprintf(stderr, "rlx bench ops: no kernel ISA '%s' (scalar, avx2, avx512)\n", isa);
            return 1;
        }
    }
    rlx_threadpool *pool = NULL;
    if (rlx_threadpool_create(threads, &pool) != RLX_OK) {
        fprintf(stderr, "rlx bench ops: cannot start %d threads\n", threads);
        return 1;
    }
    const rlx_cpu_features *f = rlx_cpu_features_get();
    char feat[256];
    printf("CPU: %s (%d physical cores, %d logical)\n", f->model_name, f->physical_cores,
           f->logical_cpus);
    printf("features: %s\n", rlx_cpu_features_string(f, feat, sizeof feat));
    printf("kernels: %s, threads: %d, repeats: %d, OpenBLAS: %s\n",
           rlx_cpu_isa_name(rlx_cpu_kernels_isa()), rlx_threadpool_size(pool), repeats,
           openblas_get_config());

    double bw = rlx_bench_measure_bandwidth(pool, repeats, (size_t)1 << 30); /* ~20x a large LLC */
    printf("\nmemory bandwidth (streaming read, 1 GiB, %d threads): %.2f GB/s\n",
           rlx_threadpool_size(pool), bw);

    if (all || !strcmp(section, "gemm")) {
        double peak = fma_peak(pool, repeats);
        printf("\nf32 GEMM GFLOP/s (row-major, C = A.B)");
        if (peak > 0)
            printf("; FMA peak (registers only, %d threads): %.1f GFLOP/s,\n"
                   "  each GEMM's share of it in parentheses",
                   rlx_threadpool_size(pool), peak);
        printf("\n  %-22s %17s %17s %10s\n", "M x N x K", "ours", "OpenBLAS", "auto");
        static const int64_t shapes[][3] = {
            {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}, {512, 4096, 4096}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            double g[3];
            time_gemm(pool, M, N, K, repeats, g);
            char shape[64];
            snprintf(shape, sizeof shape, "%lld x %lld x %lld", (long long)M, (long long)N,
                     (long long)K);
            if (peak > 0)
                printf("  %-22s %9.1f (%3.0f%%) %9.1f (%3.0f%%) %10.1f\n", shape, g[0],
                       100.0 * g[0] / peak, g[1], 100.0 * g[1] / peak, g[2]);
            else
                printf("  %-22s %17.1f %17.1f %10.1f\n", shape, g[0], g[1], g[2]);
        }
    }

    if (all || !strcmp(section, "matvec")) {
        printf("\nquantized matvec (M = 1), weights streamed from DRAM; GB/s = weight bytes / "
               "time,\n  %% of a streaming read taken beside each pass; after |: one plain read "
               "of the same\n  bytes per call through the pool, and the product's speed as a %% "
               "of it (medians of 15 rounds)\n");
        static const rlx_dtype types[] = {RLX_DTYPE_Q4_0, RLX_DTYPE_Q8_0, RLX_DTYPE_Q4_K,
                                          RLX_DTYPE_Q5_K, RLX_DTYPE_Q6_K, RLX_DTYPE_F16};
        static const int64_t shapes[][2] = {
            {1024, 3072}, {2048, 8192}, {4096, 4096}, {151936, 1024}};
        /* the streaming reads beside the passes share one buffer */
        uint64_t *bwbuf = rlx_bench_big_alloc((size_t)256 << 20);
        memset(bwbuf, 1, (size_t)256 << 20);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            if (only_type && strcasecmp(only_type, rlx_dtype_name(types[ti])) != 0)
                continue;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                bench_matvec(pool, types[ti], shapes[s][0], shapes[s][1], bwbuf);
        }
        free(bwbuf);
        printf("\nthe same kernels with their weights in L2 (one thread, K = 3072): how fast the\n"
               "  arithmetic alone goes, and that rate times the threads against the streaming "
               "read\n  measured at the start\n");
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            if (!only_type || strcasecmp(only_type, rlx_dtype_name(types[ti])) == 0)
                bench_matvec_cache(types[ti], rlx_threadpool_size(pool), bw);
    }

    if (all || !strcmp(section, "attn")) {
        printf("\nattention (flash-style, online softmax)\n");
        static const int dims[] = {64, 128};
        for (int di = 0; di < 2; di++) {
            bench_attention(pool, 512, 512, 16, 8, dims[di], repeats);
            bench_attention(pool, 2048, 2048, 16, 8, dims[di], repeats);
            bench_attention(pool, 1, 2048, 16, 8, dims[di], repeats);
            bench_attention_dram(pool, 2048, 16, 8, dims[di]);
        }
    }
    rlx_threadpool_free(pool);
    return 0;
}
