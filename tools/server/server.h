/* server.h: internals of `specdec serve`, an OpenAI-compatible HTTP server on libmicrohttpd.
 *
 * Threads: MHD runs one thread per connection (bounded by a connection limit); those threads
 * parse and validate requests, then hand a job to the single worker thread that owns the model
 * and its context (batch 1: one generation at a time). Between them sits a bounded FIFO queue;
 * a submit that finds it full is answered 503 with Retry-After. A job is shared by its
 * connection thread and the worker and freed by whichever lets go last (refcount).
 *
 * Files: serve_main.c (options, startup, signals), http.c (routing, bodies, auth, responses),
 * request.c (JSON validation into a job), chat.c (chat templates), worker.c (queue, worker,
 * server_generate), metrics.c (counters, Prometheus text). */
#ifndef SD_SERVER_H
#define SD_SERVER_H
#include "specdec.h"
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- growable byte buffer ---------------------------------------------------------- */
typedef struct srv_buf { char *p; size_t len, cap; } srv_buf;
bool srv_buf_add(srv_buf *b, const char *s, size_t n);
bool srv_buf_addf(srv_buf *b, const char *fmt, ...);
void srv_buf_free(srv_buf *b);

/* ---- requests ---------------------------------------------------------------------- */
enum { SRV_EP_COMPLETIONS = 0, SRV_EP_CHAT, SRV_EP_MODELS, SRV_EP_HEALTH, SRV_EP_METRICS, SRV_EP_OTHER,
       SRV_EP_COUNT };

enum { SRV_DRAFT_AUTO = 0, SRV_DRAFT_NONE, SRV_DRAFT_MTP, SRV_DRAFT_NGRAM, SRV_DRAFT_MODEL, SRV_DRAFT_HYBRID };

/* An OpenAI-style error ready to send: HTTP status plus the error object's fields. */
typedef struct srv_error {
    int http;                 /* 0 = no error */
    char type[40];            /* invalid_request_error, authentication_error, server_error, ... */
    char param[40];           /* the offending field, "" for null */
    char code[40];            /* "" for null */
    char message[512];
} srv_error;
void srv_error_set(srv_error *e, int http, const char *type, const char *param, const char *code,
                   const char *fmt, ...);

/* srv_error_set with 400 invalid_request_error; returns false (for `return srv_bad(...)`). */
bool srv_bad(srv_error *e, const char *param, const char *fmt, ...);

/* The validated content of one generation request. */
typedef struct srv_request {
    int endpoint;             /* SRV_EP_COMPLETIONS or SRV_EP_CHAT */
    char *prompt;             /* the text given to the tokenizer (chat: the rendered template) */
    int max_tokens;           /* -1 = until the context is full */
    specdec_sampling_params sampling;
    bool seed_given;
    char *stop[16]; int n_stop;
    bool stream, include_usage, ignore_eos;
    int draft;                /* SRV_DRAFT_* */
    int block_size;           /* 0 = auto */
    bool rejection;           /* speculative sampling mode: rejection instead of seeded (default:
                                 the library's specdec_spec_default_params) */
} srv_request;

/* A fresh seed for a request that names none: 63 random bits (a request may send any seed in
 * [0, 2^63 - 1], so the echoed seed can always be sent back to reproduce the text). */
uint64_t srv_fresh_seed(void);
void srv_request_free(srv_request *r);

struct srv_server;
/* Validate a JSON body for `endpoint`; on failure fill `e` (400 naming the field, 404 for an
 * unknown model) and return false. */
bool srv_parse_request(const struct srv_server *s, int endpoint, const char *body, size_t len,
                       srv_request *out, srv_error *e);

/* ---- chat templates ---------------------------------------------------------------- */
typedef enum { SRV_TEMPLATE_NONE = 0, SRV_TEMPLATE_CHATML } srv_template_kind;
/* Classify a tokenizer's chat template (NULL = none). */
srv_template_kind srv_template_detect(const char *tpl);
/* Render `messages` (validated here: array of {role, content}) into out (malloc'ed). */
bool srv_render_chat(srv_template_kind kind, json_t *messages, char **out, srv_error *e);

