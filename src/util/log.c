/* log.c: the log callback (log.h, specdec_log_set). A process-wide setting: the callback is read
 * and called without a lock, so install it before starting generations on other threads. */
#include "util/log.h"
#include <stdarg.h>
#include <stdio.h>

static specdec_log_fn log_fn;
static void *log_user;

void specdec_log_set(specdec_log_fn fn, void *user) {
    log_fn = fn;
    log_user = user;
}

const char *specdec_log_level_name(specdec_log_level level) {
    switch (level) {
    case SPECDEC_LOG_DEBUG: return "debug";
    case SPECDEC_LOG_INFO: return "info";
    case SPECDEC_LOG_WARN: return "warning";
    default: return "error";
    }
}

void sd_log(specdec_log_level level, const char *fmt, ...) {
    specdec_log_fn fn = log_fn;
    if (!fn) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fn(level, buf, log_user);
}
