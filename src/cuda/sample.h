/* sample.h: seeded sampling of logits rows on the device (sample.cu): the token sd_sample
 * (src/sample/sample.c) picks for temperature > 0 without top-k / top-p / min-p, and the
 * greedy argmax otherwise (temperature <= 0 or NaN). */
#ifndef SD_CUDA_SAMPLE_H
#define SD_CUDA_SAMPLE_H
#include "cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A Gumbel-max candidate: z + g in double, token id (-1: none). */
typedef struct sdc_dbest {
    double v;
    int32_t i;
    int32_t pad;
} sdc_dbest;

typedef struct sdc_sample_params {
    const float *logits;     /* (T, n) */
    int n;                   /* entries per row */
    int vocab;               /* with map: the vocabulary (every token outside map has logit -inf) */
    const int32_t *map;      /* NULL, or (n): row entry k stands for token map[k] */
    int T;
    const int32_t *pos_base; /* row t samples at position *pos_base + pos_off + t */
    int pos_off;
    double temp;             /* (double)temperature */
    int greedy;              /* !(temperature > 0) */
    uint64_t seed;
    sdc_best *part_a;        /* (T, sdc_sample_blocks(n)) scratch */
    sdc_dbest *part_b;       /* (T, sdc_sample_blocks(n)) scratch */
    int32_t *out;            /* (T) */
} sdc_sample_params;

/* Blocks per row (the partials hold T x that). */
int sdc_sample_blocks(int n);
/* Largest vocabulary a mapped row may have (the bitmap of mapped tokens lives in shared memory). */
int sdc_sample_max_mapped_vocab(void);
cudaError_t sdc_sample(const sdc_sample_params *p, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
