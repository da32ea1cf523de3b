/* replay.h - whole generations replayed through a C policy against a golden
 * reference's steps (tests/test_released.c: tools/golden/released_ref.py;
 * tests/test_kvpress.c: tools/golden/kvpress_ref.py; tests/test_lazy.c:
 * tools/golden/lazy_ref.py).  A sequence is fed token by token into a real
 * kvcache (model/kvcache.c, query ring included), a policy that asks for them
 * is handed each forward's attention probabilities and, like every policy
 * with an observe hook, the sampled-token step the glue reports, the policy
 * selects when the glue's schedule (policies/schedule.c) says so,
 * and kvcache_compact applies its keep-set; after every compression the
 * original positions held by every (layer, kv head) must equal the
 * reference's, slot for slot.
 *
 * A fixture is a JSON file of steps and a binary file of little-endian f32
 * queries [n_layer][total][n_head][hd] and keys [n_layer][total][n_kv][hd]
 * (and values of the same shape where a fixture has them: replay_ctx.v);
 * a step is {"at": the position whose forward compressed (-1: the prompt's),
 * "held": [layer][kv head][slot] positions, and "sample" when several
 * sequences run one after another}.
 *
 * Static inline, as test_util.h: include after test.h and test_util.h. */
#ifndef EB_TEST_REPLAY_H
#define EB_TEST_REPLAY_H

#include <math.h>

#include "model/kvcache.h"
#include "policies/schedule.h"

/* The whole file as floats (*n of them), or NULL. */
static inline float *replay_read_floats(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = bytes > 0 ? malloc((size_t)bytes) : NULL;
    if (v && fread(v, 1, (size_t)bytes, f) != (size_t)bytes) {
        free(v);
        v = NULL;
    }
    fclose(f);
    *n = bytes / 4;
    return v;
}

/* One sequence of a fixture and what it is checked against. */
struct replay_ctx {
    struct backend *be;
    const cJSON *set;        /* its "id" names it in messages */
    const cJSON *steps;      /* the reference's compressions */
    const float *q, *k;      /* [n_layer][total][n_head or n_kv][hd] */
    const float *v;          /* as k, or NULL: the keys double as values */
    const float *rope_inv_freq;   /* cache_view's RoPE (may be NULL) */
    int rope_pairing;
    int nl, nh, nkv, hd, total, prompt, budget;
};

/* Positions held by (l, h) equal the JSON list, in order. */
static inline int replay_same_held(const struct kvcache *c, int l, int h, const cJSON *want,
                                   char *why, size_t wn)
{
    int n;
    int *w = json_ints(want, &n);
    const int *pos = kvcache_positions(c, l, h);
    int len = kvcache_len(c, l, h), ok = len == n;
    if (!ok) snprintf(why, wn, "holds %d slots, expected %d", len, n);
    for (int i = 0; ok && i < n; i++)
        if (pos[i] != w[i]) {
            snprintf(why, wn, "slot %d holds position %d, expected %d", i, pos[i], w[i]);
            ok = 0;
        }
    free(w);
    return ok;
}

/* Feed tokens [from, to) into every layer: keys, values (vdev; the keys when
 * r->v is NULL) and queries. */
static inline int replay_feed(struct kvcache *c, const struct replay_ctx *r, float *kdev,
                              float *vdev, float *qdev, int from, int to, struct eb_err *e)
{
    int n = to - from;
    for (int l = 0; l < r->nl; l++) {
        const float *kl = r->k + ((size_t)l * r->total + from) * r->nkv * r->hd;
        const float *ql = r->q + ((size_t)l * r->total + from) * r->nh * r->hd;
        r->be->upload(r->be, kdev, kl, (size_t)n * r->nkv * r->hd);
        r->be->upload(r->be, qdev, ql, (size_t)n * r->nh * r->hd);
        if (r->v)
            r->be->upload(r->be, vdev, r->v + ((size_t)l * r->total + from) * r->nkv * r->hd,
                          (size_t)n * r->nkv * r->hd);
        if (kvcache_append(c, l, kdev, r->v ? vdev : kdev, n, e)) return -1;
        kvcache_qring_push(c, l, qdev, n);
    }
    kvcache_advance(c, n);
    kvcache_qring_advance(c, n);
    return 0;
}

