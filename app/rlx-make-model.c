/* rlx make-model: a random-weight GGUF in a real model's shape, for
 * benchmarks and tests (never a file to commit). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "engine/quantize/make-model.h"
#include "rlx-cli.h"

#define MAKE_MODEL_USAGE                                                                   \
    "usage: rlx make-model --shape qwen3-0.6b|llama-3.2-1b|tiny --vocab VOCAB.gguf --out " \
    "FILE.gguf [--arch llama|qwen2|qwen3] [--seed S] [--dtype f32|f16] [-t THREADS]"

int rlx_cmd_make_model(int argc, char **argv)
{
    rlx_make_model_params p = rlx_make_model_default_params();
    p.shape = NULL;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("%s\nshapes: %s\n", MAKE_MODEL_USAGE, rlx_make_model_shapes());
            return 0;
        }
        if (i + 1 >= argc)
            return rlx_cli_fail("make-model: '%s' needs a value; " MAKE_MODEL_USAGE, a);
        const char *v = argv[++i];
        if (!strcmp(a, "--arch")) {
            p.arch = v;
        } else if (!strcmp(a, "--shape")) {
            p.shape = v;
        } else if (!strcmp(a, "--out") || !strcmp(a, "-o")) {
            out = v;
        } else if (!strcmp(a, "--vocab")) {
            p.vocab_path = v;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            p.seed = strtoull(v, &end, 10);
            if (*end || !*v)
                return rlx_cli_fail("make-model: bad seed '%s'", v);
        } else if (!strcmp(a, "--dtype")) {
            if (!strcasecmp(v, "f32"))
                p.dtype = RLX_DTYPE_F32;
            else if (!strcasecmp(v, "f16"))
                p.dtype = RLX_DTYPE_F16;
            else
                return rlx_cli_fail("make-model: dtype '%s' is not f32 or f16", v);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 0 || n > 1024)
                return rlx_cli_fail("make-model: bad thread count '%s'", v);
            p.n_threads = (int)n;
        } else {
            return rlx_cli_fail("make-model: unknown option '%s'; " MAKE_MODEL_USAGE, a);
        }
    }
    if (!p.shape || !out || !p.vocab_path)
        return rlx_cli_fail("make-model: " MAKE_MODEL_USAGE);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rlx_error *err = NULL;
    if (rlx_make_model(out, p, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("wrote %s (%s, %s) in %.2f s\n", out, p.shape, p.dtype == RLX_DTYPE_F16 ? "F16" : "F32",
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return 0;
}
