/* CUDA devices and buffers.
 *
 * Each device's primary context is retained once per process and shared by
 * every open of it, with the kernels loaded into it from the embedded fat
 * binaries. An open has its own stream and pinned staging buffer. A fault
 * that poisons the context (an illegal address, a launch failure) marks it
 * lost: every open of it then refuses work, and the first open after that
 * resets the context, so a fresh session works again. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-backend.h"
#include "backends/cuda/cuda-internal.h"

#define MAX_DEVICES  16
#define STAGE_BYTES  (32ull << 20) /* two halves: fill one while the other copies */
#define STAGE_HALVES 2

static const char *const kernel_names[CU_K_COUNT] = {
    [CU_K_EW] = "rlx_ew",
    [CU_K_MM_WARP] = "rlx_mm_warp",
    [CU_K_MM_VEC] = "rlx_mm_vec",
    [CU_K_MM_TILE] = "rlx_mm_tile",
    [CU_K_MM_TC] = "rlx_mm_tc",
    [CU_K_MM_TC64] = "rlx_mm_tc64",
    [CU_K_MM_TQ] = "rlx_mm_tq",
    [CU_K_MM_TQ64] = "rlx_mm_tq64",
    [CU_K_ROWOP] = "rlx_rowop",
    [CU_K_ROPE] = "rlx_rope",
    [CU_K_ATTN] = "rlx_attention",
    [CU_K_ATTN_WIDE] = "rlx_attention_wide",
    [CU_K_ATTN_ROWS] = "rlx_attention_rows",
    [CU_K_CONV] = "rlx_conv",
    [CU_K_SPATIAL] = "rlx_spatial",
    [CU_K_GATHER] = "rlx_gather",
    [CU_K_Q8_APPEND] = "rlx_q8_append",
    [CU_K_Q8_ACT] = "rlx_q8_act",
    [CU_K_MMV_Q4_K] = "rlx_mmv_q4_k",
    [CU_K_MMV_Q6_K] = "rlx_mmv_q6_k",
    [CU_K_MMV_Q8_0] = "rlx_mmv_q8_0",
    [CU_K_MMV_Q4_0] = "rlx_mmv_q4_0",
    [CU_K_MMV_Q5_K] = "rlx_mmv_q5_k",
    [CU_K_MMV_GLU_Q4_K] = "rlx_mmv_glu_q4_k",
    [CU_K_MMV_GLU_Q6_K] = "rlx_mmv_glu_q6_k",
    [CU_K_MMV_GLU_Q8_0] = "rlx_mmv_glu_q8_0",
    [CU_K_MMV_GLU_Q4_0] = "rlx_mmv_glu_q4_0",
    [CU_K_MMV_GLU_Q5_K] = "rlx_mmv_glu_q5_k",
    [CU_K_MMV_MIXED] = "rlx_mmv_mixed",
    [CU_K_MMVS_Q4_K] = "rlx_mmvs_q4_k",
    [CU_K_MMVS_Q6_K] = "rlx_mmvs_q6_k",
    [CU_K_MMVS_Q8_0] = "rlx_mmvs_q8_0",
    [CU_K_MMVS_Q4_0] = "rlx_mmvs_q4_0",
    [CU_K_MMVS_Q5_K] = "rlx_mmvs_q5_k",
    [CU_K_MMVS_GLU_Q4_K] = "rlx_mmvs_glu_q4_k",
    [CU_K_MMVS_GLU_Q6_K] = "rlx_mmvs_glu_q6_k",
    [CU_K_MMVS_GLU_Q8_0] = "rlx_mmvs_glu_q8_0",
    [CU_K_MMVS_GLU_Q4_0] = "rlx_mmvs_glu_q4_0",
    [CU_K_MMVS_GLU_Q5_K] = "rlx_mmvs_glu_q5_k",
};

/* per physical device, shared by its opens */
typedef struct shared_dev {
    bool ready;
    CUdevice dev;
    CUcontext ctx;
    CUmodule *mods;
    CUfunction fn[CU_K_COUNT];
    uint32_t gen; /* bumped when the context is found poisoned */
    bool poisoned;
    int mmvs_blocks; /* the streamed products' blocks an SM holds (the fewest of them) */
    int tq_blocks;   /* rlx_mm_tq's blocks an SM holds (rlx_mm_tq64's as many or more) */
    int opens;
} shared_dev;

