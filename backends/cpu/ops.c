/* Threaded drivers for the f32 kernels in vec-ops.c (norms, softmax,
 * attention, activations) plus rope and convolution, which are light enough
 * not to need per-ISA builds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/kernels-internal.h"

/* Rows per task so one task handles at least ~8K elements. */
static int64_t rows_per_task(int64_t n_rows, int64_t n_cols, int nth)
{
    /* a decode step's per-head norms (16 rows of 128) are less work than
     * waking the pool and meeting at its barrier: one task, on the caller */
    if (n_rows * n_cols <= 16384)
        return n_rows > 0 ? n_rows : 1;
    int64_t r = 8192 / (n_cols > 0 ? n_cols : 1);
    if (r < 1)
        r = 1;
    int64_t even = (n_rows + nth * 4 - 1) / (nth * 4);
    if (r > even)
        r = even > 0 ? even : 1;
    return r;
}

/* ------------------------------------------------------------- norms */

typedef struct {
    const rlx_cpu_table *t;
    const float *x, *w, *b;
    float *y;
    int64_t ldx, ldy, n_rows, n_cols, rpt;
    float eps, scale, softcap;
    const float *mask;
    int64_t ld_mask;
    const float *x2; /* ROWS_ADD_RMS: the second addend */
    float *s;        /* ROWS_ADD_RMS: where the sum goes (NULL: into y) */
    int64_t ldx2, lds;
    int kind;
} rows_ctx;

enum { ROWS_RMS, ROWS_LN, ROWS_SOFTMAX, ROWS_ADD_RMS };

static void rows_task(void *vc, int64_t task, int thread)
{
    const rows_ctx *c = vc;
    int64_t r0 = task * c->rpt, r1 = r0 + c->rpt < c->n_rows ? r0 + c->rpt : c->n_rows;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * c->ldx;
        float *y = c->y + r * c->ldy;
        switch (c->kind) {
        case ROWS_ADD_RMS: {
            const float *b = c->x2 + r * c->ldx2;
            float *s = c->s ? c->s + r * c->lds : y;
            for (int64_t j = 0; j < c->n_cols; j++)
                s[j] = x[j] + b[j];
            c->t->vec.rms_norm_row(s, y, c->n_cols, c->w, c->eps);
            break;
        }
        case ROWS_RMS:
            c->t->vec.rms_norm_row(x, y, c->n_cols, c->w, c->eps);
            break;
        case ROWS_LN:
            c->t->vec.layer_norm_row(x, y, c->n_cols, c->w, c->b, c->eps);
            break;
        default:
            c->t->vec.softmax_row(x, y, c->n_cols, c->scale,
                                  c->mask ? c->mask + r * c->ld_mask : NULL, c->softcap);
            break;
        }
    }
}

static void run_rows(rlx_threadpool *pool, rows_ctx *c)
{
    if (c->n_rows <= 0 || c->n_cols <= 0)
        return;
    c->t = rlx_cpu_table_get();
    c->rpt = rows_per_task(c->n_rows, c->n_cols, rlx_threadpool_size(pool));
    rlx_parallel_for(pool, (c->n_rows + c->rpt - 1) / c->rpt, rows_task, c);
}

void rlx_cpu_rms_norm(rlx_threadpool *pool, const float *x, int64_t ldx, float *y, int64_t ldy,
                      int64_t n_rows, int64_t n_cols, const float *w, float eps)
{
    rows_ctx c = {.x = x,
                  .ldx = ldx,
                  .y = y,
                  .ldy = ldy,
                  .n_rows = n_rows,
                  .n_cols = n_cols,
                  .w = w,
                  .eps = eps,
                  .kind = ROWS_RMS};
    run_rows(pool, &c);
}

void rlx_cpu_add_rms_norm(rlx_threadpool *pool, const float *a, int64_t lda, const float *b,
                          int64_t ldb, float *sum, int64_t lds, float *y, int64_t ldy,
                          int64_t n_rows, int64_t n_cols, const float *w, float eps)
{
    rows_ctx c = {.x = a,
                  .ldx = lda,
                  .x2 = b,
                  .ldx2 = ldb,
                  .s = sum,
                  .lds = lds,
                  .y = y,
                  .ldy = ldy,
                  .n_rows = n_rows,
                  .n_cols = n_cols,
                  .w = w,
                  .eps = eps,
                  .kind = ROWS_ADD_RMS};
    run_rows(pool, &c);
}

void rlx_cpu_layer_norm(rlx_threadpool *pool, const float *x, int64_t ldx, float *y, int64_t ldy,
                        int64_t n_rows, int64_t n_cols, const float *w, const float *b, float eps)
{
    rows_ctx c = {.x = x,
                  .ldx = ldx,
                  .y = y,
                  .ldy = ldy,
                  .n_rows = n_rows,
                  .n_cols = n_cols,
                  .w = w,
                  .b = b,
                  .eps = eps,
                  .kind = ROWS_LN};
    run_rows(pool, &c);
}

void rlx_cpu_softmax(rlx_threadpool *pool, const float *x, int64_t ldx, float *y, int64_t ldy,
                     int64_t n_rows, int64_t n_cols, float scale, const float *mask,
                     int64_t ld_mask, float softcap)
{
    rows_ctx c = {.x = x,
                  .ldx = ldx,
                  .y = y,
                  .ldy = ldy,
                  .n_rows = n_rows,
                  .n_cols = n_cols,
                  .scale = scale,
                  .mask = mask,
                  .ld_mask = ld_mask,
                  .softcap = softcap,
                  .kind = ROWS_SOFTMAX};
    run_rows(pool, &c);
}

typedef struct {
    const float *x, *w, *b;
    float *y;
    int64_t c, hw, groups;
    float eps;
} gn_ctx;

static void gn_task(void *vc, int64_t task, int thread)
{
    const gn_ctx *g = vc;
    int64_t n = task / g->groups, grp = task % g->groups;
    int64_t cg = g->c / g->groups;
    int64_t base = (n * g->c + grp * cg) * g->hw;
    const float *x = g->x + base;
    float *y = g->y + base;
    int64_t cnt = cg * g->hw;
    double s = 0.0, v = 0.0;
    for (int64_t i = 0; i < cnt; i++)
        s += x[i];
    double mean = s / (double)cnt;
    for (int64_t i = 0; i < cnt; i++)
        v += (x[i] - mean) * (x[i] - mean);
    float r = (float)(1.0 / sqrt(v / (double)cnt + g->eps));
    float fm = (float)mean;
    for (int64_t ch = 0; ch < cg; ch++) {
        int64_t cidx = grp * cg + ch;
        float sc = r * (g->w ? g->w[cidx] : 1.0f);
        float sh = (g->b ? g->b[cidx] : 0.0f) - fm * sc;
        const float *xc = x + ch * g->hw;
        float *yc = y + ch * g->hw;
        for (int64_t i = 0; i < g->hw; i++)
            yc[i] = xc[i] * sc + sh;
    }
}

void rlx_cpu_group_norm(rlx_threadpool *pool, const float *x, float *y, int64_t n, int64_t c,
                        int64_t hw, int64_t n_groups, const float *w, const float *b, float eps)
{
    if (n <= 0 || c <= 0 || hw <= 0 || n_groups <= 0 || c % n_groups)
        return;
    gn_ctx g = {.x = x, .w = w, .b = b, .y = y, .c = c, .hw = hw, .groups = n_groups, .eps = eps};
    rlx_parallel_for(pool, n * n_groups, gn_task, &g);
}

/* -------------------------------------------------------------- rope */

rlx_cpu_rope_params rlx_cpu_rope_default_params(void)
{
    return (rlx_cpu_rope_params){
        .mode = RLX_CPU_ROPE_NORMAL,
        .n_rot = 0,
        .freq_base = 10000.0f,
        .freq_scale = 1.0f,
        .freq_factors = NULL,
        .attn_factor = 1.0f,
    };
}

#define ROPE_TOKENS_PER_TASK 8
#define ROPE_MAX_PAIRS       1024

static bool rope_params_ok(const rlx_cpu_rope_params *p, int64_t head_dim)
{
    return p && p->n_rot > 0 && p->n_rot % 2 == 0 && p->n_rot <= head_dim &&
           p->n_rot / 2 <= ROPE_MAX_PAIRS;
}

