/* test_store.c - the results store: schema, one transaction per run, the
 * views' aggregates on a hand-built set, duplicate keys, failures that leave
 * nothing behind, and clear errors for bad locations. */
#include "test.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/store/store.h"

/* ---- helpers ----------------------------------------------------------- */

static char tmp_root[256];

static void make_tmp_root(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/eb_test_store_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        exit(2);
    }
}

static void remove_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", dir);
}

/* A fresh database path "<tmp_root>/<name>.db". */
static const char *db_path(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s.db", tmp_root, name);
    unlink(path);
    char aux[540];
    snprintf(aux, sizeof aux, "%s-wal", path);
    unlink(aux);
    snprintf(aux, sizeof aux, "%s-shm", path);
    unlink(aux);
    return path;
}

/* Query results as text: rows separated by '\n', columns by '|', NULL as "NULL". */
struct text_rows {
    char buf[8192];
    size_t n;
};

static int collect(void *ctx, int ncols, const char *const *names, const char *const *values)
{
    (void)names;
    struct text_rows *t = ctx;
    for (int i = 0; i < ncols; i++) {
        int w = snprintf(t->buf + t->n, sizeof t->buf - t->n, "%s%s", i ? "|" : "",
                         values[i] ? values[i] : "NULL");
        if (w < 0 || (size_t)w >= sizeof t->buf - t->n) return 1;
        t->n += (size_t)w;
    }
    if (t->n + 1 < sizeof t->buf) {
        t->buf[t->n++] = '\n';
        t->buf[t->n] = '\0';
    }
    return 0;
}

static const char *q(struct store *s, const char *sql)
{
    static struct text_rows t;
    struct eb_err e = {0};
    t.n = 0;
    t.buf[0] = '\0';
    if (store_query(s, sql, collect, &t, &e) != 0) {
        fprintf(stderr, "  query failed: %s\n", e.msg);
        return "QUERY FAILED";
    }
    return t.buf;
}

static int64_t q_int(struct store *s, const char *sql)
{
    return strtoll(q(s, sql), NULL, 10);
}

static struct store *open_or_die(const char *path)
{
    struct store *s = NULL;
    struct eb_err e = {0};
    if (store_open(path, &s, &e) != 0) {
        fprintf(stderr, "  store_open: %s\n", e.msg);
        return NULL;
    }
    return s;
}

/* A run of `n` samples whose correct flags and lengths are given. */
struct fake_run {
    struct run_record run;
    struct sample_record samples[8];
    int n;
};

static void fake(struct fake_run *f, const char *key, const char *policy, int64_t budget,
                 int64_t bs, const char *batching, const int *correct, const int *gen, int n)
{
    run_record_init(&f->run);
    f->run.run_key = key;
    f->run.model = "m";
    f->run.dataset = "d";
    f->run.policy = policy;
    f->run.budget = budget;
    f->run.batch_size = bs;
    f->run.batching = batching;
    f->run.sampling_json = "{\"greedy\":true}";
    f->run.max_new_tokens = 100;
    f->run.status = "ok";
    f->run.device = "cpu";
    f->n = n;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        sample_record_init(&f->samples[i]);
        f->samples[i].sample_idx = i;
        f->samples[i].prompt_tokens = 20;
        f->samples[i].gen_tokens = gen[i];
        f->samples[i].finished = gen[i] < 100;
        f->samples[i].correct = correct[i];
        f->samples[i].peak_kv_bytes = 1000 * (budget > 0 ? budget : 100);
        total += gen[i];
    }
    f->run.gen_tokens = total;
    f->run.wall_s = 2.0;
    f->run.tokens_per_s = (double)total / 2.0;
    f->run.peak_kv_bytes = 1000 * (budget > 0 ? budget : 100) * bs;
}

static int write_fake(struct store *s, struct fake_run *f)
{
    struct eb_err e = {0};
    int rc = store_write_run(s, &f->run, f->samples, f->n, NULL, 0, &e);
    if (rc < 0) fprintf(stderr, "  store_write_run: %s\n", e.msg);
    return rc;
}

/* ---- tests ------------------------------------------------------------- */

static void test_schema_file_matches_embedded(void)
{
    FILE *f = fopen("results/schema.sql", "rb");
    if (!f) SKIP("results/schema.sql not found (run from the repository root)");
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    CHECK_MSG(strcmp(buf, store_schema_sql) == 0,
              "results/schema.sql differs from harness/store/schema_sql.c; run tools/gen_schema_sql.py");
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d;", STORE_SCHEMA_VERSION);
    CHECK(strstr(store_schema_sql, pragma) != NULL);
}

