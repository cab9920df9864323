/* The graph builder: shapes and dtypes checked when nodes are added. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph-internal.h"
#include "test-util.h"

static rlx_shape sh2(rlx_dim a, rlx_dim b)
{
    return rlx_shape_make_dims(2, (rlx_dim[]){a, b});
}

static rlx_shape c2(int64_t a, int64_t b)
{
    return rlx_shape_make(2, (int64_t[]){a, b});
}

static void test_matmul_shapes(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 128);
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, sh2(rlx_dim_sym(seq), rlx_dim_const(64)));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_Q8_0, c2(96, 64));
    rlx_node y = rlx_graph_matmul(g, "ffn", x, w, false, true);
    assert_int_not_equal(y, RLX_NODE_INVALID);
    rlx_shape s = rlx_graph_node_shape(g, y);
    assert_int_equal(s.rank, 2);
    assert_true(rlx_dim_equal(s.d[0], rlx_dim_sym(seq)));
    assert_true(rlx_dim_equal(s.d[1], rlx_dim_const(96)));
    assert_int_equal(rlx_graph_node_dtype(g, y), RLX_DTYPE_F32);
    assert_null(rlx_graph_error(g));

    rlx_node w2 = rlx_graph_param(g, "w2", RLX_DTYPE_F32, c2(128, 96));
    rlx_node bad = rlx_graph_matmul(g, "blk.3.ffn_up", x, w2, false, false);
    assert_int_equal(bad, RLX_NODE_INVALID);
    const char *e = rlx_graph_error(g);
    assert_non_null(e);
    assert_non_null(strstr(e, "matmul 'blk.3.ffn_up'"));
    assert_non_null(strstr(e, "inner dims differ: a is [SEQ, 64], b is [128, 96]"));
    /* later calls return invalid and keep the first error */
    assert_int_equal(rlx_graph_add(g, "later", x, x), RLX_NODE_INVALID);
    assert_string_equal(rlx_graph_error(g), e);
    rlx_error *err = NULL;
    assert_int_equal(rlx_graph_take_error(g, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "blk.3.ffn_up"));
    rlx_error_free(err);
    rlx_graph_free(g);
}

static void test_broadcast_and_dtypes(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_node a = rlx_graph_input(g, "a", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){2, 1, 4}));
    rlx_node b = rlx_graph_input(g, "b", RLX_DTYPE_F32, rlx_shape_make(2, (int64_t[]){3, 1}));
    rlx_node c = rlx_graph_mul(g, "c", a, b);
    rlx_shape s = rlx_graph_node_shape(g, c);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.d[0].k, 2);
    assert_int_equal(s.d[1].k, 3);
    assert_int_equal(s.d[2].k, 4);
    rlx_node ids = rlx_graph_input(g, "ids", RLX_DTYPE_I32, rlx_shape_make(1, (int64_t[]){4}));
    rlx_node i2 = rlx_graph_add(g, "i2", ids, ids);
    assert_int_equal(rlx_graph_node_dtype(g, i2), RLX_DTYPE_I32);
    rlx_node cm = rlx_graph_cmp(g, "cm", RLX_CMP_LT, a, b);
    assert_int_equal(rlx_graph_node_dtype(g, cm), RLX_DTYPE_U8);
    rlx_node wh = rlx_graph_where(g, "wh", cm, a, b);
    assert_int_not_equal(wh, RLX_NODE_INVALID);
    /* int + float mixes are refused */
    assert_int_equal(rlx_graph_add(g, "mix", ids, a), RLX_NODE_INVALID);
    assert_non_null(strstr(rlx_graph_error(g), "add 'mix'"));
    rlx_graph_free(g);

    g = rlx_graph_create();
    a = rlx_graph_input(g, "a", RLX_DTYPE_F32, c2(2, 3));
    b = rlx_graph_input(g, "b", RLX_DTYPE_F32, c2(2, 4));
    assert_int_equal(rlx_graph_add(g, NULL, a, b), RLX_NODE_INVALID);
    assert_non_null(strstr(rlx_graph_error(g), "do not broadcast: [2, 3] and [2, 4]"));
    rlx_graph_free(g);

    g = rlx_graph_create();
    rlx_node q = rlx_graph_input(g, "q", RLX_DTYPE_Q4_0, c2(2, 32));
    assert_int_equal(q, RLX_NODE_INVALID);
    assert_non_null(strstr(rlx_graph_error(g), "only allowed for params"));
    rlx_graph_free(g);

    g = rlx_graph_create();
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_Q4_0, c2(2, 32));
    assert_int_equal(rlx_graph_silu(g, "s", w), RLX_NODE_INVALID);
    assert_non_null(strstr(rlx_graph_error(g), "block-quantized"));
    rlx_graph_free(g);
}

