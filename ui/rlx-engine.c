#include "rlx-engine.h"

#include "backends/backend.h"
#include "engine/formats/gguf.h"
#include "engine/runtime/worker.h"
#include "engine/template/chat-template.h"
#include "models/llm/llm.h"

#include <glib/gi18n.h>
#include <json-c/json.h>
#include <string.h>

G_DEFINE_QUARK(rlx - engine - error - quark, rlx_engine_error)

enum {
    EV_TOKENS,
    EV_PROGRESS,
    EV_MEMORY,
    EV_STATS,
    EV_LOADED,
    EV_DONE,
};

/* Job-defined worker events. */
enum {
    WEV_LOADED = RLX_WORKER_EVENT_USER,
    WEV_STATS,
    WEV_STOP,
    WEV_PIECE, /* data: TokenPiece */
};

typedef struct {
    int kind;
    GString *text;   /* EV_TOKENS */
    int n_generated; /* EV_TOKENS: the reply's tokens up to the end of text */
    gboolean sealed; /* EV_TOKENS: takes no more text (it closed a thinking section) */
    char *stage;     /* EV_PROGRESS */
    double fraction;
    RlxMemoryInfo mem;
    double tps;
    int n_past, n_ctx;
    RlxModelInfo info; /* EV_LOADED */
    uint64_t job;      /* EV_DONE */
    RlxJobKind job_kind;
    int status;
    char *message;
    char *stop;
} Event;

/* What the worker thread emits for each piece of text (valid during the call). */
typedef struct {
    const char *text;
    size_t len;
    int n_generated;
} TokenPiece;

typedef struct {
    RlxEngine *engine;
    uint64_t job;
    RlxJobKind kind;
    GCancellable *cancellable;
    gulong handler;
    char *stop; /* set by the job (worker thread, under the mutex) */
} JobInfo;

struct _RlxEngine {
    GObject parent_instance;

    rlx_worker *worker;

    GMutex lock;        /* guards everything below */
    GQueue events;      /* Event * */
    GSource *source;    /* the one pending dispatch, or NULL */
    GMainContext *main; /* where signals are emitted */
    GHashTable *jobs;   /* job id -> JobInfo */
    rlx_llm *model;     /* written by the worker thread; read for cancel */

    /* worker thread only */
    rlx_chat_template *tmpl;
    char *bos, *eos;

    /* main thread only */
    RlxModelInfo info;
    gboolean have_info;
    guint n_pending;
};

G_DEFINE_FINAL_TYPE(RlxEngine, rlx_engine, G_TYPE_OBJECT)

enum {
    SIG_LOAD_PROGRESS,
    SIG_MODEL_LOADED,
    SIG_TOKENS,
    SIG_STATS,
    SIG_MEMORY,
    SIG_FINISHED,
    SIG_ERROR,
    N_SIGNALS,
};
static guint signals[N_SIGNALS];

static void model_info_clear(RlxModelInfo *i)
{
    g_clear_pointer(&i->path, g_free);
    g_clear_pointer(&i->name, g_free);
    g_clear_pointer(&i->arch, g_free);
    g_clear_pointer(&i->quant, g_free);
    g_clear_pointer(&i->device, g_free);
}

static void event_free(Event *e)
{
    if (e->text)
        g_string_free(e->text, TRUE);
    g_free(e->stage);
    g_free(e->message);
    g_free(e->stop);
    model_info_clear(&e->info);
    g_free(e);
}

static void job_info_free(JobInfo *j)
{
    if (j->cancellable) {
        /* Waits for a handler running in another thread, so never under our lock. */
        if (j->handler)
            g_cancellable_disconnect(j->cancellable, j->handler);
        g_object_unref(j->cancellable);
    }
    g_free(j->stop);
    g_free(j);
}

/* The engine's chat defaults, as rlx chat uses them (the settings schema's
 * defaults are written from the same function at build time). The seed is
 * the app's own: a fresh one for every reply, so that regenerating varies. */
