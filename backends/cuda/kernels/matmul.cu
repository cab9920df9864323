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
//   rlx_mm_tc    128x128 (rlx_mm_tc64: 64x128) output tiles of a quantized
//                b on the tensor cores:
//                a and b rounded to f16, products summed in f32 (the
//                activations move by at most 2^-11 of their magnitude,
//                less than the 8-bit rounding ggml applies to them)
#include <mma.h>

#include "common.cuh"
#include "rms.cuh"
#include "rope.cuh"

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
    if (!ld_rec(R_, rec))
        return;
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

#if __CUDA_ARCH__ >= 700
// The tensor-core tiles' shared parts: a warp owns 32 rows x FN * 16
// columns of the output tile, in 16x16 f32 fragments.
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> tc_acc;

template <int FN> __device__ __forceinline__ void tc_zero(tc_acc (&acc)[2][FN])
{
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
            nvcuda::wmma::fill_fragment(acc[i][j], 0.0f);
}

// One staged step's products: a's rows (the warp's 32, from as) and b's
// (its FN * 16, from bs) as f16 rows of pitch LD, BK values of K.
template <int FN, int LD, int BK>
__device__ __forceinline__ void tc_mma(tc_acc (&acc)[2][FN], const __half *as, const __half *bs)
{
    using namespace nvcuda;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[FN];
#pragma unroll
        for (int i = 0; i < 2; i++)
            wmma::load_matrix_sync(fa[i], as + i * 16 * LD + kk, LD);
#pragma unroll
        for (int j = 0; j < FN; j++)
            wmma::load_matrix_sync(fb[j], bs + j * 16 * LD + kk, LD);
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < FN; j++)
                wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
}

// The warp's fragments out through its own 256 floats of shared memory
// (cw): rows from m0, columns from n0, at batch offset ob.
template <int FN>
__device__ __forceinline__ void tc_store(const int *R_, tc_acc (&acc)[2][FN], float *cw, int m0,
                                         int n0, int64_t ob)
{
    using namespace nvcuda;
    int r = D_RANK(OUT), lane = threadIdx.x % 32;
    int N = D_NE(OUT, r - 1), Mr = D_NE(OUT, r - 2);
    int64_t osm = D_ST(OUT, r - 2), osn = D_ST(OUT, r - 1);
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < FN; j++) {
            wmma::store_matrix_sync(cw, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                int m = m0 + i * 16 + e / 16, n = n0 + j * 16 + e % 16;
                if (m < Mr && n < N)
                    mm_store(R_, ob + m * osm + n * osn, n, cw[e]);
            }
            __syncwarp();
        }
}
#endif

#define BN 128
#define CK 32
#define CL (CK + 8) /* smem row pitch in halves: a multiple of 8 */

// BM x 128 output tiles of a quantized b on the tensor cores (BM 128 or 64):
// 8 warps, BM / 32 along m and 8 / (BM / 32) along n, each 32 rows x WNT
// columns of 16x16 fragments; a and b are rounded to f16 as they are
// staged, the products summed in f32. The next K step's operands are
// loaded into registers while this step's products run. P(7) = 1 when a's
// rows are contiguous f32 at 16-byte aligned starts. The host takes the
// 64-row tiles where 128-row ones would leave SMs idle (a 512-row prompt
// through a 1024-wide weight is 32 tiles of 128).
template <int BM> __device__ __forceinline__ void mm_tc_body(const int *rec)
{
#if __CUDA_ARCH__ >= 700
    using namespace nvcuda;
    constexpr int WM = BM / 32, WN = 8 / WM, WNT = BN / WN, FN = WNT / 16, AR = BM / 64;
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
    int tid = threadIdx.x, warp = tid / 32, wm = warp / WN, wn = warp % WN;
    const uint8_t *ap = D_PTR(0), *bp = D_PTR(1);
    int rowb = P(5);
    bool a4 = P(7) != 0;
    tc_acc acc[2][FN];
    tc_zero<FN>(acc);
    // this thread's share of a step: a rows am + 64 i, 8 values from
    // column ak; b rows bn and bn + 64, 8 values from column bk
    int am = tid / 4, ak = (tid % 4) * 8;
    int bn = tid / 4, bk = (tid % 4) * 8;
    float ra[AR][8], rb[2][8];
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < AR; i++) {
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
        for (int i = 0; i < AR; i++) {
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
        tc_mma<FN, CL, CK>(acc, As + wm * 32 * CL, Bs + wn * WNT * CL);
        __syncthreads();
    }
    tc_store<FN>(R_, acc, Cw[warp], m0 + wm * 32, n0 + wn * WNT, ob);
#endif
}

extern "C" __global__ void __launch_bounds__(256) rlx_mm_tc(const int *rec)
{
    mm_tc_body<128>(rec);
}

extern "C" __global__ void __launch_bounds__(256) rlx_mm_tc64(const int *rec)
{
    mm_tc_body<64>(rec);
}

// ---- matrix-vector products on integer dot products ---------------------
// Decode reads every weight once per token, so these kernels are built for
// the weight stream: rlx_q8_act first rounds the (at most 8) activation
// rows to 8-bit blocks of 32, as the CPU's VNNI kernels do (int8 values,
// and per block its scale d and d * sum(q)); then rlx_mmv_<type> runs tpc
// threads per output column (32, 64 or 128, from K), each thread taking
// whole units of a weight block in wide loads (16 bytes where the block
// format keeps them aligned, aligned words shifted into place where it
// does not) and summing
// four products per __dp4a, for every activation row at once.
// Record: slot 0 a (rlx_q8_act reads it), slot 1 b, slot 2 bias, slot 3
// the int8 rows [M, K] (row stride K, 16-byte aligned), slot 4 their block
// scales as float2 [M, K / 32]; P(0) K, P(1) act, PF(2) alpha, P(3) has
// bias, P(5) b's row bytes, P(8) threads per column, P(10) the output split
// as [M, H, W] (see mmv_body).

extern "C" __global__ void __launch_bounds__(128) rlx_q8_act(const int *rec)
{
    REC_DECL;
    ld_rec(R_, rec);
    int64_t blk = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (blk >= (int64_t)(uint32_t)M_(0))
        return;
    int K = P(0), nb = K / 32, r = D_RANK(0);
    int m = (int)(blk / nb), kb = (int)(blk % nb);
    int64_t e = (int64_t)m * D_ST(0, r - 2) + (int64_t)(kb * 32 + lane) * D_ST(0, r - 1);
    float v = ldf(D_PTR(0), D_DT(0), e);
    q8_warp_store(v, (int8_t *)D_PTR(3), (float2 *)D_PTR(4), (int64_t)m * K + kb * 32 + lane);
}

__device__ __forceinline__ float h2f_bits(uint32_t b)
{
    __half_raw r;
    r.x = (unsigned short)(b & 0xFFFFu);
    return __half2float(__half(r));
}

#define NIB_LO(x) ((int)((x)&0x0F0F0F0Fu))

// Each type loads a unit's weight bytes (load) apart from using them (dot),
// so a thread issues the loads of all its units of a round before it waits
// on any of them.

// Q4_K's 6-bit scales and mins, four to a word without a branch, from the
// 12 scale bytes as words y (bytes 0-3), z (4-7) and w (8-11): sub-blocks
// 0-3 (lo) are the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); 4-7
// take their low 4 bits from bytes 8-11 (scale low nibble, min high) and
// their top 2 from the top 2 of bytes 0-3 and 4-7. Sub-block s is byte
// s % 4 of the lo or hi words. (The threads of a warp take different
// sub-blocks, so a branch on s < 4 ran both ways in every warp.)
__device__ __forceinline__ void q4k_scale_words(uint32_t y, uint32_t z, uint32_t w, bool lo,
                                                uint32_t &scw, uint32_t &mnw)
{
    scw = lo ? y & 0x3F3F3F3Fu : (w & 0x0F0F0F0Fu) | ((y >> 2) & 0x30303030u);
    mnw = lo ? z & 0x3F3F3F3Fu : ((w >> 4) & 0x0F0F0F0Fu) | ((z >> 2) & 0x30303030u);
}

