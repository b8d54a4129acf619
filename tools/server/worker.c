/* worker.c: the generation side of the server: jobs (refcounted, shared with the connection
 * thread), the bounded FIFO queue, the worker thread that owns the model, and
 * server_generate(), the one function through which every generation runs. */
#include "server/server.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- buffers ----------------------------------------------------------------------- */

bool srv_buf_add(srv_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p; b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

bool srv_buf_addf(srv_buf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return false;
    if ((size_t)n < sizeof tmp) return srv_buf_add(b, tmp, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) return false;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    bool ok = srv_buf_add(b, big, (size_t)n);
    free(big);
    return ok;
}

void srv_buf_free(srv_buf *b) { free(b->p); b->p = NULL; b->len = b->cap = 0; }

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k; unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { k = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; cp = c & 0x07; }
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return k;
}

/* JSON string body; invalid UTF-8 becomes U+FFFD so the output is always valid JSON. */
bool srv_buf_add_json_string(srv_buf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        if (c == '"' || c == '\\') { if (!srv_buf_add(b, "\\", 1) || !srv_buf_add(b, (const char *)&u[i], 1)) return false; i++; continue; }
        if (c < 0x20) {
            char esc[8];
            const char *m = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (!m) { snprintf(esc, sizeof esc, "\\u%04x", c); m = esc; }
            if (!srv_buf_add(b, m, strlen(m))) return false;
            i++; continue;
        }
        size_t k = utf8_len(u + i, n - i);
        if (k == 0) { if (!srv_buf_add(b, "\xEF\xBF\xBD", 3)) return false; i++; continue; }
        if (!srv_buf_add(b, (const char *)u + i, k)) return false;
        i += k;
    }
    return true;
}

double srv_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- jobs -------------------------------------------------------------------------- */

srv_job *srv_job_new(srv_server *s) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->srv = s;
    j->created = (int64_t)time(NULL);
    static unsigned long counter;
    static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&cmu);
    unsigned long n = ++counter;
    pthread_mutex_unlock(&cmu);
    snprintf(j->id, sizeof j->id, "%llx%06lx", (unsigned long long)j->created, n & 0xffffff);
    j->spec.probe = -1;
    j->t_arrive_ms = srv_now_ms();
    j->deadline_ms = j->t_arrive_ms + 1e3 * (s->timeout_s > 0 ? s->timeout_s : 1e9);
    return j;
}

