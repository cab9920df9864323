/* rlx segment: the mask of what a click (or a box) points at, with SAM;
 * or, with an ONNX salient-object model (ISNet), the background removed.
 *
 * The image is encoded once, then the prompt runs through the prompt
 * encoder and mask decoder; the best proposal (the model's predicted IoU)
 * is written as an 8-bit PNG mask and, with --cutout, as the image with the
 * mask as alpha. --json prints every proposal. Files that exist are left
 * alone unless --force says to replace them. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/image/image.h"
#include "models/isnet/isnet.h"
#include "models/sam/sam-auto.h"
#include "models/sam/sam-open.h"
#include "rlx-cli.h"

static const char usage[] =
    "usage: rlx segment -m MODEL -i IMAGE (--point X,Y[,1|0] ... | --box X0,Y0,X1,Y1)\n"
    "                   [-o MASK.png] [--cutout OUT.png] [--json] [options]\n"
    "       rlx segment -m MODEL -i IMAGE --all [-o LABELS.png] [--json] [options]\n"
    "       rlx segment -m MODEL.onnx -i IMAGE [--cutout OUT.png] [-o ALPHA.png] [--json]\n"
    "Segments what the points (and the box) show in the image, with a Segment Anything\n"
    "model. Coordinates are the image's pixels, from its top-left corner.\n"
    "With an .onnx background-removal model (ISNet, as @imgly/background-removal ships\n"
    "it) no points are needed: the foreground is cut out, -o writes its 8-bit alpha.\n"
    "  -m MODEL             SAM ViT-B/L/H: the official .pth, a .safetensors file, or a\n"
    "                       Hugging Face facebook/sam-vit-* folder; or an .onnx\n"
    "                       background-removal model\n"
    "  -i IMAGE             a PNG or JPEG (EXIF orientation applied)\n"
    "  --point X,Y[,L]      a point on the object (L = 1, the default) or on the\n"
    "                       background (L = 0); may be given several times\n"
    "  --box X0,Y0,X1,Y1    a box around the object\n"
    "  --mask-input MASK.png  refine an earlier mask (as -o wrote it, the image's size):\n"
    "                       it goes to the model as its mask prompt, with the points\n"
    "                       and the box; one mask is then written\n"
    "  -o MASK.png          the mask: white inside, black outside\n"
    "  --cutout OUT.png     the image with the mask as its alpha channel\n"
    "  --json               every proposal (predicted IoU, stability score, area, box) on\n"
    "                       stdout, as JSON\n"
    "  --all                segment everything (SAM's automatic mask generator): a grid\n"
    "                       of points, each a click, the masks kept by predicted IoU and\n"
    "                       stability, overlaps suppressed; -o writes an 8-bit label\n"
    "                       PNG (0: no mask, k: the k-th mask, largest first; at most 255)\n"
    "  --points-per-side N  the grid for --all (default 16: 256 clicks)\n"
    "  --iou-threshold P    --all keeps masks with a predicted IoU above P (default 0.88)\n"
    "  --stability-threshold S  and a stability score of at least S (default 0.95)\n"
    "  --force              replace -o and --cutout files that exist\n"
    "  --device DEV         cpu (default), vulkan:N, cuda:N\n"
    "  --memory-budget SIZE e.g. 2G, 512M\n"
    "  -t THREADS           CPU threads (default: one per core)\n"
    "One point alone gives three proposals (the object, a part, a whole) and the best\n"
    "is written; several points, a box or a mask input give one mask, as SAM's\n"
    "predictor does. A mask input is taken as logits of +8 inside and -8 outside (SAM\n"
    "was trained with its own earlier logits there; a file holds only the mask).\n";

#define MAX_POINTS 64

/* "X,Y" or "X,Y,L" */
static bool parse_point(const char *v, rlx_sam_point *p)
{
    double x, y;
    int label = 1, n = 0;
    if (sscanf(v, "%lf,%lf%n", &x, &y, &n) != 2)
        return false;
    if (v[n] == ',') {
        char *end;
        long l = strtol(v + n + 1, &end, 10);
        if (*end || (l != 0 && l != 1) || end == v + n + 1)
            return false;
        label = (int)l;
    } else if (v[n]) {
        return false;
    }
    if (!isfinite(x) || !isfinite(y))
        return false;
    p->x = (float)x;
    p->y = (float)y;
    p->label = label;
    return true;
}

