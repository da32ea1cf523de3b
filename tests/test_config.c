/* test_config.c - experiment configs: validation messages with JSON paths,
 * sweep expansion, run_key stability, and the shipped experiments/ files. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "harness/exp/config.h"
#include "util/sha256.h"
#include "harness/exp/runner.h"
#include "harness/exp/sweep.h"
#include "test.h"

/* Parse text; returns 0/-1 and leaves the message in e. */
static int parse(const char *text, struct exp_config *c, struct eb_err *e)
{
    memset(e, 0, sizeof *e);
    return exp_config_parse(text, strlen(text), "x.json", c, e);
}

/* The config must fail with exactly this message. */
static void expect_error(const char *text, const char *msg)
{
    struct exp_config c;
    struct eb_err e;
    int rc = parse(text, &c, &e);
    CHECK_MSG(rc == -1, "accepted: %s", text);
    CHECK_STR(e.msg, msg);
    exp_config_free(&c);
}

#define BASE "\"models\": \"nosuch-model\", \"datasets\": \"synthetic:3\""

static void test_errors_have_paths(void)
{
    expect_error("{" BASE ", \"policies\": [\"fullkv\", \"rkv\", {\"name\": \"rkv\", \"budget\": \"x\"}]}",
                 "x.json: $.policies[2].budget: expected an integer or a list of integers");
    expect_error("{" BASE ", \"policies\": [{\"name\": \"rkv\", \"budget\": [64, 1.5]}]}",
                 "x.json: $.policies[0].budget[1]: expected an integer");
    expect_error("{" BASE ", \"budgets\": [64, 64]}", "x.json: $.budgets[1]: duplicate value");
    expect_error("{" BASE ", \"bugdets\": [64]}",
                 "x.json: $.bugdets: unknown key (known: name description mode models datasets "
                 "prompt policies budgets batch_sizes batching sampling max_new_tokens "
                 "max_total_tokens max_kv_bytes seed steer_vector weights device kv_type)");
    expect_error("{\"models\": \"m\", \"datasets\": [{\"name\": \"gsm8k\", \"limt\": 5}]}",
                 "x.json: $.datasets[0].limt: unknown key (known: name limit offset)");
    expect_error("{\"models\": \"m\", \"datasets\": [\"gsm8k\", {\"name\": \"gsm8k\", \"limit\": 0}]}",
                 "x.json: $.datasets[1].limit: expected an integer in [1, 1000000000], got 0");
    expect_error("{\"datasets\": \"gsm8k\"}", "x.json: $: missing key \"models\"");
    expect_error("{\"models\": [], \"datasets\": \"gsm8k\"}", "x.json: $.models: expected a non-empty list");
    expect_error("{\"models\": [\"a\", 3], \"datasets\": \"gsm8k\"}", "x.json: $.models[1]: expected a string");
    expect_error("{" BASE ", \"batching\": [\"ragged\", \"paddded\"]}",
                 "x.json: $.batching[1]: expected \"padded\", \"grouped\", \"ragged\" or \"continuous\"");
    expect_error("{" BASE ", \"sampling\": {\"temperature\": 0.6, \"top_p\": 1.5}}",
                 "x.json: $.sampling.top_p: expected a number in (0, 1]");
    expect_error("{" BASE ", \"sampling\": {\"n_samples\": 4}}",
                 "x.json: $.sampling.n_samples: greedy decoding gives one sample per problem");
    expect_error("{" BASE ", \"sampling\": {\"temprature\": 0.6}}",
                 "x.json: $.sampling.temprature: unknown key (known: greedy temperature top_p top_k "
                 "n_samples seed)");
    expect_error("{" BASE ", \"prompt\": \"r2\"}",
                 "x.json: $.prompt: unknown template \"r2\" (known: r1-boxed chatml-boxed qwen3-boxed qwen2.5-boxed seal chatml-seal rkv)");
    expect_error("{" BASE ", \"max_new_tokens\": 0}",
                 "x.json: $.max_new_tokens: expected an integer in [1, 16777216], got 0");
    expect_error("{" BASE ", \"policies\": [{\"budget\": 5}]}", "x.json: $.policies[0].name: missing");
    expect_error("{" BASE ", \"policies\": [{\"name\": \"rkv\", \"lambda\": [0.1, {}]}]}",
                 "x.json: $.policies[0].lambda[1]: expected a number, string or boolean");
    expect_error("{" BASE ", \"mode\": \"fidelity\", \"sampling\": {\"temperature\": 0.6}}",
                 "x.json: $.sampling: fidelity mode replays greedy FullKV traces; use \"greedy\"");
    expect_error("[1, 2]", "x.json: $: expected a JSON object");
    /* a key given twice would silently lose a value */
    expect_error("{" BASE ", \"budgets\": [64], \"budgets\": [128]}", "x.json: $.budgets: duplicate key");
    expect_error("{" BASE ", \"policies\": [\"fullkv\", {\"name\": \"rkv\", \"lambda\": 0.1, \"lambda\": 0.2}]}",
                 "x.json: $.policies[1].lambda: duplicate key");
    expect_error("{\n  \"models\": \"m\",\n  \"datasets\": [\n}", "x.json:4:1: not valid JSON");
    /* unknown dataset names are caught with their path too */
    struct exp_config c;
    struct eb_err e;
    CHECK(parse("{\"models\": \"m\", \"datasets\": [\"gsm8k\", \"nosuch\"]}", &c, &e) == -1);
    CHECK_MSG(strncmp(e.msg, "x.json: $.datasets[1]: ", 23) == 0, "%s", e.msg);
    exp_config_free(&c);
}

