#include "rlx-transcriber.h"

#include "rlx-mailbox.h"

#include "engine/runtime/session.h"
#include "models/whisper/whisper.h"

#include <string.h>

enum {
    EV_LOADING,
    EV_STARTED,
    EV_LANGUAGE,
    EV_SEGMENT,
    EV_PROGRESS,
    EV_FINISHED,
    EV_MEMORY,
};

typedef struct {
    int kind;
    char *text; /* stage, kind, code, segment text, message */
    double a, b;
    gint64 t0, t1;
    int status;
    gboolean flag;
    RlxMemoryInfo mem;
} Event;

typedef struct {
    char *model, *device, *audio, *language;
    int n_threads;
    uint64_t budget;
    gboolean translate;
    gint64 offset_ms;
    gboolean quit; /* the sentinel that ends the thread */
} Job;

struct _RlxTranscriber {
    GObject parent_instance;

    GThread *thread;
    GAsyncQueue *jobs; /* Job * */

    GMutex lock;         /* guards everything below */
    RlxMailbox mail;     /* reports to the main loop */
    rlx_whisper *active; /* the runner while it transcribes, for cancel */
    gboolean cancel;     /* asked to stop the current job */

    /* worker thread only */
    rlx_whisper *runner;
    char *runner_key; /* model, device, threads, budget it was created with */

    /* main thread only */
    gboolean busy;
};

G_DEFINE_FINAL_TYPE(RlxTranscriber, rlx_transcriber, G_TYPE_OBJECT)

enum {
    SIG_LOADING,
    SIG_STARTED,
    SIG_LANGUAGE,
    SIG_SEGMENT,
    SIG_PROGRESS,
    SIG_FINISHED,
    SIG_MEMORY,
    N_SIGNALS,
};
static guint signals[N_SIGNALS];

static void event_free(Event *e)
{
    g_free(e->text);
    g_free(e);
}

static void job_free(Job *j)
{
    g_free(j->model);
    g_free(j->device);
    g_free(j->audio);
    g_free(j->language);
    g_free(j);
}

/* ---- main-thread dispatch ------------------------------------------------ */

static void deliver(GObject *owner, gpointer report)
{
    RlxTranscriber *self = RLX_TRANSCRIBER(owner);
    Event *e = report;
    switch (e->kind) {
    case EV_LOADING:
        g_signal_emit(self, signals[SIG_LOADING], 0, e->text, e->a);
        break;
    case EV_STARTED:
        g_signal_emit(self, signals[SIG_STARTED], 0, e->text, e->flag);
        break;
    case EV_LANGUAGE:
        g_signal_emit(self, signals[SIG_LANGUAGE], 0, e->text, e->a);
        break;
    case EV_SEGMENT:
        g_signal_emit(self, signals[SIG_SEGMENT], 0, e->t0, e->t1, e->text);
        break;
    case EV_PROGRESS:
        g_signal_emit(self, signals[SIG_PROGRESS], 0, e->a, e->b);
        break;
    case EV_MEMORY:
        g_signal_emit(self, signals[SIG_MEMORY], 0, &e->mem);
        break;
    case EV_FINISHED:
        /* Not busy before the signal: its handler may start the next job. */
        self->busy = FALSE;
        g_signal_emit(self, signals[SIG_FINISHED], 0, e->status, e->text);
        break;
    }
}

/* Only the latest figure of progress or loading matters. */
static gboolean replaces(gpointer last, gpointer newer)
{
    Event *l = last, *e = newer;
    return l->kind == e->kind && (e->kind == EV_PROGRESS || e->kind == EV_LOADING);
}

static void post(RlxTranscriber *self, Event *e)
{
    rlx_mailbox_post(&self->mail, e);
}

static Event *event_new(int kind, const char *text)
{
    Event *e = g_new0(Event, 1);
    e->kind = kind;
    e->text = g_strdup(text);
    return e;
}

/* ---- worker thread --------------------------------------------------------- */

static gboolean cancelled(RlxTranscriber *self)
{
    g_mutex_lock(&self->lock);
    gboolean c = self->cancel;
    g_mutex_unlock(&self->lock);
    return c;
}

static bool on_load_progress(void *user, const char *stage, double fraction)
{
    RlxTranscriber *self = user;
    Event *e = event_new(EV_LOADING, stage);
    e->a = fraction;
    post(self, e);
    return !cancelled(self);
}

static bool on_segment(void *user, const rlx_whisper_segment *seg)
{
    RlxTranscriber *self = user;
    Event *e = event_new(EV_SEGMENT, seg->text ? seg->text : "");
    e->t0 = seg->t0_ms;
    e->t1 = seg->t1_ms;
    post(self, e);
    return !cancelled(self);
}

