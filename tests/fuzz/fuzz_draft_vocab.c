/* fuzz_draft_vocab.c: the draft-vocabulary file (draft_vocab.json) on arbitrary bytes, through
 * sd_draft_vocab_load, which takes a path: each input is written to one memory file (memfd)
 * opened by its /proc/self/fd path. The first input byte picks how many ids are asked for (the
 * file's default_n, all, or a count) and the vocabulary size; an accepted vocabulary must list
 * distinct ids inside the vocabulary. */
#include "fuzz.h"
#include "speculative/draft_vocab.h"
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fd = memfd_create("draft_vocab.json", 0);
    if (fd < 0) { perror("fuzz_draft_vocab: memfd_create"); abort(); }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t sel = data[0];
    FUZZ_CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, data + 1, size - 1, 0) == (ssize_t)(size - 1), "cannot write the memfd");
    static const int vocabs[4] = {1, 16, 1000, 151936};
    int vocab = vocabs[sel & 3];
    int n_want = (sel >> 2) == 0 ? SPECDEC_DRAFT_VOCAB_FILE_DEFAULT : (sel >> 2) == 1 ? 0 : (sel >> 2) - 2;
    sd_draft_vocab dv;
    specdec_err err = {0};
    specdec_status st = sd_draft_vocab_load(path, n_want, vocab, &dv, &err);
    if (st != SPECDEC_OK) {
        FUZZ_CHECK(err.msg[0] && strstr(err.msg, path) && !dv.d2t, "rejection without a message naming the file: '%s'", err.msg);
        return 0;
    }
    FUZZ_CHECK(dv.n >= 1 && dv.n <= dv.n_file && dv.n_file <= vocab, "n %d of %d (vocab %d)", dv.n, dv.n_file, vocab);
    FUZZ_CHECK(n_want <= 0 || dv.n == n_want, "asked %d ids, got %d", n_want, dv.n);
    uint8_t *seen = calloc((size_t)vocab, 1);
    FUZZ_CHECK(seen, "oom");
    for (int j = 0; j < dv.n; j++) {
        FUZZ_CHECK(dv.d2t[j] >= 0 && dv.d2t[j] < vocab && !seen[dv.d2t[j]], "d2t[%d] = %d", j, dv.d2t[j]);
        seen[dv.d2t[j]] = 1;
    }
    free(seen);
    sd_draft_vocab_free(&dv);
    return 0;
}
