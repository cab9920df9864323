/* The FLUX.2 [klein] text encoder: the prompt in Qwen3's chat format through
 * the Qwen3 trunk of models/llm, the hidden states of three middle layers
 * joined per token, as diffusers' Flux2KleinPipeline._get_qwen3_prompt_embeds
 * (and black-forest-labs/flux2's Qwen3Embedder) compute them.
 *
 * Usage:
 *     rlx_flux2_text_params p = rlx_flux2_text_default_params();
 *     p.device = "vulkan:0";
 *     rlx_flux2_text *t = NULL;
 *     if (rlx_flux2_text_open("FLUX.2-klein-4B/", &p, &t, &err) != RLX_OK) ...
 *     float *emb = NULL;
 *     int n = 0, dim = 0;
 *     if (rlx_flux2_text_encode(t, "a red fox in the snow", &emb, &n, &dim, &err) != RLX_OK) ...
 *     // emb: [n][dim] = [512][7680] for klein 4B (3 x 2560), the transformer's text input
 *     free(emb);
 *     rlx_flux2_text_free(t);
 *
 * What is computed (the published pipeline, every step):
 *   1. text = apply_chat_template([{"role": "user", "content": prompt}],
 *      add_generation_prompt=True, enable_thinking=False), with the model's own
 *      Jinja template (tokenizer_config.json / chat_template.jinja, or the GGUF's
 *      tokenizer.chat_template); for Qwen3 that is
 *      "<|im_start|>user\n" prompt "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n".
 *      A model without a template gets exactly that text.
 *   2. tokenized without BOS/EOS, special tokens recognised, truncated to
 *      max_length (512), then padded on the right to max_length with the pad
 *      token (<|endoftext|>), attention_mask 1 for the prompt and 0 for padding.
 *   3. Qwen3 forward with that mask and positions 0..max_length-1: causal
 *      attention, and no query attends to a padding key; padding queries still
 *      attend to every prompt key, so padding rows are not copies of each other.
 *      The transformer sees all max_length rows (the pipeline gives it no mask),
 *      so they are computed exactly, not dropped. With pad = false only the
 *      prompt's rows are computed (the same rows; faster; not what the
 *      reference transformer sees).
 *   4. hidden_states[k] for k in layers (9, 18, 27), transformers' numbering
 *      (0 the embedding, k the output of decoder layer k - 1), stacked and
 *      reshaped [L, 3 * hidden]: per token the three vectors one after the
 *      other. Layers after the deepest one taken and the LM head are not built
 *      (klein 4B runs 27 of Qwen3-4B's 36 layers).
 * Text position ids (T, H, W, L) = (0, 0, 0, i) for row i are the
 * transformer's business (flux2-dit.h). The output stays float32: the
 * pipeline casts prompt_embeds to the text encoder's dtype (bfloat16 as
 * published) before the transformer, a relative rounding of at most 2^-9 we
 * do not apply.
 *
 * Model files: a diffusers root folder (text_encoder/ + tokenizer/), the
 * text_encoder/ folder (tokenizer.json inside, or a tokenizer/ folder beside
 * it), or a Qwen3 GGUF (tokenizer inside). Weights F32/F16/BF16 (safetensors,
 * sharded or not) or any GGUF type the LLM builder reads, kept in their file
 * dtype. The architecture must be qwen3 (the pipeline's Qwen3ForCausalLM).
 *
 * Ownership: *out of encode is malloc'd, the caller frees it. The runner owns
 * its session, model files and tokenizer. Thread safety: one thread at a
 * time per runner; rlx_session_cancel(rlx_flux2_text_session(t), true) may
 * be called from any thread.
 */
#ifndef RLX_MODELS_DIFFUSION_FLUX2_TEXT_H
#define RLX_MODELS_DIFFUSION_FLUX2_TEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/status.h"
#include "models/llm/llm-arch.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_session;
typedef struct rlx_flux2_text rlx_flux2_text;

