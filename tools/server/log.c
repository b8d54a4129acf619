/* log.c: the server's log lines on stderr, as text or as one JSON object per line
 * (--log-format). Every line, the per-request line included, is built whole and written with
 * one call so lines from the connection threads and the worker never interleave. The library's
 * own messages come through the same function (its log callback is pointed here). */
#include "server/server.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_format = SRV_LOG_TEXT;

void srv_log_set_format(int format) { g_format = format; }
int srv_log_format(void) { return g_format; }

/* UTC time with milliseconds, ISO 8601. */
static void stamp(char *out, size_t n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, n - k, ".%03dZ", (int)(ts.tv_nsec / 1000000L) % 1000);
}

static void emit(srv_buf *b) {
    if (!b->p) return;
    fputs(b->p, stderr);
    fflush(stderr);
    srv_buf_free(b);
}

void srv_logv(const char *level, const char *fmt, va_list ap) {
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;   /* MHD ends its lines */
    srv_buf b = {0};
    if (g_format == SRV_LOG_JSON) {
        char ts[40];
        stamp(ts, sizeof ts);
        srv_buf_addf(&b, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts, level);
        srv_buf_add_json_string(&b, msg, n);
        srv_buf_add(&b, "\"}\n", 3);
    } else {
        bool plain = !strcmp(level, "info");
        srv_buf_addf(&b, "specdec serve: %s%s%s\n", plain ? "" : level, plain ? "" : ": ", msg);
    }
    emit(&b);
}

void srv_log(const char *level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    srv_logv(level, fmt, ap);
    va_end(ap);
}

void srv_log_request(const srv_reqlog *r) {
    srv_buf b = {0};
    const char *stop = r->stop && r->stop[0] ? r->stop : "-";
    if (g_format == SRV_LOG_JSON) {
        char ts[40];
        stamp(ts, sizeof ts);
        srv_buf_addf(&b, "{\"ts\":\"%s\",\"level\":\"info\",\"msg\":\"request\",\"id\":\"%s\",\"method\":\"%s\",\"path\":\"",
                     ts, r->id[0] ? r->id : "-", r->method);
        srv_buf_add_json_string(&b, r->path, strlen(r->path));
        srv_buf_addf(&b, "\",\"status\":%d,\"prompt_tokens\":%d,\"completion_tokens\":%d,\"ms\":%.1f,"
                         "\"queue_ms\":%.1f,\"ttft_ms\":%.1f,\"stop\":\"%s\",\"seed\":",
                     r->status, r->prompt_tokens, r->completion_tokens, r->ms, r->queue_ms, r->ttft_ms, stop);
        if (r->has_seed) srv_buf_addf(&b, "%llu}\n", (unsigned long long)r->seed);
        else srv_buf_add(&b, "null}\n", 6);
    } else {
        /* the path is printed as JSON string content so a hostile URL cannot forge a line */
        srv_buf_addf(&b, "specdec serve: request id=%s %s ", r->id[0] ? r->id : "-", r->method);
        srv_buf_add_json_string(&b, r->path, strlen(r->path));
        srv_buf_addf(&b, " status=%d prompt_tokens=%d completion_tokens=%d ms=%.1f queue_ms=%.1f ttft_ms=%.1f stop=%s seed=",
                     r->status, r->prompt_tokens, r->completion_tokens, r->ms, r->queue_ms, r->ttft_ms, stop);
        if (r->has_seed) srv_buf_addf(&b, "%llu\n", (unsigned long long)r->seed);
        else srv_buf_add(&b, "-\n", 2);
    }
    emit(&b);
}

/* The library's log callback while serving: its messages become server lines. */
void srv_log_lib(specdec_log_level level, const char *msg, void *user) {
    (void)user;
    srv_log(specdec_log_level_name(level), "%s", msg);
}
