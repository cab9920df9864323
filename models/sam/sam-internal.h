/* SAM internals shared by the runner (sam.c) and the graph builders (sam-graph.c,
 * sam-tinyvit.c). */
#ifndef RLX_MODELS_SAM_SAM_INTERNAL_H
#define RLX_MODELS_SAM_SAM_INTERNAL_H

#include "engine/ir/graph.h"
#include "models/sam/sam.h"

#define SAM_MAX_DEPTH     64
#define SAM_PATCH         16
#define SAM_DEC_HEADS     8
#define SAM_DEC_MLP       2048
#define SAM_DEC_DEPTH     2
#define SAM_NAME_MAX      112
#define SAM_MAX_HEADS     64
#define SAM_CHUNK_DEFAULT (256ull << 20)
/* SAM 2.1's predictor: dynamic_multimask_stability_delta / _thresh (build_sam.py) */
#define SAM2_STABILITY_DELTA  0.05f
#define SAM2_STABILITY_THRESH 0.98

/* One tensor of the architecture: the official name (the session's binding
 * name), its Hugging Face name, the expected shape and the file's dtype. */
typedef struct sam_weight {
    char name[SAM_NAME_MAX];
    char hf[SAM_NAME_MAX];
    int rank;
    int64_t dims[RLX_SAM_MAX_DIMS];
    rlx_dtype dtype;
} sam_weight;

typedef struct sam_hparams {
    int dim, depth, heads, head_dim;
    int window[SAM_MAX_DEPTH]; /* 0: global attention over the 64 x 64 grid */
} sam_hparams;

/* One Hiera block of SAM 2's image encoder (models/sam/sam2.c). */
typedef struct sam2_block {
    int dim, dim_out, heads;
    int window; /* 0: global attention */
    bool pool;  /* q-pooling 2 x 2 (a stage change) */
} sam2_block;

typedef struct sam2_hparams {
    const char *variant; /* "sam2.1_hiera_tiny", ... */
    int embed, depth, n_stages;
    int stage_end[4]; /* the last block of each stage */
    int bkg;          /* the background position embedding's side */
    int win0;         /* the window position embedding's side */
    sam2_block blk[SAM_MAX_DEPTH];
} sam2_hparams;

typedef enum sam_kind { SAM_KIND_V1 = 0, SAM_KIND_SAM2 } sam_kind;

/* MobileSAM's TinyViT image encoder: four stages (MBConv blocks, then three of
 * window-attention blocks), each but the last ending in a PatchMerging. */
#define SAM_TV_STAGES    4
#define SAM_TV_MAX_DEPTH 32
#define SAM_TV_MAX_DIM   4096
#define SAM_TV_MAX_WIN   32
#define SAM_TV_SIDE      256 /* the grid after patch_embed: 1024 / 4 */

typedef struct sam_tinyvit {
    int dims[SAM_TV_STAGES], depths[SAM_TV_STAGES];
    int heads[SAM_TV_STAGES], windows[SAM_TV_STAGES]; /* stage 0: unused (convolutions) */
} sam_tinyvit;

typedef enum sam_encoder_kind {
    SAM_ENCODER_VIT,     /* segment_anything's ImageEncoderViT */
    SAM_ENCODER_TINYVIT, /* MobileSAM */
} sam_encoder_kind;

typedef struct sam_model {
    sam_kind kind;        /* SAM v1 (ViT or TinyViT encoder) or SAM 2 */
    sam_encoder_kind enc; /* SAM v1's image encoder */
    sam_hparams hp;       /* SAM v1, SAM_ENCODER_VIT */
    sam_tinyvit tv;       /* SAM v1, SAM_ENCODER_TINYVIT */
    sam2_hparams h2;      /* SAM 2 */
    uint64_t chunk_bytes; /* the most bytes one attention's rel-pos bias may take */
    sam_weight *w;
    int n_w;
} sam_model;

