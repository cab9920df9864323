/* Block formats and quantized matmul of the CPU kernel library.
 *
 * - Dequantization of fixed blocks is checked against tests/reference/
 *   gen-quant-ref.py, an independent decoder of the ggml layouts that rounds
 *   to float32 after every operation, so the match is exact up to 1 ulp
 *   (double-rounding of a subtraction in Python is the only slack).
 * - A few blocks are built by hand and checked against values worked out in
 *   the comments.
 * - quantize -> dequantize keeps the RMS error under a per-type bound. The
 *   bounds are the uniform-quantization noise step/sqrt(12) of each format on
 *   Gaussian data, with margin; they catch a broken scale search or packing,
 *   not small quality changes.
 * - Every SIMD path equals the scalar path within float reassociation error,
 *   and the matmul equals a double-precision reference within the error the
 *   on-the-fly activation quantization introduces (bound derived in
 *   act_quant_bound()).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/kernels.h"
#include "reference/quant-ref-data.h"

static uint64_t rng_state = 88172645463325252ull;

static double rnd_uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static float rnd_gauss(void)
{
    double u = rnd_uniform() + 1e-12, v = rnd_uniform();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void fill_gauss(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd_gauss() * scale;
}

static size_t row_bytes(rlx_dtype t, int64_t k)
{
    uint64_t b = 0;
    assert_int_equal(rlx_dtype_row_bytes(t, (uint64_t)k, &b), RLX_OK);
    return (size_t)b;
}

/* ---------------------------------------------------------------- fixtures */

static void dequant_matches_reference(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof quant_refs / sizeof quant_refs[0]; i++) {
        const struct quant_ref *r = &quant_refs[i];
        rlx_dtype t = rlx_dtype_from_name(r->type);
        assert_true(rlx_cpu_can_dequantize(t));
        float *out = malloc(r->n_values * sizeof(float));
        assert_int_equal(rlx_cpu_dequantize_row(t, r->bytes, out, r->n_values), RLX_OK);
        for (unsigned j = 0; j < r->n_values; j++) {
            float want = r->values[j];
            float tol = fabsf(want) * 2.4e-7f; /* 2 ulp */
            if (fabsf(out[j] - want) > tol) {
                fprintf(stderr, "%s element %u: got %.9g want %.9g\n", r->type, j, out[j], want);
                fail();
            }
        }
        free(out);
    }
}

/* Q4_0 with d = 0.5 (f16 0x3800), qs[j] = j | (15 - j) << 4:
 * element j = 0.5 * (j - 8), element 16 + j = 0.5 * (7 - j). */
static void hand_q4_0(void **state)
{
    (void)state;
    uint8_t blk[18] = {0x00, 0x38};
    for (int j = 0; j < 16; j++)
        blk[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    assert_int_equal(rlx_cpu_dequantize_row(RLX_DTYPE_Q4_0, blk, y, 32), RLX_OK);
    for (int j = 0; j < 16; j++) {
        assert_float_equal(y[j], 0.5 * (j - 8), 0);
        assert_float_equal(y[16 + j], 0.5 * (7 - j), 0);
    }
}

/* Q8_0 with d = 2 (0x4000): element j = 2 * qs[j]. */
static void hand_q8_0(void **state)
{
    (void)state;
    uint8_t blk[34] = {0x00, 0x40};
    for (int j = 0; j < 32; j++)
        blk[2 + j] = (uint8_t)(int8_t)(j - 16);
    float y[32];
    assert_int_equal(rlx_cpu_dequantize_row(RLX_DTYPE_Q8_0, blk, y, 32), RLX_OK);
    for (int j = 0; j < 32; j++)
        assert_float_equal(y[j], 2.0 * (j - 16), 0);
}

/* Q4_K: d = 1, dmin = 0.5; scales[0..3] = 1,2,3,4 (sub-blocks 0..3), mins
 * [4..7] = 2 (sub-blocks 0..3 min 2); sub-blocks 4..7 take their low 4 bits
 * from scales[8..11] = 0x15 (scale 5, min 1) and high bits from the top two
 * bits of scales[0..7] (zero here). All nibbles 3:
 *   sub-block j < 4: (j+1)*3 - 0.5*2 = 3j + 2;  j >= 4: 5*3 - 0.5*1 = 14.5 */
static void hand_q4_k(void **state)
{
    (void)state;
    uint8_t blk[144] = {0x00, 0x3c, 0x00, 0x38};
    uint8_t *sc = blk + 4;
    for (int j = 0; j < 4; j++) {
        sc[j] = (uint8_t)(j + 1);
        sc[j + 4] = 2;
        sc[j + 8] = 0x15;
    }
    memset(blk + 16, 0x33, 128);
    float y[256];
    assert_int_equal(rlx_cpu_dequantize_row(RLX_DTYPE_Q4_K, blk, y, 256), RLX_OK);
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        double want = j < 4 ? 3.0 * j + 2.0 : 14.5;
        assert_float_equal(y[e], want, 0);
    }
}

