/* `rlx bench ops`: micro-benchmarks of the CPU kernels. Not a test: it prints
 * figures for humans (memory bandwidth, GEMM GFLOP/s against OpenBLAS,
 * quantized matvec bandwidth, attention time). */
#include "app/rlx-bench-ops.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu-features.h"
#include "backends/cpu/kernels.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

/* ---------------------------------------------------------- bandwidth */

typedef struct {
    const uint64_t *buf;
    size_t words_per_task;
    uint64_t sums[256];
} bw_ctx;

static void bw_task(void *vc, int64_t task, int thread)
{
    bw_ctx *c = vc;
    const uint64_t *p = c->buf + (size_t)task * c->words_per_task;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= c->words_per_task; i += 4) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
    }
    c->sums[thread & 255] += a0 ^ a1 ^ a2 ^ a3;
}

double rlx_bench_measure_bandwidth(rlx_threadpool *pool, int repeats, size_t bytes)
{
    uint64_t *buf = xalloc(bytes);
    memset(buf, 1, bytes);
    int nth = rlx_threadpool_size(pool);
    /* 16 tasks per thread: dynamic balancing, long sequential streams */
    int64_t tasks = (int64_t)nth * 16;
    bw_ctx c = {.buf = buf, .words_per_task = bytes / 8 / (size_t)tasks};
    double best = 0;
    for (int r = 0; r < repeats + 1; r++) {
        double t0 = now_s();
        rlx_parallel_for(pool, tasks, bw_task, &c);
        double t = now_s() - t0;
        double gbs = (double)(c.words_per_task * 8 * (size_t)tasks) / t / 1e9;
        if (r > 0 && gbs > best)
            best = gbs;
    }
    free(buf);
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
    openblas_set_num_threads(rlx_threadpool_size(pool));
    for (int r = 0; r < repeats + 1; r++) {
        for (int impl = 0; impl < 3; impl++) {
            double t0 = now_s();
            if (impl == 1)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                            A, (int)K, B, (int)N, 0.0f, C, (int)N);
            else
                rlx_cpu_sgemm(pool, impl == 0 ? RLX_CPU_GEMM_OWN : RLX_CPU_GEMM_AUTO, false, false,
                              M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
            double t = now_s() - t0;
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

/* --------------------------------------------------------------- matvec */

static void bench_matvec(rlx_threadpool *pool, rlx_dtype t, int64_t N, int64_t K, int repeats)
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
    uint8_t *w = xalloc(bytes * (size_t)copies);
    float *row = xalloc((size_t)K * 4);
    for (int64_t k = 0; k < K; k++)
        row[k] = frand();
    rlx_cpu_quantize_row(t, row, w, K);
    for (int64_t n = 1; n < N; n++)
        memcpy(w + (size_t)n * rb, w, rb);
    for (int c = 1; c < copies; c++)
        memcpy(w + (size_t)c * bytes, w, bytes);
    float *y = xalloc((size_t)N * 4);
    size_t sb = rlx_cpu_matmul_scratch_bytes(t, 1, K, rlx_threadpool_size(pool));
    void *scratch = xalloc(sb);
    int iters = copies * (repeats > 0 ? repeats : 1);
    if (iters < 8)
        iters = 8;
    /* warm-up pass over every copy (page faults, pool spin-up) */
    for (int c = 0; c < copies; c++)
        rlx_cpu_matmul(pool, t, w + (size_t)c * bytes, rb, N, K, row, K, 1, y, N, scratch, sb);
    double t0 = now_s();
    for (int i = 0; i < iters; i++)
        rlx_cpu_matmul(pool, t, w + (size_t)(i % copies) * bytes, rb, N, K, row, K, 1, y, N,
                       scratch, sb);
    double dt = (now_s() - t0) / iters;
    double gbs = (double)bytes / dt / 1e9;
    /* bandwidth again, right after: on a shared machine the figure drifts */
    double bw = rlx_bench_measure_bandwidth(pool, 1, (size_t)256 << 20);
    printf("  %-5s %7lld x %-5lld %8.1f MB %9.1f us %7.2f GB/s  (read bw %5.2f) %5.1f%%\n",
           rlx_dtype_name(t), (long long)N, (long long)K, (double)bytes / 1e6, dt * 1e6, gbs, bw,
           100.0 * gbs / bw);
    free(w);
    free(row);
    free(y);
    free(scratch);
}

/* ------------------------------------------------------------ attention */

static void bench_attention(rlx_threadpool *pool, int64_t n_q, int64_t n_kv, int nh, int nkv, int D,
                            int repeats)
{
    float *q = xalloc((size_t)(n_q * nh * D) * 4), *o = xalloc((size_t)(n_q * nh * D) * 4);
    uint16_t *k = xalloc((size_t)(n_kv * nkv * D) * 2), *v = xalloc((size_t)(n_kv * nkv * D) * 2);
    for (int64_t i = 0; i < n_q * nh * D; i++)
        q[i] = frand();
    for (int64_t i = 0; i < n_kv * nkv * D; i++) {
        k[i] = rlx_f32_to_f16(frand());
        v[i] = rlx_f32_to_f16(frand());
    }
    rlx_cpu_attn_params p = {
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
        .k_ld_tok = (int64_t)nkv * D,
        .k_ld_head = D,
        .v = v,
        .v_ld_tok = (int64_t)nkv * D,
        .v_ld_head = D,
        .out = o,
        .o_ld_tok = (int64_t)nh * D,
        .o_ld_head = D,
        .scale = 1.0f / sqrtf((float)D),
        .mask = RLX_CPU_ATTN_CAUSAL,
        .q_pos0 = n_kv - n_q,
    };
    size_t sb = rlx_cpu_attention_scratch_bytes(&p, rlx_threadpool_size(pool));
    void *scratch = xalloc(sb);
    double best = 1e30;
    for (int r = 0; r < repeats + 1; r++) {
        double t0 = now_s();
        rlx_cpu_attention(pool, &p, scratch, sb);
        double t = now_s() - t0;
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

static void usage(void)
{
    printf("usage: rlx bench ops [-t THREADS] [-r REPEATS] [--section S]\n"
           "  sections: all (default), bw, gemm, matvec, attn\n");
}

int rlx_bench_ops_main(int argc, char **argv)
{
    int threads = 0, repeats = 3;
    const char *section = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            repeats = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--section") && i + 1 < argc) {
            section = argv[++i];
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (repeats < 1)
        repeats = 1;
    bool all = !strcmp(section, "all");
    rlx_cpu_kernels_init();
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
        printf("\nf32 GEMM GFLOP/s (row-major, C = A.B)\n");
        printf("  %-22s %10s %10s %10s\n", "M x N x K", "ours", "OpenBLAS", "auto");
        static const int64_t shapes[][3] = {
            {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}, {512, 4096, 4096}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            double g[3];
            time_gemm(pool, M, N, K, repeats, g);
            char shape[64];
            snprintf(shape, sizeof shape, "%lld x %lld x %lld", (long long)M, (long long)N,
                     (long long)K);
            printf("  %-22s %10.1f %10.1f %10.1f\n", shape, g[0], g[1], g[2]);
        }
    }

    if (all || !strcmp(section, "matvec")) {
        printf("\nquantized matvec (M = 1), weights streamed from DRAM; GB/s = weight bytes / "
               "time, %% of a streaming read measured right after each row\n");
        static const rlx_dtype types[] = {RLX_DTYPE_Q4_0, RLX_DTYPE_Q8_0, RLX_DTYPE_Q4_K,
                                          RLX_DTYPE_Q5_K, RLX_DTYPE_Q6_K, RLX_DTYPE_F16};
        static const int64_t shapes[][2] = {
            {1024, 3072}, {2048, 8192}, {4096, 4096}, {151936, 1024}};
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                bench_matvec(pool, types[ti], shapes[s][0], shapes[s][1], repeats);
    }

    if (all || !strcmp(section, "attn")) {
        printf("\nattention (flash-style, online softmax)\n");
        static const int dims[] = {64, 128};
        for (int di = 0; di < 2; di++) {
            bench_attention(pool, 512, 512, 16, 8, dims[di], repeats);
            bench_attention(pool, 2048, 2048, 16, 8, dims[di], repeats);
            bench_attention(pool, 1, 2048, 16, 8, dims[di], repeats);
        }
    }
    rlx_threadpool_free(pool);
    return 0;
}