static shared_dev shared[MAX_DEVICES];
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;

static int cu_device_count(void)
{
    const cu_api *cu = cu_driver(NULL);
    if (!cu)
        return 0;
    int n = 0;
    if (cu->cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return 0;
    return n > MAX_DEVICES ? MAX_DEVICES : n;
}

static void unload(const cu_api *cu, shared_dev *s)
{
    if (s->mods) {
        for (int i = 0; i < rlx_cuda_n_fatbins; i++)
            if (s->mods[i])
                cu->cuModuleUnload(s->mods[i]);
        free(s->mods);
        s->mods = NULL;
    }
    memset(s->fn, 0, sizeof s->fn);
}

/* Retain the context and load the kernels (under shared_lock). */
static rlx_status shared_init(int index, rlx_error **err)
{
    const cu_api *cu = cu_driver(NULL);
    shared_dev *s = &shared[index];
    if (s->ready && !s->poisoned)
        return RLX_OK;
    if (s->ready && s->poisoned) {
        if (s->opens > 0)
            return rlx_error_set(err, RLX_ERR_DEVICE,
                                 "the CUDA device cuda:%d failed earlier and is still open "
                                 "elsewhere; close it everywhere to reset it",
                                 index);
        /* nothing of ours lives in it any more: start afresh */
        cu->cuCtxSetCurrent(s->ctx);
        unload(cu, s);
        cu->cuDevicePrimaryCtxRelease(s->dev);
        s->ready = false;
        s->poisoned = false;
        s->gen++;
    }
    CUresult r = cu->cuDeviceGet(&s->dev, index);
    if (r != CUDA_SUCCESS)
        return cu_fail(r, "opening the CUDA device", err);
    r = cu->cuDevicePrimaryCtxRetain(&s->ctx, s->dev);
    if (r != CUDA_SUCCESS)
        return cu_fail(r, "creating a CUDA context", err);
    r = cu->cuCtxSetCurrent(s->ctx);
    if (r != CUDA_SUCCESS) {
        cu->cuDevicePrimaryCtxRelease(s->dev);
        return cu_fail(r, "using the CUDA context", err);
    }
    s->mods = calloc((size_t)rlx_cuda_n_fatbins, sizeof *s->mods);
    if (!s->mods) {
        cu->cuDevicePrimaryCtxRelease(s->dev);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory loading CUDA kernels");
    }
    for (int i = 0; i < rlx_cuda_n_fatbins; i++) {
        r = cu->cuModuleLoadData(&s->mods[i], rlx_cuda_fatbins[i].data);
        if (r != CUDA_SUCCESS) {
            int maj = 0, min = 0;
            cu->cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s->dev);
            cu->cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s->dev);
            unload(cu, s);
            cu->cuDevicePrimaryCtxRelease(s->dev);
            rlx_status st = cu_fail(r, "loading the CUDA kernels", err);
            rlx_error_prefix(err,
                             "this build's kernels do not run on cuda:%d (compute capability "
                             "%d.%d): ",
                             index, maj, min);
            return st;
        }
    }
    for (int k = 0; k < CU_K_COUNT; k++) {
        for (int i = 0; i < rlx_cuda_n_fatbins && !s->fn[k]; i++) {
            CUfunction f = NULL;
            if (cu->cuModuleGetFunction(&f, s->mods[i], kernel_names[k]) == CUDA_SUCCESS)
                s->fn[k] = f;
        }
        if (!s->fn[k]) {
            unload(cu, s);
            cu->cuDevicePrimaryCtxRelease(s->dev);
            return rlx_error_set(err, RLX_ERR_INTERNAL, "the CUDA kernel %s is missing",
                                 kernel_names[k]);
        }
    }
    /* a grid of the streamed products is what the SMs hold at once: more
     * blocks would wait for whole ones to finish (their shared memory
     * decides it: 5 an SM on Hopper, 2 on an RTX 30 or 40). They ask for
     * the most shared memory an SM can give (their weights pass through
     * it, not L1), so the figure is the one they run with. */
    s->mmvs_blocks = 0;
    for (int k = CU_K_MMVS_Q4_K; k <= CU_K_MMVS_GLU_Q5_K; k++) {
        int nb = 0;
        cu->cuFuncSetAttribute(s->fn[k], CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                               CU_SHAREDMEM_CARVEOUT_MAX_SHARED);
        if (cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, s->fn[k], 128, 0) != CUDA_SUCCESS)
            nb = 0;
        s->mmvs_blocks = k == CU_K_MMVS_Q4_K || nb < s->mmvs_blocks ? nb : s->mmvs_blocks;
    }
    /* two on most GPUs (128 registers a thread, 42 KB of shared memory),
     * one on a Turing (64 KB of shared memory an SM) */
    if (cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&s->tq_blocks, s->fn[CU_K_MM_TQ], 256, 0) !=
            CUDA_SUCCESS ||
        s->tq_blocks < 1)
        s->tq_blocks = 1;
    s->ready = true;
    return RLX_OK;
}