/* ---- jobs and the worker ----------------------------------------------------------- */
enum { SRV_JOB_QUEUED = 0, SRV_JOB_RUNNING, SRV_JOB_DONE };

typedef struct srv_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int phase;                /* SRV_JOB_*; RUNNING means the prompt was tokenized and fits */
    srv_request req;
    char id[40];
    int64_t created;          /* unix seconds */
    double t_arrive_ms;       /* monotonic: when the request was accepted */
    double t_start_ms;        /* monotonic: when the worker took it (0 = never) */
    double t_first_ms;        /* monotonic: the first text delivered (0 = none) */
    double t_end_ms;          /* monotonic: when the worker finished it */
    double deadline_ms;       /* monotonic; past it the job is cancelled */
    volatile int cancel;      /* set by the connection (client gone), the deadline or shutdown */
    volatile int shutdown;    /* set with cancel when the server stops: the reply is a 503 error */
    bool timed_out;
    /* results, guarded by mu */
    srv_buf text;             /* non-streaming: the whole completion text */
    srv_buf sse;              /* streaming: SSE bytes produced so far */
    size_t sse_sent;          /* read offset of the connection in sse */
    srv_error err;            /* set when the job failed */
    specdec_gen_stats stats;
    const char *finish_reason;
    struct { bool on; char drafter[16]; int block_size, probe; double tau, acceptance; long rounds, drafted, accepted;
             char note[256]; } spec;
    struct srv_server *srv;
} srv_job;

srv_job *srv_job_new(struct srv_server *s);
void srv_job_release(srv_job *j);

/* Queue a job (takes a reference for the worker). False when the queue is full. */
bool srv_submit(struct srv_server *s, srv_job *j);
bool srv_worker_start(struct srv_server *s);
void srv_worker_stop(struct srv_server *s);

/* ---- metrics ----------------------------------------------------------------------- */
/* A Prometheus histogram of seconds with fixed upper bounds (SRV_HIST_BOUNDS, then +Inf). */
#define SRV_HIST_N 14
typedef struct srv_hist { uint64_t bucket[SRV_HIST_N + 1]; uint64_t count; double sum; } srv_hist;
void srv_hist_observe(srv_hist *h, double seconds);

typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests[SRV_EP_COUNT][16];  /* by endpoint and status; codes[i] names column i */
    int codes[16]; int n_codes;
    uint64_t prompt_tokens, completion_tokens, generations, cancelled, timed_out, rejected_busy;
    double decode_ms_total, prefill_ms_total, last_decode_tok_s, last_prefill_tok_s;
    uint64_t spec_rounds, spec_drafted, spec_accepted;
    double last_tau, last_acceptance;
    int probe_verdict;                    /* -1 not run, 0 failed, 1 passed */
    srv_hist queue_wait;                  /* arrival to the worker taking the job */
    srv_hist ttft;                        /* arrival to the first text */
    srv_hist tpot;                        /* mean time per output token after the first, per generation */
    srv_hist e2e;                         /* arrival to the end of the generation */
} srv_metrics;
void srv_metrics_init(srv_metrics *m);
void srv_metrics_request(srv_metrics *m, int endpoint, int http_status);
void srv_metrics_generation(srv_metrics *m, const srv_job *j);
/* Prometheus text exposition (malloc'ed). */
char *srv_metrics_render(struct srv_server *s);

/* ---- logging (log.c) ---------------------------------------------------------------- */
enum { SRV_LOG_TEXT = 0, SRV_LOG_JSON };
void srv_log_set_format(int format);
int srv_log_format(void);
/* One line on stderr: "specdec serve: [level: ]msg" or {"ts","level","msg"}. */
void srv_log(const char *level, const char *fmt, ...);
void srv_logv(const char *level, const char *fmt, va_list ap);
/* The line written once per HTTP request. */
typedef struct srv_reqlog {
    char id[64];              /* "cmpl-..." / "chatcmpl-..." for generations, "" otherwise */
    const char *method, *path;
    int status;               /* the HTTP status sent; 499 when the client went away first */
    int prompt_tokens, completion_tokens;
    double ms, queue_ms, ttft_ms;
    const char *stop;         /* stop reason name (srv_stop_name), NULL for non-generations */
    bool has_seed;
    uint64_t seed;
} srv_reqlog;
void srv_log_request(const srv_reqlog *r);
/* The library log callback that routes its messages through srv_log. */
void srv_log_lib(specdec_log_level level, const char *msg, void *user);
/* The name of a finished job's stop reason: length, eos, stop, cancelled, context_full,
 * timeout, shutdown, error. */
