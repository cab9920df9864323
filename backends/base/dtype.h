/* Element types of librlx: plain scalars and the GGUF block-quantized formats.
 *
 * Usage:
 *     const rlx_dtype_info *ti = rlx_dtype_get(RLX_DTYPE_Q4_K);
 *     size_t bytes;
 *     if (rlx_dtype_row_bytes(RLX_DTYPE_Q4_K, 4096, &bytes) != RLX_OK) ...
 *
 * A block-quantized type packs `block_size` elements into `type_size` bytes;
 * a plain scalar has block_size 1. Thread safety: everything here is const.
 */
#ifndef RLX_BASE_DTYPE_H
#define RLX_BASE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rlx_dtype {
    RLX_DTYPE_INVALID = 0,
    /* plain scalars */
    RLX_DTYPE_F64,
    RLX_DTYPE_F32,
    RLX_DTYPE_F16,
    RLX_DTYPE_BF16,
    RLX_DTYPE_F8_E4M3,
    RLX_DTYPE_F8_E5M2,
    RLX_DTYPE_I64,
    RLX_DTYPE_I32,
    RLX_DTYPE_I16,
    RLX_DTYPE_I8,
    RLX_DTYPE_U8,
    RLX_DTYPE_BOOL,
    /* GGUF block-quantized formats (ggml's layouts) */
    RLX_DTYPE_Q4_0,
    RLX_DTYPE_Q4_1,
    RLX_DTYPE_Q5_0,
    RLX_DTYPE_Q5_1,
    RLX_DTYPE_Q8_0,
    RLX_DTYPE_Q8_1,
    RLX_DTYPE_Q2_K,
    RLX_DTYPE_Q3_K,
    RLX_DTYPE_Q4_K,
    RLX_DTYPE_Q5_K,
    RLX_DTYPE_Q6_K,
    RLX_DTYPE_Q8_K,
    RLX_DTYPE_IQ2_XXS,
    RLX_DTYPE_IQ2_XS,
    RLX_DTYPE_IQ3_XXS,
    RLX_DTYPE_IQ1_S,
    RLX_DTYPE_IQ4_NL,
    RLX_DTYPE_IQ3_S,
    RLX_DTYPE_IQ2_S,
    RLX_DTYPE_IQ4_XS,
    RLX_DTYPE_IQ1_M,
    RLX_DTYPE_TQ1_0,
    RLX_DTYPE_TQ2_0,
    RLX_DTYPE_MXFP4,
    RLX_DTYPE_COUNT
} rlx_dtype;

typedef struct rlx_dtype_info {
    const char *name;    /* "F32", "Q4_K", ... (GGUF / safetensors spelling) */
    uint32_t block_size; /* elements per block (1 for scalars) */
    uint32_t type_size;  /* bytes per block */
    bool quantized;      /* a GGUF block format */
    bool is_float;       /* a floating-point scalar */
    bool is_int;         /* an integer or bool scalar */
} rlx_dtype_info;

/* Never NULL: an out-of-range value returns the INVALID entry. */
RLX_API const rlx_dtype_info *rlx_dtype_get(rlx_dtype t);
RLX_API const char *rlx_dtype_name(rlx_dtype t);
/* Case-sensitive lookup by name; RLX_DTYPE_INVALID when unknown. */
RLX_API rlx_dtype rlx_dtype_from_name(const char *name);

/* Bytes needed for `n` elements of type t. Fails (RLX_ERR_FORMAT) when n is
 * not a multiple of the block size, and on overflow. */
RLX_API rlx_status rlx_dtype_row_bytes(rlx_dtype t, uint64_t n, uint64_t *out_bytes);

/* ggml's numeric type ids as stored in GGUF files. */
RLX_API rlx_dtype rlx_dtype_from_ggml(uint32_t ggml_type);
/* -1 when t has no ggml id (e.g. BOOL, F8 formats). */
RLX_API int rlx_dtype_to_ggml(rlx_dtype t);

/* IEEE half and bfloat16 conversions (scalar reference versions). */
RLX_API float rlx_f16_to_f32(uint16_t h);
RLX_API uint16_t rlx_f32_to_f16(float f);
RLX_API float rlx_bf16_to_f32(uint16_t h);
RLX_API uint16_t rlx_f32_to_bf16(float f);

/* The two FP8 formats of the OCP 8-bit floating point specification (the
 * F8_E4M3 / F8_E5M2 of safetensors, PyTorch's float8_e4m3fn / float8_e5m2).
 * E4M3 (bias 7) has no infinities: 0x7F / 0xFF are its NaNs and 448 its
 * largest value; E5M2 (bias 15) is the top byte of an IEEE half. The
 * conversions from f32 round to nearest even; E4M3 saturates at +-448 (as
 * the quantizers that write these files clamp), E5M2 overflows to
 * infinity; a NaN stays a NaN. */
RLX_API float rlx_f8_e4m3_to_f32(uint8_t b);
RLX_API float rlx_f8_e5m2_to_f32(uint8_t b);
RLX_API uint8_t rlx_f32_to_f8_e4m3(float f);
RLX_API uint8_t rlx_f32_to_f8_e5m2(float f);

#ifdef __cplusplus
}
#endif
#endif
