// Shared by every RLX compute shader: operand buffers, the per-dispatch
// record in the meta buffer, dtype loads/stores and block dequantization.
//
// Bindings 0..5 are the inputs, 6 the output, 7 the program's meta buffer.
// Every operand is a window of 32-bit words; its record gives the byte
// offset of element 0, its dtype, dims and element strides. Halves, bytes
// and quantized blocks are unpacked from words, so no 8/16-bit storage
// feature is required.
#extension GL_EXT_control_flow_attributes : enable

// The f16 variant (built with -DRLX_F16, chosen at run time on devices with
// storageBuffer16BitAccess and shaderFloat16): halves are loaded and stored
// through 16-bit views of the same bindings (no unpacking, and no atomic
// read-modify-write for a 16-bit store), and the symmetric block formats
// (Q4_0, Q5_0, Q8_0) scale their integers in f16 arithmetic in matmul. The default
// variant needs no 8/16-bit feature at all.
#ifdef RLX_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif

layout(constant_id = 0) const uint LS = 64;
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer Buf0 { uint d[]; } B0;
layout(std430, set = 0, binding = 1) buffer Buf1 { uint d[]; } B1;
layout(std430, set = 0, binding = 2) buffer Buf2 { uint d[]; } B2;
layout(std430, set = 0, binding = 3) buffer Buf3 { uint d[]; } B3;
layout(std430, set = 0, binding = 4) buffer Buf4 { uint d[]; } B4;
layout(std430, set = 0, binding = 5) buffer Buf5 { uint d[]; } B5;
layout(std430, set = 0, binding = 6) buffer Buf6 { uint d[]; } BO;
layout(std430, set = 0, binding = 7) buffer Meta { int m[]; } MT;
#ifdef RLX_F16
layout(std430, set = 0, binding = 0) buffer Buf0h { float16_t h[]; } H0;
layout(std430, set = 0, binding = 1) buffer Buf1h { float16_t h[]; } H1;
layout(std430, set = 0, binding = 2) buffer Buf2h { float16_t h[]; } H2;
layout(std430, set = 0, binding = 3) buffer Buf3h { float16_t h[]; } H3;
layout(std430, set = 0, binding = 4) buffer Buf4h { float16_t h[]; } H4;
layout(std430, set = 0, binding = 5) buffer Buf5h { float16_t h[]; } H5;
layout(std430, set = 0, binding = 6) buffer Buf6h { float16_t h[]; } HO;
layout(std430, set = 0, binding = 6) buffer Buf6u { uint16_t u[]; } UO;

float16_t rhv(int s, uint a)
{
    uint i = a >> 1;
    switch (s) {
    case 0: return H0.h[i];
    case 1: return H1.h[i];
    case 2: return H2.h[i];
    case 3: return H3.h[i];
    case 4: return H4.h[i];
    case 5: return H5.h[i];
    default: return HO.h[i];
    }
}
#endif

layout(push_constant) uniform PC { uint rec; } pc;

// dtype codes: rlx_dtype's values (checked by a static assert on the host)
#define DT_F32 2
#define DT_F16 3
#define DT_BF16 4
#define DT_F8_E4M3 5
#define DT_F8_E5M2 6
#define DT_I64 7
#define DT_I32 8
#define DT_I16 9
#define DT_I8 10
#define DT_U8 11
#define DT_BOOL 12
#define DT_Q4_0 13
#define DT_Q4_1 14
#define DT_Q5_0 15
#define DT_Q5_1 16
#define DT_Q8_0 17
#define DT_Q4_K 21
#define DT_Q5_K 22
#define DT_Q6_K 23

#define OUT 6
#define ERR_WORD 15

int M(uint i) { return MT.m[pc.rec + i]; }
float MF(uint i) { return intBitsToFloat(MT.m[pc.rec + i]); }
// operand k's descriptor
int D_DT(int k) { return M(16 + k * 16); }
int D_RANK(int k) { return M(17 + k * 16); }
uint D_OFF(int k) { return uint(M(18 + k * 16)); }
int D_NE(int k, int d) { return M(20 + k * 16 + d); }
int D_ST(int k, int d) { return M(26 + k * 16 + d); }
#define P(i) M(128 + (i))
#define PF(i) MF(128 + (i))

// the dispatch's failure word, and the program's flag (its index at word 12)
void set_error()
{
    atomicOr(MT.m[pc.rec + ERR_WORD], 1);
    int fw = M(12);
    if (fw > 0) atomicOr(MT.m[fw], 1);
}

uint item_base() { return (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x); }

uint rw(int s, uint i)
{
    switch (s) {
    case 0: return B0.d[i];
    case 1: return B1.d[i];
    case 2: return B2.d[i];
    case 3: return B3.d[i];
    case 4: return B4.d[i];
    case 5: return B5.d[i];
    default: return BO.d[i];
    }
}

