/* ops_i8_avx2.c: placeholder. */
#include "cpu/ops_i8.h"
int sd_i8_avx2_novnni_unused;
sd_i8_rows_fn sd_i8_rows_avx2(void) { return (sd_i8_rows_fn)0; }
sd_i8_rows_fn sd_i8_rows_avx2_form(int vnni) { (void)vnni; return (sd_i8_rows_fn)0; }
void sd_i8_avx2_prefer_vnni(int on) { (void)on; }
sd_i8_prep_fn sd_i8_prep_avx2(void) { return (sd_i8_prep_fn)0; }
