/* Decoder-only LLM architectures: the configuration read from GGUF metadata,
 * the GGUF tensor names, and the one graph builder that covers them all.
 *
 * Usage:
 *     rlx_llm_config c;
 *     if (rlx_llm_config_from_gguf(gguf, &c, &err) != RLX_OK) ...   // names the architecture
 *     rlx_llm_graph_params gp = rlx_llm_graph_default_params();
 *     gp.n_ctx = 2048;     // KV cache length (the PAST + SEQ bound)
 *     gp.seq_max = 64;     // tokens per run (the SEQ bound)
 *     rlx_graph *g = NULL;
 *     if (rlx_llm_build_graph(&c, gguf, &gp, &g, &err) != RLX_OK) ...
 *
 * The graph (only rlx_graph_* calls) has inputs "tokens" I32 [SEQ] and "pos"
 * I32 [SEQ] (absolute positions PAST .. PAST+SEQ-1), symbols SEQ and PAST,
 * one output "logits" F32 [1, n_vocab] for the last position (or [SEQ,
 * n_vocab] with all_logits), and two STATE tensors per layer, "cache.k.<i>"
 * [n_head_kv, n_ctx, head_dim] and "cache.v.<i>", to which each run appends
 * its SEQ positions at offset PAST with a scatter. A Q8_0 cache is instead
 * [n_ctx, n_head_kv * head_dim] (ggml blocks along each token's row, so the
 * row must be a multiple of 32), quantized by the scatter. Weights are PARAMs named
 * exactly as the GGUF tensors, in their file dtype. Text encoders ask for
 * hidden states instead (rlx_llm_graph_params.n_hidden: output "hidden"),
 * usually without the cache (stateless) and with a padding mask (key_mask).
 *
 * Architectures (general.architecture): llama, mistral (NORMAL rope: the
 * GGUF converter permutes Q/K rows for it), qwen2 (q/k/v biases), qwen3
 * (per-head q/k RMS norms), gemma2 / gemma3 (embedding scaled by
 * sqrt(n_embd), post-attention and post-FFN norms, GeGLU, sliding-window
 * layers, attention and final logit soft-capping for gemma2, gemma3's local
 * and global rope bases) and phi3 (fused attn_qkv and gate|up ffn_up); all
 * but llama/mistral rotate in NEOX layout.
 *
 * Thread safety: plain functions; the config is plain data.
 */
#ifndef RLX_MODELS_LLM_LLM_ARCH_H
#define RLX_MODELS_LLM_LLM_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/op.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_gguf;
struct rlx_graph;

typedef enum rlx_llm_arch {
    RLX_LLM_ARCH_LLAMA,
    RLX_LLM_ARCH_MISTRAL,
    RLX_LLM_ARCH_QWEN2,
    RLX_LLM_ARCH_QWEN3,
    RLX_LLM_ARCH_GEMMA2,
    RLX_LLM_ARCH_GEMMA3,
    RLX_LLM_ARCH_PHI3,
} rlx_llm_arch;

/* "llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3" */
RLX_API const char *rlx_llm_supported_architectures(void);

#define RLX_LLM_MAX_ROPE_FACTORS 512
#define RLX_LLM_MAX_HIDDEN       8

typedef struct rlx_llm_config {
    rlx_llm_arch arch;
    char arch_name[32]; /* general.architecture as written */

    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv;
    int32_t head_dim, head_dim_v; /* attention.key_length / value_length */
    int32_t n_ff;
    int32_t n_ctx_train; /* context_length (capped by an original_context_length) */
    float norm_eps;

    rlx_rope_mode rope_mode;
    int32_t n_rot;
    float rope_base, rope_scale;         /* global (or every) layer */
    float rope_base_swa, rope_scale_swa; /* gemma3's local layers */
    /* Frequency factors (llama3 scaling computed from rope.scaling.*); when a
     * rope_freqs.weight (or phi3 rope_factors_short.weight) tensor exists, the
     * graph uses that PARAM instead. */
    int32_t n_rope_factors; /* 0 = none; else n_rot / 2 */
    float rope_factors[RLX_LLM_MAX_ROPE_FACTORS];
    char rope_factors_tensor[48]; /* "" = none */

    /* Sliding window: layer i is local when swa_pattern > 0 and
     * i % swa_pattern < swa_pattern - 1 (gemma2: 2, gemma3: 6), or on every
     * layer when swa_pattern is 1. */
    int32_t sliding_window, swa_pattern;
    float attn_scale; /* 0 = 1/sqrt(head_dim) */
    /* YaRN's magnitude scale on q and k (the scores get its square); 0 = 1 */
    float rope_attn_factor;
    float attn_softcap, final_softcap;
    bool embd_scale;    /* x *= sqrt(n_embd) after the lookup */
    bool qkv_bias;      /* attn_q/k/v.bias */
    bool qk_norm;       /* attn_q_norm / attn_k_norm over head_dim */
    bool post_norms;    /* post_attention_norm, post_ffw_norm */
    bool fused_qkv;     /* attn_qkv */
    bool fused_gate_up; /* ffn_up holds gate then up, no ffn_gate */
    bool gelu_ffn;      /* GeGLU (tanh) instead of SwiGLU */
    bool tied_output;   /* no output.weight: token_embd is the LM head */
} rlx_llm_config;

