/* fusion: matmul epilogues, norm weights, add+rms_norm, elementwise trees. */
#include "pass-test.h"

static void test_matmul_epilogue(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(4, 8));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F32, pt_c2(16, 8));
    rlx_node b = rlx_graph_param(g, "b", RLX_DTYPE_F32, pt_c1(16));
    rlx_node y = rlx_graph_linear(g, "up", x, w, b);
    rlx_node z = rlx_graph_gelu(g, "act", y, RLX_GELU_TANH);
    rlx_graph_output(g, "z", z);
    pt_run(rlx_pass_fusion, g, &o);
    assert_int_equal(rlx_graph_node_count(g), 4);
    rlx_node m = g->outputs[0].node;
    assert_int_equal(rlx_graph_node_op(g, m), RLX_OP_MATMUL);
    assert_true(g->nodes[m].p.matmul.has_bias);
    assert_int_equal(g->nodes[m].p.matmul.act, RLX_ACT_GELU_TANH);
    assert_int_equal(g->nodes[m].n_in, 3);
    rlx_graph_free(g);
}

static void test_norms(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(4, 8));
    rlx_node r = rlx_graph_input(g, "r", RLX_DTYPE_F32, pt_c2(4, 8));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F32, pt_c1(8));
    rlx_node bb = rlx_graph_param(g, "bb", RLX_DTYPE_F32, pt_c1(8));
    /* layer_norm(x) * w + bb */
    rlx_node ln = rlx_graph_layer_norm(g, "ln", x, RLX_NODE_INVALID, RLX_NODE_INVALID, 1e-5f);
    rlx_node lw = rlx_graph_add(g, "lb", rlx_graph_mul(g, "lw", ln, w), bb);
    /* rms_norm(x + r, w) where the sum is used only by the norm */
    rlx_node s = rlx_graph_add(g, "sum", x, r);
    rlx_node rn = rlx_graph_rms_norm(g, "rn", s, w, 1e-6f);
    rlx_graph_output(g, "ln", lw);
    rlx_graph_output(g, "rn", rn);
    pt_run(rlx_pass_fusion, g, &o);
    rlx_node l = g->outputs[0].node;
    assert_int_equal(rlx_graph_node_op(g, l), RLX_OP_LAYER_NORM);
    assert_true(g->nodes[l].p.norm.has_weight && g->nodes[l].p.norm.has_bias);
    rlx_node a = g->outputs[1].node;
    assert_int_equal(rlx_graph_node_op(g, a), RLX_OP_ADD_RMS_NORM);
    assert_int_equal(pt_find(g, "sum"), RLX_NODE_INVALID);
    rlx_graph_free(g);
}

/* A pre-norm block's residual stream: the sum feeds the norm and is read
 * again, so the fused op keeps it ([..., 2, D]: sum, norm) and both readers
 * take views of its halves. */
