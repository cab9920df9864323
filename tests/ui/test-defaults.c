/* The app's sampling defaults are the engine's: the settings schema the build
 * writes (resources/fill-schema-defaults.c) and rlx_sampling_default() both
 * hold rlx_llm_chat_default_params(), the values rlx chat starts from. A
 * number typed into the schema template in place of its placeholder, or set
 * in the app by hand, fails here. */
#include "rlx-engine.h"

#include <gio/gio.h>

#include "models/llm/llm.h"

static const char *schema_dir;

static GVariant *schema_default(GSettingsSchema *schema, const char *key)
{
    g_autoptr(GSettingsSchemaKey) k = g_settings_schema_get_key(schema, key);
    return g_settings_schema_key_get_default_value(k);
}

static void test_schema(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GSettingsSchemaSource) src =
        g_settings_schema_source_new_from_directory(schema_dir, NULL, TRUE, &error);
    g_assert_no_error(error);
    g_autoptr(GSettingsSchema) schema =
        g_settings_schema_source_lookup(src, "org.rlx.Studio", FALSE);
    g_assert_nonnull(schema);
    rlx_llm_generate_params gp = rlx_llm_chat_default_params();
    /* the schema holds doubles written from floats with 6 digits */
    struct {
        const char *key;
        double want;
    } d[] = {
        {"temperature", gp.sampler.temperature},
        {"top-p", gp.sampler.top_p},
        {"min-p", gp.sampler.min_p},
        {"repeat-penalty", gp.sampler.repeat_penalty},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(d); i++) {
        g_autoptr(GVariant) v = schema_default(schema, d[i].key);
        g_assert_cmpfloat_with_epsilon(g_variant_get_double(v), d[i].want, 1e-6);
    }
    g_autoptr(GVariant) top_k = schema_default(schema, "top-k");
    g_assert_cmpint(g_variant_get_int32(top_k), ==, gp.sampler.top_k);
    g_autoptr(GVariant) max_tokens = schema_default(schema, "max-tokens");
    g_assert_cmpint(g_variant_get_int32(max_tokens), ==, gp.max_tokens);
}

static void test_engine_bridge(void)
{
    rlx_llm_generate_params gp = rlx_llm_chat_default_params();
    RlxSampling s = rlx_sampling_default();
    g_assert_cmpfloat_with_epsilon(s.temperature, gp.sampler.temperature, 1e-6);
    g_assert_cmpint(s.top_k, ==, gp.sampler.top_k);
    g_assert_cmpfloat_with_epsilon(s.top_p, gp.sampler.top_p, 1e-6);
    g_assert_cmpfloat_with_epsilon(s.min_p, gp.sampler.min_p, 1e-6);
    g_assert_cmpfloat_with_epsilon(s.repeat_penalty, gp.sampler.repeat_penalty, 1e-6);
    g_assert_cmpint(s.max_tokens, ==, gp.max_tokens);
    /* and the chat's defaults are the plain sampler's, with a chat-sized reply */
    rlx_sampler_params sp = rlx_sampler_default_params();
    g_assert_cmpfloat(gp.sampler.temperature, ==, sp.temperature);
    g_assert_cmpint(gp.max_tokens, ==, RLX_LLM_CHAT_MAX_TOKENS);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_assert_cmpint(argc, ==, 2);
    schema_dir = argv[1];
    g_test_add_func("/defaults/schema", test_schema);
    g_test_add_func("/defaults/engine-bridge", test_engine_bridge);
    return g_test_run();
}
