/* f32 kernels written once in portable C and compiled three times (no extra
 * flags, AVX2+FMA+F16C, AVX-512) so the compiler vectorizes each for its ISA;
 * meson defines RLX_VEC_SUFFIX (scalar / avx2 / avx512) and each build
 * exports one table, rlx_vec_ops_<suffix>. Where auto-vectorization is not
 * enough (half conversion, the GEMM micro-kernel) the ISA's intrinsics are
 * used under #ifdef on the compiler's own feature macros.
 *
 * Reductions use `omp simd reduction` (-fopenmp-simd, no OpenMP runtime) so
 * the compiler may reorder float sums; results therefore differ between
 * builds in the last bits, never within one build. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX2__) || defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "backends/cpu/kernels-internal.h"

#ifndef RLX_VEC_SUFFIX
#error "build with -DRLX_VEC_SUFFIX=scalar|avx2|avx512"
#endif
#define RLX_CAT2(a, b) a##b
#define RLX_CAT(a, b)  RLX_CAT2(a, b)
#define VEC_TABLE      RLX_CAT(rlx_vec_ops_, RLX_VEC_SUFFIX)

/* ------------------------------------------------------------ math helpers */

/* e^x: Cody-Waite reduction to r in [-ln2/2, ln2/2] and a degree-6 Taylor
 * polynomial (relative error < 2e-7), 2^n built in the exponent bits. The
 * rounding uses the 1.5*2^23 trick so it compiles to plain adds everywhere.
 * Inputs below -87 give 0 (masked logits arrive as -inf). */
static inline float vexp(float x)
{
    float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float magic = 12582912.0f;
    float n = (xc * 1.44269504088896341f + magic) - magic;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    float v = p * s;
    return x < -87.0f ? 0.0f : v;
}

static inline float vtanh(float x)
{
    float ax = fabsf(x);
    float t = vexp(-2.0f * ax);
    float big = (1.0f - t) / (1.0f + t);
    float x2 = x * x;
    /* near 0, 1 - t cancels: use the series instead */
    float small = ax * (1.0f - x2 * (1.0f / 3.0f - x2 * (2.0f / 15.0f)));
    float r = ax < 0.0625f ? small : big;
    return x < 0.0f ? -r : r;
}

/* erf by Abramowitz & Stegun 7.1.26, |error| < 1.5e-7 */
static inline float verf(float x)
{
    float ax = fabsf(x);
    float t = 1.0f / (1.0f + 0.3275911f * ax);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    float r = 1.0f - p * t * vexp(-ax * ax);
    return x < 0.0f ? -r : r;
}

static inline float vsigmoid(float x)
{
    return 1.0f / (1.0f + vexp(-x));
}

static inline float act1(rlx_cpu_act_kind a, float x)
{
    switch (a) {
    case RLX_CPU_ACT_SILU:
        return x * vsigmoid(x);
    case RLX_CPU_ACT_GELU:
        return 0.5f * x * (1.0f + verf(x * 0.70710678118654752f));
    case RLX_CPU_ACT_GELU_TANH:
        return 0.5f * x * (1.0f + vtanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case RLX_CPU_ACT_GELU_QUICK:
        return x * vsigmoid(1.702f * x);
    case RLX_CPU_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case RLX_CPU_ACT_SIGMOID:
        return vsigmoid(x);
    case RLX_CPU_ACT_TANH:
        return vtanh(x);
    case RLX_CPU_ACT_EXP:
        return vexp(x);
    }
    return x;
}

/* One loop per activation so each is vectorized on its own. */
#define ACT_LOOP(kind)              \
    for (int64_t i = 0; i < n; i++) \
        y[i] = act1(kind, x[i]);

static void act(rlx_cpu_act_kind a, const float *x, float *y, int64_t n)
{
    switch (a) {
    case RLX_CPU_ACT_SILU:
        ACT_LOOP(RLX_CPU_ACT_SILU);
        break;
    case RLX_CPU_ACT_GELU:
        ACT_LOOP(RLX_CPU_ACT_GELU);
        break;
    case RLX_CPU_ACT_GELU_TANH:
        ACT_LOOP(RLX_CPU_ACT_GELU_TANH);
        break;
    case RLX_CPU_ACT_GELU_QUICK:
        ACT_LOOP(RLX_CPU_ACT_GELU_QUICK);
        break;
    case RLX_CPU_ACT_RELU:
        ACT_LOOP(RLX_CPU_ACT_RELU);
        break;
    case RLX_CPU_ACT_SIGMOID:
        ACT_LOOP(RLX_CPU_ACT_SIGMOID);
        break;
    case RLX_CPU_ACT_TANH:
        ACT_LOOP(RLX_CPU_ACT_TANH);
        break;
    case RLX_CPU_ACT_EXP:
        ACT_LOOP(RLX_CPU_ACT_EXP);
        break;
    }
}

static void act_gated(rlx_cpu_act_kind a, const float *g, const float *u, float *y, int64_t n)
{
    act(a, g, y, n);
    for (int64_t i = 0; i < n; i++)
        y[i] *= u[i];
}

/* --------------------------------------------------------------- dots */

static float dot_f32(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------ half conversion */

/* always inlined where called directly (kv_tile_rows: a call per K/V row
 * showed in decode profiles); the table takes its address as well */
static inline __attribute__((always_inline)) void f16_to_f32(const uint16_t *src, float *dst,
                                                             int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
#endif
        /* also the 8-wide tail of the AVX-512 build: short rows (an 8-wide
         * attention head read from an F16 KV cache) would otherwise go scalar */
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
    for (; i < n; i++)
        dst[i] = rlx_f16_to_f32(src[i]);
}

static void f32_to_f16(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++)
        dst[i] = rlx_f32_to_f16(src[i]);
}

static void bf16_to_f32(const uint16_t *src, float *dst, int64_t n)
{
    uint32_t *d = (uint32_t *)(void *)dst;
    for (int64_t i = 0; i < n; i++)
        d[i] = (uint32_t)src[i] << 16;
}

static void f32_to_bf16(const float *src, uint16_t *dst, int64_t n)
{
    const uint32_t *s = (const uint32_t *)(const void *)src;
    for (int64_t i = 0; i < n; i++) {
        uint32_t x = s[i];
        uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
        /* NaN stays NaN (quiet bit set) */
        dst[i] = (uint16_t)(((x & 0x7fffffffu) > 0x7f800000u) ? ((x >> 16) | 0x40u) : r);
    }
}

/* ------------------------------------------------- weight rows vs f32 */

static void dot_f32w(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_f32(w, a, n);
}

static void dot_f16w(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *h = w;
    const float *x = a;
    int64_t i = 0;
#if defined(__AVX512F__)
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i)));
        __m512 w1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i + 16)));
        acc0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), acc0);
        acc1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), acc1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#elif defined(__F16C__) && defined(__FMA__)
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i)));
        __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i + 8)));
        acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), acc1);
    }
    __m256 t = _mm256_add_ps(acc0, acc1);
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    float sum = _mm_cvtss_f32(q);
#else
    float sum = 0.0f;
