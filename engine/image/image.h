/* Images in and out for the vision models: PNG and JPEG decoded to 8-bit RGB
 * (alpha kept apart), EXIF orientation applied, the SAM / SAM 2 resize and
 * normalisation to a CHW float tensor, mask logits upsampled back to the
 * image, and PNG writing (a 0/255 mask, a cut-out with the mask as alpha).
 *
 * Usage:
 *     rlx_error *err = NULL;
 *     rlx_image *img = NULL;
 *     rlx_image_load_params lp = rlx_image_load_default_params(); // or NULL for these
 *     if (rlx_image_load("photo.jpg", &lp, &img, &err) != RLX_OK)
 *         ...report rlx_error_message(err)...
 *     rlx_image_prep_params pp = rlx_image_prep_sam_params(); // SAM 1: 1024, pad
 *     float *x = malloc(rlx_image_prep_floats(&pp) * sizeof(float));
 *     rlx_image_prep_info info;
 *     rlx_image_preprocess(img, &pp, x, &info, &err);  // x: 3 x 1024 x 1024
 *     ...run the image encoder and the mask decoder: 256 x 256 logits `lo`...
 *     uint8_t *mask = malloc((size_t)img->width * img->height);
 *     rlx_image_mask_upsample(lo, 256, 256, &pp, &info, 0.0f, NULL, mask, &err);
 *     rlx_image_write_cutout_png("cut.png", img, mask, false, &err);
 *     rlx_image_free(img);
 *
 * The preprocessing reproduces the reference pipelines pixel for pixel:
 * - SAM (segment_anything): ResizeLongestSide (longest side = target, each
 *   side int(old * target / longest + 0.5)), resized as torchvision's resize
 *   of a PIL image does, i.e. PIL's Image.resize with BILINEAR: a separable,
 *   support-scaled triangle filter in 22-bit fixed point, horizontal pass
 *   first, each pass rounded and clamped to uint8; then (x - mean) / std in
 *   float32 and zero padding at the bottom and right to target x target.
 * - SAM 2 (SAM2Transforms): ToTensor (x / 255), Resize((target, target)) on
 *   the float tensor (torch's antialiased bilinear: the same filter as PIL's
 *   but in float, no rounding), then Normalize.
 * Mask post-processing follows Sam.postprocess_masks / SAM2Transforms:
 * F.interpolate(bilinear, align_corners=False) to target x target, crop to
 * the resized size, bilinear again to the original size (SAM 2: straight to
 * the original size), then logits > threshold.
 *
 * Thread safety: every function is reentrant; an rlx_image is a plain value
 * that may be read from several threads at once.
 */
#ifndef RLX_ENGINE_IMAGE_IMAGE_H
#define RLX_ENGINE_IMAGE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A decoded image: rows top to bottom, pixels left to right. */
typedef struct rlx_image {
    int width, height;
    uint8_t *rgb;   /* width * height * 3, R G B per pixel */
    uint8_t *alpha; /* width * height, or NULL when the file has no alpha / transparency */
} rlx_image;

typedef struct rlx_image_load_params {
    /* Images with more pixels than this are refused from their header, before
     * any pixel memory is allocated. Default RLX_IMAGE_DEFAULT_MAX_PIXELS. */
    int64_t max_pixels;
    /* Turn JPEGs upright by their EXIF Orientation tag (1..8). Default true. */
    bool apply_orientation;
} rlx_image_load_params;

#define RLX_IMAGE_DEFAULT_MAX_PIXELS ((int64_t)100 * 1000 * 1000)
/* max_pixels <= 0 means the default; above this it is clamped to this. */
#define RLX_IMAGE_MAX_PIXELS_LIMIT ((int64_t)1 << 36)

RLX_API rlx_image_load_params rlx_image_load_default_params(void);

