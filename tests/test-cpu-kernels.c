/* f32 kernels of the CPU library against naive double-precision loops:
 * GEMM (ours and OpenBLAS), attention (every mask kind, GQA, f32/f16 KV),
 * norms, softmax, rope, conv2d / transposed conv2d, activations, the pool.
 * Every ISA path this CPU supports is run. Tolerances are stated per test:
 * a float32 sum of K products is within K * 2^-24 * sum|terms| of the exact
 * value (the standard gamma_K bound), and our exp/erf/tanh approximations add
 * a few 1e-7 relative. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "f8-ref.h"
#include "backends/cpu/cpu-features.h"
#include "backends/cpu/kernels.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float rnd(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}

static float *rnd_buf(int64_t n, float scale)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        p[i] = rnd() * scale;
    return p;
}

#define FOR_EACH_ISA(isa)                                                                       \
    for (int isa = RLX_CPU_ISA_SCALAR;                                                          \
         isa <= (int)rlx_cpu_isa_best() && rlx_cpu_kernels_set_isa((rlx_cpu_isa)isa) == RLX_OK; \
         isa++)

static rlx_threadpool *g_pool;

/* ---------------------------------------------------------------- pool */

static void count_task(void *ctx, int64_t t, int thread)
{
    atomic_int *hits = ctx;
    assert_true(thread >= 0 && thread < rlx_threadpool_size(g_pool));
    atomic_fetch_add(&hits[t], 1);
}

static void pool_runs_every_task_once(void **state)
{
    (void)state;
    enum { N = 1000 };
    static atomic_int hits[N];
    for (int round = 0; round < 200; round++) {
        int n = 1 + (round * 37) % N;
        for (int i = 0; i < n; i++)
            atomic_store(&hits[i], 0);
        rlx_parallel_for(g_pool, n, count_task, hits);
        for (int i = 0; i < n; i++)
            assert_int_equal(atomic_load(&hits[i]), 1);
    }
    assert_true(rlx_cpu_features_get()->physical_cores >= 1);
}

static void count_task2(void *ctx, int64_t t, int thread)
{
    atomic_int *hits = ctx;
    assert_true(thread == 0 || thread == 1);
    atomic_fetch_add(&hits[t], 1);
}

/* tasks of the first thread's share are slow, so the others take them over
 * from the back of its range */
typedef struct {
    atomic_int *hits;
    atomic_int by_other; /* tasks of share 0 run by another thread */
    int64_t share0;
} steal_ctx;

static void slow_task(void *vc, int64_t t, int thread)
{
    steal_ctx *c = vc;
    if (t < c->share0) {
        volatile double x = 1.0;
        for (int i = 0; i < 20000; i++)
            x = x * 1.0000001 + 1e-9;
        if (thread != 0)
            atomic_fetch_add(&c->by_other, 1);
    }
    atomic_fetch_add(&c->hits[t], 1);
}

static void pool_balances_and_survives_wraparound(void **state)
{
    (void)state;
    enum { N = 96 };
    static atomic_int hits[N];
    const int nth = rlx_threadpool_size(g_pool);
    steal_ctx c = {.hits = hits, .share0 = N / nth};
    int stolen = 0;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < N; i++)
            atomic_store(&hits[i], 0);
        atomic_store(&c.by_other, 0);
        rlx_parallel_for(g_pool, N, slow_task, &c);
        for (int i = 0; i < N; i++)
            assert_int_equal(atomic_load(&hits[i]), 1);
        stolen += atomic_load(&c.by_other);
    }
    /* the other threads' shares take no time: they must have helped */
    if (nth > 1)
        assert_true(stolen > 0);
    /* many more jobs than a 16-bit generation tag would count
     * (a pool of 2: the suite's pool of 3 may outnumber the cores) */
    rlx_threadpool *p2 = NULL;
    assert_int_equal(rlx_threadpool_create(2, &p2), RLX_OK);
    for (int round = 0; round < 70000; round++) {
        int n = 2 + round % 6;
        for (int i = 0; i < n; i++)
            atomic_store(&hits[i], 0);
        rlx_parallel_for(p2, n, count_task2, hits);
        for (int i = 0; i < n; i++)
            assert_int_equal(atomic_load(&hits[i]), 1);
    }
    rlx_threadpool_free(p2);
}

/* ---------------------------------------------------------------- gemm */

