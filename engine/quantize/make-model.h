/* Random-weight LLM files in the shapes of real models, for benchmarks and
 * tests: the GGUF metadata keys and tensor names llama.cpp's converter
 * (convert_hf_to_gguf.py) writes for the architecture, weights drawn from
 * N(0, 0.02) (norm weights 1), the tokenizer copied from a vocab GGUF.
 *
 * Usage:
 *     rlx_make_model_params p = rlx_make_model_default_params();
 *     p.shape = "qwen3-0.6b";
 *     p.vocab_path = "../shared/data/tokenizers/ggml-vocab-qwen2.gguf";
 *     if (rlx_make_model("/tmp/q.gguf", p, &err) != RLX_OK) ...
 *
 * Shapes: "qwen3-0.6b" (Qwen3-0.6B: 28 layers, hidden 1024, 16 heads, 8 KV
 * heads, head_dim 128, FFN 3072, vocab 151936, rope base 1e6, rms eps 1e-6,
 * tied embeddings, per-head q/k norms), "llama-3.2-1b" (16 layers, hidden
 * 2048, 32 heads, 8 KV heads, head_dim 64, FFN 8192, vocab 128256, rope base
 * 5e5 with llama3 scaling as a rope_freqs.weight tensor, tied embeddings) and
 * "tiny" (2 layers, hidden 256, 4 heads, 2 KV heads, head_dim 64, FFN 512).
 * The vocab size is the vocab file's token count. Architectures: "llama",
 * "qwen2" (q/k/v biases), "qwen3" (q/k norms); NULL takes the shape's own.
 *
 * The weights are generated chunk by chunk as the file is written
 * (atomically, through a temporary file), so memory stays near one 16 MiB
 * chunk whatever the shape. The same seed gives the same file whatever the
 * thread count.
 *
 * Thread safety: reentrant.
 */
#ifndef RLX_ENGINE_QUANTIZE_MAKE_MODEL_H
#define RLX_ENGINE_QUANTIZE_MAKE_MODEL_H

#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_make_model_params {
    const char *arch;       /* NULL: the shape's architecture */
    const char *shape;      /* "qwen3-0.6b", "llama-3.2-1b", "tiny" */
    const char *vocab_path; /* a GGUF whose tokenizer.* keys are copied (required) */
    uint64_t seed;
    rlx_dtype dtype; /* F32 or F16 for the 2-D weights; 1-D tensors stay F32 */
    int n_threads;   /* <= 0: one per physical core */
} rlx_make_model_params;

RLX_API rlx_make_model_params rlx_make_model_default_params(void);
/* "qwen3-0.6b, llama-3.2-1b, tiny" */
RLX_API const char *rlx_make_model_shapes(void);

RLX_API rlx_status rlx_make_model(const char *out_path, rlx_make_model_params params,
                                  rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
