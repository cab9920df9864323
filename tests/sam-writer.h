/* A random-weight SAM as safetensors (or a torch.save .pth, as the official
 * release ships), official or Hugging Face names, for tests/test-sam.c: the
 * model and the weights of tests/reference/sam_reference.py (image encoder
 * D = 64, depth 4, 2 heads, window 14, global blocks 1 and 3; the prompt
 * encoder and mask decoder at their real width), values from the generator
 * described there. Linked into tests and tests/write-sam-model only.
 *
 * For benchmarks, `layout` picks the published image-encoder shapes instead
 * ("vit_b": D 768, depth 12, 12 heads, global blocks 2 5 8 11; "vit_l": 1024,
 * 24, 16, 5 11 17 23; "vit_h": 1280, 32, 16, 7 15 23 31; window 14), with the
 * same generator (tests/reference/sam_bench_torch.py builds the same weights),
 * and `f16` stores every tensor as F16 (the F32 value rounded to nearest even).
 * "sam2.1_hiera_tiny" (or _small, _base_plus, _large) writes a SAM 2.1 model's
 * image-path tensors by their official names, the model and weights of
 * tests/reference/sam2_reference.py; with hf_names, under transformers' Sam2Model
 * names (facebook/sam2.1-hiera-tiny's model.safetensors: the four point embeddings
 * stacked into prompt_encoder.point_embed.weight [4, 256]; safetensors only).
 *
 * "mobile_sam" is MobileSAM at its real shapes (TinyViT-5M: widths 64 128 160 320,
 * blocks 2 2 6 2, heads 2 4 5 10, windows 7 7 14 7) under mobile_sam.pt's names,
 * BatchNorm running statistics included (running_var positive), with the tensors
 * the runner does not read (num_batches_tracked as I64 scalars, norm_head, head);
 * tests/reference/mobile_sam_reference.py builds the same weights.
 *
 * Usage:
 *     rlx_sam_writer_opts o = {.hf_names = true};
 *     if (rlx_sam_writer_write("/tmp/sam-hf.safetensors", &o, &err) != RLX_OK) ...
 *     rlx_sam_writer_opts t = {.torch = true};   // official names, as sam_vit_b_01ec64.pth
 *     rlx_sam_writer_write("/tmp/sam.pth", &t, &err);
 *     rlx_sam_writer_image(chw);   // the reference's input, 3 x 1024 x 1024
 *
 * Thread safety: reentrant.
 */
#ifndef RLX_TESTS_SAM_WRITER_H
#define RLX_TESTS_SAM_WRITER_H

#include <stdbool.h>
#include <stddef.h>

#include "backends/base/status.h"

typedef struct rlx_sam_writer_opts {
    bool hf_names;        /* Hugging Face SamModel names instead of segment_anything's */
    const char *skip;     /* an official name to leave out, or NULL */
    const char *misshape; /* an official name to write with its dims reversed, or NULL */
    bool torch;           /* a torch.save checkpoint (tests/torch-writer.h) instead */
    const char *layout;   /* "test" (NULL), "vit_b", "vit_l", "vit_h", "mobile_sam" or
                           * "sam2.1_hiera_tiny" (_small, _base_plus, _large) */
    bool f16;             /* F16 tensors instead of F32 */
} rlx_sam_writer_opts;

/* Errors: RLX_ERR_INVALID_ARG (an unknown layout), RLX_ERR_IO, RLX_ERR_NO_MEMORY. */
rlx_status rlx_sam_writer_write(const char *path, const rlx_sam_writer_opts *o, rlx_error **err);
/* The reference image: u("image", i), 3 x 1024 x 1024. */
void rlx_sam_writer_image(float *chw);
/* The Hugging Face name of an official one (the test's own mapping). */
void rlx_sam_writer_hf_name(const char *official, char *out, size_t cap);

#endif
