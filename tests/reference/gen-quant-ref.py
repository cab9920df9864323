#!/usr/bin/env python3
"""Independent dequantization reference for tests/test-cpu-quant.c.

Builds two pseudo-random blocks of each ggml block format (fixed seed, scale
fields set to sane halves) and decodes them from the published block layouts,
emulating float32 rounding after every arithmetic step. Writes a C header of
raw block bytes and expected f32 values:

    python3 tests/reference/gen-quant-ref.py > tests/reference/quant-ref-data.h

Pure Python (struct only) so it runs wherever the tests are regenerated; it
shares no code with the C implementation.
"""
import struct

_state = 0x2545F491


def rnd_byte():
    global _state
    _state = (_state * 1103515245 + 12345) & 0x7FFFFFFF
    return (_state >> 16) & 0xFF


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def half_bytes(x):
    return struct.pack('<e', x)


def half_val(b, off):
    return struct.unpack_from('<e', b, off)[0]


def rand_bytes(n):
    return bytes(rnd_byte() for _ in range(n))


def rand_half(lo, hi):
    r = rnd_byte() / 255.0
    return half_bytes(lo + (hi - lo) * r)


def mul(a, b):
    return f32(a * b)


def sub(a, b):
    return f32(a - b)


def add(a, b):
    return f32(a + b)


# ---- block builders: return bytes; decoders: bytes -> list of floats ----

def mk_q4_0():
    return rand_half(0.01, 0.2) + rand_bytes(16)


def dq_q4_0(b):
    d = half_val(b, 0)
    qs = b[2:18]
    out = [0.0] * 32
    for j in range(16):
        out[j] = mul(d, float((qs[j] & 15) - 8))
        out[j + 16] = mul(d, float((qs[j] >> 4) - 8))
    return out


def mk_q4_1():
    return rand_half(0.01, 0.2) + rand_half(-1.0, 0.5) + rand_bytes(16)


def dq_q4_1(b):
    d, m = half_val(b, 0), half_val(b, 2)
    qs = b[4:20]
    out = [0.0] * 32
    for j in range(16):
        out[j] = add(mul(d, float(qs[j] & 15)), m)
        out[j + 16] = add(mul(d, float(qs[j] >> 4)), m)
    return out


def mk_q5_0():
    return rand_half(0.01, 0.2) + rand_bytes(4) + rand_bytes(16)


def dq_q5_0(b):
    d = half_val(b, 0)
    qh = struct.unpack_from('<I', b, 2)[0]
    qs = b[6:22]
    out = [0.0] * 32
    for j in range(16):
        lo = (qs[j] & 15) | (((qh >> j) & 1) << 4)
        hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)
        out[j] = mul(d, float(lo - 16))
        out[j + 16] = mul(d, float(hi - 16))
    return out


def mk_q5_1():
    return rand_half(0.01, 0.2) + rand_half(-1.0, 0.5) + rand_bytes(4) + rand_bytes(16)


def dq_q5_1(b):
    d, m = half_val(b, 0), half_val(b, 2)
    qh = struct.unpack_from('<I', b, 4)[0]
    qs = b[8:24]
    out = [0.0] * 32
    for j in range(16):
        lo = (qs[j] & 15) | (((qh >> j) & 1) << 4)
        hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)
        out[j] = add(mul(d, float(lo)), m)
        out[j + 16] = add(mul(d, float(hi)), m)
    return out


def mk_q8_0():
    return rand_half(0.001, 0.02) + rand_bytes(32)


def dq_q8_0(b):
    d = half_val(b, 0)
    return [mul(d, float(struct.unpack_from('<b', b, 2 + j)[0])) for j in range(32)]


def mk_q2_k():
    return rand_bytes(16) + rand_bytes(64) + rand_half(0.001, 0.05) + rand_half(0.001, 0.05)


def dq_q2_k(b):
    scales, qs = b[0:16], b[16:80]
    d, dmin = half_val(b, 80), half_val(b, 82)
    out = []
    idx = 0
    for half in range(2):
        q = qs[32 * half:32 * half + 32]
        for shift in (0, 2, 4, 6):
            for part in range(2):
                sc = scales[idx]
                idx += 1
                dl, ml = mul(d, float(sc & 15)), mul(dmin, float(sc >> 4))
                for l in range(16):
                    out.append(sub(mul(dl, float((q[l + 16 * part] >> shift) & 3)), ml))
    return out


def mk_q3_k():
    return rand_bytes(32) + rand_bytes(64) + rand_bytes(12) + rand_half(0.001, 0.05)


