/* stats.c: the speculative-decoding counters as one human line and as JSON (--stats-json). */
#include "speculative/spec_internal.h"
#include "util/err.h"
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static double per_round(double ms, int64_t rounds) { return rounds ? ms / (double)rounds : 0; }

double sd_clock_cost_ms(void) {
    double t0 = sd_now_ms(), x = 0;
    for (int i = 0; i < 1000; i++) x += sd_now_ms();
    (void)x;
    return (sd_now_ms() - t0) / 1001.0;
}

void sd_spec_stats_finish(specdec_spec_stats *s, const specdec_spec_params *sp, bool spec_on) {
    if (s->gen.prefill_ms > 0) s->gen.prefill_tok_s = s->gen.prompt_tokens / (s->gen.prefill_ms / 1e3);
    if (s->gen.decode_ms > 0 && s->gen.generated_tokens > 1)
        s->gen.decode_tok_s = (s->gen.generated_tokens - 1) / (s->gen.decode_ms / 1e3);
    s->residual_ms = s->round_ms - (s->draft_ms + s->verify_ms + s->walk_ms + s->finalize_ms + s->accept_ms);
    s->tau = s->rounds ? (double)s->emitted / (double)s->rounds : 0;
    if (!sp->block_size && spec_on) {
        int64_t best = -1;
        for (int w = 1; w <= SD_AUTO_MAX_W; w++)
            if (s->rounds_at_width[w] > best) { best = s->rounds_at_width[w]; s->auto_width = w; }
    }
}

void sd_spec_stats_profile(specdec_spec_stats *s, const sd_drafter_prof *p0, const sd_drafter_prof *p1, double clock_ms) {
    s->profiled = true;
    s->profile_steps = p1->steps - p0->steps;
    s->prof_upload_ms = p1->upload_ms - p0->upload_ms;
    s->prof_embed_ms = p1->embed_ms - p0->embed_ms;
    s->prof_layers_ms = p1->layers_ms - p0->layers_ms;
    s->prof_head_ms = p1->head_ms - p0->head_ms;
    s->prof_sample_ms = p1->sample_ms - p0->sample_ms;
    s->prof_readback_ms = p1->readback_ms - p0->readback_ms;
    s->prof_overhead_ms = (double)(p1->clock_reads - p0->clock_reads) * clock_ms;
}

