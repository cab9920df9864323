/* SAM internals shared by the runner (sam.c) and the graph builders (sam-graph.c). */
#ifndef RLX_MODELS_SAM_SAM_INTERNAL_H
#define RLX_MODELS_SAM_SAM_INTERNAL_H

#include "models/sam/sam.h"

struct rlx_graph;

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

typedef struct sam_model {
    sam_hparams hp;
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

/* Encoder: input "image" [1, 3, 1024, 1024] F32; writes both states; output
 * "probe" (one value, a program needs an output). */
rlx_status sam_build_encoder(const sam_model *m, struct rlx_graph **out, rlx_error **err);
/* Decoder for n_tokens prompt tokens: inputs "coords" F32 [n, 2] (1024 frame) and
 * "kinds" I32 [n] (label + 1: 0 padding, 1 negative, 2 positive, 3 / 4 box corners);
 * outputs "masks" [4, 256, 256] and "iou" [1, 4]. */
rlx_status sam_build_decoder(const sam_model *m, int n_tokens, struct rlx_graph **out,
                             rlx_error **err);

#endif
