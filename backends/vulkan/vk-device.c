/* The Vulkan backend: instance and device enumeration, devices with a
 * compute queue, buffers and transfers, pipelines, and the interface table.
 * Programs live in vk-program.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/vulkan/vk-backend.h"
#include "backends/vulkan/vk-internal.h"

/* ---- embedded SPIR-V (glslc -mfmt=c at build time) ------------------------ */

static const uint32_t spv_ew[] =
#include "backends/vulkan/ew.spv.h"
    ;
static const uint32_t spv_matmul[] =
#include "backends/vulkan/matmul.spv.h"
    ;
static const uint32_t spv_rowop[] =
#include "backends/vulkan/rowop.spv.h"
    ;
static const uint32_t spv_rope[] =
#include "backends/vulkan/rope.spv.h"
    ;
static const uint32_t spv_attention[] =
#include "backends/vulkan/attention.spv.h"
    ;
static const uint32_t spv_attention_tile[] =
#include "backends/vulkan/attention-tile.spv.h"
    ;
static const uint32_t spv_attention_tile128[] =
#include "backends/vulkan/attention-tile128.spv.h"
    ;
static const uint32_t spv_conv[] =
#include "backends/vulkan/conv.spv.h"
    ;
static const uint32_t spv_conv_gemm[] =
#include "backends/vulkan/conv-gemm.spv.h"
    ;
static const uint32_t spv_matvec[] =
#include "backends/vulkan/matvec.spv.h"
    ;
static const uint32_t spv_gemm[] =
#include "backends/vulkan/gemm.spv.h"
    ;
static const uint32_t spv_spatial[] =
#include "backends/vulkan/spatial.spv.h"
    ;
static const uint32_t spv_gather[] =
#include "backends/vulkan/gather.spv.h"
    ;
static const uint32_t spv_ew_f16[] =
#include "backends/vulkan/ew-f16.spv.h"
    ;
static const uint32_t spv_matmul_f16[] =
#include "backends/vulkan/matmul-f16.spv.h"
    ;
static const uint32_t spv_rowop_f16[] =
#include "backends/vulkan/rowop-f16.spv.h"
    ;
static const uint32_t spv_rope_f16[] =
#include "backends/vulkan/rope-f16.spv.h"
    ;
static const uint32_t spv_attention_f16[] =
#include "backends/vulkan/attention-f16.spv.h"
    ;
static const uint32_t spv_attention_tile_f16[] =
#include "backends/vulkan/attention-tile-f16.spv.h"
    ;
static const uint32_t spv_attention_tile128_f16[] =
#include "backends/vulkan/attention-tile128-f16.spv.h"
    ;
static const uint32_t spv_conv_f16[] =
#include "backends/vulkan/conv-f16.spv.h"
    ;
static const uint32_t spv_conv_gemm_f16[] =
#include "backends/vulkan/conv-gemm-f16.spv.h"
    ;
static const uint32_t spv_matvec_f16[] =
#include "backends/vulkan/matvec-f16.spv.h"
    ;
static const uint32_t spv_gemm_f16[] =
#include "backends/vulkan/gemm-f16.spv.h"
    ;
static const uint32_t spv_spatial_f16[] =
#include "backends/vulkan/spatial-f16.spv.h"
    ;
static const uint32_t spv_gather_f16[] =
#include "backends/vulkan/gather-f16.spv.h"
    ;

/* [variant][kernel]: 0 the f32 kernels, 1 the f16 ones */
static const struct {
    const uint32_t *code;
    size_t bytes;
    const char *name;
} shaders[2][VK_K_COUNT] = {
    {
        [VK_K_EW] = {spv_ew, sizeof spv_ew, "ew"},
        [VK_K_MATMUL] = {spv_matmul, sizeof spv_matmul, "matmul"},
        [VK_K_ROWOP] = {spv_rowop, sizeof spv_rowop, "rowop"},
        [VK_K_ROPE] = {spv_rope, sizeof spv_rope, "rope"},
        [VK_K_ATTN] = {spv_attention, sizeof spv_attention, "attention"},
        [VK_K_CONV] = {spv_conv, sizeof spv_conv, "conv"},
        [VK_K_SPATIAL] = {spv_spatial, sizeof spv_spatial, "spatial"},
        [VK_K_GATHER] = {spv_gather, sizeof spv_gather, "gather"},
        [VK_K_ATTN_T64] = {spv_attention_tile, sizeof spv_attention_tile, "attention (tiled)"},
        [VK_K_ATTN_T128] = {spv_attention_tile128, sizeof spv_attention_tile128,
                            "attention (tiled, dims to 128)"},
        [VK_K_CONV_GEMM] = {spv_conv_gemm, sizeof spv_conv_gemm, "conv (blocked)"},
        [VK_K_MATVEC] = {spv_matvec, sizeof spv_matvec, "matvec"},
        [VK_K_GEMM] = {spv_gemm, sizeof spv_gemm, "gemm"},
    },
    {
        [VK_K_EW] = {spv_ew_f16, sizeof spv_ew_f16, "ew (f16)"},
        [VK_K_MATMUL] = {spv_matmul_f16, sizeof spv_matmul_f16, "matmul (f16)"},
        [VK_K_ROWOP] = {spv_rowop_f16, sizeof spv_rowop_f16, "rowop (f16)"},
        [VK_K_ROPE] = {spv_rope_f16, sizeof spv_rope_f16, "rope (f16)"},
        [VK_K_ATTN] = {spv_attention_f16, sizeof spv_attention_f16, "attention (f16)"},
        [VK_K_CONV] = {spv_conv_f16, sizeof spv_conv_f16, "conv (f16)"},
        [VK_K_SPATIAL] = {spv_spatial_f16, sizeof spv_spatial_f16, "spatial (f16)"},
        [VK_K_GATHER] = {spv_gather_f16, sizeof spv_gather_f16, "gather (f16)"},
        [VK_K_ATTN_T64] = {spv_attention_tile_f16, sizeof spv_attention_tile_f16,
                           "attention (tiled, f16)"},
        [VK_K_ATTN_T128] = {spv_attention_tile128_f16, sizeof spv_attention_tile128_f16,
                            "attention (tiled, dims to 128, f16)"},
        [VK_K_CONV_GEMM] = {spv_conv_gemm_f16, sizeof spv_conv_gemm_f16, "conv (blocked, f16)"},
        [VK_K_MATVEC] = {spv_matvec_f16, sizeof spv_matvec_f16, "matvec (f16)"},
        [VK_K_GEMM] = {spv_gemm_f16, sizeof spv_gemm_f16, "gemm (f16)"},
    },
};

