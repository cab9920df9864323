/* LoRA files for the FLUX.2 transformer: which weight each module of the
 * file adapts, and the checks (see rlx_flux2_dit_lora in flux2-dit.h).
 *
 * A tensor's name is cut into three parts: a prefix of the tool that wrote
 * it ("transformer.", "diffusion_model.", "lora_unet_", ...), the module (a
 * weight's name without ".weight", in diffusers' or BFL's names, with dots
 * or, as kohya writes them, underscores) and a suffix saying what it is
 * (A / down, B / up, alpha). Modules are matched with dots and underscores
 * taken as the same character, so kohya's flattened names need no table of
 * their own. The products themselves are built in flux2-dit-graph.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/safetensors.h"
#include "engine/runtime/session.h"
#include "models/diffusion/flux2-dit-internal.h"

/* what the tools put before the module's name; tried in order, repeatedly */
static const char *const prefixes[] = {
    "base_model.model.", "model.diffusion_model.", "diffusion_model.", "transformer.",
    "lora_unet_",        "lora_transformer_",
};

/* (none) = not a LoRA tensor we apply */
enum part { PART_NONE, PART_A, PART_B, PART_ALPHA };

static const struct {
    const char *suffix;
    enum part part;
} suffixes[] = {
    {".lora_A.weight", PART_A},
    {".lora_B.weight", PART_B},
    {".lora_A.default.weight", PART_A},
    {".lora_B.default.weight", PART_B},
    {".lora_down.weight", PART_A},
    {".lora_up.weight", PART_B},
    {".lora.down.weight", PART_A},
    {".lora.up.weight", PART_B},
    {".alpha", PART_ALPHA},
};

typedef struct module {
    char key[160]; /* the module, dots as underscores */
    const rlx_st_tensor *a, *b, *alpha;
} module;

static bool ends_with(const char *s, const char *suf, size_t *cut)
{
    size_t n = strlen(s), m = strlen(suf);
    if (n <= m || strcmp(s + n - m, suf) != 0)
        return false;
    *cut = n - m;
    return true;
}

static void canon(const char *s, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        out[k++] = s[i] == '.' ? '_' : s[i];
    out[k] = 0;
}

/* Every product weight of the model, in both schemes, by its module name
 * (dots as underscores): built once per file, searched for each module. */
typedef struct target {
    char key[160];
    f2_role role;
    int blk;
    rlx_flux2_names scheme;
} target;

static target *targets_make(const rlx_flux2_dit *d, int *n_out)
{
    const rlx_flux2_dit_config *c = &d->cfg;
    int most = c->n_double > c->n_single ? c->n_double : c->n_single;
    int cap = 2 * F2_ROLE_COUNT * (most > 1 ? most : 1), n = 0;
    target *t = calloc((size_t)cap, sizeof *t);
    for (int s = 0; s < 2 && t; s++) {
        rlx_flux2_names names = s ? RLX_FLUX2_NAMES_BFL : RLX_FLUX2_NAMES_DIFFUSERS;
        for (int r = 0; r < F2_ROLE_COUNT; r++) {
            /* norms are scales, not products */
            if (r == F2_D_IMG_NQ || r == F2_D_IMG_NK || r == F2_D_TXT_NQ || r == F2_D_TXT_NK ||
                r == F2_S_NQ || r == F2_S_NK)
                continue;
            if ((r == F2_GUID_1 || r == F2_GUID_2) && !c->guidance_embeds)
                continue;
            int n_blk = r >= F2_S_IN ? c->n_single : r >= F2_D_IMG_Q ? c->n_double : 1;
            for (int b = 0; b < n_blk && n < cap; b++) {
                char nm[160];
                f2_role_name(names, (f2_role)r, b, nm, sizeof nm);
                size_t cut = 0;
                if (!ends_with(nm, ".weight", &cut))
                    continue; /* a role this scheme has not got: "(none)" */
                canon(nm, cut, t[n].key, sizeof t[n].key);
                t[n].role = (f2_role)r;
                t[n].blk = b;
                t[n].scheme = names;
                n++;
            }
        }
    }
    *n_out = n;
    return t;
}

/* [rows, cols] the module's product has, in the LoRA file's scheme. */
static void expected_dims(const rlx_flux2_dit *d, f2_role role, int blk, int64_t *out, int64_t *in)
{
    const int64_t C = d->cfg.hidden;
    switch (role) {
    case F2_D_IMG_Q:
    case F2_D_IMG_K:
    case F2_D_IMG_V:
    case F2_D_TXT_Q:
    case F2_D_TXT_K:
    case F2_D_TXT_V:
        *out = C, *in = C;
        return;
    case F2_D_IMG_QKV:
    case F2_D_TXT_QKV:
        *out = 3 * C, *in = C;
        return;
    default:
        break;
    }
    f2_tensor t;
    if (f2_find(d, role, blk, &t) && t.rank == 2) {
        *out = t.dims[0], *in = t.dims[1];
        return;
    }
    *out = *in = -1;
}

