/* check.h: a minimal test harness. CHECK records a failure with file:line and carries on;
 * the test's main returns check_finish(), non-zero when anything failed, so ctest sees it. */
#ifndef SD_CHECK_H
#define SD_CHECK_H
#include <stdio.h>
#include <stdlib.h>

extern int check_failures, check_count;
void check_fail(const char *file, int line, const char *fmt, ...);
int check_finish(const char *test_name);
/* $SPECDEC_SOURCE_DIR/rel (or ./rel when unset), in a static buffer rotating over 8 slots. */
const char *check_path(const char *rel);

#define CHECK(cond, ...) do { check_count++; if (!(cond)) { check_fail(__FILE__, __LINE__, __VA_ARGS__); } } while (0)
#define CHECK_EQ_INT(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
    CHECK(a_ == b_, "%s == %s: %lld != %lld", #a, #b, a_, b_); } while (0)
#endif
