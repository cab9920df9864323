/* The FLUX.2 transformer (models/diffusion/flux2-dit.h) against
 * tests/reference/flux2_dit_reference.py on the random-weight model of
 * tests/flux2-writer.h: klein 4B's widths (hidden 3072, 24 heads x 128,
 * joint_dim 7680, MLP 9216), one double- and one single-stream block, 4 x 4
 * image tokens, 8 text tokens, sigma 0.75, with and without a 2 x 3
 * reference image.
 *
 * Tolerances, as the largest |difference| over the largest |reference
 * value| (3.7 here). The reference computes in float64 on the same weight
 * values (the BF16 ones: tests/flux2-writer.h stores them in every dtype,
 * the F16 file exactly too), and our backends widen F16/BF16 weights to
 * float32 exactly; the timestep / guidance sinusoid is taken in double on
 * both sides (1000 * 3.5 rad in float32 would be 2e-4 off). Only float32
 * arithmetic differs: summation order (GEMM blocking, attention, norms).
 *   - BF16 and F16 weights on the CPU, with or without the guidance
 *     embedder: TOL = 1e-5; we see 4e-7 to 6e-7.
 *   - The Q8_0 GGUF copy rounds every weight to 8 bits a block (up to 1/254
 *     of the block's largest value): RMS(difference) / RMS(reference) under
 *     5%; we see 1.1%, a fifth of what separates the plain and the
 *     reference-image outputs.
 *   - A LoRA (rank 4, strength 0.8, on eight modules of both block kinds,
 *     the final modulation and the image embedder) in diffusers/PEFT names
 *     and in kohya's BFL names with an alpha, each on the diffusers and the
 *     BFL model: TOL against the reference's merged weights (W + 0.8 B A in
 *     float64); we see 4e-7. The LoRA moves the output by 0.47 of its
 *     largest value, so the test would see a module left out.
 *   - FP8 matrices with a per-tensor scale (BFL's and ComfyUI's names):
 *     see cpu_fp8.
 *   - Other devices (the devices variant) may keep activations in F16 in
 *     places (2^-11 relative a step, compounding over the blocks): 2e-3;
 *     lavapipe gives 7.8e-7 (about 3 minutes for the velocity). The FP8
 *     file there is held to the CPU's velocity of it, with the same bound.
 *
 * argv[1]: "cpu" (the CPU tests) or "devices" (the other devices: exits 77,
 * skipped, where there is none); none runs all.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "flux2-writer.h"
#include "models/diffusion/flux2-dit.h"
#include "test-util.h"

#define LH     4
#define LW     4
#define N_TEXT 8
#define REF_H  2
#define REF_W  3
#define SIGMA  0.75f
#define N_OUT  (128 * LH * LW)

/* largest |difference| / largest |reference value| (see the top) */
#define TOL         1e-5
#define TOL_DEVICES 2e-3

typedef struct {
    char path[600]; /* the diffusers BF16 file */
    float *lat, *text, *ref;
    float *want_plain, *want_edit, *want_guidance, *want_lora;
    char lora_peft[600], lora_kohya[600]; /* the LoRA in two files' names */
    char dev[4][32];
    int n_dev;
} fixture;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static float *read_fixture(const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", RLX_TEST_SOURCE_DIR, name);
    size_t size = 0;
    float *p = rlx_test_read_file(path, &size);
    if (!p || size != sizeof(float) * N_OUT) {
        fprintf(stderr, "fixture %s: %zu bytes, expected %zu\n", path, size, sizeof(float) * N_OUT);
        free(p);
        return NULL;
    }
    return p;
}

/* ---- the LoRA (tests/reference/flux2_dit_reference.py, LORA_MODULES) ---- */

#define LORA_R 4
#define C_     3072
#define M_     9216

typedef struct {
    const char *mod; /* the reference's (diffusers-style) name */
    const char *bfl; /* the BFL module, dots as kohya's underscores */
    int64_t in, out;
} lora_mod;

static const lora_mod lora_mods[] = {
    {"transformer_blocks.0.attn.qkv", "double_blocks_0_img_attn_qkv", C_, 3 * C_},
    {"transformer_blocks.0.attn.add_k_proj", "double_blocks_0_txt_attn_qkv", C_, C_},
    {"transformer_blocks.0.attn.to_add_out", "double_blocks_0_txt_attn_proj", C_, C_},
    {"transformer_blocks.0.ff.linear_in", "double_blocks_0_img_mlp_0", C_, 2 * M_},
    {"single_transformer_blocks.0.attn.to_qkv_mlp_proj", "single_blocks_0_linear1", C_,
     3 * C_ + 2 * M_},
    {"single_transformer_blocks.0.attn.to_out", "single_blocks_0_linear2", C_ + M_, C_},
    {"norm_out.linear", "final_layer_adaLN_modulation_1", C_, 2 * C_},
    {"x_embedder", "img_in", 128, C_},
};
#define N_LORA_MODS ((int)(sizeof lora_mods / sizeof lora_mods[0]))

