/* test_quantize.c: specdec_quantize on tiny random models (bf16 / f16 / f32, with an MTP module).
 * The quantized directory must bind with sd_weights_bind, and every dequantized element must lie
 * within the principled bound: |w - (s*q + b)| <= s/2 (+ f32 rounding of the dequantization),
 * where s and b are the STORED scale and bias; equivalently within s_exact/2 plus the effect of
 * rounding s and b to the model dtype. Also: config.json gains "quantization" and keeps unknown
 * keys, side files are copied, and a non-empty OUT or an already quantized input is refused
 * without touching anything. */
#include "check.h"
#include "tiny_model.h"
#include "model/weights.h"
#include "quant/quant.h"
#include "util/err.h"
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

typedef struct rep { int calls; double worst_rel; } rep;
static void on_report(const char *name, double rel, double mx, void *user) {
    rep *r = user;
    r->calls++;
    if (rel > r->worst_rel) r->worst_rel = rel;
    (void)name; (void)mx;
}

static float load_f(specdec_dtype dt, const void *p, size_t i) {
    float f;
    if (dt == SPECDEC_DTYPE_F32) { memcpy(&f, (const char *)p + 4 * i, 4); return f; }
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * i, 2);
    return dt == SPECDEC_DTYPE_BF16 ? sd_bf16_to_f32(h) : sd_f16_to_f32(h);
}

/* Compare quantized matrix q against the dense original tensor t. */
static void check_qmat(const sd_mat *q, const sd_st_tensor *t, int bits, int G, const char *name) {
    CHECK(q->bits == bits && q->group == G, "%s: bits %d group %d", name, q->bits, q->group);
    CHECK(q->dtype == t->dtype, "%s: scales in the model dtype", name);
    if (q->bits != bits || q->rows != t->shape[0] || q->cols != t->shape[1]) return;
    const int rows = q->rows, cols = q->cols, ng = cols / G;
    const double nb = (double)((1u << bits) - 1u);
    float *orig = malloc((size_t)cols * sizeof(float)), *deq = malloc((size_t)cols * sizeof(float));
    int bad_tight = 0, bad_brief = 0, bad_cover = 0;
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        sd_to_f32(t->dtype, (const char *)t->data + (size_t)r * cols * sd_dtype_size(t->dtype), orig, (size_t)cols);
        sd_mat_row_f32(q, r, deq);
        for (int g = 0; g < ng; g++) {
            float lo = orig[g * G], hi = lo;
            for (int j = 0; j < G; j++) { float x = orig[g * G + j]; if (x < lo) lo = x; if (x > hi) hi = x; }
            const double s = load_f(q->dtype, q->scales, (size_t)r * ng + g), b = load_f(q->dtype, q->biases, (size_t)r * ng + g);
            const double s_exact = ((double)hi - lo) / nb;
            /* f32 rounding of s*q + b: two roundings of values below s*nb + |b| in magnitude */
            const double slop = 4.0 * ldexp(s * nb + fabs(b) + fabs(hi), -24);
            if (!(b <= lo && b + s * nb >= hi - slop)) bad_cover++;
            for (int j = 0; j < G; j++) {
                const double e = fabs((double)orig[g * G + j] - deq[g * G + j]);
                if (e > s / 2 + slop) bad_tight++;
                if (e > s_exact / 2 + nb * fabs(s - s_exact) + fabs(b - lo) + slop) bad_brief++;
                if (s > 0 && e / s > worst) worst = e / s;
            }
        }
    }
    CHECK(bad_tight == 0, "%s: %d elements beyond scale/2", name, bad_tight);
    CHECK(bad_brief == 0, "%s: %d elements beyond scale_exact/2 + rounding of scale/bias", name, bad_brief);
    CHECK(bad_cover == 0, "%s: %d groups whose stored range does not cover [min, max]", name, bad_cover);
    if (getenv("SD_VERBOSE")) fprintf(stderr, "%s: worst error %.4f of scale\n", name, worst);
    CHECK(worst <= 0.5 + 1e-3, "%s: worst error %.4f scale", name, worst);
    free(orig);
    free(deq);
}

