#include "backends/base/dtype.h"

#include <math.h>
#include <string.h>

/* Sizes follow ggml's block layouts (ggml-common.h): e.g. Q4_K is 256
 * elements in d(f16) dmin(f16) scales[12] qs[128] = 144 bytes. */
#define S(n, bs, ts) [RLX_DTYPE_##n] = {#n, bs, ts, false, true, false}
#define I(n, bs, ts) [RLX_DTYPE_##n] = {#n, bs, ts, false, false, true}
#define Q(n, bs, ts) [RLX_DTYPE_##n] = {#n, bs, ts, true, false, false}

static const rlx_dtype_info infos[RLX_DTYPE_COUNT] = {
    [RLX_DTYPE_INVALID] = {"INVALID", 0, 0, false, false, false},
    S(F64, 1, 8),
    S(F32, 1, 4),
    S(F16, 1, 2),
    S(BF16, 1, 2),
    S(F8_E4M3, 1, 1),
    S(F8_E5M2, 1, 1),
    I(I64, 1, 8),
    I(I32, 1, 4),
    I(I16, 1, 2),
    I(I8, 1, 1),
    I(U8, 1, 1),
    I(BOOL, 1, 1),
    Q(Q4_0, 32, 18),
    Q(Q4_1, 32, 20),
    Q(Q5_0, 32, 22),
    Q(Q5_1, 32, 24),
    Q(Q8_0, 32, 34),
    Q(Q8_1, 32, 36),
    Q(Q2_K, 256, 84),
    Q(Q3_K, 256, 110),
    Q(Q4_K, 256, 144),
    Q(Q5_K, 256, 176),
    Q(Q6_K, 256, 210),
    Q(Q8_K, 256, 292),
    Q(IQ2_XXS, 256, 66),
    Q(IQ2_XS, 256, 74),
    Q(IQ3_XXS, 256, 98),
    Q(IQ1_S, 256, 50),
    Q(IQ4_NL, 32, 18),
    Q(IQ3_S, 256, 110),
    Q(IQ2_S, 256, 82),
    Q(IQ4_XS, 256, 136),
    Q(IQ1_M, 256, 56),
    Q(TQ1_0, 256, 54),
    Q(TQ2_0, 256, 66),
    Q(MXFP4, 32, 17),
};

/* ggml type id -> rlx dtype; ids 4, 5, 31-33 and 36-38 were removed upstream. */
static const rlx_dtype from_ggml[] = {
    [0] = RLX_DTYPE_F32,     [1] = RLX_DTYPE_F16,      [2] = RLX_DTYPE_Q4_0,
    [3] = RLX_DTYPE_Q4_1,    [6] = RLX_DTYPE_Q5_0,     [7] = RLX_DTYPE_Q5_1,
    [8] = RLX_DTYPE_Q8_0,    [9] = RLX_DTYPE_Q8_1,     [10] = RLX_DTYPE_Q2_K,
    [11] = RLX_DTYPE_Q3_K,   [12] = RLX_DTYPE_Q4_K,    [13] = RLX_DTYPE_Q5_K,
    [14] = RLX_DTYPE_Q6_K,   [15] = RLX_DTYPE_Q8_K,    [16] = RLX_DTYPE_IQ2_XXS,
    [17] = RLX_DTYPE_IQ2_XS, [18] = RLX_DTYPE_IQ3_XXS, [19] = RLX_DTYPE_IQ1_S,
    [20] = RLX_DTYPE_IQ4_NL, [21] = RLX_DTYPE_IQ3_S,   [22] = RLX_DTYPE_IQ2_S,
    [23] = RLX_DTYPE_IQ4_XS, [24] = RLX_DTYPE_I8,      [25] = RLX_DTYPE_I16,
    [26] = RLX_DTYPE_I32,    [27] = RLX_DTYPE_I64,     [28] = RLX_DTYPE_F64,
    [29] = RLX_DTYPE_IQ1_M,  [30] = RLX_DTYPE_BF16,    [34] = RLX_DTYPE_TQ1_0,
    [35] = RLX_DTYPE_TQ2_0,  [39] = RLX_DTYPE_MXFP4,
};

const rlx_dtype_info *rlx_dtype_get(rlx_dtype t)
{
    if ((unsigned)t >= RLX_DTYPE_COUNT)
        return &infos[RLX_DTYPE_INVALID];
    return &infos[t];
}

