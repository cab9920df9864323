// The CUDA emulator's stand-in for <cuda_fp16.h>: __half as 16 bits with
// round-to-nearest-even conversions (the test's CPU copies of the kernels
// use these; see emu.h).
#pragma once
#include <cstdint>
#include <cstring>

struct __half_raw {
    unsigned short x;
};
struct __half {
    uint16_t bits;
    __half() = default;
    explicit __half(__half_raw r) : bits(r.x) {}
    operator __half_raw() const
    {
        return {bits};
    }
};
struct __half2 {
    __half x, y;
};

static inline float __half2float(__half h)
{
    uint32_t s = (uint32_t)(h.bits & 0x8000) << 16, e = (h.bits >> 10) & 31, m = h.bits & 1023, u;
    if (e == 0) {
        if (m == 0) {
            u = s;
        } else { /* subnormal */
            int k = -1;
            do {
                k++;
                m <<= 1;
            } while (!(m & 1024));
            u = s | (uint32_t)(127 - 15 - k) << 23 | (m & 1023) << 13;
        }
    } else if (e == 31) {
        u = s | 0x7F800000u | m << 13;
    } else {
        u = s | (e - 15 + 127) << 23 | m << 13;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline __half __float2half_rn(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xFFu, m = x & 0x7FFFFFu;
    __half h;
    if (e == 0xFFu) {
        h.bits = (uint16_t)(sign | 0x7C00u | (m ? 0x200u : 0u));
        return h;
    }
    int ue = (int)e - 127 + 15;
    if (ue >= 31) {
        h.bits = (uint16_t)(sign | 0x7C00u);
        return h;
    }
    if (ue <= 0) {
        if (ue < -10) {
            h.bits = (uint16_t)sign;
            return h;
        }
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - ue), v = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (v & 1u)))
            v++;
        h.bits = (uint16_t)(sign | v);
        return h;
    }
    uint32_t v = ((uint32_t)ue << 10) | (m >> 13), rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (v & 1u)))
        v++;
    h.bits = (uint16_t)(sign | v);
    return h;
}

struct float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) uint2 {
    uint32_t x, y;
};
struct alignas(16) uint4 {
    uint32_t x, y, z, w;
};
static inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w)
{
    return {x, y, z, w};
}
static inline float2 __half22float2(__half2 h)
{
    return {__half2float(h.x), __half2float(h.y)};
}
static inline __half2 __floats2half2_rn(float a, float b)
{
    return {__float2half_rn(a), __float2half_rn(b)};
}

static inline unsigned short __half_as_ushort(__half h)
{
    return h.bits;
}

// half2 arithmetic, each lane rounded once to f16 as the GPU's HSUB2,
// HMUL2 and HFMA2 do (the exact result in double first: f16 products and
// sums of the sizes the kernels use fit its 53 bits)
static inline __half __emu_h_round(double v)
{
    /* through float: a double rounded to float and then to f16 can round
     * twice; nudge a float that landed on an f16 halfway point back
     * toward the exact value */
    float f = (float)v;
    if ((double)f != v) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if ((u & 0x1FFFu) == 0x1000u) { /* exactly halfway between two f16s */
            u += ((double)f < v) == (f > 0) ? 1u : (uint32_t)-1;
            memcpy(&f, &u, 4);
        }
    }
    return __float2half_rn(f);
}
static inline __half2 __hsub2(__half2 a, __half2 b)
{
    return {__emu_h_round((double)__half2float(a.x) - __half2float(b.x)),
            __emu_h_round((double)__half2float(a.y) - __half2float(b.y))};
}
static inline __half2 __hmul2(__half2 a, __half2 b)
{
    return {__emu_h_round((double)__half2float(a.x) * __half2float(b.x)),
            __emu_h_round((double)__half2float(a.y) * __half2float(b.y))};
}
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c)
{
    return {__emu_h_round((double)__half2float(a.x) * __half2float(b.x) + __half2float(c.x)),
            __emu_h_round((double)__half2float(a.y) * __half2float(b.y) + __half2float(c.y))};
}
static inline __half2 __float2half2_rn(float a)
{
    return {__float2half_rn(a), __float2half_rn(a)};
}
