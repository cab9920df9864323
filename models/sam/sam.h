/* Segment Anything (SAM v1, ViT-B/L/H; MobileSAM; and SAM 2.1 Hiera in image
 * mode): click-to-segment on the compile+execute stack.
 *
 * Usage:
 *     rlx_sam_params p = rlx_sam_default_params();
 *     p.device = "cpu";
 *     rlx_sam *sam = NULL;
 *     if (rlx_sam_create_file(&p, "sam_vit_b.safetensors", &sam, &err) != RLX_OK) ...
 *     // chw: 3 x 1024 x 1024 floats, the image resized so that its long side is 1024,
 *     // normalised with SAM's pixel mean/std and zero-padded at the right/bottom
 *     rlx_sam_encode(sam, chw, &err);                  // the ViT, once per image
 *     rlx_sam_point pts[1] = {{500, 375, RLX_SAM_POSITIVE}};
 *     rlx_sam_prompt pr = {.points = pts, .n_points = 1};
 *     float masks[3 * 256 * 256], iou[3];
 *     int n = 0;
 *     rlx_sam_decode(sam, &pr, true, masks, iou, &n, &err);  // per click
 *     rlx_sam_free(sam);
 *
 * The network runs on the session's device as programs built with the graph IR
 * (engine/ir/graph.h): the image encoder writes the image embedding (token-major,
 * 64 x 64 x 256) and the dense positional encoding of the 64 x 64 grid into two
 * session states, "sam.embedding" and "sam.image_pe", that stay on the device; a
 * decode (prompt encoder + two-way transformer + mask head) reads them, so a click
 * uploads only the prompt (a few floats) and reads back the masks. One decode
 * program per prompt-token count is compiled on first use and kept.
 *
 * Prompts: points and box corners are given in the 1024 x 1024 input frame (the
 * caller scales from the original image, as SamPredictor.transform does). Without a
 * box, a padding point is added (SAM's rule). A mask prompt (mask_input: a previous
 * decode's 256 x 256 logits) goes through the prompt encoder's mask_downscaling
 * and replaces no_mask_embed as the dense prompt embedding, in SAM v1, MobileSAM
 * and SAM 2.1 alike; a decoder program with that input is compiled on its first
 * use too.
 *
 * Output: low-resolution mask logits, 256 x 256 each (the 1024 frame / 4), and their
 * predicted IoU: masks 1..3 with multimask, else mask 0. Upscaling to the image and
 * thresholding at 0 is the caller's (engine/image) post-processing.
 *
 * Weights: the official segment_anything state dict names
 * ("image_encoder.blocks.0.attn.qkv.weight", ...) or those of Hugging Face's SamModel
 * ("vision_encoder.layers.0.attn.qkv.weight", ...), F32, F16 or BF16. The variant is
 * read from the shapes: embed dim from patch_embed, depth from the blocks present,
 * head dim and window size (and so the global-attention blocks) from each block's
 * rel_pos_h; the input must be 1024 x 1024 (pos_embed 64 x 64).
 *
 * SAM 2.1 (sam2.1_hiera_tiny.pt and the other published Hiera sizes, official names
 * "image_encoder.trunk.*", "sam_prompt_encoder.*", "sam_mask_decoder.*") is
 * detected from "image_encoder.trunk.patch_embed.proj.weight", the size from the
 * blocks' widths. Image mode only (SAM2ImagePredictor, no video memory): the input is
 * the image stretched to 1024 x 1024 with ImageNet mean/std
 * (rlx_image_prep_sam2_params); the encoder also keeps the two high-resolution
 * feature maps on the device; box corners go before the points and a padding point
 * is always added (the predictor's order); IoU comes through a sigmoid; with
 * multimask false, the single mask falls back to the best of the three when its
 * stability is under 0.98 (dynamic multimask); rlx_sam_object_score gives the
 * object-score logit. The Hugging Face repositories (facebook/sam2.1-hiera-tiny, ...:
 * model.safetensors with transformers' Sam2Model names, "vision_encoder.backbone.*",
 * "prompt_encoder.*", "mask_decoder.*", the four point embeddings stacked in
 * "prompt_encoder.point_embed.weight") are recognised by
 * "vision_encoder.backbone.patch_embed.projection.weight"; the size comes from the
 * shapes there too (config.json is not needed). Low-res logits are not clamped to +-32 as the
 * predictor's returned low_res_masks are (thresholding and upscaling are unaffected).
 *
 * MobileSAM (mobile_sam.pt: the same prompt encoder and mask decoder, a TinyViT-5M
 * image encoder) is recognised by "image_encoder.patch_embed.seq.0.c.weight"; its
 * stage widths, block counts, heads and windows are read from the shapes, its
 * BatchNorms are applied with their running statistics (eval mode), and
 * num_batches_tracked, the classifier head and attention_bias_idxs (recomputed)
 * are not read. Official names only (there is no Hugging Face MobileSAM).
 *
 * Other readers (a PyTorch .pt) plug in through rlx_sam_create with a lookup
 * function that hands out tensors by name; the runner asks for the official name
 * first, then the Hugging Face one.
 *
 * Ownership: the runner owns its session and (for rlx_sam_create_file) the mapped
 * file; with rlx_sam_create, tensor data stays the caller's and must outlive the
 * runner. Thread safety: a runner is used by one thread at a time.
 */
#ifndef RLX_MODELS_SAM_SAM_H
#define RLX_MODELS_SAM_SAM_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_session;

