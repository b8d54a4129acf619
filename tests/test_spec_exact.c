/* test_spec_exact.c: the exactness contract of speculative decoding at temperature 0. For every
 * drafter (ngram, mtp, draft model, mtp+ngram), every block size K = 2..16 and auto, thread counts 1/2/3 and
 * several prompts (one longer than a prefill chunk), the generated ids must equal classic
 * decoding's (specdec_generate) exactly, with the same stop reason: budget ending mid-block, EOS
 * inside a block, and the context window running out. Acceptance must be > 0 for each drafter
 * (otherwise the comparison proves little), and the mtp+ngram drafter must have drafted rounds
 * from both of its sources. */
#include "check.h"
#include "tiny_spec.h"
#include "specdec.h"
#include <stdlib.h>
#include <string.h>

static int same_ids(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return 0;
    return na == 0 || memcmp(a, b, sizeof *a * (size_t)na) == 0;
}

static int first_diff(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb;
    for (int i = 0; i < n; i++) if (a[i] != b[i]) return i;
    return n;
}

typedef struct acc_t { int64_t drafted, accepted, rounds, lookup_rounds; } acc_t;

/* Compare one speculative run with its classic baseline; returns 1 on match. */
static int compare(specdec_ctx *c, specdec_drafter *d, const int32_t *prompt, int np, specdec_gen_params *gp,
                   int K, acc_t *acc, const char *what) {
    specdec_err err = {0};
    int32_t *ref = NULL, *out = NULL; int nref = 0, nout = 0;
    specdec_gen_stats gs;
    specdec_status st = specdec_generate(c, NULL, prompt, np, gp, &ref, &nref, &gs, &err);
    CHECK(st == SPECDEC_OK, "%s: classic: %s", what, err.msg);
    specdec_spec_params sp = specdec_spec_default_params();
    sp.block_size = K;
    sp.quiet = true;
    specdec_spec_stats ss;
    st = specdec_spec_generate(c, d, NULL, prompt, np, gp, &sp, &out, &nout, &ss, &err);
    CHECK(st == SPECDEC_OK, "%s K=%d: spec: %s", what, K, err.msg);
    int ok = st == SPECDEC_OK && same_ids(ref, nref, out, nout) && gs.stop_reason == ss.gen.stop_reason;
    CHECK(ok, "%s K=%d: %d vs %d tokens, stop %d vs %d, first difference at %d", what, K, nref, nout,
          gs.stop_reason, ss.gen.stop_reason, first_diff(ref, nref, out, nout));
    if (gp->max_tokens > 1)   /* with a budget of 0 or 1 no round runs, and no probe */
        CHECK(ss.speculated && ss.probe == 1, "%s K=%d: speculation did not run (probe %d: %s)", what, K, ss.probe, ss.note);
    CHECK(ss.lookup_rounds >= 0 && ss.lookup_rounds <= ss.rounds, "%s K=%d: %lld lookup rounds of %lld", what, K,
          (long long)ss.lookup_rounds, (long long)ss.rounds);
    if (acc) {
        acc->drafted += ss.drafted; acc->accepted += ss.accepted; acc->rounds += ss.rounds;
        acc->lookup_rounds += ss.lookup_rounds;
    }
    CHECK(ss.emitted + (nout > 0 ? 1 : 0) >= nout, "%s: emitted counter %lld for %d tokens", what, (long long)ss.emitted, nout);
    free(ref); free(out);
    return ok;
}

static void make_prompt(int32_t *p, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; p[i] = (int32_t)(seed % (uint64_t)V); }
}

