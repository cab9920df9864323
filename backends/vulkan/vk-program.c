/* Vulkan programs: which instructions the backend takes (vk_check), the
 * dispatches each becomes, the per-run records the shaders read, and the
 * command buffer that replays them.
 *
 * Every dispatch owns a 256-word record in the program's host-visible meta
 * buffer: the item count, one descriptor per operand (dtype, rank, byte
 * offset, dims, element strides at this run's symbols) and op parameters
 * (layout in shaders/common.glsl). Its group counts sit at the end of the
 * same buffer and feed vkCmdDispatchIndirect, so a run with new symbol
 * values rewrites the records and replays the recorded command buffer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/vulkan/vk-backend.h"
#include "backends/vulkan/vk-internal.h"
#include "backends/base/gpu-operand.h"

/* The shaders use rlx_dtype and rlx_op values as numbers. */
_Static_assert(RLX_DTYPE_F32 == 2 && RLX_DTYPE_BF16 == 4 && RLX_DTYPE_F8_E4M3 == 5 &&
                   RLX_DTYPE_F8_E5M2 == 6 && RLX_DTYPE_I64 == 7 && RLX_DTYPE_BOOL == 12 &&
                   RLX_DTYPE_Q4_0 == 13 && RLX_DTYPE_Q8_0 == 17 && RLX_DTYPE_Q4_K == 21 &&
                   RLX_DTYPE_Q6_K == 23,
               "shaders/common.glsl's dtype codes");
_Static_assert(RLX_OP_NEG == 5 && RLX_OP_CAST == 19 && RLX_OP_SCALE == 21 && RLX_OP_ADD == 22 &&
                   RLX_OP_WHERE == 30,
               "shaders/ew.comp's op codes");
_Static_assert(RLX_ACT_RELU == 1 && RLX_ACT_TANH == 6, "shaders/common.glsl's act codes");

#define REC_WORDS   256
#define MAX_DISP    8 /* dispatches one instruction may need (concat inputs, scatter copy) */
#define DESC(k)     (16 + (k)*16)
#define PRM(i)      (128 + (i))
#define MAX_REGS    24
#define MAX_GROUPS  65535
#define ATTN_MAX_D  256
#define ATTN_MAX_DV (8 * VK_LS)
/* The tiled attention kernel (attention-tile.comp) for this many query rows
 * per head or more, with head dims up to ATTN_TILE_MAX_D: below it the rows
 * are too few to share K and V loads, and a workgroup per row spreads one
 * row's keys over its threads instead. */
#define ATTN_TILE_MIN_S 32
#define ATTN_TILE_MAX_D 128
#define MAX_AXES        3     /* axes one dispatch may be split along */
#define MAX_CHUNKS      65536 /* dispatches one split dispatch may become */
#define MAX_SEGS        64    /* command buffers a run is submitted in (cancel between them) */
#define HW_SEGS         16    /* ... on a GPU, where each costs a wake-up */
#define SEG_DISP        32    /* dispatches at least in one of them, on a GPU */
#define SOFT_SEG_DISP   4     /* on a software device (lavapipe) */
#define SEG_RUN_S       1.0   /* a run at least this long is submitted in parts */

typedef struct vk_disp {
    vk_kernel k;
    int32_t instr;
    bool per_group; /* one workgroup per item (rows), else one thread per item */
    int32_t vals[VK_OUT_SLOT + 1];
    VkDescriptorSet set;
    uint32_t rec; /* word index of the record in the meta buffer */
    uint64_t ind; /* byte offset of the indirect group counts */
    /* a chunk of a larger dispatch (split_plan): which of its instruction's
     * filled dispatches, the split axes (indices into split_axes' list),
     * items per chunk along each, and this chunk's index along each */
    int8_t bi, n_ax;
    int8_t ax[MAX_AXES];
    int32_t per[MAX_AXES], ci[MAX_AXES];
    uint64_t coff[VK_SLOTS]; /* bytes this chunk starts past its operand's start (this run) */
    VkBuffer bbuf[VK_SLOTS]; /* what is bound now (for re-record checks) */
    uint64_t bser[VK_SLOTS]; /* and its vk_buffer serial (0: the program's own) */
    uint64_t boff[VK_SLOTS], brange[VK_SLOTS];
} vk_disp;

/* Where a value lives for this run. */
typedef struct vloc {
    VkBuffer buf;
    uint64_t serial; /* of the vk_buffer (0: the program's own buffers) */
    uint64_t abs;    /* byte offset of the value in buf */
    uint64_t size;   /* buf's size */
} vloc;

typedef struct vk_program {
    rlx_program base;
    vk_device *dev;
    int32_t n_values, n_instrs, n_symbols;
    rlx_lir_value *values;
    rlx_lir_instr *instrs;
    int64_t sym_max[RLX_MAX_SYMBOLS];
    char sym_name[RLX_MAX_SYMBOLS][32];
    int32_t n_bind[4];
    uint64_t arena_bytes;
    int32_t n_disp;
    vk_disp *disp;
    int8_t *kern;   /* per instruction: vk_kernel, VK_K_COUNT for a no-op */
    int32_t *first; /* per instruction: first dispatch; first[n_instrs] = n_disp */
    VkBuffer meta, cbuf, dummy;
    VkDeviceMemory meta_mem, cbuf_mem, dummy_mem;
    int32_t *meta_map; /* the host's copy of the records (meta's own where not staged) */
    /* staged (vk_device.staged_meta): meta is device memory, meta_stage the
     * host's copy, copied in at the start of a run; the failure flag (word
     * flag_word, which every record names at its word 12) comes back */
    VkBuffer meta_stage;
    VkDeviceMemory meta_stage_mem;
    uint64_t meta_bytes;
    int32_t flag_word;
    uint64_t cbuf_size;
    VkDescriptorPool dpool;
    vk_disp *bdisp;        /* per instruction MAX_DISP: the dispatches as filled at create */
    int8_t *nbase;         /* per instruction: how many */
    int32_t n_segs;        /* command buffers (cancel is checked between them) */
    double last_run_s;     /* wall time of the last run's submissions */
    int32_t test_stop_seg; /* vk_test_stop_at (0: none) */
    volatile int *test_stop_flag;
    int32_t seg_first[MAX_SEGS + 1]; /* first instruction of each */
    VkCommandBuffer cbs[MAX_SEGS];
    VkCommandBuffer cb_whole; /* all of a run, where it has several parts */
    VkFence fences[MAX_SEGS];
    VkQueryPool qpool;
    bool recorded, rec_timing, timing, have_times;
    uint64_t n_runs, n_recordings; /* program_stats */
    vloc *loc;
    uint64_t *rem; /* per value: bytes from its descriptor's aligned start */
    double *ms;
    int32_t *scratch_rec;
} vk_program;

static const char *const home_names[] = {"arena", "param", "state", "input", "output", "const"};

/* ---- dtypes ------------------------------------------------------------------ */

/* ---- what the backend takes --------------------------------------------------- */

/* Which kernel runs an instruction, or -1 with the reason in `why`
 * (VK_K_COUNT: a no-op, the output is a view). */
static int vk_check(const rlx_lir *lir, const rlx_lir_instr *ins, char *why, size_t cap)
{
#define NO(...) (snprintf(why, cap, __VA_ARGS__), -1)
    const rlx_lir_value *o = &lir->values[ins->out];
    if (o->view_of >= 0)
        return VK_K_COUNT;
    if (ins->op <= RLX_OP_STATE)
        return VK_K_COUNT;
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
        return VK_K_GATHER;
    }
    /* a Q8_0 KV cache's slices, reshapes and permutes: the scheduler makes
     * them views (no-ops above); were one copied, fill_ew refuses it */
    if (o->dtype == RLX_DTYPE_Q8_0 && in[0]->dtype == RLX_DTYPE_Q8_0 &&
        (op == RLX_OP_SLICE || op == RLX_OP_RESHAPE || op == RLX_OP_PERMUTE))
        return VK_K_EW;
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
        return VK_K_EW;
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
        return VK_K_MATMUL;
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
        return VK_K_ROWOP;
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
        return VK_K_ROWOP;
    }
    case RLX_OP_ROPE:
        if (!ld_ok(in[0]->dtype) || !is_int(in[1]->dtype) || in[1]->dtype == RLX_DTYPE_I64 ||
            (ins->n_in > 2 && !ld_ok(in[2]->dtype)) || !st_ok(o->dtype))
            return NO("rope dtypes");
        if (in[0]->shape.rank < 1 || in[0]->shape.rank != o->shape.rank)
            return NO("rope ranks");
        return VK_K_ROPE;
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
        return VK_K_ATTN;
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
        return VK_K_CONV;
    }
    case RLX_OP_RESIZE:
    case RLX_OP_POOL2D:
        if (in[0]->shape.rank < 2 || in[0]->shape.rank != o->shape.rank)
            return NO("needs rank >= 2");
        if (!ld_ok(in[0]->dtype) || !st_ok(o->dtype))
            return NO("dtypes");
        return VK_K_SPATIAL;
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
        return VK_K_GATHER;
    }
    default:
        return NO("no Vulkan kernel for %s", rlx_op_name(op));
    }
#undef NO
}

bool vk_supports_op(rlx_device *dev, const rlx_lir *lir, const rlx_lir_instr *ins)
{
    (void)dev;
    if (!lir || !ins || (int)ins->op < 0 || ins->op >= RLX_OP_COUNT || ins->n_in < 0 ||
        ins->n_in > RLX_MAX_INPUTS || ins->out < 0 || ins->out >= lir->n_values)
        return false;
    for (int k = 0; k < ins->n_in; k++)
        if (ins->in[k] < 0 || ins->in[k] >= lir->n_values)
            return false;
    char why[160];
    return vk_check(lir, ins, why, sizeof why) >= 0;
}

/* ---- building records ------------------------------------------------------------- */

static vt vt_of(const vk_program *P, int32_t v, const int64_t *sv)
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

typedef struct fill_ctx {
    vk_program *P;
    const int64_t *sv;
    int n;                /* dispatches so far */
    vk_disp *d;           /* MAX_DISP of them */
    int32_t *rec;         /* MAX_DISP records of REC_WORDS */
    const vk_disp *fixed; /* at run time: the dispatches made at program_create */
    char *why;            /* a run-time failure */
    size_t why_cap;
} fill_ctx;

static int32_t *new_disp(fill_ctx *c, vk_kernel k, bool per_group, int64_t items)
{
    vk_disp *d = &c->d[c->n];
    int32_t *w = c->rec + (size_t)c->n * REC_WORDS;
    memset(w, 0, REC_WORDS * sizeof *w);
    d->k = k;
    d->per_group = per_group;
    for (int s = 0; s <= VK_OUT_SLOT; s++)
        d->vals[s] = -1;
    w[0] = (int32_t)items;
    c->n++;
    return w;
}

