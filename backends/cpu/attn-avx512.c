/* AVX-512 attention tile for prompt processing (n_q > 1): the 16 queries of
 * a tile live in the 16 lanes of a vector. Q is transposed once per tile
 * (Qt[d] = dimension d of the 16 queries), so
 *   scores:  St[j] = sum_d K[j][d] * Qt[d]   (K[j][d] broadcast, FMA into the
 *            accumulator of key j; 16 keys at a time),
 *   softmax: running max / sum / correction per query are vectors, and the
 *            causal or sliding mask is a lane compare,
 *   values:  Ot[d] += sum_j V[j][d] * Pt[j]  (V[j][d] broadcast; 16
 *            dimensions at a time),
 * with no horizontal reductions and no transposes of K or V; O is transposed
 * back once at the end. F16 K/V tiles are widened once per key tile.
 * Compiled with the AVX-512 flags; reached only through
 * rlx_cpu_fill_attn_avx512() (dispatch.c). ops.c uses it for F32/F16 caches
 * without bias masks or soft-capping, head sizes a multiple of 16; other
 * cases keep the portable tile. */
#include <immintrin.h>
#include <math.h>

#include "backends/cpu/kernels-internal.h"

#define BQ RLX_ATTN_BQ
#define BK RLX_ATTN_BK
_Static_assert(BQ == 16, "one query per lane");
_Static_assert(BK % 16 == 0, "key blocks of 16");

/* e^x as vec-ops.c's vexp (same reduction and polynomial), lanes below -87
 * give 0 */
static inline __m512 exp512(__m512 x)
{
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 v = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ), v);
}

/* Row pointers of a K or V tile (f32 in place, f16 widened into buf);
 * rows past kn repeat the last one (their scores are masked). */
static void tile_rows(const rlx_cpu_attn_params *p, const void *base, int64_t ld_tok,
                      int64_t ld_head, int64_t kvh, int64_t t0, int64_t kn, float *buf,
                      const float **rows)
{
    const int64_t D = p->head_dim;
    for (int64_t j = 0; j < kn; j++) {
        int64_t off = (t0 + j) * ld_tok + kvh * ld_head;
        if (p->kv_type == RLX_DTYPE_F16) {
            const uint16_t *src = (const uint16_t *)base + off;
            float *dst = buf + j * D;
            for (int64_t d = 0; d < D; d += 16)
                _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256(
                                              (const __m256i *)(const void *)(src + d))));
            rows[j] = dst;
        } else {
            rows[j] = (const float *)base + off;
        }
    }
    for (int64_t j = kn; j < BK; j++)
        rows[j] = rows[kn - 1];
}

/* St[g][jj] = sum_d K[jj][d] * Qt[g][d] for 16 keys and G heads (1 or 2),
 * K rows ks floats apart; with two heads each broadcast key value feeds two
 * FMAs (8 keys at a time, 16 accumulators) */