static void test_kv_cache(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 64);
    int past = rlx_graph_add_symbol(g, "PAST", 448);
    assert_int_equal(rlx_graph_add_symbol(g, "SEQ", 64), seq);
    rlx_dim S = rlx_dim_sym(seq), P = rlx_dim_sym(past), T;
    assert_true(rlx_dim_add(P, S, &T));
    rlx_node q =
        rlx_graph_input(g, "q", RLX_DTYPE_F32,
                        rlx_shape_make_dims(4, (rlx_dim[]){rlx_dim_const(1), rlx_dim_const(8), S,
                                                           rlx_dim_const(16)}));
    rlx_node kn =
        rlx_graph_input(g, "k", RLX_DTYPE_F32,
                        rlx_shape_make_dims(4, (rlx_dim[]){rlx_dim_const(1), rlx_dim_const(2), S,
                                                           rlx_dim_const(16)}));
    rlx_node cache =
        rlx_graph_state(g, "cache.k", RLX_DTYPE_F16, rlx_shape_make(4, (int64_t[]){1, 2, 512, 16}));
    rlx_node upd = rlx_graph_scatter(g, "k.store", cache, kn, 2, P);
    rlx_node kk = rlx_graph_slice(g, "k.all", upd, 2, rlx_dim_const(0), T);
    rlx_shape ks = rlx_graph_node_shape(g, kk);
    assert_true(rlx_dim_equal(ks.d[2], T));
    char buf[128];
    rlx_graph_format_shape(g, &ks, buf, sizeof buf);
    assert_string_equal(buf, "[1, 2, SEQ+PAST, 16]");
    rlx_node att = rlx_graph_attention(g, "attn", q, kk, kk, RLX_NODE_INVALID,
                                       (rlx_attention_params){.mask = RLX_MASK_CAUSAL});
    assert_int_not_equal(att, RLX_NODE_INVALID);
    rlx_shape as = rlx_graph_node_shape(g, att);
    assert_int_equal(as.d[1].k, 8);
    assert_true(rlx_dim_equal(as.d[2], S));
    /* heads 8 vs 3 do not divide */
    rlx_node k3 =
        rlx_graph_input(g, "k3", RLX_DTYPE_F32,
                        rlx_shape_make_dims(4, (rlx_dim[]){rlx_dim_const(1), rlx_dim_const(3), S,
                                                           rlx_dim_const(16)}));
    assert_int_equal(
        rlx_graph_attention(g, "bad", q, k3, k3, RLX_NODE_INVALID, (rlx_attention_params){0}),
        RLX_NODE_INVALID);
    assert_non_null(strstr(rlx_graph_error(g), "attention 'bad': q heads"));
    rlx_graph_free(g);
    g = rlx_graph_create();
    seq = rlx_graph_add_symbol(g, "SEQ", 64);
    S = rlx_dim_sym(seq);
    q = rlx_graph_input(g, "q", RLX_DTYPE_F32,
                        rlx_shape_make_dims(4, (rlx_dim[]){rlx_dim_const(1), rlx_dim_const(8), S,
                                                           rlx_dim_const(16)}));

    /* the last row: a symbolic start SEQ-1 */
    rlx_dim sm1;
    assert_true(rlx_dim_sub(S, rlx_dim_const(1), &sm1));
    rlx_node last = rlx_graph_slice(g, "last", q, 2, sm1, rlx_dim_const(1));
    assert_int_not_equal(last, RLX_NODE_INVALID);
    assert_int_equal(rlx_graph_node_shape(g, last).d[2].k, 1);
    rlx_graph_free(g);

    /* a state too small for PAST+SEQ is caught */
    g = rlx_graph_create();
    seq = rlx_graph_add_symbol(g, "SEQ", 64);
    past = rlx_graph_add_symbol(g, "PAST", 500);
    rlx_node st = rlx_graph_state(g, "c", RLX_DTYPE_F32, c2(512, 4));
    rlx_node src = rlx_graph_input(g, "s", RLX_DTYPE_F32, sh2(rlx_dim_sym(seq), rlx_dim_const(4)));
    assert_int_equal(rlx_graph_scatter(g, "w", st, src, 0, rlx_dim_sym(past)), RLX_NODE_INVALID);
    assert_non_null(strstr(rlx_graph_error(g), "exceeds the state"));
    rlx_graph_free(g);
}

