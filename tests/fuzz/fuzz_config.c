/* fuzz_config.c: config.json on arbitrary bytes, through sd_config_parse (what
 * sd_config_load_dir calls on the file's contents). Both the transformers 4 form (torch_dtype,
 * rope_theta) and the transformers 5 form (dtype, rope_parameters) are in the seed corpus. An
 * accepted config must satisfy the invariants the model code relies on. */
#include "fuzz.h"
#include "model/config.h"
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sd_config c;
    specdec_err err = {0};
    specdec_status st = sd_config_parse((const char *)data, size, "fuzz/config.json", &c, &err);
    if (st != SPECDEC_OK) {
        FUZZ_CHECK(err.msg[0] && strstr(err.msg, "config.json"), "rejection without a message naming the file: '%s'", err.msg);
        return 0;
    }
    FUZZ_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.n_layers > 0, "non-positive size accepted");
    FUZZ_CHECK(c.n_heads > 0 && c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0, "heads %d / kv heads %d accepted",
               c.n_heads, c.n_kv_heads);
    FUZZ_CHECK(c.head_dim > 0, "head_dim %d accepted", c.head_dim);
    FUZZ_CHECK(c.n_eos >= 0 && c.n_eos <= SD_MAX_EOS, "n_eos %d", c.n_eos);
    for (int i = 0; i < c.n_eos; i++)
        FUZZ_CHECK(c.eos_token_id[i] >= 0 && c.eos_token_id[i] < c.vocab_size, "eos id %d outside the vocabulary", c.eos_token_id[i]);
    FUZZ_CHECK(c.bos_token_id >= -1 && c.bos_token_id < c.vocab_size, "bos id %d", c.bos_token_id);
    FUZZ_CHECK(memchr(c.model_type, 0, sizeof c.model_type) != NULL, "model_type not terminated");
    return 0;
}
