/* test_point.c - the typed point (harness/exp/point.h): a config expands
 * into points whose dataset entry, grader, family, policy entry, typed
 * parameters (per-model defaults included), budget and weight mode are
 * resolved once; `run`'s point built from a spec is the same point with the
 * same run key; run keys follow the typed values, not their JSON spelling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/exp/config.h"
#include "harness/exp/point.h"
#include "harness/exp/sweep.h"
#include "test.h"

static char defaults_path[64];

/* A defaults file: skipkv on m-test gets tau 0.92 on math at budget 200. */
static void use_defaults(void)
{
    snprintf(defaults_path, sizeof defaults_path, "/tmp/eb_point_defaults_XXXXXX");
    int fd = mkstemp(defaults_path);
    if (fd < 0) return;
    dprintf(fd, "{\"_doc\": \"test\", \"policies\": [\"seal\", \"skipkv\"], \"models\": {"
                " \"m-test\": {\"_source\": \"x\", \"layer\": 7,"
                "  \"math\": {\"tau_by_budget\": {\"200\": 0.92}},"
                "  \"gsm8k\": {\"tau\": 0.5}}}}");
    close(fd);
    setenv("EVICTBENCH_POLICY_DEFAULTS", defaults_path, 1);
}

static int expand(const char *json, struct exp_config *c, struct sweep *s)
{
    struct eb_err e = {0};
    if (exp_config_parse(json, strlen(json), "p.json", c, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1;
    }
    if (sweep_expand(c, NULL, s, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        exp_config_free(c);
        return -1;
    }
    return 0;
}

static const char *CFG =
    "{\"models\": \"m-test\", \"datasets\": [\"math500\", \"gsm8k\"], \"weights\": \"native\","
    " \"policies\": [\"fullkv\", {\"name\": \"rkv\", \"lambda\": [0.1, 0.2]},"
    "  {\"name\": \"skipkv\", \"budget\": 200}], \"budgets\": [64, 128]}";

static void test_typed_fields(void)
{
    struct exp_config c;
    struct sweep s;
    if (expand(CFG, &c, &s)) { CHECK(0); return; }
    /* per dataset: fullkv 1 + rkv 2 x 2 budgets + skipkv 1 = 6 */
    CHECK_MSG(s.n == 12, "%d points", s.n);
    const struct policy_entry *rkv = policy_registry_find("rkv");
    struct policy_params rkv_def;
    const struct policy_entry *ent;
    struct eb_err e = {0};
    CHECK(policy_parse("rkv", &ent, &rkv_def, &e) == 0);
    int n_rkv = 0, n_full = 0, n_skip = 0;
    for (int i = 0; i < s.n; i++) {
        const struct point *p = &s.pts[i];
        int gsm = !strcmp(p->dataset, "gsm8k");
        CHECK(p->weights == MODEL_WEIGHTS_NATIVE);
        CHECK(p->data == dataset_find(p->dataset, NULL) && p->data);
        CHECK_STR(point_grader(p), gsm ? "gsm8k" : "math");
        CHECK_STR(p->family, gsm ? "gsm8k" : "math");
        if (!strcmp(p->policy->name, "fullkv")) {
            n_full++;
            CHECK(p->budget == POLICY_NO_BUDGET);
        } else if (p->policy == rkv) {
            n_rkv++;
            CHECK(p->budget == 64 || p->budget == 128);
            double lambda = policy_param(&p->params, "lambda");
            CHECK(lambda == 0.1 || lambda == 0.2);
            /* every other parameter is the registry's default, typed */
            CHECK(p->params.n == rkv_def.n);
            for (int k = 0; k < p->params.n; k++)
                if (strcmp(p->params.def[k]->key, "lambda"))
                    CHECK(p->params.val[k] == rkv_def.val[k]);
        } else {
            n_skip++;
            CHECK_STR(p->policy->name, "skipkv");
            CHECK(p->budget == 200);
            /* the per-model default of its family, resolved into the typed value */
            CHECK_MSG(fabs(policy_param(&p->params, "tau") - (gsm ? 0.5 : 0.92)) < 1e-12,
                      "tau %g", policy_param(&p->params, "tau"));
            CHECK(policy_param_int(&p->params, "layer") == 7);
        }
    }
    CHECK(n_full == 2 && n_rkv == 8 && n_skip == 2);
    sweep_free(&s);
    exp_config_free(&c);
}

/* The key of the first rkv point of a config text. */
static int rkv_key(const char *json, char key[RUNKEY_HEX_LEN + 1])
{
    struct exp_config c;
    struct sweep s;
    if (expand(json, &c, &s)) return -1;
    int rc = -1;
    for (int i = 0; i < s.n && rc; i++)
        if (!strcmp(s.pts[i].policy->name, "rkv")) {
            memcpy(key, s.pts[i].run_key, RUNKEY_HEX_LEN + 1);
            rc = 0;
        }
    sweep_free(&s);
    exp_config_free(&c);
    return rc;
}

static void test_keys_follow_typed_values(void)
{
    char a[RUNKEY_HEX_LEN + 1], b[RUNKEY_HEX_LEN + 1], d[RUNKEY_HEX_LEN + 1],
        g[RUNKEY_HEX_LEN + 1];
    const char *base = "{\"models\": \"m-test\", \"datasets\": \"math500\", \"budgets\": 64, "
                       "\"policies\": {\"name\": \"rkv\", %s}}";
    char t[512];
    snprintf(t, sizeof t, base, "\"lambda\": 0.1, \"gqa\": \"mean\"");
    CHECK(rkv_key(t, a) == 0);
    snprintf(t, sizeof t, base, "\"gqa\": \"mean\", \"lambda\": 0.10");
    CHECK(rkv_key(t, b) == 0);
    snprintf(t, sizeof t, base, "\"lambda\": 0.1");      /* gqa left at its default */
    CHECK(rkv_key(t, g) == 0);
    snprintf(t, sizeof t, base, "\"lambda\": 0.2, \"gqa\": \"mean\"");
    CHECK(rkv_key(t, d) == 0);
    CHECK_STR(a, b);        /* key order and number spelling do not matter */
    CHECK(strcmp(a, d) != 0);
    /* gqa given or left out: the same typed point exactly when its default is mean */
    struct policy_params p;
    const struct policy_entry *ent;
    struct eb_err e = {0};
    char spec[256];
    CHECK(policy_parse("rkv", &ent, &p, &e) == 0);
    policy_params_format(ent, &p, spec, sizeof spec);
    CHECK((strstr(spec, "gqa=mean") != NULL) == (strcmp(a, g) == 0));
}

/* `run`'s point: built from a spec, no JSON; the same point as the sweep's. */
static void test_run_point_is_sweep_point(void)
{
    struct exp_config c;
    struct sweep s;
    const char *json = "{\"models\": \"m-test\", \"datasets\": \"math500\", "
                       "\"policies\": {\"name\": \"skipkv\", \"alpha0\": -1.5}, \"budgets\": 200}";
    if (expand(json, &c, &s)) { CHECK(0); return; }
    CHECK(s.n == 1);
    struct point p;
    memset(&p, 0, sizeof p);
    p.model = c.models[0];
    p.dataset = strdup("math500");
    p.data_limit = -1;
    p.budget = 200;
    p.batch_size = 1;
    p.batching = BATCHING_RAGGED;
    struct eb_err e = {0};
    CHECK_MSG(point_set_policy_spec(&p, "skipkv:alpha0=-1.5", &e) == 0, "%s", e.msg);
    CHECK_MSG(sweep_point_finish(&p, &c, NULL, &e) == 0, "%s", e.msg);
    if (s.n == 1 && p.policy) {
        const struct point *q = &s.pts[0];
        CHECK(p.policy == q->policy && p.params.n == q->params.n);
        CHECK(memcmp(p.params.val, q->params.val, sizeof p.params.val) == 0);
        CHECK_STR(p.run_key, q->run_key);
        CHECK_STR(p.params_json, q->params_json);   /* what is stored, too */
    }
    point_free(&p);
    sweep_free(&s);
    exp_config_free(&c);
}

/* A bad parameter fails at expansion, with the policy's JSON path. */
/* The device's kind is part of the point and its key: a GPU run is another
 * measurement; cuda:0 and cuda:1 are the same kind (shards share keys). */
static void test_device_in_key(void)
{
    const char *cpu = "{\"models\": \"m-test\", \"datasets\": \"gsm8k\", \"policies\": \"rkv\","
                      " \"budgets\": 64}";
    const char *gpu = "{\"models\": \"m-test\", \"datasets\": \"gsm8k\", \"policies\": \"rkv\","
                      " \"budgets\": 64, \"device\": \"cuda\"}";
    struct exp_config c1, c2;
    struct sweep s1, s2;
    if (expand(cpu, &c1, &s1)) { CHECK(0); return; }
    if (expand(gpu, &c2, &s2)) { CHECK(0); sweep_free(&s1); exp_config_free(&c1); return; }
    CHECK(s1.n == 1 && s2.n == 1);
    CHECK(s1.pts[0].device == NULL && s2.pts[0].device && !strcmp(s2.pts[0].device, "cuda"));
    CHECK(strcmp(s1.pts[0].run_key, s2.pts[0].run_key) != 0);
    CHECK(strstr(s2.pts[0].extra_json, "\"device\":\"cuda\"") != NULL);
    /* a command's --device cuda:1 on the CPU config gives the GPU config's key */
    struct eb_err e = {0};
    struct sweep s3;
    CHECK(exp_config_set_device(&c1, "cuda:1", &e) == 0);
    CHECK(sweep_expand(&c1, NULL, &s3, &e) == 0);
    CHECK(s3.n == 1 && !strcmp(s3.pts[0].run_key, s2.pts[0].run_key));
    /* the copy written for other processes carries the device */
    char *copy = exp_config_json(&c1);
    CHECK(copy && strstr(copy, "\"device\"") && strstr(copy, "cuda:1"));
    free(copy);
    CHECK(exp_config_set_device(&c1, "gpu", &e) == -1 && strstr(e.msg, "expected cpu, cuda"));
    sweep_free(&s3);
    sweep_free(&s1); sweep_free(&s2);
    exp_config_free(&c1); exp_config_free(&c2);
    struct exp_config c4;
    const char *bad = "{\"models\": \"m-test\", \"datasets\": \"gsm8k\", \"policies\": \"fullkv\","
                      " \"device\": \"tpu\"}";
    CHECK(exp_config_parse(bad, strlen(bad), "p.json", &c4, &e) == -1 && strstr(e.msg, "$.device"));
}

static void test_bad_policy_path(void)
{
    struct exp_config c;
    struct sweep s;
    struct eb_err e = {0};
    const char *json = "{\"models\": \"m\", \"datasets\": \"synthetic:2\", "
                       "\"policies\": [\"fullkv\", {\"name\": \"rkv\", \"lambda\": 7}]}";
    CHECK(exp_config_parse(json, strlen(json), "p.json", &c, &e) == 0);
    CHECK(sweep_expand(&c, NULL, &s, &e) == -1);
    CHECK_MSG(strncmp(e.msg, "p.json: $.policies[1]: ", 23) == 0, "%s", e.msg);
    exp_config_free(&c);
}

/* The budget is held against the window the row's resolved parameters give
 * where the point is built (`exp --dry-run`), not only once the policy is:
 * SnapKV keeps its 32 observation slots, snapkv-decode 8, rkv:window=16 16. */
static void test_budget_against_window(void)
{
    static const struct { const char *spec; int budget, ok; } cases[] = {
        {"snapkv", 32, 0}, {"snapkv", 33, 1}, {"snapkv-decode", 8, 0}, {"snapkv-decode", 9, 1},
        {"rkv:window=16", 16, 0}, {"rkv:window=16", 17, 1}, {"streamingllm", 4, 0},
        {"streamingllm:sinks=2", 4, 1}, {"rpc", 32, 0}, {"beaconkv", 16, 0},
        {"skipkv", 8, 0}, {"fullkv-pss", 0, 1}, {"skipkv:evict=0", 0, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct point p;
        memset(&p, 0, sizeof p);
        p.model = "m-test";
        p.dataset = strdup("gsm8k");
        p.budget = cases[i].budget;
        struct eb_err e = {0};
        int rc = point_set_policy_spec(&p, cases[i].spec, &e);
        CHECK_MSG((rc == 0) == cases[i].ok, "%s at %d: %s", cases[i].spec, cases[i].budget,
                  rc ? e.msg : "accepted");
        if (rc && !cases[i].ok) CHECK_MSG(strstr(e.msg, "window") != NULL, "%s", e.msg);
        point_free(&p);
    }
    /* a config: snapkv at 32 fails at expansion, before any model loads */
    struct exp_config c;
    struct sweep s;
    struct eb_err e = {0};
    const char *json = "{\"models\": \"m-test\", \"datasets\": \"gsm8k\", "
                       "\"policies\": \"snapkv\", \"budgets\": [32]}";
    CHECK(exp_config_parse(json, strlen(json), "p.json", &c, &e) == 0);
    CHECK(sweep_expand(&c, NULL, &s, &e) == -1 && strstr(e.msg, "window"));
    exp_config_free(&c);
}

/* Whether a policy evicts nothing is one predicate (policy_keeps_all) over
 * its resolved parameters, whichever form names it: a sweep gives skipkv
 * with evict 0 no budget, as it gives fullkv and fullkv-pss none. */
static void test_keeps_all_one_predicate(void)
{
    CHECK(policy_spec_keeps_all("fullkv") && policy_spec_keeps_all("fullkv-pss"));
    CHECK(policy_spec_keeps_all("seal") && policy_spec_keeps_all("skipkv:evict=0"));
    CHECK(!policy_spec_keeps_all("skipkv") && !policy_spec_keeps_all("rkv"));
    CHECK(!policy_spec_keeps_all("no-such") && !policy_spec_keeps_all("skipkv:evict=7"));
    cJSON *off = cJSON_Parse("{\"evict\": 0}");
    CHECK(policy_named_keeps_all("skipkv", off) && !policy_named_keeps_all("skipkv", NULL));
    cJSON_Delete(off);
    struct exp_config c;
    struct sweep s;
    const char *json = "{\"models\": \"m-test\", \"datasets\": \"gsm8k\", \"policies\": "
                       "[{\"name\": \"skipkv\", \"evict\": 0}, \"skipkv\"], "
                       "\"budgets\": [64, 128]}";
    if (expand(json, &c, &s)) { CHECK(0); return; }
    CHECK_MSG(s.n == 3, "%d points", s.n);   /* evict 0: one point, no budget; skipkv: two */
    for (int i = 0; i < s.n; i++) {
        int off_row = policy_keeps_all(s.pts[i].policy, &s.pts[i].params);
        CHECK((s.pts[i].budget == POLICY_NO_BUDGET) == off_row);
    }
    sweep_free(&s);
    exp_config_free(&c);
}

int main(void)
{
    use_defaults();
    RUN(test_typed_fields);
    RUN(test_keys_follow_typed_values);
    RUN(test_run_point_is_sweep_point);
    RUN(test_device_in_key);
    RUN(test_bad_policy_path);
    RUN(test_budget_against_window);
    RUN(test_keeps_all_one_predicate);
    if (defaults_path[0]) unlink(defaults_path);
    return test_summary("point");
}
