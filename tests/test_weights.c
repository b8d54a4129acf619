/* test_weights.c: sd_weights_bind on tiny random Qwen3 models written with the safetensors
 * writer (V=64 H=32 I=48 L=2 nh=4 nkv=2 hd=8): f32 and bf16, tied and untied, with and without an
 * MTP module; a missing tensor, a shape contradicting the config and a wrong dtype must fail
 * with a message naming the tensor. */
#include "check.h"
#include "tiny_model.h"
#include "model/weights.h"
#include "util/err.h"

typedef struct loaded { sd_config c; sd_st_set *st; sd_weights w; specdec_status status; specdec_err e; } loaded;

static void load(const char *dir, bool want_mtp, loaded *L) {
    memset(L, 0, sizeof *L);
    L->status = sd_config_load_dir(dir, &L->c, &L->e);
    if (L->status == SPECDEC_OK) L->status = sd_st_open_dir(dir, &L->st, &L->e);
    if (L->status == SPECDEC_OK) L->status = sd_weights_bind(&L->c, L->st, want_mtp, &L->w, &L->e);
    if (getenv("SD_VERBOSE") && L->status) fprintf(stderr, "%s\n", L->e.msg);
}
static void unload(loaded *L) { sd_weights_free(&L->w); sd_st_close(L->st); }

/* The bound matrix must reproduce the stored tensor `name` row by row. */
static void check_mat(const sd_st_set *st, const sd_mat *m, const char *name, int rows, int cols) {
    const sd_st_tensor *t = sd_st_find(st, name);
    CHECK(t != NULL, "%s present", name);
    CHECK(m->rows == rows && m->cols == cols && m->bits == 0, "%s: %dx%d bits %d", name, m->rows, m->cols, m->bits);
    if (!t || m->rows != rows || m->cols != cols) return;
    CHECK(m->w == t->data && m->dtype == t->dtype, "%s: points into the mapping", name);
    CHECK(sd_mat_bytes(m) == t->nbytes, "%s: bytes", name);
    float *ref = malloc((size_t)rows * cols * sizeof(float)), *row = malloc((size_t)cols * sizeof(float));
    sd_to_f32(t->dtype, t->data, ref, (size_t)rows * cols);
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        sd_mat_row_f32(m, r, row);
        bad += memcmp(row, ref + (size_t)r * cols, (size_t)cols * sizeof(float)) != 0;
    }
    CHECK(bad == 0, "%s: %d rows differ", name, bad);
    free(ref);
    free(row);
}

static void check_norm(const sd_st_set *st, const float *v, const char *name, int n) {
    const sd_st_tensor *t = sd_st_find(st, name);
    CHECK(t && v, "%s bound", name);
    if (!t || !v) return;
    float *ref = malloc((size_t)n * sizeof(float));
    sd_to_f32(t->dtype, t->data, ref, (size_t)n);
    CHECK(memcmp(ref, v, (size_t)n * sizeof(float)) == 0, "%s: f32 copy differs", name);
    free(ref);
}

static void check_model(const loaded *L, const tm_dims *d) {
    const sd_weights *w = &L->w;
    check_mat(L->st, &w->embed, "model.embed_tokens.weight", d->V, d->H);
    if (d->tied) CHECK(w->lm_head.w == w->embed.w && w->lm_head.rows == d->V, "tied lm_head is the embedding");
    else check_mat(L->st, &w->lm_head, "lm_head.weight", d->V, d->H);
    check_norm(L->st, w->final_norm, "model.norm.weight", d->H);
    for (int l = 0; l < d->L; l++) {
        char nm[128];
        const sd_layer_w *ly = &w->layers[l];
#define NM(s) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, s), nm)
        check_norm(L->st, ly->attn_norm, NM("input_layernorm.weight"), d->H);
        check_norm(L->st, ly->mlp_norm, NM("post_attention_layernorm.weight"), d->H);
        check_norm(L->st, ly->q_norm, NM("self_attn.q_norm.weight"), d->hd);
        check_norm(L->st, ly->k_norm, NM("self_attn.k_norm.weight"), d->hd);
        check_mat(L->st, &ly->q, NM("self_attn.q_proj.weight"), d->nh * d->hd, d->H);
        check_mat(L->st, &ly->k, NM("self_attn.k_proj.weight"), d->nkv * d->hd, d->H);
        check_mat(L->st, &ly->v, NM("self_attn.v_proj.weight"), d->nkv * d->hd, d->H);
        check_mat(L->st, &ly->o, NM("self_attn.o_proj.weight"), d->H, d->nh * d->hd);
        check_mat(L->st, &ly->gate, NM("mlp.gate_proj.weight"), d->I, d->H);
        check_mat(L->st, &ly->up, NM("mlp.up_proj.weight"), d->I, d->H);
        check_mat(L->st, &ly->down, NM("mlp.down_proj.weight"), d->H, d->I);
#undef NM
    }
}

