/* config.h: the parts of a Hugging Face Qwen3 config.json that specdec uses. */
#ifndef SD_CONFIG_H
#define SD_CONFIG_H
#include <stdbool.h>
#include <stddef.h>
#include "specdec.h"

#define SD_MAX_EOS 8

typedef struct sd_config {
    char model_type[32];       /* "qwen3" */
    int vocab_size;            /* V */
    int hidden_size;           /* H */
    int intermediate_size;     /* I */
    int n_layers;              /* L */
    int n_heads;               /* nh */
    int n_kv_heads;            /* nkv; nh % nkv == 0 */
    int head_dim;              /* hd (Qwen3 states it, often != H / nh; only when absent H / nh) */
    float rms_norm_eps;
    double rope_theta;
    int max_position_embeddings;
    bool tie_word_embeddings;
    int bos_token_id;          /* -1 when null/absent */
    int n_eos;
    int eos_token_id[SD_MAX_EOS];
    specdec_dtype dtype;       /* torch_dtype / dtype; F32 when absent */
    int quant_bits;            /* 0 = not quantized */
    int quant_group;
    int mtp_n_layers;          /* 0 = no drafter module */
} sd_config;

/* Parse config.json text. `path` is used in messages only. Unknown keys are ignored; missing or
 * out-of-range required keys fail with SPECDEC_ERR_CONFIG naming the key; unknown model_type
 * fails with SPECDEC_ERR_UNSUPPORTED; malformed JSON with SPECDEC_ERR_FORMAT (line, column). */
specdec_status sd_config_parse(const char *json, size_t len, const char *path, sd_config *c,
                               specdec_err *err);
/* Read and parse DIR/config.json. */
specdec_status sd_config_load_dir(const char *dir, sd_config *c, specdec_err *err);

#endif
