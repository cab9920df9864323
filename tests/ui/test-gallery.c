/* The Imagine page's gallery on disk (ui/rlx-gallery.h): a sidecar written
 * and read back gives the same settings; the listing is newest first, skips
 * a sidecar without its PNG and one that is not ours, and stops at max; a
 * new PNG name never takes an existing file's. */
#include "rlx-gallery.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

static char *tmp_dir;

static void touch(const char *path)
{
    g_assert_true(g_file_set_contents(path, "png", -1, NULL));
}

static void test_roundtrip(void)
{
    RlxImagineSettings s = {.prompt = "a lighthouse \"at\" dawn\n",
                            .negative = "fog",
                            .width = 768,
                            .height = 512,
                            .steps = 4,
                            .seed = G_GUINT64_CONSTANT(18446744073709551557),
                            .guidance = 3.5,
                            .init = "/somewhere/start.png",
                            .strength = 0.45,
                            .model = "klein (klein-4b), LoRA: style.safetensors:0.8",
                            .seconds = 12.25};
    g_autofree char *png = g_build_filename(tmp_dir, "one.png", NULL);
    touch(png);
    g_autofree char *json = NULL;
    GError *e = NULL;
    g_assert_true(rlx_gallery_write_sidecar(png, &s, 1700000000, &json, &e));
    g_assert_no_error(e);
    g_assert_true(g_str_has_suffix(json, "/one.json"));
    gint64 t = 0;
    RlxImagineSettings *r = rlx_gallery_settings_from_json(json, &t);
    g_assert_nonnull(r);
    g_assert_cmpint(t, ==, 1700000000);
    g_assert_cmpstr(r->prompt, ==, s.prompt);
    g_assert_cmpstr(r->negative, ==, s.negative);
    g_assert_cmpstr(r->model, ==, s.model);
    g_assert_cmpint(r->width, ==, 768);
    g_assert_cmpint(r->height, ==, 512);
    g_assert_cmpint(r->steps, ==, 4);
    g_assert_cmpuint(r->seed, ==, s.seed);
    g_assert_cmpfloat(r->guidance, ==, 3.5);
    g_assert_cmpfloat(r->strength, ==, 0.45);
    g_assert_cmpfloat(r->seconds, ==, 12.25);
    /* that there was a start picture, not which */
    g_assert_cmpstr(r->init, ==, "");
    g_assert_null(r->ref);
    rlx_imagine_settings_free(r);
}

static void test_list(void)
{
    g_autofree char *dir = g_build_filename(tmp_dir, "list", NULL);
    g_mkdir_with_parents(dir, 0755);
    static const struct {
        const char *stem;
        gint64 time;
        gboolean png;
    } pics[] = {{"b", 200, TRUE}, {"a", 300, TRUE}, {"c", 100, TRUE}, {"gone", 400, FALSE}};
    for (size_t i = 0; i < G_N_ELEMENTS(pics); i++) {
        g_autofree char *png = g_strdup_printf("%s/%s.png", dir, pics[i].stem);
        RlxImagineSettings s = {.prompt = "p", .width = 64, .height = 64, .steps = 1};
        g_autofree char *json = NULL;
        g_assert_true(rlx_gallery_write_sidecar(png, &s, pics[i].time, &json, NULL));
        if (pics[i].png)
            touch(png);
    }
    g_autofree char *other = g_build_filename(dir, "notes.json", NULL);
    g_assert_true(g_file_set_contents(other, "[1, 2, 3]", -1, NULL));
    g_autofree char *other_png = g_build_filename(dir, "notes.png", NULL);
    touch(other_png);

    GPtrArray *all = rlx_gallery_list(dir, 100);
    g_assert_cmpuint(all->len, ==, 3);
    const char *want[3] = {"a.png", "b.png", "c.png"};
    for (guint i = 0; i < 3; i++) {
        RlxGalleryItem *it = all->pdata[i];
        g_assert_true(g_str_has_suffix(it->png, want[i]));
    }
    g_ptr_array_unref(all);
    GPtrArray *two = rlx_gallery_list(dir, 2);
    g_assert_cmpuint(two->len, ==, 2);
    g_ptr_array_unref(two);
    g_autofree char *none = g_build_filename(tmp_dir, "no-such-folder", NULL);
    GPtrArray *empty = rlx_gallery_list(none, 10);
    g_assert_cmpuint(empty->len, ==, 0);
    g_ptr_array_unref(empty);
}

static void test_new_path(void)
{
    g_autofree char *p1 = rlx_gallery_new_png_path(tmp_dir, 42);
    g_assert_true(g_str_has_suffix(p1, "-42.png"));
    touch(p1);
    g_autofree char *p2 = rlx_gallery_new_png_path(tmp_dir, 42);
    g_assert_cmpstr(p1, !=, p2);
    g_assert_false(g_file_test(p2, G_FILE_TEST_EXISTS));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmp_dir = g_dir_make_tmp("rlx-gallery-XXXXXX", NULL);
    g_assert_nonnull(tmp_dir);
    g_test_add_func("/gallery/roundtrip", test_roundtrip);
    g_test_add_func("/gallery/list", test_list);
    g_test_add_func("/gallery/new-path", test_new_path);
    int rc = g_test_run();
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0)
        g_printerr("could not remove %s\n", tmp_dir);
    g_free(tmp_dir);
    return rc;
}
