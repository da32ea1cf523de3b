/* test_kvpress.c - KNorm, TOVA, RandomPress, KeyDiff, LagKV and Expected
 * Attention against
 * tools/golden/kvpress_ref.py (a numpy transcription of NVIDIA/kvpress @
 * 8bb29b9):
 *   - one select: the exact keep-set of every (layer, kv head), heads under
 *     the budget left whole;
 *   - whole generations on DecodingPress's schedule (no compression at the
 *     prompt, then every interval-th decoding forward), replayed through the
 *     glue's schedule by tests/replay.h: the cache after every compression,
 *     slot for slot (ours in position order; the sets are kvpress's, whose
 *     cache is in top-k order), GQA, and a case of exactly equal scores at
 *     the top-k cut;
 *   - the same for random, keydiff, lagkv and expected-attention
 *     (kvpress_more.*: values of their own, several parameter sets, lagkv in
 *     both cache orders, both RoPE pairings);
 *   - the schedules as composition (policies/scheduled.c): decoding:over=
 *     knorm and tova against the same DecodingPress generations, and
 *     prefill-decoding and prefill over both against
 *     tools/golden/kvpress_sched_ref.py (PrefillDecodingPress; a press on
 *     its own), the prompt compressed to the budget;
 *   - the registry rows. */
#include "kernels/backend.h"
#include "policies/registry.h"
#include "test.h"
#include "test_util.h"

#include "replay.h"

#define GEN_JSON FIXTURE("policies/kvpress_gen.json")
#define GEN_BIN FIXTURE("policies/kvpress_gen.bin")
#define MORE_JSON FIXTURE("policies/kvpress_more.json")
#define MORE_BIN FIXTURE("policies/kvpress_more.bin")
#define SCHED_JSON FIXTURE("policies/kvpress_sched.json")
#define SCHED_BIN FIXTURE("policies/kvpress_sched.bin")

enum { CAP = 64 };

static cJSON *golden;

static float *floats(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    float *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    for (int i = 0; i < *n; i++) v[i] = (float)cJSON_GetArrayItem(a, i)->valuedouble;
    return v;
}

/* One case: its cache through the CPU backend, the policy's select, the keep-sets. */
static void run_case(const cJSON *c, struct backend *be, int n_layer, int n_head, int n_kv,
                     int hd)
{
    const char *name = cJSON_GetObjectItem(c, "policy")->valuestring;
    int budget = json_int(c, "budget");
    struct policy_model m = {.n_layer = n_layer, .n_head = n_head, .n_kv = n_kv, .head_dim = hd};
    struct policy *p = NULL;
    struct eb_err e = {0};
    CHECK_MSG(policy_create(name, &m, &p, &e) == 0, "%s", e.msg);
    if (!p) return;
    int len[8], pos[8 * CAP], n_keep[8], idx[8 * CAP];
    float *kbuf[4], *qbuf[4];
    const cJSON *layers = cJSON_GetObjectItem(c, "layers");
    for (int l = 0; l < n_layer; l++) {
        const cJSON *L = cJSON_GetArrayItem(layers, l);
        int nq, nk;
        float *q = floats(cJSON_GetObjectItem(L, "q"), &nq);
        qbuf[l] = be->alloc(be, (size_t)nq);
        be->upload(be, qbuf[l], q, (size_t)nq);
        free(q);
        kbuf[l] = be->alloc(be, (size_t)n_kv * CAP * hd);
        for (int h = 0; h < n_kv; h++) {
            float *k = floats(cJSON_GetObjectItem(cJSON_GetArrayItem(
                                  cJSON_GetObjectItem(L, "heads"), h), "k"), &nk);
            len[l * n_kv + h] = nk / hd;
            for (int j = 0; j < CAP; j++) pos[(l * n_kv + h) * CAP + j] = j;
            be->upload(be, kbuf[l] + (size_t)h * CAP * hd, k, (size_t)nk);
            free(k);
        }
    }
    struct cache_view cv = {.be = be, .n_layer = n_layer, .n_head = n_head, .n_kv = n_kv,
                            .head_dim = hd, .capacity = CAP, .len = len, .pos = pos,
                            .k = kbuf, .q = qbuf, .n_q = 1, .next_pos = CAP};
    struct keep_set ks = {n_layer, n_kv, CAP, n_keep, idx};
    int rc = p->ops->select(p->self, 0, &cv, budget, &ks, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    for (int l = 0; rc == 0 && l < n_layer; l++)
        for (int h = 0; h < n_kv; h++) {
            const cJSON *want = cJSON_GetObjectItem(
                cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(layers, l), "heads"), h),
                "keep");
            int nw, got = n_keep[l * n_kv + h], same;
            int *w = cJSON_IsArray(want) ? json_ints(want, &nw) : NULL;
            if (!w) {
                same = got == -1;
            } else {
                same = got == nw;
                for (int i = 0; same && i < nw; i++) same = keep_set_head(&ks, l, h)[i] == w[i];
            }
            CHECK_MSG(same, "%s budget %d layer %d head %d: keep-set differs", name, budget, l, h);
            free(w);
        }
    for (int l = 0; l < n_layer; l++) {
        be->free(be, kbuf[l]);
        be->free(be, qbuf[l]);
    }
    policy_free(p);
}

