/* ops_i8_amx.c: the int8-activation matmul over packed tiles (ops_i8.h) with Intel AMX, for
 * several tokens at once (the verify of a speculative round, prefill). AMX's tile unit does a
 * (rows of activations x 64 columns) by (64 columns x 16 weight rows) integer product in one
 * instruction (tdpbsud: signed activation bytes times unsigned weight bytes, sums of four products
 * into 32-bit lanes, exactly), where AVX-512 VNNI needs 16 vpdpbusd per token on the one port that
 * runs them: the verify's LM head at T = 4 to 5 was bound by that port.
 *
 * Why the results are the recipe's (ops_i8.h): the unit gives, per block b of 32 columns, token t
 * and row r, the integer I_b the other levels sum in another order; the float work after it is
 * the VNNI kernel's, lane by lane and in the same order (convert, times D_b, one FMA by the group's
 * scales; the biases' FMAs per group after the blocks). So every level and every T gives the same
 * bits.
 *
 * Operands, per item (one tile of 16 rows x one block pair of 64 columns): A = 2 NT rows of 64
 * bytes, row 2t + h holding token t's block h of the pair in one half and zeros in the other, so
 * one product over 64 columns keeps the two blocks' sums apart (made once per call from the
 * prepared codes); B = the pair's 16 weight rows as 16 rows of 64 bytes (row i: each weight row's
 * columns 4i .. 4i + 3, the packed quad layout: 8-bit codes are read in place, 4-bit ones split
 * into nibbles in a ring buffer DIST items ahead); C = 2 NT rows of 16 sums, stored and read back
 * CDELAY items later. Nothing is read soon after it was written: a tile load of a buffer whose
 * stores have not reached the cache waits for them, and so would vector loads of a C tile stored
 * just before. Alternate items use two register sets (tmm0/2/4, tmm1/3/5; bench_amx_tiles measured
 * them no faster than one: the product and the store are the bound). The tile instructions
 * are inline assembly with memory clobbers (the compilers' intrinsics do not tell the optimizer
 * that a tile load reads the buffer just written).
 *
 * Measured costs on the Xeon of docs/benchmarks/cpu-amx-xeon-2026-12-05.md: a product ~16 cycles
 * whatever the rows, a tile store as long, unpacking a 4-bit item ~20: ~16 ns an item against
 * VNNI's ~5 ns a token, so the form pays only from 4 tokens (amx_pays), and the calls it does not
 * take go to the VNNI kernel.
 *
 * Linux hands AMX's 8 KB of tile state to a process only on request (arch_prctl
 * ARCH_REQ_XCOMP_PERM): sd_i8_rows_amx asks once and returns NULL where the CPU, the kernel or the
 * hypervisor says no. */
#include "cpu/ops_i8.h"
#include <immintrin.h>
#include <string.h>
#include "cpu/ops_simd.h"
#if defined(__linux__)
#include <cpuid.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni,gfni")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vnni,gfni"))), apply_to = function)
#endif

#define NT_MAX 8                /* tokens per tile of tokens: 2 x 8 accumulators */

/* The palette-1 tile configuration (64 bytes, the layout ldtilecfg reads). */
typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

#define T_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"((const void *)(base)), "r"((long)(stride)) : "memory")
#define T_STORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"((void *)(base)), "r"((long)(stride)) : "memory")
#define T_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::: "memory")
/* c += a (signed bytes) . b (unsigned bytes) */
#define T_DPBSUD(c, a, b) __asm__ volatile("tdpbsud %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::: "memory")

/* A: 2 NT rows of 64 bytes (row 2t + h: token t's block h of a block pair in bytes 32h .. 32h + 31,
 * zeros in the other half, so one instruction over 64 columns keeps the two blocks' sums apart);
 * B: 16 rows of 64 bytes (a block pair of 16 weight rows); C: 2 NT rows of 16 sums. Two sets
 * (tmm0/2/4 and tmm1/3/5) for alternate items, so one item's products overlap the other's loads
 * and stores. */
