// One block per query row: scores for a chunk of LS keys at a time (a
// thread per key), online softmax, each thread owning Dv/LS output dims.
// K and V are read in place in their own dtype and layout.
// P(0) B, P(1) Hq, P(2) S, P(3) D, P(4) Hkv, P(5) T, P(6) Dv, PF(7) scale,
// PF(8) softcap, P(9) mask, P(10) window, P(11) bias; batch strides
// q,k,v,o P(12..15); bias strides P(16..19); (h, s, d) strides of
// q P(20..22), k P(23..25), v P(26..28), o P(29..31).
// K and V may be a Q8_0 KV cache (element e in block e / 32 at entry
// e % 32 from the operand's block-aligned start).
//
// Few query rows over many keys (decoding) split the keys over gridDim.y
// blocks (word 9 of the record); each writes its running max, sum and
// unnormalized output to the scratch at words 10-11, and rlx_attn_combine
// (one block per row) merges them.
#include "common.cuh"

#define LS   128
#define MAXD 256
#define MAXU 8

__device__ __forceinline__ float *scratch_of(const int *R)
{
    uint64_t lo = (uint32_t)R[10], hi = (uint32_t)R[11];
    return (float *)(uintptr_t)(lo | hi << 32);
}

__device__ __forceinline__ float ldkv(const uint8_t *p, int dt, int64_t e)
{
    if (dt == DT_Q8_0)
        return deq(p + (e / 32) * 34, DT_Q8_0, (int)(e % 32));
    return ldf(p, dt, e);
}

extern "C" __global__ void __launch_bounds__(LS) rlx_attention(const int *rec)
{
    REC_DECL;
    __shared__ float qv[MAXD];
    __shared__ float sc[LS];
    ld_rec(R_, rec);
    int64_t row = blockIdx.x;
    int B = P(0), Hq = P(1), S = P(2), D = P(3), Hkv = P(4), T = P(5), Dv = P(6);
    if (row >= (int64_t)B * Hq * S)
        return;
    int s = (int)(row % S), h = (int)((row / S) % Hq), b = (int)(row / S / Hq);
    int hk = h / (Hq / Hkv);
    int t = threadIdx.x;
    int64_t qo = (int64_t)b * P(12) + (int64_t)h * P(20) + (int64_t)s * P(21);
    int64_t ko = (int64_t)b * P(13) + (int64_t)hk * P(23),
            vo = (int64_t)b * P(14) + (int64_t)hk * P(26);
    int64_t oo = (int64_t)b * P(15) + (int64_t)h * P(29) + (int64_t)s * P(30);
    for (int d = t; d < D; d += LS)
        qv[d] = ldf(D_PTR(0), D_DT(0), qo + (int64_t)d * P(22));
    __syncthreads();
    float scale = PF(7), cap = PF(8);
    int mk = P(9), win = P(10), pos = T - S + s;
    int tend = mk != 0 ? min(T, pos + 1) : T;
    int tbeg = mk == 2 ? max(0, pos - win + 1) : 0;
    int nsplit = M_(9);
    if (nsplit > 1) { /* this block's share of the keys */
        int span = (T + nsplit - 1) / nsplit;
        tbeg = max(tbeg, (int)blockIdx.y * span);
        tend = min(tend, ((int)blockIdx.y + 1) * span);
    }
    float m = -INFINITY, l = 0.0f;
    float acc[MAXU];
#pragma unroll
    for (int u = 0; u < MAXU; u++)
        acc[u] = 0.0f;
    int kdt = D_DT(1), vdt = D_DT(2);
    const uint8_t *kp = D_PTR(1), *vp = D_PTR(2);
    int64_t kst = P(24), kds = P(25), vst = P(27), vds = P(28);
    for (int t0 = tbeg; t0 < tend; t0 += LS) {
        int key = t0 + t;
        float x = -INFINITY;
        if (key < tend) {
            int64_t kb = ko + (int64_t)key * kst;
            float dot = 0.0f;
            if (kdt == DT_F16 && kds == 1) {
                const __half *kr = (const __half *)kp + kb;
                for (int d = 0; d < D; d++)
                    dot += qv[d] * __half2float(kr[d]);
            } else {
                for (int d = 0; d < D; d++)
                    dot += qv[d] * ldkv(kp, kdt, kb + (int64_t)d * kds);
            }
            x = dot * scale;
            if (cap != 0.0f)
                x = cap * tanh_s(x / cap);
            if (P(11))
                x += ldf(D_PTR(3), D_DT(3),
                         (int64_t)b * P(16) + (int64_t)h * P(17) + (int64_t)s * P(18) +
                             (int64_t)key * P(19));
        }
        sc[t] = x;
        __syncthreads();
        int n = min(LS, tend - t0);
        float cm = -INFINITY;
        for (int j = 0; j < n; j++)
            cm = fmaxf(cm, sc[j]);
        float nm = fmaxf(m, cm);
        if (nm != -INFINITY) {
            float f = m == -INFINITY ? 0.0f : expf(m - nm);
            l *= f;
#pragma unroll
            for (int u = 0; u < MAXU; u++)
                acc[u] *= f;
            for (int j = 0; j < n; j++) {
                float p = sc[j] == -INFINITY ? 0.0f : expf(sc[j] - nm);
                l += p;
                if (p == 0.0f)
                    continue;
                int64_t vb = vo + (int64_t)(t0 + j) * vst;
#pragma unroll
                for (int u = 0; u < MAXU; u++) {
                    int d = t + u * LS;
                    if (d < Dv)
                        acc[u] += p * ldkv(vp, vdt, vb + (int64_t)d * vds);
                }
            }
            m = nm;
        }
        __syncthreads();
    }
    if (nsplit > 1) {
        float *part = scratch_of(R_) + (row * nsplit + blockIdx.y) * (int64_t)(Dv + 2);
        if (t == 0) {
            part[0] = m;
            part[1] = l;
        }
#pragma unroll
        for (int u = 0; u < MAXU; u++) {
            int d = t + u * LS;
            if (d < Dv)
                part[2 + d] = acc[u];
        }
        return;
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int u = 0; u < MAXU; u++) {
        int d = t + u * LS;
        if (d < Dv)
            stf((uint8_t *)D_PTR(OUT), D_DT(OUT), oo + (int64_t)d * P(31), acc[u] * inv);
    }
}

