/* The CPU backend: device description, host buffers and the interface
 * table. Programs live in cpu-program.c, ops in cpu-ops.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backends/cpu/cpu-backend.h"
#include "backends/cpu/cpu-features.h"
#include "backends/cpu/cpu-internal.h"
#include "backends/cpu/cpu-program.h"
#include "backends/cpu/kernels.h"

#define CPU_ALIGN   64
#define CPU_MAP_MIN ((size_t)1 << 20) /* buffers from this size up are mapped */

static int cpu_device_count(void)
{
    return 1;
}

/* MemTotal and MemAvailable in bytes; 0 when unreadable. */
static void read_meminfo(uint64_t *total, uint64_t *avail)
{
    *total = *avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
            *total = (uint64_t)kb * 1024;
        else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            *avail = (uint64_t)kb * 1024;
    }
    fclose(f);
}

/* One thread per physical core the process may run on (its affinity mask
 * and cgroup quota): SMT siblings share the vector units the kernels
 * saturate, and threads beyond the cores the process gets only wait for
 * each other. */
static int default_threads(void)
{
    return rlx_cpu_usable_cores();
}

static void fill_info(int n_threads, rlx_device_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "cpu");
    out->index = 0;
    snprintf(out->id, sizeof out->id, "cpu");
    const rlx_cpu_features *f = rlx_cpu_features_get();
    snprintf(out->name, sizeof out->name, "%s (%d thread%s)",
             f->model_name[0] ? f->model_name : "CPU", n_threads, n_threads == 1 ? "" : "s");
    out->type = RLX_DEVICE_CPU;
    read_meminfo(&out->total_memory, &out->free_memory);
    out->n_threads = n_threads;
    rlx_cpu_features_string(f, out->features, (int)sizeof out->features);
}

static rlx_status cpu_device_info(int index, rlx_device_info *out, rlx_error **err)
{
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "device_info: no output given");
    if (index != 0)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no CPU device %d: the CPU is device 0",
                             index);
    fill_info(default_threads(), out);
    return RLX_OK;
}

static rlx_status cpu_device_open(int index, const rlx_device_opts *opts, rlx_device **out,
                                  rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "device_open: no output given");
    if (index != 0)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "no CPU device %d: the CPU is device 0",
                             index);
    /* more threads than usable cores is capped: the callers (rlx -t, the
     * app's setting) see the count in device_query and say so */
    int usable = default_threads();
    int nt = opts && opts->n_threads > 0 && opts->n_threads < usable ? opts->n_threads : usable;
    cpu_device *d = calloc(1, sizeof *d);
    if (!d)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory opening the CPU device");
    d->base.iface = &rlx_cpu_backend;
    d->index = index;
    d->n_threads = nt;
    rlx_cpu_kernels_init();
    if (nt > 1 && rlx_threadpool_create(nt, &d->pool) != RLX_OK) {
        free(d);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "could not start %d CPU threads", nt);
    }
    *out = &d->base;
    return RLX_OK;
}

static void cpu_device_close(rlx_device *dev)
{
    if (!dev)
        return;
    rlx_threadpool_free(((cpu_device *)dev)->pool);
    free(dev);
}

static rlx_status cpu_device_query(rlx_device *dev, rlx_device_info *out, rlx_error **err)
{
    if (!dev || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "device_query: no device or output");
    fill_info(((cpu_device *)dev)->n_threads, out);
    return RLX_OK;
}