static void put_desc(fill_ctx *c, int32_t *w, int slot, const vt *t)
{
    vk_disp *d = &c->d[c->n - 1];
    d->vals[slot] = t->val;
    int32_t *q = w + DESC(slot);
    q[0] = (int32_t)t->dt;
    q[1] = t->rank;
    /* the byte offset is completed at run time (rem of the binding + extra) */
    q[2] = (int32_t)t->extra;
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

static bool fill_ew(fill_ctx *c, const rlx_lir_instr *ins)
{
    vk_program *P = c->P;
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
            int32_t *w = new_disp(c, VK_K_EW, false, numel(&part));
            put_desc(c, w, VK_OUT_SLOT, &part);
            vt src = bcast(in[k], part.rank, part.ne);
            put_desc(c, w, 0, &src);
            w[PRM(1)] = imode;
            w[PRM(3)] = 1;
        }
        return bad ? fail(c, "concat inputs overrun the output") : true;
    }
    if (op == RLX_OP_SCATTER) {
        int ax = norm_axis(ins->p.scatter.axis, o.rank);
        int64_t off = dim_eval(ins->p.scatter.offset, c->sv);
        vt src = in[1];
        bool bad =
            src.rank != o.rank || ax < 0 || ax >= o.rank || off < 0 || off + src.ne[ax] > o.ne[ax];
        if (ax < 0 || ax >= o.rank)
            ax = 0;
        if (!ins->in_place && ins->in[0] != ins->out) {
            int32_t *w = new_disp(c, VK_K_EW, false, numel(&o));
            put_desc(c, w, VK_OUT_SLOT, &o);
            put_desc(c, w, 0, &in[0]);
            w[PRM(1)] = is_int(o.dt) && is_int(in[0].dt);
            w[PRM(3)] = 1;
        }
        vt part = o;
        for (int d = 0; d < o.rank; d++)
            part.ne[d] = src.ne[d];
        part.extra = off * o.st[ax] * esize(o.dt);
        int32_t *w = new_disp(c, VK_K_EW, false, bad ? 0 : numel(&part));
        put_desc(c, w, VK_OUT_SLOT, &part);
        put_desc(c, w, 0, &src);
        w[PRM(1)] = is_int(o.dt) && is_int(src.dt);
        w[PRM(3)] = 1;
        return bad ? fail(c, "the scatter offset is out of range for this run") : true;
    }

    int32_t *w = new_disp(c, VK_K_EW, false, numel(&o));
    put_desc(c, w, VK_OUT_SLOT, &o);
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
        return bad ? fail(c, "the slice is out of range for this run") : true;
    }
    /* elementwise family: broadcast inputs, a register program */
    for (int k = 0; k < ins->n_in; k++) {
        vt b = bcast(in[k], o.rank, o.ne);
        put_desc(c, w, k, &b);
    }
    w[PRM(3)] = ins->n_in;
    if (op == RLX_OP_COPY || op == RLX_OP_CAST) {
        w[PRM(0)] = 0;
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
    return true;
}

/* A matmul's bias [N] (broadcast where it has one element) at slot 2 of
 * record w, P(3) set; nothing without one. */
static void put_bias(fill_ctx *c, int32_t *w, const rlx_lir_instr *ins, int64_t N)
{
    if (!ins->p.matmul.has_bias)
        return;
    vt bb = bias_view(vt_of(c->P, ins->in[2], c->sv), N);
    put_desc(c, w, 2, &bb);
    w[PRM(3)] = 1;
}

/* A matmul's dispatch of kernel k: out, a, b, K, act, alpha and the bias. */
static int32_t *mm_disp(fill_ctx *c, vk_kernel k, bool per_group, int64_t items,
                        const rlx_lir_instr *ins, const vt *o, const vt *A, const vt *B, int64_t K,
                        int64_t N)
{
    int32_t *w = new_disp(c, k, per_group, items);
    put_desc(c, w, VK_OUT_SLOT, o);
    put_desc(c, w, 0, A);
    put_desc(c, w, 1, B);
    w[PRM(0)] = (int32_t)K;
    w[PRM(1)] = (int32_t)ins->p.matmul.act;
    w[PRM(2)] = fbits(ins->p.matmul.alpha);
    put_bias(c, w, ins, N);
    return w;
}

static bool fill_matmul(fill_ctx *c, const rlx_lir_instr *ins)
{
    vk_program *P = c->P;
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
    /* long K and few rows: a workgroup per output, threads splitting K
     * (decided at the bounds, so the dispatch shape never changes) */
    int64_t rows_b = numel(&o) / (N ? N : 1);
    /* A software device (lavapipe) runs a workgroup's threads as coroutines
     * on the CPU, where each of row mode's reduction barriers costs a switch
     * per thread: over a large output (a vocabulary's logits) that made one
     * product take minutes. There row mode is kept only for small outputs
     * (so the conformance suite still covers it); a thread per output, its
     * loop over K vectorized by the driver, does the rest. */
    bool soft = c->P->dev->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    bool rowm = c->fixed ? c->fixed[c->n].per_group
                         : (K >= 256 && rows_b <= 16 && (!soft || numel(&o) <= 4096));
    /* up to MV_ROWS rows of an f32 `a` along K against weights along K:
     * matvec.comp, 32 threads a column, 8 consecutive weights a thread */
    const rlx_dtype_info *bi_ = rlx_dtype_get(b.dt);
    bool mv = c->fixed ? c->fixed[c->n].k == VK_K_MATVEC
                       : rowm && rows_b <= MV_ROWS && rows_b == M && M > 0 && K % 32 == 0 &&
                             a.dt == RLX_DTYPE_F32 && A.st[r - 1] == 1 && B.st[r - 2] == 1 &&
                             (bi_->quantized || b.dt == RLX_DTYPE_F32 || b.dt == RLX_DTYPE_F16 ||
                              b.dt == RLX_DTYPE_BF16 || b.dt == RLX_DTYPE_F8_E4M3 ||
                              b.dt == RLX_DTYPE_F8_E5M2) &&
                             (o.dt == RLX_DTYPE_F32 || o.dt == RLX_DTYPE_F16);
    if (mv) {
        for (int d = 0; d < r - 2; d++)
            if (o.ne[d] != 1)
                return fail(c, "a matrix-vector product with batch dims");
        int32_t *w =
            mm_disp(c, VK_K_MATVEC, true, (N + MV_COLS - 1) / MV_COLS, ins, &o, &A, &B, K, N);
        w[PRM(5)] =
            (int32_t)(bi_->quantized ? b.st[0] / bi_->block_size * bi_->type_size : B.st[r - 1]);
        w[PRM(6)] = (int32_t)M;
        w[PRM(7)] = (int32_t)A.st[r - 2];
        return true;
    }
    /* the rest of 16 rows and more in shared-memory tiles (gemm.comp); on
     * lavapipe too, where it ran a 512^3 f32 product 1.6x as fast as a
     * thread per output */
    bool bk8 = B.st[r - 2] == 1 && (bi_->quantized || K % 8 == 0) &&
               (bi_->quantized || b.dt == RLX_DTYPE_F32 || b.dt == RLX_DTYPE_F16 ||
                b.dt == RLX_DTYPE_BF16 || b.dt == RLX_DTYPE_F8_E4M3 || b.dt == RLX_DTYPE_F8_E5M2);
    for (int d = 0; d < r - 2; d++)
        bk8 = bk8 && B.st[d] == 0;
    bool gemm = c->fixed ? c->fixed[c->n].k == VK_K_GEMM
                         : !rowm && M >= 16 && N >= 16 && K >= 16 && (!bi_->quantized || bk8);
    if (gemm) {
        int64_t tn = (N + GEMM_T - 1) / GEMM_T, tm = (M + GEMM_T - 1) / GEMM_T;
        int32_t *w = mm_disp(c, VK_K_GEMM, true, tn * tm * (numel(&o) / (M * N > 0 ? M * N : 1)),
                             ins, &o, &A, &B, K, N);
        w[PRM(5)] =
            (int32_t)(bi_->quantized ? b.st[0] / bi_->block_size * bi_->type_size : B.st[r - 1]);
        w[PRM(6)] = bk8;
        w[PRM(7)] = (int32_t)tn;
        w[PRM(8)] = (int32_t)tm;
        return true;
    }
    int32_t *w = mm_disp(c, VK_K_MATMUL, rowm, numel(&o), ins, &o, &A, &B, K, N);
    w[PRM(6)] = rowm;
    if (rlx_dtype_get(b.dt)->quantized) {
        const rlx_dtype_info *ti = rlx_dtype_get(b.dt);
        if (K % ti->block_size)
            return fail(c, "K is not a whole number of blocks");
        w[PRM(4)] = 1;
        w[PRM(5)] = (int32_t)(b.st[0] / ti->block_size * ti->type_size);
    }
    return true;
}

enum { RM_SUM, RM_MEAN, RM_MAX, RM_ARGMAX, RM_SOFTMAX, RM_LN, RM_RMS, RM_ADDRMS, RM_GN, RM_TOPK };

static bool fill_rowop(fill_ctx *c, const rlx_lir_instr *ins)
{
    vk_program *P = c->P;
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
        int32_t *w = new_disp(c, VK_K_ROWOP, true, N * G);
        put_desc(c, w, 0, &X);
        put_desc(c, w, VK_OUT_SLOT, &O);
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
    int32_t *w = new_disp(c, VK_K_ROWOP, true, rows);
    put_desc(c, w, 0, &X);
    put_desc(c, w, VK_OUT_SLOT, &O);
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
        break;
    }
    }
    return true;
}

static bool fill_rope(fill_ctx *c, const rlx_lir_instr *ins)
{
    vk_program *P = c->P;
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
    int32_t *w = new_disp(c, VK_K_ROPE, false, D ? rows * (D - half) : 0);
    put_desc(c, w, 0, &x);
    put_desc(c, w, 1, &pos);
    put_desc(c, w, VK_OUT_SLOT, &o);
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
    return true;
}

static void set_items(const vk_disp *D, int32_t *w);
static int32_t *fill_attention_rec(fill_ctx *c, const rlx_lir_instr *ins, vk_kernel kk,
                                   const vt *qp, const vt *kp, const vt *vp, const vt *op,
                                   bool idle);

static bool fill_attention(fill_ctx *c, const rlx_lir_instr *ins)
{
    vk_program *P = c->P;
    vt q = vt_of(P, ins->in[0], c->sv), k = vt_of(P, ins->in[1], c->sv),
       v = vt_of(P, ins->in[2], c->sv), o = vt_of(P, ins->out, c->sv);
    int rq = q.rank, rk = k.rank, rv = v.rank;
    int64_t Hq = q.ne[rq - 3], S = q.ne[rq - 2], D = q.ne[rq - 1];
    int64_t Hkv = k.ne[rk - 3], Dv = v.ne[rv - 1];
    if (Hkv <= 0 || Hq % Hkv)
        return fail(c, "query heads are not a multiple of the key/value heads");
    if (D > ATTN_MAX_D || Dv > ATTN_MAX_DV)
        return fail(c, "head dim too large");
    /* With many query rows a second, tiled dispatch: made at create when the
     * rows' bound reaches ATTN_TILE_MIN_S, and kept (so the recorded command
     * buffer replays); each run gives the work to one of the pair by its
     * row count and sizes the other to no workgroups. */
    vk_kernel tk = VK_K_COUNT;
    if (c->fixed) {
        vk_kernel f = c->fixed[c->n + 1].k;
        if (f == VK_K_ATTN_T64 || f == VK_K_ATTN_T128)
            tk = f;
    } else if (S >= ATTN_TILE_MIN_S && D <= ATTN_TILE_MAX_D && Dv <= ATTN_TILE_MAX_D) {
        tk = D <= 64 && Dv <= 64 ? VK_K_ATTN_T64 : VK_K_ATTN_T128;
    }
    int64_t td = tk == VK_K_ATTN_T64 ? 64 : ATTN_TILE_MAX_D;
    bool tiled = tk != VK_K_COUNT && S >= ATTN_TILE_MIN_S && D <= td && Dv <= td;
    int32_t *w = fill_attention_rec(c, ins, VK_K_ATTN, &q, &k, &v, &o, tiled);
    if (w && tk != VK_K_COUNT)
        w = fill_attention_rec(c, ins, tk, &q, &k, &v, &o, !tiled);
    return w != NULL;
}

