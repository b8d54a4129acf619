/* test_spec_stats.c: the speculative timing stats are honest (accounting, not speed).
 * Within one specdec_spec_generate call, prefill, the exactness probe and decoding are disjoint
 * spans of one monotonic clock, so on a fresh drafter (the probe runs, made expensive here with
 * many draws) prefill_ms + probe_ms + gen.decode_ms must fit in the wall time of the call, the
 * rounds must fit in decode (round_ms <= decode_ms), and decode_tok_s must be
 * (generated - 1) / decode_ms, as classic decoding reports it. A second call finds the probe
 * cached (probe_ms = 0) and the same identities hold. Before the fix decode_ms also held the
 * probe, so the three spans added up to more than the call took.
 * gen.device_ms, the rounds' device time: 0 on the CPU backend (no device timers); on the
 * "cpu-sim" backend (timers on the host clock, every mark inside a round) more than 0 and within
 * the decode span, for classic and speculative decoding alike. */
#include "check.h"
#include "tiny_spec.h"
#include "specdec.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void check_spans(const specdec_spec_stats *s, double wall_ms, const char *what) {
    const double eps = 0.05;   /* ms: clock reads on either side of the spans */
    CHECK(s->speculated && s->rounds > 0, "%s: speculated (%lld rounds)", what, (long long)s->rounds);
    CHECK(s->gen.prefill_ms + s->probe_ms + s->gen.decode_ms <= wall_ms + eps,
          "%s: prefill %.3f + probe %.3f + decode %.3f ms exceed the call's wall time %.3f ms", what, s->gen.prefill_ms,
          s->probe_ms, s->gen.decode_ms, wall_ms);
    CHECK(s->round_ms <= s->gen.decode_ms + eps, "%s: rounds %.3f ms > decode %.3f ms", what, s->round_ms, s->gen.decode_ms);
    CHECK(s->gen.decode_ms > 0, "%s: decode_ms %.3f", what, s->gen.decode_ms);
    double want = (s->gen.generated_tokens - 1) / (s->gen.decode_ms / 1e3);
    CHECK(fabs(s->gen.decode_tok_s - want) <= 1e-6 * want, "%s: decode_tok_s %.3f, want %.3f", what, s->gen.decode_tok_s, want);
}

int main(void) {
    char tdir[64];
    ts_dims dm = ts_default();
    specdec_err err = {0};
    specdec_model *m = ts_open_pair(tdir, NULL, &dm, 5, &err);
    if (!m) return check_finish("test_spec_stats");
    specdec_ctx_params cp = specdec_ctx_default_params();
    cp.n_ctx = 256; cp.n_threads = 1;
    specdec_ctx *c = NULL;
    specdec_drafter *d = NULL;
    CHECK(specdec_ctx_init(m, &cp, &c, &err) == SPECDEC_OK, "ctx: %s", err.msg);
    CHECK(specdec_drafter_init(m, "mtp", &d, &err) == SPECDEC_OK, "mtp drafter: %s", err.msg);
    if (!c || !d) { specdec_ctx_free(c); specdec_model_free(m); return check_finish("test_spec_stats"); }

    int32_t prompt[6] = {3, 14, 15, 92, 65, 35};
    specdec_gen_params gp = specdec_gen_default_params();
    gp.ignore_eos = true; gp.max_tokens = 24;
    specdec_spec_params sp = specdec_spec_default_params();
    sp.quiet = true; sp.block_size = 4; sp.probe_draws = 24;   /* an expensive probe: its time must not hide in decode */
    specdec_spec_stats s;
    double t0 = now_ms();
    CHECK(specdec_spec_generate(c, d, NULL, prompt, 6, &gp, &sp, NULL, NULL, &s, &err) == SPECDEC_OK, "gen: %s", err.msg);
    double wall = now_ms() - t0;
    CHECK(s.probe == 1 && !s.probe_cached && s.probe_ms > 0, "fresh drafter: probe ran (%d, %.3f ms)", s.probe, s.probe_ms);
    check_spans(&s, wall, "fresh");
    char line[2048];
    specdec_spec_stats_summary(&s, line, sizeof line);
    CHECK(strstr(line, "not in decode") != NULL, "summary names the probe time: %s", line);

    t0 = now_ms();
    CHECK(specdec_spec_generate(c, d, NULL, prompt, 6, &gp, &sp, NULL, NULL, &s, &err) == SPECDEC_OK, "gen 2: %s", err.msg);
    wall = now_ms() - t0;
    CHECK(s.probe_cached && s.probe_ms == 0, "second call: probe cached (%.3f ms)", s.probe_ms);
    check_spans(&s, wall, "cached");

    CHECK(s.gen.device_ms == 0, "cpu backend: device_ms %.3f, want 0 (no device timers)", s.gen.device_ms);
    specdec_drafter_free(d);
    specdec_ctx_free(c);
    c = NULL; d = NULL;

    cp.backend = "cpu-sim";
    CHECK(specdec_ctx_init(m, &cp, &c, &err) == SPECDEC_OK, "sim ctx: %s", err.msg);
    CHECK(specdec_drafter_init(m, "mtp", &d, &err) == SPECDEC_OK, "sim mtp drafter: %s", err.msg);
    if (c && d) {
        const double eps = 0.05;
        specdec_gen_stats g;
        CHECK(specdec_generate(c, NULL, prompt, 6, &gp, NULL, NULL, &g, &err) == SPECDEC_OK, "sim classic: %s", err.msg);
        CHECK(g.device_ms > 0 && g.device_ms <= g.decode_ms + eps, "sim classic: device %.3f ms, decode %.3f ms", g.device_ms,
              g.decode_ms);
        CHECK(specdec_spec_generate(c, d, NULL, prompt, 6, &gp, &sp, NULL, NULL, &s, &err) == SPECDEC_OK, "sim spec: %s", err.msg);
        CHECK(s.speculated && s.rounds > 0, "sim spec: speculated (%lld rounds)", (long long)s.rounds);
        CHECK(s.gen.device_ms > 0 && s.gen.device_ms <= s.gen.decode_ms + eps, "sim spec: device %.3f ms, decode %.3f ms",
              s.gen.device_ms, s.gen.decode_ms);
    }
    specdec_drafter_free(d);
    specdec_ctx_free(c);
    specdec_model_free(m);
    return check_finish("test_spec_stats");
}
