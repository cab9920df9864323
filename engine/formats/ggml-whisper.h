/* whisper.cpp's legacy ggml .bin files (ggml-tiny.bin, ggml-base.en-q5_1.bin, ...).
 *
 * Usage:
 *     rlx_ggml_whisper *w = NULL;
 *     if (rlx_ggml_whisper_open("ggml-tiny.bin", &w, &err) != RLX_OK) ...
 *     const rlx_ggml_whisper_hparams *hp = rlx_ggml_whisper_get_hparams(w);
 *     int32_t n_mel, n_fft;
 *     const float *filters = rlx_ggml_whisper_mel_filters(w, &n_mel, &n_fft);
 *     size_t len;
 *     const char *word = rlx_ggml_whisper_word(w, 440, &len);      // " The"
 *     const rlx_ggml_whisper_tensor *t = rlx_ggml_whisper_find(w, "encoder.conv1.weight");
 *     const void *p = rlx_ggml_whisper_data(w, t);                   // into the mmap
 *     rlx_ggml_whisper_close(w);
 *
 * Layout (little endian, no padding anywhere): u32 magic 0x67676d6c ("lmgg"
 * on disk); 11 x i32 hparams (n_vocab, n_audio_ctx, n_audio_state,
 * n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head,
 * n_text_layer, n_mels, ftype + 1000 * quantization version); i32 n_mel,
 * i32 n_fft, n_mel * n_fft f32 (the mel filterbank); i32 n_words, then per
 * word i32 len + bytes; then tensors up to the end of the file: i32 n_dims,
 * i32 name_len, i32 ggml type, n_dims x i32 ne (ggml order, ne[0] fastest),
 * the name, the data.
 *
 * Every count and length is checked against the file's size before it is
 * used; tensors may not run past the end, overlap or repeat a name; a type
 * librlx has no dtype for is refused with its ggml id in the sentence. A file
 * that ends right after the vocabulary is valid and has no tensors (the
 * vocabulary-only test files).
 *
 * Alignment: tensor data is kept in place in the read-only mapping and is in
 * general NOT aligned (the format has no padding, so an F32 tensor may start
 * at an odd address). rlx_session_add_weight accepts such pointers: when a
 * program first binds the weight, the session makes an aligned copy of the
 * ones whose address does not meet the dtype's alignment (session.c) and
 * uses the rest in place. Other consumers must memcpy or check
 * rlx_ggml_whisper_tensor.offset themselves. The mel filterbank is copied
 * into an aligned float array at open.
 *
 * Thread safety: an open rlx_ggml_whisper is immutable and may be read from
 * any number of threads.
 */
#ifndef RLX_ENGINE_FORMATS_GGML_WHISPER_H
#define RLX_ENGINE_FORMATS_GGML_WHISPER_H

#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_GGML_WHISPER_MAGIC    0x67676d6cu
#define RLX_GGML_WHISPER_MAX_DIMS 4
/* ggml's GGML_QNT_VERSION_FACTOR: ftype holds ftype + 1000 * version. */
#define RLX_GGML_QNT_VERSION_FACTOR 1000
/* Limits past which a count is taken as hostile rather than allocated. */
#define RLX_GGML_WHISPER_MAX_NAME 4096
#define RLX_GGML_WHISPER_MAX_WORD (1 << 20)

typedef struct rlx_ggml_whisper_hparams {
    int32_t n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
    int32_t n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels;
    int32_t ftype;       /* the file's ftype without the quantization version */
    int32_t qnt_version; /* ftype / 1000 as stored */
} rlx_ggml_whisper_hparams;

typedef struct rlx_ggml_whisper_tensor {
    char *name;
    rlx_dtype dtype;
    int32_t ggml_type;
    uint32_t n_dims;
    uint64_t ne[RLX_GGML_WHISPER_MAX_DIMS]; /* ggml order: ne[0] is fastest; unused ones 1 */
    uint64_t n_elements;
    uint64_t n_bytes;
    uint64_t offset; /* of the data, from the start of the file */
} rlx_ggml_whisper_tensor;

typedef struct rlx_ggml_whisper rlx_ggml_whisper;

/* *out is set to NULL first and owned by the caller (rlx_ggml_whisper_close).
 * RLX_ERR_IO when the file cannot be opened or mapped; RLX_ERR_FORMAT for a
 * wrong magic, a truncated or inconsistent file (the sentence names the
 * section and the offset); RLX_ERR_UNSUPPORTED for a tensor type librlx does
 * not have. */
RLX_API rlx_status rlx_ggml_whisper_open(const char *path, rlx_ggml_whisper **out, rlx_error **err);
/* Parse an in-memory image (not copied; it must outlive the result). `name`
 * (may be NULL) is what messages call it. */
RLX_API rlx_status rlx_ggml_whisper_open_memory(const void *data, size_t size, const char *name,
                                                rlx_ggml_whisper **out, rlx_error **err);
RLX_API void rlx_ggml_whisper_close(rlx_ggml_whisper *w);

RLX_API const char *rlx_ggml_whisper_path(const rlx_ggml_whisper *w);
RLX_API const rlx_ggml_whisper_hparams *rlx_ggml_whisper_get_hparams(const rlx_ggml_whisper *w);
/* [n_mel][n_fft] row-major, aligned, owned by w; NULL when the file has none. */
RLX_API const float *rlx_ggml_whisper_mel_filters(const rlx_ggml_whisper *w, int32_t *n_mel,
                                                  int32_t *n_fft);
/* The vocabulary as stored (raw bytes, not NUL-terminated). */
RLX_API int32_t rlx_ggml_whisper_n_words(const rlx_ggml_whisper *w);
/* NULL (and *len 0) for i out of range. */
RLX_API const char *rlx_ggml_whisper_word(const rlx_ggml_whisper *w, int32_t i, size_t *len);

RLX_API uint64_t rlx_ggml_whisper_n_tensors(const rlx_ggml_whisper *w);
RLX_API const rlx_ggml_whisper_tensor *rlx_ggml_whisper_tensor_at(const rlx_ggml_whisper *w,
                                                                  uint64_t i);
RLX_API const rlx_ggml_whisper_tensor *rlx_ggml_whisper_find(const rlx_ggml_whisper *w,
                                                             const char *name);
/* Into the mapping (see the alignment note above). */
RLX_API const void *rlx_ggml_whisper_data(const rlx_ggml_whisper *w,
                                          const rlx_ggml_whisper_tensor *t);
/* Size in bytes of the file (or memory image). */
RLX_API uint64_t rlx_ggml_whisper_size(const rlx_ggml_whisper *w);

#ifdef __cplusplus
}
#endif
#endif
