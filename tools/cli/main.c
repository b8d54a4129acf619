/* main.c: the specdec command-line tool; dispatches to one subcommand per file. */
#include "cli.h"
#include <string.h>

static void usage(FILE *f) {
    fputs("usage: specdec <command> [options]\n"
          "  run       -m DIR -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
          "            [--threads N] [--ctx N] [--kv-dtype f32|bf16|f16] [--stop S]... [--ignore-eos]\n"
          "            [--backend auto|cpu|cuda] [--device N] [--tp N] [--tp-reduce gather|ring|none]\n"
          "            [--draft mtp|model:DIR|ngram] [--block-size K|auto] [--sampling rejection|seeded]\n"
          "            [--allow-inexact] [--stats-json FILE] [--profile-drafter] [--ids-out FILE]\n"
          "  bench     -m DIR --draft mtp|model:DIR|ngram --prompts FILE.jsonl [-n N] [--block-size K|auto]\n"
          "            [--repeats R] [--threads N] [--temp T] [--seed S] [--sampling rejection|seeded] [--out FILE.md]\n"
          "            [--profile-drafter] [--max-prompts N] [--ignore-eos] [--tp N]\n"
          "  info      -m DIR [--backend auto|cpu|cuda] [--device N] [--threads N] [--tp N]\n"
          "  tokenize  -m DIR -p TEXT [--decode]   (--decode: -p is a JSON array of ids)\n"
          "  score     -m DIR -p TEXT --ids JSON|@FILE [--top K] [--threads N] [--backend B] [--tp N]   (per continuation token:\n"
          "            its logit, rank and the top K, as JSON lines)\n"
          "  quantize  IN OUT [--bits 4|8] [--group-size 32|64|128] [--shard-mb N] [--quiet]\n"
          "  inflate   IN OUT --shape qwen3-1.7b|qwen3-8b|qwen3-32b [--hidden N] [--intermediate N] [--layers N]\n"
          "            [--heads N] [--kv-heads N] [--tied|--untied] [--fill random|zero] [--seed S]\n"
          "            [--bits 4|8 --group-size G] [--quantize-mtp] [--shard-mb N (0: one file)] [--threads N] [--quiet]\n"
          "            (the same function at a bigger shape: zero-padded heads and widths, identity layers)\n", f);
#ifdef SPECDEC_HAVE_SERVER
    fputs("  serve     -m DIR [--draft ...] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--threads N]\n"
          "            [--queue N] [--max-body BYTES] [--timeout-s S] [--tp N]   (OpenAI-compatible HTTP API)\n", f);
#endif
}

/* The library never prints: its warnings come here and go to stderr. */
static void log_stderr(specdec_log_level level, const char *msg, void *user) {
    (void)user;
    if (level >= SPECDEC_LOG_WARN) fprintf(stderr, "specdec: %s: %s\n", specdec_log_level_name(level), msg);
}

int main(int argc, char **argv) {
    specdec_log_set(log_stderr, NULL);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "inflate")) return cmd_inflate(argc - 1, argv + 1);
    if (!strcmp(cmd, "score")) return cmd_score(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
#ifdef SPECDEC_HAVE_SERVER
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
#endif
    fprintf(stderr, "specdec: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
