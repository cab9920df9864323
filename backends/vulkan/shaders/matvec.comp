#version 450
// Matrix-vector products (decoding): out[m, n] = act(alpha * sum_k a[m, k]
// b[n, k] + bias[n]) for up to MV_ROWS rows m of an f32 `a` contiguous
// along K, and weights b [N, K] contiguous along K: quantized blocks read
// in place, or f32/f16/bf16.
//
// A workgroup takes LS / 32 columns n. The 32 threads of a column walk its
// row 256 values at a time, each thread 8 consecutive values (deq8.glsl:
// for a K-quant block an eighth of a block, for the 32-value formats a
// quarter of one, so the threads of a column read consecutive bytes). A
// thread decodes its 8 weights once and takes them against every row of
// `a`; shared memory sums the column's 32 partial sums.
// P(0) K, P(1) act, PF(2) alpha, P(3) has bias, P(5) b's row bytes (for
// plain dtypes its row stride in elements), P(6) rows M of a, P(7) a's row
// stride (elements).
#include "common.glsl"

#define MV_ROWS 8

shared float red[MV_ROWS * LS];

#include "deq8.glsl"

void main()
{
    int t = int(gl_LocalInvocationID.x), lane = t & 31;
    int cols = int(LS) / 32;
    int r = D_RANK(OUT);
    int N = D_NE(OUT, r - 1);
    int n = int(item_base()) * cols + t / 32;
    int K = P(0), MR = P(6), ast = P(7);
    int bdt = D_DT(1);
    uint ai = D_OFF(0) >> 2, boff = D_OFF(1);
    float acc[MV_ROWS];
    [[unroll]] for (int m = 0; m < MV_ROWS; m++) acc[m] = 0.0;
    if (n < N) {
        for (int c0 = 0; c0 < K; c0 += 256) {
            int k = c0 + 8 * lane; // this thread's 8 values
            if (k >= K) break;
            float w[8];
            deq8(bdt, boff, n, P(5), k, w);
            [[unroll]] for (int m = 0; m < MV_ROWS; m++) {
                if (m < MR) {
                    uint a0 = ai + uint(m * ast + k);
                    float s = 0.0;
                    [[unroll]] for (int i = 0; i < 8; i++) s += uintBitsToFloat(B0.d[a0 + uint(i)]) * w[i];
                    acc[m] += s;
                }
            }
        }
    }
    // the column's 32 partial sums, for every row
    [[unroll]] for (int m = 0; m < MV_ROWS; m++)
        if (m < MR) red[m * int(LS) + t] = acc[m];
    barrier();
    for (int s = 16; s > 0; s >>= 1) {
        if (lane < s)
            for (int m = 0; m < MR; m++) red[m * int(LS) + t] += red[m * int(LS) + t + s];
        barrier();
    }
    if (lane != 0 || n >= N) return;
    float alpha = PF(2);
    float bias = P(3) != 0 ? ldf(2, D_DT(2), D_OFF(2), n * D_ST(2, 0)) : 0.0;
    for (int m = 0; m < MR; m++) {
        float v = red[m * int(LS) + t] * (alpha == 0.0 ? 1.0 : alpha) + bias;
        stf(D_DT(OUT), D_OFF(OUT), m * D_ST(OUT, r - 2) + n * D_ST(OUT, r - 1), act(P(1), v));
    }
}