/* One attention dispatch of kernel kk; idle: sized to no workgroups. */
static int32_t *fill_attention_rec(fill_ctx *c, const rlx_lir_instr *ins, vk_kernel kk,
                                   const vt *qp, const vt *kp, const vt *vp, const vt *op,
                                   bool idle)
{
    vk_program *P = c->P;
    vt q = *qp, k = *kp, v = *vp, o = *op;
    int rq = q.rank, rk = k.rank, rv = v.rank, ro = o.rank;
    int64_t B = rq == 4 ? q.ne[0] : 1;
    int64_t Hq = q.ne[rq - 3], S = q.ne[rq - 2], D = q.ne[rq - 1];
    int64_t Hkv = k.ne[rk - 3], T = k.ne[rk - 2], Dv = v.ne[rv - 1];
    int32_t *w = new_disp(c, kk, true, 0);
    w[PRM(32)] = idle;
    put_desc(c, w, 0, &q);
    put_desc(c, w, 1, &k);
    put_desc(c, w, 2, &v);
    put_desc(c, w, VK_OUT_SLOT, &o);
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
    set_items(&c->d[c->n - 1], w);
    return w;
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

/* conv-gemm.comp's block: output channels of a workgroup (all its threads)
 * and pixels of each thread; must match the shader's OB and PB. */
#define CONV_GEMM_OB 8
#define CONV_GEMM_PB 8

/* The blocked kernel takes plain convolutions, grouped ones where a
 * workgroup's channels lie in one group; the direct kernel the rest
 * (transposed, depthwise). */
static bool conv_gemm_ok(bool tr, int32_t groups, int64_t oc)
{
    return !tr && (groups == 1 || (oc / groups) % CONV_GEMM_OB == 0);
}

static bool fill_conv(fill_ctx *c, const rlx_lir_instr *ins)
{
    vk_program *P = c->P;
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
    /* the blocked kernel where it applies, decided at create (a run keeps
     * the kernel its recorded command buffer binds) */
    vk_kernel k = c->fixed                     ? c->fixed[c->n].k
                  : conv_gemm_ok(tr, G, on[1]) ? VK_K_CONV_GEMM
                                               : VK_K_CONV;
    int32_t *w = new_disp(c, k, true, 0);
    put_desc(c, w, 0, &x);
    put_desc(c, w, 1, &wt);
    put_desc(c, w, VK_OUT_SLOT, &o);
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
    w[PRM(18)] = x.dt == RLX_DTYPE_F32; /* the inner loop's loads; w is staged */
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
    set_items(&c->d[c->n - 1], w);
    return true;
}

static bool fill_spatial(fill_ctx *c, const rlx_lir_instr *ins)
{
    vk_program *P = c->P;
    vt x = vt_of(P, ins->in[0], c->sv), o = vt_of(P, ins->out, c->sv);
    int32_t *w = new_disp(c, VK_K_SPATIAL, false, numel(&o));
    put_desc(c, w, 0, &x);
    put_desc(c, w, VK_OUT_SLOT, &o);
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

/* The append into a Q8_0 state: the state copied first when the output is
 * another buffer (as halves: a Q8_0 buffer is 34 bytes a block), then one
 * thread per 32-value block of src quantizes it into place. */
static bool fill_scatter_q8(fill_ctx *c, const rlx_lir_instr *ins)
{
    vk_program *P = c->P;
    vt o = vt_of(P, ins->out, c->sv), st = vt_of(P, ins->in[0], c->sv),
       src = vt_of(P, ins->in[1], c->sv);
    int r = o.rank, ax = norm_axis(ins->p.scatter.axis, r);
    int64_t off = dim_eval(ins->p.scatter.offset, c->sv), D = o.ne[r - 1];
    bool bad = src.rank != r || ax < 0 || ax >= r - 1 || off < 0 || off + src.ne[ax] > o.ne[ax] ||
               D % 32 || src.ne[r - 1] != D;
    if (!ins->in_place && ins->in[0] != ins->out) {
        int64_t n = numel(&o), bytes = n / 32 * 34;
        if (numel(&st) != n)
            bad = true;
        vt ob = o, ib = st;
        ob.dt = ib.dt = RLX_DTYPE_I16;
        ob.rank = ib.rank = 1;
        ob.ne[0] = ib.ne[0] = bad ? 0 : bytes / 2;
        ob.st[0] = ib.st[0] = 1;
        int32_t *w = new_disp(c, VK_K_EW, false, ob.ne[0]);
        put_desc(c, w, VK_OUT_SLOT, &ob);
        put_desc(c, w, 0, &ib);
        w[PRM(1)] = 1;
        w[PRM(3)] = 1;
    }
    int64_t blocks = bad ? 0 : numel(&src) / 32;
    int32_t *w = new_disp(c, VK_K_GATHER, false, blocks);
    put_desc(c, w, 0, &src);
    put_desc(c, w, VK_OUT_SLOT, &o);
    w[PRM(0)] = (int32_t)(D > 0 ? D : 32);
    w[PRM(3)] = 1;
    w[PRM(4)] = (int32_t)src.st[r - 1];
    w[PRM(5)] = (int32_t)off;
    w[PRM(6)] = ax;
    return bad ? fail(c, "the Q8_0 append is out of range for this run") : true;
}

static bool fill_gather(fill_ctx *c, const rlx_lir_instr *ins)
{
    vk_program *P = c->P;
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
    int32_t *w = new_disp(c, VK_K_GATHER, false, numel(&ids) * D);
    put_desc(c, w, 0, &T);
    put_desc(c, w, 1, &ids);
    put_desc(c, w, VK_OUT_SLOT, &o);
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
    switch (k) {
    case VK_K_COUNT:
        return true;
    case VK_K_EW:
        return fill_ew(c, ins);
    case VK_K_MATMUL:
    case VK_K_MATVEC:
    case VK_K_GEMM:
        return fill_matmul(c, ins);
    case VK_K_ROWOP:
        return fill_rowop(c, ins);
    case VK_K_ROPE:
        return fill_rope(c, ins);
    case VK_K_ATTN:
        return fill_attention(c, ins);
    case VK_K_CONV:
    case VK_K_CONV_GEMM:
        return fill_conv(c, ins);
    case VK_K_SPATIAL:
        return fill_spatial(c, ins);
    case VK_K_GATHER:
        return fill_gather(c, ins);
    default:
        return fail(c, "unsupported");
    }
}

/* ---- splitting over binding windows ----------------------------------------------
 *
 * One binding reaches at most the device's binding limit (lavapipe: 128
 * MiB) of a buffer. A dispatch whose operand reaches further is run as
 * chunks: the same kernel over a sub-range of an axis (rows of a matmul's
 * weight, heads of attention, rows of a gather table, outer dims of
 * elementwise and row ops), each chunk binding a window that starts where
 * its part of every operand starts. The chunks are fixed at program_create
 * from the symbols' bounds; a run fills each chunk's record from the
 * instruction's record at its symbols (a chunk past the run's extent does
 * nothing). Windows depend only on constant strides in the common cases
 * (weights, a KV cache at its full size), so a decode step replays the
 * recorded command buffer. */

/* AX_CONV_OC: output channels of a conv (its weight's and bias's too);
 * AX_CONV_ROWS: output rows of a conv, whose input window is the band of
 * rows those read (the halo of its kernel), see cut_conv_rows. */
enum { AX_PLAIN, AX_TABLE, AX_HEADS, AX_BATCH, AX_CONV_OC, AX_CONV_ROWS };

typedef struct split_axis {
    int8_t dim[VK_OUT_SLOT + 1]; /* per operand: the dim of its descriptor (-1: untouched) */
    int8_t mul[VK_OUT_SLOT + 1]; /* descriptor entries per axis entry (query heads per kv head) */
    int8_t kind;
} split_axis;

static int64_t off64(const int32_t *q)
{
    return (int64_t)(uint32_t)q[2] | (int64_t)q[3] << 32;
}

static void set_off64(int32_t *q, int64_t v)
{
    q[2] = (int32_t)(uint32_t)v;
    q[3] = (int32_t)(v >> 32);
}

/* Bytes of `el` elements of dtype dt (whole blocks of a quantized one). */
static int64_t el_bytes(rlx_dtype dt, int64_t el)
{
    const rlx_dtype_info *ti = rlx_dtype_get(dt);
    if (ti->quantized)
        return el / ti->block_size * ti->type_size;
    return el * esize(dt);
}

static uint64_t reach(const int32_t *q);

static const char *fmt_bytes(uint64_t b, char *buf, size_t cap)
{
    if (b >= (1ull << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, cap, "%.1f MiB", (double)b / (double)(1ull << 20));
    else if (b >= 1024)
        snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(buf, cap, "%llu bytes", (unsigned long long)b);
    return buf;
}

/* Bytes operand `s` of record w needs from its window's start (before the
 * window's alignment): its offset, its reach, and the norm half of a
 * keep_sum add_rms_norm. */
static uint64_t need_of(const vk_disp *D, const int32_t *w, int s)
{
    const int32_t *q = w + DESC(s);
    uint64_t r = reach(q);
    if (!r)
        return 0;
    r += (uint64_t)off64(q);
    if (D->k == VK_K_ROWOP && s == VK_OUT_SLOT && w[PRM(1)] == RM_ADDRMS && w[PRM(5)] > 0)
        r += (uint64_t)w[PRM(5)];
    return r;
}

static bool contiguous(const int32_t *q, int64_t *n)
{
    int64_t e = 1;
    for (int d = q[1] - 1; d >= 0; d--) {
        if (q[4 + d] != 1 && q[10 + d] != e)
            return false;
        e *= q[4 + d];
    }
    *n = e;
    return true;
}

/* A reshape copy (one operand and the output, of other dims) rewritten so
 * that both have the same dims: each dim of either is cut into the factors
 * where the other's dims end (a strided dim of size a*b is a dim of size a
 * with stride st*b over one of size b with stride st), so the run walks the
 * same elements in the same order, now along common axes the dispatch can be
 * split on. False (w untouched) when the dims do not divide so or more than 6
 * would be needed. */
static bool refine_reshape(int32_t *qa, int32_t *qb)
{
    int64_t ad[6], as[6], bd[6], bs[6];
    int na = 0, nb = 0;
    for (int d = 0; d < qa[1]; d++)
        if (qa[4 + d] != 1)
            ad[na] = qa[4 + d], as[na++] = qa[10 + d];
    for (int d = 0; d < qb[1]; d++)
        if (qb[4 + d] != 1)
            bd[nb] = qb[4 + d], bs[nb++] = qb[10 + d];
    int64_t rd[6], ra[6], rb[6];
    int nr = 0, ia = na - 1, ib = nb - 1;
    int64_t ca = ia >= 0 ? ad[ia] : 1, sa = ia >= 0 ? as[ia] : 0;
    int64_t cb = ib >= 0 ? bd[ib] : 1, sb = ib >= 0 ? bs[ib] : 0;
    while (ia >= 0 && ib >= 0) {
        int64_t m = ca < cb ? ca : cb;
        if (nr == 6 || ca % m || cb % m)
            return false;
        rd[nr] = m, ra[nr] = sa, rb[nr] = sb, nr++;
        if (ca == m) {
            if (--ia >= 0)
                ca = ad[ia], sa = as[ia];
        } else {
            ca /= m, sa *= m;
        }
        if (cb == m) {
            if (--ib >= 0)
                cb = bd[ib], sb = bs[ib];
        } else {
            cb /= m, sb *= m;
        }
    }
    if (ia >= 0 || ib >= 0 || nr == 0)
        return false;
    for (int64_t k = 0; k < nr; k++)
        if (rd[k] > INT32_MAX || ra[k] > INT32_MAX || rb[k] > INT32_MAX)
            return false;
    qa[1] = qb[1] = nr;
    for (int d = 0; d < nr; d++) {
        qa[4 + d] = qb[4 + d] = (int32_t)rd[nr - 1 - d];
        qa[10 + d] = (int32_t)ra[nr - 1 - d];
        qb[10 + d] = (int32_t)rb[nr - 1 - d];
    }
    return true;
}

/* The axes dispatch D (record w) may be split along. May rewrite w into an
 * equivalent form (contiguous elementwise operands as one flat dim). */
static int split_axes(const vk_disp *D, int32_t *w, split_axis *ax)
{
    int n = 0;
    const int32_t *qo = w + DESC(VK_OUT_SLOT);
    int ro = qo[1];
#define AXIS(kd)                                                                      \
    (memset(ax[n].dim, -1, sizeof ax[n].dim), memset(ax[n].mul, 1, sizeof ax[n].mul), \
     ax[n].kind = (kd), &ax[n++])
    switch (D->k) {
    case VK_K_EW: {
        if (w[PRM(2)])
            return 0; /* pad: its input is not in the output's coordinates */
        bool same = true;
        for (int s = 0; s <= VK_OUT_SLOT; s++) {
            if (D->vals[s] < 0)
                continue;
            const int32_t *q = w + DESC(s);
            same = same && q[1] == ro;
            for (int d = 0; same && d < ro; d++)
                same = q[4 + d] == qo[4 + d];
        }
        int n_ops = 0, in_slot = -1;
        for (int s = 0; s <= VK_OUT_SLOT; s++)
            if (D->vals[s] >= 0 && s != VK_OUT_SLOT)
                n_ops++, in_slot = s;
        if (!same && n_ops == 1 && refine_reshape(w + DESC(in_slot), w + DESC(VK_OUT_SLOT))) {
            same = true; /* a strided reshape, now on common axes */
            ro = qo[1];
        }
        if (!same) {
            /* a reshape: operands of other dims, as flat runs when contiguous */
            int64_t n0 = -1, e;
            for (int s = 0; s <= VK_OUT_SLOT; s++) {
                if (D->vals[s] < 0)
                    continue;
                if (!contiguous(w + DESC(s), &e) || (n0 >= 0 && e != n0) || e > INT32_MAX)
                    return 0;
                n0 = e;
            }
            for (int s = 0; s <= VK_OUT_SLOT; s++) {
                if (D->vals[s] < 0)
                    continue;
                int32_t *q = w + DESC(s);
                q[1] = 1;
                q[4] = (int32_t)n0;
                q[10] = 1;
            }
            ro = 1;
        }
        for (int d = 0; d < ro && n < 8; d++) {
            split_axis *a = AXIS(AX_PLAIN);
            for (int s = 0; s <= VK_OUT_SLOT; s++)
                if (D->vals[s] >= 0)
                    a->dim[s] = (int8_t)d;
        }
        break;
    }
    case VK_K_MATMUL:
    case VK_K_MATVEC:
    case VK_K_GEMM: {
        split_axis *a = AXIS(AX_PLAIN); /* rows of a and the output */
        a->dim[0] = a->dim[VK_OUT_SLOT] = (int8_t)(ro - 2);
        a = AXIS(AX_PLAIN); /* columns: rows of a [N, K] weight */
        a->dim[1] = a->dim[VK_OUT_SLOT] = (int8_t)(ro - 1);
        if (D->vals[2] >= 0)
            a->dim[2] = 0;
        for (int d = 0; d < ro - 2 && n < 8; d++) {
            a = AXIS(AX_PLAIN);
            a->dim[0] = a->dim[1] = a->dim[VK_OUT_SLOT] = (int8_t)d;
        }
        break;
    }
    case VK_K_ROWOP: {
        if (w[PRM(1)] == RM_GN)
            return 0;
        int r = w[DESC(0) + 1];
        for (int d = 0; d < r - 1 && n < 8; d++) {
            split_axis *a = AXIS(AX_PLAIN);
            for (int s = 0; s <= VK_OUT_SLOT; s++)
                if (D->vals[s] >= 0 && w[DESC(s) + 1] == r)
                    a->dim[s] = (int8_t)d;
        }
        break;
    }
    case VK_K_ROPE: {
        int r = w[DESC(0) + 1], rp = w[DESC(1) + 1];
        for (int d = 0; d < r - 1 && n < 8; d++) {
            split_axis *a = AXIS(AX_PLAIN);
            a->dim[0] = a->dim[VK_OUT_SLOT] = (int8_t)d;
            if (d == w[PRM(8)])
                a->dim[1] = (int8_t)(rp - 1);
        }
        break;
    }
    case VK_K_ATTN:
    case VK_K_ATTN_T64:
    case VK_K_ATTN_T128: {
        int g = w[PRM(4)] > 0 ? w[PRM(1)] / w[PRM(4)] : 1;
        if (g < 1 || g > 127)
            return 0;
        split_axis *a = AXIS(AX_HEADS);
        int slots[4] = {0, 1, 2, VK_OUT_SLOT};
        for (int j = 0; j < 4; j++) {
            int s = slots[j];
            a->dim[s] = (int8_t)(w[DESC(s) + 1] - 3);
            a->mul[s] = (int8_t)(s == 1 || s == 2 ? 1 : g);
        }
        if (D->vals[3] >= 0) {
            a->dim[3] = 1;
            a->mul[3] = (int8_t)g;
        }
        if (w[DESC(0) + 1] == 4) {
            a = AXIS(AX_BATCH);
            for (int j = 0; j < 4; j++)
                if (w[DESC(slots[j]) + 1] == 4)
                    a->dim[slots[j]] = 0;
            if (D->vals[3] >= 0)
                a->dim[3] = 0;
        }
        break;
    }
    case VK_K_CONV:
    case VK_K_CONV_GEMM: {
        /* P(0) N, P(1) OC, P(2) OH; the weight and output strides the shader
         * uses are P(24..31), so a cut moves only the descriptors' offsets */
        bool tr = w[PRM(16)] != 0;
        split_axis *a = AXIS(AX_BATCH);
        a->dim[0] = a->dim[VK_OUT_SLOT] = 0;
        if (w[PRM(15)] == 1) { /* with groups, a chunk's channels would need their group's */
            a = AXIS(AX_CONV_OC);
            a->dim[1] = (int8_t)(tr ? 1 : 0);
            a->dim[VK_OUT_SLOT] = 1;
            if (D->vals[2] >= 0)
                a->dim[2] = (int8_t)(w[DESC(2) + 1] - 1);
        }
        if (!tr && w[DESC(0) + 1] == 4 && w[DESC(VK_OUT_SLOT) + 1] == 4) {
            a = AXIS(AX_CONV_ROWS);
            a->dim[0] = a->dim[VK_OUT_SLOT] = 2;
        }
        break;
    }
    case VK_K_GATHER: {
        if (w[PRM(3)])
            return 0; /* the Q8_0 append */
        split_axis *a = AXIS(AX_TABLE);
        a->dim[0] = 0;
        int ri = w[DESC(1) + 1];
        for (int d = 0; d < ri && n < 8; d++) {
            a = AXIS(AX_PLAIN);
            a->dim[1] = a->dim[VK_OUT_SLOT] = (int8_t)d;
        }
        break;
    }
    default:
        break;
    }
#undef AXIS
    return n;
}

/* Extent of an axis in record w (entries of its coarsest operand). */
static int64_t axis_extent(const int32_t *w, const split_axis *a)
{
    int64_t e = 0;
    if (a->kind == AX_CONV_ROWS) /* the input's rows are the band's, not the axis */
        return w[DESC(VK_OUT_SLOT) + 4 + a->dim[VK_OUT_SLOT]];
    for (int s = 0; s <= VK_OUT_SLOT; s++)
        if (a->dim[s] >= 0) {
            int64_t v = w[DESC(s) + 4 + a->dim[s]] / a->mul[s];
            if (v > e)
                e = v;
        }
    return e;
}

/* A conv's output rows [at, at + len) read input rows [at*sh - ph, ... +
 * (len-1)*sh + (KH-1)*dh] clipped to the input: the window is a band of that
 * many rows, shifted to lie inside the input, so every chunk's window has the
 * size of chunk 0's (split_plan sizes the chunks by chunk 0). The shader sees
 * the band as its input (P(5) its height) and a padding that maps its output
 * rows into it; rows outside the input stay outside the band, so the zero
 * padding is kept. */
static void cut_conv_rows(int32_t *w, int64_t at, int64_t len, uint64_t *coff)
{
    int32_t *qx = w + DESC(0);
    int64_t IH = w[PRM(5)], KH = w[PRM(7)], sh = w[PRM(9)], ph = w[PRM(11)], dh = w[PRM(13)];
    int64_t rows = len > 0 ? (len - 1) * sh + (KH - 1) * dh + 1 : 0;
    if (rows > IH)
        rows = IH;
    int64_t r0 = at * sh - ph;
    if (r0 > IH - rows)
        r0 = IH - rows;
    if (r0 < 0)
        r0 = 0;
    qx[4 + 2] = (int32_t)rows;
    int64_t b = el_bytes((rlx_dtype)qx[0], r0 * (int64_t)qx[10 + 2]);
    set_off64(qx, off64(qx) + b);
    if (coff)
        coff[0] += (uint64_t)b;
    w[PRM(2)] = (int32_t)len;
    w[PRM(5)] = (int32_t)rows;
    w[PRM(11)] = (int32_t)(ph + r0 - at * sh);
}

/* Narrow record w to entries [at, at + len) of axis a (extent E), adding
 * each operand's byte offset to coff. */
static void cut_axis(const vk_disp *D, int32_t *w, const split_axis *a, int64_t E, int64_t at,
                     int64_t len, uint64_t *coff)
{
    (void)D;
    if (len < 0)
        len = 0;
    for (int s = 0; s <= VK_OUT_SLOT; s++) {
        if (a->dim[s] < 0 || (a->kind == AX_CONV_ROWS && s == 0))
            continue;
        int32_t *q = w + DESC(s);
        int d = a->dim[s], m = a->mul[s];
        if (q[4 + d] == 1 && E * m != 1)
            continue; /* broadcast along it */
        q[4 + d] = (int32_t)(len * m);
        /* an empty chunk moves too: its window then stays put as a run's
         * extent changes, and the recorded command buffer replays */
        int64_t b = el_bytes((rlx_dtype)q[0], at * m * (int64_t)q[10 + d]);
        set_off64(q, off64(q) + b);
        if (coff)
            coff[s] += (uint64_t)b;
    }
    switch (a->kind) {
    case AX_TABLE:
        w[PRM(7)] = (int32_t)at;
        w[PRM(8)] = (int32_t)len;
        break;
    case AX_HEADS:
        w[PRM(4)] = (int32_t)len;
        w[PRM(1)] = (int32_t)(len * a->mul[0]);
        break;
    case AX_BATCH:
        w[PRM(0)] = (int32_t)len;
        break;
    case AX_CONV_OC:
        w[PRM(1)] = (int32_t)len;
        break;
    case AX_CONV_ROWS:
        cut_conv_rows(w, at, len, coff);
        break;
    default:
        break;
    }
}

/* The item count of a (narrowed) record. */
static void set_items(const vk_disp *D, int32_t *w)
{
    const int32_t *qo = w + DESC(VK_OUT_SLOT), *qx = w + DESC(0);
    int64_t n = 1;
    switch (D->k) {
    case VK_K_ROWOP:
        for (int d = 0; d < qx[1] - 1; d++)
            n *= qx[4 + d];
        if (qx[4 + qx[1] - 1] == 0)
            n = 0;
        break;
    case VK_K_ROPE: {
        for (int d = 0; d < qx[1] - 1; d++)
            n *= qx[4 + d];
        w[PRM(0)] = (int32_t)n;
        n = w[PRM(1)] ? n * (w[PRM(1)] - w[PRM(2)]) : 0;
        break;
    }
    case VK_K_ATTN:
        n = w[PRM(32)] ? 0 : (int64_t)w[PRM(0)] * w[PRM(1)] * w[PRM(2)];
        break;
    case VK_K_ATTN_T64:
    case VK_K_ATTN_T128: /* a workgroup per VK_LS query rows of a head */
        n = w[PRM(32)] ? 0 : (int64_t)w[PRM(0)] * w[PRM(1)] * ((w[PRM(2)] + VK_LS - 1) / VK_LS);
        break;
    case VK_K_CONV: /* a workgroup per 8 channels x VK_LS pixels (fill_conv) */
        n = (int64_t)w[PRM(0)] * ((w[PRM(1)] + 7) / 8) *
            (((int64_t)w[PRM(2)] * w[PRM(3)] + VK_LS - 1) / VK_LS);
        break;
    case VK_K_MATVEC: /* a workgroup per MV_COLS columns */
        n = ((int64_t)qo[4 + qo[1] - 1] + MV_COLS - 1) / MV_COLS;
        break;
    case VK_K_GEMM: { /* a workgroup per GEMM_T x GEMM_T output tile */
        int ro = qo[1];
        int64_t tn = ((int64_t)qo[4 + ro - 1] + GEMM_T - 1) / GEMM_T;
        int64_t tm = ((int64_t)qo[4 + ro - 2] + GEMM_T - 1) / GEMM_T;
        w[PRM(7)] = (int32_t)tn;
        w[PRM(8)] = (int32_t)tm;
        n = tn * tm;
        for (int d = 0; d < ro - 2; d++)
            n *= qo[4 + d];
        break;
    }
    case VK_K_CONV_GEMM: /* CONV_GEMM_OB channels x VK_LS * CONV_GEMM_PB pixels */
        n = (int64_t)w[PRM(0)] * ((w[PRM(1)] + CONV_GEMM_OB - 1) / CONV_GEMM_OB) *
            (((int64_t)w[PRM(2)] * w[PRM(3)] + VK_LS * CONV_GEMM_PB - 1) / (VK_LS * CONV_GEMM_PB));
        break;
    default:
        for (int d = 0; d < qo[1]; d++)
            n *= qo[4 + d];
        if (D->k == VK_K_GATHER && w[PRM(7)] && w[PRM(8)] == 0)
            n = 0; /* a table chunk past this run's rows */
        break;
    }
    w[0] = (int32_t)n;
}

/* Make record w chunk ci (n_ax axes of `per` entries) of itself. */
static void cut_chunk(const vk_disp *D, int32_t *w, const split_axis *ax, const int8_t *axi,
                      const int32_t *per, const int32_t *ci, int n_ax, uint64_t *coff)
{
    for (int k = 0; k < n_ax; k++) {
        const split_axis *a = &ax[axi[k]];
        int64_t E = axis_extent(w, a), at = (int64_t)ci[k] * per[k];
        int64_t len = E - at < per[k] ? E - at : per[k];
        cut_axis(D, w, a, E, at, len, coff);
    }
    set_items(D, w);
}

/* A value's name for errors: its binding's, else its number. */
static void value_name(const rlx_lir *lir, int32_t v, char *buf, size_t cap)
{
    const rlx_lir_value *val = &lir->values[v];
    const rlx_lir_binding *bs[4] = {lir->params, lir->states, lir->inputs, lir->outputs};
    int32_t nb[4] = {lir->n_params, lir->n_states, lir->n_inputs, lir->n_outputs};
    if (val->home >= RLX_HOME_PARAM && val->home <= RLX_HOME_OUTPUT) {
        int h = val->home - RLX_HOME_PARAM;
        if (bs[h] && val->index >= 0 && val->index < nb[h] && bs[h][val->index].name) {
            snprintf(buf, cap, "%s '%s'", home_names[val->home], bs[h][val->index].name);
            return;
        }
    }
    snprintf(buf, cap, "%s value %d", home_names[val->home], v);
}

/* Plan the chunks of dispatch D (record w at the symbols' bounds) so that
 * every operand fits `lim` bytes from its chunk's start. Sets D's axes;
 * returns the chunk count, or 0 with the reason in why. */
static int64_t split_plan(const rlx_lir *lir, vk_disp *D, int32_t *w, uint64_t lim, uint64_t shown,
                          char *why, size_t cap)
{
    D->n_ax = 0;
    uint64_t vb[VK_OUT_SLOT + 1] = {0};
    bool over = false;
    for (int s = 0; s <= VK_OUT_SLOT; s++) {
        if (D->vals[s] < 0)
            continue;
        /* no valid run reaches past its value */
        vb[s] = lir->values[D->vals[s]].max_bytes ? lir->values[D->vals[s]].max_bytes : UINT64_MAX;
        uint64_t nd = need_of(D, w, s);
        over = over || (nd < vb[s] ? nd : vb[s]) > lim;
    }
    if (!over)
        return 1;
    split_axis ax[8];
    int nax = split_axes(D, w, ax);
    int64_t E[8];
    int32_t per[8];
    for (int a = 0; a < nax; a++) {
        E[a] = axis_extent(w, &ax[a]);
        per[a] = (int32_t)(E[a] > 0 ? E[a] : 1);
    }
    int32_t tmp[REC_WORDS];
    int8_t all[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int32_t zero[8] = {0};
    for (int iter = 0; iter < 64; iter++) {
        memcpy(tmp, w, sizeof tmp);
        cut_chunk(D, tmp, ax, all, per, zero, nax, NULL);
        int worst = -1;
        uint64_t wn = 0;
        for (int s = 0; s <= VK_OUT_SLOT; s++) {
            if (D->vals[s] < 0)
                continue;
            uint64_t nd = need_of(D, tmp, s);
            if (nd > vb[s])
                nd = vb[s];
            if (nd > lim && nd > wn) {
                wn = nd;
                worst = s;
            }
        }
        if (worst < 0)
            break;
        /* the axis of the worst operand with the largest stride still open */
        int best = -1;
        int64_t bst = -1;
        for (int a = 0; a < nax; a++) {
            int d = ax[a].dim[worst];
            if (d < 0 || per[a] <= 1 || w[DESC(worst) + 4 + d] == 1)
                continue;
            int64_t st = (int64_t)w[DESC(worst) + 10 + d] * ax[a].mul[worst];
            if (st > bst) {
                bst = st;
                best = a;
            }
        }
        if (best < 0) {
            char nm[160], b1[32], b2[32];
            value_name(lir, D->vals[worst], nm, sizeof nm);
            snprintf(why, cap,
                     "%s needs %s in one binding, more than the %s this device's bindings reach, "
                     "and %s",
                     nm, fmt_bytes(wn, b1, sizeof b1), fmt_bytes(shown, b2, sizeof b2),
                     nax ? "no split of this op brings it under that"
                         : "this op cannot be split into smaller dispatches");
            return 0;
        }
        /* the largest count per chunk that brings it under the limit */
        int32_t lo = 1, hi = per[best] - 1;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo + 1) / 2;
            int32_t keep = per[best];
            per[best] = mid;
            memcpy(tmp, w, sizeof tmp);
            cut_chunk(D, tmp, ax, all, per, zero, nax, NULL);
            uint64_t nd = need_of(D, tmp, worst);
            per[best] = keep;
            if (nd <= lim)
                lo = mid;
            else
                hi = mid - 1;
        }
        per[best] = lo;
    }
    int64_t chunks = 1;
    for (int a = 0; a < nax; a++)
        if (per[a] < E[a]) {
            if (D->n_ax == MAX_AXES) {
                snprintf(why, cap, "splitting it would need more than %d axes", MAX_AXES);
                return 0;
            }
            D->ax[D->n_ax] = (int8_t)a;
            D->per[D->n_ax] = per[a];
            D->n_ax++;
            chunks *= (E[a] + per[a] - 1) / per[a];
        }
    memcpy(tmp, w, sizeof tmp);
    cut_chunk(D, tmp, ax, all, per, zero, nax, NULL);
    for (int s = 0; s <= VK_OUT_SLOT; s++)
        if (D->vals[s] >= 0 && need_of(D, tmp, s) > lim && need_of(D, tmp, s) <= vb[s]) {
            char nm[160], b2[32];
            value_name(lir, D->vals[s], nm, sizeof nm);
            snprintf(why, cap, "%s cannot be cut into parts of at most %s", nm,
                     fmt_bytes(shown, b2, sizeof b2));
            return 0;
        }
    if (chunks > MAX_CHUNKS) {
        snprintf(why, cap, "it would take %lld dispatches", (long long)chunks);
        return 0;
    }
    return chunks;
}

/* Fill the records of instruction i's dispatches [j0, j1) from its filled
 * dispatches (c->rec), at this run's symbols. */
static void split_expand(vk_program *P, const fill_ctx *c, int32_t j0, int32_t j1)
{
    bool prepared[MAX_DISP] = {false};
    split_axis ax[MAX_DISP][8];
    for (int32_t j = j0; j < j1; j++) {
        vk_disp *D = &P->disp[j];
        int32_t *base = c->rec + (size_t)D->bi * REC_WORDS;
        int32_t *w = P->meta_map + (size_t)j * REC_WORDS;
        memset(D->coff, 0, sizeof D->coff);
        if (D->n_ax && !prepared[D->bi]) {
            split_axes(D, base, ax[D->bi]);
            prepared[D->bi] = true;
        }
        memcpy(w, base, REC_WORDS * sizeof *w);
        if (D->n_ax)
            cut_chunk(D, w, ax[D->bi], D->ax, D->per, D->ci, D->n_ax, D->coff);
    }
}

/* ---- programs ------------------------------------------------------------------ */

/* Rough work of instruction i at the symbols' bounds: output elements, times
 * the products per output of a conv (IC/G x KH x KW) or a matmul (K). */
static double instr_cost(const vk_program *P, int32_t i, const int64_t *sv)
{
    const rlx_lir_instr *ins = &P->instrs[i];
    if (P->kern[i] == VK_K_COUNT)
        return 0;
    vt o = vt_of(P, ins->out, sv);
    double n = (double)numel(&o);
    if ((P->kern[i] == VK_K_CONV || P->kern[i] == VK_K_CONV_GEMM) && ins->n_in >= 2) {
        vt w = vt_of(P, ins->in[1], sv);
        double per = 1;
        for (int d = 1; d < w.rank; d++)
            per *= (double)w.ne[d];
        if (ins->op == RLX_OP_CONV_TRANSPOSE2D) /* w [IC, OC/G, ...]: IC/G x KH x KW */
            per = per / (double)(w.ne[1] ? w.ne[1] : 1) * (double)w.ne[0] /
                  (double)(ins->p.conv.groups > 0 ? ins->p.conv.groups : 1);
        n *= per;
    } else if (P->kern[i] == VK_K_MATMUL && ins->n_in >= 1) {
        vt a = vt_of(P, ins->in[0], sv);
        n *= (double)a.ne[a.rank - (ins->p.matmul.trans_a ? 2 : 1)];
    }
    return n + 64; /* a dispatch's own cost */
}

/* A software device's parts of equal work (not of equal dispatch counts):
 * a vision model's first layers, at full resolution, hold most of its work
 * in a few dispatches, and a part of them alone ran past the hang timeout on
 * a busy machine (ISNet at 1024x1024 on lavapipe). False (nothing set) when
 * the costs cannot be summed. */
static bool seg_by_cost(vk_program *P)
{
    int64_t sv[RLX_MAX_SYMBOLS];
    for (int k = 0; k < RLX_MAX_SYMBOLS; k++)
        sv[k] = P->sym_max[k];
    double total = 0;
    for (int32_t i = 0; i < P->n_instrs; i++)
        total += instr_cost(P, i, sv);
    if (!(total > 0) || !isfinite(total))
        return false;
    double per = total / MAX_SEGS, acc = 0;
    P->n_segs = 0;
    P->seg_first[0] = 0;
    for (int32_t i = 0; i < P->n_instrs; i++) {
        acc += instr_cost(P, i, sv);
        if (acc >= per && P->n_segs < MAX_SEGS - 1 && i + 1 < P->n_instrs) {
            P->seg_first[++P->n_segs] = i + 1;
            acc = 0;
        }
    }
    P->seg_first[++P->n_segs] = P->n_instrs;
    return true;
}

void vk_program_free(rlx_program *prog)
{
    vk_program *P = (vk_program *)prog;
    if (!P)
        return;
    vk_device *d = P->dev;
    VkDevice dv = d->dev;
    /* a hung device may still be running this program's command buffers
     * (a software device's threads do): its Vulkan objects go with the
     * abandoned VkDevice */
    for (int k = 0; k < MAX_SEGS && !vk_is_lost(d); k++) {
        if (P->fences[k]) {
            vkWaitForFences(dv, 1, &P->fences[k], VK_TRUE, 5ull * 1000 * 1000 * 1000);
            vkDestroyFence(dv, P->fences[k], NULL);
        }
        if (P->cbs[k])
            vkFreeCommandBuffers(dv, d->cmd_pool, 1, &P->cbs[k]);
    }
    if (vk_is_lost(d))
        goto host;
    if (P->cb_whole)
        vkFreeCommandBuffers(dv, d->cmd_pool, 1, &P->cb_whole);
    if (P->qpool)
        vkDestroyQueryPool(dv, P->qpool, NULL);
    if (P->dpool)
        vkDestroyDescriptorPool(dv, P->dpool, NULL);
    VkBuffer bufs[4] = {P->meta, P->cbuf, P->dummy, P->meta_stage};
    VkDeviceMemory mems[4] = {P->meta_mem, P->cbuf_mem, P->dummy_mem, P->meta_stage_mem};
    for (int i = 0; i < 4; i++) {
        if (bufs[i])
            vkDestroyBuffer(dv, bufs[i], NULL);
        if (mems[i])
            vkFreeMemory(dv, mems[i], NULL);
    }
host:
    free(P->values);
    free(P->instrs);
    free(P->disp);
    free(P->bdisp);
    free(P->nbase);
    free(P->first);
    free(P->kern);
    free(P->loc);
    free(P->rem);
    free(P->ms);
    free(P->scratch_rec);
    free(P);
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

rlx_status vk_program_create(rlx_device *dev, const rlx_lir *lir, rlx_program **out,
                             rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!dev || !lir || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_create: missing argument");
    vk_device *d = (vk_device *)dev;
    if (vk_is_lost(d))
        return rlx_error_set(err, RLX_ERR_DEVICE, "the Vulkan device was lost; reopen it");
    rlx_status s = validate(lir, err);
    if (s != RLX_OK)
        return s;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        char why[160];
        if (vk_check(lir, &lir->instrs[i], why, sizeof why) < 0)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "the Vulkan backend cannot run instruction %d (%s, graph node "
                                 "%d): %s",
                                 i, rlx_op_name(lir->instrs[i].op), lir->instrs[i].node, why);
    }
    vk_program *P = calloc(1, sizeof *P);
    if (!P)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    P->base.iface = &rlx_vulkan_backend;
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
    P->loc = calloc(nv, sizeof *P->loc);
    P->rem = calloc(nv, sizeof *P->rem);
    P->ms = calloc(ni, sizeof *P->ms);
    P->scratch_rec = malloc((size_t)MAX_DISP * REC_WORDS * sizeof(int32_t));
    P->disp = calloc(ni * MAX_DISP, sizeof *P->disp);
    P->bdisp = calloc(ni * MAX_DISP, sizeof *P->bdisp);
    P->nbase = calloc(ni, sizeof *P->nbase);
    if (!P->values || !P->instrs || !P->first || !P->kern || !P->loc || !P->rem || !P->ms ||
        !P->scratch_rec || !P->disp || !P->bdisp || !P->nbase) {
        vk_program_free(&P->base);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a program");
    }
    if (lir->n_values)
        memcpy(P->values, lir->values, (size_t)lir->n_values * sizeof *P->values);
    if (lir->n_instrs)
        memcpy(P->instrs, lir->instrs, (size_t)lir->n_instrs * sizeof *P->instrs);
    for (int32_t i = 0; i < P->n_instrs; i++)
        P->kern[i] = (int8_t)vk_check(lir, &lir->instrs[i], why, sizeof why);

    /* the dispatches each instruction becomes (their count and bindings do
     * not depend on the symbols) */
    int64_t bounds[RLX_MAX_SYMBOLS] = {0};
    for (int i = 0; i < lir->n_symbols; i++)
        bounds[i] = lir->symbols[i].max;
    uint64_t align = d->props.limits.minStorageBufferOffsetAlignment;
    if (align < 4)
        align = 4;
    uint64_t lim = d->bind_limit > 2 * align ? d->bind_limit - align : align;
    size_t cap_disp = ni * MAX_DISP;
    for (int32_t i = 0; i < P->n_instrs; i++) {
        vk_disp *bd = P->bdisp + (size_t)i * MAX_DISP;
        fill_ctx c = {.P = P,
                      .sv = bounds,
                      .d = bd,
                      .rec = P->scratch_rec,
                      .why = why,
                      .why_cap = sizeof why};
        P->first[i] = P->n_disp;
        if (!fill_instr(&c, i)) {
            /* shapes that only fail at some symbol values are checked per run */
        }
        P->nbase[i] = (int8_t)c.n;
        for (int b = 0; b < c.n; b++) {
            bd[b].instr = i;
            bd[b].bi = (int8_t)b;
            char sw[256] = "";
            int64_t nc = split_plan(lir, &bd[b], P->scratch_rec + (size_t)b * REC_WORDS, lim,
                                    d->bind_limit, sw, sizeof sw);
            if (nc == 0) {
                s = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                  "the Vulkan backend cannot run instruction %d (%s, graph node "
                                  "%d): %s",
                                  i, rlx_op_name(lir->instrs[i].op), lir->instrs[i].node, sw);
                vk_program_free(&P->base);
                return s;
            }
            if ((size_t)(P->n_disp + nc) > cap_disp) {
                size_t nc2 = cap_disp * 2 + (size_t)nc;
                vk_disp *nd2 = realloc(P->disp, nc2 * sizeof *nd2);
                if (!nd2) {
                    vk_program_free(&P->base);
                    return rlx_error_set(err, RLX_ERR_NO_MEMORY,
                                         "out of memory creating a program");
                }
                memset(nd2 + cap_disp, 0, (nc2 - cap_disp) * sizeof *nd2);
                P->disp = nd2;
                cap_disp = nc2;
            }
            /* chunk indices in row-major order over the split axes */
            int64_t nch[MAX_AXES];
            for (int k = 0; k < bd[b].n_ax; k++) {
                int32_t tmpw[REC_WORDS];
                split_axis ax[8];
                memcpy(tmpw, P->scratch_rec + (size_t)b * REC_WORDS, sizeof tmpw);
                split_axes(&bd[b], tmpw, ax);
                int64_t E = axis_extent(tmpw, &ax[bd[b].ax[k]]);
                nch[k] = (E + bd[b].per[k] - 1) / bd[b].per[k];
            }
            for (int64_t q = 0; q < nc; q++) {
                vk_disp *D = &P->disp[P->n_disp++];
                *D = bd[b];
                int64_t r = q;
                for (int k = bd[b].n_ax - 1; k >= 0; k--) {
                    D->ci[k] = (int32_t)(r % nch[k]);
                    r /= nch[k];
                }
            }
        }
    }
    P->first[P->n_instrs] = P->n_disp;

    uint32_t nd = (uint32_t)(P->n_disp ? P->n_disp : 1);
    uint64_t meta_bytes = (uint64_t)nd * REC_WORDS * 4 + (uint64_t)nd * 16 + 16;
    P->meta_bytes = meta_bytes;
    P->flag_word = (int32_t)(meta_bytes / 4 - 4);
    const VkBufferUsageFlags mu =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
    const VkBufferUsageFlags tu =
        VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (d->staged_meta) {
        s = vk_make_buffer(d, meta_bytes, d->mt_device, mu | tu, &P->meta, &P->meta_mem, NULL, err);
        if (s == RLX_OK)
            s = vk_make_buffer(d, meta_bytes, d->mt_host, tu, &P->meta_stage, &P->meta_stage_mem,
                               (void **)&P->meta_map, err);
    } else {
        s = vk_make_buffer(d, meta_bytes, d->mt_host, mu, &P->meta, &P->meta_mem,
                           (void **)&P->meta_map, err);
    }
    if (s == RLX_OK)
        s = vk_make_buffer(d, 64, d->mt_device, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, &P->dummy,
                           &P->dummy_mem, NULL, err);
    if (s == RLX_OK && lir->const_bytes) {
        /* constants: uploaded once (through the staging path) */
        rlx_buffer *cb = NULL;
        s = rlx_vulkan_backend.buffer_from_host(dev, lir->const_data, lir->const_bytes, &cb, err);
        if (s == RLX_OK) {
            vk_buffer *vb = (vk_buffer *)cb;
            if (vb->map)
                vkUnmapMemory(d->dev, vb->mem);
            P->cbuf = vb->buf;
            P->cbuf_mem = vb->mem;
            P->cbuf_size = vb->alloc;
            d->allocated -= vb->alloc;
            free(vb);
        }
    }
    for (int32_t j = 0; j < P->n_disp && s == RLX_OK; j++) {
        P->disp[j].rec = (uint32_t)j * REC_WORDS;
        P->disp[j].ind = (uint64_t)nd * REC_WORDS * 4 + (uint64_t)j * 16;
        VkPipeline pl;
        s = vk_pipeline(d, P->disp[j].k, &pl, err);
    }
    if (s == RLX_OK && P->n_disp) {
        VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   .descriptorCount = nd * VK_SLOTS};
        VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                         .maxSets = nd,
                                         .poolSizeCount = 1,
                                         .pPoolSizes = &ps};
        s = vk_check_result(d, vkCreateDescriptorPool(d->dev, &pi, NULL, &P->dpool),
                            "creating a descriptor pool", err);
        for (int32_t j = 0; j < P->n_disp && s == RLX_OK; j++) {
            VkDescriptorSetAllocateInfo ai = {.sType =
                                                  VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                              .descriptorPool = P->dpool,
                                              .descriptorSetCount = 1,
                                              .pSetLayouts = &d->dsl};
            s = vk_check_result(d, vkAllocateDescriptorSets(d->dev, &ai, &P->disp[j].set),
                                "allocating descriptor sets", err);
        }
    }
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = d->cmd_pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    /* command buffers of whole instructions, SEG_DISP dispatches or more
     * each, so that a cancel reaches a long run between them */
    P->n_segs = 0;
    P->seg_first[0] = 0;
    {
        /* A software device runs each part on the CPU, where one part of a
         * large model can take minutes: there the parts are as small as
         * MAX_SEGS allows, so that Stop is felt soon and no single wait
         * comes near the hang timeout. */
        bool soft = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
        if (soft && seg_by_cost(P))
            goto segs_done;
        int32_t per_seg = P->n_disp / (soft ? MAX_SEGS : HW_SEGS) + 1;
        if (per_seg < (soft ? SOFT_SEG_DISP : SEG_DISP))
            per_seg = soft ? SOFT_SEG_DISP : SEG_DISP;
        int32_t from = 0;
        for (int32_t i = 0; i < P->n_instrs; i++)
            if (P->first[i + 1] - from >= per_seg && P->n_segs < MAX_SEGS - 1) {
                P->seg_first[++P->n_segs] = i + 1;
                from = P->first[i + 1];
            }
        if (P->seg_first[P->n_segs] < P->n_instrs || P->n_segs == 0)
            P->seg_first[++P->n_segs] = P->n_instrs;
    }
