/* request.c: strict validation of /v1/completions and /v1/chat/completions bodies into a
 * srv_request. Every rejection is an OpenAI-style 400 naming the field at fault (404
 * model_not_found for a model we do not serve). Unknown fields are refused rather than
 * silently ignored, except a few OpenAI fields that are accepted at their neutral value. */
#include "server/server.h"
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

void srv_error_set(srv_error *e, int http, const char *type, const char *param, const char *code,
                   const char *fmt, ...) {
    e->http = http;
    snprintf(e->type, sizeof e->type, "%s", type ? type : "invalid_request_error");
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

bool srv_bad(srv_error *e, const char *param, const char *fmt, ...) {
    e->http = 400;
    snprintf(e->type, sizeof e->type, "invalid_request_error");
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->code[0] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return false;
}

#define BAD(param, ...) srv_bad(e, param, __VA_ARGS__)

void srv_request_free(srv_request *r) {
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    memset(r, 0, sizeof *r);
}

uint64_t srv_fresh_seed(void) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
        /* no entropy yet (early boot): the clock and a counter still differ per request */
        static uint64_t counter;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^
            (__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0x9E3779B97F4A7C15ull);
        x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 29;
    }
    return x & 0x7FFFFFFFFFFFFFFFull;
}

/* A JSON number (integer or real) as double. */
static bool num(json_t *v, double *out) {
    if (json_is_integer(v)) { *out = (double)json_integer_value(v); return true; }
    if (json_is_real(v)) { *out = json_real_value(v); return isfinite(*out); }
    return false;
}

static bool get_int(json_t *v, const char *name, long long lo, long long hi, long long *out, srv_error *e) {
    if (!json_is_integer(v)) return BAD(name, "'%s' must be an integer", name);
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return BAD(name, "'%s' is %lld; it must be in [%lld, %lld]", name, x, lo, hi);
    *out = x;
    return true;
}

static bool get_num(json_t *v, const char *name, double lo, double hi, double *out, srv_error *e) {
    double x;
    if (!num(v, &x)) return BAD(name, "'%s' must be a number", name);
    if (!(x >= lo && x <= hi)) return BAD(name, "'%s' is %g; it must be in [%g, %g]", name, x, lo, hi);
    *out = x;
    return true;
}

static bool parse_stop(json_t *v, srv_request *r, srv_error *e) {
    if (json_is_null(v)) return true;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0) return BAD("stop", "'stop' must not be an empty string");
        r->stop[r->n_stop] = strdup(json_string_value(v));
        if (!r->stop[r->n_stop]) return BAD("stop", "out of memory");
        r->n_stop++;
        return true;
    }
    if (!json_is_array(v)) return BAD("stop", "'stop' must be a string or an array of strings");
    if (json_array_size(v) > 16) return BAD("stop", "'stop' has %zu entries; at most 16", json_array_size(v));
    size_t i; json_t *s;
    json_array_foreach(v, i, s) {
        if (!json_is_string(s) || json_string_length(s) == 0)
            return BAD("stop", "'stop[%zu]' must be a non-empty string", i);
        r->stop[r->n_stop] = strdup(json_string_value(s));
        if (!r->stop[r->n_stop]) return BAD("stop", "out of memory");
        r->n_stop++;
    }
    return true;
}

/* "specdec": {"draft": "mtp"|"mtp+ngram"|"ngram"|"model"|"none"|"auto", "block_size": K|"auto", "ignore_eos": bool};
 * whether the drafter exists is checked here so the error names the field. */
