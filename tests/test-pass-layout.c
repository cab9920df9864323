/* layout: permute pairs cancel, transposes fold into matmul flags,
 * reshape chains merge, identities vanish. */
#include "pass-test.h"

static void test_layout(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c4(1, 8, 4, 16)); /* [B, S, H, D] */
    rlx_node p1 = rlx_graph_permute(g, "p1", x, (int[]){0, 2, 1, 3});        /* [B, H, S, D] */
    rlx_node p2 = rlx_graph_permute(g, "p2", p1, (int[]){0, 2, 1, 3});       /* back */
    rlx_node e = rlx_graph_exp(g, "e", p2);
    rlx_node k = rlx_graph_input(g, "k", RLX_DTYPE_F32, pt_c4(1, 4, 8, 16));
    rlx_node kt = rlx_graph_transpose(g, "kt", k, 2, 3);           /* [1, 4, 16, 8] */
    rlx_node sc = rlx_graph_matmul(g, "sc", p1, kt, false, false); /* q @ k^T */
    rlx_node r1 = rlx_graph_reshape(g, "r1", sc, pt_c2(32, 8));
    rlx_node r2 = rlx_graph_reshape(g, "r2", r1, pt_c4(1, 4, 8, 8)); /* identity overall */
    rlx_node r3 = rlx_graph_reshape(g, "r3", r2, pt_c2(4, 64));
    rlx_graph_output(g, "e", e);
    rlx_graph_output(g, "r3", r3);
    pt_run(rlx_pass_layout, g, &o);
    /* p1 stays (the matmul reads it); p2 is gone: e reads x */
    assert_int_equal(pt_find(g, "p2"), RLX_NODE_INVALID);
    assert_int_equal(g->nodes[pt_find(g, "e")].in[0], pt_find(g, "x"));
    /* the transpose of k became trans_b */
    rlx_node m = pt_find(g, "sc");
    assert_true(g->nodes[m].p.matmul.trans_b);
    assert_int_equal(g->nodes[m].in[1], pt_find(g, "k"));
    assert_int_equal(pt_find(g, "kt"), RLX_NODE_INVALID);
    /* r3 reads sc directly; r1 and r2 are gone */
    assert_int_equal(g->nodes[pt_find(g, "r3")].in[0], m);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_RESHAPE), 1);
    assert_int_equal(rlx_test_count_op(g, RLX_OP_PERMUTE), 1);
    rlx_graph_free(g);
}

static void test_identity_permute_output(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(3, 5));
    rlx_node t = rlx_graph_transpose(g, "t", x, 0, 1);
    rlx_node tt = rlx_graph_transpose(g, "tt", t, 0, 1);
    rlx_graph_output(g, "y", tt);
    pt_run(rlx_pass_layout, g, &o);
    assert_int_equal(rlx_graph_node_count(g), 1);
    assert_int_equal(g->outputs[0].node, pt_find(g, "x"));
    /* and it still compiles: the output is a COPY of the input */
    rlx_lir *lir = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, NULL), RLX_OK);
    assert_int_equal(lir->n_instrs, 1);
    assert_int_equal(lir->instrs[0].op, RLX_OP_COPY);
    rlx_lir_free(lir);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_identity_permute_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
