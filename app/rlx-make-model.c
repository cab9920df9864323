/* rlx make-model: a random-weight GGUF in a real model's shape, for
 * benchmarks and tests (never a file to commit). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "engine/quantize/make-model.h"
#include "rlx-cli.h"

#define MAKE_MODEL_USAGE                                                                      \
    "usage: rlx make-model --shape qwen3-0.6b|qwen3-4b|llama-3.2-1b|tiny --vocab VOCAB.gguf " \
    "--out "                                                                                  \
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
        if (strcmp(a, "--arch") && strcmp(a, "--shape") && strcmp(a, "--out") && strcmp(a, "-o") &&
            strcmp(a, "--vocab") && strcmp(a, "--seed") && strcmp(a, "--dtype") &&
            strcmp(a, "-t") && strcmp(a, "--threads"))
            return rlx_cli_fail("make-model: %s '%s' (see rlx make-model --help)",
                                a[0] == '-' ? "unknown option" : "unexpected argument", a);
        if (i + 1 >= argc)
            return rlx_cli_fail("make-model: %s needs a value (see rlx make-model --help)", a);
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
            if (*end || !*v || *v == '-')
                return rlx_cli_fail("make-model: --seed wants a whole number >= 0, not '%s'", v);
        } else if (!strcmp(a, "--dtype")) {
            if (!strcasecmp(v, "f32"))
                p.dtype = RLX_DTYPE_F32;
            else if (!strcasecmp(v, "f16"))
                p.dtype = RLX_DTYPE_F16;
            else
                return rlx_cli_fail("make-model: --dtype is f32 or f16, not '%s'", v);
        } else {
            int rc = rlx_cli_parse_threads("make-model", a, v, &p.n_threads);
            if (rc)
                return rc;
        }
    }
    if (!p.shape || !out || !p.vocab_path)
        return rlx_cli_fail("make-model: %s (see rlx make-model --help)", !p.shape ? "no --shape"
                                                                          : !out
                                                                              ? "no --out file"
                                                                              : "no --vocab file");
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
