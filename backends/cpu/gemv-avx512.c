/* AVX-512 VNNI matrix-vector kernels (see gemv.h). Compiled with the AVX-512
 * flags; reached only through rlx_cpu_gemv_avx512().
 *
 * Decode is bound by the weight stream, so the weight side does as little as
 * possible per byte:
 *   - Q8_0: x ^ 0x80 is x + 128 as an unsigned byte, so one vpdpbusd against
 *     the signed activation gives sum(x*y) + 128*sum(y); the activation's
 *     -128*sum(y) per block is the accumulator's starting value.
 *   - Q4_0: the nibbles are already unsigned (q = nibble - 8): the start
 *     value is -8*sum(y); four blocks per register (their 16 packed bytes,
 *     gathered by one vpermt2w from two loads), the activation stored as
 *     the matching low/high halves.
 *   - Q4_K/Q5_K: two 32-byte chunks per register, the activation permuted to
 *     match; the mins term uses precomputed sums per 32.
 *   - Q6_K: the -32 offset folded into the block's integer accumulator.
 *   - Scales are converted as vectors (vpermw picks each block's f16 out of a
 *     load of the blocks themselves), and every block ends in one vector FMA:
 *     no horizontal sums until the end of the row.
 *   - Q4_K/Q5_K/Q6_K: vpdpbusd sums of four products, packed to 16 bits
 *     (exact: below 2^15), so one vpdpwssd applies the sub-block scales
 *     (16-bit lanes built once per block with vpermw) of two registers.
 *   - Four rows go through each loop together (see ROWS4), sharing the
 *     activation loads, each with its own accumulator; a row alone (the
 *     last n % 4) alternates two (F16: four) accumulators, as one chain of
 *     4-cycle FMAs set the pace in cache. */
#include <immintrin.h>

#include "backends/cpu/gemv.h"
#include "backends/cpu/kernels-internal.h"
#include "backends/cpu/q6k-avx512.h"

#define AI __attribute__((always_inline)) inline

static AI float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

