/* The FLUX.2 [klein] pipeline (models/diffusion/flux2.h) end to end on the
 * tiny random-weight diffusers folders of tests/flux2-model-writer.h (written
 * here at test time; the tokenizer is ../shared/data/tokenizers/hf-qwen3),
 * against tests/reference/flux2_pipeline_reference.py: a seeded 2-step
 * 256 x 256 generation of "a red cat", seed 7, on the distilled model and on
 * the base model (classifier-free guidance 4, negative prompt "dark").
 *
 * PSNR bound: the picture, 2 x 2 mean-pooled to 128 x 128 as the fixture, must
 * be within 45 dB of the reference's on the CPU. The reference computes in
 * float64 from the same weights; we compute in float32, and both round to
 * bytes, which alone caps the PSNR near 59 dB (measured: 58 dB). What a bug
 * gives is far below: the distilled and the base pictures, whose only
 * difference is the guidance with the negative prompt, are 32 dB apart; other
 * noise, another schedule or a swapped axis decorrelate the picture (about
 * 10 dB). Other devices (Vulkan) may run f16 arithmetic: 30 dB there (the
 * distilled case only: the base one runs the same graphs twice, and a
 * software Vulkan takes minutes; measured 58 dB on lavapipe).
 *
 * Also: the progress reports (the prompt, each step with a TAEF2 preview
 * that changes from step to step, the decode), image-to-image and a
 * reference picture (they run and change the picture), stopping from the
 * progress callback, and bad input: a folder missing a component, a
 * transformer of an unknown variant, a missing LoRA file, 0 steps, an empty prompt, a
 * size not a multiple of 16 (rounded with a note), a budget too small, and
 * a budget that only fits the transformer and VAE (the text encoder is
 * released before denoising; the same picture).
 *
 * argv[1]: "cpu" (default) or "devices" (every other device; 77 without one). */
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

#include "backends/backend.h"
#include "flux2-model-writer.h"
#include "flux2-writer.h"
#include "models/diffusion/flux2.h"
#include "test-util.h"

#define SIZE         256
#define POOLED       (SIZE / 2)
#define PSNR_CPU     45.0
#define PSNR_DEVICES 30.0

typedef struct {
    char distilled[4096], base[4096], taef2[4096];
    uint8_t *ref_d, *ref_b;
    char dev[4][32];
    int n_dev;
} fixture;

static uint8_t *load_ref(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/flux2-pipeline-ref-%s.u8", RLX_TEST_SOURCE_DIR,
             name);
    size_t n = 0;
    uint8_t *b = rlx_test_read_file(path, &n);
    if (!b || n != (size_t)POOLED * POOLED * 3) {
        fprintf(stderr, "cannot read %s (%zu bytes)\n", path, n);
        free(b);
        return NULL;
    }
    return b;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char tok[4096];
    snprintf(tok, sizeof tok, "%s", rlx_test_data("tokenizers/hf-qwen3"));
    snprintf(f->taef2, sizeof f->taef2, "%s", rlx_test_data("vae/taef2_decoder.safetensors"));
    snprintf(f->distilled, sizeof f->distilled, "%s", rlx_test_tmp("flux2-tiny"));
    snprintf(f->base, sizeof f->base, "%s", rlx_test_tmp("flux2-tiny-base"));
    rlx_error *err = NULL;
    if (rlx_flux2_model_writer_write(f->distilled, false, tok, &err) != RLX_OK ||
        rlx_flux2_model_writer_write(f->base, true, tok, &err) != RLX_OK) {
        fprintf(stderr, "%s\n", rlx_error_message(err));
        rlx_error_free(err);
        free(f);
        return -1;
    }
    f->ref_d = load_ref("distilled");
    f->ref_b = load_ref("base");
    if (!f->ref_d || !f->ref_b) {
        free(f->ref_d);
        free(f->ref_b);
        free(f);
        return -1;
    }
    for (int b = 0; b < rlx_backend_count() && f->n_dev < 4; b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if (be && be->device_count && be->device_count() >= 1)
            snprintf(f->dev[f->n_dev++], sizeof f->dev[0], "%s", be->name);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    free(f->ref_d);
    free(f->ref_b);
    free(f);
    return 0;
}

