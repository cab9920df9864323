#version 450
// Attention for many query rows (prompts, Whisper's encoder): a workgroup
// takes LS consecutive query rows of one head, a thread each. Keys come in
// chunks of TK: the workgroup converts a chunk of K and of V into f32 in
// shared memory once for all its rows, then every thread runs its row over
// the chunk (query and output in registers, online softmax per key). The
// per-row kernel (attention.comp) reads K and V from global memory once per
// row instead, which made long sequences slow.
//
// TD bounds the head dims D and Dv (64, or 128 with -DRLX_TD=128; a compile
// time constant so that the dim loops unroll and q and acc stay in
// registers). Dims past D and Dv are zero in registers and in shared
// memory, so the inner loops run to TD without bounds checks.
//
// Parameters as attention.comp's (P(0..31)); P(32) != 0: this dispatch is
// the idle one of the pair (the host sizes it to no workgroups).
// Needs LS <= 64 (the output pass stages 64 dims of every row in kvs).
#include "common.glsl"

#ifdef RLX_TD
#define TD RLX_TD
#else
#define TD 64
#endif
#define KVN 2048 // floats of K (and of V) per chunk: 8 KiB each
#define TK (KVN / TD)

shared float kvs[2 * KVN]; // K at [0, KVN), V at [KVN, 2 KVN)

float ldkv(int s, int dt, uint off, int e)
{
    if (dt == DT_Q8_0) return deq(s, DT_Q8_0, off + uint(e / 32) * 34u, e % 32);
    return ldf(s, dt, off, e);
}

// keys [t0, t0 + n) of operand s, dims [0, Dn), into kvs[at + j * TD + d] as
// f32 (zeros past n and Dn). The dtype is tested once per chunk, not per
// element.
void load_chunk(int s, int dt, uint off, int base, int kst, int dst, int t0, int n, int Dn, int at)
{
    int i0 = int(gl_LocalInvocationID.x);
    if (dt == DT_F32) {
        uint w0 = off >> 2;
        for (int i = i0; i < KVN; i += int(LS)) {
            int j = i / TD, d = i % TD;
            float x = 0.0;
            if (j < n && d < Dn) x = uintBitsToFloat(rw(s, w0 + uint(base + (t0 + j) * kst + d * dst)));
            kvs[at + i] = x;
        }
    } else if (dt == DT_F16) {
        for (int i = i0; i < KVN; i += int(LS)) {
            int j = i / TD, d = i % TD;
            float x = 0.0;
            if (j < n && d < Dn) x = ldh(s, off + uint(base + (t0 + j) * kst + d * dst) * 2u);
            kvs[at + i] = x;
        }
    } else {
        for (int i = i0; i < KVN; i += int(LS)) {
            int j = i / TD, d = i % TD;
            float x = 0.0;
            if (j < n && d < Dn) x = ldkv(s, dt, off, base + (t0 + j) * kst + d * dst);
            kvs[at + i] = x;
        }
    }
}

void main()
{
    int B = P(0), Hq = P(1), S = P(2), D = P(3), Hkv = P(4), T = P(5), Dv = P(6);
    int nt = (S + int(LS) - 1) / int(LS);
    int g = int(item_base());
    if (P(32) != 0 || g >= B * Hq * nt) return; // the same for the whole workgroup
    int tile = g % nt, h = (g / nt) % Hq, b = g / nt / Hq;
    int hk = h / (Hq / Hkv);
    int t = int(gl_LocalInvocationID.x);
    int s0 = tile * int(LS), s1 = min(S, s0 + int(LS)) - 1, s = s0 + t;
    bool live = s < S;
    float scale = PF(7), cap = PF(8);
    int mk = P(9), win = P(10), pos = T - S + s;
    // this row's keys, and the workgroup's (the union over its rows)
    int tend = live ? (mk != 0 ? min(T, pos + 1) : T) : 0;
    int tbeg = mk == 2 ? max(0, pos - win + 1) : 0;
    int wend = mk != 0 ? min(T, T - S + s1 + 1) : T;
    int wbeg = mk == 2 ? max(0, T - S + s0 - win + 1) : 0;
    int ko = b * P(13) + hk * P(23), vo = b * P(14) + hk * P(26);
    // the query rows through shared memory, 64 dims of every row at a time
    // (a dtype switch per dim in unrolled code would bloat the shader)
    float q[TD], acc[TD];
    int qdt = D_DT(0);
    uint qoff = D_OFF(0);
    [[unroll]] for (int h0 = 0; h0 < TD; h0 += 64) {
        for (int i = t; i < 64 * int(LS); i += int(LS)) {
            int r = i / 64, d = i % 64, so = s0 + r;
            float x = 0.0;
            if (so < S && h0 + d < D)
                x = ldf(0, qdt, qoff, b * P(12) + h * P(20) + so * P(21) + (h0 + d) * P(22));
            kvs[d * int(LS) + r] = x;
        }
        barrier();
        [[unroll]] for (int d = 0; d < 64; d++) {
            q[h0 + d] = kvs[d * int(LS) + t];
            acc[h0 + d] = 0.0;
        }
        barrier();
    }
    float m = -1.0 / 0.0, l = 0.0;
    int kdt = D_DT(1), vdt = D_DT(2);
    uint koff = D_OFF(1), voff = D_OFF(2);
    bool bias = P(11) != 0;
    for (int t0 = wbeg; t0 < wend; t0 += TK) {
        int n = min(TK, wend - t0);
        barrier(); // every thread is done with the previous chunk
        load_chunk(1, kdt, koff, ko, P(24), P(25), t0, n, D, 0);
        load_chunk(2, vdt, voff, vo, P(27), P(28), t0, n, Dv, KVN);
        barrier();
        int j0 = max(0, tbeg - t0), j1 = min(n, tend - t0);
        for (int j = j0; j < j1; j++) {
            float dot_ = 0.0;
            [[unroll]] for (int d = 0; d < TD; d++) dot_ += q[d] * kvs[j * TD + d];
            float x = dot_ * scale;
            if (cap != 0.0) x = cap * tanh_s(x / cap);
            if (bias)
                x += ldf(3, D_DT(3), D_OFF(3), b * P(16) + h * P(17) + s * P(18) + (t0 + j) * P(19));
            if (x == -1.0 / 0.0) continue; // a bias may mask a key
            if (x > m) { // a new maximum: rescale what was summed
                float f = exp(m - x);
                l *= f;
                [[unroll]] for (int d = 0; d < TD; d++) acc[d] *= f;
                m = x;
            }
            float p = exp(x - m);
            l += p;
            [[unroll]] for (int d = 0; d < TD; d++) acc[d] += p * kvs[KVN + j * TD + d];
        }
    }
    // the output through shared memory, 64 dims of every row at a time, so
    // that the stores need no per-dim dtype switch in unrolled code
    float inv = l > 0.0 ? 1.0 / l : 0.0;
    int odt = D_DT(OUT);
    uint ooff = D_OFF(OUT);
    [[unroll]] for (int h0 = 0; h0 < TD; h0 += 64) {
        barrier();
        [[unroll]] for (int d = 0; d < 64; d++) kvs[d * int(LS) + t] = acc[h0 + d] * inv;
        barrier();
        for (int i = t; i < 64 * int(LS); i += int(LS)) {
            int r = i / 64, d = i % 64, so = s0 + r;
            if (so < S && h0 + d < Dv)
                stf(odt, ooff, b * P(15) + h * P(29) + so * P(30) + (h0 + d) * P(31),
                    kvs[d * int(LS) + r]);
        }
    }
}
