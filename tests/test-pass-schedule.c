/* schedule + memplan: LIR homes, views, in-place, bindings, arena, segments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compile-exec.h"
#include "engine/compile/passes.h"
#include "test-util.h"

static rlx_shape c2(int64_t a, int64_t b)
{
    return rlx_shape_make(2, (int64_t[]){a, b});
}

static rlx_compile_opts opts_none(void)
{
    rlx_compile_opts o = rlx_compile_default_opts();
    o.passes = RLX_PASS_REQUIRED;
    return o;
}

static int count_home(const rlx_lir *lir, rlx_home h)
{
    int n = 0;
    for (int32_t v = 0; v < lir->n_values; v++)
        n += lir->values[v].home == h;
    return n;
}

static void test_mlp_lir(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 16);
    rlx_node x =
        rlx_graph_input(g, "x", RLX_DTYPE_F32,
                        rlx_shape_make_dims(2, (rlx_dim[]){rlx_dim_sym(seq), rlx_dim_const(8)}));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F32, c2(12, 8));
    rlx_node y = rlx_graph_matmul(g, "mm", x, w, false, true);
    rlx_node z = rlx_graph_gelu(g, "act", y, RLX_GELU_TANH);
    rlx_node r = rlx_graph_reshape(
        g, "r", z,
        rlx_shape_make_dims(3, (rlx_dim[]){rlx_dim_sym(seq), rlx_dim_const(3), rlx_dim_const(4)}));
    rlx_node sl = rlx_graph_slice(g, "sl", r, 1, rlx_dim_const(1), rlx_dim_const(2));
    rlx_graph_output(g, "y", sl);
    rlx_graph_output(g, "z", z);
    assert_null(rlx_graph_error(g));

    rlx_compile_opts o = opts_none();
    rlx_lir *lir = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, &err), RLX_OK);
    assert_int_equal(lir->n_params, 1);
    assert_string_equal(lir->params[0].name, "w");
    assert_int_equal(lir->params[0].max_bytes, 12 * 8 * 4);
    assert_int_equal(lir->n_inputs, 1);
    assert_int_equal(lir->inputs[0].max_bytes, 16 * 8 * 4);
    assert_int_equal(lir->n_outputs, 2);
    assert_string_equal(lir->outputs[0].name, "y");
    assert_int_equal(lir->n_symbols, 1);
    assert_string_equal(lir->symbols[0].name, "SEQ");
    /* z is written straight into output 1; y is a strided slice -> COPY */
    int views = 0, copies = 0;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if (lir->values[ins->out].view_of >= 0)
            views++;
        if (ins->op == RLX_OP_COPY)
            copies++;
        if (ins->op == RLX_OP_GELU) {
            assert_int_equal(lir->values[ins->out].home, RLX_HOME_OUTPUT);
            assert_int_equal(lir->values[ins->out].index, 1);
        }
        if (ins->op == RLX_OP_SLICE) {
            const rlx_lir_value *v = &lir->values[ins->out];
            assert_false(v->contiguous);
            assert_int_equal(v->offset - lir->values[v->view_of].offset, 4 * 4);
        }
    }
    assert_int_equal(views, 2);
    assert_int_equal(copies, 1);
    /* only the matmul result lives in the arena: SEQ*12 floats */
    assert_int_equal(count_home(lir, RLX_HOME_ARENA), 1);
    assert_int_equal(lir->arena_bytes, 16 * 12 * 4);
    rlx_lir_free(lir);
    rlx_graph_free(g);
}

static void test_inplace_chain(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, c2(32, 32));
    rlx_node a = rlx_graph_exp(g, "a", x);
    rlx_node b = rlx_graph_neg(g, "b", a);
    rlx_node c = rlx_graph_tanh(g, "c", b);
    rlx_node d = rlx_graph_add(g, "d", x, c); /* c dies here: commutative swap */
    rlx_node e = rlx_graph_reduce(g, "e", RLX_OP_REDUCE_SUM, d, 1, false);
    rlx_graph_output(g, "e", e);
    rlx_compile_opts o = opts_none();
    o.passes |= RLX_PASS_INPLACE;
    rlx_lir *lir = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, NULL), RLX_OK);
    /* a, b, c, d share one 4 KiB buffer */
    assert_int_equal(lir->arena_bytes, 32 * 32 * 4);
    int inplace = 0;
    for (int32_t i = 0; i < lir->n_instrs; i++)
        inplace += lir->instrs[i].in_place;
    assert_int_equal(inplace, 3);
    rlx_lir_free(lir);

    o = opts_none();
    assert_int_equal(rlx_compile(g, &o, &lir, NULL), RLX_OK);
    /* ping-pong between two buffers */
    assert_int_equal(lir->arena_bytes, 2 * 32 * 32 * 4);
    for (int32_t i = 0; i < lir->n_instrs; i++)
        assert_false(lir->instrs[i].in_place);
    rlx_lir_free(lir);
    rlx_graph_free(g);
}