#endif
    for (; i < n; i++)
        sum += rlx_f16_to_f32(h[i]) * x[i];
    *s = sum;
}

static void dot_bf16w(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *h = w;
    const float *x = a;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)h[i] << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        sum += f * x[i];
    }
    *s = sum;
}

/* ------------------------------------------- activation quantization */

static inline int round_away(float v)
{
    return (int)(v + (v >= 0.0f ? 0.5f : -0.5f));
}

/* The SIMD versions below compute exactly what the scalar loops do: the same
 * amax, the same id, v*id rounded half away from zero by adding +-0.5 and
 * truncating. Only the portable build runs the scalar loops. */
#if defined(__AVX512F__)
static inline float amax16n(const float *x, int n)
{
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16)
        m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    return _mm512_reduce_max_ps(m);
}

/* 16 values -> int8 at dst; returns their int32 lanes for block sums */
static inline __m512i q8_round16(const float *x, float id, int8_t *dst)
{
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), _mm512_set1_ps(id));
    __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u));
    __m512 h =
        _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(0.5f)), sign));
    __m512i q = _mm512_cvttps_epi32(_mm512_add_ps(v, h));
    _mm_storeu_si128((__m128i *)(void *)dst, _mm512_cvtepi32_epi8(q));
    return q;
}
#elif defined(__AVX2__)
static inline float amax16n(const float *x, int n)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8)
        m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask));
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q = _mm_max_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

static inline __m256i q8_round8(const float *x, __m256 id)
{
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), id);
    __m256 sign = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u)));
    __m256 h = _mm256_or_ps(_mm256_set1_ps(0.5f), sign);
    return _mm256_cvttps_epi32(_mm256_add_ps(v, h));
}

/* 32 values -> int8 at dst */
static inline void q8_round32(const float *x, float id, int8_t *dst)
{
    __m256 vid = _mm256_set1_ps(id);
    __m256i a = q8_round8(x, vid), b = q8_round8(x + 8, vid);
    __m256i c = q8_round8(x + 16, vid), d = q8_round8(x + 24, vid);
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i r = _mm256_packs_epi16(ab, cd);
    r = _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)dst, r);
}
#endif

static void quantize_q8_0(const float *x, void *dst, int64_t n)
{
    blk_q8_0 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
#if defined(__AVX512F__) || defined(__AVX2__)
        float amax = amax16n(x, 32);
#else
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
#endif
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = rlx_f32_to_f16(d);
#if defined(__AVX512F__)
        q8_round16(x, id, b[i].qs);
        q8_round16(x + 16, id, b[i].qs + 16);
#elif defined(__AVX2__)
        q8_round32(x, id, b[i].qs);
#else
        for (int j = 0; j < 32; j++)
            b[i].qs[j] = (int8_t)round_away(x[j] * id);
#endif
    }
}

