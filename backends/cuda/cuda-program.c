/* CUDA programs: which instructions the backend takes (cu_check), the
 * kernel launches each becomes, the per-run records the kernels read, and
 * the CUDA graph that replays them.
 *
 * Every launch owns a 256-word record: the item count, one descriptor per
 * operand (dtype, rank, the device address of element 0, dims and element
 * strides at this run's symbols) and op parameters (layout in
 * kernels/common.cuh, the same as the Vulkan shaders' records). A run
 * writes the records into pinned memory, copies them to the device in one
 * transfer and launches. When a run's launches have the same kernels and
 * grid sizes as the previous run's (a decode step after a decode step),
 * they are captured once as a CUDA graph and replayed: the records are the
 * only thing that changes, and the graph's first node copies them in.
 *
 * Run-time failures (a token id outside the embedding table) are flagged
 * by the kernels in their record and in one word after the records, which
 * is read back at the end of every run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cuda/cuda-backend.h"
#include "backends/cuda/cuda-internal.h"
#include "backends/base/gpu-operand.h"

_Static_assert(RLX_DTYPE_F32 == 2 && RLX_DTYPE_BF16 == 4 && RLX_DTYPE_F8_E4M3 == 5 &&
                   RLX_DTYPE_F8_E5M2 == 6 && RLX_DTYPE_I64 == 7 && RLX_DTYPE_BOOL == 12 &&
                   RLX_DTYPE_Q4_0 == 13 && RLX_DTYPE_Q8_0 == 17 && RLX_DTYPE_Q4_K == 21 &&
                   RLX_DTYPE_Q6_K == 23,
               "kernels/common.cuh's dtype codes");
_Static_assert(RLX_OP_NEG == 5 && RLX_OP_CAST == 19 && RLX_OP_SCALE == 21 && RLX_OP_ADD == 22 &&
                   RLX_OP_WHERE == 30,
               "kernels/ew.cu's op codes");
_Static_assert(RLX_ACT_RELU == 1 && RLX_ACT_TANH == 6, "kernels/common.cuh's act codes");

#define REC_WORDS CU_REC_WORDS
#define MAX_DISP  8 /* launches one instruction may need (concat inputs, scatter copy) */
#define DESC(k)   (16 + (k)*16)
#define PRM(i)    (128 + (i))
/* record word 3 (host only): another launch's blocks do this one's work
 * (a norm run by the product before it, tail_take; the gated product
 * run with the two before it, glu_take), so it launches nothing */
#define REC_BY_OTHER 3
/* what identifies rows rounded into the 8-bit scratch (q8_key_make); word
 * 6 is the scratch's half that holds them */
#define Q8_KEY      7
#define Q8_ID       6 /* the words that identify the rows */
#define MAX_REGS    24
#define ATTN_MAX_D  256
#define ATTN_MAX_DV (8 * 128)
#define CONV_LS     128
/* attention's key split: at most this many blocks per query row, for at
 * most two rows per multiprocessor */
#define ATTN_MAX_SPLIT     32
#define ATTN_ROWS          4    /* rlx_attention_rows: query rows a block (its QR) */
#define SK_TILES           1024 /* rlx_mm_tq's split K: tiles of one product at most */
#define SK_COUNT_BYTES     (SK_TILES * 4)
#define ATTN_SPLIT_ROWS(d) (2 * ((d)->n_sm > 0 ? (d)->n_sm : 64))
#define GRID_CAP           (1u << 20) /* grid-stride kernels: enough blocks to fill any GPU */

typedef struct cu_disp {
    cu_kernel k;
    int32_t instr;
    bool per_group; /* unused by this backend's launches (kept for the shared fill code) */
    int32_t vals[CU_OUT_SLOT + 1];
    uint32_t grid[3], block;
    uint32_t lgrid[3]; /* the launch's grid this run: grid, or a group's (group_launches) */
    cu_kernel lk;      /* the launch's kernel this run: k, or CU_K_MMV_MIXED for a group's */
} cu_disp;

typedef struct cu_program {
    rlx_program base;
    cu_device *dev;
    int32_t n_values, n_instrs, n_symbols;
    rlx_lir_value *values;
    rlx_lir_instr *instrs;
    int64_t sym_max[RLX_MAX_SYMBOLS];
    char sym_name[RLX_MAX_SYMBOLS][32];
    int32_t n_bind[4];
    uint64_t arena_bytes;
    int32_t n_disp;
    cu_disp *disp;
    int8_t *kern;           /* per instruction: its kernel family, CU_K_COUNT for a no-op */
    int32_t *append_of;     /* per instruction: the append it may write its rows into, or -1 */
    bool *absorbed;         /* per append: its producer wrote its rows this run (no launch) */
    int32_t *tail_from;     /* per RMS norm: the product whose last block may run it, or -1 */
    bool *tail_on;          /* per product: its last block runs the norm after it this run */
    CUdeviceptr tail_count; /* per product: its blocks done (0 between runs) */
    struct cu_glu {         /* per instruction: a gated pair (find_glus) */
        int32_t lead;       /* the pair's first product (for it, the second and the mul too) */
        int32_t up, mul;
        bool on; /* the first product: its launch does all three this run */
    } * glu;
    CUdeviceptr glu_count; /* per 32 columns of the gated product: blocks done (0 between) */
    int64_t glu_groups;
    int32_t *head_rope;       /* per product: the rope its blocks may run per head, or -1 */
    int32_t *head_norm;       /* per product: the per-head RMS norm before that rope, or -1 */
    int32_t *head_prod;       /* per norm or rope: the product that may run it, or -1 */
    int64_t *head_cnt;        /* per product: its first counter in head_count */
    bool *head_on;            /* per product: its blocks norm and rope the heads this run */
    CUdeviceptr head_count;   /* per head of those products: blocks done (0 between runs) */
    bool *feeds_q8;           /* per instruction: a quantized product reads its output */
    int32_t *first;           /* per instruction: first launch; first[n_instrs] = n_disp */
    CUdeviceptr *addr;        /* per value: its device address this run (0: none) */
    CUdeviceptr cbuf;         /* the constants */
    CUdeviceptr attn_scratch; /* attention's key-split partial results */
    uint64_t attn_scratch_bytes;
    CUdeviceptr attn_count; /* per row, its key-split blocks done (0 between runs) */
    bool blas;              /* cuBLAS runs this program's large F16/F32 matmuls */
    CUdeviceptr mm_scratch; /* an f32 activation's two f16 halves for cuBLAS */
    uint64_t mm_scratch_bytes;
    CUdeviceptr tq_scratch; /* a quantized prompt matmul's `a` as f16, for rlx_mm_tq */
    uint64_t tq_scratch_bytes;
    CUdeviceptr sk_scratch; /* rlx_mm_tq's split K: tile counters, then the parts' sums */
    uint64_t sk_bytes;      /* for the sums */
    CUdeviceptr q8_scratch; /* activation rows as 8-bit blocks: [8, K] int8, then [8, K/32] float2;
                               twice: a gated product's go to the second half (glu_take) */
    int64_t q8_k_max;
    uint64_t q8_half; /* the bytes of one half */
    uint64_t const_bytes;
    CUdeviceptr meta; /* the records, then the failure word */
    int32_t *host;    /* pinned: this run's records, then the failure word */
    uint64_t meta_bytes;
    /* the graph of the last launch shape */
    CUgraphExec exec;
    uint32_t *sig, *last_sig; /* per launch: kernel, grid x, y, z */
    bool last_valid;
    bool timing, have_times;
    CUevent *ev; /* 2 per instruction when timing */
    uint64_t n_runs, n_recordings;
    uint64_t prep_ns, device_ns, submit_ns;
    uint64_t launches; /* kernel launches and cuBLAS calls of the last run */
    CUevent run_ev[2]; /* around each untimed run: its device time */
    /* the activation rows last rounded into q8_scratch this run (a matmul
     * of the same rows right after it reuses them) */
    bool q8_valid;
    uint64_t q8_key[Q8_KEY];
    /* records that need not be written again: an instruction of an op whose
     * records follow from its operands alone (fixed), run again with the
     * same addresses, the same values of the symbols its operands' dims use
     * (syms) and the same rounded rows before it, has last run's records
     * (q8_in / q8_out: that state before and after its fill) */
    bool *fixed;
    uint8_t *syms;                    /* per instruction: the symbols its operands' dims use */
    int64_t last_sv[RLX_MAX_SYMBOLS]; /* the symbols of the last run whose records all stand */
    struct q8_state {
        bool valid;
        uint64_t key[Q8_KEY];
    } * q8_in, *q8_out;
    CUdeviceptr *last_addr; /* the addresses of the last run whose records all stand */
    bool records_ok;
    double *ms;
    int32_t *scratch_rec;
    cu_disp *scratch_disp;
} cu_program;

/* Whether a grid launches anything. */
static bool live(const uint32_t g[3])
{
    return g[0] && g[1] && g[2];
}

static const char *const home_names[] = {"arena", "param", "state", "input", "output", "const"};

/* ---- dtypes ------------------------------------------------------------------ */

/* ---- what the backend takes --------------------------------------------------- */

/* Which kernel runs an instruction, or -1 with the reason in `why`
 * (CU_K_COUNT: a no-op, the output is a view). */
static int cu_check(const rlx_lir *lir, const rlx_lir_instr *ins, char *why, size_t cap)
{
#define NO(...) (snprintf(why, cap, __VA_ARGS__), -1)
    const rlx_lir_value *o = &lir->values[ins->out];
    if (o->view_of >= 0)
        return CU_K_COUNT;
    if (ins->op <= RLX_OP_STATE)
        return CU_K_COUNT;
    if (ins->n_in < min_inputs(ins->op))
        return NO("needs at least %d inputs", min_inputs(ins->op));
    const rlx_lir_value *in[RLX_MAX_INPUTS];
    for (int k = 0; k < ins->n_in; k++)
        in[k] = &lir->values[ins->in[k]];
    if (o->shape.rank > RLX_MAX_DIMS)
        return NO("rank %d", o->shape.rank);
    rlx_op op = ins->op;
    if (op == RLX_OP_SCATTER && o->dtype == RLX_DTYPE_Q8_0) {
        /* the append into a Q8_0 KV cache: float rows quantized in place
         * (gather.comp's Q8_0 mode), whole blocks of contiguous rows */
        int r = o->shape.rank, ax = norm_axis(ins->p.scatter.axis, r);
        const rlx_lir_value *src = in[1];
        if (in[0]->dtype != RLX_DTYPE_Q8_0 || !ld_ok(src->dtype) ||
            (src->dtype != RLX_DTYPE_F32 && src->dtype != RLX_DTYPE_F16 &&
             src->dtype != RLX_DTYPE_BF16))
            return NO("a Q8_0 state takes float rows");
        if (r < 2 || src->shape.rank != r || ax < 0 || ax >= r - 1 ||
            !rlx_dim_is_const(o->shape.d[r - 1]) || o->shape.d[r - 1].k % 32 ||
            !rlx_dim_is_const(o->stride[r - 1]) || o->stride[r - 1].k != 1 ||
            !rlx_dim_equal(src->shape.d[r - 1], o->shape.d[r - 1]))
            return NO("a Q8_0 append needs whole contiguous rows of 32s along an outer axis");
        return CU_K_GATHER;
    }
    /* a Q8_0 KV cache's slices, reshapes and permutes: the scheduler makes
     * them views (no-ops above); were one copied, fill_ew refuses it */
    if (o->dtype == RLX_DTYPE_Q8_0 && in[0]->dtype == RLX_DTYPE_Q8_0 &&
        (op == RLX_OP_SLICE || op == RLX_OP_RESHAPE || op == RLX_OP_PERMUTE))
        return CU_K_EW;
    if (is_elementwise(op) || op == RLX_OP_COPY || op == RLX_OP_RESHAPE || op == RLX_OP_PERMUTE ||
        op == RLX_OP_SLICE || op == RLX_OP_CONCAT || op == RLX_OP_PAD || op == RLX_OP_SCATTER) {
        if (op == RLX_OP_CONCAT && ins->n_in > MAX_DISP)
            return NO("concat of more than %d inputs", MAX_DISP);
        for (int k = 0; k < ins->n_in; k++)
            if (!ld_ok(in[k]->dtype))
                return NO("input %d is %s", k, rlx_dtype_name(in[k]->dtype));
        if (!st_ok(o->dtype))
            return NO("output is %s", rlx_dtype_name(o->dtype));
        if (op == RLX_OP_FUSED_ELEMENTWISE) {
            if (ins->p.fused.n_steps > RLX_FUSED_MAX_STEPS)
                return NO("too many fused steps");
            for (int s = 0; s < ins->p.fused.n_steps; s++) {
                const rlx_fused_step *st = &ins->p.fused.steps[s];
                if (st->dst >= MAX_REGS || st->a >= MAX_REGS || st->b >= MAX_REGS ||
                    st->c >= MAX_REGS || st->op < RLX_OP_NEG || st->op > RLX_OP_WHERE)
                    return NO("fused step %d out of range", s);
            }
        }
        if (op == RLX_OP_RESHAPE && in[0]->shape.rank > RLX_MAX_DIMS)
            return NO("rank");
        return CU_K_EW;
    }
    switch (op) {
    case RLX_OP_MATMUL: {
        const rlx_lir_value *a = in[0], *b = in[1];
        if (!ld_ok(a->dtype))
            return NO("a is %s", rlx_dtype_name(a->dtype));
        if (a->shape.rank < 2 || b->shape.rank < 2 || o->shape.rank < 2)
            return NO("matmul operands need rank >= 2");
        if (quant_ok(b->dtype)) {
            const rlx_dtype_info *ti = rlx_dtype_get(b->dtype);
            if (b->shape.rank != 2 || !ins->p.matmul.trans_b || !rlx_dim_is_const(b->stride[0]) ||
                !rlx_dim_is_const(b->stride[1]) || b->stride[1].k != 1 ||
                b->stride[0].k % ti->block_size)
                return NO("a quantized b must be contiguous [N, K] rows with trans_b");
        } else if (!ld_ok(b->dtype)) {
            return NO("b is %s", rlx_dtype_name(b->dtype));
        }
        if (ins->p.matmul.has_bias && (ins->n_in < 3 || !ld_ok(in[2]->dtype)))
            return NO("bias");
        if (!st_ok(o->dtype))
            return NO("output is %s", rlx_dtype_name(o->dtype));
        return CU_K_MM_WARP;
    }
    case RLX_OP_REDUCE_SUM:
    case RLX_OP_REDUCE_MEAN:
    case RLX_OP_REDUCE_MAX:
    case RLX_OP_ARGMAX:
    case RLX_OP_TOPK:
    case RLX_OP_SOFTMAX:
    case RLX_OP_LAYER_NORM:
    case RLX_OP_RMS_NORM:
    case RLX_OP_ADD_RMS_NORM:
        for (int k = 0; k < ins->n_in; k++)
            if (!ld_ok(in[k]->dtype))
                return NO("input %d is %s", k, rlx_dtype_name(in[k]->dtype));
        if (!st_ok(o->dtype))
            return NO("output is %s", rlx_dtype_name(o->dtype));
        if (op == RLX_OP_TOPK && ins->p.topk.k < 1)
            return NO("topk needs k >= 1");
        return CU_K_ROWOP;
    case RLX_OP_GROUP_NORM: {
        const rlx_lir_value *x = in[0];
        if (x->shape.rank < 2 || o->shape.rank != x->shape.rank)
            return NO("group norm needs [N, C, ...]");
        for (int k = 0; k < ins->n_in; k++)
            if (!ld_ok(in[k]->dtype))
                return NO("input %d is %s", k, rlx_dtype_name(in[k]->dtype));
        /* spatial dims must merge into one strided run */
        for (int d = 2; d + 1 < x->shape.rank; d++) {
            const rlx_lir_value *vv[2] = {x, o};
            for (int j = 0; j < 2; j++) {
                const rlx_lir_value *v = vv[j];
                if (!rlx_dim_is_const(v->stride[d]) || !rlx_dim_is_const(v->stride[d + 1]) ||
                    !rlx_dim_is_const(v->shape.d[d + 1]) ||
                    v->stride[d].k != v->stride[d + 1].k * v->shape.d[d + 1].k)
                    return NO("group norm's spatial dims are not one strided run");
            }
        }
        return CU_K_ROWOP;
    }
    case RLX_OP_ROPE:
        if (!ld_ok(in[0]->dtype) || !is_int(in[1]->dtype) || in[1]->dtype == RLX_DTYPE_I64 ||
            (ins->n_in > 2 && !ld_ok(in[2]->dtype)) || !st_ok(o->dtype))
            return NO("rope dtypes");
        if (in[0]->shape.rank < 1 || in[0]->shape.rank != o->shape.rank)
            return NO("rope ranks");
        return CU_K_ROPE;
    case RLX_OP_ATTENTION: {
        if (ins->p.attn.bias_grid_w)
            return NO("a bias decomposed over a key grid (the compiler builds the full one)");
        /* k and v may be a Q8_0 KV cache (a view of the state: elements by
         * their flat index in its blocks) */
        for (int k = 0; k < ins->n_in; k++)
            if (!ld_ok(in[k]->dtype) && !((k == 1 || k == 2) && in[k]->dtype == RLX_DTYPE_Q8_0))
                return NO("input %d is %s", k, rlx_dtype_name(in[k]->dtype));
        int rq = in[0]->shape.rank, rk = in[1]->shape.rank, rv = in[2]->shape.rank;
        if (rq < 3 || rq > 4 || rk < 3 || rk > 4 || rv < 3 || rv > 4 || o->shape.rank < 3 ||
            o->shape.rank > 4)
            return NO("attention needs rank 3 or 4 operands");
        int64_t bound[RLX_MAX_SYMBOLS] = {0};
        for (int s = 0; s < lir->n_symbols && s < RLX_MAX_SYMBOLS; s++)
            bound[s] = lir->symbols[s].max;
        if (rlx_dim_upper(in[0]->shape.d[rq - 1], bound) > ATTN_MAX_D ||
            rlx_dim_upper(in[2]->shape.d[rv - 1], bound) > ATTN_MAX_DV)
            return NO("head dims above %d (q/k) or %d (v)", ATTN_MAX_D, ATTN_MAX_DV);
        if (!st_ok(o->dtype))
            return NO("output is %s", rlx_dtype_name(o->dtype));
        return CU_K_ATTN;
    }
    case RLX_OP_CONV1D:
    case RLX_OP_CONV2D:
    case RLX_OP_CONV_TRANSPOSE2D: {
        int want = op == RLX_OP_CONV1D ? 3 : 4;
        if (in[0]->shape.rank != want || in[1]->shape.rank != want || o->shape.rank != want)
            return NO("convolution ranks");
        for (int k = 0; k < ins->n_in; k++)
            if (!ld_ok(in[k]->dtype))
                return NO("input %d is %s", k, rlx_dtype_name(in[k]->dtype));
        if (!st_ok(o->dtype))
            return NO("output is %s", rlx_dtype_name(o->dtype));
        return CU_K_CONV;
    }
    case RLX_OP_RESIZE:
    case RLX_OP_POOL2D:
        if (in[0]->shape.rank < 2 || in[0]->shape.rank != o->shape.rank)
            return NO("needs rank >= 2");
        if (!ld_ok(in[0]->dtype) || !st_ok(o->dtype))
            return NO("dtypes");
        return CU_K_SPATIAL;
    case RLX_OP_GATHER: {
        const rlx_lir_value *t = in[0];
        if (t->shape.rank < 2 || o->shape.rank < 1)
            return NO("gather table needs rank >= 2");
        if (quant_ok(t->dtype)) {
            const rlx_dtype_info *ti = rlx_dtype_get(t->dtype);
            int r = t->shape.rank;
            if (!rlx_dim_is_const(t->stride[r - 2]) || t->stride[r - 1].k != 1 ||
                t->stride[r - 2].k % ti->block_size)
                return NO("a quantized table must have contiguous rows");
        } else if (!ld_ok(t->dtype)) {
            return NO("table is %s", rlx_dtype_name(t->dtype));
        }
        if (!is_int(in[1]->dtype) || in[1]->dtype == RLX_DTYPE_I64 || !st_ok(o->dtype))
            return NO("gather dtypes");
        return CU_K_GATHER;
    }
    default:
        return NO("no CUDA kernel for %s", rlx_op_name(op));
    }
#undef NO
}

bool cu_supports_op(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins)
{
    (void)dev;
    if (!lir || !ins || (int)ins->op < 0 || ins->op >= RLX_OP_COUNT || ins->n_in < 0 ||
        ins->n_in > RLX_MAX_INPUTS || ins->out < 0 || ins->out >= lir->n_values)
        return false;
    for (int k = 0; k < ins->n_in; k++)
        if (ins->in[k] < 0 || ins->in[k] >= lir->n_values)
            return false;
    char why[160];
    return cu_check(lir, ins, why, sizeof why) >= 0;
}

/* ---- building records ------------------------------------------------------------- */

