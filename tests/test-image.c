/* engine/image against tests/reference/image_reference.py (PIL 9.4, torch,
 * skimage's photos), fixtures in tests/fixtures/image/.
 *
 * Tolerances:
 * - PNG decoding: exact (lossless; the expected bytes follow the PNG
 *   specification's sample scaling, cross-checked against PIL there).
 * - JPEG decoding: at most 1 level (PIL decodes with the same system
 *   libjpeg-turbo and default settings, so it is exact in practice; 1 level
 *   would allow a different IDCT build). Orientation must be exact in size.
 * - The SAM resize (PIL Image.resize BILINEAR on uint8): at most 1 level and
 *   in practice exact: the C code is Pillow's fixed-point arithmetic.
 * - Float tensors and mask logits: 1e-5 absolute (float32 rounding of the
 *   same formulas; values are within about +-3 for tensors, +-5 for logits,
 *   where a float32 ulp is 2.4e-7..4.8e-7, and the order of a few additions
 *   may differ from torch's vectorised kernels).
 * - Masks (logit > 0): equal wherever the reference logit is farther than
 *   1e-4 from 0 (closer than that, float rounding may flip the sign).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/image/image.h"
#include "test-util.h"

#define FLOAT_OK 1e-5f
#define MASK_EPS 1e-4f

static const char *fx(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/image/%s", RLX_TEST_SOURCE_DIR, name);
    return path;
}

static void *read_fixture(const char *name, size_t want)
{
    size_t n = 0;
    void *p = rlx_test_read_file(fx(name), &n);
    if (!p || (want && n != want))
        fail_msg("fixture %s: expected %zu bytes, got %zu (run tests/reference/image_reference.py)",
                 name, want, p ? n : 0);
    return p;
}

static rlx_image *load_ok(const char *name)
{
    rlx_error *err = NULL;
    rlx_image *img = NULL;
    rlx_image_load_params p = rlx_image_load_default_params();
    rlx_status st = rlx_image_load(fx(name), &p, &img, &err);
    if (st != RLX_OK)
        fail_msg("%s: %s", name, rlx_error_message(err));
    assert_non_null(img);
    return img;
}

/* PNG: every colour type and bit depth, interlaced or not. */
static void test_png_cases(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool alpha;
    } cases[] = {
        {"gray1", false},
        {"gray2", false},
        {"gray4", false},
        {"gray8", false},
        {"gray16", false},
        {"gray2-interlaced", false},
        {"gray8-trns", true},
        {"rgb8", false},
        {"ga8", true},
        {"rgba8", true},
        {"rgb8-interlaced", false},
        {"ga8-interlaced", true},
        {"rgba8-interlaced", true},
        {"rgb16", false},
        {"ga16", true},
        {"rgba16", true},
        {"rgb16-interlaced", false},
        {"ga16-interlaced", true},
        {"rgba16-interlaced", true},
        {"pal1", false},
        {"pal2", false},
        {"pal4-trns", true},
        {"pal8-trns", true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char png[64], exp_name[64];
        snprintf(png, sizeof png, "png-%s.png", cases[k].name);
        snprintf(exp_name, sizeof exp_name, "png-%s.rgba", cases[k].name);
        uint8_t *exp = read_fixture(exp_name, 13 * 7 * 4);
        rlx_image *img = load_ok(png);
        assert_int_equal(img->width, 13);
        assert_int_equal(img->height, 7);
        if (cases[k].alpha != (img->alpha != NULL))
            fail_msg("%s: alpha %s, expected %s", png, img->alpha ? "present" : "absent",
                     cases[k].alpha ? "present" : "absent");
        for (int i = 0; i < 13 * 7; i++) {
            for (int c = 0; c < 3; c++)
                if (img->rgb[i * 3 + c] != exp[i * 4 + c])
                    fail_msg("%s: pixel %d channel %d is %d, expected %d", png, i, c,
                             img->rgb[i * 3 + c], exp[i * 4 + c]);
            int a = img->alpha ? img->alpha[i] : 255;
            if (a != exp[i * 4 + 3])
                fail_msg("%s: pixel %d alpha is %d, expected %d", png, i, a, exp[i * 4 + 3]);
        }
        rlx_image_free(img);
        free(exp);
    }
}

static int max_diff_u8(const uint8_t *a, const uint8_t *b, size_t n)
{
    int m = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        m = d > m ? d : m;
    }
    return m;
}

