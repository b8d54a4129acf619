/* fuzz_tokenizer_json.c: loading tokenizer.json from arbitrary bytes. specdec_tokenizer_load
 * reads DIR/tokenizer.json, so each input is written there (a private temporary directory made
 * once). An accepted tokenizer must then encode and decode a fixed text without a fault, every
 * id it produces must be inside its vocabulary, and the ids must decode back to bytes. */
#include "fuzz.h"
#include "specdec.h"
#include <string.h>
#include <unistd.h>

static char dir[64];
static char path[96];

static void cleanup(void) {
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/sdfuzz-tok-XXXXXX", tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
    if (!mkdtemp(dir)) { perror("fuzz_tokenizer_json: mkdtemp"); abort(); }
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", path);
    specdec_tokenizer *t = NULL;
    specdec_err err = {0};
    specdec_status st = specdec_tokenizer_load(dir, &t, &err);
    if (st != SPECDEC_OK) {
        FUZZ_CHECK(t == NULL && err.msg[0], "rejection without a message");
        return 0;
    }
    static const char text[] = "Hello, world! <|im_end|> 123 caf\xc3\xa9\n\tint main(void) { return 0; }";
    int32_t *ids = NULL;
    size_t n = 0;
    int vocab = specdec_tokenizer_vocab_size(t);
    if (specdec_tokenize(t, text, sizeof text - 1, &ids, &n, &err) == SPECDEC_OK) {
        for (size_t i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < vocab, "id %d outside vocabulary %d", ids[i], vocab);
        char *out = NULL;
        size_t out_len = 0;
        FUZZ_CHECK(specdec_detokenize(t, ids, n, &out, &out_len, &err) == SPECDEC_OK, "encoded ids do not decode: %s", err.msg);
        free(out);
    }
    free(ids);
    specdec_tokenizer_free(t);
    return 0;
}
