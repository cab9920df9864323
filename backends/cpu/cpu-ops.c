/* Reference implementations of every op for the CPU backend.
 *
 * Each op is one function over cpu_tensors (strided views with dims already
 * resolved for this run). They allocate nothing and log nothing: scratch
 * space comes from the program, sized at program_create. Compute is f32;
 * F16/BF16/integer inputs are converted on load. Where kernels.h grows a
 * faster kernel for an op, the op's function here is the one place to call
 * it from.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/base/dtype.h"
#include "backends/cpu/cpu-internal.h"
#include "backends/cpu/kernels-internal.h"
#include "backends/cpu/kernels.h"

#define CH    128 /* elementwise chunk */
#define MM_TN 16  /* matmul: b rows dequantized per tile */
#define NREGS 32  /* fused elementwise registers */

/* kernels.h fast paths (defined below the reference ops) */
static bool fast_matmul(const cpu_op_ctx *c);
static void matmul_epilogue(const cpu_op_ctx *c, const cpu_tensor *bias, int64_t N);
static bool fast_softmax(const cpu_op_ctx *c);
static bool fast_norm(const cpu_op_ctx *c, int kind, const cpu_tensor *w, const cpu_tensor *bias);
static bool fast_group_norm(const cpu_op_ctx *c, const cpu_tensor *w, const cpu_tensor *bias);
static bool fast_rope(const cpu_op_ctx *c);
static bool fast_attention(const cpu_op_ctx *c);
static bool fast_conv(const cpu_op_ctx *c, bool transpose);
static bool fast_act(const cpu_op_ctx *c, rlx_op op);
static bool as_rows(const cpu_tensor *t, int64_t *n_rows, int64_t *ld);
static bool same_dims(const cpu_tensor *a, const cpu_tensor *b);
static const float *f32_vec(const cpu_tensor *t, int64_t n);

/* ---- small helpers ----------------------------------------------------- */