/* u(kind + "." + mod) * mul over n floats, the reference's float32 values */
static float *lora_values(const char *kind, const char *mod, int64_t n, double mul)
{
    char nm[160];
    snprintf(nm, sizeof nm, "%s.%s", kind, mod);
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_non_null(v);
    rlx_flux2_writer_fill(nm, n, v);
    for (int64_t i = 0; i < n; i++)
        v[i] *= (float)mul;
    return v;
}

/* The LoRA twice: in diffusers/PEFT names ("transformer." prefix, lora_A /
 * lora_B, the fused q/k/v as to_q, to_k, to_v sharing A, no alpha), and in
 * kohya's BFL names ("lora_unet_", lora_down / lora_up, alpha 2 of rank 4
 * with B doubled; the text stream's k as rows of the fused txt_attn.qkv,
 * the final modulation's halves swapped into BFL's [shift; scale]). */
static int write_loras(fixture *f)
{
    rlx_test_st_tensor peft[3 * 2 * N_LORA_MODS], kohya[3 * N_LORA_MODS];
    char names[3 * 2 * N_LORA_MODS + 3 * N_LORA_MODS][160];
    float *owned[4 * N_LORA_MODS];
    static const float alpha = 2.0f;
    int np = 0, nk = 0, nn = 0, no = 0;
    for (int i = 0; i < N_LORA_MODS; i++) {
        const lora_mod *m = &lora_mods[i];
        float *a = lora_values("lora_A", m->mod, LORA_R * m->in, sqrt(3.0 / (double)m->in));
        float *b = lora_values("lora_B", m->mod, m->out * LORA_R, 0.5 * sqrt(3.0 / LORA_R));
        owned[no++] = a;
        owned[no++] = b;
        /* diffusers / PEFT */
        bool qkv = strstr(m->mod, "attn.qkv") != NULL;
        for (int j = 0; j < (qkv ? 3 : 1); j++) {
            char mod[160];
            if (qkv)
                snprintf(mod, sizeof mod, "transformer_blocks.0.attn.%s",
                         j == 0   ? "to_q"
                         : j == 1 ? "to_k"
                                  : "to_v");
            else
                snprintf(mod, sizeof mod, "%s", m->mod);
            int64_t rows = qkv ? C_ : m->out;
            snprintf(names[nn], sizeof names[0], "transformer.%s.lora_A.weight", mod);
            peft[np++] = (rlx_test_st_tensor){names[nn++], 2, {LORA_R, m->in}, a};
            snprintf(names[nn], sizeof names[0], "transformer.%s.lora_B.weight", mod);
            peft[np++] =
                (rlx_test_st_tensor){names[nn++], 2, {rows, LORA_R}, b + (size_t)j * C_ * LORA_R};
        }
        /* kohya, BFL names: B doubled against alpha / rank = 1/2 */
        int64_t out = !strcmp(m->mod, "transformer_blocks.0.attn.add_k_proj") ? 3 * C_ : m->out;
        float *b2 = calloc((size_t)(out * LORA_R), sizeof(float));
        assert_non_null(b2);
        owned[no++] = b2;
        for (int64_t r = 0; r < m->out; r++) {
            int64_t to = r;
            if (out != m->out)
                to = C_ + r; /* k: the middle third */
            else if (!strcmp(m->mod, "norm_out.linear"))
                to = r < C_ ? r + C_ : r - C_; /* [scale; shift] -> [shift; scale] */
            for (int c = 0; c < LORA_R; c++)
                b2[to * LORA_R + c] = 2.0f * b[r * LORA_R + c];
        }
        snprintf(names[nn], sizeof names[0], "lora_unet_%s.lora_down.weight", m->bfl);
        kohya[nk++] = (rlx_test_st_tensor){names[nn++], 2, {LORA_R, m->in}, a};
        snprintf(names[nn], sizeof names[0], "lora_unet_%s.lora_up.weight", m->bfl);
        kohya[nk++] = (rlx_test_st_tensor){names[nn++], 2, {out, LORA_R}, b2};
        snprintf(names[nn], sizeof names[0], "lora_unet_%s.alpha", m->bfl);
        kohya[nk++] = (rlx_test_st_tensor){names[nn++], 0, {0}, &alpha};
    }
    snprintf(f->lora_peft, sizeof f->lora_peft, "%s", rlx_test_tmp("lora-peft.safetensors"));
    snprintf(f->lora_kohya, sizeof f->lora_kohya, "%s", rlx_test_tmp("lora-kohya.safetensors"));
    int rc = rlx_test_write_safetensors(f->lora_peft, peft, np) ||
             rlx_test_write_safetensors(f->lora_kohya, kohya, nk);
    for (int i = 0; i < no; i++)
        free(owned[i]);
    return rc;
}

