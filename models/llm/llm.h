/* The LLM runner: a GGUF decoder-only model on a session, with its
 * tokenizer, a KV cache and a generation loop.
 *
 * Usage:
 *     rlx_llm_params p = rlx_llm_default_params();
 *     p.device = "cpu";
 *     p.n_ctx = 4096;
 *     rlx_llm *m = NULL;
 *     if (rlx_llm_load("model.gguf", &p, &m, &err) != RLX_OK) ...
 *     rlx_token *ids; size_t n;
 *     rlx_llm_tokenize(m, "Once upon a time", true, &ids, &n, &err);
 *     rlx_llm_generate_params gp = rlx_llm_generate_default_params();
 *     gp.max_tokens = 64;
 *     gp.sampler.temperature = 0;          // greedy
 *     rlx_llm_stats stats;
 *     rlx_llm_generate(m, ids, n, &gp, on_piece, user, &stats, &err);
 *     free(ids);
 *     rlx_llm_free(m);
 *
 * Programs: one for prefill (SEQ up to params.n_batch) and one for decode
 * (SEQ = 1), both compiled once at load with symbolic PAST/SEQ and reused for
 * every token. The KV cache lives in the session's state tensors; each run
 * appends to it on the device and only the last position's logits come back
 * to the host.
 *
 * Prefix reuse: the runner keeps the token history of what is in the cache.
 * rlx_llm_generate (and rlx_llm_prefill) compare the new prompt with it and
 * evaluate only the part after the longest common prefix, so a chat turn that
 * resends the whole conversation costs only its new tokens.
 *
 * Thread safety: a runner is used by one thread at a time, except
 * rlx_llm_cancel(), which any thread may call.
 */
#ifndef RLX_MODELS_LLM_LLM_H
#define RLX_MODELS_LLM_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"
#include "engine/sample/sampler.h"
#include "engine/template/chat-template.h"
#include "engine/text/tokenizer.h"
#include "models/llm/llm-arch.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_session;
typedef struct rlx_llm rlx_llm;

/* Return false to abort loading (RLX_ERR_CANCELLED). */
typedef bool (*rlx_llm_progress_fn)(void *user, const char *stage, double fraction);

typedef struct rlx_llm_params {
    const char *device; /* "cpu", "vulkan:0", "cuda:0"; NULL = "cpu" */
    int n_threads;      /* 0 = one per core the process may use (see busy_threads) */
    /* Threads of the caller's own that stay busy while the model runs (an
     * app's UI thread showing the stream): with n_threads 0, the CPU takes
     * a core fewer for each, as long as two threads remain. 0 for a tool
     * that only waits for the model. */
    int busy_threads;
    uint64_t memory_budget; /* 0 = the device's memory */
    int32_t n_ctx;          /* 0 = min(the model's context, 4096); at most the model's */
    int32_t n_batch;        /* prefill chunk (SEQ bound); 0 = 64 */
    rlx_dtype kv_dtype;     /* F16 (default), F32 or Q8_0 (ggml blocks of 32 along each
                             * token's kv row, decoded per tile by attention; CPU) */
    /* Partial offload on a GPU device: 0 = as many decoder layers as fit
     * the memory budget (all when the model fits; the rest then run on the
     * CPU, see rlx_llm_get_placement); > 0 = at most that many (an error
     * when they do not fit); < 0 = none (only the embedding and output). */
    int32_t gpu_layers;
    bool force_f32; /* a GPU device's f32 kernels even where it has f16 ones */
    /* GPU, for tests: lower its binding limit (rlx_session_params) so a
     * small model runs the paths that split large tensors; 0 = the device's */
    uint64_t max_binding_bytes;
    /* CUDA, for benchmarks and tests: one launch per instruction
     * (rlx_device_opts.cuda_unfused), to time the launch fusions */
    bool cuda_unfused;
    /* CUDA: quantized matrix-vector products in their plain form only
     * (rlx_device_opts.cuda_plain_matvec), to time the streamed one */
    bool cuda_plain_matvec;
    rlx_llm_progress_fn progress;
    void *progress_user;
} rlx_llm_params;

RLX_API rlx_llm_params rlx_llm_default_params(void);

/* Open the GGUF, or a Hugging Face checkpoint folder (config.json,
 * safetensors, tokenizer.json; see llm-hf.h; a .safetensors or index .json
 * path inside one works too), read its config and tokenizer (a model without
 * a tokenizer loads, but the text functions then fail), create the session,
 * compile the programs. *out is set to NULL first. */
RLX_API rlx_status rlx_llm_load(const char *path, const rlx_llm_params *p, rlx_llm **out,
                                rlx_error **err);
RLX_API void rlx_llm_free(rlx_llm *m);

RLX_API const rlx_llm_config *rlx_llm_get_config(const rlx_llm *m);
/* NULL when the file has no tokenizer. */
RLX_API const rlx_tokenizer *rlx_llm_get_tokenizer(const rlx_llm *m);
/* The model's Jinja chat template (tokenizer.chat_template), or NULL. */
RLX_API const char *rlx_llm_chat_template(const rlx_llm *m);
RLX_API int32_t rlx_llm_n_ctx(const rlx_llm *m);
/* Tokens in the KV cache. */
RLX_API int32_t rlx_llm_n_past(const rlx_llm *m);
RLX_API struct rlx_session *rlx_llm_session(rlx_llm *m);

