/* bpe.c - merge-rank BPE with a binary heap, so a pre-token of n bytes costs
 * O(n log n): the lowest-ranked adjacent pair is merged first, the leftmost
 * on ties (the order Hugging Face tokenizers uses). */
#include "bpe.h"

#include <stdlib.h>
#include <string.h>

#include "unicode.h"

struct bpe_cand {
    int32_t rank;
    int32_t pos;   /* left symbol */
    int32_t left;  /* ids when pushed: a stale candidate no longer matches */
    int32_t right;
};

unsigned int bpe_byte_to_cp(unsigned char b)
{
    /* Printable bytes stand for themselves; the other 68, in order, for
     * U+0100 upward. */
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    unsigned int n = 0;
    for (unsigned int x = 0; x < b; x++) {
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) n++;
    }
    return 0x100 + n;
}

int bpe_cp_to_byte(unsigned int cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp > 0x143) return -1;
    unsigned int n = cp - 0x100;
    for (unsigned int x = 0; x < 256; x++) {
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) {
            if (n == 0) return (int)x;
            n--;
        }
    }
    return -1;
}

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static size_t table_size(size_t n)
{
    size_t sz = 16;
    while (sz < 2 * n + 1) sz <<= 1;
    return sz;
}

int bpe_init(struct bpe *b, int n_vocab, int n_merges_hint, struct eb_err *e)
{
    memset(b, 0, sizeof *b);
    if (n_vocab <= 0) return eb_fail(e, "empty vocabulary");
    b->n_vocab = n_vocab;
    b->text = eb_calloc((size_t)n_vocab, sizeof *b->text, e);
    b->text_len = eb_calloc((size_t)n_vocab, sizeof *b->text_len, e);
    size_t msz = table_size(n_merges_hint > 0 ? (size_t)n_merges_hint : 0);
    b->merge_key = eb_calloc(msz, sizeof *b->merge_key, e);
    b->merge_rank = eb_calloc(msz, sizeof *b->merge_rank, e);
    b->merge_result = eb_calloc(msz, sizeof *b->merge_result, e);
    b->merge_mask = msz - 1;
    for (int x = 0; x < 256; x++)
        b->byte_utf8_len[x] = (unsigned char)utf8_encode(bpe_byte_to_cp((unsigned char)x), b->byte_utf8[x]);
    if (!b->text || !b->text_len || !b->merge_key || !b->merge_rank || !b->merge_result) {
        bpe_free(b);
        return -1;
    }
    return 0;
}

void bpe_free(struct bpe *b)
{
    if (b->text) {
        for (int i = 0; i < b->n_vocab; i++) free(b->text[i]);
    }
    free(b->text);
    free(b->text_len);
    free(b->vocab_slot);
    free(b->merge_key);
    free(b->merge_rank);
    free(b->merge_result);
    memset(b, 0, sizeof *b);
}

int bpe_set_token(struct bpe *b, int id, const char *s, size_t len, struct eb_err *e)
{
    if (id < 0 || id >= b->n_vocab) return eb_fail(e, "token id %d out of range", id);
    if (len > 65536) return eb_fail(e, "token %d: %zu bytes is too long", id, len);
    char *copy = eb_malloc(len + 1, e);
    if (!copy) return -1;
    memcpy(copy, s, len);
    copy[len] = 0;
    free(b->text[id]);
    b->text[id] = copy;
    b->text_len[id] = (int)len;
    return 0;
}

int bpe_lookup(const struct bpe *b, const char *s, size_t len)
{
    if (!b->vocab_slot) return -1;
    size_t i = (size_t)hash_bytes(s, len) & b->vocab_mask;
    for (;;) {
        int32_t id = b->vocab_slot[i];
        if (id < 0) return -1;
        if ((size_t)b->text_len[id] == len && memcmp(b->text[id], s, len) == 0) return id;
        i = (i + 1) & b->vocab_mask;
    }
}

int bpe_index_vocab(struct bpe *b, struct eb_err *e)
{
    size_t sz = table_size((size_t)b->n_vocab);
    free(b->vocab_slot);
    b->vocab_slot = eb_malloc(sz * sizeof *b->vocab_slot, e);
    if (!b->vocab_slot) return -1;
    memset(b->vocab_slot, 0xFF, sz * sizeof *b->vocab_slot); /* all -1 */
    b->vocab_mask = sz - 1;
    for (int id = 0; id < b->n_vocab; id++) {
        if (!b->text[id]) continue;
        size_t len = (size_t)b->text_len[id];
        if (bpe_lookup(b, b->text[id], len) >= 0) continue; /* duplicate: first id wins */
        size_t i = (size_t)hash_bytes(b->text[id], len) & b->vocab_mask;
        while (b->vocab_slot[i] >= 0) i = (i + 1) & b->vocab_mask;
        b->vocab_slot[i] = id;
    }
    for (int x = 0; x < 256; x++)
        b->byte_id[x] = bpe_lookup(b, (const char *)b->byte_utf8[x], b->byte_utf8_len[x]);
    return 0;
}

