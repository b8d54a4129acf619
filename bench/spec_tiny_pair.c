/* spec_tiny_pair.c: write the random tiny target (with mtp.*) and draft model that the
 * speculative-decoding tests use into two directories, for exercising `specdec bench` end to end
 * without a trained pair. Their speed numbers say nothing about real speedup.
 * usage: spec_tiny_pair TARGET_DIR DRAFT_DIR [V H I] */
#include "../tests/tiny_spec.h"
#include <sys/stat.h>

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR [V H I]\n", argv[0]); return 2; }
    ts_dims d = ts_default();
    if (argc >= 6) { d.V = atoi(argv[3]); d.H = atoi(argv[4]); d.I = atoi(argv[5]); d.hd = d.H / d.nh; }
    d.max_pos = 4096;
    mkdir(argv[1], 0755);
    mkdir(argv[2], 0755);
    return ts_write_pair(argv[1], argv[2], &d, 7, NULL, 0) ? 1 : 0;
}
