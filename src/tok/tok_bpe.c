/* tok_bpe.c: the BPE model applied to one pre-tokenized piece, plus the cache of results
 * for repeated short pieces.
 *
 * Merging follows HF tokenizers' word.rs: symbols start as one per byte (the ByteLevel
 * character of the byte); the applicable merge of lowest rank is applied first, ties going to
 * the leftmost pair; a merged symbol keeps the position of its left half. We keep a min-heap of
 * candidate (rank, left position) pairs and drop stale entries when popped, so a piece of n
 * bytes costs O(n log n) whatever its length (long runs of '=' or spaces are single pieces). */
#include "tok/tok_internal.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

#define CACHE_MAX_PIECE 256           /* longer pieces are not cached (as HF) */
#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_ENTRIES (1u << 15)
#define CACHE_KEYS_CAP ((size_t)1 << 21)
#define CACHE_IDS_CAP ((size_t)1 << 19)

/* ---- cache -------------------------------------------------------------------------- */

bool sd_bpe_cache_init(sd_bpe_cache *c) {
    memset(c, 0, sizeof *c);
    if (pthread_mutex_init(&c->mu, NULL) != 0) return false;
    c->slots = calloc(CACHE_SLOTS, sizeof *c->slots);
    c->entries = malloc(CACHE_MAX_ENTRIES * sizeof *c->entries);
    c->keys = malloc(CACHE_KEYS_CAP);
    c->ids = malloc(CACHE_IDS_CAP * sizeof *c->ids);
    c->mask = CACHE_SLOTS - 1;
    c->max_entries = CACHE_MAX_ENTRIES;
    c->keys_cap = CACHE_KEYS_CAP;
    c->ids_cap = CACHE_IDS_CAP;
    return c->slots && c->entries && c->keys && c->ids;
}

void sd_bpe_cache_free(sd_bpe_cache *c) {
    if (c->slots) pthread_mutex_destroy(&c->mu);
    free(c->slots); free(c->entries); free(c->keys); free(c->ids);
    memset(c, 0, sizeof *c);
}

/* Copy the cached ids of piece p into *out. Caller holds c->mu. */
static bool cache_get(const sd_bpe_cache *c, const uint8_t *p, size_t n, uint64_t h,
                      const int32_t **ids, uint32_t *n_ids) {
    for (uint32_t i = (uint32_t)h & c->mask;; i = (i + 1) & c->mask) {
        uint32_t e = c->slots[i];
        if (!e) return false;
        const sd_bpe_cache_entry *en = &c->entries[e - 1];
        if (en->hash == h && en->key_len == n && memcmp(c->keys + en->key_off, p, n) == 0) {
            *ids = c->ids + en->ids_off;
            *n_ids = en->n_ids;
            return true;
        }
    }
}

static void cache_put(sd_bpe_cache *c, const uint8_t *p, size_t n, uint64_t h,
                      const int32_t *ids, size_t n_ids) {
    if (c->n_entries >= c->max_entries || c->keys_n + n > c->keys_cap || c->ids_n + n_ids > c->ids_cap) {
        memset(c->slots, 0, (size_t)(c->mask + 1) * sizeof *c->slots);
        c->n_entries = 0; c->keys_n = 0; c->ids_n = 0;
    }
    uint32_t e = c->n_entries++;
    c->entries[e].hash = h;
    c->entries[e].key_off = (uint32_t)c->keys_n;
    c->entries[e].key_len = (uint32_t)n;
    c->entries[e].ids_off = (uint32_t)c->ids_n;
    c->entries[e].n_ids = (uint32_t)n_ids;
    memcpy(c->keys + c->keys_n, p, n); c->keys_n += n;
    memcpy(c->ids + c->ids_n, ids, n_ids * sizeof *ids); c->ids_n += n_ids;
    uint32_t i = (uint32_t)h & c->mask;
    while (c->slots[i]) i = (i + 1) & c->mask;
    c->slots[i] = e + 1;
}

/* ---- merging ------------------------------------------------------------------------ */

typedef struct cand { int32_t rank, pos, right; } cand;

static bool cand_less(const cand *a, const cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_less(&c, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const cand *best = &last;
        if (l < *n && cand_less(&h[l], best)) { m = l; best = &h[l]; }
        if (r < *n && cand_less(&h[r], best)) { m = r; }
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n) h[i] = last;
    return top;
}

static bool push_ids(int32_t **out, size_t *n_out, size_t *cap_out, const int32_t *ids, size_t n) {
    if (n == 0) return true;
    if (*n_out + n > *cap_out) {
        size_t cap = *cap_out ? *cap_out : 64;
        while (cap < *n_out + n) cap *= 2;
        int32_t *p = realloc(*out, cap * sizeof *p);
        if (!p) return false;
        *out = p;
        *cap_out = cap;
    }
    memcpy(*out + *n_out, ids, n * sizeof *ids);
    *n_out += n;
    return true;
}