// 32-bit words at a 2-byte aligned address p (the runs of Q6_K, Q8_0 and
// Q4_0 blocks, in the matrix-vector and the prompt products): aligned words shifted down by p's
// offset in its word (0 or 16 bits), the last half-word of the run read as one, so that nothing
// past p + 4 N is read (and before p, only the 2 bytes of p's own word).
template <int N> __device__ __forceinline__ void ld_words_a2(const uint8_t *p, uint32_t (&v)[N])
{
    uint32_t off = (uint32_t)(uintptr_t)p & 2u, sh = off * 8u, w[N + 1];
    const uint32_t *q = (const uint32_t *)(p - off); /* (p's space kept: shared stays LDS) */
#pragma unroll
    for (int i = 0; i < N; i++)
        w[i] = q[i];
    const uint16_t *last = (const uint16_t *)(q + N);
    w[N] = sh ? (uint32_t)last[0] : 0u;
#pragma unroll
    for (int i = 0; i < N; i++)
        v[i] = __funnelshift_r(w[i], w[i + 1], sh);
}

// four products of unsigned bytes of a by signed bytes of b, summed into
// c: Q4_K's high nibbles used in place (16 times their value), a shift
// and a mask fewer a word than moving them down
__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c)
{
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#else
    for (int i = 0; i < 4; i++)
        c += (int)(uint8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
#endif
}

#define NIB_HI_IN_PLACE(x) ((x)&0xF0F0F0F0u)

// 16 bytes of quants q against 16 activation bytes a, summed into c: the
// low nibbles, or the high ones in place (16 times their sum)
__device__ __forceinline__ int dp16_lo(const uint4 &q, const uint4 &a, int c)
{
    c = __dp4a(NIB_LO(q.x), (int)a.x, c);
    c = __dp4a(NIB_LO(q.y), (int)a.y, c);
    c = __dp4a(NIB_LO(q.z), (int)a.z, c);
    return __dp4a(NIB_LO(q.w), (int)a.w, c);
}
__device__ __forceinline__ int dp16_hi(const uint4 &q, const uint4 &a, int c)
{
    c = dp4a_us(NIB_HI_IN_PLACE(q.x), (int)a.x, c);
    c = dp4a_us(NIB_HI_IN_PLACE(q.y), (int)a.y, c);
    c = dp4a_us(NIB_HI_IN_PLACE(q.z), (int)a.z, c);
    return dp4a_us(NIB_HI_IN_PLACE(q.w), (int)a.w, c);
}

// A Q4_K or Q5_K unit's factors from its block's first 16 bytes hd (d,
// dmin, the 12 scale bytes): d times the scales of sub-blocks 2u (f0) and
// 2u + 1 (f1, times hi_mul), dmin times their mins (g0, g1). Sub-blocks
// 2u, 2u + 1 are bytes 2u, 2u + 1 of the lo words for u < 2, bytes 2u - 4,
// 2u - 3 of the hi ones after.
__device__ __forceinline__ void q4k_unit_scales(const uint4 &hd, int u, float hi_mul, float &f0,
                                                float &f1, float &g0, float &g1)
{
    float dw = h2f_bits(hd.x), dmin = h2f_bits(hd.x >> 16);
    uint32_t scw, mnw;
    q4k_scale_words(hd.y, hd.z, hd.w, u < 2, scw, mnw);
    int sh = 16 * (u & 1);
    f0 = dw * (float)((scw >> sh) & 0xFFu);
    f1 = dw * ((float)((scw >> (sh + 8)) & 0xFFu) * hi_mul);
    g0 = dmin * (float)((mnw >> sh) & 0xFFu);
    g1 = dmin * (float)((mnw >> (sh + 8)) & 0xFFu);
}

// Q4_K: 4 units a block, each a pair of 32-value sub-blocks 2u and 2u + 1
// and their 32 bytes of quants (2u in the low nibbles, 2u + 1 in the
// high): one unit's scales and addresses serve 64 values
struct mmv_q4_k {
    static constexpr int BK = 256, BYTES = 144, UNITS = 4, ROUND = 2;
    struct W {
        uint4 hd, q0, q1; // d, dmin and 12 bytes of scales; the unit's quants
    };
    __device__ static __forceinline__ W load(const uint8_t *blk, int u)
    {
        W w;
        w.hd = *(const uint4 *)blk;
        w.q0 = *(const uint4 *)(blk + 16 + 32 * u);
        w.q1 = *(const uint4 *)(blk + 32 + 32 * u);
        return w;
    }
    __device__ static __forceinline__ void dot(const W &w, int b, int u, const int8_t *qa,
                                               const float2 *da, int K, int nm, float *acc)
    {
        const uint4 &hd = w.hd, &q0 = w.q0, &q1 = w.q1;
        /* the high nibbles' sums come 16 times too large (dp4a_us) */
        float f0, f1, g0, g1;
        q4k_unit_scales(hd, u, 0.0625f, f0, f1, g0, g1);
        int64_t k0 = (int64_t)b * 256 + 64 * u;
        int ab = b * 8 + 2 * u; // the activation's block of sub-block 2u
#pragma unroll
        for (int m = 0; m < 8; m++) {
            if (m >= nm)
                break;
            const uint4 *ar = (const uint4 *)(qa + (int64_t)m * K + k0);
            uint4 a0 = ar[0], a1 = ar[1], a2 = ar[2], a3 = ar[3];
            float4 ds = *(const float4 *)(da + (int64_t)m * (K / 32) + ab);
            int slo = dp16_lo(q1, a1, dp16_lo(q0, a0, 0));
            int shi = dp16_hi(q1, a3, dp16_hi(q0, a2, 0));
            acc[m] += f0 * (float)slo * ds.x + f1 * (float)shi * ds.z - (g0 * ds.y + g1 * ds.w);
        }
    }
};

// Q5_K: Q4_K's units with a fifth bit a value: bit s of qh byte l (the
// block's bytes 16-47) is the high bit of sub-block s's value l, so a
// unit's two sub-blocks take bits 2u and 2u + 1 of all 32; both nibbles
// are moved down to join them (5-bit values, one dp4a a word each)
struct mmv_q5_k {
    static constexpr int BK = 256, BYTES = 176, UNITS = 4, ROUND = 2;
    struct W {
        uint4 hd, q0, q1, h0, h1; // d, dmin, scales; the unit's quants; the block's qh
    };
    __device__ static __forceinline__ W load(const uint8_t *blk, int u)
    {
        W w;
        w.hd = *(const uint4 *)blk;
        w.h0 = *(const uint4 *)(blk + 16);
        w.h1 = *(const uint4 *)(blk + 32);
        w.q0 = *(const uint4 *)(blk + 48 + 32 * u);
        w.q1 = *(const uint4 *)(blk + 64 + 32 * u);
        return w;
    }
    __device__ static __forceinline__ void dot(const W &w, int b, int u, const int8_t *qa,
                                               const float2 *da, int K, int nm, float *acc)
    {
        const uint4 &hd = w.hd;
        float f0, f1, g0, g1;
        q4k_unit_scales(hd, u, 1.0f, f0, f1, g0, g1);
        const uint32_t q[8] = {w.q0.x, w.q0.y, w.q0.z, w.q0.w, w.q1.x, w.q1.y, w.q1.z, w.q1.w};
        const uint32_t h[8] = {w.h0.x, w.h0.y, w.h0.z, w.h0.w, w.h1.x, w.h1.y, w.h1.z, w.h1.w};
        int lo[8], hi[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            lo[i] = NIB_LO(q[i]) | (int)(((h[i] >> (2 * u)) << 4) & 0x10101010u);
            hi[i] = NIB_LO(q[i] >> 4) | (int)(((h[i] >> (2 * u + 1)) << 4) & 0x10101010u);
        }
        int64_t k0 = (int64_t)b * 256 + 64 * u;
        int ab = b * 8 + 2 * u; // the activation's block of sub-block 2u
#pragma unroll
        for (int m = 0; m < 8; m++) {
            if (m >= nm)
                break;
            const uint4 *ar = (const uint4 *)(qa + (int64_t)m * K + k0);
            uint4 a0 = ar[0], a1 = ar[1], a2 = ar[2], a3 = ar[3];
            float4 ds = *(const float4 *)(da + (int64_t)m * (K / 32) + ab);
            const int a[16] = {(int)a0.x, (int)a0.y, (int)a0.z, (int)a0.w, (int)a1.x, (int)a1.y,
                               (int)a1.z, (int)a1.w, (int)a2.x, (int)a2.y, (int)a2.z, (int)a2.w,
                               (int)a3.x, (int)a3.y, (int)a3.z, (int)a3.w};
            int slo = 0, shi = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                slo = __dp4a(lo[i], a[i], slo);
                shi = __dp4a(hi[i], a[8 + i], shi);
            }
            acc[m] += f0 * (float)slo * ds.x + f1 * (float)shi * ds.z - (g0 * ds.y + g1 * ds.w);
        }
    }
};

