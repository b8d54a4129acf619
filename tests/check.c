/* check.c: failure bookkeeping for check.h. */
#include "check.h"
#include <stdarg.h>

int check_failures = 0, check_count = 0;

void check_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    check_failures++;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int check_finish(const char *test_name) {
    fprintf(stderr, "%s: %d checks, %d failed\n", test_name, check_count, check_failures);
    if (check_count == 0) { fprintf(stderr, "%s: no checks ran\n", test_name); return 1; }
    return check_failures ? 1 : 0;
}

const char *check_path(const char *rel) {
    static char buf[8][4096];
    static int slot = 0;
    const char *root = getenv("SPECDEC_SOURCE_DIR");
#ifdef SPECDEC_SOURCE_DIR_DEFAULT
    if (!root) root = SPECDEC_SOURCE_DIR_DEFAULT;   /* running a test binary by hand */
#endif
    char *b = buf[slot++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", root ? root : ".", rel);
    return b;
}
