/* test_spec_stop.c: stop strings end speculative decoding at exactly the byte classic decoding
 * stops at, even when the stop string completes in the middle of an accepted block. The tiny
 * target gets a synthetic byte-level tokenizer (256 byte tokens, no merges; V = 256) so text
 * flows through the shared emitter; the streamed text, the ids and the stop reason must match
 * classic decoding for every drafter and several K. */
#include "check.h"
#include "tiny_spec.h"
#include "specdec.h"
#include <stdlib.h>
#include <string.h>

typedef struct buf { char s[8192]; size_t n; } buf;
static bool on_text(const char *t, size_t n, void *u) {
    buf *b = u;
    if (b->n + n < sizeof b->s) { memcpy(b->s + b->n, t, n); b->n += n; }
    return true;
}


int main(void) {
    char tdir[64], ddir[64];
    if (!tm_mkdtemp(tdir, sizeof tdir) || !tm_mkdtemp(ddir, sizeof ddir)) { CHECK(0, "mkdtemp"); return check_finish("test_spec_stop"); }
    ts_dims dm = ts_default();
    dm.V = 256;
    CHECK(ts_write_pair(tdir, ddir, &dm, 13, NULL, 0) == 0, "write models");
    CHECK(tm_write_byte_tokenizer(tdir) == 0 && tm_write_byte_tokenizer(ddir) == 0, "tokenizer");
    specdec_err err = {0};
    specdec_tokenizer *tok = NULL;
    CHECK(specdec_tokenizer_load(tdir, &tok, &err) == SPECDEC_OK, "tokenizer: %s", err.msg);
    specdec_model *m = NULL;
    CHECK(specdec_model_load(tdir, NULL, &m, &err) == SPECDEC_OK, "load: %s", err.msg);
    if (!tok || !m) return check_finish("test_spec_stop");
    specdec_ctx *c = ts_ctx(m, 256, 2, &err);
    CHECK(c != NULL, "ctx: %s", err.msg);
    int32_t *prompt = NULL; size_t np = 0;
    CHECK(specdec_tokenize(tok, "abcabcabc", 9, &prompt, &np, &err) == SPECDEC_OK && np == 9, "tokenize: %s", err.msg);
    specdec_drafter *dr[3] = {0};
    CHECK(ts_three_drafters(m, ddir, dr, &err) == SPECDEC_OK, "drafters: %s", err.msg);

    specdec_gen_params gp = specdec_gen_default_params();
    gp.ignore_eos = true; gp.max_tokens = 80; gp.on_text = on_text;
    buf full = {{0}, 0};
    gp.user = &full;
    CHECK(specdec_generate(c, tok, prompt, (int)np, &gp, NULL, NULL, NULL, &err) == SPECDEC_OK, "classic");
    int tested = 0;
    for (int off = 12; off + 2 < (int)full.n && tested < 3; off += 17) {
        char stop[3] = {full.s[off], full.s[off + 1], 0};
        if (!stop[0] || !stop[1]) continue;
        const char *stops[1] = {stop};
        gp.stop = stops; gp.n_stop = 1;
        buf ref = {{0}, 0};
        gp.user = &ref;
        int32_t *rid = NULL; int nr = 0;
        specdec_gen_stats gs;
        CHECK(specdec_generate(c, tok, prompt, (int)np, &gp, &rid, &nr, &gs, &err) == SPECDEC_OK, "classic stop");
        CHECK(gs.stop_reason == 2, "classic did not stop on '%s'", stop);
        tested++;
        for (int di = 0; di < 3; di++)
            for (int K = 2; K <= 16; K = K * 2 - 1) {
                buf got = {{0}, 0};
                gp.user = &got;
                int32_t *id = NULL; int n = 0;
                specdec_spec_params sp = specdec_spec_default_params();
                sp.block_size = K; sp.quiet = true;
                specdec_spec_stats ss;
                CHECK(specdec_spec_generate(c, dr[di], tok, prompt, (int)np, &gp, &sp, &id, &n, &ss, &err) == SPECDEC_OK, "%s", err.msg);
                CHECK(got.n == ref.n && memcmp(got.s, ref.s, ref.n) == 0, "%s K=%d stop '%s': text differs (%zu vs %zu bytes)",
                      specdec_drafter_name(dr[di]), K, stop, got.n, ref.n);
                CHECK(n == nr && memcmp(id, rid, 4 * (size_t)n) == 0 && ss.gen.stop_reason == 2, "%s K=%d: ids / reason",
                      specdec_drafter_name(dr[di]), K);
                free(id);
            }
        free(rid);
    }
    CHECK(tested > 0, "no stop string could be picked from the output");
    for (int i = 0; i < 3; i++) specdec_drafter_free(dr[i]);
    free(prompt);
    specdec_ctx_free(c);
    specdec_model_free(m);
    specdec_tokenizer_free(tok);
    tm_rm_rf(tdir); tm_rm_rf(ddir);
    return check_finish("test_spec_stop");
}
