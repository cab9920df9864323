/* Internals of the CUDA backend shared by cuda-driver.c, cuda-device.c and
 * cuda-program.c. Not installed.
 *
 * The backend talks to the driver API only (libcuda.so.1, opened with
 * dlopen at first use), so one build of librlx runs on machines with and
 * without an NVIDIA driver. Kernels come from fat binaries that nvcc built
 * at compile time (SASS for several architectures plus PTX), embedded in
 * the library and loaded with cuModuleLoadData.
 */
#ifndef RLX_BACKENDS_CUDA_CUDA_INTERNAL_H
#define RLX_BACKENDS_CUDA_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#include "backends/backend.h"

/* The driver entry points we use, resolved by name (the versioned symbol
 * cuda.h maps each call to, e.g. cuMemAlloc -> cuMemAlloc_v2). */
#define RLX_CU_FUNCS(X)                            \
    X(cuInit)                                      \
    X(cuDriverGetVersion)                          \
    X(cuGetErrorString)                            \
    X(cuGetErrorName)                              \
    X(cuDeviceGetCount)                            \
    X(cuDeviceGet)                                 \
    X(cuDeviceGetName)                             \
    X(cuDeviceTotalMem)                            \
    X(cuDeviceGetAttribute)                        \
    X(cuDevicePrimaryCtxRetain)                    \
    X(cuDevicePrimaryCtxRelease)                   \
    X(cuCtxSetCurrent)                             \
    X(cuCtxSynchronize)                            \
    X(cuModuleLoadData)                            \
    X(cuModuleUnload)                              \
    X(cuModuleGetFunction)                         \
    X(cuFuncSetAttribute)                          \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
    X(cuMemAlloc)                                  \
    X(cuMemFree)                                   \
    X(cuMemAllocHost)                              \
    X(cuMemFreeHost)                               \
    X(cuMemGetInfo)                                \
    X(cuMemcpyHtoDAsync)                           \
    X(cuMemcpyDtoHAsync)                           \
    X(cuMemcpyDtoDAsync)                           \
    X(cuMemsetD8Async)                             \
    X(cuLaunchKernel)                              \
    X(cuLaunchKernelEx)                            \
    X(cuStreamCreate)                              \
    X(cuStreamDestroy)                             \
    X(cuStreamSynchronize)                         \
    X(cuStreamBeginCapture)                        \
    X(cuStreamEndCapture)                          \
    X(cuGraphInstantiate)                          \
    X(cuGraphLaunch)                               \
    X(cuGraphExecDestroy)                          \
    X(cuGraphDestroy)                              \
    X(cuEventCreate)                               \
    X(cuEventDestroy)                              \
    X(cuEventRecord)                               \
    X(cuEventSynchronize)                          \
    X(cuEventElapsedTime)

typedef struct cu_api {
#define RLX_CU_FIELD(f) __typeof__(f) *f;
    RLX_CU_FUNCS(RLX_CU_FIELD)
#undef RLX_CU_FIELD
} cu_api;

/* The process-wide driver table: NULL (with the reason in `why`) when no
 * usable driver is installed. Loaded once, thread-safe. */
const cu_api *cu_driver(const char **why);
/* For tests: take the driver from `path` instead of libcuda.so.1 (the CPU
 * emulator of tests/cuda-emu). Only before the first use of the backend. */
void cu_driver_use(const char *path);
/* For tests: load the driver from `path` into a private table, as the
 * backend would (NULL and the reason when it cannot). Nothing global changes. */
bool cu_driver_try(const char *path, cu_api *out, char *why, size_t cap);

/* A driver error as an rlx_error: "what: the driver's words (NAME)". An
 * out-of-memory becomes RLX_ERR_NO_MEMORY, everything else RLX_ERR_DEVICE. */
rlx_status cu_fail(CUresult r, const char *what, rlx_error **err);

/* kernels (cuda-device.c loads them per device) */
typedef enum cu_kernel {
    CU_K_EW,
    CU_K_MM_WARP, /* matmul: a warp per output, lanes split K (any layout) */
    CU_K_MM_VEC,  /* matmul: a warp per output, b's rows read 8 values a lane */
    CU_K_MM_TILE, /* matmul: 64x64 tiles, f32 FMA (any layout and dtype) */
    CU_K_MM_TC,   /* matmul: 128x128 tiles of a quantized b on the tensor cores */
    CU_K_MM_TC64, /* the same in 64x128 tiles (where 128x128 ones leave SMs idle) */
    CU_K_MM_TQ,   /* the same from an f16 copy of a, dequantizing per weight type */
    CU_K_MM_TQ64,
    CU_K_ROWOP,
    CU_K_ROPE,
    CU_K_ATTN,
    CU_K_ATTN_WIDE, /* value head dims above 256 */
    CU_K_ATTN_ROWS, /* prompts: several query rows a block */
    CU_K_CONV,
    CU_K_SPATIAL,
    CU_K_GATHER,
    CU_K_Q8_APPEND,
    CU_K_Q8_ACT,   /* activation rows rounded to 8-bit blocks for the CU_K_MMV_* kernels */
    CU_K_MMV_Q4_K, /* matrix-vector products on __dp4a, per weight type (each group in
                    * this order: kernels/matmul.cu's rlx_mmv_mixed numbers them so) */
    CU_K_MMV_Q6_K,
    CU_K_MMV_Q8_0,
    CU_K_MMV_Q4_0,
    CU_K_MMV_Q5_K,
    CU_K_MMV_GLU_Q4_K, /* the same for two weights at once, their gated product out */
    CU_K_MMV_GLU_Q6_K,
    CU_K_MMV_GLU_Q8_0,
    CU_K_MMV_GLU_Q4_0,
    CU_K_MMV_GLU_Q5_K,
    CU_K_MMV_MIXED, /* CU_K_MMV_* of different types grouped into one launch */
    CU_K_MMVS_Q4_K, /* the streamed form of CU_K_MMV_* (weights staged through shared
                     * memory, blocks striding over the columns), launch-only */
    CU_K_MMVS_Q6_K,
    CU_K_MMVS_Q8_0,
    CU_K_MMVS_Q4_0,
    CU_K_MMVS_Q5_K,
    CU_K_MMVS_GLU_Q4_K,
    CU_K_MMVS_GLU_Q6_K,
    CU_K_MMVS_GLU_Q8_0,
    CU_K_MMVS_GLU_Q4_0,
    CU_K_MMVS_GLU_Q5_K,
    CU_K_COUNT,
    CU_K_CUBLAS /* a launch that is a cuBLAS GEMM (cuda-cublas.c), not a kernel */
} cu_kernel;

