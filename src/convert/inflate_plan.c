/* inflate_plan.c: the plan of an inflation (inflate.h): which output element copies which source
 * element, and what the rest holds, for every tensor of the target and its mtp.* module.
 *
 * Shapes: source H, I, nh, nkv, hd, L; target H2 >= H, I2 >= I, nh2 >= nh, nkv2, the same hd, L2 >= L.
 * The residual stream x2 (H2) must equal [x, 0]: every output row that writes into it beyond H,
 * every input column of an output projection fed by a padded unit (a padded q head, a padded MLP
 * unit), and the whole output projections of extra layers are ZERO; the embedding's padded columns
 * are ZERO (it is the residual stream's input). Everything that only meets those zeros (padded
 * input columns of q/k/v/gate/up/fc and of an untied LM head, padded rows of q/k/v/gate/up,
 * padded kv heads, the other weights of extra layers) is RANDOM by default: timing on zeros is
 * misleading (sparse-friendly hardware and compressed memory run faster on them), and the function
 * is the same either way.
 *
 * RMSNorm over H2 dims of [x, 0]: mean(x2^2) = mean(x^2) * H/H2, so the hidden-size norm weights
 * are multiplied by sqrt(H/H2) (stored in f32: a bf16 rounding of the product would move every
 * weight by up to 2^-9). rms_norm_eps is kept, so the normalizer becomes
 * 1/sqrt(ms + eps*H2/H) instead of 1/sqrt(ms + eps) (ms = mean(x^2) over the source dims): a
 * relative change of at most eps*(H2/H - 1)/(2*ms), e.g. 6e-6 for eps 1e-6, H2/H = 13.3, ms = 1.
 * q_norm and k_norm act over head_dim, which does not change: copied as they are. */
#include "convert/inflate.h"
#include "util/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Memo of the RMS of dense source matrices (extra layers reuse their donors'). */
#define MEMO_MAX 64
typedef struct bld {
    sd_infl_plan *p;
    const sd_infl_opts *o;
    const sd_mat *memo_m[MEMO_MAX];
    float memo_rms[MEMO_MAX];
    int n_memo;
    /* axes: h (hidden, H2 from H), hd (identity), q (heads), kv (kv heads), im (MLP), voc, fc;
     * n_* are all-fill axes of the same lengths for extra layers */
    const sd_axis *h, *hd, *q, *kv, *im, *voc, *fc, *n_h, *n_hd, *n_q, *n_kv, *n_im;
} bld;

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An axis of n output indices; src[i] = i for i < n_copy, -1 beyond. */
static const sd_axis *axis_new(bld *b, int n, int n_copy, const char *what, specdec_err *err) {
    sd_infl_plan *p = b->p;
    if (p->n_axes == p->cap_axes) {
        int cap = p->cap_axes ? 2 * p->cap_axes : 16;
        sd_axis **a = realloc(p->axes, (size_t)cap * sizeof *a);
        if (!a) { sd_fail(err, SPECDEC_ERR_NOMEM, "inflate: out of memory"); return NULL; }
        p->axes = a;
        p->cap_axes = cap;
    }
    sd_axis *ax = calloc(1, sizeof *ax);
    int *src = malloc((size_t)(n > 0 ? n : 1) * sizeof *src);
    if (!ax || !src) { free(ax); free(src); sd_fail(err, SPECDEC_ERR_NOMEM, "inflate: out of memory"); return NULL; }
    for (int i = 0; i < n; i++) src[i] = i < n_copy ? i : -1;
    ax->n = n;
    ax->src = src;
    ax->what = what;
    p->axes[p->n_axes++] = ax;
    return ax;
}

/* sqrt(3) x the RMS of dense m: uniform values in [-amp, amp] have m's RMS. */
static float dense_amp(bld *b, const sd_mat *m, specdec_err *err) {
    for (int i = 0; i < b->n_memo; i++) if (b->memo_m[i] == m) return b->memo_rms[i];
    float *row = malloc((size_t)m->cols * sizeof *row);
    if (!row) { sd_fail(err, SPECDEC_ERR_NOMEM, "inflate: out of memory"); return -1; }
    double ss = 0;
    for (int r = 0; r < m->rows; r++) {
        sd_mat_row_f32(m, r, row);
        for (int c = 0; c < m->cols; c++) ss += (double)row[c] * row[c];
    }
    free(row);
    double n = (double)m->rows * m->cols;
    float amp = n > 0 && isfinite(ss) ? (float)(sqrt(3.0 * ss / n)) : 0.0f;
    if (b->n_memo < MEMO_MAX) { b->memo_m[b->n_memo] = m; b->memo_rms[b->n_memo++] = amp; }
    return amp;
}

