// Resize (nearest / bilinear) and 2-D pooling over the last two dims, one
// thread per output element. P(0) mode (0 nearest, 1 bilinear, 2 max,
// 3 avg), P(1) align corners, P(2..7) kh kw sh sw ph pw.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) rlx_spatial(const int *rec)
{
    REC_DECL;
    ld_rec(R_, rec);
    int64_t total = (int64_t)(uint32_t)M_(0);
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < total;
         it += (int64_t)gridDim.x * blockDim.x) {
        int r = D_RANK(OUT);
        int OH = D_NE(OUT, r - 2), OW = D_NE(OUT, r - 1), IH = D_NE(0, r - 2), IW = D_NE(0, r - 1);
        int ox = (int)(it % OW), oy = (int)((it / OW) % OH);
        int64_t l = it / OW / OH;
        int64_t xo = 0, oo = (int64_t)oy * D_ST(OUT, r - 2) + (int64_t)ox * D_ST(OUT, r - 1);
        for (int d = r - 3; d >= 0; d--) {
            int c = (int)(l % D_NE(OUT, d));
            l /= D_NE(OUT, d);
            xo += (int64_t)c * D_ST(0, d);
            oo += (int64_t)c * D_ST(OUT, d);
        }
        int64_t sy = D_ST(0, r - 2), sx = D_ST(0, r - 1);
        int xdt = D_DT(0);
        const uint8_t *xp = D_PTR(0);
        int mode = P(0);
        float v;
        if (mode == 0) {
            // floor(o * in / out), exactly
            int iy = min((int)((int64_t)oy * IH / OH), IH - 1);
            int ix = min((int)((int64_t)ox * IW / OW), IW - 1);
            v = ldf(xp, xdt, xo + iy * sy + ix * sx);
        } else if (mode == 1) {
            // source coordinates as exact rationals
            int y0, x0;
            float ly, lx;
            if (P(1)) {
                int64_t ny = OH > 1 ? (int64_t)oy * (IH - 1) : 0, dy = OH > 1 ? OH - 1 : 1;
                int64_t nx = OW > 1 ? (int64_t)ox * (IW - 1) : 0, dx = OW > 1 ? OW - 1 : 1;
                y0 = (int)(ny / dy);
                ly = (float)(ny - y0 * dy) / (float)dy;
                x0 = (int)(nx / dx);
                lx = (float)(nx - x0 * dx) / (float)dx;
            } else {
                int64_t ny = (int64_t)(2 * oy + 1) * IH - OH, dy = 2 * (int64_t)OH;
                int64_t nx = (int64_t)(2 * ox + 1) * IW - OW, dx = 2 * (int64_t)OW;
                if (ny < 0)
                    ny = 0;
                if (nx < 0)
                    nx = 0;
                y0 = (int)(ny / dy);
                ly = (float)(ny - y0 * dy) / (float)dy;
                x0 = (int)(nx / dx);
                lx = (float)(nx - x0 * dx) / (float)dx;
            }
            if (y0 > IH - 1) {
                y0 = IH - 1;
                ly = 0.0f;
            }
            if (x0 > IW - 1) {
                x0 = IW - 1;
                lx = 0.0f;
            }
            int y1 = min(y0 + 1, IH - 1), x1 = min(x0 + 1, IW - 1);
            float a = ldf(xp, xdt, xo + y0 * sy + x0 * sx),
                  b = ldf(xp, xdt, xo + y0 * sy + x1 * sx);
            float c = ldf(xp, xdt, xo + y1 * sy + x0 * sx),
                  d = ldf(xp, xdt, xo + y1 * sy + x1 * sx);
            v = (1.0f - ly) * ((1.0f - lx) * a + lx * b) + ly * ((1.0f - lx) * c + lx * d);
        } else {
            int kh = P(2), kw = P(3), sh = P(4), sw = P(5), ph = P(6), pw = P(7);
            int hs = oy * sh - ph, ws = ox * sw - pw;
            int he = min(hs + kh, IH + ph), we = min(ws + kw, IW + pw);
            int area = (he - hs) * (we - ws);
            int h0 = max(hs, 0), w0 = max(ws, 0), h1 = min(he, IH), w1 = min(we, IW);
            bool mx = mode == 2;
            float acc = mx ? -INFINITY : 0.0f;
            for (int iy = h0; iy < h1; iy++)
                for (int ix = w0; ix < w1; ix++) {
                    float x = ldf(xp, xdt, xo + iy * sy + ix * sx);
                    acc = mx ? (x > acc ? x : acc) : acc + x;
                }
            if (!mx)
                acc = area > 0 ? acc / (float)area : 0.0f;
            v = acc;
        }
        stf((uint8_t *)D_PTR(OUT), D_DT(OUT), oo, v);
    }
}
