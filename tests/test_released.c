/* test_released.c - whole generations against the transcription of the
 * papers' released code (tools/golden/released_ref.py): a sequence is fed
 * token by token into a real kvcache (model/kvcache.c, query ring included),
 * the policy selects on the released schedule and kvcache_compact applies
 * its keep-set; after every compression the original positions held by
 * every (layer, kv head) must equal the reference's, slot for slot, so both
 * the kept set and the cache order (R-KV, SnapKV and H2O leave the cache in
 * top-k score order) are checked over >= 8 compressions. */
#include "test.h"
#include "test_util.h"

#include "policies/schedule.h"
#include "model/kvcache.h"

#define FIX_JSON FIXTURE("policies/released.json")
#define FIX_BIN FIXTURE("policies/released.bin")
#define SEQ_JSON FIXTURE("policies/released_samples.json")
#define SEQ_BIN FIXTURE("policies/released_samples.bin")

static struct backend *be;

static float *read_floats(const char *path, long *n)
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

/* Positions held by (l, h) equal the JSON list, in order. */
static int same_held(const struct kvcache *c, int l, int h, const cJSON *want, char *why,
                     size_t wn)
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

struct run_ctx {
    const cJSON *set, *steps;
    const float *q, *k;      /* [n_layer][total][n_head or n_kv][hd] */
    int nl, nh, nkv, hd, total, prompt, budget, divide;
};

/* Feed tokens [from, to) into every layer: keys (also as values) and queries. */
static int feed(struct kvcache *c, const struct run_ctx *r, float *kdev, float *qdev, int from,
                int to, struct eb_err *e)
{
    int n = to - from;
    for (int l = 0; l < r->nl; l++) {
        const float *kl = r->k + ((size_t)l * r->total + from) * r->nkv * r->hd;
        const float *ql = r->q + ((size_t)l * r->total + from) * r->nh * r->hd;
        be->upload(be, kdev, kl, (size_t)n * r->nkv * r->hd);
        be->upload(be, qdev, ql, (size_t)n * r->nh * r->hd);
        if (kvcache_append(c, l, kdev, kdev, n, e)) return -1;
        kvcache_qring_push(c, l, qdev, n);
    }
    kvcache_advance(c, n);
    kvcache_qring_advance(c, n);
    return 0;
}

/* One selection (as harness/policy_glue.c runs it) and its compaction;
 * *changed: some head got a keep-set. */
