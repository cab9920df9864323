// Eight consecutive weights of row n of a [N, K] operand in binding 1 that
// is contiguous along K: quantized blocks (rows `rs` bytes apart) decoded in
// place with their scales decoded once, or f32/f16/bf16/fp8 (rows `rs`
// elements apart). k is a multiple of 8. Used by matvec.comp and gemm.comp.

// 32 bits of binding 1 at byte address x (any alignment)
uint w1(uint x)
{
    uint s = (x & 3u) * 8u, i = x >> 2;
    if (s == 0u) return B1.d[i];
    return (B1.d[i] >> s) | (B1.d[i + 1u] << (32u - s));
}

// nibble j (0..7) of the 8 held in two words, shifted by sh
float nib(uint lo, uint hi, int j, uint sh)
{
    uint v = j < 4 ? lo : hi;
    return float((v >> (uint(j % 4) * 8u + sh)) & 15u);
}

void deq8(int bdt, uint boff, int n, int rs, int k, out float w[8])
{
    uint row = boff + uint(n) * uint(rs);
    if (bdt == DT_Q4_K) {
        uint blk = row + uint(k / 256) * 144u;
        int e = k % 256, j = e / 32, sc, mn; // sub-block j
        kq_scale(1, blk + 4u, j, sc, mn);
        float dd = ldh(1, blk) * float(sc), dm = ldh(1, blk + 2u) * float(mn);
        uint q = blk + 16u + uint(j / 2) * 32u + uint(e % 32);
        uint lo = w1(q), hi = w1(q + 4u), sh = uint(j % 2) * 4u;
        [[unroll]] for (int i = 0; i < 8; i++) w[i] = dd * nib(lo, hi, i, sh) - dm;
    } else if (bdt == DT_Q6_K) {
        uint blk = row + uint(k / 256) * 210u;
        int e = k % 256, hf = e / 128, rr = (e % 128) / 32, l0 = e % 32;
        uint ql = blk + uint(hf * 64 + (rr & 1) * 32 + l0), qh = blk + 128u + uint(hf * 32 + l0);
        uint shl = (rr & 2) != 0 ? 4u : 0u, shh = uint(2 * rr);
        float d = ldh(1, blk + 208u) *
                  float(bitfieldExtract(int(rb(1, blk + 192u + uint(hf * 8 + l0 / 16 + 2 * rr))), 0, 8));
        uint l_lo = w1(ql), l_hi = w1(ql + 4u), h_lo = w1(qh), h_hi = w1(qh + 4u);
        [[unroll]] for (int i = 0; i < 8; i++) {
            uint lv = i < 4 ? l_lo : l_hi, hv = i < 4 ? h_lo : h_hi, bs = uint(i % 4) * 8u;
            int qv = int(((lv >> (bs + shl)) & 15u) | (((hv >> (bs + shh)) & 3u) << 4)) - 32;
            w[i] = d * float(qv);
        }
    } else if (bdt == DT_Q8_0) {
        uint blk = row + uint(k / 32) * 34u;
        float d = ldh(1, blk);
        uint q = blk + 2u + uint(k % 32);
        uint lo = w1(q), hi = w1(q + 4u);
        [[unroll]] for (int i = 0; i < 8; i++)
            w[i] = d * float(bitfieldExtract(int(i < 4 ? lo : hi), (i % 4) * 8, 8));
    } else if (bdt == DT_Q4_0 || bdt == DT_Q4_1) {
        bool one = bdt == DT_Q4_1;
        uint blk = row + uint(k / 32) * (one ? 20u : 18u);
        float d = ldh(1, blk), mn = one ? ldh(1, blk + 2u) : -8.0 * d;
        int e = k % 32; // values e..e+7: low nibbles of bytes e, high of e - 16
        uint q = blk + (one ? 4u : 2u) + uint(e % 16);
        uint lo = w1(q), hi = w1(q + 4u), sh = e < 16 ? 0u : 4u;
        [[unroll]] for (int i = 0; i < 8; i++) w[i] = d * nib(lo, hi, i, sh) + mn;
    } else if (bdt == DT_F16 || bdt == DT_BF16) {
        uint e0 = boff + 2u * uint(n * rs + k);
        [[unroll]] for (int i = 0; i < 4; i++) {
            uint h = w1(e0 + uint(4 * i));
            if (bdt == DT_F16) {
                vec2 f = unpackHalf2x16(h);
                w[2 * i] = f.x;
                w[2 * i + 1] = f.y;
            } else {
                w[2 * i] = uintBitsToFloat(h << 16);
                w[2 * i + 1] = uintBitsToFloat(h & 0xFFFF0000u);
            }
        }
    } else if (bdt == DT_F8_E4M3 || bdt == DT_F8_E5M2) {
        uint e0 = boff + uint(n * rs + k);
        uint lo = w1(e0), hi = w1(e0 + 4u);
        [[unroll]] for (int i = 0; i < 8; i++)
            w[i] = f8f(bdt, ((i < 4 ? lo : hi) >> (uint(i % 4) * 8u)) & 0xFFu);
    } else if (bdt == DT_F32) {
        uint e0 = (boff >> 2) + uint(n * rs + k);
        [[unroll]] for (int i = 0; i < 8; i++) w[i] = uintBitsToFloat(B1.d[e0 + uint(i)]);
    } else { // the other block formats, a value at a time
        int bk = qbk(bdt);
        uint blk = row + uint(k / bk) * uint(qbytes(bdt));
        [[unroll]] for (int i = 0; i < 8; i++) w[i] = deq(1, bdt, blk, k % bk + i);
    }
}