static bool parse_ext(const srv_server *s, json_t *v, srv_request *r, srv_error *e) {
    if (json_is_null(v)) return true;
    if (!json_is_object(v)) return BAD("specdec", "'specdec' must be an object");
    const char *k; json_t *x;
    json_object_foreach(v, k, x) {
        if (!strcmp(k, "draft")) {
            const char *d = json_string_value(x);
            if (!d) return BAD("specdec.draft", "'specdec.draft' must be a string");
            if (!strcmp(d, "mtp")) r->draft = SRV_DRAFT_MTP;
            else if (!strcmp(d, "mtp+ngram")) r->draft = SRV_DRAFT_HYBRID;
            else if (!strcmp(d, "ngram")) r->draft = SRV_DRAFT_NGRAM;
            else if (!strcmp(d, "none")) r->draft = SRV_DRAFT_NONE;
            else if (!strcmp(d, "auto")) r->draft = SRV_DRAFT_AUTO;
            else if (!strcmp(d, "model")) r->draft = SRV_DRAFT_MODEL;
            else return BAD("specdec.draft", "'specdec.draft' is \"%s\"; expected \"mtp\", \"mtp+ngram\", \"ngram\", \"model\", \"none\" or \"auto\"", d);
        } else if (!strcmp(k, "block_size")) {
            if (json_is_string(x) && !strcmp(json_string_value(x), "auto")) r->block_size = 0;
            else {
                long long b = 0;
                if (!json_is_integer(x)) return BAD("specdec.block_size", "'specdec.block_size' must be an integer or \"auto\"");
                if (!get_int(x, "specdec.block_size", 2, SPECDEC_SPEC_MAX_DEPTH, &b, e)) return false;
                r->block_size = (int)b;
            }
        } else if (!strcmp(k, "sampling")) {
            const char *m = json_string_value(x);
            if (!m || (strcmp(m, "seeded") && strcmp(m, "rejection")))
                return BAD("specdec.sampling", "'specdec.sampling' must be \"seeded\" or \"rejection\"");
            r->rejection = !strcmp(m, "rejection");
        } else if (!strcmp(k, "ignore_eos")) {
            if (!json_is_boolean(x)) return BAD("specdec.ignore_eos", "'specdec.ignore_eos' must be a boolean");
            r->ignore_eos = json_is_true(x);
        } else {
            return BAD("specdec", "unknown field 'specdec.%s'", k);
        }
    }
    if (r->draft != SRV_DRAFT_AUTO && r->draft != SRV_DRAFT_NONE && !srv_drafter_of(s, r->draft))
        return BAD("specdec.draft", "'specdec.draft': this server has no %s drafter%s",
                   r->draft == SRV_DRAFT_MTP ? "mtp" : r->draft == SRV_DRAFT_HYBRID ? "mtp+ngram"
                   : r->draft == SRV_DRAFT_NGRAM ? "ngram" : "draft-model",
                   r->draft == SRV_DRAFT_MTP || r->draft == SRV_DRAFT_HYBRID ? " (the model has no mtp module)" :
                   r->draft == SRV_DRAFT_MODEL ? " (start it with --draft model:DIR)" : "");
    return true;
}

/* OpenAI fields we accept only at their neutral value. Returns 1 accepted, 0 rejected (e set),
 * -1 not one of them. */
static int neutral_field(const char *k, json_t *v, srv_error *e) {
    if (!strcmp(k, "user")) return json_is_string(v) || json_is_null(v) ? 1 : (BAD(k, "'user' must be a string"), 0);
    if (!strcmp(k, "n") || !strcmp(k, "best_of")) {
        if (json_is_null(v) || (json_is_integer(v) && json_integer_value(v) == 1)) return 1;
        BAD(k, "'%s' must be 1 (one completion per request)", k); return 0;
    }
    if (!strcmp(k, "presence_penalty") || !strcmp(k, "frequency_penalty")) {
        double x;
        if (json_is_null(v) || (num(v, &x) && x == 0)) return 1;
        BAD(k, "'%s' is not supported (must be 0)", k); return 0;
    }
    if (!strcmp(k, "logprobs") || !strcmp(k, "echo") || !strcmp(k, "top_logprobs")) {
        if (json_is_null(v) || json_is_false(v) || (json_is_integer(v) && json_integer_value(v) == 0)) return 1;
        BAD(k, "'%s' is not supported", k); return 0;
    }
    if (!strcmp(k, "logit_bias")) {
        if (json_is_null(v) || (json_is_object(v) && json_object_size(v) == 0)) return 1;
        BAD(k, "'logit_bias' is not supported"); return 0;
    }
    if (!strcmp(k, "suffix")) {
        if (json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0)) return 1;
        BAD(k, "'suffix' is not supported"); return 0;
    }
    return -1;
}

