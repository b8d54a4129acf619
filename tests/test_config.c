/* test_config.c: config.json parsing: valid configs (int and list eos, null bos, quantization
 * blocks, head_dim absent) and bad ones (each required key missing, unknown model_type, malformed
 * JSON, wrong types, out-of-range values); every error must name the key and the file. */
#include "check.h"
#include "tiny_model.h"
#include "model/config.h"
#include "util/err.h"

static const char *BASE =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 151936, \"hidden_size\": 1024, \"intermediate_size\": 3072,"
    " \"num_hidden_layers\": 28, \"num_attention_heads\": 16, \"num_key_value_heads\": 8, \"head_dim\": 128,"
    " \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000, \"max_position_embeddings\": 40960,"
    " \"tie_word_embeddings\": true, \"bos_token_id\": 151643, \"eos_token_id\": 151645,"
    " \"torch_dtype\": \"bfloat16\", \"unknown_key\": {\"a\": [1, 2]}}";

static specdec_status parse(const char *js, sd_config *c, specdec_err *e) {
    return sd_config_parse(js, strlen(js), "dir/config.json", c, e);
}

/* BASE with key `key` replaced by `val` (val NULL: key removed). */
static char *edit(const char *key, const char *val) {
    static char out[4096];
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(BASE, pat);
    if (!p) { snprintf(out, sizeof out, "%s", BASE); return out; }
    const char *q = p + strlen(pat);
    int depth = 0;
    /* end of the value: next ',' or '}' at depth 0 */
    for (; *q; q++) {
        if (*q == '{' || *q == '[') depth++;
        else if ((*q == '}' || *q == ']') && depth) depth--;
        else if ((*q == ',' || *q == '}') && !depth) break;
    }
    if (val) snprintf(out, sizeof out, "%.*s%s %s%s", (int)(p - BASE), BASE, pat, val, q);
    else {
        if (*q == ',') q++;
        snprintf(out, sizeof out, "%.*s%s", (int)(p - BASE), BASE, q);
    }
    return out;
}