/* Q6_K: d = 1, scales[g] = g - 8, ql = 0x21 everywhere (low nibble 1, high
 * nibble 2), qh = 0b11100100 (bits for quarters 0..3 = 0,1,2,3):
 *   quarter 0: (1 | 0<<4) - 32 = -31   quarter 1: (1 | 1<<4) - 32 = -15
 *   quarter 2: (2 | 2<<4) - 32 =   2   quarter 3: (2 | 3<<4) - 32 =  18
 * element e (half h, quarter q, index l) scale = scales[e/16]. */
static void hand_q6_k(void **state)
{
    (void)state;
    uint8_t blk[210];
    memset(blk, 0x21, 128);
    memset(blk + 128, 0xE4, 64);
    for (int g = 0; g < 16; g++)
        blk[192 + g] = (uint8_t)(int8_t)(g - 8);
    blk[208] = 0x00;
    blk[209] = 0x3c;
    float y[256];
    assert_int_equal(rlx_cpu_dequantize_row(RLX_DTYPE_Q6_K, blk, y, 256), RLX_OK);
    static const int qv[4] = {-31, -15, 2, 18};
    for (int e = 0; e < 256; e++) {
        int quarter = (e % 128) / 32;
        assert_float_equal(y[e], (double)(e / 16 - 8) * qv[quarter], 0);
    }
}

static void bad_args(void **state)
{
    (void)state;
    float y[64];
    uint8_t blk[64] = {0};
    assert_int_equal(rlx_cpu_dequantize_row(RLX_DTYPE_Q4_0, blk, y, 33), RLX_ERR_INVALID_ARG);
    assert_int_equal(rlx_cpu_dequantize_row(RLX_DTYPE_IQ2_XXS, blk, y, 256), RLX_ERR_INVALID_ARG);
    assert_int_equal(rlx_cpu_quantize_row(RLX_DTYPE_Q2_K, y, blk, 256), RLX_ERR_INVALID_ARG);
    assert_int_equal(
        rlx_cpu_matmul(NULL, RLX_DTYPE_Q4_K, blk, 144, 1, 100, y, 100, 1, y, 1, NULL, 0),
        RLX_ERR_INVALID_ARG);
}

/* --------------------------------------------------------- round trips */

