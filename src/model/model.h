/* model.h: a loaded model: its config and its weights as plain structs of pointers into the
 * mmapped safetensors (host memory). Running it needs a context (ctx.h), which puts the weights on
 * a backend. */
#ifndef SD_MODEL_H
#define SD_MODEL_H
#include "specdec.h"
#include "model/config.h"
#include "model/weights.h"
#include "io/safetensors.h"

struct specdec_model {
    sd_config cfg;
    sd_st_set *st;
    sd_weights w;        /* host */
    specdec_generation_config gen;   /* generation_config.json over the library defaults */
    char dir[1024];
};

/* Bytes one forward row reads of layer L's weights as held (matrices in their format, the four
 * norm vectors as f32): the decode floor's terms (specdec_model_info.decode_bytes_per_token,
 * specdec_ctx_drafter_step_bytes). */
uint64_t sd_layer_bytes(const sd_layer_w *L, const sd_config *c);

#endif
