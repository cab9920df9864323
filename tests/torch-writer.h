/* A small writer of the checkpoints torch.save writes (the zip format of
 * torch >= 1.6) for tests: a state dict (collections.OrderedDict) of dense
 * row-major f32, f16 or i64 tensors, one storage per tensor. Linked into tests
 * only; tests/reference/check_torch_writer.py proves its files with real
 * PyTorch (torch.load).
 *
 * Usage:
 *     rlx_torch_writer *w = NULL;
 *     if (rlx_torch_writer_create("/tmp/m.pth", "m", &w, &err) != RLX_OK) ...
 *     int64_t shape[2] = {2, 3};
 *     rlx_torch_writer_add(w, "fc.weight", RLX_DTYPE_F32, 2, shape, values, &err);
 *     if (rlx_torch_writer_finish(w, &err) != RLX_OK) ...   // frees w, always
 *
 * The file: a zip of STORED entries "<prefix>/data/<key>" (each storage's
 * bytes, key "0", "1", ... in the order added; little-endian as the host
 * must be), then "<prefix>/data.pkl" (a protocol-2 pickle of the
 * OrderedDict, each tensor a torch._utils._rebuild_tensor_v2 call on a
 * persistent-id storage, as torch.save writes it), "<prefix>/version" ("3")
 * and "<prefix>/byteorder" ("little"), then the central directory and the
 * end record. Every entry's data starts at a multiple of 64 bytes, padded
 * with an extra field as torch's writer does; CRC-32s are zlib's. Torch
 * itself writes data.pkl first: entry order is free in a zip (readers go
 * through the central directory), and writing it last lets the tensors
 * stream to the file. No zip64: the file must stay under 4 GiB.
 *
 * Thread safety: one writer per thread; distinct writers are independent.
 */
#ifndef RLX_TESTS_TORCH_WRITER_H
#define RLX_TESTS_TORCH_WRITER_H

#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/status.h"

#define RLX_TORCH_WRITER_MAX_DIMS 8

typedef struct rlx_torch_writer rlx_torch_writer;

/* prefix: the archive's folder (torch uses the file's base name, e.g.
 * "sam_vit_b_01ec64"); no '/'. *out is NULL first; owned until finish. */
rlx_status rlx_torch_writer_create(const char *path, const char *prefix, rlx_torch_writer **out,
                                   rlx_error **err);
/* dtype RLX_DTYPE_F32, RLX_DTYPE_F16 or RLX_DTYPE_I64 (BatchNorm's num_batches_tracked); data: the
 * product of shape's values, row-major (0 dims: one value). Names must be unique. */
rlx_status rlx_torch_writer_add(rlx_torch_writer *w, const char *name, rlx_dtype dtype, int rank,
                                const int64_t *shape, const void *data, rlx_error **err);
/* Writes the pickle, the small entries and the directory, closes the file
 * and frees w (also on failure, and after an earlier failed add). */
rlx_status rlx_torch_writer_finish(rlx_torch_writer *w, rlx_error **err);
/* Abandons w (the file is left incomplete). */
void rlx_torch_writer_free(rlx_torch_writer *w);

#endif
