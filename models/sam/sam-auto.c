/* SAM's automatic mask generator (see sam-auto.h): a grid of single-point
 * prompts, proposals filtered by predicted IoU and stability, non-maximum
 * suppression over their boxes. The model runs on its device; the
 * filtering is bookkeeping on a few numbers per proposal. */
#include <stdlib.h>
#include <string.h>

#include "models/sam/sam-auto.h"
#include "models/sam/sam-open.h"

#define LOW (RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE)

rlx_sam_auto_params rlx_sam_auto_default_params(void)
{
    return (rlx_sam_auto_params){.points_per_side = 16,
                                 .pred_iou_thresh = 0.88f,
                                 .stability_thresh = 0.95f,
                                 .box_nms_thresh = 0.7f,
                                 .max_masks = 256};
}

typedef struct {
    float *low; /* 256 x 256 logits */
    rlx_sam_proposal p;
    float point[2];
} cand;

/* torchvision's box_iou on x0, y0, x1, y1 boxes (areas without the +1) */
static float box_iou(const int *a, const int *b)
{
    float ix = (float)((a[2] < b[2] ? a[2] : b[2]) - (a[0] > b[0] ? a[0] : b[0]));
    float iy = (float)((a[3] < b[3] ? a[3] : b[3]) - (a[1] > b[1] ? a[1] : b[1]));
    float inter = ix > 0 && iy > 0 ? ix * iy : 0;
    float aa = (float)(a[2] - a[0]) * (float)(a[3] - a[1]);
    float ab = (float)(b[2] - b[0]) * (float)(b[3] - b[1]);
    float uni = aa + ab - inter;
    return uni > 0 ? inter / uni : 0;
}

static int by_iou_desc(const void *x, const void *y)
{
    const cand *a = x, *b = y;
    return a->p.iou < b->p.iou ? 1 : a->p.iou > b->p.iou ? -1 : 0;
}

static int by_area_desc(const void *x, const void *y)
{
    const rlx_sam_auto_mask *a = x, *b = y;
    return a->area < b->area ? 1 : a->area > b->area ? -1 : 0;
}

void rlx_sam_auto_masks_free(rlx_sam_auto_mask *masks, int n)
{
    for (int i = 0; masks && i < n; i++)
        free(masks[i].mask);
    free(masks);
}

rlx_status rlx_sam_segment_all(rlx_sam *sam, const rlx_image_prep_params *prep,
                               const rlx_image_prep_info *info, const rlx_sam_auto_params *p,
                               rlx_sam_auto_progress_fn progress, void *user,
                               rlx_sam_auto_mask **out, int *n_out, rlx_error **err)
{
    *out = NULL;
    *n_out = 0;
    if (!sam || !prep || !info || !p)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_sam_segment_all: missing argument");
    if (p->points_per_side < 1 || p->points_per_side > 64 || p->max_masks < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "points per side must be 1 to 64 and at most one mask or more kept, "
                             "not %d and %d",
                             p->points_per_side, p->max_masks);
    int w = info->orig_width, h = info->orig_height;
    size_t npix = (size_t)w * (size_t)h;
    int cap = p->max_masks * 2; /* candidates kept before the suppression */
    cand *c = calloc((size_t)cap, sizeof *c);
    float *logits = malloc(npix * sizeof *logits);
    uint8_t *mask = malloc(npix);
    float *low = malloc(3 * LOW * sizeof *low);
    rlx_status st = RLX_OK;
    int nc = 0;
    if (!c || !logits || !mask || !low) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for segmenting a %dx%d picture",
                           w, h);
        goto out;
    }
    int n = p->points_per_side, total = n * n;
    float sx = (float)info->resized_width / (float)w, sy = (float)info->resized_height / (float)h;
    for (int gy = 0, done = 0; gy < n && st == RLX_OK; gy++) {
        for (int gx = 0; gx < n; gx++, done++) {
            if (progress && !progress(user, done, total)) {
                st = rlx_error_set(err, RLX_ERR_CANCELLED, "segmenting everything was stopped");
                break;
            }
            /* build_point_grid: cell centres, in the picture's pixels */
            float px = ((float)gx + 0.5f) / (float)n * (float)w;
            float py = ((float)gy + 0.5f) / (float)n * (float)h;
            rlx_sam_point pt = {px * sx, py * sy, RLX_SAM_POSITIVE};
            rlx_sam_prompt pr = {.points = &pt, .n_points = 1};
            float iou[3];
            int k_n = 0;
            if ((st = rlx_sam_decode(sam, &pr, true, low, iou, &k_n, err)) != RLX_OK)
                break;
            for (int k = 0; k < k_n && st == RLX_OK; k++) {
                if (!(iou[k] > p->pred_iou_thresh))
                    continue;
                rlx_sam_proposal sp;
                st = rlx_sam_proposal_make(low + (size_t)k * LOW, iou[k], prep, info, logits, mask,
                                           &sp, err);
                if (st != RLX_OK || sp.stability < p->stability_thresh || sp.area == 0)
                    continue;
                /* keep the best `cap` by predicted IoU */
                int at = nc;
                if (nc == cap) {
                    at = 0;
                    for (int i = 1; i < nc; i++)
                        if (c[i].p.iou < c[at].p.iou)
                            at = i;
                    if (c[at].p.iou >= sp.iou)
                        continue;
                } else {
                    c[at].low = malloc(LOW * sizeof(float));
                    if (!c[at].low) {
                        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
                        break;
                    }
                    nc++;
                }
                memcpy(c[at].low, low + (size_t)k * LOW, LOW * sizeof(float));
                c[at].p = sp;
                c[at].point[0] = px, c[at].point[1] = py;
            }
        }
    }
    if (st != RLX_OK)
        goto out;
    if (progress)
        progress(user, total, total);
    /* non-maximum suppression, the higher predicted IoU first */
    qsort(c, (size_t)nc, sizeof *c, by_iou_desc);
    int *keep = malloc((size_t)(nc ? nc : 1) * sizeof *keep);
    int nk = 0;
    if (!keep) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    for (int i = 0; i < nc && nk < p->max_masks; i++) {
        bool ok = true;
        for (int j = 0; j < nk && ok; j++)
            ok = box_iou(c[i].p.box, c[keep[j]].p.box) <= p->box_nms_thresh;
        if (ok)
            keep[nk++] = i;
    }
    rlx_sam_auto_mask *m = calloc((size_t)(nk ? nk : 1), sizeof *m);
    if (!m) {
        free(keep);
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    for (int j = 0; j < nk && st == RLX_OK; j++) {
        cand *ci = &c[keep[j]];
        m[j].mask = malloc(npix);
        if (!m[j].mask) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for %d masks of %dx%d", nk, w,
                               h);
            break;
        }
        rlx_sam_proposal sp;
        st = rlx_sam_proposal_make(ci->low, ci->p.iou, prep, info, logits, m[j].mask, &sp, err);
        m[j].width = w, m[j].height = h;
        m[j].iou = sp.iou, m[j].stability = sp.stability, m[j].area = sp.area;
        memcpy(m[j].box, sp.box, sizeof m[j].box);
        m[j].point[0] = ci->point[0], m[j].point[1] = ci->point[1];
    }
    free(keep);
    if (st != RLX_OK) {
        rlx_sam_auto_masks_free(m, nk);
        goto out;
    }
    qsort(m, (size_t)nk, sizeof *m, by_area_desc);
    *out = m;
    *n_out = nk;
out:
    for (int i = 0; c && i < nc; i++)
        free(c[i].low);
    free(c);
    free(logits);
    free(mask);
    free(low);
    return st;
}
