/* safetensors reader: single files and sharded checkpoints.
 *
 * Usage:
 *     rlx_safetensors *st = NULL;
 *     // a .safetensors file, a model.safetensors.index.json, or a directory
 *     // holding either
 *     if (rlx_safetensors_open(path, &st, &err) != RLX_OK) ...
 *     const rlx_st_tensor *t = rlx_safetensors_find(st, "decoder.1.weight");
 *     const void *p = rlx_safetensors_data(st, t);   // into the mmap
 *     rlx_safetensors_close(st);
 *
 * Files are mapped read-only; data pointers stay valid until close. The JSON
 * header is parsed with json-c; every offset is checked against the file, and
 * tensors may not overlap or run past the data section.
 *
 * Thread safety: an open rlx_safetensors is immutable and may be read from
 * any number of threads.
 */
#ifndef RLX_ENGINE_FORMATS_SAFETENSORS_H
#define RLX_ENGINE_FORMATS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_ST_MAX_DIMS 8
/* Headers (and index files) larger than this are refused as hostile. */
#define RLX_ST_MAX_HEADER_BYTES (100 * 1024 * 1024)

typedef struct rlx_st_tensor {
    char *name;
    rlx_dtype dtype;
    uint32_t n_dims;
    uint64_t shape[RLX_ST_MAX_DIMS]; /* row-major (PyTorch) order: shape[n_dims-1] is fastest */
    uint64_t n_elements;
    uint64_t n_bytes;
    uint32_t shard;  /* index of the file holding it */
    uint64_t offset; /* from the start of that file's data section */
} rlx_st_tensor;

typedef struct rlx_safetensors rlx_safetensors;

/* `path` is a .safetensors file; a file ending in ".json" (an HF index whose
 * "weight_map" names shard files in the same folder, each opened once); or a
 * folder holding model.safetensors (preferred) or model.safetensors.index.json.
 * *out is set to NULL first and owned by the caller (rlx_safetensors_close).
 * Errors: RLX_ERR_IO when a file cannot be opened or mapped; RLX_ERR_FORMAT for
 * a malformed or inconsistent header or index (the message names the file,
 * the tensor and the field); RLX_ERR_UNSUPPORTED for a dtype outside
 * F64/F32/F16/BF16/F8_E4M3/F8_E5M2/I64/I32/I16/I8/U8/BOOL or more than
 * RLX_ST_MAX_DIMS dims. Tensors keep header order, shard by shard. */
RLX_API rlx_status rlx_safetensors_open(const char *path, rlx_safetensors **out, rlx_error **err);
/* Parse one in-memory image (not copied; must outlive the result). `name`
 * (may be NULL) is what error messages and rlx_safetensors_shard_path call it. */
RLX_API rlx_status rlx_safetensors_open_memory(const void *data, size_t size, const char *name,
                                               rlx_safetensors **out, rlx_error **err);
RLX_API void rlx_safetensors_close(rlx_safetensors *st);

RLX_API uint32_t rlx_safetensors_n_shards(const rlx_safetensors *st);
RLX_API const char *rlx_safetensors_shard_path(const rlx_safetensors *st, uint32_t i);
RLX_API uint64_t rlx_safetensors_n_tensors(const rlx_safetensors *st);
RLX_API const rlx_st_tensor *rlx_safetensors_tensor_at(const rlx_safetensors *st, uint64_t i);
RLX_API const rlx_st_tensor *rlx_safetensors_find(const rlx_safetensors *st, const char *name);
RLX_API const void *rlx_safetensors_data(const rlx_safetensors *st, const rlx_st_tensor *t);

/* `__metadata__` entries (string -> string), merged over all shards; where
 * shards disagree on a key, the first shard's value is kept. Strings belong
 * to `st`. */
RLX_API uint64_t rlx_safetensors_n_metadata(const rlx_safetensors *st);
RLX_API void rlx_safetensors_metadata_at(const rlx_safetensors *st, uint64_t i, const char **key,
                                         const char **value);
/* NULL when absent. */
RLX_API const char *rlx_safetensors_metadata(const rlx_safetensors *st, const char *key);

#ifdef __cplusplus
}
#endif
#endif