static void test_add_rms_keep_sum(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(4, 8));
    rlx_node r = rlx_graph_input(g, "r", RLX_DTYPE_F32, pt_c2(4, 8));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F32, pt_c1(8));
    rlx_node m = rlx_graph_param(g, "m", RLX_DTYPE_F32, pt_c2(8, 8));
    rlx_node s = rlx_graph_add(g, "sum", x, r);
    rlx_node n = rlx_graph_mul(g, "n.w", rlx_graph_rms_norm(g, "n", s, RLX_NODE_INVALID, 1e-6f), w);
    rlx_node y = rlx_graph_add(g, "res", s, rlx_graph_matmul(g, "mm", n, m, false, true));
    rlx_graph_output(g, "y", y);
    pt_run(rlx_pass_fusion, g, &o);
    assert_int_equal(pt_find(g, "sum"), RLX_NODE_INVALID);
    rlx_node f = pt_find(g, "n");
    assert_true(f != RLX_NODE_INVALID);
    assert_int_equal(rlx_graph_node_op(g, f), RLX_OP_ADD_RMS_NORM);
    assert_true(g->nodes[f].p.norm.keep_sum);
    assert_int_equal(g->nodes[f].shape.rank, 3); /* [4, 2, 8] */
    assert_int_equal(g->nodes[f].shape.d[1].k, 2);
    assert_int_equal(g->nodes[f].shape.d[2].k, 8);
    /* the residual add reads the sum half, the matmul the norm half */
    rlx_node sum = pt_find(g, "n.sum"), norm = pt_find(g, "n.norm");
    assert_true(sum != RLX_NODE_INVALID && norm != RLX_NODE_INVALID);
    assert_int_equal(rlx_graph_node_op(g, sum), RLX_OP_RESHAPE);
    assert_int_equal(rlx_graph_node_op(g, g->nodes[sum].in[0]), RLX_OP_SLICE);
    assert_int_equal(g->nodes[g->nodes[sum].in[0]].in[0], f);
    assert_int_equal(g->nodes[g->nodes[norm].in[0]].p.slice.start.k, 1);
    rlx_node res = g->outputs[0].node;
    bool reads_sum = false;
    for (int k = 0; k < g->nodes[res].n_in; k++)
        reads_sum |= g->nodes[res].in[k] == sum;
    assert_true(reads_sum);
    rlx_node mm = pt_find(g, "mm");
    assert_int_equal(g->nodes[mm].in[0], norm);

    /* the sum as a graph output stays a plain add */
    rlx_graph *g2 = rlx_graph_create();
    x = rlx_graph_input(g2, "x", RLX_DTYPE_F32, pt_c2(4, 8));
    r = rlx_graph_input(g2, "r", RLX_DTYPE_F32, pt_c2(4, 8));
    w = rlx_graph_param(g2, "w", RLX_DTYPE_F32, pt_c1(8));
    s = rlx_graph_add(g2, "sum", x, r);
    rlx_graph_output(g2, "s", s);
    rlx_graph_output(g2, "n", rlx_graph_rms_norm(g2, "n", s, w, 1e-6f));
    pt_run(rlx_pass_fusion, g2, &o);
    assert_int_equal(rlx_graph_node_op(g2, g2->outputs[0].node), RLX_OP_ADD);
    assert_int_equal(rlx_graph_node_op(g2, g2->outputs[1].node), RLX_OP_RMS_NORM);
    rlx_graph_free(g2);
    rlx_graph_free(g);
}

static void test_elementwise_tree(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_node gate = rlx_graph_input(g, "gate", RLX_DTYPE_F32, pt_c2(4, 8));
    rlx_node up = rlx_graph_input(g, "up", RLX_DTYPE_F32, pt_c2(4, 8));
    rlx_node sw = rlx_graph_mul(g, "swiglu", rlx_graph_silu(g, "silu", gate), up);
    rlx_node res = rlx_graph_input(g, "res", RLX_DTYPE_F32, pt_c1(8));
    rlx_node out = rlx_graph_add(g, "out", rlx_graph_scale(g, "sc", sw, 0.5f, 0.0f), res);
    rlx_graph_output(g, "out", out);
    /* a value that is also an output stays a boundary */
    rlx_node e = rlx_graph_exp(g, "e", gate);
    rlx_node f = rlx_graph_neg(g, "f", e);
    rlx_graph_output(g, "e", e);
    rlx_graph_output(g, "f", f);
    pt_run(rlx_pass_fusion, g, &o);
    rlx_node fu = g->outputs[0].node;
    assert_int_equal(rlx_graph_node_op(g, fu), RLX_OP_FUSED_ELEMENTWISE);
    assert_int_equal(g->nodes[fu].p.fused.n_steps, 4);
    assert_int_equal(g->nodes[fu].n_in, 3);
    assert_int_equal(g->nodes[fu].p.fused.steps[0].op, RLX_OP_SILU);
    assert_int_equal(g->nodes[fu].p.fused.steps[3].op, RLX_OP_ADD);
    assert_int_equal(g->nodes[fu].p.fused.steps[3].dst, 3 + 3);
    assert_int_equal(rlx_graph_node_op(g, g->outputs[1].node), RLX_OP_EXP);
    assert_int_equal(rlx_graph_node_op(g, g->outputs[2].node), RLX_OP_NEG);

    /* a backend that lacks fused elementwise gets none */
    rlx_graph_free(g);
    g = rlx_graph_create();
    gate = rlx_graph_input(g, "gate", RLX_DTYPE_F32, pt_c2(4, 8));
    up = rlx_graph_input(g, "up", RLX_DTYPE_F32, pt_c2(4, 8));
    rlx_graph_output(g, "o", rlx_graph_mul(g, "m", rlx_graph_silu(g, "s", gate), up));
    o.backend = rlx_test_refusing_backend(1ull << RLX_OP_FUSED_ELEMENTWISE);
    pt_run(rlx_pass_fusion, g, &o);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_FUSED_ELEMENTWISE), 0);
    assert_int_equal(rlx_graph_node_count(g), 4);
    rlx_graph_free(g);
}