static bool nd_next(int64_t *idx, const int64_t *ne, int n)
{
    for (int d = n - 1; d >= 0; d--) {
        if (++idx[d] < ne[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

static int64_t nd_off(const int64_t *idx, const int64_t *st, int n)
{
    int64_t o = 0;
    for (int d = 0; d < n; d++)
        o += idx[d] * st[d];
    return o;
}

static int64_t numel(const cpu_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= t->ne[d];
    return n;
}

/* Strides of `in` broadcast against `out` (right-aligned, 0 where in has 1). */
static void bcast_strides(const cpu_tensor *in, const cpu_tensor *out, int64_t *st)
{
    int off = out->rank - in->rank;
    for (int d = 0; d < out->rank; d++) {
        int di = d - off;
        if (di < 0 || in->ne[di] == 1)
            st[d] = 0;
        else
            st[d] = in->st[di];
    }
}

static inline float ldf(const cpu_tensor *t, int64_t off)
{
    if (t->dt == RLX_DTYPE_F32)
        return ((const float *)t->p)[off];
    return cpu_load_f32(t->p, t->dt, off);
}

static inline void stf(const cpu_tensor *t, int64_t off, float v)
{
    if (t->dt == RLX_DTYPE_F32)
        ((float *)t->p)[off] = v;
    else
        cpu_store_f32(t->p, t->dt, off, v);
}

/* Bytes of a row starting at element offset `off` of a block-quantized or
 * plain tensor. */
static const uint8_t *elem_ptr(const cpu_tensor *t, int64_t off)
{
    const rlx_dtype_info *ti = rlx_dtype_get(t->dt);
    return t->p + (off / (int64_t)ti->block_size) * (int64_t)ti->type_size;
}

/* Load n elements with stride `st` starting at element `off` into f32. */
static void load_vec(const cpu_tensor *t, int64_t off, int64_t st, float *dst, int64_t n)
{
    if (st == 1 && !cpu_dtype_plain(t->dt)) {
        cpu_dequant_row(t->dt, elem_ptr(t, off), dst, n);
    } else if (st == 1 && t->dt == RLX_DTYPE_F32) {
        memcpy(dst, (const float *)t->p + off, (size_t)n * sizeof(float));
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = ldf(t, off + i * st);
    }
}

/* dst = src elementwise (same dims), converting dtypes exactly via f64:
 * rows [r0, r1) of the dims before the last. */
#define MOVE_ELEMS(T)                                                        \
    for (int64_t j = 0; j < L; j++) {                                        \
        T t_;                                                                \
        memcpy(&t_, src->p + (os + j * ss) * (int64_t)sizeof(T), sizeof(T)); \
        memcpy(dst->p + (od + j * sd) * (int64_t)sizeof(T), &t_, sizeof(T)); \
    }

static void copy_rows(const cpu_tensor *dst, const cpu_tensor *src, int64_t r0, int64_t r1)
{
    int r = dst->rank;
    int64_t L = dst->ne[r - 1];
    int64_t sd = dst->st[r - 1], ss = src->st[r - 1];
    bool same = dst->dt == src->dt;
    size_t es = cpu_dtype_size(dst->dt);
    for (int64_t row = r0; row < r1; row++) {
        int64_t idx[RLX_MAX_DIMS] = {0}, rem = row;
        for (int d = r - 2; d >= 0; d--) {
            idx[d] = rem % dst->ne[d];
            rem /= dst->ne[d];
        }
        int64_t od = nd_off(idx, dst->st, r - 1), os = nd_off(idx, src->st, r - 1);
        if (same && (sd == 1 || L == 1) && (ss == 1 || L == 1)) {
            memmove(dst->p + od * (int64_t)es, src->p + os * (int64_t)es, (size_t)L * es);
        } else if (same && es == 4) {
            MOVE_ELEMS(uint32_t)
        } else if (same && es == 2) {
            MOVE_ELEMS(uint16_t)
        } else if (same && es == 8) {
            MOVE_ELEMS(uint64_t)
        } else if (same) {
            MOVE_ELEMS(uint8_t)
        } else if ((sd == 1 || L == 1) && (ss == 1 || L == 1) && src->dt == RLX_DTYPE_F32 &&
                   dst->dt == RLX_DTYPE_F16) {
            /* the KV-cache store: vector RNE, the same halves as via f64 */
            rlx_cpu_f32_to_f16_row((const float *)(const void *)(src->p + os * 4),
                                   (uint16_t *)(void *)(dst->p + od * 2), L);
        } else if ((sd == 1 || L == 1) && (ss == 1 || L == 1) && src->dt == RLX_DTYPE_F16 &&
                   dst->dt == RLX_DTYPE_F32) {
            rlx_cpu_f16_to_f32_row((const uint16_t *)(const void *)(src->p + os * 2),
                                   (float *)(void *)(dst->p + od * 4), L);
        } else {
            for (int64_t j = 0; j < L; j++)
                cpu_store_f64(dst->p, dst->dt, od + j * sd,
                              cpu_load_f64(src->p, src->dt, os + j * ss));
        }
    }
}
#undef MOVE_ELEMS

typedef struct copy_job {
    const cpu_tensor *dst, *src;
    int64_t rows, per_task;
} copy_job;

static void copy_task(void *ctx, int64_t task, int thread)
{
    (void)thread;
    const copy_job *J = ctx;
    int64_t r0 = task * J->per_task, r1 = r0 + J->per_task;
    copy_rows(J->dst, J->src, r0, r1 < J->rows ? r1 : J->rows);
}

/* Large copies are split over the pool (rows of ~64K elements per task). */
static void copy_nd_pool(rlx_threadpool *pool, const cpu_tensor *dst, const cpu_tensor *src)
{
    int64_t n = numel(dst);
    if (n == 0)
        return;
    int64_t L = dst->ne[dst->rank - 1];
    copy_job J = {dst, src, n / L, 0};
    J.per_task = (65536 + L - 1) / L;
    int64_t n_tasks = (J.rows + J.per_task - 1) / J.per_task;
    if (pool && n_tasks > 1)
        rlx_parallel_for(pool, n_tasks, copy_task, &J);
    else
        copy_rows(dst, src, 0, J.rows);
}

static float gelu_erf(float x)
{
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

static float gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

static float act_apply(rlx_act a, float x)
{
    switch (a) {
    case RLX_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case RLX_ACT_GELU_ERF:
        return gelu_erf(x);
    case RLX_ACT_GELU_TANH:
        return gelu_tanh(x);
    case RLX_ACT_SILU:
        return x / (1.0f + expf(-x));
    case RLX_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case RLX_ACT_TANH:
        return tanhf(x);
    default:
        return x;
    }
}

static float cmp_apply(int kind, float a, float b)
{
    switch (kind) {
    case RLX_CMP_EQ:
        return a == b;
    case RLX_CMP_NE:
        return a != b;
    case RLX_CMP_LT:
        return a < b;
    case RLX_CMP_LE:
        return a <= b;
    case RLX_CMP_GT:
        return a > b;
    default:
        return a >= b;
    }
}

/* ---- elementwise ------------------------------------------------------- */

static void ew_chunk(int op, int aux, float p0, float p1, float *d, const float *a, const float *b,
                     const float *c, int n)
{
    switch (op) {
    case RLX_OP_NEG:
        for (int i = 0; i < n; i++)
            d[i] = -a[i];
        break;
    case RLX_OP_ABS:
        for (int i = 0; i < n; i++)
            d[i] = fabsf(a[i]);
        break;
    case RLX_OP_EXP:
        for (int i = 0; i < n; i++)
            d[i] = expf(a[i]);
        break;
    case RLX_OP_LOG:
        for (int i = 0; i < n; i++)
            d[i] = logf(a[i]);
        break;
    case RLX_OP_SQRT:
        for (int i = 0; i < n; i++)
            d[i] = sqrtf(a[i]);
        break;
    case RLX_OP_RSQRT:
        for (int i = 0; i < n; i++)
            d[i] = 1.0f / sqrtf(a[i]);
        break;
    case RLX_OP_TANH:
        for (int i = 0; i < n; i++)
            d[i] = tanhf(a[i]);
        break;
    case RLX_OP_SIGMOID:
        for (int i = 0; i < n; i++)
            d[i] = 1.0f / (1.0f + expf(-a[i]));
        break;
    case RLX_OP_RELU:
        for (int i = 0; i < n; i++)
            d[i] = a[i] > 0.0f ? a[i] : 0.0f;
        break;
    case RLX_OP_GELU:
        for (int i = 0; i < n; i++)
            d[i] = aux == RLX_GELU_TANH ? gelu_tanh(a[i]) : gelu_erf(a[i]);
        break;
    case RLX_OP_SILU:
        for (int i = 0; i < n; i++)
            d[i] = a[i] / (1.0f + expf(-a[i]));
        break;
    case RLX_OP_SIN:
        for (int i = 0; i < n; i++)
            d[i] = sinf(a[i]);
        break;
    case RLX_OP_COS:
        for (int i = 0; i < n; i++)
            d[i] = cosf(a[i]);
        break;
    case RLX_OP_SQUARE:
        for (int i = 0; i < n; i++)
            d[i] = a[i] * a[i];
        break;
    case RLX_OP_CLAMP:
        for (int i = 0; i < n; i++)
            d[i] = a[i] < p0 ? p0 : (a[i] > p1 ? p1 : a[i]);
        break;
    case RLX_OP_SCALE:
        for (int i = 0; i < n; i++)
            d[i] = a[i] * p0 + p1;
        break;
    case RLX_OP_ADD:
        for (int i = 0; i < n; i++)
            d[i] = a[i] + b[i];
        break;
    case RLX_OP_SUB:
        for (int i = 0; i < n; i++)
            d[i] = a[i] - b[i];
        break;
    case RLX_OP_MUL:
        for (int i = 0; i < n; i++)
            d[i] = a[i] * b[i];
        break;
    case RLX_OP_DIV:
        for (int i = 0; i < n; i++)
            d[i] = a[i] / b[i];
        break;
    case RLX_OP_MAX:
        for (int i = 0; i < n; i++)
            d[i] = fmaxf(a[i], b[i]);
        break;
    case RLX_OP_MIN:
        for (int i = 0; i < n; i++)
            d[i] = fminf(a[i], b[i]);
        break;
    case RLX_OP_POW:
        for (int i = 0; i < n; i++)
            d[i] = powf(a[i], b[i]);
        break;
    case RLX_OP_CMP:
        for (int i = 0; i < n; i++)
            d[i] = cmp_apply(aux, a[i], b[i]);
        break;
    case RLX_OP_WHERE:
        for (int i = 0; i < n; i++)
            d[i] = a[i] != 0.0f ? b[i] : c[i];
        break;
    default: /* CAST, COPY inside a fused chain */
        memmove(d, a, (size_t)n * sizeof(float));
        break;
    }
}

static void ew_params(rlx_op op, const rlx_op_params *p, int *aux, float *p0, float *p1)
{
    *aux = 0;
    *p0 = *p1 = 0.0f;
    if (op == RLX_OP_GELU)
        *aux = p->gelu.approx;
    else if (op == RLX_OP_CMP)
        *aux = p->cmp.kind;
    else if (op == RLX_OP_CLAMP) {
        *p0 = p->clamp.lo;
        *p1 = p->clamp.hi;
    } else if (op == RLX_OP_SCALE) {
        *p0 = p->scale.mul;
        *p1 = p->scale.add;
    }
}

/* Shared driver: loads broadcast inputs chunk by chunk as f32, applies the
 * op (or a fused chain) and stores. `op` < 0 means fused. The work is cut
 * into units (one chunk of one row) spread over the thread pool when the
 * tensor is large. */
typedef struct ew_job {
    const cpu_op_ctx *c;
    int op, aux;
    float p0, p1;
    int r;
    int64_t L, nch, n_units, per_task;
    int64_t bst[RLX_MAX_INPUTS][RLX_MAX_DIMS];
} ew_job;

static void ew_units(const ew_job *J, int64_t u0, int64_t u1)
{
    const cpu_op_ctx *c = J->c;
    const cpu_tensor *o = c->out;
    int r = J->r;
    float regs[NREGS][CH];
    float res[CH];
    for (int64_t u = u0; u < u1; u++) {
        int64_t row = u / J->nch, j0 = (u % J->nch) * CH;
        int64_t idx[RLX_MAX_DIMS] = {0};
        for (int d = r - 2; d >= 0; d--) {
            idx[d] = row % o->ne[d];
            row /= o->ne[d];
        }
        int n = (int)(J->L - j0 < CH ? J->L - j0 : CH);
        for (int k = 0; k < c->n_in; k++) {
            int64_t off = nd_off(idx, J->bst[k], r - 1), st = J->bst[k][r - 1];
            const cpu_tensor *t = c->in[k];
            if (t->dt == RLX_DTYPE_F32 && st == 1) {
                memcpy(regs[k], (const float *)t->p + off + j0, (size_t)n * sizeof(float));
            } else {
                for (int j = 0; j < n; j++)
                    regs[k][j] = ldf(t, off + (j0 + j) * st);
            }
        }
        const float *result;
        if (J->op >= 0) {
            ew_chunk(J->op, J->aux, J->p0, J->p1, res, regs[0], regs[c->n_in > 1 ? 1 : 0],
                     regs[c->n_in > 2 ? 2 : 0], n);
            result = res;
        } else {
            int last = 0;
            for (int s = 0; s < c->p->fused.n_steps; s++) {
                const rlx_fused_step *fs = &c->p->fused.steps[s];
                ew_chunk(fs->op, fs->aux, fs->p0, fs->p1, regs[fs->dst], regs[fs->a], regs[fs->b],
                         regs[fs->c], n);
                last = fs->dst;
            }
            result = regs[last];
        }
        int64_t oo = nd_off(idx, o->st, r - 1), ost = o->st[r - 1];
        if (o->dt == RLX_DTYPE_F32 && ost == 1)
            memcpy((float *)o->p + oo + j0, result, (size_t)n * sizeof(float));
        else
            for (int j = 0; j < n; j++)
                stf(o, oo + (j0 + j) * ost, result[j]);
    }
}

static void ew_task(void *ctx, int64_t task, int thread)
{
    (void)thread;
    const ew_job *J = ctx;
    int64_t u0 = task * J->per_task, u1 = u0 + J->per_task;
    ew_units(J, u0, u1 < J->n_units ? u1 : J->n_units);
}

static rlx_status ew_run(const cpu_op_ctx *c, int op)
{
    const cpu_tensor *o = c->out;
    int64_t total = numel(o);
    if (total == 0)
        return RLX_OK;
    ew_job J;
    J.c = c;
    J.op = op;
    J.aux = 0;
    J.p0 = J.p1 = 0.0f;
    if (op >= 0)
        ew_params((rlx_op)op, c->p, &J.aux, &J.p0, &J.p1);
    J.r = o->rank; /* >= 1: scalars are resolved as [1] */
    for (int k = 0; k < c->n_in; k++)
        bcast_strides(c->in[k], o, J.bst[k]);
    J.L = o->ne[J.r - 1];
    J.nch = (J.L + CH - 1) / CH;
    J.n_units = total / J.L * J.nch;
    /* about 16K elements per task */
    int64_t unit_elems = J.L < CH ? J.L : CH;
    J.per_task = (16384 + unit_elems - 1) / unit_elems;
    int64_t n_tasks = (J.n_units + J.per_task - 1) / J.per_task;
    if (c->pool && n_tasks > 1)
        rlx_parallel_for(c->pool, n_tasks, ew_task, &J);
    else
        ew_units(&J, 0, J.n_units);
    return RLX_OK;
}

static rlx_status op_elementwise(const cpu_op_ctx *c, rlx_op op)
{
    if (fast_act(c, op))
        return RLX_OK;
    return ew_run(c, (int)op);
}

#define EW(name, OPC)                                \
    static rlx_status op_##name(const cpu_op_ctx *c) \
    {                                                \
        return op_elementwise(c, OPC);               \
    }
EW(neg, RLX_OP_NEG)
EW(abs, RLX_OP_ABS)
EW(exp, RLX_OP_EXP)
EW(log, RLX_OP_LOG)
EW(sqrt, RLX_OP_SQRT)
EW(rsqrt, RLX_OP_RSQRT)
EW(tanh, RLX_OP_TANH)
EW(sigmoid, RLX_OP_SIGMOID)
EW(relu, RLX_OP_RELU)
EW(gelu, RLX_OP_GELU)
EW(silu, RLX_OP_SILU)
EW(sin, RLX_OP_SIN)
EW(cos, RLX_OP_COS)
EW(square, RLX_OP_SQUARE)
EW(clamp, RLX_OP_CLAMP)
EW(scale, RLX_OP_SCALE)
EW(add, RLX_OP_ADD)
EW(sub, RLX_OP_SUB)
EW(mul, RLX_OP_MUL)
EW(div, RLX_OP_DIV)
EW(max, RLX_OP_MAX)
EW(min, RLX_OP_MIN)
EW(pow, RLX_OP_POW)
EW(cmp, RLX_OP_CMP)
EW(where, RLX_OP_WHERE)
#undef EW

static rlx_status op_fused(const cpu_op_ctx *c)
{
    return ew_run(c, -1);
}

/* CAST and COPY: exact conversion through f64 (integers survive). */
static rlx_status op_copy(const cpu_op_ctx *c)
{
    copy_nd_pool(c->pool, c->out, c->in[0]);
    return RLX_OK;
}

static rlx_status op_noop(const cpu_op_ctx *c)
{
    (void)c;
    return RLX_OK;
}

/* ---- matmul ------------------------------------------------------------ */

static float dot_f32(const float *a, const float *b, int64_t n)
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* out[..., M, N] = act(alpha * a @ b + bias). b's "rows" (its K-vectors for
 * one n) are brought to f32 MM_TN at a time (dequantized for block types),
 * then every row of a is dotted with them; a's rows are used in place when
 * they are contiguous f32. */
static rlx_status op_matmul(const cpu_op_ctx *c)
{
    if (fast_matmul(c))
        return RLX_OK;
    const cpu_tensor *a = c->in[0], *b = c->in[1], *o = c->out;
    const cpu_tensor *bias = c->n_in > 2 && c->p->matmul.has_bias ? c->in[2] : NULL;
    bool ta = c->p->matmul.trans_a, tb = c->p->matmul.trans_b;
    float alpha = c->p->matmul.alpha == 0.0f ? 1.0f : c->p->matmul.alpha;
    rlx_act act = c->p->matmul.act;
    int ro = o->rank, ra = a->rank, rb = b->rank;
    int64_t M = o->ne[ro - 2], N = o->ne[ro - 1];
    int64_t K = ta ? a->ne[ra - 2] : a->ne[ra - 1];
    /* strides of a along (m, k) and b along (n, k) */
    int64_t a_sm = ta ? a->st[ra - 1] : a->st[ra - 2], a_sk = ta ? a->st[ra - 2] : a->st[ra - 1];
    int64_t b_sn = tb ? b->st[rb - 2] : b->st[rb - 1], b_sk = tb ? b->st[rb - 1] : b->st[rb - 2];
    if (numel(o) == 0)
        return RLX_OK;

    /* batch dims: broadcast a and b's leading dims against out's */
    int nb = ro - 2;
    int64_t abst[RLX_MAX_DIMS] = {0}, bbst[RLX_MAX_DIMS] = {0};
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - (ra - 2)), db = d - (nb - (rb - 2));
        abst[d] = (da >= 0 && a->ne[da] != 1) ? a->st[da] : 0;
        bbst[d] = (db >= 0 && b->ne[db] != 1) ? b->st[db] : 0;
    }
    float *btile = c->scratch;            /* MM_TN * K */
    float *arow = c->scratch + MM_TN * K; /* K */
    bool a_direct = a->dt == RLX_DTYPE_F32 && a_sk == 1;
    int64_t bias_st = bias ? bias->st[bias->rank - 1] : 0;
    if (bias && bias->ne[bias->rank - 1] == 1)
        bias_st = 0;

    int64_t idx[RLX_MAX_DIMS] = {0};
    do {
        int64_t ao = nd_off(idx, abst, nb), bo = nd_off(idx, bbst, nb);
        int64_t oo = nd_off(idx, o->st, nb);
        for (int64_t n0 = 0; n0 < N; n0 += MM_TN) {
            int64_t tn = N - n0 < MM_TN ? N - n0 : MM_TN;
            for (int64_t t = 0; t < tn; t++)
                load_vec(b, bo + (n0 + t) * b_sn, b_sk, btile + t * K, K);
            for (int64_t m = 0; m < M; m++) {
                const float *ar;
                if (a_direct) {
                    ar = (const float *)a->p + ao + m * a_sm;
                } else {
                    load_vec(a, ao + m * a_sm, a_sk, arow, K);
                    ar = arow;
                }
                for (int64_t t = 0; t < tn; t++) {
                    float v = alpha * dot_f32(ar, btile + t * K, K);
                    if (bias)
                        v += ldf(bias, (n0 + t) * bias_st);
                    v = act_apply(act, v);
                    stf(o, oo + m * o->st[ro - 2] + (n0 + t) * o->st[ro - 1], v);
                }
            }
        }
    } while (nd_next(idx, o->ne, nb));
    return RLX_OK;
}

/* ---- reductions -------------------------------------------------------- */

static int norm_axis(int axis, int rank)
{
    return axis < 0 ? axis + rank : axis;
}

/* Iterate over x with `axis` collapsed; `ost` maps x's dims to out's
 * element strides (0 on the axis). */
static void reduce_layout(const cpu_tensor *x, const cpu_tensor *o, int axis, int64_t *ost,
                          int64_t *ne_outer)
{
    int od = 0;
    bool keep = o->rank == x->rank;
    for (int d = 0; d < x->rank; d++) {
        ne_outer[d] = d == axis ? 1 : x->ne[d];
        if (d == axis) {
            ost[d] = 0;
            if (keep)
                od++;
        } else {
            ost[d] = od < o->rank ? o->st[od] : 0;
            od++;
        }
    }
}

static rlx_status reduce_run(const cpu_op_ctx *c, int kind, int axis, int64_t k, bool largest,
                             bool want_idx)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    int r = x->rank;
    if (numel(o) == 0)
        return RLX_OK;
    int64_t ost[RLX_MAX_DIMS], neo[RLX_MAX_DIMS];
    reduce_layout(x, o, axis, ost, neo);
    int64_t L = x->ne[axis], sx = x->st[axis];
    int64_t so = o->rank == r ? o->st[axis] : 0; /* topk's axis in out */
    int64_t idx[RLX_MAX_DIMS] = {0};
    float *vals = c->scratch;
    int32_t *ids = (int32_t *)(c->scratch + L + 1);
    do {
        int64_t xo = nd_off(idx, x->st, r), oo = nd_off(idx, ost, r);
        if (kind == RLX_OP_REDUCE_SUM || kind == RLX_OP_REDUCE_MEAN) {
            double s = 0;
            for (int64_t j = 0; j < L; j++)
                s += ldf(x, xo + j * sx);
            if (kind == RLX_OP_REDUCE_MEAN)
                s = L ? s / (double)L : NAN;
            stf(o, oo, (float)s);
        } else if (kind == RLX_OP_REDUCE_MAX || kind == RLX_OP_ARGMAX) {
            float best = -INFINITY;
            int64_t bi = 0;
            for (int64_t j = 0; j < L; j++) {
                float v = ldf(x, xo + j * sx);
                if (j == 0 || v > best) {
                    best = v;
                    bi = j;
                }
            }
            if (kind == RLX_OP_ARGMAX)
                cpu_store_f64(o->p, o->dt, oo, (double)bi);
            else
                stf(o, oo, best);
        } else { /* TOPK: insertion into a sorted list of k; ties keep the lower index */
            int64_t n = 0;
            for (int64_t j = 0; j < L; j++) {
                float v = ldf(x, xo + j * sx);
                int64_t pos = n;
                while (pos > 0 && (largest ? v > vals[pos - 1] : v < vals[pos - 1]))
                    pos--;
                if (pos >= k)
                    continue;
                int64_t end = n < k ? n : k - 1;
                for (int64_t q = end; q > pos; q--) {
                    vals[q] = vals[q - 1];
                    ids[q] = ids[q - 1];
                }
                vals[pos] = v;
                ids[pos] = (int32_t)j;
                if (n < k)
                    n++;
            }
            for (int64_t q = 0; q < k; q++) {
                if (want_idx)
                    cpu_store_f64(o->p, o->dt, oo + q * so, q < n ? ids[q] : 0);
                else
                    stf(o, oo + q * so, q < n ? vals[q] : 0.0f);
            }
        }
    } while (nd_next(idx, neo, r));
    return RLX_OK;
}

static rlx_status op_reduce_sum(const cpu_op_ctx *c)
{
    return reduce_run(c, RLX_OP_REDUCE_SUM, norm_axis(c->p->reduce.axis, c->in[0]->rank), 1, true,
                      false);
}
static rlx_status op_reduce_mean(const cpu_op_ctx *c)
{
    return reduce_run(c, RLX_OP_REDUCE_MEAN, norm_axis(c->p->reduce.axis, c->in[0]->rank), 1, true,
                      false);
}
static rlx_status op_reduce_max(const cpu_op_ctx *c)
{
    return reduce_run(c, RLX_OP_REDUCE_MAX, norm_axis(c->p->reduce.axis, c->in[0]->rank), 1, true,
                      false);
}
static rlx_status op_argmax(const cpu_op_ctx *c)
{
    return reduce_run(c, RLX_OP_ARGMAX, norm_axis(c->p->reduce.axis, c->in[0]->rank), 1, true,
                      false);
}
static rlx_status op_topk(const cpu_op_ctx *c)
{
    return reduce_run(c, RLX_OP_TOPK, norm_axis(c->p->topk.axis, c->in[0]->rank), c->p->topk.k,
                      c->p->topk.largest, c->p->topk.indices);
}

/* ---- softmax and norms -------------------------------------------------- */

/* Calls row(ctx, x_off, out_off, outer_idx) for every row along the last
 * axis of `shape_of` (the output). */
static rlx_status op_softmax(const cpu_op_ctx *c)
{
    if (fast_softmax(c))
        return RLX_OK;
    const cpu_tensor *x = c->in[0], *o = c->out;
    const cpu_tensor *mask = c->n_in > 1 ? c->in[1] : NULL;
    int r = o->rank;
    int64_t L = o->ne[r - 1];
    if (numel(o) == 0)
        return RLX_OK;
    float scale = c->p->softmax.scale == 0.0f ? 1.0f : c->p->softmax.scale;
    float cap = c->p->softmax.softcap;
    int64_t xst[RLX_MAX_DIMS], mst[RLX_MAX_DIMS];
    bcast_strides(x, o, xst);
    if (mask)
        bcast_strides(mask, o, mst);
    float *row = c->scratch;
    int64_t idx[RLX_MAX_DIMS] = {0};
    do {
        int64_t xo = nd_off(idx, xst, r - 1), oo = nd_off(idx, o->st, r - 1);
        int64_t mo = mask ? nd_off(idx, mst, r - 1) : 0;
        float mx = -INFINITY;
        for (int64_t j = 0; j < L; j++) {
            float v = ldf(x, xo + j * xst[r - 1]) * scale;
            if (cap != 0.0f)
                v = cap * tanhf(v / cap);
            if (mask)
                v += ldf(mask, mo + j * mst[r - 1]);
            row[j] = v;
            if (v > mx)
                mx = v;
        }
        double sum = 0;
        if (mx == -INFINITY) { /* every position masked: a row of zeros, not NaN */
            for (int64_t j = 0; j < L; j++)
                row[j] = 0.0f;
            sum = 1;
        } else {
            for (int64_t j = 0; j < L; j++) {
                row[j] = expf(row[j] - mx);
                sum += row[j];
            }
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < L; j++)
            stf(o, oo + j * o->st[r - 1], row[j] * inv);
    } while (nd_next(idx, o->ne, r - 1));
    return RLX_OK;
}

enum { NORM_LAYER, NORM_RMS, NORM_ADD_RMS };

static rlx_status norm_run(const cpu_op_ctx *c, int kind)
{
    const cpu_tensor *o = c->out;
    const cpu_tensor *x = c->in[0], *x2 = NULL, *w = NULL, *bias = NULL;
    if (kind == NORM_ADD_RMS) {
        x2 = c->in[1];
        w = c->n_in > 2 ? c->in[2] : NULL;
    } else {
        bool hw = c->p->norm.has_weight, hb = c->p->norm.has_bias;
        if (!hw && !hb) {
            w = c->n_in > 1 ? c->in[1] : NULL;
            bias = c->n_in > 2 ? c->in[2] : NULL;
        } else {
            int i = 1;
            if (hw && c->n_in > i)
                w = c->in[i++];
            if (hb && c->n_in > i)
                bias = c->in[i];
        }
    }
    if (fast_norm(c, kind, w, bias))
        return RLX_OK;
    int r = o->rank;
    int64_t L = o->ne[r - 1];
    if (numel(o) == 0)
        return RLX_OK;
    float eps = c->p->norm.eps;
    int64_t xst[RLX_MAX_DIMS], x2st[RLX_MAX_DIMS], wst[RLX_MAX_DIMS], bst[RLX_MAX_DIMS];
    bcast_strides(x, o, xst);
    if (x2)
        bcast_strides(x2, o, x2st);
    if (w)
        bcast_strides(w, o, wst);
    if (bias)
        bcast_strides(bias, o, bst);
    float *row = c->scratch;
    int64_t idx[RLX_MAX_DIMS] = {0};
    do {
        int64_t xo = nd_off(idx, xst, r - 1), oo = nd_off(idx, o->st, r - 1);
        double s = 0, s2 = 0;
        for (int64_t j = 0; j < L; j++) {
            float v = ldf(x, xo + j * xst[r - 1]);
            if (x2)
                v += ldf(x2, nd_off(idx, x2st, r - 1) + j * x2st[r - 1]);
            row[j] = v;
            s += v;
            s2 += (double)v * v;
        }
        float mean = 0, inv;
        if (kind == NORM_LAYER) {
            mean = (float)(s / (double)L);
            double var = 0;
            for (int64_t j = 0; j < L; j++)
                var += ((double)row[j] - mean) * ((double)row[j] - mean);
            inv = (float)(1.0 / sqrt(var / (double)L + eps));
        } else {
            inv = (float)(1.0 / sqrt(s2 / (double)L + eps));
        }
        int64_t wo = w ? nd_off(idx, wst, r - 1) : 0, bo = bias ? nd_off(idx, bst, r - 1) : 0;
        for (int64_t j = 0; j < L; j++) {
            float v = (row[j] - mean) * inv;
            if (w)
                v *= ldf(w, wo + j * wst[r - 1]);
            if (bias)
                v += ldf(bias, bo + j * bst[r - 1]);
            stf(o, oo + j * o->st[r - 1], v);
        }
    } while (nd_next(idx, o->ne, r - 1));
    return RLX_OK;
}

static rlx_status op_layer_norm(const cpu_op_ctx *c)
{
    return norm_run(c, NORM_LAYER);
}
static rlx_status op_rms_norm(const cpu_op_ctx *c)
{
    return norm_run(c, NORM_RMS);
}
static rlx_status op_add_rms_norm(const cpu_op_ctx *c)
{
    if (!c->p->norm.keep_sum)
        return norm_run(c, NORM_ADD_RMS);
    /* out [..., 2, D]: the sum into index 0, then it normalized into index 1
     * (the same f32 sums and the same norm as without keep_sum) */
    const cpu_tensor *o = c->out, *a = c->in[0], *b = c->in[1];
    int ax = o->rank - 2; /* the axis of the two halves */
    if (o->dt != RLX_DTYPE_F32 || o->rank != a->rank + 1 || ax < 0 || o->ne[ax] != 2)
        return RLX_ERR_INVALID_ARG;
    cpu_tensor half[2];
    for (int k = 0; k < 2; k++) {
        half[k].dt = o->dt;
        half[k].rank = o->rank - 1;
        half[k].p = o->p + (size_t)(k * o->st[ax]) * sizeof(float);
        for (int d = 0, j = 0; d < o->rank; d++)
            if (d != ax) {
                half[k].ne[j] = o->ne[d];
                half[k].st[j++] = o->st[d];
            }
    }
    const cpu_tensor *sum = &half[0];
    int r = sum->rank;
    int64_t L = sum->ne[r - 1], na, lda, nb, ldb, ns, lds, ny, ldy;
    const float *wp = f32_vec(c->in[2], L);
    if (a->dt == RLX_DTYPE_F32 && b->dt == RLX_DTYPE_F32 && wp && same_dims(a, sum) &&
        same_dims(b, sum) && as_rows(a, &na, &lda) && as_rows(b, &nb, &ldb) &&
        as_rows(sum, &ns, &lds) && as_rows(&half[1], &ny, &ldy) && na == ns && nb == ns &&
        ny == ns) {
        if (L > 0)
            rlx_cpu_add_rms_norm(c->pool, (const float *)(const void *)a->p, lda,
                                 (const float *)(const void *)b->p, ldb, (float *)(void *)sum->p,
                                 lds, (float *)(void *)half[1].p, ldy, ns, L, wp, c->p->norm.eps);
        return RLX_OK;
    }
    if (numel(sum) > 0) {
        int64_t ast[RLX_MAX_DIMS], bst[RLX_MAX_DIMS];
        bcast_strides(a, sum, ast);
        bcast_strides(b, sum, bst);
        int64_t idx[RLX_MAX_DIMS] = {0};
        do {
            int64_t ao = nd_off(idx, ast, r - 1), bo = nd_off(idx, bst, r - 1);
            float *y = (float *)(void *)sum->p + nd_off(idx, sum->st, r - 1);
            if (a->dt == RLX_DTYPE_F32 && b->dt == RLX_DTYPE_F32 && ast[r - 1] == 1 &&
                bst[r - 1] == 1 && sum->st[r - 1] == 1) {
                const float *ap = (const float *)(const void *)a->p + ao;
                const float *bp = (const float *)(const void *)b->p + bo;
                for (int64_t j = 0; j < L; j++)
                    y[j] = ap[j] + bp[j];
            } else {
                for (int64_t j = 0; j < L; j++)
                    y[j * sum->st[r - 1]] =
                        ldf(a, ao + j * ast[r - 1]) + ldf(b, bo + j * bst[r - 1]);
            }
        } while (nd_next(idx, sum->ne, r - 1));
    }
    rlx_op_params p = *c->p;
    p.norm.keep_sum = false;
    cpu_op_ctx rc = *c;
    rc.p = &p;
    rc.in[0] = sum;
    rc.in[1] = c->in[2];
    rc.n_in = 2;
    rc.out = &half[1];
    return norm_run(&rc, NORM_RMS);
}

/* x [N, C, *spatial]; statistics per (n, group). */
static rlx_status op_group_norm(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    bool hw = c->p->norm.has_weight, hb = c->p->norm.has_bias;
    const cpu_tensor *w = NULL, *bias = NULL;
    if (!hw && !hb) {
        w = c->n_in > 1 ? c->in[1] : NULL;
        bias = c->n_in > 2 ? c->in[2] : NULL;
    } else {
        int i = 1;
        if (hw && c->n_in > i)
            w = c->in[i++];
        if (hb && c->n_in > i)
            bias = c->in[i];
    }
    if (fast_group_norm(c, w, bias))
        return RLX_OK;
    int r = x->rank;
    int64_t N = x->ne[0], C = x->ne[1], G = c->p->norm.groups > 0 ? c->p->norm.groups : 1;
    int64_t cg = C / G;
    /* spatial dims 2..r-1 iterate with a counter */
    int64_t sne[RLX_MAX_DIMS], S = 1;
    int ns = r - 2;
    for (int d = 0; d < ns; d++) {
        sne[d] = x->ne[d + 2];
        S *= sne[d];
    }
    if (N * C * S == 0)
        return RLX_OK;
    float eps = c->p->norm.eps;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t g = 0; g < G; g++) {
            double s = 0, s2 = 0;
            for (int pass = 0; pass < 2; pass++) {
                double mean = s / (double)(cg * S);
                double var = s2 / (double)(cg * S) - mean * mean;
                if (var < 0)
                    var = 0;
                float inv = (float)(1.0 / sqrt(var + eps));
                for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++) {
                    float wv = w ? ldf(w, ch * w->st[w->rank - 1]) : 1.0f;
                    float bv = bias ? ldf(bias, ch * bias->st[bias->rank - 1]) : 0.0f;
                    int64_t idx[RLX_MAX_DIMS] = {0};
                    do {
                        int64_t xo = n * x->st[0] + ch * x->st[1] + nd_off(idx, x->st + 2, ns);
                        float v = ldf(x, xo);
                        if (pass == 0) {
                            s += v;
                            s2 += (double)v * v;
                        } else {
                            int64_t oo = n * o->st[0] + ch * o->st[1] + nd_off(idx, o->st + 2, ns);
                            stf(o, oo, (float)((v - mean) * inv) * wv + bv);
                        }
                    } while (nd_next(idx, sne, ns));
                }
            }
        }
    }
    return RLX_OK;
}

