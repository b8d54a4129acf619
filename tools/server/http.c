/* http.c: the HTTP side of the server on libmicrohttpd (one thread per connection): routing,
 * request bodies with a size cap, Bearer auth, OpenAI-style JSON errors, and the two ways a
 * generation is answered: a whole JSON body once the job is done, or server-sent events fed
 * by a response callback that waits on the job. A connection thread blocks only on its own
 * job, polling its socket so a client that hangs up cancels the generation promptly. */
#include "server/server.h"
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Per-request state kept by MHD between calls of the access handler. */
typedef struct conn_state {
    int endpoint;
    bool is_post;
    srv_buf body;
    bool too_big;
    uint64_t discarded;       /* body bytes thrown away past the cap */
    srv_job *job;             /* our reference while the handler waits on it */
    bool submitted;           /* a job went to the worker: the worker writes the request's log line */
    int status;               /* the status sent, for the log line */
    double t0_ms;             /* arrival, monotonic */
    char method[16];
    char path[128];
} conn_state;

/* A streaming response's state: the job and the socket to watch. */
typedef struct stream_state {
    srv_job *job;
    int fd;
} stream_state;

/* ---- small helpers ----------------------------------------------------------------- */

/* True when the peer has closed or reset the connection (never blocks). */
static bool peer_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char c;
        ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return r == 0;
    }
    return false;
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Constant-time equality of two strings (time depends only on the longer length). */
static bool ct_equal(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), n = la > lb ? la : lb;
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < la ? (unsigned char)a[i] : 0, y = i < lb ? (unsigned char)b[i] : 0;
        diff |= (unsigned char)(x ^ y);
    }
    return diff == 0;
}

static enum MHD_Result send_body(srv_server *s, struct MHD_Connection *c, conn_state *cs, int status,
                                 const char *ctype, char *body, size_t len, const char *retry_after) {
    int ep = cs->endpoint;
    cs->status = status;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(body); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (status == 405) MHD_add_response_header(r, "Allow", ep <= SRV_EP_CHAT ? "POST" : "GET");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    srv_metrics_request(&s->metrics, ep, status);
    return ret;
}

static enum MHD_Result send_json(srv_server *s, struct MHD_Connection *c, conn_state *cs, int status, srv_buf *b) {
    if (!b->p) return MHD_NO;
    char *p = b->p; size_t n = b->len;
    b->p = NULL; b->len = b->cap = 0;
    return send_body(s, c, cs, status, "application/json", p, n, NULL);
}

static enum MHD_Result send_error(srv_server *s, struct MHD_Connection *c, conn_state *cs, const srv_error *e) {
    srv_buf b = {0};
    srv_buf_add(&b, "{\"error\":{\"message\":\"", 21);
    srv_buf_add_json_string(&b, e->message, strlen(e->message));
    srv_buf_addf(&b, "\",\"type\":\"%s\",\"param\":", e->type);
    if (e->param[0]) { srv_buf_add(&b, "\"", 1); srv_buf_add_json_string(&b, e->param, strlen(e->param)); srv_buf_add(&b, "\"", 1); }
    else srv_buf_add(&b, "null", 4);
    if (e->code[0]) srv_buf_addf(&b, ",\"code\":\"%s\"}}\n", e->code);
    else srv_buf_add(&b, ",\"code\":null}}\n", 15);
    if (!b.p) return MHD_NO;
    int http = e->http ? e->http : 500;
    return send_body(s, c, cs, http, "application/json", b.p, b.len, http == 503 ? "1" : NULL);
}

static enum MHD_Result fail(srv_server *s, struct MHD_Connection *c, conn_state *cs, int http, const char *type,
                            const char *code, const char *msg) {
    srv_error e;
    srv_error_set(&e, http, type, NULL, code, "%s", msg);
    return send_error(s, c, cs, &e);
}

/* ---- GET endpoints ----------------------------------------------------------------- */

