/* serve_main.c: `specdec serve`: options, model loading, chat-template check, the worker and
 * the HTTP daemon, and a clean shutdown on SIGINT / SIGTERM. SIGPIPE is ignored so a client
 * that hangs up mid-write can never kill the server. */
#include "cli/cli.h"
#include "server/server.h"
#include <errno.h>
#include <libgen.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SD_SERVE_TRY(x) do { specdec_status st_ = (x); if (st_ != SPECDEC_OK) return st_; } while (0)

static void serve_usage_to(FILE *f) {
    fputs("usage: specdec serve [-m DIR] [--draft auto|mtp|mtp+ngram|ngram|model:DIR|none] [--host 127.0.0.1] [--port 8080]\n"
          "                     [--api-key KEY] [--threads N] [--queue N] [--max-body BYTES] [--timeout-s S]\n"
          "                     [--ctx N] [--batch N] [--kv-dtype f32|bf16|f16] [--precision f32|int8] [--name MODEL_NAME]\n"
          "                     [--draft-vocab FILE[:N]|none]\n"
          "                     [--backend B] [--device N] [--tp N] [--tp-reduce gather|ring|none] [--drafter-weights stored|q4|default]\n"
          "                     [--max-tokens N] [--max-header-bytes BYTES] [--idle-timeout-s S] [--log-format text|json]\n"
          "  Limits (defaults): --queue 16 waiting requests (503 past it), --max-body 1048576 (413),\n"
          "  --max-header-bytes 16384 (431), --max-tokens 0 = up to the context (400), --ctx = the model's\n"
          "  (400 context_length_exceeded), --timeout-s 300 per request, --idle-timeout-s 15 per connection.\n"
          "  The MTP drafter uses DIR/draft_vocab.json when the model ships one (--draft-vocab none: full head).\n"
          "  --draft auto (the default): mtp+ngram on a CPU backend, mtp on a GPU, none without an mtp module.\n"
          "  Endpoints: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, /health, /metrics.\n"
          "  The API key may also come from the environment variable SPECDEC_API_KEY.\n", f);
}
static void serve_usage(void) { serve_usage_to(stderr); }

/* Why chat completions cannot be served for this tokenizer, or NULL when they can. */
static const char *template_problem(const specdec_tokenizer *tok, srv_template_kind *kind) {
    const char *tpl = specdec_tokenizer_chat_template(tok);
    *kind = srv_template_detect(tpl);
    if (!tpl || !*tpl) return "tokenizer_config.json has no chat_template";
    if (*kind != SRV_TEMPLATE_CHATML) return "the chat_template is not a ChatML template (no <|im_start|>); only ChatML is supported";
    if (specdec_tokenizer_token_id(tok, "<|im_start|>") < 0 || specdec_tokenizer_token_id(tok, "<|im_end|>") < 0)
        return "the tokenizer lacks the <|im_start|> / <|im_end|> tokens its ChatML template needs";
    return NULL;
}

/* Drafters: MTP when the checkpoint has it, prompt lookup always (no weights), a draft model
 * when asked. With a default drafter, one tiny warm-up generation runs the exactness probe
 * now, so the verdict is logged (and in /metrics) before the first request. */
