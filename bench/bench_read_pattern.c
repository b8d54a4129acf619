/* bench_read_pattern.c: how fast the cores read memory in the access pattern of the int8 kernel's
 * one-token walk (src/cpu/ops_i8_avx512.c, tile_pair1) against other orders of the same bytes,
 * with no arithmetic: does the pattern itself cap the weight stream?
 *
 * A 1 GiB buffer is cut into tiles of the 4-bit packed layout for rows of COLS columns (group 64,
 * bf16 scales: per 32-column block 256 bytes of codes, per group 32 bytes of scales and 32 of
 * biases; 18432 bytes a tile at 2048 columns); each thread takes a contiguous share of the tiles.
 * Patterns, every 64-byte line prefetched SD_I8_PF_TILES tiles ahead as the kernel does:
 *   stream        the share front to back, one line after another;
 *   pairs         tile_pair1's order over tiles packed in runs (ops_i8.h: a tile's codes, then its
 *                 scales, then its biases): tiles in pairs, the two walked block by block in
 *                 lockstep (per group the two tiles' scales, per block tile A's 4 lines then tile
 *                 B's), then each tile's biases: two streams a tile apart plus the scales' and
 *                 the biases';
 *   pairs inline  the same order over tiles packed grouped (each group's scales and biases, one
 *                 line, in front of its codes): two streams, one per tile.
 * The plain read every roofline here is measured against (bench_util.h) is printed too.
 * Rounds alternate the patterns (one pass each, after a discarded pass of each); prints the
 * median, min and max GB/s per pattern. On a 2-vCPU Zen 5 (docs/benchmarks/
 * cpu-grouped-tiles-zen5-2026-12-07.md) "pairs inline" read 512 to 4096 columns at 1.08-1.33x
 * "pairs" but 256 and 384 columns (tiles under 4 KB) at 0.62-0.79x: the packer's rule for the two
 * arrangements. One stream laid out from a pair's blocks alternating ran the kernel 0.90x as fast
 * as two (cpu-read-pattern-epyc-zen5-2026-12-07.md): a ratio here is the memory side alone.
 * Usage: bench_read_pattern [threads=2] [rounds=9] [cols=2048] */
#include "bench_util.h"
#include "cpu/ops_i8.h"
#include <string.h>


/* each pattern with the kernel's prefetch, then without any */
enum { P_STREAM, P_PAIRS, P_INL, P_STREAM_NOPF, P_PAIRS_NOPF, P_INL_NOPF, P_N };
static const char *const P_NAME[P_N] = {"stream", "pairs", "pairs inline", "stream, no prefetch", "pairs, no prefetch", "pairs inline, no pf"};

typedef struct {
    const unsigned char *buf;
    size_t tiles, tb, codes, sg;   /* tiles, bytes a tile, of its codes, of a group's scales */
    int pattern;
    uint64_t sink[64];
} rp_job;

/* acc[i] ^= the i-th 8 bytes of the 64-byte line at p: every byte loaded, eight independent
 * chains in registers (as the plain read's loads, which reach the bandwidth it reports) */
#define LDX(acc, p)                                                             \
    do {                                                                        \
        const uint64_t *q_ = (const uint64_t *)(const void *)(p);              \
        for (int i_ = 0; i_ < 8; i_++) (acc)[i_] ^= q_[i_];                    \
    } while (0)

