#include "rlx-transcribe-pane.h"
#include "rlx-keys.h"
#include "rlx-toasts.h"
#include "rlx-transcript.h"

#include "rlx-transcriber.h"

#include "backends/base/status.h"
#include "engine/audio/audio-device.h"
#include "engine/audio/audio.h"
#include "models/whisper/whisper-file.h"
#include "models/whisper/whisper.h"

#include <errno.h>
#include <string.h>

#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <json-c/json.h>

/* ---- languages ---------------------------------------------------------------- */

/* Whisper's languages in openai's order (the most spoken first), from the
 * model file layer: index 0 of the menu detects, index i > 0 is language
 * i - 1. Their names are English, capitalized here ("haitian creole" ->
 * "Haitian Creole"). */
static guint n_languages(void)
{
    guint n = 0;
    while (rlx_whisper_language_code((int)n))
        n++;
    return n;
}

static const char *language_code(guint index)
{
    const char *code = index ? rlx_whisper_language_code((int)index - 1) : NULL;
    return code ? code : "auto";
}

static guint language_index(const char *code)
{
    int i = code && strcmp(code, "auto") != 0 ? rlx_whisper_language_find(code) : -1;
    return i >= 0 ? (guint)i + 1 : 0;
}

/* "de" -> "German"; an unknown code as it is */
static char *language_name(const char *code)
{
    int i = code ? rlx_whisper_language_find(code) : -1;
    const char *name = i >= 0 ? rlx_whisper_language_name(i) : NULL;
    if (!name)
        return g_strdup(code ? code : "");
    char *s = g_strdup(name);
    for (char *p = s; *p; p++)
        if (p == s || p[-1] == ' ')
            *p = g_ascii_toupper(*p);
    return s;
}

/* ---- the pane ----------------------------------------------------------------- */

/* The option widgets, shown twice: on the empty page and in a popover. */
typedef struct {
    AdwActionRow *model_row;
    AdwComboRow *language_row;
    GtkSwitch *translate_switch;
} Options;

struct _RlxTranscribePane {
    GtkWidget parent_instance;

    AdwFlap *flap;
    GtkToggleButton *sidebar_button;
    GtkListBox *transcript_list, *segment_list;
    GtkLabel *title_label, *details_label, *progress_label, *record_label;
    GtkWidget *progress_box, *record_box, *record_button, *options_button, *export_button;
    GtkButton *resume_button;
    GtkProgressBar *progress_bar;
    GtkLevelBar *level_bar;
    AdwToastOverlay *toast_overlay;
    GtkStack *content_stack;
    AdwStatusPage *empty_page;
    GtkScrolledWindow *scroller;
    GtkBox *empty_options, *popover_options;
    GtkLabel *placeholder;

    GSettings *settings; /* nullable */
    RlxTranscriber *transcriber;
    Options opts[2];
    gboolean syncing; /* the option widgets are being set from the state */

    char *model;    /* the chosen model; NULL: none */
    guint language; /* index: 0 = detect */
    gboolean translate;
    char *pending_audio; /* waiting for a model to be chosen */

    GPtrArray *transcripts; /* Transcript *, newest first */
    Transcript *current;    /* shown; NULL: the empty page */
    Transcript *run;        /* being transcribed */
    Transcript *before_run; /* shown when it started: back there if it leaves nothing */
    gboolean stopping;
    gint64 run_start_us;    /* when the model was ready; 0 while loading */
    double done_s, total_s; /* the runner's position */
    double run_from_s;      /* where this run started in the recording */
    guint tick;             /* refreshes elapsed time while running */
    guint save_idle;        /* the run's next save */
    gboolean follow;        /* the list stays at its end while it grows */
    /* recording from the microphone */
    rlx_audio_capture *capture;
    struct RecBuf *rec; /* filled on the capture's thread */
    guint rec_tick;
    gint64 rec_start_us; /* monotonic, when the recording began */

    /* playback of the shown transcript's recording */
    rlx_audio_playback *playback;
    float *play_x; /* the recording at 16 kHz, kept for the next click */
    int64_t play_n;
    char *play_path;
    gint64 play_from_ms; /* where the load under way starts playing */
    GCancellable *play_load;
    guint play_tick;
    int playing_index; /* the segment row highlighted, -1: none */

    RlxToasts toasts;
};

G_DEFINE_FINAL_TYPE(RlxTranscribePane, rlx_transcribe_pane, GTK_TYPE_WIDGET)

/* ---- toasts ----------------------------------------------------------------- */

/* One at a time, the newest, as on the Chat page (ui/rlx-toasts.h).
 * button and action (nullable): a button that runs an action of the page. */
static void toast_full(RlxTranscribePane *self, const char *text, AdwToastPriority priority,
                       const char *button, const char *action)
{
    rlx_toasts_show(&self->toasts, text, priority, button, action);
}

static void toast_action(RlxTranscribePane *self, const char *text, const char *button,
                         const char *action)
{
    toast_full(self, text, ADW_TOAST_PRIORITY_HIGH, button, action);
}

static void toast(RlxTranscribePane *self, const char *text)
{
    toast_full(self, text, ADW_TOAST_PRIORITY_NORMAL, NULL, NULL);
}

static void toast_error(RlxTranscribePane *self, const char *text)
{
    toast_full(self, text, ADW_TOAST_PRIORITY_HIGH, NULL, NULL);
}

/* ---- saving ------------------------------------------------------------------ */

static gboolean transcript_save(RlxTranscribePane *self, Transcript *t)
{
    g_autoptr(GError) error = NULL;
    if (!rlx_transcript_save(t, &error)) {
        g_autofree char *msg = g_strdup_printf(_("Cannot save the transcript: %s"), error->message);
        toast_error(self, msg);
        return FALSE;
    }
    g_debug("transcript saved: %u segments", t->segs->len); /* for the UI tests */
    return TRUE;
}

static void load_transcripts(RlxTranscribePane *self)
{
    rlx_transcript_load_all(self->transcripts);
}

/* ---- formatting ---------------------------------------------------------------- */

/* "01:02.345", "1:01:02.345" past an hour */
static char *fmt_stamp(gint64 ms)
{
    if (ms < 0)
        ms = 0;
    gint64 h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, f = ms % 1000;
    if (h)
        return g_strdup_printf("%" G_GINT64_FORMAT ":%02" G_GINT64_FORMAT ":%02" G_GINT64_FORMAT
                               ".%03" G_GINT64_FORMAT,
                               h, m, s, f);
    return g_strdup_printf("%02" G_GINT64_FORMAT ":%02" G_GINT64_FORMAT ".%03" G_GINT64_FORMAT, m,
                           s, f);
}

/* "0:42", "1:02:03" */
static char *fmt_duration(double seconds)
{
    gint64 s = (gint64)(seconds + 0.5);
    if (s < 0)
        s = 0;
    if (s >= 3600)
        return g_strdup_printf("%" G_GINT64_FORMAT ":%02" G_GINT64_FORMAT ":%02" G_GINT64_FORMAT,
                               s / 3600, s / 60 % 60, s % 60);
    return g_strdup_printf("%" G_GINT64_FORMAT ":%02" G_GINT64_FORMAT, s / 60, s % 60);
}

static char *seg_text(const Seg *s)
{
    return g_strstrip(g_strdup(s->text));
}

/* ---- segments --------------------------------------------------------------- */

static void update_state(RlxTranscribePane *self);

/* ---- playback ----------------------------------------------------------------- */

static void stop_playback(RlxTranscribePane *self)
{
    if (self->play_load) {
        g_cancellable_cancel(self->play_load);
        g_clear_object(&self->play_load);
    }
    g_clear_handle_id(&self->play_tick, g_source_remove);
    if (self->playback) {
        rlx_audio_playback_stop(self->playback);
        self->playback = NULL;
        g_debug("playback stopped"); /* for the UI tests */
    }
    self->playing_index = -1;
}

static void drop_play_cache(RlxTranscribePane *self)
{
    stop_playback(self);
    g_clear_pointer(&self->play_x, free);
    g_clear_pointer(&self->play_path, g_free);
    self->play_n = 0;
}

/* The segment being heard is the selected row: the last that starts at or
 * before the position. */
static void highlight_at(RlxTranscribePane *self, gint64 ms)
{
    Transcript *t = self->current;
    int index = -1;
    for (guint i = 0; t && i < t->segs->len && g_array_index(t->segs, Seg, i).t0 <= ms; i++)
        index = (int)i;
    if (index < 0 || index == self->playing_index)
        return;
    self->playing_index = index;
    g_debug("playing segment %d", index); /* for the UI tests */
    GtkListBoxRow *row = gtk_list_box_get_row_at_index(self->segment_list, index);
    if (row)
        gtk_list_box_select_row(self->segment_list, row);
}

