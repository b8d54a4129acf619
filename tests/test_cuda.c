/* test_cuda.c: the CUDA backend as an object. Everywhere: asking for it where it cannot run is
 * a clean error (no device, or not built) and `auto` falls back to the CPU. On a machine with a
 * CUDA device: memory (zero-filled alloc, transfers larger than the pinned staging, copies,
 * counters, out of memory named with the free memory), the supports() table, the round's ops
 * (argmax with ties / NaN / maps, the seeded sampler token for token against the CPU backend's,
 * the walk, copy_row), recordings (a captured sequence replayed at a moved device position gives
 * what running it again gives; host transfers inside one are refused and the recording dropped;
 * releasing memory drops recordings), and errors that name the op. */
#include "cuda_test.h"
#include "sample/sample.h"
#include <stdio.h>

static void test_unavailable(void) {
    sd_backend *b = NULL;
    sd_backend_opts o;
    memset(&o, 0, sizeof o);
    specdec_status st = sd_backend_create("cuda", &o, &b, &E);
    CHECK(st == SPECDEC_ERR_UNSUPPORTED && b == NULL, "backend 'cuda' without a device: status %d", (int)st);
    CHECK(strstr(E.msg, "cuda") != NULL, "the error names the backend: '%s'", E.msg);
    CHECK(sd_backend_create("auto", &o, &b, &E) == SPECDEC_OK && b && !strcmp(b->name, "cpu"),
          "auto without a device gives the CPU: %s", E.msg);
    sd_backend_free(b);
}

static void test_memory(void) {
    const size_t n = (size_t)9 << 20;   /* more than the 4 MiB write ring and read buffer */
    unsigned char *h = malloc(n), *back = malloc(n);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 131u + (i >> 13));
    void *d = NULL, *d2 = NULL;
    CHECK(G->i->alloc(G, n, "test zeros", &d, &E) == SPECDEC_OK, "alloc: %s", E.msg);
    memset(back, 0xff, n);
    dget(back, d, n);
    size_t nz = 0;
    for (size_t i = 0; i < n; i++) nz += back[i] != 0;
    CHECK(nz == 0, "alloc is not zero-filled (%zu bytes)", nz);
    sd_backend_stats s0 = G->stats;
    CHECK(G->i->write(G, d, h, n, &E) == SPECDEC_OK, "write: %s", E.msg);
    dget(back, d, n);
    CHECK(same_bits(back, h, n), "write/read round trip of %zu bytes", n);
    CHECK(G->stats.write_calls == s0.write_calls + 1 && G->stats.write_bytes == s0.write_bytes + n &&
              G->stats.read_bytes == s0.read_bytes + n, "transfer counters");
    CHECK(G->i->alloc(G, n, "test copy", &d2, &E) == SPECDEC_OK, "alloc: %s", E.msg);
    CHECK(G->i->copy(G, d2, d, n, &E) == SPECDEC_OK, "copy: %s", E.msg);
    memset(back, 0, n);
    dget(back, d2, n);
    CHECK(same_bits(back, h, n), "device copy");
    const void *up = NULL;
    uint64_t ub = G->stats.upload_bytes;
    CHECK(G->i->upload(G, h, n, "test upload", &up, &E) == SPECDEC_OK, "upload: %s", E.msg);
    memset(back, 0, n);
    dget(back, up, n);
    CHECK(same_bits(back, h, n) && G->stats.upload_bytes == ub + n, "upload copies and counts");
    G->i->unload(G, up);
    dfree(d);
    dfree(d2);
    void *huge = NULL;
    specdec_status st = G->i->alloc(G, (size_t)1 << 50, "test huge buffer", &huge, &E);
    CHECK(st == SPECDEC_ERR_NOMEM && !huge, "a 1 PiB alloc: status %d", (int)st);
    CHECK(strstr(E.msg, "test huge buffer") && strstr(E.msg, "free"), "out of memory names what and the free memory: %s", E.msg);
    CHECK(G->i->sync(G, &E) == SPECDEC_OK, "the backend works after out of memory: %s", E.msg);
    free(h);
    free(back);
}