/* ---- rope -------------------------------------------------------------- */

static rlx_status op_rope(const cpu_op_ctx *c)
{
    if (fast_rope(c))
        return RLX_OK;
    const cpu_tensor *x = c->in[0], *pos = c->in[1], *o = c->out;
    const cpu_tensor *ff = c->n_in > 2 ? c->in[2] : NULL;
    int r = x->rank;
    int64_t D = x->ne[r - 1];
    int64_t n_rot = c->p->rope.n_rot > 0 ? c->p->rope.n_rot : D;
    if (n_rot > D)
        n_rot = D;
    int sa = c->p->rope.seq_axis;
    if (sa < 0)
        sa += r;
    float base = c->p->rope.freq_base > 0 ? c->p->rope.freq_base : 10000.0f;
    float fscale = c->p->rope.freq_scale != 0.0f ? c->p->rope.freq_scale : 1.0f;
    int64_t half = n_rot / 2;
    float *inv_freq = c->scratch;
    for (int64_t i = 0; i < half; i++) {
        float f = fscale * powf(base, -2.0f * (float)i / (float)n_rot);
        if (ff)
            f /= ldf(ff, i * ff->st[ff->rank - 1]);
        inv_freq[i] = f;
    }
    if (numel(o) == 0)
        return RLX_OK;
    int64_t pst = pos->st[pos->rank - 1];
    bool neox = c->p->rope.mode == RLX_ROPE_NEOX;
    int64_t xs = x->st[r - 1], os = o->st[r - 1];
    int64_t idx[RLX_MAX_DIMS] = {0};
    do {
        int64_t xo = nd_off(idx, x->st, r - 1), oo = nd_off(idx, o->st, r - 1);
        float p = (float)cpu_load_f64(pos->p, pos->dt, idx[sa] * pst);
        for (int64_t i = 0; i < half; i++) {
            float th = p * inv_freq[i];
            float cs = cosf(th), sn = sinf(th);
            int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            float x0 = ldf(x, xo + i0 * xs), x1 = ldf(x, xo + i1 * xs);
            stf(o, oo + i0 * os, x0 * cs - x1 * sn);
            stf(o, oo + i1 * os, x0 * sn + x1 * cs);
        }
        if (x->p != o->p || xs != os || xo != oo)
            for (int64_t i = 2 * half; i < D; i++)
                stf(o, oo + i * os, ldf(x, xo + i * xs));
    } while (nd_next(idx, x->ne, r - 1));
    return RLX_OK;
}

/* ---- attention --------------------------------------------------------- */

