/* test_mutated_checkpoints.c: hundreds of broken copies of a small valid model directory, each
 * given to the real `specdec` binary ($SPECDEC_BIN): `info` and `run -n 2` for a broken
 * checkpoint or config, `run` and `tokenize` for a broken tokenizer. Every run must end with an
 * exit status in 1..127 (no signal, no success), a message on stderr that names the file at fault
 * and, where the mutation says which, the key or tensor, and no sanitizer report (under the
 * ASan/UBSan build the binary is instrumented too).
 *
 * The mutations are chosen so that each one is certainly invalid: safetensors header bytes made
 * into JSON errors, unknown dtypes or wrong shapes/offsets, tensor names and field names broken,
 * the header length field moved into the JSON or past the data, the file truncated inside the
 * length field, the header or the raw tensor bytes; config.json keys removed, retyped, out of
 * range or inconsistent with the weights, the file truncated; tokenizer.json truncated and its
 * fields given wrong types. A fixed seed makes the set reproducible. */
#include "check.h"
#include "tiny_model.h"
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct blob { char *p; size_t n; } blob;

static const char *bin;
static char dir[64];            /* the directory each mutation is written to */
static blob base_cfg, base_st, base_tok;
static int n_mut, n_runs;

static blob slurp(const char *path) {
    blob b = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return b;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.p = malloc((size_t)n + 1);
    if (b.p && fread(b.p, 1, (size_t)n, f) == (size_t)n) { b.n = (size_t)n; b.p[n] = 0; }
    fclose(f);
    return b;
}

static blob dup_blob(const blob *b) {
    blob c = {malloc(b->n + 1), b->n};
    memcpy(c.p, b->p, b->n);
    c.p[c.n] = 0;
    return c;
}

static uint64_t rng = 0x5eed5eedULL;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* Start bin with argv, stderr into DIR.stderr<slot>; the pid, -1 when it could not start. */
static pid_t run_start(char *const argv[], int slot) {
    char epath[128];
    snprintf(epath, sizeof epath, "%s.stderr%d", dir, slot);
    pid_t pid = fork();
    if (pid == 0) {
        int fe = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0644), fo = open("/dev/null", O_WRONLY);
        if (fe < 0 || fo < 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(bin, argv);
        _exit(127);
    }
    return pid;
}

/* Wait for pid; its stderr into *err (malloc'ed). Returns the wait status, -1 when it never ran. */
static int run_wait(pid_t pid, int slot, char **err) {
    int ws = -1;
    if (pid > 0) while (waitpid(pid, &ws, 0) < 0) {}
    char epath[128];
    snprintf(epath, sizeof epath, "%s.stderr%d", dir, slot);
    blob e = slurp(epath);
    *err = e.p ? e.p : strdup("");
    n_runs++;
    return ws;
}

static int run_bin(char *const argv[], char **err) { return run_wait(run_start(argv, 0), 0, err); }

/* Write the three files, then run each command on the directory and check the outcome. `file`
 * must appear in every message; `needle` (NULL = none), when given, too. */
static void check_mutation(const char *what, const blob *cfg, const blob *st, const blob *tok, bool tokenizer_cmds,
                           const char *file, const char *needle) {
    n_mut++;
    CHECK(tm_write_file(dir, "config.json", cfg->p, cfg->n) == 0 && tm_write_file(dir, "model.safetensors", st->p, st->n) == 0 &&
          tm_write_file(dir, "tokenizer.json", tok->p, tok->n) == 0, "%s: cannot write the model directory", what);
    char *info[] = {(char *)bin, "info", "-m", dir, NULL};
    char *run[] = {(char *)bin, "run", "-m", dir, "-p", "ab", "-n", "2", "--threads", "1", NULL};
    char *tokz[] = {(char *)bin, "tokenize", "-m", dir, "-p", "ab", NULL};
    char **cmds[2] = {tokenizer_cmds ? tokz : info, run};
    pid_t pids[2];
    for (int k = 0; k < 2; k++) pids[k] = run_start(cmds[k], k);   /* both at once: two cores */
    for (int k = 0; k < 2; k++) {
        char *err = NULL;
        int ws = run_wait(pids[k], k, &err);
        const char *cmd = cmds[k][1];
        if (ws < 0) { CHECK(0, "%s: %s: cannot run %s", what, cmd, bin); continue; }
        bool exited = WIFEXITED(ws);
        int rc = exited ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        bool sanitizer = strstr(err, "Sanitizer") || strstr(err, "runtime error:");
        CHECK(exited && rc >= 1 && rc <= 127 && !sanitizer, "%s: %s: exit status %d%s; stderr: %.600s", what, cmd, rc,
              sanitizer ? " with a sanitizer report" : "", err);
        CHECK(strstr(err, file) != NULL, "%s: %s: the message does not name %s: %.400s", what, cmd, file, err);
        if (needle) CHECK(strstr(err, needle) != NULL, "%s: %s: the message does not name '%s': %.400s", what, cmd, needle, err);
        if (getenv("SD_VERBOSE")) fprintf(stderr, "[%s] %s: rc %d: %s", what, cmd, rc, err);
        free(err);
    }
}