static void test_supports(void) {
    sd_op_desc d;
    memset(&d, 0, sizeof d);
    d.bits = 4; d.group = 64; d.dtype = SPECDEC_DTYPE_BF16;
    CHECK(G->i->supports(G, SD_OP_MATMUL, &d) && G->i->supports(G, SD_OP_LM_ARGMAX, &d), "4-bit g64 matmul");
    d.group = 48;
    CHECK(!G->i->supports(G, SD_OP_MATMUL, &d), "group 48 is not supported");
    d.bits = 3; d.group = 64;
    CHECK(!G->i->supports(G, SD_OP_EMBED, &d), "3-bit is not supported");
    memset(&d, 0, sizeof d);
    d.filtered = true;
    CHECK(!G->i->supports(G, SD_OP_SAMPLE, &d), "filtered sampling is the host's");
    d.filtered = false;
    CHECK(G->i->supports(G, SD_OP_SAMPLE, &d), "unfiltered sampling");
    d.kv_dtype = SD_KV_F16;
    CHECK(G->i->supports(G, SD_OP_ATTENTION, &d), "f16 KV");
    CHECK(G->i->lm_argmax != NULL && G->i->seq_begin != NULL, "fused LM head and recordings are offered");
}

/* ---- the round's ops ---- */

static void test_argmax(int n) {
    enum { T = 4 };
    float *l = malloc(sizeof(float) * T * (size_t)n);
    fill_normal(l, (size_t)T * n, 2.0f);
    if (n > 2) { l[n - 1] = l[1] = 100.0f; l[0] = NAN; }       /* row 0: a tie, the lower wins */
    for (int i = 0; i < n; i++) l[(size_t)n + i] = NAN;          /* row 1: all NaN -> 0 */
    for (int i = 0; i < n; i++) l[2 * (size_t)n + i] = -INFINITY; /* row 2: all -inf -> 0 */
    if (n > 5) l[2 * (size_t)n + 5] = NAN;
    int32_t *map = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) map[i] = n - 1 - i;
    float *dl = dput(l, sizeof(float) * T * (size_t)n);
    int32_t *dmap = dput(map, sizeof(int32_t) * (size_t)n), *dout = dput(NULL, sizeof(int32_t) * T), out[T];
    for (int m = 0; m < 2; m++) {
        CHECK_OP(G, G->i->argmax(G, dl, n, T, m ? dmap : NULL, dout), "argmax");
        dget(out, dout, sizeof out);
        for (int t = 0; t < T; t++) {
            int32_t a = sd_argmax(l + (size_t)t * n, n);
            CHECK(out[t] == (m ? map[a] : a), "argmax n %d row %d (map %d): %d, want %d", n, t, m, out[t], m ? map[a] : a);
        }
    }
    dfree(dl); dfree(dmap); dfree(dout);
    free(l); free(map);
}

/* Seeded sampling: the same token as the CPU backend (sd_sample) for the same logits. */
static void test_sample(int n, int vocab, bool mapped) {
    enum { T = 3 };
    float *l = malloc(sizeof(float) * T * (size_t)n);
    int32_t *map = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) map[i] = (int32_t)(((int64_t)i * 7919 + 13) % vocab);   /* distinct: vocab prime to 7919 */
    float *dl = NULL;
    int32_t *dmap = mapped ? dput(map, sizeof(int32_t) * (size_t)n) : NULL;
    int32_t *dout = dput(NULL, sizeof(int32_t) * T), out[T], want[T], base = 17;
    int32_t *dbase = dint(base);
    const float temps[] = {0.0f, 0.6f, 1.0f, 1.7f};
    for (int round = 0; round < 8; round++) {
        fill_normal(l, (size_t)T * n, 3.0f);
        if (round == 5) for (int i = 0; i < n; i++) l[i] = -INFINITY;              /* degenerate rows */
        if (round == 6) for (int i = 0; i < n; i++) l[(size_t)n + i] = i % 3 ? NAN : -INFINITY;
        if (round == 7) l[2 * (size_t)n + n / 2] = INFINITY;
        if (round == 4) for (int i = 0; i < n; i += 2) l[i] = l[(size_t)n + i] = 9.0f;   /* ties */
        dl = dput(l, sizeof(float) * T * (size_t)n);
        specdec_sampling_params sp = specdec_sampling_default_params();
        sp.temperature = temps[round % 4];
        sp.seed = rnd();
        CHECK_OP(G, G->i->sample(G, &sp, dl, n, vocab, dmap, T, (sd_pos){dbase, 5}, dout), "sample");
        CHECK_OP(R, R->i->sample(R, &sp, l, n, vocab, mapped ? map : NULL, T, (sd_pos){&base, 5}, want), "reference sample");
        dget(out, dout, sizeof out);
        for (int t = 0; t < T; t++)
            CHECK(out[t] == want[t], "sample n %d vocab %d map %d round %d row %d (temperature %g): %d, CPU %d", n, vocab,
                  (int)mapped, round, t, (double)sp.temperature, out[t], want[t]);
        dfree(dl);
    }
    specdec_sampling_params sp = specdec_sampling_default_params();
    sp.temperature = 0.8f;
    sp.top_k = 40;
    dl = dput(l, sizeof(float) * T * (size_t)n);
    CHECK(G->i->sample(G, &sp, dl, n, vocab, dmap, T, (sd_pos){dbase, 5}, dout) == SPECDEC_ERR_UNSUPPORTED,
          "filtered sampling is refused");
    dfree(dl); dfree(dmap); dfree(dout); dfree(dbase);
    free(l); free(map);
}

