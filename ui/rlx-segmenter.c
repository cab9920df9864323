#include "rlx-segmenter.h"

#include "rlx-mailbox.h"

#include "engine/image/image.h"
#include "engine/runtime/session.h"
#include "models/isnet/isnet.h"
#include "models/sam/sam-auto.h"
#include "models/sam/sam-open.h"

#include <string.h>

enum {
    EV_LOADING,
    EV_MODEL_READY,
    EV_IMAGE_READY,
    EV_ENCODED,
    EV_MASKS,
    EV_MEMORY,
    EV_FAILED,
    EV_EVERYTHING,
    EV_CUTOUT,
};

typedef struct {
    int kind;
    char *text, *what;
    double a;
    int status;
    guint serial;
    GdkTexture *texture;
    GPtrArray *proposals;
    GBytes *alpha;
    RlxMemoryInfo mem;
} Event;

/* What the thread is asked to do; the main thread sets it under the lock
 * and wakes the thread, which takes the newest of each kind. */
typedef struct {
    char *model, *device;
    int n_threads;
    uint64_t budget;
} ModelReq;

/* A prompt and, to refine an earlier mask, that mask's low-res logits. */
typedef struct {
    RlxSegmentPrompt p;
    GBytes *mask_input; /* NULL: none */
} PromptReq;

static void prompt_req_free(PromptReq *r)
{
    if (!r)
        return;
    if (r->mask_input)
        g_bytes_unref(r->mask_input);
    g_free(r);
}

struct _RlxSegmenter {
    GObject parent_instance;

    GThread *thread;
    GMutex lock; /* guards everything down to main */
    GCond wake;
    gboolean quit;
    ModelReq *want_model; /* waiting */
    char *want_image;     /* waiting */
    PromptReq *want_prompt;
    int want_all;    /* points per side; 0: none asked */
    RlxMailbox mail; /* reports to the main loop */
    /* the runner's session reads it between instructions: set by a new
     * model or image (the newest wins) and at the end, cleared by the
     * thread when it takes the next work */
    volatile int abort;

    /* worker thread only */
    rlx_sam_file *file;
    rlx_isnet *isnet; /* in place of file, for an .onnx background-removal model */
    char *file_key;
    rlx_image *image;
    rlx_image_prep_info info;
    gboolean encoded;

    /* main thread only */
    gboolean ready;
    gboolean removes_background;
};

G_DEFINE_FINAL_TYPE(RlxSegmenter, rlx_segmenter, G_TYPE_OBJECT)

enum {
    SIG_LOADING,
    SIG_MODEL_READY,
    SIG_IMAGE_READY,
    SIG_ENCODED,
    SIG_MASKS,
    SIG_MEMORY,
    SIG_FAILED,
    SIG_EVERYTHING,
    SIG_CUTOUT,
    N_SIGNALS,
};
static guint signals[N_SIGNALS];

void rlx_segment_proposal_free(RlxSegmentProposal *p)
{
    if (!p)
        return;
    g_bytes_unref(p->mask);
    if (p->low_res)
        g_bytes_unref(p->low_res);
    g_free(p);
}

static void event_free(Event *e)
{
    g_free(e->text);
    g_free(e->what);
    g_clear_object(&e->texture);
    if (e->proposals)
        g_ptr_array_unref(e->proposals);
    if (e->alpha)
        g_bytes_unref(e->alpha);
    g_free(e);
}

static void model_req_free(ModelReq *m)
{
    if (!m)
        return;
    g_free(m->model);
    g_free(m->device);
    g_free(m);
}

/* ---- main-thread dispatch ------------------------------------------------ */

