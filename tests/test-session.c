/* rlx_session (budget, weights, state, cancel, compile) and rlx_worker. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backends/base/dtype.h"
#include "engine/compile/compile.h"
#include "engine/formats/gguf.h"
#include "engine/formats/safetensors.h"
#include "engine/ir/graph.h"
#include "engine/runtime/session.h"
#include "engine/runtime/worker.h"
#include "test-util.h"

static rlx_session *new_session(uint64_t budget)
{
    rlx_session_params sp = rlx_session_default_params();
    sp.device = "cpu";
    sp.n_threads = 2;
    sp.memory_budget = budget;
    rlx_session *s = NULL;
    rlx_error *err = NULL;
    if (rlx_session_create(&sp, &s, &err) != RLX_OK)
        fail_msg("session: %s", rlx_error_message(err));
    return s;
}

static void test_budget_message(void **state)
{
    (void)state;
    rlx_session *s = new_session(1ull << 30); /* 1.0 GiB */
    /* 1.2 GiB of weights (claimed: the budget check fails before any byte
     * is touched), 256 MiB of state, 80 MiB of arena */
    static float tiny[4];
    int64_t wn[2] = {300, 1073742}, sn[1] = {67108864}, an[1] = {20971520}, on[1] = {4};
    uint64_t wbytes = 300ull * 1073742 * 4;
    rlx_error *err = NULL;
    assert_int_equal(rlx_session_add_weight(s, "w", RLX_DTYPE_F32, 2, wn, tiny, wbytes, &err),
                     RLX_OK);
    rlx_lir_value v[4] = {
        rlx_test_val(RLX_DTYPE_F32, 2, wn, RLX_HOME_PARAM, 0, 0),
        rlx_test_val(RLX_DTYPE_F32, 1, sn, RLX_HOME_STATE, 0, 0),
        rlx_test_val(RLX_DTYPE_F32, 1, an, RLX_HOME_ARENA, 0, 0),
        rlx_test_val(RLX_DTYPE_F32, 1, on, RLX_HOME_OUTPUT, 0, 0),
    };
    rlx_lir_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.op = RLX_OP_COPY;
    ins.n_in = 1;
    ins.in[0] = 2;
    ins.out = 2;
    rlx_lir_binding pb = rlx_test_bind("w", RLX_DTYPE_F32, 2, wn, wbytes);
    rlx_lir_binding sb = rlx_test_bind("kv", RLX_DTYPE_F32, 1, sn, 256ull << 20);
    rlx_lir_binding ob = rlx_test_bind("y", RLX_DTYPE_F32, 1, on, 16);
    rlx_lir lir;
    memset(&lir, 0, sizeof lir);
    lir.n_values = 4;
    lir.values = v;
    lir.n_instrs = 1;
    lir.instrs = &ins;
    lir.n_params = lir.n_states = lir.n_outputs = 1;
    lir.params = &pb;
    lir.states = &sb;
    lir.outputs = &ob;
    lir.arena_bytes = 80ull << 20;
    rlx_session_program *p = NULL;
    assert_int_equal(rlx_session_load_lir(s, &lir, &p, &err), RLX_ERR_BUDGET);
    assert_null(p);
    assert_string_equal(rlx_error_message(err),
                        "needs 1.2 GiB of weights + 256 MiB of KV cache + 80 MiB of activations "
                        "= 1.5 GiB, but the budget is 1.0 GiB");
    rlx_error_clear(&err);
    /* nothing was allocated */
    rlx_session_memory_info m = rlx_session_memory(s);
    assert_int_equal(m.weights_bytes, 0);
    assert_int_equal(m.state_bytes, 0);
    assert_int_equal(m.arena_bytes, 0);
    assert_int_equal(m.budget_bytes, 1ull << 30);
    rlx_session_free(s);

    char buf[32];
    assert_string_equal(rlx_format_bytes(100, buf, sizeof buf), "100 bytes");
    assert_string_equal(rlx_format_bytes(3 << 20, buf, sizeof buf), "3.0 MiB");
    assert_string_equal(rlx_format_bytes(2048, buf, sizeof buf), "2 KiB");
}

static const float acc_w[4] = {1, 2, 3, 4};

