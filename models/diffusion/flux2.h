/* FLUX.2 [klein] text-to-image: the whole pipeline (text encoder, transformer,
 * flow-matching Euler sampler, VAE, TAEF2 previews) over the pieces in
 * flux2-text.h, flux2-dit.h, flux2-sched.h, flux2-vae.h and taef2.h.
 *
 * Usage:
 *     rlx_flux2_params p = rlx_flux2_default_params();
 *     p.device = "cpu";
 *     p.preview_decoder = "taef2_decoder.safetensors";   // optional
 *     rlx_flux2 *f = NULL;
 *     if (rlx_flux2_open("FLUX.2-klein-4B/", &p, &f, &err) != RLX_OK) ...
 *     rlx_flux2_request r = rlx_flux2_default_request(f);
 *     r.prompt = "a lighthouse at dawn";
 *     r.width = r.height = 512;
 *     rlx_image *img = NULL;
 *     if (rlx_flux2_generate(f, &r, on_progress, user, &img, &err) != RLX_OK) ...
 *     rlx_image_free(img);
 *     rlx_flux2_free(f);
 *
 * `model` is a diffusers folder (model_index.json with transformer/,
 * text_encoder/, tokenizer/, vae/), or a single transformer file
 * (.safetensors in the BFL or diffusers names, or a .gguf), in which case
 * p.text_encoder (a Qwen3 .gguf or a text_encoder folder) and p.vae (the VAE
 * safetensors or folder) must be given. What the model is (4B or 9B,
 * distilled or base) comes from its tensors and config.
 *
 * Memory: before anything is loaded, the sizes of the three components are
 * weighed against the budget (rlx_flux2_params.memory_budget, or the
 * device's memory): when all fit, the text encoder stays loaded between
 * requests; when only the transformer and VAE fit, the text encoder is
 * loaded for each request's prompt and released before denoising; when
 * even that does not fit, open fails with RLX_ERR_BUDGET and a sentence.
 *
 * Progress: fn is called on the calling thread after the prompt is encoded,
 * after every step (with a TAEF2 preview when a preview decoder was given)
 * and before the final decode; returning false stops between steps
 * (RLX_ERR_CANCELLED), as does rlx_flux2_cancel from another thread.
 *
 * Thread safety: one thread at a time uses a pipeline; rlx_flux2_cancel may
 * be called from any thread.
 */
#ifndef RLX_MODELS_DIFFUSION_FLUX2_H
#define RLX_MODELS_DIFFUSION_FLUX2_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/status.h"
#include "engine/image/image.h"
#include "models/diffusion/flux2-sched.h" /* RLX_FLUX2_MAX_STEPS */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_flux2 rlx_flux2;

#define RLX_FLUX2_MAX_LORAS 8
#define RLX_FLUX2_MAX_REFS  4
#define RLX_FLUX2_MIN_SIDE  64
#define RLX_FLUX2_MAX_SIDE  2048

/* A LoRA of the transformer, applied at open (see rlx_flux2_dit_lora in
 * flux2-dit.h for the names read and what scale means). */
typedef struct rlx_flux2_lora {
    const char *path; /* a LoRA .safetensors (diffusers, BFL or kohya names) */
    float scale;      /* the strength: 1 as trained */
} rlx_flux2_lora;

typedef struct rlx_flux2_params {
    const char *device;          /* "cpu", "vulkan:0", ...; NULL = "cpu" */
    int n_threads;               /* CPU threads; 0 = one per core */
    uint64_t memory_budget;      /* bytes; 0 = the device's */
    const char *text_encoder;    /* NULL: the model folder's text_encoder/ */
    const char *vae;             /* NULL: the model folder's vae/ */
    const char *preview_decoder; /* TAEF2 decoder .safetensors; NULL: no previews */
    /* Distilled (few steps, no guidance) or base: a diffusers folder says so
     * in model_index.json, but a single transformer file cannot (both have
     * the same tensors). -1: the folder's word, else distilled (the common
     * download); 0: base; 1: distilled. */
    int distilled;
    rlx_flux2_lora loras[RLX_FLUX2_MAX_LORAS];
    int n_loras;
} rlx_flux2_params;

RLX_API rlx_flux2_params rlx_flux2_default_params(void);