static void deliver(GObject *owner, gpointer report)
{
    RlxSegmenter *self = RLX_SEGMENTER(owner);
    Event *e = report;
    switch (e->kind) {
    case EV_LOADING:
        g_signal_emit(self, signals[SIG_LOADING], 0, e->what, e->a);
        break;
    case EV_MODEL_READY:
        self->removes_background = e->a != 0;
        g_signal_emit(self, signals[SIG_MODEL_READY], 0, e->text);
        break;
    case EV_IMAGE_READY:
        self->ready = FALSE;
        g_signal_emit(self, signals[SIG_IMAGE_READY], 0, e->texture);
        break;
    case EV_ENCODED:
        self->ready = TRUE;
        g_signal_emit(self, signals[SIG_ENCODED], 0, e->a);
        break;
    case EV_MASKS:
        g_signal_emit(self, signals[SIG_MASKS], 0, e->serial, e->proposals);
        break;
    case EV_EVERYTHING:
        g_signal_emit(self, signals[SIG_EVERYTHING], 0, e->proposals);
        break;
    case EV_CUTOUT:
        g_signal_emit(self, signals[SIG_CUTOUT], 0, e->texture, e->alpha, e->a);
        break;
    case EV_MEMORY:
        g_signal_emit(self, signals[SIG_MEMORY], 0, &e->mem);
        break;
    case EV_FAILED:
        /* a picture that could not be read leaves the last one ready */
        if (g_strcmp0(e->what, "model") == 0 || g_strcmp0(e->what, "encode") == 0)
            self->ready = FALSE;
        if (g_strcmp0(e->what, "model") == 0)
            self->removes_background = FALSE;
        g_signal_emit(self, signals[SIG_FAILED], 0, e->status, e->what, e->text);
        break;
    }
}

static void post(RlxSegmenter *self, Event *e)
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

static void post_failed(RlxSegmenter *self, const char *what, rlx_error *err)
{
    Event *e = event_new(EV_FAILED, what, err ? rlx_error_message(err) : "failed");
    e->status = err ? rlx_error_code(err) : RLX_ERR_INTERNAL;
    post(self, e);
}

/* ---- worker thread --------------------------------------------------------- */

static gboolean work_waiting(RlxSegmenter *self)
{
    return self->quit || self->want_model || self->want_image || self->want_prompt ||
           self->want_all;
}

static void post_memory(RlxSegmenter *self, rlx_session *s);

static void load_model(RlxSegmenter *self, ModelReq *m)
{
    g_autofree char *key = g_strdup_printf("%s\n%s\n%d\n%" G_GUINT64_FORMAT, m->model,
                                           m->device ? m->device : "cpu", m->n_threads, m->budget);
    if ((self->file || self->isnet) && g_strcmp0(key, self->file_key) == 0)
        return;
    rlx_sam_file_close(self->file);
    self->file = NULL;
    rlx_isnet_close(self->isnet);
    self->isnet = NULL;
    g_clear_pointer(&self->file_key, g_free);
    self->encoded = FALSE;
    Event *e = event_new(EV_LOADING, "model", NULL);
    e->a = -1;
    post(self, e);
    rlx_error *err = NULL;
    if (rlx_isnet_is_onnx_name(m->model)) {
        rlx_isnet_params ip = rlx_isnet_default_params();
        ip.device = m->device;
        ip.n_threads = m->n_threads;
        ip.memory_budget = m->budget;
        if (rlx_isnet_open(&ip, m->model, &self->isnet, &err) != RLX_OK) {
            post_failed(self, "model", err);
            rlx_error_free(err);
            return;
        }
        self->file_key = g_steal_pointer(&key);
        rlx_session_set_cancel_flag(rlx_isnet_session(self->isnet), &self->abort);
        e = event_new(EV_MODEL_READY, NULL, "ISNet");
        e->a = 1; /* removes the background */
        post(self, e);
        post_memory(self, rlx_isnet_session(self->isnet));
        return;
    }
    rlx_sam_params p = rlx_sam_default_params();
    p.device = m->device;
    p.n_threads = m->n_threads;
    p.memory_budget = m->budget;
    if (rlx_sam_open(&p, m->model, &self->file, &err) != RLX_OK) {
        post_failed(self, "model", err);
        rlx_error_free(err);
        return;
    }
    self->file_key = g_steal_pointer(&key);
    rlx_sam *sam = rlx_sam_file_runner(self->file);
    rlx_session_set_cancel_flag(rlx_sam_session(sam), &self->abort);
    rlx_sam_info info;
    post(self, event_new(EV_MODEL_READY, NULL,
                         rlx_sam_info_get(sam, &info, NULL) == RLX_OK ? info.variant : "SAM"));
    post_memory(self, rlx_sam_session(sam));
}

static void post_memory(RlxSegmenter *self, rlx_session *s)
{
    rlx_session_memory_info mi = rlx_session_memory(s);
    rlx_device_info di;
    Event *e = event_new(EV_MEMORY, NULL, NULL);
    e->mem.weights = mi.weights_bytes;
    e->mem.kv_cache = mi.state_bytes;
    e->mem.activations = mi.arena_bytes;
    e->mem.budget = mi.budget_bytes;
    if (rlx_session_device_info(s, &di, NULL) == RLX_OK)
        e->mem.device_total = di.total_memory;
    e->mem.on_gpu = strcmp(rlx_session_backend(s)->name, "cpu") != 0;
    post(self, e);
}

