/* ops_i8.h: the integer-activation matmul (precision int8) over affine 4- and 8-bit weights.
 * Not a public interface: what the dispatcher (ops_i8.c) and the per-ISA kernels share.
 *
 * The activation row x is quantized once per call in blocks of 32 columns (sd_i8_quant_block):
 * D = max|x| / 127, xq = round(x * 127 / max|x|) in [-127, 127], so x_i ~ D * xq_i. A weight is
 * w = S_g * q + B_g (q unsigned, S and B per group of g >= 64 columns, g % 64 == 0), so
 *   y = sum_i w_i x_i ~ sum over blocks b  S_g(b) * D_b * I_b  +  sum over groups g  B_g * XG_g
 * with I_b = sum over the block of q_i * xq_i (an exact integer whatever the order) and
 * XG_g = sum over the group's blocks of D_b * X_b, X_b the sum of the block's codes (a per-token
 * value: the bias term is one multiply-add per group and row, not per column).
 *
 * The canonical recipe (every level gives exactly these bits, the scalar reference included). Per
 * token, in the preparation: XG_g = 0; for each block b of group g in order: XG_g = XG_g + D_b * X_b
 * (the product rounded, then the sum). Per row and token, two float chains in column order:
 *   accS = 0; for each block b:  accS = fma(S_g(b), (float)I_b * D_b, accS)
 *   accB = 0; for each group g:  accB = fma(B_g, XG_g, accB)
 *   y = accS + accB
 * The order depends only on cols and group, never on T, the tile or the thread split, and a row
 * is one lane of the kernels' vectors, so no horizontal sum is needed: batch-invariant by
 * construction.
 *
 * Why this recipe (measured, docs/benchmarks/cpu-int8-packed-*.md): the float work is 3
 * operations per 32 columns, row and token (convert, times D, one FMA), against 4 per 8 columns
 * (lane sums of 8 columns, each scaled and biased) before, which made the verify of a speculative
 * round compute-bound from T = 2.
 *
 * The packed weights (sd_i8_pack, made once when the matrix is uploaded to the CPU backend): the
 * rows in tiles of 16 (the last tile padded with zero rows), each tile one contiguous run of
 *   codes:  per block of 32 columns, SD_I8_QUADS(bits) quads of 64 bytes; quad u holds row r's
 *           4 bytes at bytes 4r .. 4r + 3 (a 32-bit lane per row):
 *             4-bit: byte i (i < 4) = column 8u + i in its low nibble, column 8u + 4 + i in its
 *                    high nibble (4 quads: the low nibbles pair with xq[8u .. 8u + 3], the high
 *                    ones with xq[8u + 4 .. 8u + 7]);
 *             8-bit: byte i = column 4u + i (8 quads, pairing with xq[4u .. 4u + 3]);
 *   scales: per group, the 16 rows' S in the matrix's own dtype (f32, f16 or bf16; exact as f32);
 *   biases: the same for B;
 * in one of two arrangements, the same bytes (sd_i8_scales / _biases / _codes find them):
 *   grouped: group after group, each its 16 scales, its 16 biases (together 64 bytes, 128 for
 *            f32) and its codes: a tile is one stream of reads front to back;
 *   runs:    all the tile's codes, then all its scales, then all its biases (padded to 64 bytes).
 * Grouped where a tile is at least SD_I8_GROUPED_MIN bytes, runs below. Why (measured on a Zen 5,
 * docs/benchmarks/cpu-grouped-tiles-zen5-2026-12-07.md): the one-token walk takes tiles in pairs,
 * so runs make six streams of reads (two tiles' codes, scales and biases) and grouped two;
 * bench_read_pattern read tiles of 512 to 4096 4-bit columns (4.6-37 KB) grouped at 1.08-1.33x
 * the runs' speed, and the Qwen3 1.7B shape's classic decode (2048 columns) ran 1.03-1.16x faster
 * (its MTP decode 0.83-1.05x: no gain there); but tiles of 256 and 384 columns (2.3 and 3.5 KB)
 * read grouped at 0.62-0.79x, and the embedded model's LM head (384 columns) ran 1.15-1.45x
 * slower grouped (why is not known).
 * A kernel walks a tile front to back once per token tile, reading each quad as one vector whose
 * lanes are rows against 4 activation bytes broadcast to every lane (vpdpbusd, sdot by lane). */
