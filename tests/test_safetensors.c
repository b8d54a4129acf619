/* test_safetensors.c: writer/reader round trip (single file and sharded) and a bad-input matrix:
 * each malformed file is built in its own mkdtemp directory and must fail with the right status
 * and a message naming the file and (where relevant) the tensor. */
#include "check.h"
#include "tiny_model.h"
#include "util/err.h"
#include <dirent.h>
#include <sys/stat.h>

/* Write a raw safetensors file: 8-byte length `hlen` (the JSON's length when UINT64_MAX), the
 * JSON text, then `dlen` data bytes (zeros). */
static void write_raw(const char *dir, const char *name, const char *json, uint64_t hlen, size_t dlen) {
    size_t jl = strlen(json);
    if (hlen == UINT64_MAX) hlen = jl;
    size_t n = 8 + jl + dlen;
    unsigned char *b = calloc(1, n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, json, jl);
    tm_write_file(dir, name, b, n);
    free(b);
}

/* Open dir (or dir/name when name != NULL) and expect status `want` and all needles in the message. */
static void expect_fail(const char *what, const char *dir, const char *name, specdec_status want, const char *n1,
                        const char *n2) {
    char p[1024];
    specdec_err e = {0};
    sd_st_set *s = NULL;
    specdec_status st;
    if (name) { snprintf(p, sizeof p, "%s/%s", dir, name); st = sd_st_open_file(p, &s, &e); }
    else st = sd_st_open_dir(dir, &s, &e);
    if (getenv("SD_VERBOSE")) fprintf(stderr, "%s: %s\n", what, e.msg);
    CHECK(st == want, "%s: status %s, want %s (%s)", what, specdec_status_name(st), specdec_status_name(want), e.msg);
    CHECK(s == NULL, "%s: set returned on failure", what);
    if (n1) CHECK(strstr(e.msg, n1) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, n1);
    if (n2) CHECK(strstr(e.msg, n2) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, n2);
    sd_st_close(s);
}

static bool count_cb(uint64_t done, uint64_t total, void *user) {
    int *calls = user;
    (*calls)++;
    return done <= total;
}
static bool cancel_cb(uint64_t done, uint64_t total, void *user) { (void)done; (void)total; (void)user; return false; }