static sd_infl_tensor *push(bld *b, const char *name, specdec_err *err) {
    sd_infl_plan *p = b->p;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 256;
        sd_infl_tensor *t = realloc(p->t, (size_t)cap * sizeof *t);
        if (!t) { sd_fail(err, SPECDEC_ERR_NOMEM, "inflate: out of memory"); return NULL; }
        p->t = t;
        p->cap = cap;
    }
    sd_infl_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->key = mix64(fnv1a(name) ^ mix64(b->o->seed + 0x9e3779b97f4a7c15ull));
    return t;
}

static sd_fill fill_of(const bld *b, sd_fill f) { return b->o->fill_zero ? SD_FILL_ZERO : f; }

/* A quantized output needs every group of G output columns to be all fill, or one whole source
 * group copied in place (the packed words, scale and bias move together). */
static specdec_status check_groups(const sd_infl_tensor *t, specdec_err *err) {
    const int G = t->group, n = t->cols->n;
    if (n % G != 0)
        return sd_fail(err, SPECDEC_ERR_SHAPE, "inflate: tensor '%s': %d input columns (%s) are not a multiple of the quantization group size %d",
                       t->name, n, t->cols->what, G);
    for (int c0 = 0; c0 < n; c0 += G) {
        const int s0 = t->cols->src[c0];
        bool ok = s0 < 0 || s0 % G == 0;
        for (int j = 1; ok && j < G; j++) ok = s0 < 0 ? t->cols->src[c0 + j] < 0 : t->cols->src[c0 + j] == s0 + j;
        if (!ok)
            return sd_fail(err, SPECDEC_ERR_SHAPE,
                           "inflate: tensor '%s': output columns %d..%d (%s) would mix copied and padded columns, or move "
                           "source columns off a boundary of the quantization group size %d; a quantized %s cannot be laid out so",
                           t->name, c0, c0 + G - 1, t->cols->what, G, t->name);
    }
    return SPECDEC_OK;
}

/* Register the writer tensors of t (named after t->name). */
static specdec_status plan_outputs(bld *b, sd_infl_tensor *t, specdec_err *err) {
    sd_st_writer *w = b->p->w;
    char nm[160];
    t->out[0] = sd_st_writer_count(w);
    if (t->vector) {
        int64_t sh[1] = {t->rows->n};
        return sd_st_writer_plan(w, t->name, t->dt, 1, sh, err);
    }
    const int64_t R = t->rows->n, C = t->cols->n;
    snprintf(nm, sizeof nm, "%s.weight", t->name);
    if (!t->bits) {
        int64_t sh[2] = {R, C};
        return sd_st_writer_plan(w, nm, t->dt, 2, sh, err);
    }
    int64_t wsh[2] = {R, C * t->bits / 32}, ssh[2] = {R, C / t->group};
    SD_TRY(sd_st_writer_plan(w, nm, SPECDEC_DTYPE_U32, 2, wsh, err));
    t->out[1] = sd_st_writer_count(w);
    snprintf(nm, sizeof nm, "%s.scales", t->name);
    SD_TRY(sd_st_writer_plan(w, nm, t->dt, 2, ssh, err));
    t->out[2] = sd_st_writer_count(w);
    snprintf(nm, sizeof nm, "%s.biases", t->name);
    return sd_st_writer_plan(w, nm, t->dt, 2, ssh, err);
}