/* ---- model.safetensors ---------------------------------------------------------------- */

static uint64_t hdr_len(const blob *b) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | (uint8_t)b->p[i];
    return n;
}

static void set_hdr_len(blob *b, uint64_t n) {
    for (int i = 0; i < 8; i++) b->p[i] = (char)(n >> (8 * i));
}

/* A digit different from c: never a leading zero, so the number stays valid JSON. */
static char other_digit(char c, bool leading) {
    return leading ? (char)('1' + (c - '1' + 1 + (int)rnd(8) + 9) % 9) : (char)('0' + (c - '0' + 1 + (int)rnd(9)) % 10);
}

/* Byte positions in json[b, e) satisfying `ok`, one picked at random; (size_t)-1 when none. */
static size_t pick(const char *json, const char *b, const char *e, bool (*ok)(const char *json, const char *p)) {
    size_t n = 0, chosen = (size_t)-1;
    for (const char *p = b; p < e; p++)
        if (ok(json, p) && rnd((uint32_t)++n) == 0) chosen = (size_t)(p - json);
    return chosen;
}
static bool is_struct(const char *j, const char *p) { (void)j; return strchr("{}[]:,\"", *p) && *p; }
static bool is_digit(const char *j, const char *p) { (void)j; return *p >= '0' && *p <= '9'; }
static bool is_any(const char *j, const char *p) { (void)j; (void)p; return true; }

/* Each class of header mutation, for a tensor chosen at random, changes one byte of its entry
 * `"name":{"dtype":"BF16","shape":[r,c],"data_offsets":[b,e]}`. */
enum { H_STRUCT, H_SHAPE, H_OFFSETS, H_DTYPE, H_NAME, H_FIELD, H_CLASSES };
static const char *h_name[H_CLASSES] = {"structure", "shape", "data_offsets", "dtype", "tensor name", "field name"};

static void header_mutations(const sd_st_set *set) {
    uint64_t n = hdr_len(&base_st);
    char *json = strndup(base_st.p + 8, n);
    char what[512];
    for (int cls = 0; cls < H_CLASSES; cls++)
        for (int i = 0; i < 24; i++) {
            const char *name = sd_st_at(set, (int)rnd((uint32_t)sd_st_count(set)))->name;
            char pat[300];
            snprintf(pat, sizeof pat, "\"%s\":{", name);
            const char *e = strstr(json, pat), *ee = e ? strchr(e, '}') + 1 : NULL;
            if (!e) { CHECK(0, "tensor %s not found in the header", name); continue; }
            const char *field = cls == H_SHAPE ? "\"shape\":[" : cls == H_OFFSETS ? "\"data_offsets\":[" : "\"dtype\":\"";
            const char *fb = strstr(e, field), *fe;
            size_t pos;
            char repl;
            switch (cls) {
            case H_STRUCT: pos = pick(json, e, ee, is_struct); repl = 'x'; break;
            case H_SHAPE: case H_OFFSETS:
                fb += strlen(field);
                fe = strchr(fb, ']');
                pos = pick(json, fb, fe, is_digit);
                repl = other_digit(json[pos], !is_digit(json, json + pos - 1));
                break;
            case H_DTYPE: fb += strlen(field); pos = pick(json, fb, strchr(fb, '"'), is_any); repl = 'Z'; break;
            case H_NAME: pos = pick(json, e + 1, e + 1 + strlen(name), is_any); repl = json[pos] == 'Z' ? 'Y' : 'Z'; break;
            default: {
                static const char *fields[] = {"\"dtype\"", "\"shape\"", "\"data_offsets\""};
                const char *f = fields[rnd(3)];
                fb = strstr(e, f) + 1;
                pos = pick(json, fb, fb + strlen(f) - 2, is_any);
                repl = 'Z';
            }
            }
            blob m = dup_blob(&base_st);
            m.p[8 + pos] = repl;
            snprintf(what, sizeof what, "header %s: byte %zu '%c' -> '%c' (tensor %s)", h_name[cls], pos, json[pos], repl, name);
            /* a broken structure is a JSON error (at a line and column); the rest name the tensor */
            check_mutation(what, &base_cfg, &m, &base_tok, false, "model.safetensors", cls == H_STRUCT ? "JSON" : name);
            free(m.p);
        }
    free(json);
}