static void round_trip_error(void **state)
{
    (void)state;
    static const struct {
        rlx_dtype t;
        double max_rel_rms; /* RMS error / RMS of the data */
    } cases[] = {
        /* Q8: step = amax/127 ~ 2.5 sigma/127 over 32 values -> 0.6% */
        {RLX_DTYPE_Q8_0, 0.01},
        {RLX_DTYPE_Q8_K, 0.01},
        /* 4-bit absmax: step ~ 2.3 sigma / 8 -> ~8% */
        {RLX_DTYPE_Q4_0, 0.12},
        {RLX_DTYPE_Q4_1, 0.10},
        {RLX_DTYPE_Q5_0, 0.06},
        {RLX_DTYPE_Q5_1, 0.05},
        /* K-quants: fitted per 32 (16 for Q6_K) plus quantized scales */
        {RLX_DTYPE_Q4_K, 0.10},
        {RLX_DTYPE_Q5_K, 0.05},
        {RLX_DTYPE_Q6_K, 0.025},
        /* half: 11-bit mantissa -> 2^-12 relative; bf16 8 bits -> 2^-9 */
        {RLX_DTYPE_F16, 3e-4},
        {RLX_DTYPE_BF16, 3e-3},
    };
    const int64_t n = 256 * 32;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    void *q = malloc(n * 4);
    fill_gauss(x, n, 1.0f);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_int_equal(rlx_cpu_quantize_row(cases[c].t, x, q, n), RLX_OK);
        assert_int_equal(rlx_cpu_dequantize_row(cases[c].t, q, y, n), RLX_OK);
        double se = 0, sx = 0;
        for (int64_t i = 0; i < n; i++) {
            se += (double)(y[i] - x[i]) * (y[i] - x[i]);
            sx += (double)x[i] * x[i];
        }
        double rel = sqrt(se / sx);
        print_message("  %-5s relative RMS error %.5f (bound %.4f)\n", rlx_dtype_name(cases[c].t),
                      rel, cases[c].max_rel_rms);
        assert_true(rel < cases[c].max_rel_rms);
    }
    /* constant and zero rows must not produce NaN */
    for (int64_t i = 0; i < n; i++)
        x[i] = i < n / 2 ? 0.0f : 1.5f;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_int_equal(rlx_cpu_quantize_row(cases[c].t, x, q, n), RLX_OK);
        assert_int_equal(rlx_cpu_dequantize_row(cases[c].t, q, y, n), RLX_OK);
        for (int64_t i = 0; i < n; i++)
            assert_true(fabsf(y[i] - x[i]) <= 0.1f);
    }
    free(x);
    free(y);
    free(q);
}

static void half_rows(void **state)
{
    (void)state;
    const int64_t n = 1000; /* not a multiple of 8 or 16: exercises the tails */
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    uint16_t *h = malloc(n * sizeof(uint16_t));
    fill_gauss(x, n, 100.0f);
    x[0] = 70000.0f; /* overflow to inf */
    x[1] = 1e-6f;    /* subnormal half */
    x[2] = -0.0f;
    for (int isa = RLX_CPU_ISA_SCALAR; isa <= (int)rlx_cpu_isa_best(); isa++) {
        assert_int_equal(rlx_cpu_kernels_set_isa((rlx_cpu_isa)isa), RLX_OK);
        rlx_cpu_f32_to_f16_row(x, h, n);
        for (int64_t i = 0; i < n; i++)
            assert_int_equal(h[i], rlx_f32_to_f16(x[i]));
        rlx_cpu_f16_to_f32_row(h, y, n);
        for (int64_t i = 0; i < n; i++)
            assert_memory_equal(&y[i], &(float){rlx_f16_to_f32(h[i])}, 4);
        rlx_cpu_f32_to_bf16_row(x, h, n);
        for (int64_t i = 0; i < n; i++)
            assert_int_equal(h[i], rlx_f32_to_bf16(x[i]));
        rlx_cpu_bf16_to_f32_row(h, y, n);
        for (int64_t i = 0; i < n; i++)
            assert_memory_equal(&y[i], &(float){rlx_bf16_to_f32(h[i])}, 4);
    }
    rlx_cpu_kernels_set_isa(rlx_cpu_isa_best());
    free(x);
    free(y);
    free(h);
}

/* ------------------------------------------------------------ matmul */