static void test_golden(void)
{
    if (!golden) SKIP("tests/fixtures/policies/kvpress.json missing or not JSON");
    int n_layer = json_int(golden, "n_layer"), n_head = json_int(golden, "n_head");
    int n_kv = json_int(golden, "n_kv"), hd = json_int(golden, "head_dim"), n = 0;
    struct backend *be = backend_cpu_create(1);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden, "cases")) {
        run_case(c, be, n_layer, n_head, n_kv, hd);
        n++;
    }
    CHECK(n == 12);
    be->destroy(be);
}

/* One run of kvpress_gen.json (or kvpress_more.json: a "spec" instead of a
 * "policy", values at the set's "v"): the policy with the set's interval as
 * its divide_length, one sequence, every compression compared. */
static void run_generation(struct backend *be, const cJSON *set, const cJSON *run,
                           const float *blob, int *n_steps, int *n_heads, int *n_skipped)
{
    struct replay_ctx r = replay_ctx_of(be, set, run, blob);
    int n_freq = 0;
    float *inv_freq = cJSON_HasObjectItem(set, "inv_freq") ?
                      floats(cJSON_GetObjectItem(set, "inv_freq"), &n_freq) : NULL;
    r.rope_inv_freq = inv_freq;
    r.rope_pairing = cJSON_HasObjectItem(set, "pairing") ? json_int(set, "pairing") : 0;
    const char *base = cJSON_GetObjectItem(run, cJSON_HasObjectItem(run, "spec") ? "spec" :
                                           "policy")->valuestring;
    char spec[128];
    snprintf(spec, sizeof spec, "%s%cdivide_length=%d", base, strchr(base, ':') ? ',' : ':',
             json_int(set, "interval"));
    replay_generation(&r, spec, n_steps, n_heads, n_skipped);
    free(inv_freq);
}

static void test_whole_generations(void)
{
    long n_blob = 0;
    cJSON *doc = read_json(GEN_JSON);
    float *blob = doc ? replay_read_floats(GEN_BIN, &n_blob) : NULL;
    if (!doc || !blob) {
        cJSON_Delete(doc);
        free(blob);
        SKIP("%s or %s missing (tools/golden/kvpress_ref.py)", GEN_JSON, GEN_BIN);
    }
    CHECK(n_blob == json_int(doc, "n_floats"));
    struct backend *be = backend_cpu_create(1);
    const cJSON *sets = cJSON_GetObjectItem(doc, "sets"), *run;
    int n_runs = 0, n_steps = 0, n_heads = 0, n_skipped = 0, n_ties = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(doc, "runs")) {
        const cJSON *set = cJSON_GetArrayItem(sets, json_int(run, "set"));
        int before = n_steps;
        run_generation(be, set, run, blob, &n_steps, &n_heads, &n_skipped);
        CHECK(n_steps - before >= 5);
        n_ties += json_int(run, "tie_cuts");
        n_runs++;
        /* the same scorer under the schedule wrapper: the same generation */
        struct replay_ctx r = replay_ctx_of(be, set, run, blob);
        char spec[128];
        snprintf(spec, sizeof spec, "decoding:over=%s,divide_length=%d",
                 cJSON_GetObjectItem(run, "policy")->valuestring, json_int(set, "interval"));
        int wrapped = 0, wrapped_heads = 0, wrapped_skipped = 0;
        replay_generation(&r, spec, &wrapped, &wrapped_heads, &wrapped_skipped);
        CHECK_MSG(wrapped == n_steps - before && wrapped_skipped == 1, "%s: %d of %d", spec,
                  wrapped, n_steps - before);
    }
    CHECK(n_runs == 10);
    CHECK(n_skipped == n_runs); /* DecodingPress never compresses the prompt */
    CHECK(n_ties > 0);
    printf("  %d runs, %d compressions, %d (layer, kv head) caches compared, %d top-k cuts "
           "between equal scores\n", n_runs, n_steps, n_heads, n_ties);
    be->destroy(be);
    cJSON_Delete(doc);
    free(blob);
}

