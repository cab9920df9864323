/* The FLUX.2 transformer at a tiny width (hidden 256 = 2 heads x 128, one
 * double- and one single-stream block, joint_dim 192: tests/flux2-writer.h)
 * on every device but the CPU, against the CPU's velocity of the same file:
 * BF16 and FP8 (E4M3 with per-tensor scales) files with BFL names, 2 x 2
 * image tokens, 4 text tokens. Small enough for the CUDA backend on the
 * emulator of its driver (built as test-flux2-dit-tiny-cuda-emu, where it
 * takes a few seconds), which no real GPU may be there to check; the full
 * widths against the PyTorch reference are test-flux2-dit's.
 *
 * Tolerance: largest |difference| over the largest |CPU value|, 2e-3 as in
 * test-flux2-dit's devices case (a device may keep activations in F16 in
 * places); we see 5e-7 to 7e-7 on lavapipe and the emulated CUDA.
 * Exit 77 (skipped) when there is no device but the CPU.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "flux2-writer.h"
#include "models/diffusion/flux2-dit.h"
#include "test-util.h"

#ifdef RLX_TEST_CUDA_EMU
#include "backends/cuda/cuda-internal.h"
#endif

#define TOL_DEVICES 2e-3
#define N_OUT       (128 * 2 * 2)

static void velocity(const char *path, const char *dev, float *v)
{
    rlx_flux2_dit_params p = rlx_flux2_dit_default_params();
    p.device = dev;
    rlx_flux2_dit *d = NULL;
    rlx_error *err = NULL;
    if (rlx_flux2_dit_open(path, &p, &d, &err) != RLX_OK)
        fail_msg("%s on %s: %s", path, dev, rlx_error_message(err));
    int J = rlx_flux2_dit_get_config(d)->joint_dim;
    float *lat = malloc(sizeof(float) * N_OUT), *txt = malloc(sizeof(float) * 4 * (size_t)J);
    assert_non_null(lat);
    assert_non_null(txt);
    rlx_flux2_writer_fill("latents", N_OUT, lat);
    rlx_flux2_writer_fill("text", 4 * (int64_t)J, txt);
    rlx_flux2_dit_input in = {
        .latents = lat, .lh = 2, .lw = 2, .text = txt, .n_text = 4, .t = 0.7f};
    if (rlx_flux2_dit_velocity(d, &in, v, &err) != RLX_OK)
        fail_msg("velocity on %s: %s", dev, rlx_error_message(err));
    free(lat);
    free(txt);
    rlx_flux2_dit_free(d);
}

static void devices_match_cpu(void **state)
{
    (void)state;
    static const rlx_dtype dts[2] = {RLX_DTYPE_BF16, RLX_DTYPE_F8_E4M3};
    float want[N_OUT], got[N_OUT];
    for (int q = 0; q < 2; q++) {
        char path[600];
        snprintf(path, sizeof path, "%s", rlx_test_tmp("flux2-tiny.safetensors"));
        rlx_flux2_writer_opts o = {.format = RLX_F2W_BFL,
                                   .dtype = dts[q],
                                   .hidden = 256,
                                   .n_double = 1,
                                   .n_single = 1,
                                   .joint_dim = 192};
        rlx_error *err = NULL;
        if (rlx_flux2_writer_write(path, &o, &err) != RLX_OK)
            fail_msg("writing %s: %s", path, rlx_error_message(err));
        velocity(path, "cpu", want);
        double mw = 0;
        for (int i = 0; i < N_OUT; i++)
            mw = fmax(mw, fabs(want[i]));
        assert_true(mw > 0.1);
        for (int b = 0; b < rlx_backend_count(); b++) {
            const rlx_backend_i *be = rlx_backend_at(b);
            if (!be || !strcmp(be->name, "cpu") || !be->device_count || be->device_count() < 1)
                continue;
            char dev[32];
            snprintf(dev, sizeof dev, "%s:0", be->name);
            velocity(path, dev, got);
            double md = 0;
            for (int i = 0; i < N_OUT; i++)
                md = fmax(md, fabs(got[i] - want[i]));
            printf("[ flux2-dit-tiny ] %s on %s: max error %.2e of the largest value\n",
                   rlx_dtype_name(dts[q]), dev, md / mw);
            assert_true(md / mw < TOL_DEVICES);
        }
        remove(path);
    }
}

int main(void)
{
#ifdef RLX_TEST_CUDA_EMU
    cu_driver_use(RLX_TEST_CUDA_EMU);
    cu_blas_use(RLX_TEST_CUDA_EMU);
#endif
    if (!rlx_test_other_devices()) {
        printf("[ flux2-dit-tiny ] no device but the CPU here: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(devices_match_cpu)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
