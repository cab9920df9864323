/* See flux2-model-writer.h. */
#include "flux2-model-writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "flux2-vae-writer.h"
#include "flux2-writer.h"
#include "qwen3-writer.h"

#define TINY_HIDDEN 256
#define TEXT_HIDDEN 64

static rlx_status put(const char *dir, const char *name, const char *text, rlx_error **err)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        if (f)
            fclose(f);
        return rlx_error_set(err, RLX_ERR_IO, "cannot write %s", p);
    }
    return RLX_OK;
}

static rlx_status copy(const char *from_dir, const char *to_dir, const char *name, rlx_error **err)
{
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/%s", from_dir, name);
    snprintf(b, sizeof b, "%s/%s", to_dir, name);
    FILE *in = fopen(a, "rb");
    if (!in)
        return rlx_error_set(err, RLX_ERR_IO, "cannot read %s", a);
    FILE *out = fopen(b, "wb");
    if (!out) {
        fclose(in);
        return rlx_error_set(err, RLX_ERR_IO, "cannot create %s", b);
    }
    char buf[65536];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in);
    fclose(in);
    if (fclose(out) != 0 || !ok)
        return rlx_error_set(err, RLX_ERR_IO, "cannot copy %s to %s", a, b);
    return RLX_OK;
}

static char *sub(const char *root, const char *name)
{
    size_t n = strlen(root) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) {
        snprintf(p, n, "%s/%s", root, name);
        mkdir(p, 0755);
    }
    return p;
}

rlx_status rlx_flux2_model_writer_write(const char *root, bool base, const char *tok,
                                        rlx_error **err)
{
    mkdir(root, 0755);
    char idx[1024];
    snprintf(idx, sizeof idx,
             "{\"_class_name\": \"Flux2KleinPipeline\", \"_diffusers_version\": \"0.37.0\", "
             "\"is_distilled\": %s, "
             "\"scheduler\": [\"diffusers\", \"FlowMatchEulerDiscreteScheduler\"], "
             "\"text_encoder\": [\"transformers\", \"Qwen3ForCausalLM\"], "
             "\"tokenizer\": [\"transformers\", \"Qwen2TokenizerFast\"], "
             "\"transformer\": [\"diffusers\", \"Flux2Transformer2DModel\"], "
             "\"vae\": [\"diffusers\", \"AutoencoderKLFlux2\"]}\n",
             base ? "false" : "true");
    rlx_status st = RLX_OK;
    char *tdir = sub(root, "transformer"), *te = sub(root, "text_encoder"),
         *tk = sub(root, "tokenizer"), *vae = sub(root, "vae"), *sch = sub(root, "scheduler");
    if (!tdir || !te || !tk || !vae || !sch)
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    if (st == RLX_OK) {
        rlx_flux2_writer_opts o = {.format = RLX_F2W_DIFFUSERS_FOLDER,
                                   .dtype = RLX_DTYPE_BF16,
                                   .hidden = TINY_HIDDEN,
                                   .n_double = 1,
                                   .n_single = 1,
                                   .joint_dim = 3 * TEXT_HIDDEN};
        st = rlx_flux2_writer_write(root, &o, err);
    }
    if (st == RLX_OK) {
        rlx_qwen3_writer_shape s = {.hidden = TEXT_HIDDEN,
                                    .heads = 4,
                                    .kv_heads = 2,
                                    .head_dim = 16,
                                    .ffn = 96,
                                    .layers = 28,
                                    .vocab = 151936};
        st = rlx_qwen3_writer_write_hf(te, &s, err);
    }
    if (st == RLX_OK && tok)
        st = copy(tok, tk, "tokenizer.json", err);
    if (st == RLX_OK && tok)
        st = copy(tok, tk, "tokenizer_config.json", err);
    if (st == RLX_OK) {
        static const int w[4] = {32, 32, 32, 32};
        rlx_flux2_vae_writer_opts o = {.enc_widths = w, .dec_widths = w};
        char p[4200];
        snprintf(p, sizeof p, "%s/diffusion_pytorch_model.safetensors", vae);
        st = rlx_flux2_vae_writer_write(p, &o, err);
    }
    if (st == RLX_OK)
        st = put(vae, "config.json",
                 "{\"_class_name\": \"AutoencoderKLFlux2\", \"act_fn\": \"silu\", "
                 "\"batch_norm_eps\": 0.0001, \"batch_norm_momentum\": 0.1, "
                 "\"block_out_channels\": [32, 32, 32, 32], \"in_channels\": 3, "
                 "\"latent_channels\": 32, \"layers_per_block\": 2, \"norm_num_groups\": 32, "
                 "\"out_channels\": 3, \"patch_size\": [2, 2], \"sample_size\": 1024, "
                 "\"use_post_quant_conv\": true, \"use_quant_conv\": true}\n",
                 err);
    if (st == RLX_OK)
        st = put(sch, "scheduler_config.json",
                 "{\"_class_name\": \"FlowMatchEulerDiscreteScheduler\", \"base_image_seq_len\": "
                 "256, \"base_shift\": 0.5, \"max_image_seq_len\": 4096, \"max_shift\": 1.15, "
                 "\"num_train_timesteps\": 1000, \"shift\": 3.0, \"time_shift_type\": "
                 "\"exponential\", \"use_dynamic_shifting\": true}\n",
                 err);
    /* after the transformer: its writer leaves a model_index.json of its own */
    if (st == RLX_OK)
        st = put(root, "model_index.json", idx, err);
    free(tdir);
    free(te);
    free(tk);
    free(vae);
    free(sch);
    return st;
}
