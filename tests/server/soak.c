/* soak.c: a load generator for `specdec serve` on loopback (tests/test_server_soak.sh runs a short
 * version, scripts/server_soak.sh the long one). Several client threads send a fixed, seeded mix of
 * requests: greedy and seeded completions, streaming and not, each answer compared byte for byte
 * with the text `specdec run` printed for the same prompt and settings; streams the client closes
 * after the first chunk; bodies over --max-body; headers over --max-header-bytes; malformed JSON;
 * bad HTTP. A sampler thread reads the server's VmRSS from /proc. At the end: the server must be alive and idle, its /metrics must
 * show that cancelled generations stopped early, and a hang-up on an idle server must free the
 * slot for the next request at once. Prints a Markdown report; exit 0 only when no answer was
 * wrong, no status unexpected, and resident memory did not grow past the bound.
 *
 * Sockets and HTTP/1.1 by hand (Connection: close, chunked responses decoded) so every byte the
 * server sends is seen; JSON by jansson. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- options ------------------------------------------------------------------------- */
static struct {
    int port, pid, clients, requests, n_tokens, max_body, n_prompts;
    long rss_growth_kb;
    unsigned long long seed_base;
    double temp, top_p;
    const char *expect_dir;
    char *prompts_buf;           /* prompts.txt; prompts[] point into it */
    char **prompts;
    char **exp_greedy, **exp_seeded;
    size_t *len_greedy, *len_seeded;
} opt = {.clients = 4, .requests = 300, .n_tokens = 4, .max_body = 16384, .rss_growth_kb = 16384,
         .seed_base = 1000, .temp = 0.8, .top_p = 0.95};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- request kinds --------------------------------------------------------------------- */
enum { K_GREEDY, K_GREEDY_STREAM, K_SEEDED, K_SEEDED_STREAM, K_CANCEL, K_OVERSIZED, K_OVERSIZED_CHUNKED,
       K_BAD_JSON, K_BAD_HTTP, K_BIG_HEADERS, K_METRICS, K_COUNT };
static const char *kind_name[K_COUNT] = {"greedy", "greedy stream", "seeded", "seeded stream", "cancelled mid-stream",
                                        "oversized body", "oversized chunked body", "malformed JSON", "bad HTTP", "headers over the limit",
                                        "GET /metrics"};
/* Percent of requests of each kind (sums to 100). */
static const int kind_weight[K_COUNT] = {23, 20, 15, 10, 10, 4, 3, 6, 4, 2, 3};

/* ---- results -------------------------------------------------------------------------- */
typedef struct stats {
    pthread_mutex_t mu;
    long sent[K_COUNT], ok[K_COUNT], wrong[K_COUNT], bad_status[K_COUNT], transport[K_COUNT];
    long completion_tokens;     /* from the usage of answers read to the end */
    double *ttft, *total;       /* stream TTFT; total of generation requests read to the end */
    int n_ttft, n_total;
    char first_problem[8][512]; int n_problems;
    long done;
} stats;
static stats S = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void problem(const char *fmt, ...) {
    pthread_mutex_lock(&S.mu);
    if (S.n_problems < 8) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(S.first_problem[S.n_problems++], sizeof S.first_problem[0], fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&S.mu);
}