/* each pair's frequency: freq_base^(-2i/n_rot) / (freq_factors ? ff[i] : 1) */
static void rope_inv_freq(const rlx_cpu_rope_params *p, double *inv_freq)
{
    for (int i = 0; i < p->n_rot / 2; i++) {
        double f = pow((double)p->freq_base, -2.0 * i / (double)p->n_rot);
        if (p->freq_factors)
            f /= p->freq_factors[i];
        inv_freq[i] = f;
    }
}

/* cos and sin (times attn_factor) of one token's angles; the angle is taken
 * in double, as positions reach tens of thousands of radians */
static void rope_angles(const rlx_cpu_rope_params *p, const double *inv_freq, int32_t pos,
                        float *cs, float *sn)
{
    const double pt = (double)pos * p->freq_scale;
    for (int i = 0; i < p->n_rot / 2; i++) {
        double a = pt * inv_freq[i];
        cs[i] = (float)cos(a) * p->attn_factor;
        sn[i] = (float)sin(a) * p->attn_factor;
    }
}

/* one token's heads rotated by its cos/sin */
static void rope_token(const rlx_cpu_rope_params *p, const float *cs, const float *sn,
                       const float *x, int64_t ld_head, float *y, int64_t ldy_head, int64_t n_heads,
                       int64_t head_dim)
{
    const int half = p->n_rot / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        const float *xh = x + h * ld_head;
        float *yh = y + h * ldy_head;
        if (p->mode == RLX_CPU_ROPE_NEOX) {
            for (int i = 0; i < half; i++) {
                float a = xh[i], b = xh[i + half];
                yh[i] = a * cs[i] - b * sn[i];
                yh[i + half] = a * sn[i] + b * cs[i];
            }
        } else {
            for (int i = 0; i < half; i++) {
                float a = xh[2 * i], b = xh[2 * i + 1];
                yh[2 * i] = a * cs[i] - b * sn[i];
                yh[2 * i + 1] = a * sn[i] + b * cs[i];
            }
        }
        if (xh != yh)
            for (int64_t d = p->n_rot; d < head_dim; d++)
                yh[d] = xh[d];
    }
}

typedef struct {
    const rlx_cpu_rope_params *p;
    const float *x;
    float *y;
    int64_t ld_tok, ld_head, ldy_tok, ldy_head, n_tokens, n_heads, head_dim;
    const int32_t *pos;
    const float *table; /* NULL: each token's angles computed in its task */
    float *table_out;   /* rlx_cpu_rope_table's output */
    const double *inv_freq;
} rope_ctx;

static void rope_task(void *vc, int64_t task, int thread)
{
    (void)thread;
    const rope_ctx *c = vc;
    const rlx_cpu_rope_params *p = c->p;
    const int half = p->n_rot / 2;
    float cs[ROPE_MAX_PAIRS], sn[ROPE_MAX_PAIRS];
    int64_t t0 = task * ROPE_TOKENS_PER_TASK;
    int64_t t1 = t0 + ROPE_TOKENS_PER_TASK < c->n_tokens ? t0 + ROPE_TOKENS_PER_TASK : c->n_tokens;
    for (int64_t t = t0; t < t1; t++) {
        if (c->table_out) {
            float *row = c->table_out + t * p->n_rot;
            rope_angles(p, c->inv_freq, c->pos[t], row, row + half);
            continue;
        }
        const float *tc = cs, *ts = sn;
        if (c->table) {
            tc = c->table + t * p->n_rot;
            ts = tc + half;
        } else {
            rope_angles(p, c->inv_freq, c->pos[t], cs, sn);
        }
        rope_token(p, tc, ts, c->x + t * c->ld_tok, c->ld_head, c->y + t * c->ldy_tok, c->ldy_head,
                   c->n_heads, c->head_dim);
    }
}

static void rope_run(rlx_threadpool *pool, const rope_ctx *c)
{
    rlx_parallel_for(pool, (c->n_tokens + ROPE_TOKENS_PER_TASK - 1) / ROPE_TOKENS_PER_TASK,
                     rope_task, (void *)c);
}

/* heads turned by the angles of `table`, or (table NULL) of `pos` */
static void rope_heads(rlx_threadpool *pool, const rlx_cpu_rope_params *p, const float *x,
                       int64_t ld_tok, int64_t ld_head, float *y, int64_t ldy_tok, int64_t ldy_head,
                       int64_t n_tokens, int64_t n_heads, int64_t head_dim, const float *table,
                       const int32_t *pos)
{
    if (!rope_params_ok(p, head_dim) || n_tokens <= 0 || n_heads <= 0)
        return;
    double inv_freq[ROPE_MAX_PAIRS];
    rope_ctx c = {.p = p,
                  .x = x,
                  .y = y,
                  .ld_tok = ld_tok,
                  .ld_head = ld_head,
                  .ldy_tok = ldy_tok,
                  .ldy_head = ldy_head,
                  .n_tokens = n_tokens,
                  .n_heads = n_heads,
                  .head_dim = head_dim,
                  .pos = pos,
                  .table = table,
                  .inv_freq = inv_freq};
    if (!table)
        rope_inv_freq(p, inv_freq);
    rope_run(pool, &c);
}

void rlx_cpu_rope(rlx_threadpool *pool, const rlx_cpu_rope_params *p, const float *x,
                  int64_t ld_tok, int64_t ld_head, float *y, int64_t ldy_tok, int64_t ldy_head,
                  int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t *pos)
{
    rope_heads(pool, p, x, ld_tok, ld_head, y, ldy_tok, ldy_head, n_tokens, n_heads, head_dim, NULL,
               pos);
}

void rlx_cpu_rope_table(rlx_threadpool *pool, const rlx_cpu_rope_params *p, const int32_t *pos,
                        int64_t n_tokens, float *table)
{
    if (!rope_params_ok(p, p ? p->n_rot : 0) || n_tokens <= 0)
        return;
    double inv_freq[ROPE_MAX_PAIRS];
    rope_ctx c = {
        .p = p, .n_tokens = n_tokens, .pos = pos, .table_out = table, .inv_freq = inv_freq};
    rope_inv_freq(p, inv_freq);
    rope_run(pool, &c);
}

void rlx_cpu_rope_apply(rlx_threadpool *pool, const rlx_cpu_rope_params *p, const float *table,
                        const float *x, int64_t ld_tok, int64_t ld_head, float *y, int64_t ldy_tok,
                        int64_t ldy_head, int64_t n_tokens, int64_t n_heads, int64_t head_dim)
{
    if (!table)
        return;
    rope_heads(pool, p, x, ld_tok, ld_head, y, ldy_tok, ldy_head, n_tokens, n_heads, head_dim,
               table, NULL);
}

/* ---------------------------------------------------------- attention */

typedef struct {
    const rlx_cpu_attn_params *p;
    rlx_attn_tile_fn tile;
    rlx_attn_group_fn group;  /* one task per KV head */
    rlx_attn_group_fn decode; /* tasks of dec_heads heads x all n_q queries */
    int64_t dec_heads;
    rlx_attn_group_fn prefill; /* tasks of pf_heads heads x one block of query tiles */
    int64_t pf_heads;
    float *scratch;
    size_t per_thread;
    int64_t q_tiles;
} attn_ctx;

static void attn_task(void *vc, int64_t task, int thread)
{
    const attn_ctx *c = vc;
    if (c->decode) {
        c->decode(c->p, task * c->dec_heads, c->dec_heads, 0, c->p->n_q,
                  c->scratch + (size_t)thread * c->per_thread);
        return;
    }
    if (c->group) {
        int64_t g = c->p->n_heads / c->p->n_kv_heads;
        c->group(c->p, task * g, g, 0, c->p->n_q, c->scratch + (size_t)thread * c->per_thread);
        return;
    }
    /* query tiles of 16, or blocks of RLX_ATTN_PF_TILES of them */
    const int64_t span = c->prefill ? RLX_ATTN_PF_TILES * RLX_ATTN_BQ : RLX_ATTN_BQ;
    int64_t h = task / c->q_tiles, qt = task % c->q_tiles;
    int64_t q0 = qt * span;
    int64_t nq = c->p->n_q - q0 < span ? c->p->n_q - q0 : span;
    float *scratch = c->scratch + (size_t)thread * c->per_thread;
    if (c->prefill)
        c->prefill(c->p, h * c->pf_heads, c->pf_heads, q0, nq, scratch);
    else
        c->tile(c->p, h, q0, nq, scratch);
}

