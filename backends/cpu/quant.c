/* Block formats: scalar dequantization, quantization (the `rlx quantize`
 * path) and the reference integer dot products every SIMD path is tested
 * against. Written from the block layouts, one element at a time, for
 * clarity rather than speed. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/kernels-internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>

/* (l0 + l4 + l2 + l6) + (l1 + l5 + l3 + l7) of lanes a = l0..3, b = l4..7,
 * in the order lanes8_sum uses */
static inline float hsum8_sse(__m128 a, __m128 b)
{
    __m128 t = _mm_add_ps(a, b);                   /* l0+l4, l1+l5, l2+l6, l3+l7 */
    __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t)); /* (l0+l4)+(l2+l6), (l1+l5)+(l3+l7) */
    __m128 w = _mm_add_ss(u, _mm_shuffle_ps(u, u, 1));
    return _mm_cvtss_f32(w);
}
#else
static inline float lanes8_sum(const float l[8])
{
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}
#endif

/* The lanes of a float sum that rounds (sum L * x) added in double. */
static inline double lanes8_sum_d(const float l[8])
{
    double s = 0;
    for (int k = 0; k < 8; k++)
        s += l[k];
    return s;
}

#define QK   32
#define QK_K 256

static inline int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* round half away from zero, like lroundf, without the libm call (which
 * the compiler cannot inline or vectorize); |x| < 2^23 */
static inline int round_int(float x)
{
    return (int)(x + (x >= 0.0f ? 0.5f : -0.5f));
}

/* ---------------------------------------------------------------- dequant */

static void deq_q4_0(const void *src, float *y, int64_t nb)
{
    const blk_q4_0 *b = src;
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rlx_h2f(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)((b[i].qs[j] & 0xF) - 8);
            y[j + 16] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

static void deq_q4_1(const void *src, float *y, int64_t nb)
{
    const blk_q4_1 *b = src;
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rlx_h2f(b[i].d), m = rlx_h2f(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)(b[i].qs[j] & 0xF) + m;
            y[j + 16] = d * (float)(b[i].qs[j] >> 4) + m;
        }
    }
}

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void deq_q5_0(const void *src, float *y, int64_t nb)
{
    const blk_q5_0 *b = src;
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rlx_h2f(b[i].d);
        uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int lo = (b[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = d * (float)(lo - 16);
            y[j + 16] = d * (float)(hi - 16);
        }
    }
}

static void deq_q5_1(const void *src, float *y, int64_t nb)
{
    const blk_q5_1 *b = src;
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rlx_h2f(b[i].d), m = rlx_h2f(b[i].m);
        uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int lo = (b[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = d * (float)lo + m;
            y[j + 16] = d * (float)hi + m;
        }
    }
}

static void deq_q8_0(const void *src, float *y, int64_t nb)
{
    const blk_q8_0 *b = src;
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = rlx_h2f(b[i].d);
        for (int j = 0; j < 32; j++)
            y[j] = d * (float)b[i].qs[j];
    }
}

static void deq_q2_k(const void *src, float *y, int64_t nb)
{
    const blk_q2_k *b = src;
    for (int64_t i = 0; i < nb; i++) {
        float d = rlx_h2f(b[i].d), dmin = rlx_h2f(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; part++) {
                    uint8_t sc = b[i].scales[is++];
                    float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((q[l + 16 * part] >> shift) & 3) - ml;
                }
            }
        }
    }
}

static int q3k_scale(const uint8_t *s, int i)
{
    int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
    int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

static void deq_q3_k(const void *src, float *y, int64_t nb)
{
    const blk_q3_k *b = src;
    for (int64_t i = 0; i < nb; i++) {
        float d = rlx_h2f(b[i].d);
        const uint8_t *q = b[i].qs;
        int is = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int part = 0; part < 2; part++) {
                    float dl = d * (float)q3k_scale(b[i].scales, is++);
                    for (int l = 0; l < 16; l++) {
                        int idx = l + 16 * part;
                        int v = ((q[idx] >> shift) & 3) - ((b[i].hmask[idx] & m) ? 0 : 4);
                        *y++ = dl * (float)v;
                    }
                }
            }
        }
    }
}

