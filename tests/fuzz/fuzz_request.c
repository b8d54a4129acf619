/* fuzz_request.c: the server's request body parser (srv_parse_request: completion and chat
 * JSON, stream and stream_options, the specdec extension) on arbitrary bytes. The first input
 * byte picks the endpoint and what the server offers (drafters, a chat template or a reason it
 * has none); the rest is the HTTP body, as the connection thread hands it over. An accepted
 * request must hold what the worker relies on; a refused one a 4xx with a message. */
#include "fuzz.h"
#include "server/server.h"
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t sel = data[0];
    srv_server s;
    memset(&s, 0, sizeof s);
    snprintf(s.model_name, sizeof s.model_name, "qwen3-kernel");
    /* the parser only asks whether a drafter exists: any non-NULL handle says yes */
    static int present;
    s.mtp = (sel & 2) ? (specdec_drafter *)&present : NULL;
    s.ngram = (sel & 4) ? (specdec_drafter *)&present : NULL;
    s.dmodel = (sel & 8) ? (specdec_drafter *)&present : NULL;
    s.default_draft = s.mtp ? SRV_DRAFT_MTP : SRV_DRAFT_NONE;
    s.tpl = (sel & 16) ? SRV_TEMPLATE_NONE : SRV_TEMPLATE_CHATML;
    s.tpl_problem = (sel & 32) ? "the chat_template is not a ChatML template" : NULL;
    int endpoint = (sel & 1) ? SRV_EP_CHAT : SRV_EP_COMPLETIONS;

    /* the body as the connection thread holds it: its own buffer of exactly the body's bytes */
    size_t len = size - 1;
    char *body = malloc(len ? len : 1);
    FUZZ_CHECK(body, "oom");
    memcpy(body, data + 1, len);
    srv_request r;
    srv_error e = {0};
    bool ok = srv_parse_request(&s, endpoint, body, len, &r, &e);
    free(body);
    if (!ok) {
        FUZZ_CHECK(e.http >= 400 && e.http < 600 && e.message[0], "refusal without a status and a message");
        FUZZ_CHECK(r.prompt == NULL && r.n_stop == 0, "refused request keeps allocations");
        return 0;
    }
    FUZZ_CHECK(r.prompt && r.prompt[0], "accepted request without a prompt");
    FUZZ_CHECK(r.endpoint == endpoint, "endpoint changed");
    FUZZ_CHECK(r.max_tokens == -1 || (r.max_tokens >= 1 && r.max_tokens <= (1 << 24)), "max_tokens %d", r.max_tokens);
    FUZZ_CHECK(r.sampling.temperature >= 0 && r.sampling.temperature <= 2, "temperature %g", r.sampling.temperature);
    FUZZ_CHECK(r.sampling.top_p > 0 && r.sampling.top_p <= 1, "top_p %g", r.sampling.top_p);
    FUZZ_CHECK(r.sampling.min_p >= 0 && r.sampling.min_p <= 1, "min_p %g", r.sampling.min_p);
    FUZZ_CHECK(r.sampling.top_k >= 0, "top_k %d", r.sampling.top_k);
    FUZZ_CHECK(r.n_stop >= 0 && r.n_stop <= 16, "n_stop %d", r.n_stop);
    for (int i = 0; i < r.n_stop; i++) FUZZ_CHECK(r.stop[i] && r.stop[i][0], "empty stop string %d", i);
    FUZZ_CHECK(!r.include_usage || r.stream, "include_usage without stream");
    FUZZ_CHECK(r.block_size == 0 || (r.block_size >= 2 && r.block_size <= SPECDEC_SPEC_MAX_DEPTH), "block_size %d", r.block_size);
    FUZZ_CHECK((r.draft != SRV_DRAFT_MTP || s.mtp) && (r.draft != SRV_DRAFT_NGRAM || s.ngram) && (r.draft != SRV_DRAFT_MODEL || s.dmodel),
               "drafter %d accepted that the server does not have", r.draft);
    FUZZ_CHECK(endpoint != SRV_EP_CHAT || !s.tpl_problem, "chat accepted without a template");
    srv_request_free(&r);
    return 0;
}