size_t rlx_cpu_attention_scratch_bytes(const rlx_cpu_attn_params *p, int n_threads)
{
    if (!p || p->head_dim <= 0 || n_threads < 1)
        return 0;
    size_t per = (rlx_attn_tile_scratch_floats(p->head_dim) + 15) & ~(size_t)15;
    return per * sizeof(float) * (size_t)n_threads + 64;
}

rlx_status rlx_cpu_attention(rlx_threadpool *pool, const rlx_cpu_attn_params *p, void *scratch,
                             size_t scratch_bytes)
{
    if (!p || p->n_q < 0 || p->n_kv < 0 || p->n_heads <= 0 || p->n_kv_heads <= 0 ||
        p->head_dim <= 0 || p->n_heads % p->n_kv_heads || !p->q || !p->out ||
        (p->kv_type != RLX_DTYPE_F32 && p->kv_type != RLX_DTYPE_F16 &&
         p->kv_type != RLX_DTYPE_Q8_0) ||
        (p->mask == RLX_CPU_ATTN_BIAS && !p->bias) ||
        (p->mask == RLX_CPU_ATTN_SLIDING && p->window <= 0))
        return RLX_ERR_INVALID_ARG;
    if (p->n_q == 0)
        return RLX_OK;
    if (p->n_kv > 0 && (!p->k || !p->v))
        return RLX_ERR_INVALID_ARG;
    int nth = rlx_threadpool_size(pool);
    size_t need = rlx_cpu_attention_scratch_bytes(p, nth);
    void *owned = NULL;
    if (!scratch) {
        owned = aligned_alloc(64, (need + 63) & ~(size_t)63);
        if (!owned)
            return RLX_ERR_NO_MEMORY;
        scratch = owned;
    } else if (scratch_bytes < need) {
        return RLX_ERR_INVALID_ARG;
    }
    attn_ctx c = {
        .p = p,
        .tile = rlx_cpu_table_get()->vec.attn_tile,
        .scratch = scratch,
        .per_thread = (rlx_attn_tile_scratch_floats(p->head_dim) + 15) & ~(size_t)15,
        .q_tiles = (p->n_q + RLX_ATTN_BQ - 1) / RLX_ATTN_BQ,
    };
    const rlx_cpu_table *t = rlx_cpu_table_get();
    const int64_t group = p->n_heads / p->n_kv_heads;
    if (t->attn_prefill && p->n_q > 1 && p->head_dim % 16 == 0 && p->softcap <= 0.0f &&
        (p->kv_type == RLX_DTYPE_F32 || p->kv_type == RLX_DTYPE_F16)) {
        /* two heads of a KV head per task where the group pairs up: each
         * K/V tile widened once for both, each broadcast feeding two FMAs */
        c.prefill = t->attn_prefill;
        c.pf_heads = group % 2 == 0 ? 2 : 1;
        c.q_tiles =
            (p->n_q + RLX_ATTN_PF_TILES * RLX_ATTN_BQ - 1) / (RLX_ATTN_PF_TILES * RLX_ATTN_BQ);
        rlx_parallel_for(pool, p->n_heads / c.pf_heads * c.q_tiles, attn_task, &c);
        free(owned);
        return RLX_OK;
    }
    /* decode (up to 4 queries): up to 4 query rows of one KV head per task,
     * each K/V row read and widened once for all of them */
    if (t->attn_decode && p->n_q <= 4 && p->head_dim % 16 == 0 && p->head_dim <= 256 &&
        p->softcap <= 0.0f && p->mask != RLX_CPU_ATTN_BIAS &&
        (p->kv_type == RLX_DTYPE_F32 || p->kv_type == RLX_DTYPE_F16)) {
        int64_t hp = 4 / p->n_q; /* heads per task: the largest divisor of group that fits */
        while (group % hp)
            hp--;
        c.decode = t->attn_decode;
        c.dec_heads = hp;
        rlx_parallel_for(pool, p->n_heads / hp, attn_task, &c);
        free(owned);
        return RLX_OK;
    }
    /* decode (a few queries) with grouped-query attention: the heads of a
     * KV head in one task, each K/V row read and widened once */
    if (group > 1 && p->n_q * group <= RLX_ATTN_BQ && t->vec.attn_group) {
        c.group = t->vec.attn_group;
        rlx_parallel_for(pool, p->n_kv_heads, attn_task, &c);
    } else {
        rlx_parallel_for(pool, (int64_t)p->n_heads * c.q_tiles, attn_task, &c);
    }
    free(owned);
    return RLX_OK;
}

/* -------------------------------------------------------- activations */

void rlx_cpu_act(rlx_cpu_act_kind a, const float *x, float *y, int64_t n)
{
    if (n > 0)
        rlx_cpu_table_get()->vec.act(a, x, y, n);
}

void rlx_cpu_act_gated(rlx_cpu_act_kind a, const float *g, const float *u, float *y, int64_t n)
{
    if (n > 0)
        rlx_cpu_table_get()->vec.act_gated(a, g, u, y, n);
}

typedef struct {
    rlx_cpu_act_kind a;
    const float *x;
    float *y;
    int64_t n;
} act_ctx;

#define ACT_CHUNK 16384

static void act_task(void *vc, int64_t task, int thread)
{
    const act_ctx *c = vc;
    int64_t i0 = task * ACT_CHUNK, len = c->n - i0 < ACT_CHUNK ? c->n - i0 : ACT_CHUNK;
    rlx_cpu_table_get()->vec.act(c->a, c->x + i0, c->y + i0, len);
}

void rlx_cpu_act_pool(rlx_threadpool *pool, rlx_cpu_act_kind a, const float *x, float *y, int64_t n)
{
    if (n <= 0)
        return;
    act_ctx c = {.a = a, .x = x, .y = y, .n = n};
    rlx_parallel_for(pool, (n + ACT_CHUNK - 1) / ACT_CHUNK, act_task, &c);
}

/* -------------------------------------------------------- convolution */

/* im2col band size in floats (8 MB) */
#define CONV_COL_FLOATS ((int64_t)1 << 21)

rlx_cpu_conv2d_params rlx_cpu_conv2d_default_params(void)
{
    return (rlx_cpu_conv2d_params){
        .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .groups = 1, .wino = true};
}

int64_t rlx_cpu_conv2d_out_h(const rlx_cpu_conv2d_params *p)
{
    if (p->stride_h <= 0 || p->dil_h <= 0)
        return 0;
    return (p->h_in + 2 * p->pad_h - p->dil_h * (p->kh - 1) - 1) / p->stride_h + 1;
}

int64_t rlx_cpu_conv2d_out_w(const rlx_cpu_conv2d_params *p)
{
    if (p->stride_w <= 0 || p->dil_w <= 0)
        return 0;
    return (p->w_in + 2 * p->pad_w - p->dil_w * (p->kw - 1) - 1) / p->stride_w + 1;
}

int64_t rlx_cpu_conv_transpose2d_out_h(const rlx_cpu_conv2d_params *p)
{
    return (p->h_in - 1) * p->stride_h - 2 * p->pad_h + p->dil_h * (p->kh - 1) + p->out_pad_h + 1;
}

int64_t rlx_cpu_conv_transpose2d_out_w(const rlx_cpu_conv2d_params *p)
{
    return (p->w_in - 1) * p->stride_w - 2 * p->pad_w + p->dil_w * (p->kw - 1) + p->out_pad_w + 1;
}

static bool conv_params_ok(const rlx_cpu_conv2d_params *p)
{
    return p->n > 0 && p->c_in > 0 && p->h_in > 0 && p->w_in > 0 && p->c_out > 0 && p->kh > 0 &&
           p->kw > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dil_h > 0 && p->dil_w > 0 &&
           p->pad_h >= 0 && p->pad_w >= 0 && p->groups > 0 && p->c_in % p->groups == 0 &&
           p->c_out % p->groups == 0 && p->out_pad_h >= 0 && p->out_pad_w >= 0;
}

