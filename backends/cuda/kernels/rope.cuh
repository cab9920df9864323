// Rotary position embedding, one rotated pair (or passed-through dim) of
// one row an item, shared by rlx_rope (its launch) and the integer
// matrix-vector kernels (a q or k product's block that finishes a head
// last ropes it, see matmul.cu's mmv_heads). The record is rlx_rope's:
// P(0) rows, P(1) D, P(2) half, P(3) n_rot, P(4) neox, PF(5) base, PF(6)
// freq scale, P(7) freq factors, P(8) seq axis. CG reads f32 rows past L1
// (written by other blocks of the same kernel).
#pragma once
#include "common.cuh"

template <bool CG> __device__ __forceinline__ float rope_ld(const uint8_t *p, int dt, int64_t e)
{
    return CG && dt == DT_F32 ? __ldcg((const float *)p + e) : ldf(p, dt, e);
}

// item `it` of P(0) * (D - half): row it / (D - half), pair it % (D - half)
template <bool CG> __device__ __forceinline__ void rope_item(const int *R_, int64_t it)
{
    int D = P(1), half_ = P(2);
    int per = D - half_;
    int64_t row = it / per;
    int j = (int)(it % per);
    int r = D_RANK(0), sa = P(8);
    int64_t xo = 0, oo = 0, l = row;
    int sidx = 0;
    for (int d = r - 2; d >= 0; d--) {
        int c = (int)(l % D_NE(0, d));
        l /= D_NE(0, d);
        xo += (int64_t)c * D_ST(0, d);
        oo += (int64_t)c * D_ST(OUT, d);
        if (d == sa)
            sidx = c;
    }
    int64_t xs = D_ST(0, r - 1), os = D_ST(OUT, r - 1);
    int xdt = D_DT(0), odt = D_DT(OUT);
    const uint8_t *xp = D_PTR(0);
    uint8_t *op = (uint8_t *)D_PTR(OUT);
    if (j >= half_) {
        int i = 2 * half_ + (j - half_);
        stf(op, odt, oo + i * os, rope_ld<CG>(xp, xdt, xo + i * xs));
        return;
    }
    float pos = (float)ldi(D_PTR(1), D_DT(1), (int64_t)sidx * D_ST(1, D_RANK(1) - 1));
    float f = PF(6) * powf(PF(5), -2.0f * (float)j / (float)P(3));
    if (P(7))
        f /= ldf(D_PTR(2), D_DT(2), (int64_t)j * D_ST(2, D_RANK(2) - 1));
    float th = pos * f;
    float cs, sn;
    sincosf(th, &sn, &cs);
    int i0 = P(4) ? j : 2 * j, i1 = P(4) ? j + half_ : 2 * j + 1;
    float a = rope_ld<CG>(xp, xdt, xo + i0 * xs), b = rope_ld<CG>(xp, xdt, xo + i1 * xs);
    stf(op, odt, oo + i0 * os, a * cs - b * sn);
    stf(op, odt, oo + i1 * os, a * sn + b * cs);
}