static rlx_flux2 *open_model(const char *path, const char *device, const char *preview)
{
    rlx_flux2_params p = rlx_flux2_default_params();
    p.device = device;
    p.n_threads = 2;
    p.preview_decoder = preview;
    rlx_flux2 *m = NULL;
    rlx_error *err = NULL;
    if (rlx_flux2_open(path, &p, &m, &err) != RLX_OK)
        fail_msg("open %s on %s: %s", path, device, rlx_error_message(err));
    return m;
}

static rlx_flux2_request request(const rlx_flux2 *m)
{
    rlx_flux2_request r = rlx_flux2_default_request(m);
    r.prompt = "a red cat";
    r.width = r.height = SIZE;
    r.steps = 2;
    r.seed = 7;
    return r;
}

typedef struct {
    int n_text, n_step, n_decode, last_step;
    int stop_at; /* return false after this step (0: never) */
    bool previews_differ, preview_missing;
    uint8_t *prev;
    size_t prev_n;
} progress;

static bool on_progress(void *user, const rlx_flux2_progress *p)
{
    progress *g = user;
    if (p->stage == RLX_FLUX2_STAGE_TEXT)
        g->n_text++;
    else if (p->stage == RLX_FLUX2_STAGE_DECODE)
        g->n_decode++;
    else {
        g->n_step++;
        g->last_step = p->step;
        if (!p->preview || p->preview_w != SIZE || p->preview_h != SIZE) {
            g->preview_missing = true;
        } else {
            size_t n = (size_t)p->preview_w * p->preview_h * 3;
            if (g->prev && g->prev_n == n && memcmp(g->prev, p->preview, n) != 0)
                g->previews_differ = true;
            free(g->prev);
            g->prev = malloc(n);
            memcpy(g->prev, p->preview, n);
            g->prev_n = n;
        }
        if (g->stop_at && p->step >= g->stop_at)
            return false;
    }
    return true;
}

static rlx_image *generate(rlx_flux2 *m, const rlx_flux2_request *r, progress *g)
{
    rlx_image *img = NULL;
    rlx_error *err = NULL;
    if (rlx_flux2_generate(m, r, g ? on_progress : NULL, g, &img, &err) != RLX_OK)
        fail_msg("generate: %s", rlx_error_message(err));
    assert_non_null(img);
    return img;
}

/* PSNR (dB, 8-bit scale) of the picture pooled 2 x 2 against a pooled fixture */
static double psnr(const rlx_image *img, const uint8_t *ref)
{
    assert_int_equal(img->width, SIZE);
    assert_int_equal(img->height, SIZE);
    double se = 0;
    for (int y = 0; y < POOLED; y++)
        for (int x = 0; x < POOLED; x++)
            for (int c = 0; c < 3; c++) {
                double s = 0;
                for (int dy = 0; dy < 2; dy++)
                    for (int dx = 0; dx < 2; dx++)
                        s += img->rgb[((size_t)(2 * y + dy) * SIZE + 2 * x + dx) * 3 + c];
                double d = s / 4 - ref[((size_t)y * POOLED + x) * 3 + c];
                se += d * d;
            }
    double mse = se / ((double)POOLED * POOLED * 3);
    return mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99.0;
}

static double psnr_images(const rlx_image *a, const rlx_image *b)
{
    assert_int_equal(a->width, b->width);
    assert_int_equal(a->height, b->height);
    double se = 0;
    size_t n = (size_t)a->width * a->height * 3;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a->rgb[i] - b->rgb[i];
        se += d * d;
    }
    return se > 0 ? 10 * log10(255.0 * 255.0 / (se / (double)n)) : 99.0;
}

