/* cmd_score.c: `specdec score -m DIR -p TEXT --ids JSON|@FILE [--top K]`: run the target over the
 * prompt and a given continuation, and print for each continuation token the logits that chose
 * it: one JSON line per token, {"i", "id", "logit", "rank", "top": [[id, logit], ...]} (rank 0 =
 * the greedy choice). Used to trace a divergence between two runs to rounding: the top-2 gap at
 * the first differing position (tools/inflate/agree.sh). */
#include "cli.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ids from a JSON array text, or from the file named after '@'. */
static int parse_ids(const char *arg, int32_t **ids, int *n) {
    json_error_t je;
    json_t *a = arg[0] == '@' ? json_load_file(arg + 1, 0, &je) : json_loads(arg, 0, &je);
    if (!json_is_array(a)) { json_decref(a); return cli_fail("--ids: not a JSON array of token ids (%s)", a ? "not an array" : je.text); }
    *n = (int)json_array_size(a);
    *ids = malloc(sizeof(int32_t) * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            json_decref(a);
            return cli_fail("--ids: element %d is not a token id", i);
        }
        (*ids)[i] = (int32_t)json_integer_value(v);
    }
    json_decref(a);
    return 0;
}

/* The JSON line for continuation token i (logits row l of V floats). */
static void print_row(int i, int32_t id, const float *l, int V, int top) {
    int rank = 0;
    for (int v = 0; v < V; v++) rank += l[v] > l[id] || (l[v] == l[id] && v < id);
    printf("{\"i\": %d, \"id\": %d, \"logit\": %.7g, \"rank\": %d, \"top\": [", i, id, l[id], rank);
    int prev = -1;
    for (int k = 0; k < top; k++) {   /* k-th largest, ties to the lower id (the greedy rule) */
        int best = -1;
        for (int v = 0; v < V; v++) {
            bool after_prev = prev < 0 || l[v] < l[prev] || (l[v] == l[prev] && v > prev);
            if (after_prev && (best < 0 || l[v] > l[best])) best = v;
        }
        printf("%s[%d, %.7g]", k ? ", " : "", best, l[best]);
        prev = best;
    }
    printf("]}\n");
}

int cmd_score(int argc, char **argv) {
    const char *dir_opt = NULL, *prompt = NULL, *prompt_file = NULL, *ids_arg = NULL;
    char dir[4096];
    specdec_ctx_params cp = specdec_ctx_default_params();
    long top = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int taken = cli_prompt_cmd_option("score", a, val, &cp, &dir_opt, &prompt, &prompt_file, &i);
        if (taken) { if (taken != 1) return taken < 0; continue; }
        if (!strcmp(a, "--ids")) { if (!val) return cli_fail("--ids needs a JSON array or @FILE"); ids_arg = val; i++; }
        else if (!strcmp(a, "--top")) { if (cli_int(a, val, 1, 64, &top)) return 1; i++; }
        else return cli_fail("score: unknown option '%s'", a);
    }
    if (!prompt == !prompt_file || !ids_arg) return cli_fail("score needs the prompt (-p TEXT, -f FILE or -f -) and --ids JSON|@FILE");
    if (cli_model_dir(dir_opt, dir, sizeof dir)) return 1;
    int32_t *cont = NULL, *seq = NULL;
    int n_cont = 0;
    if (parse_ids(ids_arg, &cont, &n_cont)) return 1;
    char *prompt_buf = NULL;
    if (prompt_file) { if (cli_read_prompt(prompt_file, &prompt_buf)) { free(cont); return 1; } prompt = prompt_buf; }
    specdec_err err = {0};
    specdec_tokenizer *tok = NULL;
    specdec_model *m = NULL;
    specdec_ctx *ctx = NULL;
    int32_t *pids = NULL;
    size_t n_p = 0;
    float *logits = NULL;
    int rc = 1;
    if (specdec_tokenizer_load(dir, &tok, &err) || specdec_tokenize(tok, prompt, strlen(prompt), &pids, &n_p, &err) ||
        cli_load_model(dir, false, &m, &err) || cli_ctx_init(m, &cp, &ctx, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    specdec_model_info mi;
    specdec_model_get_info(m, &mi);
    const int V = mi.vocab_size;
    for (int i = 0; i < n_cont; i++)
        if (cont[i] >= V) { rc = cli_fail("--ids: element %d = %d is not below vocab_size %d", i, cont[i], V); goto done; }
    if (n_p == 0) { rc = cli_fail("score: the prompt has no tokens"); goto done; }
    /* positions 0 .. n_p + n_cont - 2; row n_p - 1 + i chose continuation token i */
    const int n_seq = (int)n_p + n_cont - 1, B = 64;
    seq = malloc(sizeof(int32_t) * (size_t)(n_seq > 0 ? n_seq : 1));
    logits = malloc(sizeof(float) * (size_t)B * (size_t)V);
    if (!seq || !logits) { rc = cli_fail("score: out of memory"); goto done; }
    memcpy(seq, pids, sizeof(int32_t) * n_p);
    if (n_cont > 1) memcpy(seq + n_p, cont, sizeof(int32_t) * (size_t)(n_cont - 1));
    for (int p0 = 0; p0 < n_seq; p0 += B) {
        const int T = n_seq - p0 < B ? n_seq - p0 : B;
        if (specdec_ctx_forward(ctx, seq + p0, T, logits, NULL, &err)) { rc = cli_fail_err(&err); goto done; }
        for (int t = 0; t < T; t++) {
            const int i = p0 + t - ((int)n_p - 1);
            if (i >= 0) print_row(i, cont[i], logits + (size_t)t * V, V, (int)top);
        }
    }
    rc = 0;
done:
    free(cont); free(seq); free(pids); free(logits); free(prompt_buf);
    specdec_ctx_free(ctx);
    specdec_model_free(m);
    specdec_tokenizer_free(tok);
    return rc;
}
