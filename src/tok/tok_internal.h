/* tok_internal.h: the byte-level BPE tokenizer's internal state, shared by the loader
 * (tok_load.c), the encoder (tok_encode.c, tok_bpe.c) and the decoders (tok_decode.c).
 *
 * Model of a Hugging Face tokenizer.json that we support:
 *   added_tokens -> normalizer (none | NFC) -> pre_tokenizer (Split regexes, then ByteLevel)
 *   -> BPE model (vocab + ranked merges) ; decoder ByteLevel.
 * BPE runs on byte ids: after the ByteLevel pre-tokenizer every character of a piece stands for
 * exactly one input byte, so the initial symbols of a piece are byte_id[byte] and the printable
 * "Ġ"-style string never has to be built on the hot path. */
#ifndef SD_TOK_INTERNAL_H
#define SD_TOK_INTERNAL_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "specdec.h"

/* ---- hash tables -------------------------------------------------------------------- */

/* String -> int32 map, open addressing, linear probing. Keys are borrowed pointers that must
 * outlive the map. */
typedef struct sd_strmap_slot { const char *key; uint32_t len, hash; int32_t val; } sd_strmap_slot; /* hash: low 32 bits */
typedef struct sd_strmap { sd_strmap_slot *slots; uint32_t mask, n; } sd_strmap;

uint64_t sd_hash_bytes(const void *p, size_t n);
bool sd_strmap_init(sd_strmap *m, uint32_t expected);
void sd_strmap_free(sd_strmap *m);
/* Insert or overwrite. Returns false on allocation failure (only when growing). */
bool sd_strmap_put(sd_strmap *m, const char *key, uint32_t len, int32_t val);
/* Value of key, or -1. */
int32_t sd_strmap_get(const sd_strmap *m, const char *key, size_t len);

/* (left id, right id) -> (rank, merged id) for BPE merges. */
typedef struct sd_pair_slot { uint64_t key; int32_t rank, id; } sd_pair_slot;
typedef struct sd_pairmap { sd_pair_slot *slots; uint32_t mask, n; } sd_pairmap;

bool sd_pairmap_init(sd_pairmap *m, uint32_t expected);
void sd_pairmap_free(sd_pairmap *m);
void sd_pairmap_put(sd_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id); /* no grow */
/* Slot of (a, b) or NULL when the pair has no merge. */
const sd_pair_slot *sd_pairmap_get(const sd_pairmap *m, int32_t a, int32_t b);

/* ---- UTF-8 -------------------------------------------------------------------------- */

/* Classify the bytes at s[0..n) (n == 0 gives 0 and reads nothing):
 *   > 0: a complete, valid character of that many bytes;
 *     0: a valid but incomplete prefix that runs to the end of the buffer;
 *   < 0: invalid; -k means the first k bytes are one maximal invalid subpart (one U+FFFD). */
int sd_utf8_step(const uint8_t *s, size_t n);
/* Offset where the first invalid (or cut-short) sequence starts, or (size_t)-1 when s is
 * valid UTF-8. */
size_t sd_utf8_invalid_at(const uint8_t *s, size_t n);
/* Decode one valid character of `len` bytes. */
uint32_t sd_utf8_cp(const uint8_t *s, int len);
int sd_utf8_put(uint32_t cp, char *out); /* writes 1..4 bytes, returns count */

/* A growable byte buffer. */
typedef struct sd_buf { char *p; size_t n, cap; } sd_buf;
bool sd_buf_reserve(sd_buf *b, size_t extra);
bool sd_buf_append(sd_buf *b, const void *p, size_t n);
/* Append the lossy UTF-8 decoding of s (invalid parts become U+FFFD, Python errors="replace").
 * When `hold_incomplete`, a valid-but-incomplete tail is not consumed: its length is returned
 * so the caller can keep it. Otherwise the tail becomes one U+FFFD and 0 is returned.
 * Returns (size_t)-1 on allocation failure. */
size_t sd_utf8_lossy_append(sd_buf *b, const uint8_t *s, size_t n, bool hold_incomplete);

/* ---- tokenizer.json reader (tok_json.c) -------------------------------------------- */

/* tokenizer.json with model.vocab and model.merges streamed into flat arrays (they are ~all of
 * the file) and everything else as a Jansson DOM. */
