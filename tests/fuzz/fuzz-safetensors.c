/* libFuzzer target: the safetensors header parser on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_safetensors *st = NULL;
    rlx_error *err = NULL;
    if (rlx_safetensors_open_memory(data, size, "fuzz.safetensors", &st, &err) != RLX_OK) {
        /* every failure carries a message */
        if (!err || rlx_error_message(err)[0] == '\0')
            __builtin_trap();
        rlx_error_free(err);
        return 0;
    }
    volatile uint8_t sink = 0;
    uint64_t n = rlx_safetensors_n_tensors(st);
    for (uint64_t i = 0; i < n; i++) {
        const rlx_st_tensor *t = rlx_safetensors_tensor_at(st, i);
        if (rlx_safetensors_find(st, t->name) != t)
            __builtin_trap();
        const uint8_t *p = rlx_safetensors_data(st, t);
        /* touch both ends of the tensor's bytes: ASan checks they are in the input */
        if (t->n_bytes > 0)
            sink ^= p[0] ^ p[t->n_bytes - 1];
        if (p < data || (size_t)(p - data) + t->n_bytes > size)
            __builtin_trap();
    }
    uint64_t m = rlx_safetensors_n_metadata(st);
    for (uint64_t i = 0; i < m; i++) {
        const char *k, *v;
        rlx_safetensors_metadata_at(st, i, &k, &v);
        if (rlx_safetensors_metadata(st, k) != v)
            __builtin_trap();
        sink ^= (uint8_t)strlen(v);
    }
    (void)sink;
    rlx_safetensors_close(st);
    return 0;
}
