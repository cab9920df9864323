/* cse: repeated computations and equal constants merge; sources and state
 * writes never do. */
#include "pass-test.h"

static void test_cse(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    float one = 1.0f;
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(2, 4));
    rlx_node w1 = rlx_graph_param(g, "w1", RLX_DTYPE_F32, pt_c2(4, 4));
    rlx_node w2 = rlx_graph_param(g, "w2", RLX_DTYPE_F32, pt_c2(4, 4));
    rlx_node c1 = rlx_graph_const_f32(g, "c1", rlx_shape_make(0, NULL), &one);
    rlx_node c2 = rlx_graph_const_f32(g, "c2", rlx_shape_make(0, NULL), &one);
    rlx_node a1 = rlx_graph_add(g, "a1", x, c1);
    rlx_node a2 = rlx_graph_add(g, "a2", x, c2); /* same once c2 == c1 */
    rlx_node m1 = rlx_graph_matmul(g, "m1", a1, w1, false, true);
    rlx_node m2 = rlx_graph_matmul(g, "m2", a2, w2, false, true); /* other weight */
    rlx_node m3 = rlx_graph_matmul(g, "m3", a2, w1, false, true); /* == m1 */
    rlx_node g1 = rlx_graph_gelu(g, "g1", m1, RLX_GELU_TANH);
    rlx_node g2 = rlx_graph_gelu(g, "g2", m3, RLX_GELU_ERF); /* other params */
    rlx_node st = rlx_graph_state(g, "s", RLX_DTYPE_F32, pt_c2(4, 4));
    rlx_node s1 = rlx_graph_scatter(g, "s1", st, g1, 0, rlx_dim_const(0));
    rlx_node s2 = rlx_graph_scatter(g, "s2", s1, g1, 0, rlx_dim_const(0));
    rlx_node sum = rlx_graph_add(g, "sum", rlx_graph_add(g, "t", g1, g2), m2);
    rlx_graph_output(g, "sum", sum);
    rlx_graph_output(g, "s", s2);
    int before = rlx_graph_node_count(g);
    pt_run(rlx_pass_cse, g, &o);
    /* c2, a2 and m3 merged */
    assert_int_equal(rlx_graph_node_count(g), before - 3);
    assert_int_equal(pt_find(g, "m3"), RLX_NODE_INVALID);
    assert_int_not_equal(pt_find(g, "m2"), RLX_NODE_INVALID);
    assert_int_not_equal(pt_find(g, "g2"), RLX_NODE_INVALID);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_SCATTER), 2);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_PARAM), 2);
    assert_int_equal(g->nodes[pt_find(g, "g2")].in[0], pt_find(g, "m1"));
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