static void check_dense_same(const sd_mat *m, const sd_st_tensor *t, const char *name) {
    CHECK(m->bits == 0 && m->dtype == t->dtype, "%s stays dense (bits %d)", name, m->bits);
    if (m->bits) return;
    CHECK(memcmp(m->w, t->data, (size_t)t->nbytes) == 0, "%s copied as stored", name);
}

static int count_tmp_siblings(const char *parent) {
    DIR *d = opendir(parent);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) if (strstr(de->d_name, ".tmp-")) n++;
    if (d) closedir(d);
    return n;
}

/* Quantize IN to OUT with p and verify everything against IN. */
static void quantize_and_check(const char *in, const char *out, const tm_dims *d, specdec_quantize_params p) {
    rep r = {0, 0};
    p.report = on_report;
    p.report_user = &r;
    specdec_err e = {0};
    specdec_status st = specdec_quantize(in, out, &p, &e);
    CHECK(st == SPECDEC_OK, "quantize %d-bit g%d %s: %s", p.bits, p.group_size, specdec_dtype_name(d->dt), e.msg);
    if (st != SPECDEC_OK) return;
    /* linears: 7 per layer (target + mtp when requested) + embed + lm_head */
    int expect = 7 * d->L + (p.quantize_embedding ? 1 : 0) + (d->tied ? 0 : 1) + (d->mtp && p.quantize_mtp ? 8 : 0);
    CHECK_EQ_INT(r.calls, expect);
    CHECK(r.worst_rel < (p.bits == 4 ? 0.2 : 0.02), "rel RMS %.4f", r.worst_rel);

    sd_config ci, co;
    sd_st_set *si = NULL, *so = NULL;
    sd_weights wi, wo;
    memset(&wi, 0, sizeof wi);
    memset(&wo, 0, sizeof wo);
    CHECK(sd_config_load_dir(out, &co, &e) == SPECDEC_OK, "out config: %s", e.msg);
    CHECK(co.quant_bits == p.bits && co.quant_group == p.group_size, "config quantization %d/%d", co.quant_bits, co.quant_group);
    sd_config_load_dir(in, &ci, &e);
    sd_st_open_dir(in, &si, &e);
    sd_weights_bind(&ci, si, true, &wi, &e);
    CHECK(sd_st_open_dir(out, &so, &e) == SPECDEC_OK, "out weights: %s", e.msg);
    st = so ? sd_weights_bind(&co, so, true, &wo, &e) : SPECDEC_ERR_IO;
    CHECK(st == SPECDEC_OK, "bind quantized: %s", e.msg);
    if (st == SPECDEC_OK) {
        const int B = p.bits, G = p.group_size;
        const sd_st_tensor *te = sd_st_find(si, "model.embed_tokens.weight");
        if (p.quantize_embedding) check_qmat(&wo.embed, te, B, G, "embed");
        else check_dense_same(&wo.embed, te, "embed");
        if (!d->tied) check_qmat(&wo.lm_head, sd_st_find(si, "lm_head.weight"), B, G, "lm_head");
        else CHECK(wo.lm_head.w == wo.embed.w, "tied lm_head");
        for (int l = 0; l < d->L; l++) {
            static const char *nm[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
            const sd_mat *ms[7] = {&wo.layers[l].q, &wo.layers[l].k, &wo.layers[l].v, &wo.layers[l].o,
                                   &wo.layers[l].gate, &wo.layers[l].up, &wo.layers[l].down};
            for (int k = 0; k < 7; k++) {
                char full[128];
                snprintf(full, sizeof full, "model.layers.%d.%s.weight", l, nm[k]);
                check_qmat(ms[k], sd_st_find(si, full), B, G, full);
            }
            CHECK(memcmp(wo.layers[l].attn_norm, wi.layers[l].attn_norm, (size_t)d->H * 4) == 0, "norm %d unchanged", l);
            CHECK(memcmp(wo.layers[l].k_norm, wi.layers[l].k_norm, (size_t)d->hd * 4) == 0, "k_norm %d unchanged", l);
        }
        CHECK(memcmp(wo.final_norm, wi.final_norm, (size_t)d->H * 4) == 0, "final norm unchanged");
        CHECK((wo.mtp != NULL) == (d->mtp > 0), "mtp bound");
        if (wo.mtp) {
            const sd_st_tensor *tf = sd_st_find(si, "mtp.fc.weight"), *td = sd_st_find(si, "mtp.layers.0.mlp.down_proj.weight");
            if (p.quantize_mtp) {
                check_qmat(&wo.mtp->fc, tf, B, G, "mtp.fc");
                check_qmat(&wo.mtp->layers[0].down, td, B, G, "mtp down");
            } else {
                check_dense_same(&wo.mtp->fc, tf, "mtp.fc");
                check_dense_same(&wo.mtp->layers[0].down, td, "mtp down");
            }
            CHECK(memcmp(wo.mtp->norm, wi.mtp->norm, (size_t)d->H * 4) == 0, "mtp norm unchanged");
        }
    }
    sd_weights_free(&wi);
    sd_weights_free(&wo);
    sd_st_close(si);
    sd_st_close(so);

    /* config.json: both quantization keys, unknown keys kept; side files copied */
    char pth[512], pin[512];
    snprintf(pth, sizeof pth, "%s/config.json", out);
    json_t *root = json_load_file(pth, 0, NULL);
    json_t *q = json_object_get(root, "quantization"), *qc = json_object_get(root, "quantization_config");
    CHECK(json_integer_value(json_object_get(q, "bits")) == p.bits && json_integer_value(json_object_get(q, "group_size")) == p.group_size,
          "config.json quantization block");
    CHECK(json_integer_value(json_object_get(qc, "bits")) == p.bits, "config.json quantization_config block");
    CHECK(json_is_array(json_object_get(root, "architectures")), "unknown key 'architectures' kept");
    json_decref(root);
    snprintf(pth, sizeof pth, "%s/tokenizer.json", out);
    snprintf(pin, sizeof pin, "%s/tokenizer.json", in);
    CHECK(tm_file_equal(pth, pin), "tokenizer.json copied");
    snprintf(pth, sizeof pth, "%s/README.md", out);
    struct stat sb;
    CHECK(stat(pth, &sb) == 0, "README.md copied");
    snprintf(pth, sizeof pth, "%s/sub", out);
    CHECK(stat(pth, &sb) != 0, "subdirectory not copied");
}

static void make_input(const char *in, const tm_dims *d) {
    CHECK(tm_write_model(in, d, 11, NULL, NULL, NULL, 0) == 0, "write input model");
    const char *tok = "{\"model\": {\"type\": \"BPE\", \"vocab\": {}}}";
    tm_write_file(in, "tokenizer.json", tok, strlen(tok));
    tm_write_file(in, "README.md", "# tiny\n", 7);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/sub", in);
    mkdir(sub, 0755);
}

/* Known answers for the MLX packing, written from the format spec rather than from the code:
 * 4-bit words 0x76543210, 0xfedcba98 hold elements 0..15 = 0..15; 8-bit 0x04030201 holds 1,2,3,4. */
static void test_known_packing(void) {
    uint32_t w4[4] = {0x76543210u, 0xfedcba98u, 0, 0};
    uint16_t s4 = sd_f32_to_bf16(2.0f), b4 = sd_f32_to_bf16(-1.0f);
    sd_mat m = {1, 32, SPECDEC_DTYPE_BF16, 4, 32, w4, &s4, &b4, false, NULL};
    float out[32];
    sd_mat_row_f32(&m, 0, out);
    int bad = 0;
    for (int j = 0; j < 32; j++) bad += out[j] != (j < 16 ? 2.0f * j - 1.0f : -1.0f);
    CHECK(bad == 0, "4-bit known packing: %d wrong", bad);
    uint32_t w8[16] = {0x04030201u, 0xff000080u};
    float s8[2] = {0.5f, 1.0f}, b8[2] = {1.0f, 0.0f};
    sd_mat m8 = {1, 64, SPECDEC_DTYPE_F32, 8, 32, w8, s8, b8, false, NULL};
    float o8[64];
    sd_mat_row_f32(&m8, 0, o8);
    CHECK(o8[0] == 1.5f && o8[1] == 2.0f && o8[2] == 2.5f && o8[3] == 3.0f, "8-bit known packing");
    CHECK(o8[4] == 0.5f * 128 + 1 && o8[5] == 1.0f && o8[7] == 0.5f * 255 + 1 && o8[8] == 1.0f, "8-bit high bytes");
    CHECK(o8[32] == 0.0f && sd_mat_bytes(&m8) == 64 + 2 * 2 * 4, "8-bit second group / bytes");
}

/* All-zero and constant groups: scale 0, q 0, the bias the value itself (0 for zeros), no
 * division by the zero scale, nothing non-finite; in every scale dtype and bit width. Then a whole
 * model whose up_proj of layer 0 is all zeros goes through specdec_quantize the same way. */
static void test_zero_groups(const char *root) {
    static const specdec_dtype dts[3] = {SPECDEC_DTYPE_F32, SPECDEC_DTYPE_BF16, SPECDEC_DTYPE_F16};
    float x[128];
    for (int i = 0; i < 128; i++) x[i] = i < 32 ? 0.0f : i < 64 ? -0.0f : i < 96 ? 0.75f : (float)(i - 96) / 8;
    for (int k = 0; k < 3; k++)
        for (int bits = 4; bits <= 8; bits += 4) {
            uint32_t w[32];
            float sc[4], bi[4], deq[128];
            sd_qerr acc = {0, 0, 0};
            specdec_err e = {0};
            CHECK(sd_quant_row(x, 128, bits, 32, dts[k], w, sc, bi, &acc, "zero groups", 0, &e) == SPECDEC_OK, "quant_row: %s", e.msg);
            sd_mat m = {1, 128, dts[k], bits, 32, w, sc, bi, false, NULL};
            sd_mat_row_f32(&m, 0, deq);
            int bad = 0;
            for (int i = 0; i < 96; i++) bad += deq[i] != x[i] || !isfinite(deq[i]);
            for (int i = 96; i < 128; i++) bad += !isfinite(deq[i]);
            CHECK(bad == 0, "%s %d-bit: %d values of zero/constant groups not reproduced", specdec_dtype_name(dts[k]), bits, bad);
            for (int i = 0; i < 64 * bits / 32; i++) bad += w[i] != 0;
            CHECK(bad == 0 && deq[0] == 0.0f, "%s %d-bit: zero groups have q = 0", specdec_dtype_name(dts[k]), bits);
            /* the ramp group (0 .. 3.875) is the only one with an error: at most half its scale */
            CHECK(isfinite(acc.se) && acc.max_abs <= 0.5 * 3.875 / ((1 << bits) - 1) * 1.01, "%s %d-bit: largest error %g",
                  specdec_dtype_name(dts[k]), bits, acc.max_abs);
        }
    char in[256], out[256];
    snprintf(in, sizeof in, "%s/in-zero", root);
    snprintf(out, sizeof out, "%s/out-zero", root);
    mkdir(in, 0755);
    tm_dims d = {64, 128, 256, 2, 4, 2, 32, 0, false, SPECDEC_DTYPE_BF16};
    tm_model tm;
    memset(&tm, 0, sizeof tm);
    tm_model_build(&tm, &d, 3);
    memset(tm.bufs[10], 0, (size_t)d.I * d.H * 2);   /* model.layers.0.mlp.up_proj.weight */
    specdec_err e = {0};
    CHECK(sd_st_writer_write(tm.w, in, 0, &e) == SPECDEC_OK && tm_write_config(in, &d, NULL) == 0, "write zero model: %s", e.msg);
    tm_model_free(&tm);
    specdec_quantize_params p = specdec_quantize_default_params();
    rep r = {0, 0};
    p.report = on_report;
    p.report_user = &r;
    CHECK(specdec_quantize(in, out, &p, &e) == SPECDEC_OK, "quantize a model with an all-zero tensor: %s", e.msg);
    CHECK(r.calls > 0 && isfinite(r.worst_rel), "reports finite (%d calls)", r.calls);
    sd_config c;
    sd_st_set *st = NULL;
    sd_weights w;
    if (sd_config_load_dir(out, &c, &e) == SPECDEC_OK && sd_st_open_dir(out, &st, &e) == SPECDEC_OK &&
        sd_weights_bind(&c, st, false, &w, &e) == SPECDEC_OK) {
        float row[128];
        int bad = 0;
        for (int i = 0; i < d.I; i++) {
            sd_mat_row_f32(&w.layers[0].up, i, row);
            for (int j = 0; j < d.H; j++) bad += row[j] != 0.0f;
        }
        CHECK(bad == 0, "all-zero up_proj dequantizes to zeros (%d not)", bad);
        sd_weights_free(&w);
    } else {
        CHECK(0, "bind zero model: %s", e.msg);
    }
    sd_st_close(st);
}

int main(void) {
    test_known_packing();
    char root[64];
    CHECK(tm_mkdtemp(root, sizeof root) != NULL, "mkdtemp");
    test_zero_groups(root);
    tm_dims d = {64, 128, 256, 2, 4, 2, 32, 1, false, SPECDEC_DTYPE_BF16};
    char in[256], out[256];
    snprintf(in, sizeof in, "%s/in-bf16", root);
    mkdir(in, 0755);
    make_input(in, &d);

    static const int cfg[][2] = {{4, 32}, {4, 64}, {4, 128}, {8, 32}, {8, 64}, {8, 128}};
    for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
        specdec_quantize_params p = specdec_quantize_default_params();
        p.bits = cfg[i][0];
        p.group_size = cfg[i][1];
        snprintf(out, sizeof out, "%s/out-%d-%d", root, p.bits, p.group_size);
        quantize_and_check(in, out, &d, p);
    }
    { /* MTP quantized too, embedding dense, sharded output, OUT an existing empty directory */
        specdec_quantize_params p = specdec_quantize_default_params();
        p.quantize_mtp = true;
        p.quantize_embedding = false;
        p.max_shard_bytes = 64 * 1024;
        snprintf(out, sizeof out, "%s/out-mtp/", root);
        mkdir(out, 0755);
        quantize_and_check(in, out, &d, p);
        char ix[512];
        struct stat sb;
        snprintf(ix, sizeof ix, "%smodel.safetensors.index.json", out);
        CHECK(stat(ix, &sb) == 0, "sharded output has index.json");
    }
    { /* a quantized model with a dense drafter: --quantize-mtp on it quantizes the drafter only,
       * and the result equals quantizing the dense model with the drafter in one step */
        specdec_quantize_params p = specdec_quantize_default_params();
        p.bits = 4;
        p.group_size = 64;
        p.quantize_mtp = true;
        char one[256], two[256], src[256];
        snprintf(src, sizeof src, "%s/out-4-64", root);
        snprintf(one, sizeof one, "%s/mtp-one-step", root);
        snprintf(two, sizeof two, "%s/mtp-two-step", root);
        specdec_err e = {0};
        CHECK(specdec_quantize(in, one, &p, &e) == SPECDEC_OK, "one step: %s", e.msg);
        CHECK(specdec_quantize(src, two, &p, &e) == SPECDEC_OK, "drafter of a quantized model: %s", e.msg);
        sd_st_set *a = NULL, *b = NULL;
        CHECK(sd_st_open_dir(one, &a, &e) == SPECDEC_OK && sd_st_open_dir(two, &b, &e) == SPECDEC_OK, "reopen: %s", e.msg);
        int same = 0, n = a && b ? sd_st_count(a) : -1;
        for (int i = 0; a && b && i < n; i++) {
            const sd_st_tensor *t = sd_st_at(a, i), *u = sd_st_find(b, t->name);
            same += u && u->dtype == t->dtype && u->nbytes == t->nbytes && memcmp(u->data, t->data, t->nbytes) == 0;
        }
        CHECK(n > 0 && same == n && sd_st_count(b) == n, "two-step drafter quantization equals one step: %d of %d tensors", same, n);
        CHECK(sd_st_find(b, "mtp.fc.scales") != NULL, "drafter quantized");
        sd_st_close(a);
        sd_st_close(b);
        /* other bits than the model's, or nothing left to quantize: refused, nothing written */
        snprintf(two, sizeof two, "%s/mtp-refused", root);
        p.bits = 8;
        CHECK(specdec_quantize(src, two, &p, &e) == SPECDEC_ERR_UNSUPPORTED && strstr(e.msg, "4-bit"), "8-bit on 4-bit: %s", e.msg);
        p.bits = 4;
        p.quantize_mtp = false;
        CHECK(specdec_quantize(src, two, &p, &e) == SPECDEC_ERR_UNSUPPORTED && strstr(e.msg, "--quantize-mtp"), "nothing left: %s", e.msg);
        struct stat sb;
        CHECK(stat(two, &sb) != 0, "nothing written for a refused input");
    }
    /* f16 and f32 models, tied */
    for (int k = 0; k < 2; k++) {
        tm_dims d2 = d;
        d2.dt = k ? SPECDEC_DTYPE_F32 : SPECDEC_DTYPE_F16;
        d2.tied = true;
        d2.mtp = 0;
        char in2[256];
        snprintf(in2, sizeof in2, "%s/in-%d", root, k);
        mkdir(in2, 0755);
        make_input(in2, &d2);
        specdec_quantize_params p = specdec_quantize_default_params();
        p.bits = k ? 8 : 4;
        p.group_size = 32;
        snprintf(out, sizeof out, "%s/out-%d", root, k);
        quantize_and_check(in2, out, &d2, p);
    }

    /* A quantized directory with a defect: missing biases, then scales without a quantization block. */
    {
        char src[256], dst[256];
        snprintf(src, sizeof src, "%s/out-4-64", root);
        snprintf(dst, sizeof dst, "%s/defect", root);
        mkdir(dst, 0755);
        sd_st_set *s = NULL;
        specdec_err e = {0};
        CHECK(sd_st_open_dir(src, &s, &e) == SPECDEC_OK, "open quantized: %s", e.msg);
        sd_st_writer *w = sd_st_writer_new();
        for (int i = 0; i < sd_st_count(s); i++) {
            const sd_st_tensor *t = sd_st_at(s, i);
            if (strcmp(t->name, "model.layers.0.mlp.up_proj.biases") != 0)
                sd_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, &e);
        }
        CHECK(sd_st_writer_write(w, dst, 0, &e) == SPECDEC_OK, "write defect: %s", e.msg);
        sd_st_writer_free(w);
        sd_st_close(s);
        tm_dims dq = d;
        tm_write_config(dst, &dq, ", \"quantization\": {\"group_size\": 64, \"bits\": 4}");
        sd_config c;
        sd_weights w2;
        CHECK(sd_config_load_dir(dst, &c, &e) == SPECDEC_OK && sd_st_open_dir(dst, &s, &e) == SPECDEC_OK, "reopen defect");
        specdec_status st = sd_weights_bind(&c, s, true, &w2, &e);
        CHECK(st == SPECDEC_ERR_MISSING && strstr(e.msg, "'model.layers.0.mlp.up_proj.biases'"), "missing biases: %s", e.msg);
        c.quant_bits = c.quant_group = 0; /* as if config.json lacked the block */
        st = sd_weights_bind(&c, s, true, &w2, &e);
        CHECK(st == SPECDEC_ERR_CONFIG && strstr(e.msg, ".scales'") && strstr(e.msg, "quantization"), "scales without config: %s", e.msg);
        c.quant_bits = 4;
        c.quant_group = 128; /* config group contradicts the stored scales */
        st = sd_weights_bind(&c, s, true, &w2, &e);
        CHECK(st == SPECDEC_ERR_SHAPE && strstr(e.msg, ".scales'"), "group mismatch: %s", e.msg);
        sd_st_close(s);
    }

    /* Refusals. A non-empty OUT is left untouched and no temporary sibling remains. */
    specdec_quantize_params p = specdec_quantize_default_params();
    specdec_err e = {0};
    char keep[300];
    snprintf(out, sizeof out, "%s/full", root);
    mkdir(out, 0755);
    tm_write_file(out, "keep.txt", "precious", 8);
    specdec_status st = specdec_quantize(in, out, &p, &e);
    CHECK(st == SPECDEC_ERR_IO && strstr(e.msg, out), "non-empty OUT refused: %s", e.msg);
    snprintf(keep, sizeof keep, "%s/keep.txt", out);
    FILE *f = fopen(keep, "rb");
    char buf[16] = {0};
    CHECK(f && fread(buf, 1, sizeof buf, f) == 8 && memcmp(buf, "precious", 8) == 0, "OUT content untouched");
    if (f) fclose(f);
    DIR *dd = opendir(out);
    int n_ent = 0;
    for (struct dirent *de; dd && (de = readdir(dd));) n_ent++;
    if (dd) closedir(dd);
    CHECK_EQ_INT(n_ent, 3); /* ., .., keep.txt */
    CHECK_EQ_INT(count_tmp_siblings(root), 0);
    /* OUT a plain file */
    tm_write_file(root, "plain", "x", 1);
    snprintf(out, sizeof out, "%s/plain", root);
    CHECK(specdec_quantize(in, out, &p, &e) == SPECDEC_ERR_IO && strstr(e.msg, "plain"), "file OUT refused: %s", e.msg);
    /* already quantized input */
    snprintf(in, sizeof in, "%s/out-4-64", root);
    snprintf(out, sizeof out, "%s/again", root);
    st = specdec_quantize(in, out, &p, &e);
    CHECK(st == SPECDEC_ERR_UNSUPPORTED && strstr(e.msg, "already"), "re-quantize refused: %s", e.msg);
    struct stat sb;
    CHECK(stat(out, &sb) != 0, "nothing written for a refused input");
    /* bad parameters */
    p.bits = 3;
    CHECK(specdec_quantize(in, out, &p, &e) == SPECDEC_ERR_INVALID_ARG, "bits 3 refused");
    p.bits = 4;
    p.group_size = 16;
    CHECK(specdec_quantize(in, out, &p, &e) == SPECDEC_ERR_INVALID_ARG, "group 16 refused");
    /* group that does not divide the columns: nothing is left behind */
    tm_dims d3 = tm_default_dims(); /* H = 32 */
    snprintf(in, sizeof in, "%s/in-narrow", root);
    mkdir(in, 0755);
    make_input(in, &d3);
    p = specdec_quantize_default_params();
    p.group_size = 64;
    st = specdec_quantize(in, out, &p, &e);
    CHECK(st == SPECDEC_ERR_SHAPE && strstr(e.msg, "group size 64"), "indivisible columns: %s", e.msg);
    CHECK(stat(out, &sb) != 0, "no OUT after a failure");
    CHECK_EQ_INT(count_tmp_siblings(root), 0);
    /* a broken input is validated before anything is written */
    snprintf(in, sizeof in, "%s/in-broken", root);
    mkdir(in, 0755);
    tm_dims d4 = d;
    CHECK(tm_write_model(in, &d4, 5, "model.layers.1.mlp.up_proj.weight", NULL, NULL, 0) == 0, "write broken");
    st = specdec_quantize(in, out, &p, &e);
    CHECK(st == SPECDEC_ERR_MISSING && strstr(e.msg, "model.layers.1.mlp.up_proj.weight"), "broken input: %s", e.msg);
    CHECK(stat(out, &sb) != 0 && count_tmp_siblings(root) == 0, "nothing written for a broken input");

    tm_rm_rf(root);
    return check_finish("test_quantize");
}
