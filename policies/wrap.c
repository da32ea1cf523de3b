/* wrap.c - a wrapper's inner scorer policy and its shared pieces (wrap.h). */
#include "wrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies.h"

/* The policies a wrapper can take; a new one is appended (the index is what
 * a value holds, its name what a run stores).  A schedule (scheduled.c)
 * takes any of them; a budget wrapper only a scorer whose window is fixed
 * and which scores per kv head (not TOVA's one set per layer, nor
 * StreamingLLM's or H2O's budget - k, nor the policies of their own select:
 * create says so). */
#define WRAP_OVER "snapkv|rkv|knorm|keydiff|tova|streamingllm|h2o|random|lagkv|expected-attention"

const struct param_def wrap_params[] = {
    {"over", PARAM_CHOICE, 0, 0, 9, WRAP_OVER,
     "the policy wrapped, its other parameters at their defaults (snapkv: kvpress's SnapKV)",
     offsetof(struct wrap_params, over)},
    {"window", PARAM_INT, 64, 1, 4096, NULL,
     "observation queries; the last window slots are kept (a scorer without a window: unused)",
     offsetof(struct wrap_params, window)},
    {"divide_length", PARAM_INT, 128, 1, 1 << 20, NULL,
     "compress every this many decoding forwards (kvpress's compression_interval)",
     offsetof(struct wrap_params, divide_length)},
    {"pad_policy", PARAM_CHOICE, 0, 0, 1, PAD_CHOICES, "pad slots: always kept or evicted first",
     offsetof(struct wrap_params, pad_policy)},
    {"score_dtype", PARAM_CHOICE, 0, 0, 1, SCORE_DTYPE_CHOICES, "the inner's score precision",
     offsetof(struct wrap_params, score_dtype)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

/* What an inner SnapKV fixes beyond the forwarded keys: kvpress's SnapKVPress. */
#define SNAPKV_PRESS ",schedule=divide,kernel=5,pool=avg,softmax=all"

/* 1 if the entry's parameters (its own table or its shared one) have key. */
static int has_key(const struct policy_entry *en, const char *key)
{
    const struct param_def *tables[2] = {en->params, policy_entry_shared(en)};
    for (int t = 0; t < 2; t++)
        for (const struct param_def *d = tables[t]; d && d->key; d++)
            if (!strcmp(d->key, key)) return 1;
    return 0;
}

/* The inner's spec: its name, the wrapper's values of the keys it has, and
 * what it fixes. */
int wrap_inner_spec(const struct wrap_params *wp, char *spec, size_t size, struct eb_err *e)
{
    char over[16], pad[16], dtype[16];
    policy_choice_name(WRAP_OVER, wp->over, over, sizeof over);
    policy_choice_name(PAD_CHOICES, wp->pad_policy, pad, sizeof pad);
    policy_choice_name(SCORE_DTYPE_CHOICES, wp->score_dtype, dtype, sizeof dtype);
    const struct policy_entry *en = policy_registry_find(over);
    if (!en) return eb_fail(e, "wrapper: no scorer %s", over);
    char kv[200] = "";   /* ",key=value" for each key the inner has */
    int n = 0;
    if (has_key(en, "divide_length"))
        n += snprintf(kv + n, sizeof kv - n, ",divide_length=%d", wp->divide_length);
    if (has_key(en, "window")) n += snprintf(kv + n, sizeof kv - n, ",window=%d", wp->window);
    if (has_key(en, "pad_policy")) n += snprintf(kv + n, sizeof kv - n, ",pad_policy=%s", pad);
    if (has_key(en, "score_dtype"))
        n += snprintf(kv + n, sizeof kv - n, ",score_dtype=%s", dtype);
    if (has_key(en, "cache_order")) n += snprintf(kv + n, sizeof kv - n, ",cache_order=position");
    if (wp->over == 0) snprintf(kv + n, sizeof kv - n, "%s", SNAPKV_PRESS);
    snprintf(spec, size, "%s%s%s", over, kv[0] ? ":" : "", kv[0] ? kv + 1 : "");
    return 0;
}

static int wrap_create(const struct wrap_params *wp, const struct policy_model *m,
                       struct wrap *w, struct policy_info *info, struct eb_err *e)
{
    char spec[256], over[16];
    policy_choice_name(WRAP_OVER, wp->over, over, sizeof over);
    if (wrap_inner_spec(wp, spec, sizeof spec, e)) return -1;
    if (policy_create(spec, m, &w->inner, e)) return eb_wrap(e, over);
    if (!w->inner->ops->scorer) return eb_fail(e, "policy %s has no scorer to wrap", over);
    w->sc = w->inner->ops->scorer(w->inner->self, &w->n_recent);
    if (!w->sc) return eb_fail(e, "policy %s has no fixed window: no scorer to wrap", over);
    if (w->sc->per_layer)
        return eb_fail(e, "policy %s keeps one set per layer: no head scores to wrap", over);
    *info = w->inner->info;
    info->schedule = POLICY_DECODING;   /* kvpress's DecodingPress; no compat carry-over */
    info->divide_carry_flag = info->divide_carry_count = 0;
    return 0;
}

void wrap_policy_free(void *self)
{
    struct wrap *w = self;
    if (!w) return;
    policy_free(w->inner);
    score_buf_free(&w->buf);
    free(w->z);
    free(w->idx);
    free(self);
}

void *wrap_policy_new(size_t size, const struct wrap_params *wp, const struct policy_model *m,
                      struct policy_info *info, struct eb_err *e)
{
    struct wrap *w = eb_calloc(1, size, e);
    if (w && wrap_create(wp, m, w, info, e)) {
        wrap_policy_free(w);
        return NULL;
    }
    return w;
}

int wrap_begin_sequence(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct wrap *w = self;
    const struct policy_ops *ops = w->inner->ops;
    return ops->begin_sequence ? ops->begin_sequence(w->inner->self, seq, sv, e) : 0;
}

void wrap_end_sequence(void *self, int seq)
{
    struct wrap *w = self;
    if (w->inner->ops->end_sequence) w->inner->ops->end_sequence(w->inner->self, seq);
}

int wrap_reserve(struct wrap *w, int n, struct eb_err *e)
{
    if (n <= w->cap) return 0;
    double *z = realloc(w->z, (size_t)n * sizeof *z);
    if (z) w->z = z;
    int *idx = z ? realloc(w->idx, (size_t)n * sizeof *idx) : NULL;
    if (idx) w->idx = idx;
    if (!z || !idx) return eb_fail(e, "out of memory for %d scores", n);
    w->cap = n;
    return 0;
}

int wrap_scores(struct wrap *w, int seq, const struct cache_view *cv, int layer, int kv_head,
                int n_cand, double *z, struct eb_err *e)
{
    const struct scorer *sc = w->sc;
    if (n_cand > 0 && sc->score(w->inner->self, seq, cv, layer, kv_head, n_cand, z, e))
        return -1;
    score_round(z, n_cand, sc->dtype);
    if (sc->use_pads)
        score_apply_pads(z, n_cand, cache_view_pad(cv, layer, kv_head), sc->pads, sc->pad_score);
    return 0;
}

void wrap_kept(struct wrap *w, int seq, int layer, int kv_head, const int *keep, int n)
{
    if (w->sc->kept) w->sc->kept(w->inner->self, seq, layer, kv_head, keep, n);
}

double wrap_target_ratio(int k_len, int target)
{
    if (k_len <= target) return 0.0;
    double ratio = 1.0 - (double)target / k_len, low = 0.0, high = 1.0;
    for (int i = 0; i < 20; i++) {
        int n_kept = (int)((double)k_len * (1.0 - ratio));
        if (n_kept == target) break;
        if (n_kept > target) {
            low = ratio;
            ratio = (ratio + high) / 2;
        } else {
            high = ratio;
            ratio = (low + ratio) / 2;
        }
    }
    return ratio;
}

int wrap_window_of(const void *prm)
{
    const struct wrap_params *wp = prm;   /* the first member */
    char spec[256];
    const struct policy_entry *en;
    struct policy_params p;
    struct eb_err e = {0};
    if (wrap_inner_spec(wp, spec, sizeof spec, &e) || policy_parse(spec, &en, &p, &e)) return -1;
    return policy_entry_window(en, &p);   /* the inner's, as built */
}