/* kvpress_more.*: random (two seeds, the prompt kept or not), keydiff, lagkv
 * (partitions, the short-cache branch, cross_scoring, kvpress's cache order)
 * and expected-attention (defaults, a short RoPE average, no covariance with
 * epsilon, no value norms with compat=released; both RoPE pairings), 12 runs
 * on each of 3 sets. */
static void test_more_generations(void)
{
    long n_blob = 0;
    cJSON *doc = read_json(MORE_JSON);
    float *blob = doc ? replay_read_floats(MORE_BIN, &n_blob) : NULL;
    if (!doc || !blob) {
        cJSON_Delete(doc);
        free(blob);
        SKIP("%s or %s missing (tools/golden/kvpress_ref.py)", MORE_JSON, MORE_BIN);
    }
    CHECK(n_blob == json_int(doc, "n_floats"));
    struct backend *be = backend_cpu_create(1);
    const cJSON *sets = cJSON_GetObjectItem(doc, "sets"), *run;
    int n_runs = 0, n_steps = 0, n_heads = 0, n_skipped = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(doc, "runs")) {
        const cJSON *set = cJSON_GetArrayItem(sets, json_int(run, "set"));
        int before = n_steps;
        run_generation(be, set, run, blob, &n_steps, &n_heads, &n_skipped);
        CHECK(n_steps - before >= 5);
        n_runs++;
    }
    CHECK(n_runs == 36);
    CHECK(n_skipped == n_runs);
    printf("  %d runs, %d compressions, %d (layer, kv head) caches compared\n", n_runs, n_steps,
           n_heads);
    be->destroy(be);
    cJSON_Delete(doc);
    free(blob);
}

/* The new rows: DecodingPress's schedule, no window, their defaults. */
static void test_registry_more(void)
{
    const char *names[] = {"random", "keydiff", "lagkv", "expected-attention"};
    const char *specs[] = {"random:seed=0,keep_prompt=1,divide_length=128",
                           "keydiff:divide_length=128",
                           "lagkv:n_sink=4,lag_size=128,cross_scoring=0,cache_order=position,"
                           "divide_length=128",
                           "expected-attention:n_future_positions=512,n_sink=4,use_covariance=1,"
                           "use_vnorm=1,epsilon=0,divide_length=128,compat=none"};
    for (int i = 0; i < 4; i++) {
        const struct policy_entry *en = policy_registry_find(names[i]);
        CHECK(en && !en->keeps_all);
        struct policy_model m = {.n_layer = 1, .n_head = 2, .n_kv = 1, .head_dim = 4};
        struct policy *p = NULL;
        struct eb_err e = {0};
        CHECK_MSG(policy_create(names[i], &m, &p, &e) == 0, "%s: %s", names[i], e.msg);
        CHECK(p && p->info.schedule == POLICY_DECODING && p->info.divide_length == 128);
        CHECK(p && p->info.window == 0);
        /* expected-attention: the queries of the forwards since the last compression */
        CHECK(p && p->info.needs == (i == 3 ? POLICY_NEED_RECENT_Q : 0u));
        CHECK(p && p->info.q_window == (i == 3 ? 128 : 0));
        if (p) CHECK_STR(p->spec, specs[i]);
        policy_free(p);
    }
    struct eb_err e = {0};
    struct policy *p = NULL;
    struct policy_model m = {.n_layer = 1, .n_head = 2, .n_kv = 1, .head_dim = 4};
    CHECK(policy_create("lagkv:lag_size=1", &m, &p, &e) != 0); /* std over one row */
    CHECK(policy_create("random:seed=-1", &m, &p, &e) != 0);
    /* DecodingPress's buffer keeps at most 256 hidden states */
    CHECK(policy_create("expected-attention:divide_length=1000", &m, &p, &e) == 0);
    CHECK(p && p->info.q_window == 256);
    policy_free(p);
}