static void deq_q4_k(const void *src, float *y, int64_t nb)
{
    const blk_q4_k *b = src;
    for (int64_t i = 0; i < nb; i++) {
        float d = rlx_h2f(b[i].d), dmin = rlx_h2f(b[i].dmin);
        for (int j = 0; j < 4; j++) {
            uint8_t s1, m1, s2, m2;
            rlx_k4_scale_min(2 * j, b[i].scales, &s1, &m1);
            rlx_k4_scale_min(2 * j + 1, b[i].scales, &s2, &m2);
            const uint8_t *q = b[i].qs + 32 * j;
            for (int l = 0; l < 32; l++)
                *y++ = d * (float)s1 * (float)(q[l] & 0xF) - dmin * (float)m1;
            for (int l = 0; l < 32; l++)
                *y++ = d * (float)s2 * (float)(q[l] >> 4) - dmin * (float)m2;
        }
    }
}

static void deq_q5_k(const void *src, float *y, int64_t nb)
{
    const blk_q5_k *b = src;
    for (int64_t i = 0; i < nb; i++) {
        float d = rlx_h2f(b[i].d), dmin = rlx_h2f(b[i].dmin);
        for (int j = 0; j < 4; j++) {
            uint8_t s1, m1, s2, m2;
            rlx_k4_scale_min(2 * j, b[i].scales, &s1, &m1);
            rlx_k4_scale_min(2 * j + 1, b[i].scales, &s2, &m2);
            const uint8_t *q = b[i].qs + 32 * j;
            for (int l = 0; l < 32; l++) {
                int v = (q[l] & 0xF) | (((b[i].qh[l] >> (2 * j)) & 1) << 4);
                *y++ = d * (float)s1 * (float)v - dmin * (float)m1;
            }
            for (int l = 0; l < 32; l++) {
                int v = (q[l] >> 4) | (((b[i].qh[l] >> (2 * j + 1)) & 1) << 4);
                *y++ = d * (float)s2 * (float)v - dmin * (float)m2;
            }
        }
    }
}

/* Q6_K element e (0..255) of a block as an integer in [-32, 31]. */
static int q6k_value(const blk_q6_k *b, int e)
{
    int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
    const uint8_t *ql = b->ql + 64 * half;
    const uint8_t *qh = b->qh + 32 * half;
    int low = (quarter & 1) ? ql[l + 32] : ql[l];
    low = (quarter >= 2) ? (low >> 4) : (low & 0xF);
    int high = (qh[l] >> (2 * quarter)) & 3;
    return (low | (high << 4)) - 32;
}

static void deq_q6_k(const void *src, float *y, int64_t nb)
{
    const blk_q6_k *b = src;
    for (int64_t i = 0; i < nb; i++) {
        float d = rlx_h2f(b[i].d);
        for (int e = 0; e < QK_K; e++)
            *y++ = d * (float)b[i].scales[e / 16] * (float)q6k_value(&b[i], e);
    }
}

static void deq_q8_k(const void *src, float *y, int64_t nb)
{
    const blk_q8_k *b = src;
    for (int64_t i = 0; i < nb; i++)
        for (int e = 0; e < QK_K; e++)
            *y++ = b[i].d * (float)b[i].qs[e];
}

bool rlx_cpu_can_dequantize(rlx_dtype t)
{
    switch (t) {
    case RLX_DTYPE_F32:
    case RLX_DTYPE_F16:
    case RLX_DTYPE_BF16:
    case RLX_DTYPE_F8_E4M3:
    case RLX_DTYPE_F8_E5M2:
    case RLX_DTYPE_Q4_0:
    case RLX_DTYPE_Q4_1:
    case RLX_DTYPE_Q5_0:
    case RLX_DTYPE_Q5_1:
    case RLX_DTYPE_Q8_0:
    case RLX_DTYPE_Q2_K:
    case RLX_DTYPE_Q3_K:
    case RLX_DTYPE_Q4_K:
    case RLX_DTYPE_Q5_K:
    case RLX_DTYPE_Q6_K:
    case RLX_DTYPE_Q8_K:
        return true;
    default:
        return false;
    }
}

