/* The quantized GEMM (M > 1 rows of x through rlx_cpu_matmul: qgemm.c and its
 * AVX-512 panel kernels) against per-row dot products computed here in
 * double precision from the dequantized weights and the dequantized
 * quantized activations (Q8_0 blocks for Q4_0/Q8_0, Q8_K for the K-quants,
 * made with the scalar reference quantizer). The GEMM's integer sums are
 * exact, so only float summation order may differ: the bound is 2e-6 of
 * sum |w x| (the same allowance tests/test-cpu-quant.c gives the SIMD dots).
 * Every ISA this CPU runs is checked (on AVX2/scalar the per-row path
 * answers), and F16/BF16 weights (widened into the f32 GEMM) against the
 * same sums over f32 activations, for odd M and N (1, 3, 17, 65, 70), K a multiple of the block,
 * row strides wider than the rows, and thread-count invariance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/base/dtype.h"
#include "backends/cpu/kernels.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static bool half(rlx_dtype t)
{
    return t == RLX_DTYPE_F16 || t == RLX_DTYPE_BF16;
}

static bool k_quant(rlx_dtype t)
{
    return t == RLX_DTYPE_Q4_K || t == RLX_DTYPE_Q5_K || t == RLX_DTYPE_Q6_K;
}

static size_t row_bytes(rlx_dtype t, int64_t K)
{
    uint64_t b = 0;
    assert_int_equal(rlx_dtype_row_bytes(t, (uint64_t)K, &b), RLX_OK);
    return (size_t)b;
}

/* One shape on every ISA. */
static void check(rlx_threadpool *pool, rlx_dtype t, int64_t M, int64_t N, int64_t K)
{
    /* half weights meet f32 activations (no activation quantization) */
    const rlx_dtype at = half(t) ? RLX_DTYPE_F32 : k_quant(t) ? RLX_DTYPE_Q8_K : RLX_DTYPE_Q8_0;
    const int64_t ldx = K + 7, ldy = N + 3;
    size_t rb = row_bytes(t, K), arb = row_bytes(at, K);
    float *wf = malloc(sizeof(float) * (size_t)(N * K));
    float *wd = malloc(sizeof(float) * (size_t)(N * K));
    uint8_t *wq = malloc(rb * (size_t)N);
    float *x = malloc(sizeof(float) * (size_t)(M * ldx));
    float *xd = malloc(sizeof(float) * (size_t)(M * K));
    uint8_t *xq = malloc(arb);
    float *y = malloc(sizeof(float) * (size_t)(M * ldy));
    double *ref = malloc(sizeof(double) * (size_t)(M * N));
    double *mag = malloc(sizeof(double) * (size_t)(M * N));
    assert_non_null(wf);
    assert_non_null(y);
    for (int64_t i = 0; i < N * K; i++) /* a per-row offset exercises the mins */
        wf[i] = 0.05f * frand() + 0.01f * (float)((i / K) % 5);
    for (int64_t i = 0; i < M * ldx; i++)
        x[i] = frand() * (1.0f + (float)(i % 97) / 16.0f);
    for (int64_t n = 0; n < N; n++) {
        assert_int_equal(rlx_cpu_quantize_row(t, wf + n * K, wq + n * rb, K), RLX_OK);
        assert_int_equal(rlx_cpu_dequantize_row(t, wq + n * rb, wd + n * K, K), RLX_OK);
    }
    for (int64_t m = 0; m < M; m++) {
        assert_int_equal(rlx_cpu_quantize_row(at, x + m * ldx, xq, K), RLX_OK);
        assert_int_equal(rlx_cpu_dequantize_row(at, xq, xd + m * K, K), RLX_OK);
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)wd[n * K + k] * (double)xd[m * K + k];
                s += p;
                a += fabs(p);
            }
            ref[m * N + n] = s;
            mag[m * N + n] = a;
        }
    const rlx_cpu_isa best = rlx_cpu_isa_best();
    for (int isa = RLX_CPU_ISA_SCALAR; isa <= (int)best; isa++) {
        assert_int_equal(rlx_cpu_kernels_set_isa((rlx_cpu_isa)isa), RLX_OK);
        for (int64_t i = 0; i < M * ldy; i++)
            y[i] = NAN;
        assert_int_equal(rlx_cpu_matmul(pool, t, wq, rb, N, K, x, ldx, M, y, ldy, NULL, 0), RLX_OK);
        for (int64_t m = 0; m < M; m++) {
            for (int64_t n = 0; n < N; n++) {
                double got = y[m * ldy + n], want = ref[m * N + n];
                /* f32 FMA chains for the half types: ~K ulps of sum |w x| */
                double tol = (half(t) ? 1e-5 : 2e-6) * mag[m * N + n] + 1e-6;
                if (!(fabs(got - want) <= tol)) {
                    fprintf(stderr, "%s %s M%lld N%lld K%lld [%lld,%lld]: %.9g vs %.9g (tol %g)\n",
                            rlx_dtype_name(t), rlx_cpu_isa_name((rlx_cpu_isa)isa), (long long)M,
                            (long long)N, (long long)K, (long long)m, (long long)n, got, want, tol);
                    fail();
                }
            }
            for (int64_t n = N; n < ldy; n++) /* padding between rows untouched */
                assert_true(isnan(y[m * ldy + n]));
        }
    }
    rlx_cpu_kernels_set_isa(best);
    free(wf);
    free(wd);
    free(wq);
    free(x);
    free(xd);
    free(xq);
    free(y);
    free(ref);
    free(mag);
}

