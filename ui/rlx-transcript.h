/* A transcript of the Transcribe page and its file: one JSON file per
 * transcript under ~/.local/share/rlx-studio/transcripts/, named by its id,
 * written atomically (a temporary file renamed over the old one) each time
 * it is saved, so a crash loses no segment that was saved.
 *
 * Usage:
 *     Transcript *t = rlx_transcript_new();
 *     g_array_append_val(t->segs, seg);
 *     if (!rlx_transcript_save(t, &error)) ...
 *     GPtrArray *all = g_ptr_array_new_with_free_func((GDestroyNotify)rlx_transcript_free);
 *     rlx_transcript_load_all(all);       // newest first
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
    gint64 t0, t1; /* ms */
    char *text;
} Seg;

typedef enum {
    ST_RUNNING,
    ST_DONE,
    ST_STOPPED,
    ST_FAILED,
    ST_INTERRUPTED, /* the app ended while it ran */
} TState;

typedef struct {
    char *id;
    char *title;
    char *audio; /* the recording's path */
    char *model;
    char *language; /* used or detected; NULL before known */
    gboolean translate;
    gint64 created, updated;
    double duration_s; /* 0: not known yet */
    TState state;
    GArray *segs; /* Seg */
    gboolean saved_once;
} Transcript;

Transcript *rlx_transcript_new(void);
void rlx_transcript_free(Transcript *t);
/* "transcribing", "done", "stopped", "failed", "interrupted" */
const char *rlx_transcript_state_name(TState s);
/* Write t (updated now) atomically; FALSE with *error set when it cannot. */
gboolean rlx_transcript_save(Transcript *t, GError **error);
void rlx_transcript_delete_file(const Transcript *t);
/* Every transcript file into out, newest first (a file that is not one is
 * left alone, with a warning). A transcript saved while it ran comes back
 * as interrupted. */
void rlx_transcript_load_all(GPtrArray *out);

G_END_DECLS
