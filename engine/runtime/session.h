/* rlx_session: one device, a memory budget, weights, compiled programs and
 * the state tensors (KV caches) that live between runs.
 *
 * Usage:
 *     rlx_session_params sp = rlx_session_default_params();
 *     sp.device = "cpu";
 *     sp.memory_budget = 4ull << 30;
 *     rlx_session *s = NULL;
 *     if (rlx_session_create(&sp, &s, &err) != RLX_OK) ...
 *     rlx_session_add_gguf(s, gguf, &err);             // weights by name, zero-copy
 *     rlx_session_program *prog = NULL;
 *     rlx_session_compile(s, graph, &prog, &err);       // cached by graph hash
 *     // or rlx_session_load_lir(s, lir, &prog, &err) for a hand-built LIR
 *     rlx_sym_values sv = {{0}};
 *     sv.v[rlx_session_program_symbol(prog, "SEQ")] = n_tokens;
 *     const void *in[] = {tokens};
 *     void *out[] = {logits};
 *     rlx_session_run(s, prog, &sv, in, out, &err);
 *     rlx_session_free(s);
 *
 * Budget (rlx_session_params.memory_budget; by default a GPU's free memory
 * when the session is made): loading a program checks weights + state +
 * activations (the one arena every program of the session shares, sized for
 * the largest) against the budget before anything is allocated, and fails
 * with RLX_ERR_BUDGET and the three figures otherwise.
 *
 * Weights: a PARAM binding is resolved by its full name among the weights
 * added with rlx_session_add_weight and the added GGUF / safetensors files.
 * A file added with a prefix provides its tensors as prefix + name, so two
 * files with the same tensor names (an encoder and a decoder) can be told
 * apart; a full name provided twice is refused when the second source is
 * added ("weight 'x' is provided by both A and B"). Its dtype and row-major shape must match
 * (GGUF ne {K, N} is the shape [N, K]). On the CPU the mapped file bytes are
 * used in place; a GPU backend uploads them once, with progress.
 *
 * States are created zeroed, by name, the first time a program binds them,
 * and shared by every program that binds the same name.
 *
 * Inputs and outputs of rlx_session_run are host pointers, indexed like the
 * program's LIR inputs/outputs, holding the tensor contiguous row-major at
 * this run's symbol values. The CPU reads and writes them in place; a GPU
 * session copies them into and out of device buffers that each program
 * keeps from run to run (grown when a run needs more, freed with the
 * program), so a decode step only copies, submits and reads back.
 *
 * Ownership: the session borrows the GGUF / safetensors readers and weight
 * memory handed to it (they must outlive it) and owns programs, states and
 * buffers. Programs belong to the session and are freed with it.
 * Thread safety: a session is used by one thread at a time (normally its
 * worker, engine/runtime/worker.h), except rlx_session_memory() and
 * rlx_session_cancel(), which any thread may call.
 */
#ifndef RLX_ENGINE_RUNTIME_SESSION_H
#define RLX_ENGINE_RUNTIME_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "backends/base/lir.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_session rlx_session;
typedef struct rlx_session_program rlx_session_program;
struct rlx_graph;
struct rlx_gguf;
struct rlx_safetensors;

/* Return false to abort the call (it then fails with RLX_ERR_CANCELLED).
 * `stage` is a short constant label ("weights"); fraction is 0..1. */
typedef bool (*rlx_progress_fn)(void *user, const char *stage, double fraction);

