// A CPU stand-in for NVIDIA's driver (libcuda.so.1), for tests on machines
// without a GPU: the CUDA backend loads it in place of the driver
// (cu_driver_use), and it runs the backend's own kernels, compiled as C++
// (emu.h), with each block's threads as fibers. Memory is host memory,
// streams run their work when it is queued, graphs record what a captured
// stream was given and replay it. It implements the calls the backend makes
// and nothing more; it proves indexing and arithmetic, not speed or the
// GPU's memory model.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <ucontext.h>
#include <vector>

#include "emu.h"

typedef void (*emu_kernel)(const int *);
extern "C" {
#define K(name) void name(const int *);
K(rlx_ew)
K(rlx_mm_warp)
K(rlx_mm_vec)
K(rlx_q8_act)
K(rlx_mmv_q4_k)
K(rlx_mmv_q6_k)
K(rlx_mmv_q8_0)
K(rlx_mmv_q4_0)
K(rlx_mmv_q5_k)
K(rlx_mmv_glu_q4_k)
K(rlx_mmv_glu_q6_k)
K(rlx_mmv_glu_q8_0)
K(rlx_mmv_glu_q4_0)
K(rlx_mmv_glu_q5_k)
K(rlx_mmv_mixed)
K(rlx_mmvs_q4_k)
K(rlx_mmvs_q6_k)
K(rlx_mmvs_q8_0)
K(rlx_mmvs_q4_0)
K(rlx_mmvs_q5_k)
K(rlx_mmvs_glu_q4_k)
K(rlx_mmvs_glu_q6_k)
K(rlx_mmvs_glu_q8_0)
K(rlx_mmvs_glu_q4_0)
K(rlx_mmvs_glu_q5_k)
K(rlx_mm_tile)
K(rlx_mm_tc)
K(rlx_mm_tc64)
K(rlx_mm_tq)
K(rlx_mm_tq64)
K(rlx_rowop)
K(rlx_rope)
K(rlx_attention)
K(rlx_attention_wide)
K(rlx_attention_rows)
K(rlx_conv)
K(rlx_spatial)
K(rlx_gather)
K(rlx_q8_append)
#undef K
}
static const struct {
    const char *name;
    emu_kernel fn;
} kernels[] = {
    {"rlx_ew", rlx_ew},
    {"rlx_mm_warp", rlx_mm_warp},
    {"rlx_mm_vec", rlx_mm_vec},
    {"rlx_q8_act", rlx_q8_act},
    {"rlx_mmv_q4_k", rlx_mmv_q4_k},
    {"rlx_mmv_q6_k", rlx_mmv_q6_k},
    {"rlx_mmv_q8_0", rlx_mmv_q8_0},
    {"rlx_mmv_q4_0", rlx_mmv_q4_0},
    {"rlx_mmv_q5_k", rlx_mmv_q5_k},
    {"rlx_mmv_glu_q4_k", rlx_mmv_glu_q4_k},
    {"rlx_mmv_glu_q6_k", rlx_mmv_glu_q6_k},
    {"rlx_mmv_glu_q8_0", rlx_mmv_glu_q8_0},
    {"rlx_mmv_glu_q4_0", rlx_mmv_glu_q4_0},
    {"rlx_mmv_glu_q5_k", rlx_mmv_glu_q5_k},
    {"rlx_mmv_mixed", rlx_mmv_mixed},
    {"rlx_mmvs_q4_k", rlx_mmvs_q4_k},
    {"rlx_mmvs_q6_k", rlx_mmvs_q6_k},
    {"rlx_mmvs_q8_0", rlx_mmvs_q8_0},
    {"rlx_mmvs_q4_0", rlx_mmvs_q4_0},
    {"rlx_mmvs_q5_k", rlx_mmvs_q5_k},
    {"rlx_mmvs_glu_q4_k", rlx_mmvs_glu_q4_k},
    {"rlx_mmvs_glu_q6_k", rlx_mmvs_glu_q6_k},
    {"rlx_mmvs_glu_q8_0", rlx_mmvs_glu_q8_0},
    {"rlx_mmvs_glu_q4_0", rlx_mmvs_glu_q4_0},
    {"rlx_mmvs_glu_q5_k", rlx_mmvs_glu_q5_k},
    {"rlx_mm_tile", rlx_mm_tile},
    {"rlx_mm_tc", rlx_mm_tc},
    {"rlx_mm_tc64", rlx_mm_tc64},
    {"rlx_mm_tq", rlx_mm_tq},
    {"rlx_mm_tq64", rlx_mm_tq64},
    {"rlx_rowop", rlx_rowop},
    {"rlx_rope", rlx_rope},
    {"rlx_attention", rlx_attention},
    {"rlx_attention_wide", rlx_attention_wide},
    {"rlx_attention_rows", rlx_attention_rows},
    {"rlx_conv", rlx_conv},
    {"rlx_spatial", rlx_spatial},
    {"rlx_gather", rlx_gather},
    {"rlx_q8_append", rlx_q8_append},
};

