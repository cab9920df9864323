/* Chat templates: a model's Jinja template turned into the prompt text.
 *
 * Usage:
 *     rlx_chat_template *t = NULL;
 *     if (rlx_chat_template_create(jinja_source, &t, &err) != RLX_OK) ...
 *     rlx_chat_message msgs[] = {
 *         {.role = "system", .content = "You are terse."},
 *         {.role = "user", .content = "Hi"},
 *     };
 *     rlx_chat_render_opts o = rlx_chat_render_default_opts();
 *     o.add_generation_prompt = true;
 *     o.bos_token = "<s>";
 *     char *prompt = NULL;
 *     if (rlx_chat_template_render(t, msgs, 2, &o, &prompt, &err) != RLX_OK) ...
 *     free(prompt);
 *     rlx_chat_template_free(t);
 *
 * The template language is the Jinja2 subset that Hugging Face transformers
 * renders chat templates with (see engine/template/jinja.h), and the output
 * matches transformers' apply_chat_template(tokenize=False) byte for byte for
 * the templates this project tests. The template sees `messages`, `tools`
 * (None when not given, as in transformers), `documents` (None),
 * `add_generation_prompt`, `bos_token` and `eos_token` (when given) and every
 * key of `opts.vars` (e.g. enable_thinking).
 *
 * Thread safety: a created template is immutable and may be rendered from any
 * number of threads at once.
 */
#ifndef RLX_ENGINE_TEMPLATE_CHAT_TEMPLATE_H
#define RLX_ENGINE_TEMPLATE_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct json_object;

typedef struct rlx_chat_template rlx_chat_template;

typedef struct rlx_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content; /* text; NULL leaves `content` to `extra` (or absent) */
    /* Optional JSON object (not modified) whose keys are added to the message
     * after role and content, replacing them when they repeat: tool_calls,
     * reasoning_content, name, tool_call_id, or "content" as a list of parts
     * such as [{"type": "text", "text": "..."}]. */
    const struct json_object *extra;
} rlx_chat_message;

typedef struct rlx_chat_render_opts {
    bool add_generation_prompt;
    const char *bos_token; /* NULL: the variable is left undefined */
    const char *eos_token;
    const struct json_object *tools; /* JSON array of tool schemas, or NULL (not modified) */
    const struct json_object *vars;  /* JSON object of extra variables, or NULL (not modified) */
    const struct tm *now;            /* what strftime_now() reads; NULL: local time */
    /* Limits against hostile templates (0: the default of rlx_chat_render_default_opts). */
    size_t max_output_bytes;
    uint64_t max_loop_iterations;
    int max_depth;
} rlx_chat_render_opts;

/* No generation prompt, no tokens, no tools; limits of 8 MiB of output, 1e6
 * loop iterations and a nesting depth of 64. */
RLX_API rlx_chat_render_opts rlx_chat_render_default_opts(void);

/* Parse a template (NUL-terminated source, not kept). *out is set to NULL
 * first and owned by the caller. Errors: RLX_ERR_FORMAT for a syntax error and
 * RLX_ERR_UNSUPPORTED for a tag, filter or test we do not implement, each as
 * "chat template line N: ...". */
RLX_API rlx_status rlx_chat_template_create(const char *source, rlx_chat_template **out,
                                            rlx_error **err);
RLX_API void rlx_chat_template_free(rlx_chat_template *t);

/* Render `n` messages. *out is set to NULL first; on success it holds the
 * malloc'd prompt, which the caller frees. Errors: RLX_ERR_INVALID_ARG with
 * the template's own message when it calls raise_exception() (e.g. "chat
 * template line 22: Conversation roles must alternate user/assistant/..."),
 * RLX_ERR_BUDGET when a limit is passed, RLX_ERR_TYPE for a type error or a
 * use of an undefined value that jinja2 also refuses. */
RLX_API rlx_status rlx_chat_template_render(const rlx_chat_template *t,
                                            const rlx_chat_message *msgs, size_t n,
                                            const rlx_chat_render_opts *opts, char **out,
                                            rlx_error **err);

/* Same, with the messages as a JSON array of objects (as in the OpenAI or
 * transformers APIs). */
RLX_API rlx_status rlx_chat_template_render_json(const rlx_chat_template *t,
                                                 const struct json_object *messages,
                                                 const rlx_chat_render_opts *opts, char **out,
                                                 rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
