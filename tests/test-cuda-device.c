/* The CUDA backend on a real GPU: enumeration facts, buffers (pinned,
 * chunked uploads), symbolic runs replayed as CUDA graphs, timing, and the
 * errors a person can meet (a token id outside the table, a buffer larger
 * than the GPU, an unsupported dtype), each followed by work that still
 * succeeds. The op results themselves are test-conformance.c's job.
 *
 * Exits 77 (meson's "skipped") and says "no CUDA device" where this machine
 * has none: such a run is not a pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "backends/base/dtype.h"
#include <math.h>
#include "backends/cuda/cuda-backend.h"
#include "test-util.h"

static const rlx_backend_i *cu;

static rlx_device *open_dev(void)
{
    rlx_device *d = NULL;
    rlx_error *err = NULL;
    if (cu->device_open(0, NULL, &d, &err) != RLX_OK)
        fail_msg("device_open: %s", rlx_error_message(err));
    return d;
}

static void test_enumeration(void **state)
{
    (void)state;
    int n = cu->device_count();
    assert_true(n >= 1);
    for (int i = 0; i < n; i++) {
        rlx_device_info info;
        assert_int_equal(cu->device_info(i, &info, NULL), RLX_OK);
        assert_string_equal(info.backend, "cuda");
        char id[32];
        snprintf(id, sizeof id, "cuda:%d", i);
        assert_string_equal(info.id, id);
        assert_true(info.name[0] != '\0');
        assert_true(info.total_memory > 0);
        assert_true(info.free_memory <= info.total_memory);
        print_message("  %s %s (%.0f MiB, %.0f MiB free, %s)\n", id, info.name,
                      (double)info.total_memory / 1048576.0, (double)info.free_memory / 1048576.0,
                      info.features);
    }
    rlx_device_info none;
    rlx_error *err = NULL;
    assert_int_equal(cu->device_info(n, &none, &err), RLX_ERR_NOT_FOUND);
    rlx_error_clear(&err);
}

static void test_buffers(void **state)
{
    (void)state;
    rlx_device *d = open_dev();
    /* larger than the pinned staging buffer, so the upload goes in pieces */
    size_t n = (size_t)(40u << 20) / 4 + 7;
    float *a = malloc(n * 4), *b = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(i % 1000003) * 0.25f;
    rlx_buffer *buf = NULL;
    assert_int_equal(cu->buffer_alloc(d, n * 4, &buf, NULL), RLX_OK);
    assert_null(buf->host_ptr);
    /* new buffers start zeroed */
    assert_int_equal(cu->buffer_read(buf, 4 * (n - 16), b, 64, NULL), RLX_OK);
    for (int i = 0; i < 16; i++)
        assert_true(b[i] == 0.0f);
    assert_int_equal(cu->buffer_write(buf, 0, a, n * 4, NULL), RLX_OK);
    memset(b, 0, n * 4);
    assert_int_equal(cu->buffer_read(buf, 0, b, n * 4, NULL), RLX_OK);
    assert_memory_equal(a, b, n * 4);
    /* at an offset */
    assert_int_equal(cu->buffer_write(buf, 12, a, 40, NULL), RLX_OK);
    assert_int_equal(cu->buffer_read(buf, 12, b, 40, NULL), RLX_OK);
    assert_memory_equal(a, b, 40);
    rlx_error *err = NULL;
    assert_int_equal(cu->buffer_read(buf, n * 4 - 8, b, 16, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    cu->buffer_free(buf);
    /* more than the GPU has: a sentence, then allocation still works */
    rlx_device_info info;
    assert_int_equal(cu->device_query(d, &info, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, info.total_memory * 2, &buf, &err), RLX_ERR_NO_MEMORY);
    assert_null(buf);
    print_message("  %s\n", rlx_error_message(err));
    assert_non_null(strstr(rlx_error_message(err), "does not fit"));
    rlx_error_clear(&err);
    assert_int_equal(cu->buffer_from_host(d, a, 4096, &buf, NULL), RLX_OK);
    cu->buffer_free(buf);
    free(a);
    free(b);
    cu->device_close(d);
}

typedef struct prog_def {
    rlx_lir lir;
    rlx_lir_value values[3];
    rlx_lir_instr instr;
    rlx_lir_binding inputs[2], outputs[1];
} prog_def;

/* out[SEQ, n] = a - b over f32 rows, SEQ <= 8 */
static void make_sub(prog_def *P, int64_t n)
{
    memset(P, 0, sizeof *P);
    for (int v = 0; v < 3; v++) {
        rlx_lir_value *val = &P->values[v];
        val->dtype = RLX_DTYPE_F32;
        val->shape.rank = 2;
        val->shape.d[0] = rlx_dim_sym(0);
        val->shape.d[1] = rlx_dim_const(n);
        val->stride[0] = rlx_dim_const(n);
        val->stride[1] = rlx_dim_const(1);
        val->home = v < 2 ? RLX_HOME_INPUT : RLX_HOME_OUTPUT;
        val->index = v < 2 ? v : 0;
        val->view_of = -1;
        val->max_bytes = 8 * (uint64_t)n * 4;
        val->contiguous = true;
    }
    P->instr = (rlx_lir_instr){.op = RLX_OP_SUB, .n_in = 2, .in = {0, 1}, .out = 2};
    for (int i = 0; i < 2; i++)
        P->inputs[i] = (rlx_lir_binding){i ? "b" : "a", RLX_DTYPE_F32, P->values[i].shape,
                                         P->values[i].max_bytes};
    P->outputs[0] =
        (rlx_lir_binding){"out", RLX_DTYPE_F32, P->values[2].shape, P->values[2].max_bytes};
    P->lir = (rlx_lir){.n_values = 3,
                       .values = P->values,
                       .n_instrs = 1,
                       .instrs = &P->instr,
                       .n_symbols = 1,
                       .n_inputs = 2,
                       .inputs = P->inputs,
                       .n_outputs = 1,
                       .outputs = P->outputs};
    P->lir.symbols[0].name = "SEQ";
    P->lir.symbols[0].max = 8;
}

static void test_replay_and_timing(void **state)
{
    (void)state;
    enum { N = 19 };
    float a[8 * N], b[8 * N], got[8 * N];
    for (int i = 0; i < 8 * N; i++) {
        a[i] = (float)i;
        b[i] = (float)(2 * i + 1);
    }
    rlx_device *d = open_dev();
    prog_def ps;
    make_sub(&ps, N);
    rlx_program *p = NULL;
    assert_int_equal(cu->program_create(d, &ps.lir, &p, NULL), RLX_OK);
    rlx_buffer *ba = NULL, *bb = NULL, *bo = NULL;
    assert_int_equal(cu->buffer_from_host(d, a, sizeof a, &ba, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, b, sizeof b, &bb, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof got, &bo, NULL), RLX_OK);
    rlx_buffer_ref in[2] = {{ba, 0}, {bb, 0}}, out = {bo, 0};
    rlx_program_bindings bind = {.inputs = in, .outputs = &out};
    /* the same shape four times (graph captured on the second run and
     * replayed), then others */
    const int64_t seqs[] = {3, 3, 3, 3, 8, 1, 0, 5, 5};
    for (size_t k = 0; k < sizeof seqs / sizeof seqs[0]; k++) {
        float poison = -12345.0f;
        for (int i = 0; i < 8 * N; i++)
            got[i] = poison;
        assert_int_equal(cu->buffer_write(bo, 0, got, sizeof got, NULL), RLX_OK);
        if (k == 6)
            cu->program_set_timing(p, true);
        rlx_sym_values sv = {{seqs[k]}};
        rlx_error *err = NULL;
        if (cu->program_run(p, &bind, &sv, &err) != RLX_OK)
            fail_msg("run %zu: %s", k, rlx_error_message(err));
        assert_int_equal(cu->buffer_read(bo, 0, got, sizeof got, NULL), RLX_OK);
        for (int i = 0; i < 8 * N; i++)
            assert_true(got[i] == (i < seqs[k] * N ? a[i] - b[i] : poison));
        if (k == 3) {
            rlx_program_stats st;
            cu->program_stats(p, &st);
            assert_int_equal(st.runs, 4);
            assert_int_equal(st.recordings, 1); /* one capture, replayed twice */
        }
        if (k >= 6) {
            double ms[2] = {-1, -1};
            assert_int_equal(cu->program_timings(p, ms, 2, NULL), RLX_OK);
            assert_true(ms[0] >= 0);
            assert_true(ms[1] == 0);
        }
    }
    rlx_error *err = NULL;
    rlx_sym_values sv = {{9}};
    assert_int_equal(cu->program_run(p, &bind, &sv, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "SEQ"));
    rlx_error_clear(&err);
    int cancel = 1;
    bind.cancel = &cancel;
    sv.v[0] = 2;
    assert_int_equal(cu->program_run(p, &bind, &sv, &err), RLX_ERR_CANCELLED);
    rlx_error_clear(&err);
    cu->buffer_free(ba);
    cu->buffer_free(bb);
    cu->buffer_free(bo);
    cu->program_free(p);
    cu->device_close(d);
}

static void test_refusals_and_gather_range(void **state)
{
    (void)state;
    rlx_device *d = open_dev();
    prog_def pf;
    make_sub(&pf, 4);
    for (int v = 0; v < 3; v++)
        pf.values[v].dtype = RLX_DTYPE_F64;
    assert_false(cu->supports_op(d, &pf.lir, &pf.instr));
    rlx_program *p = NULL;
    rlx_error *err = NULL;
    assert_int_equal(cu->program_create(d, &pf.lir, &p, &err), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "F64"));
    rlx_error_clear(&err);

    /* gather with an id outside the table */
    rlx_lir_value vals[3];
    vals[0] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){5, 3}, RLX_HOME_INPUT, 0, 0);
    vals[1] = rlx_test_val(RLX_DTYPE_I32, 1, (int64_t[]){2}, RLX_HOME_INPUT, 1, 0);
    vals[2] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){2, 3}, RLX_HOME_OUTPUT, 0, 0);
    rlx_lir_instr ins = {.op = RLX_OP_GATHER, .n_in = 2, .in = {0, 1}, .out = 2};
    rlx_lir_binding ib[2], ob[1];
    memset(ib, 0, sizeof ib);
    memset(ob, 0, sizeof ob);
    rlx_lir lir = {.n_values = 3,
                   .values = vals,
                   .n_instrs = 1,
                   .instrs = &ins,
                   .n_inputs = 2,
                   .inputs = ib,
                   .n_outputs = 1,
                   .outputs = ob};
    assert_int_equal(cu->program_create(d, &lir, &p, NULL), RLX_OK);
    float tab[15];
    for (int i = 0; i < 15; i++)
        tab[i] = (float)i;
    int32_t good[2] = {4, 0}, bad[2] = {1, 5};
    rlx_buffer *bt = NULL, *bg = NULL, *bbad = NULL, *bo = NULL;
    assert_int_equal(cu->buffer_from_host(d, tab, sizeof tab, &bt, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, good, sizeof good, &bg, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, bad, sizeof bad, &bbad, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, 24, &bo, NULL), RLX_OK);
    rlx_buffer_ref in[2] = {{bt, 0}, {bg, 0}}, out = {bo, 0};
    rlx_program_bindings bind = {.inputs = in, .outputs = &out};
    assert_int_equal(cu->program_run(p, &bind, NULL, NULL), RLX_OK);
    float got[6];
    assert_int_equal(cu->buffer_read(bo, 0, got, sizeof got, NULL), RLX_OK);
    const float want[6] = {12, 13, 14, 0, 1, 2};
    assert_memory_equal(got, want, sizeof want);
    in[1].buf = bbad;
    assert_int_equal(cu->program_run(p, &bind, NULL, &err), RLX_ERR_INVALID_ARG);
    print_message("  %s\n", rlx_error_message(err));
    assert_non_null(strstr(rlx_error_message(err), "token id"));
    rlx_error_clear(&err);
    in[1].buf = bg;
    assert_int_equal(cu->program_run(p, &bind, NULL, NULL), RLX_OK);
    assert_int_equal(cu->buffer_read(bo, 0, got, sizeof got, NULL), RLX_OK);
    assert_memory_equal(got, want, sizeof want);
    cu->buffer_free(bt);
    cu->buffer_free(bg);
    cu->buffer_free(bbad);
    cu->buffer_free(bo);
    cu->program_free(p);
    cu->device_close(d);
}