/* ---- fibers ---------------------------------------------------------------- */

extern "C" {
emu_dim3 emu_threadIdx, emu_blockIdx, emu_blockDim, emu_gridDim;
}

enum { RUN, WAIT_BLOCK, WAIT_WARP, DONE };
struct fiber {
    ucontext_t ctx;
    int state;
    unsigned tid;
};
static ucontext_t sched_ctx;
static std::vector<fiber> fibers;
/* the fibers' stacks, kept from launch to launch and freed at exit */
static struct stack_pool {
    std::vector<char *> v;
    ~stack_pool()
    {
        for (char *p : v)
            free(p);
    }
} stack_pool;
static std::vector<char *> &stacks = stack_pool.v;
static fiber *cur;
static emu_kernel cur_kernel;
static const int *cur_rec;
static float warp_slot[32][32];
static const size_t STACK = 256 * 1024;

static void trampoline()
{
    cur_kernel(cur_rec);
    cur->state = DONE;
    swapcontext(&cur->ctx, &sched_ctx);
}

static void enter(fiber *f)
{
    cur = f;
    emu_threadIdx = {f->tid, 0, 0};
    swapcontext(&sched_ctx, &f->ctx);
}

extern "C" void emu_sync_block(void)
{
    cur->state = WAIT_BLOCK;
    swapcontext(&cur->ctx, &sched_ctx);
}
extern "C" void emu_sync_warp(void)
{
    cur->state = WAIT_WARP;
    swapcontext(&cur->ctx, &sched_ctx);
}
extern "C" float *emu_warp_slots(void)
{
    return warp_slot[cur->tid / 32];
}

static void run_block(unsigned nthreads)
{
    if (stacks.size() < nthreads) {
        while (stacks.size() < nthreads)
            stacks.push_back((char *)malloc(STACK));
    }
    fibers.assign(nthreads, fiber());
    for (unsigned t = 0; t < nthreads; t++) {
        fiber *f = &fibers[t];
        f->tid = t;
        f->state = RUN;
        getcontext(&f->ctx);
        f->ctx.uc_stack.ss_sp = stacks[t];
        f->ctx.uc_stack.ss_size = STACK;
        f->ctx.uc_link = &sched_ctx;
        makecontext(&f->ctx, trampoline, 0);
    }
    for (;;) {
        for (unsigned t = 0; t < nthreads; t++)
            while (fibers[t].state == RUN)
                enter(&fibers[t]);
        bool all_done = true, released = false;
        for (unsigned t = 0; t < nthreads; t++)
            all_done = all_done && fibers[t].state == DONE;
        if (all_done)
            break;
        /* a warp passes its barrier when every live thread of it waits there */
        for (unsigned w = 0; w * 32 < nthreads; w++) {
            bool ready = true, any = false;
            for (unsigned t = w * 32; t < nthreads && t < w * 32 + 32; t++) {
                if (fibers[t].state == DONE)
                    continue;
                any = true;
                ready = ready && fibers[t].state == WAIT_WARP;
            }
            if (any && ready) {
                for (unsigned t = w * 32; t < nthreads && t < w * 32 + 32; t++)
                    if (fibers[t].state == WAIT_WARP)
                        fibers[t].state = RUN;
                released = true;
            }
        }
        if (!released) {
            bool ready = true;
            for (unsigned t = 0; t < nthreads; t++)
                if (fibers[t].state != DONE && fibers[t].state != WAIT_BLOCK)
                    ready = false;
            if (ready) {
                for (unsigned t = 0; t < nthreads; t++)
                    if (fibers[t].state == WAIT_BLOCK)
                        fibers[t].state = RUN;
                released = true;
            }
        }
        if (!released) {
            fprintf(stderr, "cuda-emu: the threads of a block wait at different barriers\n");
            abort();
        }
    }
}

static void launch(emu_kernel k, const int *rec, unsigned gx, unsigned gy, unsigned gz, unsigned bx)
{
    cur_kernel = k;
    cur_rec = rec;
    emu_blockDim = {bx, 1, 1};
    emu_gridDim = {gx, gy, gz};
    /* a GPU promises no order among a grid's blocks: they run last to
     * first here, so that a kernel (or a group of launches made one) that
     * counts on block 0 going first fails here too */
    for (unsigned z = gz; z-- > 0;)
        for (unsigned y = gy; y-- > 0;)
            for (unsigned x = gx; x-- > 0;) {
                emu_blockIdx = {x, y, z};
                run_block(bx);
            }
}