static rlx_graph *kv_graph(void)
{
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 4);
    int past = rlx_graph_add_symbol(g, "PAST", 4);
    rlx_dim S = rlx_dim_sym(seq), P = rlx_dim_sym(past), T;
    rlx_dim_add(P, S, &T);
    rlx_node src = rlx_graph_input(g, "new", RLX_DTYPE_F32,
                                   rlx_shape_make_dims(2, (rlx_dim[]){S, rlx_dim_const(4)}));
    rlx_node st = rlx_graph_state(g, "cache", RLX_DTYPE_F32, c2(8, 4));
    rlx_node up = rlx_graph_scatter(g, "store", st, src, 0, P);
    rlx_node all = rlx_graph_slice(g, "all", up, 0, rlx_dim_const(0), T);
    rlx_node sum = rlx_graph_reduce(g, "sum", RLX_OP_REDUCE_SUM, all, 0, false);
    rlx_graph_output(g, "sum", sum);
    return g;
}

static void test_kv_state(void **state)
{
    (void)state;
    rlx_graph *g = kv_graph();
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_lir *lir = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, &err), RLX_OK);
    assert_int_equal(lir->n_states, 1);
    assert_int_equal(lir->states[0].max_bytes, 8 * 4 * 4);
    bool saw = false;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if (ins->op == RLX_OP_SCATTER) {
            saw = true;
            assert_true(ins->in_place);
            assert_int_equal(lir->values[ins->out].home, RLX_HOME_STATE);
            assert_int_equal(lir->values[ins->out].view_of, -1);
        }
        if (ins->op == RLX_OP_SLICE) {
            assert_int_equal(lir->values[ins->out].home, RLX_HOME_STATE);
            assert_true(lir->values[ins->out].view_of >= 0);
        }
    }
    assert_true(saw);
    rlx_lir_free(lir);

    if (!rlx_test_have_cpu()) {
        rlx_graph_free(g);
        return;
    }
    /* two steps of 2 rows each: the second sees all 4 rows */
    float rows1[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    rlx_test_tensor in = {"new", rows1};
    rlx_test_run run = {.inputs = &in, .n_inputs = 1};
    run.syms.v[0] = 2; /* SEQ */
    run.syms.v[1] = 0; /* PAST */
    void *out[1] = {0};
    int64_t ne[1];
    assert_int_equal(rlx_test_compile_run(g, o, &run, out, ne, 1, NULL, &err), RLX_OK);
    assert_int_equal(ne[0], 4);
    assert_true(fabsf(((float *)out[0])[0] - 6.0f) < 1e-6f);
    free(out[0]);
    rlx_graph_free(g);
}

/* [H, n_ctx, D] cache, read as [1, H, T, D]: the slice is strided (T < n_ctx)
 * and the reshape only adds a unit dim, so both stay views of the state (no
 * per-step copy of the whole cache) and the sum still sees the right rows. */