static void tiles_config(int nt) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 2; i++) { c.rows[i] = (uint8_t)(2 * nt); c.colsb[i] = 64; }       /* A */
    for (int i = 2; i < 4; i++) { c.rows[i] = 16; c.colsb[i] = 64; }                     /* B */
    for (int i = 4; i < 6; i++) { c.rows[i] = (uint8_t)(2 * nt); c.colsb[i] = 64; }       /* C */
    __asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory");
}

static void tiles_release(void) { __asm__ volatile("tilerelease" ::: "memory"); }

SD_AINLINE __m512 load16(const specdec_dtype dt, const unsigned char *p) { return sd_load16(dt, p, (__mmask16)0xFFFF); }

/* A block pair of one tile's 4-bit codes (2 x 4 quads) as the B operand (1 KB): quad u's low
 * nibbles are columns 8u .. 8u + 3 of its block (B row 8h + 2u), its high nibbles B row 8h + 2u + 1. */
SD_AINLINE void unpack_bp(const unsigned char *w, unsigned char *dst) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* each byte's high nibble moved down, the rest zero, in one instruction: the bit matrix of
     * gf2p8affine (row 7 - i picks the source bit of result bit i: bits 4..7 for i = 0..3) */
    const __m512i hi = _mm512_set1_epi64(0x1020408000000000LL);
    for (int u = 0; u < 8; u++) {
        const __m512i v = _mm512_loadu_si512(w + 64 * u);
        _mm512_store_si512(dst + 128 * u, _mm512_and_si512(v, m4));
        _mm512_store_si512(dst + 128 * u + 64, _mm512_gf2p8affine_epi64_epi8(v, hi, 0));
    }
}

#define AMX_MAX_A (64u << 10)   /* the A operands of a call on the stack: 2 NT x 64 bytes per block pair */
#define RING 4                  /* unpacked B operands in flight */
#define DIST 3                  /* an item's weights are unpacked DIST items before its product */
#define CDELAY 2                /* an item's sums are read back CDELAY items after they are stored */

/* Rows [r0, r1) against tokens t0 .. t0 + NT - 1 (the tile configuration set for NT), as one stream
 * of items (tile, block pair), nothing read soon after it was written: a tile load of a buffer
 * whose stores have not reached the cache waits for them (no forwarding), and vector loads of a
 * C tile stored just before would wait the same way. */
