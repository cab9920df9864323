/* AVX-512 VNNI panel kernels of the quantized GEMM (qgemm.c drives them).
 * Compiled with the AVX-512 flags; reached only through
 * rlx_cpu_fill_qgemm_avx512(), which the dispatcher calls when CPUID and XCR0
 * say the instructions and the ZMM state are available.
 *
 * A panel is up to 32 weight rows (output columns) repacked once per call:
 * every weight is made unsigned (Q8_0: q + 128, Q4_0: q in 0..15 with its -8
 * moved into the activation term, Q6_K: q in 0..63 with its -32 moved there,
 * Q4_K/Q5_K: q as stored) and stored so that one 64-byte vector holds 4
 * consecutive k of 16 columns. vpdpbusd then multiplies that vector by 4
 * activation bytes broadcast from memory and adds into 16 column sums: no
 * horizontal reductions, and each weight vector loaded from L1 serves 4
 * activation rows. Per sub-block the integer sums (started at the
 * activation's -offset * sum(q)) are converted once and scaled by the column
 * scales; the K-quants keep a per-superblock float sum so the activation's
 * scale is applied once per 256 elements. Integer sums equal the scalar
 * reference's exactly; only the float summation order differs.
 *
 * Panel layout per type-block (32 elements for Q8_0/Q4_0, 256 for the
 * K-quants): quants [k/4][32 columns][4 bytes], then the float scales
 * [sub-block][32], then (Q4_K/Q5_K) the float mins [sub-block][32]. */
#include <immintrin.h>

#include "backends/cpu/kernels-internal.h"

#define NC     RLX_QG_NC
#define MR     6 /* activation rows per Q8_0/Q4_0 tile */
#define MRK    4 /* per K-quant tile (its superblock sums take 8 more registers) */
#define INLINE static inline __attribute__((always_inline))

static inline float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* ---------------------------------------------------------------- repack */

/* Stores 32 unsigned bytes of each of 4 columns (c0..c0+3) of one 32-element
 * chunk: group g (k = 4g..4g+3) of column c goes to dst + g*128 + c*4. */
INLINE void store4x8(uint8_t *dst, int c0, __m256i v0, __m256i v1, __m256i v2, __m256i v3)
{
    __m256i t0 = _mm256_unpacklo_epi32(v0, v1), t1 = _mm256_unpackhi_epi32(v0, v1);
    __m256i t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    uint8_t *d = dst + c0 * 4;
    _mm_store_si128((__m128i *)(void *)(d + 0 * 128), _mm256_castsi256_si128(u0));
    _mm_store_si128((__m128i *)(void *)(d + 1 * 128), _mm256_castsi256_si128(u1));
    _mm_store_si128((__m128i *)(void *)(d + 2 * 128), _mm256_castsi256_si128(u2));
    _mm_store_si128((__m128i *)(void *)(d + 3 * 128), _mm256_castsi256_si128(u3));
    _mm_store_si128((__m128i *)(void *)(d + 4 * 128), _mm256_extracti128_si256(u0, 1));
    _mm_store_si128((__m128i *)(void *)(d + 5 * 128), _mm256_extracti128_si256(u1, 1));
    _mm_store_si128((__m128i *)(void *)(d + 6 * 128), _mm256_extracti128_si256(u2, 1));
    _mm_store_si128((__m128i *)(void *)(d + 7 * 128), _mm256_extracti128_si256(u3, 1));
}

/* Unsigned quants of 32-element chunk c of one type-block. */
INLINE __m256i chunk_q8_0(const uint8_t *b, int c)
{
    (void)c;
    const blk_q8_0 *x = (const blk_q8_0 *)(const void *)b;
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)x->qs),
                            _mm256_set1_epi8((char)0x80));
}

INLINE __m256i chunk_q4_0(const uint8_t *b, int c)
{
    (void)c;
    const blk_q4_0 *x = (const blk_q4_0 *)(const void *)b;
    __m128i q = _mm_loadu_si128((const __m128i *)(const void *)x->qs);
    __m128i m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

INLINE __m256i chunk_q4_k(const uint8_t *b, int c)
{
    const blk_q4_k *x = (const blk_q4_k *)(const void *)b;
    __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + 32 * (c / 2)));
    if (c & 1)
        q = _mm256_srli_epi16(q, 4);
    return _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
}

INLINE __m256i chunk_q5_k(const uint8_t *b, int c)
{
    const blk_q5_k *x = (const blk_q5_k *)(const void *)b;
    __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + 32 * (c / 2)));
    if (c & 1)
        q = _mm256_srli_epi16(q, 4);
    q = _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)x->qh);
    /* bit c of each byte -> bit 4 */
    __m256i bit = _mm256_set1_epi8((char)(1 << c));
    __m256i hb =
        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(q, hb);
}

