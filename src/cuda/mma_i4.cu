/* mma_i4.cu: y (T, ldy) = x (T, ldx) . W^T for 4-bit weights against int8 activations
 * (SDC_MM_Q4I), rows of a multiple of 1024 columns, on the tensor cores: wide calls (prefill
 * chunks, verifies of 16 rows or more), where the dp4a kernels spend 8 of their 12 instructions
 * per chunk, row and token on the integer dot products.
 *
 * The integer part. A chunk (16 bytes of a row: 32 codes, one activation block) is one k-step of
 * mma.sync m16n8k32 (u8 codes x s8 activation codes, s32 sums): thread (g = lane / 4, q = lane %
 * 4) gives word q of the chunk of rows g and g + 8, its low nibbles as k = 4q..4q+3 and its high
 * nibbles as k = 16+4q..16+4q+3, and the activation words mm_chunk pairs with them (word q of
 * the block's low and high granules, mm_core.cuh's layout) for token g. A chunk's sum I per
 * (row, token) is an exact integer, so it equals the dp4a chain's.
 *
 * The float part, in the contract's order (matmul.cu): per (row, token) and chunk c,
 * acc = fmaf(s, I * d, acc), acc = fmaf(b, dY, acc) with the chunk's scale and bias and the
 * block's d and dY, chained over the chunks c = L, L + 32, L + 64, ... of each class L (what lane
 * L of the other kernels owns), then the 32 classes summed as the xor butterfly m = 16, 8, 4, 2, 1
 * sums them. That butterfly is a fixed binary tree: level 1 adds class L and L ^ 16, level 2 those
 * sums for L and L ^ 8, and so on (a + b == b + a exactly, so which lane adds which way does not
 * matter). Walking the classes in bit-reversed order (0, 16, 8, 24, 4, ...) makes each level's
 * pairs neighbours, so a stack of partial sums rebuilds the tree as the classes finish. A block
 * is 4 warps on one tile of 16 rows x 16 tokens; warp w takes the classes of bit-reversed index
 * 8 w .. 8 w + 7 (a level-3 subtree) and warp 0 adds the four subtrees as levels 4 and 5 do.
 * So every row gets the bits of gemv_i4.cu's, gemv.cu's and the tiled kernel's, at any T.
 *
 * Measured on an H100 (docs/benchmarks/cuda-prefill-mma-h100-2026-12-07.md): 0.70-0.85x the
 * tiled kernel's time on the 8B shape's layer matrices and LM head at T = 16, 32, 64, and a
 * 512-token prefill 1.43x faster. The default's rule (matmul.cu) now gives it the calls of 16 to 31
 * tokens and of matrices under 2048 rows; mma_tile.cu's kernel, the same computation staged, the
 * rest.
 * Its tensor cores still idle most of the time (16 tokens a warp, every operand straight from
 * global memory): llama.cpp's pp512 on the same shape ran 6x faster. */
#include "cuda/mma_i4.h"
#include "cuda/mm_core.cuh"
#include "cuda/mma_order.cuh"

