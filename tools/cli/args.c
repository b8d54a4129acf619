/* args.c: option values shared by the commands: the prompt from a file or stdin (-f), the seed
 * (--seed -1: a fresh random one), the default model directory (-m absent), and output paths
 * checked before any work is done (--stats-json, --ids-out). */
#include "cli.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROMPT_MAX (256u << 20)   /* far past any context window; a bound on a runaway pipe */

int cli_read_prompt(const char *path, char **out) {
    if (!path) return cli_fail("-f needs a file (or - for stdin)");
    bool in = !strcmp(path, "-");
    FILE *f = in ? stdin : fopen(path, "rb");
    if (!f) return cli_fail("-f: cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        if (n + 1 >= cap) {
            if (cap >= PROMPT_MAX) { rc = cli_fail("-f: %s is larger than %u MiB", in ? "stdin" : path, PROMPT_MAX >> 20); break; }
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb; cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) rc = cli_fail("-f: read error on %s", in ? "stdin" : path);
            break;
        }
    }
    if (!in) fclose(f);
    if (!buf) return cli_fail("-f: out of memory");
    if (rc) { free(buf); return rc; }
    buf[n] = 0;
    /* the prompt travels as a C string: a NUL inside would cut it silently */
    if (memchr(buf, 0, n)) {
        size_t at = (size_t)((char *)memchr(buf, 0, n) - buf);
        free(buf);
        return cli_fail("-f: %s holds a NUL byte at offset %zu (a prompt is text)", in ? "stdin" : path, at);
    }
    *out = buf;
    return 0;
}

int cli_seed(const char *opt, const char *s, uint64_t *seed, bool *fresh) {
    if (!s) return cli_fail("%s needs a value", opt);
    *fresh = false;
    if (!strcmp(s, "-1")) {   /* llama.cpp's convention: a fresh seed, reported with the stats */
        uint64_t v = 0;
        if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) return cli_fail("%s -1: no random seed from the system", opt);
        *seed = v >> 1;   /* < 2^63: every JSON reader holds it as an integer */
        *fresh = true;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    /* strtoull accepts "-5" (as 2^64 - 5) and leading blanks: refuse both */
    if (s[0] < '0' || s[0] > '9' || errno || *end || end == s)
        return cli_fail("%s: '%s' is not a seed (an integer in [0, %llu], or -1 for a fresh random seed)", opt, s, ULLONG_MAX);
    *seed = v;
    return 0;
}

int cli_check_out(const char *opt, const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return cli_fail("%s: %s is a directory", opt, path);
        if (access(path, W_OK) != 0) return cli_fail("%s: cannot write %s: %s", opt, path, strerror(errno));
        return 0;
    }
    /* absent: create it now (empty) so a bad directory is found before the model loads */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return cli_fail("%s: cannot create %s: %s", opt, path, strerror(errno));
    close(fd);
    unlink(path);
    return 0;
}

static bool is_model_dir(const char *d) {
    char p[4 * PATH_MAX];
    snprintf(p, sizeof p, "%s/config.json", d);
    return access(p, R_OK) == 0;
}

int cli_model_dir(const char *given, char *out, size_t cap) {
    if (given) { snprintf(out, cap, "%s", given); return 0; }
    /* the embedded model, found from the executable wherever it is run from: a build tree
     * (<repo>/build/specdec), an install (<prefix>/bin + <prefix>/share/specdec), then $SPECDEC_MODEL */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char tried[3][PATH_MAX + 64];
    const char *why[3] = {"next to the executable", "installed beside the executable", "$SPECDEC_MODEL"};
    int nt = 0;
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(tried[nt++], sizeof tried[0], "%s/../models/qwen3-kernel", exe);
        snprintf(tried[nt++], sizeof tried[0], "%s/../share/specdec/models/qwen3-kernel", exe);
    }
    const char *env = getenv("SPECDEC_MODEL");
    if (n <= 0) why[0] = why[2];
    if (env && *env) snprintf(tried[nt++], sizeof tried[0], "%s", env);
    for (int i = 0; i < nt; i++)
        if (is_model_dir(tried[i])) {
            char real[PATH_MAX];
            snprintf(out, cap, "%s", realpath(tried[i], real) ? real : tried[i]);
            return 0;
        }
    fprintf(stderr, "specdec: error: no -m DIR given and the embedded model models/qwen3-kernel was not found; looked in:\n");
    for (int i = 0; i < nt; i++) fprintf(stderr, "  %s (%s)\n", tried[i], why[i]);
    if (!env || !*env) fprintf(stderr, "  $SPECDEC_MODEL (not set)\n");
    fprintf(stderr, "give -m DIR: a directory with config.json, *.safetensors and tokenizer.json\n");
    return 1;
}