/* The append into a Q8_0 KV cache: float rows quantized on the device with
 * ggml's rounding (d = amax / 127 as f16, q = round-half-away(x / d)),
 * written beside the rows already there; the reference is computed here.
 * In place (the state's own buffer, as a KV cache is written) and into
 * another buffer (the state's blocks copied). */
static void q8_append_case(bool in_place)
{
    enum { CAP = 4, W = 64, OFF = 2 };
    const int nb = CAP * W / 32;
    uint8_t st[CAP * W / 32 * 34];
    for (size_t i = 0; i < sizeof st; i++)
        st[i] = (uint8_t)(i * 37 + 11);
    for (int b = 0; b < nb; b++) { /* sane scales: 1/64 */
        st[b * 34] = 0x00;
        st[b * 34 + 1] = 0x24;
    }
    float src[W];
    for (int i = 0; i < W; i++)
        src[i] = (float)((i * 7919) % 101 - 50) / 23.0f;
    rlx_lir_value vals[3];
    vals[0] = rlx_test_val(RLX_DTYPE_Q8_0, 2, (int64_t[]){CAP, W}, RLX_HOME_INPUT, 0, 0);
    vals[1] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){1, W}, RLX_HOME_INPUT, 1, 0);
    vals[2] = rlx_test_val(RLX_DTYPE_Q8_0, 2, (int64_t[]){CAP, W}, RLX_HOME_OUTPUT, 0, 0);
    rlx_lir_instr ins = {.op = RLX_OP_SCATTER, .n_in = 2, .in = {0, 1}, .out = 2};
    ins.in_place = in_place;
    ins.p.scatter.axis = 0;
    ins.p.scatter.offset = rlx_dim_const(OFF);
    rlx_lir_binding ib[2], ob[1];
    memset(ib, 0, sizeof ib);
    memset(ob, 0, sizeof ob);
    rlx_lir lir = {.n_values = 3,
                   .values = vals,
                   .n_instrs = 1,
                   .instrs = &ins,
                   .n_inputs = 2,
                   .inputs = ib,
                   .n_outputs = 1,
                   .outputs = ob};
    rlx_device *d = open_dev();
    assert_true(cu->supports_op(d, &lir, &ins));
    rlx_program *p = NULL;
    rlx_error *err = NULL;
    if (cu->program_create(d, &lir, &p, &err) != RLX_OK)
        fail_msg("program_create: %s", rlx_error_message(err));
    rlx_buffer *bs = NULL, *bx = NULL, *bo = NULL;
    assert_int_equal(cu->buffer_from_host(d, st, sizeof st, &bs, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, src, sizeof src, &bx, NULL), RLX_OK);
    if (!in_place)
        assert_int_equal(cu->buffer_alloc(d, sizeof st, &bo, NULL), RLX_OK);
    rlx_buffer_ref in[2] = {{bs, 0}, {bx, 0}}, out = {in_place ? bs : bo, 0};
    rlx_program_bindings bind = {.inputs = in, .outputs = &out};
    if (cu->program_run(p, &bind, NULL, &err) != RLX_OK)
        fail_msg("program_run: %s", rlx_error_message(err));
    uint8_t got[sizeof st];
    assert_int_equal(cu->buffer_read(in_place ? bs : bo, 0, got, sizeof got, NULL), RLX_OK);
    uint8_t want[sizeof st];
    memcpy(want, st, sizeof st);
    for (int b = 0; b < W / 32; b++) {
        const float *x = src + b * 32;
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        float dd = amax / 127.0f, id = dd != 0.0f ? 1.0f / dd : 0.0f;
        uint8_t *blk = want + (OFF * W / 32 + b) * 34;
        uint16_t h = rlx_f32_to_f16(dd);
        memcpy(blk, &h, 2);
        for (int j = 0; j < 32; j++) {
            float v = x[j] * id, t = truncf(v);
            if (fabsf(v - t) >= 0.5f)
                t += v > 0 ? 1.0f : -1.0f;
            blk[2 + j] = (uint8_t)(int8_t)t;
        }
    }
    for (size_t i = 0; i < sizeof st; i++)
        if (got[i] != want[i]) {
            /* every block, so a wrong place, scale or rounding shows */
            for (int b = 0; b < nb; b++) {
                printf("  block %d state/got/want:", b);
                for (int k = 0; k < 3; k++) {
                    const uint8_t *x = (k == 0 ? st : k == 1 ? got : want) + b * 34;
                    printf(" ");
                    for (int j = 0; j < 8; j++)
                        printf("%02x", x[j]);
                }
                printf("\n");
            }
            fail_msg("%s: byte %zu (block %zu, +%zu): got %u, want %u (state had %u)",
                     in_place ? "in place" : "into a copy", i, i / 34, i % 34, got[i], want[i],
                     st[i]);
        }
    cu->buffer_free(bs);
    cu->buffer_free(bx);
    cu->buffer_free(bo);
    cu->program_free(p);
    cu->device_close(d);
}

