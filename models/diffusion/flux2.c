/* The FLUX.2 [klein] pipeline (see flux2.h): the components are opened from a
 * diffusers folder or from the files given, the memory budget decides whether
 * the text encoder stays, and generate runs the reference pipeline's steps:
 *
 *   1. the prompt (and, for classifier-free guidance, the negative prompt)
 *      through the Qwen3 text encoder (flux2-text.h);
 *   2. seeded Gaussian noise in the packed latent layout [128][H/16][W/16]
 *      (flux2-sched.h), or, image-to-image, the encoded start picture noised
 *      to the strength's first sigma;
 *   3. for each sigma of the schedule (flux2-sched.h), the transformer's
 *      velocity (flux2-dit.h), guided as v_neg + g (v - v_neg) when the model
 *      uses a negative prompt, then the Euler step x += (s_next - s) v;
 *      reference pictures (editing) are encoded once and passed with their
 *      own positions;
 *   4. the VAE's decode (flux2-vae.h) to pixels; after each step, when a
 *      preview decoder is given, TAEF2 (taef2.h) decodes the latents for a
 *      preview. */
#include "models/diffusion/flux2.h"

#include <dirent.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <json-c/json.h>

#include "models/diffusion/flux2-dit.h"
#include "models/diffusion/flux2-sched.h"
#include "models/diffusion/flux2-text.h"
#include "models/diffusion/flux2-vae.h"
#include "models/diffusion/taef2.h"

#define LATENT_CH 128 /* packed: 32 VAE channels x 2 x 2 */
#define SCALE     16  /* pixels per packed latent */
/* Reference pictures larger than this many pixels are scaled down to it, as
 * the reference pipeline does. */
#define REF_MAX_PIXELS (1024 * 1024)

struct rlx_flux2 {
    rlx_flux2_params p;
    char *device;
    char *text_path; /* where the text encoder is opened from (again, if released) */
    rlx_flux2_text *text;
    rlx_flux2_dit *dit;
    rlx_flux2_vae *vae;
    rlx_taef2 *preview;
    rlx_flux2_info info;
    char variant[32];
    atomic_bool cancel;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

/* Bytes of a file, or of the weight files directly in a folder. */
static uint64_t path_bytes(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0)
        return 0;
    if (!S_ISDIR(st.st_mode))
        return (uint64_t)st.st_size;
    uint64_t total = 0;
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        bool weights = (n > 12 && strcmp(e->d_name + n - 12, ".safetensors") == 0) ||
                       (n > 5 && strcmp(e->d_name + n - 5, ".gguf") == 0);
        if (!weights)
            continue;
        char *f = join(path, e->d_name);
        if (f && stat(f, &st) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
        free(f);
    }
    closedir(d);
    return total;
}

/* model_index.json's "is_distilled" (the klein pipelines' own flag): 1, 0,
 * or -1 when the folder does not say. */
static int folder_distilled(const char *root)
{
    char *idx = join(root, "model_index.json");
    if (!idx)
        return -1;
    json_object *o = json_object_from_file(idx);
    free(idx);
    if (!o)
        return -1;
    json_object *v;
    int r = -1;
    if (json_object_object_get_ex(o, "is_distilled", &v))
        r = json_object_get_boolean(v) ? 1 : 0;
    json_object_put(o);
    return r;
}

/* "1.2 GiB", "35.0 MiB": the budget sentences name sizes a person reads */
static const char *human_size(uint64_t bytes, char buf[32])
{
    if (bytes >= (uint64_t)1 << 30)
        snprintf(buf, 32, "%.1f GiB", (double)bytes / (1 << 30));
    else
        snprintf(buf, 32, "%.1f MiB", (double)bytes / (1 << 20));
    return buf;
}

rlx_flux2_params rlx_flux2_default_params(void)
{
    rlx_flux2_params p;
    memset(&p, 0, sizeof p);
    p.distilled = -1;
    return p;
}

static rlx_status open_text(rlx_flux2 *f, rlx_error **err)
{
    if (f->text)
        return RLX_OK;
    rlx_flux2_text_params tp = rlx_flux2_text_default_params();
    tp.device = f->device;
    tp.n_threads = f->p.n_threads;
    tp.memory_budget = f->p.memory_budget;
    return rlx_flux2_text_open(f->text_path, &tp, &f->text, err);
}