bool rlx_cpu_can_quantize(rlx_dtype t)
{
    return rlx_cpu_can_dequantize(t) && t != RLX_DTYPE_Q2_K && t != RLX_DTYPE_Q3_K &&
           t != RLX_DTYPE_F8_E4M3 && t != RLX_DTYPE_F8_E5M2;
}

static rlx_status check_n(rlx_dtype t, int64_t n)
{
    if (n < 0)
        return RLX_ERR_INVALID_ARG;
    uint32_t bs = rlx_dtype_get(t)->block_size;
    if (bs == 0 || n % bs)
        return RLX_ERR_INVALID_ARG;
    return RLX_OK;
}

rlx_status rlx_cpu_dequantize_row(rlx_dtype t, const void *src, float *dst, int64_t n)
{
    if (!rlx_cpu_can_dequantize(t) || (n && (!src || !dst)))
        return RLX_ERR_INVALID_ARG;
    rlx_status st = check_n(t, n);
    if (st != RLX_OK)
        return st;
    int64_t nb = n / rlx_dtype_get(t)->block_size;
    switch (t) {
    case RLX_DTYPE_F32:
        memmove(dst, src, (size_t)n * sizeof(float));
        break;
    case RLX_DTYPE_F16:
        rlx_cpu_f16_to_f32_row(src, dst, n);
        break;
    case RLX_DTYPE_BF16:
        rlx_cpu_bf16_to_f32_row(src, dst, n);
        break;
    case RLX_DTYPE_F8_E4M3:
    case RLX_DTYPE_F8_E5M2:
        rlx_cpu_f8_to_f32_row(t, src, dst, n);
        break;
    case RLX_DTYPE_Q4_0:
        deq_q4_0(src, dst, nb);
        break;
    case RLX_DTYPE_Q4_1:
        deq_q4_1(src, dst, nb);
        break;
    case RLX_DTYPE_Q5_0:
        deq_q5_0(src, dst, nb);
        break;
    case RLX_DTYPE_Q5_1:
        deq_q5_1(src, dst, nb);
        break;
    case RLX_DTYPE_Q8_0:
        deq_q8_0(src, dst, nb);
        break;
    case RLX_DTYPE_Q2_K:
        deq_q2_k(src, dst, nb);
        break;
    case RLX_DTYPE_Q3_K:
        deq_q3_k(src, dst, nb);
        break;
    case RLX_DTYPE_Q4_K:
        deq_q4_k(src, dst, nb);
        break;
    case RLX_DTYPE_Q5_K:
        deq_q5_k(src, dst, nb);
        break;
    case RLX_DTYPE_Q6_K:
        deq_q6_k(src, dst, nb);
        break;
    case RLX_DTYPE_Q8_K:
        deq_q8_k(src, dst, nb);
        break;
    default:
        return RLX_ERR_UNSUPPORTED;
    }
    return RLX_OK;
}

/* ---------------------------------------------------------------- quantize */

/* The element of largest magnitude, sign kept. */
static float signed_absmax(const float *x, int n)
{
    float best = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) {
            amax = a;
            best = x[i];
        }
    }
    return best;
}

static void q_q4_0(const float *x, void *dst, int64_t nb)
{
    blk_q4_0 *b = dst;
    for (int64_t i = 0; i < nb; i++, x += QK) {
        /* the extreme value maps to -8 exactly, using the asymmetric range */
        float mx = signed_absmax(x, QK);
        float d = mx / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = rlx_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int lo = clampi((int)(x[j] * id + 8.5f), 0, 15);
            int hi = clampi((int)(x[j + 16] * id + 8.5f), 0, 15);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static void q_q5_0(const float *x, void *dst, int64_t nb)
{
    blk_q5_0 *b = dst;
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float mx = signed_absmax(x, QK);
        float d = mx / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = rlx_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int lo = clampi((int)(x[j] * id + 16.5f), 0, 31);
            int hi = clampi((int)(x[j + 16] * id + 16.5f), 0, 31);
            b[i].qs[j] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
            qh |= (uint32_t)(lo >> 4) << j;
            qh |= (uint32_t)(hi >> 4) << (j + 16);
        }
        for (int k = 0; k < 4; k++)
            b[i].qh[k] = (uint8_t)(qh >> (8 * k));
    }
}

