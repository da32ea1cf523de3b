/* test_runner.c - the runner end to end on the tiny model fixtures (they have
 * no tokenizer, so prompts go in as token ids): runs and samples in the
 * database, accuracy consistent with the samples, batching modes giving the
 * same greedy traces, a rerun skipping everything, 'oom' points (max_kv_bytes,
 * the memory estimate, an allocation failing at KV table bind), SIGINT-style stop, fidelity mode, no sentence
 * rows for policies without sentences; a version-1 database migrated; then
 * the same path from a dataset with SmolLM2 when its file is present, where
 * fullkv-pss writes one sentence row per sentence of each sample. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/exp/code_hash.h"
#include "harness/exp/config.h"
#include "harness/exp/runner.h"
#include "harness/store/store.h"
#include "harness/exp/sweep.h"
#include "test.h"
#include "test_util.h"

#define TINY "tests/fixtures/models/tiny-llama"
#define SMOL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* Five prompts of 3..17 tokens (ids 3..255; 0-2 are special in the fixture). */
enum { N_ITEMS = 5 };
static int prompt_ids[N_ITEMS][20];
static struct runner_item items[N_ITEMS];
static const int prompt_len[N_ITEMS] = {9, 3, 17, 6, 12};

static void make_items(void)
{
    uint32_t x = 12345;
    for (int i = 0; i < N_ITEMS; i++) {
        for (int t = 0; t < prompt_len[i]; t++) {
            x = x * 1103515245u + 12345u;
            prompt_ids[i][t] = 3 + (int)((x >> 16) % 253);
        }
        items[i].id = NULL;
        items[i].reference = i % 2 ? "7" : "42";
        items[i].prompt = prompt_ids[i];
        items[i].n_prompt = prompt_len[i];
    }
}

static char db_path[256];