static void test_kv_unit_reshape_view(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 4);
    int past = rlx_graph_add_symbol(g, "PAST", 4);
    rlx_dim S = rlx_dim_sym(seq), P = rlx_dim_sym(past), T, H = rlx_dim_const(2),
            D = rlx_dim_const(4);
    rlx_dim_add(P, S, &T);
    rlx_node src =
        rlx_graph_input(g, "new", RLX_DTYPE_F32, rlx_shape_make_dims(3, (rlx_dim[]){H, S, D}));
    rlx_node st =
        rlx_graph_state(g, "cache", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){2, 8, 4}));
    rlx_node up = rlx_graph_scatter(g, "store", st, src, 1, P);
    rlx_node all = rlx_graph_slice(g, "all", up, 1, rlx_dim_const(0), T);
    rlx_node r4 = rlx_graph_reshape(g, "r4", all,
                                    rlx_shape_make_dims(4, (rlx_dim[]){rlx_dim_const(1), H, T, D}));
    rlx_node sum = rlx_graph_reduce(g, "sum", RLX_OP_REDUCE_SUM, r4, 2, false);
    rlx_graph_output(g, "sum", sum);
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_lir *lir = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, &err), RLX_OK);
    bool saw = false;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        assert_int_not_equal(ins->op, RLX_OP_COPY);
        if (ins->op == RLX_OP_RESHAPE) {
            const rlx_lir_value *v = &lir->values[ins->out];
            saw = true;
            assert_int_equal(v->home, RLX_HOME_STATE);
            assert_true(v->view_of >= 0);
            assert_int_equal(v->shape.rank, 4);
            /* T keeps the cache's row stride, D stays unit */
            assert_true(rlx_dim_is_const(v->stride[2]) && v->stride[2].k == 4);
            assert_true(rlx_dim_is_const(v->stride[1]) && v->stride[1].k == 32);
            assert_true(rlx_dim_is_const(v->stride[3]) && v->stride[3].k == 1);
        }
    }
    assert_true(saw);
    rlx_lir_free(lir);
    if (!rlx_test_have_cpu()) {
        rlx_graph_free(g);
        return;
    }
    float rows[16];
    for (int i = 0; i < 16; i++)
        rows[i] = (float)(i + 1);
    rlx_test_tensor in = {"new", rows};
    rlx_test_run run = {.inputs = &in, .n_inputs = 1};
    run.syms.v[0] = 2; /* SEQ */
    run.syms.v[1] = 0; /* PAST */
    void *out[1] = {0};
    int64_t ne[1];
    assert_int_equal(rlx_test_compile_run(g, o, &run, out, ne, 1, NULL, &err), RLX_OK);
    assert_int_equal(ne[0], 8);
    const float *y = out[0];
    /* head 0: rows (1..4) + (5..8); head 1: (9..12) + (13..16) */
    for (int d = 0; d < 4; d++) {
        assert_true(fabsf(y[d] - (float)(6 + 2 * d)) < 1e-6f);
        assert_true(fabsf(y[4 + d] - (float)(22 + 2 * d)) < 1e-6f);
    }
    free(out[0]);
    rlx_graph_free(g);
}

/* A decode step's attention output: [H, SEQ, D] permuted to [SEQ, H, D] and
 * reshaped to [SEQ, H * D]. Where SEQ is at most 1 the permuted layout is
 * the contiguous one (a single row, or none), so the reshape is a view and
 * nothing is copied; where SEQ may be 2 it is a copy. Both compute the
 * same values on the CPU. */
static void permuted_row(int64_t seq_max, bool want_view)
{
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", seq_max);
    rlx_dim S = rlx_dim_sym(seq), H = rlx_dim_const(3), D = rlx_dim_const(4);
    rlx_node x =
        rlx_graph_input(g, "x", RLX_DTYPE_F32, rlx_shape_make_dims(3, (rlx_dim[]){H, S, D}));
    rlx_node e = rlx_graph_scale(g, "e", x, 2.0f, 1.0f); /* a computed [H, SEQ, D] */
    rlx_node p = rlx_graph_permute(g, "p", e, (const int[]){1, 0, 2});
    rlx_node r =
        rlx_graph_reshape(g, "r", p, rlx_shape_make_dims(2, (rlx_dim[]){S, rlx_dim_const(12)}));
    rlx_graph_output(g, "y", rlx_graph_scale(g, "y", r, 1.0f, 0.5f));
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_lir *lir = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, &err), RLX_OK);
    bool saw = false;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        if (ins->op != RLX_OP_RESHAPE)
            continue;
        saw = true;
        assert_int_equal(lir->values[ins->out].view_of >= 0, want_view);
    }
    assert_true(saw);
    rlx_lir_free(lir);
    if (rlx_test_have_cpu()) {
        float xs[12];
        for (int i = 0; i < 12; i++)
            xs[i] = (float)i;
        rlx_test_tensor in = {"x", xs};
        rlx_test_run run = {.inputs = &in, .n_inputs = 1};
        run.syms.v[0] = 1;
        void *out[1] = {0};
        int64_t ne[1];
        assert_int_equal(rlx_test_compile_run(g, o, &run, out, ne, 1, NULL, &err), RLX_OK);
        assert_int_equal(ne[0], 12);
        for (int i = 0; i < 12; i++) /* one row: head h, dim d at h * 4 + d */
            assert_true(fabsf(((float *)out[0])[i] - (2.0f * (float)i + 1.5f)) < 1e-6f);
        free(out[0]);
    }
    rlx_graph_free(g);
}

