/* err.h: errors as values. Library functions return a specdec_status and describe the fault
 * in the caller's specdec_err (which may be NULL). */
#ifndef SD_ERR_H
#define SD_ERR_H
#include "specdec.h"

#if defined(__GNUC__)
#define SD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SD_PRINTF(a, b)
#endif

/* Record `st` with a formatted message in *err (when non-NULL) and return st. */
specdec_status sd_fail(specdec_err *err, specdec_status st, const char *fmt, ...) SD_PRINTF(3, 4);

/* Prefix the message already in *err with "context: " (e.g. a file name). Returns err->status. */
specdec_status sd_err_prefix(specdec_err *err, const char *fmt, ...) SD_PRINTF(2, 3);

#define SD_TRY(expr) do { specdec_status sd_st_ = (expr); if (sd_st_ != SPECDEC_OK) return sd_st_; } while (0)

#endif