RlxSampling rlx_sampling_default(void)
{
    rlx_llm_generate_params gp = rlx_llm_chat_default_params();
    return (RlxSampling){.temperature = gp.sampler.temperature,
                         .top_k = gp.sampler.top_k,
                         .top_p = gp.sampler.top_p,
                         .min_p = gp.sampler.min_p,
                         .repeat_penalty = gp.sampler.repeat_penalty,
                         .seed = -1,
                         .max_tokens = gp.max_tokens,
                         .thinking = TRUE};
}

/* ---- main-thread dispatch ------------------------------------------------ */

static gboolean dispatch(gpointer user_data)
{
    RlxEngine *self = g_object_ref(RLX_ENGINE(user_data));
    GQueue q = G_QUEUE_INIT;

    g_mutex_lock(&self->lock);
    q = self->events;
    g_queue_init(&self->events);
    g_source_unref(self->source);
    self->source = NULL;
    g_mutex_unlock(&self->lock);

    for (Event *e; (e = g_queue_pop_head(&q));) {
        switch (e->kind) {
        case EV_TOKENS:
            g_signal_emit(self, signals[SIG_TOKENS], 0, e->text->str, e->n_generated);
            break;
        case EV_PROGRESS:
            g_signal_emit(self, signals[SIG_LOAD_PROGRESS], 0, e->stage, e->fraction);
            break;
        case EV_MEMORY:
            g_signal_emit(self, signals[SIG_MEMORY], 0, &e->mem);
            break;
        case EV_STATS:
            g_signal_emit(self, signals[SIG_STATS], 0, e->tps, e->n_past, e->n_ctx);
            break;
        case EV_LOADED:
            model_info_clear(&self->info);
            self->info = e->info;
            memset(&e->info, 0, sizeof e->info);
            self->have_info = TRUE;
            g_signal_emit(self, signals[SIG_MODEL_LOADED], 0);
            break;
        case EV_DONE: {
            g_mutex_lock(&self->lock);
            JobInfo *j = NULL;
            gpointer key = NULL;
            if (self->jobs &&
                g_hash_table_steal_extended(self->jobs, &e->job, &key, (gpointer *)&j))
                g_free(key);
            g_mutex_unlock(&self->lock);
            if (self->n_pending)
                self->n_pending--;
            if (e->status != 0 && e->status != RLX_ERR_CANCELLED) {
                int code = j && g_strcmp0(j->stop, "context") == 0 ? RLX_ENGINE_ERROR_CONTEXT_FULL
                                                                   : e->status;
                g_autoptr(GError) error = g_error_new_literal(RLX_ENGINE_ERROR, code, e->message);
                g_signal_emit(self, signals[SIG_ERROR], 0, e->job_kind, error);
            }
            const char *stop = e->status == RLX_ERR_CANCELLED ? "cancelled"
                               : j && j->stop                 ? j->stop
                               : e->status != 0               ? "error"
                                                              : NULL;
            g_signal_emit(self, signals[SIG_FINISHED], 0, e->job_kind, stop);
            if (j)
                job_info_free(j);
            break;
        }
        }
        event_free(e);
    }
    g_object_unref(self);
    return G_SOURCE_REMOVE;
}

/* Called with the lock held: make sure one dispatch is pending. */
static void schedule_locked(RlxEngine *self)
{
    if (self->source)
        return;
    self->source = g_idle_source_new();
    g_source_set_callback(self->source, dispatch, self, NULL);
    g_source_attach(self->source, self->main);
}

/* The queued event of this kind that a new one can merge into: the stream's
 * events (text, figures, progress) between the last boundary (loaded,
 * finished, error) and the tail, so one dispatch emits one batch of text and
 * the latest of each figure, however they interleaved. Called locked. */
static Event *mergeable_locked(RlxEngine *self, int kind)
{
    for (GList *l = g_queue_peek_tail_link(&self->events); l; l = l->prev) {
        Event *q = l->data;
        if (q->kind == kind)
            return q;
        if (q->kind != EV_TOKENS && q->kind != EV_PROGRESS && q->kind != EV_MEMORY &&
            q->kind != EV_STATS)
            return NULL;
    }
    return NULL;
}

static void post(RlxEngine *self, Event *e)
{
    g_mutex_lock(&self->lock);
    Event *prev = e->kind == EV_PROGRESS || e->kind == EV_MEMORY || e->kind == EV_STATS
                      ? mergeable_locked(self, e->kind)
                      : NULL;
    if (prev) {
        /* Only the latest figure matters. */
        g_free(prev->stage);
        *prev = *e;
        g_free(e);
    } else {
        g_queue_push_tail(&self->events, e);
    }
    schedule_locked(self);
    g_mutex_unlock(&self->lock);
}