/* Staging for uploads and reads on devices whose memory the host cannot
 * map: a weight file goes up through this window, never copied whole. */
#define STAGING_BYTES (16u << 20)
/* Longest a single wait may take before the device counts as hung and is
 * treated as lost. A hardware GPU's kernel driver resets a hung job and
 * reports VK_ERROR_DEVICE_LOST well before this (amdgpu's compute timeout,
 * the longest of the common drivers, is 60 s; i915 and NVIDIA reset after a
 * few seconds), so a wait past 60 s means the driver did not notice. A
 * software device (lavapipe) has no watchdog and runs a whole program on
 * the CPU, where one large run may legitimately take minutes: 300 s. */
#define FENCE_TIMEOUT_HW_S 60
#define FENCE_TIMEOUT_SW_S 300

/* ---- instance (one per process, made on first use) -------------------------- */

#define MAX_PDEVS 16

static pthread_once_t inst_once = PTHREAD_ONCE_INIT;
static VkInstance instance = VK_NULL_HANDLE;
static VkPhysicalDevice pdevs[MAX_PDEVS];
static uint32_t pdev_qfam[MAX_PDEVS];
static int n_pdevs = 0;

static void instance_init(void)
{
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "rlx",
        .pEngineName = "rlx",
        .apiVersion = VK_API_VERSION_1_1,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pApplicationInfo = &app,
    };
    if (vkCreateInstance(&ci, NULL, &instance) != VK_SUCCESS) {
        instance = VK_NULL_HANDLE;
        return;
    }
    uint32_t n = 0;
    if (vkEnumeratePhysicalDevices(instance, &n, NULL) != VK_SUCCESS || n == 0)
        return;
    VkPhysicalDevice all[MAX_PDEVS];
    if (n > MAX_PDEVS)
        n = MAX_PDEVS;
    VkResult r = vkEnumeratePhysicalDevices(instance, &n, all);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties pr;
        vkGetPhysicalDeviceProperties(all[i], &pr);
        if (pr.apiVersion < VK_API_VERSION_1_1)
            continue;
        uint32_t nq = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(all[i], &nq, NULL);
        VkQueueFamilyProperties qf[32];
        if (nq > 32)
            nq = 32;
        vkGetPhysicalDeviceQueueFamilyProperties(all[i], &nq, qf);
        /* prefer a compute family without graphics (async compute), else any */
        int pick = -1;
        for (uint32_t q = 0; q < nq; q++)
            if ((qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
                !(qf[q].queueFlags & VK_QUEUE_GRAPHICS_BIT) && pick < 0)
                pick = (int)q;
        for (uint32_t q = 0; q < nq && pick < 0; q++)
            if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT)
                pick = (int)q;
        if (pick < 0)
            continue;
        pdevs[n_pdevs] = all[i];
        pdev_qfam[n_pdevs] = (uint32_t)pick;
        n_pdevs++;
    }
}

/* The VkDevice, its queue, layouts and pipelines are made once per
 * physical device and kept for the life of the process: opening a device
 * again (every test case does) then costs no shader compiles. Each open
 * still has its own command pool, staging buffer and fences. */
static struct shared_dev {
    pthread_mutex_t lock;  /* creation, pipelines */
    pthread_mutex_t qlock; /* the queue */
    VkDevice dev;
    VkQueue queue;
    bool has_budget;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline pipes[2][VK_K_COUNT]; /* per kernel variant (f32, f16) */
    bool has_f16;                    /* the device was made with the f16 features */
    /* bumped when the VkDevice is lost (atomic): an open of the device
     * made before (its vk_device.gen is older) is lost too, though it did
     * not see the error itself, and the next open makes a fresh VkDevice */
    uint32_t gen;
    uint32_t dev_gen; /* gen when dev was made */
} shared_devs[MAX_PDEVS] = {
#define SD                                                                   \
    {                                                                        \
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, \
        {                                                                    \
            {                                                                \
                0                                                            \
            }                                                                \
        }                                                                    \
    }
    SD, SD, SD, SD, SD, SD, SD, SD, SD, SD, SD, SD, SD, SD, SD, SD,
#undef SD
};

