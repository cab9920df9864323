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
    sam_encoder_kind enc;
    sam_hparams hp;       /* SAM_ENCODER_VIT */
    sam_tinyvit tv;       /* SAM_ENCODER_TINYVIT */
    uint64_t chunk_bytes; /* the most bytes one attention's rel-pos bias may take */
    sam_weight *w;
    int n_w;
} sam_model;

/* The state names the encoder writes and the decoder reads. */
#define SAM_STATE_EMBEDDING "sam.embedding" /* [4096, 256], token-major (y * 64 + x) */
#define SAM_STATE_IMAGE_PE  "sam.image_pe"  /* [4096, 256] */

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
 * "kinds" I32 [n] (label + 1: 0 padding, 1 negative, 2 positive, 3 / 4 box corners);
 * outputs "masks" [4, 256, 256] and "iou" [1, 4]. */
rlx_status sam_build_decoder(const sam_model *m, int n_tokens, struct rlx_graph **out,
                             rlx_error **err);

#endif