static void min_max(const float *x, int n, float *mn, float *mx)
{
    float a = x[0], c = x[0];
    for (int i = 1; i < n; i++) {
        a = x[i] < a ? x[i] : a;
        c = x[i] > c ? x[i] : c;
    }
    *mn = a;
    *mx = c;
}

static void q_q4_1(const float *x, void *dst, int64_t nb)
{
    blk_q4_1 *b = dst;
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float mn, mx;
        min_max(x, QK, &mn, &mx);
        float d = (mx - mn) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = rlx_f32_to_f16(d);
        b[i].m = rlx_f32_to_f16(mn);
        for (int j = 0; j < 16; j++) {
            int lo = clampi((int)((x[j] - mn) * id + 0.5f), 0, 15);
            int hi = clampi((int)((x[j + 16] - mn) * id + 0.5f), 0, 15);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static void q_q5_1(const float *x, void *dst, int64_t nb)
{
    blk_q5_1 *b = dst;
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float mn, mx;
        min_max(x, QK, &mn, &mx);
        float d = (mx - mn) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = rlx_f32_to_f16(d);
        b[i].m = rlx_f32_to_f16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int lo = clampi((int)((x[j] - mn) * id + 0.5f), 0, 31);
            int hi = clampi((int)((x[j + 16] - mn) * id + 0.5f), 0, 31);
            b[i].qs[j] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
            qh |= (uint32_t)(lo >> 4) << j;
            qh |= (uint32_t)(hi >> 4) << (j + 16);
        }
        for (int k = 0; k < 4; k++)
            b[i].qh[k] = (uint8_t)(qh >> (8 * k));
    }
}

/* Round to the nearest integer (ties to even) in float arithmetic: adding
 * and subtracting 1.5 * 2^23 drops the fraction for |v| < 2^22. Unlike a
 * libm call it vectorizes; the result is an exact small integer as a float. */
static inline float round_f(float v)
{
    const float magic = 12582912.0f;
    return (v + magic) - magic;
}

/* For fit_scale_min: with L = round(min(iscale * xs, lmax)) (half away from
 * zero; xs >= 0), the sums of L, L^2 and L * x: eight lanes (lane k takes the
 * elements i = k mod 8) added at the end, those of the exact integer sums in
 * a fixed tree, those of L * x in double. n is a multiple
 * of 8. SSE2 and the portable loop do the same float operations in the same
 * order, so they give the same bits. */
static inline void sums_asym(const float *xs, const float *x, int n, float iscale, float lmax,
                             float *sl_out, float *sll_out, double *slx_out)
{
#if defined(__SSE2__)
    const __m128 vi = _mm_set1_ps(iscale), vm = _mm_set1_ps(lmax), half = _mm_set1_ps(0.5f);
    __m128 sl[2], sll[2], slx[2];
    for (int h = 0; h < 2; h++)
        sl[h] = sll[h] = slx[h] = _mm_setzero_ps();
    for (int i = 0; i < n; i += 8)
        for (int h = 0; h < 2; h++) {
            __m128 v = _mm_min_ps(_mm_mul_ps(vi, _mm_loadu_ps(xs + i + 4 * h)), vm);
            /* the extreme element often sits exactly on a half: it must
             * round up, as the stored levels do */
            __m128 l = _mm_cvtepi32_ps(_mm_cvttps_epi32(_mm_add_ps(v, half)));
            sl[h] = _mm_add_ps(sl[h], l);
            sll[h] = _mm_add_ps(sll[h], _mm_mul_ps(l, l));
            slx[h] = _mm_add_ps(slx[h], _mm_mul_ps(l, _mm_loadu_ps(x + i + 4 * h)));
        }
    *sl_out = hsum8_sse(sl[0], sl[1]);
    *sll_out = hsum8_sse(sll[0], sll[1]);
    float slx8[8];
    _mm_storeu_ps(slx8, slx[0]);
    _mm_storeu_ps(slx8 + 4, slx[1]);
    *slx_out = lanes8_sum_d(slx8);
#else
    float sl8[8], sll8[8], slx8[8];
    for (int k = 0; k < 8; k++)
        sl8[k] = sll8[k] = slx8[k] = 0.0f;
    for (int i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++) {
            float v = iscale * xs[i + k];
            v = v < lmax ? v : lmax;
            float l = (float)(int32_t)(v + 0.5f);
            sl8[k] += l;
            sll8[k] += l * l;
            slx8[k] += l * x[i + k];
        }
    *sl_out = lanes8_sum(sl8);
    *sll_out = lanes8_sum(sll8);
    *slx_out = lanes8_sum_d(slx8);
#endif
}

