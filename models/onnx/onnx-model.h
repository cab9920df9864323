/* The ONNX importer: an ONNX graph (engine/formats/onnx.h) turned into our
 * IR (engine/ir/graph.h), and a runner that compiles and runs it on a
 * session's device.
 *
 * Usage:
 *     rlx_onnx_model *m = NULL;
 *     rlx_onnx_open("model.onnx", &m, &err);
 *     rlx_onnx_runner_params p = rlx_onnx_runner_default_params();
 *     p.device = "cpu";
 *     rlx_onnx_runner *r = NULL;
 *     if (rlx_onnx_runner_create(&p, m, &r, &err) != RLX_OK) ...  // lists every unsupported op
 *     // inputs/outputs in the model's order, each in its ONNX element type, row-major
 *     const rlx_onnx_io *in0 = rlx_onnx_runner_input(r, 0);
 *     rlx_onnx_runner_run(r, inputs, outputs, &err);
 *     rlx_onnx_runner_free(r);
 *     rlx_onnx_close(m);
 *
 * Import: shapes are static (a symbolic input dim needs a value in
 * rlx_onnx_import_params.shapes); every value's shape is inferred while the
 * graph is built. Initializers become PARAMs named as in the file (float
 * tensors of 64 elements or more; smaller ones and integer ones become
 * constants), so the weights stay in the model's memory (or its mapped
 * external files) and the session reads them from there. Nodes whose inputs
 * are all known at import time (Shape -> Gather -> Concat -> Reshape chains,
 * ConstantOfShape, Range, ...) are folded on the host, up to
 * RLX_ONNX_FOLD_LIMIT elements per value. Float tensors are computed in F32
 * (float16 / double model inputs and outputs are converted by the runner),
 * integer tensors in I32 (int64 values outside the int32 range are refused
 * at the input), booleans as U8.
 *
 * Unsupported ops, attributes or modes are never approximated: the import
 * fails with RLX_ERR_UNSUPPORTED and one message listing every one of them
 * (each once, with the first node that has it), before any weight is read.
 *
 * Ownership: the import result and the runner borrow the model, which must
 * outlive them. Thread safety: a runner is used by one thread at a time.
 */
#ifndef RLX_MODELS_ONNX_ONNX_MODEL_H
#define RLX_MODELS_ONNX_ONNX_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"
#include "engine/formats/onnx.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_graph;
struct rlx_session;

#define RLX_ONNX_FOLD_LIMIT  (1 << 22) /* elements of one value folded on the host */
#define RLX_ONNX_FOLD_TOTAL  (1 << 25) /* and of all of them together */
#define RLX_ONNX_IO_MAX_DIMS 6

/* A fixed shape for one graph input (overrides what the file says). */
typedef struct rlx_onnx_input_shape {
    const char *name;
    int32_t rank;
    int64_t dims[RLX_ONNX_IO_MAX_DIMS];
} rlx_onnx_input_shape;

/* A graph input fixed to a value at import time (a specialization: shape
 * tensors, Resize scales); it is then no input of the imported graph. */
typedef struct rlx_onnx_const_input {
    const char *name;
    const rlx_onnx_tensor *value; /* borrowed until the import is freed */
} rlx_onnx_const_input;

typedef struct rlx_onnx_import_params {
    const rlx_onnx_input_shape *shapes;
    int32_t n_shapes;
    const rlx_onnx_const_input *consts;
    int32_t n_consts;
} rlx_onnx_import_params;

/* One input or output of the imported graph. */
typedef struct rlx_onnx_io {
    const char *name;
    int32_t elem_type;     /* the ONNX element type the caller reads/writes */
    rlx_dtype graph_dtype; /* F32, I32 or U8: what the graph computes in */
    int32_t rank;
    int64_t dims[RLX_ONNX_IO_MAX_DIMS];
    int64_t numel;
} rlx_onnx_io;

typedef struct rlx_onnx_import rlx_onnx_import;

/* Build the graph. On RLX_ERR_UNSUPPORTED the message lists every
 * unsupported op and attribute. */
RLX_API rlx_status rlx_onnx_import_graph(const rlx_onnx_model *m, const rlx_onnx_import_params *p,
                                         rlx_onnx_import **out, rlx_error **err);
RLX_API void rlx_onnx_import_free(rlx_onnx_import *im);
RLX_API const struct rlx_graph *rlx_onnx_import_get_graph(const rlx_onnx_import *im);
RLX_API int32_t rlx_onnx_import_n_inputs(const rlx_onnx_import *im);
RLX_API const rlx_onnx_io *rlx_onnx_import_input(const rlx_onnx_import *im, int32_t i);
RLX_API int32_t rlx_onnx_import_n_outputs(const rlx_onnx_import *im);
RLX_API const rlx_onnx_io *rlx_onnx_import_output(const rlx_onnx_import *im, int32_t i);
/* Hand the PARAMs' bytes (borrowed from the model) to a session. */
RLX_API rlx_status rlx_onnx_import_add_weights(const rlx_onnx_import *im, struct rlx_session *s,
                                               rlx_error **err);

/* The op types of the default domain that the importer maps (sorted). */
RLX_API int32_t rlx_onnx_n_supported_ops(void);
RLX_API const char *rlx_onnx_supported_op(int32_t i);
RLX_API bool rlx_onnx_op_supported(const char *domain, const char *op_type);

/* ---- runner ---- */

typedef struct rlx_onnx_runner rlx_onnx_runner;

typedef struct rlx_onnx_runner_params {
    const char *device;     /* "cpu", "vulkan:0", ...; NULL = "cpu" */
    int n_threads;          /* CPU threads; 0 = one per core */
    uint64_t memory_budget; /* bytes; 0 = the device's */
    rlx_onnx_import_params import;
} rlx_onnx_runner_params;

RLX_API rlx_onnx_runner_params rlx_onnx_runner_default_params(void);
RLX_API rlx_status rlx_onnx_runner_create(const rlx_onnx_runner_params *p, const rlx_onnx_model *m,
                                          rlx_onnx_runner **out, rlx_error **err);
RLX_API void rlx_onnx_runner_free(rlx_onnx_runner *r);
RLX_API int32_t rlx_onnx_runner_n_inputs(const rlx_onnx_runner *r);
RLX_API const rlx_onnx_io *rlx_onnx_runner_input(const rlx_onnx_runner *r, int32_t i);
RLX_API int32_t rlx_onnx_runner_n_outputs(const rlx_onnx_runner *r);
RLX_API const rlx_onnx_io *rlx_onnx_runner_output(const rlx_onnx_runner *r, int32_t i);
RLX_API struct rlx_session *rlx_onnx_runner_session(rlx_onnx_runner *r);
/* inputs[i]: numel elements of input i's elem_type; outputs[i] likewise. */
RLX_API rlx_status rlx_onnx_runner_run(rlx_onnx_runner *r, const void *const *inputs,
                                       void *const *outputs, rlx_error **err);

/* Bytes of one element of an ONNX elem type the runner converts (0 if none). */
RLX_API size_t rlx_onnx_elem_size(int32_t elem_type);
/* Element i of packed ONNX data of that element type, as a double (F32,
 * F64, F16, BF16 and the integer types; BOOL and UINT8 as bytes). */
RLX_API double rlx_onnx_elem_get(const void *data, int32_t elem_type, int64_t i);

#ifdef __cplusplus
}
#endif
#endif