segs_done:
    /* signalled: program_free waits on every fence, and some are never
     * submitted (a run is reset before each submission) */
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO,
                             .flags = VK_FENCE_CREATE_SIGNALED_BIT};
    for (int k = 0; k < P->n_segs && s == RLX_OK; k++) {
        s = vk_check_result(d, vkAllocateCommandBuffers(d->dev, &cai, &P->cbs[k]),
                            "allocating a command buffer", err);
        if (s == RLX_OK)
            s = vk_check_result(d, vkCreateFence(d->dev, &fci, NULL, &P->fences[k]),
                                "creating a fence", err);
    }
    if (s == RLX_OK && P->n_segs > 1)
        s = vk_check_result(d, vkAllocateCommandBuffers(d->dev, &cai, &P->cb_whole),
                            "allocating a command buffer", err);
    if (s == RLX_OK && d->ts_bits && P->n_instrs) {
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                    .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                    .queryCount = 2 * (uint32_t)P->n_instrs};
        s = vk_check_result(d, vkCreateQueryPool(d->dev, &qi, NULL, &P->qpool),
                            "creating a timestamp query pool", err);
    }
    if (s != RLX_OK) {
        vk_program_free(&P->base);
        return s;
    }
    *out = &P->base;
    return RLX_OK;
}

