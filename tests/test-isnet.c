/* The background remover's host steps (models/isnet/isnet.h), without the
 * model: the @imgly package's resize (its tensorResizeBilinear) and the
 * output-to-uint8 step, on values worked out by hand from the package's
 * JavaScript (dist/index.cjs): srcX = x * srcWidth / newWidth, the 2x2
 * neighbours floor/ceil (ceil clamped to the last pixel), weights (1 - dx)
 * and dx, Math.round (halves up); the output times 255 stored into a
 * Uint8Array (truncated). The whole pipeline against the package itself
 * on ONNX Runtime is tests/isnet.sh. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine/image/image.h"
#include "models/isnet/isnet.h"

static void resize_up(void **state)
{
    (void)state;
    const uint8_t src[2] = {0, 255};
    uint8_t dst[4];
    assert_int_equal(rlx_image_resize_bilinear_topleft(src, 2, 1, 1, dst, 4, 1, NULL), RLX_OK);
    /* x=1: srcX 0.5, 127.5 rounds up to 128; x=2: srcX 1, exactly 255;
     * x=3: srcX 1.5, ceil clamped to pixel 1: 255 */
    const uint8_t want[4] = {0, 128, 255, 255};
    assert_memory_equal(dst, want, 4);
}

static void resize_down_no_antialias(void **state)
{
    (void)state;
    const uint8_t src[4] = {10, 20, 30, 40};
    uint8_t dst[2];
    assert_int_equal(rlx_image_resize_bilinear_topleft(src, 4, 1, 1, dst, 2, 1, NULL), RLX_OK);
    /* srcX 0 and 2: the pixels themselves, nothing averaged in */
    assert_int_equal(dst[0], 10);
    assert_int_equal(dst[1], 30);
}

static void resize_2d_rgb(void **state)
{
    (void)state;
    /* 2x2 RGB to 3x3: srcX = x * 2/3 */
    const uint8_t src[12] = {0, 0, 0, 90, 0, 0, /* row 0 */ 0, 90, 0, 90, 90, 90};
    uint8_t dst[27];
    assert_int_equal(rlx_image_resize_bilinear_topleft(src, 2, 2, 3, dst, 3, 3, NULL), RLX_OK);
    /* (1,0): dx 2/3 between R 0 and 90: 60; (1,1): dx = dy = 2/3:
     * R = 4/9*90*... worked out: R = dx*(1-dy)*90 + dx*dy*90 = 60,
     * G = (1-dx)*dy*90 + dx*dy*90 = 60, B = dx*dy*90 = 40 */
    assert_int_equal(dst[3 * 1 + 0], 60);
    assert_int_equal(dst[3 * 1 + 1], 0);
    assert_int_equal(dst[3 * 4 + 0], 60);
    assert_int_equal(dst[3 * 4 + 1], 60);
    assert_int_equal(dst[3 * 4 + 2], 40);
    /* (2,2): srcX = srcY = 4/3, both clamped to pixel 1: the last pixel */
    assert_int_equal(dst[3 * 8 + 0], 90);
    assert_int_equal(dst[3 * 8 + 2], 90);
}

static void resize_bad_args(void **state)
{
    (void)state;
    uint8_t px[4] = {0};
    rlx_error *err = NULL;
    assert_int_equal(rlx_image_resize_bilinear_topleft(px, 0, 1, 1, px, 1, 1, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
    err = NULL;
    assert_int_equal(rlx_image_resize_bilinear_topleft(px, 1, 1, 5, px, 1, 1, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
}

static void postprocess_truncates(void **state)
{
    (void)state;
    /* side 2 to a 2x2 image: no resampling, the uint8 store alone */
    const float out[4] = {0.999f, 0.5f, -0.1f, NAN};
    uint8_t a[4];
    assert_int_equal(rlx_isnet_postprocess(out, 2, 2, 2, a, NULL), RLX_OK);
    assert_int_equal(a[0], 254); /* 254.745 truncated */
    assert_int_equal(a[1], 127); /* 127.5 truncated */
    assert_int_equal(a[2], 0);
    assert_int_equal(a[3], 0);
    const float hi[4] = {1.0f, 1.5f, 0.0f, 0.0039f};
    assert_int_equal(rlx_isnet_postprocess(hi, 2, 2, 2, a, NULL), RLX_OK);
    assert_int_equal(a[0], 255);
    assert_int_equal(a[1], 255); /* clamped (a Uint8Array would wrap; ISNet's output is 0..1) */
    assert_int_equal(a[2], 0);
    assert_int_equal(a[3], 0); /* 0.99 truncated */
}

static void preprocess_normalizes(void **state)
{
    (void)state;
    /* a 1x1 picture of (0, 128, 255) at side 2: every pixel the same */
    uint8_t rgb[3] = {0, 128, 255};
    rlx_image img = {.width = 1, .height = 1, .rgb = rgb};
    float x[12];
    assert_int_equal(rlx_isnet_preprocess(&img, 2, x, NULL), RLX_OK);
    for (int i = 0; i < 4; i++) {
        assert_float_equal(x[i], -0.5f, 0);               /* (0 - 128) / 256, R plane */
        assert_float_equal(x[4 + i], 0.0f, 0);            /* G plane */
        assert_float_equal(x[8 + i], 127.0f / 256.0f, 0); /* B plane */
    }
}

static void onnx_names(void **state)
{
    (void)state;
    assert_true(rlx_isnet_is_onnx_name("a/isnet.onnx"));
    assert_true(rlx_isnet_is_onnx_name("MODEL.ONNX"));
    assert_false(rlx_isnet_is_onnx_name(".onnx"));
    assert_false(rlx_isnet_is_onnx_name("sam.pth"));
    assert_false(rlx_isnet_is_onnx_name(NULL));
}

static void open_missing(void **state)
{
    (void)state;
    rlx_isnet *n = (rlx_isnet *)1;
    rlx_error *err = NULL;
    assert_int_not_equal(rlx_isnet_open(NULL, "/nonexistent/x.onnx", &n, &err), RLX_OK);
    assert_null(n);
    assert_non_null(strstr(rlx_error_message(err), "x.onnx"));
    rlx_error_free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resize_up),
        cmocka_unit_test(resize_down_no_antialias),
        cmocka_unit_test(resize_2d_rgb),
        cmocka_unit_test(resize_bad_args),
        cmocka_unit_test(postprocess_truncates),
        cmocka_unit_test(preprocess_normalizes),
        cmocka_unit_test(onnx_names),
        cmocka_unit_test(open_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