static void test_q8_append(void **state)
{
    (void)state;
    q8_append_case(false);
    q8_append_case(true);
}

/* A program of the ni instructions ins over the nv values vals (n_in
 * inputs, n_out outputs, an arena of the given bytes). */
static rlx_program *lir_program(rlx_device *d, rlx_lir_value *vals, int32_t nv, rlx_lir_instr *ins,
                                int32_t ni, int32_t n_in, int32_t n_out, uint64_t arena)
{
    rlx_lir_binding ib[8], ob[8];
    assert_true(n_in <= 8 && n_out <= 8);
    memset(ib, 0, sizeof ib);
    memset(ob, 0, sizeof ob);
    rlx_lir lir = {.n_values = nv,
                   .values = vals,
                   .n_instrs = ni,
                   .instrs = ins,
                   .n_inputs = n_in,
                   .inputs = ib,
                   .n_outputs = n_out,
                   .outputs = ob,
                   .arena_bytes = arena};
    rlx_program *p = NULL;
    rlx_error *err = NULL;
    if (cu->program_create(d, &lir, &p, &err) != RLX_OK)
        fail_msg("program_create: %s", rlx_error_message(err));
    return p;
}

/* A program of the one instruction ins over vals: its inputs first (as
 * ins->in lists them, 0 .. n_in - 1), then its output (n_in). */
static rlx_program *one_instr_program(rlx_device *d, rlx_lir_value *vals, rlx_lir_instr *ins)
{
    return lir_program(d, vals, ins->n_in + 1, ins, 1, ins->n_in, 1, 0);
}

/* Launches of one kernel in a row that touch disjoint memory run as one
 * (cuda-program.c's group_launches; q, k and v of a decode step), and only
 * those: here two independent sums of different sizes and a product join
 * one launch; the next reads that product (a dependency) and the one after
 * writes where it read (the arena slot reused), so both stay alone. Timed
 * runs launch every instruction alone. The emulator runs a grid's blocks
 * last to first, so a wrongly merged pair gives wrong numbers there. */
static void test_grouped_launches(void **state)
{
    (void)state;
    enum { N = 3000, S = 300 };
    const int64_t n[1] = {N}, sn[1] = {S};
    rlx_lir_value v[9];
    v[0] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_INPUT, 0, 0);   /* a */
    v[1] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_INPUT, 1, 0);   /* b */
    v[2] = rlx_test_val(RLX_DTYPE_F32, 1, sn, RLX_HOME_INPUT, 2, 0);  /* c */
    v[3] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_OUTPUT, 0, 0);  /* a + b */
    v[4] = rlx_test_val(RLX_DTYPE_F32, 1, sn, RLX_HOME_OUTPUT, 1, 0); /* c * c */
    v[5] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_ARENA, 0, 0);   /* r = a * b */
    v[6] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_OUTPUT, 2, 0);  /* r + a */
    v[7] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_ARENA, 0, 0);   /* r2 = a - b, r's bytes */
    v[8] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_OUTPUT, 3, 0);  /* r2 * b */
    const struct {
        rlx_op op;
        int32_t x, y, out;
    } def[6] = {{RLX_OP_ADD, 0, 1, 3}, {RLX_OP_MUL, 2, 2, 4}, {RLX_OP_MUL, 0, 1, 5},
                {RLX_OP_ADD, 5, 0, 6}, {RLX_OP_SUB, 0, 1, 7}, {RLX_OP_MUL, 7, 1, 8}};
    rlx_lir_instr ins[6];
    memset(ins, 0, sizeof ins);
    for (int i = 0; i < 6; i++) {
        ins[i].op = def[i].op;
        ins[i].n_in = 2;
        ins[i].in[0] = def[i].x;
        ins[i].in[1] = def[i].y;
        ins[i].out = def[i].out;
        ins[i].node = i;
    }
    static float a[N], b[N], c[S], got[4][N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)(i % 97) - 40.0f;
        b[i] = (float)(i % 13) * 0.5f + 1.0f;
    }
    for (int i = 0; i < S; i++)
        c[i] = (float)(i % 17) - 8.0f;
    rlx_device *d = open_dev();
    rlx_program *p = lir_program(d, v, 9, ins, 6, 3, 4, N * 4);
    rlx_error *err = NULL;
    rlx_buffer *bi[3] = {NULL}, *bo[4] = {NULL}, *arena = NULL;
    assert_int_equal(cu->buffer_alloc(d, N * 4, &arena, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, a, sizeof a, &bi[0], NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, b, sizeof b, &bi[1], NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, c, sizeof c, &bi[2], NULL), RLX_OK);
    for (int k = 0; k < 4; k++)
        assert_int_equal(cu->buffer_alloc(d, sizeof got[k], &bo[k], NULL), RLX_OK);
    rlx_buffer_ref in[3] = {{bi[0], 0}, {bi[1], 0}, {bi[2], 0}};
    rlx_buffer_ref out[4] = {{bo[0], 0}, {bo[1], 0}, {bo[2], 0}, {bo[3], 0}};
    rlx_program_bindings bind = {.arena = {arena, 0}, .inputs = in, .outputs = out};
    /* two runs (the second replays the captured graph), then a timed one */
    for (int run = 0; run < 3; run++) {
        cu->program_set_timing(p, run == 2);
        for (int k = 0; k < 4; k++) {
            memset(got[k], 0xff, sizeof got[k]); /* NaNs */
            assert_int_equal(cu->buffer_write(bo[k], 0, got[k], sizeof got[k], NULL), RLX_OK);
        }
        if (cu->program_run(p, &bind, NULL, &err) != RLX_OK)
            fail_msg("run %d: %s", run, rlx_error_message(err));
        for (int k = 0; k < 4; k++)
            assert_int_equal(cu->buffer_read(bo[k], 0, got[k], sizeof got[k], NULL), RLX_OK);
        for (int i = 0; i < N; i++) {
            /* small integers and halves: every result is exact in f32 */
            assert_true(got[0][i] == a[i] + b[i]);
            assert_true(got[2][i] == a[i] * b[i] + a[i]);
            assert_true(got[3][i] == (a[i] - b[i]) * b[i]);
            if (i < S)
                assert_true(got[1][i] == c[i] * c[i]);
        }
        rlx_program_stats st;
        cu->program_stats(p, &st);
        assert_int_equal(st.launches, run == 2 ? 6 : 4);
    }
    for (int k = 0; k < 3; k++)
        cu->buffer_free(bi[k]);
    for (int k = 0; k < 4; k++)
        cu->buffer_free(bo[k]);
    cu->buffer_free(arena);
    cu->program_free(p);
    cu->device_close(d);
}

