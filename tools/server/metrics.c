/* metrics.c: server counters and their Prometheus text exposition (GET /metrics). Counters
 * are updated under one mutex: a request touches them a couple of times, never in a loop. */
#include "server/server.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *ep_names[SRV_EP_COUNT] = {"/v1/completions", "/v1/chat/completions", "/v1/models",
                                             "/health", "/metrics", "other"};

/* Upper bounds in seconds: 1 ms to 30 s covers a token on a small model up to a long prompt
 * waiting behind a full queue. */
static const double hist_bounds[SRV_HIST_N] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                               0.25, 0.5, 1, 2.5, 5, 10, 30};

void srv_hist_observe(srv_hist *h, double seconds) {
    if (!(seconds >= 0)) seconds = 0;      /* a clock step never makes a negative duration */
    int i = 0;
    while (i < SRV_HIST_N && seconds > hist_bounds[i]) i++;
    h->bucket[i]++;                        /* stored per bucket; rendered cumulative */
    h->count++;
    h->sum += seconds;
}

static bool render_hist(srv_buf *b, const char *name, const char *help, const srv_hist *h) {
    bool ok = srv_buf_addf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < SRV_HIST_N; i++) {
        cum += h->bucket[i];
        ok = ok && srv_buf_addf(b, "%s_bucket{le=\"%g\"} %llu\n", name, hist_bounds[i], (unsigned long long)cum);
    }
    cum += h->bucket[SRV_HIST_N];
    return ok && srv_buf_addf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                              (unsigned long long)cum, name, h->sum, name, (unsigned long long)h->count);
}

void srv_metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->probe_verdict = -1;
}

void srv_metrics_request(srv_metrics *m, int ep, int code) {
    if (ep < 0 || ep >= SRV_EP_COUNT) ep = SRV_EP_OTHER;
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < m->n_codes && m->codes[i] != code) i++;
    if (i == m->n_codes && m->n_codes < 16) m->codes[m->n_codes++] = code;
    if (i == 16) i = 15;       /* more than 16 distinct codes: lump the rest (never expected) */
    m->requests[ep][i]++;
    if (code == 503) m->rejected_busy++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_generation(srv_metrics *m, const srv_job *j) {
    pthread_mutex_lock(&m->mu);
    /* latencies: every job the worker took has a queue wait and an end; TTFT when text came;
     * time per output token when at least two tokens came (the first one's time is TTFT) */
    if (j->t_start_ms > 0) {
        srv_hist_observe(&m->queue_wait, (j->t_start_ms - j->t_arrive_ms) / 1e3);
        srv_hist_observe(&m->e2e, (j->t_end_ms - j->t_arrive_ms) / 1e3);
    }
    if (j->t_first_ms > 0) {
        srv_hist_observe(&m->ttft, (j->t_first_ms - j->t_arrive_ms) / 1e3);
        if (j->stats.generated_tokens >= 2)
            srv_hist_observe(&m->tpot, (j->t_end_ms - j->t_first_ms) / 1e3 / (j->stats.generated_tokens - 1));
    }
    if (j->cancel && !j->timed_out) m->cancelled++;
    if (j->timed_out) m->timed_out++;
    if (!j->err.http || j->stats.generated_tokens > 0) {
        m->generations++;
        m->prompt_tokens += (uint64_t)j->stats.prompt_tokens;
        m->completion_tokens += (uint64_t)j->stats.generated_tokens;
        m->decode_ms_total += j->stats.decode_ms;
        m->prefill_ms_total += j->stats.prefill_ms;
        if (j->stats.decode_tok_s > 0) m->last_decode_tok_s = j->stats.decode_tok_s;
        if (j->stats.prefill_tok_s > 0) m->last_prefill_tok_s = j->stats.prefill_tok_s;
        if (j->spec.on) {
            m->spec_rounds += (uint64_t)j->spec.rounds;
            m->spec_drafted += (uint64_t)j->spec.drafted;
            m->spec_accepted += (uint64_t)j->spec.accepted;
            if (j->spec.rounds > 0) {   /* a generation that ran no round says nothing about tau */
                m->last_tau = j->spec.tau;
                m->last_acceptance = j->spec.acceptance;
            }
        }
    }
    pthread_mutex_unlock(&m->mu);
}

