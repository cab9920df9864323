/* FLUX.2 [klein] sampling schedule, seeded noise and image-to-image start:
 * plain host code, the same numbers on every backend.
 *
 * Usage:
 *     int lh = H / 16, lw = W / 16;
 *     float sig[RLX_FLUX2_MAX_STEPS + 1];
 *     if (rlx_flux2_sigmas(steps, lh * lw, sig) != steps + 1) ...   // bad steps / size
 *     float *x = malloc(sizeof(float) * 128 * lh * lw);
 *     rlx_flux2_noise(seed, x, 128 * (size_t)lh * lw);             // packed [128][lh][lw]
 *     for (int i = 0; i < steps; i++) {
 *         // v = velocity(x, t = sig[i]); the transformer gets t = sig[i]
 *         for (size_t j = 0; j < n; j++) x[j] += (sig[i + 1] - sig[i]) * v[j];
 *     }
 *   image-to-image (init = the packed latents of the VAE-encoded image):
 *     int start = rlx_flux2_img2img_start(steps, strength);        // -1: bad strength
 *     rlx_flux2_noise(seed, noise, n);
 *     rlx_flux2_img2img_noise(init, noise, sig[start], x, n);
 *     then the loop above from i = start.
 *
 * Schedule (diffusers' Flux2KleinPipeline with FlowMatchEulerDiscreteScheduler,
 * use_dynamic_shifting with the exponential time shift; the same numbers as
 * black-forest-labs/flux2 sampling.get_schedule): mu =
 * compute_empirical_mu(image_seq_len, steps) (rlx_flux2_empirical_mu), then
 * for i = 0 .. steps - 1, with t_i = 1 - i / steps (np.linspace(1, 1/steps,
 * steps)):
 *     sigma_i = e^mu / (e^mu + (1 / t_i - 1))
 * and sigma_steps = 0. The Euler step is x += (sigma_{i+1} - sigma_i) * v;
 * the transformer is called with timestep sigma_i (the pipeline's t / 1000).
 * Computed in double and rounded once to float; the references compute in
 * float32, so values agree within a few float ulps (about 1e-7).
 *
 * Noise: xoshiro256** (Blackman and Vigna) seeded with four outputs of
 * splitmix64(seed); each pair of standard normals from two 64-bit draws a, b:
 *     u1 = ((a >> 11) + 1) * 2^-53        (in (0, 1], so the log is finite)
 *     u2 = (b >> 11) * 2^-53              (in [0, 1))
 *     z0 = sqrt(-2 ln u1) cos(2 pi u2),  z1 = sqrt(-2 ln u1) sin(2 pi u2)
 * in double, rounded to float; out[2k] = z0, out[2k+1] = z1 of the k-th pair
 * (an odd n drops the last z1). rlx_flux2_noise(seed, out, n) is a prefix of
 * the same call with a larger n. The only platform dependence is the libm
 * log/cos/sin of double (correctly rounded to within an ulp of double
 * everywhere), far below float's precision. It cannot reproduce torch's
 * generator, so reference scripts take the noise as an input.
 *
 * Image-to-image (diffusers' Flux2KleinImg2ImgPipeline.get_timesteps and
 * prepare_latents): init_steps = min(int(steps * strength), steps), start =
 * max(steps - init_steps, 0); the initial latent is the flow-matching
 * forward process at sigma_start (FlowMatchEulerDiscreteScheduler.scale_noise):
 *     x = sigma_start * noise + (1 - sigma_start) * init
 * and the steps start..steps-1 are run. (The diffusers pipeline of early
 * 2026 resets the scheduler's begin index to 0 before its loop, so its Euler
 * steps then use sigma_0, sigma_1, ... instead of sigma_start, ...; we
 * follow the schedule the noise level implies, as the FLUX.1 img2img
 * pipeline does.)
 *
 * Thread safety: pure functions.
 */
#ifndef RLX_MODELS_DIFFUSION_FLUX2_SCHED_H
#define RLX_MODELS_DIFFUSION_FLUX2_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_FLUX2_MAX_STEPS 1000
/* The pipeline's patch size times the VAE's: image side / packed latent side */
#define RLX_FLUX2_PACKED_SCALE 16

/* compute_empirical_mu of the FLUX.2 pipelines (piecewise linear in the
 * image token count, interpolated in the step count below 4300 tokens). */
RLX_API double rlx_flux2_empirical_mu(int image_seq_len, int steps);

/* Writes steps + 1 sigmas (the last 0) and returns steps + 1; returns 0 and
 * writes nothing when steps is not in 1..RLX_FLUX2_MAX_STEPS, image_seq_len
 * < 1 or sigmas is NULL. image_seq_len is (H / 16) * (W / 16). */
RLX_API int rlx_flux2_sigmas(int steps, int image_seq_len, float *sigmas);

/* n standard normal floats from the seed (formula above). */
RLX_API void rlx_flux2_noise(uint64_t seed, float *out, size_t n);

/* The first step to run for a strength in (0, 1] (1: all steps, the noise
 * alone); -1 for a strength outside (0, 1] or steps < 1. A strength small
 * enough that no step runs returns steps (the image comes back unchanged). */
RLX_API int rlx_flux2_img2img_start(int steps, double strength);

/* out = sigma * noise + (1 - sigma) * init, element-wise (out may be init). */
RLX_API void rlx_flux2_img2img_noise(const float *init, const float *noise, float sigma, float *out,
                                     size_t n);

#ifdef __cplusplus
}
#endif
#endif
