/* The Vulkan backend's entry in the registry (built when the Vulkan loader
 * and glslc are found).
 *
 * Usage: through the registry (rlx_backend_find("vulkan")), or directly as
 * &rlx_vulkan_backend. Thread safety: the interface struct is immutable; a
 * device serves one thread at a time.
 *
 * Devices are the instance's physical devices with a compute queue, in the
 * loader's order ("vulkan:0", ...); Mesa's lavapipe reports as
 * RLX_DEVICE_GPU_SOFTWARE. Buffers live in device-local memory; uploads go
 * through a fixed staging buffer in chunks (or straight into the mapping
 * where device memory is host-visible, as on lavapipe and most integrated
 * GPUs). program_run records one command buffer per program and replays it;
 * this run's dims, strides and dispatch sizes are written into a small
 * host-visible "meta" buffer that the shaders read and that feeds indirect
 * dispatches, so a new sequence length does not re-record. It re-records
 * only when the bound buffers change or timing is switched (program_stats
 * counts runs and recordings). program_run waits for the run to finish:
 * a wait longer than 60 s on a hardware GPU (300 s on a software one)
 * counts as a hung device, which is then treated as lost; a lost device is
 * RLX_ERR_DEVICE for every open of it, and the next open makes a fresh
 * VkDevice.
 *
 * What it takes (supports_op): see vk-program.c's vk_check(). Compute is
 * f32; F16/BF16/I32/I16/I8/U8/BOOL operands are read and written in their
 * dtype by unpacking 32-bit words in the shaders (no 16-bit storage
 * feature needed); quantized Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q4_K/Q5_K/Q6_K
 * blocks are read in place as MATMUL's b and GATHER's table. Any strides.
 * It follows the CPU backend's conventions (cpu-backend.h).
 */
#ifndef RLX_BACKENDS_VULKAN_VK_BACKEND_H
#define RLX_BACKENDS_VULKAN_VK_BACKEND_H

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const rlx_backend_i rlx_vulkan_backend;

#ifdef __cplusplus
}
#endif
#endif