static vt vt_of(const cu_program *P, int32_t v, const int64_t *sv)
{
    const rlx_lir_value *val = &P->values[v];
    vt t;
    memset(&t, 0, sizeof t);
    t.val = v;
    t.dt = val->dtype;
    t.rank = val->shape.rank;
    for (int d = 0; d < t.rank; d++) {
        t.ne[d] = dim_eval(val->shape.d[d], sv);
        t.st[d] = dim_eval(val->stride[d], sv);
    }
    if (t.rank == 0) {
        t.rank = 1;
        t.ne[0] = 1;
        t.st[0] = 1;
    }
    return t;
}

/* numpy broadcast of t to `rank` dims `ne` (right-aligned; stride 0 where
 * t has 1 or lacks the dim) */
static vt bcast(vt t, int rank, const int64_t *ne)
{
    vt b = t;
    b.rank = rank;
    for (int d = 0; d < rank; d++) {
        int s = d - (rank - t.rank);
        b.ne[d] = ne[d];
        if (s < 0 || (t.ne[s] == 1 && ne[d] != 1))
            b.st[d] = 0;
        else
            b.st[d] = t.st[s];
    }
    return b;
}

/* Move `axis` last (the row layout of the rowop shader). */
static vt axis_last(vt t, int axis)
{
    vt r = t;
    int j = 0;
    for (int d = 0; d < t.rank; d++)
        if (d != axis) {
            r.ne[j] = t.ne[d];
            r.st[j] = t.st[d];
            j++;
        }
    r.ne[t.rank - 1] = t.ne[axis];
    r.st[t.rank - 1] = t.st[axis];
    return r;
}

static int64_t numel(const vt *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= t->ne[d];
    return n;
}

/* t's dims of more than one element by stride, largest first: their
 * extents ne and strides st, and us the stride of the same dim of u (a
 * tensor of t's rank; NULL: none). Returns how many. */
static int by_stride(const vt *t, const vt *u, int64_t *ne, int64_t *st, int64_t *us)
{
    int n = 0;
    for (int d = 0; d < t->rank; d++)
        if (t->ne[d] != 1) {
            int at = n++;
            while (at > 0 && st[at - 1] < t->st[d]) {
                ne[at] = ne[at - 1], st[at] = st[at - 1];
                if (us)
                    us[at] = us[at - 1];
                at--;
            }
            ne[at] = t->ne[d], st[at] = t->st[d];
            if (us)
                us[at] = u->st[d];
        }
    return n;
}

/* Whether t's elements are exactly the offsets 0 .. numel - 1 in some
 * order of its dims (a permuted dense tensor; dims of one element aside). */
static bool dense_set(const vt *t)
{
    int64_t ne[RLX_MAX_DIMS], st[RLX_MAX_DIMS];
    int n = by_stride(t, NULL, ne, st, NULL);
    int64_t want = 1;
    for (int i = n - 1; i >= 0; i--) {
        if (st[i] != want)
            return false;
        want *= ne[i];
    }
    return true;
}

typedef struct fill_ctx {
    cu_program *P;
    const int64_t *sv;
    int n;                /* dispatches so far */
    cu_disp *d;           /* MAX_DISP of them */
    int32_t *rec;         /* MAX_DISP records of REC_WORDS */
    const cu_disp *fixed; /* at run time: the dispatches made at program_create */
    int32_t at;           /* the instruction being filled */
    char *why;            /* a run-time failure */
    size_t why_cap;
} fill_ctx;

static int32_t *new_disp(fill_ctx *c, cu_kernel k, bool per_group, int64_t items)
{
    cu_disp *d = &c->d[c->n];
    int32_t *w = c->rec + (size_t)c->n * REC_WORDS;
    memset(w, 0, REC_WORDS * sizeof *w);
    d->k = k;
    d->per_group = per_group;
    for (int s = 0; s <= CU_OUT_SLOT; s++)
        d->vals[s] = -1;
    w[0] = (int32_t)items;
    c->n++;
    return w;
}

/* The device address of an operand's element 0 this run (0 at
 * program_create, where nothing is bound). */
static uint64_t vt_addr(const cu_program *P, const vt *t)
{
    return P->addr && P->addr[t->val] ? P->addr[t->val] + (uint64_t)t->extra : 0;
}

/* Where the 8-bit activation scratch keeps its block scales (after the
 * int8 rows, 8 of the widest K). */
static uint64_t q8_scales(const cu_program *P, int half)
{
    return P->q8_scratch + (uint64_t)half * P->q8_half + (uint64_t)P->q8_k_max * 8;
}

/* The 8-bit activation scratch's two parts (the int8 rows, then their block
 * scales) as two 64-bit addresses at parameter words at..at+3. */
static void put_q8_scratch(const cu_program *P, int32_t *w, int at, int half)
{
    uint64_t qs = P->q8_scratch + (uint64_t)half * P->q8_half, qds = q8_scales(P, half);
    w[PRM(at)] = (int32_t)(uint32_t)qs;
    w[PRM(at + 1)] = (int32_t)(uint32_t)(qs >> 32);
    w[PRM(at + 2)] = (int32_t)(uint32_t)qds;
    w[PRM(at + 3)] = (int32_t)(uint32_t)(qds >> 32);
}

static void put_desc(fill_ctx *c, int32_t *w, int slot, const vt *t)
{
    cu_disp *d = &c->d[c->n - 1];
    d->vals[slot] = t->val;
    int32_t *q = w + DESC(slot);
    q[0] = (int32_t)t->dt;
    q[1] = t->rank;
    uint64_t a = vt_addr(c->P, t);
    q[2] = (int32_t)(uint32_t)a;
    q[3] = (int32_t)(uint32_t)(a >> 32);
    for (int i = 0; i < t->rank; i++) {
        q[4 + i] = (int32_t)t->ne[i];
        q[10 + i] = (int32_t)t->st[i];
    }
}

static int32_t fbits(float f)
{
    int32_t i;
    memcpy(&i, &f, 4);
    return i;
}

static bool fail(fill_ctx *c, const char *msg)
{
    snprintf(c->why, c->why_cap, "%s", msg);
    return false;
}

/* What identifies activation rows [rows, K] (f32 or another dtype; row
 * stride rs, element stride es, element 0 at addr) rounded to 8-bit blocks
 * in q8_scratch, in the dense (row, k) order rlx_q8_act writes. Dense rows
 * are keyed by their flat extent, so a producer that wrote them as rows of
 * another width (a multiple of 32 either way) is found too. */
static void q8_key_make(uint64_t key[Q8_KEY], uint64_t addr, int64_t rows, int64_t K, int64_t rs,
                        int64_t es, rlx_dtype dt)
{
    if (es == 1 && (rows == 1 || rs == K)) {
        key[0] = addr, key[1] = (uint64_t)(rows * K), key[2] = key[3] = key[4] = 0;
    } else {
        key[0] = addr, key[1] = (uint64_t)rows, key[2] = (uint64_t)K;
        key[3] = (uint64_t)rs, key[4] = (uint64_t)es;
    }
    key[5] = (uint64_t)dt;
    key[6] = 0;
}

/* The value a chain of views ends at. */
static int32_t root_of(const cu_program *P, int32_t v)
{
    while (v >= 0 && P->values[v].view_of >= 0)
        v = P->values[v].view_of;
    return v;
}

/* P->feeds_q8 (at program_create): whether a later matmul of quantized
 * weights reads instruction i's output as its rows (through views): the
 * rows are then worth rounding to 8 bits as they are written (a Qwen3's
 * per-head k norm feeds a rope, and its rows stay f32). Returns false
 * when out of memory. */
static bool find_q8_readers(cu_program *P)
{
    bool *read = calloc((size_t)P->n_values + 1, sizeof *read);
    if (!read)
        return false;
    for (int32_t i = P->n_instrs - 1; i >= 0; i--) {
        const rlx_lir_instr *u = &P->instrs[i];
        int32_t x = root_of(P, u->out);
        P->feeds_q8[i] = x >= 0 && read[x];
        if (u->op == RLX_OP_MATMUL && P->kern[i] == CU_K_MM_WARP && u->n_in > 1 &&
            rlx_dtype_get(P->values[u->in[1]].dtype)->quantized && root_of(P, u->in[0]) >= 0)
            read[root_of(P, u->in[0])] = true;
    }
    free(read);
    return true;
}

/* An elementwise launch whose f32 output is dense and small (at most 8
 * rows of the widest quantized matmul input) also rounds it to 8-bit
 * blocks of 32 as it writes (kernels/ew.cu), for a quantized matmul right
 * after it: the attention's output and the gated activation of a decode
 * step. */
static bool q8_roundable(const cu_program *P, const vt *o)
{
    int64_t n = numel(o), want = 1;
    bool dense = o->dt == RLX_DTYPE_F32 && n > 0;
    for (int d = o->rank - 1; d >= 0 && dense; d--) {
        dense = o->ne[d] == 1 || o->st[d] == want;
        want *= o->ne[d];
    }
    return dense && vt_addr(P, o) && P->q8_scratch && n % 32 == 0 && n <= 8 * P->q8_k_max;
}

/* Whether another instruction's launch does instruction i's work this
 * run: i is the second product or the mul of a gated pair that is on. */
static bool glu_absorbed(const cu_program *P, int32_t i)
{
    int32_t l = P->glu[i].lead;
    return l >= 0 && l != i && P->glu[l].on;
}

/* (The mul of a gated pair that is on launches nothing: its rows are
 * rounded by the gated product, into the scratch's second half.) */
static void ew_round_q8(fill_ctx *c, int32_t *w, const vt *o)
{
    cu_program *P = c->P;
    int64_t n = numel(o);
    uint64_t oa = vt_addr(P, o);
    if (!q8_roundable(P, o) || w[PRM(1)] || w[PRM(2)] || !P->feeds_q8[c->at])
        return;
    int half = glu_absorbed(P, c->at);
    w[PRM(6)] = 1;
    put_q8_scratch(P, w, 120, half);
    q8_key_make(P->q8_key, oa, 1, n, n, 1, RLX_DTYPE_F32);
    P->q8_key[Q8_ID] = (uint64_t)half;
    P->q8_valid = true;
}

/* ---- appends written by their producer -----------------------------------
 * A KV-cache append (an in-place scatter of rows into a state) whose rows
 * are the output of a rope or of an integer matrix-vector product, read by
 * nothing else, is written by that producer straight into the state, and
 * the append launches nothing: the key and value appends of a decode step.
 * find_appends pairs them at program_create; each run the producer's fill
 * decides (its output's layout must map onto the state's rows) and marks
 * the append absorbed. */

static void find_appends(cu_program *P)
{
    for (int32_t j = 0; j < P->n_instrs; j++)
        P->append_of[j] = -1;
    for (int32_t j = 0; j < P->n_instrs && !P->dev->unfused; j++) {
        const rlx_lir_instr *sc = &P->instrs[j];
        if (sc->op != RLX_OP_SCATTER || P->kern[j] != CU_K_EW ||
            !(sc->in_place || sc->in[0] == sc->out))
            continue;
        int32_t x = root_of(P, sc->in[1]), s0 = root_of(P, sc->in[0]), i = j - 1;
        if (x < 0 || P->values[x].home != RLX_HOME_ARENA)
            continue;
        while (i >= 0 && P->instrs[i].out != x)
            i--;
        if (i < 0 || !((P->instrs[i].op == RLX_OP_ROPE && P->kern[i] == CU_K_ROPE) ||
                       (P->instrs[i].op == RLX_OP_MATMUL && P->kern[i] == CU_K_MM_WARP)))
            continue;
        /* the rows read by the append alone; the state untouched between
         * (views launch nothing and are seen through) */
        bool ok = true;
        for (int32_t t = 0; t < P->n_instrs && ok; t++) {
            const rlx_lir_instr *u = &P->instrs[t];
            if (P->kern[t] == CU_K_COUNT)
                continue;
            for (int k = 0; k < u->n_in && ok; k++)
                ok = t == j || root_of(P, u->in[k]) != x;
            if (t > i && t < j)
                for (int k = -1; k < u->n_in && ok; k++)
                    ok = root_of(P, k < 0 ? u->out : u->in[k]) != s0;
        }
        if (!ok)
            continue;
        for (int32_t t = 0; t < P->n_instrs; t++)
            if (P->append_of[t] == j)
                ok = false;
        if (!ok)
            continue;
        P->append_of[i] = j;
        /* the producer's record now moves with the append's offset */
        for (int t = 0; t < RLX_DIM_TERMS; t++)
            if (sc->p.scatter.offset.sym[t] >= 0 && sc->p.scatter.offset.mul[t])
                P->syms[i] |= (uint8_t)(1u << sc->p.scatter.offset.sym[t]);
        P->syms[i] |= P->syms[j];
    }
}

/* Append j's rows this run: src, and where they go in the state (dst,
 * src's dims at the state's strides). False when the offset is out of
 * range. */
static bool append_rows(fill_ctx *c, int32_t j, vt *src, vt *dst)
{
    const rlx_lir_instr *ins = &c->P->instrs[j];
    vt o = vt_of(c->P, ins->out, c->sv);
    *src = vt_of(c->P, ins->in[1], c->sv);
    int ax = norm_axis(ins->p.scatter.axis, o.rank);
    int64_t off = dim_eval(ins->p.scatter.offset, c->sv);
    bool ok =
        src->rank == o.rank && ax >= 0 && ax < o.rank && off >= 0 && off + src->ne[ax] <= o.ne[ax];
    *dst = o;
    for (int d = 0; d < o.rank; d++)
        dst->ne[d] = src->ne[d];
    dst->extra = ok ? off * o.st[ax] * esize(o.dt) : 0;
    return ok;
}

/* Whether the producer being filled may write its output x into the rows
 * of its append this run: x's elements are exactly the append's src (a
 * dense view of x from its start). Fills src and dst (append_rows); the
 * caller maps x's dims onto them. Returns the append, or -1 (the output
 * stays x). */
static int32_t into_append(fill_ctx *c, const vt *x, vt *src, vt *dst)
{
    cu_program *P = c->P;
    int32_t j = P->append_of[c->at];
    if (j < 0 || !append_rows(c, j, src, dst))
        return -1;
    const rlx_lir_value *xv = &P->values[x->val], *sv = &P->values[src->val];
    if (xv->offset != sv->offset || numel(src) != numel(x) || !dense_set(src) || !dense_set(x))
        return -1;
    return j;
}

/* The state's stride for the dim of src that has x's extent ne and stride
 * st (0 for a dim of one element); -1 when no dim of src matches. */
static int64_t append_stride(const vt *src, const vt *dst, int64_t ne, int64_t st)
{
    if (ne == 1)
        return 0;
    for (int k = 0; k < src->rank; k++)
        if (src->ne[k] == ne && src->st[k] == st)
            return dst->st[k];
    return -1;
}

/* ---- norms run by the product before them -------------------------------
 * An RMS norm (or add + RMS norm) right after a matrix-vector product of
 * quantized weights that it reads (only views between them) is run by
 * that product's last block (kernels/matmul.cu's mmv_tail): the o and down
 * products of a decode step and the norm after each. find_tails pairs
 * them at program_create; each run the norm's fill decides (its float4
 * kernel, the product's integer kernel) and writes the product's record
 * words; the norm's own launch is then empty. Returns whether any pair. */
static bool find_tails(cu_program *P)
{
    bool any = false;
    for (int32_t j = 0; j < P->n_instrs; j++) {
        P->tail_from[j] = -1;
        P->tail_on[j] = false;
    }
    for (int32_t j = 0; j < P->n_instrs && !P->dev->unfused; j++) {
        const rlx_lir_instr *nm = &P->instrs[j];
        if (P->kern[j] != CU_K_ROWOP ||
            (nm->op != RLX_OP_RMS_NORM && nm->op != RLX_OP_ADD_RMS_NORM))
            continue;
        int32_t i = j - 1;
        while (i >= 0 && P->kern[i] == CU_K_COUNT)
            i--;
        if (i < 0 || P->instrs[i].op != RLX_OP_MATMUL || P->kern[i] != CU_K_MM_WARP ||
            P->append_of[i] >= 0 || !rlx_dtype_get(P->values[P->instrs[i].in[1]].dtype)->quantized)
            continue;
        int32_t x = root_of(P, P->instrs[i].out);
        bool reads = false;
        for (int k = 0; k < (nm->op == RLX_OP_ADD_RMS_NORM ? 2 : 1) && k < nm->n_in; k++)
            reads = reads || root_of(P, nm->in[k]) == x;
        if (!reads)
            continue;
        P->tail_from[j] = i;
        /* the two records are written in the same runs */
        P->syms[i] |= P->syms[j];
        P->syms[j] |= P->syms[i];
        any = true;
    }
    return any;
}

/* Product i's words for the norm its last block runs (P(100..103) of its
 * integer kernel's record w; none when tail_on[i] is not set). */
static void put_tail(const cu_program *P, int32_t *w, int32_t i)
{
    for (int k = 100; k < 104; k++)
        w[PRM(k)] = 0;
    if (!P->tail_on[i])
        return;
    for (int32_t j = i + 1; j < P->n_instrs; j++)
        if (P->tail_from[j] == i) {
            uint64_t rec = P->meta + (uint64_t)P->first[j] * REC_WORDS * 4;
            uint64_t cnt = P->tail_count + (uint64_t)i * 4;
            w[PRM(100)] = (int32_t)(uint32_t)rec;
            w[PRM(101)] = (int32_t)(uint32_t)(rec >> 32);
            w[PRM(102)] = (int32_t)(uint32_t)cnt;
            w[PRM(103)] = (int32_t)(uint32_t)(cnt >> 32);
            return;
        }
}

static bool is_mmv(cu_kernel k)
{
    return k == CU_K_MMV_Q4_K || k == CU_K_MMV_Q6_K || k == CU_K_MMV_Q8_0 || k == CU_K_MMV_Q4_0 ||
           k == CU_K_MMV_Q5_K;
}

/* The norm being filled (its float4 kernel's record w): whether the
 * product before it runs it this run; sets the product's record words
 * (records stand between runs, so both are always written). */
static bool tail_take(fill_ctx *c, int32_t *w)
{
    cu_program *P = c->P;
    int32_t i = P->tail_from[c->at];
    if (i < 0 || !P->host || !P->tail_count)
        return false;
    int32_t mi = P->first[i + 1] - 1; /* the product's last launch: its kernel */
    const cu_disp *D = &P->disp[mi];
    int32_t *wi = P->host + (size_t)mi * REC_WORDS;
    P->tail_on[i] = is_mmv(D->k) && live(D->grid) && !wi[PRM(10)] && w[PRM(7)] > 0;
    put_tail(P, wi, i);
    return P->tail_on[i];
}

/* ---- gated products in one launch ----------------------------------------
 * Two matrix-vector products of quantized weights of one type and shape
 * over the same rows, whose outputs only their elementwise product reads
 * (gate, up and SwiGLU of a decode step: the gate's activation is its
 * matmul's), run as one launch of rlx_mmv_glu_<type> that writes the
 * product (and its 8-bit rounding) itself; the second product and the mul
 * launch nothing. find_glus pairs them at program_create; each run the
 * first product's fill decides (both take the integer kernel, the mul's
 * output is dense f32 the down product can read rounded) for all three.
 * Returns the counters the widest pair needs (0: none). */
static int64_t find_glus(cu_program *P, const rlx_lir *lir)
{
    int64_t groups = 0;
    int64_t bnd[RLX_MAX_SYMBOLS] = {0};
    for (int k = 0; k < lir->n_symbols; k++)
        bnd[k] = lir->symbols[k].max;
    for (int32_t j = 0; j < P->n_instrs; j++)
        P->glu[j] = (struct cu_glu){.lead = -1, .up = -1, .mul = -1};
    for (int32_t e = 0; e < P->n_instrs && !P->dev->unfused; e++) {
        const rlx_lir_instr *mu = &P->instrs[e];
        if (P->kern[e] != CU_K_EW || mu->op != RLX_OP_MUL || mu->n_in != 2)
            continue;
        /* the two products: the launches right before the mul */
        int32_t pr[2] = {-1, -1}, i = e - 1;
        for (int k = 1; k >= 0; k--) {
            while (i >= 0 && P->kern[i] == CU_K_COUNT)
                i--;
            pr[k] = i--;
        }
        if (pr[0] < 0)
            continue;
        const rlx_lir_instr *g = &P->instrs[pr[0]], *u = &P->instrs[pr[1]];
        int32_t xg = root_of(P, g->out), xu = root_of(P, u->out);
        int32_t a0 = root_of(P, mu->in[0]), a1 = root_of(P, mu->in[1]);
        const rlx_lir_value *wg = &P->values[g->in[1]], *wu = &P->values[u->in[1]];
        bool ok = g->op == RLX_OP_MATMUL && u->op == RLX_OP_MATMUL &&
                  P->kern[pr[0]] == CU_K_MM_WARP && P->kern[pr[1]] == CU_K_MM_WARP &&
                  ((a0 == xg && a1 == xu) || (a0 == xu && a1 == xg)) && xg != xu &&
                  g->in[0] == u->in[0] && !g->p.matmul.has_bias && !u->p.matmul.has_bias &&
                  g->p.matmul.trans_a == u->p.matmul.trans_a &&
                  g->p.matmul.trans_b == u->p.matmul.trans_b &&
                  g->p.matmul.alpha == u->p.matmul.alpha && wg->dtype == wu->dtype &&
                  rlx_dtype_get(wg->dtype)->quantized && wg->shape.rank == wu->shape.rank &&
                  P->append_of[pr[0]] < 0 && P->append_of[pr[1]] < 0 &&
                  P->values[xg].home == RLX_HOME_ARENA && P->values[xu].home == RLX_HOME_ARENA;
        for (int d = 0; d < wg->shape.rank && ok; d++)
            ok = rlx_dim_equal(wg->shape.d[d], wu->shape.d[d]);
        /* the products' outputs read by the mul alone */
        for (int32_t t = 0; t < P->n_instrs && ok; t++) {
            const rlx_lir_instr *x = &P->instrs[t];
            if (t == e || P->kern[t] == CU_K_COUNT)
                continue;
            for (int k = 0; k < x->n_in && ok; k++)
                ok = root_of(P, x->in[k]) != xg && root_of(P, x->in[k]) != xu;
        }
        if (!ok)
            continue;
        const rlx_lir_value *o = &P->values[g->out];
        int64_t n = o->shape.rank ? rlx_dim_upper(o->shape.d[o->shape.rank - 1], bnd) : 0;
        if (n / 32 > groups)
            groups = n / 32;
        P->glu[pr[0]] = (struct cu_glu){.lead = pr[0], .up = pr[1], .mul = e};
        P->glu[pr[1]].lead = P->glu[e].lead = pr[0];
        uint8_t m = P->syms[pr[0]] | P->syms[pr[1]] | P->syms[e];
        P->syms[pr[0]] = P->syms[pr[1]] = P->syms[e] = m;
    }
    return groups;
}

