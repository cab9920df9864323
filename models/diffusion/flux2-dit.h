/* The FLUX.2 transformer (diffusers' Flux2Transformer2DModel; klein 4B / 9B,
 * FLUX.2 dev) run through the compile+execute stack: one velocity per call.
 *
 * Usage:
 *     rlx_flux2_dit_params p = rlx_flux2_dit_default_params();
 *     p.device = "vulkan:0";
 *     rlx_flux2_dit *d = NULL;
 *     if (rlx_flux2_dit_open("FLUX.2-klein-4B", &p, &d, &err) != RLX_OK) ...
 *     const rlx_flux2_dit_config *c = rlx_flux2_dit_get_config(d);  // c->joint_dim: 7680
 *     rlx_flux2_dit_input in = {.latents = x, .lh = 64, .lw = 64,     // 1024 x 1024
 *                               .text = emb, .n_text = 512, .t = sigma};
 *     rlx_flux2_dit_velocity(d, &in, v, &err);   // v: [128][64][64]
 *     for (i...) x[i] += (sigma_next - sigma) * v[i];   // the Euler step
 *     rlx_flux2_dit_free(d);
 *
 * Architecture (from diffusers transformer_flux2.py, pipeline_flux2_klein.py
 * and scripts/convert_flux2_to_diffusers.py, read for facts):
 *   - No biases anywhere. Norm eps 1e-6 everywhere (LayerNorm without affine
 *     before every modulation; RMSNorm with a weight on q and k per head).
 *   - temb = timestep_embedder(sinusoid(1000 * t)) [+ guidance_embedder(
 *     sinusoid(1000 * g)) when guidance_embeds]: sinusoid is 256 channels,
 *     [cos, sin] (flip_sin_to_cos), freqs exp(-ln(10000) * j / 128);
 *     each embedder is linear_1 -> SiLU -> linear_2.
 *   - Modulation shared by all blocks of a kind, from silu(temb):
 *     double_stream_modulation_img / _txt: 6 x hidden (shift, scale, gate of
 *     attention, then of the MLP); single_stream_modulation: 3 x hidden.
 *     modulate(x) = LN(x) * (1 + scale) + shift; residual += gate * out.
 *   - x_embedder: 128 -> hidden on image (and reference) tokens;
 *     context_embedder: joint_dim -> hidden on text tokens.
 *   - Double-stream block: image and text streams with their own q/k/v/out
 *     and MLP weights, one joint attention over [text, image] tokens (RoPE on
 *     q and k after the RMSNorm), MLP = linear_in (hidden -> 2 x mlp) ->
 *     SwiGLU (silu(first half) * second half) -> linear_out.
 *   - Single-stream block over [text, image]: one projection hidden ->
 *     3 x hidden + 2 x mlp (q, k, v, MLP input), attention, SwiGLU, one
 *     projection [attention, MLP] (hidden + mlp) -> hidden.
 *   - norm_out: LN(x) * (1 + scale) + shift with (scale, shift) =
 *     linear(silu(temb)) in that order (BFL stores shift first), then
 *     proj_out: hidden -> 128. The output keeps the target image tokens only.
 *   - Attention scale 1/sqrt(128). RoPE: 4 axes of 32 dims each (t, h, w, l),
 *     theta 2000, interleaved pairs (x[2i], x[2i+1]) rotated by
 *     pos_axis * theta^(-2i/32), cos/sin in double as diffusers does.
 *   - Position ids (the klein pipeline's _prepare_*_ids): text token l is
 *     (0, 0, 0, l); the target image token (y, x) is (0, y, x, 0); reference
 *     image r's token (y, x) is (10 + 10 r, y, x, 0). The sequence is
 *     [text, image, ref 0, ref 1, ...] and reference tokens go through the
 *     image stream.
 *
 * Configs (convert_flux2_to_diffusers.py; all: head_dim 128, in_channels 128,
 * mlp_ratio 3, axes (32, 32, 32, 32), theta 2000, timestep channels 256):
 *   klein-4b: hidden 3072 (24 heads), 5 double, 20 single, joint_dim 7680
 *             (3 x Qwen3-4B's 2560), no guidance embedder
 *   klein-9b: hidden 4096 (32 heads), 8 double, 24 single, joint_dim 12288
 *             (3 x Qwen3-8B's 4096), no guidance embedder
 *   dev:      hidden 6144 (48 heads), 8 double, 48 single, joint_dim 15360,
 *             guidance embedder
 * The variant comes from the tensor shapes (hidden from x_embedder, joint_dim
 * from context_embedder, head_dim from norm_q, block counts by probing,
 * guidance from the guidance embedder's presence); config.json, when beside
 * the weights, must agree; model_index.json's "is_distilled" fills
 * `distilled` (-1 when unknown: the tensors cannot tell).
 *
 * Tensor names. diffusers (transformer/diffusion_pytorch_model*.safetensors,
 * sharded with diffusion_pytorch_model.safetensors.index.json):
 *   x_embedder.weight, context_embedder.weight,
 *   time_guidance_embed.{timestep,guidance}_embedder.linear_{1,2}.weight,
 *   double_stream_modulation_{img,txt}.linear.weight,
 *   single_stream_modulation.linear.weight,
 *   transformer_blocks.N.attn.{to_q,to_k,to_v,to_out.0,add_q_proj,add_k_proj,
 *     add_v_proj,to_add_out}.weight, ...attn.{norm_q,norm_k,norm_added_q,
 *     norm_added_k}.weight, ...{ff,ff_context}.linear_{in,out}.weight,
 *   single_transformer_blocks.N.attn.{to_qkv_mlp_proj,to_out,norm_q,norm_k}.weight,
 *   norm_out.linear.weight ([scale; shift]), proj_out.weight.
 * BFL single files (and GGUF conversions, stable-diffusion.cpp / city96
 * style, which keep them; a "model.diffusion_model." prefix is accepted):
 *   img_in, txt_in, time_in.{in,out}_layer, guidance_in.{in,out}_layer,
 *   double_stream_modulation_{img,txt}.lin, single_stream_modulation.lin,
 *   double_blocks.N.{img,txt}_attn.qkv (q; k; v fused), .{img,txt}_attn.proj,
 *   .{img,txt}_attn.norm.{query,key}_norm.scale, .{img,txt}_mlp.{0,2},
 *   single_blocks.N.linear1, .linear2, .norm.{query,key}_norm.scale,
 *   final_layer.adaLN_modulation.1 ([shift; scale]), final_layer.linear;
 *   all ".weight" except the norms' ".scale".
 * Dtypes: safetensors F32 / F16 / BF16; GGUF F32 / F16 / BF16 / Q8_0 / Q4_0 /
 * Q4_K / Q5_K / Q6_K (whatever the CPU's quantized matmul takes) for the 2-D
 * matrices. Weights stay PARAMs in their file dtype; norm weights are cast to
 * F32 in the graph. FP8 files are refused with a sentence.
 *
 * Compute: the whole network is one graph (engine/ir/graph.h) compiled per
 * (text tokens, image tokens) shape and cached by the runner (the klein
 * pipeline pads text to 512 tokens, so one size compiles once). The host
 * only lays out the inputs: latents CHW -> token rows, the 256-channel
 * timestep sinusoid and the RoPE cos/sin tables.
 *
 * Ownership: the runner owns its session and the mapped files.
 * Thread safety: a runner is used by one thread at a time, except
 * rlx_flux2_dit_cancel, which any thread may call.
 */
