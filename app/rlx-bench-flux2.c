/* rlx bench flux2: a FLUX.2 [klein] model's speed as a person meets it: the
 * prompt through the text encoder, the seconds of one denoising step at each
 * size asked (the first step of a size compiles its program, so a step is
 * timed from the second on), the VAE's decode, the GEMM rate a step reaches
 * against the machine's f32 GEMM rate measured in the same run, and the peak
 * resident memory against the weights. tools/bench-flux2.sh puts the figures
 * beside stable-diffusion.cpp's. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "backends/cpu/threadpool.h"
#include "models/diffusion/flux2-dit.h"
#include "models/diffusion/flux2.h"
#include "rlx-bench-ops.h"
#include "rlx-cli.h"

static const char usage[] =
    "usage: rlx bench flux2 -m MODEL [options]\n"
    "Times a FLUX.2 [klein] model: the text encoder, a denoising step at each size, the\n"
    "VAE's decode, the GEMM rate of a step as a share of this machine's f32 GEMM rate,\n"
    "and the peak resident memory.\n"
    "  -m MODEL             a diffusers folder, or a transformer file with the two below\n"
    "  --text-encoder PATH  a Qwen3 .gguf or text_encoder folder\n"
    "  --vae PATH           the VAE .safetensors or vae folder\n"
    "  -s SIZES             square sides to time, comma-separated (default 512,1024)\n"
    "  --steps N            steps a size (default 2: the first compiles, the rest are\n"
    "                       timed)\n"
    "  -t THREADS           CPU threads (default: one per core)\n"
    "  --device DEV         cpu (default), vulkan:N, cuda:N\n"
    "  --memory-budget SIZE e.g. 8G\n"
    "  --json               the figures as one JSON object\n";

#define MAX_SIZES 4

typedef struct {
    double t_text, t_last_step_end, t_decode_start;
    double step_s[RLX_FLUX2_MAX_STEPS + 1];
    int n_steps;
} timing;

static bool on_progress(void *user, const rlx_flux2_progress *p)
{
    timing *t = user;
    switch (p->stage) {
    case RLX_FLUX2_STAGE_TEXT:
        t->t_text = p->seconds;
        t->t_last_step_end = p->seconds;
        break;
    case RLX_FLUX2_STAGE_STEP:
        if (t->n_steps <= RLX_FLUX2_MAX_STEPS)
            t->step_s[t->n_steps++] = p->seconds - t->t_last_step_end;
        t->t_last_step_end = p->seconds;
        fprintf(stderr, "bench flux2: step %d of %d, %.2f s\n", p->step, p->steps,
                t->step_s[t->n_steps - 1]);
        break;
    case RLX_FLUX2_STAGE_DECODE:
        t->t_decode_start = p->seconds;
        break;
    }
    return true;
}

/* Multiply-adds x 2 of one transformer call over n tokens: each block's
 * projections (4 h^2 + 3 h m a token: attention in and out, the SwiGLU MLP)
 * and its attention (QK^T and PV over all tokens). */
static double step_flops(const rlx_flux2_dit_config *c, double n)
{
    double h = c->hidden, m = c->mlp_hidden;
    double blocks = c->n_double + c->n_single;
    return blocks * (2.0 * (4 * h * h + 3 * h * m) * n + 4.0 * n * n * h);
}