static void test_write_and_read_back(void)
{
    const char *path = db_path("readback");
    struct store *s = open_or_die(path);
    CHECK(s != NULL);
    if (!s) return;
    struct eb_err e = {0};
    CHECK_STR(q(s, "PRAGMA journal_mode"), "wal\n");
    CHECK(q_int(s, "PRAGMA user_version") == STORE_SCHEMA_VERSION);

    int64_t x1 = 0, x2 = 0, x3 = 0;
    CHECK(store_begin_experiment(s, "quick", "{\"a\":1}", "v1", &x1, &e) == 0);
    CHECK(store_begin_experiment(s, "quick", "{\"a\":1}", "v1", &x2, &e) == 0);
    CHECK(store_begin_experiment(s, "quick", "{\"a\":2}", "v1", &x3, &e) == 0);
    CHECK(x1 > 0 && x1 == x2 && x3 != x1);
    CHECK(q_int(s, "SELECT count(*) FROM experiments") == 2);

    struct run_record r;
    run_record_init(&r);
    r.experiment_id = x1;
    r.run_key = "k-readback";
    r.model = "smollm2";
    r.dataset = "gsm8k";
    r.data_offset = 10;
    r.data_limit = 3;
    r.policy = "skipkv";
    r.params_json = "{\"tau\":0.95}";
    r.budget = 512;
    r.batch_size = 3;
    r.batching = "grouped";
    r.sampling_json = "{\"greedy\":true}";
    r.seed = 7;
    r.max_new_tokens = 256;
    r.device = "cpu";
    r.status = "ok";
    r.wall_s = 1.5;
    r.gen_tokens = 300;
    r.tokens_per_s = 200;
    r.peak_kv_bytes = 123456;
    r.mean_kv_bytes = 100000.5;

    struct sample_record smp[3];
    for (int i = 0; i < 3; i++) {
        sample_record_init(&smp[i]);
        smp[i].sample_idx = i;
        smp[i].prompt_tokens = 30 + i;
        smp[i].gen_tokens = 100;
        smp[i].finished = 1;
        smp[i].correct = i != 1;
    }
    smp[0].item_id = "gsm8k-10";
    smp[0].think_tokens = 80;
    smp[0].pred_answer = "42";
    smp[0].ref_answer = "42";
    smp[0].n_compressions = 3;
    smp[0].peak_kv_bytes = 4096;
    smp[0].mean_kv_bytes = 2048.5;
    smp[0].n_sentences = 12;
    smp[0].n_redundant_pairs = 4;
    smp[0].pss_max = 0.97;
    smp[0].pss_mean = 0.5;
    smp[0].n_nonexec = 2;
    smp[0].steer_alpha_final = 0.25;
    smp[0].ttft_ms = 12.5;
    smp[0].tpot_ms = 3.25;
    smp[0].kl_mean = 0.125;
    smp[0].top1_agree = 0.875;
    smp[0].first_divergence = 17;
    smp[0].text = "It is \"42\".\nDone.";

    struct sentence_record sent[2];
    sentence_record_init(&sent[0]);
    sentence_record_init(&sent[1]);
    sent[0].sample_idx = 0; sent[0].sent_idx = 0; sent[0].start_tok = 0; sent[0].end_tok = 9;
    sent[0].kind = "execution"; sent[0].max_sim = 0.5;
    sent[1].sample_idx = 0; sent[1].sent_idx = 1; sent[1].start_tok = 9; sent[1].end_tok = 20;
    sent[1].kind = "non-execution"; sent[1].max_sim = 0.96; sent[1].evicted_step = 40;

    CHECK(store_run_done(s, "k-readback", &e) == 0);
    CHECK(store_write_run(s, &r, smp, 3, sent, 2, &e) == 0);
    CHECK(store_run_done(s, "k-readback", &e) == 1);

    CHECK_STR(q(s, "SELECT experiment_id = (SELECT min(id) FROM experiments), run_key, model, "
                   "dataset, data_offset, data_limit, policy, params_json, budget, batch_size, "
                   "batching, sampling_json, seed, max_new_tokens, device, status, error, "
                   "n_samples, round(accuracy, 4), mean_gen_tokens, wall_s, gen_tokens, "
                   "tokens_per_s, peak_kv_bytes, mean_kv_bytes, finished_at LIKE '20%Z' "
                   "FROM runs"),
              "1|k-readback|smollm2|gsm8k|10|3|skipkv|{\"tau\":0.95}|512|3|grouped|"
              "{\"greedy\":true}|7|256|cpu|ok|NULL|3|0.6667|100.0|1.5|300|200.0|123456|"
              "100000.5|1\n");
    CHECK_STR(q(s, "SELECT sample_idx, item_id, prompt_tokens, gen_tokens, think_tokens, "
                   "finished, correct, pred_answer, ref_answer, n_compressions, peak_kv_bytes, "
                   "mean_kv_bytes, n_sentences, n_redundant_pairs, pss_max, pss_mean, n_nonexec, "
                   "steer_alpha_final, ttft_ms, tpot_ms, kl_mean, top1_agree, first_divergence, "
                   "text FROM samples ORDER BY sample_idx"),
              "0|gsm8k-10|30|100|80|1|1|42|42|3|4096|2048.5|12|4|0.97|0.5|2|0.25|12.5|3.25|"
              "0.125|0.875|17|It is \"42\".\nDone.\n"
              "1|NULL|31|100|NULL|1|0|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|"
              "NULL|NULL|NULL|NULL|NULL|NULL\n"
              "2|NULL|32|100|NULL|1|1|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|"
              "NULL|NULL|NULL|NULL|NULL|NULL\n");
    CHECK_STR(q(s, "SELECT sample_idx, sent_idx, start_tok, end_tok, kind, max_sim, evicted_step "
                   "FROM sentences ORDER BY sent_idx"),
              "0|0|0|9|execution|0.5|NULL\n0|1|9|20|non-execution|0.96|40\n");
    /* The slice shows in the views' dataset label. */
    CHECK_STR(q(s, "SELECT dataset FROM v_accuracy_by_budget"), "gsm8k[10:13]\n");
    store_close(s);

    /* Reopening finds the same rows (and does not recreate the schema). */
    s = open_or_die(path);
    CHECK(s != NULL);
    if (!s) return;
    CHECK(q_int(s, "SELECT count(*) FROM samples") == 3);
    CHECK(store_run_done(s, "k-readback", &e) == 1);
    store_close(s);

    struct store *ro = NULL;
    CHECK(store_open_readonly(path, &ro, &e) == 0);
    if (ro) {
        CHECK(q_int(ro, "SELECT count(*) FROM runs") == 1);
        int64_t id;
        CHECK(store_begin_experiment(ro, "x", "{}", "v", &id, &e) == -1);
        CHECK(strstr(e.msg, "read-only") != NULL);
        /* Not even through SQL: the reader's connection is query-only. */
        struct text_rows none = {0};
        CHECK(store_query(ro, "DELETE FROM runs", collect, &none, &e) == -1);
        CHECK(q_int(ro, "SELECT count(*) FROM runs") == 1);
        store_close(ro);
    }
    /* The reader, the last connection, left no -wal or -shm beside the file. */
    char aux[600];
    snprintf(aux, sizeof aux, "%s-wal", path);
    CHECK_MSG(access(aux, F_OK) != 0, "%s is left", aux);
    snprintf(aux, sizeof aux, "%s-shm", path);
    CHECK_MSG(access(aux, F_OK) != 0, "%s is left", aux);
}

