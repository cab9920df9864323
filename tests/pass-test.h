/* Shared includes and small builders for the tests/test-pass-*.c programs. */
#ifndef RLX_TESTS_PASS_TEST_H
#define RLX_TESTS_PASS_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compile-exec.h"
#include "engine/compile/passes.h"
#include "test-util.h"

static inline rlx_shape pt_c1(int64_t a)
{
    return rlx_shape_make(1, (int64_t[]){a});
}

static inline rlx_shape pt_c2(int64_t a, int64_t b)
{
    return rlx_shape_make(2, (int64_t[]){a, b});
}

static inline rlx_shape pt_c4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    return rlx_shape_make(4, (int64_t[]){a, b, c, d});
}

/* Run one pass and assert it succeeds; returns the graph for chaining. */
static inline void pt_run(rlx_pass_fn fn, rlx_graph *g, const rlx_compile_opts *o)
{
    rlx_error *err = NULL;
    rlx_status s = fn(g, o, &err);
    if (s != RLX_OK)
        fprintf(stderr, "pass failed: %s\n", rlx_error_message(err));
    assert_int_equal(s, RLX_OK);
    rlx_error_free(err);
    /* every pass must leave a well-typed, ordered graph */
    assert_int_equal(rlx_pass_verify(g, o, NULL), RLX_OK);
    assert_int_equal(rlx_pass_shapes(g, o, NULL), RLX_OK);
}

static inline rlx_node pt_find(const rlx_graph *g, const char *name)
{
    for (int32_t i = 0; i < rlx_graph_node_count(g); i++)
        if (strcmp(rlx_graph_node_name(g, i), name) == 0)
            return i;
    return RLX_NODE_INVALID;
}

#endif