static void fresh_db(void)
{
    snprintf(db_path, sizeof db_path, "/tmp/eb_test_runner_%d.db", (int)getpid());
    char p[300];
    unlink(db_path);
    snprintf(p, sizeof p, "%s-wal", db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", db_path);
    unlink(p);
}

/* First column of the first row as text into ctx (char[8192]). */
static int text_cell(void *ctx, int n, const char *const *names, const char *const *vals)
{
    (void)names;
    snprintf(ctx, 16384, "%s", n > 0 && vals[0] ? vals[0] : "");
    return 1;
}

struct stop_ctx {
    volatile sig_atomic_t *stop;
    int batches;
};

static void stop_after_first_batch(void *ctx, const struct runner_progress *p)
{
    struct stop_ctx *s = ctx;
    if (!strcmp(p->event, "batch") && ++s->batches == 1) *s->stop = 1;
}

/* Parse + expand + run a config over the tiny items into db_path. */
static int sweep_tiny(const char *json, const struct runner_opts *base, struct sweep_summary *sum,
                      int *n_points)
{
    struct exp_config c;
    struct sweep s;
    struct store *st = NULL;
    struct runner *r = NULL;
    struct eb_err e = {0};
    int rc = -1;
    memset(&s, 0, sizeof s);
    if (exp_config_parse(json, strlen(json), "test.json", &c, &e) ||
        sweep_expand(&c, NULL, &s, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        exp_config_free(&c);
        return -1;
    }
    struct runner_opts o;
    if (base) o = *base;
    else memset(&o, 0, sizeof o);
    o.threads = 1;
    if (!o.items) { o.items = items; o.n_items = N_ITEMS; }
    int64_t exp_id = 0;
    if (store_open(db_path, &st, &e) ||
        store_begin_experiment(st, c.name, c.json, code_version(), &exp_id, &e) ||
        runner_create(&o, &r, &e) || runner_sweep(r, &s, st, exp_id, sum, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        goto done;
    }
    if (n_points) *n_points = s.n;
    rc = 0;
done:
    runner_free(r);
    store_close(st);
    sweep_free(&s);
    exp_config_free(&c);
    return rc;
}

static const char *MAIN_CFG =
    "{\"name\": \"tiny\", \"models\": \"" TINY "\", \"datasets\": \"synthetic:5\","
    " \"policies\": [\"fullkv\", {\"name\": \"streamingllm\", \"budget\": 10, \"divide_length\": 4}],"
    " \"batch_sizes\": [1, 3], \"batching\": [\"ragged\", \"continuous\", \"grouped\", \"padded\"],"
    " \"max_new_tokens\": 24}";

static void test_sweep_store_resume(void)
{
    make_items();
    fresh_db();
    struct sweep_summary sum;
    int n = 0;
    CHECK(sweep_tiny(MAIN_CFG, NULL, &sum, &n) == 0);
    /* per policy: bs1 (one point) + bs3 x 4 modes = 5 */
    CHECK_MSG(n == 10, "%d points", n);
    CHECK(sum.ok == 10 && sum.skipped == 0 && sum.oom == 0 && sum.errors == 0 && !sum.interrupted);

    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_path, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query_number(st, "select count(*) from runs where status = 'ok'") == 10);
    CHECK(store_query_number(st, "select count(*) from samples") == 10 * N_ITEMS);
    CHECK(store_query_number(st, "select count(*) from runs where n_samples != 5") == 0);
    /* accuracy is the mean of the samples' correct */
    CHECK(store_query_number(st, "select count(*) from runs r where abs(r.accuracy - (select avg(correct) from "
                "samples s where s.run_id = r.id)) > 1e-12") == 0);
    /* sample_idx names the item, whatever order the batching ran them in */
    CHECK(store_query_number(st, "select count(*) from samples where prompt_tokens != case sample_idx when 0 then 9 "
                "when 1 then 3 when 2 then 17 when 3 then 6 else 12 end") == 0);
    /* greedy traces do not depend on batch size or mode (per-sequence caches;
     * left pads are masked), except where pads change what an evicting
     * policy keeps: they count against its budget */
    CHECK(store_query_number(st, "select max(c) from (select count(distinct s.text) as c from samples s join runs r "
                "on r.id = s.run_id where r.policy = 'fullkv' or r.batching not in "
                "('padded', 'grouped') or r.batch_size = 1 group by r.policy, s.sample_idx)") == 1);
    CHECK(store_query_number(st, "select count(*) from samples where gen_tokens > 24 or gen_tokens < 0") == 0);
    CHECK(store_query_number(st, "select count(*) from samples where finished = 0 and gen_tokens != 24") == 0);
    CHECK(store_query_number(st, "select count(*) from samples where ttft_ms is null or peak_kv_bytes is null") == 0);
    /* streamingllm (budget 10, compress every 4) compresses every sequence; fullkv never */
    CHECK(store_query_number(st, "select min(n_compressions) from samples s join runs r on r.id = s.run_id "
                "where r.policy = 'streamingllm'") >= 1);
    CHECK(store_query_number(st, "select max(n_compressions) from samples s join runs r on r.id = s.run_id "
                "where r.policy = 'fullkv'") == 0);
    CHECK(store_query_number(st, "select count(*) from samples s join runs r on r.id = s.run_id where "
                "r.policy = 'streamingllm' and r.batching not in ('padded', 'grouped') and "
                "s.peak_kv_bytes > s.prompt_tokens * 512 + 512 "
                "and s.peak_kv_bytes > (10 + 4) * 512") == 0);
    /* the pads are in the cache: a padded fullkv sample's peak holds its
     * prompt, its tokens (the last one sampled, EOS or not, is never fed)
     * and its pads: 8, 14, 0 in the first batch
     * of 3 (prompts 9, 3, 17), 6, 0 in the second (6, 12) */
    CHECK(store_query_number(st, "select count(*) from samples s join runs r on r.id = s.run_id where "
                "r.policy = 'fullkv' and r.batching = 'padded' and r.batch_size = 3 and "
                "s.peak_kv_bytes / 512 - s.prompt_tokens - s.gen_tokens - s.finished + 1 != "
                "case s.sample_idx when 0 then 8 when 1 then 14 when 3 then 6 else 0 end") == 0);
    /* padded/grouped record their pad tokens; the first padded batch of 3
     * (prompts 9, 3, 17) and the second (6, 12) hold 8+14 + 6 = 28 pads */
    CHECK(store_query_number(st, "select json_extract(params_json, '$.pad_tokens') from runs where batching = "
                "'padded' and policy = 'fullkv'") == 28);
    CHECK(store_query_number(st, "select json_extract(params_json, '$.pad_tokens') from runs where batching = "
                "'grouped' and policy = 'fullkv'") == 6 + 3 + 5); /* (3 6 9) (12 17) */
    CHECK(store_query_number(st, "select count(*) from runs where tokens_per_s is null or wall_s <= 0 or "
                "gen_tokens != (select sum(gen_tokens) from samples where run_id = runs.id)") == 0);
    /* fullkv and streamingllm keep no sentences */
    CHECK(store_query_number(st, "select count(*) from sentences") == 0);
    CHECK(store_query_number(st, "select count(*) from samples where n_sentences is not null") == 0);
    store_close(st);

    /* a rerun skips every point */
    CHECK(sweep_tiny(MAIN_CFG, NULL, &sum, &n) == 0);
    CHECK(sum.skipped == 10 && sum.ok == 0);
    CHECK(store_open_readonly(db_path, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query_number(st, "select count(*) from runs") == 10);
    CHECK(store_query_number(st, "select count(*) from samples") == 10 * N_ITEMS);
    CHECK(store_query_number(st, "select count(*) from v_accuracy_by_budget") == 10);
    store_close(st);
}

static void test_oom(void)
{
    make_items();
    fresh_db();
    /* 512 bytes per token: one sequence of 6 + 24 tokens fits 16000 bytes,
     * three of them at once do not. */
    static int six[3][6] = {{10, 11, 12, 13, 14, 15}, {20, 21, 22, 23, 24, 25}, {30, 31, 32, 33, 34, 35}};
    struct runner_item its[3];
    for (int i = 0; i < 3; i++) its[i] = (struct runner_item){NULL, "1", six[i], 6};
    struct runner_opts o;
    memset(&o, 0, sizeof o);
    o.items = its;
    o.n_items = 3;
    struct sweep_summary sum;
    CHECK(sweep_tiny("{\"models\": \"" TINY "\", \"datasets\": \"synthetic:3\", \"batch_sizes\": [3, 1],"
                     " \"max_new_tokens\": 24, \"max_kv_bytes\": 16000}", &o, &sum, NULL) == 0);
    CHECK(sum.oom == 1 && sum.ok == 1);
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_path, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query_number(st, "select count(*) from runs where status = 'oom' and batch_size = 3 and n_samples = 0 "
                "and error like '%max_kv_bytes%'") == 1);
    /* the oom row records the KV bytes the batch reached: past the cap */
    CHECK(store_query_number(st, "select count(*) from runs where status = 'oom' and batch_size = 3 "
                "and peak_kv_bytes > 16000") == 1);
    CHECK(store_query_number(st, "select count(*) from runs where status = 'ok' and batch_size = 1 and "
                "peak_kv_bytes <= 16000") == 1);
    CHECK(store_query_number(st, "select count(*) from samples s join runs r on r.id = s.run_id where r.status = 'oom'") == 0);
    CHECK(store_query_number(st, "select count(*) from v_throughput_by_batch where status = 'oom'") == 1);
    store_close(st);

    /* the memory estimate not fitting is 'oom' as well; a rerun does not retry it */
    fresh_db();
    o.mem_limit = 1;
    CHECK(sweep_tiny("{\"models\": \"" TINY "\", \"datasets\": \"synthetic:3\", \"max_new_tokens\": 8}",
                     &o, &sum, NULL) == 0);
    CHECK(sum.oom == 1 && sum.ok == 0);
    CHECK(sweep_tiny("{\"models\": \"" TINY "\", \"datasets\": \"synthetic:3\", \"max_new_tokens\": 8}",
                     &o, &sum, NULL) == 0);
    CHECK(sum.skipped == 1);
    CHECK(store_open_readonly(db_path, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query_number(st, "select count(*) from runs where status = 'oom' and error like '%estimated%'") == 1);
    store_close(st);
}

/* An allocation failing when the backend's KV table binds a cache (the CPU
 * backend's EVICTBENCH_CPU_FAIL_BIND: its second bind) is an 'oom' result as
 * any other out-of-memory is: one run row, status oom, no samples (the first
 * sequence had finished), and the next point runs. */
static void test_oom_at_bind(void)
{
    make_items();
    fresh_db();
    struct sweep_summary sum;
    setenv("EVICTBENCH_CPU_FAIL_BIND", "2", 1); /* read when the runner creates its backend */
    int rc = sweep_tiny("{\"models\": \"" TINY "\", \"datasets\": \"synthetic:5\","
                        " \"batch_sizes\": [1, 3], \"max_new_tokens\": 8}", NULL, &sum, NULL);
    unsetenv("EVICTBENCH_CPU_FAIL_BIND");
    CHECK(rc == 0);
    CHECK_MSG(sum.oom == 1 && sum.ok == 1 && sum.errors == 0, "oom %d ok %d errors %d", sum.oom,
              sum.ok, sum.errors);
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_path, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query_number(st, "select count(*) from runs") == 2);
    CHECK(store_query_number(st, "select count(*) from runs where status = 'oom' and n_samples = 0 "
                "and error like '%out of memory binding the cache%'") == 1);
    CHECK(store_query_number(st, "select count(*) from samples s join runs r on r.id = s.run_id "
                "where r.status = 'oom'") == 0);
    CHECK(store_query_number(st, "select count(*) from samples s join runs r on r.id = s.run_id "
                "where r.status = 'ok'") == 5);
    store_close(st);
}

static void test_stop_after_batch(void)
{
    make_items();
    fresh_db();
    volatile sig_atomic_t stop = 0;
    struct stop_ctx sc = {&stop, 0};
    struct runner_opts o;
    memset(&o, 0, sizeof o);
    o.stop = &stop;
    o.progress = stop_after_first_batch;
    o.progress_ctx = &sc;
    struct sweep_summary sum;
    CHECK(sweep_tiny("{\"models\": \"" TINY "\", \"datasets\": \"synthetic:5\", \"batch_sizes\": 2,"
                     " \"policies\": [\"fullkv\", {\"name\": \"streamingllm\", \"budget\": 10}],"
                     " \"max_new_tokens\": 8}", &o, &sum, NULL) == 0);
    CHECK(sum.interrupted == 1 && sum.ok == 0);
    CHECK(sc.batches == 1);
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_path, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query_number(st, "select count(*) from runs") == 0);
    CHECK(store_query_number(st, "select count(*) from samples") == 0);
    store_close(st);
}

static void test_fidelity(void)
{
    make_items();
    fresh_db();
    struct sweep_summary sum;
    /* a budget nothing reaches: the replay is the FullKV trace exactly */
    CHECK(sweep_tiny("{\"models\": \"" TINY "\", \"datasets\": \"synthetic:5\", \"mode\": \"fidelity\","
                     " \"policies\": [\"fullkv\", {\"name\": \"streamingllm\", \"budget\": [10, 1000],"
                     " \"divide_length\": 4}], \"max_new_tokens\": 24}", NULL, &sum, NULL) == 0);
    CHECK(sum.ok == 2);
    /* the generate-mode FullKV traces of the same prompts, for comparison */
    CHECK(sweep_tiny("{\"models\": \"" TINY "\", \"datasets\": \"synthetic:5\", \"max_new_tokens\": 24}",
                     NULL, &sum, NULL) == 0);
    CHECK(sum.ok == 1);
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_path, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query_number(st, "select count(*) from samples s join runs r on r.id = s.run_id where r.budget = 1000 "
                "and (s.kl_mean != 0 or s.top1_agree != 1 or s.first_divergence is not null)") == 0);
    CHECK(store_query_number(st, "select count(*) from samples s join runs r on r.id = s.run_id where r.budget = 1000") == 5);
    CHECK(store_query_number(st, "select count(*) from samples s join runs r on r.id = s.run_id where r.budget = 10 and "
                "(s.kl_mean < 0 or s.top1_agree < 0 or s.top1_agree > 1)") == 0);
    CHECK(store_query_number(st, "select sum(n_compressions) from samples s join runs r on r.id = s.run_id "
                "where r.budget = 10") > 0);
    /* the replayed trace is the free-running FullKV greedy trace */
    CHECK(store_query_number(st, "select count(*) from samples f join runs rf on rf.id = f.run_id join samples g on "
                "g.sample_idx = f.sample_idx join runs rg on rg.id = g.run_id where rf.budget is not null "
                "and rg.policy = 'fullkv' and (f.text != g.text or f.gen_tokens != g.gen_tokens)") == 0);
    /* divergence: either never (agreement 1) or at a step before the end */
    CHECK(store_query_number(st, "select count(*) from samples where kl_mean is not null and ((first_divergence is "
                "null) != (top1_agree = 1) or first_divergence > gen_tokens)") == 0);
    CHECK(store_query_number(st, "select count(*) from v_fidelity") == 2);
    store_close(st);
}