static enum MHD_Result get_models(srv_server *s, struct MHD_Connection *c, conn_state *cs, const char *one) {
    srv_buf b = {0};
    if (one && strcmp(one, s->model_name) != 0) {
        srv_error e;
        srv_error_set(&e, 404, "invalid_request_error", "model", "model_not_found", "The model '%s' does not exist", one);
        return send_error(s, c, cs, &e);
    }
    if (!one) srv_buf_add(&b, "{\"object\":\"list\",\"data\":[", 25);
    srv_buf_add(&b, "{\"id\":\"", 7);
    srv_buf_add_json_string(&b, s->model_name, strlen(s->model_name));
    srv_buf_addf(&b, "\",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"specdec\",\"max_model_len\":%d,"
                     "\"specdec\":{\"model_type\":\"%s\",\"vocab_size\":%d,\"n_layers\":%d,\"mtp_layers\":%d,\"chat\":%s}}",
                 (long long)s->started, s->n_ctx, s->info.model_type, s->info.vocab_size, s->info.n_layers,
                 s->info.mtp_layers, s->tpl_problem ? "false" : "true");
    if (!one) srv_buf_add(&b, "]}", 2);
    srv_buf_add(&b, "\n", 1);
    return send_json(s, c, cs, 200, &b);
}

static enum MHD_Result get_health(srv_server *s, struct MHD_Connection *c, conn_state *cs) {
    pthread_mutex_lock(&s->qmu);
    int q = s->q_len, busy = s->busy;
    pthread_mutex_unlock(&s->qmu);
    srv_buf b = {0};
    srv_buf_addf(&b, "{\"status\":\"ok\",\"model\":\"");
    srv_buf_add_json_string(&b, s->model_name, strlen(s->model_name));
    srv_buf_addf(&b, "\",\"busy\":%s,\"queue\":%d,\"queue_capacity\":%d}\n", busy ? "true" : "false", q, s->queue_cap);
    return send_json(s, c, cs, 200, &b);
}

static enum MHD_Result get_metrics(srv_server *s, struct MHD_Connection *c, conn_state *cs) {
    char *t = srv_metrics_render(s);
    if (!t) return fail(s, c, cs, 500, "server_error", NULL, "out of memory");
    return send_body(s, c, cs, 200, "text/plain; version=0.0.4; charset=utf-8", t, strlen(t), NULL);
}

/* ---- generation -------------------------------------------------------------------- */

/* Wait until the job reaches `phase` (or is done). False when the client hung up (then the
 * job is cancelled). The deadline cancels the job; the worker then finishes it quickly. */
static bool wait_phase(srv_job *j, int phase, int fd) {
    pthread_mutex_lock(&j->mu);
    while (j->phase < phase && j->phase != SRV_JOB_DONE) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->phase >= phase) break;
        if (peer_gone(fd)) { j->cancel = 1; pthread_mutex_unlock(&j->mu); return false; }
        if (!j->cancel && srv_now_ms() > j->deadline_ms) { j->timed_out = true; j->cancel = 1; }
    }
    pthread_mutex_unlock(&j->mu);
    return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_state *ss = cls;
    srv_job *j = ss->job;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->sse_sent < j->sse.len) {
            size_t n = j->sse.len - j->sse_sent;
            if (n > max) n = max;
            memcpy(buf, j->sse.p + j->sse_sent, n);
            j->sse_sent += n;
            pthread_mutex_unlock(&j->mu);
            return (ssize_t)n;
        }
        if (j->phase == SRV_JOB_DONE) { pthread_mutex_unlock(&j->mu); return MHD_CONTENT_READER_END_OF_STREAM; }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->sse_sent < j->sse.len || j->phase == SRV_JOB_DONE) continue;
        if (peer_gone(ss->fd)) { j->cancel = 1; pthread_mutex_unlock(&j->mu); return MHD_CONTENT_READER_END_WITH_ERROR; }
        if (!j->cancel && srv_now_ms() > j->deadline_ms) { j->timed_out = true; j->cancel = 1; }
    }
}

/* Cancel a job whose client is gone (no-op once it is done). */
static void cancel_job(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    if (j->phase != SRV_JOB_DONE) j->cancel = 1;
    pthread_mutex_unlock(&j->mu);
}

static void stream_free(void *cls) {
    stream_state *ss = cls;
    cancel_job(ss->job);
    srv_job_release(ss->job);
    free(ss);
}

/* The seed used, so a client can reproduce a sampled text (also in the body's "specdec"). */
static void add_seed_header(struct MHD_Response *r, const srv_job *j) {
    char v[24];
    snprintf(v, sizeof v, "%llu", (unsigned long long)j->req.sampling.seed);
    MHD_add_response_header(r, "x-specdec-seed", v);
}