static rlx_status op_attention(const cpu_op_ctx *c)
{
    if (fast_attention(c))
        return RLX_OK;
    if (c->in[1]->dt == RLX_DTYPE_Q8_0) /* only the tiled kernel decodes blocks */
        return RLX_ERR_INVALID_ARG;
    const cpu_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *o = c->out;
    const cpu_tensor *bias = c->n_in > 3 ? c->in[3] : NULL;
    /* view everything as [B, H, S, D] (a rank-3 tensor has B = 1) */
    int rq = q->rank, rk = k->rank, rv = v->rank, ro = o->rank;
    int64_t B = rq == 4 ? q->ne[0] : 1;
    int64_t Hq = q->ne[rq - 3], S = q->ne[rq - 2], D = q->ne[rq - 1];
    int64_t Hkv = k->ne[rk - 3], T = k->ne[rk - 2], Dv = v->ne[rv - 1];
    if (B * Hq * S * Dv == 0)
        return RLX_OK;
    if (Hkv <= 0 || Hq % Hkv)
        return RLX_ERR_INVALID_ARG;
#define BST(t, r) ((r) == 4 && (t)->ne[0] != 1 ? (t)->st[0] : 0)
    int64_t qb = BST(q, rq), kb = BST(k, rk), vb = BST(v, rv), ob = ro == 4 ? o->st[0] : 0;
#undef BST
    int64_t bst[4] = {0, 0, 0, 0};
    const int64_t gw = c->p->attn.bias_grid_w, gh = gw > 0 ? T / gw : 0;
    if (gw > 0 && T % gw)
        return RLX_ERR_INVALID_ARG;
    if (bias) {
        cpu_tensor full = *o;
        full.rank = 4;
        int64_t dims[4] = {B, Hq, S, gw > 0 ? gh + gw : T};
        memcpy(full.ne, dims, sizeof dims);
        bcast_strides(bias, &full, bst);
    }
    float scale = c->p->attn.scale != 0.0f ? c->p->attn.scale : 1.0f / sqrtf((float)D);
    float cap = c->p->attn.softcap;
    rlx_mask_kind mk = c->p->attn.mask;
    int64_t win = c->p->attn.window;
    float *sc = c->scratch, *qr = sc + T, *acc = qr + D, *kr = acc + Dv;
    int64_t grp = Hq / Hkv;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / grp;
            int64_t ko = b * kb + hk * k->st[rk - 3], vo = b * vb + hk * v->st[rv - 3];
            for (int64_t s = 0; s < S; s++) {
                load_vec(q, b * qb + h * q->st[rq - 3] + s * q->st[rq - 2], q->st[rq - 1], qr, D);
                int64_t p = T - S + s;
                float mx = -INFINITY;
                for (int64_t t = 0; t < T; t++) {
                    bool ok = true;
                    if (mk == RLX_MASK_CAUSAL)
                        ok = t <= p;
                    else if (mk == RLX_MASK_WINDOW)
                        ok = t <= p && t > p - win;
                    if (!ok) {
                        sc[t] = -INFINITY;
                        continue;
                    }
                    const float *kp;
                    int64_t koff = ko + t * k->st[rk - 2];
                    if (k->dt == RLX_DTYPE_F32 && k->st[rk - 1] == 1) {
                        kp = (const float *)k->p + koff;
                    } else {
                        load_vec(k, koff, k->st[rk - 1], kr, D);
                        kp = kr;
                    }
                    float x = dot_f32(qr, kp, D) * scale;
                    if (cap != 0.0f)
                        x = cap * tanhf(x / cap);
                    if (bias && gw > 0)
                        x += ldf(bias, b * bst[0] + h * bst[1] + s * bst[2] + t / gw * bst[3]) +
                             ldf(bias,
                                 b * bst[0] + h * bst[1] + s * bst[2] + (gh + t % gw) * bst[3]);
                    else if (bias)
                        x += ldf(bias, b * bst[0] + h * bst[1] + s * bst[2] + t * bst[3]);
                    sc[t] = x;
                    if (x > mx)
                        mx = x;
                }
                for (int64_t j = 0; j < Dv; j++)
                    acc[j] = 0.0f;
                if (mx != -INFINITY) {
                    double sum = 0;
                    for (int64_t t = 0; t < T; t++) {
                        if (sc[t] == -INFINITY)
                            continue;
                        float w = expf(sc[t] - mx);
                        sum += w;
                        int64_t voff = vo + t * v->st[rv - 2], vs = v->st[rv - 1];
                        if (v->dt == RLX_DTYPE_F32) {
                            const float *vp = (const float *)v->p + voff;
                            for (int64_t j = 0; j < Dv; j++)
                                acc[j] += w * vp[j * vs];
                        } else {
                            for (int64_t j = 0; j < Dv; j++)
                                acc[j] += w * ldf(v, voff + j * vs);
                        }
                    }
                    float inv = (float)(1.0 / sum);
                    for (int64_t j = 0; j < Dv; j++)
                        acc[j] *= inv;
                }
                int64_t oo = b * ob + h * o->st[ro - 3] + s * o->st[ro - 2];
                for (int64_t j = 0; j < Dv; j++)
                    stf(o, oo + j * o->st[ro - 1], acc[j]);
            }
        }
    }
    return RLX_OK;
}

/* ---- convolution, resize, pool ------------------------------------------ */

/* View a conv operand as 4-D [N, C, H, W] (1-D ones get H = 1). */
static void as4d(const cpu_tensor *t, int64_t *ne, int64_t *st)
{
    if (t->rank == 3) {
        ne[0] = t->ne[0], ne[1] = t->ne[1], ne[2] = 1, ne[3] = t->ne[2];
        st[0] = t->st[0], st[1] = t->st[1], st[2] = 0, st[3] = t->st[2];
    } else {
        for (int d = 0; d < 4; d++)
            ne[d] = t->ne[d], st[d] = t->st[d];
    }
}

static int32_t or1(int32_t v)
{
    return v > 0 ? v : 1;
}

static rlx_status conv_run(const cpu_op_ctx *c, bool transpose)
{
    if (fast_conv(c, transpose))
        return RLX_OK;
    const cpu_tensor *x = c->in[0], *w = c->in[1], *o = c->out;
    const cpu_tensor *bias = c->n_in > 2 ? c->in[2] : NULL;
    bool is1d = x->rank == 3;
    int64_t xn[4], xs[4], wn[4], ws[4], on[4], os[4];
    as4d(x, xn, xs);
    as4d(w, wn, ws);
    as4d(o, on, os);
    const rlx_op_params *p = c->p;
    int64_t sh = is1d ? 1 : or1(p->conv.stride[0]), sw = or1(p->conv.stride[is1d ? 0 : 1]);
    int64_t ph = is1d ? 0 : p->conv.pad[0], pw = p->conv.pad[is1d ? 0 : 1];
    int64_t dh = is1d ? 1 : or1(p->conv.dilation[0]), dw = or1(p->conv.dilation[is1d ? 0 : 1]);
    int64_t G = or1(p->conv.groups);
    int64_t N = on[0], OC = on[1], OH = on[2], OW = on[3];
    int64_t IC = xn[1], IH = xn[2], IW = xn[3], KH = wn[2], KW = wn[3];
    int64_t icg = IC / G, ocg = OC / G;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oc = 0; oc < OC; oc++) {
            int64_t g = oc / ocg;
            float bv = bias ? ldf(bias, oc * bias->st[bias->rank - 1]) : 0.0f;
            for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    float acc = bv;
                    for (int64_t icl = 0; icl < icg; icl++) {
                        int64_t ic = g * icg + icl;
                        for (int64_t ky = 0; ky < KH; ky++) {
                            int64_t iy;
                            if (!transpose) {
                                iy = oy * sh - ph + ky * dh;
                            } else {
                                int64_t t = oy + ph - ky * dh;
                                if (t < 0 || t % sh)
                                    continue;
                                iy = t / sh;
                            }
                            if (iy < 0 || iy >= IH)
                                continue;
                            for (int64_t kx = 0; kx < KW; kx++) {
                                int64_t ix;
                                if (!transpose) {
                                    ix = ox * sw - pw + kx * dw;
                                } else {
                                    int64_t t = ox + pw - kx * dw;
                                    if (t < 0 || t % sw)
                                        continue;
                                    ix = t / sw;
                                }
                                if (ix < 0 || ix >= IW)
                                    continue;
                                float xv = ldf(x, n * xs[0] + ic * xs[1] + iy * xs[2] + ix * xs[3]);
                                /* conv: w [OC, IC/G, KH, KW]; transpose: w [IC, OC/G, KH, KW] */
                                int64_t wo = transpose ? ic * ws[0] + (oc - g * ocg) * ws[1]
                                                       : oc * ws[0] + icl * ws[1];
                                acc += xv * ldf(w, wo + ky * ws[2] + kx * ws[3]);
                            }
                        }
                    }
                    stf(o, n * os[0] + oc * os[1] + oy * os[2] + ox * os[3],
                        act_apply(p->conv.act, acc));
                }
        }
    return RLX_OK;
}

static rlx_status op_conv(const cpu_op_ctx *c)
{
    return conv_run(c, false);
}
static rlx_status op_conv_transpose(const cpu_op_ctx *c)
{
    return conv_run(c, true);
}

/* Resize and pooling run one plane (the last two dims) per task; a plane's
 * source rows and columns are computed once per op, in the formulas of the
 * reference they replaced, so the results are the same bits. */
typedef struct plane_job {
    const cpu_op_ctx *c;
    int r;
    int64_t IH, IW, OH, OW;
    const int64_t *yi0, *yi1, *xi0, *xi1; /* resize: source rows and columns */
    const float *ly, *lx;                 /* bilinear: weights of yi1, xi1 */
    const rlx_vec_ops *vt;                /* the CPU's row kernels */
    float *rows;     /* bilinear, f32: per thread, two source rows resampled along x */
    size_t rows_per; /* floats of rows per thread */
} plane_job;

/* Offsets of plane `pl` (row-major over dims 0..r-3 of o) in x and o. */
static void plane_offsets(const plane_job *J, int64_t pl, int64_t *xo, int64_t *oo)
{
    const cpu_tensor *x = J->c->in[0], *o = J->c->out;
    *xo = 0, *oo = 0;
    for (int d = J->r - 3; d >= 0; d--) {
        int64_t i = pl % o->ne[d];
        pl /= o->ne[d];
        *xo += i * x->st[d];
        *oo += i * o->st[d];
    }
}

static void resize_task(void *vc, int64_t pl, int thread)
{
    const plane_job *J = vc;
    const cpu_tensor *x = J->c->in[0], *o = J->c->out;
    int r = J->r;
    int64_t xo, oo, sy = x->st[r - 2], sx = x->st[r - 1], oy_st = o->st[r - 2],
                    ox_st = o->st[r - 1];
    plane_offsets(J, pl, &xo, &oo);
    bool f32 = x->dt == RLX_DTYPE_F32 && o->dt == RLX_DTYPE_F32;
    const float *xf = (const float *)x->p;
    float *of = (float *)o->p;
    int64_t J_cached[2] = {-1, -1}; /* the source rows in the two row buffers */
    for (int64_t oy = 0; oy < J->OH; oy++) {
        int64_t r0 = xo + J->yi0[oy] * sy, r1 = xo + J->yi1[oy] * sy, orow = oo + oy * oy_st;
        if (!J->ly) {
            for (int64_t ox = 0; ox < J->OW; ox++) {
                int64_t i = r0 + J->xi0[ox] * sx;
                if (f32)
                    of[orow + ox * ox_st] = xf[i];
                else
                    stf(o, orow + ox * ox_st, ldf(x, i));
            }
            continue;
        }
        float ly = J->ly[oy];
        if (J->rows && f32 && ox_st == 1) {
            /* each source row resampled along x once (a row of the 2x
             * upsampling serves two output rows), then rows blended */
            float *h[2] = {J->rows + (size_t)thread * J->rows_per, NULL};
            h[1] = h[0] + J->OW;
            int64_t src[2] = {J->yi0[oy], J->yi1[oy]};
            for (int k = 0; k < 2; k++) {
                int64_t slot = src[k] & 1; /* rows y and y + 1 never share a slot */
                float *hr = h[slot];
                if (J_cached[slot] != src[k]) {
                    const float *xr = xf + xo + src[k] * sy;
                    for (int64_t ox = 0; ox < J->OW; ox++) {
                        float lx = J->lx[ox];
                        hr[ox] = (1 - lx) * xr[J->xi0[ox] * sx] + lx * xr[J->xi1[ox] * sx];
                    }
                    J_cached[slot] = src[k];
                }
            }
            J->vt->lerp_rows(h[src[0] & 1], h[src[1] & 1], ly, of + orow, J->OW);
            continue;
        }
        for (int64_t ox = 0; ox < J->OW; ox++) {
            int64_t c0 = J->xi0[ox] * sx, c1 = J->xi1[ox] * sx;
            float lx = J->lx[ox], a, b, cc, d;
            if (f32) {
                a = xf[r0 + c0], b = xf[r0 + c1], cc = xf[r1 + c0], d = xf[r1 + c1];
            } else {
                a = ldf(x, r0 + c0), b = ldf(x, r0 + c1), cc = ldf(x, r1 + c0), d = ldf(x, r1 + c1);
            }
            float v = (1 - ly) * ((1 - lx) * a + lx * b) + ly * ((1 - lx) * cc + lx * d);
            if (f32)
                of[orow + ox * ox_st] = v;
            else
                stf(o, orow + ox * ox_st, v);
        }
    }
}

/* Source index (and bilinear weight) along one axis of n outputs from m. */
static void resize_axis(int64_t n, int64_t m, bool bil, bool ac, int64_t *i0, int64_t *i1, float *l)
{
    for (int64_t k = 0; k < n; k++) {
        if (!bil) {
            int64_t i = (int64_t)floor((double)k * (double)m / (double)n);
            i0[k] = i1[k] = i < m ? i : m - 1;
            continue;
        }
        double f;
        if (ac) {
            f = n > 1 ? (double)k * (double)(m - 1) / (double)(n - 1) : 0.0;
        } else {
            f = ((double)k + 0.5) * (double)m / (double)n - 0.5;
            f = f < 0 ? 0 : f;
        }
        int64_t a = (int64_t)f;
        a = a < m - 1 ? a : m - 1;
        i0[k] = a;
        i1[k] = a + 1 < m ? a + 1 : m - 1;
        l[k] = (float)(f - (double)a);
    }
}

static int64_t planes_of(const cpu_tensor *o)
{
    int64_t n = 1;
    for (int d = 0; d < o->rank - 2; d++)
        n *= o->ne[d];
    return n;
}

static rlx_status op_resize(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    int r = o->rank;
    int64_t IH = x->ne[r - 2], IW = x->ne[r - 1], OH = o->ne[r - 2], OW = o->ne[r - 1];
    if (numel(o) == 0)
        return RLX_OK;
    bool bil = c->p->resize.mode == RLX_RESIZE_BILINEAR, ac = c->p->resize.align_corners;
    size_t n = (size_t)(OH + OW), rows_per = (size_t)(2 * OW + 16);
    int64_t *ix = malloc(2 * n * sizeof *ix);
    float *lw = malloc(n * sizeof *lw);
    float *rows =
        bil ? malloc((size_t)rlx_threadpool_size(c->pool) * rows_per * sizeof(float)) : NULL;
    if (!ix || !lw || (bil && !rows)) {
        free(ix);
        free(lw);
        free(rows);
        return RLX_ERR_NO_MEMORY;
    }
    int64_t *yi0 = ix, *yi1 = ix + OH, *xi0 = ix + 2 * OH, *xi1 = ix + 2 * OH + OW;
    resize_axis(OH, IH, bil, ac, yi0, yi1, lw);
    resize_axis(OW, IW, bil, ac, xi0, xi1, lw + OH);
    plane_job J = {.c = c,
                   .r = r,
                   .IH = IH,
                   .IW = IW,
                   .OH = OH,
                   .OW = OW,
                   .yi0 = yi0,
                   .yi1 = yi1,
                   .xi0 = xi0,
                   .xi1 = xi1,
                   .ly = bil ? lw : NULL,
                   .lx = bil ? lw + OH : NULL,
                   .vt = &rlx_cpu_table_get()->vec,
                   .rows = rows,
                   .rows_per = rows_per};
    rlx_parallel_for(c->pool, planes_of(o), resize_task, &J);
    free(ix);
    free(lw);
    free(rows);
    return RLX_OK;
}