static void quantize_q8_k(const float *x, void *dst, int64_t n)
{
    blk_q8_k *b = dst;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
#if defined(__AVX512F__) || defined(__AVX2__)
        float amax = amax16n(x, 256);
#else
        float amax = 0.0f;
        for (int j = 0; j < 256; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
#endif
        /* symmetric in [-127, 127] so every SIMD sign trick stays exact */
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = d;
#if defined(__AVX512F__)
        for (int g = 0; g < 16; g++)
            b[i].bsums[g] =
                (int16_t)_mm512_reduce_add_epi32(q8_round16(x + 16 * g, id, b[i].qs + 16 * g));
        continue;
#elif defined(__AVX2__)
        for (int g = 0; g < 8; g++)
            q8_round32(x + 32 * g, id, b[i].qs + 32 * g);
#else
        for (int j = 0; j < 256; j++)
            b[i].qs[j] = (int8_t)round_away(x[j] * id);
#endif
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)s;
        }
    }
}

/* ------------------------------------------------------ norms, softmax */

static void rms_norm_row(const float *x, float *y, int64_t n, const float *w, float eps)
{
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    if (w) {
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * r * w[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * r;
    }
}

static void layer_norm_row(const float *x, float *y, int64_t n, const float *w, const float *b,
                           float eps)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++)
        s += x[i];
    float mean = s / (float)n, v = 0.0f;
    /* two-pass variance: no cancellation for rows with a large mean */
#pragma omp simd reduction(+ : v)
    for (int64_t i = 0; i < n; i++)
        v += (x[i] - mean) * (x[i] - mean);
    float r = 1.0f / sqrtf(v / (float)n + eps);
    for (int64_t i = 0; i < n; i++) {
        float t = (x[i] - mean) * r;
        if (w)
            t *= w[i];
        if (b)
            t += b[i];
        y[i] = t;
    }
}

static void softmax_row(const float *x, float *y, int64_t n, float scale, const float *mask,
                        float softcap)
{
    if (softcap > 0.0f) {
        float ic = 1.0f / softcap;
        for (int64_t i = 0; i < n; i++)
            y[i] = softcap * vtanh(x[i] * scale * ic);
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * scale;
    }
    if (mask)
        for (int64_t i = 0; i < n; i++)
            y[i] += mask[i];
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t i = 0; i < n; i++)
        mx = y[i] > mx ? y[i] : mx;
    if (mx == -INFINITY) {
        memset(y, 0, (size_t)n * sizeof *y);
        return;
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        y[i] = vexp(y[i] - mx);
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; i++)
        sum += y[i];
    float is = 1.0f / sum;
    for (int64_t i = 0; i < n; i++)
        y[i] *= is;
}

/* ----------------------------------------------------------- attention */

/* Row pointers of a K or V tile: f32 rows are read in place; f16 rows are
 * widened and Q8_0 rows (a quantized KV cache, offsets counting elements)
 * decoded once per tile into buf (row-major, D floats each), so no f32
 * copy of the cache ever exists. */
static void kv_tile_rows(const rlx_cpu_attn_params *p, const void *base, int64_t ld_tok,
                         int64_t ld_head, int64_t kvh, int64_t t0, int64_t kn, float *buf,
                         const float **rows)
{
    const int64_t D = p->head_dim;
    for (int64_t j = 0; j < kn; j++) {
        int64_t off = (t0 + j) * ld_tok + kvh * ld_head;
        if (p->kv_type == RLX_DTYPE_F16) {
            f16_to_f32((const uint16_t *)base + off, buf + j * D, D);
            rows[j] = buf + j * D;
        } else if (p->kv_type == RLX_DTYPE_Q8_0) {
            /* element e sits in block e / 32 at e % 32; a row may start
             * inside a block (head sizes below 32 share blocks) */
            const blk_q8_0 *blk = (const blk_q8_0 *)base;
            float *dst = buf + j * D;
            for (int64_t d0 = 0; d0 < D;) {
                int64_t e = off + d0, in = e % 32, n = 32 - in < D - d0 ? 32 - in : D - d0;
                const float sc = rlx_f16_to_f32(blk[e / 32].d);
                const int8_t *qs = blk[e / 32].qs + in;
#pragma omp simd
                for (int64_t i = 0; i < n; i++)
                    dst[d0 + i] = sc * (float)qs[i];
                d0 += n;
            }
            rows[j] = dst;
        } else {
            rows[j] = (const float *)base + off;
        }
    }
}

/* Tile rows i < nh * nq: head h0 + i / nq, query q0 + i % nq. The nh heads
 * share one KV head (grouped-query attention), so a decode step (nq == 1)
 * widens and reads each K/V row once for the whole group. */