static enum MHD_Result answer_done(srv_server *s, struct MHD_Connection *c, conn_state *cs, srv_job *j) {
    int ep = cs->endpoint;
    if (j->err.http) return send_error(s, c, cs, &j->err);
    bool chat = ep == SRV_EP_CHAT;
    srv_buf b = {0};
    srv_buf_addf(&b, "{\"id\":\"%s%s\",\"object\":\"%s\",\"created\":%lld,\"model\":\"", chat ? "chatcmpl-" : "cmpl-", j->id,
                 chat ? "chat.completion" : "text_completion", (long long)j->created);
    srv_buf_add_json_string(&b, s->model_name, strlen(s->model_name));
    srv_buf_add(&b, "\",\"system_fingerprint\":null,\"choices\":[{\"index\":0,", 50);
    srv_buf_add(&b, chat ? "\"message\":{\"role\":\"assistant\",\"content\":\"" : "\"text\":\"", chat ? 41 : 8);
    srv_buf_add_json_string(&b, j->text.p ? j->text.p : "", j->text.len);
    srv_buf_addf(&b, "\"%s,\"logprobs\":null,\"finish_reason\":\"%s\"}],", chat ? "}" : "", j->finish_reason);
    srv_buf_addf(&b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d},\"specdec\":",
                 j->stats.prompt_tokens, j->stats.generated_tokens, j->stats.prompt_tokens + j->stats.generated_tokens);
    srv_add_spec_json(&b, j);
    srv_buf_add(&b, "}\n", 2);
    if (!b.p) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_FREE);
    if (!r) { srv_buf_free(&b); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", "application/json");
    add_seed_header(r, j);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    cs->status = 200;
    srv_metrics_request(&s->metrics, ep, 200);
    return ret;
}

static enum MHD_Result handle_generation(srv_server *s, struct MHD_Connection *c, conn_state *cs) {
    int ep = cs->endpoint;
    srv_request req;
    srv_error e;
    memset(&e, 0, sizeof e);
    if (!srv_parse_request(s, ep, cs->body.p ? cs->body.p : "", cs->body.len, &req, &e)) return send_error(s, c, cs, &e);
    srv_job *j = srv_job_new(s);
    if (!j) { srv_request_free(&req); return fail(s, c, cs, 500, "server_error", NULL, "out of memory"); }
    j->req = req;
    j->t_arrive_ms = cs->t0_ms;      /* queue wait and TTFT count from the request's arrival */
    cs->job = j;
    if (!srv_submit(s, j)) {
        char msg[160];
        snprintf(msg, sizeof msg, "the server is busy: %d requests are already waiting (--queue %d); retry later",
                 s->queue_cap, s->queue_cap);
        return fail(s, c, cs, 503, "server_error", "server_busy", msg);
    }
    cs->submitted = true;
    /* generation may outlast the idle timeout meant for slow clients */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)(s->timeout_s + 30));
    int fd = conn_fd(c);
    if (!wait_phase(j, j->req.stream ? SRV_JOB_RUNNING : SRV_JOB_DONE, fd)) return MHD_NO;   /* client gone */
    if (j->phase == SRV_JOB_DONE && (j->err.http || !j->req.stream)) return answer_done(s, c, cs, j);
    stream_state *ss = malloc(sizeof *ss);
    if (!ss) { j->cancel = 1; return fail(s, c, cs, 500, "server_error", NULL, "out of memory"); }
    ss->job = j; ss->fd = fd;
    cs->job = NULL;                           /* the reference moves to the response */
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, ss, stream_free);
    if (!r) { stream_free(ss); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    add_seed_header(r, j);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    srv_metrics_request(&s->metrics, ep, 200);
    return ret;
}

/* ---- dispatch ---------------------------------------------------------------------- */

static int route(const char *url) {
    if (!strcmp(url, "/v1/completions")) return SRV_EP_COMPLETIONS;
    if (!strcmp(url, "/v1/chat/completions")) return SRV_EP_CHAT;
    if (!strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11)) return SRV_EP_MODELS;
    if (!strcmp(url, "/health")) return SRV_EP_HEALTH;
    if (!strcmp(url, "/metrics")) return SRV_EP_METRICS;
    return SRV_EP_OTHER;
}

