/* quant.h: the quantizer's row routine (MLX affine layout, see quantize.c for the rounding
 * rules), shared by specdec_quantize and the inflation tool's quantize-on-the-way. */
#ifndef SD_QUANT_H
#define SD_QUANT_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "specdec.h"

/* Error sums of a quantization: sum of squared errors, sum of squared inputs, largest error. */
typedef struct sd_qerr { double se, sw, max_abs; } sd_qerr;

/* Quantize one row x (cols f32, cols a multiple of G) to `bits` in groups of G: the packed words
 * into w (cols*bits/32 u32), the scales and biases (cols/G elements of dtype dt, F32/F16/BF16)
 * into scales and biases. An all-equal group (all zeros, say) gets scale 0 and q = 0: nothing is
 * divided by a zero scale. acc (may be NULL) accumulates the dequantization error. Messages start
 * with `what` (e.g. "FILE: tensor 'NAME'") and name the row and column at fault. */
specdec_status sd_quant_row(const float *x, size_t cols, int bits, int G, specdec_dtype dt, uint32_t *w, void *scales,
                            void *biases, sd_qerr *acc, const char *what, size_t row, specdec_err *err);

/* Set config.json's "quantization" and "quantization_config" blocks ({"group_size", "bits"}, the
 * MLX and Hugging Face spellings) in root. */
void sd_quant_config_set(json_t *root, int bits, int G);

#endif