static gboolean play_tick_cb(gpointer data)
{
    RlxTranscribePane *self = data;
    if (!self->playback || !self->current) {
        self->play_tick = 0;
        return G_SOURCE_REMOVE;
    }
    highlight_at(self,
                 rlx_audio_playback_position(self->playback) * 1000 / RLX_WHISPER_SAMPLE_RATE);
    if (rlx_audio_playback_finished(self->playback)) {
        self->play_tick = 0;
        stop_playback(self);
        update_state(self);
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

static void start_playing(RlxTranscribePane *self, gint64 from_ms)
{
    stop_playback(self);
    int64_t from = from_ms * RLX_WHISPER_SAMPLE_RATE / 1000;
    from = CLAMP(from, 0, self->play_n);
    rlx_error *err = NULL;
    if (rlx_audio_play_start(self->play_x, self->play_n, RLX_WHISPER_SAMPLE_RATE, from, -1,
                             &self->playback, &err) != RLX_OK) {
        self->playback = NULL;
        g_autofree char *msg = g_strdup_printf(_("Cannot play: %s"), rlx_error_message(err));
        toast_error(self, msg);
        rlx_error_free(err);
    } else {
        g_debug("playing from %" G_GINT64_FORMAT " ms", from_ms); /* for the UI tests */
        highlight_at(self, from_ms);
        self->play_tick = g_timeout_add(100, play_tick_cb, self);
    }
    update_state(self);
}

typedef struct {
    char *path;
    float *x;
    int64_t n;
    rlx_error *err;
} PlayLoad;

static void play_load_free(PlayLoad *l)
{
    g_free(l->path);
    free(l->x);
    rlx_error_free(l->err);
    g_free(l);
}

static void play_load_thread(GTask *task, gpointer source, gpointer data, GCancellable *c)
{
    PlayLoad *l = data;
    rlx_audio_load(l->path, RLX_WHISPER_SAMPLE_RATE, &l->x, &l->n, &l->err);
    g_task_return_boolean(task, TRUE);
}

static void play_load_done(GObject *source, GAsyncResult *res, gpointer data)
{
    GCancellable *c = g_task_get_cancellable(G_TASK(res));
    if (g_cancellable_is_cancelled(c))
        return; /* stopped meanwhile: another click, another transcript, the pane gone */
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(source);
    PlayLoad *l = g_task_get_task_data(G_TASK(res));
    g_clear_object(&self->play_load);
    if (!l->x) {
        g_autofree char *msg = g_strdup_printf(_("Cannot play: %s"), rlx_error_message(l->err));
        toast_error(self, msg);
        update_state(self);
        return;
    }
    drop_play_cache(self);
    self->play_x = g_steal_pointer(&l->x);
    self->play_n = l->n;
    self->play_path = g_strdup(l->path);
    start_playing(self, self->play_from_ms);
}

static void play_from(RlxTranscribePane *self, guint index)
{
    Transcript *t = self->current;
    if (!t || index >= t->segs->len || !t->audio)
        return;
    gint64 from = g_array_index(t->segs, Seg, index).t0;
    if (self->play_x && g_strcmp0(self->play_path, t->audio) == 0) {
        start_playing(self, from);
        return;
    }
    /* Decoding a long recording takes a while: off the main thread. */
    stop_playback(self);
    self->play_from_ms = from;
    self->play_load = g_cancellable_new();
    PlayLoad *l = g_new0(PlayLoad, 1);
    l->path = g_strdup(t->audio);
    GTask *task = g_task_new(self, self->play_load, play_load_done, NULL);
    g_task_set_task_data(task, l, (GDestroyNotify)play_load_free);
    g_task_run_in_thread(task, play_load_thread);
    g_object_unref(task);
    update_state(self);
}

static void stamp_clicked(GtkButton *b, RlxTranscribePane *self)
{
    GtkWidget *row = gtk_widget_get_ancestor(GTK_WIDGET(b), GTK_TYPE_LIST_BOX_ROW);
    if (!row)
        return;
    gtk_list_box_select_row(self->segment_list, GTK_LIST_BOX_ROW(row));
    play_from(self, (guint)gtk_list_box_row_get_index(GTK_LIST_BOX_ROW(row)));
}

static void segment_activated(GtkListBox *box, GtkListBoxRow *row, RlxTranscribePane *self)
{
    play_from(self, (guint)gtk_list_box_row_get_index(row));
}

static GtkWidget *segment_row(RlxTranscribePane *self, const Seg *s)
{
    g_autofree char *a = fmt_stamp(s->t0);
    g_autofree char *b = fmt_stamp(s->t1);
    g_autofree char *stamp = g_strdup_printf("[%s → %s]", a, b);
    g_autofree char *text = seg_text(s);

    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    gtk_widget_set_margin_start(box, 6);
    gtk_widget_set_margin_end(box, 12);
    gtk_widget_set_margin_top(box, 6);
    gtk_widget_set_margin_bottom(box, 6);
    GtkWidget *time = gtk_button_new_with_label(stamp);
    gtk_widget_add_css_class(time, "flat");
    gtk_widget_add_css_class(time, "rlx-stamp");
    gtk_widget_set_valign(time, GTK_ALIGN_START);
    gtk_widget_set_tooltip_text(time, _("Play from here"));
    g_signal_connect(time, "clicked", G_CALLBACK(stamp_clicked), self);
    GtkWidget *label = gtk_label_new(text);
    gtk_label_set_wrap(GTK_LABEL(label), TRUE);
    gtk_label_set_wrap_mode(GTK_LABEL(label), PANGO_WRAP_WORD_CHAR);
    gtk_label_set_selectable(GTK_LABEL(label), TRUE);
    gtk_label_set_xalign(GTK_LABEL(label), 0);
    gtk_widget_set_hexpand(label, TRUE);
    gtk_widget_set_valign(label, GTK_ALIGN_CENTER);
    /* GTK 4.8 measures a wrapping label beside another widget a pixel wider
     * for some heights than its minimum (a wide glyph, CJK or a missing one's
     * box) and reports it as a critical; a minimum of its own above any one
     * glyph keeps the two measures equal. */
    gtk_widget_set_size_request(label, 120, -1);
    gtk_box_append(GTK_BOX(box), time);
    gtk_box_append(GTK_BOX(box), label);
    GtkWidget *row = gtk_list_box_row_new();
    gtk_list_box_row_set_child(GTK_LIST_BOX_ROW(row), box);
    return row;
}

static gboolean scroll_idle(gpointer data)
{
    RlxTranscribePane *self = data;
    GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment(self->scroller);
    gtk_adjustment_set_value(adj, gtk_adjustment_get_upper(adj));
    return G_SOURCE_REMOVE;
}

static void rebuild_segments(RlxTranscribePane *self)
{
    /* The placeholder is a child of the list too: remove only the rows. */
    for (GtkWidget *c = gtk_widget_get_first_child(GTK_WIDGET(self->segment_list)); c;) {
        GtkWidget *next = gtk_widget_get_next_sibling(c);
        if (GTK_IS_LIST_BOX_ROW(c))
            gtk_list_box_remove(self->segment_list, c);
        c = next;
    }
    Transcript *t = self->current;
    for (guint i = 0; t && i < t->segs->len; i++)
        gtk_list_box_append(self->segment_list, segment_row(self, &g_array_index(t->segs, Seg, i)));
}

/* ---- sidebar ------------------------------------------------------------------ */

static char *transcript_subtitle(const Transcript *t)
{
    g_autoptr(GDateTime) when = g_date_time_new_from_unix_local(t->created);
    g_autofree char *date = when ? g_date_time_format(when, "%x %H:%M") : g_strdup("");
    switch (t->state) {
    case ST_RUNNING:
        return g_strdup(_("Transcribing…"));
    case ST_STOPPED:
        /* Translators: a transcript in the sidebar: its date, then that it was stopped */
        return g_strdup_printf(_("%s · stopped"), date);
    case ST_FAILED:
    case ST_INTERRUPTED:
        /* Translators: a transcript in the sidebar: its date, then that it did not finish */
        return g_strdup_printf(_("%s · unfinished"), date);
    default:
        return g_steal_pointer(&date);
    }
}

static void rebuild_sidebar(RlxTranscribePane *self)
{
    GtkWidget *child;
    while ((child = gtk_widget_get_first_child(GTK_WIDGET(self->transcript_list))))
        gtk_list_box_remove(self->transcript_list, child);
    for (guint i = 0; i < self->transcripts->len; i++) {
        Transcript *t = g_ptr_array_index(self->transcripts, i);
        GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 2);
        GtkWidget *title = gtk_label_new(t->title);
        gtk_label_set_xalign(GTK_LABEL(title), 0);
        gtk_label_set_ellipsize(GTK_LABEL(title), PANGO_ELLIPSIZE_MIDDLE);
        g_autofree char *sub = transcript_subtitle(t);
        GtkWidget *subtitle = gtk_label_new(sub);
        gtk_label_set_xalign(GTK_LABEL(subtitle), 0);
        gtk_label_set_ellipsize(GTK_LABEL(subtitle), PANGO_ELLIPSIZE_END);
        gtk_widget_add_css_class(subtitle, "caption");
        gtk_widget_add_css_class(subtitle, "dim-label");
        gtk_box_append(GTK_BOX(box), title);
        gtk_box_append(GTK_BOX(box), subtitle);
        GtkWidget *row = gtk_list_box_row_new();
        gtk_list_box_row_set_child(GTK_LIST_BOX_ROW(row), box);
        g_object_set_data(G_OBJECT(row), "transcript", t);
        gtk_list_box_append(self->transcript_list, row);
        if (t == self->current)
            gtk_list_box_select_row(self->transcript_list, GTK_LIST_BOX_ROW(row));
    }
}

static void show_transcript(RlxTranscribePane *self, Transcript *t)
{
    if (t != self->current)
        stop_playback(self);
    self->current = t;
    if (t) /* for the UI tests */
        g_debug("showing transcript %s: %u segments, %s", t->id, t->segs->len,
                rlx_transcript_state_name(t->state));
    rebuild_segments(self);
    self->follow = TRUE;
    g_idle_add_full(G_PRIORITY_LOW, scroll_idle, g_object_ref(self), g_object_unref);
    update_state(self);
}

static void transcript_selected(GtkListBox *box, GtkListBoxRow *row, RlxTranscribePane *self)
{
    Transcript *t = row ? g_object_get_data(G_OBJECT(row), "transcript") : NULL;
    if (t && t != self->current) {
        show_transcript(self, t);
        if (adw_flap_get_folded(self->flap))
            adw_flap_set_reveal_flap(self->flap, FALSE);
    }
}

/* ---- state --------------------------------------------------------------------- */

static char *model_name(const char *path)
{
    if (!path)
        return g_strdup(_("None chosen"));
    return g_path_get_basename(path);
}

static void update_progress(RlxTranscribePane *self)
{
    if (!self->run)
        return;
    if (!self->run_start_us)
        return; /* the model loads: the loading stage shows */
    double elapsed = (double)(g_get_monotonic_time() - self->run_start_us) / 1e6;
    double fraction = self->total_s > 0 ? CLAMP(self->done_s / self->total_s, 0, 1) : 0;
    gtk_progress_bar_set_fraction(self->progress_bar, fraction);
    g_autofree char *done = fmt_duration(self->done_s);
    g_autofree char *total = fmt_duration(self->total_s);
    /* Translators: the position in the recording being transcribed, "0:42 of 3:10" */
    g_autofree char *pos = g_strdup_printf(_("%s of %s"), done, total);
    gtk_progress_bar_set_text(self->progress_bar, self->stopping      ? _("Stopping…")
                                                  : self->total_s > 0 ? pos
                                                                      : _("Transcribing…"));
    g_autofree char *el = fmt_duration(elapsed);
    GString *s = g_string_new(NULL);
    /* Translators: wall-clock time the transcription has taken so far */
    g_string_append_printf(s, _("%s elapsed"), el);
    /* A continued transcript starts past what this run transcribed. */
    double done_here = self->done_s - self->run_from_s;
    if (done_here > 0 && elapsed > 0.5) {
        double rtf = done_here / elapsed;
        if (self->total_s > self->done_s) {
            g_autofree char *left = fmt_duration((self->total_s - self->done_s) / rtf);
            g_string_append(s, " · ");
            /* Translators: estimated time left */
            g_string_append_printf(s, _("about %s left"), left);
        }
        g_string_append(s, " · ");
        /* Translators: audio seconds transcribed per second of wall-clock time */
        g_string_append_printf(s, _("%.1f× realtime"), rtf);
    }
    gtk_label_set_text(self->progress_label, s->str);
    g_string_free(s, TRUE);
}

static void update_details(RlxTranscribePane *self)
{
    Transcript *t = self->current;
    if (!t) {
        gtk_label_set_text(self->title_label, _("Transcribe"));
        g_autofree char *m = model_name(self->model);
        /* Translators: the Transcribe page's header with no transcript shown; %s: the model */
        g_autofree char *d = g_strdup_printf(_("Model: %s"), m);
        gtk_label_set_text(self->details_label, d);
        return;
    }
    gtk_label_set_text(self->title_label, t->title);
    GString *s = g_string_new(NULL);
    if (t->duration_s > 0) {
        g_autofree char *d = fmt_duration(t->duration_s);
        g_string_append(s, d);
    }
    if (t->language) {
        if (s->len)
            g_string_append(s, " · ");
        g_autofree char *lang = language_name(t->language);
        g_string_append(s, lang);
        if (t->translate) {
            g_string_append(s, " → ");
            g_string_append(s, _("English"));
        }
    }
    if (t->segs->len) {
        if (s->len)
            g_string_append(s, " · ");
        g_string_append_printf(s, ngettext("%u segment", "%u segments", t->segs->len),
                               t->segs->len);
    }
    if (t->model) {
        if (s->len)
            g_string_append(s, " · ");
        g_autofree char *m = g_path_get_basename(t->model);
        g_string_append(s, m);
    }
    gtk_label_set_text(self->details_label, s->str);
    g_string_free(s, TRUE);
}

static gboolean resumable(RlxTranscribePane *self, const Transcript *t);

static void update_state(RlxTranscribePane *self)
{
    gboolean running = self->run != NULL;
    gboolean shown_running = running && self->current == self->run;
    gtk_stack_set_visible_child_name(self->content_stack, self->current ? "transcript" : "empty");
    gtk_widget_set_visible(self->progress_box, running);
    if (self->current) {
        const char *p = shown_running ? _("Listening… segments appear here as they are found.")
                        : self->current->state == ST_DONE ? _("No speech was found.")
                                                          : _("Nothing was transcribed.");
        gtk_label_set_text(self->placeholder, p);
    }
    gboolean have_segs = self->current && self->current->segs->len > 0;
    GtkWidget *w = GTK_WIDGET(self);
    gboolean resume = resumable(self, self->current);
    gtk_widget_set_visible(GTK_WIDGET(self->resume_button), resume);
    gtk_widget_action_set_enabled(w, "transcribe.resume", resume);
    if (resume) {
        const Transcript *t = self->current;
        gint64 from = t->segs->len ? g_array_index(t->segs, Seg, t->segs->len - 1).t1 : 0;
        g_autofree char *at = fmt_duration((double)from / 1000.0);
        /* Translators: a button under a transcript that was stopped; %s: where, "1:05" */
        g_autofree char *label = g_strdup_printf(_("Continue from %s"), at);
        gtk_button_set_label(self->resume_button, label);
    }
    gtk_widget_action_set_enabled(w, "transcribe.stop", running && !self->stopping);
    gtk_widget_action_set_enabled(w, "transcribe.escape",
                                  (running && !self->stopping) || self->capture || self->playback ||
                                      self->play_load);
    gtk_widget_action_set_enabled(w, "transcribe.record", !running || self->capture);
    gtk_widget_action_set_enabled(w, "transcribe.copy", have_segs);
    gtk_widget_action_set_enabled(w, "transcribe.export", have_segs);
    gtk_widget_action_set_enabled(w, "transcribe.delete",
                                  self->current && self->current != self->run);
    update_details(self);
}

/* ---- options ----------------------------------------------------------------- */

static void sync_options(RlxTranscribePane *self)
{
    self->syncing = TRUE;
    g_autofree char *name = model_name(self->model);
    for (int i = 0; i < 2; i++) {
        Options *o = &self->opts[i];
        if (!o->model_row)
            continue;
        adw_action_row_set_subtitle(o->model_row, name);
        gtk_widget_set_tooltip_text(GTK_WIDGET(o->model_row), self->model);
        adw_combo_row_set_selected(o->language_row, self->language);
        gtk_switch_set_active(o->translate_switch, self->translate);
    }
    self->syncing = FALSE;
    update_details(self);
}

static void language_changed(AdwComboRow *row, GParamSpec *ps, RlxTranscribePane *self)
{
    if (self->syncing)
        return;
    self->language = adw_combo_row_get_selected(row);
    if (self->language == GTK_INVALID_LIST_POSITION)
        self->language = 0;
    if (self->settings)
        g_settings_set_string(self->settings, "whisper-language", language_code(self->language));
    sync_options(self);
}

static void translate_changed(GtkSwitch *sw, GParamSpec *ps, RlxTranscribePane *self)
{
    if (self->syncing)
        return;
    self->translate = gtk_switch_get_active(sw);
    if (self->settings)
        g_settings_set_boolean(self->settings, "whisper-translate", self->translate);
    sync_options(self);
}

static void build_options(RlxTranscribePane *self, Options *o, GtkBox *parent)
{
    GtkWidget *group = adw_preferences_group_new();

    GtkWidget *model = adw_action_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(model), _("Whisper Model"));
    GMenu *menu = g_menu_new();
    g_menu_append(menu, _("Choose a Model _File (.bin)…"), "transcribe.model-file");
    g_menu_append(menu, _("Choose a Hugging Face _Folder…"), "transcribe.model-folder");
    GtkWidget *choose = gtk_menu_button_new();
    gtk_menu_button_set_icon_name(GTK_MENU_BUTTON(choose), "document-open-symbolic");
    gtk_menu_button_set_menu_model(GTK_MENU_BUTTON(choose), G_MENU_MODEL(menu));
    g_object_unref(menu);
    gtk_widget_set_valign(choose, GTK_ALIGN_CENTER);
    gtk_widget_add_css_class(choose, "flat");
    gtk_widget_set_tooltip_text(choose, _("Choose a Model"));
    adw_action_row_add_suffix(ADW_ACTION_ROW(model), choose);
    adw_action_row_set_activatable_widget(ADW_ACTION_ROW(model), choose);
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(group), model);
    o->model_row = ADW_ACTION_ROW(model);

    GtkStringList *names = gtk_string_list_new(NULL);
    /* Translators: the language menu's first entry: the model detects it */
    gtk_string_list_append(names, _("Auto"));
    for (guint i = 0, n = n_languages(); i < n; i++) {
        g_autofree char *lang = language_name(rlx_whisper_language_code((int)i));
        gtk_string_list_append(names, lang);
    }
    GtkWidget *lang = adw_combo_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(lang), _("Language"));
    adw_combo_row_set_model(ADW_COMBO_ROW(lang), G_LIST_MODEL(names));
    g_object_unref(names);
    g_signal_connect(lang, "notify::selected", G_CALLBACK(language_changed), self);
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(group), lang);
    o->language_row = ADW_COMBO_ROW(lang);

    GtkWidget *tr = adw_action_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(tr), _("Translate to English"));
    GtkWidget *sw = gtk_switch_new();
    gtk_widget_set_valign(sw, GTK_ALIGN_CENTER);
    adw_action_row_add_suffix(ADW_ACTION_ROW(tr), sw);
    adw_action_row_set_activatable_widget(ADW_ACTION_ROW(tr), sw);
    g_signal_connect(sw, "notify::active", G_CALLBACK(translate_changed), self);
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(group), tr);
    o->translate_switch = GTK_SWITCH(sw);

    gtk_box_append(parent, group);
}

