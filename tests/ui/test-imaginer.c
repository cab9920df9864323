/* RlxImaginer (ui/rlx-imaginer.c) without a display, on the pipeline librlx
 * links as models/diffusion/flux2.h. Until flux2.c lands that is the
 * stand-in models/diffusion/flux2-fake.c, which takes a folder named
 * "*-base" as a base model; with the real pipeline, RLX_TEST_FLUX2_MODEL
 * names a FLUX.2 folder, and without it the tests that need a model are
 * skipped (the failure ones still run).
 *
 * Checked: a model that cannot be opened fails with "model" and the
 * pipeline's sentence, and a request then fails with the same sentence; the
 * signals of a run come in order (loading "prompt", progress with previews
 * for every step, loading "decode", finished) with the settings as run and
 * the PNG written with its parameters chunk; a size not a multiple of 16 is
 * rounded with a note; an empty prompt and an unreadable start picture fail
 * with a sentence; Stop mid-run ends with "stopped" and writes nothing; two
 * requests queued run one after the other; dropping the imaginer mid-run
 * joins its thread; a LoRA is applied and named in the PNG's settings, one
 * for another model fails with the pipeline's sentence.
 *
 * usage: test-imaginer TAEF2_DECODER */
#include "rlx-imaginer.h"

#include "backends/base/status.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

static char *tmp_dir, *taef2, *model;

typedef struct {
    GString *order; /* M(odel ready) P(rompt) p(rogress) D(ecode) N(ote) F(inished) S(topped)
                       X(failed) */
    int n_progress, n_previews, n_finished, last_step;
    gboolean ready, ended;
    int status;
    char *what, *message, *note;
    RlxImagineSettings *done;
    RlxImaginer *stop_at_step3;
    GMainLoop *loop;
} Rec;

static void rec_clear(Rec *r)
{
    if (r->order)
        g_string_free(r->order, TRUE);
    g_free(r->what);
    g_free(r->message);
    g_free(r->note);
    rlx_imagine_settings_free(r->done);
    memset(r, 0, sizeof *r);
    r->order = g_string_new(NULL);
}

static void on_loading(RlxImaginer *im, const char *what, double f, Rec *r)
{
    if (!strcmp(what, "prompt"))
        g_string_append_c(r->order, 'P');
    else if (!strcmp(what, "decode"))
        g_string_append_c(r->order, 'D');
}

static void on_ready(RlxImaginer *im, const RlxImagineInfo *info, Rec *r)
{
    g_string_append_c(r->order, 'M');
    r->ready = TRUE;
}

static void on_note(RlxImaginer *im, const char *text, Rec *r)
{
    g_string_append_c(r->order, 'N');
    g_free(r->note);
    r->note = g_strdup(text);
}

static void on_progress(RlxImaginer *im, int step, int steps, double s, double left,
                        GdkTexture *preview, Rec *r)
{
    g_string_append_c(r->order, 'p');
    g_assert_cmpint(step, >, r->last_step); /* coalesced, never backwards */
    g_assert_cmpint(step, <=, steps);
    r->last_step = step;
    r->n_progress++;
    if (preview)
        r->n_previews++;
    if (r->stop_at_step3 && step >= 3) {
        rlx_imaginer_stop(r->stop_at_step3);
        r->stop_at_step3 = NULL;
    }
}

static void on_finished(RlxImaginer *im, GdkTexture *t, const RlxImagineSettings *s, Rec *r)
{
    g_string_append_c(r->order, 'F');
    g_assert_cmpint(gdk_texture_get_width(t), ==, s->width);
    g_assert_cmpint(gdk_texture_get_height(t), ==, s->height);
    rlx_imagine_settings_free(r->done);
    r->done = rlx_imagine_settings_copy(s);
    r->n_finished++;
    r->last_step = 0;
    r->ended = TRUE;
}

static void on_stopped(RlxImaginer *im, int step, int steps, Rec *r)
{
    g_string_append_c(r->order, 'S');
    r->ended = TRUE;
}

static void on_failed(RlxImaginer *im, int status, const char *what, const char *message, Rec *r)
{
    g_string_append_c(r->order, 'X');
    r->status = status;
    g_free(r->what);
    r->what = g_strdup(what);
    g_free(r->message);
    r->message = g_strdup(message);
    if (strcmp(what, "model") != 0 && strcmp(what, "save") != 0)
        r->ended = TRUE;
}

