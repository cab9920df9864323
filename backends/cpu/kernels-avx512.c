/* AVX-512 (F/BW/DQ/VL + VNNI) integer dot products over ggml blocks.
 * Q4_0/Q4_1/Q5_x keep the AVX2 kernels: on the Xeon we measured, a 2-blocks-
 * per-zmm Q4_0 (two vpdpbusd per pair) was slower than AVX2's maddubs path.
 * Compiled with the AVX-512 flags; reached only through
 * rlx_cpu_fill_dots_avx512(), which the dispatcher calls when CPUID and XCR0
 * say the instructions and the ZMM state are available.
 *
 * The 32-element formats handle two blocks per 512-bit register with VNNI's
 * vpdpbusd (u8 x s8 -> s32, no int16 saturation step). The K-quants keep
 * maddubs (u8 x s8 -> pairwise s16, exact for their ranges) and fold the
 * per-sub-block scales in with vpdpwssd. Integer sums equal the scalar
 * reference exactly. */
#include <immintrin.h>

#include "backends/cpu/kernels-internal.h"
#include "backends/cpu/q6k-avx512.h"

static inline float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

static inline __m512 two_scales(float d0, float d1)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(d0)), _mm256_set1_ps(d1), 1);
}

static inline __m512i join256(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* signed x signed: |x| and y negated where x < 0 */
static inline __m512i dot_s8x2(__m512i x, __m512i y)
{
    __mmask64 neg = _mm512_movepi8_mask(x);
    __m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(x), sy);
}

static inline __m256i dot_s8x1(__m256i x, __m256i y)
{
    __mmask32 neg = _mm256_movepi8_mask(x);
    __m256i sy = _mm256_mask_sub_epi8(y, neg, _mm256_setzero_si256(), y);
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(x), sy);
}

static inline float hsum256_ps(__m256 v)
{
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

static void dot_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q8_0 *x = w;
    const blk_q8_0 *y = a;
    const int64_t nb = n / 32;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        __m512i xv = join256(_mm256_loadu_si256((const __m256i *)x[i].qs),
                             _mm256_loadu_si256((const __m256i *)x[i + 1].qs));
        __m512i yv = join256(_mm256_loadu_si256((const __m256i *)y[i].qs),
                             _mm256_loadu_si256((const __m256i *)y[i + 1].qs));
        __m512 d = two_scales(h2f(x[i].d) * h2f(y[i].d), h2f(x[i + 1].d) * h2f(y[i + 1].d));
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dot_s8x2(xv, yv)), acc);
    }
    float sum = _mm512_reduce_add_ps(acc);
    if (i < nb) {
        __m256i p = dot_s8x1(_mm256_loadu_si256((const __m256i *)x[i].qs),
                             _mm256_loadu_si256((const __m256i *)y[i].qs));
        sum += h2f(x[i].d) * h2f(y[i].d) * hsum256_ps(_mm256_cvtepi32_ps(p));
    }
    *s = sum;
}

/* sum_j mins[j] * (bsums[2j] + bsums[2j+1]) and the scales, vectorized */
static inline int kmins(const uint8_t *scales, const int16_t *bsums, uint8_t sc[8])
{
    uint8_t mn[8];
    rlx_k4_unpack(scales, sc, mn);
    __m128i m8 = _mm_loadl_epi64((const __m128i *)(const void *)mn);
    __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    __m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)bsums), m16);
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4e));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1));
    return _mm_cvtsi128_si32(q);
}

static inline __m512i two_scales16(int s0, int s1)
{
    return join256(_mm256_set1_epi16((short)s0), _mm256_set1_epi16((short)s1));
}

static void dot_q4_k(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q4_k *x = w;
    const blk_q8_k *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        uint8_t sc[8];
        int msum = kmins(x[i].scales, y[i].bsums, sc);
        __m512i acc = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            __m512i qq =
                join256(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
            __m512i p = _mm512_maddubs_epi16(qq, _mm512_loadu_si512(y[i].qs + 64 * j));
            acc = _mm512_dpwssd_epi32(acc, p, two_scales16(sc[2 * j], sc[2 * j + 1]));
        }
        int isum = _mm512_reduce_add_epi32(acc);
        sum += y[i].d * (h2f(x[i].d) * (float)isum - h2f(x[i].dmin) * (float)msum);
    }
    *s = sum;
}

static void dot_q5_k(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q5_k *x = w;
    const blk_q8_k *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        uint8_t sc[8];
        int msum = kmins(x[i].scales, y[i].bsums, sc);
        __m512i acc = _mm512_setzero_si512();
        __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            __m256i hl = _mm256_slli_epi16(_mm256_and_si256(qh, one), 4);
            __m256i hh = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4);
            qh = _mm256_srli_epi16(qh, 2);
            __m512i qq =
                join256(_mm256_or_si256(_mm256_and_si256(q, m4), hl),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh));
            __m512i p = _mm512_maddubs_epi16(qq, _mm512_loadu_si512(y[i].qs + 64 * j));
            acc = _mm512_dpwssd_epi32(acc, p, two_scales16(sc[2 * j], sc[2 * j + 1]));
        }
        int isum = _mm512_reduce_add_epi32(acc);
        sum += y[i].d * (h2f(x[i].d) * (float)isum - h2f(x[i].dmin) * (float)msum);
    }
    *s = sum;
}

static void dot_q6_k(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q6_k *x = w;
    const blk_q8_k *y = a;
    /* int16 lane i takes scale i/8 (first 4 groups) or 4 + i/8 */
    const __m512i idx_a = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
                                           1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i idx_b = _mm512_add_epi16(idx_a, _mm512_set1_epi16(4));
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        __m256i bs = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        __m256i scw = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        __m256i offv = _mm256_madd_epi16(bs, scw);
        __m128i o = _mm_add_epi32(_mm256_castsi256_si128(offv), _mm256_extracti128_si256(offv, 1));
        o = _mm_add_epi32(o, _mm_shuffle_epi32(o, 0x4e));
        o = _mm_add_epi32(o, _mm_shuffle_epi32(o, 0xb1));
        int off = _mm_cvtsi128_si32(o);
        __m512i acc = _mm512_setzero_si512();
        for (int half = 0; half < 2; half++) {
            __m512i q12, q34;
            rlx_q6k_half_avx512(x[i].ql, x[i].qh, half, &q12, &q34);
            const int8_t *q8 = y[i].qs + 128 * half;
            __m512i p12 = _mm512_maddubs_epi16(q12, _mm512_loadu_si512(q8));
            __m512i p34 = _mm512_maddubs_epi16(q34, _mm512_loadu_si512(q8 + 64));
            __m512i sc16 = _mm512_castsi128_si512(
                _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(x[i].scales + 8 * half))));
            acc = _mm512_dpwssd_epi32(acc, p12, _mm512_permutexvar_epi16(idx_a, sc16));
            acc = _mm512_dpwssd_epi32(acc, p34, _mm512_permutexvar_epi16(idx_b, sc16));
        }
        int isum = _mm512_reduce_add_epi32(acc);
        sum += y[i].d * h2f(x[i].d) * (float)(isum - 32 * off);
    }
    *s = sum;
}

void rlx_cpu_fill_dots_avx512(rlx_cpu_table *t)
{
    t->dot[RLX_DTYPE_Q8_0] = dot_q8_0;
    t->dot[RLX_DTYPE_Q4_K] = dot_q4_k;
    t->dot[RLX_DTYPE_Q5_K] = dot_q5_k;
    t->dot[RLX_DTYPE_Q6_K] = dot_q6_k;
}