static bool on_progress(void *user, double done_s, double total_s)
{
    RlxTranscriber *self = user;
    Event *e = event_new(EV_PROGRESS, NULL);
    /* The runner may count a last segment's end, past the recording's. */
    e->a = total_s > 0 ? MIN(done_s, total_s) : done_s;
    e->b = total_s;
    post(self, e);
    return !cancelled(self);
}

static void on_language(void *user, const char *code, float p)
{
    Event *e = event_new(EV_LANGUAGE, code);
    e->a = p;
    post(user, e);
}

static void free_runner(RlxTranscriber *self)
{
    if (!self->runner)
        return;
    rlx_whisper_free(self->runner);
    self->runner = NULL;
    g_clear_pointer(&self->runner_key, g_free);
}

/* The runner for the job: the loaded one when nothing that shapes it changed. */
static rlx_status ensure_runner(RlxTranscriber *self, const Job *j, rlx_error **err)
{
    g_autofree char *key = g_strdup_printf("%s\n%s\n%d\n%" G_GUINT64_FORMAT, j->model,
                                           j->device ? j->device : "cpu", j->n_threads, j->budget);
    if (self->runner && g_strcmp0(key, self->runner_key) == 0)
        return RLX_OK;
    free_runner(self);
    rlx_whisper_params p = rlx_whisper_default_params();
    p.device = j->device;
    p.n_threads = j->n_threads;
    p.memory_budget = j->budget;
    p.max_beams = 1; /* the page decodes greedily: no room kept for beams */
    p.progress = on_load_progress;
    p.progress_user = self;
    post(self, event_new(EV_LOADING, NULL));
    rlx_status st = rlx_whisper_create(j->model, &p, &self->runner, err);
    if (st != RLX_OK) {
        self->runner = NULL;
        return st;
    }
    self->runner_key = g_steal_pointer(&key);
    /* what the model takes on its device, for the header bar's memory */
    rlx_session *s = rlx_whisper_session(self->runner);
    rlx_session_memory_info mi = rlx_session_memory(s);
    rlx_device_info di;
    Event *e = event_new(EV_MEMORY, NULL);
    e->mem.weights = mi.weights_bytes;
    e->mem.kv_cache = mi.state_bytes;
    e->mem.activations = mi.arena_bytes;
    e->mem.budget = mi.budget_bytes;
    if (rlx_session_device_info(s, &di, NULL) == RLX_OK)
        e->mem.device_total = di.total_memory;
    e->mem.on_gpu = strcmp(rlx_session_backend(s)->name, "cpu") != 0;
    post(self, e);
    return RLX_OK;
}

static void run_job(RlxTranscriber *self, const Job *j)
{
    rlx_error *err = NULL;
    rlx_whisper_result *r = NULL;
    rlx_status st = ensure_runner(self, j, &err);
    if (st == RLX_OK && cancelled(self))
        st = RLX_ERR_CANCELLED;
    if (st == RLX_OK) {
        Event *e = event_new(EV_STARTED, rlx_whisper_kind(self->runner));
        e->flag = rlx_whisper_is_multilingual(self->runner);
        post(self, e);
        rlx_whisper_decode_params dp = rlx_whisper_decode_default_params();
        dp.language = j->language;
        dp.translate = j->translate;
        dp.offset_ms = j->offset_ms;
        rlx_whisper_callbacks cb = {
            .segment = on_segment,
            .progress = on_progress,
            .language = on_language,
            .user = self,
        };
        g_mutex_lock(&self->lock);
        self->active = self->runner;
        gboolean stop = self->cancel;
        g_mutex_unlock(&self->lock);
        st = stop ? RLX_ERR_CANCELLED
                  : rlx_whisper_transcribe_file(self->runner, j->audio, &dp, &cb, &r, &err);
        g_mutex_lock(&self->lock);
        self->active = NULL;
        g_mutex_unlock(&self->lock);
    }
    /* A runner that failed mid-way may be in any state: the next job loads afresh. */
    if (st != RLX_OK && st != RLX_ERR_CANCELLED && self->runner && r == NULL)
        free_runner(self);
    rlx_whisper_result_free(r);
    Event *e = event_new(EV_FINISHED, st == RLX_OK ? NULL : rlx_error_message(err));
    e->status = st;
    post(self, e);
    rlx_error_free(err);
}

static gpointer thread_main(gpointer data)
{
    RlxTranscriber *self = data;
    for (;;) {
        Job *j = g_async_queue_pop(self->jobs);
        gboolean quit = j->quit;
        if (!quit)
            run_job(self, j);
        job_free(j);
        if (quit)
            break;
    }
    free_runner(self);
    return NULL;
}

