/* inflate.c: specdec_inflate, a model directory -> the same function at a bigger shape (the
 * published Qwen3 presets or explicit dimensions), so that the cost of a big model can be
 * measured with the predictions of a small trained one. The target shape is checked against the
 * source (never smaller, same head_dim), the plan is built (inflate_plan.c: what every element
 * holds, and why the function is preserved), the tensors are streamed into a temporary sibling of
 * OUT (inflate_fill.c), then config.json (the source's keys, the new shape, a record of the
 * inflation) and the tokenizer files are written and the directory is renamed into place. */
#include "specdec.h"
#include "convert/inflate.h"
#include "io/outdir.h"
#include "quant/quant.h"
#include "util/err.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

specdec_inflate_params specdec_inflate_default_params(void) {
    specdec_inflate_params p;
    memset(&p, 0, sizeof p);
    p.tie = SPECDEC_INFLATE_TIE_KEEP;
    p.max_shard_bytes = 4ull << 30;
    return p;
}

typedef struct preset { const char *name; int H, I, L, nh, nkv, hd; bool tied; } preset;
static const preset presets[] = {
    {"qwen3-1.7b", 2048, 6144, 28, 16, 8, 128, true},
    {"qwen3-8b", 4096, 12288, 36, 32, 8, 128, false},
    {"qwen3-32b", 5120, 25600, 64, 64, 8, 128, false},
};

specdec_status specdec_inflate_preset(const char *name, specdec_inflate_params *p, specdec_err *err) {
    if (!name || !p) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_inflate_preset: NULL argument");
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const preset *s = &presets[i];
        if (strcmp(name, s->name)) continue;
        p->hidden_size = s->H;
        p->intermediate_size = s->I;
        p->n_layers = s->L;
        p->n_heads = s->nh;
        p->n_kv_heads = s->nkv;
        p->head_dim = s->hd;
        p->tie = s->tied ? SPECDEC_INFLATE_TIED : SPECDEC_INFLATE_UNTIED;
        return SPECDEC_OK;
    }
    return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: unknown shape '%s' (known: qwen3-1.7b, qwen3-8b, qwen3-32b)", name);
}

/* One dimension of the target: 0 keeps the source's; smaller than the source is refused. */
static specdec_status grow(const char *key, int want, int have, int *out, specdec_err *err) {
    if (want < 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: %s = %d is negative", key, want);
    if (want == 0) want = have;
    if (want < have)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: %s: the target's %d is smaller than the source's %d; inflation only grows a model",
                       key, want, have);
    *out = want;
    return SPECDEC_OK;
}

/* The target config: the source's with the shape, tie and output quantization of p. */
static specdec_status target_config(const sd_config *s, const specdec_inflate_params *p, sd_config *d, specdec_err *err) {
    *d = *s;
    SD_TRY(grow("hidden_size", p->hidden_size, s->hidden_size, &d->hidden_size, err));
    SD_TRY(grow("intermediate_size", p->intermediate_size, s->intermediate_size, &d->intermediate_size, err));
    SD_TRY(grow("num_hidden_layers", p->n_layers, s->n_layers, &d->n_layers, err));
    SD_TRY(grow("num_attention_heads", p->n_heads, s->n_heads, &d->n_heads, err));
    SD_TRY(grow("num_key_value_heads", p->n_kv_heads, s->n_kv_heads, &d->n_kv_heads, err));
    if (p->head_dim && p->head_dim != s->head_dim)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: head_dim: the target's %d differs from the source's %d; "
                       "inflation keeps head_dim (RoPE and q/k norms act over it)", p->head_dim, s->head_dim);
    if (d->n_heads % d->n_kv_heads)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                       d->n_heads, d->n_kv_heads);
    if (p->tie == SPECDEC_INFLATE_TIED && !s->tie_word_embeddings)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: tie_word_embeddings: the source has an lm_head of its own, which "
                       "cannot be folded into the embedding; ask for an untied target");
    if (p->tie != SPECDEC_INFLATE_TIE_KEEP) d->tie_word_embeddings = p->tie == SPECDEC_INFLATE_TIED;
    if (p->bits) {
        if (s->quant_bits)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: the source is already quantized (%d-bit, group %d); "
                           "quantizing on the way is for dense sources (quantize_mtp uses the source's bits)", s->quant_bits, s->quant_group);
        if (p->bits != 4 && p->bits != 8)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: bits %d not supported (4 or 8)", p->bits);
        if (p->group_size != 32 && p->group_size != 64 && p->group_size != 128)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: group size %d not supported (32, 64 or 128)", p->group_size);
        d->quant_bits = p->bits;
        d->quant_group = p->group_size;
    } else if (p->quantize_mtp && !s->quant_bits) {
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "inflate: quantize_mtp on a dense source needs bits and a group size");
    }
    return SPECDEC_OK;
}

