/* libFuzzer target: the chat-template interpreter on arbitrary template text,
 * parsed and then rendered with a small conversation under tight limits. */
#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/template/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char context_json[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"h\\u00e9llo\"}]},"
    " {\"role\": \"assistant\", \"content\": \"<think>x</think>ok\", \"tool_calls\":"
    " [{\"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1.5, \"b\": [true, null]}}}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_object *ctx;
    if (!ctx)
        ctx = json_tokener_parse(context_json);
    rlx_jinja_template *t = NULL;
    rlx_error *err = NULL;
    if (rlx_jinja_template_create((const char *)data, size, &t, &err) != RLX_OK) {
        /* every failure carries a message that says where it comes from */
        if (!err || strncmp(rlx_error_message(err), "chat template", 13) != 0)
            __builtin_trap();
        rlx_error_free(err);
        return 0;
    }
    rlx_jinja_render_opts o = rlx_jinja_default_render_opts();
    o.max_output_bytes = 64 * 1024;
    o.max_memory_bytes = 16u << 20;
    o.max_loop_iterations = 20000;
    o.max_depth = 32;
    char *out = NULL;
    size_t len = 0;
    if (rlx_jinja_template_render(t, ctx, &o, &out, &len, &err) != RLX_OK) {
        if (!err || strncmp(rlx_error_message(err), "chat template", 13) != 0 || out)
            __builtin_trap();
        rlx_error_free(err);
    } else {
        if (!out || strlen(out) > len || len > o.max_output_bytes)
            __builtin_trap();
        free(out);
    }
    rlx_jinja_template_free(t);
    return 0;
}