typedef struct {
    const rlx_cpu_conv2d_params *p;
    const float *x; /* one group of one image: cg x H x W */
    float *col;     /* (cg*kh*kw) x (band*wo) */
    float *y;       /* transposed: output channels of this group */
    int64_t ho, wo, cg;
    int64_t oh0, band; /* output rows [oh0, oh0 + band) */
    const float *bias;
} im2col_ctx;

/* One row of the column buffer (input channel ch, tap ki, kj) over the
 * band's output rows. The output columns whose tap lands inside the input
 * row are one interval [lo, hi), the same on every row: the rest is padding,
 * written as zeros, and the interval is a plain copy at stride 1 (most of
 * ISNet's and SAM's convs), with no per-element bounds test. */
static void im2col_task(void *vc, int64_t row, int thread)
{
    (void)thread;
    const im2col_ctx *c = vc;
    const rlx_cpu_conv2d_params *p = c->p;
    int64_t ch = row / (p->kh * p->kw), ki = (row / p->kw) % p->kh, kj = row % p->kw;
    const float *xc = c->x + ch * p->h_in * p->w_in;
    float *dst = c->col + row * c->band * c->wo;
    int64_t sw = p->stride_w, wo = c->wo;
    int64_t off = kj * p->dil_w - p->pad_w; /* iw = ow * sw + off */
    int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int64_t hi = p->w_in - 1 - off >= 0 ? (p->w_in - 1 - off) / sw + 1 : 0;
    hi = hi < wo ? hi : wo;
    lo = lo < hi ? lo : hi;
    for (int64_t oh = c->oh0; oh < c->oh0 + c->band; oh++) {
        int64_t ih = oh * p->stride_h - p->pad_h + ki * p->dil_h;
        float *d = dst + (oh - c->oh0) * wo;
        if (ih < 0 || ih >= p->h_in) {
            memset(d, 0, (size_t)wo * sizeof(float));
            continue;
        }
        const float *src = xc + ih * p->w_in;
        if (lo > 0)
            memset(d, 0, (size_t)lo * sizeof(float));
        if (sw == 1) {
            if (hi > lo)
                memcpy(d + lo, src + lo + off, (size_t)(hi - lo) * sizeof(float));
        } else {
            for (int64_t ow = lo; ow < hi; ow++)
                d[ow] = src[ow * sw + off];
        }
        if (hi < wo)
            memset(d + hi, 0, (size_t)(wo - hi) * sizeof(float));
    }
}

typedef struct {
    float *y;
    const float *bias; /* or NULL */
    int64_t c_out, hw;
    bool relu;
} bias_ctx;

/* y += bias, then ReLU where asked, over one output plane. */
static void bias_relu(float *y, int64_t n, float b, bool relu)
{
    if (relu)
        for (int64_t i = 0; i < n; i++) {
            float v = y[i] + b;
            y[i] = v > 0.0f ? v : 0.0f;
        }
    else
        for (int64_t i = 0; i < n; i++)
            y[i] += b;
}

static void bias_task(void *vc, int64_t plane, int thread)
{
    (void)thread;
    const bias_ctx *c = vc;
    bias_relu(c->y + plane * c->hw, c->hw, c->bias ? c->bias[plane % c->c_out] : 0.0f, c->relu);
}

/* ---- implicit GEMM: the conv as weights x im2col(x), with no column
 * buffer: the micro-kernel reads the rows of a B panel (32 output pixels)
 * in place in the input where they lie inside it, and the rest are packed
 * into a small per-thread panel; the weights are packed once per conv for
 * every thread. */

#define IG_NR RLX_GEMM_NR
#define IG_KC 256 /* rows of k per block: a B panel (KC x NR) stays in L1 */
#define IG_NC 512 /* columns per step of a task's loop over its band */

typedef struct {
    const rlx_cpu_conv2d_params *p;
    const float *x, *bias;
    float *y;
    const float *ap; /* per group: per k block, ceil(og/MR) panels of kc x MR */
    size_t ap_group; /* floats per group */
    float *bp;       /* per thread: one panel of IG_KC x NR */
    size_t bp_stride;
    int64_t ho, wo, cg, og, kdim, band, n_bands;
    int64_t mr;              /* rows per A panel: RLX_GEMM_MR, or 8 where that leaves fewer empty */
    int64_t n_mc, mc_panels; /* tasks per band: chunks of MR-row panels of the weights */
    const struct igemm_krow *krow; /* per k row of the GEMM, where it reads the input */
    rlx_gemm_ukernel_rows_fn uk_rows;
    void (*pack_run)(float *d, const float *s, int64_t n, int64_t a, int64_t b);
    bool relu;
} igemm_ctx;

/* Row k of the implicit im2col matrix (input channel ch, tap ki, kj): the
 * channel's plane, the input row of output row oh (oh * stride_h + dy), the
 * input column of output column ow (ow * stride_w + off), and the output
 * columns [lo, hi) that land inside the input; computed once per conv, as
 * the divisions that find (ch, ki, kj) cost more than the copies they serve. */
typedef struct igemm_krow {
    int64_t plane, dy, off, lo, hi;
} igemm_krow;

/* Weights of one group [og][kdim] into k blocks of MR-row panels. */
static void igemm_pack_a(const float *w, int64_t og, int64_t kdim, int64_t mr, float *dst)
{
    for (int64_t k0 = 0; k0 < kdim; k0 += IG_KC) {
        int64_t kc = kdim - k0 < IG_KC ? kdim - k0 : IG_KC;
        for (int64_t i0 = 0; i0 < og; i0 += mr) {
            for (int64_t k = 0; k < kc; k++)
                for (int64_t r = 0; r < mr; r++)
                    dst[k * mr + r] = i0 + r < og ? w[(i0 + r) * kdim + k0 + k] : 0.0f;
            dst += kc * mr;
        }
    }
}

/* A stretch of one output row inside one B panel: where its columns go in
 * the panel (before the k row's offset), how many, and its pixel (oh < 0:
 * columns past the band, zeros). */
typedef struct {
    int64_t dst, n, oh, ow;
} igemm_run;

#define IG_MAX_RUNS (IG_NC + 2 * (IG_NC / IG_NR) + 2)

/* A run of stride 1 is one masked vector op per half (pack_run, compiled
 * for the CPU's ISA: this file is built for the baseline); the others are
 * plain loops of at most NR floats: GCC would turn them into memset/memcpy
 * calls, which cost more than the copy at this length (13% of ISNet's time
 * went to memcpy's entry). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
static void
igemm_pack_rows(const igemm_ctx *c, const float *xg, const igemm_run *runs, int64_t n_runs,
                int64_t k0, int64_t kc, float *dst)
{
    const rlx_cpu_conv2d_params *p = c->p;
    int64_t sw = p->stride_w;
    for (int64_t kk = 0; kk < kc; kk++) {
        const igemm_krow *K = &c->krow[k0 + kk];
        const float *xc = xg + K->plane;
        int64_t off = K->off, lo = K->lo, hi = K->hi; /* iw = ow * sw + off */
        for (int64_t r = 0; r < n_runs; r++) {
            const igemm_run *R = &runs[r];
            float *d = dst + R->dst + kk * IG_NR;
            int64_t ih = R->oh * p->stride_h + K->dy;
            if (R->oh < 0 || ih < 0 || ih >= p->h_in) {
                c->pack_run(d, d, R->n, 0, 0); /* zeros */
                continue;
            }
            const float *src = xc + ih * p->w_in;
            int64_t ow = R->ow, e = ow + R->n;
            int64_t a = ow < lo ? lo : ow, b = e < hi ? e : hi;
            if (b < a)
                b = a = e < lo ? e : a;
            if (sw == 1) { /* one vector op per half of the run */
                c->pack_run(d, src + off + ow, R->n, a - ow, b - ow);
                continue;
            }
            for (int64_t t = ow; t < a; t++)
                d[t - ow] = 0.0f;
            for (int64_t t = a; t < b; t++)
                d[t - ow] = src[t * sw + off];
            for (int64_t t = b; t < e; t++)
                d[t - ow] = 0.0f;
        }
    }
}

