/* Private to backends/cpu: matrix-vector kernels (M == 1, the decode step's
 * products) over packed weight rows, with an activation layout private to
 * each kernel.
 *
 * The activation row is quantized once per call exactly as the dot products'
 * (quantize_q8_0 / quantize_q8_k: the same int8 values and scales), then laid
 * out the way the kernel's registers consume it, with per-block sums already
 * folded into integer offsets, so the weight loop spends no instructions on
 * sign tricks or shuffles of the activation. Integer sums equal the scalar
 * reference's; only the float accumulation order differs.
 *
 * Reached only through rlx_cpu_gemv_avx512(), which matmul.c calls when the
 * active kernel table is the AVX-512 one (the file is compiled with the
 * AVX-512 flags, like kernels-avx512.c).
 */
#ifndef RLX_BACKENDS_CPU_GEMV_H
#define RLX_BACKENDS_CPU_GEMV_H

#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"

typedef struct rlx_gemv_kernel {
    /* bytes of activation scratch for K elements (64-byte aligned start);
     * both NULL: the kernel reads the f32 row x itself as act (F16) */
    size_t (*act_bytes)(int64_t K);
    /* quantize/lay out x[0..K) into act */
    void (*prep)(const float *x, void *act, int64_t K);
    /* Four streams q rows apart, which the kernel reads side by side
     * sharing the activation loads: y[s*q + r] = row (s*q + r) of w . x for
     * s < 4 and q0 <= r < q1 (rows w_row_bytes apart). Successive calls over
     * [0, q1), [q1, q2)... continue the same four sequential streams. */
    void (*streams)(int64_t K, const void *w, size_t w_row_bytes, int64_t q, int64_t q0, int64_t q1,
                    const void *act, float *y);
    /* y[r] = row r of w . x for r < n_rows, one row at a time (the rows
     * left over from the streams) */
    void (*rows)(int64_t K, const void *w, size_t w_row_bytes, int64_t n_rows, const void *act,
                 float *y);
} rlx_gemv_kernel;

/* How far ahead of its reads in each weight stream a kernel asks for lines
 * (see gemv-avx512.c), and what a task asks for first. */
#define RLX_GEMV_PF_AHEAD 1536

/* An upper bound of act_bytes(K) for every kernel (the layouts use at most
 * 3 bytes per element plus one padded group), computable without calling
 * into an ISA-specific file. */
#define RLX_GEMV_ACT_BYTES_MAX(K) ((size_t)(K)*3 + 256)

/* The AVX-512 VNNI kernel for weight type t, or NULL (use the dot products). */
const rlx_gemv_kernel *rlx_cpu_gemv_avx512(rlx_dtype t);

#endif
