/* Whisper model files: a whisper.cpp ggml .bin or a Hugging Face openai/whisper-* folder,
 * presented the same way (openai-whisper's canonical tensor names, hparams, special tokens,
 * mel filterbank, vocabulary, suppression list, alignment heads).
 *
 * Usage:
 *     rlx_whisper_file *f = NULL;
 *     if (rlx_whisper_file_open("ggml-tiny.bin", &f, &err) != RLX_OK) ...   // or an HF folder
 *     const rlx_whisper_hparams *hp = rlx_whisper_file_hparams(f);
 *     const rlx_whisper_special *sp = rlx_whisper_file_special(f);
 *     rlx_dtype dt; rlx_shape shape;
 *     rlx_whisper_file_tensor(f, "encoder.conv1.weight", &dt, &shape);   // [384, 80, 3]
 *     rlx_whisper_file_add_to_session(f, session, &err);                  // every weight
 *     int32_t *ids; size_t n;
 *     rlx_whisper_file_encode(f, " hello", 6, &ids, &n, &err); ... free(ids);
 *     rlx_whisper_file_free(f);   // after the session that borrowed its weights
 *
 * Tensors are named as openai-whisper's state dict (see the table in whisper-file.c for the
 * HF names); shapes are row-major (PyTorch order). whisper.cpp's [n, 1] conv biases are
 * presented as [n]. Weights stay in the file's dtype and in the file's mapping: the session
 * borrows them, so the rlx_whisper_file must outlive every session it was added to. ggml
 * tensor data is in general not aligned (the format has no padding): the session makes an
 * aligned copy of those whose address does not suit their dtype when a program first binds
 * them, and uses the rest in place (engine/formats/ggml-whisper.h). safetensors data is used
 * in place.
 *
 * Tokens: rlx_whisper_file_token gives a token's bytes; special tokens (ids from eot on) read
 * as openai's names ("<|endoftext|>", "<|en|>", "<|0.02|>"). Note that whisper.cpp's
 * converters wrote byte tokens that are not whole UTF-8 (ids 0-255 for bytes >= 0x80 and
 * multi-byte pieces) as U+FFFD, so those ids read as "\xef\xbf\xbd" from a ggml file.
 *
 * Thread safety: an open rlx_whisper_file is immutable; any number of threads may read it
 * and encode with it. The language functions are reentrant.
 */
#ifndef RLX_MODELS_WHISPER_WHISPER_FILE_H
#define RLX_MODELS_WHISPER_WHISPER_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/op.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_session;

typedef struct rlx_whisper_hparams {
    int32_t n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx,
        n_text_state, n_text_head, n_text_layer, n_mels;
    int32_t ftype; /* ggml: the file's ftype (0 f32, 1 f16, 2 q4_0, ...) without the quantization
                      version; HF: 0 when the weights are F32, 1 when F16/BF16 */
} rlx_whisper_hparams;

typedef struct rlx_whisper_special {
    int32_t eot, sot, translate, transcribe, solm, prev, no_speech, no_timestamps, timestamp_begin;
    int32_t lang_first; /* the token of language 0 ("en"); language i is lang_first + i */
    int32_t n_langs;    /* 99, or 100 for large-v3 (adds "yue") */
} rlx_whisper_special;

typedef struct rlx_whisper_file rlx_whisper_file;

/* `path`: a whisper.cpp ggml .bin file, or a folder holding config.json, model.safetensors
 * (or model.safetensors.index.json and its shards), tokenizer.json (or vocab.json +
 * merges.txt), and optionally added_tokens.json and generation_config.json. *out is set to
 * NULL first; the caller frees it with rlx_whisper_file_free. A file without tensors (a
 * vocabulary-only ggml file) opens; rlx_whisper_file_has_weights says false.
 * Errors (each with a sentence): RLX_ERR_IO (cannot open), RLX_ERR_FORMAT (truncated,
 * inconsistent: n_mels other than 80/128, a vocabulary size that disagrees with the token
 * embedding, a ggml/GGUF file of another model, a folder without config.json),
 * RLX_ERR_UNSUPPORTED (a tensor type rlx lacks). */
RLX_API rlx_status rlx_whisper_file_open(const char *path, rlx_whisper_file **out, rlx_error **err);
RLX_API void rlx_whisper_file_free(rlx_whisper_file *f);

RLX_API const rlx_whisper_hparams *rlx_whisper_file_hparams(const rlx_whisper_file *f);
RLX_API const rlx_whisper_special *rlx_whisper_file_special(const rlx_whisper_file *f);
RLX_API bool rlx_whisper_file_multilingual(const rlx_whisper_file *f);
/* "tiny", "tiny.en", "base", ..., "medium.en", "large-v1", "large-v2", "large" (v1 or v2:
 * their hparams are the same; the file or folder name decides when it says which),
 * "large-v3", "large-v3-turbo"; "custom" for other shapes. Never NULL. */
