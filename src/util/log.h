/* log.h: the library's one way to say something outside a return value: warnings go to the
 * callback the application installed with specdec_log_set (none by default: the library itself
 * never prints). */
#ifndef SD_LOG_H
#define SD_LOG_H
#include "specdec.h"
#include "util/err.h"

void sd_log(specdec_log_level level, const char *fmt, ...) SD_PRINTF(2, 3);

#endif
