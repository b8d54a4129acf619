/* test_gen_config.c: generation_config.json gives the sampling defaults and extra end ids: each
 * key over the library default (and flagged), do_sample false meaning greedy, eos as an id or a
 * list; bad values fail naming the file and the key; an absent file changes nothing. */
#include "check.h"
#include "tiny_model.h"
#include "model/gen_config.h"
#include "util/err.h"

static specdec_generation_config fresh(void) {
    specdec_generation_config g;
    memset(&g, 0, sizeof g);
    g.sampling = specdec_sampling_default_params();
    return g;
}

static specdec_status parse(const char *js, specdec_generation_config *g, specdec_err *e) {
    *g = fresh();
    return sd_gen_config_parse(js, strlen(js), "dir/generation_config.json", 1000, g, e);
}

static void expect_bad(const char *js, const char *key) {
    specdec_generation_config g;
    specdec_err e = {0};
    specdec_status st = parse(js, &g, &e);
    CHECK(st != SPECDEC_OK, "%s: accepted", js);
    CHECK(strstr(e.msg, "dir/generation_config.json") && strstr(e.msg, key), "%s: message '%s' lacks the file or '%s'", js, e.msg, key);
}

int main(void) {
    specdec_generation_config g;
    specdec_err e = {0};
    /* Qwen3's own file */
    CHECK(parse("{\"do_sample\": true, \"temperature\": 0.6, \"top_k\": 20, \"top_p\": 0.95, \"eos_token_id\": [151645, 151643],"
                " \"bos_token_id\": 151643, \"transformers_version\": \"4.51.0\"}", &g, &e) != SPECDEC_OK,
          "eos ids past the vocabulary accepted");
    CHECK(parse("{\"do_sample\": true, \"temperature\": 0.6, \"top_k\": 20, \"top_p\": 0.95, \"eos_token_id\": [7, 9]}", &g, &e) == SPECDEC_OK,
          "qwen3-style: %s", e.msg);
    CHECK(g.sampling.temperature == 0.6f && g.sampling.top_k == 20 && g.sampling.top_p == 0.95f && g.sampling.min_p == 0,
          "values %g %d %g %g", g.sampling.temperature, g.sampling.top_k, g.sampling.top_p, g.sampling.min_p);
    CHECK(g.from_file[SPECDEC_GEN_TEMPERATURE] && g.from_file[SPECDEC_GEN_TOP_K] && g.from_file[SPECDEC_GEN_TOP_P] &&
          !g.from_file[SPECDEC_GEN_MIN_P], "sources");
    CHECK(g.n_eos == 2 && g.eos_ids[0] == 7 && g.eos_ids[1] == 9, "eos list");
    /* do_sample false: greedy even with a temperature */
    CHECK(parse("{\"do_sample\": false, \"temperature\": 0.7, \"min_p\": 0.1, \"eos_token_id\": 3}", &g, &e) == SPECDEC_OK, "%s", e.msg);
    CHECK(g.sampling.temperature == 0 && g.greedy_by_do_sample && g.sampling.min_p == 0.1f, "do_sample false -> greedy");
    CHECK(g.n_eos == 1 && g.eos_ids[0] == 3, "eos int");
    /* do_sample true and no temperature: transformers' 1.0 */
    CHECK(parse("{\"do_sample\": true}", &g, &e) == SPECDEC_OK && g.sampling.temperature == 1.0f, "do_sample true alone");
    /* nothing set: the library defaults, nothing flagged */
    CHECK(parse("{\"bos_token_id\": 1}", &g, &e) == SPECDEC_OK && g.sampling.temperature == 0 && g.sampling.top_p == 1 &&
          !g.from_file[SPECDEC_GEN_TEMPERATURE] && g.n_eos == 0, "empty");

    expect_bad("{\"temperature\": \"hot\"}", "temperature");
    expect_bad("{\"temperature\": -1}", "temperature");
    expect_bad("{\"top_k\": 2.5}", "top_k");
    expect_bad("{\"top_p\": 0}", "top_p");
    expect_bad("{\"top_p\": 1.5}", "top_p");
    expect_bad("{\"min_p\": -0.1}", "min_p");
    expect_bad("{\"do_sample\": 1}", "do_sample");
    expect_bad("{\"eos_token_id\": \"x\"}", "eos_token_id");
    expect_bad("{\"eos_token_id\": [1, 1000]}", "eos_token_id");
    expect_bad("{\"temperature\": 0.5,\n \"top_k\": }", "line 2");

    /* from a directory: absent is fine (present false), a bad file fails naming it */
    char dir[64];
    tm_mkdtemp(dir, sizeof dir);
    g = fresh();
    CHECK(sd_gen_config_load_dir(dir, 1000, &g, &e) == SPECDEC_OK && !g.present, "absent file: %s", e.msg);
    tm_write_file(dir, "generation_config.json", "{\"top_k\": -3}", 13);
    g = fresh();
    CHECK(sd_gen_config_load_dir(dir, 1000, &g, &e) == SPECDEC_ERR_CONFIG && strstr(e.msg, "generation_config.json") &&
          strstr(e.msg, "top_k"), "bad file: %s", e.msg);
    tm_rm_rf(dir);

    /* through specdec_model_load: the model's defaults in specdec_model_gen_default_params, a bad
     * file failing the load naming it */
    tm_mkdtemp(dir, sizeof dir);
    tm_dims d = tm_default_dims();
    CHECK(tm_write_model(dir, &d, 3, NULL, NULL, NULL, 0) == 0, "tiny model");
    const char *gc = "{\"do_sample\": true, \"temperature\": 0.6, \"top_k\": 20, \"top_p\": 0.95}";
    tm_write_file(dir, "generation_config.json", gc, strlen(gc));
    specdec_model *m = NULL;
    CHECK(specdec_model_load(dir, NULL, &m, &e) == SPECDEC_OK, "load: %s", e.msg);
    if (m) {
        specdec_gen_params gp = specdec_model_gen_default_params(m);
        CHECK(gp.sampling.temperature == 0.6f && gp.sampling.top_k == 20 && gp.sampling.top_p == 0.95f && gp.max_tokens == 128,
              "model defaults %g %d %g", gp.sampling.temperature, gp.sampling.top_k, gp.sampling.top_p);
        specdec_generation_config g2;
        specdec_model_generation_config(m, &g2);
        CHECK(g2.present && g2.from_file[SPECDEC_GEN_TOP_K] && !g2.from_file[SPECDEC_GEN_MIN_P], "sources through the model");
        specdec_model_free(m);
        m = NULL;
    }
    CHECK(specdec_model_gen_default_params(NULL).sampling.temperature == 0, "no model: the library defaults");
    tm_write_file(dir, "generation_config.json", "{\"min_p\": 2}", 12);
    CHECK(specdec_model_load(dir, NULL, &m, &e) == SPECDEC_ERR_CONFIG && strstr(e.msg, "generation_config.json") && strstr(e.msg, "min_p"),
          "bad file at load: %s", e.msg);
    specdec_model_free(m);
    tm_rm_rf(dir);
    return check_finish("test_gen_config");
}