/* For fit_scale_sym6: L = round_f(clamp(iscale * x, -32, 31)); lane sums of
 * L^2 and L * x, lanes as in sums_asym. */
static inline void sums_sym6(const float *x, int n, float iscale, float *sll_out, double *slx_out)
{
#if defined(__SSE2__)
    const __m128 vi = _mm_set1_ps(iscale), lo = _mm_set1_ps(-32.0f), hi = _mm_set1_ps(31.0f);
    const __m128 magic = _mm_set1_ps(12582912.0f);
    __m128 sll[2], slx[2];
    for (int h = 0; h < 2; h++)
        sll[h] = slx[h] = _mm_setzero_ps();
    for (int i = 0; i < n; i += 8)
        for (int h = 0; h < 2; h++) {
            __m128 xv = _mm_loadu_ps(x + i + 4 * h);
            __m128 v = _mm_min_ps(_mm_max_ps(_mm_mul_ps(vi, xv), lo), hi);
            __m128 l = _mm_sub_ps(_mm_add_ps(v, magic), magic);
            sll[h] = _mm_add_ps(sll[h], _mm_mul_ps(l, l));
            slx[h] = _mm_add_ps(slx[h], _mm_mul_ps(l, xv));
        }
    *sll_out = hsum8_sse(sll[0], sll[1]);
    float slx8[8];
    _mm_storeu_ps(slx8, slx[0]);
    _mm_storeu_ps(slx8 + 4, slx[1]);
    *slx_out = lanes8_sum_d(slx8);
#else
    float sll8[8], slx8[8];
    for (int k = 0; k < 8; k++)
        sll8[k] = slx8[k] = 0.0f;
    for (int i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++) {
            float v = iscale * x[i + k];
            v = v > -32.0f ? v : -32.0f;
            v = v < 31.0f ? v : 31.0f;
            float l = round_f(v);
            slx8[k] += l * x[i + k];
            sll8[k] += l * l;
        }
    *sll_out = lanes8_sum(sll8);
    *slx_out = lanes8_sum_d(slx8);
#endif
}

/* Fit x ~ a*L - m over n values (n = 32) with L in [0, nmax], m >= 0: try a
 * small grid of inverse scales around (nmax / range), solve the 2x2
 * least-squares problem for each rounding and keep the lowest squared error.
 * One pass per candidate, in 8 float lanes the compiler vectorizes: the
 * sums of L and L^2 are exact small integers
 * in float, and the error of the least-squares fit follows from the sums:
 *   sum (a L + b - x)^2 = sxx - a sLx - b sx. */
