/* Tokenizers: text <-> token ids for the LLM runners.
 *
 * Usage:
 *     rlx_tokenizer *tok = NULL;
 *     rlx_error *err = NULL;
 *     if (rlx_tokenizer_load("model.gguf", &tok, &err) != RLX_OK) { ...report err... }
 *     rlx_tokenizer_encode_params ep = rlx_tokenizer_encode_default_params();
 *     ep.parse_special = true;               // "<|im_start|>" in the text is one token
 *     rlx_token *ids = NULL;
 *     size_t n = 0;
 *     rlx_tokenizer_encode(tok, text, strlen(text), ep, &ids, &n, &err);
 *     ...
 *     rlx_detokenizer *d = NULL;
 *     rlx_detokenizer_create(tok, rlx_tokenizer_decode_default_params(tok), &d, &err);
 *     for each generated id:
 *         const char *s; size_t len;
 *         rlx_detokenizer_push(d, id, &s, &len);   // whole UTF-8 characters only
 *     rlx_detokenizer_flush(d, &s, &len);
 *     rlx_detokenizer_free(d);
 *     free(ids);
 *     rlx_tokenizer_free(tok);
 *
 * Sources: GGUF metadata (tokenizer.ggml.*) and Hugging Face tokenizer.json
 * (BPE models). Three algorithms cover the supported families:
 *   - SentencePiece BPE by scores with byte fallback (tokenizer.ggml.model
 *     "llama": Llama 1/2, Mistral v1, TinyLlama, stories*);
 *   - byte-level BPE by merge rank after a pre-tokenizer regex (model
 *     "gpt2": GPT-2, Llama 3, Qwen2/3, SmolLM, Tekken, DeepSeek, ...);
 *   - character-level BPE by merge rank on "▁"-escaped text with byte
 *     fallback (model "gemma4", and tokenizer.json BPE with byte_fallback).
 *
 * Thread safety: a loaded rlx_tokenizer is immutable; any number of threads
 * may encode and decode with it concurrently. A detokenizer belongs to one
 * thread. The tokenizer must outlive its detokenizers.
 */
#ifndef RLX_ENGINE_TEXT_TOKENIZER_H
#define RLX_ENGINE_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"
#include "engine/formats/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t rlx_token;
#define RLX_TOKEN_NULL ((rlx_token)-1)

/* Token types, numbered as in GGUF's tokenizer.ggml.token_type. */
typedef enum rlx_token_type {
    RLX_TOKEN_TYPE_UNDEFINED = 0,
    RLX_TOKEN_TYPE_NORMAL = 1,
    RLX_TOKEN_TYPE_UNKNOWN = 2,
    RLX_TOKEN_TYPE_CONTROL = 3,
    RLX_TOKEN_TYPE_USER_DEFINED = 4,
    RLX_TOKEN_TYPE_UNUSED = 5,
    RLX_TOKEN_TYPE_BYTE = 6,
} rlx_token_type;

typedef enum rlx_tokenizer_kind {
    RLX_TOKENIZER_SPM,      /* SentencePiece BPE by piece scores */
    RLX_TOKENIZER_BPE,      /* byte-level BPE by merge rank */
    RLX_TOKENIZER_CHAR_BPE, /* character-level BPE by merge rank, "▁" spaces */
} rlx_tokenizer_kind;

typedef struct rlx_tokenizer rlx_tokenizer;

/* Build from an open GGUF's tokenizer.ggml.* keys. The tokenizer copies what
 * it needs: `g` may be closed afterwards. RLX_ERR_NOT_FOUND when the file has
 * no tokenizer, RLX_ERR_UNSUPPORTED for a model or pre-tokenizer we do not
 * implement (the message names it), RLX_ERR_FORMAT for inconsistent arrays. */
RLX_API rlx_status rlx_tokenizer_from_gguf(const rlx_gguf *g, rlx_tokenizer **out, rlx_error **err);
/* Load a Hugging Face tokenizer.json (a file, or a folder holding one).
 * A tokenizer_config.json beside it, when present, supplies add_bos_token,
 * add_eos_token and the bos/eos/pad token names. */
RLX_API rlx_status rlx_tokenizer_from_hf_json(const char *path, rlx_tokenizer **out,
                                              rlx_error **err);
/* Either of the above, chosen by the path: a .gguf file, a tokenizer.json,
 * or a folder holding a tokenizer.json. */
RLX_API rlx_status rlx_tokenizer_load(const char *path, rlx_tokenizer **out, rlx_error **err);
RLX_API void rlx_tokenizer_free(rlx_tokenizer *t);

RLX_API rlx_tokenizer_kind rlx_tokenizer_get_kind(const rlx_tokenizer *t);
/* The pre-tokenizer name ("llama-bpe", "qwen2", "gemma4", "hf", ...); never NULL. */
RLX_API const char *rlx_tokenizer_pre_name(const rlx_tokenizer *t);
RLX_API int32_t rlx_tokenizer_n_vocab(const rlx_tokenizer *t);

