/* legalize: ops the backend refuses are rewritten (and give the same
 * numbers on the CPU), or the compile fails naming them. */
#include "pass-test.h"

#define BIT(op) (1ull << (op))

static void test_rewrites_structure(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){1, 4, 6}));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){4, 4, 3}));
    rlx_node c = rlx_graph_conv1d(g, "conv", x, w, RLX_NODE_INVALID, 1, 1, 1, 1);
    rlx_node ge = rlx_graph_gelu(g, "gelu", c, RLX_GELU_ERF);
    rlx_node ln = rlx_graph_layer_norm(g, "ln", ge, RLX_NODE_INVALID, RLX_NODE_INVALID, 1e-5f);
    rlx_graph_output(g, "y", ln);
    rlx_compile_opts o = rlx_compile_default_opts();
    o.backend =
        rlx_test_refusing_backend(BIT(RLX_OP_CONV1D) | BIT(RLX_OP_GELU) | BIT(RLX_OP_LAYER_NORM));
    pt_run(rlx_pass_legalize, g, &o);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_CONV1D), 0);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_GELU), 0);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_LAYER_NORM), 0);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_CONV2D), 1);
    assert_true(rlx_test_count_op(g, RLX_OP_REDUCE_MEAN) == 2);
    /* no backend: nothing to do */
    rlx_compile_opts none = rlx_compile_default_opts();
    int n = rlx_graph_node_count(g);
    pt_run(rlx_pass_legalize, g, &none);
    assert_int_equal(rlx_graph_node_count(g), n);
    rlx_graph_free(g);
}

static void test_fails_with_name(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_lir *lir = NULL;
    rlx_error *err = NULL;
    /* a refused op without any rewrite */
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c4(1, 2, 4, 4));
    rlx_graph_output(g, "p",
                     rlx_graph_pool2d(g, "pool", x, RLX_POOL_MAX, (int[]){2, 2}, NULL, NULL));
    o.backend = rlx_test_refusing_backend(BIT(RLX_OP_POOL2D));
    err = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, &err), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "pool2d 'pool'"));
    rlx_error_free(err);
    rlx_graph_free(g);
}

/* Numbers: each refused op's rewrite against the CPU's own kernel. */
static void check_same(rlx_graph *g, uint64_t refuse, const rlx_test_run *run, float tol)
{
    void *ref[1] = {0}, *got[1] = {0};
    int64_t n1[1], n2[1];
    rlx_error *err = NULL;
    rlx_compile_opts o = rlx_compile_default_opts();
    o.passes = RLX_PASS_REQUIRED;
    rlx_status s = rlx_test_compile_run(g, o, run, ref, n1, 1, NULL, &err);
    if (s != RLX_OK)
        fprintf(stderr, "%s\n", rlx_error_message(err));
    assert_int_equal(s, RLX_OK);
    o.backend = rlx_test_refusing_backend(refuse);
    s = rlx_test_compile_run(g, o, run, got, n2, 1, NULL, &err);
    if (s != RLX_OK)
        fprintf(stderr, "%s\n", rlx_error_message(err));
    assert_int_equal(s, RLX_OK);
    assert_int_equal(n1[0], n2[0]);
    float d = rlx_test_max_diff(ref[0], got[0], n1[0]);
    if (!(d <= tol))
        fprintf(stderr, "max diff %g > %g\n", (double)d, (double)tol);
    assert_true(d <= tol);
    free(ref[0]);
    free(got[0]);
}

