/* Chat templates and the Jinja subset under them, checked byte for byte
 * against jinja2 (tests/reference/render_templates.py wrote
 * tests/fixtures/templates/expected.json), plus error reporting and the
 * limits that guard against hostile templates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/template/chat-template.h"
#include "engine/template/jinja.h"
#include "tests/test-util.h"

#define FIX RLX_TEST_SOURCE_DIR "/tests/fixtures/templates/"

static struct tm fixed_now(void)
{
    /* The reference script's clock: 2024-07-26 10:00:00. */
    struct tm t = {0};
    t.tm_year = 124;
    t.tm_mon = 6;
    t.tm_mday = 26;
    t.tm_hour = 10;
    return t;
}

static json_object *expected(void)
{
    static json_object *exp;
    if (!exp)
        exp = json_object_from_file(FIX "expected.json");
    assert_non_null(exp);
    return exp;
}

static char *read_text(const char *path)
{
    size_t n = 0;
    char *p = rlx_test_read_file(path, &n);
    if (!p)
        return NULL;
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    free(p);
    return s;
}

/* The result must be what jinja2 gave: the same text, or an error for an
 * error (with jinja2's message inside ours when the template raised it). */
static int check(const char *what, json_object *want, rlx_status s, const char *out,
                 const rlx_error *err)
{
    json_object *wout = NULL, *werr = NULL, *wkind = NULL;
    json_object_object_get_ex(want, "out", &wout);
    json_object_object_get_ex(want, "error", &werr);
    json_object_object_get_ex(want, "kind", &wkind);
    if (wout) {
        if (s != RLX_OK) {
            print_error("%s: expected output, got error: %s\n", what, rlx_error_message(err));
            return 1;
        }
        if (strcmp(out, json_object_get_string(wout))) {
            print_error("%s: output differs\n  want: %s\n  got:  %s\n", what,
                        json_object_to_json_string(wout),
                        json_object_to_json_string_ext(json_object_new_string(out), 0));
            return 1;
        }
        return 0;
    }
    if (s == RLX_OK) {
        print_error("%s: expected an error (%s), got output: %s\n", what,
                    json_object_get_string(werr), out);
        return 1;
    }
    if (strncmp(rlx_error_message(err), "chat template", 13) != 0) {
        print_error("%s: error does not say where it comes from: %s\n", what,
                    rlx_error_message(err));
        return 1;
    }
    if (wkind && !strcmp(json_object_get_string(wkind), "TemplateError")) {
        if (s != RLX_ERR_INVALID_ARG ||
            !strstr(rlx_error_message(err), json_object_get_string(werr))) {
            print_error("%s: want the template's message \"%s\", got \"%s\"\n", what,
                        json_object_get_string(werr), rlx_error_message(err));
            return 1;
        }
    }
    return 0;
}

/* ---- the expression language ---------------------------------------------------------------- */

static void expressions_match_jinja2(void **state)
{
    (void)state;
    char *text = read_text(FIX "expressions.txt");
    assert_non_null(text);
    json_object *exp_all = NULL;
    assert_true(json_object_object_get_ex(expected(), "expressions", &exp_all));
    int failures = 0, cases = 0;
    struct tm now = fixed_now();
    /* Same format as render_templates.py: "=== name", a context line, the template. */
    char *p = text;
    while ((p = strstr(p, "=== ")) != NULL) {
        if (p != text && p[-1] != '\n') {
            p += 4;
            continue;
        }
        char *name_end = strchr(p, '\n');
        assert_non_null(name_end);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(name_end - p - 4), p + 4);
        char *ctx_end = strchr(name_end + 1, '\n');
        assert_non_null(ctx_end);
        *ctx_end = 0;
        json_object *ctx = json_tokener_parse(name_end + 1);
        assert_non_null(ctx);
        char *body = ctx_end + 1;
        char *next = strstr(body, "\n=== ");
        size_t body_len = next ? (size_t)(next - body) : strlen(body);
        if (!next && body_len && body[body_len - 1] == '\n')
            body_len--;

        json_object *want = NULL;
        if (!json_object_object_get_ex(exp_all, name, &want)) {
            print_error("%s: no expected output; run tests/reference/render_templates.py\n", name);
            failures++;
        } else {
            rlx_jinja_template *t = NULL;
            rlx_error *err = NULL;
            char *out = NULL;
            rlx_status s = rlx_jinja_template_create(body, body_len, &t, &err);
            if (s == RLX_OK) {
                rlx_jinja_render_opts o = rlx_jinja_default_render_opts();
                o.now = &now;
                s = rlx_jinja_template_render(t, ctx, &o, &out, NULL, &err);
            }
            failures += check(name, want, s, out, err);
            free(out);
            rlx_error_free(err);
            rlx_jinja_template_free(t);
        }
        cases++;
        json_object_put(ctx);
        if (!next)
            break;
        p = next + 1;
    }
    free(text);
    assert_int_equal(cases, json_object_object_length(exp_all));
    assert_int_equal(failures, 0);
}