static void test_walk_copy(void) {
    /* drafts 5 7 9 against choices 5 7 4 8: two accepted, then the target's 4 */
    int32_t blk[4] = {1, 5, 7, 9}, choice[4] = {5, 7, 4, 8}, pos = 20, prev = 0, emit[5];
    int32_t *dblk = dput(blk, sizeof blk), *dch = dput(choice, sizeof choice), *dem = dput(NULL, sizeof emit);
    int32_t *dpos = dint(pos), *dprev = dint(0);
    CHECK_OP(G, G->i->walk(G, dblk, 3, dch, dem, dpos, dprev), "walk");
    dget(emit, dem, sizeof emit);
    dget(blk, dblk, sizeof blk);
    dget(&pos, dpos, 4);
    dget(&prev, dprev, 4);
    CHECK(emit[0] == 3 && emit[1] == 5 && emit[2] == 7 && emit[3] == 4, "walk emit [%d %d %d %d]", emit[0], emit[1],
          emit[2], emit[3]);
    CHECK(blk[0] == 4 && pos == 23 && prev == 20, "walk bonus %d pos %d prev %d", blk[0], pos, prev);
    int32_t choice2[4] = {5, 7, 9, 2};   /* all accepted: the bonus after the last */
    blk[0] = 1;
    G->i->write(G, dblk, blk, sizeof blk, &E);
    G->i->write(G, dch, choice2, sizeof choice2, &E);
    CHECK_OP(G, G->i->walk(G, dblk, 3, dch, dem, dpos, dprev), "walk");
    dget(emit, dem, sizeof emit);
    dget(&pos, dpos, 4);
    CHECK(emit[0] == 4 && emit[3] == 9 && emit[4] == 2 && pos == 27, "walk all accepted: [%d .. %d] pos %d", emit[0],
          emit[4], pos);
    /* copy_row: row (*idx + off) of a (6, 10) buffer */
    float src[60], row[10];
    fill_normal(src, 60, 1.0f);
    float *dsrc = dput(src, sizeof src), *drow = dput(NULL, sizeof row);
    int32_t *didx = dint(3);
    CHECK_OP(G, G->i->copy_row(G, drow, dsrc, 10, 10, didx, 2), "copy_row");
    dget(row, drow, sizeof row);
    CHECK(same_bits(row, src + 50, sizeof row), "copy_row picks row 5");
    dfree(dblk); dfree(dch); dfree(dem); dfree(dpos); dfree(dprev); dfree(dsrc); dfree(drow); dfree(didx);
}

/* ---- recordings ---- */

/* y = W x (2 rows), rope on y as 6 heads of 8 at the device position, argmax of y */
static void seq_ops(const sd_mat *W, const float *dx, float *dy, int32_t *dpos, const float *dct, const float *dst,
                    int32_t *dout) {
    CHECK_OP(G, G->i->matmul(G, W, dx, 64, dy, 48, 2), "matmul");
    CHECK_OP(G, G->i->rope(G, dy, 2, 6, 8, (sd_pos){dpos, 1}, dct, dst), "rope");
    CHECK_OP(G, G->i->argmax(G, dy, 48, 2, NULL, dout), "argmax");
}