static int select_compact(struct policy *p, struct kvcache *c, const struct run_ctx *r,
                          float **qbuf, struct keep_set *ks, int at_prefill, int *changed,
                          struct eb_err *e)
{
    struct cache_view cv = {
        .be = be, .n_layer = r->nl, .n_head = r->nh, .n_kv = r->nkv, .head_dim = r->hd,
        .capacity = c->capacity, .len = c->len, .pos = c->pos, .pad = NULL,
        .k = (float *const *)c->k, .v = (float *const *)c->v, .next_pos = c->next_pos, .at_prefill = at_prefill,
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
static void check_step(const struct kvcache *c, const struct run_ctx *r, const char *spec, int at,
                       int *next, int *n_heads)
{
    const cJSON *st = cJSON_GetArrayItem(r->steps, *next);
    CHECK_MSG(st && json_int(st, "at") == at, "%s (set %d): compression after position %d, "
              "reference expects %d", spec, json_int(r->set, "id"), at, st ? json_int(st, "at") : -2);
    if (!st || json_int(st, "at") != at) return;
    const cJSON *held = cJSON_GetObjectItem(st, "held");
    for (int l = 0; l < r->nl; l++)
        for (int h = 0; h < r->nkv; h++) {
            char why[160] = "";
            int ok = same_held(c, l, h, cJSON_GetArrayItem(cJSON_GetArrayItem(held, l), h), why,
                               sizeof why);
            CHECK_MSG(ok, "%s (set %d, %d/%d heads, B=%d), compression %d (position %d), layer "
                          "%d kv head %d: %s", spec, json_int(r->set, "id"), r->nh, r->nkv,
                      r->budget, *next, at, l, h, why);
            (*n_heads)++;
        }
    (*next)++;
}

static void run_one(const cJSON *set, const cJSON *run, const float *blob, int *n_steps,
                    int *n_heads)
{
    struct run_ctx r = {
        .set = set, .steps = cJSON_GetObjectItem(run, "steps"),
        .nl = json_int(set, "n_layer"), .nh = json_int(set, "n_head"), .nkv = json_int(set, "n_kv"),
        .hd = json_int(set, "head_dim"), .total = json_int(set, "total"),
        .prompt = json_int(set, "prompt"), .budget = json_int(set, "budget"),
        .divide = json_int(set, "divide"),
    };
    r.q = blob + json_int(set, "q");
    r.k = blob + json_int(set, "k");
    const char *base = cJSON_GetObjectItem(run, "policy")->valuestring;
    char spec[160];
    /* the reference's divide length, given explicitly */
    snprintf(spec, sizeof spec, "%s%sdivide_length=%d", base, strchr(base, ':') ? "," : ":",
             r.divide);
    struct policy_model pm = {.n_layer = r.nl, .n_head = r.nh, .n_kv = r.nkv, .head_dim = r.hd};
    struct policy *p = NULL;
    struct kvcache *c = NULL;
    struct eb_err e = {0};
    struct keep_set ks = {0};
    float *qbuf[8] = {0}, *kdev = NULL, *qdev = NULL;
    if (policy_create(spec, &pm, &p, &e)) {
        CHECK_MSG(0, "%s: %s", spec, e.msg);
        return;
    }
    int ok = kvcache_create(be, r.nl, r.nkv, r.hd, r.total, KV_F32, &c, &e) == 0 &&
             kvcache_qring_enable(c, p->info.q_window, r.nh * r.hd, &e) == 0;
    CHECK_MSG(ok, "%s: %s", spec, e.msg);
    ks = (struct keep_set){.n_layer = r.nl, .n_kv = r.nkv, .stride = r.total};
    ks.n_keep = malloc((size_t)r.nl * r.nkv * sizeof *ks.n_keep);
    ks.idx = malloc((size_t)r.nl * r.nkv * r.total * sizeof *ks.idx);
    kdev = be->alloc(be, (size_t)r.total * r.nkv * r.hd);
    qdev = be->alloc(be, (size_t)r.total * r.nh * r.hd);
    for (int l = 0; l < r.nl && l < 8; l++) qbuf[l] = be->alloc(be, (size_t)p->info.q_window * r.nh * r.hd);
    struct seq_view sv = {.n_prompt = r.prompt, .capacity = r.total};
    if (ok && p->ops->begin_sequence) ok = p->ops->begin_sequence(p->self, 0, &sv, &e) == 0;
    int next = 0, changed = 0;
    if (ok) ok = feed(c, &r, kdev, qdev, 0, r.prompt, &e) == 0 &&
                 select_compact(p, c, &r, qbuf, &ks, 1, &changed, &e) == 0;
    if (ok && changed) check_step(c, &r, spec, -1, &next, n_heads);
    for (int pos = r.prompt; ok && pos < r.total; pos++) {
        ok = feed(c, &r, kdev, qdev, pos, pos + 1, &e) == 0;
        if (!ok || p->info.schedule != POLICY_DIVIDE || pos % p->info.divide_length != 0) continue;
        ok = select_compact(p, c, &r, qbuf, &ks, 0, &changed, &e) == 0;
        if (ok && changed) check_step(c, &r, spec, pos, &next, n_heads);
    }
    CHECK_MSG(ok, "%s: %s", spec, e.msg);
    CHECK_MSG(next == cJSON_GetArraySize(r.steps), "%s (set %d): %d of %d compressions matched",
              spec, json_int(set, "id"), next, cJSON_GetArraySize(r.steps));
    *n_steps += next;
    if (p->ops->end_sequence) p->ops->end_sequence(p->self, 0);
    for (int l = 0; l < 8; l++)
        if (qbuf[l]) be->free(be, qbuf[l]);
    if (kdev) be->free(be, kdev);
    if (qdev) be->free(be, qdev);
    free(ks.n_keep);
    free(ks.idx);
    kvcache_free(c);
    policy_free(p);
}

static void test_whole_generations(void)
{
    long n_blob = 0;
    cJSON *doc = read_json(FIX_JSON);
    float *blob = doc ? read_floats(FIX_BIN, &n_blob) : NULL;
    if (!doc || !blob) {
        cJSON_Delete(doc);
        free(blob);
        SKIP("%s or %s missing (tools/golden/released_ref.py)", FIX_JSON, FIX_BIN);
    }
    CHECK(n_blob == json_int(doc, "n_floats"));
    const cJSON *sets = cJSON_GetObjectItem(doc, "sets"), *run;
    int n_runs = 0, n_steps = 0, n_heads = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(doc, "runs")) {
        run_one(cJSON_GetArrayItem(sets, json_int(run, "set")), run, blob, &n_steps, &n_heads);
        n_runs++;
    }
    CHECK(n_runs >= 40);
    CHECK(n_steps >= 8 * 32); /* the divide-scheduled runs compress >= 8 times each */
    printf("  %d runs, %d compressions, %d (layer, kv head) caches compared in order\n", n_runs,
           n_steps, n_heads);
    cJSON_Delete(doc);
    free(blob);
}

/* ---- samples one after another (compat=released) ---- */

/* One policy instance runs the fixture's samples in order, each in a fresh
 * cache, selecting when the glue's schedule (policies/schedule.c)
 * says so; every compression must be the reference's, in sample, position
 * and held slots. */
static void run_samples(const cJSON *doc, const cJSON *run, const float *blob, int *n_steps,
                        int *n_prefill_skipped)
{
    struct run_ctx r = {
        .set = doc, .steps = cJSON_GetObjectItem(run, "steps"),
        .nl = json_int(doc, "n_layer"), .nh = json_int(doc, "n_head"),
        .nkv = json_int(doc, "n_kv"), .hd = json_int(doc, "head_dim"),
        .budget = json_int(doc, "budget"), .divide = json_int(doc, "divide"),
    };
    const char *base = cJSON_GetObjectItem(run, "policy")->valuestring;
    char spec[160];
    snprintf(spec, sizeof spec, "%s%sdivide_length=%d", base, strchr(base, ':') ? "," : ":",
             r.divide);
    struct policy_model pm = {.n_layer = r.nl, .n_head = r.nh, .n_kv = r.nkv, .head_dim = r.hd};
    struct policy *p = NULL;
    struct eb_err e = {0};
    if (policy_create(spec, &pm, &p, &e)) {
        CHECK_MSG(0, "%s: %s", spec, e.msg);
        return;
    }
    int compat = strstr(base, "compat=released") != NULL;
    CHECK_MSG(p->info.divide_carry_flag == compat, "%s: carry flag %d", spec,
              p->info.divide_carry_flag);
    CHECK_MSG(strstr(p->spec, compat ? "compat=released" : "compat=none") != NULL, "%s: spec %s",
              spec, p->spec);
    struct sched_run sr;
    sched_run_init(&sr, &p->info);
    int next = 0, ok = 1, n_layer = r.nl < 8 ? r.nl : 8;
    const cJSON *sample;
    int si = 0;
    cJSON_ArrayForEach(sample, cJSON_GetObjectItem(doc, "samples")) {
        r.total = json_int(sample, "total");
        r.prompt = json_int(sample, "prompt");
        r.q = blob + json_int(sample, "q");
        r.k = blob + json_int(sample, "k");
        struct kvcache *c = NULL;
        struct keep_set ks = {.n_layer = r.nl, .n_kv = r.nkv, .stride = r.total};
        float *qbuf[8] = {0}, *kdev = NULL, *qdev = NULL;
        struct sched_seq ss;
        ok = ok && kvcache_create(be, r.nl, r.nkv, r.hd, r.total, KV_F32, &c, &e) == 0 &&
             kvcache_qring_enable(c, p->info.q_window, r.nh * r.hd, &e) == 0 &&
             sched_begin(&sr, &ss, p->ops->name, &e) == 0;
        ks.n_keep = malloc((size_t)r.nl * r.nkv * sizeof *ks.n_keep);
        ks.idx = malloc((size_t)r.nl * r.nkv * r.total * sizeof *ks.idx);
        kdev = be->alloc(be, (size_t)r.total * r.nkv * r.hd);
        qdev = be->alloc(be, (size_t)r.total * r.nh * r.hd);
        for (int l = 0; l < n_layer; l++)
            qbuf[l] = be->alloc(be, (size_t)p->info.q_window * r.nh * r.hd);
        struct seq_view sv = {.n_prompt = r.prompt, .capacity = r.total};
        if (ok && p->ops->begin_sequence) ok = p->ops->begin_sequence(p->self, 0, &sv, &e) == 0;
        for (int pos = r.prompt - 1; ok && pos < r.total; pos++) {
            int at_prefill = pos == r.prompt - 1, changed = 0;
            /* the prompt in one forward, then one token per forward */
            ok = feed(c, &r, kdev, qdev, at_prefill ? 0 : pos, pos + 1, &e) == 0;
            int wants = ok && sched_step(&sr, &ss, pos + 1, at_prefill);
            if (at_prefill && !wants) (*n_prefill_skipped)++;
            if (!wants) continue;
            ok = select_compact(p, c, &r, qbuf, &ks, at_prefill, &changed, &e) == 0;
            if (!ok || !changed) continue;
            const cJSON *st = cJSON_GetArrayItem(r.steps, next);
            int at = at_prefill ? -1 : pos;
            CHECK_MSG(st && json_int(st, "sample") == si, "%s: a compression in sample %d "
                      "(position %d), the reference's next is in sample %d", spec, si, at,
                      st ? json_int(st, "sample") : -1);
            if (st && json_int(st, "sample") == si) check_step(c, &r, spec, at, &next, n_steps);
        }
        CHECK_MSG(ok, "%s (sample %d): %s", spec, si, e.msg);
        if (p->ops->end_sequence) p->ops->end_sequence(p->self, 0);
        sched_end(&sr, &ss);
        for (int l = 0; l < 8; l++)
            if (qbuf[l]) be->free(be, qbuf[l]);
        if (kdev) be->free(be, kdev);
        if (qdev) be->free(be, qdev);
        free(ks.n_keep);
        free(ks.idx);
        kvcache_free(c);
        si++;
    }
    CHECK_MSG(next == cJSON_GetArraySize(r.steps), "%s: %d of %d compressions matched", spec,
              next, cJSON_GetArraySize(r.steps));
    policy_free(p);
}

static void test_samples_one_after_another(void)
{
    long n_blob = 0;
    cJSON *doc = read_json(SEQ_JSON);
    float *blob = doc ? read_floats(SEQ_BIN, &n_blob) : NULL;
    if (!doc || !blob) {
        cJSON_Delete(doc);
        free(blob);
        SKIP("%s or %s missing (tools/golden/released_ref.py)", SEQ_JSON, SEQ_BIN);
    }
    CHECK(n_blob == json_int(doc, "n_floats"));
    const cJSON *run;
    int n_runs = 0, n_compat = 0, n_heads = 0, skipped = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(doc, "runs")) {
        int before = skipped;
        run_samples(doc, run, blob, &n_heads, &skipped);
        int compat = strstr(cJSON_GetObjectItem(run, "policy")->valuestring, "compat") != NULL;
        /* compat=released leaves some prompts >= B whole; the default never */
        CHECK_MSG(compat ? skipped > before : skipped == before, "%s: %d prefills not selected",
                  cJSON_GetObjectItem(run, "policy")->valuestring, skipped - before);
        n_runs++;
        n_compat += compat;
    }
    CHECK(n_runs >= 6 && n_compat >= 3);
    printf("  %d runs (%d compat=released) over %d samples each, %d (layer, kv head) caches "
           "compared, %d prompts left whole\n", n_runs, n_compat,
           cJSON_GetArraySize(cJSON_GetObjectItem(doc, "samples")), n_heads, skipped);
    cJSON_Delete(doc);
    free(blob);
}

