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
 * without soft-capping, head sizes a multiple of 16, with or without an
 * additive bias (SAM's relative positions: added to the scores tile by tile,
 * transposed like Q); other cases keep the portable tile. */
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

/* Ot[g][d0 + dd] = Ot[g][d0 + dd] * corr[g] + sum_j V[j][d0 + dd] * Pt[g][j]
 * (Ot taken as zero on the first key tile): one head 16 dims at a time,
 * two heads 8 (each broadcast feeds both) */
static inline __attribute__((always_inline)) void
values16(int G, float *const *Ot, float *const *Pt, const float *const *vrow, int64_t kn,
         int64_t d0, const __m512 *corr, bool first)
{
    if (G == 1) {
        __m512 c[16];
        for (int dd = 0; dd < 16; dd++)
            c[dd] = first ? _mm512_setzero_ps()
                          : _mm512_mul_ps(_mm512_load_ps(Ot[0] + (d0 + dd) * BQ), corr[0]);
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
            a[dd] = first ? _mm512_setzero_ps()
                          : _mm512_mul_ps(_mm512_load_ps(Ot[0] + (d8 + dd) * BQ), corr[0]);
            b[dd] = first ? _mm512_setzero_ps()
                          : _mm512_mul_ps(_mm512_load_ps(Ot[1] + (d8 + dd) * BQ), corr[1]);
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

/* r[0..15] transposed in registers: lane j of r[i] becomes lane i of r[j].
 * Unpacks and in-lane shuffles gather, per 128-bit lane, four rows of one
 * column; two rounds of 128-bit lane shuffles then line the four groups up. */
static inline __attribute__((always_inline)) void transpose16(__m512 *r)
{
    __m512 t[16], u[16];
    for (int k = 0; k < 16; k += 2) {
        t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
    }
    /* u[4k + m], 128-bit lane L: rows 4k..4k+3 of column 4L + m */
    for (int k = 0; k < 4; k++) {
        const __m512 *tk = t + 4 * k;
        u[4 * k + 0] = _mm512_shuffle_ps(tk[0], tk[2], 0x44);
        u[4 * k + 1] = _mm512_shuffle_ps(tk[0], tk[2], 0xEE);
        u[4 * k + 2] = _mm512_shuffle_ps(tk[1], tk[3], 0x44);
        u[4 * k + 3] = _mm512_shuffle_ps(tk[1], tk[3], 0xEE);
    }
    for (int m = 0; m < 4; m++) {
        __m512 a0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x44);
        __m512 a1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xEE);
        __m512 a2 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x44);
        __m512 a3 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xEE);
        r[m] = _mm512_shuffle_f32x4(a0, a2, 0x88);
        r[4 + m] = _mm512_shuffle_f32x4(a0, a2, 0xDD);
        r[8 + m] = _mm512_shuffle_f32x4(a1, a3, 0x88);
        r[12 + m] = _mm512_shuffle_f32x4(a1, a3, 0xDD);
    }
}

/* One query tile of a task: its 16 queries' transposed Q and accumulated O
 * per head, running max and sum, positions, and the keys it sees. */
typedef struct {
    float *Qt[2], *Ot[2];
    __m512 m[2], l[2];
    __m512i pos;    /* per lane: the query's position */
    __mmask16 live; /* lanes holding a query */
    int64_t q0, nq, lo, hi;
    bool fresh; /* no key tile has reached Ot yet */
} pf_tile;

/* The bias of 16 keys [t0, t0 + 16) for one query from its decomposed row
 * (bias_grid_w = w > 0: kh row terms, then w column terms): key t gets
 * row[t / w] + row[kh + t % w]. Rows of at most 32 terms sit in two
 * registers and are permuted; a grid of whole 16s of columns reads one row
 * term and 16 consecutive column terms; anything else goes lane by lane. */
