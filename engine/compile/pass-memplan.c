/* memplan: arena offsets for the scheduled program.
 *
 * Values that share storage form one class (a view with its source, an
 * in-place output with the input it overwrites); a class lives from the
 * first instruction that writes it to the last one that reads any member.
 * Classes are placed largest first, each at the lowest offset free for its
 * lifetime, into one arena; the peak is the program's arena size. Everything is sized at the
 * symbols' upper bounds, so one plan serves every run. */
#include "engine/compile/passes.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64u

static int32_t find(int32_t *root, int32_t v)
{
    while (root[v] != v) {
        root[v] = root[root[v]];
        v = root[v];
    }
    return v;
}

static bool commutative(rlx_op op)
{
    return op == RLX_OP_ADD || op == RLX_OP_MUL || op == RLX_OP_MAX || op == RLX_OP_MIN;
}

typedef struct slot {
    uint64_t off, size;
    int32_t last;
} slot;

static int cmp_slot(const void *a, const void *b)
{
    const slot *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Can instruction i write its output over input value x? */
static bool can_overwrite(const rlx_lir *lir, int32_t *root, const int32_t *last, int32_t i,
                          int32_t x)
{
    const rlx_lir_instr *ins = &lir->instrs[i];
    const rlx_lir_value *o = &lir->values[ins->out], *v = &lir->values[x];
    int32_t r = find(root, x);
    if (v->home != RLX_HOME_ARENA || v->view_of >= 0 || !v->contiguous)
        return false;
    if (v->dtype != o->dtype || !rlx_shape_equal(&v->shape, &o->shape))
        return false;
    /* nothing sharing x's storage is read after this instruction */
    if (last[r] != i)
        return false;
    for (int k = 0; k < ins->n_in; k++)
        if (ins->in[k] != x && find(root, ins->in[k]) == r)
            return false;
    return true;
}

/* Bytes of a contiguous value of static shape and plain dtype, or 0. */
static uint64_t static_bytes(const rlx_lir_value *v)
{
    const rlx_dtype_info *ti = rlx_dtype_get(v->dtype);
    if (!ti || ti->block_size != 1 || !v->contiguous)
        return 0;
    uint64_t n = ti->type_size;
    for (int d = 0; d < v->shape.rank; d++) {
        if (!rlx_dim_is_const(v->shape.d[d]) || v->shape.d[d].k < 0)
            return 0;
        n *= (uint64_t)v->shape.d[d].k;
    }
    return n;
}

/* Concatenations without a copy: where each input of a CONCAT is a whole,
 * contiguous part of its output (every dim before the axis is 1: U-Nets'
 * channel concatenations of one image), the inputs' classes become parts of
 * the output's class at their offsets, their producers write straight into
 * the output, and the instruction is dropped. Only where that cannot change
 * a result: an input's class is written only before the concatenation and
 * the output only by it; no input class appears twice; static shapes. This
 * runs before the in-place pass, which then sees the joined lifetimes. The
 * classes' extents are the offsets plus sizes, so placement needs nothing
 * more. */
static void join_concats(rlx_lir *lir, int32_t *root, int32_t *first, int32_t *last, int32_t *lastw,
                         int32_t *nwrite, bool *drop)
{
    int32_t n = lir->n_values;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if (ins->op != RLX_OP_CONCAT || ins->n_in < 1)
            continue;
        const rlx_lir_value *o = &lir->values[ins->out];
        int32_t ro = find(root, ins->out);
        int axis = ins->p.concat.axis;
        uint64_t ob = static_bytes(o);
        if (o->home != RLX_HOME_ARENA || !ob || nwrite[ro] != 1 || axis < 0 ||
            axis >= o->shape.rank)
            continue;
        bool ok = true;
        for (int d = 0; d < axis; d++)
            ok = ok && o->shape.d[d].k == 1;
        uint64_t sum = 0;
        for (int k = 0; ok && k < ins->n_in; k++) {
            int32_t x = ins->in[k], rx = find(root, x);
            const rlx_lir_value *v = &lir->values[x];
            uint64_t b = static_bytes(v);
            ok = v->home == RLX_HOME_ARENA && b && v->dtype == o->dtype && v->offset == 0 &&
                 rx != ro && lastw[rx] < i;
            /* nothing of its class lies past its own bytes */
            for (int32_t u = 0; ok && u < n; u++)
                if (lir->values[u].home == RLX_HOME_ARENA && find(root, u) == rx)
                    ok = lir->values[u].offset + lir->values[u].max_bytes <= b;
            for (int j = 0; ok && j < k; j++)
                ok = find(root, ins->in[j]) != rx;
            sum += b;
        }
        if (!ok || sum != ob)
            continue;
        uint64_t at = o->offset;
        for (int k = 0; k < ins->n_in; k++) {
            int32_t x = ins->in[k], rx = find(root, x);
            uint64_t b = static_bytes(&lir->values[x]);
            for (int32_t u = 0; u < n; u++)
                if (lir->values[u].home == RLX_HOME_ARENA && find(root, u) == rx)
                    lir->values[u].offset += at;
            root[rx] = ro;
            first[ro] = first[rx] < first[ro] ? first[rx] : first[ro];
            last[ro] = last[rx] > last[ro] ? last[rx] : last[ro];
            at += b;
        }
        drop[i] = true;
    }
}