/* Resolve where each value lives for these bindings. */
static rlx_status locate(vk_program *P, const rlx_program_bindings *b, rlx_error **err)
{
    const rlx_buffer_ref *refs[4] = {b->params, b->states, b->inputs, b->outputs};
    for (int32_t v = 0; v < P->n_values; v++) {
        const rlx_lir_value *val = &P->values[v];
        vloc *L = &P->loc[v];
        switch (val->home) {
        case RLX_HOME_ARENA:
            if (P->arena_bytes == 0) {
                L->buf = VK_NULL_HANDLE;
                L->abs = 0;
                L->size = 0;
                break;
            }
            if (!b->arena.buf || b->arena.buf->iface != &rlx_vulkan_backend ||
                b->arena.offset > b->arena.buf->size)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no Vulkan arena buffer bound");
            L->buf = ((vk_buffer *)b->arena.buf)->buf;
            L->serial = ((vk_buffer *)b->arena.buf)->serial;
            L->abs = b->arena.offset + val->offset;
            L->size = ((vk_buffer *)b->arena.buf)->alloc;
            break;
        case RLX_HOME_CONST:
            L->buf = P->cbuf;
            L->serial = 0;
            L->abs = val->offset;
            L->size = P->cbuf_size;
            break;
        default: {
            int h = val->home - RLX_HOME_PARAM;
            const rlx_buffer_ref *r = refs[h] ? &refs[h][val->index] : NULL;
            if (!r || !r->buf)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no buffer bound for %s %d",
                                     home_names[val->home], val->index);
            if (r->buf->iface != &rlx_vulkan_backend)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "the buffer bound for %s %d is not a Vulkan buffer",
                                     home_names[val->home], val->index);
            if (r->offset > r->buf->size)
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "the offset bound for %s %d is past its buffer",
                                     home_names[val->home], val->index);
            L->buf = ((vk_buffer *)r->buf)->buf;
            L->serial = ((vk_buffer *)r->buf)->serial;
            L->abs = r->offset + val->offset;
            L->size = ((vk_buffer *)r->buf)->alloc;
        }
        }
    }
    return RLX_OK;
}