#define RLX_FLUX2_TEXT_MAX_LENGTH 4096

typedef struct rlx_flux2_text_params {
    const char *device;     /* "cpu", "vulkan:0", ...; NULL = "cpu" */
    int n_threads;          /* CPU threads; 0 = one per core */
    uint64_t memory_budget; /* bytes; 0 = the device's (rlx_session_params) */
    /* A tokenizer.json, a folder holding one, or a GGUF with tokenizer.* keys,
     * used instead of the one found with the model; NULL = the model's. */
    const char *tokenizer;
    int32_t max_length; /* the pipeline's max_sequence_length: 512 */
    int32_t pad_id;     /* the padding token; -1 = the tokenizer's (<|endoftext|>) */
    bool pad;           /* pad to max_length as the pipeline does: true */
    /* hidden states taken, transformers' numbering: {9, 18, 27} */
    int32_t n_layers;
    int32_t layers[RLX_LLM_MAX_HIDDEN];
} rlx_flux2_text_params;

RLX_API rlx_flux2_text_params rlx_flux2_text_default_params(void);

/* *out is set to NULL first. Errors, each with a sentence: RLX_ERR_NOT_FOUND
 * (a folder without text_encoder/, tokenizer/ or tokenizer.json, or a path
 * that does not exist), RLX_ERR_UNSUPPORTED (not a Qwen3), RLX_ERR_FORMAT (a
 * damaged file, a missing tensor, fewer layers than the ones taken),
 * RLX_ERR_INVALID_ARG (bad params), and the session's errors. */
RLX_API rlx_status rlx_flux2_text_open(const char *path, const rlx_flux2_text_params *p,
                                       rlx_flux2_text **out, rlx_error **err);
RLX_API void rlx_flux2_text_free(rlx_flux2_text *t);

RLX_API const rlx_llm_config *rlx_flux2_text_config(const rlx_flux2_text *t);
/* n_layers * hidden: the transformer's joint_attention_dim (7680 for klein 4B). */
RLX_API int rlx_flux2_text_dim(const rlx_flux2_text *t);
RLX_API struct rlx_session *rlx_flux2_text_session(rlx_flux2_text *t);

/* Step 1: the chat-formatted text (malloc'd). */
RLX_API rlx_status rlx_flux2_text_format(rlx_flux2_text *t, const char *prompt, char **out,
                                         rlx_error **err);
/* Steps 1-2 without the padding: the formatted prompt's ids, truncated to
 * max_length (malloc'd, *n >= 1). */
RLX_API rlx_status rlx_flux2_text_tokenize(rlx_flux2_text *t, const char *prompt, int32_t **ids,
                                           int *n, rlx_error **err);

/* The whole encoder: *out malloc'd [*n_tokens][*dim]; *n_tokens is
 * max_length when padding, else the prompt's token count. An empty prompt
 * (NULL or "") is refused with a sentence (RLX_ERR_INVALID_ARG); a prompt
 * longer than max_length tokens is truncated, as the pipeline does. */
RLX_API rlx_status rlx_flux2_text_encode(rlx_flux2_text *t, const char *prompt, float **out,
                                         int *n_tokens, int *dim, rlx_error **err);
/* The same for the negative prompt of classifier-free guidance (the base
 * models), where NULL and "" are allowed and mean the empty prompt, as the
 * pipeline encodes it. */
RLX_API rlx_status rlx_flux2_text_encode_negative(rlx_flux2_text *t, const char *negative,
                                                  float **out, int *n_tokens, int *dim,
                                                  rlx_error **err);
/* Steps 2-4 from token ids (1 <= n <= max_length; each below the model's
 * vocabulary size): padding, forward, join. */
RLX_API rlx_status rlx_flux2_text_encode_ids(rlx_flux2_text *t, const int32_t *ids, int n,
                                             float **out, int *n_tokens, int *dim, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