/* Columns [c0, c0 + nc) of the band (pixels from output row oh0) for k rows
 * [k0, k0 + kc), as NR-wide panels of kc rows (columns past nc are zeros). */
static void igemm_pack_b(const igemm_ctx *c, const float *xg, int64_t oh0, int64_t c0, int64_t nc,
                         int64_t k0, int64_t kc, float *dst)
{
    igemm_run runs[IG_MAX_RUNS];
    int64_t n_runs = 0, wo = c->wo;
    int64_t npan = (nc + IG_NR - 1) / IG_NR;
    for (int64_t pj = 0; pj < npan && n_runs < IG_MAX_RUNS; pj++) {
        int64_t j = 0, col = c0 + pj * IG_NR, end = nc - pj * IG_NR;
        end = end < IG_NR ? end : IG_NR;
        while (j < end && n_runs < IG_MAX_RUNS) {
            int64_t ow = (col + j) % wo;
            int64_t run = wo - ow < end - j ? wo - ow : end - j; /* within one output row */
            runs[n_runs++] = (igemm_run){
                .dst = pj * kc * IG_NR + j, .n = run, .oh = oh0 + (col + j) / wo, .ow = ow};
            j += run;
        }
        if (end < IG_NR && n_runs < IG_MAX_RUNS)
            runs[n_runs++] =
                (igemm_run){.dst = pj * kc * IG_NR + end, .n = IG_NR - end, .oh = -1, .ow = 0};
    }
    igemm_pack_rows(c, xg, runs, n_runs, k0, kc, dst);
}

/* Where the micro-kernel reads the k rows [k0, k0 + kc) of the panel of
 * columns [col, col + nr): a panel of stride 1 within one output row reads
 * each row's NR floats in place where they lie inside the input row (the
 * interior of a map: most of them), and only the others (padding at the
 * edges, rows above or below the map) are packed, each into its own slot of
 * bp; any other panel is packed whole, as before. */
static void igemm_rows(const igemm_ctx *c, const float *xg, int64_t oh0, int64_t col, int64_t nr,
                       int64_t k0, int64_t kc, float *bp, const float **rows)
{
    const rlx_cpu_conv2d_params *p = c->p;
    int64_t oh = oh0 + col / c->wo, ow = col % c->wo;
    if (p->stride_w != 1 || nr != IG_NR || ow + IG_NR > c->wo) {
        igemm_pack_b(c, xg, oh0, col, nr, k0, kc, bp);
        for (int64_t kk = 0; kk < kc; kk++)
            rows[kk] = bp + kk * IG_NR;
        return;
    }
    for (int64_t kk = 0; kk < kc; kk++) {
        const igemm_krow *K = &c->krow[k0 + kk];
        int64_t ih = oh * p->stride_h + K->dy, s0 = ow + K->off;
        float *slot = bp + kk * IG_NR;
        if (ih < 0 || ih >= p->h_in) {
            c->pack_run(slot, slot, IG_NR, 0, 0); /* zeros */
            rows[kk] = slot;
            continue;
        }
        const float *src = xg + K->plane + ih * p->w_in + s0;
        if (s0 >= 0 && s0 + IG_NR <= p->w_in) {
            rows[kk] = src;
            continue;
        }
        int64_t a = s0 < 0 ? -s0 : 0, b = p->w_in - s0 < IG_NR ? p->w_in - s0 : IG_NR;
        c->pack_run(slot, src, IG_NR, a, b > a ? b : a);
        rows[kk] = slot;
    }
}

static void igemm_task(void *vc, int64_t task, int thread)
{
    const igemm_ctx *c = vc;
    const rlx_cpu_conv2d_params *p = c->p;
    int64_t mc = task % c->n_mc, rest = task / c->n_mc;
    int64_t b = rest % c->n_bands, ng = rest / c->n_bands;
    int64_t n = ng / p->groups, g = ng % p->groups;
    int64_t oh0 = b * c->band, nb = c->ho - oh0 < c->band ? c->ho - oh0 : c->band;
    int64_t hw = c->ho * c->wo, ncols = nb * c->wo;
    const float *xg = c->x + (n * p->c_in + g * c->cg) * p->h_in * p->w_in;
    float *yg = c->y + (n * p->c_out + g * c->og) * hw + oh0 * c->wo;
    const float *apg = c->ap + (size_t)g * c->ap_group;
    float *bp = c->bp + (size_t)thread * c->bp_stride;
    const int64_t MR = c->mr;
    int64_t mpan = (c->og + MR - 1) / MR, i0 = mc * c->mc_panels;
    int64_t i1 = i0 + c->mc_panels < mpan ? i0 + c->mc_panels : mpan;
    for (int64_t c0 = 0; c0 < ncols; c0 += IG_NC) {
        int64_t nc = ncols - c0 < IG_NC ? ncols - c0 : IG_NC;
        const float *ak = apg;
        for (int64_t k0 = 0; k0 < c->kdim; k0 += IG_KC) {
            int64_t kc = c->kdim - k0 < IG_KC ? c->kdim - k0 : IG_KC;
            for (int64_t j = 0; j < nc; j += IG_NR) {
                int nr = (int)(nc - j < IG_NR ? nc - j : IG_NR);
                const float *rows[IG_KC];
                igemm_rows(c, xg, oh0, c0 + j, nr, k0, kc, bp, rows);
                for (int64_t i = i0; i < i1; i++) {
                    int mr = (int)(c->og - i * MR < MR ? c->og - i * MR : MR);
                    c->uk_rows(kc, ak + i * kc * MR, rows, yg + i * MR * hw + c0 + j, hw, mr, nr,
                               k0 == 0 ? 0.0f : 1.0f);
                }
            }
            ak += mpan * kc * MR;
        }
    }
    int64_t o1 = i1 * MR < c->og ? i1 * MR : c->og;
    if (c->bias || c->relu)
        for (int64_t o = i0 * MR; o < o1; o++)
            bias_relu(yg + o * hw, ncols, c->bias ? c->bias[g * c->og + o] : 0.0f, c->relu);
}

/* The conv by implicit GEMM over n_bands bands of `band` output rows, each
 * split over n_mc chunks of the output channels. */
/* Rows of the weight panels: MR, or 8 where that leaves fewer empty (16,
 * 32, 64 output channels). */
static int64_t panel_rows(int64_t og)
{
    int64_t mr = RLX_GEMM_MR;
    return (og + 7) / 8 * 8 - og < (og + mr - 1) / mr * mr - og ? 8 : mr;
}

/* A 1x1 conv of stride 1 without padding: a plain GEMM. */
static bool conv_pointwise(const rlx_cpu_conv2d_params *p)
{
    return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_h == 0 &&
           p->pad_w == 0;
}

/* need floats of working memory: the caller's scratch where it has room
 * (no allocation per run), else *mem, allocated here (free it after). */
static float *conv_scratch(const rlx_cpu_conv2d_params *p, size_t need, float **mem)
{
    bool fits = p->scratch && p->scratch_floats >= need && ((uintptr_t)p->scratch & 63) == 0;
    *mem = fits ? NULL : aligned_alloc(64, need * sizeof(float));
    return fits ? p->scratch : *mem;
}

/* Floats of the implicit GEMM's working memory: the packed weights, a B
 * panel per thread, the k rows (each part a multiple of 16 floats). */
static size_t igemm_floats(const rlx_cpu_conv2d_params *p, int nth)
{
    int64_t cg = p->c_in / p->groups, og = p->c_out / p->groups, kdim = cg * p->kh * p->kw;
    int64_t mr = panel_rows(og);
    size_t ap = (size_t)p->groups * (size_t)((og + mr - 1) / mr * mr) * (size_t)kdim;
    size_t krow = ((size_t)kdim * sizeof(igemm_krow) + sizeof(float) - 1) / sizeof(float);
    return (ap + 15) / 16 * 16 + (size_t)nth * IG_NR * IG_KC + (krow + 15) / 16 * 16;
}

