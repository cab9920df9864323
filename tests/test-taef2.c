/* TAEF2 through the whole stack (graph IR -> compile -> session -> backend)
 * on the real published weights, against tests/reference/taef2.py.
 *
 * Every test runs on every backend of the registry that has a device.
 *
 * Tolerances: the weights are F16 in the files and are converted to F32
 * exactly (on the device, by a cast in the graph); the reference converts
 * them the same way and computes in F32 too. What differs is the order of
 * summation inside each conv (im2col + GEMM here, PyTorch's own kernels
 * there) and in GroupNorm's statistics, a relative error of order 1e-7 per
 * op that grows through ~45 layers. 1e-3 (relative, ||a-b||/||b||) leaves
 * two orders of magnitude of margin yet fails on any real mistake (a wrong
 * pad, a missing bias or ReLU gives errors of 1e-2 and more).
 *
 * Every size is the full one in every build: the ASan+UBSan debug build runs
 * this in well under a minute on 2 cores (the release build in seconds).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "engine/formats/safetensors.h"
#include "engine/ir/graph.h"
#include "models/diffusion/taef2.h"
#include "test-util.h"

#define IMG    256 /* the fixture image side */
#define LAT    (IMG / 8)
#define PART   16 /* latent side decoded against taef2-decoded-16.f32 */
#define LC     RLX_TAEF2_LATENT_CHANNELS
#define REL_OK 1e-3

#define MAX_DEVICES 8

typedef struct {
    int n;
    char dev[MAX_DEVICES][32];
    rlx_taef2 *t[MAX_DEVICES];
    float *encoded[MAX_DEVICES]; /* the image's latent on each device, once */
    bool soft[MAX_DEVICES];      /* a software device (lavapipe): 16x16 decodes only */
    float *image;                /* 3 x IMG x IMG in [0, 1] */
    float *latent;               /* LC x LAT x LAT, reference */
    float *decoded;              /* 3 x 128 x 128, reference */
} fixture;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *enc_path(void)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s", rlx_test_data("vae/taef2_encoder.safetensors"));
    return buf;
}

static const char *dec_path(void)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s", rlx_test_data("vae/taef2_decoder.safetensors"));
    return buf;
}

static void *read_fixture(const char *name, size_t want)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", RLX_TEST_SOURCE_DIR, name);
    size_t n = 0;
    void *p = rlx_test_read_file(path, &n);
    if (!p || n != want) {
        fprintf(stderr, "fixture %s: %s (%zu bytes, expected %zu)\n", path,
                p ? "wrong size" : "cannot read", n, want);
        free(p);
        return NULL;
    }
    return p;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    uint8_t *u8 = read_fixture("taef2-image-256.u8", (size_t)IMG * IMG * 3);
    f->latent = read_fixture("taef2-latent-32.f32", sizeof(float) * LC * LAT * LAT);
    f->decoded = read_fixture("taef2-decoded-16.f32", sizeof(float) * 3 * PART * 8 * PART * 8);
    f->image = malloc(sizeof(float) * 3 * IMG * IMG);
    if (!u8 || !f->latent || !f->decoded || !f->image) {
        free(u8);
        *state = f;
        return -1;
    }
    /* HWC u8 -> CHW float in [0, 1] */
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < IMG * IMG; i++)
            f->image[c * IMG * IMG + i] = (float)u8[i * 3 + c] / 255.0f;
    free(u8);

    for (int b = 0; b < rlx_backend_count() && f->n < MAX_DEVICES; b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if (!be || !be->device_count || be->device_count() < 1)
            continue;
        snprintf(f->dev[f->n], sizeof f->dev[0], "%s", be->name);
        rlx_device_info info;
        f->soft[f->n] =
            be->device_info(0, &info, NULL) == RLX_OK && info.type == RLX_DEVICE_GPU_SOFTWARE;
        rlx_taef2_params p = rlx_taef2_default_params();
        p.device = f->dev[f->n];
        rlx_error *err = NULL;
        if (rlx_taef2_create(&p, enc_path(), dec_path(), &f->t[f->n], &err) != RLX_OK) {
            fprintf(stderr, "taef2 on %s: %s\n", f->dev[f->n], rlx_error_message(err));
            rlx_error_free(err);
            *state = f;
            return -1;
        }
        f->n++;
    }
    *state = f;
    return f->n > 0 ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (!f)
        return 0;
    for (int i = 0; i < f->n; i++) {
        rlx_taef2_free(f->t[i]);
        free(f->encoded[i]);
    }
    free(f->image);
    free(f->latent);
    free(f->decoded);
    free(f);
    return 0;
}

static double psnr(const float *a, const float *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        se += d * d;
    }
    return 10.0 * log10(1.0 / (se / (double)n));
}

