/* The backend interface: what a device layer (cpu, vulkan, cuda) provides.
 *
 * Usage (normally through engine/runtime's rlx_session, not directly):
 *     const rlx_backend_i *be = rlx_backend_find("cpu");
 *     rlx_device *dev = NULL;
 *     be->device_open(0, &(rlx_device_opts){.n_threads = 2}, &dev, &err);
 *     rlx_program *prog = NULL;
 *     be->program_create(dev, lir, &prog, &err);        // once
 *     be->program_run(prog, &bindings, &syms, &err);    // per step
 *     be->program_free(prog);
 *     be->device_close(dev);
 *
 * A backend fills a `static const struct rlx_backend_i` with designated
 * initializers. The compiler calls `supports_op` while legalizing so a
 * backend is never handed an instruction it did not claim; a backend never
 * copies data to the host to run an op it lacks.
 *
 * Ownership: rlx_device, rlx_buffer and rlx_program belong to the caller
 * that created them and are freed through the same interface.
 * Thread safety: a device may be used by one thread at a time, except that
 * device_info/free-memory queries may be called from any thread.
 */
#ifndef RLX_BACKENDS_BACKEND_H
#define RLX_BACKENDS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/lir.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rlx_device_type {
    RLX_DEVICE_CPU,
    RLX_DEVICE_GPU_DISCRETE,
    RLX_DEVICE_GPU_INTEGRATED,
    RLX_DEVICE_GPU_SOFTWARE, /* e.g. Mesa lavapipe */
    RLX_DEVICE_OTHER,
} rlx_device_type;

typedef struct rlx_device_info {
    char backend[16]; /* "cpu", "vulkan", "cuda" */
    int index;        /* within the backend */
    char id[32];      /* "cpu", "vulkan:0" */
    char name[256];   /* "Intel Xeon ... (2 threads)" */
    rlx_device_type type;
    uint64_t total_memory; /* bytes */
    uint64_t free_memory;  /* bytes, best effort */
    int n_threads;         /* CPU: worker threads */
    char features[128];    /* CPU: "AVX2 FMA AVX512F ..."; GPU: "fp16 int8" */
    /* Binding limits, 0 = none (the CPU). A kernel reaches at most
     * max_binding_bytes of one tensor through one binding (Vulkan:
     * maxStorageBufferRange, lowered by rlx_device_opts.max_binding_bytes);
     * the backend splits an instruction whose operands exceed it into
     * dispatches over windows, and program_create fails, naming the value,
     * where it cannot. max_buffer_bytes is the largest single buffer
     * (Vulkan: maxMemoryAllocationSize and the heap); a weight, state or
     * arena larger than it cannot be placed (rlx_session says so before
     * uploading anything). */
    uint64_t max_binding_bytes;
    uint64_t max_buffer_bytes;
} rlx_device_info;

typedef struct rlx_device_opts {
    /* CPU: 0 = one per physical core the process may run on (affinity
     * mask, cgroup quota); more than that is capped to it */
    int n_threads;
    /* GPU: use the f32 kernels (halves unpacked from 32-bit words, f32
     * arithmetic) even where the device offers 16-bit storage and float16
     * arithmetic, whose kernels are chosen by default (tests run both). */
    bool force_f32;
    /* GPU, for tests: lower the binding limit (max_binding_bytes of
     * rlx_device_info) to this many bytes (0 = the device's), so small
     * models exercise the paths that split large tensors. */
    uint64_t max_binding_bytes;
    /* GPU, for tests: keep a program's records in memory only the device
     * reads, copied in at the start of each run, as on a discrete GPU, even
     * where device memory is host-visible (lavapipe), so that path runs
     * everywhere. */
    bool staged_records;
    /* CUDA, for benchmarks and tests: quantized prompt products convert
     * their activations to f16 inside the tile kernel as they stage them
     * (the first tensor-core kernel, rlx_mm_tc) instead of reading an f16
     * copy made before it (rlx_mm_tq), so both kernels are timed and
     * checked. */
    bool cuda_convert_a_in_tiles;
    /* CUDA, for benchmarks and tests: one launch per instruction, as
     * before the launch fusions (launches of one kernel grouped, a norm in
     * the product's launch before it, gate, up and their product in one,
     * a rope or product writing the KV cache, attention rounding its
     * output to 8 bits), so a run with and without them times what they
     * gain and a test checks both paths. */
    bool cuda_unfused;
    /* CUDA: every quantized matrix-vector product in its plain form (a
     * round of weights in registers, a block a few columns), not the
     * streamed one that large products take (weights staged through
     * shared memory by async copies, the blocks striding over the
     * columns), so a benchmark times one against the other. */
    bool cuda_plain_matvec;
} rlx_device_opts;

/* Opaque per-backend objects. Each backend's struct starts with this header
 * so generic code can find the interface. */
struct rlx_backend_i;
typedef struct rlx_device {
    const struct rlx_backend_i *iface;
} rlx_device;
typedef struct rlx_buffer {
    const struct rlx_backend_i *iface;
    uint64_t size;
    void *host_ptr; /* non-NULL when the bytes are directly addressable by the host */
} rlx_buffer;
typedef struct rlx_program {
    const struct rlx_backend_i *iface;
} rlx_program;