enum { RM_SUM, RM_MEAN, RM_MAX, RM_ARGMAX, RM_SOFTMAX, RM_LN, RM_RMS, RM_ADDRMS, RM_GN, RM_TOPK };

static void shape(cu_disp *d, const int32_t *w);
static void put_addr(int32_t *w, int at, uint64_t a);
static void slot_span(const cu_program *P, int32_t j, int s, uint64_t *lo, uint64_t *hi);
static bool groupable(const cu_disp *D, const int32_t *w);

/* Whether launches of kernels a and b may be one launch (the same
 * kernel, or integer products of any types: rlx_mmv_mixed); group_launches
 * and heads_apart share the rule. */
static bool one_kernel(cu_kernel a, cu_kernel b)
{
    return a == b || (is_mmv(a) && is_mmv(b));
}

static bool is_glu(cu_kernel k)
{
    return k == CU_K_MMV_GLU_Q4_K || k == CU_K_MMV_GLU_Q6_K || k == CU_K_MMV_GLU_Q8_0 ||
           k == CU_K_MMV_GLU_Q4_0 || k == CU_K_MMV_GLU_Q5_K;
}

/* ---- heads normed and roped by their product ------------------------------
 * A decode step's q (and k) product, the per-head RMS norm a Qwen3 puts
 * after it, and the rope: the product's block that finishes a head last
 * norms and ropes that head (kernels/matmul.cu's mmv_heads), and the norm
 * and rope launch nothing. find_heads pairs them at program_create; each
 * run the rope's fill decides (one row, heads of the rope's width laid
 * densely in the product's output, the norm's float4 kernel over the same
 * rows, and, since the norm and rope now run in the product's launch,
 * before the launches between it and the rope, no memory one writes that
 * another touches: heads_apart) and writes the product's record words. */

/* The launching instruction before j that writes value v's root, or -1. */
static int32_t producer(const cu_program *P, int32_t j, int32_t v)
{
    int32_t x = root_of(P, v);
    for (int32_t i = j - 1; i >= 0; i--)
        if (P->kern[i] != CU_K_COUNT && root_of(P, P->instrs[i].out) == x)
            return i;
    return -1;
}

/* Returns the counters the pairs need (0: none). */
static int64_t find_heads(cu_program *P)
{
    int64_t total = 0;
    for (int32_t j = 0; j < P->n_instrs; j++) {
        P->head_rope[j] = P->head_norm[j] = P->head_prod[j] = -1;
        P->head_on[j] = false;
    }
    for (int32_t j = 0; j < P->n_instrs && !P->dev->unfused; j++) {
        const rlx_lir_instr *ro = &P->instrs[j];
        if (ro->op != RLX_OP_ROPE || P->kern[j] != CU_K_ROPE)
            continue;
        int32_t nm = -1, p = producer(P, j, ro->in[0]);
        if (p >= 0 && P->kern[p] == CU_K_ROWOP && P->instrs[p].op == RLX_OP_RMS_NORM &&
            P->tail_from[p] < 0) {
            nm = p;
            p = producer(P, nm, P->instrs[nm].in[0]);
        }
        if (p < 0 || P->instrs[p].op != RLX_OP_MATMUL || P->kern[p] != CU_K_MM_WARP ||
            P->instrs[p].n_in < 2 ||
            !rlx_dtype_get(P->values[P->instrs[p].in[1]].dtype)->quantized || P->glu[p].lead >= 0 ||
            P->append_of[p] >= 0 || P->head_rope[p] >= 0)
            continue;
        bool ok = true;
        for (int32_t t = p + 1; t < P->n_instrs && ok; t++)
            ok = P->tail_from[t] != p;
        if (!ok)
            continue;
        const rlx_lir_value *po = &P->values[P->instrs[p].out];
        int64_t N = po->shape.rank ? po->shape.d[po->shape.rank - 1].k : 0;
        bool sym = false;
        for (int t = 0; t < RLX_DIM_TERMS && po->shape.rank; t++)
            sym = sym || (po->shape.d[po->shape.rank - 1].sym[t] >= 0 &&
                          po->shape.d[po->shape.rank - 1].mul[t]);
        if (N <= 0 || sym)
            continue;
        P->head_rope[p] = j;
        P->head_norm[p] = nm;
        P->head_prod[j] = p;
        if (nm >= 0)
            P->head_prod[nm] = p;
        P->head_cnt[p] = total;
        total += N; /* at most a head a column */
        /* the rope's fill decides from the records of everything from the
         * product to it: it is written whenever one of them is (the others
         * keep their own symbols: the product's and the norm's fills only
         * repeat the rope's last decision) */
        for (int32_t t = p; t < j; t++)
            P->syms[j] |= P->syms[t];
    }
    return total;
}

/* Product i's words for the heads its blocks norm and rope (P(108..115)
 * of its integer kernel's record w; none when head_on[i] is not set): the
 * records' addresses, the counters, the head width (the rope's D). */
static void put_heads(const cu_program *P, int32_t *w, int32_t i)
{
    for (int k = 108; k < 116; k++)
        w[PRM(k)] = 0;
    if (!P->head_on[i])
        return;
    int32_t rj = P->first[P->head_rope[i]];
    uint64_t rr = P->meta + (uint64_t)rj * REC_WORDS * 4;
    uint64_t nr =
        P->head_norm[i] >= 0 ? P->meta + (uint64_t)P->first[P->head_norm[i]] * REC_WORDS * 4 : 0;
    uint64_t cnt = P->head_count + (uint64_t)P->head_cnt[i] * 4;
    put_addr(w, 108, rr);
    put_addr(w, 110, nr);
    put_addr(w, 112, cnt);
    w[PRM(114)] = P->host[(size_t)rj * REC_WORDS + PRM(1)];
}

/* Whether t's elements (i, j) of its last two dims are at i * W + j from
 * its start, the dims before all 1. */
static bool rows_of(const vt *t, int64_t W)
{
    int r = t->rank;
    if (r < 1 || t->st[r - 1] != 1 || t->ne[r - 1] != W)
        return false;
    int64_t want = W;
    for (int d = r - 2; d >= 0; d--) {
        if (t->ne[d] == 1)
            continue;
        if (t->st[d] != want)
            return false;
        want *= t->ne[d];
    }
    return true;
}

/* [lo, hi) spans that share bytes; the same span */
static bool meets(const uint64_t a[2], const uint64_t b[2])
{
    return a[0] < a[1] && b[0] < b[1] && a[0] < b[1] && b[0] < a[1];
}

static bool same_span(const uint64_t a[2], const uint64_t b[2])
{
    return a[0] < a[1] && a[0] == b[0] && a[1] == b[1];
}

/* Whether product i's blocks may norm and rope its heads this run: what
 * the norm and rope write (the rope perhaps into the KV cache) lands on
 * another head's input nowhere (apart, or the same rows in place), and on
 * nothing the launches between the product and the rope (rope j) touch,
 * which now run after or beside them, nor on what the products just
 * before it touch (they may share its launch); nor do those write what
 * the norm and rope read. From this run's records of all of them
 * (find_heads gives the rope the symbols of everything from the product
 * to it, so it is written whenever they are; group_launches keeps later
 * launches out of the product's). */
static bool heads_apart(const cu_program *P, int32_t i, int32_t j, int64_t Dh)
{
    int32_t nm = P->head_norm[i];
    uint64_t rp[2], wn[2] = {0, 0}, wr[2];
    slot_span(P, P->first[i + 1] - 1, CU_OUT_SLOT, &rp[0], &rp[1]);
    if (nm >= 0)
        slot_span(P, P->first[nm], CU_OUT_SLOT, &wn[0], &wn[1]);
    slot_span(P, P->first[j], CU_OUT_SLOT, &wr[0], &wr[1]);
    if ((meets(wn, rp) && !same_span(wn, rp)) || (meets(wr, rp) && !same_span(wr, rp)) ||
        (meets(wr, wn) && !same_span(wr, wn)))
        return false;
    if (same_span(wr, rp) || same_span(wr, wn)) {
        const int32_t *w = P->host + (size_t)P->first[j] * REC_WORDS;
        const int32_t *q = w + DESC(CU_OUT_SLOT); /* the rope's rows in place: [H, Dh] too */
        int r = q[1];
        if (r < 1 || q[10 + r - 1] != 1 || (r >= 2 && q[4 + r - 2] > 1 && q[10 + r - 2] != Dh))
            return false;
    }
    /* the launches between, and the integer products right before the
     * product, which group_launches may run in its launch */
    int32_t t0 = i;
    cu_kernel k = P->disp[P->first[i + 1] - 1].k;
    for (int32_t t = i - 1; t >= 0; t--) {
        int32_t live_n = 0, last = P->first[t + 1] - 1;
        for (int32_t d = P->first[t]; d <= last; d++)
            live_n += live(P->disp[d].grid);
        if (!live_n)
            continue;
        if (live_n != 1 || !live(P->disp[last].grid) || !one_kernel(P->disp[last].k, k) ||
            !groupable(&P->disp[last], P->host + (size_t)last * REC_WORDS))
            break;
        t0 = t;
    }
    for (int32_t t = t0; t < j; t++) {
        if (t == nm || t == i || (t < i && !live(P->disp[P->first[t + 1] - 1].grid)))
            continue;
        for (int32_t d = P->first[t]; d < P->first[t + 1]; d++) {
            const int32_t *w = P->host + (size_t)d * REC_WORDS;
            const cu_disp *E = &P->disp[d];
            if (!live(E->grid) && !w[REC_BY_OTHER])
                continue;
            for (int s = 0; s <= CU_OUT_SLOT; s++) {
                uint64_t sp[2];
                if (s == 0 && (is_mmv(E->k) || is_glu(E->k)))
                    continue; /* the integer kernels read their rows rounded, not slot 0 */
                slot_span(P, d, s, &sp[0], &sp[1]);
                if (meets(sp, wn) || meets(sp, wr) || (s == CU_OUT_SLOT && meets(sp, rp)))
                    return false;
            }
        }
    }
    return true;
}

/* The rope being filled (its record w): whether the product before it
 * norms and ropes the heads this run; writes the product's record words
 * and the norm's and its own "another launch does my work". */
static void head_take(fill_ctx *c, int32_t *w)
{
    cu_program *P = c->P;
    int32_t i = P->head_prod[c->at];
    if (i < 0 || P->head_rope[i] != c->at || !P->host)
        return;
    int32_t nm = P->head_norm[i];
    int32_t mi = P->first[i + 1] - 1; /* the product's kernel launch */
    const cu_disp *D = &P->disp[mi];
    int32_t *wi = P->host + (size_t)mi * REC_WORDS;
    int32_t *wn = nm >= 0 ? P->host + (size_t)P->first[nm] * REC_WORDS : NULL;
    vt po = vt_of(P, P->instrs[i].out, c->sv), x = vt_of(P, P->instrs[c->at].in[0], c->sv);
    int64_t Dh = w[PRM(1)], N = po.ne[po.rank - 1], cpb = wi[PRM(8)] ? 128 / wi[PRM(8)] : 0;
    bool on = P->head_count && is_mmv(D->k) && live(D->grid) && !wi[PRM(10)] &&
              !(wi[PRM(100)] | wi[PRM(101)]) && numel(&po) == N && Dh > 0 && N % Dh == 0 &&
              cpb > 0 && Dh % cpb == 0 && w[PRM(0)] == N / Dh && rows_of(&po, N) && rows_of(&x, Dh);
    if (on && nm >= 0) {
        vt ni = vt_of(P, P->instrs[nm].in[0], c->sv), no = vt_of(P, P->instrs[nm].out, c->sv);
        on = wn[PRM(7)] > 0 && !wn[PRM(8)] && wn[PRM(1)] == RM_RMS && wn[PRM(0)] == Dh &&
             (uint32_t)wn[0] == (uint32_t)(N / Dh) && rows_of(&ni, Dh) && rows_of(&no, Dh) &&
             vt_addr(P, &ni) == vt_addr(P, &po) && vt_addr(P, &no) == vt_addr(P, &x);
    } else if (on)
        on = vt_addr(P, &x) == vt_addr(P, &po);
    if (on)
        on = heads_apart(P, i, c->at, Dh);
    P->head_on[i] = on;
    put_heads(P, wi, i);
    if (wn) {
        wn[REC_BY_OTHER] = on;
        shape(&P->disp[P->first[nm]], wn);
    }
    w[REC_BY_OTHER] = on;
}

static bool fill_ew(fill_ctx *c, const rlx_lir_instr *ins)
{
    cu_program *P = c->P;
    vt o = vt_of(P, ins->out, c->sv);
    rlx_op op = ins->op;
    if (rlx_dtype_get(o.dt)->quantized)
        return fail(c, "a view of a Q8_0 KV cache was not made a view (a copy would requantize)");
    vt in[RLX_MAX_INPUTS];
    for (int k = 0; k < ins->n_in; k++)
        in[k] = vt_of(P, ins->in[k], c->sv);
    bool all_int = is_int(o.dt);
    for (int k = 0; k < ins->n_in; k++)
        all_int = all_int && is_int(in[k].dt);
    bool imode = all_int && int_capable(op);
    if (op == RLX_OP_CMP) {
        bool ii = is_int(in[0].dt) && is_int(in[1].dt);
        imode = ii;
    }

    if (op == RLX_OP_CONCAT) {
        int ax = norm_axis(ins->p.concat.axis, o.rank);
        int64_t at = 0;
        bool bad = ax < 0 || ax >= o.rank;
        if (bad)
            ax = 0;
        for (int k = 0; k < ins->n_in; k++) {
            vt part = o;
            part.ne[ax] = in[k].ne[ax];
            part.extra = at * o.st[ax] * esize(o.dt);
            if (at + part.ne[ax] > o.ne[ax])
                bad = true;
            at += part.ne[ax];
            int32_t *w = new_disp(c, CU_K_EW, false, numel(&part));
            put_desc(c, w, CU_OUT_SLOT, &part);
            vt src = bcast(in[k], part.rank, part.ne);
            put_desc(c, w, 0, &src);
            w[PRM(1)] = imode;
            w[PRM(3)] = 1;
        }
        return bad ? fail(c, "concat inputs overrun the output") : true;
    }
    if (op == RLX_OP_SCATTER) {
        vt src, part;
        bool bad = !append_rows(c, c->at, &src, &part);
        if (!ins->in_place && ins->in[0] != ins->out) {
            int32_t *w = new_disp(c, CU_K_EW, false, numel(&o));
            put_desc(c, w, CU_OUT_SLOT, &o);
            put_desc(c, w, 0, &in[0]);
            w[PRM(1)] = is_int(o.dt) && is_int(in[0].dt);
            w[PRM(3)] = 1;
        }
        /* nothing to launch when the producer of src wrote it in place */
        bool done = P->absorbed[c->at];
        int32_t *w = new_disp(c, CU_K_EW, false, bad || done ? 0 : numel(&part));
        put_desc(c, w, CU_OUT_SLOT, &part);
        put_desc(c, w, 0, &src);
        w[PRM(1)] = is_int(o.dt) && is_int(src.dt);
        w[PRM(3)] = 1;
        return bad ? fail(c, "the scatter offset is out of range for this run") : true;
    }

    int32_t *w = new_disp(c, CU_K_EW, false, numel(&o));
    put_desc(c, w, CU_OUT_SLOT, &o);
    w[PRM(1)] = imode;
    if (op == RLX_OP_PAD) {
        put_desc(c, w, 0, &in[0]);
        if (in[0].rank != o.rank)
            return fail(c, "pad ranks differ");
        w[PRM(2)] = 1;
        w[PRM(3)] = 1;
        w[PRM(4)] = fbits(ins->p.pad.value); /* read as PF(4) in both modes */
        for (int d = 0; d < o.rank; d++)
            w[PRM(16 + d)] = (int32_t)ins->p.pad.before[d];
        return true;
    }
    if (op == RLX_OP_RESHAPE) {
        put_desc(c, w, 0, &in[0]); /* decomposed by its own dims */
        w[PRM(3)] = 1;
        ew_round_q8(c, w, &o);
        return true;
    }
    if (op == RLX_OP_PERMUTE) {
        vt v = in[0];
        v.rank = o.rank;
        for (int d = 0; d < o.rank; d++) {
            int pd = ins->p.permute.perm[d];
            if (pd < 0 || pd >= in[0].rank)
                return fail(c, "bad permutation");
            v.ne[d] = in[0].ne[pd];
            v.st[d] = in[0].st[pd];
        }
        put_desc(c, w, 0, &v);
        w[PRM(3)] = 1;
        ew_round_q8(c, w, &o);
        return true;
    }
    if (op == RLX_OP_SLICE) {
        vt v = in[0];
        int ax = norm_axis(ins->p.slice.axis, v.rank);
        int64_t step = ins->p.slice.step ? ins->p.slice.step : 1;
        int64_t start = dim_eval(ins->p.slice.start, c->sv);
        bool bad = ax < 0 || ax >= v.rank || start < 0 ||
                   (o.ne[ax] > 0 && (start + (o.ne[ax] - 1) * step >= v.ne[ax] ||
                                     start + (o.ne[ax] - 1) * step < 0));
        if (ax < 0 || ax >= v.rank)
            ax = 0;
        for (int d = 0; d < v.rank; d++)
            v.ne[d] = o.ne[d];
        v.extra = start * v.st[ax] * esize(v.dt);
        v.st[ax] *= step;
        put_desc(c, w, 0, &v);
        w[PRM(3)] = 1;
        if (bad)
            return fail(c, "the slice is out of range for this run");
        ew_round_q8(c, w, &o); /* the last layer's one row of attention */
        return true;
    }
    /* elementwise family: broadcast inputs, a register program */
    for (int k = 0; k < ins->n_in; k++) {
        vt b = bcast(in[k], o.rank, o.ne);
        put_desc(c, w, k, &b);
    }
    w[PRM(3)] = ins->n_in;
    if (op == RLX_OP_COPY || op == RLX_OP_CAST) {
        w[PRM(0)] = 0;
        ew_round_q8(c, w, &o);
        return true;
    }
    rlx_fused_step one[1];
    const rlx_fused_step *steps = one;
    int n_steps = 1;
    if (op == RLX_OP_FUSED_ELEMENTWISE) {
        steps = ins->p.fused.steps;
        n_steps = ins->p.fused.n_steps;
        w[PRM(1)] = 0; /* fused programs compute in f32 */
    } else {
        memset(one, 0, sizeof one);
        one[0].op = (uint8_t)op;
        one[0].dst = (uint8_t)ins->n_in;
        one[0].a = 0;
        one[0].b = ins->n_in > 1 ? 1 : 0;
        one[0].c = ins->n_in > 2 ? 2 : 0;
        if (op == RLX_OP_CMP)
            one[0].aux = (uint8_t)ins->p.cmp.kind;
        else if (op == RLX_OP_GELU)
            one[0].aux = (uint8_t)ins->p.gelu.approx;
        if (op == RLX_OP_CLAMP) {
            one[0].p0 = ins->p.clamp.lo;
            one[0].p1 = ins->p.clamp.hi;
        } else if (op == RLX_OP_SCALE) {
            one[0].p0 = ins->p.scale.mul;
            one[0].p1 = ins->p.scale.add;
        }
    }
    w[PRM(0)] = n_steps;
    for (int s = 0; s < n_steps; s++) {
        const rlx_fused_step *st = &steps[s];
        w[PRM(8 + 4 * s)] = (int32_t)((uint32_t)st->op | (uint32_t)st->dst << 8 |
                                      (uint32_t)st->a << 16 | (uint32_t)st->b << 24);
        w[PRM(9 + 4 * s)] = (int32_t)((uint32_t)st->c | (uint32_t)st->aux << 8);
        w[PRM(10 + 4 * s)] = fbits(st->p0);
        w[PRM(11 + 4 * s)] = fbits(st->p1);
    }
    ew_round_q8(c, w, &o);
    w[REC_BY_OTHER] = glu_absorbed(P, c->at);
    return true;
}

