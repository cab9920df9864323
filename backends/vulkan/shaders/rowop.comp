#version 450
// One workgroup per row along an axis (moved last by the host): reductions,
// argmax/topk, softmax and the norms. P(0) length L, P(1) mode, then per
// mode: topk k P(2), largest P(3), indices P(4); softmax scale PF(2),
// softcap PF(3), mask P(4); norms eps PF(2), weight P(3), bias P(4),
// add_rms_norm keep_sum P(5) (non-zero: the output operand takes the sum
// and the norm goes P(5) bytes further on); group norm Cg P(5), S P(6).
#include "common.glsl"

shared float sv[LS];
shared int si[LS];

const int M_SUM = 0, M_MEAN = 1, M_MAX = 2, M_ARGMAX = 3, M_SOFTMAX = 4, M_LN = 5, M_RMS = 6,
          M_ADDRMS = 7, M_GN = 8, M_TOPK = 9;

int row_off(int k, int row)
{
    int r = D_RANK(0), o = 0;
    for (int d = r - 2; d >= 0; d--) {
        int n = D_NE(0, d);
        o += (row % n) * D_ST(k, d);
        row /= n;
    }
    return o;
}

float red_sum(float v)
{
    uint t = gl_LocalInvocationID.x;
    sv[t] = v;
    barrier();
    for (uint s = LS / 2u; s > 0u; s >>= 1) {
        if (t < s) sv[t] += sv[t + s];
        barrier();
    }
    float r = sv[0];
    barrier();
    return r;
}

float red_max(float v)
{
    uint t = gl_LocalInvocationID.x;
    sv[t] = v;
    barrier();
    for (uint s = LS / 2u; s > 0u; s >>= 1) {
        if (t < s) sv[t] = max(sv[t], sv[t + s]);
        barrier();
    }
    float r = sv[0];
    barrier();
    return r;
}

// (v, i) before (w, j) in the order topk emits
bool before(bool largest, float v, int i, float w, int j)
{
    if (j < 0) return i >= 0;
    if (i < 0) return false;
    if (v != w) return largest ? v > w : v < w;
    return i < j;
}

void red_best(bool largest, inout float v, inout int i)
{
    uint t = gl_LocalInvocationID.x;
    sv[t] = v;
    si[t] = i;
    barrier();
    for (uint s = LS / 2u; s > 0u; s >>= 1) {
        if (t < s && before(largest, sv[t + s], si[t + s], sv[t], si[t])) {
            sv[t] = sv[t + s];
            si[t] = si[t + s];
        }
        barrier();
    }
    v = sv[0];
    i = si[0];
    barrier();
}

float xs(int row0, int i)
{
    return ldf(0, D_DT(0), D_OFF(0), row0 + i * D_ST(0, D_RANK(0) - 1));
}

