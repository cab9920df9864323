/* Scalar loads/stores of plain dtypes and block dequantization (ggml's
 * layouts, ggml-common.h). These are the reference versions; kernels.h may
 * provide vectorized ones. */
#include <math.h>
#include <string.h>

#include "backends/base/dtype.h"
#include "backends/cpu/cpu-internal.h"
#include "backends/cpu/kernels.h"

static float h2f(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return rlx_f16_to_f32(h);
}

bool cpu_dtype_plain(rlx_dtype dt)
{
    switch (dt) {
    case RLX_DTYPE_F64:
    case RLX_DTYPE_F32:
    case RLX_DTYPE_F16:
    case RLX_DTYPE_BF16:
    case RLX_DTYPE_I64:
    case RLX_DTYPE_I32:
    case RLX_DTYPE_I16:
    case RLX_DTYPE_I8:
    case RLX_DTYPE_U8:
    case RLX_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

size_t cpu_dtype_size(rlx_dtype dt)
{
    switch (dt) {
    case RLX_DTYPE_F64:
    case RLX_DTYPE_I64:
        return 8;
    case RLX_DTYPE_F32:
    case RLX_DTYPE_I32:
        return 4;
    case RLX_DTYPE_F16:
    case RLX_DTYPE_BF16:
    case RLX_DTYPE_I16:
        return 2;
    default:
        return 1;
    }
}

size_t cpu_dtype_align(rlx_dtype dt)
{
    if (cpu_dtype_plain(dt))
        return cpu_dtype_size(dt);
    return dt == RLX_DTYPE_Q8_K ? 4 : 2; /* block fields: f16 scales, an f32 in Q8_K */
}

double cpu_load_f64(const uint8_t *base, rlx_dtype dt, int64_t i)
{
    switch (dt) {
    case RLX_DTYPE_F64: {
        double v;
        memcpy(&v, base + i * 8, 8);
        return v;
    }
    case RLX_DTYPE_I64: {
        int64_t v;
        memcpy(&v, base + i * 8, 8);
        return (double)v;
    }
    case RLX_DTYPE_I32: {
        int32_t v;
        memcpy(&v, base + i * 4, 4);
        return v;
    }
    default:
        return cpu_load_f32(base, dt, i);
    }
}

float cpu_load_f32(const uint8_t *base, rlx_dtype dt, int64_t i)
{
    switch (dt) {
    case RLX_DTYPE_F32:
        return ((const float *)base)[i];
    case RLX_DTYPE_F16:
        return h2f(base + i * 2);
    case RLX_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, base + i * 2, 2);
        return rlx_bf16_to_f32(h);
    }
    case RLX_DTYPE_F64:
        return (float)((const double *)base)[i];
    case RLX_DTYPE_I64:
        return (float)((const int64_t *)base)[i];
    case RLX_DTYPE_I32:
        return (float)((const int32_t *)base)[i];
    case RLX_DTYPE_I16:
        return ((const int16_t *)base)[i];
    case RLX_DTYPE_I8:
        return ((const int8_t *)base)[i];
    case RLX_DTYPE_U8:
        return base[i];
    case RLX_DTYPE_BOOL:
        return base[i] != 0;
    default:
        return 0.0f;
    }
}

/* Float to integer: saturating and NaN-safe, so no input is undefined
 * behaviour. */
static int64_t sat_i64(double v, double lo, double hi)
{
    if (!(v == v))
        return 0;
    if (v < lo)
        v = lo;
    if (v > hi)
        v = hi;
    return (int64_t)v;
}

void cpu_store_f64(uint8_t *base, rlx_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case RLX_DTYPE_F64:
        ((double *)base)[i] = v;
        break;
    case RLX_DTYPE_I64:
        ((int64_t *)base)[i] = sat_i64(v, -9.2233720368547748e18, 9.2233720368547748e18 - 1024);
        break;
    case RLX_DTYPE_I32:
        ((int32_t *)base)[i] = (int32_t)sat_i64(v, -2147483648.0, 2147483647.0);
        break;
    default:
        cpu_store_f32(base, dt, i, (float)v);
    }
}

void cpu_store_f32(uint8_t *base, rlx_dtype dt, int64_t i, float v)
{
    switch (dt) {
    case RLX_DTYPE_F32:
        ((float *)base)[i] = v;
        break;
    case RLX_DTYPE_F16: {
        uint16_t h = rlx_f32_to_f16(v);
        memcpy(base + i * 2, &h, 2);
        break;
    }
    case RLX_DTYPE_BF16: {
        uint16_t h = rlx_f32_to_bf16(v);
        memcpy(base + i * 2, &h, 2);
        break;
    }
    case RLX_DTYPE_F64:
        ((double *)base)[i] = v;
        break;
    case RLX_DTYPE_I64:
    case RLX_DTYPE_I32:
        cpu_store_f64(base, dt, i, v);
        break;
    case RLX_DTYPE_I16:
        ((int16_t *)base)[i] = (int16_t)sat_i64(v, -32768.0, 32767.0);
        break;
    case RLX_DTYPE_I8:
        ((int8_t *)base)[i] = (int8_t)sat_i64(v, -128.0, 127.0);
        break;
    case RLX_DTYPE_U8:
        base[i] = (uint8_t)sat_i64(v, 0.0, 255.0);
        break;
    case RLX_DTYPE_BOOL:
        base[i] = v != 0.0f;
        break;
    default:
        break;
    }
}