static void length_and_truncation_mutations(const sd_st_set *set) {
    uint64_t n = hdr_len(&base_st), size = base_st.n, data_len = size - 8 - n;
    size_t jend = n;
    while (jend > 0 && base_st.p[8 + jend - 1] == ' ') jend--;   /* the JSON ends before the padding */
    char what[256];
    for (int i = 0; i < 12; i++) {    /* length field into the JSON: the header is cut short */
        blob m = dup_blob(&base_st);
        uint64_t k = (n - jend) + 1 + rnd((uint32_t)jend);
        set_hdr_len(&m, n - k);
        snprintf(what, sizeof what, "header length %llu -> %llu", (unsigned long long)n, (unsigned long long)(n - k));
        check_mutation(what, &base_cfg, &m, &base_tok, false, "model.safetensors", NULL);
        free(m.p);
    }
    for (int i = 0; i < 12; i++) {    /* length field into the data: raw bytes join the JSON, the data section shrinks */
        blob m = dup_blob(&base_st);
        uint64_t k = 1 + rnd((uint32_t)(data_len < 4096 ? data_len : 4096));
        set_hdr_len(&m, n + k);
        snprintf(what, sizeof what, "header length %llu -> %llu", (unsigned long long)n, (unsigned long long)(n + k));
        check_mutation(what, &base_cfg, &m, &base_tok, false, "model.safetensors", NULL);
        free(m.p);
    }
    static const uint64_t huge[] = {1ull << 40, UINT64_MAX, 1ull << 63, 0};
    for (int i = 0; i < 4; i++) {     /* past the end of the file, or nothing */
        blob m = dup_blob(&base_st);
        set_hdr_len(&m, huge[i] ? huge[i] : size);
        snprintf(what, sizeof what, "header length %llu -> %llu", (unsigned long long)n, (unsigned long long)(huge[i] ? huge[i] : size));
        check_mutation(what, &base_cfg, &m, &base_tok, false, "model.safetensors", NULL);
        free(m.p);
    }
    for (int i = 0; i < 12; i++) {    /* truncated inside the length field or the header */
        blob m = dup_blob(&base_st);
        m.n = i < 3 ? (size_t)rnd(8) : 8 + rnd((uint32_t)n);
        snprintf(what, sizeof what, "file truncated to %zu bytes (in the header)", m.n);
        check_mutation(what, &base_cfg, &m, &base_tok, false, "model.safetensors", NULL);
        free(m.p);
    }
    const uint8_t *data0 = NULL;      /* where the data section starts: the smallest tensor pointer */
    for (int t = 0; t < sd_st_count(set); t++)
        if (!data0 || (const uint8_t *)sd_st_at(set, t)->data < data0) data0 = sd_st_at(set, t)->data;
    for (int i = 0; i < 40; i++) {    /* raw tensor bytes truncated: the tensor that runs past the end is named */
        blob m = dup_blob(&base_st);
        uint64_t cut = rnd((uint32_t)data_len);
        m.n = (size_t)(8 + n + cut);
        const char *victim = NULL;
        uint64_t vbeg = UINT64_MAX;
        for (int t = 0; t < sd_st_count(set); t++) {
            const sd_st_tensor *x = sd_st_at(set, t);
            uint64_t b = (uint64_t)((const uint8_t *)x->data - data0);
            if (b + x->nbytes > cut && b < vbeg) { vbeg = b; victim = x->name; }
        }
        snprintf(what, sizeof what, "raw data truncated at byte %llu of %llu", (unsigned long long)cut, (unsigned long long)data_len);
        /* tensors are validated in header order; any one past the end may be the one reported */
        check_mutation(what, &base_cfg, &m, &base_tok, false, "model.safetensors", victim ? "exceed data section" : NULL);
        free(m.p);
    }
}