/* JPEG: EXIF orientations 1..8 made upright as PIL's exif_transpose does. */
static void test_jpeg_orientation(void **state)
{
    (void)state;
    for (int o = 1; o <= 8; o++) {
        char jpg[64], rgb[64];
        snprintf(jpg, sizeof jpg, "jpeg-orient%d.jpg", o);
        snprintf(rgb, sizeof rgb, "jpeg-orient%d.rgb", o);
        uint8_t *exp = read_fixture(rgb, 48 * 32 * 3);
        rlx_image *img = load_ok(jpg);
        assert_int_equal(img->width, o >= 5 ? 32 : 48);
        assert_int_equal(img->height, o >= 5 ? 48 : 32);
        assert_null(img->alpha);
        int d = max_diff_u8(img->rgb, exp, 48 * 32 * 3);
        if (d > 1)
            fail_msg("%s: differs from PIL by %d levels", jpg, d);
        print_message("%s: max difference from PIL %d\n", jpg, d);
        rlx_image_free(img);
        free(exp);
    }
    /* without orientation, the stored (sideways) picture */
    rlx_image_load_params p = rlx_image_load_default_params();
    p.apply_orientation = false;
    rlx_image *img = NULL;
    assert_int_equal(rlx_image_load(fx("jpeg-orient6.jpg"), &p, &img, NULL), RLX_OK);
    assert_int_equal(img->width, 48);
    assert_int_equal(img->height, 32);
    rlx_image_free(img);
}

static void test_jpeg_gray_cmyk_tiny(void **state)
{
    (void)state;
    static const struct {
        const char *jpg, *rgb;
        int w, h;
    } cases[] = {{"jpeg-gray.jpg", "jpeg-gray.rgb", 48, 32},
                 {"jpeg-cmyk.jpg", "jpeg-cmyk.rgb", 48, 32},
                 {"jpeg-1x1.jpg", "jpeg-1x1.rgb", 1, 1}};
    for (size_t k = 0; k < 3; k++) {
        uint8_t *exp = read_fixture(cases[k].rgb, (size_t)cases[k].w * cases[k].h * 3);
        rlx_image *img = load_ok(cases[k].jpg);
        assert_int_equal(img->width, cases[k].w);
        assert_int_equal(img->height, cases[k].h);
        int d = max_diff_u8(img->rgb, exp, (size_t)cases[k].w * cases[k].h * 3);
        if (d > 1)
            fail_msg("%s: differs from PIL by %d levels", cases[k].jpg, d);
        print_message("%s: max difference from PIL %d\n", cases[k].jpg, d);
        rlx_image_free(img);
        free(exp);
    }
    rlx_image *img = load_ok("png-1x1.png");
    assert_int_equal(img->width, 1);
    assert_int_equal(img->rgb[0], 10);
    assert_int_equal(img->rgb[1], 20);
    assert_int_equal(img->rgb[2], 30);
    rlx_image_free(img);
}

static void check_floats(const char *what, const float *got, const float *exp, size_t n)
{
    float m = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(got[i] - exp[i]);
        if (!(d <= m)) {
            m = d;
            at = i;
        }
    }
    if (!(m <= FLOAT_OK))
        fail_msg("%s: differs by %g at %zu (%g vs %g)", what, (double)m, at, (double)got[at],
                 (double)exp[at]);
    print_message("%s: max difference %g\n", what, (double)m);
}

static const struct {
    const char *name;
    int w, h, rw, rh; /* size, and resized to longest side 64 */
} photos[] = {
    {"astronaut", 96, 96, 64, 64}, {"coffee", 96, 64, 64, 43}, {"chelsea", 90, 60, 64, 43}};

