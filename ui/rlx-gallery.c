#include "rlx-gallery.h"

#include <json-c/json.h>
#include <string.h>

#include "rlx-json.h"

void rlx_gallery_item_free(RlxGalleryItem *it)
{
    if (!it)
        return;
    g_free(it->png);
    g_free(it->json);
    rlx_imagine_settings_free(it->s);
    g_free(it);
}

char *rlx_gallery_dir(void)
{
    return g_build_filename(g_get_user_data_dir(), "rlx-studio", "imagine", NULL);
}

char *rlx_gallery_settings_to_json(const RlxImagineSettings *s, gint64 time)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "version", json_object_new_int(1));
    json_object_object_add(o, "prompt", json_object_new_string(s->prompt ? s->prompt : ""));
    json_object_object_add(o, "negative", json_object_new_string(s->negative ? s->negative : ""));
    json_object_object_add(o, "width", json_object_new_int(s->width));
    json_object_object_add(o, "height", json_object_new_int(s->height));
    json_object_object_add(o, "steps", json_object_new_int(s->steps));
    json_object_object_add(o, "seed", json_object_new_int64((int64_t)s->seed));
    json_object_object_add(o, "guidance", json_object_new_double(s->guidance));
    if (s->init || s->ref) {
        json_object_object_add(o, "start", json_object_new_string(s->init ? "init" : "reference"));
        if (s->init)
            json_object_object_add(o, "strength", json_object_new_double(s->strength));
    }
    json_object_object_add(o, "model", json_object_new_string(s->model ? s->model : ""));
    json_object_object_add(o, "time", json_object_new_int64(time));
    json_object_object_add(o, "seconds", json_object_new_double(s->seconds));
    char *t = g_strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
    return t;
}

static double json_num(json_object *o, const char *key, double def)
{
    json_object *v = NULL;
    if (json_object_object_get_ex(o, key, &v) &&
        (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
        return json_object_get_double(v);
    return def;
}

RlxImagineSettings *rlx_gallery_settings_from_json(const char *path, gint64 *time)
{
    json_object *o = json_object_from_file(path);
    if (!o)
        return NULL;
    RlxImagineSettings *s = NULL;
    if (json_object_is_type(o, json_type_object) && rlx_json_str(o, "prompt")) {
        s = g_new0(RlxImagineSettings, 1);
        s->prompt = g_strdup(rlx_json_str(o, "prompt"));
        s->negative = g_strdup(rlx_json_str(o, "negative"));
        s->model = g_strdup(rlx_json_str(o, "model"));
        s->width = (int)CLAMP(rlx_json_int(o, "width", 1024), 16, 8192);
        s->height = (int)CLAMP(rlx_json_int(o, "height", 1024), 16, 8192);
        s->steps = (int)CLAMP(rlx_json_int(o, "steps", 4), 1, 1000);
        s->seed = (uint64_t)rlx_json_int(o, "seed", 0);
        s->guidance = json_num(o, "guidance", 1);
        s->strength = json_num(o, "strength", 0.6);
        s->seconds = json_num(o, "seconds", 0);
        const char *start = rlx_json_str(o, "start");
        /* the start picture itself is not kept: only that there was one */
        if (g_strcmp0(start, "init") == 0)
            s->init = g_strdup("");
        else if (g_strcmp0(start, "reference") == 0)
            s->ref = g_strdup("");
        *time = rlx_json_int(o, "time", 0);
    }
    json_object_put(o);
    return s;
}

static int item_newer_first(gconstpointer a, gconstpointer b)
{
    const RlxGalleryItem *x = *(RlxGalleryItem *const *)a, *y = *(RlxGalleryItem *const *)b;
    if (x->time != y->time)
        return x->time > y->time ? -1 : 1;
    return -g_strcmp0(x->png, y->png);
}

GPtrArray *rlx_gallery_list(const char *dir, guint max)
{
    GPtrArray *items = g_ptr_array_new_with_free_func((GDestroyNotify)rlx_gallery_item_free);
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        return items;
    for (const char *n; (n = g_dir_read_name(d));) {
        if (!g_str_has_suffix(n, ".json"))
            continue;
        g_autofree char *json = g_build_filename(dir, n, NULL);
        g_autofree char *stem = g_strndup(n, strlen(n) - 5);
        g_autofree char *png_name = g_strconcat(stem, ".png", NULL);
        g_autofree char *png = g_build_filename(dir, png_name, NULL);
        if (!g_file_test(png, G_FILE_TEST_IS_REGULAR))
            continue;
        gint64 time = 0;
        RlxImagineSettings *s = rlx_gallery_settings_from_json(json, &time);
        if (!s)
            continue;
        RlxGalleryItem *it = g_new0(RlxGalleryItem, 1);
        it->png = g_steal_pointer(&png);
        it->json = g_steal_pointer(&json);
        it->s = s;
        it->time = time;
        g_ptr_array_add(items, it);
    }
    g_dir_close(d);
    g_ptr_array_sort(items, item_newer_first);
    if (items->len > max)
        g_ptr_array_set_size(items, max);
    return items;
}

char *rlx_gallery_new_png_path(const char *dir, guint64 seed)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *stamp = g_date_time_format(now, "%Y%m%d-%H%M%S");
    for (int k = 0;; k++) {
        g_autofree char *name =
            k ? g_strdup_printf("%s-%" G_GUINT64_FORMAT "-%d.png", stamp, seed, k)
              : g_strdup_printf("%s-%" G_GUINT64_FORMAT ".png", stamp, seed);
        char *p = g_build_filename(dir, name, NULL);
        if (!g_file_test(p, G_FILE_TEST_EXISTS) || k > 1000)
            return p;
        g_free(p);
    }
}

gboolean rlx_gallery_write_sidecar(const char *png, const RlxImagineSettings *s, gint64 time,
                                   char **json_path, GError **error)
{
    g_autofree char *stem =
        g_str_has_suffix(png, ".png") ? g_strndup(png, strlen(png) - 4) : g_strdup(png);
    *json_path = g_strconcat(stem, ".json", NULL);
    g_autofree char *json = rlx_gallery_settings_to_json(s, time);
    return g_file_set_contents(*json_path, json, -1, error);
}