typedef struct rlx_session_params {
    const char *device; /* "cpu", "vulkan:0", "cuda:1"; NULL = "cpu" */
    int n_threads;      /* CPU threads; 0 = one per core */
    /* bytes, kept as given; 0 = on a GPU, its free memory when it reports
     * less free than its total (VK_EXT_memory_budget: the heap's budget
     * minus what every process already uses there), else its total memory;
     * on the CPU, its total memory. Read once, when the session is made. */
    uint64_t memory_budget;
    bool force_f32; /* GPU: its f32 kernels (rlx_device_opts.force_f32) */
    /* GPU, for tests: bytes one binding may reach, below the device's own
     * limit (rlx_device_opts.max_binding_bytes); 0 = the device's */
    uint64_t max_binding_bytes;
    /* CUDA, for benchmarks and tests: no launch fusions
     * (rlx_device_opts.cuda_unfused) */
    bool cuda_unfused;
    /* CUDA: no streamed matrix-vector products
     * (rlx_device_opts.cuda_plain_matvec) */
    bool cuda_plain_matvec;
} rlx_session_params;

RLX_API rlx_session_params rlx_session_default_params(void);

RLX_API rlx_status rlx_session_create(const rlx_session_params *p, rlx_session **out,
                                      rlx_error **err);
RLX_API void rlx_session_free(rlx_session *s);

RLX_API const rlx_backend_i *rlx_session_backend(const rlx_session *s);
RLX_API rlx_device *rlx_session_device(const rlx_session *s);
RLX_API rlx_status rlx_session_device_info(const rlx_session *s, rlx_device_info *out,
                                           rlx_error **err);

/* Progress reporting for long calls (weight upload, compilation) and the
 * flag programs check between instructions: a nonzero *cancel makes the
 * current and later calls fail with RLX_ERR_CANCELLED until it is cleared.
 * The session also owns a flag of its own, set by rlx_session_cancel(). */
RLX_API void rlx_session_set_progress(rlx_session *s, rlx_progress_fn fn, void *user);
RLX_API void rlx_session_set_cancel_flag(rlx_session *s, volatile int *flag);
/* Set (true) or clear (false) the session's own cancel flag; any thread. */
RLX_API void rlx_session_cancel(rlx_session *s, bool cancel);

/* ---- weights ------------------------------------------------------------ */

/* Weight sources, borrowed, not copied. Fails (RLX_ERR_INVALID_ARG) and adds
 * nothing when one of the source's full names is already provided. */
RLX_API rlx_status rlx_session_add_gguf(rlx_session *s, const struct rlx_gguf *g, rlx_error **err);
RLX_API rlx_status rlx_session_add_safetensors(rlx_session *s, const struct rlx_safetensors *st,
                                               rlx_error **err);
/* The same with every tensor's name preceded by `prefix` ("taef2.decoder.");
 * NULL or "" is no prefix. The prefix is copied. */
RLX_API rlx_status rlx_session_add_gguf_prefixed(rlx_session *s, const struct rlx_gguf *g,
                                                 const char *prefix, rlx_error **err);
RLX_API rlx_status rlx_session_add_safetensors_prefixed(rlx_session *s,
                                                        const struct rlx_safetensors *st,
                                                        const char *prefix, rlx_error **err);
/* One named tensor in host memory (row-major dims; bytes borrowed). */
RLX_API rlx_status rlx_session_add_weight(rlx_session *s, const char *name, rlx_dtype dtype,
                                          int rank, const int64_t *dims, const void *data,
                                          uint64_t n_bytes, rlx_error **err);

/* ---- programs ----------------------------------------------------------- */

/* Compile a graph for this session's device (legalized against its backend)
 * and load it; a graph with the same hash (structure + symbol bounds) loaded
 * before returns the cached program. */
RLX_API rlx_status rlx_session_compile(rlx_session *s, const struct rlx_graph *g,
                                       rlx_session_program **out, rlx_error **err);
/* Load an LIR built elsewhere (e.g. by hand in a test). The LIR is borrowed
 * and must stay alive until the session is freed. */
RLX_API rlx_status rlx_session_load_lir(rlx_session *s, const rlx_lir *lir,
                                        rlx_session_program **out, rlx_error **err);
/* Drop a program (its weights stay loaded for the other programs). */
RLX_API void rlx_session_unload(rlx_session *s, rlx_session_program *p);