/* ---- real and family chat templates --------------------------------------------------------- */

static char *template_source(json_object *spec)
{
    const char *src = json_object_get_string(json_object_object_get(spec, "source"));
    if (!strncmp(src, "hf:", 3)) {
        char rel[256];
        snprintf(rel, sizeof rel, "tokenizers/%s/tokenizer_config.json", src + 3);
        json_object *cfg = json_object_from_file(rlx_test_data(rel));
        if (!cfg)
            return NULL;
        json_object *tpl = NULL;
        char *s = NULL;
        if (json_object_object_get_ex(cfg, "chat_template", &tpl))
            s = strdup(json_object_get_string(tpl));
        json_object_put(cfg);
        return s;
    }
    char path[512];
    snprintf(path, sizeof path, FIX "%s", src);
    return read_text(path);
}

static const char *opt_string(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static rlx_status render_conv(const rlx_chat_template *t, json_object *conv, json_object *spec,
                              const struct tm *now, char **out, rlx_error **err)
{
    rlx_chat_render_opts o = rlx_chat_render_default_opts();
    json_object *v = NULL;
    o.add_generation_prompt =
        json_object_object_get_ex(conv, "add_generation_prompt", &v) && json_object_get_boolean(v);
    o.bos_token = opt_string(spec, "bos_token");
    o.eos_token = opt_string(spec, "eos_token");
    o.tools = json_object_object_get(conv, "tools");
    o.vars = json_object_object_get(conv, "vars");
    o.now = now;
    return rlx_chat_template_render_json(t, json_object_object_get(conv, "messages"), &o, out, err);
}

static void chats_match_jinja2(void **state)
{
    (void)state;
    json_object *templates = json_object_from_file(FIX "templates.json");
    json_object *convs = json_object_from_file(FIX "conversations.json");
    assert_non_null(templates);
    assert_non_null(convs);
    json_object *exp_all = NULL;
    assert_true(json_object_object_get_ex(expected(), "chats", &exp_all));
    struct tm now = fixed_now();
    int failures = 0, rendered = 0;
    for (size_t i = 0; i < json_object_array_length(convs); i++) {
        json_object *conv = json_object_array_get_idx(convs, i);
        const char *cname = opt_string(conv, "name");
        json_object *names = json_object_object_get(conv, "templates");
        for (size_t k = 0; k < json_object_array_length(names); k++) {
            const char *tname = json_object_get_string(json_object_array_get_idx(names, k));
            json_object *spec = json_object_object_get(templates, tname);
            assert_non_null(spec);
            char key[256];
            snprintf(key, sizeof key, "%s/%s", tname, cname);
            json_object *want = NULL;
            if (!json_object_object_get_ex(exp_all, key, &want)) {
                print_error("%s: no expected output; run tests/reference/render_templates.py\n",
                            key);
                failures++;
                continue;
            }
            char *src = template_source(spec);
            assert_non_null(src); /* the hf: ones come from ../shared/data/tokenizers */
            rlx_chat_template *t = NULL;
            rlx_error *err = NULL;
            char *out = NULL;
            rlx_status s = rlx_chat_template_create(src, &t, &err);
            if (s != RLX_OK) {
                print_error("%s: %s\n", key, rlx_error_message(err));
                failures++;
            } else {
                s = render_conv(t, conv, spec, &now, &out, &err);
                failures += check(key, want, s, out, err);
                rendered++;
            }
            free(out);
            free(src);
            rlx_error_free(err);
            rlx_chat_template_free(t);
        }
    }
    assert_int_equal(rendered, json_object_object_length(exp_all));
    assert_int_equal(failures, 0);
    json_object_put(templates);
    json_object_put(convs);
}

/* The struct API builds the same context as the JSON one. */
static void struct_messages_match_json(void **state)
{
    (void)state;
    json_object *templates = json_object_from_file(FIX "templates.json");
    char *src = template_source(json_object_object_get(templates, "qwen3"));
    assert_non_null(src);
    rlx_chat_template *t = NULL;
    assert_int_equal(rlx_chat_template_create(src, &t, NULL), RLX_OK);

    json_object *calls = json_tokener_parse(
        "{\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
        "\"arguments\": {\"city\": \"Paris\"}}}]}");
    rlx_chat_message msgs[] = {
        {.role = "system", .content = "You are terse."},
        {.role = "user", .content = "Weather in Paris?"},
        {.role = "assistant", .content = "", .extra = calls},
        {.role = "tool", .content = "{\"temp\": 21}"},
    };
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < 4; i++) {
        json_object *m = json_object_new_object();
        json_object_object_add(m, "role", json_object_new_string(msgs[i].role));
        json_object_object_add(m, "content", json_object_new_string(msgs[i].content));
        if (msgs[i].extra)
            json_object_object_add(m, "tool_calls",
                                   json_object_get(json_object_object_get(calls, "tool_calls")));
        json_object_array_add(arr, m);
    }
    json_object *vars = json_tokener_parse("{\"enable_thinking\": false}");
    rlx_chat_render_opts o = rlx_chat_render_default_opts();
    o.add_generation_prompt = true;
    o.vars = vars;
    char *a = NULL, *b = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_chat_template_render(t, msgs, 4, &o, &a, &err), RLX_OK);
    assert_int_equal(rlx_chat_template_render_json(t, arr, &o, &b, &err), RLX_OK);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                              "{\"city\": \"Paris\"}}\n</tool_call>"));
    assert_non_null(strstr(a, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    free(a);
    free(b);
    json_object_put(arr);
    json_object_put(calls);
    json_object_put(vars);
    rlx_chat_template_free(t);
    free(src);
    json_object_put(templates);
}

/* ---- errors --------------------------------------------------------------------------------- */

static rlx_status render_src(const char *src, const char *ctx_json, char **out, rlx_error **err,
                             const rlx_jinja_render_opts *opts)
{
    rlx_jinja_template *t = NULL;
    *out = NULL;
    rlx_status s = rlx_jinja_template_create(src, strlen(src), &t, err);
    if (s != RLX_OK)
        return s;
    json_object *ctx = ctx_json ? json_tokener_parse(ctx_json) : NULL;
    s = rlx_jinja_template_render(t, ctx, opts, out, NULL, err);
    json_object_put(ctx);
    rlx_jinja_template_free(t);
    return s;
}

static void expect_error(const char *src, rlx_status code, const char *message,
                         const rlx_jinja_render_opts *opts)
{
    char *out = NULL;
    rlx_error *err = NULL;
    rlx_status s = render_src(src, NULL, &out, &err, opts);
    if (s != code || !strstr(rlx_error_message(err), message))
        print_error("template %.60s...\n  want %s \"%s\"\n  got  %s \"%s\"\n", src,
                    rlx_status_name(code), message, rlx_status_name(s), rlx_error_message(err));
    assert_int_equal(s, code);
    assert_non_null(strstr(rlx_error_message(err), message));
    assert_null(out);
    rlx_error_free(err);
}

static void unknown_constructs_name_themselves(void **state)
{
    (void)state;
    expect_error("line one\nline two\n{{ messages | wordwrap }}", RLX_ERR_UNSUPPORTED,
                 "chat template line 3: unknown filter 'wordwrap'", NULL);
    expect_error("{% if x is prime %}{% endif %}", RLX_ERR_UNSUPPORTED,
                 "chat template line 1: unknown test 'prime'", NULL);
    expect_error("\n\n{% frobnicate %}", RLX_ERR_UNSUPPORTED,
                 "chat template line 3: unknown tag 'frobnicate'", NULL);
    expect_error("{% include 'other.jinja' %}", RLX_ERR_UNSUPPORTED,
                 "chat template line 1: unsupported tag 'include'", NULL);
    expect_error("\n{{ 'abc'.zfill(5) }}", RLX_ERR_UNSUPPORTED,
                 "chat template line 2: unknown method 'zfill' of str object", NULL);
    expect_error("{{ lipsum() }}", RLX_ERR_UNSUPPORTED, "unknown function 'lipsum'", NULL);
    expect_error("{% for x in y recursive %}{% endfor %}", RLX_ERR_UNSUPPORTED,
                 "recursive for loops are not supported", NULL);
}

static void syntax_errors_have_lines(void **state)
{
    (void)state;
    expect_error("a\n{% if x %}\nno end", RLX_ERR_FORMAT, "needs 'endif'", NULL);
    expect_error("{{ 1 + }}", RLX_ERR_FORMAT, "chat template line 1: expected an expression", NULL);
    expect_error("\n\n{{ 'open", RLX_ERR_FORMAT, "chat template line 3: unterminated string", NULL);
    expect_error("{% endfor %}", RLX_ERR_FORMAT, "unexpected 'endfor'", NULL);
    expect_error("{{ x ", RLX_ERR_FORMAT, "never closed", NULL);
    expect_error("{# comment", RLX_ERR_FORMAT, "comment is never closed", NULL);
    expect_error("{{ a ? b }}", RLX_ERR_FORMAT, "unexpected character '?'", NULL);
}

static void runtime_errors(void **state)
{
    (void)state;
    expect_error("x\n\n{{ raise_exception('Only user and assistant roles are supported!') }}",
                 RLX_ERR_INVALID_ARG,
                 "chat template line 3: Only user and assistant roles are supported!", NULL);
    expect_error("{{ nope.attr }}", RLX_ERR_TYPE, "'nope' is undefined", NULL);
    expect_error("{{ {}.a.b }}", RLX_ERR_TYPE, "'dict object' has no attribute 'a'", NULL);
    expect_error("{{ 'a' + 1 }}", RLX_ERR_TYPE, "can only concatenate str (not \"int\") to str",
                 NULL);
    expect_error("{{ 1 - 'a' }}", RLX_ERR_TYPE,
                 "unsupported operand type(s) for -: 'int' and 'str'", NULL);
    expect_error("{{ [].append(1) }}", RLX_ERR_TYPE, "unsafe", NULL);
    expect_error("{% set d = {} %}{% set d.x = 1 %}", RLX_ERR_TYPE, "non-namespace", NULL);
    expect_error("{{ 9223372036854775807 + 1 }}", RLX_ERR_UNSUPPORTED, "integer overflow", NULL);
    expect_error("{{ 99999999999999999999 }}", RLX_ERR_UNSUPPORTED, "larger than 64 bits", NULL);
    expect_error("{{ [1]|tojson }}{{ nope|tojson }}", RLX_ERR_TYPE, "not JSON serializable", NULL);
}

/* ---- hostile templates ---------------------------------------------------------------------- */

static void hostile_templates_hit_limits(void **state)
{
    (void)state;
    rlx_jinja_render_opts o = rlx_jinja_default_render_opts();
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", RLX_ERR_BUDGET,
                 "nesting deeper than 64", &o);
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 RLX_ERR_BUDGET, "more than 1000000 loop iterations", &o);
    expect_error("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", RLX_ERR_BUDGET,
                 "longer than the limit of 8388608 bytes", &o);
    expect_error("{{ range(1000000) }}", RLX_ERR_BUDGET, "Range too big", &o);
    /* Quadratic string growth inside a namespace is caught by the memory limit. */
    rlx_jinja_render_opts small = o;
    small.max_memory_bytes = 8u << 20;
    expect_error("{% set ns = namespace(s='') %}{% for i in range(100000) %}"
                 "{% set ns.s = ns.s ~ 'abcdefghij' %}{% endfor %}{{ ns.s|length }}",
                 RLX_ERR_BUDGET, "more than 8388608 bytes of memory", &small);
    rlx_jinja_render_opts few = o;
    few.max_loop_iterations = 10;
    expect_error("{% for i in range(11) %}{% endfor %}", RLX_ERR_BUDGET,
                 "more than 10 loop iterations", &few);
    rlx_jinja_render_opts tiny = o;
    tiny.max_output_bytes = 5;
    expect_error("{{ 'abcdef' }}", RLX_ERR_BUDGET, "longer than the limit of 5 bytes", &tiny);

    /* Values nested deeper than any real one: clean errors, not a blown C stack. */
    const char *deep_list = "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                            "{% set ns.x = [ns.x] %}{% endfor %}";
    char buf[512];
    snprintf(buf, sizeof buf, "%s{{ ns.x }}", deep_list);
    expect_error(buf, RLX_ERR_BUDGET, "nested more than 256 deep cannot be printed", &o);
    snprintf(buf, sizeof buf, "%s{{ ns.x|tojson }}", deep_list);
    expect_error(buf, RLX_ERR_BUDGET, "nested too deeply", &o);
    snprintf(buf, sizeof buf, "%s{{ [ns.x, 1] < [[ns.x], 2] }}", deep_list);
    expect_error(buf, RLX_ERR_BUDGET, "cannot be ordered", &o);
    char *s = NULL;
    rlx_error *err = NULL;
    snprintf(buf, sizeof buf, "%s{{ ns.x == ns.x }}{{ [ns.x] == [[ns.x]] }}", deep_list);
    assert_int_equal(render_src(buf, NULL, &s, &err, &o), RLX_OK);
    assert_string_equal(s, "TrueFalse");
    free(s);

    /* Deep nesting in the source is refused by the parser, not the C stack. */
    size_t n = 100000;
    char *deep = malloc(2 * n + 16);
    strcpy(deep, "{{ ");
    size_t k = 3;
    for (size_t i = 0; i < n; i++)
        deep[k++] = '(';
    deep[k++] = '1';
    for (size_t i = 0; i < n; i++)
        deep[k++] = ')';
    strcpy(deep + k, " }}");
    expect_error(deep, RLX_ERR_BUDGET, "nested more than", &o);
    k = 0;
    for (size_t i = 0; i < 2000; i++)
        k += (size_t)sprintf(deep + k, "{%% if 1 %%}");
    expect_error(deep, RLX_ERR_BUDGET, "nested more than", &o);
    k = 3;
    strcpy(deep, "{{ ");
    for (size_t i = 0; i < 50000; i++)
        k += (size_t)sprintf(deep + k, "not ");
    strcpy(deep + k, "1 }}");
    expect_error(deep, RLX_ERR_BUDGET, "nested more than", &o);
    free(deep);
}

