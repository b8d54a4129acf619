/* mma_order.cuh: the order in which mma_i4.cu sums a row's 32 lane classes, as __host__
 * __device__ code, so selfcheck.cu runs the very steps the kernel runs against the xor butterfly
 * they must equal (cuda_backend.h, sd_cuda_selfcheck).
 *
 * The other matmul kernels give lane L of a row the chunks L, L + 32, ... and then sum the 32
 * lanes by the xor butterfly m = 16, 8, 4, 2, 1: a fixed binary tree whose level 1 adds classes
 * L and L ^ 16, level 2 those sums for L and L ^ 8, and so on (a + b == b + a exactly, so the
 * direction of each add does not matter). In bit-reversed order (index i -> class brev5(i)) each
 * level's pairs are neighbours: a stack of partial sums builds the tree as the classes finish.
 * mma_i4.cu gives warp w of a block the indices 8 w .. 8 w + 7 (a level-3 subtree: classes
 * (brev3(i) << 2) | brev2(w)) and adds the four subtrees as levels 4 and 5. */
#pragma once
#include "cuda/common.cuh"

SDC_HD constexpr int sdc_mq_brev3(int v) { return ((v & 1) << 2) | (v & 2) | ((v >> 2) & 1); }

/* The class of warp w's i-th chain (w 0..3, i 0..7). */
SDC_HD constexpr int sdc_mq_class(int w, int i) { return (sdc_mq_brev3(i) << 2) | ((w & 1) << 1) | ((w >> 1) & 1); }

/* Chain i's sums v into the warp's stack (st[k]: the pending subtree of level k, k = 0..2): at
 * each level a set bit of i adds the pending subtree and goes up, a clear one leaves v pending
 * there. After i = 7, v holds the warp's level-3 subtree. With i a constant the branches fold. */
template <int N>
SDC_HD void sdc_mq_push(int i, float (&v)[N], float (&st)[3][N]) {
#pragma unroll
    for (int k = 0; k < 3; k++) {
        if (!((i >> k) & 1)) {
#pragma unroll
            for (int e = 0; e < N; e++) st[k][e] = v[e];
            return;
        }
#pragma unroll
        for (int e = 0; e < N; e++) v[e] = st[k][e] + v[e];
    }
}

/* Levels 4 and 5: the four warps' subtrees. */
SDC_HD float sdc_mq_top(float w0, float w1, float w2, float w3) { return (w0 + w1) + (w2 + w3); }