static void fill_info(int index, rlx_device_info *out)
{
    const cu_api *cu = cu_driver(NULL);
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "cuda");
    out->index = index;
    snprintf(out->id, sizeof out->id, "cuda:%d", index);
    CUdevice dev;
    if (cu->cuDeviceGet(&dev, index) != CUDA_SUCCESS)
        return;
    char name[256] = "";
    cu->cuDeviceGetName(name, sizeof name, dev);
    snprintf(out->name, sizeof out->name, "%s", name);
    int integrated = 0, maj = 0, min = 0, sms = 0;
    cu->cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, dev);
    cu->cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cu->cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    out->type = integrated ? RLX_DEVICE_GPU_INTEGRATED : RLX_DEVICE_GPU_DISCRETE;
    size_t total = 0;
    cu->cuDeviceTotalMem(&total, dev);
    out->total_memory = total;
    out->free_memory = total;
    /* free memory needs a context: the shared one, when it is up */
    pthread_mutex_lock(&shared_lock);
    shared_dev *s = &shared[index];
    if (s->ready && !s->poisoned && cu->cuCtxSetCurrent(s->ctx) == CUDA_SUCCESS) {
        size_t f = 0, t = 0;
        if (cu->cuMemGetInfo(&f, &t) == CUDA_SUCCESS)
            out->free_memory = f;
    }
    pthread_mutex_unlock(&shared_lock);
    int ver = 0;
    cu->cuDriverGetVersion(&ver);
    snprintf(out->features, sizeof out->features, "compute %d.%d, %d SMs, driver CUDA %d.%d%s", maj,
             min, sms, ver / 1000, ver % 1000 / 10, maj >= 7 ? ", tensor cores" : "");
}

static rlx_status cu_device_info(int index, rlx_device_info *out, rlx_error **err)
{
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "device_info: no output given");
    const char *why = NULL;
    if (!cu_driver(&why))
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no CUDA device: %s", why);
    int n = cu_device_count();
    if (index < 0 || index >= n)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no CUDA device %d: %d found", index, n);
    fill_info(index, out);
    return RLX_OK;
}

rlx_status cu_enter(cu_device *d, rlx_error **err)
{
    const cu_api *cu = cu_driver(NULL);
    shared_dev *s = &shared[d->index];
    if (d->lost || s->poisoned)
        return rlx_error_set(err, RLX_ERR_DEVICE,
                             "the CUDA device %s failed earlier (a kernel fault or a lost "
                             "device); close and reopen it",
                             d->name);
    CUresult r = cu->cuCtxSetCurrent(d->ctx);
    if (r != CUDA_SUCCESS)
        return cu_fail(r, "using the CUDA context", err);
    return RLX_OK;
}

void cu_mark_lost(cu_device *d)
{
    d->lost = true;
    pthread_mutex_lock(&shared_lock);
    shared[d->index].poisoned = true;
    pthread_mutex_unlock(&shared_lock);
}

