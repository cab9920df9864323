/* ui/rlx-failure.c: a failed reply in a person's words, the engine's in the
 * details. The engine messages are ones the backends really write. */
#include "rlx-failure.h"

#include "backends/base/status.h"
#include "rlx-engine.h"

#include <string.h>

/* Words of the engine's trade that mean nothing to a person. */
static const char *const internal[] = {"instruction", "value", "buffer", "window",
                                       "gather",      "param", "offset"};

static void check_plain(const RlxFailure *f)
{
    const char *texts[] = {f->heading, f->sentence, f->advice};
    for (size_t i = 0; i < G_N_ELEMENTS(texts); i++) {
        g_assert_nonnull(texts[i]);
        g_assert_cmpuint(strlen(texts[i]), >, 0);
        for (size_t k = 0; k < G_N_ELEMENTS(internal); k++)
            if (strstr(texts[i], internal[k]))
                g_error("'%s' reaches a person: %s", internal[k], texts[i]);
    }
}

/* The Vulkan program's refusal seen in issue 23, on the GPU. */
static void test_gpu_run(void)
{
    const char *msg = "instruction 0 (gather): value 2 needs 215470080 bytes at offset 0 of its "
                      "param buffer window, which holds 134217728";
    GError *e = g_error_new_literal(RLX_ENGINE_ERROR, RLX_ERR_INVALID_ARG, msg);
    RlxFailure *f = rlx_failure_describe(e, "vulkan:0");
    check_plain(f);
    g_assert_nonnull(strstr(f->sentence, "vulkan:0")); /* on which device */
    g_assert_nonnull(strstr(f->advice, "CPU"));        /* what to do */
    g_assert_true(f->offer_cpu);
    g_assert_cmpstr(f->details, ==, msg); /* kept whole for a bug report */
    rlx_failure_free(f);
    g_error_free(e);
}

static void test_memory(void)
{
    GError *e = g_error_new_literal(RLX_ENGINE_ERROR, RLX_ERR_BUDGET,
                                    "arena of 3 values needs 1.2 GiB; the budget has 512 MiB");
    RlxFailure *f = rlx_failure_describe(e, "vulkan:0");
    check_plain(f);
    g_assert_nonnull(strstr(f->heading, "memory"));
    g_assert_nonnull(strstr(f->advice, "GPU layers"));
    rlx_failure_free(f);
    /* On the CPU there is no CPU to switch to. */
    f = rlx_failure_describe(e, "cpu");
    check_plain(f);
    g_assert_false(f->offer_cpu);
    g_assert_null(strstr(f->advice, "Switch to the CPU"));
    rlx_failure_free(f);
    g_error_free(e);
}

/* The bridge's own sentence is for a person already: shown, no details. */
static void test_context_full(void)
{
    const char *msg = "The conversation is 38 tokens long, more than the 32 tokens of context "
                      "the model was loaded with.";
    GError *e = g_error_new_literal(RLX_ENGINE_ERROR, RLX_ENGINE_ERROR_CONTEXT_FULL, msg);
    RlxFailure *f = rlx_failure_describe(e, "cpu");
    check_plain(f);
    g_assert_cmpstr(f->sentence, ==, msg);
    g_assert_null(f->details);
    g_assert_false(f->offer_cpu);
    rlx_failure_free(f);
    g_error_free(e);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/failure/gpu-run", test_gpu_run);
    g_test_add_func("/failure/memory", test_memory);
    g_test_add_func("/failure/context-full", test_context_full);
    return g_test_run();
}
