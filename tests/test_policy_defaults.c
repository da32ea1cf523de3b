/* test_policy_defaults.c - per-model policy defaults (policies/policy_defaults.h)
 * as the registry resolves them into typed parameters (policy_resolve*):
 * lookup by model, dataset family and budget, user and preset keys winning,
 * the typo guard, the file read once per process, and the shipped
 * policies/policy_defaults.json. */
#include "test.h"
#include "test_util.h"

#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/modelfile.h"
#include "policies/policy_defaults.h"
#include "policies/registry.h"

#define ENV "EVICTBENCH_POLICY_DEFAULTS"

static char tmp_path[64];

/* A defaults file holding json, named by the environment variable: a new
 * file each time, as the process reads a file once. */
static void use_defaults(const char *json)
{
    if (tmp_path[0]) unlink(tmp_path);
    snprintf(tmp_path, sizeof tmp_path, "/tmp/eb_policy_defaults_XXXXXX");
    int fd = mkstemp(tmp_path);
    if (fd >= 0) close(fd);
    FILE *f = fopen(tmp_path, "wb");
    if (f) {
        fputs(json, f);
        fclose(f);
    }
    setenv(ENV, tmp_path, 1);
}

static const char *TEST_FILE =
    "{\"_doc\": \"test\", \"policies\": [\"seal\", \"skipkv\"], \"models\": {"
    " \"m-test\": {\"_source\": \"x\", \"layer\": 7, \"split\": \"pairs\","
    "  \"math\": {\"alpha0\": -1.0, \"tau_by_budget\": {\"100\": 0.91, \"200\": 0.92, \"400\": 0.94}},"
    "  \"aime\": {\"gamma\": 0.05, \"by_budget\": {\"100\": {\"layer\": 9}, \"300\": {\"alpha0\": -2.0}}},"
    "  \"gsm8k\": {\"tau\": 0.5},"
    "  \"code\": {\"tau\": 0.6}}}}";

/* The values policy gets on model/dataset/budget from user params_json
 * (given_only: the user's and the defaults', as a run stores them); NULL on
 * error (message printed). */
static cJSON *resolve(const char *policy, const char *model, const char *dataset,
                      int64_t budget, const char *params_json)
{
    struct eb_err e = {0};
    const struct policy_entry *en;
    struct policy_params pp;
    struct policy_where at = {model, dataset, budget, model_registry_name};
    cJSON *user = cJSON_Parse(params_json);
    int rc = policy_resolve_named(policy, user, &at, &en, &pp, &e);
    cJSON_Delete(user);
    if (rc) {
        fprintf(stderr, "  %s\n", e.msg);
        return NULL;
    }
    return policy_params_json(&pp, 1);
}

/* The same for a spec, as JSON text (malloc'd), or the error message. */
static char *resolve_spec(const char *spec, const char *model, const char *dataset,
                          int64_t budget)
{
    struct eb_err e = {0};
    const struct policy_entry *en;
    struct policy_params pp;
    struct policy_where at = {model, dataset, budget, model_registry_name};
    if (policy_resolve(spec, &at, &en, &pp, &e)) return strdup(e.msg);
    cJSON *j = policy_params_json(&pp, 1);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int has(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key) != NULL;
}

/* The resolved parameters are ones the registry accepts for the policy. */
static int parses(const char *policy, const cJSON *params)
{
    cJSON *o = cJSON_Duplicate(params, 1);
    cJSON_AddStringToObject(o, "name", policy);
    const struct policy_entry *en;
    struct policy_params pp;
    struct eb_err e = {0};
    int rc = policy_parse_json(o, &en, &pp, &e);
    if (rc) fprintf(stderr, "  %s\n", e.msg);
    cJSON_Delete(o);
    return rc == 0;
}

