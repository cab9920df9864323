#version 450
// Direct convolution / transposed convolution of [N, OC, OH, OW] (1-D as
// H = 1).
// P(0..8) N OC OH OW IC IH IW KH KW, P(9..14) sh sw ph pw dh dw, P(15) G,
// P(16) transpose, P(17) bias, P(19) fused activation (rlx_act); strides x P(20..23), w P(24..27), o P(28..31).
#include "common.glsl"

// Workgroup = 64 output pixels x 8 output channels of one image: the 8
// channels' weights for one input channel are staged in shared memory, up to
// 49 taps at a time (a bigger kernel, e.g. a 16x16 patch embedding, runs its
// taps in chunks of 49), and each x value is loaded once for all 8 (P(18) = 1
// when x is F32, read straight from the words; so is an F32 w, while an F16
// one, as ONNX models store them, is widened as it is staged).
#define OCT 8
#define MAXK 49
shared float wsh[OCT * MAXK];

void main()
{
    int N = P(0), OC = P(1), OH = P(2), OW = P(3), IC = P(4), IH = P(5), IW = P(6), KH = P(7), KW = P(8);
    int sh = P(9), sw = P(10), ph = P(11), pw = P(12), dh = P(13), dw = P(14), G = P(15);
    bool tr = P(16) != 0, f32 = P(18) != 0;
    int xs0 = P(20), xs1 = P(21), xs2 = P(22), xs3 = P(23);
    int ws0 = P(24), ws1 = P(25), ws2 = P(26), ws3 = P(27);
    int os0 = P(28), os1 = P(29), os2 = P(30), os3 = P(31);
    int npix = OH * OW, ntile = (npix + int(LS) - 1) / int(LS), noct = (OC + OCT - 1) / OCT;
    int gid = int(item_base());
    if (gid >= N * noct * ntile) return;
    int tile = gid % ntile, octile = (gid / ntile) % noct, n = gid / ntile / noct;
    int t = int(gl_LocalInvocationID.x);
    int pix = tile * int(LS) + t;
    bool live = pix < npix;
    int ox = live ? pix % OW : 0, oy = live ? pix / OW : 0;
    int oc0 = octile * OCT;
    int icg = IC / G, ocg = OC / G;
    int xdt = D_DT(0), wdt = D_DT(1);
    uint xoff = D_OFF(0), woff = D_OFF(1);
    uint xw = xoff >> 2, ww = woff >> 2;
    int KK = KH * KW;
    float acc[OCT];
    [[unroll]] for (int j = 0; j < OCT; j++) acc[j] = 0.0;
    // the group of oc0 (a tile never straddles groups when ocg % OCT == 0;
    // otherwise each channel checks its own group below)
    bool same_group = (ocg % OCT) == 0;
    int g0 = oc0 / ocg;
    int icbeg = same_group ? g0 * icg : 0, icend = same_group ? (g0 + 1) * icg : IC;
    for (int ic = icbeg; ic < icend; ic++) {
        int xb = n * xs0 + ic * xs1;
        for (int k0 = 0; k0 < KK; k0 += MAXK) {
            int nk = min(KK - k0, MAXK);
            // stage weights of (oc0..oc0+7, ic) for taps k0..k0+nk-1
            barrier();
            for (int i = t; i < OCT * nk; i += int(LS)) {
                int j = i / nk, kk = k0 + i % nk, oc = oc0 + j;
                float wv = 0.0;
                if (oc < OC && ic / icg == oc / ocg) {
                    int icl = ic - (oc / ocg) * icg;
                    int wo = tr ? ic * ws0 + (oc - (oc / ocg) * ocg) * ws1 : oc * ws0 + icl * ws1;
                    wo += (kk / KW) * ws2 + (kk % KW) * ws3;
                    wv = wdt == DT_F32 ? uintBitsToFloat(B1.d[ww + uint(wo)]) : ldf(1, wdt, woff, wo);
                }
                wsh[i] = wv;
            }
            barrier();
            if (!live) continue;
            int k1 = k0 + nk;
            for (int ky = k0 / KW; ky * KW < k1; ky++) {
                int iy;
                if (!tr) {
                    iy = oy * sh - ph + ky * dh;
                } else {
                    int q = oy + ph - ky * dh;
                    if (q < 0 || q % sh != 0) continue;
                    iy = q / sh;
                }
                if (iy < 0 || iy >= IH) continue;
                int kx0 = max(k0 - ky * KW, 0), kx1 = min(k1 - ky * KW, KW);
                for (int kx = kx0; kx < kx1; kx++) {
                    int ix;
                    if (!tr) {
                        ix = ox * sw - pw + kx * dw;
                    } else {
                        int q = ox + pw - kx * dw;
                        if (q < 0 || q % sw != 0) continue;
                        ix = q / sw;
                    }
                    if (ix < 0 || ix >= IW) continue;
                    int xo = xb + iy * xs2 + ix * xs3;
                    float xv = f32 ? uintBitsToFloat(B0.d[xw + uint(xo)]) : ldf(0, xdt, xoff, xo);
                    int kk = ky * KW + kx - k0;
                    [[unroll]] for (int j = 0; j < OCT; j++) acc[j] += xv * wsh[j * nk + kk];
                }
            }
        }
    }
    if (!live) return;
    for (int j = 0; j < OCT; j++) {
        int oc = oc0 + j;
        if (oc >= OC) break;
        float v = acc[j];
        if (P(17) != 0) v += ldf(2, D_DT(2), D_OFF(2), oc * D_ST(2, D_RANK(2) - 1));
        stf(D_DT(OUT), D_OFF(OUT), n * os0 + oc * os1 + oy * os2 + ox * os3, act(P(19), v));
    }
}