extern "C" __global__ void __launch_bounds__(LS) rlx_attn_combine(const int *rec)
{
    REC_DECL;
    ld_rec(R_, rec);
    int64_t row = blockIdx.x;
    int B = P(0), Hq = P(1), S = P(2), Dv = P(6);
    if (row >= (int64_t)B * Hq * S)
        return;
    int s = (int)(row % S), h = (int)((row / S) % Hq), b = (int)(row / S / Hq);
    int64_t oo = (int64_t)b * P(15) + (int64_t)h * P(29) + (int64_t)s * P(30);
    int nsplit = M_(9);
    const float *part = scratch_of(R_) + row * nsplit * (int64_t)(Dv + 2);
    float m = -INFINITY;
    for (int i = 0; i < nsplit; i++)
        m = fmaxf(m, part[i * (Dv + 2)]);
    float l = 0.0f;
    for (int i = 0; i < nsplit; i++) {
        float mi = part[i * (Dv + 2)];
        if (mi != -INFINITY)
            l += part[i * (Dv + 2) + 1] * expf(mi - m);
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int d = threadIdx.x; d < Dv; d += LS) {
        float a = 0.0f;
        for (int i = 0; i < nsplit; i++) {
            float mi = part[i * (Dv + 2)];
            if (mi != -INFINITY)
                a += part[i * (Dv + 2) + 2 + d] * expf(mi - m);
        }
        stf((uint8_t *)D_PTR(OUT), D_DT(OUT), oo + (int64_t)d * P(31), a * inv);
    }
}
