/* RlxSegmenter: the Segment page's bridge to the SAM runner
 * (models/sam/sam-open.h), the background remover (models/isnet/isnet.h,
 * chosen for an .onnx model) and the image reader (engine/image/image.h). One
 * worker thread opens the model, decodes and encodes images, and runs the
 * prompts; what it reports arrives on the main loop as signals.
 *
 *   RlxSegmenter *s = rlx_segmenter_new();
 *   g_signal_connect(s, "masks", G_CALLBACK(on_masks), pane);
 *   rlx_segmenter_set_model(s, "sam_vit_b_01ec64.pth", "cpu", 0, 0);
 *   rlx_segmenter_open_image(s, "photo.jpg");   // decoded, then encoded once
 *   RlxSegmentPrompt p = {...};
 *   rlx_segmenter_prompt(s, &p, NULL);          // each click; the newest wins
 *   g_object_unref(s);                          // stops and joins the thread
 *
 * Signals (main thread, in order):
 *   loading (const char *what, double fraction)   the model loads (fraction
 *            -1: no figure); what is "model" or "image"
 *   model-ready (const char *variant)             the model is loaded ("ISNet"
 *            for a background-removal model: rlx_segmenter_removes_background)
 *   image-ready (GdkTexture *picture)             the image, as decoded
 *            (EXIF orientation applied), before its encoding starts
 *   encoded (double seconds)                      the embedding is on the device
 *   masks (guint serial, GPtrArray *proposals)    RlxSegmentProposal *, best
 *            first; serial is the prompt's
 *   cutout (GdkTexture *cutout, GBytes *alpha, double seconds)   with a
 *            background-removal model, in place of encoding: the picture with
 *            the model's alpha (premultiplied) and the alpha itself (width x
 *            height bytes, 0..255); "encoded" follows
 *   memory (const RlxMemoryInfo *)                what the model takes
 *   everything (GPtrArray *masks)                 RlxSegmentProposal *, largest
 *            first: rlx_segmenter_segment_all's result (progress comes as
 *            "loading" with what "everything")
 *   failed (int status, const char *what, const char *message)   what is
 *            "model", "image" (it could not be read: the picture before
 *            stays, encoded), "encode", "prompt" or "everything"; status an rlx_status
 *
 * Prompts are queued by replacing: while one runs, only the newest waiting
 * one is kept, so a burst of clicks costs one decode after the running one.
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <gtk/gtk.h>
#include <stdint.h>

#include "rlx-engine.h" /* RlxMemoryInfo */

G_BEGIN_DECLS

#define RLX_SEGMENT_MAX_POINTS 64

typedef struct {
    double x, y; /* the image's pixels */
    gboolean positive;
} RlxSegmentPoint;

typedef struct {
    guint serial; /* echoed by "masks" */
    RlxSegmentPoint points[RLX_SEGMENT_MAX_POINTS];
    int n_points;
    gboolean has_box;
    double box[4]; /* x0, y0, x1, y1 in the image's pixels */
} RlxSegmentPrompt;

typedef struct {
    float iou, stability;
    gint64 area;
    int box[4];   /* x0, y0, x1, y1 of the mask, inclusive; -1 when empty */
    GBytes *mask; /* width x height bytes: 255 inside, 0 outside */
    /* the model's low-resolution logits of this mask (RLX_SAM_MASK_SIDE^2
     * floats), to give back as the mask prompt of a refinement; NULL for
     * background removal and "everything" */
    GBytes *low_res;
    int width, height;
} RlxSegmentProposal;

void rlx_segment_proposal_free(RlxSegmentProposal *p);

#define RLX_TYPE_SEGMENTER (rlx_segmenter_get_type())
G_DECLARE_FINAL_TYPE(RlxSegmenter, rlx_segmenter, RLX, SEGMENTER, GObject)

RlxSegmenter *rlx_segmenter_new(void);

/* The model, device ("cpu", "vulkan:0"; NULL = cpu), CPU threads (0 = one
 * per core) and memory budget (bytes, 0 = the device's). Loaded on the
 * thread (again only when one of these changed); an image already open is
 * encoded again with it. */
void rlx_segmenter_set_model(RlxSegmenter *self, const char *path, const char *device,
                             int n_threads, uint64_t budget);
/* Decode the image and (once a model is loaded) encode it; forgets the
 * previous image's prompts. */
void rlx_segmenter_open_image(RlxSegmenter *self, const char *path);
/* Run a prompt against the encoded image (copied). Ignored without one. */
/* mask_input: NULL, or the low_res of the proposal shown, when p adds a
 * point or box to the prompt that gave it (SAM's refinement: one mask, from
 * the earlier mask's logits and all the points) */
void rlx_segmenter_prompt(RlxSegmenter *self, const RlxSegmentPrompt *p, GBytes *mask_input);
/* Segment everything in the encoded image (SAM's automatic mask generator,
 * models/sam/sam-auto.h, with a grid of points_per_side^2 clicks); a new
 * picture or model stops it. */
void rlx_segmenter_segment_all(RlxSegmenter *self, int points_per_side);
/* Whether an image is encoded and prompts can run. */
gboolean rlx_segmenter_is_ready(RlxSegmenter *self);
/* Whether the loaded model removes backgrounds (an .onnx model) rather than
 * taking prompts (SAM). */
gboolean rlx_segmenter_removes_background(RlxSegmenter *self);

G_END_DECLS