#ifndef RLX_MODELS_DIFFUSION_FLUX2_DIT_H
#define RLX_MODELS_DIFFUSION_FLUX2_DIT_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_session;

#define RLX_FLUX2_IN_CHANNELS  128
#define RLX_FLUX2_HEAD_DIM     128
#define RLX_FLUX2_DIT_MAX_REFS 8
/* image side in latent tokens (16 pixels each): 4096 px */
#define RLX_FLUX2_DIT_MAX_SIDE 256
#define RLX_FLUX2_MAX_TEXT     4096
/* all image tokens (target and references) of one call */
#define RLX_FLUX2_MAX_IMAGE_TOKENS (128 * 128 * 3)

typedef struct rlx_flux2_dit rlx_flux2_dit;

#define RLX_FLUX2_DIT_MAX_LORAS 8

/* A LoRA file (.safetensors) and its strength. The names may be diffusers'
 * / PEFT's ("transformer.transformer_blocks.0.attn.to_q.lora_A.weight"),
 * BFL's as ComfyUI and ai-toolkit write them
 * ("diffusion_model.double_blocks.0.img_attn.qkv.lora_A.weight") or kohya's
 * ("lora_unet_double_blocks_0_img_attn_qkv.lora_down.weight" with ".alpha"),
 * on a model of either naming. Each module adds
 * strength x alpha / rank x (x A^T) B^T to its weight's product (alpha =
 * rank when the file has none, as diffusers loads PEFT files): the weights
 * stay as they are in the file (packed), the low-rank product runs beside. */
typedef struct rlx_flux2_dit_lora {
    const char *path;
    float scale;
} rlx_flux2_dit_lora;