/* ---- files ------------------------------------------------------------------------------ */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *p = malloc(cap);
    for (;;) {
        if (n + 4096 > cap) { cap *= 2; p = realloc(p, cap); }
        size_t r = fread(p + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    fclose(f);
    p[n] = 0;
    if (len) *len = n;
    return p;
}

/* expect DIR: prompts.txt (one prompt a line) and greedy-I.txt / seeded-I.txt, the texts
 * `specdec run` printed for prompt I (its final newline removed). */
static bool load_expectations(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/prompts.txt", opt.expect_dir);
    char *all = read_file(path, NULL);
    opt.prompts_buf = all;
    if (!all) { fprintf(stderr, "soak: cannot read %s\n", path); return false; }
    int cap = 64;
    opt.prompts = calloc((size_t)cap, sizeof *opt.prompts);
    for (char *line = strtok(all, "\n"); line && opt.n_prompts < cap; line = strtok(NULL, "\n"))
        if (*line) opt.prompts[opt.n_prompts++] = line;
    if (opt.n_prompts == 0) { fprintf(stderr, "soak: %s has no prompts\n", path); return false; }
    int n = opt.n_prompts;
    opt.exp_greedy = calloc((size_t)n, sizeof(char *)); opt.exp_seeded = calloc((size_t)n, sizeof(char *));
    opt.len_greedy = calloc((size_t)n, sizeof(size_t)); opt.len_seeded = calloc((size_t)n, sizeof(size_t));
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/greedy-%d.txt", opt.expect_dir, i);
        opt.exp_greedy[i] = read_file(path, &opt.len_greedy[i]);
        snprintf(path, sizeof path, "%s/seeded-%d.txt", opt.expect_dir, i);
        opt.exp_seeded[i] = read_file(path, &opt.len_seeded[i]);
        if (!opt.exp_greedy[i] || !opt.exp_seeded[i]) { fprintf(stderr, "soak: missing expectation %s\n", path); return false; }
    }
    return true;
}

/* ---- sockets and HTTP ----------------------------------------------------------------------- */
static int connect_server(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {30, 0};       /* no answer for 30 s is a failure, never a hang */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
    return fd;
}

static bool send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) { if (w < 0 && errno == EINTR) continue; return false; }
        p += w; n -= (size_t)w;
    }
    return true;
}

typedef struct resp {
    int status;                  /* 0 = no status line */
    char *raw; size_t len;       /* everything received */
    char *body; size_t body_len; /* after headers, chunked encoding removed */
    double t_first_text;         /* first SSE text seen (stream), 0 = none */
} resp;

static void resp_free(resp *r) { free(r->raw); free(r->body); memset(r, 0, sizeof *r); }

/* De-chunk src into out; false when malformed. */
static bool dechunk(const char *src, size_t n, char **out, size_t *out_len) {
    char *o = malloc(n + 1);
    size_t k = 0, i = 0;
    for (;;) {
        char *end;
        if (i >= n) { free(o); return false; }
        unsigned long sz = strtoul(src + i, &end, 16);
        const char *crlf = memmem(src + i, n - i, "\r\n", 2);
        if (!crlf || end == src + i) { free(o); return false; }
        i = (size_t)(crlf - src) + 2;
        if (sz == 0) break;
        if (i + sz + 2 > n) { free(o); return false; }
        memcpy(o + k, src + i, sz);
        k += sz; i += sz + 2;
    }
    o[k] = 0;
    *out = o; *out_len = k;
    return true;
}

/* Read the whole response (the server closes: Connection: close). When stop_at_first_data,
 * return as soon as the first SSE data event has arrived. */