static void check_gemm(rlx_cpu_gemm_impl impl, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       float alpha, float beta)
{
    int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
    float *A = rnd_buf((ta ? K : M) * lda, 1.0f);
    float *B = rnd_buf((tb ? N : K) * ldb, 1.0f);
    float *C = rnd_buf(M * ldc, 1.0f);
    float *C0 = malloc((size_t)(M * ldc) * sizeof(float));
    memcpy(C0, C, (size_t)(M * ldc) * sizeof(float));
    if (beta == 0.0f)
        for (int64_t i = 0; i < M * ldc; i++)
            C[i] = NAN; /* beta = 0 must ignore C */
    rlx_cpu_sgemm(g_pool, impl, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (int64_t k = 0; k < K; k++) {
                double a = ta ? A[k * lda + i] : A[i * lda + k];
                double b = tb ? B[j * ldb + k] : B[k * ldb + j];
                s += a * b;
                sa += fabs(a * b);
            }
            double ref = alpha * s + (beta != 0.0f ? beta * C0[i * ldc + j] : 0.0);
            /* gamma_{K+2} bound on the float sum, scaled by |alpha| */
            double tol = (K + 2) * 6e-8 * (fabs(alpha) * sa + fabs(beta * C0[i * ldc + j])) + 1e-6;
            double got = C[i * ldc + j];
            if (!(fabs(got - ref) <= tol)) {
                fprintf(stderr, "gemm impl %d ta%d tb%d %lldx%lldx%lld [%lld,%lld] %g vs %g\n",
                        impl, ta, tb, (long long)M, (long long)N, (long long)K, (long long)i,
                        (long long)j, got, ref);
                fail();
            }
        }
    free(A);
    free(B);
    free(C);
    free(C0);
}

static void gemm_vs_naive(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {
        {1, 1, 1}, {13, 17, 19}, {12, 32, 256}, {100, 70, 300}, {257, 129, 65}, {33, 300, 513},
    };
    FOR_EACH_ISA(isa)
    {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 4; t++)
                for (int impl = RLX_CPU_GEMM_AUTO; impl <= RLX_CPU_GEMM_OWN; impl++) {
                    float beta = (t + (int)s) % 2 ? 0.5f : 0.0f;
                    check_gemm((rlx_cpu_gemm_impl)impl, t & 1, t & 2, shapes[s][0], shapes[s][1],
                               shapes[s][2], t == 3 ? -1.25f : 1.0f, beta);
                }
    }
}

/* ---------------------------------------------------------- attention */

