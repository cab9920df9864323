/* verify: structural errors in hand-made or rewritten graphs. */
#include "pass-test.h"

static rlx_graph *small(void)
{
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(2, 3));
    rlx_node y = rlx_graph_exp(g, "y", x);
    rlx_graph_output(g, "y", y);
    return g;
}

static void test_ok(void **state)
{
    (void)state;
    rlx_graph *g = small();
    rlx_compile_opts o = rlx_compile_default_opts();
    assert_int_equal(rlx_pass_verify(g, &o, NULL), RLX_OK);
    rlx_graph_free(g);
}

static void test_bad_input(void **state)
{
    (void)state;
    rlx_graph *g = small();
    rlx_compile_opts o = rlx_compile_default_opts();
    g->nodes[1].in[0] = 1; /* reads itself */
    rlx_error *err = NULL;
    assert_int_equal(rlx_pass_verify(g, &o, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "exp 'y' (node 1)"));
    rlx_error_free(err);
    g->nodes[1].in[0] = 0;
    g->nodes[1].n_in = 2;
    err = NULL;
    assert_int_equal(rlx_pass_verify(g, &o, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "wrong number of inputs"));
    rlx_error_free(err);
    rlx_graph_free(g);
}

static void test_outputs_and_quant(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(2, 32));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_Q8_0, pt_c2(4, 32));
    rlx_node y = rlx_graph_matmul(g, "mm", x, w, false, true);
    rlx_graph_output(g, "y", y);
    assert_int_equal(rlx_pass_verify(g, &o, NULL), RLX_OK);
    /* a quantized tensor fed to an elementwise op by a careless rewrite */
    g->nodes[y].op = RLX_OP_ADD;
    g->nodes[y].in[0] = w;
    g->nodes[y].in[1] = x;
    rlx_error *err = NULL;
    assert_int_equal(rlx_pass_verify(g, &o, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "block-quantized"));
    rlx_error_free(err);
    rlx_graph_free(g);

    g = rlx_graph_create();
    x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(2, 3));
    err = NULL;
    assert_int_equal(rlx_pass_verify(g, &o, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "no outputs"));
    rlx_error_free(err);
    /* compile refuses a graph with a builder error, quoting it */
    rlx_graph_output(g, "x", x);
    rlx_graph_add(g, "bad", x, rlx_graph_input(g, "z", RLX_DTYPE_F32, pt_c2(4, 4)));
    rlx_lir *lir = NULL;
    err = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, &err), RLX_ERR_INVALID_ARG);
    assert_null(lir);
    assert_non_null(strstr(rlx_error_message(err), "add 'bad'"));
    rlx_error_free(err);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ok),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_outputs_and_quant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
