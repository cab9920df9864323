/* A Jinja2-subset template interpreter, sized for LLM chat templates.
 *
 * Usage:
 *     rlx_jinja_template *t = NULL;
 *     if (rlx_jinja_template_create(src, strlen(src), &t, &err) != RLX_OK) ...
 *     json_object *ctx = json_tokener_parse("{\"messages\": [...]}");
 *     rlx_jinja_render_opts o = rlx_jinja_default_render_opts();
 *     char *text = NULL;
 *     rlx_jinja_template_render(t, ctx, &o, &text, NULL, &err);
 *     ...
 *     free(text);
 *     rlx_jinja_template_free(t);
 *
 * The dialect is jinja2 as Hugging Face transformers configures it for chat
 * templates: ImmutableSandboxedEnvironment(trim_blocks=True,
 * lstrip_blocks=True) with the loopcontrols extension, `tojson` as
 * json.dumps(ensure_ascii=False), and the globals raise_exception(msg) and
 * strftime_now(fmt). Unknown tags, filters and tests are refused when the
 * template is created; unknown methods when they are called. Every error is
 * "chat template line N: ..." so a person can find it in the template.
 *
 * Thread safety: a created template is immutable; any number of threads may
 * render it at once, each with its own context.
 */
#ifndef RLX_ENGINE_TEMPLATE_JINJA_H
#define RLX_ENGINE_TEMPLATE_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct json_object;

typedef struct rlx_jinja_template rlx_jinja_template;

typedef struct rlx_jinja_render_opts {
    /* What strftime_now() reads; NULL: the local time at the call. */
    const struct tm *now;
    /* Guards against hostile templates; each is a clear error when passed. */
    size_t max_output_bytes;      /* the rendered text, and any captured block */
    size_t max_memory_bytes;      /* everything the render allocates */
    uint64_t max_loop_iterations; /* summed over every loop of the render */
    int max_depth;                /* nested macro calls and statement nesting */
} rlx_jinja_render_opts;

/* 8 MiB output, 256 MiB memory, 1e6 iterations, depth 64. */
RLX_API rlx_jinja_render_opts rlx_jinja_default_render_opts(void);

/* Parse `len` bytes of template source (not kept). *out is set to NULL first
 * and owned by the caller. Errors: RLX_ERR_FORMAT for a syntax error,
 * RLX_ERR_UNSUPPORTED for an unknown tag, filter or test (the message names it
 * and its line). */
RLX_API rlx_status rlx_jinja_template_create(const char *source, size_t len,
                                             rlx_jinja_template **out, rlx_error **err);
RLX_API void rlx_jinja_template_free(rlx_jinja_template *t);

/* Render with the variables of `context` (a json-c object, may be NULL; not
 * modified). *out (NUL-terminated, malloc'd, the caller frees it) is set to
 * NULL first; *out_len (may be NULL) gets its length. Errors: the message the
 * template passed to raise_exception() as RLX_ERR_INVALID_ARG; a limit of
 * `opts` as RLX_ERR_BUDGET; a type or undefined-value error as RLX_ERR_TYPE;
 * an unknown method as RLX_ERR_UNSUPPORTED. */
RLX_API rlx_status rlx_jinja_template_render(const rlx_jinja_template *t,
                                             const struct json_object *context,
                                             const rlx_jinja_render_opts *opts, char **out,
                                             size_t *out_len, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
