// out[.., m, n] = act(alpha * sum_k a[.., m, k] b[.., k, n] + bias[n]).
// a, b are strided (transposes are strides; batch dims broadcast with
// stride 0); a quantized b is [N, K] rows of blocks read in place.
// P(0) K, P(1) act, PF(2) alpha, P(3) has bias, P(4) b quantized,
// P(5) b row bytes. The host picks the kernel per run from the shape:
//   rlx_mm_vec   a warp per output column (4 a block) for up to 8 rows,
//                each lane 8 consecutive values of b's row at a time (b's
//                K stride 1): matrix-vector products
//   rlx_mm_warp  a warp per output, lanes split K, any layout
//   rlx_mm_tile  64x64 output tiles, f32 FMA, any layout and dtype
//   rlx_mm_tc    64x64 output tiles of a quantized b on the tensor cores:
//                a and b rounded to f16, products summed in f32 (the
//                activations move by at most 2^-11 of their magnitude,
//                less than the 8-bit rounding ggml applies to them)
#include <mma.h>

#include "common.cuh"

struct mm_at {
    int64_t ao, bo, oo;
    int n;
};

// the operand offsets of output `lin` (n fastest, then m, then batch)
__device__ __forceinline__ mm_at mm_locate(const int *R_, int64_t lin)
{
    int r = D_RANK(OUT);
    int N = D_NE(OUT, r - 1), Mr = D_NE(OUT, r - 2);
    mm_at t;
    int n = (int)(lin % N);
    int m = (int)((lin / N) % Mr);
    int64_t bl = lin / N / Mr;
    t.n = n;
    t.ao = (int64_t)m * D_ST(0, r - 2);
    t.bo = (int64_t)n * D_ST(1, r - 1);
    t.oo = (int64_t)m * D_ST(OUT, r - 2) + (int64_t)n * D_ST(OUT, r - 1);
    for (int d = r - 3; d >= 0; d--) {
        int c = (int)(bl % D_NE(OUT, d));
        bl /= D_NE(OUT, d);
        t.ao += (int64_t)c * D_ST(0, d);
        t.bo += (int64_t)c * D_ST(1, d);
        t.oo += (int64_t)c * D_ST(OUT, d);
    }
    return t;
}

__device__ __forceinline__ void mm_store(const int *R_, int64_t oo, int n, float acc)
{
    float alpha = PF(2);
    float v = acc * (alpha == 0.0f ? 1.0f : alpha);
    if (P(3))
        v += ldf(D_PTR(2), D_DT(2), (int64_t)n * D_ST(2, 0));
    stf((uint8_t *)D_PTR(OUT), D_DT(OUT), oo, act(P(1), v));
}

// A warp per output column n (and batch), VT / 32 columns a block, for
// every row m of a (at most 8): each lane dequantizes 8 consecutive values
// of b's row at a time, 256 apart, and uses them for all the rows; a
// butterfly sum ends it. P(7) = 1 when a's rows are contiguous f32 at
// 16-byte aligned starts (float4 loads).
#define VT 128
extern "C" __global__ void __launch_bounds__(VT) rlx_mm_vec(const int *rec)
{
    REC_DECL;
    ld_rec(R_, rec);
    int r = D_RANK(OUT);
    int N = D_NE(OUT, r - 1), Mr = D_NE(OUT, r - 2);
    int lane = threadIdx.x & 31;
    int64_t col = (int64_t)blockIdx.x * (VT / 32) + (threadIdx.x >> 5); // n fastest, then batch
    int64_t cols = (int64_t)N;
    for (int d = r - 3; d >= 0; d--)
        cols *= D_NE(OUT, d);
    if (col >= cols)
        return;
    int n = (int)(col % N);
    int64_t bl = col / N;
    int64_t ao = 0, bo = (int64_t)n * D_ST(1, r - 1), oo = (int64_t)n * D_ST(OUT, r - 1);
    for (int d = r - 3; d >= 0; d--) {
        int c = (int)(bl % D_NE(OUT, d));
        bl /= D_NE(OUT, d);
        ao += (int64_t)c * D_ST(0, d);
        bo += (int64_t)c * D_ST(1, d);
        oo += (int64_t)c * D_ST(OUT, d);
    }
    int K = P(0), adt = D_DT(0), bdt = D_DT(1);
    int64_t ask = D_ST(0, r - 1), asm_ = D_ST(0, r - 2);
    const uint8_t *brow = P(4) ? D_PTR(1) + (int64_t)n * P(5) : D_PTR(1) + bo * esize(bdt);
    const uint8_t *ap = D_PTR(0);
    int nm = Mr < 8 ? Mr : 8;
    bool a4 = P(7) != 0;
    float acc[8];
#pragma unroll
    for (int m = 0; m < 8; m++)
        acc[m] = 0.0f;
    for (int k0 = lane * 8; k0 < K; k0 += 32 * 8) {
        float w[8];
        deq8(brow, bdt, k0, w);
#pragma unroll
        for (int m = 0; m < 8; m++) {
            if (m >= nm)
                break;
            int64_t a0 = ao + m * asm_;
            if (a4) {
                const float4 *q = (const float4 *)((const float *)ap + a0 + k0);
                float4 x0 = q[0], x1 = q[1];
                acc[m] += x0.x * w[0] + x0.y * w[1] + x0.z * w[2] + x0.w * w[3] + x1.x * w[4] +
                          x1.y * w[5] + x1.z * w[6] + x1.w * w[7];
            } else {
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[m] += ldf(ap, adt, a0 + (int64_t)(k0 + j) * ask) * w[j];
            }
        }
    }
#pragma unroll
    for (int m = 0; m < 8; m++) {
        if (m >= nm)
            break;
        float v = warp_sum(acc[m]);
        if (lane == 0)
            mm_store(R_, oo + (int64_t)m * D_ST(OUT, r - 2), n, v);
    }
}