static AI __m512i join256(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

static inline float hsum128(__m128 q)
{
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* ========================================================= row streams */

/* A task's rows in four streams: rows r, q + r, 2q + r, 3q + r (q = n / 4)
 * go through one call of the type's four-row kernel, which loads each
 * activation block once for the four. The activation is read once per
 * weight row, two to three times the weight bytes (K = 8192: 16-48 KiB, as
 * much as L1 holds), and one row at a time its refills held the weight
 * stream to 70-80% of a plain read. Four adjacent rows instead gave the
 * prefetchers four short streams that restart every row (50-60%); a
 * quarter each keeps four long sequential streams.
 *
 * The hardware prefetchers alone held those streams to 64-93% of the
 * streaming read on the Zen 5 VM this was measured on (2 threads), the
 * K-quants and the 1.8 MB products lowest. Each step of a kernel's loop
 * therefore asks for the lines its row will need PF_AHEAD bytes further on
 * (pf_ahead), and a task asks for its streams' first PF_AHEAD bytes at once
 * (pf_start): every type and shape then read at 85-100%. 1.5 KiB ahead beat
 * 1 and 2 KiB for the quantized types; F16, whose loop steps through 64
 * bytes a row, did best at 1 KiB; 0.5 KiB was too close, and fetching into
 * L2 only (T1) gained half as much. (8 KiB ahead, tried first, evicted the
 * activation from L1.) The last n % 4 rows go one at a time. */
#define PF_AHEAD     RLX_GEMV_PF_AHEAD
#define PF_AHEAD_F16 1024

static AI void pf_start(const uint8_t *p, const uint8_t *end)
{
    for (int i = 0; i < PF_AHEAD / 64 && p + 64 * i < end; i++)
        _mm_prefetch((const char *)(p + 64 * i), _MM_HINT_T0);
}

/* the lines of [p + dist, p + dist + step): what one step of a kernel's
 * loop over a row reads dist bytes further on */
static AI void pf_ahead(const uint8_t *p, size_t dist, size_t step)
{
    for (size_t o = 0; o < step; o += 64)
        _mm_prefetch((const char *)(p + dist + o), _MM_HINT_T0);
}

/* rows [q0, q1) of four streams q rows apart: CALL4 sees row (stream 0's
 * row r), qs (bytes between the streams), yr and ys (the same for y) */
#define STREAMS4(CALL4)                                                                           \
    const uint8_t *wb = w;                                                                        \
    const int64_t ys = q;                                                                         \
    const size_t qs = (size_t)q * rb;                                                             \
    for (int st = 0; st < 4; st++)                                                                \
        pf_start(wb + (size_t)st * qs + (size_t)q0 * rb, wb + (size_t)st * qs + (size_t)q1 * rb); \
    for (int64_t r = q0; r < q1; r++) {                                                           \
        const uint8_t *row = wb + (size_t)r * rb;                                                 \
        float *yr = y + r;                                                                        \
        CALL4;                                                                                    \
    }

/* rows [0, n) one at a time: CALL1 sees row and r */
#define ROWS1(CALL1)                                              \
    for (int64_t r = 0; r < n; r++) {                             \
        const uint8_t *row = (const uint8_t *)w + (size_t)r * rb; \
        CALL1;                                                    \
    }

/* ================================================================= Q8_0 */

/* The activation in two arrays: the int8 values of each pair of blocks
 * (64 bytes), then per pair its two blocks' start values (-16*sum(y), one
 * lane's share of -128*sum(y)) and scales. Broadcasting those per lane
 * costs two permutes per pair, shared by the four rows of a stream step;
 * stored per lane (192 bytes a pair, as first done) the activation of an
 * 8192-long row took 24 KiB, half of L1 beside four weight streams. */
typedef struct {
    int32_t bias[2];
    float dy[2];
} act_q8_meta;

typedef struct {
    const int8_t *y;      /* 64 per pair */
    const act_q8_meta *m; /* one per pair */
} q8_act;

static int64_t q8_pairs(int64_t K)
{
    return (K / 32 + 1) / 2;
}

static size_t q8_act_bytes(int64_t K)
{
    return (size_t)q8_pairs(K) * (64 + sizeof(act_q8_meta));
}

static AI q8_act q8_view(const void *act, int64_t K)
{
    const int8_t *y = act;
    return (q8_act){y, (const act_q8_meta *)(const void *)(y + 64 * q8_pairs(K))};
}

/* One Q8_0 activation block, as quantize_q8_0 makes it (the same amax, the
 * same id = 1/(amax/127), v*id rounded half away from zero, d kept as the
 * f16 it is stored as), all in registers: values 0-15 to lo, 16-31 to hi;
 * returns their sum. The layouts below only place the bytes differently. */
static AI int32_t q8_block(const float *x, int8_t *lo, int8_t *hi, float *d_out)
{
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    *d_out = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    const __m512i half = _mm512_castps_si512(_mm512_set1_ps(0.5f));
    __m512 a = _mm512_mul_ps(v0, vid), b = _mm512_mul_ps(v1, vid);
    __m512i qa = _mm512_cvttps_epi32(
        _mm512_add_ps(a, _mm512_castsi512_ps(_mm512_or_si512(
                             half, _mm512_and_si512(_mm512_castps_si512(a), sign)))));
    __m512i qb = _mm512_cvttps_epi32(
        _mm512_add_ps(b, _mm512_castsi512_ps(_mm512_or_si512(
                             half, _mm512_and_si512(_mm512_castps_si512(b), sign)))));
    _mm_storeu_si128((__m128i *)(void *)lo, _mm512_cvtepi32_epi8(qa));
    _mm_storeu_si128((__m128i *)(void *)hi, _mm512_cvtepi32_epi8(qb));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
}

static void q8_prep(const float *x, void *act, int64_t K)
{
    int8_t *y = act;
    act_q8_meta *m = (act_q8_meta *)(void *)(y + 64 * q8_pairs(K));
    const int64_t nb = K / 32;
    for (int64_t b = 0; b < q8_pairs(K) * 2; b++) {
        int8_t *yb = y + 32 * b;
        int32_t s = 0;
        float d = 0.0f;
        if (b < nb)
            s = q8_block(x + 32 * b, yb, yb + 16, &d);
        else
            memset(yb, 0, 32);
        m[b / 2].bias[b & 1] = -16 * s;
        m[b / 2].dy[b & 1] = d;
    }
}

/* lanes 0-7 from element 0 of a pair's meta, 8-15 from element 1 (bias),
 * or from elements 2 and 3 (dy) */
static const int32_t q8_b_idx[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
static const int32_t q8_dy_idx[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};

/* a pair's start values and scales per lane */
static AI void q8_meta(const act_q8_meta *m, __m512i bidx, __m512i didx, __m512i *B, __m512 *DY)
{
    const __m512i v = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)m));
    *B = _mm512_permutexvar_epi32(bidx, v);
    *DY = _mm512_permutexvar_ps(didx, _mm512_castsi512_ps(v));
}

/* word 0 (block i's d) for lanes 0-7, word 17 (block i+1's d) for 8-15 */
static const uint16_t q8_d_idx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 17, 17, 17, 17, 17, 17, 17, 17,
                                      0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  0,  0};

/* one pair of blocks (68 bytes) into acc */
static AI void q8_pair(const uint8_t *b, __m512i Y, __m512i B, __m512 DY, __m512i idx, __m512 *acc)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i xv = join256(_mm256_loadu_si256((const __m256i *)(b + 2)),
                         _mm256_loadu_si256((const __m256i *)(b + 36)));
    __m512i s = _mm512_dpbusd_epi32(B, _mm512_xor_si512(xv, flip), Y);
    __m512 d = _mm512_cvtph_ps(
        _mm512_castsi512_si256(_mm512_permutexvar_epi16(idx, _mm512_loadu_si512(b))));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, DY), *acc);
}

