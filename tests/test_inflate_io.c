/* test_inflate_io.c: what specdec_inflate writes and what it refuses, on tiny models.
 * - The bytes: deterministic whatever the thread count; sharded output (index + shards) holds the
 *   same tensors as one file; no NaN or Inf anywhere; RANDOM regions are non-zero with random fill
 *   and zero with zero fill; ZERO regions (padded rows of output projections, padded embedding
 *   columns, extra layers' output projections; quantized: q = 0, scale 0, bias 0) are exactly 0.
 * - config.json: the new shape, the source's other keys, the layer-count keys following, a record
 *   of the inflation; tokenizer / generation / draft-vocabulary files copied, the model card not.
 * - Progress reaches the total; a callback returning false cancels, leaving nothing behind.
 * - Refusals, each naming the dimension and writing nothing: a smaller dimension, another
 *   head_dim, a GQA layout that cannot hold the source's groups, heads not a multiple of kv heads,
 *   a tied target from an untied source, a quantized layout that would split a group, bad bits,
 *   --bits on a quantized source, a non-empty OUT. The head mapping itself on odd cases. */
#include "check.h"
#include "tiny_model.h"
#include "convert/inflate.h"
#include "util/err.h"
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

static char root[64];

static specdec_inflate_params shape(int H, int I, int L, int nh, int nkv) {
    specdec_inflate_params p = specdec_inflate_default_params();
    p.hidden_size = H; p.intermediate_size = I; p.n_layers = L; p.n_heads = nh; p.n_kv_heads = nkv;
    p.n_threads = 2;
    return p;
}

static bool exists(const char *dir, const char *name) {
    char p[512];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0;
}

static int count_tmp(void) {
    DIR *d = opendir(root);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) n += strstr(de->d_name, ".tmp-") != NULL;
    if (d) closedir(d);
    return n;
}

/* Element (r, c) of a bound matrix as f32. */
static float elem(const sd_mat *m, int r, int c) {
    float *row = malloc(sizeof(float) * (size_t)m->cols);
    sd_mat_row_f32(m, r, row);
    float v = row[c];
    free(row);
    return v;
}

/* Count of non-finite values in every float tensor (and dequantized linear) of dir. */
static long non_finite(const char *dir) {
    sd_st_set *s = NULL;
    specdec_err e = {0};
    if (sd_st_open_dir(dir, &s, &e)) { CHECK(0, "open %s: %s", dir, e.msg); return -1; }
    long bad = 0;
    for (int i = 0; i < sd_st_count(s); i++) {
        const sd_st_tensor *t = sd_st_at(s, i);
        if (t->dtype != SPECDEC_DTYPE_F32 && t->dtype != SPECDEC_DTYPE_BF16 && t->dtype != SPECDEC_DTYPE_F16) continue;
        const size_t n = (size_t)(t->nbytes / sd_dtype_size(t->dtype));
        void *raw = malloc((size_t)t->nbytes);
        float *f = malloc(n * sizeof *f);
        memcpy(raw, t->data, (size_t)t->nbytes);
        sd_to_f32(t->dtype, raw, f, n);
        for (size_t k = 0; k < n; k++) bad += !isfinite(f[k]);
        free(raw);
        free(f);
    }
    sd_st_close(s);
    return bad;
}

typedef struct bound { sd_config c; sd_st_set *s; sd_weights w; } bound;
static int bind_dir(const char *dir, bound *b) {
    specdec_err e = {0};
    memset(b, 0, sizeof *b);
    int rc = sd_config_load_dir(dir, &b->c, &e) || sd_st_open_dir(dir, &b->s, &e) || sd_weights_bind(&b->c, b->s, true, &b->w, &e);
    CHECK(rc == 0, "bind %s: %s", dir, e.msg);
    return rc;
}
static void unbind(bound *b) { sd_weights_free(&b->w); sd_st_close(b->s); }