static inline __attribute__((always_inline)) void
scores16(int G, const float *const *Qt, const float *k, int64_t ks, int64_t D, float *const *St)
{
    if (G == 1) {
        __m512 c[16];
        for (int jj = 0; jj < 16; jj++)
            c[jj] = _mm512_setzero_ps();
        const float *k4 = k + 4 * ks, *k8 = k + 8 * ks, *k12 = k + 12 * ks;
        for (int64_t d = 0; d < D; d++) {
            __m512 q = _mm512_load_ps(Qt[0] + d * BQ);
            for (int jj = 0; jj < 4; jj++) {
                c[jj] = _mm512_fmadd_ps(_mm512_set1_ps(k[jj * ks + d]), q, c[jj]);
                c[jj + 4] = _mm512_fmadd_ps(_mm512_set1_ps(k4[jj * ks + d]), q, c[jj + 4]);
                c[jj + 8] = _mm512_fmadd_ps(_mm512_set1_ps(k8[jj * ks + d]), q, c[jj + 8]);
                c[jj + 12] = _mm512_fmadd_ps(_mm512_set1_ps(k12[jj * ks + d]), q, c[jj + 12]);
            }
        }
        for (int jj = 0; jj < 16; jj++)
            _mm512_store_ps(St[0] + jj * BQ, c[jj]);
        return;
    }
    for (int half = 0; half < 2; half++) {
        const float *kh = k + half * 8 * ks;
        __m512 a[8], b[8];
        for (int jj = 0; jj < 8; jj++)
            a[jj] = b[jj] = _mm512_setzero_ps();
        for (int64_t d = 0; d < D; d++) {
            __m512 qa = _mm512_load_ps(Qt[0] + d * BQ), qb = _mm512_load_ps(Qt[1] + d * BQ);
            for (int jj = 0; jj < 8; jj++) {
                __m512 kv = _mm512_set1_ps(kh[jj * ks + d]);
                a[jj] = _mm512_fmadd_ps(kv, qa, a[jj]);
                b[jj] = _mm512_fmadd_ps(kv, qb, b[jj]);
            }
        }
        for (int jj = 0; jj < 8; jj++) {
            _mm512_store_ps(St[0] + (half * 8 + jj) * BQ, a[jj]);
            _mm512_store_ps(St[1] + (half * 8 + jj) * BQ, b[jj]);
        }
    }
}

/* St[g][0] = sum_d K[d] * Qt[g][d] for one key */
static inline void scores16_one(int G, const float *const *Qt, const float *k, int64_t D,
                                float *const *St)
{
    for (int g = 0; g < G; g++) {
        __m512 c = _mm512_setzero_ps();
        for (int64_t d = 0; d < D; d++)
            c = _mm512_fmadd_ps(_mm512_set1_ps(k[d]), _mm512_load_ps(Qt[g] + d * BQ), c);
        _mm512_store_ps(St[g], c);
    }
}

/* Ot[g][d0 + dd] = Ot[g][d0 + dd] * corr[g] + sum_j V[j][d0 + dd] * Pt[g][j]:
 * one head 16 dims at a time, two heads 8 (each broadcast feeds both) */
static inline __attribute__((always_inline)) void values16(int G, float *const *Ot,
                                                           float *const *Pt,
                                                           const float *const *vrow, int64_t kn,
                                                           int64_t d0, const __m512 *corr)
{
    if (G == 1) {
        __m512 c[16];
        for (int dd = 0; dd < 16; dd++)
            c[dd] = _mm512_mul_ps(_mm512_load_ps(Ot[0] + (d0 + dd) * BQ), corr[0]);
        for (int64_t j = 0; j < kn; j++) {
            __m512 pj = _mm512_load_ps(Pt[0] + j * BQ);
            const float *v = vrow[j] + d0;
            for (int dd = 0; dd < 16; dd++)
                c[dd] = _mm512_fmadd_ps(_mm512_set1_ps(v[dd]), pj, c[dd]);
        }
        for (int dd = 0; dd < 16; dd++)
            _mm512_store_ps(Ot[0] + (d0 + dd) * BQ, c[dd]);
        return;
    }
    for (int64_t d8 = d0; d8 < d0 + 16; d8 += 8) {
        __m512 a[8], b[8];
        for (int dd = 0; dd < 8; dd++) {
            a[dd] = _mm512_mul_ps(_mm512_load_ps(Ot[0] + (d8 + dd) * BQ), corr[0]);
            b[dd] = _mm512_mul_ps(_mm512_load_ps(Ot[1] + (d8 + dd) * BQ), corr[1]);
        }
        for (int64_t j = 0; j < kn; j++) {
            __m512 pa = _mm512_load_ps(Pt[0] + j * BQ), pb = _mm512_load_ps(Pt[1] + j * BQ);
            const float *v = vrow[j] + d8;
            for (int dd = 0; dd < 8; dd++) {
                __m512 vv = _mm512_set1_ps(v[dd]);
                a[dd] = _mm512_fmadd_ps(vv, pa, a[dd]);
                b[dd] = _mm512_fmadd_ps(vv, pb, b[dd]);
            }
        }
        for (int dd = 0; dd < 8; dd++) {
            _mm512_store_ps(Ot[0] + (d8 + dd) * BQ, a[dd]);
            _mm512_store_ps(Ot[1] + (d8 + dd) * BQ, b[dd]);
        }
    }
}

