#version 450
// One workgroup per query row: scores for a chunk of LS keys at a time,
// online softmax, each thread owning Dv/LS output dims. K and V are read
// in place in their own dtype and layout. Decode-sized steps (fewer than
// ATTN_TILE_MIN_S rows per head) run here; longer ones in attention-tile.comp.
// P(0) B, P(1) Hq, P(2) S, P(3) D, P(4) Hkv, P(5) T, P(6) Dv, PF(7) scale,
// PF(8) softcap, P(9) mask, P(10) window, P(11) bias; batch strides
// q,k,v,o P(12..15); bias strides P(16..19); (h, s, d) strides of
// q P(20..22), k P(23..25), v P(26..28), o P(29..31).
// K and V may be a Q8_0 KV cache (element e in block e / 32 at entry e % 32
// from the operand's block-aligned byte offset, so a head's row may start
// inside a block), decoded per element in f32.
#include "common.glsl"

float ldkv(int s, int dt, uint off, int e)
{
    if (dt == DT_Q8_0) return deq(s, DT_Q8_0, off + uint(e / 32) * 34u, e % 32);
    return ldf(s, dt, off, e);
}

#define MAXD 256
#define MAXU 8
shared float qv[MAXD];
shared float sc[LS];

void main()
{
    int row = int(item_base());
    int B = P(0), Hq = P(1), S = P(2), D = P(3), Hkv = P(4), T = P(5), Dv = P(6);
    if (row >= B * Hq * S) return;
    int s = row % S, h = (row / S) % Hq, b = row / S / Hq;
    int hk = h / (Hq / Hkv);
    uint t = gl_LocalInvocationID.x;
    int qo = b * P(12) + h * P(20) + s * P(21);
    int ko = b * P(13) + hk * P(23), vo = b * P(14) + hk * P(26);
    int oo = b * P(15) + h * P(29) + s * P(30);
    for (int d = int(t); d < D; d += int(LS)) qv[d] = ldf(0, D_DT(0), D_OFF(0), qo + d * P(22));
    barrier();
    float scale = PF(7), cap = PF(8);
    int mk = P(9), win = P(10), pos = T - S + s;
    int tend = mk != 0 ? min(T, pos + 1) : T;
    int tbeg = mk == 2 ? max(0, pos - win + 1) : 0;
    float m = -1.0 / 0.0, l = 0.0;
    float acc[MAXU];
    for (int u = 0; u < MAXU; u++) acc[u] = 0.0;
    int kdt = D_DT(1), vdt = D_DT(2);
    uint koff = D_OFF(1), voff = D_OFF(2);
    for (int t0 = tbeg; t0 < tend; t0 += int(LS)) {
        int key = t0 + int(t);
        float x = -1.0 / 0.0;
        if (key < tend) {
            int kb = ko + key * P(24);
            float dot_ = 0.0;
            for (int d = 0; d < D; d++) dot_ += qv[d] * ldkv(1, kdt, koff, kb + d * P(25));
            x = dot_ * scale;
            if (cap != 0.0) x = cap * tanh_s(x / cap);
            if (P(11) != 0)
                x += ldf(3, D_DT(3), D_OFF(3), b * P(16) + h * P(17) + s * P(18) + key * P(19));
        }
        sc[t] = x;
        barrier();
        int n = min(int(LS), tend - t0);
        float cm = -1.0 / 0.0;
        for (int j = 0; j < n; j++) cm = max(cm, sc[j]);
        float nm = max(m, cm);
        // each thread turns its own key's score into a weight (one exp per
        // key, not one per key and thread), then all read the weights
        float p_own = int(t) < n && x != -1.0 / 0.0 && nm != -1.0 / 0.0 ? exp(x - nm) : 0.0;
        barrier();
        sc[t] = p_own;
        barrier();
        if (nm != -1.0 / 0.0) {
            float f = m == -1.0 / 0.0 ? 0.0 : exp(m - nm);
            l *= f;
            for (int u = 0; u < MAXU; u++) acc[u] *= f;
            for (int j = 0; j < n; j++) {
                float p = sc[j];
                l += p;
                if (p == 0.0) continue;
                int vb = vo + (t0 + j) * P(27);
                for (int u = 0; u < MAXU; u++) {
                    int d = int(t) + u * int(LS);
                    if (d < Dv) acc[u] += p * ldkv(2, vdt, voff, vb + d * P(28));
                }
            }
            m = nm;
        }
        barrier();
    }
    float inv = l > 0.0 ? 1.0 / l : 0.0;
    for (int u = 0; u < MAXU; u++) {
        int d = int(t) + u * int(LS);
        if (d < Dv) stf(D_DT(OUT), D_OFF(OUT), oo + d * P(31), acc[u] * inv);
    }
}