void srv_job_release(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    srv_request_free(&j->req);
    srv_buf_free(&j->text);
    srv_buf_free(&j->sse);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* ---- queue and worker -------------------------------------------------------------- */

bool srv_submit(srv_server *s, srv_job *j) {
    pthread_mutex_lock(&s->qmu);
    /* capacity: queue_cap waiting plus the one being generated */
    bool full = s->stopping || s->q_len + (s->busy ? 1 : 0) >= s->queue_cap + 1;
    if (!full) {
        pthread_mutex_lock(&j->mu);
        j->refs++;
        pthread_mutex_unlock(&j->mu);
        s->ring[(s->q_head + s->q_len) % (s->queue_cap + 1)] = j;
        s->q_len++;
        pthread_cond_signal(&s->qcv);
    }
    pthread_mutex_unlock(&s->qmu);
    return !full;
}

static void job_finish(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->phase = SRV_JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

const char *srv_stop_name(const srv_job *j) {
    if (j->shutdown) return "shutdown";
    if (j->timed_out) return "timeout";
    if (j->err.http == 499 || (j->cancel && !j->finish_reason)) return "cancelled";
    if (j->err.http) return "error";
    switch (j->stats.stop_reason) {
    case 1: return "eos";
    case 2: return "stop";
    case 3: return "cancelled";
    case 4: return "context_full";
    default: return "length";
    }
}

/* The request line of a job the worker took. The status is the one its client sees (200 once
 * a stream has started); 499 when the client went away before the answer was complete. */
static void log_job(const srv_job *j) {
    srv_reqlog r;
    memset(&r, 0, sizeof r);
    bool chat = j->req.endpoint == SRV_EP_CHAT;
    snprintf(r.id, sizeof r.id, "%s%s", chat ? "chatcmpl-" : "cmpl-", j->id);
    r.method = "POST";
    r.path = chat ? "/v1/chat/completions" : "/v1/completions";
    bool gone = j->cancel && !j->timed_out && !j->shutdown;
    r.status = j->err.http && !(j->req.stream && j->phase == SRV_JOB_RUNNING) ? j->err.http : gone ? 499 : 200;
    r.prompt_tokens = j->stats.prompt_tokens;
    r.completion_tokens = j->stats.generated_tokens;
    r.ms = j->t_end_ms - j->t_arrive_ms;
    r.queue_ms = j->t_start_ms - j->t_arrive_ms;
    r.ttft_ms = j->t_first_ms > 0 ? j->t_first_ms - j->t_arrive_ms : 0;
    r.stop = srv_stop_name(j);
    r.has_seed = true;
    r.seed = j->req.sampling.seed;
    srv_log_request(&r);
}

static void *worker_main(void *arg) {
    srv_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        while (!s->stopping && s->q_len == 0) pthread_cond_wait(&s->qcv, &s->qmu);
        if (s->stopping && s->q_len == 0) { pthread_mutex_unlock(&s->qmu); break; }
        srv_job *j = s->ring[s->q_head];
        s->q_head = (s->q_head + 1) % (s->queue_cap + 1);
        s->q_len--;
        s->busy = true;
        s->current = j;
        bool stopping = s->stopping;
        pthread_mutex_unlock(&s->qmu);
        j->t_start_ms = srv_now_ms();

        if (stopping) srv_error_set(&j->err, 503, "server_error", NULL, NULL, "the server is shutting down");
        else if (j->timed_out || srv_now_ms() > j->deadline_ms) {
            /* before the cancel check: the connection cancels a job whose time ran out in the queue */
            j->timed_out = true;
            srv_error_set(&j->err, 504, "timeout", NULL, "timeout",
                          "the request waited in the queue past its time limit (--timeout-s %d)", s->timeout_s);
        } else if (j->cancel) srv_error_set(&j->err, 499, "cancelled", NULL, NULL, "the client went away");
        else server_generate(s, j);
        j->t_end_ms = srv_now_ms();
        srv_metrics_generation(&s->metrics, j);
        log_job(j);
        job_finish(j);

        pthread_mutex_lock(&s->qmu);
        s->busy = false;
        s->current = NULL;
        pthread_mutex_unlock(&s->qmu);
        srv_job_release(j);
    }
    return NULL;
}

bool srv_worker_start(srv_server *s) {
    s->ring = calloc((size_t)s->queue_cap + 1, sizeof *s->ring);
    if (!s->ring) return false;
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) return false;
    s->worker_started = true;
    return true;
}

void srv_worker_stop(srv_server *s) {
    if (!s->worker_started) return;
    pthread_mutex_lock(&s->qmu);
    s->stopping = true;
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_join(s->worker, NULL);
    s->worker_started = false;
    free(s->ring);
    s->ring = NULL;
}

/* ---- generation -------------------------------------------------------------------- */

/* Opening of one streaming chunk, up to the choice's payload. */
static bool chunk_open(srv_buf *b, const srv_job *j) {
    bool chat = j->req.endpoint == SRV_EP_CHAT;
    if (!srv_buf_addf(b, "data: {\"id\":\"%s%s\",\"object\":\"%s\",\"created\":%lld,\"model\":\"",
                      chat ? "chatcmpl-" : "cmpl-", j->id, chat ? "chat.completion.chunk" : "text_completion",
                      (long long)j->created)) return false;
    return srv_buf_add_json_string(b, j->srv->model_name, strlen(j->srv->model_name)) &&
           srv_buf_add(b, "\",\"system_fingerprint\":null,\"choices\":[", 39);
}

/* One chunk carrying text (or the role / finish when text is NULL). Caller holds j->mu. */
static bool chunk_text(srv_job *j, const char *text, size_t n, const char *finish, bool role) {
    srv_buf *b = &j->sse;
    bool chat = j->req.endpoint == SRV_EP_CHAT;
    if (!chunk_open(b, j)) return false;
    if (chat) {
        if (!srv_buf_add(b, "{\"index\":0,\"delta\":{", 20)) return false;
        if (role && !srv_buf_add(b, "\"role\":\"assistant\",\"content\":\"\"", 31)) return false;
        if (text) {
            if (!srv_buf_add(b, "\"content\":\"", 11) || !srv_buf_add_json_string(b, text, n) || !srv_buf_add(b, "\"", 1))
                return false;
        }
        if (!srv_buf_add(b, "},\"logprobs\":null,\"finish_reason\":", 34)) return false;
    } else {
        if (!srv_buf_add(b, "{\"index\":0,\"text\":\"", 19) || (text && !srv_buf_add_json_string(b, text, n)) ||
            !srv_buf_add(b, "\",\"logprobs\":null,\"finish_reason\":", 34))
            return false;
    }
    if (finish ? !srv_buf_addf(b, "\"%s\"", finish) : !srv_buf_add(b, "null", 4)) return false;
    /* the last chunk echoes the seed used (also in the x-specdec-seed header) */
    if (finish) return srv_buf_addf(b, "}],\"seed\":%llu}\n\n", (unsigned long long)j->req.sampling.seed);
    return srv_buf_add(b, "}]}\n\n", 5);
}