int rlx_bench_flux2_main(int argc, char **argv)
{
    rlx_flux2_params fp = rlx_flux2_default_params();
    const char *model = NULL, *sizes_arg = "512,1024";
    long steps = 2;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = true;
            continue;
        }
        if (i + 1 >= argc)
            return rlx_cli_fail("bench flux2: %s needs a value (see rlx bench flux2 --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--text-encoder"))
            fp.text_encoder = v;
        else if (!strcmp(a, "--vae"))
            fp.vae = v;
        else if (!strcmp(a, "-s") || !strcmp(a, "--sizes"))
            sizes_arg = v;
        else if (!strcmp(a, "--steps")) {
            if (!rlx_cli_parse_long(v, 1, 50, &steps))
                return rlx_cli_fail("bench flux2: --steps wants 1 to 50, not '%s'", v);
        } else if (!strcmp(a, "--device"))
            fp.device = v;
        else if (!strcmp(a, "--memory-budget")) {
            if (!rlx_cli_parse_size(v, &fp.memory_budget))
                return rlx_cli_fail("bench flux2: --memory-budget wants a size like 8G, not '%s'",
                                    v);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (rlx_cli_parse_threads("bench flux2", a, v, &fp.n_threads) != 0)
                return 1;
        } else
            return rlx_cli_fail("bench flux2: unknown option '%s' (see rlx bench flux2 --help)", a);
    }
    if (!model)
        return rlx_cli_fail("bench flux2: -m MODEL is required (see rlx bench flux2 --help)");
    int sizes[MAX_SIZES], n_sizes = 0;
    for (const char *s = sizes_arg; *s;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < RLX_FLUX2_MIN_SIDE || v > RLX_FLUX2_MAX_SIDE || v % 16 ||
            n_sizes == MAX_SIZES)
            return rlx_cli_fail("bench flux2: -s wants up to %d sides from %d to %d, multiples "
                                "of 16, comma-separated, not '%s'",
                                MAX_SIZES, RLX_FLUX2_MIN_SIDE, RLX_FLUX2_MAX_SIDE, sizes_arg);
        sizes[n_sizes++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return rlx_cli_fail("bench flux2: -s wants sides like 512,1024, not '%s'", sizes_arg);
    }

    rlx_error *err = NULL;
    rlx_flux2 *f = NULL;
    double t0 = rlx_cli_now();
    if (rlx_flux2_open(model, &fp, &f, &err) != RLX_OK) {
        int rc = rlx_cli_fail("bench flux2: %s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    double t_load = rlx_cli_now() - t0;
    rlx_flux2_info info = rlx_flux2_get_info(f);
    const rlx_flux2_dit_config *dc = rlx_flux2_dit_get_config(rlx_flux2_transformer(f));

    int threads = fp.n_threads > 0 ? fp.n_threads : rlx_cli_usable_cpus();
    double peak = 0;
    rlx_threadpool *pool = NULL;
    if (rlx_threadpool_create(threads, &pool) == RLX_OK) {
        peak = rlx_bench_gemm_peak(pool, 3);
        rlx_threadpool_free(pool);
    }

    json_object *j = json_object_new_object();
    json_object_object_add(j, "variant", json_object_new_string(info.variant));
    json_object_object_add(j, "device", json_object_new_string(fp.device ? fp.device : "cpu"));
    json_object_object_add(j, "threads", json_object_new_int(threads));
    json_object_object_add(j, "load_s", json_object_new_double(t_load));
    json_object_object_add(j, "gemm_peak_gflops", json_object_new_double(peak));
    json_object *runs = json_object_new_array();
    int rc = 0;
    if (!json)
        printf("FLUX.2 %s on %s, %d threads; loaded in %.1f s; f32 GEMM peak %.0f GFLOP/s\n",
               info.variant, fp.device ? fp.device : "cpu", threads, t_load, peak);
    for (int k = 0; k < n_sizes && rc == 0; k++) {
        rlx_flux2_request r = rlx_flux2_default_request(f);
        r.prompt = "a lighthouse on a cliff at dawn, oil on canvas";
        r.width = r.height = sizes[k];
        r.steps = (int)steps;
        r.seed = 1;
        timing t = {0};
        rlx_image *img = NULL;
        double g0 = rlx_cli_now();
        if (rlx_flux2_generate(f, &r, on_progress, &t, &img, &err) != RLX_OK) {
            rc = rlx_cli_fail("bench flux2: %d x %d: %s", sizes[k], sizes[k],
                              rlx_error_message(err));
            rlx_error_free(err);
            err = NULL;
            break;
        }
        double total = rlx_cli_now() - g0;
        rlx_image_free(img);
        double decode = total - t.t_decode_start;
        /* the steps after the first (which compiled): their median */
        double step = t.step_s[0];
        if (t.n_steps > 1)
            step = rlx_bench_median(t.step_s + 1, t.n_steps - 1);
        double n_img = (double)(sizes[k] / 16) * (sizes[k] / 16);
        double n_tok = n_img + 512; /* the prompt, padded as the pipeline pads it */
        int calls = info.uses_negative && r.guidance > 1 ? 2 : 1;
        double gflops = calls * step_flops(dc, n_tok) / step / 1e9;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "size", json_object_new_int(sizes[k]));
        json_object_object_add(o, "text_s", json_object_new_double(t.t_text));
        json_object_object_add(o, "first_step_s", json_object_new_double(t.step_s[0]));
        json_object_object_add(o, "step_s", json_object_new_double(step));
        json_object_object_add(o, "decode_s", json_object_new_double(decode));
        json_object_object_add(o, "step_gflops", json_object_new_double(gflops));
        json_object_array_add(runs, o);
        if (!json)
            printf("%4d x %-4d text %.2f s; step %.2f s (first, compiling: %.2f s), %.0f "
                   "GFLOP/s = %.0f%% of the GEMM peak; VAE decode %.2f s\n",
                   sizes[k], sizes[k], t.t_text, step, t.step_s[0], gflops,
                   peak > 0 ? 100 * gflops / peak : 0, decode);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t rss = (uint64_t)ru.ru_maxrss * 1024;
    uint64_t weights = info.bytes_text + info.bytes_transformer + info.bytes_vae;
    json_object_object_add(j, "runs", runs);
    json_object_object_add(j, "peak_rss_bytes", json_object_new_int64((int64_t)rss));
    json_object_object_add(j, "weights_bytes", json_object_new_int64((int64_t)weights));
    if (rc == 0) {
        if (json)
            printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY));
        else
            printf("memory    peak RSS %.2f GiB; weights %.2f GiB (text encoder %.2f, "
                   "transformer %.2f, VAE %.2f)\n",
                   (double)rss / (1 << 30), (double)weights / (1 << 30),
                   (double)info.bytes_text / (1 << 30), (double)info.bytes_transformer / (1 << 30),
                   (double)info.bytes_vae / (1 << 30));
    }
    json_object_put(j);
    rlx_flux2_free(f);
    return rc;
}