#define RLX_SAM_IMAGE_SIZE 1024
#define RLX_SAM_EMBED_SIDE 64  /* image embedding grid */
#define RLX_SAM_EMBED_DIM  256 /* prompt / decoder width */
#define RLX_SAM_MASK_SIDE  256 /* low-resolution masks */
#define RLX_SAM_MAX_MASKS  4
#define RLX_SAM_MAX_POINTS 64
#define RLX_SAM_MAX_DIMS   6

typedef struct rlx_sam rlx_sam;

typedef enum rlx_sam_label {
    RLX_SAM_NEGATIVE = 0, /* background click */
    RLX_SAM_POSITIVE = 1, /* foreground click */
} rlx_sam_label;

typedef struct rlx_sam_point {
    float x, y; /* in the 1024 x 1024 input frame */
    int label;  /* rlx_sam_label */
} rlx_sam_point;

typedef struct rlx_sam_prompt {
    const rlx_sam_point *points; /* may be NULL when n_points is 0 */
    int n_points;                /* 0 .. RLX_SAM_MAX_POINTS */
    bool has_box;
    float box[4]; /* x0, y0, x1, y1 in the 1024 frame */
    /* A previous mask (SAM's mask_input): 256 x 256 low-resolution logits in the
     * 1024 frame / 4, as rlx_sam_decode hands them out (to refine a mask, pass the
     * chosen proposal of the last decode with the new points), or NULL. Borrowed
     * for the call. */
    const float *mask_input;
} rlx_sam_prompt;

typedef struct rlx_sam_params {
    const char *device;         /* "cpu", "vulkan:0", ...; NULL = "cpu" */
    int n_threads;              /* CPU threads; 0 = one per core */
    uint64_t memory_budget;     /* bytes; 0 = the device's (rlx_session_params) */
    bool force_f32;             /* GPU: its f32 kernels */
    uint64_t max_binding_bytes; /* GPU, for tests; 0 = the device's limit */
    /* the most bytes the relative-position bias of one attention op may take: the
     * heads of a block go in groups under it (ViT-H's global blocks would need
     * 1 GiB at once); 0 = 256 MiB */
    uint64_t attention_chunk_bytes;
} rlx_sam_params;

typedef struct rlx_sam_info {
    const char *variant; /* "vit_b", "vit_l", "vit_h", "mobile_sam" or "custom" */
    /* ViT: its width, blocks, heads and window; TinyViT (MobileSAM): the last
     * stage's width, heads and window, and the blocks of all four stages */
    int embed_dim, depth, heads, window;
    int n_global;   /* blocks with global attention */
    int global[64]; /* their indexes */
    bool hf_names;  /* the weights came with Hugging Face names */
    /* SAM 2 / 2.1 (Hiera): embed_dim, depth and heads are the first stage's, window
     * the first stage's window, global the global-attention blocks; the model has an
     * object score (rlx_sam_object_score) */
    bool sam2;
    const char *encoder; /* "vit" (SAM v1), "tinyvit" (MobileSAM) or "hiera" (SAM 2) */
} rlx_sam_info;

/* A tensor handed out by a lookup: row-major dims, bytes borrowed. */
typedef struct rlx_sam_tensor {
    rlx_dtype dtype;
    int rank;
    int64_t dims[RLX_SAM_MAX_DIMS];
    const void *data;
    uint64_t n_bytes;
} rlx_sam_tensor;

/* Return true and fill *out when the source holds `name`. */
typedef bool (*rlx_sam_lookup_fn)(void *user, const char *name, rlx_sam_tensor *out);

RLX_API rlx_sam_params rlx_sam_default_params(void);

/* A .safetensors file (official or HF names) or a Hugging Face folder holding
 * model.safetensors. *out is set to NULL first. Errors: RLX_ERR_IO (unreadable),
 * RLX_ERR_FORMAT (a tensor missing or of another shape: the message names it),
 * RLX_ERR_UNSUPPORTED (a dtype, an input size other than 1024), the session's. */
RLX_API rlx_status rlx_sam_create_file(const rlx_sam_params *p, const char *path, rlx_sam **out,
                                       rlx_error **err);
/* The same from any weight source; `what` names it in messages (may be NULL). */
RLX_API rlx_status rlx_sam_create(const rlx_sam_params *p, rlx_sam_lookup_fn lookup, void *user,
                                  const char *what, rlx_sam **out, rlx_error **err);
RLX_API void rlx_sam_free(rlx_sam *sam);

RLX_API rlx_status rlx_sam_info_get(const rlx_sam *sam, rlx_sam_info *out, rlx_error **err);
RLX_API struct rlx_session *rlx_sam_session(rlx_sam *sam);

/* Run the image encoder on chw (3 x 1024 x 1024, resized, normalised, padded). */
RLX_API rlx_status rlx_sam_encode(rlx_sam *sam, const float *chw_1024, rlx_error **err);

/* Prompt encoder + mask decoder against the last encoded image. low_res_masks
 * receives up to 3 (multimask) or 1 mask of 256 x 256 logits, iou their scores,
 * *n_out their count. Fails (RLX_ERR_INVALID_ARG) before any encode, without a
 * point or a box, with a label other than 0/1, or with too many points. */
RLX_API rlx_status rlx_sam_decode(rlx_sam *sam, const rlx_sam_prompt *prompt, bool multimask,
                                  float *low_res_masks, float *iou, int *n_out, rlx_error **err);

/* SAM 2: the object-score logit of the last decode (> 0: an object is predicted
 * there). RLX_ERR_UNSUPPORTED for SAM v1 models. */
RLX_API rlx_status rlx_sam_object_score(const rlx_sam *sam, float *logit, rlx_error **err);

/* The last image embedding read back from the device, as [256][64][64] (CHW). */
RLX_API rlx_status rlx_sam_embedding(rlx_sam *sam, float *chw_out, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
