/* ops_i8_neon.c: placeholder while the packed-tile NEON kernel is written: no kernel, the level
 * uses sd_i8_rows_c. */
#include "cpu/ops_i8.h"
sd_i8_rows_fn sd_i8_rows_neon(void) { return (sd_i8_rows_fn)0; }