/* Bytes an operand descriptor reaches past its offset (0 when empty). */
static uint64_t reach(const int32_t *q)
{
    rlx_dtype dt = (rlx_dtype)q[0];
    int rank = q[1];
    int64_t last = 0;
    for (int d = 0; d < rank; d++) {
        if (q[4 + d] == 0)
            return 0;
        last += (int64_t)(q[4 + d] - 1) * q[10 + d];
    }
    const rlx_dtype_info *ti = rlx_dtype_get(dt);
    if (ti->quantized)
        return (uint64_t)(last + 1 + ti->block_size - 1) / ti->block_size * ti->type_size;
    return (uint64_t)(last + 1) * (uint64_t)esize(dt);
}

static void record(vk_program *P)
{
    vk_device *d = P->dev;
    bool timing = P->timing && P->qpool;
    /* barriers only where a dispatch touches what an earlier one since the
     * last barrier wrote (or writes what one read) */
    typedef struct span {
        VkBuffer b;
        uint64_t lo, hi;
        bool w;
    } span;
    span *open = calloc((size_t)(P->n_disp ? P->n_disp : 1) * VK_SLOTS, sizeof *open);
    /* the whole run in one command buffer, and where a run has several
     * parts, those too (vk_program_run picks one) */
    int32_t n_parts = P->n_segs > 1 ? P->n_segs + 1 : 1;
    for (int32_t pt = 0; pt < n_parts; pt++) {
        int32_t sg = pt - 1;
        VkCommandBuffer cb = sg < 0 ? (P->n_segs > 1 ? P->cb_whole : P->cbs[0]) : P->cbs[sg];
        int32_t i0 = sg < 0 ? 0 : P->seg_first[sg];
        int32_t i1 = sg < 0 ? P->n_instrs : P->seg_first[sg + 1];
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        vkResetCommandBuffer(cb, 0);
        vkBeginCommandBuffer(cb, &bi);
        /* earlier submissions' writes (uploads, the previous run, the
         * previous command buffer of this run) */
        VkMemoryBarrier mb0 = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                               .dstAccessMask =
                                   VK_ACCESS_INDIRECT_COMMAND_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                                   VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                             VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT |
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                 VK_PIPELINE_STAGE_TRANSFER_BIT,
                             0, 1, &mb0, 0, NULL, 0, NULL);
        if (P->meta_stage && i0 == 0) { /* the run's records in */
            VkBufferCopy c = {.size = P->meta_bytes};
            vkCmdCopyBuffer(cb, P->meta_stage, P->meta, 1, &c);
            VkMemoryBarrier mc = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                  .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                                  .dstAccessMask = VK_ACCESS_INDIRECT_COMMAND_READ_BIT |
                                                   VK_ACCESS_SHADER_READ_BIT |
                                                   VK_ACCESS_SHADER_WRITE_BIT};
            vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT |
                                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 0, 1, &mc, 0, NULL, 0, NULL);
        }
        if (timing && i0 == 0)
            vkCmdResetQueryPool(cb, P->qpool, 0, 2 * (uint32_t)P->n_instrs);
        int n_open = 0;
        VkPipeline bound = VK_NULL_HANDLE;
        for (int32_t i = i0; i < i1; i++) {
            int32_t j0 = P->first[i], j1 = P->first[i + 1];
            if (timing)
                vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, P->qpool,
                                    2 * (uint32_t)i);
            for (int32_t j = j0; j < j1; j++) {
                vk_disp *D = &P->disp[j];
                bool hazard = false;
                for (int s = 0; s <= VK_OUT_SLOT && open; s++) {
                    if (D->vals[s] < 0 || !D->bbuf[s])
                        continue;
                    const rlx_lir_value *val = &P->values[D->vals[s]];
                    uint64_t lo = P->loc[D->vals[s]].abs,
                             hi = val->max_bytes ? lo + val->max_bytes : UINT64_MAX;
                    bool wr = s == VK_OUT_SLOT;
                    for (int q = 0; q < n_open && !hazard; q++)
                        if (open[q].b == D->bbuf[s] && open[q].lo < hi && lo < open[q].hi &&
                            (open[q].w || wr))
                            hazard = true;
                }
                if (hazard || !open) {
                    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT |
                                                           VK_ACCESS_SHADER_WRITE_BIT};
                    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL,
                                         0, NULL);
                    n_open = 0;
                }
                for (int s = 0; s <= VK_OUT_SLOT && open; s++) {
                    if (D->vals[s] < 0 || !D->bbuf[s])
                        continue;
                    const rlx_lir_value *val = &P->values[D->vals[s]];
                    uint64_t lo = P->loc[D->vals[s]].abs;
                    open[n_open++] =
                        (span){D->bbuf[s], lo, val->max_bytes ? lo + val->max_bytes : UINT64_MAX,
                               s == VK_OUT_SLOT};
                }
                if (d->pipes[D->k] != bound) {
                    bound = d->pipes[D->k];
                    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, bound);
                }
                vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1,
                                        &D->set, 0, NULL);
                vkCmdPushConstants(cb, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &D->rec);
                vkCmdDispatchIndirect(cb, P->meta, D->ind);
            }
            if (timing)
                vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, P->qpool,
                                    2 * (uint32_t)i + 1);
        }
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask =
                                  VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT};
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb,
                             0, NULL, 0, NULL);
        if (P->meta_stage && i1 == P->n_instrs) { /* the failure flag out */
            VkBufferCopy c = {.srcOffset = (uint64_t)P->flag_word * 4,
                              .dstOffset = (uint64_t)P->flag_word * 4,
                              .size = 4};
            vkCmdCopyBuffer(cb, P->meta, P->meta_stage, 1, &c);
            VkMemoryBarrier mh = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                  .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                                  .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
            vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                                 1, &mh, 0, NULL, 0, NULL);
        }
        vkEndCommandBuffer(cb);
    }
    free(open);
    P->recorded = true;
    P->rec_timing = timing;
    P->n_recordings++;
}