/* G heads [h0, h0 + G) of one KV head (G = 1 or 2), queries [q0, q0 + nq):
 * the K/V tiles are widened once for all of them, and their positions, so
 * their masks, are the same. */
static inline __attribute__((always_inline)) void attn_tile_heads(int G,
                                                                  const rlx_cpu_attn_params *p,
                                                                  int64_t h0, int64_t q0,
                                                                  int64_t nq, float *scratch)
{
    const int64_t D = p->head_dim;
    const int64_t kvh = h0 / (p->n_heads / p->n_kv_heads);
    float *base = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *Qt[2], *Ot[2], *St[2];
    for (int g = 0; g < 2; g++) {
        Qt[g] = base + g * 2 * D * BQ; /* D x 16 */
        Ot[g] = Qt[g] + D * BQ;        /* D x 16 */
    }
    St[0] = base + 4 * D * BQ; /* BK x 16: scores, then probabilities */
    St[1] = St[0] + BK * BQ;
    float *Kt = St[1] + BK * BQ; /* BK x D widened rows */
    float *Vt = Kt + BK * D;     /* BK x D */
    const float *krow[BK], *vrow[BK];

    for (int g = 0; g < G; g++) {
        for (int64_t i = 0; i < BQ; i++) {
            const float *q = p->q + (q0 + (i < nq ? i : 0)) * p->q_ld_tok + (h0 + g) * p->q_ld_head;
            for (int64_t d = 0; d < D; d++)
                Qt[g][d * BQ + i] = i < nq ? q[d] * p->scale : 0.0f;
        }
        memset(Ot[g], 0, sizeof(float) * (size_t)(D * BQ));
    }

    const bool causal = p->mask == RLX_CPU_ATTN_CAUSAL || p->mask == RLX_CPU_ATTN_SLIDING;
    const bool sliding = p->mask == RLX_CPU_ATTN_SLIDING;
    int64_t lo = 0, hi = p->n_kv;
    if (causal) {
        int64_t last = p->q_pos0 + q0 + nq - 1;
        hi = last + 1 < hi ? last + 1 : hi;
        if (sliding) {
            int64_t first = p->q_pos0 + q0 - p->window + 1;
            lo = first > 0 ? first : 0;
        }
    }
    /* per lane: the query's position; lanes past nq see no key */
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __mmask16 live = (__mmask16)(nq >= 16 ? 0xFFFF : (1u << nq) - 1u);
    const __m512i pos = _mm512_add_epi32(lane, _mm512_set1_epi32((int)(p->q_pos0 + q0)));
    __m512 m[2], l[2];
    for (int g = 0; g < 2; g++) {
        m[g] = _mm512_set1_ps(-INFINITY);
        l[g] = _mm512_setzero_ps();
    }

    for (int64_t kt = lo; kt < hi; kt += BK) {
        int64_t kn = hi - kt < BK ? hi - kt : BK;
        tile_rows(p, p->k, p->k_ld_tok, p->k_ld_head, kvh, kt, kn, Kt, krow);
        /* rows are ks apart (the cache's token stride, or D once widened);
         * a last partial block reads the tile buffer's spare rows */
        int64_t ks = p->kv_type == RLX_DTYPE_F16 ? D : p->k_ld_tok;
        for (int64_t j0 = 0; j0 < kn; j0 += 16) {
            float *Sj[2] = {St[0] + j0 * BQ, St[1] + j0 * BQ};
            if (j0 + 16 <= kn || p->kv_type == RLX_DTYPE_F16) {
                scores16(G, (const float *const *)Qt, krow[j0], ks, D, Sj);
            } else {
                for (int64_t j = j0; j < j0 + 16; j++) { /* f32 rows past the cache's end */
                    float *Sjj[2] = {St[0] + j * BQ, St[1] + j * BQ};
                    scores16_one(G, (const float *const *)Qt, krow[j], D, Sjj);
                }
            }
        }
        /* visibility per key (the same for every head of the tile) */
        __mmask16 vis[BK];
        for (int64_t j = 0; j < kn; j++) {
            __m512i key = _mm512_set1_epi32((int)(kt + j));
            __mmask16 v = live;
            if (causal)
                v &= _mm512_cmp_epi32_mask(key, pos, _MM_CMPINT_LE);
            if (sliding) /* key > pos - window */
                v &= _mm512_cmp_epi32_mask(
                    key, _mm512_sub_epi32(pos, _mm512_set1_epi32((int)p->window)), _MM_CMPINT_NLE);
            vis[j] = v;
        }
        __m512 corr[2];
        bool none = true;
        for (int g = 0; g < G; g++) {
            __m512 tmax = _mm512_set1_ps(-INFINITY);
            for (int64_t j = 0; j < kn; j++)
                tmax = _mm512_mask_max_ps(tmax, vis[j], tmax, _mm512_load_ps(St[g] + j * BQ));
            __mmask16 any = _mm512_cmp_ps_mask(tmax, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
            if (!any) {
                corr[g] = _mm512_set1_ps(1.0f);
                for (int64_t j = 0; j < kn; j++)
                    _mm512_store_ps(St[g] + j * BQ, _mm512_setzero_ps());
                continue;
            }
            none = false;
            __m512 mnew = _mm512_mask_max_ps(m[g], any, m[g], tmax);
            /* lanes with no visible key yet keep m = -inf: corr 1, p 0 */
            __m512 c =
                _mm512_mask_blend_ps(any, _mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(m[g], mnew)));
            corr[g] = _mm512_mask_blend_ps(
                _mm512_cmp_ps_mask(m[g], _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), c,
                _mm512_set1_ps(1.0f));
            __m512 lsum = _mm512_setzero_ps();
            for (int64_t j = 0; j < kn; j++) {
                __m512 pj = _mm512_maskz_mov_ps(
                    vis[j] & any, exp512(_mm512_sub_ps(_mm512_load_ps(St[g] + j * BQ), mnew)));
                _mm512_store_ps(St[g] + j * BQ, pj);
                lsum = _mm512_add_ps(lsum, pj);
            }
            m[g] = mnew;
            l[g] = _mm512_fmadd_ps(l[g], corr[g], lsum);
        }
        if (none)
            continue;
        tile_rows(p, p->v, p->v_ld_tok, p->v_ld_head, kvh, kt, kn, Vt, vrow);
        for (int64_t d0 = 0; d0 < D; d0 += 16)
            values16(G, Ot, St, vrow, kn, d0, corr);
    }

    for (int g = 0; g < G; g++) {
        float il[BQ];
        _mm512_storeu_ps(
            il, _mm512_maskz_div_ps(_mm512_cmp_ps_mask(l[g], _mm512_setzero_ps(), _CMP_GT_OQ),
                                    _mm512_set1_ps(1.0f), l[g]));
        for (int64_t i = 0; i < nq; i++) {
            float *o = p->out + (q0 + i) * p->o_ld_tok + (h0 + g) * p->o_ld_head;
            for (int64_t d = 0; d < D; d++)
                o[d] = Ot[g][d * BQ + i] * il[i];
        }
    }
}

/* heads [h0, h0 + nh), nh 1 or 2, of one KV head */
static void attn_tile_pf(const rlx_cpu_attn_params *p, int64_t h0, int64_t nh, int64_t q0,
                         int64_t nq, float *scratch)
{
    if (nh == 2)
        attn_tile_heads(2, p, h0, q0, nq, scratch);
    else
        attn_tile_heads(1, p, h0, q0, nq, scratch);
}

void rlx_cpu_fill_attn_avx512(rlx_cpu_table *t)
{
    t->attn_prefill = attn_tile_pf;
}