rlx_status rlx_memplan(rlx_lir *lir, bool allow_inplace, bool spaced, rlx_error **err)
{
    int32_t n = lir->n_values;
    rlx_status st = RLX_OK;
    int32_t *root = malloc(sizeof *root * (size_t)(n + 1));
    int32_t *first = malloc(sizeof *first * (size_t)(n + 1));
    int32_t *last = malloc(sizeof *last * (size_t)(n + 1));
    uint64_t *extent = calloc((size_t)n + 1, sizeof *extent);
    uint64_t *base = calloc((size_t)n + 1, sizeof *base);
    slot *act = malloc(sizeof *act * (size_t)(n + 1));
    int32_t *order = malloc(sizeof *order * (size_t)(n + 1));
    int32_t *lastw = malloc(sizeof *lastw * (size_t)(n + 1));
    int32_t *nwrite = calloc((size_t)n + 1, sizeof *nwrite);
    bool *drop = calloc((size_t)lir->n_instrs + 1, sizeof *drop);
    if (!root || !first || !last || !extent || !base || !act || !order || !lastw || !nwrite ||
        !drop) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "memory plan: out of memory");
        goto out;
    }
    for (int32_t v = 0; v < n; v++) {
        root[v] = v;
        first[v] = INT32_MAX;
        last[v] = -1;
        lastw[v] = -1;
    }
    for (int32_t v = 0; v < n; v++)
        if (lir->values[v].view_of >= 0)
            root[v] = find(root, lir->values[v].view_of);
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if (ins->in_place && ins->n_in > 0 && lir->values[ins->out].home == RLX_HOME_ARENA)
            root[ins->out] = find(root, ins->in[0]);
    }
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        for (int k = 0; k < ins->n_in; k++) {
            int32_t r = find(root, ins->in[k]);
            if (last[r] < i)
                last[r] = i;
        }
        int32_t r = find(root, ins->out);
        if (first[r] > i)
            first[r] = i;
        if (last[r] < i)
            last[r] = i;
    }
    if (allow_inplace) {
        /* the last instruction writing each class, and how many write it */
        for (int32_t i = 0; i < lir->n_instrs; i++) {
            int32_t r = find(root, lir->instrs[i].out);
            lastw[r] = i;
            nwrite[r]++;
        }
        join_concats(lir, root, first, last, lastw, nwrite, drop);
        for (int32_t i = 0; i < lir->n_instrs; i++) {
            rlx_lir_instr *ins = &lir->instrs[i];
            if (drop[i])
                continue;
            const rlx_lir_value *o = &lir->values[ins->out];
            if (!rlx_op_get_info(ins->op)->elementwise || ins->in_place || ins->n_in < 1 ||
                o->home != RLX_HOME_ARENA || o->view_of >= 0 || find(root, ins->out) != ins->out ||
                !o->contiguous)
                continue;
            int c = -1;
            if (can_overwrite(lir, root, last, i, ins->in[0]))
                c = 0;
            else if (ins->n_in == 2 && commutative(ins->op) &&
                     can_overwrite(lir, root, last, i, ins->in[1]))
                c = 1;
            if (c < 0)
                continue;
            if (c == 1) {
                int32_t t = ins->in[0];
                ins->in[0] = ins->in[1];
                ins->in[1] = t;
            }
            int32_t r = find(root, ins->in[0]);
            ins->in_place = true;
            root[ins->out] = r;
            if (last[r] < last[ins->out])
                last[r] = last[ins->out];
        }
    }
    /* extent of each class, relative to its root's start */
    for (int32_t v = 0; v < n; v++) {
        const rlx_lir_value *val = &lir->values[v];
        if (val->home != RLX_HOME_ARENA)
            continue;
        int32_t r = find(root, v);
        uint64_t end = val->offset + val->max_bytes;
        if (extent[r] < end)
            extent[r] = end;
    }
    int32_t n_order = 0;
    for (int32_t v = 0; v < n; v++)
        if (lir->values[v].home == RLX_HOME_ARENA && find(root, v) == v && first[v] != INT32_MAX)
            order[n_order++] = v;
    /* Greedy by size: the largest classes are placed first, each at the
     * lowest offset that does not overlap a placed class alive at the same
     * time. This packs better than first-fit in birth order when a large
     * buffer follows a run of smaller ones. */
    for (int32_t a = 1; a < n_order; a++) {
        int32_t t = order[a], b = a - 1;
        while (b >= 0 && (extent[order[b]] < extent[t] ||
                          (extent[order[b]] == extent[t] && first[order[b]] > first[t]))) {
            order[b + 1] = order[b];
            b--;
        }
        order[b + 1] = t;
    }
    /* spaced: a class stays taken up to the next instruction that is not
     * a view (views launch nothing, so a view between the last reader and
     * the next writer does not keep them apart) */
    if (spaced)
        for (int32_t v = 0; v < n; v++) {
            if (last[v] < 0)
                continue;
            int32_t j = last[v] + 1;
            while (j < lir->n_instrs && lir->values[lir->instrs[j].out].view_of >= 0)
                j++;
            last[v] = j;
        }
    uint64_t peak = 0;
    for (int32_t a = 0; a < n_order; a++) {
        int32_t v = order[a];
        uint64_t size = (extent[v] + ALIGN - 1) / ALIGN * ALIGN;
        int32_t n_act = 0;
        for (int32_t j = 0; j < a; j++) {
            int32_t u = order[j];
            if (first[u] <= last[v] && first[v] <= last[u])
                act[n_act++] = (slot){base[u], (extent[u] + ALIGN - 1) / ALIGN * ALIGN, last[u]};
        }
        qsort(act, (size_t)n_act, sizeof *act, cmp_slot);
        uint64_t off = 0;
        for (int32_t j = 0; j < n_act; j++) {
            if (act[j].off >= off + size)
                break;
            if (act[j].off + act[j].size > off)
                off = act[j].off + act[j].size;
        }
        base[v] = off;
        if (off + size > peak)
            peak = off + size;
    }
    for (int32_t v = 0; v < n; v++) {
        rlx_lir_value *val = &lir->values[v];
        if (val->home == RLX_HOME_ARENA)
            val->offset += base[find(root, v)];
    }
    lir->arena_bytes = peak;
    /* the joined concatenations have nothing left to do */
    int32_t kept = 0;
    for (int32_t i = 0; i < lir->n_instrs; i++)
        if (!drop[i])
            lir->instrs[kept++] = lir->instrs[i];
    lir->n_instrs = kept;
out:
    free(root);
    free(first);
    free(last);
    free(extent);
    free(base);
    free(act);
    free(order);
    free(lastw);
    free(nwrite);
    free(drop);
    return st;
}
