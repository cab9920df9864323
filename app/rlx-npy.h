/* NumPy .npy files (format versions 1 to 3, little-endian, C order) for
 * rlx run: read whole into memory, and written. Thread safety: none needed. */
#ifndef RLX_APP_RLX_NPY_H
#define RLX_APP_RLX_NPY_H

#include <stddef.h>
#include <stdint.h>

#define RLX_NPY_MAX_DIMS 16

typedef struct rlx_npy {
    int32_t elem_type; /* an ONNX element type (engine/formats/onnx.h) */
    int rank;
    int64_t dims[RLX_NPY_MAX_DIMS];
    int64_t numel;
    void *data; /* numel elements, malloc'd */
    size_t n_bytes;
} rlx_npy;

/* 0 on success; else a sentence in msg. */
int rlx_npy_read(const char *path, rlx_npy *out, char *msg, size_t msg_size);
/* 0 on success; else a sentence in msg. */
int rlx_npy_write(const char *path, int32_t elem_type, int rank, const int64_t *dims,
                  const void *data, char *msg, size_t msg_size);
void rlx_npy_free(rlx_npy *n);

#endif