static rlx_status open_with_lora(const char *path, const char *lora, float scale, rlx_flux2_dit **d,
                                 rlx_error **err)
{
    rlx_flux2_dit_params p = rlx_flux2_dit_default_params();
    rlx_flux2_dit_lora l = {lora, scale};
    p.loras = &l;
    p.n_loras = 1;
    return rlx_flux2_dit_open(path, &p, d, err);
}

/* Write a test model; a failure (a full disk, say) is printed in words. */
static void write_model(const char *path, const rlx_flux2_writer_opts *o)
{
    rlx_error *err = NULL;
    if (rlx_flux2_writer_write(path, o, &err) != RLX_OK) {
        fprintf(stderr, "writing the test model: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        fail();
    }
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    *state = f;
    f->lat = malloc(sizeof(float) * N_OUT);
    f->text = malloc(sizeof(float) * N_TEXT * RLX_F2W_JOINT);
    f->ref = malloc(sizeof(float) * 128 * REF_H * REF_W);
    f->want_plain = read_fixture("flux2-dit-ref-plain.f32");
    f->want_edit = read_fixture("flux2-dit-ref-edit.f32");
    f->want_guidance = read_fixture("flux2-dit-ref-guidance.f32");
    f->want_lora = read_fixture("flux2-dit-ref-lora.f32");
    if (!f->lat || !f->text || !f->ref || !f->want_plain || !f->want_edit || !f->want_guidance ||
        !f->want_lora)
        return -1;
    rlx_flux2_writer_fill("latents", N_OUT, f->lat);
    rlx_flux2_writer_fill("text", (int64_t)N_TEXT * RLX_F2W_JOINT, f->text);
    rlx_flux2_writer_fill("ref0", 128 * REF_H * REF_W, f->ref);
    snprintf(f->path, sizeof f->path, "%s", rlx_test_tmp("flux2-diffusers.safetensors"));
    rlx_error *err = NULL;
    rlx_flux2_writer_opts o = {.format = RLX_F2W_DIFFUSERS};
    if (rlx_flux2_writer_write(f->path, &o, &err) != RLX_OK) {
        fprintf(stderr, "writing the test model: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return -1;
    }
    if (write_loras(f) != 0) {
        fprintf(stderr, "writing the test LoRA files failed\n");
        return -1;
    }
    for (int b = 0; b < rlx_backend_count() && f->n_dev < 4; b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if (be && be->device_count && be->device_count() >= 1)
            snprintf(f->dev[f->n_dev++], sizeof f->dev[0], "%s", be->name);
    }
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f) {
        remove(f->path);
        free(f->lat);
        free(f->text);
        free(f->ref);
        free(f->want_plain);
        free(f->want_edit);
        free(f->want_guidance);
        free(f->want_lora);
        remove(f->lora_peft);
        remove(f->lora_kohya);
        free(f);
    }
    return 0;
}

static rlx_flux2_dit *open_dit(const char *path, const char *dev)
{
    rlx_flux2_dit_params p = rlx_flux2_dit_default_params();
    p.device = dev;
    rlx_flux2_dit *d = NULL;
    rlx_error *err = NULL;
    rlx_status st = rlx_flux2_dit_open(path, &p, &d, &err);
    if (st != RLX_OK)
        fprintf(stderr, "open %s on %s: %s\n", path, dev, rlx_error_message(err));
    assert_int_equal(st, RLX_OK);
    assert_non_null(d);
    return d;
}

static void velocity(fixture *f, rlx_flux2_dit *d, bool edit, float *out)
{
    const float *refs[1] = {f->ref};
    int rh[1] = {REF_H}, rw[1] = {REF_W};
    rlx_flux2_dit_input in = {.latents = f->lat,
                              .lh = LH,
                              .lw = LW,
                              .text = f->text,
                              .n_text = N_TEXT,
                              .t = SIGMA,
                              .n_refs = edit ? 1 : 0,
                              .ref_latents = refs,
                              .ref_lh = rh,
                              .ref_lw = rw};
    rlx_error *err = NULL;
    double t0 = now_ms();
    rlx_status st = rlx_flux2_dit_velocity(d, &in, out, &err);
    if (st != RLX_OK)
        fprintf(stderr, "velocity: %s\n", rlx_error_message(err));
    assert_int_equal(st, RLX_OK);
    printf("[ flux2-dit ] velocity (%s): %.0f ms\n", edit ? "edit" : "plain", now_ms() - t0);
}

/* max |got - want| / max |want| */
static double max_rel(const float *got, const float *want)
{
    double md = 0, mw = 0;
    for (int i = 0; i < N_OUT; i++) {
        md = fmax(md, fabs((double)got[i] - want[i]));
        mw = fmax(mw, fabs((double)want[i]));
    }
    return md / mw;
}

/* RMS(got - want) / RMS(want) */
static double rms_rel(const float *got, const float *want)
{
    double sd = 0, sw = 0;
    for (int i = 0; i < N_OUT; i++) {
        sd += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        sw += (double)want[i] * want[i];
    }
    return sqrt(sd / sw);
}

static void check_both(fixture *f, rlx_flux2_dit *d, const char *what, double tol)
{
    float *v = malloc(sizeof(float) * N_OUT);
    assert_non_null(v);
    velocity(f, d, false, v);
    double e1 = max_rel(v, f->want_plain);
    velocity(f, d, true, v);
    double e2 = max_rel(v, f->want_edit);
    printf("[ flux2-dit ] %s: max error %.2e (plain), %.2e (edit) of the largest value\n", what, e1,
           e2);
    free(v);
    assert_true(e1 < tol);
    assert_true(e2 < tol);
}

static void cpu_reference(void **state)
{
    fixture *f = *state;
    rlx_flux2_dit *d = open_dit(f->path, "cpu");
    const rlx_flux2_dit_config *c = rlx_flux2_dit_get_config(d);
    assert_string_equal(c->name, "custom");
    assert_int_equal(c->hidden, 3072);
    assert_int_equal(c->heads, 24);
    assert_int_equal(c->head_dim, 128);
    assert_int_equal(c->joint_dim, 7680);
    assert_int_equal(c->mlp_hidden, 9216);
    assert_int_equal(c->n_double, 1);
    assert_int_equal(c->n_single, 1);
    assert_false(c->guidance_embeds);
    assert_int_equal(c->distilled, -1);
    assert_int_equal(c->names, RLX_FLUX2_NAMES_DIFFUSERS);
    assert_int_equal(c->weight_dtype, RLX_DTYPE_BF16);
    check_both(f, d, "diffusers BF16 on cpu", TOL);
    rlx_flux2_dit_free(d);
}

/* The BFL names (fused qkv, [shift; scale]) under a ComfyUI-style prefix, F16. */
static void cpu_bfl_names(void **state)
{
    fixture *f = *state;
    const char *path = rlx_test_tmp("flux2-bfl.safetensors");
    rlx_flux2_writer_opts o = {
        .format = RLX_F2W_BFL, .dtype = RLX_DTYPE_F16, .prefix = "model.diffusion_model."};
    write_model(path, &o);
    rlx_flux2_dit *d = open_dit(path, "cpu");
    assert_int_equal(rlx_flux2_dit_get_config(d)->names, RLX_FLUX2_NAMES_BFL);
    assert_int_equal(rlx_flux2_dit_get_config(d)->weight_dtype, RLX_DTYPE_F16);
    check_both(f, d, "BFL F16 on cpu", TOL);
    rlx_flux2_dit_free(d);
    remove(path);
}

/* A model with the guidance embedder (FLUX.2 dev's layout), BFL names:
 * guidance 3.5 enters the conditioning as 1000 * 3.5, beside the timestep. */
static void cpu_guidance(void **state)
{
    fixture *f = *state;
    const char *path = rlx_test_tmp("flux2-guidance.safetensors");
    rlx_flux2_writer_opts o = {.format = RLX_F2W_BFL, .guidance = true};
    rlx_error *err = NULL;
    write_model(path, &o);
    rlx_flux2_dit *d = open_dit(path, "cpu");
    assert_true(rlx_flux2_dit_get_config(d)->guidance_embeds);
    float *v = malloc(sizeof(float) * N_OUT);
    assert_non_null(v);
    rlx_flux2_dit_input in = {.latents = f->lat,
                              .lh = LH,
                              .lw = LW,
                              .text = f->text,
                              .n_text = N_TEXT,
                              .t = SIGMA,
                              .guidance = 3.5f};
    assert_int_equal(rlx_flux2_dit_velocity(d, &in, v, &err), RLX_OK);
    double e = max_rel(v, f->want_guidance);
    printf("[ flux2-dit ] guidance embedder on cpu: max error %.2e of the largest value\n", e);
    assert_true(e < TOL);
    free(v);
    rlx_flux2_dit_free(d);
    remove(path);
}

/* A diffusers root folder: model_index.json, transformer/ with config.json
 * and two shards behind the index. */
static void cpu_diffusers_folder(void **state)
{
    fixture *f = *state;
    const char *root = rlx_test_tmp("flux2-folder");
    rlx_flux2_writer_opts o = {.format = RLX_F2W_DIFFUSERS_FOLDER};
    rlx_error *err = NULL;
    write_model(root, &o);
    rlx_flux2_dit *d = open_dit(root, "cpu");
    assert_int_equal(rlx_flux2_dit_get_config(d)->distilled, 1);
    float *v = malloc(sizeof(float) * N_OUT);
    assert_non_null(v);
    velocity(f, d, false, v);
    assert_true(max_rel(v, f->want_plain) < TOL);
    free(v);
    rlx_flux2_dit_free(d);

    /* a config.json of another model */
    char p[700];
    snprintf(p, sizeof p, "%s/transformer/config.json", root);
    FILE *cf = fopen(p, "w");
    assert_non_null(cf);
    fputs("{\"num_layers\": 5, \"num_single_layers\": 20, \"num_attention_heads\": 24}", cf);
    fclose(cf);
    d = NULL;
    rlx_flux2_dit_params prm = rlx_flux2_dit_default_params();
    assert_int_equal(rlx_flux2_dit_open(root, &prm, &d, &err), RLX_ERR_FORMAT);
    printf("[ flux2-dit ] %s\n", rlx_error_message(err));
    assert_non_null(strstr(rlx_error_message(err), "different models"));
    assert_null(d);
    rlx_error_free(err);
    err = NULL;

    static const char *const files[] = {
        "transformer/diffusion_pytorch_model-00001-of-00002.safetensors",
        "transformer/diffusion_pytorch_model-00002-of-00002.safetensors",
        "transformer/diffusion_pytorch_model.safetensors.index.json",
        "transformer/config.json",
        "model_index.json",
        "transformer",
        ""};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", root, files[i]);
        remove(p);
    }
}