/* ---- worker-thread callbacks --------------------------------------------- */

static void on_progress(void *user, uint64_t job, const char *stage, double fraction)
{
    Event *e = g_new0(Event, 1);
    e->kind = EV_PROGRESS;
    e->stage = g_strdup(stage);
    e->fraction = fraction;
    post(user, e);
}

/* The end of a reasoning section. A batch of text ends right after it, so
 * that the batch's token count is the count of the thinking (and the time
 * the page sees it arrive is the time it ended). */
#define THINK_END "</think>"

static void on_event(void *user, uint64_t job, int kind, const void *data, size_t size)
{
    RlxEngine *self = user;
    if (kind == WEV_PIECE) {
        const TokenPiece *tp = data;
        g_mutex_lock(&self->lock);
        Event *prev = mergeable_locked(self, EV_TOKENS);
        if (prev && prev->sealed)
            prev = NULL;
        gsize from = 0;
        if (prev) {
            from = prev->text->len;
            g_string_append_len(prev->text, tp->text, (gssize)tp->len);
        } else {
            prev = g_new0(Event, 1);
            prev->kind = EV_TOKENS;
            prev->text = g_string_new_len(tp->text, (gssize)tp->len);
            g_queue_push_tail(&self->events, prev);
        }
        prev->n_generated = tp->n_generated;
        /* Only the new piece and the few bytes before it can complete the tag. */
        gsize start = from > strlen(THINK_END) ? from - strlen(THINK_END) : 0;
        if (g_strstr_len(prev->text->str + start, (gssize)(prev->text->len - start), THINK_END))
            prev->sealed = TRUE;
        schedule_locked(self);
        g_mutex_unlock(&self->lock);
    } else if (kind == RLX_WORKER_EVENT_MEMORY || kind == WEV_STATS || kind == WEV_LOADED) {
        Event *e = g_new0(Event, 1);
        if (kind == RLX_WORKER_EVENT_MEMORY) {
            e->kind = EV_MEMORY;
            e->mem = *(const RlxMemoryInfo *)data;
        } else if (kind == WEV_STATS) {
            const Event *s = data;
            e->kind = EV_STATS;
            e->tps = s->tps;
            e->n_past = s->n_past;
            e->n_ctx = s->n_ctx;
        } else {
            e->kind = EV_LOADED;
            e->info = *(const RlxModelInfo *)data; /* ownership moves */
        }
        post(self, e);
    } else if (kind == WEV_STOP) {
        g_mutex_lock(&self->lock);
        JobInfo *j = g_hash_table_lookup(self->jobs, &job);
        if (j) {
            g_free(j->stop);
            j->stop = g_strdup(data);
        }
        g_mutex_unlock(&self->lock);
    }
}

static void on_done(void *user, uint64_t job, rlx_status status, const char *message)
{
    RlxEngine *self = user;
    Event *e = g_new0(Event, 1);
    e->kind = EV_DONE;
    e->job = job;
    e->status = status;
    e->message = g_strdup(message ? message : "");
    g_mutex_lock(&self->lock);
    JobInfo *j = g_hash_table_lookup(self->jobs, &job);
    e->job_kind = j ? j->kind : RLX_JOB_CHAT;
    g_mutex_unlock(&self->lock);
    post(self, e);
}

/* ---- jobs (worker thread) ------------------------------------------------ */

static void emit_memory(rlx_worker *w, rlx_llm *m)
{
    rlx_session *s = rlx_llm_session(m);
    rlx_session_memory_info mi = rlx_session_memory(s);
    RlxMemoryInfo info = {.weights = mi.weights_bytes,
                          .kv_cache = mi.state_bytes,
                          .activations = mi.arena_bytes,
                          .budget = mi.budget_bytes};
    rlx_device_info di;
    rlx_error *err = NULL;
    if (rlx_session_device_info(s, &di, &err) == RLX_OK)
        info.device_total = di.total_memory;
    rlx_error_free(err);
    rlx_llm_placement_info pl = rlx_llm_get_placement(m);
    info.on_gpu = pl.on_gpu;
    info.n_gpu_layers = pl.n_gpu_layers;
    info.n_layers = pl.n_layers;
    info.cpu_bytes = pl.cpu_bytes;
    rlx_worker_emit(w, RLX_WORKER_EVENT_MEMORY, &info, sizeof info);
}