/* ---- config.json ---------------------------------------------------------------------- */

static blob dump(json_t *root) {
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    blob b = {s, s ? strlen(s) : 0};
    return b;
}

static void config_with(const char *key, const char *value_json, const char *file, const char *needle, const char *what) {
    json_t *root = json_loadb(base_cfg.p, base_cfg.n, 0, NULL);
    if (value_json) json_object_set_new(root, key, json_loads(value_json, JSON_DECODE_ANY, NULL));
    else json_object_del(root, key);
    blob c = dump(root);
    json_decref(root);
    check_mutation(what, &c, &base_st, &base_tok, false, file, needle);
    free(c.p);
}

static void config_mutations(void) {
    static const char *required[] = {"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                     "num_attention_heads", "num_key_value_heads", "rms_norm_eps", "rope_theta",
                                     "max_position_embeddings"};
    static const char *ints[] = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                                 "num_key_value_heads", "head_dim", "max_position_embeddings"};
    char what[256];
    for (size_t i = 0; i < sizeof required / sizeof *required; i++) {
        snprintf(what, sizeof what, "config.json without \"%s\"", required[i]);
        config_with(required[i], NULL, "config.json", required[i], what);
    }
    static const char *retype_int[] = {"\"x\"", "[1]", "{}", "1.5", "true", "null"};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        for (size_t k = 0; k < sizeof retype_int / sizeof *retype_int; k++) {
            snprintf(what, sizeof what, "config.json \"%s\": %s", ints[i], retype_int[k]);
            config_with(ints[i], retype_int[k], "config.json", ints[i], what);
        }
    static const char *retype_num[] = {"\"x\"", "[1]", "{}", "true", "null"};
    static const char *nums[] = {"rms_norm_eps", "rope_theta"};
    for (size_t i = 0; i < 2; i++)
        for (size_t k = 0; k < sizeof retype_num / sizeof *retype_num; k++) {
            snprintf(what, sizeof what, "config.json \"%s\": %s", nums[i], retype_num[k]);
            config_with(nums[i], retype_num[k], "config.json", nums[i], what);
        }
    static const struct { const char *key, *value; } other[] = {
        {"model_type", "1"}, {"model_type", "\"llama\""}, {"model_type", "null"},
        {"tie_word_embeddings", "\"yes\""}, {"tie_word_embeddings", "1"},
        {"eos_token_id", "\"x\""}, {"eos_token_id", "{}"}, {"eos_token_id", "1.5"}, {"eos_token_id", "[1, \"a\"]"},
        {"eos_token_id", "[1,2,3,4,5,6,7,8,9]"}, {"bos_token_id", "\"x\""},
        {"torch_dtype", "1"}, {"torch_dtype", "[\"bfloat16\"]"}, {"torch_dtype", "\"int4\""},
        {"rope_scaling", "{\"type\": \"yarn\", \"factor\": 4}"}, {"use_sliding_window", "true"},
        {"quantization", "\"q4\""}, {"quantization", "{\"group_size\": 64, \"bits\": 3}"},
        {"quantization", "{\"group_size\": 48, \"bits\": 4}"}, {"quantization", "{\"bits\": 4}"},
        {"quantization_config", "{\"quant_method\": \"gptq\", \"bits\": 4}"}, {"mtp_num_hidden_layers", "\"1\""},
    };
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        snprintf(what, sizeof what, "config.json \"%s\": %s", other[i].key, other[i].value);
        config_with(other[i].key, other[i].value, "config.json", other[i].key, what);
    }
    /* out of range */
    static const struct { const char *key, *value; } range[] = {
        {"vocab_size", "0"}, {"vocab_size", "-1"}, {"vocab_size", "1073741824"}, {"hidden_size", "0"}, {"hidden_size", "131072"},
        {"intermediate_size", "-5"}, {"num_hidden_layers", "0"}, {"num_hidden_layers", "100000"}, {"num_attention_heads", "0"},
        {"num_key_value_heads", "0"}, {"num_key_value_heads", "3"}, {"head_dim", "1"}, {"head_dim", "7"}, {"head_dim", "4096"},
        {"rms_norm_eps", "0"}, {"rms_norm_eps", "-1e-6"}, {"rms_norm_eps", "1"}, {"rope_theta", "1"}, {"rope_theta", "-10000"},
        {"max_position_embeddings", "0"}, {"max_position_embeddings", "2147483648"}, {"eos_token_id", "256"},
        {"eos_token_id", "-1"}, {"eos_token_id", "[1, 999999]"}, {"bos_token_id", "100000"}, {"mtp_num_hidden_layers", "-1"},
    };
    for (size_t i = 0; i < sizeof range / sizeof *range; i++) {
        snprintf(what, sizeof what, "config.json \"%s\": %s (out of range)", range[i].key, range[i].value);
        config_with(range[i].key, range[i].value, "config.json", range[i].key, what);
    }
    /* in range, but not what the weights hold: the file and the tensor that disagree are named */
    static const struct { const char *key, *value, *tensor; } shape[] = {
        {"vocab_size", "300", "embed_tokens"}, {"hidden_size", "48", "model."}, {"intermediate_size", "64", "mlp"},
        {"num_hidden_layers", "3", "layers.2"}, {"num_attention_heads", "8", "q_proj"}, {"num_key_value_heads", "1", "k_proj"},
        {"head_dim", "16", "model.layers.0."},
    };
    for (size_t i = 0; i < sizeof shape / sizeof *shape; i++) {
        snprintf(what, sizeof what, "config.json \"%s\": %s (the weights disagree)", shape[i].key, shape[i].value);
        config_with(shape[i].key, shape[i].value, "model.safetensors", shape[i].tensor, what);
    }
    for (int i = 0; i < 15; i++) {    /* truncated */
        blob c = dup_blob(&base_cfg);
        size_t end = c.n - 1;
        while (end > 0 && (c.p[end] == '\n' || c.p[end] == ' ')) end--;
        c.n = rnd((uint32_t)end);     /* at least the closing brace goes */
        snprintf(what, sizeof what, "config.json truncated to %zu bytes", c.n);
        check_mutation(what, &c, &base_st, &base_tok, false, "config.json", NULL);
        free(c.p);
    }
    blob arr = {strdup("[1, 2]"), 6};
    check_mutation("config.json is an array", &arr, &base_st, &base_tok, false, "config.json", NULL);
    free(arr.p);
}

