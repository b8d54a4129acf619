/* test_hf_logits.c: specdec's logits against HF transformers (Qwen3ForCausalLM) on tiny
 * random-init checkpoints in f32, bf16 (tied) and 4-bit (tied, embedding quantized), made by
 * tools/ref/make_fixtures.py. Tolerance (flash-attention style): max |ours - f64 reference| must
 * be at most 2x the error torch's own float32 forward makes, plus a floor of 1e-6 * max|logit|.
 * Checked for the fast and the reference kernels, for one call over all positions and for
 * token-by-token decoding. */
#include "check.h"
#include "specdec.h"
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *b = malloc(n * sizeof *b);
    size_t got = fread(b, sizeof *b, n, f);
    fclose(f);
    if (got != n) { free(b); return NULL; }
    return b;
}

static void check_fixture(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/%s", name);
    const char *dir = check_path(rel);
    char p[4096];
    snprintf(p, sizeof p, "%s/ref.json", dir);
    json_error_t je;
    json_t *ref = json_load_file(p, 0, &je);
    CHECK(ref != NULL, "%s: cannot read %s: %s", name, p, je.text);
    if (!ref) return;
    int T = (int)json_integer_value(json_object_get(ref, "T"));
    int V = (int)json_integer_value(json_object_get(ref, "vocab_size"));
    double err32 = json_real_value(json_object_get(ref, "torch_f32_max_abs_err"));
    double absmax = json_real_value(json_object_get(ref, "logit_absmax"));
    json_t *jt = json_object_get(ref, "tokens");
    int32_t *tokens = malloc(sizeof *tokens * T);
    for (int i = 0; i < T; i++) tokens[i] = (int32_t)json_integer_value(json_array_get(jt, i));
    snprintf(p, sizeof p, "%s/ref_logits.bin", dir);
    float *want = read_f32(p, (size_t)T * V);
    CHECK(want != NULL, "%s: cannot read %s", name, p);
    double tol = 2 * err32 + 1e-6 * absmax;

    specdec_err err = {0};
    specdec_model *m = NULL;
    specdec_status st = specdec_model_load(dir, NULL, &m, &err);
    CHECK(st == SPECDEC_OK, "%s: load: %s", name, err.msg);
    if (st != SPECDEC_OK || !want) goto out;
    for (int reference = 0; reference <= 1; reference++) {
        for (int chain = 0; chain <= 1; chain++) {
            specdec_ctx_params cp = specdec_ctx_default_params();
            cp.n_ctx = 128; cp.n_threads = 2; cp.reference_kernels = reference;
            cp.kv_dtype = SPECDEC_KV_F32;   /* the reference's cache (the CPU's default is bf16 at int8) */
            specdec_ctx *c = NULL;
            st = specdec_ctx_init(m, &cp, &c, &err);
            CHECK(st == SPECDEC_OK, "%s: ctx: %s", name, err.msg);
            if (st) continue;
            float *got = malloc(sizeof(float) * (size_t)T * V);
            if (chain) {
                for (int t = 0; t < T && st == SPECDEC_OK; t++)
                    st = specdec_ctx_forward(c, tokens + t, 1, got + (size_t)t * V, NULL, &err);
            } else st = specdec_ctx_forward(c, tokens, T, got, NULL, &err);
            CHECK(st == SPECDEC_OK, "%s: forward: %s", name, err.msg);
            double maxe = 0;
            for (size_t i = 0; i < (size_t)T * V; i++) {
                double e = fabs((double)got[i] - want[i]);
                if (!(e <= maxe)) maxe = e;   /* NaN propagates as a failure */
            }
            fprintf(stderr, "%s [%s, %s]: max abs err %.3e (torch f32 %.3e, tolerance %.3e)\n", name,
                    reference ? "reference" : "fast", chain ? "token by token" : "one block", maxe, err32, tol);
            CHECK(maxe <= tol, "%s: logits differ from HF by %.3e > %.3e", name, maxe, tol);
            free(got);
            specdec_ctx_free(c);
        }
    }
out:
    specdec_model_free(m);
    free(want); free(tokens);
    json_decref(ref);
}

int main(void) {
    check_fixture("tiny-f32");
    check_fixture("tiny-bf16");
    check_fixture("tiny-q4");
    return check_finish("test_hf_logits");
}