RLX_API const rlx_lir *rlx_session_program_lir(const rlx_session_program *p);
/* Index of a symbol / input / output by name, or -1. */
RLX_API int rlx_session_program_symbol(const rlx_session_program *p, const char *name);
RLX_API int rlx_session_program_input(const rlx_session_program *p, const char *name);
RLX_API int rlx_session_program_output(const rlx_session_program *p, const char *name);
/* Bytes input/output i occupies at these symbol values (contiguous). */
RLX_API uint64_t rlx_session_program_input_bytes(const rlx_session_program *p, int i,
                                                 const rlx_sym_values *sv);
RLX_API uint64_t rlx_session_program_output_bytes(const rlx_session_program *p, int i,
                                                  const rlx_sym_values *sv);

/* Run once. inputs[i] / outputs[i] follow the LIR's input/output order. */
RLX_API rlx_status rlx_session_run(rlx_session *s, rlx_session_program *p, const rlx_sym_values *sv,
                                   const void *const *inputs, void *const *outputs,
                                   rlx_error **err);

/* What the backend's program has done: runs, command-buffer recordings (a
 * GPU program records once and replays) and, on the CPU, the threads of the
 * last run (rlx_program_stats). Fails with RLX_ERR_UNSUPPORTED where the
 * backend does not count. */
RLX_API rlx_status rlx_session_program_stats(const rlx_session_program *p, rlx_program_stats *out,
                                             rlx_error **err);

/* Per-instruction timing of the last run (ms), when enabled on the program. */
RLX_API void rlx_session_program_set_timing(rlx_session_program *p, bool enabled);
RLX_API rlx_status rlx_session_program_timings(rlx_session_program *p, double *ms, int32_t n,
                                               rlx_error **err);

/* Profiling: while enabled, every program of the session (and every one
 * loaded later) is timed per instruction, and each run adds its times to
 * per-op-kind totals (enabling clears them). Costs a timing query per run,
 * so leave it off for timed runs. rlx_session_profile copies up to cap
 * entries (the op kinds that ran, in rlx_op order) and returns how many
 * there are. */
typedef struct rlx_session_op_profile {
    rlx_op op;
    int64_t count; /* instructions run */
    double ms;     /* their total time */
} rlx_session_op_profile;

RLX_API void rlx_session_set_profiling(rlx_session *s, bool enabled);
RLX_API int32_t rlx_session_profile(const rlx_session *s, rlx_session_op_profile *out, int32_t cap);

/* ---- state -------------------------------------------------------------- */

/* Zero one state tensor (NULL: all of them), e.g. a new conversation. */
RLX_API rlx_status rlx_session_state_reset(rlx_session *s, const char *name, rlx_error **err);
RLX_API rlx_status rlx_session_state_read(rlx_session *s, const char *name, uint64_t offset,
                                          void *dst, uint64_t size, rlx_error **err);
RLX_API rlx_status rlx_session_state_write(rlx_session *s, const char *name, uint64_t offset,
                                           const void *src, uint64_t size, rlx_error **err);

/* ---- memory ------------------------------------------------------------- */

typedef struct rlx_session_memory_info {
    uint64_t weights_bytes; /* weights bound by loaded programs */
    uint64_t state_bytes;   /* state tensors (KV caches) */
    uint64_t arena_bytes;   /* activations: the shared arena, plus (on a GPU) the programs' kept
                             * input/output buffers at their bounds */
    uint64_t budget_bytes;
} rlx_session_memory_info;

RLX_API rlx_session_memory_info rlx_session_memory(const rlx_session *s);
/* The device buffers a program of this LIR keeps for its inputs and outputs
 * (at the symbols' bounds) on this session's device, counted in its
 * activations; 0 where the device uses host memory in place (the CPU). */
RLX_API uint64_t rlx_session_io_bytes(const rlx_session *s, const rlx_lir *lir);

/* "1.2 GiB", "256 MiB", "12 KiB", "100 bytes" into buf; returns buf. */
RLX_API char *rlx_format_bytes(uint64_t bytes, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