/* A linear `base` (".weight" etc. added) from source m. */
static specdec_status add_linear(bld *b, const char *base, const sd_mat *m, bool mtp, const sd_axis *rows, sd_fill rf,
                                 const sd_axis *cols, sd_fill cf, specdec_err *err) {
    sd_infl_tensor *t = push(b, base, err);
    if (!t) return err ? err->status : SPECDEC_ERR_NOMEM;
    t->src = m;
    t->rows = rows;
    t->cols = cols;
    t->row_fill = fill_of(b, rf);
    t->col_fill = fill_of(b, cf);
    t->dt = m->dtype;
    const sd_config *dst = b->o->dst;
    if (m->bits) {
        t->bits = m->bits;     /* the quantized domain: groups copied as stored */
        t->group = m->group;
    } else if (dst->quant_bits && (mtp ? b->o->quantize_mtp : b->o->src->quant_bits == 0)) {
        t->bits = dst->quant_bits;
        t->group = dst->quant_group;
        t->requant = true;
    }
    if (!m->bits) {
        t->amp = dense_amp(b, m, err);
        if (t->amp < 0) return err ? err->status : SPECDEC_ERR_NOMEM;
    }
    if (t->bits) SD_TRY(check_groups(t, err));
    return plan_outputs(b, t, err);
}

/* A norm weight `name` from source values v (n of them; dtype that of tensor `src_name`). */
static specdec_status add_vector(bld *b, const char *name, const float *v, int n, double scale, const sd_axis *rows,
                                 const char *src_name, specdec_err *err) {
    sd_infl_tensor *t = push(b, name, err);
    if (!t) return err ? err->status : SPECDEC_ERR_NOMEM;
    t->vector = true;
    t->vsrc = v;
    t->vn = n;
    t->vscale = scale;
    t->rows = rows;
    t->row_fill = fill_of(b, SD_FILL_RANDOM);
    const sd_st_tensor *st = sd_st_find(b->o->st, src_name);
    /* a rescaled norm is stored in f32 (exact product); an unscaled one keeps its dtype */
    t->dt = scale != 1.0 || !st ? SPECDEC_DTYPE_F32 : st->dtype;
    return plan_outputs(b, t, err);
}

/* Decoder layer `prefix` from source layer L (`src_prefix` names its tensors). An extra layer
 * (identity residual block) takes L as the donor of magnitudes only: its output projections are
 * zero, everything else fill. */
static specdec_status add_layer(bld *b, const char *prefix, const sd_layer_w *L, const char *src_prefix, bool extra,
                                bool mtp, specdec_err *err) {
    const sd_config *s = b->o->src, *d = b->o->dst;
    const double ns = sqrt((double)s->hidden_size / d->hidden_size);
    char nm[128], sn[128];
#define NM(x) (snprintf(nm, sizeof nm, "%s.%s", prefix, x), nm)
#define SN(x) (snprintf(sn, sizeof sn, "%s.%s", src_prefix, x), sn)
    const sd_axis *h = extra ? b->n_h : b->h, *hd = extra ? b->n_hd : b->hd;
    SD_TRY(add_vector(b, NM("input_layernorm.weight"), L->attn_norm, s->hidden_size, ns, h, SN("input_layernorm.weight"), err));
    SD_TRY(add_linear(b, NM("self_attn.q_proj"), &L->q, mtp, extra ? b->n_q : b->q, SD_FILL_RANDOM, b->h, SD_FILL_RANDOM, err));
    SD_TRY(add_linear(b, NM("self_attn.k_proj"), &L->k, mtp, extra ? b->n_kv : b->kv, SD_FILL_RANDOM, b->h, SD_FILL_RANDOM, err));
    SD_TRY(add_linear(b, NM("self_attn.v_proj"), &L->v, mtp, extra ? b->n_kv : b->kv, SD_FILL_RANDOM, b->h, SD_FILL_RANDOM, err));
    SD_TRY(add_vector(b, NM("self_attn.q_norm.weight"), L->q_norm, s->head_dim, 1.0, hd, SN("self_attn.q_norm.weight"), err));
    SD_TRY(add_vector(b, NM("self_attn.k_norm.weight"), L->k_norm, s->head_dim, 1.0, hd, SN("self_attn.k_norm.weight"), err));
    SD_TRY(add_linear(b, NM("self_attn.o_proj"), &L->o, mtp, extra ? b->n_h : b->h, SD_FILL_ZERO, extra ? b->n_q : b->q,
                      SD_FILL_ZERO, err));
    SD_TRY(add_vector(b, NM("post_attention_layernorm.weight"), L->mlp_norm, s->hidden_size, ns, h,
                      SN("post_attention_layernorm.weight"), err));
    SD_TRY(add_linear(b, NM("mlp.gate_proj"), &L->gate, mtp, extra ? b->n_im : b->im, SD_FILL_RANDOM, b->h, SD_FILL_RANDOM, err));
    SD_TRY(add_linear(b, NM("mlp.up_proj"), &L->up, mtp, extra ? b->n_im : b->im, SD_FILL_RANDOM, b->h, SD_FILL_RANDOM, err));
    SD_TRY(add_linear(b, NM("mlp.down_proj"), &L->down, mtp, extra ? b->n_h : b->h, SD_FILL_ZERO, extra ? b->n_im : b->im,
                      SD_FILL_ZERO, err));
#undef NM
#undef SN
    return SPECDEC_OK;
}

