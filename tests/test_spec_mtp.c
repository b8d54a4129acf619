/* test_spec_mtp.c: the MTP drafter follows model-format.md literally. A reference written here
 * from the spec (single-row steps: entry i pairs x_{i+1} with the target's h_i at RoPE position
 * i; recursion pairs the drafted token with the previous step's m at the next position) must
 * propose the same greedy drafts as the drafter (batched accept over the prompt, then draft).
 * Then after a verified slice (accept of T positions in one call), the next proposals must match
 * the reference built from the target's true hidden states. */
#include "check.h"
#include "tiny_spec.h"
#include "drafter_harness.h"
#include "mtp_ref.h"
#include <stdlib.h>
#include <string.h>

/* A mat's codes, scales and biases byte for byte. */
static bool same_mat(const sd_mat *a, const sd_mat *b) {
    if (a->rows != b->rows || a->cols != b->cols || a->bits != b->bits || a->group != b->group || a->dtype != b->dtype)
        return false;
    return !memcmp(a->w, b->w, (size_t)sd_mat_wbytes(a)) && (!a->bits || (!memcmp(a->scales, b->scales, (size_t)sd_mat_sbytes(a)) &&
                                                                          !memcmp(a->biases, b->biases, (size_t)sd_mat_sbytes(a))));
}

/* The drafter quantized at load (SPECDEC_DRAFTER_WEIGHTS_Q4) holds the very bytes that
 * `specdec quantize --bits 4 --group-size 64 --quantize-mtp` writes for it, the target stays as
 * stored, and the 4-bit drafter drafts (its drafts checked against classic by the round tests). */