static void check_attention(rlx_cpu_attn_mask mask, int64_t n_q, int64_t n_kv, int nh, int nkv,
                            int D, bool f16_kv, float softcap, int64_t window)
{
    const int64_t q_ld_tok = (int64_t)nh * D + 5, kv_ld_tok = (int64_t)nkv * D + 3;
    float *q = rnd_buf(n_q * q_ld_tok, 1.0f);
    float *k = rnd_buf(n_kv * kv_ld_tok, 1.0f);
    float *v = rnd_buf(n_kv * kv_ld_tok, 1.0f);
    uint16_t *kh = malloc((size_t)(n_kv * kv_ld_tok + 1) * 2);
    uint16_t *vh = malloc((size_t)(n_kv * kv_ld_tok + 1) * 2);
    if (f16_kv) { /* the reference sees exactly the values the kernel reads */
        for (int64_t i = 0; i < n_kv * kv_ld_tok; i++) {
            kh[i] = rlx_f32_to_f16(k[i]);
            k[i] = rlx_f16_to_f32(kh[i]);
            vh[i] = rlx_f32_to_f16(v[i]);
            v[i] = rlx_f16_to_f32(vh[i]);
        }
    }
    float *bias = NULL;
    if (mask == RLX_CPU_ATTN_BIAS) {
        bias = rnd_buf(nh * n_q * n_kv, 2.0f);
        for (int64_t i = 0; i < nh * n_q * n_kv; i += 7)
            bias[i] = -INFINITY;
    }
    float *out = malloc((size_t)(n_q * q_ld_tok) * sizeof(float));
    rlx_cpu_attn_params p = {
        .n_q = n_q,
        .n_kv = n_kv,
        .n_heads = nh,
        .n_kv_heads = nkv,
        .head_dim = D,
        .q = q,
        .q_ld_tok = q_ld_tok,
        .q_ld_head = D,
        .kv_type = f16_kv ? RLX_DTYPE_F16 : RLX_DTYPE_F32,
        .k = f16_kv ? (const void *)kh : k,
        .k_ld_tok = kv_ld_tok,
        .k_ld_head = D,
        .v = f16_kv ? (const void *)vh : v,
        .v_ld_tok = kv_ld_tok,
        .v_ld_head = D,
        .out = out,
        .o_ld_tok = q_ld_tok,
        .o_ld_head = D,
        .scale = 1.0f / sqrtf((float)D),
        .softcap = softcap,
        .mask = mask,
        .q_pos0 = n_kv - n_q,
        .window = window,
        .bias = bias,
        .bias_ld_q = n_kv,
        .bias_ld_head = n_q * n_kv,
    };
    assert_int_equal(rlx_cpu_attention(g_pool, &p, NULL, 0), RLX_OK);
    double *s = malloc((size_t)n_kv * sizeof(double) + 8);
    for (int h = 0; h < nh; h++) {
        int kvh = h / (nh / nkv);
        for (int64_t i = 0; i < n_q; i++) {
            int64_t pos = p.q_pos0 + i;
            double mx = -INFINITY;
            for (int64_t j = 0; j < n_kv; j++) {
                double d = 0;
                for (int e = 0; e < D; e++)
                    d += (double)q[i * q_ld_tok + h * D + e] * k[j * kv_ld_tok + kvh * D + e];
                d *= p.scale;
                if (softcap > 0)
                    d = softcap * tanh(d / softcap);
                bool vis = true;
                if (mask == RLX_CPU_ATTN_CAUSAL || mask == RLX_CPU_ATTN_SLIDING)
                    vis = j <= pos;
                if (mask == RLX_CPU_ATTN_SLIDING)
                    vis = vis && j > pos - window;
                if (mask == RLX_CPU_ATTN_BIAS)
                    d += bias[h * n_q * n_kv + i * n_kv + j];
                s[j] = vis ? d : -INFINITY;
                mx = s[j] > mx ? s[j] : mx;
            }
            double l = 0;
            for (int64_t j = 0; j < n_kv; j++) {
                s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx);
                l += s[j];
            }
            for (int e = 0; e < D; e++) {
                double o = 0;
                for (int64_t j = 0; j < n_kv; j++)
                    o += s[j] * v[j * kv_ld_tok + kvh * D + e];
                o = l > 0 ? o / l : 0;
                double got = out[i * q_ld_tok + h * D + e];
                /* outputs are convex combinations of |v| <= 1: absolute
                 * error from f32 dot products (D terms), exp approximation
                 * and the online rescaling stays far below 2e-5 */
                if (!(fabs(got - o) <= 2e-5)) {
                    fprintf(stderr, "attn mask %d nq %lld nkv %lld h %d i %lld e %d: %g vs %g\n",
                            mask, (long long)n_q, (long long)n_kv, h, (long long)i, e, got, o);
                    fail();
                }
            }
        }
    }
    free(s);
    free(q);
    free(k);
    free(v);
    free(kh);
    free(vh);
    free(bias);
    free(out);
}

static void attention_vs_naive(void **state)
{
    (void)state;
    static const int64_t lens[] = {1, 7, 33, 300};
    FOR_EACH_ISA(isa)
    {
        for (size_t li = 0; li < 4; li++) {
            int64_t L = lens[li];
            for (int m = RLX_CPU_ATTN_NONE; m <= RLX_CPU_ATTN_BIAS; m++) {
                bool f16 = (li + (size_t)m) % 2;
                /* prefill (n_q = n_kv) with GQA 8:2 */
                check_attention((rlx_cpu_attn_mask)m, L, L, 8, 2, 64, f16, 0.0f, 5);
                /* decode over a cache: one query at the end */
                check_attention((rlx_cpu_attn_mask)m, 1, L, 4, 4, 32, !f16, 0.0f, 16);
                /* decode with GQA: the heads of a KV head share one task
                 * (group x queries <= 16 rows), and a chunk too big for it */
                check_attention((rlx_cpu_attn_mask)m, 1, L, 8, 2, 64, f16, 0.0f, 16);
                check_attention((rlx_cpu_attn_mask)m, 1, L, 16, 2, 32, !f16, 0.0f, 3);
                if (L >= 3)
                    check_attention((rlx_cpu_attn_mask)m, 3, L, 12, 3, 64, f16, 0.0f, 2);
                if (L >= 9)
                    check_attention((rlx_cpu_attn_mask)m, 9, L, 4, 2, 32, !f16, 0.0f, 4);
            }
            /* soft-capping (Gemma 2) and an odd head size */
            check_attention(RLX_CPU_ATTN_CAUSAL, L, L, 2, 1, 40, false, 1.5f, 0);
            /* a chunk of queries after a cache */
            check_attention(RLX_CPU_ATTN_SLIDING, L, L + 21, 4, 2, 64, true, 0.0f, 19);
        }
    }
}