/* `params` may be NULL for the defaults.
 * Decodes a PNG (any bit depth, palette, gray, gray+alpha, RGB, RGBA,
 * interlaced; 16-bit samples keep their high byte, as libpng's strip_16 and
 * PIL's RGB;16B do) or a JPEG (YCbCr, RGB, grayscale, CMYK/YCCK). The kind is
 * told by the magic bytes, never the file name. *out is set to NULL first
 * and owned by the caller (rlx_image_free).
 * Errors: RLX_ERR_INVALID_ARG (NULL arguments), RLX_ERR_IO (missing,
 * unreadable, a folder), RLX_ERR_FORMAT (not an image, truncated, corrupt),
 * RLX_ERR_UNSUPPORTED (another image format: GIF, WebP, ...; more pixels than
 * max_pixels), RLX_ERR_NO_MEMORY. */
RLX_API rlx_status rlx_image_load(const char *path, const rlx_image_load_params *params,
                                  rlx_image **out, rlx_error **err);
/* The same from bytes in memory (the caller keeps `data`). */
RLX_API rlx_status rlx_image_decode(const void *data, size_t size,
                                    const rlx_image_load_params *params, rlx_image **out,
                                    rlx_error **err);
RLX_API void rlx_image_free(rlx_image *img);

/* "PNG", "JPEG", or NULL for bytes that are neither. */
RLX_API const char *rlx_image_sniff(const void *data, size_t size);

/* How the image is fitted into target x target. */
typedef enum rlx_image_fit {
    /* SAM: keep the aspect ratio, longest side = target, zero-pad bottom/right */
    RLX_IMAGE_FIT_LONGEST_PAD = 0,
    /* SAM 2: stretch to target x target */
    RLX_IMAGE_FIT_STRETCH,
} rlx_image_fit;

/* How the pixels are resampled. */
typedef enum rlx_image_resample {
    /* PIL Image.resize(BILINEAR) on uint8: rounded to uint8 after each pass */
    RLX_IMAGE_RESAMPLE_PIL_U8 = 0,
    /* torch F.interpolate(bilinear, antialias=True) on floats (pixel / divisor) */
    RLX_IMAGE_RESAMPLE_FLOAT_AA,
} rlx_image_resample;

typedef struct rlx_image_prep_params {
    int target; /* the model's input side, e.g. 1024 */
    rlx_image_fit fit;
    rlx_image_resample resample;
    /* value = (pixel / divisor - mean[c]) / std[c], in float32 */
    float divisor; /* 1 (SAM: mean/std in 0..255) or 255 (SAM 2: in 0..1) */
    float mean[3];
    float std[3];
} rlx_image_prep_params;

/* SAM 1 (ViT-B/L/H, MobileSAM): 1024, longest side + pad, PIL uint8 resize,
 * mean 123.675 116.28 103.53, std 58.395 57.12 57.375. */
RLX_API rlx_image_prep_params rlx_image_prep_sam_params(void);
/* SAM 2 / 2.1: 1024, stretched, float antialiased resize of pixel / 255,
 * mean 0.485 0.456 0.406, std 0.229 0.224 0.225. */
RLX_API rlx_image_prep_params rlx_image_prep_sam2_params(void);

/* What preprocessing did, needed again by the mask post-processing. */
typedef struct rlx_image_prep_info {
    int orig_width, orig_height;       /* the image's size */
    int resized_width, resized_height; /* the picture inside the tensor */
} rlx_image_prep_info;

/* 3 * target * target, the floats rlx_image_preprocess writes. */
RLX_API size_t rlx_image_prep_floats(const rlx_image_prep_params *p);

/* SAM's ResizeLongestSide.get_preprocess_shape: scale = target / max(w, h),
 * each side int(side * scale + 0.5) (in double, as Python). */
RLX_API void rlx_image_longest_side_shape(int width, int height, int target, int *out_width,
                                          int *out_height);

/* Writes the CHW float32 tensor (3 x target x target) into `dst`, which holds
 * rlx_image_prep_floats(p) floats. `info` may be NULL.
 * Errors: RLX_ERR_INVALID_ARG (NULL, target < 1 or > 16384, std 0, divisor
 * 0), RLX_ERR_NO_MEMORY. */