specdec_status sd_inflate_map_heads(int nh, int nkv, int nh2, int nkv2, int *qmap, int *kvsrc, specdec_err *err) {
    if (nkv <= 0 || nh % nkv || nkv2 <= 0 || nh2 % nkv2)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "inflate: num_attention_heads must be a multiple of num_key_value_heads (source %d/%d, target %d/%d)",
                       nh, nkv, nh2, nkv2);
    const int g = nh / nkv, g2 = nh2 / nkv2, c = (g + g2 - 1) / g2;
    if (nkv * c > nkv2)
        return sd_fail(err, SPECDEC_ERR_CONFIG,
                       "inflate: num_key_value_heads: %d target kv heads (groups of %d q heads) cannot hold the source's %d kv heads "
                       "with %d q heads each: that needs %d kv heads (%d copies of each)",
                       nkv2, g2, nkv, g, nkv * c, c);
    for (int m = 0; m < nkv2; m++) kvsrc[m] = -1;
    for (int s = 0; s < nkv; s++)
        for (int k = 0; k < g; k++) {
            const int m = s * c + k / g2;
            kvsrc[m] = s;
            qmap[s * g + k] = m * g2 + k % g2;
        }
    return SPECDEC_OK;
}

/* The attention axes: rows of q_proj / columns of o_proj (q heads) and rows of k/v_proj (kv heads). */
static specdec_status head_axes(bld *b, specdec_err *err) {
    const sd_config *s = b->o->src, *d = b->o->dst;
    const int hd = s->head_dim;
    int *qmap = malloc((size_t)s->n_heads * sizeof *qmap), *kvsrc = malloc((size_t)d->n_kv_heads * sizeof *kvsrc);
    if (!qmap || !kvsrc) { free(qmap); free(kvsrc); return sd_fail(err, SPECDEC_ERR_NOMEM, "inflate: out of memory"); }
    specdec_status st = sd_inflate_map_heads(s->n_heads, s->n_kv_heads, d->n_heads, d->n_kv_heads, qmap, kvsrc, err);
    const sd_axis *q = NULL, *kv = NULL;
    if (st == SPECDEC_OK) {
        q = axis_new(b, d->n_heads * hd, 0, "num_attention_heads x head_dim", err);
        kv = axis_new(b, d->n_kv_heads * hd, 0, "num_key_value_heads x head_dim", err);
        if (!q || !kv) st = err ? err->status : SPECDEC_ERR_NOMEM;
    }
    if (st == SPECDEC_OK) {
        for (int i = 0; i < s->n_heads; i++)
            for (int j = 0; j < hd; j++) q->src[qmap[i] * hd + j] = i * hd + j;
        for (int m = 0; m < d->n_kv_heads; m++)
            for (int j = 0; kvsrc[m] >= 0 && j < hd; j++) kv->src[m * hd + j] = kvsrc[m] * hd + j;
        b->q = q;
        b->kv = kv;
    }
    free(qmap);
    free(kvsrc);
    return st;
}