#ifndef SD_OPS_I8_H
#define SD_OPS_I8_H
#include <stddef.h>
#include <stdint.h>
#include "cpu/ops_internal.h"
#include "cpu/pool.h"

#define SD_I8_BLOCK 32
#define SD_I8_MAXCOLS 32768   /* the preparation keeps a row on the stack */
#define SD_I8_TILE 16         /* rows per packed tile */
#define SD_I8_QUADS(bits) ((bits) == 4 ? 4 : 8)   /* 64-byte quads per block of 32 columns */

/* A matrix's codes, scales and biases in the packed tile layout above. */
typedef struct sd_i8_packed {
    int rows, cols, bits, group;
    specdec_dtype dtype;          /* of the scales and biases */
    int tiles, nkb, ng;           /* tiles of 16 rows, blocks of 32 columns, groups per row */
    size_t tile_bytes;            /* one tile, a multiple of 64 */
    int grouped;                  /* 1: each group's scales and biases in front of its codes; 0: runs */
    size_t s_off, b_off, c_off;   /* group 0's scales, biases and codes inside a tile */
    size_t g_sb, g_c;             /* bytes from one group's scales (or biases) / codes to the next's */
    unsigned char *buf;           /* tiles * tile_bytes, 64-byte aligned */
} sd_i8_packed;

/* One int8 matmul call as the kernels see it. */
typedef struct sd_i8_args {
    const sd_i8_packed *P;
    const int8_t *xq; int ldq;    /* (T, ldq) codes in column order (ldq = cols) */
    const float *d; int ldd;      /* (T, ldd) block scales D_b (ldd = nkb) */
    const float *xg; int ldg;     /* (T, ldg) group sums XG_g (ldg = ng) */
    float *y; int ldy;
    int T;
} sd_i8_args;

/* Whether the int8 path takes this matrix (affine 4/8-bit, group % 64 == 0, cols a multiple of
 * the group, at most SD_I8_MAXCOLS); other matrices keep the f32 path. The rule is
 * sd_i8_applies's (backend.h), the same on every backend. */
int sd_i8_supported(const sd_mat *W);
/* Quantize one block of n <= 32 values: q[i] in [-127, 127], returns d (0 for an all-zero or
 * non-finite block, whose q are then 0). */
float sd_i8_quant_block(const float *x, int n, int8_t *q);
/* The same results (q and d, bit for bit) by a vectorizable route; what sd_i8_prep uses. */
float sd_i8_quant_block_fast(const float *x, int n, int8_t *q);
/* The prepared activations of one token: xq[cols], d[cols / 32], xg[cols / group]. */
void sd_i8_prep(const float *x, int cols, int group, int8_t *xq, float *d, float *xg);
/* The same preparation, bit for bit, with 256-bit vectors (NULL where this build or CPU has no AVX2). */
typedef void (*sd_i8_prep_fn)(const float *x, int cols, int group, int8_t *xq, float *d, float *xg);
sd_i8_prep_fn sd_i8_prep_avx2(void);

/* Pack W (sd_i8_supported) into out (buf malloc'd, 64-byte aligned). Returns 0, or -1 when out of
 * memory (out->buf NULL). */
int sd_i8_pack(const sd_mat *W, sd_i8_packed *out);
/* The same, the tiles split over the pool (p NULL: the caller alone). */
int sd_i8_pack_on(const sd_mat *W, sd_i8_packed *out, sd_pool *p);
void sd_i8_pack_free(sd_i8_packed *p);

/* The recipe in plain C over packed weights (the portable level's kernel): rows [r0, r1), r0 a
 * multiple of 16. */
void sd_i8_rows_c(const sd_i8_args *a, int r0, int r1);
/* Scalar reference straight from the definition over the matrix's own layout (x as floats;
 * quantizes each block itself). */
void sd_i8_matmul_ref(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T);
/* The fast int8 matmul with a level's kernel (rows NULL: sd_i8_rows_c) and preparation (prep NULL:
 * sd_i8_prep), split over the pool by tiles of rows. P: W packed (NULL: packed here for this call
 * alone, slow; the CPU backend packs each matrix once at upload). */
