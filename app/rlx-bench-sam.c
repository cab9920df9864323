/* rlx bench sam: a Segment Anything model's speed as a person meets it: the
 * image encoder once per picture, then the prompt encoder + mask decoder per
 * click (one point, a box, three points), each timed apart from its first run
 * (which compiles its program), plus turning a click's three low-resolution
 * masks into masks at the picture's size, and the peak resident memory
 * against the file. tools/bench-sam.sh puts the figures beside PyTorch's. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "engine/image/image.h"
#include "engine/runtime/session.h"
#include "models/sam/sam-open.h"
#include "models/sam/sam.h"
#include "rlx-bench-ops.h"
#include "rlx-cli.h"

static const char usage[] =
    "usage: rlx bench sam -m MODEL [-i IMAGE] [options]\n"
    "Times a SAM model: the image encoder per picture and the mask decoder per click\n"
    "(one point with three proposals, a box, three points), each after a first run that\n"
    "compiles its program, and the masks of a click brought to the picture's size.\n"
    "Prints the median and the fastest of the repetitions.\n"
    "  -m MODEL             a SAM .pth, .safetensors or Hugging Face folder\n"
    "  -i IMAGE             a PNG or JPEG (default: a fixed synthetic 1024 x 1024 input,\n"
    "                       the one of tests/reference/sam_reference.py)\n"
    "  -r N                 repetitions (default 3; clicks: 4 x N, at different points)\n"
    "  -t THREADS           CPU threads (default: one per core)\n"
    "  --device DEV         cpu (default), vulkan:N, cuda:N\n"
    "  --ops                one more encode and click with the time per op kind\n"
    "  --dump DIR           write DIR/embedding.f32 ([256][64][64]) and DIR/click.f32\n"
    "                       (3 IoUs, then 3 x 256 x 256 logits of a positive click at\n"
    "                       500,375) for a comparison with PyTorch (tools/bench-sam.sh)\n"
    "  --json               the figures as one JSON object\n";

static int fail_err(rlx_error *err)
{
    int rc = rlx_cli_fail("bench sam: %s", rlx_error_message(err));
    rlx_error_free(err);
    return rc;
}

/* The file's bytes; for a Hugging Face folder, its model.safetensors'. */
static uint64_t model_bytes(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    if (S_ISREG(st.st_mode))
        return (uint64_t)st.st_size;
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", path);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

/* tests/reference/sam_reference.py's image: u("image", i), the splitmix64 of
 * fnv1a64("image") + (i + 1) * golden, its top 24 bits mapped to [-1, 1). */
static void synthetic_image(float *chw)
{
    uint64_t seed = 0xcbf29ce484222325ull;
    for (const char *s = "image"; *s; s++)
        seed = (seed ^ (uint8_t)*s) * 0x100000001b3ull;
    const int64_t n = 3 * (int64_t)RLX_SAM_IMAGE_SIZE * RLX_SAM_IMAGE_SIZE;
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = seed + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        chw[i] = (float)((int32_t)(z >> 40) - (1 << 23)) / 8388608.0f;
    }
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

/* median of a copy (rlx_bench_median sorts its argument) */
static double med_of(const double *v, int n, double *scratch)
{
    memcpy(scratch, v, sizeof *v * (size_t)n);
    return rlx_bench_median(scratch, n);
}

static int cmp_prof(const void *a, const void *b)
{
    double x = ((const rlx_session_op_profile *)a)->ms, y = ((const rlx_session_op_profile *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

typedef struct {
    rlx_session_op_profile p[RLX_OP_COUNT];
    int n;
    double total;
} profile;

static void take_profile(rlx_session *s, profile *out)
{
    out->n = rlx_session_profile(s, out->p, RLX_OP_COUNT);
    if (out->n > RLX_OP_COUNT)
        out->n = RLX_OP_COUNT;
    qsort(out->p, (size_t)out->n, sizeof out->p[0], cmp_prof);
    out->total = 0;
    for (int i = 0; i < out->n; i++)
        out->total += out->p[i].ms;
}

static void print_profile(const char *what, const profile *pr)
{
    printf("ops       %s, one run with per-op timing: %.1f ms in all\n", what, pr->total);
    for (int i = 0; i < pr->n && i < 10; i++)
        printf("          %-18s %6lld  %9.2f ms  %5.1f%%\n", rlx_op_name(pr->p[i].op),
               (long long)pr->p[i].count, pr->p[i].ms,
               pr->total > 0 ? 100.0 * pr->p[i].ms / pr->total : 0.0);
}

static json_object *profile_json(const profile *pr)
{
    json_object *a = json_object_new_array();
    for (int i = 0; i < pr->n; i++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "op", json_object_new_string(rlx_op_name(pr->p[i].op)));
        json_object_object_add(e, "count", json_object_new_int64(pr->p[i].count));
        json_object_object_add(e, "ms", json_object_new_double(pr->p[i].ms));
        json_object_array_add(a, e);
    }
    return a;
}

static rlx_status write_floats(const char *dir, const char *name, const float *a, size_t na,
                               const float *b, size_t nb, rlx_error **err)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        return rlx_error_set(err, RLX_ERR_IO, "cannot write %s", p);
    bool ok = fwrite(a, sizeof *a, na, f) == na && (!b || fwrite(b, sizeof *b, nb, f) == nb);
    if (fclose(f) != 0 || !ok)
        return rlx_error_set(err, RLX_ERR_IO, "cannot write %s", p);
    return RLX_OK;
}

/* The prompt kinds timed per click. */
enum { K_POINT, K_BOX, K_POINTS3, K_COUNT };
static const char *const kind_name[K_COUNT] = {"point", "box", "points3"};

/* The r-th prompt of a kind, at a point that moves over the 1024 frame. */
static void make_prompt(int kind, long r, rlx_sam_point *pts, rlx_sam_prompt *pr)
{
    float x = (float)(96 + (r * 173) % 832), y = (float)(96 + (r * 271) % 832);
    memset(pr, 0, sizeof *pr);
    pr->points = pts;
    if (kind == K_POINT) {
        pts[0] = (rlx_sam_point){x, y, RLX_SAM_POSITIVE};
        pr->n_points = 1;
    } else if (kind == K_BOX) {
        pr->has_box = true;
        pr->box[0] = x - 80, pr->box[1] = y - 60, pr->box[2] = x + 80, pr->box[3] = y + 60;
    } else {
        pts[0] = (rlx_sam_point){x, y, RLX_SAM_POSITIVE};
        pts[1] = (rlx_sam_point){x + 40, y - 30, RLX_SAM_POSITIVE};
        pts[2] = (rlx_sam_point){1023 - x, 1023 - y, RLX_SAM_NEGATIVE};
        pr->n_points = 3;
    }
}

int rlx_bench_sam_main(int argc, char **argv)
{
    const char *model = NULL, *image = NULL, *dump = NULL;
    rlx_sam_params p = rlx_sam_default_params();
    long reps = 3;
    bool json = false, ops = false;
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
        if (!strcmp(a, "--ops")) {
            ops = true;
            continue;
        }
        if (strcmp(a, "-m") && strcmp(a, "-i") && strcmp(a, "-r") && strcmp(a, "-t") &&
            strcmp(a, "--device") && strcmp(a, "--dump"))
            return rlx_cli_fail("bench sam: unknown option '%s' (see rlx bench sam --help)", a);
        if (i + 1 >= argc)
            return rlx_cli_fail("bench sam: %s needs a value (see rlx bench sam --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m"))
            model = v;
        else if (!strcmp(a, "-i"))
            image = v;
        else if (!strcmp(a, "--dump"))
            dump = v;
        else if (!strcmp(a, "--device"))
            p.device = v;
        else if (!strcmp(a, "-r")) {
            if (!rlx_cli_parse_long(v, 1, 100, &reps))
                return rlx_cli_fail("bench sam: -r must be 1 to 100, not '%s'", v);
        } else {
            int rc = rlx_cli_parse_threads("bench sam", a, v, &p.n_threads);
            if (rc)
                return rc;
        }
    }
    if (!model)
        return rlx_cli_fail("bench sam: -m MODEL is required (see rlx bench sam --help)");

    rlx_error *err = NULL;
    int rc = 1;
    const int R = (int)reps, NC = 4 * R; /* clicks are fast: more of them */
    rlx_image *img = NULL;
    rlx_sam_file *f = NULL;
    const size_t MASK = (size_t)RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE;
    rlx_image_prep_params pp = rlx_image_prep_sam_params();
    rlx_image_prep_info info = {RLX_SAM_IMAGE_SIZE, RLX_SAM_IMAGE_SIZE, RLX_SAM_IMAGE_SIZE,
                                RLX_SAM_IMAGE_SIZE};
    float *chw = malloc(rlx_image_prep_floats(&pp) * sizeof *chw);
    float *low = malloc(3 * MASK * sizeof *low);
    double *te = calloc((size_t)R, sizeof(double)), *tc[K_COUNT], *scratch = NULL;
    double first_c[K_COUNT] = {0}, *tm = calloc((size_t)NC, sizeof(double));
    for (int k = 0; k < K_COUNT; k++)
        tc[k] = calloc((size_t)NC, sizeof(double));
    scratch = calloc((size_t)NC, sizeof(double));
    float *logits = NULL, *emb = NULL;
    uint8_t *masks = NULL;
    bool mem_ok = chw && low && te && tm && scratch;
    for (int k = 0; k < K_COUNT; k++)
        mem_ok = mem_ok && tc[k];
    if (!mem_ok) {
        rlx_cli_fail("bench sam: out of memory");
        goto out;
    }

    /* the model first: SAM 2 prepares the picture its own way */
    double t0 = rlx_cli_now();
    if (rlx_sam_open(&p, model, &f, &err) != RLX_OK) {
        rc = fail_err(err);
        goto out;
    }
    double load_s = rlx_cli_now() - t0;
    rlx_sam *sam = rlx_sam_file_runner(f);
    pp = rlx_sam_prep_params(sam);

    t0 = rlx_cli_now();
    double prep_ms = 0;
    if (image) {
        rlx_image_load_params lp = rlx_image_load_default_params();
        if (rlx_image_load(image, &lp, &img, &err) != RLX_OK ||
            rlx_image_preprocess(img, &pp, chw, &info, &err) != RLX_OK) {
            rc = fail_err(err);
            goto out;
        }
    } else {
        synthetic_image(chw);
    }
    prep_ms = (rlx_cli_now() - t0) * 1e3;
    size_t npix = (size_t)info.orig_width * (size_t)info.orig_height;
    logits = malloc(npix * sizeof *logits);
    masks = malloc(npix);
    if (!logits || !masks) {
        rlx_cli_fail("bench sam: out of memory for a %dx%d image", info.orig_width,
                     info.orig_height);
        goto out;
    }

    rlx_sam_info si;
    if (rlx_sam_info_get(sam, &si, &err) != RLX_OK) {
        rc = fail_err(err);
        goto out;
    }

    /* the encoder: a first run (compiles), then the timed ones */
    t0 = rlx_cli_now();
    if (rlx_sam_encode(sam, chw, &err) != RLX_OK) {
        rc = fail_err(err);
        goto out;
    }
    double first_e = (rlx_cli_now() - t0) * 1e3;
    for (int r = 0; r < R; r++) {
        double a = rlx_cli_now();
        if (rlx_sam_encode(sam, chw, &err) != RLX_OK) {
            rc = fail_err(err);
            goto out;
        }
        te[r] = (rlx_cli_now() - a) * 1e3;
    }

    /* clicks: each kind's first (its program's compile), then NC at moving points */
    rlx_sam_point pts[3];
    rlx_sam_prompt pr;
    float iou[3];
    int nm = 0;
    for (int k = 0; k < K_COUNT; k++) {
        for (int r = -1; r < NC; r++) {
            make_prompt(k, r + 1, pts, &pr);
            double a = rlx_cli_now();
            if (rlx_sam_decode(sam, &pr, k == K_POINT, low, iou, &nm, &err) != RLX_OK) {
                rc = fail_err(err);
                goto out;
            }
            double ms = (rlx_cli_now() - a) * 1e3;
            if (r < 0) {
                first_c[k] = ms;
                continue;
            }
            tc[k][r] = ms;
            if (k != K_POINT)
                continue;
            /* the three proposals at the picture's size, as rlx segment makes them */
            a = rlx_cli_now();
            for (int m = 0; m < nm; m++) {
                rlx_sam_proposal prop;
                if (rlx_sam_proposal_make(low + (size_t)m * MASK, iou[m], &pp, &info, logits, masks,
                                          &prop, &err) != RLX_OK) {
                    rc = fail_err(err);
                    goto out;
                }
            }
            tm[r] = (rlx_cli_now() - a) * 1e3;
        }
    }

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t peak_rss = (uint64_t)ru.ru_maxrss * 1024, file = model_bytes(model);
    rlx_session *s = rlx_sam_session(sam);
    rlx_session_memory_info mi = rlx_session_memory(s);

    if (dump) {
        /* the reference's image and point case (tests/reference/sam_reference.py) */
        emb = malloc((size_t)RLX_SAM_EMBED_DIM * RLX_SAM_EMBED_SIDE * RLX_SAM_EMBED_SIDE *
                     sizeof *emb);
        rlx_sam_point pt = {500.0f, 375.0f, RLX_SAM_POSITIVE};
        rlx_sam_prompt one = {.points = &pt, .n_points = 1};
        if (!emb) {
            rlx_cli_fail("bench sam: out of memory");
            goto out;
        }
        if (rlx_sam_embedding(sam, emb, &err) != RLX_OK ||
            write_floats(dump, "embedding.f32", emb,
                         (size_t)RLX_SAM_EMBED_DIM * RLX_SAM_EMBED_SIDE * RLX_SAM_EMBED_SIDE, NULL,
                         0, &err) != RLX_OK ||
            rlx_sam_decode(sam, &one, true, low, iou, &nm, &err) != RLX_OK ||
            write_floats(dump, "click.f32", iou, 3, low, 3 * MASK, &err) != RLX_OK) {
            rc = fail_err(err);
            goto out;
        }
    }

    profile pe = {0}, pc = {0};
    if (ops) {
        rlx_session_set_profiling(s, true);
        if (rlx_sam_encode(sam, chw, &err) != RLX_OK) {
            rc = fail_err(err);
            goto out;
        }
        take_profile(s, &pe);
        rlx_session_set_profiling(s, true); /* clears the totals */
        make_prompt(K_POINT, 1, pts, &pr);
        if (rlx_sam_decode(sam, &pr, true, low, iou, &nm, &err) != RLX_OK) {
            rc = fail_err(err);
            goto out;
        }
        take_profile(s, &pc);
        rlx_session_set_profiling(s, false);
    }

    const char *dev = p.device ? p.device : "cpu";
    double enc = med_of(te, R, scratch), click = med_of(tc[K_POINT], NC, scratch);
    double mask_ms = med_of(tm, NC, scratch);
    if (json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "model", json_object_new_string(model));
        json_object_object_add(j, "variant", json_object_new_string(si.variant));
        json_object_object_add(j, "embed_dim", json_object_new_int(si.embed_dim));
        json_object_object_add(j, "depth", json_object_new_int(si.depth));
        json_object_object_add(j, "device", json_object_new_string(dev));
        json_object_object_add(j, "threads", json_object_new_int(p.n_threads));
        json_object_object_add(j, "repetitions", json_object_new_int(R));
        json_object_object_add(j, "image", json_object_new_string(image ? image : "synthetic"));
        json_object_object_add(j, "load_s", json_object_new_double(load_s));
        json_object_object_add(j, "preprocess_ms", json_object_new_double(prep_ms));
        json_object_object_add(j, "encode_first_ms", json_object_new_double(first_e));
        json_object_object_add(j, "encode_ms", json_object_new_double(enc));
        json_object_object_add(j, "encode_min_ms", json_object_new_double(min_of(te, R)));
        for (int k = 0; k < K_COUNT; k++) {
            char key[48];
            snprintf(key, sizeof key, "%s_first_ms", kind_name[k]);
            json_object_object_add(j, key, json_object_new_double(first_c[k]));
            snprintf(key, sizeof key, "%s_ms", kind_name[k]);
            json_object_object_add(j, key, json_object_new_double(med_of(tc[k], NC, scratch)));
            snprintf(key, sizeof key, "%s_min_ms", kind_name[k]);
            json_object_object_add(j, key, json_object_new_double(min_of(tc[k], NC)));
        }
        json_object_object_add(j, "masks_to_image_ms", json_object_new_double(mask_ms));
        json_object_object_add(j, "peak_rss_bytes", json_object_new_int64((int64_t)peak_rss));
        json_object_object_add(j, "file_bytes", json_object_new_int64((int64_t)file));
        json_object_object_add(j, "weights_bytes",
                               json_object_new_int64((int64_t)mi.weights_bytes));
        json_object_object_add(j, "state_bytes", json_object_new_int64((int64_t)mi.state_bytes));
        json_object_object_add(j, "arena_bytes", json_object_new_int64((int64_t)mi.arena_bytes));
        if (ops) {
            json_object_object_add(j, "encoder_ops", profile_json(&pe));
            json_object_object_add(j, "click_ops", profile_json(&pc));
        }
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY));
        json_object_put(j);
    } else {
        char b1[32], b2[32], b3[32], b4[32], b5[32], thr[32];
        if (p.n_threads > 0)
            snprintf(thr, sizeof thr, "%d threads", p.n_threads);
        else
            snprintf(thr, sizeof thr, "default threads (%d usable CPUs)", rlx_cli_usable_cpus());
        printf("model     %s (%s), D %d, depth %d, %d heads, window %d, %d global blocks; "
               "load %.2f s\n",
               si.variant, model, si.embed_dim, si.depth, si.heads, si.window, si.n_global, load_s);
        printf("device    %s, %s, %d repetitions (median, min)\n", dev, thr, R);
        if (image)
            printf("image     %s, %dx%d; read and preprocessed in %.1f ms\n", image,
                   info.orig_width, info.orig_height, prep_ms);
        else
            printf("image     synthetic 1024x1024 (sam_reference.py's)\n");
        printf("encoder   %8.2f ms per image  (min %.2f; first %.2f with the compile)\n", enc,
               min_of(te, R), first_e);
        printf("click     %8.2f ms per click  (min %.2f; first %.2f; one point, 3 masks of "
               "256x256, %d clicks)\n",
               click, min_of(tc[K_POINT], NC), first_c[K_POINT], NC);
        printf("box       %8.2f ms per click  (min %.2f; first %.2f; 1 mask)\n",
               med_of(tc[K_BOX], NC, scratch), min_of(tc[K_BOX], NC), first_c[K_BOX]);
        printf("points3   %8.2f ms per click  (min %.2f; first %.2f; 2 positive 1 negative, 1 "
               "mask)\n",
               med_of(tc[K_POINTS3], NC, scratch), min_of(tc[K_POINTS3], NC), first_c[K_POINTS3]);
        printf("masks     %8.2f ms per click  (its 3 masks to %dx%d, thresholded, scored)\n",
               mask_ms, info.orig_width, info.orig_height);
        printf("memory    peak RSS %s; file %s; weights %s, states %s, activations %s\n",
               rlx_format_bytes(peak_rss, b1, sizeof b1), rlx_format_bytes(file, b2, sizeof b2),
               rlx_format_bytes(mi.weights_bytes, b3, sizeof b3),
               rlx_format_bytes(mi.state_bytes, b4, sizeof b4),
               rlx_format_bytes(mi.arena_bytes, b5, sizeof b5));
        if (ops) {
            print_profile("encoder", &pe);
            print_profile("click", &pc);
        }
    }
    rc = 0;
out:
    rlx_sam_file_close(f);
    rlx_image_free(img);
    free(chw), free(low), free(te), free(tm), free(scratch), free(logits), free(masks), free(emb);
    for (int k = 0; k < K_COUNT; k++)
        free(tc[k]);
    return rc;
}