static void test_registry(void)
{
    const char *names[] = {"knorm", "tova"};
    for (int i = 0; i < 2; i++) {
        const struct policy_entry *en = policy_registry_find(names[i]);
        CHECK(en && !en->keeps_all);
        struct policy_model m = {.n_layer = 1, .n_head = 2, .n_kv = 1, .head_dim = 4};
        struct policy *p = NULL;
        struct eb_err e = {0};
        CHECK(policy_create(names[i], &m, &p, &e) == 0);
        CHECK(p && p->info.schedule == POLICY_DECODING && p->info.divide_length == 128);
        CHECK(p && p->info.window == i); /* knorm: no window; tova: the newest slot */
        if (p) {
            /* DecodingPress: a 300-token prompt stays whole; decoding forwards
             * 128, 256 (tokens 428, 556) select; no slot bound */
            struct sched_run sr;
            struct sched_seq ss;
            sched_run_init(&sr, &p->info);
            CHECK(sched_begin(&sr, &ss, names[i], &e) == 0);
            CHECK(sched_selects_next(&sr, &ss, 300) == 0);
            CHECK(sched_step(&sr, &ss, 300, 1) == 0);
            int n_sel = 0;
            for (long t = 301; t <= 600; t++) {
                CHECK(sched_selects_next(&sr, &ss, t - 1) == sched_step(&sr, &ss, t, 0));
                if (sched_step(&sr, &ss, t, 0)) {
                    CHECK(t == 428 || t == 556);
                    n_sel++;
                }
            }
            CHECK(n_sel == 2);
            CHECK(sched_slot_limit(&sr, 64) == 0);
            sched_end(&sr, &ss);
        }
        policy_free(p);
    }
    struct eb_err e = {0};
    struct policy *p = NULL;
    CHECK(policy_create("knorm:window=3", &(struct policy_model){1, 2, 1, 4, 0, 0, 0, 0, 0},
                        &p, &e) != 0); /* no such parameter */
}

/* kvpress_sched.*: prefill-decoding (PrefillDecodingPress) and prefill (a
 * press on its own) over KNorm and TOVA; prompts over and under the budget. */
static void test_schedule_generations(void)
{
    long n_blob = 0;
    cJSON *doc = read_json(SCHED_JSON);
    float *blob = doc ? replay_read_floats(SCHED_BIN, &n_blob) : NULL;
    if (!doc || !blob) {
        cJSON_Delete(doc);
        free(blob);
        SKIP("%s or %s missing (tools/golden/kvpress_sched_ref.py)", SCHED_JSON, SCHED_BIN);
    }
    CHECK(n_blob == json_int(doc, "n_floats"));
    struct backend *be = backend_cpu_create(1);
    const cJSON *sets = cJSON_GetObjectItem(doc, "sets"), *run;
    int n_runs = 0, n_steps = 0, n_heads = 0, n_skipped = 0, n_prompts = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(doc, "runs")) {
        const cJSON *set = cJSON_GetArrayItem(sets, json_int(run, "set"));
        const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(run, "steps"), 0);
        n_prompts += first && json_int(first, "at") == -1;
        run_generation(be, set, run, blob, &n_steps, &n_heads, &n_skipped);
        n_runs++;
    }
    CHECK(n_runs == 12);
    CHECK(n_skipped == 0);    /* the prompt's forward always selects */
    CHECK(n_prompts == 8);    /* two sets' prompts over the budget, four runs each */
    printf("  %d runs, %d compressions (%d of prompts), %d (layer, kv head) caches compared\n",
           n_runs, n_steps, n_prompts, n_heads);
    be->destroy(be);
    cJSON_Delete(doc);
    free(blob);
}

int main(void)
{
    golden = read_json("tests/fixtures/policies/kvpress.json");
    RUN(test_golden);
    RUN(test_whole_generations);
    RUN(test_registry);
    RUN(test_more_generations);
    RUN(test_schedule_generations);
    RUN(test_registry_more);
    cJSON_Delete(golden);
    return test_summary("kvpress");
}