static void attn_rows(const rlx_cpu_attn_params *p, int64_t h0, int64_t nh, int64_t q0, int64_t nq,
                      float *scratch)
{
    const int64_t D = p->head_dim;
    const int64_t group = p->n_heads / p->n_kv_heads;
    const int64_t kvh = h0 / group;
    const int64_t nr = nh * nq;
    float *Qs = scratch;
    float *acc = Qs + RLX_ATTN_BQ * D;
    float *Kt = acc + RLX_ATTN_BQ * D;
    float *Vt = Kt + RLX_ATTN_BK * D;
    float *S = Vt + RLX_ATTN_BK * D;
    const float *krow[RLX_ATTN_BK], *vrow[RLX_ATTN_BK];
    float *mrow = S + RLX_ATTN_BQ * RLX_ATTN_BK;
    float *lrow = mrow + RLX_ATTN_BQ;

    for (int64_t i = 0; i < nr; i++) {
        const float *q = p->q + (q0 + i % nq) * p->q_ld_tok + (h0 + i / nq) * p->q_ld_head;
        for (int64_t d = 0; d < D; d++)
            Qs[i * D + d] = q[d] * p->scale;
        memset(acc + i * D, 0, (size_t)D * sizeof(float));
        mrow[i] = -INFINITY;
        lrow[i] = 0.0f;
    }

    const bool causal = p->mask == RLX_CPU_ATTN_CAUSAL || p->mask == RLX_CPU_ATTN_SLIDING;
    const bool sliding = p->mask == RLX_CPU_ATTN_SLIDING;
    const bool bias = p->mask == RLX_CPU_ATTN_BIAS && p->bias;
    int64_t lo = 0, hi = p->n_kv;
    if (causal) {
        int64_t last = p->q_pos0 + q0 + nq - 1;
        hi = last + 1 < hi ? last + 1 : hi;
        if (sliding) {
            int64_t first = p->q_pos0 + q0 - p->window + 1;
            lo = first > 0 ? first : 0;
        }
    }
    const float cap = p->softcap, icap = cap > 0.0f ? 1.0f / cap : 0.0f;

    for (int64_t kt = lo; kt < hi; kt += RLX_ATTN_BK) {
        int64_t kn = hi - kt < RLX_ATTN_BK ? hi - kt : RLX_ATTN_BK;
        kv_tile_rows(p, p->k, p->k_ld_tok, p->k_ld_head, kvh, kt, kn, Kt, krow);
        bool v_loaded = false;
        for (int64_t i = 0; i < nr; i++) {
            const int64_t h = h0 + i / nq, qrow = q0 + i % nq;
            float *s = S + i * RLX_ATTN_BK;
            const float *qi = Qs + i * D;
            int64_t jk = 0;
            /* four keys per pass: each q load feeds four FMAs */
            for (; jk + 4 <= kn; jk += 4) {
                const float *k0 = krow[jk], *k1 = krow[jk + 1], *k2 = krow[jk + 2],
                            *k3 = krow[jk + 3];
                float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
                for (int64_t d = 0; d < D; d++) {
                    s0 += qi[d] * k0[d];
                    s1 += qi[d] * k1[d];
                    s2 += qi[d] * k2[d];
                    s3 += qi[d] * k3[d];
                }
                s[jk] = s0;
                s[jk + 1] = s1;
                s[jk + 2] = s2;
                s[jk + 3] = s3;
            }
            for (; jk < kn; jk++)
                s[jk] = dot_f32(qi, krow[jk], D);
            for (jk = kn; jk < RLX_ATTN_BK; jk++)
                s[jk] = 0.0f;
            if (cap > 0.0f)
                for (int j = 0; j < RLX_ATTN_BK; j++)
                    s[j] = cap * vtanh(s[j] * icap);
            if (bias) {
                const float *br = p->bias + h * p->bias_ld_head + qrow * p->bias_ld_q;
                if (p->bias_grid_w > 0) {
                    const int64_t w = p->bias_grid_w, rows = p->n_kv / w;
                    for (int64_t j = 0; j < kn; j++)
                        s[j] += br[(kt + j) / w] + br[rows + (kt + j) % w];
                } else {
                    for (int64_t j = 0; j < kn; j++)
                        s[j] += br[kt + j];
                }
            }
            /* visible keys j in [jmin, jmax] (tile-relative) */
            int64_t pos = p->q_pos0 + qrow;
            int64_t jmax = causal ? pos - kt : kn - 1;
            if (jmax > kn - 1)
                jmax = kn - 1;
            int64_t jmin = sliding ? pos - p->window + 1 - kt : 0;
            float tmax = -INFINITY;
            for (int j = 0; j < RLX_ATTN_BK; j++) {
                float v = (j <= jmax && j >= jmin) ? s[j] : -INFINITY;
                s[j] = v;
                tmax = v > tmax ? v : tmax;
            }
            if (tmax == -INFINITY)
                continue;
            float mnew = mrow[i] > tmax ? mrow[i] : tmax;
            float corr = vexp(mrow[i] - mnew);
            mrow[i] = mnew;
            float lsum = 0.0f;
            for (int j = 0; j < RLX_ATTN_BK; j++)
                s[j] = vexp(s[j] - mnew);
#pragma omp simd reduction(+ : lsum)
            for (int j = 0; j < RLX_ATTN_BK; j++)
                lsum += s[j];
            lrow[i] = lrow[i] * corr + lsum;
            float *ai = acc + i * D;
            if (corr != 1.0f) {
#pragma omp simd
                for (int64_t d = 0; d < D; d++)
                    ai[d] *= corr;
            }
            if (!v_loaded) {
                kv_tile_rows(p, p->v, p->v_ld_tok, p->v_ld_head, kvh, kt, kn, Vt, vrow);
                v_loaded = true;
            }
            int64_t jv = 0;
            for (; jv + 4 <= kn; jv += 4) {
                const float p0 = s[jv], p1 = s[jv + 1], p2 = s[jv + 2], p3 = s[jv + 3];
                const float *v0 = vrow[jv], *v1 = vrow[jv + 1], *v2 = vrow[jv + 2],
                            *v3 = vrow[jv + 3];
#pragma omp simd
                for (int64_t d = 0; d < D; d++)
                    ai[d] += p0 * v0[d] + p1 * v1[d] + p2 * v2[d] + p3 * v3[d];
            }
            for (; jv < kn; jv++) {
                const float pj = s[jv];
                const float *vr = vrow[jv];
#pragma omp simd
                for (int64_t d = 0; d < D; d++)
                    ai[d] += pj * vr[d];
            }
        }
    }

    for (int64_t i = 0; i < nr; i++) {
        float *o = p->out + (q0 + i % nq) * p->o_ld_tok + (h0 + i / nq) * p->o_ld_head;
        float il = lrow[i] > 0.0f ? 1.0f / lrow[i] : 0.0f;
        for (int64_t d = 0; d < D; d++)
            o[d] = acc[i * D + d] * il;
    }
}