/* ------------------------------------------------------ norms, softmax */

static void norms_vs_naive(void **state)
{
    (void)state;
    const int64_t R = 9, C = 1031;
    float *x = rnd_buf(R * C, 3.0f), *w = rnd_buf(C, 1.0f), *b = rnd_buf(C, 1.0f);
    float *y = malloc(R * C * sizeof(float));
    for (int64_t i = 0; i < R * C; i++)
        x[i] += 10.0f; /* a large mean tests the variance computation */
    FOR_EACH_ISA(isa)
    {
        rlx_cpu_rms_norm(g_pool, x, C, y, C, R, C, w, 1e-6f);
        for (int64_t r = 0; r < R; r++) {
            double ss = 0;
            for (int64_t c = 0; c < C; c++)
                ss += (double)x[r * C + c] * x[r * C + c];
            double inv = 1.0 / sqrt(ss / C + 1e-6);
            for (int64_t c = 0; c < C; c++) /* relative 1e-5: C-term f32 sum */
                assert_float_equal(y[r * C + c], x[r * C + c] * inv * w[c],
                                   1e-5 * fabs(x[r * C + c] * inv * w[c]) + 1e-6);
        }
        rlx_cpu_layer_norm(g_pool, x, C, y, C, R, C, w, b, 1e-5f);
        for (int64_t r = 0; r < R; r++) {
            double m = 0, v = 0;
            for (int64_t c = 0; c < C; c++)
                m += x[r * C + c];
            m /= C;
            for (int64_t c = 0; c < C; c++)
                v += (x[r * C + c] - m) * (x[r * C + c] - m);
            double inv = 1.0 / sqrt(v / C + 1e-5);
            for (int64_t c = 0; c < C; c++) /* the mean's rounding is amplified by inv */
                assert_float_equal(y[r * C + c], (x[r * C + c] - m) * inv * w[c] + b[c], 2e-5);
        }
    }
    /* group norm: N=2, C=6, 3 groups, HW=25 */
    const int64_t n = 2, c = 6, g = 3, hw = 25;
    float *gx = rnd_buf(n * c * hw, 2.0f), *gy = malloc(n * c * hw * sizeof(float));
    rlx_cpu_group_norm(g_pool, gx, gy, n, c, hw, g, w, b, 1e-5f);
    for (int64_t i = 0; i < n; i++)
        for (int64_t gr = 0; gr < g; gr++) {
            int64_t cg = c / g, base = (i * c + gr * cg) * hw;
            double m = 0, v = 0;
            for (int64_t e = 0; e < cg * hw; e++)
                m += gx[base + e];
            m /= cg * hw;
            for (int64_t e = 0; e < cg * hw; e++)
                v += (gx[base + e] - m) * (gx[base + e] - m);
            double inv = 1.0 / sqrt(v / (cg * hw) + 1e-5);
            for (int64_t e = 0; e < cg * hw; e++) {
                int64_t ch = gr * cg + e / hw;
                assert_float_equal(gy[base + e], (gx[base + e] - m) * inv * w[ch] + b[ch], 1e-5);
            }
        }
    free(gx);
    free(gy);
    free(x);
    free(w);
    free(b);
    free(y);
}