/* A descriptor of a buffer the program owns (a scratch), at `addr`: no
 * value's span checks it. */
static void put_desc_at(fill_ctx *c, int32_t *w, int slot, const vt *t, uint64_t addr)
{
    vt x = *t;
    x.val = 0;
    x.extra = 0;
    put_desc(c, w, slot, &x);
    int32_t *q = w + DESC(slot);
    q[2] = (int32_t)(uint32_t)addr;
    q[3] = (int32_t)(uint32_t)(addr >> 32);
    c->d[c->n - 1].vals[slot] = -1;
}

/* The 8-bit rows of `a` (slot 3, int8) and their block scales (slot 4) in
 * the scratch, for rlx_q8_act and the rlx_mmv_* kernels. */
static void put_q8_descs(fill_ctx *c, int32_t *w, const vt *a, int half)
{
    vt x = *a;
    x.val = -1;
    x.dt = RLX_DTYPE_I8;
    put_desc_at(c, w, 3, &x, c->P->q8_scratch + (uint64_t)half * c->P->q8_half);
    put_desc_at(c, w, 4, &x, q8_scales(c->P, half));
}

/* Whether cuBLAS may run a matmul (from its dtypes alone): 0 no, 1 with `a`
 * as it is, 2 with `a` split into two f16 halves first (f32 `a`, f16
 * weights). */
static int blas_kind(const cu_program *P, const rlx_lir_instr *ins)
{
    if (!P->blas || ins->op != RLX_OP_MATMUL)
        return 0;
    rlx_dtype ad = P->values[ins->in[0]].dtype, bd = P->values[ins->in[1]].dtype;
    if (bd == RLX_DTYPE_F16 && !P->dev->force_f32)
        return ad == RLX_DTYPE_F16 ? 1 : ad == RLX_DTYPE_F32 ? 2 : 0;
    if (bd == RLX_DTYPE_F32 && ad == RLX_DTYPE_F32)
        return 1;
    return 0;
}

/* A dense [M, K] operand of dtype dt (a scratch's: its address set
 * apart, no value). */
static vt dense_2d(rlx_dtype dt, int64_t M, int64_t K)
{
    vt x;
    memset(&x, 0, sizeof x);
    x.val = -1;
    x.dt = dt;
    x.rank = 2;
    x.ne[0] = M;
    x.ne[1] = K;
    x.st[0] = K;
    x.st[1] = 1;
    return x;
}

/* A 64-bit device address into parameter words at, at + 1. */
static void put_addr(int32_t *w, int at, uint64_t a)
{
    w[PRM(at)] = (int32_t)(uint32_t)a;
    w[PRM(at + 1)] = (int32_t)(uint32_t)(a >> 32);
}

/* How many parts rlx_mm_tq splits K into for T output tiles of BM rows
 * (*ks: values a part, 0 for one part). An SM runs tq_blocks of its
 * blocks at a time (two on most GPUs), so T tiles on n_sm SMs keep T /
 * (waves x slots) of the slots busy: 64 tiles on an H200's 132 SMs, 24%.
 * K is split into up to 4 parts of at least 256 values (multiples of 64)
 * when that lifts the share: the fewest parts that reach 85%, else the
 * best share. */
static int32_t tq_parts(const cu_program *P, int64_t T, int64_t K, int64_t BM, int32_t *ks)
{
    int64_t sm = (P->dev->n_sm > 0 ? P->dev->n_sm : 1) * (int64_t)P->dev->tq_blocks;
    int32_t best = 1;
    double best_share = 0.0;
    *ks = 0;
    for (int32_t S = 1; S <= 4 && T > 0; S++) {
        int64_t part = ((K + S - 1) / S + 63) / 64 * 64;
        if (S > 1 && (!P->sk_scratch || part < 256 || (K + part - 1) / part != S || T > SK_TILES ||
                      (uint64_t)(T * S * BM * 128 * 4) > P->sk_bytes))
            continue;
        int64_t n = T * S, waves = (n + sm - 1) / sm;
        double share = (double)n / (double)(waves * sm);
        if (share > best_share + 1e-9) {
            best_share = share;
            best = S;
            *ks = S > 1 ? (int32_t)part : 0;
        }
        if (share >= 0.85)
            break;
    }
    return best;
}

/* A matrix-vector product's [M, N] output into an append's rows: the
 * state's rows as [M, H, W] (n = h W + w; the value rows of a decode step
 * are H heads of W), P(10) = 1. */
static bool mmv_into_append(fill_ctx *c, int32_t *w, const vt *o, int64_t M, int64_t N)
{
    vt src, dst;
    if (into_append(c, o, &src, &dst) < 0)
        return false;
    /* src's dims by stride, largest first: at most one of m (stride N),
     * then at most two that split n */
    int64_t ne[RLX_MAX_DIMS], st[RLX_MAX_DIMS], ds[RLX_MAX_DIMS];
    int n = by_stride(&src, &dst, ne, st, ds), k = 0;
    int64_t sm = 0, sh = 0, sw = 0, H = 1, W = N;
    if (k < n && st[k] >= N) {
        if (st[k] != N || ne[k] != M)
            return false;
        sm = ds[k++];
    }
    if (n - k == 2 && ne[k] * ne[k + 1] == N && st[k + 1] == 1 && st[k] == ne[k + 1]) {
        H = ne[k], W = ne[k + 1], sh = ds[k], sw = ds[k + 1];
    } else if (n - k == 1 && ne[k] == N && st[k] == 1) {
        sw = ds[k];
    } else if (!(n == k && N == 1)) {
        return false;
    }
    vt O = dst;
    O.rank = 3;
    O.ne[0] = M, O.ne[1] = H, O.ne[2] = W;
    O.st[0] = sm, O.st[1] = sh, O.st[2] = sw;
    put_desc(c, w, CU_OUT_SLOT, &O);
    w[PRM(10)] = 1;
    return true;
}

/* The first product of a gated pair being filled (its integer kernel's
 * record w, its output [M, N]): whether its launch does the second
 * product and the mul too this run (the mul's output dense f32, rounded
 * for the down product; the second weight as aligned, its rows as long);
 * then its kernel is the GLU form and its output the mul's. */
static void glu_take(fill_ctx *c, int32_t *w, int64_t M, int64_t N, int64_t rowb, uint64_t align)
{
    cu_program *P = c->P;
    struct cu_glu *g = &P->glu[c->at];
    g->on = false;
    const rlx_lir_instr *u = &P->instrs[g->up], *e = &P->instrs[g->mul];
    vt bu = vt_of(P, u->in[1], c->sv), h = vt_of(P, e->out, c->sv);
    const rlx_dtype_info *bi = rlx_dtype_get(bu.dt);
    uint64_t ub = vt_addr(P, &bu);
    int64_t urowb = bu.st[0] / bi->block_size * bi->type_size;
    if (!P->glu_count || N % 32 || N / 32 > P->glu_groups || !ub || ub % align || urowb != rowb ||
        numel(&h) != M * N || !q8_roundable(P, &h))
        return;
    vt H = dense_2d(h.dt, M, N); /* the mul's output (dense) as [M, N] */
    H.val = h.val;
    H.extra = h.extra;
    put_desc(c, w, CU_OUT_SLOT, &H);
    put_desc(c, w, 5, &bu);
    w[PRM(104)] = (int32_t)u->p.matmul.act;
    put_addr(w, 106, P->glu_count);
    put_q8_scratch(P, w, 120, 1); /* not over the rows it reads */
    cu_disp *d = &c->d[c->n - 1];
    d->k = (cu_kernel)(d->k - CU_K_MMV_Q4_K + CU_K_MMV_GLU_Q4_K);
    g->on = true;
}

static bool fill_matmul(fill_ctx *c, const rlx_lir_instr *ins)
{
    cu_program *P = c->P;
    vt o = vt_of(P, ins->out, c->sv);
    vt a = vt_of(P, ins->in[0], c->sv), b = vt_of(P, ins->in[1], c->sv);
    int r = o.rank;
    int64_t M = o.ne[r - 2], N = o.ne[r - 1];
    int ra = a.rank, rb = b.rank;
    bool ta = ins->p.matmul.trans_a, tb = ins->p.matmul.trans_b;
    int64_t K = ta ? a.ne[ra - 2] : a.ne[ra - 1];
    int64_t a_sm = ta ? a.st[ra - 1] : a.st[ra - 2], a_sk = ta ? a.st[ra - 2] : a.st[ra - 1];
    int64_t b_sk = tb ? b.st[rb - 1] : b.st[rb - 2], b_sn = tb ? b.st[rb - 2] : b.st[rb - 1];
    int64_t bK = tb ? b.ne[rb - 1] : b.ne[rb - 2];
    if (bK != K)
        return fail(c, "matmul inner dims differ");
    /* batch dims broadcast to the output's */
    vt A = a, B = b;
    A.rank = B.rank = r;
    for (int d = 0; d < r - 2; d++) {
        int sa = d - (r - ra), sb = d - (r - rb);
        A.ne[d] = B.ne[d] = o.ne[d];
        A.st[d] = sa < 0 || a.ne[sa] == 1 ? 0 : a.st[sa];
        B.st[d] = sb < 0 || b.ne[sb] == 1 ? 0 : b.st[sb];
    }
    A.ne[r - 2] = M;
    A.ne[r - 1] = K;
    A.st[r - 2] = a_sm;
    A.st[r - 1] = a_sk;
    B.ne[r - 2] = K;
    B.ne[r - 1] = N;
    B.st[r - 2] = b_sk;
    B.st[r - 1] = b_sn;
    /* the kernel for this run's shape: a warp per output for a few rows of
     * a (matrix-vector products), tiles for the rest */
    int64_t rows_b = numel(&o) / (N ? N : 1);
    bool quant = rlx_dtype_get(b.dt)->quantized;
    /* F16/F32 weights: cuBLAS for more than a few rows. cuBLAS multiplies
     * f16 weights only by f16 activations, so an f32 `a` is split into two
     * halves, a = hi + lo (hi = f16(a), lo = f16(a - hi), 22 of f32's 24
     * bits), and the product is W.hi + W.lo: two GEMMs summed in f32, as
     * exact as our f32 kernels (an activation beyond f16's range, 65504,
     * would overflow hi, as it does in llama.cpp's and PyTorch's f16 paths).
     * The launches an instruction becomes must
     * not depend on the shape, so such a matmul always has three: hi and lo
     * into the scratch (empty when cuBLAS does not run), and the GEMMs or
     * our kernel. */
    int blas = blas_kind(P, ins);
    if (blas) {
        bool cast = blas == 2;
        bool use = rows_b > 8 && numel(&o) == M * N && !ins->p.matmul.has_bias &&
                   ins->p.matmul.act == RLX_ACT_NONE && o.st[r - 1] == 1 && o.st[r - 2] >= N &&
                   (o.dt == RLX_DTYPE_F32 || o.dt == RLX_DTYPE_F16) &&
                   (b_sk == 1 ? b_sn >= K : b_sn == 1 && b_sk >= N) &&
                   (cast ? (uint64_t)(M * K * 4) <= P->mm_scratch_bytes : a_sk == 1 && a_sm >= K) &&
                   M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX;
        uint64_t xs = P->mm_scratch, xlo = xs + (uint64_t)(use ? M * K * 2 : 0);
        vt x = dense_2d(RLX_DTYPE_F16, M, K); /* hi and lo */
        if (cast) {
            int32_t *w = new_disp(c, CU_K_EW, false, use ? M * K : 0); /* hi = f16(a) */
            put_desc_at(c, w, CU_OUT_SLOT, &x, xs);
            put_desc(c, w, 0, &A);
            w[PRM(3)] = 1;
            w = new_disp(c, CU_K_EW, false, use ? M * K : 0); /* lo = f16(a - hi) */
            put_desc_at(c, w, CU_OUT_SLOT, &x, xlo);
            put_desc(c, w, 0, &A);
            put_desc_at(c, w, 1, &x, xs);
            w[PRM(0)] = 1;
            w[PRM(3)] = 2;
            w[PRM(8)] = (int32_t)((uint32_t)RLX_OP_SUB | 2u << 8 | 0u << 16 | 1u << 24);
        }
        if (use) {
            int32_t *w = new_disp(c, CU_K_CUBLAS, false, 1);
            put_desc(c, w, CU_OUT_SLOT, &o);
            put_desc(c, w, 1, &B);
            if (cast) {
                put_desc_at(c, w, 0, &x, xs);
                put_desc_at(c, w, 2, &x, xlo);
            } else {
                put_desc(c, w, 0, &A);
            }
            w[PRM(51)] = cast; /* a second GEMM adds W.lo */
            /* row-major out[M, N] = a[M, K] . b[K, N] is column-major
             * out^T (N x M) = b^T (N x K) . a^T (K x M) */
            w[PRM(40)] = b_sk == 1; /* b's columns contiguous: b^T stored as K x N */
            w[PRM(41)] = (int32_t)N;
            w[PRM(42)] = (int32_t)M;
            w[PRM(43)] = (int32_t)K;
            w[PRM(44)] = (int32_t)(b_sk == 1 ? b_sn : b_sk);
            w[PRM(45)] = (int32_t)(cast ? K : a_sm);
            w[PRM(46)] = (int32_t)o.st[r - 2];
            w[PRM(47)] = (int32_t)b.dt;
            w[PRM(48)] = (int32_t)(cast ? RLX_DTYPE_F16 : a.dt);
            w[PRM(49)] = (int32_t)o.dt;
            w[PRM(50)] = fbits(ins->p.matmul.alpha != 0.0f ? ins->p.matmul.alpha : 1.0f);
            return true;
        }
    }
    const rlx_dtype_info *bi_ = rlx_dtype_get(b.dt);
    bool vec_ok = K % 8 == 0 && B.st[r - 2] == 1;
    if (quant) {
        vec_ok = K % bi_->block_size == 0;
    } else if (vec_ok) {
        /* whole 16-byte loads along b's rows */
        uint64_t base = c->P->addr ? c->P->addr[b.val] : 0;
        int64_t es = esize(b.dt);
        vec_ok = (b.dt == RLX_DTYPE_F32 || b.dt == RLX_DTYPE_F16 || b.dt == RLX_DTYPE_BF16 ||
                  b.dt == RLX_DTYPE_F8_E4M3 || b.dt == RLX_DTYPE_F8_E5M2) &&
                 base % 16 == 0 && (B.st[r - 1] * es) % 16 == 0;
        for (int d = 0; d < r - 2 && vec_ok; d++)
            vec_ok = (B.st[d] * es) % 16 == 0;
    }
    /* quantized weights under at most 8 activation rows: the rows rounded
     * to 8-bit blocks of 32 first, then an integer matrix-vector kernel of
     * the weight type. A quantized matmul is always these two launches (the
     * first empty when another kernel runs). */
    cu_kernel mmv = CU_K_COUNT;
    int32_t tpc = 32;
    int half = 0; /* the 8-bit scratch's half the rows are read from */
    /* a quantized b: where its rows start and their bytes */
    uint64_t bbase = vt_addr(P, &b);
    int64_t rowb = quant ? b.st[0] / bi_->block_size * bi_->type_size : 0;
    if (quant) {
        /* values of K a thread takes: about a round of its kernel's units
         * (kernels/matmul.cu's Q::ROUND), two of 64 for the K-quants (128),
         * two of 32 for Q8_0 and Q4_0 (64) */
        int64_t per = 128;
        switch (b.dt) {
        case RLX_DTYPE_Q4_K:
            mmv = CU_K_MMV_Q4_K;
            break;
        case RLX_DTYPE_Q5_K:
            mmv = CU_K_MMV_Q5_K;
            break;
        case RLX_DTYPE_Q6_K:
            mmv = CU_K_MMV_Q6_K;
            break;
        case RLX_DTYPE_Q8_0:
            mmv = CU_K_MMV_Q8_0;
            per = 64;
            break;
        case RLX_DTYPE_Q4_0:
            mmv = CU_K_MMV_Q4_0;
            per = 64;
            break;
        default:
            break;
        }
        /* Q4_K's and Q5_K's loads are 16 bytes wide; Q6_K, Q8_0 and Q4_0
         * read their runs as words from 2-byte aligned starts */
        uint64_t align = mmv == CU_K_MMV_Q4_K || mmv == CU_K_MMV_Q5_K ? 16 : 2;
        if (mmv != CU_K_COUNT &&
            !(rows_b <= 8 && rows_b == M && P->q8_scratch && K <= P->q8_k_max &&
              bbase % align == 0 && rowb % (int64_t)align == 0 && !c->P->dev->force_f32))
            mmv = CU_K_COUNT;
        /* threads per output column, 4 to 128 */
        tpc = 4;
        while (tpc < 128 && (int64_t)tpc * per < K)
            tpc *= 2;
        /* rows the previous launch rounded (q, k and v of one input) are
         * not rounded again */
        uint64_t abase = vt_addr(P, &a);
        uint64_t key[Q8_KEY];
        q8_key_make(key, abase, M, K, A.st[r - 2], A.st[r - 1], A.dt);
        bool again = mmv != CU_K_COUNT && abase && P->q8_valid &&
                     memcmp(key, P->q8_key, Q8_ID * sizeof *key) == 0;
        half = again ? (int)P->q8_key[Q8_ID] : 0;
        key[Q8_ID] = (uint64_t)half;
        P->q8_valid = mmv != CU_K_COUNT && abase;
        memcpy(P->q8_key, key, sizeof key);
        int32_t *w = new_disp(c, CU_K_Q8_ACT, false, mmv != CU_K_COUNT && !again ? M * K / 32 : 0);
        put_desc(c, w, 0, &A);
        put_q8_descs(c, w, &A, 0);
        w[PRM(0)] = (int32_t)K;
    }
    cu_kernel kk;
    bool tq = false; /* rlx_mm_tq, from an f16 copy of `a` */
    if (mmv != CU_K_COUNT)
        kk = mmv;
    else if (rows_b <= 8)
        kk = vec_ok ? CU_K_MM_VEC : CU_K_MM_WARP;
    else if (quant && !c->P->dev->force_f32 && c->P->dev->cc_major >= 7) {
        /* 128x128 tiles, or 64x128 where those would not give every SM
         * two; from an f16 copy of `a` (one batch, while the scratch holds
         * it), else converting `a` as it is staged */
        int64_t tiles = (N + 127) / 128 * ((M + 127) / 128) * (rows_b / (M ? M : 1));
        bool small = tiles < 2 * (int64_t)c->P->dev->n_sm;
        tq = rows_b == M && P->tq_scratch && (uint64_t)(M * K * 2) <= P->tq_scratch_bytes &&
             K % 32 == 0 && !P->dev->no_tq;
        kk = tq ? (small ? CU_K_MM_TQ64 : CU_K_MM_TQ) : small ? CU_K_MM_TC64 : CU_K_MM_TC;
    } else
        kk = CU_K_MM_TILE;
    /* a quantized matmul's f16 copy of `a` for rlx_mm_tq (empty for the
     * other kernels): always this launch, so the count stays */
    vt ah = dense_2d(RLX_DTYPE_F16, M, K);
    if (quant) {
        int32_t *w = new_disp(c, CU_K_EW, false, tq ? M * K : 0);
        put_desc_at(c, w, CU_OUT_SLOT, &ah, P->tq_scratch);
        put_desc(c, w, 0, &A);
        w[PRM(3)] = 1;
    }
    int32_t *w = new_disp(c, kk, false, numel(&o));
    if (tq) {
        put_desc_at(c, w, 3, &ah, P->tq_scratch);
        /* the per-type paths' loads: 16 bytes (Q4_K), 2 bytes (the others) */
        w[PRM(9)] = (bbase | (uint64_t)rowb) % 16 == 0  ? 16
                    : (bbase | (uint64_t)rowb) % 2 == 0 ? 2
                                                        : 0;
    }
    if (kk == CU_K_MM_VEC || kk == CU_K_MM_TC || kk == CU_K_MM_TC64) {
        /* a's rows as float4s: contiguous f32 at 16-byte aligned starts */
        uint64_t abase = c->P->addr ? c->P->addr[a.val] : 0;
        bool a4 =
            a.dt == RLX_DTYPE_F32 && A.st[r - 1] == 1 && abase % 16 == 0 && A.st[r - 2] % 4 == 0;
        for (int d = 0; d < r - 2 && a4; d++)
            a4 = A.st[d] % 4 == 0;
        w[PRM(7)] = a4;
    }
    if (mmv != CU_K_COUNT) {
        put_q8_descs(c, w, &A, half);
        w[PRM(8)] = tpc;
        w[PRM(116)] = (int32_t)(mmv - CU_K_MMV_Q4_K); /* for rlx_mmv_mixed */
        /* weights no launch writes: the kernel loads its first ones before
         * it waits for the launch before it */
        rlx_home hb = P->values[b.val].home;
        w[PRM(117)] = hb == RLX_HOME_PARAM || hb == RLX_HOME_CONST;
        put_tail(P, w, c->at);
        put_heads(P, w, c->at);
    }
    {
        cu_disp *dd = &c->d[c->n - 1];
        int64_t nb = rows_b / (M ? M : 1);
        /* the kernels' output tiles (columns, rows) */
        bool tc = kk == CU_K_MM_TC || kk == CU_K_MM_TC64 || kk == CU_K_MM_TQ || kk == CU_K_MM_TQ64;
        int64_t tn = tc ? 128 : 64;
        int64_t tm = kk == CU_K_MM_TC || kk == CU_K_MM_TQ ? 128 : 64;
        dd->grid[0] = (uint32_t)((N + tn - 1) / tn);
        dd->grid[1] = (uint32_t)((M + tm - 1) / tm);
        dd->grid[2] = (uint32_t)(nb ? nb : 1);
        if (tq) { /* one batch: z splits K where the tiles are few */
            int32_t ks = 0;
            dd->grid[2] = (uint32_t)tq_parts(P, (int64_t)dd->grid[0] * dd->grid[1], K, tm, &ks);
            if (ks) {
                w[PRM(11)] = ks;
                put_addr(w, 12, P->sk_scratch + SK_COUNT_BYTES);
                put_addr(w, 14, P->sk_scratch);
            }
        }
    }
    put_desc(c, w, CU_OUT_SLOT, &o);
    if (P->append_of[c->at] >= 0) {
        bool done = mmv != CU_K_COUNT && mmv_into_append(c, w, &o, M, N);
        P->absorbed[P->append_of[c->at]] = done;
    }
    put_desc(c, w, 0, &A);
    put_desc(c, w, 1, &B);
    w[PRM(0)] = (int32_t)K;
    w[PRM(1)] = (int32_t)ins->p.matmul.act;
    w[PRM(2)] = fbits(ins->p.matmul.alpha);
    if (ins->p.matmul.has_bias) {
        vt bb = bias_view(vt_of(P, ins->in[2], c->sv), N);
        put_desc(c, w, 2, &bb);
        w[PRM(3)] = 1;
    }
    if (quant) {
        if (K % bi_->block_size)
            return fail(c, "K is not a whole number of blocks");
        w[PRM(4)] = 1;
        w[PRM(5)] = (int32_t)rowb;
    }
    if (P->glu[c->at].lead == c->at) {
        P->glu[c->at].on = false;
        if (mmv != CU_K_COUNT)
            glu_take(c, w, M, N, rowb, mmv == CU_K_MMV_Q4_K || mmv == CU_K_MMV_Q5_K ? 16 : 2);
    }
    w[REC_BY_OTHER] = glu_absorbed(P, c->at);
    return true;
}