/* What the graph builders (sam-graph.c, sam-tinyvit.c, sam2-graph.c) share:
 * the graph, the model, and the first weight a builder asked for that the
 * model does not list (the build then fails, naming it). */
typedef struct sam_builder {
    struct rlx_graph *g;
    const struct sam_model *m;
    char missing[192];
} sam_builder;

/* A weight by its name (printf-style) as F32: a PARAM, cast on the device
 * when the file holds F16 or BF16; RLX_NODE_INVALID, and b->missing set,
 * when the model does not list it. */
rlx_node sam_param(sam_builder *b, const char *fmt, ...) RLX_PRINTF(2, 3);
rlx_node sam_reshape(sam_builder *b, rlx_node x, int rank, const int64_t *d);
rlx_node sam_permute(sam_builder *b, rlx_node x, const int *perm);
/* The 64 x 64 grid's random-Fourier encoding, [4096, 256]: the cells'
 * centres mapped to [-1, 1], times the prompt encoder's gaussian matrix (the
 * weight so named), 2 pi, as [sin | cos]. */
rlx_node sam_dense_pe(sam_builder *b, const char *gaussian);
/* The prompt encoder's mask_downscaling on a 256 x 256 logit map (input "mask",
 * [256, 256]): Conv 2x2/2 (1 -> 4), LayerNorm2d, GELU, Conv 2x2/2 (4 -> 16),
 * LayerNorm2d, GELU, Conv 1x1 (16 -> 256), token-major [4096, 256]: the dense
 * prompt embedding that replaces no_mask_embed. `pe` names the prompt encoder
 * ("prompt_encoder", SAM 2's "sam_prompt_encoder"). */
rlx_node sam_mask_dense(sam_builder *b, rlx_node mask, const char *pe);
/* The built graph into *out, or the failure: the first weight not listed,
 * else the graph's own error, each after "building the <what>: ". The graph
 * is freed on failure. */
rlx_status sam_build_finish(sam_builder *b, struct rlx_graph **out, const char *what,
                            rlx_error **err);

/* The state names the encoder writes and the decoder reads. */
#define SAM_STATE_EMBEDDING "sam.embedding" /* [4096, 256], token-major (y * 64 + x) */
#define SAM_STATE_IMAGE_PE  "sam.image_pe"  /* [4096, 256] */

/* SAM 2 keeps the high-resolution features (conv_s0 / conv_s1 applied), token-major. */
#define SAM2_STATE_FEAT_S0 "sam2.feat_s0" /* [256 * 256, 32] */
#define SAM2_STATE_FEAT_S1 "sam2.feat_s1" /* [128 * 128, 64] */

/* Building m->w: one weight more (its name printf-style, its dims); with
 * hf_names its Hugging Face name is derived too, else it is the same. On a
 * failed allocation oom is set and that weight is left out. */
typedef struct sam_lister {
    struct sam_model *m;
    int cap;
    bool oom;
    bool hf_names;
} sam_lister;
void sam_list_add(sam_lister *L, int rank, const int64_t *dims, const char *fmt, ...)
    RLX_PRINTF(4, 5);
/* The mask_downscaling weights of the prompt encoder `pe` (mask_in_chans 16). */
void sam_list_mask_downscaling(sam_lister *L, const char *pe);

/* Fill m->w for m->hp (every tensor the graphs use); dtypes are set later. */
rlx_status sam_list_weights(sam_model *m, rlx_error **err);
const sam_weight *sam_find_weight(const sam_model *m, const char *name);

/* TinyViT's attention-bias index for a ws x ws window, as the reference builds it:
 * offsets (|dy|, |dx|) numbered in order of first appearance over all (query, key)
 * pairs in row-major order. Fills idx [ws^4] when not NULL; returns the offsets'
 * count (the columns of attention_biases). */