typedef struct sd_tok_doc {
    json_t *root;            /* the document less model.vocab / model.merges */
    bool have_vocab, have_merges;
    uint32_t *vocab;         /* n_vocab x (offset, length, id); strings in vocab_strs */
    size_t n_vocab;
    uint32_t *merges;        /* n_merges x (left offset, left length, right offset, right length) */
    size_t n_merges;
    sd_buf vocab_strs, merge_strs;
} sd_tok_doc;

/* Parse text[0..len). Errors (SPECDEC_ERR_FORMAT) name the byte offset. */
specdec_status sd_tok_doc_parse(const char *text, size_t len, sd_tok_doc *d, specdec_err *err);
void sd_tok_doc_free(sd_tok_doc *d);

/* ---- tokenizer ---------------------------------------------------------------------- */

typedef struct sd_added_token {
    int32_t id;
    char *content;           /* as in tokenizer.json */
    uint32_t len;
    char *match;             /* what is searched: content, or NFC(content) when `normalized` */
    uint32_t match_len;
    bool special, single_word, lstrip, rstrip, normalized;
} sd_added_token;

/* One pre-tokenizer step applied to every piece produced by the step before it. */
typedef struct sd_pretok_step {
    pcre2_code *re;          /* Split pattern (Isolated: matches and gaps are pieces); may be NULL */
    bool prefix_space;       /* ByteLevel add_prefix_space: prepend ' ' unless the piece starts so */
} sd_pretok_step;

#define SD_TOK_MAX_STEPS 8

/* Cache of BPE results for short pieces, keyed by the piece's raw bytes. Cleared wholesale
 * when full; guarded by `mu` because encoding takes a const tokenizer. */
typedef struct sd_bpe_cache_entry { uint32_t key_off, key_len, ids_off, n_ids; uint64_t hash; } sd_bpe_cache_entry;
typedef struct sd_bpe_cache {
    pthread_mutex_t mu;
    uint32_t *slots;         /* 0 = empty, else 1 + entry index */
    uint32_t mask, n_entries, max_entries;
    sd_bpe_cache_entry *entries;
    char *keys; size_t keys_n, keys_cap;
    int32_t *ids; size_t ids_n, ids_cap;
} sd_bpe_cache;

struct specdec_tokenizer {
    int32_t n_ids;           /* vocab_size: max id + 1 over vocab and added tokens */
    /* Per id (n_ids): the token string as written in tokenizer.json ("Ġhello" or added
     * content) and the raw bytes it decodes to. Offsets into str_arena / dec_arena;
     * str_len == UINT32_MAX marks an id that nothing defines. */
    uint32_t *str_off, *str_len, *dec_off, *dec_len;
    char *str_arena, *dec_arena;
    bool *is_added;

    sd_strmap vocab;         /* model vocab string -> id */
    sd_pairmap merges;
    int32_t byte_id[256];    /* vocab id of the ByteLevel character of each byte, or -1 */
    int32_t unk_id;          /* -1 when the model has no unk_token */
    bool ignore_merges;

    bool nfc;                /* normalizer NFC (else none) */
    sd_pretok_step steps[SD_TOK_MAX_STEPS];
    int n_steps;

    sd_added_token *added;
    int n_added;
    bool any_normalized_added;
    sd_strmap added_map;     /* content -> id */
    /* Candidate added tokens by first byte of `match`, longest first (for leftmost-longest). */
    int32_t *by_byte_idx;    /* indices into added[] */
    uint32_t by_byte_start[257];

    char *chat_template;
    int n_eos;
    int32_t eos_ids[8];

    sd_bpe_cache cache;
};

/* GPT-2 ByteLevel alphabet: the code point that stands for each byte, and the inverse
 * (-1 for code points that stand for no byte). Code points are < 324. */
uint32_t sd_byte_to_cp(uint8_t b);
int sd_cp_to_byte(uint32_t cp);

/* NFC of s[0..n) (valid UTF-8) as a malloc'ed, NUL-terminated string; NULL on failure. */
char *sd_nfc(const char *s, size_t n, size_t *out_n);

/* BPE of one pre-tokenized piece of raw bytes; appends ids to *out. */
specdec_status sd_bpe_piece(const specdec_tokenizer *t, const uint8_t *p, size_t n,
                            int32_t **out, size_t *n_out, size_t *cap_out);
bool sd_bpe_cache_init(sd_bpe_cache *c);
void sd_bpe_cache_free(sd_bpe_cache *c);

#endif