static RlxImaginer *imaginer_new(Rec *r)
{
    rec_clear(r);
    RlxImaginer *im = rlx_imaginer_new();
    g_signal_connect(im, "loading", G_CALLBACK(on_loading), r);
    g_signal_connect(im, "model-ready", G_CALLBACK(on_ready), r);
    g_signal_connect(im, "note", G_CALLBACK(on_note), r);
    g_signal_connect(im, "progress", G_CALLBACK(on_progress), r);
    g_signal_connect(im, "finished", G_CALLBACK(on_finished), r);
    g_signal_connect(im, "stopped", G_CALLBACK(on_stopped), r);
    g_signal_connect(im, "failed", G_CALLBACK(on_failed), r);
    return im;
}

static gboolean is_true(gpointer flag)
{
    return *(gboolean *)flag;
}

/* Runs the main loop until *flag (up to 60 s). */
static void wait_until(gboolean *flag)
{
    gint64 end = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
    while (!is_true(flag)) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_main_context_iteration(NULL, FALSE);
        g_usleep(2000);
    }
}

static gboolean open_model(RlxImaginer *im, Rec *r)
{
    RlxImagineModel m = {.model = model, .preview_decoder = taef2, .device = "cpu"};
    rlx_imaginer_set_model(im, &m);
    gboolean any = FALSE;
    gint64 end = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;
    while (!r->ready && !(r->what && !strcmp(r->what, "model"))) {
        g_assert_cmpint(g_get_monotonic_time(), <, end);
        g_main_context_iteration(NULL, FALSE);
        g_usleep(2000);
    }
    any = r->ready;
    if (!any)
        g_test_skip("the pipeline cannot open the test model: set RLX_TEST_FLUX2_MODEL");
    return any;
}

static RlxImagineSettings request(const char *prompt, int w, int h, int steps, const char *out)
{
    RlxImagineSettings s = {.prompt = (char *)prompt,
                            .width = w,
                            .height = h,
                            .steps = steps,
                            .seed = 42,
                            .guidance = 4,
                            .strength = 0.6,
                            .out_png = (char *)out};
    return s;
}

static void test_bad_model(void)
{
    Rec r = {0};
    RlxImaginer *im = imaginer_new(&r);
    g_autofree char *missing = g_build_filename(tmp_dir, "no-such-model", NULL);
    RlxImagineModel m = {.model = missing};
    rlx_imaginer_set_model(im, &m);
    RlxImagineSettings s = request("a cat", 128, 128, 2, NULL);
    rlx_imaginer_generate(im, &s);
    g_assert_true(rlx_imaginer_is_busy(im));
    wait_until(&r.ended);
    /* the model's failure, then the request's with the same sentence */
    g_assert_cmpstr(r.order->str, ==, "XX");
    g_assert_cmpstr(r.what, ==, "generate");
    g_assert_nonnull(strstr(r.message, "no-such-model"));
    g_assert_false(rlx_imaginer_is_busy(im));
    g_assert_null(rlx_imaginer_get_info(im));
    g_object_unref(im);
    rec_clear(&r);
    g_string_free(r.order, TRUE);
}

static gboolean png_has_parameters(const char *path, const char *needle)
{
    g_autofree char *d = NULL;
    gsize n = 0;
    if (!g_file_get_contents(path, &d, &n, NULL))
        return FALSE;
    const char *at = memmem(d, n, "tEXtparameters", 14);
    return at && memmem(at, n - (gsize)(at - d), needle, strlen(needle)) != NULL;
}

