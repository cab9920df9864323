#include "rlx-chat-pane.h"
#include "rlx-keys.h"
#include "rlx-toasts.h"

#include "rlx-failure.h"
#include "rlx-json.h"
#include "rlx-markdown.h"
#include "rlx-sampling-popover.h"

#include "backends/base/status.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <json-c/json.h>

typedef struct {
    char *role;
    char *content;
    gsize alloc;     /* bytes allocated for content while it grows; 0: not known */
    gsize len;       /* strlen(content) while alloc */
    GtkWidget *body; /* while shown */
    /* A reply that reasoned first (<think>…</think>): the tokens up to the
     * end of its reasoning and the time from its first token to there; 0
     * when not known (saved before these were kept). */
    int think_tokens;
    gint64 think_ms;
    guint64 serial; /* names it to a save that completes later */
    /* Bytes of content known to be on disk, while content may be ahead of the
     * file (a streaming reply, until its last save completes); -1 otherwise.
     * Only that much is ever shown, so a crash loses nothing seen. */
    gssize saved;
} Msg;

typedef struct {
    char *id;
    char *title;
    char *system;
    char *model;
    gboolean title_set; /* renamed by the user: no longer taken from the first message */
    gint64 created, updated;
    GPtrArray *msgs;     /* Msg * */
    RlxFailure *failure; /* the last reply's, until the next one starts; not saved */
} Conv;

struct _RlxChatPane {
    GtkWidget parent_instance;

    AdwFlap *flap;
    GtkToggleButton *sidebar_button;
    GtkSearchEntry *search;
    GtkListBox *conv_list;
    GtkLabel *model_label, *model_details, *stats_label;
    GtkTextView *system_view;
    GtkPopover *system_popover;
    RlxSamplingPopover *sampling_popover;
    GtkMenuButton *sampling_button;
    GtkProgressBar *load_bar, *loading_bar;
    AdwStatusPage *loading_page, *ready_page;
    AdwToastOverlay *toast_overlay;
    GtkStack *content_stack, *send_stack;
    GtkScrolledWindow *scroller;
    GtkBox *messages;
    GtkEntry *input;

    RlxEngine *engine;
    GSettings *settings; /* nullable */
    char *model_path;    /* the last one asked for */

    GPtrArray *convs; /* Conv *, newest first */
    Conv *current;

    Conv *stream_conv; /* the conversation a reply streams into */
    Msg *stream_msg;
    int stream_tokens;      /* the reply's tokens so far */
    int stream_renders;     /* times it was shown so far */
    char *stats_due;        /* the footer's figures, shown with the reply's next showing */
    gint64 stream_asked_us; /* monotonic time the reply was asked for */
    gint64 stream_first_us; /* ... of its first text; 0 before */
    double stream_cpu0;     /* the main thread's CPU seconds then */
    int stream_logged;      /* tokens at the last "stream:" debug line */
    gboolean stopping;      /* Stop was asked; the engine has not answered yet */
    guint render_tick;      /* a frame-clock callback that shows the reply */
    guint render_wait;      /* a timeout before the next one may be asked */
    gint64 render_start_us; /* when the last one began; 0: none yet */
    double render_cpu0;     /* the main thread's CPU seconds then */
    int render_tokens0;     /* the reply's tokens then */
    gboolean follow;        /* the view stays at the end as the text grows */
    GHashTable *culled;     /* GtkWidget * (a reference) drawn at opacity 0: off screen */
    GdkFrameClock *cull_clock;
    gulong cull_handler;
    GCancellable *stop;
    guint save_source; /* the streaming reply's next save */
    gboolean loading;
    double load_fraction; /* the last fraction the engine reported */
    RlxToasts toasts;

    /* Conversation files are written by one worker at a time, in order. */
    struct Saver *saver;
    GQueue saves; /* SaveJob *, not started yet */
    gboolean save_running, save_failed;
};

G_DEFINE_FINAL_TYPE(RlxChatPane, rlx_chat_pane, GTK_TYPE_WIDGET)

/* A streaming reply is saved at most this often, and shown when saved. */
#define SAVE_INTERVAL_MS 80

/* ---- helpers ---------------------------------------------------------------- */

/* The toasts show over the conversation, never over the message entry
 * (ui/rlx-toasts.h: one at a time, Details for a long one). */
static void toast_full(RlxChatPane *self, const char *text, AdwToastPriority priority)
{
    rlx_toasts_show(&self->toasts, text, priority, NULL, NULL);
}

static void toast(RlxChatPane *self, const char *text)
{
    toast_full(self, text, ADW_TOAST_PRIORITY_NORMAL);
}

/* An error shows at once, ahead of a notice such as "… is ready". */
static void toast_error(RlxChatPane *self, const char *text)
{
    toast_full(self, text, ADW_TOAST_PRIORITY_HIGH);
}

static char *conversations_dir(void)
{
    return g_build_filename(g_get_user_data_dir(), "rlx-studio", "conversations", NULL);
}

static void msg_free(Msg *m)
{
    g_free(m->role);
    g_free(m->content);
    g_free(m);
}

static Msg *msg_new(const char *role, const char *content)
{
    static guint64 serials;
    Msg *m = g_new0(Msg, 1);
    m->serial = ++serials;
    m->saved = -1;
    m->role = g_strdup(role);
    m->content = g_strdup(content ? content : "");
    return m;
}

/* Appends in amortized constant time: a reply grows a piece at a time. */
static void msg_append(Msg *m, const char *text)
{
    gsize n = strlen(text);
    if (!m->alloc) {
        m->len = strlen(m->content);
        m->alloc = m->len + 1;
    }
    if (m->len + n + 1 > m->alloc) {
        m->alloc = MAX(m->alloc * 2, m->len + n + 1);
        m->content = g_realloc(m->content, m->alloc);
    }
    memcpy(m->content + m->len, text, n + 1);
    m->len += n;
}

static gsize msg_len(const Msg *m)
{
    return m->alloc ? m->len : strlen(m->content);
}

static void conv_free(Conv *c)
{
    rlx_failure_free(c->failure);
    g_free(c->id);
    g_free(c->title);
    g_free(c->system);
    g_free(c->model);
    g_ptr_array_unref(c->msgs);
    g_free(c);
}

static Conv *conv_new(void)
{
    Conv *c = g_new0(Conv, 1);
    c->id = g_uuid_string_random();
    c->title = g_strdup(_("New Conversation"));
    c->system = g_strdup("");
    c->created = c->updated = g_get_real_time() / 1000000;
    c->msgs = g_ptr_array_new_with_free_func((GDestroyNotify)msg_free);
    return c;
}

static json_object *conv_to_json(const Conv *c)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "version", json_object_new_int(1));
    json_object_object_add(o, "id", json_object_new_string(c->id));
    json_object_object_add(o, "title", json_object_new_string(c->title));
    json_object_object_add(o, "title_set", json_object_new_boolean(c->title_set));
    json_object_object_add(o, "system", json_object_new_string(c->system ? c->system : ""));
    if (c->model)
        json_object_object_add(o, "model", json_object_new_string(c->model));
    json_object_object_add(o, "created", json_object_new_int64(c->created));
    json_object_object_add(o, "updated", json_object_new_int64(c->updated));
    json_object *arr = json_object_new_array();
    for (guint i = 0; i < c->msgs->len; i++) {
        const Msg *m = g_ptr_array_index(c->msgs, i);
        json_object *mo = json_object_new_object();
        json_object_object_add(mo, "role", json_object_new_string(m->role));
        json_object_object_add(mo, "content", json_object_new_string(m->content));
        if (m->think_tokens > 0)
            json_object_object_add(mo, "thinking_tokens", json_object_new_int(m->think_tokens));
        if (m->think_ms > 0)
            json_object_object_add(mo, "thinking_ms", json_object_new_int64(m->think_ms));
        json_object_array_add(arr, mo);
    }
    json_object_object_add(o, "messages", arr);
    return o;
}

static Conv *conv_from_json(json_object *o)
{
    if (!json_object_is_type(o, json_type_object) || !rlx_json_str(o, "id"))
        return NULL;
    Conv *c = g_new0(Conv, 1);
    c->id = g_strdup(rlx_json_str(o, "id"));
    c->title = g_strdup(rlx_json_str(o, "title") ? rlx_json_str(o, "title") : _("Conversation"));
    c->system = g_strdup(rlx_json_str(o, "system") ? rlx_json_str(o, "system") : "");
    c->model = g_strdup(rlx_json_str(o, "model"));
    json_object *v = NULL;
    /* Absent in files written before the flag: a title taken from the first message. */
    if (json_object_object_get_ex(o, "title_set", &v) && json_object_is_type(v, json_type_boolean))
        c->title_set = json_object_get_boolean(v);
    if (json_object_object_get_ex(o, "created", &v))
        c->created = json_object_get_int64(v);
    if (json_object_object_get_ex(o, "updated", &v))
        c->updated = json_object_get_int64(v);
    c->msgs = g_ptr_array_new_with_free_func((GDestroyNotify)msg_free);
    if (json_object_object_get_ex(o, "messages", &v) && json_object_is_type(v, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            json_object *mo = json_object_array_get_idx(v, i);
            if (!rlx_json_str(mo, "role"))
                continue;
            Msg *m = msg_new(rlx_json_str(mo, "role"), rlx_json_str(mo, "content"));
            json_object *t = NULL;
            if (json_object_object_get_ex(mo, "thinking_tokens", &t))
                m->think_tokens = json_object_get_int(t);
            if (json_object_object_get_ex(mo, "thinking_ms", &t))
                m->think_ms = json_object_get_int64(t);
            g_ptr_array_add(c->msgs, m);
        }
    }
    return c;
}

static char *conv_path(const Conv *c)
{
    g_autofree char *dir = conversations_dir();
    g_autofree char *name = g_strconcat(c->id, ".json", NULL);
    return g_build_filename(dir, name, NULL);
}

/* ---- saving ------------------------------------------------------------- */

