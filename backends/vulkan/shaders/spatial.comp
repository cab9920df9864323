#version 450
// Resize (nearest / bilinear) and 2-D pooling over the last two dims, one
// thread per output element. P(0) mode (0 nearest, 1 bilinear, 2 max,
// 3 avg), P(1) align corners, P(2..7) kh kw sh sw ph pw.
#include "common.glsl"

void main()
{
    int it = int(item_base() * LS + gl_LocalInvocationID.x);
    if (it >= M(0)) return;
    int r = D_RANK(OUT);
    int OH = D_NE(OUT, r - 2), OW = D_NE(OUT, r - 1), IH = D_NE(0, r - 2), IW = D_NE(0, r - 1);
    int ox = it % OW, oy = (it / OW) % OH, l = it / OW / OH;
    int xo = 0, oo = oy * D_ST(OUT, r - 2) + ox * D_ST(OUT, r - 1);
    for (int d = r - 3; d >= 0; d--) {
        int c = l % D_NE(OUT, d);
        l /= D_NE(OUT, d);
        xo += c * D_ST(0, d);
        oo += c * D_ST(OUT, d);
    }
    int sy = D_ST(0, r - 2), sx = D_ST(0, r - 1), xdt = D_DT(0);
    uint xoff = D_OFF(0);
    int mode = P(0);
    float v;
    if (mode == 0) {
        // floor(o * in / out), exactly
        int iy = min(oy * IH / OH, IH - 1);
        int ix = min(ox * IW / OW, IW - 1);
        v = ldf(0, xdt, xoff, xo + iy * sy + ix * sx);
    } else if (mode == 1) {
        // source coordinates as exact rationals: floor and fraction without
        // float rounding in the position itself
        int y0, x0;
        float ly, lx;
        if (P(1) != 0) {
            int ny = OH > 1 ? oy * (IH - 1) : 0, dy = OH > 1 ? OH - 1 : 1;
            int nx = OW > 1 ? ox * (IW - 1) : 0, dx = OW > 1 ? OW - 1 : 1;
            y0 = ny / dy; ly = float(ny - y0 * dy) / float(dy);
            x0 = nx / dx; lx = float(nx - x0 * dx) / float(dx);
        } else {
            int ny = (2 * oy + 1) * IH - OH, dy = 2 * OH;
            int nx = (2 * ox + 1) * IW - OW, dx = 2 * OW;
            if (ny < 0) ny = 0;
            if (nx < 0) nx = 0;
            y0 = ny / dy; ly = float(ny - y0 * dy) / float(dy);
            x0 = nx / dx; lx = float(nx - x0 * dx) / float(dx);
        }
        if (y0 > IH - 1) { y0 = IH - 1; ly = 0.0; }
        if (x0 > IW - 1) { x0 = IW - 1; lx = 0.0; }
        int y1 = min(y0 + 1, IH - 1), x1 = min(x0 + 1, IW - 1);
        float a = ldf(0, xdt, xoff, xo + y0 * sy + x0 * sx), b = ldf(0, xdt, xoff, xo + y0 * sy + x1 * sx);
        float c = ldf(0, xdt, xoff, xo + y1 * sy + x0 * sx), d = ldf(0, xdt, xoff, xo + y1 * sy + x1 * sx);
        v = (1.0 - ly) * ((1.0 - lx) * a + lx * b) + ly * ((1.0 - lx) * c + lx * d);
    } else {
        int kh = P(2), kw = P(3), sh = P(4), sw = P(5), ph = P(6), pw = P(7);
        int hs = oy * sh - ph, ws = ox * sw - pw;
        int he = min(hs + kh, IH + ph), we = min(ws + kw, IW + pw);
        int area = (he - hs) * (we - ws);
        int h0 = max(hs, 0), w0 = max(ws, 0), h1 = min(he, IH), w1 = min(we, IW);
        bool mx = mode == 2;
        float acc = mx ? -1.0 / 0.0 : 0.0;
        for (int iy = h0; iy < h1; iy++)
            for (int ix = w0; ix < w1; ix++) {
                float x = ldf(0, xdt, xoff, xo + iy * sy + ix * sx);
                acc = mx ? (x > acc ? x : acc) : acc + x;
            }
        if (!mx) acc = area > 0 ? acc / float(area) : 0.0;
        v = acc;
    }
    stf(D_DT(OUT), D_OFF(OUT), oo, v);
}
