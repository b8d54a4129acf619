/* cuda_backend.h: what the CUDA backend offers beyond the backend table, for its tests and
 * benchmarks: the stream its ops are queued on (to time them with CUDA events) and the host-side
 * self-check of the device arithmetic that can be compared with the CPU's without a GPU. */
#ifndef SD_CUDA_BACKEND_H
#define SD_CUDA_BACKEND_H
#include <stddef.h>
#include <cuda_runtime_api.h>
#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The stream every op of a CUDA backend (name "cuda") runs on. */
cudaStream_t sd_cuda_stream(sd_backend *b);

/* Which matmul kernels every matmul and fused LM head of the process may take: GEMV (the
 * default), gemv_i4.cu's kernel where it applies (4-bit rows of whole 1024-column runs at int8,
 * T <= 8), else gemv.cu's kernel for T <= 8 where x fits in shared memory, else the tiled one
 * (matmul.cu); STREAM, the weight-streaming kernel (stream.cu) for T <= 8 where it applies, else
 * as GEMV (SPECDEC_CUDA_STREAM=1 at backend creation sets it); TILED, the tiled kernel for every
 * call; GENERIC, as GEMV without gemv_i4.cu's kernel (SPECDEC_CUDA_GI=0 at backend creation).
 * A row's bits are the same from each, only the speed differs. Read when an op is issued (a
 * recording keeps its kernels). */
enum { SD_CUDA_MM_GEMV = 0, SD_CUDA_MM_STREAM = 1, SD_CUDA_MM_TILED = 2, SD_CUDA_MM_GENERIC = 3 };
void sd_cuda_matmul_kernels(int which);
/* Rows a warp of gemv_i4.cu's kernel carries from T = 4 on: 0 (the default) its rule, 4 for
 * LM heads and 2 elsewhere; 2 or 4 for every matrix (SPECDEC_CUDA_GI_ROWS=2 or 4 at backend
 * creation; A/B runs). Same bits either way. */
void sd_cuda_gi_rows(int rows);
/* gemv_i4.cu's single-token kernels: 1 (the default) a warp loads its first batch of weights
 * into registers before its griddepcontrol.wait, while the kernel before it still runs; 0 it
 * only prefetches that batch towards L2 (SPECDEC_CUDA_GI_PRE=0 or 1 at backend creation; A/B
 * runs). Same bits either way: only when the loads are issued changes. Returns the setting before. */
int sd_cuda_gi_preload(int on);
/* The int8 preparation before a gemv_i4.cu launch (matmul, fused LM head, the MLP block's gate/up):
 * 1 it lets that launch start before its own griddepcontrol.wait (sdc_grid_release_early,
 * common.cuh), so the matmul's first batch is loaded while the kernel before the preparation
 * still runs (an attention, a matmul); 0 (the default) it lets it start after (SPECDEC_CUDA_GI_EARLY=0
 * or 1 at backend creation; A/B runs). Same bits either way. Returns the setting before. */
int sd_cuda_gi_early(int on);
/* The MLP block at int8 (norm_mlp_add): 1 (the default) gate and up with the SwiGLU and the
 * down projection's int8 preparation in their epilogue (gemv_i4.cu's gi_swq_kernel) where the
 * shape and T are those it measured faster on (sdc_gi_swq_plan); 2 wherever the kernel can take
 * the call (tests); 0 norm_matmul_n then swiglu_matmul_add (SPECDEC_CUDA_MLP=0, 1 or 2 at backend
 * creation; A/B runs). Same bits either way. */
void sd_cuda_mlp_fuse(int mode);
/* Tests: how many MLP blocks the process has queued as the fused launch so far. */
long sd_cuda_mlp_taken(void);
/* Int8 matmuls of 4-bit rows of whole 1024-column runs at T >= 16 (prefill chunks, wide
 * verifies): 3 (the default) a tensor-core kernel picked by the call's shape (matmul.cu), 1
 * mma_i4.cu's always, 2 mma_tile.cu's (its activations staged) always, 4 mma_tile.cu's with its
 * weights, scales and biases staged too, 0 the tiled dp4a kernel (SPECDEC_CUDA_MMA=0..4 at
 * backend creation; A/B runs; any other value is 3). Same bits in every mode. Returns the
 * setting before. */
