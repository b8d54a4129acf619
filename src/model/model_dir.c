/* model_dir.c: tell a user who points -m at a GGUF file (llama.cpp's format) or at a directory of
 * them what specdec reads instead, before a loader fails on a missing config.json. */
#include "model/model_dir.h"
#include "util/err.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WANT "a model directory holding config.json, *.safetensors and tokenizer.json (the Hugging Face layout)"

static bool has_gguf_magic(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char m[4] = {0};
    size_t n = fread(m, 1, 4, f);
    fclose(f);
    return n == 4 && !memcmp(m, "GGUF", 4);
}

specdec_status sd_model_dir_check(const char *dir, specdec_err *err) {
    struct stat sb;
    if (stat(dir, &sb) != 0) return SPECDEC_OK;
    if (!S_ISDIR(sb.st_mode)) {
        if (has_gguf_magic(dir))
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s is a GGUF file: specdec does not read GGUF; it reads " WANT, dir);
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "%s is a file, not a model directory: specdec reads " WANT, dir);
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (access(p, F_OK) == 0) return SPECDEC_OK;
    DIR *d = opendir(dir);
    if (!d) return SPECDEC_OK;
    specdec_status st = SPECDEC_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf")) {
            st = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s holds %s, a GGUF file, and no config.json: specdec does not read GGUF; it reads " WANT,
                         dir, e->d_name);
            break;
        }
    }
    closedir(d);
    return st;
}
