/* cuBLAS as a yardstick: `rlx bench ops --device cuda:N` times its F16
 * GEMM (f16 operands, f32 sums) on the shapes our quantized matmul runs, in
 * the same process and on the same stream. Opened with dlopen, as the
 * driver is: nothing of CUDA is linked. */
#include <dlfcn.h>
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

static bool blas_load(blas_api *b, char *why, size_t cap)
{
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
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

rlx_status rlx_cuda_bench_cublas_f16(rlx_device *dev, int64_t M, int64_t N, int64_t K, int repeats,
                                     double *best_ms, rlx_error **err)
{
    cu_device *d = (cu_device *)dev;
    if (!d || d->base.iface != &rlx_cuda_backend || M <= 0 || N <= 0 || K <= 0 || !best_ms)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "cuBLAS bench: bad arguments");
    rlx_status s = cu_enter(d, err);
    if (s != RLX_OK)
        return s;
    char why[128];
    blas_api b;
    if (!blas_load(&b, why, sizeof why))
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "%s", why);
    const cu_api *cu = cu_driver(NULL);
    CUdeviceptr A = 0, B = 0, C = 0;
    size_t na = (size_t)(M * K), nb = (size_t)(N * K);
    uint16_t *host = malloc((na > nb ? na : nb) * 2);
    CUevent e0 = NULL, e1 = NULL;
    cublasHandle_t h = NULL;
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
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    if (r == CUDA_SUCCESS) {
        bs = b.create(&h);
        if (bs == CUBLAS_STATUS_SUCCESS)
            bs = b.set_stream(h, (cudaStream_t)d->stream);
    }
    float alpha = 1.0f, beta = 0.0f;
    *best_ms = 1e30;
    /* row-major C[M,N] = A[M,K] . B[N,K]^T is column-major C^T = B . A^T */
    for (int i = 0; i < repeats + 1 && r == CUDA_SUCCESS && bs == CUBLAS_STATUS_SUCCESS; i++) {
        r = cu->cuEventRecord(e0, d->stream);
        if (r == CUDA_SUCCESS)
            bs = b.gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha,
                           (const void *)B, CUDA_R_16F, (int)K, (const void *)A, CUDA_R_16F, (int)K,
                           &beta, (void *)C, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT);
        if (r == CUDA_SUCCESS)
            r = cu->cuEventRecord(e1, d->stream);
        if (r == CUDA_SUCCESS)
            r = cu->cuEventSynchronize(e1);
        float ms = 0;
        if (r == CUDA_SUCCESS && i > 0 && cu->cuEventElapsedTime(&ms, e0, e1) == CUDA_SUCCESS &&
            ms < *best_ms)
            *best_ms = ms;
    }
    if (h)
        b.destroy(h);
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
    if (bs != CUBLAS_STATUS_SUCCESS)
        return rlx_error_set(err, RLX_ERR_DEVICE, "cublasGemmEx failed (status %d)", (int)bs);
    return RLX_OK;
}