static void test_numbers(void **state)
{
    (void)state;
    if (!rlx_test_have_cpu())
        skip();
    float xv[2 * 4 * 6], wv[4 * 2 * 3], gam[4], bet[4];
    for (int i = 0; i < 48; i++)
        xv[i] = sinf((float)i * 0.37f) * 2.0f;
    for (int i = 0; i < 24; i++)
        wv[i] = cosf((float)i * 0.11f) * 0.5f;
    for (int i = 0; i < 4; i++) {
        gam[i] = 1.0f + 0.1f * (float)i;
        bet[i] = 0.05f * (float)i;
    }
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){2, 4, 6}));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){4, 2, 3}));
    rlx_node gm = rlx_graph_param(g, "g", RLX_DTYPE_F32, pt_c1(4));
    rlx_node bt = rlx_graph_param(g, "b", RLX_DTYPE_F32, pt_c1(4));
    rlx_node c = rlx_graph_conv1d(g, "conv", x, w, RLX_NODE_INVALID, 2, 1, 1, 2);
    rlx_node gn = rlx_graph_group_norm(g, "gn", c, 2, gm, bt, 1e-5f);
    rlx_node ge = rlx_graph_gelu(g, "gelu", gn, RLX_GELU_ERF);
    rlx_node gt = rlx_graph_gelu(g, "gelut", ge, RLX_GELU_TANH);
    rlx_node si = rlx_graph_silu(g, "silu", gt);
    rlx_node th = rlx_graph_tanh(g, "tanh", si);
    rlx_node t2 = rlx_graph_transpose(g, "t2", th, 1, 2);
    rlx_node ln = rlx_graph_layer_norm(g, "ln", t2, gm, bt, 1e-5f);
    rlx_node rn = rlx_graph_rms_norm(g, "rn", ln, gm, 1e-6f);
    rlx_node sm = rlx_graph_softmax(g, "sm", rn, RLX_NODE_INVALID, 0.7f);
    rlx_graph_output(g, "y", sm);
    assert_null(rlx_graph_error(g));
    rlx_test_tensor params[] = {{"w", wv}, {"g", gam}, {"b", bet}};
    rlx_test_tensor in = {"x", xv};
    rlx_test_run run = {.params = params, .n_params = 3, .inputs = &in, .n_inputs = 1};
    check_same(g,
               BIT(RLX_OP_CONV1D) | BIT(RLX_OP_GROUP_NORM) | BIT(RLX_OP_GELU) | BIT(RLX_OP_SILU) |
                   BIT(RLX_OP_TANH) | BIT(RLX_OP_LAYER_NORM) | BIT(RLX_OP_RMS_NORM) |
                   BIT(RLX_OP_SOFTMAX),
               &run, 2e-5f);
    rlx_graph_free(g);

    /* attention (GQA, no mask) and a matmul epilogue */
    float qv[1 * 4 * 3 * 8], kv[1 * 2 * 5 * 8], vv[1 * 2 * 5 * 8];
    for (int i = 0; i < 96; i++)
        qv[i] = sinf((float)i * 0.21f);
    for (int i = 0; i < 80; i++) {
        kv[i] = cosf((float)i * 0.13f);
        vv[i] = sinf((float)i * 0.07f + 1.0f);
    }
    g = rlx_graph_create();
    rlx_node q = rlx_graph_input(g, "q", RLX_DTYPE_F32, pt_c4(1, 4, 3, 8));
    rlx_node k = rlx_graph_input(g, "k", RLX_DTYPE_F32, pt_c4(1, 2, 5, 8));
    rlx_node v = rlx_graph_input(g, "v", RLX_DTYPE_F32, pt_c4(1, 2, 5, 8));
    rlx_node a = rlx_graph_attention(g, "attn", q, k, v, RLX_NODE_INVALID,
                                     (rlx_attention_params){.softcap = 5.0f});
    rlx_graph_output(g, "a", a);
    rlx_test_tensor ins[] = {{"q", qv}, {"k", kv}, {"v", vv}};
    rlx_test_run run2 = {.inputs = ins, .n_inputs = 3};
    check_same(g, BIT(RLX_OP_ATTENTION), &run2, 1e-5f);
    rlx_graph_free(g);

    /* causal and sliding-window masks with a cached prefix (S = 3 < T = 5,
     * symbolic), grouped heads and a per-head, per-key bias */
    float bv[4 * 3 * 5];
    for (int i = 0; i < 60; i++)
        bv[i] = cosf((float)i * 0.3f) * 0.2f;
    for (int m = 0; m < 2; m++) {
        g = rlx_graph_create();
        int seq = rlx_graph_add_symbol(g, "SEQ", 4), past = rlx_graph_add_symbol(g, "PAST", 4);
        rlx_dim S = rlx_dim_sym(seq), T;
        rlx_dim_add(rlx_dim_sym(past), S, &T);
        rlx_dim one = rlx_dim_const(1), d8 = rlx_dim_const(8);
        q = rlx_graph_input(g, "q", RLX_DTYPE_F32,
                            rlx_shape_make_dims(4, (rlx_dim[]){one, rlx_dim_const(4), S, d8}));
        k = rlx_graph_input(g, "k", RLX_DTYPE_F32,
                            rlx_shape_make_dims(4, (rlx_dim[]){one, rlx_dim_const(2), T, d8}));
        v = rlx_graph_input(g, "v", RLX_DTYPE_F32,
                            rlx_shape_make_dims(4, (rlx_dim[]){one, rlx_dim_const(2), T, d8}));
        rlx_node b =
            rlx_graph_input(g, "bias", RLX_DTYPE_F32,
                            rlx_shape_make_dims(4, (rlx_dim[]){one, rlx_dim_const(4), one, T}));
        rlx_attention_params ap = {.mask = m ? RLX_MASK_WINDOW : RLX_MASK_CAUSAL, .window = 2};
        a = rlx_graph_attention(g, "attn", q, k, v, m ? RLX_NODE_INVALID : b, ap);
        rlx_graph_output(g, "a", a);
        assert_null(rlx_graph_error(g));
        rlx_test_tensor ins3[] = {{"q", qv}, {"k", kv}, {"v", vv}, {"bias", bv}};
        rlx_test_run run3 = {.inputs = ins3, .n_inputs = 4};
        run3.syms.v[0] = 3;
        run3.syms.v[1] = 2;
        check_same(g, BIT(RLX_OP_ATTENTION), &run3, 1e-5f);
        rlx_graph_free(g);
    }
    /* a bias decomposed over a 2 x 3 key grid, per head ([1, 4, 3, 2 + 3]):
     * the full bias built, then the matmul form */
    float k6[1 * 2 * 6 * 8], v6[1 * 2 * 6 * 8];
    for (int i = 0; i < 96; i++) {
        k6[i] = cosf((float)i * 0.17f);
        v6[i] = sinf((float)i * 0.05f + 0.5f);
    }
    g = rlx_graph_create();
    q = rlx_graph_input(g, "q", RLX_DTYPE_F32, pt_c4(1, 4, 3, 8));
    k = rlx_graph_input(g, "k", RLX_DTYPE_F32, pt_c4(1, 2, 6, 8));
    v = rlx_graph_input(g, "v", RLX_DTYPE_F32, pt_c4(1, 2, 6, 8));
    rlx_node gb = rlx_graph_input(g, "bias", RLX_DTYPE_F32, pt_c4(1, 4, 3, 5));
    a = rlx_graph_attention(g, "attn", q, k, v, gb, (rlx_attention_params){.bias_grid_w = 3});
    rlx_graph_output(g, "a", a);
    assert_null(rlx_graph_error(g));
    rlx_test_tensor ins4[] = {{"q", qv}, {"k", k6}, {"v", v6}, {"bias", bv}};
    rlx_test_run run4 = {.inputs = ins4, .n_inputs = 4};
    check_same(g, BIT(RLX_OP_ATTENTION), &run4, 1e-5f);
    rlx_graph_free(g);
    /* a key length that is not a multiple of the grid's width is refused */
    g = rlx_graph_create();
    q = rlx_graph_input(g, "q", RLX_DTYPE_F32, pt_c4(1, 4, 3, 8));
    k = rlx_graph_input(g, "k", RLX_DTYPE_F32, pt_c4(1, 2, 5, 8));
    v = rlx_graph_input(g, "v", RLX_DTYPE_F32, pt_c4(1, 2, 5, 8));
    gb = rlx_graph_input(g, "bias", RLX_DTYPE_F32, pt_c4(1, 4, 3, 5));
    rlx_graph_attention(g, "attn", q, k, v, gb, (rlx_attention_params){.bias_grid_w = 3});
    assert_non_null(rlx_graph_error(g));
    rlx_graph_free(g);
}

