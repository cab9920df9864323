/* rlx imagine: a picture from a prompt, with FLUX.2 [klein].
 *
 * Progress per step goes to stderr (step, seconds, time left); the PNG is
 * written once, at the end, with the settings that made it in a "parameters"
 * text chunk, so a stopped or failed run leaves no half picture. Ctrl+C
 * stops between steps (a second one ends at once). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/image/image.h"
#include "models/diffusion/flux2.h"
#include "rlx-cli.h"

static const char usage[] =
    "usage: rlx imagine -m MODEL -p PROMPT -o OUT.png [options]\n"
    "Makes a picture from a prompt with a FLUX.2 [klein] model.\n"
    "  -m MODEL              a diffusers folder (FLUX.2-klein-4B/ ...), or a transformer file\n"
    "                        (.safetensors or .gguf) with --text-encoder and --vae\n"
    "  -p PROMPT             what the picture shows\n"
    "  -o OUT.png            where the picture goes (not replaced unless --force)\n"
    "  -W N, -H N            width and height in pixels (default 1024; multiples of 16)\n"
    "  --steps N             denoising steps (default: the model's, 4 distilled / 50 base)\n"
    "  --seed S              the noise's seed (default 0): the same seed, the same picture\n"
    "  --guidance G          guidance scale (base models; default 4)\n"
    "  --negative TEXT       what the picture should not show (base models)\n"
    "  --init IMAGE          start from this picture (image-to-image)\n"
    "  --strength S          with --init: 0 keeps it, 1 ignores it (default 0.6)\n"
    "  --ref IMAGE           a reference picture to edit or follow (up to 4)\n"
    "  --lora FILE[:SCALE]   a LoRA of the transformer (.safetensors; diffusers, BFL or\n"
    "                        kohya names) at that strength (default 1); up to 8\n"
    "  --text-encoder PATH   a Qwen3 .gguf or text_encoder folder (single-file models)\n"
    "  --kind distilled|base which klein a single transformer file is (default: the\n"
    "                        folder's model_index.json, else distilled)\n"
    "  --vae PATH            the FLUX.2 VAE .safetensors or vae folder (single-file models)\n"
    "  --preview-decoder F   TAEF2 decoder (taef2_decoder.safetensors) for --preview-dir\n"
    "  --preview-dir DIR     a preview PNG after every step: DIR/step-NN.png (DIR is made)\n"
    "  --force               replace OUT.png (and previews) if they exist\n"
    "  --device DEV          cpu (default), vulkan:N, cuda:N\n"
    "  --memory-budget SIZE  e.g. 8G: the text encoder is released before denoising when\n"
    "                        all three parts do not fit\n"
    "  -t THREADS            CPU threads (default: one per core)\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
    static const char msg[] = "\nimagine: stopping after this step (Ctrl+C again ends now)\n";
    ssize_t k = write(2, msg, sizeof msg - 1);
    (void)k;
    signal(SIGINT, SIG_DFL);
}

typedef struct {
    const char *preview_dir;
    bool force;
    bool tty;
    int failed_previews;
} progress_ctx;

static bool on_progress(void *user, const rlx_flux2_progress *p)
{
    progress_ctx *c = user;
    switch (p->stage) {
    case RLX_FLUX2_STAGE_TEXT:
        fprintf(stderr, "imagine: prompt encoded in %.1f s\n", p->seconds);
        break;
    case RLX_FLUX2_STAGE_STEP:
        if (p->seconds_left >= 0)
            fprintf(stderr, "imagine: step %d of %d, %.1f s, about %.*f s left\n", p->step,
                    p->steps, p->seconds, p->seconds_left < 10 ? 1 : 0, p->seconds_left);
        else
            fprintf(stderr, "imagine: step %d of %d, %.1f s\n", p->step, p->steps, p->seconds);
        if (c->preview_dir && p->preview) {
            char path[4096];
            snprintf(path, sizeof path, "%s/step-%02d.png", c->preview_dir, p->step);
            rlx_error *err = NULL;
            if (rlx_image_write_png(path, p->preview, p->preview_w, p->preview_h, 3, c->force,
                                    &err) != RLX_OK) {
                if (!c->failed_previews++)
                    fprintf(stderr, "imagine: the preview was not written: %s\n",
                            rlx_error_message(err));
                rlx_error_free(err);
            }
        }
        break;
    case RLX_FLUX2_STAGE_DECODE:
        fprintf(stderr, "imagine: decoding the picture (%.1f s so far)\n", p->seconds);
        break;
    }
    return !interrupted;
}

static bool parse_float(const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= lo && d <= hi))
        return false;
    *out = d;
    return true;
}

/* The settings in the PNG's "parameters" chunk: the prompt, then one line
 * of "Key: value" pairs, as other image tools write it. */
