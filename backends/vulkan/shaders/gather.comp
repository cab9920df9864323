#version 450
// out[i.., d] = table[ids[i..], d], one thread per output element; the
// table may be block-quantized (rows of P(1) bytes). An id outside [0, V)
// zeroes its row and flags the run. P(0) D, P(1) row bytes, P(2) V.
#include "common.glsl"

void main()
{
    int it = int(item_base() * LS + gl_LocalInvocationID.x);
    if (it >= M(0)) return;
    int D = P(0), V = P(2);
    int i = it / D, d = it % D;
    int id = ldi(1, D_DT(1), D_OFF(1), lin_off(1, i));
    float v = 0.0;
    int tdt = D_DT(0);
    if (id < 0 || id >= V) {
        set_error();
    } else if (is_quant(tdt)) {
        v = ldq(0, tdt, D_OFF(0), uint(P(1)), id, d);
    } else {
        v = ldf(0, tdt, D_OFF(0), id * D_ST(0, 0) + d * D_ST(0, 1));
    }
    stf(D_DT(OUT), D_OFF(OUT), lin_off(OUT, it), v);
}