/* ---- the driver API ------------------------------------------------------------- */

struct emu_stream {
    bool capturing = false;
    std::vector<std::function<void()>> *graph = nullptr;
};
struct emu_graph {
    std::vector<std::function<void()>> ops;
};
struct emu_event {
    double t = 0;
};
static emu_stream null_stream;
static emu_stream *S(CUstream s)
{
    return s ? (emu_stream *)s : &null_stream;
}
static void submit(CUstream s, std::function<void()> op)
{
    emu_stream *st = S(s);
    if (st->capturing)
        st->graph->push_back(op);
    else
        op();
}
static double now()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static const uint64_t TOTAL = 8ull << 30;
static uint64_t in_use;
/* a fault to report at the next synchronize (emu_fail_next_launch) */
static bool fail_next, failed;

extern "C" {
CUresult cuInit(unsigned int)
{
    return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY   ? "out of memory"
         : r == CUDA_ERROR_LAUNCH_FAILED ? "unspecified launch failure"
                                         : "emulated CUDA error";
    return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY   ? "CUDA_ERROR_OUT_OF_MEMORY"
         : r == CUDA_ERROR_LAUNCH_FAILED ? "CUDA_ERROR_LAUNCH_FAILED"
                                         : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int *n)
{
    *n = 1;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice *d, int i)
{
    if (i != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice)
{
    snprintf(name, (size_t)len, "RLX CUDA emulator (CPU)");
    return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem(size_t *b, CUdevice)
{
    *b = TOTAL;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *v = 9;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *v = 4;
        break;
    default:
        *v = 0;
    }
    return CUDA_SUCCESS;
}
static int ctx_token;
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice)
{
    *c = (CUcontext)&ctx_token;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice)
{
    failed = false;
    return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext)
{
    return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize(void)
{
    return CUDA_SUCCESS;
}
static int module_token;
CUresult cuModuleLoadData(CUmodule *m, const void *)
{
    *m = (CUmodule)&module_token;
    return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule)
{
    return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *f, CUmodule, const char *name)
{
    for (auto &k : kernels)
        if (!strcmp(k.name, name)) {
            *f = (CUfunction)(void *)k.fn;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}
CUresult cuFuncSetAttribute(CUfunction, CUfunction_attribute, int)
{
    return CUDA_SUCCESS;
}
/* blocks an SM holds (asked for the streamed products and rlx_mm_tq): 2,
 * as an RTX 30 or 40 holds of them, so that with 4 SMs products of more
 * than 8 column tiles take the streamed form in the tests */
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction, int, size_t)
{
    *n = 2;
    return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr *p, size_t n)
{
    if (n > TOTAL - in_use)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *q = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!q)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* device memory holds garbage until written */
    memset(q, 0xA5, (n + 255) / 256 * 256);
    *p = (CUdeviceptr)(uintptr_t)q;
    return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr p)
{
    free((void *)(uintptr_t)p);
    return CUDA_SUCCESS;
}
CUresult cuMemAllocHost(void **p, size_t n)
{
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void *p)
{
    free(p);
    return CUDA_SUCCESS;
}
CUresult cuMemGetInfo(size_t *f, size_t *t)
{
    *f = TOTAL - in_use;
    *t = TOTAL;
    return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
    submit(st, [=] { memcpy((void *)(uintptr_t)d, s, n); });
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync(void *d, CUdeviceptr s, size_t n, CUstream st)
{
    submit(st, [=] { memcpy(d, (const void *)(uintptr_t)s, n); });
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st)
{
    submit(st, [=] { memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n); });
    return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st)
{
    submit(st, [=] { memset((void *)(uintptr_t)d, v, n); });
    return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned, CUstream st, void **params, void **)
{
    if (by != 1 || bz != 1 || bx == 0 || bx > 1024 || !params)
        return CUDA_ERROR_INVALID_VALUE;
    emu_kernel k = (emu_kernel)(void *)f;
    const int *rec = (const int *)(uintptr_t) * (CUdeviceptr *)params[0];
    if (fail_next) { /* as a kernel that faults: the context is unusable from here */
        fail_next = false;
        failed = true;
        return CUDA_SUCCESS;
    }
    submit(st, [=] { launch(k, rec, gx, gy, gz, bx); });
    return CUDA_SUCCESS;
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    return cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                          c->blockDimZ, c->sharedMemBytes, c->hStream, params, extra);
}
CUresult cuStreamCreate(CUstream *s, unsigned int)
{
    *s = (CUstream) new emu_stream();
    return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream s)
{
    delete (emu_stream *)s;
    return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s)
{
    if (failed)
        return CUDA_ERROR_LAUNCH_FAILED;
    return S(s)->capturing ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* For tests: the next kernel launch faults, as an illegal address would on a
 * GPU; every later synchronize reports it until the context is released
 * (cuDevicePrimaryCtxRelease), as the driver does. */
void emu_fail_next_launch(void)
{
    fail_next = true;
}
CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode)
{
    emu_stream *st = S(s);
    if (st->capturing)
        return CUDA_ERROR_ILLEGAL_STATE;
    st->capturing = true;
    st->graph = new std::vector<std::function<void()>>();
    return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
    emu_stream *st = S(s);
    if (!st->capturing)
        return CUDA_ERROR_ILLEGAL_STATE;
    emu_graph *eg = new emu_graph();
    eg->ops = std::move(*st->graph);
    delete st->graph;
    st->graph = nullptr;
    st->capturing = false;
    *g = (CUgraph)eg;
    return CUDA_SUCCESS;
}
CUresult cuGraphInstantiate(CUgraphExec *e, CUgraph g, unsigned long long)
{
    *e = (CUgraphExec) new emu_graph(*(emu_graph *)g);
    return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(CUgraphExec e, CUstream st)
{
    emu_graph *g = (emu_graph *)e;
    for (auto &op : g->ops)
        submit(st, op);
    return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec e)
{
    delete (emu_graph *)e;
    return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph g)
{
    delete (emu_graph *)g;
    return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent *e, unsigned int)
{
    *e = (CUevent) new emu_event();
    return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent e)
{
    delete (emu_event *)e;
    return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream st)
{
    emu_event *ev = (emu_event *)e;
    submit(st, [=] { ev->t = now(); });
    return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent)
{
    return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    *ms = (float)((((emu_event *)b)->t - ((emu_event *)a)->t) * 1e3);
    return CUDA_SUCCESS;
}
}