/* Merge the symbols of p[0..n) into ids[] (at most n); returns the count. The scratch arrays
 * hold id/prev/next (3n int32) and the heap (3n candidates: n initial pairs, 2 per merge). */
static size_t merge_piece(const specdec_tokenizer *t, const uint8_t *p, size_t n, int32_t *sym,
                          int32_t *prev, int32_t *next, cand *heap, int32_t *ids) {
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[p[i]];
        if (id < 0) id = t->unk_id;
        if (id < 0) continue;                /* no unk token: HF drops the character */
        sym[ns++] = id;
    }
    for (size_t i = 0; i < ns; i++) { prev[i] = (int32_t)i - 1; next[i] = i + 1 < ns ? (int32_t)i + 1 : -1; }
    size_t nh = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        const sd_pair_slot *m = sd_pairmap_get(&t->merges, sym[i], sym[i + 1]);
        if (m) heap_push(heap, &nh, (cand){m->rank, (int32_t)i, (int32_t)i + 1});
    }
    while (nh) {
        cand c = heap_pop(heap, &nh);
        /* stale when either side was merged away or changed since the candidate was made */
        if (sym[c.pos] < 0 || next[c.pos] != c.right || sym[c.right] < 0) continue;
        const sd_pair_slot *m = sd_pairmap_get(&t->merges, sym[c.pos], sym[c.right]);
        if (!m || m->rank != c.rank) continue;
        sym[c.pos] = m->id;
        sym[c.right] = -1;
        next[c.pos] = next[c.right];
        if (next[c.pos] >= 0) prev[next[c.pos]] = c.pos;
        if (prev[c.pos] >= 0) {
            const sd_pair_slot *l = sd_pairmap_get(&t->merges, sym[prev[c.pos]], sym[c.pos]);
            if (l) heap_push(heap, &nh, (cand){l->rank, prev[c.pos], c.pos});
        }
        if (next[c.pos] >= 0) {
            const sd_pair_slot *r = sd_pairmap_get(&t->merges, sym[c.pos], sym[next[c.pos]]);
            if (r) heap_push(heap, &nh, (cand){r->rank, c.pos, next[c.pos]});
        }
    }
    size_t k = 0;
    for (int32_t i = ns ? 0 : -1; i >= 0; i = next[i]) ids[k++] = sym[i];
    return k;
}

specdec_status sd_bpe_piece(const specdec_tokenizer *t, const uint8_t *p, size_t n,
                            int32_t **out, size_t *n_out, size_t *cap_out) {
    if (n == 0) return SPECDEC_OK;
    sd_bpe_cache *cache = (sd_bpe_cache *)&t->cache;   /* the cache is the one mutable part */
    bool cacheable = n <= CACHE_MAX_PIECE;
    uint64_t h = 0;
    if (cacheable) {
        h = sd_hash_bytes(p, n);
        const int32_t *ids;
        uint32_t n_ids;
        pthread_mutex_lock(&cache->mu);
        bool hit = cache_get(cache, p, n, h, &ids, &n_ids);
        bool ok = !hit || push_ids(out, n_out, cap_out, ids, n_ids);
        pthread_mutex_unlock(&cache->mu);
        if (!ok) return SPECDEC_ERR_NOMEM;
        if (hit) return SPECDEC_OK;
    }

    int32_t small[8 * 64];
    cand small_heap[3 * 64];
    int32_t *scratch = small;
    cand *heap = small_heap;
    if (n > 64) {
        scratch = malloc(4 * n * sizeof *scratch);
        heap = malloc(3 * n * sizeof *heap);
        if (!scratch || !heap) { free(scratch); free(heap); return SPECDEC_ERR_NOMEM; }
    }
    int32_t *ids = scratch + 3 * n;
    size_t k = 0;

    bool whole = false;
    if (t->ignore_merges) {
        /* a piece that is itself a vocab token is emitted whole */
        char stackbuf[2 * 64];
        char *mapped = n <= 64 ? stackbuf : malloc(2 * n);
        if (!mapped) k = (size_t)-1;
        else {
            size_t m = 0;
            for (size_t i = 0; i < n; i++) m += (size_t)sd_utf8_put(sd_byte_to_cp(p[i]), mapped + m);
            int32_t id = sd_strmap_get(&t->vocab, mapped, m);
            if (id >= 0) { ids[0] = id; k = 1; whole = true; }
            if (mapped != stackbuf) free(mapped);
        }
    }
    specdec_status st = SPECDEC_OK;
    if (k == (size_t)-1) st = SPECDEC_ERR_NOMEM;
    else {
        if (!whole) k = merge_piece(t, p, n, scratch, scratch + n, scratch + 2 * n, heap, ids);
        if (!push_ids(out, n_out, cap_out, ids, k)) st = SPECDEC_ERR_NOMEM;
        else if (cacheable) {
            pthread_mutex_lock(&cache->mu);
            cache_put(cache, p, n, h, ids, k);
            pthread_mutex_unlock(&cache->mu);
        }
    }
    if (scratch != small) free(scratch);
    if (heap != small_heap) free(heap);
    return st;
}