int main(void) {
    char tdir[64], ddir[64];
    if (!tm_mkdtemp(tdir, sizeof tdir) || !tm_mkdtemp(ddir, sizeof ddir)) { CHECK(0, "mkdtemp"); return check_finish("test_spec_exact"); }
    ts_dims dm = ts_default();
    int no_eos[1] = {0};
    CHECK(ts_write_pair(tdir, ddir, &dm, 7, no_eos, 0) == 0, "write models");
    specdec_err err = {0};
    specdec_model *m = NULL;
    CHECK(specdec_model_load(tdir, NULL, &m, &err) == SPECDEC_OK, "load target: %s", err.msg);
    if (!m) return check_finish("test_spec_exact");
#define ND 4
    const char *names[ND] = {"ngram", "mtp", "model", "mtp+ngram"};
    specdec_drafter *dr[ND] = {0};
    CHECK(specdec_drafter_init_ngram(0, &dr[0], &err) == SPECDEC_OK, "ngram: %s", err.msg);
    CHECK(specdec_drafter_init_mtp(m, &dr[1], &err) == SPECDEC_OK, "mtp: %s", err.msg);
    CHECK(specdec_drafter_init_model(m, ddir, &dr[2], &err) == SPECDEC_OK, "model: %s", err.msg);
    /* the shortest match 2: the random model's loops give the lookup rounds of its own */
    CHECK(specdec_drafter_init(m, "mtp+ngram:2", &dr[3], &err) == SPECDEC_OK, "mtp+ngram: %s", err.msg);
    acc_t acc[ND];
    memset(acc, 0, sizeof acc);
    int lens[3] = {5, 17, 70};
    int32_t prompts[3][70];
    for (int i = 0; i < 3; i++) make_prompt(prompts[i], lens[i], dm.V, 1000 + i);

    int threads[3] = {1, 2, 3};
    for (int ti = 0; ti < 3; ti++) {
        specdec_ctx *c = ts_ctx(m, 256, threads[ti], &err);
        CHECK(c != NULL, "ctx: %s", err.msg);
        if (!c) continue;
        specdec_gen_params gp = specdec_gen_default_params();
        gp.ignore_eos = true;
        for (int di = 0; di < ND; di++) {
            if (!dr[di]) continue;
            for (int pi = 0; pi < 3; pi++) {
                /* prompt 0 and 1 on every thread count, the long one on 1 thread only (time) */
                if (pi == 2 && ti > 0) continue;
                for (int K = 2; K <= 16; K++) {
                    char what[96];
                    snprintf(what, sizeof what, "%s prompt %d threads %d", names[di], pi, threads[ti]);
                    gp.max_tokens = 37 + K;   /* budgets that end mid-block for most K */
                    compare(c, dr[di], prompts[pi], lens[pi], &gp, K, &acc[di], what);
                }
                char what[96];
                snprintf(what, sizeof what, "%s prompt %d threads %d auto", names[di], pi, threads[ti]);
                gp.max_tokens = 120;
                compare(c, dr[di], prompts[pi], lens[pi], &gp, 0, &acc[di], what);
            }
            /* tiny budgets */
            for (int b = 0; b <= 3; b++) {
                gp.max_tokens = b;
                compare(c, dr[di], prompts[0], lens[0], &gp, 4, NULL, "tiny budget");
            }
        }
        specdec_ctx_free(c);
    }
    for (int di = 0; di < ND; di++) {
        fprintf(stderr, "%s: rounds %lld drafted %lld accepted %lld (%.1f%%), lookup rounds %lld\n", names[di],
                (long long)acc[di].rounds, (long long)acc[di].drafted, (long long)acc[di].accepted,
                acc[di].drafted ? 100.0 * acc[di].accepted / acc[di].drafted : 0.0, (long long)acc[di].lookup_rounds);
        CHECK(acc[di].accepted > 0, "%s: no draft was ever accepted: the identity checks prove little", names[di]);
        CHECK(di == 3 ? acc[di].lookup_rounds > 0 && acc[di].lookup_rounds < acc[di].rounds : acc[di].lookup_rounds == 0,
              "%s: %lld of %lld rounds drafted by lookup", names[di], (long long)acc[di].lookup_rounds,
              (long long)acc[di].rounds);
    }

    /* the context window running out: n_ctx 48, long budget; K is shrunk near the end */
    {
        specdec_ctx *c = ts_ctx(m, 48, 2, &err);
        CHECK(c != NULL, "ctx: %s", err.msg);
        specdec_gen_params gp = specdec_gen_default_params();
        gp.ignore_eos = true; gp.max_tokens = 100;
        for (int di = 0; c && di < ND; di++)
            for (int K = 2; K <= 16; K += 3) compare(c, dr[di], prompts[1], lens[1], &gp, K, NULL, "context end");
        specdec_ctx_free(c);
    }

    /* EOS inside a block: make a token the model emits an eos id (rewrite config.json, reload) */
    {
        specdec_ctx *c = ts_ctx(m, 256, 2, &err);
        CHECK(c != NULL, "ctx: %s", err.msg);
        specdec_gen_params gp = specdec_gen_default_params();
        gp.ignore_eos = true; gp.max_tokens = 40;
        int32_t *ref = NULL; int nref = 0;
        specdec_generate(c, NULL, prompts[0], lens[0], &gp, &ref, &nref, NULL, &err);
        specdec_ctx_free(c);
        int eos = nref > 25 ? ref[25] : 3;
        int first = -1;
        for (int i = 0; i < nref; i++) if (ref[i] == eos) { first = i; break; }
        free(ref);
        CHECK(ts_config(tdir, &dm, 2, 1, &eos, 1) == 0, "rewrite config");
        specdec_model *m2 = NULL;
        CHECK(specdec_model_load(tdir, NULL, &m2, &err) == SPECDEC_OK, "reload: %s", err.msg);
        specdec_drafter *d2[ND] = {0};
        specdec_drafter_init_ngram(0, &d2[0], &err);
        specdec_drafter_init_mtp(m2, &d2[1], &err);
        specdec_drafter_init_model(m2, ddir, &d2[2], &err);
        specdec_drafter_init(m2, "mtp+ngram:2", &d2[3], &err);
        c = m2 ? ts_ctx(m2, 256, 2, &err) : NULL;
        CHECK(c != NULL, "ctx: %s", err.msg);
        gp.ignore_eos = false;
        for (int di = 0; c && di < ND; di++)
            for (int K = 2; K <= 16; K++) {
                int32_t *out = NULL; int nout = 0;
                specdec_spec_params sp = specdec_spec_default_params();
                sp.block_size = K; sp.quiet = true;
                specdec_spec_stats ss;
                compare(c, d2[di], prompts[0], lens[0], &gp, K, NULL, "eos in block");
                specdec_spec_generate(c, d2[di], NULL, prompts[0], lens[0], &gp, &sp, &out, &nout, &ss, &err);
                CHECK(ss.gen.stop_reason == 1 && nout == first, "%s K=%d: eos at %d, stopped after %d (reason %d)",
                      names[di], K, first, nout, ss.gen.stop_reason);
                free(out);
            }
        specdec_ctx_free(c);
        for (int i = 0; i < ND; i++) specdec_drafter_free(d2[i]);
        specdec_model_free(m2);
    }
    for (int i = 0; i < ND; i++) specdec_drafter_free(dr[i]);
    specdec_model_free(m);
    tm_rm_rf(tdir); tm_rm_rf(ddir);
    return check_finish("test_spec_exact");
}
