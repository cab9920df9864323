#version 450
// Matrix-vector products (decoding): out[m, n] = act(alpha * sum_k a[m, k]
// b[n, k] + bias[n]) for up to MV_ROWS rows m of an f32 `a` contiguous
// along K, and weights b [N, K] contiguous along K: quantized blocks read
// in place, or f32/f16/bf16.
//
// A workgroup takes LS / 32 columns n. The 32 threads of a column walk its
// row 256 values at a time, each thread 8 consecutive values: for a K-quant
// block that is an eighth of a block, for the 32-value formats a quarter of
// a block, so that the threads of a column read consecutive bytes. A thread
// decodes its 8 weights once (their scales once) and takes them against
// every row of `a`; shared memory sums the column's 32 partial sums.
// P(0) K, P(1) act, PF(2) alpha, P(3) has bias, P(5) b's row bytes (for
// plain dtypes its row stride in elements), P(6) rows M of a, P(7) a's row
// stride (elements).
#include "common.glsl"

#define MV_ROWS 8

shared float red[MV_ROWS * LS];

// 32 bits of b at byte address x (any alignment)
uint w1(uint x)
{
    uint s = (x & 3u) * 8u, i = x >> 2;
    if (s == 0u) return B1.d[i];
    return (B1.d[i] >> s) | (B1.d[i + 1u] << (32u - s));
}

// nibble j (0..7) of the 8 held in two words, shifted by sh
float nib(uint lo, uint hi, int j, uint sh)
{
    uint v = j < 4 ? lo : hi;
    return float((v >> (uint(j % 4) * 8u + sh)) & 15u);
}

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
        uint row = boff + uint(n) * uint(P(5));
        for (int c0 = 0; c0 < K; c0 += 256) {
            int k = c0 + 8 * lane; // this thread's 8 values
            if (k >= K) break;
            float w[8];
            if (bdt == DT_Q4_K) {
                uint blk = row + uint(c0 / 256) * 144u;
                int j = lane / 4, sc, mn; // sub-block
                kq_scale(1, blk + 4u, j, sc, mn);
                float dd = ldh(1, blk) * float(sc), dm = ldh(1, blk + 2u) * float(mn);
                uint q = blk + 16u + uint(j / 2) * 32u + uint(lane % 4) * 8u;
                uint lo = w1(q), hi = w1(q + 4u), sh = uint(j % 2) * 4u;
                [[unroll]] for (int i = 0; i < 8; i++) w[i] = dd * nib(lo, hi, i, sh) - dm;
            } else if (bdt == DT_Q6_K) {
                uint blk = row + uint(c0 / 256) * 210u;
                int hf = lane / 16, rr = (lane % 16) / 4, l0 = 8 * (lane % 4);
                uint ql = blk + uint(hf * 64 + (rr & 1) * 32 + l0), qh = blk + 128u + uint(hf * 32 + l0);
                uint shl = (rr & 2) != 0 ? 4u : 0u, shh = uint(2 * rr);
                float d = ldh(1, blk + 208u) *
                          float(bitfieldExtract(int(rb(1, blk + 192u + uint(hf * 8 + l0 / 16 + 2 * rr))), 0, 8));
                uint l_lo = w1(ql), l_hi = w1(ql + 4u), h_lo = w1(qh), h_hi = w1(qh + 4u);
                [[unroll]] for (int i = 0; i < 8; i++) {
                    uint lv = i < 4 ? l_lo : l_hi, hv = i < 4 ? h_lo : h_hi, bs = uint(i % 4) * 8u;
                    int qv = int(((lv >> (bs + shl)) & 15u) | (((hv >> (bs + shh)) & 3u) << 4)) - 32;
                    w[i] = d * float(qv);
                }
            } else if (bdt == DT_Q8_0) {
                uint blk = row + uint(k / 32) * 34u;
                float d = ldh(1, blk);
                uint q = blk + 2u + uint(k % 32);
                uint lo = w1(q), hi = w1(q + 4u);
                [[unroll]] for (int i = 0; i < 8; i++)
                    w[i] = d * float(bitfieldExtract(int(i < 4 ? lo : hi), (i % 4) * 8, 8));
            } else if (bdt == DT_Q4_0 || bdt == DT_Q4_1) {
                bool one = bdt == DT_Q4_1;
                uint blk = row + uint(k / 32) * (one ? 20u : 18u);
                float d = ldh(1, blk), mn = one ? ldh(1, blk + 2u) : -8.0 * d;
                int e = k % 32; // values e..e+7: low nibbles of bytes e, high of e - 16
                uint q = blk + (one ? 4u : 2u) + uint(e % 16);
                uint lo = w1(q), hi = w1(q + 4u), sh = e < 16 ? 0u : 4u;
                [[unroll]] for (int i = 0; i < 8; i++) w[i] = d * nib(lo, hi, i, sh) + mn;
            } else if (bdt == DT_F16 || bdt == DT_BF16) {
                uint e0 = boff + 2u * uint(n * P(5) + k);
                [[unroll]] for (int i = 0; i < 4; i++) {
                    uint h = w1(e0 + uint(4 * i));
                    if (bdt == DT_F16) {
                        vec2 f = unpackHalf2x16(h);
                        w[2 * i] = f.x;
                        w[2 * i + 1] = f.y;
                    } else {
                        w[2 * i] = uintBitsToFloat(h << 16);
                        w[2 * i + 1] = uintBitsToFloat(h & 0xFFFF0000u);
                    }
                }
            } else if (bdt == DT_F32) {
                uint e0 = (boff >> 2) + uint(n * P(5) + k);
                [[unroll]] for (int i = 0; i < 8; i++) w[i] = uintBitsToFloat(B1.d[e0 + uint(i)]);
            } else { // the other block formats, a value at a time
                int bk = qbk(bdt);
                uint blk = row + uint(k / bk) * uint(qbytes(bdt));
                [[unroll]] for (int i = 0; i < 8; i++) w[i] = deq(1, bdt, blk, k % bk + i);
            }
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
