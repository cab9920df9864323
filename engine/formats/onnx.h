/* ONNX models (.onnx, protobuf) read into a plain-C view: the graph's nodes
 * with their attributes, initializers (external data files included),
 * inputs, outputs, value infos and opset imports. No protobuf type appears
 * here: only engine/formats/onnx.c includes the protoc-c bindings, which are
 * generated at build time from the onnx.proto that libonnx-dev installs.
 *
 * Usage:
 *     rlx_onnx_model *m = NULL;
 *     if (rlx_onnx_open("model.onnx", &m, &err) != RLX_OK) ...
 *     printf("opset %lld\n", (long long)rlx_onnx_opset_version(m, ""));
 *     for (int32_t i = 0; i < rlx_onnx_n_nodes(m); i++) {
 *         const rlx_onnx_node *n = rlx_onnx_node_at(m, i);   // topological order
 *         const rlx_onnx_attr *a = rlx_onnx_node_attr(n, "group");
 *         ...
 *     }
 *     const rlx_onnx_tensor *w = rlx_onnx_find_initializer(m, "conv1.weight");
 *     // w->data: w->n_bytes little-endian bytes, row-major, in w->dtype
 *     rlx_onnx_close(m);
 *
 * What opening checks (a hostile file gets a sentence, never a crash): the
 * protobuf wire format (nesting at most RLX_ONNX_MAX_DEPTH deep, and the
 * decoded size bounded by the file's size) before protobuf-c decodes it;
 * every tensor's dims (non-negative, element count and byte size without
 * overflow, at most RLX_ONNX_MAX_RANK dims) against the bytes it has; names
 * defined once; every node input defined by a graph input, an initializer or
 * another node, and no cycle (nodes are returned in topological order even
 * when the file lists them otherwise); external data only in files inside
 * the model's folder (relative paths without "..", symlinks resolved), with
 * offset and length inside the file. Subgraph attributes (If/Loop bodies)
 * are not exposed (their attribute has type RLX_ONNX_ATTR_GRAPH and no
 * content here).
 *
 * Tensor data: float_data / int32_data / int64_data / double_data /
 * uint64_data fields are converted to the dtype's packed little-endian
 * bytes; raw_data and external data are used as they are (external files
 * are mapped read-only). Element types without an rlx_dtype have dtype
 * RLX_DTYPE_INVALID; of those, uint16/32/64 still have their data, strings
 * and complex numbers do not (data NULL).
 *
 * Ownership: the model owns everything the view points to; pointers stay
 * valid until rlx_onnx_close. Thread safety: a model is read-only after
 * opening; several threads may read one model at once.
 */
#ifndef RLX_ENGINE_FORMATS_ONNX_H
#define RLX_ENGINE_FORMATS_ONNX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_ONNX_MAX_DEPTH 32 /* message nesting (graphs inside attributes inside nodes) */
#define RLX_ONNX_MAX_RANK  16

typedef struct rlx_onnx_model rlx_onnx_model;

/* ONNX TensorProto.DataType codes (elem_type). */
enum {
    RLX_ONNX_FLOAT = 1,
    RLX_ONNX_UINT8 = 2,
    RLX_ONNX_INT8 = 3,
    RLX_ONNX_UINT16 = 4,
    RLX_ONNX_INT16 = 5,
    RLX_ONNX_INT32 = 6,
    RLX_ONNX_INT64 = 7,
    RLX_ONNX_STRING = 8,
    RLX_ONNX_BOOL = 9,
    RLX_ONNX_FLOAT16 = 10,
    RLX_ONNX_DOUBLE = 11,
    RLX_ONNX_UINT32 = 12,
    RLX_ONNX_UINT64 = 13,
    RLX_ONNX_BFLOAT16 = 16,
};

/* AttributeProto.AttributeType codes. */
typedef enum rlx_onnx_attr_type {
    RLX_ONNX_ATTR_UNDEFINED = 0,
    RLX_ONNX_ATTR_FLOAT = 1,
    RLX_ONNX_ATTR_INT = 2,
    RLX_ONNX_ATTR_STRING = 3,
    RLX_ONNX_ATTR_TENSOR = 4,
    RLX_ONNX_ATTR_GRAPH = 5,
    RLX_ONNX_ATTR_FLOATS = 6,
    RLX_ONNX_ATTR_INTS = 7,
    RLX_ONNX_ATTR_STRINGS = 8,
    RLX_ONNX_ATTR_TENSORS = 9,
    RLX_ONNX_ATTR_GRAPHS = 10,
    RLX_ONNX_ATTR_OTHER = 99, /* sparse tensors, type protos */
} rlx_onnx_attr_type;

typedef struct rlx_onnx_tensor {
    const char *name;  /* "" when unnamed */
    int32_t elem_type; /* RLX_ONNX_* */
    rlx_dtype dtype;   /* RLX_DTYPE_INVALID where we have none */
    int32_t rank;
    const int64_t *dims;
    int64_t numel;
    const void *data; /* NULL when numel is 0, or for strings and complex numbers */
    uint64_t n_bytes; /* numel * element size */
    bool external;    /* the bytes come from an external data file */
} rlx_onnx_tensor;