static void test_state_persists(void **state)
{
    (void)state;
    rlx_session *s = new_session(0);
    rlx_error *err = NULL;
    int64_t n[1] = {4};
    assert_int_equal(rlx_session_add_weight(s, "w", RLX_DTYPE_F32, 1, n, acc_w, 16, &err), RLX_OK);
    rlx_test_acc_prog a, b;
    rlx_test_make_acc(&a, "acc");
    rlx_test_make_acc(&b, "acc");
    rlx_session_program *pa = NULL, *pb = NULL;
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &pa, &err), RLX_OK);
    assert_int_equal(rlx_session_load_lir(s, &b.lir, &pb, &err), RLX_OK);
    assert_int_equal(rlx_session_program_input(pa, "x"), 0);
    assert_int_equal(rlx_session_program_output(pa, "y"), 0);
    assert_int_equal(rlx_session_program_output(pa, "nope"), -1);
    float x[4] = {1, 1, 1, 1}, y[4];
    const void *in[1] = {x};
    void *out[1] = {y};
    for (int run = 1; run <= 3; run++) {
        /* alternate programs: they share the state by name */
        assert_int_equal(rlx_session_run(s, run % 2 ? pa : pb, NULL, in, out, &err), RLX_OK);
        for (int i = 0; i < 4; i++)
            assert_true(y[i] == (float)run * acc_w[i]);
    }
    float acc[4];
    assert_int_equal(rlx_session_state_read(s, "acc", 0, acc, 16, &err), RLX_OK);
    assert_true(acc[0] == 3.0f && acc[3] == 3.0f);
    assert_int_equal(rlx_session_state_reset(s, "acc", &err), RLX_OK);
    assert_int_equal(rlx_session_run(s, pa, NULL, in, out, &err), RLX_OK);
    assert_true(y[1] == 2.0f);
    float seven[4] = {7, 7, 7, 7};
    assert_int_equal(rlx_session_state_write(s, "acc", 0, seven, 16, &err), RLX_OK);
    assert_int_equal(rlx_session_run(s, pa, NULL, in, out, &err), RLX_OK);
    assert_true(y[0] == 8.0f);
    assert_int_equal(rlx_session_state_read(s, "nope", 0, acc, 16, &err), RLX_ERR_NOT_FOUND);
    rlx_error_clear(&err);

    /* memory: one 16-byte weight and one 16-byte state, counted once */
    rlx_session_memory_info m = rlx_session_memory(s);
    assert_int_equal(m.weights_bytes, 16);
    assert_int_equal(m.state_bytes, 16);
    assert_int_equal(m.arena_bytes, 0);

    /* timing through the session */
    rlx_session_program_set_timing(pa, true);
    assert_int_equal(rlx_session_run(s, pa, NULL, in, out, &err), RLX_OK);
    double ms[2];
    assert_int_equal(rlx_session_program_timings(pa, ms, 2, &err), RLX_OK);
    assert_true(ms[0] >= 0 && ms[1] >= 0);

    rlx_session_unload(s, pb);
    assert_int_equal(rlx_session_run(s, pa, NULL, in, out, &err), RLX_OK);
    rlx_session_free(s);
}

/* Profiling: every program, also one loaded after it is enabled, adds its
 * instructions to per-op totals; enabling again clears them, and nothing is
 * counted while it is off. */
static void test_profiling(void **state)
{
    (void)state;
    rlx_session *s = new_session(0);
    rlx_error *err = NULL;
    int64_t n[1] = {4};
    assert_int_equal(rlx_session_add_weight(s, "w", RLX_DTYPE_F32, 1, n, acc_w, 16, &err), RLX_OK);
    rlx_test_acc_prog a, b;
    rlx_test_make_acc(&a, "acc");
    rlx_test_make_acc(&b, "acc");
    rlx_session_program *pa = NULL, *pb = NULL;
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &pa, &err), RLX_OK);
    float x[4] = {1, 1, 1, 1}, y[4];
    const void *in[1] = {x};
    void *out[1] = {y};
    assert_int_equal(rlx_session_run(s, pa, NULL, in, out, &err), RLX_OK);
    assert_int_equal(rlx_session_profile(s, NULL, 0), 0); /* off: nothing */
    rlx_session_set_profiling(s, true);
    assert_int_equal(rlx_session_load_lir(s, &b.lir, &pb, &err), RLX_OK);
    for (int run = 0; run < 3; run++)
        assert_int_equal(rlx_session_run(s, run == 1 ? pb : pa, NULL, in, out, &err), RLX_OK);
    rlx_session_op_profile prof[RLX_OP_COUNT];
    assert_int_equal(rlx_session_profile(s, prof, RLX_OP_COUNT), 2);
    /* rlx_op order: ADD before MUL; one of each per run */
    assert_int_equal(prof[0].op, RLX_OP_ADD);
    assert_int_equal(prof[1].op, RLX_OP_MUL);
    assert_int_equal(prof[0].count, 3);
    assert_int_equal(prof[1].count, 3);
    assert_true(prof[0].ms >= 0 && prof[1].ms >= 0);
    assert_int_equal(rlx_session_profile(s, prof, 1), 2); /* the count, one copied */
    rlx_session_set_profiling(s, true);
    assert_int_equal(rlx_session_profile(s, prof, RLX_OP_COUNT), 0);
    rlx_session_set_profiling(s, false);
    assert_int_equal(rlx_session_run(s, pa, NULL, in, out, &err), RLX_OK);
    assert_int_equal(rlx_session_profile(s, prof, RLX_OP_COUNT), 0);
    rlx_session_free(s);
}

