/* rlx quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--pure] [-q]: llama.cpp's
 * quantization presets, one line per tensor and totals. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/quantize/quantize.h"
#include "rlx-cli.h"

static void human(uint64_t b, char *buf, size_t cap)
{
    if (b >= ((uint64_t)1 << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / (double)((uint64_t)1 << 30));
    else if (b >= ((uint64_t)1 << 20))
        snprintf(buf, cap, "%.2f MiB", (double)b / (double)((uint64_t)1 << 20));
    else if (b >= 1024)
        snprintf(buf, cap, "%.2f KiB", (double)b / 1024.0);
    else
        snprintf(buf, cap, "%" PRIu64 " B", b);
}

static bool report(const rlx_quantize_tensor_report *r, void *user)
{
    if (*(const bool *)user)
        return true;
    char shape[96] = "";
    size_t o = 0;
    for (uint32_t d = 0; d < r->n_dims && o < sizeof shape; d++)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%" PRIu64, d ? " x " : "", r->ne[d]);
    char a[32], b[32];
    human(r->bytes_in, a, sizeof a);
    human(r->bytes_out, b, sizeof b);
    printf("[%4" PRIu64 "/%4" PRIu64 "] %-36s %-22s %5s -> %-5s %10s -> %10s%s%s%s\n", r->index + 1,
           r->n_tensors, r->name, shape, rlx_dtype_name(r->from), rlx_dtype_name(r->to), a, b,
           r->note ? "  (" : "", r->note ? r->note : "", r->note ? ")" : "");
    fflush(stdout);
    return true;
}

static int usage_error(const char *what)
{
    return rlx_cli_fail("quantize: %s; usage: rlx quantize IN.gguf OUT.gguf TYPE (see rlx quantize "
                        "--help)",
                        what);
}

int rlx_cmd_quantize(int argc, char **argv)
{
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0;
    rlx_quantize_params p = rlx_quantize_default_params();
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) {
            if (i + 1 >= argc)
                return rlx_cli_fail("quantize: %s needs a value (see rlx quantize --help)",
                                    argv[i]);
            int rc = rlx_cli_parse_threads("quantize", argv[i], argv[i + 1], &p.n_threads);
            if (rc)
                return rc;
            i++;
        } else if (!strcmp(argv[i], "--pure")) {
            p.pure = true;
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: rlx quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--pure] [-q]\n"
                   "Writes IN's weights in TYPE's mix of quantizations (llama.cpp's presets).\n"
                   "  -t THREADS  1 to the CPUs this process may use (default: one per core)\n"
                   "  --pure      every weight in TYPE, no mix\n"
                   "  -q          no progress on stderr\n"
                   "types: %s\n",
                   rlx_quantize_type_list());
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return rlx_cli_fail("quantize: unknown option '%s' (see rlx quantize --help)", argv[i]);
        } else if (n_pos < 3) {
            pos[n_pos++] = argv[i];
        } else {
            return usage_error("too many arguments");
        }
    }
    if (n_pos != 3)
        return usage_error(n_pos == 0   ? "no input file"
                           : n_pos == 1 ? "no output file"
                                        : "no type");
    rlx_quantize_type type;
    if (rlx_quantize_type_from_name(pos[2], &type) != RLX_OK)
        return rlx_cli_fail("quantize: unknown type '%s'; valid types: %s", pos[2],
                            rlx_quantize_type_list());
    p.progress = report;
    p.progress_user = &quiet;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rlx_quantize_stats st;
    rlx_error *err = NULL;
    if (rlx_quantize_file(pos[0], pos[1], type, p, &st, &err) != RLX_OK) {
        int rc = rlx_cli_fail("quantize: %s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    char a[32], b[32];
    human(st.bytes_in, a, sizeof a);
    human(st.bytes_out, b, sizeof b);
    printf("%s: %" PRIu64 " tensors (%" PRIu64 " quantized, %" PRIu64 " shape fallbacks, %" PRIu64
           " re-quantized), %s -> %s (%.2fx) in %.2f s\n",
           rlx_quantize_type_name(type), st.n_tensors, st.n_quantized, st.n_fallback,
           st.n_requantized, a, b, st.bytes_out ? (double)st.bytes_in / (double)st.bytes_out : 0.0,
           secs);
    return 0;
}