static void cu_device_close(rlx_device *dev)
{
    cu_device *d = (cu_device *)dev;
    if (!d)
        return;
    const cu_api *cu = cu_driver(NULL);
    cu->cuCtxSetCurrent(d->ctx);
    if (d->stream)
        cu->cuStreamSynchronize(d->stream);
    cu_blas_close(d);
    if (d->stream)
        cu->cuStreamDestroy(d->stream);
    if (d->stage)
        cu->cuMemFreeHost(d->stage);
    pthread_mutex_lock(&shared_lock);
    shared[d->index].opens--;
    pthread_mutex_unlock(&shared_lock);
    free(d);
}

static rlx_status cu_device_open(int index, const rlx_device_opts *opts, rlx_device **out,
                                 rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "device_open: no output given");
    const char *why = NULL;
    const cu_api *cu = cu_driver(&why);
    if (!cu)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no CUDA device: %s", why);
    int n = cu_device_count();
    if (index < 0 || index >= n)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no CUDA device cuda:%d: this machine has %d",
                             index, n);
    pthread_mutex_lock(&shared_lock);
    rlx_status s = shared_init(index, err);
    if (s == RLX_OK)
        shared[index].opens++;
    pthread_mutex_unlock(&shared_lock);
    if (s != RLX_OK)
        return s;
    cu_device *d = calloc(1, sizeof *d);
    if (!d) {
        pthread_mutex_lock(&shared_lock);
        shared[index].opens--;
        pthread_mutex_unlock(&shared_lock);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory opening a device");
    }
    d->base.iface = &rlx_cuda_backend;
    d->index = index;
    d->dev = shared[index].dev;
    d->ctx = shared[index].ctx;
    memcpy(d->fn, shared[index].fn, sizeof d->fn);
    d->force_f32 = opts && opts->force_f32;
    d->no_tq = opts && opts->cuda_convert_a_in_tiles;
    d->unfused = opts && opts->cuda_unfused;
    d->mmv_plain = opts && opts->cuda_plain_matvec;
    d->mmvs_blocks = shared[index].mmvs_blocks;
    d->tq_blocks = shared[index].tq_blocks;
    cu->cuDeviceGetName(d->name, sizeof d->name, d->dev);
    cu->cuDeviceGetAttribute(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev);
    cu->cuDeviceGetAttribute(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev);
    cu->cuDeviceGetAttribute(&d->n_sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev);
    CUresult r = cu->cuCtxSetCurrent(d->ctx);
    if (r == CUDA_SUCCESS)
        r = cu->cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        s = cu_fail(r, "opening the CUDA device", err);
        cu_device_close(&d->base);
        return s;
    }
    *out = &d->base;
    return RLX_OK;
}

static rlx_status cu_device_query(rlx_device *dev, rlx_device_info *out, rlx_error **err)
{
    cu_device *d = (cu_device *)dev;
    if (!d || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "device_query: missing argument");
    fill_info(d->index, out);
    if (d->force_f32) { /* this open's choice, as Vulkan says it */
        size_t n = strlen(out->features);
        snprintf(out->features + n, sizeof out->features - n, ", f32 kernels");
    }
    return RLX_OK;
}

/* ---- buffers --------------------------------------------------------------- */

/* The pinned staging buffer, made at the first large transfer (an open
 * that only runs small programs never pays for it); NULL when pinned memory
 * is refused, and transfers then go unstaged (slower). */
static void *stage(cu_device *d, uint64_t n)
{
    if (d->stage || n < (1u << 20))
        return d->stage;
    const cu_api *cu = cu_driver(NULL);
    if (cu->cuMemAllocHost(&d->stage, STAGE_BYTES) == CUDA_SUCCESS)
        d->stage_size = STAGE_BYTES;
    else
        d->stage = NULL;
    return d->stage;
}

/* A failure that may have poisoned the context marks the device lost. */
static rlx_status sync_check(cu_device *d, CUresult r, const char *what, rlx_error **err)
{
    const cu_api *cu = cu_driver(NULL);
    if (r == CUDA_SUCCESS)
        r = cu->cuStreamSynchronize(d->stream);
    if (r == CUDA_SUCCESS)
        return RLX_OK;
    if (r != CUDA_ERROR_OUT_OF_MEMORY && r != CUDA_ERROR_INVALID_VALUE)
        cu_mark_lost(d);
    return cu_fail(r, what, err);
}