static rlx_status igemm_conv(rlx_threadpool *pool, const rlx_cpu_conv2d_params *p, const float *x,
                             const float *w, const float *bias, float *y, int64_t ho, int64_t wo,
                             int64_t band, int64_t n_bands, int64_t n_mc)
{
    int64_t cg = p->c_in / p->groups, og = p->c_out / p->groups, kdim = cg * p->kh * p->kw;
    int nth = rlx_threadpool_size(pool);
    const rlx_vec_ops *vt = &rlx_cpu_table_get()->vec;
    int64_t mr = panel_rows(og);
    size_t ap_group = (size_t)((og + mr - 1) / mr * mr) * (size_t)kdim;
    size_t bp_stride = (size_t)IG_NR * IG_KC;
    /* the packed weights, a B panel per thread and the k rows, in the
     * caller's scratch where it has room (no allocation per run) */
    float *mem, *ap = conv_scratch(p, igemm_floats(p, nth), &mem);
    if (!ap)
        return RLX_ERR_NO_MEMORY;
    float *bp = ap + ((size_t)p->groups * ap_group + 15) / 16 * 16;
    igemm_krow *krow = (igemm_krow *)(bp + (size_t)nth * bp_stride);
    for (int64_t k = 0, khw = p->kh * p->kw, sw = p->stride_w; k < kdim; k++) {
        int64_t ch = k / khw, ki = (k / p->kw) % p->kh, kj = k % p->kw;
        int64_t off = kj * p->dil_w - p->pad_w;
        int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
        int64_t hi = p->w_in - 1 - off >= 0 ? (p->w_in - 1 - off) / sw + 1 : 0;
        hi = hi < wo ? hi : wo;
        krow[k] = (igemm_krow){.plane = ch * p->h_in * p->w_in,
                               .dy = ki * p->dil_h - p->pad_h,
                               .off = off,
                               .lo = lo < hi ? lo : hi,
                               .hi = hi};
    }
    for (int64_t g = 0; g < p->groups; g++)
        igemm_pack_a(w + g * og * kdim, og, kdim, mr, ap + (size_t)g * ap_group);
    igemm_ctx c = {.p = p,
                   .x = x,
                   .bias = bias,
                   .y = y,
                   .ap = ap,
                   .ap_group = ap_group,
                   .bp = bp,
                   .bp_stride = bp_stride,
                   .ho = ho,
                   .wo = wo,
                   .cg = cg,
                   .og = og,
                   .kdim = kdim,
                   .band = band,
                   .n_bands = n_bands,
                   .krow = krow,
                   .mr = mr,
                   .uk_rows = mr == 8 ? vt->gemm_ukernel8_rows : vt->gemm_ukernel_rows,
                   .pack_run = vt->pack_run,
                   .relu = p->has_act && p->act == RLX_CPU_ACT_RELU};
    int64_t mpan = (og + mr - 1) / mr;
    n_mc = n_mc < 1 ? 1 : n_mc > mpan ? mpan : n_mc;
    c.mc_panels = (mpan + n_mc - 1) / n_mc;
    c.n_mc = (mpan + c.mc_panels - 1) / c.mc_panels;
    rlx_parallel_for(pool, p->n * p->groups * n_bands * c.n_mc, igemm_task, &c);
    free(mem);
    return RLX_OK;
}

/* ---- Winograd F(2x2, 3x3): a 3x3 conv of stride 1 as 16 GEMMs over
 * transformed 4x4 input patches (2.25x fewer multiply-adds than the direct
 * product). Each task takes RLX_GEMM_NR tiles of one tile row (2 output
 * rows x 64 columns): it transforms their patches channel block by channel
 * block into V [16][kc][NR], multiplies each of the 16 slices by the
 * transformed weights U [16][og][c_in] (packed as the GEMM's A panels)
 * into M [16][og][NR], and transforms M back into the outputs with the
 * bias (and ReLU). Precision: the transforms only add, subtract and halve,
 * so the result differs from the direct sum by float rounding of the same
 * order (a few ulp of the partial sums). */

#define WG_NR  RLX_GEMM_NR
#define WG_ROW (2 * WG_NR + 2) /* floats of a patch row the input transform reads */

typedef struct {
    const rlx_cpu_conv2d_params *p;
    const float *x, *bias;
    float *y;
    const float *u; /* per xi: per k block, mpan panels of kc x MR */
    size_t u_xi;    /* floats per xi */
    float *scr;     /* per thread: V, M, padded rows */
    size_t scr_stride;
    int64_t ho, wo, mr, mpan, ntx, npx;
    int64_t band, nband; /* tile rows per task, bands */
    int relu;
    rlx_gemm_ukernel_rows_fn uk_rows;
    const rlx_vec_ops *vt;
} wino_ctx;

/* V's and M's 16 slices lie WG_SKEW floats more than a multiple of 4 KiB
 * apart where their sizes would be one: 16 rows at such a stride would all
 * fall in one set of the L1 cache. */
#define WG_SKEW 16
#define WG_PF   4 /* channels ahead that the input transform prefetches */

static size_t wino_thread_floats(int64_t c_in, int64_t mpan, int64_t mr)
{
    int64_t kc = c_in < IG_KC ? c_in : IG_KC;
    return (size_t)(16 * (kc * WG_NR + WG_SKEW) + 16 * (mpan * mr * WG_NR + WG_SKEW) + WG_ROW +
                    4 * WG_NR + 64);
}

/* U = G g G^T of each (output, input) channel pair, G = [1 0 0; .5 .5 .5;
 * .5 -.5 .5; 0 0 1], into the A panels of slice xi. */
typedef struct {
    const float *w;
    float *u;
    size_t u_xi;
    int64_t og, c_in, mr, mpan;
} wino_u_ctx;

static void wino_u_task(void *vc, int64_t o, int thread)
{
    (void)thread;
    const wino_u_ctx *c = vc;
    int64_t i = o / c->mr, r = o % c->mr;
    for (int64_t ch = 0; ch < c->c_in; ch++) {
        const float *g = c->w + (o * c->c_in + ch) * 9;
        float t[4][3], uu[4][4];
        for (int j = 0; j < 3; j++) {
            t[0][j] = g[j];
            t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
            t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
            t[3][j] = g[6 + j];
        }
        for (int a = 0; a < 4; a++) {
            uu[a][0] = t[a][0];
            uu[a][1] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
            uu[a][2] = 0.5f * (t[a][0] - t[a][1] + t[a][2]);
            uu[a][3] = t[a][2];
        }
        int64_t k0 = ch / IG_KC * IG_KC, kc = c->c_in - k0 < IG_KC ? c->c_in - k0 : IG_KC;
        size_t at = (size_t)(k0 * c->mpan * c->mr + i * kc * c->mr + (ch - k0) * c->mr + r);
        for (int xi = 0; xi < 16; xi++)
            c->u[xi * c->u_xi + at] = uu[xi / 4][xi % 4];
    }
}

/* Tile row ty, tiles [t0, t0 + NR) of image n; first: the first row of
 * its band (after it, the top two patch rows were the last row's bottom
 * two, already in the cache, and only the bottom two are prefetched). */