static void rp_task(void *arg, int ith, int nth) {
    rp_job *j = (rp_job *)arg;
    size_t t0 = j->tiles * (size_t)ith / (size_t)nth, t1 = j->tiles * (size_t)(ith + 1) / (size_t)nth;
    t0 &= ~(size_t)1;   /* whole pairs */
    t1 &= ~(size_t)1;
    const size_t tb = j->tb, nb = j->codes / 256;
    const int pf = j->pattern < P_STREAM_NOPF;
    const size_t pfo = (size_t)SD_I8_PF_TILES * tb;
    const unsigned char *b = j->buf;
    uint64_t acc[8] = {0};
    if (j->pattern == P_STREAM || j->pattern == P_STREAM_NOPF) {
        for (size_t o = t0 * tb; o < t1 * tb; o += 64) {
            if (pf) __builtin_prefetch(b + o + pfo, 0, 3);
            LDX(acc, b + o);
        }
    } else if (j->pattern == P_INL || j->pattern == P_INL_NOPF) {
        const size_t gb = tb / (nb / 2);
        for (size_t t = t0; t < t1; t += 2) {
            const unsigned char *tp[2] = {b + t * tb, b + (t + 1) * tb};
            for (size_t g = 0; g < nb / 2; g++) {
                for (int k = 0; k < 2; k++) {
                    const unsigned char *s = tp[k] + g * gb;
                    if (pf) __builtin_prefetch(s + pfo, 0, 3);
                    LDX(acc, s);
                }
                for (int bb = 0; bb < 2; bb++)
                    for (int k = 0; k < 2; k++)
                        for (int u = 0; u < 4; u++) {
                            const unsigned char *w = tp[k] + g * gb + 64 + bb * 256 + 64 * (size_t)u;
                            if (pf) __builtin_prefetch(w + pfo, 0, 3);
                            LDX(acc, w);
                        }
            }
        }
    } else {
        for (size_t t = t0; t < t1; t += 2) {
            const unsigned char *tp[2] = {b + t * tb, b + (t + 1) * tb};
            for (size_t blk = 0; blk < nb; blk++) {
                if (blk % 2 == 0)   /* a group of 64 columns: both tiles' scales */
                    for (int k = 0; k < 2; k++) {
                        const unsigned char *s = tp[k] + j->codes + blk / 2 * j->sg;
                        if (pf) __builtin_prefetch(s + pfo, 0, 3);
                        LDX(acc, s);
                    }
                for (int k = 0; k < 2; k++)
                    for (int u = 0; u < 4; u++) {
                        const unsigned char *w = tp[k] + blk * 256 + 64 * (size_t)u;
                        if (pf) __builtin_prefetch(w + pfo, 0, 3);
                        LDX(acc, w);
                    }
            }
            for (int k = 0; k < 2; k++)   /* the biases (and the rest of the tile) */
                for (size_t o = j->codes + (nb / 2) * j->sg; o < tb; o += 64) LDX(acc, tp[k] + o);
        }
    }
    j->sink[ith & 63] = acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
}

int main(int argc, char **argv) {
    const int nth = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 9;
    const int cols = argc > 3 ? atoi(argv[3]) : 2048;
    if (nth < 1 || rounds < 1 || rounds > 64 || cols < 128 || cols % 128) {
        fprintf(stderr, "usage: bench_read_pattern [threads >= 1] [rounds 1..64] [cols, a multiple of 128]\n");
        return 2;
    }
    const size_t bytes = (size_t)1 << 30, codes = (size_t)cols / 32 * 256, sg = (size_t)SD_I8_TILE * 2;
    const size_t tb = (codes + 2 * (size_t)(cols / 64) * sg + 63) / 64 * 64;
    unsigned char *buf = NULL;
    if (posix_memalign((void **)&buf, 64, bytes) != 0) { fprintf(stderr, "bench_read_pattern: out of memory\n"); return 1; }
    for (size_t i = 0; i < bytes; i++) buf[i] = (unsigned char)(i * 131u);
    sd_pool *p = sd_pool_create(nth);
    if (!p) { fprintf(stderr, "bench_read_pattern: no pool\n"); return 1; }
    rp_job j;
    memset(&j, 0, sizeof j);
    j.buf = buf; j.tiles = bytes / tb; j.tb = tb; j.codes = codes; j.sg = sg;
    double gbs[P_N][64];
    for (int r = -1; r < rounds; r++)
        for (int k = 0; k < P_N; k++) {
            j.pattern = k;
            const double t = now_s();
            sd_pool_run(p, rp_task, &j);
            const double s = now_s() - t;
            if (r >= 0) gbs[k][r] = (double)(j.tiles & ~(size_t)1) * (double)tb / s / 1e9;
        }
    double plain = 0, plain_med = 0;
    measure_bw(p, 5, &plain, &plain_med);
    printf("bench_read_pattern: threads=%d rounds=%d cols=%d tile %zu bytes, prefetch %d tiles ahead\n", nth, rounds, cols,
           tb, SD_I8_PF_TILES);
    printf("plain read (bench_util.h, best of 5, median): %.2f GB/s, %.2f GB/s\n", plain / 1e9, plain_med / 1e9);
    for (int k = 0; k < P_N; k++) {
        double v[64];
        memcpy(v, gbs[k], sizeof(double) * (size_t)rounds);
        const double med = median(v, rounds);   /* sorts v */
        printf("%-20s GB/s median %6.2f  min %6.2f  max %6.2f\n", P_NAME[k], med, v[0], v[rounds - 1]);
    }
    uint64_t chk = 0;
    for (int i = 0; i < 64; i++) chk ^= j.sink[i];
    if (chk == 42) printf("(checksum)\n");
    sd_pool_free(p);
    free(buf);
    return 0;
}