typedef struct rlx_flux2_dit_params {
    const char *device;              /* "cpu", "vulkan:0", ...; NULL = "cpu" */
    int n_threads;                   /* CPU threads; 0 = one per core */
    uint64_t memory_budget;          /* bytes; 0 = the device's */
    const rlx_flux2_dit_lora *loras; /* applied at open; NULL: none */
    int n_loras;                     /* 0 .. RLX_FLUX2_DIT_MAX_LORAS */
} rlx_flux2_dit_params;

typedef enum rlx_flux2_names {
    RLX_FLUX2_NAMES_DIFFUSERS, /* transformer_blocks.N.attn.to_q.weight ... */
    RLX_FLUX2_NAMES_BFL,       /* double_blocks.N.img_attn.qkv.weight ... */
} rlx_flux2_names;

typedef struct rlx_flux2_dit_config {
    char name[32]; /* "klein-4b", "klein-9b", "dev", or "custom" (other block counts) */
    int hidden, heads, head_dim;
    int n_double, n_single;
    int in_channels; /* 128 */
    int joint_dim;   /* the text embedding width */
    int mlp_hidden;  /* 3 x hidden in every published config; read from the MLP */
    int timestep_channels;
    bool guidance_embeds;
    /* 1 / 0 from model_index.json's "is_distilled"; -1 unknown (single files:
     * distilled and base klein have the same tensors). The klein pipeline
     * does classifier-free guidance only when guidance_scale > 1 and the
     * model is not distilled (and has no guidance embedder). */
    int distilled;
    int axes_dims_rope[4];
    float rope_theta, eps;
    rlx_flux2_names names;
    rlx_dtype weight_dtype; /* of the big matrices (x_embedder's) */
    uint64_t weight_bytes;  /* of every tensor the graph reads */
} rlx_flux2_dit_config;

typedef struct rlx_flux2_dit_input {
    const float *latents; /* packed [128][lh][lw] (CHW) */
    int lh, lw;
    const float *text; /* [n_text][joint_dim] */
    int n_text;
    float t;        /* sigma in [0, 1], as the pipeline passes it (timestep / 1000) */
    float guidance; /* used only when guidance_embeds */
    int n_refs;     /* reference images (editing), 0..RLX_FLUX2_DIT_MAX_REFS */
    const float *const *ref_latents; /* n_refs x packed [128][ref_lh[i]][ref_lw[i]] */
    const int *ref_lh;
    const int *ref_lw;
} rlx_flux2_dit_input;

RLX_API rlx_flux2_dit_params rlx_flux2_dit_default_params(void);

/* path: a diffusers root folder (model_index.json, transformer/), the
 * transformer/ folder itself, a single BFL- or diffusers-named .safetensors,
 * or a .gguf. *out is set to NULL first. Errors: RLX_ERR_IO (nothing
 * readable there), RLX_ERR_FORMAT (a tensor missing or of another shape, not
 * a FLUX.2 transformer, config.json disagreeing with the tensors),
 * RLX_ERR_UNSUPPORTED (a dtype the graph cannot read, e.g. FP8; a LoRA for
 * another model or of a kind not applied), and the session's errors
 * (device, budget). */
RLX_API rlx_status rlx_flux2_dit_open(const char *path, const rlx_flux2_dit_params *p,
                                      rlx_flux2_dit **out, rlx_error **err);
RLX_API void rlx_flux2_dit_free(rlx_flux2_dit *d);

RLX_API const rlx_flux2_dit_config *rlx_flux2_dit_get_config(const rlx_flux2_dit *d);
RLX_API struct rlx_session *rlx_flux2_dit_session(rlx_flux2_dit *d);

/* One transformer evaluation: velocity [128][lh][lw] for the target image
 * (reference tokens are dropped, as the pipeline does). Errors:
 * RLX_ERR_INVALID_ARG (a missing pointer, sizes out of range, text of no
 * tokens), RLX_ERR_CANCELLED (rlx_flux2_dit_cancel), the session's errors. */
RLX_API rlx_status rlx_flux2_dit_velocity(rlx_flux2_dit *d, const rlx_flux2_dit_input *in,
                                          float *velocity, rlx_error **err);

/* Set (true) or clear (false) the cancel flag: a running velocity call stops
 * between instructions with RLX_ERR_CANCELLED, as do later calls until it is
 * cleared. Any thread. */
RLX_API void rlx_flux2_dit_cancel(rlx_flux2_dit *d, bool cancel);

#ifdef __cplusplus
}
#endif
#endif