typedef struct {
    RlxEngine *engine;
    char *path;
    RlxLoadParams p;
} LoadJob;

static void load_job_free(void *data)
{
    LoadJob *j = data;
    g_free(j->path);
    g_free(j->p.device);
    g_free(j);
}

typedef struct {
    rlx_worker *w;
    RlxEngine *engine;
} ProgressCtx;

static bool load_progress(void *user, const char *stage, double fraction)
{
    ProgressCtx *c = user;
    return rlx_worker_progress(c->w, stage, fraction);
}

static const char *file_type_name(uint32_t ft)
{
    /* llama.cpp's general.file_type numbering */
    static const char *const names[] = {
        [0] = "F32",     [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [7] = "Q8_0",
        [8] = "Q5_0",    [9] = "Q5_1",    [10] = "Q2_K",   [11] = "Q3_K_S", [12] = "Q3_K_M",
        [13] = "Q3_K_L", [14] = "Q4_K_S", [15] = "Q4_K_M", [16] = "Q5_K_S", [17] = "Q5_K_M",
        [18] = "Q6_K",   [32] = "BF16",
    };
    return ft < G_N_ELEMENTS(names) ? names[ft] : NULL;
}

/* Name and quantization from the file's metadata; the dtype holding the most
 * bytes when general.file_type is absent. */
static void describe_file(const char *path, RlxModelInfo *info)
{
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    if (rlx_gguf_open(path, &g, &err) != RLX_OK) {
        rlx_error_free(err);
        return;
    }
    char buf[256];
    if (rlx_gguf_get_string(g, "general.name", buf, sizeof buf, NULL) == RLX_OK && buf[0])
        info->name = g_strdup(buf);
    uint32_t ft = 0;
    if (rlx_gguf_get_u32(g, "general.file_type", &ft, NULL) == RLX_OK && file_type_name(ft))
        info->quant = g_strdup(file_type_name(ft));
    if (!info->quant) {
        uint64_t bytes[64] = {0};
        for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
            const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
            if ((unsigned)t->dtype < G_N_ELEMENTS(bytes))
                bytes[t->dtype] += t->n_bytes;
        }
        unsigned best = 0;
        for (unsigned d = 1; d < G_N_ELEMENTS(bytes); d++)
            if (bytes[d] > bytes[best])
                best = d;
        info->quant = g_strdup(rlx_dtype_name((rlx_dtype)best));
    }
    rlx_gguf_close(g);
}

static char *token_string(const rlx_tokenizer *t, rlx_token id)
{
    if (!t || id == RLX_TOKEN_NULL)
        return NULL;
    size_t len = 0;
    const char *s = rlx_tokenizer_token_text(t, id, &len);
    return s ? g_strndup(s, len) : NULL;
}

static void free_model(RlxEngine *self)
{
    g_mutex_lock(&self->lock);
    rlx_llm *m = self->model;
    self->model = NULL;
    g_mutex_unlock(&self->lock);
    rlx_llm_free(m);
    g_clear_pointer(&self->tmpl, rlx_chat_template_free);
    g_clear_pointer(&self->bos, g_free);
    g_clear_pointer(&self->eos, g_free);
}

