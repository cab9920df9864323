/* Scalar loads/stores of plain dtypes, one element at a time. Whole rows of
 * ggml blocks are decoded by the kernel library (kernels.h, quant.c). */
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
    case RLX_DTYPE_F8_E4M3:
    case RLX_DTYPE_F8_E5M2:
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
    case RLX_DTYPE_F8_E4M3:
    case RLX_DTYPE_F8_E5M2:
        return rlx_cpu_f8_lut(dt)[base[i]];
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
    case RLX_DTYPE_F8_E4M3:
        base[i] = rlx_f32_to_f8_e4m3(v);
        break;
    case RLX_DTYPE_F8_E5M2:
        base[i] = rlx_f32_to_f8_e5m2(v);
        break;
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

void cpu_dequant_row(rlx_dtype dt, const void *src, float *dst, int64_t n)
{
    /* The kernel library decodes whole blocks; a trailing partial block
     * (never produced by the graph, which keeps rows block-aligned) is left
     * as it was. */
    const rlx_dtype_info *ti = rlx_dtype_get(dt);
    int64_t whole = ti->block_size ? n - n % ti->block_size : 0;
    if (!rlx_cpu_can_dequantize(dt) || rlx_cpu_dequantize_row(dt, src, dst, whole) != RLX_OK)
        memset(dst, 0, sizeof(float) * (size_t)whole);
}

void cpu_row_to_f32(rlx_dtype dt, const void *src, float *dst, int64_t n)
{
    if (dt == RLX_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (dt == RLX_DTYPE_F16 || dt == RLX_DTYPE_BF16) {
        rlx_cpu_dequantize_row(dt, src, dst, n);
    } else if (cpu_dtype_plain(dt)) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = cpu_load_f32(src, dt, i);
    } else {
        cpu_dequant_row(dt, src, dst, n);
    }
}
