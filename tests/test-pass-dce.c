/* dce: unused nodes go, state writes stay. */
#include "pass-test.h"

static void test_dce(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(2, 4));
    rlx_node unused_in = rlx_graph_input(g, "unused", RLX_DTYPE_F32, pt_c2(2, 4));
    rlx_node a = rlx_graph_exp(g, "a", x);
    rlx_node dead1 = rlx_graph_neg(g, "dead1", a);
    rlx_graph_tanh(g, "dead2", dead1);
    rlx_graph_sqrt(g, "dead3", unused_in);
    rlx_node st = rlx_graph_state(g, "cache", RLX_DTYPE_F32, pt_c2(8, 4));
    rlx_graph_scatter(g, "store", st, a, 0, rlx_dim_const(2)); /* result unused */
    rlx_node b = rlx_graph_silu(g, "b", a);
    rlx_graph_output(g, "b", b);
    assert_int_equal(rlx_graph_node_count(g), 9);
    pt_run(rlx_pass_dce, g, &o);
    /* x, unused (declared inputs stay), a, cache, store, b */
    assert_int_equal(rlx_graph_node_count(g), 6);
    assert_int_equal(pt_find(g, "dead1"), RLX_NODE_INVALID);
    assert_int_equal(pt_find(g, "dead3"), RLX_NODE_INVALID);
    assert_int_not_equal(pt_find(g, "unused"), RLX_NODE_INVALID);
    assert_int_not_equal(pt_find(g, "store"), RLX_NODE_INVALID);
    assert_int_equal(rlx_graph_node_op(g, g->outputs[0].node), RLX_OP_SILU);
    /* idempotent */
    pt_run(rlx_pass_dce, g, &o);
    assert_int_equal(rlx_graph_node_count(g), 6);
    /* and the program still binds both inputs, in declaration order */
    rlx_lir *lir = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, NULL), RLX_OK);
    assert_int_equal(lir->n_inputs, 2);
    assert_string_equal(lir->inputs[0].name, "x");
    assert_string_equal(lir->inputs[1].name, "unused");
    rlx_lir_free(lir);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