static void test_weight_errors(void **state)
{
    (void)state;
    rlx_session *s = new_session(0);
    rlx_error *err = NULL;
    rlx_test_acc_prog a;
    rlx_test_make_acc(&a, "acc");
    rlx_session_program *p = NULL;
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &p, &err), RLX_ERR_NOT_FOUND);
    assert_non_null(strstr(rlx_error_message(err), "'w'"));
    rlx_error_clear(&err);
    int64_t n5[1] = {5}, n4[1] = {4};
    static const uint16_t h[4];
    assert_int_equal(rlx_session_add_weight(s, "w", RLX_DTYPE_F16, 1, n4, h, 8, &err), RLX_OK);
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &p, &err), RLX_ERR_TYPE);
    assert_non_null(strstr(rlx_error_message(err), "F16"));
    rlx_error_clear(&err);
    rlx_session_free(s);

    s = new_session(0);
    static const float f5[5];
    assert_int_equal(rlx_session_add_weight(s, "w", RLX_DTYPE_F32, 1, n5, f5, 20, &err), RLX_OK);
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &p, &err), RLX_ERR_TYPE);
    assert_non_null(strstr(rlx_error_message(err), "[5]"));
    rlx_error_clear(&err);
    rlx_session_free(s);

    /* devices: a clear error for an unknown one */
    rlx_session_params sp = rlx_session_default_params();
    sp.device = "gpu:0";
    assert_int_equal(rlx_session_create(&sp, &s, &err), RLX_ERR_INVALID_ARG);
    assert_null(s);
    rlx_error_clear(&err);
}

static void test_cancel(void **state)
{
    (void)state;
    rlx_session *s = new_session(0);
    rlx_error *err = NULL;
    int64_t n[1] = {4};
    assert_int_equal(rlx_session_add_weight(s, "w", RLX_DTYPE_F32, 1, n, acc_w, 16, &err), RLX_OK);
    rlx_test_acc_prog a;
    rlx_test_make_acc(&a, "acc");
    rlx_session_program *p = NULL;
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &p, &err), RLX_OK);
    float x[4] = {1, 1, 1, 1}, y[4];
    const void *in[1] = {x};
    void *out[1] = {y};
    rlx_session_cancel(s, true);
    assert_int_equal(rlx_session_run(s, p, NULL, in, out, &err), RLX_ERR_CANCELLED);
    rlx_error_clear(&err);
    rlx_session_cancel(s, false);
    assert_int_equal(rlx_session_run(s, p, NULL, in, out, &err), RLX_OK);
    /* an external flag */
    volatile int flag = 1;
    rlx_session_set_cancel_flag(s, &flag);
    assert_int_equal(rlx_session_run(s, p, NULL, in, out, &err), RLX_ERR_CANCELLED);
    rlx_error_clear(&err);
    flag = 0;
    assert_int_equal(rlx_session_run(s, p, NULL, in, out, &err), RLX_OK);
    rlx_session_set_cancel_flag(s, NULL);
    rlx_session_free(s);
}

static bool stop_progress(void *user, const char *stage, double fraction)
{
    (void)stage;
    (void)fraction;
    int *calls = user;
    return ++*calls < 1;
}

static void test_progress_abort(void **state)
{
    (void)state;
    rlx_session *s = new_session(0);
    rlx_error *err = NULL;
    int64_t n[1] = {4};
    assert_int_equal(rlx_session_add_weight(s, "w", RLX_DTYPE_F32, 1, n, acc_w, 16, &err), RLX_OK);
    int calls = 0;
    rlx_session_set_progress(s, stop_progress, &calls);
    rlx_test_acc_prog a;
    rlx_test_make_acc(&a, "acc");
    rlx_session_program *p = NULL;
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &p, &err), RLX_ERR_CANCELLED);
    assert_true(calls >= 1);
    rlx_error_clear(&err);
    rlx_session_set_progress(s, NULL, NULL);
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &p, &err), RLX_OK);
    rlx_session_free(s);
}