VkResult vk_submit(vk_device *d, const VkSubmitInfo *si, VkFence fence)
{
    struct shared_dev *sd = &shared_devs[d->index];
    pthread_mutex_lock(&sd->qlock);
    VkResult r = vkQueueSubmit(d->queue, 1, si, fence);
    pthread_mutex_unlock(&sd->qlock);
    return r;
}

static int vk_device_count(void)
{
    pthread_once(&inst_once, instance_init);
    return n_pdevs;
}

static bool has_device_ext(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    if (!e)
        return false;
    bool found = false;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

/* What the f16 kernels need: 16-bit storage buffers (core in Vulkan 1.1)
 * and float16 arithmetic (VK_KHR_shader_float16_int8). */
static void f16_features(VkPhysicalDevice pd, bool *storage16, bool *float16)
{
    bool ext = has_device_ext(pd, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR};
    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .pNext = ext ? &f16 : NULL};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &s16};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    *storage16 = s16.storageBuffer16BitAccess == VK_TRUE;
    *float16 = ext && f16.shaderFloat16 == VK_TRUE;
}

static rlx_device_type map_type(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return RLX_DEVICE_GPU_DISCRETE;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return RLX_DEVICE_GPU_INTEGRATED;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return RLX_DEVICE_GPU_SOFTWARE; /* lavapipe, SwiftShader */
    default:
        return RLX_DEVICE_OTHER;
    }
}

/* Device-local heap totals and (with VK_EXT_memory_budget) what is free. */
static void fill_memory(VkPhysicalDevice pd, bool budget, uint64_t ours, uint64_t *total,
                        uint64_t *free_)
{
    VkPhysicalDeviceMemoryBudgetPropertiesEXT bp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT,
    };
    VkPhysicalDeviceMemoryProperties2 mp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
        .pNext = budget ? &bp : NULL,
    };
    vkGetPhysicalDeviceMemoryProperties2(pd, &mp);
    *total = *free_ = 0;
    for (uint32_t h = 0; h < mp.memoryProperties.memoryHeapCount; h++) {
        if (!(mp.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT))
            continue;
        uint64_t sz = mp.memoryProperties.memoryHeaps[h].size;
        *total += sz;
        if (budget) {
            uint64_t b = bp.heapBudget[h], u = bp.heapUsage[h];
            *free_ += b > u ? b - u : 0;
        } else {
            *free_ += sz > ours ? sz - ours : 0;
        }
    }
}

/* kernels: the variant an open device uses (0 f32, 1 f16), or -1 for the
 * one an open would pick (f16 where the device has its features). */
static void fill_info(int index, uint64_t ours, int kernels, rlx_device_info *out)
{
    memset(out, 0, sizeof *out);
    VkPhysicalDevice pd = pdevs[index];
    VkPhysicalDeviceProperties pr;
    vkGetPhysicalDeviceProperties(pd, &pr);
    snprintf(out->backend, sizeof out->backend, "vulkan");
    out->index = index;
    snprintf(out->id, sizeof out->id, "vulkan:%d", index);
    snprintf(out->name, sizeof out->name, "%s", pr.deviceName);
    out->type = map_type(pr.deviceType);
    fill_memory(pd, has_device_ext(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME), ours,
                &out->total_memory, &out->free_memory);
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    bool s16, f16;
    f16_features(pd, &s16, &f16);
    if (kernels < 0)
        kernels = s16 && f16;
    snprintf(out->features, sizeof out->features, "vulkan %u.%u%s%s%s%s, %s kernels",
             VK_API_VERSION_MAJOR(pr.apiVersion), VK_API_VERSION_MINOR(pr.apiVersion),
             s16 ? " storage16" : "", f16 ? " float16" : "",
             f2.features.shaderInt64 ? " int64" : "",
             has_device_ext(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME) ? " memory-budget" : "",
             kernels ? "f16" : "f32");
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &m3};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    out->max_binding_bytes = pr.limits.maxStorageBufferRange;
    out->max_buffer_bytes = m3.maxMemoryAllocationSize;
    if (!out->max_buffer_bytes || out->max_buffer_bytes > out->total_memory)
        out->max_buffer_bytes = out->total_memory;
}

static rlx_status vk_device_info(int index, rlx_device_info *out, rlx_error **err)
{
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "device_info: no output given");
    int n = vk_device_count();
    if (index < 0 || index >= n)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no Vulkan device %d: %d found", index, n);
    fill_info(index, 0, -1, out);
    return RLX_OK;
}

/* ---- errors and waits ---------------------------------------------------- */