/* The regions: source H 64, I 96, nh 6 / nkv 2, hd 32, L 2 -> H 128, I 160, nh 8 / nkv 4, L 3. */
static void check_regions(const char *dir, bool zero_fill, const char *label) {
    bound b;
    if (bind_dir(dir, &b)) return;
    const sd_layer_w *l0 = &b.w.layers[0], *l2 = &b.w.layers[2];
    int bad = 0;
    for (int c = 0; c < b.c.n_heads * 32; c++) bad += elem(&l0->o, 64, c) != 0.0f || elem(&l0->o, 127, c) != 0.0f;
    for (int r = 0; r < 128; r++) bad += elem(&l2->o, r, 7) != 0.0f || elem(&l2->down, r, 100) != 0.0f;
    for (int c = 64; c < 128; c++) bad += elem(&b.w.embed, 3, c) != 0.0f;
    for (int c = 96; c < 160; c++) bad += elem(&l0->down, 5, c) != 0.0f;   /* padded MLP units' columns */
    for (int c = 3 * 32; c < 4 * 32; c++) bad += elem(&l0->o, 5, c) != 0.0f;  /* padded q head 3's columns */
    CHECK(bad == 0, "%s: %d elements of ZERO regions are not 0", label, bad);
    /* RANDOM regions: padded q head 7's rows, an extra layer's q and MLP rows, padded input
     * columns of the LM head and of gate_proj */
    int nz = 0, n = 0;
    for (int c = 0; c < 128; c += 7) {
        nz += (elem(&l0->q, 8 * 32 - 1, c) != 0.0f) + (elem(&l2->q, 3, c) != 0.0f) + (elem(&l2->gate, 150, c) != 0.0f);
        n += 3;
        if (c >= 64) { nz += elem(&b.w.lm_head, 9, c) != 0.0f; nz += elem(&l0->gate, 2, c) != 0.0f; n += 2; }
    }
    if (zero_fill) CHECK(nz == 0, "%s: zero fill left %d of %d sampled values non-zero", label, nz, n);
    else CHECK(nz >= n - 2, "%s: random fill: only %d of %d sampled values are non-zero", label, nz, n);
    unbind(&b);
}

static void check_config(const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", dir);
    json_t *r = json_load_file(p, 0, NULL);
    CHECK(json_integer_value(json_object_get(r, "hidden_size")) == 128 && json_integer_value(json_object_get(r, "num_hidden_layers")) == 3 &&
          json_integer_value(json_object_get(r, "num_key_value_heads")) == 4, "config.json: the new shape");
    CHECK(json_integer_value(json_object_get(r, "max_window_layers")) == 3, "max_window_layers follows the layer count");
    CHECK(json_array_size(json_object_get(r, "layer_types")) == 3, "layer_types follows the layer count");
    CHECK(json_is_array(json_object_get(r, "architectures")), "the source's other keys are kept");
    json_t *rec = json_object_get(r, "inflated_from");
    CHECK(json_integer_value(json_object_get(rec, "hidden_size")) == 64 && json_is_string(json_object_get(rec, "fill")),
          "inflated_from records the source shape and the fill");
    json_decref(r);
    CHECK(exists(dir, "tokenizer.json") && exists(dir, "generation_config.json") && exists(dir, "draft_vocab.json"),
          "tokenizer, generation config and draft vocabulary copied");
    CHECK(!exists(dir, "README.md"), "the source's model card stays behind");
}

typedef struct prog { uint64_t last, total; int calls; int cancel_after; } prog;
static bool on_prog(uint64_t done, uint64_t total, void *user) {
    prog *p = user;
    CHECK(done >= p->last && done <= total, "progress %llu of %llu after %llu", (unsigned long long)done,
          (unsigned long long)total, (unsigned long long)p->last);
    p->last = done;
    p->total = total;
    p->calls++;
    return p->cancel_after == 0 || p->calls < p->cancel_after;
}

/* A refusal: status st, a message containing `word`, nothing written. */
/* Shapes an inflation of the f32 source must refuse: the shape arguments (0: the source's),
 * head_dim (0: the source's), tie, the status and a word of the message. */
typedef struct {
    int H, I, L, nh, nkv, head_dim;
    specdec_inflate_tie tie;
    specdec_status want;
    const char *word, *label;
} shape_refusal;

static const shape_refusal shape_refusals[] = {
    {32, 0, 0, 0, 0, 0, SPECDEC_INFLATE_TIE_KEEP, SPECDEC_ERR_INVALID_ARG, "hidden_size", "smaller hidden"},
    {128, 64, 0, 0, 0, 0, SPECDEC_INFLATE_TIE_KEEP, SPECDEC_ERR_INVALID_ARG, "intermediate_size", "smaller intermediate"},
    {0, 0, 1, 0, 0, 0, SPECDEC_INFLATE_TIE_KEEP, SPECDEC_ERR_INVALID_ARG, "num_hidden_layers", "fewer layers"},
    {0, 0, 0, 4, 2, 0, SPECDEC_INFLATE_TIE_KEEP, SPECDEC_ERR_INVALID_ARG, "num_attention_heads", "fewer heads"},
    {0, 0, 0, 6, 1, 0, SPECDEC_INFLATE_TIE_KEEP, SPECDEC_ERR_INVALID_ARG, "num_key_value_heads", "fewer kv heads"},
    {0, 0, 0, 8, 3, 0, SPECDEC_INFLATE_TIE_KEEP, SPECDEC_ERR_INVALID_ARG, "multiple", "heads not a multiple of kv heads"},
    {0, 0, 0, 6, 3, 0, SPECDEC_INFLATE_TIE_KEEP, SPECDEC_ERR_CONFIG, "num_key_value_heads", "GQA layout without room"},
    {0, 0, 0, 0, 0, 128, SPECDEC_INFLATE_TIE_KEEP, SPECDEC_ERR_INVALID_ARG, "head_dim", "another head_dim"},
    {128, 0, 0, 0, 0, 0, SPECDEC_INFLATE_TIED, SPECDEC_ERR_INVALID_ARG, "tie_word_embeddings",
     "tied target from an untied source"},
};