static void test_user_wins(void)
{
    use_defaults(TEST_FILE);
    cJSON *j = resolve("skipkv", "m-test", "math500", 200, "{\"tau\": 0.7, \"layer\": 3}");
    CHECK(j != NULL);
    CHECK_NEAR(num(j, "tau"), 0.7, 0);
    CHECK_NEAR(num(j, "layer"), 3, 0);
    CHECK_NEAR(num(j, "alpha0"), -1.0, 0);
    CHECK_STR(str(j, "split"), "pairs");
    CHECK(parses("skipkv", j));
    cJSON_Delete(j);
    /* keys under "params" count as set too */
    j = resolve("skipkv", "m-test", "math500", 200, "{\"params\": {\"tau\": 0.7}}");
    CHECK(j && num(j, "tau") == 0.7 && num(j, "layer") == 7);
    CHECK(parses("skipkv", j));
    cJSON_Delete(j);
}

static void test_budget(void)
{
    use_defaults(TEST_FILE);
    const struct { int64_t budget; double tau; } cases[] = {
        {200, 0.92},  /* exact */
        {100, 0.91},
        {260, 0.92},  /* nearest */
        {150, 0.91},  /* a tie: the smaller */
        {300, 0.92},
        {5000, 0.94},
        {1, 0.91},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *j = resolve("skipkv", "m-test", "math500", cases[i].budget, "{}");
        CHECK_MSG(j && num(j, "tau") == cases[i].tau, "budget %lld: tau %g, want %g",
                  (long long)cases[i].budget, j ? num(j, "tau") : NAN, cases[i].tau);
        cJSON_Delete(j);
    }
    /* no budget: no per-budget entry */
    cJSON *j = resolve("skipkv", "m-test", "math500", 0, "{}");
    CHECK(j && !has(j, "tau") && num(j, "alpha0") == -1.0);
    cJSON_Delete(j);
    /* by_budget overrides the model level; the next level keeps it */
    j = resolve("skipkv", "m-test", "aime24", 120, "{}");
    CHECK(j && num(j, "layer") == 9 && num(j, "gamma") == 0.05 && !has(j, "alpha0"));
    cJSON_Delete(j);
    j = resolve("skipkv", "m-test", "aime24", 290, "{}");
    CHECK(j && num(j, "layer") == 7 && num(j, "alpha0") == -2.0);
    cJSON_Delete(j);
}

static void test_family(void)
{
    CHECK_STR(policy_defaults_family("math500"), "math");
    CHECK_STR(policy_defaults_family("math_train_1000"), "math");
    CHECK_STR(policy_defaults_family("math_hard"), "math");
    CHECK_STR(policy_defaults_family("aime24"), "aime");
    CHECK_STR(policy_defaults_family("aime25"), "aime");
    CHECK_STR(policy_defaults_family("gsm8k"), "gsm8k");
    CHECK_STR(policy_defaults_family("livecodebench"), "code");
    CHECK(policy_defaults_family("synthetic:8") == NULL);
    CHECK(policy_defaults_family("humaneval") == NULL);
    CHECK(policy_defaults_family(NULL) == NULL);

    use_defaults(TEST_FILE);
    cJSON *j = resolve("skipkv", "m-test", "gsm8k", 64, "{}");
    CHECK(j && num(j, "tau") == 0.5 && !has(j, "alpha0"));
    cJSON_Delete(j);
    j = resolve("skipkv", "m-test", "livecodebench", 64, "{}");
    CHECK(j && num(j, "tau") == 0.6);
    cJSON_Delete(j);
    /* no family, or no dataset: the model level only */
    j = resolve("skipkv", "m-test", "synthetic:8", 200, "{}");
    CHECK(j && !has(j, "tau") && num(j, "layer") == 7 && cJSON_GetArraySize(j) == 2);
    cJSON_Delete(j);
    j = resolve("skipkv", "m-test", NULL, 200, "{}");
    CHECK(j && !has(j, "tau") && num(j, "layer") == 7 && cJSON_GetArraySize(j) == 2);
    cJSON_Delete(j);
}