void vk_mark_lost(vk_device *d)
{
    struct shared_dev *sd = &shared_devs[d->index];
    d->lost = true;
    /* a lost VkDevice stays lost: later opens get a new one (the old one is
     * abandoned, not destroyed, as other opens may hold it). No lock: this
     * may be reached from under sd->lock (a failed pipeline build). */
    uint32_t g = d->gen;
    __atomic_compare_exchange_n(&sd->gen, &g, g + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

bool vk_is_lost(vk_device *d)
{
    if (!d->lost && d->gen != __atomic_load_n(&shared_devs[d->index].gen, __ATOMIC_ACQUIRE))
        d->lost = true;
    return d->lost;
}

void vk_test_lose_device(rlx_device *dev)
{
    if (dev)
        ((vk_device *)dev)->inject_lost = true;
}

rlx_status vk_check_result(vk_device *d, VkResult r, const char *what, rlx_error **err)
{
    switch (r) {
    case VK_SUCCESS:
        return RLX_OK;
    case VK_ERROR_DEVICE_LOST:
        if (d) {
            vk_mark_lost(d);
        }
        return rlx_error_set(err, RLX_ERR_DEVICE,
                             "%s: the Vulkan device was lost (a driver reset or GPU fault); close "
                             "and reopen the device",
                             what);
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "%s: out of host memory", what);
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "%s: out of device memory", what);
    default:
        return rlx_error_set(err, RLX_ERR_DEVICE, "%s failed (Vulkan error %d)", what, (int)r);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

rlx_status vk_wait_fence(vk_device *d, VkFence f, volatile const int *cancel, rlx_error **err)
{
    int timeout_s = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? FENCE_TIMEOUT_SW_S
                                                                       : FENCE_TIMEOUT_HW_S;
    double t0 = now_s();
    for (;;) {
        VkResult r = vkWaitForFences(d->dev, 1, &f, VK_TRUE, 100ull * 1000 * 1000);
        if (r == VK_SUCCESS && d->inject_lost) {
            /* vk_test_lose_device: the work is done, but report what a
             * driver reset would */
            d->inject_lost = false;
            r = VK_ERROR_DEVICE_LOST;
        }
        if (r == VK_SUCCESS)
            return RLX_OK;
        if (r != VK_TIMEOUT)
            return vk_check_result(d, r, "waiting for the GPU", err);
        /* A cancelled run still has to drain (its buffers are in use), so
         * cancel only shortens nothing here; it is honoured between runs. */
        (void)cancel;
        if (now_s() - t0 > timeout_s) {
            /* its buffers may still be in use: nothing more may run on it */
            vk_mark_lost(d);
            return rlx_error_set(err, RLX_ERR_DEVICE,
                                 "the Vulkan device %s did not finish its work within %d s, so it "
                                 "is treated as lost (hung); close and reopen the device",
                                 d->props.deviceName, timeout_s);
        }
    }
}

/* ---- devices ------------------------------------------------------------- */

static int find_mtype(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                      VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid)
{
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp->memoryTypes[i].propertyFlags & want) == want &&
            !(mp->memoryTypes[i].propertyFlags & avoid))
            return (int)i;
    return -1;
}

rlx_status vk_make_buffer(vk_device *d, uint64_t size, uint32_t mtype, VkBufferUsageFlags usage,
                          VkBuffer *buf, VkDeviceMemory *mem, void **map, rlx_error **err)
{
    *buf = VK_NULL_HANDLE;
    *mem = VK_NULL_HANDLE;
    if (map)
        *map = NULL;
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    rlx_status s =
        vk_check_result(d, vkCreateBuffer(d->dev, &bi, NULL, buf), "creating a buffer", err);
    if (s != RLX_OK)
        return s;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, *buf, &req);
    if (!(req.memoryTypeBits & (1u << mtype))) {
        vkDestroyBuffer(d->dev, *buf, NULL);
        *buf = VK_NULL_HANDLE;
        return rlx_error_set(err, RLX_ERR_DEVICE, "no suitable memory type for a buffer");
    }
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = mtype,
    };
    s = vk_check_result(d, vkAllocateMemory(d->dev, &ai, NULL, mem), "allocating device memory",
                        err);
    if (s == RLX_OK)
        s = vk_check_result(d, vkBindBufferMemory(d->dev, *buf, *mem, 0), "binding memory", err);
    if (s == RLX_OK && map)
        s = vk_check_result(d, vkMapMemory(d->dev, *mem, 0, VK_WHOLE_SIZE, 0, map),
                            "mapping memory", err);
    if (s != RLX_OK) {
        if (*mem)
            vkFreeMemory(d->dev, *mem, NULL);
        vkDestroyBuffer(d->dev, *buf, NULL);
        *buf = VK_NULL_HANDLE;
        *mem = VK_NULL_HANDLE;
    }
    return s;
}

static void vk_device_close(rlx_device *dev)
{
    vk_device *d = (vk_device *)dev;
    if (!d)
        return;
    if (d->dev && !vk_is_lost(d)) { /* a hung device may still run work from the pool */
        if (d->staging)
            vkDestroyBuffer(d->dev, d->staging, NULL);
        if (d->staging_mem)
            vkFreeMemory(d->dev, d->staging_mem, NULL);
        if (d->xfer_fence)
            vkDestroyFence(d->dev, d->xfer_fence, NULL);
        if (d->cmd_pool)
            vkDestroyCommandPool(d->dev, d->cmd_pool, NULL);
    }
    free(d);
}