static bool fill_rowop(fill_ctx *c, const rlx_lir_instr *ins)
{
    cu_program *P = c->P;
    vt x = vt_of(P, ins->in[0], c->sv), o = vt_of(P, ins->out, c->sv);
    rlx_op op = ins->op;
    int r = x.rank;
    if (op == RLX_OP_GROUP_NORM) {
        int64_t N = x.ne[0], C = x.ne[1], G = ins->p.norm.groups > 0 ? ins->p.norm.groups : 1;
        if (C % G)
            return fail(c, "channels are not a multiple of the groups");
        int64_t S = 1;
        for (int d = 2; d < r; d++)
            S *= x.ne[d];
        vt X = x, O = o;
        X.rank = O.rank = 4;
        int64_t cg = C / G;
        X.ne[0] = O.ne[0] = N;
        X.ne[1] = O.ne[1] = G;
        X.ne[2] = O.ne[2] = cg;
        X.ne[3] = O.ne[3] = S;
        X.st[0] = x.st[0];
        O.st[0] = o.st[0];
        X.st[1] = cg * x.st[1];
        O.st[1] = cg * o.st[1];
        X.st[2] = x.st[1];
        O.st[2] = o.st[1];
        X.st[3] = r > 2 ? x.st[r - 1] : 1;
        O.st[3] = r > 2 ? o.st[r - 1] : 1;
        int32_t *w = new_disp(c, CU_K_ROWOP, true, N * G);
        put_desc(c, w, 0, &X);
        put_desc(c, w, CU_OUT_SLOT, &O);
        bool hw = ins->p.norm.has_weight, hb = ins->p.norm.has_bias;
        int wi = -1, bi = -1;
        if (!hw && !hb) {
            wi = ins->n_in > 1 ? 1 : -1;
            bi = ins->n_in > 2 ? 2 : -1;
        } else {
            int i = 1;
            if (hw && ins->n_in > i)
                wi = i++;
            if (hb && ins->n_in > i)
                bi = i;
        }
        if (wi > 0) {
            vt t = vt_of(P, ins->in[wi], c->sv);
            vt u = t;
            u.rank = 1;
            u.ne[0] = C;
            u.st[0] = t.st[t.rank - 1];
            put_desc(c, w, 1, &u);
        }
        if (bi > 0) {
            vt t = vt_of(P, ins->in[bi], c->sv);
            vt u = t;
            u.rank = 1;
            u.ne[0] = C;
            u.st[0] = t.st[t.rank - 1];
            put_desc(c, w, 2, &u);
        }
        w[PRM(0)] = (int32_t)(cg * S);
        w[PRM(1)] = RM_GN;
        w[PRM(2)] = fbits(ins->p.norm.eps);
        w[PRM(3)] = wi > 0;
        w[PRM(4)] = bi > 0;
        w[PRM(5)] = (int32_t)cg;
        w[PRM(6)] = (int32_t)S;
        return true;
    }

    /* keep_sum: out [..., 2, D] is written as its sum half (the output
     * operand) and its norm half, P(5) bytes further on in the same buffer */
    int64_t norm_delta = 0;
    if (op == RLX_OP_ADD_RMS_NORM && ins->p.norm.keep_sum) {
        int ax = r - 1;
        if (o.rank != r + 1 || o.ne[ax] != 2 || o.st[ax] <= 0)
            return fail(c, "add_rms_norm keep_sum wants out [..., 2, D]");
        norm_delta = o.st[ax] * (int64_t)rlx_dtype_get(o.dt)->type_size;
        if (norm_delta > INT32_MAX)
            return fail(c, "add_rms_norm keep_sum: the halves are over 2 GiB apart");
        o.ne[ax] = o.ne[ax + 1];
        o.st[ax] = o.st[ax + 1];
        o.rank = r;
    }
    int axis = r - 1;
    if (op == RLX_OP_REDUCE_SUM || op == RLX_OP_REDUCE_MEAN || op == RLX_OP_REDUCE_MAX ||
        op == RLX_OP_ARGMAX)
        axis = norm_axis(ins->p.reduce.axis, r);
    else if (op == RLX_OP_TOPK)
        axis = norm_axis(ins->p.topk.axis, r);
    if (axis < 0 || axis >= r)
        return fail(c, "axis out of range");
    int64_t L = x.ne[axis];
    vt X = axis_last(x, axis);
    /* the output in the same row layout */
    vt O = o;
    O.rank = r;
    if (o.rank == r) {
        O = axis_last(o, axis);
    } else { /* reduced without keepdim: out dims are x's minus the axis */
        int j = 0;
        for (int d = 0; d < r; d++)
            if (d != axis) {
                O.ne[j] = j < o.rank ? o.ne[j] : 1;
                O.st[j] = j < o.rank ? o.st[j] : 0;
                j++;
            }
        O.ne[r - 1] = 1;
        O.st[r - 1] = 0;
    }
    int64_t rows = 1;
    for (int d = 0; d < r - 1; d++)
        rows *= X.ne[d];
    if (L == 0)
        rows = 0;
    int32_t *w = new_disp(c, CU_K_ROWOP, true, rows);
    put_desc(c, w, 0, &X);
    put_desc(c, w, CU_OUT_SLOT, &O);
    w[PRM(0)] = (int32_t)L;
    switch (op) {
    case RLX_OP_REDUCE_SUM:
        w[PRM(1)] = RM_SUM;
        break;
    case RLX_OP_REDUCE_MEAN:
        w[PRM(1)] = RM_MEAN;
        break;
    case RLX_OP_REDUCE_MAX:
        w[PRM(1)] = RM_MAX;
        break;
    case RLX_OP_ARGMAX:
        w[PRM(1)] = RM_ARGMAX;
        break;
    case RLX_OP_TOPK:
        w[PRM(1)] = RM_TOPK;
        w[PRM(2)] = ins->p.topk.k;
        w[PRM(3)] = ins->p.topk.largest;
        w[PRM(4)] = ins->p.topk.indices;
        break;
    case RLX_OP_SOFTMAX:
        w[PRM(1)] = RM_SOFTMAX;
        w[PRM(2)] = fbits(ins->p.softmax.scale);
        w[PRM(3)] = fbits(ins->p.softmax.softcap);
        if (ins->p.softmax.has_mask && ins->n_in > 1) {
            vt m = bcast(vt_of(P, ins->in[1], c->sv), r, x.ne);
            vt M = axis_last(m, axis);
            put_desc(c, w, 1, &M);
            w[PRM(4)] = 1;
        }
        break;
    default: { /* norms */
        bool add = op == RLX_OP_ADD_RMS_NORM;
        w[PRM(1)] = op == RLX_OP_LAYER_NORM ? RM_LN : op == RLX_OP_RMS_NORM ? RM_RMS : RM_ADDRMS;
        w[PRM(2)] = fbits(ins->p.norm.eps);
        w[PRM(5)] = (int32_t)norm_delta;
        int wi = -1, bi = -1;
        if (add) {
            vt b = bcast(vt_of(P, ins->in[1], c->sv), r, x.ne);
            put_desc(c, w, 1, &b);
            wi = 2;
        } else {
            bool hw = ins->p.norm.has_weight, hb = ins->p.norm.has_bias;
            if (!hw && !hb) {
                wi = ins->n_in > 1 ? 1 : -1;
                bi = ins->n_in > 2 ? 2 : -1;
            } else {
                int i = 1;
                if (hw && ins->n_in > i)
                    wi = i++;
                if (hb && ins->n_in > i)
                    bi = i;
            }
        }
        if (wi > 0 && wi < ins->n_in) {
            vt t = bcast(vt_of(P, ins->in[wi], c->sv), r, x.ne);
            put_desc(c, w, add ? 2 : 1, &t);
            w[PRM(3)] = 1;
        }
        if (bi > 0) {
            vt t = bcast(vt_of(P, ins->in[bi], c->sv), r, x.ne);
            put_desc(c, w, 2, &t);
            w[PRM(4)] = 1;
        }
        /* RMS norms of f32 rows with unit strides, every row 16-byte
         * aligned: the float4 kernel, a warp a row up to 1024 */
        if (w[PRM(1)] != RM_LN && !w[PRM(4)] && L % 4 == 0 && L <= INT32_MAX &&
            norm_delta % 16 == 0) {
            int slots[4] = {0, CU_OUT_SLOT, add ? 1 : -1, w[PRM(3)] ? (add ? 2 : 1) : -1};
            bool ok = true;
            for (int k = 0; k < 4 && ok; k++) {
                if (slots[k] < 0)
                    continue;
                const int32_t *q = w + DESC(slots[k]);
                uint64_t a = (uint64_t)(uint32_t)q[2] | (uint64_t)(uint32_t)q[3] << 32;
                ok = q[0] == RLX_DTYPE_F32 && q[1] == r && q[10 + r - 1] == 1 && a % 16 == 0;
                for (int d = 0; d < r - 1 && ok; d++)
                    ok = q[10 + d] % 4 == 0;
            }
            if (ok)
                w[PRM(7)] = L <= 1024 ? 32 : 256;
            /* a few rows: also rounded to 8-bit blocks into the scratch of
             * the integer matrix-vector kernels, for the quantized matmul
             * that usually follows (it finds them by their key; any other
             * consumer reads the f32 rows as always) */
            const int32_t *qo = w + DESC(CU_OUT_SLOT);
            uint64_t oa = (uint64_t)(uint32_t)qo[2] | (uint64_t)(uint32_t)qo[3] << 32;
            bool even = true; /* rows a fixed stride apart, whatever dims they span */
            for (int d = 0; d < r - 2 && even; d++)
                even = O.ne[d] == 1 || O.st[d] == O.st[d + 1] * O.ne[d + 1];
            if (ok && even && oa && P->q8_scratch && rows <= 8 && L % 128 == 0 &&
                L <= P->q8_k_max && P->feeds_q8[c->at]) {
                w[PRM(8)] = 1;
                put_q8_scratch(P, w, 9, 0);
                uint64_t key[Q8_KEY];
                q8_key_make(key, oa + (uint64_t)(add ? norm_delta : 0), rows, L,
                            r >= 2 ? O.st[r - 2] : L, 1, RLX_DTYPE_F32);
                memcpy(P->q8_key, key, sizeof key);
                P->q8_valid = true;
            }
        }
        /* the float4 kernel's work run by the product before it: no
         * launch of its own */
        w[REC_BY_OTHER] =
            tail_take(c, w) || (P->head_prod[c->at] >= 0 && P->head_on[P->head_prod[c->at]]);
        break;
    }
    }
    return true;
}

static bool fill_rope(fill_ctx *c, const rlx_lir_instr *ins)
{
    cu_program *P = c->P;
    vt x = vt_of(P, ins->in[0], c->sv), pos = vt_of(P, ins->in[1], c->sv),
       o = vt_of(P, ins->out, c->sv);
    int r = x.rank;
    int64_t D = x.ne[r - 1];
    int64_t n_rot = ins->p.rope.n_rot > 0 ? ins->p.rope.n_rot : D;
    if (n_rot > D)
        n_rot = D;
    int64_t half = n_rot / 2;
    int64_t rows = numel(&x) / (D ? D : 1);
    int sa = norm_axis(ins->p.rope.seq_axis, r);
    /* the rows straight into a KV cache (a dim of o may map to none of
     * the append's: then o stays) */
    vt src, dst, O = o;
    int32_t j = into_append(c, &o, &src, &dst);
    for (int d = 0; d < o.rank && j >= 0; d++) {
        O.st[d] = append_stride(&src, &dst, o.ne[d], o.st[d]);
        if (O.st[d] < 0)
            j = -1;
    }
    if (j >= 0) {
        O.val = dst.val, O.dt = dst.dt, O.extra = dst.extra;
        P->absorbed[j] = true;
    } else {
        O = o;
        if (P->append_of[c->at] >= 0)
            P->absorbed[P->append_of[c->at]] = false;
    }
    int32_t *w = new_disp(c, CU_K_ROPE, false, D ? rows * (D - half) : 0);
    put_desc(c, w, 0, &x);
    put_desc(c, w, 1, &pos);
    put_desc(c, w, CU_OUT_SLOT, &O);
    w[PRM(0)] = (int32_t)rows;
    w[PRM(1)] = (int32_t)D;
    w[PRM(2)] = (int32_t)half;
    w[PRM(3)] = (int32_t)(n_rot ? n_rot : 1);
    w[PRM(4)] = ins->p.rope.mode == RLX_ROPE_NEOX;
    w[PRM(5)] = fbits(ins->p.rope.freq_base > 0 ? ins->p.rope.freq_base : 10000.0f);
    w[PRM(6)] = fbits(ins->p.rope.freq_scale != 0.0f ? ins->p.rope.freq_scale : 1.0f);
    if (ins->n_in > 2) {
        vt ff = vt_of(P, ins->in[2], c->sv);
        put_desc(c, w, 2, &ff);
        w[PRM(7)] = 1;
    }
    w[PRM(8)] = sa;
    head_take(c, w);
    return true;
}

static bool fill_attention(fill_ctx *c, const rlx_lir_instr *ins)
{
    cu_program *P = c->P;
    vt q = vt_of(P, ins->in[0], c->sv), k = vt_of(P, ins->in[1], c->sv),
       v = vt_of(P, ins->in[2], c->sv), o = vt_of(P, ins->out, c->sv);
    int rq = q.rank, rk = k.rank, rv = v.rank, ro = o.rank;
    int64_t B = rq == 4 ? q.ne[0] : 1;
    int64_t Hq = q.ne[rq - 3], S = q.ne[rq - 2], D = q.ne[rq - 1];
    int64_t Hkv = k.ne[rk - 3], T = k.ne[rk - 2], Dv = v.ne[rv - 1];
    if (Hkv <= 0 || Hq % Hkv)
        return fail(c, "query heads are not a multiple of the key/value heads");
    if (D > ATTN_MAX_D || Dv > ATTN_MAX_DV)
        return fail(c, "head dim too large");
    int32_t *w = new_disp(c, Dv > 256 ? CU_K_ATTN_WIDE : CU_K_ATTN, true, B * Hq * S);
    put_desc(c, w, 0, &q);
    put_desc(c, w, 1, &k);
    put_desc(c, w, 2, &v);
    put_desc(c, w, CU_OUT_SLOT, &o);
    w[PRM(0)] = (int32_t)B;
    w[PRM(1)] = (int32_t)Hq;
    w[PRM(2)] = (int32_t)S;
    w[PRM(3)] = (int32_t)D;
    w[PRM(4)] = (int32_t)Hkv;
    w[PRM(5)] = (int32_t)T;
    w[PRM(6)] = (int32_t)Dv;
    float scale = ins->p.attn.scale != 0.0f ? ins->p.attn.scale : 1.0f / sqrtf((float)D);
    w[PRM(7)] = fbits(scale);
    w[PRM(8)] = fbits(ins->p.attn.softcap);
    w[PRM(9)] = (int32_t)ins->p.attn.mask;
    w[PRM(10)] = ins->p.attn.window;
#define BST(t, r) ((r) == 4 && (t).ne[0] != 1 ? (t).st[0] : 0)
    w[PRM(12)] = (int32_t)BST(q, rq);
    w[PRM(13)] = (int32_t)BST(k, rk);
    w[PRM(14)] = (int32_t)BST(v, rv);
    w[PRM(15)] = (int32_t)(ro == 4 ? o.st[0] : 0);
#undef BST
    if (ins->n_in > 3) {
        vt bias = vt_of(P, ins->in[3], c->sv);
        int64_t full[4] = {B, Hq, S, T};
        vt bb = bcast(bias, 4, full);
        put_desc(c, w, 3, &bb);
        w[PRM(11)] = 1;
        for (int d = 0; d < 4; d++)
            w[PRM(16 + d)] = (int32_t)bb.st[d];
    }
    const vt *ts[4] = {&q, &k, &v, &o};
    for (int j = 0; j < 4; j++) {
        int rr = ts[j]->rank;
        for (int d = 0; d < 3; d++)
            w[PRM(20 + 3 * j + d)] = (int32_t)ts[j]->st[rr - 3 + d];
    }
    /* few query rows over many keys (decoding): the keys split over
     * several blocks, merged by each row's last one */
    int64_t rows = B * Hq * S, cap = (int64_t)ATTN_SPLIT_ROWS(P->dev);
    int32_t nsplit = 1;
    if (T >= 128 && rows <= cap && P->attn_scratch) { /* about 64 keys a block */
        nsplit = (int32_t)((T + 63) / 64);
        if (nsplit > ATTN_MAX_SPLIT)
            nsplit = ATTN_MAX_SPLIT;
        if ((uint64_t)(rows * nsplit * (Dv + 2) * 4) > P->attn_scratch_bytes)
            nsplit = 1;
    }
    w[9] = nsplit;
    /* a prompt's rows ATTN_ROWS a block where the value rows fit it
     * (kernels/attention.cu's QR; Dv up to 128) */
    if (nsplit == 1 && S >= ATTN_ROWS && Dv <= 128 && c->d[c->n - 1].k == CU_K_ATTN) {
        c->d[c->n - 1].k = CU_K_ATTN_ROWS;
        w[0] = (int32_t)(B * Hq * ((S + ATTN_ROWS - 1) / ATTN_ROWS));
    }
    w[10] = (int32_t)(uint32_t)P->attn_scratch;
    w[11] = (int32_t)(uint32_t)(P->attn_scratch >> 32);
    w[PRM(32)] = (int32_t)(uint32_t)P->attn_count;
    w[PRM(33)] = (int32_t)(uint32_t)(P->attn_count >> 32);
    /* a dense f32 output read next by an integer matrix-vector product
     * (the output projection of a decode step) is rounded to 8 bits here */
    uint64_t oa = vt_addr(P, &o);
    if (!P->dev->unfused && o.dt == RLX_DTYPE_F32 && Dv % 32 == 0 && o.st[ro - 1] == 1 && oa &&
        P->q8_scratch && dense_set(&o) && numel(&o) <= 8 * P->q8_k_max) {
        w[PRM(34)] = 1;
        put_q8_scratch(P, w, 120, 0);
        q8_key_make(P->q8_key, oa, 1, numel(&o), numel(&o), 1, RLX_DTYPE_F32);
        P->q8_valid = true;
    }
    return true;
}

static void as4d(const vt *t, int64_t *ne, int64_t *st)
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

