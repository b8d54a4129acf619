/* count_tokens.c: token frequencies of a training corpus, the input of a reduced draft
 * vocabulary (tools/draft/make_draft_vocab.py turns the counts into draft_vocab.json).
 *
 *   count_tokens MODEL_DIR CORPUS.txt[.xz] OUT.tsv [MAX_BYTES]
 *
 * The corpus is streamed (through `xz -dc` when the name ends in .xz) and cut into chunks at
 * document boundaries (<|endoftext|>, which is tokenized with its document, as an added token),
 * so no BPE merge ever spans a chunk edge that a whole-document tokenization would not have.
 * Each chunk is tokenized with specdec_tokenize. OUT.tsv gets one "id<TAB>count" line per id of
 * the vocabulary (zeros included), ascending id; a summary goes to stderr. MAX_BYTES (optional)
 * stops after about that many bytes of text (whole documents). Use the TRAIN split only: the
 * draft vocabulary must not see the held-out text it is measured on. */
#include "specdec.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEP "<|endoftext|>"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL_DIR CORPUS.txt[.xz] OUT.tsv [MAX_BYTES]\n", argv[0]);
        return 2;
    }
    long long max_bytes = argc > 4 ? atoll(argv[4]) : 0;
    specdec_err err = {0};
    specdec_tokenizer *tok = NULL;
    if (specdec_tokenizer_load(argv[1], &tok, &err)) { fprintf(stderr, "count_tokens: %s\n", err.msg); return 1; }
    int V = specdec_tokenizer_vocab_size(tok);
    size_t nl = strlen(argv[2]);
    bool xz = nl > 3 && !strcmp(argv[2] + nl - 3, ".xz");
    FILE *in;
    if (xz) {
        char cmd[4200];
        if (strchr(argv[2], '\'')) { fprintf(stderr, "count_tokens: quote in path\n"); return 1; }
        snprintf(cmd, sizeof cmd, "xz -dc '%s'", argv[2]);
        in = popen(cmd, "r");
    } else in = fopen(argv[2], "rb");
    if (!in) { fprintf(stderr, "count_tokens: cannot open %s\n", argv[2]); return 1; }
    uint64_t *cnt = calloc((size_t)V, sizeof *cnt);
    size_t cap = 1 << 24, len = 0;   /* buffer grows when a document is bigger */
    char *buf = malloc(cap);
    if (!cnt || !buf) { fprintf(stderr, "count_tokens: out of memory\n"); return 1; }
    uint64_t total_tok = 0, total_bytes = 0, docs = 0, bad = 0;
    size_t sl = strlen(SEP);
    bool eof = false;
    int rc = 0;
    while (!eof || len > 0) {
        if (!eof && len < cap) {
            size_t r = fread(buf + len, 1, cap - len, in);
            len += r;
            if (r == 0) eof = true;
        }
        /* cut after the last separator in the buffer (or take everything at EOF) */
        size_t cut = 0;
        for (char *p = buf, *q; (q = memmem(p, len - (size_t)(p - buf), SEP, sl)); p = q + sl) cut = (size_t)(q - buf) + sl;
        if (eof) cut = len;
        if (cut == 0) {   /* one document bigger than the buffer */
            if (len < cap) continue;
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) { fprintf(stderr, "count_tokens: out of memory\n"); rc = 1; break; }
            buf = nb;
            continue;
        }
        int32_t *ids = NULL; size_t n = 0;
        if (specdec_tokenize(tok, buf, cut, &ids, &n, &err)) {
            fprintf(stderr, "count_tokens: chunk at byte %llu: %s (chunk skipped)\n", (unsigned long long)total_bytes, err.msg);
            bad++;
        } else {
            for (size_t i = 0; i < n; i++)
                if (ids[i] >= 0 && ids[i] < V) cnt[ids[i]]++;
            total_tok += n;
        }
        for (size_t i = 0; i + sl <= cut; i++)
            if (buf[i] == '<' && !memcmp(buf + i, SEP, sl)) docs++;
        free(ids);
        total_bytes += cut;
        memmove(buf, buf + cut, len - cut);
        len -= cut;
        fprintf(stderr, "\rcount_tokens: %llu MB, %llu tokens", (unsigned long long)(total_bytes >> 20),
                (unsigned long long)total_tok);
        if (max_bytes > 0 && (long long)total_bytes >= max_bytes) break;
    }
    fprintf(stderr, "\n");
    if (xz) pclose(in); else fclose(in);
    FILE *o = fopen(argv[3], "w");
    if (!o) { fprintf(stderr, "count_tokens: cannot write %s\n", argv[3]); return 1; }
    int nonzero = 0;
    for (int i = 0; i < V; i++) { fprintf(o, "%d\t%llu\n", i, (unsigned long long)cnt[i]); nonzero += cnt[i] > 0; }
    fclose(o);
    fprintf(stderr, "count_tokens: %llu bytes, %llu documents, %llu tokens, %d of %d ids seen, %llu chunks failed\n",
            (unsigned long long)total_bytes, (unsigned long long)docs, (unsigned long long)total_tok, nonzero, V,
            (unsigned long long)bad);
    free(cnt); free(buf);
    specdec_tokenizer_free(tok);
    return rc || bad ? 1 : 0;
}