/* ---- tokenizer.json ------------------------------------------------------------------- */

/* Set the member at a dotted path ("model.vocab") to value_json (NULL: delete it). */
static void tokenizer_with(const char *path, const char *value_json, const char *what) {
    json_t *root = json_loadb(base_tok.p, base_tok.n, 0, NULL);
    json_t *obj = root;
    char key[128];
    snprintf(key, sizeof key, "%s", path);
    char *dot, *k = key;
    while ((dot = strchr(k, '.'))) { *dot = 0; obj = json_object_get(obj, k); k = dot + 1; }
    if (value_json) json_object_set_new(obj, k, json_loads(value_json, JSON_DECODE_ANY, NULL));
    else json_object_del(obj, k);
    blob t = dump(root);
    json_decref(root);
    check_mutation(what, &base_cfg, &base_st, &t, true, "tokenizer.json", NULL);
    free(t.p);
}

static void tokenizer_mutations(void) {
    char what[256];
    for (int i = 0; i < 20; i++) {
        blob t = dup_blob(&base_tok);
        t.n = rnd((uint32_t)(t.n - 1));
        snprintf(what, sizeof what, "tokenizer.json truncated to %zu bytes", t.n);
        check_mutation(what, &base_cfg, &base_st, &t, true, "tokenizer.json", NULL);
        free(t.p);
    }
    static const struct { const char *path, *value; } ty[] = {
        {"model", NULL}, {"model", "null"}, {"model", "\"BPE\""}, {"model", "[]"}, {"model.type", "\"WordPiece\""},
        {"model.type", "7"}, {"model.vocab", NULL}, {"model.vocab", "[]"}, {"model.vocab", "\"x\""}, {"model.vocab", "{\"a\": \"x\"}"},
        {"model.vocab", "{\"a\": -5}"}, {"model.vocab", "{\"a\": 1e10}"}, {"model.merges", "{}"}, {"model.merges", "5"},
        {"model.merges", "[\"a\"]"}, {"model.merges", "[[1, 2]]"}, {"model.merges", "[\"zz qq\"]"}, {"added_tokens", "\"x\""},
        {"added_tokens", "{}"}, {"added_tokens", "[{\"id\": \"x\", \"content\": \"<a>\"}]"}, {"added_tokens", "[{\"id\": -1, \"content\": \"<a>\"}]"},
        {"added_tokens", "[{\"id\": 300}]"}, {"added_tokens", "[5]"}, {"pre_tokenizer", "5"}, {"pre_tokenizer", "null"},
        {"pre_tokenizer", "{\"type\": \"Whitespace\"}"}, {"pre_tokenizer", "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}}"},
        {"decoder", "5"}, {"decoder", "{\"type\": \"WordPiece\"}"}, {"normalizer", "5"}, {"normalizer", "{\"type\": \"NFKD\"}"},
    };
    for (size_t i = 0; i < sizeof ty / sizeof *ty; i++) {
        snprintf(what, sizeof what, "tokenizer.json %s: %s", ty[i].path, ty[i].value ? ty[i].value : "(removed)");
        tokenizer_with(ty[i].path, ty[i].value, what);
    }
    blob arr = {strdup("[]"), 2};
    check_mutation("tokenizer.json is an array", &base_cfg, &base_st, &arr, true, "tokenizer.json", NULL);
    free(arr.p);
}