// Q6_K: 4 units a block, each 16 consecutive l of one half n (64 values:
// at l, l + 32, l + 64 and l + 96 of the half, a scale each); blocks are
// 210 bytes, so the unit's runs of 16 bytes are read as aligned words
// (ld_words_a2)
struct mmv_q6_k {
    static constexpr int BK = 256, BYTES = 210, UNITS = 4, ROUND = 2;
    struct W {
        uint32_t A[4], B[4], H[4]; // ql[l..], ql[l + 32..], qh[l..]
        uint32_t sc;               // the four scales of the unit, one a byte
        uint32_t d;
    };
    __device__ static __forceinline__ W load(const uint8_t *blk, int u)
    {
        W w;
        int n = u >> 1, l0 = (u & 1) * 16;
        const uint8_t *ql = blk + 64 * n, *qh = blk + 128 + 32 * n;
        ld_words_a2<4>(ql + l0, w.A);
        ld_words_a2<4>(ql + 32 + l0, w.B);
        ld_words_a2<4>(qh + l0, w.H);
        /* scales 8n + is + 2t (is = l0 / 16), t = 0..3: bytes is, is + 2
         * of the half's first scale word, is + 4, is + 6 of its second */
        uint32_t s[2];
        ld_words_a2<2>(blk + 192 + 8 * n, s);
        w.sc = __byte_perm(s[0], s[1], (u & 1) ? 0x7531 : 0x6420);
        w.d = *(const uint16_t *)(blk + 208);
        return w;
    }
    __device__ static __forceinline__ void dot(const W &w, int b, int u, const int8_t *qa,
                                               const float2 *da, int K, int nm, float *acc)
    {
        int n = u >> 1, l0 = (u & 1) * 16;
        int q[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            /* low 4 bits from ql, the top 2 from qh (the fields do not
             * overlap, so an add joins them) */
            uint32_t A = w.A[i], B = w.B[i], H = w.H[i];
            q[0][i] = (int)((A & 0x0F0F0F0Fu) + ((H & 0x03030303u) << 4));
            q[1][i] = (int)((B & 0x0F0F0F0Fu) + ((H & 0x0C0C0C0Cu) << 2));
            q[2][i] = (int)(((A >> 4) & 0x0F0F0F0Fu) + (H & 0x30303030u));
            q[3][i] = (int)(((B >> 4) & 0x0F0F0F0Fu) + ((H >> 2) & 0x30303030u));
        }
        float dw = h2f_bits(w.d);
        float sc[4];
#pragma unroll
        for (int t = 0; t < 4; t++)
            sc[t] = dw * (float)(int8_t)(w.sc >> (8 * t));
        int64_t k0 = (int64_t)b * 256 + 128 * n + l0;
        int ab = b * 8 + 4 * n;
#pragma unroll
        for (int m = 0; m < 8; m++) {
            if (m >= nm)
                break;
            const int8_t *ar = qa + (int64_t)m * K + k0;
            const float2 *dr = da + (int64_t)m * (K / 32) + ab;
            float v = 0.0f;
#pragma unroll
            for (int t = 0; t < 4; t++) {
                uint4 a = *(const uint4 *)(ar + 32 * t);
                int s = __dp4a(q[t][0], (int)a.x, 0);
                s = __dp4a(q[t][1], (int)a.y, s);
                s = __dp4a(q[t][2], (int)a.z, s);
                s = __dp4a(q[t][3], (int)a.w, s);
                int sa = __dp4a(0x01010101, (int)a.x, 0);
                sa = __dp4a(0x01010101, (int)a.y, sa);
                sa = __dp4a(0x01010101, (int)a.z, sa);
                sa = __dp4a(0x01010101, (int)a.w, sa);
                v += sc[t] * dr[t].x * (float)(s - 32 * sa);
            }
            acc[m] += v;
        }
    }
};

// Q8_0: a unit a block of 34 bytes, 32 values (ld_words_a2: the quants
// start 2 bytes in)
struct mmv_q8_0 {
    static constexpr int BK = 32, BYTES = 34, UNITS = 1, ROUND = 2;
    struct W {
        uint32_t q[8];
        uint32_t d;
    };
    __device__ static __forceinline__ W load(const uint8_t *blk, int u)
    {
        (void)u;
        W w;
        ld_words_a2<8>(blk + 2, w.q);
        w.d = *(const uint16_t *)blk;
        return w;
    }
    __device__ static __forceinline__ void dot(const W &w, int b, int u, const int8_t *qa,
                                               const float2 *da, int K, int nm, float *acc)
    {
        (void)u;
        float dw = h2f_bits(w.d);
        int64_t k0 = (int64_t)b * 32;
#pragma unroll
        for (int m = 0; m < 8; m++) {
            if (m >= nm)
                break;
            const uint4 *ar = (const uint4 *)(qa + (int64_t)m * K + k0);
            uint4 a0 = ar[0], a1 = ar[1];
            int s = __dp4a((int)w.q[0], (int)a0.x, 0);
            s = __dp4a((int)w.q[1], (int)a0.y, s);
            s = __dp4a((int)w.q[2], (int)a0.z, s);
            s = __dp4a((int)w.q[3], (int)a0.w, s);
            s = __dp4a((int)w.q[4], (int)a1.x, s);
            s = __dp4a((int)w.q[5], (int)a1.y, s);
            s = __dp4a((int)w.q[6], (int)a1.z, s);
            s = __dp4a((int)w.q[7], (int)a1.w, s);
            acc[m] += dw * da[(int64_t)m * (K / 32) + b].x * (float)s;
        }
    }
};