static void test_casts(void **state)
{
    (void)state;
    uint16_t w16[8], wb[8];
    float xv[16];
    for (int i = 0; i < 8; i++) {
        w16[i] = rlx_f32_to_f16(0.5f + 0.125f * (float)i);
        wb[i] = rlx_f32_to_bf16(1.0f - 0.0625f * (float)i);
    }
    for (int i = 0; i < 16; i++)
        xv[i] = sinf((float)i);
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(2, 8));
    rlx_node a = rlx_graph_param(g, "a", RLX_DTYPE_F16, pt_c1(8));
    rlx_node b = rlx_graph_param(g, "b", RLX_DTYPE_BF16, pt_c1(8));
    rlx_node y = rlx_graph_rms_norm(g, "norm", rlx_graph_mul(g, "m", x, a), b, 1e-6f);
    rlx_graph_output(g, "y", y);
    rlx_compile_opts o = rlx_compile_default_opts();
    o.passes = RLX_PASS_REQUIRED;
    o.backend = rlx_test_f32_only_backend();
    rlx_graph *c = rlx_graph_clone(g);
    pt_run(rlx_pass_legalize, c, &o);
    assert_int_equal(rlx_test_count_op(c, RLX_OP_CAST), 2);
    assert_int_equal(rlx_test_count_op(c, RLX_OP_RMS_NORM), 1);
    rlx_graph_free(c);
    if (rlx_test_have_cpu()) {
        rlx_test_tensor params[] = {{"a", w16}, {"b", wb}};
        rlx_test_tensor in = {"x", xv};
        rlx_test_run run = {.params = params, .n_params = 2, .inputs = &in, .n_inputs = 1};
        void *r1[1], *r2[1];
        int64_t n1[1], n2[1];
        rlx_compile_opts native = rlx_compile_default_opts();
        assert_int_equal(rlx_test_compile_run(g, native, &run, r1, n1, 1, NULL, NULL), RLX_OK);
        o.passes = RLX_PASS_ALL;
        assert_int_equal(rlx_test_compile_run(g, o, &run, r2, n2, 1, NULL, NULL), RLX_OK);
        assert_true(rlx_test_max_diff(r1[0], r2[0], n1[0]) < 1e-6f);
        free(r1[0]);
        free(r2[0]);
    }
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rewrites_structure),
        cmocka_unit_test(test_fails_with_name),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_casts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