typedef void (*sd_i8_rows_fn)(const sd_i8_args *a, int r0, int r1);
void sd_i8_matmul(sd_i8_rows_fn rows, sd_i8_prep_fn prep, const sd_mat *W, const float *x, int ldx, float *y, int ldy,
                  int T, sd_pool *p);

/* The fused LM head's greedy choice: out[t] = the index of the largest of W x_t (the logits
 * sd_i8_matmul gives, bit for bit; the lowest index wins ties, NaN never wins, all NaN gives 0:
 * sd_argmax's contract), each thread picking over its own rows while they are in its cache.
 * scratch: sd_i8_argmax_scratch(rows, T, threads of p) floats. Returns -1 (nothing done) when W
 * is not packed or out of scratch memory. */
int sd_i8_matmul_argmax(sd_i8_rows_fn rows, sd_i8_prep_fn prep, const sd_mat *W, const float *x, int ldx, int T,
                        sd_pool *p, float *scratch, int32_t *out);
size_t sd_i8_argmax_scratch(int rows, int T, int threads);

/* n <= SD_I8_N_MAX packed matrices of the same width and group over one x (q, k, v; gate, up):
 * one preparation and one pool run where sd_i8_matmul would make n, each value bit for bit
 * sd_i8_matmul's. Returns -1 (nothing done) when a matrix is not packed or the shapes differ, or
 * out of scratch memory; the caller then multiplies one matrix at a time. */
#define SD_I8_N_MAX 3
int sd_i8_matmul_n(sd_i8_rows_fn rows, sd_i8_prep_fn prep, int n, const sd_mat *const *W, const float *x, int ldx,
                   float *const *y, const int *ldy, int T, sd_pool *p);

/* A kernel file's six forms and their dispatcher. Each file writes one kernel KIND(a, r0, r1, bits,
 * scale dtype) whose body the compiler specializes when the two are constants; SD_I8_FORMS(name,
 * ATTR, KIND) defines name_q4_f32 ... name_q8_bf16 (bits 4 / 8 x scales f32 / f16 / bf16), each
 * KIND with constants under the function attribute ATTR (empty for none), and name(), the
 * sd_i8_rows_fn that picks one by the packed matrix's bits and scale dtype. */
static inline int sd_i8_form(const sd_i8_packed *P) {
    return 3 * (P->bits == 8) + (P->dtype == SPECDEC_DTYPE_F16 ? 1 : P->dtype == SPECDEC_DTYPE_BF16 ? 2 : 0);
}
#define SD_I8_FORM_(name, sfx, ATTR, KIND, BITS, DT) \
    ATTR static void name##_##sfx(const sd_i8_args *a, int r0, int r1) { KIND(a, r0, r1, BITS, DT); }