void rlx_flux2_free(rlx_flux2 *f)
{
    if (!f)
        return;
    rlx_flux2_text_free(f->text);
    rlx_flux2_dit_free(f->dit);
    rlx_flux2_vae_free(f->vae);
    rlx_taef2_free(f->preview);
    free(f->device);
    free(f->text_path);
    free(f);
}

rlx_status rlx_flux2_open(const char *model, const rlx_flux2_params *p, rlx_flux2 **out,
                          rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!model || !p || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "flux2: no model was given");
    if (p->n_loras < 0 || p->n_loras > RLX_FLUX2_MAX_LORAS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "flux2: at most %d LoRA files",
                             RLX_FLUX2_MAX_LORAS);
    if (!exists(model))
        return rlx_error_set(err, RLX_ERR_IO, "%s does not exist", model);

    rlx_flux2 *f = calloc(1, sizeof *f);
    if (!f)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "flux2: out of memory");
    f->p = *p;
    f->device = strdup(p->device ? p->device : "cpu");
    rlx_status st = RLX_OK;

    /* Which files: a diffusers folder holds all three; a single transformer
     * file needs the other two named. */
    bool folder = is_dir(model);
    char *root_idx = folder ? join(model, "model_index.json") : NULL;
    bool root = root_idx && exists(root_idx);
    free(root_idx);
    char *dit_path = root ? join(model, "transformer") : strdup(model);
    char *vae_path = p->vae ? strdup(p->vae) : root ? join(model, "vae") : NULL;
    f->text_path = p->text_encoder ? strdup(p->text_encoder) : root ? strdup(model) : NULL;
    if (!dit_path || (!vae_path && (root || p->vae)) ||
        (!f->text_path && (root || p->text_encoder)))
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "flux2: out of memory");
    else if (!f->text_path)
        st = rlx_error_set(err, RLX_ERR_INVALID_ARG,
                           "%s is a single transformer file: the text encoder (a Qwen3 .gguf or a "
                           "text_encoder folder) must be given too",
                           model);
    else if (!vae_path)
        st = rlx_error_set(err, RLX_ERR_INVALID_ARG,
                           "%s is a single transformer file: the VAE (its .safetensors or vae "
                           "folder) must be given too",
                           model);
    else if (root && !p->text_encoder) {
        char *te = join(model, "text_encoder");
        bool ok = te && is_dir(te);
        free(te);
        if (!ok)
            st = rlx_error_set(err, RLX_ERR_FORMAT,
                               "%s has no text_encoder folder: a FLUX.2 [klein] folder holds "
                               "transformer/, text_encoder/, tokenizer/ and vae/",
                               model);
    }
    if (st == RLX_OK && root && !is_dir(dit_path))
        st = rlx_error_set(err, RLX_ERR_FORMAT,
                           "%s has no transformer folder: a FLUX.2 [klein] folder holds "
                           "transformer/, text_encoder/, tokenizer/ and vae/",
                           model);
    if (st == RLX_OK && root && !p->vae && !is_dir(vae_path))
        st = rlx_error_set(err, RLX_ERR_FORMAT,
                           "%s has no vae folder: a FLUX.2 [klein] folder holds transformer/, "
                           "text_encoder/, tokenizer/ and vae/",
                           model);

    /* The budget, weighed before anything is loaded. */
    if (st == RLX_OK) {
        char *te_dir = root && !p->text_encoder ? join(model, "text_encoder") : NULL;
        f->info.bytes_text = path_bytes(te_dir ? te_dir : f->text_path);
        free(te_dir);
        f->info.bytes_transformer = path_bytes(dit_path);
        f->info.bytes_vae = path_bytes(vae_path) + path_bytes(p->preview_decoder);
        uint64_t b = p->memory_budget;
        uint64_t core = f->info.bytes_transformer + f->info.bytes_vae;
        f->info.text_kept = b == 0 || core + f->info.bytes_text <= b;
        char need[32], have[32];
        if (b && core > b)
            st = rlx_error_set(err, RLX_ERR_BUDGET,
                               "this FLUX.2 model needs %s for its transformer and VAE, more than "
                               "the memory budget of %s",
                               human_size(core, need), human_size(b, have));
        else if (b && f->info.bytes_text > b)
            st = rlx_error_set(err, RLX_ERR_BUDGET,
                               "this FLUX.2 model's text encoder needs %s, more than the memory "
                               "budget of %s",
                               human_size(f->info.bytes_text, need), human_size(b, have));
    }

    if (st == RLX_OK) {
        rlx_flux2_dit_params dp = rlx_flux2_dit_default_params();
        dp.device = f->device;
        dp.n_threads = p->n_threads;
        dp.memory_budget = p->memory_budget;
        rlx_flux2_dit_lora loras[RLX_FLUX2_MAX_LORAS];
        for (int i = 0; i < p->n_loras; i++)
            loras[i] = (rlx_flux2_dit_lora){p->loras[i].path, p->loras[i].scale};
        dp.loras = loras;
        dp.n_loras = p->n_loras;
        st = rlx_flux2_dit_open(dit_path, &dp, &f->dit, err);
    }
    if (st == RLX_OK) {
        rlx_flux2_vae_params vp = rlx_flux2_vae_default_params();
        vp.device = f->device;
        vp.n_threads = p->n_threads;
        vp.memory_budget = p->memory_budget;
        st = rlx_flux2_vae_open(vae_path, &vp, &f->vae, err);
    }
    if (st == RLX_OK && p->preview_decoder) {
        rlx_taef2_params tp = rlx_taef2_default_params();
        tp.device = f->device;
        tp.n_threads = p->n_threads;
        tp.memory_budget = p->memory_budget;
        st = rlx_taef2_create(&tp, NULL, p->preview_decoder, &f->preview, err);
    }
    if (st == RLX_OK && f->info.text_kept)
        st = open_text(f, err);
    free(dit_path);
    free(vae_path);
    if (st != RLX_OK) {
        rlx_flux2_free(f);
        return st;
    }

    const rlx_flux2_dit_config *c = rlx_flux2_dit_get_config(f->dit);
    snprintf(f->variant, sizeof f->variant, "%s", c->name[0] ? c->name : "flux2");
    int distilled = root ? folder_distilled(model) : -1;
    f->info.variant = f->variant;
    if (p->distilled >= 0)
        distilled = p->distilled ? 1 : 0;
    else if (distilled < 0)
        distilled = c->distilled >= 0 ? c->distilled : 1;
    f->info.distilled = distilled == 1;
    f->info.guidance_embedded = c->guidance_embeds;
    f->info.uses_negative = !f->info.distilled && !c->guidance_embeds;
    f->info.default_steps = f->info.distilled ? 4 : 50;
    f->info.default_guidance = f->info.distilled ? 1.0f : 4.0f;
    f->info.has_preview = f->preview != NULL;
    *out = f;
    return RLX_OK;
}

