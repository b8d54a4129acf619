/* fuzz_safetensors.c: the safetensors reader on arbitrary file images. The input is the bytes of
 * one .safetensors file; sd_st_open_buffer runs the validation a mapped file gets (length field,
 * JSON header, dtype, shape x dtype = byte size, offsets inside the data section, no overlap).
 * When a file is accepted, every byte of every tensor is read and every name is looked up, as
 * weight binding does: a tensor that points outside the input is then an out-of-bounds read that
 * AddressSanitizer reports (the input buffer is exactly the file's size). */
#include "fuzz.h"
#include "io/safetensors.h"
#include "util/dtype.h"
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sd_st_set *s = NULL;
    specdec_err err = {0};
    specdec_status st = sd_st_open_buffer(data, size, "fuzz.safetensors", &s, &err);
    if (st != SPECDEC_OK) {
        FUZZ_CHECK(s == NULL && err.msg[0] && strstr(err.msg, "fuzz.safetensors"), "rejection without a message naming the file: '%s'", err.msg);
        return 0;
    }
    uint64_t total = 0;
    volatile uint8_t sink = 0;
    for (int i = 0; i < sd_st_count(s); i++) {
        const sd_st_tensor *t = sd_st_at(s, i);
        FUZZ_CHECK(t && t->name && sd_st_find(s, t->name) == t, "tensor %d is not found by its name", i);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        FUZZ_CHECK(numel * sd_dtype_size(t->dtype) == t->nbytes, "tensor '%s': %llu bytes for its shape", t->name,
                   (unsigned long long)t->nbytes);
        const uint8_t *p = t->data;
        for (uint64_t k = 0; k < t->nbytes; k++) sink ^= p[k];
        total += t->nbytes;
    }
    (void)sink;
    FUZZ_CHECK(total == sd_st_total_bytes(s) && total <= size, "tensor bytes %llu of a %zu-byte file",
               (unsigned long long)total, size);
    sd_st_close(s);
    return 0;
}