static rlx_status cu_buffer_alloc(rlx_device *dev, uint64_t size, rlx_buffer **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!dev || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "buffer_alloc: no device or output");
    cu_device *d = (cu_device *)dev;
    rlx_status s = cu_enter(d, err);
    if (s != RLX_OK)
        return s;
    const cu_api *cu = cu_driver(NULL);
    uint64_t alloc = size < 256 ? 256 : (size + 255) / 256 * 256;
    if (size > UINT64_MAX - 256)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "a buffer of %llu bytes is too large",
                             (unsigned long long)size);
    cu_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory allocating a buffer");
    CUresult r = cu->cuMemAlloc(&b->ptr, (size_t)alloc);
    if (r != CUDA_SUCCESS) {
        free(b);
        size_t f = 0, t = 0;
        cu->cuMemGetInfo(&f, &t);
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY,
                                 "a %.1f MiB buffer does not fit the CUDA device %s (%.1f MiB "
                                 "free of %.1f MiB)",
                                 (double)size / 1048576.0, d->name, (double)f / 1048576.0,
                                 (double)t / 1048576.0);
        return cu_fail(r, "allocating CUDA memory", err);
    }
    /* the CPU backend's buffers start zeroed; so do ours */
    r = cu->cuMemsetD8Async(b->ptr, 0, (size_t)alloc, d->stream);
    s = sync_check(d, r, "clearing a CUDA buffer", err);
    if (s != RLX_OK) {
        cu->cuMemFree(b->ptr);
        free(b);
        return s;
    }
    b->base.iface = &rlx_cuda_backend;
    b->base.size = size;
    b->base.host_ptr = NULL;
    b->dev = d;
    b->alloc = alloc;
    d->allocated += alloc;
    *out = &b->base;
    return RLX_OK;
}

static rlx_status check_range(const rlx_buffer *buf, uint64_t offset, uint64_t size,
                              const char *what, rlx_error **err)
{
    if (!buf)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s: no buffer", what);
    if (offset > buf->size || size > buf->size - offset)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "%s of %llu bytes at %llu is past the buffer's %llu bytes", what,
                             (unsigned long long)size, (unsigned long long)offset,
                             (unsigned long long)buf->size);
    return RLX_OK;
}

static rlx_status cu_buffer_write(rlx_buffer *buf, uint64_t offset, const void *src, uint64_t size,
                                  rlx_error **err)
{
    rlx_status s = check_range(buf, offset, size, "buffer write", err);
    if (s != RLX_OK || size == 0)
        return s;
    cu_buffer *b = (cu_buffer *)buf;
    cu_device *d = b->dev;
    if ((s = cu_enter(d, err)) != RLX_OK)
        return s;
    const cu_api *cu = cu_driver(NULL);
    CUresult r = CUDA_SUCCESS;
    if (!stage(d, size)) {
        r = cu->cuMemcpyHtoDAsync(b->ptr + offset, src, (size_t)size, d->stream);
        return sync_check(d, r, "uploading to the CUDA device", err);
    }
    /* pinned halves: copy the next piece into one half while the other
     * half's transfer runs */
    uint64_t half = d->stage_size / STAGE_HALVES;
    CUevent ev[STAGE_HALVES] = {0};
    bool used[STAGE_HALVES] = {false};
    for (int i = 0; i < STAGE_HALVES && r == CUDA_SUCCESS; i++)
        r = cu->cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING);
    int h = 0;
    for (uint64_t done = 0; done < size && r == CUDA_SUCCESS; h = (h + 1) % STAGE_HALVES) {
        uint64_t n = size - done < half ? size - done : half;
        if (used[h])
            r = cu->cuEventSynchronize(ev[h]);
        if (r != CUDA_SUCCESS)
            break;
        uint8_t *dst = (uint8_t *)d->stage + (uint64_t)h * half;
        memcpy(dst, (const uint8_t *)src + done, (size_t)n);
        r = cu->cuMemcpyHtoDAsync(b->ptr + offset + done, dst, (size_t)n, d->stream);
        if (r == CUDA_SUCCESS)
            r = cu->cuEventRecord(ev[h], d->stream);
        used[h] = true;
        done += n;
    }
    s = sync_check(d, r, "uploading to the CUDA device", err);
    for (int i = 0; i < STAGE_HALVES; i++)
        if (ev[i])
            cu->cuEventDestroy(ev[i]);
    return s;
}