static void test_recording(void) {
    hmat h = hmat_make(48, 64, SPECDEC_DTYPE_BF16, 0, 0, true);
    float x[128], ct[16 * 4], st[16 * 4], y_e[2][96], y_r[96];
    int32_t out_e[2][2], out_r[2];
    fill_normal(x, 128, 1.0f);
    for (int i = 0; i < 64; i++) { ct[i] = cosf(0.1f * i); st[i] = sinf(0.1f * i); }
    float *dx = dput(x, sizeof x), *dy = dput(NULL, sizeof y_r), *dct = dput(ct, sizeof ct), *dst = dput(st, sizeof st);
    int32_t *dpos = dint(3), *dout = dput(NULL, 8);
    const int32_t at[2] = {3, 9};
    for (int k = 0; k < 2; k++) {   /* eager, at positions 3 and 9 */
        CHECK(sd_be_write_i32(G, dpos, at[k], &E) == SPECDEC_OK, "write: %s", E.msg);
        seq_ops(&h.d, dx, dy, dpos, dct, dst, dout);
        dget(y_e[k], dy, sizeof y_r);
        dget(out_e[k], dout, 8);
    }
    CHECK(!same_bits(y_e[0], y_e[1], sizeof y_r), "the position moves the result");
    sd_backend_stats s0 = G->stats;
    for (int k = 0; k < 2; k++) {
        CHECK(sd_be_write_i32(G, dpos, at[k], &E) == SPECDEC_OK, "write: %s", E.msg);
        CHECK(G->i->write(G, dy, y_e[1 - k], sizeof y_r, &E) == SPECDEC_OK, "write: %s", E.msg);   /* stale */
        bool replayed = G->i->seq_begin(G, 77);
        CHECK(replayed == (k == 1), "seq_begin: %s the %s time", replayed ? "replayed" : "recorded", k ? "second" : "first");
        if (!replayed) {
            seq_ops(&h.d, dx, dy, dpos, dct, dst, dout);
            CHECK(G->i->seq_end(G, 77, &E) == SPECDEC_OK, "seq_end: %s", E.msg);
        }
        dget(y_r, dy, sizeof y_r);
        dget(out_r, dout, 8);
        CHECK(same_bits(y_r, y_e[k], sizeof y_r) && out_r[0] == out_e[k][0] && out_r[1] == out_e[k][1],
              "recorded / replayed at position %d equals running it", at[k]);
    }
    CHECK(G->stats.seq_recorded == s0.seq_recorded + 1 && G->stats.seq_replayed == s0.seq_replayed + 1,
          "one recording, one replay (%llu, %llu)", (unsigned long long)(G->stats.seq_recorded - s0.seq_recorded),
          (unsigned long long)(G->stats.seq_replayed - s0.seq_replayed));
    CHECK(G->stats.ops >= s0.ops + 6, "a replay counts its ops");

    /* a host transfer inside a recording is refused, the recording dropped, the backend fine */
    CHECK(!G->i->seq_begin(G, 78), "new key records");
    CHECK(G->i->write(G, dpos, &at[0], 4, &E) == SPECDEC_ERR_INVALID_ARG, "write inside a recording is refused");
    CHECK(G->i->seq_end(G, 78, &E) != SPECDEC_OK, "seq_end reports the dropped recording");
    CHECK(!G->i->seq_begin(G, 78), "the dropped key records again");
    seq_ops(&h.d, dx, dy, dpos, dct, dst, dout);
    CHECK(G->i->seq_end(G, 78, &E) == SPECDEC_OK, "seq_end: %s", E.msg);

    /* releasing memory drops every recording (they may point at it) */
    void *tmp = dput(NULL, 64);
    dfree(tmp);
    CHECK(!G->i->seq_begin(G, 77), "after a release the key records again");
    seq_ops(&h.d, dx, dy, dpos, dct, dst, dout);
    CHECK(G->i->seq_end(G, 77, &E) == SPECDEC_OK, "seq_end: %s", E.msg);

    /* an op error names the op and leaves the backend usable */
    sd_mat bad = h.d;
    bad.bits = 3;
    bad.group = 64;
    bad.scales = bad.biases = h.d.w;
    CHECK(G->i->matmul(G, &bad, dx, 64, dy, 48, 2) == SPECDEC_ERR_UNSUPPORTED && strstr(G->err.msg, "matmul") &&
              strstr(G->err.msg, "3-bit"), "a 3-bit matmul is refused by name: %s", G->err.msg);
    CHECK(G->i->sync(G, &E) == SPECDEC_OK, "sync after a refused op: %s", E.msg);
    dfree(dx); dfree(dy); dfree(dct); dfree(dst); dfree(dpos); dfree(dout);
    hmat_free(&h);
}

int main(void) {
    if (!cuda_setup()) {
        test_unavailable();
        cuda_teardown();
        return check_finish("test_cuda");
    }
    fprintf(stderr, "test_cuda: %s\n", G->i->kernels(G));
    CHECK(!strcmp(G->name, "cuda") && !G->host_visible, "name and host visibility");
    test_memory();
    test_supports();
    const int ns[] = {1, 100, 8192, 8193, 151936};
    for (int i = 0; i < 5; i++) test_argmax(ns[i]);
    test_sample(151936, 151936, false);
    test_sample(3000, 3000, false);
    test_sample(2000, 151936, true);
    test_sample(32768, 151936, true);
    test_walk_copy();
    test_recording();
    cuda_teardown();
    return check_finish("test_cuda");
}
