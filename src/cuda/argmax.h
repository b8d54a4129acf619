/* argmax.h: per-row argmax of logits (argmax.cu), and the small kernel that reduces per-block
 * argmax candidates (also used by the fused LM head). */
#ifndef SD_CUDA_ARGMAX_H
#define SD_CUDA_ARGMAX_H
#include "cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks per row the argmax uses for rows of n logits (part needs T x that when it is > 1). */
int sdc_argmax_blocks(int n);
/* out[t] = map[a] (a when map is NULL), a = the index of the largest of row t of logits
 * (T, n); ties to the lower index, NaN never wins, 0 when the row is all NaN. */
cudaError_t sdc_argmax(const float *logits, int n, int T, const int32_t *map, sdc_best *part, int32_t *out,
                       const sdc_dev *d);
/* out[t] = map[a] (a when map is NULL), a = the best of part[t*nb .. t*nb+nb) (0 when none). */
cudaError_t sdc_best_finish(const sdc_best *part, int nb, int T, const int32_t *map, int32_t *out, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
