#include "rlx-imaginer.h"

#include "rlx-mailbox.h"

#include "engine/image/image.h"
#include "models/diffusion/flux2.h"

#include <string.h>

enum {
    EV_LOADING,
    EV_MODEL_READY,
    EV_NOTE,
    EV_PROGRESS,
    EV_FINISHED,
    EV_STOPPED,
    EV_FAILED,
    EV_MEMORY,
};

typedef struct {
    int kind;
    char *text, *what;
    double a, b;
    int status, step, steps;
    gboolean ends; /* a failure that ends its request */
    GdkTexture *texture;
    RlxImagineSettings *settings;
    RlxImagineInfo *info;
    RlxMemoryInfo mem;
} Event;

typedef struct {
    char *model, *text_encoder, *vae, *preview_decoder, *device, *lora;
    int n_threads;
    uint64_t budget;
    double lora_strength;
} ModelReq;

struct _RlxImaginer {
    GObject parent_instance;

    GThread *thread;
    GMutex lock; /* guards everything down to main */
    GCond wake;
    gboolean quit;
    ModelReq *want_model; /* waiting */
    GQueue requests;      /* RlxImagineSettings *, waiting */
    gboolean running;     /* the thread works on a request */
    /* the running request's stop: the progress callback reads it, and the
     * pipeline's own cancel is called with it (see rlx_imaginer_stop) */
    volatile gint stop;
    rlx_flux2 *flux; /* set and cleared by the thread under the lock */
    RlxMailbox mail; /* reports to the main loop */

    /* worker thread only */
    char *flux_key;
    char *model_name;
    rlx_status model_status; /* why there is no model */
    char *model_error;

    /* main thread only */
    RlxImagineInfo *info;
    guint pending; /* requests asked for and not yet ended */
};

G_DEFINE_FINAL_TYPE(RlxImaginer, rlx_imaginer, G_TYPE_OBJECT)

enum {
    SIG_LOADING,
    SIG_MODEL_READY,
    SIG_NOTE,
    SIG_PROGRESS,
    SIG_FINISHED,
    SIG_STOPPED,
    SIG_FAILED,
    SIG_MEMORY,
    N_SIGNALS,
};
static guint signals[N_SIGNALS];

/* ---- settings ------------------------------------------------------------- */

RlxImagineSettings *rlx_imagine_settings_copy(const RlxImagineSettings *s)
{
    RlxImagineSettings *c = g_new(RlxImagineSettings, 1);
    *c = *s;
    c->prompt = g_strdup(s->prompt);
    c->negative = g_strdup(s->negative);
    c->init = g_strdup(s->init);
    c->ref = g_strdup(s->ref);
    c->out_png = g_strdup(s->out_png);
    c->model = g_strdup(s->model);
    return c;
}

void rlx_imagine_settings_free(RlxImagineSettings *s)
{
    if (!s)
        return;
    g_free(s->prompt);
    g_free(s->negative);
    g_free(s->init);
    g_free(s->ref);
    g_free(s->out_png);
    g_free(s->model);
    g_free(s);
}

