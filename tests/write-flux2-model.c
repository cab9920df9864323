/* write-flux2-model: random-weight FLUX.2 [klein] files for the tests and for
 * benchmarks. Exit 0, or 1 with a sentence on stderr.
 *
 *   write-flux2-model DIR [--base] [--tokenizer TOKDIR] [--tokenizer-optional]
 *       a whole tiny diffusers folder: model_index.json ("is_distilled" true,
 *       false with --base), transformer/ (hidden 256 = 2 heads x 128, one
 *       double- and one single-stream block, joint_dim 192; tests/flux2-writer.h),
 *       text_encoder/ (a Qwen3 of hidden 64, 28 layers so that the pipeline's
 *       hidden states 9, 18, 27 exist, Qwen3's 151936-token vocabulary;
 *       tests/qwen3-writer.h), tokenizer/ (tokenizer.json and
 *       tokenizer_config.json copied from TOKDIR, by default
 *       ../shared/data/tokenizers/hf-qwen3), vae/ (all four block widths 32,
 *       the real 32 latent channels so that TAEF2 previews work;
 *       tests/flux2-vae-writer.h) and scheduler/. About 40 MB; the weights are
 *       those of tests/reference/flux2_pipeline_reference.py.
 *   write-flux2-model --klein4b OUT.safetensors|OUT.gguf [--f16|--q8|--fp8]
 *       klein 4B's transformer at its published shape (hidden 3072, 5 double,
 *       20 single blocks, joint_dim 7680) with BFL names: BF16 safetensors
 *       (F16 with --f16; the blocks' matrices F8_E4M3 with per-tensor scales,
 *       as BFL's FP8 file, with --fp8), or GGUF Q8_0 (F16 with --f16), for
 *       benchmarks.
 *   write-flux2-model --transformer OUT.safetensors|OUT.gguf [--f16|--q8|--fp8]
 *       the tiny folder's transformer alone, the same weights, as a single
 *       file with BFL names (as --klein4b writes it), for the single-file
 *       path (with the folder's text_encoder/ and vae/).
 *   write-flux2-model --vae OUT.safetensors
 *       the FLUX.2 VAE at its real widths with BFL names (as ae.safetensors), F16.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flux2-model-writer.h"
#include "flux2-vae-writer.h"
#include "flux2-writer.h"

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

int main(int argc, char **argv)
{
    const char *tok = RLX_TEST_DATA_DIR "/tokenizers/hf-qwen3";
    const char *out = NULL, *klein = NULL, *vae = NULL;
    bool tiny_transformer = false, tok_optional = false;
    bool base = false, f16 = false, q8 = false, fp8 = false, ok = argc >= 2;
    for (int i = 1; ok && i < argc; i++) {
        if (!strcmp(argv[i], "--base"))
            base = true;
        else if (!strcmp(argv[i], "--f16"))
            f16 = true;
        else if (!strcmp(argv[i], "--q8"))
            q8 = true;
        else if (!strcmp(argv[i], "--fp8"))
            fp8 = true;
        else if (!strcmp(argv[i], "--tokenizer-optional"))
            tok_optional = true;
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc)
            tok = argv[++i];
        else if (!strcmp(argv[i], "--klein4b") && i + 1 < argc)
            klein = argv[++i];
        else if (!strcmp(argv[i], "--transformer") && i + 1 < argc)
            klein = argv[++i], tiny_transformer = true;
        else if (!strcmp(argv[i], "--vae") && i + 1 < argc)
            vae = argv[++i];
        else if (argv[i][0] != '-' && !out)
            out = argv[i];
        else
            ok = false;
    }
    ok = ok && !!out + !!klein + !!vae == 1 && f16 + q8 + fp8 <= 1;
    if (!ok) {
        fprintf(stderr, "usage: write-flux2-model DIR [--base] [--tokenizer DIR] "
                        "[--tokenizer-optional]\n"
                        "       write-flux2-model --klein4b OUT.safetensors|OUT.gguf "
                        "[--f16|--q8|--fp8]\n"
                        "       write-flux2-model --transformer OUT.safetensors|OUT.gguf "
                        "[--f16|--q8|--fp8]\n"
                        "       write-flux2-model --vae OUT.safetensors\n");
        return 1;
    }
    rlx_error *err = NULL;
    rlx_status st;
    if (out) {
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/tokenizer.json", tok);
        FILE *t = fopen(probe, "rb");
        if (t)
            fclose(t);
        else if (tok_optional) {
            /* the build goes on; the tests that open the folder skip */
            fprintf(stderr, "write-flux2-model: note: %s is absent: %s/tokenizer is left empty\n",
                    probe, out);
            tok = NULL;
        }
        st = rlx_flux2_model_writer_write(out, base, tok, &err);
    } else if (klein) {
        bool gguf = ends_with(klein, ".gguf");
        if (q8 && !gguf) {
            fprintf(stderr, "write-flux2-model: Q8_0 is for .gguf files only\n");
            return 1;
        }
        if (fp8 && gguf) {
            fprintf(stderr, "write-flux2-model: FP8 is for .safetensors files only\n");
            return 1;
        }
        rlx_flux2_writer_opts o = {
            .format = gguf ? RLX_F2W_GGUF : RLX_F2W_BFL,
            .dtype = f16    ? RLX_DTYPE_F16
                     : fp8  ? RLX_DTYPE_F8_E4M3
                     : gguf ? RLX_DTYPE_Q8_0
                            : RLX_DTYPE_BF16,
            .hidden = tiny_transformer ? 256 : 3072,
            .n_double = tiny_transformer ? 1 : 5,
            .n_single = tiny_transformer ? 1 : 20,
            .joint_dim = tiny_transformer ? 3 * RLX_FLUX2_MODEL_WRITER_TEXT_HIDDEN : 7680};
        st = rlx_flux2_writer_write(klein, &o, &err);
    } else {
        rlx_flux2_vae_writer_opts o = {.bfl_names = true};
        st = rlx_flux2_vae_writer_write(vae, &o, &err);
    }
    if (st != RLX_OK) {
        fprintf(stderr, "write-flux2-model: %s\n", rlx_error_message(err));
        rlx_error_free(err);
        return 1;
    }
    return 0;
}
