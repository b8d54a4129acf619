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
int cli_parse_kv_dtype(const char *s, specdec_kv_dtype *out);
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

#endif
