/* A random-weight FLUX.2 transformer for tests/test-flux2-dit.c: klein 4B's
 * widths (hidden 3072, 24 heads x 128, joint_dim 7680, MLP 9216) with one
 * double-stream and one single-stream block, the model and the weights of
 * tests/reference/flux2_dit_reference.py (values from the generator described
 * there, by diffusers name, rounded to BF16 whatever the file's dtype, so
 * that F32 and F16 files hold the reference's values too), written as
 *   - safetensors with diffusers names (BF16, F16 or F32), optionally as a
 *     diffusers transformer/ folder (config.json, two shards and the index);
 *   - safetensors with BFL names (fused qkv, [shift; scale] final modulation),
 *     optionally under a "model.diffusion_model." prefix;
 *   - GGUF with BFL names: matrices Q8_0 (or F16), norm scales F32;
 *   - safetensors with BFL names and the blocks' matrices in FP8 (F8_E4M3
 *     with BFL's / ComfyUI's "_scale", "input_scale" and "comfy_quant"
 *     tensors, or F8_E5M2 with ComfyUI's older "scale_weight"), or those
 *     matrices as F32 holding exactly the FP8 values times their scale.
 *
 * Usage:
 *     rlx_flux2_writer_opts o = {.dtype = RLX_DTYPE_BF16};
 *     if (rlx_flux2_writer_write("/tmp/f2.safetensors", &o, &err) != RLX_OK) ...
 *     rlx_flux2_writer_fill("latents", 128 * 16, lat);   // the reference's inputs
 *
 * Thread safety: reentrant.
 */
#ifndef RLX_TESTS_FLUX2_WRITER_H
#define RLX_TESTS_FLUX2_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#define RLX_F2W_HIDDEN 3072
#define RLX_F2W_JOINT  7680
#define RLX_F2W_MLP    9216

typedef enum rlx_f2w_format {
    RLX_F2W_DIFFUSERS,        /* one .safetensors, diffusers names */
    RLX_F2W_DIFFUSERS_FOLDER, /* path is a folder: transformer/ with shards, config.json */
    RLX_F2W_BFL,              /* one .safetensors, BFL names */
    RLX_F2W_GGUF,             /* .gguf, BFL names */
} rlx_f2w_format;

typedef struct rlx_flux2_writer_opts {
    rlx_f2w_format format;
    rlx_dtype dtype;      /* matrices: BF16 (INVALID), F16, F32, F8_E4M3, F8_E5M2 (BFL only); GGUF:
                           * Q8_0 (INVALID) or F16 */
    bool fp8_dequantized; /* FP8: the blocks' matrices as F32 of the FP8 values x scale */
    const char *prefix;   /* before every name (BFL / GGUF), or NULL */
    const char *skip;     /* a diffusers name to leave out (its BFL piece for BFL files) */
    int in_channels;      /* 0 = 128; another value makes an unknown variant */
    bool guidance;        /* add the guidance embedder (FLUX.2 dev's layout) */
    bool no_data;         /* safetensors: the header only, the data a sparse run of zeros
                           * (for tests that only open the file) */
    const char *config;   /* DIFFUSERS_FOLDER: config.json text, NULL = the right one */
    /* the widths (0 = the defaults above: klein 4B's hidden and joint_dim, one
     * block of each kind; the MLP is always 3 x hidden). Klein 4B in full:
     * hidden 3072, 5 double, 20 single, joint_dim 7680. */
    int hidden; /* a multiple of 128 (heads of 128) */
    int n_double, n_single;
    int joint_dim;
} rlx_flux2_writer_opts;

/* Errors: RLX_ERR_INVALID_ARG, RLX_ERR_IO, RLX_ERR_NO_MEMORY. */
rlx_status rlx_flux2_writer_write(const char *path, const rlx_flux2_writer_opts *o,
                                  rlx_error **err);
/* u(name, i) for i in [0, n): the reference's inputs ("latents", "text", "ref0"). */
void rlx_flux2_writer_fill(const char *name, int64_t n, float *dst);

#endif
