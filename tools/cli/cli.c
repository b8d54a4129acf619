/* cli.c: argument helpers and progress display for the specdec CLI. */
#include "cli.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cli_fail_err(const specdec_err *err) {
    fprintf(stderr, "specdec: error (%s): %s\n", specdec_status_name(err->status), err->msg);
    return 1;
}

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("specdec: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_int(const char *opt, const char *s, long lo, long hi, long *out) {
    if (!s) return cli_fail("%s needs a value", opt);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return cli_fail("%s: '%s' is not an integer in [%ld, %ld]", opt, s, lo, hi);
    *out = v;
    return 0;
}

int cli_float(const char *opt, const char *s, double lo, double hi, double *out) {
    if (!s) return cli_fail("%s needs a value", opt);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return cli_fail("%s: '%s' is not a number in [%g, %g]", opt, s, lo, hi);
    *out = v;
    return 0;
}

int cli_prompt_cmd_option(const char *cmd, const char *a, const char *val, specdec_ctx_params *cp, const char **dir,
                          const char **prompt, const char **file, int *i) {
    int taken = cli_ctx_option(a, val, cp, i);
    if (!taken) taken = cli_input_option(a, val, dir, prompt, file, i);
    if (!taken && cli_is_help(a)) taken = cli_usage(cmd) == 0 ? 2 : -1;
    return taken;
}

int cli_input_option(const char *a, const char *val, const char **dir, const char **prompt, const char **file, int *i) {
    const char **dst;
    const char *need;
    if (dir && !strcmp(a, "-m")) { dst = dir; need = "-m needs a directory"; }
    else if (prompt && !strcmp(a, "-p")) { dst = prompt; need = "-p needs text"; }
    else if (file && !strcmp(a, "-f")) { dst = file; need = "-f needs a file (or - for stdin)"; }
    else return 0;
    if (!val) { cli_fail("%s", need); return -1; }
    *dst = val;
    (*i)++;
    return 1;
}

int cli_choice(const char *opt, const char *s, const char *const *names, const int *values, int n, int *out) {
    char all[128] = "";
    for (int k = 0; k < n; k++) {
        if (s && !strcmp(s, names[k])) { *out = values[k]; return 0; }
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", k ? ", " : "", names[k]);
    }
    if (!s) return cli_fail("%s needs a value", opt);
    return cli_fail("%s: '%s' is not one of %s", opt, s, all);
}

/* --kv-dtype's words, indexed by specdec_kv_dtype */
static const char *const kv_names[] = {"f32", "bf16", "f16", "default"};

int cli_parse_kv_dtype(const char *s, specdec_kv_dtype *out) {
    static const int values[] = {SPECDEC_KV_F32, SPECDEC_KV_BF16, SPECDEC_KV_F16, SPECDEC_KV_DEFAULT};
    int v = 0;
    if (cli_choice("--kv-dtype", s, kv_names, values, 4, &v)) return 1;
    *out = (specdec_kv_dtype)v;
    return 0;
}

const char *cli_kv_dtype_name(specdec_kv_dtype d) { return (unsigned)d < 4 ? kv_names[d] : "?"; }

int cli_ctx_option(const char *a, const char *val, specdec_ctx_params *cp, int *i) {
    long v = 0;
    if (!strcmp(a, "--threads")) { if (cli_int(a, val, 1, 1024, &v)) return -1; cp->n_threads = (int)v; }
    else if (!strcmp(a, "--backend")) {
        if (!val) { cli_fail("--backend needs a name (%s)", specdec_backends()); return -1; }
        cp->backend = val;
    }
    else if (!strcmp(a, "--device")) { if (cli_int(a, val, 0, 64, &v)) return -1; cp->device = (int)v; }
    else if (!strcmp(a, "--ctx")) { if (cli_int(a, val, 1, 1 << 24, &v)) return -1; cp->n_ctx = (int)v; }
    else if (!strcmp(a, "--batch")) { if (cli_int(a, val, 1, 4096, &v)) return -1; cp->max_batch = (int)v; }
    else if (!strcmp(a, "--kv-dtype")) { if (cli_parse_kv_dtype(val, &cp->kv_dtype)) return -1; }
    else if (!strcmp(a, "--precision")) { if (cli_parse_precision(val, &cp->precision)) return -1; }
    else if (!strcmp(a, "--drafter-weights")) { if (cli_parse_drafter_weights(val, &cp->drafter_weights)) return -1; }
    else if (!strcmp(a, "--reference")) { cp->reference_kernels = true; return 1; }   /* a flag: no value */
    else if (cli_is_tp_opt(a)) { if (cli_tp_opt(a, val, cp)) return -1; }
    else return 0;
    (*i)++;
    return 1;
}

