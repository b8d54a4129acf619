/* usage.c: the usage text of every command, printed by `specdec --help`, by `specdec CMD --help`
 * (stdout, exit 0) and after a usage error (stderr). */
#include "cli.h"
#include <string.h>

typedef struct { const char *cmd, *text; } cmd_usage;

static const cmd_usage USAGE[] = {
    {"run",
     "  run       [-m DIR] (-p TEXT | -f FILE | -f -) [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
     "            [--seed S|-1] [--threads N] [--ctx N] [--batch N] [--kv-dtype f32|bf16|f16|default] [--stop S]...\n"
     "            [--ignore-eos]\n"
     "            [--backend auto|cpu|cuda] [--device N] [--precision f32|int8|default]\n"
     "            [--tp N] [--tp-reduce gather|ring|none]\n"
     "            [--draft mtp|mtp+ngram[:M]|model:DIR|ngram[:N]] [--block-size K|auto] [--sampling seeded|rejection]\n"
     "            [--draft-vocab FILE[:N]|none] [--drafter-weights stored|q4|default] [--allow-inexact]\n"
     "            [--stats-json FILE] [--profile-drafter] [--ids-out FILE] [--verify-rows N] [--probe-draws N]\n"
     "            (--drafter-weights: the MTP drafter's dense matrices as stored or as 4-bit codes made at load;\n"
     "             default 4-bit at precision int8 on the CPU, and on CUDA for drafters of 100 M parameters\n"
     "             or more; greedy and seeded output never changes)\n"
     "            (-m: default the embedded model models/qwen3-kernel; --seed -1: a fresh random seed,\n"
     "             printed in the stats; sampling defaults come from DIR/generation_config.json when present)\n"},
    {"bench",
     "  bench     [-m DIR] --draft mtp|mtp+ngram[:M]|model:DIR|ngram --prompts FILE.jsonl [-n N] [--block-size K|auto]\n"
     "            [--repeats R] [--threads N] [--temp T] [--seed S] [--sampling seeded|rejection] [--out FILE.md]\n"
     "            [--draft-vocab FILE[:N]|none]... [--drafter-weights stored|q4|default] [--profile-drafter]\n"
     "            [--max-prompts N] [--ignore-eos]\n"
     "            [--backend B] [--device N] [--ctx N] [--batch N] [--kv-dtype f32|bf16|f16|default]\n"
     "            [--precision f32|int8|default] [--reference] [--tp N]\n"
     "            (the defaults are run's: --block-size auto, seeded sampling, the shipped draft vocabulary)\n"},
    {"info",
     "  info      [-m DIR] [--backend auto|cpu|cuda] [--device N] [--threads N] [--tp N]\n"},
    {"tokenize",
     "  tokenize  [-m DIR] (-p TEXT | -f FILE | -f -) [--decode]   (--decode: the text is a JSON array of ids)\n"},
    {"score",
     "  score     [-m DIR] (-p TEXT | -f FILE | -f -) --ids JSON|@FILE [--top K] [--threads N] [--backend B]\n"
     "            [--device N] [--ctx N] [--batch N] [--kv-dtype f32|bf16|f16|default] [--precision f32|int8|default]\n"
     "            [--reference] [--tp N]\n"
     "            (per continuation token: its logit, rank and the top K, as JSON lines)\n"},
    {"quantize",
     "  quantize  IN OUT [--bits 4|8] [--group-size 32|64|128] [--shard-mb N] [--quantize-mtp] [--quiet]\n"},
    {"inflate",
     "  inflate   IN OUT --shape qwen3-1.7b|qwen3-8b|qwen3-32b [--hidden N] [--intermediate N] [--layers N]\n"
     "            [--heads N] [--kv-heads N] [--tied|--untied] [--fill random|zero] [--seed S]\n"
     "            [--bits 4|8 --group-size G] [--quantize-mtp] [--shard-mb N (0: one file)] [--threads N] [--quiet]\n"
     "            (the same function at a bigger shape: zero-padded heads and widths, identity layers)\n"},
#ifdef SPECDEC_HAVE_SERVER
    {"serve",
     "  serve     [-m DIR] [--draft ...] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--threads N]\n"
     "            [--queue N] [--max-body BYTES] [--timeout-s S] [--tp N]   (OpenAI-compatible HTTP API; serve --help)\n"},
#endif
};

void cli_usage_all(FILE *f) {
    fprintf(f, "specdec %s\nusage: specdec <command> [options]   (specdec <command> --help; specdec --version)\n",
            specdec_version());
    for (size_t i = 0; i < sizeof USAGE / sizeof *USAGE; i++) fputs(USAGE[i].text, f);
}

int cli_usage(const char *cmd) {
    for (size_t i = 0; i < sizeof USAGE / sizeof *USAGE; i++)
        if (!strcmp(USAGE[i].cmd, cmd)) {
            printf("usage:\n%s", USAGE[i].text);
            return 0;
        }
    cli_usage_all(stdout);
    return 0;
}

bool cli_is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }
