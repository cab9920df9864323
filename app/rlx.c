/* rlx: the command-line tool over librlx, for scripting, tests and benchmarks. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx-config.h"
#include "rlx-bench-ops.h"
#include "rlx-cli.h"

int rlx_cli_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rlx: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

bool rlx_cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

double rlx_cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmd_bench(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "ops"))
        return rlx_bench_ops_main(argc - 1, argv + 1);
    if (argc >= 2 && argv[1][0] == '-')
        return rlx_bench_model_main(argc, argv);
    return rlx_cli_fail("bench: unknown benchmark; try: rlx bench -m MODEL [-p N -n N -r N] or "
                        "rlx bench ops [-t THREADS] [-r REPEATS]");
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"info", rlx_cmd_info,
     "FILE_OR_DIR [--tensors] [--json] | --devices   describe a model file, or the devices"},
    {"tokenize", rlx_cmd_tokenize, "-m FILE [--ids|--pieces] [--special] TEXT   show tokens"},
    {"generate", rlx_cmd_generate, "-m MODEL -p TEXT [-n N] [--temp T] ...   continue a text"},
    {"chat", rlx_cmd_chat, "-m MODEL [--ctx N] ...   chat over stdin with the model's template"},
    {"quantize", rlx_cmd_quantize,
     "IN.gguf OUT.gguf TYPE [-t THREADS]   llama.cpp quantization presets"},
    {"make-model", rlx_cmd_make_model,
     "--shape S --vocab V --out F   random-weight model for benchmarks"},
    {"perplexity", rlx_cmd_perplexity,
     "-m MODEL -f TEXT [--ctx N]   perplexity of a text (llama.cpp's method)"},
    {"bench", cmd_bench,
     "-m MODEL [-p 512 -n 128 -r 3]   model speed (llama-bench); ops: the CPU kernels"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: rlx COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n  rlx --version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("rlx %s\n", RLX_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "rlx: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