/* Conversations are serialized on the main thread and written (temp file +
 * rename, by g_file_set_contents) by a GTask worker, one write at a time in
 * the order asked; a write waiting for its turn takes in a newer text of the
 * same file. A streaming reply is shown only as far as a completed write
 * holds it, so kill -9 never loses text that was on screen. */

typedef struct Saver {
    gatomicrefcount ref;
    GMutex lock;
    GCond cond;
    gboolean busy;     /* a worker is writing; under lock */
    RlxChatPane *pane; /* main thread only; NULL once the pane is gone */
} Saver;

typedef struct {
    guint64 serial; /* a message that may be ahead of the file */
    gsize len;      /* bytes of it this write holds */
} SavedPart;

typedef struct {
    Saver *saver;
    char *path;
    char *text; /* NULL: delete the file */
    char *conv_id;
    GArray *parts; /* SavedPart */
    GError *error;
} SaveJob;

static Saver *saver_ref(Saver *s)
{
    g_atomic_ref_count_inc(&s->ref);
    return s;
}

static void saver_unref(Saver *s)
{
    if (!g_atomic_ref_count_dec(&s->ref))
        return;
    g_mutex_clear(&s->lock);
    g_cond_clear(&s->cond);
    g_free(s);
}

static void save_job_free(SaveJob *j)
{
    g_free(j->path);
    g_free(j->text);
    g_free(j->conv_id);
    g_array_unref(j->parts);
    g_clear_error(&j->error);
    g_free(j);
}

static gboolean save_job_write(SaveJob *j, GError **error)
{
    if (!j->text) {
        if (g_unlink(j->path) != 0 && errno != ENOENT) {
            int e = errno;
            g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s", j->path,
                        g_strerror(e));
            return FALSE;
        }
        return TRUE;
    }
    g_autofree char *dir = g_path_get_dirname(j->path);
    if (g_mkdir_with_parents(dir, 0700) != 0) {
        int e = errno;
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s", dir, g_strerror(e));
        return FALSE;
    }
    /* g_file_set_contents writes a temporary file and renames it over the old one. */
    return g_file_set_contents(j->path, j->text, -1, error);
}

static void save_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    SaveJob *j = data;
    save_job_write(j, &j->error);
    Saver *s = j->saver;
    g_mutex_lock(&s->lock);
    s->busy = FALSE;
    g_cond_broadcast(&s->cond);
    g_mutex_unlock(&s->lock);
    g_task_return_boolean(task, TRUE);
}

static void msg_render(RlxChatPane *self, Msg *m);
static void queue_render(RlxChatPane *self);
static void saves_next(RlxChatPane *self);
static gboolean scroll_idle(gpointer data);

static Msg *find_msg(RlxChatPane *self, const char *conv_id, guint64 serial)
{
    for (guint i = 0; i < self->convs->len; i++) {
        Conv *c = g_ptr_array_index(self->convs, i);
        if (strcmp(c->id, conv_id) != 0)
            continue;
        for (guint k = c->msgs->len; k-- > 0;) {
            Msg *m = g_ptr_array_index(c->msgs, k);
            if (m->serial == serial)
                return m;
        }
        return NULL;
    }
    return NULL;
}

static void save_done(RlxChatPane *self, SaveJob *j)
{
    if (j->error) {
        /* Once per run of failures, not every 80 ms. */
        if (!self->save_failed) {
            g_autofree char *msg =
                g_strdup_printf(_("Cannot save the conversation: %s"), j->error->message);
            toast_error(self, msg);
        }
        self->save_failed = TRUE;
    } else {
        self->save_failed = FALSE;
    }
    /* A failed write shows the text all the same: hiding it would not save it. */
    for (guint i = 0; i < j->parts->len; i++) {
        const SavedPart *p = &g_array_index(j->parts, SavedPart, i);
        Msg *m = find_msg(self, j->conv_id, p->serial);
        if (!m || m->saved < 0)
            continue;
        gboolean more = (gsize)m->saved < p->len;
        if (more)
            m->saved = (gssize)p->len;
        if (m != self->stream_msg && (gsize)m->saved == msg_len(m))
            m->saved = -1; /* finished and all on disk */
        if (more && m->body) {
            if (m == self->stream_msg)
                queue_render(self); /* at the next frame, with whatever came by then */
            else
                msg_render(self, m);
        }
    }
}

static void save_task_done(GObject *source, GAsyncResult *res, gpointer data)
{
    Saver *s = data;
    RlxChatPane *self = s->pane;
    if (self) {
        self->save_running = FALSE;
        save_done(self, g_task_get_task_data(G_TASK(res)));
        saves_next(self);
    }
    saver_unref(s);
}

static void saves_next(RlxChatPane *self)
{
    if (self->save_running || g_queue_is_empty(&self->saves))
        return;
    SaveJob *j = g_queue_pop_head(&self->saves);
    self->save_running = TRUE;
    g_mutex_lock(&self->saver->lock);
    self->saver->busy = TRUE;
    g_mutex_unlock(&self->saver->lock);
    GTask *t = g_task_new(NULL, NULL, save_task_done, saver_ref(self->saver));
    g_task_set_task_data(t, j, (GDestroyNotify)save_job_free);
    g_task_run_in_thread(t, save_thread);
    g_object_unref(t);
}

static void queue_save(RlxChatPane *self, SaveJob *j)
{
    j->saver = self->saver;
    for (GList *l = self->saves.head; l; l = l->next) {
        SaveJob *q = l->data;
        if (strcmp(q->path, j->path) != 0)
            continue;
        /* Not started yet: the newer text takes its place in the line. */
        l->data = j;
        save_job_free(q);
        saves_next(self);
        return;
    }
    g_queue_push_tail(&self->saves, j);
    saves_next(self);
}

/* Waits for the write under way and writes what is left here (the pane goes). */
static void saves_flush(RlxChatPane *self)
{
    if (!self->saver)
        return;
    g_mutex_lock(&self->saver->lock);
    while (self->saver->busy)
        g_cond_wait(&self->saver->cond, &self->saver->lock);
    g_mutex_unlock(&self->saver->lock);
    for (SaveJob *j; (j = g_queue_pop_head(&self->saves));) {
        g_autoptr(GError) error = NULL;
        if (!save_job_write(j, &error))
            g_warning("Cannot save the conversation: %s", error->message);
        save_job_free(j);
    }
}

static void conv_save(RlxChatPane *self, Conv *c)
{
    json_object *o = conv_to_json(c);
    SaveJob *j = g_new0(SaveJob, 1);
    j->path = conv_path(c);
    j->text = g_strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    j->conv_id = g_strdup(c->id);
    j->parts = g_array_new(FALSE, FALSE, sizeof(SavedPart));
    for (guint i = 0; i < c->msgs->len; i++) {
        const Msg *m = g_ptr_array_index(c->msgs, i);
        if (m->saved >= 0) {
            SavedPart p = {.serial = m->serial, .len = msg_len(m)};
            g_array_append_val(j->parts, p);
        }
    }
    queue_save(self, j);
}

static void conv_delete_file(RlxChatPane *self, Conv *c)
{
    SaveJob *j = g_new0(SaveJob, 1);
    j->path = conv_path(c);
    j->conv_id = g_strdup(c->id);
    j->parts = g_array_new(FALSE, FALSE, sizeof(SavedPart));
    queue_save(self, j);
}

static gint conv_newest_first(gconstpointer a, gconstpointer b)
{
    const Conv *x = *(Conv *const *)a, *y = *(Conv *const *)b;
    return (x->updated < y->updated) - (x->updated > y->updated);
}

static void load_conversations(RlxChatPane *self)
{
    g_autofree char *dir = conversations_dir();
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        if (!g_str_has_suffix(name, ".json"))
            continue;
        g_autofree char *path = g_build_filename(dir, name, NULL);
        json_object *o = json_object_from_file(path);
        Conv *c = o ? conv_from_json(o) : NULL;
        if (o)
            json_object_put(o);
        if (c)
            g_ptr_array_add(self->convs, c);
        else
            g_warning("%s is not a conversation; left alone", path);
    }
    g_ptr_array_sort(self->convs, conv_newest_first);
}

/* ---- sampling ------------------------------------------------------------- */

static RlxSampling current_sampling(RlxChatPane *self)
{
    RlxSampling s = rlx_sampling_default();
    if (!self->settings)
        return s;
    s.temperature = g_settings_get_double(self->settings, "temperature");
    s.top_k = g_settings_get_int(self->settings, "top-k");
    s.top_p = g_settings_get_double(self->settings, "top-p");
    s.min_p = g_settings_get_double(self->settings, "min-p");
    s.repeat_penalty = g_settings_get_double(self->settings, "repeat-penalty");
    s.seed = g_settings_get_int64(self->settings, "seed");
    s.max_tokens = g_settings_get_int(self->settings, "max-tokens");
    s.thinking = g_settings_get_boolean(self->settings, "thinking");
    return s;
}

static RlxLoadParams current_load_params(RlxChatPane *self)
{
    RlxLoadParams p = {0};
    if (!self->settings)
        return p;
    g_autofree char *dev = g_settings_get_string(self->settings, "device");
    p.device = *dev ? g_steal_pointer(&dev) : NULL;
    p.budget = (uint64_t)g_settings_get_int(self->settings, "memory-budget-mib") << 20;
    p.n_ctx = g_settings_get_int(self->settings, "context-length");
    p.n_threads = g_settings_get_int(self->settings, "threads");
    return p;
}

/* ---- thinking ---------------------------------------------------------------- */

static gboolean blank_text(const char *t, gsize n)
{
    for (gsize i = 0; i < n; i++)
        if (!g_ascii_isspace(t[i]))
            return FALSE;
    return TRUE;
}

#define THINK_OPEN  "<think>"
#define THINK_CLOSE "</think>"

/* Where a reply's reasoning and answer are in its first n bytes. The
 * reasoning is what follows a leading <think> up to </think> (all of the
 * text while it is still open), or, for templates that open the tag in the
 * prompt themselves, everything before a </think>. */
typedef struct {
    gboolean has;   /* there is a reasoning section */
    gboolean open;  /* ... still being written */
    gsize from, to; /* the reasoning */
    gsize answer;   /* where the answer starts */
    gboolean hold;  /* the text so far may be the start of the tag: show nothing yet */
} Thinking;