/* The dataset path: real prompts through the chat template and tokenizer. */
static void test_smollm2_dataset(void)
{
    if (access(SMOL, R_OK) != 0) SKIP("%s absent (make deps downloads it)", SMOL);
    fresh_db();
    struct runner_opts o;
    memset(&o, 0, sizeof o);
    struct runner_item none;
    memset(&none, 0, sizeof none);
    const char *cfg = "{\"models\": \"smollm2-135m\", \"datasets\": \"synthetic:2\", \"prompt\": "
                      "\"chatml-boxed\", \"batch_sizes\": 2, \"max_new_tokens\": 12, "
                      "\"policies\": [\"fullkv\", \"fullkv-pss\"]}";
    struct exp_config c;
    struct sweep s;
    struct store *st = NULL;
    struct runner *r = NULL;
    struct eb_err e = {0};
    struct sweep_summary sum;
    int64_t exp_id;
    CHECK(exp_config_parse(cfg, strlen(cfg), "smol.json", &c, &e) == 0);
    CHECK(sweep_expand(&c, NULL, &s, &e) == 0);
    o.threads = 1;
    CHECK(store_open(db_path, &st, &e) == 0);
    CHECK(store_begin_experiment(st, c.name, c.json, code_version(), &exp_id, &e) == 0);
    CHECK(runner_create(&o, &r, &e) == 0);
    int rc = runner_sweep(r, &s, st, exp_id, &sum, &e);
    CHECK_MSG(rc == 0 && sum.ok == 2, "%s", e.msg);
    CHECK(store_query_number(st, "select count(*) from samples where length(text) > 0 and prompt_tokens > 40 and "
                "ref_answer is not null and item_id is not null") == 4);
    CHECK(store_query_number(st, "select count(*) from samples where think_tokens is not null") == 0);
    /* fullkv-pss: one row per sentence (the chat template's lines included),
     * n_nonexec of them 'check', spans ordered and disjoint; fullkv: none */
    CHECK(store_query_number(st, "select count(*) from sentences x join runs r on r.id = x.run_id "
                "where r.policy = 'fullkv'") == 0);
    CHECK(store_query_number(st, "select min(n_sentences) from samples s join runs r on r.id = s.run_id "
                "where r.policy = 'fullkv-pss'") >= 2);
    CHECK(store_query_number(st, "select count(*) from samples s join runs r on r.id = s.run_id where "
                "r.policy = 'fullkv-pss' and (s.n_sentences != (select count(*) from sentences x "
                "where x.run_id = s.run_id and x.sample_idx = s.sample_idx) or s.n_nonexec != "
                "(select count(*) from sentences x where x.run_id = s.run_id and "
                "x.sample_idx = s.sample_idx and x.kind = 'check'))") == 0);
    CHECK(store_query_number(st, "select count(*) from sentences where sent_idx > 0 and start_tok <= (select "
                "p.end_tok from sentences p where p.run_id = sentences.run_id and p.sample_idx = "
                "sentences.sample_idx and p.sent_idx = sentences.sent_idx - 1)") == 0);
    CHECK(store_query_number(st, "select count(*) from sentences where end_tok < start_tok or evicted_step is "
                "not null or kind not in ('check', 'others') or max_sim > 1.0001") == 0);
    CHECK(store_query_number(st, "select count(*) from v_sentences where in_prompt = 1") >= 2);
    CHECK(runner_sweep(r, &s, st, exp_id, &sum, &e) == 0 && sum.skipped == 2);
    runner_free(r);
    store_close(st);
    sweep_free(&s);
    exp_config_free(&c);
}