static void test_conv_and_misc(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_node mel =
        rlx_graph_input(g, "mel", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){1, 80, 3000}));
    rlx_node w1 =
        rlx_graph_param(g, "c1.w", RLX_DTYPE_F16, rlx_shape_make(3, (int64_t[]){384, 80, 3}));
    rlx_node w2 =
        rlx_graph_param(g, "c2.w", RLX_DTYPE_F16, rlx_shape_make(3, (int64_t[]){384, 384, 3}));
    rlx_node c1 = rlx_graph_conv1d(g, "c1", mel, w1, RLX_NODE_INVALID, 1, 1, 1, 1);
    rlx_node c2n = rlx_graph_conv1d(g, "c2", c1, w2, RLX_NODE_INVALID, 2, 1, 1, 1);
    rlx_shape s = rlx_graph_node_shape(g, c2n);
    assert_int_equal(s.d[1].k, 384);
    assert_int_equal(s.d[2].k, 1500);

    rlx_node img =
        rlx_graph_input(g, "img", RLX_DTYPE_F32, rlx_shape_make(4, (int64_t[]){1, 3, 64, 64}));
    rlx_node pw =
        rlx_graph_param(g, "pe.w", RLX_DTYPE_F32, rlx_shape_make(4, (int64_t[]){32, 3, 16, 16}));
    rlx_node pe = rlx_graph_conv2d(g, "pe", img, pw, RLX_NODE_INVALID, (int[]){16, 16},
                                   (int[]){0, 0}, (int[]){1, 1}, 1);
    s = rlx_graph_node_shape(g, pe);
    assert_int_equal(s.d[2].k, 4);
    rlx_node tw =
        rlx_graph_param(g, "up.w", RLX_DTYPE_F32, rlx_shape_make(4, (int64_t[]){32, 8, 2, 2}));
    rlx_node up = rlx_graph_conv_transpose2d(g, "up", pe, tw, RLX_NODE_INVALID, (int[]){2, 2},
                                             (int[]){0, 0}, (int[]){0, 0}, 1);
    s = rlx_graph_node_shape(g, up);
    assert_int_equal(s.d[1].k, 8);
    assert_int_equal(s.d[2].k, 8);
    rlx_node gn = rlx_graph_group_norm(g, "gn", up, 4, RLX_NODE_INVALID, RLX_NODE_INVALID, 1e-6f);
    rlx_node rs = rlx_graph_resize(g, "rs", gn, 16, 16, RLX_RESIZE_NEAREST, false);
    assert_int_equal(rlx_graph_node_shape(g, rs).d[3].k, 16);
    rlx_node pd = rlx_graph_pad(g, "pd", rs, (int64_t[]){0, 0, 1, 1}, (int64_t[]){0, 0, 1, 1}, 0);
    assert_int_equal(rlx_graph_node_shape(g, pd).d[2].k, 18);
    rlx_node pm = rlx_graph_permute(g, "pm", pd, (int[]){0, 2, 3, 1});
    assert_int_equal(rlx_graph_node_shape(g, pm).d[3].k, 8);
    rlx_node r = rlx_graph_reshape(g, "r", pm, rlx_shape_make(2, (int64_t[]){18 * 18, 8}));
    assert_int_not_equal(r, RLX_NODE_INVALID);
    rlx_node cat = rlx_graph_concat(g, "cat", 2, (rlx_node[]){r, r}, 0);
    assert_int_equal(rlx_graph_node_shape(g, cat).d[0].k, 2 * 18 * 18);
    rlx_node mx = rlx_graph_argmax(g, "am", cat, -1);
    assert_int_equal(rlx_graph_node_dtype(g, mx), RLX_DTYPE_I32);
    assert_int_equal(rlx_graph_node_shape(g, mx).rank, 1);
    rlx_node tk = rlx_graph_topk(g, "tk", cat, -1, 3, true, true);
    assert_int_equal(rlx_graph_node_shape(g, tk).d[1].k, 3);
    rlx_node emb = rlx_graph_param(g, "tok", RLX_DTYPE_Q4_K, c2(1000, 256));
    rlx_node ids = rlx_graph_input(g, "ids", RLX_DTYPE_I32, rlx_shape_make(1, (int64_t[]){5}));
    rlx_node e = rlx_graph_gather(g, "emb", emb, ids);
    assert_int_equal(rlx_graph_node_shape(g, e).d[1].k, 256);
    rlx_node pos = rlx_graph_input(g, "pos", RLX_DTYPE_I32, rlx_shape_make(1, (int64_t[]){5}));
    rlx_node x3 = rlx_graph_reshape(g, "x3", e, rlx_shape_make(3, (int64_t[]){5, 4, 64}));
    rlx_node ro = rlx_graph_rope(g, "rope", x3, pos, RLX_NODE_INVALID,
                                 (rlx_rope_params){.mode = RLX_ROPE_NEOX});
    assert_int_not_equal(ro, RLX_NODE_INVALID);
    rlx_graph_output(g, "out", ro);
    assert_null(rlx_graph_error(g));
    assert_int_equal(rlx_graph_reshape(g, "bad", e, rlx_shape_make(2, (int64_t[]){5, 255})),
                     RLX_NODE_INVALID);
    assert_non_null(strstr(rlx_graph_error(g), "reshape 'bad': element counts differ"));

    rlx_graph *c = rlx_graph_clone(g);
    assert_non_null(c);
    assert_int_equal(rlx_graph_node_count(c), rlx_graph_node_count(g));
    assert_string_equal(rlx_graph_error(c), rlx_graph_error(g));
    rlx_graph_free(c);
    rlx_graph_free(g);
}

