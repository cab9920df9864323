/* A random-weight FLUX.2 VAE (AutoencoderKLFlux2 at FLUX.2 [klein]'s real
 * widths: 128 256 512 512, 32 latent channels) as safetensors under diffusers
 * or BFL (ae.safetensors) names, for tests/test-flux2-vae.c: the weights of
 * tests/reference/flux2_vae_reference.py, whose docstring gives the generator
 * (each tensor hashes its diffusers name, so both namings hold equal values;
 * every value is the F16 rounding of the generator's float). Linked into tests
 * only.
 *
 * Usage:
 *     rlx_flux2_vae_writer_opts o = {.bfl_names = true, .prefix = "vae."};
 *     if (rlx_flux2_vae_writer_write("/tmp/ae.safetensors", &o, &err) != RLX_OK) ...
 *     rlx_flux2_vae_writer_packed(packed);   // the reference's inputs
 *     rlx_flux2_vae_writer_image(rgb);
 *
 * About 168 MB as F16 (both halves), 336 MB as F32; well under a second to
 * write in a release build.
 *
 * Thread safety: reentrant.
 */
#ifndef RLX_TESTS_FLUX2_VAE_WRITER_H
#define RLX_TESTS_FLUX2_VAE_WRITER_H

#include <stdbool.h>

#include "backends/base/status.h"

/* the reference's input sizes */
#define RLX_FVW_LH    4
#define RLX_FVW_LW    6
#define RLX_FVW_IMG_H (16 * RLX_FVW_LH)
#define RLX_FVW_IMG_W (16 * RLX_FVW_LW)

typedef struct rlx_flux2_vae_writer_opts {
    bool bfl_names;        /* BFL's names (1x1-conv attention weights) instead of diffusers' */
    const char *prefix;    /* put before every name ("vae."), or NULL */
    bool f32;              /* F32 tensors (holding the same F16-rounded values) */
    bool bf16;             /* BF16 tensors (those values rounded again: not the reference's) */
    bool decoder_only;     /* leave the encoder and quant_conv out */
    const char *skip;      /* a diffusers name to leave out, or NULL */
    const char *misshape;  /* a diffusers name to write with its first dim doubled, or NULL */
    const int *dec_widths; /* the decoder's 4 block widths (FLUX.2-small-decoder: 96 192 384
                            * 384), or NULL for 128 256 512 512 */
    const int *enc_widths; /* the encoder's 4 block widths, or NULL for 128 256 512 512
                            * (multiples of 32: GroupNorm's 32 groups) */
} rlx_flux2_vae_writer_opts;

/* Errors: RLX_ERR_IO, RLX_ERR_NO_MEMORY. */
rlx_status rlx_flux2_vae_writer_write(const char *path, const rlx_flux2_vae_writer_opts *o,
                                      rlx_error **err);
/* u("packed", i) * 2 over [128][RLX_FVW_LH][RLX_FVW_LW]. */
void rlx_flux2_vae_writer_packed(float *packed);
/* (u("image", i) + 1) / 2 over [3][RLX_FVW_IMG_H][RLX_FVW_IMG_W]. */
void rlx_flux2_vae_writer_image(float *chw);

#endif