int main(void) {
    bin = getenv("SPECDEC_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "test_mutated_checkpoints: SPECDEC_BIN is not set to the specdec binary\n");
        return 1;
    }
    char src[64], path[128];
    if (!tm_mkdtemp(src, sizeof src) || !tm_mkdtemp(dir, sizeof dir)) { CHECK(0, "mkdtemp"); return check_finish("test_mutated_checkpoints"); }
    tm_dims d = tm_default_dims();
    d.V = 256;
    CHECK(tm_write_model(src, &d, 7, NULL, NULL, NULL, 0) == 0 && tm_write_byte_tokenizer(src) == 0, "write the base model");
    snprintf(path, sizeof path, "%s/config.json", src);
    base_cfg = slurp(path);
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    base_st = slurp(path);
    sd_st_set *set = NULL;
    specdec_err err = {0};
    CHECK(sd_st_open_file(path, &set, &err) == SPECDEC_OK, "base model: %s", err.msg);
    snprintf(path, sizeof path, "%s/tokenizer.json", src);
    base_tok = slurp(path);
    if (!base_cfg.p || !base_st.p || !base_tok.p || !set) return check_finish("test_mutated_checkpoints");

    /* the unmutated directory works: every failure below is the mutation's */
    CHECK(tm_write_file(dir, "config.json", base_cfg.p, base_cfg.n) == 0 && tm_write_file(dir, "model.safetensors", base_st.p, base_st.n) == 0 &&
          tm_write_file(dir, "tokenizer.json", base_tok.p, base_tok.n) == 0, "write");
    char *info[] = {(char *)bin, "info", "-m", dir, NULL};
    char *run[] = {(char *)bin, "run", "-m", dir, "-p", "ab", "-n", "2", "--threads", "1", NULL};
    char *e1 = NULL, *e2 = NULL;
    int w1 = run_bin(info, &e1), w2 = run_bin(run, &e2);
    CHECK(w1 == 0 && w2 == 0, "the base model fails: info %d, run %d: %s %s", w1, w2, e1, e2);
    free(e1); free(e2);

    struct timespec ts0, ts1;
    clock_gettime(CLOCK_MONOTONIC, &ts0);
    header_mutations(set);
    length_and_truncation_mutations(set);
    config_mutations();
    tokenizer_mutations();
    clock_gettime(CLOCK_MONOTONIC, &ts1);
    printf("mutated checkpoints: %d mutations, %d runs of specdec in %.1f s\n", n_mut, n_runs,
           (double)(ts1.tv_sec - ts0.tv_sec) + (double)(ts1.tv_nsec - ts0.tv_nsec) / 1e9);
    CHECK(n_mut >= 300, "only %d mutations", n_mut);

    sd_st_close(set);
    free(base_cfg.p); free(base_st.p); free(base_tok.p);
    for (int k = 0; k < 2; k++) {
        char epath[128];
        snprintf(epath, sizeof epath, "%s.stderr%d", dir, k);
        unlink(epath);
    }
    if (!getenv("SD_KEEP")) { tm_rm_rf(src); tm_rm_rf(dir); }
    return check_finish("test_mutated_checkpoints");
}