/* For a policy that asks for attention probabilities (POLICY_NEED_ATTN_PROBS):
 * each layer's softmax(q k / sqrt(hd)) of the forward's rows [from, to) over
 * the slots the cache holds, each row seeing the positions up to its own (the
 * fixture's keys by position), in double, handed to observe_attn as f32 the
 * way the forward's hook does (harness/exp/policy_glue.c). */
static inline int replay_observe_attn(struct policy *p, const struct kvcache *c,
                                      const struct replay_ctx *r, int from, int to,
                                      struct eb_err *e)
{
    int n_new = to - from, cap = c->capacity, group = r->nh / r->nkv;
    float *probs = calloc((size_t)r->nh * n_new * cap, sizeof *probs);
    double *x = malloc((size_t)cap * sizeof *x);
    int rc = probs && x ? 0 : eb_fail(e, "out of memory for attention probabilities");
    for (int l = 0; rc == 0 && l < r->nl; l++) {
        for (int h = 0; h < r->nh; h++) {
            int g = h / group, len = kvcache_len(c, l, g);
            const int *pos = kvcache_positions(c, l, g);
            for (int i = 0; i < n_new; i++) {
                const float *q = r->q + (((size_t)l * r->total + from + i) * r->nh + h) * r->hd;
                double mx = -1e300, sum = 0;
                for (int j = 0; j < len; j++) {
                    const float *k = r->k + (((size_t)l * r->total + pos[j]) * r->nkv + g) * r->hd;
                    double dot = 0;
                    for (int d = 0; d < r->hd; d++) dot += (double)q[d] * k[d];
                    x[j] = pos[j] <= from + i ? dot / sqrt(r->hd) : -1e300;
                    if (x[j] > mx) mx = x[j];
                }
                for (int j = 0; j < len; j++) sum += x[j] > -1e300 ? exp(x[j] - mx) : 0;
                float *row = probs + ((size_t)h * n_new + i) * cap;
                for (int j = 0; j < len; j++)
                    row[j] = x[j] > -1e300 ? (float)(exp(x[j] - mx) / sum) : 0.0f;
            }
        }
        struct attn_view av = {l, probs, r->nh, n_new, cap, c->len + (size_t)l * r->nkv};
        rc = p->ops->observe_attn(p->self, 0, &av, e);
    }
    free(probs);
    free(x);
    return rc;
}

/* One selection (as harness/exp/policy_glue.c runs it) and its compaction;
 * *changed: some head got a keep-set. */
static inline int replay_select_compact(struct policy *p, struct kvcache *c,
                                        const struct replay_ctx *r, float **qbuf,
                                        struct keep_set *ks, int at_prefill, int *changed,
                                        struct eb_err *e)
{
    struct cache_view cv = {
        .be = r->be, .n_layer = r->nl, .n_head = r->nh, .n_kv = r->nkv, .head_dim = r->hd,
        .capacity = c->capacity, .len = c->len, .pos = c->pos, .pad = NULL,
        .k = (float *const *)c->k, .v = (float *const *)c->v, .next_pos = c->next_pos,
        .at_prefill = at_prefill, .rope_inv_freq = r->rope_inv_freq,
        .rope_pairing = r->rope_pairing,
    };
    for (int l = 0; l < r->nl; l++) cv.n_q = kvcache_qring_gather(c, l, qbuf[l]);
    cv.q = qbuf;
    keep_set_none(ks);
    if (p->ops->select(p->self, 0, &cv, r->budget, ks, e)) return -1;
    *changed = 0;
    for (int l = 0; l < r->nl; l++)
        for (int h = 0; h < r->nkv; h++) {
            int n = ks->n_keep[l * r->nkv + h];
            if (n < 0) continue;
            *changed = 1;
            if (kvcache_compact(c, l, h, keep_set_head(ks, l, h), n, e) < 0) return -1;
        }
    return 0;
}