/* Decoding attention over a long cache: few query rows, so the keys are
 * split over several blocks and the last block of a row to finish merges
 * them (the causal mask puts the last query at the last key). Three runs
 * with new queries and an output poisoned with NaN before each: a row
 * counter not set back to 0 leaves the second run unmerged. Reference in
 * double; f32 sums over 700 keys of f16 values stay within 1e-4. */
static void test_attention_split(void **state)
{
    (void)state;
    enum { HQ = 4, HKV = 2, S = 2, T = 700, D = 64, NQ = HQ * S * D };
    float *q = malloc(sizeof(float) * NQ), *o = malloc(sizeof(float) * NQ);
    uint16_t *k = malloc(2 * HKV * T * D), *v = malloc(2 * HKV * T * D);
    uint32_t seed = 7;
#define RND() ((seed = seed * 1664525u + 1013904223u), (float)(seed >> 8) / 8388608.0f - 1.0f)
    for (int i = 0; i < HKV * T * D; i++) {
        k[i] = rlx_f32_to_f16(RND());
        v[i] = rlx_f32_to_f16(RND());
    }
    rlx_lir_value vals[4];
    vals[0] = rlx_test_val(RLX_DTYPE_F32, 4, (int64_t[]){1, HQ, S, D}, RLX_HOME_INPUT, 0, 0);
    vals[1] = rlx_test_val(RLX_DTYPE_F16, 4, (int64_t[]){1, HKV, T, D}, RLX_HOME_INPUT, 1, 0);
    vals[2] = rlx_test_val(RLX_DTYPE_F16, 4, (int64_t[]){1, HKV, T, D}, RLX_HOME_INPUT, 2, 0);
    vals[3] = rlx_test_val(RLX_DTYPE_F32, 4, (int64_t[]){1, HQ, S, D}, RLX_HOME_OUTPUT, 0, 0);
    rlx_lir_instr ins = {.op = RLX_OP_ATTENTION, .n_in = 3, .in = {0, 1, 2}, .out = 3};
    ins.p.attn.mask = RLX_MASK_CAUSAL;
    rlx_device *d = open_dev();
    rlx_program *p = one_instr_program(d, vals, &ins);
    rlx_error *err = NULL;
    rlx_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * NQ, &bq, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, k, 2 * HKV * T * D, &bk, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, v, 2 * HKV * T * D, &bv, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * NQ, &bo, NULL), RLX_OK);
    rlx_buffer_ref in[3] = {{bq, 0}, {bk, 0}, {bv, 0}}, out = {bo, 0};
    rlx_program_bindings bind = {.inputs = in, .outputs = &out};
    for (int run = 0; run < 3; run++) {
        for (int i = 0; i < NQ; i++) {
            q[i] = RND();
            o[i] = NAN;
        }
        assert_int_equal(cu->buffer_write(bq, 0, q, sizeof(float) * NQ, NULL), RLX_OK);
        assert_int_equal(cu->buffer_write(bo, 0, o, sizeof(float) * NQ, NULL), RLX_OK);
        if (cu->program_run(p, &bind, NULL, &err) != RLX_OK)
            fail_msg("program_run: %s", rlx_error_message(err));
        assert_int_equal(cu->buffer_read(bo, 0, o, sizeof(float) * NQ, NULL), RLX_OK);
        double worst = 0;
        for (int h = 0; h < HQ; h++)
            for (int si = 0; si < S; si++) {
                int hk = h / (HQ / HKV), pos = T - S + si;
                const float *qr = q + (h * S + si) * D;
                double m = -INFINITY, l = 0, acc[D];
                double sc[T];
                for (int t = 0; t <= pos; t++) {
                    double dot = 0;
                    for (int e = 0; e < D; e++)
                        dot += qr[e] * rlx_f16_to_f32(k[(hk * T + t) * D + e]);
                    sc[t] = dot / sqrt((double)D);
                    m = sc[t] > m ? sc[t] : m;
                }
                for (int e = 0; e < D; e++)
                    acc[e] = 0;
                for (int t = 0; t <= pos; t++) {
                    double w = exp(sc[t] - m);
                    l += w;
                    for (int e = 0; e < D; e++)
                        acc[e] += w * rlx_f16_to_f32(v[(hk * T + t) * D + e]);
                }
                for (int e = 0; e < D; e++) {
                    double diff = fabs(o[(h * S + si) * D + e] - acc[e] / l);
                    worst = diff > worst || isnan(diff) ? diff : worst;
                }
            }
        print_message("  run %d: worst difference %.3g\n", run, worst);
        assert_true(worst < 1e-4);
    }
#undef RND
    free(q);
    free(o);
    free(k);
    free(v);
    cu->buffer_free(bq);
    cu->buffer_free(bk);
    cu->buffer_free(bv);
    cu->buffer_free(bo);
    cu->program_free(p);
    cu->device_close(d);
}

/* A prompt-sized product of Q8_0 weights with one output tile and a long
 * K: the tensor-core kernel splits K over several blocks (the emulator's 4
 * SMs: 4 parts), and a tile's last part to finish sums them. Three runs
 * (the later ones replay the graph) with new activations and an output
 * poisoned with NaN before each: a tile counter not set back to 0 leaves a
 * later run unsummed. The reference takes a and the weights rounded to f16
 * as the kernel does, in double; f32 sums of 1056 products stay within
 * 1e-4 of the largest output. */
