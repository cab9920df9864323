/* AVX2 + FMA + F16C integer dot products over ggml blocks. Compiled with
 * -mavx2 -mfma -mf16c; reached only through rlx_cpu_fill_dots_avx2().
 *
 * The building block is a 32 x int8 dot: maddubs multiplies unsigned bytes by
 * signed bytes into pairwise int16 sums, madd widens to int32. Signed x signed
 * uses |x| and sign(x)*y. The integer sums are exact (the int16 pairs cannot
 * saturate for the value ranges these formats produce), so every block's
 * integer dot equals the scalar reference; only float accumulation order
 * differs. */
#include <immintrin.h>

#include "backends/cpu/kernels-internal.h"

static inline float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

static inline float hsum_ps(__m256 v)
{
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

static inline int hsum_epi32(__m256i v)
{
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4e));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1));
    return _mm_cvtsi128_si32(q);
}

static inline __m256i dot_s8(__m256i x, __m256i y)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static inline __m256i dot_u8(__m256i u, __m256i y)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}

/* 16 packed nibble bytes -> 32 bytes: low nibbles then high nibbles */
static inline __m256i nibbles32(const uint8_t *qs)
{
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* 32 bits of qh -> 32 bytes of 0x10 where the bit is set */
static inline __m256i bits_to_0x10(const uint8_t *qh4)
{
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    __m256i v = _mm256_set1_epi32((int)qh);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0x0000000000000000LL);
    v = _mm256_shuffle_epi8(v, shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

static void dot_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q8_0 *x = w;
    const blk_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i p = dot_s8(_mm256_loadu_si256((const __m256i *)x[i].qs),
                           _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc =
            _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = hsum_ps(acc);
}

static void dot_q4_0(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q4_0 *x = w;
    const blk_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    const __m256i eight = _mm256_set1_epi8(8);
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = _mm256_sub_epi8(nibbles32(x[i].qs), eight);
        __m256i p = dot_s8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc =
            _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = hsum_ps(acc);
}

static void dot_q4_1(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q4_1 *x = w;
    const blk_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256i p = dot_u8(nibbles32(x[i].qs), yv);
        __m256i ys = dot_u8(ones, yv);
        float dy = h2f(y[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * dy), _mm256_cvtepi32_ps(p), acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].m) * dy), _mm256_cvtepi32_ps(ys), acc);
    }
    *s = hsum_ps(acc);
}

static void dot_q5_0(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q5_0 *x = w;
    const blk_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    const __m256i sixteen = _mm256_set1_epi8(16);
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = _mm256_or_si256(nibbles32(x[i].qs), bits_to_0x10(x[i].qh));
        q = _mm256_sub_epi8(q, sixteen);
        __m256i p = dot_s8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc =
            _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = hsum_ps(acc);
}

static void dot_q5_1(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q5_1 *x = w;
    const blk_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256i q = _mm256_or_si256(nibbles32(x[i].qs), bits_to_0x10(x[i].qh));
        __m256i p = dot_u8(q, yv);
        __m256i ys = dot_u8(ones, yv);
        float dy = h2f(y[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * dy), _mm256_cvtepi32_ps(p), acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].m) * dy), _mm256_cvtepi32_ps(ys), acc);
    }
    *s = hsum_ps(acc);
}

/* sum_j mins[j] * (bsums[2j] + bsums[2j+1]) */
/* sum_j mins[j] * (bsums[2j] + bsums[2j+1]) and the scales */
static inline int kmins_dot(const uint8_t *scales, const int16_t *bsums, uint8_t sc[8])
{
    uint8_t mn[8];
    rlx_k4_unpack(scales, sc, mn);
    __m128i m8 = _mm_loadl_epi64((const __m128i *)(const void *)mn);
    __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    return hsum_epi32(
        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)bsums), m16));
}

static void dot_q4_k(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q4_k *x = w;
    const blk_q8_k *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        uint8_t sc[8];
        int msum = kmins_dot(x[i].scales, y[i].bsums, sc);
        __m256i acc = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            __m256i plo =
                _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j)));
            __m256i phi = _mm256_maddubs_epi16(
                hi, _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j + 32)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * j])));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        sum += y[i].d * (h2f(x[i].d) * (float)hsum_epi32(acc) - h2f(x[i].dmin) * (float)msum);
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
        int msum = kmins_dot(x[i].scales, y[i].bsums, sc);
        __m256i acc = _mm256_setzero_si256();
        __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            __m256i hl = _mm256_slli_epi16(_mm256_and_si256(qh, one), 4);
            __m256i hh = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4);
            qh = _mm256_srli_epi16(qh, 2);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), hl);
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh);
            __m256i plo =
                _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j)));
            __m256i phi = _mm256_maddubs_epi16(
                hi, _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * j + 32)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * j])));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        sum += y[i].d * (h2f(x[i].d) * (float)hsum_epi32(acc) - h2f(x[i].dmin) * (float)msum);
    }
    *s = sum;
}

static void dot_q6_k(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q6_k *x = w;
    const blk_q8_k *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        /* offset: the stored values are q + 32 */
        __m256i bs = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        __m256i scw = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        int off = hsum_epi32(_mm256_madd_epi16(bs, scw));
        __m256i acc = _mm256_setzero_si256();
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = x[i].ql + 64 * half;
            const int8_t *sc = x[i].scales + 8 * half;
            const int8_t *q8 = y[i].qs + 128 * half;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * half));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            q[1] = _mm256_or_si256(
                _mm256_and_si256(l1, m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            q[2] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            q[3] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            for (int k = 0; k < 4; k++) {
                __m256i p =
                    _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(q8 + 32 * k)));
                __m256i scv =
                    _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scv));
            }
        }
        sum += y[i].d * h2f(x[i].d) * (float)(hsum_epi32(acc) - 32 * off);
    }
    *s = sum;
}

void rlx_cpu_fill_dots_avx2(rlx_cpu_table *t)
{
    t->dot[RLX_DTYPE_Q4_0] = dot_q4_0;
    t->dot[RLX_DTYPE_Q4_1] = dot_q4_1;
    t->dot[RLX_DTYPE_Q5_0] = dot_q5_0;
    t->dot[RLX_DTYPE_Q5_1] = dot_q5_1;
    t->dot[RLX_DTYPE_Q8_0] = dot_q8_0;
    t->dot[RLX_DTYPE_Q4_K] = dot_q4_k;
    t->dot[RLX_DTYPE_Q5_K] = dot_q5_k;
    t->dot[RLX_DTYPE_Q6_K] = dot_q6_k;
}