/* block i (the last of an odd count) of a row alone */
static AI float q8_last(const uint8_t *w, int64_t i, q8_act a)
{
    const act_q8_meta *m = &a.m[i / 2];
    const blk_q8_0 *x = (const blk_q8_0 *)(const void *)w + i;
    __m256i xv =
        _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs), _mm256_set1_epi8((char)0x80));
    __m256i s = _mm256_dpbusd_epi32(_mm256_set1_epi32(m->bias[0]), xv,
                                    _mm256_load_si256((const __m256i *)(a.y + 32 * i)));
    __m256 f = _mm256_cvtepi32_ps(s);
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));
    return h2f(x->d) * m->dy[0] * hsum128(q);
}

/* R (4 or 1) rows rb bytes apart, sharing each pair's activation loads; one
 * accumulator per row whichever R, so a row's result is the same bits on
 * either path (and for any thread count) */
static AI void q8_rows_n(int R, int64_t nb, const uint8_t *w, size_t rb, q8_act a, float *y,
                         int64_t ys)
{
    const __m512i idx = _mm512_loadu_si512(q8_d_idx);
    const __m512i bidx = _mm512_loadu_si512(q8_b_idx), didx = _mm512_loadu_si512(q8_dy_idx);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i Y = _mm512_load_si512(a.y + 32 * i);
        __m512i B;
        __m512 DY;
        q8_meta(&a.m[i / 2], bidx, didx, &B, &DY);
        for (int r = 0; r < R; r++) {
            pf_ahead(w + (size_t)r * rb + (size_t)i * 34, PF_AHEAD, 68);
            q8_pair(w + (size_t)r * rb + (size_t)i * 34, Y, B, DY, idx, &acc[r]);
        }
    }
    for (int r = 0; r < R; r++)
        y[r * ys] =
            _mm512_reduce_add_ps(acc[r]) + (i < nb ? q8_last(w + (size_t)r * rb, i, a) : 0.0f);
}

static void q8_streams(int64_t K, const void *w, size_t rb, int64_t q, int64_t q0, int64_t q1,
                       const void *act, float *y)
{
    const q8_act a = q8_view(act, K);
    STREAMS4(q8_rows_n(4, K / 32, row, qs, a, yr, ys))
}

static void q8_rows(int64_t K, const void *w, size_t rb, int64_t n, const void *act, float *y)
{
    const q8_act a = q8_view(act, K);
    ROWS1(q8_rows_n(1, K / 32, row, rb, a, y + r, 1))
}

/* ================================================================= Q4_0 */

/* The activation in two arrays, like Q8_0's: per group of four blocks the
 * low halves (elements 0-15) of each block's int8 values, then the high
 * halves, matching the weights' low and high nibbles (128 bytes); then per
 * group the blocks' start values (-2*sum(y), one lane's share of
 * -8*sum(y)) and scales. */
typedef struct {
    int32_t bias[4];
    float dy[4];
} act_q4_meta;

typedef struct {
    const int8_t *y;      /* 128 per group: ylo[64], yhi[64] */
    const act_q4_meta *m; /* one per group */
} q4_act;

static int64_t q4_groups(int64_t K)
{
    return (K / 32 + 3) / 4;
}

static size_t q4_act_bytes(int64_t K)
{
    return (size_t)q4_groups(K) * (128 + sizeof(act_q4_meta));
}

static AI q4_act q4_view(const void *act, int64_t K)
{
    const int8_t *y = act;
    return (q4_act){y, (const act_q4_meta *)(const void *)(y + 128 * q4_groups(K))};
}

static void q4_prep(const float *x, void *act, int64_t K)
{
    int8_t *y = act;
    act_q4_meta *m = (act_q4_meta *)(void *)(y + 128 * q4_groups(K));
    const int64_t nb = K / 32;
    for (int64_t b = 0; b < q4_groups(K) * 4; b++) {
        int8_t *lo = y + 128 * (b / 4) + 16 * (b & 3), *hi = lo + 64;
        int32_t s = 0;
        float d = 0.0f;
        if (b < nb) {
            s = q8_block(x + 32 * b, lo, hi, &d);
        } else {
            memset(lo, 0, 16);
            memset(hi, 0, 16);
        }
        m[b / 4].bias[b & 3] = -2 * s;
        m[b / 4].dy[b & 3] = d;
    }
}

/* block b's d is word 9*b of the group (18-byte blocks) */
static const uint16_t q4_d_idx[32] = {0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 27, 27, 27, 27,
                                      0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  0,  0};

/* 16-bit word j of a group's nibble register: block j/8's word j%8, at word
 * 9*(j/8) + 1 + j%8 of the group's 72 bytes (every block's nibbles start at
 * an even byte). Words 0-31 come from a load of bytes 0-63, words 32-35 from
 * a 16-byte load of bytes 56-71 (its words 4-7: vpermt2w index 36-39). */
static const uint16_t q4_q_idx[32] = {1,  2,  3,  4,  5,  6,  7,  8,  10, 11, 12,
                                      13, 14, 15, 16, 17, 19, 20, 21, 22, 23, 24,
                                      25, 26, 28, 29, 30, 31, 36, 37, 38, 39};