namespace {

constexpr int MQ_WARPS = 4, MQ_ROWS = 16, MQ_NT = 2, MQ_TOK = 8 * MQ_NT, MQ_E = 4 * MQ_NT, MQ_JB = 4;

SDC_D void mq_mma(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
}

/* A thread's view of the call: its two rows and the tokens of its fragments. */
struct MqCtx {
    const uint32_t *wa, *wb;         /* word q of rows g, g + 8 */
    uintptr_t sa, sb, ba, bb;        /* those rows' first scale and bias, as byte addresses */
    const uint32_t *xt[MQ_NT];       /* token g of each token group: its prepared codes, as words */
    const float2 *sd[MQ_NT][2];      /* tokens 2q, 2q + 1: their blocks' (d, dY) */
    int gsh, es, q, sdt;
};

/* One chunk's loads, none used (as mm_load: scales and biases as the aligned words holding them). */
struct MqLoad {
    uint32_t w0, w1, s0, s1, b0, b1, x[MQ_NT][2];
    float2 e[MQ_NT][2];
    int hs0, hs1, hb0, hb1;
};

SDC_D void mq_load(const MqCtx &c, int ch, MqLoad &l) {
    l.w0 = __ldg(c.wa + 4 * ch);
    l.w1 = __ldg(c.wb + 4 * ch);
    const uintptr_t go = (uintptr_t)(ch >> c.gsh) * (uintptr_t)c.es;
    const uintptr_t as0 = c.sa + go, as1 = c.sb + go, ab0 = c.ba + go, ab1 = c.bb + go;
    l.s0 = __ldg((const uint32_t *)(as0 & ~(uintptr_t)3));
    l.s1 = __ldg((const uint32_t *)(as1 & ~(uintptr_t)3));
    l.b0 = __ldg((const uint32_t *)(ab0 & ~(uintptr_t)3));
    l.b1 = __ldg((const uint32_t *)(ab1 & ~(uintptr_t)3));
    l.hs0 = (int)((as0 >> 1) & 1);
    l.hs1 = (int)((as1 >> 1) & 1);
    l.hb0 = (int)((ab0 >> 1) & 1);
    l.hb1 = (int)((ab1 >> 1) & 1);
    const int lo = 4 * mm_swz(2 * ch) + c.q, hi = 4 * mm_swz(2 * ch + 1) + c.q;
#pragma unroll
    for (int n = 0; n < MQ_NT; n++) {
        l.x[n][0] = __ldg(c.xt[n] + lo);
        l.x[n][1] = __ldg(c.xt[n] + hi);
        l.e[n][0] = __ldg(c.sd[n][0] + ch);
        l.e[n][1] = __ldg(c.sd[n][1] + ch);
    }
}

/* A loaded chunk's contributions to the thread's elements: e = 4 n + k, k = 0 (row g, token
 * 2q), 1 (g, 2q + 1), 2 (g + 8, 2q), 3 (g + 8, 2q + 1) of token group n. */
SDC_D void mq_use(const MqCtx &c, const MqLoad &l, float (&a)[MQ_E]) {
    const uint32_t a0 = l.w0 & 0x0F0F0F0Fu, a1 = l.w1 & 0x0F0F0F0Fu;
    const uint32_t a2 = (l.w0 >> 4) & 0x0F0F0F0Fu, a3 = (l.w1 >> 4) & 0x0F0F0F0Fu;
    const float s0 = sdc_wordf(l.s0, l.hs0, c.sdt), s1 = sdc_wordf(l.s1, l.hs1, c.sdt);
    const float b0 = sdc_wordf(l.b0, l.hb0, c.sdt), b1 = sdc_wordf(l.b1, l.hb1, c.sdt);
#pragma unroll
    for (int n = 0; n < MQ_NT; n++) {
        int d[4];
        mq_mma(d, a0, a1, a2, a3, l.x[n][0], l.x[n][1]);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float s = k < 2 ? s0 : s1, b = k < 2 ? b0 : b1;
            const float2 e = l.e[n][k & 1];
            float &v = a[4 * n + k];
            v = fmaf(s, __fmul_rn((float)d[k], e.x), v);
            v = fmaf(b, e.y, v);
        }
    }
}

/* Class L's chain: chunks L, L + 32, ... (nj of them) in ascending order, loads a batch ahead of
 * their use. */
SDC_D void mq_class(const MqCtx &c, int L, int nj, float (&a)[MQ_E]) {
#pragma unroll
    for (int e = 0; e < MQ_E; e++) a[e] = 0.0f;
    int j = 0;
    for (; j + MQ_JB <= nj; j += MQ_JB) {
        MqLoad l[MQ_JB];
#pragma unroll
        for (int b = 0; b < MQ_JB; b++) mq_load(c, L + 32 * (j + b), l[b]);
#pragma unroll
        for (int b = 0; b < MQ_JB; b++) mq_use(c, l[b], a);
    }
    for (; j < nj; j++) {
        MqLoad l;
        mq_load(c, L + 32 * j, l);
        mq_use(c, l, a);
    }
}