static void check_q4_at_load(const char *tdir, specdec_model *m) {
    char qdir[128];
    snprintf(qdir, sizeof qdir, "%s/q4", tdir);
    specdec_err err = {0};
    specdec_quantize_params qp = specdec_quantize_default_params();
    qp.bits = 4;
    qp.group_size = 64;
    qp.quantize_mtp = true;
    CHECK(specdec_quantize(tdir, qdir, &qp, &err) == SPECDEC_OK, "quantize --quantize-mtp: %s", err.msg);
    specdec_model *mq = NULL;
    specdec_model_params mp = specdec_model_default_params();
    CHECK(specdec_model_load(qdir, &mp, &mq, &err) == SPECDEC_OK, "load the quantized copy: %s", err.msg);
    specdec_ctx_params cp = specdec_ctx_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.drafter_weights = SPECDEC_DRAFTER_WEIGHTS_Q4;
    specdec_ctx *c = NULL;
    CHECK(specdec_ctx_init(m, &cp, &c, &err) == SPECDEC_OK, "ctx with a 4-bit drafter: %s", err.msg);
    CHECK(specdec_ctx_drafter_weights(c) == SPECDEC_DRAFTER_WEIGHTS_Q4, "asked for q4, the context reports %d",
          (int)specdec_ctx_drafter_weights(c));
    /* the default resolved as the context reports it: 4-bit on the CPU at precision int8, as stored
     * at f32 and when asked */
    const struct { specdec_precision prec; specdec_drafter_weights ask, want; } dw[3] = {
        {SPECDEC_PRECISION_INT8, SPECDEC_DRAFTER_WEIGHTS_DEFAULT, SPECDEC_DRAFTER_WEIGHTS_Q4},
        {SPECDEC_PRECISION_F32, SPECDEC_DRAFTER_WEIGHTS_DEFAULT, SPECDEC_DRAFTER_WEIGHTS_STORED},
        {SPECDEC_PRECISION_INT8, SPECDEC_DRAFTER_WEIGHTS_STORED, SPECDEC_DRAFTER_WEIGHTS_STORED}};
    uint64_t step_bytes[3] = {0, 0, 0};   /* a draft step's weight bytes, 10 head rows */
    for (int i = 0; i < 3; i++) {
        specdec_ctx_params cq = cp;
        cq.precision = dw[i].prec;
        cq.drafter_weights = dw[i].ask;
        specdec_ctx *ci = NULL;
        CHECK(specdec_ctx_init(m, &cq, &ci, &err) == SPECDEC_OK, "ctx %d: %s", i, err.msg);
        CHECK(specdec_ctx_drafter_weights(ci) == dw[i].want, "ctx %d: drafter weights %d, expected %d", i,
              (int)specdec_ctx_drafter_weights(ci), (int)dw[i].want);
        if (ci) {
            /* the head's share grows by one LM head row a row, up to the vocabulary */
            const int V = m->cfg.vocab_size;
            const uint64_t row = sd_mat_bytes(&m->w.lm_head) / (uint64_t)V;
            step_bytes[i] = specdec_ctx_drafter_step_bytes(ci, 10);
            const uint64_t b20 = specdec_ctx_drafter_step_bytes(ci, 20);
            CHECK(V > 20 && step_bytes[i] > 0 && b20 - step_bytes[i] == 10 * row, "ctx %d: step bytes %llu at 10 head rows, %llu at 20 "
                  "(a row: %llu)", i, (unsigned long long)step_bytes[i], (unsigned long long)b20, (unsigned long long)row);
            CHECK(specdec_ctx_drafter_step_bytes(ci, V + 5) == specdec_ctx_drafter_step_bytes(ci, V) &&
                  specdec_ctx_drafter_step_bytes(ci, 0) == specdec_ctx_drafter_step_bytes(ci, V),
                  "ctx %d: head rows past the vocabulary or 0 count as the vocabulary", i);
        }
        specdec_ctx_free(ci);
    }
    CHECK(step_bytes[0] < step_bytes[1] && step_bytes[0] < step_bytes[2],
          "a 4-bit drafter's step reads fewer bytes than the stored one's (%llu against %llu, %llu)",
          (unsigned long long)step_bytes[0], (unsigned long long)step_bytes[1], (unsigned long long)step_bytes[2]);
    CHECK(step_bytes[1] == step_bytes[2], "the stored drafter at f32 and int8: the same weights (%llu, %llu)",
          (unsigned long long)step_bytes[1], (unsigned long long)step_bytes[2]);
    CHECK(specdec_ctx_drafter_weights(NULL) == SPECDEC_DRAFTER_WEIGHTS_DEFAULT, "a NULL context");
    CHECK(specdec_ctx_drafter_step_bytes(NULL, 100) == 0, "a NULL context reads no drafter bytes");
    if (mq && c && mq->w.mtp && c->w.mtp) {
        CHECK(c->be->host_visible, "the CPU backend's weights are host views");
        const sd_mtp_w *a = c->w.mtp, *b = mq->w.mtp;
        CHECK(a->fc.bits == 4 && same_mat(&a->fc, &b->fc), "mtp.fc: quantized at load differs from the tool's bytes");
        for (int k = 0; k < a->n_layers; k++) {
            const sd_layer_w *x = &a->layers[k], *y = &b->layers[k];
            const sd_mat *mx[7] = {&x->q, &x->k, &x->v, &x->o, &x->gate, &x->up, &x->down};
            const sd_mat *my[7] = {&y->q, &y->k, &y->v, &y->o, &y->gate, &y->up, &y->down};
            for (int i = 0; i < 7; i++)
                CHECK(mx[i]->bits == 4 && same_mat(mx[i], my[i]), "mtp layer %d matrix %d: quantized at load differs", k, i);
        }
        CHECK(c->w.layers[0].q.bits == m->w.layers[0].q.bits && same_mat(&c->w.layers[0].q, &m->w.layers[0].q),
              "the target's matrices stay as stored");
        /* the 4-bit drafter runs, and greedy speculative output equals classic */
        specdec_drafter *d = NULL;
        CHECK(specdec_drafter_init_mtp(m, &d, &err) == SPECDEC_OK, "mtp: %s", err.msg);
        specdec_gen_params gp = specdec_gen_default_params();
        gp.max_tokens = 24;
        gp.ignore_eos = true;
        gp.sampling.temperature = 0;
        specdec_spec_params sp = specdec_spec_default_params();
        sp.block_size = 3;
        sp.quiet = true;
        int32_t prompt[6] = {3, 17, 5, 9, 40, 2}, *out_c = NULL, *out_s = NULL;
        int nc = 0, ns = 0;
        specdec_spec_stats ss;
        CHECK(specdec_spec_generate(c, NULL, NULL, prompt, 6, &gp, &sp, &out_c, &nc, &ss, &err) == SPECDEC_OK,
              "classic: %s", err.msg);
        CHECK(specdec_spec_generate(c, d, NULL, prompt, 6, &gp, &sp, &out_s, &ns, &ss, &err) == SPECDEC_OK,
              "speculative with the 4-bit drafter: %s", err.msg);
        CHECK(ss.drafted > 0, "the 4-bit drafter drafted nothing");
        CHECK(nc == ns && nc > 0 && out_c && out_s && !memcmp(out_c, out_s, sizeof(int32_t) * (size_t)nc),
              "a 4-bit drafter changed the greedy output");
        free(out_c);
        free(out_s);
        specdec_drafter_free(d);
    }
    specdec_ctx_free(c);
    specdec_model_free(mq);
}