static Thinking split_thinking(const char *t, gsize n)
{
    Thinking k = {.answer = 0};
    gsize w = 0;
    while (w < n && g_ascii_isspace(t[w]))
        w++;
    gsize rest = n - w;
    if (rest < strlen(THINK_OPEN) && strncmp(t + w, THINK_OPEN, rest) == 0 && rest > 0) {
        k.hold = TRUE;
        k.answer = n;
        return k;
    }
    const char *close = NULL;
    if (rest >= strlen(THINK_OPEN) && strncmp(t + w, THINK_OPEN, strlen(THINK_OPEN)) == 0) {
        k.has = TRUE;
        k.from = w + strlen(THINK_OPEN);
        close = g_strstr_len(t + k.from, (gssize)(n - k.from), THINK_CLOSE);
        if (!close) {
            k.open = TRUE;
            k.to = k.answer = n;
            return k;
        }
    } else {
        close = g_strstr_len(t, (gssize)n, THINK_CLOSE);
        if (!close)
            return k;
        k.has = TRUE;
        k.from = 0;
    }
    k.to = (gsize)(close - t);
    k.answer = k.to + strlen(THINK_CLOSE);
    while (k.answer < n && g_ascii_isspace(t[k.answer]))
        k.answer++;
    return k;
}

/* ---- messages ------------------------------------------------------------- */

static void update_state(RlxChatPane *self);

static int msg_index(Conv *c, Msg *m)
{
    for (guint i = 0; c && i < c->msgs->len; i++)
        if (g_ptr_array_index(c->msgs, i) == m)
            return (int)i;
    return -1;
}

static void copy_message(GtkButton *b, RlxChatPane *self)
{
    Msg *m = g_object_get_data(G_OBJECT(b), "msg");
    if (msg_index(self->current, m) < 0)
        return;
    /* The answer, without the reasoning before it. */
    Thinking k =
        g_strcmp0(m->role, "user") == 0 ? (Thinking){0} : split_thinking(m->content, msg_len(m));
    gdk_clipboard_set_text(gtk_widget_get_clipboard(GTK_WIDGET(b)),
                           k.has ? m->content + k.answer : m->content);
}

static void rebuild_messages(RlxChatPane *self);

static void edit_message(GtkButton *b, RlxChatPane *self)
{
    Msg *m = g_object_get_data(G_OBJECT(b), "msg");
    int i = msg_index(self->current, m);
    if (i < 0 || self->stream_msg)
        return;
    /* The message and everything after it go; the text comes back for editing. */
    gtk_editable_set_text(GTK_EDITABLE(self->input), m->content);
    g_clear_pointer(&self->current->failure, rlx_failure_free);
    g_ptr_array_remove_range(self->current->msgs, (guint)i, self->current->msgs->len - (guint)i);
    conv_save(self, self->current);
    rebuild_messages(self);
    gtk_widget_grab_focus(GTK_WIDGET(self->input));
    gtk_editable_set_position(GTK_EDITABLE(self->input), -1);
}

/* What a message shows, kept on its body widget (and freed with it). */
typedef struct {
    GtkWidget *think; /* the expander, hidden without reasoning */
    GtkLabel *think_title;
    GtkBox *think_box, *answer_box;
    RlxMarkdownStream *think_md, *answer_md;
} MsgView;

static void msg_view_free(MsgView *v)
{
    rlx_markdown_stream_free(v->think_md);
    rlx_markdown_stream_free(v->answer_md);
    g_free(v);
}

static char *thinking_title(const Msg *m, gboolean open, int tokens_so_far)
{
    GString *s = g_string_new(open ? _("Thinking…") : _("Thinking"));
    int tokens = open ? tokens_so_far : m->think_tokens;
    if (tokens > 0) {
        g_string_append(s, " · ");
        /* Translators: after "Thinking", the reasoning's length */
        g_string_append_printf(s, ngettext("%d token", "%d tokens", tokens), tokens);
    }
    if (!open && m->think_ms > 0) {
        g_string_append(s, " · ");
        /* Translators: after "Thinking", how long it took, in seconds */
        g_string_append_printf(s, _("%.1f s"), (double)m->think_ms / 1000.0);
    }
    return g_string_free(s, FALSE);
}

/* A reply still ahead of its file shows only what the file holds. */
static void msg_render(RlxChatPane *self, Msg *m)
{
    if (!m->body)
        return;
    MsgView *v = g_object_get_data(G_OBJECT(m->body), "rlx-view");
    gsize n = m->saved < 0 ? msg_len(m) : (gsize)m->saved;
    const char *t = m->content;
    gboolean user = g_strcmp0(m->role, "user") == 0;
    Thinking k = user ? (Thinking){0} : split_thinking(t, n);
    gboolean think_shown = k.has && !blank_text(t + k.from, k.to - k.from);
    gboolean live = m == self->stream_msg;
    rlx_markdown_stream_set_live(v->think_md, live);
    rlx_markdown_stream_set_live(v->answer_md, live);
    gtk_widget_set_visible(v->think, think_shown);
    if (think_shown) {
        rlx_markdown_stream_update(v->think_md, t + k.from, k.to - k.from);
        g_autofree char *title =
            thinking_title(m, k.open, m == self->stream_msg ? self->stream_tokens : 0);
        gtk_label_set_text(v->think_title, title);
        if (!k.open && m != self->stream_msg)
            g_debug("thinking shown: %s", title); /* for the UI tests */
    }
    if (k.hold)
        rlx_markdown_stream_update(v->answer_md, "", 0);
    else if (k.has)
        rlx_markdown_stream_update(v->answer_md, t + k.answer, n - k.answer);
    else
        rlx_markdown_stream_update(v->answer_md, t, n);
    if (m->saved < 0)
        return;
    /* For the UI tests (G_MESSAGES_DEBUG=RlxStudio): what is on screen. */
    gsize from = n > 32 ? n - 32 : 0;
    g_autofree char *end = g_strndup(t + from, n - from);
    g_autofree char *tail = g_strescape(end, NULL);
    g_debug("reply shown: %" G_GSIZE_FORMAT " bytes ending \"%s\"", n, tail);
}

static void add_message_widget(RlxChatPane *self, Msg *m)
{
    gboolean user = g_strcmp0(m->role, "user") == 0;
    GtkWidget *card = gtk_box_new(GTK_ORIENTATION_VERTICAL, 4);
    gtk_widget_add_css_class(card, "rlx-message");
    gtk_widget_add_css_class(card, user ? "rlx-user" : "rlx-assistant");

    GtkWidget *header = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 2);
    GtkWidget *who = gtk_label_new(user ? _("You") : _("Assistant"));
    gtk_widget_add_css_class(who, "heading");
    gtk_widget_set_hexpand(who, TRUE);
    gtk_label_set_xalign(GTK_LABEL(who), 0);
    gtk_box_append(GTK_BOX(header), who);
    if (user) {
        GtkWidget *edit = gtk_button_new_from_icon_name("document-edit-symbolic");
        gtk_widget_set_tooltip_text(edit, _("Edit and Resend"));
        gtk_widget_add_css_class(edit, "flat");
        g_object_set_data(G_OBJECT(edit), "msg", m);
        g_signal_connect(edit, "clicked", G_CALLBACK(edit_message), self);
        gtk_box_append(GTK_BOX(header), edit);
    }
    GtkWidget *copy = gtk_button_new_from_icon_name("edit-copy-symbolic");
    gtk_widget_set_tooltip_text(copy, _("Copy Message"));
    gtk_widget_add_css_class(copy, "flat");
    g_object_set_data(G_OBJECT(copy), "msg", m);
    g_signal_connect(copy, "clicked", G_CALLBACK(copy_message), self);
    gtk_box_append(GTK_BOX(header), copy);

    GtkWidget *body = gtk_box_new(GTK_ORIENTATION_VERTICAL, 8);
    MsgView *v = g_new0(MsgView, 1);
    GtkWidget *title = gtk_label_new(NULL);
    gtk_label_set_xalign(GTK_LABEL(title), 0);
    gtk_widget_add_css_class(title, "dim-label");
    v->think_title = GTK_LABEL(title);
    v->think_box = GTK_BOX(gtk_box_new(GTK_ORIENTATION_VERTICAL, 8));
    gtk_widget_add_css_class(GTK_WIDGET(v->think_box), "rlx-thinking");
    gtk_widget_set_margin_start(GTK_WIDGET(v->think_box), 12);
    gtk_widget_set_margin_top(GTK_WIDGET(v->think_box), 6);
    v->think = gtk_expander_new(NULL);
    gtk_expander_set_label_widget(GTK_EXPANDER(v->think), title);
    gtk_expander_set_child(GTK_EXPANDER(v->think), GTK_WIDGET(v->think_box));
    gtk_widget_add_css_class(v->think, "rlx-thinking-section");
    gtk_widget_set_visible(v->think, FALSE);
    v->answer_box = GTK_BOX(gtk_box_new(GTK_ORIENTATION_VERTICAL, 8));
    v->think_md = rlx_markdown_stream_new(v->think_box);
    v->answer_md = rlx_markdown_stream_new(v->answer_box);
    gtk_box_append(GTK_BOX(body), v->think);
    gtk_box_append(GTK_BOX(body), GTK_WIDGET(v->answer_box));
    g_object_set_data_full(G_OBJECT(body), "rlx-view", v, (GDestroyNotify)msg_view_free);
    m->body = body;
    msg_render(self, m);
    gtk_box_append(GTK_BOX(card), header);
    gtk_box_append(GTK_BOX(card), body);
    gtk_box_append(self->messages, card);
}

/* ---- failures ---------------------------------------------------------------- */

static void retry_clicked(GtkButton *b, RlxChatPane *self)
{
    gtk_widget_activate_action(GTK_WIDGET(self), "chat.retry", NULL);
}

static void use_cpu_clicked(GtkButton *b, RlxChatPane *self)
{
    if (self->settings)
        /* the window reloads the model on the new device (its "changed::device") */
        g_settings_set_string(self->settings, "device", "cpu");
}

