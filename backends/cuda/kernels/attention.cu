// One block per query row (and key split): its AW warps take the keys in
// turn, AK at a time per warp; a key's score is a warp's dot product (the
// lanes split the head dim, then a butterfly sum), and each lane keeps an
// online softmax over the warp's keys for the output dims lane + 32u. The
// warps' partial results are merged through shared memory at the end.
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
// unnormalized output to the scratch at words 10-11 and counts itself
// done in the row's counter (P(32..33)); the row's last block to finish
// merges them (a launch fewer than a separate merge kernel) and sets the
// counter back to 0 for the next run.
// rlx_attention_rows takes QR consecutive query rows of one head a block
// (prompts: the rows share every key and value they load, where one block
// a row loads each key once a row); value head dims up to 128, no split.
// With P(34) the output (f32, dense, Dv a multiple of 32) is also rounded
// to the 8-bit blocks of 32 the integer matrix-vector kernels read, into
// the scratch at P(120..123), so the output projection after it skips its
// own rounding launch.
#include "common.cuh"

#define LS   128 /* threads per block */
#define AW   (LS / 32)
#define MAXD 256
#define MAXU 32 /* output dims per lane: Dv up to 1024 */

__device__ __forceinline__ float *scratch_of(const int *R)
{
    uint64_t lo = (uint32_t)R[10], hi = (uint32_t)R[11];
    return (float *)(uintptr_t)(lo | hi << 32);
}

// K and V element e: F16, F32 and Q8_0 inline, every other type (and a
// bias) through one shared call. A decode step runs each block of this
// kernel once and briefly, so the code it runs is fetched cold; with ldf's
// whole switch inlined at each of a round's loads rlx_attention was 19016
// instructions (16472 now, sm_90), and waits on instruction fetch were
// over half of its stall samples on an H200 (ncu, caches flushed).
__device__ __noinline__ float ldkv_any(const uint8_t *p, int dt, int64_t e)
{
    return ldf(p, dt, e);
}

__device__ __forceinline__ float ldkv(const uint8_t *p, int dt, int64_t e)
{
    if (dt == DT_F16)
        return __half2float(((const __half *)p)[e]);
    if (dt == DT_F32)
        return ((const float *)p)[e];
    if (dt == DT_Q8_0)
        return deq(p + (e / 32) * 34, DT_Q8_0, (int)(e % 32));
    return ldkv_any(p, dt, e);
}

struct attn_args {
    const uint8_t *kp, *vp;
    int kdt, vdt, D, Dv;
    int64_t ko, vo, kst, kds, vst, vds, bo, bst;
    float scale, cap;
    bool bias, k2; /* k2: K rows of f16 pairs at 4-byte aligned starts */
};

// K and V of batch b, key/value head hk, from the record (bo, the bias
// row's offset, is the caller's)
__device__ __forceinline__ attn_args attn_args_of(const int *R_, int b, int hk)
{
    attn_args a;
    a.kp = D_PTR(1);
    a.vp = D_PTR(2);
    a.kdt = D_DT(1);
    a.vdt = D_DT(2);
    a.D = P(3);
    a.Dv = P(6);
    a.ko = (int64_t)b * P(13) + (int64_t)hk * P(23);
    a.vo = (int64_t)b * P(14) + (int64_t)hk * P(26);
    a.kst = P(24);
    a.kds = P(25);
    a.vst = P(27);
    a.vds = P(28);
    a.scale = PF(7);
    a.cap = PF(8);
    a.bias = P(11) != 0;
    a.bo = 0;
    a.bst = P(19);
    a.k2 = a.kdt == DT_F16 && a.kds == 1 && (a.D & 63) == 0 && ((a.ko | a.kst) & 1) == 0 &&
           ((uintptr_t)a.kp & 3) == 0;
    return a;
}

