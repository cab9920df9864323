/* The CUDA driver, opened at run time: libcuda.so.1 is part of NVIDIA's
 * driver, not of the toolkit, so linking it would stop librlx from starting
 * on a machine without one. The first caller loads it; every later caller
 * gets the same table or the same reason it is missing. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda-internal.h"

#define RLX_STR(x)     #x
#define RLX_CU_NAME(f) RLX_STR(f)

/* CUDA 12.0's driver: the oldest whose entry points and graph calls we use */
#define MIN_DRIVER_VERSION 12000

bool cu_driver_try(const char *path, cu_api *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, cap, "no NVIDIA driver found (%s could not be loaded)", path);
        return false;
    }
    const char *missing = NULL;
#define RLX_CU_LOAD(f)                                  \
    out->f = (__typeof__(f) *)dlsym(h, RLX_CU_NAME(f)); \
    if (!out->f && !missing)                            \
        missing = RLX_CU_NAME(f);
    RLX_CU_FUNCS(RLX_CU_LOAD)
#undef RLX_CU_LOAD
    if (missing) {
        snprintf(why, cap, "the NVIDIA driver is too old: %s lacks %s (CUDA 12 or newer is needed)",
                 path, missing);
        dlclose(h);
        memset(out, 0, sizeof *out);
        return false;
    }
    CUresult r = out->cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *s = NULL;
        out->cuGetErrorString(r, &s);
        if (r == CUDA_ERROR_NO_DEVICE)
            snprintf(why, cap, "the NVIDIA driver is installed but sees no CUDA device");
        else
            snprintf(why, cap, "the NVIDIA driver did not start: %s", s ? s : "unknown error");
        dlclose(h);
        memset(out, 0, sizeof *out);
        return false;
    }
    int ver = 0;
    out->cuDriverGetVersion(&ver);
    if (ver < MIN_DRIVER_VERSION) {
        snprintf(why, cap,
                 "the NVIDIA driver supports CUDA %d.%d; CUDA 12.0 or newer is needed (update "
                 "the driver)",
                 ver / 1000, ver % 1000 / 10);
        dlclose(h);
        memset(out, 0, sizeof *out);
        return false;
    }
    /* the handle stays open for the life of the process */
    return true;
}

static cu_api api;
static bool api_ok;
static char api_why[256];
static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static const char *driver_path = "libcuda.so.1";

static void load_once(void)
{
    api_ok = cu_driver_try(driver_path, &api, api_why, sizeof api_why);
}

void cu_driver_use(const char *path)
{
    driver_path = path;
}

const cu_api *cu_driver(const char **why)
{
    pthread_once(&api_once, load_once);
    if (why)
        *why = api_ok ? NULL : api_why;
    return api_ok ? &api : NULL;
}

rlx_status cu_fail(CUresult r, const char *what, rlx_error **err)
{
    const char *s = NULL, *n = NULL;
    if (api_ok) {
        api.cuGetErrorString(r, &s);
        api.cuGetErrorName(r, &n);
    }
    rlx_status code = r == CUDA_ERROR_OUT_OF_MEMORY ? RLX_ERR_NO_MEMORY : RLX_ERR_DEVICE;
    return rlx_error_set(err, code, "%s: %s (%s)", what, s ? s : "CUDA error", n ? n : "?");
}

/* Fat binary layout (as nvcc writes it): a 16-byte header (magic
 * 0xBA55ED50, version, header size, payload size), then entries, each with
 * a header giving its kind (1 PTX, 2 ELF), its own header and payload
 * sizes, and the sm version at byte 28. */
int cu_fatbin_entries(const unsigned char *data, uint64_t size, int *kind, int *sm, int cap)
{
    if (!data || size < 16)
        return -1;
    uint32_t magic;
    uint16_t hsize;
    uint64_t fsize;
    memcpy(&magic, data, 4);
    memcpy(&hsize, data + 6, 2);
    memcpy(&fsize, data + 8, 8);
    if (magic != 0xBA55ED50u || hsize < 16 || fsize > size - hsize)
        return -1;
    uint64_t at = hsize, end = hsize + fsize;
    int n = 0;
    while (at + 32 <= end) {
        uint16_t k;
        uint32_t eh, esm;
        uint64_t payload;
        memcpy(&k, data + at, 2);
        memcpy(&eh, data + at + 4, 4);
        memcpy(&payload, data + at + 8, 8);
        memcpy(&esm, data + at + 28, 4);
        if (eh < 32 || payload > end - at - eh)
            return -1;
        if (n < cap) {
            kind[n] = k;
            sm[n] = (int)esm;
        }
        n++;
        at += eh + payload;
    }
    return n;
}
