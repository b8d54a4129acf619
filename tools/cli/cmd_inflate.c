/* cmd_inflate.c: `specdec inflate IN OUT --shape qwen3-1.7b|qwen3-8b|qwen3-32b`: write a model of
 * a bigger shape that computes what IN computes (specdec_inflate), with explicit dimensions
 * overriding the preset, and progress on stderr (bytes written, MB/s). */
#include "cli.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct prog { bool quiet, tty; double t0, last; } prog;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool on_progress(uint64_t done, uint64_t total, void *user) {
    prog *p = user;
    const double t = now_s();
    if (p->quiet || (!p->tty && done < total && t - p->last < 5.0)) return true;  /* a log gets a line every 5 s */
    p->last = t;
    const double mb = (double)done / 1e6, el = t - p->t0;
    fprintf(stderr, "%sinflating: %3d%% (%.0f / %.0f MB, %.0f MB/s)%s", p->tty ? "\r" : "",
            total ? (int)(done * 100 / total) : 100, mb, (double)total / 1e6, el > 0 ? mb / el : 0.0,
            p->tty && done < total ? "" : "\n");
    return true;
}

int cmd_inflate(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *shape = NULL;
    specdec_inflate_params ip = specdec_inflate_default_params();
    int dims[5] = {0, 0, 0, 0, 0};   /* hidden, intermediate, layers, heads, kv heads */
    static const char *dim_opt[5] = {"--hidden", "--intermediate", "--layers", "--heads", "--kv-heads"};
    specdec_inflate_tie tie = SPECDEC_INFLATE_TIE_KEEP;
    prog pr = {false, isatty(2) != 0, now_s(), 0};
    long v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int k = -1;
        for (int j = 0; j < 5; j++) if (!strcmp(a, dim_opt[j])) k = j;
        if (cli_is_help(a)) return cli_usage("inflate");
        else if (k >= 0) { if (cli_int(a, val, 1, 1 << 20, &v)) return 1; dims[k] = (int)v; i++; }
        else if (!strcmp(a, "--shape")) { if (!val) return cli_fail("--shape needs qwen3-1.7b, qwen3-8b or qwen3-32b"); shape = val; i++; }
        else if (!strcmp(a, "--tied")) tie = SPECDEC_INFLATE_TIED;
        else if (!strcmp(a, "--untied")) tie = SPECDEC_INFLATE_UNTIED;
        else if (!strcmp(a, "--fill")) {
            static const char *const fills[] = {"random", "zero"};
            static const int fill_zero[] = {0, 1};
            int z = 0;
            if (cli_choice(a, val, fills, fill_zero, 2, &z)) return 1;
            ip.fill_zero = z != 0;
            i++;
        }
        else if (!strcmp(a, "--seed")) {
            bool fresh;
            if (cli_seed(a, val, &ip.seed, &fresh)) return 1;
            /* the fill seed names the output's bytes: a random one would make them unrepeatable */
            if (fresh) return cli_fail("inflate --seed: -1 (a fresh seed) is not taken here; give the fill seed");
            i++;
        }
        else if (!strcmp(a, "--bits")) { if (cli_int(a, val, 4, 8, &v)) return 1; ip.bits = (int)v; i++; }
        else if (!strcmp(a, "--group-size")) { if (cli_int(a, val, 32, 128, &v)) return 1; ip.group_size = (int)v; i++; }
        else if (!strcmp(a, "--quantize-mtp")) ip.quantize_mtp = true;
        else if (!strcmp(a, "--shard-mb")) { if (cli_int(a, val, 0, 1 << 24, &v)) return 1; ip.max_shard_bytes = (uint64_t)v << 20; i++; }
        else if (!strcmp(a, "--threads")) { if (cli_int(a, val, 1, 1024, &v)) return 1; ip.n_threads = (int)v; i++; }
        else if (!strcmp(a, "--quiet")) pr.quiet = true;
        else if (a[0] == '-') return cli_fail("inflate: unknown option '%s'", a);
        else if (!in) in = a;
        else if (!out) out = a;
        else return cli_fail("inflate: unexpected argument '%s'", a);
    }
    if (!in || !out) return cli_fail("inflate needs IN and OUT directories");
    bool any_dim = false;
    for (int j = 0; j < 5; j++) any_dim |= dims[j] > 0;
    if (!shape && !any_dim) return cli_fail("inflate needs --shape qwen3-1.7b|qwen3-8b|qwen3-32b or explicit --hidden/--intermediate/--layers/--heads/--kv-heads");
    if (ip.bits && !ip.group_size) ip.group_size = 64;
    specdec_err err = {0};
    if (shape && specdec_inflate_preset(shape, &ip, &err)) return cli_fail_err(&err);
    int *fields[5] = {&ip.hidden_size, &ip.intermediate_size, &ip.n_layers, &ip.n_heads, &ip.n_kv_heads};
    for (int j = 0; j < 5; j++) if (dims[j]) *fields[j] = dims[j];   /* explicit dimensions override the preset */
    if (tie != SPECDEC_INFLATE_TIE_KEEP) ip.tie = tie;
    ip.progress = on_progress;
    ip.progress_user = &pr;
    specdec_model *src = NULL;   /* for the header line only; specdec_inflate validates on its own */
    specdec_model_params mp = specdec_model_default_params();
    mp.load_mtp = false;
    if (!pr.quiet && specdec_model_load(in, &mp, &src, &err) == SPECDEC_OK) {
        specdec_model_info mi;
        specdec_model_get_info(src, &mi);
        const int have[5] = {mi.hidden_size, mi.intermediate_size, mi.n_layers, mi.n_heads, mi.n_kv_heads};
        int want[5];
        for (int j = 0; j < 5; j++) want[j] = *fields[j] ? *fields[j] : have[j];
        fprintf(stderr, "inflating %s -> %s%s%s: hidden %d -> %d, intermediate %d -> %d, layers %d -> %d, heads %d/%d -> %d/%d, "
                "%s fill\n", in, out, shape ? " as " : "", shape ? shape : "", have[0], want[0], have[1], want[1], have[2], want[2],
                have[3], have[4], want[3], want[4], ip.fill_zero ? "zero" : "random");
    }
    specdec_model_free(src);
    const double t0 = now_s();
    if (specdec_inflate(in, out, &ip, &err)) return cli_fail_err(&err);
    if (!pr.quiet) fprintf(stderr, "wrote %s in %.1f s\n", out, now_s() - t0);
    return 0;
}