static void pool_task(void *vc, int64_t pl, int thread)
{
    (void)thread;
    const plane_job *J = vc;
    const cpu_op_ctx *c = J->c;
    const cpu_tensor *x = c->in[0], *o = c->out;
    int r = J->r;
    int64_t IH = J->IH, IW = J->IW;
    int64_t kh = or1(c->p->pool.kernel[0]), kw = or1(c->p->pool.kernel[1]);
    int64_t sh = c->p->pool.stride[0] > 0 ? c->p->pool.stride[0] : kh;
    int64_t sw = c->p->pool.stride[1] > 0 ? c->p->pool.stride[1] : kw;
    int64_t ph = c->p->pool.pad[0], pw = c->p->pool.pad[1];
    bool mx = c->p->pool.mode == RLX_POOL_MAX;
    bool f32 = x->dt == RLX_DTYPE_F32 && o->dt == RLX_DTYPE_F32;
    int64_t xo, oo, sy = x->st[r - 2], sx = x->st[r - 1];
    plane_offsets(J, pl, &xo, &oo);
    int64_t oy0 = 0;
    if (J->vt && mx && f32 && kh == 2 && kw == 2 && sh == 2 && sw == 2 && ph == 0 && pw == 0 &&
        sx == 1 && o->st[r - 1] == 1) {
        /* 2x2 max pooling of stride 2 (U-Nets' downsampling): whole rows
         * at a time; a last column or row that the ceil mode adds is left
         * to the general loop below */
        int64_t nfull = IW / 2 < J->OW ? IW / 2 : J->OW;
        const float *xf = (const float *)x->p;
        float *of = (float *)o->p;
        for (; oy0 < J->OH && 2 * oy0 + 1 < IH; oy0++) {
            const float *a = xf + xo + 2 * oy0 * sy;
            float *d = of + oo + oy0 * o->st[r - 2];
            J->vt->max_pool2_row(a, a + sy, d, nfull);
            if (nfull < J->OW) /* ceil mode, odd width: the last column alone */
                for (int64_t ox = nfull; ox < J->OW; ox++) {
                    float v = -INFINITY;
                    for (int64_t iy = 2 * oy0; iy < 2 * oy0 + 2; iy++)
                        for (int64_t ix = 2 * ox; ix < 2 * ox + 2 && ix < IW; ix++)
                            v = xf[xo + iy * sy + ix] > v ? xf[xo + iy * sy + ix] : v;
                    d[ox] = v;
                }
        }
    }
    for (int64_t oy = oy0; oy < J->OH; oy++)
        for (int64_t ox = 0; ox < J->OW; ox++) {
            int64_t hs = oy * sh - ph, ws = ox * sw - pw;
            int64_t he = hs + kh < IH + ph ? hs + kh : IH + ph;
            int64_t we = ws + kw < IW + pw ? ws + kw : IW + pw;
            int64_t area = (he - hs) * (we - ws);
            int64_t h0 = hs < 0 ? 0 : hs, w0 = ws < 0 ? 0 : ws;
            int64_t h1 = he < IH ? he : IH, w1 = we < IW ? we : IW;
            float acc = mx ? -INFINITY : 0.0f;
            for (int64_t iy = h0; iy < h1; iy++)
                for (int64_t ix = w0; ix < w1; ix++) {
                    int64_t i = xo + iy * sy + ix * sx;
                    float v = f32 ? ((const float *)x->p)[i] : ldf(x, i);
                    acc = mx ? (v > acc ? v : acc) : acc + v;
                }
            if (!mx)
                acc = area > 0 ? acc / (float)area : 0.0f;
            stf(o, oo + oy * o->st[r - 2] + ox * o->st[r - 1], acc);
        }
}

/* Average pooling counts padded positions (PyTorch's count_include_pad
 * default); max pooling ignores them. */
static rlx_status op_pool(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    int r = o->rank;
    if (numel(o) == 0)
        return RLX_OK;
    plane_job J = {.c = c,
                   .r = r,
                   .IH = x->ne[r - 2],
                   .IW = x->ne[r - 1],
                   .OH = o->ne[r - 2],
                   .OW = o->ne[r - 1],
                   .vt = &rlx_cpu_table_get()->vec};
    rlx_parallel_for(c->pool, planes_of(o), pool_task, &J);
    return RLX_OK;
}

/* ---- kernels.h fast paths -----------------------------------------------
 * Each returns true when it handled the instruction; otherwise the
 * reference loop below runs. They take f32 data with unit stride along the
 * last dim (what the compiler produces for hot ops); anything else falls
 * back. */

/* Dims 0..r-2 collapse into rows with one stride and the last dim is
 * contiguous. */
static bool as_rows(const cpu_tensor *t, int64_t *n_rows, int64_t *ld)
{
    int r = t->rank;
    if (t->ne[r - 1] > 1 && t->st[r - 1] != 1)
        return false;
    int64_t rows = 1, step = -1, expect = -1;
    for (int d = r - 2; d >= 0; d--) {
        if (t->ne[d] == 1)
            continue;
        if (step < 0) {
            step = t->st[d];
            expect = step * t->ne[d];
        } else {
            if (t->st[d] != expect)
                return false;
            expect *= t->ne[d];
        }
        rows *= t->ne[d];
    }
    *n_rows = rows;
    *ld = step < 0 ? t->ne[r - 1] : step;
    return true;
}

static bool same_dims(const cpu_tensor *a, const cpu_tensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->ne[d] != b->ne[d])
            return false;
    return true;
}

/* A per-channel f32 vector of n elements (any leading 1s), contiguous. */
static const float *f32_vec(const cpu_tensor *t, int64_t n)
{
    if (!t)
        return NULL;
    if (t->dt != RLX_DTYPE_F32 || numel(t) != n || (n > 1 && t->st[t->rank - 1] != 1))
        return NULL;
    return (const float *)t->p;
}

static bool is_contig(const cpu_tensor *t)
{
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        if (t->ne[d] != 1 && t->st[d] != s)
            return false;
        s *= t->ne[d];
    }
    return true;
}

static void *kscratch_for(const cpu_op_ctx *c, size_t need, size_t *bytes)
{
    /* too small (cannot happen for planned shapes): let the kernel allocate */
    if (!c->kscratch || need > c->kscratch_bytes) {
        *bytes = 0;
        return NULL;
    }
    *bytes = c->kscratch_bytes;
    return c->kscratch;
}

/* Bytes between the rows of a packed weight [N, K] whose rows are `stride`
 * elements apart (one row: its own packed size). */
static size_t weight_row_bytes(const rlx_dtype_info *wi, int64_t stride, int64_t N, int64_t K)
{
    return (size_t)((N == 1 ? K : stride) / (int64_t)wi->block_size * (int64_t)wi->type_size);
}

bool cpu_matvec_groupable(const rlx_lir *lir, const rlx_lir_instr *a, const rlx_lir_instr *b)
{
    const rlx_lir_instr *ins[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        const rlx_lir_instr *m = ins[i];
        if (m->op != RLX_OP_MATMUL || m->n_in != 2 || m->p.matmul.trans_a || !m->p.matmul.trans_b ||
            m->p.matmul.has_bias || (m->p.matmul.alpha != 0.0f && m->p.matmul.alpha != 1.0f))
            return false;
        const rlx_lir_value *w = &lir->values[m->in[1]];
        bool packed = rlx_dtype_get(w->dtype)->quantized || w->dtype == RLX_DTYPE_F16 ||
                      w->dtype == RLX_DTYPE_BF16;
        if (w->shape.rank != 2 || !packed)
            return false;
    }
    /* the same x; b reads neither a's output nor writes where a reads */
    return a->in[0] == b->in[0] && b->in[1] != a->out && a->in[1] != b->out && a->out != b->out;
}

size_t cpu_matvec_group_kscratch(const rlx_lir *lir, const rlx_lir_instr *first, int n,
                                 const rlx_sym_values *bounds)
{
    const rlx_lir_value *x = &lir->values[first->in[0]];
    if (x->shape.rank < 1)
        return 0;
    int64_t K = rlx_dim_eval(x->shape.d[x->shape.rank - 1], bounds);
    return rlx_cpu_matvec_multi_scratch_bytes(n, K);
}

bool cpu_matvec_group_run(const cpu_op_ctx *const *c, int n)
{
    if (n < 2 || n > RLX_CPU_MV_MULTI_MAX)
        return false;
    const cpu_tensor *x = c[0]->in[0];
    int rx = x->rank;
    int64_t K = x->ne[rx - 1];
    if (x->dt != RLX_DTYPE_F32 || K < 1 || (x->st[rx - 1] != 1 && K > 1))
        return false;
    for (int d = 0; d + 1 < rx; d++)
        if (x->ne[d] != 1)
            return false; /* more than one row: the GEMM paths, one by one */
    rlx_cpu_mv_seg seg[RLX_CPU_MV_MULTI_MAX];
    for (int s = 0; s < n; s++) {
        const cpu_tensor *w = c[s]->in[1], *o = c[s]->out;
        const rlx_dtype_info *wi = rlx_dtype_get(w->dt);
        int ro = o->rank;
        if (c[s]->in[0] != x || w->rank != 2 || w->ne[1] != K || o->dt != RLX_DTYPE_F32 ||
            o->ne[ro - 1] != w->ne[0] || (o->st[ro - 1] != 1 && w->ne[0] > 1) ||
            (w->st[1] != 1 && K > 1) || w->st[0] % (int64_t)wi->block_size)
            return false;
        for (int d = 0; d + 1 < ro; d++)
            if (o->ne[d] != 1)
                return false;
        seg[s] = (rlx_cpu_mv_seg){
            .wtype = w->dt,
            .w = w->p,
            .w_row_bytes = weight_row_bytes(wi, w->st[0], w->ne[0], K),
            .N = w->ne[0],
            .y = (float *)(void *)o->p,
        };
    }
    size_t ksb = 0;
    void *ks = kscratch_for(c[0], rlx_cpu_matvec_multi_scratch_bytes(n, K), &ksb);
    if (!ks ||
        !rlx_cpu_matvec_multi(c[0]->pool, n, seg, (const float *)(const void *)x->p, K, ks, ksb))
        return false;
    for (int s = 0; s < n; s++) /* each product's activation, as fast_matmul does it */
        matmul_epilogue(c[s], NULL, seg[s].N);
    return true;
}

static bool fast_matmul(const cpu_op_ctx *c)
{
    const cpu_tensor *a = c->in[0], *b = c->in[1], *o = c->out;
    const rlx_op_params *p = c->p;
    bool ta = p->matmul.trans_a, tb = p->matmul.trans_b;
    int ro = o->rank, ra = a->rank, rb = b->rank;
    if (a->dt != RLX_DTYPE_F32 || o->dt != RLX_DTYPE_F32 || o->st[ro - 1] != 1)
        return false;
    int64_t M = o->ne[ro - 2], N = o->ne[ro - 1], K = ta ? a->ne[ra - 2] : a->ne[ra - 1];
    if (M * N == 0 || K == 0)
        return false;
    int64_t a_sm = ta ? a->st[ra - 1] : a->st[ra - 2], a_sk = ta ? a->st[ra - 2] : a->st[ra - 1];
    int64_t b_sn = tb ? b->st[rb - 2] : b->st[rb - 1], b_sk = tb ? b->st[rb - 1] : b->st[rb - 2];
    float alpha = p->matmul.alpha == 0.0f ? 1.0f : p->matmul.alpha;
    bool packed = !ta && tb && (b_sk == 1 || K == 1) && (a_sk == 1 || K == 1) &&
                  rlx_cpu_matmul_supports(b->dt);
    bool gemm = b->dt == RLX_DTYPE_F32;
    int64_t lda = 0, ldb = 0;
    if (!packed && gemm) {
        /* sgemm wants unit stride along each operand's rows */
        if (!ta && (a_sk == 1 || K == 1))
            lda = a_sm;
        else if (ta && (a_sm == 1 || M == 1))
            lda = a_sk;
        else
            return false;
        if (tb && (b_sk == 1 || K == 1))
            ldb = b_sn;
        else if (!tb && (b_sn == 1 || N == 1))
            ldb = b_sk;
        else
            return false;
        if (lda < (ta ? M : K) || ldb < (tb ? K : N))
            return false;
    } else if (!packed) {
        return false;
    }
    if (o->st[ro - 2] < N && M > 1)
        return false;
    const cpu_tensor *bias = c->n_in > 2 && p->matmul.has_bias ? c->in[2] : NULL;
    int nb = ro - 2;
    int64_t abst[RLX_MAX_DIMS] = {0}, bbst[RLX_MAX_DIMS] = {0};
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - (ra - 2)), db = d - (nb - (rb - 2));
        abst[d] = (da >= 0 && a->ne[da] != 1) ? a->st[da] : 0;
        bbst[d] = (db >= 0 && b->ne[db] != 1) ? b->st[db] : 0;
    }
    const rlx_dtype_info *bi = rlx_dtype_get(b->dt);
    size_t ksb = 0;
    void *ks = packed
                   ? kscratch_for(c, rlx_cpu_matmul_scratch_bytes(b->dt, M, K, c->n_threads), &ksb)
                   : NULL;
    int64_t ldo = M > 1 ? o->st[ro - 2] : N;
    int64_t idx[RLX_MAX_DIMS] = {0};
    do {
        int64_t ao = nd_off(idx, abst, nb), bo = nd_off(idx, bbst, nb), oo = nd_off(idx, o->st, nb);
        const float *ap = (const float *)a->p + ao;
        float *op = (float *)o->p + oo;
        if (packed) {
            size_t row_bytes = weight_row_bytes(bi, b_sn, N, K);
            if (rlx_cpu_matmul(c->pool, b->dt, elem_ptr(b, bo), row_bytes, N, K, ap,
                               M > 1 ? a_sm : K, M, op, ldo, ks, ksb) != RLX_OK)
                return false; /* nothing written yet for this batch: reference redoes it */
            if (alpha != 1.0f)
                for (int64_t m = 0; m < M; m++)
                    for (int64_t n = 0; n < N; n++)
                        op[m * ldo + n] *= alpha;
        } else {
            rlx_cpu_sgemm(c->pool, RLX_CPU_GEMM_AUTO, ta, tb, M, N, K, alpha, ap, lda,
                          (const float *)b->p + bo, ldb, 0.0f, op, ldo);
        }
    } while (nd_next(idx, o->ne, nb));
    matmul_epilogue(c, bias, N);
    return true;
}

/* bias and activation over the whole output; a contiguous output without
 * bias takes the vector activations over the pool */
static void matmul_epilogue(const cpu_op_ctx *c, const cpu_tensor *bias, int64_t N)
{
    const cpu_tensor *o = c->out;
    const rlx_op_params *p = c->p;
    int ro = o->rank;
    rlx_cpu_act_kind vk = RLX_CPU_ACT_SILU;
    bool vec_act = !bias && is_contig(o) && (ro < 2 || o->st[ro - 2] == N);
    switch (p->matmul.act) {
    case RLX_ACT_SILU:
        vk = RLX_CPU_ACT_SILU;
        break;
    case RLX_ACT_GELU_ERF:
        vk = RLX_CPU_ACT_GELU;
        break;
    case RLX_ACT_GELU_TANH:
        vk = RLX_CPU_ACT_GELU_TANH;
        break;
    default:
        vec_act = false;
    }
    if (vec_act) {
        rlx_cpu_act_pool(c->pool, vk, (const float *)o->p, (float *)o->p, numel(o));
    } else if (bias || p->matmul.act != RLX_ACT_NONE) {
        int64_t bst = bias ? (bias->ne[bias->rank - 1] == 1 ? 0 : bias->st[bias->rank - 1]) : 0;
        int64_t oidx[RLX_MAX_DIMS] = {0};
        do {
            float *row = (float *)o->p + nd_off(oidx, o->st, ro - 1);
            for (int64_t n = 0; n < N; n++) {
                float v = row[n];
                if (bias)
                    v += ldf(bias, n * bst);
                row[n] = act_apply(p->matmul.act, v);
            }
        } while (nd_next(oidx, o->ne, ro - 1));
    }
}