rlx_flux2_info rlx_flux2_get_info(const rlx_flux2 *f)
{
    return f->info;
}

rlx_flux2_request rlx_flux2_default_request(const rlx_flux2 *f)
{
    rlx_flux2_request r;
    memset(&r, 0, sizeof r);
    r.width = r.height = 1024;
    r.steps = f ? f->info.default_steps : 4;
    r.guidance = f ? f->info.default_guidance : 1.0f;
    r.strength = 0.6f;
    return r;
}

static int round16(int v)
{
    int r = (v + SCALE / 2) / SCALE * SCALE;
    return r < SCALE ? SCALE : r;
}

static bool blank(const char *s)
{
    for (; s && *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
            return false;
    return true;
}

rlx_status rlx_flux2_check_request(const rlx_flux2 *f, rlx_flux2_request *r, char **note,
                                   rlx_error **err)
{
    (void)f;
    if (note)
        *note = NULL;
    if (!r)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no request");
    if (!r->prompt || blank(r->prompt))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the prompt is empty: say what the picture should show");
    if (r->steps < 1 || r->steps > RLX_FLUX2_MAX_STEPS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "steps must be between 1 and %d, not %d",
                             RLX_FLUX2_MAX_STEPS, r->steps);
    if (!isfinite(r->guidance) || r->guidance < 0 || r->guidance > 100)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the guidance must be between 0 and 100");
    for (int i = 0; i < 2; i++) {
        int v = i ? r->height : r->width;
        if (v < RLX_FLUX2_MIN_SIDE || v > RLX_FLUX2_MAX_SIDE)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "the %s must be between %d and %d pixels, not %d",
                                 i ? "height" : "width", RLX_FLUX2_MIN_SIDE, RLX_FLUX2_MAX_SIDE, v);
    }
    if (r->init && (!isfinite(r->strength) || r->strength < 0 || r->strength > 1))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the strength must be between 0 and 1");
    if (r->n_refs < 0 || r->n_refs > RLX_FLUX2_MAX_REFS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "at most %d reference pictures",
                             RLX_FLUX2_MAX_REFS);
    for (int i = 0; i < r->n_refs; i++)
        if (!r->refs[i] || r->refs[i]->width < SCALE || r->refs[i]->height < SCALE)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "reference picture %d is smaller than 16 x 16 pixels", i + 1);
    if (r->init && (r->init->width < SCALE || r->init->height < SCALE))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the start picture is smaller than 16 x 16 pixels");
    int w = round16(r->width), h = round16(r->height);
    if ((w != r->width || h != r->height) && note) {
        char buf[160];
        snprintf(buf, sizeof buf, "%d x %d is not a multiple of 16 on both sides: made %d x %d",
                 r->width, r->height, w, h);
        *note = strdup(buf);
    }
    r->width = w;
    r->height = h;
    return RLX_OK;
}