/* The deepest the evaluator can go: max_depth nested macro calls, each inside
 * as many parentheses as the parser allows. It must fail cleanly on a thread
 * with a 1 MiB stack. */
static void *deep_render_thread(void *arg)
{
    rlx_status *st = arg;
    char src[4096];
    size_t k = (size_t)sprintf(src, "{%% macro f(n) %%}{{ ");
    for (int i = 0; i < 95; i++)
        src[k++] = '(';
    k += (size_t)sprintf(src + k, "f(n + 1)");
    for (int i = 0; i < 95; i++)
        src[k++] = ')';
    sprintf(src + k, " }}{%% endmacro %%}{{ f(0) }}");
    char *out = NULL;
    rlx_error *err = NULL;
    *st = render_src(src, NULL, &out, &err, NULL);
    if (*st != RLX_ERR_BUDGET || !strstr(rlx_error_message(err), "nesting deeper than 64"))
        *st = RLX_ERR_INTERNAL;
    rlx_error_free(err);
    free(out);
    return NULL;
}

static void worst_case_stack_depth(void **state)
{
    (void)state;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* Sanitizers make frames several times larger. */
#if defined(__SANITIZE_ADDRESS__)
    pthread_attr_setstacksize(&attr, 8u << 20);
#else
    pthread_attr_setstacksize(&attr, 1u << 20);
#endif
    pthread_t th;
    rlx_status st = RLX_OK;
    assert_int_equal(pthread_create(&th, &attr, deep_render_thread, &st), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&attr);
    assert_int_equal(st, RLX_ERR_BUDGET);
}

