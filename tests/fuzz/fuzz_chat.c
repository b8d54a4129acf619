/* fuzz_chat.c: the chat template renderer of the server on arbitrary bytes. The input is parsed
 * as JSON the way the server parses a body; its "messages" member (or the whole document) goes
 * to srv_render_chat with the ChatML template, and the input as text to srv_template_detect.
 * A rendering either fails with a 400 naming a field or yields a prompt that starts with a
 * ChatML turn and ends with the assistant's generation prompt. */
#include "fuzz.h"
#include "server/server.h"
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    FUZZ_CHECK(text, "oom");
    memcpy(text, data, size);
    text[size] = 0;
    srv_template_kind kind = srv_template_detect(text);
    FUZZ_CHECK(kind == (strstr(text, "<|im_start|>") ? SRV_TEMPLATE_CHATML : SRV_TEMPLATE_NONE), "template misclassified");
    free(text);

    json_error_t je;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!root) return 0;
    json_t *msgs = json_is_object(root) && json_object_get(root, "messages") ? json_object_get(root, "messages") : root;
    for (int k = 0; k < 2; k++) {
        srv_error e = {0};
        char *out = NULL;
        bool ok = srv_render_chat(k ? SRV_TEMPLATE_NONE : SRV_TEMPLATE_CHATML, msgs, &out, &e);
        if (!ok) {
            FUZZ_CHECK(e.http == 400 && e.message[0] && !out, "failure without a 400 and a message");
            continue;
        }
        FUZZ_CHECK(k == 0 && out, "rendered without a supported template");
        static const char gen[] = "<|im_start|>assistant\n";
        size_t n = strlen(out);
        FUZZ_CHECK(strncmp(out, "<|im_start|>", 12) == 0 && n >= sizeof gen - 1 && strcmp(out + n - (sizeof gen - 1), gen) == 0,
                   "rendered prompt is not ChatML");
        free(out);
    }
    json_decref(root);
    return 0;
}