/* The shared VkDevice of physical device `index` (made on first use). */
static rlx_status shared_open(vk_device *d, bool force_f32, rlx_error **err)
{
    struct shared_dev *sd = &shared_devs[d->index];
    rlx_status s = RLX_OK;
    pthread_mutex_lock(&sd->lock);
    uint32_t gen = __atomic_load_n(&sd->gen, __ATOMIC_ACQUIRE);
    if (sd->dev && sd->dev_gen != gen) {
        sd->dev = VK_NULL_HANDLE;
        memset(sd->pipes, 0, sizeof sd->pipes);
    }
    if (!sd->dev) {
        sd->has_budget = has_device_ext(d->pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
        float prio = 1.0f;
        VkDeviceQueueCreateInfo qci = {
            .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
            .queueFamilyIndex = d->qfam,
            .queueCount = 1,
            .pQueuePriorities = &prio,
        };
        const char *exts[2];
        uint32_t n_ext = 0;
        if (sd->has_budget)
            exts[n_ext++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
        /* the f16 kernels' features, enabled whenever the device has them
         * (an open may still choose the f32 kernels) */
        bool s16, f16;
        f16_features(d->pd, &s16, &f16);
        sd->has_f16 = s16 && f16;
        VkPhysicalDeviceShaderFloat16Int8FeaturesKHR ef16 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR,
            .shaderFloat16 = VK_TRUE};
        VkPhysicalDevice16BitStorageFeatures es16 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
            .pNext = &ef16,
            .storageBuffer16BitAccess = VK_TRUE};
        if (sd->has_f16)
            exts[n_ext++] = VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME;
        VkDeviceCreateInfo dci = {
            .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
            .pNext = sd->has_f16 ? &es16 : NULL,
            .queueCreateInfoCount = 1,
            .pQueueCreateInfos = &qci,
            .enabledExtensionCount = n_ext,
            .ppEnabledExtensionNames = exts,
        };
        VkDevice dev = VK_NULL_HANDLE;
        s = vk_check_result(d, vkCreateDevice(d->pd, &dci, NULL, &dev), "creating the device", err);
        VkDescriptorSetLayoutBinding bind[VK_SLOTS];
        for (int i = 0; i < VK_SLOTS; i++)
            bind[i] = (VkDescriptorSetLayoutBinding){
                .binding = (uint32_t)i,
                .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                .descriptorCount = 1,
                .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
            };
        VkDescriptorSetLayoutCreateInfo dli = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            .bindingCount = VK_SLOTS,
            .pBindings = bind,
        };
        VkDescriptorSetLayout dsl = VK_NULL_HANDLE;
        if (s == RLX_OK)
            s = vk_check_result(d, vkCreateDescriptorSetLayout(dev, &dli, NULL, &dsl),
                                "creating a descriptor set layout", err);
        VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 4};
        VkPipelineLayoutCreateInfo pli = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
            .setLayoutCount = 1,
            .pSetLayouts = &dsl,
            .pushConstantRangeCount = 1,
            .pPushConstantRanges = &pcr,
        };
        VkPipelineLayout layout = VK_NULL_HANDLE;
        if (s == RLX_OK)
            s = vk_check_result(d, vkCreatePipelineLayout(dev, &pli, NULL, &layout),
                                "creating a pipeline layout", err);
        if (s == RLX_OK) {
            sd->dev = dev;
            sd->dev_gen = gen;
            vkGetDeviceQueue(dev, d->qfam, 0, &sd->queue);
            sd->dsl = dsl;
            sd->layout = layout;
        } else if (dev) {
            if (dsl)
                vkDestroyDescriptorSetLayout(dev, dsl, NULL);
            vkDestroyDevice(dev, NULL);
        }
    }
    if (s == RLX_OK) {
        d->gen = sd->dev_gen;
        d->dev = sd->dev;
        d->queue = sd->queue;
        d->dsl = sd->dsl;
        d->layout = sd->layout;
        d->f16 = sd->has_f16 && !force_f32;
        d->pipes = sd->pipes[d->f16 ? 1 : 0];
        d->has_budget = sd->has_budget;
    }
    pthread_mutex_unlock(&sd->lock);
    return s;
}

