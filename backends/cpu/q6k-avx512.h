/* Q6_K unpacking shared by the AVX-512 kernels (kernels-avx512.c's dot,
 * gemv-avx512.c's matrix-vector product). Include only from files compiled
 * with the AVX-512 flags. */
#ifndef RLX_BACKENDS_CPU_Q6K_AVX512_H
#define RLX_BACKENDS_CPU_Q6K_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* Half `half` (0 or 1) of a Q6_K block's 256 values: its 64 ql bytes and
 * 32 qh bytes as two registers of stored values (q + 32, 0..63), q12 for
 * the half's first 128 values and q34 for the next 128, in the order of the
 * block's Q8_K partner bytes. */
static inline __attribute__((always_inline)) void
rlx_q6k_half_avx512(const uint8_t *ql, const uint8_t *qh, int half, __m512i *q12, __m512i *q34)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m256i m2 = _mm256_set1_epi8(3);
    __m512i l = _mm512_loadu_si512(ql + 64 * half);
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(qh + 32 * half));
    __m512i h12 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(h, m2)),
                                     _mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 1);
    __m512i h34 =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2)),
                           _mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 1);
    *q12 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(h12, 4));
    *q34 =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), _mm512_slli_epi16(h34, 4));
}

#endif
