/* Internals of the Vulkan backend shared by vk-device.c and vk-program.c.
 * Not installed. */
#ifndef RLX_BACKENDS_VULKAN_VK_INTERNAL_H
#define RLX_BACKENDS_VULKAN_VK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <vulkan/vulkan.h>

#include "backends/backend.h"

/* shader kernels (vk-device.c embeds their SPIR-V) */
typedef enum vk_kernel {
    VK_K_EW,
    VK_K_MATMUL,
    VK_K_ROWOP,
    VK_K_ROPE,
    VK_K_ATTN,
    VK_K_CONV,
    VK_K_SPATIAL,
    VK_K_GATHER,
    VK_K_ATTN_T64,  /* attention-tile.comp: head dims up to 64 */
    VK_K_ATTN_T128, /* the same built for head dims up to 128 */
    VK_K_CONV_GEMM, /* conv-gemm.comp: register-blocked convolution (vk-program.c: fill_conv) */
    VK_K_MATVEC,    /* matvec.comp: matrix-vector products (vk-program.c: fill_matmul) */
    VK_K_GEMM,      /* gemm.comp: matrix products in shared-memory tiles (fill_matmul) */
    VK_K_COUNT
} vk_kernel;

#define VK_SLOTS    8 /* bindings: 0..5 inputs, 6 output, 7 meta */
#define VK_OUT_SLOT 6
#define VK_LS       64           /* workgroup size (specialization constant 0) */
#define MV_ROWS     8            /* matvec.comp: rows of `a` at most */
#define MV_COLS     (VK_LS / 32) /* matvec.comp: columns a workgroup */
#define GEMM_T      64           /* gemm.comp: output tiles GEMM_T x GEMM_T */

typedef struct vk_device {
    rlx_device base;
    int index;
    VkPhysicalDevice pd;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem;
    bool has_budget;
    uint32_t mt_device;  /* memory type for buffers */
    uint32_t mt_host;    /* host-visible, coherent: staging, meta */
    bool device_mapped;  /* mt_device is host-visible too: map buffers */
    bool staged_meta;    /* records in device memory, copied in per run (!device_mapped) */
    uint64_t max_alloc;  /* maxMemoryAllocationSize */
    uint64_t bind_limit; /* bytes one binding reaches (maxStorageBufferRange or lower) */
    uint64_t heap_size;  /* of mt_device's heap */
    VkCommandPool cmd_pool;
    VkCommandBuffer xfer_cb;
    VkFence xfer_fence;
    VkBuffer staging;
    VkDeviceMemory staging_mem;
    void *staging_map;
    uint64_t staging_size;
    /* shared by every open of this physical device (vk-device.c) */
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline *pipes; /* VK_K_COUNT of this open's variant, built on first use */
    bool f16;          /* the f16 kernels (16-bit storage + float16 arithmetic) */
    bool lost;
    uint32_t gen;     /* of the shared VkDevice when opened (vk_is_lost) */
    bool inject_lost; /* vk_test_lose_device */
    uint32_t ts_bits;
    uint64_t allocated; /* bytes of our live buffers */
} vk_device;

typedef struct vk_buffer {
    rlx_buffer base;
    vk_device *dev;
    VkBuffer buf;
    VkDeviceMemory mem;
    void *map;      /* when device memory is host-visible */
    uint64_t alloc; /* bytes allocated (size rounded up) */
    /* unique for the process: a new buffer may get a freed one's VkBuffer
     * handle, so programs compare serials to know when to rebind */
    uint64_t serial;
} vk_buffer;

extern const rlx_backend_i rlx_vulkan_backend;

rlx_status vk_check_result(vk_device *d, VkResult r, const char *what, rlx_error **err);
/* Mark the device lost for this open and every other open of the same
 * VkDevice; the next open makes a fresh one. */
void vk_mark_lost(vk_device *d);
/* This open, or another open of its VkDevice, saw the device lost. */
bool vk_is_lost(vk_device *d);
/* Test-only fault injection: the next fence wait of this open (a program
 * run, a transfer) lets the work finish and then reports
 * VK_ERROR_DEVICE_LOST, as a driver reset would. Not in the backend
 * interface and not reachable from the environment. */
void vk_test_lose_device(rlx_device *dev);
/* Test-only: the command buffers a run of this program is submitted in, and
 * a Stop pressed while command buffer seg - 1 runs: the run sets *flag just
 * before it would submit seg (and checks the cancel flag there). */
int32_t vk_test_segments(const rlx_program *prog);
void vk_test_stop_at(rlx_program *prog, int32_t seg, volatile int *flag);
/* Wait for a fence with a timeout (60 s on hardware, 300 s on a software
 * device: vk-device.c); a lost device is an error, and a timeout marks the
 * device lost. */
rlx_status vk_wait_fence(vk_device *d, VkFence f, volatile const int *cancel, rlx_error **err);
/* vkQueueSubmit on the queue that every open of the device shares. */
VkResult vk_submit(vk_device *d, const VkSubmitInfo *si, VkFence fence);
rlx_status vk_pipeline(vk_device *d, vk_kernel k, VkPipeline *out, rlx_error **err);
rlx_status vk_make_buffer(vk_device *d, uint64_t size, uint32_t mtype, VkBufferUsageFlags usage,
                          VkBuffer *buf, VkDeviceMemory *mem, void **map, rlx_error **err);
rlx_status vk_copy_now(vk_device *d, VkBuffer src, uint64_t so, VkBuffer dst, uint64_t dt,
                       uint64_t n, rlx_error **err);

bool vk_supports_op(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins);
rlx_status vk_program_create(rlx_device *dev, const rlx_lir *lir, rlx_program **out,
                             rlx_error **err);
rlx_status vk_program_run(rlx_program *prog, const rlx_program_bindings *b,
                          const rlx_sym_values *syms, rlx_error **err);
void vk_program_free(rlx_program *prog);
void vk_program_set_timing(rlx_program *prog, bool enabled);
rlx_status vk_program_timings(rlx_program *prog, double *ms, int32_t n, rlx_error **err);
void vk_program_stats(const rlx_program *prog, rlx_program_stats *out);

#endif
