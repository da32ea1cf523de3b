/* score_topk.c - ranking by the one tie rule of score.h: the comparator, the
 * selection of the k best (no full sort), top-k in score or position order,
 * and the usual keep-set of a head. */
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

static void swap_pairs(struct score_pair *a, struct score_pair *b)
{
    struct score_pair t = *a;
    *a = *b;
    *b = t;
}

/* Restore the heap below i of h[0, n), whose root is the pair ranked last. */
static void sift_down(struct score_pair *h, int n, int i)
{
    for (;;) {
        int w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && score_pair_cmp(&h[w], &h[l]) < 0) w = l;
        if (r < n && score_pair_cmp(&h[w], &h[r]) < 0) w = r;
        if (w == i) return;
        swap_pairs(&h[i], &h[w]);
        i = w;
    }
}

/* Reorder p[0, n) so that p[k - 1] is the k-th best pair and p[0, k - 1) hold
 * the better ones, in no order (0 < k <= n).  A few of many (StreamingLLM's
 * sinks): a heap of the k best so far, O(n log k).  Else quickselect with a
 * median-of-three pivot, O(n) expected; after 2 log2(n) rounds the part left
 * is sorted instead, so O(n log n) at worst.  The tie rule is a total order,
 * so the k best are one set whatever the path. */
static void nth_best(struct score_pair *p, int n, int k)
{
    if ((long)k * 8 < n) {
        for (int i = k / 2 - 1; i >= 0; i--) sift_down(p, k, i);
        for (int j = k; j < n; j++)
            if (score_pair_cmp(&p[j], &p[0]) < 0) {
                p[0] = p[j];
                sift_down(p, k, 0);
            }
        swap_pairs(&p[0], &p[k - 1]); /* the root, the k-th best, to k - 1 */
        return;
    }
    int lo = 0, hi = n - 1, t = k - 1, rounds = 2;
    for (int m = n; m > 1; m >>= 1) rounds += 2;
    while (hi > lo) {
        if (--rounds < 0) {
            qsort(p + lo, (size_t)(hi - lo + 1), sizeof *p, score_pair_cmp);
            return;
        }
        int mid = lo + (hi - lo) / 2;
        if (score_pair_cmp(&p[mid], &p[lo]) < 0) swap_pairs(&p[mid], &p[lo]);
        if (score_pair_cmp(&p[hi], &p[lo]) < 0) swap_pairs(&p[hi], &p[lo]);
        if (score_pair_cmp(&p[mid], &p[hi]) < 0) swap_pairs(&p[mid], &p[hi]);
        struct score_pair pivot = p[hi]; /* the median of the three */
        int at = lo;
        for (int j = lo; j < hi; j++)
            if (score_pair_cmp(&p[j], &pivot) < 0) swap_pairs(&p[j], &p[at++]);
        swap_pairs(&p[at], &p[hi]);
        if (at == t) return;
        if (at < t) lo = at + 1;
        else hi = at - 1;
    }
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

/* The pairs of s[0, n) in b->pairs with the k best in b->pairs[0, k), the
 * k-th at k - 1 (0 < k <= n); 1 when s is in rank order (nothing made). */
static int best_pairs(struct score_buf *b, const double *s, int n, int k, struct eb_err *e)
{
    if (in_rank_order(s, n)) return 1;
    if (n > b->pairs_cap) {
        struct score_pair *p = realloc(b->pairs, (size_t)n * sizeof *p);
        if (!p) return eb_fail(e, "out of memory ranking %d scores", n);
        b->pairs = p;
        b->pairs_cap = n;
    }
    for (int j = 0; j < n; j++) b->pairs[j] = (struct score_pair){s[j], j};
    nth_best(b->pairs, n, k);
    return 0;
}

int score_topk_ranked(struct score_buf *b, const double *s, int n, int k, int *idx,
                      struct eb_err *e)
{
    if (k < 0 || k > n) return eb_fail(e, "top-%d of %d scores", k, n);
    int rc = k > 0 ? best_pairs(b, s, n, k, e) : 1;
    if (rc < 0) return -1;
    if (rc == 1) { /* in rank order, or nothing to rank */
        for (int j = 0; j < k; j++) idx[j] = j;
        return 0;
    }
    qsort(b->pairs, (size_t)k, sizeof *b->pairs, score_pair_cmp); /* the k best, best first */
    for (int j = 0; j < k; j++) {
        idx[j] = b->pairs[j].i;
        assert(idx[j] >= 0 && idx[j] < n);
    }
    return 0;
}

int score_topk(struct score_buf *b, const double *s, int n, int k, int *idx, struct eb_err *e)
{
    if (k < 0 || k > n) return eb_fail(e, "top-%d of %d scores", k, n);
    int rc = k > 0 && k < n ? best_pairs(b, s, n, k, e) : 1;
    if (rc < 0) return -1;
    if (rc == 1) { /* in rank order, all of them, or none */
        for (int j = 0; j < k; j++) idx[j] = j;
        return 0;
    }
    if ((long)k * 8 < n) { /* a few: sorting their indices beats a pass over all */
        for (int j = 0; j < k; j++) idx[j] = b->pairs[j].i;
        qsort(idx, (size_t)k, sizeof *idx, cmp_int);
        return 0;
    }
    /* The k best are those ranked no lower than the k-th: one pass in index
     * order writes them ascending, with no sort. */
    struct score_pair kth = b->pairs[k - 1];
    int m = 0;
    for (int j = 0; j < n && m < k; j++) {
        struct score_pair q = {s[j], j};
        if (score_pair_cmp(&q, &kth) <= 0) idx[m++] = j;
    }
    assert(m == k);
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
