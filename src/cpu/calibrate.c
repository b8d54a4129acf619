/* calibrate.c: which SIMD level is fastest on the running CPU, by measurement. No level may be
 * assumed best: AVX-512 was the fastest on the Zen 4 class machine it was written on and 1.7x
 * slower than AVX2 on a Zen 5 (docs/benchmarks/cpu-int8-vs-llamacpp-*.md), and users' machines
 * differ more. So on first use each level this CPU runs times its quantized matmul (4-bit, group
 * 64, bf16 scales: the shape class of every Qwen3 linear and the LM head) at one token, f32 and
 * int8 activations separately, a few ms in all, samples interleaved across levels so a busy
 * machine slows them alike; the fastest (minimum over the samples) wins, per precision. The AVX2
 * level's int8 kernel has two forms where the CPU has AVX-VNNI (vpdpbusd, or maddubs as without
 * it; the same bits): both are timed, and the faster is the level's (sd_i8_avx2_prefer_vnni).
 * Where the CPU and OS give AMX, the AVX-512 level's int8 matmul of 8 tokens is timed with and
 * without it (ops_i8_amx.c, the same bits), and AMX is used where it was faster
 * (sd_i8_avx512_prefer_amx; SPECDEC_AMX=0 / 1 overrides the choice).
 * The result is cached in $XDG_CACHE_HOME/specdec/cpu-levels (else ~/.cache/specdec/) under a
 * key of CPU model + ISA flags + specdec version + kernel generation; a file that does not parse, has another key or
 * names a level this machine cannot run is ignored and rewritten. SPECDEC_CALIBRATE=0 skips the
 * measurement (the static order avx512 > avx2 > neon), =force ignores the cache. SPECDEC_SIMD
 * still overrides everything (ops_fast.c). */
#include "cpu/calibrate.h"
#include "cpu/ops.h"
#include "cpu/ops_i8.h"
#include "util/dtype.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static sd_calib g_cal;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The kernels' generation, part of the cache key: a change that moves the levels' relative speed
 * (the AVX-512 int8 rows of 2026-12-02 ran 2 to 3x faster than the ones cached before them; kernels-3:
 * the AVX2 int8 rows about 1.5x faster, a CPUID per call gone; kernels-4: the packed-tile int8
 * recipe, 1.4 to 2.8x faster at every level; kernels-5: the AVX-512 level's AMX form) must
 * not be judged by a measurement of the old kernels under an unchanged version number. */
#define SD_CALIB_KERNELS "kernels-5"

static const char *const k_levels[] = {"avx512", "avx2", "neon"};
enum { NLEV = 3, CAL_ROUNDS = 5, CAL_ROWS = 2048, CAL_COLS = 384, CAL_T8 = 8 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "model name" of /proc/cpuinfo (x86) or the implementer/part pair (Arm), else "unknown". */
static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512], impl[64] = "", part[64] = "";
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c) continue;
        char *v = c + 1;
        while (*v == ' ' || *v == '\t') v++;
        v[strcspn(v, "\n")] = 0;
        if (!strncmp(line, "model name", 10)) { snprintf(out, n, "%s", v); break; }
        if (!strncmp(line, "CPU implementer", 15)) snprintf(impl, sizeof impl, "%s", v);
        if (!strncmp(line, "CPU part", 8)) snprintf(part, sizeof part, "%s", v);
    }
    fclose(f);
    if (!strcmp(out, "unknown") && (impl[0] || part[0])) snprintf(out, n, "arm %s/%s", impl, part);
}

static void cpu_flags(char *out, size_t n) {
    out[0] = 0;
#if defined(__x86_64__) || defined(_M_X64)
    snprintf(out, n, "%s%s%s%s%s%s%s", __builtin_cpu_supports("avx2") ? "avx2," : "",
             __builtin_cpu_supports("fma") ? "fma," : "", __builtin_cpu_supports("avx512f") ? "avx512f," : "",
             __builtin_cpu_supports("avx512bw") ? "avx512bw," : "", __builtin_cpu_supports("avx512vl") ? "avx512vl," : "",
             __builtin_cpu_supports("avx512vnni") ? "avx512vnni," : "", __builtin_cpu_supports("avxvnni") ? "avxvnni," : "");
#else
    snprintf(out, n, "%s", sd_i8_rows_neon() ? "neon" : "");
#endif
}