/* A picture that cannot be read leaves the one before (and its embedding)
 * as they were. */
static gboolean load_image(RlxSegmenter *self, const char *path)
{
    Event *e = event_new(EV_LOADING, "image", NULL);
    e->a = -1;
    post(self, e);
    rlx_error *err = NULL;
    rlx_image *im = NULL;
    rlx_image_load_params lp = rlx_image_load_default_params();
    if (rlx_image_load(path, &lp, &im, &err) != RLX_OK) {
        /* the page names the file itself: the sentence without its path */
        g_autofree char *base = g_path_get_basename(path);
        g_autofree char *msg = rlx_error_message(err) ? g_strdup(rlx_error_message(err)) : NULL;
        GString *m = g_string_new(msg ? msg : "");
        g_string_replace(m, path, base, 0);
        Event *f = event_new(EV_FAILED, "image", m->str);
        f->status = rlx_error_code(err);
        g_string_free(m, TRUE);
        post(self, f);
        rlx_error_free(err);
        return FALSE;
    }
    rlx_image_free(self->image);
    self->image = im;
    self->encoded = FALSE;
    GBytes *b = g_bytes_new(im->rgb, (gsize)im->width * (gsize)im->height * 3);
    e = event_new(EV_IMAGE_READY, NULL, NULL);
    e->texture =
        gdk_memory_texture_new(im->width, im->height, GDK_MEMORY_R8G8B8, b, (gsize)im->width * 3);
    g_bytes_unref(b);
    post(self, e);
    return TRUE;
}

/* The background removed: the alpha, and the picture with it as a texture
 * (premultiplied, ready to draw over a checkerboard). */
static void remove_background(RlxSegmenter *self)
{
    Event *e = event_new(EV_LOADING, "encoding", NULL);
    e->a = -1;
    post(self, e);
    gint64 t0 = g_get_monotonic_time();
    rlx_image *im = self->image;
    gsize npix = (gsize)im->width * (gsize)im->height;
    uint8_t *alpha = g_try_malloc(npix);
    uint8_t *rgba = g_try_malloc(npix * 4);
    rlx_error *err = NULL;
    rlx_status st = alpha && rgba ? rlx_isnet_run(self->isnet, im, alpha, NULL, &err)
                                  : rlx_error_set(&err, RLX_ERR_NO_MEMORY, "out of memory");
    if (st != RLX_OK) {
        if (st != RLX_ERR_CANCELLED) /* else newer work waits */
            post_failed(self, "encode", err);
        rlx_error_free(err);
        g_free(alpha);
        g_free(rgba);
        return;
    }
    for (gsize i = 0; i < npix; i++) {
        unsigned a = alpha[i];
        for (int c = 0; c < 3; c++)
            rgba[4 * i + c] = (uint8_t)((im->rgb[3 * i + c] * a + 127) / 255);
        rgba[4 * i + 3] = (uint8_t)a;
    }
    self->encoded = TRUE;
    double secs = (double)(g_get_monotonic_time() - t0) / 1e6;
    GBytes *b = g_bytes_new_take(rgba, npix * 4);
    e = event_new(EV_CUTOUT, NULL, NULL);
    e->texture = gdk_memory_texture_new(im->width, im->height, GDK_MEMORY_R8G8B8A8_PREMULTIPLIED, b,
                                        (gsize)im->width * 4);
    g_bytes_unref(b);
    e->alpha = g_bytes_new_take(alpha, npix);
    e->a = secs;
    post(self, e);
    e = event_new(EV_ENCODED, NULL, NULL);
    e->a = secs;
    post(self, e);
}

static void encode(RlxSegmenter *self)
{
    if (self->isnet && self->image && !self->encoded) {
        remove_background(self);
        return;
    }
    if (!self->file || !self->image || self->encoded)
        return;
    Event *e = event_new(EV_LOADING, "encoding", NULL);
    e->a = -1;
    post(self, e);
    gint64 t0 = g_get_monotonic_time();
    rlx_image_prep_params pp = rlx_sam_prep_params(rlx_sam_file_runner(self->file));
    float *chw = g_try_malloc(rlx_image_prep_floats(&pp) * sizeof *chw);
    rlx_error *err = NULL;
    rlx_status st = chw ? rlx_image_preprocess(self->image, &pp, chw, &self->info, &err)
                        : rlx_error_set(&err, RLX_ERR_NO_MEMORY, "out of memory");
    if (st == RLX_OK)
        st = rlx_sam_encode(rlx_sam_file_runner(self->file), chw, &err);
    g_free(chw);
    if (st != RLX_OK) {
        if (st != RLX_ERR_CANCELLED) /* else newer work waits */
            post_failed(self, "encode", err);
        rlx_error_free(err);
        return;
    }
    self->encoded = TRUE;
    e = event_new(EV_ENCODED, NULL, NULL);
    e->a = (double)(g_get_monotonic_time() - t0) / 1e6;
    post(self, e);
}