static inline __m512 grid_bias16(const float *row, int64_t kh, int64_t w, int64_t t0, __mmask16 km,
                                 __m512i ir, __m512i ic)
{
    if (kh + w <= 32) {
        int64_t n = kh + w;
        __m512 lo = _mm512_maskz_loadu_ps((__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1u), row);
        __m512 hi =
            _mm512_maskz_loadu_ps((__mmask16)(n <= 16 ? 0 : (1u << (n - 16)) - 1u), row + 16);
        return _mm512_add_ps(_mm512_permutex2var_ps(lo, ir, hi),
                             _mm512_permutex2var_ps(lo, ic, hi));
    }
    if (w % 16 == 0 && t0 % 16 == 0)
        return _mm512_add_ps(_mm512_set1_ps(row[t0 / w]),
                             _mm512_maskz_loadu_ps(km, row + kh + t0 % w));
    float b[16] = {0};
    for (int l = 0; l < 16; l++)
        if (km >> l & 1)
            b[l] = row[(t0 + l) / w] + row[kh + (t0 + l) % w];
    return _mm512_loadu_ps(b);
}

/* St[g][j][lane] += bias[h0 + g][q0 + lane][kt + j] for the keys a tile sees:
 * the bias rows of its 16 queries read 16 keys at a time (masked past the
 * last key, so nothing past a row is read) and transposed to key-major
 * (or built from a grid-decomposed bias's two terms). */
static inline __attribute__((always_inline)) void add_bias(int G, const rlx_cpu_attn_params *p,
                                                           int64_t h0, const pf_tile *t, int64_t kt,
                                                           int64_t tn, float *const *St)
{
    const int64_t w = p->bias_grid_w, kh = w > 0 ? p->n_kv / w : 0;
    for (int64_t j0 = 0; j0 < tn; j0 += 16) {
        const __mmask16 km = (__mmask16)(tn - j0 >= 16 ? 0xFFFF : (1u << (tn - j0)) - 1u);
        __m512i vr = _mm512_setzero_si512(), vc = vr;
        if (w > 0) { /* permute indices (rows of at most 32 terms) */
            int32_t ir[16], ic[16];
            for (int l = 0; l < 16; l++) {
                int64_t key = kt + j0 + l;
                ir[l] = (int32_t)((key / w) & 31);
                ic[l] = (int32_t)((kh + key % w) & 31);
            }
            vr = _mm512_loadu_si512(ir);
            vc = _mm512_loadu_si512(ic);
        }
        for (int g = 0; g < G; g++) {
            const float *b0 = p->bias + (h0 + g) * p->bias_ld_head + t->q0 * p->bias_ld_q;
            __m512 r[16];
            for (int64_t i = 0; i < BQ; i++) {
                const float *row = b0 + i * p->bias_ld_q;
                r[i] = i >= t->nq ? _mm512_setzero_ps()
                       : w > 0    ? grid_bias16(row, kh, w, kt + j0, km, vr, vc)
                                  : _mm512_maskz_loadu_ps(km, row + kt + j0);
            }
            transpose16(r);
            for (int64_t jj = 0; jj < 16 && j0 + jj < tn; jj++) {
                float *sj = St[g] + (j0 + jj) * BQ;
                _mm512_store_ps(sj, _mm512_add_ps(_mm512_load_ps(sj), r[jj]));
            }
        }
    }
}

/* G heads [h0, h0 + G) of one KV head (G = 1 or 2), queries [q0, q0 + nq)
 * (up to RLX_ATTN_PF_TILES tiles of 16): each K/V tile is widened once for
 * all of them; the heads of a query tile share its positions, so its masks. */