/* Compare the cache with expected step *next (if its position matches). */
static inline void replay_check_step(const struct kvcache *c, const struct replay_ctx *r,
                                     const char *spec, int at, int *next, int *n_heads)
{
    const cJSON *st = cJSON_GetArrayItem(r->steps, *next);
    CHECK_MSG(st && json_int(st, "at") == at, "%s (set %d): compression after position %d, "
              "reference expects %d", spec, json_int(r->set, "id"), at, st ? json_int(st, "at") : -2);
    if (!st || json_int(st, "at") != at) return;
    const cJSON *held = cJSON_GetObjectItem(st, "held");
    for (int l = 0; l < r->nl; l++)
        for (int h = 0; h < r->nkv; h++) {
            char why[160] = "";
            int ok = replay_same_held(c, l, h, cJSON_GetArrayItem(cJSON_GetArrayItem(held, l), h),
                                      why, sizeof why);
            CHECK_MSG(ok, "%s (set %d, %d/%d heads, B=%d), compression %d (position %d), layer "
                          "%d kv head %d: %s", spec, json_int(r->set, "id"), r->nh, r->nkv,
                      r->budget, *next, at, l, h, why);
            (*n_heads)++;
        }
    (*next)++;
}

/* One sequence through p on the schedule sr holds (sched_begin .. sched_end
 * around it): the prompt in one forward, then one token per forward, each
 * compression checked against step *next of r->steps.  sample >= 0: the
 * steps carry a "sample" member that must equal it.  *prefill_skipped counts
 * prompts the schedule left whole; *n_heads the caches compared.  0, or -1
 * when something failed to run (already reported). */
static inline int replay_sequence(struct policy *p, struct sched_run *sr,
                                  const struct replay_ctx *r, const char *spec, int sample,
                                  int *next, int *n_heads, int *prefill_skipped)
{
    struct eb_err e = {0};
    struct kvcache *c = NULL;
    struct keep_set ks = {.n_layer = r->nl, .n_kv = r->nkv, .stride = r->total};
    struct sched_seq ss;
    float *qbuf[8] = {0}, *kdev = NULL, *vdev = NULL, *qdev = NULL;
    int n_layer = r->nl < 8 ? r->nl : 8, qw = p->info.q_window > 0 ? p->info.q_window : 1;
    int ok = kvcache_create(r->be, r->nl, r->nkv, r->hd, r->total, KV_F32, &c, &e) == 0 &&
             kvcache_qring_enable(c, qw, r->nh * r->hd, &e) == 0 &&
             sched_begin(sr, &ss, p->ops->name, &e) == 0;
    ks.n_keep = malloc((size_t)r->nl * r->nkv * sizeof *ks.n_keep);
    ks.idx = malloc((size_t)r->nl * r->nkv * r->total * sizeof *ks.idx);
    kdev = r->be->alloc(r->be, (size_t)r->total * r->nkv * r->hd);
    if (r->v) vdev = r->be->alloc(r->be, (size_t)r->total * r->nkv * r->hd);
    qdev = r->be->alloc(r->be, (size_t)r->total * r->nh * r->hd);
    for (int l = 0; l < n_layer; l++) qbuf[l] = r->be->alloc(r->be, (size_t)qw * r->nh * r->hd);
    struct seq_view sv = {.n_prompt = r->prompt, .capacity = r->total};
    if (ok && p->ops->begin_sequence) ok = p->ops->begin_sequence(p->self, 0, &sv, &e) == 0;
    for (int pos = r->prompt - 1; ok && pos < r->total; pos++) {
        int at_prefill = pos == r->prompt - 1, changed = 0;
        ok = replay_feed(c, r, kdev, vdev, qdev, at_prefill ? 0 : pos, pos + 1, &e) == 0;
        if (ok && (p->info.needs & POLICY_NEED_ATTN_PROBS))
            ok = replay_observe_attn(p, c, r, at_prefill ? 0 : pos, pos + 1, &e) == 0;
        if (ok && p->ops->observe) {   /* the glue's step: tokens sampled so far, this one too */
            struct step_view st = {0, pos - r->prompt + 2, pos + 1,
                                   sched_selects_next(sr, &ss, pos + 1)};
            ok = p->ops->observe(p->self, 0, &st, &e) == 0;
        }
        int wants = ok && sched_step(sr, &ss, pos + 1, at_prefill);
        if (at_prefill && !wants) (*prefill_skipped)++;
        if (!wants) continue;
        ok = replay_select_compact(p, c, r, qbuf, &ks, at_prefill, &changed, &e) == 0;
        if (!ok || !changed) continue;
        int at = at_prefill ? -1 : pos;
        if (sample >= 0) {
            const cJSON *st = cJSON_GetArrayItem(r->steps, *next);
            CHECK_MSG(st && json_int(st, "sample") == sample, "%s: a compression in sample %d "
                      "(position %d), the reference's next is in sample %d", spec, sample, at,
                      st ? json_int(st, "sample") : -1);
            if (!st || json_int(st, "sample") != sample) continue;
        }
        replay_check_step(c, r, spec, at, next, n_heads);
    }
    CHECK_MSG(ok, "%s (set %d, sample %d): %s", spec, json_int(r->set, "id"), sample, e.msg);
    if (p->ops->end_sequence) p->ops->end_sequence(p->self, 0);
    sched_end(sr, &ss);
    for (int l = 0; l < 8; l++)
        if (qbuf[l]) r->be->free(r->be, qbuf[l]);
    if (kdev) r->be->free(r->be, kdev);
    if (vdev) r->be->free(r->be, vdev);
    if (qdev) r->be->free(r->be, qdev);
    free(ks.n_keep);
    free(ks.idx);
    kvcache_free(c);
    return ok ? 0 : -1;
}

