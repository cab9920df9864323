/* A random-weight Qwen3 (the FLUX.2 [klein] text encoder's trunk) for tests:
 * the weights of tests/reference/flux2_text_reference.py (its generator,
 * keyed by the GGUF tensor name whatever the file's names), written as a
 * Hugging Face folder (config.json + model.safetensors, BF16) or as an F32
 * GGUF. Used by tests/test-flux2-text.c and tests/write-flux2-model.c.
 *
 * Usage:
 *     rlx_qwen3_writer_shape s = {.hidden = 64, .heads = 4, .kv_heads = 2,
 *                                 .head_dim = 16, .ffn = 96, .layers = 28,
 *                                 .vocab = 151936};
 *     if (rlx_qwen3_writer_write_hf("text_encoder", &s, &err) != RLX_OK) ...
 *
 * Thread safety: reentrant.
 */
#ifndef RLX_TESTS_QWEN3_WRITER_H
#define RLX_TESTS_QWEN3_WRITER_H

#include "backends/base/status.h"

typedef struct rlx_qwen3_writer_shape {
    int hidden, heads, kv_heads, head_dim, ffn, layers, vocab;
} rlx_qwen3_writer_shape;

/* dir (which must exist)/config.json and dir/model.safetensors, BF16 values.
 * Errors: RLX_ERR_INVALID_ARG, RLX_ERR_IO, RLX_ERR_NO_MEMORY. */
rlx_status rlx_qwen3_writer_write_hf(const char *dir, const rlx_qwen3_writer_shape *s,
                                     rlx_error **err);
/* an F32 GGUF whose general.architecture is arch ("qwen3"; another to make a
 * wrong kind of model). Same errors. */
rlx_status rlx_qwen3_writer_write_gguf(const char *path, const rlx_qwen3_writer_shape *s,
                                       const char *arch, rlx_error **err);

#endif