/* Read the config; RLX_ERR_UNSUPPORTED names an unknown architecture and the
 * supported ones, RLX_ERR_FORMAT a missing key or tensor. */
RLX_API rlx_status rlx_llm_config_from_gguf(const struct rlx_gguf *g, rlx_llm_config *out,
                                            rlx_error **err);

/* Whether layer il uses the sliding window. */
RLX_API bool rlx_llm_layer_is_swa(const rlx_llm_config *c, int32_t il);

typedef struct rlx_llm_graph_params {
    int32_t n_ctx;      /* KV cache positions (PAST + SEQ <= n_ctx) */
    int32_t seq_max;    /* SEQ bound of this program */
    rlx_dtype kv_dtype; /* F16 (default), F32 or Q8_0 (token-major, see below) */
    bool all_logits;    /* logits of every position, not only the last */
    /* Partial offload (rlx_compile_split): with split, the embedding and
     * layers [0, split_layer) are segment 0, layers [split_layer, n_layer)
     * segment 1, and the output norm and head segment 2, so the hidden
     * state crosses each cut once per run. */
    bool split;
    int32_t split_layer;
    /* Text encoders (a FLUX.2 text encoder reads a Qwen3's middle layers):
     * with n_hidden > 0 the output is "hidden" F32 [SEQ, n_hidden * n_embd]
     * instead of "logits": for each position the residual stream after
     * hidden_layers[i] decoder layers, joined in the order given. The
     * numbering is transformers' output_hidden_states: 0 is the embedding,
     * k (1 <= k < n_layer) the output of layer k - 1, and n_layer the output
     * after the final norm (as transformers applies it there). Layers after
     * the deepest one taken, the output norm (unless n_layer is taken) and
     * the head are not built. Does not combine with split. */
    int32_t n_hidden;
    int32_t hidden_layers[RLX_LLM_MAX_HIDDEN];
    /* No KV cache: each run attends over its own SEQ tokens only (PAST is
     * bounded to 0 and the K/V stay f32); for one-shot encoders. */
    bool stateless;
    /* An extra input "key_mask" F32 [PAST + SEQ] ([SEQ] when stateless) added to every layer's
     * attention scores of key t on top of the causal mask: 0 keeps a key, a
     * large negative (-1e30) drops it. It is transformers' attention_mask of
     * a right-padded batch: padding keys are seen by no query, while the
     * padding queries still see every real key. */
    bool key_mask;
} rlx_llm_graph_params;

RLX_API rlx_llm_graph_params rlx_llm_graph_default_params(void);

/* Where the builder finds the weights (by their GGUF names): a GGUF, or a
 * Hugging Face checkpoint's tensors renamed (llm-hf.h). */
typedef struct rlx_llm_tensor_info {
    rlx_dtype dtype;
    int n_dims;
    uint64_t ne[4]; /* GGUF order: ne[0] is the fastest dim */
} rlx_llm_tensor_info;

typedef struct rlx_llm_weights {
    const char *path; /* named in error messages */
    bool (*find)(const void *user, const char *name, rlx_llm_tensor_info *out);
    const void *user;
} rlx_llm_weights;

RLX_API rlx_llm_weights rlx_llm_weights_gguf(const struct rlx_gguf *g);

/* llama 3.x rope frequency factors into c (n_rot and rope_base set). */
RLX_API void rlx_llm_rope_llama3(rlx_llm_config *c, float factor, float low, float high,
                                 float orig_ctx);

/* YaRN rope scaling into c (n_rot and rope_base set): per-frequency divisors
 * and rope_attn_factor. beta_fast 32, beta_slow 1 and attn_factor 1 are the
 * usual values. */
RLX_API void rlx_llm_rope_yarn(rlx_llm_config *c, float factor, float orig_ctx, float beta_fast,
                               float beta_slow, float attn_factor);

/* Build the decoder graph. Every weight is checked (name, dtype, shape)
 * against the GGUF's tensors: a missing or misshapen one is RLX_ERR_FORMAT
 * naming it. *out is set to NULL first; the caller frees the graph. */
RLX_API rlx_status rlx_llm_build_graph(const rlx_llm_config *c, const struct rlx_gguf *g,
                                       const rlx_llm_graph_params *p, struct rlx_graph **out,
                                       rlx_error **err);
/* The same from any weight source. */
RLX_API rlx_status rlx_llm_build_graph_w(const rlx_llm_config *c, const rlx_llm_weights *w,
                                         const rlx_llm_graph_params *p, struct rlx_graph **out,
                                         rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