static bool fast_softmax(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    const cpu_tensor *mask = c->n_in > 1 ? c->in[1] : NULL;
    int r = o->rank;
    int64_t L = o->ne[r - 1];
    if (x->dt != RLX_DTYPE_F32 || o->dt != RLX_DTYPE_F32 || !same_dims(x, o) || L == 0)
        return false;
    if ((L > 1 && (x->st[r - 1] != 1 || o->st[r - 1] != 1)) || numel(o) == 0)
        return false;
    int64_t mst[RLX_MAX_DIMS] = {0};
    if (mask) {
        if (mask->dt != RLX_DTYPE_F32)
            return false;
        bcast_strides(mask, o, mst);
        if (L > 1 && mst[r - 1] != 1)
            return false;
    }
    float scale = c->p->softmax.scale == 0.0f ? 1.0f : c->p->softmax.scale;
    if (c->p->softmax.softcap < 0.0f)
        return false;
    /* blocks over dims 0..r-3, rows along r-2 */
    int64_t rows = r >= 2 ? o->ne[r - 2] : 1;
    int64_t ldx = r >= 2 ? x->st[r - 2] : L, ldo = r >= 2 ? o->st[r - 2] : L;
    int64_t ldm = r >= 2 ? mst[r - 2] : 0;
    int nb = r >= 2 ? r - 2 : 0;
    int64_t one = 1;
    int64_t idx[RLX_MAX_DIMS] = {0};
    do {
        const float *xp = (const float *)x->p + nd_off(idx, x->st, nb);
        float *op = (float *)o->p + nd_off(idx, o->st, nb);
        const float *mp = mask ? (const float *)mask->p + nd_off(idx, mst, nb) : NULL;
        rlx_cpu_softmax(c->pool, xp, ldx, op, ldo, rows, L, scale, mp, ldm, c->p->softmax.softcap);
    } while (nd_next(idx, nb ? o->ne : &one, nb));
    return true;
}

static bool fast_norm(const cpu_op_ctx *c, int kind, const cpu_tensor *w, const cpu_tensor *bias)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    int r = o->rank;
    int64_t L = o->ne[r - 1], nx, ldx, no, ldo;
    if (x->dt != RLX_DTYPE_F32 || o->dt != RLX_DTYPE_F32 || !same_dims(x, o) || L == 0)
        return false;
    if (!as_rows(x, &nx, &ldx) || !as_rows(o, &no, &ldo) || nx != no)
        return false;
    const float *wp = f32_vec(w, L), *bp = f32_vec(bias, L);
    if ((w && !wp) || (bias && !bp))
        return false;
    float eps = c->p->norm.eps;
    if (kind == 2 /* add + rms */) {
        const cpu_tensor *x2 = c->in[1];
        int64_t n2, ld2;
        if (x2->dt != RLX_DTYPE_F32 || !same_dims(x2, o) || !as_rows(x2, &n2, &ld2))
            return false;
        rlx_cpu_add_rms_norm(c->pool, (const float *)x->p, ldx, (const float *)x2->p, ld2, NULL, 0,
                             (float *)o->p, ldo, no, L, wp, eps);
    } else if (kind == 1) {
        rlx_cpu_rms_norm(c->pool, (const float *)x->p, ldx, (float *)o->p, ldo, no, L, wp, eps);
    } else {
        rlx_cpu_layer_norm(c->pool, (const float *)x->p, ldx, (float *)o->p, ldo, no, L, wp, bp,
                           eps);
    }
    return true;
}

static bool fast_group_norm(const cpu_op_ctx *c, const cpu_tensor *w, const cpu_tensor *bias)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    if (x->dt != RLX_DTYPE_F32 || o->dt != RLX_DTYPE_F32 || !same_dims(x, o) || !is_contig(x) ||
        !is_contig(o) || x->rank < 2)
        return false;
    int64_t C = x->ne[1], G = c->p->norm.groups > 0 ? c->p->norm.groups : 1;
    if (C % G)
        return false;
    const float *wp = f32_vec(w, C), *bp = f32_vec(bias, C);
    if ((w && !wp) || (bias && !bp))
        return false;
    int64_t hw = 1;
    for (int d = 2; d < x->rank; d++)
        hw *= x->ne[d];
    if (numel(x) == 0)
        return true;
    rlx_cpu_group_norm(c->pool, (const float *)x->p, (float *)o->p, x->ne[0], C, hw, G, wp, bp,
                       c->p->norm.eps);
    return true;
}

static bool fast_rope(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->in[0], *pos = c->in[1], *o = c->out;
    const cpu_tensor *ff = c->n_in > 2 ? c->in[2] : NULL;
    int r = x->rank;
    if ((r != 3 && r != 4) || x->dt != RLX_DTYPE_F32 || o->dt != RLX_DTYPE_F32 ||
        !same_dims(x, o) || pos->dt != RLX_DTYPE_I32 || pos->rank != 1)
        return false;
    int64_t D = x->ne[r - 1];
    if (D > 1 && (x->st[r - 1] != 1 || o->st[r - 1] != 1))
        return false;
    int sa = c->p->rope.seq_axis < 0 ? c->p->rope.seq_axis + r : c->p->rope.seq_axis;
    int first = r == 4 ? 1 : 0; /* after the batch axis */
    if (sa != first && sa != first + 1)
        return false;
    int ha = sa == first ? first + 1 : first;
    int64_t T = x->ne[sa], H = x->ne[ha];
    if (pos->ne[0] != T || (T > 1 && pos->st[0] != 1))
        return false;
    int64_t n_rot = c->p->rope.n_rot > 0 ? c->p->rope.n_rot : D;
    if (n_rot > D || n_rot % 2)
        return false;
    const float *ffp = ff ? f32_vec(ff, n_rot / 2) : NULL;
    if (ff && !ffp)
        return false;
    rlx_cpu_rope_params rp = rlx_cpu_rope_default_params();
    rp.mode = c->p->rope.mode == RLX_ROPE_NEOX ? RLX_CPU_ROPE_NEOX : RLX_CPU_ROPE_NORMAL;
    rp.n_rot = (int)n_rot;
    rp.freq_base = c->p->rope.freq_base > 0 ? c->p->rope.freq_base : 10000.0f;
    rp.freq_scale = c->p->rope.freq_scale != 0.0f ? c->p->rope.freq_scale : 1.0f;
    rp.freq_factors = ffp;
    rp.attn_factor = 1.0f;
    if (numel(o) == 0)
        return true;
    const float *table = NULL;
    cpu_rope_table *tb = c->rope;
    if (tb && (uint64_t)T * (uint64_t)n_rot <= tb->cap) {
        if (tb->filled != *tb->run || tb->n_tokens != T) {
            rlx_cpu_rope_table(c->pool, &rp, (const int32_t *)pos->p, T, tb->data);
            tb->filled = *tb->run;
            tb->n_tokens = T;
        }
        table = tb->data;
    }
    int64_t B = r == 4 ? x->ne[0] : 1;
    for (int64_t b = 0; b < B; b++) {
        const float *xp = (const float *)x->p + (r == 4 ? b * x->st[0] : 0);
        float *op = (float *)o->p + (r == 4 ? b * o->st[0] : 0);
        if (table)
            rlx_cpu_rope_apply(c->pool, &rp, table, xp, x->st[sa], x->st[ha], op, o->st[sa],
                               o->st[ha], T, H, D);
        else
            rlx_cpu_rope(c->pool, &rp, xp, x->st[sa], x->st[ha], op, o->st[sa], o->st[ha], T, H, D,
                         (const int32_t *)pos->p);
    }
    return true;
}

/* the rotated dims of a ROPE (its head dim is a constant, graph.c checks) */
static int64_t rope_n_rot(const rlx_lir *lir, const rlx_lir_instr *ins)
{
    const rlx_lir_value *x = &lir->values[ins->in[0]];
    return ins->p.rope.n_rot > 0 ? ins->p.rope.n_rot : x->shape.d[x->shape.rank - 1].k;
}

bool cpu_rope_same_angles(const rlx_lir *lir, const rlx_lir_instr *a, const rlx_lir_instr *b)
{
    return a->op == RLX_OP_ROPE && b->op == RLX_OP_ROPE && a->n_in >= 2 && b->n_in >= 2 &&
           a->n_in == b->n_in && a->in[1] == b->in[1] && (a->n_in < 3 || a->in[2] == b->in[2]) &&
           rope_n_rot(lir, a) == rope_n_rot(lir, b) && a->p.rope.freq_base == b->p.rope.freq_base &&
           a->p.rope.freq_scale == b->p.rope.freq_scale;
}

size_t cpu_rope_table_floats(const rlx_lir *lir, const rlx_lir_instr *ins,
                             const rlx_sym_values *bounds)
{
    if (ins->op != RLX_OP_ROPE || ins->n_in < 2)
        return 0;
    const rlx_lir_value *pos = &lir->values[ins->in[1]];
    if (pos->shape.rank != 1)
        return 0;
    int64_t T = rlx_dim_eval(pos->shape.d[0], bounds), n_rot = rope_n_rot(lir, ins);
    return T > 0 && n_rot > 0 ? (size_t)T * (size_t)n_rot : 0;
}

static bool attn_params(const cpu_op_ctx *c, rlx_cpu_attn_params *ap, int64_t *B)
{
    const cpu_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *o = c->out;
    const cpu_tensor *bias = c->n_in > 3 ? c->in[3] : NULL;
    int rq = q->rank;
    if (rq != k->rank || rq != v->rank || rq != o->rank)
        return false;
    if (q->dt != RLX_DTYPE_F32 || o->dt != RLX_DTYPE_F32 || k->dt != v->dt ||
        (k->dt != RLX_DTYPE_F32 && k->dt != RLX_DTYPE_F16 && k->dt != RLX_DTYPE_Q8_0))
        return false;
    int64_t D = q->ne[rq - 1], Dv = v->ne[rq - 1];
    if (D != Dv || k->ne[rq - 1] != D || o->ne[rq - 1] != D)
        return false;
    if (D > 1 &&
        (q->st[rq - 1] != 1 || k->st[rq - 1] != 1 || v->st[rq - 1] != 1 || o->st[rq - 1] != 1))
        return false;
    *B = rq == 4 ? q->ne[0] : 1;
    if (rq == 4 && (k->ne[0] != *B || v->ne[0] != *B))
        return false;
    memset(ap, 0, sizeof *ap);
    ap->n_q = q->ne[rq - 2];
    ap->n_kv = k->ne[rq - 2];
    ap->n_heads = (int)q->ne[rq - 3];
    ap->n_kv_heads = (int)k->ne[rq - 3];
    ap->head_dim = (int)D;
    if (ap->n_kv_heads <= 0 || ap->n_heads % ap->n_kv_heads || v->ne[rq - 3] != ap->n_kv_heads)
        return false;
    ap->q_ld_tok = q->st[rq - 2];
    ap->q_ld_head = q->st[rq - 3];
    ap->kv_type = k->dt;
    ap->k_ld_tok = k->st[rq - 2];
    ap->k_ld_head = k->st[rq - 3];
    ap->v_ld_tok = v->st[rq - 2];
    ap->v_ld_head = v->st[rq - 3];
    ap->o_ld_tok = o->st[rq - 2];
    ap->o_ld_head = o->st[rq - 3];
    ap->scale = c->p->attn.scale != 0.0f ? c->p->attn.scale : 1.0f / sqrtf((float)D);
    ap->softcap = c->p->attn.softcap;
    if (ap->softcap < 0.0f)
        return false;
    ap->q_pos0 = ap->n_kv - ap->n_q;
    ap->window = c->p->attn.window;
    switch (c->p->attn.mask) {
    case RLX_MASK_CAUSAL:
        ap->mask = RLX_CPU_ATTN_CAUSAL;
        break;
    case RLX_MASK_WINDOW:
        ap->mask = RLX_CPU_ATTN_SLIDING;
        break;
    default:
        ap->mask = RLX_CPU_ATTN_NONE;
    }
    if (bias) {
        /* an additive bias replaces the built-in masks in the kernel */
        if (ap->mask != RLX_CPU_ATTN_NONE || bias->dt != RLX_DTYPE_F32)
            return false;
        ap->mask = RLX_CPU_ATTN_BIAS;
    }
    return true;
}

static bool fast_attention(const cpu_op_ctx *c)
{
    const cpu_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *o = c->out;
    const cpu_tensor *bias = c->n_in > 3 ? c->in[3] : NULL;
    rlx_cpu_attn_params ap;
    int64_t B;
    if (!attn_params(c, &ap, &B))
        return false;
    int64_t bst[4] = {0, 0, 0, 0};
    if (bias) {
        cpu_tensor full = *o;
        full.rank = 4;
        int64_t gw = c->p->attn.bias_grid_w;
        if (gw > 0 && (ap.n_kv % gw || ap.n_kv == 0))
            return false;
        int64_t dims[4] = {B, ap.n_heads, ap.n_q, gw > 0 ? ap.n_kv / gw + gw : ap.n_kv};
        memcpy(full.ne, dims, sizeof dims);
        bcast_strides(bias, &full, bst);
        if (dims[3] > 1 && bst[3] != 1)
            return false;
        ap.bias_ld_q = bst[2];
        ap.bias_ld_head = bst[1];
        ap.bias_grid_w = gw;
    }
    if (B * ap.n_heads * ap.n_q == 0)
        return true;
    size_t ksb = 0;
    void *ks = kscratch_for(c, rlx_cpu_attention_scratch_bytes(&ap, c->n_threads), &ksb);
    int rq = q->rank;
    size_t kes = k->dt == RLX_DTYPE_F16 ? 2 : 4;
    for (int64_t b = 0; b < B; b++) {
        rlx_cpu_attn_params p = ap;
        p.q = (const float *)q->p + (rq == 4 ? b * q->st[0] : 0);
        int64_t kbo = rq == 4 && k->ne[0] > 1 ? b * k->st[0] : 0;
        int64_t vbo = rq == 4 && v->ne[0] > 1 ? b * v->st[0] : 0;
        if (k->dt == RLX_DTYPE_Q8_0) { /* whole 34-byte blocks of 32 */
            if (kbo % 32 || vbo % 32)
                return false;
            p.k = k->p + kbo / 32 * 34;
            p.v = v->p + vbo / 32 * 34;
        } else {
            p.k = k->p + kbo * (int64_t)kes;
            p.v = v->p + vbo * (int64_t)kes;
        }
        p.out = (float *)o->p + (rq == 4 ? b * o->st[0] : 0);
        if (bias)
            p.bias = (const float *)bias->p + b * bst[0];
        if (rlx_cpu_attention(c->pool, &p, ks, ksb) != RLX_OK)
            return false; /* the reference loop redoes every batch */
    }
    return true;
}