/* *out is set to NULL first. Errors: RLX_ERR_IO (a file or folder cannot be
 * read), RLX_ERR_FORMAT (a component is missing or malformed: the sentence
 * names it), RLX_ERR_UNSUPPORTED (a transformer of an unknown variant, a
 * LoRA for another model), RLX_ERR_BUDGET, the device's errors. */
RLX_API rlx_status rlx_flux2_open(const char *model, const rlx_flux2_params *p, rlx_flux2 **out,
                                  rlx_error **err);
RLX_API void rlx_flux2_free(rlx_flux2 *f);

typedef struct rlx_flux2_info {
    const char *variant;    /* "klein-4b", "klein-9b", ... */
    bool distilled;         /* few steps, no negative prompt */
    bool guidance_embedded; /* the transformer takes the guidance value */
    bool uses_negative;     /* classifier-free guidance with a negative prompt */
    int default_steps;      /* 4 for the distilled models, 50 for the base */
    float default_guidance; /* 1 (none) for the distilled, 4 for the base */
    uint64_t bytes_text;    /* the text encoder's weights */
    uint64_t bytes_transformer;
    uint64_t bytes_vae; /* VAE and preview decoder */
    bool text_kept;     /* the text encoder stays loaded between requests */
    bool has_preview;
} rlx_flux2_info;

RLX_API rlx_flux2_info rlx_flux2_get_info(const rlx_flux2 *f);

typedef struct rlx_flux2_request {
    const char *prompt;
    const char *negative; /* base models only; NULL = "" */
    int width, height;    /* pixels, multiples of 16 (see rlx_flux2_check_request) */
    int steps;
    uint64_t seed;
    float guidance;
    const rlx_image *init;                     /* image-to-image: the start picture, or NULL */
    float strength;                            /* with init: 0 keeps it, 1 ignores it */
    const rlx_image *refs[RLX_FLUX2_MAX_REFS]; /* editing: reference pictures */
    int n_refs;
} rlx_flux2_request;

/* The model's defaults: 1024 x 1024, its steps and guidance, seed 0. */
RLX_API rlx_flux2_request rlx_flux2_default_request(const rlx_flux2 *f);

/* Checks a request before any work: an empty prompt, steps outside
 * 1..RLX_FLUX2_MAX_STEPS, a side outside RLX_FLUX2_MIN_SIDE..MAX_SIDE, a
 * strength outside [0, 1] are refused with a sentence (RLX_ERR_INVALID_ARG).
 * A side that is not a multiple of 16 is rounded to the nearest one and,
 * when note is not NULL, *note gets a malloc'd sentence saying so (else NULL). */
RLX_API rlx_status rlx_flux2_check_request(const rlx_flux2 *f, rlx_flux2_request *r, char **note,
                                           rlx_error **err);

typedef enum rlx_flux2_stage {
    RLX_FLUX2_STAGE_TEXT,   /* the prompt is encoded */
    RLX_FLUX2_STAGE_STEP,   /* a denoising step is done */
    RLX_FLUX2_STAGE_DECODE, /* the final decode starts */
} rlx_flux2_stage;

typedef struct rlx_flux2_progress {
    rlx_flux2_stage stage;
    int step, steps;        /* steps done of all (STEP) */
    double seconds;         /* since the request started */
    double seconds_left;    /* estimated; < 0 while unknown */
    const uint8_t *preview; /* STEP with a preview decoder: RGB, preview_w x preview_h
                             * (the picture's size up to 512 x 512 pixels, else a half
                             * or a quarter of it) */
    int preview_w, preview_h;
} rlx_flux2_progress;

/* Return false to stop. */
typedef bool (*rlx_flux2_progress_fn)(void *user, const rlx_flux2_progress *p);

/* The request (checked as rlx_flux2_check_request does, sizes rounded) to
 * an RGB image of width x height; *out is set to NULL first and is the
 * caller's (rlx_image_free). */
RLX_API rlx_status rlx_flux2_generate(rlx_flux2 *f, const rlx_flux2_request *r,
                                      rlx_flux2_progress_fn fn, void *user, rlx_image **out,
                                      rlx_error **err);

struct rlx_flux2_dit;
/* The transformer (flux2-dit.h), for its configuration; owned by f. */
RLX_API struct rlx_flux2_dit *rlx_flux2_transformer(rlx_flux2 *f);

/* From any thread: the running (or next) generate stops after its step. */
RLX_API void rlx_flux2_cancel(rlx_flux2 *f);

#ifdef __cplusplus
}
#endif
#endif