static void fit_scale_min(const float *x, int n, int nmax, float *out_a, float *out_m)
{
    float mn, mx;
    min_max(x, n, &mn, &mx);
    if (mn > 0.0f)
        mn = 0.0f;
    if (mx <= mn) {
        *out_a = 0.0f;
        *out_m = -mn;
        return;
    }
    float xs[32];
    double sx = 0, sxx = 0;
    for (int i = 0; i < n; i++) {
        xs[i] = x[i] - mn; /* >= 0 */
        sx += x[i];
        sxx += (double)x[i] * x[i];
    }
    const float range = mx - mn, fmax = (float)nmax;
    float best_a = range / fmax, best_b = mn;
    double best_err = DBL_MAX;
    for (int step = -8; step <= 8; step++) {
        const float iscale = (fmax + 0.1f * (float)step) / range;
        float slf, sllf;
        double slx;
        sums_asym(xs, x, n, iscale, fmax, &slf, &sllf, &slx);
        const double sl = slf, sll = sllf;
        double det = n * sll - sl * sl;
        if (det <= 0)
            continue;
        /* least squares: the residual is orthogonal to L and 1, so its
         * energy is sxx - a sLx - b sx */
        double idet = 1.0 / det;
        double a = (n * slx - sl * sx) * idet;
        double b = (sll * sx - sl * slx) * idet;
        if (b > 0) { /* the stored min must be >= 0: refit with b = 0 */
            b = 0;
            a = slx / sll; /* sll > 0 as det > 0 */
        }
        if (a <= 0)
            continue;
        double err = sxx - a * slx - b * sx;
        if (err < best_err) {
            best_err = err;
            best_a = (float)a;
            best_b = (float)b;
        }
    }
    *out_a = best_a;
    *out_m = -best_b;
}

/* Shared by Q4_K and Q5_K: 8 sub-blocks of 32, 6-bit scales and mins.
 * Fills d, dmin, scales[12] and the integer levels L[256] in [0, nmax]. */
static void kquant_scales_mins(const float *x, int nmax, uint16_t *d_out, uint16_t *dmin_out,
                               uint8_t scales[12], uint8_t L[QK_K])
{
    float sc[8], mn[8], max_sc = 0.0f, max_mn = 0.0f;
    for (int j = 0; j < 8; j++) {
        fit_scale_min(x + 32 * j, 32, nmax, &sc[j], &mn[j]);
        max_sc = sc[j] > max_sc ? sc[j] : max_sc;
        max_mn = mn[j] > max_mn ? mn[j] : max_mn;
    }
    float d = max_sc / 63.0f, dmin = max_mn / 63.0f;
    *d_out = rlx_f32_to_f16(d);
    *dmin_out = rlx_f32_to_f16(dmin);
    float dq = rlx_h2f(*d_out), dminq = rlx_h2f(*dmin_out);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)(dq > 0 ? clampi(round_int(sc[j] / dq), 0, 63) : 0);
        lm[j] = (uint8_t)(dminq > 0 ? clampi(round_int(mn[j] / dminq), 0, 63) : 0);
    }
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            scales[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
    for (int j = 0; j < 8; j++) {
        float dj = dq * (float)ls[j], mj = dminq * (float)lm[j];
        float idj = dj > 0 ? 1.0f / dj : 0.0f;
        for (int i = 0; i < 32; i++) {
            float v = (x[32 * j + i] + mj) * idj; /* clamped before the conversion */
            v = v > 0.0f ? v : 0.0f;
            v = v < (float)nmax ? v : (float)nmax;
            L[32 * j + i] = (uint8_t)(int)(v + 0.5f);
        }
    }
}

static void q_q4_k(const float *x, void *dst, int64_t nb)
{
    blk_q4_k *b = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        kquant_scales_mins(x, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * j + l] = (uint8_t)(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
    }
}

static void q_q5_k(const float *x, void *dst, int64_t nb)
{
    blk_q5_k *b = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        kquant_scales_mins(x, 31, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * j + l], hi = L[64 * j + 32 + l];
                b[i].qs[32 * j + l] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
                b[i].qh[l] |= (uint8_t)(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
            }
    }
}

/* Symmetric fit x ~ a*L, L in [-32, 31], for one 16-element group: a grid
 * of inverse scales around -32/max, each rounding's least-squares scale
 * a = sLx / sLL, whose error is sxx - sLx^2 / sLL (no second pass); 8 float
 * lanes as in fit_scale_min. */
static float fit_scale_sym6(const float *x, int n)
{
    float mx = signed_absmax(x, n);
    if (mx == 0.0f)
        return 0.0f;
    float best_a = mx / -32.0f;
    double best_err = DBL_MAX;
    for (int step = -6; step <= 6; step++) {
        const float iscale = (-32.0f + 0.25f * (float)step) / mx;
        float sllf;
        double slx;
        sums_sym6(x, n, iscale, &sllf, &slx);
        const double sll = sllf;
        if (sll <= 0)
            continue;
        double err = -slx * slx / sll; /* + sxx, the same for every candidate */
        if (err < best_err) {
            best_err = err;
            best_a = (float)(slx / sll);
        }
    }
    return best_a;
}

