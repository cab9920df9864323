// One block per row along an axis (moved last by the host): reductions,
// argmax/topk, softmax and the norms. P(0) length L, P(1) mode, then per
// mode: topk k P(2), largest P(3), indices P(4); softmax scale PF(2),
// softcap PF(3), mask P(4); norms eps PF(2), weight P(3), bias P(4),
// add_rms_norm keep_sum P(5) (non-zero: the output operand takes the sum
// and the norm goes P(5) bytes further on); group norm Cg P(5), S P(6).
#include "rms.cuh"

#define LS 256

enum { M_SUM, M_MEAN, M_MAX, M_ARGMAX, M_SOFTMAX, M_LN, M_RMS, M_ADDRMS, M_GN, M_TOPK };
static_assert(M_RMS == RMS_MODE_RMS && M_ADDRMS == RMS_MODE_ADDRMS, "rms.cuh's modes");

__device__ float red_sum(float v, float *sv)
{
    v = warp_sum(v);
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    if (l == 0)
        sv[w] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < LS / 32; i++)
        s += sv[i];
    __syncthreads();
    return s;
}

__device__ float red_max(float v, float *sv)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    if (l == 0)
        sv[w] = v;
    __syncthreads();
    float s = sv[0];
    for (int i = 1; i < LS / 32; i++)
        s = fmaxf(s, sv[i]);
    __syncthreads();
    return s;
}

// (v, i) before (w, j) in the order topk emits
__device__ __forceinline__ bool before(bool largest, float v, int i, float w, int j)
{
    if (j < 0)
        return i >= 0;
    if (i < 0)
        return false;
    if (v != w)
        return largest ? v > w : v < w;
    return i < j;
}

