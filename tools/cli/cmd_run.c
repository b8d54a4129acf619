/* cmd_run.c: `specdec run`: generate text from a prompt, streaming it to stdout, with a stats
 * line on stderr. With --draft mtp|mtp+ngram|model:DIR|ngram it decodes speculatively (same output at
 * temperature 0 / in seeded mode) and adds a [spec] summary line (and --stats-json FILE).
 * --ids-out FILE writes the generated token ids as a JSON array. Sampling options not given take
 * the model's generation_config.json defaults (then the library's). */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

static bool write_text(const char *s, size_t n, void *user) {
    *(bool *)user = true;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    return true;
}

int cmd_run(int argc, char **argv) {
    const char *dir_opt = NULL, *prompt = NULL, *prompt_file = NULL;
    char dir[4096];
    bool seed_fresh = false, given[SPECDEC_GEN_N_KEYS] = {false};
    const char *stops[16]; int n_stop = 0;
    specdec_gen_params gp = specdec_gen_default_params();
    specdec_ctx_params cp = specdec_ctx_default_params();
    specdec_spec_params sp = specdec_spec_default_params();
    const char *draft = NULL, *stats_json = NULL, *dvocab = NULL, *ids_out = NULL;
    long v; double d;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int taken = cli_prompt_cmd_option("run", a, val, &cp, &dir_opt, &prompt, &prompt_file, &i);
        if (taken) { if (taken != 1) return taken < 0; continue; }
        if (!strcmp(a, "-n")) { if (cli_int(a, val, 0, 1 << 30, &v)) return 1; gp.max_tokens = (int)v; i++; }
        else if (!strcmp(a, "--temp")) { if (cli_float(a, val, 0, 100, &d)) return 1; gp.sampling.temperature = (float)d; given[SPECDEC_GEN_TEMPERATURE] = true; i++; }
        else if (!strcmp(a, "--top-k")) { if (cli_int(a, val, 0, 1 << 24, &v)) return 1; gp.sampling.top_k = (int)v; given[SPECDEC_GEN_TOP_K] = true; i++; }
        else if (!strcmp(a, "--top-p")) { if (cli_float(a, val, 0, 1, &d)) return 1; gp.sampling.top_p = (float)d; given[SPECDEC_GEN_TOP_P] = true; i++; }
        else if (!strcmp(a, "--min-p")) { if (cli_float(a, val, 0, 1, &d)) return 1; gp.sampling.min_p = (float)d; given[SPECDEC_GEN_MIN_P] = true; i++; }
        else if (!strcmp(a, "--seed")) { if (cli_seed(a, val, &gp.sampling.seed, &seed_fresh)) return 1; i++; }
        else if (!strcmp(a, "--stop")) {
            if (!val || !*val) return cli_fail("--stop needs a non-empty string");
            if (n_stop == 16) return cli_fail("at most 16 --stop strings");
            stops[n_stop++] = val; i++;
        }
        else if (!strcmp(a, "--ignore-eos")) gp.ignore_eos = true;
        else if (!strcmp(a, "--draft")) { if (!val) return cli_fail("--draft needs mtp, model:DIR or ngram"); draft = val; i++; }
        else if (!strcmp(a, "--block-size")) {
            if (val && !strcmp(val, "auto")) sp.block_size = 0;
            else { if (cli_int(a, val, 2, SPECDEC_SPEC_MAX_DEPTH, &v)) return 1; sp.block_size = (int)v; }
            i++;
        }
        else if (!strcmp(a, "--sampling")) { if (cli_parse_sampling(val, &sp.sampling)) return 1; i++; }
        else if (!strcmp(a, "--allow-inexact")) sp.allow_inexact = true;
        else if (!strcmp(a, "--profile-drafter")) sp.profile = true;
        else if (!strcmp(a, "--verify-rows")) { if (cli_int(a, val, 1, SPECDEC_SPEC_MAX_DEPTH, &v)) return 1; sp.verify_rows = (int)v; i++; }
        else if (!strcmp(a, "--probe-draws")) { if (cli_int(a, val, 1, 64, &v)) return 1; sp.probe_draws = (int)v; i++; }
        else if (!strcmp(a, "--draft-vocab")) { if (!val) return cli_fail("--draft-vocab needs FILE[:N] or none"); dvocab = val; i++; }
        else if (!strcmp(a, "--stats-json")) { if (!val) return cli_fail("--stats-json needs a file"); stats_json = val; i++; }
        else if (!strcmp(a, "--ids-out")) { if (!val) return cli_fail("--ids-out needs a file"); ids_out = val; i++; }
        else return cli_fail("run: unknown option '%s'", a);
    }
    if (!prompt == !prompt_file) return cli_fail("run needs the prompt: -p TEXT, -f FILE or -f - (stdin), one of them");
    if (dvocab && !cli_draft_mtp(draft)) return cli_fail("--draft-vocab needs --draft mtp or mtp+ngram");
    if (cli_model_dir(dir_opt, dir, sizeof dir)) return 1;
    /* output files are checked before anything loads: a typo costs nothing */
    if ((stats_json && cli_check_out("--stats-json", stats_json)) || (ids_out && cli_check_out("--ids-out", ids_out))) return 1;
    char *prompt_buf = NULL;
    if (prompt_file) { if (cli_read_prompt(prompt_file, &prompt_buf)) return 1; prompt = prompt_buf; }
    gp.stop = stops; gp.n_stop = n_stop;
    bool wrote = false;
    gp.on_text = write_text;
    gp.user = &wrote;

    specdec_err err = {0};
    specdec_tokenizer *tok = NULL;
    specdec_model *m = NULL;
    specdec_ctx *ctx = NULL;
    specdec_drafter *dr = NULL;
    int32_t *ids = NULL; size_t n_ids = 0;
    int32_t *gen = NULL; int n_gen = 0;
    char dv_used[1200];
    int rc = 1;
    if (specdec_tokenizer_load(dir, &tok, &err) ||
        specdec_tokenize(tok, prompt, strlen(prompt), &ids, &n_ids, &err) ||
        cli_load_model(dir, cli_draft_mtp(draft), &m, &err) ||
        cli_gen_defaults(m, given, &gp.sampling) ||
        cli_ctx_init(m, &cp, &ctx, &err) ||
        (draft && specdec_drafter_init(m, draft, &dr, &err)) ||
        cli_draft_vocab_auto(dr, dir, dvocab, dv_used, sizeof dv_used, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    specdec_gen_stats st;
    specdec_spec_stats ss;
    specdec_status gst = dr ? specdec_spec_generate(ctx, dr, tok, ids, (int)n_ids, &gp, &sp, &gen, &n_gen, &ss, &err)
                            : specdec_generate(ctx, tok, ids, (int)n_ids, &gp, &gen, &n_gen, &st, &err);
    if (dr) st = ss.gen;
    if (gst) {
        if (wrote) { fputc('\n', stdout); fflush(stdout); }   /* end a partly streamed line; print nothing otherwise */
        rc = cli_fail_err(&err);
        goto done;
    }
    fputc('\n', stdout);
    fflush(stdout);   /* the text's last line before the stats on stderr, on a terminal too */
    char seed_s[64] = "";
    if (gp.sampling.temperature > 0 || seed_fresh)
        snprintf(seed_s, sizeof seed_s, ", seed %llu%s", (unsigned long long)st.seed, seed_fresh ? " (fresh)" : "");
    fprintf(stderr, "[stats] prompt %d tokens, prefill %.1f tok/s (%.1f ms), generated %d tokens, decode %.2f tok/s (%.2f ms/token), stop: %s%s\n",
            st.prompt_tokens, st.prefill_tok_s, st.prefill_ms, st.generated_tokens, st.decode_tok_s,
            st.decode_tok_s > 0 ? 1e3 / st.decode_tok_s : 0.0, specdec_stop_reason_name(st.stop_reason), seed_s);
    if (st.device_ms > 0 && st.decode_ms > 0)   /* the rest: the device waiting on the host between rounds */
        fprintf(stderr, "[stats] device busy %.1f%% of the decode (%.1f of %.1f ms; %.1f us a token idle)\n",
                100.0 * st.device_ms / st.decode_ms, st.device_ms, st.decode_ms,
                st.generated_tokens > 0 ? 1e3 * (st.decode_ms - st.device_ms) / st.generated_tokens : 0.0);
    {
        specdec_backend_stats bs;
        specdec_ctx_backend_stats(ctx, &bs);
        fprintf(stderr, "[backend] %s (%s): %llu ops, recorded %llu sequences, replayed %llu, %llu reads, %llu writes",
                specdec_ctx_backend(ctx), specdec_ctx_kernels(ctx), (unsigned long long)bs.ops,
                (unsigned long long)bs.seq_recorded, (unsigned long long)bs.seq_replayed,
                (unsigned long long)bs.read_calls, (unsigned long long)bs.write_calls);
        if (bs.graph_kernels)
            fprintf(stderr, ", %llu kernels in recordings (%.1f per generated token, prefill included)", (unsigned long long)bs.graph_kernels,
                    st.generated_tokens > 0 ? (double)bs.graph_kernels / st.generated_tokens : 0.0);
        fprintf(stderr, ", kv cache %s, batch %d\n", cli_kv_dtype_name(specdec_ctx_kv_dtype(ctx)), specdec_ctx_max_batch(ctx));
        cli_tp_report(ctx);
    }
    if (dr) {
        char line[2048];
        specdec_spec_stats_summary(&ss, line, sizeof line);
        fprintf(stderr, "%s\n", line);
        if (specdec_drafter_draft_vocab_size(dr) > 0) {
            specdec_model_info mi;
            specdec_model_get_info(m, &mi);
            fprintf(stderr, "[spec] draft vocabulary: %d of %d ids (%s)\n", specdec_drafter_draft_vocab_size(dr), mi.vocab_size, dv_used);
        }
        const specdec_drafter_weights dw = specdec_ctx_drafter_weights(ctx);
        if (cli_draft_mtp(draft) && dw != SPECDEC_DRAFTER_WEIGHTS_DEFAULT)
            fprintf(stderr, "[spec] drafter weights: %s\n", dw == SPECDEC_DRAFTER_WEIGHTS_Q4
                    ? "4-bit g64, quantized at load (--drafter-weights stored keeps them as shipped)"
                    : "as stored (--drafter-weights q4 quantizes them at load)");
        if (stats_json && specdec_spec_stats_write_json(&ss, stats_json, &err)) { rc = cli_fail_err(&err); goto done; }
    } else if (stats_json) {
        specdec_spec_stats none;
        memset(&none, 0, sizeof none);
        none.gen = st; none.probe = -1;
        snprintf(none.note, sizeof none.note, "no drafter: classic decoding");
        if (specdec_spec_stats_write_json(&none, stats_json, &err)) { rc = cli_fail_err(&err); goto done; }
    }
    if (ids_out) {   /* the generated ids as a JSON array (tools/inflate/agree.sh compares them) */
        FILE *f = fopen(ids_out, "w");
        if (!f) { rc = cli_fail("--ids-out: cannot create %s", ids_out); goto done; }
        fputc('[', f);
        for (int i = 0; i < n_gen; i++) fprintf(f, "%s%d", i ? ", " : "", gen[i]);
        fputs("]\n", f);
        if (fclose(f) != 0) { rc = cli_fail("--ids-out: cannot write %s", ids_out); goto done; }
    }
    rc = 0;
done:
    free(prompt_buf);
    free(ids);
    free(gen);
    specdec_drafter_free(dr);
    specdec_ctx_free(ctx);
    specdec_model_free(m);
    specdec_tokenizer_free(tok);
    return rc;
}