static size_t merge_find(const struct bpe *b, uint64_t key)
{
    size_t i = (size_t)hash_u64(key) & b->merge_mask;
    while (b->merge_key[i] != 0 && b->merge_key[i] != key) i = (i + 1) & b->merge_mask;
    return i;
}

static int merge_grow(struct bpe *b, struct eb_err *e)
{
    size_t old_sz = b->merge_mask + 1, sz = old_sz * 2;
    uint64_t *key = eb_calloc(sz, sizeof *key, e);
    int32_t *rank = eb_calloc(sz, sizeof *rank, e);
    int32_t *res = eb_calloc(sz, sizeof *res, e);
    if (!key || !rank || !res) { free(key); free(rank); free(res); return -1; }
    uint64_t *ok = b->merge_key;
    int32_t *orank = b->merge_rank, *ores = b->merge_result;
    b->merge_key = key; b->merge_rank = rank; b->merge_result = res;
    b->merge_mask = sz - 1;
    for (size_t i = 0; i < old_sz; i++) {
        if (!ok[i]) continue;
        size_t j = merge_find(b, ok[i]);
        key[j] = ok[i]; rank[j] = orank[i]; res[j] = ores[i];
    }
    free(ok); free(orank); free(ores);
    return 0;
}

int bpe_add_merge(struct bpe *b, const char *left, size_t llen, const char *right, size_t rlen,
                  struct eb_err *e)
{
    int rank = b->n_merges;
    int l = bpe_lookup(b, left, llen), r = bpe_lookup(b, right, rlen);
    if (l < 0 || r < 0) return eb_fail(e, "merge %d: token not in the vocabulary", rank);
    if (llen + rlen > 65536) return eb_fail(e, "merge %d: too long", rank);
    char *joined = eb_malloc(llen + rlen + 1, e);
    if (!joined) return -1;
    memcpy(joined, left, llen);
    memcpy(joined + llen, right, rlen);
    int res = bpe_lookup(b, joined, llen + rlen);
    free(joined);
    if (res < 0) return eb_fail(e, "merge %d: merged token not in the vocabulary", rank);
    if ((size_t)(b->n_merges + 1) * 2 > b->merge_mask + 1 && merge_grow(b, e) != 0) return -1;
    uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
    size_t i = merge_find(b, key);
    /* A repeated pair takes its later rank, as a map built from the list does. */
    b->merge_key[i] = key;
    b->merge_rank[i] = rank;
    b->merge_result[i] = res;
    b->n_merges++;
    return 0;
}

/* Rank and result of merging ids l and r, or rank -1. */
static int32_t merge_lookup(const struct bpe *b, int32_t l, int32_t r, int32_t *result)
{
    uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
    size_t i = merge_find(b, key);
    if (b->merge_key[i] == 0) return -1;
    *result = b->merge_result[i];
    return b->merge_rank[i];
}

void bpe_scratch_free(struct bpe_scratch *sc)
{
    free(sc->id); free(sc->prev); free(sc->next); free(sc->heap); free(sc->mapped);
    memset(sc, 0, sizeof *sc);
}

static int cand_less(const struct bpe_cand *a, const struct bpe_cand *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct bpe_cand *h, size_t *n, struct bpe_cand c)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static struct bpe_cand heap_pop(struct bpe_cand *h, size_t *n)
{
    struct bpe_cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct bpe_cand *best = &last;
        if (l < *n && cand_less(&h[l], best)) { m = l; best = &h[l]; }
        if (r < *n && cand_less(&h[r], best)) { m = r; }
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static int grow_ids(int **ids, size_t *cap, size_t need, struct eb_err *e)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    int *p = realloc(*ids, c * sizeof *p);
    if (!p) return eb_fail(e, "out of memory");
    *ids = p;
    *cap = c;
    return 0;
}

