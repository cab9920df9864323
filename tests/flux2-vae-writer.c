/* The random-weight FLUX.2 VAE of tests/reference/flux2_vae_reference.py as
 * safetensors. The tensor list is written here again from diffusers' layout
 * (not taken from models/diffusion), and the BFL names come from the mapping
 * of diffusers' scripts/convert_flux2_to_diffusers.py, run backwards. */
#include "name-hash.h"
#include "flux2-vae-writer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/base/dtype.h"

#define LAT 32

typedef struct {
    char name[96];
    int rank;
    int64_t dims[4];
} spec;

typedef struct {
    spec *s;
    int n, cap;
    bool oom;
} list;

static void push(list *l, const char *name, int rank, int64_t d0, int64_t d1, int64_t d2,
                 int64_t d3)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        spec *ns = realloc(l->s, (size_t)cap * sizeof *ns);
        if (!ns) {
            l->oom = true;
            return;
        }
        l->s = ns;
        l->cap = cap;
    }
    spec *s = &l->s[l->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->rank = rank;
    int64_t d[4] = {d0, d1, d2, d3};
    memcpy(s->dims, d, sizeof d);
}

static void conv(list *l, const char *p, int cin, int cout, int k)
{
    char nm[96];
    snprintf(nm, sizeof nm, "%s.weight", p);
    push(l, nm, 4, cout, cin, k, k);
    snprintf(nm, sizeof nm, "%s.bias", p);
    push(l, nm, 1, cout, 0, 0, 0);
}