extern "C" __global__ void __launch_bounds__(128) rlx_mm_warp(const int *rec)
{
    REC_DECL;
    ld_rec(R_, rec);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t lin = (int64_t)blockIdx.x * 4 + warp;
    if (lin >= (int64_t)(uint32_t)M_(0))
        return;
    mm_at t = mm_locate(R_, lin);
    int r = D_RANK(OUT);
    int K = P(0), adt = D_DT(0), bdt = D_DT(1);
    int64_t ask = D_ST(0, r - 1), bsk = D_ST(1, r - 2);
    const uint8_t *ap = D_PTR(0), *bp = D_PTR(1);
    float acc = 0.0f;
    if (P(4)) {
        int bk = qbk(bdt), qb = qbytes(bdt);
        const uint8_t *row = bp + (int64_t)t.n * P(5);
        for (int k = lane; k < K; k += 32)
            acc += ldf(ap, adt, t.ao + k * ask) * deq(row + (k / bk) * qb, bdt, k % bk);
    } else {
        for (int k = lane; k < K; k += 32)
            acc += ldf(ap, adt, t.ao + k * ask) * ldf(bp, bdt, t.bo + k * bsk);
    }
    acc = warp_sum(acc);
    if (lane == 0)
        mm_store(R_, t.oo, t.n, acc);
}

// the batch offsets of tile row blockIdx.z
__device__ __forceinline__ void mm_batch(const int *R_, int64_t bl, int64_t &ao, int64_t &bo,
                                         int64_t &oo)
{
    int r = D_RANK(OUT);
    ao = bo = oo = 0;
    for (int d = r - 3; d >= 0; d--) {
        int c = (int)(bl % D_NE(OUT, d));
        bl /= D_NE(OUT, d);
        ao += (int64_t)c * D_ST(0, d);
        bo += (int64_t)c * D_ST(1, d);
        oo += (int64_t)c * D_ST(OUT, d);
    }
}

#define TT 64
#define TK 16

extern "C" __global__ void __launch_bounds__(256) rlx_mm_tile(const int *rec)
{
    REC_DECL;
    __shared__ float As[TK][TT + 4], Bs[TK][TT + 4];
    ld_rec(R_, rec);
    int r = D_RANK(OUT);
    int N = D_NE(OUT, r - 1), Mr = D_NE(OUT, r - 2), K = P(0);
    int adt = D_DT(0), bdt = D_DT(1);
    int64_t asm_ = D_ST(0, r - 2), ask = D_ST(0, r - 1), bsk = D_ST(1, r - 2), bsn = D_ST(1, r - 1);
    int64_t ab, bb, ob;
    mm_batch(R_, blockIdx.z, ab, bb, ob);
    int m0 = blockIdx.y * TT, n0 = blockIdx.x * TT;
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const uint8_t *ap = D_PTR(0), *bp = D_PTR(1);
    bool quant = P(4) != 0;
    int rowb = P(5);
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TK) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int idx = tid + 256 * i, mm = idx / TK, kk = idx % TK;
            int m = m0 + mm, k = k0 + kk;
            As[kk][mm] = (m < Mr && k < K) ? ldf(ap, adt, ab + m * asm_ + k * ask) : 0.0f;
        }
        if (quant) {
            // 64 rows x 2 groups of 8 (K is a whole number of 16s here)
            if (tid < 128) {
                int nn = tid / 2, g = tid % 2, n = n0 + nn;
                float w[8];
                if (n < N)
                    deq8(bp + (int64_t)n * rowb, bdt, k0 + g * 8, w);
                else
                    for (int j = 0; j < 8; j++)
                        w[j] = 0.0f;
                for (int j = 0; j < 8; j++)
                    Bs[g * 8 + j][nn] = w[j];
            }
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int idx = tid + 256 * i, nn = idx % TT, kk = idx / TT;
                int n = n0 + nn, k = k0 + kk;
                Bs[kk][nn] = (n < N && k < K) ? ldf(bp, bdt, bb + k * bsk + n * bsn) : 0.0f;
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++)
                a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; j++)
                b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    int64_t osm = D_ST(OUT, r - 2), osn = D_ST(OUT, r - 1);
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (m < Mr && n < N)
                mm_store(R_, ob + m * osm + n * osn, n, acc[i][j]);
        }
}

