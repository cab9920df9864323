#version 450
// One thread per rotated pair (or passed-through dim) of one row.
// P(0) rows, P(1) D, P(2) half, P(3) n_rot, P(4) neox, PF(5) base,
// PF(6) freq scale, P(7) freq factors, P(8) seq axis.
#include "common.glsl"

void main()
{
    int it = int(item_base() * LS + gl_LocalInvocationID.x);
    int D = P(1), half_ = P(2);
    int per = D - half_;
    if (it >= P(0) * per) return;
    int row = it / per, j = it % per;
    int r = D_RANK(0), sa = P(8);
    int xo = 0, oo = 0, sidx = 0, l = row;
    for (int d = r - 2; d >= 0; d--) {
        int c = l % D_NE(0, d);
        l /= D_NE(0, d);
        xo += c * D_ST(0, d);
        oo += c * D_ST(OUT, d);
        if (d == sa) sidx = c;
    }
    int xs = D_ST(0, r - 1), os = D_ST(OUT, r - 1);
    int xdt = D_DT(0), odt = D_DT(OUT);
    uint xoff = D_OFF(0), ooff = D_OFF(OUT);
    if (j >= half_) {
        int i = 2 * half_ + (j - half_);
        stf(odt, ooff, oo + i * os, ldf(0, xdt, xoff, xo + i * xs));
        return;
    }
    float pos = float(ldi(1, D_DT(1), D_OFF(1), sidx * D_ST(1, D_RANK(1) - 1)));
    float f = PF(6) * pow(PF(5), -2.0 * float(j) / float(P(3)));
    if (P(7) != 0) f /= ldf(2, D_DT(2), D_OFF(2), j * D_ST(2, D_RANK(2) - 1));
    float th = pos * f;
    float cs = cos(th), sn = sin(th);
    int i0 = P(4) != 0 ? j : 2 * j, i1 = P(4) != 0 ? j + half_ : 2 * j + 1;
    float x0 = ldf(0, xdt, xoff, xo + i0 * xs), x1 = ldf(0, xdt, xoff, xo + i1 * xs);
    stf(odt, ooff, oo + i0 * os, x0 * cs - x1 * sn);
    stf(odt, ooff, oo + i1 * os, x0 * sn + x1 * cs);
}