static void test_policy_tables(void)
{
    use_defaults(TEST_FILE);
    /* seal has no tau, alpha0 or gamma */
    cJSON *j = resolve("seal", "m-test", "math500", 200, "{}");
    CHECK(j && num(j, "layer") == 7 && !strcmp(str(j, "split"), "pairs") && !has(j, "tau") &&
          !has(j, "alpha0") && cJSON_GetArraySize(j) == 2);
    CHECK(parses("seal", j));
    cJSON_Delete(j);
    /* a preset sharing skipkv's code gets skipkv's defaults */
    j = resolve("skipkv-sent", "m-test", "math500", 200, "{}");
    CHECK(j && num(j, "tau") == 0.92 && num(j, "layer") == 7);
    CHECK(parses("skipkv-sent", j));
    cJSON_Delete(j);
    /* ... but not over its own setting: seal-static keeps gamma = 0 */
    j = resolve("skipkv", "m-test", "aime24", 200, "{}");
    CHECK(j && num(j, "gamma") == 0.05);
    cJSON_Delete(j);
    j = resolve("seal-static", "m-test", "aime24", 200, "{}");
    CHECK(j && !has(j, "gamma") && num(j, "layer") == 9);
    cJSON_Delete(j);
    /* other policies and unknown models: nothing added */
    const char *unchanged[][2] = {{"rkv", "m-test"}, {"fullkv", "m-test"},
                                  {"skipkv", "other-model"}, {"skipkv", NULL}};
    for (size_t i = 0; i < sizeof unchanged / sizeof unchanged[0]; i++) {
        j = resolve(unchanged[i][0], unchanged[i][1], "math500", 200, "{}");
        CHECK_MSG(j && cJSON_GetArraySize(j) == 0, "%s on %s", unchanged[i][0],
                  unchanged[i][1] ? unchanged[i][1] : "(none)");
        cJSON_Delete(j);
    }
    /* an unknown name is the registry's error, defaults or not */
    CHECK(resolve("nope", "m-test", "math500", 200, "{}") == NULL);
    /* where each value came from */
    const struct policy_entry *en;
    struct policy_params pp;
    struct eb_err e = {0};
    struct policy_where at = {"m-test", "aime24", 200, model_registry_name};
    CHECK(policy_resolve("seal-static:tau=0.5", &at, &en, &pp, &e) == 0);
    CHECK(pp.from[policy_param_index(&pp, "tau")] == PARAM_FROM_USER);
    CHECK(pp.from[policy_param_index(&pp, "gamma")] == PARAM_FROM_PRESET);
    CHECK(pp.from[policy_param_index(&pp, "layer")] == PARAM_FROM_DEFAULTS);
    CHECK(pp.from[policy_param_index(&pp, "lambda")] == PARAM_FROM_TABLE);
    CHECK(pp.given[policy_param_index(&pp, "tau")] == 1 &&
          pp.given[policy_param_index(&pp, "layer")] == 2 &&
          pp.given[policy_param_index(&pp, "gamma")] == 0);
}

/* A key its row does not declare is the policy code's bug: the lookup
 * aborts (in a child here) instead of reading NaN or 0 as a value. */
static void test_unknown_key_aborts(void)
{
    const struct policy_entry *en;
    struct policy_params pp;
    struct eb_err e = {0};
    struct policy_where at = {NULL, NULL, 200, model_registry_name};
    CHECK(policy_resolve("rkv", &at, &en, &pp, &e) == 0);
    CHECK(policy_param(&pp, "lambda") == pp.val[policy_param_index(&pp, "lambda")]);
    const char *keys[] = {"lamda", "divide_lenght"};
    for (int k = 0; k < 2; k++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            freopen("/dev/null", "w", stderr);
            if (k == 0) (void)policy_param(&pp, keys[k]);
            else (void)policy_param_int(&pp, keys[k]);
            _exit(0);
        }
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "key %s: status %d", keys[k], st);
    }
}