static void run_prompt(RlxSegmenter *self, const PromptReq *req)
{
    const RlxSegmentPrompt *p = &req->p;
    if (!self->encoded || !self->file)
        return;
    rlx_image *im = self->image;
    float sx = (float)self->info.resized_width / (float)im->width;
    float sy = (float)self->info.resized_height / (float)im->height;
    rlx_sam_point pts[RLX_SEGMENT_MAX_POINTS];
    for (int i = 0; i < p->n_points; i++)
        pts[i] = (rlx_sam_point){(float)p->points[i].x * sx, (float)p->points[i].y * sy,
                                 p->points[i].positive ? RLX_SAM_POSITIVE : RLX_SAM_NEGATIVE};
    rlx_sam_prompt pr = {.points = pts, .n_points = p->n_points, .has_box = p->has_box};
    if (p->has_box) {
        pr.box[0] = (float)p->box[0] * sx, pr.box[1] = (float)p->box[1] * sy;
        pr.box[2] = (float)p->box[2] * sx, pr.box[3] = (float)p->box[3] * sy;
    }
    /* A refinement feeds the shown mask's own low-res logits back as the
     * mask prompt, as SAM's predictor is used interactively. */
    if (req->mask_input)
        pr.mask_input = g_bytes_get_data(req->mask_input, NULL);
    /* one click alone: three proposals to pick from; more (or a mask
     * prompt): one, as SAM's predictor is used */
    gboolean multimask = p->n_points == 1 && !p->has_box && !req->mask_input;
    /* For the UI tests (G_MESSAGES_DEBUG=RlxStudio). */
    g_debug("segment prompt %u: %d points%s%s", p->serial, p->n_points, p->has_box ? ", a box" : "",
            req->mask_input ? ", the earlier mask's logits" : "");
    /* 768 KiB: on the heap, not on the worker thread's stack */
    g_autofree float *low = g_try_malloc(sizeof(float) * 3 * RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE);
    float iou[3];
    int n = 0;
    rlx_error *err = NULL;
    if (!low)
        rlx_error_set(&err, RLX_ERR_NO_MEMORY, "out of memory for the masks");
    if (!low || rlx_sam_decode(rlx_sam_file_runner(self->file), &pr, multimask, low, iou, &n,
                               &err) != RLX_OK) {
        if (rlx_error_code(err) != RLX_ERR_CANCELLED) /* else a new picture comes */
            post_failed(self, "prompt", err);
        rlx_error_free(err);
        return;
    }
    size_t npix = (size_t)im->width * (size_t)im->height;
    float *logits = g_try_malloc(npix * sizeof *logits);
    GPtrArray *props = g_ptr_array_new_with_free_func((GDestroyNotify)rlx_segment_proposal_free);
    rlx_image_prep_params pp = rlx_sam_prep_params(rlx_sam_file_runner(self->file));
    rlx_sam_info info = {0};
    bool sam2 =
        rlx_sam_info_get(rlx_sam_file_runner(self->file), &info, NULL) == RLX_OK && info.sam2;
    for (int k = 0; k < n && logits; k++) {
        uint8_t *mask = g_try_malloc(npix);
        rlx_sam_proposal sp;
        if (!mask ||
            rlx_sam_proposal_make(low + (size_t)k * RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE, iou[k],
                                  &pp, &self->info, logits, mask, &sp, &err) != RLX_OK) {
            g_free(mask);
            break;
        }
        RlxSegmentProposal *r = g_new0(RlxSegmentProposal, 1);
        r->iou = sp.iou;
        r->stability = sp.stability;
        r->area = sp.area;
        memcpy(r->box, sp.box, sizeof r->box);
        r->width = im->width;
        r->height = im->height;
        r->mask = g_bytes_new_take(mask, npix);
        /* SAM 2's predictor hands back its low-res logits clamped to
         * +-32 (what a refinement then gets); SAM's does not clamp */
        float *lr = g_memdup2(low + (size_t)k * RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE,
                              sizeof(float) * RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE);
        if (sam2)
            for (int i = 0; i < RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE; i++)
                lr[i] = lr[i] < -32.0f ? -32.0f : lr[i] > 32.0f ? 32.0f : lr[i];
        r->low_res = g_bytes_new_take(lr, sizeof(float) * RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE);
        /* best (predicted IoU) first */
        guint at = 0;
        while (at < props->len && ((RlxSegmentProposal *)props->pdata[at])->iou >= r->iou)
            at++;
        g_ptr_array_insert(props, (gint)at, r);
    }
    g_free(logits);
    if ((int)props->len < n) {
        if (!err)
            rlx_error_set(&err, RLX_ERR_NO_MEMORY, "out of memory for the image's masks");
        post_failed(self, "prompt", err);
        rlx_error_free(err);
        g_ptr_array_unref(props);
        return;
    }
    Event *e = event_new(EV_MASKS, NULL, NULL);
    e->serial = p->serial;
    e->proposals = props;
    post(self, e);
}