static void cpu_distilled(void **state)
{
    fixture *f = *state;
    bool have_taef2 = access(f->taef2, R_OK) == 0;
    rlx_flux2 *m = open_model(f->distilled, "cpu", have_taef2 ? f->taef2 : NULL);
    rlx_flux2_info info = rlx_flux2_get_info(m);
    assert_string_equal(info.variant, "custom");
    assert_true(info.distilled);
    assert_false(info.uses_negative);
    assert_int_equal(info.default_steps, 4);
    assert_true(info.text_kept);
    rlx_flux2_request r = request(m);
    progress g = {0};
    rlx_image *img = generate(m, &r, &g);
    double db = psnr(img, f->ref_d);
    printf(
        "[ flux2 ] distilled, 2 steps, 256 x 256: PSNR %.1f dB against the reference (>= %.0f)\n",
        db, PSNR_CPU);
    assert_true(db >= PSNR_CPU);
    assert_int_equal(g.n_text, 1);
    assert_int_equal(g.n_step, 2);
    assert_int_equal(g.last_step, 2);
    assert_int_equal(g.n_decode, 1);
    if (have_taef2) {
        assert_false(g.preview_missing);
        assert_true(g.previews_differ);
    } else {
        printf("[ flux2 ] %s absent: previews not checked\n", f->taef2);
    }
    free(g.prev);

    /* the same seed, the same picture */
    rlx_image *again = generate(m, &r, NULL);
    assert_memory_equal(img->rgb, again->rgb, (size_t)SIZE * SIZE * 3);
    rlx_image_free(again);
    rlx_image_free(img);
    rlx_flux2_free(m);
}

static void cpu_base(void **state)
{
    fixture *f = *state;
    rlx_flux2 *m = open_model(f->base, "cpu", NULL);
    rlx_flux2_info info = rlx_flux2_get_info(m);
    assert_false(info.distilled);
    assert_true(info.uses_negative);
    assert_int_equal(info.default_steps, 50);
    assert_true(info.default_guidance == 4.0f);
    rlx_flux2_request r = request(m);
    r.negative = "dark";
    r.guidance = 4.0f;
    rlx_image *img = generate(m, &r, NULL);
    double db = psnr(img, f->ref_b), other = psnr(img, f->ref_d);
    printf("[ flux2 ] base, guidance 4, negative \"dark\": PSNR %.1f dB against the reference "
           "(>= %.0f), %.1f dB against the unguided one\n",
           db, PSNR_CPU, other);
    assert_true(db >= PSNR_CPU);
    assert_true(other < 40.0);
    rlx_image_free(img);
    rlx_flux2_free(m);
}

/* a picture with structure: diagonal colour ramps */
static rlx_image *pattern(int w, int h)
{
    rlx_image *img = calloc(1, sizeof *img);
    img->width = w;
    img->height = h;
    img->rgb = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = img->rgb + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(255 * x / w);
            p[1] = (uint8_t)(255 * y / h);
            p[2] = (uint8_t)((x + y) % 64 < 32 ? 40 : 220);
        }
    return img;
}

static void cpu_init_and_refs(void **state)
{
    fixture *f = *state;
    rlx_flux2 *m = open_model(f->distilled, "cpu", NULL);
    rlx_flux2_request r = request(m);
    rlx_image *plain = generate(m, &r, NULL);

    rlx_image *init = pattern(320, 240); /* scaled to cover and cropped */
    r.init = init;
    r.strength = 0.6f;
    progress g = {0};
    rlx_image *i2i = generate(m, &r, &g);
    /* 2 steps at strength 0.6: int(2 * 0.6) = 1 step is run */
    assert_int_equal(g.n_step, 1);
    double d1 = psnr_images(i2i, plain);
    free(g.prev);

    r.init = NULL;
    rlx_image *ref = pattern(256, 256);
    r.refs[0] = ref;
    r.n_refs = 1;
    rlx_image *edit = generate(m, &r, NULL);
    double d2 = psnr_images(edit, plain);
    printf("[ flux2 ] image-to-image vs text-to-image: %.1f dB; with a reference picture: %.1f "
           "dB\n",
           d1, d2);
    /* image-to-image starts from another latent: a different picture. A
     * reference picture only adds keys to attend to; through the tiny
     * random model's near-uniform attention it moves the picture a little
     * (about 43 dB with a 256 x 256 one), but it must move it */
    assert_true(d1 < 40.0);
    assert_true(d2 < 50.0);
    rlx_image_free(plain);
    rlx_image_free(i2i);
    rlx_image_free(edit);
    rlx_image_free(init);
    rlx_image_free(ref);
    rlx_flux2_free(m);
}