rlx_status vk_program_run(rlx_program *prog, const rlx_program_bindings *b,
                          const rlx_sym_values *syms, rlx_error **err)
{
    vk_program *P = (vk_program *)prog;
    if (!P || !b)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_run: missing argument");
    vk_device *d = P->dev;
    if (vk_is_lost(d))
        return rlx_error_set(err, RLX_ERR_DEVICE, "the Vulkan device was lost; reopen it");
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
    rlx_status st = locate(P, b, err);
    if (st != RLX_OK)
        return st;
    if (P->n_disp == 0) {
        P->n_runs++;
        return RLX_OK;
    }

    /* this run's records: each instruction's dispatches filled at its
     * symbols, then cut into the chunks planned at program_create */
    for (int32_t i = 0; i < P->n_instrs; i++) {
        int32_t j0 = P->first[i], n = P->first[i + 1] - j0;
        if (n == 0)
            continue;
        char why[160] = "";
        vk_disp tmp[MAX_DISP];
        fill_ctx c = {.P = P,
                      .sv = sv,
                      .d = tmp,
                      .rec = P->scratch_rec,
                      .fixed = P->bdisp + (size_t)i * MAX_DISP,
                      .why = why,
                      .why_cap = sizeof why};
        if (!fill_instr(&c, i) || c.n != P->nbase[i])
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "instruction %d (%s, graph node %d): %s",
                                 i, rlx_op_name(P->instrs[i].op), P->instrs[i].node,
                                 why[0] ? why : "its dispatches changed shape");
        split_expand(P, &c, j0, j0 + n);
    }

    /* bind: a window starts at the aligned start of its value (of a chunk's
     * part of it); what is left over goes into the records */
    uint64_t align = d->props.limits.minStorageBufferOffsetAlignment;
    if (align < 4)
        align = 4;
    uint64_t max_range = d->bind_limit;
    bool rebind = !P->recorded || P->rec_timing != (P->timing && P->qpool);
    for (int32_t j = 0; j < P->n_disp; j++) {
        vk_disp *D = &P->disp[j];
        for (int s = 0; s < VK_SLOTS; s++) {
            VkBuffer buf = P->dummy;
            uint64_t serial = 0, off = 0, range = 64;
            if (s == 7) {
                buf = P->meta;
                range = VK_WHOLE_SIZE;
            } else if (D->vals[s] >= 0 && P->loc[D->vals[s]].buf) {
                const vloc *L = &P->loc[D->vals[s]];
                buf = L->buf;
                serial = L->serial;
                off = (L->abs + D->coff[s]) / align * align;
                if (off >= L->size)
                    off = L->abs / align * align;
                range = L->size - off;
                if (range > max_range)
                    range = max_range / 4 * 4;
            }
            if (D->bbuf[s] != buf || D->bser[s] != serial || D->boff[s] != off ||
                D->brange[s] != range) {
                D->bbuf[s] = buf;
                D->bser[s] = serial;
                D->boff[s] = off;
                D->brange[s] = range;
                rebind = true;
            }
        }
    }
    if (rebind) {
        VkDescriptorBufferInfo bi[VK_SLOTS];
        VkWriteDescriptorSet wr[VK_SLOTS];
        for (int32_t j = 0; j < P->n_disp; j++) {
            vk_disp *D = &P->disp[j];
            for (int s = 0; s < VK_SLOTS; s++) {
                bi[s] = (VkDescriptorBufferInfo){D->bbuf[s], D->boff[s], D->brange[s]};
                wr[s] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                               .dstSet = D->set,
                                               .dstBinding = (uint32_t)s,
                                               .descriptorCount = 1,
                                               .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                               .pBufferInfo = &bi[s]};
            }
            vkUpdateDescriptorSets(d->dev, VK_SLOTS, wr, 0, NULL);
        }
    }

    /* offsets within the windows, and group counts */
    for (int32_t j = 0; j < P->n_disp; j++) {
        vk_disp *D = &P->disp[j];
        int32_t i = D->instr;
        int32_t *w = P->meta_map + (size_t)j * REC_WORDS;
        for (int s = 0; s <= VK_OUT_SLOT; s++) {
            if (D->vals[s] < 0)
                continue;
            int32_t *q = w + DESC(s);
            const vloc *L = &P->loc[D->vals[s]];
            int64_t off = (int64_t)(L->abs - D->boff[s]) + off64(q);
            uint64_t need = reach(q), full = need_of(D, w, s) - (need ? (uint64_t)off64(q) : 0);
            if (need && (!L->buf || off < 0 || (uint64_t)off + full > D->brange[s]))
                return rlx_error_set(
                    err, RLX_ERR_INVALID_ARG,
                    "instruction %d (%s): value %d needs %llu bytes at offset %lld of its %s "
                    "buffer window, which holds %llu",
                    i, rlx_op_name(P->instrs[i].op), D->vals[s], (unsigned long long)full,
                    (long long)off, home_names[P->values[D->vals[s]].home],
                    (unsigned long long)D->brange[s]);
            if (need && (off > UINT32_MAX || (q[0] == RLX_DTYPE_F32 && off % 4) ||
                         ((q[0] == RLX_DTYPE_F16 || q[0] == RLX_DTYPE_BF16) && off % 2)))
                return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                     "instruction %d (%s): value %d is misaligned or beyond 4 "
                                     "GiB into its buffer",
                                     i, rlx_op_name(P->instrs[i].op), D->vals[s]);
            set_off64(q, off);
        }
        w[12] = P->flag_word;
        uint64_t items = (uint64_t)(uint32_t)w[0];
        uint64_t groups = D->per_group ? items : (items + VK_LS - 1) / VK_LS;
        uint32_t gx = (uint32_t)(groups < MAX_GROUPS ? groups : MAX_GROUPS);
        uint32_t gy = gx ? (uint32_t)((groups + gx - 1) / gx) : 1;
        if (gy > MAX_GROUPS)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "instruction %d (%s) is too large for one dispatch", i,
                                 rlx_op_name(P->instrs[i].op));
        uint32_t *g = (uint32_t *)((uint8_t *)P->meta_map + D->ind);
        g[0] = gx;
        g[1] = gy;
        g[2] = 1;
    }
    if (rebind || !P->recorded)
        record(P);
    P->meta_map[P->flag_word] = 0;

    /* On a software device, or after a run of SEG_RUN_S or more: the run's
     * parts, one ahead of the one running, so that a cancel stops it between
     * them (what was submitted drains first) and each wait is shorter than
     * the hang timeout. Otherwise the whole run in one command buffer,
     * which spares a short run on a GPU a wake-up per part. */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t next = 0, done = 0;
    bool cancelled = false;
    bool soft = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    if (P->n_segs > 1 && !soft && P->last_run_s < SEG_RUN_S && !P->test_stop_flag) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &P->cb_whole};
        vkResetFences(d->dev, 1, &P->fences[0]);
        st = vk_check_result(d, vk_submit(d, &si, P->fences[0]), "submitting a program", err);
        if (st == RLX_OK)
            st = vk_wait_fence(d, P->fences[0], b->cancel, err);
        done = P->n_segs;
    }
    while (done < P->n_segs) {
        while (st == RLX_OK && !cancelled && next < P->n_segs && next - done < 2) {
            if (next > 0 && next == P->test_stop_seg && P->test_stop_flag)
                *P->test_stop_flag = 1;
            if (next > 0 && b->cancel && __atomic_load_n(b->cancel, __ATOMIC_RELAXED)) {
                cancelled = true;
                break;
            }
            VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                               .commandBufferCount = 1,
                               .pCommandBuffers = &P->cbs[next]};
            vkResetFences(d->dev, 1, &P->fences[next]);
            st =
                vk_check_result(d, vk_submit(d, &si, P->fences[next]), "submitting a program", err);
            if (st == RLX_OK)
                next++;
        }
        if (done == next)
            break;
        rlx_status ws = vk_wait_fence(d, P->fences[done], b->cancel, st == RLX_OK ? err : NULL);
        done++;
        if (ws != RLX_OK) {
            if (st == RLX_OK)
                st = ws;
            break;
        }
    }
    if (st != RLX_OK)
        return st;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    P->last_run_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (cancelled)
        return rlx_error_set(err, RLX_ERR_CANCELLED, "cancelled");
    P->have_times = false;
    if (P->rec_timing) {
        uint64_t *ts = calloc((size_t)P->n_instrs * 2, sizeof *ts);
        if (ts && vkGetQueryPoolResults(d->dev, P->qpool, 0, 2 * (uint32_t)P->n_instrs,
                                        (size_t)P->n_instrs * 2 * sizeof *ts, ts, sizeof *ts,
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) ==
                      VK_SUCCESS) {
            double per = (double)d->props.limits.timestampPeriod * 1e-6;
            for (int32_t i = 0; i < P->n_instrs; i++)
                P->ms[i] =
                    ts[2 * i + 1] >= ts[2 * i] ? (double)(ts[2 * i + 1] - ts[2 * i]) * per : 0.0;
            P->have_times = true;
        }
        free(ts);
    }
    /* shaders flag run-time failures (a token id outside the table): in
     * the program's flag, and which dispatch in its record's word 15 */
    if (P->meta_map[P->flag_word] && P->meta_stage) {
        st = vk_copy_now(d, P->meta, 0, P->meta_stage, 0, (uint64_t)P->flag_word * 4, err);
        if (st != RLX_OK)
            return st;
    }
    for (int32_t j = 0; j < P->n_disp && P->meta_map[P->flag_word]; j++)
        if (P->meta_map[(size_t)j * REC_WORDS + 15]) {
            int32_t i = P->disp[j].instr;
            return rlx_error_set(
                err, RLX_ERR_INVALID_ARG, "instruction %d (%s, graph node %d) failed: %s", i,
                rlx_op_name(P->instrs[i].op), P->instrs[i].node,
                P->instrs[i].op == RLX_OP_GATHER ? "a token id is out of the table's range"
                                                 : "invalid values for this run");
        }
    P->n_runs++;
    return RLX_OK;
}