const char *rlx_dtype_name(rlx_dtype t)
{
    return rlx_dtype_get(t)->name;
}

rlx_dtype rlx_dtype_from_name(const char *name)
{
    if (!name)
        return RLX_DTYPE_INVALID;
    for (int i = 1; i < RLX_DTYPE_COUNT; i++)
        if (strcmp(infos[i].name, name) == 0)
            return (rlx_dtype)i;
    return RLX_DTYPE_INVALID;
}

rlx_status rlx_dtype_row_bytes(rlx_dtype t, uint64_t n, uint64_t *out_bytes)
{
    const rlx_dtype_info *ti = rlx_dtype_get(t);
    *out_bytes = 0;
    if (ti->block_size == 0)
        return RLX_ERR_INVALID_ARG;
    if (n % ti->block_size != 0)
        return RLX_ERR_FORMAT;
    uint64_t blocks = n / ti->block_size;
    if (blocks > UINT64_MAX / ti->type_size)
        return RLX_ERR_FORMAT;
    *out_bytes = blocks * ti->type_size;
    return RLX_OK;
}

rlx_dtype rlx_dtype_from_ggml(uint32_t ggml_type)
{
    if (ggml_type >= sizeof from_ggml / sizeof from_ggml[0])
        return RLX_DTYPE_INVALID;
    return from_ggml[ggml_type];
}

int rlx_dtype_to_ggml(rlx_dtype t)
{
    if (t == RLX_DTYPE_INVALID)
        return -1;
    for (unsigned i = 0; i < sizeof from_ggml / sizeof from_ggml[0]; i++)
        if (from_ggml[i] == t)
            return (int)i;
    return -1;
}

float rlx_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t rlx_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000u) { /* below the smallest normal half: subnormal */
        if (absx < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    /* normal: round to nearest even on the 13 dropped bits */
    uint32_t r = absx + 0xfff + ((absx >> 13) & 1);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float rlx_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t rlx_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000u) /* keep NaN a NaN */
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

float rlx_f8_e4m3_to_f32(uint8_t b)
{
    uint32_t e = (b >> 3) & 15u, m = b & 7u;
    float v;
    if (e == 15 && m == 7)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, -9); /* subnormal: m / 8 * 2^-6 */
    else
        v = ldexpf((float)(8 + m), (int)e - 10); /* (1 + m / 8) * 2^(e - 7) */
    return (b & 0x80) ? -v : v;
}

float rlx_f8_e5m2_to_f32(uint8_t b)
{
    return rlx_f16_to_f32((uint16_t)((uint16_t)b << 8));
}

/* |f| rounded to nearest even in a format of `mb` mantissa bits and
 * exponent bias `bias`: the code without its sign (it may pass the largest
 * finite code; the callers clamp) */
static uint32_t f8_round(double a, int mb, int bias)
{
    int e2;
    (void)frexp(a, &e2); /* a = m 2^e2, m in [0.5, 1) */
    int E = e2 - 1;      /* a in [2^E, 2^(E+1)) */
    if (a == 0.0)
        return 0;
    if (E < 1 - bias) /* subnormal: steps of 2^(1 - bias - mb) */
        return (uint32_t)nearbyint(ldexp(a, bias - 1 + mb));
    double q = nearbyint(ldexp(a, mb - E)); /* in [2^mb, 2^(mb+1)] */
    if (q >= ldexp(1.0, mb + 1)) {
        q /= 2;
        E++;
    }
    return (uint32_t)(E + bias) << mb | ((uint32_t)q - (1u << mb));
}

uint8_t rlx_f32_to_f8_e4m3(float f)
{
    uint8_t sign = signbit(f) ? 0x80 : 0;
    if (isnan(f))
        return (uint8_t)(sign | 0x7F);
    double a = fabs((double)f);
    uint32_t c = a >= 448.0 ? 0x7E : f8_round(a, 3, 7);
    return (uint8_t)(sign | (c > 0x7E ? 0x7E : c));
}

uint8_t rlx_f32_to_f8_e5m2(float f)
{
    uint8_t sign = signbit(f) ? 0x80 : 0;
    if (isnan(f))
        return (uint8_t)(sign | 0x7E);
    double a = fabs((double)f);
    uint32_t c = isinf(f) ? 0x7C : f8_round(a, 2, 15);
    return (uint8_t)(sign | (c > 0x7C ? 0x7C : c));
}
