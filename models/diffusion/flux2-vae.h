/* The FLUX.2 VAE (diffusers AutoencoderKLFlux2, BFL's ae.safetensors): its
 * decoder and encoder on the compile+execute stack, exchanging the packed,
 * batch-norm normalized latents the FLUX.2 transformer works on.
 *
 * Usage:
 *     rlx_flux2_vae_params p = rlx_flux2_vae_default_params();
 *     p.device = "vulkan:0";
 *     rlx_flux2_vae *v = NULL;
 *     if (rlx_flux2_vae_open("FLUX.2-klein-4B", &p, &v, &err) != RLX_OK) ...
 *     // packed: [128][lh][lw] floats; rgb: 3 x 16lh x 16lw in [0, 1] (CHW)
 *     rlx_flux2_vae_decode(v, packed, lh, lw, rgb, &err);
 *     rlx_flux2_vae_encode(v, rgb, 16 * lh, 16 * lw, packed, &err);  // the mean
 *     rlx_flux2_vae_unpack(v, packed, lh, lw, latent32);  // for rlx_taef2_decode
 *     rlx_flux2_vae_free(v);
 *
 * Facts (read from diffusers' autoencoder_kl_flux2.py, vae.py, resnet.py,
 * attention_processor.py, pipelines/flux2/pipeline_flux2_klein.py,
 * scripts/convert_flux2_to_diffusers.py and black-forest-labs/flux2's
 * src/flux2/autoencoder.py; the config of black-forest-labs/FLUX.2-klein-4B
 * and -9B vae/config.json):
 *   block_out_channels 128 256 512 512, layers_per_block 2, latent_channels 32,
 *   norm_num_groups 32 (every GroupNorm: eps 1e-6, affine), act SiLU,
 *   use_quant_conv / use_post_quant_conv true (1x1 convs 64->64, 32->32),
 *   mid_block_add_attention true, batch_norm_eps 1e-4, patch_size 2x2.
 *   ResnetBlock2D: norm1 SiLU conv1(3x3) norm2 SiLU conv2(3x3), plus the input
 *   (through conv_shortcut, 1x1, when the widths differ); output scale 1.
 *   Encoder: conv_in 3->128; down_blocks.i (i = 0..3) two resnets to width
 *   block_out_channels[i], then (i < 3) downsamplers.0.conv: pad right and
 *   bottom by one zero, 3x3 stride 2 no padding; mid_block (resnets.0,
 *   attentions.0, resnets.1 at 512); conv_norm_out SiLU conv_out 512->64;
 *   quant_conv; the distribution's mean is channels 0..31 (encode uses it,
 *   "argmax" in the pipeline; nothing is sampled).
 *   Decoder: post_quant_conv; conv_in 32->512; mid_block; up_blocks.i
 *   (i = 0..3, widths 512 512 256 128) three resnets each, then (i < 3)
 *   upsamplers.0: nearest 2x and a 3x3 conv; conv_norm_out SiLU conv_out
 *   128->3. The image is in [-1, 1]: the pipeline's processor maps [0, 1]
 *   with 2x - 1 in and (x + 1) / 2 clamped to [0, 1] out, as done here.
 *   Mid-block attention: group_norm, one head of width 512 over the H/8 x W/8
 *   tokens, to_q / to_k / to_v / to_out.0 linears with bias, scale 1/sqrt(512),
 *   plus the input.
 *   Packing (Flux2KleinPipeline._patchify_latents / _unpatchify_latents):
 *   packed channel c*4 + dy*2 + dx at (y, x) is the latent's channel c at
 *   (2y + dy, 2x + dx); then (z - bn.running_mean) / sqrt(bn.running_var +
 *   1e-4) per packed channel after encoding, the inverse before decoding.
 *   BFL names (ae.safetensors): encoder.down.I.block.J.*, .downsample.conv,
 *   encoder.mid.block_1 / attn_1 / block_2, encoder.norm_out,
 *   encoder.quant_conv; decoder.up.I (I reversed: BFL up.3 is diffusers
 *   up_blocks.0).block.J.*, .upsample.conv, decoder.mid.*,
 *   decoder.norm_out, decoder.post_quant_conv; nin_shortcut for
 *   conv_shortcut; attn_1.norm / q / k / v / proj_out as 1x1 convs
 *   [512, 512, 1, 1]; bn.running_mean, bn.running_var (bn.num_batches_tracked
 *   is not read). Names may carry a "vae." or "first_stage_model." prefix
 *   (single-file checkpoints that hold more than the VAE).
 * The widths are read from the file's shapes (multiples of 32 groups, at most
 * 2048), so a decoder of other widths (FLUX.2-small-decoder: 96 192 384 384)
 * opens too; a file without encoder tensors gives a decoder-only runner.
 *
 * The network is built with the graph IR only: weights are PARAMs in their
 * file dtype (F32, F16 or BF16, per tensor); conv kernels go to the conv as
 * they are (the backends widen them while reading), the small rest is cast to
 * F32 on the device. The
 * packing and batch-norm (a few multiply-adds per latent value) run on the
 * host, in rlx_flux2_vae_unpack and its inverse. The attention's queries go in
 * blocks so that a backend that has to spell attention as matmul + softmax
 * (Vulkan at head width 512) never holds more than 16M scores at once.
 *
 * Sizes: images of at least 16x16 pixels, multiples of 16 on both sides, at
 * most RLX_FLUX2_VAE_MAX_SIDE a side and RLX_FLUX2_VAE_MAX_PIXELS in all;
 * other sizes get a sentence. One program per size, compiled on first use and
 * cached by the session. Activations on the CPU (the memory plan of the
 * compiled programs): decoder 641 MiB at 512x512 and 2.5 GiB at 1024x1024,
 * encoder 385 MiB and 1.5 GiB; the F16 weights are 95 MiB (decoder) and
 * 66 MiB (encoder).
 *
 * Ownership: the runner owns its session and the mapped weight file.
 * Thread safety: a runner is used by one thread at a time; rlx_flux2_vae_unpack
 * and rlx_flux2_vae_pack only read the runner and may be called from any
 * thread, also while another decodes.
 */