/* The shape keys of config c into o (head_dim too when with_head_dim), in config.json's names. */
static void set_shape_keys(json_t *o, const sd_config *c, bool with_head_dim) {
    json_object_set_new(o, "hidden_size", json_integer(c->hidden_size));
    json_object_set_new(o, "intermediate_size", json_integer(c->intermediate_size));
    json_object_set_new(o, "num_hidden_layers", json_integer(c->n_layers));
    json_object_set_new(o, "num_attention_heads", json_integer(c->n_heads));
    json_object_set_new(o, "num_key_value_heads", json_integer(c->n_kv_heads));
    if (with_head_dim) json_object_set_new(o, "head_dim", json_integer(c->head_dim));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
}

/* IN's config.json with the target's shape keys, a record of the inflation, and the output's
 * quantization block. Keys of the source that count layers follow the new layer count. */
typedef struct cfg_edit { const sd_config *s, *d; const specdec_inflate_params *p; } cfg_edit;
static void edit_config(json_t *root, void *user) {
    const cfg_edit *ce = user;
    const sd_config *s = ce->s, *d = ce->d;
    json_t *rec = json_object();
    set_shape_keys(rec, s, false);
    json_object_set_new(rec, "fill", json_string(ce->p->fill_zero ? "zero" : "random"));
    json_object_set_new(rec, "seed", json_integer((json_int_t)ce->p->seed));
    json_object_set_new(root, "inflated_from", rec);
    set_shape_keys(root, d, true);
    if (json_is_integer(json_object_get(root, "max_window_layers")))
        json_object_set_new(root, "max_window_layers", json_integer(d->n_layers));
    json_t *lt = json_object_get(root, "layer_types");   /* transformers 5: one entry per layer */
    if (json_is_array(lt) && json_array_size(lt) > 0)
        while (json_array_size(lt) < (size_t)d->n_layers) json_array_append(lt, json_array_get(lt, json_array_size(lt) - 1));
    if (d->quant_bits) sd_quant_config_set(root, d->quant_bits, d->quant_group);
}

/* The files that describe the vocabulary and generation: valid for any shape. A model card
 * (README) describes the source model, so it stays behind. */
static bool is_vocab_file(const char *n) {
    static const char *pre[] = {"tokenizer", "special_tokens_map", "vocab.", "merges.", "added_tokens", "chat_template",
                                "generation_config.json", "draft_vocab.json"};
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
        if (!strncmp(n, pre[i], strlen(pre[i]))) return !strstr(n, ".tmp");
    return false;
}

specdec_status specdec_inflate(const char *in_dir, const char *out_dir, const specdec_inflate_params *params,
                               specdec_err *err) {
    if (!in_dir || !out_dir) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_inflate: NULL directory");
    const specdec_inflate_params p = params ? *params : specdec_inflate_default_params();
    sd_outdir od;
    sd_config s, d;
    sd_st_set *st = NULL;
    sd_weights w;
    sd_infl_plan plan;
    sd_st_stream *stream = NULL;
    memset(&w, 0, sizeof w);
    memset(&plan, 0, sizeof plan);
    specdec_status r = sd_outdir_init(&od, out_dir, err);
    if (r != SPECDEC_OK) goto done;
    /* Validate the source and the target shape fully before writing anything. */
    if ((r = sd_config_load_dir(in_dir, &s, err)) != SPECDEC_OK) goto done;
    if ((r = sd_st_open_dir(in_dir, &st, err)) != SPECDEC_OK) goto done;
    if ((r = sd_weights_bind(&s, st, true, &w, err)) != SPECDEC_OK) { sd_err_prefix(err, "%s", in_dir); goto done; }
    if ((r = target_config(&s, &p, &d, err)) != SPECDEC_OK) goto done;
    const sd_infl_opts o = {&s, &d, st, &w, p.fill_zero, p.seed, p.quantize_mtp};
    if ((r = sd_inflate_plan(&o, &plan, err)) != SPECDEC_OK) goto done;

    if ((r = sd_outdir_mktemp(&od, err)) != SPECDEC_OK) goto done;
    if ((r = sd_st_stream_open(plan.w, od.tmp, p.max_shard_bytes, &stream, err)) != SPECDEC_OK) goto done;
    r = sd_inflate_fill(&plan, stream, p.n_threads, p.progress, p.progress_user, err);
    if (r == SPECDEC_OK) r = sd_st_stream_finish(stream, err);
    else sd_st_stream_abort(stream);
    stream = NULL;
    cfg_edit ce = {&s, &d, &p};
    if (r == SPECDEC_OK) r = sd_rewrite_config(in_dir, od.tmp, edit_config, &ce, err);
    if (r == SPECDEC_OK) r = sd_copy_side_files(in_dir, od.tmp, is_vocab_file, err);
    if (r == SPECDEC_OK) r = sd_outdir_commit(&od, err);
done:
    sd_outdir_end(&od);
    sd_inflate_plan_free(&plan);
    sd_weights_free(&w);
    sd_st_close(st);
    return r;
}