static void test_split_k(void **state)
{
    (void)state;
    enum { M = 40, K = 1056, N = 100, NB = K / 32 };
    float *a = malloc(sizeof(float) * M * K), *o = malloc(sizeof(float) * M * N);
    uint8_t *w = malloc((size_t)N * NB * 34);
    double *wd = malloc(sizeof(double) * N * K);
    uint32_t seed = 11;
#define RND() ((seed = seed * 1664525u + 1013904223u), (float)(seed >> 8) / 8388608.0f - 1.0f)
    for (int n = 0; n < N; n++)
        for (int b = 0; b < NB; b++) {
            uint8_t *blk = w + ((size_t)n * NB + b) * 34;
            uint16_t d = rlx_f32_to_f16(0.01f + 0.02f * (RND() + 1.0f));
            memcpy(blk, &d, 2);
            for (int i = 0; i < 32; i++) {
                int8_t q = (int8_t)(RND() * 127.0f);
                blk[2 + i] = (uint8_t)q;
                wd[(size_t)n * K + b * 32 + i] =
                    rlx_f16_to_f32(rlx_f32_to_f16(rlx_f16_to_f32(d) * (float)q));
            }
        }
    rlx_lir_value vals[3];
    vals[0] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, K}, RLX_HOME_INPUT, 0, 0);
    vals[1] = rlx_test_val(RLX_DTYPE_Q8_0, 2, (int64_t[]){N, K}, RLX_HOME_INPUT, 1, 0);
    vals[1].max_bytes = (uint64_t)N * NB * 34;
    vals[2] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, N}, RLX_HOME_OUTPUT, 0, 0);
    rlx_lir_instr ins = {.op = RLX_OP_MATMUL, .n_in = 2, .in = {0, 1}, .out = 2};
    ins.p.matmul.trans_b = true;
    rlx_device *d = open_dev();
    rlx_program *p = one_instr_program(d, vals, &ins);
    rlx_error *err = NULL;
    rlx_buffer *ba = NULL, *bw = NULL, *bo = NULL;
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * M * K, &ba, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, w, (uint64_t)N * NB * 34, &bw, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * M * N, &bo, NULL), RLX_OK);
    rlx_buffer_ref in[2] = {{ba, 0}, {bw, 0}}, out = {bo, 0};
    rlx_program_bindings bind = {.inputs = in, .outputs = &out};
    for (int run = 0; run < 3; run++) {
        for (int i = 0; i < M * K; i++)
            a[i] = RND();
        for (int i = 0; i < M * N; i++)
            o[i] = NAN;
        assert_int_equal(cu->buffer_write(ba, 0, a, sizeof(float) * M * K, NULL), RLX_OK);
        assert_int_equal(cu->buffer_write(bo, 0, o, sizeof(float) * M * N, NULL), RLX_OK);
        if (cu->program_run(p, &bind, NULL, &err) != RLX_OK)
            fail_msg("program_run: %s", rlx_error_message(err));
        assert_int_equal(cu->buffer_read(bo, 0, o, sizeof(float) * M * N, NULL), RLX_OK);
        double worst = 0, big = 0;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double ref = 0;
                for (int k = 0; k < K; k++)
                    ref += (double)rlx_f16_to_f32(rlx_f32_to_f16(a[m * K + k])) *
                           wd[(size_t)n * K + k];
                double diff = fabs(o[m * N + n] - ref);
                worst = diff > worst || isnan(diff) ? diff : worst;
                big = fabs(ref) > big ? fabs(ref) : big;
            }
        print_message("  run %d: worst difference %.3g of %.3g\n", run, worst, big);
        assert_true(worst <= 1e-4 * big);
    }
#undef RND
    free(a);
    free(o);
    free(w);
    free(wd);
    cu->buffer_free(ba);
    cu->buffer_free(bw);
    cu->buffer_free(bo);
    cu->program_free(p);
    cu->device_close(d);
}

/* Random Q8_0 weights [n, k] with the scale 1/64 (their products with
 * integers are exact in f32 while the sums stay below 2^24), their int8
 * values (-127 to 127) in q. */
static uint8_t *q8_weights(int n, int k, int8_t *q, uint32_t *seed)
{
    uint8_t *w = malloc((size_t)n * (k / 32) * 34);
    uint16_t d = rlx_f32_to_f16(1.0f / 64.0f);
    for (int r = 0; r < n; r++)
        for (int b = 0; b < k / 32; b++) {
            uint8_t *blk = w + ((size_t)r * (k / 32) + b) * 34;
            memcpy(blk, &d, 2);
            for (int i = 0; i < 32; i++) {
                *seed = *seed * 1664525u + 1013904223u;
                q[(size_t)r * k + b * 32 + i] = (int8_t)((int)((*seed >> 24) % 255) - 127);
                blk[2 + i] = (uint8_t)q[(size_t)r * k + b * 32 + i];
            }
        }
    return w;
}

/* A one-row product of Q8_0 weights roped as one head of N (the q of a
 * decode step, as the graph gives it): the product's block that finishes
 * the head last ropes it and the rope launches nothing, unless the rope's
 * output lands where a launch between the product and the rope still
 * reads (a copy of what an earlier copy put there; the memory plan may
 * place it so, since in program order the rope writes after that read):
 * then the rope must launch after it, or the copy would read roped values.
 * Both placements, three runs each (the later replay the graph), against
 * a double-precision rope of the exact product. */