static double rel_err(const float *a, const float *ref, size_t n, double *max_abs)
{
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
        mx = fabs(d) > mx ? fabs(d) : mx;
    }
    *max_abs = mx;
    return sqrt(num / den);
}

/* The top-left s x s of a CHW image of side `side` with `c` channels. */
static float *crop(const float *x, int c, int side, int s)
{
    float *o = malloc(sizeof(float) * (size_t)c * (size_t)s * (size_t)s);
    assert_non_null(o);
    for (int k = 0; k < c; k++)
        for (int y = 0; y < s; y++)
            memcpy(o + ((size_t)k * s + y) * s, x + ((size_t)k * side + y) * side,
                   sizeof(float) * (size_t)s);
    return o;
}

/* The 256x256 image encoded on device d: computed by whichever test needs it
 * first, so the slow part runs once. */
static const float *encoded(fixture *f, int d)
{
    if (f->encoded[d])
        return f->encoded[d];
    float *lat = malloc(sizeof(float) * LC * LAT * LAT);
    assert_non_null(lat);
    rlx_error *err = NULL;
    double t0 = now_s();
    if (rlx_taef2_encode(f->t[d], f->image, IMG, IMG, lat, &err) != RLX_OK) {
        free(lat);
        fail_msg("%s: encode: %s", f->dev[d], rlx_error_message(err));
    }
    printf("[ %s ] encode %dx%d: %.2f s (compile included)\n", f->dev[d], IMG, IMG, now_s() - t0);
    f->encoded[d] = lat;
    return lat;
}

/* (a) encode -> decode reconstructs the image (the reference: 32.20 dB). */
static void test_roundtrip_psnr(void **state)
{
    fixture *f = *state;
    size_t npix = (size_t)IMG * IMG;
    float *rec = malloc(sizeof(float) * 3 * npix);
    assert_non_null(rec);
    for (int d = 0; d < f->n; d++) {
        rlx_error *err = NULL;
        if (f->soft[d]) {
            printf("[ %s ] skipped: a software device takes many minutes for the %dx%d encode\n",
                   f->dev[d], IMG, IMG);
            continue;
        }
        const float *lat = encoded(f, d);
        double t0 = now_s();
        if (rlx_taef2_decode(f->t[d], lat, LAT, LAT, rec, &err) != RLX_OK)
            fail_msg("%s: decode: %s", f->dev[d], rlx_error_message(err));
        double p = psnr(rec, f->image, 3 * npix);
        printf("[ %s ] %dx%d round trip: PSNR %.2f dB (decode %.2f s, compile included)\n",
               f->dev[d], IMG, IMG, p, now_s() - t0);
        if (!(p >= 30.0))
            fail_msg("%s: round-trip PSNR %.2f dB < 30 dB", f->dev[d], p);
    }
    free(rec);
}

/* (b) the encoder matches the PyTorch reference. */
static void test_encoder_matches_reference(void **state)
{
    fixture *f = *state;
    size_t n = (size_t)LC * LAT * LAT;
    for (int d = 0; d < f->n; d++) {
        if (f->soft[d]) {
            printf("[ %s ] skipped: a software device takes many minutes for the %dx%d encode\n",
                   f->dev[d], IMG, IMG);
            continue;
        }
        double mx, r = rel_err(encoded(f, d), f->latent, n, &mx);
        printf("[ %s ] encoder vs reference: relative error %.3g, max abs error %.3g\n", f->dev[d],
               r, mx);
        if (!(r <= REL_OK))
            fail_msg("%s: encoder relative error %.3g > %g", f->dev[d], r, REL_OK);
    }
}

/* (b2) every device's encoder agrees with the first device's (the CPU,
 * checked against the reference in (b)) on the image's top-left 64x64, small
 * enough for a software device: the 256x256 encode above skips those. Same
 * bound as the reference comparisons: both sides are f32 kernels that differ
 * only in summation order. */
#define ENC_SIDE 64
static void test_encoder_devices_agree(void **state)
{
    fixture *f = *state;
    size_t n = (size_t)LC * (ENC_SIDE / 8) * (ENC_SIDE / 8);
    float *img = crop(f->image, 3, IMG, ENC_SIDE);
    float *lat[2] = {malloc(sizeof(float) * n), malloc(sizeof(float) * n)};
    assert_non_null(lat[0]);
    assert_non_null(lat[1]);
    for (int d = 0; d < f->n; d++) {
        rlx_error *err = NULL;
        double t0 = now_s();
        float *out = lat[d == 0 ? 0 : 1];
        if (rlx_taef2_encode(f->t[d], img, ENC_SIDE, ENC_SIDE, out, &err) != RLX_OK)
            fail_msg("%s: encode %dx%d: %s", f->dev[d], ENC_SIDE, ENC_SIDE, rlx_error_message(err));
        printf("[ %s ] encode %dx%d: %.2f s (compile included)\n", f->dev[d], ENC_SIDE, ENC_SIDE,
               now_s() - t0);
        if (d == 0)
            continue;
        double mx, r = rel_err(lat[1], lat[0], n, &mx);
        printf("[ %s ] %dx%d encoder vs %s: relative error %.3g, max abs error %.3g\n", f->dev[d],
               ENC_SIDE, ENC_SIDE, f->dev[0], r, mx);
        if (!(r <= REL_OK))
            fail_msg("%s: encoder differs from %s by %.3g > %g", f->dev[d], f->dev[0], r, REL_OK);
    }
    free(img);
    free(lat[0]);
    free(lat[1]);
}

