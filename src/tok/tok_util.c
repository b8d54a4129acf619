/* tok_util.c: the tokenizer's small building blocks: open-addressing hash maps keyed by
 * string and by (id, id) pair, strict UTF-8 classification and lossy decoding (U+FFFD per
 * maximal invalid subpart, as Python's errors="replace" and Rust's from_utf8_lossy), a
 * growable buffer, and the GPT-2 ByteLevel byte <-> code point alphabet. */
#include "tok/tok_internal.h"
#include <stdlib.h>
#include <string.h>

/* ---- hashing ------------------------------------------------------------------------ */

/* FNV-1a over 8-byte words then a final avalanche: quick for the short keys we see. */
uint64_t sd_hash_bytes(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8; n -= 8;
    }
    while (n--) h = (h ^ *s++) * 0x100000001b3ull;
    h ^= h >> 33; h *= 0xff51afd7ed558ccdull; h ^= h >> 33;
    return h;
}

static uint32_t pow2_for(uint32_t expected) {
    uint32_t cap = 16;
    while (cap < expected * 2u && cap < (1u << 30)) cap <<= 1;
    return cap;
}

bool sd_strmap_init(sd_strmap *m, uint32_t expected) {
    uint32_t cap = pow2_for(expected);
    m->slots = calloc(cap, sizeof *m->slots);
    m->mask = cap - 1;
    m->n = 0;
    return m->slots != NULL;
}

void sd_strmap_free(sd_strmap *m) { free(m->slots); m->slots = NULL; m->n = 0; }

static bool strmap_grow(sd_strmap *m) {
    sd_strmap bigger;
    if (!sd_strmap_init(&bigger, (m->mask + 1))) return false;
    for (uint32_t i = 0; i <= m->mask; i++)
        if (m->slots[i].key) sd_strmap_put(&bigger, m->slots[i].key, m->slots[i].len, m->slots[i].val);
    free(m->slots);
    *m = bigger;
    return true;
}

/* The slot keeps the key's hash so that probing past other keys never touches their bytes. */
bool sd_strmap_put(sd_strmap *m, const char *key, uint32_t len, int32_t val) {
    if ((m->n + 1) * 2 > m->mask + 1 && !strmap_grow(m)) return false;
    uint32_t h = (uint32_t)sd_hash_bytes(key, len);
    for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
        sd_strmap_slot *s = &m->slots[i];
        if (!s->key) { s->key = key; s->len = len; s->hash = h; s->val = val; m->n++; return true; }
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) { s->val = val; return true; }
    }
}

int32_t sd_strmap_get(const sd_strmap *m, const char *key, size_t len) {
    if (!m->slots) return -1;
    uint32_t h = (uint32_t)sd_hash_bytes(key, len);
    for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
        const sd_strmap_slot *s = &m->slots[i];
        if (!s->key) return -1;
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return s->val;
    }
}

static uint32_t pair_hash(uint64_t k) {
    k ^= k >> 31; k *= 0x9e3779b97f4a7c15ull; k ^= k >> 29;
    return (uint32_t)k;
}

bool sd_pairmap_init(sd_pairmap *m, uint32_t expected) {
    uint32_t cap = pow2_for(expected);
    m->slots = malloc((size_t)cap * sizeof *m->slots);
    if (!m->slots) return false;
    for (uint32_t i = 0; i < cap; i++) m->slots[i].key = UINT64_MAX;
    m->mask = cap - 1;
    m->n = 0;
    return true;
}

void sd_pairmap_free(sd_pairmap *m) { free(m->slots); m->slots = NULL; m->n = 0; }

/* A later duplicate of a pair overwrites the earlier one, as HF's merges map does. The caller
 * sizes the map for all merges, so it never fills past half. */
void sd_pairmap_put(sd_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
        sd_pair_slot *s = &m->slots[i];
        if (s->key == UINT64_MAX) { s->key = key; s->rank = rank; s->id = id; m->n++; return; }
        if (s->key == key) { s->rank = rank; s->id = id; return; }
    }
}

const sd_pair_slot *sd_pairmap_get(const sd_pairmap *m, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
        const sd_pair_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}

/* ---- UTF-8 -------------------------------------------------------------------------- */

int sd_utf8_step(const uint8_t *s, size_t n) {
    if (n == 0) return 0;   /* never read past the text */
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    int need;
    uint8_t lo = 0x80, hi = 0xBF;        /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) { need = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return -1;                      /* stray continuation, C0/C1 overlong lead, F5..FF */
    for (int k = 1; k < need; k++) {
        if ((size_t)k >= n) return 0;
        uint8_t b = s[k];
        bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!ok) return -k;
    }
    return need;
}

size_t sd_utf8_invalid_at(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        int k = sd_utf8_step(s + i, n - i);
        if (k <= 0) return i;   /* the start of the bad sequence, as Python and Rust report it */
        i += (size_t)k;
    }
    return (size_t)-1;
}

uint32_t sd_utf8_cp(const uint8_t *s, int len) {
    switch (len) {
    case 1: return s[0];
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    default: return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                    ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    }
}

int sd_utf8_put(uint32_t cp, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | (cp >> 6)); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12)); o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18)); o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

bool sd_buf_reserve(sd_buf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

bool sd_buf_append(sd_buf *b, const void *p, size_t n) {
    if (!sd_buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

size_t sd_utf8_lossy_append(sd_buf *b, const uint8_t *s, size_t n, bool hold_incomplete) {
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    /* worst case every byte becomes 3 bytes */
    if (!sd_buf_reserve(b, n * 3)) return (size_t)-1;
    size_t i = 0;
    while (i < n) {
        int k = sd_utf8_step(s + i, n - i);
        if (k > 0) { memcpy(b->p + b->n, s + i, (size_t)k); b->n += (size_t)k; i += (size_t)k; }
        else if (k < 0) { memcpy(b->p + b->n, fffd, 3); b->n += 3; i += (size_t)(-k); }
        else if (hold_incomplete) { b->p[b->n] = 0; return n - i; }
        else { memcpy(b->p + b->n, fffd, 3); b->n += 3; i = n; }
    }
    b->p[b->n] = 0;
    return 0;
}

/* ---- ByteLevel alphabet ------------------------------------------------------------- */

/* Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves; the other 68
 * (0..0x20, 0x7F..0xA0, 0xAD) map in byte order to U+0100..U+0143. */
uint32_t sd_byte_to_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 0x100u + b;
    if (b <= 0xA0) return 0x100u + 33u + (uint32_t)(b - 0x7F);
    return 0x100u + 67u; /* 0xAD */
}

int sd_cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(cp - 0x121 + 0x7F);
    if (cp == 0x143) return 0xAD;
    return -1;
}