static void attn_tile(const rlx_cpu_attn_params *p, int64_t h, int64_t q0, int64_t nq,
                      float *scratch)
{
    attn_rows(p, h, 1, q0, nq, scratch);
}

static void attn_group(const rlx_cpu_attn_params *p, int64_t h0, int64_t nh, int64_t q0, int64_t nq,
                       float *scratch)
{
    attn_rows(p, h0, nh, q0, nq, scratch);
}

/* ---------------------------------------------------- GEMM micro-kernel */

/* C[M x NR] (mr x nr of it stored) = alpha * A B + beta * C over kc steps:
 * A packed M to a k; B packed NR to a k (Bp), or its rows where they lie
 * (Brows[k], NR readable floats each: a conv reads its input in place).
 * M is 12 (RLX_GEMM_MR) or 8: a conv with 16, 32 or 64 output channels
 * fills every row of 8-row panels, where 12 leave part of the last empty. */
#if defined(__AVX512F__)
static inline __attribute__((always_inline)) void
ukernel(const int M, int64_t kc, const float *Ap, const float *Bp, const float *const *Brows,
        float *C, int64_t ldc, int mr, int nr, float alpha, float beta)
{
    __m512 c0[RLX_GEMM_MR], c1[RLX_GEMM_MR];
    /* the C tile is read (beta) or written only after the kc loop: asked for
     * now, its lines arrive while the loop runs instead of stalling the end
     * (C of a large product lives in L3 or DRAM) */
    for (int r = 0; r < mr; r++) {
        _mm_prefetch((const char *)(C + r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(C + r * ldc + 16), _MM_HINT_T0);
    }
#pragma GCC unroll 12
    for (int r = 0; r < M; r++)
        c0[r] = c1[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const float *b = Brows ? Brows[k] : Bp;
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 12
        for (int r = 0; r < M; r++) {
            __m512 a = _mm512_set1_ps(Ap[r]);
            c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
            c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
        }
        Ap += M;
        Bp += RLX_GEMM_NR;
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1u);
    const __mmask16 m1 =
        nr >= 32 ? (__mmask16)0xFFFF : (nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1u) : 0);
#pragma GCC unroll 12
    for (int r = 0; r < M; r++) {
        if (r >= mr)
            break;
        float *cr = C + r * ldc;
        __m512 r0 = _mm512_mul_ps(c0[r], va), r1 = _mm512_mul_ps(c1[r], va);
        if (beta != 0.0f) {
            r0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, cr), vb, r0);
            r1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, cr + 16), vb, r1);
        }
        _mm512_mask_storeu_ps(cr, m0, r0);
        _mm512_mask_storeu_ps(cr + 16, m1, r1);
    }
}
#else
static inline __attribute__((always_inline)) void
ukernel(const int M, int64_t kc, const float *Ap, const float *Bp, const float *const *Brows,
        float *C, int64_t ldc, int mr, int nr, float alpha, float beta)
{
    float c[RLX_GEMM_MR][RLX_GEMM_NR];
    memset(c, 0, sizeof c);
    for (int64_t k = 0; k < kc; k++) {
        const float *b = Brows ? Brows[k] : Bp;
        for (int r = 0; r < M; r++) {
            const float a = Ap[r];
            for (int j = 0; j < RLX_GEMM_NR; j++)
                c[r][j] += a * b[j];
        }
        Ap += M;
        Bp += RLX_GEMM_NR;
    }
    for (int r = 0; r < mr; r++) {
        float *cr = C + r * ldc;
        for (int j = 0; j < nr; j++)
            cr[j] = alpha * c[r][j] + (beta != 0.0f ? beta * cr[j] : 0.0f);
    }
}
#endif