static void wino_tiles(const wino_ctx *c, int64_t n, int64_t ty, int64_t t0, int thread, bool first)
{
    const rlx_cpu_conv2d_params *p = c->p;
    int64_t cin = p->c_in, hw_in = p->h_in * p->w_in, hw = c->ho * c->wo, MR = c->mr;
    const float *xn = c->x + n * cin * hw_in;
    float *yn = c->y + n * p->c_out * hw;
    int64_t kcmax = cin < IG_KC ? cin : IG_KC, ms = c->mpan * MR * WG_NR + WG_SKEW;
    float *V = c->scr + (size_t)thread * c->scr_stride;
    float *M = V + 16 * (kcmax * WG_NR + WG_SKEW);
    float *zero = M + 16 * ms, *ybuf = zero + WG_ROW;
    memset(zero, 0, WG_ROW * sizeof(float));
    /* the panel's patch columns start at input column xs; [a, b) of them
     * lie in the input (the rest is padding) */
    int64_t xs = 2 * t0 - p->pad_w;
    int64_t a = xs < 0 ? -xs : 0, b = p->w_in - xs < WG_ROW ? p->w_in - xs : WG_ROW;
    a = a < WG_ROW ? a : WG_ROW;
    b = b > a ? b : a;
    bool live[4];
    int64_t roff[4];
    for (int64_t k0 = 0; k0 < cin; k0 += IG_KC) {
        int64_t kc = cin - k0 < IG_KC ? cin - k0 : IG_KC, vs = kc * WG_NR + WG_SKEW;
        for (int64_t r = 0; r < 4; r++) {
            int64_t iy = 2 * ty - p->pad_h + r;
            live[r] = iy >= 0 && iy < p->h_in;
            roff[r] = live[r] ? iy * p->w_in + xs : 0;
        }
        for (int64_t k = 0; k < kc; k++) {
            const float *xc = xn + (k0 + k) * hw_in, *rows[4];
            /* the rows of a channel a few ahead: they lie a plane apart,
             * which the hardware's prefetch does not follow */
            if (k + WG_PF < kc)
                for (int r = first ? 0 : 2; r < 4; r++)
                    if (live[r])
                        for (int64_t q = a; q < b; q += 16)
                            __builtin_prefetch(xc + WG_PF * hw_in + roff[r] + q);
            for (int r = 0; r < 4; r++)
                rows[r] = live[r] ? xc + roff[r] : zero;
            c->vt->wino_in(rows, a, b, V + k * WG_NR, vs);
        }
        const float *vrows[IG_KC];
        for (int xi = 0; xi < 16; xi++) {
            for (int64_t k = 0; k < kc; k++)
                vrows[k] = V + xi * vs + k * WG_NR;
            const float *u = c->u + xi * c->u_xi + k0 * c->mpan * MR;
            for (int64_t i = 0; i < c->mpan; i++) {
                int mr = (int)(p->c_out - i * MR < MR ? p->c_out - i * MR : MR);
                c->uk_rows(kc, u + i * kc * MR, vrows, M + xi * ms + i * MR * WG_NR, WG_NR, mr,
                           WG_NR, k0 == 0 ? 0.0f : 1.0f);
            }
        }
    }
    int64_t oy = 2 * ty, ox = 2 * t0, nx = c->wo - ox < 2 * WG_NR ? c->wo - ox : 2 * WG_NR;
    bool two = oy + 1 < c->ho, direct = nx == 2 * WG_NR && two;
    for (int64_t o = 0; o < p->c_out; o++) {
        float *y0 = yn + o * hw + oy * c->wo + ox;
        float bv = c->bias ? c->bias[o] : 0.0f;
        const float *m = M + (o / MR) * MR * WG_NR + (o % MR) * WG_NR;
        if (direct) {
            c->vt->wino_out(m, ms, bv, c->relu, y0, y0 + c->wo);
            continue;
        }
        c->vt->wino_out(m, ms, bv, c->relu, ybuf, ybuf + 2 * WG_NR);
        memcpy(y0, ybuf, (size_t)nx * sizeof(float));
        if (two)
            memcpy(y0 + c->wo, ybuf + 2 * WG_NR, (size_t)nx * sizeof(float));
    }
}

/* A band of tile rows of one panel: the patches of consecutive tile rows
 * overlap by two input rows, which the next row then finds in the cache
 * (these maps are far bigger than it: each input row is read from memory
 * once instead of twice). */
static void wino_task(void *vc, int64_t task, int thread)
{
    const wino_ctx *c = vc;
    int64_t px = task % c->npx, rest = task / c->npx;
    int64_t b = rest % c->nband, n = rest / c->nband;
    int64_t ty1 = (b + 1) * c->band < c->ntx ? (b + 1) * c->band : c->ntx;
    for (int64_t ty = b * c->band; ty < ty1; ty++)
        wino_tiles(c, n, ty, px * WG_NR, thread, ty == b * c->band);
}

/* Worth it where the maps are large enough that the transformed weights
 * (16 slices, 1.8x the weights) are reused by many tiles. */
static bool wino_ok(const rlx_cpu_conv2d_params *p, int64_t ho, int64_t wo)
{
    return p->kh == 3 && p->kw == 3 && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 &&
           p->dil_w == 1 && p->groups == 1 && ho * wo >= 64 * 64 && wo >= 2 * WG_NR && p->c_in >= 8;
}

/* Floats of the Winograd path's working memory: the transformed weights
 * (16 slices) and per thread its V, M and row buffers, each a multiple of
 * 16 floats. */
static size_t wino_floats(const rlx_cpu_conv2d_params *p, int nth, size_t *u_xi, size_t *scr_stride)
{
    int64_t mr = panel_rows(p->c_out), mpan = (p->c_out + mr - 1) / mr;
    *u_xi = (size_t)(mpan * mr * p->c_in);
    *scr_stride = (wino_thread_floats(p->c_in, mpan, mr) + 15) / 16 * 16;
    return (16 * *u_xi + 15) / 16 * 16 + (size_t)nth * *scr_stride;
}

size_t rlx_cpu_conv2d_scratch_floats(const rlx_cpu_conv2d_params *p, int n_threads)
{
    if (!p || !conv_params_ok(p))
        return 0;
    int64_t ho = rlx_cpu_conv2d_out_h(p), wo = rlx_cpu_conv2d_out_w(p);
    size_t u_xi, scr_stride;
    if (ho <= 0 || wo <= 0)
        return 0;
    if (p->wino && wino_ok(p, ho, wo))
        return wino_floats(p, n_threads, &u_xi, &scr_stride);
    return conv_pointwise(p) ? 0 : igemm_floats(p, n_threads);
}

static rlx_status wino_conv(rlx_threadpool *pool, const rlx_cpu_conv2d_params *p, const float *x,
                            const float *w, const float *bias, float *y, int64_t ho, int64_t wo)
{
    const rlx_vec_ops *vt = &rlx_cpu_table_get()->vec;
    int64_t og = p->c_out, mr = panel_rows(og);
    int64_t mpan = (og + mr - 1) / mr;
    int nth = rlx_threadpool_size(pool);
    size_t u_xi, scr_stride;
    float *mem, *u = conv_scratch(p, wino_floats(p, nth, &u_xi, &scr_stride), &mem);
    if (!u)
        return RLX_ERR_NO_MEMORY;
    float *scr = u + (16 * u_xi + 15) / 16 * 16;
    if (og % mr)
        memset(u, 0, 16 * u_xi * sizeof(float)); /* the last panel's empty rows */
    wino_u_ctx uc = {
        .w = w, .u = u, .u_xi = u_xi, .og = og, .c_in = p->c_in, .mr = mr, .mpan = mpan};
    rlx_parallel_for(pool, og, wino_u_task, &uc);
    wino_ctx c = {.p = p,
                  .x = x,
                  .bias = bias,
                  .y = y,
                  .u = u,
                  .u_xi = u_xi,
                  .scr = scr,
                  .scr_stride = scr_stride,
                  .ho = ho,
                  .wo = wo,
                  .mr = mr,
                  .mpan = mpan,
                  .ntx = (ho + 1) / 2,
                  .npx = ((wo + 1) / 2 + WG_NR - 1) / WG_NR,
                  .relu = p->has_act && p->act == RLX_CPU_ACT_RELU,
                  .uk_rows = mr == 8 ? vt->gemm_ukernel8_rows : vt->gemm_ukernel_rows,
                  .vt = vt};
    /* bands of up to 8 tile rows, while that leaves 4 tasks a thread */
    c.band = 8;
    while (c.band > 1 && p->n * c.npx * ((c.ntx + c.band - 1) / c.band) < 4 * (int64_t)nth)
        c.band /= 2;
    c.nband = (c.ntx + c.band - 1) / c.band;
    rlx_parallel_for(pool, p->n * c.nband * c.npx, wino_task, &c);
    free(mem);
    return RLX_OK;
}

static rlx_status conv2d_run(rlx_threadpool *pool, const rlx_cpu_conv2d_params *p, const float *x,
                             const float *w, const float *bias, float *y, int64_t ho, int64_t wo);

/* An activation other than ReLU (which the kernels apply as they write) as
 * a pass over the output. */