/* Where each external tensor of a program lives for one run. Arrays are
 * indexed like the LIR's params/states/inputs/outputs. */
typedef struct rlx_buffer_ref {
    rlx_buffer *buf;
    uint64_t offset;
} rlx_buffer_ref;

typedef struct rlx_program_bindings {
    rlx_buffer_ref arena;
    const rlx_buffer_ref *params;
    const rlx_buffer_ref *states;
    const rlx_buffer_ref *inputs;
    const rlx_buffer_ref *outputs;
    volatile const int *cancel; /* optional: checked between instructions */
} rlx_program_bindings;

/* What a program has done so far (program_stats). */
typedef struct rlx_program_stats {
    uint64_t runs; /* program_run calls that completed */
    /* command buffers recorded (a GPU backend records once and replays;
     * it records again only when the bound buffers or timing change).
     * 0 on backends that record nothing (the CPU). */
    uint64_t recordings;
    /* CPU: threads the last run used: the device's, or 1 when the run's
     * work was below what waking the pool costs (a small model); 0 on
     * backends without threads, or before the first run. */
    int threads;
    /* dispatches added by splitting instructions whose operands exceed the
     * device's binding limit (rlx_device_info.max_binding_bytes) */
    uint64_t split_dispatches;
    /* GPU backends: host time spent preparing runs (records, checks, the
     * launches or the replay), and device time between a run's first and
     * last command (timestamps around it); 0 where not measured */
    uint64_t prep_ns, device_ns;
    /* of prep_ns, the part in the launches or the replay call itself (the
     * rest is the records and the checks before them) */
    uint64_t submit_ns;
    /* GPU backends: kernel launches (and library calls such as cuBLAS's)
     * the last run made; 0 where not counted */
    uint64_t launches;
} rlx_program_stats;

typedef struct rlx_backend_i {
    const char *name;
    /* Memory planning for this backend: an arena buffer whose last reader
     * is instruction i is not given to instruction i + 1's output, so that
     * two neighbouring instructions never write what the other reads and
     * the backend may run them as one launch (CUDA's grouped launches)
     * or without a barrier between them (Vulkan). Costs a few arena
     * bytes. */
    bool spaced_reuse;

    /* devices */
    int (*device_count)(void);
    rlx_status (*device_info)(int index, rlx_device_info *out, rlx_error **err);
    rlx_status (*device_open)(int index, const rlx_device_opts *opts, rlx_device **out,
                              rlx_error **err);
    void (*device_close)(rlx_device *dev);
    /* live figures for an open device (free memory changes) */
    rlx_status (*device_query)(rlx_device *dev, rlx_device_info *out, rlx_error **err);

    /* buffers */
    rlx_status (*buffer_alloc)(rlx_device *dev, uint64_t size, rlx_buffer **out, rlx_error **err);
    /* Make host bytes (e.g. an mmap'd weight file region) usable by the
     * device: zero-copy on the CPU, an upload on a GPU. The host memory
     * must outlive the buffer on backends that do not copy. */
    rlx_status (*buffer_from_host)(rlx_device *dev, const void *ptr, uint64_t size,
                                   rlx_buffer **out, rlx_error **err);
    rlx_status (*buffer_write)(rlx_buffer *buf, uint64_t offset, const void *src, uint64_t size,
                               rlx_error **err);
    rlx_status (*buffer_read)(rlx_buffer *buf, uint64_t offset, void *dst, uint64_t size,
                              rlx_error **err);
    void (*buffer_free)(rlx_buffer *buf);

    /* compile + run */
    bool (*supports_op)(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins);
    rlx_status (*program_create)(rlx_device *dev, const rlx_lir *lir, rlx_program **out,
                                 rlx_error **err);
    rlx_status (*program_run)(rlx_program *prog, const rlx_program_bindings *b,
                              const rlx_sym_values *syms, rlx_error **err);
    void (*program_free)(rlx_program *prog);
    rlx_status (*synchronize)(rlx_device *dev, rlx_error **err);

    /* Per-instruction time of the last run in milliseconds (n = lir->n_instrs).
     * Timing is collected only when enabled, so runs stay cheap otherwise. */
    void (*program_set_timing)(rlx_program *prog, bool enabled);
    rlx_status (*program_timings)(rlx_program *prog, double *ms, int32_t n, rlx_error **err);
    /* Optional (NULL: the figures are unknown). */
    void (*program_stats)(const rlx_program *prog, rlx_program_stats *out);
} rlx_backend_i;

/* The registry of compiled-in backends ("cpu" always; "vulkan", "cuda" when
 * built). NULL when absent. */
RLX_API const rlx_backend_i *rlx_backend_find(const char *name);
RLX_API int rlx_backend_count(void);
RLX_API const rlx_backend_i *rlx_backend_at(int i);

/* For backends' program_timings: copy the last run's per-instruction times
 * (n_src of them) into ms[0..n), zero-filling past n_src, with the shared
 * argument and "timing is off" errors. */
RLX_API rlx_status rlx_backend_copy_timings(bool timing_on, const double *src, int32_t n_src,
                                            double *ms, int32_t n, rlx_error **err);

/* Parse "cpu", "vulkan:0", "cuda:1" into backend + index. */
RLX_API rlx_status rlx_device_parse(const char *spec, const rlx_backend_i **out_backend,
                                    int *out_index, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