/* lane l from element l / 4 of a group's meta (bias), or 4 + l / 4 (dy) */
static const int32_t q4_b_idx[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
static const int32_t q4_dy_idx[16] = {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7};

/* q: the group's 64 nibble bytes, dv: its first 64 bytes (the four d's at
 * words 0, 9, 18, 27) */
static AI void q4_dot_v(__m512i q, __m512i dv, __m512i bias, __m512i ylo, __m512i yhi, __m512 dy,
                        __m512i idx, __m512 *acc)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i lo = _mm512_and_si512(q, m4);
    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    __m512i s = _mm512_dpbusd_epi32(bias, lo, ylo);
    s = _mm512_dpbusd_epi32(s, hi, yhi);
    __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(idx, dv)));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, dy), *acc);
}

/* the row's last 1-3 blocks: nothing past them is read */
static AI void q4_tail(const uint8_t *b, int nvalid, __m512i B, __m512i YL, __m512i YH, __m512 DY,
                       __m512i idx, __m512 *acc)
{
    __m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b + 2)));
    if (nvalid > 1)
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(b + 20)), 1);
    if (nvalid > 2)
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(b + 38)), 2);
    __m512i dv = _mm512_maskz_loadu_epi16((__mmask32)((1u << (9 * (nvalid - 1) + 1)) - 1u), b);
    q = _mm512_maskz_mov_epi32((__mmask16)((1u << (4 * nvalid)) - 1u), q);
    q4_dot_v(q, dv, B, YL, YH, DY, idx, acc);
}

/* group g's activation registers */
static AI void q4_act_regs(q4_act a, int64_t g, __m512i bidx, __m512i didx, __m512i *B, __m512i *YL,
                           __m512i *YH, __m512 *DY)
{
    const __m512i v =
        _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)&a.m[g]));
    *B = _mm512_permutexvar_epi32(bidx, v);
    *DY = _mm512_permutexvar_ps(didx, _mm512_castsi512_ps(v));
    *YL = _mm512_load_si512(a.y + 128 * g);
    *YH = _mm512_load_si512(a.y + 128 * g + 64);
}

/* R (4 or 1) rows rb bytes apart, sharing each group's activation loads;
 * one accumulator per row whichever R (the same bits on either path). Four
 * whole blocks take two loads (nothing past the group is read; a masked
 * load of its last 8 bytes ran at half speed from DRAM) and one word
 * permute. */
static AI void q4_rows_n(int R, int64_t nb, const uint8_t *w, size_t rb, q4_act a, float *y,
                         int64_t ys)
{
    const __m512i idx = _mm512_loadu_si512(q4_d_idx);
    const __m512i qidx = _mm512_loadu_si512(q4_q_idx);
    const __m512i bidx = _mm512_loadu_si512(q4_b_idx), didx = _mm512_loadu_si512(q4_dy_idx);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    __m512i B, YL, YH;
    __m512 DY;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        q4_act_regs(a, i / 4, bidx, didx, &B, &YL, &YH, &DY);
        for (int r = 0; r < R; r++) {
            const uint8_t *b = w + (size_t)r * rb + (size_t)i * 18;
            pf_ahead(b, PF_AHEAD, 72);
            const __m512i l0 = _mm512_loadu_si512(b);
            const __m512i l1 = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b + 56)));
            q4_dot_v(_mm512_permutex2var_epi16(l0, qidx, l1), l0, B, YL, YH, DY, idx, &acc[r]);
        }
    }
    if (i < nb) {
        q4_act_regs(a, i / 4, bidx, didx, &B, &YL, &YH, &DY);
        for (int r = 0; r < R; r++)
            q4_tail(w + (size_t)r * rb + (size_t)i * 18, (int)(nb - i), B, YL, YH, DY, idx,
                    &acc[r]);
    }
    for (int r = 0; r < R; r++)
        y[r * ys] = _mm512_reduce_add_ps(acc[r]);
}

static void q4_streams(int64_t K, const void *w, size_t rb, int64_t q, int64_t q0, int64_t q1,
                       const void *act, float *y)
{
    const q4_act a = q4_view(act, K);
    STREAMS4(q4_rows_n(4, K / 32, row, qs, a, yr, ys))
}

static void q4_rows(int64_t K, const void *w, size_t rb, int64_t n, const void *act, float *y)
{
    const q4_act a = q4_view(act, K);
    ROWS1(q4_rows_n(1, K / 32, row, rb, a, y + r, 1))
}

/* ========================================================== Q4_K / Q5_K */

/* One 256-block: int8 values permuted so that register j holds the two
 * sub-blocks a weight register's nibbles give (see kq_block), the sums per
 * 32 for the mins, the scale. */
typedef struct {
    int8_t y[256];
    int16_t ysum[8];
    float d;
    int32_t pad[11];
} act_kq;
_Static_assert(sizeof(act_kq) == 320, "act_kq");

static size_t kq_act_bytes(int64_t K)
{
    return (size_t)(K / 256) * sizeof(act_kq);
}