static bool parse_box(const char *v, float b[4])
{
    double d[4];
    int n = 0;
    if (sscanf(v, "%lf,%lf,%lf,%lf%n", &d[0], &d[1], &d[2], &d[3], &n) != 4 || v[n])
        return false;
    for (int i = 0; i < 4; i++) {
        if (!isfinite(d[i]))
            return false;
        b[i] = (float)d[i];
    }
    return b[2] > b[0] && b[3] > b[1];
}

static bool inside(const rlx_image *img, float x, float y)
{
    return x >= 0 && y >= 0 && x <= (float)img->width && y <= (float)img->height;
}

static bool all_progress(void *user, int done, int total)
{
    (void)user;
    if (isatty(2))
        fprintf(stderr, "\rsegment: %d of %d points", done, total);
    return true;
}

static int segment_all(rlx_sam *sam, const rlx_image_prep_params *pp,
                       const rlx_image_prep_info *info, const rlx_sam_auto_params *ap,
                       const rlx_image *img, const char *image, const char *out_labels, bool force,
                       bool json, double t_model, double t_encode)
{
    rlx_error *err = NULL;
    rlx_sam_auto_mask *m = NULL;
    int n = 0;
    double t0 = rlx_cli_now();
    if (rlx_sam_segment_all(sam, pp, info, ap, all_progress, NULL, &m, &n, &err) != RLX_OK) {
        if (isatty(2))
            fputc('\n', stderr);
        int r = rlx_cli_fail("segment: %s", rlx_error_message(err));
        rlx_error_free(err);
        return r;
    }
    double t1 = rlx_cli_now();
    if (isatty(2))
        fputc('\n', stderr);
    int rc = 0;
    size_t npix = (size_t)img->width * (size_t)img->height;
    if (out_labels) {
        uint8_t *labels = calloc(npix, 1);
        if (!labels) {
            rc = rlx_cli_fail("segment: out of memory for a %dx%d label image", img->width,
                              img->height);
        } else {
            /* largest first, so a smaller mask inside a larger one stays visible */
            for (int k = 0; k < n; k++)
                for (size_t i = 0; i < npix; i++)
                    if (m[k].mask[i])
                        labels[i] = (uint8_t)(k + 1);
            if (rlx_image_write_mask_png(out_labels, labels, img->width, img->height, force,
                                         &err) != RLX_OK)
                rc = rlx_cli_fail("%s", rlx_error_message(err));
            free(labels);
        }
    }
    if (json && !rc) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "image", json_object_new_string(image));
        json_object_object_add(o, "width", json_object_new_int(img->width));
        json_object_object_add(o, "height", json_object_new_int(img->height));
        json_object_object_add(o, "points_per_side", json_object_new_int(ap->points_per_side));
        json_object *arr = json_object_new_array();
        for (int k = 0; k < n; k++) {
            json_object *p = json_object_new_object();
            json_object_object_add(p, "label", json_object_new_int(k + 1));
            json_object_object_add(p, "iou", json_object_new_double(m[k].iou));
            json_object_object_add(p, "stability", json_object_new_double(m[k].stability));
            json_object_object_add(p, "area", json_object_new_int64(m[k].area));
            json_object *b = json_object_new_array();
            for (int j = 0; j < 4; j++)
                json_object_array_add(b, json_object_new_int(m[k].box[j]));
            json_object_object_add(p, "box", b);
            json_object *pt = json_object_new_array();
            json_object_array_add(pt, json_object_new_double(m[k].point[0]));
            json_object_array_add(pt, json_object_new_double(m[k].point[1]));
            json_object_object_add(p, "point", pt);
            json_object_array_add(arr, p);
        }
        json_object_object_add(o, "masks", arr);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    }
    if (!rc)
        fprintf(stderr,
                "segment: %dx%d image; model %.0f ms, encoder %.0f ms, %d points in %.1f s; %d "
                "masks kept\n",
                img->width, img->height, t_model * 1e3, t_encode * 1e3,
                ap->points_per_side * ap->points_per_side, t1 - t0, n);
    rlx_error_free(err);
    rlx_sam_auto_masks_free(m, n);
    return rc;
}