def dq_q3_k(b):
    hmask, qs, sc = b[0:32], b[32:96], b[96:108]
    d = half_val(b, 108)
    # 16 six-bit scales: low 4 bits from sc[0..7] (two per byte, low nibbles
    # first), high 2 bits from sc[8..11] (four per byte)
    scales = []
    for i in range(16):
        low = (sc[i] & 15) if i < 8 else (sc[i - 8] >> 4)
        high = (sc[8 + i % 4] >> (2 * (i // 4))) & 3
        scales.append((low | (high << 4)) - 32)
    out = []
    idx = 0
    m = 1
    for half in range(2):
        q = qs[32 * half:32 * half + 32]
        for shift in (0, 2, 4, 6):
            for part in range(2):
                dl = mul(d, float(scales[idx]))
                idx += 1
                for l in range(16):
                    k = l + 16 * part
                    v = ((q[k] >> shift) & 3) - (0 if hmask[k] & m else 4)
                    out.append(mul(dl, float(v)))
            m <<= 1
    return out


def k4_scale_min(j, s):
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)


def mk_q4_k():
    return rand_half(0.001, 0.01) + rand_half(0.001, 0.01) + rand_bytes(12) + rand_bytes(128)


def dq_q4_k(b):
    d, dmin = half_val(b, 0), half_val(b, 2)
    s, qs = b[4:16], b[16:144]
    out = []
    for j in range(4):
        for part in range(2):
            sc, mn = k4_scale_min(2 * j + part, s)
            for l in range(32):
                q = qs[32 * j + l]
                v = (q & 15) if part == 0 else (q >> 4)
                out.append(sub(mul(mul(d, float(sc)), float(v)), mul(dmin, float(mn))))
    return out


def mk_q5_k():
    return (rand_half(0.001, 0.01) + rand_half(0.001, 0.01) + rand_bytes(12) + rand_bytes(32) +
            rand_bytes(128))


def dq_q5_k(b):
    d, dmin = half_val(b, 0), half_val(b, 2)
    s, qh, qs = b[4:16], b[16:48], b[48:176]
    out = []
    for j in range(4):
        for part in range(2):
            sc, mn = k4_scale_min(2 * j + part, s)
            bit = 2 * j + part
            for l in range(32):
                q = qs[32 * j + l]
                v = ((q & 15) if part == 0 else (q >> 4)) | (((qh[l] >> bit) & 1) << 4)
                out.append(sub(mul(mul(d, float(sc)), float(v)), mul(dmin, float(mn))))
    return out


def mk_q6_k():
    return rand_bytes(128) + rand_bytes(64) + rand_bytes(16) + rand_half(0.001, 0.01)


def dq_q6_k(b):
    ql, qh = b[0:128], b[128:192]
    sc = struct.unpack_from('<16b', b, 192)
    d = half_val(b, 208)
    vals = [0] * 256
    for half in range(2):
        for l in range(32):
            lo0 = ql[64 * half + l]
            lo1 = ql[64 * half + 32 + l]
            h = qh[32 * half + l]
            base = 128 * half
            vals[base + l] = ((lo0 & 15) | ((h & 3) << 4)) - 32
            vals[base + 32 + l] = ((lo1 & 15) | (((h >> 2) & 3) << 4)) - 32
            vals[base + 64 + l] = ((lo0 >> 4) | (((h >> 4) & 3) << 4)) - 32
            vals[base + 96 + l] = ((lo1 >> 4) | (((h >> 6) & 3) << 4)) - 32
    return [mul(mul(d, float(sc[e // 16])), float(vals[e])) for e in range(256)]


def mk_q8_k():
    qs = rand_bytes(256)
    signed = struct.unpack('<256b', qs)
    bsums = [sum(signed[16 * g:16 * g + 16]) for g in range(16)]
    return struct.pack('<f', 0.0125) + qs + struct.pack('<16h', *bsums)


def dq_q8_k(b):
    d = struct.unpack_from('<f', b, 0)[0]
    return [mul(d, float(v)) for v in struct.unpack_from('<256b', b, 4)]


TYPES = [
    ('Q4_0', mk_q4_0, dq_q4_0), ('Q4_1', mk_q4_1, dq_q4_1), ('Q5_0', mk_q5_0, dq_q5_0),
    ('Q5_1', mk_q5_1, dq_q5_1), ('Q8_0', mk_q8_0, dq_q8_0), ('Q2_K', mk_q2_k, dq_q2_k),
    ('Q3_K', mk_q3_k, dq_q3_k), ('Q4_K', mk_q4_k, dq_q4_k), ('Q5_K', mk_q5_k, dq_q5_k),
    ('Q6_K', mk_q6_k, dq_q6_k), ('Q8_K', mk_q8_k, dq_q8_k),
]


def main():
    decls, entries = [], []
    for name, mk, dq in TYPES:
        blocks = [mk() for _ in range(2)]
        raw = b''.join(blocks)
        vals = []
        for blk in blocks:
            vals += dq(blk)
        low = name.lower()
        decls.append('static const unsigned char ref_%s_bytes[%d] = {%s};' %
                     (low, len(raw), ','.join(str(x) for x in raw)))
        decls.append('static const float ref_%s_values[%d] = {%s};' %
                     (low, len(vals), ','.join('%.9ef' % v for v in vals)))
        entries.append('    {"%s", 2, ref_%s_bytes, ref_%s_values, %d},' %
                       (name, low, low, len(vals)))
    print('/* Generated by tests/reference/gen-quant-ref.py: do not edit. */')
    print('/* clang-format off */')
    for d in decls:
        print(d)
    print('static const struct quant_ref {')
    print('    const char *type;')
    print('    unsigned n_blocks;')
    print('    const unsigned char *bytes;')
    print('    const float *values;')
    print('    unsigned n_values;')
    print('} quant_refs[] = {')
    for e in entries:
        print(e)
    print('};')
    print('/* clang-format on */')


if __name__ == '__main__':
    main()
