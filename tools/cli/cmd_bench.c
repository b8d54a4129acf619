/* cmd_bench.c: `specdec bench`: classic vs speculative decoding, side by side in one run, per
 * docs/benchmarking.md: per prompt a discarded warm-up of both arms, then R >= 5 interleaved
 * samples (classic, speculative, classic, ...), medians with min/max, the machine load before and
 * after (/proc/loadavg). Guards: no comparison is printed for a prompt when the speculative arm
 * did not move its own counters (zero rounds or nothing drafted: the arms cannot be told apart),
 * or when its output differs from the classic arm's at temperature 0 (then the first differing
 * position is printed instead). */
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
static void loadavg(char *buf, size_t n) {
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) { if (!fgets(buf, (int)n, f)) buf[0] = 0; fclose(f); }
    size_t l = strlen(buf);
    if (l && buf[l - 1] == '\n') buf[l - 1] = 0;
}

#define MAXP 256
#define MAXR 64

int cmd_bench(int argc, char **argv) {
    const char *dir = NULL, *draft = NULL, *prompts_path = NULL, *out_path = NULL;
    specdec_gen_params gp = specdec_gen_default_params();
    specdec_ctx_params cp = specdec_ctx_default_params();
    specdec_spec_params sp = specdec_spec_default_params();
    sp.block_size = 4;
    int repeats = 5, max_prompts = MAXP;
    bool profile = false;
    long v; double d;
    gp.max_tokens = 128;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m")) { if (!val) return cli_fail("-m needs a directory"); dir = val; i++; }
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
        else if (!strcmp(a, "--threads")) { if (cli_int(a, val, 1, 1024, &v)) return 1; cp.n_threads = (int)v; i++; }
        else if (!strcmp(a, "--ctx")) { if (cli_int(a, val, 1, 1 << 24, &v)) return 1; cp.n_ctx = (int)v; i++; }
        else if (!strcmp(a, "--temp")) { if (cli_float(a, val, 0, 100, &d)) return 1; gp.sampling.temperature = (float)d; i++; }
        else if (!strcmp(a, "--seed")) { if (cli_int(a, val, 0, 1L << 62, &v)) return 1; gp.sampling.seed = (uint64_t)v; i++; }
        else if (!strcmp(a, "--sampling")) {
            if (val && !strcmp(val, "seeded")) sp.sampling = SPECDEC_SPEC_SEEDED;
            else if (val && !strcmp(val, "rejection")) sp.sampling = SPECDEC_SPEC_REJECTION;
            else return cli_fail("--sampling: want rejection or seeded");
            i++;
        }
        else if (!strcmp(a, "--ignore-eos")) gp.ignore_eos = true;
        else if (!strcmp(a, "--profile-drafter")) profile = true;   /* a third arm: speculative with the step profile */
        else return cli_fail("bench: unknown option '%s'", a);
    }
    if (!dir || !draft || !prompts_path) return cli_fail("bench needs -m DIR, --draft and --prompts FILE");
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
    specdec_tokenizer *tok = NULL; specdec_model *m = NULL; specdec_ctx *ctx = NULL; specdec_drafter *dr = NULL;
    int rc = 1;
    char tjp[1100];
    snprintf(tjp, sizeof tjp, "%s/tokenizer.json", dir);
    FILE *tjf = fopen(tjp, "r");
    bool byte_ids = !tjf;   /* random test models have no tokenizer: prompt bytes become ids (byte % vocab) */
    if (tjf) fclose(tjf);
    if ((!byte_ids && specdec_tokenizer_load(dir, &tok, &err)) || cli_load_model(dir, !strcmp(draft, "mtp"), &m, &err) ||
        specdec_ctx_init(m, &cp, &ctx, &err) || specdec_drafter_init(m, draft, &dr, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    FILE *o = out_path ? fopen(out_path, "w") : NULL;
    FILE *outs[2] = {stdout, o};
    char la0[128], la1[128];
    loadavg(la0, sizeof la0);
#define P(...) do { for (int q_ = 0; q_ < 2; q_++) if (outs[q_]) fprintf(outs[q_], __VA_ARGS__); } while (0)
    char bs[16];
    if (sp.block_size) snprintf(bs, sizeof bs, "%d", sp.block_size); else snprintf(bs, sizeof bs, "auto");
    P("# specdec bench: classic vs speculative (--draft %s, --block-size %s)\n\n", draft, bs);
    P("%d tokens, temperature %g, %d prompts, %d interleaved samples per arm after a discarded warm-up, threads %d\n\n",
      gp.max_tokens, gp.sampling.temperature, np, repeats, cp.n_threads);
    P("loadavg before: %s\n\n", la0);
    if (byte_ids) P("NOTE: %s has no tokenizer.json: prompt bytes were mapped to ids (byte %% vocab, at most 512): a test model.\n\n", dir);
    P("| prompt | classic tok/s med [min, max] | spec tok/s med [min, max] | speedup | tau | acc by depth | identical |\n");
    P("|---|---|---|---|---|---|---|\n");
    double speedups[MAXP]; int nsp = 0;
    double tau_sum = 0; int tau_n = 0, refused = 0, mismatched = 0;
    int64_t dad[SPECDEC_SPEC_MAX_DEPTH + 1] = {0}, aad[SPECDEC_SPEC_MAX_DEPTH + 1] = {0};
    bool wide = false;
    for (int pi = 0; pi < np; pi++) {
        int32_t *pids = NULL; size_t npids = 0;
        if (byte_ids) {
            specdec_model_info mi;
            specdec_model_get_info(m, &mi);
            npids = strlen(texts[pi]);
            if (npids > 512) npids = 512;
            pids = malloc(sizeof *pids * (npids ? npids : 1));
            for (size_t k = 0; k < npids; k++) pids[k] = (int32_t)((unsigned char)texts[pi][k] % (unsigned)mi.vocab_size);
            if (!npids) pids[npids++] = 0;
        } else if (specdec_tokenize(tok, texts[pi], strlen(texts[pi]), &pids, &npids, &err)) { rc = cli_fail_err(&err); goto done; }
        double ca[MAXR], sa[MAXR], pa[MAXR], taus[MAXR];
        specdec_spec_stats last_prof;
        memset(&last_prof, 0, sizeof last_prof);
        int64_t rounds = 0, drafted = 0, accepted = 0;
        int64_t pdad[SPECDEC_SPEC_MAX_DEPTH + 1] = {0}, paad[SPECDEC_SPEC_MAX_DEPTH + 1] = {0};
        int diff_at = -1; bool speculated = true;
        for (int r = -1; r < repeats; r++) {   /* r = -1: warm-up, discarded */
            int32_t *a = NULL, *b = NULL; int na = 0, nb = 0;
            specdec_gen_stats gs; specdec_spec_stats ss;
            if (specdec_generate(ctx, NULL, pids, (int)npids, &gp, &a, &na, &gs, &err) ||
                specdec_spec_generate(ctx, dr, NULL, pids, (int)npids, &gp, &sp, &b, &nb, &ss, &err)) {
                rc = cli_fail_err(&err); free(a); free(b); free(pids); goto done;
            }
            if (!(gp.sampling.temperature > 0) || sp.sampling == SPECDEC_SPEC_SEEDED) {
                int n = na < nb ? na : nb, k = 0;
                while (k < n && a[k] == b[k]) k++;
                if ((k < n || na != nb) && diff_at < 0) diff_at = k;
            }
            free(a); free(b);
            if (profile) {
                specdec_spec_params pp = sp;
                pp.profile = true;
                if (specdec_spec_generate(ctx, dr, NULL, pids, (int)npids, &gp, &pp, NULL, NULL, &last_prof, &err)) {
                    rc = cli_fail_err(&err); free(pids); goto done;
                }
                if (r >= 0) pa[r] = last_prof.gen.decode_tok_s;
            }
            if (r < 0) continue;
            ca[r] = gs.decode_tok_s; sa[r] = ss.gen.decode_tok_s; taus[r] = ss.tau;
            rounds += ss.rounds; drafted += ss.drafted; accepted += ss.accepted;
            if (!ss.speculated) speculated = false;
            for (int j = 1; j <= SPECDEC_SPEC_MAX_DEPTH; j++) { pdad[j] += ss.drafted_at_depth[j]; paad[j] += ss.accepted_at_depth[j]; }
        }
        free(pids);
        double cmin = ca[0], cmax = ca[0], smin = sa[0], smax = sa[0];
        for (int r = 0; r < repeats; r++) {
            if (ca[r] < cmin) cmin = ca[r];
            if (ca[r] > cmax) cmax = ca[r];
            if (sa[r] < smin) smin = sa[r];
            if (sa[r] > smax) smax = sa[r];
        }
        double cmed = median(ca, repeats), smed = median(sa, repeats), tmed = median(taus, repeats);
        if (cmed > 0 && (cmax - cmin) / cmed > 0.05) wide = true;
        if (smed > 0 && (smax - smin) / smed > 0.05) wide = true;
        if (diff_at >= 0) {
            mismatched++;
            P("| %s | %.1f | - | REFUSED | - | - | NO: outputs differ at token %d |\n", ids_s[pi], cmed, diff_at);
            continue;
        }
        if (!speculated || rounds == 0 || drafted == 0) {
            refused++;
            P("| %s | %.1f | %.1f | REFUSED: the speculative arm ran %lld rounds, drafted %lld%s | - | - | yes |\n", ids_s[pi], cmed,
              smed, (long long)rounds, (long long)drafted, speculated ? "" : " (declined)");
            continue;
        }
        double spd = cmed > 0 ? smed / cmed : 0;
        speedups[nsp++] = spd;
        tau_sum += tmed; tau_n++;
        char acc[256] = ""; size_t l = 0;
        for (int j = 1; j <= SPECDEC_SPEC_MAX_DEPTH && pdad[j]; j++) {
            l += (size_t)snprintf(acc + l, sizeof acc - l, "%s%.2f", j > 1 ? " " : "", (double)paad[j] / (double)pdad[j]);
            dad[j] += pdad[j]; aad[j] += paad[j];
            if (l >= sizeof acc) break;
        }
        if (profile) {
            double pmed = median(pa, repeats);
            char line[2048];
            specdec_spec_stats_summary(&last_prof, line, sizeof line);
            const char *pr = strstr(line, "; drafter profile");
            fprintf(stderr, "%s: speculative %.1f tok/s without the drafter profile, %.1f with (%.1f%% slower)%s\n", ids_s[pi],
                    smed, pmed, smed > 0 ? 100.0 * (smed - pmed) / smed : 0.0, pr ? pr : "");
        }
        P("| %s | %.1f [%.1f, %.1f] | %.1f [%.1f, %.1f] | %.3f | %.2f | %s | %s |\n", ids_s[pi], cmed, cmin, cmax, smed, smin,
          smax, spd, tmed, acc, (!(gp.sampling.temperature > 0) || sp.sampling == SPECDEC_SPEC_SEEDED) ? "yes" : "n/a (rejection)");
    }
    loadavg(la1, sizeof la1);
    P("\nloadavg after: %s\n", la1);
    if (wide) P("\nNOTE: some arms spread wider than 5%% (min..max over the median): treat those rows with care.\n");
    if (mismatched) P("\n%d prompt(s): speculative output DIFFERS from classic at temperature 0: no comparison printed for them.\n", mismatched);
    if (refused) P("\n%d prompt(s) refused: the speculative arm's counters did not move.\n", refused);
    if (nsp > 0) {
        double smed_all = median(speedups, nsp);   /* sorts speedups */
        P("\nmedian speedup over %d prompts: %.3f (min %.3f, max %.3f); mean of per-prompt median tau %.2f; acceptance by depth:",
          nsp, smed_all, speedups[0], speedups[nsp - 1], tau_sum / tau_n);
        for (int j = 1; j <= SPECDEC_SPEC_MAX_DEPTH && dad[j]; j++) P(" %.2f", (double)aad[j] / (double)dad[j]);
        P("\n");
    } else P("\nno comparison: no prompt passed the guards\n");
#undef P
    if (o) fclose(o);
    rc = (mismatched || nsp == 0) ? 1 : 0;
done:
    for (int i = 0; i < np; i++) free(texts[i]);
    specdec_drafter_free(dr);
    specdec_ctx_free(ctx);
    specdec_model_free(m);
    specdec_tokenizer_free(tok);
    return rc;
}
