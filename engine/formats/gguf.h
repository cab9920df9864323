/* GGUF reader (versions 2 and 3) and writer.
 *
 * Usage:
 *     rlx_gguf *g = NULL;
 *     rlx_error *err = NULL;
 *     if (rlx_gguf_open("model.gguf", &g, &err) != RLX_OK) { ...report err... }
 *     uint32_t n_layer;
 *     if (rlx_gguf_get_u32(g, "llama.block_count", &n_layer, &err) != RLX_OK) ...
 *     const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, "token_embd.weight");
 *     const void *bytes = rlx_gguf_tensor_data(g, t);   // points into the mmap
 *     rlx_gguf_close(g);
 *
 * The file is mapped read-only; tensor data pointers stay valid until
 * rlx_gguf_close(). Every offset, length and count in the file is validated
 * against the file size before it is used, so a truncated or hostile file
 * yields RLX_ERR_FORMAT with a sentence naming the file, the field and the
 * problem, never an out-of-bounds read.
 *
 * Thread safety: an open rlx_gguf is immutable; any number of threads may
 * read it concurrently. A writer belongs to one thread.
 */
#ifndef RLX_ENGINE_FORMATS_GGUF_H
#define RLX_ENGINE_FORMATS_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_GGUF_MAX_DIMS          4
#define RLX_GGUF_DEFAULT_ALIGNMENT 32
/* A key's array is depth 1; arrays nested deeper than this are rejected. */
#define RLX_GGUF_MAX_ARRAY_DEPTH 8

/* GGUF metadata value types, numbered as in the file format. */
typedef enum rlx_gguf_type {
    RLX_GGUF_TYPE_UINT8 = 0,
    RLX_GGUF_TYPE_INT8 = 1,
    RLX_GGUF_TYPE_UINT16 = 2,
    RLX_GGUF_TYPE_INT16 = 3,
    RLX_GGUF_TYPE_UINT32 = 4,
    RLX_GGUF_TYPE_INT32 = 5,
    RLX_GGUF_TYPE_FLOAT32 = 6,
    RLX_GGUF_TYPE_BOOL = 7,
    RLX_GGUF_TYPE_STRING = 8,
    RLX_GGUF_TYPE_ARRAY = 9,
    RLX_GGUF_TYPE_UINT64 = 10,
    RLX_GGUF_TYPE_INT64 = 11,
    RLX_GGUF_TYPE_FLOAT64 = 12,
    RLX_GGUF_TYPE_COUNT
} rlx_gguf_type;

/* A string inside the mapped file: NOT NUL-terminated. */
typedef struct rlx_gguf_str {
    const char *ptr;
    uint64_t len;
} rlx_gguf_str;

/* One metadata value. Scalars are decoded; arrays point into the file. */
typedef struct rlx_gguf_value {
    rlx_gguf_type type;
    union {
        uint64_t u64; /* UINT8/16/32/64 and BOOL widen here */
        int64_t i64;  /* INT8/16/32/64 widen here */
        double f64;   /* FLOAT32/64 widen here */
        rlx_gguf_str str;
        struct {
            rlx_gguf_type elem_type;
            uint64_t count;
            /* Where the array's elements start in the file; for STRING and
             * nested ARRAY elements, use rlx_gguf_array_get(). */
            const uint8_t *data;
            uint64_t data_len;
        } arr;
    } v;
} rlx_gguf_value;

typedef struct rlx_gguf_kv {
    rlx_gguf_str key;
    rlx_gguf_value value;
} rlx_gguf_kv;

