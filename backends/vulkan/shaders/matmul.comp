#version 450
// out[.., m, n] = act(alpha * sum_k a[.., m, k] b[.., k, n] + bias[n]).
// a, b are strided (transposes are strides; batch dims broadcast with
// stride 0); a quantized b is [N, K] rows of blocks read in place.
// P(0) K, P(1) act, PF(2) alpha, P(3) has bias, P(4) b quantized,
// P(5) b row bytes, P(6) row mode: one workgroup per output element, the
// threads splitting K (matrix-vector products: long K, few rows of a).
#define RLX_QSCALE_F16
#include "common.glsl"

shared float red[LS];

void main()
{
    int n_out = M(0);
    bool rowm = P(6) != 0;
    int t = int(gl_LocalInvocationID.x);
    int lin = rowm ? int(item_base()) : int(item_base() * LS + gl_LocalInvocationID.x);
    if (lin >= n_out) return;
    int r = D_RANK(OUT);
    int N = D_NE(OUT, r - 1), Mr = D_NE(OUT, r - 2);
    int n = lin % N, m = (lin / N) % Mr, bl = lin / N / Mr;
    int ao = m * D_ST(0, r - 2), bo = n * D_ST(1, r - 1), oo = m * D_ST(OUT, r - 2) + n * D_ST(OUT, r - 1);
    for (int d = r - 3; d >= 0; d--) {
        int c = bl % D_NE(OUT, d);
        bl /= D_NE(OUT, d);
        ao += c * D_ST(0, d);
        bo += c * D_ST(1, d);
        oo += c * D_ST(OUT, d);
    }
    int K = P(0);
    int adt = D_DT(0), bdt = D_DT(1);
    uint aoff = D_OFF(0), boff = D_OFF(1);
    int ask = D_ST(0, r - 1), bsk = D_ST(1, r - 2);
    float acc = 0.0;
    int k0 = rowm ? t : 0, kstep = rowm ? int(LS) : 1;
    if (P(4) != 0) {
        uint rowb = uint(P(5));
        int bk = qbk(bdt), qb = qbytes(bdt);
        uint rowa = boff + uint(n) * rowb;
        for (int kb = k0 * bk; kb < K; kb += kstep * bk) {
            uint blk = rowa + uint(kb / bk * qb);
            for (int i = 0; i < bk; i++)
                acc += ldf(0, adt, aoff, ao + (kb + i) * ask) * deq(1, bdt, blk, i);
        }
    } else if (adt == DT_F32 && bdt == DT_F32) {
        uint ai = (aoff >> 2) + uint(ao), bi = (boff >> 2) + uint(bo);
        for (int k = k0; k < K; k += kstep)
            acc += uintBitsToFloat(B0.d[ai + uint(k * ask)]) * uintBitsToFloat(B1.d[bi + uint(k * bsk)]);
    } else {
        for (int k = k0; k < K; k += kstep)
            acc += ldf(0, adt, aoff, ao + k * ask) * ldf(1, bdt, boff, bo + k * bsk);
    }
    if (rowm) {
        red[t] = acc;
        barrier();
        for (int s = int(LS) / 2; s > 0; s >>= 1) {
            if (t < s) red[t] += red[t + s];
            barrier();
        }
        if (t != 0) return;
        acc = red[0];
    }
    float alpha = PF(2);
    float v = acc * (alpha == 0.0 ? 1.0 : alpha);
    if (P(3) != 0) v += ldf(2, D_DT(2), D_OFF(2), n * D_ST(2, 0));
    stf(D_DT(OUT), D_OFF(OUT), oo, act(P(1), v));
}