/* The hand-built set of the views test:
 *   fullkv            bs1 padded      correct 1110  gen 100 80 60 60    (acc .75, len 75)
 *   rkv    budget 30  bs1 padded      correct 1000  gen 90 100 100 70   (.25, 90)
 *   rkv    budget 60  bs1 padded      correct 1100  gen 80 80 60 60     (.5, 70)
 *   rkv    budget 60  bs10 padded     correct 1000  gen 80 80 60 60     (.25, 70)
 *   rkv    budget 60  bs10 grouped    correct 1100  gen 80 80 60 60     (.5, 70)
 *   skipkv budget 30  bs1 padded      correct 1100  gen 60 60 60 60     (.5, 60)  + PSS
 *   skipkv-sent budget 30 bs1 padded  correct 1000  gen 70 70 70 70     (.25, 70)
 *   rkv    budget 60  continuous bs1 (ok, 10 tok/s), bs8 (ok), bs16 (oom)
 *   h2o    budget 30  bs1 status error  (in no view)
 *   fidelity samples on rkv budget 30. */
static void build_view_set(struct store *s)
{
    static const int c1110[] = {1, 1, 1, 0}, c1000[] = {1, 0, 0, 0}, c1100[] = {1, 1, 0, 0};
    static const int g_full[] = {100, 80, 60, 60}, g_r30[] = {90, 100, 100, 70},
                     g_60[] = {80, 80, 60, 60}, g_sk[] = {60, 60, 60, 60},
                     g_sent[] = {70, 70, 70, 70};
    struct fake_run f;
    fake(&f, "full", "fullkv", STORE_NONE, 1, "padded", c1110, g_full, 4);
    CHECK(write_fake(s, &f) == 0);

    fake(&f, "rkv30", "rkv", 30, 1, "padded", c1000, g_r30, 4);
    const double kl[] = {0.2, 0.4, 0.3, 0.1}, agree[] = {0.9, 0.7, 0.8, 1.0};
    const int64_t div[] = {10, 30, 20, 40};
    for (int i = 0; i < 4; i++) {
        f.samples[i].kl_mean = kl[i];
        f.samples[i].top1_agree = agree[i];
        f.samples[i].first_divergence = div[i];
    }
    CHECK(write_fake(s, &f) == 0);

    fake(&f, "rkv60", "rkv", 60, 1, "padded", c1100, g_60, 4);
    CHECK(write_fake(s, &f) == 0);
    fake(&f, "rkv60-pad10", "rkv", 60, 10, "padded", c1000, g_60, 4);
    CHECK(write_fake(s, &f) == 0);
    fake(&f, "rkv60-grp10", "rkv", 60, 10, "grouped", c1100, g_60, 4);
    CHECK(write_fake(s, &f) == 0);

    fake(&f, "sk30", "skipkv", 30, 1, "padded", c1100, g_sk, 4);
    const int64_t pairs[] = {1, 3, 6, 10}, nonexec[] = {0, 2, 4, 8};
    const double pss[] = {0.2, 0.4, 0.6, 0.8};
    for (int i = 0; i < 4; i++) {
        f.samples[i].n_redundant_pairs = pairs[i];
        f.samples[i].n_nonexec = nonexec[i];
        f.samples[i].pss_mean = pss[i];
        f.samples[i].pss_max = pss[i] + 0.1;
        f.samples[i].n_sentences = 20;
    }
    CHECK(write_fake(s, &f) == 0);
    fake(&f, "sksent30", "skipkv-sent", 30, 1, "padded", c1000, g_sent, 4);
    CHECK(write_fake(s, &f) == 0);

    fake(&f, "cont1", "rkv", 60, 1, "continuous", c1100, g_60, 4);
    f.run.tokens_per_s = 10;
    CHECK(write_fake(s, &f) == 0);
    fake(&f, "cont8", "rkv", 60, 8, "continuous", c1100, g_60, 4);
    f.run.tokens_per_s = 50;
    CHECK(write_fake(s, &f) == 0);
    fake(&f, "cont16", "rkv", 60, 16, "continuous", c1100, g_60, 0);
    f.run.status = "oom";
    f.run.error = "KV cache needs 2.1 GB > max_kv_bytes 2 GB";
    f.run.tokens_per_s = NAN;
    f.run.gen_tokens = STORE_NONE;
    CHECK(write_fake(s, &f) == 0);

    fake(&f, "h2o-err", "h2o", 30, 1, "padded", c1100, g_60, 0);
    f.run.status = "error";
    f.run.error = "model file vanished";
    CHECK(write_fake(s, &f) == 0);
}