// Q4_0: a unit a block of 18 bytes, 32 values (value i in the low nibble
// of byte i, 16 + i in its high one; the quants start 2 bytes in); the
// high nibbles used in place (dp4a_us), the -8 offset through the
// activation block's sum
struct mmv_q4_0 {
    static constexpr int BK = 32, BYTES = 18, UNITS = 1, ROUND = 2;
    struct W {
        uint32_t q[4];
        uint32_t d;
    };
    __device__ static __forceinline__ W load(const uint8_t *blk, int u)
    {
        (void)u;
        W w;
        ld_words_a2<4>(blk + 2, w.q);
        w.d = *(const uint16_t *)blk;
        return w;
    }
    __device__ static __forceinline__ void dot(const W &w, int b, int u, const int8_t *qa,
                                               const float2 *da, int K, int nm, float *acc)
    {
        (void)u;
        float dw = h2f_bits(w.d);
        int64_t k0 = (int64_t)b * 32;
#pragma unroll
        for (int m = 0; m < 8; m++) {
            if (m >= nm)
                break;
            const uint4 *ar = (const uint4 *)(qa + (int64_t)m * K + k0);
            uint4 a0 = ar[0], a1 = ar[1];
            uint4 q = make_uint4(w.q[0], w.q[1], w.q[2], w.q[3]);
            int s = dp16_lo(q, a0, 0), sh = dp16_hi(q, a1, 0);
            float2 ds = da[(int64_t)m * (K / 32) + b];
            /* the high nibbles' sum is 16 times too large: s * 16 + sh is
             * 16 times the block's sum, exact in an int */
            acc[m] += dw * (ds.x * ((float)(s * 16 + sh) * 0.0625f) - 8.0f * ds.y);
        }
    }
};

// P(100..101): the record of the RMS norm (rlx_rowop's) that reads this
// product's output right after it, its own launch empty: the product's
// block that finishes last runs it over the (at most 8) rows, a launch
// fewer (the o and down products of a decode step and the norm after
// each). Each block counts itself done in the counter at P(102..103) (0
// between runs: the last block sets it back) after its stores are visible
// device-wide; the last reads the outputs past L1.
// R_ becomes the record at src: the whole block calls it, once every
// thread has read what it needs of the old one
__device__ __forceinline__ void swap_rec(int *R_, const int *src)
{
    __syncthreads();
    rec_copy(R_, src);
    __syncthreads();
}

__device__ __forceinline__ void mmv_tail(int *R_)
{
    __shared__ float sv[4]; /* a float a warp: 128 threads */
    if (!last_block((int *)P_ADDR(102), (int)(gridDim.x * gridDim.y * gridDim.z)))
        return;
    swap_rec(R_, (const int *)P_ADDR(100));
    int nt = (int)blockDim.x; /* the whole block a row */
    for (int64_t r0 = 0; r0 < (int64_t)(uint32_t)M_(0); r0++)
        rms_rows<true>(R_, sv, nt, nt, r0, r0 + 1);
}

// P(108..109): the record of the rope (rlx_rope's) of this product's
// output as heads of P(114) columns, one row (a decode step's q or k), and
// P(110..111), if not 0, that of the RMS norm of each head before it (a
// Qwen3's q and k norms; rlx_rowop's float4 record, a warp a head): the
// block that finishes a head last norms and ropes it, their launches
// empty. Each block counts itself done in its head's counter (P(112..113)
// + head; 0 between runs); the last reads the head past L1. cpb divides
// P(114).
__device__ __forceinline__ void mmv_heads(int *R_, int cpb)
{
    __shared__ float sv[4]; /* a float a warp: 128 threads */
    int D = P(114);
    int h = (int)blockIdx.x * cpb / D;
    if (!last_block((int *)P_ADDR(112) + h, D / cpb))
        return;
    const int *nr = (const int *)P_ADDR(110), *rr = (const int *)P_ADDR(108);
    if (nr) {
        swap_rec(R_, nr);
        int nt = (int)blockDim.x;
        rms_rows<true>(R_, sv, nt, P(7) < nt ? P(7) : nt, h, h + 1);
    }
    swap_rec(R_, rr); /* (its barrier: the normed head visible to the block) */
    int per = P(1) - P(2);
    for (int j = threadIdx.x; j < per; j += blockDim.x)
        rope_item<true>(R_, (int64_t)h * per + j);
}

// GLU (rlx_mmv_glu_<type>): two products of the same rows, b (slot 1)
// and a second weight of b's type and shape (slot 5), output column n of
// both by the same threads, stored as their gated product h = act(alpha
// g) * act2(alpha u) (P(1) act, P(104) act2) into the output (slot 6):
// a decode step's gate, up and their product, one launch for three. h is
// also rounded to 8-bit blocks of 32 into the scratch at P(120..123) for
// the down product after it: each block counts itself done in its block
// of 32 columns' counter (P(106..107), 0 between runs), and the last of
// those 32 / cpb blocks rounds the 32 columns (N a multiple of 32).
template <bool GLU>
__device__ __forceinline__ void mmv_glu_round(const int *R_, int64_t tile, int cpb, int nm)
{
    if (!GLU)
        return;
    int g = (int)(tile * cpb / 32); /* cpb divides 32; a tile is cpb columns */
    if (!last_block((int *)P_ADDR(106) + g, 32 / cpb) || threadIdx.x >= 32)
        return;
    int r = D_RANK(OUT), N = D_NE(OUT, r - 1), c = g * 32 + (int)threadIdx.x;
    const float *h = (const float *)D_PTR(OUT);
    for (int m = 0; m < nm; m++) {
        float v = __ldcg(h + (int64_t)m * D_ST(OUT, r - 2) + (int64_t)c * D_ST(OUT, r - 1));
        q8_warp_store(v, (int8_t *)P_ADDR(120), (float2 *)P_ADDR(122), (int64_t)m * N + c);
    }
}

// The records that a product's last blocks read after all its blocks are
// done (the norm of mmv_tail, the norm and rope of mmv_heads): block 0
// asks L2 for them as the kernel starts, so that read is not a trip to
// memory at the kernel's end (the weights stream past L2 meanwhile).
// Gated products have neither.
template <bool GLU> __device__ __forceinline__ void mmv_prefetch_late(const int *R_)
{
    if (GLU || blockIdx.x != 0 || threadIdx.x >= 32)
        return;
    int t = threadIdx.x % 8, k = threadIdx.x / 8; /* 8 lines a record */
    const void *r = k == 0 ? P_ADDR(100) : k == 1 ? P_ADDR(110) : k == 2 ? P_ADDR(108) : NULL;
    if (r)
        l2_prefetch(r, REC * 4, t, 8);
}

// warp sums of the (up to 8) rows' partial sums, then across the warps of
// a column (tpc > 32) through red; the totals end in the column's thread 0
__device__ __forceinline__ void mmv_reduce(float *acc, float (*red)[8], int tpc, int t, int nm)
{
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int width = tpc < 32 ? tpc : 32;
#pragma unroll
    for (int m = 0; m < 8; m++) {
        if (m >= nm)
            break;
        for (int o = width / 2; o > 0; o >>= 1)
            acc[m] += __shfl_xor_sync(0xFFFFFFFFu, acc[m], o);
    }
    if (tpc > 32) {
        if (lane == 0)
#pragma unroll
            for (int m = 0; m < 8; m++)
                red[warp][m] = acc[m];
        __syncthreads();
        if (t == 0)
#pragma unroll
            for (int m = 0; m < 8; m++) {
                float s = 0.0f;
                for (int i = 0; i < tpc / 32; i++)
                    s += red[warp + i][m];
                acc[m] = s;
            }
        __syncthreads(); /* red free again */
    }
}

// The (up to 8) rows' sums of output column n (NW of them: a gated
// product's two) reduced over the column's tpc threads, then stored by its
// thread 0: a gated product's act(alpha g) * act2(alpha u), else through
// mm_store (bias, activation, alpha). P(10): the output is [M, H, W] with
// n = h W + w (rows appended straight into a KV cache's heads), else
// [.., M, N].
template <bool GLU>
__device__ __forceinline__ void mmv_finish(const int *R_, float (*acc)[8], float (*red)[8], int tpc,
                                           int t, int64_t n, int N, int nm)
{
    constexpr int NW = GLU ? 2 : 1;
#pragma unroll
    for (int k = 0; k < NW; k++)
        mmv_reduce(acc[k], red, tpc, t, nm);
    if (t != 0 || n >= N)
        return;
    int r = D_RANK(OUT), sp = P(10) ? 1 : 0, W = D_NE(OUT, r - 1);
    int64_t on = sp ? n / W * D_ST(OUT, r - 2) + n % W * D_ST(OUT, r - 1) : n * D_ST(OUT, r - 1);
#pragma unroll
    for (int m = 0; m < 8; m++) {
        if (m >= nm)
            break;
        int64_t oo = (int64_t)m * D_ST(OUT, r - 2 - sp) + on;
        if (GLU) {
            float al = PF(2) == 0.0f ? 1.0f : PF(2);
            float h = act(P(1), acc[0][m] * al) * act(P(104), acc[NW - 1][m] * al);
            stf((uint8_t *)D_PTR(OUT), D_DT(OUT), oo, h);
        } else {
            mm_store(R_, oo, (int)n, acc[0][m]);
        }
    }
}