static void cache_path(char *out, size_t n) {
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    out[0] = 0;
    if (x && *x) snprintf(out, n, "%s/specdec/cpu-levels", x);
    else if (h && *h) snprintf(out, n, "%s/.cache/specdec/cpu-levels", h);
}

static int level_ix(const char *name) {
    for (int i = 0; i < NLEV; i++)
        if (!strcmp(name, k_levels[i])) return i;
    return -1;
}

static const char *const k_forms[] = {"vnni", "maddubs", "amx", "-"};

static const char *form_name(const char *s) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, k_forms[i])) return k_forms[i];
    return NULL;
}

/* The int8 forms now chosen, in force for this process; SPECDEC_AMX=0 / 1 overrides the AMX choice
 * (benchmarks, and a user who wants the other form; 1 does nothing where there is no AMX). */
static void apply_form(void) {
    sd_i8_avx2_prefer_vnni(strcmp(g_cal.avx2_i8_form, "maddubs") != 0);
    const char *e = getenv("SPECDEC_AMX");
    sd_i8_avx512_prefer_amx(e && (!strcmp(e, "0") || !strcmp(e, "1")) ? e[0] == '1' : !strcmp(g_cal.avx512_i8_form, "amx"));
}

/* Cache file: "key <key>\nf32 <level>\nint8 <level>\ntimes <text>\navx2i8 <form>\navx512i8 <form>\n".
 * 1 when it was read and valid (a form this CPU cannot run, VNNI without AVX-VNNI or AMX without
 * AMX, is not). */
static int cache_read(const char *path, const char *key) {
    FILE *f = path[0] ? fopen(path, "r") : NULL;
    if (!f) return 0;
    char l1[600], l2[64], l3[64], l4[sizeof g_cal.times], l5[64], l6[64];
    int ok = fgets(l1, sizeof l1, f) && fgets(l2, sizeof l2, f) && fgets(l3, sizeof l3, f) && fgets(l4, sizeof l4, f) &&
             fgets(l5, sizeof l5, f) && fgets(l6, sizeof l6, f);
    fclose(f);
    if (!ok) return 0;
    l1[strcspn(l1, "\n")] = l2[strcspn(l2, "\n")] = l3[strcspn(l3, "\n")] = l4[strcspn(l4, "\n")] = 0;
    l5[strcspn(l5, "\n")] = l6[strcspn(l6, "\n")] = 0;
    if (strncmp(l1, "key ", 4) || strcmp(l1 + 4, key) || strncmp(l2, "f32 ", 4) || strncmp(l3, "int8 ", 5) ||
        strncmp(l4, "times ", 6) || strncmp(l5, "avx2i8 ", 7) || strncmp(l6, "avx512i8 ", 9))
        return 0;
    int a = level_ix(l2 + 4), b = level_ix(l3 + 5);
    const char *form = form_name(l5 + 7), *form512 = form_name(l6 + 9);
    if (a < 0 || b < 0 || !sd_ops_fast_level(k_levels[a]) || !sd_ops_fast_level(k_levels[b]) || !form || !form512) return 0;
    if (!strcmp(form, "vnni") && !sd_i8_rows_avx2_form(1)) return 0;
    if (!strcmp(form512, "amx") && !sd_i8_rows_amx()) return 0;
    g_cal.f32_level = k_levels[a];
    g_cal.i8_level = k_levels[b];
    g_cal.avx2_i8_form = form;
    g_cal.avx512_i8_form = form512;
    snprintf(g_cal.times, sizeof g_cal.times, "%s", l4 + 6);
    return 1;
}

/* Best effort: a cache that cannot be written only means calibrating again next time. The file is
 * written whole under a temporary name and renamed, so a reader never sees half of it. */