#if defined(__AVX512F__)
/* The GEMM's own kernel (gemm.c: every large product) stays a body of its
 * own: built from the shared one above it ran the SAM encoder's linears 5-10%
 * slower. */
static void gemm_ukernel(int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc,
                         int mr, int nr, float alpha, float beta)
{
    __m512 c0[RLX_GEMM_MR], c1[RLX_GEMM_MR];
    /* the C tile is read (beta) or written only after the kc loop: asked for
     * now, its lines arrive while the loop runs instead of stalling the end
     * (C of a large product lives in L3 or DRAM) */
    for (int r = 0; r < mr; r++) {
        _mm_prefetch((const char *)(C + r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(C + r * ldc + 16), _MM_HINT_T0);
    }
#pragma GCC unroll 12
    for (int r = 0; r < RLX_GEMM_MR; r++)
        c0[r] = c1[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(Bp), b1 = _mm512_loadu_ps(Bp + 16);
#pragma GCC unroll 12
        for (int r = 0; r < RLX_GEMM_MR; r++) {
            __m512 a = _mm512_set1_ps(Ap[r]);
            c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
            c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
        }
        Ap += RLX_GEMM_MR;
        Bp += RLX_GEMM_NR;
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1u);
    const __mmask16 m1 =
        nr >= 32 ? (__mmask16)0xFFFF : (nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1u) : 0);
#pragma GCC unroll 12
    for (int r = 0; r < RLX_GEMM_MR; r++) {
        if (r >= mr)
            break;
        float *cr = C + r * ldc;
        __m512 r0 = _mm512_mul_ps(c0[r], va), r1 = _mm512_mul_ps(c1[r], va);
        if (beta != 0.0f) {
            r0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, cr), vb, r0);
            r1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, cr + 16), vb, r1);
        }
        _mm512_mask_storeu_ps(cr, m0, r0);
        _mm512_mask_storeu_ps(cr + 16, m1, r1);
    }
}
#else
static void gemm_ukernel(int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc,
                         int mr, int nr, float alpha, float beta)
{
    ukernel(RLX_GEMM_MR, kc, Ap, Bp, NULL, C, ldc, mr, nr, alpha, beta);
}
#endif

static void gemm_ukernel8(int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc,
                          int mr, int nr, float alpha, float beta)
{
    ukernel(8, kc, Ap, Bp, NULL, C, ldc, mr, nr, alpha, beta);
}

static void gemm_ukernel_rows(int64_t kc, const float *Ap, const float *const *Brows, float *C,
                              int64_t ldc, int mr, int nr, float beta)
{
    ukernel(RLX_GEMM_MR, kc, Ap, NULL, Brows, C, ldc, mr, nr, 1.0f, beta);
}

static void gemm_ukernel8_rows(int64_t kc, const float *Ap, const float *const *Brows, float *C,
                               int64_t ldc, int mr, int nr, float beta)
{
    ukernel(8, kc, Ap, NULL, Brows, C, ldc, mr, nr, 1.0f, beta);
}

/* ---------------------------------------------------- conv im2col runs */

#if defined(__AVX512F__)
static void pack_run(float *d, const float *s, int64_t n, int64_t a, int64_t b)
{
    _Static_assert(RLX_GEMM_NR == 32, "two vectors of 16");
    /* lanes [a, b) read, [0, n) written, per half of 16 */
    uint32_t rd = 0, wr = n >= 32 ? ~0u : (1u << n) - 1u;
    if (a < b)
        rd = (b >= 32 ? ~0u : (1u << b) - 1u) & ~((1u << a) - 1u);
    _mm512_mask_storeu_ps(d, (__mmask16)wr, _mm512_maskz_loadu_ps((__mmask16)rd, s));
    _mm512_mask_storeu_ps(d + 16, (__mmask16)(wr >> 16),
                          _mm512_maskz_loadu_ps((__mmask16)(rd >> 16), s + 16));
}
#else
static void pack_run(float *d, const float *s, int64_t n, int64_t a, int64_t b)
{
    for (int64_t t = 0; t < n; t++)
        d[t] = t >= a && t < b ? s[t] : 0.0f;
}
#endif

/* ------------------------------------ Winograd F(2x2, 3x3) transforms
 * RLX_GEMM_NR tiles of 2x2 outputs side by side along a row; tile t reads
 * the 4x4 patch rows[r][2t + j] (r, j < 4), 2 * NR + 2 floats a row, of
 * which only [a, b) are read (the rest are zeros: padding), so a row may
 * point before or past the row it reads. With B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0;
 * 0 1 0 -1], V = B^T d B lands in 16 rows of NR floats, row 4 i + j at
 * V + (4 i + j) * vs. The output transform takes 16 such rows of products
 * m (row xi at m + xi * ms), forms A^T m A with A^T = [1 1 1 0; 0 1 -1 -1],
 * adds the bias, applies ReLU when asked, and writes the tiles' two output
 * rows, 2 * NR floats each, to y0 and y1. */