static void test_defaults(void)
{
    struct exp_config c;
    struct eb_err e;
    CHECK(parse("{" BASE "}", &c, &e) == 0);
    CHECK_STR(c.name, "x");
    CHECK(c.mode == EXP_MODE_GENERATE);
    CHECK(c.n_models == 1 && c.n_datasets == 1 && c.datasets[0].limit == -1);
    CHECK_STR(c.prompt->name, "r1-boxed");
    CHECK(c.n_policies == 1 && !strcmp(c.policies[0].name, "fullkv"));
    CHECK(c.n_batch_sizes == 1 && c.batch_sizes[0] == 1);
    CHECK(c.n_batchings == 1 && c.batchings[0] == BATCHING_RAGGED);
    CHECK(c.sampling.greedy == 1 && c.sampling.n_samples == 1);
    CHECK(c.max_new_tokens == 1024 && c.max_total_tokens == 0 && c.max_kv_bytes == 0);
    exp_config_free(&c);

    CHECK(parse("{" BASE ", \"sampling\": {\"temperature\": 0.6, \"top_p\": 0.95, \"n_samples\": 8, "
                "\"seed\": 42}}", &c, &e) == 0);
    CHECK(c.sampling.greedy == 0 && c.sampling.n_samples == 8 && c.sampling.seed == 42);
    CHECK_NEAR(c.sampling.top_p, 0.95, 1e-12);
    exp_config_free(&c);
}

static void test_prompts(void)
{
    const struct prompt_template *t = prompt_template_find("r1-boxed");
    CHECK(t && !strcmp(t->chat, "r1"));
    char *u = t ? prompt_user_text(t, "What is 2+3?") : NULL;
    CHECK_STR(u, "What is 2+3?\nPlease reason step by step, and put your final answer within \\boxed{}.");
    free(u);
    t = prompt_template_find("seal");
    u = t ? prompt_user_text(t, "Q?") : NULL;
    CHECK_STR(u, "Answer the following questions. You should think step-by-step and put your final "
                 "answer within \\boxed{}.\nQuestion: Q?");
    free(u);
    t = prompt_template_find("rkv");
    CHECK(t && t->add_bos == 1 && !strcmp(t->chat, "raw"));
    CHECK(prompt_template_find("chatml-boxed") != NULL);
}

/* 3 policies, sweep counts per the rules in sweep.h. */
static const char *SWEEP_CFG =
    "{\"models\": \"nosuch-model\", \"datasets\": [\"synthetic:3\", {\"name\": \"synthetic:5\", \"limit\": 2}],"
    " \"policies\": [\"fullkv\", {\"name\": \"rkv\", \"lambda\": [0.1, 0.2]},"
    "  {\"name\": \"streamingllm\", \"budget\": 32}],"
    " \"budgets\": [64, 128], \"batch_sizes\": [1, 4], \"batching\": [\"ragged\", \"grouped\"],"
    " \"max_new_tokens\": 64}";