static void test_views(void)
{
    struct store *s = open_or_die(db_path("views"));
    CHECK(s != NULL);
    if (!s) return;
    build_view_set(s);

    CHECK_STR(q(s, "SELECT policy, budget, batch_size, batching, n_runs, n_samples, accuracy, "
                   "mean_gen_tokens, fullkv_accuracy, fullkv_mean_gen_tokens, "
                   "round(budget_ratio, 4) FROM v_accuracy_by_budget"),
              "fullkv|NULL|1|padded|1|4|0.75|75.0|0.75|75.0|NULL\n"
              "rkv|30|1|padded|1|4|0.25|90.0|0.75|75.0|0.4\n"
              "rkv|60|1|continuous|1|4|0.5|70.0|0.75|75.0|0.8\n"
              "rkv|60|1|padded|1|4|0.5|70.0|0.75|75.0|0.8\n"
              "rkv|60|8|continuous|1|4|0.5|70.0|0.75|75.0|0.8\n"
              "rkv|60|10|grouped|1|4|0.5|70.0|0.75|75.0|0.8\n"
              "rkv|60|10|padded|1|4|0.25|70.0|0.75|75.0|0.8\n"
              "skipkv|30|1|padded|1|4|0.5|60.0|0.75|75.0|0.4\n"
              "skipkv-sent|30|1|padded|1|4|0.25|70.0|0.75|75.0|0.4\n");
    CHECK_STR(q(s, "SELECT DISTINCT model, dataset, sampling, max_new_tokens "
                   "FROM v_accuracy_by_budget"),
              "m|d|{\"greedy\":true}|100\n");

    CHECK_STR(q(s, "SELECT policy, budget, mean_gen_tokens, min_gen_tokens, max_gen_tokens, "
                   "frac_finished, round(length_ratio, 4) FROM v_length_by_budget "
                   "WHERE batch_size = 1 AND batching = 'padded'"),
              "fullkv|NULL|75.0|60|100|0.75|1.0\n"
              "rkv|30|90.0|70|100|0.5|1.2\n"
              "rkv|60|70.0|60|80|1.0|0.9333\n"
              "skipkv|30|60.0|60|60|1.0|0.8\n"
              "skipkv-sent|30|70.0|70|70|1.0|0.9333\n");

    CHECK_STR(q(s, "SELECT policy, budget, batching, batch_size, status, n_runs, n_samples, "
                   "tokens_per_s, max_ok_batch_size FROM v_throughput_by_batch "
                   "WHERE batching = 'continuous'"),
              "rkv|60|continuous|1|ok|1|4|10.0|8\n"
              "rkv|60|continuous|8|ok|1|4|50.0|8\n"
              "rkv|60|continuous|16|oom|1|0|NULL|8\n");
    CHECK(q_int(s, "SELECT count(*) FROM v_throughput_by_batch WHERE policy = 'h2o'") == 0);
    CHECK(q_int(s, "SELECT count(*) FROM v_throughput_by_batch") == 10);

    CHECK_STR(q(s, "SELECT setting, batch_size, accuracy, bs1_accuracy, delta_vs_bs1 "
                   "FROM v_batching WHERE policy = 'rkv' AND budget = 60"),
              "bs1|1|0.5|0.5|0.0\n"
              "continuous|8|0.5|0.5|0.0\n"
              "grouped|10|0.5|0.5|0.0\n"
              "padded|10|0.25|0.5|-0.25\n");
    /* Batch size 1 runs of two modes merge into one 'bs1' point. */
    CHECK(q_int(s, "SELECT n_runs FROM v_batching WHERE policy = 'rkv' AND budget = 60 "
                   "AND setting = 'bs1'") == 2);

    CHECK_STR(q(s, "SELECT policy, step, budget, accuracy, mean_gen_tokens FROM v_ablation "
                   "WHERE budget = 30"),
              "rkv|0|30|0.25|90.0\nskipkv-sent|1|30|0.25|70.0\nskipkv|3|30|0.5|60.0\n");
    CHECK(q_int(s, "SELECT count(*) FROM v_ablation WHERE policy = 'fullkv'") == 0);

    /* skipkv: correct samples have pairs 1,3 / nonexec 0,2 / pss .2,.4;
     * incorrect ones 6,10 / 4,8 / .6,.8. */
    CHECK_STR(q(s, "SELECT policy, correct, n_samples, round(mean_pss, 4), "
                   "round(mean_pss_max, 4), mean_redundant_pairs, mean_nonexec FROM v_pss"),
              "skipkv|0|2|0.7|0.8|8.0|6.0\nskipkv|1|2|0.3|0.4|2.0|1.0\n");
    CHECK(q_int(s, "SELECT count(*) FROM v_pss_samples") == 4);

    CHECK_STR(q(s, "SELECT policy, budget, n_samples, round(mean_kl, 4), round(top1_agree, 4), "
                   "mean_first_divergence, min_first_divergence FROM v_fidelity"),
              "rkv|30|4|0.25|0.85|25.0|10\n");

    CHECK_STR(q(s, "SELECT policy, budget, batch_size, batching, seq_peak_kv_bytes, "
                   "batch_peak_kv_bytes, fullkv_seq_peak_kv_bytes FROM v_kv_by_budget "
                   "WHERE batching IN ('padded', 'grouped')"),
              "fullkv|NULL|1|padded|100000.0|100000|100000.0\n"
              "rkv|30|1|padded|30000.0|30000|100000.0\n"
              "rkv|60|1|padded|60000.0|60000|100000.0\n"
              "rkv|60|10|grouped|60000.0|600000|100000.0\n"
              "rkv|60|10|padded|60000.0|600000|100000.0\n"
              "skipkv|30|1|padded|30000.0|30000|100000.0\n"
              "skipkv-sent|30|1|padded|30000.0|30000|100000.0\n");

    /* A second slice of the same dataset gets its own rows and FullKV reference. */
    static const int c10[] = {1, 0}, g10[] = {50, 50};
    struct fake_run f;
    fake(&f, "slice-full", "fullkv", STORE_NONE, 1, "padded", c10, g10, 2);
    f.run.data_limit = 2;
    CHECK(write_fake(s, &f) == 0);
    CHECK_STR(q(s, "SELECT dataset, policy, accuracy, fullkv_mean_gen_tokens "
                   "FROM v_accuracy_by_budget WHERE policy = 'fullkv'"),
              "d|fullkv|0.75|75.0\nd[0:2]|fullkv|0.5|50.0\n");

    /* Version 4: fullkv-pss evicts nothing, so its runs are the FullKV
     * reference of their slice. */
    static const int c3[] = {1, 1, 0}, g3[] = {40, 50, 60}, c3r[] = {1, 0, 0};
    fake(&f, "slice3-pss", "fullkv-pss", STORE_NONE, 1, "padded", c3, g3, 3);
    f.run.data_limit = 3;
    CHECK(write_fake(s, &f) == 0);
    fake(&f, "slice3-rkv", "rkv", 25, 1, "padded", c3r, g3, 3);
    f.run.data_limit = 3;
    CHECK(write_fake(s, &f) == 0);
    CHECK_STR(q(s, "SELECT policy, round(accuracy, 4), round(fullkv_accuracy, 4), "
                   "fullkv_mean_gen_tokens, budget_ratio FROM v_accuracy_by_budget "
                   "WHERE dataset = 'd[0:3]'"),
              "fullkv-pss|0.6667|0.6667|50.0|NULL\nrkv|0.3333|0.6667|50.0|0.5\n");

    /* Version 4: a 16-bit KV cache is its own throughput and memory line,
     * against FullKV in the same type. */
    static const int c4[] = {1, 1, 0, 0}, g4[] = {80, 80, 60, 60};
    fake(&f, "cont8-f16", "rkv", 60, 8, "continuous", c4, g4, 4);
    f.run.kv_type = "f16";
    f.run.tokens_per_s = 70;
    for (int i = 0; i < 4; i++) f.samples[i].peak_kv_bytes = 30000;
    CHECK(write_fake(s, &f) == 0);
    CHECK_STR(q(s, "SELECT batch_size, kv_type, tokens_per_s, max_ok_batch_size "
                   "FROM v_throughput_by_batch WHERE batching = 'continuous' AND status = 'ok'"),
              "1|f32|10.0|8\n8|f16|70.0|8\n8|f32|50.0|8\n");
    CHECK_STR(q(s, "SELECT kv_type, seq_peak_kv_bytes, fullkv_seq_peak_kv_bytes FROM "
                   "v_kv_by_budget WHERE batching = 'continuous' AND batch_size = 8"),
              "f16|30000.0|NULL\nf32|60000.0|100000.0\n");
    store_close(s);
}

