/* cli.h: shared helpers of the specdec command-line tool (argument parsing, model loading
 * with progress, error printing). Each subcommand lives in its own cmd_*.c file. */
#ifndef SD_CLI_H
#define SD_CLI_H
#include "specdec.h"
#include <stdio.h>

int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_inflate(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Print "specdec: <msg>" to stderr and return 1 (the exit status for failures). */
int cli_fail_err(const specdec_err *err);
int cli_fail(const char *fmt, ...);

/* Value parsing that rejects junk ("12x"), naming the option. Return 0 on success. */
int cli_int(const char *opt, const char *s, long lo, long hi, long *out);
int cli_float(const char *opt, const char *s, double lo, double hi, double *out);

/* Load a model showing a progress bar on stderr when it is a terminal. */
specdec_status cli_load_model(const char *dir, bool load_mtp, specdec_model **m, specdec_err *err);
/* specdec_ctx_init with the upload's progress shown as the load's is (a backend that copies the weights). */
specdec_status cli_ctx_init(const specdec_model *m, const specdec_ctx_params *cp, specdec_ctx **ctx, specdec_err *err);
/* s as one of the n names into *out (the matching value); else an error naming opt and the choices
 * (or that a value is missing), returning 1. */
int cli_choice(const char *opt, const char *s, const char *const *names, const int *values, int n, int *out);
int cli_parse_kv_dtype(const char *s, specdec_kv_dtype *out);
/* the --kv-dtype word of d ("?" outside the enum) */
const char *cli_kv_dtype_name(specdec_kv_dtype d);
/* --sampling seeded|rejection */
int cli_parse_sampling(const char *s, specdec_spec_sampling *out);
/* The context options of every command that runs a model (--threads, --backend, --device, --ctx,
 * --kv-dtype, --precision, --drafter-weights, --reference, --tp, --tp-reduce) into *cp. Returns 0 when `a` is none of them, 1 when it was taken (*i
 * then indexes its value, if it has one), -1 after printing what is wrong with it. */
int cli_ctx_option(const char *a, const char *val, specdec_ctx_params *cp, int *i);
/* -m DIR, -p TEXT, -f FILE|- into *dir, *prompt, *file (a NULL pointer: the command does not take
 * that option). Returns as cli_ctx_option. */
int cli_input_option(const char *a, const char *val, const char **dir, const char **prompt, const char **file, int *i);
/* What the commands that run one prompt (run, score) take alike: the context options, the input
 * options and --help (the usage of cmd printed). Returns 0 when `a` is none of them, 1 when it was
 * taken, -1 after printing what is wrong with it, 2 after printing the usage. */
int cli_prompt_cmd_option(const char *cmd, const char *a, const char *val, specdec_ctx_params *cp, const char **dir,
                          const char **prompt, const char **file, int *i);
/* --precision f32|int8|default */
int cli_parse_precision(const char *s, specdec_precision *out);
/* --drafter-weights stored|q4|default */
int cli_parse_drafter_weights(const char *s, specdec_drafter_weights *out);
/* Whether a --draft value uses the MTP module ("mtp", "mtp+ngram[:M]"): its weights are loaded and
 * the reduced draft vocabulary applies. */
bool cli_draft_mtp(const char *draft);
/* Tensor parallelism, shared by every command that makes a context: --tp N and
 * --tp-reduce gather|ring|none into cp. cli_tp_opt returns 0 when consumed, 1 on an error. */
bool cli_is_tp_opt(const char *a);
int cli_tp_opt(const char *a, const char *val, specdec_ctx_params *cp);
/* One "[tp] ..." line on stderr with the all-reduce counters (nothing without tensor parallelism). */
void cli_tp_report(const specdec_ctx *c);
/* --draft-vocab FILE[:N]: attach the first N ids of a draft vocabulary file (no ":N": its default_n, else all). */
specdec_status cli_draft_vocab(specdec_drafter *dr, const char *spec, specdec_err *err);
/* run / serve: DIR/draft_vocab.json for an MTP drafter unless spec is a FILE[:N] or "none". */
specdec_status cli_draft_vocab_auto(specdec_drafter *dr, const char *model_dir, const char *spec, char *used,
                                    size_t cap, specdec_err *err);

/* Sampling options not given on the command line (given[SPECDEC_GEN_*] false) take the model's
 * generation_config.json defaults. Always SPECDEC_OK. */
specdec_status cli_gen_defaults(const specdec_model *m, const bool given[SPECDEC_GEN_N_KEYS], specdec_sampling_params *s);

/* Usage: every command's (stdout, returns 0: `specdec CMD --help`), all of them (to f). */
int cli_usage(const char *cmd);
void cli_usage_all(FILE *f);
bool cli_is_help(const char *arg);

/* -f FILE / -f -: the whole file (stdin) as the prompt, bytes as they are; *out malloc'ed. */
int cli_read_prompt(const char *path, char **out);
/* --seed: an integer in [0, 2^64), or -1 for a fresh random seed (*fresh set); any other negative
 * or junk value is an error naming the option. */
int cli_seed(const char *opt, const char *s, uint64_t *seed, bool *fresh);
/* An output file option (--stats-json, --ids-out): fail now, before any loading, when PATH cannot
 * be written. Nothing is left behind. */
int cli_check_out(const char *opt, const char *path);
/* -m: `given`, else the embedded model models/qwen3-kernel found relative to the executable, else
 * $SPECDEC_MODEL; when none is found, says every place it looked and returns 1. */
int cli_model_dir(const char *given, char *out, size_t cap);

#endif