int main(void) {
    char tdir[64];
    if (!tm_mkdtemp(tdir, sizeof tdir)) { CHECK(0, "mkdtemp"); return check_finish("test_spec_mtp"); }
    ts_dims dm = ts_default();
    dm.fc_hidden = 0.5f;   /* the hidden half matters: a pairing mistake changes the drafts */
    specdec_err err = {0};
    specdec_model *m = ts_pair_load(tdir, NULL, &dm, 11, &err);
    CHECK(m != NULL, "model: %s", err.msg);
    if (!m || !m->w.mtp) { CHECK(0, "no mtp module"); return check_finish("test_spec_mtp"); }
    int V = dm.V, H = dm.H;
    specdec_ctx *c = ts_ctx(m, 256, 2, &err);
    CHECK(c != NULL, "ctx: %s", err.msg);
    specdec_drafter *d = NULL;
    CHECK(specdec_drafter_init_mtp(m, &d, &err) == SPECDEC_OK, "mtp: %s", err.msg);
    /* no MTP module: a clear error */
    {
        specdec_model_params mp = specdec_model_default_params();
        mp.load_mtp = false;
        specdec_model *m0 = NULL;
        specdec_drafter *d0 = NULL;
        CHECK(specdec_model_load(tdir, &mp, &m0, &err) == SPECDEC_OK, "load without mtp: %s", err.msg);
        CHECK(specdec_drafter_init_mtp(m0, &d0, &err) == SPECDEC_ERR_MISSING && d0 == NULL, "mtp without module");
        specdec_model_free(m0);
    }
    mtp_ref r;
    CHECK(mtp_ref_init(&r, m, 256, &err) == 0, "reference: %s", err.msg);
    float *hid = malloc(sizeof(float) * 256 * H), *lg = malloc(sizeof(float) * 256 * V), *mm = malloc(4 * H);
    sd_target t;
    int matched = 0, total = 0;
    for (int trial = 0; trial < 4; trial++) {
        int n = 6 + 23 * trial;   /* 6, 29, 52, 75 (> one chunk of 64) */
        int32_t x[128];
        uint64_t s = 99 + trial;
        for (int i = 0; i < n; i++) x[i] = (int32_t)((tm_rand(&s) + 1.0f) * 0.5f * V) % V;
        sd_ctx_set_pos(c, 0, NULL);
        CHECK(sd_ctx_forward(c, x, n, lg, 0, hid, &err) == SPECDEC_OK, "target: %s", err.msg);
        x[n] = sd_argmax(lg + (size_t)(n - 1) * V, V);   /* the bonus */
        /* drafter: prefill + one batched accept over the prompt, then 5 greedy drafts */
        CHECK(th_bind(d, c, &t, &err) == SPECDEC_OK, "bind: %s", err.msg);
        d->vt->reset(d);
        CHECK(d->vt->prefill(d, x, n, &err) == SPECDEC_OK, "prefill");
        CHECK(th_accept(d, 0, x + 1, hid, n, &err) == SPECDEC_OK, "accept: %s", err.msg);
        specdec_sampling_params spp = specdec_sampling_default_params();
        int32_t dr[5];
        sd_draft_req req = {.n = 5, .pos = n, .bonus = x[n], .mode = SD_DRAFT_GREEDY, .sp = &spp, .out = dr, .pos_dev = th_pos(n), .q = NULL};
        int nd = 0;
        CHECK(d->vt->draft(d, &req, &nd, &err) == SPECDEC_OK && nd == 5, "draft: %s", err.msg);
        /* reference: entries 0..n-1 one row at a time, then the recursion */
        for (int i = 0; i < n; i++) mtp_ref_step(&r, x[i + 1], hid + (size_t)i * H, i, mm);
        int32_t want[5];
        for (int j = 0; j < 5; j++) {
            want[j] = sd_argmax(r.logits, V);
            if (j < 4) { float h2[256]; memcpy(h2, mm, 4 * H); mtp_ref_step(&r, want[j], h2, n + j, mm); }
        }
        for (int j = 0; j < 5; j++) CHECK(dr[j] == want[j], "trial %d draft %d: drafter %d, reference %d", trial, j, dr[j], want[j]);

        /* verify [bonus, d1..d4] on the target, accept the first 2 drafts + the target's token */
        int32_t blk[5] = {x[n], dr[0], dr[1], dr[2], dr[3]};
        CHECK(sd_ctx_forward(c, blk, 5, lg, 0, hid + (size_t)n * H, &err) == SPECDEC_OK, "verify");
        int32_t tt = sd_argmax(lg + 2 * (size_t)V, V);     /* the target's token after d_2 */
        sd_ctx_set_pos(c, n + 3, NULL);
        int32_t acc[3] = {dr[0], dr[1], tt};
        CHECK(th_accept(d, n, acc, hid + (size_t)n * H, 3, &err) == SPECDEC_OK, "accept slice: %s", err.msg);
        req.pos = n + 3; req.bonus = tt; req.n = 3; req.pos_dev = th_pos(n + 3);
        CHECK(d->vt->draft(d, &req, &nd, &err) == SPECDEC_OK && nd == 3, "draft 2: %s", err.msg);
        /* reference: rebuild entries n..n+2 from true hidden states (positions overwrite the old ones) */
        for (int i = 0; i < 3; i++) mtp_ref_step(&r, acc[i], hid + (size_t)(n + i) * H, n + i, mm);
        for (int j = 0; j < 3; j++) {
            want[j] = sd_argmax(r.logits, V);
            if (j < 2) { float h2[256]; memcpy(h2, mm, 4 * H); mtp_ref_step(&r, want[j], h2, n + 3 + j, mm); }
        }
        for (int j = 0; j < 3; j++) CHECK(dr[j] == want[j], "trial %d round-2 draft %d: drafter %d, reference %d", trial, j, dr[j], want[j]);
        /* how often the MTP guess equals the target's own next token (sanity: the module is predictive) */
        for (int j = 0; j < 5; j++) total++;
        matched += blk[1] == sd_argmax(lg, V);
    }
    CHECK(total > 0, "nothing compared");
    fprintf(stderr, "mtp first-draft agreement with the target: %d / 4\n", matched);
    check_q4_at_load(tdir, m);
    free(hid); free(lg); free(mm);
    mtp_ref_free(&r);
    specdec_drafter_free(d);
    specdec_ctx_free(c);
    specdec_model_free(m);
    tm_rm_rf(tdir);
    return check_finish("test_spec_mtp");
}