// The product's output columns N and the rows it computes at once, nm (at
// most 8); P(10): the output is [M, H, W], N = H W (rows appended straight
// into a KV cache's heads), else [.., M, N]
__device__ __forceinline__ int mmv_cols(const int *R_, int &nm)
{
    int r = D_RANK(OUT), sp = P(10) ? 1 : 0, W = D_NE(OUT, r - 1);
    int Mr = D_NE(OUT, r - 2 - sp);
    nm = Mr < 8 ? Mr : 8;
    return sp ? D_NE(OUT, r - 2) * W : W;
}

// tpc threads per output column (4 to 128, a power of two; the host picks
// about a round of units a thread: two of 64 values for the K-quants, two
// of 32 for Q8_0 and Q4_0), 128 a block; each round a thread loads up to
// Q::ROUND units (GLU: half of them from each weight), then uses them
template <class Q, bool GLU> __device__ __forceinline__ void mmv_body(const int *rec)
{
    REC_DECL;
    __shared__ float red[4][8];
    if (!ld_rec_early(R_, rec))
        return;
    constexpr int NW = GLU ? 2 : 1, UR = Q::ROUND / NW; /* weights; units of each a round */
    int tpc = P(8), cpb = 128 / tpc;
    int t = threadIdx.x % tpc;
    int64_t n = (int64_t)blockIdx.x * cpb + threadIdx.x / tpc;
    int nm, N = mmv_cols(R_, nm), K = P(0);
    float acc[NW][8];
#pragma unroll
    for (int k = 0; k < NW; k++)
#pragma unroll
        for (int m = 0; m < 8; m++)
            acc[k][m] = 0.0f;
    const uint8_t *w[NW];
    w[0] = D_PTR(1) + n * P(5);
    if (GLU)
        w[NW - 1] = D_PTR(5) + n * P(5);
    int units = K / Q::BK * Q::UNITS;
    typename Q::W wv[NW][UR];
    /* f(k, i, u) for unit u = u0 + i tpc of weight k, the units of a round */
    auto each_unit = [&](int u0, auto &&f) {
#pragma unroll
        for (int k = 0; k < NW; k++)
#pragma unroll
            for (int i = 0; i < UR; i++) {
                int u = u0 + i * tpc;
                if (u < units)
                    f(k, i, u);
            }
    };
    auto load_round = [&](int u0) {
        each_unit(u0, [&](int k, int i, int u) {
            wv[k][i] = Q::load(w[k] + (int64_t)((unsigned)u / Q::UNITS) * Q::BYTES,
                               (unsigned)u % Q::UNITS);
        });
    };
    mmv_prefetch_late<GLU>(R_);
    /* P(117): the weights are constants (no launch writes them), so the
     * first round's are loaded while the launch before this one runs */
    bool early = P(117) != 0 && n < N;
    if (early)
        load_round(t);
    dep_wait();
    if (n < N) {
        const int8_t *qa = (const int8_t *)D_PTR(3);
        const float2 *da = (const float2 *)D_PTR(4);
        if (!early)
            load_round(t);
        for (int u0 = t; u0 < units; u0 += UR * tpc) {
            each_unit(u0, [&](int k, int i, int u) {
                Q::dot(wv[k][i], (unsigned)u / Q::UNITS, (unsigned)u % Q::UNITS, qa, da, K, nm,
                       acc[k]);
            });
            if (u0 + UR * tpc < units)
                load_round(u0 + UR * tpc);
        }
    }
    mmv_finish<GLU>(R_, acc, red, tpc, t, n, N, nm);
    mmv_glu_round<GLU>(R_, blockIdx.x, cpb, nm);
    if (!GLU && (P(100) | P(101)))
        mmv_tail(R_);
    if (!GLU && (P(108) | P(109)))
        mmv_heads(R_, cpb);
}

// Streamed form (rlx_mmvs_<type>, rlx_mmvs_glu_<type>), for products of
// many more columns than the GPU holds blocks at once (a decode step's
// gate/up and down products, the output head over the vocabulary): the
// plain form above holds a round of weights in registers, about 40 KB an
// SM in flight, and leaves the SM between blocks, which kept the large
// products near 1.5 TB/s on an H200. Here each block strides over tiles
// of cpb columns (tile j, j + gridDim.x, ...) and copies a tile's weight
// rows (contiguous: cpb rows of P(5) bytes) into shared memory with async
// copies, P(118) tiles ahead (2 to 4 stages of P(119) bytes a weight), so
// the next tiles' bytes are in flight while this one's are used; the
// threads then read their units from shared memory as the plain form
// reads them from global. Same record, same reduction, stores and gated
// rounding; the norm tail (P(100)) counts blocks as before; no heads
// (P(108)) and no launch groups. The weights are constants (P(117)), so
// the first stages are requested before the launch ahead of this one ends.
#define MMVS_BYTES 40960 /* the stages' shared memory: cuda-internal.h's CU_MMVS_BYTES */
template <class Q, bool GLU> __device__ __forceinline__ void mmvs_body(const int *rec)
{
    REC_DECL;
    __shared__ float red[4][8];
    __shared__ __align__(16) uint8_t stg[MMVS_BYTES];
    if (!ld_rec_early(R_, rec))
        return;
    constexpr int NW = GLU ? 2 : 1;
    int tpc = P(8), cpb = 128 / tpc;
    int t = threadIdx.x % tpc, c = threadIdx.x / tpc;
    int nm, N = mmv_cols(R_, nm), K = P(0);
    int64_t rb = P(5), tiles = ((int64_t)N + cpb - 1) / cpb, gs = gridDim.x;
    int ns = P(118), sb = P(119);
    const uint8_t *wb[NW];
    wb[0] = D_PTR(1);
    if (GLU)
        wb[NW - 1] = D_PTR(5);
    uint64_t pol = l2_evict_first();
    /* tile j's rows into stage s (an empty group past the last tile, so
     * that every thread's groups count one a tile) */
    auto issue = [&](int64_t j, int s) {
        if (j < tiles) {
            int64_t n0 = j * cpb, cols = (int64_t)N - n0 < cpb ? (int64_t)N - n0 : cpb;
#pragma unroll
            for (int k = 0; k < NW; k++)
                cp_span_async(stg + (s * NW + k) * sb, wb[k] + n0 * rb, cols * rb, pol);
        }
        cp_commit();
    };
    mmv_prefetch_late<GLU>(R_);
    bool early = P(117) != 0;
    if (early)
        for (int s = 0; s < ns; s++)
            issue(blockIdx.x + s * gs, s);
    dep_wait();
    if (!early)
        for (int s = 0; s < ns; s++)
            issue(blockIdx.x + s * gs, s);
    const int8_t *qa = (const int8_t *)D_PTR(3);
    const float2 *da = (const float2 *)D_PTR(4);
    int units = K / Q::BK * Q::UNITS;
    int s = 0;
    for (int64_t j = blockIdx.x; j < tiles; j += gs) {
        /* this tile's group done: ns + i committed, at most ns - 1 newer */
        if (ns >= 4)
            cp_wait<3>();
        else if (ns == 3)
            cp_wait<2>();
        else
            cp_wait<1>();
        __syncthreads(); /* every thread's copies visible */
        int64_t n = j * cpb + c;
        float acc[NW][8];
#pragma unroll
        for (int k = 0; k < NW; k++)
#pragma unroll
            for (int m = 0; m < 8; m++)
                acc[k][m] = 0.0f;
        if (n < N) {
#pragma unroll
            for (int k = 0; k < NW; k++) {
                const uint8_t *row = stg + (s * NW + k) * sb +
                                     ((uintptr_t)(wb[k] + j * cpb * rb) & 15) + (int64_t)c * rb;
                for (int u = t; u < units; u += tpc) {
                    int ub = (int)((unsigned)u / Q::UNITS), uu = (int)((unsigned)u % Q::UNITS);
                    Q::dot(Q::load(row + (int64_t)ub * Q::BYTES, uu), ub, uu, qa, da, K, nm,
                           acc[k]);
                }
            }
        }
        mmv_finish<GLU>(R_, acc, red, tpc, t, n, N, nm);
        mmv_glu_round<GLU>(R_, j, cpb, nm);
        __syncthreads(); /* stage s read by all: free for tile j + ns gs */
        issue(j + ns * gs, s);
        s = s + 1 == ns ? 0 : s + 1;
    }
    cp_wait<0>();
    if (!GLU && (P(100) | P(101)))
        mmv_tail(R_);
}