static void cpu_cancel(void **state)
{
    fixture *f = *state;
    rlx_flux2 *m = open_model(f->distilled, "cpu", NULL);
    rlx_flux2_request r = request(m);
    r.steps = 3;
    progress g = {.stop_at = 1};
    rlx_image *img = (rlx_image *)1;
    rlx_error *err = NULL;
    assert_int_equal(rlx_flux2_generate(m, &r, on_progress, &g, &img, &err), RLX_ERR_CANCELLED);
    assert_null(img);
    assert_int_equal(g.n_step, 1);
    assert_int_equal(g.n_decode, 0);
    rlx_error_free(err);
    err = NULL;
    free(g.prev);
    /* the next request runs */
    r.steps = 1;
    img = generate(m, &r, NULL);
    rlx_image_free(img);
    rlx_flux2_free(m);
}

static void expect_open(const char *path, const rlx_flux2_params *p, rlx_status code,
                        const char *words)
{
    rlx_flux2 *m = (rlx_flux2 *)1;
    rlx_error *err = NULL;
    rlx_status st = rlx_flux2_open(path, p, &m, &err);
    const char *msg = rlx_error_message(err);
    printf("[ flux2 ] %s: %s\n", path, msg ? msg : "(no message)");
    assert_int_equal(st, code);
    assert_null(m);
    assert_non_null(msg);
    assert_non_null(strstr(msg, words));
    rlx_error_free(err);
}

static void expect_request(rlx_flux2 *m, const rlx_flux2_request *r, const char *words)
{
    rlx_image *img = (rlx_image *)1;
    rlx_error *err = NULL;
    assert_int_equal(rlx_flux2_generate(m, r, NULL, NULL, &img, &err), RLX_ERR_INVALID_ARG);
    assert_null(img);
    printf("[ flux2 ] refused: %s\n", rlx_error_message(err));
    assert_non_null(strstr(rlx_error_message(err), words));
    rlx_error_free(err);
}

/* dir/<name> -> from/<name> */
static void link_part(const char *from, const char *dir, const char *name)
{
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/%s", from, name);
    snprintf(b, sizeof b, "%s/%s", dir, name);
    assert_int_equal(symlink(a, b), 0);
}

