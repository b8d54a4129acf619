/* bench_amx_tiles.c: what the AMX tile instructions cost on the running CPU, the numbers behind
 * the AMX form's design and its rule (src/cpu/ops_i8_amx.c): ns per tdpbsud at K = 32 / 64 columns
 * and 2..16 rows of A, independent and chained; a tile store of C; one item of the kernel's
 * sequence (load A and B, zero C, product, store C) with one and two register sets; the 4-bit
 * unpacking of an item (8 loads, 16 stores) alone and beside the item. One thread, 10^6
 * repetitions per line after the process asked Linux for the tile state. Prints "no AMX" and
 * exits 0 where the CPU or OS gives none. Usage: bench_amx_tiles */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg_t;
#define L(t, p) __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"((const void *)(p)), "r"(64L) : "memory")
#define S(t, p) __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"((void *)(p)), "r"(64L) : "memory")
#define Z(t) __asm__ volatile("tilezero %%tmm" #t ::: "memory")
#define D(c, a, b) __asm__ volatile("tdpbsud %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::: "memory")

static _Alignas(64) unsigned char A[2][1024], B[8][1024], C[8][1024], W[64][512];

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void config(int m, int k) {
    cfg_t c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 2; i++) { c.rows[i] = (uint8_t)m; c.colsb[i] = (uint16_t)k; }
    for (int i = 2; i < 4; i++) { c.rows[i] = (uint8_t)(k / 4); c.colsb[i] = 64; }
    for (int i = 4; i < 8; i++) { c.rows[i] = (uint8_t)m; c.colsb[i] = 64; }
    __asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory");
}

__attribute__((target("avx512f,avx512bw"))) static void unpack(const unsigned char *w, unsigned char *dst) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int u = 0; u < 8; u++) {
        const __m512i v = _mm512_loadu_si512(w + 64 * u);
        _mm512_store_si512(dst + 128 * u, _mm512_and_si512(v, m4));
        _mm512_store_si512(dst + 128 * u + 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
    }
}

int main(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)) ||
        !__builtin_cpu_supports("avx512bw") || syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
        printf("no AMX here (CPU or OS)\n");
        return 0;
    }
    enum { N = 1000000 };
    printf("| what | rows of A | K | ns |\n| --- | --- | --- | --- |\n");
    static const int Ms[] = {2, 4, 8, 16}, Ks[] = {32, 64};
    for (int ki = 0; ki < 2; ki++)
        for (int mi = 0; mi < 4; mi++) {
            config(Ms[mi], Ks[ki]);
            L(0, A[0]); L(2, B[0]); L(3, B[1]);
            double t0 = now_s();
            for (long i = 0; i < N; i++) { D(4, 0, 2); D(5, 0, 3); D(6, 0, 2); D(7, 0, 3); }
            double t1 = now_s();
            for (long i = 0; i < N; i++) { D(4, 0, 2); D(4, 0, 3); D(4, 0, 2); D(4, 0, 3); }
            double t2 = now_s();
            printf("| tdpbsud, independent | %d | %d | %.2f |\n", Ms[mi], Ks[ki], (t1 - t0) / N / 4 * 1e9);
            printf("| tdpbsud, one chain | %d | %d | %.2f |\n", Ms[mi], Ks[ki], (t2 - t1) / N / 4 * 1e9);
        }
    for (int mi = 0; mi < 4; mi++) {
        const int m = Ms[mi];
        config(m, 64);
        double t0 = now_s();
        for (long i = 0; i < N; i++) S(4, C[0]);
        double t1 = now_s();
        for (long i = 0; i < N; i++) { L(0, A[0]); L(2, B[0]); Z(4); D(4, 0, 2); S(4, C[0]); }
        double t2 = now_s();
        for (long i = 0; i < N; i++) { L(0, A[0]); L(2, B[0]); Z(4); D(4, 0, 2); S(4, C[0]); L(1, A[1]); L(3, B[1]); Z(5); D(5, 1, 3); S(5, C[1]); }
        double t3 = now_s();
        for (long i = 0; i < N; i++) unpack(W[i & 63], B[i & 7]);
        double t4 = now_s();
        for (long i = 0; i < N; i++) { unpack(W[i & 63], B[(i + 4) & 7]); L(0, A[0]); L(2, B[i & 7]); Z(4); D(4, 0, 2); S(4, C[i & 3]); }
        double t5 = now_s();
        printf("| tile store of C | %d | 64 | %.2f |\n", m, (t1 - t0) / N * 1e9);
        printf("| item: load A, B, zero, product, store C; one set | %d | 64 | %.2f |\n", m, (t2 - t1) / N * 1e9);
        printf("| item, two sets alternating | %d | 64 | %.2f |\n", m, (t3 - t2) / N / 2 * 1e9);
        printf("| 4-bit unpacking of an item alone | - | 64 | %.2f |\n", (t4 - t3) / N * 1e9);
        printf("| item with the unpacking of a later item | %d | 64 | %.2f |\n", m, (t5 - t4) / N * 1e9);
    }
    __asm__ volatile("tilerelease" ::: "memory");
    return 0;
}
#else
int main(void) {
    printf("no AMX here (not x86-64 Linux)\n");
    return 0;
}
#endif