int cli_parse_sampling(const char *s, specdec_spec_sampling *out) {
    static const char *const names[] = {"seeded", "rejection"};
    static const int values[] = {SPECDEC_SPEC_SEEDED, SPECDEC_SPEC_REJECTION};
    int v = 0;
    if (cli_choice("--sampling", s, names, values, 2, &v)) return 1;
    *out = (specdec_spec_sampling)v;
    return 0;
}

int cli_parse_precision(const char *s, specdec_precision *out) {
    static const char *const names[] = {"f32", "int8", "default"};
    static const int values[] = {SPECDEC_PRECISION_F32, SPECDEC_PRECISION_INT8, SPECDEC_PRECISION_DEFAULT};
    int v = 0;
    if (cli_choice("--precision", s, names, values, 3, &v)) return 1;
    *out = (specdec_precision)v;
    return 0;
}

int cli_parse_drafter_weights(const char *s, specdec_drafter_weights *out) {
    static const char *const names[] = {"stored", "q4", "default"};
    static const int values[] = {SPECDEC_DRAFTER_WEIGHTS_STORED, SPECDEC_DRAFTER_WEIGHTS_Q4, SPECDEC_DRAFTER_WEIGHTS_DEFAULT};
    int v = 0;
    if (cli_choice("--drafter-weights", s, names, values, 3, &v)) return 1;
    *out = (specdec_drafter_weights)v;
    return 0;
}

/* Loading progress on stderr (never stdout): on a terminal a bar redrawn in place; otherwise, once
 * the load has taken longer than SPECDEC_PROGRESS_AFTER_MS (default 1000; 0: always), a line per
 * 10% so a log shows that a large model is loading rather than hung. */
typedef struct load_prog { const char *what; bool tty; double t0_ms, after_ms; int last_decile; } load_prog;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool progress(uint64_t done, uint64_t total, void *user) {
    load_prog *p = user;
    int pct = total ? (int)(done * 100 / total) : 100;
    if (p->tty) {
        fprintf(stderr, "\r%s weights: %3d%% (%llu / %llu MiB)", p->what, pct,
                (unsigned long long)(done >> 20), (unsigned long long)(total >> 20));
        if (done >= total) fputc('\n', stderr);
        return true;
    }
    if (now_ms() - p->t0_ms < p->after_ms || pct / 10 == p->last_decile) return true;
    p->last_decile = pct / 10;
    fprintf(stderr, "%s weights: %3d%% (%llu / %llu MiB, %.1f s)\n", p->what, pct, (unsigned long long)(done >> 20),
            (unsigned long long)(total >> 20), (now_ms() - p->t0_ms) / 1e3);
    return true;
}

static load_prog prog_start(const char *what) {
    load_prog lp = {what, isatty(2) != 0, now_ms(), 1000.0, -1};
    const char *env = getenv("SPECDEC_PROGRESS_AFTER_MS");
    if (env && *env) lp.after_ms = atof(env);
    return lp;
}

specdec_status cli_load_model(const char *dir, bool load_mtp, specdec_model **m, specdec_err *err) {
    specdec_model_params mp = specdec_model_default_params();
    mp.load_mtp = load_mtp;
    load_prog lp = prog_start("loading");
    /* the callback also pages the weights in at load time (sd_st_prefault) rather than during the
     * first forward, so the load is what takes the time the progress shows */
    mp.progress = progress;
    mp.progress_user = &lp;
    return specdec_model_load(dir, &mp, m, err);
}

specdec_status cli_ctx_init(const specdec_model *m, const specdec_ctx_params *cp, specdec_ctx **ctx, specdec_err *err) {
    specdec_ctx_params p = *cp;
    load_prog lp = prog_start("uploading");
    p.progress = progress;   /* called only where the weights are copied (a GPU), not for the CPU's views */
    p.progress_user = &lp;
    return specdec_ctx_init(m, &p, ctx, err);
}

/* --draft-vocab FILE[:N] (run and bench): attach the reduced draft vocabulary of FILE,
 * its first N ids when ":N" (digits) ends the value, else the file's default_n (else all). */