static void add_failure_widget(RlxChatPane *self, const RlxFailure *f)
{
    GtkWidget *card = gtk_box_new(GTK_ORIENTATION_VERTICAL, 6);
    gtk_widget_add_css_class(card, "card");
    gtk_widget_add_css_class(card, "rlx-failure");

    GtkWidget *top = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    GtkWidget *icon = gtk_image_new_from_icon_name("dialog-warning-symbolic");
    gtk_widget_add_css_class(icon, "warning");
    GtkWidget *heading = gtk_label_new(f->heading);
    gtk_widget_add_css_class(heading, "heading");
    gtk_label_set_xalign(GTK_LABEL(heading), 0);
    gtk_label_set_wrap(GTK_LABEL(heading), TRUE);
    gtk_box_append(GTK_BOX(top), icon);
    gtk_box_append(GTK_BOX(top), heading);
    gtk_box_append(GTK_BOX(card), top);

    GtkWidget *sentence = gtk_label_new(f->sentence);
    gtk_label_set_wrap(GTK_LABEL(sentence), TRUE);
    gtk_label_set_xalign(GTK_LABEL(sentence), 0);
    gtk_box_append(GTK_BOX(card), sentence);
    GtkWidget *advice = gtk_label_new(f->advice);
    gtk_label_set_wrap(GTK_LABEL(advice), TRUE);
    gtk_label_set_xalign(GTK_LABEL(advice), 0);
    gtk_widget_add_css_class(advice, "dim-label");
    gtk_box_append(GTK_BOX(card), advice);

    GtkWidget *buttons = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    gtk_widget_set_margin_top(buttons, 4);
    GtkWidget *retry = gtk_button_new_with_mnemonic(_("_Retry"));
    gtk_widget_add_css_class(retry, "suggested-action");
    g_signal_connect(retry, "clicked", G_CALLBACK(retry_clicked), self);
    gtk_box_append(GTK_BOX(buttons), retry);
    if (f->offer_cpu && self->settings) {
        GtkWidget *cpu = gtk_button_new_with_mnemonic(_("Use the _CPU"));
        g_signal_connect(cpu, "clicked", G_CALLBACK(use_cpu_clicked), self);
        gtk_box_append(GTK_BOX(buttons), cpu);
    }
    gtk_box_append(GTK_BOX(card), buttons);

    if (f->details && *f->details) {
        GtkWidget *details = gtk_label_new(f->details);
        gtk_label_set_wrap(GTK_LABEL(details), TRUE);
        gtk_label_set_wrap_mode(GTK_LABEL(details), PANGO_WRAP_WORD_CHAR);
        gtk_label_set_selectable(GTK_LABEL(details), TRUE);
        gtk_label_set_xalign(GTK_LABEL(details), 0);
        gtk_widget_add_css_class(details, "monospace");
        gtk_widget_add_css_class(details, "caption");
        gtk_widget_set_margin_top(details, 4);
        GtkWidget *exp = gtk_expander_new(_("Details for a bug report"));
        gtk_expander_set_child(GTK_EXPANDER(exp), details);
        gtk_box_append(GTK_BOX(card), exp);
    }
    GtkWidget *pad = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0);
    gtk_widget_add_css_class(pad, "card");
    gtk_widget_remove_css_class(card, "card");
    gtk_widget_set_margin_start(card, 12);
    gtk_widget_set_margin_end(card, 12);
    gtk_widget_set_margin_top(card, 10);
    gtk_widget_set_margin_bottom(card, 12);
    gtk_box_append(GTK_BOX(pad), card);
    gtk_box_append(self->messages, pad);
}

static void scroll_to_end(RlxChatPane *self)
{
    GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment(self->scroller);
    gtk_adjustment_set_value(adj, gtk_adjustment_get_upper(adj));
}

static gboolean scroll_idle(gpointer data)
{
    scroll_to_end(data);
    return G_SOURCE_REMOVE;
}

static void rebuild_messages(RlxChatPane *self)
{
    GtkWidget *child;
    while ((child = gtk_widget_get_first_child(GTK_WIDGET(self->messages))))
        gtk_box_remove(self->messages, child);
    for (guint i = 0; self->current && i < self->current->msgs->len; i++)
        add_message_widget(self, g_ptr_array_index(self->current->msgs, i));
    if (self->current && self->current->failure)
        add_failure_widget(self, self->current->failure);
    self->follow = TRUE;
    g_idle_add_full(G_PRIORITY_LOW, scroll_idle, g_object_ref(self), g_object_unref);
    update_state(self);
}

/* ---- sidebar ---------------------------------------------------------------- */

static void rebuild_sidebar(RlxChatPane *self)
{
    /* A row that had the focus is replaced: the focus goes to the new
     * selected row, not back to the first button of the window. */
    GtkRoot *root = gtk_widget_get_root(GTK_WIDGET(self));
    GtkWidget *focus = root ? gtk_root_get_focus(root) : NULL;
    gboolean had_focus = focus && gtk_widget_is_ancestor(focus, GTK_WIDGET(self->conv_list));
    GtkWidget *child;
    while ((child = gtk_widget_get_first_child(GTK_WIDGET(self->conv_list))))
        gtk_list_box_remove(self->conv_list, child);
    for (guint i = 0; i < self->convs->len; i++) {
        Conv *c = g_ptr_array_index(self->convs, i);
        GtkWidget *label = gtk_label_new(c->title);
        gtk_label_set_xalign(GTK_LABEL(label), 0);
        gtk_label_set_ellipsize(GTK_LABEL(label), PANGO_ELLIPSIZE_END);
        GtkWidget *row = gtk_list_box_row_new();
        gtk_list_box_row_set_child(GTK_LIST_BOX_ROW(row), label);
        g_object_set_data(G_OBJECT(row), "conv", c);
        gtk_list_box_append(self->conv_list, row);
        if (c == self->current)
            gtk_list_box_select_row(self->conv_list, GTK_LIST_BOX_ROW(row));
    }
    GtkListBoxRow *selected = gtk_list_box_get_selected_row(self->conv_list);
    if (had_focus)
        gtk_widget_grab_focus(selected ? GTK_WIDGET(selected) : GTK_WIDGET(self->input));
}

static void show_conversation(RlxChatPane *self, Conv *c)
{
    if (self->current) {
        /* Keep what was typed as the system prompt of the one we leave. */
        for (guint i = 0; i < self->current->msgs->len; i++)
            ((Msg *)g_ptr_array_index(self->current->msgs, i))->body = NULL;
    }
    self->current = c;
    gtk_text_buffer_set_text(gtk_text_view_get_buffer(self->system_view), c->system, -1);
    rebuild_messages(self);
}

static void row_selected(GtkListBox *box, GtkListBoxRow *row, RlxChatPane *self)
{
    Conv *c = row ? g_object_get_data(G_OBJECT(row), "conv") : NULL;
    if (c && c != self->current) {
        show_conversation(self, c);
        /* Narrow: the sidebar covers the chat; get out of the way once chosen. */
        if (adw_flap_get_folded(self->flap))
            adw_flap_set_reveal_flap(self->flap, FALSE);
    }
}

static gboolean conv_matches(Conv *c, const char *needle)
{
    g_autofree char *t = g_utf8_casefold(c->title, -1);
    if (strstr(t, needle))
        return TRUE;
    for (guint i = 0; i < c->msgs->len; i++) {
        g_autofree char *m = g_utf8_casefold(((Msg *)g_ptr_array_index(c->msgs, i))->content, -1);
        if (strstr(m, needle))
            return TRUE;
    }
    return FALSE;
}

static gboolean filter_row(GtkListBoxRow *row, gpointer user_data)
{
    RlxChatPane *self = user_data;
    const char *text = gtk_editable_get_text(GTK_EDITABLE(self->search));
    if (!text || !*text)
        return TRUE;
    g_autofree char *needle = g_utf8_casefold(text, -1);
    return conv_matches(g_object_get_data(G_OBJECT(row), "conv"), needle);
}

static void search_changed(GtkSearchEntry *e, RlxChatPane *self)
{
    gtk_list_box_invalidate_filter(self->conv_list);
}

/* Enter in the search: open the first conversation that matches, and move
 * the focus to its row (Delete and F2 then act on it). */
static void search_activated(GtkSearchEntry *e, RlxChatPane *self)
{
    for (GtkWidget *row = gtk_widget_get_first_child(GTK_WIDGET(self->conv_list)); row;
         row = gtk_widget_get_next_sibling(row)) {
        if (!GTK_IS_LIST_BOX_ROW(row) || !filter_row(GTK_LIST_BOX_ROW(row), self))
            continue;
        gtk_list_box_select_row(self->conv_list, GTK_LIST_BOX_ROW(row));
        gtk_widget_grab_focus(row);
        return;
    }
}

/* Escape in the search: clear it and go back to the message entry. */
static void search_stopped(GtkSearchEntry *e, RlxChatPane *self)
{
    gtk_editable_set_text(GTK_EDITABLE(e), "");
    gtk_widget_grab_focus(GTK_WIDGET(self->input));
}

static void search_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    adw_flap_set_reveal_flap(self->flap, TRUE);
    gtk_widget_grab_focus(GTK_WIDGET(self->search));
}

/* ---- state ------------------------------------------------------------------ */