/* SAM: ResizeLongestSide (PIL BILINEAR on uint8) + normalise + pad. */
static void test_preprocess_sam(void **state)
{
    (void)state;
    for (size_t k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "photo-%s.png", photos[k].name);
        rlx_image *img = load_ok(name);
        assert_int_equal(img->width, photos[k].w);
        assert_int_equal(img->height, photos[k].h);
        int rw, rh;
        rlx_image_longest_side_shape(img->width, img->height, 64, &rw, &rh);
        assert_int_equal(rw, photos[k].rw);
        assert_int_equal(rh, photos[k].rh);

        size_t nr = (size_t)rw * rh * 3;
        snprintf(name, sizeof name, "prep-sam-%s.u8", photos[k].name);
        uint8_t *exp8 = read_fixture(name, nr);
        uint8_t *r = malloc(nr);
        assert_int_equal(
            rlx_image_resize_pil_bilinear(img->rgb, img->width, img->height, 3, r, rw, rh, NULL),
            RLX_OK);
        int d = max_diff_u8(r, exp8, nr);
        if (d > 1)
            fail_msg("%s: the resize differs from PIL by %d levels", name, d);
        size_t exact = 0;
        for (size_t i = 0; i < nr; i++)
            exact += r[i] == exp8[i];
        print_message("%s: %zu of %zu resized samples equal PIL's, max diff %d\n", photos[k].name,
                      exact, nr, d);

        rlx_image_prep_params p = rlx_image_prep_sam_params();
        p.target = 64;
        size_t nf = rlx_image_prep_floats(&p);
        assert_int_equal(nf, 3 * 64 * 64);
        float *x = malloc(nf * sizeof *x);
        rlx_image_prep_info info;
        rlx_error *err = NULL;
        if (rlx_image_preprocess(img, &p, x, &info, &err) != RLX_OK)
            fail_msg("%s", rlx_error_message(err));
        assert_int_equal(info.resized_width, rw);
        assert_int_equal(info.resized_height, rh);
        assert_int_equal(info.orig_width, img->width);
        snprintf(name, sizeof name, "prep-sam-%s.f32", photos[k].name);
        float *exp = read_fixture(name, nf * sizeof(float));
        check_floats(name, x, exp, nf);

        p = rlx_image_prep_sam2_params();
        p.target = 64;
        if (rlx_image_preprocess(img, &p, x, &info, &err) != RLX_OK)
            fail_msg("%s", rlx_error_message(err));
        assert_int_equal(info.resized_width, 64);
        assert_int_equal(info.resized_height, 64);
        free(exp);
        snprintf(name, sizeof name, "prep-sam2-%s.f32", photos[k].name);
        exp = read_fixture(name, nf * sizeof(float));
        check_floats(name, x, exp, nf);

        free(exp);
        free(x);
        free(r);
        free(exp8);
        rlx_image_free(img);
    }
}

/* An upscale (90x60 to 160x107): PIL's support is not widened there. */
static void test_resize_up(void **state)
{
    (void)state;
    rlx_image *img = load_ok("photo-chelsea.png");
    int rw, rh;
    rlx_image_longest_side_shape(img->width, img->height, 160, &rw, &rh);
    assert_int_equal(rw, 160);
    assert_int_equal(rh, 107);
    size_t n = (size_t)rw * rh * 3;
    uint8_t *exp = read_fixture("prep-up-chelsea.u8", n), *r = malloc(n);
    assert_int_equal(
        rlx_image_resize_pil_bilinear(img->rgb, img->width, img->height, 3, r, rw, rh, NULL),
        RLX_OK);
    int d = max_diff_u8(r, exp, n);
    if (d > 1)
        fail_msg("upscale differs from PIL by %d levels", d);
    free(r);
    free(exp);

    /* a 1x1 image preprocesses to a full 64x64 picture */
    rlx_image one = {.width = 1, .height = 1, .rgb = (uint8_t[]){200, 100, 50}};
    rlx_image_prep_params p = rlx_image_prep_sam_params();
    p.target = 64;
    float *x = malloc(rlx_image_prep_floats(&p) * sizeof *x);
    rlx_image_prep_info info;
    assert_int_equal(rlx_image_preprocess(&one, &p, x, &info, NULL), RLX_OK);
    assert_int_equal(info.resized_width, 64);
    assert_int_equal(info.resized_height, 64);
    assert_true(fabsf(x[64 * 64 - 1] - (200 - 123.675f) / 58.395f) < 1e-6f);
    free(x);
    rlx_image_free(img);
}

static void check_mask(const char *what, const float *logits, const uint8_t *mask, const float *exp,
                       size_t n)
{
    check_floats(what, logits, exp, n);
    for (size_t i = 0; i < n; i++) {
        if (fabsf(exp[i]) <= MASK_EPS)
            continue;
        if (mask[i] != (exp[i] > 0 ? 255 : 0))
            fail_msg("%s: mask pixel %zu is %d for logit %g", what, i, mask[i], (double)exp[i]);
    }
}