static void test_views_on_empty_db(void)
{
    struct store *s = open_or_die(db_path("empty"));
    CHECK(s != NULL);
    if (!s) return;
    const char *views[] = {"v_accuracy_by_budget", "v_length_by_budget",
                           "v_throughput_by_batch", "v_batching", "v_ablation", "v_pss",
                           "v_pss_samples", "v_fidelity", "v_kv_by_budget"};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", views[i]);
        CHECK_STR(q(s, sql), "0\n");
    }
    store_close(s);
}

static void test_duplicate_and_retry(void)
{
    struct store *s = open_or_die(db_path("dup"));
    CHECK(s != NULL);
    if (!s) return;
    struct eb_err e = {0};
    static const int c[] = {1, 0, 1}, g[] = {10, 20, 30};
    struct fake_run f;
    fake(&f, "dup", "rkv", 30, 1, "padded", c, g, 3);
    CHECK(write_fake(s, &f) == 0);
    CHECK(write_fake(s, &f) == 1);                   /* done already: nothing written */
    CHECK(q_int(s, "SELECT count(*) FROM runs") == 1);
    CHECK(q_int(s, "SELECT count(*) FROM samples") == 3);

    /* An 'error' run is not done and is replaced by the retry. */
    fake(&f, "retry", "rkv", 60, 1, "padded", c, g, 0);
    f.run.status = "error";
    f.run.error = "transient failure";
    CHECK(write_fake(s, &f) == 0);
    CHECK(store_run_done(s, "retry", &e) == 0);
    fake(&f, "retry", "rkv", 60, 1, "padded", c, g, 3);
    CHECK(write_fake(s, &f) == 0);
    CHECK(store_run_done(s, "retry", &e) == 1);
    CHECK_STR(q(s, "SELECT status, n_samples, error FROM runs WHERE run_key = 'retry'"),
              "ok|3|NULL\n");
    CHECK(q_int(s, "SELECT count(*) FROM runs") == 2);

    /* An 'oom' run is done: a later write of the same key changes nothing. */
    fake(&f, "oom", "rkv", 60, 64, "padded", c, g, 0);
    f.run.status = "oom";
    f.run.error = "out of memory";
    CHECK(write_fake(s, &f) == 0);
    CHECK(store_run_done(s, "oom", &e) == 1);
    fake(&f, "oom", "rkv", 60, 64, "padded", c, g, 3);
    CHECK(write_fake(s, &f) == 1);
    CHECK_STR(q(s, "SELECT status, n_samples FROM runs WHERE run_key = 'oom'"), "oom|0\n");
    CHECK(q_int(s, "SELECT count(*) FROM samples") == 6);
    store_close(s);
}

