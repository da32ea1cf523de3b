/* sentences.c - sentence segmentation, representations and PSS (see sentences.h). */
#include "sentences.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../model/tokenizer.h"

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
static int last_id(const struct tokenizer *tok, const char *text, struct eb_err *e, int *id)
{
    int *ids = NULL, n = 0;
    if (tokenizer_encode(tok, text, strlen(text), 0, &ids, &n, e)) {
        free(ids);
        return -1;
    }
    *id = n > 0 ? ids[n - 1] : -1;
    free(ids);
    return 0;
}

int sent_tokens_from_tokenizer(const struct tokenizer *tok, int check_space,
                               struct sent_tokens *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    static const char *const delim_texts[] = SENT_DELIM_TEXTS;
    static const char *const check_words[] = SENT_CHECK_WORDS;
    int delim[SENT_N_DELIM_TEXTS], check[2 * SENT_N_CHECK_WORDS];
    int nd = 0, nc = 0, n_vocab = tokenizer_n_vocab(tok);
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
        const char *b = tokenizer_token_bytes(tok, id, &len);
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
                                  tokenizer_find(tok, "<think>"), tokenizer_find(tok, "</think>"),
                                  out, e);
    free(split);
    for (int id = 0; rc == 0 && id < n_vocab; id++) out->split[id] |= nl[id];
    free(nl);
    return rc;
}

/* ---- the tracker ---- */

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

static int complete(const struct sentence *s)
{
    return s->n_rows == s->e - s->b + 1;
}

/* Free the sums no longer needed: every complete sentence but the last. */
static void release_sums(struct sent_tracker *t)
{
    for (int i = t->row_cursor; i < t->n - 1; i++)
        if (t->s[i].sum && complete(&t->s[i])) {
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
    if (t->dim > 0 && complete(s)) finish_repr(t, t->n - 1);
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
            if (complete(s)) finish_repr(t, t->row_cursor);
        }
    }
    release_sums(t);
    return 0;
}

const float *sent_tracker_repr(const struct sent_tracker *t, int i)
{
    if (t->dim == 0 || i < 0 || i >= t->n || !complete(&t->s[i])) return NULL;
    return t->repr + (size_t)i * t->dim;
}

int sent_tracker_compare(struct sent_tracker *t)
{
    if (t->dim == 0) return 0;
    int done = 0;
    for (int i = 0; i < t->n; i++) {
        struct sentence *si = &t->s[i];
        if (si->compared) continue;
        if (!complete(si)) break; /* rows arrive in order: nothing later is complete */
        si->compared = 1;
        /* One-token sentences are compared too: the released skipkv path
         * (extract_sentence_representations, cal_sentence_similarity_from_reprs
         * in modeling_nhid.py @ 4492840) represents every closed range; its
         * start_idx >= end_idx test is only in cal_sentence_similarity_pair,
         * which that path never calls. */
        const float *vi = t->repr + (size_t)i * t->dim;
        for (int j = 0; j < i; j++) {
            struct sentence *sj = &t->s[j];
            const float *vj = t->repr + (size_t)j * t->dim;
            double dot = 0;
            for (int d = 0; d < t->dim; d++) dot += (double)vi[d] * vj[d];
            float lam = (float)dot;
            t->n_pairs++;
            t->pss_sum += lam;
            if (t->n_pairs == 1 || lam > t->pss_max) t->pss_max = lam;
            if (lam > si->max_pss) si->max_pss = lam;
            if (lam > sj->max_pss) sj->max_pss = lam;
            if (lam > t->tau) {
                t->n_pairs_above++;
                if (!sj->redundant) t->n_redundant++;
                sj->redundant = 1;
                sj->lambda = lam; /* the later pair overwrites */
            }
        }
        si->compared = 1;
        done++;
    }
    return done;
}

void sent_span_slots(const int *pos, int n, int b, int e, int *lo, int *hi)
{
    int l = 0, h = n;
    while (l < h) { /* first slot with pos >= b */
        int mid = l + (h - l) / 2;
        if (pos[mid] < b) l = mid + 1;
        else h = mid;
    }
    *lo = l;
    h = n;
    while (l < h) { /* first slot with pos > e */
        int mid = l + (h - l) / 2;
        if (pos[mid] <= e) l = mid + 1;
        else h = mid;
    }
    *hi = l < *lo ? *lo : l;
}

int sent_tracker_penalize(struct sent_tracker *t, const int *pos, int n_cand, int len, double *z,
                          int step)
{
    int hit = 0;
    for (int i = 0; i < t->n; i++) {
        struct sentence *s = &t->s[i];
        if (!s->redundant) continue;
        /* Released SkipKV (update_kv: start_idx < end_idx) penalises a
         * sentence in a head only where at least two of its slots survive
         * there, window slots included; the penalty reaches the candidates. */
        int held = 0, cand = 0;
        for (int j = 0; j < len; j++)
            if (pos[j] >= s->b && pos[j] <= s->e) {
                held++;
                cand += j < n_cand;
            }
        if (held < 2 || cand == 0) continue;
        for (int j = 0; j < n_cand; j++)
            if (pos[j] >= s->b && pos[j] <= s->e) z[j] -= s->lambda;
        if (s->evicted_step < 0) s->evicted_step = step;
        hit += cand;
    }
    return hit;
}

void sent_tracker_stats(const struct sent_tracker *t, struct sent_stats *out)
{
    out->n_sentences = t->n;
    out->n_check = t->n_check;
    out->n_redundant = t->n_redundant;
    out->n_pairs = t->n_pairs;
    out->n_pairs_above = t->n_pairs_above;
    out->pss_mean = t->n_pairs ? t->pss_sum / t->n_pairs : 0.0;
    out->pss_max = t->n_pairs ? t->pss_max : 0.0;
}

const char *sent_label_name(enum sent_label label)
{
    return label == SENT_CHECK ? "check" : "others";
}

int sent_tracker_export(const struct sent_tracker *t, int n_prompt, struct sent_info **out,
                        int *n, struct eb_err *e)
{
    *out = NULL;
    *n = 0;
    if (t->n == 0) return 0;
    struct sent_info *v = eb_malloc((size_t)t->n * sizeof *v, e);
    if (!v) return -1;
    for (int i = 0; i < t->n; i++) {
        const struct sentence *s = &t->s[i];
        v[i] = (struct sent_info){
            .start = s->b,
            .end = s->e,
            .in_prompt = s->e < n_prompt,
            .label = s->label,
            .max_sim = s->max_pss < -1.5f ? NAN : (double)s->max_pss,
            .evicted_step = s->evicted_step,
        };
    }
    *out = v;
    *n = t->n;
    return 0;
}