void main()
{
    int row = int(item_base());
    if (row >= M(0)) return;
    int L = P(0), mode = P(1);
    uint t = gl_LocalInvocationID.x;
    int r = D_RANK(0);
    int x0 = row_off(0, row), o0 = row_off(OUT, row);
    int odt = D_DT(OUT);
    uint ooff = D_OFF(OUT);
    int ost = D_ST(OUT, r - 1);

    if (mode == M_SUM || mode == M_MEAN) {
        float s = 0.0;
        for (int i = int(t); i < L; i += int(LS)) s += xs(x0, i);
        s = red_sum(s);
        if (t == 0u) stf(odt, ooff, o0, mode == M_MEAN ? s / float(L) : s);
    } else if (mode == M_MAX) {
        float s = -1.0 / 0.0;
        for (int i = int(t); i < L; i += int(LS)) {
            float v = xs(x0, i);
            if (v > s) s = v; // NaNs are skipped, as on the CPU
        }
        s = red_max(s);
        if (t == 0u) stf(odt, ooff, o0, s);
    } else if (mode == M_ARGMAX || mode == M_TOPK) {
        bool largest = mode == M_ARGMAX || P(3) != 0;
        int K = mode == M_ARGMAX ? 1 : P(2);
        float pv = 0.0;
        int pi = -1;
        for (int k = 0; k < K; k++) {
            float bv = 0.0;
            int bi = -1;
            for (int i = int(t); i < L; i += int(LS)) {
                float v = xs(x0, i);
                if (isnan(v)) continue;
                if (pi >= 0 && !before(largest, pv, pi, v, i)) continue;
                if (before(largest, v, i, bv, bi)) { bv = v; bi = i; }
            }
            red_best(largest, bv, bi);
            if (t == 0u) {
                if (mode == M_ARGMAX || P(4) != 0)
                    sti(odt, ooff, o0 + k * ost, max(bi, 0));
                else
                    stf(odt, ooff, o0 + k * ost, bv);
            }
            pv = bv;
            pi = bi;
        }
    } else if (mode == M_SOFTMAX) {
        float scale = PF(2) == 0.0 ? 1.0 : PF(2), cap = PF(3);
        bool hm = P(4) != 0;
        int m0 = hm ? row_off(1, row) : 0;
        int mst = hm ? D_ST(1, r - 1) : 0;
        float mx = -1.0 / 0.0;
        for (int i = int(t); i < L; i += int(LS)) {
            float s = xs(x0, i) * scale;
            if (cap != 0.0) s = cap * tanh_s(s / cap);
            if (hm) s += ldf(1, D_DT(1), D_OFF(1), m0 + i * mst);
            mx = max(mx, s);
        }
        mx = red_max(mx);
        float sum = 0.0;
        for (int i = int(t); i < L; i += int(LS)) {
            float s = xs(x0, i) * scale;
            if (cap != 0.0) s = cap * tanh_s(s / cap);
            if (hm) s += ldf(1, D_DT(1), D_OFF(1), m0 + i * mst);
            sum += mx == -1.0 / 0.0 ? 0.0 : exp(s - mx);
        }
        sum = red_sum(sum);
        for (int i = int(t); i < L; i += int(LS)) {
            float s = xs(x0, i) * scale;
            if (cap != 0.0) s = cap * tanh_s(s / cap);
            if (hm) s += ldf(1, D_DT(1), D_OFF(1), m0 + i * mst);
            stf(odt, ooff, o0 + i * ost, mx == -1.0 / 0.0 ? 0.0 : exp(s - mx) / sum);
        }
    } else if (mode == M_LN || mode == M_RMS || mode == M_ADDRMS) {
        float eps = PF(2);
        bool hw = P(3) != 0, hb = P(4) != 0;
        int ws = mode == M_ADDRMS ? 2 : 1; // weight slot
        int b0 = mode == M_ADDRMS ? row_off(1, row) : 0, bst = mode == M_ADDRMS ? D_ST(1, r - 1) : 0;
        float mean = 0.0;
        if (mode == M_LN) {
            float s = 0.0;
            for (int i = int(t); i < L; i += int(LS)) s += xs(x0, i);
            mean = red_sum(s) / float(L);
        }
        uint keep = mode == M_ADDRMS ? uint(P(5)) : 0u; // bytes from the sum to the norm
        float q = 0.0;
        for (int i = int(t); i < L; i += int(LS)) {
            float v = xs(x0, i) - mean;
            if (mode == M_ADDRMS) v += ldf(1, D_DT(1), D_OFF(1), b0 + i * bst);
            if (keep != 0u) stf(odt, ooff, o0 + i * ost, v);
            q += v * v;
        }
        float inv = 1.0 / sqrt(red_sum(q) / float(L) + eps);
        int w0 = hw ? row_off(ws, row) : 0, wst = hw ? D_ST(ws, r - 1) : 0;
        int c0 = hb ? row_off(2, row) : 0, cst = hb ? D_ST(2, r - 1) : 0;
        for (int i = int(t); i < L; i += int(LS)) {
            float v = xs(x0, i) - mean;
            if (mode == M_ADDRMS) v += ldf(1, D_DT(1), D_OFF(1), b0 + i * bst);
            v *= inv;
            if (hw) v *= ldf(ws, D_DT(ws), D_OFF(ws), w0 + i * wst);
            if (hb) v += ldf(2, D_DT(2), D_OFF(2), c0 + i * cst);
            stf(odt, ooff + keep, o0 + i * ost, v);
        }
    } else if (mode == M_GN) {
        // x and out are [N, G, Cg, S]; weight/bias [C] with c = g * Cg + cg
        float eps = PF(2);
        bool hw = P(3) != 0, hb = P(4) != 0;
        int Cg = P(5), S = P(6), G = D_NE(0, 1);
        int n = row / G, g = row % G;
        int xb = n * D_ST(0, 0) + g * D_ST(0, 1), ob = n * D_ST(OUT, 0) + g * D_ST(OUT, 1);
        int cnt = Cg * S;
        float s = 0.0;
        for (int i = int(t); i < cnt; i += int(LS))
            s += ldf(0, D_DT(0), D_OFF(0), xb + (i / S) * D_ST(0, 2) + (i % S) * D_ST(0, 3));
        float mean = red_sum(s) / float(cnt);
        float q = 0.0;
        for (int i = int(t); i < cnt; i += int(LS)) {
            float v = ldf(0, D_DT(0), D_OFF(0), xb + (i / S) * D_ST(0, 2) + (i % S) * D_ST(0, 3)) - mean;
            q += v * v;
        }
        float inv = 1.0 / sqrt(red_sum(q) / float(cnt) + eps);
        for (int i = int(t); i < cnt; i += int(LS)) {
            int cg = i / S, sp = i % S, c = g * Cg + cg;
            float v = (ldf(0, D_DT(0), D_OFF(0), xb + cg * D_ST(0, 2) + sp * D_ST(0, 3)) - mean) * inv;
            if (hw) v *= ldf(1, D_DT(1), D_OFF(1), c * D_ST(1, 0));
            if (hb) v += ldf(2, D_DT(2), D_OFF(2), c * D_ST(2, 0));
            stf(odt, ooff, ob + cg * D_ST(OUT, 2) + sp * D_ST(OUT, 3), v);
        }
    }
}