static void test_limits(void **state)
{
    (void)state;
    /* a chain longer than one fused program is cut into several */
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(4, 8));
    rlx_node y = x;
    for (int i = 0; i < 40; i++)
        y = i % 2 ? rlx_graph_tanh(g, NULL, y) : rlx_graph_scale(g, NULL, y, 0.9f, 0.1f);
    rlx_graph_output(g, "y", y);
    pt_run(rlx_pass_fusion, g, &o);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_FUSED_ELEMENTWISE), 3);
    assert_int_equal(rlx_graph_node_count(g), 4);
    rlx_graph_free(g);

    /* a sum of eight inputs: at most RLX_MAX_INPUTS leaves per program */
    g = rlx_graph_create();
    rlx_node in[8];
    for (int i = 0; i < 8; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "x%d", i);
        in[i] = rlx_graph_input(g, nm, RLX_DTYPE_F32, pt_c2(4, 8));
    }
    y = in[0];
    for (int i = 1; i < 8; i++)
        y = rlx_graph_add(g, NULL, y, in[i]);
    rlx_graph_output(g, "y", y);
    pt_run(rlx_pass_fusion, g, &o);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_ADD), 0);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_FUSED_ELEMENTWISE), 2);
    for (int32_t i = 0; i < rlx_graph_node_count(g); i++)
        assert_true(g->nodes[i].n_in <= RLX_MAX_INPUTS);
    rlx_graph_free(g);
}

/* conv -> activation becomes one conv with the activation as its epilogue,
 * and the CPU's kernels compute the same as the separate ops: a 3x3 conv on
 * a 64 x 70 map (Winograd, ReLU as it writes), one of stride 2 (implicit
 * GEMM), a pointwise one without a bias (ReLU after the GEMM) and a 3x3
 * conv with SiLU (a pass after the kernel). */
/* scatter(state, cast(x)) into an f16 state => scatter(state, x): the
 * CAST is gone (one of a KV cache's keys, permuted, and its values), a cast
 * also read elsewhere or to another dtype than the state's stays, and the
 * cache holds the same halves either way. */