static void kq_prep(const float *x, void *act, int64_t K)
{
    act_kq *a = act;
    /* register j = [sub-block s0, sub-block s1] */
    static const int order[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    for (int64_t i = 0; i < K / 256; i++) {
        blk_q8_k q;
        rlx_vec_ops_avx512.quantize_q8_k(x + 256 * i, &q, 256);
        for (int j = 0; j < 8; j++) {
            memcpy(a[i].y + 32 * j, q.qs + 32 * order[j], 32);
            a[i].ysum[j] = (int16_t)(q.bsums[2 * j] + q.bsums[2 * j + 1]);
        }
        a[i].d = q.d;
        memset(a[i].pad, 0, sizeof a[i].pad);
    }
}

/* The sums of two rows go through the scales in one register: vpdpbusd
 * gives register j's 32-bit sums of four products (below 2^15, so vpackssdw
 * keeps them exact); packing row a's register j with row b's puts, in each
 * 128-bit lane, four sums of a then four of b, and a register's lanes 0-1
 * hold its sub-block s0, lanes 2-3 its s1 (kq_prep's order), so one
 * vpdpwssd applies both rows' scales, and the four registers of a block
 * accumulate into one. Dwords 0-1 of each 128-bit lane are then row a's,
 * 2-3 row b's: one conversion and one multiply-add per two rows and block
 * (per row before, with a pack and a scale permute fewer per four rows).
 * Indices into SC16, which holds row r's eight scales at words 8r..8r+7:
 * kq_sc_pair[j] for rows 0 and 1; rows 2 and 3 add 16. */
#define KQ_W4(a, b) a, a, a, a, b, b, b, b
#define KQ_PAIR_IDX(s0, s1)                                                        \
    {                                                                              \
        KQ_W4(s0, 8 + s0), KQ_W4(s0, 8 + s0), KQ_W4(s1, 8 + s1), KQ_W4(s1, 8 + s1) \
    }
static const uint16_t kq_sc_pair[4][32] = {KQ_PAIR_IDX(0, 2), KQ_PAIR_IDX(1, 3), KQ_PAIR_IDX(4, 6),
                                           KQ_PAIR_IDX(5, 7)};
#undef KQ_PAIR_IDX
#undef KQ_W4

/* Q5_K high bits: the bit of qh[l] for each byte of register j */
static AI __m512i q5_bitsel(int lo_bit, int hi_bit)
{
    return join256(_mm256_set1_epi8((char)(1 << lo_bit)), _mm256_set1_epi8((char)(1 << hi_bit)));
}

/* A block's four registers of 4-bit (Q4_K, qh == NULL) or 5-bit quants,
 * in kq_prep's order, against Y: vpdpbusd's sums */
static AI void kq_sums(const uint8_t *qh, const uint8_t *qs, const __m512i Y[4], __m512i r[4])
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), z = _mm512_setzero_si512();
    __m512i A = _mm512_loadu_si512(qs), B = _mm512_loadu_si512(qs + 64);
    __m512i q[4] = {_mm512_and_si512(A, m4), _mm512_and_si512(_mm512_srli_epi16(A, 4), m4),
                    _mm512_and_si512(B, m4), _mm512_and_si512(_mm512_srli_epi16(B, 4), m4)};
    if (qh) {
        const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
        const __m512i v16 = _mm512_set1_epi8(16);
        static const int bits[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
        for (int j = 0; j < 4; j++) {
            __mmask64 k = _mm512_test_epi8_mask(H, q5_bitsel(bits[j][0], bits[j][1]));
            q[j] = _mm512_mask_add_epi8(q[j], k, q[j], v16);
        }
    }
    for (int j = 0; j < 4; j++)
        r[j] = _mm512_dpbusd_epi32(z, q[j], Y[j]);
}

/* Blocks i of R rows (4, or 1 for the last n % 4 of a share) at once: the
 * 16-byte headers (d, dmin, 12 scale bytes) of the rows share one register,
 * so the scale unpacking, the mins term and the d/dmin conversion run once
 * for the four (each was per row: about 40% of a row's instructions per
 * block). Lane r of H is row r's header; the unpacking is rlx_k4_unpack's
 * per 128-bit lane. With R == 1 the row is its own pair partner, so it
 * goes through the same additions as on the four-row path and its result
 * does not depend on which path it took. */
static const uint16_t kq_dd_idx[32] = {0, 1, 8, 9, 16, 17, 24, 25};