void rlx_flux2_cancel(rlx_flux2 *f)
{
    if (!f)
        return;
    atomic_store(&f->cancel, true);
    rlx_flux2_dit_cancel(f->dit, true); /* a running step stops too */
}

/* A picture at w x h for the VAE: scaled to cover and cropped at the centre
 * (the reference pipeline's resize_mode "crop"), as 3 x h x w floats in
 * [0, 1]. */
static rlx_status picture_floats(const rlx_image *img, int w, int h, float **out, rlx_error **err)
{
    *out = NULL;
    double s = fmax((double)w / img->width, (double)h / img->height);
    int sw = (int)ceil(img->width * s - 1e-9), sh = (int)ceil(img->height * s - 1e-9);
    if (sw < w)
        sw = w;
    if (sh < h)
        sh = h;
    uint8_t *scaled = malloc((size_t)sw * sh * 3);
    float *f = malloc(sizeof(float) * 3 * (size_t)w * h);
    if (!scaled || !f) {
        free(scaled);
        free(f);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for a %d x %d picture", w, h);
    }
    rlx_status st =
        rlx_image_resize_pil_bilinear(img->rgb, img->width, img->height, 3, scaled, sw, sh, err);
    if (st == RLX_OK) {
        int x0 = (sw - w) / 2, y0 = (sh - h) / 2;
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                    f[((size_t)c * h + y) * w + x] =
                        scaled[((size_t)(y + y0) * sw + (x + x0)) * 3 + c] / 255.0f;
    }
    free(scaled);
    if (st != RLX_OK) {
        free(f);
        return st;
    }
    *out = f;
    return RLX_OK;
}

static uint8_t to_byte(float v)
{
    if (!(v > 0))
        return 0;
    if (v >= 1)
        return 255;
    return (uint8_t)lrintf(v * 255.0f);
}

/* 3 x h x w floats in [0, 1] to an RGB picture. */
static rlx_image *to_image(const float *chw, int w, int h)
{
    rlx_image *img = calloc(1, sizeof *img);
    if (!img)
        return NULL;
    img->rgb = malloc((size_t)w * h * 3);
    if (!img->rgb) {
        free(img);
        return NULL;
    }
    img->width = w;
    img->height = h;
    size_t plane = (size_t)w * h;
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++)
            img->rgb[i * 3 + c] = to_byte(chw[c * plane + i]);
    return img;
}

