/* Hugging Face checkpoints for the LLM runner: a folder with config.json,
 * model.safetensors (or shards with model.safetensors.index.json),
 * tokenizer.json and tokenizer_config.json (chat_template).
 *
 * Usage:
 *     rlx_llm_hf *h = NULL;
 *     if (rlx_llm_hf_open("Qwen3-0.6B/", &h, &err) != RLX_OK) ...
 *     const rlx_llm_config *c = rlx_llm_hf_config(h);
 *     rlx_llm_weights w = rlx_llm_hf_weights(h);        // GGUF names
 *     rlx_llm_build_graph_w(c, &w, &gp, &graph, &err);
 *     rlx_llm_hf_add_to_session(h, session, &err);
 *     rlx_llm_hf_close(h);                               // after the session
 *
 * config.json (model_type llama, mistral, qwen2, qwen3) fills the same
 * rlx_llm_config as the GGUF metadata: hidden_size, intermediate_size,
 * num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
 * rope_theta, rope_scaling (llama3, linear; yarn keeps the original
 * context), rms_norm_eps, max_position_embeddings, tie_word_embeddings,
 * sliding_window (mistral). HF tensors (model.embed_tokens.weight,
 * model.layers.N.self_attn.q_proj.weight, ..., lm_head.weight) are given
 * their GGUF names. HF stores Q and K in the rotate_half layout, which the
 * GGUF converter permutes for llama/mistral; here nothing is permuted and
 * every architecture uses NEOX rope, which is rotate_half. Weights F32, F16
 * and BF16 are read in place from the mapping (1-D norms and biases in
 * F16/BF16 are widened to F32 copies).
 *
 * Thread safety: an open checkpoint is read-only.
 */
#ifndef RLX_MODELS_LLM_LLM_HF_H
#define RLX_MODELS_LLM_LLM_HF_H

#include <stdbool.h>

#include "backends/base/status.h"
#include "models/llm/llm-arch.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_session;
typedef struct rlx_llm_hf rlx_llm_hf;

/* A folder, or a .safetensors / .json file inside one (config.json beside). */
RLX_API bool rlx_llm_hf_is_checkpoint(const char *path);
/* *out is set to NULL first. RLX_ERR_UNSUPPORTED names an unknown
 * model_type, RLX_ERR_FORMAT a missing key or tensor. */
RLX_API rlx_status rlx_llm_hf_open(const char *path, rlx_llm_hf **out, rlx_error **err);
RLX_API void rlx_llm_hf_close(rlx_llm_hf *h);
RLX_API const rlx_llm_config *rlx_llm_hf_config(const rlx_llm_hf *h);
/* The folder (no trailing slash). */
RLX_API const char *rlx_llm_hf_dir(const rlx_llm_hf *h);
/* Valid while h is open. */
RLX_API rlx_llm_weights rlx_llm_hf_weights(const rlx_llm_hf *h);
/* Every mapped tensor under its GGUF name (borrowed: close h after s). */
RLX_API rlx_status rlx_llm_hf_add_to_session(const rlx_llm_hf *h, struct rlx_session *s,
                                             rlx_error **err);
/* tokenizer_config.json's chat_template (the "default" one of a list) or a
 * chat_template.jinja file; malloc'd, NULL when there is none. */
RLX_API char *rlx_llm_hf_chat_template(const rlx_llm_hf *h);
/* The same from any folder (a diffusers pipeline's tokenizer/ folder). */
RLX_API char *rlx_llm_hf_chat_template_in(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
