/* Shared between flux2-dit.c (files, runner) and flux2-dit-graph.c (the
 * graph): tensor names by role and the weight lookup. Not installed.
 * Thread safety: the functions only read the runner they are given. */
#ifndef RLX_MODELS_DIFFUSION_FLUX2_DIT_INTERNAL_H
#define RLX_MODELS_DIFFUSION_FLUX2_DIT_INTERNAL_H

#include <stddef.h>

#include "engine/ir/graph.h"
#include "models/diffusion/flux2-dit.h"

struct rlx_safetensors;
struct rlx_gguf;

/* Every tensor the graph reads, by role; names per rlx_flux2_names. */
typedef enum f2_role {
    F2_IMG_IN,
    F2_TXT_IN,
    F2_TIME_1,
    F2_TIME_2,
    F2_GUID_1,
    F2_GUID_2,
    F2_MOD_IMG,
    F2_MOD_TXT,
    F2_MOD_SINGLE,
    F2_FINAL_MOD,
    F2_FINAL,
    /* double-stream block N */
    F2_D_IMG_Q, /* diffusers only (BFL: F2_D_IMG_QKV) */
    F2_D_IMG_K,
    F2_D_IMG_V,
    F2_D_IMG_QKV, /* BFL only */
    F2_D_TXT_Q,
    F2_D_TXT_K,
    F2_D_TXT_V,
    F2_D_TXT_QKV,
    F2_D_IMG_OUT,
    F2_D_TXT_OUT,
    F2_D_IMG_NQ,
    F2_D_IMG_NK,
    F2_D_TXT_NQ,
    F2_D_TXT_NK,
    F2_D_IMG_MLP_IN,
    F2_D_IMG_MLP_OUT,
    F2_D_TXT_MLP_IN,
    F2_D_TXT_MLP_OUT,
    /* single-stream block N */
    F2_S_IN,
    F2_S_OUT,
    F2_S_NQ,
    F2_S_NK,
    F2_ROLE_COUNT
} f2_role;

/* One LoRA module on one weight: delta = scale * (x A^T) B^T, A [rank, in],
 * B [out, rank], named in the session with the file's "loraK." prefix. The
 * module may be named in the other scheme than the model (a BFL-named LoRA
 * on a diffusers model, or the reverse): the graph then slices the fused
 * q/k/v delta, adds a separate q, k or v delta to a slice of the fused
 * output, and swaps the final modulation's halves (see flux2-lora.c). */
typedef struct f2_lora {
    f2_role role;
    int blk;
    rlx_flux2_names scheme; /* the names of the LoRA file */
    char a[224], b[224];
    rlx_dtype a_dtype, b_dtype;
    int64_t rank, in, out;
    float scale; /* strength x alpha / rank */
} f2_lora;

typedef struct f2_tensor {
    rlx_dtype dtype;
    int rank;
    int64_t dims[2]; /* row-major */
    uint64_t bytes;
    /* what the stored values are multiplied by: the per-tensor scale an FP8
     * checkpoint keeps beside the matrix ("<name>_scale", ComfyUI's and
     * BFL's; "<base>.scale_weight", ComfyUI's older scaled FP8), else 1 */
    float scale;
    /* the scale tensor is there but not one float: why, for the error */
    char scale_bad[96];
} f2_tensor;

struct rlx_flux2_dit {
    struct rlx_session *s;
    struct rlx_safetensors *st;
    struct rlx_gguf *gg;
    char prefix[32]; /* "" or "model.diffusion_model." ... */
    char path[1024];
    rlx_flux2_dit_config cfg;
    struct {
        int n_txt, n_img, n_all;
        struct rlx_session_program *prog;
    } cache[4];
    int cache_next;
    struct rlx_safetensors *lora_files[RLX_FLUX2_DIT_MAX_LORAS];
    int n_lora_files;
    f2_lora *lora;
    int n_lora;
};

/* The file's name of `role` in block `blk` (ignored for global roles),
 * without the prefix. */
void f2_role_name(rlx_flux2_names names, f2_role role, int blk, char *buf, size_t cap);
/* Look a tensor up by role (the prefix added); false when absent. */
bool f2_find(const rlx_flux2_dit *d, f2_role role, int blk, f2_tensor *out);

/* Open the LoRA files, match every tensor to a weight of this model (either
 * naming scheme, with the prefixes and suffixes of the diffusers/PEFT, BFL
 * and kohya files), check the shapes and add them to the session. Any
 * tensor that matches nothing is an error: a LoRA for another model, or of
 * a kind (DoRA, LoHa, LoKr, text encoder) we do not apply. */
rlx_status f2_lora_load(rlx_flux2_dit *d, const rlx_flux2_dit_lora *l, int n, rlx_error **err);
void f2_lora_close(rlx_flux2_dit *d);

/* The graph for n_txt text tokens, n_all image tokens of which the first
 * n_img are the target's. Inputs "img" [n_all, 128], "txt" [n_txt, joint],
 * "tproj" [1, 256] (and "gproj" [1, 256] with guidance), "rope_cos" and
 * "rope_sin" [n_txt + n_all, 1, head_dim]; output "velocity" [n_img, 128]. */
rlx_status f2_build_graph(const rlx_flux2_dit *d, int n_txt, int n_img, int n_all, rlx_graph **out,
                          rlx_error **err);

#endif