static bool fill_conv(fill_ctx *c, const rlx_lir_instr *ins)
{
    cu_program *P = c->P;
    vt x = vt_of(P, ins->in[0], c->sv), wt = vt_of(P, ins->in[1], c->sv),
       o = vt_of(P, ins->out, c->sv);
    bool is1d = x.rank == 3, tr = ins->op == RLX_OP_CONV_TRANSPOSE2D;
    int64_t xn[4], xs[4], wn[4], ws[4], on[4], os[4];
    as4d(&x, xn, xs);
    as4d(&wt, wn, ws);
    as4d(&o, on, os);
    const rlx_op_params *p = &ins->p;
    int32_t G = or1(p->conv.groups);
    if (xn[1] % G || on[1] % G)
        return fail(c, "channels are not a multiple of the groups");
    int64_t ntile = (on[2] * on[3] + CONV_LS - 1) / CONV_LS, noct = (on[1] + 7) / 8;
    int32_t *w = new_disp(c, CU_K_CONV, true, on[0] * noct * ntile);
    put_desc(c, w, 0, &x);
    put_desc(c, w, 1, &wt);
    put_desc(c, w, CU_OUT_SLOT, &o);
    int64_t vals[9] = {on[0], on[1], on[2], on[3], xn[1], xn[2], xn[3], wn[2], wn[3]};
    for (int i = 0; i < 9; i++)
        w[PRM(i)] = (int32_t)vals[i];
    w[PRM(9)] = is1d ? 1 : or1(p->conv.stride[0]);
    w[PRM(10)] = or1(p->conv.stride[is1d ? 0 : 1]);
    w[PRM(11)] = is1d ? 0 : p->conv.pad[0];
    w[PRM(12)] = p->conv.pad[is1d ? 0 : 1];
    w[PRM(13)] = is1d ? 1 : or1(p->conv.dilation[0]);
    w[PRM(14)] = or1(p->conv.dilation[is1d ? 0 : 1]);
    w[PRM(15)] = G;
    w[PRM(16)] = tr;
    w[PRM(19)] = (int32_t)p->conv.act;
    w[PRM(18)] = x.dt == RLX_DTYPE_F32 && wt.dt == RLX_DTYPE_F32;
    if (ins->n_in > 2) {
        vt b = vt_of(P, ins->in[2], c->sv);
        put_desc(c, w, 2, &b);
        w[PRM(17)] = 1;
    }
    for (int d = 0; d < 4; d++) {
        w[PRM(20 + d)] = (int32_t)xs[d];
        w[PRM(24 + d)] = (int32_t)ws[d];
        w[PRM(28 + d)] = (int32_t)os[d];
    }
    return true;
}

static bool fill_spatial(fill_ctx *c, const rlx_lir_instr *ins)
{
    cu_program *P = c->P;
    vt x = vt_of(P, ins->in[0], c->sv), o = vt_of(P, ins->out, c->sv);
    int32_t *w = new_disp(c, CU_K_SPATIAL, false, numel(&o));
    put_desc(c, w, 0, &x);
    put_desc(c, w, CU_OUT_SLOT, &o);
    if (ins->op == RLX_OP_RESIZE) {
        w[PRM(0)] = ins->p.resize.mode == RLX_RESIZE_BILINEAR;
        w[PRM(1)] = ins->p.resize.align_corners;
    } else {
        int32_t kh = or1(ins->p.pool.kernel[0]), kw = or1(ins->p.pool.kernel[1]);
        w[PRM(0)] = ins->p.pool.mode == RLX_POOL_MAX ? 2 : 3;
        w[PRM(2)] = kh;
        w[PRM(3)] = kw;
        w[PRM(4)] = ins->p.pool.stride[0] > 0 ? ins->p.pool.stride[0] : kh;
        w[PRM(5)] = ins->p.pool.stride[1] > 0 ? ins->p.pool.stride[1] : kw;
        w[PRM(6)] = ins->p.pool.pad[0];
        w[PRM(7)] = ins->p.pool.pad[1];
    }
    return true;
}

/* The append into a Q8_0 state in one launch: in place, a thread per
 * 32-value block of src quantizes it into the state; into another buffer
 * (the state's copy), a thread per block of the output copies the state's
 * block or quantizes src's. */
static bool fill_scatter_q8(fill_ctx *c, const rlx_lir_instr *ins)
{
    cu_program *P = c->P;
    vt o = vt_of(P, ins->out, c->sv), st = vt_of(P, ins->in[0], c->sv),
       src = vt_of(P, ins->in[1], c->sv);
    int r = o.rank, ax = norm_axis(ins->p.scatter.axis, r);
    int64_t off = dim_eval(ins->p.scatter.offset, c->sv), D = o.ne[r - 1];
    bool bad = src.rank != r || ax < 0 || ax >= r - 1 || off < 0 || off + src.ne[ax] > o.ne[ax] ||
               D % 32 || src.ne[r - 1] != D;
    bool copy = !ins->in_place && ins->in[0] != ins->out;
    if (copy) { /* the state read block by block at the output's places */
        bool same = st.rank == r;
        for (int d = 0; d < r && same; d++)
            same = st.ne[d] == o.ne[d] && st.st[d] == o.st[d];
        if (!same)
            bad = true;
    }
    int64_t blocks = bad ? 0 : (copy ? numel(&o) : numel(&src)) / 32;
    int32_t *w = new_disp(c, CU_K_Q8_APPEND, false, blocks);
    put_desc(c, w, 0, &src);
    if (copy)
        put_desc(c, w, 1, &st);
    put_desc(c, w, CU_OUT_SLOT, &o);
    w[PRM(0)] = (int32_t)(D > 0 ? D : 32);
    w[PRM(3)] = 1;
    w[PRM(4)] = (int32_t)src.st[r - 1];
    w[PRM(5)] = (int32_t)off;
    w[PRM(6)] = ax;
    w[PRM(7)] = copy;
    return bad ? fail(c, "the Q8_0 append is out of range for this run") : true;
}

static bool fill_gather(fill_ctx *c, const rlx_lir_instr *ins)
{
    cu_program *P = c->P;
    if (ins->op == RLX_OP_SCATTER)
        return fill_scatter_q8(c, ins);
    vt t = vt_of(P, ins->in[0], c->sv), ids = vt_of(P, ins->in[1], c->sv),
       o = vt_of(P, ins->out, c->sv);
    int rt = t.rank;
    int64_t V = t.ne[rt - 2], D = t.ne[rt - 1];
    vt T = t;
    T.rank = 2;
    T.ne[0] = V;
    T.ne[1] = D;
    T.st[0] = t.st[rt - 2];
    T.st[1] = t.st[rt - 1];
    int32_t *w = new_disp(c, CU_K_GATHER, false, numel(&ids) * D);
    put_desc(c, w, 0, &T);
    put_desc(c, w, 1, &ids);
    put_desc(c, w, CU_OUT_SLOT, &o);
    w[PRM(0)] = (int32_t)(D ? D : 1);
    w[PRM(2)] = (int32_t)V;
    if (rlx_dtype_get(t.dt)->quantized) {
        const rlx_dtype_info *ti = rlx_dtype_get(t.dt);
        w[PRM(1)] = (int32_t)(T.st[0] / ti->block_size * ti->type_size);
    }
    return true;
}

/* Fill the dispatches of instruction i for symbol values sv. */
static bool fill_instr(fill_ctx *c, int32_t i)
{
    const rlx_lir_instr *ins = &c->P->instrs[i];
    int k = c->P->kern[i];
    c->n = 0;
    c->at = i;
    if (k != CU_K_MM_WARP && k != CU_K_COUNT)
        c->P->q8_valid = false;
    switch (k) {
    case CU_K_COUNT:
        return true;
    case CU_K_EW:
        return fill_ew(c, ins);
    case CU_K_MM_WARP:
        return fill_matmul(c, ins);
    case CU_K_ROWOP:
        return fill_rowop(c, ins);
    case CU_K_ROPE:
        return fill_rope(c, ins);
    case CU_K_ATTN:
        return fill_attention(c, ins);
    case CU_K_CONV:
        return fill_conv(c, ins);
    case CU_K_SPATIAL:
        return fill_spatial(c, ins);
    case CU_K_GATHER:
        return fill_gather(c, ins);
    default:
        return fail(c, "unsupported");
    }
}

/* ---- launch shapes ---------------------------------------------------------- */

static uint32_t blocks_for(uint64_t items, uint32_t per)
{
    uint64_t g = (items + per - 1) / per;
    return (uint32_t)(g < GRID_CAP ? g : GRID_CAP);
}

/* Whether an elementwise launch may index every operand by the output's
 * flat index: dense row-major operands of the output's dims (no padding). */
static int32_t ew_flat(const int32_t *w)
{
    if (w[PRM(2)]) /* pad reads by coordinates */
        return 0;
    int nin = w[PRM(3)];
    const int32_t *o = w + DESC(CU_OUT_SLOT);
    for (int s = -1; s < nin; s++) {
        const int32_t *q = s < 0 ? o : w + DESC(s);
        if (q[1] != o[1])
            return 0;
        int64_t want = 1;
        for (int d = q[1] - 1; d >= 0; d--) {
            if (q[4 + d] != o[4 + d] || (q[4 + d] != 1 && q[10 + d] != want))
                return 0;
            want *= q[4 + d];
        }
    }
    return 1;
}

/* The grid and block of launch d, from its record (matmul tiles set their
 * grids while filling; none where another launch does its work). */
static void shape(cu_disp *d, const int32_t *w)
{
    if (w[REC_BY_OTHER]) {
        d->block = 128;
        d->grid[0] = 0;
        d->grid[1] = d->grid[2] = 1;
        return;
    }
    uint64_t items = (uint32_t)w[0];
    d->block = 256;
    switch (d->k) {
    case CU_K_MM_VEC: { /* a warp per output column (4 a block), for all (<= 8) rows */
        const int32_t *q = w + DESC(CU_OUT_SLOT);
        int64_t rows = q[1] >= 2 ? q[4 + q[1] - 2] : 1;
        uint64_t cols = rows > 0 ? items / (uint64_t)rows : 0;
        d->block = 128;
        d->grid[0] = (uint32_t)((cols + 3) / 4);
        d->grid[1] = d->grid[2] = 1;
        break;
    }
    case CU_K_MMV_Q4_K:
    case CU_K_MMV_Q6_K:
    case CU_K_MMV_Q8_0:
    case CU_K_MMV_Q4_0:
    case CU_K_MMV_Q5_K:
    case CU_K_MMV_GLU_Q4_K:
    case CU_K_MMV_GLU_Q6_K:
    case CU_K_MMV_GLU_Q8_0:
    case CU_K_MMV_GLU_Q4_0:
    case CU_K_MMV_GLU_Q5_K: { /* P(8) threads per output column, 128 a block */
        const int32_t *q = w + DESC(CU_OUT_SLOT);
        int64_t n = q[1] >= 1 ? q[4 + q[1] - 1] : 1;
        if (w[PRM(10)] && q[1] >= 2) /* [M, H, W] */
            n *= q[4 + q[1] - 2];
        int32_t tpc = w[PRM(8)] > 0 ? w[PRM(8)] : 128;
        d->block = 128;
        d->grid[0] = items ? (uint32_t)((n + 128 / tpc - 1) / (128 / tpc)) : 0;
        d->grid[1] = d->grid[2] = 1;
        break;
    }
    case CU_K_Q8_ACT: /* a warp per block of 32 */
        d->block = 128;
        d->grid[0] = (uint32_t)((items + 3) / 4);
        d->grid[1] = d->grid[2] = 1;
        break;
    case CU_K_MM_WARP:
        d->block = 128;
        d->grid[0] = (uint32_t)((items + 3) / 4);
        d->grid[1] = d->grid[2] = 1;
        break;
    case CU_K_MM_TILE:
        if (!items)
            d->grid[0] = 0;
        break;
    case CU_K_MM_TC:
    case CU_K_MM_TC64:
    case CU_K_MM_TQ:
    case CU_K_MM_TQ64:
        d->block = 256;
        if (!items)
            d->grid[0] = 0;
        break;
    case CU_K_ROWOP: /* a block a row, or P(7) threads a row (RMS norms) */
        d->grid[0] = w[PRM(7)] > 0 ? (uint32_t)((items + (uint64_t)(256 / w[PRM(7)]) - 1) /
                                                (uint64_t)(256 / w[PRM(7)]))
                                   : (uint32_t)items;
        d->grid[1] = d->grid[2] = 1;
        break;
    case CU_K_ATTN:
    case CU_K_ATTN_WIDE:
    case CU_K_ATTN_ROWS:
        d->block = 128;
        d->grid[0] = (uint32_t)items;
        d->grid[1] = w[9] > 1 ? (uint32_t)w[9] : 1;
        d->grid[2] = 1;
        break;
    case CU_K_CUBLAS: /* not a kernel: enqueue calls cuBLAS */
        d->block = 1;
        d->grid[0] = d->grid[1] = d->grid[2] = items ? 1 : 0;
        break;
    case CU_K_CONV:
        d->block = 128;
        d->grid[0] = (uint32_t)items;
        d->grid[1] = d->grid[2] = 1;
        break;
    default: /* grid-stride loops */
        d->grid[0] = blocks_for(items, 256);
        d->grid[1] = d->grid[2] = 1;
        break;
    }
}

/* ---- programs ------------------------------------------------------------------ */

void cu_program_free(rlx_program *prog)
{
    cu_program *P = (cu_program *)prog;
    if (!P)
        return;
    const cu_api *cu = cu_driver(NULL);
    if (cu) {
        cu->cuCtxSetCurrent(P->dev->ctx);
        cu->cuStreamSynchronize(P->dev->stream);
        if (P->exec)
            cu->cuGraphExecDestroy(P->exec);
        if (P->ev)
            for (int32_t i = 0; i < 2 * P->n_instrs; i++)
                if (P->ev[i])
                    cu->cuEventDestroy(P->ev[i]);
        if (P->meta)
            cu->cuMemFree(P->meta);
        if (P->cbuf)
            cu->cuMemFree(P->cbuf);
        if (P->attn_count)
            cu->cuMemFree(P->attn_count);
        if (P->mm_scratch)
            cu->cuMemFree(P->mm_scratch);
        if (P->tq_scratch)
            cu->cuMemFree(P->tq_scratch);
        if (P->sk_scratch)
            cu->cuMemFree(P->sk_scratch);
        if (P->tail_count)
            cu->cuMemFree(P->tail_count);
        if (P->glu_count)
            cu->cuMemFree(P->glu_count);
        if (P->head_count)
            cu->cuMemFree(P->head_count);
        if (P->q8_scratch)
            cu->cuMemFree(P->q8_scratch);
        for (int e = 0; e < 2; e++)
            if (P->run_ev[e])
                cu->cuEventDestroy(P->run_ev[e]);
        if (P->host)
            cu->cuMemFreeHost(P->host);
    }
    free(P->ev);
    free(P->values);
    free(P->instrs);
    free(P->disp);
    free(P->first);
    free(P->kern);
    free(P->fixed);
    free(P->syms);
    free(P->q8_in);
    free(P->q8_out);
    free(P->append_of);
    free(P->absorbed);
    free(P->tail_from);
    free(P->tail_on);
    free(P->glu);
    free(P->head_rope);
    free(P->head_norm);
    free(P->head_prod);
    free(P->head_cnt);
    free(P->head_on);
    free(P->feeds_q8);
    free(P->last_addr);
    free(P->addr);
    free(P->sig);
    free(P->last_sig);
    free(P->ms);
    free(P->scratch_rec);
    free(P->scratch_disp);
    free(P);
}

/* n zeroed 32-bit counters in device memory, or 0 */
static CUdeviceptr zeroed_counters(cu_device *d, int64_t n)
{
    const cu_api *cu = cu_driver(NULL);
    CUdeviceptr buf = 0;
    if (cu->cuMemAlloc(&buf, (size_t)n * 4) != CUDA_SUCCESS)
        return 0;
    if (cu->cuMemsetD8Async(buf, 0, (size_t)n * 4, d->stream) == CUDA_SUCCESS &&
        cu->cuStreamSynchronize(d->stream) == CUDA_SUCCESS)
        return buf;
    cu->cuMemFree(buf);
    return 0;
}

static rlx_status validate(const rlx_lir *lir, rlx_error **err)
{
    if (lir->n_values < 0 || lir->n_instrs < 0 || (lir->n_values && !lir->values) ||
        (lir->n_instrs && !lir->instrs) || lir->n_symbols < 0 || lir->n_symbols > RLX_MAX_SYMBOLS ||
        (lir->const_bytes && !lir->const_data))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR");
    int32_t nb[4] = {lir->n_params, lir->n_states, lir->n_inputs, lir->n_outputs};
    for (int32_t v = 0; v < lir->n_values; v++) {
        const rlx_lir_value *val = &lir->values[v];
        if (val->shape.rank < 0 || val->shape.rank > RLX_MAX_DIMS || (int)val->home < 0 ||
            val->home > RLX_HOME_CONST)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: value %d", v);
        if (val->home >= RLX_HOME_PARAM && val->home <= RLX_HOME_OUTPUT &&
            (val->index < 0 || val->index >= nb[val->home - RLX_HOME_PARAM]))
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: value %d is %s %d", v,
                                 home_names[val->home], val->index);
        for (int d = 0; d < val->shape.rank; d++)
            for (int t = 0; t < RLX_DIM_TERMS; t++)
                if ((val->shape.d[d].sym[t] >= lir->n_symbols) ||
                    (val->stride[d].sym[t] >= lir->n_symbols))
                    return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                         "invalid LIR: value %d uses an unknown symbol", v);
    }
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if ((int)ins->op < 0 || ins->op >= RLX_OP_COUNT || ins->n_in < 0 ||
            ins->n_in > RLX_MAX_INPUTS || ins->out < 0 || ins->out >= lir->n_values)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: instruction %d", i);
        for (int k = 0; k < ins->n_in; k++)
            if (ins->in[k] < 0 || ins->in[k] >= lir->n_values)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG, "invalid LIR: instruction %d", i);
    }
    return RLX_OK;
}