static const rlx_dtype mm_types[] = {
    RLX_DTYPE_Q4_0, RLX_DTYPE_Q4_1, RLX_DTYPE_Q5_0, RLX_DTYPE_Q5_1, RLX_DTYPE_Q8_0, RLX_DTYPE_Q4_K,
    RLX_DTYPE_Q5_K, RLX_DTYPE_Q6_K, RLX_DTYPE_F16,  RLX_DTYPE_BF16, RLX_DTYPE_F32,
};

static bool is_k_quant(rlx_dtype t)
{
    return t == RLX_DTYPE_Q4_K || t == RLX_DTYPE_Q5_K || t == RLX_DTYPE_Q6_K;
}

static bool is_float(rlx_dtype t)
{
    return t == RLX_DTYPE_F16 || t == RLX_DTYPE_BF16 || t == RLX_DTYPE_F32;
}

/* Error bound of y = W . q(x) against W . x in exact arithmetic:
 *  - q8 rounding moves each x_k by at most d_block/2 with d = amax_block/127,
 *    so |sum w_k (x_k - q(x_k))| <= sum |w_k| amax_block(k) / 254
 *    (plus the f16 rounding of d for Q8_0: relative 2^-11 of |x|);
 *  - float accumulation adds at most ~K * 2^-24 * sum |w_k x_k|; we allow
 *    1e-5 * sum|w x| which covers K up to ~160 blocks with reassociation. */
static double act_quant_bound(rlx_dtype t, const float *w, const float *x, int64_t K)
{
    double b = 0, s = 0;
    int bs = is_k_quant(t) ? 256 : 32;
    for (int64_t k0 = 0; k0 < K; k0 += bs) {
        float amax = 0;
        for (int64_t k = k0; k < k0 + bs; k++)
            amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
        for (int64_t k = k0; k < k0 + bs; k++) {
            if (!is_float(t))
                b += fabs(w[k]) * (amax / 254.0 * 1.001 + fabs(x[k]) * 0.0005);
            s += fabs((double)w[k] * x[k]);
        }
    }
    return b + 1e-5 * s + 1e-6;
}

static void check_matmul(rlx_threadpool *pool, rlx_dtype t, int64_t N, int64_t K, int64_t M)
{
    size_t rb = row_bytes(t, K);
    float *wf = malloc((size_t)(N * K) * sizeof(float));
    float *wd = malloc((size_t)(N * K) * sizeof(float)); /* dequantized W */
    uint8_t *wq = malloc(rb * (size_t)N);
    const int64_t ldx = K + 3, ldy = N + 5;
    float *x = malloc((size_t)(M * ldx) * sizeof(float));
    float *y = malloc((size_t)(M * ldy) * sizeof(float));
    float *y0 = malloc((size_t)(M * ldy) * sizeof(float));
    fill_gauss(wf, N * K, 0.05f);
    fill_gauss(x, M * ldx, 1.0f);
    for (int64_t n = 0; n < N; n++) {
        assert_int_equal(rlx_cpu_quantize_row(t, wf + n * K, wq + n * rb, K), RLX_OK);
        assert_int_equal(rlx_cpu_dequantize_row(t, wq + n * rb, wd + n * K, K), RLX_OK);
    }
    const rlx_cpu_isa best = rlx_cpu_isa_best();
    for (int isa = RLX_CPU_ISA_SCALAR; isa <= (int)best; isa++) {
        assert_int_equal(rlx_cpu_kernels_set_isa((rlx_cpu_isa)isa), RLX_OK);
        for (int64_t i = 0; i < M * ldy; i++)
            y[i] = NAN;
        assert_int_equal(rlx_cpu_matmul(pool, t, wq, rb, N, K, x, ldx, M, y, ldy, NULL, 0), RLX_OK);
        for (int64_t m = 0; m < M; m++) {
            for (int64_t n = 0; n < N; n++) {
                double ref = 0;
                for (int64_t k = 0; k < K; k++)
                    ref += (double)wd[n * K + k] * x[m * ldx + k];
                double got = y[m * ldy + n];
                double bound = act_quant_bound(t, wd + n * K, x + m * ldx, K);
                if (!(fabs(got - ref) <= bound)) {
                    fprintf(
                        stderr, "%s isa %s N%lld K%lld M%lld [%lld,%lld]: %g vs %g (bound %g)\n",
                        rlx_dtype_name(t), rlx_cpu_isa_name((rlx_cpu_isa)isa), (long long)N,
                        (long long)K, (long long)M, (long long)m, (long long)n, got, ref, bound);
                    fail();
                }
                if (isa == RLX_CPU_ISA_SCALAR) {
                    y0[m * ldy + n] = (float)got;
                } else {
                    /* same integer sums, same quantized activations: only the
                     * float reassociation of per-block terms differs */
                    double s = 0;
                    for (int64_t k = 0; k < K; k++)
                        s += fabs((double)wd[n * K + k] * x[m * ldx + k]);
                    assert_true(fabs(got - y0[m * ldy + n]) <= 2e-6 * s + 1e-6);
                }
            }
            /* the padding between rows stays untouched */
            for (int64_t n = N; n < ldy; n++)
                assert_true(isnan(y[m * ldy + n]));
        }
    }
    rlx_cpu_kernels_set_isa(best);
    free(wf);
    free(wd);
    free(wq);
    free(x);
    free(y);
    free(y0);
}