typedef struct {
    float *cond, *uncond;
    int n_cond, n_uncond, dim;
    float *x, *v, *v_neg, *sigmas;
    float *refs[RLX_FLUX2_MAX_REFS];
    int ref_lh[RLX_FLUX2_MAX_REFS], ref_lw[RLX_FLUX2_MAX_REFS];
    float *lat32, *rgb;
    uint8_t *preview;
} work;

static void work_free(work *w)
{
    free(w->cond);
    free(w->uncond);
    free(w->x);
    free(w->v);
    free(w->v_neg);
    free(w->sigmas);
    for (int i = 0; i < RLX_FLUX2_MAX_REFS; i++)
        free(w->refs[i]);
    free(w->lat32);
    free(w->rgb);
    free(w->preview);
}

static rlx_status encode_prompts(rlx_flux2 *f, const rlx_flux2_request *r, bool cfg, work *w,
                                 rlx_error **err)
{
    rlx_status st = open_text(f, err);
    if (st == RLX_OK)
        st = rlx_flux2_text_encode(f->text, r->prompt, &w->cond, &w->n_cond, &w->dim, err);
    if (st == RLX_OK && cfg) {
        int dim = 0;
        st = rlx_flux2_text_encode_negative(f->text, r->negative, &w->uncond, &w->n_uncond, &dim,
                                            err);
    }
    if (!f->info.text_kept) {
        /* Released before denoising: the budget holds the transformer and
         * the VAE, not all three. */
        rlx_flux2_text_free(f->text);
        f->text = NULL;
    }
    if (st == RLX_OK && w->dim != rlx_flux2_dit_get_config(f->dit)->joint_dim)
        st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                           "the text encoder gives %d features a token, but this transformer "
                           "takes %d: they belong to different FLUX.2 models",
                           w->dim, rlx_flux2_dit_get_config(f->dit)->joint_dim);
    return st;
}

/* Reference pictures as the reference pipeline prepares them: at most
 * REF_MAX_PIXELS (scaled down keeping the aspect), both sides cut down to
 * a multiple of 16, encoded to packed latents. */