static rlx_status load_job(rlx_worker *w, void *data, rlx_error **err)
{
    LoadJob *j = data;
    RlxEngine *self = j->engine;
    free_model(self);

    ProgressCtx pc = {.w = w, .engine = self};
    rlx_llm_params p = rlx_llm_default_params();
    p.device = j->p.device;
    p.memory_budget = j->p.budget;
    p.n_ctx = j->p.n_ctx;
    p.n_threads = j->p.n_threads;
    p.busy_threads = 1; /* this UI's main thread, drawing the stream */
    p.progress = load_progress;
    p.progress_user = &pc;
    rlx_worker_progress(w, "open", 0.0);
    rlx_llm *m = NULL;
    rlx_status st = rlx_llm_load(j->path, &p, &m, err);
    if (st != RLX_OK)
        return st;
    const rlx_llm_config *cfg = rlx_llm_get_config(m);
    if (!rlx_llm_get_tokenizer(m)) {
        rlx_llm_free(m);
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             _("%s has no tokenizer, so it cannot be used for chat"), j->path);
    }
    if (rlx_llm_chat_template(m)) {
        rlx_error *terr = NULL;
        if (rlx_chat_template_create(rlx_llm_chat_template(m), &self->tmpl, &terr) != RLX_OK)
            g_message("the model's chat template cannot be used (%s); chatting in plain text",
                      rlx_error_message(terr));
        rlx_error_free(terr);
    }
    const rlx_tokenizer *tok = rlx_llm_get_tokenizer(m);
    self->bos = token_string(tok, rlx_tokenizer_bos(tok));
    self->eos = token_string(tok, rlx_tokenizer_eos(tok));
    g_mutex_lock(&self->lock);
    self->model = m;
    g_mutex_unlock(&self->lock);

    RlxModelInfo info = {0};
    describe_file(j->path, &info);
    if (!info.name) {
        /* the file name, without the extension every model file has */
        info.name = g_path_get_basename(j->path);
        char *dot = strrchr(info.name, '.');
        if (dot && dot != info.name && g_ascii_strcasecmp(dot, ".gguf") == 0)
            *dot = 0;
    }
    info.path = g_strdup(j->path);
    info.arch = g_strdup(cfg->arch_name);
    info.device = g_strdup(j->p.device ? j->p.device : "cpu");
    info.n_ctx = rlx_llm_n_ctx(m);
    info.has_template = self->tmpl != NULL;
    /* Qwen3's and similar templates read this variable; others ignore it, so
     * a switch for them would do nothing. */
    info.thinking_switch = self->tmpl && strstr(rlx_llm_chat_template(m), "enable_thinking");
    rlx_worker_progress(w, "ready", 1.0);
    rlx_worker_emit(w, WEV_LOADED, &info, sizeof info);
    emit_memory(w, m);
    return RLX_OK;
}

typedef struct {
    RlxEngine *engine;
    char *system;
    char **roles, **contents;
    guint n;
    RlxSampling s;
} ChatJob;

static void chat_job_free(void *data)
{
    ChatJob *j = data;
    g_free(j->system);
    g_strfreev(j->roles);
    g_strfreev(j->contents);
    g_free(j);
}

typedef struct {
    rlx_worker *w;
    rlx_llm *m;
    gint64 last_report;
} StreamCtx;

static bool stream_piece(void *user, const rlx_llm_piece *p)
{
    StreamCtx *c = user;
    /* The worker's flag, checked every token: Stop takes effect within one. */
    if (rlx_worker_cancelled(c->w))
        return false;
    if (p->len) {
        TokenPiece tp = {.text = p->text, .len = p->len, .n_generated = p->n_generated};
        rlx_worker_emit(c->w, WEV_PIECE, &tp, sizeof tp);
    }
    gint64 now = g_get_monotonic_time();
    if (now - c->last_report > 250 * 1000) {
        c->last_report = now;
        Event s = {.tps = p->tps, .n_past = p->n_past, .n_ctx = p->n_ctx};
        rlx_worker_emit(c->w, WEV_STATS, &s, sizeof s);
        emit_memory(c->w, c->m);
    }
    return true;
}

/* Without a chat template: the texts joined as one document to continue. */
static char *plain_prompt(const ChatJob *j)
{
    GString *s = g_string_new(NULL);
    if (j->system && *j->system) {
        g_string_append(s, j->system);
        g_string_append_c(s, '\n');
    }
    for (guint i = 0; i < j->n; i++) {
        if (i > 0 && g_strcmp0(j->roles[i], "user") == 0)
            g_string_append_c(s, '\n');
        g_string_append(s, j->contents[i]);
    }
    return g_string_free(s, FALSE);
}

