/* shapes: every node's dtype and shape are re-derived and compared. */
#include "pass-test.h"

static void test_shapes(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 8);
    rlx_node x =
        rlx_graph_input(g, "x", RLX_DTYPE_F32,
                        rlx_shape_make_dims(2, (rlx_dim[]){rlx_dim_sym(seq), rlx_dim_const(4)}));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F16, pt_c2(6, 4));
    rlx_node y = rlx_graph_matmul(g, "mm", x, w, false, true);
    rlx_node s = rlx_graph_softmax(g, "sm", y, RLX_NODE_INVALID, 0.5f);
    rlx_graph_output(g, "s", s);
    rlx_compile_opts o = rlx_compile_default_opts();
    assert_int_equal(rlx_pass_shapes(g, &o, NULL), RLX_OK);

    /* a pass that forgot to update a shape is caught, naming the node */
    g->nodes[y].shape.d[1] = rlx_dim_const(7);
    rlx_error *err = NULL;
    assert_int_equal(rlx_pass_shapes(g, &o, &err), RLX_ERR_INTERNAL);
    assert_non_null(strstr(rlx_error_message(err), "matmul 'mm' holds F32 [SEQ, 7]"));
    assert_non_null(strstr(rlx_error_message(err), "inputs give F32 [SEQ, 6]"));
    rlx_error_free(err);
    g->nodes[y].shape.d[1] = rlx_dim_const(6);

    /* and a wrong dtype */
    g->nodes[s].dtype = RLX_DTYPE_F16;
    err = NULL;
    assert_int_equal(rlx_pass_shapes(g, &o, &err), RLX_ERR_INTERNAL);
    assert_non_null(strstr(rlx_error_message(err), "softmax 'sm'"));
    rlx_error_free(err);
    g->nodes[s].dtype = RLX_DTYPE_F32;

    /* an input made incompatible surfaces as the op's own error */
    g->nodes[w].shape.d[1] = rlx_dim_const(5);
    err = NULL;
    assert_int_equal(rlx_pass_shapes(g, &o, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "inner dims differ"));
    rlx_error_free(err);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