static void test_model_key(void)
{
    char k[128];
    policy_defaults_model_key("deepseek-r1-distill-qwen-7b", model_registry_name, k, sizeof k);
    CHECK_STR(k, "deepseek-r1-distill-qwen-7b");
    policy_defaults_model_key("models/DeepSeek-R1-Distill-Qwen-7B", model_registry_name, k,
                              sizeof k);
    CHECK_STR(k, "deepseek-r1-distill-qwen-7b");
    policy_defaults_model_key("/somewhere/else/DeepSeek-R1-Distill-Qwen-14B//",
                              model_registry_name, k, sizeof k);
    CHECK_STR(k, "deepseek-r1-distill-qwen-14b");
    policy_defaults_model_key("/x/Foo-Bar.GGUF", model_registry_name, k, sizeof k);
    CHECK_STR(k, "foo-bar");
    /* a path that is a registry file maps to its registry name */
    policy_defaults_model_key("models/SmolLM2-135M-Instruct.Q4_1.gguf", model_registry_name, k,
                              sizeof k);
    CHECK_STR(k, "smollm2-135m");
    /* without the model registry's lookup (harness/ passes it): the base name */
    policy_defaults_model_key("models/SmolLM2-135M-Instruct.Q4_1.gguf", NULL, k, sizeof k);
    CHECK_STR(k, "smollm2-135m-instruct.q4_1");

    use_defaults(TEST_FILE);
    cJSON *j = resolve("skipkv", "some/dir/M-Test/", "math500", 200, "{}");
    CHECK(j && num(j, "tau") == 0.92);
    cJSON_Delete(j);
}