static specdec_status setup_drafters(srv_server *s, specdec_err *err) {
    if (s->info.mtp_layers > 0) {
        specdec_err e2 = {0};
        if (specdec_drafter_init_mtp(s->model, &s->mtp, &e2) != SPECDEC_OK)
            srv_log("warning", "MTP drafter unavailable: %s\n", e2.msg);
    }
    if (s->mtp) {
        char used[1200];
        SD_SERVE_TRY(cli_draft_vocab_auto(s->mtp, s->model_dir, s->draft_vocab, used, sizeof used, err));
        if (used[0])
            srv_log("info", "MTP drafts over %d ids (%s)\n", specdec_drafter_draft_vocab_size(s->mtp), used);
        /* MTP with prompt lookup: a second module drafter (its own KV cache), the same vocabulary */
        SD_SERVE_TRY(specdec_drafter_init(s->model, "mtp+ngram", &s->hybrid, err));
        SD_SERVE_TRY(cli_draft_vocab_auto(s->hybrid, s->model_dir, s->draft_vocab, used, sizeof used, err));
    } else if (s->draft_vocab && strcmp(s->draft_vocab, "none")) {
        err->status = SPECDEC_ERR_INVALID_ARG;
        snprintf(err->msg, sizeof err->msg, "--draft-vocab: %s has no usable mtp module to use it", s->model_dir);
        return err->status;
    }
    if ((s->default_draft == SRV_DRAFT_MTP || s->default_draft == SRV_DRAFT_HYBRID) && !s->mtp) {
        err->status = SPECDEC_ERR_MISSING;
        snprintf(err->msg, sizeof err->msg, "--draft %s: %s has no usable mtp module",
                 s->default_draft == SRV_DRAFT_MTP ? "mtp" : "mtp+ngram", s->model_dir);
        return err->status;
    }
    SD_SERVE_TRY(specdec_drafter_init_ngram(0, &s->ngram, err));
    if (s->draft_model_dir) SD_SERVE_TRY(specdec_drafter_init_model(s->model, s->draft_model_dir, &s->dmodel, err));
    int dk = s->default_draft == SRV_DRAFT_AUTO ? srv_auto_draft(s) : s->default_draft;
    specdec_drafter *d = srv_drafter_of(s, dk);
    if (!d) {
        srv_log("info", "speculative decoding off by default (%s)\n",
                s->default_draft == SRV_DRAFT_NONE ? "--draft none" : "the model has no mtp module");
        return SPECDEC_OK;
    }
    int32_t prompt[4] = {0, 1, 2, 3};
    int n = s->n_ctx > 40 ? 4 : 1;
    specdec_gen_params gp = specdec_gen_default_params();
    gp.max_tokens = 2;
    gp.sampling.temperature = 0;
    gp.ignore_eos = true;
    specdec_spec_params sp = specdec_spec_default_params();
    sp.quiet = true;
    specdec_spec_stats ss;
    memset(&ss, 0, sizeof ss);
    specdec_err e2 = {0};
    if (specdec_spec_generate(s->ctx, d, s->tok, prompt, n, &gp, &sp, NULL, NULL, &ss, &e2) != SPECDEC_OK) {
        srv_log("warning", "warm-up with the %s drafter failed: %s", specdec_drafter_name(d), e2.msg);
        return SPECDEC_OK;
    }
    s->metrics.probe_verdict = ss.probe;
    srv_log("info", "speculative decoding by default with the %s drafter: exactness probe %s%s%s\n",
            specdec_drafter_name(d), ss.probe == 1 ? "passed" : ss.probe == 0 ? "FAILED, declined (classic decoding)" : "not run",
            ss.note[0] ? "; " : "", ss.note);
    return SPECDEC_OK;
}

/* A fatal error once the log format is chosen: a log line in that format (JSON consumers see it),
 * the CLI's usual error otherwise. */
static int serve_fail_err(const specdec_err *err) {
    if (srv_log_format() != SRV_LOG_JSON) return cli_fail_err(err);
    srv_log("error", "%s: %s", specdec_status_name(err->status), err->msg);
    return 1;
}

static int serve_fail(const char *msg) {
    if (srv_log_format() != SRV_LOG_JSON) return cli_fail("%s", msg);
    srv_log("error", "%s", msg);
    return 1;
}

