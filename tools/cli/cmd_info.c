/* cmd_info.c: `specdec info`: architecture, parameters, dtypes and decode bytes of a model. */
#include "cli.h"
#include <string.h>

int cmd_info(int argc, char **argv) {
    const char *dir_opt = NULL, *backend = "auto";
    char dir[4096];
    long threads = 0, device = 0, tp = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int taken = cli_input_option(a, val, &dir_opt, NULL, NULL, &i);
        if (taken) { if (taken < 0) return 1; continue; }
        if (cli_is_help(a)) return cli_usage("info");
        else if (!strcmp(a, "--backend")) { if (!val) return cli_fail("--backend needs a name"); backend = val; i++; }
        else if (!strcmp(a, "--threads")) { if (cli_int(a, val, 1, 1024, &threads)) return 1; i++; }
        else if (!strcmp(a, "--device")) { if (cli_int(a, val, 0, 64, &device)) return 1; i++; }
        else if (!strcmp(a, "--tp")) { if (cli_int(a, val, 1, 8, &tp)) return 1; i++; }
        else return cli_fail("info: unknown option '%s'", a);
    }
    if (cli_model_dir(dir_opt, dir, sizeof dir)) return 1;
    specdec_err err = {0};
    if (specdec_cpu_kernels_check(&err)) return cli_fail_err(&err);
    const char *kernels = specdec_cpu_kernels();
    char be[256];
    if (specdec_backend_describe(backend, (int)threads, (int)device, be, sizeof be, &err)) return cli_fail_err(&err);
    specdec_model *m = NULL;
    if (cli_load_model(dir, true, &m, &err)) return cli_fail_err(&err);
    char plan[1024] = "";   /* a plan that does not split is refused before anything is printed */
    if (tp && specdec_tp_describe(m, (int)tp, plan, sizeof plan, &err)) { specdec_model_free(m); return cli_fail_err(&err); }
    specdec_model_info in;
    specdec_model_get_info(m, &in);
    printf("model_type:        %s\n", in.model_type);
    printf("layers:            %d\n", in.n_layers);
    printf("hidden / mlp:      %d / %d\n", in.hidden_size, in.intermediate_size);
    printf("heads (q / kv):    %d / %d, head_dim %d\n", in.n_heads, in.n_kv_heads, in.head_dim);
    printf("vocab:             %d (%s embeddings)\n", in.vocab_size, in.tied_embeddings ? "tied" : "untied");
    printf("context:           %d, rope_theta %g, rms_norm_eps %g\n", in.max_position_embeddings, in.rope_theta, in.rms_norm_eps);
    printf("parameters:        %llu (%.1f M)\n", (unsigned long long)in.n_params, in.n_params / 1e6);
    if (in.quant_bits)
        printf("weights:           affine %d-bit, group %d, scales %s\n", in.quant_bits, in.quant_group, specdec_dtype_name(in.weight_dtype));
    else
        printf("weights:           %s\n", specdec_dtype_name(in.weight_dtype));
    printf("weight bytes:      %llu (%.2f MiB)\n", (unsigned long long)in.weight_bytes, in.weight_bytes / 1048576.0);
    printf("bytes/decode step: %llu (%.2f MiB)\n", (unsigned long long)in.decode_bytes_per_token, in.decode_bytes_per_token / 1048576.0);
    if (in.mtp_layers)
        printf("mtp drafter:       %d layer(s), %llu parameters\n", in.mtp_layers, (unsigned long long)in.n_params_mtp);
    else
        printf("mtp drafter:       none\n");
    printf("backend:           %s (built in: %s)\n", be, specdec_backends());
    char why[768];
    specdec_cpu_kernels_why(why, sizeof why);
    if (tp) printf("tensor parallel:   %s\n", plan);
    printf("cpu kernels:       %s (SPECDEC_SIMD overrides)\n", kernels);
    printf("kernels chosen:    %s\n", why);
    specdec_generation_config g;
    specdec_model_generation_config(m, &g);
    printf("eos ids:          ");
    for (int i = 0; i < in.n_eos; i++) printf(" %d", in.eos_ids[i]);
    if (g.n_eos) {
        printf(" (config.json) +");
        for (int i = 0; i < g.n_eos; i++) printf(" %d", g.eos_ids[i]);
        printf(" (generation_config.json)");
    }
    printf("\n");
    /* each sampling default and where it came from; run's options override any of them */
    const char *lib = "library default", *file = g.present ? "generation_config.json" : lib;
    printf("sampling defaults: temperature %g (%s%s), top_k %d (%s), top_p %g (%s), min_p %g (%s)\n",
           g.sampling.temperature, g.from_file[SPECDEC_GEN_TEMPERATURE] ? file : lib,
           g.greedy_by_do_sample ? ": do_sample false, greedy" : "",
           g.sampling.top_k, g.from_file[SPECDEC_GEN_TOP_K] ? file : lib,
           g.sampling.top_p, g.from_file[SPECDEC_GEN_TOP_P] ? file : lib,
           g.sampling.min_p, g.from_file[SPECDEC_GEN_MIN_P] ? file : lib);
    specdec_model_free(m);
    return 0;
}