static void test_decode_row_permute_view(void **state)
{
    (void)state;
    permuted_row(1, true);
    permuted_row(2, false);
}

static void test_segments(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, c2(4, 4));
    rlx_node a = rlx_graph_exp(g, "a", x);
    rlx_graph_set_segment(g, 1);
    rlx_node b = rlx_graph_neg(g, "b", a);
    rlx_node c = rlx_graph_add(g, "c", b, x);
    rlx_graph_output(g, "c", c);
    rlx_compile_opts o = rlx_compile_default_opts();
    rlx_lir **lirs = NULL;
    int32_t n = 0;
    rlx_error *err = NULL;
    assert_int_equal(rlx_compile_split(g, &o, &lirs, &n, &err), RLX_OK);
    assert_int_equal(n, 2);
    assert_int_equal(lirs[0]->n_outputs, 1);
    assert_string_equal(lirs[0]->outputs[0].name, "seg0:a");
    assert_int_equal(lirs[0]->n_instrs, 1);
    assert_int_equal(lirs[1]->n_inputs, 2);
    bool has_x = false, has_a = false;
    for (int i = 0; i < 2; i++) {
        has_x |= strcmp(lirs[1]->inputs[i].name, "x") == 0;
        has_a |= strcmp(lirs[1]->inputs[i].name, "seg0:a") == 0;
    }
    assert_true(has_x && has_a);
    assert_int_equal(lirs[1]->n_outputs, 1);
    assert_string_equal(lirs[1]->outputs[0].name, "c");
    rlx_lir_free_array(lirs, n);
    rlx_graph_free(g);
}

static void test_hash_and_dump(void **state)
{
    (void)state;
    rlx_graph *g1 = kv_graph(), *g2 = kv_graph();
    assert_true(rlx_graph_hash(g1) == rlx_graph_hash(g2));
    rlx_graph *g3 = rlx_graph_create();
    rlx_graph_add_symbol(g3, "SEQ", 5);
    assert_true(rlx_graph_hash(g1) != rlx_graph_hash(g3));
    rlx_compile_opts o = rlx_compile_default_opts();
    const char *path = rlx_test_tmp("dump.txt");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    o.dump_file = f;
    o.dump_after = RLX_PASS_ALL;
    o.dump_dot = true;
    rlx_lir *lir = NULL;
    assert_int_equal(rlx_compile(g1, &o, &lir, NULL), RLX_OK);
    fclose(f);
    size_t size = 0;
    char *text = rlx_test_read_file(path, &size);
    assert_non_null(text);
    text = realloc(text, size + 1);
    text[size] = 0;
    assert_non_null(strstr(text, "=== after verify ==="));
    assert_non_null(strstr(text, "=== after fusion ==="));
    assert_non_null(strstr(text, "digraph rlx"));
    assert_non_null(strstr(text, "=== lir"));
    assert_non_null(strstr(text, "scatter"));
    /* the scheduled LIR as dot too, naming the state the scatter writes */
    assert_non_null(strstr(text, "digraph lir"));
    assert_non_null(strstr(text, "state#0"));
    free(text);
    rlx_lir_free(lir);

    /* one file per pass in a directory */
    const char *dir = rlx_test_tmp("dumps");
    mkdir(dir, 0755);
    o = rlx_compile_default_opts();
    o.dump_dir = dir;
    o.dump_after = RLX_PASS_ALL;
    o.dump_dot = true;
    assert_int_equal(rlx_compile(g1, &o, &lir, NULL), RLX_OK);
    rlx_lir_free(lir);
    char p[4096];
    const char *files[] = {"00-verify.txt", "07-fusion.txt", "07-fusion.dot", "99-lir.txt",
                           "99-lir.dot"};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        size_t n = 0;
        void *d = rlx_test_read_file(p, &n);
        assert_non_null(d);
        assert_true(n > 0);
        free(d);
    }
    rlx_graph_free(g1);
    rlx_graph_free(g2);
    rlx_graph_free(g3);
}

/* Block-quantized gather table and matmul weight, a BF16 norm weight and an
 * F16 KV state, through the whole compile and the CPU backend. */