#ifndef RLX_MODELS_DIFFUSION_FLUX2_VAE_H
#define RLX_MODELS_DIFFUSION_FLUX2_VAE_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_session;

#define RLX_FLUX2_VAE_LATENT_CHANNELS 32  /* the VAE's own latent */
#define RLX_FLUX2_VAE_PACKED_CHANNELS 128 /* after the 2x2 patchify */
#define RLX_FLUX2_VAE_SCALE           16  /* image side / packed latent side */
#define RLX_FLUX2_VAE_MAX_SIDE        8192
#define RLX_FLUX2_VAE_MAX_PIXELS      (2048 * 2048)
#define RLX_FLUX2_VAE_BN_EPS          1e-4f

typedef struct rlx_flux2_vae rlx_flux2_vae;

typedef struct rlx_flux2_vae_params {
    const char *device;     /* "cpu", "vulkan:0", ...; NULL = "cpu" */
    int n_threads;          /* CPU threads; 0 = one per core */
    uint64_t memory_budget; /* bytes; 0 = the device's total memory */
    /* queries per block of the mid-block attention; 0 = as many as keep a
     * block's scores at 16M (all 4096 tokens of a 512x512 image, 1024 of the
     * 16384 of a 1024x1024 one) */
    int attn_block;
} rlx_flux2_vae_params;

typedef struct rlx_flux2_vae_config {
    int enc_channels[4]; /* block_out_channels of the encoder (0 without one) */
    int dec_channels[4]; /* of the decoder, from the lowest resolution up */
    bool has_encoder;
    bool bfl_names;     /* the file uses BFL's names (ae.safetensors) */
    const char *prefix; /* "", "vae." or "first_stage_model." */
} rlx_flux2_vae_config;

RLX_API rlx_flux2_vae_params rlx_flux2_vae_default_params(void);

/* path: a diffusers root folder (holding vae/), the vae/ folder itself
 * (diffusion_pytorch_model.safetensors, or its .index.json), or one
 * .safetensors file with diffusers or BFL names. Every tensor's name, shape
 * and dtype is checked before anything runs. *out is set to NULL first.
 * Errors: RLX_ERR_IO (nothing to read there), RLX_ERR_FORMAT (not a FLUX.2
 * VAE: a tensor missing or of another shape), RLX_ERR_UNSUPPORTED (a dtype
 * other than F32/F16/BF16), RLX_ERR_INVALID_ARG, and the session's errors. */
RLX_API rlx_status rlx_flux2_vae_open(const char *path, const rlx_flux2_vae_params *p,
                                      rlx_flux2_vae **out, rlx_error **err);
RLX_API void rlx_flux2_vae_free(rlx_flux2_vae *v);

RLX_API const rlx_flux2_vae_config *rlx_flux2_vae_get_config(const rlx_flux2_vae *v);
RLX_API struct rlx_session *rlx_flux2_vae_session(rlx_flux2_vae *v);

/* packed: [128][lh][lw]; rgb: 3 x 16lh x 16lw floats in [0, 1] (CHW). */
RLX_API rlx_status rlx_flux2_vae_decode(rlx_flux2_vae *v, const float *packed, int lh, int lw,
                                        float *rgb, rlx_error **err);
/* rgb: 3 x h x w in [0, 1] (CHW), h and w multiples of 16; packed:
 * [128][h/16][w/16], the distribution's mean, packed and normalized. */
RLX_API rlx_status rlx_flux2_vae_encode(rlx_flux2_vae *v, const float *rgb, int h, int w,
                                        float *packed, rlx_error **err);
/* Compile and load the decoder's (or the encoder's) program for an h x w
 * image now, without running it: afterwards rlx_session_memory() of
 * rlx_flux2_vae_session() counts its activations, and the first decode of
 * that size starts at once. Errors: those of decode / encode. */
RLX_API rlx_status rlx_flux2_vae_prepare(rlx_flux2_vae *v, bool encoder, int h, int w,
                                         rlx_error **err);
/* Host only: de-normalize with the file's bn statistics and unpatchify,
 * packed [128][lh][lw] -> latent32 [32][2lh][2lw], the raw VAE latent (what
 * rlx_taef2_decode takes). RLX_ERR_INVALID_ARG on a NULL pointer or a size
 * below 1. */
RLX_API rlx_status rlx_flux2_vae_unpack(const rlx_flux2_vae *v, const float *packed, int lh, int lw,
                                        float *latent32);
/* The inverse: latent32 [32][2lh][2lw] -> packed [128][lh][lw], normalized. */
RLX_API rlx_status rlx_flux2_vae_pack(const rlx_flux2_vae *v, const float *latent32, int lh, int lw,
                                      float *packed);

/* RLX_OK when an h x w image is acceptable, else RLX_ERR_INVALID_ARG with a
 * sentence saying why (and what size would do). */
RLX_API rlx_status rlx_flux2_vae_check_size(int h, int w, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