/* Bytes of the request line and headers as received (name, ": ", value, CRLF each). */
typedef struct hdr_sum { size_t bytes; } hdr_sum;
static enum MHD_Result add_header_len(void *cls, enum MHD_ValueKind kind, const char *k, const char *v) {
    (void)kind;
    ((hdr_sum *)cls)->bytes += strlen(k) + (v ? strlen(v) : 0) + 4;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    srv_server *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        /* first call: headers only */
        cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        *con_cls = cs;
        cs->t0_ms = srv_now_ms();
        snprintf(cs->method, sizeof cs->method, "%s", method);
        snprintf(cs->path, sizeof cs->path, "%s", url);
        cs->endpoint = route(url);
        cs->is_post = !strcmp(method, "POST");
        int ep = cs->endpoint;
        /* --max-header-bytes: MHD's own cap (its memory pool) is set above ours, so a request
         * between the two gets this JSON error instead of MHD's bare page */
        hdr_sum hs = {strlen(method) + strlen(url) + strlen(version) + 4};
        MHD_get_connection_values(c, MHD_HEADER_KIND, add_header_len, &hs);
        if (hs.bytes > s->max_header) {
            char msg[160];
            snprintf(msg, sizeof msg, "the request line and headers are %zu bytes; at most %zu (--max-header-bytes)",
                     hs.bytes, s->max_header);
            return fail(s, c, cs, 431, "invalid_request_error", "headers_too_large", msg);
        }
        if (ep == SRV_EP_OTHER)
            return fail(s, c, cs, 404, "invalid_request_error", "not_found", "no such endpoint");
        bool want_post = ep == SRV_EP_COMPLETIONS || ep == SRV_EP_CHAT;
        bool is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        if (want_post ? !cs->is_post : !is_get)
            return fail(s, c, cs, 405, "invalid_request_error", "method_not_allowed", want_post ? "use POST" : "use GET");
        if (s->api_key && ep != SRV_EP_HEALTH) {
            const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
            bool ok = h && !strncmp(h, "Bearer ", 7) && ct_equal(h + 7, s->api_key);
            if (!ok)
                return fail(s, c, cs, 401, "invalid_request_error", "invalid_api_key",
                            h ? "Incorrect API key provided" : "Missing bearer token (Authorization: Bearer KEY)");
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            unsigned long long n = strtoull(cl, &end, 10);
            if (end == cl || *end || n > s->max_body) {
                char msg[128];
                snprintf(msg, sizeof msg, "the request body is larger than %zu bytes (--max-body)", s->max_body);
                return fail(s, c, cs, 413, "invalid_request_error", "body_too_large", msg);
            }
        }
        return MHD_YES;
    }
    if (*upload_size) {
        /* MHD cannot answer in the middle of an upload: past the cap we discard what arrives
         * and answer 413 at its end, or drop the connection if the client keeps sending. */
        if (cs->too_big || cs->body.len + *upload_size > s->max_body) {
            cs->too_big = true;
            cs->discarded += *upload_size;
            *upload_size = 0;
            return cs->discarded > 4 * (uint64_t)s->max_body + (1u << 20) ? MHD_NO : MHD_YES;
        }
        if (!srv_buf_add(&cs->body, upload, *upload_size)) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes (--max-body)", s->max_body);
        return fail(s, c, cs, 413, "invalid_request_error", "body_too_large", msg);
    }
    switch (cs->endpoint) {
    case SRV_EP_HEALTH: return get_health(s, c, cs);
    case SRV_EP_METRICS: return get_metrics(s, c, cs);
    case SRV_EP_MODELS: return get_models(s, c, cs, strlen(url) > 11 ? url + 11 : NULL);
    default: return handle_generation(s, c, cs);
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    conn_state *cs = *con_cls;
    if (!cs) return;
    if (!cs->submitted) {
        /* answered here without the worker (GETs, refusals): this is the request's log line */
        srv_reqlog r;
        memset(&r, 0, sizeof r);
        r.method = cs->method;
        r.path = cs->path;
        r.status = cs->status ? cs->status : 499;    /* no answer queued: the client left first */
        r.ms = srv_now_ms() - cs->t0_ms;
        srv_log_request(&r);
    }
    if (cs->job) {
        cancel_job(cs->job);
        srv_job_release(cs->job);
    }
    srv_buf_free(&cs->body);
    free(cs);
    *con_cls = NULL;
}

static void on_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    srv_logv("warning", fmt, ap);
}

struct MHD_Daemon *srv_http_start(srv_server *s, const char *host, int port, char *why, size_t why_len) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(host, ps, &hints, &ai);
    if (gai != 0 || !ai) { snprintf(why, why_len, "cannot resolve host '%s': %s", host, gai_strerror(gai)); return NULL; }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s,
        MHD_OPTION_EXTERNAL_LOGGER, on_log, s,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(64 + s->queue_cap),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->idle_timeout_s,
        /* the per-connection pool holds the headers and the read buffer: leave room above
         * --max-header-bytes so our 431 (JSON) answers first */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(2 * s->max_header + 32 * 1024),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) snprintf(why, why_len, "cannot listen on %s:%d (port in use or no permission)", host, port);
    return d;
}