SD_AINLINE void rows_nt(const sd_i8_args *a, int r0, int r1, int t0, const int NT, const int bits, const specdec_dtype dt) {
    const sd_i8_packed *P = a->P;
    const int nq = SD_I8_QUADS(bits), nbp = P->nkb / 2;
    const int pf = t0 == 0 && sd_i8_streamed(P) ? SD_I8_PF_TILES : 0;
    const size_t pfo = (size_t)pf * P->tile_bytes;
    const int8_t *xq[NT_MAX];
    const float *dv[NT_MAX], *xg[NT_MAX];
    sd_i8_tokens(a, t0, NT, xq, dv, xg);
    const int tile0 = r0 / SD_I8_TILE, ntiles = (r1 - r0 + SD_I8_TILE - 1) / SD_I8_TILE, n = ntiles * nbp;
    _Alignas(64) unsigned char abuf[AMX_MAX_A];
    _Alignas(64) unsigned char ring[RING][1024];
    _Alignas(64) int32_t cbuf[CDELAY + 1][2 * NT_MAX * 16];
    const size_t arow = (size_t)2 * NT * 64;
    for (int bp = 0; bp < nbp; bp++)
        for (int t = 0; t < NT; t++)
            for (int h = 0; h < 2; h++) {
                unsigned char *row = abuf + (size_t)bp * arow + (size_t)(2 * t + h) * 64;
                memset(row + 32 * (1 - h), 0, 32);
                memcpy(row + 32 * h, xq[t] + (size_t)(2 * bp + h) * SD_I8_BLOCK, 32);
            }
    __m512 acc[NT_MAX];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    if (bits == 4)
        for (int j = 0; j < DIST && j < n; j++)
            unpack_bp(sd_i8_block(P, sd_i8_tile(P, tile0 + j / nbp), 2 * (j % nbp)), ring[j % RING]);
    for (int j = 0; j < n + CDELAY; j++) {
        if (j < n) {
            const int bp = j % nbp;
            /* a block pair lies in one group (a group is a whole number of pairs), so its 2 nq
             * quads are contiguous */
            const unsigned char *tq = sd_i8_tile(P, tile0 + j / nbp), *bpw = sd_i8_block(P, tq, 2 * bp), *bsrc;
            if (pf) {
                for (int u = 0; u < 2 * nq; u++) _mm_prefetch((const char *)bpw + pfo + 64 * u, _MM_HINT_T0);
                if ((2 * bp * SD_I8_BLOCK) % P->group == 0) {   /* the group's first pair: its scales and biases */
                    const int g = 2 * bp * SD_I8_BLOCK / P->group;
                    _mm_prefetch((const char *)sd_i8_scales(P, tq, g) + pfo, _MM_HINT_T0);
                    _mm_prefetch((const char *)sd_i8_biases(P, tq, g) + pfo, _MM_HINT_T0);
                }
            }
            if (bits == 4) {
                if (j + DIST < n)
                    unpack_bp(sd_i8_block(P, sd_i8_tile(P, tile0 + (j + DIST) / nbp), 2 * ((j + DIST) % nbp)),
                              ring[(j + DIST) % RING]);
                bsrc = ring[j % RING];
            } else {
                bsrc = bpw;   /* 8-bit: the packed block pair is the operand */
            }
            int32_t *cb = cbuf[j % (CDELAY + 1)];
            const unsigned char *ap = abuf + (size_t)bp * arow;
            if (j & 1) {
                T_LOAD(1, ap, 64);
                T_LOAD(3, bsrc, 64);
                T_ZERO(5);
                T_DPBSUD(5, 1, 3);
                T_STORE(5, cb, 64);
            } else {
                T_LOAD(0, ap, 64);
                T_LOAD(2, bsrc, 64);
                T_ZERO(4);
                T_DPBSUD(4, 0, 2);
                T_STORE(4, cb, 64);
            }
        }
        if (j >= CDELAY) {   /* item i's float work, in the recipe's order */
            const int i = j - CDELAY, bp = i % nbp, b = 2 * bp, g = b * SD_I8_BLOCK / P->group, tile = tile0 + i / nbp;
            const unsigned char *tp = sd_i8_tile(P, tile);
            const int32_t *cb = cbuf[i % (CDELAY + 1)];
            const __m512 S = load16(dt, sd_i8_scales(P, tp, g));
            for (int t = 0; t < NT; t++) {
                const __m512 F0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb + 32 * t)), _mm512_set1_ps(dv[t][b]));
                acc[t] = _mm512_fmadd_ps(S, F0, acc[t]);
                const __m512 F1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb + 32 * t + 16)),
                                                _mm512_set1_ps(dv[t][b + 1]));
                acc[t] = _mm512_fmadd_ps(S, F1, acc[t]);
            }
            if (bp == nbp - 1) {   /* the tile's last block pair: biases, store, reset */
                const int rr = tile * SD_I8_TILE, nr = r1 - rr < SD_I8_TILE ? r1 - rr : SD_I8_TILE;
                const __mmask16 om = (__mmask16)(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
                for (int t = 0; t < NT; t++) {
                    __m512 accB = _mm512_setzero_ps();
                    for (int gg = 0; gg < P->ng; gg++)
                        accB = _mm512_fmadd_ps(load16(dt, sd_i8_biases(P, tp, gg)), _mm512_set1_ps(xg[t][gg]), accB);
                    _mm512_mask_storeu_ps(a->y + (size_t)(t0 + t) * a->ldy + (size_t)rr, om, _mm512_add_ps(acc[t], accB));
                    acc[t] = _mm512_setzero_ps();
                }
            }
        }
    }
}

static sd_i8_rows_fn g_avx512;   /* the calls AMX does not take, and the tokens past the last whole tile of 8 */