static bool read_response(int fd, resp *r, double t0, bool stop_at_first_data) {
    size_t cap = 8192;
    r->raw = malloc(cap);
    r->len = 0;
    for (;;) {
        if (r->len + 4096 > cap) { cap *= 2; r->raw = realloc(r->raw, cap); }
        ssize_t n = recv(fd, r->raw + r->len, cap - r->len - 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        r->len += (size_t)n;
        r->raw[r->len] = 0;
        if (!r->t_first_text) {
            /* a text delta that is not empty: "text":"<something other than the closing quote> */
            const char *p = r->raw;
            while ((p = strstr(p, "\"text\":\"")) != NULL) {
                if (p[8] && p[8] != '"') { r->t_first_text = now_ms() - t0; break; }
                p += 8;
            }
        }
        if (stop_at_first_data && strstr(r->raw, "data: {")) break;
    }
    if (r->len == 0) return false;
    r->raw[r->len] = 0;
    if (sscanf(r->raw, "HTTP/1.%*d %d", &r->status) != 1) r->status = 0;
    char *h = strstr(r->raw, "\r\n\r\n");
    if (!h) return stop_at_first_data;
    *h = 0;
    bool chunked = strcasestr(r->raw, "\r\ntransfer-encoding: chunked") != NULL;
    *h = '\r';
    const char *b = h + 4;
    size_t bl = r->len - (size_t)(b - r->raw);
    if (stop_at_first_data) return true;
    if (chunked) return dechunk(b, bl, &r->body, &r->body_len);
    r->body = malloc(bl + 1);
    memcpy(r->body, b, bl);
    r->body[bl] = 0;
    r->body_len = bl;
    return true;
}

/* ---- one request ------------------------------------------------------------------------------ */
static void json_escape(char *out, size_t cap, const char *s) {
    size_t k = 0;
    for (; *s && k + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { out[k++] = '\\'; out[k++] = (char)c; }
        else if (c < 0x20) k += (size_t)snprintf(out + k, cap - k, "\\u%04x", c);
        else out[k++] = (char)c;
    }
    out[k] = 0;
}

/* The text of a finished completion (non-streaming JSON or an SSE stream); NULL when malformed. */
static char *answer_text(const resp *r, bool stream, long *tokens, char *why, size_t why_len) {
    size_t cap = 256, k = 0;
    char *text = malloc(cap);
    text[0] = 0;
    *tokens = -1;
    if (!stream) {
        json_error_t je;
        json_t *j = json_loadb(r->body, r->body_len, 0, &je);
        const char *t = json_string_value(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "text"));
        if (!t) { snprintf(why, why_len, "no choices[0].text in %.200s", r->body); json_decref(j); free(text); return NULL; }
        size_t n = json_string_length(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "text"));
        text = realloc(text, n + 1);
        memcpy(text, t, n); text[n] = 0; k = n;
        *tokens = (long)json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens"));
        json_decref(j);
        return text;
    }
    bool done = false, finished = false;
    for (char *ev = r->body; ev && *ev;) {
        char *next = strstr(ev, "\n\n");
        if (next) *next = 0;
        if (done) { snprintf(why, why_len, "data after [DONE]"); free(text); return NULL; }
        if (strncmp(ev, "data: ", 6)) { snprintf(why, why_len, "an event without 'data: ': %.100s", ev); free(text); return NULL; }
        if (!strcmp(ev + 6, "[DONE]")) done = true;
        else {
            json_error_t je;
            json_t *j = json_loads(ev + 6, 0, &je);
            if (!j) { snprintf(why, why_len, "an event that is not JSON: %.100s", ev + 6); free(text); return NULL; }
            if (json_object_get(j, "error")) { snprintf(why, why_len, "in-band error: %.200s", ev + 6); json_decref(j); free(text); return NULL; }
            json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
            const char *t = json_string_value(json_object_get(ch, "text"));
            if (t) {
                size_t n = json_string_length(json_object_get(ch, "text"));
                while (k + n + 1 > cap) cap *= 2;
                text = realloc(text, cap);
                memcpy(text + k, t, n); k += n; text[k] = 0;
            }
            if (json_is_string(json_object_get(ch, "finish_reason"))) finished = true;
            json_t *u = json_object_get(j, "usage");
            if (u) *tokens = (long)json_integer_value(json_object_get(u, "completion_tokens"));
            json_decref(j);
        }
        if (next) { *next = '\n'; ev = next + 2; } else ev = NULL;
    }
    if (!done || !finished) { snprintf(why, why_len, "the stream has no %s", done ? "finish_reason" : "[DONE]"); free(text); return NULL; }
    return text;
}

static void record_latency(double total, double ttft) {
    pthread_mutex_lock(&S.mu);
    S.total[S.n_total++] = total;
    if (ttft > 0) S.ttft[S.n_ttft++] = ttft;
    pthread_mutex_unlock(&S.mu);
}

static void count(long *arr, int kind) {
    pthread_mutex_lock(&S.mu);
    arr[kind]++;
    pthread_mutex_unlock(&S.mu);
}