static void set_model(RlxTranscribePane *self, const char *path)
{
    g_free(self->model);
    self->model = g_strdup(path);
    if (self->settings)
        g_settings_set_string(self->settings, "whisper-model", path ? path : "");
    sync_options(self);
}

/* ---- transcription -------------------------------------------------------------- */

static void start_transcription(RlxTranscribePane *self, const char *audio);

static void run_ended(RlxTranscribePane *self)
{
    self->run = NULL;
    self->stopping = FALSE;
    self->run_start_us = 0;
    g_clear_handle_id(&self->tick, g_source_remove);
    g_clear_handle_id(&self->save_idle, g_source_remove);
}

static gboolean tick_cb(gpointer data)
{
    update_progress(data);
    return G_SOURCE_CONTINUE;
}

static void on_loading(RlxTranscriber *tr, const char *stage, double fraction,
                       RlxTranscribePane *self)
{
    if (!self->run)
        return;
    g_autofree char *m = model_name(self->run->model);
    g_autofree char *text = g_strdup_printf(_("Loading %s…"), m);
    gtk_progress_bar_set_text(self->progress_bar, text);
    gtk_progress_bar_set_fraction(self->progress_bar, CLAMP(fraction, 0, 1));
    gtk_label_set_text(self->progress_label, stage ? stage : "");
}

