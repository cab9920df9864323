/* memplan: no two values alive at the same time overlap in the arena unless
 * they share storage on purpose (a view and its source, an in-place output
 * and the input it overwrites); peaks are what the plan says. */
#include "pass-test.h"

/* Storage class of a value, re-derived here independently of memplan. */
static int32_t cls(const rlx_lir *lir, int32_t v)
{
    for (;;) {
        if (lir->values[v].view_of >= 0) {
            v = lir->values[v].view_of;
            continue;
        }
        int32_t up = -1;
        for (int32_t i = 0; i < lir->n_instrs; i++)
            if (lir->instrs[i].out == v && lir->instrs[i].in_place)
                up = lir->instrs[i].in[0];
        if (up < 0)
            return v;
        v = up;
    }
}

/* Checks the plan; returns how many pairs of values of different classes
 * share bytes with one's last reader right before the other's first
 * writer. With gap 1 such neighbours count as alive together. */
static int check_plan_gap(const rlx_lir *lir, int gap)
{
    int neighbours = 0;
    int32_t n = lir->n_values;
    int32_t *c = malloc(sizeof *c * (size_t)n), *first = malloc(sizeof *c * (size_t)n),
            *last = malloc(sizeof *c * (size_t)n);
    for (int32_t v = 0; v < n; v++) {
        c[v] = cls(lir, v);
        first[v] = INT32_MAX;
        last[v] = -1;
    }
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        for (int k = 0; k <= ins->n_in; k++) {
            int32_t r = c[k < ins->n_in ? ins->in[k] : ins->out];
            if (first[r] > i)
                first[r] = i;
            if (last[r] < i)
                last[r] = i;
        }
    }
    for (int32_t a = 0; a < n; a++) {
        const rlx_lir_value *va = &lir->values[a];
        if (va->home != RLX_HOME_ARENA)
            continue;
        assert_true(va->offset + va->max_bytes <= lir->arena_bytes);
        for (int32_t b = a + 1; b < n; b++) {
            const rlx_lir_value *vb = &lir->values[b];
            if (vb->home != RLX_HOME_ARENA || c[a] == c[b])
                continue;
            int32_t ra = c[a], rb = c[b];
            bool live_together = first[ra] <= last[rb] + gap && first[rb] <= last[ra] + gap;
            bool bytes_overlap =
                va->offset < vb->offset + vb->max_bytes && vb->offset < va->offset + va->max_bytes;
            if (bytes_overlap && (last[ra] + 1 == first[rb] || last[rb] + 1 == first[ra]))
                neighbours++;
            if (live_together && bytes_overlap)
                fprintf(stderr, "v%d and v%d overlap while both alive\n", a, b);
            assert_false(live_together && bytes_overlap);
        }
    }
    free(c);
    free(first);
    free(last);
    return neighbours;
}

static void check_plan(const rlx_lir *lir)
{
    (void)check_plan_gap(lir, 0);
}

static rlx_graph *tower(int layers)
{
    /* a residual stack with branches of different sizes */
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 32);
    rlx_dim S = rlx_dim_sym(seq);
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32,
                                 rlx_shape_make_dims(2, (rlx_dim[]){S, rlx_dim_const(16)}));
    for (int l = 0; l < layers; l++) {
        char nm[32];
        snprintf(nm, sizeof nm, "w%d", l);
        rlx_node w = rlx_graph_param(g, nm, RLX_DTYPE_F32, pt_c2(64, 16));
        snprintf(nm, sizeof nm, "v%d", l);
        rlx_node v = rlx_graph_param(g, nm, RLX_DTYPE_F32, pt_c2(16, 64));
        rlx_node h = rlx_graph_rms_norm(g, NULL, x, RLX_NODE_INVALID, 1e-6f);
        rlx_node up =
            rlx_graph_gelu(g, NULL, rlx_graph_matmul(g, NULL, h, w, false, true), RLX_GELU_TANH);
        rlx_node r = rlx_graph_reshape(
            g, NULL, up,
            rlx_shape_make_dims(3, (rlx_dim[]){S, rlx_dim_const(4), rlx_dim_const(16)}));
        rlx_node t = rlx_graph_transpose(g, NULL, r, 0, 1);
        rlx_node sm = rlx_graph_softmax(g, NULL, t, RLX_NODE_INVALID, 1.0f);
        rlx_node back =
            rlx_graph_reshape(g, NULL, rlx_graph_transpose(g, NULL, sm, 0, 1),
                              rlx_shape_make_dims(2, (rlx_dim[]){S, rlx_dim_const(64)}));
        x = rlx_graph_add(g, NULL, x, rlx_graph_matmul(g, NULL, back, v, false, true));
    }
    rlx_graph_output(g, "y", x);
    return g;
}