/* Where the model runs. On a GPU device whose budget (params.memory_budget,
 * else its memory) cannot hold the whole model, the embedding, the first
 * n_gpu_layers decoder layers and the output run there and the other layers
 * on the CPU (a second session, rlx_llm_cpu_session); the hidden state
 * crosses to the CPU and back once per run. The split is decided at load
 * from the budget: the embedding and output weights plus the activations,
 * then layer after layer its weights and KV cache while they fit. */
typedef struct rlx_llm_placement_info {
    char device[32];           /* the chosen device, "vulkan:0", "cpu" */
    bool on_gpu;               /* a device other than the CPU */
    int32_t n_gpu_layers;      /* decoder layers on it (0 on the CPU) */
    int32_t n_layers;          /* decoder layers in the model */
    uint64_t device_bytes;     /* weights + KV cache + activations on it */
    uint64_t budget_bytes;     /* its budget */
    uint64_t cpu_bytes;        /* what the CPU part holds (a split), else 0 */
    uint64_t fixed_bytes;      /* GPU: embedding + output weights */
    uint64_t activation_bytes; /* GPU: the activation arena, every layer on it */
} rlx_llm_placement_info;

RLX_API rlx_llm_placement_info rlx_llm_get_placement(const rlx_llm *m);
/* The same in short: decoder layers on the GPU device, and in the model. */
RLX_API void rlx_llm_placement(const rlx_llm *m, int32_t *n_gpu, int32_t *n_total);
/* A split's CPU session, else NULL. */
RLX_API struct rlx_session *rlx_llm_cpu_session(rlx_llm *m);
/* CPU threads the last one-token run (*decode) and the last batch run of
 * a prompt (*batch) used: the device's count, or 1 where the model's work
 * per step was below what waking the thread pool costs. 0: not run yet, or
 * no part on the CPU. Either pointer may be NULL. */
RLX_API void rlx_llm_threads(const rlx_llm *m, int *decode, int *batch);
/* What the one-token runs so far took, summed over the GPU parts of the
 * model (rlx_program_stats; 0 on the CPU). */
typedef struct rlx_llm_decode_info {
    uint64_t runs;               /* one-token runs (the most of any part) */
    uint64_t prep_ns, device_ns; /* host time preparing them, device time running them */
    uint64_t submit_ns;          /* of prep_ns, in the launch or replay calls themselves */
    uint64_t launches;           /* kernel launches of the last one */
} rlx_llm_decode_info;
RLX_API void rlx_llm_decode_stats(const rlx_llm *m, rlx_llm_decode_info *out);

/* Encode text (control tokens written in the text are parsed when
 * parse_special); *out is malloc'd, the caller frees it. BOS as the model
 * says when add_bos. */
RLX_API rlx_status rlx_llm_tokenize(const rlx_llm *m, const char *text, bool add_bos,
                                    bool parse_special, rlx_token **out, size_t *n_out,
                                    rlx_error **err);

/* The prompt of a conversation: the messages rendered with the model's own
 * chat template (with the generation prompt when add_generation_prompt),
 * given the model's BOS/EOS texts, then tokenized with control tokens
 * parsed and BOS added once (as the model says, unless the template wrote
 * it). A model without a template gets a plain "role: text" transcript
 * ending in "assistant:". *out is malloc'd; the caller frees it. Resend the
 * whole conversation each turn: rlx_llm_generate reuses the cached prefix. */
RLX_API rlx_status rlx_llm_chat_prompt(rlx_llm *m, const rlx_chat_message *msgs, size_t n,
                                       bool add_generation_prompt, rlx_token **out, size_t *n_out,
                                       rlx_error **err);

/* Forget the conversation (the next prefill starts at position 0). */
RLX_API void rlx_llm_reset(rlx_llm *m);

/* Make the cache hold exactly `tokens` (reusing the longest common prefix
 * with what it holds, evaluating the rest in chunks) and write the last
 * position's logits (n_vocab floats) to `logits` (may be NULL). A prompt
 * longer than the context is RLX_ERR_INVALID_ARG. n must be > 0. */
RLX_API rlx_status rlx_llm_prefill(rlx_llm *m, const rlx_token *tokens, size_t n, float *logits,
                                   rlx_error **err);
/* Append tokens to the cache and return the last one's logits. */
RLX_API rlx_status rlx_llm_eval(rlx_llm *m, const rlx_token *tokens, size_t n, float *logits,
                                rlx_error **err);
/* Logits of every one of n tokens appended at the current position
 * (n * n_vocab floats), through a third program compiled on first use; for
 * tests and perplexity. */
RLX_API rlx_status rlx_llm_eval_all(rlx_llm *m, const rlx_token *tokens, size_t n, float *logits,
                                    rlx_error **err);

