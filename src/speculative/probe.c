/* probe.c: the block-vs-chain exactness probe. Speculative decoding is exact at temperature 0
 * only if the verify pass (T = K positions in one call) produces, for each position, bitwise the
 * logits that K single-token steps would. The kernels are built for that (batch invariance);
 * this probe checks it on the live target, from the live state, before any speculation runs. */
#include "speculative/spec_internal.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

specdec_status sd_spec_probe(const sd_target *t, int K, int draws, uint64_t seed, int *ok, char *where,
                             size_t where_n, specdec_err *err) {
    *ok = 1;
    if (where_n) where[0] = 0;
    int P = t->n_past(t->impl), V = t->vocab;
    float *blk = malloc(sizeof(float) * (size_t)K * V), *one = malloc(sizeof(float) * (size_t)K * V);
    int32_t *tok = malloc(sizeof *tok * (size_t)K);
    specdec_status st = SPECDEC_OK;
    if (!blk || !one || !tok) st = sd_fail(err, SPECDEC_ERR_NOMEM, "probe buffers: out of memory");
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    for (int dr = 0; st == SPECDEC_OK && dr < draws && *ok; dr++) {
        for (int k = 0; k < K; k++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            tok[k] = (int32_t)(s % (uint64_t)V);
        }
        st = t->forward(t->impl, tok, K, blk, 0, NULL, err);
        if (st == SPECDEC_OK) st = t->truncate(t->impl, P, err);
        for (int k = 0; st == SPECDEC_OK && k < K; k++)
            st = t->forward(t->impl, tok + k, 1, one + (size_t)k * V, 0, NULL, err);
        if (st == SPECDEC_OK) st = t->truncate(t->impl, P, err);
        if (st == SPECDEC_OK && memcmp(blk, one, sizeof(float) * (size_t)K * V) != 0) {
            *ok = 0;
            for (size_t i = 0; i < (size_t)K * V; i++)
                if (memcmp(blk + i, one + i, sizeof(float)) != 0) {
                    snprintf(where, where_n, "draw %d, row %zu of %d, logit %zu: block %.9g vs chain %.9g",
                             dr, i / V, K, i % V, blk[i], one[i]);
                    break;
                }
        }
    }
    free(blk); free(one); free(tok);
    return st;
}