static void do_request(int idx, int kind) {
    char body[4096], esc[2048], head[512];
    int p = idx % opt.n_prompts;
    json_escape(esc, sizeof esc, opt.prompts[p]);
    bool stream = kind == K_GREEDY_STREAM || kind == K_SEEDED_STREAM || kind == K_CANCEL;
    bool seeded = kind == K_SEEDED || kind == K_SEEDED_STREAM;
    char *big = NULL;
    const char *payload = body;
    size_t plen;
    int expect = 200;
    bool chunked_upload = false;
    const char *raw_request = NULL;
    switch (kind) {
    case K_GREEDY: case K_GREEDY_STREAM: case K_SEEDED: case K_SEEDED_STREAM:
        if (seeded)
            snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":%g,\"top_p\":%g,\"seed\":%llu,"
                     "\"stream\":%s%s,\"specdec\":{\"sampling\":\"seeded\"}}", esc, opt.n_tokens, opt.temp, opt.top_p,
                     opt.seed_base + (unsigned long long)p, stream ? "true" : "false",
                     stream ? ",\"stream_options\":{\"include_usage\":true}" : "");
        else
            snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0,\"stream\":%s%s}", esc,
                     opt.n_tokens, stream ? "true" : "false", stream ? ",\"stream_options\":{\"include_usage\":true}" : "");
        break;
    case K_CANCEL:
        snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":200,\"temperature\":0,\"stream\":true,"
                 "\"specdec\":{\"ignore_eos\":true}}", esc);
        break;
    case K_OVERSIZED: case K_OVERSIZED_CHUNKED: {
        size_t n = (size_t)opt.max_body + 512 + (size_t)(idx % 7) * 1000;
        big = malloc(n + 64);
        int h = snprintf(big, 64, "{\"prompt\":\"");
        memset(big + h, 'a', n - (size_t)h - 2);
        memcpy(big + n - 2, "\"}", 3);
        payload = big;
        expect = 413;
        chunked_upload = kind == K_OVERSIZED_CHUNKED;
        break;
    }
    case K_BAD_JSON: {
        static const char *bad[] = {"{\"prompt\":\"x\",\"max_tokens\":4", "[1,2,3]", "{\"prompt\":5}", "\xff\xfe\x00garbage",
                                    "{\"prompt\":\"x\",\"max_tokens\":-3}", "{\"prompt\":\"x\",\"prompt\":\"y\"}", "",
                                    "{\"prompt\":\"x\",\"temperature\":\"hot\"}", "{\"prompt\":\"\\ud800\"}"};
        payload = bad[idx % 9];
        expect = 400;
        break;
    }
    case K_BAD_HTTP: {
        static const char *bad[] = {"GARBAGE\r\n\r\n", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
                                    "GET /health HTTP/9.9\r\nHost: x\r\n\r\n", "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                    "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "\r\n\r\n\r\n",
                                    "GET /nowhere\x01 HTTP/1.1\r\nHost: x\r\n\r\n"};
        raw_request = bad[idx % 6];
        expect = -1;       /* any 4xx/5xx, or the server closing: what matters is that it keeps serving */
        break;
    }
    case K_BIG_HEADERS: {
        /* past the server's default --max-header-bytes (16384), within its connection pool */
        size_t n = 17000 + (size_t)(idx % 5) * 1000;
        big = malloc(n + 128);
        int h = snprintf(big, 128, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: ");
        memset(big + h, 'h', n);
        memcpy(big + h + n, "\r\n\r\n", 5);
        raw_request = big;
        expect = 431;
        break;
    }
    case K_METRICS: raw_request = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"; break;
    }
    plen = strlen(payload);
    if (kind == K_BAD_JSON && idx % 9 == 3) plen = 10;    /* the one with a NUL byte inside */
    count(S.sent, kind);
    double t0 = now_ms();
    int fd = connect_server();
    if (fd < 0) { count(S.transport, kind); problem("request %d (%s): cannot connect: %s", idx, kind_name[kind], strerror(errno)); free(big); return; }
    bool sent;
    if (raw_request) sent = send_all(fd, raw_request, strlen(raw_request));
    else if (chunked_upload) {
        snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
        sent = send_all(fd, head, strlen(head));
        for (size_t off = 0; sent && off < plen; off += 4096) {
            size_t n = plen - off < 4096 ? plen - off : 4096;
            char ch[32];
            snprintf(ch, sizeof ch, "%zx\r\n", n);
            sent = send_all(fd, ch, strlen(ch)) && send_all(fd, payload + off, n) && send_all(fd, "\r\n", 2);
        }
        sent = sent && send_all(fd, "0\r\n\r\n", 5);
    } else {
        snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                    "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", plen);
        sent = send_all(fd, head, strlen(head)) && (plen == 0 || send_all(fd, payload, plen));
    }
    resp r = {0};
    bool got = read_response(fd, &r, t0, kind == K_CANCEL);
    close(fd);                                   /* for K_CANCEL: the hang-up mid-stream */
    double total = now_ms() - t0;
    free(big);
    if (kind == K_BAD_HTTP) {
        if (!got || r.status == 0 || r.status >= 400) count(S.ok, kind);
        else { count(S.bad_status, kind); problem("request %d (bad HTTP %d): answered %d", idx, idx % 6, r.status); }
        resp_free(&r);
        return;
    }
    if (!got || (!sent && r.status == 0)) {
        /* an oversized upload may be cut off by the server before it is all sent: that is a refusal */
        if (expect == 413 && !got) count(S.ok, kind);
        else { count(S.transport, kind); problem("request %d (%s): no answer", idx, kind_name[kind]); }
        resp_free(&r);
        return;
    }
    if (r.status != expect) {
        count(S.bad_status, kind);
        problem("request %d (%s): status %d, expected %d: %.200s", idx, kind_name[kind], r.status, expect,
                r.body ? r.body : r.raw);
        resp_free(&r);
        return;
    }
    if (expect != 200 || kind == K_METRICS || kind == K_CANCEL) {
        if (kind == K_CANCEL && !strstr(r.raw, "data: {")) { count(S.wrong, kind); problem("request %d: the stream never started", idx); }
        else if (kind == K_BIG_HEADERS && !strstr(r.raw, "\"headers_too_large\"")) {
            count(S.wrong, kind);
            problem("request %d: a 431 without the JSON error: %.200s", idx, r.raw);
        }
        else count(S.ok, kind);
        resp_free(&r);
        return;
    }
    char why[300] = "";
    long toks = -1;
    char *text = answer_text(&r, stream, &toks, why, sizeof why);
    const char *want = seeded ? opt.exp_seeded[p] : opt.exp_greedy[p];
    size_t want_len = seeded ? opt.len_seeded[p] : opt.len_greedy[p];
    if (!text) { count(S.wrong, kind); problem("request %d (%s): %s", idx, kind_name[kind], why); }
    else if (strlen(text) != want_len || memcmp(text, want, want_len) != 0) {
        count(S.wrong, kind);
        problem("request %d (%s, prompt %d): text \"%.80s\" != run's \"%.80s\"", idx, kind_name[kind], p, text, want);
    } else {
        count(S.ok, kind);
        record_latency(total, stream ? r.t_first_text : 0);
        pthread_mutex_lock(&S.mu);
        if (toks > 0) S.completion_tokens += toks;
        pthread_mutex_unlock(&S.mu);
    }
    free(text);
    resp_free(&r);
}