static rlx_status vk_device_open(int index, const rlx_device_opts *opts, rlx_device **out,
                                 rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "device_open: no output given");
    int n = vk_device_count();
    if (n == 0)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no Vulkan device found");
    if (index < 0 || index >= n)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                             "no Vulkan device %d: this machine has %d (vulkan:0 to vulkan:%d)",
                             index, n, n - 1);
    vk_device *d = calloc(1, sizeof *d);
    if (!d)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory opening a Vulkan device");
    d->base.iface = &rlx_vulkan_backend;
    d->index = index;
    d->pd = pdevs[index];
    d->qfam = pdev_qfam[index];
    vkGetPhysicalDeviceProperties(d->pd, &d->props);
    vkGetPhysicalDeviceMemoryProperties(d->pd, &d->mem);
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &m3};
    vkGetPhysicalDeviceProperties2(d->pd, &p2);
    d->max_alloc = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : UINT64_MAX;

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nq, NULL);
    VkQueueFamilyProperties qf[32];
    if (nq > 32)
        nq = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nq, qf);
    d->ts_bits = d->qfam < nq ? qf[d->qfam].timestampValidBits : 0;

    /* the binding window (vk-program.c splits what exceeds it); a test may
     * lower it, never below a few words past the offset alignment */
    d->bind_limit = d->props.limits.maxStorageBufferRange / 4 * 4;
    if (opts && opts->max_binding_bytes) {
        uint64_t lo = 16 * d->props.limits.minStorageBufferOffsetAlignment;
        if (lo < 1024)
            lo = 1024;
        if (opts->max_binding_bytes < lo) {
            vk_device_close(&d->base);
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "a binding limit of %llu bytes is below this device's smallest "
                                 "usable one (%llu bytes)",
                                 (unsigned long long)opts->max_binding_bytes,
                                 (unsigned long long)lo);
        }
        if (opts->max_binding_bytes < d->bind_limit)
            d->bind_limit = opts->max_binding_bytes / 4 * 4;
    }
    rlx_status s = shared_open(d, opts && opts->force_f32, err);
    if (s != RLX_OK) {
        vk_device_close(&d->base);
        return s;
    }

    /* Buffers: device-local; on a CPU/integrated device prefer a type the
     * host can also map (no staging copies there). */
    uint32_t all = (1u << d->mem.memoryTypeCount) - 1;
    const VkMemoryPropertyFlags HV =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int mt = -1;
    if (d->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU)
        mt = find_mtype(&d->mem, all, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | HV, 0);
    if (mt < 0)
        mt = find_mtype(&d->mem, all, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    if (mt < 0)
        mt = find_mtype(&d->mem, all, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    int mh = find_mtype(&d->mem, all, HV | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
    if (mh < 0)
        mh = find_mtype(&d->mem, all, HV, 0);
    if (mt < 0 || mh < 0) {
        vk_device_close(&d->base);
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "the Vulkan device %s offers no usable memory types",
                             d->props.deviceName);
    }
    d->mt_device = (uint32_t)mt;
    d->mt_host = (uint32_t)mh;
    d->device_mapped = (d->mem.memoryTypes[mt].propertyFlags & HV) == HV;
    /* The programs' records: every thread of every dispatch reads its
     * record, so on a discrete GPU they live in device memory (read across
     * PCIe from host memory they made each dispatch take 10 µs and more on
     * an H100) and the run copies them in. */
    d->staged_meta = !d->device_mapped || (opts && opts->staged_records);
    d->heap_size = d->mem.memoryHeaps[d->mem.memoryTypes[mt].heapIndex].size;

    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = d->qfam,
    };
    s = vk_check_result(d, vkCreateCommandPool(d->dev, &pci, NULL, &d->cmd_pool),
                        "creating a command pool", err);
    VkCommandBufferAllocateInfo cai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = d->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    if (s == RLX_OK)
        s = vk_check_result(d, vkAllocateCommandBuffers(d->dev, &cai, &d->xfer_cb),
                            "allocating a command buffer", err);
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (s == RLX_OK)
        s = vk_check_result(d, vkCreateFence(d->dev, &fci, NULL, &d->xfer_fence),
                            "creating a fence", err);

    if (s == RLX_OK && !d->device_mapped) {
        d->staging_size = STAGING_BYTES;
        s = vk_make_buffer(d, d->staging_size, d->mt_host,
                           VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                           &d->staging, &d->staging_mem, &d->staging_map, err);
    }
    if (s != RLX_OK) {
        vk_device_close(&d->base);
        return s;
    }
    *out = &d->base;
    return RLX_OK;
}

static rlx_status vk_device_query(rlx_device *dev, rlx_device_info *out, rlx_error **err)
{
    if (!dev || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "device_query: no device or output");
    vk_device *d = (vk_device *)dev;
    fill_info(d->index, d->allocated, d->f16, out);
    out->max_binding_bytes = d->bind_limit;
    return RLX_OK;
}

static rlx_status make_pipeline(vk_device *d, vk_kernel k, VkPipeline *out, rlx_error **err);

rlx_status vk_pipeline(vk_device *d, vk_kernel k, VkPipeline *out, rlx_error **err)
{
    struct shared_dev *sd = &shared_devs[d->index];
    pthread_mutex_lock(&sd->lock);
    rlx_status s = RLX_OK;
    if (!d->pipes[k])
        s = make_pipeline(d, k, out, err);
    *out = d->pipes[k];
    pthread_mutex_unlock(&sd->lock);
    return s;
}

static rlx_status make_pipeline(vk_device *d, vk_kernel k, VkPipeline *out, rlx_error **err)
{
    VkShaderModuleCreateInfo mi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = shaders[d->f16][k].bytes,
        .pCode = shaders[d->f16][k].code,
    };
    VkShaderModule mod;
    rlx_status s =
        vk_check_result(d, vkCreateShaderModule(d->dev, &mi, NULL, &mod), "loading a shader", err);
    if (s != RLX_OK)
        return s;
    uint32_t ls = VK_LS;
    VkSpecializationMapEntry me = {.constantID = 0, .offset = 0, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = 1, .pMapEntries = &me, .dataSize = 4, .pData = &ls};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = mod,
                .pName = "main",
                .pSpecializationInfo = &si,
            },
        .layout = d->layout,
    };
    s = vk_check_result(
        d, vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &ci, NULL, &d->pipes[k]),
        "building a compute pipeline", err);
    vkDestroyShaderModule(d->dev, mod, NULL);
    if (s != RLX_OK) {
        d->pipes[k] = VK_NULL_HANDLE;
        rlx_error_prefix(err, "shader %s: ", shaders[d->f16][k].name);
        return s;
    }
    *out = d->pipes[k];
    return RLX_OK;
}

