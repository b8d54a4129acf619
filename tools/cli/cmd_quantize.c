/* cmd_quantize.c: `specdec quantize IN OUT`: write an MLX-layout affine-quantized copy of a model
 * directory, reporting the error each tensor picked up. */
#include "cli.h"
#include <string.h>

static void report(const char *name, double rel_rms, double max_abs, void *user) {
    if (*(bool *)user) return;
    fprintf(stderr, "  %-56s rel_rms %.3e  max_abs %.3e\n", name, rel_rms, max_abs);
}

int cmd_quantize(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    bool quiet = false;
    specdec_quantize_params qp = specdec_quantize_default_params();
    long v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) return cli_usage("quantize");
        else if (!strcmp(a, "--bits")) { if (cli_int(a, val, 4, 8, &v)) return 1; qp.bits = (int)v; i++; }
        else if (!strcmp(a, "--group-size")) { if (cli_int(a, val, 32, 128, &v)) return 1; qp.group_size = (int)v; i++; }
        else if (!strcmp(a, "--shard-mb")) { if (cli_int(a, val, 1, 1 << 20, &v)) return 1; qp.max_shard_bytes = (uint64_t)v << 20; i++; }
        else if (!strcmp(a, "--quantize-mtp")) qp.quantize_mtp = true;
        else if (!strcmp(a, "--quiet")) quiet = true;
        else if (a[0] == '-') return cli_fail("quantize: unknown option '%s'", a);
        else if (!in) in = a;
        else if (!out) out = a;
        else return cli_fail("quantize: unexpected argument '%s'", a);
    }
    if (!in || !out) return cli_fail("quantize needs IN and OUT directories");
    if (qp.bits != 4 && qp.bits != 8) return cli_fail("--bits must be 4 or 8");
    if (qp.group_size != 32 && qp.group_size != 64 && qp.group_size != 128)
        return cli_fail("--group-size must be 32, 64 or 128");
    qp.report = report;
    qp.report_user = &quiet;
    specdec_err err = {0};
    fprintf(stderr, "quantizing %s -> %s (%d-bit, group %d)\n", in, out, qp.bits, qp.group_size);
    if (specdec_quantize(in, out, &qp, &err)) return cli_fail_err(&err);
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
