#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "backends/base/dtype.h"

/* Block sizes and bytes per block from the GGUF specification / ggml's
 * block structs, written out independently of dtype.c's table. */
static void block_sizes(void **state)
{
    static const struct {
        const char *name;
        uint32_t ggml_id, bs, ts;
    } want[] = {
        {"F32", 0, 1, 4},         {"F16", 1, 1, 2},         {"Q4_0", 2, 32, 18},
        {"Q4_1", 3, 32, 20},      {"Q5_0", 6, 32, 22},      {"Q5_1", 7, 32, 24},
        {"Q8_0", 8, 32, 34},      {"Q8_1", 9, 32, 36},      {"Q2_K", 10, 256, 84},
        {"Q3_K", 11, 256, 110},   {"Q4_K", 12, 256, 144},   {"Q5_K", 13, 256, 176},
        {"Q6_K", 14, 256, 210},   {"Q8_K", 15, 256, 292},   {"IQ2_XXS", 16, 256, 66},
        {"IQ2_XS", 17, 256, 74},  {"IQ3_XXS", 18, 256, 98}, {"IQ1_S", 19, 256, 50},
        {"IQ4_NL", 20, 32, 18},   {"IQ3_S", 21, 256, 110},  {"IQ2_S", 22, 256, 82},
        {"IQ4_XS", 23, 256, 136}, {"I8", 24, 1, 1},         {"I16", 25, 1, 2},
        {"I32", 26, 1, 4},        {"I64", 27, 1, 8},        {"F64", 28, 1, 8},
        {"IQ1_M", 29, 256, 56},   {"BF16", 30, 1, 2},       {"TQ1_0", 34, 256, 54},
        {"TQ2_0", 35, 256, 66},   {"MXFP4", 39, 32, 17},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        rlx_dtype t = rlx_dtype_from_ggml(want[i].ggml_id);
        assert_int_not_equal(t, RLX_DTYPE_INVALID);
        const rlx_dtype_info *ti = rlx_dtype_get(t);
        assert_string_equal(ti->name, want[i].name);
        assert_int_equal(ti->block_size, want[i].bs);
        assert_int_equal(ti->type_size, want[i].ts);
        assert_int_equal(rlx_dtype_to_ggml(t), (int)want[i].ggml_id);
        assert_int_equal(rlx_dtype_from_name(want[i].name), t);
    }
    /* removed / unknown ids */
    assert_int_equal(rlx_dtype_from_ggml(4), RLX_DTYPE_INVALID);
    assert_int_equal(rlx_dtype_from_ggml(31), RLX_DTYPE_INVALID);
    assert_int_equal(rlx_dtype_from_ggml(1000), RLX_DTYPE_INVALID);
    assert_int_equal(rlx_dtype_to_ggml(RLX_DTYPE_BOOL), -1);
}

static void row_bytes(void **state)
{
    uint64_t b;
    assert_int_equal(rlx_dtype_row_bytes(RLX_DTYPE_Q4_K, 4096, &b), RLX_OK);
    assert_int_equal(b, 16 * 144);
    assert_int_equal(rlx_dtype_row_bytes(RLX_DTYPE_Q4_0, 33, &b), RLX_ERR_FORMAT);
    assert_int_equal(rlx_dtype_row_bytes(RLX_DTYPE_F32, UINT64_MAX / 2, &b), RLX_ERR_FORMAT);
    assert_int_equal(rlx_dtype_row_bytes(RLX_DTYPE_INVALID, 1, &b), RLX_ERR_INVALID_ARG);
}