static void update_state(RlxChatPane *self)
{
    gboolean streaming = self->stream_msg != NULL;
    gboolean have_model = self->engine && rlx_engine_get_model_info(self->engine) != NULL;
    gboolean have_msgs = self->current && self->current->msgs->len > 0;
    gtk_stack_set_visible_child_name(self->send_stack, streaming ? "stop" : "send");
    /* One state at a time: the conversation; a model loading (with its
     * progress); a model ready for an empty conversation (what to do); or
     * no model at all. A conversation keeps its place while a model loads,
     * with the loading line above it. */
    gtk_stack_set_visible_child_name(self->content_stack, have_msgs       ? "chat"
                                                          : self->loading ? "loading"
                                                          : have_model    ? "ready"
                                                                          : "empty");
    gtk_widget_set_visible(GTK_WIDGET(self->load_bar), self->loading && have_msgs);
    if (have_model && !self->loading) {
        const RlxModelInfo *i = rlx_engine_get_model_info(self->engine);
        g_autofree char *dev = rlx_device_phrase(i->device);
        adw_status_page_set_title(self->ready_page, i->name);
        /* Translators: the empty conversation; %d is the context length, %s the device
         * ("the CPU") */
        g_autofree char *what = g_strdup_printf(
            _("%d tokens of context, on %s. Type a message below and press Enter."), i->n_ctx, dev);
        adw_status_page_set_description(self->ready_page, what);
    }
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "chat.stop", streaming && !self->stopping);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "chat.send", !streaming && !self->loading);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "chat.regenerate",
                                  !streaming && !self->loading && have_msgs);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "chat.open", !streaming);
}

static void start_reply(RlxChatPane *self)
{
    Conv *c = self->current;
    const RlxModelInfo *info = rlx_engine_get_model_info(self->engine);
    if (!info) {
        toast(self, _("Open a model first"));
        return;
    }
    guint n = c->msgs->len;
    g_autofree const char **roles = g_new0(const char *, n + 1);
    g_autofree const char **contents = g_new0(const char *, n + 1);
    for (guint i = 0; i < n; i++) {
        Msg *m = g_ptr_array_index(c->msgs, i);
        roles[i] = m->role;
        contents[i] = m->content;
    }
    RlxSampling s = current_sampling(self);
    g_clear_object(&self->stop);
    self->stop = g_cancellable_new();
    rlx_engine_chat(self->engine, c->system, roles, contents, n, &s, self->stop);
    if (c->failure) {
        g_clear_pointer(&c->failure, rlx_failure_free);
        rebuild_messages(self);
    }
    self->stream_tokens = 0;
    self->stream_renders = 0;
    self->stream_asked_us = g_get_monotonic_time();
    self->stream_first_us = 0;
    self->stream_logged = 0;
    self->stopping = FALSE;

    g_free(c->model);
    c->model = g_strdup(info->name);
    Msg *reply = msg_new("assistant", "");
    reply->saved = 0;
    g_ptr_array_add(c->msgs, reply);
    add_message_widget(self, reply);
    self->stream_conv = c;
    self->stream_msg = reply;
    /* Until the first token: the engine reads the prompt (a long one takes a while). */
    gtk_label_set_text(self->stats_label, _("Reading the conversation…"));
    self->follow = TRUE;
    update_state(self);
    g_idle_add_full(G_PRIORITY_LOW, scroll_idle, g_object_ref(self), g_object_unref);
}

static void move_to_top(RlxChatPane *self, Conv *c)
{
    c->updated = g_get_real_time() / 1000000;
    if (self->convs->len && g_ptr_array_index(self->convs, 0) == c)
        return;
    guint i = 0;
    if (g_ptr_array_find(self->convs, c, &i))
        g_ptr_array_steal_index(self->convs, i);
    g_ptr_array_insert(self->convs, 0, c);
    rebuild_sidebar(self);
}

static void send_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    g_autofree char *text = g_strstrip(g_strdup(gtk_editable_get_text(GTK_EDITABLE(self->input))));
    if (!*text || self->stream_msg)
        return;
    if (!rlx_engine_get_model_info(self->engine)) {
        toast(self, self->loading ? _("The model is still loading") : _("Open a model first"));
        return;
    }
    Conv *c = self->current;
    if (c->msgs->len == 0 && !c->title_set) {
        g_autofree char *one_line = g_strdup(text);
        g_strdelimit(one_line, "\n\r\t", ' ');
        g_free(c->title);
        c->title = g_utf8_substring(one_line, 0, MIN(g_utf8_strlen(one_line, -1), 48));
    }
    if (c->failure) {
        g_clear_pointer(&c->failure, rlx_failure_free);
        rebuild_messages(self);
    }
    Msg *m = msg_new("user", text);
    g_ptr_array_add(c->msgs, m);
    add_message_widget(self, m);
    gtk_editable_set_text(GTK_EDITABLE(self->input), "");
    move_to_top(self, c);
    rebuild_sidebar(self);
    conv_save(self, c); /* the user's words are safe before anything runs */
    start_reply(self);
}

static void stop_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    if (!self->stream_msg || self->stopping)
        return;
    /* Said at once: on a slow device the engine answers after its current step. */
    self->stopping = TRUE;
    gtk_label_set_text(self->stats_label, _("Stopping…"));
    update_state(self);
    if (self->stop)
        g_cancellable_cancel(self->stop);
}

static void regenerate_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    Conv *c = self->current;
    if (self->stream_msg || !c || !c->msgs->len)
        return;
    Msg *last = g_ptr_array_index(c->msgs, c->msgs->len - 1);
    if (g_strcmp0(last->role, "assistant") == 0) {
        g_ptr_array_remove_index(c->msgs, c->msgs->len - 1);
        rebuild_messages(self);
    }
    start_reply(self);
}

/* The failure card's button: the same as Regenerate (a partial reply goes). */
static void retry_action(GtkWidget *w, const char *name, GVariant *param)
{
    gtk_widget_activate_action(w, "chat.regenerate", NULL);
}

static void new_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    if (self->current && self->current->msgs->len == 0) {
        gtk_widget_grab_focus(GTK_WIDGET(self->input));
        return; /* already an empty one */
    }
    Conv *c = conv_new();
    g_ptr_array_insert(self->convs, 0, c);
    show_conversation(self, c);
    rebuild_sidebar(self);
    gtk_widget_grab_focus(GTK_WIDGET(self->input));
}

static void delete_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    Conv *c = self->current;
    if (!c || c == self->stream_conv)
        return;
    conv_delete_file(self, c);
    self->current = NULL;
    g_ptr_array_remove(self->convs, c); /* frees it */
    if (!self->convs->len)
        g_ptr_array_add(self->convs, conv_new());
    show_conversation(self, g_ptr_array_index(self->convs, 0));
    rebuild_sidebar(self);
    toast(self, _("Conversation deleted"));
}

static void rename_response(AdwMessageDialog *d, const char *response, RlxChatPane *self)
{
    if (g_strcmp0(response, "rename") != 0)
        return;
    GtkEditable *e = GTK_EDITABLE(adw_message_dialog_get_extra_child(d));
    const char *text = gtk_editable_get_text(e);
    Conv *c = g_object_get_data(G_OBJECT(d), "conv");
    if (!text || !*text || !g_ptr_array_find(self->convs, c, NULL))
        return;
    g_free(c->title);
    c->title = g_strdup(text);
    c->title_set = TRUE;
    conv_save(self, c);
    rebuild_sidebar(self);
}

static void rename_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    if (!self->current)
        return;
    GtkWidget *entry = gtk_entry_new();
    gtk_editable_set_text(GTK_EDITABLE(entry), self->current->title);
    gtk_entry_set_activates_default(GTK_ENTRY(entry), TRUE);
    GtkWidget *d =
        adw_message_dialog_new(GTK_WINDOW(gtk_widget_get_root(w)), _("Rename Conversation"), NULL);
    gtk_window_set_title(GTK_WINDOW(d), _("Rename Conversation")); /* for window lists */
    adw_message_dialog_add_responses(ADW_MESSAGE_DIALOG(d), "cancel", _("_Cancel"), "rename",
                                     _("_Rename"), NULL);
    adw_message_dialog_set_response_appearance(ADW_MESSAGE_DIALOG(d), "rename",
                                               ADW_RESPONSE_SUGGESTED);
    adw_message_dialog_set_default_response(ADW_MESSAGE_DIALOG(d), "rename");
    adw_message_dialog_set_close_response(ADW_MESSAGE_DIALOG(d), "cancel");
    adw_message_dialog_set_extra_child(ADW_MESSAGE_DIALOG(d), entry);
    g_object_set_data(G_OBJECT(d), "conv", self->current);
    g_signal_connect_object(d, "response", G_CALLBACK(rename_response), self, 0);
    gtk_window_present(GTK_WINDOW(d));
    gtk_widget_grab_focus(entry); /* selects the old title: typing replaces it */
}

static char *conv_markdown(const Conv *c)
{
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "# %s\n\n", c->title);
    if (c->system && *c->system)
        /* Translators: in a conversation exported as Markdown, before the system prompt */
        g_string_append_printf(s, "**%s** %s\n\n", _("System:"), c->system);
    for (guint i = 0; i < c->msgs->len; i++) {
        const Msg *m = g_ptr_array_index(c->msgs, i);
        g_string_append_printf(s, "## %s\n\n%s\n\n",
                               g_strcmp0(m->role, "user") == 0 ? _("You") : _("Assistant"),
                               m->content);
    }
    return g_string_free(s, FALSE);
}

static void export_response(GtkNativeDialog *d, int response, RlxChatPane *self)
{
    if (response == GTK_RESPONSE_ACCEPT && self->current) {
        g_autoptr(GFile) file = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(d));
        g_autofree char *path = g_file_get_path(file);
        gboolean json = GPOINTER_TO_INT(g_object_get_data(G_OBJECT(d), "json"));
        g_autofree char *text = NULL;
        if (json) {
            json_object *o = conv_to_json(self->current);
            text = g_strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
            json_object_put(o);
        } else {
            text = conv_markdown(self->current);
        }
        g_autoptr(GError) error = NULL;
        if (!path || !g_file_set_contents(path, text, -1, &error)) {
            g_autofree char *msg = g_strdup_printf(_("Cannot export: %s"),
                                                   error ? error->message : _("not a local file"));
            toast_error(self, msg);
        } else {
            toast(self, _("Conversation exported"));
        }
    }
    gtk_native_dialog_destroy(d);
    g_object_unref(d);
}

