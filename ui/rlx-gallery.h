/* The Imagine page's gallery on disk: each picture is a PNG (with its
 * "parameters" chunk) and a JSON sidecar of the same name holding the
 * settings that made it, in g_get_user_data_dir()/rlx-studio/imagine.
 *
 *   g_autofree char *dir = rlx_gallery_dir();
 *   GPtrArray *items = rlx_gallery_list(dir, 300);      // newest first
 *   char *png = rlx_gallery_new_png_path(dir, seed);     // a free name
 *   rlx_gallery_write_sidecar(png, settings, time, &json_path, &error);
 *
 * A sidecar whose PNG is gone, or that is not one of ours, is skipped. The
 * start picture of an image-to-image run is not kept, only that there was
 * one. Thread safety: plain functions over files. */
#pragma once

#include <glib.h>

#include "rlx-imaginer.h" /* RlxImagineSettings */

G_BEGIN_DECLS

typedef struct {
    char *png, *json;
    RlxImagineSettings *s;
    gint64 time; /* unix seconds */
} RlxGalleryItem;

void rlx_gallery_item_free(RlxGalleryItem *it);

char *rlx_gallery_dir(void);
/* The pictures of dir, newest first (then by name), at most max; the array
 * frees its items. An empty array when dir cannot be read. */
GPtrArray *rlx_gallery_list(const char *dir, guint max);
/* A PNG path in dir not taken yet: the local time, then the seed. */
char *rlx_gallery_new_png_path(const char *dir, guint64 seed);
/* The settings as the sidecar's JSON text. */
char *rlx_gallery_settings_to_json(const RlxImagineSettings *s, gint64 time);
/* A sidecar as settings (*time from it); NULL when it is not one of ours. */
RlxImagineSettings *rlx_gallery_settings_from_json(const char *path, gint64 *time);
/* Write png's sidecar (png with .json for .png); *json_path gets its path
 * (also on failure). FALSE with error set when it cannot be written. */
gboolean rlx_gallery_write_sidecar(const char *png, const RlxImagineSettings *s, gint64 time,
                                   char **json_path, GError **error);

G_END_DECLS
