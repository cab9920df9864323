#include "backends/base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rlx_error {
    rlx_status code;
    char *message;
};

const char *rlx_status_name(rlx_status s)
{
    switch (s) {
    case RLX_OK:
        return "ok";
    case RLX_ERR_INVALID_ARG:
        return "invalid argument";
    case RLX_ERR_IO:
        return "I/O error";
    case RLX_ERR_FORMAT:
        return "format error";
    case RLX_ERR_UNSUPPORTED:
        return "unsupported";
    case RLX_ERR_NOT_FOUND:
        return "not found";
    case RLX_ERR_TYPE:
        return "wrong type";
    case RLX_ERR_NO_MEMORY:
        return "out of memory";
    case RLX_ERR_BUDGET:
        return "over the memory budget";
    case RLX_ERR_CANCELLED:
        return "cancelled";
    case RLX_ERR_DEVICE:
        return "device error";
    case RLX_ERR_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}

/* Used when even the error allocation fails: callers still get a message. */
static struct rlx_error oom_error = {RLX_ERR_NO_MEMORY, (char *)"out of memory"};

static char *vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

rlx_status rlx_error_setv(rlx_error **err, rlx_status code, const char *fmt, va_list ap)
{
    if (!err || *err)
        return code;
    rlx_error *e = malloc(sizeof *e);
    char *msg = vformat(fmt, ap);
    if (!e || !msg) {
        free(e);
        free(msg);
        *err = &oom_error;
        return code;
    }
    e->code = code;
    e->message = msg;
    *err = e;
    return code;
}

rlx_status rlx_error_set(rlx_error **err, rlx_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rlx_error_setv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void rlx_error_prefix(rlx_error **err, const char *fmt, ...)
{
    if (!err || !*err || *err == &oom_error)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *pre = vformat(fmt, ap);
    va_end(ap);
    if (!pre)
        return;
    size_t a = strlen(pre), b = strlen((*err)->message);
    char *s = malloc(a + b + 1);
    if (s) {
        memcpy(s, pre, a);
        memcpy(s + a, (*err)->message, b + 1);
        free((*err)->message);
        (*err)->message = s;
    }
    free(pre);
}

rlx_status rlx_error_code(const rlx_error *err)
{
    return err ? err->code : RLX_OK;
}

const char *rlx_error_message(const rlx_error *err)
{
    return err ? err->message : "no error";
}

void rlx_error_free(rlx_error *err)
{
    if (!err || err == &oom_error)
        return;
    free(err->message);
    free(err);
}

void rlx_error_clear(rlx_error **err)
{
    if (err) {
        rlx_error_free(*err);
        *err = NULL;
    }
}