static void export_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    gboolean json = g_strcmp0(g_variant_get_string(param, NULL), "json") == 0;
    if (!self->current)
        return;
    GtkFileChooserNative *d = gtk_file_chooser_native_new(
        json ? _("Export as JSON") : _("Export as Markdown"), GTK_WINDOW(gtk_widget_get_root(w)),
        GTK_FILE_CHOOSER_ACTION_SAVE, _("_Export"), _("_Cancel"));
    g_autofree char *name_hint = g_strconcat(self->current->title, json ? ".json" : ".md", NULL);
    g_strdelimit(name_hint, "/\\", '-');
    gtk_file_chooser_set_current_name(GTK_FILE_CHOOSER(d), name_hint);
    g_object_set_data(G_OBJECT(d), "json", GINT_TO_POINTER(json));
    g_signal_connect(d, "response", G_CALLBACK(export_response), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(d));
}

/* ---- model ------------------------------------------------------------------- */

static void show_load_start(RlxChatPane *self);

void rlx_chat_pane_open_model(RlxChatPane *self, GFile *file)
{
    g_return_if_fail(RLX_IS_CHAT_PANE(self));
    g_autofree char *path = g_file_get_path(file);
    if (!path) {
        toast_error(self, _("Only local files can be opened"));
        return;
    }
    if (self->stream_msg && self->stop)
        g_cancellable_cancel(self->stop);
    g_free(self->model_path);
    self->model_path = g_strdup(path);
    rlx_chat_pane_reload_model(self);
}

void rlx_chat_pane_reload_model(RlxChatPane *self)
{
    g_return_if_fail(RLX_IS_CHAT_PANE(self));
    if (!self->model_path)
        return;
    RlxLoadParams p = current_load_params(self);
    self->loading = TRUE;
    g_autofree char *base = g_path_get_basename(self->model_path);
    g_autofree char *text = g_strdup_printf(_("Loading %s…"), base);
    gtk_progress_bar_set_fraction(self->load_bar, 0);
    gtk_progress_bar_set_text(self->load_bar, text);
    gtk_progress_bar_set_fraction(self->loading_bar, 0);
    show_load_start(self);
    gtk_label_set_text(self->model_details, text);
    adw_status_page_set_title(self->loading_page, text);
    adw_status_page_set_description(self->loading_page, NULL);
    rlx_engine_load_model(self->engine, self->model_path, &p);
    g_free(p.device);
    update_state(self);
}

static void open_response(GtkNativeDialog *d, int response, RlxChatPane *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) file = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(d));
        rlx_chat_pane_open_model(self, file);
    }
    gtk_native_dialog_destroy(d);
    g_object_unref(d);
}

static void open_action(GtkWidget *w, const char *name, GVariant *param)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    GtkFileChooserNative *d =
        gtk_file_chooser_native_new(_("Open a Model"), GTK_WINDOW(gtk_widget_get_root(w)),
                                    GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"), _("_Cancel"));
    GtkFileFilter *f = gtk_file_filter_new();
    gtk_file_filter_set_name(f, _("GGUF models"));
    gtk_file_filter_add_pattern(f, "*.gguf");
    gtk_file_filter_add_pattern(f, "*.GGUF");
    gtk_file_chooser_add_filter(GTK_FILE_CHOOSER(d), f);
    g_object_unref(f);
    g_signal_connect(d, "response", G_CALLBACK(open_response), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(d));
}

/* ---- engine signals ------------------------------------------------------------ */

/* Before the engine can say how far it got (it reads the file and the
 * tokenizer first), the bar says so in words. Not a pulsing bar: its
 * animation asks for a frame 60 times a second, which on a slow renderer
 * starved the engine's events (idle priority) and took CPU from the load. */
static void show_load_start(RlxChatPane *self)
{
    self->load_fraction = 0;
    gtk_progress_bar_set_text(self->loading_bar, _("Reading the file…"));
}

static void on_load_progress(RlxEngine *e, const char *stage, double fraction, RlxChatPane *self)
{
    self->load_fraction = CLAMP(fraction, 0, 1);
    if (self->load_fraction <= 0)
        return;
    gtk_progress_bar_set_fraction(self->load_bar, self->load_fraction);
    gtk_progress_bar_set_fraction(self->loading_bar, self->load_fraction);
    /* Translators: loading a model: the weights, then how far in percent */
    g_autofree char *text =
        g_strdup_printf(_("Loading the weights… %d %%"), (int)(self->load_fraction * 100 + 0.5));
    gtk_progress_bar_set_text(self->loading_bar, text);
}

/* For the UI tests (G_MESSAGES_DEBUG=RlxStudio), once the page has been laid
 * out with a model: whether the sidebar folded away, whether the model's
 * name is drawn whole, and what the empty conversation says. */
static gboolean log_layout(gpointer data)
{
    RlxChatPane *self = data;
    PangoLayout *name = gtk_label_get_layout(self->model_label);
    g_debug("layout: %d px wide, sidebar %s, model name %s, empty page says \"%s\"",
            gtk_widget_get_width(GTK_WIDGET(self)),
            adw_flap_get_folded(self->flap)
                ? (adw_flap_get_reveal_flap(self->flap) ? "folded and shown" : "folded away")
                : "beside",
            pango_layout_is_ellipsized(name) ? "cut" : "whole",
            adw_status_page_get_description(self->ready_page));
    return G_SOURCE_REMOVE;
}

static void on_model_loaded(RlxEngine *e, RlxChatPane *self)
{
    const RlxModelInfo *i = rlx_engine_get_model_info(e);
    self->loading = FALSE;
    gtk_label_set_text(self->model_label, i->name);
    /* Translators: architecture · quantization · context length · device */
    g_autofree char *details =
        g_strdup_printf(_("%s · %s · %d tokens of context · %s%s"), i->arch, i->quant, i->n_ctx,
                        i->device, i->has_template ? "" : _(" · plain text"));
    gtk_label_set_text(self->model_details, details);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->model_label), i->path);
    rlx_sampling_popover_set_thinking_switch(self->sampling_popover, TRUE, i->thinking_switch);
    g_autofree char *msg = g_strdup_printf(_("%s is ready"), i->name);
    toast(self, msg);
    update_state(self);
    gtk_widget_grab_focus(GTK_WIDGET(self->input));
    g_timeout_add_full(G_PRIORITY_LOW, 500, log_layout, g_object_ref(self), g_object_unref);
}

/* The streaming reply is shown once per frame at most, with everything
 * that was written by then: however fast pieces arrive, the page lays out
 * and draws no more often than the screen shows it.
 *
 * Each showing costs the main thread about the same (the open piece of a
 * long paragraph is bounded by the live Markdown stream's soft cuts), but
 * the frame that follows it, the saves and the figures cost too. So the
 * next showing also waits until the main thread's CPU time since the last
 * one began is
 *  - at most RENDER_SHARE of the time passed, so that the engine, on the
 *    same cores, keeps its speed however fast it writes; and
 *  - at most RENDER_TOKEN_CPU per token that arrived meanwhile, so that the
 *    page's work follows the tokens: its CPU time per token stays the same
 *    along the reply, however the engine's speed changes with the context;
 *    but never longer than RENDER_MAX_WAIT_US, so that a slow device still
 *    shows its words a few times a second. */
#define RENDER_SHARE       0.1
#define RENDER_TOKEN_CPU   0.0012
#define RENDER_MAX_WAIT_US 400000

static double thread_cpu_seconds(void);

static void show_stats_due(RlxChatPane *self)
{
    if (!self->stats_due)
        return;
    gtk_label_set_text(self->stats_label, self->stats_due);
    g_clear_pointer(&self->stats_due, g_free);
}

static gboolean render_tick(GtkWidget *w, GdkFrameClock *clock, gpointer data)
{
    RlxChatPane *self = RLX_CHAT_PANE(w);
    self->render_tick = 0;
    if (!self->stream_msg)
        return G_SOURCE_REMOVE;
    self->render_start_us = g_get_monotonic_time();
    self->render_cpu0 = thread_cpu_seconds();
    self->render_tokens0 = self->stream_tokens;
    self->stream_renders++;
    msg_render(self, self->stream_msg);
    show_stats_due(self);
    return G_SOURCE_REMOVE;
}

static void queue_render(RlxChatPane *self);

static gboolean render_waited(gpointer data)
{
    RlxChatPane *self = data;
    self->render_wait = 0;
    queue_render(self);
    return G_SOURCE_REMOVE;
}

static void queue_render(RlxChatPane *self)
{
    if (self->render_tick)
        return; /* one is due; it shows whatever came by then */
    g_clear_handle_id(&self->render_wait, g_source_remove); /* more came: decide again */
    gint64 wait = 0;
    if (self->render_start_us) {
        double spent = thread_cpu_seconds() - self->render_cpu0;
        gint64 next = self->render_start_us + (gint64)(spent / RENDER_SHARE * 1e6);
        if (spent > (self->stream_tokens - self->render_tokens0) * RENDER_TOKEN_CPU)
            next = MAX(next, self->render_start_us + RENDER_MAX_WAIT_US);
        wait = next - g_get_monotonic_time();
    }
    if (wait > 1000)
        self->render_wait = g_timeout_add((guint)(wait / 1000), render_waited, self);
    else
        self->render_tick = gtk_widget_add_tick_callback(GTK_WIDGET(self), render_tick, NULL, NULL);
}

static void cancel_render(RlxChatPane *self)
{
    if (self->render_tick) {
        gtk_widget_remove_tick_callback(GTK_WIDGET(self), self->render_tick);
        self->render_tick = 0;
    }
    g_clear_handle_id(&self->render_wait, g_source_remove);
    self->render_start_us = 0;
}

static gboolean save_stream(gpointer data)
{
    RlxChatPane *self = data;
    self->save_source = 0;
    if (self->stream_conv)
        conv_save(self, self->stream_conv); /* shown when written */
    return G_SOURCE_REMOVE;
}

