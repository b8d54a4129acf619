/* test_spec_dvocab.c: the reduced draft vocabulary of the MTP drafter (speculative/draft_vocab.h).
 * - draft_vocab.json loading: good files (all / a prefix), and bad ones rejected with a message
 *   (missing d2t, out-of-range id, duplicate, n mismatch, prefix longer than the file, bad JSON);
 *   non-MTP drafters refuse it.
 * - row gather: dense and 4/8-bit rows come out bitwise equal to the source rows.
 * - a d2t that is a permutation of the whole vocabulary drafts exactly what the full head drafts
 *   (the gathered rows give the same logits bitwise).
 * - with a real subset (48 of 128 ids): every draft is an id of the subset in greedy, seeded and
 *   rejection modes, and speculative output is byte-identical to classic decoding for K = 2..8
 *   (greedy and seeded), with acceptance > 0. */
#include "check.h"
#include "tiny_spec.h"
#include "drafter_harness.h"
#include "speculative/draft_vocab.h"
#include "model/ctx.h"
#include "util/dtype.h"
#include <stdlib.h>
#include <string.h>

static int write_dv(const char *dir, const char *name, const int32_t *ids, int n, const char *extra) {
    size_t cap = 64 + (size_t)n * 12 + strlen(extra);
    char *b = malloc(cap);
    size_t l = (size_t)snprintf(b, cap, "{\"source\": \"test\"%s, \"d2t\": [", extra);
    for (int i = 0; i < n; i++) l += (size_t)snprintf(b + l, cap - l, "%s%d", i ? "," : "", ids[i]);
    l += (size_t)snprintf(b + l, cap - l, "]}\n");
    int rc = tm_write_file(dir, name, b, l);
    free(b);
    return rc;
}

static void gather_check(int bits) {
    int rows = 40, cols = 128, group = 32;
    sd_mat m = {.rows = rows, .cols = cols, .dtype = SPECDEC_DTYPE_BF16, .bits = bits, .group = group};
    size_t wn = bits ? (size_t)rows * cols * bits / 32 : (size_t)rows * cols / 2;   /* u32 words */
    uint32_t *w = malloc(wn * 4);
    uint16_t *sc = malloc((size_t)rows * (cols / group) * 2), *bi = malloc((size_t)rows * (cols / group) * 2);
    uint64_t s = 5 + (uint64_t)bits;
    for (size_t i = 0; i < wn; i++) { float u = tm_rand(&s); w[i] = (uint32_t)((u + 1.0f) * 2.1e9f) ^ (uint32_t)(i * 2654435761u); }
    if (!bits) for (size_t i = 0; i < wn * 2; i++) { float f = tm_rand(&s); sd_from_f32(SPECDEC_DTYPE_BF16, &f, (uint16_t *)w + i, 1); }
    for (int i = 0; i < rows * (cols / group); i++) {
        float a = 0.01f * (1.0f + tm_rand(&s)), b = 0.1f * tm_rand(&s);
        sd_from_f32(SPECDEC_DTYPE_BF16, &a, sc + i, 1);
        sd_from_f32(SPECDEC_DTYPE_BF16, &b, bi + i, 1);
    }
    m.w = w; m.scales = bits ? sc : NULL; m.biases = bits ? bi : NULL;
    int32_t pick[7] = {39, 0, 17, 3, 38, 21, 1};
    sd_mat g; void *buf = NULL; specdec_err err = {0};
    CHECK(sd_mat_gather_rows(&m, pick, 7, &g, &buf, &err) == SPECDEC_OK, "gather %d-bit: %s", bits, err.msg);
    float a[128], b[128];
    for (int j = 0; buf && j < 7; j++) {
        sd_mat_row_f32(&m, pick[j], a);
        sd_mat_row_f32(&g, j, b);
        CHECK(memcmp(a, b, sizeof a) == 0 && g.rows == 7 && g.cols == cols, "gather %d-bit: row %d (source %d) differs", bits, j, pick[j]);
    }
    free(buf);
    int32_t badrow = 40;
    CHECK(sd_mat_gather_rows(&m, &badrow, 1, &g, &buf, &err) == SPECDEC_ERR_INVALID_ARG && !buf, "gather: row out of range accepted");
    free(w); free(sc); free(bi);
}

