#version 450
// Direct convolution / transposed convolution, one thread per output
// element of [N, OC, OH, OW] (1-D as H = 1).
// P(0..8) N OC OH OW IC IH IW KH KW, P(9..14) sh sw ph pw dh dw, P(15) G,
// P(16) transpose, P(17) bias; strides x P(20..23), w P(24..27), o P(28..31).
#include "common.glsl"

void main()
{
    int it = int(item_base() * LS + gl_LocalInvocationID.x);
    int N = P(0), OC = P(1), OH = P(2), OW = P(3), IC = P(4), IH = P(5), IW = P(6), KH = P(7), KW = P(8);
    if (it >= N * OC * OH * OW) return;
    int ox = it % OW, oy = (it / OW) % OH, oc = (it / OW / OH) % OC, n = it / OW / OH / OC;
    int sh = P(9), sw = P(10), ph = P(11), pw = P(12), dh = P(13), dw = P(14), G = P(15);
    bool tr = P(16) != 0;
    int icg = IC / G, ocg = OC / G, g = oc / ocg;
    int xdt = D_DT(0), wdt = D_DT(1);
    uint xoff = D_OFF(0), woff = D_OFF(1);
    float acc = P(17) != 0 ? ldf(2, D_DT(2), D_OFF(2), oc * D_ST(2, D_RANK(2) - 1)) : 0.0;
    for (int icl = 0; icl < icg; icl++) {
        int ic = g * icg + icl;
        int wb = tr ? ic * P(24) + (oc - g * ocg) * P(25) : oc * P(24) + icl * P(25);
        int xb = n * P(20) + ic * P(21);
        for (int ky = 0; ky < KH; ky++) {
            int iy;
            if (!tr) {
                iy = oy * sh - ph + ky * dh;
            } else {
                int q = oy + ph - ky * dh;
                if (q < 0 || q % sh != 0) continue;
                iy = q / sh;
            }
            if (iy < 0 || iy >= IH) continue;
            for (int kx = 0; kx < KW; kx++) {
                int ix;
                if (!tr) {
                    ix = ox * sw - pw + kx * dw;
                } else {
                    int q = ox + pw - kx * dw;
                    if (q < 0 || q % sw != 0) continue;
                    ix = q / sw;
                }
                if (ix < 0 || ix >= IW) continue;
                acc += ldf(0, xdt, xoff, xb + iy * P(22) + ix * P(23)) *
                       ldf(1, wdt, woff, wb + ky * P(26) + kx * P(27));
            }
        }
    }
    stf(D_DT(OUT), D_OFF(OUT), n * P(28) + oc * P(29) + oy * P(30) + ox * P(31), acc);
}
