#version 450
// Matrix products of many rows (prompts, encoders): out[.., m, n] =
// act(alpha * sum_k a[.., m, k] b[.., k, n] + bias[n]) in output tiles of
// GT x GT, a workgroup of LS = 64 threads each holding 8 x 8 of them.
// Every GK step of K, a and b are staged in shared memory (k-major, as f32;
// b decoded from its blocks eight values at a time, deq8.glsl, where it is
// contiguous along K), then every thread runs its 64 sums over the step.
// P(0) K, P(1) act, PF(2) alpha, P(3) has bias, P(5) b's row bytes (or
// elements), P(6) 1 when b is contiguous along K (deq8), P(7) tiles along
// n, P(8) tiles along m.
#include "common.glsl"
#include "deq8.glsl"

#define GT 64
#define GK 16

shared float As[GK][GT + 4];
shared float Bs[GK][GT + 4];

void main()
{
    int t = int(gl_LocalInvocationID.x);
    int r = D_RANK(OUT);
    int N = D_NE(OUT, r - 1), Mr = D_NE(OUT, r - 2), K = P(0);
    int tn_ = P(7), tm_ = P(8);
    int g = int(item_base());
    int n0 = (g % tn_) * GT, m0 = ((g / tn_) % tm_) * GT, bl = g / tn_ / tm_;
    int ab = 0, bb = 0, ob = 0;
    for (int d = r - 3; d >= 0; d--) {
        int c = bl % D_NE(OUT, d);
        bl /= D_NE(OUT, d);
        ab += c * D_ST(0, d);
        bb += c * D_ST(1, d);
        ob += c * D_ST(OUT, d);
    }
    int adt = D_DT(0), bdt = D_DT(1);
    uint aoff = D_OFF(0), boff = D_OFF(1);
    int asm_ = D_ST(0, r - 2), ask = D_ST(0, r - 1), bsk = D_ST(1, r - 2), bsn = D_ST(1, r - 1);
    bool bk8 = P(6) != 0;
    int rs = P(5);
    int tm = t / 8, tn = t % 8;
    float acc[8][8];
    [[unroll]] for (int i = 0; i < 8; i++)
        [[unroll]] for (int j = 0; j < 8; j++) acc[i][j] = 0.0;
    for (int k0 = 0; k0 < K; k0 += GK) {
        // a: 64 rows x 16 values, 16 a thread (consecutive threads along k)
        [[unroll]] for (int i = 0; i < 16; i++) {
            int idx = t + 64 * i, mm = idx / GK, kk = idx % GK;
            int m = m0 + mm, k = k0 + kk;
            float v = 0.0;
            if (m < Mr && k < K) {
                int e = ab + m * asm_ + k * ask;
                v = adt == DT_F32 ? uintBitsToFloat(B0.d[(aoff >> 2) + uint(e)]) : ldf(0, adt, aoff, e);
            }
            As[kk][mm] = v;
        }
        // b: 64 columns x 16 values; along K two runs of eight decoded a thread
        if (bk8) {
            int n = n0 + t;
            [[unroll]] for (int h = 0; h < 2; h++) {
                float w[8];
                if (n < N && k0 + 8 * h < K)
                    deq8(bdt, boff, n, rs, k0 + 8 * h, w);
                else
                    [[unroll]] for (int i = 0; i < 8; i++) w[i] = 0.0;
                [[unroll]] for (int i = 0; i < 8; i++) Bs[8 * h + i][t] = w[i];
            }
        } else {
            [[unroll]] for (int i = 0; i < 16; i++) {
                int idx = t + 64 * i, nn = idx % GT, kk = idx / GT;
                int n = n0 + nn, k = k0 + kk;
                Bs[kk][nn] = (n < N && k < K) ? ldf(1, bdt, boff, bb + k * bsk + n * bsn) : 0.0;
            }
        }
        barrier();
        [[unroll]] for (int kk = 0; kk < GK; kk++) {
            float a[8], b[8];
            [[unroll]] for (int i = 0; i < 8; i++) a[i] = As[kk][tm + 8 * i];
            [[unroll]] for (int j = 0; j < 8; j++) b[j] = Bs[kk][tn + 8 * j];
            [[unroll]] for (int i = 0; i < 8; i++)
                [[unroll]] for (int j = 0; j < 8; j++) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
    float alpha = PF(2);
    int osm = D_ST(OUT, r - 2), osn = D_ST(OUT, r - 1);
    [[unroll]] for (int j = 0; j < 8; j++) {
        int n = n0 + tn + 8 * j;
        if (n >= N) continue;
        float bias = P(3) != 0 ? ldf(2, D_DT(2), D_OFF(2), n * D_ST(2, 0)) : 0.0;
        [[unroll]] for (int i = 0; i < 8; i++) {
            int m = m0 + tm + 8 * i;
            if (m < Mr)
                stf(D_DT(OUT), D_OFF(OUT), ob + m * osm + n * osn,
                    act(P(1), acc[i][j] * (alpha == 0.0 ? 1.0 : alpha) + bias));
        }
    }
}
