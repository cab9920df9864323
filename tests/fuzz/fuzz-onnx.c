/* libFuzzer target: the ONNX reader (protobuf walk, decoding, the plain-C
 * view, topological order) and the importer's graph building on arbitrary
 * bytes. No folder is given, so external data is refused; the importer runs
 * without a session (the weight hand-over is stubbed out below). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/formats/onnx.h"
#include "engine/runtime/session.h"
#include "models/onnx/onnx-model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the importer's only session call, never reached here */
rlx_status rlx_session_add_weight(rlx_session *s, const char *name, rlx_dtype dtype, int rank,
                                  const int64_t *dims, const void *d, uint64_t n_bytes,
                                  rlx_error **err)
{
    (void)s, (void)name, (void)dtype, (void)rank, (void)dims, (void)d, (void)n_bytes;
    return rlx_error_set(err, RLX_ERR_INTERNAL, "not in the fuzzer");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_onnx_model *m = NULL;
    rlx_error *err = NULL;
    if (rlx_onnx_open_memory(data, size, NULL, "fuzz.onnx", &m, &err) != RLX_OK) {
        /* every failure carries a message */
        if (!err || rlx_error_message(err)[0] == '\0')
            __builtin_trap();
        rlx_error_free(err);
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int32_t i = 0; i < rlx_onnx_n_nodes(m); i++) {
        const rlx_onnx_node *n = rlx_onnx_node_at(m, i);
        sink ^= (uint8_t)strlen(n->op_type);
        for (int32_t k = 0; k < n->n_inputs; k++)
            sink ^= (uint8_t)strlen(n->inputs[k]);
        for (int32_t k = 0; k < n->n_attrs; k++) {
            const rlx_onnx_attr *a = &n->attrs[k];
            if (a->n_ints)
                sink ^= (uint8_t)a->ints[a->n_ints - 1];
            if (a->t && a->t->n_bytes)
                sink ^= ((const uint8_t *)a->t->data)[a->t->n_bytes - 1];
        }
    }
    for (int32_t i = 0; i < rlx_onnx_n_initializers(m); i++) {
        const rlx_onnx_tensor *t = rlx_onnx_initializer_at(m, i);
        /* touch both ends: ASan checks the bytes are really there */
        if (t->n_bytes && t->data)
            sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->n_bytes - 1];
        if (rlx_onnx_find_initializer(m, t->name) == NULL)
            __builtin_trap();
    }
    rlx_onnx_import *im = NULL;
    if (rlx_onnx_import_graph(m, NULL, &im, &err) != RLX_OK) {
        if (!err || rlx_error_message(err)[0] == '\0')
            __builtin_trap();
        rlx_error_free(err);
    }
    rlx_onnx_import_free(im);
    (void)sink;
    rlx_onnx_close(m);
    return 0;
}
