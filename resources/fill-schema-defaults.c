/* Build tool: writes the GSettings schema with the chat's sampling defaults
 * taken from the engine (rlx_llm_chat_default_params), so that the app's
 * settings start where rlx chat does and the numbers live in one place.
 *
 *   fill-schema-defaults IN.gschema.xml.in OUT.gschema.xml
 *
 * Replaces @CHAT_TEMPERATURE@, @CHAT_TOP_K@, @CHAT_TOP_P@, @CHAT_MIN_P@,
 * @CHAT_REPEAT_PENALTY@ and @CHAT_MAX_TOKENS@; any other @NAME@ is an error,
 * so a misspelt placeholder cannot reach the schema. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/llm/llm.h"

/* A GVariant double literal: always with a point, so it never reads as an int. */
static void fmt_double(char *buf, size_t cap, double v)
{
    snprintf(buf, cap, "%.6g", v);
    if (!strpbrk(buf, ".e"))
        strncat(buf, ".0", cap - strlen(buf) - 1);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: fill-schema-defaults IN OUT\n");
        return 1;
    }
    rlx_llm_generate_params gp = rlx_llm_chat_default_params();
    char temp[32], top_p[32], min_p[32], rep[32], top_k[32], max_tokens[32];
    fmt_double(temp, sizeof temp, gp.sampler.temperature);
    fmt_double(top_p, sizeof top_p, gp.sampler.top_p);
    fmt_double(min_p, sizeof min_p, gp.sampler.min_p);
    fmt_double(rep, sizeof rep, gp.sampler.repeat_penalty);
    snprintf(top_k, sizeof top_k, "%d", (int)gp.sampler.top_k);
    snprintf(max_tokens, sizeof max_tokens, "%d", (int)gp.max_tokens);
    const struct {
        const char *name, *value;
    } subst[] = {
        {"@CHAT_TEMPERATURE@", temp},   {"@CHAT_TOP_K@", top_k},
        {"@CHAT_TOP_P@", top_p},        {"@CHAT_MIN_P@", min_p},
        {"@CHAT_REPEAT_PENALTY@", rep}, {"@CHAT_MAX_TOKENS@", max_tokens},
    };
    FILE *in = fopen(argv[1], "r");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        fclose(in);
        return 1;
    }
    char line[4096];
    int lineno = 0, status = 0;
    while (fgets(line, sizeof line, in)) {
        lineno++;
        for (const char *p = line; *p;) {
            const char *at = strchr(p, '@');
            const char *end = at ? strchr(at + 1, '@') : NULL;
            if (!at || !end) {
                fputs(p, out);
                break;
            }
            fwrite(p, 1, (size_t)(at - p), out);
            size_t len = (size_t)(end - at) + 1;
            const char *value = NULL;
            for (size_t i = 0; i < sizeof subst / sizeof subst[0]; i++)
                if (strlen(subst[i].name) == len && !strncmp(at, subst[i].name, len))
                    value = subst[i].value;
            if (!value) {
                fprintf(stderr, "%s:%d: unknown placeholder %.*s\n", argv[1], lineno, (int)len, at);
                status = 1;
                value = "";
            }
            fputs(value, out);
            p = end + 1;
        }
    }
    fclose(in);
    if (fclose(out) != 0) {
        perror(argv[2]);
        status = 1;
    }
    return status;
}
