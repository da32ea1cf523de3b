/* test_lazy.c - LazyEviction (policies/lazyeviction.c) against
 * tools/golden/lazy_ref.py, a numpy transcription of Halo-949/LazyEviction
 * (as imported in WeianMao/triattention @ e7a0eb1):
 *   - whole generations replayed by tests/replay.h: every forward's attention
 *     handed to observe_attn, the glue's schedule (no compression at the
 *     prompt, then every W-th decoding forward once a head holds more than B
 *     slots), the cache after every compression slot for slot; MHA, GQA 2:1
 *     and 3:1, MQA; alpha 1e-4 (nearly every slot recurs: cuts between equal
 *     scores), 0.05 and 0.12;
 *   - the registry row: defaults, schedule, budget rule. */
#include "kernels/backend.h"
#include "policies/registry.h"
#include "test.h"
#include "test_util.h"

#include "replay.h"

#define GEN_JSON FIXTURE("policies/lazy.json")
#define GEN_BIN FIXTURE("policies/lazy.bin")

/* One run: the policy with the set's W and the run's alpha, one sequence. */
static void run_generation(struct backend *be, const cJSON *set, const cJSON *run,
                           const float *blob, int *n_steps, int *n_heads, int *n_skipped)
{
    struct replay_ctx r = replay_ctx_of(be, set, run, blob);
    char spec[128];
    snprintf(spec, sizeof spec, "lazyeviction:window=%d,alpha=%.17g", json_int(set, "window"),
             cJSON_GetObjectItem(run, "alpha")->valuedouble);
    replay_generation(&r, spec, n_steps, n_heads, n_skipped);
}

static void test_whole_generations(void)
{
    long n_blob = 0;
    cJSON *doc = read_json(GEN_JSON);
    float *blob = doc ? replay_read_floats(GEN_BIN, &n_blob) : NULL;
    if (!doc || !blob) {
        cJSON_Delete(doc);
        free(blob);
        SKIP("%s or %s missing (tools/golden/lazy_ref.py)", GEN_JSON, GEN_BIN);
    }
    CHECK(n_blob == json_int(doc, "n_floats"));
    struct backend *be = backend_cpu_create(1);
    const cJSON *sets = cJSON_GetObjectItem(doc, "sets"), *run;
    int n_runs = 0, n_steps = 0, n_heads = 0, n_skipped = 0, n_ties = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(doc, "runs")) {
        const cJSON *set = cJSON_GetArrayItem(sets, json_int(run, "set"));
        int before = n_steps;
        run_generation(be, set, run, blob, &n_steps, &n_heads, &n_skipped);
        CHECK(n_steps - before >= 8);
        n_ties += json_int(run, "tie_cuts");
        n_runs++;
    }
    CHECK(n_runs == 12);
    CHECK(n_skipped == n_runs); /* the prompt's forward never compresses */
    CHECK(n_ties > 0);
    printf("  %d runs, %d compressions, %d (layer, kv head) caches compared, %d top-k cuts "
           "between equal scores\n", n_runs, n_steps, n_heads, n_ties);
    be->destroy(be);
    cJSON_Delete(doc);
    free(blob);
}

static void test_registry(void)
{
    const struct policy_entry *en = policy_registry_find("lazyeviction");
    CHECK(en && !en->keeps_all);
    struct policy_model m = {.n_layer = 1, .n_head = 4, .n_kv = 2, .head_dim = 4};
    struct policy *p = NULL;
    struct eb_err e = {0};
    CHECK_MSG(policy_create("lazyeviction", &m, &p, &e) == 0, "%s", e.msg);
    if (p) {
        CHECK_STR(p->spec, "lazyeviction:window=128,alpha=0.0001");
        CHECK(p->info.needs == POLICY_NEED_ATTN_PROBS && p->info.window == 128);
        CHECK(p->info.schedule == POLICY_DECODING && p->info.divide_length == 128);
        CHECK(policy_check_budget(p, 128, &e) != 0); /* B must exceed W */
        CHECK(policy_check_budget(p, 129, &e) == 0);
        /* a 300-token prompt stays whole; decoding forwards 128 and 256 select */
        struct sched_run sr;
        struct sched_seq ss;
        sched_run_init(&sr, &p->info);
        CHECK(sched_begin(&sr, &ss, "lazyeviction", &e) == 0);
        CHECK(sched_step(&sr, &ss, 300, 1) == 0);
        for (long t = 301; t <= 600; t++)
            CHECK(sched_step(&sr, &ss, t, 0) == (t == 428 || t == 556));
        sched_end(&sr, &ss);
    }
    policy_free(p);
    struct policy_model odd = {.n_layer = 1, .n_head = 3, .n_kv = 2, .head_dim = 4};
    CHECK(policy_create("lazyeviction", &odd, &p, &e) != 0);
    CHECK(policy_create("lazyeviction:alpha=2", &m, &p, &e) != 0);
    CHECK(policy_create("lazyeviction:window=0", &m, &p, &e) != 0);
}

int main(void)
{
    RUN(test_whole_generations);
    RUN(test_registry);
    return test_summary("lazy");
}
