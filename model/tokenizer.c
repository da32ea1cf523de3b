/* tokenizer.c - encode and decode with a built tokenizer.
 *
 * Encoding follows Hugging Face tokenizers: added tokens are split out first
 * (leftmost match, longest at that position); each stretch between them is
 * NFC-normalized when the model asks for it, cut into pre-tokens, and each
 * pre-token is byte-level BPE encoded. */
#include "tokenizer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unicode.h"

int tok_create(int n_vocab, int n_merges_hint, struct tokenizer **out, struct eb_err *e)
{
    *out = NULL;
    if (n_vocab <= 0 || n_vocab > (1 << 24)) return eb_fail(e, "vocabulary size %d out of range", n_vocab);
    struct tokenizer *t = eb_calloc(1, sizeof *t, e);
    if (!t) return -1;
    if (bpe_init(&t->bpe, n_vocab, n_merges_hint, e) != 0) { free(t); return -1; }
    t->type = eb_calloc((size_t)n_vocab, sizeof *t->type, e);
    if (!t->type) { tokenizer_free(t); return -1; }
    for (int i = 0; i < n_vocab; i++) t->type[i] = TOKEN_UNUSED;
    t->bos = t->eos = -1;
    *out = t;
    return 0;
}

void tokenizer_free(struct tokenizer *t)
{
    if (!t) return;
    if (t->raw) {
        for (int i = 0; i < t->bpe.n_vocab; i++) free(t->raw[i]);
    }
    free(t->raw);
    free(t->raw_len);
    free(t->type);
    free(t->added);
    bpe_free(&t->bpe);
    free(t);
}

int tok_set_pre(struct tokenizer *t, const char *name, struct eb_err *e)
{
    static const struct { const char *name; enum pretok_kind kind; } known[] = {
        { "qwen2", PRETOK_QWEN2 }, { "deepseek-r1-qwen", PRETOK_QWEN2 },
        { "llama-bpe", PRETOK_LLAMA3 }, { "llama3", PRETOK_LLAMA3 }, { "llama-v3", PRETOK_LLAMA3 },
        { "smollm", PRETOK_SMOLLM }, { "gpt2", PRETOK_GPT2 },
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(name, known[i].name) == 0) {
            t->pre = known[i].kind;
            snprintf(t->pre_name, sizeof t->pre_name, "%s", name);
            return 0;
        }
    }
    return eb_fail(e, "unknown pre-tokenizer \"%.64s\" (known: qwen2, deepseek-r1-qwen, llama-bpe, "
                      "smollm, gpt2)", name);
}

/* Bytes a token stands for: its vocab form mapped back through the byte
 * table, or, when some character stands for no byte (e.g. "<｜User｜>"),
 * its text as it is. */
static int token_raw(const char *s, size_t len, unsigned char **out, int *out_len, struct eb_err *e)
{
    unsigned char *buf = eb_malloc(len + 1, e);
    if (!buf) return -1;
    size_t o = 0, i = 0;
    while (i < len) {
        unsigned int cp;
        int k = utf8_decode((const unsigned char *)s + i, len - i, &cp);
        int byte = k ? bpe_cp_to_byte(cp) : -1;
        if (byte < 0) { memcpy(buf, s, len); o = len; break; }
        buf[o++] = (unsigned char)byte;
        i += (size_t)k;
    }
    buf[o] = 0;
    *out = buf;
    *out_len = (int)o;
    return 0;
}

static int cmp_added(const void *a, const void *b, void *ctx);

/* qsort has no context argument in C11: sort indices with a small merge sort. */
static void sort_added(int *a, int n, const struct tokenizer *t, int *tmp)
{
    if (n < 2) return;
    int h = n / 2;
    sort_added(a, h, t, tmp);
    sort_added(a + h, n - h, t, tmp);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = (cmp_added(&a[j], &a[i], (void *)t) < 0) ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, (size_t)n * sizeof *a);
}

/* By first byte, then longest first. */
static int cmp_added(const void *a, const void *b, void *ctx)
{
    const struct tokenizer *t = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    int fx = t->raw[x][0], fy = t->raw[y][0];
    if (fx != fy) return fx - fy;
    return t->raw_len[y] - t->raw_len[x];
}

int tok_finish(struct tokenizer *t, struct eb_err *e)
{
    int n = t->bpe.n_vocab;
    t->raw = eb_calloc((size_t)n, sizeof *t->raw, e);
    t->raw_len = eb_calloc((size_t)n, sizeof *t->raw_len, e);
    if (!t->raw || !t->raw_len) return -1;
    int n_added = 0;
    for (int i = 0; i < n; i++) {
        const char *s = t->bpe.text[i] ? t->bpe.text[i] : "";
        size_t len = (size_t)t->bpe.text_len[i];
        if ((t->type[i] == TOKEN_CONTROL || t->type[i] == TOKEN_USER_DEFINED) && len > 0) {
            /* Added tokens are matched and decoded as their literal text. */
            t->raw[i] = eb_malloc(len + 1, e);
            if (!t->raw[i]) return -1;
            memcpy(t->raw[i], s, len);
            t->raw[i][len] = 0;
            t->raw_len[i] = (int)len;
            n_added++;
        } else if (token_raw(s, len, &t->raw[i], &t->raw_len[i], e) != 0) {
            return -1;
        }
    }
    t->added = eb_malloc((size_t)(n_added ? n_added : 1) * sizeof *t->added, e);
    int *tmp = eb_malloc((size_t)(n_added ? n_added : 1) * sizeof *tmp, e);
    if (!t->added || !tmp) { free(tmp); return -1; }
    t->n_added = 0;
    for (int i = 0; i < n; i++) {
        if ((t->type[i] == TOKEN_CONTROL || t->type[i] == TOKEN_USER_DEFINED) && t->raw_len[i] > 0)
            t->added[t->n_added++] = i;
    }
    sort_added(t->added, t->n_added, t, tmp);
    free(tmp);
    int k = 0;
    for (int c = 0; c <= 256; c++) {
        while (k < t->n_added && t->raw[t->added[k]][0] < c) k++;
        t->added_first[c] = k;
    }
    if (t->bos >= n || t->eos >= n) return eb_fail(e, "bos/eos id out of range");
    return 0;
}