static bool all_progress(void *user, int done, int total)
{
    RlxSegmenter *self = user;
    Event *e = event_new(EV_LOADING, "everything", NULL);
    e->a = total ? (double)done / total : 0;
    post(self, e);
    return !self->abort;
}

static void run_all(RlxSegmenter *self, int points_per_side)
{
    if (!self->encoded || !self->file)
        return;
    rlx_sam_auto_params ap = rlx_sam_auto_default_params();
    ap.points_per_side = points_per_side;
    rlx_image_prep_params pp = rlx_sam_prep_params(rlx_sam_file_runner(self->file));
    rlx_sam_auto_mask *m = NULL;
    int n = 0;
    rlx_error *err = NULL;
    if (rlx_sam_segment_all(rlx_sam_file_runner(self->file), &pp, &self->info, &ap, all_progress,
                            self, &m, &n, &err) != RLX_OK) {
        post_failed(self, "everything", err);
        rlx_error_free(err);
        return;
    }
    GPtrArray *props = g_ptr_array_new_with_free_func((GDestroyNotify)rlx_segment_proposal_free);
    for (int k = 0; k < n; k++) {
        RlxSegmentProposal *r = g_new0(RlxSegmentProposal, 1);
        r->iou = m[k].iou;
        r->stability = m[k].stability;
        r->area = m[k].area;
        memcpy(r->box, m[k].box, sizeof r->box);
        r->width = m[k].width;
        r->height = m[k].height;
        r->mask = g_bytes_new_take(m[k].mask, (gsize)m[k].width * (gsize)m[k].height);
        m[k].mask = NULL;
        g_ptr_array_add(props, r);
    }
    rlx_sam_auto_masks_free(m, n);
    Event *e = event_new(EV_EVERYTHING, NULL, NULL);
    e->proposals = props;
    post(self, e);
}

static gpointer worker(gpointer data)
{
    RlxSegmenter *self = data;
    for (;;) {
        g_mutex_lock(&self->lock);
        while (!work_waiting(self))
            g_cond_wait(&self->wake, &self->lock);
        if (self->quit) {
            g_mutex_unlock(&self->lock);
            break;
        }
        ModelReq *m = g_steal_pointer(&self->want_model);
        char *image = g_steal_pointer(&self->want_image);
        PromptReq *p = image || m ? NULL : g_steal_pointer(&self->want_prompt);
        int all = image || m || p ? 0 : self->want_all;
        if (all || image)
            self->want_all = 0;
        if (image)
            g_clear_pointer(&self->want_prompt, prompt_req_free); /* for the image before */
        self->abort = 0;
        g_mutex_unlock(&self->lock);
        if (m)
            load_model(self, m);
        gboolean fresh = image && load_image(self, image);
        if (m || fresh)
            encode(self);
        if (p)
            run_prompt(self, p);
        if (all)
            run_all(self, all);
        model_req_free(m);
        g_free(image);
        prompt_req_free(p);
    }
    rlx_sam_file_close(self->file);
    self->file = NULL;
    rlx_isnet_close(self->isnet);
    self->isnet = NULL;
    rlx_image_free(self->image);
    self->image = NULL;
    return NULL;
}

/* ---- public ----------------------------------------------------------------- */