int cmd_serve(int argc, char **argv) {
    const char *dir = NULL, *host = "127.0.0.1", *name = NULL, *draft = "auto", *draft_vocab = NULL;
    long port = 8080, queue = 16, timeout_s = 300, idle_s = 15, max_tokens = 0, max_header = 16384, v;
    int log_format = SRV_LOG_TEXT;
    unsigned long long max_body = 1 << 20;
    const char *api_key = getenv("SPECDEC_API_KEY");
    specdec_ctx_params cp = specdec_ctx_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int taken = cli_ctx_option(a, val, &cp, &i);
        if (!taken) taken = cli_input_option(a, val, &dir, NULL, NULL, &i);
        if (taken) { if (taken < 0) return 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { serve_usage_to(stdout); return 0; }
        else if (!strcmp(a, "--host")) { if (!val || !*val) return cli_fail("--host needs an address"); host = val; i++; }
        else if (!strcmp(a, "--port")) { if (cli_int(a, val, 1, 65535, &port)) return 1; i++; }
        else if (!strcmp(a, "--api-key")) { if (!val || !*val) return cli_fail("--api-key needs a key"); api_key = val; i++; }
        else if (!strcmp(a, "--queue")) { if (cli_int(a, val, 0, 4096, &queue)) return 1; i++; }
        else if (!strcmp(a, "--timeout-s")) { if (cli_int(a, val, 1, 86400, &timeout_s)) return 1; i++; }
        else if (!strcmp(a, "--max-body")) { if (cli_int(a, val, 64, 1L << 30, &v)) return 1; max_body = (unsigned long long)v; i++; }
        else if (!strcmp(a, "--draft-vocab")) { if (!val || !*val) return cli_fail("--draft-vocab needs FILE[:N] or none"); draft_vocab = val; i++; }
        else if (!strcmp(a, "--max-tokens")) { if (cli_int(a, val, 0, 1 << 24, &max_tokens)) return 1; i++; }
        else if (!strcmp(a, "--max-header-bytes")) { if (cli_int(a, val, 1024, 1 << 20, &max_header)) return 1; i++; }
        else if (!strcmp(a, "--idle-timeout-s")) { if (cli_int(a, val, 1, 86400, &idle_s)) return 1; i++; }
        else if (!strcmp(a, "--log-format")) {
            if (val && !strcmp(val, "text")) log_format = SRV_LOG_TEXT;
            else if (val && !strcmp(val, "json")) log_format = SRV_LOG_JSON;
            else return cli_fail("--log-format: expected text or json");
            i++;
        }
        else if (!strcmp(a, "--name")) { if (!val || !*val) return cli_fail("--name needs a model name"); name = val; i++; }
        else if (!strcmp(a, "--draft")) {
            if (!val || (strcmp(val, "auto") && strcmp(val, "mtp") && strcmp(val, "mtp+ngram") && strcmp(val, "ngram") &&
                         strcmp(val, "none") && strncmp(val, "model:", 6)))
                return cli_fail("--draft: expected auto, mtp, mtp+ngram, ngram, model:DIR or none");
            draft = val; i++;
        }
        else { serve_usage(); return cli_fail("serve: unknown option '%s'", a); }
    }
    static char dir_buf[4096];   /* -m absent: the embedded model, as for run */
    if (cli_model_dir(dir, dir_buf, sizeof dir_buf)) return 1;
    dir = dir_buf;
    if (api_key && !*api_key) api_key = NULL;
    /* from here on every message, the library's included, is a server log line */
    srv_log_set_format(log_format);
    specdec_log_set(srv_log_lib, NULL);

    /* Block the stop signals in every thread (they inherit the mask) and take them with
     * sigwait below; ignore SIGPIPE everywhere. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);

    static srv_server s;
    memset(&s, 0, sizeof s);
    s.model_dir = dir;
    s.draft_vocab = draft_vocab;
    s.api_key = api_key;
    s.queue_cap = (int)queue;
    s.max_body = (size_t)max_body;
    s.timeout_s = (int)timeout_s;
    s.idle_timeout_s = (int)idle_s;
    s.max_tokens_cap = (int)max_tokens;
    s.max_header = (size_t)max_header;
    s.default_draft = !strcmp(draft, "mtp") ? SRV_DRAFT_MTP : !strcmp(draft, "mtp+ngram") ? SRV_DRAFT_HYBRID
                    : !strcmp(draft, "ngram") ? SRV_DRAFT_NGRAM
                    : !strcmp(draft, "none") ? SRV_DRAFT_NONE : !strncmp(draft, "model:", 6) ? SRV_DRAFT_MODEL
                    : SRV_DRAFT_AUTO;
    if (s.default_draft == SRV_DRAFT_MODEL) s.draft_model_dir = draft + 6;
    s.started = (int64_t)time(NULL);
    srv_metrics_init(&s.metrics);
    if (name) snprintf(s.model_name, sizeof s.model_name, "%s", name);
    else {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s", dir);
        size_t n = strlen(tmp);
        while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
        snprintf(s.model_name, sizeof s.model_name, "%s", basename(tmp));
    }

    specdec_err err = {0};
    int rc = 1;
    struct MHD_Daemon *d = NULL;
    if (specdec_tokenizer_load(dir, &s.tok, &err) || cli_load_model(dir, true, &s.model, &err) ||
        specdec_ctx_init(s.model, &cp, &s.ctx, &err)) {
        rc = serve_fail_err(&err);
        goto done;
    }
    specdec_model_get_info(s.model, &s.info);
    s.n_ctx = cp.n_ctx ? cp.n_ctx : s.info.max_position_embeddings;
    if (setup_drafters(&s, &err)) { rc = serve_fail_err(&err); goto done; }
    s.tpl_problem = template_problem(s.tok, &s.tpl);
    if (s.tpl_problem) srv_log("warning", "/v1/chat/completions disabled: %s\n", s.tpl_problem);
    if (!srv_worker_start(&s)) { rc = serve_fail("cannot start the worker thread"); goto done; }
    char why[256];
    d = srv_http_start(&s, host, (int)port, why, sizeof why);
    if (!d) { rc = serve_fail(why); goto done; }
    srv_log("info", "listening on http://%s:%ld (model '%s', context %d, queue %d%s)\n", host, port,
            s.model_name, s.n_ctx, s.queue_cap, api_key ? ", API key required" : "");
    int sig = 0;
    while (sigwait(&stop_set, &sig) != 0) {}
    srv_log("info", "signal %d, shutting down\n", sig);
    rc = 0;
done:
    /* stop accepting, let queued jobs drain with 503, cancel the running one */
    srv_job *cut = NULL;   /* the generation in progress, held until its stream has its error event */
    if (d) {
        MHD_quiesce_daemon(d);
        pthread_mutex_lock(&s.qmu);
        for (int i = 0; i < s.q_len; i++) s.ring[(s.q_head + i) % (s.queue_cap + 1)]->cancel = 1;
        if (s.current) {
            cut = s.current;
            pthread_mutex_lock(&cut->mu);
            cut->refs++;
            cut->shutdown = 1;
            cut->cancel = 1;
            pthread_mutex_unlock(&cut->mu);
        }
        pthread_mutex_unlock(&s.qmu);
    }
    srv_worker_stop(&s);
    if (cut) {
        /* MHD_stop_daemon closes connections at once: give the client up to 2 s to receive the
         * shutdown error (a 503, or in-band on a stream). Its connection holds a reference to the
         * job until the response is complete, so ours being the last one means it was sent. */
        for (int i = 0; i < 200; i++) {
            pthread_mutex_lock(&cut->mu);
            bool drained = cut->refs <= 1;
            pthread_mutex_unlock(&cut->mu);
            if (drained) break;
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        srv_job_release(cut);
    }
    if (d) MHD_stop_daemon(d);
    specdec_drafter_free(s.hybrid);
    specdec_drafter_free(s.mtp);
    specdec_drafter_free(s.ngram);
    specdec_drafter_free(s.dmodel);
    specdec_ctx_free(s.ctx);
    specdec_model_free(s.model);
    specdec_tokenizer_free(s.tok);
    return rc;
}
