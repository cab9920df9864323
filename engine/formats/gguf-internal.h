/* Pieces of the GGUF reader shared with the writer; not installed.
 *
 * Thread safety: pure functions over caller-owned bytes.
 */
#ifndef RLX_ENGINE_FORMATS_GGUF_INTERNAL_H
#define RLX_ENGINE_FORMATS_GGUF_INTERNAL_H

#include "engine/formats/gguf.h"

/* Bytes of one element of a fixed-size type in a file; 0 for STRING, ARRAY
 * and unknown types. */
uint64_t rlx_gguf_type_fixed_size(rlx_gguf_type t);

/* Check that `len` bytes at `data` hold exactly `count` array elements of
 * type `elem` encoded as in a GGUF file (strings and nested arrays included,
 * nested at most RLX_GGUF_MAX_ARRAY_DEPTH deep). `what` names the value in
 * the error message. */
rlx_status rlx_gguf_check_array_bytes(rlx_gguf_type elem, uint64_t count, const void *data,
                                      uint64_t len, const char *what, rlx_error **err);

#endif
