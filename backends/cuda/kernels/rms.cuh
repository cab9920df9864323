// RMS norm and add + RMS norm over f32 rows read and written as float4s,
// shared by rlx_rowop (its launch) and the integer matrix-vector kernels
// (a product's last block runs the norm right after it, see matmul.cu's
// mmv_tail). The record is rlx_rowop's (rowop.cu): P(0) L, P(1) mode,
// PF(2) eps, P(3) weight, P(5) keep_sum's byte offset of the norm half,
// P(7) threads a row (32: a warp a row; 256: a block a row), P(8) also
// round the rows to 8-bit blocks of 32 into the scratch at P(9..12) (at
// most 8 rows, L a multiple of 128), the way rlx_q8_act does: the matmul
// of quantized weights right after the norm finds its input there
// (cuda-program.c's q8_valid). The host checked dtypes, unit strides and
// 16-byte alignment.
#pragma once
#include "common.cuh"

#define RMS_MODE_RMS    6 /* rowop.cu's M_RMS */
#define RMS_MODE_ADDRMS 7 /* M_ADDRMS */

// the activation scratch of the integer matrix-vector kernels: the int8
// rows (k = 0) and their block scales (k = 1), at words 137-140
__device__ __forceinline__ uint8_t *q8_ptr(const int *R_, int k)
{
    uint64_t lo = (uint32_t)P(9 + 2 * k), hi = (uint32_t)P(10 + 2 * k);
    return (uint8_t *)(uintptr_t)(lo | hi << 32);
}

// a row's four values i: x, or x + b for add + RMS norm; CG reads them
// past L1 (written by other blocks of the same kernel)
template <bool CG>
__device__ __forceinline__ float4 rms_in(const float4 *x, const float4 *b, bool add, int i)
{
    float4 v = CG ? __ldcg(x + i) : x[i];
    if (add) {
        float4 c = CG ? __ldcg(b + i) : b[i];
        v.x += c.x, v.y += c.y, v.z += c.z, v.w += c.w;
    }
    return v;
}

__device__ __forceinline__ int64_t row_off(const int *R_, int k, int64_t row)
{
    int r = D_RANK(0);
    int64_t o = 0;
    for (int d = r - 2; d >= 0; d--) {
        int n = D_NE(0, d);
        o += (row % n) * (int64_t)D_ST(k, d);
        row /= n;
    }
    return o;
}

// float4 i of row m (8 threads a block of 32, lanes t..t+7 of a warp)
// rounded to 8 bits into the scratch, as rlx_q8_act rounds it
__device__ __forceinline__ void rms_q8(const int *R_, float4 v, int64_t m, int L, int i, int t)
{
    float mx = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
    for (int o = 4; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
    float d = mx / 127.0f;
    int q0 = d > 0.0f ? __float2int_rn(v.x / d) : 0, q1 = d > 0.0f ? __float2int_rn(v.y / d) : 0,
        q2 = d > 0.0f ? __float2int_rn(v.z / d) : 0, q3 = d > 0.0f ? __float2int_rn(v.w / d) : 0;
    float sq = (float)(q0 + q1 + q2 + q3);
    for (int o = 4; o > 0; o >>= 1)
        sq += __shfl_xor_sync(0xFFFFFFFFu, sq, o);
    ((int *)q8_ptr(R_, 0))[(m * L) / 4 + i] =
        (q0 & 0xFF) | (q1 & 0xFF) << 8 | (q2 & 0xFF) << 16 | (int)((uint32_t)q3 << 24);
    if ((t & 7) == 0) {
        float2 ds;
        ds.x = d;
        ds.y = d * sq;
        ((float2 *)q8_ptr(R_, 1))[m * (L / 32) + i / 8] = ds;
    }
}

// Rows first_row + threadIdx.x / tpr (those below end_row) of a block of
// nt threads, tpr threads a row (a power of two, at most nt); every thread
// of the block takes part (sv: nt / 32 floats of shared memory). A thread
// loads RMS_RB of its float4s (x, b, the weight) before it uses any, so a
// row of up to RMS_RB * tpr float4s costs one trip to memory, not one a
// float4; such a row's values are kept from the first pass to the second.
#define RMS_RB 4
template <bool CG>
__device__ void rms_rows(const int *R_, float *sv, int nt, int tpr, int64_t first_row,
                         int64_t end_row)
{
    int64_t row = first_row + threadIdx.x / tpr;
    int t = threadIdx.x % tpr;
    bool live = row < (int64_t)(uint32_t)M_(0) && row < end_row;
    if (!live)
        row = 0;
    int L = P(0), n4 = L / 4;
    bool add = P(1) == RMS_MODE_ADDRMS, hw = P(3) != 0;
    int ws = add ? 2 : 1;
    int64_t keep = add ? (int64_t)(uint32_t)P(5) : 0;
    const float4 *x = (const float4 *)((const float *)D_PTR(0) + row_off(R_, 0, row));
    const float4 *b = add ? (const float4 *)((const float *)D_PTR(1) + row_off(R_, 1, row)) : x;
    const float4 *wt = hw ? (const float4 *)((const float *)D_PTR(ws) + row_off(R_, ws, row)) : x;
    float *o = (float *)D_PTR(OUT) + row_off(R_, OUT, row);
    float4 *os = (float4 *)o, *on = (float4 *)((uint8_t *)o + keep);
    bool one = n4 <= RMS_RB * tpr; /* the row's values held between the passes */
    float4 v[RMS_RB], c[RMS_RB];
    /* the thread's float4s i0 + k tpr: x (+ b), and with w the weight's */
    auto load = [&](int i0, bool w) {
#pragma unroll
        for (int k = 0; k < RMS_RB; k++) {
            int i = i0 + k * tpr;
            if (i < n4) {
                v[k] = rms_in<CG>(x, b, add, i);
                if (w && hw)
                    c[k] = wt[i];
            }
        }
    };
    float q = 0.0f;
    if (live)
        for (int i0 = t; i0 < n4; i0 += RMS_RB * tpr) {
            load(i0, one);
#pragma unroll
            for (int k = 0; k < RMS_RB; k++) {
                int i = i0 + k * tpr;
                if (i < n4) {
                    if (add && keep)
                        os[i] = v[k];
                    q += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
                }
            }
        }
    q = warp_sum(q);
    if (tpr > 32) { /* the row's warps' sums */
        int w = threadIdx.x >> 5, w0 = (int)(threadIdx.x / tpr) * (tpr / 32);
        if ((threadIdx.x & 31) == 0)
            sv[w] = q;
        __syncthreads();
        q = 0.0f;
        for (int i = 0; i < tpr / 32; i++)
            q += sv[w0 + i];
        __syncthreads(); /* sv free for the next rows */
    }
    float inv = 1.0f / sqrtf(q / (float)L + PF(2));
    if (live)
        for (int i0 = t; i0 < n4; i0 += RMS_RB * tpr) {
            /* x and b again (the same thread's values), not the sum the
             * first pass may have written */
            if (!one)
                load(i0, true);
#pragma unroll
            for (int k = 0; k < RMS_RB; k++) {
                int i = i0 + k * tpr;
                if (i >= n4)
                    break;
                float4 u = v[k];
                u.x *= inv, u.y *= inv, u.z *= inv, u.w *= inv;
                if (hw)
                    u.x *= c[k].x, u.y *= c[k].y, u.z *= c[k].z, u.w *= c[k].w;
                on[i] = u;
                if (P(8)) /* the row as 8-bit blocks of 32 too */
                    rms_q8(R_, u, row, L, i, t);
            }
        }
}