static void expect_bad(const char *what, const char *js, specdec_status want, const char *needle) {
    sd_config c;
    specdec_err e = {0};
    specdec_status st = parse(js, &c, &e);
    if (getenv("SD_VERBOSE")) fprintf(stderr, "%s: %s\n", what, e.msg);
    CHECK(st == want, "%s: status %s, want %s (%s)", what, specdec_status_name(st), specdec_status_name(want), e.msg);
    CHECK(strstr(e.msg, "dir/config.json") != NULL, "%s: message '%s' lacks the file", what, e.msg);
    if (needle) CHECK(strstr(e.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, needle);
}

static void test_valid(void) {
    sd_config c;
    specdec_err e = {0};
    CHECK(parse(BASE, &c, &e) == SPECDEC_OK, "base: %s", e.msg);
    CHECK(strcmp(c.model_type, "qwen3") == 0, "model_type");
    CHECK_EQ_INT(c.vocab_size, 151936);
    CHECK_EQ_INT(c.hidden_size, 1024);
    CHECK_EQ_INT(c.intermediate_size, 3072);
    CHECK_EQ_INT(c.n_layers, 28);
    CHECK_EQ_INT(c.n_heads, 16);
    CHECK_EQ_INT(c.n_kv_heads, 8);
    CHECK_EQ_INT(c.head_dim, 128);
    CHECK(c.rms_norm_eps == 1e-6f, "eps");
    CHECK(c.rope_theta == 1e6, "theta");
    CHECK_EQ_INT(c.max_position_embeddings, 40960);
    CHECK(c.tie_word_embeddings, "tied");
    CHECK_EQ_INT(c.bos_token_id, 151643);
    CHECK_EQ_INT(c.n_eos, 1);
    CHECK_EQ_INT(c.eos_token_id[0], 151645);
    CHECK(c.dtype == SPECDEC_DTYPE_BF16, "dtype");
    CHECK_EQ_INT(c.quant_bits, 0);
    CHECK_EQ_INT(c.mtp_n_layers, 0);

    CHECK(parse(edit("eos_token_id", "[151645, 151643]"), &c, &e) == SPECDEC_OK, "list eos: %s", e.msg);
    CHECK(c.n_eos == 2 && c.eos_token_id[0] == 151645 && c.eos_token_id[1] == 151643, "list eos values");
    CHECK(parse(edit("eos_token_id", NULL), &c, &e) == SPECDEC_OK && c.n_eos == 0, "absent eos");
    CHECK(parse(edit("bos_token_id", "null"), &c, &e) == SPECDEC_OK && c.bos_token_id == -1, "null bos");
    CHECK(parse(edit("tie_word_embeddings", NULL), &c, &e) == SPECDEC_OK && !c.tie_word_embeddings, "tie default false");
    CHECK(parse(edit("torch_dtype", NULL), &c, &e) == SPECDEC_OK && c.dtype == SPECDEC_DTYPE_F32, "dtype default f32");
    CHECK(parse(edit("torch_dtype", "\"float16\""), &c, &e) == SPECDEC_OK && c.dtype == SPECDEC_DTYPE_F16, "float16");
    CHECK(parse(edit("torch_dtype", "\"float32\", \"dtype\": \"bfloat16\""), &c, &e) == SPECDEC_OK && c.dtype == SPECDEC_DTYPE_F32,
          "torch_dtype wins over dtype");
    /* newer transformers write "dtype" instead of "torch_dtype" */
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", edit("torch_dtype", NULL));
    buf[strlen(buf) - 1] = 0;
    strcat(buf, ", \"dtype\": \"bfloat16\"}");
    CHECK(parse(buf, &c, &e) == SPECDEC_OK && c.dtype == SPECDEC_DTYPE_BF16, "dtype key: %s", e.msg);
    CHECK(parse(edit("unknown_key", "null, \"rope_scaling\": null, \"use_sliding_window\": false"), &c, &e) == SPECDEC_OK,
          "null rope_scaling / no sliding window: %s", e.msg);
    CHECK(parse(edit("rope_theta", "1000000.0"), &c, &e) == SPECDEC_OK && c.rope_theta == 1e6, "real theta");
    /* head_dim absent: H / nh */
    CHECK(parse(edit("head_dim", NULL), &c, &e) == SPECDEC_OK && c.head_dim == 64, "derived head_dim %d", c.head_dim);
    /* quantization blocks, as mlx_lm writes them (both keys) */
    CHECK(parse(edit("unknown_key", "1, \"quantization\": {\"group_size\": 64, \"bits\": 4, \"mode\": \"affine\"},"
                                    " \"quantization_config\": {\"group_size\": 64, \"bits\": 4}"), &c, &e) == SPECDEC_OK,
          "quant: %s", e.msg);
    CHECK(c.quant_bits == 4 && c.quant_group == 64, "quant values");
    CHECK(parse(edit("unknown_key", "1, \"quantization_config\": {\"group_size\": 32, \"bits\": 8}"), &c, &e) == SPECDEC_OK &&
          c.quant_bits == 8 && c.quant_group == 32, "quantization_config alone");
    CHECK(parse(edit("unknown_key", "1, \"mtp_num_hidden_layers\": 1"), &c, &e) == SPECDEC_OK && c.mtp_n_layers == 1, "mtp");

    /* sd_config_load_dir */
    char dir[64];
    tm_mkdtemp(dir, sizeof dir);
    tm_write_file(dir, "config.json", BASE, strlen(BASE));
    CHECK(sd_config_load_dir(dir, &c, &e) == SPECDEC_OK && c.vocab_size == 151936, "load_dir: %s", e.msg);
    tm_rm_rf(dir);
    tm_mkdtemp(dir, sizeof dir);
    CHECK(sd_config_load_dir(dir, &c, &e) == SPECDEC_ERR_MISSING && strstr(e.msg, "config.json"), "load_dir missing: %s", e.msg);
    tm_rm_rf(dir);
}

static void test_bad(void) {
    static const char *req[] = {"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                "num_attention_heads", "num_key_value_heads", "rms_norm_eps", "rope_theta",
                                "max_position_embeddings"};
    for (size_t i = 0; i < sizeof req / sizeof *req; i++) {
        char what[96];
        snprintf(what, sizeof what, "missing %s", req[i]);
        expect_bad(what, edit(req[i], NULL), SPECDEC_ERR_CONFIG, req[i]);
    }
    expect_bad("unknown model_type", edit("model_type", "\"llama\""), SPECDEC_ERR_UNSUPPORTED, "llama");
    expect_bad("malformed JSON", "{\"model_type\": \"qwen3\",\n  \"vocab_size\": }", SPECDEC_ERR_FORMAT, "line 2");
    expect_bad("not an object", "[1]", SPECDEC_ERR_FORMAT, NULL);
    expect_bad("duplicate key", edit("unknown_key", "1, \"vocab_size\": 5"), SPECDEC_ERR_FORMAT, "vocab_size");
    expect_bad("string int", edit("hidden_size", "\"1024\""), SPECDEC_ERR_CONFIG, "hidden_size");
    expect_bad("real int", edit("num_hidden_layers", "28.5"), SPECDEC_ERR_CONFIG, "num_hidden_layers");
    expect_bad("string eps", edit("rms_norm_eps", "\"1e-6\""), SPECDEC_ERR_CONFIG, "rms_norm_eps");
    expect_bad("tie type", edit("tie_word_embeddings", "1"), SPECDEC_ERR_CONFIG, "tie_word_embeddings");
    expect_bad("model_type type", edit("model_type", "3"), SPECDEC_ERR_CONFIG, "model_type");
    expect_bad("eos type", edit("eos_token_id", "\"x\""), SPECDEC_ERR_CONFIG, "eos_token_id");
    expect_bad("eos list too long", edit("eos_token_id", "[1,2,3,4,5,6,7,8,9]"), SPECDEC_ERR_CONFIG, "eos_token_id");
    expect_bad("eos past vocab", edit("eos_token_id", "[1, 151936]"), SPECDEC_ERR_CONFIG, "eos_token_id");
    expect_bad("heads % kv", edit("num_key_value_heads", "3"), SPECDEC_ERR_CONFIG, "num_key_value_heads");
    expect_bad("zero heads", edit("num_attention_heads", "0"), SPECDEC_ERR_CONFIG, "num_attention_heads");
    expect_bad("zero kv heads", edit("num_key_value_heads", "0"), SPECDEC_ERR_CONFIG, "num_key_value_heads");
    expect_bad("negative hidden", edit("hidden_size", "-1024"), SPECDEC_ERR_CONFIG, "hidden_size");
    expect_bad("vocab too big", edit("vocab_size", "16777217"), SPECDEC_ERR_CONFIG, "vocab_size");
    expect_bad("eps >= 1", edit("rms_norm_eps", "1.5"), SPECDEC_ERR_CONFIG, "rms_norm_eps");
    expect_bad("eps 0", edit("rms_norm_eps", "0"), SPECDEC_ERR_CONFIG, "rms_norm_eps");
    expect_bad("odd head_dim", edit("head_dim", "7"), SPECDEC_ERR_CONFIG, "head_dim");
    expect_bad("zero max pos", edit("max_position_embeddings", "0"), SPECDEC_ERR_CONFIG, "max_position_embeddings");
    expect_bad("bad dtype", edit("torch_dtype", "\"float64\""), SPECDEC_ERR_UNSUPPORTED, "torch_dtype");
    expect_bad("quant bits", edit("unknown_key", "1, \"quantization\": {\"group_size\": 64, \"bits\": 3}"),
               SPECDEC_ERR_UNSUPPORTED, "quantization.bits");
    expect_bad("quant group", edit("unknown_key", "1, \"quantization\": {\"group_size\": 48, \"bits\": 4}"),
               SPECDEC_ERR_UNSUPPORTED, "quantization.group_size");
    expect_bad("quant missing bits", edit("unknown_key", "1, \"quantization\": {\"group_size\": 64}"),
               SPECDEC_ERR_CONFIG, "quantization.bits");
    expect_bad("quant not object", edit("unknown_key", "1, \"quantization\": 4"), SPECDEC_ERR_CONFIG, "quantization");
    expect_bad("quant disagree", edit("unknown_key", "1, \"quantization\": {\"group_size\": 64, \"bits\": 4},"
                                                     " \"quantization_config\": {\"group_size\": 32, \"bits\": 4}"),
               SPECDEC_ERR_CONFIG, "quantization_config");
    expect_bad("hf quant", edit("unknown_key", "1, \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}"),
               SPECDEC_ERR_UNSUPPORTED, "gptq");
    expect_bad("per-layer quant", edit("unknown_key", "1, \"quantization\": {\"group_size\": 64, \"bits\": 4,"
                                                      " \"model.layers.0.mlp.down_proj\": {\"group_size\": 64, \"bits\": 8}}"),
               SPECDEC_ERR_UNSUPPORTED, "model.layers.0.mlp.down_proj");
    expect_bad("rope_scaling", edit("unknown_key", "1, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}"),
               SPECDEC_ERR_UNSUPPORTED, "rope_scaling");
    expect_bad("sliding window", edit("unknown_key", "1, \"use_sliding_window\": true"), SPECDEC_ERR_UNSUPPORTED, "use_sliding_window");
    expect_bad("mtp negative", edit("unknown_key", "1, \"mtp_num_hidden_layers\": -1"), SPECDEC_ERR_CONFIG, "mtp_num_hidden_layers");
}

/* transformers 5 writes RoPE under "rope_parameters" and the dtype as "dtype" (null allowed); both
 * generations must give the same config, and a RoPE variant we do not implement is refused by name. */
static void test_rope_parameters(void) {
    sd_config v4, v5;
    specdec_err e = {0};
    CHECK(parse(BASE, &v4, &e) == SPECDEC_OK, "4.x: %s", e.msg);
    char buf[4096];
    char v5js[4096];
    snprintf(v5js, sizeof v5js, "%s", edit("torch_dtype", NULL));
    /* v5js: BASE without torch_dtype; now drop rope_theta too and add the v5 keys */
    char *rt = strstr(v5js, "\"rope_theta\": 1000000,");
    CHECK(rt != NULL, "fixture");
    if (rt) memmove(rt, rt + strlen("\"rope_theta\": 1000000,"), strlen(rt + strlen("\"rope_theta\": 1000000,")) + 1);
    v5js[strlen(v5js) - 1] = 0;
    snprintf(buf, sizeof buf, "%s, \"dtype\": \"bfloat16\", \"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}}", v5js);
    CHECK(strstr(buf, "torch_dtype") == NULL && strstr(buf, "\"rope_theta\": 1000000,") == NULL, "fixture is v5 only: %s", buf);
    CHECK(parse(buf, &v5, &e) == SPECDEC_OK, "5.x: %s", e.msg);
    CHECK(v5.rope_theta == 1e6 && v5.dtype == SPECDEC_DTYPE_BF16, "5.x theta %g dtype %d", v5.rope_theta, (int)v5.dtype);
    CHECK(memcmp(&v4, &v5, sizeof v4) == 0, "4.x and 5.x configs parse to the same struct");

    /* dtype may be null in 5.x: F32 (the default) */
    snprintf(buf, sizeof buf, "%s, \"dtype\": null, \"rope_parameters\": {\"rope_theta\": 10000, \"rope_type\": \"default\"}}", v5js);
    CHECK(parse(buf, &v5, &e) == SPECDEC_OK && v5.rope_theta == 1e4, "null dtype: %s", e.msg);
    /* the older "type" key, and both places agreeing */
    CHECK(parse(edit("unknown_key", "1, \"rope_parameters\": {\"rope_theta\": 1000000, \"type\": \"default\"}"), &v5, &e) == SPECDEC_OK,
          "type key + agreeing theta: %s", e.msg);
    CHECK(parse(edit("unknown_key", "1, \"rope_scaling\": {\"rope_type\": \"default\"}"), &v5, &e) == SPECDEC_OK,
          "4.x rope_scaling of type default: %s", e.msg);

    /* refusals, each naming what it refuses: the value given to a key added to the 4.x file */
    static const struct { const char *what, *val; specdec_status want; const char *needle; } bad[] = {
        {"yarn", "1, \"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"yarn\", \"factor\": 4.0}",
         SPECDEC_ERR_UNSUPPORTED, "yarn"},
        {"linear (type key)", "1, \"rope_parameters\": {\"type\": \"linear\", \"factor\": 2.0}", SPECDEC_ERR_UNSUPPORTED,
         "linear"},
        {"scaling key under default", "1, \"rope_parameters\": {\"rope_type\": \"default\", \"factor\": 2.0}",
         SPECDEC_ERR_UNSUPPORTED, "rope_parameters.factor"},
        {"partial rotary", "1, \"rope_parameters\": {\"rope_type\": \"default\", \"partial_rotary_factor\": 0.5}",
         SPECDEC_ERR_UNSUPPORTED, "partial_rotary_factor"},
        {"per layer type", "1, \"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\"}}",
         SPECDEC_ERR_UNSUPPORTED, "full_attention"},
        {"theta disagrees", "1, \"rope_parameters\": {\"rope_theta\": 10000}", SPECDEC_ERR_CONFIG,
         "rope_parameters.rope_theta"},
        {"rope_type not a string", "1, \"rope_parameters\": {\"rope_type\": 3}", SPECDEC_ERR_CONFIG,
         "rope_parameters.rope_type"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_bad(bad[i].what, edit("unknown_key", bad[i].val), bad[i].want, bad[i].needle);
    snprintf(buf, sizeof buf, "%s, \"rope_parameters\": {\"rope_type\": \"default\"}}", v5js);
    expect_bad("no theta anywhere", buf, SPECDEC_ERR_CONFIG, "rope_theta");
}

int main(void) {
    test_valid();
    test_bad();
    test_rope_parameters();
    return check_finish("test_config");
}