static void test_sweep_counts(void)
{
    struct exp_config c;
    struct eb_err e;
    struct sweep s;
    CHECK(parse(SWEEP_CFG, &c, &e) == 0);
    CHECK(sweep_expand(&c, NULL, &s, &e) == 0);
    /* per dataset: fullkv 1 (bs1) + 2 (bs4 x 2 modes) = 3; rkv 2 params x 2 budgets x 3 = 12;
     * streamingllm 1 budget x 3 = 3  ->  18, times 2 datasets */
    CHECK_MSG(s.n == 36, "%d points", s.n);
    int fullkv = 0, bs1_grouped = 0, budget32 = 0;
    for (int i = 0; i < s.n; i++) {
        const struct point *p = &s.pts[i];
        CHECK(p->index == i);
        if (!strcmp(p->policy->name, "fullkv")) { fullkv++; CHECK(p->budget == POLICY_NO_BUDGET); }
        if (p->batch_size == 1 && p->batching != BATCHING_RAGGED) bs1_grouped++;
        if (p->budget == 32) { budget32++; CHECK(!strcmp(p->policy->name, "streamingllm")); }
        CHECK_STR(p->model_id, "nosuch-model@absent");
        for (int j = 0; j < i; j++) CHECK(strcmp(p->run_key, s.pts[j].run_key) != 0);
    }
    CHECK(fullkv == 6 && bs1_grouped == 0 && budget32 == 6);
    CHECK_STR(s.pts[3].params_json, "{\"lambda\":0.1}");
    CHECK(s.pts[3].data_limit == -1 && s.pts[18].data_limit == 2);
    char label[512];
    sweep_point_label(&s.pts[18 + 3], label, sizeof label);
    CHECK_STR(label, "nosuch-model synthetic:5[0:2] rkv{\"lambda\":0.1} B=64 bs=1 ragged");
    sweep_free(&s);

    /* fidelity: no fullkv points */
    exp_config_free(&c);
    CHECK(parse("{\"models\": \"m\", \"datasets\": \"synthetic:2\", \"mode\": \"fidelity\", "
                "\"policies\": [\"fullkv\", \"rkv\"], \"budgets\": [64, 128]}", &c, &e) == 0);
    CHECK(sweep_expand(&c, NULL, &s, &e) == 0);
    CHECK(s.n == 2);
    sweep_free(&s);
    exp_config_free(&c);
    CHECK(parse("{\"models\": \"m\", \"datasets\": \"synthetic:2\", \"mode\": \"fidelity\"}", &c, &e) == 0);
    CHECK(sweep_expand(&c, NULL, &s, &e) == -1);
    exp_config_free(&c);
}

static void test_policy_check_path(void)
{
    struct exp_config c;
    struct eb_err e;
    struct sweep s;
    CHECK(parse("{" BASE ", \"policies\": [\"fullkv\", \"no-such-policy\"]}", &c, &e) == 0);
    CHECK(sweep_expand(&c, NULL, &s, &e) == -1);
    CHECK_MSG(strncmp(e.msg, "x.json: $.policies[1]: ", 23) == 0, "%s", e.msg);
    exp_config_free(&c);
    CHECK(parse("{" BASE ", \"policies\": [{\"name\": \"fullkv\", \"no_such_param\": 3}]}", &c, &e) == 0);
    CHECK(sweep_expand(&c, NULL, &s, &e) == -1);
    CHECK_MSG(strncmp(e.msg, "x.json: $.policies[0]: ", 23) == 0, "%s", e.msg);
    exp_config_free(&c);
}