/* A replay context from a golden fixture's set and run: the shapes, the
 * steps to match, and the set's queries and keys (and values, where the set
 * has them) in blob. */
static inline struct replay_ctx replay_ctx_of(struct backend *be, const cJSON *set,
                                              const cJSON *run, const float *blob)
{
    struct replay_ctx r = {
        .be = be, .set = set, .steps = cJSON_GetObjectItem(run, "steps"),
        .nl = json_int(set, "n_layer"), .nh = json_int(set, "n_head"),
        .nkv = json_int(set, "n_kv"), .hd = json_int(set, "head_dim"),
        .total = json_int(set, "total"), .prompt = json_int(set, "prompt"),
        .budget = json_int(set, "budget"),
    };
    r.q = blob + json_int(set, "q");
    r.k = blob + json_int(set, "k");
    r.v = cJSON_HasObjectItem(set, "v") ? blob + json_int(set, "v") : NULL;
    return r;
}

/* The whole-generation check the golden tests share: spec's policy on r's
 * shapes, one sequence on its own schedule, every compression of r->steps
 * matched in order; the matched ones are added to *n_steps. */
static inline void replay_generation(const struct replay_ctx *r, const char *spec, int *n_steps,
                                     int *n_heads, int *prefill_skipped)
{
    struct policy_model pm = {.n_layer = r->nl, .n_head = r->nh, .n_kv = r->nkv,
                              .head_dim = r->hd};
    struct policy *p = NULL;
    struct eb_err e = {0};
    CHECK_MSG(policy_create(spec, &pm, &p, &e) == 0, "%s: %s", spec, e.msg);
    if (!p) return;
    struct sched_run sr;
    sched_run_init(&sr, &p->info);
    int next = 0;
    replay_sequence(p, &sr, r, spec, -1, &next, n_heads, prefill_skipped);
    CHECK_MSG(next == cJSON_GetArraySize(r->steps), "%s (set %d): %d of %d compressions matched",
              spec, json_int(r->set, "id"), next, cJSON_GetArraySize(r->steps));
    *n_steps += next;
    policy_free(p);
}

#endif