static rlx_status encode_refs(rlx_flux2 *f, const rlx_flux2_request *r, work *w, rlx_error **err)
{
    for (int i = 0; i < r->n_refs; i++) {
        const rlx_image *img = r->refs[i];
        double s = 1;
        double px = (double)img->width * img->height;
        if (px > REF_MAX_PIXELS)
            s = sqrt(REF_MAX_PIXELS / px);
        int rw = (int)(img->width * s) / SCALE * SCALE, rh = (int)(img->height * s) / SCALE * SCALE;
        if (rw < SCALE || rh < SCALE)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "reference picture %d is too narrow for FLUX.2 (16 pixels a side "
                                 "at least)",
                                 i + 1);
        float *pix = NULL;
        rlx_status st = picture_floats(img, rw, rh, &pix, err);
        if (st != RLX_OK)
            return st;
        w->ref_lh[i] = rh / SCALE;
        w->ref_lw[i] = rw / SCALE;
        w->refs[i] = malloc(sizeof(float) * LATENT_CH * (size_t)w->ref_lh[i] * w->ref_lw[i]);
        st = w->refs[i] ? rlx_flux2_vae_encode(f->vae, pix, rh, rw, w->refs[i], err)
                        : rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        free(pix);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

/* Previews at most this many pixels: a larger picture's latents are averaged
 * over 2 x 2 (or 4 x 4) cells first, so that TAEF2 decodes a quarter (or a
 * sixteenth) of them; a preview shows the picture forming, not its detail,
 * and at 1024 x 1024 a full-size decode on two cores took longer than a
 * quarter of a step. */
#define PREVIEW_MAX_PIXELS (512 * 512)

/* The preview's pooling factor for a packed latent of lh x lw. */
static int preview_pool(int lh, int lw)
{
    int p = 1;
    while ((size_t)lh * lw * SCALE * SCALE / ((size_t)p * p) > PREVIEW_MAX_PIXELS && p < 4 &&
           (2 * lh) % (2 * p) == 0 && (2 * lw) % (2 * p) == 0)
        p *= 2;
    return p;
}

/* The TAEF2 preview of the latents as they are after a step: *pw x *ph
 * pixels in w->preview. */
static rlx_status make_preview(rlx_flux2 *f, int lh, int lw, work *w, int *pw, int *ph,
                               rlx_error **err)
{
    int pool = preview_pool(lh, lw);
    int sh = 2 * lh / pool, sw = 2 * lw / pool; /* the raw latent's side, pooled */
    size_t px = (size_t)sh * sw * 64;           /* TAEF2: 8 x 8 pixels a latent */
    if (!w->lat32) {
        w->lat32 = malloc(sizeof(float) * LATENT_CH * (size_t)lh * lw);
        w->rgb = malloc(sizeof(float) * 3 * px);
        w->preview = malloc(3 * px);
        if (!w->lat32 || !w->rgb || !w->preview)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the preview");
    }
    rlx_status st = rlx_flux2_vae_unpack(f->vae, w->x, lh, lw, w->lat32);
    if (st == RLX_OK && pool > 1) {
        /* in place: each pooled cell is written at or before the first one it reads */
        int H = 2 * lh, W = 2 * lw;
        float inv = 1.0f / (float)(pool * pool);
        for (int c = 0; c < LATENT_CH / 4; c++)
            for (int y = 0; y < sh; y++)
                for (int x = 0; x < sw; x++) {
                    float sum = 0;
                    for (int dy = 0; dy < pool; dy++)
                        for (int dx = 0; dx < pool; dx++)
                            sum += w->lat32[((size_t)c * H + y * pool + dy) * W + x * pool + dx];
                    w->lat32[((size_t)c * sh + y) * sw + x] = sum * inv;
                }
    }
    if (st == RLX_OK)
        st = rlx_taef2_decode(f->preview, w->lat32, sh, sw, w->rgb, err);
    if (st != RLX_OK)
        return st;
    for (size_t i = 0; i < px; i++)
        for (int c = 0; c < 3; c++)
            w->preview[i * 3 + c] = to_byte(w->rgb[c * px + i]);
    *pw = sw * 8;
    *ph = sh * 8;
    return RLX_OK;
}

rlx_status rlx_flux2_generate(rlx_flux2 *f, const rlx_flux2_request *req, rlx_flux2_progress_fn fn,
                              void *user, rlx_image **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!f || !req || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "flux2: nothing to generate");
    rlx_flux2_request r = *req;
    rlx_status st = rlx_flux2_check_request(f, &r, NULL, err);
    if (st != RLX_OK)
        return st;
    atomic_store(&f->cancel, false);
    rlx_flux2_dit_cancel(f->dit, false);
    double t0 = now_s();
    int lh = r.height / SCALE, lw = r.width / SCALE;
    size_t n_lat = (size_t)LATENT_CH * lh * lw;
    bool cfg = f->info.uses_negative && r.guidance > 1.0f;
    rlx_flux2_progress pr = {.steps = r.steps, .seconds_left = -1};
    work w;
    memset(&w, 0, sizeof w);

#define STOPPED() (atomic_load(&f->cancel))
#define REPORT()                            \
    do {                                    \
        pr.seconds = now_s() - t0;          \
        if (fn && !fn(user, &pr))           \
            atomic_store(&f->cancel, true); \
    } while (0)

    st = encode_prompts(f, &r, cfg, &w, err);
    if (st == RLX_OK) {
        pr.stage = RLX_FLUX2_STAGE_TEXT;
        REPORT();
    }
    if (st == RLX_OK && STOPPED())
        st = rlx_error_set(err, RLX_ERR_CANCELLED, "stopped");
    if (st == RLX_OK)
        st = encode_refs(f, &r, &w, err);

    /* The schedule, and where image-to-image starts in it. */
    int first = 0;
    if (st == RLX_OK) {
        w.x = malloc(sizeof(float) * n_lat);
        w.v = malloc(sizeof(float) * n_lat);
        w.v_neg = cfg ? malloc(sizeof(float) * n_lat) : NULL;
        w.sigmas = malloc(sizeof(float) * ((size_t)r.steps + 1));
        if (!w.x || !w.v || (cfg && !w.v_neg) || !w.sigmas)
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the latents");
    }
    if (st == RLX_OK) {
        rlx_flux2_sigmas(r.steps, lh * lw, w.sigmas);
        rlx_flux2_noise(r.seed, w.x, n_lat);
    }
    if (st == RLX_OK && r.init) {
        /* Flow matching's forward process: x = s * noise + (1 - s) * x0 at
         * the first sigma the strength keeps. */
        first = r.strength > 0 ? rlx_flux2_img2img_start(r.steps, r.strength) : r.steps;
        if (first < 0)
            first = r.steps;
        float *pix = NULL, *x0 = malloc(sizeof(float) * n_lat);
        st = x0 ? picture_floats(r.init, r.width, r.height, &pix, err)
                : rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        if (st == RLX_OK)
            st = rlx_flux2_vae_encode(f->vae, pix, r.height, r.width, x0, err);
        if (st == RLX_OK)
            rlx_flux2_img2img_noise(x0, w.x, w.sigmas[first], w.x, n_lat);
        free(pix);
        free(x0);
    }

    const float *ref_ptr[RLX_FLUX2_MAX_REFS];
    for (int i = 0; i < RLX_FLUX2_MAX_REFS; i++)
        ref_ptr[i] = w.refs[i];
    rlx_flux2_dit_input in = {
        .latents = w.x,
        .lh = lh,
        .lw = lw,
        .guidance = r.guidance,
        .n_refs = r.n_refs,
        .ref_latents = ref_ptr,
        .ref_lh = w.ref_lh,
        .ref_lw = w.ref_lw,
    };
    double t_steps = now_s();
    for (int i = first; st == RLX_OK && i < r.steps; i++) {
        if (STOPPED()) {
            st = rlx_error_set(err, RLX_ERR_CANCELLED, "stopped");
            break;
        }
        float s = w.sigmas[i], s_next = w.sigmas[i + 1];
        in.t = s;
        in.text = w.cond;
        in.n_text = w.n_cond;
        st = rlx_flux2_dit_velocity(f->dit, &in, w.v, err);
        if (st == RLX_OK && cfg) {
            in.text = w.uncond;
            in.n_text = w.n_uncond;
            st = rlx_flux2_dit_velocity(f->dit, &in, w.v_neg, err);
            if (st == RLX_OK)
                for (size_t k = 0; k < n_lat; k++)
                    w.v[k] = w.v_neg[k] + r.guidance * (w.v[k] - w.v_neg[k]);
        }
        if (st != RLX_OK)
            break;
        float dt = s_next - s;
        for (size_t k = 0; k < n_lat; k++)
            w.x[k] += dt * w.v[k];
        pr.stage = RLX_FLUX2_STAGE_STEP;
        pr.step = i + 1;
        double per = (now_s() - t_steps) / (i + 1 - first);
        pr.seconds_left = per * (r.steps - i - 1);
        pr.preview = NULL;
        if (f->preview) {
            st = make_preview(f, lh, lw, &w, &pr.preview_w, &pr.preview_h, err);
            if (st != RLX_OK)
                break;
            pr.preview = w.preview;
        }
        REPORT();
    }
    if (st == RLX_OK && STOPPED())
        st = rlx_error_set(err, RLX_ERR_CANCELLED, "stopped");
    if (st == RLX_OK) {
        pr.stage = RLX_FLUX2_STAGE_DECODE;
        pr.preview = NULL;
        pr.seconds_left = -1;
        REPORT();
        float *rgb = malloc(sizeof(float) * 3 * (size_t)r.width * r.height);
        st = rgb ? rlx_flux2_vae_decode(f->vae, w.x, lh, lw, rgb, err)
                 : rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the picture");
        if (st == RLX_OK) {
            *out = to_image(rgb, r.width, r.height);
            if (!*out)
                st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the picture");
        }
        free(rgb);
    }
#undef STOPPED
#undef REPORT
    work_free(&w);
    return st;
}

struct rlx_flux2_dit *rlx_flux2_transformer(rlx_flux2 *f)
{
    return f ? f->dit : NULL;
}