static void heads_case(bool clash)
{
    enum { K = 256, N = 512, NB = K / 32 };
    const uint64_t R = clash ? 4096 : 8192; /* the rope's output in the arena */
    float a[K], z[N], o0[N], o1[N];
    int8_t *wq = malloc((size_t)N * K);
    uint32_t seed = 11;
    uint8_t *w = q8_weights(N, K, wq, &seed);
    const float dw = 1.0f / 64.0f;
    const int32_t pos = 7;
#define RND() ((seed = seed * 1664525u + 1013904223u), (float)(seed >> 8) / 8388608.0f - 1.0f)
    rlx_lir_value v[10];
    v[0] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){1, K}, RLX_HOME_INPUT, 0, 0);
    v[1] = rlx_test_val(RLX_DTYPE_Q8_0, 2, (int64_t[]){N, K}, RLX_HOME_INPUT, 1, 0);
    v[1].max_bytes = (uint64_t)N * NB * 34;
    v[2] = rlx_test_val(RLX_DTYPE_I32, 1, (int64_t[]){1}, RLX_HOME_INPUT, 2, 0);
    v[3] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){1, N}, RLX_HOME_INPUT, 3, 0);
    v[4] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){1, N}, RLX_HOME_ARENA, 0, 0);    /* product */
    v[5] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){1, N}, RLX_HOME_ARENA, 0, 4096); /* z, kept */
    v[6] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){1, N}, RLX_HOME_OUTPUT, 0, 0);
    v[7] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){1, N}, RLX_HOME_ARENA, 0, R); /* roped */
    v[8] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){1, N}, RLX_HOME_OUTPUT, 1, 0);
    rlx_lir_instr ins[5] = {{.op = RLX_OP_COPY, .n_in = 1, .in = {3}, .out = 5},
                            {.op = RLX_OP_MATMUL, .n_in = 2, .in = {0, 1}, .out = 4},
                            {.op = RLX_OP_COPY, .n_in = 1, .in = {5}, .out = 6},
                            {.op = RLX_OP_ROPE, .n_in = 2, .in = {4, 2}, .out = 7},
                            {.op = RLX_OP_COPY, .n_in = 1, .in = {7}, .out = 8}};
    for (int i = 0; i < 5; i++)
        ins[i].node = i;
    ins[1].p.matmul.trans_b = true;
    ins[3].p.rope.freq_base = 10000.0f;
    ins[3].p.rope.seq_axis = 0;
    rlx_device *d = open_dev();
    rlx_program *p = lir_program(d, v, 9, ins, 5, 4, 2, 12288);
    rlx_error *err = NULL;
    rlx_buffer *ba = NULL, *bw = NULL, *bp = NULL, *bz = NULL, *b0 = NULL, *b1 = NULL, *ar = NULL;
    assert_int_equal(cu->buffer_alloc(d, sizeof a, &ba, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, w, (uint64_t)N * NB * 34, &bw, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, &pos, 4, &bp, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof z, &bz, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof o0, &b0, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof o1, &b1, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, 12288, &ar, NULL), RLX_OK);
    rlx_buffer_ref in[4] = {{ba, 0}, {bw, 0}, {bp, 0}, {bz, 0}}, out[2] = {{b0, 0}, {b1, 0}};
    rlx_program_bindings bind = {.arena = {ar, 0}, .inputs = in, .outputs = out};
    for (int run = 0; run < 3; run++) {
        /* integers, each block's largest 127: the 8-bit rounding is exact */
        for (int i = 0; i < K; i++)
            a[i] = i % 32 == run ? 127.0f : (float)(int)(RND() * 126.0f);
        for (int i = 0; i < N; i++)
            z[i] = RND();
        assert_int_equal(cu->buffer_write(ba, 0, a, sizeof a, NULL), RLX_OK);
        assert_int_equal(cu->buffer_write(bz, 0, z, sizeof z, NULL), RLX_OK);
        if (cu->program_run(p, &bind, NULL, &err) != RLX_OK)
            fail_msg("program_run: %s", rlx_error_message(err));
        assert_int_equal(cu->buffer_read(b0, 0, o0, sizeof o0, NULL), RLX_OK);
        assert_int_equal(cu->buffer_read(b1, 0, o1, sizeof o1, NULL), RLX_OK);
        assert_memory_equal(o0, z, sizeof z); /* the copy read z, not roped values */
        double worst = 0, big = 0;
        for (int j = 0; j < N / 2; j++) {
            double x[2];
            for (int e = 0; e < 2; e++) {
                double dot = 0;
                for (int k = 0; k < K; k++)
                    dot += (double)a[k] * wq[(size_t)(2 * j + e) * K + k];
                x[e] = dot * dw;
            }
            double th = pos * pow(10000.0, -2.0 * j / N);
            double ref[2] = {x[0] * cos(th) - x[1] * sin(th), x[0] * sin(th) + x[1] * cos(th)};
            for (int e = 0; e < 2; e++) {
                double diff = fabs(o1[2 * j + e] - ref[e]);
                worst = diff > worst || isnan(diff) ? diff : worst;
                big = fabs(ref[e]) > big ? fabs(ref[e]) : big;
            }
        }
        print_message("  %s run %d: worst difference %.3g of %.3g\n", clash ? "clash" : "apart",
                      run, worst, big);
        assert_true(worst <= 1e-5 * big);
        /* the first copy, the rounding, the product, then the rope and
         * the two copies after it, or (the rope run by the product) the
         * two copies in one launch */
        rlx_program_stats st;
        cu->program_stats(p, &st);
        assert_int_equal(st.launches, clash ? 6 : 4);
    }
#undef RND
    cu->buffer_free(ba);
    cu->buffer_free(bw);
    cu->buffer_free(bp);
    cu->buffer_free(bz);
    cu->buffer_free(b0);
    cu->buffer_free(b1);
    cu->buffer_free(ar);
    free(w);
    free(wq);
    cu->program_free(p);
    cu->device_close(d);
}

static void test_roped_heads(void **state)
{
    (void)state;
    heads_case(false);
    heads_case(true);
}

/* A decode-sized product of Q8_0 weights and the add + RMS norm after it
 * (keeping the sum, as a decoder layer's): the product's last block runs
 * the norm, so the program launches twice (the activations' rounding, the
 * product), not three times. Three runs (the later ones replay the graph)
 * with new activations and the output poisoned with NaN before each: a
 * block counter not set back to 0 leaves a later run without its norm.
 * Each 32-block of the activations holds +-127 and integers, so their
 * 8-bit rounding is exact, as are the products (integers times a power of
 * two, below 2^24): the reference in double differs only by the f32
 * rounding of the norm's sum of squares (1e-5 of the largest output). A
 * row of 1536 takes all of a block's 128 threads, one row a pass. */