/* The switch's edges: two live sequences cannot carry a count, the
 * prefill-only SnapKV has none to carry, an unknown value is refused. */
static void test_compat_edges(void)
{
    struct policy_model pm = {.n_layer = 1, .n_head = 2, .n_kv = 1, .head_dim = 8};
    struct policy *p = NULL;
    struct eb_err e = {0};
    CHECK(policy_create("rkv:compat=released", &pm, &p, &e) == 0);
    if (!p) return;
    CHECK(p->info.divide_carry_flag && p->info.divide_carry_count);
    struct sched_run sr;
    struct sched_seq a, b;
    sched_run_init(&sr, &p->info);
    CHECK(sched_begin(&sr, &a, "rkv", &e) == 0);
    CHECK(sched_begin(&sr, &b, "rkv", &e) != 0 && strstr(e.msg, "one sequence at a time"));
    sched_end(&sr, &a);
    CHECK(sched_begin(&sr, &b, "rkv", &e) == 0);
    policy_free(p);
    p = NULL;
    CHECK(policy_create("h2o-rkv:compat=released", &pm, &p, &e) == 0);
    CHECK(p && p->info.divide_carry_flag && !p->info.divide_carry_count);
    policy_free(p);
    p = NULL;
    CHECK(policy_create("rkv", &pm, &p, &e) == 0);
    CHECK(p && !p->info.divide_carry_flag && !p->info.divide_carry_count);
    policy_free(p);
    p = NULL;
    CHECK(policy_create("snapkv:compat=released", &pm, &p, &e) != 0 &&
          strstr(e.msg, "schedule=divide"));
    CHECK(policy_create("rkv:compat=bugs", &pm, &p, &e) != 0);
}

int main(void)
{
    be = backend_cpu_create(2);
    RUN(test_whole_generations);
    RUN(test_samples_one_after_another);
    RUN(test_compat_edges);
    be->destroy(be);
    return test_summary("released");
}
