/* test_spec_probe.c: the block-vs-chain exactness probe fails closed. With the fast matmul
 * deliberately broken for T > 1 (sd_ops_debug_break_invariance), a drafter's first generation
 * must decline speculation (probe failed, classic output, a note saying so); allow_inexact must
 * engage it anyway and say so. With intact kernels the probe passes and is cached. Also: the
 * phases of the round plus the named residual add up to the round time, residual < 2%. */
#include "check.h"
#include "tiny_spec.h"
#include "specdec.h"
#include "cpu/ops.h"
#include <stdlib.h>
#include <string.h>

int main(void) {
    char tdir[64];
    ts_dims dm = ts_default();
    specdec_err err = {0};
    specdec_model *m = ts_open_pair(tdir, NULL, &dm, 5, &err);
    if (!m) return check_finish("test_spec_probe");
    specdec_ctx *c = ts_ctx(m, 256, 2, &err);
    CHECK(c != NULL, "ctx: %s", err.msg);
    int32_t prompt[9] = {3, 14, 15, 92, 65, 35, 89, 79, 32};
    specdec_gen_params gp = specdec_gen_default_params();
    gp.ignore_eos = true; gp.max_tokens = 50;
    specdec_spec_params sp = specdec_spec_default_params();
    sp.block_size = 6; sp.quiet = true;
    const char *kinds[2] = {"ngram", "mtp"};
    for (int k = 0; k < 2 && c; k++) {
        specdec_drafter *d = NULL;
        CHECK(specdec_drafter_init(m, kinds[k], &d, &err) == SPECDEC_OK, "%s: %s", kinds[k], err.msg);
        sd_ops_debug_break_invariance(1);
        int32_t *ref = NULL, *out = NULL; int nref = 0, nout = 0;
        CHECK(specdec_generate(c, NULL, prompt, 9, &gp, &ref, &nref, NULL, &err) == SPECDEC_OK, "classic");
        specdec_spec_stats ss;
        CHECK(specdec_spec_generate(c, d, NULL, prompt, 9, &gp, &sp, &out, &nout, &ss, &err) == SPECDEC_OK, "spec: %s", err.msg);
        CHECK(ss.probe == 0, "%s: broken kernels: probe %d, want failed", kinds[k], ss.probe);
        CHECK(!ss.speculated && ss.rounds == 0 && ss.drafted == 0, "%s: speculation ran on broken kernels", kinds[k]);
        CHECK(strstr(ss.note, "declined") != NULL, "%s: note '%s'", kinds[k], ss.note);
        CHECK(nref == nout && memcmp(ref, out, 4 * (size_t)nout) == 0, "%s: declined run differs from classic", kinds[k]);
        free(out); out = NULL;
        sp.allow_inexact = true;
        CHECK(specdec_spec_generate(c, d, NULL, prompt, 9, &gp, &sp, &out, &nout, &ss, &err) == SPECDEC_OK, "spec: %s", err.msg);
        CHECK(ss.speculated && ss.inexact && ss.rounds > 0, "%s: allow_inexact did not engage", kinds[k]);
        CHECK(strstr(ss.note, "ANYWAY") != NULL, "%s: allow_inexact note '%s'", kinds[k], ss.note);
        sp.allow_inexact = false;
        sd_ops_debug_break_invariance(0);
        free(ref); free(out);
        specdec_drafter_free(d);

        /* intact kernels: a fresh drafter probes, passes, then the result is cached */
        CHECK(specdec_drafter_init(m, kinds[k], &d, &err) == SPECDEC_OK, "%s", err.msg);
        CHECK(specdec_spec_generate(c, d, NULL, prompt, 9, &gp, &sp, NULL, NULL, &ss, &err) == SPECDEC_OK, "spec");
        CHECK(ss.probe == 1 && !ss.probe_cached && ss.speculated && ss.probe_ms > 0, "%s: probe %d", kinds[k], ss.probe);
        CHECK(specdec_spec_generate(c, d, NULL, prompt, 9, &gp, &sp, NULL, NULL, &ss, &err) == SPECDEC_OK, "spec");
        CHECK(ss.probe == 1 && ss.probe_cached, "%s: second run: probe %d cached %d", kinds[k], ss.probe, ss.probe_cached);
        /* phases */
        double sum = ss.draft_ms + ss.verify_ms + ss.walk_ms + ss.finalize_ms + ss.accept_ms;
        CHECK(ss.rounds > 0 && ss.round_ms > 0, "%s: no rounds timed", kinds[k]);
        CHECK(ss.round_ms - (sum + ss.residual_ms) < 1e-9 * ss.round_ms + 1e-12 &&
              (sum + ss.residual_ms) - ss.round_ms < 1e-9 * ss.round_ms + 1e-12, "%s: phases + residual != round", kinds[k]);
        CHECK(ss.residual_ms >= 0 && ss.residual_ms <= 0.02 * ss.round_ms, "%s: residual %.4f ms of round %.4f ms",
              kinds[k], ss.residual_ms, ss.round_ms);
        CHECK(ss.round_ms <= ss.gen.decode_ms, "%s: rounds %.3f ms > decode %.3f ms", kinds[k], ss.round_ms, ss.gen.decode_ms);
        CHECK(ss.verify_ms > 0 && (k == 0 || ss.accept_ms > 0), "%s: phase never timed", kinds[k]);
        int64_t dsum = 0;
        for (int j = 1; j <= 16; j++) dsum += ss.drafted_at_depth[j];
        CHECK(dsum == ss.drafted, "%s: drafted by depth %lld != drafted %lld", kinds[k], (long long)dsum, (long long)ss.drafted);
        CHECK(ss.zero_accept_rounds + ss.partial_accept_rounds + ss.full_accept_rounds == ss.rounds, "round classes");
        CHECK(ss.tau >= 1.0 && ss.tau <= 6.0, "%s: tau %.3f", kinds[k], ss.tau);
        /* profile: attributed sub-steps and an overhead figure */
        sp.profile = true;
        CHECK(specdec_spec_generate(c, d, NULL, prompt, 9, &gp, &sp, NULL, NULL, &ss, &err) == SPECDEC_OK, "spec");
        CHECK(ss.profiled && ss.profile_steps > 0 && ss.prof_overhead_ms > 0, "%s: profile empty", kinds[k]);
        char line[1024];
        specdec_spec_stats_summary(&ss, line, sizeof line);
        CHECK(strstr(line, "synchronized") != NULL, "summary: %s", line);
        char jp[128];
        snprintf(jp, sizeof jp, "%s/stats.json", tdir);
        CHECK(specdec_spec_stats_write_json(&ss, jp, &err) == SPECDEC_OK, "json: %s", err.msg);
        sp.profile = false;
        specdec_spec_generate(c, d, NULL, prompt, 9, &gp, &sp, NULL, NULL, &ss, &err);
        specdec_spec_stats_summary(&ss, line, sizeof line);
        CHECK(strstr(line, "unattributed") != NULL, "summary without profile: %s", line);
        specdec_drafter_free(d);
    }
    specdec_ctx_free(c);
    specdec_model_free(m);
    tm_rm_rf(tdir);
    return check_finish("test_spec_probe");
}
