// Shared by every RLX CUDA kernel: the per-launch record, dtype loads and
// stores, block dequantization and the activation functions.
//
// A kernel takes one argument, the device address of its record: 256
// 32-bit words that the host fills for every run (cuda-program.c). Word 0
// is the item count, word 15 a failure flag the kernel may set; operand k
// (0..5 inputs, 6 the output) is described at words 16 + 16k: dtype, rank,
// the 64-bit address of its element 0, six dims and six element strides.
// Op parameters start at word 128. The layout is the one the Vulkan
// backend's shaders read (shaders/common.glsl), so the two backends build
// their records the same way.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

#define DT_F32     2
#define DT_F16     3
#define DT_BF16    4
#define DT_F8_E4M3 5
#define DT_F8_E5M2 6
#define DT_I64     7
#define DT_I32     8
#define DT_I16     9
#define DT_I8      10
#define DT_U8      11
#define DT_BOOL    12
#define DT_Q4_0    13
#define DT_Q4_1    14
#define DT_Q5_0    15
#define DT_Q5_1    16
#define DT_Q8_0    17
#define DT_Q4_K    21
#define DT_Q5_K    22
#define DT_Q6_K    23

#define OUT      6
#define ERR_WORD 15
#define REC      256

// The record, staged in shared memory by every thread of the block before
// any of them reads it (ld_rec must be reached by all threads).
#define REC_DECL __shared__ __align__(16) int R_[REC]
//
// Launches of one kernel that follow each other and touch disjoint memory
// (q, k and v of a decode step; its two ropes; the two KV appends) may be
// made one launch by the host (cuda-program.c's group_launches): member m
// of the group is blockIdx.y = m and its record is GRP_STRIDE words (the
// leader's word) past the leader's; the grid's x is the widest member's,
// and a member's own x extent is its word GRP_GRIDX. Only the kernels that
// return when ld_rec says so and stride by grid_x() are grouped.
#define GRP_STRIDE 1
#define GRP_GRIDX  2
//
// On Hopper and later the host launches every kernel with programmatic
// stream serialization: a kernel may start while the one before it is
// still running. Its record is the host's (nothing before it writes
// one), so it is read first; then the kernel lets the next one start
// too, and waits until everything before it has finished and its
// writes are visible before it touches any operand. What a launch
// overlaps is its start-up: the launch and the read of its record, and
// in the matrix-vector kernels the first loads of constant weights.
// ld_rec_early is the first half: the record read and the next kernel let
// start; it returns false for a block past its group member's own grid
// (it has nothing to do, and may return without waiting); rec becomes
// this block's record. dep_wait is the second half. Between them a kernel
// may read only what no launch writes: weights, the host's records.
// A record (REC words at src) into R, 16 bytes a thread, so a block of 64
// threads or more reads it in one trip (records are 1 KB apart from a
// 256-byte aligned base, R 16-byte aligned). No barrier.
__device__ __forceinline__ void rec_copy(int *R, const int *src)
{
    for (int i = threadIdx.x; i < REC / 4; i += blockDim.x)
        ((uint4 *)R)[i] = ((const uint4 *)src)[i];
}

__device__ __forceinline__ bool ld_rec_early(int *R, const int *&rec)
{
    /* a group member's record is a word of the leader's away; the leader
     * (every launch that is not a group: blockIdx.y 0) skips that read, a
     * trip to memory ahead of the record's own */
    if (blockIdx.y != 0)
        rec += (int64_t)blockIdx.y * rec[GRP_STRIDE];
    rec_copy(R, rec);
    __syncthreads();
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    return R[GRP_GRIDX] == 0 || (int)blockIdx.x < R[GRP_GRIDX];
}

