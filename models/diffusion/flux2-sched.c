/* FLUX.2 [klein] schedule, noise and image-to-image start (flux2-sched.h). */
#include "models/diffusion/flux2-sched.h"

#include <math.h>

double rlx_flux2_empirical_mu(int image_seq_len, int steps)
{
    /* the fitted lines of the published compute_empirical_mu: mu at 10 and
     * at 200 steps as functions of the token count */
    const double a1 = 8.73809524e-05, b1 = 1.89833333;
    const double a2 = 0.00016927, b2 = 0.45666666;
    double L = image_seq_len;
    if (image_seq_len > 4300)
        return a2 * L + b2;
    double m200 = a2 * L + b2, m10 = a1 * L + b1;
    double a = (m200 - m10) / 190.0;
    double b = m200 - 200.0 * a;
    return a * steps + b;
}

int rlx_flux2_sigmas(int steps, int image_seq_len, float *sigmas)
{
    if (!sigmas || steps < 1 || steps > RLX_FLUX2_MAX_STEPS || image_seq_len < 1)
        return 0;
    double em = exp(rlx_flux2_empirical_mu(image_seq_len, steps));
    for (int i = 0; i < steps; i++) {
        /* np.linspace(1, 1/steps, steps): 1 - i * (1 - 1/steps) / (steps - 1) = 1 - i / steps */
        double t = 1.0 - (double)i / steps;
        sigmas[i] = (float)(em / (em + (1.0 / t - 1.0)));
    }
    sigmas[steps] = 0.0f;
    return steps + 1;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

void rlx_flux2_noise(uint64_t seed, float *out, size_t n)
{
    if (!out)
        return;
    uint64_t sm = seed, s[4];
    for (int i = 0; i < 4; i++)
        s[i] = splitmix64(&sm);
    const double two_pi = 6.283185307179586476925286766559;
    for (size_t i = 0; i < n; i += 2) {
        uint64_t a = xoshiro(s), b = xoshiro(s);
        double u1 = (double)((a >> 11) + 1) * 0x1.0p-53;
        double u2 = (double)(b >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1));
        out[i] = (float)(r * cos(two_pi * u2));
        if (i + 1 < n)
            out[i + 1] = (float)(r * sin(two_pi * u2));
    }
}

int rlx_flux2_img2img_start(int steps, double strength)
{
    if (steps < 1 || !(strength > 0.0 && strength <= 1.0))
        return -1;
    /* Python's int() truncates toward zero; the product is positive */
    int init = (int)(steps * strength);
    if (init > steps)
        init = steps;
    int start = steps - init;
    return start < 0 ? 0 : start;
}

void rlx_flux2_img2img_noise(const float *init, const float *noise, float sigma, float *out,
                             size_t n)
{
    if (!init || !noise || !out)
        return;
    for (size_t i = 0; i < n; i++)
        out[i] = sigma * noise[i] + (1.0f - sigma) * init[i];
}
