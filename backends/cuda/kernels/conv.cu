// Direct convolution / transposed convolution of [N, OC, OH, OW] (1-D as
// H = 1). A block = LS output pixels x 8 output channels of one image: the
// 8 channels' weights for one input channel are staged in shared memory,
// up to 49 taps at a time, and each x value is loaded once for all 8.
// P(0..8) N OC OH OW IC IH IW KH KW, P(9..14) sh sw ph pw dh dw, P(15) G,
// P(16) transpose, P(17) bias, P(19) fused activation (rlx_act); strides x P(20..23), w P(24..27),
// o P(28..31).
#include "common.cuh"

#define LS   128
#define OCT  8
#define MAXK 49

extern "C" __global__ void __launch_bounds__(LS) rlx_conv(const int *rec)
{
    REC_DECL;
    __shared__ float wsh[OCT * MAXK];
    ld_rec(R_, rec);
    int N = P(0), OC = P(1), OH = P(2), OW = P(3), IC = P(4), IH = P(5), IW = P(6), KH = P(7),
        KW = P(8);
    int sh = P(9), sw = P(10), ph = P(11), pw = P(12), dh = P(13), dw = P(14), G = P(15);
    bool tr = P(16) != 0;
    int64_t xs0 = P(20), xs1 = P(21), xs2 = P(22), xs3 = P(23);
    int64_t ws0 = P(24), ws1 = P(25), ws2 = P(26), ws3 = P(27);
    int64_t os0 = P(28), os1 = P(29), os2 = P(30), os3 = P(31);
    int npix = OH * OW, ntile = (npix + LS - 1) / LS, noct = (OC + OCT - 1) / OCT;
    int64_t gid = blockIdx.x;
    if (gid >= (int64_t)N * noct * ntile)
        return;
    int tile = (int)(gid % ntile), octile = (int)((gid / ntile) % noct),
        n = (int)(gid / ntile / noct);
    int t = threadIdx.x;
    int pix = tile * LS + t;
    bool live = pix < npix;
    int ox = live ? pix % OW : 0, oy = live ? pix / OW : 0;
    int oc0 = octile * OCT;
    int icg = IC / G, ocg = OC / G;
    const uint8_t *xp = D_PTR(0), *wp = D_PTR(1);
    int xdt = D_DT(0), wdt = D_DT(1);
    int KK = KH * KW;
    float acc[OCT];
#pragma unroll
    for (int j = 0; j < OCT; j++)
        acc[j] = 0.0f;
    bool same_group = (ocg % OCT) == 0;
    int g0 = oc0 / ocg;
    int icbeg = same_group ? g0 * icg : 0, icend = same_group ? (g0 + 1) * icg : IC;
    for (int ic = icbeg; ic < icend; ic++) {
        int64_t xb = (int64_t)n * xs0 + (int64_t)ic * xs1;
        for (int k0 = 0; k0 < KK; k0 += MAXK) {
            int nk = min(KK - k0, MAXK);
            __syncthreads();
            for (int i = t; i < OCT * nk; i += LS) {
                int j = i / nk, kk = k0 + i % nk, oc = oc0 + j;
                float wv = 0.0f;
                if (oc < OC && ic / icg == oc / ocg) {
                    int icl = ic - (oc / ocg) * icg;
                    int64_t wo = tr ? (int64_t)ic * ws0 + (int64_t)(oc - (oc / ocg) * ocg) * ws1
                                    : (int64_t)oc * ws0 + (int64_t)icl * ws1;
                    wo += (int64_t)(kk / KW) * ws2 + (int64_t)(kk % KW) * ws3;
                    wv = ldf(wp, wdt, wo);
                }
                wsh[i] = wv;
            }
            __syncthreads();
            if (!live)
                continue;
            int k1 = k0 + nk;
            for (int ky = k0 / KW; ky * KW < k1; ky++) {
                int iy;
                if (!tr) {
                    iy = oy * sh - ph + ky * dh;
                } else {
                    int q = oy + ph - ky * dh;
                    if (q < 0 || q % sh != 0)
                        continue;
                    iy = q / sh;
                }
                if (iy < 0 || iy >= IH)
                    continue;
                int kx0 = max(k0 - ky * KW, 0), kx1 = min(k1 - ky * KW, KW);
                for (int kx = kx0; kx < kx1; kx++) {
                    int ix;
                    if (!tr) {
                        ix = ox * sw - pw + kx * dw;
                    } else {
                        int q = ox + pw - kx * dw;
                        if (q < 0 || q % sw != 0)
                            continue;
                        ix = q / sw;
                    }
                    if (ix < 0 || ix >= IW)
                        continue;
                    float xv = ldf(xp, xdt, xb + (int64_t)iy * xs2 + (int64_t)ix * xs3);
                    int kk = ky * KW + kx - k0;
#pragma unroll
                    for (int j = 0; j < OCT; j++)
                        acc[j] += xv * wsh[j * nk + kk];
                }
            }
        }
    }
    if (!live)
        return;
    for (int j = 0; j < OCT; j++) {
        int oc = oc0 + j;
        if (oc >= OC)
            break;
        float v = acc[j];
        if (P(17))
            v += ldf(D_PTR(2), D_DT(2), (int64_t)oc * D_ST(2, D_RANK(2) - 1));
        stf((uint8_t *)D_PTR(OUT), D_DT(OUT),
            (int64_t)n * os0 + (int64_t)oc * os1 + (int64_t)oy * os2 + (int64_t)ox * os3,
            act(P(19), v));
    }
}