void specdec_spec_stats_summary(const specdec_spec_stats *s, char *buf, size_t n) {
    size_t l = 0;
#define AP(...) do { if (l < n) l += (size_t)snprintf(buf + l, n - l, __VA_ARGS__); } while (0)
    if (!s->speculated) {
        AP("[spec] speculation off (%s)", s->note[0] ? s->note : "no drafter");
        return;
    }
    AP("[spec] rounds %lld, tau %.3f, drafted %lld, accepted %lld (%.1f%%), zero/partial/full %lld/%lld/%lld, acc by depth",
       (long long)s->rounds, s->tau, (long long)s->drafted, (long long)s->accepted,
       s->drafted ? 100.0 * (double)s->accepted / (double)s->drafted : 0.0, (long long)s->zero_accept_rounds,
       (long long)s->partial_accept_rounds, (long long)s->full_accept_rounds);
    for (int d = 1; d <= SPECDEC_SPEC_MAX_DEPTH && s->drafted_at_depth[d]; d++)
        AP(" %.2f", (double)s->accepted_at_depth[d] / (double)s->drafted_at_depth[d]);
    AP("; ms/round: draft %.3f verify %.3f walk %.3f finalize %.3f accept %.3f residual %.3f (round %.3f)",
       per_round(s->draft_ms, s->rounds), per_round(s->verify_ms, s->rounds), per_round(s->walk_ms, s->rounds),
       per_round(s->finalize_ms, s->rounds), per_round(s->accept_ms, s->rounds),
       per_round(s->residual_ms, s->rounds), per_round(s->round_ms, s->rounds));
    if (s->lookup_rounds) AP("; lookup drafted %lld of %lld rounds", (long long)s->lookup_rounds, (long long)s->rounds);
    AP("; probe %s%s", s->probe == 1 ? "passed" : s->probe == 0 ? "FAILED" : "not run", s->probe_cached ? " (cached)" : "");
    if (s->probe_ms > 0) AP(" in %.1f ms (not in decode)", s->probe_ms);
    if (s->inexact) AP(" INEXACT (allow_inexact)");
    if (!s->block_size) {
        /* what the controller chose: per width, rounds, tokens a round and ms a round */
        AP("; auto width %d (width: rounds, tokens/round, ms/round:", s->auto_width);
        const char *sep = " ";
        for (int w = 1; w <= SPECDEC_SPEC_MAX_DEPTH; w++)
            if (s->rounds_at_width[w]) {
                AP("%s%d: %lld, %.2f, %.3f", sep, w, (long long)s->rounds_at_width[w],
                   (double)s->emitted_at_width[w] / (double)s->rounds_at_width[w], s->ms_at_width[w] / (double)s->rounds_at_width[w]);
                sep = "; ";
            }
        AP(")");
    }
    if (s->profiled) {
        AP("; drafter profile (synchronized, %lld steps, ms/step): upload %.4f input %.4f layers %.4f head %.4f sample %.4f "
           "readback %.4f, profiling overhead %.3f ms (%.1f%% of draft)",
           (long long)s->profile_steps, per_round(s->prof_upload_ms, s->profile_steps),
           per_round(s->prof_embed_ms, s->profile_steps), per_round(s->prof_layers_ms, s->profile_steps),
           per_round(s->prof_head_ms, s->profile_steps), per_round(s->prof_sample_ms, s->profile_steps),
           per_round(s->prof_readback_ms, s->profile_steps), s->prof_overhead_ms,
           s->draft_ms > 0 ? 100.0 * s->prof_overhead_ms / s->draft_ms : 0.0);
    } else {
        AP("; drafter steps unattributed (no --profile-drafter)");
    }
#undef AP
}

/* Fields written to JSON as they are, by name and place in the stats (in the order written). */
typedef struct { const char *key; size_t off; } field;
#define F(k, m) {k, offsetof(specdec_spec_stats, m)}
static const field int_fields[] = {
    F("rounds", rounds), F("drafted", drafted), F("projected", projected), F("accepted", accepted),
    F("emitted_in_rounds", emitted), F("zero_accept_rounds", zero_accept_rounds),
    F("partial_accept_rounds", partial_accept_rounds), F("full_accept_rounds", full_accept_rounds),
    F("lookup_rounds", lookup_rounds),
};
static const field phase_fields[] = {
    F("round", round_ms), F("draft", draft_ms), F("verify", verify_ms), F("walk", walk_ms),
    F("finalize", finalize_ms), F("accept", accept_ms), F("residual", residual_ms), F("prefill", prefill_ms),
    F("drafter_prefill", drafter_prefill_ms), F("probe", probe_ms),
};
static const field gen_real_fields[] = {
    F("prefill_ms", gen.prefill_ms), F("decode_ms", gen.decode_ms), F("decode_tok_s", gen.decode_tok_s),
};
static const field profile_fields[] = {
    F("upload_ms", prof_upload_ms), F("input_ms", prof_embed_ms), F("layers_ms", prof_layers_ms),
    F("head_ms", prof_head_ms), F("sample_ms", prof_sample_ms), F("readback_ms", prof_readback_ms),
    F("overhead_ms", prof_overhead_ms),
};
#undef F
#define N_OF(a) (sizeof(a) / sizeof(a[0]))

static void set_ints(json_t *o, const specdec_spec_stats *s, const field *f, size_t n) {
    for (size_t i = 0; i < n; i++) json_object_set_new(o, f[i].key, json_integer(*(const int64_t *)((const char *)s + f[i].off)));
}
static void set_reals(json_t *o, const specdec_spec_stats *s, const field *f, size_t n) {
    for (size_t i = 0; i < n; i++) json_object_set_new(o, f[i].key, json_real(*(const double *)((const char *)s + f[i].off)));
}