/* Bind, prefill, accept the prompt, draft n in `mode`; returns drafted count. */
static int draft_once(specdec_drafter *d, sd_target *t, specdec_ctx *c, const int32_t *x, int n, float *hid, float *lg,
                      sd_draft_mode mode, int32_t *out, int nd) {
    specdec_err err = {0};
    int V = t->vocab;
    sd_ctx_set_pos(c, 0, NULL);
    CHECK(sd_ctx_forward(c, x, n, lg, 0, hid, &err) == SPECDEC_OK, "target: %s", err.msg);
    int32_t toks[128];
    memcpy(toks, x + 1, sizeof(int32_t) * (size_t)(n - 1));
    toks[n - 1] = sd_argmax(lg + (size_t)(n - 1) * V, V);
    CHECK(th_bind(d, c, t, &err) == SPECDEC_OK, "bind: %s", err.msg);
    d->vt->reset(d);
    CHECK(d->vt->prefill(d, x, n, &err) == SPECDEC_OK, "prefill");
    CHECK(th_accept(d, 0, toks, hid, n, &err) == SPECDEC_OK, "accept: %s", err.msg);
    specdec_sampling_params spp = specdec_sampling_default_params();
    spp.temperature = mode == SD_DRAFT_GREEDY ? 0.0f : 0.9f;
    spp.seed = 42;
    sd_dist q[8];
    for (int i = 0; i < nd; i++) sd_dist_init(&q[i], V, NULL);
    sd_draft_req req = {.n = nd, .pos = n, .bonus = toks[n - 1], .mode = mode, .sp = &spp, .out = out,
                        .pos_dev = th_pos(n), .q = mode == SD_DRAFT_SAMPLE ? q : NULL};
    int got = 0;
    CHECK(d->vt->draft(d, &req, &got, &err) == SPECDEC_OK, "draft: %s", err.msg);
    for (int i = 0; i < nd; i++) {
        if (mode == SD_DRAFT_SAMPLE) CHECK(sd_dist_prob(&q[i], out[i]) > 0, "sampled draft %d has q = 0", out[i]);
        sd_dist_free(&q[i]);
    }
    return got;
}