/* Mark the open database as written by an older schema version, with
 * v_fullkv_ref as versions 1 to 3 had it (version 4 redefined it); closes it. */
static void make_older(struct store **st, int version)
{
    char sql[200];
    struct eb_err e = {0};
    snprintf(sql, sizeof sql, "DROP VIEW v_fullkv_ref; CREATE VIEW v_fullkv_ref AS SELECT model "
                              "FROM runs WHERE policy = 'fullkv'; PRAGMA user_version = %d",
             version);
    CHECK_MSG(store_query(*st, sql, NULL, NULL, &e) == 0, "%s", e.msg);
    store_close(*st);
    *st = NULL;
}

/* A version-1 database (this schema less what version 2 added: the sentence
 * views) is migrated when opened for writing and read as it is read-only; a
 * version this build does not know fails clearly. */
static void test_schema_migration(void)
{
    fresh_db();
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK(store_open(db_path, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query(st, "DROP VIEW v_sentence_kinds; DROP VIEW v_sentences", NULL, NULL,
                      &e) == 0);
    make_older(&st, 1);
    CHECK_MSG(store_open_readonly(db_path, &st, &e) == 0, "%s", e.msg);
    if (st) {
        CHECK(store_query_number(st, "PRAGMA user_version") == 1);
        CHECK(store_query_number(st, "select count(*) from runs") == 0);
        store_close(st);
        st = NULL;
    }
    CHECK_MSG(store_open(db_path, &st, &e) == 0, "%s", e.msg);
    if (!st) return;
    CHECK(store_query_number(st, "PRAGMA user_version") == STORE_SCHEMA_VERSION);
    CHECK(store_query_number(st, "select count(*) from sqlite_master where type = 'view' and "
                "name in ('v_sentences', 'v_sentence_kinds')") == 2);
    CHECK(store_query_number(st, "select count(*) from v_sentence_kinds") == 0);
    /* the migrated views are a new database's, text for text */
    char path2[300], old_sql[16384] = "", new_sql[16384] = "", p[320];
    const char *views = "select group_concat(sql, ';') from (select sql from sqlite_master "
                        "where name in ('v_sentences', 'v_sentence_kinds', 'v_fullkv_ref', "
                        "'v_throughput_by_batch', 'v_kv_by_budget') order by name)";
    CHECK(store_query(st, views, text_cell, old_sql, &e) == 0);
    snprintf(path2, sizeof path2, "%s.new", db_path);
    unlink(path2);
    struct store *st2 = NULL;
    CHECK(store_open(path2, &st2, &e) == 0);
    if (st2) CHECK(store_query(st2, views, text_cell, new_sql, &e) == 0);
    store_close(st2);
    CHECK(old_sql[0] && strcmp(old_sql, new_sql) == 0);
    unlink(path2);
    snprintf(p, sizeof p, "%s-wal", path2);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path2);
    unlink(p);
    /* A reader of the views (tables, plots) migrates a version-3 file it
     * may write: the views it reads are this build's. */
    make_older(&st, 3);
    CHECK_MSG(store_open_reader(db_path, &st, &e) == 0, "%s", e.msg);
    if (!st) return;
    CHECK(store_query_number(st, "PRAGMA user_version") == STORE_SCHEMA_VERSION);
    CHECK(store_query_number(st, "select count(*) from sqlite_master where name = "
                                 "'v_fullkv_ref' and sql like '%fullkv-pss%'") == 1);
    store_close(st);
    st = NULL;
    CHECK_MSG(store_open(db_path, &st, &e) == 0, "%s", e.msg);
    if (!st) return;
    CHECK(store_query(st, "PRAGMA user_version = 0", NULL, NULL, &e) == 0);
    store_close(st);
    st = NULL;
    CHECK(store_open(db_path, &st, &e) == -1);
    CHECK_MSG(strstr(e.msg, "not an evictbench results database") != NULL, "%s", e.msg);
}

