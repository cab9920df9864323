/* PyTorch checkpoint reader: the zip files torch.save writes (since torch 1.6).
 *
 * Usage:
 *     rlx_torch_zip *tz = NULL;
 *     if (rlx_torch_zip_open("sam_vit_b_01ec64.pth", &tz, &err) != RLX_OK) ...
 *     const rlx_torch_tensor *t = rlx_torch_zip_find(tz, "image_encoder.pos_embed");
 *     const void *p = rlx_torch_zip_data(tz, t);   // into the mmap; NULL if strided
 *     rlx_torch_zip_close(tz);
 *
 * A checkpoint is a zip archive of STORED entries under one folder (its name
 * varies: "archive/", "sam_vit_b_01ec64/", ...): "data.pkl" is a pickle of the
 * saved object and "data/<key>" holds the raw bytes of each storage. The
 * pickle is read by a small restricted virtual machine that EXECUTES NOTHING:
 * it knows a fixed allow-list of globals (collections.OrderedDict, the torch
 * tensor and parameter rebuild functions, the torch.*Storage types) and
 * refuses any other with a sentence that names it. Every zip offset and
 * length, every storage extent and every pickle length is checked against
 * the file; stack, memo, nesting depth and tensor count are bounded.
 *
 * Names: the saved object must be a dict (or OrderedDict). When it holds a
 * dict under "model" or "state_dict" (SAM 2's {"model": state_dict},
 * Lightning's {"state_dict": ...}), only that dict is read and the prefix is
 * not part of the names: names are then what model.state_dict() calls them.
 * Nested dicts, lists and tuples are flattened with '.'-joined names
 * ("blocks.0.attn.qkv.weight"; list items by index). Values that are not
 * tensors (numbers, strings, None) are skipped.
 *
 * Tensors keep pickle order. Only little-endian checkpoints are read. Data
 * pointers stay valid until close; torch aligns each storage to 64 bytes in
 * the file, and the file is mapped at a page boundary, so a tensor whose
 * storage offset is a multiple of its element size is naturally aligned.
 *
 * Thread safety: an open rlx_torch_zip is immutable and may be read from any
 * number of threads.
 */
#ifndef RLX_ENGINE_FORMATS_TORCH_ZIP_H
#define RLX_ENGINE_FORMATS_TORCH_ZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_TORCH_MAX_DIMS 8
/* Limits against hostile files; a real checkpoint is far inside each. */
#define RLX_TORCH_MAX_TENSORS (1u << 20)
#define RLX_TORCH_MAX_ENTRIES (1u << 22) /* zip entries */
#define RLX_TORCH_MAX_PICKLE  (1u << 28) /* bytes of data.pkl */
#define RLX_TORCH_MAX_OBJECTS (1u << 22) /* pickle values made (a tensor takes ~20) */
#define RLX_TORCH_MAX_STACK   (1u << 22) /* pickle stack items */
#define RLX_TORCH_MAX_MARKS   4096       /* nested MARKs */
#define RLX_TORCH_MAX_DEPTH   64         /* nesting of dicts/lists when naming */
#define RLX_TORCH_MAX_NAME    4096       /* bytes of a '.'-joined tensor name */

typedef struct rlx_torch_tensor {
    char *name;
    rlx_dtype dtype;
    uint32_t n_dims;
    uint64_t shape[RLX_TORCH_MAX_DIMS];  /* row-major (PyTorch) order */
    uint64_t stride[RLX_TORCH_MAX_DIMS]; /* in elements, as torch records them */
    uint64_t n_elements;
    /* n_elements * element size; for a strided tensor, still that (the
     * bytes a contiguous copy would need). */
    uint64_t n_bytes;
    /* Row-major and dense (dims of size 1 may carry any stride, as in
     * torch's is_contiguous). Only these get a data pointer. */
    bool contiguous;
    bool requires_grad; /* saved as a Parameter with requires_grad */
    /* Where element 0 is, from the start of the file (or memory image). */
    uint64_t file_offset;
    /* The storage it views: the zip entry "<prefix>data/<key>" and the
     * offset (in elements) torch recorded into it. */
    const char *storage_key;
    uint64_t storage_offset;
} rlx_torch_tensor;

typedef struct rlx_torch_zip rlx_torch_zip;

/* *out is set to NULL first and owned by the caller (rlx_torch_zip_close).
 * Errors: RLX_ERR_IO when the file cannot be opened or mapped; RLX_ERR_FORMAT
 * for a malformed, truncated or inconsistent zip or pickle, a storage extent
 * past its entry, or any limit above exceeded; RLX_ERR_UNSUPPORTED for a
 * compressed or encrypted entry, a big-endian checkpoint, a global outside
 * the allow-list (never run), a storage type rlx has no dtype for, more than
 * RLX_TORCH_MAX_DIMS dims, or the legacy (pre-1.6, not zip) torch format. */
RLX_API rlx_status rlx_torch_zip_open(const char *path, rlx_torch_zip **out, rlx_error **err);
/* Parse one in-memory image (not copied; must outlive the result). `name`
 * (may be NULL) is what error messages call it. */
RLX_API rlx_status rlx_torch_zip_open_memory(const void *data, size_t size, const char *name,
                                             rlx_torch_zip **out, rlx_error **err);
RLX_API void rlx_torch_zip_close(rlx_torch_zip *tz);

/* True when the first bytes (at least 4) look like a zip: "PK\3\4". */
RLX_API bool rlx_torch_zip_sniff(const void *head, size_t n);

RLX_API uint64_t rlx_torch_zip_n_tensors(const rlx_torch_zip *tz);
RLX_API const rlx_torch_tensor *rlx_torch_zip_tensor_at(const rlx_torch_zip *tz, uint64_t i);
RLX_API const rlx_torch_tensor *rlx_torch_zip_find(const rlx_torch_zip *tz, const char *name);
/* Element 0 of a contiguous tensor, n_bytes long, in the mapping; NULL for
 * a strided one (t->contiguous false) or a bad argument. */
RLX_API const void *rlx_torch_zip_data(const rlx_torch_zip *tz, const rlx_torch_tensor *t);

/* The archive's folder ("archive/", "sam_vit_b_01ec64/"; "" when entries
 * have none) and the key the tensors were read under ("model",
 * "state_dict", or "" for the top-level dict). Strings belong to `tz`. */
RLX_API const char *rlx_torch_zip_prefix(const rlx_torch_zip *tz);
RLX_API const char *rlx_torch_zip_root(const rlx_torch_zip *tz);

#ifdef __cplusplus
}
#endif
#endif
