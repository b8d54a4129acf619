/* main.c: the specdec command-line tool; dispatches to one subcommand per file. */
#include "cli.h"
#include <string.h>

/* The library never prints: its warnings come here and go to stderr. */
static void log_stderr(specdec_log_level level, const char *msg, void *user) {
    (void)user;
    if (level >= SPECDEC_LOG_WARN) fprintf(stderr, "specdec: %s: %s\n", specdec_log_level_name(level), msg);
}

int main(int argc, char **argv) {
    specdec_log_set(log_stderr, NULL);
    if (argc < 2 || cli_is_help(argv[1])) {
        cli_usage_all(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("specdec %s\n", specdec_version());
        return 0;
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
    cli_usage_all(stderr);
    return 2;
}