static const char *stop_name(rlx_llm_stop_reason r)
{
    switch (r) {
    case RLX_LLM_STOP_EOG:
        return "eos";
    case RLX_LLM_STOP_LENGTH:
        return "length";
    case RLX_LLM_STOP_CONTEXT:
        return "context";
    case RLX_LLM_STOP_STRING:
        return "stop-string";
    case RLX_LLM_STOP_CALLBACK:
    case RLX_LLM_STOP_CANCELLED:
        return "cancelled";
    }
    return "eos";
}

static rlx_status chat_job(rlx_worker *w, void *data, rlx_error **err)
{
    ChatJob *j = data;
    RlxEngine *self = j->engine;
    rlx_llm *m = self->model; /* only this thread writes it */
    if (!m)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s", _("No model is loaded."));

    char *prompt = NULL;
    if (self->tmpl) {
        rlx_chat_message *msgs = g_new0(rlx_chat_message, j->n + 1);
        size_t n = 0;
        if (j->system && *j->system)
            msgs[n++] = (rlx_chat_message){.role = "system", .content = j->system};
        for (guint i = 0; i < j->n; i++)
            msgs[n++] = (rlx_chat_message){.role = j->roles[i], .content = j->contents[i]};
        rlx_chat_render_opts ro = rlx_chat_render_default_opts();
        ro.add_generation_prompt = true;
        ro.bos_token = self->bos;
        ro.eos_token = self->eos;
        json_object *vars = NULL;
        if (!j->s.thinking) {
            vars = json_object_new_object();
            json_object_object_add(vars, "enable_thinking", json_object_new_boolean(0));
            ro.vars = vars;
        }
        rlx_status st = rlx_chat_template_render(self->tmpl, msgs, n, &ro, &prompt, err);
        json_object_put(vars);
        g_free(msgs);
        if (st != RLX_OK)
            return st;
    } else {
        char *p = plain_prompt(j);
        prompt = strdup(p);
        g_free(p);
    }
    rlx_token *ids = NULL;
    size_t n = 0;
    rlx_status st = rlx_llm_tokenize(m, prompt, true, self->tmpl != NULL, &ids, &n, err);
    free(prompt);
    if (st != RLX_OK)
        return st;
    const rlx_tokenizer *tok = rlx_llm_get_tokenizer(m);
    if (n >= 2 && ids[0] == rlx_tokenizer_bos(tok) && ids[1] == ids[0]) {
        memmove(ids, ids + 1, (n - 1) * sizeof *ids); /* the template wrote BOS itself */
        n--;
    }
    if ((int32_t)n >= rlx_llm_n_ctx(m)) {
        free(ids);
        rlx_worker_emit(w, WEV_STOP, "context", sizeof "context");
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             _("The conversation is %zu tokens long, more than the %d tokens of "
                               "context the model was loaded with."),
                             n, rlx_llm_n_ctx(m));
    }

    rlx_llm_generate_params gp = rlx_llm_generate_default_params();
    gp.sampler.temperature = (float)j->s.temperature;
    gp.sampler.top_k = j->s.top_k;
    gp.sampler.top_p = (float)j->s.top_p;
    gp.sampler.min_p = (float)j->s.min_p;
    gp.sampler.repeat_penalty = (float)j->s.repeat_penalty;
    gp.sampler.seed = j->s.seed >= 0 ? (uint64_t)j->s.seed : g_random_int();
    gp.max_tokens = j->s.max_tokens;

    StreamCtx c = {.w = w, .m = m};
    rlx_llm_stats stats = {0};
    st = rlx_llm_generate(m, ids, n, &gp, stream_piece, &c, &stats, NULL, NULL, err);
    free(ids);
    if (st == RLX_ERR_CANCELLED)
        return st;
    if (st == RLX_OK) {
        Event s = {.tps = stats.decode_tps, .n_past = stats.n_past, .n_ctx = rlx_llm_n_ctx(m)};
        rlx_worker_emit(w, WEV_STATS, &s, sizeof s);
        const char *why = rlx_worker_cancelled(w) ? "cancelled" : stop_name(stats.stop);
        rlx_worker_emit(w, WEV_STOP, why, strlen(why) + 1);
    }
    emit_memory(w, m);
    return st;
}

/* ---- public API ------------------------------------------------------------ */

static uint64_t submit(RlxEngine *self, RlxJobKind kind, rlx_job_fn fn, void *data,
                       void (*free_data)(void *), GCancellable *cancellable);

