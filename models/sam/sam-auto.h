/* "Segment everything": SAM's automatic mask generator on one picture.
 *
 * Usage:
 *     rlx_sam_auto_params ap = rlx_sam_auto_default_params();
 *     rlx_sam_auto_mask *masks = NULL;
 *     int n = 0;
 *     // after rlx_sam_encode of the picture preprocessed with prep -> info
 *     if (rlx_sam_segment_all(sam, &prep, &info, &ap, NULL, NULL, &masks, &n, &err) != RLX_OK) ...
 *     rlx_sam_auto_masks_free(masks, n);
 *
 * As segment_anything's SamAutomaticMaskGenerator does without crops: a
 * grid of points_per_side x points_per_side points over the picture, each
 * one a single-point prompt with three proposals; a proposal is kept when
 * its predicted IoU is above pred_iou_thresh and its stability score (the
 * area of logits > +1 over that of logits > -1, at the picture's size) is at
 * least stability_thresh; then non-maximum suppression over the masks' boxes
 * (box IoU above box_nms_thresh, the higher predicted IoU stays). The kept
 * masks come at the picture's size, largest first.
 *
 * Memory: a proposal is measured at the picture's size and only its 256 x
 * 256 logits are kept until the suppression; the survivors alone are
 * upscaled again. At most max_masks proposals are kept (the best by
 * predicted IoU).
 *
 * Thread safety: as rlx_sam (one thread at a time).
 */
#ifndef RLX_MODELS_SAM_SAM_AUTO_H
#define RLX_MODELS_SAM_SAM_AUTO_H

#include "engine/image/image.h"
#include "models/sam/sam.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_sam_auto_params {
    int points_per_side;    /* 1..64; segment_anything: 32, ours 16 (a click each) */
    float pred_iou_thresh;  /* 0.88 */
    float stability_thresh; /* 0.95 */
    float box_nms_thresh;   /* 0.7 */
    int max_masks;          /* 256 */
} rlx_sam_auto_params;

typedef struct rlx_sam_auto_mask {
    uint8_t *mask; /* width x height bytes (the picture's): 255 inside, 0 outside */
    int width, height;
    float iou, stability;
    int64_t area;
    int box[4];     /* x0, y0, x1, y1, inclusive */
    float point[2]; /* the grid point that found it, in the picture's pixels */
} rlx_sam_auto_mask;

/* Return false to stop (the call then fails with RLX_ERR_CANCELLED). */
typedef bool (*rlx_sam_auto_progress_fn)(void *user, int done, int total);

RLX_API rlx_sam_auto_params rlx_sam_auto_default_params(void);

/* Against the picture last encoded (prep/info: how it was preprocessed).
 * *out is set to NULL first; free with rlx_sam_auto_masks_free. */
RLX_API rlx_status rlx_sam_segment_all(rlx_sam *sam, const rlx_image_prep_params *prep,
                                       const rlx_image_prep_info *info,
                                       const rlx_sam_auto_params *p,
                                       rlx_sam_auto_progress_fn progress, void *user,
                                       rlx_sam_auto_mask **out, int *n_out, rlx_error **err);
RLX_API void rlx_sam_auto_masks_free(rlx_sam_auto_mask *masks, int n);

#ifdef __cplusplus
}
#endif
#endif
