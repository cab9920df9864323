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

rlx_status rlx_memplan(rlx_lir *lir, bool allow_inplace, rlx_error **err)
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
    if (!root || !first || !last || !extent || !base || !act || !order) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "memory plan: out of memory");
        goto out;
    }
    for (int32_t v = 0; v < n; v++) {
        root[v] = v;
        first[v] = INT32_MAX;
        last[v] = -1;
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
        for (int32_t i = 0; i < lir->n_instrs; i++) {
            rlx_lir_instr *ins = &lir->instrs[i];
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
out:
    free(root);
    free(first);
    free(last);
    free(extent);
    free(base);
    free(act);
    free(order);
    return st;
}