/* ---- public ---------------------------------------------------------------- */

RlxTranscriber *rlx_transcriber_new(void)
{
    return g_object_new(RLX_TYPE_TRANSCRIBER, NULL);
}

gboolean rlx_transcriber_start(RlxTranscriber *self, const RlxTranscribeJob *job)
{
    g_return_val_if_fail(RLX_IS_TRANSCRIBER(self), FALSE);
    g_return_val_if_fail(job && job->model && job->audio, FALSE);
    if (self->busy)
        return FALSE;
    Job *j = g_new0(Job, 1);
    j->model = g_strdup(job->model);
    j->device = g_strdup(job->device);
    j->audio = g_strdup(job->audio);
    j->language = g_strdup(job->language ? job->language : "auto");
    j->n_threads = job->n_threads;
    j->budget = job->budget;
    j->translate = job->translate;
    j->offset_ms = MAX(0, job->offset_ms);
    g_mutex_lock(&self->lock);
    self->cancel = FALSE;
    g_mutex_unlock(&self->lock);
    self->busy = TRUE;
    g_async_queue_push(self->jobs, j);
    return TRUE;
}

void rlx_transcriber_cancel(RlxTranscriber *self)
{
    g_return_if_fail(RLX_IS_TRANSCRIBER(self));
    g_mutex_lock(&self->lock);
    self->cancel = TRUE;
    /* Under the lock: the worker clears it before the runner can go. */
    if (self->active)
        rlx_whisper_cancel(self->active);
    g_mutex_unlock(&self->lock);
}

gboolean rlx_transcriber_is_busy(RlxTranscriber *self)
{
    g_return_val_if_fail(RLX_IS_TRANSCRIBER(self), FALSE);
    return self->busy;
}

static void rlx_transcriber_dispose(GObject *object)
{
    RlxTranscriber *self = RLX_TRANSCRIBER(object);
    if (self->thread) {
        rlx_transcriber_cancel(self);
        Job *quit = g_new0(Job, 1);
        quit->quit = TRUE;
        g_async_queue_push_front(self->jobs, quit);
        g_thread_join(self->thread);
        self->thread = NULL;
    }
    /* The thread is gone: what it posted will not be delivered. */
    g_mutex_lock(&self->lock);
    rlx_mailbox_clear(&self->mail);
    g_mutex_unlock(&self->lock);
    G_OBJECT_CLASS(rlx_transcriber_parent_class)->dispose(object);
}

static void rlx_transcriber_finalize(GObject *object)
{
    RlxTranscriber *self = RLX_TRANSCRIBER(object);
    if (self->jobs) {
        for (Job *j; (j = g_async_queue_try_pop(self->jobs));)
            job_free(j);
        g_async_queue_unref(self->jobs);
    }
    g_mutex_clear(&self->lock);
    G_OBJECT_CLASS(rlx_transcriber_parent_class)->finalize(object);
}

static void rlx_transcriber_class_init(RlxTranscriberClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->dispose = rlx_transcriber_dispose;
    object_class->finalize = rlx_transcriber_finalize;
    GType t = G_TYPE_FROM_CLASS(klass);
    signals[SIG_LOADING] = g_signal_new("loading", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                        G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_DOUBLE);
    signals[SIG_STARTED] = g_signal_new("started", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                        G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_BOOLEAN);
    signals[SIG_LANGUAGE] = g_signal_new("language", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                         G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_DOUBLE);
    signals[SIG_SEGMENT] = g_signal_new("segment", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                        G_TYPE_NONE, 3, G_TYPE_INT64, G_TYPE_INT64, G_TYPE_STRING);
    signals[SIG_PROGRESS] = g_signal_new("progress", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                         G_TYPE_NONE, 2, G_TYPE_DOUBLE, G_TYPE_DOUBLE);
    signals[SIG_FINISHED] = g_signal_new("finished", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                         G_TYPE_NONE, 2, G_TYPE_INT, G_TYPE_STRING);
    signals[SIG_MEMORY] = g_signal_new("memory", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                       G_TYPE_NONE, 1, G_TYPE_POINTER);
}

static void rlx_transcriber_init(RlxTranscriber *self)
{
    g_mutex_init(&self->lock);
    rlx_mailbox_init(&self->mail, G_OBJECT(self), deliver, (GDestroyNotify)event_free, replaces);
    self->jobs = g_async_queue_new();
    self->thread = g_thread_new("rlx-transcribe", thread_main, self);
}
