/* err.c: status names and message formatting for specdec_err. */
#include "util/err.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *specdec_status_name(specdec_status st) {
    switch (st) {
    case SPECDEC_OK: return "ok";
    case SPECDEC_ERR_IO: return "io";
    case SPECDEC_ERR_FORMAT: return "format";
    case SPECDEC_ERR_CONFIG: return "config";
    case SPECDEC_ERR_MISSING: return "missing";
    case SPECDEC_ERR_SHAPE: return "shape";
    case SPECDEC_ERR_DTYPE: return "dtype";
    case SPECDEC_ERR_UNSUPPORTED: return "unsupported";
    case SPECDEC_ERR_INVALID_ARG: return "invalid-argument";
    case SPECDEC_ERR_UTF8: return "utf8";
    case SPECDEC_ERR_CONTEXT: return "context";
    case SPECDEC_ERR_NOMEM: return "out-of-memory";
    case SPECDEC_ERR_CANCELLED: return "cancelled";
    case SPECDEC_ERR_INTERNAL: return "internal";
    }
    return "unknown";
}

specdec_status sd_fail(specdec_err *err, specdec_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = st;
    }
    return st;
}

specdec_status sd_err_prefix(specdec_err *err, const char *fmt, ...) {
    if (!err) return SPECDEC_ERR_INTERNAL;
    char head[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* Both parts together may exceed msg: the tail of the old message is what gets cut. */
    int n = snprintf(err->msg, sizeof err->msg, "%s: ", head);
    if (n > 0 && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, "%.*s", (int)(sizeof err->msg - (size_t)n - 1), old);
    return err->status;
}