INLINE __m256i chunk_q6_k(const uint8_t *b, int c)
{
    const blk_q6_k *x = (const blk_q6_k *)(const void *)b;
    int half = c / 4, quarter = c % 4;
    __m256i l =
        _mm256_loadu_si256((const __m256i *)(const void *)(x->ql + 64 * half + 32 * (quarter & 1)));
    if (quarter >= 2)
        l = _mm256_srli_epi16(l, 4);
    l = _mm256_and_si256(l, _mm256_set1_epi8(0x0F));
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(x->qh + 32 * half));
    h = _mm256_and_si256(_mm256_srli_epi16(h, 2 * quarter), _mm256_set1_epi8(3));
    return _mm256_or_si256(l, _mm256_slli_epi16(h, 4));
}

/* Scales (and mins) of one type-block of one row into the panel's tables:
 * entry [sub-block][column]. */
INLINE void scales_q8_0(const uint8_t *b, float *sc, float *mn, int col)
{
    (void)mn;
    sc[col] = h2f(((const blk_q8_0 *)(const void *)b)->d);
}

INLINE void scales_q4_0(const uint8_t *b, float *sc, float *mn, int col)
{
    (void)mn;
    sc[col] = h2f(((const blk_q4_0 *)(const void *)b)->d);
}

INLINE void scales_k4(uint16_t d16, uint16_t dmin16, const uint8_t *packed, float *sc, float *mn,
                      int col)
{
    uint8_t s[8], m[8];
    rlx_k4_unpack(packed, s, m);
    float d = h2f(d16), dmin = h2f(dmin16);
    for (int j = 0; j < 8; j++) {
        sc[j * NC + col] = d * (float)s[j];
        mn[j * NC + col] = dmin * (float)m[j];
    }
}

INLINE void scales_q4_k(const uint8_t *b, float *sc, float *mn, int col)
{
    const blk_q4_k *x = (const blk_q4_k *)(const void *)b;
    scales_k4(x->d, x->dmin, x->scales, sc, mn, col);
}

INLINE void scales_q5_k(const uint8_t *b, float *sc, float *mn, int col)
{
    const blk_q5_k *x = (const blk_q5_k *)(const void *)b;
    scales_k4(x->d, x->dmin, x->scales, sc, mn, col);
}

INLINE void scales_q6_k(const uint8_t *b, float *sc, float *mn, int col)
{
    (void)mn;
    const blk_q6_k *x = (const blk_q6_k *)(const void *)b;
    float d = h2f(x->d);
    for (int j = 0; j < 16; j++)
        sc[j * NC + col] = d * (float)x->scales[j];
}

typedef __m256i (*chunk_fn)(const uint8_t *, int);
typedef void (*scales_fn)(const uint8_t *, float *, float *, int);

/* Repacks n_rows (<= NC) rows; missing rows repeat the last one (their
 * outputs are never stored). qb: elements per type-block, bb: its bytes,
 * nsub: scale entries per type-block, mins: has a min table. */
INLINE void repack(const void *w, size_t rb, int n_rows, int64_t K, uint8_t *panel, int qb,
                   size_t bb, int nsub, int mins, chunk_fn chunk, scales_fn scales)
{
    const uint8_t *rows[NC];
    for (int r = 0; r < NC; r++)
        rows[r] = (const uint8_t *)w + (size_t)(r < n_rows ? r : n_rows - 1) * rb;
    const size_t qbytes = (size_t)qb * NC;
    const size_t blk_bytes = qbytes + (size_t)nsub * NC * sizeof(float) * (mins ? 2 : 1);
    for (int64_t b = 0; b < K / qb; b++) {
        uint8_t *dst = panel + (size_t)b * blk_bytes;
        float *sc = (float *)(void *)(dst + qbytes);
        float *mn = sc + nsub * NC;
        for (int r = 0; r < NC; r++)
            scales(rows[r] + (size_t)b * bb, sc, mn, r);
        for (int c = 0; c < qb / 32; c++)
            for (int r = 0; r < NC; r += 4)
                store4x8(dst + (size_t)c * 32 * NC, r, chunk(rows[r] + (size_t)b * bb, c),
                         chunk(rows[r + 1] + (size_t)b * bb, c),
                         chunk(rows[r + 2] + (size_t)b * bb, c),
                         chunk(rows[r + 3] + (size_t)b * bb, c));
    }
}

/* ----------------------------------------------------------------- tiles */