static void test_quantized_run(void **state)
{
    (void)state;
    if (!rlx_test_have_cpu())
        skip();
    /* Q8_0: 34-byte blocks: f16 d, 32 x int8 */
    enum { N = 4, K = 64, V = 6 };
    static uint8_t wq[N * (K / 32) * 34], tab[V * (K / 32) * 34];
    float wf[N * K], tf[V * K];
    for (int r = 0; r < N; r++)
        for (int b = 0; b < K / 32; b++) {
            uint8_t *blk = wq + (r * (K / 32) + b) * 34;
            uint16_t d = rlx_f32_to_f16(0.01f * (float)(r + 1));
            memcpy(blk, &d, 2);
            for (int i = 0; i < 32; i++) {
                int8_t q = (int8_t)((i * 7 + r * 3 + b) % 41 - 20);
                blk[2 + i] = (uint8_t)q;
                wf[r * K + b * 32 + i] = rlx_f16_to_f32(d) * q;
            }
        }
    for (int r = 0; r < V; r++)
        for (int b = 0; b < K / 32; b++) {
            uint8_t *blk = tab + (r * (K / 32) + b) * 34;
            uint16_t d = rlx_f32_to_f16(0.02f);
            memcpy(blk, &d, 2);
            for (int i = 0; i < 32; i++) {
                int8_t q = (int8_t)((i + r * 5) % 21 - 10);
                blk[2 + i] = (uint8_t)q;
                tf[r * K + b * 32 + i] = rlx_f16_to_f32(d) * q;
            }
        }
    uint16_t nw[K];
    for (int i = 0; i < K; i++)
        nw[i] = rlx_f32_to_bf16(1.0f + 0.01f * i);
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 8);
    rlx_dim S = rlx_dim_sym(seq);
    rlx_node ids = rlx_graph_input(g, "ids", RLX_DTYPE_I32, rlx_shape_make_dims(1, &S));
    rlx_node t = rlx_graph_param(g, "tok", RLX_DTYPE_Q8_0, rlx_shape_make(2, (int64_t[]){V, K}));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_Q8_0, rlx_shape_make(2, (int64_t[]){N, K}));
    rlx_node n = rlx_graph_param(g, "nw", RLX_DTYPE_BF16, rlx_shape_make(1, (int64_t[]){K}));
    rlx_node st = rlx_graph_state(g, "cache", RLX_DTYPE_F16, rlx_shape_make(2, (int64_t[]){8, N}));
    rlx_node x = rlx_graph_gather(g, "emb", t, ids);
    x = rlx_graph_rms_norm(g, "norm", x, n, 1e-6f);
    rlx_node y = rlx_graph_matmul(g, "mm", x, w, false, true);
    rlx_node sc = rlx_graph_scatter(g, "store", st, y, 0, rlx_dim_const(0));
    rlx_node rd = rlx_graph_slice(g, "rd", sc, 0, rlx_dim_const(0), S);
    rlx_node last = rlx_graph_slice(g, "last", rlx_graph_cast(g, "f32", rd, RLX_DTYPE_F32), 0,
                                    rlx_dim_const(1), rlx_dim_const(1));
    rlx_graph_output(g, "y", y);
    rlx_graph_output(g, "last", last);
    assert_null(rlx_graph_error(g));
    int32_t idv[3] = {2, 5, 0};
    rlx_test_tensor params[] = {{"tok", tab}, {"w", wq}, {"nw", nw}};
    rlx_test_tensor in = {"ids", idv};
    rlx_test_run run = {.params = params, .n_params = 3, .inputs = &in, .n_inputs = 1};
    run.syms.v[0] = 3;
    void *out[2];
    int64_t ne[2];
    rlx_error *err = NULL;
    rlx_lir *lir = NULL;
    rlx_status s =
        rlx_test_compile_run(g, rlx_compile_default_opts(), &run, out, ne, 2, &lir, &err);
    if (s != RLX_OK)
        fprintf(stderr, "%s\n", rlx_error_message(err));
    assert_int_equal(s, RLX_OK);
    /* the scatter writes the F16 state in place; the read-back is a view */
    assert_int_equal(lir->n_states, 1);
    rlx_lir_free(lir);
    /* reference */
    double maxd = 0;
    for (int si = 0; si < 3; si++) {
        float xr[K];
        double ms = 0;
        for (int i = 0; i < K; i++) {
            xr[i] = tf[idv[si] * K + i];
            ms += xr[i] * xr[i];
        }
        float r = 1.0f / sqrtf((float)(ms / K) + 1e-6f);
        for (int i = 0; i < K; i++)
            xr[i] = xr[i] * r * rlx_bf16_to_f32(nw[i]);
        for (int o = 0; o < N; o++) {
            double acc = 0;
            for (int i = 0; i < K; i++)
                acc += xr[i] * wf[o * K + i];
            /* quantized kernels may quantize the activations too (as ggml
             * does), so allow a relative error at that level */
            double d = fabs(acc - ((float *)out[0])[si * N + o]) / (1.0 + fabs(acc));
            if (d > maxd)
                maxd = d;
            if (si == 1) /* through the F16 state */
                assert_true(fabs(((float *)out[1])[o] - acc) < 1e-2 * (1 + fabs(acc)));
        }
    }
    assert_int_equal(ne[0], 12);
    assert_int_equal(ne[1], 4);
    assert_true(maxd < 2e-2);
    free(out[0]);
    free(out[1]);
    rlx_graph_free(g);
}

