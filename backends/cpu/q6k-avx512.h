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
    /* The 2-bit fields of qh, already at bits 4-5 of each byte: (h & 3) << 4
     * and ((h >> 2) & 3) << 4 for q12's halves, ((h >> 4) & 3) << 4 and
     * ((h >> 6) & 3) << 4 for q34's, from one broadcast of qh shifted by a
     * different count in each 256-bit half (a 16-bit shift only moves bits
     * between the bytes of a word where the mask drops them); then one
     * ternary op each: (l & 15) | hi. */
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i cnt12 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i cnt34 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i l = _mm512_loadu_si512(ql + 64 * half);
    const __m512i h =
        _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(qh + 32 * half)));
    const __m512i h12 = _mm512_and_si512(_mm512_sllv_epi16(h, cnt12), m30);
    const __m512i h34 = _mm512_and_si512(_mm512_srlv_epi16(h, cnt34), m30);
    *q12 = _mm512_ternarylogic_epi32(l, m4, h12, 0xEA);                       /* (a & b) | c */
    *q34 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), m4, h34, 0xEA); /* (a & b) | c */
}

#endif
