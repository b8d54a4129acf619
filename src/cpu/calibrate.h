/* calibrate.h: the SIMD level chosen by measurement on the running CPU (calibrate.c). */
#ifndef SD_CALIBRATE_H
#define SD_CALIBRATE_H
#include <stddef.h>

typedef enum sd_calib_how {
    SD_CALIB_MEASURED = 0,   /* timed now (and cached) */
    SD_CALIB_CACHED,         /* read from the cache file, same CPU, flags and version */
    SD_CALIB_ONLY,           /* one level runs here: nothing to choose */
    SD_CALIB_STATIC,         /* SPECDEC_CALIBRATE=0: the static order */
} sd_calib_how;

typedef struct sd_calib {
    const char *f32_level, *i8_level;   /* fastest level for f32 / int8 activations */
    const char *avx2_i8_form;           /* the AVX2 level's int8 form: "vnni", "maddubs", or "-" (one form) */
    const char *avx512_i8_form;         /* the AVX-512 level's for several tokens: "amx", "vnni", or "-" (no AMX) */
    sd_calib_how how;
    char key[512];                      /* CPU model | ISA flags | specdec version | kernel generation */
    char where[512];                    /* the cache file */
    char times[256];                    /* "avx512 f32 410 us int8 120 us, avx2 ..." */
} sd_calib;

/* Calibrates once per process (thread-safe), on first call. */
const sd_calib *sd_cpu_calibration(void);
/* One line saying which levels and why. */
void sd_calib_describe(const sd_calib *c, char *out, size_t n);

#endif