// f16 keys (a.k2): every one of the AK keys' pairs loaded before any is
// used, so the loads are in flight together (D <= 256: 4 pairs a lane)
template <int AK>
__device__ __forceinline__ void attn_load_keys(const attn_args &a, int k0, int tend,
                                               __half2 (&kk)[AK][4])
{
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < AK; e++) {
        int key = k0 + e * AW;
        const __half2 *kr = (const __half2 *)((const __half *)a.kp + a.ko + (int64_t)key * a.kst);
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (key < tend && lane + 32 * i < a.D / 2)
                kk[e][i] = kr[lane + 32 * i];
    }
}

// One warp's keys kbeg + w, + AW, ... below kend, AK at a time, for NR
// query rows (the first nr of them real; row r sees the keys in
// [tb[r], te[r])): each row's max m[r], sum l[r] and unnormalized output
// acc[r][u] (dim lane + 32u), as an online softmax. Each key's K row and
// V values are loaded once for all the rows.
template <int NR, int U, int AK>
__device__ __forceinline__ void
attn_warp(const int *R_, const attn_args &a, const float (*qv)[MAXD], int nr, const int *tb,
          const int *te, const int64_t *bo, int kbeg, int kend, float *m, float *l, float (*acc)[U])
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int k0 = kbeg + w; k0 < kend; k0 += AW * AK) {
        float x[NR][AK];
        __half2 kk[AK][4];
        if (a.k2)
            attn_load_keys<AK>(a, k0, kend, kk);
        /* the keys' values too, before any score is known (they do not
         * depend on one): the keys and values of a round are one trip to
         * memory, not two */
        float vv[AK][U];
#pragma unroll
        for (int e = 0; e < AK; e++) {
            int key = k0 + e * AW;
#pragma unroll
            for (int u = 0; u < U; u++) {
                int d = lane + 32 * u;
                vv[e][u] = key < kend && d < a.Dv
                               ? ldkv(a.vp, a.vdt, a.vo + (int64_t)key * a.vst + (int64_t)d * a.vds)
                               : 0.0f;
            }
        }
#pragma unroll
        for (int e = 0; e < AK; e++) {
            int key = k0 + e * AW;
            float dot[NR];
#pragma unroll
            for (int r = 0; r < NR; r++)
                dot[r] = 0.0f;
            if (key < kend) {
                if (a.k2) {
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        int d2 = lane + 32 * i;
                        if (d2 < a.D / 2) {
                            float2 f = __half22float2(kk[e][i]);
#pragma unroll
                            for (int r = 0; r < NR; r++)
                                dot[r] += qv[r][2 * d2] * f.x + qv[r][2 * d2 + 1] * f.y;
                        }
                    }
                } else {
                    int64_t kb = a.ko + (int64_t)key * a.kst;
                    for (int d = lane; d < a.D; d += 32) {
                        float kvv = ldkv(a.kp, a.kdt, kb + (int64_t)d * a.kds);
#pragma unroll
                        for (int r = 0; r < NR; r++)
                            dot[r] += qv[r][d] * kvv;
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < NR; r++) {
                float xv = warp_sum(dot[r]) * a.scale;
                if (a.cap != 0.0f)
                    xv = a.cap * tanh_s(xv / a.cap);
                bool in = r < nr && key >= tb[r] && key < te[r];
                if (a.bias && in)
                    xv += ldkv_any(D_PTR(3), D_DT(3), bo[r] + (int64_t)key * a.bst);
                x[r][e] = in ? xv : -INFINITY;
            }
        }
        /* each row's rescaling f and key weights p (1 and 0 for a row that
         * has seen no key yet) */
        float f[NR], p[NR][AK];
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float nm = m[r];
#pragma unroll
            for (int e = 0; e < AK; e++)
                nm = fmaxf(nm, x[r][e]);
            f[r] = nm == -INFINITY ? 1.0f : m[r] == -INFINITY ? 0.0f : expf(m[r] - nm);
            l[r] *= f[r];
#pragma unroll
            for (int e = 0; e < AK; e++) {
                p[r][e] = x[r][e] == -INFINITY ? 0.0f : expf(x[r][e] - nm);
                l[r] += p[r][e];
            }
            m[r] = nm;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int d = lane + 32 * u;
            float sacc[NR];
#pragma unroll
            for (int r = 0; r < NR; r++)
                sacc[r] = acc[r][u] * f[r];
            if (d < a.Dv) {
                /* a value is added only where its weight is not 0 (a
                 * masked key's value may be anything) */
#pragma unroll
                for (int e = 0; e < AK; e++)
#pragma unroll
                    for (int r = 0; r < NR; r++)
                        if (p[r][e] != 0.0f)
                            sacc[r] += p[r][e] * vv[e][u];
            }
#pragma unroll
            for (int r = 0; r < NR; r++)
                acc[r][u] = sacc[r];
        }
    }
}