static void q_q6_k(const float *x, void *dst, int64_t nb)
{
    blk_q6_k *b = dst;
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        float sc[16], amax = 0.0f;
        for (int g = 0; g < 16; g++) {
            sc[g] = fit_scale_sym6(x + 16 * g, 16);
            amax = fabsf(sc[g]) > amax ? fabsf(sc[g]) : amax;
        }
        float d = amax / 127.0f;
        b[i].d = rlx_f32_to_f16(d);
        float dq = rlx_h2f(b[i].d);
        uint8_t L[QK_K];
        for (int g = 0; g < 16; g++) {
            int s = dq > 0 ? clampi(round_int(sc[g] / dq), -128, 127) : 0;
            b[i].scales[g] = (int8_t)s;
            float dg = dq * (float)s, idg = dg != 0.0f ? 1.0f / dg : 0.0f;
            for (int k = 0; k < 16; k++) {
                float v = x[16 * g + k] * idg; /* clamped before the conversion */
                v = v > -32.0f ? v : -32.0f;
                v = v < 31.0f ? v : 31.0f;
                L[16 * g + k] = (uint8_t)(round_int(v) + 32);
            }
        }
        for (int half = 0; half < 2; half++) {
            uint8_t *ql = b[i].ql + 64 * half, *qh = b[i].qh + 32 * half;
            const uint8_t *Lh = L + 128 * half;
            for (int l = 0; l < 32; l++) {
                int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
                ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] =
                    (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

rlx_status rlx_cpu_quantize_row(rlx_dtype t, const float *src, void *dst, int64_t n)
{
    if (!rlx_cpu_can_quantize(t) || (n && (!src || !dst)))
        return RLX_ERR_INVALID_ARG;
    rlx_status st = check_n(t, n);
    if (st != RLX_OK)
        return st;
    int64_t nb = n / rlx_dtype_get(t)->block_size;
    switch (t) {
    case RLX_DTYPE_F32:
        memmove(dst, src, (size_t)n * sizeof(float));
        break;
    case RLX_DTYPE_F16:
        rlx_cpu_f32_to_f16_row(src, dst, n);
        break;
    case RLX_DTYPE_BF16:
        rlx_cpu_f32_to_bf16_row(src, dst, n);
        break;
    case RLX_DTYPE_Q4_0:
        q_q4_0(src, dst, nb);
        break;
    case RLX_DTYPE_Q4_1:
        q_q4_1(src, dst, nb);
        break;
    case RLX_DTYPE_Q5_0:
        q_q5_0(src, dst, nb);
        break;
    case RLX_DTYPE_Q5_1:
        q_q5_1(src, dst, nb);
        break;
    case RLX_DTYPE_Q8_0:
        rlx_vec_ops_scalar.quantize_q8_0(src, dst, n);
        break;
    case RLX_DTYPE_Q4_K:
        q_q4_k(src, dst, nb);
        break;
    case RLX_DTYPE_Q5_K:
        q_q5_k(src, dst, nb);
        break;
    case RLX_DTYPE_Q6_K:
        q_q6_k(src, dst, nb);
        break;
    case RLX_DTYPE_Q8_K:
        rlx_vec_ops_scalar.quantize_q8_k(src, dst, n);
        break;
    default:
        return RLX_ERR_UNSUPPORTED;
    }
    return RLX_OK;
}

/* ------------------------------------------------------ reference dots */

static void dot_q4_0_ref(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q4_0 *x = w;
    const blk_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum +=
                ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        sum += (float)isum * rlx_h2f(x[i].d) * rlx_h2f(y[i].d);
    }
    *s = sum;
}

static void dot_q4_1_ref(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q4_1 *x = w;
    const blk_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        int isum = 0, asum = 0;
        for (int j = 0; j < 16; j++) {
            isum += (x[i].qs[j] & 0xF) * y[i].qs[j] + (x[i].qs[j] >> 4) * y[i].qs[j + 16];
            asum += y[i].qs[j] + y[i].qs[j + 16];
        }
        float dy = rlx_h2f(y[i].d);
        sum += (float)isum * rlx_h2f(x[i].d) * dy + (float)asum * rlx_h2f(x[i].m) * dy;
    }
    *s = sum;
}

static void dot_q5_0_ref(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q5_0 *x = w;
    const blk_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        uint32_t qh = load_u32(x[i].qh);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int lo = ((x[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4)) - 16;
            int hi = ((x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
        }
        sum += (float)isum * rlx_h2f(x[i].d) * rlx_h2f(y[i].d);
    }
    *s = sum;
}

static void dot_q5_1_ref(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q5_1 *x = w;
    const blk_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        uint32_t qh = load_u32(x[i].qh);
        int isum = 0, asum = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (x[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
            asum += y[i].qs[j] + y[i].qs[j + 16];
        }
        float dy = rlx_h2f(y[i].d);
        sum += (float)isum * rlx_h2f(x[i].d) * dy + (float)asum * rlx_h2f(x[i].m) * dy;
    }
    *s = sum;
}

static void dot_q8_0_ref(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q8_0 *x = w;
    const blk_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        int isum = 0;
        for (int j = 0; j < 32; j++)
            isum += x[i].qs[j] * y[i].qs[j];
        sum += (float)isum * rlx_h2f(x[i].d) * rlx_h2f(y[i].d);
    }
    *s = sum;
}

static void dot_q4_k_ref(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q4_k *x = w;
    const blk_q8_k *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, mn;
            rlx_k4_scale_min(j, x[i].scales, &sc, &mn);
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            int shift = (j & 1) * 4, sub = 0;
            for (int l = 0; l < 32; l++)
                sub += ((q[l] >> shift) & 0xF) * y[i].qs[32 * j + l];
            isum += sc * sub;
            msum += mn * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sum += y[i].d * (rlx_h2f(x[i].d) * (float)isum - rlx_h2f(x[i].dmin) * (float)msum);
    }
    *s = sum;
}