static AI void kq_rows(int R, bool q5, int64_t nb, const uint8_t *w, size_t rb, const act_kq *a,
                       float *y, int64_t ys)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(0x3F);
    const __m512i m2 = _mm512_set1_epi8(0x30), z = _mm512_setzero_si512();
    const __m512i dd_idx = _mm512_loadu_si512(kq_dd_idx);
    const __m512i pair_off = _mm512_set1_epi16(16);
    __m512i sidx[2][4];
    for (int j = 0; j < 4; j++) {
        sidx[0][j] = _mm512_loadu_si512(kq_sc_pair[j]);
        sidx[1][j] = _mm512_add_epi16(sidx[0][j], pair_off);
    }
    /* d*dy per dword: rows 0,0,1,1 (pair 0) or 2,2,3,3 (pair 1) per lane */
    const __m512i dsel[2] = {_mm512_set_epi32(2, 2, 0, 0, 2, 2, 0, 0, 2, 2, 0, 0, 2, 2, 0, 0),
                             _mm512_set_epi32(6, 6, 4, 4, 6, 6, 4, 4, 6, 6, 4, 4, 6, 6, 4, 4)};
    const size_t bb = q5 ? sizeof(blk_q5_k) : sizeof(blk_q4_k);
    const int np = R == 4 ? 2 : 1;
    const size_t rstep = R == 4 ? rb : 0; /* R == 1: the row four times */
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    __m512 accm = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const act_kq *ai = &a[i];
        __m512i Y[4];
        for (int j = 0; j < 4; j++)
            Y[j] = _mm512_load_si512(ai->y + 64 * j);
        const uint8_t *b0 = w + (size_t)i * bb;
        for (int r = 0; r < R; r++)
            pf_ahead(b0 + (size_t)r * rb, PF_AHEAD, bb);
        __m512i H = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b0));
        H = _mm512_inserti32x4(H, _mm_loadu_si128((const __m128i *)(b0 + rstep)), 1);
        H = _mm512_inserti32x4(H, _mm_loadu_si128((const __m128i *)(b0 + 2 * rstep)), 2);
        H = _mm512_inserti32x4(H, _mm_loadu_si128((const __m128i *)(b0 + 3 * rstep)), 3);
        /* per lane: the 12 scale bytes a, b, c at dwords 0-2 */
        const __m512i V = _mm512_bsrli_epi128(H, 4);
        const __m512i C = _mm512_shuffle_epi32(V, _MM_PERM_CCCC);
        const __m512i chi = _mm512_unpacklo_epi32(_mm512_and_si512(C, m4),
                                                  _mm512_and_si512(_mm512_srli_epi16(C, 4), m4));
        const __m512i hi = _mm512_or_si512(chi, _mm512_and_si512(_mm512_srli_epi16(V, 2), m2));
        const __m512i SM = _mm512_unpacklo_epi32(_mm512_and_si512(V, m6), hi); /* sc0-7, mn0-7 */
        /* d*dy, dmin*dy of the four rows: [d0, dmin0, d1, dmin1, ...] */
        const __m512 DD = _mm512_mul_ps(
            _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(dd_idx, H))),
            _mm512_set1_ps(ai->d));
        /* mins: lane r sums mn[k] * ysum[k] of row r, times its dmin */
        const __m512i M32 = _mm512_madd_epi16(
            _mm512_unpackhi_epi8(SM, z),
            _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(const void *)ai->ysum)));
        accm = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(M32),
            _mm512_permutexvar_ps(_mm512_set_epi32(7, 7, 7, 7, 5, 5, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1),
                                  DD),
            accm);
        /* the four rows' scales as words: row r at words 8r..8r+7 */
        const __m512i SC16 = _mm512_unpacklo_epi8(SM, z);
        for (int p = 0; p < np; p++) {
            const uint8_t *ba = b0 + (size_t)(2 * p) * rstep, *bq = ba + rstep;
            __m512i ra[4], rq[4];
            kq_sums(q5 ? ba + 16 : NULL, ba + (q5 ? 48 : 16), Y, ra);
            if (R == 4)
                kq_sums(q5 ? bq + 16 : NULL, bq + (q5 ? 48 : 16), Y, rq);
            else
                for (int j = 0; j < 4; j++)
                    rq[j] = ra[j];
            __m512i sv = z;
            for (int j = 0; j < 4; j++)
                sv = _mm512_dpwssd_epi32(sv, _mm512_packs_epi32(ra[j], rq[j]),
                                         _mm512_permutexvar_epi16(sidx[p][j], SC16));
            acc[p] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(sv), _mm512_permutexvar_ps(dsel[p], DD), acc[p]);
        }
    }
    float s[2][16], m[16];
    _mm512_storeu_ps(s[0], acc[0]);
    _mm512_storeu_ps(s[1], acc[1]);
    _mm512_storeu_ps(m, accm);
    for (int r = 0; r < R; r++) {
        /* row r: dwords 0-1 (r even) or 2-3 (odd) of each lane of acc[r/2] */
        const float *v = s[r / 2] + 2 * (r % 2);
        float dot = ((v[0] + v[4]) + (v[8] + v[12])) + ((v[1] + v[5]) + (v[9] + v[13]));
        y[r * ys] = dot - ((m[4 * r] + m[4 * r + 2]) + (m[4 * r + 1] + m[4 * r + 3]));
    }
}

static void q4k_streams(int64_t K, const void *w, size_t rb, int64_t q, int64_t q0, int64_t q1,
                        const void *act, float *y)
{
    STREAMS4(kq_rows(4, false, K / 256, row, qs, act, yr, ys))
}

static void q4k_rows(int64_t K, const void *w, size_t rb, int64_t n, const void *act, float *y)
{
    ROWS1(kq_rows(1, false, K / 256, row, 0, act, y + r, 1))
}

