/* FAKE: a stand-in for the FLUX.2 pipeline (flux2.h) while flux2.c is
 * written elsewhere, so that the Imagine page and its UI test run. It loads
 * nothing and computes nothing of a network: its pictures are a synthetic
 * pattern of the prompt and seed that comes out of noise step by step, each
 * step ~0.2 s (0.05 s below 256x256), with "previews" at a quarter size.
 *
 * What it honours, as flux2.h says the real one does:
 * - open: the model must exist (RLX_ERR_IO); a model whose name contains
 *   "broken" is RLX_ERR_FORMAT with a sentence, one with "huge" is
 *   RLX_ERR_BUDGET; a single file (not a folder) needs text_encoder and vae;
 *   a given preview decoder must exist. A name with "base" is a base model
 *   (negative prompt, 50 steps, guidance 4); anything else klein-4b distilled.
 * - check_request and generate's checks, sizes rounded with a note.
 * - progress after the text, each step (with a preview when a preview
 *   decoder was given) and before the decode; a false return and
 *   rlx_flux2_cancel stop between steps (RLX_ERR_CANCELLED).
 * - a prompt containing "[fake-fail]" fails after step 2 (RLX_ERR_DEVICE),
 *   for the page's error path.
 *
 * The integrator drops this file (and its line in meson.build) when flux2.c
 * lands. */
#include "models/diffusion/flux2.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct rlx_flux2 {
    rlx_flux2_info info;
    char variant[32];
    atomic_int cancel;
};

rlx_flux2_params rlx_flux2_default_params(void)
{
    rlx_flux2_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static bool exists(const char *path, bool *dir)
{
    struct stat st;
    if (!path || stat(path, &st) != 0)
        return false;
    if (dir)
        *dir = S_ISDIR(st.st_mode);
    return true;
}

rlx_status rlx_flux2_open(const char *model, const rlx_flux2_params *p, rlx_flux2 **out,
                          rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!model || !*model || !p || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_open needs a model and params");
    bool dir = false;
    if (!exists(model, &dir))
        return rlx_error_set(err, RLX_ERR_IO, "cannot read %s: no such file or folder", model);
    if (strstr(model, "broken"))
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s has no transformer/ folder: this is not a complete FLUX.2 model",
                             model);
    if (strstr(model, "huge"))
        return rlx_error_set(err, RLX_ERR_BUDGET,
                             "the model needs 24.0 GiB (text encoder 8.0, transformer 15.0, VAE "
                             "1.0) but the budget is 8.0 GiB");
    if (!dir && (!p->text_encoder || !*p->text_encoder))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "a single transformer file needs its text encoder (a Qwen3 .gguf or "
                             "a text_encoder folder)");
    if (!dir && (!p->vae || !*p->vae))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "a single transformer file needs its VAE (safetensors or a folder)");
    if (p->text_encoder && *p->text_encoder && !exists(p->text_encoder, NULL))
        return rlx_error_set(err, RLX_ERR_IO, "cannot read the text encoder %s", p->text_encoder);
    if (p->vae && *p->vae && !exists(p->vae, NULL))
        return rlx_error_set(err, RLX_ERR_IO, "cannot read the VAE %s", p->vae);
    if (p->preview_decoder && *p->preview_decoder && !exists(p->preview_decoder, NULL))
        return rlx_error_set(err, RLX_ERR_IO, "cannot read the preview decoder %s",
                             p->preview_decoder);
    rlx_flux2 *f = calloc(1, sizeof *f);
    if (!f)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    bool base = strstr(model, "base") != NULL;
    strcpy(f->variant, base ? "klein-4b-base" : "klein-4b");
    f->info.variant = f->variant;
    f->info.distilled = !base;
    f->info.guidance_embedded = false;
    f->info.uses_negative = base;
    f->info.default_steps = base ? 50 : 4;
    f->info.default_guidance = base ? 4.0f : 1.0f;
    f->info.bytes_text = 8ull << 30;
    f->info.bytes_transformer = 7ull << 30;
    f->info.bytes_vae = 168ull << 20;
    f->info.text_kept = true;
    f->info.has_preview = p->preview_decoder && *p->preview_decoder;
    atomic_init(&f->cancel, 0);
    *out = f;
    return RLX_OK;
}