static char *parameters_text(const rlx_flux2_request *r, const rlx_flux2_info *info,
                             const char *model, const rlx_flux2_params *fp)
{
    const char *base = strrchr(model, '/');
    size_t ml = strlen(model);
    while (ml > 1 && model[ml - 1] == '/')
        ml--; /* "folder/" names the folder */
    char name[512];
    snprintf(name, sizeof name, "%.*s", (int)ml, model);
    base = strrchr(name, '/');
    size_t n = strlen(r->prompt) + (r->negative ? strlen(r->negative) : 0) + 1024;
    for (int i = 0; i < fp->n_loras; i++)
        n += strlen(fp->loras[i].path) + 32;
    char *s = malloc(n);
    if (!s)
        return NULL;
    int k = snprintf(s, n, "%s\n", r->prompt);
    if (r->negative && *r->negative)
        k += snprintf(s + k, n - (size_t)k, "Negative prompt: %s\n", r->negative);
    k += snprintf(s + k, n - (size_t)k,
                  "Steps: %d, Sampler: Euler (flow matching), Guidance: %g, Seed: %llu, Size: "
                  "%dx%d, Model: %s (FLUX.2 %s)",
                  r->steps, (double)r->guidance, (unsigned long long)r->seed, r->width, r->height,
                  base ? base + 1 : name, info->variant);
    if (r->init)
        k += snprintf(s + k, n - (size_t)k, ", Strength: %g", (double)r->strength);
    /* each LoRA by its file's name and strength */
    for (int i = 0; i < fp->n_loras; i++) {
        const char *lb = strrchr(fp->loras[i].path, '/');
        k += snprintf(s + k, n - (size_t)k, ", LoRA: %s:%g", lb ? lb + 1 : fp->loras[i].path,
                      (double)fp->loras[i].scale);
    }
    return s;
}

