/* test_tok_compare.c: a draft model's tokenizer is compared by what decides the ids. The real Qwen3
 * tokenizer.json re-indented with sorted keys and merges written as pairs must be accepted (file
 * compare and a draft model built on it); a copy with one vocabulary token renamed, one added
 * token's special flag flipped, two merges swapped or the pre-tokenizer changed must be refused,
 * naming that token, rank or section. */
#include "check.h"
#include "tiny_model.h"
#include "tok/tok_compare.h"
#include <jansson.h>
#include <unistd.h>

static char dir[64];
static const char *REAL;

static json_t *load_real(void) {
    json_error_t je;
    json_t *j = json_load_file(REAL, 0, &je);
    CHECK(j != NULL, "%s: %s", REAL, je.text);
    return j;
}

/* write j as NAME in the temp dir (reformatted: indented, keys sorted); returns the path */
static const char *save(json_t *j, const char *name) {
    static char path[8][256];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    CHECK(json_dump_file(j, p, JSON_INDENT(3) | JSON_SORT_KEYS) == 0, "write %s", p);
    return p;
}

static void expect_refused(const char *what, const char *path, const char *n1, const char *n2) {
    specdec_err e = {0};
    specdec_status st = sd_tok_file_compare(REAL, path, &e);
    if (getenv("SD_VERBOSE")) fprintf(stderr, "%s: %s\n", what, e.msg);
    CHECK(st == SPECDEC_ERR_UNSUPPORTED, "%s: accepted (%s)", what, e.msg);
    CHECK(strstr(e.msg, n1) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, n1);
    if (n2) CHECK(strstr(e.msg, n2) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, n2);
}

int main(void) {
    REAL = check_path("models/qwen3-kernel/tokenizer.json");
    if (!tm_mkdtemp(dir, sizeof dir)) { CHECK(0, "mkdtemp"); return check_finish("test_tok_compare"); }
    specdec_err e = {0};
    CHECK(sd_tok_file_compare(REAL, REAL, &e) == SPECDEC_OK, "itself: %s", e.msg);

    /* reformatted: indentation, key order, merges as ["a", "b"] pairs */
    json_t *j = load_real();
    if (!j) return check_finish("test_tok_compare");
    json_t *merges = json_object_get(json_object_get(j, "model"), "merges"), *m;
    size_t i;
    json_t *pairs = json_array();
    json_array_foreach(merges, i, m) {
        if (json_is_string(m)) {
            const char *s = json_string_value(m), *sp = strchr(s, ' ');
            json_array_append_new(pairs, json_pack("[s#s]", s, (int)(sp - s), sp + 1));
        } else json_array_append(pairs, m);
    }
    json_t *model = json_object_get(j, "model");
    json_object_set_new(model, "merges", pairs);
    const char *refmt = save(j, "reformatted.json");
    CHECK(sd_tok_file_compare(REAL, refmt, &e) == SPECDEC_OK, "reformatted copy refused: %s", e.msg);

    /* one vocabulary token renamed (id 1000 keeps its id, a new string) */
    json_t *vocab = json_object_get(model, "vocab");
    const char *key;
    json_t *v;
    char old[256] = "";
    json_object_foreach(vocab, key, v) if (json_integer_value(v) == 1000) { snprintf(old, sizeof old, "%s", key); break; }
    CHECK(old[0], "id 1000 not found");
    json_t *copy = json_deep_copy(j);
    json_t *cv = json_object_get(json_object_get(copy, "model"), "vocab");
    json_object_del(cv, old);
    json_object_set_new(cv, "zz_renamed", json_integer(1000));
    expect_refused("renamed token", save(copy, "renamed.json"), "id 1000", old);
    json_decref(copy);

    /* an added token's special flag */
    copy = json_deep_copy(j);
    json_t *at;
    json_array_foreach(json_object_get(copy, "added_tokens"), i, at)
        if (json_integer_value(json_object_get(at, "id")) == 151645) json_object_set_new(at, "special", json_false());
    expect_refused("special flag", save(copy, "special.json"), "151645", "im_end");
    json_decref(copy);

    /* two merges swapped: rank 10 and 11 */
    copy = json_deep_copy(j);
    json_t *cm = json_object_get(json_object_get(copy, "model"), "merges");
    json_t *m10 = json_incref(json_array_get(cm, 10)), *m11 = json_incref(json_array_get(cm, 11));
    json_array_set_new(cm, 10, m11);
    json_array_set_new(cm, 11, m10);
    expect_refused("merges swapped", save(copy, "merges.json"), "rank 10", NULL);
    json_decref(copy);

    /* the pre-tokenizer */
    copy = json_deep_copy(j);
    json_object_set_new(copy, "pre_tokenizer", json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1,
                                                         "trim_offsets", 1, "use_regex", 1));
    expect_refused("pre_tokenizer", save(copy, "pretok.json"), "pre_tokenizer", NULL);
    json_decref(copy);

    /* a draft model whose tokenizer.json is the reformatted copy: accepted; the renamed one: refused naming the token */
    const char *M = check_path("models/qwen3-kernel");
    specdec_model *t = NULL;
    CHECK(specdec_model_load(M, NULL, &t, &e) == SPECDEC_OK, "load: %s", e.msg);
    char dm[128];
    snprintf(dm, sizeof dm, "%s/draft", dir);
    mkdir(dm, 0755);
    char src[1024], dst[256];
    const char *files[] = {"config.json", "model.safetensors"};
    for (int f = 0; f < 2; f++) {
        snprintf(src, sizeof src, "%s/%s", M, files[f]);
        snprintf(dst, sizeof dst, "%s/%s", dm, files[f]);
        CHECK(symlink(src, dst) == 0, "symlink %s", dst);
    }
    snprintf(dst, sizeof dst, "%s/tokenizer.json", dm);
    CHECK(rename(refmt, dst) == 0, "place the reformatted tokenizer");
    specdec_drafter *d = NULL;
    if (t) {
        CHECK(specdec_drafter_init_model(t, dm, &d, &e) == SPECDEC_OK, "draft model with a reformatted tokenizer refused: %s", e.msg);
        specdec_drafter_free(d);
        d = NULL;
        char ren[256];
        snprintf(ren, sizeof ren, "%s/renamed.json", dir);
        CHECK(rename(ren, dst) == 0, "place the renamed tokenizer");
        CHECK(specdec_drafter_init_model(t, dm, &d, &e) == SPECDEC_ERR_UNSUPPORTED && strstr(e.msg, "id 1000") && strstr(e.msg, old),
              "draft model with a renamed token: %s", e.msg);
        specdec_drafter_free(d);
    }
    specdec_model_free(t);
    json_decref(j);
    tm_rm_rf(dir);
    return check_finish("test_tok_compare");
}
