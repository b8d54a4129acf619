/* draft_vocab.h: a reduced draft vocabulary (EAGLE-3's d2t): N target ids, ranked by frequency on
 * a training corpus, and the LM-head rows of those ids gathered into one contiguous matrix, so a
 * draft step computes N logits instead of V. Draft index j stands for target id d2t[j].
 *
 * File format (model directory, draft_vocab.json; written by tools/draft/make_draft_vocab.py):
 *   {"source": "...", "n": N, "d2t": [id_0, ..., id_{N-1}]}   ids by descending count
 * Extra keys are ignored. A prefix of d2t is itself a valid subset: loading with n_want = M < N
 * keeps the M most frequent ids. Ids must be distinct and in [0, vocab). */
#ifndef SD_SPEC_DRAFT_VOCAB_H
#define SD_SPEC_DRAFT_VOCAB_H
#include "specdec.h"
#include "model/weights.h"

typedef struct sd_draft_vocab {
    int n;              /* ids kept */
    int n_file;         /* ids the file lists */
    int32_t *d2t;       /* (n) draft index -> target id */
    char source[160];   /* the file's "source" string (truncated) */
    char path[512];
} sd_draft_vocab;

/* Load path keeping the first n_want ids (0 = all); vocab bounds the ids. Messages name the file
 * and the offending index. */
specdec_status sd_draft_vocab_load(const char *path, int n_want, int vocab, sd_draft_vocab *out,
                                   specdec_err *err);
void sd_draft_vocab_free(sd_draft_vocab *dv);

/* dst = the rows `rows` (n) of src, in that order, copied into one new allocation *buf (64-byte
 * aligned; free with free()). Dense and quantized (packed words + scales + biases, row by row)
 * matrices alike; the values of row j of dst are bitwise those of row rows[j] of src. */
specdec_status sd_mat_gather_rows(const sd_mat *src, const int32_t *rows, int n, sd_mat *dst, void **buf,
                                  specdec_err *err);

#endif