int32_t vk_test_segments(const rlx_program *prog)
{
    return prog ? ((const vk_program *)prog)->n_segs : 0;
}

void vk_test_stop_at(rlx_program *prog, int32_t seg, volatile int *flag)
{
    vk_program *P = (vk_program *)prog;
    if (P) {
        P->test_stop_seg = seg;
        P->test_stop_flag = flag;
    }
}

void vk_program_stats(const rlx_program *prog, rlx_program_stats *out)
{
    const vk_program *P = (const vk_program *)prog;
    if (!out)
        return;
    *out = (rlx_program_stats){0};
    if (P) {
        out->runs = P->n_runs;
        out->recordings = P->n_recordings;
        int32_t nb = 0;
        for (int32_t i = 0; i < P->n_instrs; i++)
            nb += P->nbase[i];
        out->split_dispatches = (uint64_t)(P->n_disp - nb);
    }
}

void vk_program_set_timing(rlx_program *prog, bool enabled)
{
    vk_program *P = (vk_program *)prog;
    if (!P)
        return;
    P->timing = enabled;
    if (enabled)
        memset(P->ms, 0, (size_t)(P->n_instrs ? P->n_instrs : 1) * sizeof *P->ms);
}

rlx_status vk_program_timings(rlx_program *prog, double *ms, int32_t n, rlx_error **err)
{
    vk_program *P = (vk_program *)prog;
    if (!P)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "program_timings: missing argument");
    if (P->timing && !P->qpool)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "this Vulkan device's compute queue has no timestamps");
    return rlx_backend_copy_timings(P->timing, P->ms, P->n_instrs, ms, n, err);
}