/* The "specdec" extension object of a response (stats of speculative decoding). */
bool srv_add_spec_json(srv_buf *b, const srv_job *j) {
    if (!j->spec.on) {
        if (!srv_buf_addf(b, "{\"draft\":\"%s\",\"speculated\":false,\"probe\":%d,\"note\":\"",
                          j->spec.drafter[0] ? j->spec.drafter : "none", j->spec.probe) ||
            !srv_buf_add_json_string(b, j->spec.note, strlen(j->spec.note)))
            return false;
        return srv_buf_addf(b, "\",\"seed\":%llu,\"sampling\":\"%s\",\"timed_out\":%s,\"decode_tok_s\":%.2f,\"prefill_tok_s\":%.2f}",
                            (unsigned long long)j->req.sampling.seed, j->req.rejection ? "rejection" : "seeded",
                            j->timed_out ? "true" : "false", j->stats.decode_tok_s, j->stats.prefill_tok_s);
    }
    return srv_buf_addf(b, "{\"draft\":\"%s\",\"speculated\":true,\"probe\":%d,\"block_size\":%d,\"rounds\":%ld,\"drafted\":%ld,\"accepted\":%ld,"
                           "\"tau\":%.4f,\"acceptance\":%.4f,\"seed\":%llu,\"sampling\":\"%s\",\"timed_out\":%s,\"decode_tok_s\":%.2f,\"prefill_tok_s\":%.2f}",
                        j->spec.drafter, j->spec.probe, j->spec.block_size, j->spec.rounds, j->spec.drafted, j->spec.accepted,
                        j->spec.tau, j->spec.acceptance, (unsigned long long)j->req.sampling.seed, j->req.rejection ? "rejection" : "seeded",
                        j->timed_out ? "true" : "false",
                        j->stats.decode_tok_s, j->stats.prefill_tok_s);
}

static bool on_text(const char *text, size_t n, void *user) {
    srv_job *j = user;
    if (j->cancel) return false;
    if (srv_now_ms() > j->deadline_ms) { j->timed_out = true; j->cancel = 1; return false; }
    if (n == 0) return true;
    if (j->t_first_ms == 0) j->t_first_ms = srv_now_ms();
    pthread_mutex_lock(&j->mu);
    bool ok = j->req.stream ? chunk_text(j, text, n, NULL, false) : srv_buf_add(&j->text, text, n);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return ok;
}