static void test_mask_upsample(void **state)
{
    (void)state;
    float *lo = read_fixture("mask-lowres.f32", 16 * 16 * sizeof(float));
    size_t n = 96 * 64;
    float *exp = read_fixture("mask-sam.f32", n * sizeof(float));
    float *logits = malloc(n * sizeof *logits);
    uint8_t *mask = malloc(n);
    rlx_image_prep_params p = rlx_image_prep_sam_params();
    p.target = 64;
    rlx_image_prep_info info = {96, 64, 64, 43};
    rlx_error *err = NULL;
    if (rlx_image_mask_upsample(lo, 16, 16, &p, &info, 0.0f, logits, mask, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    check_mask("SAM mask", logits, mask, exp, n);
    /* the mask alone, without logits */
    memset(mask, 7, n);
    assert_int_equal(rlx_image_mask_upsample(lo, 16, 16, &p, &info, 0.0f, NULL, mask, NULL),
                     RLX_OK);
    check_mask("SAM mask (no logits)", logits, mask, exp, n);
    free(exp);

    exp = read_fixture("mask-sam2.f32", n * sizeof(float));
    p = rlx_image_prep_sam2_params();
    p.target = 64;
    info = (rlx_image_prep_info){96, 64, 64, 64};
    assert_int_equal(rlx_image_mask_upsample(lo, 16, 16, &p, &info, 0.0f, logits, mask, NULL),
                     RLX_OK);
    check_mask("SAM 2 mask", logits, mask, exp, n);

    /* nonsense sizes are refused */
    info = (rlx_image_prep_info){96, 64, 65, 43};
    p = rlx_image_prep_sam_params();
    p.target = 64;
    assert_int_equal(rlx_image_mask_upsample(lo, 16, 16, &p, &info, 0.0f, logits, mask, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    free(exp);
    free(lo);
    free(logits);
    free(mask);
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The chunk's bytes, found the way a reader without libpng would (PIL reads
 * the same chunks: tEXt keyword\0text, iTXt keyword\0 0 0 \0 \0 text). */
static bool png_has_chunk(const char *path, const char *type, const void *body, size_t n)
{
    size_t size = 0;
    uint8_t *d = rlx_test_read_file(path, &size);
    bool found = false;
    for (size_t at = 8; d && at + 12 <= size && !found;) {
        uint32_t len = (uint32_t)d[at] << 24 | (uint32_t)d[at + 1] << 16 |
                       (uint32_t)d[at + 2] << 8 | d[at + 3];
        if (len > size - at - 12)
            break;
        found = memcmp(d + at + 4, type, 4) == 0 && len == n && memcmp(d + at + 8, body, n) == 0;
        at += 12 + (size_t)len;
    }
    free(d);
    return found;
}

static void test_write_png_text(void **state)
{
    (void)state;
    uint8_t px[4 * 3 * 2];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 11);
    char path[4096];
    snprintf(path, sizeof path, "%s", rlx_test_tmp("text.png"));
    unlink(path);
    rlx_error *err = NULL;
    const char *value = "a lighthouse at dawn\nSteps: 4, Seed: 42, Size: 512x512";
    if (rlx_image_write_png_text(path, px, 4, 2, 3, "parameters", value, false, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    char body[256];
    size_t n = (size_t)snprintf(body, sizeof body, "parameters%c%s", 0, value);
    assert_true(png_has_chunk(path, "tEXt", body, n));
    rlx_image *m = NULL;
    assert_int_equal(rlx_image_load(path, NULL, &m, NULL), RLX_OK);
    assert_int_equal(m->width, 4);
    assert_memory_equal(m->rgb, px, sizeof px);
    rlx_image_free(m);

    /* UTF-8 beyond ASCII: an iTXt chunk, no language, not compressed */
    const char *utf8 = "Leuchtturm \xc3\xa0 l'aube, \xe7\x81\xaf\xe5\xa1\x94";
    assert_int_equal(rlx_image_write_png_text(path, px, 4, 2, 3, "parameters", utf8, true, &err),
                     RLX_OK);
    n = (size_t)snprintf(body, sizeof body, "parameters%c%c%c%c%c%s", 0, 0, 0, 0, 0, utf8);
    assert_true(png_has_chunk(path, "iTXt", body, n));

    /* bad keywords are refused before anything is written */
    unlink(path);
    assert_int_equal(rlx_image_write_png_text(path, px, 4, 2, 3, "", "x", false, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(rlx_image_write_png_text(path, px, 4, 2, 3, " lead", "x", false, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(rlx_image_write_png_text(path, px, 4, 2, 3, "k\xc3\xa9y", "x", false, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(rlx_image_write_png_text(path, px, 4, 2, 3, "parameters", NULL, false, &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_false(file_exists(path));
}

static void test_write_png(void **state)
{
    (void)state;
    rlx_image *img = load_ok("photo-coffee.png");
    size_t n = (size_t)img->width * img->height;
    uint8_t *mask = malloc(n);
    for (size_t i = 0; i < n; i++)
        mask[i] = (i % 7) < 3 ? 255 : 0;
    char mpath[4096], cpath[4096];
    snprintf(mpath, sizeof mpath, "%s", rlx_test_tmp("mask.png"));
    snprintf(cpath, sizeof cpath, "%s", rlx_test_tmp("cutout.png"));
    unlink(mpath);
    unlink(cpath);
    rlx_error *err = NULL;
    if (rlx_image_write_mask_png(mpath, mask, img->width, img->height, false, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    if (rlx_image_write_cutout_png(cpath, img, mask, false, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));

    rlx_image *m = NULL, *c = NULL;
    assert_int_equal(rlx_image_load(mpath, NULL, &m, NULL), RLX_OK);
    assert_int_equal(m->width, img->width);
    assert_null(m->alpha);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(m->rgb[i * 3 + 1], mask[i]);
    assert_int_equal(rlx_image_load(cpath, NULL, &c, NULL), RLX_OK);
    assert_non_null(c->alpha);
    assert_memory_equal(c->rgb, img->rgb, n * 3);
    assert_memory_equal(c->alpha, mask, n);

    /* an existing file is kept unless overwriting is asked for */
    memset(mask, 0, n);
    assert_int_equal(rlx_image_write_mask_png(mpath, mask, img->width, img->height, false, &err),
                     RLX_ERR_IO);
    assert_non_null(strstr(rlx_error_message(err), "exists"));
    rlx_error_clear(&err);
    rlx_image_free(m);
    m = NULL;
    assert_int_equal(rlx_image_load(mpath, NULL, &m, NULL), RLX_OK);
    assert_int_equal(m->rgb[0], 255); /* still the first mask */
    rlx_image_free(m);
    m = NULL;
    assert_int_equal(rlx_image_write_mask_png(mpath, mask, img->width, img->height, true, &err),
                     RLX_OK);
    assert_int_equal(rlx_image_load(mpath, NULL, &m, NULL), RLX_OK);
    assert_int_equal(m->rgb[0], 0);

    /* a folder that does not exist: an IO error, nothing left behind */
    char bad[4096];
    snprintf(bad, sizeof bad, "%s/no-such-folder/x.png", rlx_test_tmp("w"));
    assert_int_equal(rlx_image_write_mask_png(bad, mask, img->width, img->height, false, &err),
                     RLX_ERR_IO);
    rlx_error_clear(&err);
    assert_false(file_exists(bad));

    rlx_image_free(m);
    rlx_image_free(c);
    rlx_image_free(img);
    free(mask);
}

static rlx_status decode(const void *d, size_t n, rlx_error **err)
{
    rlx_image *img = NULL;
    rlx_status st = rlx_image_decode(d, n, NULL, &img, err);
    if (st == RLX_OK) {
        assert_non_null(img);
        assert_true(img->width >= 1 && img->height >= 1);
    } else {
        assert_null(img);
        assert_non_null(*err);
    }
    rlx_image_free(img);
    return st;
}

static void expect_error(const char *file, rlx_status want, const char *words)
{
    rlx_image *img = NULL;
    rlx_error *err = NULL;
    rlx_status st = rlx_image_load(fx(file), NULL, &img, &err);
    if (st != want || !strstr(rlx_error_message(err), words))
        fail_msg("%s: got %d \"%s\", expected %d with \"%s\"", file, st, rlx_error_message(err),
                 want, words);
    print_message("%s: %s\n", file, rlx_error_message(err));
    assert_null(img);
    rlx_error_free(err);
}

static void test_hostile(void **state)
{
    (void)state;
    expect_error("not-image.txt", RLX_ERR_FORMAT, "not an image");
    expect_error("png-huge-header.png", RLX_ERR_UNSUPPORTED,
                 "30000\u00d730000 pixels, more than the 100 megapixels RLX reads; scale it down");
    expect_error("no-such-file.png", RLX_ERR_IO, "no-such-file.png");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures", RLX_TEST_SOURCE_DIR);
    rlx_error *err = NULL;
    rlx_image *img = NULL;
    assert_int_equal(rlx_image_load(dir, NULL, &img, &err), RLX_ERR_IO);
    assert_non_null(strstr(rlx_error_message(err), "folder"));
    rlx_error_clear(&err);

    /* a small max_pixels refuses a photo before decoding it */
    rlx_image_load_params p = rlx_image_load_default_params();
    p.max_pixels = 1000;
    assert_int_equal(rlx_image_load(fx("photo-coffee.png"), &p, &img, &err), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "96\u00d764 pixels"));
    rlx_error_clear(&err);
    assert_int_equal(rlx_image_load(fx("jpeg-orient1.jpg"), &p, &img, &err), RLX_ERR_UNSUPPORTED);
    rlx_error_clear(&err);

    /* a JPEG whose frame header claims 65000x65000: refused from the header */
    size_t jn = 0;
    uint8_t *j = rlx_test_read_file(fx("jpeg-1x1.jpg"), &jn);
    assert_non_null(j);
    size_t sof = 0;
    for (size_t i = 2; i + 9 < jn && !sof; i++)
        if (j[i] == 0xff && (j[i + 1] == 0xc0 || j[i + 1] == 0xc2))
            sof = i;
    assert_true(sof > 0);
    j[sof + 5] = j[sof + 7] = 0xfd; /* height and width, big-endian: 0xfde8 = 65000 */
    j[sof + 6] = j[sof + 8] = 0xe8;
    assert_int_equal(decode(j, jn, &err), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "65000\u00d765000 pixels"));
    rlx_error_clear(&err);
    free(j);

    assert_int_equal(decode("", 0, &err), RLX_ERR_FORMAT);
    rlx_error_clear(&err);
    assert_int_equal(decode("GIF89a\1\0\1\0", 10, &err), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "GIF"));
    rlx_error_clear(&err);

    /* truncated files at several cut points: each a sentence, never a crash */
    static const char *files[] = {"png-rgb8.png",      "png-rgba16-interlaced.png",
                                  "png-pal4-trns.png", "photo-astronaut.png",
                                  "jpeg-orient6.jpg",  "jpeg-cmyk.jpg",
                                  "jpeg-gray.jpg"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        size_t n = 0;
        uint8_t *d = rlx_test_read_file(fx(files[k]), &n);
        assert_non_null(d);
        size_t cuts[] = {1, 2, 3, 8, 16, 33, 40, 100, n / 3, n / 2, n - 20, n - 13, n - 2};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            if (cuts[c] >= n)
                continue;
            rlx_status st = decode(d, cuts[c], &err);
            if (st != RLX_ERR_FORMAT)
                fail_msg("%s cut to %zu bytes: status %d (%s)", files[k], cuts[c], st,
                         rlx_error_message(err));
            if (c == 9)
                print_message("%s at %zu bytes: %s\n", files[k], cuts[c], rlx_error_message(err));
            rlx_error_clear(&err);
        }
        /* damaged bytes: any status, no crash (ASan watches) */
        uint32_t seed = 12345u + (uint32_t)k;
        uint8_t *m = malloc(n);
        for (int t = 0; t < 300; t++) {
            memcpy(m, d, n);
            for (int f = 0; f < 1 + t % 4; f++) {
                seed = seed * 1664525u + 1013904223u;
                size_t at = 2 + (seed >> 8) % (n - 2);
                seed = seed * 1664525u + 1013904223u;
                m[at] = (uint8_t)(seed >> 24);
            }
            decode(m, n, &err);
            rlx_error_clear(&err);
        }
        free(m);
        free(d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_cases),
        cmocka_unit_test(test_jpeg_orientation),
        cmocka_unit_test(test_jpeg_gray_cmyk_tiny),
        cmocka_unit_test(test_preprocess_sam),
        cmocka_unit_test(test_resize_up),
        cmocka_unit_test(test_mask_upsample),
        cmocka_unit_test(test_write_png),
        cmocka_unit_test(test_write_png_text),
        cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