static void cpu_bad_input(void **state)
{
    fixture *f = *state;
    rlx_flux2_params p = rlx_flux2_default_params();
    p.n_threads = 2;

    /* a folder without vae/ */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp("flux2-no-vae"));
    mkdir(dir, 0755);
    link_part(f->distilled, dir, "model_index.json");
    link_part(f->distilled, dir, "transformer");
    link_part(f->distilled, dir, "text_encoder");
    link_part(f->distilled, dir, "tokenizer");
    expect_open(dir, &p, RLX_ERR_FORMAT, "vae");

    /* a transformer of an unknown variant (64 input channels) */
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp("flux2-unknown"));
    rlx_flux2_writer_opts wo = {.format = RLX_F2W_DIFFUSERS_FOLDER,
                                .hidden = 256,
                                .joint_dim = 3 * RLX_FLUX2_MODEL_WRITER_TEXT_HIDDEN,
                                .in_channels = 64};
    rlx_error *err = NULL;
    if (rlx_flux2_writer_write(dir, &wo, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    link_part(f->distilled, dir, "text_encoder");
    link_part(f->distilled, dir, "tokenizer");
    link_part(f->distilled, dir, "vae");
    rlx_flux2 *m = (rlx_flux2 *)1;
    rlx_status st = rlx_flux2_open(dir, &p, &m, &err);
    printf("[ flux2 ] unknown variant: %s\n", rlx_error_message(err));
    assert_true(st == RLX_ERR_FORMAT || st == RLX_ERR_UNSUPPORTED);
    assert_null(m);
    assert_non_null(strstr(rlx_error_message(err), "unknown"));
    rlx_error_free(err);
    err = NULL;

    /* a folder that does not exist */
    expect_open(rlx_test_tmp("flux2-nowhere"), &p, RLX_ERR_IO, "does not exist");

    /* a LoRA file that is not there (LoRAs themselves: test-flux2-dit) */
    rlx_flux2_params pl = p;
    pl.loras[0] = (rlx_flux2_lora){.path = rlx_test_tmp("style.safetensors"), .scale = 0.8f};
    pl.n_loras = 1;
    expect_open(f->distilled, &pl, RLX_ERR_IO, "LoRA");

    /* a budget too small for the transformer and the VAE */
    rlx_flux2_params pb = p;
    pb.memory_budget = 1 << 20;
    expect_open(f->distilled, &pb, RLX_ERR_BUDGET, "budget");

    m = open_model(f->distilled, "cpu", NULL);
    rlx_flux2_request r = request(m);
    r.steps = 0;
    expect_request(m, &r, "steps");
    r = request(m);
    r.prompt = "";
    expect_request(m, &r, "prompt");
    r.prompt = " \n";
    expect_request(m, &r, "prompt");
    r = request(m);
    r.width = 32;
    expect_request(m, &r, "width");

    /* a size not a multiple of 16: rounded, with a note */
    r = request(m);
    r.width = 250;
    r.height = 200;
    r.steps = 1;
    char *note = NULL;
    assert_int_equal(rlx_flux2_check_request(m, &r, &note, &err), RLX_OK);
    assert_non_null(note);
    printf("[ flux2 ] note: %s\n", note);
    assert_non_null(strstr(note, "multiple of 16"));
    free(note);
    assert_int_equal(r.width, 256);
    assert_int_equal(r.height, 208);
    r.width = 250;
    r.height = 200;
    rlx_image *img = generate(m, &r, NULL);
    assert_int_equal(img->width, 256);
    assert_int_equal(img->height, 208);
    rlx_image_free(img);
    rlx_flux2_free(m);
}

/* a budget that holds the transformer and VAE but not the text encoder too:
 * the text encoder is loaded per request and released; the same picture */
static void cpu_text_released(void **state)
{
    fixture *f = *state;
    rlx_flux2 *m = open_model(f->distilled, "cpu", NULL);
    rlx_flux2_info info = rlx_flux2_get_info(m);
    rlx_flux2_free(m);
    rlx_flux2_params p = rlx_flux2_default_params();
    p.n_threads = 2;
    p.memory_budget = info.bytes_transformer + info.bytes_vae + info.bytes_text - 1;
    m = NULL;
    rlx_error *err = NULL;
    if (rlx_flux2_open(f->distilled, &p, &m, &err) != RLX_OK)
        fail_msg("open with a budget of %llu bytes: %s", (unsigned long long)p.memory_budget,
                 rlx_error_message(err));
    assert_false(rlx_flux2_get_info(m).text_kept);
    rlx_flux2_request r = request(m);
    rlx_image *img = generate(m, &r, NULL);
    double db = psnr(img, f->ref_d);
    printf("[ flux2 ] text encoder released before denoising: PSNR %.1f dB\n", db);
    assert_true(db >= PSNR_CPU);
    rlx_image_free(img);
    rlx_flux2_free(m);
}

static void devices_other_than_cpu(void **state)
{
    fixture *f = *state;
    for (int d = 0; d < f->n_dev; d++) {
        if (!strcmp(f->dev[d], "cpu"))
            continue;
        const char *dev = f->dev[d];
        rlx_flux2 *m = open_model(f->distilled, dev, NULL);
        rlx_flux2_request r = request(m);
        rlx_image *img = generate(m, &r, NULL);
        double db = psnr(img, f->ref_d);
        printf("[ flux2 ] %s: distilled PSNR %.1f dB (>= %.0f)\n", dev, db, PSNR_DEVICES);
        assert_true(db >= PSNR_DEVICES);
        rlx_image_free(img);
        rlx_flux2_free(m);
    }
}

int main(int argc, char **argv)
{
    rlx_test_need_data("tokenizers/hf-qwen3/tokenizer.json", NULL);
    if (argc > 1 && !strcmp(argv[1], "devices")) {
        if (!rlx_test_other_devices()) {
            printf("[ flux2 ] no device but the CPU here: skipped\n");
            return 77;
        }
    }
    if (argc > 1)
        cmocka_set_test_filter(!strcmp(argv[1], "cpu")       ? "cpu_*"
                               : !strcmp(argv[1], "devices") ? "devices_*"
                                                             : argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_distilled),          cmocka_unit_test(cpu_base),
        cmocka_unit_test(cpu_init_and_refs),      cmocka_unit_test(cpu_cancel),
        cmocka_unit_test(cpu_bad_input),          cmocka_unit_test(cpu_text_released),
        cmocka_unit_test(devices_other_than_cpu),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