/* ---- buffers --------------------------------------------------------------- */

static rlx_status vk_buffer_alloc(rlx_device *dev, uint64_t size, rlx_buffer **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!dev || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "buffer_alloc: no device or output");
    vk_device *d = (vk_device *)dev;
    if (vk_is_lost(d))
        return rlx_error_set(err, RLX_ERR_DEVICE, "the Vulkan device was lost; reopen it");
    uint64_t alloc = size < 16 ? 16 : (size + 15) / 16 * 16;
    if (size > UINT64_MAX - 16 || alloc > d->heap_size || alloc > d->max_alloc)
        return rlx_error_set(
            err, RLX_ERR_NO_MEMORY,
            "a %.1f MiB buffer does not fit the Vulkan device %s (memory %.1f "
            "MiB, largest allocation %.1f MiB)",
            (double)size / 1048576.0, d->props.deviceName, (double)d->heap_size / 1048576.0,
            (double)(d->max_alloc > d->heap_size ? d->heap_size : d->max_alloc) / 1048576.0);
    vk_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory allocating a buffer");
    rlx_status s =
        vk_make_buffer(d, alloc, d->mt_device,
                       VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                           VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                       &b->buf, &b->mem, d->device_mapped ? &b->map : NULL, err);
    if (s != RLX_OK) {
        free(b);
        rlx_error_prefix(err, "allocating %.1f MiB on %s: ", (double)size / 1048576.0,
                         d->props.deviceName);
        return s;
    }
    b->base.iface = &rlx_vulkan_backend;
    b->base.size = size;
    b->base.host_ptr = NULL;
    b->dev = d;
    b->alloc = alloc;
    static uint64_t next_serial = 0;
    b->serial = __atomic_add_fetch(&next_serial, 1, __ATOMIC_RELAXED);
    d->allocated += alloc;
    /* new device memory holds garbage; the CPU backend's buffers start zeroed */
    if (b->map) {
        memset(b->map, 0, (size_t)alloc);
    } else {
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        vkResetCommandBuffer(d->xfer_cb, 0);
        vkBeginCommandBuffer(d->xfer_cb, &bi);
        vkCmdFillBuffer(d->xfer_cb, b->buf, 0, VK_WHOLE_SIZE, 0);
        vkEndCommandBuffer(d->xfer_cb);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &d->xfer_cb};
        vkResetFences(d->dev, 1, &d->xfer_fence);
        s = vk_check_result(d, vk_submit(d, &si, d->xfer_fence), "clearing a buffer", err);
        if (s == RLX_OK)
            s = vk_wait_fence(d, d->xfer_fence, NULL, err);
        if (s != RLX_OK) {
            rlx_vulkan_backend.buffer_free(&b->base);
            return s;
        }
    }
    *out = &b->base;
    return RLX_OK;
}

static rlx_status check_range(const rlx_buffer *buf, uint64_t offset, uint64_t size,
                              const char *what, rlx_error **err)
{
    if (!buf || buf->iface != &rlx_vulkan_backend)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s: not a Vulkan buffer", what);
    if (offset > buf->size || size > buf->size - offset)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "%s of %llu bytes at offset %llu runs past the %llu-byte buffer", what,
                             (unsigned long long)size, (unsigned long long)offset,
                             (unsigned long long)buf->size);
    return RLX_OK;
}

/* Copy n bytes from src at so to dst at dt now, and wait for it (after
 * whatever ran before; visible to the host and to shaders after). */
rlx_status vk_copy_now(vk_device *d, VkBuffer src, uint64_t so, VkBuffer dst, uint64_t dt,
                       uint64_t n, rlx_error **err)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vkResetCommandBuffer(d->xfer_cb, 0);
    vkBeginCommandBuffer(d->xfer_cb, &bi);
    VkMemoryBarrier mb0 = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                           .dstAccessMask =
                               VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(d->xfer_cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb0, 0, NULL, 0, NULL);
    VkBufferCopy c = {.srcOffset = so, .dstOffset = dt, .size = n};
    vkCmdCopyBuffer(d->xfer_cb, src, dst, 1, &c);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT};
    vkCmdPipelineBarrier(d->xfer_cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                         &mb, 0, NULL, 0, NULL);
    vkEndCommandBuffer(d->xfer_cb);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &d->xfer_cb};
    vkResetFences(d->dev, 1, &d->xfer_fence);
    rlx_status s = vk_check_result(d, vk_submit(d, &si, d->xfer_fence), "a copy", err);
    if (s == RLX_OK)
        s = vk_wait_fence(d, d->xfer_fence, NULL, err);
    return s;
}