specdec_status cli_draft_vocab(specdec_drafter *dr, const char *spec, specdec_err *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s", spec);
    long n = SPECDEC_DRAFT_VOCAB_FILE_DEFAULT;
    char *c = strrchr(path, ':');
    if (c && c[1]) {
        char *end;
        long v = strtol(c + 1, &end, 10);
        if (!*end && v >= 0) { n = v; *c = 0; }
    }
    if (n > 1 << 24) { snprintf(err->msg, sizeof err->msg, "--draft-vocab: N %ld too big", n); return err->status = SPECDEC_ERR_INVALID_ARG; }
    return specdec_drafter_set_draft_vocab(dr, path, (int)n, err);
}

/* run and serve: an MTP drafter uses DIR/draft_vocab.json (at its default_n) when the model ships
 * one, unless --draft-vocab names another file or "none". Output never depends on it (the target
 * verifies every draft); only the draft step's cost does. `used` gets what was attached ("" for
 * the full head). */
specdec_status cli_draft_vocab_auto(specdec_drafter *dr, const char *model_dir, const char *spec, char *used,
                                    size_t cap, specdec_err *err) {
    used[0] = 0;
    if (!dr || !cli_draft_mtp(specdec_drafter_name(dr))) return SPECDEC_OK;
    if (spec && !strcmp(spec, "none")) return SPECDEC_OK;
    if (spec) {
        specdec_status st = cli_draft_vocab(dr, spec, err);
        if (st == SPECDEC_OK) snprintf(used, cap, "%s", spec);
        return st;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/draft_vocab.json", model_dir);
    if (access(path, F_OK) != 0) return SPECDEC_OK;
    specdec_status st = specdec_drafter_set_draft_vocab(dr, path, SPECDEC_DRAFT_VOCAB_FILE_DEFAULT, err);
    if (st == SPECDEC_OK) snprintf(used, cap, "%s, shipped with the model; --draft-vocab none for the full head", path);
    return st;
}

bool cli_draft_mtp(const char *draft) {
    return draft && (!strcmp(draft, "mtp") || (!strncmp(draft, "mtp+ngram", 9) && (!draft[9] || draft[9] == ':')));
}

bool cli_is_tp_opt(const char *a) { return !strcmp(a, "--tp") || !strcmp(a, "--tp-reduce"); }

int cli_tp_opt(const char *a, const char *val, specdec_ctx_params *cp) {
    if (!strcmp(a, "--tp")) {
        long v = 0;
        if (cli_int(a, val, 1, 8, &v)) return 1;
        cp->tp = (int)v;
        return 0;
    }
    if (val && !strcmp(val, "gather")) cp->tp_reduce = 0;
    else if (val && !strcmp(val, "ring")) cp->tp_reduce = 1;
    else if (val && !strcmp(val, "none")) cp->tp_reduce = 2;
    else return cli_fail("--tp-reduce: want gather, ring or none (none: wrong output, for timing)");
    return 0;
}

void cli_tp_report(const specdec_ctx *c) {
    specdec_tp_stats ts;
    specdec_ctx_tp_stats(c, &ts);
    if (!ts.ranks) return;
    fprintf(stderr, "[tp] %d rank(s) over %s: %llu all-reduces of %.1f floats on average, %.3f ms in them (host)\n",
            ts.ranks, ts.comm, (unsigned long long)ts.allreduce_calls,
            ts.allreduce_calls ? (double)ts.allreduce_floats / (double)ts.allreduce_calls : 0.0, ts.allreduce_ms);
}

/* Sampling options the command line did not give take the model's generation_config.json values
 * (which are the library's defaults where the file is silent or absent). */
specdec_status cli_gen_defaults(const specdec_model *m, const bool given[SPECDEC_GEN_N_KEYS], specdec_sampling_params *s) {
    specdec_generation_config g;
    specdec_model_generation_config(m, &g);
    if (!given[SPECDEC_GEN_TEMPERATURE]) s->temperature = g.sampling.temperature;
    if (!given[SPECDEC_GEN_TOP_K]) s->top_k = g.sampling.top_k;
    if (!given[SPECDEC_GEN_TOP_P]) s->top_p = g.sampling.top_p;
    if (!given[SPECDEC_GEN_MIN_P]) s->min_p = g.sampling.min_p;
    return SPECDEC_OK;
}