#define SD_I8_FORMS(name, ATTR, KIND)                                                                     \
    SD_I8_FORM_(name, q4_f32, ATTR, KIND, 4, SPECDEC_DTYPE_F32)                                           \
    SD_I8_FORM_(name, q4_f16, ATTR, KIND, 4, SPECDEC_DTYPE_F16)                                           \
    SD_I8_FORM_(name, q4_bf16, ATTR, KIND, 4, SPECDEC_DTYPE_BF16)                                         \
    SD_I8_FORM_(name, q8_f32, ATTR, KIND, 8, SPECDEC_DTYPE_F32)                                           \
    SD_I8_FORM_(name, q8_f16, ATTR, KIND, 8, SPECDEC_DTYPE_F16)                                           \
    SD_I8_FORM_(name, q8_bf16, ATTR, KIND, 8, SPECDEC_DTYPE_BF16)                                         \
    static void name(const sd_i8_args *a, int r0, int r1) {                                               \
        static void (*const k[6])(const sd_i8_args *, int, int) = {name##_q4_f32, name##_q4_f16,          \
                                                                   name##_q4_bf16, name##_q8_f32,         \
                                                                   name##_q8_f16, name##_q8_bf16};        \
        k[sd_i8_form(a->P)](a, r0, r1);                                                                   \
    }

/* Per-level kernels; NULL when this build or CPU has none (the level then uses sd_i8_rows_c). */
sd_i8_rows_fn sd_i8_rows_avx512(void);   /* AVX-512 VNNI */
sd_i8_rows_fn sd_i8_rows_avx2(void);     /* AVX-VNNI when the CPU has it, else maddubs */
sd_i8_rows_fn sd_i8_rows_neon(void);     /* sdot when the CPU has it, else widening multiplies */
/* The AVX2 level's two forms by name: vnni 1 = AVX-VNNI (NULL when the CPU lacks it), 0 = maddubs.
 * Both give the same bits; calibration times them and sd_i8_avx2_prefer_vnni(0) makes
 * sd_i8_rows_avx2 hand out maddubs where it measured faster (default: VNNI where present). */
sd_i8_rows_fn sd_i8_rows_avx2_form(int vnni);
void sd_i8_avx2_prefer_vnni(int on);
/* Tests and benchmarks: 1 makes sd_i8_rows_avx2 hand out the maddubs form even with AVX-VNNI. */
extern int sd_i8_avx2_novnni;
/* The AVX-512 level's AMX form (ops_i8_amx.c): several tokens through the tile unit, one token by
 * the VNNI kernel; the same bits. NULL where the CPU, the OS or the hypervisor gives no AMX (the
 * first call asks Linux for the tile state). sd_i8_avx512_prefer_amx(1) makes the AVX-512 level's
 * int8 op use it (calibration sets it where AMX measured faster; off until then). */
sd_i8_rows_fn sd_i8_rows_amx(void);
void sd_i8_avx512_prefer_amx(int on);
int sd_i8_avx512_amx_preferred(void);
/* Tests: 1 makes the AMX form take every call of T >= 2 (its rule otherwise leaves the calls where
 * it measured no faster to the VNNI kernel). */
extern int sd_i8_amx_always;

/* A matrix larger than a core's L2 (1 MB on Zen 4 / 5; the LM head) is streamed: the x86 kernels
 * prefetch it SD_I8_PF_TILES tiles ahead, and the AMX form's rule treats it apart. */
#define SD_I8_PF_TILES 2
static inline int sd_i8_streamed(const sd_i8_packed *P) { return (size_t)P->tiles * P->tile_bytes >= ((size_t)1 << 20); }

/* Tiles of at least this many bytes are packed grouped (the layout above says why). */
#define SD_I8_GROUPED_MIN 4096

/* Where tile t of P starts. */
static inline const unsigned char *sd_i8_tile(const sd_i8_packed *P, int t) { return P->buf + (size_t)t * P->tile_bytes; }

/* Group g of the tile starting at tp: its 16 scales, its 16 biases, its first block of codes; and
 * block b's codes (b counted from the row's start). Either arrangement (sd_i8_packed.grouped). */
static inline const unsigned char *sd_i8_scales(const sd_i8_packed *P, const unsigned char *tp, int g) {
    return tp + P->s_off + (size_t)g * P->g_sb;
}
static inline const unsigned char *sd_i8_biases(const sd_i8_packed *P, const unsigned char *tp, int g) {
    return tp + P->b_off + (size_t)g * P->g_sb;
}
static inline const unsigned char *sd_i8_codes(const sd_i8_packed *P, const unsigned char *tp, int g) {
    return tp + P->c_off + (size_t)g * P->g_c;
}
static inline const unsigned char *sd_i8_block(const sd_i8_packed *P, const unsigned char *tp, int b) {
    const int bpg = P->group / SD_I8_BLOCK;
    return sd_i8_codes(P, tp, b / bpg) + (size_t)(b % bpg) * SD_I8_QUADS(P->bits) * 64;
}

/* Tokens t0 .. t0 + nt - 1 of a call: each one's codes, block scales and group sums. */
static inline void sd_i8_tokens(const sd_i8_args *a, int t0, int nt, const int8_t **xq, const float **d, const float **xg) {
    for (int t = 0; t < nt; t++) {
        xq[t] = a->xq + (size_t)(t0 + t) * a->ldq;
        d[t] = a->d + (size_t)(t0 + t) * a->ldd;
        xg[t] = a->xg + (size_t)(t0 + t) * a->ldg;
    }
}

#endif