specdec_status specdec_spec_stats_write_json(const specdec_spec_stats *s, const char *path, specdec_err *err) {
    json_t *o = json_object();
    json_object_set_new(o, "speculated", json_boolean(s->speculated));
    json_object_set_new(o, "block_size", s->block_size ? json_integer(s->block_size) : json_string("auto"));
    json_object_set_new(o, "tau", json_real(s->tau));
    set_ints(o, s, int_fields, N_OF(int_fields));
    json_t *abd = json_array(), *dad = json_array(), *aad = json_array(), *rw = json_object(), *ew = json_object(),
           *mw = json_object();
    for (int d = 1; d <= SPECDEC_SPEC_MAX_DEPTH && s->drafted_at_depth[d]; d++) {
        json_array_append_new(abd, json_real((double)s->accepted_at_depth[d] / (double)s->drafted_at_depth[d]));
        json_array_append_new(dad, json_integer(s->drafted_at_depth[d]));
        json_array_append_new(aad, json_integer(s->accepted_at_depth[d]));
    }
    for (int w = 1; w <= SPECDEC_SPEC_MAX_DEPTH; w++)
        if (s->rounds_at_width[w]) {
            char k[8];
            snprintf(k, sizeof k, "%d", w);
            json_object_set_new(rw, k, json_integer(s->rounds_at_width[w]));
            json_object_set_new(ew, k, json_integer(s->emitted_at_width[w]));
            json_object_set_new(mw, k, json_real(s->ms_at_width[w]));
        }
    json_object_set_new(o, "acceptance_by_depth", abd);
    json_object_set_new(o, "drafted_at_depth", dad);
    json_object_set_new(o, "accepted_at_depth", aad);
    json_object_set_new(o, "rounds_at_width", rw);
    json_object_set_new(o, "emitted_at_width", ew);
    json_object_set_new(o, "ms_at_width", mw);
    if (!s->block_size) json_object_set_new(o, "auto_width", json_integer(s->auto_width));
    json_t *ph = json_object();
    set_reals(ph, s, phase_fields, N_OF(phase_fields));
    json_object_set_new(o, "phases_ms", ph);
    json_t *pr = json_object();
    json_object_set_new(pr, "result", json_string(s->probe == 1 ? "passed" : s->probe == 0 ? "failed" : "not_run"));
    json_object_set_new(pr, "cached", json_boolean(s->probe_cached));
    json_object_set_new(pr, "inexact", json_boolean(s->inexact));
    json_object_set_new(o, "probe", pr);
    json_object_set_new(o, "note", json_string(s->note));
    json_t *g = json_object();
    json_object_set_new(g, "prompt_tokens", json_integer(s->gen.prompt_tokens));
    json_object_set_new(g, "generated_tokens", json_integer(s->gen.generated_tokens));
    set_reals(g, s, gen_real_fields, N_OF(gen_real_fields));
    json_object_set_new(g, "stop_reason", json_string(specdec_stop_reason_name(s->gen.stop_reason)));
    if (s->gen.seed <= (uint64_t)INT64_MAX) json_object_set_new(g, "seed", json_integer((json_int_t)s->gen.seed));
    else {   /* past what a JSON reader's int64 holds: the digits as a string */
        char sb[24];
        snprintf(sb, sizeof sb, "%llu", (unsigned long long)s->gen.seed);
        json_object_set_new(g, "seed", json_string(sb));
    }
    json_object_set_new(o, "gen", g);
    if (s->profiled) {
        json_t *p = json_object();
        json_object_set_new(p, "synchronized", json_true());
        json_object_set_new(p, "steps", json_integer(s->profile_steps));
        set_reals(p, s, profile_fields, N_OF(profile_fields));
        json_object_set_new(o, "drafter_profile", p);
    } else {
        json_object_set_new(o, "drafter_profile", json_string("unattributed"));
    }
    int rc = json_dump_file(o, path, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (rc != 0) return sd_fail(err, SPECDEC_ERR_IO, "%s: could not write the stats JSON", path);
    return SPECDEC_OK;
}