rlx_status cu_program_create(rlx_device *dev, const rlx_lir *lir, rlx_program **out,
                             rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!dev || !lir || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_create: missing argument");
    cu_device *d = (cu_device *)dev;
    rlx_status s = cu_enter(d, err);
    if (s != RLX_OK)
        return s;
    s = validate(lir, err);
    if (s != RLX_OK)
        return s;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        char why[160];
        if (cu_check(lir, &lir->instrs[i], why, sizeof why) < 0)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "the CUDA backend cannot run instruction %d (%s, graph node "
                                 "%d): %s",
                                 i, rlx_op_name(lir->instrs[i].op), lir->instrs[i].node, why);
    }
    const cu_api *cu = cu_driver(NULL);
    cu_program *P = calloc(1, sizeof *P);
    if (!P)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    P->base.iface = &rlx_cuda_backend;
    P->dev = d;
    P->n_values = lir->n_values;
    P->n_instrs = lir->n_instrs;
    P->n_symbols = lir->n_symbols;
    P->n_bind[0] = lir->n_params;
    P->n_bind[1] = lir->n_states;
    P->n_bind[2] = lir->n_inputs;
    P->n_bind[3] = lir->n_outputs;
    P->arena_bytes = lir->arena_bytes;
    for (int i = 0; i < lir->n_symbols; i++) {
        P->sym_max[i] = lir->symbols[i].max;
        snprintf(P->sym_name[i], sizeof P->sym_name[i], "%s",
                 lir->symbols[i].name ? lir->symbols[i].name : "?");
    }
    size_t nv = (size_t)(lir->n_values ? lir->n_values : 1);
    size_t ni = (size_t)(lir->n_instrs ? lir->n_instrs : 1);
    char why[160] = "";
    P->values = malloc(nv * sizeof *P->values);
    P->instrs = malloc(ni * sizeof *P->instrs);
    P->first = calloc(ni + 1, sizeof *P->first);
    P->kern = calloc(ni, sizeof *P->kern);
    P->addr = calloc(nv, sizeof *P->addr);
    P->ms = calloc(ni, sizeof *P->ms);
    P->scratch_rec = malloc((size_t)MAX_DISP * REC_WORDS * sizeof(int32_t));
    P->scratch_disp = calloc(MAX_DISP, sizeof *P->scratch_disp);
    P->disp = calloc(ni * MAX_DISP, sizeof *P->disp);
    if (!P->values || !P->instrs || !P->first || !P->kern || !P->addr || !P->ms ||
        !P->scratch_rec || !P->scratch_disp || !P->disp) {
        cu_program_free(&P->base);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    }
    if (lir->n_values)
        memcpy(P->values, lir->values, (size_t)lir->n_values * sizeof *P->values);
    if (lir->n_instrs)
        memcpy(P->instrs, lir->instrs, (size_t)lir->n_instrs * sizeof *P->instrs);
    for (int32_t i = 0; i < P->n_instrs; i++)
        P->kern[i] = (int8_t)cu_check(lir, &lir->instrs[i], why, sizeof why);
    P->fixed = calloc(ni, sizeof *P->fixed);
    P->q8_in = calloc(ni, sizeof *P->q8_in);
    P->syms = calloc(ni, sizeof *P->syms);
    P->q8_out = calloc(ni, sizeof *P->q8_out);
    P->last_addr = calloc(nv, sizeof *P->last_addr);
    P->append_of = calloc(ni, sizeof *P->append_of);
    P->absorbed = calloc(ni, sizeof *P->absorbed);
    P->tail_from = calloc(ni, sizeof *P->tail_from);
    P->tail_on = calloc(ni, sizeof *P->tail_on);
    P->glu = calloc(ni, sizeof *P->glu);
    P->head_rope = calloc(ni, sizeof *P->head_rope);
    P->head_norm = calloc(ni, sizeof *P->head_norm);
    P->head_prod = calloc(ni, sizeof *P->head_prod);
    P->head_cnt = calloc(ni, sizeof *P->head_cnt);
    P->head_on = calloc(ni, sizeof *P->head_on);
    P->feeds_q8 = calloc(ni, sizeof *P->feeds_q8);
    if (!P->fixed || !P->syms || !P->q8_in || !P->q8_out || !P->last_addr || !P->append_of ||
        !P->absorbed || !P->tail_from || !P->tail_on || !P->glu || !P->head_rope || !P->head_norm ||
        !P->head_prod || !P->head_cnt || !P->head_on || !P->feeds_q8) {
        cu_program_free(&P->base);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    }
    for (int32_t i = 0; i < P->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        rlx_op op = ins->op;
        /* ops whose records follow from their operands' shapes, strides and
         * addresses alone (a scatter's or slice's offset, an attention's
         * key count may move with the symbols) */
        bool ok = op == RLX_OP_MATMUL || op == RLX_OP_RMS_NORM || op == RLX_OP_ADD_RMS_NORM ||
                  op == RLX_OP_LAYER_NORM || op == RLX_OP_ROPE || op == RLX_OP_COPY ||
                  op == RLX_OP_CAST || op == RLX_OP_RESHAPE || op == RLX_OP_PERMUTE ||
                  op == RLX_OP_FUSED_ELEMENTWISE ||
                  (is_elementwise(op) && op != RLX_OP_SCATTER && op != RLX_OP_SLICE &&
                   op != RLX_OP_CONCAT && op != RLX_OP_PAD);
        uint8_t m = 0;
        for (int k = -1; k < ins->n_in; k++) {
            const rlx_lir_value *v = &lir->values[k < 0 ? ins->out : ins->in[k]];
            for (int dd = 0; dd < v->shape.rank; dd++)
                for (int t = 0; t < RLX_DIM_TERMS; t++) {
                    if (v->shape.d[dd].sym[t] >= 0 && v->shape.d[dd].mul[t])
                        m |= (uint8_t)(1u << v->shape.d[dd].sym[t]);
                    if (v->stride[dd].sym[t] >= 0 && v->stride[dd].mul[t])
                        m |= (uint8_t)(1u << v->stride[dd].sym[t]);
                }
        }
        P->fixed[i] = ok;
        P->syms[i] = m;
    }
    /* the block counters of the fusions below, zeroed once (the last
     * block sets its counter back); without one, those launch as before */
    if (!find_q8_readers(P)) {
        cu_program_free(&P->base);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    }
    find_appends(P);
    if (find_tails(P))
        P->tail_count = zeroed_counters(d, ni); /* a product's, each */
    int64_t groups = find_glus(P, lir);
    if (groups > 0 && (P->glu_count = zeroed_counters(d, groups)))
        P->glu_groups = groups; /* a block of 32 gated columns' */
    int64_t heads = find_heads(P);
    if (heads > 0)
        P->head_count = zeroed_counters(d, heads); /* a head's */

    /* attention's split scratch, sized for the largest value head dim */
    int64_t dv_max = 0;
    for (int32_t i = 0; i < P->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if (ins->op != RLX_OP_ATTENTION || P->kern[i] != CU_K_ATTN)
            continue;
        const rlx_lir_value *v = &lir->values[ins->in[2]];
        int64_t bnd[RLX_MAX_SYMBOLS] = {0};
        for (int k = 0; k < lir->n_symbols; k++)
            bnd[k] = lir->symbols[k].max;
        int64_t dv = rlx_dim_upper(v->shape.d[v->shape.rank - 1], bnd);
        if (dv > dv_max)
            dv_max = dv;
    }
    if (dv_max > 0) {
        /* the rows' counters (zeroed once; the last block of a row sets
         * its counter back to 0), then the partial results */
        uint64_t cnt = ((uint64_t)ATTN_SPLIT_ROWS(d) * 4 + 255) / 256 * 256;
        uint64_t bytes = (uint64_t)ATTN_SPLIT_ROWS(d) * ATTN_MAX_SPLIT * (uint64_t)(dv_max + 2) * 4;
        if (bytes > (64ull << 20))
            bytes = 64ull << 20;
        CUdeviceptr buf = 0;
        if (cu->cuMemAlloc(&buf, (size_t)(cnt + bytes)) == CUDA_SUCCESS) {
            if (cu->cuMemsetD8Async(buf, 0, (size_t)cnt, d->stream) == CUDA_SUCCESS &&
                cu->cuStreamSynchronize(d->stream) == CUDA_SUCCESS) {
                P->attn_count = buf;
                P->attn_scratch = buf + cnt;
                P->attn_scratch_bytes = bytes;
            } else
                cu->cuMemFree(buf);
        }
        /* else no split: slower decoding, same results */
    }

    /* cuBLAS for the F16/F32 matmuls, and the scratch an f32 `a` is split
     * into for f16 weights (the largest such `a`, two f16 copies) */
    {
        int64_t bnd[RLX_MAX_SYMBOLS] = {0};
        for (int k = 0; k < lir->n_symbols; k++)
            bnd[k] = lir->symbols[k].max;
        bool any = false;
        uint64_t xb = 0;
        P->blas = true; /* for blas_kind; settled below */
        for (int32_t i = 0; i < P->n_instrs; i++) {
            const rlx_lir_instr *ins = &lir->instrs[i];
            int kind = P->kern[i] == CU_K_MM_WARP ? blas_kind(P, ins) : 0;
            if (!kind)
                continue;
            any = true;
            if (kind == 2) {
                const rlx_lir_value *a = &lir->values[ins->in[0]];
                uint64_t n = 4; /* hi and lo, f16 each */
                for (int k = 0; k < a->shape.rank; k++)
                    n *= (uint64_t)rlx_dim_upper(a->shape.d[k], bnd);
                if (n > xb)
                    xb = n;
            }
        }
        P->blas = any && cu_blas_ready(d);
        if (P->blas && xb > 0) {
            if (xb > (256ull << 20))
                xb = 256ull << 20; /* larger activations run our kernels */
            if (cu->cuMemAlloc(&P->mm_scratch, (size_t)xb) == CUDA_SUCCESS)
                P->mm_scratch_bytes = xb;
            else
                P->mm_scratch = 0;
        }
    }

    /* the 8-bit activation rows of the integer matrix-vector kernels, for
     * the widest K of a quantized matmul; rlx_mm_tq's f16 copy of the
     * largest `a` of one (up to 256 MiB: larger ones are converted as
     * rlx_mm_tc stages them) */
    {
        int64_t bnd[RLX_MAX_SYMBOLS] = {0};
        for (int k = 0; k < lir->n_symbols; k++)
            bnd[k] = lir->symbols[k].max;
        int64_t kmax = 0;
        uint64_t tqb = 0, skb = 0;
        for (int32_t i = 0; i < P->n_instrs; i++) {
            const rlx_lir_instr *ins = &lir->instrs[i];
            if (ins->op != RLX_OP_MATMUL ||
                !rlx_dtype_get(lir->values[ins->in[1]].dtype)->quantized)
                continue;
            const rlx_lir_value *a = &lir->values[ins->in[0]];
            int ax = a->shape.rank - (ins->p.matmul.trans_a ? 2 : 1);
            int64_t k = ax >= 0 ? rlx_dim_upper(a->shape.d[ax], bnd) : 0;
            if (k > kmax)
                kmax = k;
            uint64_t n = 2;
            for (int x = 0; x < a->shape.rank; x++)
                n *= (uint64_t)rlx_dim_upper(a->shape.d[x], bnd);
            if (n > tqb)
                tqb = n;
            const rlx_lir_value *o = &lir->values[ins->out];
            if (o->shape.rank >= 2) {
                uint64_t m = (uint64_t)rlx_dim_upper(o->shape.d[o->shape.rank - 2], bnd),
                         nn = (uint64_t)rlx_dim_upper(o->shape.d[o->shape.rank - 1], bnd);
                uint64_t pad = (m + 127) / 128 * 128 * ((nn + 127) / 128 * 128) * 4 * 4;
                if (pad > skb)
                    skb = pad;
            }
        }
        if (tqb > (256ull << 20))
            tqb = 256ull << 20;
        if (d->cc_major >= 7 && !d->force_f32 && tqb > 0 &&
            cu->cuMemAlloc(&P->tq_scratch, (size_t)tqb) == CUDA_SUCCESS)
            P->tq_scratch_bytes = tqb;
        else
            P->tq_scratch = 0;
        /* split K's sums: up to 4 parts of the largest padded output, at
         * most 16 MiB (else fewer parts); the tile counters zeroed once */
        if (skb > (16ull << 20))
            skb = 16ull << 20;
        CUdeviceptr sk = 0;
        if (P->tq_scratch && skb > 0 &&
            cu->cuMemAlloc(&sk, (size_t)(SK_COUNT_BYTES + skb)) == CUDA_SUCCESS) {
            if (cu->cuMemsetD8Async(sk, 0, SK_COUNT_BYTES, d->stream) == CUDA_SUCCESS &&
                cu->cuStreamSynchronize(d->stream) == CUDA_SUCCESS) {
                P->sk_scratch = sk;
                P->sk_bytes = skb;
            } else
                cu->cuMemFree(sk);
        }
        if (kmax > 0 && kmax <= (1 << 24)) {
            uint64_t bytes = (uint64_t)kmax * 8 + (uint64_t)kmax / 32 * 8 * 8;
            bytes = (bytes + 255) / 256 * 256;
            if (cu->cuMemAlloc(&P->q8_scratch, (size_t)(2 * bytes)) == CUDA_SUCCESS) {
                P->q8_k_max = kmax;
                P->q8_half = bytes;
            } else {
                P->q8_scratch = 0; /* the f32 matrix-vector kernels then */
            }
        }
    }

    /* the launches each instruction becomes (their count does not depend on
     * the symbols; their kernels and grids may) */
    int64_t bounds[RLX_MAX_SYMBOLS] = {0};
    for (int i = 0; i < lir->n_symbols; i++)
        bounds[i] = lir->symbols[i].max;
    free(P->addr);
    P->addr = NULL; /* nothing is bound yet: descriptors get address 0 */
    for (int32_t i = 0; i < P->n_instrs; i++) {
        fill_ctx c = {.P = P,
                      .sv = bounds,
                      .d = P->disp + P->n_disp,
                      .rec = P->scratch_rec,
                      .why = why,
                      .why_cap = sizeof why};
        P->first[i] = P->n_disp;
        (void)fill_instr(&c, i); /* shapes that fail only at some symbol values fail per run */
        for (int j = 0; j < c.n; j++)
            c.d[j].instr = i;
        P->n_disp += c.n;
    }
    P->first[P->n_instrs] = P->n_disp;
    P->addr = calloc(nv, sizeof *P->addr);
    size_t nd = (size_t)(P->n_disp ? P->n_disp : 1);
    P->sig = calloc(nd * 4, sizeof *P->sig);
    P->last_sig = calloc(nd * 4, sizeof *P->last_sig);
    P->ev = calloc(ni * 2, sizeof *P->ev);
    if (!P->addr || !P->sig || !P->last_sig || !P->ev) {
        cu_program_free(&P->base);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    }
    P->meta_bytes = (uint64_t)nd * REC_WORDS * 4 + 16;
    CUresult r = cu->cuMemAlloc(&P->meta, (size_t)P->meta_bytes);
    if (r == CUDA_SUCCESS)
        r = cu->cuMemAllocHost((void **)&P->host, (size_t)P->meta_bytes);
    if (r == CUDA_SUCCESS) {
        memset(P->host, 0, (size_t)P->meta_bytes);
        if (lir->const_bytes) {
            r = cu->cuMemAlloc(&P->cbuf, (size_t)lir->const_bytes);
            P->const_bytes = lir->const_bytes;
            if (r == CUDA_SUCCESS)
                r = cu->cuMemcpyHtoDAsync(P->cbuf, lir->const_data, (size_t)lir->const_bytes,
                                          d->stream);
            if (r == CUDA_SUCCESS)
                r = cu->cuStreamSynchronize(d->stream);
        }
    }
    if (r != CUDA_SUCCESS) {
        s = cu_fail(r, "creating a CUDA program", err);
        cu_program_free(&P->base);
        return s;
    }
    *out = &P->base;
    return RLX_OK;
}

/* Where each value lives for these bindings; lo/hi bound what its launches
 * may touch. */
typedef struct vspan {
    CUdeviceptr lo, hi;
} vspan;

static rlx_status locate(cu_program *P, const rlx_program_bindings *b, vspan *span, rlx_error **err)
{
    const rlx_buffer_ref *refs[4] = {b->params, b->states, b->inputs, b->outputs};
    for (int32_t v = 0; v < P->n_values; v++) {
        const rlx_lir_value *val = &P->values[v];
        const rlx_buffer *buf = NULL;
        uint64_t off = 0;
        switch (val->home) {
        case RLX_HOME_ARENA:
            if (P->arena_bytes == 0) {
                P->addr[v] = 0;
                span[v] = (vspan){0, 0};
                continue;
            }
            if (!b->arena.buf || b->arena.buf->iface != &rlx_cuda_backend ||
                b->arena.offset > b->arena.buf->size)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no CUDA arena buffer bound");
            buf = b->arena.buf;
            off = b->arena.offset;
            break;
        case RLX_HOME_CONST:
            P->addr[v] = P->cbuf ? P->cbuf + val->offset : 0;
            span[v] = (vspan){P->cbuf, P->cbuf + P->const_bytes};
            continue;
        default: {
            int h = val->home - RLX_HOME_PARAM;
            const rlx_buffer_ref *rf = refs[h] ? &refs[h][val->index] : NULL;
            if (!rf || !rf->buf)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no buffer bound for %s %d",
                                     home_names[val->home], val->index);
            if (rf->buf->iface != &rlx_cuda_backend)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "the buffer bound for %s %d is not a CUDA buffer",
                                     home_names[val->home], val->index);
            if (rf->offset > rf->buf->size)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "the offset bound for %s %d is past its buffer",
                                     home_names[val->home], val->index);
            buf = rf->buf;
            off = rf->offset;
        }
        }
        const cu_buffer *cb = (const cu_buffer *)buf;
        P->addr[v] = cb->ptr + off + val->offset;
        span[v] = (vspan){cb->ptr, cb->ptr + cb->alloc};
    }
    return RLX_OK;
}

/* Bytes an operand descriptor reaches past its element 0 (0 when empty). */
static uint64_t reach(const int32_t *q)
{
    rlx_dtype dt = (rlx_dtype)q[0];
    int rank = q[1];
    int64_t last = 0;
    for (int d = 0; d < rank; d++) {
        if (q[4 + d] == 0)
            return 0;
        if (q[10 + d] < 0)
            return UINT64_MAX;
        last += (int64_t)(q[4 + d] - 1) * q[10 + d];
    }
    const rlx_dtype_info *ti = rlx_dtype_get(dt);
    if (ti->quantized)
        return (uint64_t)(last + 1 + ti->block_size - 1) / ti->block_size * ti->type_size;
    return (uint64_t)(last + 1) * (uint64_t)esize(dt);
}

/* The kernels whose launches group_launches may merge (they return where
 * kernels/common.cuh's ld_rec says and stride by grid_x). */
static bool groupable(const cu_disp *D, const int32_t *w)
{
    switch (D->k) {
    case CU_K_MMV_Q4_K:
    case CU_K_MMV_Q6_K:
    case CU_K_MMV_Q8_0:
    case CU_K_MMV_Q4_0:
    case CU_K_MMV_Q5_K:
        if (w[PRM(100)] | w[PRM(101)]) /* its last block runs a norm (all its blocks count) */
            return false;
        break;
    case CU_K_MM_VEC:
    case CU_K_ROPE:
        break;
    case CU_K_ROWOP: /* the float4 RMS norms that write their output alone
                      * (a Qwen3 step's per-head q and k norms) */
        if (!w[PRM(7)] || w[PRM(8)] || w[PRM(5)])
            return false;
        break;
    case CU_K_EW: /* (at most one of a group also writes 8-bit rows into the
                   * scratch: group_launches) */
        break;
    default:
        return false;
    }
    return D->grid[0] && D->grid[1] == 1 && D->grid[2] == 1;
}

/* The bytes launch j reads or writes through operand slot s: [lo, hi);
 * lo == hi when it touches none there. */
static void slot_span(const cu_program *P, int32_t j, int s, uint64_t *lo, uint64_t *hi)
{
    const int32_t *q = P->host + (size_t)j * REC_WORDS + DESC(s);
    uint64_t a = (uint64_t)(uint32_t)q[2] | (uint64_t)(uint32_t)q[3] << 32;
    uint64_t need = a ? reach(q) : 0;
    *lo = a;
    *hi = !a || !need ? a : need == UINT64_MAX ? UINT64_MAX : a + need;
}

/* Whether launch b writes nothing launch a touches (and the reverse): the
 * two may then run as one. Writes are the output slot (groupable's
 * kernels write nothing else). */
static bool disjoint(const cu_program *P, int32_t a, int32_t b)
{
    for (int pass = 0; pass < 2; pass++) {
        int32_t x = pass ? b : a, y = pass ? a : b;
        uint64_t wlo, whi;
        slot_span(P, x, CU_OUT_SLOT, &wlo, &whi);
        if (wlo == whi)
            continue;
        for (int s = 0; s <= CU_OUT_SLOT; s++) {
            uint64_t lo, hi;
            slot_span(P, y, s, &lo, &hi);
            if (lo < hi && lo < whi && wlo < hi)
                return false;
        }
    }
    return true;
}

#define GROUP_MAX 4

/* Whether the rows of q8 key `key` stay rounded across instruction i's
 * launches: elementwise ones that round nothing and write none of those
 * rows (the last layer's slice of its residual, between the slice of its
 * attention output that rounds and the output projection). */
static bool q8_kept(const cu_program *P, int32_t i, const uint64_t key[Q8_KEY])
{
    if (P->kern[i] != CU_K_EW)
        return false;
    uint64_t es = (uint64_t)esize((rlx_dtype)key[5]);
    uint64_t lo = key[0], hi = key[2] == 0
                                   ? lo + key[1] * es
                                   : lo + ((key[1] - 1) * key[3] + (key[2] - 1) * key[4] + 1) * es;
    for (int32_t j = P->first[i]; j < P->first[i + 1]; j++) {
        const int32_t *w = P->host + (size_t)j * REC_WORDS;
        uint64_t wlo, whi;
        if (P->disp[j].k != CU_K_EW || w[PRM(6)])
            return false;
        slot_span(P, j, CU_OUT_SLOT, &wlo, &whi);
        if (wlo < whi && wlo < hi && lo < whi)
            return false;
    }
    return true;
}

/* Launch j of an integer matrix-vector kernel in its streamed form
 * (kernels/matmul.cu's mmvs_body) where its column tiles are more than
 * the SMs hold blocks at once: the grid becomes what they hold, each block
 * striding over the tiles, with its stages in the record (P(118): 2 to 4
 * tiles in flight, P(119) bytes of one weight's rows in a stage). Not for
 * launch groups (the kernel strides by gridDim) nor for a product whose
 * blocks norm and rope its heads (their last block changes its record). */
static void stream_product(cu_program *P, int32_t j)
{
    cu_disp *D = &P->disp[j];
    bool glu = is_glu(D->k);
    if (!is_mmv(D->k) && !glu)
        return;
    int32_t *w = P->host + (size_t)j * REC_WORDS;
    w[PRM(118)] = w[PRM(119)] = 0;
    if (D->lk != D->k || !live(D->lgrid) || D->lgrid[1] != 1 || D->lgrid[2] != 1 ||
        w[1] /* GRP_STRIDE: a group */ || (w[PRM(108)] | w[PRM(109)]) || P->dev->mmv_plain ||
        P->dev->cc_major < 8 || P->dev->mmvs_blocks < 1)
        return;
    int64_t hold = (int64_t)P->dev->n_sm * P->dev->mmvs_blocks;
    if ((int64_t)D->lgrid[0] <= hold || w[PRM(8)] <= 0)
        return;
    int64_t cpb = 128 / w[PRM(8)], rb = w[PRM(5)];
    /* a stage holds the 16-byte words around cpb rows: at most 16 more */
    int64_t sb = (cpb * rb + 15) / 16 * 16 + 16;
    int64_t ns = CU_MMVS_BYTES / ((glu ? 2 : 1) * sb);
    if (ns < 2)
        return;
    w[PRM(118)] = (int32_t)(ns > 4 ? 4 : ns);
    w[PRM(119)] = (int32_t)sb;
    /* the groups' kernels in the same order (cuda-internal.h) */
    _Static_assert(CU_K_MMVS_GLU_Q4_K - CU_K_MMVS_Q4_K == CU_K_MMV_GLU_Q4_K - CU_K_MMV_Q4_K &&
                       CU_K_MMVS_GLU_Q5_K - CU_K_MMVS_GLU_Q4_K ==
                           CU_K_MMV_GLU_Q5_K - CU_K_MMV_GLU_Q4_K,
                   "the streamed kernels' groups follow the plain ones' order");
    D->lk = glu ? (cu_kernel)(D->k - CU_K_MMV_GLU_Q4_K + CU_K_MMVS_GLU_Q4_K)
                : (cu_kernel)(D->k - CU_K_MMV_Q4_K + CU_K_MMVS_Q4_K);
    D->lgrid[0] = (uint32_t)hold;
}