/* Special ids; RLX_TOKEN_NULL when the model has none. */
RLX_API rlx_token rlx_tokenizer_bos(const rlx_tokenizer *t);
RLX_API rlx_token rlx_tokenizer_eos(const rlx_tokenizer *t);
RLX_API rlx_token rlx_tokenizer_eot(const rlx_tokenizer *t);
RLX_API rlx_token rlx_tokenizer_pad(const rlx_tokenizer *t);
RLX_API rlx_token rlx_tokenizer_unk(const rlx_tokenizer *t);
/* Whether the model adds BOS / EOS by default, and prefixes a space. */
RLX_API bool rlx_tokenizer_adds_bos(const rlx_tokenizer *t);
RLX_API bool rlx_tokenizer_adds_eos(const rlx_tokenizer *t);
RLX_API bool rlx_tokenizer_adds_space_prefix(const rlx_tokenizer *t);
/* End of generation: EOS, EOT, EOM and the control tokens that end a turn
 * in the common chat formats (<|im_end|>, <end_of_turn>, <|eot_id|>, ...). */
RLX_API bool rlx_tokenizer_is_eog(const rlx_tokenizer *t, rlx_token id);
RLX_API bool rlx_tokenizer_is_control(const rlx_tokenizer *t, rlx_token id);

/* The vocabulary entry as stored (byte-level or "▁"-escaped form), not
 * NUL-terminated; NULL (and *len 0) for an id out of range. */
RLX_API const char *rlx_tokenizer_token_text(const rlx_tokenizer *t, rlx_token id, size_t *len);
RLX_API rlx_token_type rlx_tokenizer_token_type(const rlx_tokenizer *t, rlx_token id);
/* The id of a vocabulary entry (exact stored form); RLX_TOKEN_NULL if absent. */
RLX_API rlx_token rlx_tokenizer_find(const rlx_tokenizer *t, const char *text, size_t len);

/* ---- encoding ----------------------------------------------------------- */

typedef struct rlx_tokenizer_encode_params {
    /* -1: as the model's metadata says; 0: never; 1: always. */
    int add_bos;
    int add_eos;
    /* Recognise control tokens written in the text ("<|im_start|>"). User-
     * defined tokens are always recognised, as the reference tokenizers do. */
    bool parse_special;
} rlx_tokenizer_encode_params;

RLX_API rlx_tokenizer_encode_params rlx_tokenizer_encode_default_params(void);

/* Tokenize `len` bytes of `text` (any bytes; invalid UTF-8 is encoded through
 * the byte tokens where the model has them). *out is a malloc'd array the
 * caller frees with free(); NULL with *n_out 0 for an empty result. */
RLX_API rlx_status rlx_tokenizer_encode(const rlx_tokenizer *t, const char *text, size_t len,
                                        rlx_tokenizer_encode_params params, rlx_token **out,
                                        size_t *n_out, rlx_error **err);

/* ---- decoding ----------------------------------------------------------- */

typedef struct rlx_tokenizer_decode_params {
    /* Write control tokens' text ("<|im_end|>"); otherwise they decode to "". */
    bool render_special;
    /* Drop the one space a SentencePiece model put before the first word. */
    bool strip_leading_space;
} rlx_tokenizer_decode_params;

/* render_special false; strip_leading_space as the model adds a prefix. */
RLX_API rlx_tokenizer_decode_params rlx_tokenizer_decode_default_params(const rlx_tokenizer *t);

/* The bytes one token stands for (may be part of a UTF-8 character, for byte
 * tokens). Writes at most `cap` bytes to buf and returns the full length,
 * snprintf-style (no NUL is written). 0 for an id out of range. */
RLX_API size_t rlx_tokenizer_token_to_piece(const rlx_tokenizer *t, rlx_token id,
                                            bool render_special, char *buf, size_t cap);

/* Decode a whole sequence into a malloc'd NUL-terminated string (the caller
 * frees it); byte tokens are reassembled, and bytes that do not form valid
 * UTF-8 are kept as they are. Ids out of range are RLX_ERR_INVALID_ARG. */
RLX_API rlx_status rlx_tokenizer_decode(const rlx_tokenizer *t, const rlx_token *ids, size_t n,
                                        rlx_tokenizer_decode_params params, char **out,
                                        size_t *out_len, rlx_error **err);

/* Streaming detokenizer: turns tokens into text one at a time and only ever
 * hands out whole, valid UTF-8 characters. Bytes of a character that is not
 * complete yet are held until the tokens that finish it arrive; a byte that
 * can never start or continue a valid character comes out as U+FFFD. */
typedef struct rlx_detokenizer rlx_detokenizer;

RLX_API rlx_status rlx_detokenizer_create(const rlx_tokenizer *t,
                                          rlx_tokenizer_decode_params params, rlx_detokenizer **out,
                                          rlx_error **err);
/* Feed one token. *text / *len receive the text now complete (possibly
 * empty); it stays valid until the next call on this detokenizer. */
RLX_API rlx_status rlx_detokenizer_push(rlx_detokenizer *d, rlx_token id, const char **text,
                                        size_t *len, rlx_error **err);
/* End of stream: held bytes that never completed come out as U+FFFD. */
RLX_API void rlx_detokenizer_flush(rlx_detokenizer *d, const char **text, size_t *len);
/* Forget held bytes and start a new stream (first-token rules apply again). */
RLX_API void rlx_detokenizer_reset(rlx_detokenizer *d);
RLX_API void rlx_detokenizer_free(rlx_detokenizer *d);

#ifdef __cplusplus
}
#endif
#endif