static void test_compact_scatter_order(void **state)
{
    (void)state;
    /* A read of the state built after the scatter but not depending on it
     * must be ordered before the scatter by compaction. */
    rlx_graph *g = rlx_graph_create();
    rlx_node st = rlx_graph_state(g, "s", RLX_DTYPE_F32, c2(8, 4));
    rlx_node src = rlx_graph_input(g, "x", RLX_DTYPE_F32, c2(2, 4));
    rlx_node sc = rlx_graph_scatter(g, "w", st, src, 0, rlx_dim_const(0));
    rlx_node rd = rlx_graph_scale(g, "read", st, 2.0f, 0.0f);
    rlx_graph_output(g, "old", rd);
    rlx_graph_output(g, "new", sc);
    assert_int_equal(rlx_graph_compact(g), RLX_OK);
    int pos_w = -1, pos_r = -1;
    for (int i = 0; i < rlx_graph_node_count(g); i++) {
        if (strcmp(rlx_graph_node_name(g, i), "w") == 0)
            pos_w = i;
        if (strcmp(rlx_graph_node_name(g, i), "read") == 0)
            pos_r = i;
    }
    assert_true(pos_r >= 0 && pos_w > pos_r);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_shapes),
        cmocka_unit_test(test_broadcast_and_dtypes),
        cmocka_unit_test(test_kv_cache),
        cmocka_unit_test(test_conv_and_misc),
        cmocka_unit_test(test_compact_scatter_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