static double thread_cpu_seconds(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* For tools/bench-chat-stream.py (G_MESSAGES_DEBUG=RlxStudio): the reply's
 * tokens as the page received them, and the main thread's CPU time. */
static void log_stream(RlxChatPane *self, const char *what)
{
    g_debug("stream %s: %d tokens, %.4f s since the first, main thread %.4f s CPU, %d showings",
            what, self->stream_tokens,
            (double)(g_get_monotonic_time() - self->stream_first_us) / 1e6,
            thread_cpu_seconds() - self->stream_cpu0, self->stream_renders);
    self->stream_logged = self->stream_tokens;
}

static void on_tokens(RlxEngine *e, const char *text, int n, RlxChatPane *self)
{
    Msg *m = self->stream_msg;
    if (!m)
        return;
    gint64 now = g_get_monotonic_time();
    if (!self->stream_first_us) {
        self->stream_first_us = now;
        self->stream_cpu0 = thread_cpu_seconds();
        if (!self->stopping)
            gtk_label_set_text(self->stats_label, _("Writing…"));
    }
    gsize before = msg_len(m);
    msg_append(m, text);
    self->stream_tokens = n;
    if (m->think_tokens == 0) {
        /* The engine ends a batch right after the tag: n counts the reasoning. */
        gsize from = before > strlen(THINK_CLOSE) ? before - strlen(THINK_CLOSE) : 0;
        if (g_strstr_len(m->content + from, (gssize)(m->len - from), THINK_CLOSE)) {
            /* From the question on, as the person waited for the answer. */
            m->think_tokens = n;
            m->think_ms = MAX(1, (now - self->stream_asked_us) / 1000);
        }
    }
    if (n - self->stream_logged >= 100)
        log_stream(self, "progress");
    if (!self->save_source)
        self->save_source = g_timeout_add(SAVE_INTERVAL_MS, save_stream, self);
}

static void on_stats(RlxEngine *e, double tps, int used, int size, RlxChatPane *self)
{
    if (self->stopping)
        return;
    /* The engine's rate is 0 until its second token; the page's own count
     * says how fast text arrives meanwhile. */
    if (tps <= 0 && self->stream_first_us && self->stream_tokens > 1) {
        double s = (double)(g_get_monotonic_time() - self->stream_first_us) / 1e6;
        tps = s > 0 ? (self->stream_tokens - 1) / s : 0;
    }
    char *t = tps > 0 ? g_strdup_printf(_("%.1f tokens/s · context %d / %d"), tps, used, size)
                      : g_strdup_printf(_("context %d / %d"), used, size);
    g_free(self->stats_due);
    self->stats_due = t;
    /* While a reply streams, the figures change in the frame that shows it:
     * a frame of their own, a few times a second, costs the main thread
     * about as much as a showing of the reply (on a software renderer). */
    if (!self->stream_msg || !self->stream_first_us)
        show_stats_due(self);
}

/* The footer's words for a reply on its way go when it ends. */
static void clear_waiting(RlxChatPane *self)
{
    const char *t = gtk_label_get_text(self->stats_label);
    if (g_strcmp0(t, _("Reading the conversation…")) == 0 || g_strcmp0(t, _("Writing…")) == 0 ||
        g_strcmp0(t, _("Stopping…")) == 0)
        gtk_label_set_text(self->stats_label, "");
}

static void on_finished(RlxEngine *e, int kind, const char *stop, RlxChatPane *self)
{
    if (kind == RLX_JOB_LOAD) {
        self->loading = FALSE;
        update_state(self);
        return;
    }
    if (!self->stream_msg)
        return;
    Conv *c = self->stream_conv;
    Msg *m = self->stream_msg;
    if (self->stream_first_us)
        log_stream(self, "finished");
    self->stream_msg = NULL;
    self->stream_conv = NULL;
    self->stopping = FALSE;
    g_clear_handle_id(&self->save_source, g_source_remove);
    cancel_render(self);
    show_stats_due(self); /* the reply's last figures */
    if (!*m->content && (c->failure || g_strcmp0(stop, "error") == 0)) {
        /* Nothing came: the failure card says why, an empty bubble would not. */
        g_ptr_array_remove(c->msgs, m);
        m = NULL;
    }
    if (c == self->current && (!m || c->failure))
        rebuild_messages(self);
    else if (m)
        msg_render(self, m); /* the thinking title's final figures */
    conv_save(self, c);      /* the rest of the reply shows once written */
    if (g_strcmp0(stop, "context") == 0 && !c->failure)
        toast_error(self, _("The context is full. Start a new conversation or raise the context "
                            "length in Preferences."));
    if (g_strcmp0(stop, "cancelled") == 0)
        gtk_label_set_text(self->stats_label, _("Stopped"));
    else
        clear_waiting(self);
    update_state(self);
}

/* The engine's sentence names the file by its full path, sometimes more than
 * once ("/a/x.gguf: /a/x.gguf: architecture 'llamx' is …"); the toast has
 * room for less: the leading copies go and any other becomes the base name. */
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

static void on_error(RlxEngine *e, int kind, const GError *error, RlxChatPane *self)
{
    if (kind == RLX_JOB_LOAD) {
        self->loading = FALSE;
        gtk_label_set_text(self->model_details,
                           _("Open a GGUF model with Ctrl+O, or drop one here"));
        g_autofree char *why = without_path(error->message, self->model_path);
        g_autofree char *msg = g_strdup_printf(_("Cannot load the model: %s"), why);
        toast_error(self, msg);
    } else if (self->stream_conv) {
        /* The card goes where the reply would be; on_finished (next) shows it. */
        const RlxModelInfo *info = rlx_engine_get_model_info(self->engine);
        Conv *c = self->stream_conv;
        rlx_failure_free(c->failure);
        c->failure = rlx_failure_describe(error, info ? info->device : NULL);
        g_message("reply failed: %s — %s (%s)", c->failure->heading, c->failure->sentence,
                  error->message);
        if (c != self->current)
            toast_error(self, c->failure->heading);
        clear_waiting(self);
    } else {
        toast_error(self, error->message);
    }
    update_state(self);
}

static void system_popover_closed(GtkPopover *p, RlxChatPane *self)
{
    if (!self->current)
        return;
    GtkTextBuffer *b = gtk_text_view_get_buffer(self->system_view);
    GtkTextIter s, e;
    gtk_text_buffer_get_bounds(b, &s, &e);
    g_autofree char *text = gtk_text_buffer_get_text(b, &s, &e, FALSE);
    if (g_strcmp0(text, self->current->system) == 0)
        return;
    g_free(self->current->system);
    self->current->system = g_steal_pointer(&text);
    if (self->current->msgs->len)
        conv_save(self, self->current);
}

/* ---- setup -------------------------------------------------------------------- */

void rlx_chat_pane_setup(RlxChatPane *self, RlxEngine *engine, GSettings *settings)
{
    g_return_if_fail(RLX_IS_CHAT_PANE(self));
    g_return_if_fail(!self->engine);
    self->engine = g_object_ref(engine);
    if (settings)
        self->settings = g_object_ref(settings);
    g_signal_connect_object(engine, "load-progress", G_CALLBACK(on_load_progress), self, 0);
    g_signal_connect_object(engine, "model-loaded", G_CALLBACK(on_model_loaded), self, 0);
    g_signal_connect_object(engine, "tokens", G_CALLBACK(on_tokens), self, 0);
    g_signal_connect_object(engine, "stats", G_CALLBACK(on_stats), self, 0);
    g_signal_connect_object(engine, "finished", G_CALLBACK(on_finished), self, 0);
    g_signal_connect_object(engine, "error", G_CALLBACK(on_error), self, 0);
    rlx_sampling_popover_bind(self->sampling_popover, self->settings);

    load_conversations(self);
    if (!self->convs->len)
        g_ptr_array_add(self->convs, conv_new());
    show_conversation(self, g_ptr_array_index(self->convs, 0));
    rebuild_sidebar(self);
    /* The window opens ready to type (and for the pane's shortcuts), not on
     * the header bar's first button. */
    gtk_widget_grab_focus(GTK_WIDGET(self->input));
}

static void entry_activated(GtkEntry *entry, RlxChatPane *self)
{
    gtk_widget_activate_action(GTK_WIDGET(self), "chat.send", NULL);
}

void rlx_chat_pane_show_sampling(RlxChatPane *self)
{
    g_return_if_fail(RLX_IS_CHAT_PANE(self));
    gtk_menu_button_popup(self->sampling_button);
}

static void cull_stop(RlxChatPane *self);

static void rlx_chat_pane_dispose(GObject *object)
{
    RlxChatPane *self = RLX_CHAT_PANE(object);
    /* A reply still streaming keeps what it has. */
    if (self->stream_conv)
        conv_save(self, self->stream_conv);
    self->stream_msg = NULL;
    self->stream_conv = NULL;
    saves_flush(self);
    if (self->saver) {
        self->saver->pane = NULL; /* a write that completes later finds no pane */
        g_clear_pointer(&self->saver, saver_unref);
    }
    if (self->stop)
        g_cancellable_cancel(self->stop);
    g_clear_object(&self->stop);
    g_clear_handle_id(&self->save_source, g_source_remove);
    cancel_render(self);
    show_stats_due(self); /* the reply's last figures */
    cull_stop(self);
    g_clear_object(&self->engine);
    g_clear_object(&self->settings);
    gtk_widget_dispose_template(GTK_WIDGET(object), RLX_TYPE_CHAT_PANE);
    G_OBJECT_CLASS(rlx_chat_pane_parent_class)->dispose(object);
}

/* ---- drawing only what is on screen ------------------------------------- */

/* GTK 4.8 draws every widget in the scrolled conversation each frame, and
 * its cairo renderer pays for each glyph even where the clip hides it: a
 * page's work per frame grew with the length of the conversation (a
 * 2,000-token reply cost a third more per showing at its end than at its
 * start). So after each layout the message cards, and the blocks of the
 * cards that straddle the view, that lie wholly outside it (by more than
 * CULL_MARGIN) are drawn at opacity 0 (which GTK skips entirely) and keep their place in the
 * layout; those that come near the view again are drawn as before. Only
 * boxes are descended into (cards, their bodies, a reply's blocks), not
 * the insides of library widgets. */
#define CULL_DEPTH 4
/* pixels beyond the view still drawn: the pass runs in the layout phase
 * of every frame, before that frame is drawn, so scrolling never shows a
 * culled widget; this only spares toggling at the edge */
#define CULL_MARGIN 64

static void cull_walk(GtkWidget *w, GtkWidget *view, double top, double bottom, GHashTable *now,
                      int depth)
{
    for (GtkWidget *c = gtk_widget_get_first_child(w); c; c = gtk_widget_get_next_sibling(c)) {
        graphene_rect_t r;
        if (!gtk_widget_get_visible(c) || !gtk_widget_compute_bounds(c, view, &r))
            continue;
        double y0 = r.origin.y, y1 = r.origin.y + r.size.height;
        if (y1 < top || y0 > bottom)
            g_hash_table_add(now, g_object_ref(c));
        else if ((y0 < top || y1 > bottom) && depth < CULL_DEPTH && GTK_IS_BOX(c))
            cull_walk(c, view, top, bottom, now, depth + 1);
    }
}

static void cull_offscreen(GdkFrameClock *clock, RlxChatPane *self)
{
    /* From where the widgets are allocated in the scrolled window (what this
     * frame draws), not from the adjustment: its value can run ahead of the
     * viewport's allocation within a frame (following the end as it grows). */
    GtkWidget *view = GTK_WIDGET(self->scroller);
    int height = gtk_widget_get_height(view);
    if (height <= 0)
        return;
    GHashTable *now = g_hash_table_new_full(NULL, NULL, g_object_unref, NULL);
    cull_walk(GTK_WIDGET(self->messages), view, -CULL_MARGIN, height + CULL_MARGIN, now, 0);
    GHashTableIter it;
    gpointer w;
    g_hash_table_iter_init(&it, self->culled);
    while (g_hash_table_iter_next(&it, &w, NULL))
        if (!g_hash_table_contains(now, w))
            gtk_widget_set_opacity(w, 1.0);
    g_hash_table_iter_init(&it, now);
    while (g_hash_table_iter_next(&it, &w, NULL))
        if (!g_hash_table_contains(self->culled, w))
            gtk_widget_set_opacity(w, 0.0);
    g_hash_table_unref(self->culled);
    self->culled = now;
}

static void cull_stop(RlxChatPane *self)
{
    if (self->cull_clock)
        g_signal_handler_disconnect(self->cull_clock, self->cull_handler);
    g_clear_object(&self->cull_clock);
    self->cull_handler = 0;
    /* everything drawn again, should the pane be shown elsewhere */
    GHashTableIter it;
    gpointer w;
    g_hash_table_iter_init(&it, self->culled);
    while (g_hash_table_iter_next(&it, &w, NULL))
        gtk_widget_set_opacity(w, 1.0);
    g_hash_table_remove_all(self->culled);
}

static void rlx_chat_pane_map(GtkWidget *widget)
{
    RlxChatPane *self = RLX_CHAT_PANE(widget);
    GTK_WIDGET_CLASS(rlx_chat_pane_parent_class)->map(widget);
    rlx_toasts_flush(&self->toasts);
    /* after GTK's own layout handler, which connected when the window was
     * realized: the allocations are this frame's */
    cull_stop(self);
    self->cull_clock = gtk_widget_get_frame_clock(widget);
    if (self->cull_clock) {
        g_object_ref(self->cull_clock);
        self->cull_handler =
            g_signal_connect(self->cull_clock, "layout", G_CALLBACK(cull_offscreen), self);
    }
}

static void rlx_chat_pane_unmap(GtkWidget *widget)
{
    cull_stop(RLX_CHAT_PANE(widget));
    GTK_WIDGET_CLASS(rlx_chat_pane_parent_class)->unmap(widget);
}

static void rlx_chat_pane_finalize(GObject *object)
{
    RlxChatPane *self = RLX_CHAT_PANE(object);
    rlx_toasts_clear(&self->toasts);
    g_ptr_array_unref(self->convs);
    g_hash_table_unref(self->culled);
    g_free(self->model_path);
    g_free(self->stats_due);
    G_OBJECT_CLASS(rlx_chat_pane_parent_class)->finalize(object);
}

static void rlx_chat_pane_class_init(RlxChatPaneClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    object_class->dispose = rlx_chat_pane_dispose;
    object_class->finalize = rlx_chat_pane_finalize;
    widget_class->map = rlx_chat_pane_map;
    widget_class->unmap = rlx_chat_pane_unmap;

    gtk_widget_class_set_layout_manager_type(widget_class, GTK_TYPE_BIN_LAYOUT);
    gtk_widget_class_set_template_from_resource(widget_class, "/org/rlx/Studio/rlx-chat-pane.ui");
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, flap);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, sidebar_button);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, search);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, conv_list);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, model_label);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, model_details);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, stats_label);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, system_view);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, system_popover);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, sampling_popover);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, sampling_button);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, load_bar);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, loading_bar);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, loading_page);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, ready_page);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, toast_overlay);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, content_stack);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, send_stack);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, scroller);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, messages);
    gtk_widget_class_bind_template_child(widget_class, RlxChatPane, input);

    gtk_widget_class_install_action(widget_class, "chat.new", NULL, new_action);
    gtk_widget_class_install_action(widget_class, "chat.open", NULL, open_action);
    gtk_widget_class_install_action(widget_class, "chat.send", NULL, send_action);
    gtk_widget_class_install_action(widget_class, "chat.stop", NULL, stop_action);
    gtk_widget_class_install_action(widget_class, "chat.regenerate", NULL, regenerate_action);
    gtk_widget_class_install_action(widget_class, "chat.retry", NULL, retry_action);
    gtk_widget_class_install_action(widget_class, "chat.rename", NULL, rename_action);
    gtk_widget_class_install_action(widget_class, "chat.delete", NULL, delete_action);
    gtk_widget_class_install_action(widget_class, "chat.export", "s", export_action);
    gtk_widget_class_install_action(widget_class, "chat.search", NULL, search_action);

    /* Escape, Ctrl+N, Ctrl+O, Ctrl+R and Ctrl+F: global shortcuts (init). */
    gtk_widget_class_add_binding_action(widget_class, GDK_KEY_F2, 0, "chat.rename", NULL);
    gtk_widget_class_add_binding_action(widget_class, GDK_KEY_E, GDK_CONTROL_MASK | GDK_SHIFT_MASK,
                                        "chat.export", "s", "md");
    gtk_widget_class_add_binding_action(widget_class, GDK_KEY_J, GDK_CONTROL_MASK | GDK_SHIFT_MASK,
                                        "chat.export", "s", "json");
}

