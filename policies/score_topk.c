/* score_topk.c - ranking by the one tie rule of score.h: the comparator,
 * top-k in score or position order, and the usual keep-set of a head. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "score.h"

/* Higher score first; equal scores: lower index first; NaN last. */
int score_pair_cmp(const void *pa, const void *pb)
{
    const struct score_pair *a = pa, *b = pb;
    int na = isnan(a->s), nb = isnan(b->s);
    if (na != nb) return na - nb;
    if (!na && a->s != b->s) return a->s > b->s ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static int cmp_int(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    return (a > b) - (a < b);
}

/* Restore the heap below i of h[0, n), whose root is the pair ranked last. */
static void sift_down(struct score_pair *h, int n, int i)
{
    for (;;) {
        int w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && score_pair_cmp(&h[w], &h[l]) < 0) w = l;
        if (r < n && score_pair_cmp(&h[w], &h[r]) < 0) w = r;
        if (w == i) return;
        struct score_pair t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* The k best of p[0, n) into p[0, k), best first.  A few of many (StreamingLLM's
 * sinks): a heap of the k best so far, O(n log k); else one sort.  The tie
 * rule is a total order, so both give the same pairs in the same order. */
static void rank_best(struct score_pair *p, int n, int k)
{
    if (k == 0) return;
    if ((long)k * 8 < n) {
        for (int i = k / 2 - 1; i >= 0; i--) sift_down(p, k, i);
        for (int j = k; j < n; j++)
            if (score_pair_cmp(&p[j], &p[0]) < 0) {
                p[0] = p[j];
                sift_down(p, k, 0);
            }
        n = k;
    }
    qsort(p, (size_t)n, sizeof *p, score_pair_cmp);
}

/* Scores that never rise with the index and hold no NaN already stand in
 * the tie rule's order (equal scores: lower index first), so their top k are
 * the first k: one pass, no pairs, no sort.  StreamingLLM's ages are such
 * scores; for others the pass stops at the first rise, usually at once. */
static int in_rank_order(const double *s, int n)
{
    if (n > 0 && isnan(s[0])) return 0;
    for (int j = 1; j < n; j++)
        if (!(s[j] <= s[j - 1])) return 0; /* a rise, or a NaN */
    return 1;
}

int score_topk_ranked(struct score_buf *b, const double *s, int n, int k, int *idx,
                      struct eb_err *e)
{
    if (k < 0 || k > n) return eb_fail(e, "top-%d of %d scores", k, n);
    if (in_rank_order(s, n)) {
        for (int j = 0; j < k; j++) idx[j] = j;
        return 0;
    }
    if (n > b->pairs_cap) {
        struct score_pair *p = realloc(b->pairs, (size_t)n * sizeof *p);
        if (!p) return eb_fail(e, "out of memory ranking %d scores", n);
        b->pairs = p;
        b->pairs_cap = n;
    }
    for (int j = 0; j < n; j++) b->pairs[j] = (struct score_pair){s[j], j};
    rank_best(b->pairs, n, k);
    for (int j = 0; j < k; j++) {
        idx[j] = b->pairs[j].i;
        assert(idx[j] >= 0 && idx[j] < n);
    }
    return 0;
}

int score_topk(struct score_buf *b, const double *s, int n, int k, int *idx, struct eb_err *e)
{
    if (score_topk_ranked(b, s, n, k, idx, e)) return -1;
    int ascending = 1;
    for (int j = 1; j < k && ascending; j++) ascending = idx[j] > idx[j - 1];
    if (!ascending) qsort(idx, (size_t)k, sizeof *idx, cmp_int);
    for (int j = 1; j < k; j++) assert(idx[j] > idx[j - 1]); /* sorted, unique */
    return 0;
}

int score_keep_topk_window(struct score_buf *b, const double *z, int n_cand, int len,
                           int n_select, enum keep_order order, int *keep, struct eb_err *e)
{
    assert(n_cand >= 0 && n_cand <= len && n_select <= n_cand);
    int rc = order == KEEP_BY_SCORE ? score_topk_ranked(b, z, n_cand, n_select, keep, e)
                                    : score_topk(b, z, n_cand, n_select, keep, e);
    if (rc) return -1;
    int n = n_select;
    for (int j = n_cand; j < len; j++) keep[n++] = j;
    return n;
}