/* ---- cuBLAS: the one GEMM the backend calls, in float64 on the CPU ------------ */

#include "cuda_fp16.h"

struct emu_blas {
    CUstream stream;
};

extern "C" {
/* the values of cublas_api.h / library_types.h this stand-in reads */
enum { EMU_OP_N = 0, EMU_OP_T = 1, EMU_R_32F = 0, EMU_R_16F = 2, EMU_COMPUTE_32F = 68 };

int cublasCreate_v2(void **h)
{
    *h = new emu_blas{nullptr};
    return 0;
}
int cublasDestroy_v2(void *h)
{
    delete (emu_blas *)h;
    return 0;
}
int cublasSetStream_v2(void *h, void *s)
{
    ((emu_blas *)h)->stream = (CUstream)s;
    return 0;
}
static double emu_ld(const void *p, int type, int64_t i)
{
    if (type == EMU_R_16F) {
        __half h;
        memcpy(&h.bits, (const uint8_t *)p + 2 * i, 2);
        return __half2float(h);
    }
    float f;
    memcpy(&f, (const uint8_t *)p + 4 * i, 4);
    return f;
}
/* column-major C (m x n) = alpha op(A) (m x k) . op(B) (k x n) + beta C */
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                 int at, int lda, const void *B, int bt, int ldb, const void *beta, void *C, int ct,
                 int ldc, int compute, int algo)
{
    (void)algo;
    if (compute != EMU_COMPUTE_32F || m < 0 || n < 0 || k < 0)
        return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    float al = *(const float *)alpha, be = *(const float *)beta;
    submit(((emu_blas *)h)->stream, [=] {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0;
                for (int l = 0; l < k; l++) {
                    int64_t ai = ta == EMU_OP_N ? i + (int64_t)l * lda : l + (int64_t)i * lda;
                    int64_t bi = tb == EMU_OP_N ? l + (int64_t)j * ldb : j + (int64_t)l * ldb;
                    s += emu_ld(A, at, ai) * emu_ld(B, bt, bi);
                }
                int64_t ci = i + (int64_t)j * ldc;
                double v = al * s + (be != 0.0f ? be * emu_ld(C, ct, ci) : 0.0);
                if (ct == EMU_R_16F) {
                    __half o = __float2half_rn((float)v);
                    memcpy((uint8_t *)C + 2 * ci, &o.bits, 2);
                } else {
                    float f = (float)v;
                    memcpy((uint8_t *)C + 4 * ci, &f, 4);
                }
            }
    });
    return 0;
}
}