#define BM 128
#define BN 128
#define CK 32
#define CL (CK + 8) /* smem row pitch in halves: a multiple of 8 */

// 128x128 output tiles of a quantized b on the tensor cores: 8 warps, each
// 32 rows x 64 columns (2x4 16x16 fragments); a and b are rounded to f16 as
// they are staged, the products summed in f32. The next K step's operands
// are loaded into registers while this step's products run. P(7) = 1 when
// a's rows are contiguous f32 at 16-byte aligned starts.
extern "C" __global__ void __launch_bounds__(256) rlx_mm_tc(const int *rec)
{
#if __CUDA_ARCH__ >= 700
    using namespace nvcuda;
    REC_DECL;
    __shared__ __align__(32) __half As[BM * CL];
    __shared__ __align__(32) __half Bs[BN * CL];
    __shared__ __align__(32) float Cw[8][16 * 16];
    ld_rec(R_, rec);
    int r = D_RANK(OUT);
    int N = D_NE(OUT, r - 1), Mr = D_NE(OUT, r - 2), K = P(0);
    int adt = D_DT(0), bdt = D_DT(1);
    int64_t asm_ = D_ST(0, r - 2), ask = D_ST(0, r - 1);
    int64_t ab, bb, ob;
    mm_batch(R_, blockIdx.z, ab, bb, ob);
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wm = warp / 2, wn = warp % 2;
    const uint8_t *ap = D_PTR(0), *bp = D_PTR(1);
    int rowb = P(5);
    bool a4 = P(7) != 0;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            wmma::fill_fragment(acc[i][j], 0.0f);
    // this thread's share of a step: a rows am and am + 64, 8 values from
    // column ak; b rows bn and bn + 64, 8 values from column bk
    int am = tid / 4, ak = (tid % 4) * 8;
    int bn = tid / 4, bk = (tid % 4) * 8;
    float ra[2][8], rb[2][8];
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int m = m0 + am + 64 * i;
            if (m < Mr && k0 + ak < K) {
                if (a4) {
                    const float4 *q = (const float4 *)((const float *)ap + ab + m * asm_ + k0 + ak);
                    float4 x0 = q[0], x1 = q[1];
                    ra[i][0] = x0.x, ra[i][1] = x0.y, ra[i][2] = x0.z, ra[i][3] = x0.w;
                    ra[i][4] = x1.x, ra[i][5] = x1.y, ra[i][6] = x1.z, ra[i][7] = x1.w;
                } else {
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        ra[i][j] = ldf(ap, adt, ab + m * asm_ + (int64_t)(k0 + ak + j) * ask);
                }
            } else {
#pragma unroll
                for (int j = 0; j < 8; j++)
                    ra[i][j] = 0.0f;
            }
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int n = n0 + bn + 64 * i;
            if (n < N && k0 + bk < K)
                deq8(bp + (int64_t)n * rowb, bdt, k0 + bk, rb[i]);
            else
#pragma unroll
                for (int j = 0; j < 8; j++)
                    rb[i][j] = 0.0f;
        }
    };
    auto store = [&]() {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            __half2 *d = (__half2 *)(As + (am + 64 * i) * CL + ak);
#pragma unroll
            for (int j = 0; j < 4; j++)
                d[j] = __floats2half2_rn(ra[i][2 * j], ra[i][2 * j + 1]);
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            __half2 *d = (__half2 *)(Bs + (bn + 64 * i) * CL + bk);
#pragma unroll
            for (int j = 0; j < 4; j++)
                d[j] = __floats2half2_rn(rb[i][2 * j], rb[i][2 * j + 1]);
        }
    };
    load(0);
    for (int k0 = 0; k0 < K; k0 += CK) {
        store();
        __syncthreads();
        if (k0 + CK < K)
            load(k0 + CK);
#pragma unroll
        for (int kk = 0; kk < CK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[4];
#pragma unroll
            for (int i = 0; i < 2; i++)
                wmma::load_matrix_sync(fa[i], As + (wm * 32 + i * 16) * CL + kk, CL);
#pragma unroll
            for (int j = 0; j < 4; j++)
                wmma::load_matrix_sync(fb[j], Bs + (wn * 64 + j * 16) * CL + kk, CL);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }
    // each fragment through the warp's own staging square
    int64_t osm = D_ST(OUT, r - 2), osn = D_ST(OUT, r - 1);
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            wmma::store_matrix_sync(Cw[warp], acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                int m = m0 + wm * 32 + i * 16 + e / 16, n = n0 + wn * 64 + j * 16 + e % 16;
                if (m < Mr && n < N)
                    mm_store(R_, ob + m * osm + n * osn, n, Cw[warp][e]);
            }
            __syncwarp();
        }
#endif
}