uint rbyte(int s, uint addr) { return (rw(s, addr >> 2) >> ((addr & 3u) * 8u)) & 0xFFu; }
uint rhalf(int s, uint addr) { return (rw(s, addr >> 2) >> ((addr & 2u) * 8u)) & 0xFFFFu; }
float h2f(uint h) { return unpackHalf2x16(h).x; }
#ifdef RLX_F16
float ldh(int s, uint a) { return float(rhv(s, a)); }
#else
float ldh(int s, uint a) { return h2f(rhalf(s, a)); }
#endif

// an FP8 code (OCP E4M3: bias 7, x111 1111 NaN, no infinities; E5M2: bias
// 15, IEEE-like) as float, its bits built directly (subnormals scaled
// exactly, whatever the device does with half denormals)
float f8f(int dt, uint b)
{
    uint s = (b & 0x80u) << 24;
    if (dt == DT_F8_E4M3) {
        uint e = (b >> 3) & 15u, m = b & 7u;
        if (e == 0u) return uintBitsToFloat(s | floatBitsToUint(float(m) * 0.001953125));
        if (e == 15u && m == 7u) return uintBitsToFloat(s | 0x7FC00000u);
        return uintBitsToFloat(s | ((e + 120u) << 23) | (m << 20));
    }
    uint e = (b >> 2) & 31u, m = b & 3u;
    if (e == 0u) return uintBitsToFloat(s | floatBitsToUint(float(m) * 0.0000152587890625));
    if (e == 31u) return uintBitsToFloat(s | 0x7F800000u | (m << 21));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 21));
}

int esize(int dt)
{
    if (dt == DT_I64) return 8;
    if (dt == DT_F32 || dt == DT_I32) return 4;
    if (dt == DT_F16 || dt == DT_BF16 || dt == DT_I16) return 2;
    return 1;
}

// element e (an element index from the operand's offset) as float
float ldf(int s, int dt, uint off, int e)
{
    uint a = off + uint(e * esize(dt));
    switch (dt) {
    case DT_F32: return uintBitsToFloat(rw(s, a >> 2));
    case DT_F16: return ldh(s, a);
    case DT_BF16: return uintBitsToFloat(rhalf(s, a) << 16);
    case DT_I32:
    case DT_I64: return float(int(rw(s, a >> 2)));
    case DT_I16: return float(bitfieldExtract(int(rhalf(s, a)), 0, 16));
    case DT_I8: return float(bitfieldExtract(int(rbyte(s, a)), 0, 8));
    case DT_F8_E4M3:
    case DT_F8_E5M2: return f8f(dt, rbyte(s, a));
    default: return float(rbyte(s, a));
    }
}

int ldi(int s, int dt, uint off, int e)
{
    uint a = off + uint(e * esize(dt));
    switch (dt) {
    case DT_F32: return int(uintBitsToFloat(rw(s, a >> 2)));
    case DT_F16: return int(ldh(s, a));
    case DT_BF16: return int(uintBitsToFloat(rhalf(s, a) << 16));
    case DT_I32:
    case DT_I64: return int(rw(s, a >> 2));
    case DT_I16: return bitfieldExtract(int(rhalf(s, a)), 0, 16);
    case DT_I8: return bitfieldExtract(int(rbyte(s, a)), 0, 8);
    case DT_F8_E4M3:
    case DT_F8_E5M2: return int(f8f(dt, rbyte(s, a)));
    default: return int(rbyte(s, a));
    }
}

// f32 -> f16 bits, round to nearest even (packHalf2x16 leaves rounding open)
uint f2h(float f)
{
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u;
    uint e = (x >> 23) & 0xFFu;
    uint m = x & 0x7FFFFFu;
    if (e == 0xFFu) return sign | 0x7C00u | (m != 0u ? 0x200u : 0u);
    int ue = int(e) - 127 + 15;
    if (ue >= 31) return sign | 0x7C00u;
    if (ue <= 0) {
        if (ue < -10) return sign;
        m |= 0x800000u;
        uint shift = uint(14 - ue);
        uint h = m >> shift;
        uint rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (h & 1u) != 0u)) h++;
        return sign | h;
    }
    uint h = (uint(ue) << 10) | (m >> 13);
    uint rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h++;
    return sign | h;
}