static void matmul_all_types(void **state)
{
    (void)state;
    rlx_threadpool *pool3 = NULL;
    assert_int_equal(rlx_threadpool_create(3, &pool3), RLX_OK);
    for (size_t i = 0; i < sizeof mm_types / sizeof mm_types[0]; i++) {
        rlx_dtype t = mm_types[i];
        int64_t bs = is_k_quant(t) ? 256 : 32;
        /* one block; many blocks; odd N; N not a multiple of the threads */
        check_matmul(NULL, t, 1, bs, 1);
        check_matmul(pool3, t, 7, bs, 3);
        check_matmul(pool3, t, 67, bs * 5, 1);
        check_matmul(pool3, t, 41, bs * 3, 17);
        if (!is_k_quant(t))
            check_matmul(pool3, t, 13, bs * 37, 2);
    }
    rlx_threadpool_free(pool3);
}

/* M == 1 takes the matrix-vector kernels (on AVX-512 a private activation
 * layout, two accumulators per row): even and odd row counts, one row,
 * block counts that leave every tail (Q4_0 steps of 8 blocks in groups of 4,
 * Q8_0 steps of 4 in pairs),
 * all compared with the scalar path and float64 inside check_matmul. */
static void matvec_shapes(void **state)
{
    (void)state;
    rlx_threadpool *pool2 = NULL;
    assert_int_equal(rlx_threadpool_create(2, &pool2), RLX_OK);
    for (size_t i = 0; i < sizeof mm_types / sizeof mm_types[0]; i++) {
        rlx_dtype t = mm_types[i];
        int64_t bs = is_k_quant(t) ? 256 : 32;
        for (int64_t nb = 1; nb <= 9; nb++) {
            check_matmul(NULL, t, 1, bs * nb, 1);
            check_matmul(NULL, t, 2, bs * nb, 1);
            check_matmul(pool2, t, 3 + nb, bs * nb, 1);
        }
        check_matmul(pool2, t, 64, bs * 4, 1);
        check_matmul(pool2, t, 33, bs * (is_k_quant(t) ? 6 : 45), 1);
    }
    /* F16 rows of any length: steps of 64, then of 16, then the masked tail */
    for (int64_t K = 1; K <= 140; K += 23) {
        const int64_t N = 5;
        float *wf = malloc((size_t)(N * K) * sizeof(float)), *x = malloc((size_t)K * 4);
        uint16_t *wh = malloc((size_t)(N * K) * 2);
        float y[5];
        fill_gauss(wf, N * K, 1.0f);
        fill_gauss(x, K, 1.0f);
        for (int64_t i = 0; i < N * K; i++)
            wh[i] = rlx_f32_to_f16(wf[i]);
        assert_int_equal(
            rlx_cpu_matmul(pool2, RLX_DTYPE_F16, wh, (size_t)K * 2, N, K, x, K, 1, y, N, NULL, 0),
            RLX_OK);
        for (int64_t n = 0; n < N; n++) {
            double ref = 0, s = 0;
            for (int64_t k = 0; k < K; k++) {
                ref += (double)rlx_f16_to_f32(wh[n * K + k]) * x[k];
                s += fabs((double)rlx_f16_to_f32(wh[n * K + k]) * x[k]);
            }
            assert_true(fabs(y[n] - ref) <= 1e-6 * s + 1e-6);
        }
        free(wf);
        free(x);
        free(wh);
    }
    rlx_threadpool_free(pool2);
}