static void test_round_trip(void) {
    char dir[64];
    CHECK(tm_mkdtemp(dir, sizeof dir) != NULL, "mkdtemp");
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[4] = {0x3f80, 0x4000, 0xbf80, 0x0000};
    uint8_t c[5] = {1, 2, 3, 4, 5};
    int64_t d[2] = {-7, 1LL << 40};
    int64_t sa[2] = {2, 3}, sb[1] = {4}, sc[1] = {5}, sd[1] = {2}, se[2] = {0, 3};
    sd_st_writer *w = sd_st_writer_new();
    specdec_err e = {0};
    CHECK(sd_st_writer_add(w, "a.f32", SPECDEC_DTYPE_F32, 2, sa, a, &e) == SPECDEC_OK, "add a: %s", e.msg);
    CHECK(sd_st_writer_add(w, "b.bf16", SPECDEC_DTYPE_BF16, 1, sb, b, &e) == SPECDEC_OK, "add b");
    CHECK(sd_st_writer_add(w, "c.u8", SPECDEC_DTYPE_U8, 1, sc, c, &e) == SPECDEC_OK, "add c");
    CHECK(sd_st_writer_add(w, "d.i64", SPECDEC_DTYPE_I64, 1, sd, d, &e) == SPECDEC_OK, "add d");
    CHECK(sd_st_writer_add(w, "e.empty", SPECDEC_DTYPE_F32, 2, se, NULL, &e) == SPECDEC_OK, "add empty");
    CHECK(sd_st_writer_add(w, "a.f32", SPECDEC_DTYPE_F32, 2, sa, a, &e) == SPECDEC_ERR_INVALID_ARG, "duplicate add refused");
    CHECK(sd_st_writer_write(w, dir, 0, &e) == SPECDEC_OK, "write: %s", e.msg);
    sd_st_writer_free(w);

    /* Header length is a multiple of 8 and the first byte after it is the data section. */
    char p[128];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    FILE *f = fopen(p, "rb");
    unsigned char len8[8] = {0};
    CHECK(f && fread(len8, 1, 8, f) == 8, "read header length");
    if (f) fclose(f);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | len8[i];
    CHECK(hl % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)hl);

    sd_st_set *s = NULL;
    CHECK(sd_st_open_dir(dir, &s, &e) == SPECDEC_OK, "open_dir: %s", e.msg);
    if (!s) return;
    CHECK_EQ_INT(sd_st_count(s), 5);
    /* insertion order is file order */
    CHECK(strcmp(sd_st_at(s, 0)->name, "a.f32") == 0, "order 0");
    CHECK(strcmp(sd_st_at(s, 4)->name, "e.empty") == 0, "order 4");
    const sd_st_tensor *t = sd_st_find(s, "a.f32");
    CHECK(t && t->dtype == SPECDEC_DTYPE_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3, "a meta");
    CHECK(t && t->nbytes == 24 && memcmp(t->data, a, 24) == 0, "a data");
    t = sd_st_find(s, "b.bf16");
    CHECK(t && t->dtype == SPECDEC_DTYPE_BF16 && memcmp(t->data, b, 8) == 0, "b data");
    t = sd_st_find(s, "c.u8");
    CHECK(t && t->dtype == SPECDEC_DTYPE_U8 && t->nbytes == 5 && memcmp(t->data, c, 5) == 0, "c data");
    t = sd_st_find(s, "d.i64");
    CHECK(t && t->dtype == SPECDEC_DTYPE_I64 && memcmp(t->data, d, 16) == 0, "d data");
    t = sd_st_find(s, "e.empty");
    CHECK(t && t->nbytes == 0 && t->shape[0] == 0, "empty tensor");
    CHECK(sd_st_find(s, "nope") == NULL, "absent name");
    CHECK(sd_st_total_bytes(s) == 24 + 8 + 5 + 16, "total bytes %llu", (unsigned long long)sd_st_total_bytes(s));
    CHECK(strstr(sd_st_file_path(s, 0), "model.safetensors") != NULL, "file path");
    CHECK(sd_st_file_path(s, 1) == NULL, "only one file");
    int calls = 0;
    CHECK(sd_st_prefault(s, count_cb, &calls, &e) == SPECDEC_OK && calls >= 1, "prefault calls %d", calls);
    CHECK(sd_st_prefault(s, cancel_cb, NULL, &e) == SPECDEC_ERR_CANCELLED, "prefault cancel");
    sd_st_close(s);

    /* The same file through sd_st_open_file. */
    CHECK(sd_st_open_file(p, &s, &e) == SPECDEC_OK && sd_st_count(s) == 5, "open_file: %s", e.msg);
    sd_st_close(s);
    tm_rm_rf(dir);
}

static void test_sharded(void) {
    char dir[64];
    CHECK(tm_mkdtemp(dir, sizeof dir) != NULL, "mkdtemp");
    enum { N = 7 };
    float data[N][100];
    sd_st_writer *w = sd_st_writer_new();
    specdec_err e = {0};
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 100; j++) data[i][j] = (float)(i * 1000 + j);
        char nm[32];
        snprintf(nm, sizeof nm, "t.%d", i);
        int64_t shape[2] = {10, 10};
        CHECK(sd_st_writer_add(w, nm, SPECDEC_DTYPE_F32, 2, shape, data[i], &e) == SPECDEC_OK, "add");
    }
    /* 400 bytes per tensor, 1000-byte shards: 2 tensors each -> 4 shards */
    CHECK(sd_st_writer_write(w, dir, 1000, &e) == SPECDEC_OK, "write sharded: %s", e.msg);
    sd_st_writer_free(w);
    char p[256];
    struct stat sb;
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    CHECK(stat(p, &sb) == 0, "index.json written");
    snprintf(p, sizeof p, "%s/model-00001-of-00004.safetensors", dir);
    CHECK(stat(p, &sb) == 0, "first shard name");
    snprintf(p, sizeof p, "%s/model-00004-of-00004.safetensors", dir);
    CHECK(stat(p, &sb) == 0, "last shard name");
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(stat(p, &sb) != 0, "no single file when sharded");
    DIR *dd = opendir(dir);
    int n_tmp = 0;
    for (struct dirent *de; dd && (de = readdir(dd));) if (strstr(de->d_name, ".tmp")) n_tmp++;
    if (dd) closedir(dd);
    CHECK_EQ_INT(n_tmp, 0);

    sd_st_set *s = NULL;
    CHECK(sd_st_open_dir(dir, &s, &e) == SPECDEC_OK, "open sharded: %s", e.msg);
    if (s) {
        CHECK_EQ_INT(sd_st_count(s), N);
        CHECK(sd_st_file_path(s, 3) != NULL && sd_st_file_path(s, 4) == NULL, "4 files");
        for (int i = 0; i < N; i++) {
            char nm[32];
            snprintf(nm, sizeof nm, "t.%d", i);
            const sd_st_tensor *t = sd_st_find(s, nm);
            CHECK(t && t->nbytes == 400 && memcmp(t->data, data[i], 400) == 0, "shard tensor %d", i);
            CHECK(t && t->file == i / 2, "tensor %d in file %d", i, t ? t->file : -1);
        }
        CHECK(sd_st_total_bytes(s) == N * 400, "sharded total");
    }
    sd_st_close(s);
    tm_rm_rf(dir);
}