static void on_started(RlxTranscriber *tr, const char *kind, gboolean multilingual,
                       RlxTranscribePane *self)
{
    if (!self->run)
        return;
    self->run_start_us = g_get_monotonic_time();
    g_message("transcribing with whisper %s", kind ? kind : "?"); /* for the UI tests */
    gtk_progress_bar_set_fraction(self->progress_bar, 0);
    update_progress(self);
}

static void on_language(RlxTranscriber *tr, const char *code, double p, RlxTranscribePane *self)
{
    if (!self->run || !code)
        return;
    g_free(self->run->language);
    self->run->language = g_strdup(code);
    if (self->run == self->current)
        update_details(self);
}

static gboolean save_idle_cb(gpointer data)
{
    RlxTranscribePane *self = data;
    self->save_idle = 0;
    if (self->run)
        transcript_save(self, self->run);
    return G_SOURCE_REMOVE;
}

static void on_segment(RlxTranscriber *tr, gint64 t0, gint64 t1, const char *text,
                       RlxTranscribePane *self)
{
    Transcript *t = self->run;
    if (!t)
        return;
    /* A token can end inside a character: shown and saved as valid UTF-8. */
    Seg s = {.t0 = t0, .t1 = t1, .text = g_utf8_make_valid(text ? text : "", -1)};
    g_array_append_val(t->segs, s);
    /* Written before the row can be drawn: the save runs ahead of the
     * redraw (G_PRIORITY_HIGH_IDLE < GDK_PRIORITY_REDRAW), once for all the
     * segments of this batch. So kill -9 loses no segment that was shown. */
    if (!self->save_idle)
        self->save_idle = g_idle_add_full(G_PRIORITY_HIGH_IDLE, save_idle_cb, self, NULL);
    if (t == self->current) {
        gtk_list_box_append(self->segment_list, segment_row(self, &s));
        update_state(self);
    }
}

static void on_progress(RlxTranscriber *tr, double done_s, double total_s, RlxTranscribePane *self)
{
    if (!self->run)
        return;
    self->done_s = done_s;
    self->total_s = total_s;
    if (total_s > 0 && self->run->duration_s != total_s) {
        self->run->duration_s = total_s;
        if (self->run == self->current)
            update_details(self);
    }
    update_progress(self);
}

/* The runner's sentence names the file by its full path; the toast has room
 * for its name: a leading "PATH: " goes and any other copy becomes the name. */
static char *without_path(const char *message, const char *path)
{
    if (!path || !*path)
        return g_strdup(message);
    g_autofree char *prefix = g_strconcat(path, ": ", NULL);
    while (g_str_has_prefix(message, prefix))
        message += strlen(prefix);
    g_autofree char *base = g_path_get_basename(path);
    g_auto(GStrv) parts = g_strsplit(message, path, -1);
    return g_strjoinv(base, parts);
}

/* The loaded model's memory goes on to the window's header bar. */
static guint pane_signal_memory;

static void on_memory(RlxTranscriber *tr, const RlxMemoryInfo *m, RlxTranscribePane *self)
{
    (void)tr;
    g_signal_emit(self, pane_signal_memory, 0, m);
}