static void test_invariant(void **state)
{
    (void)state;
    rlx_graph *g = tower(6);
    assert_null(rlx_graph_error(g));
    uint32_t variants[] = {RLX_PASS_ALL, RLX_PASS_REQUIRED, RLX_PASS_REQUIRED | RLX_PASS_INPLACE,
                           RLX_PASS_ALL & ~RLX_PASS_INPLACE};
    for (int i = 0; i < 4; i++) {
        rlx_compile_opts o = rlx_compile_default_opts();
        o.passes = variants[i];
        rlx_lir *lir = NULL;
        assert_int_equal(rlx_compile(g, &o, &lir, NULL), RLX_OK);
        check_plan(lir);
        /* at most a handful of [SEQ, 64] buffers live at once, not one per layer */
        assert_true(lir->arena_bytes <= 4 * 32 * 64 * 4);
        rlx_lir_free(lir);
    }
    rlx_graph_free(g);
}

/* A backend that asks for spaced reuse (CUDA, which runs neighbouring
 * instructions that touch disjoint bytes as one launch) gets a plan where a
 * buffer's last reader and its next writer are never neighbours; the same
 * graph planned for others has such pairs (so the check can fail). */
static void test_spaced_reuse(void **state)
{
    (void)state;
    rlx_graph *g = tower(6);
    rlx_backend_i spaced = {.name = "spaced", .spaced_reuse = true};
    int pairs[2];
    uint64_t bytes[2];
    for (int k = 0; k < 2; k++) {
        rlx_compile_opts o = rlx_compile_default_opts();
        o.backend = k ? &spaced : NULL;
        rlx_lir *lir = NULL;
        assert_int_equal(rlx_compile(g, &o, &lir, NULL), RLX_OK);
        pairs[k] = check_plan_gap(lir, k);
        bytes[k] = lir->arena_bytes;
        rlx_lir_free(lir);
    }
    assert_true(pairs[0] > 0);
    assert_int_equal(pairs[1], 0);
    /* it costs buffers, not a buffer a layer */
    assert_true(bytes[1] <= 2 * bytes[0]);
    rlx_graph_free(g);
}

static void test_views_share(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(8, 8));
    rlx_node a = rlx_graph_exp(g, "a", x);
    rlx_node r = rlx_graph_reshape(g, "r", a, pt_c1(64));
    rlx_node s = rlx_graph_slice(g, "s", r, 0, rlx_dim_const(16), rlx_dim_const(8));
    rlx_node b = rlx_graph_neg(g, "b", s);
    rlx_node c = rlx_graph_add(g, "c", b,
                               rlx_graph_slice(g, "s2", r, 0, rlx_dim_const(0), rlx_dim_const(8)));
    rlx_graph_output(g, "c", c);
    rlx_compile_opts o = rlx_compile_default_opts();
    o.passes = RLX_PASS_REQUIRED | RLX_PASS_INPLACE;
    rlx_lir *lir = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, NULL), RLX_OK);
    check_plan(lir);
    int32_t va = -1, vr = -1, vs = -1, vb = -1;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if (ins->op == RLX_OP_EXP)
            va = ins->out;
        if (ins->op == RLX_OP_RESHAPE)
            vr = ins->out;
        if (ins->op == RLX_OP_SLICE && vs < 0)
            vs = ins->out;
        if (ins->op == RLX_OP_NEG) {
            vb = ins->out;
            /* the input is a view that other values still need: not in place */
            assert_false(ins->in_place);
        }
    }
    assert_int_equal(lir->values[vr].view_of, va);
    assert_int_equal(lir->values[vr].offset, lir->values[va].offset);
    assert_int_equal(lir->values[vs].offset, lir->values[va].offset + 16 * 4);
    /* b must not land inside a's buffer while a's second slice is pending */
    assert_true(lir->values[vb].offset >= lir->values[va].offset + 256 ||
                lir->values[vb].offset + 32 <= lir->values[va].offset);
    rlx_lir_free(lir);
    rlx_graph_free(g);
}