/* Results must not depend on the pool size: with another split of the
 * rows, a row may go through a kernel's four-row path or its one-row path,
 * which must give the same bits. Every type with a matrix-vector kernel. */
static void matmul_thread_invariance(void **state)
{
    (void)state;
    static const rlx_dtype types[] = {RLX_DTYPE_Q4_K, RLX_DTYPE_Q5_K, RLX_DTYPE_Q6_K,
                                      RLX_DTYPE_Q8_0, RLX_DTYPE_Q4_0, RLX_DTYPE_F16};
    const int64_t N = 101, K = 512 + 96, M = 5;
    rlx_threadpool *p4 = NULL, *p3 = NULL;
    assert_int_equal(rlx_threadpool_create(4, &p4), RLX_OK);
    assert_int_equal(rlx_threadpool_create(3, &p3), RLX_OK);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        /* K-quants need whole 256-blocks */
        const int64_t k = is_k_quant(types[t]) ? 512 : K;
        size_t rb = row_bytes(types[t], k);
        float *wf = malloc(N * k * sizeof(float)), *x = malloc(M * k * sizeof(float));
        float *y1 = malloc(M * N * sizeof(float)), *y2 = malloc(M * N * sizeof(float));
        float *y3 = malloc(N * sizeof(float));
        uint8_t *wq = malloc(rb * N);
        fill_gauss(wf, N * k, 1.0f);
        fill_gauss(x, M * k, 1.0f);
        for (int64_t n = 0; n < N; n++)
            assert_int_equal(rlx_cpu_quantize_row(types[t], wf + n * k, wq + n * rb, k), RLX_OK);
        assert_int_equal(rlx_cpu_matmul(NULL, types[t], wq, rb, N, k, x, k, M, y1, N, NULL, 0),
                         RLX_OK);
        assert_int_equal(rlx_cpu_matmul(p4, types[t], wq, rb, N, k, x, k, M, y2, N, NULL, 0),
                         RLX_OK);
        assert_memory_equal(y1, y2, M * N * sizeof(float));
        /* M == 1: 1, 4 and 3 threads split the 101 rows differently */
        rlx_cpu_matmul(NULL, types[t], wq, rb, N, k, x, k, 1, y1, N, NULL, 0);
        rlx_cpu_matmul(p4, types[t], wq, rb, N, k, x, k, 1, y2, N, NULL, 0);
        rlx_cpu_matmul(p3, types[t], wq, rb, N, k, x, k, 1, y3, N, NULL, 0);
        if (memcmp(y1, y2, N * sizeof(float)) || memcmp(y1, y3, N * sizeof(float)))
            fprintf(stderr, "%s: matrix-vector results depend on the thread count\n",
                    rlx_dtype_name(types[t]));
        assert_memory_equal(y1, y2, N * sizeof(float));
        assert_memory_equal(y1, y3, N * sizeof(float));
        free(wf);
        free(x);
        free(y1);
        free(y2);
        free(y3);
        free(wq);
    }
    rlx_threadpool_free(p4);
    rlx_threadpool_free(p3);
}

/* Several weights' matrix-vector products of one x as one pool job give
 * each product's bits exactly (the same kernels over the same slices): mixed
 * types, two of one type sharing the laid-out x, odd row counts. Without an
 * AVX-512 kernel the job declines and writes nothing. */