static void on_finished(RlxTranscriber *tr, int status, const char *message,
                        RlxTranscribePane *self)
{
    Transcript *t = self->run;
    if (!t)
        return;
    g_autofree char *audio = g_strdup(t->audio);
    g_autofree char *title = g_strdup(t->title);
    g_autofree char *model = g_strdup(t->model);
    gboolean loaded = self->run_start_us != 0;
    g_clear_handle_id(&self->save_idle, g_source_remove);
    t->state = status == RLX_OK ? ST_DONE : status == RLX_ERR_CANCELLED ? ST_STOPPED : ST_FAILED;
    if (status == RLX_OK && self->total_s > 0)
        t->duration_s = self->total_s;
    double elapsed =
        self->run_start_us ? (double)(g_get_monotonic_time() - self->run_start_us) / 1e6 : 0;
    g_message("transcription %s: %u segments, %.1f s of audio in %.1f s",
              rlx_transcript_state_name(t->state), t->segs->len, self->done_s,
              elapsed); /* for the tests */
    run_ended(self);
    if (t->segs->len == 0 && t->state != ST_DONE) {
        /* Nothing to keep: a file that could not be read, a model that failed. */
        if (t->saved_once)
            rlx_transcript_delete_file(t);
        g_ptr_array_remove(self->transcripts, t);
        if (self->current == t) {
            Transcript *back = self->before_run;
            show_transcript(self,
                            back && g_ptr_array_find(self->transcripts, back, NULL) ? back : NULL);
        }
        t = NULL;
    } else {
        transcript_save(self, t);
    }
    if (status != RLX_OK && status != RLX_ERR_CANCELLED) {
        g_autofree char *part =
            message && *message ? without_path(message, audio) : g_strdup(_("unknown error"));
        g_autofree char *why = without_path(part, model);
        g_autofree char *msg = loaded
                                   ? /* Translators: %s: the recording's file name, then why */
                                   g_strdup_printf(_("Cannot transcribe %s: %s"), title, why)
                                   : g_strdup_printf(_("Cannot load the Whisper model: %s"), why);
        toast_error(self, msg);
    } else if (status == RLX_ERR_CANCELLED) {
        toast(self, _("Stopped; the segments so far are kept"));
    }
    rebuild_sidebar(self);
    update_state(self);
}

static void fill_job_device(RlxTranscribePane *self, RlxTranscribeJob *job, char **device)
{
    if (!self->settings)
        return;
    g_autofree char *dev = g_settings_get_string(self->settings, "device");
    *device = *dev ? g_steal_pointer(&dev) : NULL;
    job->device = *device;
    job->budget = (uint64_t)g_settings_get_int(self->settings, "memory-budget-mib") << 20;
    job->n_threads = g_settings_get_int(self->settings, "threads");
}

/* resume: a transcript to continue after its last segment, or NULL (a new one) */
static void start_transcription_full(RlxTranscribePane *self, const char *audio, Transcript *resume)
{
    if (self->run || rlx_transcriber_is_busy(self->transcriber)) {
        toast(self, _("A transcription is running; stop it first"));
        return;
    }
    if (!self->model) {
        g_free(self->pending_audio);
        self->pending_audio = g_strdup(audio);
        /* The recording waits for it (rlx_transcribe_pane_open). */
        toast_action(self, _("Choose a Whisper model first"), _("_Choose…"),
                     "transcribe.model-file");
        return;
    }
    g_clear_pointer(&self->pending_audio, g_free);
    Transcript *t = resume;
    gint64 offset = 0;
    if (!t) {
        t = rlx_transcript_new();
        t->title = g_path_get_basename(audio);
        t->audio = g_strdup(audio);
        t->translate = self->translate;
        if (self->language)
            t->language = g_strdup(language_code(self->language));
    } else if (t->segs->len) {
        offset = g_array_index(t->segs, Seg, t->segs->len - 1).t1;
    }
    g_free(t->model);
    t->model = g_strdup(self->model);

    /* A continued transcript keeps its language (the one detected too) and
     * its translation. */
    RlxTranscribeJob job = {
        .model = self->model,
        .audio = audio,
        .language = resume && t->language ? t->language : language_code(self->language),
        .translate = t->translate,
        .offset_ms = offset,
    };
    g_autofree char *device = NULL;
    fill_job_device(self, &job, &device);
    if (!rlx_transcriber_start(self->transcriber, &job)) {
        if (!resume)
            rlx_transcript_free(t);
        toast(self, _("A transcription is running; stop it first"));
        return;
    }
    t->state = ST_RUNNING;
    if (!resume)
        g_ptr_array_insert(self->transcripts, 0, t);
    else
        g_debug("continuing %s from %" G_GINT64_FORMAT " ms", t->id, offset); /* for the tests */
    self->before_run = resume ? NULL : self->current;
    self->run = t;
    self->stopping = FALSE;
    self->done_s = self->total_s = 0;
    self->run_from_s = (double)offset / 1000.0;
    self->run_start_us = 0;
    g_autofree char *m = model_name(self->model);
    g_autofree char *text = g_strdup_printf(_("Loading %s…"), m);
    gtk_progress_bar_set_text(self->progress_bar, text);
    gtk_progress_bar_set_fraction(self->progress_bar, 0);
    gtk_label_set_text(self->progress_label, "");
    self->tick = g_timeout_add(500, tick_cb, self);
    show_transcript(self, t);
    rebuild_sidebar(self);
}

static void start_transcription(RlxTranscribePane *self, const char *audio)
{
    start_transcription_full(self, audio, NULL);
}

static gboolean resumable(RlxTranscribePane *self, const Transcript *t)
{
    return t && !self->run && t->audio &&
           (t->state == ST_STOPPED || t->state == ST_INTERRUPTED || t->state == ST_FAILED);
}

static void resume_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(w);
    Transcript *t = self->current;
    if (!resumable(self, t))
        return;
    if (!g_file_test(t->audio, G_FILE_TEST_EXISTS)) {
        g_autofree char *msg = g_strdup_printf(_("Cannot continue: %s is gone"), t->audio);
        toast_error(self, msg);
        return;
    }
    g_autofree char *audio = g_strdup(t->audio);
    start_transcription_full(self, audio, t);
}

/* ---- files ----------------------------------------------------------------------- */

static const char *const audio_exts[] = {".wav", ".flac", ".ogg",  ".oga", ".opus",
                                         ".mp3", ".m4a",  ".aiff", ".aif"};

static gboolean has_audio_name(const char *name)
{
    g_autofree char *lower = g_ascii_strdown(name, -1);
    for (guint i = 0; i < G_N_ELEMENTS(audio_exts); i++)
        if (g_str_has_suffix(lower, audio_exts[i]))
            return TRUE;
    return FALSE;
}

static gboolean is_model_path(const char *path)
{
    if (g_file_test(path, G_FILE_TEST_IS_DIR))
        return TRUE;
    g_autofree char *lower = g_ascii_strdown(path, -1);
    return g_str_has_suffix(lower, ".bin");
}

gboolean rlx_transcribe_pane_wants_file(GFile *file)
{
    g_autofree char *path = g_file_get_path(file);
    if (!path)
        return FALSE;
    if (has_audio_name(path))
        return TRUE;
    /* A ggml Whisper model: "ggml-base.en.bin" and the like. */
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *lower = g_ascii_strdown(base, -1);
    return g_str_has_suffix(lower, ".bin") &&
           (g_str_has_prefix(lower, "ggml-") || strstr(lower, "whisper"));
}

void rlx_transcribe_pane_open(RlxTranscribePane *self, GFile *file)
{
    g_return_if_fail(RLX_IS_TRANSCRIBE_PANE(self));
    g_autofree char *path = g_file_get_path(file);
    if (!path) {
        toast_error(self, _("Only local files can be opened"));
        return;
    }
    if (!has_audio_name(path) && is_model_path(path)) {
        set_model(self, path);
        g_autofree char *name = g_path_get_basename(path);
        g_autofree char *msg = g_strdup_printf(_("Model: %s"), name);
        toast(self, msg);
        if (self->pending_audio) {
            g_autofree char *audio = g_steal_pointer(&self->pending_audio);
            start_transcription(self, audio);
        }
        return;
    }
    start_transcription(self, path);
}

static gboolean on_drop(GtkDropTarget *target, const GValue *value, double x, double y,
                        RlxTranscribePane *self)
{
    GFile *file = NULL;
    if (G_VALUE_HOLDS(value, GDK_TYPE_FILE_LIST)) {
        GSList *files = gdk_file_list_get_files(g_value_get_boxed(value));
        file = files ? files->data : NULL;
        g_slist_free(files);
    } else if (G_VALUE_HOLDS(value, G_TYPE_FILE)) {
        file = g_value_get_object(value);
    }
    if (!file)
        return FALSE;
    rlx_transcribe_pane_open(self, file);
    return TRUE;
}

/* ---- actions -------------------------------------------------------------------- */

static void open_response(GtkNativeDialog *d, int response, RlxTranscribePane *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) file = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(d));
        const char *what = g_object_get_data(G_OBJECT(d), "rlx-what");
        g_autofree char *path = file ? g_file_get_path(file) : NULL;
        if (!path)
            toast_error(self, _("Only local files can be opened"));
        else if (g_strcmp0(what, "audio") == 0)
            start_transcription(self, path);
        else
            rlx_transcribe_pane_open(self, file);
    }
    gtk_native_dialog_destroy(d);
    g_object_unref(d);
}

