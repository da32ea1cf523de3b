/* test_kvpress_wrap.c - the budget wrappers AdaKV (adakv-snapkv, adakv-rkv)
 * and PyramidKV, over SnapKV, R-KV, KNorm and KeyDiff (over=), against tools/golden/kvpress_wrap_ref.py (a numpy
 * transcription of NVIDIA/kvpress @ 8bb29b9's adakv_press.py,
 * pyramidkv_press.py and decoding_press.py):
 *   - whole generations on DecodingPress's schedule, replayed through the
 *     glue's schedule by tests/replay.h: the positions every (layer, kv head)
 *     holds after every compression, slot for slot, heads of unequal counts
 *     (AdaKV), layers of unequal budgets (PyramidKV, its fallback too), GQA
 *     and MHA, three layers;
 *   - the registry rows and what their instances report. */
#include "kernels/backend.h"
#include "policies/registry.h"
#include "test.h"
#include "test_util.h"
#include "replay.h"

#define WRAP_JSON FIXTURE("policies/kvpress_wrap.json")
#define WRAP_BIN FIXTURE("policies/kvpress_wrap.bin")

/* One run: the set's interval as divide_length, one sequence, every
 * compression compared. */
static void run_generation(struct backend *be, const cJSON *set, const cJSON *run,
                           const float *blob, int *n_steps, int *n_heads, int *n_skipped)
{
    struct replay_ctx r = replay_ctx_of(be, set, run, blob);
    char spec[160];
    snprintf(spec, sizeof spec, "%s,divide_length=%d",
             cJSON_GetObjectItem(run, "spec")->valuestring, json_int(set, "interval"));
    replay_generation(&r, spec, n_steps, n_heads, n_skipped);
}

static void test_generations(void)
{
    long n_blob = 0;
    cJSON *doc = read_json(WRAP_JSON);
    float *blob = doc ? replay_read_floats(WRAP_BIN, &n_blob) : NULL;
    if (!doc || !blob) {
        cJSON_Delete(doc);
        free(blob);
        SKIP("%s or %s missing (tools/golden/kvpress_wrap_ref.py)", WRAP_JSON, WRAP_BIN);
    }
    CHECK(n_blob == json_int(doc, "n_floats"));
    struct backend *be = backend_cpu_create(1);
    const cJSON *sets = cJSON_GetObjectItem(doc, "sets"), *run;
    int n_runs = 0, n_steps = 0, n_heads = 0, n_skipped = 0;
    int uneven = 0, pyramid = 0, fallback = 0, over_b = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(doc, "runs")) {
        const cJSON *set = cJSON_GetArrayItem(sets, json_int(run, "set"));
        int before = n_steps;
        run_generation(be, set, run, blob, &n_steps, &n_heads, &n_skipped);
        CHECK(n_steps - before >= 5);
        uneven += json_int(run, "uneven");
        pyramid += json_int(run, "pyramid");
        fallback += json_int(run, "fallback");
        over_b += json_int(run, "over_b");
        n_runs++;
    }
    CHECK(n_runs == 36);   /* 24 over SnapKV and R-KV, 12 over KNorm and KeyDiff */
    CHECK(n_skipped == n_runs); /* DecodingPress never compresses the prompt */
    /* the cases the fixture is there for: AdaKV heads of unequal counts,
     * PyramidKV layers over B, its pyramid and its fallback */
    CHECK(uneven > 0 && pyramid > 0 && fallback > 0 && over_b > 0);
    printf("  %d runs, %d compressions, %d (layer, kv head) caches compared; %d AdaKV layers "
           "of unequal heads, %d PyramidKV layer budgets (%d fallback)\n", n_runs, n_steps,
           n_heads, uneven, pyramid + fallback, fallback);
    be->destroy(be);
    cJSON_Delete(doc);
    free(blob);
}

static void test_registry(void)
{
    const char *names[] = {"adakv-snapkv", "adakv-rkv", "pyramidkv"};
    const char *specs[] = {
        "adakv-snapkv:alpha_safeguard=0.2,over=snapkv,window=64,divide_length=128,"
        "pad_policy=keep,score_dtype=f32",
        "adakv-rkv:alpha_safeguard=0.2,over=rkv,window=8,divide_length=128,pad_policy=keep,"
        "score_dtype=f32",
        "pyramidkv:beta=20,over=snapkv,window=64,divide_length=128,pad_policy=keep,"
        "score_dtype=f32"};
    const int windows[] = {64, 8, 64};
    for (int i = 0; i < 3; i++) {
        const struct policy_entry *en = policy_registry_find(names[i]);
        CHECK(en && !en->keeps_all);
        struct policy_model m = {.n_layer = 2, .n_head = 4, .n_kv = 2, .head_dim = 8};
        struct policy *p = NULL;
        struct eb_err e = {0};
        CHECK_MSG(policy_create(names[i], &m, &p, &e) == 0, "%s: %s", names[i], e.msg);
        CHECK(p && p->info.schedule == POLICY_DECODING);
        CHECK(p && p->info.divide_length == 128 && p->info.window == windows[i]);
        CHECK(p && p->info.needs == POLICY_NEED_RECENT_Q && p->info.q_window == windows[i]);
        CHECK(p && !p->info.divide_carry_flag && !p->info.divide_carry_count);
        if (p) CHECK_STR(p->spec, specs[i]);
        policy_free(p);
        /* the budget must exceed the window, as for the inner */
        CHECK(policy_budget_check(en->name, en->ops, NULL, 0, windows[i], windows[i], &e) != 0);
    }
    struct eb_err e = {0};
    struct policy *p = NULL;
    struct policy_model m = {.n_layer = 2, .n_head = 4, .n_kv = 2, .head_dim = 8};
    /* over a scorer without a window: the inner's window (0) and needs, the
     * same before an instance (--dry-run's budget check) */
    const char *windowless[] = {"pyramidkv:over=knorm", "adakv-rkv:over=keydiff,window=16"};
    for (int i = 0; i < 2; i++) {
        const struct policy_entry *en = NULL;
        struct policy_params pp;
        CHECK_MSG(policy_parse(windowless[i], &en, &pp, &e) == 0, "%s: %s", windowless[i], e.msg);
        CHECK(en && policy_entry_window(en, &pp) == 0);
        CHECK_MSG(policy_create(windowless[i], &m, &p, &e) == 0, "%s: %s", windowless[i], e.msg);
        CHECK(p && p->info.window == 0 && p->info.needs == 0 && p->info.schedule == POLICY_DECODING);
        policy_free(p);
        p = NULL;
        CHECK(en && policy_entry_budget_check(en, &pp, 1, &e) == 0);
    }
    CHECK(policy_create("pyramidkv:over=tova", &m, &p, &e) != 0);   /* not a choice */
    CHECK(policy_create("adakv-rkv:alpha_safeguard=1.5", &m, &p, &e) != 0);
    CHECK(policy_create("pyramidkv:beta=0", &m, &p, &e) != 0);
    CHECK(policy_create("adakv-snapkv:cache_order=score", &m, &p, &e) != 0); /* no such key */
    CHECK(p == NULL);
}

int main(void)
{
    RUN(test_generations);
    RUN(test_registry);
    return test_summary("kvpress_wrap");
}