static void refused(const char *in, const specdec_inflate_params *p, specdec_status st, const char *word, const char *label) {
    char out[256];
    snprintf(out, sizeof out, "%s/refused", root);
    specdec_err e = {0};
    specdec_status got = specdec_inflate(in, out, p, &e);
    CHECK(got == st && strstr(e.msg, word), "%s: status %s, message: %s", label, specdec_status_name(got), e.msg);
    struct stat sb;
    CHECK(stat(out, &sb) != 0 && count_tmp() == 0, "%s: nothing written", label);
}

static void test_map_heads(void) {
    int q[64], kv[64];
    specdec_err e = {0};
    /* group 3 -> 2 (qwen3-kernel -> qwen3-1.7b): each source kv head twice */
    CHECK(sd_inflate_map_heads(6, 2, 16, 8, q, kv, &e) == SPECDEC_OK, "6/2 -> 16/8: %s", e.msg);
    const int want_q[6] = {0, 1, 2, 4, 5, 6}, want_kv[8] = {0, 0, 1, 1, -1, -1, -1, -1};
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(q[i], want_q[i]);
    for (int m = 0; m < 8; m++) CHECK_EQ_INT(kv[m], want_kv[m]);
    /* every case: q heads distinct, each in a group whose kv head copies its own */
    static const int cases[][4] = {{6, 2, 16, 8}, {6, 2, 32, 8}, {6, 2, 64, 8}, {6, 2, 9, 3}, {6, 2, 10, 10}, {4, 4, 8, 8},
                                   {8, 1, 64, 8}, {6, 3, 12, 4}, {2, 1, 7, 7}, {12, 4, 40, 8}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const int nh = cases[k][0], nkv = cases[k][1], nh2 = cases[k][2], nkv2 = cases[k][3];
        CHECK(sd_inflate_map_heads(nh, nkv, nh2, nkv2, q, kv, &e) == SPECDEC_OK, "%d/%d -> %d/%d: %s", nh, nkv, nh2, nkv2, e.msg);
        int bad = 0;
        for (int i = 0; i < nh; i++) {
            bad += q[i] < 0 || q[i] >= nh2 || kv[q[i] / (nh2 / nkv2)] != i / (nh / nkv);
            for (int j = 0; j < i; j++) bad += q[i] == q[j];
        }
        CHECK(bad == 0, "%d/%d -> %d/%d: %d misplaced heads", nh, nkv, nh2, nkv2, bad);
    }
    CHECK(sd_inflate_map_heads(6, 2, 6, 3, q, kv, &e) == SPECDEC_ERR_CONFIG && strstr(e.msg, "num_key_value_heads"), "6/2 -> 6/3: %s", e.msg);
    CHECK(sd_inflate_map_heads(8, 8, 16, 4, q, kv, &e) == SPECDEC_ERR_CONFIG, "8/8 -> 16/4 refused");
}