#if defined(__AVX512F__)
_Static_assert(RLX_GEMM_NR == 32, "two vectors of 16 tiles");
/* The even and odd elements of the 32 floats lo, hi. */
static inline void deinterleave(__m512 lo, __m512 hi, __m512 *ev, __m512 *od)
{
    const __m512i e = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    *ev = _mm512_permutex2var_ps(lo, e, hi);
    *od = _mm512_permutex2var_ps(lo, _mm512_add_epi32(e, _mm512_set1_epi32(1)), hi);
}

/* lanes [a - off, b - off) of a vector of 16 */
static inline __mmask16 wino_mask(int64_t a, int64_t b, int64_t off)
{
    int64_t lo = a - off, hi = b - off;
    uint32_t m = hi >= 16 ? 0xffffu : hi <= 0 ? 0u : (1u << hi) - 1u;
    m &= lo <= 0 ? 0xffffu : lo >= 16 ? 0u : ~((1u << lo) - 1u);
    return (__mmask16)m;
}

static void wino_in(const float *const *rows, int64_t a, int64_t b, float *V, int64_t vs)
{
    for (int h = 0; h < 2; h++) {
        __m512 e[4][4];
        for (int r = 0; r < 4; r++) {
            const float *s = rows[r] + 32 * h;
            __m512 l0, l1, l2, l3;
            if (a == 0 && b >= 2 * RLX_GEMM_NR + 2) {
                l0 = _mm512_loadu_ps(s);
                l1 = _mm512_loadu_ps(s + 16);
                l2 = _mm512_loadu_ps(s + 2);
                l3 = _mm512_loadu_ps(s + 18);
            } else {
                int64_t o = 32 * h;
                l0 = _mm512_maskz_loadu_ps(wino_mask(a, b, o), s);
                l1 = _mm512_maskz_loadu_ps(wino_mask(a, b, o + 16), s + 16);
                l2 = _mm512_maskz_loadu_ps(wino_mask(a, b, o + 2), s + 2);
                l3 = _mm512_maskz_loadu_ps(wino_mask(a, b, o + 18), s + 18);
            }
            __m512 d0, d1, d2, d3;
            deinterleave(l0, l1, &d0, &d1);
            deinterleave(l2, l3, &d2, &d3);
            e[r][0] = _mm512_sub_ps(d0, d2);
            e[r][1] = _mm512_add_ps(d1, d2);
            e[r][2] = _mm512_sub_ps(d2, d1);
            e[r][3] = _mm512_sub_ps(d1, d3);
        }
        float *v = V + 16 * h;
        for (int j = 0; j < 4; j++) {
            _mm512_storeu_ps(v + (0 + j) * vs, _mm512_sub_ps(e[0][j], e[2][j]));
            _mm512_storeu_ps(v + (4 + j) * vs, _mm512_add_ps(e[1][j], e[2][j]));
            _mm512_storeu_ps(v + (8 + j) * vs, _mm512_sub_ps(e[2][j], e[1][j]));
            _mm512_storeu_ps(v + (12 + j) * vs, _mm512_sub_ps(e[1][j], e[3][j]));
        }
    }
}

static void wino_out(const float *m, int64_t ms, float bias, int relu, float *y0, float *y1)
{
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512 bv = _mm512_set1_ps(bias), z = _mm512_setzero_ps();
    for (int h = 0; h < 2; h++) {
        const float *mh = m + 16 * h;
        __m512 s0[4], s1[4];
        for (int j = 0; j < 4; j++) {
            __m512 m0 = _mm512_loadu_ps(mh + (0 + j) * ms), m1 = _mm512_loadu_ps(mh + (4 + j) * ms);
            __m512 m2 = _mm512_loadu_ps(mh + (8 + j) * ms),
                   m3 = _mm512_loadu_ps(mh + (12 + j) * ms);
            s0[j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
            s1[j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
        }
        __m512 o00 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), s0[2]), bv);
        __m512 o01 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s0[1], s0[2]), s0[3]), bv);
        __m512 o10 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), s1[2]), bv);
        __m512 o11 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s1[1], s1[2]), s1[3]), bv);
        if (relu) {
            o00 = _mm512_max_ps(o00, z);
            o01 = _mm512_max_ps(o01, z);
            o10 = _mm512_max_ps(o10, z);
            o11 = _mm512_max_ps(o11, z);
        }
        _mm512_storeu_ps(y0 + 32 * h, _mm512_permutex2var_ps(o00, lo, o01));
        _mm512_storeu_ps(y0 + 32 * h + 16, _mm512_permutex2var_ps(o00, hi, o01));
        _mm512_storeu_ps(y1 + 32 * h, _mm512_permutex2var_ps(o10, lo, o11));
        _mm512_storeu_ps(y1 + 32 * h + 16, _mm512_permutex2var_ps(o10, hi, o11));
    }
}
#else
static void wino_in(const float *const *rows, int64_t a, int64_t b, float *V, int64_t vs)
{
    for (int t = 0; t < RLX_GEMM_NR; t++) {
        float e[4][4];
        for (int r = 0; r < 4; r++) {
            float d[4];
            for (int j = 0; j < 4; j++)
                d[j] = 2 * t + j >= a && 2 * t + j < b ? rows[r][2 * t + j] : 0.0f;
            e[r][0] = d[0] - d[2];
            e[r][1] = d[1] + d[2];
            e[r][2] = d[2] - d[1];
            e[r][3] = d[1] - d[3];
        }
        for (int j = 0; j < 4; j++) {
            V[(0 + j) * vs + t] = e[0][j] - e[2][j];
            V[(4 + j) * vs + t] = e[1][j] + e[2][j];
            V[(8 + j) * vs + t] = e[2][j] - e[1][j];
            V[(12 + j) * vs + t] = e[1][j] - e[3][j];
        }
    }
}