char *rlx_imagine_settings_to_parameters(const RlxImagineSettings *s)
{
    GString *t = g_string_new(s->prompt ? s->prompt : "");
    if (s->negative && *s->negative)
        g_string_append_printf(t, "\nNegative prompt: %s", s->negative);
    char g[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(g, sizeof g, "%.3g", s->guidance);
    g_string_append_printf(t, "\nSteps: %d, Seed: %" G_GUINT64_FORMAT ", Size: %dx%d, Guidance: %s",
                           s->steps, s->seed, s->width, s->height, g);
    if (s->init) {
        g_ascii_formatd(g, sizeof g, "%.2f", s->strength);
        g_string_append_printf(t, ", Denoising strength: %s", g);
    }
    if (s->ref)
        g_string_append(t, ", Reference: 1");
    if (s->model && *s->model)
        g_string_append_printf(t, ", Model: %s", s->model);
    return g_string_free(t, FALSE);
}

static void info_free(RlxImagineInfo *i)
{
    if (!i)
        return;
    g_free(i->variant);
    g_free(i->name);
    g_free(i);
}

static void event_free(Event *e)
{
    g_free(e->text);
    g_free(e->what);
    g_clear_object(&e->texture);
    rlx_imagine_settings_free(e->settings);
    info_free(e->info);
    g_free(e);
}

static void model_req_free(ModelReq *m)
{
    if (!m)
        return;
    g_free(m->model);
    g_free(m->text_encoder);
    g_free(m->vae);
    g_free(m->preview_decoder);
    g_free(m->device);
    g_free(m->lora);
    g_free(m);
}

/* ---- main-thread dispatch ------------------------------------------------ */

static void deliver(GObject *owner, gpointer report)
{
    RlxImaginer *self = RLX_IMAGINER(owner);
    Event *e = report;
    switch (e->kind) {
    case EV_LOADING:
        g_signal_emit(self, signals[SIG_LOADING], 0, e->what, e->a);
        break;
    case EV_MODEL_READY:
        info_free(self->info);
        self->info = g_steal_pointer(&e->info);
        g_signal_emit(self, signals[SIG_MODEL_READY], 0, self->info);
        break;
    case EV_NOTE:
        g_signal_emit(self, signals[SIG_NOTE], 0, e->text);
        break;
    case EV_PROGRESS:
        g_signal_emit(self, signals[SIG_PROGRESS], 0, e->step, e->steps, e->a, e->b, e->texture);
        break;
    case EV_FINISHED:
        self->pending = self->pending ? self->pending - 1 : 0;
        g_signal_emit(self, signals[SIG_FINISHED], 0, e->texture, e->settings);
        break;
    case EV_STOPPED:
        self->pending = self->pending ? self->pending - 1 : 0;
        g_signal_emit(self, signals[SIG_STOPPED], 0, e->step, e->steps);
        break;
    case EV_FAILED:
        if (g_strcmp0(e->what, "model") == 0)
            g_clear_pointer(&self->info, info_free);
        /* a request ends with its failure, except a PNG that could not
         * be written ("finished" follows it) and a model's */
        if (e->ends)
            self->pending = self->pending ? self->pending - 1 : 0;
        g_signal_emit(self, signals[SIG_FAILED], 0, e->status, e->what, e->text);
        break;
    case EV_MEMORY:
        g_signal_emit(self, signals[SIG_MEMORY], 0, &e->mem);
        break;
    }
}

/* A step's report replaces the one before that the page has not seen
 * (keeping its preview when the newer has none). */
static gboolean replaces(gpointer last, gpointer newer)
{
    Event *l = last, *e = newer;
    if (e->kind != EV_PROGRESS || l->kind != EV_PROGRESS)
        return FALSE;
    if (!e->texture && l->texture)
        e->texture = g_steal_pointer(&l->texture);
    return TRUE;
}

static void post(RlxImaginer *self, Event *e)
{
    rlx_mailbox_post(&self->mail, e);
}

static Event *event_new(int kind, const char *what, const char *text)
{
    Event *e = g_new0(Event, 1);
    e->kind = kind;
    e->what = g_strdup(what);
    e->text = g_strdup(text);
    return e;
}

/* ends_request: the failure ends a request (the main thread counts them) */
static void post_failed(RlxImaginer *self, const char *what, rlx_status code, const char *msg,
                        gboolean ends_request)
{
    Event *e = event_new(EV_FAILED, what, msg && *msg ? msg : "failed");
    e->status = code;
    e->ends = ends_request;
    post(self, e);
}

static void post_error(RlxImaginer *self, const char *what, rlx_error *err, gboolean ends_request)
{
    post_failed(self, what, err ? rlx_error_code(err) : RLX_ERR_INTERNAL,
                err ? rlx_error_message(err) : NULL, ends_request);
}

/* ---- worker thread --------------------------------------------------------- */

static void close_model(RlxImaginer *self)
{
    g_mutex_lock(&self->lock);
    rlx_flux2 *f = self->flux;
    self->flux = NULL;
    g_mutex_unlock(&self->lock);
    rlx_flux2_free(f);
    g_clear_pointer(&self->flux_key, g_free);
    g_clear_pointer(&self->model_name, g_free);
}

static void load_model(RlxImaginer *self, ModelReq *m)
{
    g_autofree char *key =
        g_strdup_printf("%s\n%s\n%s\n%s\n%s\n%d\n%" G_GUINT64_FORMAT "\n%s\n%g", m->model,
                        m->text_encoder ? m->text_encoder : "", m->vae ? m->vae : "",
                        m->preview_decoder ? m->preview_decoder : "", m->device ? m->device : "cpu",
                        m->n_threads, m->budget, m->lora ? m->lora : "", m->lora_strength);
    if (self->flux && g_strcmp0(key, self->flux_key) == 0)
        return;
    close_model(self);
    g_clear_pointer(&self->model_error, g_free);
    Event *e = event_new(EV_LOADING, "model", NULL);
    e->a = -1;
    post(self, e);
    rlx_flux2_params p = rlx_flux2_default_params();
    p.device = m->device && *m->device ? m->device : "cpu";
    p.n_threads = m->n_threads;
    p.memory_budget = m->budget;
    p.text_encoder = m->text_encoder && *m->text_encoder ? m->text_encoder : NULL;
    p.vae = m->vae && *m->vae ? m->vae : NULL;
    p.preview_decoder = m->preview_decoder && *m->preview_decoder ? m->preview_decoder : NULL;
    if (m->lora && *m->lora) {
        p.loras[0] = (rlx_flux2_lora){m->lora, (float)m->lora_strength};
        p.n_loras = 1;
    }
    rlx_error *err = NULL;
    rlx_flux2 *f = NULL;
    if (rlx_flux2_open(m->model, &p, &f, &err) != RLX_OK) {
        self->model_status = rlx_error_code(err);
        self->model_error = g_strdup(rlx_error_message(err));
        post_error(self, "model", err, FALSE);
        rlx_error_free(err);
        return;
    }
    g_mutex_lock(&self->lock);
    self->flux = f;
    g_mutex_unlock(&self->lock);
    self->flux_key = g_steal_pointer(&key);
    rlx_flux2_info fi = rlx_flux2_get_info(f);
    g_autofree char *base = g_path_get_basename(m->model);
    self->model_name = g_strdup_printf("%s (%s)", base, fi.variant ? fi.variant : "FLUX.2");
    if (p.n_loras) {
        /* the settings a picture keeps name the LoRA too */
        g_autofree char *lb = g_path_get_basename(m->lora);
        char st[G_ASCII_DTOSTR_BUF_SIZE];
        g_ascii_formatd(st, sizeof st, "%g", m->lora_strength);
        char *with = g_strdup_printf("%s, LoRA: %s:%s", self->model_name, lb, st);
        g_free(self->model_name);
        self->model_name = with;
    }
    RlxImagineInfo *info = g_new0(RlxImagineInfo, 1);
    info->variant = g_strdup(fi.variant ? fi.variant : "FLUX.2");
    info->name = g_strdup(base);
    info->distilled = fi.distilled;
    info->guidance_embedded = fi.guidance_embedded;
    info->uses_negative = fi.uses_negative;
    info->text_kept = fi.text_kept;
    info->has_preview = fi.has_preview;
    info->default_steps = fi.default_steps;
    info->default_guidance = fi.default_guidance;
    info->bytes_text = fi.bytes_text;
    info->bytes_transformer = fi.bytes_transformer;
    info->bytes_vae = fi.bytes_vae;
    e = event_new(EV_MODEL_READY, NULL, NULL);
    e->info = info;
    post(self, e);
    e = event_new(EV_MEMORY, NULL, NULL);
    /* the text encoder is counted while it stays loaded between requests;
     * otherwise it comes and goes before the steps, which the transformer
     * and VAE then have to themselves */
    e->mem.weights = fi.bytes_transformer + fi.bytes_vae + (fi.text_kept ? fi.bytes_text : 0);
    e->mem.n_parts = 3;
    e->mem.parts[0] = fi.text_kept ? fi.bytes_text : 0;
    e->mem.parts[1] = fi.bytes_transformer;
    e->mem.parts[2] = fi.bytes_vae;
    e->mem.budget = m->budget;
    e->mem.on_gpu = m->device && *m->device && strcmp(m->device, "cpu") != 0;
    post(self, e);
}

typedef struct {
    RlxImaginer *self;
    int steps_done, steps;
} Run;

static bool on_progress(void *user, const rlx_flux2_progress *p)
{
    Run *run = user;
    RlxImaginer *self = run->self;
    if (p->stage == RLX_FLUX2_STAGE_TEXT) {
        run->steps = p->steps;
    } else if (p->stage == RLX_FLUX2_STAGE_DECODE) {
        Event *e = event_new(EV_LOADING, "decode", NULL);
        e->a = -1;
        post(self, e);
    } else {
        run->steps_done = p->step;
        run->steps = p->steps;
        Event *e = event_new(EV_PROGRESS, NULL, NULL);
        e->step = p->step;
        e->steps = p->steps;
        e->a = p->seconds;
        e->b = p->seconds_left;
        if (p->preview && p->preview_w > 0 && p->preview_h > 0) {
            GBytes *b = g_bytes_new(p->preview, (gsize)p->preview_w * (gsize)p->preview_h * 3);
            e->texture = gdk_memory_texture_new(p->preview_w, p->preview_h, GDK_MEMORY_R8G8B8, b,
                                                (gsize)p->preview_w * 3);
            g_bytes_unref(b);
        }
        post(self, e);
    }
    return !g_atomic_int_get(&self->stop);
}

static rlx_image *load_picture(RlxImaginer *self, const char *path)
{
    rlx_image_load_params lp = rlx_image_load_default_params();
    rlx_image *im = NULL;
    rlx_error *err = NULL;
    if (rlx_image_load(path, &lp, &im, &err) == RLX_OK)
        return im;
    /* the page names the file itself: the sentence without its folders */
    g_autofree char *base = g_path_get_basename(path);
    GString *m = g_string_new(rlx_error_message(err) ? rlx_error_message(err) : "");
    g_string_replace(m, path, base, 0);
    post_failed(self, "init", rlx_error_code(err), m->str, TRUE);
    g_string_free(m, TRUE);
    rlx_error_free(err);
    return NULL;
}

static void run_request(RlxImaginer *self, RlxImagineSettings *s)
{
    if (!self->flux) {
        post_failed(self, "generate", self->model_error ? self->model_status : RLX_ERR_INVALID_ARG,
                    self->model_error ? self->model_error : "no model is open: choose one first",
                    TRUE);
        return;
    }
    Event *e = event_new(EV_LOADING, "prompt", NULL);
    e->a = -1;
    post(self, e);
    gint64 t0 = g_get_monotonic_time();
    rlx_image *init = NULL, *ref = NULL;
    if (s->init && !(init = load_picture(self, s->init)))
        return;
    if (s->ref && !(ref = load_picture(self, s->ref))) {
        rlx_image_free(init);
        return;
    }
    rlx_flux2_request r = rlx_flux2_default_request(self->flux);
    r.prompt = s->prompt;
    r.negative = s->negative && *s->negative ? s->negative : NULL;
    r.width = s->width;
    r.height = s->height;
    r.steps = s->steps;
    r.seed = s->seed;
    r.guidance = (float)s->guidance;
    r.init = init;
    r.strength = (float)s->strength;
    if (ref) {
        r.refs[0] = ref;
        r.n_refs = 1;
    }
    rlx_error *err = NULL;
    char *note = NULL;
    rlx_image *out = NULL;
    rlx_status st = rlx_flux2_check_request(self->flux, &r, &note, &err);
    if (note) {
        post(self, event_new(EV_NOTE, NULL, note));
        free(note);
    }
    Run run = {.self = self, .steps = r.steps};
    for (int attempt = 0; st == RLX_OK; attempt++) {
        st = rlx_flux2_generate(self->flux, &r, on_progress, &run, &out, &err);
        /* a cancel meant for the request before that came after it ended is
         * still set in the pipeline (it stops "the running or next" one):
         * without a stop of this request's own, run it once more */
        if (st != RLX_ERR_CANCELLED || g_atomic_int_get(&self->stop) || attempt > 0)
            break;
        rlx_error_clear(&err);
        run.steps_done = 0;
    }
    rlx_image_free(init);
    rlx_image_free(ref);
    if (st == RLX_ERR_CANCELLED) {
        e = event_new(EV_STOPPED, NULL, NULL);
        e->step = run.steps_done;
        e->steps = run.steps;
        post(self, e);
        rlx_error_free(err);
        return;
    }
    if (st != RLX_OK) {
        post_error(self, "generate", err, TRUE);
        rlx_error_free(err);
        return;
    }
    RlxImagineSettings *done = rlx_imagine_settings_copy(s);
    done->width = out->width;
    done->height = out->height;
    done->steps = r.steps;
    g_free(done->model);
    done->model = g_strdup(self->model_name);
    done->seconds = (double)(g_get_monotonic_time() - t0) / 1e6;
    if (done->out_png) {
        g_autofree char *dir = g_path_get_dirname(done->out_png);
        g_mkdir_with_parents(dir, 0755);
        g_autofree char *params = rlx_imagine_settings_to_parameters(done);
        if (rlx_image_write_png_text(done->out_png, out->rgb, out->width, out->height, 3,
                                     "parameters", params, false, &err) != RLX_OK) {
            post_error(self, "save", err, FALSE);
            rlx_error_clear(&err);
            g_clear_pointer(&done->out_png, g_free);
        }
    }
    e = event_new(EV_FINISHED, NULL, NULL);
    gsize n = (gsize)out->width * (gsize)out->height * 3;
    GBytes *b = g_bytes_new_take(out->rgb, n);
    out->rgb = NULL;
    e->texture = gdk_memory_texture_new(done->width, done->height, GDK_MEMORY_R8G8B8, b,
                                        (gsize)done->width * 3);
    g_bytes_unref(b);
    rlx_image_free(out);
    e->settings = done;
    post(self, e);
}

static gpointer worker(gpointer data)
{
    RlxImaginer *self = data;
    for (;;) {
        g_mutex_lock(&self->lock);
        while (!self->quit && !self->want_model && g_queue_is_empty(&self->requests))
            g_cond_wait(&self->wake, &self->lock);
        if (self->quit) {
            g_mutex_unlock(&self->lock);
            break;
        }
        ModelReq *m = g_steal_pointer(&self->want_model);
        RlxImagineSettings *s = m ? NULL : g_queue_pop_head(&self->requests);
        if (s) {
            self->running = TRUE;
            g_atomic_int_set(&self->stop, 0);
        }
        g_mutex_unlock(&self->lock);
        if (m)
            load_model(self, m);
        if (s)
            run_request(self, s);
        g_mutex_lock(&self->lock);
        self->running = FALSE;
        g_mutex_unlock(&self->lock);
        model_req_free(m);
        rlx_imagine_settings_free(s);
    }
    close_model(self);
    g_clear_pointer(&self->model_error, g_free);
    return NULL;
}

/* ---- public ----------------------------------------------------------------- */

void rlx_imaginer_set_model(RlxImaginer *self, const RlxImagineModel *in)
{
    g_return_if_fail(RLX_IS_IMAGINER(self) && in && in->model);
    ModelReq *m = g_new0(ModelReq, 1);
    m->model = g_strdup(in->model);
    m->text_encoder = g_strdup(in->text_encoder);
    m->vae = g_strdup(in->vae);
    m->preview_decoder = g_strdup(in->preview_decoder);
    m->device = g_strdup(in->device);
    m->lora = g_strdup(in->lora);
    m->lora_strength = in->lora_strength;
    m->n_threads = in->n_threads;
    m->budget = in->budget;
    g_mutex_lock(&self->lock);
    model_req_free(self->want_model);
    self->want_model = m;
    g_cond_signal(&self->wake);
    g_mutex_unlock(&self->lock);
}

void rlx_imaginer_generate(RlxImaginer *self, const RlxImagineSettings *s)
{
    g_return_if_fail(RLX_IS_IMAGINER(self) && s);
    self->pending++;
    g_mutex_lock(&self->lock);
    g_queue_push_tail(&self->requests, rlx_imagine_settings_copy(s));
    g_cond_signal(&self->wake);
    g_mutex_unlock(&self->lock);
}

void rlx_imaginer_stop(RlxImaginer *self)
{
    g_return_if_fail(RLX_IS_IMAGINER(self));
    g_mutex_lock(&self->lock);
    guint dropped = g_queue_get_length(&self->requests);
    g_queue_clear_full(&self->requests, (GDestroyNotify)rlx_imagine_settings_free);
    self->pending -= MIN(self->pending, dropped);
    if (self->running) {
        g_atomic_int_set(&self->stop, 1);
        /* the pipeline stops after its step even inside a long one, without
         * waiting for the next progress report */
        if (self->flux)
            rlx_flux2_cancel(self->flux);
    }
    g_mutex_unlock(&self->lock);
}

gboolean rlx_imaginer_is_busy(RlxImaginer *self)
{
    return self->pending > 0;
}

const RlxImagineInfo *rlx_imaginer_get_info(RlxImaginer *self)
{
    return self->info;
}

RlxImaginer *rlx_imaginer_new(void)
{
    return g_object_new(RLX_TYPE_IMAGINER, NULL);
}

static void rlx_imaginer_init(RlxImaginer *self)
{
    g_mutex_init(&self->lock);
    g_cond_init(&self->wake);
    g_queue_init(&self->requests);
    rlx_mailbox_init(&self->mail, G_OBJECT(self), deliver, (GDestroyNotify)event_free, replaces);
    self->thread = g_thread_new("rlx-imaginer", worker, self);
}

static void rlx_imaginer_finalize(GObject *o)
{
    RlxImaginer *self = RLX_IMAGINER(o);
    g_mutex_lock(&self->lock);
    self->quit = TRUE;
    g_queue_clear_full(&self->requests, (GDestroyNotify)rlx_imagine_settings_free);
    if (self->running) {
        g_atomic_int_set(&self->stop, 1);
        if (self->flux)
            rlx_flux2_cancel(self->flux);
    }
    g_cond_signal(&self->wake);
    g_mutex_unlock(&self->lock);
    g_thread_join(self->thread);
    rlx_mailbox_clear(&self->mail);
    model_req_free(self->want_model);
    info_free(self->info);
    g_mutex_clear(&self->lock);
    g_cond_clear(&self->wake);
    G_OBJECT_CLASS(rlx_imaginer_parent_class)->finalize(o);
}

static void rlx_imaginer_class_init(RlxImaginerClass *klass)
{
    GObjectClass *oc = G_OBJECT_CLASS(klass);
    GType t = G_TYPE_FROM_CLASS(klass);
    oc->finalize = rlx_imaginer_finalize;
    signals[SIG_LOADING] = g_signal_new("loading", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                        G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_DOUBLE);
    signals[SIG_MODEL_READY] = g_signal_new("model-ready", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                            NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
    signals[SIG_NOTE] = g_signal_new("note", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE,
                                     1, G_TYPE_STRING);
    signals[SIG_PROGRESS] =
        g_signal_new("progress", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 5,
                     G_TYPE_INT, G_TYPE_INT, G_TYPE_DOUBLE, G_TYPE_DOUBLE, GDK_TYPE_TEXTURE);
    signals[SIG_FINISHED] = g_signal_new("finished", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                         G_TYPE_NONE, 2, GDK_TYPE_TEXTURE, G_TYPE_POINTER);
    signals[SIG_STOPPED] = g_signal_new("stopped", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                        G_TYPE_NONE, 2, G_TYPE_INT, G_TYPE_INT);
    signals[SIG_FAILED] = g_signal_new("failed", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                       G_TYPE_NONE, 3, G_TYPE_INT, G_TYPE_STRING, G_TYPE_STRING);
    signals[SIG_MEMORY] = g_signal_new("memory", t, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                       G_TYPE_NONE, 1, G_TYPE_POINTER);
}