void server_generate(srv_server *s, srv_job *j) {
    srv_request *r = &j->req;
    specdec_err err = {0};
    int32_t *ids = NULL; size_t n_ids = 0;
    const char *param = r->endpoint == SRV_EP_CHAT ? "messages" : "prompt";
    if (specdec_tokenize(s->tok, r->prompt, strlen(r->prompt), &ids, &n_ids, &err) != SPECDEC_OK) {
        srv_error_set(&j->err, 400, "invalid_request_error", param, NULL, "the prompt could not be tokenized: %s", err.msg);
        return;
    }
    int budget = r->max_tokens;
    if (n_ids == 0) {
        srv_error_set(&j->err, 400, "invalid_request_error", param, NULL, "the prompt is empty after tokenization");
        goto out;
    }
    if ((int64_t)n_ids >= s->n_ctx) {
        srv_error_set(&j->err, 400, "invalid_request_error", param, "context_length_exceeded",
                      "This model's maximum context length is %d tokens; the prompt has %zu tokens (--ctx)", s->n_ctx, n_ids);
        goto out;
    }
    if (budget < 0) {
        budget = s->n_ctx - (int)n_ids;       /* no max_tokens: the rest of the context, up to --max-tokens */
        if (s->max_tokens_cap > 0 && budget > s->max_tokens_cap) budget = s->max_tokens_cap;
    }
    if ((int64_t)n_ids + budget > s->n_ctx) {
        srv_error_set(&j->err, 400, "invalid_request_error", "max_tokens", "context_length_exceeded",
                      "This model's maximum context length is %d tokens; the prompt has %zu tokens and max_tokens is %d (--ctx)",
                      s->n_ctx, n_ids, budget);
        goto out;
    }
    specdec_gen_params gp = specdec_gen_default_params();
    gp.max_tokens = budget;
    gp.sampling = r->sampling;
    gp.stop = (const char *const *)r->stop;
    gp.n_stop = r->n_stop;
    gp.ignore_eos = r->ignore_eos;
    gp.on_text = on_text;
    gp.user = j;
    gp.cancel = &j->cancel;

    pthread_mutex_lock(&j->mu);
    j->phase = SRV_JOB_RUNNING;
    if (r->stream && r->endpoint == SRV_EP_CHAT) chunk_text(j, NULL, 0, NULL, true);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);

    /* The drafter: the request's choice, else the server's default (auto: srv_auto_draft).
     * specdec_spec_generate runs classic decoding when d is NULL or when the
     * exactness probe fails (fail closed); the stats say which happened. */
    int dk = r->draft == SRV_DRAFT_AUTO ? s->default_draft : r->draft;
    if (dk == SRV_DRAFT_AUTO) dk = srv_auto_draft(s);
    specdec_drafter *d = srv_drafter_of(s, dk);
    specdec_spec_params sp = specdec_spec_default_params();
    sp.block_size = r->block_size;
    sp.sampling = r->rejection ? SPECDEC_SPEC_REJECTION : SPECDEC_SPEC_SEEDED;   /* default from the library */
    sp.quiet = true;
    specdec_spec_stats ss;
    memset(&ss, 0, sizeof ss);
    specdec_status rc = specdec_spec_generate(s->ctx, d, s->tok, ids, (int)n_ids, &gp, &sp, NULL, NULL, &ss, &err);
    specdec_gen_stats st = ss.gen;
    j->spec.probe = ss.probe;
    snprintf(j->spec.drafter, sizeof j->spec.drafter, "%s", d ? specdec_drafter_name(d) : "none");
    snprintf(j->spec.note, sizeof j->spec.note, "%s", ss.note);
    if (d && ss.speculated) {
        j->spec.on = true;
        j->spec.block_size = ss.block_size ? ss.block_size : ss.auto_width;
        j->spec.rounds = (long)ss.rounds;
        j->spec.drafted = (long)ss.drafted;
        j->spec.accepted = (long)ss.accepted;
        j->spec.tau = ss.tau;
        j->spec.acceptance = ss.drafted ? (double)ss.accepted / (double)ss.drafted : 0.0;
    }
    if (d && ss.probe >= 0) {
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.probe_verdict = ss.probe;
        pthread_mutex_unlock(&s->metrics.mu);
    }

    pthread_mutex_lock(&j->mu);
    j->stats = st;
    if (rc != SPECDEC_OK && rc != SPECDEC_ERR_CANCELLED) {
        srv_error_set(&j->err, 500, "server_error", NULL, NULL, "generation failed: %s", err.msg);
    } else if (j->shutdown && (rc == SPECDEC_ERR_CANCELLED || st.stop_reason == 3)) {
        /* cut short by the server stopping: not a finished completion, so not "length" */
        srv_error_set(&j->err, 503, "server_error", NULL, NULL,
                      "the server shut down during the generation (after %d tokens)", st.generated_tokens);
    } else {
        /* budget and a full context are "length"; EOS and stop strings are "stop"; a timeout is
         * reported as "length" with specdec.timed_out */
        j->finish_reason = (st.stop_reason == 1 || st.stop_reason == 2) ? "stop" : "length";
    }
    if (r->stream) {
        if (j->err.http) {
            /* headers are gone: report the failure in-band, as OpenAI does */
            srv_buf_add(&j->sse, "data: {\"error\":{\"message\":\"", 28);
            srv_buf_add_json_string(&j->sse, j->err.message, strlen(j->err.message));
            srv_buf_addf(&j->sse, "\",\"type\":\"%s\",\"param\":null,\"code\":null}}\n\n", j->err.type);
        } else {
            chunk_text(j, NULL, 0, j->finish_reason, false);
            if (r->include_usage) {
                chunk_open(&j->sse, j);
                srv_buf_addf(&j->sse, "],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d},\"specdec\":",
                             st.prompt_tokens, st.generated_tokens, st.prompt_tokens + st.generated_tokens);
                srv_add_spec_json(&j->sse, j);
                srv_buf_add(&j->sse, "}\n\n", 3);
            }
        }
        srv_buf_add(&j->sse, "data: [DONE]\n\n", 14);
    }
    pthread_mutex_unlock(&j->mu);
out:
    free(ids);
}
