/* rlx_sam_open: a SAM checkpoint as people download it, whatever its file
 * format: the official PyTorch release (.pth/.pt, read by the safe zip
 * reader of engine/formats/torch-zip.h, which executes nothing), a
 * .safetensors file, or a Hugging Face folder. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>

#include "engine/formats/mapfile.h"
#include "engine/formats/torch-zip.h"
#include "models/sam/sam-open.h"

typedef struct {
    rlx_torch_zip *tz;
    const char *path;
} pt_source;

static bool pt_lookup(void *user, const char *name, rlx_sam_tensor *out)
{
    pt_source *s = user;
    const rlx_torch_tensor *t = rlx_torch_zip_find(s->tz, name);
    if (!t || t->n_dims > RLX_SAM_MAX_DIMS)
        return false;
    const void *data = rlx_torch_zip_data(s->tz, t);
    if (!data)
        return false; /* a strided view: the runner then names it as missing */
    memset(out, 0, sizeof *out);
    out->dtype = t->dtype;
    out->rank = (int)t->n_dims;
    for (uint32_t i = 0; i < t->n_dims; i++)
        out->dims[i] = (int64_t)t->shape[i];
    out->data = data;
    out->n_bytes = t->n_bytes;
    return true;
}

struct rlx_sam_file {
    rlx_sam *sam;
    rlx_torch_zip *tz; /* the .pt the runner's weights point into, or NULL */
};

static bool is_zip(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    unsigned char head[4] = {0};
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return rlx_torch_zip_sniff(head, n);
}

rlx_status rlx_sam_open(const rlx_sam_params *p, const char *path, rlx_sam_file **out,
                        rlx_error **err)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return rlx_error_set(err, RLX_ERR_IO, "cannot open %s: no such file or folder", path);
    rlx_sam_file *f = calloc(1, sizeof *f);
    if (!f)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    rlx_status st;
    if (S_ISREG(sb.st_mode) && is_zip(path)) {
        st = rlx_torch_zip_open(path, &f->tz, err);
        if (st == RLX_OK) {
            pt_source src = {f->tz, path};
            st = rlx_sam_create(p, pt_lookup, &src, path, &f->sam, err);
        }
    } else {
        st = rlx_sam_create_file(p, path, &f->sam, err);
    }
    if (st != RLX_OK) {
        rlx_sam_file_close(f);
        return st;
    }
    *out = f;
    return RLX_OK;
}

rlx_sam *rlx_sam_file_runner(rlx_sam_file *f)
{
    return f ? f->sam : NULL;
}

void rlx_sam_file_close(rlx_sam_file *f)
{
    if (!f)
        return;
    rlx_sam_free(f->sam); /* before the mapping its weights may point into */
    rlx_torch_zip_close(f->tz);
    free(f);
}

rlx_status rlx_sam_proposal_make(const float *lowres, float iou, const rlx_image_prep_params *prep,
                                 const rlx_image_prep_info *info, float *logits, uint8_t *mask,
                                 rlx_sam_proposal *out, rlx_error **err)
{
    rlx_status st = rlx_image_mask_upsample(lowres, RLX_SAM_MASK_SIDE, RLX_SAM_MASK_SIDE, prep,
                                            info, 0.0f, logits, mask, err);
    if (st != RLX_OK)
        return st;
    int w = info->orig_width, h = info->orig_height;
    int64_t above_hi = 0, above_lo = 0, area = 0;
    int x0 = w, y0 = h, x1 = -1, y1 = -1;
    for (int y = 0; y < h; y++) { /* counts without branches, then the row's ends */
        const float *l = logits + (size_t)y * (size_t)w;
        const uint8_t *m = mask + (size_t)y * (size_t)w;
        int hi = 0, lo = 0, in = 0;
        for (int x = 0; x < w; x++) {
            hi += l[x] > 1.0f;
            lo += l[x] > -1.0f;
            in += m[x] != 0;
        }
        above_hi += hi;
        above_lo += lo;
        if (!in)
            continue;
        area += in;
        int a = 0, b = w - 1;
        while (!m[a])
            a++;
        while (!m[b])
            b--;
        x0 = a < x0 ? a : x0;
        x1 = b > x1 ? b : x1;
        y0 = y < y0 ? y : y0;
        y1 = y;
    }
    out->iou = iou;
    out->stability = above_lo ? (float)above_hi / (float)above_lo : 0.0f;
    out->area = area;
    if (area) {
        out->box[0] = x0, out->box[1] = y0, out->box[2] = x1, out->box[3] = y1;
    } else {
        out->box[0] = out->box[1] = out->box[2] = out->box[3] = -1;
    }
    return RLX_OK;
}

rlx_status rlx_sam_mask_prompt_from_mask(const uint8_t *mask, int w, int h,
                                         const rlx_image_prep_info *info, float *out,
                                         rlx_error **err)
{
    if (!mask || !info || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_sam_mask_prompt_from_mask: missing argument");
    if (w != info->orig_width || h != info->orig_height || w < 1 || h < 1 ||
        info->resized_width < 1 || info->resized_height < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the mask is %dx%d pixels; a mask prompt must have the image's "
                             "size, %dx%d",
                             w, h, info->orig_width, info->orig_height);
    const int S = RLX_SAM_MASK_SIDE, F = RLX_SAM_IMAGE_SIZE / RLX_SAM_MASK_SIDE;
    /* the image pixels [x0, x1) under the input frame's columns [a, a + F) */
    const double fx = (double)w / info->resized_width, fy = (double)h / info->resized_height;
    for (int v = 0; v < S; v++) {
        int y0 = (int)(v * F * fy), y1 = (int)((v + 1) * F * fy);
        y1 = y1 > h ? h : y1;
        if (y1 <= y0 && y0 < h)
            y1 = y0 + 1;
        for (int u = 0; u < S; u++) {
            int x0 = (int)(u * F * fx), x1 = (int)((u + 1) * F * fx);
            x1 = x1 > w ? w : x1;
            if (x1 <= x0 && x0 < w)
                x1 = x0 + 1;
            int64_t in = 0, all = 0;
            for (int y = y0; y < y1; y++)
                for (int x = x0; x < x1; x++) {
                    in += mask[(size_t)y * (size_t)w + (size_t)x] != 0;
                    all++;
                }
            float f = all ? (float)in / (float)all : 0.0f; /* padding: outside */
            out[(size_t)v * S + (size_t)u] = (2.0f * f - 1.0f) * RLX_SAM_MASK_PROMPT_LOGIT;
        }
    }
    return RLX_OK;
}

rlx_image_prep_params rlx_sam_prep_params(rlx_sam *sam)
{
    rlx_sam_info mi;
    if (sam && rlx_sam_info_get(sam, &mi, NULL) == RLX_OK && mi.sam2)
        return rlx_image_prep_sam2_params();
    return rlx_image_prep_sam_params();
}