RLX_API rlx_status rlx_image_preprocess(const rlx_image *img, const rlx_image_prep_params *p,
                                        float *dst, rlx_image_prep_info *info, rlx_error **err);

/* PIL Image.resize(size, BILINEAR) of an interleaved uint8 image with
 * `channels` (1..4) samples a pixel, bit-exact with Pillow's Resample.c.
 * dst holds dw * dh * channels bytes. */
RLX_API rlx_status rlx_image_resize_pil_bilinear(const uint8_t *src, int sw, int sh, int channels,
                                                 uint8_t *dst, int dw, int dh, rlx_error **err);

/* The bilinear resize of @imgly/background-removal (its tensorResizeBilinear),
 * for an interleaved uint8 image of `channels` (1..4) samples a pixel: the
 * destination pixel (x, y) samples the source at (x * sw / dw, y * sh / dh)
 * (corners aligned at the top-left, no half-pixel offset), from the 2 x 2
 * pixels around it (no antialiasing when shrinking), computed in double
 * precision and rounded half up to uint8, as the JavaScript does, so that
 * the result is the same byte for byte. dst holds dw * dh * channels bytes. */
RLX_API rlx_status rlx_image_resize_bilinear_topleft(const uint8_t *src, int sw, int sh,
                                                     int channels, uint8_t *dst, int dw, int dh,
                                                     rlx_error **err);

/* torch.nn.functional.interpolate(x, (dh, dw), mode="bilinear",
 * align_corners=False) of one float plane (no antialiasing), as the CPU
 * kernel computes it in float. */
RLX_API rlx_status rlx_image_interpolate_bilinear(const float *src, int sw, int sh, float *dst,
                                                  int dw, int dh, rlx_error **err);

/* Low-resolution mask logits (lw x lh, e.g. 256 x 256) back to the original
 * image, as the reference post-processing does for p->fit (see the top).
 * `logits` (orig w x h floats) and `mask` (orig w x h bytes: 255 where the
 * logit > threshold, else 0) may each be NULL. */
RLX_API rlx_status rlx_image_mask_upsample(const float *lowres, int lw, int lh,
                                           const rlx_image_prep_params *p,
                                           const rlx_image_prep_info *info, float threshold,
                                           float *logits, uint8_t *mask, rlx_error **err);

/* Writes an 8-bit PNG of `channels` (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA)
 * interleaved samples. The file is written beside `path` under a temporary
 * name and renamed into place, so a reader never sees half a file. Without
 * `overwrite` an existing file is left alone: RLX_ERR_IO "... exists".
 * Errors: RLX_ERR_INVALID_ARG, RLX_ERR_IO, RLX_ERR_NO_MEMORY. */
RLX_API rlx_status rlx_image_write_png(const char *path, const uint8_t *pixels, int width,
                                       int height, int channels, bool overwrite, rlx_error **err);
/* The same, with one text chunk key = value (e.g. "parameters", the
 * settings that made a generated picture): a tEXt chunk when value is ASCII,
 * else an iTXt chunk (UTF-8). key: 1 to 79 printable ASCII characters.
 * Errors: as rlx_image_write_png; RLX_ERR_INVALID_ARG for a bad key or a
 * NULL value. */
RLX_API rlx_status rlx_image_write_png_text(const char *path, const uint8_t *pixels, int width,
                                            int height, int channels, const char *key,
                                            const char *value, bool overwrite, rlx_error **err);
/* A 0/255 (or any 8-bit) mask as a grayscale PNG. */
RLX_API rlx_status rlx_image_write_mask_png(const char *path, const uint8_t *mask, int width,
                                            int height, bool overwrite, rlx_error **err);
/* The image's pixels with `mask` (img->width x img->height bytes) as alpha,
 * as an RGBA PNG (the image's own alpha, if any, is replaced). */
RLX_API rlx_status rlx_image_write_cutout_png(const char *path, const rlx_image *img,
                                              const uint8_t *mask, bool overwrite, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
