/* const-fold: constant subgraphs become constants with the right values. */
#include "pass-test.h"

static const float *cdata(const rlx_graph *g, rlx_node n)
{
    assert_int_equal(rlx_graph_node_op(g, n), RLX_OP_CONST);
    return g->nodes[n].data;
}

static void test_fold_elementwise(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    float av[4] = {1, 2, 3, 4}, bv[2] = {10, 20};
    rlx_node a = rlx_graph_const_f32(g, "a", pt_c2(2, 2), av);
    rlx_node b = rlx_graph_const_f32(g, "b", pt_c1(2), bv);
    rlx_node c = rlx_graph_add(g, "c", a, b);      /* broadcast */
    rlx_node d = rlx_graph_scale(g, "d", c, 2, 1); /* chain */
    rlx_node e = rlx_graph_exp(g, "e", rlx_graph_scalar(g, 0.0f));
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, pt_c2(2, 2));
    rlx_node y = rlx_graph_mul(g, "y", x, d); /* not constant */
    rlx_node z = rlx_graph_mul(g, "z", y, e);
    rlx_graph_output(g, "z", z);
    pt_run(rlx_pass_const_fold, g, &o);
    rlx_node dn = g->nodes[pt_find(g, "y")].in[1];
    const float *dv = cdata(g, dn);
    assert_true(dv[0] == 23 && dv[1] == 45 && dv[2] == 27 && dv[3] == 49);
    const float *ev = cdata(g, g->nodes[pt_find(g, "z")].in[1]);
    assert_true(ev[0] == 1.0f);
    assert_int_equal(rlx_graph_node_op(g, pt_find(g, "y")), RLX_OP_MUL);
    /* a, b, c and the scalar feeding exp are gone: x, d, e, y, z remain */
    assert_int_equal(rlx_graph_node_count(g), 5);
    (void)c;
    rlx_graph_free(g);
}

static void test_fold_movement(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_compile_opts o = rlx_compile_default_opts();
    float v[6] = {0, 1, 2, 3, 4, 5};
    int32_t pos[3] = {7, 8, 9};
    rlx_node a = rlx_graph_const_f32(g, "a", pt_c2(2, 3), v); /* [[0 1 2] [3 4 5]] */
    rlx_node t = rlx_graph_transpose(g, "t", a, 0, 1);        /* [[0 3] [1 4] [2 5]] */
    rlx_node s = rlx_graph_slice(g, "s", t, 0, rlx_dim_const(1), rlx_dim_const(2));
    rlx_node cat = rlx_graph_concat(g, "cat", 2, (rlx_node[]){s, s}, 1); /* [[1 4 1 4] [2 5 2 5]] */
    rlx_node r = rlx_graph_reduce(g, "r", RLX_OP_REDUCE_SUM, cat, 1, false);      /* [10 14] */
    rlx_node p = rlx_graph_pad(g, "p", r, (int64_t[]){1}, (int64_t[]){0}, -1.0f); /* [-1 10 14] */
    rlx_node ip = rlx_graph_const_i32(g, "ip", pt_c1(3), pos);
    rlx_node ip2 = rlx_graph_add(g, "ip2", ip, ip); /* integer arithmetic stays I32 */
    rlx_graph_output(g, "p", p);
    rlx_graph_output(g, "ip2", ip2);
    pt_run(rlx_pass_const_fold, g, &o);
    const float *pv = cdata(g, g->outputs[0].node);
    assert_true(pv[0] == -1 && pv[1] == 10 && pv[2] == 14);
    const int32_t *iv = (const int32_t *)cdata(g, g->outputs[1].node);
    assert_int_equal(rlx_graph_node_dtype(g, g->outputs[1].node), RLX_DTYPE_I32);
    assert_true(iv[0] == 14 && iv[2] == 18);
    assert_int_equal(rlx_graph_node_count(g), 2);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_elementwise),
        cmocka_unit_test(test_fold_movement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