static rlx_status conv_act(rlx_threadpool *pool, const rlx_cpu_conv2d_params *p, rlx_status st,
                           float *y, int64_t n)
{
    if (st == RLX_OK && p->has_act && p->act != RLX_CPU_ACT_RELU)
        rlx_cpu_act_pool(pool, (rlx_cpu_act_kind)p->act, y, y, n);
    return st;
}

rlx_status rlx_cpu_conv2d(rlx_threadpool *pool, const rlx_cpu_conv2d_params *p, const float *x,
                          const float *w, const float *bias, float *y)
{
    if (!p || !x || !w || !y || !conv_params_ok(p))
        return RLX_ERR_INVALID_ARG;
    int64_t ho = rlx_cpu_conv2d_out_h(p), wo = rlx_cpu_conv2d_out_w(p);
    if (ho <= 0 || wo <= 0)
        return RLX_ERR_INVALID_ARG;
    return conv_act(pool, p, conv2d_run(pool, p, x, w, bias, y, ho, wo), y,
                    p->n * p->c_out * ho * wo);
}

static rlx_status conv2d_run(rlx_threadpool *pool, const rlx_cpu_conv2d_params *p, const float *x,
                             const float *w, const float *bias, float *y, int64_t ho, int64_t wo)
{
    int64_t cg = p->c_in / p->groups, og = p->c_out / p->groups;
    int64_t kdim = cg * p->kh * p->kw;
    bool pointwise = conv_pointwise(p);
    int nth = rlx_threadpool_size(pool);
    if (p->wino && wino_ok(p, ho, wo))
        return wino_conv(pool, p, x, w, bias, y, ho, wo);
    if (!pointwise && kdim * wo > 0) {
        /* a task per IG_NC output pixels (whole rows): the weights are
         * packed once for all of them */
        int64_t band = (IG_NC + wo - 1) / wo;
        band = band > ho ? ho : band;
        int64_t n_bands = (ho + band - 1) / band;
        /* enough bands to keep every thread busy (ISNet's and SAM's large
         * maps); a small map with many channels splits its GEMM instead */
        int64_t tasks = p->n * p->groups * n_bands;
        if (tasks >= 2 * (int64_t)nth)
            return igemm_conv(pool, p, x, w, bias, y, ho, wo, band, n_bands, 1);
        /* a small map (ISNet's 32x32 and 16x16 of 512 channels): its
         * output channels split too, each task packing its band again,
         * which is little beside the products of its channels */
        int64_t n_mc = (4 * (int64_t)nth + tasks - 1) / tasks;
        if (og >= n_mc * 2 * RLX_GEMM_MR)
            return igemm_conv(pool, p, x, w, bias, y, ho, wo, band, n_bands, n_mc);
    }
    /* im2col one band of output rows at a time: the column buffer stays
     * cache-sized (a whole 256x256 3x3x64 conv would need 150 MB, 2.4 GB at
     * 1024x1024, none of it in the memory budget) and is reused. */
    int64_t band = ho;
    if (!pointwise && kdim * wo > 0) {
        band = CONV_COL_FLOATS / (kdim * wo);
        band = band < 1 ? 1 : band > ho ? ho : band;
    }
    float *col = NULL;
    if (!pointwise) {
        col = malloc((size_t)kdim * (size_t)(band * wo) * sizeof(float));
        if (!col)
            return RLX_ERR_NO_MEMORY;
    }
    for (int64_t n = 0; n < p->n; n++) {
        for (int64_t g = 0; g < p->groups; g++) {
            const float *xg = x + (n * p->c_in + g * cg) * p->h_in * p->w_in;
            float *yg = y + (n * p->c_out + g * og) * ho * wo;
            if (pointwise) {
                rlx_cpu_sgemm(pool, RLX_CPU_GEMM_AUTO, false, false, og, ho * wo, kdim, 1.0f,
                              w + g * og * kdim, kdim, xg, ho * wo, 0.0f, yg, ho * wo);
                continue;
            }
            for (int64_t oh0 = 0; oh0 < ho; oh0 += band) {
                int64_t nb = ho - oh0 < band ? ho - oh0 : band;
                im2col_ctx c = {.p = p,
                                .x = xg,
                                .col = col,
                                .ho = ho,
                                .wo = wo,
                                .cg = cg,
                                .oh0 = oh0,
                                .band = nb};
                rlx_parallel_for(pool, kdim, im2col_task, &c);
                rlx_cpu_sgemm(pool, RLX_CPU_GEMM_AUTO, false, false, og, nb * wo, kdim, 1.0f,
                              w + g * og * kdim, kdim, col, nb * wo, 0.0f, yg + oh0 * wo, ho * wo);
            }
        }
    }
    free(col);
    bool relu = p->has_act && p->act == RLX_CPU_ACT_RELU;
    if (bias || relu) {
        bias_ctx b = {.y = y, .bias = bias, .c_out = p->c_out, .hw = ho * wo, .relu = relu};
        rlx_parallel_for(pool, p->n * p->c_out, bias_task, &b);
    }
    return RLX_OK;
}

typedef struct {
    const rlx_cpu_conv2d_params *p;
    const float *col; /* (og*kh*kw) x (h_in*w_in) */
    float *y;         /* og x ho x wo */
    int64_t ho, wo;
    const float *bias; /* already offset to the group, or NULL */
} col2im_ctx;

static void col2im_task(void *vc, int64_t co, int thread)
{
    const col2im_ctx *c = vc;
    const rlx_cpu_conv2d_params *p = c->p;
    float *yc = c->y + co * c->ho * c->wo;
    float b = c->bias ? c->bias[co] : 0.0f;
    for (int64_t i = 0; i < c->ho * c->wo; i++)
        yc[i] = b;
    for (int64_t ki = 0; ki < p->kh; ki++)
        for (int64_t kj = 0; kj < p->kw; kj++) {
            const float *src = c->col + ((co * p->kh + ki) * p->kw + kj) * p->h_in * p->w_in;
            for (int64_t ih = 0; ih < p->h_in; ih++) {
                int64_t oh = ih * p->stride_h - p->pad_h + ki * p->dil_h;
                if (oh < 0 || oh >= c->ho)
                    continue;
                for (int64_t iw = 0; iw < p->w_in; iw++) {
                    int64_t ow = iw * p->stride_w - p->pad_w + kj * p->dil_w;
                    if (ow >= 0 && ow < c->wo)
                        yc[oh * c->wo + ow] += src[ih * p->w_in + iw];
                }
            }
        }
}

rlx_status rlx_cpu_conv_transpose2d(rlx_threadpool *pool, const rlx_cpu_conv2d_params *p,
                                    const float *x, const float *w, const float *bias, float *y)
{
    if (!p || !x || !w || !y || !conv_params_ok(p))
        return RLX_ERR_INVALID_ARG;
    int64_t ho = rlx_cpu_conv_transpose2d_out_h(p), wo = rlx_cpu_conv_transpose2d_out_w(p);
    if (ho <= 0 || wo <= 0)
        return RLX_ERR_INVALID_ARG;
    int64_t cg = p->c_in / p->groups, og = p->c_out / p->groups;
    int64_t rows = og * p->kh * p->kw, hw = p->h_in * p->w_in;
    float *col = malloc((size_t)rows * (size_t)hw * sizeof(float));
    if (!col)
        return RLX_ERR_NO_MEMORY;
    for (int64_t n = 0; n < p->n; n++) {
        for (int64_t g = 0; g < p->groups; g++) {
            const float *xg = x + (n * p->c_in + g * cg) * hw;
            const float *wg = w + g * cg * rows; /* cg x rows */
            rlx_cpu_sgemm(pool, RLX_CPU_GEMM_AUTO, true, false, rows, hw, cg, 1.0f, wg, rows, xg,
                          hw, 0.0f, col, hw);
            col2im_ctx c = {.p = p,
                            .col = col,
                            .y = y + (n * p->c_out + g * og) * ho * wo,
                            .ho = ho,
                            .wo = wo,
                            .bias = bias ? bias + g * og : NULL};
            rlx_parallel_for(pool, og, col2im_task, &c);
        }
    }
    free(col);
    if (p->has_act)
        rlx_cpu_act_pool(pool, (rlx_cpu_act_kind)p->act, y, y, p->n * p->c_out * ho * wo);
    return RLX_OK;
}