static void test_cast_scatter(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 2);
    int past = rlx_graph_add_symbol(g, "PAST", 6);
    rlx_dim S = rlx_dim_sym(seq), P = rlx_dim_sym(past), H = rlx_dim_const(2), D = rlx_dim_const(4);
    rlx_node k =
        rlx_graph_input(g, "k", RLX_DTYPE_F32, rlx_shape_make_dims(3, (rlx_dim[]){S, H, D}));
    rlx_node ks = rlx_graph_scale(g, "ks", k, 1.0f / 3.0f, 0.1f); /* not f16-exact */
    rlx_node kp = rlx_graph_permute(g, "kp", ks, (const int[]){1, 0, 2});
    rlx_node kc = rlx_graph_state(g, "kc", RLX_DTYPE_F16, rlx_shape_make(3, (int64_t[]){2, 8, 4}));
    rlx_node vc = rlx_graph_state(g, "vc", RLX_DTYPE_F16, rlx_shape_make(3, (int64_t[]){2, 8, 4}));
    rlx_node wc = rlx_graph_state(g, "wc", RLX_DTYPE_F16, rlx_shape_make(3, (int64_t[]){2, 8, 4}));
    rlx_node k16 = rlx_graph_cast(g, "k16", kp, RLX_DTYPE_F16);
    rlx_node ku = rlx_graph_scatter(g, "ku", kc, k16, 1, P);
    /* read twice: stays */
    rlx_node v16 = rlx_graph_cast(g, "v16", kp, RLX_DTYPE_F16);
    rlx_node vu = rlx_graph_scatter(g, "vu", vc, v16, 1, P);
    /* to bf16, then into an f16 state: two roundings, stays */
    rlx_node w16 = rlx_graph_cast(g, "w16", kp, RLX_DTYPE_BF16);
    rlx_node wu = rlx_graph_scatter(g, "wu", wc, w16, 1, P);
    rlx_graph_output(g, "k", rlx_graph_cast(g, "ko", ku, RLX_DTYPE_F32));
    rlx_graph_output(g, "v", rlx_graph_cast(g, "vo", vu, RLX_DTYPE_F32));
    rlx_graph_output(g, "w", rlx_graph_cast(g, "wo", wu, RLX_DTYPE_F32));
    rlx_graph_output(g, "v16", v16);
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_graph *h = rlx_graph_clone(g);
    pt_run(rlx_pass_fusion, h, &o);
    int casts_in = 0;
    for (int32_t i = 0; i < h->n_nodes; i++)
        if (h->nodes[i].op == RLX_OP_SCATTER && h->nodes[h->nodes[i].in[1]].op == RLX_OP_CAST)
            casts_in++;
    assert_int_equal(casts_in, 2); /* vu's and wu's */
    assert_int_equal(rlx_test_count_op(h, RLX_OP_CAST), 2 + 3);
    rlx_graph_free(h);
    if (rlx_test_have_cpu()) {
        float kv[2 * 2 * 4];
        for (int i = 0; i < 16; i++)
            kv[i] = (float)i * 0.37f - 2.0f;
        rlx_test_tensor in = {"k", kv};
        rlx_test_run run = {.inputs = &in, .n_inputs = 1};
        run.syms.v[0] = 2; /* SEQ */
        run.syms.v[1] = 3; /* PAST */
        void *r1[4], *r2[4];
        int64_t n1[4], n2[4];
        assert_int_equal(rlx_test_compile_run(g, o, &run, r1, n1, 4, NULL, NULL), RLX_OK);
        o.passes = RLX_PASS_REQUIRED;
        assert_int_equal(rlx_test_compile_run(g, o, &run, r2, n2, 4, NULL, NULL), RLX_OK);
        for (int j = 0; j < 3; j++) {
            assert_int_equal(n1[j], 64);
            assert_memory_equal(r1[j], r2[j], 64 * sizeof(float)); /* the same halves */
            const float *y = r1[j];
            /* head h, row PAST + s holds k[s, h, :] rounded */
            for (int hh = 0; hh < 2; hh++)
                for (int s = 0; s < 2; s++)
                    for (int d = 0; d < 4; d++) {
                        float want = kv[(s * 2 + hh) * 4 + d] / 3.0f + 0.1f;
                        float got = y[(hh * 8 + 3 + s) * 4 + d];
                        /* f16: 2^-11 of the value; bf16 first: 2^-8 */
                        float tol = (j == 2 ? 4e-3f : 5e-4f) * fabsf(want) + 1e-6f;
                        if (!(fabsf(got - want) <= tol))
                            fail_msg("%d: h %d s %d d %d: %g, want %g", j, hh, s, d, got, want);
                    }
        }
        for (int j = 0; j < 4; j++) {
            free(r1[j]);
            free(r2[j]);
        }
    }
    rlx_graph_free(g);
}