/* One staged copy between the staging buffer and b (to_device: upload). */
static rlx_status staged_copy(vk_device *d, vk_buffer *b, uint64_t offset, uint64_t n,
                              bool to_device, rlx_error **err)
{
    return to_device ? vk_copy_now(d, d->staging, 0, b->buf, offset, n, err)
                     : vk_copy_now(d, b->buf, offset, d->staging, 0, n, err);
}

static rlx_status vk_buffer_write(rlx_buffer *buf, uint64_t offset, const void *src, uint64_t size,
                                  rlx_error **err)
{
    rlx_status s = check_range(buf, offset, size, "buffer write", err);
    if (s != RLX_OK || size == 0)
        return s;
    vk_buffer *b = (vk_buffer *)buf;
    vk_device *d = b->dev;
    if (vk_is_lost(d))
        return rlx_error_set(err, RLX_ERR_DEVICE, "the Vulkan device was lost; reopen it");
    if (b->map) {
        memcpy((uint8_t *)b->map + offset, src, (size_t)size);
        return RLX_OK;
    }
    for (uint64_t done = 0; done < size;) {
        uint64_t n = size - done < d->staging_size ? size - done : d->staging_size;
        memcpy(d->staging_map, (const uint8_t *)src + done, (size_t)n);
        s = staged_copy(d, b, offset + done, n, true, err);
        if (s != RLX_OK)
            return s;
        done += n;
    }
    return RLX_OK;
}

static rlx_status vk_buffer_read(rlx_buffer *buf, uint64_t offset, void *dst, uint64_t size,
                                 rlx_error **err)
{
    rlx_status s = check_range(buf, offset, size, "buffer read", err);
    if (s != RLX_OK || size == 0)
        return s;
    vk_buffer *b = (vk_buffer *)buf;
    vk_device *d = b->dev;
    if (vk_is_lost(d))
        return rlx_error_set(err, RLX_ERR_DEVICE, "the Vulkan device was lost; reopen it");
    if (b->map) {
        memcpy(dst, (const uint8_t *)b->map + offset, (size_t)size);
        return RLX_OK;
    }
    for (uint64_t done = 0; done < size;) {
        uint64_t n = size - done < d->staging_size ? size - done : d->staging_size;
        s = staged_copy(d, b, offset + done, n, false, err);
        if (s != RLX_OK)
            return s;
        memcpy((uint8_t *)dst + done, d->staging_map, (size_t)n);
        done += n;
    }
    return RLX_OK;
}

static rlx_status vk_buffer_from_host(rlx_device *dev, const void *ptr, uint64_t size,
                                      rlx_buffer **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!dev || !out || (!ptr && size))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "buffer_from_host: missing argument");
    rlx_buffer *b = NULL;
    rlx_status s = vk_buffer_alloc(dev, size, &b, err);
    if (s == RLX_OK)
        s = vk_buffer_write(b, 0, ptr, size, err); /* chunked through staging */
    if (s != RLX_OK) {
        rlx_vulkan_backend.buffer_free(b);
        return s;
    }
    *out = b;
    return RLX_OK;
}

static void vk_buffer_free(rlx_buffer *buf)
{
    if (!buf)
        return;
    vk_buffer *b = (vk_buffer *)buf;
    vk_device *d = b->dev;
    if (vk_is_lost(d)) {
        /* a hung device may still be running work that reads this memory
         * (a software device's threads do): it goes with the abandoned
         * VkDevice instead */
        d->allocated -= b->alloc;
        free(b);
        return;
    }
    if (b->map)
        vkUnmapMemory(d->dev, b->mem);
    if (b->buf)
        vkDestroyBuffer(d->dev, b->buf, NULL);
    if (b->mem)
        vkFreeMemory(d->dev, b->mem, NULL);
    d->allocated -= b->alloc;
    free(b);
}

static rlx_status vk_synchronize(rlx_device *dev, rlx_error **err)
{
    vk_device *d = (vk_device *)dev;
    if (!d)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "synchronize: no device");
    if (vk_is_lost(d))
        return rlx_error_set(err, RLX_ERR_DEVICE, "the Vulkan device was lost; reopen it");
    /* every submission is waited for before the call that made it returns */
    return RLX_OK;
}

const rlx_backend_i rlx_vulkan_backend = {
    .name = "vulkan",
    /* a dispatch that writes where the one before it read needs a barrier
     * (vk-program.c records one only at such hazards) */
    .spaced_reuse = true,
    .device_count = vk_device_count,
    .device_info = vk_device_info,
    .device_open = vk_device_open,
    .device_close = vk_device_close,
    .device_query = vk_device_query,
    .buffer_alloc = vk_buffer_alloc,
    .buffer_from_host = vk_buffer_from_host,
    .buffer_write = vk_buffer_write,
    .buffer_read = vk_buffer_read,
    .buffer_free = vk_buffer_free,
    .supports_op = vk_supports_op,
    .program_create = vk_program_create,
    .program_run = vk_program_run,
    .program_free = vk_program_free,
    .synchronize = vk_synchronize,
    .program_set_timing = vk_program_set_timing,
    .program_timings = vk_program_timings,
    .program_stats = vk_program_stats,
};
