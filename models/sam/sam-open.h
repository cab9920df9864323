/* A SAM checkpoint opened from the file people download, whatever its format.
 *
 * Usage:
 *     rlx_sam_file *f = NULL;
 *     if (rlx_sam_open(&params, "sam_vit_b_01ec64.pth", &f, &err) != RLX_OK) ...
 *     rlx_sam *sam = rlx_sam_file_runner(f);   // then rlx_sam_encode / _decode
 *     rlx_sam_file_close(f);
 *
 * `path` is the official PyTorch release (a torch.save zip: .pth / .pt, read
 * by engine/formats/torch-zip.h, whose unpickler executes nothing and refuses
 * any global a state dict does not need), a .safetensors file, or a Hugging
 * Face folder (model.safetensors). The kind is told by the bytes, not by the
 * name. The weights stay mapped from the file until the close.
 *
 * Thread safety: as rlx_sam (one thread at a time).
 */
#ifndef RLX_MODELS_SAM_SAM_OPEN_H
#define RLX_MODELS_SAM_SAM_OPEN_H

#include "engine/image/image.h"
#include "models/sam/sam.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_sam_file rlx_sam_file;

/* *out is set to NULL first. Errors: RLX_ERR_IO (missing, unreadable), the
 * readers' RLX_ERR_FORMAT / RLX_ERR_UNSUPPORTED (with the sentence naming the
 * tensor, the pickle's global, ...), the runner's. */
RLX_API rlx_status rlx_sam_open(const rlx_sam_params *p, const char *path, rlx_sam_file **out,
                                rlx_error **err);
RLX_API rlx_sam *rlx_sam_file_runner(rlx_sam_file *f);
RLX_API void rlx_sam_file_close(rlx_sam_file *f);

/* How a picture is prepared for this model: SAM's longest-side resize with
 * padding, or SAM 2's stretch to 1024 x 1024 with ImageNet's mean and std
 * (engine/image/image.h), and the masks brought back the same way. */
RLX_API rlx_image_prep_params rlx_sam_prep_params(rlx_sam *sam);

/* One proposal at the image's size: the low-resolution logits upscaled as
 * SAM's predictor does (engine/image), thresholded at 0. */
typedef struct rlx_sam_proposal {
    float iou;       /* the model's predicted IoU */
    float stability; /* SAM's stability score: area above +1 over area above -1 */
    int64_t area;    /* pixels in the mask */
    int box[4];      /* x0, y0, x1, y1 (inclusive) of the mask; all -1 when empty */
} rlx_sam_proposal;

/* lowres: 256 x 256 logits from rlx_sam_decode; prep/info: how the image was
 * preprocessed. mask (info->orig_width x orig_height bytes, 255 inside, 0
 * outside) and logits (as many floats, scratch for the stability score) are
 * the caller's. */
RLX_API rlx_status rlx_sam_proposal_make(const float *lowres, float iou,
                                         const rlx_image_prep_params *prep,
                                         const rlx_image_prep_info *info, float *logits,
                                         uint8_t *mask, rlx_sam_proposal *out, rlx_error **err);

/* A mask at the image's size (w x h bytes, nonzero inside: a mask PNG that -o or
 * the pane wrote) as a mask prompt (rlx_sam_prompt.mask_input): 256 x 256 logits
 * in the model's input frame / 4. Each low-res pixel covers a block of the
 * prepared picture (info: SAM's longest-side resize with padding, or SAM 2's
 * stretch); the fraction f of the image's pixels inside there gives the logit
 * (2 f - 1) * RLX_SAM_MASK_PROMPT_LOGIT, and padding is outside. SAM was trained
 * with its own previous logits as the mask prompt; a binary mask is the nearest
 * a file can carry, and a decode's own low-res logits (kept by a caller that
 * clicks again) are the better prompt. Errors: RLX_ERR_INVALID_ARG (another size
 * than info's image). */
#define RLX_SAM_MASK_PROMPT_LOGIT 8.0f
RLX_API rlx_status rlx_sam_mask_prompt_from_mask(const uint8_t *mask, int w, int h,
                                                 const rlx_image_prep_info *info, float *lowres_out,
                                                 rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