static specdec_status make_axes(bld *b, specdec_err *err) {
    const sd_config *s = b->o->src, *d = b->o->dst;
    const int H = s->hidden_size, H2 = d->hidden_size, hd = s->head_dim;
    SD_TRY(head_axes(b, err));
    b->h = axis_new(b, H2, H, "hidden_size", err);
    b->hd = axis_new(b, hd, hd, "head_dim", err);
    b->im = axis_new(b, d->intermediate_size, s->intermediate_size, "intermediate_size", err);
    b->voc = axis_new(b, d->vocab_size, s->vocab_size, "vocab_size", err);
    sd_axis *fc = (sd_axis *)axis_new(b, 2 * H2, 0, "2 x hidden_size", err);
    b->fc = fc;
    b->n_h = axis_new(b, H2, 0, "hidden_size", err);
    b->n_hd = axis_new(b, hd, 0, "head_dim", err);
    b->n_q = axis_new(b, d->n_heads * hd, 0, "num_attention_heads x head_dim", err);
    b->n_kv = axis_new(b, d->n_kv_heads * hd, 0, "num_key_value_heads x head_dim", err);
    b->n_im = axis_new(b, d->intermediate_size, 0, "intermediate_size", err);
    if (!b->h || !b->hd || !b->im || !b->voc || !fc || !b->n_h || !b->n_hd || !b->n_q || !b->n_kv || !b->n_im)
        return err ? err->status : SPECDEC_ERR_NOMEM;
    /* mtp.fc's input is concat(embedding, hidden): each half keeps its place in its own half */
    for (int i = 0; i < H; i++) { fc->src[i] = i; fc->src[H2 + i] = H + i; }
    return SPECDEC_OK;
}

specdec_status sd_inflate_plan(const sd_infl_opts *o, sd_infl_plan *p, specdec_err *err) {
    memset(p, 0, sizeof *p);
    p->w = sd_st_writer_new();
    if (!p->w) return sd_fail(err, SPECDEC_ERR_NOMEM, "inflate: out of memory");
    bld b;
    memset(&b, 0, sizeof b);
    b.p = p;
    b.o = o;
    const sd_config *s = o->src, *d = o->dst;
    const sd_weights *w = o->w;
    const double ns = sqrt((double)s->hidden_size / d->hidden_size);
    char nm[64], sn[64];
    SD_TRY(make_axes(&b, err));
    SD_TRY(add_linear(&b, "model.embed_tokens", &w->embed, false, b.voc, SD_FILL_RANDOM, b.h, SD_FILL_ZERO, err));
    for (int l = 0; l < d->n_layers; l++) {
        snprintf(nm, sizeof nm, "model.layers.%d", l);
        snprintf(sn, sizeof sn, "model.layers.%d", l % s->n_layers);
        SD_TRY(add_layer(&b, nm, &w->layers[l % s->n_layers], sn, l >= s->n_layers, false, err));
    }
    SD_TRY(add_vector(&b, "model.norm.weight", w->final_norm, s->hidden_size, ns, b.h, "model.norm.weight", err));
    /* tied source: w->lm_head is the embedding; an untied output gets it as a tensor of its own */
    if (!d->tie_word_embeddings)
        SD_TRY(add_linear(&b, "lm_head", &w->lm_head, false, b.voc, SD_FILL_RANDOM, b.h, SD_FILL_RANDOM, err));
    if (w->mtp) {
        const sd_mtp_w *m = w->mtp;
        SD_TRY(add_vector(&b, "mtp.pre_fc_norm_embedding.weight", m->pre_fc_norm_embedding, s->hidden_size, ns, b.h,
                          "mtp.pre_fc_norm_embedding.weight", err));
        SD_TRY(add_vector(&b, "mtp.pre_fc_norm_hidden.weight", m->pre_fc_norm_hidden, s->hidden_size, ns, b.h,
                          "mtp.pre_fc_norm_hidden.weight", err));
        SD_TRY(add_linear(&b, "mtp.fc", &m->fc, true, b.h, SD_FILL_ZERO, b.fc, SD_FILL_RANDOM, err));
        for (int k = 0; k < m->n_layers; k++) {
            snprintf(nm, sizeof nm, "mtp.layers.%d", k);
            SD_TRY(add_layer(&b, nm, &m->layers[k], nm, false, true, err));
        }
        SD_TRY(add_vector(&b, "mtp.norm.weight", m->norm, s->hidden_size, ns, b.h, "mtp.norm.weight", err));
    }
    for (int i = 0; i < sd_st_writer_count(p->w); i++) p->total_bytes += sd_st_writer_nbytes(p->w, i);
    return SPECDEC_OK;
}

void sd_inflate_plan_free(sd_infl_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->n_axes; i++) { free(p->axes[i]->src); free(p->axes[i]); }
    free(p->axes);
    free(p->t);
    sd_st_writer_free(p->w);
    memset(p, 0, sizeof *p);
}