static void test_run_tower(void **state)
{
    (void)state;
    if (!rlx_test_have_cpu())
        skip();
    /* the tightest plan still computes what the loosest one does */
    rlx_graph *g = tower(3);
    static float w[3][64 * 16], v[3][16 * 64], x[7 * 16];
    rlx_test_tensor p[6];
    static char names[6][8];
    for (int l = 0; l < 3; l++) {
        for (int i = 0; i < 1024; i++) {
            w[l][i] = sinf((float)(i + l * 7) * 0.13f) * 0.3f;
            v[l][i] = cosf((float)(i + l * 5) * 0.17f) * 0.3f;
        }
        snprintf(names[2 * l], 8, "w%d", l);
        snprintf(names[2 * l + 1], 8, "v%d", l);
        p[2 * l] = (rlx_test_tensor){names[2 * l], w[l]};
        p[2 * l + 1] = (rlx_test_tensor){names[2 * l + 1], v[l]};
    }
    for (int i = 0; i < 7 * 16; i++)
        x[i] = sinf((float)i * 0.29f);
    rlx_test_tensor in = {"x", x};
    rlx_test_run run = {.params = p, .n_params = 6, .inputs = &in, .n_inputs = 1};
    run.syms.v[0] = 7;
    void *a[1], *b[1];
    int64_t na[1], nb[1];
    rlx_compile_opts o = rlx_compile_default_opts();
    assert_int_equal(rlx_test_compile_run(g, o, &run, a, na, 1, NULL, NULL), RLX_OK);
    o.passes = RLX_PASS_REQUIRED;
    assert_int_equal(rlx_test_compile_run(g, o, &run, b, nb, 1, NULL, NULL), RLX_OK);
    assert_int_equal(na[0], 7 * 16);
    assert_true(rlx_test_max_diff(a[0], b[0], na[0]) < 1e-4f);
    free(a[0]);
    free(b[0]);
    rlx_graph_free(g);
}

/* A channel concatenation of one image is joined: its inputs are written in
 * place inside its output and the instruction is gone; a concatenation
 * that names one value twice, or a graph input, keeps its copy. The plan
 * computes what the one without the in-place passes does. */
static void test_concat_joined(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c4(1, 2, 3, 4));
    rlx_node a = rlx_graph_exp(g, "a", x);
    rlx_node b = rlx_graph_neg(g, "b", x);
    rlx_node c = rlx_graph_concat(g, "c", 2, (rlx_node[]){a, b}, 1);
    rlx_node e = rlx_graph_concat(g, "e", 2, (rlx_node[]){a, a}, 1);
    rlx_node f = rlx_graph_concat(g, "f", 2, (rlx_node[]){x, b}, 1);
    rlx_node d = rlx_graph_add(g, "d", rlx_graph_mul(g, "m", c, e), f);
    rlx_graph_output(g, "d", d);
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_lir *lir = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, NULL), RLX_OK);
    int32_t va = -1, vb = -1, n_concat = 0;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        va = ins->op == RLX_OP_EXP ? ins->out : va;
        vb = ins->op == RLX_OP_NEG ? ins->out : vb;
        n_concat += ins->op == RLX_OP_CONCAT;
    }
    assert_int_equal(n_concat, 2); /* e and f */
    assert_true(va >= 0 && vb >= 0);
    /* b follows a in c's bytes */
    assert_int_equal(lir->values[vb].offset, lir->values[va].offset + 2 * 3 * 4 * 4);
    rlx_lir_free(lir);
    if (rlx_test_have_cpu()) {
        float xv[24];
        for (int i = 0; i < 24; i++)
            xv[i] = sinf((float)i * 0.37f);
        rlx_test_tensor in = {"x", xv};
        rlx_test_run run = {.inputs = &in, .n_inputs = 1};
        void *r1[1], *r2[1];
        int64_t n1[1], n2[1];
        assert_int_equal(rlx_test_compile_run(g, o, &run, r1, n1, 1, NULL, NULL), RLX_OK);
        o.passes = RLX_PASS_REQUIRED;
        assert_int_equal(rlx_test_compile_run(g, o, &run, r2, n2, 1, NULL, NULL), RLX_OK);
        assert_int_equal(n1[0], 48);
        /* and what it is, by hand: c * e + f is a * a + x on the first two
         * channels, b * a + b on the last two (a = exp x, b = -x) */
        const float *y = r1[0];
        for (int i = 0; i < 24; i++) {
            float ea = expf(xv[i]);
            assert_float_equal(y[i], ea * ea + xv[i], 1e-5f * (1 + ea * ea));
            assert_float_equal(y[24 + i], -xv[i] * ea - xv[i], 1e-5f * (1 + ea));
        }
        assert_true(rlx_test_max_diff(r1[0], r2[0], 48) < 1e-6f);
        free(r1[0]);
        free(r2[0]);
    }
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariant),     cmocka_unit_test(test_views_share),
        cmocka_unit_test(test_spaced_reuse),  cmocka_unit_test(test_run_tower),
        cmocka_unit_test(test_concat_joined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