static void gn(list *l, const char *p, int c)
{
    char nm[96];
    snprintf(nm, sizeof nm, "%s.weight", p);
    push(l, nm, 1, c, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s.bias", p);
    push(l, nm, 1, c, 0, 0, 0);
}

static void res(list *l, const char *p, int cin, int cout)
{
    char nm[96];
    snprintf(nm, sizeof nm, "%s.norm1", p);
    gn(l, nm, cin);
    snprintf(nm, sizeof nm, "%s.conv1", p);
    conv(l, nm, cin, cout, 3);
    snprintf(nm, sizeof nm, "%s.norm2", p);
    gn(l, nm, cout);
    snprintf(nm, sizeof nm, "%s.conv2", p);
    conv(l, nm, cout, cout, 3);
    if (cin != cout) {
        snprintf(nm, sizeof nm, "%s.conv_shortcut", p);
        conv(l, nm, cin, cout, 1);
    }
}

static void mid(list *l, const char *side, int c)
{
    char nm[96];
    snprintf(nm, sizeof nm, "%s.mid_block.resnets.0", side);
    res(l, nm, c, c);
    snprintf(nm, sizeof nm, "%s.mid_block.attentions.0.group_norm", side);
    gn(l, nm, c);
    static const char *const lin[4] = {"to_q", "to_k", "to_v", "to_out.0"};
    for (int i = 0; i < 4; i++) {
        snprintf(nm, sizeof nm, "%s.mid_block.attentions.0.%s.weight", side, lin[i]);
        push(l, nm, 2, c, c, 0, 0);
        snprintf(nm, sizeof nm, "%s.mid_block.attentions.0.%s.bias", side, lin[i]);
        push(l, nm, 1, c, 0, 0, 0);
    }
    snprintf(nm, sizeof nm, "%s.mid_block.resnets.1", side);
    res(l, nm, c, c);
}

static void build(list *l, bool decoder_only, const int *enc_widths, const int *dec_widths)
{
    static const int real_ch[4] = {128, 256, 512, 512};
    const int *enc_ch = enc_widths ? enc_widths : real_ch;
    const int *ch = enc_ch;
    char nm[96];
    push(l, "bn.running_mean", 1, 4 * LAT, 0, 0, 0);
    push(l, "bn.running_var", 1, 4 * LAT, 0, 0, 0);
    if (!decoder_only) {
        conv(l, "encoder.conv_in", 3, ch[0], 3);
        int cin = ch[0];
        for (int i = 0; i < 4; i++) {
            for (int j = 0; j < 2; j++) {
                snprintf(nm, sizeof nm, "encoder.down_blocks.%d.resnets.%d", i, j);
                res(l, nm, cin, ch[i]);
                cin = ch[i];
            }
            if (i < 3) {
                snprintf(nm, sizeof nm, "encoder.down_blocks.%d.downsamplers.0.conv", i);
                conv(l, nm, ch[i], ch[i], 3);
            }
        }
        mid(l, "encoder", ch[3]);
        gn(l, "encoder.conv_norm_out", ch[3]);
        conv(l, "encoder.conv_out", ch[3], 2 * LAT, 3);
        conv(l, "quant_conv", 2 * LAT, 2 * LAT, 1);
    }
    ch = dec_widths ? dec_widths : real_ch;
    conv(l, "post_quant_conv", LAT, LAT, 1);
    conv(l, "decoder.conv_in", LAT, ch[3], 3);
    mid(l, "decoder", ch[3]);
    int cin = ch[3];
    for (int i = 0; i < 4; i++) {
        int c = ch[3 - i];
        for (int j = 0; j < 3; j++) {
            snprintf(nm, sizeof nm, "decoder.up_blocks.%d.resnets.%d", i, j);
            res(l, nm, cin, c);
            cin = c;
        }
        if (i < 3) {
            snprintf(nm, sizeof nm, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            conv(l, nm, c, c, 3);
        }
    }
    gn(l, "decoder.conv_norm_out", ch[0]);
    conv(l, "decoder.conv_out", ch[0], 3, 3);
}

/* Replace the first `from` in s by `to` (s has room for 96 bytes). */
static void replace(char *s, const char *from, const char *to)
{
    char *p = strstr(s, from);
    if (!p)
        return;
    char tail[96];
    snprintf(tail, sizeof tail, "%s", p + strlen(from));
    snprintf(p, 96 - (size_t)(p - s), "%s%s", to, tail);
}

/* diffusers -> BFL, the converter's rules backwards. */
static void bfl_name(const char *d, char *out)
{
    char s[96];
    int i, j;
    snprintf(s, sizeof s, "%s", d);
    if (sscanf(s, "decoder.up_blocks.%d.resnets.%d.", &i, &j) == 2) {
        const char *rest = strchr(strstr(s, "resnets.") + 8, '.') + 1;
        snprintf(out, 96, "decoder.up.%d.block.%d.%s", 3 - i, j, rest);
        snprintf(s, sizeof s, "%s", out);
    } else if (sscanf(s, "decoder.up_blocks.%d.upsamplers.0.conv.", &i) == 1) {
        snprintf(out, 96, "decoder.up.%d.upsample.conv.%s", 3 - i, strrchr(s, '.') + 1);
        snprintf(s, sizeof s, "%s", out);
    }
    replace(s, "down_blocks.", "down.");
    replace(s, ".resnets.", ".block.");
    replace(s, ".downsamplers.0.conv", ".downsample.conv");
    replace(s, "mid_block.block.0", "mid.block_1");
    replace(s, "mid_block.block.1", "mid.block_2");
    replace(s, "mid_block.attentions.0.group_norm", "mid.attn_1.norm");
    replace(s, "mid_block.attentions.0.to_q", "mid.attn_1.q");
    replace(s, "mid_block.attentions.0.to_k", "mid.attn_1.k");
    replace(s, "mid_block.attentions.0.to_v", "mid.attn_1.v");
    replace(s, "mid_block.attentions.0.to_out.0", "mid.attn_1.proj_out");
    replace(s, "conv_norm_out", "norm_out");
    replace(s, "conv_shortcut", "nin_shortcut");
    if (strncmp(s, "quant_conv.", 11) == 0) {
        snprintf(out, 96, "encoder.%s", s);
        return;
    }
    if (strncmp(s, "post_quant_conv.", 16) == 0) {
        snprintf(out, 96, "decoder.%s", s);
        return;
    }
    snprintf(out, 96, "%s", s);
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The F16 values of one tensor (the reference's make()). */
static void fill(const spec *s, int64_t n, uint16_t *dst)
{
    uint64_t seed = rlx_test_fnv1a64(s->name);
    float scale = 0.0f;
    if (s->rank > 1) {
        int64_t fan_in = 1;
        for (int d = 1; d < s->rank; d++)
            fan_in *= s->dims[d];
        scale = (float)sqrt(3.0 / (double)fan_in);
    }
    bool mean = !strcmp(s->name, "bn.running_mean"), var = !strcmp(s->name, "bn.running_var");
    bool bias = ends_with(s->name, ".bias");
    for (int64_t i = 0; i < n; i++) {
        float u = rlx_test_uniform(seed, i), v;
        if (mean)
            v = u * 0.25f;
        else if (var)
            v = 1.0f + u * 0.5f;
        else if (bias)
            v = u * 0.0625f;
        else if (s->rank == 1)
            v = 1.0f + u * 0.125f;
        else
            v = u * scale;
        dst[i] = rlx_f32_to_f16(v);
    }
}

void rlx_flux2_vae_writer_packed(float *packed)
{
    uint64_t seed = rlx_test_fnv1a64("packed");
    for (int64_t i = 0; i < 4 * LAT * RLX_FVW_LH * RLX_FVW_LW; i++)
        packed[i] = rlx_test_uniform(seed, i) * 2.0f;
}

void rlx_flux2_vae_writer_image(float *chw)
{
    uint64_t seed = rlx_test_fnv1a64("image");
    for (int64_t i = 0; i < 3 * RLX_FVW_IMG_H * RLX_FVW_IMG_W; i++)
        chw[i] = (rlx_test_uniform(seed, i) + 1.0f) / 2.0f;
}

rlx_status rlx_flux2_vae_writer_write(const char *path, const rlx_flux2_vae_writer_opts *o,
                                      rlx_error **err)
{
    rlx_flux2_vae_writer_opts none = {0};
    if (!o)
        o = &none;
    const char *prefix = o->prefix ? o->prefix : "";
    list l = {0};
    build(&l, o->decoder_only, o->enc_widths, o->dec_widths);
    rlx_status st = RLX_OK;
    size_t hcap = 1 << 20, hl = 0;
    char *hdr = malloc(hcap);
    uint16_t *half = NULL;
    float *full = NULL;
    FILE *f = NULL;
    int64_t most = 0;
    for (int i = 0; i < l.n; i++) {
        int64_t n = 1;
        for (int d = 0; d < l.s[i].rank; d++)
            n *= l.s[i].dims[d];
        most = n > most ? n : most;
    }
    half = malloc(sizeof(uint16_t) * (size_t)most);
    full = malloc(sizeof(float) * (size_t)most);
    if (l.oom || !hdr || !half || !full) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    const size_t esz = o->f32 ? 4 : 2;
    const char *dtn = o->f32 ? "F32" : o->bf16 ? "BF16" : "F16";
    hl += (size_t)snprintf(hdr + hl, hcap - hl, "{");
    uint64_t off = 0;
    bool first = true;
    for (int i = 0; i < l.n; i++) {
        const spec *s = &l.s[i];
        if (o->skip && !strcmp(o->skip, s->name))
            continue;
        char name[96];
        if (o->bfl_names)
            bfl_name(s->name, name);
        else
            snprintf(name, sizeof name, "%s", s->name);
        int64_t dims[4];
        int rank = s->rank;
        memcpy(dims, s->dims, sizeof dims);
        if (o->bfl_names && rank == 2) /* attention linears as 1x1 convs */
            dims[2] = dims[3] = 1, rank = 4;
        uint64_t n = 1;
        for (int d = 0; d < rank; d++)
            n *= (uint64_t)dims[d];
        if (o->misshape && !strcmp(o->misshape, s->name)) {
            dims[0] *= 2;
            n *= 2;
        }
        hl += (size_t)snprintf(hdr + hl, hcap - hl, "%s\"%s%s\":{\"dtype\":\"%s\",\"shape\":[",
                               first ? "" : ",", prefix, name, dtn);
        for (int d = 0; d < rank; d++)
            hl += (size_t)snprintf(hdr + hl, hcap - hl, "%s%lld", d ? "," : "", (long long)dims[d]);
        hl += (size_t)snprintf(hdr + hl, hcap - hl, "],\"data_offsets\":[%llu,%llu]}",
                               (unsigned long long)off, (unsigned long long)(off + esz * n));
        off += esz * n;
        first = false;
    }
    hl += (size_t)snprintf(hdr + hl, hcap - hl, "}");
    while (hl % 8)
        hdr[hl++] = ' ';
    f = fopen(path, "wb");
    if (!f) {
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s", path);
        goto done;
    }
    uint8_t len[8];
    for (int b = 0; b < 8; b++)
        len[b] = (uint8_t)((uint64_t)hl >> (8 * b));
    fwrite(len, 1, 8, f);
    fwrite(hdr, 1, hl, f);
    for (int i = 0; i < l.n; i++) {
        const spec *s = &l.s[i];
        if (o->skip && !strcmp(o->skip, s->name))
            continue;
        int64_t n = 1;
        for (int d = 0; d < s->rank; d++)
            n *= s->dims[d];
        fill(s, n, half);
        int reps = o->misshape && !strcmp(o->misshape, s->name) ? 2 : 1;
        for (int r = 0; r < reps; r++) { /* little-endian hosts only, as the tests run */
            if (o->f32) {
                for (int64_t k = 0; k < n; k++)
                    full[k] = rlx_f16_to_f32(half[k]);
                fwrite(full, sizeof(float), (size_t)n, f);
            } else if (o->bf16) {
                for (int64_t k = 0; k < n; k++)
                    half[k] = rlx_f32_to_bf16(rlx_f16_to_f32(half[k]));
                fwrite(half, sizeof(uint16_t), (size_t)n, f);
                if (reps > 1)
                    fill(s, n, half); /* the F16 values again for the second copy */
            } else {
                fwrite(half, sizeof(uint16_t), (size_t)n, f);
            }
        }
    }
    if (ferror(f))
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s", path);
done:
    if (f && fclose(f) != 0 && st == RLX_OK)
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s", path);
    free(hdr);
    free(half);
    free(full);
    free(l.s);
    return st;
}