static int scratch_reserve(struct bpe_scratch *sc, size_t n, struct eb_err *e)
{
    if (n <= sc->cap) return 0;
    size_t c = sc->cap ? sc->cap : 64;
    while (c < n) c *= 2;
    int32_t *id = realloc(sc->id, c * sizeof *id);
    if (id) sc->id = id;
    int32_t *prev = realloc(sc->prev, c * sizeof *prev);
    if (prev) sc->prev = prev;
    int32_t *next = realloc(sc->next, c * sizeof *next);
    if (next) sc->next = next;
    if (!id || !prev || !next) return eb_fail(e, "out of memory");
    sc->cap = c;
    return 0;
}

static int push_pair(const struct bpe *b, struct bpe_scratch *sc, size_t *hn, int32_t pos,
                     struct eb_err *e)
{
    int32_t nx = sc->next[pos];
    if (nx < 0) return 0;
    int32_t res;
    int32_t rank = merge_lookup(b, sc->id[pos], sc->id[nx], &res);
    if (rank < 0) return 0;
    if (*hn == sc->heap_cap) {
        size_t c = sc->heap_cap ? sc->heap_cap * 2 : 64;
        struct bpe_cand *h = realloc(sc->heap, c * sizeof *h);
        if (!h) return eb_fail(e, "out of memory");
        sc->heap = h;
        sc->heap_cap = c;
    }
    struct bpe_cand c = { rank, pos, sc->id[pos], sc->id[nx] };
    heap_push(sc->heap, hn, c);
    return 0;
}

/* Vocab form of raw bytes into sc->mapped; returns its length or -1. */
static long map_bytes(const struct bpe *b, struct bpe_scratch *sc, const unsigned char *raw, size_t len, struct eb_err *e)
{
    if (len * 2 + 1 > sc->mapped_cap) {
        size_t c = len * 2 + 64;
        char *m = realloc(sc->mapped, c);
        if (!m) return eb_fail(e, "out of memory");
        sc->mapped = m;
        sc->mapped_cap = c;
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        memcpy(sc->mapped + o, b->byte_utf8[raw[i]], b->byte_utf8_len[raw[i]]);
        o += b->byte_utf8_len[raw[i]];
    }
    return (long)o;
}

int bpe_encode_word(const struct bpe *b, const unsigned char *raw, size_t len, int ignore_merges,
                    struct bpe_scratch *sc, int **ids, size_t *n, size_t *cap, struct eb_err *e)
{
    if (len == 0) return 0;
    if (len > 0x7FFFFFFF) return eb_fail(e, "pre-token too long");
    if (ignore_merges) {
        long m = map_bytes(b, sc, raw, len, e);
        if (m < 0) return -1;
        int id = bpe_lookup(b, sc->mapped, (size_t)m);
        if (id >= 0) {
            if (grow_ids(ids, cap, *n + 1, e) != 0) return -1;
            (*ids)[(*n)++] = id;
            return 0;
        }
    }
    if (scratch_reserve(sc, len, e) != 0) return -1;
    /* One symbol per byte.  A byte without a token of its own (SmolLM2 lacks
     * some control characters) is dropped, as Hugging Face does without an
     * unk token; its neighbours become adjacent and may merge. */
    size_t ns = 0;
    for (size_t i = 0; i < len; i++) {
        int id = b->byte_id[raw[i]];
        if (id < 0) continue;
        sc->id[ns] = id;
        sc->prev[ns] = (int32_t)ns - 1;
        sc->next[ns] = (int32_t)ns + 1;
        ns++;
    }
    if (ns == 0) return 0;
    sc->next[ns - 1] = -1;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        if (push_pair(b, sc, &hn, (int32_t)i, e) != 0) return -1;
    }
    while (hn > 0) {
        struct bpe_cand c = heap_pop(sc->heap, &hn);
        int32_t p = c.pos, nx = sc->next[p];
        if (sc->id[p] != c.left || nx < 0 || sc->id[nx] != c.right) continue; /* stale */
        int32_t res = -1;
        merge_lookup(b, c.left, c.right, &res);
        sc->id[p] = res;
        int32_t nn = sc->next[nx];
        sc->next[p] = nn;
        if (nn >= 0) sc->prev[nn] = p;
        sc->id[nx] = -1;
        if (sc->prev[p] >= 0 && push_pair(b, sc, &hn, sc->prev[p], e) != 0) return -1;
        if (push_pair(b, sc, &hn, p, e) != 0) return -1;
    }
    size_t count = 0;
    for (int32_t p = 0; p >= 0; p = sc->next[p]) count++;
    if (grow_ids(ids, cap, *n + count, e) != 0) return -1;
    for (int32_t p = 0; p >= 0; p = sc->next[p]) (*ids)[(*n)++] = sc->id[p];
    return 0;
}