/* Where the tile unit beats VNNI (bench/bench_i8.c, docs/benchmarks/cpu-amx-xeon-2026-12-05.md):
 * per (16 rows, 64 columns) it costs a product, a tile store and the 4-bit unpacking, ~16 ns
 * whatever the tokens (VNNI: ~5 ns a token), plus the same float work per token. So it pays from
 * T = 4 to 8 on a matrix streamed from L3 or DRAM (the LM head: 6-8% at T = 4, 7-12% at 5, 13-25%
 * at 8; past 8 tokens it walks the weights once per tile of 8 and measured -8% to +11% at 16) and
 * from T = 8 on one that sits in L2 (the layers' matrices: 10-22% at 8 and 16, even below). */
int sd_i8_amx_always;

static int amx_pays(const sd_i8_packed *P, int T) {
    if (sd_i8_amx_always) return T >= 2;
    const int streamed = sd_i8_streamed(P);
    return streamed ? T >= 4 && T <= NT_MAX : T >= NT_MAX;
}

SD_AINLINE void rows_kind(const sd_i8_args *a, int r0, int r1, const int bits, const specdec_dtype dt) {
    const int nt = a->T < NT_MAX ? a->T : NT_MAX, full = a->T / nt * nt;
    if (!amx_pays(a->P, a->T) || (size_t)a->P->nkb / 2 * 2 * nt * 64 > AMX_MAX_A) {
        g_avx512(a, r0, r1);
        return;
    }
    tiles_config(nt);
    for (int t0 = 0; t0 < full; t0 += nt) switch (nt) {
        case 2: rows_nt(a, r0, r1, t0, 2, bits, dt); break;
        case 3: rows_nt(a, r0, r1, t0, 3, bits, dt); break;
        case 4: rows_nt(a, r0, r1, t0, 4, bits, dt); break;
        case 5: rows_nt(a, r0, r1, t0, 5, bits, dt); break;
        case 6: rows_nt(a, r0, r1, t0, 6, bits, dt); break;
        case 7: rows_nt(a, r0, r1, t0, 7, bits, dt); break;
        default: rows_nt(a, r0, r1, t0, NT_MAX, bits, dt); break;
        }
    tiles_release();
    if (full < a->T) {   /* the rest (fewer than 8 tokens) by the AVX-512 kernel: the same bits */
        sd_i8_args rest = *a;
        rest.xq += (size_t)full * a->ldq;
        rest.d += (size_t)full * a->ldd;
        rest.xg += (size_t)full * a->ldg;
        rest.y += (size_t)full * a->ldy;
        rest.T = a->T - full;
        g_avx512(&rest, r0, r1);
    }
}

SD_I8_FORMS(rows, , rows_kind)

#if defined(__clang__)
#pragma clang attribute pop
#endif

#if defined(__linux__)
#define SD_ARCH_REQ_XCOMP_PERM 0x1023
#define SD_XFEATURE_XTILEDATA 18

static int g_amx_ok;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;

/* CPUID.(7,0):EDX bit 24 AMX-TILE, bit 25 AMX-INT8; the OS must have enabled the tile state in
 * XCR0 (bits 17 and 18) and give this process the tile data (a per-process permission). */
static void amx_probe(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return;
    if (!(c & (1u << 8))) return;   /* GFNI (the unpacking) */
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")) return;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return;   /* OSXSAVE: xgetbv is allowed */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return;
    if (syscall(SYS_arch_prctl, SD_ARCH_REQ_XCOMP_PERM, SD_XFEATURE_XTILEDATA) != 0) return;
    g_avx512 = sd_i8_rows_avx512();
    g_amx_ok = g_avx512 != NULL;
}

sd_i8_rows_fn sd_i8_rows_amx(void) {
    pthread_once(&g_amx_once, amx_probe);
    return g_amx_ok ? rows : (sd_i8_rows_fn)0;
}
#else
sd_i8_rows_fn sd_i8_rows_amx(void) { return (sd_i8_rows_fn)0; }
#endif