#define T1 "{\"__metadata__\":{\"format\":\"pt\"},\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}"
#define ST "model.safetensors"
#define S1 "model-00001-of-00002.safetensors"
#define S2 "model-00002-of-00002.safetensors"

/* A malformed single file: its header JSON (NULL: a 3-byte file), the header length written
 * (UINT64_MAX: the JSON's own), the data bytes after it, whether it is opened as a file (else as
 * the directory), the status expected and two pieces of the message. */
typedef struct {
    const char *what, *json;
    uint64_t hlen;
    size_t dlen;
    bool by_file;
    specdec_status want;
    const char *n1, *n2;
} bad_file;

static const bad_file bad_files[] = {
    {"short file", NULL, 0, 0, false, SPECDEC_ERR_FORMAT, ST, "8-byte"},
    {"data cut short", T1, UINT64_MAX, 10, false, SPECDEC_ERR_FORMAT, ST, "'model.norm.weight'"},
    {"header past EOF", T1, 1u << 20, 16, false, SPECDEC_ERR_FORMAT, ST, "header length"},
    /* > 2^63 must not wrap */
    {"huge header length", T1, UINT64_MAX - 3, 16, false, SPECDEC_ERR_FORMAT, ST, "header length"},
    {"offsets past end", "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[10,26]}}", UINT64_MAX, 16,
     false, SPECDEC_ERR_FORMAT, ST, "tensor 'model.norm.weight': data_offsets [10, 26] exceed data section of 16 bytes"},
    {"overlap", "{\"x.a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"x.b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", UINT64_MAX, 16,
     false, SPECDEC_ERR_FORMAT, "'x.a'", "'x.b'"},
    {"unknown dtype", "{\"x.f64\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", UINT64_MAX, 16,
     true, SPECDEC_ERR_DTYPE, ST, "'x.f64'"},
    {"size mismatch", "{\"x.sz\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,8]}}", UINT64_MAX, 16,
     false, SPECDEC_ERR_FORMAT, ST, "'x.sz'"},
    {"malformed JSON", "{\"x\": {\"dtype\": \"F32\",, }", UINT64_MAX, 16, false, SPECDEC_ERR_FORMAT, ST, "line 1"},
    /* a duplicate key would otherwise hide a tensor */
    {"duplicate key", "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", UINT64_MAX, 2,
     false, SPECDEC_ERR_FORMAT, ST, "x"},
    {"non-object header", "[1, 2, 3]", UINT64_MAX, 0, false, SPECDEC_ERR_FORMAT, ST, "not a JSON object"},
    {"negative shape", "{\"x.neg\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", UINT64_MAX, 16,
     false, SPECDEC_ERR_FORMAT, ST, "'x.neg'"},
    {"overflowing shape", "{\"x.big\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,16]}}",
     UINT64_MAX, 16, false, SPECDEC_ERR_FORMAT, ST, "'x.big'"},
    {"9 dims", "{\"x.9d\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", UINT64_MAX, 1,
     false, SPECDEC_ERR_FORMAT, ST, "'x.9d'"},
};