/* Any thread: stop the current prefill/generation (it returns
 * RLX_ERR_CANCELLED for a prefill, or ends generation early with
 * stats.cancelled). The flag is cleared when the next call starts. */
RLX_API void rlx_llm_cancel(rlx_llm *m);

/* One piece of streamed text and where generation stands. */
typedef struct rlx_llm_piece {
    rlx_token token;     /* the token that completed the text */
    const char *text;    /* complete UTF-8 (never a split character), not NUL-terminated */
    size_t len;          /* 0 only for a model without a tokenizer (one call per token) */
    int32_t n_generated; /* tokens generated so far by this call, this one included */
    int32_t n_past;      /* context used: tokens in the KV cache before this one */
    int32_t n_ctx;       /* the context's size */
    double tps;          /* decode speed so far, tokens/s (0 until the second token) */
} rlx_llm_piece;

/* Called with each piece of text as it becomes complete. The piece is valid
 * during the call only. Return false to stop. */
typedef bool (*rlx_llm_token_fn)(void *user, const rlx_llm_piece *piece);

typedef struct rlx_llm_generate_params {
    rlx_sampler_params sampler;
    int32_t max_tokens;      /* <= 0: until EOG or the context is full */
    const char *const *stop; /* stop strings (not emitted), may be NULL */
    size_t n_stop;
    bool ignore_eos;
    /* DRY's sequence breakers as text, used when sampler.dry_multiplier > 0
     * and sampler.dry_sequence_breakers is empty: every vocabulary token
     * whose text contains one of them breaks a repeat (see
     * rlx_llm_dry_breaker_ids). NULL = llama.cpp's "\n", ":", "\"", "*". */
    const char *const *dry_breakers;
    size_t n_dry_breakers;
    /* When the context is full (during generation, or a prompt longer than
     * the context): keep the first n_keep tokens (0 = only a leading BOS),
     * drop the older half of the rest and re-prefill what is left, then go
     * on. Off (default): a prompt longer than the context is
     * RLX_ERR_INVALID_ARG and generation stops with RLX_LLM_STOP_CONTEXT. */
    bool context_shift;
    int32_t n_keep;
} rlx_llm_generate_params;

/* Defaults of a plain continuation (rlx generate): the sampler's defaults
 * (rlx_sampler_default_params) and 256 tokens. */
RLX_API rlx_llm_generate_params rlx_llm_generate_default_params(void);

/* Defaults of a chat reply, the same in rlx chat and the app (its settings'
 * defaults are written from these at build time): the sampler's defaults
 * and replies of up to RLX_LLM_CHAT_MAX_TOKENS tokens. */
#define RLX_LLM_CHAT_MAX_TOKENS 1024
RLX_API rlx_llm_generate_params rlx_llm_chat_default_params(void);

typedef enum rlx_llm_stop_reason {
    RLX_LLM_STOP_EOG,
    RLX_LLM_STOP_LENGTH,  /* max_tokens */
    RLX_LLM_STOP_CONTEXT, /* the cache is full */
    RLX_LLM_STOP_STRING,
    RLX_LLM_STOP_CALLBACK,
    RLX_LLM_STOP_CANCELLED,
} rlx_llm_stop_reason;

typedef struct rlx_llm_stats {
    int32_t n_prompt; /* prompt tokens */
    int32_t n_reused; /* of which were already in the cache */
    int32_t n_generated;
    int32_t n_past; /* context used at the end */
    double prefill_ms, decode_ms;
    double prefill_tps, decode_tps;
    rlx_llm_stop_reason stop;
    int32_t n_shifts;  /* context shifts done (context_shift) */
    int32_t n_dropped; /* tokens they dropped, prompt included */
} rlx_llm_stats;

/* DRY's sequence breakers as token ids: every vocabulary token whose
 * decoded text (control tokens excepted) contains one of the n strings
 * (NULL strings = llama.cpp's defaults "\n", ":", "\"", "*"). *out is
 * malloc'd, ascending, the caller frees it; RLX_ERR_NOT_FOUND without a
 * tokenizer. */
RLX_API rlx_status rlx_llm_dry_breaker_ids(const rlx_llm *m, const char *const *strs, size_t n,
                                           int32_t **out, size_t *n_out, rlx_error **err);

/* Prefill the prompt (with prefix reuse), then sample up to max_tokens,
 * streaming each piece to `cb` (may be NULL). Stops on an end-of-generation
 * token (unless ignore_eos), a stop string, max_tokens, a full context
 * (unless context_shift), the
 * callback returning false, or rlx_llm_cancel (checked every token). The
 * generated tokens that were evaluated stay in the cache and history.
 * `out_tokens` (may be NULL) receives a malloc'd array of the generated
 * tokens, *n_out_tokens their count. */
RLX_API rlx_status rlx_llm_generate(rlx_llm *m, const rlx_token *prompt, size_t n_prompt,
                                    const rlx_llm_generate_params *gp, rlx_llm_token_fn cb,
                                    void *user, rlx_llm_stats *stats, rlx_token **out_tokens,
                                    size_t *n_out_tokens, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
