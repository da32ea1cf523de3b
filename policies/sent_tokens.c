/* sent_tokens.c - the token-id sets sentence tracking and steering read
 * (sentences.h): delimiters, check words, SEAL's split tokens and the think
 * tags, from explicit ids or from a tokenizer. */
#include "sentences.h"

#include <stdlib.h>
#include <string.h>

#include "policy.h"   /* struct token_text */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sort and drop duplicates; returns the new count. */
static int sort_unique(int *v, int n)
{
    if (n < 2) return n;
    qsort(v, (size_t)n, sizeof *v, cmp_int);
    int m = 1;
    for (int i = 1; i < n; i++)
        if (v[i] != v[m - 1]) v[m++] = v[i];
    return m;
}

static int in_sorted(const int *v, int n, int id)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (v[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo] == id;
}

int sent_tokens_is_delim(const struct sent_tokens *t, int id)
{
    return in_sorted(t->delim, t->n_delim, id);
}

int sent_tokens_is_check(const struct sent_tokens *t, int id)
{
    return in_sorted(t->check, t->n_check, id);
}

int sent_tokens_is_split(const struct sent_tokens *t, int id)
{
    return t->split && id >= 0 && id < t->n_vocab && (t->split[id] & SENT_SPLIT);
}

int sent_tokens_split_at(const struct sent_tokens *t, int prev, int id, int pairs)
{
    if (sent_tokens_is_split(t, id)) return 1;
    if (!pairs || !t->split || id < 0 || id >= t->n_vocab || prev < 0 || prev >= t->n_vocab)
        return 0;
    return (t->split[prev] & SENT_NL_LAST) && (t->split[id] & SENT_NL_FIRST);
}

void sent_tokens_free(struct sent_tokens *t)
{
    if (!t) return;
    free(t->delim);
    free(t->check);
    free(t->split);
    memset(t, 0, sizeof *t);
}

int sent_tokens_from_ids(const int *delim, int n_delim, const int *check, int n_check,
                         const int *split, int n_split, int n_vocab, int think_open,
                         int think_close, struct sent_tokens *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    if (n_vocab < 1) return eb_fail(e, "sentences: vocabulary size %d", n_vocab);
    if (n_delim < 0 || n_check < 0 || n_split < 0)
        return eb_fail(e, "sentences: negative id count");
    const int *lists[3] = {delim, check, split};
    int counts[3] = {n_delim, n_check, n_split};
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < counts[l]; i++)
            if (lists[l][i] < 0 || lists[l][i] >= n_vocab)
                return eb_fail(e, "sentences: token id %d outside [0, %d)", lists[l][i], n_vocab);
    if (think_open >= n_vocab || think_close >= n_vocab)
        return eb_fail(e, "sentences: think token id outside [0, %d)", n_vocab);
    out->n_vocab = n_vocab;
    out->think_open = think_open < 0 ? -1 : think_open;
    out->think_close = think_close < 0 ? -1 : think_close;
    out->delim = eb_malloc((size_t)(n_delim + 1) * sizeof *out->delim, e);
    out->check = eb_malloc((size_t)(n_check + 1) * sizeof *out->check, e);
    out->split = eb_calloc((size_t)n_vocab, 1, e);
    if (!out->delim || !out->check || !out->split) {
        sent_tokens_free(out);
        return -1;
    }
    if (n_delim) memcpy(out->delim, delim, (size_t)n_delim * sizeof *delim);
    if (n_check) memcpy(out->check, check, (size_t)n_check * sizeof *check);
    out->n_delim = sort_unique(out->delim, n_delim);
    out->n_check = sort_unique(out->check, n_check);
    for (int i = 0; i < n_split; i++) out->split[split[i]] = SENT_SPLIT;
    return 0;
}

/* The last id of encode(text), or -1 when text encodes to nothing. */
static int last_id(const struct token_text *tok, const char *text, struct eb_err *e, int *id)
{
    int *ids = NULL, n = 0;
    if (tok->encode(tok->self, text, strlen(text), &ids, &n, e)) {
        free(ids);
        return -1;
    }
    *id = n > 0 ? ids[n - 1] : -1;
    free(ids);
    return 0;
}

int sent_tokens_from_text(const struct token_text *tok, int check_space, struct sent_tokens *out,
                          struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    static const char *const delim_texts[] = SENT_DELIM_TEXTS;
    static const char *const check_words[] = SENT_CHECK_WORDS;
    int delim[SENT_N_DELIM_TEXTS], check[2 * SENT_N_CHECK_WORDS];
    int nd = 0, nc = 0, n_vocab = tok->n_vocab;
    for (int i = 0; i < SENT_N_DELIM_TEXTS; i++) {
        int id;
        if (last_id(tok, delim_texts[i], e, &id)) return eb_wrap(e, "sentences");
        if (id >= 0) delim[nd++] = id;
    }
    for (int i = 0; i < SENT_N_CHECK_WORDS; i++) {
        char spaced[64];
        int id;
        if (last_id(tok, check_words[i], e, &id)) return eb_wrap(e, "sentences");
        if (id >= 0) check[nc++] = id;
        if (!check_space) continue;
        spaced[0] = ' ';
        strcpy(spaced + 1, check_words[i]);
        if (last_id(tok, spaced, e, &id)) return eb_wrap(e, "sentences");
        if (id >= 0) check[nc++] = id;
    }
    if (nd == 0) return eb_fail(e, "sentences: the tokenizer encodes no delimiter");
    /* SEAL's split tokens: every vocabulary entry whose text contains "\n\n". */
    int *split = eb_malloc((size_t)n_vocab * sizeof *split, e);
    unsigned char *nl = eb_calloc((size_t)n_vocab, 1, e);
    if (!split || !nl) {
        free(split);
        free(nl);
        return -1;
    }
    int ns = 0;
    for (int id = 0; id < n_vocab; id++) {
        size_t len = 0;
        const char *b = tok->token_bytes(tok->self, id, &len);
        if (!b || len == 0) continue;
        if (b[0] == '\n') nl[id] |= SENT_NL_FIRST;
        if (b[len - 1] == '\n') nl[id] |= SENT_NL_LAST;
        for (size_t j = 0; j + 1 < len; j++)
            if (b[j] == '\n' && b[j + 1] == '\n') {
                split[ns++] = id;
                break;
            }
    }
    int rc = sent_tokens_from_ids(delim, nd, check, nc, split, ns, n_vocab,
                                  tok->find(tok->self, "<think>"),
                                  tok->find(tok->self, "</think>"),
                                  out, e);
    free(split);
    for (int id = 0; rc == 0 && id < n_vocab; id++) out->split[id] |= nl[id];
    free(nl);
    return rc;
}