/* suffixes NULL: every file */
static void add_filter(GtkFileChooser *c, const char *name, const char *const *suffixes)
{
    GtkFileFilter *f = gtk_file_filter_new();
    gtk_file_filter_set_name(f, name);
    if (!suffixes)
        gtk_file_filter_add_pattern(f, "*");
    for (; suffixes && *suffixes; suffixes++)
        gtk_file_filter_add_suffix(f, *suffixes);
    gtk_file_chooser_add_filter(c, f);
    g_object_unref(f);
}

static void chooser(RlxTranscribePane *self, const char *title, GtkFileChooserAction action,
                    const char *what)
{
    GtkFileChooserNative *d = gtk_file_chooser_native_new(
        title, GTK_WINDOW(gtk_widget_get_root(GTK_WIDGET(self))), action, _("_Open"), _("_Cancel"));
    g_object_set_data(G_OBJECT(d), "rlx-what", (gpointer)what);
    GtkFileChooser *c = GTK_FILE_CHOOSER(d);
    if (g_strcmp0(what, "audio") == 0) {
        static const char *const audio[] = {"wav", "flac", "ogg", "oga", "opus", "mp3", NULL};
        add_filter(c, _("Recordings"), audio);
        add_filter(c, _("All Files"), NULL);
    } else if (g_strcmp0(what, "model-file") == 0) {
        static const char *const bin[] = {"bin", NULL};
        add_filter(c, _("Whisper Models (ggml .bin)"), bin);
        add_filter(c, _("All Files"), NULL);
    }
    g_signal_connect(d, "response", G_CALLBACK(open_response), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(d));
}

static void open_action(GtkWidget *w, const char *name, GVariant *param)
{
    chooser(RLX_TRANSCRIBE_PANE(w), _("Open a Recording"), GTK_FILE_CHOOSER_ACTION_OPEN, "audio");
}

static void model_file_action(GtkWidget *w, const char *name, GVariant *param)
{
    chooser(RLX_TRANSCRIBE_PANE(w), _("Choose a Whisper Model"), GTK_FILE_CHOOSER_ACTION_OPEN,
            "model-file");
}

static void model_folder_action(GtkWidget *w, const char *name, GVariant *param)
{
    chooser(RLX_TRANSCRIBE_PANE(w), _("Choose a Whisper Model Folder"),
            GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER, "model-folder");
}

static void new_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(w);
    self->current = NULL;
    gtk_list_box_unselect_all(self->transcript_list);
    rebuild_segments(self);
    update_state(self);
}

static void stop_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(w);
    if (!self->run || self->stopping)
        return;
    /* Said at once: the runner answers after its current step. */
    self->stopping = TRUE;
    gtk_progress_bar_set_text(self->progress_bar, _("Stopping…"));
    rlx_transcriber_cancel(self->transcriber);
    update_state(self);
}

static char *transcript_text(const Transcript *t)
{
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < t->segs->len; i++) {
        g_autofree char *line = seg_text(&g_array_index(t->segs, Seg, i));
        g_string_append(s, line);
        g_string_append_c(s, '\n');
    }
    return g_string_free(s, FALSE);
}

static void copy_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(w);
    if (!self->current || !self->current->segs->len)
        return;
    g_autofree char *text = transcript_text(self->current);
    gdk_clipboard_set_text(gtk_widget_get_clipboard(w), text);
    toast(self, _("Transcript copied"));
}

/* The transcript as the runner's result, for its writers (no tokens). */
static rlx_whisper_result *transcript_result(const Transcript *t)
{
    rlx_whisper_result *r = g_new0(rlx_whisper_result, 1);
    g_strlcpy(r->language, t->language ? t->language : "", sizeof r->language);
    r->language_p = 1;
    r->n_segments = (int32_t)t->segs->len;
    r->segments = g_new0(rlx_whisper_segment, MAX(1, t->segs->len));
    for (guint i = 0; i < t->segs->len; i++) {
        const Seg *s = &g_array_index(t->segs, Seg, i);
        rlx_whisper_segment *o = &r->segments[i];
        o->index = (int32_t)i;
        o->t0_ms = s->t0;
        o->t1_ms = s->t1;
        o->text = s->text; /* borrowed */
    }
    r->timings.audio_s = t->duration_s;
    r->cancelled = t->state != ST_DONE;
    return r;
}

static void result_free(rlx_whisper_result *r)
{
    g_free(r->segments);
    g_free(r);
}

static const struct {
    const char *ext;
    rlx_whisper_format fmt;
} formats[] = {
    {"txt", RLX_WHISPER_TXT},
    {"srt", RLX_WHISPER_SRT},
    {"vtt", RLX_WHISPER_VTT},
    {"json", RLX_WHISPER_JSON},
};

static void export_response(GtkNativeDialog *d, int response, RlxTranscribePane *self)
{
    Transcript *t = g_object_get_data(G_OBJECT(d), "rlx-transcript");
    if (response == GTK_RESPONSE_ACCEPT && g_ptr_array_find(self->transcripts, t, NULL)) {
        g_autoptr(GFile) file = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(d));
        g_autofree char *path = file ? g_file_get_path(file) : NULL;
        rlx_whisper_format fmt = GPOINTER_TO_INT(g_object_get_data(G_OBJECT(d), "rlx-format"));
        if (!path) {
            toast_error(self, _("Cannot export: not a local file"));
        } else {
            rlx_whisper_result *r = transcript_result(t);
            rlx_error *err = NULL;
            if (rlx_whisper_save(r, fmt, path, &err) != RLX_OK) {
                g_autofree char *msg =
                    g_strdup_printf(_("Cannot export: %s"), rlx_error_message(err));
                toast_error(self, msg);
            } else {
                g_autofree char *base = g_path_get_basename(path);
                g_autofree char *msg = g_strdup_printf(_("Exported to %s"), base);
                toast(self, msg);
            }
            rlx_error_free(err);
            result_free(r);
        }
    }
    gtk_native_dialog_destroy(d);
    g_object_unref(d);
}

static void export_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(w);
    Transcript *t = self->current;
    const char *ext = g_variant_get_string(param, NULL);
    if (!t)
        return;
    int fmt = -1;
    for (guint i = 0; i < G_N_ELEMENTS(formats); i++)
        if (strcmp(formats[i].ext, ext) == 0)
            fmt = (int)formats[i].fmt;
    if (fmt < 0)
        return;
    g_autofree char *up = g_ascii_strup(ext, -1);
    /* Translators: the export dialog's title; %s: TXT, SRT, VTT or JSON */
    g_autofree char *title = g_strdup_printf(_("Export as %s"), up);
    GtkFileChooserNative *d =
        gtk_file_chooser_native_new(title, GTK_WINDOW(gtk_widget_get_root(w)),
                                    GTK_FILE_CHOOSER_ACTION_SAVE, _("_Export"), _("_Cancel"));
    /* "talk.mp3" -> "talk.srt" */
    g_autofree char *stem = g_strdup(t->title);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem)
        *dot = '\0';
    g_strdelimit(stem, "/\\", '-');
    g_autofree char *hint = g_strconcat(stem, ".", ext, NULL);
    gtk_file_chooser_set_current_name(GTK_FILE_CHOOSER(d), hint);
    g_object_set_data(G_OBJECT(d), "rlx-transcript", t);
    g_object_set_data(G_OBJECT(d), "rlx-format", GINT_TO_POINTER(fmt));
    g_signal_connect(d, "response", G_CALLBACK(export_response), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(d));
}

static void export_menu_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(w);
    gtk_menu_button_popup(GTK_MENU_BUTTON(self->export_button));
}

static void delete_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(w);
    Transcript *t = self->current;
    if (!t || t == self->run)
        return;
    rlx_transcript_delete_file(t);
    self->current = NULL;
    if (self->before_run == t)
        self->before_run = NULL;
    g_ptr_array_remove(self->transcripts, t); /* frees it */
    rebuild_segments(self);
    rebuild_sidebar(self);
    update_state(self);
    toast(self, _("Transcript deleted"));
}

/* ---- recording ------------------------------------------------------------------ */

/* The samples so far; rec_chunk appends on the capture's own thread. */
typedef struct RecBuf {
    GMutex lock;
    float *x;
    gint64 n, cap;
} RecBuf;