bool srv_parse_request(const srv_server *s, int endpoint, const char *body, size_t len,
                       srv_request *r, srv_error *e) {
    memset(r, 0, sizeof *r);
    r->endpoint = endpoint;
    r->max_tokens = endpoint == SRV_EP_COMPLETIONS ? 16 : -1;   /* OpenAI's defaults */
    r->sampling = specdec_sampling_default_params();
    r->sampling.temperature = 1.0f;                              /* OpenAI's default */
    r->draft = s->default_draft;
    r->rejection = specdec_spec_default_params().sampling == SPECDEC_SPEC_REJECTION;
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return BAD(NULL, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    bool ok = false;
    if (!json_is_object(root)) { BAD(NULL, "the body must be a JSON object"); goto done; }
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model)) { BAD("model", "'model' must be a string"); goto done; }
        if (strcmp(json_string_value(model), s->model_name) != 0) {
            srv_error_set(e, 404, "invalid_request_error", "model", "model_not_found",
                          "The model '%s' does not exist; this server serves '%s'", json_string_value(model), s->model_name);
            goto done;
        }
    }
    const char *k; json_t *v;
    bool have_input = false;
    json_object_foreach(root, k, v) {
        long long iv = 0; double dv = 0;
        if (!strcmp(k, "model")) continue;
        if (endpoint == SRV_EP_COMPLETIONS && !strcmp(k, "prompt")) {
            if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0))) v = json_array_get(v, 0);
            if (!json_is_string(v)) { BAD("prompt", "'prompt' must be a string"); goto done; }
            if (json_string_length(v) == 0) { BAD("prompt", "'prompt' must not be empty"); goto done; }
            r->prompt = strdup(json_string_value(v));
            have_input = true;
        } else if (endpoint == SRV_EP_CHAT && !strcmp(k, "messages")) {
            if (!s->tpl_problem && !srv_render_chat(s->tpl, v, &r->prompt, e)) goto done;
            have_input = true;
        } else if (!strcmp(k, "max_tokens") || (endpoint == SRV_EP_CHAT && !strcmp(k, "max_completion_tokens"))) {
            if (json_is_null(v)) continue;
            if (!get_int(v, k, 1, 1 << 24, &iv, e)) goto done;
            r->max_tokens = (int)iv;
        } else if (!strcmp(k, "temperature")) {
            if (json_is_null(v)) continue;
            if (!get_num(v, k, 0, 2, &dv, e)) goto done;
            r->sampling.temperature = (float)dv;
        } else if (!strcmp(k, "top_p")) {
            if (json_is_null(v)) continue;
            if (!get_num(v, k, 0, 1, &dv, e)) goto done;
            if (dv <= 0) { BAD(k, "'top_p' must be greater than 0"); goto done; }
            /* a positive double below float's range (1e-50, say) would become 0, the value refused
             * above; FLT_MIN keeps its nucleus: any p below the top token's probability is that token */
            r->sampling.top_p = (float)dv > 0 ? (float)dv : FLT_MIN;
        } else if (!strcmp(k, "top_k")) {
            if (json_is_null(v)) continue;
            if (!get_int(v, k, -1, 1 << 24, &iv, e)) goto done;
            r->sampling.top_k = iv < 0 ? 0 : (int)iv;          /* -1 = off, as in vLLM */
        } else if (!strcmp(k, "min_p")) {
            if (json_is_null(v)) continue;
            if (!get_num(v, k, 0, 1, &dv, e)) goto done;
            r->sampling.min_p = (float)dv;
        } else if (!strcmp(k, "seed")) {
            if (json_is_null(v)) continue;
            if (!get_int(v, k, 0, INT64_MAX, &iv, e)) goto done;
            r->sampling.seed = (uint64_t)iv;
            r->seed_given = true;
        } else if (!strcmp(k, "stop")) {
            if (!parse_stop(v, r, e)) goto done;
        } else if (!strcmp(k, "stream")) {
            if (json_is_null(v)) continue;
            if (!json_is_boolean(v)) { BAD("stream", "'stream' must be a boolean"); goto done; }
            r->stream = json_is_true(v);
        } else if (!strcmp(k, "stream_options")) {
            if (json_is_null(v)) continue;
            if (!json_is_object(v)) { BAD("stream_options", "'stream_options' must be an object"); goto done; }
            const char *k2; json_t *v2;
            json_object_foreach(v, k2, v2) {
                if (strcmp(k2, "include_usage") != 0) { BAD("stream_options", "unknown field 'stream_options.%s'", k2); goto done; }
                if (!json_is_boolean(v2)) { BAD("stream_options", "'stream_options.include_usage' must be a boolean"); goto done; }
                r->include_usage = json_is_true(v2);
            }
        } else if (!strcmp(k, "specdec")) {
            if (!parse_ext(s, v, r, e)) goto done;
        } else {
            int nf = neutral_field(k, v, e);
            if (nf == 0) goto done;
            if (nf < 0) { BAD(k, "unknown field '%s'", k); goto done; }
        }
    }
    if (endpoint == SRV_EP_CHAT && s->tpl_problem) {
        srv_error_set(e, 400, "invalid_request_error", "messages", "unsupported_chat_template",
                      "chat completions are unavailable for this model: %s", s->tpl_problem);
        goto done;
    }
    if (!have_input) {
        const char *f = endpoint == SRV_EP_CHAT ? "messages" : "prompt";
        BAD(f, "'%s' is required", f);
        goto done;
    }
    if (!r->prompt) { srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); goto done; }
    if (r->include_usage && !r->stream) { BAD("stream_options", "'stream_options' needs 'stream': true"); goto done; }
    if (s->max_tokens_cap > 0 && r->max_tokens > s->max_tokens_cap) {
        srv_error_set(e, 400, "invalid_request_error", endpoint == SRV_EP_CHAT && json_object_get(root, "max_completion_tokens")
                      ? "max_completion_tokens" : "max_tokens", "max_tokens_exceeded",
                      "max_tokens is %d; this server allows at most %d per request (--max-tokens)", r->max_tokens, s->max_tokens_cap);
        goto done;
    }
    /* no seed given: a fresh one per request, so identical requests at temperature > 0 differ;
     * the seed used is echoed in the response */
    if (!r->seed_given) r->sampling.seed = srv_fresh_seed();
    ok = true;
done:
    json_decref(root);
    if (!ok) srv_request_free(r);
    return ok;
}