int main(void) {
    test_map_heads();
    if (!tm_mkdtemp(root, sizeof root)) { CHECK(0, "mkdtemp"); return check_finish("test_inflate_io"); }
    char src[256], srcq[256], a1[256], a3[256], sh[256], z[256], out[256];
    snprintf(src, sizeof src, "%s/src", root);
    mkdir(src, 0755);
    tm_dims d = {64, 64, 96, 2, 6, 2, 32, 1, false, SPECDEC_DTYPE_BF16};
    CHECK(tm_write_model(src, &d, 9, NULL, NULL, NULL, 0) == 0, "write source");
    tm_write_config(src, &d, ", \"max_window_layers\": 2, \"layer_types\": [\"full_attention\", \"full_attention\"]");
    tm_write_file(src, "tokenizer.json", "{}", 2);
    tm_write_file(src, "generation_config.json", "{}", 2);
    tm_write_file(src, "draft_vocab.json", "{}", 2);
    tm_write_file(src, "README.md", "# card\n", 7);
    specdec_err e = {0};

    /* determinism across thread counts; sharding; progress */
    specdec_inflate_params p = shape(128, 160, 3, 8, 4);
    p.n_threads = 1;
    snprintf(a1, sizeof a1, "%s/t1", root);
    CHECK(specdec_inflate(src, a1, &p, &e) == SPECDEC_OK, "inflate, 1 thread: %s", e.msg);
    p.n_threads = 3;
    prog pr = {0, 0, 0, 0};
    p.progress = on_prog;
    p.progress_user = &pr;
    snprintf(a3, sizeof a3, "%s/t3/", root);   /* a trailing slash is fine */
    CHECK(specdec_inflate(src, a3, &p, &e) == SPECDEC_OK, "inflate, 3 threads: %s", e.msg);
    char f1[512], f3[512];
    snprintf(f1, sizeof f1, "%s/model.safetensors", a1);
    snprintf(f3, sizeof f3, "%s/model.safetensors", a3);
    CHECK(tm_file_equal(f1, f3), "the same bytes with 1 and 3 threads");
    CHECK(pr.calls >= 1 && pr.last == pr.total && pr.total > 0, "progress reached the total (%d calls)", pr.calls);
    p.progress = NULL;
    p.max_shard_bytes = 300 * 1024;
    snprintf(sh, sizeof sh, "%s/sharded", root);
    CHECK(specdec_inflate(src, sh, &p, &e) == SPECDEC_OK, "inflate sharded: %s", e.msg);
    int n_shards = 0;
    DIR *dd = opendir(sh);
    for (struct dirent *de; dd && (de = readdir(dd));) n_shards += !strncmp(de->d_name, "model-0000", 10);
    if (dd) closedir(dd);
    CHECK(exists(sh, "model.safetensors.index.json") && !exists(sh, "model.safetensors") && n_shards >= 3,
          "sharded output: index and %d shards", n_shards);
    {
        sd_st_set *s1 = NULL, *s2 = NULL;
        CHECK(sd_st_open_dir(a1, &s1, &e) == SPECDEC_OK && sd_st_open_dir(sh, &s2, &e) == SPECDEC_OK, "open both: %s", e.msg);
        int diff = 0;
        for (int i = 0; s1 && s2 && i < sd_st_count(s1); i++) {
            const sd_st_tensor *t = sd_st_at(s1, i), *u = sd_st_find(s2, t->name);
            diff += !u || u->nbytes != t->nbytes || memcmp(u->data, t->data, (size_t)t->nbytes);
        }
        CHECK(s1 && s2 && diff == 0 && sd_st_count(s1) == sd_st_count(s2), "sharded tensors equal the single file's (%d differ)", diff);
        sd_st_close(s1);
        sd_st_close(s2);
    }
    check_config(a1);
    CHECK_EQ_INT(non_finite(a1), 0);
    check_regions(a1, false, "bf16 random fill");
    p = shape(128, 160, 3, 8, 4);
    p.fill_zero = true;
    snprintf(z, sizeof z, "%s/zero", root);
    CHECK(specdec_inflate(src, z, &p, &e) == SPECDEC_OK, "inflate, zero fill: %s", e.msg);
    check_regions(z, true, "bf16 zero fill");

    /* quantized: the same regions through the dequantization, scales and biases finite */
    specdec_quantize_params qp = specdec_quantize_default_params();
    qp.group_size = 32;
    qp.quantize_mtp = true;
    snprintf(srcq, sizeof srcq, "%s/srcq", root);
    CHECK(specdec_quantize(src, srcq, &qp, &e) == SPECDEC_OK, "quantize: %s", e.msg);
    p = shape(128, 160, 3, 8, 4);
    snprintf(out, sizeof out, "%s/q", root);
    CHECK(specdec_inflate(srcq, out, &p, &e) == SPECDEC_OK, "inflate q4: %s", e.msg);
    CHECK_EQ_INT(non_finite(out), 0);
    check_regions(out, false, "q4 random fill");
    {   /* a ZERO group is q = 0, scale 0, bias 0 */
        bound b;
        if (!bind_dir(out, &b)) {
            const sd_mat *o = &b.w.layers[0].o;
            uint16_t s, bi;
            uint32_t wd;
            memcpy(&s, (const char *)o->scales + (size_t)(100 * (o->cols / 32) + 1) * 2, 2);
            memcpy(&bi, (const char *)o->biases + (size_t)(100 * (o->cols / 32) + 1) * 2, 2);
            memcpy(&wd, (const char *)o->w + (size_t)(100 * (o->cols / 8) + 4) * 4, 4);
            CHECK(s == 0 && bi == 0 && wd == 0, "zero group of o_proj row 100: scale %04x bias %04x word %08x", s, bi, wd);
            unbind(&b);
        }
    }
    p.fill_zero = true;
    snprintf(out, sizeof out, "%s/qz", root);
    CHECK(specdec_inflate(srcq, out, &p, &e) == SPECDEC_OK, "inflate q4, zero fill: %s", e.msg);
    check_regions(out, true, "q4 zero fill");

    /* cancel: the first callback (done = 0, before any tensor is written) says stop */
    p = shape(128, 160, 3, 8, 4);
    prog pc = {0, 0, 0, 1};
    p.progress = on_prog;
    p.progress_user = &pc;
    snprintf(out, sizeof out, "%s/cancelled", root);
    specdec_status st = specdec_inflate(src, out, &p, &e);
    struct stat sb;
    CHECK(st == SPECDEC_ERR_CANCELLED && strstr(e.msg, "cancel"), "cancelled: %s", e.msg);
    CHECK(stat(out, &sb) != 0 && count_tmp() == 0, "cancelled: nothing left");

    /* refusals of the source-only shape arguments */
    for (size_t i = 0; i < sizeof shape_refusals / sizeof shape_refusals[0]; i++) {
        const shape_refusal *r = &shape_refusals[i];
        p = shape(r->H, r->I, r->L, r->nh, r->nkv);
        if (r->head_dim) p.head_dim = r->head_dim;
        p.tie = r->tie;
        refused(src, &p, r->want, r->word, r->label);
    }
    p = shape(128, 0, 0, 0, 0);
    p.bits = 3;
    refused(src, &p, SPECDEC_ERR_INVALID_ARG, "bits", "bits 3");
    p.bits = 4;
    p.group_size = 32;
    refused(srcq, &p, SPECDEC_ERR_INVALID_ARG, "already quantized", "bits on a quantized source");
    p = shape(80, 0, 0, 0, 0);
    refused(srcq, &p, SPECDEC_ERR_SHAPE, "hidden_size", "quantized hidden not a multiple of the group");
    p = shape(0, 0, 0, 8, 2);   /* head_dim 16: q head 3 moves to head 4; o_proj's group at 32 mixes copied and padded columns */
    char srcq16[256];
    snprintf(srcq16, sizeof srcq16, "%s/srcq16", root);
    tm_dims d16 = {64, 64, 96, 2, 6, 2, 16, 0, false, SPECDEC_DTYPE_BF16};
    mkdir(srcq16, 0755);
    char s16[256];
    snprintf(s16, sizeof s16, "%s/src16", root);
    mkdir(s16, 0755);
    CHECK(tm_write_model(s16, &d16, 2, NULL, NULL, NULL, 0) == 0, "write head_dim 16 source");
    CHECK(specdec_quantize(s16, srcq16, &qp, &e) == SPECDEC_OK, "quantize head_dim 16: %s", e.msg);
    refused(srcq16, &p, SPECDEC_ERR_SHAPE, "o_proj", "quantized head move off a group boundary");
    snprintf(out, sizeof out, "%s/full", root);
    mkdir(out, 0755);
    tm_write_file(out, "keep.txt", "precious", 8);
    p = shape(128, 0, 0, 0, 0);
    CHECK(specdec_inflate(src, out, &p, &e) == SPECDEC_ERR_IO && strstr(e.msg, "not empty"), "non-empty OUT: %s", e.msg);
    CHECK(exists(out, "keep.txt") && !exists(out, "config.json"), "non-empty OUT untouched");
    CHECK(specdec_inflate_preset("qwen3-7b", &p, &e) == SPECDEC_ERR_INVALID_ARG && strstr(e.msg, "qwen3-7b"), "unknown preset");
    CHECK(specdec_inflate_preset("qwen3-8b", &p, &e) == SPECDEC_OK && p.hidden_size == 4096 && p.n_layers == 36 &&
          p.n_heads == 32 && p.n_kv_heads == 8 && p.intermediate_size == 12288 && p.tie == SPECDEC_INFLATE_UNTIED, "qwen3-8b preset");
    refused(src, &p, SPECDEC_ERR_INVALID_ARG, "head_dim", "qwen3-8b from a head_dim-32 source");

    if (!getenv("SD_KEEP")) tm_rm_rf(root);
    return check_finish("test_inflate_io");
}