static void test_run(void)
{
    Rec r = {0};
    RlxImaginer *im = imaginer_new(&r);
    if (!open_model(im, &r)) {
        g_object_unref(im);
        return;
    }
    const RlxImagineInfo *info = rlx_imaginer_get_info(im);
    g_assert_nonnull(info);
    g_assert_true(info->has_preview);
    g_string_truncate(r.order, 0);
    g_autofree char *out = g_build_filename(tmp_dir, "run", "one.png", NULL);
    RlxImagineSettings s = request("a lighthouse at dawn", 128, 128, 3, out);
    rlx_imaginer_generate(im, &s);
    wait_until(&r.ended);
    /* adjacent progress reports may be coalesced: at least the last */
    g_assert_true(g_regex_match_simple("^Pp+DF$", r.order->str, 0, 0));
    g_assert_cmpint(r.last_step, ==, 0);
    g_assert_cmpint(r.n_previews, ==, r.n_progress);
    g_assert_cmpint(r.done->width, ==, 128);
    g_assert_cmpint(r.done->steps, ==, 3);
    g_assert_cmpuint(r.done->seed, ==, 42);
    g_assert_nonnull(r.done->model);
    g_assert_cmpfloat(r.done->seconds, >, 0);
    g_assert_cmpstr(r.done->out_png, ==, out);
    g_assert_true(png_has_parameters(out, "Steps: 3, Seed: 42, Size: 128x128"));
    g_assert_false(rlx_imaginer_is_busy(im));

    /* a size off the grid: rounded, with a note first */
    rec_clear(&r);
    g_autofree char *out2 = g_build_filename(tmp_dir, "run", "two.png", NULL);
    s = request("a lighthouse at dawn", 100, 130, 2, out2);
    rlx_imaginer_generate(im, &s);
    wait_until(&r.ended);
    g_assert_true(g_regex_match_simple("^PNp+DF$", r.order->str, 0, 0));
    g_assert_nonnull(strstr(r.note, "16"));
    g_assert_cmpint(r.done->width, ==, 96);
    g_assert_cmpint(r.done->height, ==, 128);

    /* the PNG is not written over an existing file: "save", then finished */
    rec_clear(&r);
    rlx_imaginer_generate(im, &s);
    wait_until(&r.ended);
    g_assert_cmpstr(r.what, ==, "save");
    g_assert_null(r.done->out_png);

    /* an empty prompt, an unreadable start picture */
    rec_clear(&r);
    s = request("", 128, 128, 2, NULL);
    rlx_imaginer_generate(im, &s);
    wait_until(&r.ended);
    g_assert_cmpstr(r.what, ==, "generate");
    g_assert_cmpint(r.status, ==, RLX_ERR_INVALID_ARG);
    rec_clear(&r);
    g_autofree char *bad = g_build_filename(tmp_dir, "notes.png", NULL);
    g_file_set_contents(bad, "not a picture", -1, NULL);
    s = request("a cat", 128, 128, 2, NULL);
    s.init = bad;
    rlx_imaginer_generate(im, &s);
    wait_until(&r.ended);
    g_assert_cmpstr(r.what, ==, "init");
    g_assert_nonnull(strstr(r.message, "notes.png"));
    g_assert_null(strstr(r.message, tmp_dir)); /* the name, not the path */

    /* two queued: one after the other */
    rec_clear(&r);
    s = request("a cat", 128, 128, 2, NULL);
    rlx_imaginer_generate(im, &s);
    rlx_imaginer_generate(im, &s);
    while (r.n_finished < 2) {
        r.ended = FALSE;
        wait_until(&r.ended);
    }
    g_assert_true(g_regex_match_simple("^Pp+DFPp+DF$", r.order->str, 0, 0));
    g_assert_false(rlx_imaginer_is_busy(im));
    g_object_unref(im);
    rec_clear(&r);
    g_string_free(r.order, TRUE);
}

/* A LoRA on the final projection, kohya names (in = width, out = 128). */
static char *write_lora(const char *name, int width)
{
    char hdr[512];
    int a_n = 4 * width, b_n = 128 * 4;
    int hl = snprintf(hdr, sizeof hdr,
                      "{\"lora_unet_final_layer_linear.lora_down.weight\":{\"dtype\":\"F32\","
                      "\"shape\":[4,%d],\"data_offsets\":[0,%d]},"
                      "\"lora_unet_final_layer_linear.lora_up.weight\":{\"dtype\":\"F32\","
                      "\"shape\":[128,4],\"data_offsets\":[%d,%d]}}",
                      width, 4 * a_n, 4 * a_n, 4 * (a_n + b_n));
    while (hl % 8)
        hdr[hl++] = ' ';
    GByteArray *b = g_byte_array_new();
    guint64 n = (guint64)hl;
    g_byte_array_append(b, (const guint8 *)&n, 8);
    g_byte_array_append(b, (const guint8 *)hdr, (guint)hl);
    for (int i = 0; i < a_n + b_n; i++) {
        float v = (float)((i * 37 % 101) - 50) / 500.0f;
        g_byte_array_append(b, (const guint8 *)&v, 4);
    }
    char *path = g_build_filename(tmp_dir, name, NULL);
    g_assert_true(g_file_set_contents(path, (const char *)b->data, (gssize)b->len, NULL));
    g_byte_array_unref(b);
    return path;
}

/* The page's LoRA: applied when the model opens, named in the settings a
 * picture keeps; one for another width fails the model with a sentence. */