static void rec_chunk(const float *samples, size_t n, void *user)
{
    RecBuf *b = user;
    g_mutex_lock(&b->lock);
    if (b->n + (gint64)n > b->cap) {
        b->cap = MAX(b->cap * 2, b->n + (gint64)n + RLX_WHISPER_SAMPLE_RATE * 10);
        b->x = g_renew(float, b->x, b->cap);
    }
    memcpy(b->x + b->n, samples, n * sizeof *samples);
    b->n += (gint64)n;
    g_mutex_unlock(&b->lock);
}

static gint64 rec_length(RecBuf *b)
{
    g_mutex_lock(&b->lock);
    gint64 n = b->n;
    g_mutex_unlock(&b->lock);
    return n;
}

/* An input that gives sound much faster than time passes is no microphone
 * (ALSA's null device, the default of a machine without a sound card, gives
 * hours of full-scale samples a minute): the recording is dropped with a
 * sentence before it fills the memory. */
static gboolean not_a_microphone(RlxTranscribePane *self)
{
    double elapsed = (double)(g_get_monotonic_time() - self->rec_start_us) / 1e6;
    double got = (double)rec_length(self->rec) / RLX_WHISPER_SAMPLE_RATE;
    if (got <= 4.0 * elapsed + 2.0)
        return FALSE;
    rlx_audio_capture_stop(self->capture);
    self->capture = NULL;
    RecBuf *b = self->rec;
    g_mutex_lock(&b->lock);
    g_clear_pointer(&b->x, g_free);
    b->n = b->cap = 0;
    g_mutex_unlock(&b->lock);
    gtk_widget_set_visible(self->record_box, FALSE);
    gtk_widget_remove_css_class(self->record_button, "destructive-action");
    g_autofree char *got_s = fmt_duration(got);
    g_autofree char *msg = g_strdup_printf(
        _("Cannot record: the input device gave %s of sound in %.1f s, so it is not a "
          "microphone. Connect or choose one in the system's sound settings."),
        got_s, elapsed);
    toast_error(self, msg);
    g_message("%s", msg); /* for the log */
    update_state(self);
    return TRUE;
}

static gboolean rec_tick_cb(gpointer data)
{
    RlxTranscribePane *self = data;
    if (!self->capture || not_a_microphone(self)) {
        self->rec_tick = 0;
        return G_SOURCE_REMOVE;
    }
    /* -60 dBFS (a quiet room) to 0 dBFS */
    float db = rlx_audio_capture_level_db(self->capture);
    gtk_level_bar_set_value(self->level_bar, CLAMP((db + 60.0) / 60.0, 0.0, 1.0));
    g_autofree char *t = fmt_duration((double)rec_length(self->rec) / RLX_WHISPER_SAMPLE_RATE);
    gtk_label_set_text(self->record_label, t);
    return G_SOURCE_CONTINUE;
}

static char *recordings_dir(void)
{
    return g_build_filename(g_get_user_data_dir(), "rlx-studio", "recordings", NULL);
}

/* Stops the microphone and saves what it heard as a WAV; transcribes it when
 * asked. */
static void finish_recording(RlxTranscribePane *self, gboolean transcribe)
{
    if (!self->capture)
        return;
    rlx_audio_capture_stop(self->capture); /* joins: no more chunks */
    self->capture = NULL;
    g_clear_handle_id(&self->rec_tick, g_source_remove);
    gtk_widget_set_visible(self->record_box, FALSE);
    gtk_widget_remove_css_class(self->record_button, "destructive-action");
    RecBuf *b = self->rec;
    g_debug("recording stopped: %" G_GINT64_FORMAT " samples", b->n); /* for the UI tests */
    if (b->n == 0) {
        if (transcribe) /* not while the pane goes */
            toast(self, _("Nothing was recorded"));
        update_state(self);
        return;
    }
    g_autofree char *dir = recordings_dir();
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *stamp = g_date_time_format(now, "%Y-%m-%d %H-%M-%S");
    /* Translators: the file name of a recording; %s: its date and time */
    g_autofree char *name = g_strdup_printf(_("Recording %s.wav"), stamp);
    g_autofree char *path = g_build_filename(dir, name, NULL);
    rlx_error *err = NULL;
    if (g_mkdir_with_parents(dir, 0700) != 0)
        rlx_error_set(&err, RLX_ERR_IO, "%s: %s", dir, g_strerror(errno));
    else
        rlx_audio_write_wav(path, b->x, b->n, RLX_WHISPER_SAMPLE_RATE, &err);
    g_clear_pointer(&b->x, g_free);
    b->n = b->cap = 0;
    if (err) {
        g_autofree char *msg =
            g_strdup_printf(_("Cannot save the recording: %s"), rlx_error_message(err));
        toast_error(self, msg);
        rlx_error_free(err);
        update_state(self);
        return;
    }
    g_message("recording saved: %s", path); /* for the log */
    if (transcribe)
        start_transcription(self, path);
    update_state(self);
}

static void record_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(w);
    if (self->capture) {
        finish_recording(self, TRUE);
        return;
    }
    if (self->run) {
        toast(self, _("A transcription is running; stop it first"));
        return;
    }
    stop_playback(self);
    rlx_audio_capture_params p = rlx_audio_capture_default_params();
    p.rate = RLX_WHISPER_SAMPLE_RATE;
    p.on_chunk = rec_chunk;
    p.user = self->rec;
    rlx_error *err = NULL;
    if (rlx_audio_capture_start(&p, &self->capture, &err) != RLX_OK) {
        self->capture = NULL;
        g_autofree char *msg = g_strdup_printf(_("Cannot record: %s"), rlx_error_message(err));
        toast_error(self, msg);
        rlx_error_free(err);
        update_state(self);
        return;
    }
    g_debug("recording"); /* for the UI tests */
    gtk_label_set_text(self->record_label, "0:00");
    gtk_level_bar_set_value(self->level_bar, 0);
    gtk_widget_set_visible(self->record_box, TRUE);
    gtk_widget_add_css_class(self->record_button, "destructive-action");
    self->rec_start_us = g_get_monotonic_time();
    self->rec_tick = g_timeout_add(100, rec_tick_cb, self);
    update_state(self);
}

/* Escape: what is under way stops (a recording is then transcribed). */
static void escape_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(w);
    if (self->capture) {
        finish_recording(self, TRUE);
    } else if (self->playback || self->play_load) {
        stop_playback(self);
        update_state(self);
    } else if (self->run) {
        gtk_widget_activate_action(w, "transcribe.stop", NULL);
    }
}

/* ---- setup ------------------------------------------------------------------------ */

void rlx_transcribe_pane_setup(RlxTranscribePane *self, GSettings *settings)
{
    g_return_if_fail(RLX_IS_TRANSCRIBE_PANE(self));
    if (settings) {
        self->settings = g_object_ref(settings);
        g_autofree char *model = g_settings_get_string(settings, "whisper-model");
        if (*model)
            self->model = g_steal_pointer(&model);
        g_autofree char *lang = g_settings_get_string(settings, "whisper-language");
        self->language = language_index(lang);
        self->translate = g_settings_get_boolean(settings, "whisper-translate");
    }
    sync_options(self);
    load_transcripts(self);
    /* The newest transcript, as the Chat page opens on the newest conversation. */
    if (self->transcripts->len)
        show_transcript(self, g_ptr_array_index(self->transcripts, 0));
    rebuild_sidebar(self);
    update_state(self);
}

/* The page's keys (Escape, Ctrl+O, Ctrl+E) work once it is shown: the focus
 * moves into it when it was left behind on another page. */
static gboolean focus_idle(gpointer data)
{
    RlxTranscribePane *self = data;
    GtkRoot *root = gtk_widget_get_root(GTK_WIDGET(self));
    GtkWidget *focus = root ? gtk_root_get_focus(root) : NULL;
    if (gtk_widget_get_mapped(GTK_WIDGET(self)) &&
        (!focus || !gtk_widget_is_ancestor(focus, GTK_WIDGET(self))) &&
        !gtk_widget_child_focus(GTK_WIDGET(self->content_stack), GTK_DIR_TAB_FORWARD))
        gtk_widget_child_focus(GTK_WIDGET(self), GTK_DIR_TAB_FORWARD);
    return G_SOURCE_REMOVE;
}

static void rlx_transcribe_pane_map(GtkWidget *widget)
{
    GTK_WIDGET_CLASS(rlx_transcribe_pane_parent_class)->map(widget);
    rlx_toasts_flush(&RLX_TRANSCRIBE_PANE(widget)->toasts);
    g_debug("transcribe page shown"); /* for the UI tests */
    g_idle_add_full(G_PRIORITY_DEFAULT_IDLE, focus_idle, g_object_ref(widget), g_object_unref);
}