int sd_cuda_mma(int mode);
/* Tests: mma_tile.cu's tokens a block, 8 x nt (2 or 4), whatever the call's shape; 0 (the
 * default) its rule (32, or 16 where 32 leaves most of the GPU idle). Returns the setting before. */
int sd_cuda_mma_tile_tokens(int nt);
/* Tests: how many of those matmuls took mma_tile.cu's kernel with its weights staged. */
long sd_cuda_mma_staged_taken(void);
/* Tests: how many matmuls the process has queued on mma_i4.cu's kernel so far. */
long sd_cuda_mma_taken(void);
/* The int8 norm preparation (matmul.cu's i8_prep_norm_kernel): 1 (the default) a token's quads
 * spread over blocks, one a warp, where the normed row does not overwrite x; 0 one block a token
 * (SPECDEC_CUDA_NORM_BLOCKS=0 at backend creation; A/B runs). Same bits either way. */
void sd_cuda_norm_blocks(int spread);
/* Tests: at most `blocks` blocks and `stages` stages (0: no cap) for the streaming kernel, so
 * small matrices take it through several tiles per block and reuse its stages. */
void sd_cuda_matmul_stream_cap(int blocks, int stages);
/* Which attention kernel every attention op of the process takes: 1 (the default) attn_staged.cu's,
 * 0 attention.cu's split kernel and its combine (SPECDEC_CUDA_ATTN=split or =staged at backend
 * creation sets it). The same bits either way. */
void sd_cuda_attention_kernel(int staged);
/* Under the staged kernel, the q/k head norms, RoPE and the KV stores inside the attention
 * launch (qk_norm_rope_attention; attention.h's sdc_attention_fused) for calls of up to 16 rows:
 * 1 (the default), or 0 their own launch before it (SPECDEC_CUDA_ATTN_FUSE=0 or 1 at backend
 * creation; A/B runs). Same bits either way. Returns the setting before. */
int sd_cuda_attention_fuse(int on);
/* Tests: how many attention launches the process has queued in the fused form so far. */
long sd_cuda_attention_fused_taken(void);
/* Under the staged kernel, the query rows a block of the unfused form serves in turn, sharing
 * the chunks of keys it stages: 0 (the default) the kernel's rule (the teams form below from 16
 * rows on; else 1 row), else that many, without teams (1..64; SPECDEC_CUDA_ATTN_ROWS at backend
 * creation; A/B runs, tests). Same bits for any value. Returns the setting before. */
int sd_cuda_attention_rows(int rows);
/* Under the staged kernel and rows 0, the teams form (attn_staged.cu's attn_teams: a block of 2 or
 * 4 teams of 128 threads, a row each, over one staged copy of each chunk): 0 (the default) its
 * rule (4 teams from 16 rows on, 2 where a block serves 8 heads), 1 never, 2 or 4 teams at every T
 * (tests; SPECDEC_CUDA_ATTN_TEAMS at backend creation). Same bits for any value. Returns the
 * setting before. */
int sd_cuda_attention_teams(int teams);

/* Benchmarks: switch backend b (name "cuda") between precision f32 (0) and int8 (1) for the ops
 * issued from now on (a recording keeps the kernels it was made with); switching on reserves
 * the int8 scratch for up to 64 tokens. */
void sd_cuda_set_int8(sd_backend *b, int on);

/* Runs, on the CPU, the very __host__ __device__ functions the kernels use (Philox bits, the
 * libm-free log and Gumbel transform, the underflow boundary of the sampler, the 16-bit float
 * conversions, the in-place decoding of 4- and 8-bit codes, the unfiltered sampler's per-token
 * step and its answer for degenerate rows) against src/sample and src/util over many inputs.
 * Returns the number of mismatches (0: all agree) and describes the first in msg. */
int sd_cuda_selfcheck(char *msg, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