// Output d of the row at oo (threads d = threadIdx.x + LS i, the whole
// block taking part): stored, and with P(34) rounded to 8 bits (a warp's
// 32 lanes are one block of 32 when Dv is a multiple of 32, as the host
// makes sure).
__device__ __forceinline__ void attn_store(const int *R_, int64_t oo, int d, int Dv, float v)
{
    if (d < Dv)
        stf((uint8_t *)D_PTR(OUT), D_DT(OUT), oo + (int64_t)d * P(31), v);
    if (P(34) && (d & ~31) < Dv)
        q8_warp_store(v, (int8_t *)P_ADDR(120), (float2 *)P_ADDR(122), oo + d);
}

// The row's nsplit partial results (max, sum, unnormalized output) merged
// into its output; they were written by other blocks, so they are read
// past the (incoherent) L1.
__device__ __forceinline__ void attn_merge(const int *R_, int64_t row, int nsplit, int Dv,
                                           int64_t oo)
{
    const float *part = scratch_of(R_) + row * nsplit * (int64_t)(Dv + 2);
    float m = -INFINITY;
    for (int i = 0; i < nsplit; i++)
        m = fmaxf(m, __ldcg(part + i * (Dv + 2)));
    float l = 0.0f;
    for (int i = 0; i < nsplit; i++) {
        float mi = __ldcg(part + i * (Dv + 2));
        if (mi != -INFINITY)
            l += __ldcg(part + i * (Dv + 2) + 1) * expf(mi - m);
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int d0 = 0; d0 < Dv; d0 += LS) {
        int d = d0 + threadIdx.x;
        float acc = 0.0f;
        for (int i = 0; d < Dv && i < nsplit; i++) {
            float mi = __ldcg(part + i * (Dv + 2));
            if (mi != -INFINITY)
                acc += __ldcg(part + i * (Dv + 2) + 2 + d) * expf(mi - m);
        }
        attn_store(R_, oo, d, Dv, acc * inv);
    }
}

template <int U, int AK>
__device__ __forceinline__ void attn_row(const int *R_, const attn_args &a, const float *qv,
                                         int tbeg, int tend, int64_t row, int64_t oo,
                                         float (*wml)[2], float *wacc)
{
    float m1[1] = {-INFINITY}, l1[1] = {0.0f}, acc1[1][U];
#pragma unroll
    for (int u = 0; u < U; u++)
        acc1[0][u] = 0.0f;
    attn_warp<1, U, AK>(R_, a, (const float(*)[MAXD])qv, 1, &tbeg, &tend, &a.bo, tbeg, tend, m1, l1,
                        acc1);
    float m = m1[0], l = l1[0], *acc = acc1[0];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) {
        wml[w][0] = m;
        wml[w][1] = l;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        int d = lane + 32 * u;
        if (d < a.Dv)
            wacc[w * a.Dv + d] = acc[u];
    }
    __syncthreads();
    float M = -INFINITY;
    for (int i = 0; i < AW; i++)
        M = fmaxf(M, wml[i][0]);
    float L = 0.0f, sc[AW];
    for (int i = 0; i < AW; i++) {
        sc[i] = wml[i][0] == -INFINITY ? 0.0f : expf(wml[i][0] - M);
        L += wml[i][1] * sc[i];
    }
    int nsplit = M_(9);
    if (nsplit > 1) {
        float *part = scratch_of(R_) + (row * nsplit + blockIdx.y) * (int64_t)(a.Dv + 2);
        if (threadIdx.x == 0) {
            part[0] = M;
            part[1] = L;
        }
        for (int d = threadIdx.x; d < a.Dv; d += LS) {
            float v = 0.0f;
            for (int i = 0; i < AW; i++)
                v += wacc[i * a.Dv + d] * sc[i];
            part[2 + d] = v;
        }
        if (last_block((int *)P_ADDR(32) + row, nsplit))
            attn_merge(R_, row, nsplit, a.Dv, oo);
        return;
    }
    float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int d0 = 0; d0 < a.Dv; d0 += LS) {
        int d = d0 + threadIdx.x;
        float v = 0.0f;
        for (int i = 0; d < a.Dv && i < AW; i++)
            v += wacc[i * a.Dv + d] * sc[i];
        attn_store(R_, oo, d, a.Dv, v * inv);
    }
}

