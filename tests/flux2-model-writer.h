/* A whole tiny random-weight FLUX.2 [klein] diffusers folder (the model of
 * tests/reference/flux2_pipeline_reference.py): model_index.json
 * ("is_distilled" true, false for base), transformer/ (hidden 256 = 2 heads x
 * 128, one double- and one single-stream block, joint_dim 192, BF16;
 * flux2-writer.h), text_encoder/ (a Qwen3 of hidden 64, 4 / 2 heads of 16,
 * FFN 96, 28 layers so that the pipeline's hidden states 9, 18, 27 exist,
 * Qwen3's 151936-token vocabulary, BF16; qwen3-writer.h), tokenizer/
 * (tokenizer.json and tokenizer_config.json copied from tok, the
 * ../shared/data/tokenizers/hf-qwen3 folder), vae/ (every block width 32 and
 * the real 32 latent channels, so that TAEF2 previews work; F16;
 * flux2-vae-writer.h) and scheduler/. About 40 MB, written in well under a
 * second.
 *
 * Usage:
 *     if (rlx_flux2_model_writer_write(dir, false, tok_dir, &err) != RLX_OK) ...
 *
 * Thread safety: reentrant (distinct folders).
 */
#ifndef RLX_TESTS_FLUX2_MODEL_WRITER_H
#define RLX_TESTS_FLUX2_MODEL_WRITER_H

#include <stdbool.h>

#include "backends/base/status.h"

#define RLX_FLUX2_MODEL_WRITER_TEXT_HIDDEN 64

/* tok NULL: tokenizer/ is left empty (the folder then cannot be opened).
 * Errors: RLX_ERR_IO, RLX_ERR_NO_MEMORY. */
rlx_status rlx_flux2_model_writer_write(const char *root, bool base, const char *tok,
                                        rlx_error **err);

#endif