__device__ __forceinline__ void dep_wait()
{
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// both halves
__device__ __forceinline__ bool ld_rec(int *R, const int *&rec)
{
    bool mine = ld_rec_early(R, rec);
    dep_wait();
    return mine;
}

// The blocks along x that a grid-stride loop of this record spans.
__device__ __forceinline__ int64_t grid_x(const int *R)
{
    return R[GRP_GRIDX] ? (int64_t)R[GRP_GRIDX] : (int64_t)gridDim.x;
}

#define M_(i)      (R_[(i)])
#define MF_(i)     (__int_as_float(R_[(i)]))
#define D_DT(k)    M_(16 + (k)*16)
#define D_RANK(k)  M_(17 + (k)*16)
#define D_NE(k, d) M_(20 + (k)*16 + (d))
#define D_ST(k, d) M_(26 + (k)*16 + (d))
#define P(i)       M_(128 + (i))
#define PF(i)      MF_(128 + (i))
#define D_PTR(k)   (d_ptr(R_, (k)))

__device__ __forceinline__ const uint8_t *d_ptr(const int *R, int k)
{
    uint64_t lo = (uint32_t)R[18 + k * 16], hi = (uint32_t)R[19 + k * 16];
    return (const uint8_t *)(uintptr_t)(lo | hi << 32);
}

// flag a failure in the record and in the program's failure word (its
// address at words 12-13)
__device__ __forceinline__ void set_error(const int *rec)
{
    atomicOr((int *)rec + ERR_WORD, 1);
    uint64_t lo = (uint32_t)rec[12], hi = (uint32_t)rec[13];
    if (lo | hi)
        atomicOr((int *)(uintptr_t)(lo | hi << 32), 1);
}

__device__ __forceinline__ int esize(int dt)
{
    if (dt == DT_I64)
        return 8;
    if (dt == DT_F32 || dt == DT_I32)
        return 4;
    if (dt == DT_F16 || dt == DT_BF16 || dt == DT_I16)
        return 2;
    return 1;
}

__device__ __forceinline__ float bf2f(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

// an FP8 code as float (OCP E4M3: bias 7, x111 1111 NaN, no infinities;
// E5M2: bias 15, IEEE-like), its bits built directly
__device__ __forceinline__ float f8f(int dt, uint32_t b)
{
    uint32_t s = (b & 0x80u) << 24;
    if (dt == DT_F8_E4M3) {
        uint32_t e = (b >> 3) & 15u, m = b & 7u;
        if (e == 0u)
            return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
        if (e == 15u && m == 7u)
            return __uint_as_float(s | 0x7FC00000u);
        return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
    }
    uint32_t e = (b >> 2) & 31u, m = b & 3u;
    if (e == 0u)
        return __uint_as_float(s | __float_as_uint((float)m * 0.0000152587890625f));
    if (e == 31u)
        return __uint_as_float(s | 0x7F800000u | (m << 21));
    return __uint_as_float(s | ((e + 112u) << 23) | (m << 21));
}

// element e (from the operand's element 0) as float
__device__ __forceinline__ float ldf(const uint8_t *p, int dt, int64_t e)
{
    switch (dt) {
    case DT_F32:
        return ((const float *)p)[e];
    case DT_F16:
        return __half2float(((const __half *)p)[e]);
    case DT_BF16:
        return bf2f(((const uint16_t *)p)[e]);
    case DT_I32:
        return (float)((const int32_t *)p)[e];
    case DT_I64:
        return (float)(int32_t)((const int64_t *)p)[e];
    case DT_I16:
        return (float)((const int16_t *)p)[e];
    case DT_I8:
        return (float)((const int8_t *)p)[e];
    case DT_F8_E4M3:
    case DT_F8_E5M2:
        return f8f(dt, p[e]);
    default:
        return (float)p[e];
    }
}

__device__ __forceinline__ int ldi(const uint8_t *p, int dt, int64_t e)
{
    switch (dt) {
    case DT_F32:
        return (int)((const float *)p)[e];
    case DT_F16:
        return (int)__half2float(((const __half *)p)[e]);
    case DT_BF16:
        return (int)bf2f(((const uint16_t *)p)[e]);
    case DT_I32:
        return ((const int32_t *)p)[e];
    case DT_I64:
        return (int32_t)((const int64_t *)p)[e];
    case DT_I16:
        return ((const int16_t *)p)[e];
    case DT_I8:
        return ((const int8_t *)p)[e];
    case DT_F8_E4M3:
    case DT_F8_E5M2:
        return (int)f8f(dt, p[e]);
    default:
        return p[e];
    }
}

__device__ __forceinline__ uint16_t f2bf(float f)
{
    uint32_t x = __float_as_uint(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ int sat_i(float v, float lo, float hi)
{
    if (isnan(v))
        return 0;
    return (int)fminf(fmaxf(truncf(v), lo), hi);
}

__device__ __forceinline__ void sti(uint8_t *p, int dt, int64_t e, int v)
{
    switch (dt) {
    case DT_F32:
        ((float *)p)[e] = (float)v;
        break;
    case DT_F16:
        ((__half *)p)[e] = __float2half_rn((float)v);
        break;
    case DT_BF16:
        ((uint16_t *)p)[e] = f2bf((float)v);
        break;
    case DT_I64:
        ((int64_t *)p)[e] = v;
        break;
    case DT_I32:
        ((int32_t *)p)[e] = v;
        break;
    case DT_I16:
        ((int16_t *)p)[e] = (int16_t)min(max(v, -32768), 32767);
        break;
    case DT_I8:
        ((int8_t *)p)[e] = (int8_t)min(max(v, -128), 127);
        break;
    case DT_BOOL:
        p[e] = v != 0;
        break;
    default:
        p[e] = (uint8_t)min(max(v, 0), 255);
        break;
    }
}

__device__ __forceinline__ void stf(uint8_t *p, int dt, int64_t e, float v)
{
    switch (dt) {
    case DT_F32:
        ((float *)p)[e] = v;
        break;
    case DT_F16:
        ((__half *)p)[e] = __float2half_rn(v);
        break;
    case DT_BF16:
        ((uint16_t *)p)[e] = f2bf(v);
        break;
    case DT_I64:
        ((int64_t *)p)[e] = sat_i(v, -2147483648.0f, 2147483520.0f);
        break;
    case DT_I32:
        ((int32_t *)p)[e] = sat_i(v, -2147483648.0f, 2147483520.0f);
        break;
    case DT_I16:
        ((int16_t *)p)[e] = (int16_t)sat_i(v, -32768.0f, 32767.0f);
        break;
    case DT_I8:
        ((int8_t *)p)[e] = (int8_t)sat_i(v, -128.0f, 127.0f);
        break;
    case DT_BOOL:
        p[e] = v != 0.0f;
        break;
    default:
        p[e] = (uint8_t)sat_i(v, 0.0f, 255.0f);
        break;
    }
}

// ---- block formats ---------------------------------------------------------
__device__ __forceinline__ int qbk(int dt)
{
    return (dt == DT_Q4_K || dt == DT_Q5_K || dt == DT_Q6_K) ? 256 : 32;
}
__device__ __forceinline__ int qbytes(int dt)
{
    switch (dt) {
    case DT_Q4_0:
        return 18;
    case DT_Q4_1:
        return 20;
    case DT_Q5_0:
        return 22;
    case DT_Q5_1:
        return 24;
    case DT_Q8_0:
        return 34;
    case DT_Q4_K:
        return 144;
    case DT_Q5_K:
        return 176;
    default:
        return 210; // Q6_K
    }
}
__device__ __forceinline__ bool is_quant(int dt)
{
    return dt >= DT_Q4_0;
}

// a half at a 2-byte aligned place inside a block: read and written byte by
// byte, so no wider access is ever assumed
__device__ __forceinline__ float ldh(const uint8_t *b)
{
    __half_raw r;
    r.x = (unsigned short)(b[0] | b[1] << 8);
    return __half2float(__half(r));
}
__device__ __forceinline__ void sth(uint8_t *b, float v)
{
    __half_raw r = __half_raw(__float2half_rn(v));
    b[0] = (uint8_t)(r.x & 0xFF);
    b[1] = (uint8_t)(r.x >> 8);
}

__device__ __forceinline__ uint32_t ld32u(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

// the 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (scales at s)
__device__ __forceinline__ void kq_scale(const uint8_t *s, int j, int &sc, int &mn)
{
    if (j < 4) {
        sc = s[j] & 63;
        mn = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// element i of the block starting at b
__device__ __forceinline__ float deq(const uint8_t *b, int dt, int i)
{
    switch (dt) {
    case DT_Q4_0: {
        int q = i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4);
        return ldh(b) * (float)(q - 8);
    }
    case DT_Q4_1: {
        int q = i < 16 ? (b[4 + i] & 15) : (b[4 + i - 16] >> 4);
        return ldh(b) * (float)q + ldh(b + 2);
    }
    case DT_Q5_0:
    case DT_Q5_1: {
        int off = dt == DT_Q5_1 ? 4 : 2;
        uint32_t qh = ld32u(b + off);
        const uint8_t *qs = b + off + 4;
        int lo = i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4);
        int q = lo | (int)(((qh >> i) & 1u) << 4);
        if (dt == DT_Q5_0)
            return ldh(b) * (float)(q - 16);
        return ldh(b) * (float)q + ldh(b + 2);
    }
    case DT_Q8_0:
        return ldh(b) * (float)(int8_t)b[2 + i];
    case DT_Q4_K:
    case DT_Q5_K: {
        int sub = i / 32, l = i % 32, pair = sub / 2;
        int sc, mn;
        kq_scale(b + 4, sub, sc, mn);
        int q;
        if (dt == DT_Q4_K) {
            int by = b[16 + pair * 32 + l];
            q = (sub & 1) ? by >> 4 : by & 15;
        } else {
            int by = b[48 + pair * 32 + l];
            q = (sub & 1) ? by >> 4 : by & 15;
            q += ((b[16 + l] >> sub) & 1) * 16;
        }
        return ldh(b) * (float)sc * (float)q - ldh(b + 2) * (float)mn;
    }
    default: { // Q6_K
        int hf = i / 128, r = (i % 128) / 32, l = i % 32;
        const uint8_t *ql = b + hf * 64, *qh = b + 128 + hf * 32, *sc = b + 192 + hf * 8;
        int lo = r == 0   ? ql[l] & 15
                 : r == 1 ? ql[l + 32] & 15
                 : r == 2 ? ql[l] >> 4
                          : ql[l + 32] >> 4;
        int hi = (qh[l] >> (2 * r)) & 3;
        int q = (lo | (hi << 4)) - 32;
        return ldh(b + 208) * (float)(int8_t)sc[l / 16 + 2 * r] * (float)q;
    }
    }
}

// Eight consecutive values k0..k0+7 (k0 a multiple of 8) of a row of blocks
// (or of plain F32/F16/BF16/FP8 values) starting at `row`.
__device__ __forceinline__ void deq8(const uint8_t *row, int dt, int k0, float *v)
{
    switch (dt) {
    case DT_F32: {
        const float4 *p = (const float4 *)(row + (size_t)k0 * 4);
        float4 a = p[0], c = p[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
        v[4] = c.x, v[5] = c.y, v[6] = c.z, v[7] = c.w;
        return;
    }
    case DT_F16: {
        uint4 u = *(const uint4 *)(row + (size_t)k0 * 2);
        const __half2 *h = (const __half2 *)&u;
        for (int j = 0; j < 4; j++) {
            float2 f = __half22float2(h[j]);
            v[2 * j] = f.x;
            v[2 * j + 1] = f.y;
        }
        return;
    }
    case DT_BF16: {
        uint4 u = *(const uint4 *)(row + (size_t)k0 * 2);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
        for (int j = 0; j < 4; j++) {
            v[2 * j] = __uint_as_float(w[j] << 16);
            v[2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
        }
        return;
    }
    case DT_F8_E4M3:
    case DT_F8_E5M2: {
        uint2 u = *(const uint2 *)(row + (size_t)k0);
        for (int j = 0; j < 8; j++)
            v[j] = f8f(dt, ((j < 4 ? u.x : u.y) >> (8 * (j % 4))) & 0xFFu);
        return;
    }
    default:
        break;
    }
    int bk = qbk(dt);
    const uint8_t *b = row + (size_t)(k0 / bk) * qbytes(dt);
    int i0 = k0 % bk;
    switch (dt) {
    case DT_Q4_0:
    case DT_Q4_1: {
        int off = dt == DT_Q4_1 ? 4 : 2;
        float d = ldh(b), m = dt == DT_Q4_1 ? ldh(b + 2) : -8.0f * d;
        const uint8_t *qs = b + off + (i0 & 15);
        int sh = i0 < 16 ? 0 : 4;
        for (int j = 0; j < 8; j++)
            v[j] = d * (float)((qs[j] >> sh) & 15) + m;
        return;
    }
    case DT_Q5_0:
    case DT_Q5_1: {
        int off = dt == DT_Q5_1 ? 4 : 2;
        float d = ldh(b), m = dt == DT_Q5_1 ? ldh(b + 2) : -16.0f * d;
        uint32_t qh = ld32u(b + off);
        const uint8_t *qs = b + off + 4 + (i0 & 15);
        int sh = i0 < 16 ? 0 : 4;
        for (int j = 0; j < 8; j++) {
            int q = ((qs[j] >> sh) & 15) | (int)(((qh >> (i0 + j)) & 1u) << 4);
            v[j] = d * (float)q + m;
        }
        return;
    }
    case DT_Q8_0: {
        float d = ldh(b);
        const int8_t *qs = (const int8_t *)(b + 2 + i0);
        for (int j = 0; j < 8; j++)
            v[j] = d * (float)qs[j];
        return;
    }
    case DT_Q4_K:
    case DT_Q5_K: {
        int sub = i0 / 32, l0 = i0 % 32, pair = sub / 2;
        int sc, mn;
        kq_scale(b + 4, sub, sc, mn);
        float d = ldh(b) * (float)sc, m = ldh(b + 2) * (float)mn;
        int sh = (sub & 1) ? 4 : 0;
        if (dt == DT_Q4_K) {
            // 144-byte blocks: one 8-byte load where the row is 8-byte aligned
            const uint8_t *qs = b + 16 + pair * 32 + l0;
            uint2 u;
            if (((uintptr_t)qs & 7) == 0) {
                u = *(const uint2 *)qs;
            } else {
                u.x = ld32u(qs);
                u.y = ld32u(qs + 4);
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                v[j] = d * (float)((u.x >> (8 * j + sh)) & 15) - m;
                v[4 + j] = d * (float)((u.y >> (8 * j + sh)) & 15) - m;
            }
        } else {
            const uint8_t *qs = b + 48 + pair * 32 + l0, *qh = b + 16 + l0;
            for (int j = 0; j < 8; j++)
                v[j] = d * (float)(((qs[j] >> sh) & 15) | (((qh[j] >> sub) & 1) << 4)) - m;
        }
        return;
    }
    default: { // Q6_K
        int hf = i0 / 128, r = (i0 % 128) / 32, l0 = i0 % 32;
        const uint8_t *ql = b + hf * 64 + l0 + ((r & 1) ? 32 : 0), *qh = b + 128 + hf * 32 + l0;
        int sh = (r & 2) ? 4 : 0;
        float d = ldh(b + 208) * (float)(int8_t)b[192 + hf * 8 + l0 / 16 + 2 * r];
        for (int j = 0; j < 8; j++) {
            int q = (((ql[j] >> sh) & 15) | (((qh[j] >> (2 * r)) & 3) << 4)) - 32;
            v[j] = d * (float)q;
        }
        return;
    }
    }
}

// element offset of linear index `lin` of operand k, decomposed by its dims
__device__ __forceinline__ int64_t lin_off(const int *R, int k, int64_t lin)
{
    int r = R[17 + k * 16];
    int64_t o = 0;
    for (int d = r - 1; d >= 0; d--) {
        int n = R[20 + k * 16 + d];
        o += (lin % n) * (int64_t)R[26 + k * 16 + d];
        lin /= n;
    }
    return o;
}

__device__ __forceinline__ float tanh_s(float x)
{
    float a = fabsf(x);
    if (a < 0.2f) {
        float x2 = x * x;
        return x * (1.0f +
                    x2 * (-1.0f / 3.0f +
                          x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f + x2 * (62.0f / 2835.0f)))));
    }
    float t = expf(-2.0f * a);
    float r = (1.0f - t) / (1.0f + t);
    return x < 0.0f ? -r : r;
}

__device__ __forceinline__ float gelu_erf(float x)
{
    return 0.5f * x * erfcf(-x * 0.70710678118654752f);
}
__device__ __forceinline__ float gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanh_s(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float silu_f(float x)
{
    return x / (1.0f + expf(-x));
}
__device__ __forceinline__ float sigm(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

// fused epilogues (rlx_act)
__device__ __forceinline__ float act(int a, float x)
{
    switch (a) {
    case 1:
        return fmaxf(x, 0.0f);
    case 2:
        return gelu_erf(x);
    case 3:
        return gelu_tanh(x);
    case 4:
        return silu_f(x);
    case 5:
        return sigm(x);
    case 6:
        return tanh_s(x);
    default:
        return x;
    }
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

// Rounds a block of 32 consecutive activation values, one a lane of a
// whole warp (lane i holding value i of the block), to the 8-bit form the
// integer matrix-vector kernels read (matmul.cu's rlx_q8_act): int8 q at
// qs[e] (e this lane's flat index), and from lane 0 the block's scale d
// and d * sum(q) at ds[e / 32]. Every lane of the warp must call it.
__device__ __forceinline__ void q8_warp_store(float v, int8_t *qs, float2 *ds, int64_t e)
{
    float mx = fabsf(v);
    for (int o = 16; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
    float d = mx / 127.0f;
    int q = d > 0.0f ? __float2int_rn(v / d) : 0;
    float sq = warp_sum((float)q);
    qs[e] = (int8_t)q;
    if ((threadIdx.x & 31) == 0) {
        float2 t;
        t.x = d;
        t.y = d * sq;
        ds[e / 32] = t;
    }
}

// Kernels whose last block to finish completes the work (attention's key
// splits, split K, the norm after a product, a gated product's rounding):
// every thread of every block calls this once its writes are done; each
// block counts itself in *cnt, and the call returns true, in all its
// threads, in the block that counts n: it sets *cnt back to 0 for the next
// run and may read the others' writes (past L1: __ldcg). The block's
// barrier, then one acquire-release add by its thread 0, orders them (the
// barrier makes the other threads' writes thread 0's to release, and the
// last block's barrier after thread 0's acquire hands the others' writes
// to all of its threads): no sequentially consistent fence (an SC membar
// and an L1 invalidation) in every warp of every block, which ncu showed
// as the largest stall of the products with a norm tail on an H200.
__device__ __forceinline__ int add_acq_rel(int *p, int v)
{
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(p), "r"(v)
                 : "memory");
    return old;
#else
    __threadfence();
    int old = atomicAdd(p, v);
    __threadfence();
    return old;
#endif
}

__device__ __forceinline__ bool last_block(int *cnt, int n)
{
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) {
        last = add_acq_rel(cnt, 1) == n - 1;
        if (last)
            *cnt = 0;
    }
    __syncthreads();
    return last;
}

// a 64-bit device address kept in two parameter words from P(i)
#define P_ADDR(i) \
    ((uint8_t *)(uintptr_t)((uint64_t)(uint32_t)P(i) | (uint64_t)(uint32_t)P((i) + 1) << 32))

// Asynchronous copies from global to shared memory (sm_80 on: cp.async,
// 16 bytes a thread, past L1, no registers held while the bytes travel);
// on Turing a plain 16-byte copy; on CI's emulator copies that land when
// a wait retires them, as on the GPU. A thread's copies since its last
// commit form one group; wait<n> returns once at most n of its groups
// are still in flight (a barrier after it makes every thread's bytes
// visible to the block). The bytes are marked first to leave L2 (a
// decode step reads each weight once and reads ten times L2's size of
// them): what stays is what is read again soon, the records, activations
// and KV cache.
__device__ __forceinline__ uint64_t l2_evict_first()
{
    uint64_t pol = 0;
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}

// The policy of bytes read again soon (a prompt product's activations,
// read by every column tile): L2's usual order, no hint either way.
__device__ __forceinline__ uint64_t l2_evict_normal()
{
    uint64_t pol = 0;
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}

__device__ __forceinline__ void cp16_async(void *dst, const void *src, uint64_t pol)
{
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t s = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(src),
                 "l"(pol)
                 : "memory");
#elif defined(RLX_CUDA_EMU)
    (void)pol;
    emu_cp_async(dst, src); /* lands at the wait that retires it (tests/cuda-emu/emu.h) */
#else
    (void)pol;
    *(uint4 *)dst = *(const uint4 *)src;
#endif
}

__device__ __forceinline__ void cp_commit()
{
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#elif defined(RLX_CUDA_EMU)
    emu_cp_commit();
#endif
}

template <int N> __device__ __forceinline__ void cp_wait()
{
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#elif defined(RLX_CUDA_EMU)
    emu_cp_wait(N);
#endif
}

// The block's threads copy the whole 16-byte words that hold bytes [src,
// src + len) to dst (16-byte aligned), as one more async group per
// thread; src's byte lands at dst + (src & 15). Reading the word around
// either end never leaves the allocation's pages (they are 16-byte
// multiples).
__device__ __forceinline__ void cp_span_async(uint8_t *dst, const uint8_t *src, int64_t len,
                                              uint64_t pol)
{
    uintptr_t a = (uintptr_t)src & ~(uintptr_t)15;
    uintptr_t e = ((uintptr_t)src + (uintptr_t)len + 15) & ~(uintptr_t)15;
    int n = (int)((e - a) >> 4);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        cp16_async(dst + 16 * i, (const uint8_t *)a + 16 * i, pol);
}

// A hint that bytes [p, p + bytes) are read soon: the calling threads (t
// of nt) ask L2 for a 128-byte line each in turn, kept there before
// streamed data (evict_last, sm_80 on). Nothing waits for it.
__device__ __forceinline__ void l2_prefetch(const void *p, int bytes, int t, int nt)
{
#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
    for (int o = t * 128; o < bytes; o += nt * 128) {
#if __CUDA_ARCH__ >= 800
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"((const char *)p + o));
#else
        asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)p + o));
#endif
    }
#else
    (void)p, (void)bytes, (void)t, (void)nt;
#endif
}
