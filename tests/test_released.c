/* test_released.c - whole generations against the transcription of the
 * papers' released code (tools/golden/released_ref.py): a sequence is fed
 * token by token into a real kvcache (model/kvcache.c, query ring included),
 * the policy selects on the released schedule and kvcache_compact applies
 * its keep-set; after every compression the original positions held by
 * every (layer, kv head) must equal the reference's, slot for slot, so both
 * the kept set and the cache order (R-KV, SnapKV and H2O leave the cache in
 * top-k score order) are checked over >= 8 compressions.  The driver is
 * tests/replay.h (shared with test_kvpress.c). */
#include "test.h"
#include "test_util.h"

#include "replay.h"

#define FIX_JSON FIXTURE("policies/released.json")
#define FIX_BIN FIXTURE("policies/released.bin")
#define SEQ_JSON FIXTURE("policies/released_samples.json")
#define SEQ_BIN FIXTURE("policies/released_samples.bin")

static struct backend *be;

/* The run's policy with the reference's divide length given explicitly. */
static struct policy *open_policy(const char *base, int divide, const struct replay_ctx *r,
                                  char *spec, size_t n)
{
    snprintf(spec, n, "%s%sdivide_length=%d", base, strchr(base, ':') ? "," : ":", divide);
    struct policy_model pm = {.n_layer = r->nl, .n_head = r->nh, .n_kv = r->nkv,
                              .head_dim = r->hd};
    struct policy *p = NULL;
    struct eb_err e = {0};
    if (policy_create(spec, &pm, &p, &e)) CHECK_MSG(0, "%s: %s", spec, e.msg);
    return p;
}

static void run_one(const cJSON *set, const cJSON *run, const float *blob, int *n_steps,
                    int *n_heads)
{
    struct replay_ctx r = {
        .be = be, .set = set, .steps = cJSON_GetObjectItem(run, "steps"),
        .nl = json_int(set, "n_layer"), .nh = json_int(set, "n_head"), .nkv = json_int(set, "n_kv"),
        .hd = json_int(set, "head_dim"), .total = json_int(set, "total"),
        .prompt = json_int(set, "prompt"), .budget = json_int(set, "budget"),
    };
    r.q = blob + json_int(set, "q");
    r.k = blob + json_int(set, "k");
    char spec[160];
    struct policy *p = open_policy(cJSON_GetObjectItem(run, "policy")->valuestring,
                                   json_int(set, "divide"), &r, spec, sizeof spec);
    if (!p) return;
    struct sched_run sr;
    sched_run_init(&sr, &p->info);
    int next = 0, skipped = 0;
    replay_sequence(p, &sr, &r, spec, -1, &next, n_heads, &skipped);
    CHECK_MSG(next == cJSON_GetArraySize(r.steps), "%s (set %d): %d of %d compressions matched",
              spec, json_int(set, "id"), next, cJSON_GetArraySize(r.steps));
    *n_steps += next;
    policy_free(p);
}

static void test_whole_generations(void)
{
    long n_blob = 0;
    cJSON *doc = read_json(FIX_JSON);
    float *blob = doc ? replay_read_floats(FIX_BIN, &n_blob) : NULL;
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
    struct replay_ctx r = {
        .be = be, .set = doc, .steps = cJSON_GetObjectItem(run, "steps"),
        .nl = json_int(doc, "n_layer"), .nh = json_int(doc, "n_head"),
        .nkv = json_int(doc, "n_kv"), .hd = json_int(doc, "head_dim"),
        .budget = json_int(doc, "budget"),
    };
    const char *base = cJSON_GetObjectItem(run, "policy")->valuestring;
    char spec[160];
    struct policy *p = open_policy(base, json_int(doc, "divide"), &r, spec, sizeof spec);
    if (!p) return;
    int compat = strstr(base, "compat=released") != NULL;
    CHECK_MSG(p->info.divide_carry_flag == compat, "%s: carry flag %d", spec,
              p->info.divide_carry_flag);
    CHECK_MSG(strstr(p->spec, compat ? "compat=released" : "compat=none") != NULL, "%s: spec %s",
              spec, p->spec);
    struct sched_run sr;
    sched_run_init(&sr, &p->info);
    int next = 0, si = 0;
    const cJSON *sample;
    cJSON_ArrayForEach(sample, cJSON_GetObjectItem(doc, "samples")) {
        r.total = json_int(sample, "total");
        r.prompt = json_int(sample, "prompt");
        r.q = blob + json_int(sample, "q");
        r.k = blob + json_int(sample, "k");
        if (replay_sequence(p, &sr, &r, spec, si, &next, n_steps, n_prefill_skipped)) break;
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
    float *blob = doc ? replay_read_floats(SEQ_BIN, &n_blob) : NULL;
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