/* The kernels' form of a fused activation. */
static bool cpu_act_kind(rlx_act a, rlx_cpu_conv2d_params *cp)
{
    static const int kinds[] = {
        [RLX_ACT_RELU] = RLX_CPU_ACT_RELU,           [RLX_ACT_GELU_ERF] = RLX_CPU_ACT_GELU,
        [RLX_ACT_GELU_TANH] = RLX_CPU_ACT_GELU_TANH, [RLX_ACT_SILU] = RLX_CPU_ACT_SILU,
        [RLX_ACT_SIGMOID] = RLX_CPU_ACT_SIGMOID,     [RLX_ACT_TANH] = RLX_CPU_ACT_TANH};
    if ((int)a <= (int)RLX_ACT_NONE || (size_t)a >= sizeof kinds / sizeof kinds[0])
        return false;
    cp->has_act = true;
    cp->act = kinds[a];
    return true;
}

/* The kernel's parameters of a conv op over 4-d dims (1-d convs as H = 1). */
static rlx_cpu_conv2d_params conv_params(const rlx_op_params *p, bool is1d, const int64_t *xn,
                                         const int64_t *wn, const int64_t *on)
{
    rlx_cpu_conv2d_params cp = rlx_cpu_conv2d_default_params();
    cp.n = xn[0];
    cp.c_in = xn[1];
    cp.h_in = xn[2];
    cp.w_in = xn[3];
    cp.c_out = on[1];
    cp.kh = wn[2];
    cp.kw = wn[3];
    cp.stride_h = is1d ? 1 : or1(p->conv.stride[0]);
    cp.stride_w = or1(p->conv.stride[is1d ? 0 : 1]);
    cp.pad_h = is1d ? 0 : p->conv.pad[0];
    cp.pad_w = p->conv.pad[is1d ? 0 : 1];
    cp.dil_h = is1d ? 1 : or1(p->conv.dilation[0]);
    cp.dil_w = or1(p->conv.dilation[is1d ? 0 : 1]);
    cp.groups = or1(p->conv.groups);
    cp.out_pad_h = is1d ? 0 : p->conv.out_pad[0];
    cp.out_pad_w = p->conv.out_pad[is1d ? 0 : 1];
    return cp;
}

static bool fast_conv(const cpu_op_ctx *c, bool transpose)
{
    const cpu_tensor *x = c->in[0], *w = c->in[1], *o = c->out;
    const cpu_tensor *bias = c->n_in > 2 && c->p->conv.has_bias ? c->in[2] : NULL;
    if (x->dt != RLX_DTYPE_F32 || o->dt != RLX_DTYPE_F32 || !is_contig(x) || !is_contig(w) ||
        !is_contig(o))
        return false;
    /* F16/BF16 weights (whisper's and SAM's convolutions in GGUF) are widened
     * into the kernel scratch, sized for them at program_create */
    const float *wf = (const float *)w->p;
    if (w->dt != RLX_DTYPE_F32) {
        int64_t nw = numel(w);
        if ((w->dt != RLX_DTYPE_F16 && w->dt != RLX_DTYPE_BF16) || !c->kscratch ||
            (size_t)nw * sizeof(float) > c->kscratch_bytes)
            return false;
        float *tmp = c->kscratch;
        if (w->dt == RLX_DTYPE_F16)
            rlx_cpu_f16_to_f32_row((const uint16_t *)w->p, tmp, nw);
        else
            rlx_cpu_bf16_to_f32_row((const uint16_t *)w->p, tmp, nw);
        wf = tmp;
    }
    bool is1d = x->rank == 3;
    int64_t xn[4], xs[4], wn[4], ws[4], on[4], os[4];
    as4d(x, xn, xs);
    as4d(w, wn, ws);
    as4d(o, on, os);
    const float *bp = bias ? f32_vec(bias, on[1]) : NULL;
    if (bias && !bp)
        return false;
    rlx_cpu_conv2d_params cp = conv_params(c->p, is1d, xn, wn, on);
    if (c->p->conv.act != RLX_ACT_NONE && !cpu_act_kind(c->p->conv.act, &cp))
        return false;
    /* the rest of the kernel scratch, past the widened weights */
    size_t used = w->dt != RLX_DTYPE_F32 ? ((size_t)numel(w) * sizeof(float) + 63) / 64 * 64 : 0;
    if (c->kscratch && c->kscratch_bytes > used) {
        cp.scratch = (float *)((uint8_t *)c->kscratch + used);
        cp.scratch_floats = (c->kscratch_bytes - used) / sizeof(float);
    }
    int64_t oh = transpose ? rlx_cpu_conv_transpose2d_out_h(&cp) : rlx_cpu_conv2d_out_h(&cp);
    int64_t ow = transpose ? rlx_cpu_conv_transpose2d_out_w(&cp) : rlx_cpu_conv2d_out_w(&cp);
    if (oh != on[2] || ow != on[3] || on[0] != xn[0])
        return false;
    if (numel(o) == 0)
        return true;
    rlx_status st =
        transpose
            ? rlx_cpu_conv_transpose2d(c->pool, &cp, (const float *)x->p, wf, bp, (float *)o->p)
            : rlx_cpu_conv2d(c->pool, &cp, (const float *)x->p, wf, bp, (float *)o->p);
    return st == RLX_OK;
}

static bool fast_act(const cpu_op_ctx *c, rlx_op op)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    if (x->dt != RLX_DTYPE_F32 || o->dt != RLX_DTYPE_F32 || !same_dims(x, o) || !is_contig(x) ||
        !is_contig(o))
        return false;
    rlx_cpu_act_kind a;
    switch (op) {
    case RLX_OP_SILU:
        a = RLX_CPU_ACT_SILU;
        break;
    case RLX_OP_GELU:
        a = c->p->gelu.approx == RLX_GELU_TANH ? RLX_CPU_ACT_GELU_TANH : RLX_CPU_ACT_GELU;
        break;
    case RLX_OP_RELU:
        a = RLX_CPU_ACT_RELU;
        break;
    case RLX_OP_SIGMOID:
        a = RLX_CPU_ACT_SIGMOID;
        break;
    case RLX_OP_TANH:
        a = RLX_CPU_ACT_TANH;
        break;
    case RLX_OP_EXP:
        a = RLX_CPU_ACT_EXP;
        break;
    default:
        return false;
    }
    rlx_cpu_act_pool(c->pool, a, (const float *)x->p, (float *)o->p, numel(o));
    return true;
}

size_t cpu_op_kscratch(const rlx_lir *lir, const rlx_lir_instr *ins, const rlx_sym_values *bounds,
                       int n_threads)
{
    if (ins->op == RLX_OP_MATMUL && ins->n_in >= 2) {
        const rlx_lir_value *a = &lir->values[ins->in[0]], *b = &lir->values[ins->in[1]];
        int ra = a->shape.rank;
        if (ra < 2 || !rlx_cpu_matmul_supports(b->dtype))
            return 0;
        int64_t M = rlx_dim_eval(a->shape.d[ins->p.matmul.trans_a ? ra - 1 : ra - 2], bounds);
        int64_t K = rlx_dim_eval(a->shape.d[ins->p.matmul.trans_a ? ra - 2 : ra - 1], bounds);
        return rlx_cpu_matmul_scratch_bytes(b->dtype, M, K, n_threads);
    }
    if (ins->op == RLX_OP_ATTENTION && ins->n_in >= 3) {
        const rlx_lir_value *q = &lir->values[ins->in[0]], *k = &lir->values[ins->in[1]];
        int r = q->shape.rank;
        if (r < 3 || k->shape.rank != r)
            return 0;
        rlx_cpu_attn_params ap;
        memset(&ap, 0, sizeof ap);
        ap.n_q = rlx_dim_eval(q->shape.d[r - 2], bounds);
        ap.n_kv = rlx_dim_eval(k->shape.d[r - 2], bounds);
        ap.n_heads = (int)rlx_dim_eval(q->shape.d[r - 3], bounds);
        ap.n_kv_heads = (int)rlx_dim_eval(k->shape.d[r - 3], bounds);
        ap.head_dim = (int)rlx_dim_eval(q->shape.d[r - 1], bounds);
        ap.kv_type = k->dtype;
        ap.mask = RLX_CPU_ATTN_CAUSAL;
        return rlx_cpu_attention_scratch_bytes(&ap, n_threads);
    }
    if ((ins->op == RLX_OP_CONV1D || ins->op == RLX_OP_CONV2D ||
         ins->op == RLX_OP_CONV_TRANSPOSE2D) &&
        ins->n_in >= 2) {
        const rlx_lir_value *x = &lir->values[ins->in[0]], *w = &lir->values[ins->in[1]];
        const rlx_lir_value *o = &lir->values[ins->out];
        size_t wide = 0;
        if (w->dtype == RLX_DTYPE_F16 || w->dtype == RLX_DTYPE_BF16)
            wide = ((size_t)rlx_shape_numel(&w->shape, bounds) * sizeof(float) + 63) / 64 * 64;
        int r = x->shape.rank;
        if (ins->op == RLX_OP_CONV_TRANSPOSE2D || r < 3 || r > 4 || w->shape.rank != r ||
            o->shape.rank != r)
            return wide;
        int64_t xn[4], wn[4], on[4];
        const rlx_lir_value *vs[3] = {x, w, o};
        int64_t *ns[3] = {xn, wn, on};
        for (int v = 0; v < 3; v++) {
            for (int d = 0, e = 0; d < 4; d++)
                ns[v][d] = r == 3 && d == 2 ? 1 : rlx_dim_eval(vs[v]->shape.d[e++], bounds);
        }
        rlx_cpu_conv2d_params cp = conv_params(&ins->p, r == 3, xn, wn, on);
        return wide + rlx_cpu_conv2d_scratch_floats(&cp, n_threads) * sizeof(float);
    }
    return 0;
}

/* ---- data movement ----------------------------------------------------- */

static rlx_status op_reshape(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    if (x->p == o->p)
        return RLX_OK; /* in place or a view */
    if (is_contig(o) && x->rank > 0) {
        /* o read with x's dims: a row-wise copy (memcpy per contiguous row,
         * split over the pool) instead of one element at a time; this is
         * the KV-cache read, a strided slice of the state, on every token */
        cpu_tensor ov = *o;
        ov.rank = x->rank;
        int64_t st = 1;
        for (int d = x->rank - 1; d >= 0; d--) {
            ov.ne[d] = x->ne[d];
            ov.st[d] = st;
            st *= x->ne[d];
        }
        copy_nd_pool(c->pool, &ov, x);
        return RLX_OK;
    }
    int64_t n = numel(o);
    size_t es = cpu_dtype_size(o->dt);
    /* walk both in row-major order */
    int64_t ix[RLX_MAX_DIMS] = {0}, io[RLX_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t xo = nd_off(ix, x->st, x->rank), oo = nd_off(io, o->st, o->rank);
        if (x->dt == o->dt)
            memcpy(o->p + oo * (int64_t)es, x->p + xo * (int64_t)es, es);
        else
            cpu_store_f64(o->p, o->dt, oo, cpu_load_f64(x->p, x->dt, xo));
        nd_next(ix, x->ne, x->rank);
        nd_next(io, o->ne, o->rank);
    }
    return RLX_OK;
}

static rlx_status op_permute(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    cpu_tensor v = *x;
    v.rank = o->rank;
    for (int d = 0; d < o->rank; d++) {
        int pd = c->p->permute.perm[d];
        v.ne[d] = x->ne[pd];
        v.st[d] = x->st[pd];
    }
    copy_nd_pool(c->pool, o, &v);
    return RLX_OK;
}

static rlx_status op_slice(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    int ax = norm_axis(c->p->slice.axis, x->rank);
    int64_t step = c->p->slice.step ? c->p->slice.step : 1;
    int64_t start = c->slice_start;
    if (start < 0 || (o->ne[ax] > 0 && (start + (o->ne[ax] - 1) * step >= x->ne[ax] ||
                                        start + (o->ne[ax] - 1) * step < 0)))
        return RLX_ERR_INVALID_ARG;
    cpu_tensor v = *x;
    for (int d = 0; d < x->rank; d++)
        v.ne[d] = o->ne[d];
    v.p = x->p + start * x->st[ax] * (int64_t)cpu_dtype_size(x->dt);
    v.st[ax] = x->st[ax] * step;
    copy_nd_pool(c->pool, o, &v);
    return RLX_OK;
}

static rlx_status op_concat(const cpu_op_ctx *c)
{
    const cpu_tensor *o = c->out;
    int ax = norm_axis(c->p->concat.axis, o->rank);
    int64_t at = 0;
    size_t es = cpu_dtype_size(o->dt);
    for (int k = 0; k < c->n_in; k++) {
        cpu_tensor v = *o;
        v.ne[ax] = c->in[k]->ne[ax];
        v.p = o->p + at * o->st[ax] * (int64_t)es;
        if (at + v.ne[ax] > o->ne[ax])
            return RLX_ERR_INVALID_ARG;
        copy_nd_pool(c->pool, &v, c->in[k]);
        at += v.ne[ax];
    }
    return RLX_OK;
}

static rlx_status op_pad(const cpu_op_ctx *c)
{
    const cpu_tensor *x = c->in[0], *o = c->out;
    int r = o->rank;
    if (numel(o) == 0)
        return RLX_OK;
    int64_t idx[RLX_MAX_DIMS] = {0};
    do {
        int64_t oo = nd_off(idx, o->st, r - 1);
        for (int64_t j = 0; j < o->ne[r - 1]; j++)
            stf(o, oo + j * o->st[r - 1], c->p->pad.value);
    } while (nd_next(idx, o->ne, r - 1));
    /* the interior, clipped where a `before` or `after` is negative (a crop) */
    cpu_tensor vi = *x, vo = *o;
    size_t es = cpu_dtype_size(o->dt);
    for (int d = 0; d < r; d++) {
        int64_t b = c->p->pad.before[d];
        int64_t lo_o = b > 0 ? b : 0, lo_i = b < 0 ? -b : 0;
        int64_t n = x->ne[d] - lo_i;
        if (n > o->ne[d] - lo_o)
            n = o->ne[d] - lo_o;
        if (n <= 0)
            return RLX_OK;
        vi.p += lo_i * x->st[d] * (int64_t)cpu_dtype_size(x->dt);
        vo.p += lo_o * o->st[d] * (int64_t)es;
        vi.ne[d] = vo.ne[d] = n;
    }
    copy_nd_pool(c->pool, &vo, &vi);
    return RLX_OK;
}

