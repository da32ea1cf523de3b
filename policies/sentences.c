/* sentences.c - the sentence tracker's segmentation and representations
 * (sentences.h): tokens close sentences, hidden rows build their means.  The
 * comparison, the penalty and the export are sent_similarity.c. */
#include "sentences.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sent_tracker_init(struct sent_tracker *t, const struct sent_tokens *tok, int dim, float tau,
                      struct eb_err *e)
{
    memset(t, 0, sizeof *t);
    if (dim < 0) return eb_fail(e, "sentences: hidden size %d", dim);
    t->tok = tok;
    t->dim = dim;
    t->tau = tau;
    if (dim > 0 && !(t->open_sum = eb_calloc((size_t)dim, sizeof *t->open_sum, e))) return -1;
    return 0;
}

void sent_tracker_free(struct sent_tracker *t)
{
    if (!t) return;
    for (int i = 0; i < t->n; i++) free(t->s[i].sum);
    free(t->s);
    free(t->repr);
    free(t->open_sum);
    memset(t, 0, sizeof *t);
}

static int grow(struct sent_tracker *t, struct eb_err *e)
{
    if (t->n < t->cap) return 0;
    int cap = t->cap ? t->cap * 2 : 64;
    struct sentence *s = realloc(t->s, (size_t)cap * sizeof *s);
    if (!s) return eb_fail(e, "sentences: out of memory for %d sentences", cap);
    t->s = s;
    if (t->dim > 0) {
        float *r = realloc(t->repr, (size_t)cap * t->dim * sizeof *r);
        if (!r) return eb_fail(e, "sentences: out of memory for %d representations", cap);
        t->repr = r;
    }
    t->cap = cap;
    return 0;
}

/* The mean of sentence i's rows, L2-normalised, into its representation. */
static void finish_repr(struct sent_tracker *t, int i)
{
    struct sentence *s = &t->s[i];
    float *v = t->repr + (size_t)i * t->dim;
    double norm = 0;
    for (int d = 0; d < t->dim; d++) {
        double m = s->sum[d] / s->n_rows;
        v[d] = (float)m;
        norm += m * m;
    }
    double scale = 1.0 / (sqrt(norm) + 1e-8);
    for (int d = 0; d < t->dim; d++) v[d] = (float)(s->sum[d] / s->n_rows * scale);
}

/* Free the sums no longer needed: every complete sentence but the last. */
static void release_sums(struct sent_tracker *t)
{
    for (int i = t->row_cursor; i < t->n - 1; i++)
        if (t->s[i].sum && sentence_complete(&t->s[i])) {
            free(t->s[i].sum);
            t->s[i].sum = NULL;
        }
}

static int close_at(struct sent_tracker *t, int p, int is_check, struct eb_err *e)
{
    /* A delimiter right after a delimiter starts a one-token sentence, as in
     * SkipKV's released check_punct_tokens_in_forward (its extend branch
     * never fires). */
    if (grow(t, e)) return -1;
    struct sentence *s = &t->s[t->n];
    memset(s, 0, sizeof *s);
    s->b = t->open_b;
    s->e = p;
    s->label = (t->open_check || is_check) ? SENT_CHECK : SENT_OTHERS;
    s->max_pss = -2.0f;
    s->evicted_step = -1;
    if (s->label == SENT_CHECK) t->n_check++;
    /* the rows of the span seen so far move with it */
    if (t->dim > 0) {
        s->sum = t->open_sum;
        t->open_sum = eb_calloc((size_t)t->dim, sizeof *t->open_sum, e);
        if (!t->open_sum) {
            t->open_sum = s->sum;
            return -1;
        }
        s->n_rows = t->n_rows > s->b ? t->n_rows - s->b : 0;
    }
    t->n++;
    t->open_b = p + 1;
    t->open_check = 0;
    if (t->dim > 0 && sentence_complete(s)) finish_repr(t, t->n - 1);
    release_sums(t);
    return 0;
}

int sent_tracker_tokens(struct sent_tracker *t, const int *ids, int n, struct eb_err *e)
{
    /* Released check_punct_tokens_in_forward labels only the first check
     * token of each forward (a `break`): a call is one forward. */
    int labelled = 0;
    for (int i = 0; i < n; i++) {
        int p = t->n_tokens, id = ids[i];
        int is_check = !labelled && sent_tokens_is_check(t->tok, id);
        labelled |= is_check;
        t->n_tokens++;
        if (sent_tokens_is_delim(t->tok, id)) {
            if (close_at(t, p, is_check, e)) return -1;
        } else if (is_check) {
            t->open_check = 1;
        }
    }
    return 0;
}

int sent_tracker_rows(struct sent_tracker *t, const float *rows, int n, int dim,
                      struct eb_err *e)
{
    if (t->dim == 0) {
        t->n_rows += n;
        return 0;
    }
    if (dim != t->dim) return eb_fail(e, "sentences: hidden rows of %d, expected %d", dim, t->dim);
    if (t->n_rows + n > t->n_tokens)
        return eb_fail(e, "sentences: hidden row %d arrived before its token", t->n_tokens);
    for (int r = 0; r < n; r++) {
        int p = t->n_rows++;
        const float *h = rows + (size_t)r * dim;
        while (t->row_cursor < t->n && t->s[t->row_cursor].e < p) t->row_cursor++;
        double *sum;
        struct sentence *s = NULL;
        if (t->row_cursor < t->n && t->s[t->row_cursor].b <= p) {
            s = &t->s[t->row_cursor];
            if (!s->sum) /* a finished sentence that was extended: its sum is gone */
                return eb_fail(e, "sentences: lost the sum of sentence %d", t->row_cursor);
            sum = s->sum;
        } else {
            sum = t->open_sum;
        }
        for (int d = 0; d < dim; d++) sum[d] += h[d];
        if (s) {
            s->n_rows++;
            if (sentence_complete(s)) finish_repr(t, t->row_cursor);
        }
    }
    release_sums(t);
    return 0;
}

const float *sent_tracker_repr(const struct sent_tracker *t, int i)
{
    if (t->dim == 0 || i < 0 || i >= t->n || !sentence_complete(&t->s[i])) return NULL;
    return t->repr + (size_t)i * t->dim;
}