static void dot_q5_k_ref(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q5_k *x = w;
    const blk_q8_k *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, mn;
            rlx_k4_scale_min(j, x[i].scales, &sc, &mn);
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            int shift = (j & 1) * 4, sub = 0;
            for (int l = 0; l < 32; l++) {
                int v = ((q[l] >> shift) & 0xF) | (((x[i].qh[l] >> j) & 1) << 4);
                sub += v * y[i].qs[32 * j + l];
            }
            isum += sc * sub;
            msum += mn * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sum += y[i].d * (rlx_h2f(x[i].d) * (float)isum - rlx_h2f(x[i].dmin) * (float)msum);
    }
    *s = sum;
}

static void dot_q6_k_ref(int64_t n, float *s, const void *w, const void *a)
{
    const blk_q6_k *x = w;
    const blk_q8_k *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int g = 0; g < 16; g++) {
            int sub = 0;
            for (int k = 0; k < 16; k++)
                sub += q6k_value(&x[i], 16 * g + k) * y[i].qs[16 * g + k];
            isum += x[i].scales[g] * sub;
        }
        sum += y[i].d * rlx_h2f(x[i].d) * (float)isum;
    }
    *s = sum;
}

void rlx_cpu_fill_dots_scalar(rlx_cpu_table *t)
{
    t->dot[RLX_DTYPE_Q4_0] = dot_q4_0_ref;
    t->dot[RLX_DTYPE_Q4_1] = dot_q4_1_ref;
    t->dot[RLX_DTYPE_Q5_0] = dot_q5_0_ref;
    t->dot[RLX_DTYPE_Q5_1] = dot_q5_1_ref;
    t->dot[RLX_DTYPE_Q8_0] = dot_q8_0_ref;
    t->dot[RLX_DTYPE_Q4_K] = dot_q4_k_ref;
    t->dot[RLX_DTYPE_Q5_K] = dot_q5_k_ref;
    t->dot[RLX_DTYPE_Q6_K] = dot_q6_k_ref;
}