/* Graph -> rlx_compile -> program, cached by hash; runs at two lengths. */
static void test_compile(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    int seq = rlx_graph_add_symbol(g, "SEQ", 8);
    rlx_node x =
        rlx_graph_input(g, "x", RLX_DTYPE_F32,
                        rlx_shape_make_dims(2, (rlx_dim[]){rlx_dim_sym(seq), rlx_dim_const(4)}));
    rlx_node w = rlx_graph_param(g, "w", RLX_DTYPE_F32, rlx_shape_make(2, (int64_t[]){3, 4}));
    rlx_node y = rlx_graph_matmul(g, "mm", x, w, false, true);
    rlx_graph_output(g, "y", rlx_graph_scale(g, NULL, y, 2.0f, 1.0f));
    assert_int_equal(rlx_graph_status(g), RLX_OK);

    rlx_session *s = new_session(0);
    rlx_error *err = NULL;
    static const float wv[12] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1};
    assert_int_equal(
        rlx_session_add_weight(s, "w", RLX_DTYPE_F32, 2, (int64_t[]){3, 4}, wv, 48, &err), RLX_OK);
    rlx_session_program *p = NULL, *p2 = NULL;
    rlx_status st = rlx_session_compile(s, g, &p, &err);
    if (st == RLX_ERR_UNSUPPORTED) { /* a tree without the compiler yet */
        print_message("compile: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        rlx_session_free(s);
        rlx_graph_free(g);
        skip();
    }
    if (st != RLX_OK)
        fail_msg("compile: %s", rlx_error_message(err));
    assert_int_equal(rlx_session_compile(s, g, &p2, &err), RLX_OK);
    assert_ptr_equal(p, p2); /* cached */
    int si = rlx_session_program_symbol(p, "SEQ");
    assert_true(si >= 0);
    float xin[8 * 4], yout[8 * 3];
    for (int i = 0; i < 32; i++)
        xin[i] = (float)i;
    for (int len = 1; len <= 8; len += 7) {
        rlx_sym_values sv = {{0}};
        sv.v[si] = len;
        assert_int_equal(rlx_session_program_input_bytes(p, 0, &sv), (uint64_t)len * 16);
        const void *in[1] = {xin};
        void *out[1] = {yout};
        if (rlx_session_run(s, p, &sv, in, out, &err) != RLX_OK)
            fail_msg("run: %s", rlx_error_message(err));
        for (int r = 0; r < len; r++) {
            const float *xr = xin + r * 4;
            assert_true(yout[r * 3 + 0] == 2 * xr[0] + 1);
            assert_true(yout[r * 3 + 1] == 2 * xr[1] + 1);
            assert_true(yout[r * 3 + 2] == 2 * (xr[0] + xr[1] + xr[2] + xr[3]) + 1);
        }
    }
    rlx_sym_values big = {{0}};
    big.v[si] = 9;
    const void *in[1] = {xin};
    void *out[1] = {yout};
    assert_int_equal(rlx_session_run(s, p, &big, in, out, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "SEQ = 9"));
    rlx_error_clear(&err);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* y[1, 3] = x[1, 4] . w^T with w [3, 4] from a file: GGUF ne {4, 3} is the
 * row-major shape [3, 4]; safetensors stores [3, 4] as is. */
static void mm_lir(rlx_test_acc_prog *a, rlx_dtype wdt)
{
    memset(a, 0, sizeof *a);
    int64_t xn[2] = {1, 4}, wn[2] = {3, 4}, yn[2] = {1, 3};
    a->v[0] = rlx_test_val(RLX_DTYPE_F32, 2, xn, RLX_HOME_INPUT, 0, 0);
    a->v[1] = rlx_test_val(wdt, 2, wn, RLX_HOME_PARAM, 0, 0);
    a->v[2] = rlx_test_val(RLX_DTYPE_F32, 2, yn, RLX_HOME_OUTPUT, 0, 0);
    a->ins[0].op = RLX_OP_MATMUL;
    a->ins[0].p.matmul.trans_b = true;
    a->ins[0].n_in = 2;
    a->ins[0].in[0] = 0;
    a->ins[0].in[1] = 1;
    a->ins[0].out = 2;
    a->pb = rlx_test_bind("blk.0.w", wdt, 2, wn, 12 * (wdt == RLX_DTYPE_F32 ? 4 : 2));
    a->ib = rlx_test_bind("x", RLX_DTYPE_F32, 2, xn, 16);
    a->ob = rlx_test_bind("y", RLX_DTYPE_F32, 2, yn, 12);
    a->lir.n_values = 3;
    a->lir.values = a->v;
    a->lir.n_instrs = 1;
    a->lir.instrs = a->ins;
    a->lir.n_params = a->lir.n_inputs = a->lir.n_outputs = 1;
    a->lir.params = &a->pb;
    a->lir.inputs = &a->ib;
    a->lir.outputs = &a->ob;
}

static void check_mm(rlx_session *s, rlx_test_acc_prog *a)
{
    rlx_error *err = NULL;
    rlx_session_program *p = NULL;
    if (rlx_session_load_lir(s, &a->lir, &p, &err) != RLX_OK)
        fail_msg("load: %s", rlx_error_message(err));
    float x[4] = {1, 10, 100, 1000}, y[3];
    const void *in[1] = {x};
    void *out[1] = {y};
    assert_int_equal(rlx_session_run(s, p, NULL, in, out, &err), RLX_OK);
    /* w[n][k] = n * 4 + k */
    for (int n = 0; n < 3; n++) {
        float want = 0;
        for (int k = 0; k < 4; k++)
            want += x[k] * (float)(n * 4 + k);
        assert_true(y[n] == want);
    }
    rlx_session_memory_info m = rlx_session_memory(s);
    assert_true(m.weights_bytes == 48 || m.weights_bytes == 24);
}

static void test_weights_from_files(void **state)
{
    (void)state;
    float wf[12];
    uint16_t wh[12];
    for (int i = 0; i < 12; i++) {
        wf[i] = (float)i;
        wh[i] = rlx_f32_to_f16((float)i);
    }
    rlx_error *err = NULL;

    /* GGUF */
    rlx_gguf_writer *gw = rlx_gguf_writer_create();
    uint64_t ne[2] = {4, 3};
    assert_int_equal(rlx_gguf_writer_add_tensor(gw, "blk.0.w", RLX_DTYPE_F32, 2, ne, wf, 48),
                     RLX_OK);
    void *img = NULL;
    size_t size = 0;
    assert_int_equal(rlx_gguf_writer_to_memory(gw, &img, &size, &err), RLX_OK);
    rlx_gguf_writer_free(gw);
    rlx_gguf *g = NULL;
    assert_int_equal(rlx_gguf_open_memory(img, size, "mem.gguf", &g, &err), RLX_OK);
    rlx_session *s = new_session(0);
    assert_int_equal(rlx_session_add_gguf(s, g, &err), RLX_OK);
    rlx_test_acc_prog a;
    mm_lir(&a, RLX_DTYPE_F32);
    check_mm(s, &a);
    rlx_session_free(s);

    /* the same file read as [4, 3] does not fit a [3, 4] binding */
    s = new_session(0);
    assert_int_equal(rlx_session_add_gguf(s, g, &err), RLX_OK);
    a.pb.shape.d[0] = rlx_dim_const(4);
    a.pb.shape.d[1] = rlx_dim_const(3);
    rlx_session_program *p = NULL;
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &p, &err), RLX_ERR_TYPE);
    assert_non_null(strstr(rlx_error_message(err), "[3, 4]"));
    rlx_error_clear(&err);
    rlx_session_free(s);
    rlx_gguf_close(g);
    free(img);

    /* safetensors (F16) */
    const char *hdr = "{\"blk.0.w\":{\"dtype\":\"F16\",\"shape\":[3,4],"
                      "\"data_offsets\":[0,24]}}";
    size_t hl = strlen(hdr);
    size_t total = 8 + hl + 24;
    uint8_t *st_img = calloc(1, total);
    uint64_t hl64 = hl;
    memcpy(st_img, &hl64, 8);
    memcpy(st_img + 8, hdr, hl);
    memcpy(st_img + 8 + hl, wh, 24);
    rlx_safetensors *st = NULL;
    if (rlx_safetensors_open_memory(st_img, total, "mem.safetensors", &st, &err) != RLX_OK)
        fail_msg("safetensors: %s", rlx_error_message(err));
    s = new_session(0);
    assert_int_equal(rlx_session_add_safetensors(s, st, &err), RLX_OK);
    mm_lir(&a, RLX_DTYPE_F16);
    check_mm(s, &a);
    rlx_session_free(s);
    rlx_safetensors_close(st);
    free(st_img);
}