static void test_norm_tail(void **state)
{
    (void)state;
    enum { M = 3, K = 256, N = 1536, NB = K / 32 };
    float *a = malloc(sizeof(float) * M * K), *x = malloc(sizeof(float) * M * N);
    float *nw = malloc(sizeof(float) * N), *o = malloc(sizeof(float) * M * 2 * N);
    int8_t *wq = malloc((size_t)N * K);
    uint32_t seed = 5;
    uint8_t *w = q8_weights(N, K, wq, &seed);
    const float dw = 1.0f / 64.0f;
#define RND() ((seed = seed * 1664525u + 1013904223u), (float)(seed >> 8) / 8388608.0f - 1.0f)
    for (int n = 0; n < N; n++)
        nw[n] = 0.5f + 0.5f * (RND() + 1.0f);
    rlx_lir_value vals[6];
    vals[0] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, K}, RLX_HOME_INPUT, 0, 0);
    vals[1] = rlx_test_val(RLX_DTYPE_Q8_0, 2, (int64_t[]){N, K}, RLX_HOME_INPUT, 1, 0);
    vals[1].max_bytes = (uint64_t)N * NB * 34;
    vals[2] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, N}, RLX_HOME_INPUT, 2, 0);
    vals[3] = rlx_test_val(RLX_DTYPE_F32, 1, (int64_t[]){N}, RLX_HOME_INPUT, 3, 0);
    vals[4] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, N}, RLX_HOME_ARENA, 0, 0);
    vals[5] = rlx_test_val(RLX_DTYPE_F32, 3, (int64_t[]){M, 2, N}, RLX_HOME_OUTPUT, 0, 0);
    rlx_lir_instr ins[2] = {{.op = RLX_OP_MATMUL, .n_in = 2, .in = {0, 1}, .out = 4},
                            {.op = RLX_OP_ADD_RMS_NORM, .n_in = 3, .in = {2, 4, 3}, .out = 5}};
    ins[0].p.matmul.trans_b = true;
    ins[1].node = 1;
    ins[1].p.norm.eps = 1e-5f;
    ins[1].p.norm.keep_sum = true;
    rlx_device *d = open_dev();
    rlx_program *p = lir_program(d, vals, 6, ins, 2, 4, 1, sizeof(float) * M * N);
    rlx_error *err = NULL;
    rlx_buffer *ba = NULL, *bw = NULL, *bx = NULL, *bn = NULL, *bo = NULL, *arena = NULL;
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * M * K, &ba, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, w, (uint64_t)N * NB * 34, &bw, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * M * N, &bx, NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, nw, sizeof(float) * N, &bn, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * M * 2 * N, &bo, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * M * N, &arena, NULL), RLX_OK);
    rlx_buffer_ref in[4] = {{ba, 0}, {bw, 0}, {bx, 0}, {bn, 0}}, out = {bo, 0};
    rlx_program_bindings bind = {.arena = {arena, 0}, .inputs = in, .outputs = &out};
    for (int run = 0; run < 3; run++) {
        for (int i = 0; i < M * K; i++)
            a[i] = i % 32 == run ? 127.0f : (float)(int)(RND() * 126.0f);
        for (int i = 0; i < M * N; i++)
            x[i] = (float)(int)(RND() * 2000.0f);
        for (int i = 0; i < M * 2 * N; i++)
            o[i] = NAN;
        assert_int_equal(cu->buffer_write(ba, 0, a, sizeof(float) * M * K, NULL), RLX_OK);
        assert_int_equal(cu->buffer_write(bx, 0, x, sizeof(float) * M * N, NULL), RLX_OK);
        assert_int_equal(cu->buffer_write(bo, 0, o, sizeof(float) * M * 2 * N, NULL), RLX_OK);
        if (cu->program_run(p, &bind, NULL, &err) != RLX_OK)
            fail_msg("program_run: %s", rlx_error_message(err));
        assert_int_equal(cu->buffer_read(bo, 0, o, sizeof(float) * M * 2 * N, NULL), RLX_OK);
        double worst = 0, big = 0;
        for (int m = 0; m < M; m++) {
            double sum[N], ss = 0;
            for (int n = 0; n < N; n++) {
                double dot = 0;
                for (int k = 0; k < K; k++)
                    dot += (double)a[m * K + k] * wq[(size_t)n * K + k];
                sum[n] = x[m * N + n] + dot * dw;
                ss += sum[n] * sum[n];
                /* the sum half is exact */
                if (!(o[(m * 2) * N + n] == (float)sum[n]))
                    fail_msg("run %d: sum[%d][%d] %g, want %g", run, m, n,
                             (double)o[(m * 2) * N + n], sum[n]);
            }
            double inv = 1.0 / sqrt(ss / N + 1e-5);
            for (int n = 0; n < N; n++) {
                double ref = sum[n] * inv * nw[n];
                double diff = fabs(o[(m * 2 + 1) * N + n] - ref);
                worst = diff > worst || isnan(diff) ? diff : worst;
                big = fabs(ref) > big ? fabs(ref) : big;
            }
        }
        print_message("  run %d: worst difference %.3g of %.3g\n", run, worst, big);
        assert_true(worst <= 1e-5 * big);
        rlx_program_stats st;
        cu->program_stats(p, &st);
        assert_int_equal(st.launches, 2);
    }
#undef RND
    free(a);
    free(x);
    free(nw);
    free(o);
    free(w);
    free(wq);
    cu->buffer_free(ba);
    cu->buffer_free(bw);
    cu->buffer_free(bx);
    cu->buffer_free(bn);
    cu->buffer_free(bo);
    cu->buffer_free(arena);
    cu->program_free(p);
    cu->device_close(d);
}

/* A decode step's gate (SiLU), up and their product, then the down
 * product: gate, up and the mul run as one launch (the gated kernel),
 * which also rounds h to 8-bit blocks for the down product; the program
 * launches 3 times (a's rounding, gate/up/mul, down), not 5. Three runs
 * with new activations and outputs poisoned with NaN. a is exact in 8
 * bits (integers, -127 in each 32-block) and the sums stay below 2^24, so
 * g and u are exact: h within 1e-5 of its largest value (f32 expf); the
 * down product reads h rounded to 8 bits, so it is held to the rounding's
 * own bound: each h moves at most half its block's step (max |h| / 127 /
 * 2), times |w| summed. */
