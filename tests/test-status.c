#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "backends/base/status.h"

static void set_and_read(void **state)
{
    rlx_error *err = NULL;
    rlx_status s = rlx_error_set(&err, RLX_ERR_FORMAT, "%s: bad %d", "f.gguf", 7);
    assert_int_equal(s, RLX_ERR_FORMAT);
    assert_int_equal(rlx_error_code(err), RLX_ERR_FORMAT);
    assert_string_equal(rlx_error_message(err), "f.gguf: bad 7");
    rlx_error_free(err);
}

static void first_error_wins(void **state)
{
    rlx_error *err = NULL;
    rlx_error_set(&err, RLX_ERR_IO, "first");
    rlx_error_set(&err, RLX_ERR_FORMAT, "second");
    assert_string_equal(rlx_error_message(err), "first");
    assert_int_equal(rlx_error_code(err), RLX_ERR_IO);
    rlx_error_clear(&err);
    assert_null(err);
}

static void null_error_pointer_is_fine(void **state)
{
    assert_int_equal(rlx_error_set(NULL, RLX_ERR_TYPE, "x"), RLX_ERR_TYPE);
    assert_string_equal(rlx_error_message(NULL), "no error");
    assert_int_equal(rlx_error_code(NULL), RLX_OK);
}

static void prefix(void **state)
{
    rlx_error *err = NULL;
    rlx_error_set(&err, RLX_ERR_IO, "no such file");
    rlx_error_prefix(&err, "loading %s: ", "m.gguf");
    assert_string_equal(rlx_error_message(err), "loading m.gguf: no such file");
    rlx_error_free(err);
}

static void names(void **state)
{
    assert_string_equal(rlx_status_name(RLX_OK), "ok");
    assert_string_equal(rlx_status_name(RLX_ERR_BUDGET), "over the memory budget");
    assert_string_equal(rlx_status_name((rlx_status)999), "unknown status");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(set_and_read),
        cmocka_unit_test(first_error_wins),
        cmocka_unit_test(null_error_pointer_is_fine),
        cmocka_unit_test(prefix),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