/* A malformed sharded checkpoint: shard 1's header (NULL: absent) with dlen1 data bytes, shard 2's
 * (NULL: absent; 16 data bytes), the index, and what the error must say. */
typedef struct {
    const char *what, *shard1;
    size_t dlen1;
    const char *shard2, *index;
    specdec_status want;
    const char *n1, *n2;
} bad_sharding;

static const bad_sharding bad_shards[] = {
    {"missing shard", T1, 16, NULL, "{\"weight_map\":{\"model.norm.weight\":\"" S1 "\",\"lm_head.weight\":\"" S2 "\"}}",
     SPECDEC_ERR_MISSING, S2, "index.json"},
    {"tensor absent from shard", T1, 16, NULL, "{\"weight_map\":{\"model.norm.weight\":\"" S1 "\",\"lm_head.weight\":\"" S1 "\"}}",
     SPECDEC_ERR_MISSING, "'lm_head.weight'", S1},
    {"shard ../", T1, 16, NULL, "{\"weight_map\":{\"model.norm.weight\":\"../" S1 "\"}}",
     SPECDEC_ERR_FORMAT, "../model-00001", "'model.norm.weight'"},
    {"tensor in two shards", T1, 16, T1, "{\"weight_map\":{\"model.norm.weight\":\"" S1 "\",\"x\":\"" S2 "\"}}",
     SPECDEC_ERR_FORMAT, "'model.norm.weight'", "model-00002-of-00002"},
    /* a bad shard reports both the index and the shard */
    {"bad shard", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,40]}}", 4, NULL,
     "{\"weight_map\":{\"a\":\"" S1 "\"}}", SPECDEC_ERR_FORMAT, S1, "tensor 'a'"},
    {"bad index json", NULL, 0, NULL, "{\"weight_map\": [", SPECDEC_ERR_FORMAT, "model.safetensors.index.json", "line"},
};

static void test_bad_inputs(void) {
    char dir[64];
    const char *F = "model.safetensors";

    /* metadata is ignored; this file is fine (the control for the cases below) */
    tm_mkdtemp(dir, sizeof dir);
    write_raw(dir, F, T1, UINT64_MAX, 16);
    { sd_st_set *s = NULL; specdec_err e = {0};
      CHECK(sd_st_open_dir(dir, &s, &e) == SPECDEC_OK && sd_st_count(s) == 1, "control file: %s", e.msg); sd_st_close(s); }
    tm_rm_rf(dir);

    /* neither file present */
    tm_mkdtemp(dir, sizeof dir);
    expect_fail("empty dir", dir, NULL, SPECDEC_ERR_MISSING, dir, "model.safetensors");
    tm_rm_rf(dir);

    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
        const bad_file *b = &bad_files[i];
        tm_mkdtemp(dir, sizeof dir);
        if (b->json) write_raw(dir, F, b->json, b->hlen, b->dlen);
        else tm_write_file(dir, F, "\x10\0\0", 3);   /* shorter than the 8-byte length */
        expect_fail(b->what, dir, b->by_file ? F : NULL, b->want, b->n1, b->n2);
        tm_rm_rf(dir);
    }
    for (size_t i = 0; i < sizeof bad_shards / sizeof bad_shards[0]; i++) {
        const bad_sharding *b = &bad_shards[i];
        tm_mkdtemp(dir, sizeof dir);
        if (b->shard1) write_raw(dir, S1, b->shard1, UINT64_MAX, b->dlen1);
        if (b->shard2) write_raw(dir, S2, b->shard2, UINT64_MAX, 16);
        tm_write_file(dir, "model.safetensors.index.json", b->index, strlen(b->index));
        expect_fail(b->what, dir, NULL, b->want, b->n1, b->n2);
        tm_rm_rf(dir);
    }
}

int main(void) {
    test_round_trip();
    test_sharded();
    test_bad_inputs();
    return check_finish("test_safetensors");
}
