/* cmd_bench.c: `specdec bench`: classic vs speculative decoding, side by side in one run, per
 * docs/benchmarking.md: per prompt a discarded warm-up of both arms, then R >= 5 interleaved
 * samples (classic, speculative, classic, ...), medians with min/max, the machine load before and
 * after (/proc/loadavg). Guards: no comparison is printed for a prompt when the speculative arm
 * did not move its own counters (zero rounds or nothing drafted: the arms cannot be told apart),
 * or when its output differs from the classic arm's at temperature 0 (then the first differing
 * position is printed instead).
 * The first speculative arm runs as `specdec run` does by default (for MTP: the draft vocabulary the
 * model ships, else the full head). --draft-vocab FILE[:N]|none (repeatable; mtp only) adds arms
 * whose drafter uses that reduced draft vocabulary (none: the full head), interleaved with the first
 * in the same run (classic, first, other, ...), so acceptance and speed are measured side by side.
 * Every other default (block size auto, seeded sampling, threads, the sampling defaults of
 * generation_config.json) is run's too.
 * --verify-rows-arms R1,R2,... adds arms like the first whose verify projects at most R rows
 * (spec_params.verify_rows), in the same interleaving; an arm whose projected-rows counter does
 * not differ from the first arm's is refused (the cap did not bind: the arms cannot be told apart). */
#include "cli.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
/* The median of v (sorted in place), its min and its max. */
static double median_span(double *v, int n, double *mn, double *mx) {
    const double m = median(v, n);
    *mn = v[0];
    *mx = v[n - 1];
    return m;
}
static void loadavg(char *buf, size_t n) {
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) { if (!fgets(buf, (int)n, f)) buf[0] = 0; fclose(f); }
    size_t l = strlen(buf);
    if (l && buf[l - 1] == '\n') buf[l - 1] = 0;
}

#define MAXP 256
#define MAXR 64
#define MAXA 6   /* speculative arms: the first (run's default) + draft vocabularies + verify-row caps, 5 at most */