/* The background removed with an ONNX salient-object model (isnet.h). */
static int remove_background(const rlx_isnet_params *ip, const char *model, const char *image,
                             const char *out_alpha, const char *out_cut, bool json, bool force)
{
    const char *outs[2] = {out_alpha, out_cut};
    for (int k = 0; k < 2; k++)
        if (outs[k] && !force && access(outs[k], F_OK) == 0)
            return rlx_cli_fail("segment: %s exists; give --force to replace it", outs[k]);
    rlx_error *err = NULL;
    rlx_image *img = NULL;
    rlx_isnet *n = NULL;
    uint8_t *alpha = NULL;
    int rc = 1;
    rlx_image_load_params lp = rlx_image_load_default_params();
    if (rlx_image_load(image, &lp, &img, &err) != RLX_OK) {
        rlx_cli_fail("%s", rlx_error_message(err)); /* it names the file */
        goto out;
    }
    double t0 = rlx_cli_now();
    if (rlx_isnet_open(ip, model, &n, &err) != RLX_OK) {
        /* the sentence names the file where it is about the file */
        if (strstr(rlx_error_message(err), model))
            rlx_cli_fail("segment: %s", rlx_error_message(err));
        else
            rlx_cli_fail("%s: %s", model, rlx_error_message(err));
        goto out;
    }
    double t1 = rlx_cli_now();
    size_t npix = (size_t)img->width * (size_t)img->height;
    alpha = malloc(npix);
    if (!alpha) {
        rlx_cli_fail("segment: out of memory for a %dx%d image", img->width, img->height);
        goto out;
    }
    if (rlx_isnet_run(n, img, alpha, NULL, &err) != RLX_OK) {
        rlx_cli_fail("segment: %s", rlx_error_message(err));
        goto out;
    }
    double t2 = rlx_cli_now();
    if (out_alpha && rlx_image_write_mask_png(out_alpha, alpha, img->width, img->height, force,
                                              &err) != RLX_OK) {
        rlx_cli_fail("%s", rlx_error_message(err));
        goto out;
    }
    if (out_cut && rlx_image_write_cutout_png(out_cut, img, alpha, force, &err) != RLX_OK) {
        rlx_cli_fail("%s", rlx_error_message(err));
        goto out;
    }
    int64_t fg = 0;
    double sum = 0;
    int box[4] = {img->width, img->height, -1, -1};
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++) {
            uint8_t a = alpha[(size_t)y * img->width + x];
            sum += a;
            if (a >= 128) {
                fg++;
                box[0] = x < box[0] ? x : box[0], box[1] = y < box[1] ? y : box[1];
                box[2] = x > box[2] ? x : box[2], box[3] = y > box[3] ? y : box[3];
            }
        }
    if (!fg)
        box[0] = box[1] = -1;
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "image", json_object_new_string(image));
        json_object_object_add(o, "width", json_object_new_int(img->width));
        json_object_object_add(o, "height", json_object_new_int(img->height));
        json_object_object_add(o, "model_side", json_object_new_int(rlx_isnet_side(n)));
        json_object_object_add(o, "foreground_pixels", json_object_new_int64(fg));
        json_object_object_add(o, "foreground_fraction",
                               json_object_new_double((double)fg / (double)npix));
        json_object_object_add(o, "mean_alpha", json_object_new_double(sum / (double)npix));
        json_object *b = json_object_new_array();
        for (int j = 0; j < 4; j++)
            json_object_array_add(b, json_object_new_int(box[j]));
        json_object_object_add(o, "box", b);
        json_object_object_add(o, "model_seconds", json_object_new_double(t1 - t0));
        json_object_object_add(o, "run_seconds", json_object_new_double(t2 - t1));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    }
    fprintf(stderr,
            "segment: %dx%d image; model %.0f ms, background removal %.1f s; foreground %.1f %% "
            "of the pixels\n",
            img->width, img->height, (t1 - t0) * 1e3, t2 - t1, 100.0 * (double)fg / (double)npix);
    rc = 0;
out:
    rlx_error_free(err);
    free(alpha);
    rlx_isnet_close(n);
    rlx_image_free(img);
    return rc;
}

