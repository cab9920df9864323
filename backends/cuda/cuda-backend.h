/* The CUDA backend's entry in the registry (built when nvcc is found).
 *
 * Usage: through the registry (rlx_backend_find("cuda")), or directly as
 * &rlx_cuda_backend. Thread safety: the interface struct is immutable; a
 * device serves one thread at a time.
 *
 * Devices are the driver's CUDA devices in its order ("cuda:0", ...). The
 * driver (libcuda.so.1) is opened at run time: without it the backend lists
 * no device and rlx_cuda_unavailable_reason() says why. Kernels are CUDA C++
 * compiled by nvcc at build time into fat binaries (SASS for Turing to
 * Hopper, PTX for newer GPUs) embedded in the library.
 *
 * program_run fills one 1 KiB record per kernel launch (operand addresses,
 * dims, strides, op parameters; the layout the Vulkan backend's shaders
 * read) in pinned memory, copies them to the device and launches; a run
 * whose launches have the same shape as the previous one replays a CUDA
 * graph of them (program_stats counts its captures as recordings), so a
 * decode step is one graph launch. program_run waits for the run.
 *
 * What it takes (supports_op): see cuda-program.c's cu_check(). Compute is
 * f32 (the tensor-core matmul multiplies f16 and sums in f32); operands are
 * read and written in their dtype; quantized Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/
 * Q4_K/Q5_K/Q6_K blocks are read in place as MATMUL's b, GATHER's table and
 * a Q8_0 KV cache. Any strides. A kernel addresses whole buffers, so the
 * device reports no binding limit (max_binding_bytes 0) and ignores
 * rlx_device_opts.max_binding_bytes.
 */
#ifndef RLX_BACKENDS_CUDA_CUDA_BACKEND_H
#define RLX_BACKENDS_CUDA_CUDA_BACKEND_H

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const rlx_backend_i rlx_cuda_backend;

/* Why no CUDA device can be used here (no driver, too old, none present),
 * or NULL when the driver lists at least one. */
RLX_API const char *rlx_cuda_unavailable_reason(void);

/* For `rlx bench ops`: the best of `repeats` timed runs (after one warm-up)
 * of cuBLAS's F16 GEMM, C[M,N] (f32) = A[M,K] . B[N,K]^T with f16 operands
 * and f32 sums, on an open CUDA device; RLX_ERR_NOT_FOUND without cuBLAS. */
RLX_API rlx_status rlx_cuda_bench_cublas_f16(rlx_device *dev, int64_t M, int64_t N, int64_t K,
                                             int repeats, double *best_ms, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