void rlx_flux2_free(rlx_flux2 *f)
{
    free(f);
}

rlx_flux2_info rlx_flux2_get_info(const rlx_flux2 *f)
{
    rlx_flux2_info i;
    memset(&i, 0, sizeof i);
    return f ? f->info : i;
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
    return (v + 8) / 16 * 16;
}

rlx_status rlx_flux2_check_request(const rlx_flux2 *f, rlx_flux2_request *r, char **note,
                                   rlx_error **err)
{
    if (note)
        *note = NULL;
    if (!f || !r)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no pipeline or request");
    if (!r->prompt || !*r->prompt)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the prompt is empty: say what to draw");
    if (r->steps < 1 || r->steps > RLX_FLUX2_MAX_STEPS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%d steps: give 1 to %d", r->steps,
                             RLX_FLUX2_MAX_STEPS);
    if (r->width < RLX_FLUX2_MIN_SIDE || r->width > RLX_FLUX2_MAX_SIDE ||
        r->height < RLX_FLUX2_MIN_SIDE || r->height > RLX_FLUX2_MAX_SIDE)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%d x %d: each side must be %d to %d pixels",
                             r->width, r->height, RLX_FLUX2_MIN_SIDE, RLX_FLUX2_MAX_SIDE);
    if (r->init && !(r->strength >= 0 && r->strength <= 1))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the strength must be between 0 and 1");
    if (r->n_refs < 0 || r->n_refs > RLX_FLUX2_MAX_REFS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "at most %d reference pictures",
                             RLX_FLUX2_MAX_REFS);
    int w = round16(r->width), h = round16(r->height);
    if (w > RLX_FLUX2_MAX_SIDE)
        w -= 16;
    if (h > RLX_FLUX2_MAX_SIDE)
        h -= 16;
    if ((w != r->width || h != r->height) && note) {
        char *s = malloc(160);
        if (s)
            snprintf(s, 160, "%d x %d was rounded to %d x %d: sides are multiples of 16", r->width,
                     r->height, w, h);
        *note = s;
    }
    r->width = w;
    r->height = h;
    return RLX_OK;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* The picture at `clarity` (0: noise, 1: the pattern): rings and a diagonal
 * gradient in colours of the prompt, centred where the seed says; the init
 * picture, when given, shows through by (1 - strength). */
static void paint(uint8_t *rgb, int w, int h, const rlx_flux2_request *r, double clarity,
                  uint64_t noise_seed)
{
    uint64_t hp = 1469598103934665603ull;
    for (const char *s = r->prompt; *s; s++)
        hp = (hp ^ (unsigned char)*s) * 1099511628211ull;
    uint64_t hs = mix(r->seed + 1);
    double c0[3] = {(double)(hp & 255), (double)(hp >> 8 & 255), (double)(hp >> 16 & 255)};
    double c1[3] = {(double)(hp >> 24 & 255), (double)(hp >> 32 & 255), (double)(hp >> 40 & 255)};
    double cx = 0.25 + 0.5 * (double)(hs & 1023) / 1023.0;
    double cy = 0.25 + 0.5 * (double)(hs >> 10 & 1023) / 1023.0;
    double rings = 4 + (double)(hs >> 20 & 7);
    uint64_t n = mix(noise_seed);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            double u = (double)x / w, v = (double)y / h;
            double d = sqrt((u - cx) * (u - cx) + (v - cy) * (v - cy));
            double ring = 0.5 + 0.5 * cos(d * rings * 6.2831853);
            double t = 0.5 * (u + v);
            uint8_t *o = rgb + ((size_t)y * w + x) * 3;
            for (int k = 0; k < 3; k++) {
                double pat = (c0[k] * (1 - t) + c1[k] * t) * (0.55 + 0.45 * ring);
                if (r->init && r->init->width > 0 && r->init->height > 0) {
                    int ix = x * r->init->width / w, iy = y * r->init->height / h;
                    double in = r->init->rgb[((size_t)iy * r->init->width + ix) * 3 + k];
                    pat = pat * r->strength + in * (1 - r->strength);
                }
                n = n * 6364136223846793005ull + 1442695040888963407ull;
                double z = (double)(n >> 56);
                double val = pat * clarity + z * (1 - clarity);
                o[k] = (uint8_t)(val < 0 ? 0 : val > 255 ? 255 : val);
            }
        }
    }
}