int cmd_bench(int argc, char **argv) {
    const char *dir_opt = NULL, *draft = NULL, *prompts_path = NULL, *out_path = NULL;
    char dir[4096];
    bool seed_fresh = false, given[SPECDEC_GEN_N_KEYS] = {false};
    char dv_used[1200];
    specdec_gen_params gp = specdec_gen_default_params();
    specdec_ctx_params cp = specdec_ctx_default_params();
    specdec_spec_params sp = specdec_spec_default_params();
    int repeats = 5, max_prompts = MAXP, na = 1;
    const char *dvs[MAXA] = {NULL};
    int vrs[MAXA] = {0};   /* per arm: 0 = sp.verify_rows, else that arm's cap */
    bool profile = false;
    long v; double d;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int taken = cli_ctx_option(a, val, &cp, &i);
        if (!taken) taken = cli_input_option(a, val, &dir_opt, NULL, NULL, &i);
        if (taken) { if (taken < 0) return 1; continue; }
        if (cli_is_help(a)) return cli_usage("bench");
        else if (!strcmp(a, "--draft")) { if (!val) return cli_fail("--draft needs a value"); draft = val; i++; }
        else if (!strcmp(a, "--prompts")) { if (!val) return cli_fail("--prompts needs a file"); prompts_path = val; i++; }
        else if (!strcmp(a, "--out")) { if (!val) return cli_fail("--out needs a file"); out_path = val; i++; }
        else if (!strcmp(a, "-n")) { if (cli_int(a, val, 1, 1 << 20, &v)) return 1; gp.max_tokens = (int)v; i++; }
        else if (!strcmp(a, "--repeats")) { if (cli_int(a, val, 1, MAXR, &v)) return 1; repeats = (int)v; i++; }
        else if (!strcmp(a, "--max-prompts")) { if (cli_int(a, val, 1, MAXP, &v)) return 1; max_prompts = (int)v; i++; }
        else if (!strcmp(a, "--block-size")) {
            if (val && !strcmp(val, "auto")) sp.block_size = 0;
            else { if (cli_int(a, val, 2, SPECDEC_SPEC_MAX_DEPTH, &v)) return 1; sp.block_size = (int)v; }
            i++;
        }
        else if (!strcmp(a, "--temp")) { if (cli_float(a, val, 0, 100, &d)) return 1; gp.sampling.temperature = (float)d; given[SPECDEC_GEN_TEMPERATURE] = true; i++; }
        else if (!strcmp(a, "--seed")) { if (cli_seed(a, val, &gp.sampling.seed, &seed_fresh)) return 1; i++; }
        else if (!strcmp(a, "--sampling")) { if (cli_parse_sampling(val, &sp.sampling)) return 1; i++; }
        else if (!strcmp(a, "--draft-vocab")) {
            if (!val) return cli_fail("--draft-vocab needs FILE[:N] or none");
            if (na == MAXA) return cli_fail("at most %d speculative arms besides the first", MAXA - 1);
            dvs[na++] = val; i++;
        }
        else if (!strcmp(a, "--verify-rows-arms")) {
            if (!val) return cli_fail("--verify-rows-arms needs R1,R2,...");
            for (const char *q = val; *q;) {
                char *end = NULL;
                long r = strtol(q, &end, 10);
                if (end == q || r < 1 || r > SPECDEC_SPEC_MAX_DEPTH || (*end && *end != ','))
                    return cli_fail("--verify-rows-arms: '%s' is not a list of rows in 1..%d", val, SPECDEC_SPEC_MAX_DEPTH);
                if (na == MAXA) return cli_fail("at most %d speculative arms besides the first", MAXA - 1);
                vrs[na++] = (int)r;
                q = *end ? end + 1 : end;
            }
            i++;
        }
        else if (!strcmp(a, "--ignore-eos")) gp.ignore_eos = true;
        else if (!strcmp(a, "--profile-drafter")) profile = true;   /* a third arm: speculative with the step profile */
        else if (!strcmp(a, "--verify-rows")) { if (cli_int(a, val, 1, SPECDEC_SPEC_MAX_DEPTH, &v)) return 1; sp.verify_rows = (int)v; i++; }
        else return cli_fail("bench: unknown option '%s'", a);
    }
    if (!draft || !prompts_path) return cli_fail("bench needs --draft and --prompts FILE");
    if (cli_model_dir(dir_opt, dir, sizeof dir)) return 1;
    if (out_path && cli_check_out("--out", out_path)) return 1;   /* before minutes of measuring */
    for (int k = 1; k < na; k++)
        if (dvs[k] && !cli_draft_mtp(draft)) return cli_fail("--draft-vocab needs --draft mtp or mtp+ngram");
    if (na > 1 && profile) return cli_fail("--profile-drafter and --draft-vocab / --verify-rows-arms: one at a time");
    if (repeats < 5) fprintf(stderr, "specdec: warning: %d repeats (< 5): medians are weak\n", repeats);
    sp.quiet = false;

    /* prompts: JSONL, one object with a "prompt" string per line */
    FILE *pf = fopen(prompts_path, "r");
    if (!pf) return cli_fail("%s: cannot open", prompts_path);
    char *texts[MAXP]; char ids_s[MAXP][64]; int np = 0;
    char *line = NULL; size_t cap = 0; ssize_t len; int lineno = 0;
    while (np < max_prompts && (len = getline(&line, &cap, pf)) > 0) {
        lineno++;
        if (len <= 1) continue;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        json_t *p = o ? json_object_get(o, "prompt") : NULL;
        if (!p || !json_is_string(p)) { json_decref(o); fclose(pf); free(line); return cli_fail("%s:%d: no \"prompt\" string", prompts_path, lineno); }
        texts[np] = strdup(json_string_value(p));
        json_t *id = json_object_get(o, "id");
        if (id && json_is_string(id)) snprintf(ids_s[np], sizeof ids_s[np], "%s", json_string_value(id));
        else snprintf(ids_s[np], sizeof ids_s[np], "line%d", lineno);
        np++;
        json_decref(o);
    }
    free(line); fclose(pf);
    if (np == 0) return cli_fail("%s: no prompts", prompts_path);

    specdec_err err = {0};
    specdec_tokenizer *tok = NULL; specdec_model *m = NULL; specdec_ctx *ctx = NULL; specdec_drafter *drs[MAXA] = {NULL};
    specdec_drafter *dr = NULL;
    int rc = 1;
    char tjp[4200];
    snprintf(tjp, sizeof tjp, "%s/tokenizer.json", dir);
    FILE *tjf = fopen(tjp, "r");
    bool byte_ids = !tjf;   /* random test models have no tokenizer: prompt bytes become ids (byte % vocab) */
    if (tjf) fclose(tjf);
    if ((!byte_ids && specdec_tokenizer_load(dir, &tok, &err)) || cli_load_model(dir, cli_draft_mtp(draft), &m, &err) ||
        cli_gen_defaults(m, given, &gp.sampling) || cli_ctx_init(m, &cp, &ctx, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    for (int k = 0; k < na; k++)
        if (specdec_drafter_init(m, draft, &drs[k], &err) ||
            (!dvs[k] && cli_draft_vocab_auto(drs[k], dir, NULL, dv_used, sizeof dv_used, &err)) ||   /* run's default */
            (dvs[k] && strcmp(dvs[k], "none") && cli_draft_vocab(drs[k], dvs[k], &err))) {
            rc = cli_fail_err(&err);
            goto done;
        }
    dr = drs[0];
    /* Rows are labeled by the size each arm resolved to: "FILE" alone means the file's default_n,
     * which is easy to mistake for the whole file when reading a table. */
    char arml[MAXA][48];
    for (int k = 0; k < na; k++) {
        int dvn = specdec_drafter_draft_vocab_size(drs[k]);
        if (vrs[k]) snprintf(arml[k], sizeof arml[k], "vr %d", vrs[k]);
        else if (dvn) snprintf(arml[k], sizeof arml[k], "dv %d", dvn);
        else snprintf(arml[k], sizeof arml[k], "full");
        for (int j = 0; j < k; j++)
            if (!strcmp(arml[j], arml[k])) { snprintf(arml[k] + strlen(arml[k]), sizeof arml[k] - strlen(arml[k]), " (arm %d)", k + 1); break; }
    }
    FILE *o = out_path ? fopen(out_path, "w") : NULL;
    FILE *outs[2] = {stdout, o};
    char la0[128], la1[128];
    loadavg(la0, sizeof la0);
#define P(...) do { for (int q_ = 0; q_ < 2; q_++) if (outs[q_]) fprintf(outs[q_], __VA_ARGS__); } while (0)
    char bs[16];
    if (sp.block_size) snprintf(bs, sizeof bs, "%d", sp.block_size); else snprintf(bs, sizeof bs, "auto");
    P("# specdec bench: classic vs speculative (--draft %s, --block-size %s)\n\n", draft, bs);
    P("%d tokens, temperature %g, %d prompts, %d interleaved samples per arm after a discarded warm-up, threads %d%s\n\n",
      gp.max_tokens, gp.sampling.temperature, np, repeats, cp.n_threads, cp.n_threads ? "" : " (0: every online CPU)");
    if (gp.sampling.temperature > 0)
        P("sampling %s, top-k %d, top-p %g, min-p %g, seed %llu%s\n\n", sp.sampling == SPECDEC_SPEC_SEEDED ? "seeded" : "rejection",
          gp.sampling.top_k, gp.sampling.top_p, gp.sampling.min_p, (unsigned long long)gp.sampling.seed, seed_fresh ? " (fresh)" : "");
    P("loadavg before: %s\n\n", la0);
    {
        const specdec_drafter_weights dw = specdec_ctx_drafter_weights(ctx);
        if (cli_draft_mtp(draft) && dw != SPECDEC_DRAFTER_WEIGHTS_DEFAULT)
            P("drafter weights: %s\n\n", dw == SPECDEC_DRAFTER_WEIGHTS_Q4 ? "4-bit g64, quantized at load" : "as stored");
    }
    specdec_model_info mi0;
    specdec_model_get_info(m, &mi0);
    for (int k = 0; k < na; k++) {
        int dvn = specdec_drafter_draft_vocab_size(drs[k]);
        if (vrs[k]) P("arm %s: as arm %s, the verify projects at most %d rows\n", arml[k], arml[0], vrs[k]);
        else P("arm %s: draft vocabulary %d of %d ids%s%s\n", arml[k], dvn ? dvn : mi0.vocab_size, mi0.vocab_size,
               dvn ? " from " : " (full head)", !dvn ? "" : k ? dvs[k] : dv_used);
    }
    /* the bytes behind each draft step, for its floor against a measured bandwidth */
    if (cli_draft_mtp(draft))
        for (int k = 0; k < na; k++) {
            const int dvn = specdec_drafter_draft_vocab_size(drs[k]);
            const uint64_t sb = specdec_ctx_drafter_step_bytes(ctx, dvn ? dvn : mi0.vocab_size);
            if (sb) P("arm %s: an MTP draft step reads %.2f MB of weights\n", arml[k], 1e-6 * (double)sb);
        }
    P("\n");
    if (byte_ids) P("NOTE: %s has no tokenizer.json: prompt bytes were mapped to ids (byte %% vocab, at most 512): a test model.\n\n", dir);
    P("| prompt | arm | classic tok/s med [min, max] | spec tok/s med [min, max] | speedup | tau | acc by depth | draft ms/round | identical |\n");
    P("|---|---|---|---|---|---|---|---|---|\n");
    static double speedups[MAXA][MAXP];
    int nsp[MAXA] = {0}, tau_n[MAXA] = {0}, refused = 0, mismatched = 0;
    double tau_sum[MAXA] = {0}, dms_sum[MAXA] = {0};
    static int64_t dad[MAXA][SPECDEC_SPEC_MAX_DEPTH + 1], aad[MAXA][SPECDEC_SPEC_MAX_DEPTH + 1];
    static int64_t proj_all[MAXA], rounds_all[MAXA];   /* verify rows projected, rounds: the guard of --verify-rows */
    static double dms_all[MAXA];                         /* draft ms and drafted tokens of every timed run */
    static int64_t drafted_all[MAXA], rw1_all[MAXA];     /* ... and rounds of width 1 (no drafts) */
    bool wide = false;
    /* the classic arm's prefill per prompt (tokens, median tok/s [min, max]), printed after the table:
     * the warm-up's prefill is discarded, so lazy module loads and first allocations stay out */
    static double pf_med[MAXP], pf_min[MAXP], pf_max[MAXP];
    static int pf_tok[MAXP];
    /* devices with timers: the decode's device time, wall time and tokens over every timed run
     * (index 0 classic, 1 + k arm k), for the share the device waited on the host */
    static double dv_ms[MAXA + 1], dv_wall[MAXA + 1], dv_tok[MAXA + 1];
    for (int pi = 0; pi < np; pi++) {
        int32_t *pids = NULL; size_t npids = 0;
        if (byte_ids) {
            npids = strlen(texts[pi]);
            if (npids > 512) npids = 512;
            pids = malloc(sizeof *pids * (npids ? npids : 1));
            for (size_t k = 0; k < npids; k++) pids[k] = (int32_t)((unsigned char)texts[pi][k] % (unsigned)mi0.vocab_size);
            if (!npids) pids[npids++] = 0;
        } else if (specdec_tokenize(tok, texts[pi], strlen(texts[pi]), &pids, &npids, &err)) { rc = cli_fail_err(&err); goto done; }
        double pfa[MAXR], ca[MAXR], sa[MAXA][MAXR], pa[MAXR], taus[MAXA][MAXR], dms[MAXA][MAXR];
        specdec_spec_stats last_prof;
        memset(&last_prof, 0, sizeof last_prof);
        int64_t rounds[MAXA] = {0}, drafted[MAXA] = {0};
        int64_t pdad[MAXA][SPECDEC_SPEC_MAX_DEPTH + 1], paad[MAXA][SPECDEC_SPEC_MAX_DEPTH + 1];
        memset(pdad, 0, sizeof pdad); memset(paad, 0, sizeof paad);
        int diff_at[MAXA]; bool speculated[MAXA];
        for (int k = 0; k < na; k++) { diff_at[k] = -1; speculated[k] = true; }
        bool exact_mode = !(gp.sampling.temperature > 0) || sp.sampling == SPECDEC_SPEC_SEEDED;
        int c_gen = 0, c_stop = 0;   /* the classic arm's last sample: why a row has nothing to time */
        for (int r = -1; r < repeats; r++) {   /* r = -1: warm-up, discarded */
            int32_t *a = NULL; int nca = 0;
            specdec_gen_stats gs;
            if (specdec_generate(ctx, NULL, pids, (int)npids, &gp, &a, &nca, &gs, &err)) {
                rc = cli_fail_err(&err); free(pids); goto done;
            }
            for (int k = 0; k < na; k++) {
                int32_t *b = NULL; int nb = 0;
                specdec_spec_stats ss;
                specdec_spec_params spk = sp;
                if (vrs[k]) spk.verify_rows = vrs[k];
                if (specdec_spec_generate(ctx, drs[k], NULL, pids, (int)npids, &gp, &spk, &b, &nb, &ss, &err)) {
                    rc = cli_fail_err(&err); free(a); free(pids); goto done;
                }
                if (exact_mode) {
                    int n = nca < nb ? nca : nb, q = 0;
                    while (q < n && a[q] == b[q]) q++;
                    if ((q < n || nca != nb) && diff_at[k] < 0) diff_at[k] = q;
                }
                free(b);
                if (r < 0) continue;
                sa[k][r] = ss.gen.decode_tok_s; taus[k][r] = ss.tau;
                dv_ms[1 + k] += ss.gen.device_ms; dv_wall[1 + k] += ss.gen.decode_ms; dv_tok[1 + k] += ss.gen.generated_tokens;
                dms[k][r] = ss.rounds ? ss.draft_ms / (double)ss.rounds : 0;
                rounds[k] += ss.rounds; drafted[k] += ss.drafted;
                proj_all[k] += ss.projected; rounds_all[k] += ss.rounds;
                dms_all[k] += ss.draft_ms; drafted_all[k] += ss.drafted; rw1_all[k] += ss.rounds_at_width[1];
                if (!ss.speculated) speculated[k] = false;
                for (int j = 1; j <= SPECDEC_SPEC_MAX_DEPTH; j++) { pdad[k][j] += ss.drafted_at_depth[j]; paad[k][j] += ss.accepted_at_depth[j]; }
            }
            free(a);
            if (profile) {
                specdec_spec_params pp = sp;
                pp.profile = true;
                if (specdec_spec_generate(ctx, dr, NULL, pids, (int)npids, &gp, &pp, NULL, NULL, &last_prof, &err)) {
                    rc = cli_fail_err(&err); free(pids); goto done;
                }
                if (r >= 0) pa[r] = last_prof.gen.decode_tok_s;
            }
            if (r < 0) continue;
            ca[r] = gs.decode_tok_s;
            dv_ms[0] += gs.device_ms; dv_wall[0] += gs.decode_ms; dv_tok[0] += gs.generated_tokens;
            pfa[r] = gs.prefill_tok_s;
            c_gen = gs.generated_tokens; c_stop = gs.stop_reason;
        }
        free(pids);
        double cmin, cmax;
        const double cmed = median_span(ca, repeats, &cmin, &cmax);
        pf_tok[pi] = (int)npids;
        pf_med[pi] = median_span(pfa, repeats, &pf_min[pi], &pf_max[pi]);
        if (cmed > 0 && (cmax - cmin) / cmed > 0.05) wide = true;
        for (int k = 0; k < na; k++) {
            const char *arm = arml[k];
            double smin, smax;
            const double smed = median_span(sa[k], repeats, &smin, &smax), tmed = median(taus[k], repeats), dmed = median(dms[k], repeats);
            if (smed > 0 && (smax - smin) / smed > 0.05) wide = true;
            if (diff_at[k] >= 0) {
                mismatched++;
                P("| %s | %s | %.1f | - | REFUSED | - | - | - | NO: outputs differ at token %d |\n", ids_s[pi], arm, cmed, diff_at[k]);
                continue;
            }
            if (!speculated[k] || rounds[k] == 0 || drafted[k] == 0) {
                refused++;
                /* Greedy often ends a held-out prompt at once (the model predicts the end of the
                 * document): say so, since the fix is a flag, not the drafter. */
                char why[96] = "";
                if (c_stop == 1 && c_gen <= 1)
                    snprintf(why, sizeof why, "; generation stopped at EOS after %d token%s (--ignore-eos)", c_gen, c_gen == 1 ? "" : "s");
                P("| %s | %s | %.1f | %.1f | REFUSED: the speculative arm ran %lld rounds, drafted %lld%s%s | - | - | - | yes |\n", ids_s[pi],
                  arm, cmed, smed, (long long)rounds[k], (long long)drafted[k], speculated[k] ? "" : " (declined)", why);
                continue;
            }
            double spd = cmed > 0 ? smed / cmed : 0;
            speedups[k][nsp[k]++] = spd;
            tau_sum[k] += tmed; dms_sum[k] += dmed; tau_n[k]++;
            char acc[256] = ""; size_t l = 0;
            for (int j = 1; j <= SPECDEC_SPEC_MAX_DEPTH && pdad[k][j]; j++) {
                dad[k][j] += pdad[k][j]; aad[k][j] += paad[k][j];
                if (l < sizeof acc)
                    l += (size_t)snprintf(acc + l, sizeof acc - l, "%s%.2f", j > 1 ? " " : "", (double)paad[k][j] / (double)pdad[k][j]);
            }
            if (profile) {
                double pmed = median(pa, repeats);
                char line[2048];
                specdec_spec_stats_summary(&last_prof, line, sizeof line);
                const char *pr = strstr(line, "; drafter profile");
                fprintf(stderr, "%s: speculative %.1f tok/s without the drafter profile, %.1f with (%.1f%% slower)%s\n", ids_s[pi],
                        smed, pmed, smed > 0 ? 100.0 * (smed - pmed) / smed : 0.0, pr ? pr : "");
            }
            P("| %s | %s | %.1f [%.1f, %.1f] | %.1f [%.1f, %.1f] | %.3f | %.2f | %s | %.2f | %s |\n", ids_s[pi], arm, cmed, cmin, cmax, smed,
              smin, smax, spd, tmed, acc, dmed, exact_mode ? "yes" : "n/a (rejection)");
        }
    }
    P("\nclassic prefill, tok/s median [min, max] (prompt tokens):");
    for (int pi = 0; pi < np; pi++)
        P("%s %s %.1f [%.1f, %.1f] (%d)", pi ? ";" : "", ids_s[pi], pf_med[pi], pf_min[pi], pf_max[pi], pf_tok[pi]);
    P("\n");
    if (dv_ms[0] > 0 && dv_wall[0] > 0) {   /* the rest of the decode: the device waiting on the host between rounds */
        P("\ndevice busy share of the decode, every timed run (idle us a generated token): classic %.1f%% (%.1f)",
          100.0 * dv_ms[0] / dv_wall[0], dv_tok[0] > 0 ? 1e3 * (dv_wall[0] - dv_ms[0]) / dv_tok[0] : 0.0);
        for (int k = 0; k < na; k++)
            if (dv_wall[1 + k] > 0)
                P("; arm %s %.1f%% (%.1f)", arml[k], 100.0 * dv_ms[1 + k] / dv_wall[1 + k],
                  dv_tok[1 + k] > 0 ? 1e3 * (dv_wall[1 + k] - dv_ms[1 + k]) / dv_tok[1 + k] : 0.0);
        P("\n");
    }
    loadavg(la1, sizeof la1);
    P("\nloadavg after: %s\n", la1);
    if (wide) P("\nNOTE: some arms spread wider than 5%% (min..max over the median): treat those rows with care.\n");
    if (mismatched) P("\n%d prompt/arm row(s): speculative output DIFFERS from classic at temperature 0: no comparison printed for them.\n", mismatched);
    if (refused) P("\n%d prompt/arm row(s) refused: the speculative arm's counters did not move.\n", refused);
    int ncmp = 0, apart = 0;
    for (int k = 0; k < na; k++) {
        if (nsp[k] == 0) continue;
        if (vrs[k] && proj_all[k] == proj_all[0]) {   /* the guard: the cap must have changed what was projected */
            P("\narm %s: REFUSED: it projected as many verify rows as arm %s (%lld): the cap did not bind\n", arml[k], arml[0],
              (long long)proj_all[k]);
            apart++;
            continue;
        }
        ncmp++;
        double smed_all = median(speedups[k], nsp[k]);   /* sorts speedups */
        P("\n%s%s%smedian speedup over %d prompts: %.3f (min %.3f, max %.3f); mean of per-prompt median tau %.2f; "
          "mean draft ms/round %.2f; acceptance by depth:", na > 1 ? "arm " : "", na > 1 ? arml[k] : "",
          na > 1 ? ": " : "", nsp[k], smed_all, speedups[k][0], speedups[k][nsp[k] - 1], tau_sum[k] / tau_n[k],
          dms_sum[k] / tau_n[k]);
        for (int j = 1; j <= SPECDEC_SPEC_MAX_DEPTH && dad[k][j]; j++) P(" %.2f", (double)aad[k][j] / (double)dad[k][j]);
        P("; verify rows projected per round %.2f%s\n", rounds_all[k] ? (double)proj_all[k] / (double)rounds_all[k] : 0.0,
          (vrs[k] ? vrs[k] : sp.verify_rows) ? " (capped)" : "");
        /* An MTP round's first draft comes with the accept phase (the drafter's step over the
         * accepted rows); the draft phase runs one step for each further draft. Its device time
         * over those steps is a draft step's time, against the bytes printed above. */
        const int64_t steps = drafted_all[k] - (rounds_all[k] - rw1_all[k]);
        if (!strcmp(draft, "mtp") && steps > 0)
            P("%s%s%sdraft phase ms per MTP step %.4f (%lld steps: a round's drafts less its first, which the accept phase makes)\n",
              na > 1 ? "arm " : "", na > 1 ? arml[k] : "", na > 1 ? ": " : "", dms_all[k] / (double)steps, (long long)steps);
    }
    if (ncmp == 0) P("\nno comparison: no prompt passed the guards\n");
#undef P
    if (o) fclose(o);
    rc = (mismatched || apart || ncmp < na) ? 1 : 0;
done:
    for (int i = 0; i < np; i++) free(texts[i]);
    for (int k = 0; k < na; k++) specdec_drafter_free(drs[k]);
    specdec_ctx_free(ctx);
    specdec_model_free(m);
    specdec_tokenizer_free(tok);
    return rc;
}
