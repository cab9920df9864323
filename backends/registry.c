/* The registry of compiled-in backends and device-spec parsing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/cpu-backend.h"
#include "rlx-config.h"
#if RLX_HAVE_VULKAN
#include "backends/vulkan/vk-backend.h"
#endif
#if RLX_HAVE_CUDA
#include "backends/cuda/cuda-backend.h"
#endif

/* Compiled-in backends, CPU first (the default). A GPU backend adds its
 * interface here under its build flag, e.g.
 *     #if RLX_HAVE_VULKAN
 *         &rlx_vulkan_backend,
 *     #endif
 * and rlx_device_parse then finds it by name. */
static const rlx_backend_i *const backends[] = {
    &rlx_cpu_backend,
#if RLX_HAVE_VULKAN
    &rlx_vulkan_backend,
#endif
#if RLX_HAVE_CUDA
    &rlx_cuda_backend,
#endif
};

int rlx_backend_count(void)
{
    return (int)(sizeof backends / sizeof backends[0]);
}

const rlx_backend_i *rlx_backend_at(int i)
{
    if (i < 0 || i >= rlx_backend_count())
        return NULL;
    return backends[i];
}

const rlx_backend_i *rlx_backend_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < rlx_backend_count(); i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}

/* Backends the project knows about, compiled in or not, so an absent one
 * gets "not in this build" rather than "unknown". */
static const struct {
    const char *name;
    const char *pretty;
} known[] = {
    {"cpu", "CPU"},
    {"vulkan", "Vulkan"},
    {"cuda", "CUDA"},
};

rlx_status rlx_device_parse(const char *spec, const rlx_backend_i **out_backend, int *out_index,
                            rlx_error **err)
{
    if (out_backend)
        *out_backend = NULL;
    if (out_index)
        *out_index = 0;
    if (!spec || !*spec)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "no device given: use cpu, vulkan:N or cuda:N");

    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    char name[32];
    if (name_len == 0 || name_len >= sizeof name)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "unknown device '%s': use cpu, vulkan:N or cuda:N", spec);
    memcpy(name, spec, name_len);
    name[name_len] = '\0';

    const char *pretty = NULL;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].name, name) == 0)
            pretty = known[i].pretty;
    if (!pretty)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "unknown device '%s': use cpu, vulkan:N or cuda:N", spec);

    long index = 0;
    if (colon) {
        const char *num = colon + 1;
        char *end = NULL;
        errno = 0;
        if (*num < '0' || *num > '9')
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "bad device index in '%s': expected a number after ':', as in "
                                 "%s:0",
                                 spec, name);
        index = strtol(num, &end, 10);
        if (errno || *end || index > 1024)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "bad device index in '%s': expected a number after ':', as in "
                                 "%s:0",
                                 spec, name);
    }

    const rlx_backend_i *be = rlx_backend_find(name);
    if (!be)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "no %s support in this build", pretty);

    int n = be->device_count ? be->device_count() : 0;
    if (n <= 0)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no %s device found", pretty);
    if (index >= n)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                             "no device '%s': this machine has %d %s device%s, %s:0 to %s:%d", spec,
                             n, pretty, n == 1 ? "" : "s", name, name, n - 1);
    if (out_backend)
        *out_backend = be;
    if (out_index)
        *out_index = (int)index;
    return RLX_OK;
}

rlx_status rlx_backend_copy_timings(bool timing_on, const double *src, int32_t n_src, double *ms,
                                    int32_t n, rlx_error **err)
{
    if (!ms && n)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_timings: missing argument");
    if (!timing_on)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "timing is off for this program: enable it before running");
    for (int32_t i = 0; i < n; i++)
        ms[i] = i < n_src ? src[i] : 0.0;
    return RLX_OK;
}
