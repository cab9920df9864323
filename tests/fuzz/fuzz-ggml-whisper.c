/* libFuzzer target: the whisper.cpp ggml .bin reader on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/formats/ggml-whisper.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_ggml_whisper *w = NULL;
    rlx_error *err = NULL;
    if (rlx_ggml_whisper_open_memory(data, size, "fuzz.bin", &w, &err) != RLX_OK) {
        /* every failure carries a message */
        if (!err || rlx_error_message(err)[0] == '\0' || w)
            __builtin_trap();
        rlx_error_free(err);
        return 0;
    }
    volatile uint8_t sink = 0;
    int32_t n_mel, n_fft;
    const float *fb = rlx_ggml_whisper_mel_filters(w, &n_mel, &n_fft);
    if ((uint64_t)n_mel * (uint64_t)n_fft > 0) { /* the bytes: any float may be there */
        uint8_t last[4];
        memcpy(last, &fb[(size_t)n_mel * (size_t)n_fft - 1], 4);
        sink ^= last[0];
    }
    for (int32_t i = 0; i < rlx_ggml_whisper_n_words(w); i++) {
        size_t len;
        const uint8_t *p = (const uint8_t *)rlx_ggml_whisper_word(w, i, &len);
        if (!p || p < data || (size_t)(p - data) + len > size)
            __builtin_trap();
        if (len)
            sink ^= p[0] ^ p[len - 1];
    }
    uint64_t n = rlx_ggml_whisper_n_tensors(w);
    for (uint64_t i = 0; i < n; i++) {
        const rlx_ggml_whisper_tensor *t = rlx_ggml_whisper_tensor_at(w, i);
        if (rlx_ggml_whisper_find(w, t->name) != t)
            __builtin_trap();
        const uint8_t *p = rlx_ggml_whisper_data(w, t);
        /* touch both ends of the tensor's bytes: ASan checks they are in the input */
        if (t->n_bytes > 0)
            sink ^= p[0] ^ p[t->n_bytes - 1];
        if (p < data || (size_t)(p - data) + t->n_bytes > size)
            __builtin_trap();
    }
    (void)sink;
    rlx_ggml_whisper_close(w);
    return 0;
}