static void test_materialize(void **state)
{
    (void)state;
    /* a permuted view feeding a matmul: a backend that wants contiguous
     * operands gets a COPY in front, and the same numbers */
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, rlx_shape_make(3, (int64_t[]){2, 3, 4}));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F32, c2(5, 4));
    rlx_node p = rlx_graph_permute(g, "p", x, (int[]){1, 0, 2});
    rlx_graph_output(g, "y", rlx_graph_matmul(g, "mm", p, w, false, true));
    rlx_compile_opts o = rlx_compile_default_opts();
    o.backend = rlx_test_contiguous_backend();
    rlx_lir *lir = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, NULL), RLX_OK);
    int copies = 0;
    for (int32_t i = 0; i < lir->n_instrs; i++) {
        const rlx_lir_instr *ins = &lir->instrs[i];
        copies += ins->op == RLX_OP_COPY;
        if (ins->op == RLX_OP_MATMUL)
            assert_true(lir->values[ins->in[0]].contiguous);
    }
    assert_int_equal(copies, 1);
    rlx_lir_free(lir);
    if (rlx_test_have_cpu()) {
        float xv[24], wv[20];
        for (int i = 0; i < 24; i++)
            xv[i] = (float)i * 0.1f;
        for (int i = 0; i < 20; i++)
            wv[i] = 1.0f - (float)i * 0.05f;
        rlx_test_tensor prm = {"w", wv}, in = {"x", xv};
        rlx_test_run run = {.params = &prm, .n_params = 1, .inputs = &in, .n_inputs = 1};
        void *a[1], *b[1];
        int64_t na[1], nb[1];
        assert_int_equal(rlx_test_compile_run(g, o, &run, a, na, 1, NULL, NULL), RLX_OK);
        assert_int_equal(
            rlx_test_compile_run(g, rlx_compile_default_opts(), &run, b, nb, 1, NULL, NULL),
            RLX_OK);
        assert_true(rlx_test_max_diff(a[0], b[0], na[0]) < 1e-6f);
        free(a[0]);
        free(b[0]);
    }
    rlx_graph_free(g);
}

static void test_final_check(void **state)
{
    (void)state;
    /* the output is a transposed view: the schedule adds a COPY, which this
     * backend refuses, so the compile fails instead of handing it over */
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, c2(3, 5));
    rlx_graph_output(g, "t", rlx_graph_transpose(g, "t", rlx_graph_exp(g, "e", x), 0, 1));
    rlx_compile_opts o = rlx_compile_default_opts();
    o.backend = rlx_test_refusing_backend(1ull << RLX_OP_COPY);
    rlx_lir *lir = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_compile(g, &o, &lir, &err), RLX_ERR_UNSUPPORTED);
    assert_null(lir);
    assert_non_null(strstr(rlx_error_message(err), "refuses instruction"));
    assert_non_null(strstr(rlx_error_message(err), "copy 't'"));
    rlx_error_free(err);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_lir),
        cmocka_unit_test(test_inplace_chain),
        cmocka_unit_test(test_kv_state),
        cmocka_unit_test(test_kv_unit_reshape_view),
        cmocka_unit_test(test_decode_row_permute_view),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_hash_and_dump),
        cmocka_unit_test(test_quantized_run),
        cmocka_unit_test(test_final_check),
        cmocka_unit_test(test_materialize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