const char *srv_stop_name(const struct srv_job *j);

/* ---- the server -------------------------------------------------------------------- */
typedef struct srv_server {
    /* options */
    const char *model_dir;
    char model_name[256];
    const char *api_key;
    int queue_cap;
    size_t max_body;
    int timeout_s;
    int idle_timeout_s;       /* a connection that sends nothing for this long is closed */
    int max_tokens_cap;       /* the most tokens one request may ask for (0 = the context) */
    size_t max_header;        /* request line + headers, bytes (431 past it) */
    int default_draft;        /* SRV_DRAFT_* from --draft (AUTO: srv_auto_draft) */
    const char *draft_vocab;     /* --draft-vocab FILE[:N] | none; NULL: DIR/draft_vocab.json if present */
    const char *draft_model_dir; /* --draft model:DIR, served as "draft": "model" */
    /* model, owned by the worker while it runs */
    specdec_model *model;
    specdec_tokenizer *tok;
    specdec_ctx *ctx;
    specdec_drafter *mtp, *ngram, *dmodel;  /* drafters bound to ctx; NULL when unavailable */
    specdec_drafter *hybrid;                /* "mtp+ngram": with mtp, NULL without */
    specdec_model_info info;
    int n_ctx;
    srv_template_kind tpl;
    const char *tpl_problem;  /* why chat is unavailable, NULL when it works */
    int64_t started;
    /* queue: ring of queue_cap pending jobs */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    srv_job **ring; int q_head, q_len;
    bool busy;                /* the worker is generating */
    srv_job *current;         /* the job being generated, NULL when idle */
    bool stopping;
    pthread_t worker;
    bool worker_started;
    srv_metrics metrics;
} srv_server;

/* What "auto" (--draft auto, the default, and a request's "auto") means on this server: MTP with
 * prompt lookup on a CPU backend, where it measured faster than MTP alone (held-out prompts:
 * 1.60-1.62x classic against 1.46-1.53x, docs/benchmarks/cpu-mtp-ngram-xeon-2026-12-05.md); MTP
 * on the others (an H100 at the 8B shape: 1.836x against 1.854x, cuda-h100-2026-12-05.md, the
 * module's draft being cheap next to the verify there); no drafter without an MTP module. */
static inline int srv_auto_draft(const srv_server *s) {
    if (!s->mtp) return SRV_DRAFT_NONE;
    const char *be = s->ctx ? specdec_ctx_backend(s->ctx) : NULL;
    return s->hybrid && be && !strncmp(be, "cpu", 3) ? SRV_DRAFT_HYBRID : SRV_DRAFT_MTP;
}

/* The drafter of a resolved choice (SRV_DRAFT_AUTO already replaced), NULL for none or when this
 * server lacks it. */
static inline specdec_drafter *srv_drafter_of(const srv_server *s, int dk) {
    return dk == SRV_DRAFT_MTP ? s->mtp : dk == SRV_DRAFT_NGRAM ? s->ngram : dk == SRV_DRAFT_MODEL ? s->dmodel
         : dk == SRV_DRAFT_HYBRID ? s->hybrid : NULL;
}

/* The one place generation happens (classic or speculative). Runs on the worker thread. */
void server_generate(srv_server *s, srv_job *j);

/* Start / stop the HTTP daemon (http.c). */
struct MHD_Daemon;
struct MHD_Daemon *srv_http_start(srv_server *s, const char *host, int port, char *why, size_t why_len);

/* The "specdec" extension object of a finished job (speculative stats, speeds). */
bool srv_add_spec_json(srv_buf *b, const srv_job *j);
/* Monotonic milliseconds. */
double srv_now_ms(void);
/* JSON-encode s as a string body (without quotes) appended to b. */
bool srv_buf_add_json_string(srv_buf *b, const char *s, size_t n);

#endif