int main(void) {
    char tdir[64];
    if (!tm_mkdtemp(tdir, sizeof tdir)) { CHECK(0, "mkdtemp"); return check_finish("test_spec_dvocab"); }
    ts_dims dm = ts_default();
    CHECK(ts_write_pair(tdir, NULL, &dm, 7, NULL, 0) == 0, "write model");
    int V = dm.V;
    specdec_err err = {0};
    char p[160];

    /* --- loading --- */
    int32_t perm[128], sub[48];
    for (int i = 0; i < V; i++) perm[i] = (int32_t)((i * 37 + 11) % V);   /* 37 odd: a permutation */
    for (int i = 0; i < 48; i++) sub[i] = perm[i];
    CHECK(write_dv(tdir, "perm.json", perm, V, ", \"n\": 128") == 0, "write perm");
    CHECK(write_dv(tdir, "sub.json", sub, 48, "") == 0, "write sub");
    sd_draft_vocab dv;
    snprintf(p, sizeof p, "%s/sub.json", tdir);
    CHECK(sd_draft_vocab_load(p, 0, V, &dv, &err) == SPECDEC_OK && dv.n == 48 && dv.d2t[5] == sub[5], "load sub: %s", err.msg);
    sd_draft_vocab_free(&dv);
    CHECK(sd_draft_vocab_load(p, 10, V, &dv, &err) == SPECDEC_OK && dv.n == 10 && dv.n_file == 48 && dv.d2t[9] == sub[9],
          "load prefix: %s", err.msg);
    sd_draft_vocab_free(&dv);
    CHECK(sd_draft_vocab_load(p, 49, V, &dv, &err) == SPECDEC_ERR_INVALID_ARG, "prefix longer than the file accepted");
    /* the file's default_n: taken for SPECDEC_DRAFT_VOCAB_FILE_DEFAULT, all ids when absent */
    CHECK(sd_draft_vocab_load(p, SPECDEC_DRAFT_VOCAB_FILE_DEFAULT, V, &dv, &err) == SPECDEC_OK && dv.n == 48,
          "file default without default_n: %s", err.msg);
    sd_draft_vocab_free(&dv);
    CHECK(write_dv(tdir, "subd.json", sub, 48, ", \"default_n\": 20") == 0, "write subd");
    snprintf(p, sizeof p, "%s/subd.json", tdir);
    CHECK(sd_draft_vocab_load(p, SPECDEC_DRAFT_VOCAB_FILE_DEFAULT, V, &dv, &err) == SPECDEC_OK && dv.n == 20 &&
          dv.n_file == 48 && dv.d2t[19] == sub[19], "file default_n 20: %s (n %d)", err.msg, dv.n);
    sd_draft_vocab_free(&dv);
    CHECK(sd_draft_vocab_load(p, 0, V, &dv, &err) == SPECDEC_OK && dv.n == 48, "n 0 with default_n: all ids");
    sd_draft_vocab_free(&dv);
    CHECK(sd_draft_vocab_load(p, -2, V, &dv, &err) == SPECDEC_ERR_INVALID_ARG, "n -2 accepted");
    snprintf(p, sizeof p, "%s/sub.json", tdir);
    CHECK(sd_draft_vocab_load(p, 0, 100, &dv, &err) == SPECDEC_ERR_FORMAT && strstr(err.msg, "d2t["), "id >= vocab: %s", err.msg);
    struct { const char *name, *text; } bad[] = {
        {"b1.json", "{\"n\": 2}"}, {"b2.json", "{\"d2t\": [1, 2, 1]}"}, {"b3.json", "{\"d2t\": [1, -2]}"},
        {"b4.json", "{\"n\": 3, \"d2t\": [1, 2]}"}, {"b5.json", "{\"d2t\": [1, 2"}, {"b6.json", "{\"d2t\": []}"},
        {"b7.json", "{\"d2t\": [1, \"x\"]}"},
        {"b8.json", "{\"default_n\": 3, \"d2t\": [1, 2]}"}, {"b9.json", "{\"default_n\": 0, \"d2t\": [1, 2]}"},
        {"b10.json", "{\"default_n\": \"2\", \"d2t\": [1, 2]}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(tm_write_file(tdir, bad[i].name, bad[i].text, strlen(bad[i].text)) == 0, "write bad");
        snprintf(p, sizeof p, "%s/%s", tdir, bad[i].name);
        specdec_status st = sd_draft_vocab_load(p, 0, V, &dv, &err);
        CHECK(st == SPECDEC_ERR_FORMAT && strstr(err.msg, bad[i].name), "%s accepted or unnamed (%d: %s)", bad[i].name, st, err.msg);
    }
    snprintf(p, sizeof p, "%s/none.json", tdir);
    CHECK(sd_draft_vocab_load(p, 0, V, &dv, &err) == SPECDEC_ERR_IO, "missing file: %s", err.msg);

    gather_check(0); gather_check(4); gather_check(8);

    specdec_model *m = NULL;
    CHECK(specdec_model_load(tdir, NULL, &m, &err) == SPECDEC_OK, "load: %s", err.msg);
    if (!m) return check_finish("test_spec_dvocab");
    specdec_ctx *c = ts_ctx(m, 256, 2, &err);
    CHECK(c != NULL, "ctx: %s", err.msg);
    specdec_drafter *full = NULL, *dperm = NULL, *dsub = NULL, *ng = NULL;
    CHECK(specdec_drafter_init_mtp(m, &full, &err) == SPECDEC_OK, "mtp: %s", err.msg);
    CHECK(specdec_drafter_init_mtp(m, &dperm, &err) == SPECDEC_OK, "mtp: %s", err.msg);
    CHECK(specdec_drafter_init_mtp(m, &dsub, &err) == SPECDEC_OK, "mtp: %s", err.msg);
    CHECK(specdec_drafter_init_ngram(0, &ng, &err) == SPECDEC_OK, "ngram");
    snprintf(p, sizeof p, "%s/sub.json", tdir);
    CHECK(specdec_drafter_set_draft_vocab(ng, p, 0, &err) == SPECDEC_ERR_UNSUPPORTED, "ngram took a draft vocabulary");
    CHECK(specdec_drafter_set_draft_vocab(dsub, p, 0, &err) == SPECDEC_OK, "attach sub: %s", err.msg);
    CHECK_EQ_INT(specdec_drafter_draft_vocab_size(dsub), 48);
    CHECK_EQ_INT(specdec_drafter_draft_vocab_size(full), 0);
    snprintf(p, sizeof p, "%s/b2.json", tdir);
    CHECK(specdec_drafter_set_draft_vocab(dperm, p, 0, &err) == SPECDEC_ERR_FORMAT && specdec_drafter_draft_vocab_size(dperm) == 0,
          "a bad file leaves the full head");
    snprintf(p, sizeof p, "%s/perm.json", tdir);
    CHECK(specdec_drafter_set_draft_vocab(dperm, p, 0, &err) == SPECDEC_OK, "attach perm: %s", err.msg);
    bool in_sub[128] = {false};
    for (int i = 0; i < 48; i++) in_sub[sub[i]] = true;

    /* --- the drafter directly --- */
    sd_target t;
    sd_target_of(&t, c);
    float *hid = malloc(sizeof(float) * 128 * dm.H), *lg = malloc(sizeof(float) * 128 * V);
    int same = 0, outside = 0, total = 0;
    for (int trial = 0; trial < 6; trial++) {
        int32_t x[128];
        int n = 5 + 17 * trial;
        uint64_t s = 1234 + (uint64_t)trial;
        for (int i = 0; i < n; i++) x[i] = (int32_t)((tm_rand(&s) + 1.0f) * 0.5f * V) % V;
        int32_t a[6], b[6], e[6];
        int na = draft_once(full, &t, c, x, n, hid, lg, SD_DRAFT_GREEDY, a, 6);
        int nb = draft_once(dperm, &t, c, x, n, hid, lg, SD_DRAFT_GREEDY, b, 6);
        same += na == nb && memcmp(a, b, sizeof a) == 0;
        for (int mode = 0; mode < 3; mode++) {
            int ne = draft_once(dsub, &t, c, x, n, hid, lg, (sd_draft_mode)mode, e, 6);
            for (int i = 0; i < ne; i++) { total++; outside += !in_sub[e[i]]; }
        }
    }
    CHECK_EQ_INT(same, 6);
    CHECK(total == 6 * 3 * 6 && outside == 0, "%d of %d drafts outside the subset", outside, total);
    free(hid); free(lg);

    /* --- byte identity vs classic --- */
    int64_t drafted = 0, accepted = 0;
    for (int seeded = 0; seeded < 2; seeded++)
        for (int K = 2; K <= 8; K++)
            for (int pr = 0; pr < 2; pr++) {
                int32_t prompt[80];
                int np = pr ? 70 : 9;   /* 70: more than one prefill chunk of 64 */
                uint64_t s = 77 + (uint64_t)pr;
                for (int i = 0; i < np; i++) prompt[i] = (int32_t)((tm_rand(&s) + 1.0f) * 0.5f * V) % V;
                specdec_gen_params gp = specdec_gen_default_params();
                gp.max_tokens = 40; gp.ignore_eos = true;
                if (seeded) { gp.sampling.temperature = 0.8f; gp.sampling.seed = 9 + (uint64_t)K; }
                int32_t *ref = NULL, *out = NULL; int nref = 0, nout = 0;
                specdec_gen_stats gs;
                CHECK(specdec_generate(c, NULL, prompt, np, &gp, &ref, &nref, &gs, &err) == SPECDEC_OK, "classic: %s", err.msg);
                specdec_spec_params sp = specdec_spec_default_params();
                sp.block_size = K; sp.quiet = true;
                sp.sampling = SPECDEC_SPEC_SEEDED;
                specdec_spec_stats ss;
                CHECK(specdec_spec_generate(c, dsub, NULL, prompt, np, &gp, &sp, &out, &nout, &ss, &err) == SPECDEC_OK, "spec: %s", err.msg);
                CHECK(nref == nout && ref && out && memcmp(ref, out, sizeof *ref * (size_t)nref) == 0 && ss.speculated,
                      "%s K=%d prompt %d: output differs from classic", seeded ? "seeded" : "greedy", K, pr);
                drafted += ss.drafted; accepted += ss.accepted;
                free(ref); free(out);
            }
    CHECK(drafted > 0 && accepted > 0, "reduced vocabulary: %lld drafted, %lld accepted", (long long)drafted, (long long)accepted);
    fprintf(stderr, "test_spec_dvocab: subset 48/128: %lld of %lld drafts accepted\n", (long long)accepted, (long long)drafted);
    /* rejection mode runs and the back-to-full switch works */
    {
        int32_t prompt[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        specdec_gen_params gp = specdec_gen_default_params();
        gp.max_tokens = 30; gp.ignore_eos = true; gp.sampling.temperature = 0.8f; gp.sampling.seed = 3;
        specdec_spec_params sp = specdec_spec_default_params();
        sp.block_size = 4; sp.quiet = true;
        specdec_spec_stats ss;
        int32_t *out = NULL; int nout = 0;
        CHECK(specdec_spec_generate(c, dsub, NULL, prompt, 9, &gp, &sp, &out, &nout, &ss, &err) == SPECDEC_OK && nout == 30,
              "rejection: %s", err.msg);
        free(out);
        CHECK(specdec_drafter_set_draft_vocab(dsub, NULL, 0, &err) == SPECDEC_OK && specdec_drafter_draft_vocab_size(dsub) == 0,
              "back to the full head");
    }
    specdec_drafter_free(full); specdec_drafter_free(dperm); specdec_drafter_free(dsub); specdec_drafter_free(ng);
    specdec_ctx_free(c);
    specdec_model_free(m);
    return check_finish("test_spec_dvocab");
}