static void q5k_streams(int64_t K, const void *w, size_t rb, int64_t q, int64_t q0, int64_t q1,
                        const void *act, float *y)
{
    STREAMS4(kq_rows(4, true, K / 256, row, qs, act, yr, ys))
}

static void q5k_rows(int64_t K, const void *w, size_t rb, int64_t n, const void *act, float *y)
{
    ROWS1(kq_rows(1, true, K / 256, row, 0, act, y + r, 1))
}

/* ================================================================= Q6_K */

/* The plain Q8_K activation: its bsums give the -32 offset. */
static size_t q8k_act_bytes(int64_t K)
{
    return (size_t)(K / 256) * sizeof(blk_q8_k);
}

static void q8k_prep(const float *x, void *act, int64_t K)
{
    rlx_vec_ops_avx512.quantize_q8_k(x, act, K);
}

/* vpdpbusd's 32-bit lane m of q12 (or q34) sums four products of scale
 * m/4 (or 4 + m/4), below 2^15 even for q + 32 = 63 against -128;
 * vpackssdw of the two puts in 128-bit lane L four sums of scale L, then
 * four of scale 4 + L */
static const uint16_t q6_sc_idx[32] = {0, 0, 0, 0, 4, 4, 4, 4, 1, 1, 1, 1, 5, 5, 5, 5,
                                       2, 2, 2, 2, 6, 6, 6, 6, 3, 3, 3, 3, 7, 7, 7, 7};

static AI void q6_block(const blk_q6_k *x, const blk_q8_k *y, const __m512i Y[4], __m512i idx,
                        __m512 *acc)
{
    /* the stored values are q + 32: start at -32 * sum(scale * bsum) */
    __m256i off =
        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums),
                          _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales)));
    __m512i s =
        _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
    for (int half = 0; half < 2; half++) {
        __m512i q12, q34;
        rlx_q6k_half_avx512(x->ql, x->qh, half, &q12, &q34);
        __m512i sc16 = _mm512_castsi128_si512(
            _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(x->scales + 8 * half))));
        const __m512i z = _mm512_setzero_si512();
        __m512i p = _mm512_packs_epi32(_mm512_dpbusd_epi32(z, q12, Y[2 * half]),
                                       _mm512_dpbusd_epi32(z, q34, Y[2 * half + 1]));
        s = _mm512_dpwssd_epi32(s, p, _mm512_permutexvar_epi16(idx, sc16));
    }
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(h2f(x->d) * y->d), *acc);
}

/* one row (the last n % 4 of a share; q6_rows4 takes the others) */
static AI void q6_row(int64_t nb, const uint8_t *w, const blk_q8_k *a, float *y)
{
    const __m512i idx = _mm512_loadu_si512(q6_sc_idx);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m512i Y[4];
        for (int j = 0; j < 4; j++)
            Y[j] = _mm512_loadu_si512(a[i].qs + 64 * j);
        pf_ahead(w + (size_t)i * sizeof(blk_q6_k), PF_AHEAD, sizeof(blk_q6_k));
        q6_block((const blk_q6_k *)(const void *)w + i, &a[i], Y, idx, &acc);
    }
    *y = _mm512_reduce_add_ps(acc);
}

/* q6_sc_idx for row r of a pair and half h: row r's 16 scales are words
 * 16r..16r+15 of its pair's register, the half's eight from word 8h */
#define Q6_IDX(o)                                                                                  \
    {                                                                                              \
        0 + o, 0 + o, 0 + o, 0 + o, 4 + o, 4 + o, 4 + o, 4 + o, 1 + o, 1 + o, 1 + o, 1 + o, 5 + o, \
            5 + o, 5 + o, 5 + o, 2 + o, 2 + o, 2 + o, 2 + o, 6 + o, 6 + o, 6 + o, 6 + o, 3 + o,    \
            3 + o, 3 + o, 3 + o, 7 + o, 7 + o, 7 + o, 7 + o                                        \
    }
static const uint16_t q6_sc_idx4[2][2][32] = {{Q6_IDX(0), Q6_IDX(8)}, {Q6_IDX(16), Q6_IDX(24)}};
#undef Q6_IDX

/* Four rows' blocks i at once: the rows' scales widened and their -32
 * offsets (q6_block's start values, the same integers) computed two rows
 * per register. */