template <bool WIDE> __device__ __forceinline__ void attention_body(const int *rec)
{
    REC_DECL;
    __shared__ float qv[MAXD];
    __shared__ float wml[AW][2];
    __shared__ float wacc[AW * MAXU * 32];
    ld_rec(R_, rec);
    int64_t row = blockIdx.x;
    int B = P(0), Hq = P(1), S = P(2), D = P(3), Hkv = P(4), T = P(5), Dv = P(6);
    if (row >= (int64_t)B * Hq * S)
        return;
    int s = (int)(row % S), h = (int)((row / S) % Hq), b = (int)(row / S / Hq);
    int hk = h / (Hq / Hkv);
    int64_t qo = (int64_t)b * P(12) + (int64_t)h * P(20) + (int64_t)s * P(21);
    int64_t oo = (int64_t)b * P(15) + (int64_t)h * P(29) + (int64_t)s * P(30);
    for (int d = threadIdx.x; d < D; d += LS)
        qv[d] = ldf(D_PTR(0), D_DT(0), qo + (int64_t)d * P(22));
    __syncthreads();
    attn_args a = attn_args_of(R_, b, hk);
    a.bo = (int64_t)b * P(16) + (int64_t)h * P(17) + (int64_t)s * P(18);
    int mk = P(9), win = P(10), pos = T - S + s;
    int tend = mk != 0 ? min(T, pos + 1) : T;
    int tbeg = mk == 2 ? max(0, pos - win + 1) : 0;
    int nsplit = M_(9);
    if (nsplit > 1) { /* this block's share of the keys */
        int span = (T + nsplit - 1) / nsplit;
        tbeg = max(tbeg, (int)blockIdx.y * span);
        tend = min(tend, ((int)blockIdx.y + 1) * span);
    }
    int nu = (Dv + 31) / 32;
    /* four keys at a time for value head dims up to 256; one beyond, in a
     * kernel of its own so the registers it needs do not slow the others */
    if (WIDE)
        attn_row<MAXU, 1>(R_, a, qv, tbeg, tend, row, oo, wml, wacc);
    else if (nu <= 2)
        attn_row<2, 4>(R_, a, qv, tbeg, tend, row, oo, wml, wacc);
    else if (nu <= 4)
        attn_row<4, 4>(R_, a, qv, tbeg, tend, row, oo, wml, wacc);
    else
        attn_row<8, 4>(R_, a, qv, tbeg, tend, row, oo, wml, wacc);
}

extern "C" __global__ void __launch_bounds__(LS) rlx_attention(const int *rec)
{
    attention_body<false>(rec);
}

extern "C" __global__ void __launch_bounds__(LS) rlx_attention_wide(const int *rec)
{
    attention_body<true>(rec);
}

// ---- several query rows a block ----------------------------------------
#define QR 4 /* query rows a block of rlx_attention_rows */