static void test_gated_products(void **state)
{
    (void)state;
    enum { M = 3, K = 1024, N = 512, N2 = 96 };
    uint32_t seed = 9;
    int8_t *qg = malloc((size_t)N * K), *qu = malloc((size_t)N * K), *qd = malloc((size_t)N2 * N);
    uint8_t *wg = q8_weights(N, K, qg, &seed), *wu = q8_weights(N, K, qu, &seed),
            *wd = q8_weights(N2, N, qd, &seed);
    float *a = malloc(sizeof(float) * M * K), *h = malloc(sizeof(float) * M * N),
          *y = malloc(sizeof(float) * M * N2);
    rlx_lir_value v[8];
    v[0] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, K}, RLX_HOME_INPUT, 0, 0);
    v[1] = rlx_test_val(RLX_DTYPE_Q8_0, 2, (int64_t[]){N, K}, RLX_HOME_INPUT, 1, 0);
    v[2] = rlx_test_val(RLX_DTYPE_Q8_0, 2, (int64_t[]){N, K}, RLX_HOME_INPUT, 2, 0);
    v[3] = rlx_test_val(RLX_DTYPE_Q8_0, 2, (int64_t[]){N2, N}, RLX_HOME_INPUT, 3, 0);
    v[1].max_bytes = v[2].max_bytes = (uint64_t)N * (K / 32) * 34;
    v[3].max_bytes = (uint64_t)N2 * (N / 32) * 34;
    v[4] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, N}, RLX_HOME_ARENA, 0, 0);
    v[5] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, N}, RLX_HOME_ARENA, 0, 4 * M * N);
    v[6] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, N}, RLX_HOME_OUTPUT, 0, 0);
    v[7] = rlx_test_val(RLX_DTYPE_F32, 2, (int64_t[]){M, N2}, RLX_HOME_OUTPUT, 1, 0);
    rlx_lir_instr ins[4] = {{.op = RLX_OP_MATMUL, .n_in = 2, .in = {0, 1}, .out = 4},
                            {.op = RLX_OP_MATMUL, .n_in = 2, .in = {0, 2}, .out = 5},
                            {.op = RLX_OP_MUL, .n_in = 2, .in = {4, 5}, .out = 6},
                            {.op = RLX_OP_MATMUL, .n_in = 2, .in = {6, 3}, .out = 7}};
    for (int i = 0; i < 4; i++) {
        ins[i].node = i;
        ins[i].p.matmul.trans_b = ins[i].op == RLX_OP_MATMUL;
    }
    ins[0].p.matmul.act = RLX_ACT_SILU;
    rlx_device *d = open_dev();
    rlx_program *p = lir_program(d, v, 8, ins, 4, 4, 2, 8 * M * N);
    rlx_error *err = NULL;
    rlx_buffer *b[4] = {NULL}, *bh = NULL, *by = NULL, *arena = NULL;
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * M * K, &b[0], NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, wg, v[1].max_bytes, &b[1], NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, wu, v[2].max_bytes, &b[2], NULL), RLX_OK);
    assert_int_equal(cu->buffer_from_host(d, wd, v[3].max_bytes, &b[3], NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * M * N, &bh, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, sizeof(float) * M * N2, &by, NULL), RLX_OK);
    assert_int_equal(cu->buffer_alloc(d, 8 * M * N, &arena, NULL), RLX_OK);
    rlx_buffer_ref in[4] = {{b[0], 0}, {b[1], 0}, {b[2], 0}, {b[3], 0}};
    rlx_buffer_ref out[2] = {{bh, 0}, {by, 0}};
    rlx_program_bindings bind = {.arena = {arena, 0}, .inputs = in, .outputs = out};
    double *hr = malloc(sizeof(double) * M * N);
    for (int run = 0; run < 3; run++) {
        for (int i = 0; i < M * K; i++) {
            seed = seed * 1664525u + 1013904223u;
            a[i] = i % 32 == run ? -127.0f : (float)((int)((seed >> 24) % 255) - 127);
        }
        for (int i = 0; i < M * N; i++)
            h[i] = NAN;
        for (int i = 0; i < M * N2; i++)
            y[i] = NAN;
        assert_int_equal(cu->buffer_write(b[0], 0, a, sizeof(float) * M * K, NULL), RLX_OK);
        assert_int_equal(cu->buffer_write(bh, 0, h, sizeof(float) * M * N, NULL), RLX_OK);
        assert_int_equal(cu->buffer_write(by, 0, y, sizeof(float) * M * N2, NULL), RLX_OK);
        if (cu->program_run(p, &bind, NULL, &err) != RLX_OK)
            fail_msg("program_run: %s", rlx_error_message(err));
        assert_int_equal(cu->buffer_read(bh, 0, h, sizeof(float) * M * N, NULL), RLX_OK);
        assert_int_equal(cu->buffer_read(by, 0, y, sizeof(float) * M * N2, NULL), RLX_OK);
        double worst = 0, big = 0;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double g = 0, u = 0;
                for (int k = 0; k < K; k++) {
                    g += (double)a[m * K + k] * qg[(size_t)n * K + k];
                    u += (double)a[m * K + k] * qu[(size_t)n * K + k];
                }
                g /= 64.0, u /= 64.0;
                hr[m * N + n] = g / (1.0 + exp(-g)) * u;
                double diff = fabs(h[m * N + n] - hr[m * N + n]);
                worst = diff > worst || isnan(diff) ? diff : worst;
                big = fabs(hr[m * N + n]) > big ? fabs(hr[m * N + n]) : big;
            }
        print_message("  run %d: h within %.3g of %.3g\n", run, worst, big);
        assert_true(worst <= 1e-5 * big);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N2; n++) {
                double ref = 0, bound = 0;
                for (int bk = 0; bk < N / 32; bk++) {
                    double mx = 0;
                    for (int i = 0; i < 32; i++)
                        mx = fmax(mx, fabs(hr[m * N + bk * 32 + i]));
                    for (int i = 0; i < 32; i++) {
                        double wv = qd[(size_t)n * N + bk * 32 + i] / 64.0;
                        ref += hr[m * N + bk * 32 + i] * wv;
                        bound += fabs(wv) * (mx / 127.0 / 2.0 + 1e-5 * big);
                    }
                }
                double diff = fabs(y[m * N2 + n] - ref);
                if (!(diff <= bound * 1.01 + 1e-6))
                    fail_msg("run %d: y[%d][%d] = %g, want %g within %g", run, m, n,
                             (double)y[m * N2 + n], ref, bound);
            }
        rlx_program_stats st;
        cu->program_stats(p, &st);
        assert_int_equal(st.launches, 3);
    }
    free(hr);
    free(qg);
    free(qu);
    free(qd);
    free(wg);
    free(wu);
    free(wd);
    free(a);
    free(h);
    free(y);
    for (int k = 0; k < 4; k++)
        cu->buffer_free(b[k]);
    cu->buffer_free(bh);
    cu->buffer_free(by);
    cu->buffer_free(arena);
    cu->program_free(p);
    cu->device_close(d);
}

#ifdef RLX_TEST_CUDA_EMU
#include <dlfcn.h>

#include "backends/cuda/cuda-internal.h"

/* A kernel that faults (on the emulator, which can inject one): the run
 * fails with a sentence, the device refuses work from then on, and once it
 * is closed a fresh open runs programs again. */
static void test_fault_and_recovery(void **state)
{
    (void)state;
    void *h = dlopen(RLX_TEST_CUDA_EMU, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void (*fail_next)(void) = (void (*)(void))dlsym(h, "emu_fail_next_launch");
    assert_non_null(fail_next);
    enum { N = 8 };
    float a[N], b[N], got[N];
    for (int i = 0; i < N; i++)
        a[i] = (float)i, b[i] = 1.0f;
    prog_def ps;
    make_sub(&ps, N);
    for (int round = 0; round < 2; round++) {
        rlx_device *d = open_dev();
        rlx_program *p = NULL;
        assert_int_equal(cu->program_create(d, &ps.lir, &p, NULL), RLX_OK);
        rlx_buffer *ba = NULL, *bb = NULL, *bo = NULL;
        assert_int_equal(cu->buffer_from_host(d, a, sizeof a, &ba, NULL), RLX_OK);
        assert_int_equal(cu->buffer_from_host(d, b, sizeof b, &bb, NULL), RLX_OK);
        assert_int_equal(cu->buffer_alloc(d, sizeof got, &bo, NULL), RLX_OK);
        rlx_buffer_ref in[2] = {{ba, 0}, {bb, 0}}, out = {bo, 0};
        rlx_program_bindings bind = {.inputs = in, .outputs = &out};
        rlx_sym_values sv = {{1}};
        rlx_error *err = NULL;
        if (round == 0) {
            fail_next();
            assert_int_equal(cu->program_run(p, &bind, &sv, &err), RLX_ERR_DEVICE);
            print_message("  %s\n", rlx_error_message(err));
            assert_non_null(strstr(rlx_error_message(err), "must be reopened"));
            rlx_error_clear(&err);
            assert_int_equal(cu->program_run(p, &bind, &sv, &err), RLX_ERR_DEVICE);
            assert_non_null(strstr(rlx_error_message(err), "close and reopen"));
            rlx_error_clear(&err);
        } else {
            assert_int_equal(cu->program_run(p, &bind, &sv, &err), RLX_OK);
            assert_int_equal(cu->buffer_read(bo, 0, got, sizeof got, NULL), RLX_OK);
            assert_true(got[0] == -1.0f && got[1] == 0.0f);
        }
        cu->buffer_free(ba);
        cu->buffer_free(bb);
        cu->buffer_free(bo);
        cu->program_free(p);
        cu->device_close(d);
    }
}
#endif

int main(void)
{
#ifdef RLX_TEST_CUDA_EMU
    cu_driver_use(RLX_TEST_CUDA_EMU);
    cu_blas_use(RLX_TEST_CUDA_EMU);
#endif
    cu = rlx_backend_find("cuda");
    const char *why = rlx_cuda_unavailable_reason();
    if (!cu || why) {
        printf("no CUDA device: %s; skipped\n", why ? why : "not built");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enumeration),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_replay_and_timing),
        cmocka_unit_test(test_refusals_and_gather_range),
        cmocka_unit_test(test_q8_append),
        cmocka_unit_test(test_attention_split),
        cmocka_unit_test(test_split_k),
        cmocka_unit_test(test_norm_tail),
        cmocka_unit_test(test_gated_products),
        cmocka_unit_test(test_roped_heads),
        cmocka_unit_test(test_grouped_launches),
#ifdef RLX_TEST_CUDA_EMU
        cmocka_unit_test(test_fault_and_recovery),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
