/* The chat layer over the Jinja interpreter: builds the context that
 * transformers' apply_chat_template passes and renders it. */
#include "engine/template/chat-template.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "engine/template/jinja.h"

struct rlx_chat_template {
    rlx_jinja_template *jinja;
};

rlx_chat_render_opts rlx_chat_render_default_opts(void)
{
    rlx_jinja_render_opts j = rlx_jinja_default_render_opts();
    rlx_chat_render_opts o = {
        .max_output_bytes = j.max_output_bytes,
        .max_loop_iterations = j.max_loop_iterations,
        .max_depth = j.max_depth,
    };
    return o;
}

rlx_status rlx_chat_template_create(const char *source, rlx_chat_template **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!source || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "chat template: no template given");
    rlx_chat_template *t = calloc(1, sizeof *t);
    if (!t)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "chat template: out of memory");
    rlx_status s = rlx_jinja_template_create(source, strlen(source), &t->jinja, err);
    if (s != RLX_OK) {
        free(t);
        return s;
    }
    *out = t;
    return RLX_OK;
}

void rlx_chat_template_free(rlx_chat_template *t)
{
    if (!t)
        return;
    rlx_jinja_template_free(t->jinja);
    free(t);
}

/* json-c objects are reference counted: sharing the caller's values in our
 * context costs a get and a put, no copy. */
static json_object *share(const json_object *o)
{
    return json_object_get((json_object *)o);
}

static rlx_status render_ctx(const rlx_chat_template *t, json_object *messages,
                             const rlx_chat_render_opts *opts, char **out, rlx_error **err)
{
    rlx_chat_render_opts o = opts ? *opts : rlx_chat_render_default_opts();
    json_object *ctx = json_object_new_object();
    if (!ctx) {
        json_object_put(messages);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "chat template: out of memory");
    }
    /* Caller variables first so the fixed names below win, as in transformers
     * where **kwargs cannot override messages/tools. */
    if (o.vars) {
        if (!json_object_is_type(o.vars, json_type_object)) {
            json_object_put(ctx);
            json_object_put(messages);
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "chat template: extra variables must be a JSON object");
        }
        json_object_object_foreach((json_object *)o.vars, key, val)
        {
            json_object_object_add(ctx, key, share(val));
        }
    }
    json_object_object_add(ctx, "messages", messages);
    /* transformers passes tools=None and documents=None when there are none:
     * `tools is defined` holds and `tools is none` too. */
    json_object_object_add(ctx, "tools", o.tools ? share(o.tools) : NULL);
    json_object_object_add(ctx, "documents", NULL);
    json_object_object_add(ctx, "add_generation_prompt",
                           json_object_new_boolean(o.add_generation_prompt));
    if (o.bos_token)
        json_object_object_add(ctx, "bos_token", json_object_new_string(o.bos_token));
    if (o.eos_token)
        json_object_object_add(ctx, "eos_token", json_object_new_string(o.eos_token));

    rlx_jinja_render_opts jo = rlx_jinja_default_render_opts();
    jo.now = o.now;
    if (o.max_output_bytes)
        jo.max_output_bytes = o.max_output_bytes;
    if (o.max_loop_iterations)
        jo.max_loop_iterations = o.max_loop_iterations;
    if (o.max_depth > 0)
        jo.max_depth = o.max_depth;
    rlx_status s = rlx_jinja_template_render(t->jinja, ctx, &jo, out, NULL, err);
    json_object_put(ctx);
    return s;
}

rlx_status rlx_chat_template_render(const rlx_chat_template *t, const rlx_chat_message *msgs,
                                    size_t n, const rlx_chat_render_opts *opts, char **out,
                                    rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!t || !out || (n && !msgs))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "chat template: nothing to render");
    json_object *arr = json_object_new_array();
    if (!arr)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "chat template: out of memory");
    for (size_t i = 0; i < n; i++) {
        const rlx_chat_message *m = &msgs[i];
        if (!m->role) {
            json_object_put(arr);
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "chat template: message %zu has no role",
                                 i);
        }
        if (m->extra && !json_object_is_type(m->extra, json_type_object)) {
            json_object_put(arr);
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "chat template: message %zu: extra fields must be a JSON object",
                                 i);
        }
        json_object *mo = json_object_new_object();
        json_object_object_add(mo, "role", json_object_new_string(m->role));
        if (m->content)
            json_object_object_add(mo, "content", json_object_new_string(m->content));
        if (m->extra) {
            json_object_object_foreach((json_object *)m->extra, key, val)
            {
                json_object_object_add(mo, key, share(val));
            }
        }
        json_object_array_add(arr, mo);
    }
    return render_ctx(t, arr, opts, out, err);
}

rlx_status rlx_chat_template_render_json(const rlx_chat_template *t, const json_object *messages,
                                         const rlx_chat_render_opts *opts, char **out,
                                         rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!t || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "chat template: nothing to render");
    if (!messages || !json_object_is_type(messages, json_type_array))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "chat template: the messages must be a JSON array");
    return render_ctx(t, share(messages), opts, out, err);
}