typedef struct {
    RlxEngine *engine;
    uint64_t job;
} CancelCtx;

static void on_cancelled(GCancellable *c, gpointer user_data)
{
    CancelCtx *cc = user_data;
    rlx_worker_cancel(cc->engine->worker, cc->job);
    g_mutex_lock(&cc->engine->lock);
    if (cc->engine->model)
        rlx_llm_cancel(cc->engine->model);
    g_mutex_unlock(&cc->engine->lock);
}

static uint64_t submit(RlxEngine *self, RlxJobKind kind, rlx_job_fn fn, void *data,
                       void (*free_data)(void *), GCancellable *cancellable)
{
    JobInfo *j = g_new0(JobInfo, 1);
    j->engine = self;
    j->kind = kind;
    /* Registered before the job can finish: on_done looks it up. */
    g_mutex_lock(&self->lock);
    uint64_t id = rlx_worker_submit(self->worker, fn, data, free_data);
    if (id)
        g_hash_table_insert(self->jobs, g_memdup2(&id, sizeof id), j);
    g_mutex_unlock(&self->lock);
    if (!id) {
        g_free(j);
        return 0;
    }
    j->job = id;
    self->n_pending++;
    if (cancellable) {
        CancelCtx *cc = g_new(CancelCtx, 1);
        cc->engine = self;
        cc->job = id;
        j->cancellable = g_object_ref(cancellable);
        j->handler = g_cancellable_connect(cancellable, G_CALLBACK(on_cancelled), cc, g_free);
    }
    return id;
}

RlxEngine *rlx_engine_new(void)
{
    return g_object_new(RLX_TYPE_ENGINE, NULL);
}

void rlx_engine_load_model(RlxEngine *self, const char *path, const RlxLoadParams *p)
{
    g_return_if_fail(RLX_IS_ENGINE(self));
    LoadJob *j = g_new0(LoadJob, 1);
    j->engine = self;
    j->path = g_strdup(path);
    if (p) {
        j->p = *p;
        j->p.device = g_strdup(p->device);
    }
    submit(self, RLX_JOB_LOAD, load_job, j, load_job_free, NULL);
}

const RlxModelInfo *rlx_engine_get_model_info(RlxEngine *self)
{
    g_return_val_if_fail(RLX_IS_ENGINE(self), NULL);
    return self->have_info ? &self->info : NULL;
}

gboolean rlx_engine_is_busy(RlxEngine *self)
{
    g_return_val_if_fail(RLX_IS_ENGINE(self), FALSE);
    return self->n_pending > 0;
}

void rlx_engine_chat(RlxEngine *self, const char *system, const char *const *roles,
                     const char *const *contents, guint n, const RlxSampling *s,
                     GCancellable *cancellable)
{
    g_return_if_fail(RLX_IS_ENGINE(self));
    ChatJob *j = g_new0(ChatJob, 1);
    j->engine = self;
    j->system = g_strdup(system);
    j->roles = g_new0(char *, n + 1);
    j->contents = g_new0(char *, n + 1);
    for (guint i = 0; i < n; i++) {
        j->roles[i] = g_strdup(roles[i]);
        j->contents[i] = g_strdup(contents[i]);
    }
    j->n = n;
    j->s = s ? *s : rlx_sampling_default();
    submit(self, RLX_JOB_CHAT, chat_job, j, chat_job_free, cancellable);
}

void rlx_engine_cancel_all(RlxEngine *self)
{
    g_return_if_fail(RLX_IS_ENGINE(self));
    rlx_worker_cancel_all(self->worker);
    g_mutex_lock(&self->lock);
    if (self->model)
        rlx_llm_cancel(self->model);
    g_mutex_unlock(&self->lock);
}

static void device_free(gpointer data)
{
    RlxDevice *d = data;
    g_free(d->id);
    g_free(d->label);
    g_free(d->features);
    g_free(d);
}