template <int U>
__device__ __forceinline__ void
attn_rows(const int *R_, const attn_args &a, const float (*qv)[MAXD], int nr, const int *tb,
          const int *te, const int64_t *bo, const int64_t *oo, float (*wml)[QR][2], float *wacc)
{
    int kbeg = tb[0], kend = te[0];
    for (int r = 1; r < nr; r++) {
        kbeg = min(kbeg, tb[r]);
        kend = max(kend, te[r]);
    }
    float m[QR], l[QR], acc[QR][U];
#pragma unroll
    for (int r = 0; r < QR; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int u = 0; u < U; u++)
            acc[r][u] = 0.0f;
    }
    attn_warp<QR, U, 4>(R_, a, qv, nr, tb, te, bo, kbeg, kend, m, l, acc);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < QR; r++) {
        if (lane == 0) {
            wml[w][r][0] = m[r];
            wml[w][r][1] = l[r];
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int d = lane + 32 * u;
            if (d < a.Dv)
                wacc[(w * QR + r) * a.Dv + d] = acc[r][u];
        }
    }
    __syncthreads();
    for (int r = 0; r < nr; r++) {
        float M = -INFINITY;
        for (int i = 0; i < AW; i++)
            M = fmaxf(M, wml[i][r][0]);
        float L = 0.0f, sc[AW];
        for (int i = 0; i < AW; i++) {
            sc[i] = wml[i][r][0] == -INFINITY ? 0.0f : expf(wml[i][r][0] - M);
            L += wml[i][r][1] * sc[i];
        }
        float inv = L > 0.0f ? 1.0f / L : 0.0f;
        for (int d0 = 0; d0 < a.Dv; d0 += LS) {
            int d = d0 + threadIdx.x;
            float v = 0.0f;
            for (int i = 0; d < a.Dv && i < AW; i++)
                v += wacc[(i * QR + r) * a.Dv + d] * sc[i];
            attn_store(R_, oo[r], d, a.Dv, v * inv);
        }
    }
}

// QR consecutive query rows of one (batch, head) a block: block x is
// (b, h, s / QR), the rows past S idle
extern "C" __global__ void __launch_bounds__(LS) rlx_attention_rows(const int *rec)
{
    REC_DECL;
    __shared__ float qv[QR][MAXD];
    __shared__ float wml[AW][QR][2];
    __shared__ float wacc[AW * QR * 128];
    ld_rec(R_, rec);
    int B = P(0), Hq = P(1), S = P(2), D = P(3), Hkv = P(4), T = P(5), Dv = P(6);
    int nsb = (S + QR - 1) / QR;
    int64_t blk = blockIdx.x;
    if (blk >= (int64_t)B * Hq * nsb)
        return;
    int s0 = (int)(blk % nsb) * QR, h = (int)((blk / nsb) % Hq), b = (int)(blk / nsb / Hq);
    int hk = h / (Hq / Hkv), nr = min(QR, S - s0);
    int mk = P(9), win = P(10);
    int tb[QR], te[QR];
    int64_t bo[QR], oo[QR];
    for (int r = 0; r < QR; r++) {
        int s = s0 + min(r, nr - 1), pos = T - S + s;
        te[r] = mk != 0 ? min(T, pos + 1) : T;
        tb[r] = mk == 2 ? max(0, pos - win + 1) : 0;
        bo[r] = (int64_t)b * P(16) + (int64_t)h * P(17) + (int64_t)s * P(18);
        oo[r] = (int64_t)b * P(15) + (int64_t)h * P(29) + (int64_t)s * P(30);
        int64_t qo = (int64_t)b * P(12) + (int64_t)h * P(20) + (int64_t)s * P(21);
        for (int d = threadIdx.x; d < D; d += LS)
            qv[r][d] = ldf(D_PTR(0), D_DT(0), qo + (int64_t)d * P(22));
    }
    __syncthreads();
    attn_args a = attn_args_of(R_, b, hk);
    if (Dv <= 64)
        attn_rows<2>(R_, a, qv, nr, tb, te, bo, oo, wml, wacc);
    else
        attn_rows<4>(R_, a, qv, nr, tb, te, bo, oo, wml, wacc);
}
