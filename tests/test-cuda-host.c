/* The CUDA backend's host side, which runs on every machine that builds it:
 * the driver loader's refusal of a missing library, the embedded fat
 * binaries' contents (SASS for every architecture the build lists, PTX for
 * the last), and what `cuda:N` says where no device can be used. The kernels
 * themselves run in test-conformance and test-cuda-device, on a machine with
 * an NVIDIA GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "backends/cuda/cuda-backend.h"
#include "backends/cuda/cuda-internal.h"
#include "test-util.h"

static void test_missing_driver(void **state)
{
    (void)state;
    cu_api api;
    char why[256];
    assert_false(cu_driver_try("/nonexistent/libcuda.so.1", &api, why, sizeof why));
    assert_non_null(strstr(why, "no NVIDIA driver found"));
    assert_null(api.cuInit);
    /* a library that is not the driver: loads, but lacks its entry points */
    assert_false(cu_driver_try("libm.so.6", &api, why, sizeof why));
    assert_non_null(strstr(why, "too old"));
    assert_null(api.cuLaunchKernel);
}

/* The architectures the build asked for (meson's nvidia_sm option). */
static int wanted(int *sm, int cap)
{
    int n = 0;
    const char *p = RLX_TEST_CUDA_SM;
    while (*p && n < cap) {
        sm[n++] = atoi(p);
        while (*p && *p != ',')
            p++;
        if (*p == ',')
            p++;
    }
    return n;
}

static void test_fatbins(void **state)
{
    (void)state;
    int want[16];
    int nw = wanted(want, 16);
    assert_true(nw >= 1);
    assert_true(rlx_cuda_n_fatbins >= 8);
    for (int f = 0; f < rlx_cuda_n_fatbins; f++) {
        const cu_fatbin *fb = &rlx_cuda_fatbins[f];
        int kind[64], sm[64];
        int n = cu_fatbin_entries(fb->data, fb->size, kind, sm, 64);
        assert_true(n > 0);
        assert_true(n <= 64);
        for (int w = 0; w < nw; w++) {
            bool sass = false;
            for (int i = 0; i < n; i++)
                sass = sass || (kind[i] == 2 && sm[i] == want[w]);
            if (!sass)
                fail_msg("%s.fatbin has no SASS for sm_%d", fb->name, want[w]);
        }
        bool ptx = false;
        for (int i = 0; i < n; i++)
            ptx = ptx || (kind[i] == 1 && sm[i] == want[nw - 1]);
        if (!ptx)
            fail_msg("%s.fatbin has no PTX for compute_%d", fb->name, want[nw - 1]);
        print_message("  %s: %d entries, %llu bytes\n", fb->name, n, (unsigned long long)fb->size);
    }
    /* not a fat binary */
    unsigned char junk[64] = {1, 2, 3};
    int k[4], s[4];
    assert_int_equal(cu_fatbin_entries(junk, sizeof junk, k, s, 4), -1);
    assert_int_equal(cu_fatbin_entries(NULL, 0, k, s, 4), -1);
    /* a header whose size runs past the bytes */
    unsigned char hdr[16] = {0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0,
                             0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0,  0};
    assert_int_equal(cu_fatbin_entries(hdr, sizeof hdr, k, s, 4), -1);
}

static void test_registry(void **state)
{
    (void)state;
    const rlx_backend_i *be = rlx_backend_find("cuda");
    assert_non_null(be);
    assert_ptr_equal(be, &rlx_cuda_backend);
    const char *why = rlx_cuda_unavailable_reason();
    rlx_error *err = NULL;
    const rlx_backend_i *got = NULL;
    int idx = -1;
    rlx_status st = rlx_device_parse("cuda:0", &got, &idx, &err);
    if (why) {
        /* no usable driver or device here: a sentence, not a crash */
        print_message("  no CUDA device: %s\n", why);
        assert_int_equal(be->device_count(), 0);
        assert_int_equal(st, RLX_ERR_NOT_FOUND);
        assert_non_null(strstr(rlx_error_message(err), "no CUDA device"));
        rlx_error_free(err);
        err = NULL;
        rlx_device *dev = NULL;
        assert_int_not_equal(be->device_open(0, NULL, &dev, &err), RLX_OK);
        assert_null(dev);
        assert_non_null(strstr(rlx_error_message(err), "no CUDA device"));
        rlx_error_free(err);
    } else {
        assert_int_equal(st, RLX_OK);
        assert_ptr_equal(got, be);
        assert_int_equal(idx, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_driver),
        cmocka_unit_test(test_fatbins),
        cmocka_unit_test(test_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