int tokenizer_n_vocab(const struct tokenizer *t) { return t->bpe.n_vocab; }
const char *tokenizer_pre_name(const struct tokenizer *t) { return t->pre_name; }
int tokenizer_bos(const struct tokenizer *t) { return t->bos; }
int tokenizer_eos(const struct tokenizer *t) { return t->eos; }

const char *tokenizer_token_bytes(const struct tokenizer *t, int id, size_t *len)
{
    if (id < 0 || id >= t->bpe.n_vocab) { *len = 0; return NULL; }
    *len = (size_t)t->raw_len[id];
    return (const char *)t->raw[id];
}

int tokenizer_find(const struct tokenizer *t, const char *token_text)
{
    return bpe_lookup(&t->bpe, token_text, strlen(token_text));
}

/* The longest added token starting at s[i], or -1. */
static int added_at(const struct tokenizer *t, const unsigned char *s, size_t len, size_t i)
{
    int c = s[i];
    for (int k = t->added_first[c]; k < t->added_first[c + 1]; k++) {
        int id = t->added[k];
        size_t n = (size_t)t->raw_len[id];
        if (n <= len - i && memcmp(t->raw[id], s + i, n) == 0) return id;
    }
    return -1;
}

struct encode_state {
    const struct tokenizer *t;
    struct bpe_scratch sc;
    int *ids;
    size_t n, cap;
};

static int encode_plain(struct encode_state *st, const char *s, size_t len, struct eb_err *e)
{
    const struct tokenizer *t = st->t;
    char *norm = NULL;
    if (t->nfc) {
        size_t nlen;
        if (unicode_nfc(s, len, &norm, &nlen) != 0) return eb_fail(e, "out of memory");
        s = norm;
        len = nlen;
    }
    struct pretok_iter it;
    pretok_begin(&it, t->pre, s, len);
    size_t a, b;
    int rc = 0;
    while (rc == 0 && pretok_next(&it, &a, &b)) {
        rc = bpe_encode_word(&t->bpe, (const unsigned char *)s + a, b - a, t->ignore_merges,
                             &st->sc, &st->ids, &st->n, &st->cap, e);
    }
    free(norm);
    return rc;
}

int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, int parse_special,
                     int **ids, int *n_ids, struct eb_err *e)
{
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return eb_fail(e, "tokenizer: NULL text");
    if (len > (size_t)1 << 30) return eb_fail(e, "tokenizer: text of %zu bytes is too long", len);
    const unsigned char *s = (const unsigned char *)text;
    size_t bad = utf8_validate(s, len);
    if (bad != len) return eb_fail(e, "tokenizer: invalid UTF-8 at byte %zu", bad);

    struct encode_state st = { t, { 0 }, NULL, 0, 0 };
    int rc = 0;
    size_t seg = 0;
    for (size_t i = 0; rc == 0 && i < len;) {
        int id = parse_special && t->n_added ? added_at(t, s, len, i) : -1;
        if (id < 0) { i++; continue; }
        rc = encode_plain(&st, text + seg, i - seg, e);
        if (rc == 0) {
            size_t one_more = st.n + 1;
            if (one_more > st.cap) {
                size_t c = st.cap ? st.cap * 2 : 64;
                int *p = realloc(st.ids, c * sizeof *p);
                if (!p) { rc = eb_fail(e, "out of memory"); break; }
                st.ids = p;
                st.cap = c;
            }
            st.ids[st.n++] = id;
        }
        i += (size_t)t->raw_len[id];
        seg = i;
    }
    if (rc == 0) rc = encode_plain(&st, text + seg, len - seg, e);
    bpe_scratch_free(&st.sc);
    if (rc != 0) { free(st.ids); return -1; }
    if (!st.ids) st.ids = malloc(sizeof *st.ids); /* a valid pointer even for no tokens */
    if (!st.ids) return eb_fail(e, "out of memory");
    if (st.n > 0x7FFFFFFF) { free(st.ids); return eb_fail(e, "tokenizer: too many tokens"); }
    *ids = st.ids;
    *n_ids = (int)st.n;
    return 0;
}

int tokenizer_decode(const struct tokenizer *t, const int *ids, int n, char **out, size_t *out_len,
                     struct eb_err *e)
{
    *out = NULL;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->bpe.n_vocab)
            return eb_fail(e, "tokenizer: token id %d out of range [0, %d)", ids[i], t->bpe.n_vocab);
        total += (size_t)t->raw_len[ids[i]];
    }
    char *buf = eb_malloc(total + 1, e);
    if (!buf) return -1;
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        memcpy(buf + o, t->raw[ids[i]], (size_t)t->raw_len[ids[i]]);
        o += (size_t)t->raw_len[ids[i]];
    }
    buf[o] = 0;
    *out = buf;
    if (out_len) *out_len = o;
    return 0;
}