typedef struct {
    const int8_t *q[MR];
    const float *d[MR];
    const int32_t *o[MR];
    const float *ms[MR];
} rows4;

INLINE void store_rows(float *y, int64_t ldy, int mr, __mmask16 k0, __mmask16 k1, __m512 acc[MR][2])
{
    for (int i = 0; i < MR; i++) {
        if (i >= mr)
            break;
        _mm512_mask_storeu_ps(y + i * ldy, k0, acc[i][0]);
        _mm512_mask_storeu_ps(y + i * ldy + 16, k1, acc[i][1]);
    }
}

INLINE void store_rows_k(float *y, int64_t ldy, int mr, __mmask16 k0, __mmask16 k1,
                         __m512 acc[MRK][2])
{
    for (int i = 0; i < MRK; i++) {
        if (i >= mr)
            break;
        _mm512_mask_storeu_ps(y + i * ldy, k0, acc[i][0]);
        _mm512_mask_storeu_ps(y + i * ldy + 16, k1, acc[i][1]);
    }
}

INLINE __m512i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* Q8_0 / Q4_0: one scale per 32 on both sides. */
INLINE void tile_b32(const uint8_t *panel, int64_t nb, const rows4 *r, float *y, int64_t ldy,
                     int mr, __mmask16 k0, __mmask16 k1)
{
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *qp = panel + (size_t)b * (32 * NC + NC * 4);
        __m512i is[MR][2];
        for (int i = 0; i < MR; i++)
            is[i][0] = is[i][1] = _mm512_set1_epi32(r->o[i][b]);
        for (int g = 0; g < 8; g++) {
            __m512i w0 = _mm512_load_si512(qp + g * 128);
            __m512i w1 = _mm512_load_si512(qp + g * 128 + 64);
            for (int i = 0; i < MR; i++) {
                __m512i a = bcast4(r->q[i] + b * 32 + g * 4);
                is[i][0] = _mm512_dpbusd_epi32(is[i][0], w0, a);
                is[i][1] = _mm512_dpbusd_epi32(is[i][1], w1, a);
            }
        }
        const float *sc = (const float *)(const void *)(qp + 32 * NC);
        __m512 s0 = _mm512_load_ps(sc), s1 = _mm512_load_ps(sc + 16);
        for (int i = 0; i < MR; i++) {
            __m512 da = _mm512_set1_ps(r->d[i][b]);
            acc[i][0] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[i][0]), _mm512_mul_ps(s0, da), acc[i][0]);
            acc[i][1] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[i][1]), _mm512_mul_ps(s1, da), acc[i][1]);
        }
    }
    store_rows(y, ldy, mr, k0, k1, acc);
}

/* K-quants: superblocks of 256 with sub-blocks of bs (32, or 16 for Q6_K);
 * mins: Q4_K/Q5_K's per-sub-block min term, else the integer offset. */
INLINE void tile_k(const uint8_t *panel, int64_t nb, const rows4 *r, float *y, int64_t ldy, int mr,
                   __mmask16 k0, __mmask16 k1, int bs, int mins)
{
    const int nsub = 256 / bs;
    const size_t blk_bytes = 256 * NC + (size_t)nsub * NC * 4 * (mins ? 2 : 1);
    __m512 acc[MRK][2];
    for (int i = 0; i < MRK; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *qp = panel + (size_t)b * blk_bytes;
        const float *sc = (const float *)(const void *)(qp + 256 * NC);
        const float *mn = sc + nsub * NC;
        __m512 sb[MRK][2];
        for (int i = 0; i < MRK; i++)
            sb[i][0] = sb[i][1] = _mm512_setzero_ps();
        for (int s = 0; s < nsub; s++) {
            __m512i is[MRK][2];
            for (int i = 0; i < MRK; i++)
                is[i][0] = is[i][1] =
                    mins ? _mm512_setzero_si512() : _mm512_set1_epi32(r->o[i][b * nsub + s]);
            for (int g = 0; g < bs / 4; g++) {
                const uint8_t *wp = qp + (size_t)(s * bs / 4 + g) * 128;
                __m512i w0 = _mm512_load_si512(wp), w1 = _mm512_load_si512(wp + 64);
                for (int i = 0; i < MRK; i++) {
                    __m512i a = bcast4(r->q[i] + b * 256 + s * bs + g * 4);
                    is[i][0] = _mm512_dpbusd_epi32(is[i][0], w0, a);
                    is[i][1] = _mm512_dpbusd_epi32(is[i][1], w1, a);
                }
            }
            __m512 s0 = _mm512_load_ps(sc + s * NC), s1 = _mm512_load_ps(sc + s * NC + 16);
            for (int i = 0; i < MRK; i++) {
                sb[i][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[i][0]), s0, sb[i][0]);
                sb[i][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[i][1]), s1, sb[i][1]);
            }
            if (mins) {
                __m512 m0 = _mm512_load_ps(mn + s * NC), m1 = _mm512_load_ps(mn + s * NC + 16);
                for (int i = 0; i < MRK; i++) {
                    __m512 ms = _mm512_set1_ps(r->ms[i][b * 8 + s]);
                    sb[i][0] = _mm512_fnmadd_ps(m0, ms, sb[i][0]);
                    sb[i][1] = _mm512_fnmadd_ps(m1, ms, sb[i][1]);
                }
            }
        }
        for (int i = 0; i < MRK; i++) {
            __m512 da = _mm512_set1_ps(r->d[i][b]);
            acc[i][0] = _mm512_fmadd_ps(sb[i][0], da, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(sb[i][1], da, acc[i][1]);
        }
    }
    store_rows_k(y, ldy, mr, k0, k1, acc);
}

