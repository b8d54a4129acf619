/* replay_main.c: a main for a fuzz target without libFuzzer. Each argument is an input file or a
 * directory of input files (a seed corpus, a folder of regression inputs); every file is fed to
 * LLVMFuzzerTestOneInput once, in name order. A directory that does not exist counts as empty
 * (a parser may have no regression inputs yet). Exit status 0 when every input ran; a property
 * that fails aborts, and a sanitizer build reports memory errors, so ctest sees a failure. */
#include "fuzz.h"
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: %s: cannot open: %s\n", path, strerror(errno)); return -1; }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) { uint8_t *nb = realloc(buf, cap *= 2); if (!nb) { free(buf); buf = NULL; } else buf = nb; }
    }
    fclose(f);
    if (!buf) { fprintf(stderr, "replay: %s: out of memory\n", path); return -1; }
    /* an exact-size copy, so a read past the input's end is caught as libFuzzer would catch it */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) { free(buf); return -1; }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int ran = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) continue;
        if (!S_ISDIR(sb.st_mode)) {
            if (run_file(argv[i]) != 0) return 1;
            ran++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) { fprintf(stderr, "replay: %s: cannot open directory\n", argv[i]); return 1; }
        char **names = NULL;
        size_t nn = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            char **nb = realloc(names, (nn + 1) * sizeof *names);
            if (!nb) { closedir(d); return 1; }
            names = nb;
            size_t l = strlen(argv[i]) + strlen(de->d_name) + 2;
            if (!(names[nn] = malloc(l))) { closedir(d); return 1; }
            snprintf(names[nn++], l, "%s/%s", argv[i], de->d_name);
        }
        closedir(d);
        qsort(names, nn, sizeof *names, cmp_str);
        for (size_t k = 0; k < nn; k++) {
            int rc = run_file(names[k]);
            free(names[k]);
            if (rc != 0) return 1;
            ran++;
        }
        free(names);
    }
    printf("replay: %d inputs ran\n", ran);
    if (!ran) fprintf(stderr, "replay: no inputs found (the seed corpus is missing)\n");
    return ran ? 0 : 1;
}