/* The view follows the end of the conversation as it grows, unless the
 * person scrolled up to read. */
static void scroller_upper_changed(GtkAdjustment *adj, GParamSpec *ps, RlxChatPane *self)
{
    if (self->follow)
        gtk_adjustment_set_value(adj, gtk_adjustment_get_upper(adj));
}

static void scroller_value_changed(GtkAdjustment *adj, RlxChatPane *self)
{
    double end = gtk_adjustment_get_upper(adj) - gtk_adjustment_get_page_size(adj);
    self->follow = gtk_adjustment_get_value(adj) >= end - 4;
}

static void rlx_chat_pane_init(RlxChatPane *self)
{
    g_type_ensure(RLX_TYPE_SAMPLING_POPOVER);
    gtk_widget_init_template(GTK_WIDGET(self));
    rlx_toasts_init(&self->toasts, self->toast_overlay, GTK_WIDGET(self));
    g_queue_init(&self->saves);
    self->saver = g_new0(Saver, 1);
    g_atomic_ref_count_init(&self->saver->ref);
    g_mutex_init(&self->saver->lock);
    g_cond_init(&self->saver->cond);
    self->saver->pane = self;
    /* The flap's state leads: it folds and unfolds itself with the width. */
    g_object_bind_property(self->flap, "reveal-flap", self->sidebar_button, "active",
                           G_BINDING_BIDIRECTIONAL | G_BINDING_SYNC_CREATE);
    gtk_label_set_text(self->model_details, _("Open a GGUF model with Ctrl+O, or drop one here"));
    self->convs = g_ptr_array_new_with_free_func((GDestroyNotify)conv_free);
    self->culled = g_hash_table_new_full(NULL, NULL, g_object_unref, NULL);
    gtk_list_box_set_filter_func(self->conv_list, filter_row, self, NULL);
    g_signal_connect(self->conv_list, "row-selected", G_CALLBACK(row_selected), self);
    g_signal_connect(self->search, "search-changed", G_CALLBACK(search_changed), self);
    g_signal_connect(self->search, "activate", G_CALLBACK(search_activated), self);
    g_signal_connect(self->search, "stop-search", G_CALLBACK(search_stopped), self);
    /* Delete in the list of conversations (not in an entry) deletes the selected one. */
    GtkEventController *keys = gtk_shortcut_controller_new();
    gtk_shortcut_controller_add_shortcut(GTK_SHORTCUT_CONTROLLER(keys),
                                         gtk_shortcut_new(gtk_keyval_trigger_new(GDK_KEY_Delete, 0),
                                                          gtk_named_action_new("chat.delete")));
    gtk_widget_add_controller(GTK_WIDGET(self->conv_list), keys);
    g_signal_connect(self->input, "activate", G_CALLBACK(entry_activated), self);
    GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment(self->scroller);
    self->follow = TRUE;
    g_signal_connect(adj, "notify::upper", G_CALLBACK(scroller_upper_changed), self);
    g_signal_connect(adj, "notify::page-size", G_CALLBACK(scroller_upper_changed), self);
    g_signal_connect(adj, "value-changed", G_CALLBACK(scroller_value_changed), self);
    /* the page's keys, wherever the focus is in the window (rlx-keys.h) */
    static const RlxKey keys_global[] = {
        {GDK_KEY_Escape, 0, "chat.stop"},
        {GDK_KEY_n, GDK_CONTROL_MASK, "chat.new"},
        {GDK_KEY_o, GDK_CONTROL_MASK, "chat.open"},
        {GDK_KEY_r, GDK_CONTROL_MASK, "chat.regenerate"},
        {GDK_KEY_f, GDK_CONTROL_MASK, "chat.search"},
    };
    rlx_keys_global(GTK_WIDGET(self), keys_global, G_N_ELEMENTS(keys_global));
    g_signal_connect(self->system_popover, "closed", G_CALLBACK(system_popover_closed), self);
}