static void kick(RlxSegmenter *self)
{
    g_cond_signal(&self->wake);
    g_mutex_unlock(&self->lock);
}

void rlx_segmenter_set_model(RlxSegmenter *self, const char *path, const char *device,
                             int n_threads, uint64_t budget)
{
    ModelReq *m = g_new0(ModelReq, 1);
    m->model = g_strdup(path);
    m->device = g_strdup(device);
    m->n_threads = n_threads;
    m->budget = budget;
    g_mutex_lock(&self->lock);
    model_req_free(self->want_model);
    self->want_model = m;
    self->abort = 1;
    kick(self);
}

void rlx_segmenter_open_image(RlxSegmenter *self, const char *path)
{
    /* still ready until the new picture is read: one that cannot be read
     * leaves the last one */
    g_mutex_lock(&self->lock);
    g_free(self->want_image);
    self->want_image = g_strdup(path);
    self->abort = 1;
    kick(self);
}

void rlx_segmenter_prompt(RlxSegmenter *self, const RlxSegmentPrompt *p, GBytes *mask_input)
{
    PromptReq *r = g_new0(PromptReq, 1);
    r->p = *p;
    if (mask_input &&
        g_bytes_get_size(mask_input) == sizeof(float) * RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE)
        r->mask_input = g_bytes_ref(mask_input);
    g_mutex_lock(&self->lock);
    prompt_req_free(self->want_prompt);
    self->want_prompt = r;
    kick(self);
}

void rlx_segmenter_segment_all(RlxSegmenter *self, int points_per_side)
{
    g_mutex_lock(&self->lock);
    self->want_all = points_per_side > 0 ? points_per_side : 16;
    kick(self);
}

gboolean rlx_segmenter_is_ready(RlxSegmenter *self)
{
    return self->ready;
}

gboolean rlx_segmenter_removes_background(RlxSegmenter *self)
{
    return self->removes_background;
}

RlxSegmenter *rlx_segmenter_new(void)
{
    return g_object_new(RLX_TYPE_SEGMENTER, NULL);
}

static void rlx_segmenter_init(RlxSegmenter *self)
{
    g_mutex_init(&self->lock);
    g_cond_init(&self->wake);
    rlx_mailbox_init(&self->mail, G_OBJECT(self), deliver, (GDestroyNotify)event_free, NULL);
    self->thread = g_thread_new("rlx-segmenter", worker, self);
}

static void rlx_segmenter_finalize(GObject *o)
{
    RlxSegmenter *self = RLX_SEGMENTER(o);
    g_mutex_lock(&self->lock);
    self->quit = TRUE;
    self->abort = 1;
    g_cond_signal(&self->wake);
    g_mutex_unlock(&self->lock);
    g_thread_join(self->thread);
    rlx_mailbox_clear(&self->mail);
    model_req_free(self->want_model);
    g_free(self->want_image);
    prompt_req_free(self->want_prompt);
    g_free(self->file_key);
    g_mutex_clear(&self->lock);
    g_cond_clear(&self->wake);
    G_OBJECT_CLASS(rlx_segmenter_parent_class)->finalize(o);
}

static void rlx_segmenter_class_init(RlxSegmenterClass *klass)
{
    GObjectClass *oc = G_OBJECT_CLASS(klass);
    oc->finalize = rlx_segmenter_finalize;
    signals[SIG_LOADING] =
        g_signal_new("loading", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                     G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_DOUBLE);
    signals[SIG_MODEL_READY] =
        g_signal_new("model-ready", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
    signals[SIG_IMAGE_READY] =
        g_signal_new("image-ready", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 1, GDK_TYPE_TEXTURE);
    signals[SIG_ENCODED] = g_signal_new("encoded", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                        NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_DOUBLE);
    signals[SIG_MASKS] = g_signal_new("masks", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                      NULL, NULL, G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_PTR_ARRAY);
    signals[SIG_EVERYTHING] =
        g_signal_new("everything", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                     G_TYPE_NONE, 1, G_TYPE_PTR_ARRAY);
    signals[SIG_CUTOUT] =
        g_signal_new("cutout", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                     G_TYPE_NONE, 3, GDK_TYPE_TEXTURE, G_TYPE_BYTES, G_TYPE_DOUBLE);
    signals[SIG_MEMORY] = g_signal_new("memory", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                       NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
    signals[SIG_FAILED] =
        g_signal_new("failed", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                     G_TYPE_NONE, 3, G_TYPE_INT, G_TYPE_STRING, G_TYPE_STRING);
}