static void wino_out(const float *m, int64_t ms, float bias, int relu, float *y0, float *y1)
{
    for (int t = 0; t < RLX_GEMM_NR; t++) {
        float s0[4], s1[4];
        for (int j = 0; j < 4; j++) {
            s0[j] = m[(0 + j) * ms + t] + m[(4 + j) * ms + t] + m[(8 + j) * ms + t];
            s1[j] = m[(4 + j) * ms + t] - m[(8 + j) * ms + t] - m[(12 + j) * ms + t];
        }
        float o[4] = {s0[0] + s0[1] + s0[2] + bias, s0[1] - s0[2] - s0[3] + bias,
                      s1[0] + s1[1] + s1[2] + bias, s1[1] - s1[2] - s1[3] + bias};
        if (relu)
            for (int k = 0; k < 4; k++)
                o[k] = o[k] > 0.0f ? o[k] : 0.0f;
        y0[2 * t] = o[0];
        y0[2 * t + 1] = o[1];
        y1[2 * t] = o[2];
        y1[2 * t + 1] = o[3];
    }
}
#endif

/* ---------------------------------------------- pooling and resampling */

/* o[i] = max(a[2i], a[2i + 1], b[2i], b[2i + 1]) for i < n (a 2x2 max pool
 * of stride 2 over rows a and b). */
static void max_pool2_row(const float *a, const float *b, float *o, int64_t n)
{
#if defined(__AVX512F__)
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 m0 = _mm512_max_ps(_mm512_loadu_ps(a + 2 * i), _mm512_loadu_ps(b + 2 * i));
        __m512 m1 = _mm512_max_ps(_mm512_loadu_ps(a + 2 * i + 16), _mm512_loadu_ps(b + 2 * i + 16));
        __m512 ev, od;
        deinterleave(m0, m1, &ev, &od);
        _mm512_storeu_ps(o + i, _mm512_max_ps(ev, od));
    }
    for (; i < n; i++) {
        float x = a[2 * i] > a[2 * i + 1] ? a[2 * i] : a[2 * i + 1];
        float y = b[2 * i] > b[2 * i + 1] ? b[2 * i] : b[2 * i + 1];
        o[i] = x > y ? x : y;
    }
#else
    for (int64_t i = 0; i < n; i++) {
        float x = a[2 * i] > a[2 * i + 1] ? a[2 * i] : a[2 * i + 1];
        float y = b[2 * i] > b[2 * i + 1] ? b[2 * i] : b[2 * i + 1];
        o[i] = x > y ? x : y;
    }
#endif
}

/* o[i] = (1 - l) * a[i] + l * b[i]: one output row of a bilinear resize
 * from two rows already resampled along x (the same expression, in the same
 * order, as the four-tap formula it splits). */
static void lerp_rows(const float *a, const float *b, float l, float *o, int64_t n)
{
    float k = 1 - l;
    for (int64_t i = 0; i < n; i++)
        o[i] = k * a[i] + l * b[i];
}

const rlx_vec_ops VEC_TABLE = {
    .dot_f32 = dot_f32,
    .f16_to_f32 = f16_to_f32,
    .f32_to_f16 = f32_to_f16,
    .bf16_to_f32 = bf16_to_f32,
    .f32_to_bf16 = f32_to_bf16,
    .quantize_q8_0 = quantize_q8_0,
    .quantize_q8_k = quantize_q8_k,
    .rms_norm_row = rms_norm_row,
    .layer_norm_row = layer_norm_row,
    .softmax_row = softmax_row,
    .act = act,
    .act_gated = act_gated,
    .attn_tile = attn_tile,
    .attn_group = attn_group,
    .gemm_ukernel = gemm_ukernel,
    .gemm_ukernel8 = gemm_ukernel8,
    .gemm_ukernel_rows = gemm_ukernel_rows,
    .gemm_ukernel8_rows = gemm_ukernel8_rows,
    .dot_f32w = dot_f32w,
    .dot_f16w = dot_f16w,
    .dot_bf16w = dot_bf16w,
    .pack_run = pack_run,
    .wino_in = wino_in,
    .wino_out = wino_out,
    .max_pool2_row = max_pool2_row,
    .lerp_rows = lerp_rows,
};
