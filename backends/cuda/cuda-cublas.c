/* cuBLAS, opened with dlopen as the driver is (nothing of CUDA is linked):
 * - the large F16/F32 matrix products of programs (cu_blas_gemm, queued on
 *   the device's stream beside our kernels), where it is much faster than
 *   our tiles;
 * - a yardstick: `rlx bench ops --device cuda:N` times its F16 GEMM (f16
 *   operands, f32 sums) on the shapes our quantized matmul runs, in the
 *   same process and on the same stream. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "backends/base/dtype.h"
#include "backends/cuda/cuda-backend.h"
#include "backends/cuda/cuda-internal.h"

typedef struct blas_api {
    __typeof__(cublasCreate) *create;
    __typeof__(cublasDestroy) *destroy;
    __typeof__(cublasSetStream) *set_stream;
    __typeof__(cublasGemmEx) *gemm_ex;
} blas_api;

static const char *blas_path; /* tests: the emulator's */

static bool blas_load(blas_api *b, char *why, size_t cap)
{
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void *h = NULL;
    if (blas_path)
        h = dlopen(blas_path, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h && !blas_path; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, cap, "cuBLAS is not installed (libcublas.so.13 or .12)");
        return false;
    }
    b->create = (__typeof__(cublasCreate) *)dlsym(h, "cublasCreate_v2");
    b->destroy = (__typeof__(cublasDestroy) *)dlsym(h, "cublasDestroy_v2");
    b->set_stream = (__typeof__(cublasSetStream) *)dlsym(h, "cublasSetStream_v2");
    b->gemm_ex = (__typeof__(cublasGemmEx) *)dlsym(h, "cublasGemmEx");
    if (!b->create || !b->destroy || !b->set_stream || !b->gemm_ex) {
        snprintf(why, cap, "this cuBLAS lacks cublasGemmEx");
        return false;
    }
    return true;
}

void cu_blas_use(const char *path)
{
    blas_path = path;
}

/* the process's table, loaded once */
static blas_api api;
static bool api_ok;
static char api_why[128];
static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static void api_load(void)
{
    api_ok = blas_load(&api, api_why, sizeof api_why);
}

bool cu_blas_ready(cu_device *d)
{
    if (d->blas)
        return true;
    if (d->blas_tried)
        return false;
    d->blas_tried = true;
    pthread_once(&api_once, api_load);
    if (!api_ok)
        return false;
    cublasHandle_t h = NULL;
    if (api.create(&h) != CUBLAS_STATUS_SUCCESS)
        return false;
    if (api.set_stream(h, (cudaStream_t)d->stream) != CUBLAS_STATUS_SUCCESS) {
        api.destroy(h);
        return false;
    }
    d->blas = h;
    return true;
}

static cudaDataType blas_type(int dt)
{
    return dt == RLX_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
}

CUresult cu_blas_gemm(cu_device *d, const cu_gemm *g)
{
    if (!d->blas)
        return CUDA_ERROR_NOT_INITIALIZED;
    float alpha = g->alpha, beta = g->beta;
    cublasStatus_t s =
        api.gemm_ex((cublasHandle_t)d->blas, g->w_trans ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
                    g->m, g->n, g->k, &alpha, (const void *)g->w, blas_type(g->w_dt), g->ldw,
                    (const void *)g->x, blas_type(g->x_dt), g->ldx, &beta, (void *)g->c,
                    blas_type(g->c_dt), g->ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s == CUBLAS_STATUS_SUCCESS)
        return CUDA_SUCCESS;
    return s == CUBLAS_STATUS_ALLOC_FAILED ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_LAUNCH_FAILED;
}

void cu_blas_close(cu_device *d)
{
    if (d->blas && api_ok)
        api.destroy((cublasHandle_t)d->blas);
    d->blas = NULL;
}

rlx_status rlx_cuda_bench_cublas_f16(rlx_device *dev, int64_t M, int64_t N, int64_t K, int repeats,
                                     double *best_ms, rlx_error **err)
{
    cu_device *d = (cu_device *)dev;
    if (!d || d->base.iface != &rlx_cuda_backend || M <= 0 || N <= 0 || K <= 0 || !best_ms)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "cuBLAS bench: bad arguments");
    rlx_status s = cu_enter(d, err);
    if (s != RLX_OK)
        return s;
    if (!cu_blas_ready(d))
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "%s",
                             api_ok ? "cuBLAS could not start on this device" : api_why);
    const cu_api *cu = cu_driver(NULL);
    CUdeviceptr A = 0, B = 0, C = 0;
    size_t na = (size_t)(M * K), nb = (size_t)(N * K);
    uint16_t *host = malloc((na > nb ? na : nb) * 2);
    CUevent e0 = NULL, e1 = NULL;
    CUresult r = host ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS)
        r = cu->cuMemAlloc(&A, na * 2);
    if (r == CUDA_SUCCESS)
        r = cu->cuMemAlloc(&B, nb * 2);
    if (r == CUDA_SUCCESS)
        r = cu->cuMemAlloc(&C, (size_t)(M * N) * 4);
    /* random operands in [-1, 1): never time on zeros */
    uint32_t seed = 12345;
    for (int pass = 0; pass < 2 && r == CUDA_SUCCESS; pass++) {
        size_t n = pass ? nb : na;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            host[i] = rlx_f32_to_f16((float)(seed >> 8) / 8388608.0f - 1.0f);
        }
        r = cu->cuMemcpyHtoDAsync(pass ? B : A, host, n * 2, d->stream);
        if (r == CUDA_SUCCESS)
            r = cu->cuStreamSynchronize(d->stream);
    }
    if (r == CUDA_SUCCESS)
        r = cu->cuEventCreate(&e0, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS)
        r = cu->cuEventCreate(&e1, CU_EVENT_DEFAULT);
    *best_ms = 1e30;
    /* row-major C[M,N] = A[M,K] . B[N,K]^T is column-major C^T = B . A^T,
     * the GEMM a program's matmul queues (cu_blas_gemm) */
    cu_gemm g = {.w_trans = true,
                 .m = (int)N,
                 .n = (int)M,
                 .k = (int)K,
                 .ldw = (int)K,
                 .ldx = (int)K,
                 .ldc = (int)N,
                 .w = B,
                 .x = A,
                 .c = C,
                 .w_dt = RLX_DTYPE_F16,
                 .x_dt = RLX_DTYPE_F16,
                 .c_dt = RLX_DTYPE_F32,
                 .alpha = 1.0f};
    for (int i = 0; i < repeats + 1 && r == CUDA_SUCCESS; i++) {
        r = cu->cuEventRecord(e0, d->stream);
        if (r == CUDA_SUCCESS)
            r = cu_blas_gemm(d, &g);
        if (r == CUDA_SUCCESS)
            r = cu->cuEventRecord(e1, d->stream);
        if (r == CUDA_SUCCESS)
            r = cu->cuEventSynchronize(e1);
        float ms = 0;
        if (r == CUDA_SUCCESS && i > 0 && cu->cuEventElapsedTime(&ms, e0, e1) == CUDA_SUCCESS &&
            ms < *best_ms)
            *best_ms = ms;
    }
    if (e0)
        cu->cuEventDestroy(e0);
    if (e1)
        cu->cuEventDestroy(e1);
    if (A)
        cu->cuMemFree(A);
    if (B)
        cu->cuMemFree(B);
    if (C)
        cu->cuMemFree(C);
    free(host);
    if (r != CUDA_SUCCESS)
        return cu_fail(r, "cuBLAS bench", err);
    return RLX_OK;
}
