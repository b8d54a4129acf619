/* cmd_tokenize.c: `specdec tokenize`: text to ids (JSON array) or, with --decode, ids to text.
 * Needs only tokenizer.json (and tokenizer_config.json) in DIR. */
#include "cli.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int cmd_tokenize(int argc, char **argv) {
    const char *dir_opt = NULL, *text = NULL, *text_file = NULL;
    char dir[4096];
    bool decode = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) return cli_usage("tokenize");
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) dir_opt = argv[++i];
        else if (!strcmp(argv[i], "-p") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) text_file = argv[++i];
        else if (!strcmp(argv[i], "--decode")) decode = true;
        else return cli_fail("tokenize: unknown option '%s'", argv[i]);
    }
    if (!text == !text_file) return cli_fail("tokenize needs the text: -p TEXT, -f FILE or -f - (stdin), one of them");
    if (cli_model_dir(dir_opt, dir, sizeof dir)) return 1;
    char *text_buf = NULL;
    if (text_file) { if (cli_read_prompt(text_file, &text_buf)) return 1; text = text_buf; }
    specdec_err err = {0};
    specdec_tokenizer *tok = NULL;
    if (specdec_tokenizer_load(dir, &tok, &err)) { free(text_buf); return cli_fail_err(&err); }
    int rc = 0;
    if (!decode) {
        int32_t *ids; size_t n;
        if (specdec_tokenize(tok, text, strlen(text), &ids, &n, &err)) rc = cli_fail_err(&err);
        else {
            putchar('[');
            for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
            puts("]");
            free(ids);
        }
    } else {
        json_error_t je;
        json_t *arr = json_loads(text, 0, &je);
        if (!arr) {
            rc = cli_fail("--decode: -p must be a JSON array of token ids (%s at column %d)", je.text, je.column);
        } else if (!json_is_array(arr)) {
            rc = cli_fail("--decode: -p must be a JSON array of token ids, not a JSON %s",
                          json_is_object(arr) ? "object" : "scalar");
        } else {
            size_t n = json_array_size(arr);
            int32_t *ids = malloc(sizeof *ids * (n ? n : 1));
            int V = specdec_tokenizer_vocab_size(tok);
            for (size_t i = 0; i < n && rc == 0; i++) {
                json_t *e = json_array_get(arr, i);
                if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= V)
                    rc = cli_fail("--decode: element %zu is not a token id in [0, %d)", i, V);
                else ids[i] = (int32_t)json_integer_value(e);
            }
            char *out; size_t len;
            if (rc == 0) {
                if (specdec_detokenize(tok, ids, n, &out, &len, &err)) rc = cli_fail_err(&err);
                else { fwrite(out, 1, len, stdout); putchar('\n'); free(out); }
            }
            free(ids);
        }
        json_decref(arr);
    }
    specdec_tokenizer_free(tok);
    free(text_buf);
    return rc;
}