/* This run's launch grids. Launches of one groupable kernel that follow
 * each other (nothing but empty launches between them, at a fixed
 * distance) and touch disjoint memory become one launch: member m at
 * blockIdx.y = m reads the record GRP_STRIDE words past the leader's (q, k
 * and v of a decode step, its two ropes, the two KV appends, the gate and
 * up products, a Qwen3's q and k norms; kernels/common.cuh). Timed runs launch each alone, so that
 * each instruction's time is its own. */
static void group_launches(cu_program *P)
{
    P->launches = 0;
    for (int32_t j = 0; j < P->n_disp; j++) {
        cu_disp *D = &P->disp[j];
        memcpy(D->lgrid, D->grid, sizeof D->lgrid);
        D->lk = D->k;
        int32_t *w = P->host + (size_t)j * REC_WORDS;
        w[1] = w[2] = 0; /* kernels/common.cuh's GRP_STRIDE, GRP_GRIDX */
    }
    for (int32_t j = 0; j < P->n_disp; j++) {
        cu_disp *D = &P->disp[j];
        int32_t *w = P->host + (size_t)j * REC_WORDS;
        if (!live(D->lgrid))
            continue;
        P->launches++;
        if (P->timing || P->dev->unfused || !groupable(D, w))
            continue;
        int32_t members[GROUP_MAX] = {j}, n = 1, stride = 0;
        int rounds = D->k == CU_K_EW && w[PRM(6)]; /* members writing the 8-bit scratch */
        for (int32_t k = j + 1; k < P->n_disp && n < GROUP_MAX; k++) {
            const cu_disp *E = &P->disp[k];
            const int32_t *wk = P->host + (size_t)k * REC_WORDS;
            if (!live(E->grid))
                continue;
            if (!one_kernel(E->k, D->k) || E->block != D->block || !groupable(E, wk) ||
                (stride && k - members[n - 1] != stride) ||
                (E->k == CU_K_EW && wk[PRM(6)] && rounds++))
                break;
            /* nothing from a product's rope on joins the launch that ropes
             * its heads (heads_apart checked only what comes before) */
            bool late = false;
            for (int32_t m = 0; m < n; m++) {
                int32_t pi = P->disp[members[m]].instr;
                late = late || (P->head_on[pi] && E->instr >= P->head_rope[pi]);
            }
            if (late)
                break;
            bool ok = true;
            for (int32_t i = 0; i < n && ok; i++)
                ok = disjoint(P, members[i], k);
            if (!ok)
                break;
            stride = k - members[n - 1];
            members[n++] = k;
        }
        if (n < 2)
            continue;
        uint32_t gx = 0;
        for (int32_t i = 0; i < n; i++) {
            cu_disp *E = &P->disp[members[i]];
            if (E->k != D->k)
                D->lk = CU_K_MMV_MIXED; /* each member runs its type's body */
            if (E->grid[0] > gx)
                gx = E->grid[0];
            P->host[(size_t)members[i] * REC_WORDS + 2] = (int32_t)E->grid[0];
            if (i)
                E->lgrid[0] = 0;
        }
        w[1] = stride * REC_WORDS;
        D->lgrid[0] = gx;
        D->lgrid[1] = (uint32_t)n;
        j = members[n - 1];
    }
    for (int32_t j = 0; j < P->n_disp; j++)
        stream_product(P, j);
    for (int32_t j = 0; j < P->n_disp; j++) {
        uint32_t *g = P->sig + (size_t)j * 4;
        g[0] = (uint32_t)P->disp[j].lk;
        memcpy(g + 1, P->disp[j].lgrid, 3 * sizeof *g);
    }
}

static rlx_status launch_fail(cu_program *P, CUresult r, const char *what, rlx_error **err)
{
    cu_mark_lost(P->dev);
    rlx_status s = cu_fail(r, what, err);
    rlx_error_prefix(
        err, "a kernel failed on the CUDA device %s, which must be reopened: ", P->dev->name);
    return s;
}

/* the cuBLAS GEMM of a record (fill_matmul's words) */
static CUresult blas_launch(cu_program *P, const int32_t *w)
{
    const int32_t *qw = w + DESC(1), *qx = w + DESC(0), *qc = w + DESC(CU_OUT_SLOT);
    cu_gemm g = {
        .w_trans = w[PRM(40)] != 0,
        .m = w[PRM(41)],
        .n = w[PRM(42)],
        .k = w[PRM(43)],
        .ldw = w[PRM(44)],
        .ldx = w[PRM(45)],
        .ldc = w[PRM(46)],
        .w = (uint64_t)(uint32_t)qw[2] | (uint64_t)(uint32_t)qw[3] << 32,
        .x = (uint64_t)(uint32_t)qx[2] | (uint64_t)(uint32_t)qx[3] << 32,
        .c = (uint64_t)(uint32_t)qc[2] | (uint64_t)(uint32_t)qc[3] << 32,
        .w_dt = w[PRM(47)],
        .x_dt = w[PRM(48)],
        .c_dt = w[PRM(49)],
    };
    int32_t ab = w[PRM(50)];
    memcpy(&g.alpha, &ab, 4);
    CUresult r = cu_blas_gemm(P->dev, &g);
    if (r == CUDA_SUCCESS && w[PRM(51)]) { /* + W.lo */
        const int32_t *ql = w + DESC(2);
        g.x = (uint64_t)(uint32_t)ql[2] | (uint64_t)(uint32_t)ql[3] << 32;
        g.beta = 1.0f;
        r = cu_blas_gemm(P->dev, &g);
    }
    return r;
}

/* Queue the run: records in, launches, the failure word out. Between
 * instructions a set cancel flag stops the queueing (direct runs only). */
static CUresult enqueue(cu_program *P, bool timing, volatile const int *cancel, bool *cancelled)
{
    const cu_api *cu = cu_driver(NULL);
    CUstream st = P->dev->stream;
    uint64_t flag_off = P->meta_bytes - 16;
    CUresult r = cu->cuMemcpyHtoDAsync(P->meta, P->host, (size_t)P->meta_bytes, st);
    for (int32_t i = 0; i < P->n_instrs && r == CUDA_SUCCESS; i++) {
        if (cancel && (i & 31) == 0 && __atomic_load_n(cancel, __ATOMIC_RELAXED)) {
            *cancelled = true;
            break;
        }
        if (timing)
            r = cu->cuEventRecord(P->ev[2 * i], st);
        for (int32_t j = P->first[i]; j < P->first[i + 1] && r == CUDA_SUCCESS; j++) {
            cu_disp *D = &P->disp[j];
            if (!live(D->lgrid))
                continue;
            if (D->k == CU_K_CUBLAS) {
                r = blas_launch(P, P->host + (size_t)j * REC_WORDS);
                continue;
            }
            CUdeviceptr rec = P->meta + (uint64_t)j * REC_WORDS * 4;
            void *args[1] = {&rec};
            if (P->dev->cc_major >= 9) {
                /* Hopper on: the kernel may start before the one ahead of
                 * it ends (kernels/common.cuh's ld_rec waits for it) */
                CUlaunchAttribute at = {.id =
                                            CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
                at.value.programmaticStreamSerializationAllowed = 1;
                CUlaunchConfig cfg = {.gridDimX = D->lgrid[0],
                                      .gridDimY = D->lgrid[1],
                                      .gridDimZ = D->lgrid[2],
                                      .blockDimX = D->block,
                                      .blockDimY = 1,
                                      .blockDimZ = 1,
                                      .hStream = st,
                                      .attrs = &at,
                                      .numAttrs = 1};
                r = cu->cuLaunchKernelEx(&cfg, P->dev->fn[D->lk], args, NULL);
            } else {
                r = cu->cuLaunchKernel(P->dev->fn[D->lk], D->lgrid[0], D->lgrid[1], D->lgrid[2],
                                       D->block, 1, 1, 0, st, args, NULL);
            }
        }
        if (timing && r == CUDA_SUCCESS)
            r = cu->cuEventRecord(P->ev[2 * i + 1], st);
    }
    if (r == CUDA_SUCCESS)
        r = cu->cuMemcpyDtoHAsync((uint8_t *)P->host + flag_off, P->meta + flag_off, 4, st);
    return r;
}

rlx_status cu_program_run(rlx_program *prog, const rlx_program_bindings *b,
                          const rlx_sym_values *syms, rlx_error **err)
{
    cu_program *P = (cu_program *)prog;
    if (!P || !b)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_run: missing argument");
    cu_device *d = P->dev;
    rlx_status st = cu_enter(d, err);
    if (st != RLX_OK)
        return st;
    struct timespec t_start;
    clock_gettime(CLOCK_MONOTONIC, &t_start);
    if (b->cancel && __atomic_load_n(b->cancel, __ATOMIC_RELAXED))
        return rlx_error_set(err, RLX_ERR_CANCELLED, "cancelled");
    int64_t sv[RLX_MAX_SYMBOLS] = {0};
    for (int s = 0; s < P->n_symbols; s++) {
        int64_t v = syms ? syms->v[s] : 0;
        if (v < 0 || v > P->sym_max[s])
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "%s = %lld is out of range: this program was built for %s <= "
                                 "%lld",
                                 P->sym_name[s], (long long)v, P->sym_name[s],
                                 (long long)P->sym_max[s]);
        sv[s] = v;
    }
    vspan *span = calloc((size_t)(P->n_values ? P->n_values : 1), sizeof *span);
    if (!span)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory running a program");
    st = locate(P, b, span, err);
    if (st != RLX_OK || P->n_disp == 0) {
        free(span);
        if (st == RLX_OK)
            P->n_runs++;
        return st;
    }

    /* this run's records, kernels and grids (those of fixed instructions
     * stand from the last run when nothing they depend on moved) */
    P->q8_valid = false;
    bool same_addr =
        P->records_ok && memcmp(P->addr, P->last_addr, (size_t)P->n_values * sizeof *P->addr) == 0;
    uint8_t moved = 0; /* symbols whose values differ from the last run's */
    for (int k = 0; k < P->n_symbols; k++)
        if (sv[k] != P->last_sv[k])
            moved |= (uint8_t)(1u << k);
    P->records_ok = false;
    for (int32_t i = 0; i < P->n_instrs && st == RLX_OK; i++) {
        int32_t j0 = P->first[i], n = P->first[i + 1] - j0;
        if (n == 0)
            continue;
        struct q8_state now = {.valid = P->q8_valid};
        if (now.valid)
            memcpy(now.key, P->q8_key, sizeof now.key);
        if (same_addr && P->fixed[i] && !(P->syms[i] & moved) && now.valid == P->q8_in[i].valid &&
            (!now.valid || memcmp(now.key, P->q8_in[i].key, sizeof now.key) == 0)) {
            P->q8_valid = P->q8_out[i].valid;
            memcpy(P->q8_key, P->q8_out[i].key, sizeof P->q8_key);
            continue;
        }
        P->q8_in[i] = now;
        char why[160] = "";
        fill_ctx c = {.P = P,
                      .sv = sv,
                      .d = P->scratch_disp,
                      .rec = P->host + (size_t)j0 * REC_WORDS,
                      .why = why,
                      .why_cap = sizeof why};
        if (!fill_instr(&c, i) || c.n != n) {
            st = rlx_error_set(err, RLX_ERR_INVALID_ARG, "instruction %d (%s, graph node %d): %s",
                               i, rlx_op_name(P->instrs[i].op), P->instrs[i].node,
                               why[0] ? why : "its launches changed shape");
            break;
        }
        for (int32_t j = j0; j < j0 + n && st == RLX_OK; j++) {
            cu_disp *D = &P->disp[j];
            const cu_disp *F = &P->scratch_disp[j - j0];
            D->k = F->k;
            memcpy(D->vals, F->vals, sizeof D->vals);
            memcpy(D->grid, F->grid, sizeof D->grid);
            int32_t *w = P->host + (size_t)j * REC_WORDS;
            shape(D, w);
            uint64_t flag = P->meta + P->meta_bytes - 16;
            w[12] = (int32_t)(uint32_t)flag;
            w[13] = (int32_t)(uint32_t)(flag >> 32);
            for (int s = 0; s <= CU_OUT_SLOT; s++) {
                if (D->vals[s] < 0)
                    continue;
                const int32_t *q = w + DESC(s);
                uint64_t need = reach(q);
                if (!need)
                    continue;
                const vspan *sp = &span[D->vals[s]];
                uint64_t a = (uint64_t)(uint32_t)q[2] | (uint64_t)(uint32_t)q[3] << 32;
                if (!sp->lo || a < sp->lo || need == UINT64_MAX || a + need > sp->hi)
                    st = rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                       "instruction %d (%s): value %d needs %llu bytes past its "
                                       "start, beyond its %s buffer",
                                       i, rlx_op_name(P->instrs[i].op), D->vals[s],
                                       (unsigned long long)need,
                                       home_names[P->values[D->vals[s]].home]);
            }
            if (D->k == CU_K_EW)
                w[PRM(5)] = ew_flat(w);
        }
        if (st == RLX_OK && now.valid && !P->q8_valid && q8_kept(P, i, now.key)) {
            P->q8_valid = true;
            memcpy(P->q8_key, now.key, sizeof P->q8_key);
        }
        P->q8_out[i].valid = P->q8_valid;
        memcpy(P->q8_out[i].key, P->q8_key, sizeof P->q8_key);
    }
    free(span);
    if (st != RLX_OK)
        return st;
    memcpy(P->last_addr, P->addr, (size_t)P->n_values * sizeof *P->addr);
    memcpy(P->last_sv, sv, sizeof P->last_sv);
    P->records_ok = true;
    group_launches(P);
    P->host[P->meta_bytes / 4 - 4] = 0; /* the failure word */

    const cu_api *cu = cu_driver(NULL);
    bool cancelled = false;
    CUresult r = CUDA_SUCCESS;
    size_t sig_bytes = (size_t)P->n_disp * 4 * sizeof *P->sig;
    /* a run with cuBLAS GEMMs is never captured: their pointers and sizes
     * would be frozen in the graph, while our kernels read theirs from the
     * records each run */
    bool blas_run = false;
    for (int32_t j = 0; j < P->n_disp && !blas_run; j++)
        blas_run = P->disp[j].k == CU_K_CUBLAS && P->disp[j].grid[0];
    bool same = !blas_run && P->last_valid && memcmp(P->sig, P->last_sig, sig_bytes) == 0;
    if (!P->timing && !P->run_ev[0] &&
        (cu->cuEventCreate(&P->run_ev[0], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
         cu->cuEventCreate(&P->run_ev[1], CU_EVENT_DEFAULT) != CUDA_SUCCESS))
        P->run_ev[0] = P->run_ev[1] = NULL;
    bool run_timed = !P->timing && P->run_ev[1];
    struct timespec t_launch;
    clock_gettime(CLOCK_MONOTONIC, &t_launch);
    if (run_timed)
        r = cu->cuEventRecord(P->run_ev[0], d->stream);
    if (r == CUDA_SUCCESS && P->timing) {
        r = enqueue(P, true, b->cancel, &cancelled);
    } else if (r == CUDA_SUCCESS && same) {
        if (!P->exec) {
            CUgraph graph = NULL;
            r = cu->cuStreamBeginCapture(d->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
            if (r == CUDA_SUCCESS) {
                CUresult r2 = enqueue(P, false, NULL, &cancelled);
                r = cu->cuStreamEndCapture(d->stream, &graph);
                if (r2 != CUDA_SUCCESS)
                    r = r2;
            }
            if (r == CUDA_SUCCESS)
                r = cu->cuGraphInstantiate(&P->exec, graph, 0);
            if (graph)
                cu->cuGraphDestroy(graph);
            if (r == CUDA_SUCCESS)
                P->n_recordings++;
        }
        if (r == CUDA_SUCCESS)
            r = cu->cuGraphLaunch(P->exec, d->stream);
    } else if (r == CUDA_SUCCESS) {
        if (P->exec) {
            cu->cuGraphExecDestroy(P->exec);
            P->exec = NULL;
        }
        r = enqueue(P, false, b->cancel, &cancelled);
        memcpy(P->last_sig, P->sig, sig_bytes);
        P->last_valid = !cancelled && !blas_run;
    }
    if (r == CUDA_SUCCESS && run_timed)
        r = cu->cuEventRecord(P->run_ev[1], d->stream);
    struct timespec t_sent;
    clock_gettime(CLOCK_MONOTONIC, &t_sent);
    if (r == CUDA_SUCCESS)
        r = cu->cuStreamSynchronize(d->stream);
    if (r != CUDA_SUCCESS)
        return launch_fail(P, r, "running a program", err);
    P->prep_ns += (uint64_t)((t_sent.tv_sec - t_start.tv_sec) * 1000000000LL +
                             (t_sent.tv_nsec - t_start.tv_nsec));
    P->submit_ns += (uint64_t)((t_sent.tv_sec - t_launch.tv_sec) * 1000000000LL +
                               (t_sent.tv_nsec - t_launch.tv_nsec));
    float run_ms = 0.0f;
    if (run_timed && cu->cuEventElapsedTime(&run_ms, P->run_ev[0], P->run_ev[1]) == CUDA_SUCCESS)
        P->device_ns += (uint64_t)((double)run_ms * 1e6);
    if (cancelled)
        return rlx_error_set(err, RLX_ERR_CANCELLED, "cancelled");
    P->have_times = false;
    if (P->timing) {
        for (int32_t i = 0; i < P->n_instrs; i++) {
            float ms = 0.0f;
            if (cu->cuEventElapsedTime(&ms, P->ev[2 * i], P->ev[2 * i + 1]) == CUDA_SUCCESS)
                P->ms[i] = ms;
            else
                P->ms[i] = 0.0;
        }
        P->have_times = true;
    }
    /* kernels flag run-time failures (a token id outside the table) */
    if (P->host[P->meta_bytes / 4 - 4]) {
        P->records_ok = false; /* the failure words read back below */
        /* which launch: read the records' failure words back */
        int32_t bad = -1;
        for (int32_t j = 0; j < P->n_disp && bad < 0; j++) {
            int32_t wv = 0;
            CUresult rr =
                cu->cuMemcpyDtoHAsync(&P->host[(size_t)j * REC_WORDS + 15],
                                      P->meta + ((uint64_t)j * REC_WORDS + 15) * 4, 4, d->stream);
            if (rr == CUDA_SUCCESS)
                rr = cu->cuStreamSynchronize(d->stream);
            wv = P->host[(size_t)j * REC_WORDS + 15];
            if (rr == CUDA_SUCCESS && wv)
                bad = j;
        }
        int32_t i = bad >= 0 ? P->disp[bad].instr : 0;
        return rlx_error_set(
            err, RLX_ERR_INVALID_ARG, "instruction %d (%s, graph node %d) failed: %s", i,
            rlx_op_name(P->instrs[i].op), P->instrs[i].node,
            P->instrs[i].op == RLX_OP_GATHER ? "a token id is out of the table's range"
                                             : "invalid values for this run");
    }
    P->n_runs++;
    return RLX_OK;
}

void cu_program_stats(const rlx_program *prog, rlx_program_stats *out)
{
    const cu_program *P = (const cu_program *)prog;
    if (!out)
        return;
    *out = (rlx_program_stats){0};
    if (P) {
        out->runs = P->n_runs;
        out->recordings = P->n_recordings;
        out->prep_ns = P->prep_ns;
        out->submit_ns = P->submit_ns;
        out->device_ns = P->device_ns;
        out->launches = P->launches;
    }
}

void cu_program_set_timing(rlx_program *prog, bool enabled)
{
    cu_program *P = (cu_program *)prog;
    if (!P)
        return;
    if (enabled && !P->timing) {
        const cu_api *cu = cu_driver(NULL);
        cu->cuCtxSetCurrent(P->dev->ctx);
        for (int32_t i = 0; i < 2 * P->n_instrs; i++)
            if (!P->ev[i] && cu->cuEventCreate(&P->ev[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
                enabled = false;
                break;
            }
    }
    P->timing = enabled;
    if (enabled)
        memset(P->ms, 0, (size_t)(P->n_instrs ? P->n_instrs : 1) * sizeof *P->ms);
}

rlx_status cu_program_timings(rlx_program *prog, double *ms, int32_t n, rlx_error **err)
{
    cu_program *P = (cu_program *)prog;
    if (!P)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_timings: missing argument");
    return rlx_backend_copy_timings(P->timing, P->ms, P->n_instrs, ms, n, err);
}
