/* RlxImaginer: the Imagine page's bridge to the FLUX.2 pipeline
 * (models/diffusion/flux2.h). One worker thread owns the pipeline: it opens
 * the model, runs the requests one at a time in the order they came, and
 * writes each picture's PNG (with its settings in a "parameters" text
 * chunk); what it reports arrives on the main loop as signals.
 *
 *   RlxImaginer *im = rlx_imaginer_new();
 *   g_signal_connect(im, "progress", G_CALLBACK(on_progress), pane);
 *   g_signal_connect(im, "finished", G_CALLBACK(on_finished), pane);
 *   RlxImagineModel m = {.model = "FLUX.2-klein-4B/", .device = "cpu"};
 *   rlx_imaginer_set_model(im, &m);
 *   RlxImagineSettings s = {.prompt = "a lighthouse at dawn", .width = 512,
 *                           .height = 512, .steps = 4, .seed = 42, .guidance = 1,
 *                           .out_png = "/…/imagine/0001.png"};
 *   rlx_imaginer_generate(im, &s);       // copied; queued behind one running
 *   rlx_imaginer_stop(im);               // the running one stops after its step
 *   g_object_unref(im);                  // stops and joins the thread
 *
 * Signals (main thread, in order):
 *   loading (const char *what, double fraction)   what: "model" (opening),
 *            "prompt" (a request starts: its prompt is encoded) or "decode"
 *            (the steps are done, the full decode runs); fraction -1: none
 *   model-ready (const RlxImagineInfo *)          the model is open
 *   note (const char *text)                       the pipeline changed a
 *            request (a size rounded to a multiple of 16), a sentence
 *   progress (int step, int steps, double seconds, double seconds_left,
 *            GdkTexture *preview)                 after every step; preview
 *            is NULL without a preview decoder; seconds_left < 0: unknown.
 *            Adjacent reports are coalesced: the page sees the newest.
 *   finished (GdkTexture *image, const RlxImagineSettings *settings)   the
 *            settings as run (sizes rounded, model, seconds; out_png NULL
 *            when the PNG could not be written: "failed" with "save" came)
 *   stopped (int step, int steps)                 rlx_imaginer_stop took
 *            effect after step `step`
 *   failed (int status, const char *what, const char *message)   what is
 *            "model" (it could not be opened: requests fail until another
 *            model is set), "init" (the start or reference picture cannot be
 *            read), "generate" (the request was refused or the run failed) or
 *            "save" (the PNG); status an rlx_status, message a sentence
 *   memory (const RlxMemoryInfo *)                what the model takes:
 *            weights (the sum), parts: text encoder, transformer, VAE
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <gtk/gtk.h>
#include <stdint.h>

#include "rlx-engine.h" /* RlxMemoryInfo */

G_BEGIN_DECLS

typedef struct {
    const char *model;           /* a diffusers folder, or a .safetensors/.gguf transformer */
    const char *text_encoder;    /* with a single transformer file; NULL/"" otherwise */
    const char *vae;             /* likewise */
    const char *preview_decoder; /* TAEF2 decoder; NULL/"": no previews */
    const char *device;          /* "cpu", "vulkan:0"; NULL = cpu */
    int n_threads;               /* 0 = one per core */
    uint64_t budget;             /* bytes, 0 = the device's */
    const char *lora;            /* a LoRA .safetensors of the transformer; NULL/"": none */
    double lora_strength;        /* with lora: 1 as trained */
} RlxImagineModel;

typedef struct {
    char *variant; /* "klein-4b", … */
    char *name;    /* the model's file or folder name */
    gboolean distilled, guidance_embedded, uses_negative, text_kept, has_preview;
    int default_steps;
    double default_guidance;
    uint64_t bytes_text, bytes_transformer, bytes_vae;
} RlxImagineInfo;

/* A request and, in "finished", what was run. Strings are owned (copied by
 * rlx_imaginer_generate). */
typedef struct {
    char *prompt;
    char *negative; /* NULL/"": none */
    int width, height, steps;
    uint64_t seed;
    double guidance;
    char *init;      /* image-to-image: a picture's path, or NULL */
    double strength; /* with init */
    char *ref;       /* editing: a reference picture's path, or NULL */
    char *out_png;   /* where the PNG goes (an existing file is not replaced), or NULL */
    /* filled in "finished" */
    char *model;    /* the model's name and variant */
    double seconds; /* the whole request */
} RlxImagineSettings;

RlxImagineSettings *rlx_imagine_settings_copy(const RlxImagineSettings *s);
void rlx_imagine_settings_free(RlxImagineSettings *s);
/* The PNG's "parameters" text: the prompt, then "Negative prompt: …", then
 * "Steps: 4, Seed: 42, Size: 512x512, Guidance: 1, Model: …", as other
 * tools write it. */
char *rlx_imagine_settings_to_parameters(const RlxImagineSettings *s);

#define RLX_TYPE_IMAGINER (rlx_imaginer_get_type())
G_DECLARE_FINAL_TYPE(RlxImaginer, rlx_imaginer, RLX, IMAGINER, GObject)

RlxImaginer *rlx_imaginer_new(void);

/* Opened on the thread (again only when something changed), after the
 * running request; the strings are copied. */
void rlx_imaginer_set_model(RlxImaginer *self, const RlxImagineModel *m);
/* Queue a request (copied). */
void rlx_imaginer_generate(RlxImaginer *self, const RlxImagineSettings *s);
/* Drop the waiting requests and stop the running one after its step
 * (rlx_flux2_cancel): "stopped" follows. */
void rlx_imaginer_stop(RlxImaginer *self);
/* A request runs or waits. */
gboolean rlx_imaginer_is_busy(RlxImaginer *self);
/* The open model's, or NULL; owned by the imaginer. */
const RlxImagineInfo *rlx_imaginer_get_info(RlxImaginer *self);

G_END_DECLS