__device__ void red_best(bool largest, float &v, int &i, float *sv, int *si)
{
    int t = threadIdx.x;
    sv[t] = v;
    si[t] = i;
    __syncthreads();
    for (int s = LS / 2; s > 0; s >>= 1) {
        if (t < s && before(largest, sv[t + s], si[t + s], sv[t], si[t])) {
            sv[t] = sv[t + s];
            si[t] = si[t + s];
        }
        __syncthreads();
    }
    v = sv[0];
    i = si[0];
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(LS) rlx_rowop(const int *rec)
{
    REC_DECL;
    __shared__ float sv[LS];
    __shared__ int si[LS];
    if (!ld_rec(R_, rec)) /* past its group member's grid (the float4 RMS norms) */
        return;
    if (P(7)) { /* RMS norms in float4s (rms.cuh) */
        rms_rows<false>(R_, sv, LS, P(7), (int64_t)blockIdx.x * (LS / P(7)), (int64_t)1 << 62);
        return;
    }
    int64_t row = blockIdx.x;
    if (row >= (int64_t)(uint32_t)M_(0))
        return;
    int L = P(0), mode = P(1);
    int t = threadIdx.x;
    int r = D_RANK(0);
    int64_t x0 = row_off(R_, 0, row), o0 = row_off(R_, OUT, row);
    int odt = D_DT(OUT);
    uint8_t *op = (uint8_t *)D_PTR(OUT);
    int64_t ost = D_ST(OUT, r - 1), xst = D_ST(0, r - 1);
    const uint8_t *xp = D_PTR(0);
    int xdt = D_DT(0);
#define XS(i) ldf(xp, xdt, x0 + (int64_t)(i)*xst)

    if (mode == M_SUM || mode == M_MEAN) {
        float s = 0.0f;
        for (int i = t; i < L; i += LS)
            s += XS(i);
        s = red_sum(s, sv);
        if (t == 0)
            stf(op, odt, o0, mode == M_MEAN ? s / (float)L : s);
    } else if (mode == M_MAX) {
        float s = -INFINITY;
        for (int i = t; i < L; i += LS) {
            float v = XS(i);
            if (v > s)
                s = v; // NaNs are skipped, as on the CPU
        }
        s = red_max(s, sv);
        if (t == 0)
            stf(op, odt, o0, s);
    } else if (mode == M_ARGMAX || mode == M_TOPK) {
        bool largest = mode == M_ARGMAX || P(3) != 0;
        int K = mode == M_ARGMAX ? 1 : P(2);
        float pv = 0.0f;
        int pi = -1;
        for (int k = 0; k < K; k++) {
            float bv = 0.0f;
            int bi = -1;
            for (int i = t; i < L; i += LS) {
                float v = XS(i);
                if (isnan(v))
                    continue;
                if (pi >= 0 && !before(largest, pv, pi, v, i))
                    continue;
                if (before(largest, v, i, bv, bi)) {
                    bv = v;
                    bi = i;
                }
            }
            red_best(largest, bv, bi, sv, si);
            if (t == 0) {
                if (mode == M_ARGMAX || P(4) != 0)
                    sti(op, odt, o0 + k * ost, max(bi, 0));
                else
                    stf(op, odt, o0 + k * ost, bv);
            }
            pv = bv;
            pi = bi;
        }
    } else if (mode == M_SOFTMAX) {
        float scale = PF(2) == 0.0f ? 1.0f : PF(2), cap = PF(3);
        bool hm = P(4) != 0;
        int64_t m0 = hm ? row_off(R_, 1, row) : 0;
        int64_t mst = hm ? D_ST(1, r - 1) : 0;
        const uint8_t *mp = D_PTR(1);
        int mdt = D_DT(1);
#define SC(i)                                                            \
    ((cap != 0.0f ? cap * tanh_s(XS(i) * scale / cap) : XS(i) * scale) + \
     (hm ? ldf(mp, mdt, m0 + (int64_t)(i)*mst) : 0.0f))
        float mx = -INFINITY;
        for (int i = t; i < L; i += LS)
            mx = fmaxf(mx, SC(i));
        mx = red_max(mx, sv);
        float sum = 0.0f;
        for (int i = t; i < L; i += LS)
            sum += mx == -INFINITY ? 0.0f : expf(SC(i) - mx);
        sum = red_sum(sum, sv);
        for (int i = t; i < L; i += LS)
            stf(op, odt, o0 + i * ost, mx == -INFINITY ? 0.0f : expf(SC(i) - mx) / sum);
#undef SC
    } else if (mode == M_LN || mode == M_RMS || mode == M_ADDRMS) {
        float eps = PF(2);
        bool hw = P(3) != 0, hb = P(4) != 0;
        int ws = mode == M_ADDRMS ? 2 : 1; // weight slot
        int64_t b0 = mode == M_ADDRMS ? row_off(R_, 1, row) : 0;
        int64_t bst = mode == M_ADDRMS ? D_ST(1, r - 1) : 0;
        const uint8_t *bp = D_PTR(1);
        int bdt = D_DT(1);
        float mean = 0.0f;
        if (mode == M_LN) {
            float s = 0.0f;
            for (int i = t; i < L; i += LS)
                s += XS(i);
            mean = red_sum(s, sv) / (float)L;
        }
        int64_t keep = mode == M_ADDRMS ? (int64_t)(uint32_t)P(5) : 0; // bytes sum -> norm
        float q = 0.0f;
        for (int i = t; i < L; i += LS) {
            float v = XS(i) - mean;
            if (mode == M_ADDRMS)
                v += ldf(bp, bdt, b0 + i * bst);
            if (keep)
                stf(op, odt, o0 + i * ost, v);
            q += v * v;
        }
        float inv = 1.0f / sqrtf(red_sum(q, sv) / (float)L + eps);
        int64_t w0 = hw ? row_off(R_, ws, row) : 0, wst = hw ? D_ST(ws, r - 1) : 0;
        int64_t c0 = hb ? row_off(R_, 2, row) : 0, cst = hb ? D_ST(2, r - 1) : 0;
        for (int i = t; i < L; i += LS) {
            float v = XS(i) - mean;
            if (mode == M_ADDRMS)
                v += ldf(bp, bdt, b0 + i * bst);
            v *= inv;
            if (hw)
                v *= ldf(D_PTR(ws), D_DT(ws), w0 + i * wst);
            if (hb)
                v += ldf(D_PTR(2), D_DT(2), c0 + i * cst);
            stf(op + keep, odt, o0 + i * ost, v);
        }
    } else if (mode == M_GN) {
        // x and out are [N, G, Cg, S]; weight/bias [C] with c = g * Cg + cg
        float eps = PF(2);
        bool hw = P(3) != 0, hb = P(4) != 0;
        int Cg = P(5), S = P(6), G = D_NE(0, 1);
        int n = (int)(row / G), g = (int)(row % G);
        int64_t xb = (int64_t)n * D_ST(0, 0) + (int64_t)g * D_ST(0, 1);
        int64_t ob = (int64_t)n * D_ST(OUT, 0) + (int64_t)g * D_ST(OUT, 1);
        int64_t cnt = (int64_t)Cg * S;
#define GX(i) ldf(xp, xdt, xb + ((i) / S) * D_ST(0, 2) + ((i) % S) * D_ST(0, 3))
        float s = 0.0f;
        for (int64_t i = t; i < cnt; i += LS)
            s += GX(i);
        float mean = red_sum(s, sv) / (float)cnt;
        float q = 0.0f;
        for (int64_t i = t; i < cnt; i += LS) {
            float v = GX(i) - mean;
            q += v * v;
        }
        float inv = 1.0f / sqrtf(red_sum(q, sv) / (float)cnt + eps);
        for (int64_t i = t; i < cnt; i += LS) {
            int cg = (int)(i / S), sp = (int)(i % S), c = g * Cg + cg;
            float v = (GX(i) - mean) * inv;
            if (hw)
                v *= ldf(D_PTR(1), D_DT(1), (int64_t)c * D_ST(1, 0));
            if (hb)
                v += ldf(D_PTR(2), D_DT(2), (int64_t)c * D_ST(2, 0));
            stf(op, odt, ob + (int64_t)cg * D_ST(OUT, 2) + (int64_t)sp * D_ST(OUT, 3), v);
        }
#undef GX
    }
#undef XS
}