/* (c) the decoder on the top-left 16x16 of the reference latent. */
static void test_decoder_matches_reference(void **state)
{
    fixture *f = *state;
    float *lat = crop(f->latent, LC, LAT, PART);
    size_t n = (size_t)3 * PART * 8 * PART * 8;
    float *rgb = malloc(sizeof(float) * n);
    assert_non_null(rgb);
    for (int d = 0; d < f->n; d++) {
        rlx_error *err = NULL;
        if (rlx_taef2_decode(f->t[d], lat, PART, PART, rgb, &err) != RLX_OK)
            fail_msg("%s: decode: %s", f->dev[d], rlx_error_message(err));
        double mx, r = rel_err(rgb, f->decoded, n, &mx);
        printf("[ %s ] decoder vs reference: relative error %.3g, max abs error %.3g\n", f->dev[d],
               r, mx);
        if (!(r <= REL_OK))
            fail_msg("%s: decoder relative error %.3g > %g", f->dev[d], r, REL_OK);
        for (size_t i = 0; i < n; i++)
            if (!(rgb[i] >= 0.0f && rgb[i] <= 1.0f))
                fail_msg("%s: decoded value %g at %zu is outside [0, 1]", f->dev[d], rgb[i], i);
    }
    free(lat);
    free(rgb);
}

