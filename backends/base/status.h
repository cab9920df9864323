/* rlx status codes and error objects: the one error convention of librlx.
 *
 * Usage:
 *     rlx_error *err = NULL;
 *     if (rlx_gguf_open(path, &g, &err) != RLX_OK) {
 *         fprintf(stderr, "%s\n", rlx_error_message(err));
 *         rlx_error_free(err);
 *     }
 *
 * Every fallible function returns an rlx_status and, when given a non-NULL
 * `rlx_error **`, stores a heap-allocated error holding a sentence a person
 * can read. The caller owns that error and frees it with rlx_error_free().
 * Passing NULL for the error pointer is allowed: the status is still returned.
 *
 * Thread safety: errors are plain values; an error object belongs to one
 * thread at a time. rlx_status_name() is reentrant.
 */
#ifndef RLX_BASE_STATUS_H
#define RLX_BASE_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RLX_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#define RLX_API                      __attribute__((visibility("default")))
#else
#define RLX_PRINTF(fmt_idx, arg_idx)
#define RLX_API
#endif

typedef enum rlx_status {
    RLX_OK = 0,
    RLX_ERR_INVALID_ARG, /* a caller passed something meaningless */
    RLX_ERR_IO,          /* the OS refused: open, read, mmap */
    RLX_ERR_FORMAT,      /* a file is malformed, truncated or hostile */
    RLX_ERR_UNSUPPORTED, /* well-formed, but something we do not handle */
    RLX_ERR_NOT_FOUND,   /* a key, tensor or device does not exist */
    RLX_ERR_TYPE,        /* a value exists but has another type */
    RLX_ERR_NO_MEMORY,   /* an allocation failed */
    RLX_ERR_BUDGET,      /* does not fit the memory budget */
    RLX_ERR_CANCELLED,   /* the caller asked us to stop */
    RLX_ERR_DEVICE,      /* a backend/device failure */
    RLX_ERR_INTERNAL,    /* a bug in rlx: please report */
} rlx_status;

typedef struct rlx_error rlx_error;

/* A short fixed name for a status, e.g. "format error". */
RLX_API const char *rlx_status_name(rlx_status s);

/* Store a new error in *err (if err is non-NULL and *err is NULL; an existing
 * error is kept because the first failure is the informative one) and return
 * `code`, so callers can write `return rlx_error_set(err, RLX_ERR_IO, ...)`. */
RLX_API rlx_status rlx_error_set(rlx_error **err, rlx_status code, const char *fmt, ...)
    RLX_PRINTF(3, 4);
RLX_API rlx_status rlx_error_setv(rlx_error **err, rlx_status code, const char *fmt, va_list ap);

/* Prefix an existing error's message with more context ("loading X: ..."). */
RLX_API void rlx_error_prefix(rlx_error **err, const char *fmt, ...) RLX_PRINTF(2, 3);

RLX_API rlx_status rlx_error_code(const rlx_error *err);
/* Never NULL: a NULL error reads as "no error". */
RLX_API const char *rlx_error_message(const rlx_error *err);
RLX_API void rlx_error_free(rlx_error *err);
/* Free *err and set it to NULL. */
RLX_API void rlx_error_clear(rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