/* `exp --dry-run` calls a point stale when a done run of the same point is
 * recorded under another key (its code, data or parameters changed). */
static void test_point_seen(void)
{
    struct store *s = open_or_die(db_path("seen"));
    CHECK(s != NULL);
    if (!s) return;
    struct eb_err e = {0};
    static const int c[] = {1, 0}, g[] = {10, 20};
    struct fake_run f;
    fake(&f, "old-key", "rkv", 64, 2, "padded", c, g, 2);
    CHECK(write_fake(s, &f) == 0);
    struct run_record r = f.run;
    r.run_key = "new-key";                         /* same point, new key: stale */
    CHECK(store_point_seen(s, &r, &e) == 1);
    r.run_key = "old-key";                         /* its own key: not another run */
    CHECK(store_point_seen(s, &r, &e) == 0);
    r.run_key = "new-key";
    r.budget = 128;                                /* another point: new */
    CHECK(store_point_seen(s, &r, &e) == 0);
    r.budget = 64;
    r.data_limit = 5;                              /* another slice: new */
    CHECK(store_point_seen(s, &r, &e) == 0);
    r.data_limit = STORE_NONE;
    r.batching = "ragged";
    CHECK(store_point_seen(s, &r, &e) == 0);
    /* an error run is not done: retrying it is not "stale" */
    fake(&f, "err-key", "h2o", 64, 2, "padded", c, g, 0);
    f.run.status = "error";
    f.run.error = "transient";
    CHECK(write_fake(s, &f) == 0);
    r = f.run;
    r.run_key = "other";
    CHECK(store_point_seen(s, &r, &e) == 0);
    store_close(s);
}

static int count_rows(struct store *s)
{
    return (int)q_int(s, "SELECT (SELECT count(*) FROM runs) + (SELECT count(*) FROM samples) + "
                         "(SELECT count(*) FROM sentences)");
}