GPtrArray *rlx_engine_list_devices(void)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(device_free);
    for (int b = 0; b < rlx_backend_count(); b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        int n = be->device_count ? be->device_count() : 0;
        for (int i = 0; i < n; i++) {
            rlx_device_info di;
            rlx_error *err = NULL;
            if (be->device_info(i, &di, &err) != RLX_OK) {
                rlx_error_free(err);
                continue;
            }
            RlxDevice *d = g_new0(RlxDevice, 1);
            g_strstrip(di.name); /* a driver's name may come padded */
            d->id = g_strdup(di.id);
            d->total_memory = di.total_memory;
            d->features = g_strdup(di.features);
            if (di.type == RLX_DEVICE_CPU && !strstr(di.name, "thread"))
                /* Translators: CPU model name and the number of threads used */
                d->label = g_strdup_printf(_("CPU — %s (%d threads)"), di.name, di.n_threads);
            else if (di.type == RLX_DEVICE_CPU)
                d->label = g_strdup_printf(_("CPU — %s"), di.name);
            else
                d->label = g_strdup_printf("%s — %s",
                                           !strcmp(di.backend, "vulkan") ? "Vulkan"
                                           : !strcmp(di.backend, "cuda") ? "CUDA"
                                                                         : di.backend,
                                           di.name);
            g_ptr_array_add(out, d);
        }
    }
    return out;
}

/* ---- GObject ---------------------------------------------------------------- */

static void rlx_engine_dispose(GObject *object)
{
    RlxEngine *self = RLX_ENGINE(object);
    if (self->worker) {
        g_mutex_lock(&self->lock);
        if (self->model)
            rlx_llm_cancel(self->model);
        g_mutex_unlock(&self->lock);
        /* Cancels the running job (it stops within a token), joins the thread. */
        rlx_worker_free(self->worker);
        self->worker = NULL;
    }
    /* The thread is gone: what it posted will not be delivered. */
    g_mutex_lock(&self->lock);
    if (self->source) {
        g_source_destroy(self->source);
        g_clear_pointer(&self->source, g_source_unref);
    }
    g_queue_clear_full(&self->events, (GDestroyNotify)event_free);
    GHashTable *jobs = g_steal_pointer(&self->jobs);
    g_mutex_unlock(&self->lock);
    if (jobs)
        g_hash_table_unref(jobs);
    /* Only after the join: the model belongs to the worker thread. */
    free_model(self);
    G_OBJECT_CLASS(rlx_engine_parent_class)->dispose(object);
}

static void rlx_engine_finalize(GObject *object)
{
    RlxEngine *self = RLX_ENGINE(object);
    model_info_clear(&self->info);
    g_main_context_unref(self->main);
    g_mutex_clear(&self->lock);
    G_OBJECT_CLASS(rlx_engine_parent_class)->finalize(object);
}

static void rlx_engine_class_init(RlxEngineClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->dispose = rlx_engine_dispose;
    object_class->finalize = rlx_engine_finalize;

    signals[SIG_LOAD_PROGRESS] =
        g_signal_new("load-progress", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_DOUBLE);
    signals[SIG_MODEL_LOADED] =
        g_signal_new("model-loaded", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 0);
    signals[SIG_TOKENS] = g_signal_new("tokens", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                       NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_INT);
    signals[SIG_STATS] =
        g_signal_new("stats", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                     G_TYPE_NONE, 3, G_TYPE_DOUBLE, G_TYPE_INT, G_TYPE_INT);
    signals[SIG_MEMORY] = g_signal_new("memory", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                       NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
    signals[SIG_FINISHED] =
        g_signal_new("finished", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                     G_TYPE_NONE, 2, G_TYPE_INT, G_TYPE_STRING);
    signals[SIG_ERROR] = g_signal_new("error", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                      NULL, NULL, G_TYPE_NONE, 2, G_TYPE_INT, G_TYPE_ERROR);
}

static void rlx_engine_init(RlxEngine *self)
{
    g_mutex_init(&self->lock);
    g_queue_init(&self->events);
    self->main = g_main_context_ref_thread_default();
    self->jobs =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)job_info_free);
    rlx_worker_callbacks cb = {
        .on_progress = on_progress,
        .on_event = on_event,
        .on_done = on_done,
        .user = self,
    };
    rlx_error *err = NULL;
    if (rlx_worker_create(NULL, &cb, &self->worker, &err) != RLX_OK)
        g_error("cannot start the engine thread: %s", rlx_error_message(err));
}