static void cache_write(const char *path, const char *key) {
    if (!path[0]) return;
    char dir[sizeof g_cal.where], tmp[sizeof g_cal.where + 32];
    snprintf(dir, sizeof dir, "%s", path);
    char *sl = strrchr(dir, '/');
    if (!sl) return;
    *sl = 0;
    char *parent = strrchr(dir, '/');
    if (parent) { *parent = 0; mkdir(dir, 0755); *parent = '/'; }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    int ok = fprintf(f, "key %s\nf32 %s\nint8 %s\ntimes %s\navx2i8 %s\navx512i8 %s\n", key, g_cal.f32_level,
                     g_cal.i8_level, g_cal.times, g_cal.avx2_i8_form, g_cal.avx512_i8_form) > 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* Minimum seconds per call of each level's f32 and int8 matmul (0: level not run here); form[0 / 1]:
 * the AVX2 level's int8 matmul in the VNNI / maddubs form (0 when there are not two forms; then
 * best[avx2][1] is its one form's); amx[0 / 1]: the AVX-512 level's int8 matmul of 8 tokens with
 * VNNI / AMX (0 where there is no AMX). */
static void measure(double best[NLEV][2], double form[2], double amx[2]) {
    sd_mat W = {.rows = CAL_ROWS, .cols = CAL_COLS, .dtype = SPECDEC_DTYPE_BF16, .bits = 4, .group = 64};
    size_t nw = (size_t)CAL_ROWS * CAL_COLS / 8, ng = (size_t)CAL_ROWS * CAL_COLS / 64;
    uint32_t *w = malloc(nw * 4);
    uint16_t *sb = malloc(ng * 4);
    float *x = malloc(sizeof(float) * CAL_COLS * CAL_T8), *y = malloc(sizeof(float) * CAL_ROWS * CAL_T8);
    memset(best, 0, sizeof(double) * NLEV * 2);
    form[0] = form[1] = amx[0] = amx[1] = 0;
    const int two = sd_ops_fast_level("avx2") && sd_i8_rows_avx2_form(1);
    const int with_amx = sd_ops_fast_level("avx512") && sd_i8_rows_amx() && sd_i8_rows_avx512();
    if (!w || !sb || !x || !y) goto out;
    uint32_t s = 12345u;
    for (size_t i = 0; i < nw; i++) { s = s * 1664525u + 1013904223u; w[i] = s; }
    for (size_t i = 0; i < ng; i++) { sb[i] = sd_f32_to_bf16(0.01f); sb[ng + i] = sd_f32_to_bf16(-0.08f); }
    for (int i = 0; i < CAL_COLS * CAL_T8; i++) x[i] = (float)((i * 37) % 101 - 50) * 0.01f;
    W.w = w; W.scales = sb; W.biases = sb + ng;
    sd_i8_packed pk;   /* packed once, as the backend does at upload */
    if (sd_i8_pack(&W, &pk) != 0) goto out;
    W.pk = &pk;
    for (int r = -1; r < CAL_ROUNDS; r++)   /* r = -1 warms caches and clocks up */
        for (int l = 0; l < NLEV; l++) {
            const sd_ops *o = sd_ops_fast_level(k_levels[l]);
            if (!o) continue;
            const int avx2 = two && !strcmp(k_levels[l], "avx2");
            for (int p = 0; p < 2 + avx2; p++) {
                double t0 = now_s();
                if (avx2 && p) sd_i8_matmul(sd_i8_rows_avx2_form(p == 1), sd_i8_prep_avx2(), &W, x, CAL_COLS, y, CAL_ROWS, 1, NULL);
                else if (p) o->matmul_i8(&W, x, CAL_COLS, y, CAL_ROWS, 1, NULL);
                else o->matmul(&W, x, CAL_COLS, y, CAL_ROWS, 1, NULL);
                double dt = now_s() - t0;
                double *b = avx2 && p ? &form[p - 1] : &best[l][p];
                if (r >= 0 && (*b == 0 || dt < *b)) *b = dt;
            }
            if (with_amx && !strcmp(k_levels[l], "avx512"))
                for (int p = 0; p < 2; p++) {
                    double t0 = now_s();
                    sd_i8_matmul(p ? sd_i8_rows_amx() : sd_i8_rows_avx512(), sd_i8_prep_avx2(), &W, x, CAL_COLS, y, CAL_ROWS,
                                 CAL_T8, NULL);
                    double dt = now_s() - t0;
                    if (r >= 0 && (amx[p] == 0 || dt < amx[p])) amx[p] = dt;
                }
        }
    W.pk = NULL;
    sd_i8_pack_free(&pk);
out:
    free(w); free(sb); free(x); free(y);
}

static void calibrate(void) {
    char model[256], flags[160];
    cpu_model(model, sizeof model);
    cpu_flags(flags, sizeof flags);
    snprintf(g_cal.key, sizeof g_cal.key, "%s|%s|%s|%s", model, flags, specdec_version(), SD_CALIB_KERNELS);
    cache_path(g_cal.where, sizeof g_cal.where);
    const char *env = getenv("SPECDEC_CALIBRATE");
    int n = 0, first = -1;
    for (int i = 0; i < NLEV; i++)
        if (sd_ops_fast_level(k_levels[i])) { n++; if (first < 0) first = i; }
    g_cal.f32_level = g_cal.i8_level = first >= 0 ? k_levels[first] : "scalar";
    g_cal.avx2_i8_form = sd_i8_rows_avx2_form(1) ? "vnni" : "-";   /* the static choice */
    g_cal.avx512_i8_form = sd_i8_rows_amx() ? "vnni" : "-";         /* AMX only where measured faster */
    if (n <= 1) { g_cal.how = SD_CALIB_ONLY; apply_form(); return; }
    if (env && !strcmp(env, "0")) { g_cal.how = SD_CALIB_STATIC; apply_form(); return; }
    if (!(env && !strcmp(env, "force")) && cache_read(g_cal.where, g_cal.key)) {
        g_cal.how = SD_CALIB_CACHED;
        apply_form();
        return;
    }
    double best[NLEV][2], form[2], amx[2];
    measure(best, form, amx);
    if (amx[0] > 0 && amx[1] > 0) g_cal.avx512_i8_form = amx[1] < amx[0] ? "amx" : "vnni";
    const int avx2 = level_ix("avx2");
    if (form[0] > 0 && form[1] > 0) {
        g_cal.avx2_i8_form = form[1] < form[0] ? "maddubs" : "vnni";
        best[avx2][1] = form[1] < form[0] ? form[1] : form[0];
    }
    int bf = first, bi = first;
    size_t used = 0;
    g_cal.times[0] = 0;
    for (int l = 0; l < NLEV; l++) {
        if (best[l][0] <= 0) continue;
        if (best[l][0] < best[bf][0]) bf = l;
        if (best[l][1] < best[bi][1]) bi = l;
        used += (size_t)snprintf(g_cal.times + used, sizeof g_cal.times - used, "%s%s f32 %.0f us int8 %.0f us",
                                 used ? ", " : "", k_levels[l], best[l][0] * 1e6, best[l][1] * 1e6);
        if (used < sizeof g_cal.times && l == avx2 && form[0] > 0 && form[1] > 0)
            used += (size_t)snprintf(g_cal.times + used, sizeof g_cal.times - used, " (vnni %.1f, maddubs %.1f)",
                                     form[0] * 1e6, form[1] * 1e6);
        if (used < sizeof g_cal.times && !strcmp(k_levels[l], "avx512") && amx[0] > 0 && amx[1] > 0)
            used += (size_t)snprintf(g_cal.times + used, sizeof g_cal.times - used, " (8 tokens: vnni %.1f, amx %.1f)",
                                     amx[0] * 1e6, amx[1] * 1e6);
        if (used >= sizeof g_cal.times) break;
    }
    g_cal.f32_level = k_levels[bf];
    g_cal.i8_level = k_levels[bi];
    g_cal.how = SD_CALIB_MEASURED;
    apply_form();
    cache_write(g_cal.where, g_cal.key);
}

const sd_calib *sd_cpu_calibration(void) {
    pthread_once(&g_once, calibrate);
    return &g_cal;
}

void sd_calib_describe(const sd_calib *c, char *out, size_t n) {
    switch (c->how) {
    case SD_CALIB_ONLY: snprintf(out, n, "the only SIMD level this machine runs"); break;
    case SD_CALIB_STATIC: snprintf(out, n, "SPECDEC_CALIBRATE=0: static order avx512 > avx2 > neon"); break;
    case SD_CALIB_CACHED:
        snprintf(out, n, "calibrated earlier on this CPU (cache %s): f32 %s, int8 %s, avx2 int8 form %s, avx512 int8 form %s; %s",
                 c->where, c->f32_level, c->i8_level, c->avx2_i8_form, c->avx512_i8_form, c->times);
        break;
    default:
        snprintf(out, n,
                 "calibrated now (%d-row 4-bit matmul, 1 thread, min of %d): f32 %s, int8 %s, avx2 int8 form %s, avx512 int8 form %s; %s",
                 CAL_ROWS, CAL_ROUNDS, c->f32_level, c->i8_level, c->avx2_i8_form, c->avx512_i8_form, c->times);
        break;
    }
}