// each weight type's kernels: plain and streamed, one weight and gated
#define MMV_KERNELS(T)                                                                 \
    extern "C" __global__ void __launch_bounds__(128) rlx_mmv_##T(const int *rec)      \
    {                                                                                  \
        mmv_body<mmv_##T, false>(rec);                                                 \
    }                                                                                  \
    extern "C" __global__ void __launch_bounds__(128) rlx_mmv_glu_##T(const int *rec)  \
    {                                                                                  \
        mmv_body<mmv_##T, true>(rec);                                                  \
    }                                                                                  \
    extern "C" __global__ void __launch_bounds__(128) rlx_mmvs_##T(const int *rec)     \
    {                                                                                  \
        mmvs_body<mmv_##T, false>(rec);                                                \
    }                                                                                  \
    extern "C" __global__ void __launch_bounds__(128) rlx_mmvs_glu_##T(const int *rec) \
    {                                                                                  \
        mmvs_body<mmv_##T, true>(rec);                                                 \
    }
MMV_KERNELS(q4_k)
MMV_KERNELS(q6_k)
MMV_KERNELS(q8_0)
MMV_KERNELS(q4_0)
MMV_KERNELS(q5_k)

// Products of different weight types grouped into one launch (q, k and v
// of a decode step where a Q4_K_M file gives v Q6_K weights): each group
// member runs its own type's body, P(116) (0 Q4_K, 1 Q6_K, 2 Q8_0, 3
// Q4_0, 4 Q5_K). The member's record is the host's, written before the
// launch, so it is read before ld_rec's wait. Bounds of 4 blocks an SM:
// ptxas then takes 120 registers and spills nothing (sm_90; its 32-byte
// stack frame is sincosf's slow path, in the rope of the heads' tail).
extern "C" __global__ void __launch_bounds__(128, 4) rlx_mmv_mixed(const int *rec)
{
    const int *r = blockIdx.y ? rec + (int64_t)blockIdx.y * rec[GRP_STRIDE] : rec;
    switch (r[128 + 116]) {
    case 0:
        mmv_body<mmv_q4_k, false>(rec);
        break;
    case 1:
        mmv_body<mmv_q6_k, false>(rec);
        break;
    case 2:
        mmv_body<mmv_q8_0, false>(rec);
        break;
    case 3:
        mmv_body<mmv_q4_0, false>(rec);
        break;
    default:
        mmv_body<mmv_q5_k, false>(rec);
        break;
    }
}

// ---- prompt products of quantized weights, second form --------------------
// rlx_mm_tq (BM 128) / rlx_mm_tq64 (BM 64): BM x 128 output tiles on the
// tensor cores as rlx_mm_tc, with the work around the products cut down:
// a is read as the f16 copy the launch before wrote (slot 3: [M, K]
// dense, 16-byte rows), so staging it is an asynchronous copy; b is
// dequantized 16 consecutive values a thread, with a block's scales
// decoded once for them, by a path per weight type (Q4_K, Q5_K, Q6_K,
// Q8_0, Q4_0; the others through deq8). K advances TQ_BK a step through two
// stages of shared memory, one barrier a step: while a step's products
// run, the next step's a is copied into the other stage and its b bytes
// travel to registers (mm_tq_body). Two blocks an SM (128 registers a
// thread), so one's barrier is the other's turn. P(9): 16 or 2 when b's
// rows start at addresses of that alignment (Q4_K's and Q5_K's paths
// want 16, the others 2; below that, deq8). One batch. Where the tiles
// are too few to fill the SMs' slots, K is split over gridDim.z blocks a
// tile (P(11) values each, a multiple of TQ_BK; tq_split_end).
#define TQ_BK 32
#define TQ_LD (TQ_BK + 8) /* smem row pitch in halves: 80 bytes, 8 rows on distinct banks */

// Decoding to f16 two values at a time: a word of two f16 lanes (half2,
// value k in the low lane, k + 1 in the high), built from two quant
// bytes spread into the lanes' low bytes (tq_spread) and ORed into the
// bits of the f16 1024, whose last mantissa bit is worth 1: lane = 1024 +
// q exactly for q < 1024; one half2 subtraction of 1024 plus the type's
// offset leaves q - offset exactly, and a half2 product (or fused
// product and sum) applies the scale, rounded once to f16. Q8_0's and
// Q4_0's values come out as the f32 path rounded them (their scales are
// f16); Q4_K's and Q6_K's scale products (a block's f16 scale times a 6-
// or 8-bit one) are rounded to f16 first, within 2^-11 of theirs.
__device__ __forceinline__ __half2 tq_h2(uint32_t u)
{
    __half2 h;
    memcpy(&h, &u, 4);
    return h;
}

__device__ __forceinline__ uint32_t tq_u32(__half2 h)
{
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}

// bytes 2j and 2j + 1 of x into the low bytes of the two lanes, zeros above
template <int J> __device__ __forceinline__ uint32_t tq_spread(uint32_t x)
{
    return __byte_perm(x, 0u, J ? 0x4342u : 0x4140u);
}

// the 16 values' 8 words into a thread's two 16-byte pieces of the stage
__device__ __forceinline__ void tq_put(const uint32_t (&h)[8], uint4 &lo, uint4 &hi)
{
    lo = make_uint4(h[0], h[1], h[2], h[3]);
    hi = make_uint4(h[4], h[5], h[6], h[7]);
}

// Q4_K's and Q5_K's 16 values at k: the nibbles of q (low or high by the
// sub-block's parity), each joined by bit 4 of its byte of f (Q5_K's
// fifth bits moved there; zeros for Q4_K), scaled by the sub-block's
// 6-bit scale and min from h (d, dmin and the 12 scale bytes)
__device__ __forceinline__ void tq_k_deq(const uint4 &h, const uint4 &q, const uint32_t (&f)[4],
                                         int k, uint4 &lo, uint4 &hi)
{
    int sub = (k & 255) >> 5, sh = (sub & 1) * 4;
    uint32_t scw, mnw;
    q4k_scale_words(h.y, h.z, h.w, sub < 4, scw, mnw);
    int sc = (int)((scw >> (8 * (sub & 3))) & 0xFFu), mn = (int)((mnw >> (8 * (sub & 3))) & 0xFFu);
    __half2 d = __float2half2_rn(h2f_bits(h.x) * (float)sc),
            m = __float2half2_rn(-h2f_bits(h.x >> 16) * (float)mn);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    const __half2 c = tq_h2(0x64006400u); /* 1024 */
    uint32_t v[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        uint32_t x = w[i] >> sh;
        uint32_t p0 = (tq_spread<0>(x) & 0x000F000Fu) | (tq_spread<0>(f[i]) & 0x00100010u) |
                      0x64006400u,
                 p1 = (tq_spread<1>(x) & 0x000F000Fu) | (tq_spread<1>(f[i]) & 0x00100010u) |
                      0x64006400u;
        v[2 * i] = tq_u32(__hfma2(__hsub2(tq_h2(p0), c), d, m));
        v[2 * i + 1] = tq_u32(__hfma2(__hsub2(tq_h2(p1), c), d, m));
    }
    tq_put(v, lo, hi);
}