bool cpu_quant_supported(rlx_dtype dt)
{
    switch (dt) {
    case RLX_DTYPE_Q4_0:
    case RLX_DTYPE_Q4_1:
    case RLX_DTYPE_Q5_0:
    case RLX_DTYPE_Q5_1:
    case RLX_DTYPE_Q8_0:
    case RLX_DTYPE_Q4_K:
    case RLX_DTYPE_Q5_K:
    case RLX_DTYPE_Q6_K:
    case RLX_DTYPE_Q8_K:
        return true;
    default:
        return false;
    }
}

static void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void deq_q4_0(const uint8_t *b, float *y)
{
    float d = h2f(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 0xF) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

static void deq_q4_1(const uint8_t *b, float *y)
{
    float d = h2f(b), m = h2f(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0xF) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static void deq_q5(const uint8_t *b, float *y, bool has_min)
{
    float d = h2f(b), m = has_min ? h2f(b + 2) : 0.0f;
    const uint8_t *p = b + (has_min ? 4 : 2);
    uint32_t qh;
    memcpy(&qh, p, 4);
    const uint8_t *qs = p + 4;
    int off = has_min ? 0 : 16;
    for (int j = 0; j < 16; j++) {
        int xh0 = (int)(((qh >> j) << 4) & 0x10);
        int xh1 = (int)((qh >> (j + 12)) & 0x10);
        y[j] = (float)(((qs[j] & 0xF) | xh0) - off) * d + m;
        y[j + 16] = (float)(((qs[j] >> 4) | xh1) - off) * d + m;
    }
}

static void deq_q8_0(const uint8_t *b, float *y)
{
    float d = h2f(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++)
        y[j] = qs[j] * d;
}

static void deq_q4_k(const uint8_t *b, float *y)
{
    float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t *scales = b + 4, *q = b + 16;
    int is = 0;
    for (int j = 0; j < 256; j += 64) {
        uint8_t sc, m;
        get_scale_min_k4(is, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        get_scale_min_k4(is + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)(q[l] >> 4) - m2;
        q += 32;
        is += 2;
    }
}

static void deq_q5_k(const uint8_t *b, float *y)
{
    float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
    int is = 0;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0; j < 256; j += 64) {
        uint8_t sc, m;
        get_scale_min_k4(is, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        get_scale_min_k4(is + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        ql += 32;
        is += 2;
        u1 <<= 2;
        u2 <<= 2;
    }
}

static void deq_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = h2f(b + 208);
    for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is + 0] * (float)q1;
            y[l + 32] = d * sc[is + 2] * (float)q2;
            y[l + 64] = d * sc[is + 4] * (float)q3;
            y[l + 96] = d * sc[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

static void deq_q8_k(const uint8_t *b, float *y)
{
    float d;
    memcpy(&d, b, 4);
    const int8_t *qs = (const int8_t *)(b + 4);
    for (int j = 0; j < 256; j++)
        y[j] = d * qs[j];
}

void cpu_dequant_row(rlx_dtype dt, const void *src, float *dst, int64_t n)
{
    /* the kernel library's (vectorized) decoders first; these loops are the
     * fallback and the reference */
    if (rlx_cpu_can_dequantize(dt) && rlx_cpu_dequantize_row(dt, src, dst, n) == RLX_OK)
        return;
    const rlx_dtype_info *ti = rlx_dtype_get(dt);
    const uint8_t *b = src;
    int64_t nb = n / ti->block_size;
    for (int64_t i = 0; i < nb; i++, b += ti->type_size, dst += ti->block_size) {
        switch (dt) {
        case RLX_DTYPE_Q4_0:
            deq_q4_0(b, dst);
            break;
        case RLX_DTYPE_Q4_1:
            deq_q4_1(b, dst);
            break;
        case RLX_DTYPE_Q5_0:
            deq_q5(b, dst, false);
            break;
        case RLX_DTYPE_Q5_1:
            deq_q5(b, dst, true);
            break;
        case RLX_DTYPE_Q8_0:
            deq_q8_0(b, dst);
            break;
        case RLX_DTYPE_Q4_K:
            deq_q4_k(b, dst);
            break;
        case RLX_DTYPE_Q5_K:
            deq_q5_k(b, dst);
            break;
        case RLX_DTYPE_Q6_K:
            deq_q6_k(b, dst);
            break;
        case RLX_DTYPE_Q8_K:
            deq_q8_k(b, dst);
            break;
        default:
            memset(dst, 0, sizeof(float) * ti->block_size);
        }
    }
}

void cpu_row_to_f32(rlx_dtype dt, const void *src, float *dst, int64_t n)
{
    if (dt == RLX_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (cpu_dtype_plain(dt)) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = cpu_load_f32(src, dt, i);
    } else {
        cpu_dequant_row(dt, src, dst, n);
    }
}