static void test_failed_write_leaves_nothing(void)
{
    struct store *s = open_or_die(db_path("fail"));
    CHECK(s != NULL);
    if (!s) return;
    struct eb_err e = {0};
    static const int c[] = {1, 0, 1, 1}, g[] = {10, 20, 30, 40};
    struct fake_run f;

    /* A NULL in a NOT NULL column of the third sample. */
    fake(&f, "bad-null", "rkv", 30, 1, "padded", c, g, 4);
    f.samples[2].correct = STORE_NONE;
    CHECK(store_write_run(s, &f.run, f.samples, 4, NULL, 0, &e) == -1);
    CHECK_MSG(strstr(e.msg, "NOT NULL constraint failed: samples.correct") &&
              strstr(e.msg, "sample 2"), "%s", e.msg);
    CHECK(count_rows(s) == 0);
    CHECK(store_run_done(s, "bad-null", &e) == 0);

    /* A value outside a CHECK. */
    fake(&f, "bad-check", "rkv", 30, 1, "padded", c, g, 4);
    f.samples[3].finished = 2;
    CHECK(store_write_run(s, &f.run, f.samples, 4, NULL, 0, &e) == -1);
    CHECK(strstr(e.msg, "CHECK constraint failed") != NULL);
    CHECK(count_rows(s) == 0);

    /* Two samples with one index. */
    fake(&f, "bad-dup", "rkv", 30, 1, "padded", c, g, 4);
    f.samples[3].sample_idx = 1;
    CHECK(store_write_run(s, &f.run, f.samples, 4, NULL, 0, &e) == -1);
    CHECK(strstr(e.msg, "UNIQUE constraint failed") != NULL);
    CHECK(count_rows(s) == 0);

    /* A sentence of a sample that was not written: the last row fails. */
    fake(&f, "bad-sent", "rkv", 30, 1, "padded", c, g, 4);
    struct sentence_record sent[2];
    sentence_record_init(&sent[0]);
    sentence_record_init(&sent[1]);
    sent[0].sample_idx = 0; sent[0].sent_idx = 0; sent[0].end_tok = 5;
    sent[1].sample_idx = 9; sent[1].sent_idx = 0; sent[1].end_tok = 5;
    CHECK(store_write_run(s, &f.run, f.samples, 4, sent, 2, &e) == -1);
    CHECK_MSG(strstr(e.msg, "sentence 1") && strstr(e.msg, "FOREIGN KEY"), "%s", e.msg);
    CHECK(count_rows(s) == 0);

    /* Rejected before touching the database. */
    fake(&f, "bad-status", "rkv", 30, 1, "padded", c, g, 4);
    f.run.status = "done";
    CHECK(store_write_run(s, &f.run, f.samples, 4, NULL, 0, &e) == -1);
    CHECK(strstr(e.msg, "status \"done\"") != NULL);
    f.run.status = "oom";
    f.run.error = "oom";
    CHECK(store_write_run(s, &f.run, f.samples, 4, NULL, 0, &e) == -1);
    CHECK(strstr(e.msg, "carries no samples") != NULL);
    f.run.error = NULL;
    CHECK(store_write_run(s, &f.run, NULL, 0, NULL, 0, &e) == -1);
    CHECK(strstr(e.msg, "needs an error message") != NULL);
    f.run.status = "ok";
    f.run.batch_size = 0;
    CHECK(store_write_run(s, &f.run, f.samples, 4, NULL, 0, &e) == -1);
    f.run.batch_size = 1;
    f.run.run_key = NULL;
    CHECK(store_write_run(s, &f.run, f.samples, 4, NULL, 0, &e) == -1);
    CHECK(store_write_run(s, &f.run, NULL, 3, NULL, 0, &e) == -1);
    CHECK(count_rows(s) == 0);

    /* The connection is still usable after every failure. */
    fake(&f, "good", "rkv", 30, 1, "padded", c, g, 4);
    CHECK(store_write_run(s, &f.run, f.samples, 4, sent, 1, &e) == 0);
    CHECK(count_rows(s) == 1 + 4 + 1);
    store_close(s);
}

/* A full disk, simulated with a page limit on the connection: the write fails
 * with SQLite's message and leaves nothing; with room again it succeeds. */
static void test_disk_full(void)
{
    struct store *s = open_or_die(db_path("full"));
    CHECK(s != NULL);
    if (!s) return;
    struct eb_err e = {0};
    static const int c[] = {1, 0, 1, 1, 0, 1, 0, 1}, g[] = {1, 2, 3, 4, 5, 6, 7, 8};
    static char big[20000];
    memset(big, 'x', sizeof big - 1);
    struct fake_run f;
    fake(&f, "big", "rkv", 30, 1, "padded", c, g, 8);
    for (int i = 0; i < 8; i++) f.samples[i].text = big;
    int64_t pages = q_int(s, "PRAGMA page_count");
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", (long long)pages + 4);
    q(s, sql);
    CHECK(store_write_run(s, &f.run, f.samples, 8, NULL, 0, &e) == -1);
    CHECK_MSG(strstr(e.msg, "full") != NULL, "%s", e.msg);
    CHECK(count_rows(s) == 0);
    q(s, "PRAGMA max_page_count = 1000000");
    CHECK(store_write_run(s, &f.run, f.samples, 8, NULL, 0, &e) == 0);
    CHECK(count_rows(s) == 9);
    store_close(s);
}

