/* sent_similarity.c - what the sentence tracker's representations are for
 * (sentences.h): pairwise sentence similarity (PSS) and the redundancy marks,
 * the sentence penalty on a head's scores, and the statistics and sentences
 * the harness stores. */
#include "sentences.h"

#include <math.h>

int sent_tracker_compare(struct sent_tracker *t)
{
    if (t->dim == 0) return 0;
    int done = 0;
    for (int i = 0; i < t->n; i++) {
        struct sentence *si = &t->s[i];
        if (si->compared) continue;
        if (!sentence_complete(si)) break; /* rows arrive in order: nothing later is complete */
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
