// rlx_gather: out[i.., d] = table[ids[i..], d], one thread per output
// element; the table may be block-quantized (rows of P(1) bytes). An id
// outside [0, V) zeroes its row and flags the run. P(0) D, P(1) row bytes,
// P(2) V.
//
// rlx_q8_append: the append into a Q8_0 state (a quantized KV cache), one
// thread per 32-value block: rows of src (operand 0, float, rank r, rows of
// P(0) values with element stride P(4)) go to the Q8_0 output (the state's
// dims and element strides) at P(5) along axis P(6), quantized with ggml's
// rounding (d = amax / 127 stored as f16, q = round-half-away(x / d)).
// In place (P(7) = 0) a thread per block of src; when the output is another
// buffer (P(7) = 1, the state operand 1 laid out as the output) a thread per
// block of the output, which copies the state's block or quantizes src's, so
// no second launch writes the same bytes.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) rlx_gather(const int *rec)
{
    REC_DECL;
    ld_rec(R_, rec);
    int64_t total = (int64_t)(uint32_t)M_(0);
    int D = P(0), V = P(2);
    int tdt = D_DT(0);
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < total;
         it += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = it / D;
        int d = (int)(it % D);
        int id = ldi(D_PTR(1), D_DT(1), lin_off(R_, 1, i));
        float v = 0.0f;
        if (id < 0 || id >= V) {
            set_error(rec);
        } else if (is_quant(tdt)) {
            int bk = qbk(tdt);
            const uint8_t *b = D_PTR(0) + (int64_t)id * P(1) + (int64_t)(d / bk) * qbytes(tdt);
            v = deq(b, tdt, d % bk);
        } else {
            v = ldf(D_PTR(0), tdt, (int64_t)id * D_ST(0, 0) + (int64_t)d * D_ST(0, 1));
        }
        stf((uint8_t *)D_PTR(OUT), D_DT(OUT), lin_off(R_, OUT, it), v);
    }
}

extern "C" __global__ void __launch_bounds__(256) rlx_q8_append(const int *rec)
{
    REC_DECL;
    ld_rec(R_, rec);
    int64_t total = (int64_t)(uint32_t)M_(0);
    int D = P(0), nb = D / 32, r = D_RANK(0), ax = P(6), S = D_NE(0, ax);
    bool copy = P(7) != 0;
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < total;
         it += (int64_t)gridDim.x * blockDim.x) {
        // the block's row (src's in place, the output's when copying) and
        // its place in the row
        int64_t row = it / nb, lin = row, so = 0, oo = 0;
        int j = (int)(it % nb);
        bool from_src = true;
        for (int d = r - 2; d >= 0; d--) {
            int n = copy ? D_NE(OUT, d) : D_NE(0, d);
            int64_t i = lin % n;
            lin /= n;
            if (copy && d == ax) { // the output's row i: src's row i - off
                if (i < P(5) || i >= P(5) + S)
                    from_src = false;
                so += (i - P(5)) * D_ST(0, d);
                oo += i * D_ST(OUT, d);
            } else {
                so += i * D_ST(0, d);
                oo += (i + (!copy && d == ax ? P(5) : 0)) * D_ST(OUT, d);
            }
        }
        so += (int64_t)j * 32 * P(4);
        oo += (int64_t)j * 32;
        if (oo % 32 != 0) {
            set_error(rec);
            continue;
        }
        // the 34 bytes are 2-byte aligned: written (and copied) as 17 halves
        uint16_t *blk = (uint16_t *)((uint8_t *)D_PTR(OUT) + (oo / 32) * 34);
        if (!from_src) { // the state's block, where the output is another buffer
            const uint16_t *sb = (const uint16_t *)(D_PTR(1) + (oo / 32) * 34);
            for (int i = 0; i < 17; i++)
                blk[i] = sb[i];
            continue;
        }
        float x[32];
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) {
            x[i] = ldf(D_PTR(0), D_DT(0), so + (int64_t)i * P(4));
            amax = fmaxf(amax, fabsf(x[i]));
        }
        float dd = amax / 127.0f, id = dd != 0.0f ? 1.0f / dd : 0.0f;
        blk[0] = (uint16_t)__half_as_ushort(__float2half_rn(dd));
        for (int i = 0; i < 32; i += 2) {
            uint32_t pair = 0;
            for (int k = 0; k < 2; k++) {
                float v = x[i + k] * id, t = truncf(v);
                if (fabsf(v - t) >= 0.5f)
                    t += v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : 0.0f;
                int q = min(max((int)t, -127), 127);
                pair |= ((uint32_t)q & 0xFFu) << (8 * k);
            }
            blk[1 + i / 2] = (uint16_t)pair;
        }
    }
}