/* ---- clients and the RSS sampler ----------------------------------------------------------------- */
static int next_idx;
static int *plan;                 /* kind of request i: a seeded shuffle of the weights */

static void *client_main(void *arg) {
    (void)arg;
    for (;;) {
        int i = __atomic_fetch_add(&next_idx, 1, __ATOMIC_RELAXED);
        if (i >= opt.requests) break;
        do_request(i, plan[i]);
        pthread_mutex_lock(&S.mu);
        S.done++;
        pthread_mutex_unlock(&S.mu);
    }
    return NULL;
}

typedef struct sample { double t_s; long done, rss_kb; } sample;
static sample *samples; static int n_samples, cap_samples;
static volatile int sampling = 1;

static long rss_kb(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256]; long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) { kb = strtol(line + 6, NULL, 10); break; }
    fclose(f);
    return kb;
}

static void *sampler_main(void *arg) {
    double t0 = *(double *)arg;
    while (sampling) {
        long kb = rss_kb(opt.pid);
        pthread_mutex_lock(&S.mu);
        long done = S.done;
        pthread_mutex_unlock(&S.mu);
        if (n_samples == cap_samples) { cap_samples = cap_samples ? cap_samples * 2 : 256; samples = realloc(samples, sizeof *samples * (size_t)cap_samples); }
        samples[n_samples++] = (sample){(now_ms() - t0) / 1e3, done, kb};
        usleep(250 * 1000);
    }
    return NULL;
}

