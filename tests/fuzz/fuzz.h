/* fuzz.h: what every fuzz target shares. A target is one file tests/fuzz/fuzz_<parser>.c that
 * defines LLVMFuzzerTestOneInput (and optionally LLVMFuzzerInitialize). Linked with libFuzzer
 * (clang, SPECDEC_FUZZ=ON) it fuzzes; linked with replay_main.c (any compiler) it replays the
 * committed corpus and regression inputs as a plain ctest. A target checks properties with
 * FUZZ_CHECK, which aborts: under libFuzzer an abort is a finding, under ctest a failure. */
#ifndef SD_FUZZ_H
#define SD_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } } while (0)

/* The repository root: $SPECDEC_SOURCE_DIR, else the one this target was built from. */
static inline const char *fuzz_source_dir(void) {
    const char *s = getenv("SPECDEC_SOURCE_DIR");
#ifdef SPECDEC_SOURCE_DIR_DEFAULT
    if (!s || !*s) s = SPECDEC_SOURCE_DIR_DEFAULT;
#endif
    return s && *s ? s : ".";
}

#endif
