/* chat.c: chat templates for /v1/chat/completions. We do not run Jinja: a template is
 * classified, and the families we know are rendered by C code with the same semantics.
 * ChatML (Qwen family): "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then
 * "<|im_start|>assistant\n" as the generation prompt. */
#include "server/server.h"
#include <stdlib.h>
#include <string.h>

srv_template_kind srv_template_detect(const char *tpl) {
    if (!tpl || !*tpl) return SRV_TEMPLATE_NONE;
    if (strstr(tpl, "<|im_start|>")) return SRV_TEMPLATE_CHATML;
    return SRV_TEMPLATE_NONE;
}

#define BAD(param, ...) srv_bad(e, param, __VA_ARGS__)

/* content: a string, or an array of {"type": "text", "text": "..."} parts (concatenated). */
static bool add_content(srv_buf *b, json_t *c, size_t i, srv_error *e) {
    char param[40];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (json_is_string(c)) return srv_buf_add(b, json_string_value(c), json_string_length(c)) || BAD(param, "out of memory");
    if (!json_is_array(c)) return BAD(param, "'%s' must be a string or an array of text parts", param);
    size_t j; json_t *part;
    json_array_foreach(c, j, part) {
        json_t *ty = json_object_get(part, "type"), *tx = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(ty) || strcmp(json_string_value(ty), "text") != 0 ||
            !json_is_string(tx) || json_object_size(part) != 2)
            return BAD(param, "'%s[%zu]' must be {\"type\": \"text\", \"text\": string} (only text is supported)", param, j);
        if (!srv_buf_add(b, json_string_value(tx), json_string_length(tx))) return BAD(param, "out of memory");
    }
    return true;
}

bool srv_render_chat(srv_template_kind kind, json_t *messages, char **out, srv_error *e) {
    *out = NULL;
    if (kind != SRV_TEMPLATE_CHATML)
        return BAD("messages", "this model has no supported chat template");
    if (!json_is_array(messages)) return BAD("messages", "'messages' must be an array");
    if (json_array_size(messages) == 0) return BAD("messages", "'messages' must not be empty");
    srv_buf b = {0};
    size_t i; json_t *m;
    json_array_foreach(messages, i, m) {
        char param[40];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) { srv_buf_free(&b); return BAD(param, "'%s' must be an object", param); }
        const char *k; json_t *v;
        json_object_foreach(m, k, v)
            if (strcmp(k, "role") && strcmp(k, "content") && strcmp(k, "name")) {
                srv_buf_free(&b);
                return BAD(param, "unknown field '%s.%s'", param, k);
            }
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        json_t *name = json_object_get(m, "name");
        if (name && !json_is_string(name)) { srv_buf_free(&b); return BAD(param, "'%s.name' must be a string", param); }
        const char *r = json_string_value(role);
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!r) { srv_buf_free(&b); return BAD(param, "'%s' must be a string", param); }
        if (!strcmp(r, "developer")) r = "system";   /* OpenAI's newer name for system */
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
            srv_buf_free(&b);
            return BAD(param, "'%s' is \"%s\"; expected system, user, assistant or developer", param, r);
        }
        if (!content) {
            snprintf(param, sizeof param, "messages[%zu].content", i);
            srv_buf_free(&b);
            return BAD(param, "'%s' is required", param);
        }
        if (!srv_buf_addf(&b, "<|im_start|>%s\n", r) || !add_content(&b, content, i, e) ||
            !srv_buf_add(&b, "<|im_end|>\n", 11)) {
            srv_buf_free(&b);
            if (!e->http) BAD("messages", "out of memory");
            return false;
        }
    }
    if (!srv_buf_add(&b, "<|im_start|>assistant\n", 22)) { srv_buf_free(&b); return BAD("messages", "out of memory"); }
    *out = b.p;
    return true;
}