static const char *SPLIT_CFG =
    "{\"name\": \"split\", \"models\": \"" TINY "\", \"datasets\": \"synthetic:5\","
    " \"policies\": [\"fullkv\", {\"name\": \"streamingllm\", \"budget\": [6, 8, 10, 12, 14],"
    " \"divide_length\": 4}], \"batch_sizes\": [1, 2], \"max_new_tokens\": 16}";

/* Two processes run the same sweep on one database at the same time: the
 * claims split the points, every point is computed exactly once, and both
 * end with the whole sweep recorded. */
static void test_two_processes_split(void)
{
    make_items();
    fresh_db();
    int fds[2][2];
    pid_t pid[2];
    for (int k = 0; k < 2; k++) {
        CHECK(pipe(fds[k]) == 0);
        pid[k] = fork();
        CHECK(pid[k] >= 0);
        if (pid[k] == 0) {
            struct sweep_summary sum;
            int n = 0;
            int rc = sweep_tiny(SPLIT_CFG, NULL, &sum, &n);
            int msg[4] = {rc, sum.ok, sum.skipped, n};
            if (write(fds[k][1], msg, sizeof msg) != (ssize_t)sizeof msg) _exit(2);
            _exit(0);
        }
        close(fds[k][1]);
    }
    int ok = 0, skipped = 0, n_points = 0;
    for (int k = 0; k < 2; k++) {
        int msg[4] = {-1, 0, 0, 0}, st = 0;
        CHECK(read(fds[k][0], msg, sizeof msg) == (ssize_t)sizeof msg);
        close(fds[k][0]);
        CHECK(waitpid(pid[k], &st, 0) == pid[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        CHECK_MSG(msg[0] == 0, "process %d failed", k);
        ok += msg[1];
        skipped += msg[2];
        n_points = msg[3];
        fprintf(stderr, "  process %d: %d run, %d skipped\n", k, msg[1], msg[2]);
    }
    CHECK(n_points == 12);
    /* every point computed once: by one process, skipped (done) by the other */
    CHECK_MSG(ok == n_points && skipped == n_points, "ok %d, skipped %d of %d", ok, skipped, n_points);
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_path, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query_number(st, "select count(*) from runs") == n_points);
    CHECK(store_query_number(st, "select count(distinct run_key) from runs") == n_points);
    CHECK(store_query_number(st, "select count(*) from claims") == 0);
    store_close(st);
}

/* A claim whose owner died (its lease runs out) is taken over: the sweep
 * waits for the lease, then computes the point itself. */
static void test_dead_owner_lease(void)
{
    make_items();
    fresh_db();
    struct exp_config c;
    struct sweep s;
    struct eb_err e = {0};
    CHECK(exp_config_parse(SPLIT_CFG, strlen(SPLIT_CFG), "t.json", &c, &e) == 0);
    CHECK(sweep_expand(&c, NULL, &s, &e) == 0);
    struct store *st = NULL;
    CHECK(store_open(db_path, &st, &e) == 0);
    if (!st) return;
    /* a process that claimed the third point for 1.5 s and was killed */
    CHECK(store_claim(st, s.pts[2].run_key, "otherhost:4242:1", 1.5, &e) == 1);
    CHECK(store_claim(st, s.pts[2].run_key, "me", 60, &e) == 0);   /* live: not ours */
    /* a process of this host that was killed while holding the fifth point
     * with a long lease: its claim is taken at once, not after 600 s */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    CHECK(dead > 0 && waitpid(dead, NULL, 0) == dead);
    char host[64] = "?", owner[128];
    gethostname(host, sizeof host - 1);
    snprintf(owner, sizeof owner, "%.60s:%ld:1", host, (long)dead);
    CHECK(store_claim(st, s.pts[4].run_key, owner, 600, &e) == 1);
    store_close(st);
    double t0 = store_clock();
    struct runner_opts o;
    memset(&o, 0, sizeof o);
    struct sweep_summary sum;
    CHECK(sweep_tiny(SPLIT_CFG, &o, &sum, NULL) == 0);
    CHECK_MSG(sum.ok == s.n, "ok %d of %d", sum.ok, s.n);
    CHECK(store_clock() - t0 >= 1.0);          /* it did wait for the lease */
    CHECK(store_clock() - t0 < 300);           /* not for the dead local owner's */
    CHECK(store_open_readonly(db_path, &st, &e) == 0);
    if (st) {
        CHECK(store_query_number(st, "select count(*) from runs") == s.n);
        CHECK(store_query_number(st, "select count(*) from claims") == 0);
        store_close(st);
    }
    sweep_free(&s);
    exp_config_free(&c);
}

int main(void)
{
    if (access(TINY "/config.json", R_OK) != 0) {
        fprintf(stderr, "fixture %s missing\n", TINY);
        return 1;
    }
    RUN(test_sweep_store_resume);
    RUN(test_oom);
    RUN(test_oom_at_bind);
    RUN(test_stop_after_batch);
    RUN(test_fidelity);
    RUN(test_two_processes_split);
    RUN(test_dead_owner_lease);
    RUN(test_schema_migration);
    RUN(test_smollm2_dataset);
    fresh_db(); /* remove the last database */
    unlink(db_path);
    return test_summary("runner");
}