/* ---- after the load: /metrics and a hang-up on an idle server ------------------------------------- */
static bool get_metrics(double *out, const char *const *names, int n) {
    int fd = connect_server();
    if (fd < 0) return false;
    const char *rq = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    resp r = {0};
    bool ok = send_all(fd, rq, strlen(rq)) && read_response(fd, &r, now_ms(), false) && r.status == 200;
    close(fd);
    for (int i = 0; ok && i < n; i++) {
        char key[128];
        snprintf(key, sizeof key, "\n%s ", names[i]);
        const char *p = strstr(r.body, key);
        out[i] = p ? strtod(p + strlen(key), NULL) : -1;
    }
    resp_free(&r);
    return ok;
}

/* A stream hung up after its first chunk on an idle server, then a greedy request: its time. */
static double hangup_then_request(void) {
    char body[512], head[256];
    snprintf(body, sizeof body, "{\"prompt\":\"x\",\"max_tokens\":400,\"temperature\":0,\"stream\":true,\"specdec\":{\"ignore_eos\":true}}");
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n", strlen(body));
    int fd = connect_server();
    if (fd < 0) return -1;
    resp r = {0};
    send_all(fd, head, strlen(head)); send_all(fd, body, strlen(body));
    read_response(fd, &r, now_ms(), true);
    close(fd);
    resp_free(&r);
    snprintf(body, sizeof body, "{\"prompt\":\"x\",\"max_tokens\":2,\"temperature\":0}");
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n", strlen(body));
    double t0 = now_ms();
    fd = connect_server();
    if (fd < 0) return -1;
    bool ok = send_all(fd, head, strlen(head)) && send_all(fd, body, strlen(body)) && read_response(fd, &r, t0, false) && r.status == 200;
    close(fd);
    resp_free(&r);
    return ok ? now_ms() - t0 : -1;
}

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static double pct(double *v, int n, double q) {
    if (n == 0) return 0;
    int i = (int)(q * (n - 1) + 0.5);
    return v[i];
}