/* Bit patterns from IEEE 754 binary16. */
static void half_conversions(void **state)
{
    assert_true(rlx_f16_to_f32(0x3c00) == 1.0f);
    assert_true(rlx_f16_to_f32(0xc000) == -2.0f);
    assert_true(rlx_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(rlx_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    assert_true(rlx_f16_to_f32(0x0400) == ldexpf(1.0f, -14));
    assert_true(isinf(rlx_f16_to_f32(0x7c00)));
    assert_true(isnan(rlx_f16_to_f32(0x7e00)));
    assert_int_equal(rlx_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(rlx_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(rlx_f32_to_f16(1e6f), 0x7c00);
    assert_int_equal(rlx_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    assert_int_equal(rlx_f32_to_f16(ldexpf(1.0f, -26)), 0x0000);
    /* 1 + 2^-11 is halfway between 1 and 1+2^-10: ties to even -> 1.0 */
    assert_int_equal(rlx_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
    assert_int_equal(rlx_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
    /* every finite half round-trips exactly */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        assert_int_equal(rlx_f32_to_f16(rlx_f16_to_f32((uint16_t)h)), h);
    }
}

static void bfloat16(void **state)
{
    assert_true(rlx_bf16_to_f32(0x3f80) == 1.0f);
    assert_int_equal(rlx_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(rlx_f32_to_bf16(-2.0f), 0xc000);
    assert_true(isnan(rlx_bf16_to_f32(rlx_f32_to_bf16(NAN))));
}

/* Values from the OCP 8-bit floating point specification (v1.0, tables 1
 * and 2): the largest and smallest normal and subnormal magnitudes, 1.0,
 * the NaN and infinity encodings. */
static void fp8(void **state)
{
    assert_true(rlx_f8_e4m3_to_f32(0x38) == 1.0f);
    assert_true(rlx_f8_e4m3_to_f32(0x7E) == 448.0f);
    assert_true(rlx_f8_e4m3_to_f32(0xFE) == -448.0f);
    assert_true(rlx_f8_e4m3_to_f32(0x08) == ldexpf(1.0f, -6));
    assert_true(rlx_f8_e4m3_to_f32(0x07) == 0.875f * ldexpf(1.0f, -6));
    assert_true(rlx_f8_e4m3_to_f32(0x01) == ldexpf(1.0f, -9));
    assert_true(rlx_f8_e4m3_to_f32(0x00) == 0.0f && !signbit(rlx_f8_e4m3_to_f32(0x00)));
    assert_true(signbit(rlx_f8_e4m3_to_f32(0x80)));
    assert_true(isnan(rlx_f8_e4m3_to_f32(0x7F)) && isnan(rlx_f8_e4m3_to_f32(0xFF)));
    assert_true(rlx_f8_e4m3_to_f32(0x77) == 240.0f); /* 2^7 * 1.875 */
    assert_true(rlx_f8_e5m2_to_f32(0x3C) == 1.0f);
    assert_true(rlx_f8_e5m2_to_f32(0x7B) == 57344.0f);
    assert_true(rlx_f8_e5m2_to_f32(0x04) == ldexpf(1.0f, -14));
    assert_true(rlx_f8_e5m2_to_f32(0x03) == 0.75f * ldexpf(1.0f, -14));
    assert_true(rlx_f8_e5m2_to_f32(0x01) == ldexpf(1.0f, -16));
    assert_true(isinf(rlx_f8_e5m2_to_f32(0x7C)) && rlx_f8_e5m2_to_f32(0xFC) < 0);
    assert_true(isnan(rlx_f8_e5m2_to_f32(0x7D)) && isnan(rlx_f8_e5m2_to_f32(0x7F)));

    /* every finite code round-trips; between two neighbours the midpoint
     * goes to the even code, a little more to the upper one */
    for (int c = 0; c < 256; c++) {
        float a = rlx_f8_e4m3_to_f32((uint8_t)c), b = rlx_f8_e5m2_to_f32((uint8_t)c);
        if (!isnan(a))
            assert_int_equal(rlx_f32_to_f8_e4m3(a), c);
        if (!isnan(b) && !isinf(b))
            assert_int_equal(rlx_f32_to_f8_e5m2(b), c);
        if (c < 0x7E) {
            float n = rlx_f8_e4m3_to_f32((uint8_t)(c + 1)), mid = (a + n) / 2;
            assert_int_equal(rlx_f32_to_f8_e4m3(mid), c % 2 ? c + 1 : c);
            assert_int_equal(rlx_f32_to_f8_e4m3(nextafterf(mid, 1e9f)), c + 1);
            assert_int_equal(rlx_f32_to_f8_e4m3(nextafterf(mid, -1e9f)), c);
        }
        if (c < 0x7B) {
            float n = rlx_f8_e5m2_to_f32((uint8_t)(c + 1)), mid = (b + n) / 2;
            assert_int_equal(rlx_f32_to_f8_e5m2(mid), c % 2 ? c + 1 : c);
        }
    }
    /* past the largest: E4M3 saturates, E5M2 goes to infinity */
    assert_int_equal(rlx_f32_to_f8_e4m3(1000.0f), 0x7E);
    assert_int_equal(rlx_f32_to_f8_e4m3(-1e30f), 0xFE);
    assert_int_equal(rlx_f32_to_f8_e4m3(NAN) & 0x7F, 0x7F);
    assert_int_equal(rlx_f32_to_f8_e5m2(61440.0f), 0x7C); /* halfway to 2^16: even is inf */
    assert_int_equal(rlx_f32_to_f8_e5m2(61439.0f), 0x7B);
    assert_int_equal(rlx_f32_to_f8_e4m3(ldexpf(1.0f, -11)), 0x00); /* a quarter step: 0 */
    assert_int_equal(rlx_f32_to_f8_e4m3(-ldexpf(3.0f, -11)), 0x81);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(block_sizes),
        cmocka_unit_test(row_bytes),
        cmocka_unit_test(half_conversions),
        cmocka_unit_test(bfloat16),
        cmocka_unit_test(fp8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