/* Rows m..m+n-1 (clamped to M-1: surplus rows recompute the last one and are
 * not stored). */
INLINE void rows_at(const rlx_qg_act *a, int64_t m, int64_t M, int n, rows4 *r)
{
    for (int i = 0; i < n; i++) {
        int64_t mm = m + i < M ? m + i : M - 1;
        r->q[i] = a->q + mm * a->ldq;
        r->d[i] = a->d + mm * a->ldd;
        r->o[i] = a->ofs ? a->ofs + mm * a->ldo : NULL;
        r->ms[i] = a->msum ? a->msum + mm * a->ldo : NULL;
    }
}

#define PANEL_FN(name, qb, bb, nsub, mins, chunk, scales, MRT, TILE)                       \
    static void name(const void *w, size_t rb, int n_rows, int64_t K, const rlx_qg_act *a, \
                     int64_t M, float *y, int64_t ldy, void *panel)                        \
    {                                                                                      \
        repack(w, rb, n_rows, K, panel, qb, bb, nsub, mins, chunk, scales);                \
        __mmask16 k0 = (__mmask16)(n_rows >= 16 ? 0xFFFF : (1u << n_rows) - 1);            \
        __mmask16 k1 = (__mmask16)(n_rows >= 32   ? 0xFFFF                                 \
                                   : n_rows <= 16 ? 0                                      \
                                                  : (1u << (n_rows - 16)) - 1);            \
        for (int64_t m = 0; m < M; m += MRT) {                                             \
            rows4 r;                                                                       \
            rows_at(a, m, M, MRT, &r);                                                     \
            int mr = (int)(M - m < MRT ? M - m : MRT);                                     \
            TILE;                                                                          \
        }                                                                                  \
    }

PANEL_FN(panel_q8_0, 32, sizeof(blk_q8_0), 1, 0, chunk_q8_0, scales_q8_0, MR,
         tile_b32(panel, K / 32, &r, y + m * ldy, ldy, mr, k0, k1))
PANEL_FN(panel_q4_0, 32, sizeof(blk_q4_0), 1, 0, chunk_q4_0, scales_q4_0, MR,
         tile_b32(panel, K / 32, &r, y + m * ldy, ldy, mr, k0, k1))
PANEL_FN(panel_q4_k, 256, sizeof(blk_q4_k), 8, 1, chunk_q4_k, scales_q4_k, MRK,
         tile_k(panel, K / 256, &r, y + m * ldy, ldy, mr, k0, k1, 32, 1))
PANEL_FN(panel_q5_k, 256, sizeof(blk_q5_k), 8, 1, chunk_q5_k, scales_q5_k, MRK,
         tile_k(panel, K / 256, &r, y + m * ldy, ldy, mr, k0, k1, 32, 1))
PANEL_FN(panel_q6_k, 256, sizeof(blk_q6_k), 16, 0, chunk_q6_k, scales_q6_k, MRK,
         tile_k(panel, K / 256, &r, y + m * ldy, ldy, mr, k0, k1, 16, 0))

void rlx_cpu_fill_qgemm_avx512(rlx_cpu_table *t)
{
    t->qgemm[RLX_DTYPE_Q8_0] = panel_q8_0;
    t->qgemm[RLX_DTYPE_Q4_0] = panel_q4_0;
    t->qgemm[RLX_DTYPE_Q4_K] = panel_q4_k;
    t->qgemm[RLX_DTYPE_Q5_K] = panel_q5_k;
    t->qgemm[RLX_DTYPE_Q6_K] = panel_q6_k;
}