static void test_spec(void)
{
    use_defaults(TEST_FILE);
    const char *cases[][4] = {
        /* spec, dataset, budget, the values given (user's, then defaults') */
        {"skipkv:tau=0.5", "math500", "200", "{\"tau\":0.5,\"layer\":7,\"split\":\"pairs\",\"alpha0\":-1}"},
        {"seal", NULL, "0", "{\"layer\":7,\"split\":\"pairs\"}"},
        {"seal:layer=4", NULL, "0", "{\"layer\":4,\"split\":\"pairs\"}"},
        {"skipkv", "aime24", "120", "{\"layer\":9,\"split\":\"pairs\",\"gamma\":0.05}"},
        {"fullkv", NULL, "64", "{}"},
        /* errors are the registry's, with or without defaults */
        {"lru", NULL, "64", "policy: unknown policy 'lru' (known: fullkv, "},
        {"rkv:lamda=0.1", NULL, "64", "policy rkv: unknown parameter 'lamda' (valid: lambda, "},
        {"seal:", NULL, "64", "policy seal: nothing after ':'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = resolve_spec(cases[i][0], "m-test", cases[i][1], atoi(cases[i][2]));
        CHECK_MSG(out && !strncmp(out, cases[i][3], strlen(cases[i][3])), "%s: %s",
                  cases[i][0], out ? out : "(null)");
        free(out);
    }
    /* the spec and the config form resolve to the same values */
    const struct policy_entry *en;
    struct policy_params a, b;
    struct eb_err e = {0};
    struct policy_where at = {"m-test", "math500", 200, model_registry_name};
    cJSON *o = cJSON_Parse("{\"tau\": 0.5}");
    CHECK(policy_resolve("skipkv:tau=0.5", &at, &en, &a, &e) == 0 &&
          policy_resolve_named("skipkv", o, &at, &en, &b, &e) == 0 &&
          !memcmp(a.val, b.val, sizeof a.val) && !memcmp(a.given, b.given, sizeof a.given));
    cJSON_Delete(o);
}

/* The file is read once per process: rewriting it in place changes nothing
 * for this process; another file (EVICTBENCH_POLICY_DEFAULTS) is read. */
static void test_read_once(void)
{
    use_defaults(TEST_FILE);
    cJSON *j = resolve("seal", "m-test", NULL, 0, "{}");
    CHECK(j && num(j, "layer") == 7);
    cJSON_Delete(j);
    FILE *f = fopen(tmp_path, "wb");
    if (f) {
        fputs("{\"policies\": [\"seal\"], \"models\": {\"m-test\": {\"layer\": 8}}}", f);
        fclose(f);
    }
    j = resolve("seal", "m-test", NULL, 0, "{}");
    CHECK(j && num(j, "layer") == 7);
    cJSON_Delete(j);
    use_defaults("{\"policies\": [\"seal\"], \"models\": {\"m-test\": {\"layer\": 8}}}");
    j = resolve("seal", "m-test", NULL, 0, "{}");
    CHECK(j && num(j, "layer") == 8);
    cJSON_Delete(j);
}

/* A bad file fails with its path and the JSON path of what is wrong. */
static void expect_error(const char *json, const char *want)
{
    use_defaults(json);
    const struct policy_entry *en;
    struct policy_params pp;
    struct eb_err e = {0};
    struct policy_where at = {"m-test", "math500", 200, model_registry_name};
    int rc = policy_resolve("rkv", &at, &en, &pp, &e);
    CHECK_MSG(rc == -1 && strstr(e.msg, tmp_path) && strstr(e.msg, want),
              "want an error with '%s', got rc %d: %s", want, rc, e.msg);
}

static void test_malformed(void)
{
    expect_error("{\"policies\": [\"seal\"], \"models\": {", "malformed JSON");
    expect_error("{\"policies\": [\"seal\", \"skipkv\"], \"models\": {\"m-test\": {\"tua\": 0.9}}}",
                 "$.models[\"m-test\"].tua: no policy in $.policies has a parameter 'tua'");
    /* tau is skipkv's: with seal alone it is a typo */
    expect_error("{\"policies\": [\"seal\"], \"models\": {\"m\": {\"tau\": 0.9}}}",
                 "$.models.m.tau");
    expect_error("{\"policies\": [\"skipkv\"], \"models\": {\"m\": {\"split\": \"triples\"}}}",
                 "$.models.m.split: policy skipkv: split=triples");
    expect_error("{\"policies\": [\"skipkv\"], \"models\": {\"m\": {\"math\": {\"tau_by_budget\": "
                 "{\"abc\": 0.9}}}}}", "$.models.m.math.tau_by_budget.abc: a budget key");
    expect_error("{\"policies\": [\"skipkv\"], \"models\": {\"m\": {\"math\": {\"by_budget\": "
                 "{\"64\": {\"tau\": 7}}}}}}", "$.models.m.math.by_budget[\"64\"].tau");
    expect_error("{\"policies\": [\"skipkv\"], \"models\": {\"m\": {\"mathx\": {}}}}",
                 "$.models.m.mathx: not a dataset family");
    expect_error("{\"policies\": [\"skipkv\"], \"models\": {\"m\": {\"tau_by_budget\": {}}}}",
                 "only inside a dataset family");
    expect_error("{\"policies\": [\"lru\"], \"models\": {}}", "$.policies[0]");
    expect_error("{\"policies\": [\"skipkv\"], \"modles\": {}}", "$.modles: unknown key");
    expect_error("[]", "$: expected an object");
}

static void test_missing_file(void)
{
    setenv(ENV, "/nonexistent/policy_defaults.json", 1);
    cJSON *j = resolve("skipkv", "deepseek-r1-distill-qwen-7b", "math500", 768,
                       "{\"lambda\":0.2}");
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    CHECK_STR(s, "{\"lambda\":0.2}");
    free(s);
    cJSON_Delete(j);
    s = resolve_spec("skipkv", "deepseek-r1-distill-qwen-7b", NULL, 768);
    CHECK_STR(s, "{}");
    free(s);
    char path[256];
    CHECK(policy_defaults_path(path, sizeof path) == -1);
}

static void test_shipped(void)
{
    unsetenv(ENV);
    char path[4096];
    CHECK(policy_defaults_path(path, sizeof path) == 0);
    CHECK_STR(path, "policies/policy_defaults.json");
    cJSON *j = resolve("skipkv", "deepseek-r1-distill-qwen-7b", "math500", 768, "{}");
    CHECK(j != NULL);
    CHECK_NEAR(num(j, "tau"), 0.96, 0);
    CHECK_NEAR(num(j, "alpha0"), -1.25, 0);
    CHECK_NEAR(num(j, "gamma"), 0.02, 0);
    CHECK_NEAR(num(j, "layer"), 20, 0);
    CHECK(j && parses("skipkv", j));
    cJSON_Delete(j);
    /* the same model by its directory */
    j = resolve("skipkv", "models/DeepSeek-R1-Distill-Qwen-7B/", "math500", 1260, "{}");
    CHECK(j && num(j, "tau") == 0.99);
    cJSON_Delete(j);
    j = resolve("skipkv", "deepseek-r1-distill-qwen-14b", "aime24", 1536, "{}");
    CHECK(j && num(j, "tau") == 0.96 && num(j, "alpha0") == -1.25 && num(j, "layer") == 35);
    cJSON_Delete(j);
    j = resolve("skipkv", "deepseek-r1-distill-qwen-14b", "math500", 1536, "{}");
    CHECK(j && num(j, "tau") == 0.98 && num(j, "alpha0") == -1.0);
    cJSON_Delete(j);
    j = resolve("skipkv", "deepseek-r1-distill-llama-8b", "aime24", 2700, "{}");
    CHECK(j && num(j, "tau") == 0.97 && num(j, "alpha0") == -1.0 && num(j, "layer") == 20);
    cJSON_Delete(j);
    /* LiveCodeBench: 14B at 3854 steers layer 53 */
    j = resolve("skipkv", "deepseek-r1-distill-qwen-14b", "livecodebench", 3854, "{}");
    CHECK(j && num(j, "tau") == 0.95 && num(j, "alpha0") == -1.0 && num(j, "layer") == 53);
    cJSON_Delete(j);
    j = resolve("skipkv", "deepseek-r1-distill-qwen-14b", "livecodebench", 2000, "{}");
    CHECK(j && num(j, "alpha0") == -1.25 && num(j, "layer") == 35);
    cJSON_Delete(j);
    j = resolve("seal", "deepseek-r1-distill-qwen-1.5b", "math500", 0, "{}");
    CHECK(j && num(j, "layer") == 20 && cJSON_GetArraySize(j) == 1);
    cJSON_Delete(j);
    j = resolve("seal", "smollm2-135m", NULL, 0, "{}");
    CHECK(j && num(j, "layer") == 20 && !strcmp(str(j, "split"), "pairs") &&
          !strcmp(str(j, "think"), "always"));
    CHECK(j && parses("seal", j));
    cJSON_Delete(j);
    j = resolve("rkv", "smollm2-135m", "gsm8k", 64, "{}");
    CHECK(j && cJSON_GetArraySize(j) == 0);
    cJSON_Delete(j);
}

/* Every model of the shipped file is a registry name. */
static void test_shipped_models_registered(void)
{
    cJSON *d = read_json("policies/policy_defaults.json");
    cJSON *reg = read_json("model/models.json");
    CHECK(d && reg);
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(d, "models"), *it;
    CHECK(cJSON_GetArraySize(models) >= 5);
    cJSON_ArrayForEach(it, models)
        CHECK_MSG(cJSON_GetObjectItemCaseSensitive(reg, it->string) != NULL,
                  "%s is not in model/models.json", it->string);
    cJSON_Delete(d);
    cJSON_Delete(reg);
}

int main(void)
{
    RUN(test_user_wins);
    RUN(test_budget);
    RUN(test_family);
    RUN(test_policy_tables);
    RUN(test_unknown_key_aborts);
    RUN(test_model_key);
    RUN(test_spec);
    RUN(test_read_once);
    RUN(test_malformed);
    RUN(test_missing_file);
    RUN(test_shipped);
    RUN(test_shipped_models_registered);
    if (tmp_path[0]) unlink(tmp_path);
    return test_summary("policy_defaults");
}