/* A safetensors image holding "blk.0.w" [3, 4] F16 with w[n][k] = scale * (n * 4 + k). */
static uint8_t *st_image(float scale, size_t *size)
{
    const char *hdr = "{\"blk.0.w\":{\"dtype\":\"F16\",\"shape\":[3,4],"
                      "\"data_offsets\":[0,24]}}";
    uint64_t hl = strlen(hdr);
    *size = 8 + hl + 24;
    uint8_t *img = calloc(1, *size);
    assert_non_null(img);
    memcpy(img, &hl, 8);
    memcpy(img + 8, hdr, hl);
    for (int i = 0; i < 12; i++) {
        uint16_t h = rlx_f32_to_f16(scale * (float)i);
        memcpy(img + 8 + hl + 2 * i, &h, 2);
    }
    return img;
}

/* Two files with the same tensor names (TAEF2's encoder and decoder) are told
 * apart by prefixes; a full name provided twice is an error, not "first wins". */
static void test_weight_prefixes(void **state)
{
    (void)state;
    rlx_error *err = NULL;
    size_t n_enc, n_dec;
    uint8_t *enc_img = st_image(0.0f, &n_enc), *dec_img = st_image(1.0f, &n_dec);
    rlx_safetensors *enc = NULL, *dec = NULL;
    assert_int_equal(rlx_safetensors_open_memory(enc_img, n_enc, "enc.safetensors", &enc, &err),
                     RLX_OK);
    assert_int_equal(rlx_safetensors_open_memory(dec_img, n_dec, "dec.safetensors", &dec, &err),
                     RLX_OK);

    rlx_session *s = new_session(0);
    assert_int_equal(rlx_session_add_safetensors_prefixed(s, enc, "enc.", &err), RLX_OK);
    assert_int_equal(rlx_session_add_safetensors_prefixed(s, dec, "dec.", &err), RLX_OK);
    /* the decoder's values although the encoder was added first */
    rlx_test_acc_prog a;
    mm_lir(&a, RLX_DTYPE_F16);
    a.pb.name = "dec.blk.0.w";
    check_mm(s, &a);
    /* the bare name is no longer provided */
    mm_lir(&a, RLX_DTYPE_F16);
    rlx_session_program *p = NULL;
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &p, &err), RLX_ERR_NOT_FOUND);
    assert_null(p);
    rlx_error_clear(&err);

    /* the same full name again: refused, naming both sources, and nothing added */
    assert_int_equal(rlx_session_add_safetensors_prefixed(s, enc, "dec.", &err),
                     RLX_ERR_INVALID_ARG);
    assert_string_equal(rlx_error_message(err), "weight 'dec.blk.0.w' is provided by both "
                                                "dec.safetensors and enc.safetensors");
    rlx_error_clear(&err);
    int64_t dims[2] = {3, 4};
    uint16_t zeros[12] = {0};
    assert_int_equal(
        rlx_session_add_weight(s, "enc.blk.0.w", RLX_DTYPE_F16, 2, dims, zeros, sizeof zeros, &err),
        RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "'enc.blk.0.w' is provided by both"));
    rlx_error_clear(&err);
    /* an empty prefix is no prefix */
    assert_int_equal(rlx_session_add_safetensors_prefixed(s, dec, "", &err), RLX_OK);
    assert_int_equal(rlx_session_add_safetensors(s, enc, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    mm_lir(&a, RLX_DTYPE_F16);
    check_mm(s, &a);
    rlx_session_free(s);

    assert_int_equal(rlx_session_add_safetensors_prefixed(NULL, enc, "x.", &err),
                     RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    rlx_safetensors_close(enc);
    rlx_safetensors_close(dec);
    free(enc_img);
    free(dec_img);
}

/* A KV-cache style program compiled from a graph: each run appends x
 * [SEQ, 4] to a state kv [12, 4] at PAST and returns the column sums of
 * kv[0 : PAST+SEQ]; the state carries over between runs. */
static void test_compile_state(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_create();
    int past = rlx_graph_add_symbol(g, "PAST", 8);
    int seq = rlx_graph_add_symbol(g, "SEQ", 4);
    rlx_dim total;
    assert_true(rlx_dim_add(rlx_dim_sym(past), rlx_dim_sym(seq), &total));
    rlx_node kv = rlx_graph_state(g, "kv", RLX_DTYPE_F32, rlx_shape_make(2, (int64_t[]){12, 4}));
    rlx_node x =
        rlx_graph_input(g, "x", RLX_DTYPE_F32,
                        rlx_shape_make_dims(2, (rlx_dim[]){rlx_dim_sym(seq), rlx_dim_const(4)}));
    rlx_node upd = rlx_graph_scatter(g, "append", kv, x, 0, rlx_dim_sym(past));
    rlx_node live = rlx_graph_slice(g, "live", upd, 0, rlx_dim_const(0), total);
    rlx_graph_output(g, "sums", rlx_graph_reduce(g, "sum", RLX_OP_REDUCE_SUM, live, 0, false));
    if (rlx_graph_status(g) != RLX_OK)
        fail_msg("graph: %s", rlx_graph_error(g));

    rlx_session *s = new_session(0);
    rlx_error *err = NULL;
    rlx_session_program *p = NULL;
    if (rlx_session_compile(s, g, &p, &err) != RLX_OK)
        fail_msg("compile: %s", rlx_error_message(err));
    int ip = rlx_session_program_symbol(p, "PAST"), is = rlx_session_program_symbol(p, "SEQ");
    assert_true(ip >= 0 && is >= 0);
    float want[4] = {0}, xs[4 * 4], sums[4];
    int at = 0, steps[3] = {3, 1, 4};
    for (int k = 0; k < 3; k++) {
        int n = steps[k];
        for (int i = 0; i < n * 4; i++) {
            xs[i] = (float)(at * 4 + i + 1);
            want[i % 4] += xs[i];
        }
        rlx_sym_values sv = {{0}};
        sv.v[ip] = at;
        sv.v[is] = n;
        const void *in[1] = {xs};
        void *out[1] = {sums};
        if (rlx_session_run(s, p, &sv, in, out, &err) != RLX_OK)
            fail_msg("run %d: %s", k, rlx_error_message(err));
        for (int d = 0; d < 4; d++)
            assert_true(sums[d] == want[d]);
        at += n;
    }
    /* a new conversation */
    assert_int_equal(rlx_session_state_reset(s, NULL, &err), RLX_OK);
    rlx_sym_values sv = {{0}};
    sv.v[ip] = 0;
    sv.v[is] = 1;
    float one[4] = {1, 2, 3, 4};
    const void *in[1] = {one};
    void *out[1] = {sums};
    assert_int_equal(rlx_session_run(s, p, &sv, in, out, &err), RLX_OK);
    assert_true(sums[0] == 1 && sums[3] == 4);
    rlx_session_memory_info m = rlx_session_memory(s);
    assert_int_equal(m.state_bytes, 12 * 4 * 4);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* ---- worker ---------------------------------------------------------------- */

typedef struct log_t {
    pthread_mutex_t mu;
    int order[64];
    int n_order;
    int done[64];
    rlx_status done_status[64];
    int n_done;
    int started[64];
    int n_started;
    int events;
    int mem_events;
    uint64_t mem_weights;
    int freed;
} log_t;

static void on_start(void *user, uint64_t job)
{
    log_t *l = user;
    pthread_mutex_lock(&l->mu);
    l->started[l->n_started++] = (int)job;
    pthread_mutex_unlock(&l->mu);
}

static void on_done(void *user, uint64_t job, rlx_status st, const char *msg)
{
    log_t *l = user;
    pthread_mutex_lock(&l->mu);
    l->done[l->n_done] = (int)job;
    l->done_status[l->n_done++] = st;
    pthread_mutex_unlock(&l->mu);
    if (st != RLX_OK)
        assert_non_null(msg);
}

static void on_event(void *user, uint64_t job, int kind, const void *data, size_t size)
{
    (void)job;
    (void)data;
    (void)size;
    log_t *l = user;
    if (kind == RLX_WORKER_EVENT_TOKEN)
        l->events++;
    if (kind == RLX_WORKER_EVENT_MEMORY) {
        assert_int_equal(size, sizeof(rlx_session_memory_info));
        l->mem_events++;
        l->mem_weights = ((const rlx_session_memory_info *)data)->weights_bytes;
    }
}

typedef struct job_arg {
    log_t *log;
    int tag;
} job_arg;

static void free_arg(void *p)
{
    job_arg *a = p;
    pthread_mutex_lock(&a->log->mu);
    a->log->freed++;
    pthread_mutex_unlock(&a->log->mu);
    free(a);
}

static rlx_status record_job(rlx_worker *w, void *data, rlx_error **err)
{
    (void)err;
    job_arg *a = data;
    a->log->order[a->log->n_order++] = a->tag;
    rlx_worker_emit(w, RLX_WORKER_EVENT_TOKEN, "t", 1);
    return a->tag == 3 ? rlx_error_set(err, RLX_ERR_FORMAT, "job 3 fails") : RLX_OK;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static rlx_status wait_for_cancel(rlx_worker *w, void *data, rlx_error **err)
{
    (void)data;
    for (int i = 0; i < 20000; i++) {
        if (!rlx_worker_progress(w, "waiting", 0.5))
            return rlx_error_set(err, RLX_ERR_CANCELLED, "cancelled while waiting");
        sleep_ms(1);
    }
    return RLX_OK;
}

static job_arg *arg(log_t *l, int tag)
{
    job_arg *a = calloc(1, sizeof *a);
    a->log = l;
    a->tag = tag;
    return a;
}

static void test_worker_order(void **state)
{
    (void)state;
    log_t l;
    memset(&l, 0, sizeof l);
    pthread_mutex_init(&l.mu, NULL);
    rlx_worker_callbacks cb = {
        .on_start = on_start, .on_done = on_done, .on_event = on_event, .user = &l};
    rlx_worker *w = NULL;
    assert_int_equal(rlx_worker_create(NULL, &cb, &w, NULL), RLX_OK);
    uint64_t ids[10];
    for (int i = 0; i < 10; i++)
        ids[i] = rlx_worker_submit(w, record_job, arg(&l, i), free_arg);
    rlx_worker_wait_idle(w);
    assert_int_equal(l.n_order, 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(l.order[i], i);
        assert_int_equal(l.done[i], (int)ids[i]);
        assert_int_equal(l.done_status[i], i == 3 ? RLX_ERR_FORMAT : RLX_OK);
    }
    assert_int_equal(l.events, 10);
    assert_int_equal(l.freed, 10);
    rlx_worker_free(w);
    pthread_mutex_destroy(&l.mu);
}

static void test_worker_cancel_shutdown(void **state)
{
    (void)state;
    log_t l;
    memset(&l, 0, sizeof l);
    pthread_mutex_init(&l.mu, NULL);
    rlx_session *s = new_session(0);
    rlx_worker_callbacks cb = {.on_start = on_start, .on_done = on_done, .user = &l};
    rlx_worker *w = NULL;
    assert_int_equal(rlx_worker_create(s, &cb, &w, NULL), RLX_OK);
    assert_ptr_equal(rlx_worker_session(w), s);

    /* cancel a running job */
    uint64_t a = rlx_worker_submit(w, wait_for_cancel, arg(&l, 0), free_arg);
    uint64_t b = rlx_worker_submit(w, record_job, arg(&l, 1), free_arg);
    while (1) { /* until it started */
        pthread_mutex_lock(&l.mu);
        int n = l.n_started;
        pthread_mutex_unlock(&l.mu);
        if (n)
            break;
        sleep_ms(1);
    }
    assert_true(rlx_worker_cancel(w, a));
    rlx_worker_wait_idle(w);
    assert_int_equal(l.done[0], (int)a);
    assert_int_equal(l.done_status[0], RLX_ERR_CANCELLED);
    assert_int_equal(l.done[1], (int)b); /* the next job still runs */
    assert_int_equal(l.done_status[1], RLX_OK);

    /* cancel a queued job: no start, CANCELLED */
    uint64_t c = rlx_worker_submit(w, wait_for_cancel, arg(&l, 2), free_arg);
    uint64_t d = rlx_worker_submit(w, record_job, arg(&l, 3), free_arg);
    assert_true(rlx_worker_cancel(w, d));
    assert_false(rlx_worker_cancel(w, 9999));
    /* shutdown with one running (c) and more queued */
    rlx_worker_submit(w, record_job, arg(&l, 4), free_arg);
    rlx_worker_submit(w, record_job, arg(&l, 5), free_arg);
    while (1) {
        pthread_mutex_lock(&l.mu);
        int n = l.n_started;
        pthread_mutex_unlock(&l.mu);
        if (n == 3)
            break;
        sleep_ms(1);
    }
    rlx_worker_free(w);
    /* every job got exactly one on_done and its data freed */
    assert_int_equal(l.n_done, 6);
    assert_int_equal(l.freed, 6);
    for (int i = 2; i < 6; i++)
        if (l.done[i] != (int)c)
            assert_int_equal(l.done_status[i], RLX_ERR_CANCELLED);
    assert_int_equal(l.n_started, 3); /* a, b, c */
    assert_int_equal(l.n_order, 1);   /* only b recorded */
    (void)c;

    /* the session is usable after the worker is gone */
    rlx_session_cancel(s, false);
    rlx_session_free(s);
    pthread_mutex_destroy(&l.mu);
}

/* A session job cancelled through the worker stops its program. */
typedef struct run_arg {
    rlx_session_program *p;
    int runs;
} run_arg;

static rlx_status run_forever(rlx_worker *w, void *data, rlx_error **err)
{
    run_arg *ra = data;
    float x[4] = {0}, y[4];
    const void *in[1] = {x};
    void *out[1] = {y};
    for (;;) {
        rlx_status st = rlx_session_run(rlx_worker_session(w), ra->p, NULL, in, out, err);
        if (st != RLX_OK)
            return st;
        __atomic_add_fetch(&ra->runs, 1, __ATOMIC_RELAXED);
    }
}

static void test_worker_session_cancel(void **state)
{
    (void)state;
    log_t l;
    memset(&l, 0, sizeof l);
    pthread_mutex_init(&l.mu, NULL);
    rlx_session *s = new_session(0);
    rlx_error *err = NULL;
    int64_t n[1] = {4};
    assert_int_equal(rlx_session_add_weight(s, "w", RLX_DTYPE_F32, 1, n, acc_w, 16, &err), RLX_OK);
    rlx_test_acc_prog a;
    rlx_test_make_acc(&a, "acc");
    run_arg ra = {0};
    assert_int_equal(rlx_session_load_lir(s, &a.lir, &ra.p, &err), RLX_OK);
    rlx_worker_callbacks cb = {
        .on_start = on_start, .on_done = on_done, .on_event = on_event, .user = &l};
    rlx_worker *w = NULL;
    assert_int_equal(rlx_worker_create(s, &cb, &w, NULL), RLX_OK);
    uint64_t id = rlx_worker_submit(w, run_forever, &ra, NULL);
    while (__atomic_load_n(&ra.runs, __ATOMIC_RELAXED) < 3)
        sleep_ms(1);
    rlx_worker_cancel(w, id);
    rlx_worker_wait_idle(w);
    assert_int_equal(l.n_done, 1);
    assert_int_equal(l.done_status[0], RLX_ERR_CANCELLED);
    assert_int_equal(l.mem_events, 1);
    assert_int_equal(l.mem_weights, 16);
    rlx_worker_free(w);
    rlx_session_free(s);
    pthread_mutex_destroy(&l.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_message),
        cmocka_unit_test(test_state_persists),
        cmocka_unit_test(test_weight_errors),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_profiling),
        cmocka_unit_test(test_progress_abort),
        cmocka_unit_test(test_compile),
        cmocka_unit_test(test_compile_state),
        cmocka_unit_test(test_weights_from_files),
        cmocka_unit_test(test_weight_prefixes),
        cmocka_unit_test(test_worker_order),
        cmocka_unit_test(test_worker_cancel_shutdown),
        cmocka_unit_test(test_worker_session_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