/* The same weights as a Q8_0 GGUF with BFL names. */
static void cpu_gguf_q8_0(void **state)
{
    fixture *f = *state;
    const char *path = rlx_test_tmp("flux2-q8_0.gguf");
    rlx_flux2_writer_opts o = {.format = RLX_F2W_GGUF, .dtype = RLX_DTYPE_Q8_0};
    write_model(path, &o);
    rlx_flux2_dit *d = open_dit(path, "cpu");
    assert_int_equal(rlx_flux2_dit_get_config(d)->weight_dtype, RLX_DTYPE_Q8_0);
    float *v = malloc(sizeof(float) * N_OUT);
    assert_non_null(v);
    velocity(f, d, false, v);
    double e = rms_rel(v, f->want_plain);
    /* an unrelated output for scale: the edit case differs only by the reference tokens */
    double far = rms_rel(f->want_edit, f->want_plain);
    printf("[ flux2-dit ] Q8_0 GGUF on cpu: RMS error %.2e (the edit case is %.2e away)\n", e, far);
    assert_true(e < 0.05);
    free(v);
    rlx_flux2_dit_free(d);
    remove(path);
}

static void expect_open_failure(const char *path, rlx_status want, const char *words)
{
    rlx_flux2_dit *d = (rlx_flux2_dit *)1;
    rlx_error *err = NULL;
    rlx_flux2_dit_params p = rlx_flux2_dit_default_params();
    rlx_status st = rlx_flux2_dit_open(path, &p, &d, &err);
    printf("[ flux2-dit ] %s\n", err ? rlx_error_message(err) : "(no message)");
    assert_int_equal(st, want);
    assert_null(d);
    assert_non_null(err);
    assert_non_null(strstr(rlx_error_message(err), words));
    rlx_error_free(err);
}