int rlx_cmd_segment(int argc, char **argv)
{
    rlx_sam_params sp = rlx_sam_default_params();
    const char *model = NULL, *image = NULL, *out_mask = NULL, *out_cut = NULL;
    const char *mask_in = NULL;
    rlx_sam_point pts[MAX_POINTS];
    int n_pts = 0;
    bool has_box = false, json = false, force = false, all = false;
    rlx_sam_auto_params ap = rlx_sam_auto_default_params();
    ap.max_masks = 255; /* the label PNG's values */
    float box[4] = {0};
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
        if (!strcmp(a, "--force")) {
            force = true;
            continue;
        }
        if (!strcmp(a, "--all")) {
            all = true;
            continue;
        }
        if (a[0] != '-')
            return rlx_cli_fail("segment: unexpected argument '%s' (see rlx segment --help)", a);
        static const char *const with_value[] = {"-m",
                                                 "--model",
                                                 "-i",
                                                 "--image",
                                                 "--point",
                                                 "--box",
                                                 "--mask-input",
                                                 "-o",
                                                 "--output",
                                                 "--cutout",
                                                 "--device",
                                                 "--memory-budget",
                                                 "-t",
                                                 "--threads",
                                                 "--points-per-side",
                                                 "--iou-threshold",
                                                 "--stability-threshold"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value && !known; k++)
            known = !strcmp(a, with_value[k]);
        if (!known)
            return rlx_cli_fail("segment: unknown option '%s' (see rlx segment --help)", a);
        if (i + 1 >= argc)
            return rlx_cli_fail("segment: %s needs a value (see rlx segment --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "-i") || !strcmp(a, "--image"))
            image = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            out_mask = v;
        else if (!strcmp(a, "--mask-input"))
            mask_in = v;
        else if (!strcmp(a, "--cutout"))
            out_cut = v;
        else if (!strcmp(a, "--device"))
            sp.device = v;
        else if (!strcmp(a, "--point")) {
            if (n_pts == MAX_POINTS)
                return rlx_cli_fail("segment: at most %d points", MAX_POINTS);
            if (!parse_point(v, &pts[n_pts]))
                return rlx_cli_fail("segment: --point wants X,Y or X,Y,1 (object) or X,Y,0 "
                                    "(background), not '%s'",
                                    v);
            n_pts++;
        } else if (!strcmp(a, "--box")) {
            if (!parse_box(v, box))
                return rlx_cli_fail("segment: --box wants X0,Y0,X1,Y1 with X1 > X0 and Y1 > Y0, "
                                    "not '%s'",
                                    v);
            has_box = true;
        } else if (!strcmp(a, "--points-per-side")) {
            long l;
            if (!rlx_cli_parse_long(v, 1, 64, &l))
                return rlx_cli_fail("segment: --points-per-side wants 1 to 64, not '%s'", v);
            ap.points_per_side = (int)l;
        } else if (!strcmp(a, "--iou-threshold") || !strcmp(a, "--stability-threshold")) {
            char *end;
            double d = strtod(v, &end);
            if (*end || end == v || !(d >= 0 && d <= 1))
                return rlx_cli_fail("segment: %s wants a number from 0 to 1, not '%s'", a, v);
            if (!strcmp(a, "--iou-threshold"))
                ap.pred_iou_thresh = (float)d;
            else
                ap.stability_thresh = (float)d;
        } else if (!strcmp(a, "--memory-budget")) {
            if (!rlx_cli_parse_size(v, &sp.memory_budget))
                return rlx_cli_fail("segment: --memory-budget wants a size like 2G or 512M, not "
                                    "'%s'",
                                    v);
        } else if (rlx_cli_parse_threads("segment", a, v, &sp.n_threads) != 0) {
            return 1;
        }
    }
    if (!model)
        return rlx_cli_fail("segment: -m MODEL is required (see rlx segment --help)");
    if (!image)
        return rlx_cli_fail("segment: -i IMAGE is required (see rlx segment --help)");
    if (rlx_isnet_is_onnx_name(model)) {
        if (n_pts || has_box || all || mask_in)
            return rlx_cli_fail("segment: %s removes the background by itself: leave --point, "
                                "--box, --mask-input and --all out (they are for Segment "
                                "Anything models)",
                                model);
        if (!out_mask && !out_cut && !json)
            return rlx_cli_fail("segment: nothing to write: give --cutout OUT.png, -o "
                                "ALPHA.png or --json");
        rlx_isnet_params ip = rlx_isnet_default_params();
        ip.device = sp.device;
        ip.n_threads = sp.n_threads;
        ip.memory_budget = sp.memory_budget;
        return remove_background(&ip, model, image, out_mask, out_cut, json, force);
    }
    if (all && (n_pts || has_box || mask_in))
        return rlx_cli_fail("segment: --all finds every object by itself: leave --point, "
                            "--box and --mask-input out");
    if (mask_in && !n_pts && !has_box)
        return rlx_cli_fail("segment: --mask-input refines a mask with points or a box: give "
                            "--point X,Y or --box X0,Y0,X1,Y1 too");
    if (all && out_cut)
        return rlx_cli_fail("segment: --all writes no cut-out: give -o LABELS.png or --json");
    if (!n_pts && !has_box && !all)
        return rlx_cli_fail("segment: say what to segment with --point X,Y or --box "
                            "X0,Y0,X1,Y1, or --all (see rlx segment --help)");
    if (!out_mask && !out_cut && !json)
        return rlx_cli_fail("segment: nothing to write: give -o MASK.png, --cutout OUT.png or "
                            "--json");

    /* before any work: nothing that exists is replaced unless asked */
    const char *outs[2] = {out_mask, out_cut};
    for (int k = 0; k < 2; k++)
        if (outs[k] && !force && access(outs[k], F_OK) == 0)
            return rlx_cli_fail("segment: %s exists; give --force to replace it", outs[k]);

    rlx_error *err = NULL;
    rlx_image *imgp = NULL;
    rlx_image_load_params lp = rlx_image_load_default_params();
    if (rlx_image_load(image, &lp, &imgp, &err) != RLX_OK) {
        int r = rlx_cli_fail("%s", rlx_error_message(err)); /* it names the file */
        rlx_error_free(err);
        return r;
    }
    const rlx_image img = *imgp;
    for (int i = 0; i < n_pts; i++)
        if (!inside(&img, pts[i].x, pts[i].y)) {
            int r = rlx_cli_fail("segment: the point %g,%g is outside the image, which is %dx%d "
                                 "pixels",
                                 (double)pts[i].x, (double)pts[i].y, img.width, img.height);
            rlx_image_free(imgp);
            return r;
        }
    if (has_box && (!inside(&img, box[0], box[1]) || !inside(&img, box[2], box[3]))) {
        int r = rlx_cli_fail("segment: the box reaches outside the image, which is %dx%d pixels",
                             img.width, img.height);
        rlx_image_free(imgp);
        return r;
    }

    int rc = 1;
    rlx_sam_file *f = NULL;
    float *chw = NULL, *low = NULL, *logits = NULL;
    uint8_t *masks = NULL;
    rlx_image_prep_params pp = rlx_image_prep_sam_params();
    rlx_image_prep_info info;
    rlx_image *prev = NULL;
    float *prompt_mask = NULL;
    size_t npix = (size_t)img.width * (size_t)img.height;
    double t0 = rlx_cli_now();
    if (rlx_sam_open(&sp, model, &f, &err) != RLX_OK) {
        rlx_cli_fail("%s: %s", model, rlx_error_message(err));
        goto out;
    }
    rlx_sam *sam = rlx_sam_file_runner(f);
    pp = rlx_sam_prep_params(sam); /* SAM 2 stretches the picture to 1024 x 1024 */
    double t1 = rlx_cli_now();
    chw = malloc(rlx_image_prep_floats(&pp) * sizeof *chw);
    low = malloc((size_t)3 * RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE * sizeof *low);
    logits = malloc(npix * sizeof *logits);
    masks = malloc(3 * npix);
    if (!chw || !low || !logits || !masks) {
        rlx_cli_fail("segment: out of memory for a %dx%d image", img.width, img.height);
        goto out;
    }
    if (rlx_image_preprocess(&img, &pp, chw, &info, &err) != RLX_OK ||
        rlx_sam_encode(sam, chw, &err) != RLX_OK) {
        rlx_cli_fail("segment: %s", rlx_error_message(err));
        goto out;
    }
    double t2 = rlx_cli_now();
    if (all) {
        rc =
            segment_all(sam, &pp, &info, &ap, &img, image, out_mask, force, json, t1 - t0, t2 - t1);
        goto out;
    }
    /* the image's pixels to the 1024 frame, as SamPredictor.transform does */
    float sx = (float)info.resized_width / (float)img.width;
    float sy = (float)info.resized_height / (float)img.height;
    rlx_sam_point scaled[MAX_POINTS];
    for (int i = 0; i < n_pts; i++)
        scaled[i] = (rlx_sam_point){pts[i].x * sx, pts[i].y * sy, pts[i].label};
    rlx_sam_prompt pr = {.points = scaled, .n_points = n_pts, .has_box = has_box};
    if (has_box) {
        pr.box[0] = box[0] * sx, pr.box[1] = box[1] * sy;
        pr.box[2] = box[2] * sx, pr.box[3] = box[3] * sy;
    }
    if (mask_in) {
        /* the earlier mask: any channel tells inside (white) from outside */
        if (rlx_image_load(mask_in, &lp, &prev, &err) != RLX_OK) {
            rlx_cli_fail("%s", rlx_error_message(err));
            goto out;
        }
        uint8_t *bin = malloc((size_t)prev->width * (size_t)prev->height);
        prompt_mask = malloc(sizeof(float) * RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE);
        if (!bin || !prompt_mask) {
            free(bin);
            rlx_cli_fail("segment: out of memory for the mask input");
            goto out;
        }
        for (size_t p = 0; p < (size_t)prev->width * (size_t)prev->height; p++)
            bin[p] =
                prev->rgb[3 * p] > 127 || prev->rgb[3 * p + 1] > 127 || prev->rgb[3 * p + 2] > 127;
        rlx_status ms =
            rlx_sam_mask_prompt_from_mask(bin, prev->width, prev->height, &info, prompt_mask, &err);
        free(bin);
        if (ms != RLX_OK) {
            rlx_cli_fail("segment: %s: %s", mask_in, rlx_error_message(err));
            goto out;
        }
        pr.mask_input = prompt_mask;
    }
    /* a mask prompt is a refinement: one mask, as SamPredictor is used then */
    bool multimask = n_pts == 1 && !has_box && !mask_in;
    float iou[3];
    int n = 0;
    if (rlx_sam_decode(sam, &pr, multimask, low, iou, &n, &err) != RLX_OK) {
        rlx_cli_fail("segment: %s", rlx_error_message(err));
        goto out;
    }
    double t3 = rlx_cli_now();
    rlx_sam_proposal props[3];
    int best = 0;
    for (int k = 0; k < n; k++) {
        if (rlx_sam_proposal_make(low + (size_t)k * RLX_SAM_MASK_SIDE * RLX_SAM_MASK_SIDE, iou[k],
                                  &pp, &info, logits, masks + (size_t)k * npix, &props[k],
                                  &err) != RLX_OK) {
            rlx_cli_fail("segment: %s", rlx_error_message(err));
            goto out;
        }
        if (props[k].iou > props[best].iou)
            best = k;
    }
    const uint8_t *mask = masks + (size_t)best * npix;
    if (out_mask &&
        rlx_image_write_mask_png(out_mask, mask, img.width, img.height, force, &err) != RLX_OK) {
        rlx_cli_fail("%s", rlx_error_message(err));
        goto out;
    }
    if (out_cut && rlx_image_write_cutout_png(out_cut, &img, mask, force, &err) != RLX_OK) {
        rlx_cli_fail("%s", rlx_error_message(err));
        goto out;
    }
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "image", json_object_new_string(image));
        json_object_object_add(o, "width", json_object_new_int(img.width));
        json_object_object_add(o, "height", json_object_new_int(img.height));
        json_object_object_add(o, "chosen", json_object_new_int(best));
        json_object *arr = json_object_new_array();
        for (int k = 0; k < n; k++) {
            json_object *p = json_object_new_object();
            json_object_object_add(p, "iou", json_object_new_double(props[k].iou));
            json_object_object_add(p, "stability", json_object_new_double(props[k].stability));
            json_object_object_add(p, "area", json_object_new_int64(props[k].area));
            json_object *b = json_object_new_array();
            for (int j = 0; j < 4; j++)
                json_object_array_add(b, json_object_new_int(props[k].box[j]));
            json_object_object_add(p, "box", b);
            json_object_array_add(arr, p);
        }
        json_object_object_add(o, "proposals", arr);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    }
    fprintf(stderr,
            "segment: %dx%d image; model %.0f ms, encoder %.0f ms, prompt + decoder %.1f ms; "
            "proposal %d of %d: predicted IoU %.3f, stability %.3f, %lld pixels\n",
            img.width, img.height, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, best + 1, n,
            (double)props[best].iou, (double)props[best].stability, (long long)props[best].area);
    rc = 0;
out:
    rlx_error_free(err);
    free(chw);
    free(low);
    free(logits);
    free(masks);
    free(prompt_mask);
    rlx_image_free(prev);
    rlx_sam_file_close(f);
    rlx_image_free(imgp);
    return rc;
}