uint f2bf(float f)
{
    uint x = floatBitsToUint(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (x >> 16) | 0x40u;
    return (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
}

void st_sub(uint a, uint bits, uint v)
{
    uint sh = (a & 3u) * 8u, mask = ((1u << bits) - 1u) << sh;
    if (bits == 32u) { BO.d[a >> 2] = v; return; }
#ifdef RLX_F16
    if (bits == 16u) { UO.u[a >> 1] = uint16_t(v & 0xFFFFu); return; }
#endif
    atomicAnd(BO.d[a >> 2], ~mask);
    atomicOr(BO.d[a >> 2], (v << sh) & mask);
}

int sat_i(float v, float lo, float hi)
{
    if (isnan(v)) return 0;
    return int(clamp(trunc(v), lo, hi));
}

void sti(int dt, uint off, int e, int v)
{
    uint a = off + uint(e * esize(dt));
    switch (dt) {
    case DT_F32: BO.d[a >> 2] = floatBitsToUint(float(v)); break;
    case DT_F16: st_sub(a, 16u, f2h(float(v))); break;
    case DT_BF16: st_sub(a, 16u, f2bf(float(v))); break;
    case DT_I64: BO.d[a >> 2] = uint(v); BO.d[(a >> 2) + 1u] = v < 0 ? 0xFFFFFFFFu : 0u; break;
    case DT_I32: BO.d[a >> 2] = uint(v); break;
    case DT_I16: st_sub(a, 16u, uint(clamp(v, -32768, 32767))); break;
    case DT_I8: st_sub(a, 8u, uint(clamp(v, -128, 127))); break;
    case DT_BOOL: st_sub(a, 8u, v != 0 ? 1u : 0u); break;
    default: st_sub(a, 8u, uint(clamp(v, 0, 255))); break;
    }
}

void stf(int dt, uint off, int e, float v)
{
    uint a = off + uint(e * esize(dt));
    switch (dt) {
    case DT_F32: BO.d[a >> 2] = floatBitsToUint(v); break;
    case DT_F16: st_sub(a, 16u, f2h(v)); break;
    case DT_BF16: st_sub(a, 16u, f2bf(v)); break;
    case DT_I64: {
        int i = sat_i(v, -2147483648.0, 2147483520.0);
        BO.d[a >> 2] = uint(i);
        BO.d[(a >> 2) + 1u] = i < 0 ? 0xFFFFFFFFu : 0u;
        break;
    }
    case DT_I32: BO.d[a >> 2] = uint(sat_i(v, -2147483648.0, 2147483520.0)); break;
    case DT_I16: st_sub(a, 16u, uint(sat_i(v, -32768.0, 32767.0))); break;
    case DT_I8: st_sub(a, 8u, uint(sat_i(v, -128.0, 127.0))); break;
    case DT_BOOL: st_sub(a, 8u, v != 0.0 ? 1u : 0u); break;
    default: st_sub(a, 8u, uint(sat_i(v, 0.0, 255.0))); break;
    }
}

// ---- block formats: (elements per block, bytes per block) ----
int qbk(int dt)
{
    if (dt == DT_Q4_K || dt == DT_Q5_K || dt == DT_Q6_K) return 256;
    return 32;
}
int qbytes(int dt)
{
    switch (dt) {
    case DT_Q4_0: return 18;
    case DT_Q4_1: return 20;
    case DT_Q5_0: return 22;
    case DT_Q5_1: return 24;
    case DT_Q8_0: return 34;
    case DT_Q4_K: return 144;
    case DT_Q5_K: return 176;
    default: return 210; // Q6_K
    }
}
bool is_quant(int dt) { return dt >= DT_Q4_0; }

uint rb(int s, uint a) { return rbyte(s, a); }
float rh(int s, uint a) { return ldh(s, a); }
// scale * integer of a symmetric block format; in f16 arithmetic only where
// a shader asks for it (matmul: the products are summed, and the CPU's own
// Q8_0 activations are coarser), never for exact lookups (gather)
#if defined(RLX_F16) && defined(RLX_QSCALE_F16)
float qscale(int s, uint a, int q) { return float(rhv(s, a) * float16_t(q)); }
#else
float qscale(int s, uint a, int q) { return rh(s, a) * float(q); }
#endif

void kq_scale(int s, uint sa, int j, out int sc, out int mn)
{
    if (j < 4) {
        sc = int(rb(s, sa + uint(j)) & 63u);
        mn = int(rb(s, sa + uint(j + 4)) & 63u);
    } else {
        sc = int((rb(s, sa + uint(j + 4)) & 15u) | ((rb(s, sa + uint(j - 4)) >> 6) << 4));
        mn = int((rb(s, sa + uint(j + 4)) >> 4) | ((rb(s, sa + uint(j)) >> 6) << 4));
    }
}

// element i of the block starting at byte b
float deq(int s, int dt, uint b, int i)
{
    switch (dt) {
    case DT_Q4_0: {
        uint q = i < 16 ? (rb(s, b + 2u + uint(i)) & 15u) : (rb(s, b + 2u + uint(i - 16)) >> 4);
        return qscale(s, b, int(q) - 8);
    }
    case DT_Q4_1: {
        uint q = i < 16 ? (rb(s, b + 4u + uint(i)) & 15u) : (rb(s, b + 4u + uint(i - 16)) >> 4);
        return rh(s, b) * float(q) + rh(s, b + 2u);
    }
    case DT_Q5_0:
    case DT_Q5_1: {
        uint off = dt == DT_Q5_1 ? 4u : 2u;
        uint qh = rb(s, b + off) | (rb(s, b + off + 1u) << 8) | (rb(s, b + off + 2u) << 16) |
                  (rb(s, b + off + 3u) << 24);
        uint qs = b + off + 4u;
        uint lo = i < 16 ? (rb(s, qs + uint(i)) & 15u) : (rb(s, qs + uint(i - 16)) >> 4);
        int q = int(lo | (((qh >> uint(i)) & 1u) << 4));
        if (dt == DT_Q5_0) return qscale(s, b, q - 16);
        return rh(s, b) * float(q) + rh(s, b + 2u);
    }
    case DT_Q8_0:
        return qscale(s, b, bitfieldExtract(int(rb(s, b + 2u + uint(i))), 0, 8));
    case DT_Q4_K:
    case DT_Q5_K: {
        int sub = i / 32, l = i % 32, pair = sub / 2;
        int sc, mn;
        kq_scale(s, b + 4u, sub, sc, mn);
        uint q;
        if (dt == DT_Q4_K) {
            uint byte_ = rb(s, b + 16u + uint(pair * 32 + l));
            q = (sub % 2) != 0 ? byte_ >> 4 : byte_ & 15u;
        } else {
            uint byte_ = rb(s, b + 48u + uint(pair * 32 + l));
            q = (sub % 2) != 0 ? byte_ >> 4 : byte_ & 15u;
            q += ((rb(s, b + 16u + uint(l)) >> uint(sub)) & 1u) * 16u;
        }
        return rh(s, b) * float(sc) * float(q) - rh(s, b + 2u) * float(mn);
    }
    default: { // Q6_K
        int half_ = i / 128, r = (i % 128) / 32, l = i % 32;
        uint ql = b + uint(half_ * 64), qh = b + 128u + uint(half_ * 32);
        uint sc = b + 192u + uint(half_ * 8);
        uint lo = r == 0 ? rb(s, ql + uint(l)) & 15u
                : r == 1 ? rb(s, ql + uint(l + 32)) & 15u
                : r == 2 ? rb(s, ql + uint(l)) >> 4
                         : rb(s, ql + uint(l + 32)) >> 4;
        uint hi = (rb(s, qh + uint(l)) >> uint(2 * r)) & 3u;
        int q = int(lo | (hi << 4)) - 32;
        float scv = float(bitfieldExtract(int(rb(s, sc + uint(l / 16 + 2 * r))), 0, 8));
        return rh(s, b + 208u) * scv * float(q);
    }
    }
}

// element (row, col) of a quantized operand whose rows are `row_bytes` apart
float ldq(int s, int dt, uint off, uint row_bytes, int row, int col)
{
    int bk = qbk(dt);
    uint b = off + uint(row) * row_bytes + uint(col / bk) * uint(qbytes(dt));
    return deq(s, dt, b, col % bk);
}

// element offset of linear index `lin` of operand k, decomposed by its own dims
int lin_off(int k, int lin)
{
    int r = D_RANK(k), o = 0;
    for (int d = r - 1; d >= 0; d--) {
        int n = D_NE(k, d);
        o += (lin % n) * D_ST(k, d);
        lin /= n;
    }
    return o;
}

float tanh_s(float x)
{
    float a = abs(x);
    if (a < 0.2) {
        float x2 = x * x;
        return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))));
    }
    float t = exp(-2.0 * a);
    float r = (1.0 - t) / (1.0 + t);
    return x < 0.0 ? -r : r;
}

// 0.5 x (1 + erf(x / sqrt 2)) with erfc from a Chebyshev fit (rel. error ~1e-7),
// written so the negative side never subtracts nearly equal numbers
float gelu_erf(float x)
{
    float z = abs(x) * 0.70710678118654752;
    float t = 1.0 / (1.0 + 0.5 * z);
    float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
              t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
              t * (-0.82215223 + t * 0.17087277)))))))));
    return x < 0.0 ? 0.5 * x * r : 0.5 * x * (2.0 - r);
}
float gelu_tanh(float x)
{
    return 0.5 * x * (1.0 + tanh_s(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
float silu(float x) { return x / (1.0 + exp(-x)); }
float sigm(float x) { return 1.0 / (1.0 + exp(-x)); }

// fused epilogues (rlx_act)
float act(int a, float x)
{
    switch (a) {
    case 1: return max(x, 0.0);
    case 2: return gelu_erf(x);
    case 3: return gelu_tanh(x);
    case 4: return silu(x);
    case 5: return sigm(x);
    case 6: return tanh_s(x);
    default: return x;
    }
}