static void api_edges(void **state)
{
    (void)state;
    rlx_chat_template *t = (rlx_chat_template *)1;
    rlx_error *err = NULL;
    assert_int_equal(rlx_chat_template_create(NULL, &t, &err), RLX_ERR_INVALID_ARG);
    assert_null(t);
    rlx_error_clear(&err);
    assert_int_equal(rlx_chat_template_create("{{ bos_token }}{{ messages|length }}", &t, &err),
                     RLX_OK);
    char *out = (char *)1;
    rlx_chat_render_opts o = rlx_chat_render_default_opts();
    assert_int_equal(rlx_chat_template_render(t, NULL, 0, &o, &out, &err), RLX_OK);
    assert_string_equal(out, "0"); /* bos_token not given: undefined, prints nothing */
    free(out);
    rlx_chat_message bad = {.role = NULL, .content = "x"};
    assert_int_equal(rlx_chat_template_render(t, &bad, 1, &o, &out, &err), RLX_ERR_INVALID_ARG);
    assert_null(out);
    rlx_error_clear(&err);
    json_object *notarr = json_object_new_object();
    assert_int_equal(rlx_chat_template_render_json(t, notarr, &o, &out, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    json_object_put(notarr);
    rlx_chat_template_free(t);
    rlx_chat_template_free(NULL);

    /* The template source may end in "\r\n" and use CRLF line ends: jinja2 normalizes both. */
    char *s = NULL;
    assert_int_equal(render_src("{% if true %}\r\nA\r\n{% endif %}\r\n", NULL, &s, &err, NULL),
                     RLX_OK);
    assert_string_equal(s, "A\n");
    free(s);
    /* Exactly one trailing newline of the source is dropped (keep_trailing_newline=False). */
    assert_int_equal(render_src("x\n\n", NULL, &s, &err, NULL), RLX_OK);
    assert_string_equal(s, "x\n");
    free(s);
    /* Numeric literals of any length (found by fuzzing: a fixed buffer overflowed). */
    char lit[600];
    memset(lit, '1', sizeof lit);
    memcpy(lit, "{{ ", 3);
    lit[300] = '.';
    memcpy(lit + sizeof lit - 4, " }}", 4);
    assert_int_equal(render_src(lit, NULL, &s, &err, NULL), RLX_OK);
    assert_string_equal(s, "1.1111111111111112e+296");
    free(s);
    expect_error("{{ 000000000000000000000000000000042 }}{{ 1_000_000_000_000_000_000_000 }}",
                 RLX_ERR_UNSUPPORTED,
                 "integer literal 1000000000000000000000 is larger than 64 bits", NULL);
    /* A NULL context renders with no variables. */
    assert_int_equal(render_src("[{{ anything }}]", NULL, &s, &err, NULL), RLX_OK);
    assert_string_equal(s, "[]");
    free(s);
}

/* One template rendered from several threads at once gives the same text. */

typedef struct thread_job {
    const rlx_chat_template *t;
    char *out;
} thread_job;

static void *render_thread(void *arg)
{
    thread_job *job = arg;
    rlx_chat_message msgs[] = {{.role = "user", .content = "hello"}};
    rlx_chat_render_opts o = rlx_chat_render_default_opts();
    o.add_generation_prompt = true;
    for (int i = 0; i < 50; i++) {
        free(job->out);
        job->out = NULL;
        if (rlx_chat_template_render(job->t, msgs, 1, &o, &job->out, NULL) != RLX_OK)
            break;
    }
    return NULL;
}

static void concurrent_renders(void **state)
{
    (void)state;
    char *src = read_text(FIX "chatml.jinja");
    rlx_chat_template *t = NULL;
    assert_int_equal(rlx_chat_template_create(src, &t, NULL), RLX_OK);
    pthread_t th[4];
    thread_job jobs[4] = {{0}};
    for (int i = 0; i < 4; i++) {
        jobs[i].t = t;
        pthread_create(&th[i], NULL, render_thread, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_non_null(jobs[i].out);
        assert_string_equal(jobs[i].out,
                            "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
        free(jobs[i].out);
    }
    rlx_chat_template_free(t);
    free(src);
}

static int teardown(void **state)
{
    (void)state;
    json_object_put(expected());
    return 0;
}

int main(void)
{
    rlx_test_need_data("tokenizers/hf-qwen3/tokenizer_config.json",
                       "tokenizers/hf-llama3.1/tokenizer_config.json",
                       "tokenizers/hf-gemma3/tokenizer_config.json", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(expressions_match_jinja2),
        cmocka_unit_test(chats_match_jinja2),
        cmocka_unit_test(struct_messages_match_json),
        cmocka_unit_test(unknown_constructs_name_themselves),
        cmocka_unit_test(syntax_errors_have_lines),
        cmocka_unit_test(runtime_errors),
        cmocka_unit_test(hostile_templates_hit_limits),
        cmocka_unit_test(worst_case_stack_depth),
        cmocka_unit_test(api_edges),
        cmocka_unit_test(concurrent_renders),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