static rlx_status cpu_buffer_alloc(rlx_device *dev, uint64_t size, rlx_buffer **out,
                                   rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!dev || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "buffer_alloc: no device or output");
    if (size > UINT64_MAX - CPU_ALIGN || size + CPU_ALIGN > (uint64_t)SIZE_MAX)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "cannot allocate %llu bytes",
                             (unsigned long long)size);
    size_t rounded = (size_t)((size + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN);
    if (rounded == 0)
        rounded = CPU_ALIGN;
    cpu_buffer *b = calloc(1, sizeof *b);
    void *p = NULL;
    if (b && rounded >= CPU_MAP_MIN) {
        /* Large buffers (a KV cache, the arena) are anonymous mappings: zero
         * pages the kernel hands out as they are first written. A 4096-token
         * cache is no longer written through (448 MiB for Qwen3-0.6B) when a
         * session opens, and only the rows a conversation reaches count in
         * the process's memory. No huge pages: a cache's heads lie 1 MiB
         * apart, and 2 MiB pages would commit all of it on the first token. */
        void *m = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            p = m;
            b->map_base = m;
            b->map_bytes = rounded;
        }
    }
    if (b && !p) {
        p = aligned_alloc(CPU_ALIGN, rounded);
        if (p)
            memset(p, 0, rounded);
    }
    if (!p) {
        free(b);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory allocating %.1f MiB",
                             (double)size / (1024.0 * 1024.0));
    }
    b->base.iface = &rlx_cpu_backend;
    b->base.size = size;
    b->base.host_ptr = p;
    b->owned = true;
    *out = &b->base;
    return RLX_OK;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/* Weights wrapped in place are usually a file mapping: map their pages now,
 * in one call, rather than one page fault at a time inside the first run
 * (which made the first prompt of a session several times slower than the
 * next; llama.cpp maps with MAP_POPULATE for the same reason). Small buffers
 * (per-run inputs and outputs) are left alone; a kernel without
 * MADV_POPULATE_READ refuses it and nothing changes. */
static void prefault(const void *ptr, uint64_t size)
{
    if (!ptr || size < ((uint64_t)1 << 20))
        return;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return;
    uintptr_t lo = (uintptr_t)ptr & ~((uintptr_t)page - 1);
    uintptr_t hi = (uintptr_t)ptr + (uintptr_t)size;
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_READ);
}

static rlx_status cpu_buffer_from_host(rlx_device *dev, const void *ptr, uint64_t size,
                                       rlx_buffer **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!dev || !out || (!ptr && size))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "buffer_from_host: missing argument");
    cpu_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory wrapping host memory");
    b->base.iface = &rlx_cpu_backend;
    b->base.size = size;
    /* The CPU reads host memory in place; it writes only to buffers it was
     * handed as outputs or state, never to weights. */
    b->base.host_ptr = (void *)(uintptr_t)ptr;
    b->owned = false;
    prefault(ptr, size);
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
                             "%s of %llu bytes at offset %llu runs past the %llu-byte buffer", what,
                             (unsigned long long)size, (unsigned long long)offset,
                             (unsigned long long)buf->size);
    return RLX_OK;
}

static rlx_status cpu_buffer_write(rlx_buffer *buf, uint64_t offset, const void *src, uint64_t size,
                                   rlx_error **err)
{
    rlx_status s = check_range(buf, offset, size, "buffer write", err);
    if (s == RLX_OK && size)
        memmove((uint8_t *)buf->host_ptr + offset, src, (size_t)size);
    return s;
}

static rlx_status cpu_buffer_read(rlx_buffer *buf, uint64_t offset, void *dst, uint64_t size,
                                  rlx_error **err)
{
    rlx_status s = check_range(buf, offset, size, "buffer read", err);
    if (s == RLX_OK && size)
        memmove(dst, (const uint8_t *)buf->host_ptr + offset, (size_t)size);
    return s;
}

static void cpu_buffer_free(rlx_buffer *buf)
{
    if (!buf)
        return;
    cpu_buffer *b = (cpu_buffer *)buf;
    if (b->owned && b->map_bytes)
        munmap(b->map_base, b->map_bytes);
    else if (b->owned)
        free(buf->host_ptr);
    free(b);
}

static rlx_status cpu_synchronize(rlx_device *dev, rlx_error **err)
{
    (void)dev;
    (void)err;
    return RLX_OK;
}

const rlx_backend_i rlx_cpu_backend = {
    .name = "cpu",
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .device_open = cpu_device_open,
    .device_close = cpu_device_close,
    .device_query = cpu_device_query,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_from_host = cpu_buffer_from_host,
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .buffer_free = cpu_buffer_free,
    .supports_op = cpu_supports_op,
    .program_create = cpu_program_create,
    .program_run = cpu_program_run,
    .program_free = cpu_program_free,
    .synchronize = cpu_synchronize,
    .program_set_timing = cpu_program_set_timing,
    .program_timings = cpu_program_timings,
    .program_stats = cpu_program_stats,
};