static AI void q6_rows4(int64_t nb, const uint8_t *w, size_t rb, const blk_q8_k *a, float *y,
                        int64_t ys)
{
    const __m512i z = _mm512_setzero_si512();
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    for (int64_t i = 0; i < nb; i++) {
        __m512i Y[4];
        for (int j = 0; j < 4; j++)
            Y[j] = _mm512_loadu_si512(a[i].qs + 64 * j);
        const __m512i BS =
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)a[i].bsums));
        const blk_q6_k *x[4];
        for (int r = 0; r < 4; r++) {
            x[r] = (const blk_q6_k *)(const void *)(w + (size_t)r * rb) + i;
            pf_ahead((const uint8_t *)x[r], PF_AHEAD, sizeof(blk_q6_k));
        }
        __m512i S16[2], NEG[2];
        for (int p = 0; p < 2; p++) {
            S16[p] = join256(
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[2 * p]->scales)),
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[2 * p + 1]->scales)));
            NEG[p] = _mm512_sub_epi32(z, _mm512_slli_epi32(_mm512_madd_epi16(S16[p], BS), 5));
        }
        for (int r = 0; r < 4; r++) {
            const int p = r >> 1, o = r & 1;
            __m512i sv = _mm512_zextsi256_si512(o ? _mm512_extracti64x4_epi64(NEG[p], 1)
                                                  : _mm512_castsi512_si256(NEG[p]));
            for (int half = 0; half < 2; half++) {
                __m512i q12, q34;
                rlx_q6k_half_avx512(x[r]->ql, x[r]->qh, half, &q12, &q34);
                __m512i pk = _mm512_packs_epi32(_mm512_dpbusd_epi32(z, q12, Y[2 * half]),
                                                _mm512_dpbusd_epi32(z, q34, Y[2 * half + 1]));
                sv = _mm512_dpwssd_epi32(
                    sv, pk,
                    _mm512_permutexvar_epi16(_mm512_loadu_si512(q6_sc_idx4[o][half]), S16[p]));
            }
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sv), _mm512_set1_ps(h2f(x[r]->d) * a[i].d),
                                     acc[r]);
        }
    }
    for (int r = 0; r < 4; r++)
        y[r * ys] = _mm512_reduce_add_ps(acc[r]);
}

static void q6k_streams(int64_t K, const void *w, size_t rb, int64_t q, int64_t q0, int64_t q1,
                        const void *act, float *y)
{
    STREAMS4(q6_rows4(K / 256, row, qs, act, yr, ys))
}

static void q6k_rows(int64_t K, const void *w, size_t rb, int64_t n, const void *act, float *y)
{
    ROWS1(q6_row(K / 256, row, act, y + r))
}

/* ================================================================== F16 */

/* R (4 or 1) rows rb bytes apart, sharing the activation loads (the f32
 * row x, read in place: no prep); two accumulators per row whichever R, so
 * a row's result is the same bits on either path */
static AI void f16_rows_n(int R, int64_t K, const uint8_t *w, size_t rb, const float *x, float *y,
                          int64_t ys)
{
    __m512 acc[4][2];
    for (int r = 0; r < 4; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        const __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
        for (int r = 0; r < R; r++) {
            const uint16_t *h = (const uint16_t *)(const void *)(w + (size_t)r * rb) + k;
            pf_ahead((const uint8_t *)h, PF_AHEAD_F16, 64);
            acc[r][0] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h)), x0,
                                        acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(
                _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + 16))), x1, acc[r][1]);
        }
    }
    for (; k < K; k += 16) { /* masked tail: nothing past the row is read */
        __mmask16 m = K - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (K - k)) - 1u);
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
        for (int r = 0; r < R; r++) {
            const uint16_t *h = (const uint16_t *)(const void *)(w + (size_t)r * rb) + k;
            acc[r][0] =
                _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, h)), xv, acc[r][0]);
        }
    }
    for (int r = 0; r < R; r++)
        y[r * ys] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
}

static void f16_streams(int64_t K, const void *w, size_t rb, int64_t q, int64_t q0, int64_t q1,
                        const void *act, float *y)
{
    STREAMS4(f16_rows_n(4, K, row, qs, act, yr, ys))
}

static void f16_rows(int64_t K, const void *w, size_t rb, int64_t n, const void *act, float *y)
{
    ROWS1(f16_rows_n(1, K, row, rb, act, y + r, 1))
}

/* ============================================================ dispatch */

static const rlx_gemv_kernel k_q8_0 = {q8_act_bytes, q8_prep, q8_streams, q8_rows};
static const rlx_gemv_kernel k_q4_0 = {q4_act_bytes, q4_prep, q4_streams, q4_rows};
static const rlx_gemv_kernel k_q4_k = {kq_act_bytes, kq_prep, q4k_streams, q4k_rows};
static const rlx_gemv_kernel k_q5_k = {kq_act_bytes, kq_prep, q5k_streams, q5k_rows};
static const rlx_gemv_kernel k_q6_k = {q8k_act_bytes, q8k_prep, q6k_streams, q6k_rows};
static const rlx_gemv_kernel k_f16 = {NULL, NULL, f16_streams, f16_rows};

const rlx_gemv_kernel *rlx_cpu_gemv_avx512(rlx_dtype t)
{
    switch (t) {
    case RLX_DTYPE_Q8_0:
        return &k_q8_0;
    case RLX_DTYPE_Q4_0:
        return &k_q4_0;
    case RLX_DTYPE_Q4_K:
        return &k_q4_k;
    case RLX_DTYPE_Q5_K:
        return &k_q5_k;
    case RLX_DTYPE_Q6_K:
        return &k_q6_k;
    case RLX_DTYPE_F16:
        return &k_f16;
    default:
        return NULL;
    }
}