static void softmax_vs_naive(void **state)
{
    (void)state;
    const int64_t R = 5, C = 777;
    float *x = rnd_buf(R * C, 20.0f), *mask = rnd_buf(C, 1.0f);
    float *y = malloc(R * C * sizeof(float));
    for (int64_t i = 0; i < C; i += 3)
        mask[i] = -INFINITY;
    FOR_EACH_ISA(isa)
    {
        for (int variant = 0; variant < 3; variant++) {
            float cap = variant == 2 ? 30.0f : 0.0f;
            const float *mk = variant >= 1 ? mask : NULL;
            rlx_cpu_softmax(g_pool, x, C, y, C, R, C, 0.7f, mk, 0, cap);
            for (int64_t r = 0; r < R; r++) {
                double mx = -INFINITY, sum = 0;
                double *s = malloc(C * sizeof(double));
                for (int64_t c = 0; c < C; c++) {
                    double v = x[r * C + c] * 0.7;
                    if (cap > 0)
                        v = cap * tanh(v / cap);
                    if (mk)
                        v += mk[c];
                    s[c] = v;
                    mx = v > mx ? v : mx;
                }
                for (int64_t c = 0; c < C; c++)
                    sum += (s[c] = exp(s[c] - mx));
                for (int64_t c = 0; c < C; c++) /* probabilities: 1e-6 absolute */
                    assert_float_equal(y[r * C + c], s[c] / sum, 1e-6);
                free(s);
            }
        }
    }
    /* a fully masked row gives zeros, not NaN */
    float allm[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, z[4];
    rlx_cpu_softmax(NULL, allm, 4, z, 4, 1, 4, 1.0f, NULL, 0, 0.0f);
    for (int i = 0; i < 4; i++)
        assert_float_equal(z[i], 0.0f, 0);
    free(x);
    free(mask);
    free(y);
}

/* --------------------------------------------------------------- rope */

static void rope_vs_naive(void **state)
{
    (void)state;
    const int64_t T = 11, H = 3, D = 64;
    float *x = rnd_buf(T * H * D, 1.0f), *y = malloc(T * H * D * sizeof(float));
    float ff[16];
    int32_t pos[11];
    for (int i = 0; i < 16; i++)
        ff[i] = 1.0f + (float)i * 0.5f;
    for (int i = 0; i < T; i++)
        pos[i] = i * 97 + 3;
    for (int mode = 0; mode < 2; mode++)
        for (int use_ff = 0; use_ff < 2; use_ff++) {
            rlx_cpu_rope_params p = rlx_cpu_rope_default_params();
            p.mode = mode ? RLX_CPU_ROPE_NEOX : RLX_CPU_ROPE_NORMAL;
            p.n_rot = 32; /* partial rotation: dims 32..63 pass through */
            p.freq_base = 500000.0f;
            p.freq_scale = 0.5f;
            p.freq_factors = use_ff ? ff : NULL;
            p.attn_factor = 1.1f;
            rlx_cpu_rope(g_pool, &p, x, H * D, D, y, H * D, D, T, H, D, pos);
            /* a shared cos/sin table turns the same angles: the same bits,
             * out of place and in place */
            float *table = malloc((size_t)T * 32 * sizeof(float));
            float *y2 = malloc(T * H * D * sizeof(float));
            rlx_cpu_rope_table(g_pool, &p, pos, T, table);
            rlx_cpu_rope_apply(g_pool, &p, table, x, H * D, D, y2, H * D, D, T, H, D);
            assert_memory_equal(y2, y, (size_t)(T * H * D) * sizeof(float));
            memcpy(y2, x, (size_t)(T * H * D) * sizeof(float));
            rlx_cpu_rope_apply(g_pool, &p, table, y2, H * D, D, y2, H * D, D, T, H, D);
            assert_memory_equal(y2, y, (size_t)(T * H * D) * sizeof(float));
            free(table);
            free(y2);
            for (int64_t t = 0; t < T; t++)
                for (int64_t h = 0; h < H; h++) {
                    const float *xr = x + (t * H + h) * D;
                    const float *yr = y + (t * H + h) * D;
                    for (int i = 0; i < 16; i++) {
                        double th =
                            pos[t] * 0.5 * pow(500000.0, -2.0 * i / 32.0) / (use_ff ? ff[i] : 1.0);
                        int a = mode ? i : 2 * i, b = mode ? i + 16 : 2 * i + 1;
                        double c = cos(th) * 1.1, s = sin(th) * 1.1;
                        /* angles are computed in double: only f32 products */
                        assert_float_equal(yr[a], xr[a] * c - xr[b] * s, 2e-6);
                        assert_float_equal(yr[b], xr[a] * s + xr[b] * c, 2e-6);
                    }
                    for (int64_t d = 32; d < D; d++)
                        assert_float_equal(yr[d], xr[d], 0);
                }
        }
    free(x);
    free(y);
}

/* --------------------------------------------------------------- conv */

static void conv_case(int64_t n, int64_t ci, int64_t hi, int64_t wi, int64_t co, int64_t kh,
                      int64_t kw, int64_t s, int64_t pd, int64_t dl, int64_t g, int64_t op)
{
    rlx_cpu_conv2d_params p = rlx_cpu_conv2d_default_params();
    p.n = n, p.c_in = ci, p.h_in = hi, p.w_in = wi, p.c_out = co, p.kh = kh, p.kw = kw;
    p.stride_h = s, p.stride_w = s + (s > 1), p.pad_h = pd, p.pad_w = pd, p.dil_h = dl,
    p.dil_w = dl, p.groups = g, p.out_pad_h = op, p.out_pad_w = 0;
    /* forward */
    int64_t ho = rlx_cpu_conv2d_out_h(&p), wo = rlx_cpu_conv2d_out_w(&p);
    float *x = rnd_buf(n * ci * hi * wi, 1.0f), *w = rnd_buf(co * (ci / g) * kh * kw, 1.0f);
    float *bias = rnd_buf(co > ci ? co : ci, 1.0f);
    if (ho > 0 && wo > 0) {
        float *y = malloc((size_t)(n * co * ho * wo) * sizeof(float));
        assert_int_equal(rlx_cpu_conv2d(g_pool, &p, x, w, bias, y), RLX_OK);
        int64_t cg = ci / g, og = co / g;
        for (int64_t b = 0; b < n; b++)
            for (int64_t o = 0; o < co; o++)
                for (int64_t oh = 0; oh < ho; oh++)
                    for (int64_t ow = 0; ow < wo; ow++) {
                        double acc = bias[o], sa = fabs(bias[o]);
                        int64_t gr = o / og;
                        for (int64_t c = 0; c < cg; c++)
                            for (int64_t i = 0; i < kh; i++)
                                for (int64_t j = 0; j < kw; j++) {
                                    int64_t ih = oh * p.stride_h - pd + i * dl;
                                    int64_t iw = ow * p.stride_w - pd + j * dl;
                                    if (ih < 0 || ih >= hi || iw < 0 || iw >= wi)
                                        continue;
                                    double t =
                                        (double)x[((b * ci + gr * cg + c) * hi + ih) * wi + iw] *
                                        w[((o * cg + c) * kh + i) * kw + j];
                                    acc += t;
                                    sa += fabs(t);
                                }
                        float got = y[((b * co + o) * ho + oh) * wo + ow];
                        assert_float_equal(got, acc, (cg * kh * kw + 2) * 6e-8 * sa + 1e-6);
                    }
        free(y);
    }
    /* transposed: x has c_in channels; weight [c_in][c_out/g][kh][kw] */
    int64_t tho = rlx_cpu_conv_transpose2d_out_h(&p), two = rlx_cpu_conv_transpose2d_out_w(&p);
    float *wt = rnd_buf(ci * (co / g) * kh * kw, 1.0f);
    float *yt = malloc((size_t)(n * co * tho * two) * sizeof(float));
    double *ref = calloc((size_t)(n * co * tho * two), sizeof(double));
    double *mag = calloc((size_t)(n * co * tho * two), sizeof(double));
    assert_int_equal(rlx_cpu_conv_transpose2d(g_pool, &p, x, wt, bias, yt), RLX_OK);
    int64_t cg = ci / g, og = co / g;
    for (int64_t b = 0; b < n; b++)
        for (int64_t c = 0; c < ci; c++)
            for (int64_t ih = 0; ih < hi; ih++)
                for (int64_t iw = 0; iw < wi; iw++)
                    for (int64_t o = 0; o < og; o++)
                        for (int64_t i = 0; i < kh; i++)
                            for (int64_t j = 0; j < kw; j++) {
                                int64_t oh = ih * p.stride_h - pd + i * dl;
                                int64_t ow = iw * p.stride_w - pd + j * dl;
                                if (oh < 0 || oh >= tho || ow < 0 || ow >= two)
                                    continue;
                                int64_t oc = (c / cg) * og + o;
                                double t = (double)x[((b * ci + c) * hi + ih) * wi + iw] *
                                           wt[((c * og + o) * kh + i) * kw + j];
                                ref[((b * co + oc) * tho + oh) * two + ow] += t;
                                mag[((b * co + oc) * tho + oh) * two + ow] += fabs(t);
                            }
    for (int64_t b = 0; b < n; b++)
        for (int64_t o = 0; o < co; o++)
            for (int64_t e = 0; e < tho * two; e++) {
                int64_t idx = (b * co + o) * tho * two + e;
                assert_float_equal(yt[idx], ref[idx] + bias[o],
                                   (cg * kh * kw + 2) * 6e-8 * (mag[idx] + fabs(bias[o])) + 1e-6);
            }
    free(x);
    free(w);
    free(wt);
    free(bias);
    free(yt);
    free(ref);
    free(mag);
}

static void conv_vs_naive(void **state)
{
    (void)state;
    FOR_EACH_ISA(isa)
    {
        conv_case(1, 3, 9, 11, 4, 3, 3, 1, 1, 1, 1, 0);
        conv_case(2, 4, 10, 7, 6, 3, 2, 2, 1, 1, 2, 1);  /* groups, stride (2,3) */
        conv_case(1, 2, 12, 12, 2, 3, 3, 1, 2, 2, 1, 0); /* dilation */
        conv_case(1, 8, 5, 5, 16, 1, 1, 1, 0, 1, 1, 0);  /* pointwise */
        conv_case(1, 4, 6, 6, 4, 3, 3, 1, 1, 1, 4, 0);   /* depthwise */
        /* maps of several bands of output rows (the implicit GEMM, whose
         * panels are MR = 12 rows and NR = 32 columns, and its k blocks of
         * 256): partial tiles, stride (2,3) with dilation, k = 288, groups */
        conv_case(1, 5, 80, 40, 14, 3, 3, 1, 1, 1, 1, 0);
        conv_case(2, 3, 150, 70, 7, 3, 3, 2, 1, 2, 1, 0);
        conv_case(2, 32, 64, 40, 20, 3, 3, 1, 1, 1, 1, 0);
        conv_case(1, 6, 96, 32, 8, 3, 3, 1, 1, 1, 2, 0);
        /* one band, its output channels split (25 panels in chunks of 3) */
        conv_case(1, 8, 8, 8, 300, 3, 3, 1, 1, 1, 1, 0);
        /* Winograd F(2x2, 3x3) (3x3, stride 1, maps of 64x64 and more,
         * 64 columns and more): whole panels of 32 tiles, an odd height and
         * width (a last tile half outside, edge panels padded), 13 outputs
         * (an 8-row panel with 3 empty rows), two images, 264 input
         * channels (two k blocks of the GEMM), no padding and padding 2 */
        conv_case(1, 8, 64, 64, 16, 3, 3, 1, 1, 1, 1, 0);
        conv_case(2, 20, 67, 129, 13, 3, 3, 1, 1, 1, 1, 0);
        conv_case(1, 264, 64, 66, 12, 3, 3, 1, 1, 1, 1, 0);
        conv_case(1, 4, 70, 70, 8, 3, 3, 1, 0, 1, 1, 0);
        conv_case(1, 3, 64, 66, 5, 3, 3, 1, 2, 1, 1, 0);
    }
}

/* --------------------------------------------------------- activations */

static void activations(void **state)
{
    (void)state;
    const int64_t n = 2001;
    float *x = rnd_buf(n, 12.0f), *y = malloc(n * sizeof(float)), *u = rnd_buf(n, 1.0f);
    x[0] = 0.0f;
    x[1] = 1e-5f;
    x[2] = -100.0f;
    x[3] = 100.0f;
    FOR_EACH_ISA(isa)
    {
        for (int a = RLX_CPU_ACT_SILU; a <= RLX_CPU_ACT_EXP; a++) {
            rlx_cpu_act_pool(g_pool, (rlx_cpu_act_kind)a, x, y, n);
            for (int64_t i = 0; i < n; i++) {
                double v = x[i], r = 0;
                switch (a) {
                case RLX_CPU_ACT_SILU:
                    r = v / (1 + exp(-v));
                    break;
                case RLX_CPU_ACT_GELU:
                    r = 0.5 * v * (1 + erf(v / sqrt(2.0)));
                    break;
                case RLX_CPU_ACT_GELU_TANH:
                    r = 0.5 * v * (1 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
                    break;
                case RLX_CPU_ACT_GELU_QUICK:
                    r = v / (1 + exp(-1.702 * v));
                    break;
                case RLX_CPU_ACT_RELU:
                    r = v > 0 ? v : 0;
                    break;
                case RLX_CPU_ACT_SIGMOID:
                    r = 1 / (1 + exp(-v));
                    break;
                case RLX_CPU_ACT_TANH:
                    r = tanh(v);
                    break;
                case RLX_CPU_ACT_EXP:
                    r = v < 80 ? exp(v) : (double)y[i]; /* beyond f32 range: skip */
                    break;
                }
                /* the approximations are good to a few 1e-7 relative; erf's
                 * absolute 1.5e-7 is scaled by |x|/2 */
                double tol = 2e-6 * fabs(r) + 2e-7 * (1 + fabs(v));
                if (!(fabs(y[i] - r) <= tol)) {
                    fprintf(stderr, "act %d x %g: %g vs %g\n", a, v, y[i], r);
                    fail();
                }
            }
        }
        rlx_cpu_act_gated(RLX_CPU_ACT_SILU, x, u, y, n);
        for (int64_t i = 0; i < n; i++)
            assert_float_equal(y[i], x[i] / (1 + exp(-(double)x[i])) * u[i],
                               2e-6 * fabs(x[i] * u[i]) + 1e-6);
    }
    free(x);
    free(y);
    free(u);
}

static int setup(void **state)
{
    (void)state;
    rlx_cpu_kernels_init();
    return rlx_threadpool_create(3, &g_pool) == RLX_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rlx_cpu_kernels_set_isa(rlx_cpu_isa_best());
    rlx_threadpool_free(g_pool);
    return 0;
}

/* ---------------------------------------------------------------- FP8 */

/* FP8 weight rows against f32 activations on every ISA: one row (the dot
 * products), a few and many (the GEMM's widened panels on AVX-512, f32
 * tiles elsewhere), K with and without a tail of 16; every finite code
 * appears (subnormals included). Bound: gamma_K * sum|terms|. */
static void fp8_matmul_vs_naive(void **state)
{
    (void)state;
    static const rlx_dtype types[2] = {RLX_DTYPE_F8_E4M3, RLX_DTYPE_F8_E5M2};
    static const int64_t Ms[3] = {1, 5, 40}, Ks[2] = {48, 300};
    const int64_t N = 37;
    FOR_EACH_ISA(isa)
    {
        for (int q = 0; q < 2; q++)
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 2; b++) {
                    int64_t M = Ms[a], K = Ks[b];
                    uint8_t *w = malloc((size_t)(N * K));
                    float *x = rnd_buf(M * K, 1.0f), *y = malloc(sizeof(float) * M * N);
                    assert_non_null(w);
                    assert_non_null(y);
                    for (int64_t i = 0; i < N * K; i++) {
                        uint8_t c = (uint8_t)(i * 37 + 11);
                        bool bad =
                            types[q] == RLX_DTYPE_F8_E4M3 ? (c & 0x7F) == 0x7F : (c & 0x7C) == 0x7C;
                        w[i] = bad ? (uint8_t)(c & 0x83) : c; /* no NaN or infinity */
                    }
                    assert_int_equal(rlx_cpu_matmul(g_pool, types[q], w, (size_t)K, N, K, x, K, M,
                                                    y, N, NULL, 0),
                                     RLX_OK);
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t n = 0; n < N; n++) {
                            double s = 0, mag = 0;
                            for (int64_t k = 0; k < K; k++) {
                                double t = rlx_test_f8_value(types[q], w[n * K + k]) * x[m * K + k];
                                s += t;
                                mag += fabs(t);
                            }
                            double got = y[m * N + n];
                            if (fabs(got - s) > K * ldexp(1.0, -24) * mag + 1e-30)
                                fail_msg("isa %d %s M %lld K %lld: y[%lld][%lld] = %.9g, want "
                                         "%.9g",
                                         isa, rlx_dtype_name(types[q]), (long long)M, (long long)K,
                                         (long long)m, (long long)n, got, s);
                        }
                    free(w);
                    free(x);
                    free(y);
                }
    }
    rlx_cpu_kernels_set_isa(rlx_cpu_isa_best());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_runs_every_task_once),
        cmocka_unit_test(pool_balances_and_survives_wraparound),
        cmocka_unit_test(gemm_vs_naive),
        cmocka_unit_test(fp8_matmul_vs_naive),
        cmocka_unit_test(attention_vs_naive),
        cmocka_unit_test(norms_vs_naive),
        cmocka_unit_test(softmax_vs_naive),
        cmocka_unit_test(rope_vs_naive),
        cmocka_unit_test(conv_vs_naive),
        cmocka_unit_test(activations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