int sam_tinyvit_bias_index(int ws, int32_t *idx);
/* The depthwise stride of TinyViT's PatchMerging into out_dim (MobileSAM keeps the
 * 64 x 64 grid for its last stages: stride 1 into 320, 448 or 576 channels). */
int sam_tinyvit_merge_stride(int out_dim);

/* Encoder: input "image" [1, 3, 1024, 1024] F32; writes both states; output
 * "probe" (one value, a program needs an output). */
rlx_status sam_build_encoder(const sam_model *m, struct rlx_graph **out, rlx_error **err);
/* The TinyViT one (called by sam_build_encoder for SAM_ENCODER_TINYVIT). */
rlx_status sam_build_tinyvit_encoder(const sam_model *m, struct rlx_graph **out, rlx_error **err);
/* The encoders' common end: the neck on x [4096, dim] tokens, both states and the
 * probe output; checks and hands over g (freed on failure). `missing` is the
 * builder's first problem so far ("" when none). */
rlx_status sam_finish_encoder(const sam_model *m, struct rlx_graph *g, rlx_node x, int64_t dim,
                              const char *missing, struct rlx_graph **out, rlx_error **err);
/* Decoder for n_tokens prompt tokens: inputs "coords" F32 [n, 2] (1024 frame) and
 * "kinds" I32 [n] (label + 1: 0 padding, 1 negative, 2 positive, 3 / 4 box corners),
 * with_mask: "mask" F32 [256, 256] (sam_mask_dense);
 * outputs "masks" [4, 256, 256] and "iou" [1, 4]. */
rlx_status sam_build_decoder(const sam_model *m, int n_tokens, bool with_mask,
                             struct rlx_graph **out, rlx_error **err);

/* ---- SAM 2 (models/sam/sam2.c, sam2-graph.c) ---- */

/* The Hiera variant of a published SAM 2 / 2.1 config ("sam2.1_hiera_tiny", "_small",
 * "_base_plus", "_large"); false when unknown. */
bool sam2_set_variant(sam2_hparams *h, const char *name);
/* The variant from the shapes a lookup hands out (embed dim, the blocks' widths). */
rlx_status sam2_read_hparams(rlx_sam_lookup_fn lookup, void *user, bool hf, const char *what,
                             sam2_hparams *h, rlx_error **err);
/* The name transformers' Sam2Model gives an official SAM 2 name, as its
 * convert_sam2_to_hf.py renames them (the rules in its order, then the renumbered
 * MLP layers and the neck's convs). The four point_embeddings.<i> are one stacked
 * tensor there: see sam2_hf_point_embed. */
void sam2_hf_name(const char *official, char *out, size_t cap);
/* Row `row` of Sam2Model's "prompt_encoder.point_embed.weight" [4, 256] as the
 * official [1, 256] point_embeddings.<row>.weight (a view into the same bytes);
 * false when the source lacks it. A stacked tensor of another shape is handed
 * out whole, so that the loader names it with its shape. */
bool sam2_hf_point_embed(rlx_sam_lookup_fn lookup, void *user, int row, rlx_sam_tensor *t);
/* Every occurrence of `from` in s replaced by `to` (s holds cap bytes). */
void sam_replace_all(char *s, size_t cap, const char *from, const char *to);
rlx_status sam2_list_weights(sam_model *m, rlx_error **err);
/* Encoder: input "image" [1, 3, 1024, 1024]; writes the embedding (no_mem_embed
 * added), the dense PE and both high-resolution feature states; output "probe". */
rlx_status sam2_build_encoder(const sam_model *m, struct rlx_graph **out, rlx_error **err);
/* Decoder for n_tokens prompt tokens (inputs as sam_build_decoder's); outputs
 * "masks" [4, 256, 256], "iou" [1, 4] (after the sigmoid) and "object" [1, 1]. */
rlx_status sam2_build_decoder(const sam_model *m, int n_tokens, bool with_mask,
                              struct rlx_graph **out, rlx_error **err);

#endif