static rlx_status op_gather(const cpu_op_ctx *c)
{
    const cpu_tensor *tab = c->in[0], *ids = c->in[1], *o = c->out;
    int rt = tab->rank, ri = ids->rank, ro = o->rank;
    int64_t V = tab->ne[rt - 2], D = tab->ne[rt - 1];
    int64_t n = numel(ids);
    float *row = c->scratch;
    int64_t idx[RLX_MAX_DIMS] = {0}, oidx[RLX_MAX_DIMS] = {0};
    rlx_status st = RLX_OK;
    for (int64_t i = 0; i < n; i++) {
        int64_t id = (int64_t)cpu_load_f64(ids->p, ids->dt, nd_off(idx, ids->st, ri));
        int64_t oo = nd_off(oidx, o->st, ro - 1);
        if (id < 0 || id >= V) {
            st = RLX_ERR_INVALID_ARG;
            for (int64_t j = 0; j < D; j++)
                stf(o, oo + j * o->st[ro - 1], 0.0f);
        } else {
            load_vec(tab, id * tab->st[rt - 2], tab->st[rt - 1], row, D);
            for (int64_t j = 0; j < D; j++)
                stf(o, oo + j * o->st[ro - 1], row[j]);
        }
        nd_next(idx, ids->ne, ri);
        nd_next(oidx, o->ne, ro - 1);
    }
    return st;
}

/* The append into a Q8_0 state (a quantized KV cache): each float row of src
 * is quantized into its contiguous blocks, ggml's rounding. */
static rlx_status scatter_q8_0(const cpu_op_ctx *c, int ax, int64_t off)
{
    const cpu_tensor *state = c->in[0], *src = c->in[1], *o = c->out;
    int r = o->rank;
    int64_t D = o->ne[r - 1];
    if (r < 2 || ax == r - 1 || D % 32 || o->st[r - 1] != 1 || src->ne[r - 1] != D)
        return RLX_ERR_INVALID_ARG;
    if (state->p != o->p) { /* never for a state updated in place */
        uint64_t bytes = 0;
        if (!is_contig(state) || !is_contig(o) ||
            rlx_dtype_row_bytes(RLX_DTYPE_Q8_0, (uint64_t)numel(o), &bytes) != RLX_OK)
            return RLX_ERR_INVALID_ARG;
        memcpy(o->p, state->p, bytes);
    }
    float *row = c->scratch;
    int64_t idx[RLX_MAX_DIMS] = {0};
    int64_t rows = numel(src) / (D > 0 ? D : 1);
    for (int64_t i = 0; i < rows; i++) {
        int64_t so = 0, oo = 0;
        for (int d = 0; d < r - 1; d++) {
            so += idx[d] * src->st[d];
            oo += (idx[d] + (d == ax ? off : 0)) * o->st[d];
        }
        if (oo % 32)
            return RLX_ERR_INVALID_ARG;
        load_vec(src, so, src->st[r - 1], row, D);
        rlx_status st = rlx_cpu_quantize_row(RLX_DTYPE_Q8_0, row, o->p + oo / 32 * 34, D);
        if (st != RLX_OK)
            return st;
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < src->ne[d])
                break;
            idx[d] = 0;
        }
    }
    return RLX_OK;
}

/* A Q8_0 cache's slices, reshapes and permutes are views (pass-schedule
 * makes them so); a copy of one would have to requantize, which nothing
 * needs, so it is an error if it ever runs. */
static rlx_status op_q8_copy(const cpu_op_ctx *c)
{
    (void)c;
    return RLX_ERR_UNSUPPORTED;
}

static rlx_status op_scatter(const cpu_op_ctx *c)
{
    const cpu_tensor *state = c->in[0], *src = c->in[1], *o = c->out;
    int ax = norm_axis(c->p->scatter.axis, o->rank);
    int64_t off = c->slice_start;
    if (off < 0 || off + src->ne[ax] > o->ne[ax])
        return RLX_ERR_INVALID_ARG;
    if (o->dt == RLX_DTYPE_Q8_0)
        return scatter_q8_0(c, ax, off);
    if (state->p != o->p)
        copy_nd_pool(c->pool, o, state);
    cpu_tensor v = *o;
    for (int d = 0; d < o->rank; d++)
        v.ne[d] = src->ne[d];
    v.p = o->p + off * o->st[ax] * (int64_t)cpu_dtype_size(o->dt);
    copy_nd_pool(c->pool, &v, src);
    return RLX_OK;
}

/* ---- selection --------------------------------------------------------- */

static bool is_float_dt(rlx_dtype dt)
{
    return dt == RLX_DTYPE_F32 || dt == RLX_DTYPE_F16 || dt == RLX_DTYPE_BF16 ||
           dt == RLX_DTYPE_F64;
}

#define WHY(...) (snprintf(why, why_len, __VA_ARGS__), (cpu_op_fn)NULL)

cpu_op_fn cpu_op_select(const rlx_lir *lir, const rlx_lir_instr *ins, char *why, size_t why_len)
{
    const rlx_lir_value *out = &lir->values[ins->out];
    const rlx_lir_value *in[RLX_MAX_INPUTS] = {0};
    for (int i = 0; i < ins->n_in && i < RLX_MAX_INPUTS; i++)
        in[i] = &lir->values[ins->in[i]];
    /* Only MATMUL's b and GATHER's table may be block-quantized, and a Q8_0
     * KV cache: the state a SCATTER appends to, views of it, and
     * ATTENTION's k and v. */
    bool q_ok_b = ins->op == RLX_OP_MATMUL, q_ok_tab = ins->op == RLX_OP_GATHER;
    bool q8_state =
        out->dtype == RLX_DTYPE_Q8_0 && (ins->op == RLX_OP_SCATTER || ins->op == RLX_OP_SLICE ||
                                         ins->op == RLX_OP_RESHAPE || ins->op == RLX_OP_PERMUTE);
    for (int i = 0; i < ins->n_in; i++) {
        rlx_dtype dt = in[i]->dtype;
        if (cpu_dtype_plain(dt))
            continue;
        bool kv_ok = dt == RLX_DTYPE_Q8_0 &&
                     ((q8_state && i == 0) || (ins->op == RLX_OP_ATTENTION && (i == 1 || i == 2)));
        if (kv_ok)
            continue;
        bool slot_ok = (q_ok_b && i == 1) || (q_ok_tab && i == 0);
        if (!slot_ok || !cpu_quant_supported(dt))
            return WHY("input %d has dtype %s, which the CPU backend does not take here", i,
                       rlx_dtype_name(dt));
        /* rows of a quantized operand must be contiguous */
        int r = in[i]->shape.rank;
        if (r < 2 || in[i]->stride[r - 1].sym[0] >= 0 || in[i]->stride[r - 1].sym[1] >= 0 ||
            in[i]->stride[r - 1].k != 1)
            return WHY("quantized input %d must have contiguous rows", i);
        if (ins->op == RLX_OP_MATMUL && !ins->p.matmul.trans_b)
            return WHY("a quantized matmul weight must be transposed ([N, K] rows)");
    }
    if (!cpu_dtype_plain(out->dtype) && !q8_state)
        return WHY(
            "output dtype %s is not produced by the CPU backend%s", rlx_dtype_name(out->dtype),
            out->dtype == RLX_DTYPE_Q8_0 ? " (a Q8_0 KV cache is only viewed, never copied)" : "");
    if (out->view_of >= 0)
        return op_noop;
    if (q8_state && ins->op != RLX_OP_SCATTER)
        return op_q8_copy; /* the scheduler made no view of it: refused at run */

    switch (ins->op) {
    case RLX_OP_NONE:
    case RLX_OP_INPUT:
    case RLX_OP_PARAM:
    case RLX_OP_CONST:
    case RLX_OP_STATE:
        return op_noop;
    case RLX_OP_NEG:
        return op_neg;
    case RLX_OP_ABS:
        return op_abs;
    case RLX_OP_EXP:
        return op_exp;
    case RLX_OP_LOG:
        return op_log;
    case RLX_OP_SQRT:
        return op_sqrt;
    case RLX_OP_RSQRT:
        return op_rsqrt;
    case RLX_OP_TANH:
        return op_tanh;
    case RLX_OP_SIGMOID:
        return op_sigmoid;
    case RLX_OP_RELU:
        return op_relu;
    case RLX_OP_GELU:
        return op_gelu;
    case RLX_OP_SILU:
        return op_silu;
    case RLX_OP_SIN:
        return op_sin;
    case RLX_OP_COS:
        return op_cos;
    case RLX_OP_SQUARE:
        return op_square;
    case RLX_OP_CAST:
    case RLX_OP_COPY:
        return op_copy;
    case RLX_OP_CLAMP:
        return op_clamp;
    case RLX_OP_SCALE:
        return op_scale;
    case RLX_OP_ADD:
        return op_add;
    case RLX_OP_SUB:
        return op_sub;
    case RLX_OP_MUL:
        return op_mul;
    case RLX_OP_DIV:
        return op_div;
    case RLX_OP_MAX:
        return op_max;
    case RLX_OP_MIN:
        return op_min;
    case RLX_OP_POW:
        return op_pow;
    case RLX_OP_CMP:
        return op_cmp;
    case RLX_OP_WHERE:
        return op_where;
    case RLX_OP_FUSED_ELEMENTWISE: {
        int n = ins->p.fused.n_steps;
        if (n < 1 || n > RLX_FUSED_MAX_STEPS)
            return WHY("fused chain has %d steps", n);
        for (int s = 0; s < n; s++) {
            const rlx_fused_step *fs = &ins->p.fused.steps[s];
            if (fs->dst >= NREGS || fs->a >= NREGS || fs->b >= NREGS || fs->c >= NREGS)
                return WHY("fused step %d uses a register past %d", s, NREGS - 1);
            if (fs->dst < ins->n_in)
                return WHY("fused step %d overwrites input register %d", s, fs->dst);
            if (fs->op < RLX_OP_NEG || fs->op > RLX_OP_WHERE)
                return WHY("fused step %d has a non-elementwise op %d", s, fs->op);
        }
        return op_fused;
    }
    case RLX_OP_MATMUL:
        if (!is_float_dt(in[0]->dtype) || !is_float_dt(out->dtype))
            return WHY("matmul takes float operands");
        if (in[0]->shape.rank < 2 || in[1]->shape.rank < 2 || out->shape.rank < 2)
            return WHY("matmul operands need rank >= 2");
        return op_matmul;
    case RLX_OP_REDUCE_SUM:
        return op_reduce_sum;
    case RLX_OP_REDUCE_MEAN:
        return op_reduce_mean;
    case RLX_OP_REDUCE_MAX:
        return op_reduce_max;
    case RLX_OP_ARGMAX:
        return op_argmax;
    case RLX_OP_TOPK:
        if (ins->p.topk.k < 1)
            return WHY("topk needs k >= 1");
        return op_topk;
    case RLX_OP_SOFTMAX:
        return op_softmax;
    case RLX_OP_LAYER_NORM:
        return op_layer_norm;
    case RLX_OP_RMS_NORM:
        return op_rms_norm;
    case RLX_OP_GROUP_NORM:
        if (in[0]->shape.rank < 2)
            return WHY("group norm needs [N, C, ...]");
        return op_group_norm;
    case RLX_OP_ADD_RMS_NORM:
        return op_add_rms_norm;
    case RLX_OP_ROPE:
        if (ins->p.rope.n_rot % 2)
            return WHY("rope needs an even n_rot");
        return op_rope;
    case RLX_OP_ATTENTION:
        for (int i = 0; i < 3; i++)
            if (in[i]->shape.rank < 3 || in[i]->shape.rank > 4)
                return WHY("attention operands are [B, H, S, D] or [H, S, D]");
        return op_attention;
    case RLX_OP_CONV1D:
        if (in[0]->shape.rank != 3 || in[1]->shape.rank != 3)
            return WHY("conv1d takes x [N, C, L] and w [OC, C/g, K]");
        return op_conv;
    case RLX_OP_CONV2D:
        if (in[0]->shape.rank != 4 || in[1]->shape.rank != 4)
            return WHY("conv2d takes x [N, C, H, W] and w [OC, C/g, KH, KW]");
        return op_conv;
    case RLX_OP_CONV_TRANSPOSE2D:
        if (in[0]->shape.rank != 4 || in[1]->shape.rank != 4)
            return WHY("conv_transpose2d takes x [N, C, H, W] and w [C, OC/g, KH, KW]");
        return op_conv_transpose;
    case RLX_OP_RESIZE:
        if (out->shape.rank < 2)
            return WHY("resize needs rank >= 2");
        return op_resize;
    case RLX_OP_POOL2D:
        if (out->shape.rank < 2)
            return WHY("pool2d needs rank >= 2");
        return op_pool;
    case RLX_OP_RESHAPE:
        return op_reshape;
    case RLX_OP_PERMUTE:
        for (int d = 0; d < out->shape.rank; d++)
            if (ins->p.permute.perm[d] < 0 || ins->p.permute.perm[d] >= in[0]->shape.rank)
                return WHY("permute axis %d out of range", ins->p.permute.perm[d]);
        return op_permute;
    case RLX_OP_SLICE:
        if (ins->p.slice.step < 0)
            return WHY("negative slice steps are not supported");
        return op_slice;
    case RLX_OP_CONCAT:
        return op_concat;
    case RLX_OP_PAD:
        return op_pad;
    case RLX_OP_GATHER:
        if (in[0]->shape.rank != 2)
            return WHY("gather takes a [V, D] table");
        if (!rlx_dtype_get(in[1]->dtype)->is_int)
            return WHY("gather ids must be integers");
        return op_gather;
    case RLX_OP_SCATTER:
        return op_scatter;
    default:
        return WHY("op %d is unknown to the CPU backend", (int)ins->op);
    }
}

size_t cpu_op_scratch(const rlx_lir *lir, const rlx_lir_instr *ins, int64_t max_dim)
{
    (void)lir;
    switch (ins->op) {
    case RLX_OP_MATMUL:
        return (size_t)(MM_TN + 1) * (size_t)max_dim;
    case RLX_OP_ATTENTION:
        return 4 * (size_t)max_dim;
    case RLX_OP_TOPK:
        return 2 * (size_t)max_dim + 2;
    default:
        return (size_t)max_dim + 1;
    }
}
