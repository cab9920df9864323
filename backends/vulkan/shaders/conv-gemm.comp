#version 450
// Convolution as a register-blocked product (implicit GEMM): out[OC x pixels]
// = W[OC x IC/G*KH*KW] * im2col(x), never materializing im2col. Same record
// as conv.comp (P(0..31)), so the host's splits along the batch, output
// channels and output rows apply unchanged; not for transposed convs, and
// with groups only where a workgroup's OB channels lie in one group
// (vk-program.c: conv_gemm_ok).
//
// A workgroup computes OB output channels x LS*PB pixels of one image; each
// thread PB pixels (LS apart, so a subgroup's loads of x are consecutive)
// x the OB channels. Every thread of the workgroup uses the same channels:
// the weight loads' addresses are uniform (one scalar load on a CPU driver,
// which runs invocations as SIMD lanes, a broadcast on a GPU) and the loops
// run over taps with uniform bounds, so no lane diverges; only the loads of
// x are per lane, bounds of the padding and dilation folded into a select.
// Each x value loaded is used OB times, each weight LS*PB times, from
// registers, with no shared memory and no barrier (on lavapipe a barrier
// switches between coroutines, which dominated the direct kernel).
#include "common.glsl"

#ifndef OB
#define OB 8
#endif
#ifndef PB
#define PB 8
#endif

// the loop nest over taps; XL(e) loads x element e (from its operand's
// start), WL(e) weight element e. Instantiated per dtype pair so the
// common ones (f32 x with f32 or f16 w) have no dtype branch inside.
#define CONV_LOOP(XL, WL)                                                                          \
    for (int ic = icbeg; ic < icend; ic++) {                                                       \
        int xb = n * xs0 + ic * xs1;                                                               \
        int wb = (ic - icbeg) * ws1;                                                               \
        for (int ky = 0; ky < KH; ky++) {                                                          \
            int roff[PB];                                                                          \
            bool rok[PB];                                                                          \
            [[unroll]] for (int p = 0; p < PB; p++) {                                              \
                int iy = iy0[p] + ky * dh;                                                         \
                rok[p] = live[p] && iy >= 0 && iy < IH;                                            \
                roff[p] = xb + iy * xs2;                                                           \
            }                                                                                      \
            for (int kx = 0; kx < KW; kx++) {                                                      \
                float xv[PB];                                                                      \
                [[unroll]] for (int p = 0; p < PB; p++) {                                          \
                    int ix = ix0[p] + kx * dw;                                                     \
                    bool ok = rok[p] && ix >= 0 && ix < IW;                                        \
                    float v = XL(ok ? roff[p] + ix * xs3 : 0);                                     \
                    xv[p] = ok ? v : 0.0;                                                          \
                }                                                                                  \
                int wo = wb + ky * ws2 + kx * ws3;                                                 \
                [[unroll]] for (int j = 0; j < OB; j++) {                                          \
                    float wv = WL(wrow[j] + wo);                                                   \
                    [[unroll]] for (int p = 0; p < PB; p++) acc[j][p] += wv * xv[p];               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

#define XL_F32(e) uintBitsToFloat(B0.d[xw + uint(e)])
#define XL_ANY(e) ldf(0, xdt, xoff, (e))
#define WL_F32(e) uintBitsToFloat(B1.d[ww + uint(e)])
#define WL_F16(e) ldh(1, woff + uint(e) * 2u)
#define WL_ANY(e) ldf(1, wdt, woff, (e))

void main()
{
    int N = P(0), OC = P(1), OH = P(2), OW = P(3), IC = P(4), IH = P(5), IW = P(6), KH = P(7), KW = P(8);
    int sh = P(9), sw = P(10), ph = P(11), pw = P(12), dh = P(13), dw = P(14), G = P(15);
    int xs0 = P(20), xs1 = P(21), xs2 = P(22), xs3 = P(23);
    int ws0 = P(24), ws1 = P(25), ws2 = P(26), ws3 = P(27);
    int os0 = P(28), os1 = P(29), os2 = P(30), os3 = P(31);
    int npix = OH * OW, tpix = int(LS) * PB;
    int ntile = (npix + tpix - 1) / tpix, nob = (OC + OB - 1) / OB;
    int gid = int(item_base());
    if (gid >= N * nob * ntile) return;
    // channel blocks vary fastest: neighbouring workgroups read the same
    // band of x while it is in cache
    int ob = gid % nob, tile = (gid / nob) % ntile, n = gid / nob / ntile;
    int t = int(gl_LocalInvocationID.x);
    int oc0 = ob * OB;
    int icg = IC / G, ocg = OC / G;
    int icbeg = (oc0 / ocg) * icg, icend = icbeg + icg;
    int xdt = D_DT(0), wdt = D_DT(1);
    uint xoff = D_OFF(0), woff = D_OFF(1);
    uint xw = xoff >> 2, ww = woff >> 2;

    int pix[PB], iy0[PB], ix0[PB];
    bool live[PB];
    [[unroll]] for (int p = 0; p < PB; p++) {
        pix[p] = tile * tpix + p * int(LS) + t;
        live[p] = pix[p] < npix;
        int q = live[p] ? pix[p] : 0;
        iy0[p] = (q / OW) * sh - ph;
        ix0[p] = (q % OW) * sw - pw;
    }
    // a channel past OC reads the last one's weights (uniformly; not stored)
    int wrow[OB];
    [[unroll]] for (int j = 0; j < OB; j++) wrow[j] = min(oc0 + j, OC - 1) * ws0;
    float acc[OB][PB];
    [[unroll]] for (int j = 0; j < OB; j++)
        [[unroll]] for (int p = 0; p < PB; p++) acc[j][p] = 0.0;

    bool xf32 = xdt == DT_F32;
    if (xf32 && wdt == DT_F32) {
        CONV_LOOP(XL_F32, WL_F32)
    } else if (xf32 && wdt == DT_F16) {
        CONV_LOOP(XL_F32, WL_F16)
    } else {
        CONV_LOOP(XL_ANY, WL_ANY)
    }

    bool bias = P(17) != 0;
    [[unroll]] for (int j = 0; j < OB; j++) {
        int oc = oc0 + j;
        if (oc >= OC) break;
        float b = bias ? ldf(2, D_DT(2), D_OFF(2), oc * D_ST(2, D_RANK(2) - 1)) : 0.0;
        [[unroll]] for (int p = 0; p < PB; p++) {
            if (!live[p]) continue;
            int oy = pix[p] / OW, ox = pix[p] % OW;
            stf(D_DT(OUT), D_OFF(OUT), n * os0 + oc * os1 + oy * os2 + ox * os3,
                act(P(19), acc[j][p] + b));
        }
    }
}