typedef struct rlx_onnx_attr {
    const char *name;
    rlx_onnx_attr_type type;
    float f;
    int64_t i;
    const char *s; /* STRING: NUL-terminated (bytes after an embedded NUL are dropped) */
    int32_t n_floats;
    const float *floats;
    int32_t n_ints;
    const int64_t *ints;
    const rlx_onnx_tensor *t; /* TENSOR */
} rlx_onnx_attr;

typedef struct rlx_onnx_node {
    const char *name;    /* "" when unnamed */
    const char *op_type; /* "Conv" */
    const char *domain;  /* "" for the default domain (also "ai.onnx" as written) */
    int32_t n_inputs;
    const char *const *inputs; /* "" for an omitted optional input */
    int32_t n_outputs;
    const char *const *outputs;
    int32_t n_attrs;
    const rlx_onnx_attr *attrs;
} rlx_onnx_node;

/* A graph input, output or value_info entry. */
typedef struct rlx_onnx_value {
    const char *name;
    int32_t elem_type; /* 0 when not a tensor or not given */
    rlx_dtype dtype;
    int32_t rank;                  /* -1: unknown */
    const int64_t *dims;           /* -1 where the dim is unknown or symbolic */
    const char *const *dim_params; /* the symbolic name, or NULL */
} rlx_onnx_value;

typedef struct rlx_onnx_opset {
    const char *domain; /* "" for the default domain */
    int64_t version;
} rlx_onnx_opset;

/* Read a model file; external data files are looked up in its folder.
 * *out is set to NULL first. Errors: RLX_ERR_IO, RLX_ERR_FORMAT (malformed
 * or hostile), RLX_ERR_UNSUPPORTED, RLX_ERR_NO_MEMORY. */
RLX_API rlx_status rlx_onnx_open(const char *path, rlx_onnx_model **out, rlx_error **err);
/* The same from memory (copied as needed, not borrowed); `dir` is the
 * folder for external data, or NULL to refuse external data. `what` names
 * the model in messages (NULL: "the ONNX model"). */
RLX_API rlx_status rlx_onnx_open_memory(const void *data, size_t size, const char *dir,
                                        const char *what, rlx_onnx_model **out, rlx_error **err);
RLX_API void rlx_onnx_close(rlx_onnx_model *m);

RLX_API int64_t rlx_onnx_ir_version(const rlx_onnx_model *m);
RLX_API const char *rlx_onnx_producer(const rlx_onnx_model *m); /* "pytorch 2.1" or "" */
RLX_API const char *rlx_onnx_graph_name(const rlx_onnx_model *m);
RLX_API int32_t rlx_onnx_n_opsets(const rlx_onnx_model *m);
RLX_API const rlx_onnx_opset *rlx_onnx_opset_at(const rlx_onnx_model *m, int32_t i);
/* The imported version of a domain ("" or "ai.onnx": the default), or -1. */
RLX_API int64_t rlx_onnx_opset_version(const rlx_onnx_model *m, const char *domain);

/* Nodes in topological order. */
RLX_API int32_t rlx_onnx_n_nodes(const rlx_onnx_model *m);
RLX_API const rlx_onnx_node *rlx_onnx_node_at(const rlx_onnx_model *m, int32_t i);
/* The node's attribute of that name, or NULL. */
RLX_API const rlx_onnx_attr *rlx_onnx_node_attr(const rlx_onnx_node *n, const char *name);

RLX_API int32_t rlx_onnx_n_initializers(const rlx_onnx_model *m);
RLX_API const rlx_onnx_tensor *rlx_onnx_initializer_at(const rlx_onnx_model *m, int32_t i);
RLX_API const rlx_onnx_tensor *rlx_onnx_find_initializer(const rlx_onnx_model *m, const char *name);

/* Graph inputs that are not initializers (what a caller must feed). */
RLX_API int32_t rlx_onnx_n_inputs(const rlx_onnx_model *m);
RLX_API const rlx_onnx_value *rlx_onnx_input_at(const rlx_onnx_model *m, int32_t i);
RLX_API int32_t rlx_onnx_n_outputs(const rlx_onnx_model *m);
RLX_API const rlx_onnx_value *rlx_onnx_output_at(const rlx_onnx_model *m, int32_t i);
/* A value_info (or input/output) entry by name, or NULL. */
RLX_API const rlx_onnx_value *rlx_onnx_find_value(const rlx_onnx_model *m, const char *name);

/* One serialized TensorProto (the node test suite's input_0.pb files). */
typedef struct rlx_onnx_tensor_file rlx_onnx_tensor_file;
RLX_API rlx_status rlx_onnx_tensor_file_read(const char *path, rlx_onnx_tensor_file **out,
                                             rlx_error **err);
RLX_API const rlx_onnx_tensor *rlx_onnx_tensor_file_tensor(const rlx_onnx_tensor_file *f);
RLX_API void rlx_onnx_tensor_file_free(rlx_onnx_tensor_file *f);

/* The rlx_dtype of an ONNX elem_type, or RLX_DTYPE_INVALID; and its name
 * ("float", "int64"). */
RLX_API rlx_dtype rlx_onnx_dtype(int32_t elem_type);
RLX_API const char *rlx_onnx_elem_type_name(int32_t elem_type);

#ifdef __cplusplus
}
#endif
#endif
