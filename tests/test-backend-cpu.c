/* The CPU backend's device, buffers and the registry's device parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "rlx-config.h"
#include "test-util.h"

static void test_registry(void **state)
{
    (void)state;
    assert_true(rlx_backend_count() >= 1);
    const rlx_backend_i *cpu = rlx_backend_find("cpu");
    assert_non_null(cpu);
    assert_string_equal(cpu->name, "cpu");
    assert_ptr_equal(rlx_backend_at(0), cpu);
    assert_null(rlx_backend_at(-1));
    assert_null(rlx_backend_at(rlx_backend_count()));
    assert_null(rlx_backend_find("gpu"));
    assert_null(rlx_backend_find(NULL));
    /* every registered backend fills the whole interface */
    for (int i = 0; i < rlx_backend_count(); i++) {
        const rlx_backend_i *be = rlx_backend_at(i);
        assert_non_null(be->device_count);
        assert_non_null(be->device_info);
        assert_non_null(be->device_open);
        assert_non_null(be->buffer_alloc);
        assert_non_null(be->buffer_from_host);
        assert_non_null(be->supports_op);
        assert_non_null(be->program_create);
        assert_non_null(be->program_run);
        assert_non_null(be->program_timings);
    }
}

static void test_device_parse(void **state)
{
    (void)state;
    const rlx_backend_i *be = NULL;
    int idx = -1;
    rlx_error *err = NULL;
    assert_int_equal(rlx_device_parse("cpu", &be, &idx, &err), RLX_OK);
    assert_string_equal(be->name, "cpu");
    assert_int_equal(idx, 0);
    assert_int_equal(rlx_device_parse("cpu:0", &be, &idx, &err), RLX_OK);

    assert_int_equal(rlx_device_parse("gpu:0", &be, &idx, &err), RLX_ERR_INVALID_ARG);
    assert_null(be);
    assert_string_equal(rlx_error_message(err),
                        "unknown device 'gpu:0': use cpu, vulkan:N or cuda:N");
    rlx_error_clear(&err);

    assert_int_equal(rlx_device_parse("", &be, &idx, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(rlx_device_parse(NULL, &be, &idx, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(rlx_device_parse("cpu:x", &be, &idx, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "bad device index"));
    rlx_error_clear(&err);
    assert_int_equal(rlx_device_parse("cpu:-1", &be, &idx, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(rlx_device_parse("cpu:1", &be, &idx, &err), RLX_ERR_NOT_FOUND);
    assert_non_null(strstr(rlx_error_message(err), "cpu:1"));
    rlx_error_clear(&err);

    /* vulkan / cuda: either compiled in (then a device or "no ... device"),
     * or "no ... support in this build" */
    static const char *const specs[] = {"vulkan:0", "cuda:1"};
    static const char *const pretty[] = {"Vulkan", "CUDA"};
    for (int i = 0; i < 2; i++) {
        rlx_status st = rlx_device_parse(specs[i], &be, &idx, &err);
        char want[64];
        snprintf(want, sizeof want, "no %s support in this build", pretty[i]);
        if (!rlx_backend_find(i ? "cuda" : "vulkan")) {
            assert_int_equal(st, RLX_ERR_UNSUPPORTED);
            assert_string_equal(rlx_error_message(err), want);
        } else if (st != RLX_OK) {
            assert_int_equal(st, RLX_ERR_NOT_FOUND);
        }
        rlx_error_clear(&err);
    }
}

static void test_device_info(void **state)
{
    (void)state;
    const rlx_backend_i *be = rlx_backend_find("cpu");
    assert_int_equal(be->device_count(), 1);
    rlx_device_info info;
    rlx_error *err = NULL;
    assert_int_equal(be->device_info(0, &info, &err), RLX_OK);
    assert_string_equal(info.backend, "cpu");
    assert_string_equal(info.id, "cpu");
    assert_int_equal(info.type, RLX_DEVICE_CPU);
    assert_true(strlen(info.name) > 3);
    assert_non_null(strstr(info.name, "thread"));
    assert_true(info.total_memory > 0);
    assert_true(info.free_memory > 0 && info.free_memory <= info.total_memory);
    assert_true(info.n_threads >= 1);
    assert_int_equal(be->device_info(1, &info, &err), RLX_ERR_NOT_FOUND);
    rlx_error_clear(&err);

    rlx_device *dev = NULL;
    /* two threads where the process has two cores (test-cpu-threads
     * checks the cap above them) */
    int want = info.n_threads >= 2 ? 2 : 1;
    rlx_device_opts opts = {.n_threads = want};
    assert_int_equal(be->device_open(0, &opts, &dev, &err), RLX_OK);
    assert_int_equal(be->device_query(dev, &info, &err), RLX_OK);
    assert_int_equal(info.n_threads, want);
    assert_non_null(strstr(info.name, want == 2 ? "(2 threads)" : "(1 thread)"));
    be->device_close(dev);
    assert_int_equal(be->device_open(2, &opts, &dev, &err), RLX_ERR_NOT_FOUND);
    assert_null(dev);
    rlx_error_clear(&err);
}

static void test_buffers(void **state)
{
    (void)state;
    const rlx_backend_i *be = rlx_backend_find("cpu");
    rlx_device *dev = NULL;
    rlx_error *err = NULL;
    assert_int_equal(be->device_open(0, NULL, &dev, &err), RLX_OK);

    rlx_buffer *b = NULL;
    assert_int_equal(be->buffer_alloc(dev, 1000, &b, &err), RLX_OK);
    assert_int_equal(b->size, 1000);
    assert_non_null(b->host_ptr);
    assert_int_equal((uintptr_t)b->host_ptr % 64, 0);
    for (int i = 0; i < 1000; i++) /* starts zeroed */
        assert_int_equal(((uint8_t *)b->host_ptr)[i], 0);
    uint8_t src[100], dst[100];
    for (int i = 0; i < 100; i++)
        src[i] = (uint8_t)i;
    assert_int_equal(be->buffer_write(b, 900, src, 100, &err), RLX_OK);
    assert_int_equal(be->buffer_read(b, 900, dst, 100, &err), RLX_OK);
    assert_memory_equal(src, dst, 100);
    assert_int_equal(be->buffer_write(b, 901, src, 100, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    assert_int_equal(be->buffer_read(b, UINT64_MAX, dst, 2, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    be->buffer_free(b);

    /* a large buffer (mapped, its pages given out as they are written)
     * starts zeroed too, and holds what is written at both ends */
    const uint64_t big = (5u << 20) + 3;
    assert_int_equal(be->buffer_alloc(dev, big, &b, &err), RLX_OK);
    assert_int_equal((uintptr_t)b->host_ptr % 64, 0);
    for (uint64_t i = 0; i < big; i += 4093)
        assert_int_equal(((uint8_t *)b->host_ptr)[i], 0);
    assert_int_equal(((uint8_t *)b->host_ptr)[big - 1], 0);
    assert_int_equal(be->buffer_write(b, big - 100, src, 100, &err), RLX_OK);
    assert_int_equal(be->buffer_write(b, 0, src, 100, &err), RLX_OK);
    assert_int_equal(be->buffer_read(b, big - 100, dst, 100, &err), RLX_OK);
    assert_memory_equal(src, dst, 100);
    be->buffer_free(b);

    /* zero-size allocations are valid */
    assert_int_equal(be->buffer_alloc(dev, 0, &b, &err), RLX_OK);
    be->buffer_free(b);

    /* host wrapping is zero-copy */
    static float host[64];
    assert_int_equal(be->buffer_from_host(dev, host, sizeof host, &b, &err), RLX_OK);
    assert_ptr_equal(b->host_ptr, host);
    float v = 3.5f;
    assert_int_equal(be->buffer_write(b, 4, &v, 4, &err), RLX_OK);
    assert_true(host[1] == 3.5f);
    be->buffer_free(b); /* does not free host */
    assert_true(host[1] == 3.5f);

    assert_int_equal(be->synchronize(dev, &err), RLX_OK);
    be->device_close(dev);
}

static void test_program_errors(void **state)
{
    (void)state;
    const rlx_backend_i *be = rlx_backend_find("cpu");
    rlx_device *dev = NULL;
    rlx_error *err = NULL;
    assert_int_equal(be->device_open(0, NULL, &dev, &err), RLX_OK);
    rlx_lir_value v[2];
    memset(v, 0, sizeof v);
    for (int i = 0; i < 2; i++) {
        v[i].dtype = RLX_DTYPE_F32;
        v[i].shape.rank = 1;
        v[i].shape.d[0] = rlx_dim_const(4);
        v[i].stride[0] = rlx_dim_const(1);
        v[i].home = RLX_HOME_ARENA;
        v[i].offset = (uint64_t)i * 16;
        v[i].view_of = -1;
    }
    rlx_lir_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.op = RLX_OP_EXP;
    ins.n_in = 1;
    ins.out = 1;
    rlx_lir lir;
    memset(&lir, 0, sizeof lir);
    lir.n_values = 2;
    lir.values = v;
    lir.n_instrs = 1;
    lir.instrs = &ins;
    lir.arena_bytes = 32;

    rlx_program *prog = NULL;
    assert_true(be->supports_op(dev, &lir, &ins));
    assert_int_equal(be->program_create(dev, &lir, &prog, &err), RLX_OK);

    /* run in the arena; timing on */
    rlx_buffer *arena = NULL;
    assert_int_equal(be->buffer_alloc(dev, 32, &arena, &err), RLX_OK);
    float *a = arena->host_ptr;
    for (int i = 0; i < 4; i++)
        a[i] = (float)i;
    be->program_set_timing(prog, true);
    rlx_program_bindings b = {.arena = {arena, 0}};
    assert_int_equal(be->program_run(prog, &b, NULL, &err), RLX_OK);
    assert_true(a[4 + 2] > 7.38f && a[4 + 2] < 7.39f);
    double ms[2] = {-1, -1};
    assert_int_equal(be->program_timings(prog, ms, 2, &err), RLX_OK);
    assert_true(ms[0] >= 0 && ms[1] == 0);

    /* the cancel flag stops before the next instruction */
    volatile int cancel = 1;
    b.cancel = &cancel;
    assert_int_equal(be->program_run(prog, &b, NULL, &err), RLX_ERR_CANCELLED);
    rlx_error_clear(&err);
    /* no arena bound */
    rlx_program_bindings nob = {0};
    assert_int_equal(be->program_run(prog, &nob, NULL, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    be->program_free(prog);
    be->buffer_free(arena);

    /* malformed LIRs are refused with a reason */
    lir.arena_bytes = 16;
    assert_int_equal(be->program_create(dev, &lir, &prog, &err), RLX_ERR_INVALID_ARG);
    assert_null(prog);
    assert_non_null(strstr(rlx_error_message(err), "arena"));
    rlx_error_clear(&err);
    lir.arena_bytes = 32;
    ins.out = 5;
    assert_false(be->supports_op(dev, &lir, &ins));
    assert_int_equal(be->program_create(dev, &lir, &prog, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    ins.out = 1;
    ins.op = RLX_OP_ADD; /* one input short */
    assert_false(be->supports_op(dev, &lir, &ins));
    assert_int_equal(be->program_create(dev, &lir, &prog, &err), RLX_ERR_UNSUPPORTED);
    rlx_error_clear(&err);
    /* a quantized input where only matmul's b may be quantized */
    ins.op = RLX_OP_EXP;
    v[0].dtype = RLX_DTYPE_Q4_0;
    v[0].shape.d[0] = rlx_dim_const(32);
    assert_false(be->supports_op(dev, &lir, &ins));
    v[0].dtype = RLX_DTYPE_F32;
    v[0].shape.d[0] = rlx_dim_const(4);
    v[1].dtype = RLX_DTYPE_INVALID;
    assert_int_equal(be->program_create(dev, &lir, &prog, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    be->device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),       cmocka_unit_test(test_device_parse),
        cmocka_unit_test(test_device_info),    cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_program_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