static const rlx_dtype types[] = {RLX_DTYPE_Q8_0, RLX_DTYPE_Q4_0, RLX_DTYPE_Q4_K, RLX_DTYPE_Q5_K,
                                  RLX_DTYPE_Q6_K, RLX_DTYPE_F16,  RLX_DTYPE_BF16};

static void odd_shapes(void **state)
{
    (void)state;
    rlx_threadpool *pool = NULL;
    assert_int_equal(rlx_threadpool_create(3, &pool), RLX_OK);
    static const int64_t ms[] = {1, 2, 3, 17, 65};
    static const int64_t ns[] = {1, 3, 17, 65, 70};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        int64_t bs = k_quant(types[t]) ? 256 : half(types[t]) ? 160 : 32;
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
            for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
                check(pool, types[t], ms[i], ns[j], bs * (j % 2 ? 3 : 1));
        check(NULL, types[t], 5, 33, bs * 2);
        check(pool, types[t], 9, 40, bs * 5);
    }
    rlx_threadpool_free(pool);
}

/* Results must not depend on the pool size (each output by one task). */
static void thread_invariance(void **state)
{
    (void)state;
    const int64_t M = 13, N = 97, K = 512;
    rlx_threadpool *p4 = NULL;
    assert_int_equal(rlx_threadpool_create(4, &p4), RLX_OK);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t rb = row_bytes(types[t], K);
        float *wf = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * M * K);
        float *y1 = malloc(sizeof(float) * M * N), *y2 = malloc(sizeof(float) * M * N);
        uint8_t *wq = malloc(rb * N);
        for (int64_t i = 0; i < N * K; i++)
            wf[i] = frand();
        for (int64_t i = 0; i < M * K; i++)
            x[i] = frand();
        for (int64_t n = 0; n < N; n++)
            rlx_cpu_quantize_row(types[t], wf + n * K, wq + n * rb, K);
        assert_int_equal(rlx_cpu_matmul(NULL, types[t], wq, rb, N, K, x, K, M, y1, N, NULL, 0),
                         RLX_OK);
        assert_int_equal(rlx_cpu_matmul(p4, types[t], wq, rb, N, K, x, K, M, y2, N, NULL, 0),
                         RLX_OK);
        assert_memory_equal(y1, y2, sizeof(float) * M * N);
        free(wf);
        free(x);
        free(y1);
        free(y2);
        free(wq);
    }
    rlx_threadpool_free(p4);
}

/* A caller-provided scratch of the advertised size is enough; a smaller one
 * is refused before anything is written. */
static void scratch_size(void **state)
{
    (void)state;
    const int64_t M = 7, N = 45, K = 256;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t rb = row_bytes(types[t], K);
        uint8_t *wq = calloc(N, rb);
        float *x = calloc(M * K, sizeof(float)), *y = malloc(sizeof(float) * M * N);
        size_t sb = rlx_cpu_matmul_scratch_bytes(types[t], M, K, 2);
        assert_true(sb > 0);
        void *s = malloc(sb);
        rlx_threadpool *p2 = NULL;
        assert_int_equal(rlx_threadpool_create(2, &p2), RLX_OK);
        assert_int_equal(rlx_cpu_matmul(p2, types[t], wq, rb, N, K, x, K, M, y, N, s, sb), RLX_OK);
        for (int64_t i = 0; i < M * N; i++)
            assert_true(y[i] == 0.0f);
        if (!half(types[t])) /* the half path packs into its own buffers */
            assert_int_equal(rlx_cpu_matmul(p2, types[t], wq, rb, N, K, x, K, M, y, N, s, sb / 2),
                             RLX_ERR_INVALID_ARG);
        rlx_threadpool_free(p2);
        free(s);
        free(wq);
        free(x);
        free(y);
    }
}

int main(void)
{
    rlx_cpu_kernels_init();
    print_message("kernels: %s\n", rlx_cpu_isa_name(rlx_cpu_kernels_isa()));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(odd_shapes),
        cmocka_unit_test(thread_invariance),
        cmocka_unit_test(scratch_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