/* Keys of the first point of a config text. */
static int first_key_in(const char *text, const char *data_dir, char key[RUNKEY_HEX_LEN + 1])
{
    struct exp_config c;
    struct eb_err e;
    struct sweep s;
    if (parse(text, &c, &e)) { fprintf(stderr, "  %s\n", e.msg); return -1; }
    if (sweep_expand(&c, data_dir, &s, &e)) { exp_config_free(&c); return -1; }
    memcpy(key, s.pts[0].run_key, RUNKEY_HEX_LEN + 1);
    sweep_free(&s);
    exp_config_free(&c);
    return 0;
}

static int first_key(const char *text, char key[RUNKEY_HEX_LEN + 1])
{
    return first_key_in(text, NULL, key);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A data directory of one's own lists its files in SHA256SUMS (datasets/checksum.c). */
static void write_dataset(const char *dir, const char *name, const char *text)
{
    char path[512], hex[65];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, text);
    sha256_hex(text, strlen(text), hex);
    snprintf(path, sizeof path, "%s/SHA256SUMS", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "%s  %s\n", hex, name);
    fclose(f);
}

#define GSM_LINE(i, q, a) "{\"id\": \"g" #i "\", \"question\": \"" q "\", \"answer\": \"#### " a "\"}\n"

/* The key carries the contents of the dataset slice: an edited line inside
 * the slice makes a new key, one outside it does not. */
static void test_run_key_data(void)
{
    char dir[] = "/tmp/eb_test_config_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/gsm8k_test.jsonl", dir);
    const char *cfg = "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"gsm8k\", \"limit\": 2},"
                      " \"policies\": \"fullkv\"}";
    char k0[65], k1[65], k2[65], h[65];
    write_dataset(dir, "gsm8k_test.jsonl", GSM_LINE(0, "1+1?", "2") GSM_LINE(1, "2+2?", "4") GSM_LINE(2, "3+3?", "6"));
    CHECK(first_key_in(cfg, dir, k0) == 0);
    struct eb_err e = {0};
    CHECK(sweep_data_hash("gsm8k", dir, 0, 2, h, &e) == 0);
    CHECK(strcmp(h, "absent") != 0 && strlen(h) == 64);
    /* a line after the slice: same key */
    write_dataset(dir, "gsm8k_test.jsonl", GSM_LINE(0, "1+1?", "2") GSM_LINE(1, "2+2?", "4") GSM_LINE(2, "3+3?", "7"));
    CHECK(first_key_in(cfg, dir, k1) == 0);
    CHECK_STR(k0, k1);
    /* the second line's answer: a new key */
    write_dataset(dir, "gsm8k_test.jsonl", GSM_LINE(0, "1+1?", "2") GSM_LINE(1, "2+2?", "5") GSM_LINE(2, "3+3?", "7"));
    CHECK(first_key_in(cfg, dir, k2) == 0);
    CHECK_MSG(strcmp(k0, k2) != 0, "an edited dataset line kept the key %s", k0);
    /* absent data (a dry run) still expands, with its own key */
    remove(path);
    snprintf(path, sizeof path, "%s/SHA256SUMS", dir);
    remove(path);
    CHECK(sweep_data_hash("gsm8k", dir, 0, 2, h, &e) == 0);
    CHECK_STR(h, "absent");
    rmdir(dir);
}

