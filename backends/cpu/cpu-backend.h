/* The CPU backend's entry in the registry.
 *
 * Usage: through the registry (rlx_backend_find("cpu")), or directly as
 * &rlx_cpu_backend. Thread safety: the interface struct is immutable; a
 * device (and the thread pool it owns) serves one thread at a time.
 *
 * What it takes (supports_op): every op of op.h over every plain dtype
 * (F64/F32/F16/BF16/I64/I32/I16/I8/U8/BOOL), with any element strides, so
 * the compiler never needs a COPY for layout on the CPU. Block-quantized
 * dtypes (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K) only as
 * MATMUL's b (with trans_b, contiguous [N, K] rows) and GATHER's table.
 * An instruction whose output is a view (view_of >= 0) runs as a no-op: the
 * view already shares its source's bytes.
 *
 * How it runs: f32 compute; F16/BF16/integer inputs are converted on load
 * and outputs rounded on store (float to integer truncates toward zero and
 * saturates). Hot ops go to kernels.h when their operands are f32 (or
 * F16/quantized weights) with unit-stride rows; everything else runs the
 * reference loops in cpu-ops.c. Bound tensors must be naturally aligned.
 *
 * Conventions it fixes where op.h leaves room (other backends follow them;
 * tests/test-conformance.c checks them):
 *   MATMUL    y = act(alpha * (a . b) + bias), alpha 0 meaning 1.
 *   SOFTMAX   s = x * scale (0 = 1); s = softcap * tanh(s / softcap) when
 *             softcap != 0; s += mask; a row with every entry -inf gives 0s.
 *   ATTENTION scores the same way (scale 0 = 1/sqrt(D)), then the bias, then
 *             the causal/window mask; query s sits at position T - S + s.
 *   NORMS     weight/bias follow norm.has_weight/has_bias; without either
 *             flag, inputs 1 and 2 are weight and bias. ADD_RMS_NORM is
 *             (a, b, weight) -> rms_norm(a + b) * weight.
 *   ROPE      angle = pos * freq_scale * freq_base^(-2i/n_rot) / ff[i];
 *             n_rot 0 = head dim, freq_base 0 = 10000, freq_scale 0 = 1;
 *             dims past n_rot pass through.
 *   CONV      stride/dilation 0 = 1, groups 0 = 1; CONV_TRANSPOSE2D weights
 *             are [C_in, C_out/groups, KH, KW] (PyTorch).
 *   RESIZE    nearest: src = floor(dst * in / out); bilinear: half-pixel
 *             centres clamped at 0, or align_corners.
 *   POOL2D    stride 0 = kernel; average counts padded positions
 *             (PyTorch's count_include_pad).
 *   TOPK      sorted (largest first or smallest first); ties keep the lower
 *             index.
 *   GATHER    an id outside [0, V) fails the run (its row is zeroed).
 *   SLICE     start may be symbolic; a negative axis counts from the end.
 *   PAD       a negative before/after crops.
 */
#ifndef RLX_BACKENDS_CPU_CPU_BACKEND_H
#define RLX_BACKENDS_CPU_CPU_BACKEND_H

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const rlx_backend_i rlx_cpu_backend;

#ifdef __cplusplus
}
#endif
#endif