static inline __attribute__((always_inline)) void attn_tile_heads(int G,
                                                                  const rlx_cpu_attn_params *p,
                                                                  int64_t h0, int64_t q0,
                                                                  int64_t nq, float *scratch)
{
    const int64_t D = p->head_dim;
    const int64_t kvh = h0 / (p->n_heads / p->n_kv_heads);
    float *base = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const int nt = (int)((nq + BQ - 1) / BQ);
    float *St[2];
    St[0] = base + RLX_ATTN_PF_TILES * 4 * D * BQ; /* BK x 16: scores, then probabilities */
    St[1] = St[0] + BK * BQ;
    float *Kt = St[1] + BK * BQ; /* BK x D widened rows */
    float *Vt = Kt + BK * D;     /* BK x D */
    const float *krow[BK], *vrow[BK];

    const bool causal = p->mask == RLX_CPU_ATTN_CAUSAL || p->mask == RLX_CPU_ATTN_SLIDING;
    const bool sliding = p->mask == RLX_CPU_ATTN_SLIDING;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 vscale = _mm512_set1_ps(p->scale);
    pf_tile tl[RLX_ATTN_PF_TILES];
    int64_t klo = p->n_kv, khi = 0;
    for (int b = 0; b < nt; b++) {
        pf_tile *t = &tl[b];
        for (int g = 0; g < 2; g++) {
            t->Qt[g] = base + (b * 4 + g * 2) * D * BQ; /* D x 16 */
            t->Ot[g] = t->Qt[g] + D * BQ;               /* D x 16 */
            t->m[g] = _mm512_set1_ps(-INFINITY);
            t->l[g] = _mm512_setzero_ps();
        }
        t->q0 = q0 + b * BQ;
        t->nq = q0 + nq - t->q0 < BQ ? q0 + nq - t->q0 : BQ;
        t->fresh = true;
        t->live = (__mmask16)(t->nq >= 16 ? 0xFFFF : (1u << t->nq) - 1u);
        t->pos = _mm512_add_epi32(lane, _mm512_set1_epi32((int)(p->q_pos0 + t->q0)));
        t->lo = 0;
        t->hi = p->n_kv;
        if (causal) {
            int64_t last = p->q_pos0 + t->q0 + t->nq - 1;
            t->hi = last + 1 < t->hi ? last + 1 : t->hi;
            if (sliding) {
                int64_t first = p->q_pos0 + t->q0 - p->window + 1;
                t->lo = first > 0 ? first : 0;
            }
        }
        klo = t->lo < klo ? t->lo : klo;
        khi = t->hi > khi ? t->hi : khi;
        /* Qt = the tile's scaled queries transposed, 16 dims at a time
         * (lanes past nq hold zeros) */
        for (int g = 0; g < G; g++)
            for (int64_t d0 = 0; d0 < D; d0 += 16) {
                __m512 r[16];
                for (int64_t i = 0; i < BQ; i++)
                    r[i] = i < t->nq
                               ? _mm512_mul_ps(_mm512_loadu_ps(p->q + (t->q0 + i) * p->q_ld_tok +
                                                               (h0 + g) * p->q_ld_head + d0),
                                               vscale)
                               : _mm512_setzero_ps();
                transpose16(r);
                for (int64_t dd = 0; dd < 16; dd++)
                    _mm512_store_ps(t->Qt[g] + (d0 + dd) * BQ, r[dd]);
            }
    }

    for (int64_t kt = klo; kt < khi; kt += BK) {
        const int64_t kn = khi - kt < BK ? khi - kt : BK;
        tile_rows(p, p->k, p->k_ld_tok, p->k_ld_head, kvh, kt, kn, Kt, krow);
        bool v_ready = false;
        /* rows are ks apart (the cache's token stride, or D once widened);
         * a last partial block reads the tile buffer's spare rows */
        const int64_t ks = p->kv_type == RLX_DTYPE_F16 ? D : p->k_ld_tok;
        for (int b = 0; b < nt; b++) {
            pf_tile *t = &tl[b];
            if (kt >= t->hi || kt + kn <= t->lo)
                continue;
            const int64_t tn = t->hi - kt < kn ? t->hi - kt : kn; /* keys this tile can see */
            for (int64_t j0 = 0; j0 < tn; j0 += 16) {
                float *Sj[2] = {St[0] + j0 * BQ, St[1] + j0 * BQ};
                if (j0 + 16 <= tn || p->kv_type == RLX_DTYPE_F16) {
                    scores16(G, (const float *const *)t->Qt, krow[j0], ks, D, Sj);
                } else {
                    for (int64_t j = j0; j < j0 + 16; j++) { /* f32 rows past the cache's end */
                        float *Sjj[2] = {St[0] + j * BQ, St[1] + j * BQ};
                        scores16_one(G, (const float *const *)t->Qt, krow[j], D, Sjj);
                    }
                }
            }
            if (p->mask == RLX_CPU_ATTN_BIAS)
                add_bias(G, p, h0, t, kt, tn, St);
            /* visibility per key (the same for every head of the tile) */
            __mmask16 vis[BK];
            for (int64_t j = 0; j < tn; j++) {
                __m512i key = _mm512_set1_epi32((int)(kt + j));
                __mmask16 v = t->live;
                if (causal)
                    v &= _mm512_cmp_epi32_mask(key, t->pos, _MM_CMPINT_LE);
                if (sliding) /* key > pos - window */
                    v &= _mm512_cmp_epi32_mask(
                        key, _mm512_sub_epi32(t->pos, _mm512_set1_epi32((int)p->window)),
                        _MM_CMPINT_NLE);
                vis[j] = v;
            }
            __m512 corr[2];
            bool none = true;
            for (int g = 0; g < G; g++) {
                __m512 tmax = _mm512_set1_ps(-INFINITY);
                for (int64_t j = 0; j < tn; j++)
                    tmax = _mm512_mask_max_ps(tmax, vis[j], tmax, _mm512_load_ps(St[g] + j * BQ));
                __mmask16 any = _mm512_cmp_ps_mask(tmax, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
                if (!any) {
                    corr[g] = _mm512_set1_ps(1.0f);
                    for (int64_t j = 0; j < tn; j++)
                        _mm512_store_ps(St[g] + j * BQ, _mm512_setzero_ps());
                    continue;
                }
                none = false;
                __m512 mnew = _mm512_mask_max_ps(t->m[g], any, t->m[g], tmax);
                /* lanes with no visible key yet keep m = -inf: corr 1, p 0 */
                __m512 c = _mm512_mask_blend_ps(any, _mm512_set1_ps(1.0f),
                                                exp512(_mm512_sub_ps(t->m[g], mnew)));
                corr[g] = _mm512_mask_blend_ps(
                    _mm512_cmp_ps_mask(t->m[g], _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), c,
                    _mm512_set1_ps(1.0f));
                __m512 lsum = _mm512_setzero_ps();
                for (int64_t j = 0; j < tn; j++) {
                    __m512 pj = _mm512_maskz_mov_ps(
                        vis[j] & any, exp512(_mm512_sub_ps(_mm512_load_ps(St[g] + j * BQ), mnew)));
                    _mm512_store_ps(St[g] + j * BQ, pj);
                    lsum = _mm512_add_ps(lsum, pj);
                }
                t->m[g] = mnew;
                t->l[g] = _mm512_fmadd_ps(t->l[g], corr[g], lsum);
            }
            if (none)
                continue;
            if (!v_ready) {
                tile_rows(p, p->v, p->v_ld_tok, p->v_ld_head, kvh, kt, kn, Vt, vrow);
                v_ready = true;
            }
            for (int64_t d0 = 0; d0 < D; d0 += 16)
                values16(G, t->Ot, St, vrow, tn, d0, corr, t->fresh);
            t->fresh = false;
        }
    }

    /* O = Ot / l transposed back, 16 dims at a time; a query that saw no
     * key (or no key tile at all) gets zeros */
    for (int b = 0; b < nt; b++) {
        const pf_tile *t = &tl[b];
        for (int g = 0; g < G; g++) {
            const __m512 il =
                _mm512_maskz_div_ps(_mm512_cmp_ps_mask(t->l[g], _mm512_setzero_ps(), _CMP_GT_OQ),
                                    _mm512_set1_ps(1.0f), t->l[g]);
            for (int64_t d0 = 0; d0 < D; d0 += 16) {
                __m512 r[16];
                for (int64_t dd = 0; dd < 16; dd++)
                    r[dd] = t->fresh ? _mm512_setzero_ps()
                                     : _mm512_mul_ps(_mm512_load_ps(t->Ot[g] + (d0 + dd) * BQ), il);
                transpose16(r);
                for (int64_t i = 0; i < t->nq; i++)
                    _mm512_storeu_ps(
                        p->out + (t->q0 + i) * p->o_ld_tok + (h0 + g) * p->o_ld_head + d0, r[i]);
            }
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

/* ------------------------------------------------------------ decode */

/* 16 elements of a K or V row (F16 widened, F32 as is) */
static inline __attribute__((always_inline)) __m512 kv16(const void *base, bool f16, int64_t off)
{
    if (f16)
        return _mm512_cvtph_ps(
            _mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)base + off)));
    return _mm512_loadu_ps((const float *)base + off);
}

/* the lines of a D-element row at element offset off */
static inline __attribute__((always_inline)) void kv_row_prefetch(const void *base, bool f16,
                                                                  int64_t off, int64_t D)
{
    const char *r = (const char *)base + off * (f16 ? 2 : 4);
    for (int64_t o = 0; o < D * (f16 ? 2 : 4); o += 64)
        _mm_prefetch(r + o, _MM_HINT_T0);
}

/* the lane sums of a0..a3 as 4 floats (the four in one pass: two unpacks,
 * two shuffles and two 128-bit lane swaps instead of four reductions) */
static inline __m128 sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
    __m512 x01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
    __m512 x23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
    /* per 128-bit chunk: [a0, a1, a2, a3] partial sums over its 4 lanes */
    __m512 y = _mm512_add_ps(_mm512_shuffle_ps(x01, x23, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(x01, x23, _MM_SHUFFLE(3, 2, 3, 2)));
    y = _mm512_add_ps(y, _mm512_shuffle_f32x4(y, y, _MM_SHUFFLE(1, 0, 3, 2)));
    y = _mm512_add_ps(y, _mm512_shuffle_f32x4(y, y, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castps512_ps128(y);
}

#define DEC_MAXR 4 /* query rows per task: heads of one KV head x queries */

/* O[r][c0 .. c0 + CB) = O * corr + P V over keys [0, kn) of the tile: key
 * outer, so the R x CB accumulators are independent FMA chains (one chain
 * per 16 dims ran at the FMA latency) */
static inline __attribute__((always_inline)) void pv_block(const int R, const int CB, float *O,
                                                           int64_t D, int64_t c0, const float *corr,
                                                           const float *P, int64_t ldp,
                                                           const void *v, bool f16, int64_t voff,
                                                           int64_t vld, int64_t kn)
{
    __m512 o[DEC_MAXR][8];
    for (int r = 0; r < R; r++)
        for (int u = 0; u < CB; u++)
            o[r][u] =
                _mm512_mul_ps(_mm512_loadu_ps(O + r * D + 16 * (c0 + u)), _mm512_set1_ps(corr[r]));
    for (int64_t j = 0; j < kn; j++) {
        const int64_t row = voff + j * vld + 16 * c0;
        for (int u = 0; u < CB; u++) {
            __m512 vv = kv16(v, f16, row + 16 * u);
            for (int r = 0; r < R; r++)
                o[r][u] = _mm512_fmadd_ps(_mm512_set1_ps(P[r * ldp + j]), vv, o[r][u]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int u = 0; u < CB; u++)
            _mm512_storeu_ps(O + r * D + 16 * (c0 + u), o[r][u]);
}
#define DEC_MAXC 16 /* head_dim / 16 */
#define DEC_TILE 64 /* keys per online-softmax step */

/* Rows r < R: head h0 + r / nq, query q0 + r % nq, all of KV head kvh. Per
 * key tile: scores of 4 keys against the R rows at a time (each K load
 * feeding R FMAs, four keys summed in one pass), the rows' running max and
 * sum, then P V with each V load feeding R FMAs into O held per 16 dims.
 * Memory-bound over a long cache; the portable group tile it replaces ran
 * at about a fifth of that. */
static inline __attribute__((always_inline)) void attn_decode_rows(const int R,
                                                                   const rlx_cpu_attn_params *p,
                                                                   int64_t h0, int64_t nq,
                                                                   int64_t q0, float *scratch)
{
    const int64_t D = p->head_dim, C = D / 16;
    const int64_t group = p->n_heads / p->n_kv_heads, kvh = h0 / group;
    const bool f16 = p->kv_type == RLX_DTYPE_F16;
    float *Q = scratch;          /* R x D, scaled */
    float *O = Q + DEC_MAXR * D; /* R x D */
    float *S = O + DEC_MAXR * D; /* R x DEC_TILE scores, then probabilities */
    float m[DEC_MAXR], l[DEC_MAXR];
    int64_t lo_r[DEC_MAXR], hi_r[DEC_MAXR]; /* visible keys per row */
    const bool causal = p->mask == RLX_CPU_ATTN_CAUSAL || p->mask == RLX_CPU_ATTN_SLIDING;
    int64_t lo = p->n_kv, hi = 0;
    for (int r = 0; r < R; r++) {
        const int64_t h = h0 + r / nq, qi = q0 + r % nq;
        const float *q = p->q + qi * p->q_ld_tok + h * p->q_ld_head;
        const __m512 sc = _mm512_set1_ps(p->scale);
        for (int64_t c = 0; c < C; c++) {
            _mm512_storeu_ps(Q + r * D + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(q + 16 * c), sc));
            _mm512_storeu_ps(O + r * D + 16 * c, _mm512_setzero_ps());
        }
        m[r] = -INFINITY;
        l[r] = 0.0f;
        int64_t a = 0, b = p->n_kv;
        if (causal) {
            int64_t pos = p->q_pos0 + qi;
            b = pos + 1 < b ? pos + 1 : b;
            if (p->mask == RLX_CPU_ATTN_SLIDING && pos - p->window + 1 > a)
                a = pos - p->window + 1;
        }
        lo_r[r] = a;
        hi_r[r] = b;
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
    }
    const int64_t kld = p->k_ld_tok, vld = p->v_ld_tok;
    const int64_t kh = kvh * p->k_ld_head, vh = kvh * p->v_ld_head;
    const bool pf = hi - lo >= 512;
    for (int64_t t0 = lo; t0 < hi; t0 += DEC_TILE) {
        const int64_t kn = hi - t0 < DEC_TILE ? hi - t0 : DEC_TILE;
        /* scores, four keys at a time (past kn: the last key again) */
        for (int64_t j = 0; j < kn; j += 4) {
            int64_t ko[4];
            for (int u = 0; u < 4; u++)
                ko[u] = (t0 + (j + u < kn ? j + u : kn - 1)) * kld + kh;
            /* Over a long cache the K and V rows come from DRAM: ask for
             * the tile's V rows, which P V reads next, and the next tile's
             * K rows while these are scored. Every line of both, or the
             * hardware prefetchers lose the streams: asking for only the
             * V rows, or only each row's first line, ran 40-60% slower than
             * no prefetches. From a cache held in L3 the requests cost about
             * 40%, so a cache shorter than 512 keys goes without: a step of
             * a small model then reads a few tens of MB of K and V, much of
             * it from L3 (Qwen3-0.6B: 29 MB at 256 keys). */
            for (int u = 0; pf && u < 4; u++) {
                if (j + u < kn)
                    kv_row_prefetch(p->v, f16, (t0 + j + u) * vld + vh, D);
                if (t0 + DEC_TILE + j + u < hi)
                    kv_row_prefetch(p->k, f16, (t0 + DEC_TILE + j + u) * kld + kh, D);
            }
            __m512 acc[DEC_MAXR][4];
            for (int r = 0; r < R; r++)
                for (int u = 0; u < 4; u++)
                    acc[r][u] = _mm512_setzero_ps();
            for (int64_t c = 0; c < C; c++) {
                __m512 k0 = kv16(p->k, f16, ko[0] + 16 * c), k1 = kv16(p->k, f16, ko[1] + 16 * c);
                __m512 k2 = kv16(p->k, f16, ko[2] + 16 * c), k3 = kv16(p->k, f16, ko[3] + 16 * c);
                for (int r = 0; r < R; r++) {
                    __m512 qv = _mm512_loadu_ps(Q + r * D + 16 * c);
                    acc[r][0] = _mm512_fmadd_ps(qv, k0, acc[r][0]);
                    acc[r][1] = _mm512_fmadd_ps(qv, k1, acc[r][1]);
                    acc[r][2] = _mm512_fmadd_ps(qv, k2, acc[r][2]);
                    acc[r][3] = _mm512_fmadd_ps(qv, k3, acc[r][3]);
                }
            }
            for (int r = 0; r < R; r++)
                _mm_storeu_ps(S + r * DEC_TILE + j,
                              sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
        }
        /* masks, running max and sum, probabilities */
        float corr[DEC_MAXR];
        for (int r = 0; r < R; r++) {
            float *s = S + r * DEC_TILE;
            const int64_t a = lo_r[r] - t0, b = hi_r[r] - t0; /* visible: [a, b) of the tile */
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (int64_t j = 0; j < DEC_TILE; j += 16) {
                __m512i jj = _mm512_add_epi32(
                    _mm512_set1_epi32((int)j),
                    _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
                __mmask16 vis =
                    _mm512_cmpge_epi32_mask(jj, _mm512_set1_epi32((int)(a > 0 ? a : 0))) &
                    _mm512_cmplt_epi32_mask(jj, _mm512_set1_epi32((int)(b < kn ? b : kn)));
                __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), vis, s + j);
                _mm512_storeu_ps(s + j, v);
                mx = _mm512_max_ps(mx, v);
            }
            float mt = _mm512_reduce_max_ps(mx);
            float mn = mt > m[r] ? mt : m[r];
            if (mn == -INFINITY) { /* nothing visible yet: P = 0, O stays */
                corr[r] = 1.0f;
                for (int64_t j = 0; j < DEC_TILE; j += 16)
                    _mm512_storeu_ps(s + j, _mm512_setzero_ps());
                continue;
            }
            corr[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - mn);
            __m512 sum = _mm512_setzero_ps(), vm = _mm512_set1_ps(mn);
            for (int64_t j = 0; j < DEC_TILE; j += 16) {
                __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
                _mm512_storeu_ps(s + j, e);
                sum = _mm512_add_ps(sum, e);
            }
            l[r] = l[r] * corr[r] + _mm512_reduce_add_ps(sum);
            m[r] = mn;
        }
        /* O = O * corr + P V, blocks of 16-dim chunks held in registers */
        const int64_t voff = t0 * vld + vh;
        int64_t c0 = 0;
        if (R <= 2)
            for (; c0 + 8 <= C; c0 += 8)
                pv_block(R, 8, O, D, c0, corr, S, DEC_TILE, p->v, f16, voff, vld, kn);
        for (; c0 + 4 <= C; c0 += 4)
            pv_block(R, 4, O, D, c0, corr, S, DEC_TILE, p->v, f16, voff, vld, kn);
        for (; c0 + 2 <= C; c0 += 2)
            pv_block(R, 2, O, D, c0, corr, S, DEC_TILE, p->v, f16, voff, vld, kn);
        for (; c0 < C; c0++)
            pv_block(R, 1, O, D, c0, corr, S, DEC_TILE, p->v, f16, voff, vld, kn);
    }
    for (int r = 0; r < R; r++) {
        const int64_t h = h0 + r / nq, qi = q0 + r % nq;
        float *o = p->out + qi * p->o_ld_tok + h * p->o_ld_head;
        const __m512 il = _mm512_set1_ps(l[r] > 0.0f ? 1.0f / l[r] : 0.0f);
        for (int64_t c = 0; c < C; c++)
            _mm512_storeu_ps(o + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(O + r * D + 16 * c), il));
    }
}

/* heads [h0, h0 + nh) of one KV head x queries [q0, q0 + nq), nh * nq <= 4 */
static void attn_decode_pf(const rlx_cpu_attn_params *p, int64_t h0, int64_t nh, int64_t q0,
                           int64_t nq, float *scratch)
{
    switch (nh * nq) {
    case 1:
        attn_decode_rows(1, p, h0, nq, q0, scratch);
        break;
    case 2:
        attn_decode_rows(2, p, h0, nq, q0, scratch);
        break;
    case 3:
        attn_decode_rows(3, p, h0, nq, q0, scratch);
        break;
    default:
        attn_decode_rows(4, p, h0, nq, q0, scratch);
        break;
    }
}

void rlx_cpu_fill_attn_avx512(rlx_cpu_table *t)
{
    t->attn_prefill = attn_tile_pf;
    t->attn_decode = attn_decode_pf;
}