static void test_lora(void)
{
    if (!g_getenv("RLX_TEST_FLUX2_MODEL")) {
        g_test_skip("the stand-in pipeline takes no LoRA");
        return;
    }
    Rec r = {0};
    RlxImaginer *im = imaginer_new(&r);
    g_autofree char *lora = write_lora("tiny-lora.safetensors", 256);
    RlxImagineModel m = {.model = model, .device = "cpu", .lora = lora, .lora_strength = 0.8};
    rlx_imaginer_set_model(im, &m);
    g_autofree char *out = g_build_filename(tmp_dir, "lora.png", NULL);
    RlxImagineSettings s = request("a cat", 128, 128, 2, out);
    rlx_imaginer_generate(im, &s);
    wait_until(&r.ended);
    g_assert_nonnull(r.done);
    g_assert_nonnull(strstr(r.done->model, "LoRA: tiny-lora.safetensors:0.8"));
    g_assert_true(png_has_parameters(out, "LoRA: tiny-lora.safetensors:0.8"));

    rec_clear(&r);
    g_autofree char *wide = write_lora("wide-lora.safetensors", 3072);
    m.lora = wide;
    rlx_imaginer_set_model(im, &m);
    rlx_imaginer_generate(im, &s);
    wait_until(&r.ended);
    g_assert_cmpstr(r.what, ==, "generate");
    g_assert_nonnull(strstr(r.message, "not for this FLUX.2 model"));
    g_object_unref(im);
    rec_clear(&r);
    g_string_free(r.order, TRUE);
}

static void test_stop(void)
{
    Rec r = {0};
    RlxImaginer *im = imaginer_new(&r);
    if (!open_model(im, &r)) {
        g_object_unref(im);
        return;
    }
    rec_clear(&r);
    g_autofree char *out = g_build_filename(tmp_dir, "stop", "stopped.png", NULL);
    RlxImagineSettings s = request("a storm", 128, 128, 100, out);
    r.stop_at_step3 = im;
    rlx_imaginer_generate(im, &s);
    rlx_imaginer_generate(im, &s); /* waiting: dropped by the stop */
    wait_until(&r.ended);
    g_assert_cmpint(r.order->str[r.order->len - 1], ==, 'S');
    g_assert_cmpint(r.last_step, <, 100);
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
    g_assert_false(rlx_imaginer_is_busy(im));

    /* a stop with nothing running leaves the next request alone */
    rlx_imaginer_stop(im);
    rec_clear(&r);
    s = request("a calm sea", 128, 128, 2, NULL);
    rlx_imaginer_generate(im, &s);
    wait_until(&r.ended);
    g_assert_cmpint(r.n_finished, ==, 1);

    /* dropped mid-run: the thread stops after its step and is joined */
    rec_clear(&r);
    s = request("a storm", 128, 128, 100, NULL);
    rlx_imaginer_generate(im, &s);
    while (r.n_progress < 2)
        g_main_context_iteration(NULL, TRUE);
    gint64 t0 = g_get_monotonic_time();
    g_object_unref(im);
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 10 * G_USEC_PER_SEC);
    rec_clear(&r);
    g_string_free(r.order, TRUE);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    if (argc < 2) {
        g_printerr("usage: test-imaginer TAEF2_DECODER\n");
        return 2;
    }
    tmp_dir = g_dir_make_tmp("rlx-imaginer-XXXXXX", NULL);
    g_assert_nonnull(tmp_dir);
    const char *real = g_getenv("RLX_TEST_FLUX2_MODEL");
    if (real && *real) {
        model = g_strdup(real);
    } else {
        /* the stand-in's base model: any folder so named */
        model = g_build_filename(tmp_dir, "FLUX.2-klein-base", NULL);
        g_mkdir_with_parents(model, 0755);
    }
    taef2 = g_strdup(argv[1]);
    if (!g_file_test(taef2, G_FILE_TEST_EXISTS)) {
        g_free(taef2);
        taef2 = g_build_filename(tmp_dir, "taef2_decoder.safetensors", NULL);
        g_file_set_contents(taef2, "the stand-in only checks that it exists", -1, NULL);
    }
    g_test_add_func("/imaginer/bad-model", test_bad_model);
    g_test_add_func("/imaginer/run", test_run);
    g_test_add_func("/imaginer/stop", test_stop);
    g_test_add_func("/imaginer/lora", test_lora);
    int rc = g_test_run();
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0)
        g_printerr("could not remove %s\n", tmp_dir);
    g_free(model);
    g_free(taef2);
    g_free(tmp_dir);
    return rc;
}