RLX_API const char *rlx_whisper_file_kind(const rlx_whisper_file *f);
/* "ggml" or "huggingface". */
RLX_API const char *rlx_whisper_file_format(const rlx_whisper_file *f);
/* [n_mels][201] row-major: the file's own (ggml) or librosa's slaney filterbank (HF). */
RLX_API const float *rlx_whisper_file_mel_filters(const rlx_whisper_file *f);

RLX_API bool rlx_whisper_file_has_weights(const rlx_whisper_file *f);
/* dtype + row-major shape of a tensor by canonical name; false when absent. Either out
 * pointer may be NULL. */
RLX_API bool rlx_whisper_file_tensor(const rlx_whisper_file *f, const char *name, rlx_dtype *dt,
                                     rlx_shape *shape);
/* All tensors, in file order: the canonical name (NULL past the end) and dtype / shape /
 * bytes (out pointers may be NULL). */
RLX_API size_t rlx_whisper_file_n_tensors(const rlx_whisper_file *f);
RLX_API const char *rlx_whisper_file_tensor_at(const rlx_whisper_file *f, size_t i, rlx_dtype *dt,
                                               rlx_shape *shape, uint64_t *bytes);
/* Every tensor into the session under its canonical name, in its file dtype (zero-copy; see
 * the alignment note above). Fails with a sentence when the file has no weights, or when a
 * tensor the model needs is missing or has the wrong shape; adds nothing then. */
RLX_API rlx_status rlx_whisper_file_add_to_session(const rlx_whisper_file *f, struct rlx_session *s,
                                                   rlx_error **err);

/* The bytes of token id (not NUL-terminated); NULL (*len 0) out of range. */
RLX_API const char *rlx_whisper_file_token(const rlx_whisper_file *f, int32_t id, size_t *len);
/* Text (no special tokens recognised) to ids. HF: the folder's byte-level BPE. ggml (no merges
 * in the file): the GPT-2 regex pre-split, then greedy longest match on the vocabulary bytes,
 * as whisper.cpp does; bytes no entry covers are skipped. *ids is malloc'd (caller frees),
 * NULL with *n 0 for an empty result. */
RLX_API rlx_status rlx_whisper_file_encode(const rlx_whisper_file *f, const char *text, size_t len,
                                           int32_t **ids, size_t *n, rlx_error **err);
/* The tokens openai's decoder suppresses with suppress_tokens="-1": the non-speech tokens
 * (tokenizer.non_speech_tokens, computed from this vocabulary) plus translate, transcribe,
 * sot, solm, prev and no_speech; for HF, merged with generation_config's suppress_tokens.
 * Sorted, unique. */
RLX_API const int32_t *rlx_whisper_file_suppress_tokens(const rlx_whisper_file *f, size_t *n);
/* generation_config's begin_suppress_tokens for HF; [blank (" "), eot] otherwise, as
 * openai's SuppressBlank. */
RLX_API const int32_t *rlx_whisper_file_begin_suppress_tokens(const rlx_whisper_file *f, size_t *n);
/* Pairs (text layer, head), 2 * n_pairs ints: generation_config's alignment_heads for HF;
 * openai's preset for the file's kind for ggml; n_pairs 0 when unknown. */
RLX_API const int32_t *rlx_whisper_file_alignment_heads(const rlx_whisper_file *f, size_t *n_pairs);
/* openai's preset for a kind name ("tiny.en", "large-v2", "large-v3-turbo", ...); NULL and 0
 * pairs when there is none. */
RLX_API const int32_t *rlx_whisper_alignment_heads_preset(const char *kind, size_t *n_pairs);

/* Languages in openai-whisper's order: code ("en") and name ("english") of language i
 * (token lang_first + i); NULL out of range (0..99). */
RLX_API const char *rlx_whisper_language_code(int i);
RLX_API const char *rlx_whisper_language_name(int i);
/* By code, name or openai's aliases ("mandarin", "castilian"), case-insensitive; -1 when
 * unknown. */
RLX_API int rlx_whisper_language_find(const char *code_or_name);

/* librosa.filters.mel(sr, n_fft, n_mels) with the slaney scale and norm, [n_mels][n_fft/2+1]
 * floats into out (a local copy; engine/audio/mel.h has the shared one). */
RLX_API rlx_status rlx_whisper_mel_filters_slaney(int n_mels, int n_fft, int sample_rate,
                                                  float *out, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