static void good_model(specdec_dtype dt, bool tied, bool mtp) {
    char dir[64];
    tm_mkdtemp(dir, sizeof dir);
    tm_dims d = tm_default_dims();
    d.dt = dt;
    d.tied = tied;
    d.mtp = mtp;
    CHECK(tm_write_model(dir, &d, 7, NULL, NULL, NULL, 0) == 0, "write model");
    loaded L;
    load(dir, true, &L);
    CHECK(L.status == SPECDEC_OK, "bind %s tied=%d mtp=%d: %s", specdec_dtype_name(dt), tied, mtp, L.e.msg);
    if (L.status == SPECDEC_OK) {
        check_model(&L, &d);
        CHECK((L.w.mtp != NULL) == mtp, "mtp bound iff present");
        if (L.w.mtp) {
            CHECK_EQ_INT(L.w.mtp->n_layers, 1);
            check_mat(L.st, &L.w.mtp->fc, "mtp.fc.weight", d.H, 2 * d.H);
            check_mat(L.st, &L.w.mtp->layers[0].down, "mtp.layers.0.mlp.down_proj.weight", d.H, d.I);
            check_norm(L.st, L.w.mtp->norm, "mtp.norm.weight", d.H);
            check_norm(L.st, L.w.mtp->pre_fc_norm_embedding, "mtp.pre_fc_norm_embedding.weight", d.H);
            check_norm(L.st, L.w.mtp->pre_fc_norm_hidden, "mtp.pre_fc_norm_hidden.weight", d.H);
        }
    }
    unload(&L);
    if (mtp) { /* not requested: not bound */
        load(dir, false, &L);
        CHECK(L.status == SPECDEC_OK && L.w.mtp == NULL, "want_mtp=false leaves mtp NULL");
        unload(&L);
    }
    tm_rm_rf(dir);
}

/* Build a model with one defect and expect status `want` with `needle` in the message. */
static void bad_model(const char *what, tm_dims d, const char *skip, const char *reshape, const char *redtype,
                      specdec_status want, const char *needle, const char *needle2) {
    char dir[64];
    tm_mkdtemp(dir, sizeof dir);
    CHECK(tm_write_model(dir, &d, 3, skip, reshape, redtype, 0) == 0, "%s: write", what);
    loaded L;
    load(dir, true, &L);
    CHECK(L.status == want, "%s: status %s, want %s (%s)", what, specdec_status_name(L.status), specdec_status_name(want), L.e.msg);
    CHECK(strstr(L.e.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, L.e.msg, needle);
    if (needle2) CHECK(strstr(L.e.msg, needle2) != NULL, "%s: message '%s' lacks '%s'", what, L.e.msg, needle2);
    CHECK(L.w.layers == NULL && L.w.f32_pool == NULL, "%s: weights released on failure", what);
    unload(&L);
    tm_rm_rf(dir);
}

int main(void) {
    good_model(SPECDEC_DTYPE_F32, false, false);
    good_model(SPECDEC_DTYPE_BF16, true, false);
    good_model(SPECDEC_DTYPE_F16, false, true);
    good_model(SPECDEC_DTYPE_BF16, true, true);

    tm_dims d = tm_default_dims();
    bad_model("missing k_norm", d, "model.layers.1.self_attn.k_norm.weight", NULL, NULL, SPECDEC_ERR_MISSING,
              "'model.layers.1.self_attn.k_norm.weight'", NULL);
    bad_model("missing down_proj", d, "model.layers.0.mlp.down_proj.weight", NULL, NULL, SPECDEC_ERR_MISSING,
              "'model.layers.0.mlp.down_proj.weight'", NULL);
    bad_model("untied without lm_head", d, "lm_head.weight", NULL, NULL, SPECDEC_ERR_MISSING, "'lm_head.weight'", NULL);
    bad_model("missing embedding", d, "model.embed_tokens.weight", NULL, NULL, SPECDEC_ERR_MISSING, "'model.embed_tokens.weight'", NULL);
    bad_model("up_proj shape", d, NULL, "model.layers.1.mlp.up_proj.weight", NULL, SPECDEC_ERR_SHAPE,
              "tensor 'model.layers.1.mlp.up_proj.weight' has shape [96, 32], config implies [48, 32]", NULL);
    bad_model("norm shape", d, NULL, "model.norm.weight", NULL, SPECDEC_ERR_SHAPE,
              "tensor 'model.norm.weight' has shape [64], config implies [32]", NULL);
    bad_model("o_proj dtype", d, NULL, NULL, "model.layers.0.self_attn.o_proj.weight", SPECDEC_ERR_DTYPE,
              "'model.layers.0.self_attn.o_proj.weight'", "I32");
    bad_model("norm dtype", d, NULL, NULL, "model.layers.1.input_layernorm.weight", SPECDEC_ERR_DTYPE,
              "'model.layers.1.input_layernorm.weight'", "I32");
    tm_dims dm = d;
    dm.mtp = 1;
    bad_model("mtp missing fc", dm, "mtp.fc.weight", NULL, NULL, SPECDEC_ERR_MISSING, "'mtp.fc.weight'", NULL);
    bad_model("mtp layer shape", dm, NULL, "mtp.layers.0.self_attn.q_proj.weight", NULL, SPECDEC_ERR_SHAPE,
              "'mtp.layers.0.self_attn.q_proj.weight' has shape [64, 32], config implies [32, 32]", NULL);
    /* A tied model: lm_head.weight absent is fine, the missing tensor is reported otherwise. */
    tm_dims dt = d;
    dt.tied = true;
    bad_model("tied missing final norm", dt, "model.norm.weight", NULL, NULL, SPECDEC_ERR_MISSING, "'model.norm.weight'", NULL);
    return check_finish("test_weights");
}