#define CU_SLOTS     7 /* operand descriptors: 0..5 inputs, 6 output */
#define CU_OUT_SLOT  6
#define CU_REC_WORDS 256
/* the streamed products' shared memory for their weight stages
 * (kernels/matmul.cu's MMVS_BYTES) */
#define CU_MMVS_BYTES 40960

typedef struct cu_device {
    rlx_device base;
    int index;
    CUdevice dev;
    CUcontext ctx; /* the device's primary context */
    CUstream stream;
    CUfunction fn[CU_K_COUNT];
    char name[256];
    int cc_major, cc_minor, n_sm;
    bool force_f32;     /* no tensor-core (f16) matmul kernel */
    bool no_tq;         /* rlx_mm_tc, not rlx_mm_tq (rlx_device_opts.cuda_convert_a_in_tiles) */
    bool unfused;       /* no launch fusions (rlx_device_opts.cuda_unfused) */
    bool mmv_plain;     /* no streamed products (rlx_device_opts.cuda_plain_matvec) */
    int mmvs_blocks;    /* blocks of the streamed products an SM holds (0: none) */
    int tq_blocks;      /* blocks of rlx_mm_tq an SM holds (at least 1) */
    uint64_t allocated; /* bytes of our live buffers */
    bool lost;
    /* pinned staging for uploads and reads */
    void *stage;
    uint64_t stage_size;
    /* cuBLAS on this open's stream, made at the first GEMM that wants it */
    void *blas;
    bool blas_tried;
} cu_device;

typedef struct cu_buffer {
    rlx_buffer base;
    cu_device *dev;
    CUdeviceptr ptr;
    uint64_t alloc;
} cu_buffer;

extern const rlx_backend_i rlx_cuda_backend;

/* cuda-device.c: make `d` current on this thread; RLX_ERR_DEVICE when lost */
rlx_status cu_enter(cu_device *d, rlx_error **err);
/* a sticky failure (launch fault, lost device): later calls refuse */
void cu_mark_lost(cu_device *d);

/* cuda-cublas.c: cuBLAS for the large F16/F32 matrix products. One GEMM
 * in cuBLAS's column-major terms: C (m x n, ldc) = op(W) (m x k) . X (k x n)
 * with op(W) = W^T when w_trans (W then k x m, ldw) and X k x n (ldx); the
 * types are rlx dtypes (F16, F32), sums in f32. */
typedef struct cu_gemm {
    bool w_trans;
    int m, n, k, ldw, ldx, ldc;
    CUdeviceptr w, x, c;
    int w_dt, x_dt, c_dt;
    float alpha, beta; /* C = alpha op(W).X + beta C */
} cu_gemm;
/* whether cuBLAS can run on `d` (loaded and a handle made on its stream) */
bool cu_blas_ready(cu_device *d);
/* queues the GEMM on d's stream */
CUresult cu_blas_gemm(cu_device *d, const cu_gemm *g);
void cu_blas_close(cu_device *d);
/* For tests: take cuBLAS from `path` (the CPU emulator) instead of
 * libcublas. Only before the first use. */
void cu_blas_use(const char *path);

/* cuda-program.c */
bool cu_supports_op(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins);
rlx_status cu_program_create(rlx_device *dev, const rlx_lir *lir, rlx_program **out,
                             rlx_error **err);
rlx_status cu_program_run(rlx_program *prog, const rlx_program_bindings *b,
                          const rlx_sym_values *syms, rlx_error **err);
void cu_program_free(rlx_program *prog);
void cu_program_set_timing(rlx_program *prog, bool enabled);
rlx_status cu_program_timings(rlx_program *prog, double *ms, int32_t n, rlx_error **err);
void cu_program_stats(const rlx_program *prog, rlx_program_stats *out);

/* The embedded fat binaries (cuda-fatbin.c, generated at build time). */
typedef struct cu_fatbin {
    const char *name; /* "ew" */
    const unsigned char *data;
    uint64_t size;
} cu_fatbin;
extern const cu_fatbin rlx_cuda_fatbins[];
extern const int rlx_cuda_n_fatbins;

/* The architectures a fat binary holds code for: for each entry, its kind
 * (1 PTX, 2 SASS/ELF) and sm version (e.g. 90). Returns the number of
 * entries (at most cap are written), or -1 when the bytes are not a fat
 * binary. For the tests and `rlx info --devices`. */
int cu_fatbin_entries(const unsigned char *data, uint64_t size, int *kind, int *sm, int cap);

#endif