static void test_run_key_stability(void)
{
    char a[65], b[65], x[65];
    const char *base = "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 2},"
                       " \"policies\": {\"name\": \"rkv\", \"lambda\": 0.1, \"window\": 8},"
                       " \"budgets\": 64, \"max_new_tokens\": 64}";
    CHECK(first_key(base, a) == 0);
    /* the same config in another key order and spacing */
    CHECK(first_key("{ \"max_new_tokens\" : 64 , \"budgets\": [64], \"policies\": [{\"window\": 8, "
                    "\"lambda\": 0.1, \"name\": \"rkv\"}], \"datasets\": [{\"limit\": 2, \"name\": "
                    "\"synthetic:3\"}], \"models\": [\"nosuch-model\"], \"name\": \"other\"}", b) == 0);
    CHECK_STR(a, b);
    /* No pinned value here: the key carries the sources' hash (code_hash.h),
     * so it changes with every source change, as it must.  test_runkey pins
     * the serialisation itself. */
    /* every ingredient changes the key */
    const char *variants[] = {
        "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 2}, \"policies\": {\"name\": \"rkv\", \"lambda\": 0.1, \"window\": 8}, \"budgets\": 64, \"max_new_tokens\": 65}",
        "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 3}, \"policies\": {\"name\": \"rkv\", \"lambda\": 0.1, \"window\": 8}, \"budgets\": 64, \"max_new_tokens\": 64}",
        "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 2}, \"policies\": {\"name\": \"rkv\", \"lambda\": 0.2, \"window\": 8}, \"budgets\": 64, \"max_new_tokens\": 64}",
        "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 2}, \"policies\": {\"name\": \"rkv\", \"lambda\": 0.1, \"window\": 8}, \"budgets\": 65, \"max_new_tokens\": 64}",
        "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 2}, \"policies\": {\"name\": \"rkv\", \"lambda\": 0.1, \"window\": 8}, \"budgets\": 64, \"max_new_tokens\": 64, \"prompt\": \"seal\"}",
        "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 2}, \"policies\": {\"name\": \"rkv\", \"lambda\": 0.1, \"window\": 8}, \"budgets\": 64, \"max_new_tokens\": 64, \"max_kv_bytes\": 100000}",
        "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 2}, \"policies\": {\"name\": \"rkv\", \"lambda\": 0.1, \"window\": 8}, \"budgets\": 64, \"max_new_tokens\": 64, \"batch_sizes\": 2}",
        "{\"models\": \"nosuch-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 2}, \"policies\": {\"name\": \"rkv\", \"lambda\": 0.1, \"window\": 8}, \"budgets\": 64, \"max_new_tokens\": 64, \"sampling\": {\"temperature\": 0.6}}",
        "{\"models\": \"other-model\", \"datasets\": {\"name\": \"synthetic:3\", \"limit\": 2}, \"policies\": {\"name\": \"rkv\", \"lambda\": 0.1, \"window\": 8}, \"budgets\": 64, \"max_new_tokens\": 64}",
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        CHECK(first_key(variants[i], x) == 0);
        CHECK_MSG(strcmp(a, x) != 0, "variant %zu has the same key", i);
    }
}

/* Every shipped config parses and expands (with the real policy check when
 * the policy exists in this build). */
static void test_shipped_configs(void)
{
    DIR *d = opendir("experiments");
    if (!d) SKIP("no experiments/ directory");
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
        char path[512];
        snprintf(path, sizeof path, "experiments/%s", de->d_name);
        struct exp_config c;
        struct eb_err e = {0};
        int rc = exp_config_load(path, &c, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        if (rc == 0) {
            struct sweep s;
            rc = sweep_expand(&c, NULL, &s, &e);
            CHECK_MSG(rc == 0 && s.n > 0, "%s: %s", path, e.msg);
            if (rc == 0) sweep_free(&s);
            exp_config_free(&c);
        }
        n++;
    }
    closedir(d);
    CHECK(n >= 7);

    /* a paper config names its model and how to get it when the file is absent */
    struct exp_config c;
    struct eb_err e = {0};
    CHECK(exp_config_load("aime24_budget_sweep", &c, &e) == 0);
    if (exp_config_check_resources(&c, NULL, &e) == 0) {
        exp_config_free(&c);
        SKIP("the R1-Qwen-7B model is present");
    }
    CHECK_MSG(strstr(e.msg, "$.models[0]: model \"deepseek-r1-distill-qwen-7b\"") != NULL, "%s", e.msg);
    CHECK_MSG(strstr(e.msg, "models/DeepSeek-R1-Distill-Qwen-7B") != NULL, "%s", e.msg);
    exp_config_free(&c);
    CHECK(exp_config_load("no_such_config", &c, &e) == -1);
    CHECK_STR(e.msg, "experiments/no_such_config.json: no such config (the names are the files in experiments/)");
}

int main(void)
{
    RUN(test_errors_have_paths);
    RUN(test_defaults);
    RUN(test_prompts);
    RUN(test_sweep_counts);
    RUN(test_policy_check_path);
    RUN(test_run_key_stability);
    RUN(test_run_key_data);
    RUN(test_shipped_configs);
    return test_summary("config");
}