// Each type's 16 values at column k of a row in two halves: fetch loads
// the bytes they come from into registers, deq decodes them to f16, so
// that the kernel issues the next step's loads, runs this step's
// products while they travel and decodes them after (mm_tq_body).
struct tq_q4_k { // 144-byte blocks of 256: 16 values of one 32-value sub-block
    struct R {
        uint4 h, q; // d, dmin and the 12 scale bytes; the 16 bytes of quants
    };
    __device__ static __forceinline__ void fetch(const uint8_t *row, int k, R &r)
    {
        const uint8_t *b = row + (int64_t)(k >> 8) * 144;
        int i0 = k & 255, sub = i0 >> 5, l0 = i0 & 31;
        r.h = *(const uint4 *)b;
        r.q = *(const uint4 *)(b + 16 + (sub >> 1) * 32 + l0);
    }
    __device__ static __forceinline__ void deq(const R &r, int k, uint4 &lo, uint4 &hi)
    {
        const uint32_t none[4] = {0, 0, 0, 0};
        tq_k_deq(r.h, r.q, none, k, lo, hi);
    }
};

struct tq_q5_k { // 176-byte blocks of 256: Q4_K's, with a fifth bit a value (qh)
    struct R {
        uint4 h, q, qh; // d, dmin, scales; 16 bytes of quants; their 16 bytes of qh
    };
    __device__ static __forceinline__ void fetch(const uint8_t *row, int k, R &r)
    {
        const uint8_t *b = row + (int64_t)(k >> 8) * 176;
        int i0 = k & 255, sub = i0 >> 5, l0 = i0 & 31;
        r.h = *(const uint4 *)b;
        r.qh = *(const uint4 *)(b + 16 + l0);
        r.q = *(const uint4 *)(b + 48 + (sub >> 1) * 32 + l0);
    }
    __device__ static __forceinline__ void deq(const R &r, int k, uint4 &lo, uint4 &hi)
    {
        /* bit sub of each qh byte moved to bit 4 */
        int sub = (k & 255) >> 5;
        const uint32_t f[4] = {(r.qh.x >> sub) << 4, (r.qh.y >> sub) << 4, (r.qh.z >> sub) << 4,
                               (r.qh.w >> sub) << 4};
        tq_k_deq(r.h, r.q, f, k, lo, hi);
    }
};

struct tq_q6_k { // 210-byte blocks of 256: 16 values share one scale
    struct R {
        uint32_t L[4], H[4]; // low nibbles, high 2-bit pairs
        uint32_t d;          // the block's f16 scale, and the values' int8 scale << 16
    };
    __device__ static __forceinline__ void fetch(const uint8_t *row, int k, R &r)
    {
        const uint8_t *b = row + (int64_t)(k >> 8) * 210;
        int i0 = k & 255, hf = i0 >> 7, q = (i0 & 127) >> 5, l0 = i0 & 31;
        const uint8_t *ql = b + hf * 64 + l0 + ((q & 1) ? 32 : 0), *qh = b + 128 + hf * 32 + l0;
        ld_words_a2<4>(ql, r.L);
        ld_words_a2<4>(qh, r.H);
        r.d = (uint32_t)(b[208] | b[209] << 8) | (uint32_t)b[192 + hf * 8 + l0 / 16 + 2 * q] << 16;
    }
    __device__ static __forceinline__ void deq(const R &r, int k, uint4 &lo, uint4 &hi)
    {
        int q = ((k & 255) & 127) >> 5, sh = (q & 2) ? 4 : 0;
        __half2 d = __float2half2_rn(h2f_bits(r.d) * (float)(int8_t)(r.d >> 16));
        const __half2 c = tq_h2(0x64206420u); /* 1024 + 32 */
        uint32_t h[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t x = r.L[i] >> sh, y = (r.H[i] >> (2 * q)) << 4;
            uint32_t p0 = (tq_spread<0>(x) & 0x000F000Fu) | (tq_spread<0>(y) & 0x00300030u) |
                          0x64006400u,
                     p1 = (tq_spread<1>(x) & 0x000F000Fu) | (tq_spread<1>(y) & 0x00300030u) |
                          0x64006400u;
            h[2 * i] = tq_u32(__hmul2(__hsub2(tq_h2(p0), c), d));
            h[2 * i + 1] = tq_u32(__hmul2(__hsub2(tq_h2(p1), c), d));
        }
        tq_put(h, lo, hi);
    }
};

struct tq_q8_0 { // 34-byte blocks of 32
    struct R {
        uint32_t q[4], d;
    };
    __device__ static __forceinline__ void fetch(const uint8_t *row, int k, R &r)
    {
        const uint8_t *b = row + (int64_t)(k >> 5) * 34;
        const uint8_t *qs = b + 2 + (k & 31);
        ld_words_a2<4>(qs, r.q);
        r.d = *(const uint16_t *)b;
    }
    __device__ static __forceinline__ void deq(const R &r, int k, uint4 &lo, uint4 &hi)
    {
        (void)k;
        __half2 d = tq_h2(r.d | r.d << 16);
        const __half2 c = tq_h2(0x64806480u); /* 1024 + 128 */
        uint32_t h[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            /* int8 q + 128 in the low byte, 0x64 above it */
            uint32_t p0 = tq_spread<0>(r.q[i]) ^ 0x64806480u,
                     p1 = tq_spread<1>(r.q[i]) ^ 0x64806480u;
            h[2 * i] = tq_u32(__hmul2(__hsub2(tq_h2(p0), c), d));
            h[2 * i + 1] = tq_u32(__hmul2(__hsub2(tq_h2(p1), c), d));
        }
        tq_put(h, lo, hi);
    }
};

struct tq_q4_0 { // 18-byte blocks of 32: values i and 16 + i share byte i
    struct R {
        uint32_t q[4], d;
    };
    __device__ static __forceinline__ void fetch(const uint8_t *row, int k, R &r)
    {
        const uint8_t *b = row + (int64_t)(k >> 5) * 18;
        ld_words_a2<4>(b + 2, r.q);
        r.d = *(const uint16_t *)b;
    }
    __device__ static __forceinline__ void deq(const R &r, int k, uint4 &lo, uint4 &hi)
    {
        __half2 d = tq_h2(r.d | r.d << 16);
        const __half2 c = tq_h2(0x64086408u); /* 1024 + 8 */
        int sh = (k & 16) ? 4 : 0;
        uint32_t h[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t x = r.q[i] >> sh;
            uint32_t p0 = (tq_spread<0>(x) & 0x000F000Fu) | 0x64006400u,
                     p1 = (tq_spread<1>(x) & 0x000F000Fu) | 0x64006400u;
            h[2 * i] = tq_u32(__hmul2(__hsub2(tq_h2(p0), c), d));
            h[2 * i + 1] = tq_u32(__hmul2(__hsub2(tq_h2(p1), c), d));
        }
        tq_put(h, lo, hi);
    }
};