static void test_open_errors(void)
{
    struct store *s = NULL;
    struct eb_err e = {0};
    char path[600];

    snprintf(path, sizeof path, "%s/no/such/dir/results.db", tmp_root);
    CHECK(store_open(path, &s, &e) == -1 && s == NULL);
    CHECK_MSG(strstr(e.msg, "does not exist") != NULL, "%s", e.msg);

    CHECK(store_open(tmp_root, &s, &e) == -1);
    CHECK_MSG(strstr(e.msg, "not a regular file") != NULL, "%s", e.msg);
    CHECK(store_open("", &s, &e) == -1);

    snprintf(path, sizeof path, "%s/garbage.db", tmp_root);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        for (int i = 0; i < 200; i++) fputs("this is not a database file\n", f);
        fclose(f);
    }
    CHECK(store_open(path, &s, &e) == -1);
    CHECK_MSG(strstr(e.msg, "not a database") != NULL, "%s", e.msg);

    snprintf(path, sizeof path, "%s/missing.db", tmp_root);
    CHECK(store_open_readonly(path, &s, &e) == -1);
    CHECK_MSG(strstr(e.msg, "no such results database") != NULL, "%s", e.msg);

    /* Another schema version, and a database that is not ours. */
    const char *p = db_path("version");
    s = open_or_die(p);
    CHECK(s != NULL);
    if (!s) return;
    q(s, "PRAGMA user_version = 99");
    store_close(s);
    s = NULL;
    CHECK(store_open(p, &s, &e) == -1);
    CHECK_MSG(strstr(e.msg, "newer evictbench (schema version 99") != NULL, "%s", e.msg);
    /* the way out names the option that exists */
    CHECK_MSG(strstr(e.msg, "another --db file") != NULL, "%s", e.msg);
    CHECK(store_open_readonly(p, &s, &e) == -1);
    CHECK(strstr(e.msg, "newer evictbench") != NULL);
    CHECK(store_open_readonly(p, &s, &e) == -1);

    p = db_path("foreign");
    s = open_or_die(p);
    if (!s) return;
    q(s, "PRAGMA user_version = 0");
    store_close(s);
    s = NULL;
    CHECK(store_open(p, &s, &e) == -1);
    CHECK_MSG(strstr(e.msg, "not an evictbench results database") != NULL, "%s", e.msg);
}

/* Opening in a read-only directory must fail with a clear message.  Root
 * ignores permission bits, so as root the check runs in a child that first
 * drops to an unprivileged user. */
static void test_readonly_directory(void)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/ro", tmp_root);
    snprintf(path, sizeof path, "%s/results.db", dir);
    CHECK(mkdir(dir, 0755) == 0);
    /* One database exists already (writable file, read-only directory). */
    snprintf(path, sizeof path, "%s/old.db", dir);
    struct store *s = open_or_die(path);
    CHECK(s != NULL);
    store_close(s);
    CHECK(chmod(path, 0666) == 0);
    CHECK(chmod(dir, 0555) == 0);
    CHECK(chmod(tmp_root, 0755) == 0);

    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
        char msgs[1700] = "";
        struct store *c = NULL;
        struct eb_err e1 = {0}, e2 = {0};
        char p1[600], p2[600];
        snprintf(p1, sizeof p1, "%s/results.db", dir);
        snprintf(p2, sizeof p2, "%s/old.db", dir);
        int r1 = store_open(p1, &c, &e1);
        int r2 = store_open(p2, &c, &e2);
        /* Reading still works there. */
        struct eb_err e3 = {0};
        int r3 = store_open_readonly(p2, &c, &e3);
        if (r3 == 0) {
            r3 = strcmp(q(c, "SELECT count(*) FROM runs"), "0\n") == 0 ? 0 : -2;
            store_close(c);
        }
        snprintf(msgs, sizeof msgs, "%d %d %d\n%s\n%s\n%s\n", r1, r2, r3, e1.msg, e2.msg,
                 e3.msg);
        ssize_t w = write(fds[1], msgs, strlen(msgs));
        _exit(w > 0 ? 0 : 4);
    }
    close(fds[1]);
    char got[1800] = "";
    ssize_t n = 0, r;
    while ((r = read(fds[0], got + n, sizeof got - 1 - (size_t)n)) > 0) n += r;
    got[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    chmod(dir, 0755);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) SKIP("cannot drop root privileges");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_MSG(strncmp(got, "-1 -1 0\n", 8) == 0, "%s", got);
    char *line2 = strchr(got, '\n');
    CHECK_MSG(line2 && strstr(line2, "results.db: directory") && strstr(line2, "is not writable"),
              "%s", got);
    char *line3 = line2 ? strchr(line2 + 1, '\n') : NULL;
    CHECK_MSG(line3 && strstr(line3, "old.db: directory") && strstr(line3, "is not writable"),
              "%s", got);
}

int main(void)
{
    make_tmp_root();
    RUN(test_schema_file_matches_embedded);
    RUN(test_write_and_read_back);
    RUN(test_views);
    RUN(test_views_on_empty_db);
    RUN(test_duplicate_and_retry);
    RUN(test_failed_write_leaves_nothing);
    RUN(test_disk_full);
    RUN(test_open_errors);
    RUN(test_point_seen);
    RUN(test_readonly_directory);
    remove_tree(tmp_root);
    return test_summary("store");
}