__global__ void __launch_bounds__(MQ_WARPS * 32) mq_kernel(const sdc_mm_params p, const int nj) {
    __shared__ float part[MQ_WARPS - 1][32][MQ_E];
    sdc_grid_enter();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int r0 = blockIdx.x * MQ_ROWS, t0 = blockIdx.y * MQ_TOK;
    MqCtx c;
    {
        const int ra = min(r0 + g, p.rows - 1), rb = min(r0 + g + 8, p.rows - 1);   /* past the end: loaded, never stored */
        const size_t rw = (size_t)p.cols / 8;   /* 32-bit words a row */
        c.wa = (const uint32_t *)p.w + (size_t)ra * rw + q;
        c.wb = (const uint32_t *)p.w + (size_t)rb * rw + q;
        const int ngroups = p.cols / p.group;
        c.es = p.sdt == SDC_F32 ? 4 : 2;
        c.sa = (uintptr_t)p.scales + (uintptr_t)ra * (uintptr_t)ngroups * (uintptr_t)c.es;
        c.sb = (uintptr_t)p.scales + (uintptr_t)rb * (uintptr_t)ngroups * (uintptr_t)c.es;
        c.ba = (uintptr_t)p.biases + (uintptr_t)ra * (uintptr_t)ngroups * (uintptr_t)c.es;
        c.bb = (uintptr_t)p.biases + (uintptr_t)rb * (uintptr_t)ngroups * (uintptr_t)c.es;
        c.gsh = __ffs(p.group) - 6;   /* chunk ch lies in group ch >> gsh (group = 32 << gsh) */
        c.q = q;
        c.sdt = p.sdt;
        const size_t xw = (size_t)p.ncp * 8;   /* words of a token's codes (2 ncp granules of 4) */
#pragma unroll
        for (int n = 0; n < MQ_NT; n++) {
            const int tb = min(t0 + 8 * n + g, p.T - 1);
            c.xt[n] = (const uint32_t *)p.xq + (size_t)tb * xw;
#pragma unroll
            for (int k = 0; k < 2; k++) {
                const int tc = min(t0 + 8 * n + 2 * q + k, p.T - 1);
                c.sd[n][k] = (const float2 *)p.xsd + (size_t)tc * (size_t)p.ncp;
            }
        }
    }

    /* this warp's level-3 subtree (mma_order.cuh): its 8 classes' chains summed as the
     * butterfly's levels 1..3 */
    float st[3][MQ_E], v[MQ_E];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        mq_class(c, sdc_mq_class(warp, i), nj, v);
        sdc_mq_push<MQ_E>(i, v, st);
    }
    /* levels 4 and 5: (warp 0 + warp 1) + (warp 2 + warp 3) */
    if (warp > 0)
#pragma unroll
        for (int e = 0; e < MQ_E; e++) part[warp - 1][lane][e] = v[e];
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int e = 0; e < MQ_E; e++) {
        const float y = sdc_mq_top(v[e], part[0][lane][e], part[1][lane][e], part[2][lane][e]);
        const int n = e >> 2, k = e & 3;
        const int row = r0 + g + 8 * (k >> 1), t = t0 + 8 * n + 2 * q + (k & 1);
        if (row < p.rows && t < p.T) mm_store(p, row, t, y);
    }
}

} // namespace

extern "C" int sdc_mq_plan_for(const sdc_mm_params *p, int lma, sdc_mq_plan *pl) {
    if (lma || p->fmt != SDC_MM_Q4I || p->T < SDC_MQ_MIN_T || p->rows < 1 || !p->wvec || p->cols < 1024 ||
        p->cols % 1024 != 0)
        return 0;
    if (p->group < 32 || p->group > 1024 || (p->group & (p->group - 1)) != 0 || p->ncp != p->cols / 32) return 0;
    if (!p->xq || !p->xsd || !p->scales || !p->biases) return 0;
    if (p->sdt != SDC_F32 && p->sdt != SDC_F16 && p->sdt != SDC_BF16) return 0;
    pl->nj = p->cols / 1024;
    pl->gx = (p->rows + MQ_ROWS - 1) / MQ_ROWS;
    pl->gy = (p->T + MQ_TOK - 1) / MQ_TOK;
    return pl->gy <= 65535;
}

extern "C" cudaError_t sdc_mq_launch(const sdc_mq_plan *pl, const sdc_mm_params *p, const sdc_dev *d) {
    return sdc_launch(d, mq_kernel, dim3((unsigned)pl->gx, (unsigned)pl->gy), MQ_WARPS * 32, 0, *p, pl->nj);
}