typedef struct rlx_gguf_tensor {
    char *name; /* NUL-terminated copy */
    uint32_t n_dims;
    uint64_t ne[RLX_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the fastest-varying dim; unused = 1 */
    uint32_t ggml_type;             /* the raw id from the file */
    rlx_dtype dtype;
    uint64_t offset; /* relative to the data section */
    uint64_t n_elements;
    uint64_t n_bytes;
} rlx_gguf_tensor;

typedef struct rlx_gguf rlx_gguf;

/* Open and validate a GGUF file. On failure *out is NULL. */
RLX_API rlx_status rlx_gguf_open(const char *path, rlx_gguf **out, rlx_error **err);
/* Parse a GGUF image already in memory (not copied; must outlive the result).
 * `name` is used in error messages. */
RLX_API rlx_status rlx_gguf_open_memory(const void *data, size_t size, const char *name,
                                        rlx_gguf **out, rlx_error **err);
RLX_API void rlx_gguf_close(rlx_gguf *g);

RLX_API const char *rlx_gguf_path(const rlx_gguf *g);
RLX_API uint32_t rlx_gguf_version(const rlx_gguf *g);
RLX_API uint64_t rlx_gguf_alignment(const rlx_gguf *g);
RLX_API uint64_t rlx_gguf_file_size(const rlx_gguf *g);
/* Offset of the tensor data section from the start of the file. */
RLX_API uint64_t rlx_gguf_data_offset(const rlx_gguf *g);

RLX_API uint64_t rlx_gguf_n_kv(const rlx_gguf *g);
RLX_API const rlx_gguf_kv *rlx_gguf_kv_at(const rlx_gguf *g, uint64_t i);
/* NULL when absent. */
RLX_API const rlx_gguf_value *rlx_gguf_find(const rlx_gguf *g, const char *key);

/* Typed getters: RLX_ERR_NOT_FOUND when the key is missing, RLX_ERR_TYPE when
 * it has another type (integer getters accept any integer type whose value
 * fits). Messages name the file and the key. */
RLX_API rlx_status rlx_gguf_get_u32(const rlx_gguf *g, const char *key, uint32_t *out,
                                    rlx_error **err);
RLX_API rlx_status rlx_gguf_get_u64(const rlx_gguf *g, const char *key, uint64_t *out,
                                    rlx_error **err);
RLX_API rlx_status rlx_gguf_get_i64(const rlx_gguf *g, const char *key, int64_t *out,
                                    rlx_error **err);
RLX_API rlx_status rlx_gguf_get_f32(const rlx_gguf *g, const char *key, float *out,
                                    rlx_error **err);
RLX_API rlx_status rlx_gguf_get_bool(const rlx_gguf *g, const char *key, bool *out,
                                     rlx_error **err);
/* Returns a string pointing into the file (not NUL-terminated). */
RLX_API rlx_status rlx_gguf_get_str(const rlx_gguf *g, const char *key, rlx_gguf_str *out,
                                    rlx_error **err);
/* Copies the string into buf (NUL-terminated, truncated to cap-1). */
RLX_API rlx_status rlx_gguf_get_string(const rlx_gguf *g, const char *key, char *buf, size_t cap,
                                       rlx_error **err);
/* elem_type RLX_GGUF_TYPE_COUNT accepts an array of any element type. */
RLX_API rlx_status rlx_gguf_get_arr(const rlx_gguf *g, const char *key, rlx_gguf_type elem_type,
                                    const rlx_gguf_value **out, rlx_error **err);

/* Element i of an array value, decoded (strings and nested arrays included).
 * Arrays of fixed-size elements are O(1). A key's own array of strings or of
 * arrays is indexed at open, so any element costs at most 15 skips; arrays
 * nested inside arrays are walked from their start (O(i)). Out-of-range i
 * is RLX_ERR_INVALID_ARG. */
RLX_API rlx_status rlx_gguf_array_get(const rlx_gguf *g, const rlx_gguf_value *arr, uint64_t i,
                                      rlx_gguf_value *out, rlx_error **err);

RLX_API uint64_t rlx_gguf_n_tensors(const rlx_gguf *g);
RLX_API const rlx_gguf_tensor *rlx_gguf_tensor_at(const rlx_gguf *g, uint64_t i);
RLX_API const rlx_gguf_tensor *rlx_gguf_find_tensor(const rlx_gguf *g, const char *name);
RLX_API const void *rlx_gguf_tensor_data(const rlx_gguf *g, const rlx_gguf_tensor *t);

RLX_API const char *rlx_gguf_type_name(rlx_gguf_type t);

/* ---- writer ------------------------------------------------------------ */

/* Builds a GGUF v3 file (keys and tensors kept in memory, or generated
 * while writing with add_tensor_gen), then writes it atomically.
 *
 *     rlx_gguf_writer *w = rlx_gguf_writer_create();
 *     rlx_gguf_writer_set_str(w, "general.architecture", "llama");
 *     rlx_gguf_writer_set_u32(w, "llama.block_count", 2);
 *     uint64_t ne[2] = {64, 512};
 *     rlx_gguf_writer_add_tensor(w, "token_embd.weight", RLX_DTYPE_F32, 2, ne, data, nbytes);
 *     rlx_gguf_writer_write(w, "out.gguf", &err);
 *     rlx_gguf_writer_free(w);
 *
 * Tensor data is copied at add time. Later sets of the same key replace it.
 * Setters and add_tensor return RLX_ERR_INVALID_ARG (or NO_MEMORY) on bad
 * input and remember the first failure: to_memory / write then fail with it,
 * so a chain of calls needs only the final status checked.
 * set_alignment (a nonzero power of two) stores general.alignment; setting
 * that key directly (uint32, power of two) does the same.
 */
typedef struct rlx_gguf_writer rlx_gguf_writer;

RLX_API rlx_gguf_writer *rlx_gguf_writer_create(void);
RLX_API void rlx_gguf_writer_free(rlx_gguf_writer *w);
RLX_API void rlx_gguf_writer_set_alignment(rlx_gguf_writer *w, uint32_t alignment);
RLX_API rlx_status rlx_gguf_writer_set_u32(rlx_gguf_writer *w, const char *key, uint32_t v);
RLX_API rlx_status rlx_gguf_writer_set_i32(rlx_gguf_writer *w, const char *key, int32_t v);
RLX_API rlx_status rlx_gguf_writer_set_u64(rlx_gguf_writer *w, const char *key, uint64_t v);
RLX_API rlx_status rlx_gguf_writer_set_f32(rlx_gguf_writer *w, const char *key, float v);
RLX_API rlx_status rlx_gguf_writer_set_bool(rlx_gguf_writer *w, const char *key, bool v);
RLX_API rlx_status rlx_gguf_writer_set_str(rlx_gguf_writer *w, const char *key, const char *v);
/* An array of scalars (elem_type not STRING/ARRAY); `data` holds count
 * elements in the file's little-endian encoding of elem_type. */
RLX_API rlx_status rlx_gguf_writer_set_arr(rlx_gguf_writer *w, const char *key,
                                           rlx_gguf_type elem_type, const void *data,
                                           uint64_t count);
RLX_API rlx_status rlx_gguf_writer_set_str_arr(rlx_gguf_writer *w, const char *key,
                                               const char *const *strs, uint64_t count);
RLX_API rlx_status rlx_gguf_writer_set_i64(rlx_gguf_writer *w, const char *key, int64_t v);
RLX_API rlx_status rlx_gguf_writer_set_f64(rlx_gguf_writer *w, const char *key, double v);
/* Any value, in the reader's representation: scalars of every type (the
 * widened field must fit v->type), strings (v.str, may hold any bytes), and
 * arrays given as their file encoding (v.arr.data / data_len, as a reader
 * hands them out), so nested arrays and arrays of strings copy verbatim. The
 * encoding is checked. Values from an open rlx_gguf are copied. */
RLX_API rlx_status rlx_gguf_writer_set_value(rlx_gguf_writer *w, const char *key,
                                             const rlx_gguf_value *v);
/* Copy every key/value of an open file (e.g. when re-quantizing). */
RLX_API rlx_status rlx_gguf_writer_copy_kv(rlx_gguf_writer *w, const rlx_gguf *src,
                                           rlx_error **err);
RLX_API rlx_status rlx_gguf_writer_add_tensor(rlx_gguf_writer *w, const char *name, rlx_dtype dtype,
                                              uint32_t n_dims, const uint64_t *ne, const void *data,
                                              uint64_t n_bytes);
/* add_tensor: names of 1 to 63 bytes (llama.cpp's limit), unique; 1 to 4
 * dims; a dtype with a ggml id; n_bytes must equal what shape and dtype
 * need. Tensors are laid out in the order added, each aligned.
 *
 * add_tensor_ref: like add_tensor, but the data is NOT copied: it must
 * stay valid until the last rlx_gguf_writer_to_memory / _write call (e.g. a
 * tensor of an open rlx_gguf being re-written). */
RLX_API rlx_status rlx_gguf_writer_add_tensor_ref(rlx_gguf_writer *w, const char *name,
                                                  rlx_dtype dtype, uint32_t n_dims,
                                                  const uint64_t *ne, const void *data,
                                                  uint64_t n_bytes);
/* add_tensor_gen: a tensor whose bytes are produced while the file is
 * written, so a large model never needs to be in memory at once. `gen` is
 * called in order with consecutive chunks (off = 0, RLX_GGUF_GEN_CHUNK, ...;
 * every chunk but the last is RLX_GGUF_GEN_CHUNK bytes) and fills buf with
 * the tensor's bytes [off, off + n). It returns RLX_OK or an error (which
 * fails the write; it may set *err). `user` must stay valid until the last
 * to_memory / write call. Memory: one chunk. */
#define RLX_GGUF_GEN_CHUNK ((uint64_t)16 << 20)
typedef rlx_status (*rlx_gguf_tensor_gen_fn)(void *user, uint64_t off, void *buf, uint64_t n,
                                             rlx_error **err);
RLX_API rlx_status rlx_gguf_writer_add_tensor_gen(rlx_gguf_writer *w, const char *name,
                                                  rlx_dtype dtype, uint32_t n_dims,
                                                  const uint64_t *ne, uint64_t n_bytes,
                                                  rlx_gguf_tensor_gen_fn gen, void *user);
/* The first failure of a setter or add_tensor, kept so that to_memory /
 * write report it; NULL when none. Owned by the writer. */
RLX_API const char *rlx_gguf_writer_error(const rlx_gguf_writer *w);
/* Serialize to memory (caller frees *out with free()). */
RLX_API rlx_status rlx_gguf_writer_to_memory(rlx_gguf_writer *w, void **out, size_t *out_size,
                                             rlx_error **err);
/* Write to `path` via a temporary file in the same folder, fsync() and
 * rename(), so `path` holds either the old file or the complete new one. */
RLX_API rlx_status rlx_gguf_writer_write(rlx_gguf_writer *w, const char *path, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
