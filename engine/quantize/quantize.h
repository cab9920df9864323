/* Quantize a GGUF model file: llama.cpp's presets (Q8_0, Q4_0, Q4_K_M, ...)
 * with the same per-tensor type mix, written to a new GGUF.
 *
 * Usage:
 *     rlx_quantize_type t;
 *     if (rlx_quantize_type_from_name("Q4_K_M", &t) != RLX_OK) ...
 *     rlx_quantize_params p = rlx_quantize_default_params();
 *     p.n_threads = 8;
 *     rlx_error *err = NULL;
 *     if (rlx_quantize_file("in.gguf", "out.gguf", t, p, &err) != RLX_OK) ...
 *
 * Sources may be F32, F16, BF16 or any type rlx can dequantize (a quantized
 * file is dequantized to f32 and quantized again; the report says so).
 * Tensors are visited in llama.cpp's order (names outside "blk.N." first,
 * then by layer number, then by name) and written in that order. Metadata is
 * copied except split.* keys; general.file_type and
 * general.quantization_version are set as llama-quantize sets them.
 *
 * The output is streamed: the header is written with precomputed offsets,
 * then each tensor in chunks of rows quantized over a thread pool, so memory
 * stays near one chunk whatever the model size. It goes to a temporary file
 * beside out_path, fsync()ed and renamed over out_path: an existing file is
 * replaced only by a complete new one.
 *
 * Thread safety: rlx_quantize_file() may run in several threads at once
 * (each call owns its pool); the progress callback runs on the calling
 * thread.
 */
#ifndef RLX_ENGINE_QUANTIZE_QUANTIZE_H
#define RLX_ENGINE_QUANTIZE_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Output presets; the value of each is llama.cpp's LLAMA_FTYPE_* number,
 * written as general.file_type. */
typedef enum rlx_quantize_type {
    RLX_QUANTIZE_F32 = 0,
    RLX_QUANTIZE_F16 = 1,
    RLX_QUANTIZE_Q4_0 = 2,
    RLX_QUANTIZE_Q4_1 = 3,
    RLX_QUANTIZE_Q8_0 = 7,
    RLX_QUANTIZE_Q5_0 = 8,
    RLX_QUANTIZE_Q5_1 = 9,
    RLX_QUANTIZE_Q4_K_S = 14,
    RLX_QUANTIZE_Q4_K_M = 15,
    RLX_QUANTIZE_Q5_K_S = 16,
    RLX_QUANTIZE_Q5_K_M = 17,
    RLX_QUANTIZE_Q6_K = 18,
    RLX_QUANTIZE_BF16 = 32,
} rlx_quantize_type;

/* Case-insensitive: "Q4_K_M", "q8_0", "F16", and llama-quantize's aliases
 * "Q4_K" (= Q4_K_M) and "Q5_K" (= Q5_K_M). RLX_ERR_INVALID_ARG for others. */
RLX_API rlx_status rlx_quantize_type_from_name(const char *name, rlx_quantize_type *out);
/* "Q4_K_M", ...; NULL for a value that is not a preset. */
RLX_API const char *rlx_quantize_type_name(rlx_quantize_type t);
/* "F32, F16, BF16, Q4_0, ..." (static string) for error messages. */
RLX_API const char *rlx_quantize_type_list(void);
/* The type most tensors get (Q4_K for Q4_K_M, ...). */
RLX_API rlx_dtype rlx_quantize_base_dtype(rlx_quantize_type t);

/* One tensor, reported after it is written. Pointers are valid during the
 * callback only. */
typedef struct rlx_quantize_tensor_report {
    uint64_t index, n_tensors; /* position in the output, count */
    const char *name;
    uint32_t n_dims;
    const uint64_t *ne; /* ggml order */
    rlx_dtype from, to;
    uint64_t bytes_in, bytes_out;
    /* NULL, or why the type differs from the plain rule ("row length 64 is
     * not a multiple of 256: Q5_0 instead of Q4_K", "re-quantized from
     * Q8_0") */
    const char *note;
} rlx_quantize_tensor_report;

/* Return false to stop (the call then fails with RLX_ERR_CANCELLED and
 * out_path is left as it was). */
typedef bool (*rlx_quantize_progress_fn)(const rlx_quantize_tensor_report *r, void *user);

typedef struct rlx_quantize_params {
    int n_threads; /* <= 0: one per physical core */
    /* every quantizable tensor gets the base type (llama-quantize --pure);
     * the shape fallbacks still apply */
    bool pure;
    rlx_quantize_progress_fn progress; /* may be NULL */
    void *progress_user;
} rlx_quantize_params;

RLX_API rlx_quantize_params rlx_quantize_default_params(void);

/* Totals of the last successful run, for reports; may be NULL. */
typedef struct rlx_quantize_stats {
    uint64_t n_tensors, n_quantized, n_fallback, n_requantized;
    uint64_t bytes_in, bytes_out; /* tensor data only */
} rlx_quantize_stats;

RLX_API rlx_status rlx_quantize_file(const char *in_path, const char *out_path,
                                     rlx_quantize_type type, rlx_quantize_params params,
                                     rlx_quantize_stats *stats, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