struct tq_any { // every other block type, 8 values at a time, decoded as fetched
    int dt;
    struct R {
        float v[16];
    };
    __device__ __forceinline__ void fetch(const uint8_t *row, int k, R &r) const
    {
        deq8(row, dt, k, r.v);
        deq8(row, dt, k + 8, r.v + 8);
    }
    __device__ static __forceinline__ void deq(const R &r, int k, uint4 &lo, uint4 &hi)
    {
        (void)k;
        __half2 h[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
            h[j] = __floats2half2_rn(r.v[2 * j], r.v[2 * j + 1]);
        uint32_t u[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
            u[j] = tq_u32(h[j]);
        tq_put(u, lo, hi);
    }
};

#if __CUDA_ARCH__ >= 700
// The end of one part of a split K: the block's raw sums go to its slot of
// the scratch at P(12..13) (BM x BN floats a part, the parts of a tile
// together), and it counts itself done in the tile's counter at P(14..15).
// The tile's last part to finish adds the parts up in their order (the
// same sums whichever finishes last), stores the tile through mm_store
// (alpha, bias, activation) and sets the counter back to 0 for the next run.
template <int BM, int FN>
__device__ __forceinline__ void tq_split_end(const int *R_, tc_acc (&acc)[2][FN], int m0, int n0,
                                             int wr, int wc)
{
    using namespace nvcuda;
    int64_t tile = (int64_t)blockIdx.y * gridDim.x + blockIdx.x, S = gridDim.z;
    float *part = (float *)P_ADDR(12) + (tile * S) * (BM * BN);
    float *mine = part + (int64_t)blockIdx.z * (BM * BN);
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
            wmma::store_matrix_sync(mine + (wr + i * 16) * BN + wc + j * 16, acc[i][j], BN,
                                    wmma::mem_row_major);
    if (!last_block((int *)P_ADDR(14) + tile, (int)S))
        return;
    int r = D_RANK(OUT);
    int N = D_NE(OUT, r - 1), Mr = D_NE(OUT, r - 2);
    int64_t osm = D_ST(OUT, r - 2), osn = D_ST(OUT, r - 1);
    for (int e = threadIdx.x; e < BM * BN; e += blockDim.x) {
        int m = m0 + e / BN, n = n0 + e % BN;
        if (m >= Mr || n >= N)
            continue;
        float v = 0.0f;
        for (int z = 0; z < S; z++)
            v += __ldcg(part + (int64_t)z * (BM * BN) + e);
        mm_store(R_, m * osm + n * osn, n, v);
    }
}
#endif

template <int BM, class Q>
__device__ __forceinline__ void mm_tq_body(const int *R_, const Q &q, __half *As, __half *Bs)
{
#if __CUDA_ARCH__ >= 700
    using namespace nvcuda;
    constexpr int WM = BM / 32, WN = 8 / WM, WNT = BN / WN, FN = WNT / 16, AC = BM / 64;
    constexpr int AS = BM * TQ_LD, BS = BN * TQ_LD; /* a stage's halves of a and of b */
    int r = D_RANK(OUT);
    int N = D_NE(OUT, r - 1), Mr = D_NE(OUT, r - 2), K = P(0);
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    int tid = threadIdx.x, warp = tid / 32, wm = warp / WN, wn = warp % WN;
    /* split K: this block's part [kb, ke) (P(11) values a part, a multiple
     * of TQ_BK; gridDim.z parts); K and so ke are multiples of 32 */
    int kb = P(11) ? (int)blockIdx.z * P(11) : 0, ke = P(11) ? min(K, kb + P(11)) : K;
    const __half *ah = (const __half *)D_PTR(3);
    int rowb = P(5);
    tc_acc acc[2][FN];
    tc_zero<FN>(acc);
    /* this thread's share of a step: 16 values of b's row bn from column
     * kq; a's 16-byte pieces tid + 256 i (row / 4, 8 values from (% 4) 8) */
    int bn = tid / 2, kq = (tid % 2) * 16;
    bool bv = n0 + bn < N;
    const uint8_t *brow = D_PTR(1) + (int64_t)(bv ? n0 + bn : 0) * rowb;
    uint64_t pol = l2_evict_normal();
    typename Q::R br;
    /* a's step from column k0 into stage s, as one async group */
    auto fetch_a = [&](int k0, int s) {
#pragma unroll
        for (int i = 0; i < AC; i++) {
            int c = tid + 256 * i, row = c / 4, col = (c % 4) * 8;
            __half *d = As + s * AS + row * TQ_LD + col;
            if (m0 + row < Mr)
                cp16_async(d, ah + (int64_t)(m0 + row) * K + k0 + col, pol);
            else
                *(uint4 *)d = make_uint4(0, 0, 0, 0);
        }
        cp_commit();
    };
    /* b's bytes of the step from k0 into registers; later decoded into
     * stage s as f16 */
    auto fetch_b = [&](int k0) {
        if (bv)
            q.fetch(brow, k0 + kq, br);
    };
    auto put_b = [&](int k0, int s) {
        uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
        if (bv)
            q.deq(br, k0 + kq, lo, hi);
        uint4 *d = (uint4 *)(Bs + s * BS + bn * TQ_LD + kq);
        d[0] = lo;
        d[1] = hi;
    };
    fetch_a(kb, 0);
    fetch_b(kb);
    int s = 0;
    for (int k0 = kb; k0 < ke; k0 += TQ_BK) {
        /* stage s: its b last read two steps ago, before the last barrier */
        put_b(k0, s);
        cp_wait<0>();
        __syncthreads(); /* stage s whole for every warp; stage s ^ 1 read by all */
        if (k0 + TQ_BK < ke) {
            fetch_a(k0 + TQ_BK, s ^ 1);
            fetch_b(k0 + TQ_BK);
        }
        tc_mma<FN, TQ_LD, TQ_BK>(acc, As + s * AS + wm * 32 * TQ_LD,
                                 Bs + s * BS + wn * WNT * TQ_LD);
        s ^= 1;
    }
    if (P(11)) {
        tq_split_end<BM, FN>(R_, acc, m0, n0, wm * 32, wn * WNT);
        return;
    }
    __syncthreads(); /* every warp's last products done: a's stages free */
    // each fragment through the warp's own 1 KB of a's staging
    tc_store<FN>(R_, acc, (float *)As + warp * 256, m0 + wm * 32, n0 + wn * WNT, 0);
#endif
}

template <int BM> __device__ __forceinline__ void mm_tq(const int *rec)
{
    REC_DECL;
    // two stages of a and of b; a's are also the epilogue's (8 warps x 1
    // KB), at least 8 KB for either BM
    __shared__ __align__(32) __half As[2 * BM * TQ_LD];
    __shared__ __align__(32) __half Bs[2 * BN * TQ_LD];
    ld_rec(R_, rec);
    int dt = D_DT(1), align = P(9);
    switch (align >= 16 || (align >= 2 && dt != DT_Q4_K && dt != DT_Q5_K) ? dt : -1) {
    case DT_Q4_K:
        mm_tq_body<BM>(R_, tq_q4_k(), As, Bs);
        break;
    case DT_Q5_K:
        mm_tq_body<BM>(R_, tq_q5_k(), As, Bs);
        break;
    case DT_Q6_K:
        mm_tq_body<BM>(R_, tq_q6_k(), As, Bs);
        break;
    case DT_Q8_0:
        mm_tq_body<BM>(R_, tq_q8_0(), As, Bs);
        break;
    case DT_Q4_0:
        mm_tq_body<BM>(R_, tq_q4_0(), As, Bs);
        break;
    default: {
        tq_any q;
        q.dt = D_DT(1);
        mm_tq_body<BM>(R_, q, As, Bs);
        break;
    }
    }
}

extern "C" __global__ void __launch_bounds__(256, 2) rlx_mm_tq(const int *rec)
{
    mm_tq<128>(rec);
}

extern "C" __global__ void __launch_bounds__(256, 2) rlx_mm_tq64(const int *rec)
{
    mm_tq<64>(rec);
}