static void test_conv_act(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    const int s1[2] = {1, 1}, s2[2] = {2, 2}, p1[2] = {1, 1}, p0[2] = {0, 0}, d1[2] = {1, 1};
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c4(1, 8, 64, 70));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F32, pt_c4(12, 8, 3, 3));
    rlx_node b = rlx_graph_param(g, "b", RLX_DTYPE_F32, pt_c1(12));
    rlx_node v = rlx_graph_param(g, "v", RLX_DTYPE_F32, pt_c4(6, 12, 1, 1));
    /* distinct convs: CSE would join equal ones, and a conv read twice
     * keeps its activation apart */
    rlx_node u = rlx_graph_param(g, "u", RLX_DTYPE_F32, pt_c4(12, 8, 3, 3));
    rlx_node a = rlx_graph_relu(g, "a", rlx_graph_conv2d(g, "ca", x, w, b, s1, p1, d1, 1));
    rlx_node c = rlx_graph_relu(g, "c", rlx_graph_conv2d(g, "cc", x, w, b, s2, p1, d1, 1));
    rlx_node d =
        rlx_graph_relu(g, "d", rlx_graph_conv2d(g, "cd", a, v, RLX_NODE_INVALID, s1, p0, d1, 1));
    rlx_node e = rlx_graph_silu(g, "e", rlx_graph_conv2d(g, "ce", x, u, b, s1, p1, d1, 1));
    rlx_node t = rlx_graph_conv2d(g, "ct", x, w, RLX_NODE_INVALID, s1, p1, d1, 1);
    rlx_node f = rlx_graph_add(g, "f", rlx_graph_relu(g, "r", t), t);
    rlx_graph_output(g, "c", c);
    rlx_graph_output(g, "d", d);
    rlx_graph_output(g, "e", e);
    rlx_graph_output(g, "f", f);
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_graph *h = rlx_graph_clone(g);
    pt_run(rlx_pass_fusion, h, &o);
    int n_act = 0;
    for (int32_t i = 0; i < h->n_nodes; i++)
        n_act += h->nodes[i].op == RLX_OP_CONV2D && h->nodes[i].p.conv.act != RLX_ACT_NONE;
    assert_int_equal(n_act, 4); /* not ct's */
    assert_int_equal(rlx_test_count_op(h, RLX_OP_SILU), 0);
    rlx_graph_free(h);
    if (rlx_test_have_cpu()) {
        static float xv[8 * 64 * 70], wv[12 * 8 * 9], bv[12], vv[6 * 12];
        for (int i = 0; i < 8 * 64 * 70; i++)
            xv[i] = sinf((float)i * 0.013f) + 0.2f * cosf((float)i * 0.71f);
        for (int i = 0; i < 12 * 8 * 9; i++)
            wv[i] = 0.2f * sinf((float)i * 0.37f);
        for (int i = 0; i < 12; i++)
            bv[i] = 0.1f * (float)(i % 5) - 0.2f;
        for (int i = 0; i < 6 * 12; i++)
            vv[i] = 0.3f * cosf((float)i * 0.53f);
        rlx_test_tensor in = {"x", xv};
        static float uv[12 * 8 * 9];
        for (int i = 0; i < 12 * 8 * 9; i++)
            uv[i] = 0.2f * cosf((float)i * 0.29f);
        rlx_test_tensor ps[4] = {{"w", wv}, {"b", bv}, {"v", vv}, {"u", uv}};
        rlx_test_run run = {.params = ps, .n_params = 4, .inputs = &in, .n_inputs = 1};
        void *r1[4], *r2[4];
        int64_t n1[4], n2[4];
        assert_int_equal(rlx_test_compile_run(g, o, &run, r1, n1, 4, NULL, NULL), RLX_OK);
        o.passes = RLX_PASS_REQUIRED;
        assert_int_equal(rlx_test_compile_run(g, o, &run, r2, n2, 4, NULL, NULL), RLX_OK);
        for (int k = 0; k < 4; k++) {
            assert_int_equal(n1[k], n2[k]);
            /* the same kernels and sums; only the order of the activation
             * pass differs (exactly the same for ReLU, SiLU's exp alike) */
            assert_true(rlx_test_max_diff(r1[k], r2[k], n1[k]) < 1e-6f);
            free(r1[k]);
            free(r2[k]);
        }
    }
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_epilogue),  cmocka_unit_test(test_norms),
        cmocka_unit_test(test_add_rms_keep_sum), cmocka_unit_test(test_elementwise_tree),
        cmocka_unit_test(test_limits),           cmocka_unit_test(test_conv_act),
        cmocka_unit_test(test_cast_scatter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