static void nap(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

rlx_status rlx_flux2_generate(rlx_flux2 *f, const rlx_flux2_request *req, rlx_flux2_progress_fn fn,
                              void *user, rlx_image **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!f || !req || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_generate needs a request");
    rlx_flux2_request r = *req;
    rlx_status st = rlx_flux2_check_request(f, &r, NULL, err);
    if (st != RLX_OK)
        return st;
    double t0 = now_s();
    double per_step = (double)r.width * r.height < 256.0 * 256.0 ? 0.05 : 0.2;
    nap(per_step); /* the text encoder */
    rlx_flux2_progress pr = {.stage = RLX_FLUX2_STAGE_TEXT, .steps = r.steps, .seconds_left = -1};
    pr.seconds = now_s() - t0;
    if (fn && !fn(user, &pr)) {
        atomic_store(&f->cancel, 0);
        return rlx_error_set(err, RLX_ERR_CANCELLED, "stopped");
    }
    int pw = r.width / 4, ph = r.height / 4;
    uint8_t *prev = f->info.has_preview ? malloc((size_t)pw * ph * 3) : NULL;
    double t_steps = now_s();
    for (int s = 1; s <= r.steps; s++) {
        if (atomic_exchange(&f->cancel, 0)) {
            free(prev);
            return rlx_error_set(err, RLX_ERR_CANCELLED, "stopped after step %d of %d", s - 1,
                                 r.steps);
        }
        nap(per_step);
        if (s == 3 && strstr(r.prompt, "[fake-fail]")) {
            free(prev);
            return rlx_error_set(err, RLX_ERR_DEVICE,
                                 "the device stopped answering during step 3 (a fake failure)");
        }
        pr = (rlx_flux2_progress){.stage = RLX_FLUX2_STAGE_STEP, .step = s, .steps = r.steps};
        pr.seconds = now_s() - t0;
        pr.seconds_left = (now_s() - t_steps) / s * (r.steps - s) + per_step;
        if (prev) {
            paint(prev, pw, ph, &r, (double)s / r.steps, r.seed * 131 + (uint64_t)s);
            pr.preview = prev;
            pr.preview_w = pw;
            pr.preview_h = ph;
        }
        if (fn && !fn(user, &pr)) {
            free(prev);
            atomic_store(&f->cancel, 0);
            return rlx_error_set(err, RLX_ERR_CANCELLED, "stopped after step %d of %d", s, r.steps);
        }
    }
    free(prev);
    pr = (rlx_flux2_progress){.stage = RLX_FLUX2_STAGE_DECODE, .step = r.steps, .steps = r.steps};
    pr.seconds = now_s() - t0;
    pr.seconds_left = per_step;
    if (fn)
        fn(user, &pr);
    nap(per_step); /* the VAE */
    rlx_image *img = calloc(1, sizeof *img);
    uint8_t *rgb = malloc((size_t)r.width * r.height * 3);
    if (!img || !rgb) {
        free(img);
        free(rgb);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the picture");
    }
    img->width = r.width;
    img->height = r.height;
    img->rgb = rgb;
    paint(rgb, r.width, r.height, &r, 1.0, 0);
    *out = img;
    return RLX_OK;
}

void rlx_flux2_cancel(rlx_flux2 *f)
{
    if (f)
        atomic_store(&f->cancel, 1);
}