static void rlx_transcribe_pane_dispose(GObject *object)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(object);
    /* A recording under way is kept as a file, not transcribed. */
    finish_recording(self, FALSE);
    drop_play_cache(self);
    if (self->transcriber) {
        g_signal_handlers_disconnect_by_data(self->transcriber, self);
        /* Joins the worker thread; what is on screen was saved already. */
        g_clear_object(&self->transcriber);
    }
    if (self->run) {
        /* Quitting mid-way: it shows as stopped next time. */
        self->run->state = ST_STOPPED;
        if (self->run->segs->len)
            transcript_save(self, self->run);
        else if (self->run->saved_once)
            rlx_transcript_delete_file(self->run);
        run_ended(self);
    }
    g_clear_object(&self->settings);
    gtk_widget_dispose_template(GTK_WIDGET(object), RLX_TYPE_TRANSCRIBE_PANE);
    G_OBJECT_CLASS(rlx_transcribe_pane_parent_class)->dispose(object);
}

static void rlx_transcribe_pane_finalize(GObject *object)
{
    RlxTranscribePane *self = RLX_TRANSCRIBE_PANE(object);
    rlx_toasts_clear(&self->toasts);
    g_ptr_array_unref(self->transcripts);
    g_free(self->model);
    g_free(self->pending_audio);
    g_mutex_clear(&self->rec->lock);
    g_free(self->rec->x);
    g_free(self->rec);
    G_OBJECT_CLASS(rlx_transcribe_pane_parent_class)->finalize(object);
}

static void rlx_transcribe_pane_class_init(RlxTranscribePaneClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    object_class->dispose = rlx_transcribe_pane_dispose;
    object_class->finalize = rlx_transcribe_pane_finalize;
    widget_class->map = rlx_transcribe_pane_map;
    pane_signal_memory = g_signal_new("memory", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                      NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);

    gtk_widget_class_set_layout_manager_type(widget_class, GTK_TYPE_BIN_LAYOUT);
    gtk_widget_class_set_template_from_resource(widget_class,
                                                "/org/rlx/Studio/rlx-transcribe-pane.ui");
#define BIND(name) gtk_widget_class_bind_template_child(widget_class, RlxTranscribePane, name)
    BIND(flap);
    BIND(sidebar_button);
    BIND(transcript_list);
    BIND(segment_list);
    BIND(title_label);
    BIND(details_label);
    BIND(progress_label);
    BIND(record_label);
    BIND(progress_box);
    BIND(record_box);
    BIND(record_button);
    BIND(options_button);
    BIND(export_button);
    BIND(resume_button);
    BIND(progress_bar);
    BIND(level_bar);
    BIND(toast_overlay);
    BIND(content_stack);
    BIND(empty_page);
    BIND(scroller);
    BIND(empty_options);
    BIND(popover_options);
#undef BIND

    gtk_widget_class_install_action(widget_class, "transcribe.open", NULL, open_action);
    gtk_widget_class_install_action(widget_class, "transcribe.new", NULL, new_action);
    gtk_widget_class_install_action(widget_class, "transcribe.record", NULL, record_action);
    gtk_widget_class_install_action(widget_class, "transcribe.stop", NULL, stop_action);
    gtk_widget_class_install_action(widget_class, "transcribe.escape", NULL, escape_action);
    gtk_widget_class_install_action(widget_class, "transcribe.resume", NULL, resume_action);
    gtk_widget_class_install_action(widget_class, "transcribe.copy", NULL, copy_action);
    gtk_widget_class_install_action(widget_class, "transcribe.export", "s", export_action);
    gtk_widget_class_install_action(widget_class, "transcribe.delete", NULL, delete_action);
    gtk_widget_class_install_action(widget_class, "transcribe.export-menu", NULL,
                                    export_menu_action);
    gtk_widget_class_install_action(widget_class, "transcribe.model-file", NULL, model_file_action);
    gtk_widget_class_install_action(widget_class, "transcribe.model-folder", NULL,
                                    model_folder_action);
}

static void scroller_upper_changed(GtkAdjustment *adj, GParamSpec *ps, RlxTranscribePane *self)
{
    if (self->follow)
        gtk_adjustment_set_value(adj, gtk_adjustment_get_upper(adj));
}

static void scroller_value_changed(GtkAdjustment *adj, RlxTranscribePane *self)
{
    double end = gtk_adjustment_get_upper(adj) - gtk_adjustment_get_page_size(adj);
    self->follow = gtk_adjustment_get_value(adj) >= end - 4;
}

static void rlx_transcribe_pane_init(RlxTranscribePane *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
    /* The page's keys, wherever the focus is in the window (rlx-keys.h): a
     * transcript shown anew (a recording's, when it stops) drops the focus
     * with the rows it had, and Escape must still stop what runs. */
    static const RlxKey keys[] = {
        {GDK_KEY_Escape, 0, "transcribe.escape"},
        {GDK_KEY_r, GDK_CONTROL_MASK, "transcribe.record"},
        {GDK_KEY_o, GDK_CONTROL_MASK, "transcribe.open"},
        {GDK_KEY_C, GDK_CONTROL_MASK | GDK_SHIFT_MASK, "transcribe.copy"},
        {GDK_KEY_e, GDK_CONTROL_MASK, "transcribe.export-menu"},
    };
    rlx_keys_global(GTK_WIDGET(self), keys, G_N_ELEMENTS(keys));
    rlx_toasts_init(&self->toasts, self->toast_overlay, GTK_WIDGET(self));
    self->rec = g_new0(RecBuf, 1);
    g_mutex_init(&self->rec->lock);
    self->playing_index = -1;
    self->transcripts = g_ptr_array_new_with_free_func((GDestroyNotify)rlx_transcript_free);
    g_object_bind_property(self->flap, "reveal-flap", self->sidebar_button, "active",
                           G_BINDING_BIDIRECTIONAL | G_BINDING_SYNC_CREATE);
    build_options(self, &self->opts[0], self->empty_options);
    build_options(self, &self->opts[1], self->popover_options);

    self->placeholder = GTK_LABEL(gtk_label_new(NULL));
    gtk_label_set_wrap(self->placeholder, TRUE);
    gtk_widget_set_margin_top(GTK_WIDGET(self->placeholder), 24);
    gtk_widget_set_margin_bottom(GTK_WIDGET(self->placeholder), 24);
    gtk_widget_set_margin_start(GTK_WIDGET(self->placeholder), 12);
    gtk_widget_set_margin_end(GTK_WIDGET(self->placeholder), 12);
    gtk_widget_add_css_class(GTK_WIDGET(self->placeholder), "dim-label");
    gtk_list_box_set_placeholder(self->segment_list, GTK_WIDGET(self->placeholder));
    gtk_list_box_set_selection_mode(self->segment_list, GTK_SELECTION_SINGLE);
    g_signal_connect(self->segment_list, "row-activated", G_CALLBACK(segment_activated), self);
    g_signal_connect(self->transcript_list, "row-selected", G_CALLBACK(transcript_selected), self);

    GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment(self->scroller);
    self->follow = TRUE;
    g_signal_connect(adj, "notify::upper", G_CALLBACK(scroller_upper_changed), self);
    g_signal_connect(adj, "notify::page-size", G_CALLBACK(scroller_upper_changed), self);
    g_signal_connect(adj, "value-changed", G_CALLBACK(scroller_value_changed), self);

    self->transcriber = rlx_transcriber_new();
    g_signal_connect(self->transcriber, "loading", G_CALLBACK(on_loading), self);
    g_signal_connect(self->transcriber, "started", G_CALLBACK(on_started), self);
    g_signal_connect(self->transcriber, "language", G_CALLBACK(on_language), self);
    g_signal_connect(self->transcriber, "segment", G_CALLBACK(on_segment), self);
    g_signal_connect(self->transcriber, "progress", G_CALLBACK(on_progress), self);
    g_signal_connect(self->transcriber, "finished", G_CALLBACK(on_finished), self);
    g_signal_connect(self->transcriber, "memory", G_CALLBACK(on_memory), self);

    GtkDropTarget *drop = gtk_drop_target_new(G_TYPE_INVALID, GDK_ACTION_COPY);
    GType types[] = {GDK_TYPE_FILE_LIST, G_TYPE_FILE};
    gtk_drop_target_set_gtypes(drop, types, G_N_ELEMENTS(types));
    g_signal_connect(drop, "drop", G_CALLBACK(on_drop), self);
    gtk_widget_add_controller(GTK_WIDGET(self), GTK_EVENT_CONTROLLER(drop));
    update_state(self);
}