static void usage(void) {
    fputs("usage: server_soak --port P --pid PID --expect DIR [--clients N] [--requests N] [-n TOKENS]\n"
          "                   [--max-body BYTES] [--temp T] [--top-p P] [--seed-base S] [--rss-growth-kb KB]\n"
          "  DIR holds prompts.txt and greedy-I.txt / seeded-I.txt: `specdec run` of prompt I with -n TOKENS at\n"
          "  --temp 0, and at --temp T --top-p P --seed S+I. The server must run with the same --max-body.\n", stderr);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { usage(); return 2; }
        if (!strcmp(a, "--port")) opt.port = atoi(v);
        else if (!strcmp(a, "--pid")) opt.pid = atoi(v);
        else if (!strcmp(a, "--expect")) opt.expect_dir = v;
        else if (!strcmp(a, "--clients")) opt.clients = atoi(v);
        else if (!strcmp(a, "--requests")) opt.requests = atoi(v);
        else if (!strcmp(a, "-n")) opt.n_tokens = atoi(v);
        else if (!strcmp(a, "--max-body")) opt.max_body = atoi(v);
        else if (!strcmp(a, "--temp")) opt.temp = atof(v);
        else if (!strcmp(a, "--top-p")) opt.top_p = atof(v);
        else if (!strcmp(a, "--seed-base")) opt.seed_base = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--rss-growth-kb")) opt.rss_growth_kb = atol(v);
        else { usage(); return 2; }
        i++;
    }
    if (opt.port <= 0 || opt.pid <= 0 || !opt.expect_dir || opt.clients < 1 || opt.clients > 256 || opt.requests < 1) { usage(); return 2; }
    if (!load_expectations()) return 2;
    signal(SIGPIPE, SIG_IGN);

    /* the plan: each kind's share of the requests, shuffled by a fixed seed (the same run twice
     * sends the same requests in the same order) */
    plan = malloc(sizeof *plan * (size_t)opt.requests);
    for (int i = 0, k = 0, acc = 0; i < opt.requests; i++) {
        while (k < K_COUNT - 1 && i * 100 >= (acc + kind_weight[k]) * opt.requests) acc += kind_weight[k++];
        plan[i] = k;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = opt.requests - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1)), t = plan[i];
        plan[i] = plan[j]; plan[j] = t;
    }
    S.ttft = calloc((size_t)opt.requests, sizeof(double));
    S.total = calloc((size_t)opt.requests, sizeof(double));

    static const char *mnames[] = {"specdec_busy", "specdec_queue_length", "specdec_cancelled_total",
                                   "specdec_completion_tokens_total", "specdec_generations_total"};
    double m0[5], m1[5];
    if (!get_metrics(m0, mnames, 5)) { fprintf(stderr, "soak: the server does not answer /metrics on port %d\n", opt.port); return 1; }
    double t0 = now_ms();
    pthread_t sampler, *th = calloc((size_t)opt.clients, sizeof *th);
    pthread_create(&sampler, NULL, sampler_main, &t0);
    for (int i = 0; i < opt.clients; i++) pthread_create(&th[i], NULL, client_main, NULL);
    for (int i = 0; i < opt.clients; i++) pthread_join(th[i], NULL);
    double wall = (now_ms() - t0) / 1e3;

    /* idle within 2 s: no slot held by a client that left */
    bool idle = false;
    for (int i = 0; i < 20 && !idle; i++) {
        if (get_metrics(m1, mnames, 5) && m1[0] == 0 && m1[1] == 0) idle = true;
        else usleep(100 * 1000);
    }
    double hang_ms = hangup_then_request();
    sampling = 0;
    pthread_join(sampler, NULL);
    bool alive = kill(opt.pid, 0) == 0;
    get_metrics(m1, mnames, 5);

    /* memory: the most in the first half of the run against the most in the second half */
    long first = 0, second = 0;
    for (int i = 0; i < n_samples; i++) {
        long *slot = samples[i].done * 2 < opt.requests ? &first : &second;
        if (samples[i].rss_kb > *slot) *slot = samples[i].rss_kb;
    }
    long growth = second - first;

    long sent = 0, ok = 0, wrong = 0, bad = 0, transport = 0;
    for (int k = 0; k < K_COUNT; k++) { sent += S.sent[k]; ok += S.ok[k]; wrong += S.wrong[k]; bad += S.bad_status[k]; transport += S.transport[k]; }
    /* tokens the server generated beyond the answers read to the end, plus the final check's: the
     * cancelled generations' share; each would be 200 tokens had the hang-up not stopped it */
    long cancels = S.ok[K_CANCEL] + 1;
    double extra = (m1[3] - m0[3]) - (double)S.completion_tokens - 2;
    double per_cancel = extra / (double)cancels;
    double cancelled_seen = m1[2] - m0[2];

    printf("## Run\n\n| | |\n|---|---|\n| requests | %ld |\n| concurrent clients | %d |\n| wall time | %.1f s |\n"
           "| throughput | %.1f requests/s |\n| tokens per generation | %d (greedy, and seeded at temperature %g, top-p %g) |\n\n",
           sent, opt.clients, wall, sent / wall, opt.n_tokens, opt.temp, opt.top_p);
    printf("## Requests by kind\n\n| kind | sent | as expected | wrong answer | unexpected status | no answer |\n|---|---|---|---|---|---|\n");
    for (int k = 0; k < K_COUNT; k++)
        printf("| %s | %ld | %ld | %ld | %ld | %ld |\n", kind_name[k], S.sent[k], S.ok[k], S.wrong[k], S.bad_status[k], S.transport[k]);
    printf("| **all** | %ld | %ld | %ld | %ld | %ld |\n\n", sent, ok, wrong, bad, transport);
    qsort(S.ttft, (size_t)S.n_ttft, sizeof(double), cmp_d);
    qsort(S.total, (size_t)S.n_total, sizeof(double), cmp_d);
    printf("## Latency (client side, ms; generations answered correctly)\n\n| | n | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|\n");
    printf("| time to first text (streams) | %d | %.1f | %.1f | %.1f | %.1f |\n", S.n_ttft, pct(S.ttft, S.n_ttft, .5),
           pct(S.ttft, S.n_ttft, .9), pct(S.ttft, S.n_ttft, .99), S.n_ttft ? S.ttft[S.n_ttft - 1] : 0);
    printf("| total | %d | %.1f | %.1f | %.1f | %.1f |\n\n", S.n_total, pct(S.total, S.n_total, .5),
           pct(S.total, S.n_total, .9), pct(S.total, S.n_total, .99), S.n_total ? S.total[S.n_total - 1] : 0);
    printf("## Resident memory of the server (VmRSS)\n\n| t (s) | requests done | VmRSS (MiB) |\n|---|---|---|\n");
    int rows = n_samples < 16 ? n_samples : 16;
    for (int r = 0; r < rows; r++) {
        int i = rows == 1 ? 0 : (int)((long)r * (n_samples - 1) / (rows - 1));
        printf("| %.1f | %ld | %.1f |\n", samples[i].t_s, samples[i].done, samples[i].rss_kb / 1024.0);
    }
    printf("\nMost in the first half of the requests %.1f MiB, in the second half %.1f MiB: growth %+ld KiB (bound %ld KiB).\n\n",
           first / 1024.0, second / 1024.0, growth, opt.rss_growth_kb);
    printf("## Slots freed by clients that hung up\n\n| | |\n|---|---|\n| idle (busy 0, queue 0) within 2 s after the load | %s |\n"
           "| cancellations counted by /metrics | %.0f (hang-ups: %ld) |\n| tokens generated per hang-up (200 if never stopped) | %.1f |\n"
           "| hang-up on an idle server, then a request: answered in | %.0f ms |\n| server alive at the end | %s |\n\n",
           idle ? "yes" : "NO", cancelled_seen, cancels, per_cancel, hang_ms, alive ? "yes" : "NO");
    bool pass = wrong == 0 && bad == 0 && transport == 0 && alive && idle && growth <= opt.rss_growth_kb &&
                per_cancel < 100 && cancelled_seen >= cancels * 0.9 && hang_ms >= 0 && hang_ms < 2000;
    for (int i = 0; i < S.n_problems; i++) printf("- problem: %s\n", S.first_problem[i]);
    printf("%sverdict: %s (%ld wrong answers, %ld unexpected statuses, %ld without answer)\n", S.n_problems ? "\n" : "",
           pass ? "PASS" : "FAIL", wrong, bad, transport);
    fflush(stdout);
    /* everything freed, so a leak check of this program (the ASan build) finds only real leaks */
    for (int i = 0; i < opt.n_prompts; i++) { free(opt.exp_greedy[i]); free(opt.exp_seeded[i]); }
    free(opt.exp_greedy); free(opt.exp_seeded); free(opt.len_greedy); free(opt.len_seeded);
    free(opt.prompts); free(opt.prompts_buf);
    free(th); free(plan); free(S.ttft); free(S.total); free(samples);
    return pass ? 0 : 1;
}
