/* Transcripts on disk: one JSON file per transcript under the user data
 * folder, written atomically (see rlx-transcript.h). */
#include "rlx-transcript.h"
#include "rlx-json.h"

#include <errno.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <json-c/json.h>
#include <string.h>

static const char *const state_names[] = {"transcribing", "done", "stopped", "failed",
                                          "interrupted"};

const char *rlx_transcript_state_name(TState s)
{
    return s < G_N_ELEMENTS(state_names) ? state_names[s] : "done";
}

/* ---------------------------------------------------------------- */

static void seg_clear(Seg *s)
{
    g_free(s->text);
}

Transcript *rlx_transcript_new(void)
{
    Transcript *t = g_new0(Transcript, 1);
    t->id = g_uuid_string_random();
    t->created = t->updated = g_get_real_time() / 1000000;
    t->segs = g_array_new(FALSE, TRUE, sizeof(Seg));
    g_array_set_clear_func(t->segs, (GDestroyNotify)seg_clear);
    return t;
}

void rlx_transcript_free(Transcript *t)
{
    g_free(t->id);
    g_free(t->title);
    g_free(t->audio);
    g_free(t->model);
    g_free(t->language);
    g_array_unref(t->segs);
    g_free(t);
}

static char *transcripts_dir(void)
{
    return g_build_filename(g_get_user_data_dir(), "rlx-studio", "transcripts", NULL);
}

static char *transcript_path(const Transcript *t)
{
    g_autofree char *dir = transcripts_dir();
    g_autofree char *name = g_strconcat(t->id, ".json", NULL);
    return g_build_filename(dir, name, NULL);
}

static json_object *transcript_to_json(const Transcript *t)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "version", json_object_new_int(1));
    json_object_object_add(o, "id", json_object_new_string(t->id));
    json_object_object_add(o, "title", json_object_new_string(t->title ? t->title : ""));
    if (t->audio)
        json_object_object_add(o, "audio", json_object_new_string(t->audio));
    if (t->model)
        json_object_object_add(o, "model", json_object_new_string(t->model));
    if (t->language)
        json_object_object_add(o, "language", json_object_new_string(t->language));
    json_object_object_add(o, "translate", json_object_new_boolean(t->translate));
    json_object_object_add(o, "created", json_object_new_int64(t->created));
    json_object_object_add(o, "updated", json_object_new_int64(t->updated));
    json_object_object_add(o, "duration_s", json_object_new_double(t->duration_s));
    json_object_object_add(o, "state", json_object_new_string(state_names[t->state]));
    json_object *arr = json_object_new_array();
    for (guint i = 0; i < t->segs->len; i++) {
        const Seg *s = &g_array_index(t->segs, Seg, i);
        json_object *so = json_object_new_object();
        json_object_object_add(so, "start_ms", json_object_new_int64(s->t0));
        json_object_object_add(so, "end_ms", json_object_new_int64(s->t1));
        json_object_object_add(so, "text", json_object_new_string(s->text));
        json_object_array_add(arr, so);
    }
    json_object_object_add(o, "segments", arr);
    return o;
}

static Transcript *transcript_from_json(json_object *o)
{
    if (!json_object_is_type(o, json_type_object) || !rlx_json_str(o, "id"))
        return NULL;
    Transcript *t = rlx_transcript_new();
    g_free(t->id);
    t->id = g_strdup(rlx_json_str(o, "id"));
    t->title = g_strdup(rlx_json_str(o, "title") ? rlx_json_str(o, "title") : _("Transcript"));
    t->audio = g_strdup(rlx_json_str(o, "audio"));
    t->model = g_strdup(rlx_json_str(o, "model"));
    t->language = g_strdup(rlx_json_str(o, "language"));
    json_object *v = NULL;
    if (json_object_object_get_ex(o, "translate", &v))
        t->translate = json_object_get_boolean(v);
    t->created = rlx_json_int(o, "created", 0);
    t->updated = rlx_json_int(o, "updated", t->created);
    if (json_object_object_get_ex(o, "duration_s", &v))
        t->duration_s = MAX(0.0, json_object_get_double(v));
    t->state = ST_DONE;
    const char *st = rlx_json_str(o, "state");
    for (guint i = 0; st && i < G_N_ELEMENTS(state_names); i++)
        if (strcmp(st, state_names[i]) == 0)
            t->state = i;
    /* Saved while it ran, and the app is only now starting: it was cut short. */
    if (t->state == ST_RUNNING)
        t->state = ST_INTERRUPTED;
    if (json_object_object_get_ex(o, "segments", &v) && json_object_is_type(v, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            json_object *so = json_object_array_get_idx(v, i);
            if (!json_object_is_type(so, json_type_object) || !rlx_json_str(so, "text"))
                continue;
            Seg s = {.t0 = MAX(0, rlx_json_int(so, "start_ms", 0)),
                     .t1 = MAX(0, rlx_json_int(so, "end_ms", 0)),
                     .text = g_strdup(rlx_json_str(so, "text"))};
            g_array_append_val(t->segs, s);
        }
    }
    t->saved_once = TRUE;
    return t;
}

gboolean rlx_transcript_save(Transcript *t, GError **error)
{
    t->updated = g_get_real_time() / 1000000;
    g_autofree char *dir = transcripts_dir();
    g_autofree char *path = transcript_path(t);
    if (g_mkdir_with_parents(dir, 0700) != 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", dir,
                    g_strerror(errno));
        return FALSE;
    }
    json_object *o = transcript_to_json(t);
    const char *text =
        json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    /* a temporary file renamed over the old one */
    gboolean ok = g_file_set_contents(path, text, -1, error);
    json_object_put(o);
    if (ok)
        t->saved_once = TRUE;
    return ok;
}

void rlx_transcript_delete_file(const Transcript *t)
{
    g_autofree char *path = transcript_path(t);
    if (g_unlink(path) != 0 && errno != ENOENT)
        g_warning("cannot delete %s: %s", path, g_strerror(errno));
}

static gint newest_first(gconstpointer a, gconstpointer b)
{
    const Transcript *x = *(Transcript *const *)a, *y = *(Transcript *const *)b;
    return (x->created < y->created) - (x->created > y->created);
}

void rlx_transcript_load_all(GPtrArray *out)
{
    g_autofree char *dir = transcripts_dir();
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        if (!g_str_has_suffix(name, ".json"))
            continue;
        g_autofree char *path = g_build_filename(dir, name, NULL);
        json_object *o = json_object_from_file(path);
        Transcript *t = o ? transcript_from_json(o) : NULL;
        if (o)
            json_object_put(o);
        if (t) {
            /* Named after its file, whatever the file says: a path is made
             * from the id to save and delete it. */
            g_free(t->id);
            t->id = g_strndup(name, strlen(name) - strlen(".json"));
            g_ptr_array_add(out, t);
        } else
            g_warning("%s is not a transcript; left alone", path);
    }
    g_ptr_array_sort(out, newest_first);
}