int rlx_cmd_imagine(int argc, char **argv)
{
    rlx_flux2_params fp = rlx_flux2_default_params();
    const char *model = NULL, *prompt = NULL, *out = NULL, *negative = NULL, *init_path = NULL;
    const char *preview_dir = NULL;
    const char *ref_paths[RLX_FLUX2_MAX_REFS];
    int n_refs = 0;
    long width = 1024, height = 1024, steps = 0;
    unsigned long long seed = 0;
    double guidance = -1, strength = 0.6;
    bool force = false, have_strength = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--force")) {
            force = true;
            continue;
        }
        if (a[0] != '-')
            return rlx_cli_fail("imagine: unexpected argument '%s' (see rlx imagine --help)", a);
        static const char *const with_value[] = {"-m",
                                                 "--model",
                                                 "-p",
                                                 "--prompt",
                                                 "-o",
                                                 "--output",
                                                 "-W",
                                                 "--width",
                                                 "-H",
                                                 "--height",
                                                 "--steps",
                                                 "--seed",
                                                 "--guidance",
                                                 "--negative",
                                                 "--init",
                                                 "--strength",
                                                 "--ref",
                                                 "--lora",
                                                 "--kind",
                                                 "--text-encoder",
                                                 "--vae",
                                                 "--preview-decoder",
                                                 "--preview-dir",
                                                 "--device",
                                                 "--memory-budget",
                                                 "-t",
                                                 "--threads"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value && !known; k++)
            known = !strcmp(a, with_value[k]);
        if (!known)
            return rlx_cli_fail("imagine: unknown option '%s' (see rlx imagine --help)", a);
        if (i + 1 >= argc)
            return rlx_cli_fail("imagine: %s needs a value (see rlx imagine --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt"))
            prompt = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            out = v;
        else if (!strcmp(a, "-W") || !strcmp(a, "--width") || !strcmp(a, "-H") ||
                 !strcmp(a, "--height")) {
            long l;
            if (!rlx_cli_parse_long(v, RLX_FLUX2_MIN_SIDE, RLX_FLUX2_MAX_SIDE, &l))
                return rlx_cli_fail("imagine: %s wants %d to %d pixels, not '%s'", a,
                                    RLX_FLUX2_MIN_SIDE, RLX_FLUX2_MAX_SIDE, v);
            if (a[1] == 'W' || a[2] == 'w')
                width = l;
            else
                height = l;
        } else if (!strcmp(a, "--steps")) {
            if (!rlx_cli_parse_long(v, 1, RLX_FLUX2_MAX_STEPS, &steps))
                return rlx_cli_fail("imagine: --steps wants 1 to %d, not '%s'", RLX_FLUX2_MAX_STEPS,
                                    v);
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            seed = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-')
                return rlx_cli_fail("imagine: --seed wants a whole number from 0, not '%s'", v);
        } else if (!strcmp(a, "--guidance")) {
            if (!parse_float(v, 0, 100, &guidance))
                return rlx_cli_fail("imagine: --guidance wants a number from 0 to 100, not '%s'",
                                    v);
        } else if (!strcmp(a, "--strength")) {
            if (!parse_float(v, 0, 1, &strength))
                return rlx_cli_fail("imagine: --strength wants a number from 0 to 1, not '%s'", v);
            have_strength = true;
        } else if (!strcmp(a, "--negative"))
            negative = v;
        else if (!strcmp(a, "--init"))
            init_path = v;
        else if (!strcmp(a, "--ref")) {
            if (n_refs == RLX_FLUX2_MAX_REFS)
                return rlx_cli_fail("imagine: at most %d --ref pictures", RLX_FLUX2_MAX_REFS);
            ref_paths[n_refs++] = v;
        } else if (!strcmp(a, "--lora")) {
            if (fp.n_loras == RLX_FLUX2_MAX_LORAS)
                return rlx_cli_fail("imagine: at most %d --lora files", RLX_FLUX2_MAX_LORAS);
            const char *colon = strrchr(v, ':');
            double scale = 1;
            if (colon && !parse_float(colon + 1, -10, 10, &scale))
                return rlx_cli_fail("imagine: --lora wants FILE or FILE:SCALE, not '%s'", v);
            char *path = colon ? strndup(v, (size_t)(colon - v)) : strdup(v);
            fp.loras[fp.n_loras].path = path; /* lives to the end of the command */
            fp.loras[fp.n_loras].scale = (float)scale;
            fp.n_loras++;
        } else if (!strcmp(a, "--kind")) {
            if (!strcmp(v, "distilled"))
                fp.distilled = 1;
            else if (!strcmp(v, "base"))
                fp.distilled = 0;
            else
                return rlx_cli_fail("imagine: --kind is distilled or base, not '%s'", v);
        } else if (!strcmp(a, "--text-encoder"))
            fp.text_encoder = v;
        else if (!strcmp(a, "--vae"))
            fp.vae = v;
        else if (!strcmp(a, "--preview-decoder"))
            fp.preview_decoder = v;
        else if (!strcmp(a, "--preview-dir"))
            preview_dir = v;
        else if (!strcmp(a, "--device"))
            fp.device = v;
        else if (!strcmp(a, "--memory-budget")) {
            if (!rlx_cli_parse_size(v, &fp.memory_budget))
                return rlx_cli_fail("imagine: --memory-budget wants a size like 8G or 512M, not "
                                    "'%s'",
                                    v);
        } else if (rlx_cli_parse_threads("imagine", a, v, &fp.n_threads) != 0) {
            return 1;
        }
    }
    if (!model)
        return rlx_cli_fail("imagine: -m MODEL is required (see rlx imagine --help)");
    if (!prompt)
        return rlx_cli_fail("imagine: -p PROMPT is required (see rlx imagine --help)");
    if (!out)
        return rlx_cli_fail("imagine: -o OUT.png is required (see rlx imagine --help)");
    if (have_strength && !init_path)
        return rlx_cli_fail("imagine: --strength goes with --init IMAGE");
    if (preview_dir && !fp.preview_decoder)
        return rlx_cli_fail("imagine: --preview-dir needs --preview-decoder "
                            "taef2_decoder.safetensors (the tiny decoder that makes previews)");
    {
        /* before the model is read: a blank prompt is refused in one line */
        const char *c = prompt;
        while (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r')
            c++;
        if (!*c)
            return rlx_cli_fail("imagine: the prompt is empty: say what the picture should show");
    }
    if (preview_dir) {
        /* made when absent (one level, as mkdir does) */
        struct stat st;
        if (stat(preview_dir, &st) != 0 && mkdir(preview_dir, 0755) != 0)
            return rlx_cli_fail("imagine: --preview-dir %s cannot be made: %s", preview_dir,
                                strerror(errno));
        if (stat(preview_dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return rlx_cli_fail("imagine: --preview-dir %s is not a folder", preview_dir);
    }
    /* before any work: nothing that exists is replaced unless asked */
    if (!force && access(out, F_OK) == 0)
        return rlx_cli_fail("imagine: %s exists; give --force to replace it", out);

    rlx_error *err = NULL;
    int rc = 0;
    rlx_image_load_params lp = rlx_image_load_default_params();
    rlx_image *init = NULL, *refs[RLX_FLUX2_MAX_REFS] = {0};
    rlx_flux2 *f = NULL;
    rlx_image *img = NULL;
    char *note = NULL, *params = NULL;
    if (init_path && rlx_image_load(init_path, &lp, &init, &err) != RLX_OK) {
        rc = rlx_cli_fail("imagine: --init: %s", rlx_error_message(err));
        goto done;
    }
    for (int i = 0; i < n_refs; i++)
        if (rlx_image_load(ref_paths[i], &lp, &refs[i], &err) != RLX_OK) {
            rc = rlx_cli_fail("imagine: --ref: %s", rlx_error_message(err));
            goto done;
        }

    double t0 = rlx_cli_now();
    if (rlx_flux2_open(model, &fp, &f, &err) != RLX_OK) {
        rc = rlx_cli_fail("imagine: %s", rlx_error_message(err));
        goto done;
    }
    rlx_flux2_info info = rlx_flux2_get_info(f);
    fprintf(stderr, "imagine: FLUX.2 %s%s loaded in %.1f s on %s%s\n", info.variant,
            info.distilled ? " (distilled)" : " (base)", rlx_cli_now() - t0,
            fp.device ? fp.device : "cpu",
            info.text_kept ? "" : "; the text encoder is released before denoising");
    rlx_flux2_request r = rlx_flux2_default_request(f);
    r.prompt = prompt;
    r.negative = negative;
    r.width = (int)width;
    r.height = (int)height;
    if (steps)
        r.steps = (int)steps;
    r.seed = seed;
    if (guidance >= 0)
        r.guidance = (float)guidance;
    r.init = init;
    r.strength = (float)strength;
    for (int i = 0; i < n_refs; i++)
        r.refs[i] = refs[i];
    r.n_refs = n_refs;
    if (negative && *negative && !info.uses_negative) {
        fprintf(stderr, "imagine: note: this model (distilled) takes no negative prompt; it is "
                        "left out\n");
        r.negative = NULL; /* nor named in the PNG's parameters */
    }
    if (guidance >= 0 && info.distilled && guidance != 1)
        fprintf(stderr, "imagine: note: the distilled model ignores --guidance\n");
    if (rlx_flux2_check_request(f, &r, &note, &err) != RLX_OK) {
        rc = rlx_cli_fail("imagine: %s", rlx_error_message(err));
        goto done;
    }
    if (note)
        fprintf(stderr, "imagine: note: %s\n", note);

    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    progress_ctx pc = {.preview_dir = preview_dir, .force = force, .tty = isatty(2)};
    double t1 = rlx_cli_now();
    rlx_status st = rlx_flux2_generate(f, &r, on_progress, &pc, &img, &err);
    signal(SIGINT, SIG_DFL);
    if (st == RLX_ERR_CANCELLED) {
        rc = rlx_cli_fail("imagine: stopped; %s was not written", out);
        goto done;
    }
    if (st != RLX_OK) {
        rc = rlx_cli_fail("imagine: %s", rlx_error_message(err));
        goto done;
    }
    params = parameters_text(&r, &info, model, &fp);
    if (!params || rlx_image_write_png_text(out, img->rgb, img->width, img->height, 3, "parameters",
                                            params, force, &err) != RLX_OK) {
        rc = rlx_cli_fail("imagine: %s", err ? rlx_error_message(err) : "out of memory");
        goto done;
    }
    fprintf(stderr, "imagine: %s written (%d x %d, %d steps, seed %llu) in %.1f s\n", out,
            img->width, img->height, r.steps, (unsigned long long)r.seed, rlx_cli_now() - t1);

done:
    rlx_error_free(err);
    free(note);
    free(params);
    rlx_image_free(img);
    rlx_flux2_free(f);
    rlx_image_free(init);
    for (int i = 0; i < n_refs; i++)
        rlx_image_free(refs[i]);
    for (int i = 0; i < fp.n_loras; i++)
        free((char *)fp.loras[i].path);
    return rc;
}
