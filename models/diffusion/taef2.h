/* TAEF2: the tiny autoencoder for FLUX.2 latents (madebyollin/taesd), run
 * through the compile+execute stack.
 *
 * Usage:
 *     rlx_taef2_params p = rlx_taef2_default_params();
 *     p.device = "cpu";
 *     rlx_taef2 *t = NULL;
 *     if (rlx_taef2_create(&p, "taef2_encoder.safetensors", "taef2_decoder.safetensors", &t,
 *                          &err) != RLX_OK) ...
 *     // rgb: 3 x h x w floats in [0, 1] (CHW); h and w multiples of 8
 *     float *lat = malloc(sizeof(float) * RLX_TAEF2_LATENT_CHANNELS * (h / 8) * (w / 8));
 *     rlx_taef2_encode(t, rgb, h, w, lat, &err);
 *     rlx_taef2_decode(t, lat, h / 8, w / 8, rgb_out, &err);   // 3 x h x w in [0, 1]
 *     rlx_taef2_free(t);
 *
 * The network (encoder: 3 -> 32 channels, 8x smaller; decoder: the way back)
 * is built with the graph IR only (engine/ir/graph.h): every conv, ReLU,
 * GroupNorm, tanh, nearest 2x upsample and clamp runs on the session's
 * device. The weights stay PARAMs in their file dtype (F16 in the published
 * files); the graph casts them to F32 on the device, which is exact. Nothing
 * of the network is computed on the host.
 *
 * Sizes: one program per image size, compiled on first use and cached by the
 * session (resize needs constant output sizes, so the dims are not symbolic).
 * Images must be at least 8x8, multiples of 8 on both sides, and at most
 * RLX_TAEF2_MAX_SIDE per side and RLX_TAEF2_MAX_PIXELS in all.
 *
 * Weight names are those of the original checkpoints ("0.weight",
 * "3.conv.0.weight", "11.pool.1.bias", ...). The encoder and decoder reuse
 * the same names, so the session sees them as "taef2.encoder.<name>" and
 * "taef2.decoder.<name>".
 *
 * Ownership: the runner owns its session (rlx_taef2_session borrows it) and
 * the mapped weight files; rlx_taef2_free releases all of it.
 * Thread safety: a runner is used by one thread at a time.
 */
#ifndef RLX_MODELS_DIFFUSION_TAEF2_H
#define RLX_MODELS_DIFFUSION_TAEF2_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_graph;
struct rlx_safetensors;
struct rlx_session;

#define RLX_TAEF2_LATENT_CHANNELS 32
#define RLX_TAEF2_IMAGE_CHANNELS  3
#define RLX_TAEF2_SCALE           8 /* image side / latent side */
#define RLX_TAEF2_MAX_SIDE        8192
#define RLX_TAEF2_MAX_PIXELS      (2048 * 2048)

typedef enum rlx_taef2_part {
    RLX_TAEF2_ENCODER,
    RLX_TAEF2_DECODER,
} rlx_taef2_part;

typedef struct rlx_taef2 rlx_taef2;

typedef struct rlx_taef2_params {
    const char *device;     /* "cpu", "vulkan:0", ...; NULL = "cpu" */
    int n_threads;          /* CPU threads; 0 = one per core */
    uint64_t memory_budget; /* bytes; 0 = the device's total memory */
} rlx_taef2_params;

RLX_API rlx_taef2_params rlx_taef2_default_params(void);

/* Open the encoder and/or decoder file (either path may be NULL, not both)
 * and check every tensor name, shape and dtype against the architecture.
 * *out is set to NULL first. Errors: RLX_ERR_IO (a file cannot be read),
 * RLX_ERR_FORMAT (a tensor is missing, has another shape, or the encoder file
 * was given as the decoder or the other way round), RLX_ERR_INVALID_ARG,
 * and the session's errors for the device. */
RLX_API rlx_status rlx_taef2_create(const rlx_taef2_params *p, const char *encoder_path,
                                    const char *decoder_path, rlx_taef2 **out, rlx_error **err);
RLX_API void rlx_taef2_free(rlx_taef2 *t);

RLX_API bool rlx_taef2_has_encoder(const rlx_taef2 *t);
RLX_API bool rlx_taef2_has_decoder(const rlx_taef2 *t);
RLX_API struct rlx_session *rlx_taef2_session(rlx_taef2 *t);

/* rgb_chw: 3 x h x w floats in [0, 1]; latent_out: 32 x (h/8) x (w/8). */
RLX_API rlx_status rlx_taef2_encode(rlx_taef2 *t, const float *rgb_chw, int h, int w,
                                    float *latent_out, rlx_error **err);
/* latent: 32 x lh x lw; rgb_out: 3 x (8*lh) x (8*lw), clamped to [0, 1]. */
RLX_API rlx_status rlx_taef2_decode(rlx_taef2 *t, const float *latent, int lh, int lw,
                                    float *rgb_out, rlx_error **err);

/* ---- building blocks (used by the runner; public for tests and tools) ---- */

/* Check that `st` holds every tensor of `part` with the expected shape, in
 * one float dtype (returned in *dtype, may be NULL). `what` names the file in
 * messages. */
RLX_API rlx_status rlx_taef2_check_weights(const struct rlx_safetensors *st, rlx_taef2_part part,
                                           const char *what, rlx_dtype *dtype, rlx_error **err);

/* The graph of `part` for an image of h x w pixels (the decoder's input is
 * h/8 x w/8). Input "image" [1, 3, h, w] or "latent" [1, 32, h/8, w/8], F32;
 * output the other one. Params are named prefix + the file's tensor name,
 * in `wdtype`. Returns NULL with *err set on a bad size. Free with
 * rlx_graph_free. */
RLX_API struct rlx_graph *rlx_taef2_build_graph(rlx_taef2_part part, int h, int w,
                                                const char *prefix, rlx_dtype wdtype,
                                                rlx_error **err);

/* RLX_OK when an h x w image is acceptable, else RLX_ERR_INVALID_ARG with a
 * sentence saying why. */
RLX_API rlx_status rlx_taef2_check_size(int h, int w, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