char *srv_metrics_render(srv_server *s) {
    srv_metrics *m = &s->metrics;
    srv_buf b = {0};
    pthread_mutex_lock(&s->qmu);
    int qlen = s->q_len, busy = s->busy;
    pthread_mutex_unlock(&s->qmu);
    pthread_mutex_lock(&m->mu);
    bool ok = srv_buf_addf(&b, "# HELP specdec_requests_total HTTP requests answered, by endpoint and status.\n"
                               "# TYPE specdec_requests_total counter\n");
    for (int e = 0; e < SRV_EP_COUNT; e++)
        for (int i = 0; i < m->n_codes; i++)
            if (m->requests[e][i])
                ok = ok && srv_buf_addf(&b, "specdec_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", ep_names[e],
                                        m->codes[i], (unsigned long long)m->requests[e][i]);
    double decode_s = m->decode_ms_total / 1e3;
    uint64_t decoded = m->completion_tokens > m->generations ? m->completion_tokens - m->generations : 0;
    ok = ok && srv_buf_addf(&b,
        "# HELP specdec_prompt_tokens_total Prompt tokens prefilled.\n# TYPE specdec_prompt_tokens_total counter\n"
        "specdec_prompt_tokens_total %llu\n"
        "# HELP specdec_completion_tokens_total Tokens generated.\n# TYPE specdec_completion_tokens_total counter\n"
        "specdec_completion_tokens_total %llu\n"
        "# HELP specdec_generations_total Generations run.\n# TYPE specdec_generations_total counter\n"
        "specdec_generations_total %llu\n"
        "# HELP specdec_cancelled_total Generations stopped because the client went away.\n# TYPE specdec_cancelled_total counter\n"
        "specdec_cancelled_total %llu\n"
        "# HELP specdec_timed_out_total Requests stopped by the per-request time limit.\n# TYPE specdec_timed_out_total counter\n"
        "specdec_timed_out_total %llu\n"
        "# HELP specdec_rejected_busy_total Requests refused with 503 because the queue was full.\n# TYPE specdec_rejected_busy_total counter\n"
        "specdec_rejected_busy_total %llu\n"
        "# HELP specdec_decode_seconds_total Wall time spent decoding.\n# TYPE specdec_decode_seconds_total counter\n"
        "specdec_decode_seconds_total %.6f\n"
        "# HELP specdec_decode_tokens_per_second Mean decode speed over all generations.\n# TYPE specdec_decode_tokens_per_second gauge\n"
        "specdec_decode_tokens_per_second %.3f\n"
        "# HELP specdec_last_decode_tokens_per_second Decode speed of the last generation.\n# TYPE specdec_last_decode_tokens_per_second gauge\n"
        "specdec_last_decode_tokens_per_second %.3f\n"
        "# HELP specdec_last_prefill_tokens_per_second Prefill speed of the last generation.\n# TYPE specdec_last_prefill_tokens_per_second gauge\n"
        "specdec_last_prefill_tokens_per_second %.3f\n"
        "# HELP specdec_queue_length Requests waiting for the model.\n# TYPE specdec_queue_length gauge\n"
        "specdec_queue_length %d\n"
        "# HELP specdec_busy 1 while a generation runs.\n# TYPE specdec_busy gauge\n"
        "specdec_busy %d\n",
        (unsigned long long)m->prompt_tokens, (unsigned long long)m->completion_tokens,
        (unsigned long long)m->generations, (unsigned long long)m->cancelled, (unsigned long long)m->timed_out,
        (unsigned long long)m->rejected_busy, decode_s, decode_s > 0 ? decoded / decode_s : 0.0,
        m->last_decode_tok_s, m->last_prefill_tok_s, qlen, busy);
    ok = ok && srv_buf_addf(&b,
        "# HELP specdec_spec_rounds_total Speculative rounds (draft + verify).\n# TYPE specdec_spec_rounds_total counter\n"
        "specdec_spec_rounds_total %llu\n"
        "# HELP specdec_spec_drafted_total Draft tokens proposed.\n# TYPE specdec_spec_drafted_total counter\n"
        "specdec_spec_drafted_total %llu\n"
        "# HELP specdec_spec_accepted_total Draft tokens accepted.\n# TYPE specdec_spec_accepted_total counter\n"
        "specdec_spec_accepted_total %llu\n"
        "# HELP specdec_spec_acceptance Accepted / drafted over all generations.\n# TYPE specdec_spec_acceptance gauge\n"
        "specdec_spec_acceptance %.4f\n"
        "# HELP specdec_spec_tau Mean tokens emitted per round of the last generation that ran speculative rounds.\n# TYPE specdec_spec_tau gauge\n"
        "specdec_spec_tau %.4f\n"
        "# HELP specdec_spec_probe_verdict Exactness probe of the drafter: 1 passed, 0 failed (declined), -1 not run.\n"
        "# TYPE specdec_spec_probe_verdict gauge\n"
        "specdec_spec_probe_verdict %d\n"
        "# HELP specdec_uptime_seconds Seconds since the server started.\n# TYPE specdec_uptime_seconds gauge\n"
        "specdec_uptime_seconds %lld\n",
        (unsigned long long)m->spec_rounds, (unsigned long long)m->spec_drafted, (unsigned long long)m->spec_accepted,
        m->spec_drafted ? (double)m->spec_accepted / (double)m->spec_drafted : 0.0, m->last_tau, m->probe_verdict,
        (long long)(time(NULL) - s->started));
    ok = ok && render_hist(&b, "specdec_queue_wait_seconds", "Time from a request's arrival until the worker took it.", &m->queue_wait);
    ok = ok && render_hist(&b, "specdec_time_to_first_token_seconds",
                           "Time from a request's arrival to its first text (queue wait and prefill included).", &m->ttft);
    ok = ok && render_hist(&b, "specdec_time_per_output_token_seconds",
                           "Per generation of two or more tokens: time after the first text divided by the tokens after the first.", &m->tpot);
    ok = ok && render_hist(&b, "specdec_request_duration_seconds", "Time from a request's arrival to the end of its generation.", &m->e2e);
    pthread_mutex_unlock(&m->mu);
    if (!ok) { srv_buf_free(&b); return NULL; }
    return b.p;
}
