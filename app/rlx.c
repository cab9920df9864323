/* rlx: the command-line tool over librlx, for scripting, tests and benchmarks. */
#include <errno.h>
#include <sched.h> /* sched_getaffinity, CPU_COUNT (the build defines _GNU_SOURCE) */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <limits.h>

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

bool rlx_cli_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return false;
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end++;
    if (*end == 'B')
        end++;
    if (*end)
        return false;
    *out = (uint64_t)(v * mul);
    return true;
}

int rlx_cli_usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int rlx_cli_parse_threads(const char *cmd, const char *flag, const char *v, int *out)
{
    int cpus = rlx_cli_usable_cpus();
    long n;
    if (!rlx_cli_parse_long(v, LONG_MIN, LONG_MAX, &n))
        return rlx_cli_fail("%s: %s wants a thread count, not '%s'", cmd, flag, v);
    if (n < 1 || n > cpus)
        return rlx_cli_fail("%s: %s %s is out of range: this process may run on %d CPU%s, so give "
                            "1 to %d (or leave %s out for the default)",
                            cmd, flag, v, cpus, cpus == 1 ? "" : "s", cpus, flag);
    *out = (int)n;
    return 0;
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
    if (argc >= 2 && !strcmp(argv[1], "whisper"))
        return rlx_bench_whisper_main(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "sam"))
        return rlx_bench_sam_main(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "flux2"))
        return rlx_bench_flux2_main(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "onnx"))
        return rlx_bench_onnx_main(argc - 1, argv + 1);
    if (argc >= 2 && argv[1][0] != '-')
        return rlx_cli_fail("bench: no benchmark '%s'; there are the model's (-m MODEL), a "
                            "Whisper model's (whisper), a SAM model's (sam), a FLUX.2 model's "
                            "(flux2), an ONNX model's (onnx) and the kernels' (ops) (see rlx bench "
                            "--help)",
                            argv[1]);
    return rlx_bench_model_main(argc, argv);
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
    {"transcribe", rlx_cmd_transcribe,
     "-m MODEL -f AUDIO [-o OUT.srt] [--language L] ...   speech to timestamped text"},
    {"segment", rlx_cmd_segment,
     "-m SAM|X.onnx -i IMAGE [--point X,Y] [--cutout OUT.png]   segment; .onnx: remove background"},
    {"run", rlx_cmd_run,
     "MODEL.onnx --input NAME=FILE.npy ... --output DIR [--device D]   run an ONNX model"},
    {"imagine", rlx_cmd_imagine,
     "-m FLUX2 -p PROMPT -o OUT.png [-W 1024 -H 1024] [--steps N] ...   text to image"},
    {"bench", cmd_bench,
     "-m MODEL [-p 512 -n 128 -r 3]   model speed (llama-bench); ops, whisper, sam, flux2, onnx "
     "(--help)"},
};

static void usage(void)
{
    printf("usage: rlx COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        printf("  %-10s %s\n", commands[i].name, commands[i].help);
    printf("\n  rlx COMMAND --help   that command's options\n"
           "  rlx --version\n"
           "Every command exits 0, or 1 with a one-line error on stderr (rlx generate\n"
           "stopped by Ctrl+C: 130).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        (!strcmp(argv[1], "help") && argc == 2)) {
        usage();
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("rlx %s\n", RLX_VERSION);
        return 0;
    }
    /* rlx help COMMAND is rlx COMMAND --help */
    const char *name = !strcmp(argv[1], "help") ? argv[2] : argv[1];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(name, commands[i].name))
            continue;
        if (!strcmp(argv[1], "help")) {
            char *hv[] = {argv[2], "--help", NULL};
            return commands[i].fn(2, hv);
        }
        return commands[i].fn(argc - 1, argv + 1);
    }
    if (name[0] == '-')
        return rlx_cli_fail("unknown option '%s' (see rlx --help)", name);
    return rlx_cli_fail("unknown command '%s' (see rlx --help)", name);
}