static rlx_status cu_buffer_read(rlx_buffer *buf, uint64_t offset, void *dst, uint64_t size,
                                 rlx_error **err)
{
    rlx_status s = check_range(buf, offset, size, "buffer read", err);
    if (s != RLX_OK || size == 0)
        return s;
    cu_buffer *b = (cu_buffer *)buf;
    cu_device *d = b->dev;
    if ((s = cu_enter(d, err)) != RLX_OK)
        return s;
    const cu_api *cu = cu_driver(NULL);
    if (!stage(d, size)) {
        CUresult r = cu->cuMemcpyDtoHAsync(dst, b->ptr + offset, (size_t)size, d->stream);
        return sync_check(d, r, "reading from the CUDA device", err);
    }
    for (uint64_t done = 0; done < size;) {
        uint64_t n = size - done < d->stage_size ? size - done : d->stage_size;
        CUresult r = cu->cuMemcpyDtoHAsync(d->stage, b->ptr + offset + done, (size_t)n, d->stream);
        s = sync_check(d, r, "reading from the CUDA device", err);
        if (s != RLX_OK)
            return s;
        memcpy((uint8_t *)dst + done, d->stage, (size_t)n);
        done += n;
    }
    return RLX_OK;
}

static rlx_status cu_buffer_from_host(rlx_device *dev, const void *ptr, uint64_t size,
                                      rlx_buffer **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!dev || !out || (!ptr && size))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "buffer_from_host: missing argument");
    rlx_buffer *b = NULL;
    rlx_status s = cu_buffer_alloc(dev, size, &b, err);
    if (s == RLX_OK)
        s = cu_buffer_write(b, 0, ptr, size, err);
    if (s != RLX_OK) {
        rlx_cuda_backend.buffer_free(b);
        return s;
    }
    *out = b;
    return RLX_OK;
}

static void cu_buffer_free(rlx_buffer *buf)
{
    if (!buf)
        return;
    cu_buffer *b = (cu_buffer *)buf;
    cu_device *d = b->dev;
    const cu_api *cu = cu_driver(NULL);
    cu->cuCtxSetCurrent(d->ctx);
    /* work still queued may read it */
    cu->cuStreamSynchronize(d->stream);
    cu->cuMemFree(b->ptr);
    d->allocated -= b->alloc;
    free(b);
}

static rlx_status cu_synchronize(rlx_device *dev, rlx_error **err)
{
    cu_device *d = (cu_device *)dev;
    if (!d)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "synchronize: no device");
    rlx_status s = cu_enter(d, err);
    if (s != RLX_OK)
        return s;
    return sync_check(d, CUDA_SUCCESS, "waiting for the CUDA device", err);
}

const rlx_backend_i rlx_cuda_backend = {
    .name = "cuda",
    .spaced_reuse = true,
    .device_count = cu_device_count,
    .device_info = cu_device_info,
    .device_open = cu_device_open,
    .device_close = cu_device_close,
    .device_query = cu_device_query,
    .buffer_alloc = cu_buffer_alloc,
    .buffer_from_host = cu_buffer_from_host,
    .buffer_write = cu_buffer_write,
    .buffer_read = cu_buffer_read,
    .buffer_free = cu_buffer_free,
    .supports_op = cu_supports_op,
    .program_create = cu_program_create,
    .program_run = cu_program_run,
    .program_free = cu_program_free,
    .synchronize = cu_synchronize,
    .program_set_timing = cu_program_set_timing,
    .program_timings = cu_program_timings,
    .program_stats = cu_program_stats,
};

/* For `rlx info --devices`: why no CUDA device is listed (NULL when the
 * driver loaded). */
const char *rlx_cuda_unavailable_reason(void)
{
    const char *why = NULL;
    if (!cu_driver(&why))
        return why;
    if (cu_device_count() == 0)
        return "the NVIDIA driver is installed but lists no CUDA device";
    return NULL;
}