/* A standard normal from a fixed-seed generator (splitmix64 + Box-Muller). */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float normal(uint64_t *s)
{
    double u1 = ((double)(rng_next(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* (d) random latents decode to something unlike the image: (a) is not
 * passing because any output would. */
static void test_random_latents_low_psnr(void **state)
{
    fixture *f = *state;
    size_t n = (size_t)LC * PART * PART, npix = (size_t)PART * 8 * PART * 8;
    float *lat = malloc(sizeof(float) * n);
    float *rgb = malloc(sizeof(float) * 3 * npix);
    float *img = crop(f->image, 3, IMG, PART * 8);
    assert_non_null(lat);
    assert_non_null(rgb);
    uint64_t seed = 12345;
    for (size_t i = 0; i < n; i++)
        lat[i] = normal(&seed);
    for (int d = 0; d < f->n; d++) {
        rlx_error *err = NULL;
        if (rlx_taef2_decode(f->t[d], lat, PART, PART, rgb, &err) != RLX_OK)
            fail_msg("%s: decode: %s", f->dev[d], rlx_error_message(err));
        double p = psnr(rgb, img, 3 * npix);
        printf("[ %s ] random latents: PSNR %.2f dB against the image\n", f->dev[d], p);
        if (!(p < 15.0))
            fail_msg("%s: random latents give %.2f dB, expected < 15 dB", f->dev[d], p);
    }
    free(lat);
    free(rgb);
    free(img);
}

static void expect_error(rlx_status got, rlx_error *err, rlx_status want, const char *needle,
                         const char *what)
{
    const char *msg = rlx_error_message(err);
    printf("  %s -> %s: %s\n", what, rlx_status_name(got), msg);
    if (got != want)
        fail_msg("%s: status %s, expected %s (%s)", what, rlx_status_name(got),
                 rlx_status_name(want), msg);
    if (!strstr(msg, needle))
        fail_msg("%s: message \"%s\" does not mention \"%s\"", what, msg, needle);
}

/* (e) bad sizes: clear errors, nothing compiled or run. */
static void test_bad_sizes(void **state)
{
    fixture *f = *state;
    static float buf[3 * 64 * 64];
    for (int d = 0; d < f->n; d++) {
        rlx_taef2 *t = f->t[d];
        rlx_error *err = NULL;
        rlx_status st = rlx_taef2_encode(t, buf, 100, 64, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "multiples of 8", "encode 100x64");
        assert_non_null(strstr(rlx_error_message(err), "100x64"));
        rlx_error_clear(&err);
        st = rlx_taef2_encode(t, buf, 4, 4, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "multiples of 8", "encode 4x4");
        rlx_error_clear(&err);
        st = rlx_taef2_encode(t, buf, 0, 0, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "0x0", "encode 0x0");
        rlx_error_clear(&err);
        st = rlx_taef2_encode(t, buf, -8, 64, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "at least 8x8", "encode -8x64");
        rlx_error_clear(&err);
        st = rlx_taef2_encode(t, buf, 1 << 30, 1 << 30, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "at most", "encode 2^30 x 2^30");
        rlx_error_clear(&err);
        st = rlx_taef2_encode(t, buf, 8, 4096 * 8, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "at most", "encode 8x32768");
        rlx_error_clear(&err);
        st = rlx_taef2_decode(t, buf, 0, 0, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "0x0", "decode a 0x0 latent");
        rlx_error_clear(&err);
        st = rlx_taef2_decode(t, buf, 1 << 28, 1 << 28, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "at most", "decode a 2^28 x 2^28 latent");
        rlx_error_clear(&err);
        st = rlx_taef2_encode(t, NULL, 8, 8, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "missing", "encode NULL");
        rlx_error_clear(&err);
    }
}

/* (e) bad files: clear errors naming the file and the problem. */
static void test_bad_files(void **state)
{
    fixture *f = *state;
    static float buf[3 * 8 * 8];
    char missing[4096];
    snprintf(missing, sizeof missing, "%s", rlx_test_data("vae/no-such-taef2.safetensors"));
    for (int d = 0; d < f->n; d++) {
        rlx_taef2_params p = rlx_taef2_default_params();
        p.device = f->dev[d];
        rlx_taef2 *t = (rlx_taef2 *)&p; /* must be reset to NULL on failure */
        rlx_error *err = NULL;
        rlx_status st = rlx_taef2_create(&p, missing, dec_path(), &t, &err);
        expect_error(st, err, RLX_ERR_IO, "no-such-taef2.safetensors", "missing encoder file");
        assert_null(t);
        rlx_error_clear(&err);

        st = rlx_taef2_create(&p, enc_path(), enc_path(), &t, &err);
        expect_error(st, err, RLX_ERR_FORMAT, "given as the decoder", "encoder file as decoder");
        assert_non_null(strstr(rlx_error_message(err), "taef2_encoder.safetensors"));
        assert_null(t);
        rlx_error_clear(&err);

        st = rlx_taef2_create(&p, dec_path(), NULL, &t, &err);
        expect_error(st, err, RLX_ERR_FORMAT, "given as the encoder", "decoder file as encoder");
        rlx_error_clear(&err);

        st = rlx_taef2_create(&p, NULL, NULL, &t, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "encoder file", "no file at all");
        rlx_error_clear(&err);

        /* a decoder-only runner refuses to encode */
        st = rlx_taef2_create(&p, NULL, dec_path(), &t, &err);
        if (st != RLX_OK)
            fail_msg("%s: decoder only: %s", f->dev[d], rlx_error_message(err));
        assert_false(rlx_taef2_has_encoder(t));
        assert_true(rlx_taef2_has_decoder(t));
        st = rlx_taef2_encode(t, buf, 8, 8, buf, &err);
        expect_error(st, err, RLX_ERR_INVALID_ARG, "without an encoder", "encode, no encoder");
        rlx_error_clear(&err);
        rlx_taef2_free(t);
    }
}

/* The weight check on the real files: every name found, shapes and dtype. */
static void test_weight_names(void **state)
{
    (void)state;
    rlx_safetensors *st = NULL;
    rlx_error *err = NULL;
    if (rlx_safetensors_open(enc_path(), &st, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    rlx_dtype dt = RLX_DTYPE_INVALID;
    assert_int_equal(rlx_taef2_check_weights(st, RLX_TAEF2_ENCODER, "enc", &dt, &err), RLX_OK);
    assert_int_equal(dt, RLX_DTYPE_F16);
    assert_non_null(rlx_safetensors_find(st, "11.pool.1.bias"));
    rlx_graph *g = rlx_taef2_build_graph(RLX_TAEF2_ENCODER, 64, 32, "x.", dt, &err);
    if (!g)
        fail_msg("%s", rlx_error_message(err));
    rlx_graph_free(g);
    rlx_safetensors_close(st);
    assert_null(rlx_taef2_build_graph(RLX_TAEF2_DECODER, 12, 16, "x.", dt, &err));
    assert_non_null(strstr(rlx_error_message(err), "multiples of 8"));
    rlx_error_free(err);
}

int main(void)
{
    rlx_test_need_data("vae/taef2_encoder.safetensors", "vae/taef2_decoder.safetensors", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weight_names),
        cmocka_unit_test(test_encoder_matches_reference),
        cmocka_unit_test(test_encoder_devices_agree),
        cmocka_unit_test(test_decoder_matches_reference),
        cmocka_unit_test(test_roundtrip_psnr),
        cmocka_unit_test(test_random_latents_low_psnr),
        cmocka_unit_test(test_bad_sizes),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