static bool read_scalar(const rlx_safetensors *st, const rlx_st_tensor *t, float *v)
{
    if (t->n_elements != 1)
        return false;
    const void *p = rlx_safetensors_data(st, t);
    if (!p)
        return false;
    if (t->dtype == RLX_DTYPE_F32) {
        memcpy(v, p, 4);
    } else if (t->dtype == RLX_DTYPE_F16 || t->dtype == RLX_DTYPE_BF16) {
        uint16_t h;
        memcpy(&h, p, 2);
        *v = t->dtype == RLX_DTYPE_F16 ? rlx_f16_to_f32(h) : rlx_bf16_to_f32(h);
    } else if (t->dtype == RLX_DTYPE_F64) {
        double x;
        memcpy(&x, p, 8);
        *v = (float)x;
    } else {
        return false;
    }
    return true;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static bool float_dtype(rlx_dtype t)
{
    return t == RLX_DTYPE_F32 || t == RLX_DTYPE_F16 || t == RLX_DTYPE_BF16;
}

/* One file: its modules matched and checked, appended to d->lora. */
static rlx_status load_one(rlx_flux2_dit *d, int k, const rlx_flux2_dit_lora *l, rlx_error **err)
{
    const char *file = base_name(l->path);
    rlx_safetensors *st = NULL;
    rlx_status rc = rlx_safetensors_open(l->path, &st, err);
    if (rc != RLX_OK) {
        rlx_error_prefix(err, "the LoRA file: ");
        return rc;
    }
    d->lora_files[d->n_lora_files++] = st;
    uint64_t n = rlx_safetensors_n_tensors(st);
    if (n == 0)
        return rlx_error_set(err, RLX_ERR_FORMAT, "the LoRA file %s holds no tensors", file);
    module *mods = calloc(n, sizeof *mods);
    int n_targets = 0;
    target *targets = mods ? targets_make(d, &n_targets) : NULL;
    if (!targets) {
        free(mods);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading the LoRA file %s",
                             file);
    }
    int n_mods = 0, first = d->n_lora;
    rc = RLX_OK;
    for (uint64_t i = 0; i < n && rc == RLX_OK; i++) {
        const rlx_st_tensor *t = rlx_safetensors_tensor_at(st, i);
        const char *name = t->name;
        if (!strncmp(name, "lora_te", 7) || !strncmp(name, "text_encoder", 12)) {
            rc = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                               "the LoRA file %s also changes the text encoder ('%s'): only "
                               "LoRAs of the FLUX.2 transformer are applied",
                               file, name);
            break;
        }
        enum part part = PART_NONE;
        size_t cut = 0;
        for (size_t s = 0; s < sizeof suffixes / sizeof suffixes[0] && part == PART_NONE; s++)
            if (ends_with(name, suffixes[s].suffix, &cut))
                part = suffixes[s].part;
        if (part == PART_NONE) {
            rc = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                               "the LoRA file %s holds '%s', which is not a LoRA's down (A), up "
                               "(B) or alpha tensor: DoRA, LoHa, LoKr and full-weight "
                               "differences are not applied",
                               file, name);
            break;
        }
        const char *m = name;
        size_t mlen = cut;
        for (bool again = true; again;) {
            again = false;
            for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++) {
                size_t pl = strlen(prefixes[p]);
                if (mlen > pl && !strncmp(m, prefixes[p], pl)) {
                    m += pl, mlen -= pl;
                    again = true;
                }
            }
        }
        char key[160];
        canon(m, mlen, key, sizeof key);
        int at = 0;
        while (at < n_mods && strcmp(mods[at].key, key))
            at++;
        if (at == n_mods)
            snprintf(mods[n_mods++].key, sizeof mods[0].key, "%s", key);
        const rlx_st_tensor **slot = part == PART_A   ? &mods[at].a
                                     : part == PART_B ? &mods[at].b
                                                      : &mods[at].alpha;
        if (*slot) {
            rc = rlx_error_set(err, RLX_ERR_FORMAT,
                               "the LoRA file %s has two tensors for '%s' (one is '%s')", file, key,
                               name);
            break;
        }
        *slot = t;
    }
    f2_lora *grown =
        rc == RLX_OK ? realloc(d->lora, sizeof *d->lora * (size_t)(d->n_lora + n_mods)) : NULL;
    if (rc == RLX_OK && !grown && n_mods)
        rc = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading the LoRA file %s", file);
    if (grown)
        d->lora = grown;
    char prefix[16];
    snprintf(prefix, sizeof prefix, "lora%d.", k);
    for (int i = 0; i < n_mods && rc == RLX_OK; i++) {
        const module *mo = &mods[i];
        const char *some = mo->a ? mo->a->name : mo->b ? mo->b->name : mo->alpha->name;
        if (!mo->a || !mo->b) {
            rc = rlx_error_set(err, RLX_ERR_FORMAT,
                               "the LoRA file %s has '%s' without its %s tensor (the file is "
                               "incomplete)",
                               file, some, mo->a ? "up (B)" : "down (A)");
            break;
        }
        f2_lora e = {.scale = l->scale};
        const target *tg = NULL;
        for (int q = 0; q < n_targets && !tg; q++)
            if (!strcmp(targets[q].key, mo->key))
                tg = &targets[q];
        if (!tg) {
            rc = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                               "the LoRA file %s is not for this FLUX.2 model (%s): its '%s' "
                               "matches no weight of it",
                               file, d->cfg.name, some);
            break;
        }
        e.role = tg->role;
        e.blk = tg->blk;
        e.scheme = tg->scheme;
        int64_t want_out, want_in;
        expected_dims(d, e.role, e.blk, &want_out, &want_in);
        const rlx_st_tensor *a = mo->a, *b = mo->b;
        if (a->n_dims != 2 || b->n_dims != 2 || a->shape[0] != b->shape[1] || a->shape[0] == 0 ||
            (int64_t)a->shape[1] != want_in || (int64_t)b->shape[0] != want_out) {
            rc = rlx_error_set(
                err, RLX_ERR_UNSUPPORTED,
                "the LoRA file %s is not for this FLUX.2 model (%s): '%s' and '%s' make a "
                "[%llu x %llu] change where the weight is [%lld x %lld]",
                file, d->cfg.name, a->name, b->name,
                (unsigned long long)(b->n_dims == 2 ? b->shape[0] : 0),
                (unsigned long long)(a->n_dims == 2 ? a->shape[1] : 0), (long long)want_out,
                (long long)want_in);
            break;
        }
        if (!float_dtype(a->dtype) || !float_dtype(b->dtype)) {
            rc = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                               "the LoRA file %s stores '%s' as %s: F32, F16 and BF16 are read",
                               file, float_dtype(a->dtype) ? b->name : a->name,
                               rlx_dtype_name(float_dtype(a->dtype) ? b->dtype : a->dtype));
            break;
        }
        e.rank = (int64_t)a->shape[0];
        e.in = want_in;
        e.out = want_out;
        e.a_dtype = a->dtype;
        e.b_dtype = b->dtype;
        snprintf(e.a, sizeof e.a, "%s%s", prefix, a->name);
        snprintf(e.b, sizeof e.b, "%s%s", prefix, b->name);
        if (mo->alpha) {
            float alpha = 0.0f;
            if (!read_scalar(st, mo->alpha, &alpha)) {
                rc = rlx_error_set(err, RLX_ERR_FORMAT, "the LoRA file %s: '%s' is not one number",
                                   file, mo->alpha->name);
                break;
            }
            e.scale = l->scale * alpha / (float)e.rank;
        }
        d->lora[d->n_lora++] = e;
    }
    free(mods);
    free(targets);
    /* strength 0: checked, but nothing added to the graph (the picture is
     * the model's own, bit for bit) */
    if (l->scale == 0.0f)
        d->n_lora = first;
    if (rc == RLX_OK)
        rc = rlx_session_add_safetensors_prefixed(d->s, st, prefix, err);
    return rc;
}

rlx_status f2_lora_load(rlx_flux2_dit *d, const rlx_flux2_dit_lora *l, int n, rlx_error **err)
{
    if (n < 0 || n > RLX_FLUX2_DIT_MAX_LORAS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "at most %d LoRA files are applied",
                             RLX_FLUX2_DIT_MAX_LORAS);
    for (int i = 0; i < n; i++) {
        if (!l[i].path)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "a LoRA without a file");
        if (!(l[i].scale == l[i].scale) || l[i].scale < -16.0f || l[i].scale > 16.0f)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "the LoRA strength %g is out of range (-16 to 16)",
                                 (double)l[i].scale);
        rlx_status st = load_one(d, i, &l[i], err);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

void f2_lora_close(rlx_flux2_dit *d)
{
    for (int i = 0; i < d->n_lora_files; i++)
        rlx_safetensors_close(d->lora_files[i]);
    d->n_lora_files = 0;
    free(d->lora);
    d->lora = NULL;
    d->n_lora = 0;
}