static void matvec_multi_matches_single(void **state)
{
    (void)state;
    static const rlx_dtype types[] = {RLX_DTYPE_Q4_K, RLX_DTYPE_Q6_K, RLX_DTYPE_Q4_K,
                                      RLX_DTYPE_Q8_0};
    static const int64_t rows[] = {101, 37, 64, 5};
    const int64_t K = 512;
    const int n = 4;
    rlx_threadpool *p3 = NULL;
    assert_int_equal(rlx_threadpool_create(3, &p3), RLX_OK);
    float *x = malloc(K * sizeof(float));
    fill_gauss(x, K, 1.0f);
    uint8_t *w[4];
    float *y1[4], *y2[4];
    rlx_cpu_mv_seg seg[4];
    for (int s = 0; s < n; s++) {
        size_t rb = row_bytes(types[s], K);
        float *wf = malloc(rows[s] * K * sizeof(float));
        fill_gauss(wf, rows[s] * K, 1.0f);
        w[s] = malloc(rb * rows[s]);
        for (int64_t r = 0; r < rows[s]; r++)
            assert_int_equal(rlx_cpu_quantize_row(types[s], wf + r * K, w[s] + r * rb, K), RLX_OK);
        free(wf);
        y1[s] = malloc(rows[s] * sizeof(float));
        y2[s] = calloc((size_t)rows[s], sizeof(float));
        seg[s] = (rlx_cpu_mv_seg){types[s], w[s], rb, rows[s], y2[s]};
    }
    size_t sb = rlx_cpu_matvec_multi_scratch_bytes(n, K);
    void *scratch = aligned_alloc(64, (sb + 63) / 64 * 64);
    rlx_threadpool *pools[2] = {NULL, p3};
    for (int p = 0; p < 2; p++) {
        bool ran = rlx_cpu_matvec_multi(pools[p], n, seg, x, K, scratch, sb);
        assert_int_equal(ran, rlx_cpu_kernels_isa() == RLX_CPU_ISA_AVX512);
        for (int s = 0; s < n; s++) {
            assert_int_equal(rlx_cpu_matmul(pools[p], types[s], w[s], row_bytes(types[s], K),
                                            rows[s], K, x, K, 1, y1[s], rows[s], NULL, 0),
                             RLX_OK);
            if (ran)
                assert_memory_equal(y1[s], y2[s], rows[s] * sizeof(float));
            else
                for (int64_t r = 0; r < rows[s]; r++)
                    assert_true(y2[s][r] == 0.0f); /* declined: nothing written */
        }
    }
    /* more weights than one job takes, or too little scratch: declined */
    assert_false(rlx_cpu_matvec_multi(p3, RLX_CPU_MV_MULTI_MAX + 1, seg, x, K, scratch, sb));
    assert_false(rlx_cpu_matvec_multi(p3, n, seg, x, K, scratch, sb / 2));
    for (int s = 0; s < n; s++) {
        free(w[s]);
        free(y1[s]);
        free(y2[s]);
    }
    free(scratch);
    free(x);
    rlx_threadpool_free(p3);
}

int main(void)
{
    rlx_cpu_kernels_init();
    print_message("kernels: %s\n", rlx_cpu_isa_name(rlx_cpu_kernels_isa()));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dequant_matches_reference),
        cmocka_unit_test(hand_q4_0),
        cmocka_unit_test(hand_q8_0),
        cmocka_unit_test(hand_q4_k),
        cmocka_unit_test(hand_q6_k),
        cmocka_unit_test(bad_args),
        cmocka_unit_test(round_trip_error),
        cmocka_unit_test(half_rows),
        cmocka_unit_test(matmul_all_types),
        cmocka_unit_test(matvec_shapes),
        cmocka_unit_test(matmul_thread_invariance),
        cmocka_unit_test(matvec_multi_matches_single),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
