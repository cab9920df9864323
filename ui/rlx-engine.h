/* RlxEngine: the GUI's bridge to the engine thread (rlx_worker) and the LLM
 * runner. Every engine callback arrives on the main loop as a signal.
 *
 *   RlxEngine *engine = rlx_engine_new();
 *   g_signal_connect(engine, "tokens", G_CALLBACK(on_tokens), pane);
 *   RlxLoadParams lp = rlx_load_params_default();
 *   rlx_engine_load_model(engine, "model.gguf", &lp);
 *   ...
 *   RlxSampling s = rlx_sampling_default();
 *   g_autoptr(GCancellable) stop = g_cancellable_new();
 *   rlx_engine_chat(engine, system, roles, contents, n, &s, stop);
 *   g_cancellable_cancel(stop);        // "finished" follows within one token
 *   g_object_unref(engine);            // cancels what runs, joins the thread
 *
 * Signals (main thread, in the order the engine produced them):
 *   load-progress (const char *stage, double fraction)
 *   model-loaded ()                     then rlx_engine_get_model_info()
 *   tokens (const char *text, int n)    every piece since the last emission;
 *                                       n: the reply's tokens so far. A batch
 *                                       ends right after a "</think>", so n
 *                                       there counts the reasoning exactly
 *   stats (double tokens_per_s, int context_used, int context_size)
 *   memory (const RlxMemoryInfo *)
 *   finished (RlxJobKind kind, const char *stop)  stop: "eos", "length",
 *            "context", "cancelled", … (NULL for a load); after an error too
 *   error (RlxJobKind kind, const GError *)  domain RLX_ENGINE_ERROR, code the
 *            rlx_status (or RLX_ENGINE_ERROR_CONTEXT_FULL), message the
 *            engine's sentence
 *
 * Batching: the worker thread queues events under a mutex and at most one
 * idle source is pending on the main context at any moment; adjacent token
 * pieces are joined, adjacent progress and memory reports keep the latest.
 *
 * Thread safety: main thread only.
 */
#pragma once

#include <gio/gio.h>
#include <stdint.h>

G_BEGIN_DECLS

#define RLX_ENGINE_ERROR (rlx_engine_error_quark())
GQuark rlx_engine_error_quark(void);

/* Beyond the rlx_status codes: the conversation does not fit the context. */
#define RLX_ENGINE_ERROR_CONTEXT_FULL 1000

typedef enum {
    RLX_JOB_LOAD,
    RLX_JOB_CHAT,
} RlxJobKind;

typedef struct {
    char *device;    /* "cpu", "vulkan:0"; NULL = "cpu" */
    uint64_t budget; /* bytes; 0 = the device's memory */
    int n_ctx;       /* 0 = the model's, at most 4096 */
    int n_threads;   /* 0 = one per core */
} RlxLoadParams;

typedef struct {
    double temperature; /* <= 0: greedy */
    int top_k;
    double top_p, min_p;
    double repeat_penalty;
    int64_t seed; /* < 0: a fresh one each time */
    int max_tokens;
    /* FALSE: the template is asked for no reasoning (enable_thinking = false);
     * only templates that read that variable change (thinking_switch). */
    gboolean thinking;
} RlxSampling;

RlxSampling rlx_sampling_default(void);

typedef struct {
    uint64_t weights, kv_cache, activations;
    uint64_t budget;       /* 0: none set */
    uint64_t device_total; /* 0: unknown */
    /* Where the model's decoder layers run: on a GPU device, n_gpu_layers of
     * n_layers there (the embedding and output too) and, when that is not
     * all of them (the budget is too small), the rest on the CPU, which then
     * holds cpu_bytes of weights, KV cache and activations. */
    gboolean on_gpu;
    int n_gpu_layers, n_layers;
    uint64_t cpu_bytes;
    /* A model of several parts (the Imagine page's FLUX.2): the text
     * encoder, the transformer and the VAE, which the memory popover lists
     * instead of the weights and the KV cache; weights is their sum.
     * n_parts 0: one model. */
    int n_parts;
    uint64_t parts[3];
} RlxMemoryInfo;

typedef struct {
    char *path;
    char *name;  /* general.name or the file name */
    char *arch;  /* general.architecture */
    char *quant; /* "Q4_K_M", "F32", … */
    char *device;
    int n_ctx;
    gboolean has_template;
    gboolean thinking_switch; /* the template reads enable_thinking */
} RlxModelInfo;

/* One device the backends report. */
typedef struct {
    char *id;       /* "cpu", "vulkan:0" */
    char *label;    /* what a person reads: "CPU — Xeon … (8 threads)" */
    char *features; /* the backend's feature line: "vulkan 1.3 storage16 …, f16 kernels" */
    uint64_t total_memory;
} RlxDevice;

#define RLX_TYPE_ENGINE (rlx_engine_get_type())
G_DECLARE_FINAL_TYPE(RlxEngine, rlx_engine, RLX, ENGINE, GObject)

RlxEngine *rlx_engine_new(void);

/* Every device of every compiled-in backend; free with g_ptr_array_unref. */
GPtrArray *rlx_engine_list_devices(void);

/* Queue a load (the previous model is freed first). */
void rlx_engine_load_model(RlxEngine *self, const char *path, const RlxLoadParams *p);
/* NULL until a model-loaded signal; owned by the engine. */
const RlxModelInfo *rlx_engine_get_model_info(RlxEngine *self);
gboolean rlx_engine_is_busy(RlxEngine *self);

/* Queue one reply to the conversation roles[i]/contents[i] (copied). Without
 * a chat template in the model the texts are joined as a plain continuation.
 * cancellable (nullable) stops it; "finished" follows with "cancelled". */
void rlx_engine_chat(RlxEngine *self, const char *system, const char *const *roles,
                     const char *const *contents, guint n, const RlxSampling *s,
                     GCancellable *cancellable);
/* Stop whatever runs or waits. */
void rlx_engine_cancel_all(RlxEngine *self);

G_END_DECLS