/* Replace the first `from` in the file at path by `to` (the same length),
 * reading the file a chunk at a time (the model files are large). */
static void patch_file(const char *path, const char *from, const char *to)
{
    size_t n = strlen(from), chunk = 1 << 20;
    assert_int_equal(n, strlen(to));
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    char *buf = malloc(chunk + n);
    assert_non_null(buf);
    long base = 0, hit = -1;
    size_t got;
    while (hit < 0 && (got = fread(buf, 1, chunk + n, fp)) >= n) {
        for (size_t i = 0; i + n <= got && hit < 0; i++)
            if (!memcmp(buf + i, from, n))
                hit = base + (long)i;
        if (got < chunk + n)
            break;
        base += (long)chunk; /* the next read overlaps this one by n bytes */
        assert_int_equal(fseek(fp, base, SEEK_SET), 0);
    }
    assert_true(hit >= 0);
    assert_int_equal(fseek(fp, hit, SEEK_SET), 0);
    assert_int_equal(fwrite(to, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
    free(buf);
}

/* The blocks' matrices in FP8 with a per-tensor scale, as BFL's and
 * ComfyUI's FP8 checkpoints hold them (E4M3 with "_scale", "input_scale"
 * and "comfy_quant"; E5M2 with ComfyUI's older "scale_weight"):
 *   - against a file of the same matrices in F32 holding exactly the FP8
 *     values times the scale (decoded by the writer from the OCP formats):
 *     TOL, as for the other float files (the FP8 codes are exact in f32,
 *     the scale is one rounding of the product);
 *   - against the reference's BF16 weights: the error of FP8's rounding.
 *     A weight moves by up to 2^-4 of itself in E4M3 (3 mantissa bits),
 *     2^-3 in E5M2 (2 bits), more near the subnormals; we see 1.5% (E4M3)
 *     and 2.9% (E5M2) RMS in the velocity. Bounds 6% and 12%, the largest
 *     rounding of a weight: a scale left out or a wrong decode is far past
 *     them (the exact comparison above is the sharp check).
 * Then a ComfyUI format we do not read (nvfp4) is refused with a sentence. */
static void cpu_fp8(void **state)
{
    fixture *f = *state;
    static const rlx_dtype f8[2] = {RLX_DTYPE_F8_E4M3, RLX_DTYPE_F8_E5M2};
    static const double bound[2] = {0.06, 0.12};
    float *v = malloc(sizeof(float) * N_OUT), *w = malloc(sizeof(float) * N_OUT);
    assert_non_null(v);
    assert_non_null(w);
    char path[600], deq[600]; /* rlx_test_tmp's buffer is reused */
    snprintf(path, sizeof path, "%s", rlx_test_tmp("flux2-fp8.safetensors"));
    snprintf(deq, sizeof deq, "%s", rlx_test_tmp("flux2-fp8-f32.safetensors"));
    for (int q = 0; q < 2; q++) {
        rlx_flux2_writer_opts o = {.format = RLX_F2W_BFL, .dtype = f8[q]};
        write_model(path, &o);
        rlx_flux2_dit *d = open_dit(path, "cpu");
        assert_int_equal(rlx_flux2_dit_get_config(d)->weight_dtype, f8[q]);
        velocity(f, d, false, v);
        rlx_flux2_dit_free(d);
        o.fp8_dequantized = true;
        write_model(deq, &o);
        d = open_dit(deq, "cpu");
        velocity(f, d, false, w);
        rlx_flux2_dit_free(d);
        remove(deq);
        double e = max_rel(v, w), r = rms_rel(v, f->want_plain);
        printf("[ flux2-dit ] %s on cpu: max error %.2e against its F32 values, RMS %.2e from "
               "the BF16 reference\n",
               rlx_dtype_name(f8[q]), e, r);
        assert_true(e < TOL);
        assert_true(r < bound[q]);
        if (q == 0) {
            /* a format ComfyUI writes that we do not read */
            patch_file(path, "\"float8_e4m3fn\"}", "\"nvfp4\"}        ");
            expect_open_failure(path, RLX_ERR_UNSUPPORTED, "'nvfp4' format");
        }
        remove(path);
    }
    free(v);
    free(w);
}

static void cpu_bad_files(void **state)
{
    (void)state;
    const char *path = rlx_test_tmp("flux2-bad.safetensors");
    /* only opened: the data stays a sparse run of zeros */
    rlx_flux2_writer_opts o = {.format = RLX_F2W_DIFFUSERS,
                               .skip = "transformer_blocks.0.attn.to_k.weight",
                               .no_data = true};
    write_model(path, &o);
    expect_open_failure(path, RLX_ERR_FORMAT, "transformer_blocks.0.attn.to_k.weight' is missing");
    /* FLUX.1's packing (64 input channels): not a variant we know */
    o = (rlx_flux2_writer_opts){.format = RLX_F2W_BFL, .in_channels = 64, .no_data = true};
    write_model(path, &o);
    expect_open_failure(path, RLX_ERR_FORMAT, "unknown FLUX.2 variant");
    remove(path);
    expect_open_failure(path, RLX_ERR_IO, "no such file");
    /* something else entirely */
    const char *junk = rlx_test_tmp("flux2-junk.safetensors");
    static const char hdr[] = "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2],"
                              "\"data_offsets\":[0,8]}}";
    uint8_t buf[8 + sizeof hdr - 1 + 8];
    uint64_t hl = sizeof hdr - 1;
    memcpy(buf, &hl, 8);
    memcpy(buf + 8, hdr, hl);
    memset(buf + 8 + hl, 0, 8);
    assert_int_equal(rlx_test_write_file(junk, buf, sizeof buf), 0);
    expect_open_failure(junk, RLX_ERR_FORMAT, "not a FLUX.2 transformer");
    remove(junk);
}

static void cpu_bad_inputs(void **state)
{
    fixture *f = *state;
    rlx_flux2_dit *d = open_dit(f->path, "cpu");
    float *v = malloc(sizeof(float) * N_OUT);
    assert_non_null(v);
    rlx_flux2_dit_input good = {
        .latents = f->lat, .lh = LH, .lw = LW, .text = f->text, .n_text = N_TEXT, .t = SIGMA};
    rlx_flux2_dit_input bad[4] = {good, good, good, good};
    bad[0].text = NULL;
    bad[1].lh = 0;
    bad[2].t = 2.0f;
    bad[3].n_refs = 1; /* without the arrays */
    for (int i = 0; i < 4; i++) {
        rlx_error *err = NULL;
        assert_int_equal(rlx_flux2_dit_velocity(d, &bad[i], v, &err), RLX_ERR_INVALID_ARG);
        printf("[ flux2-dit ] %s\n", rlx_error_message(err));
        rlx_error_free(err);
    }
    /* cancelled, then usable again */
    rlx_error *err = NULL;
    rlx_flux2_dit_cancel(d, true);
    assert_int_equal(rlx_flux2_dit_velocity(d, &good, v, &err), RLX_ERR_CANCELLED);
    rlx_error_free(err);
    err = NULL;
    rlx_flux2_dit_cancel(d, false);
    assert_int_equal(rlx_flux2_dit_velocity(d, &good, v, &err), RLX_OK);
    assert_true(max_rel(v, f->want_plain) < TOL);
    free(v);
    rlx_flux2_dit_free(d);
}

/* Last of all (after the devices): the shared file cut in half. */
static void cpu_truncated(void **state)
{
    fixture *f = *state;
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(truncate(f->path, sb.st_size / 2), 0);
    rlx_flux2_dit *d = (rlx_flux2_dit *)1;
    rlx_error *err = NULL;
    rlx_flux2_dit_params p = rlx_flux2_dit_default_params();
    rlx_status st = rlx_flux2_dit_open(f->path, &p, &d, &err);
    printf("[ flux2-dit ] truncated: %s\n", err ? rlx_error_message(err) : "(no message)");
    assert_int_not_equal(st, RLX_OK);
    assert_null(d);
    assert_non_null(err);
    rlx_error_free(err);
}

/* The LoRA in both files' names on a diffusers- and a BFL-named model: all
 * four give the reference's merged-weight velocity (TOL). */
static void cpu_lora(void **state)
{
    fixture *f = *state;
    const char *bfl = rlx_test_tmp("flux2-bfl-lora.safetensors");
    rlx_flux2_writer_opts o = {.format = RLX_F2W_BFL, .dtype = RLX_DTYPE_F16};
    write_model(bfl, &o);
    float *v = malloc(sizeof(float) * N_OUT);
    assert_non_null(v);
    const char *models[2] = {f->path, bfl}, *mname[2] = {"diffusers BF16", "BFL F16"};
    const char *loras[2] = {f->lora_peft, f->lora_kohya}, *lname[2] = {"PEFT", "kohya"};
    for (int m = 0; m < 2; m++) {
        for (int l = 0; l < 2; l++) {
            rlx_flux2_dit *d = NULL;
            rlx_error *err = NULL;
            rlx_status st = open_with_lora(models[m], loras[l], 0.8f, &d, &err);
            if (st != RLX_OK)
                fprintf(stderr, "open with the LoRA: %s\n", rlx_error_message(err));
            assert_int_equal(st, RLX_OK);
            velocity(f, d, false, v);
            double e = max_rel(v, f->want_lora), away = max_rel(v, f->want_plain);
            printf("[ flux2-dit ] %s LoRA on the %s model: max error %.2e of the largest value "
                   "(%.2f from the model without it)\n",
                   lname[l], mname[m], e, away);
            assert_true(e < TOL);
            assert_true(away > 0.1);
            rlx_flux2_dit_free(d);
        }
    }
    free(v);
    remove(bfl);
}

/* LoRA files that cannot be applied: each refused with a sentence. */
static void cpu_lora_refused(void **state)
{
    fixture *f = *state;
    static float a[LORA_R * 64], b[64 * LORA_R], one = 1.0f;
    static const struct {
        const char *what, *a, *b;
        int64_t in, out;
        rlx_status want;
        const char *says;
    } cases[] = {
        {"a block this model lacks", "transformer.transformer_blocks.5.attn.to_q.lora_A.weight",
         "transformer.transformer_blocks.5.attn.to_q.lora_B.weight", C_, C_, RLX_ERR_UNSUPPORTED,
         "matches no weight"},
        {"another width", "transformer.x_embedder.lora_A.weight",
         "transformer.x_embedder.lora_B.weight", 64, 64, RLX_ERR_UNSUPPORTED, "is not for this"},
        {"the text encoder", "lora_te1_text_model_encoder_layers_0_mlp_fc1.lora_down.weight",
         "lora_te1_text_model_encoder_layers_0_mlp_fc1.lora_up.weight", 64, 64, RLX_ERR_UNSUPPORTED,
         "text encoder"},
        {"DoRA", "transformer.x_embedder.lora_A.weight", "transformer.x_embedder.dora_scale", 64,
         64, RLX_ERR_UNSUPPORTED, "DoRA"},
        {"no up matrix", "transformer.proj_out.lora_A.weight", "transformer.proj_out.alpha", 64, 1,
         RLX_ERR_FORMAT, "without its up"},
    };
    const char *path = rlx_test_tmp("lora-bad.safetensors");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* big enough for the shapes above that are read; data is not */
        float *ba = cases[i].in > 64 ? calloc((size_t)(LORA_R * cases[i].in), 4) : a;
        float *bb = cases[i].out > 64 ? calloc((size_t)(LORA_R * cases[i].out), 4) : b;
        assert_non_null(ba);
        assert_non_null(bb);
        bool scalar = cases[i].out == 1;
        rlx_test_st_tensor t[2] = {
            {cases[i].a, 2, {LORA_R, cases[i].in}, ba},
            scalar ? (rlx_test_st_tensor){cases[i].b, 0, {0}, &one}
                   : (rlx_test_st_tensor){cases[i].b, 2, {cases[i].out, LORA_R}, bb},
        };
        assert_int_equal(rlx_test_write_safetensors(path, t, 2), 0);
        rlx_flux2_dit *d = (rlx_flux2_dit *)1;
        rlx_error *err = NULL;
        rlx_status st = open_with_lora(f->path, path, 1.0f, &d, &err);
        printf("[ flux2-dit ] a LoRA with %s: %s\n", cases[i].what,
               err ? rlx_error_message(err) : "(no error)");
        assert_int_equal(st, cases[i].want);
        assert_null(d);
        assert_non_null(strstr(rlx_error_message(err), cases[i].says));
        rlx_error_free(err);
        if (ba != a)
            free(ba);
        if (bb != b)
            free(bb);
    }
    /* no such file; a strength out of range */
    rlx_flux2_dit *d = NULL;
    rlx_error *err = NULL;
    assert_int_equal(
        open_with_lora(f->path, rlx_test_tmp("no-such-lora.safetensors"), 1.0f, &d, &err),
        RLX_ERR_IO);
    printf("[ flux2-dit ] a missing LoRA file: %s\n", rlx_error_message(err));
    rlx_error_free(err);
    err = NULL;
    assert_int_equal(open_with_lora(f->path, f->lora_peft, 100.0f, &d, &err), RLX_ERR_INVALID_ARG);
    rlx_error_free(err);
    remove(path);
}

/* Every device but the CPU: the reference-image case (a superset of the plain
 * one's graph), once, as lavapipe takes minutes for it. */
static void devices_other_than_cpu(void **state)
{
    fixture *f = *state;
    int n = 0;
    float *v = malloc(sizeof(float) * N_OUT), *fp8_cpu = malloc(sizeof(float) * N_OUT);
    assert_non_null(v);
    assert_non_null(fp8_cpu);
    /* the E4M3 file (FP8 matrices decoded in the device's products, the
     * scale as their alpha) against the CPU's velocity of it */
    char fp8[600];
    snprintf(fp8, sizeof fp8, "%s", rlx_test_tmp("flux2-fp8-dev.safetensors"));
    rlx_flux2_writer_opts o8 = {.format = RLX_F2W_BFL, .dtype = RLX_DTYPE_F8_E4M3};
    write_model(fp8, &o8);
    rlx_flux2_dit *d8 = open_dit(fp8, "cpu");
    velocity(f, d8, false, fp8_cpu);
    rlx_flux2_dit_free(d8);
    for (int i = 0; i < f->n_dev; i++) {
        if (!strcmp(f->dev[i], "cpu"))
            continue;
        d8 = open_dit(fp8, f->dev[i]);
        velocity(f, d8, false, v);
        double e8 = max_rel(v, fp8_cpu);
        printf("[ flux2-dit ] F8_E4M3 on %s: max error %.2e of the largest value (against the "
               "CPU)\n",
               f->dev[i], e8);
        assert_true(e8 < TOL_DEVICES);
        rlx_flux2_dit_free(d8);
        rlx_flux2_dit *d = open_dit(f->path, f->dev[i]);
        velocity(f, d, true, v);
        double e = max_rel(v, f->want_edit);
        printf("[ flux2-dit ] diffusers BF16 on %s: max error %.2e of the largest value\n",
               f->dev[i], e);
        assert_true(e < TOL_DEVICES);
        rlx_flux2_dit_free(d);
        /* the LoRA's products beside the packed weights, on the device */
        rlx_error *err = NULL;
        d = NULL;
        if (open_with_lora(f->path, f->lora_kohya, 0.8f, &d, &err) != RLX_OK)
            fprintf(stderr, "open with the LoRA: %s\n", rlx_error_message(err));
        assert_non_null(d);
        velocity(f, d, false, v);
        e = max_rel(v, f->want_lora);
        printf("[ flux2-dit ] kohya LoRA on %s: max error %.2e of the largest value\n", f->dev[i],
               e);
        assert_true(e < TOL_DEVICES);
        rlx_flux2_dit_free(d);
        n++;
    }
    remove(fp8);
    free(v);
    free(fp8_cpu);
    if (!n) {
        printf("[ flux2-dit ] no device but the CPU here\n");
        skip();
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "devices")) {
        if (!rlx_test_other_devices()) {
            printf("[ flux2-dit ] no device but the CPU here: skipped\n");
            return 77;
        }
    }
    if (argc > 1)
        cmocka_set_test_filter(!strcmp(argv[1], "cpu")       ? "cpu_*"
                               : !strcmp(argv[1], "devices") ? "devices_*"
                                                             : argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_reference),
        cmocka_unit_test(cpu_bfl_names),
        cmocka_unit_test(cpu_guidance),
        cmocka_unit_test(cpu_diffusers_folder),
        cmocka_unit_test(cpu_gguf_q8_0),
        cmocka_unit_test(cpu_fp8),
        cmocka_unit_test(cpu_bad_files),
        cmocka_unit_test(cpu_bad_inputs),
        cmocka_unit_test(cpu_lora),
        cmocka_unit_test(cpu_lora_refused),
        cmocka_unit_test(devices_other_than_cpu),
        cmocka_unit_test(cpu_truncated),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
