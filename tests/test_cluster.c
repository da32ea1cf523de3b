/* test_cluster.c - shards, merge and the sbatch script (harness/cluster/).
 *
 * The partition is checked against a brute-force optimum on small cases; the
 * merge against databases written through the store with known rows. */
#include "test.h"
#include "test_util.h"

#include <stdint.h>
#include <unistd.h>

#include "harness/cluster/merge.h"
#include "harness/cluster/shard.h"
#include "harness/cluster/slurm.h"
#include "harness/exp/config.h"
#include "harness/store/store.h"
#include "harness/exp/sweep.h"

static char tmp_root[256];

static const char *tmp_path(const char *name)
{
    static char path[8][512];
    static int slot;
    char *p = path[slot++ % 8];
    snprintf(p, 512, "%s/%s", tmp_root, name);
    return p;
}

/* ---- shards --------------------------------------------------------------- */

static void test_shard_parse(void)
{
    struct eb_err e = {0};
    int i = 0, n = 0;
    CHECK(shard_parse("2/4", &i, &n, &e) == 0 && i == 2 && n == 4);
    CHECK(shard_parse("1/1", &i, &n, &e) == 0 && i == 1 && n == 1);
    static const char *const bad[] = {"0/4", "5/4", "2/0", "2", "2/", "/4", "a/4", "2/4x",
                                      "-1/4", "1/100001", ""};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        e.msg[0] = '\0';
        CHECK_MSG(shard_parse(bad[k], &i, &n, &e) == -1 && strstr(e.msg, "--shard"), "%s", bad[k]);
    }
}

/* A small deterministic generator for test data. */
static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void test_assign_deterministic(void)
{
    enum { N = 60 };
    char keys[N][16];
    const char *kp[N], *perm_k[N];
    int64_t work[N], perm_w[N];
    int of[N], perm_of[N];
    uint32_t s = 7;
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "k%08x", lcg(&s));
        kp[i] = keys[i];
        work[i] = 1 + lcg(&s) % 5 * 100;   /* many ties: the key must break them */
    }
    struct eb_err e = {0};
    CHECK(shard_assign(kp, work, N, 4, of, &e) == 0);
    /* The same points in another order: every key keeps its shard. */
    int order[N];
    for (int i = 0; i < N; i++) order[i] = i;
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(lcg(&s) % (uint32_t)(i + 1));
        int t = order[i]; order[i] = order[j]; order[j] = t;
    }
    for (int i = 0; i < N; i++) { perm_k[i] = kp[order[i]]; perm_w[i] = work[order[i]]; }
    CHECK(shard_assign(perm_k, perm_w, N, 4, perm_of, &e) == 0);
    int same = 1, used[5] = {0};
    for (int i = 0; i < N; i++) {
        same &= perm_of[i] == of[order[i]];
        CHECK(of[i] >= 1 && of[i] <= 4);
        if (of[i] >= 1 && of[i] <= 4) used[of[i]] = 1;
    }
    CHECK(same);
    CHECK(used[1] && used[2] && used[3] && used[4]);
    /* A repeated key is refused. */
    kp[3] = kp[7];
    CHECK(shard_assign(kp, work, N, 4, of, &e) == -1 && strstr(e.msg, "twice"));
}

/* The smallest possible largest load over every assignment (brute force). */
static int64_t best_max_load(const int64_t *w, int n, int k)
{
    int64_t best = INT64_MAX;
    long total = 1;
    for (int i = 0; i < n; i++) total *= k;
    for (long code = 0; code < total; code++) {
        int64_t load[8] = {0}, mx = 0;
        long c = code;
        for (int i = 0; i < n; i++, c /= k) load[c % k] += w[i];
        for (int j = 0; j < k; j++) if (load[j] > mx) mx = load[j];
        if (mx < best) best = mx;
    }
    return best;
}

static void test_assign_balance(void)
{
    struct eb_err e = {0};
    /* Equal work, 8 points on 4 shards: exactly 2 each. */
    const char *k8[8] = {"h", "c", "a", "f", "b", "g", "e", "d"};
    int64_t w8[8] = {5, 5, 5, 5, 5, 5, 5, 5};
    int of[16];
    CHECK(shard_assign(k8, w8, 8, 4, of, &e) == 0);
    int count[5] = {0};
    for (int i = 0; i < 8; i++) count[of[i]]++;
    CHECK(count[1] == 2 && count[2] == 2 && count[3] == 2 && count[4] == 2);

    /* Random cases: within 4/3 of the optimum (the greedy rule's bound) and
     * within one point's work of the mean. */
    uint32_t s = 11;
    char names[9][16];
    const char *kp[9];
    for (int i = 0; i < 9; i++) { snprintf(names[i], sizeof names[i], "p%d", i); kp[i] = names[i]; }
    for (int trial = 0; trial < 40; trial++) {
        int n = 5 + trial % 5, k = 2 + trial % 3;
        int64_t w[9], load[5] = {0}, total = 0, heaviest = 0, mx = 0;
        for (int i = 0; i < n; i++) {
            w[i] = 1 + lcg(&s) % 1000;
            total += w[i];
            if (w[i] > heaviest) heaviest = w[i];
        }
        CHECK(shard_assign(kp, w, n, k, of, &e) == 0);
        for (int i = 0; i < n; i++) load[of[i]] += w[i];
        for (int j = 1; j <= k; j++) if (load[j] > mx) mx = load[j];
        int64_t opt = best_max_load(w, n, k);
        CHECK_MSG(3 * mx <= 4 * opt, "trial %d: max load %lld, optimum %lld", trial,
                  (long long)mx, (long long)opt);
        CHECK_MSG(mx * k <= total + (int64_t)k * heaviest, "trial %d", trial);
    }
    /* More shards than points: the extra shards stay empty. */
    CHECK(shard_assign(k8, w8, 3, 5, of, &e) == 0 && of[0] != of[1] && of[1] != of[2] &&
          of[0] != of[2]);
}

static void test_point_work_and_view(void)
{
    static const char cfg_text[] =
        "{\"name\": \"w\", \"models\": \"no-such-model.gguf\", \"datasets\": [\"synthetic:20\","
        " {\"name\": \"synthetic:50\", \"offset\": 10, \"limit\": 5}],"
        " \"policies\": [\"fullkv\", {\"name\": \"streamingllm\", \"budgets\": [16, 32]}],"
        " \"batch_sizes\": [1, 2], \"max_new_tokens\": 64, \"max_total_tokens\": 48,"
        " \"sampling\": {\"temperature\": 0.6, \"n_samples\": 3}}";
    struct exp_config cfg;
    struct sweep sw;
    struct eb_err e = {0};
    if (exp_config_parse(cfg_text, strlen(cfg_text), "w.json", &cfg, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    if (sweep_expand(&cfg, NULL, &sw, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        exp_config_free(&cfg);
        return;
    }
    CHECK(sw.n == 12);
    for (int i = 0; i < sw.n; i++) {
        /* items x samples per item x min(max_new, max_total) */
        int64_t want = (strcmp(sw.pts[i].dataset, "synthetic:20") == 0 ? 20 : 5) * 3 * 48;
        CHECK_MSG(shard_point_work(&cfg, &sw.pts[i]) == want, "point %d: %lld", i,
                  (long long)shard_point_work(&cfg, &sw.pts[i]));
    }
    /* The views of 5 shards: disjoint, together every point, in sweep order. */
    int seen[12] = {0}, total = 0;
    for (int s = 1; s <= 5; s++) {
        struct sweep v;
        CHECK(shard_view(&sw, s, 5, &v, &e) == 0);
        CHECK(v.cfg == &cfg);
        for (int i = 0; i < v.n; i++) {
            CHECK(v.pts[i].index >= 0 && v.pts[i].index < 12);
            if (v.pts[i].index >= 0 && v.pts[i].index < 12) seen[v.pts[i].index]++;
            if (i) CHECK(v.pts[i].index > v.pts[i - 1].index);
            CHECK_STR(v.pts[i].run_key, sw.pts[v.pts[i].index].run_key);
        }
        total += v.n;
        shard_view_free(&v);
    }
    CHECK(total == 12);
    for (int i = 0; i < 12; i++) CHECK(seen[i] == 1);
    struct sweep v;
    CHECK(shard_view(&sw, 6, 5, &v, &e) == -1);
    sweep_free(&sw);
    exp_config_free(&cfg);
}

/* ---- merge ---------------------------------------------------------------- */

/* A run of two samples (text given) with one sentence; status "ok", or "oom"
 * / "error" without samples. */
static int put_run(struct store *st, int64_t exp_id, const char *key, const char *status,
                   const char *text0, double wall_s)
{
    struct run_record r;
    run_record_init(&r);
    r.experiment_id = exp_id;
    r.run_key = key;
    r.model = "m";
    r.dataset = "d";
    r.policy = "rkv";
    r.budget = 64;
    r.batch_size = 2;
    r.batching = "ragged";
    r.status = status;
    r.error = strcmp(status, "ok") ? "out of memory" : NULL;
    r.wall_s = wall_s;
    r.gen_tokens = 30;
    struct sample_record s[2];
    struct sentence_record x;
    int n = strcmp(status, "ok") ? 0 : 2;
    for (int i = 0; i < 2; i++) {
        sample_record_init(&s[i]);
        s[i].sample_idx = i;
        s[i].item_id = i ? "b" : "a";
        s[i].prompt_tokens = 10;
        s[i].gen_tokens = 10 + i * 10;
        s[i].finished = 1;
        s[i].correct = i;
        s[i].pss_mean = 0.1 + 0.2;       /* 0.30000000000000004: kept to the last bit */
        s[i].ttft_ms = wall_s;           /* a timing: not a result */
        s[i].text = i ? "second" : text0;
    }
    /* a retention record on the second sample (its bytes need not decode here) */
    static const unsigned char blob[] = {1, 2, 3};
    static const struct sample_retention ret = {1, 1, 10, 30, 2, 1, 5, "zlib-u32le-head-major-v1",
                                                blob, sizeof blob, NULL, 0};
    s[1].retention = &ret;
    sentence_record_init(&x);
    x.sample_idx = 1;
    x.sent_idx = 0;
    x.start_tok = 3;
    x.end_tok = 9;
    x.kind = "check";
    x.max_sim = 0.5;
    struct eb_err e = {0};
    int rc = store_write_run(st, &r, s, n, &x, n ? 1 : 0, &e);
    if (rc < 0) fprintf(stderr, "  store_write_run: %s\n", e.msg);
    return rc;
}

/* A shard database at name with the given runs ("key:status:text", ...). */
static const char *make_shard(const char *name, const char *const *runs, int n)
{
    const char *path = tmp_path(name);
    unlink(path);
    struct store *st = NULL;
    struct eb_err e = {0};
    int64_t exp_id;
    if (store_open(path, &st, &e) || store_begin_experiment(st, "exp", "{}", "v1", &exp_id, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        store_close(st);
        return path;
    }
    for (int i = 0; i < n; i++) {
        char key[64], status[16], text[64];
        if (sscanf(runs[i], "%63[^:]:%15[^:]:%63s", key, status, text) == 3)
            put_run(st, exp_id, key, status, text, 1.0 + i);
    }
    store_close(st);
    return path;
}

static int merge_files(const char *into, const char *const *shards, int n,
                       struct merge_stats *stats, struct eb_err *e)
{
    struct store *st = NULL;
    struct merge *m = NULL;
    int rc = store_open(into, &st, e) || merge_begin(st, into, &m, e) ? -1 : 0;
    for (int i = 0; rc == 0 && i < n; i++) rc = merge_shard(m, shards[i], &stats[i], e);
    merge_end(m);
    store_close(st);
    return rc;
}

static double count(const char *db, const char *sql)
{
    struct store *st = NULL;
    struct eb_err e = {0};
    if (store_open_readonly(db, &st, &e)) return -1;
    double v = store_query_number(st, sql);
    store_close(st);
    return v;
}

/* A text dump of what a database holds (results only), to compare. */
static int dump_row(void *ctx, int n, const char *const *names, const char *const *values)
{
    (void)names;
    FILE *f = ctx;
    for (int i = 0; i < n; i++) fprintf(f, "%s|", values[i] ? values[i] : "NULL");
    fputc('\n', f);
    return 0;
}

static char *dump(const char *db)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct store *st = NULL;
    struct eb_err e = {0};
    if (f && store_open_readonly(db, &st, &e) == 0) {
        store_query(st,
                    "SELECT r.run_key, r.status, r.n_samples, r.accuracy, r.wall_s, s.sample_idx,"
                    " s.text, s.pss_mean, x.sent_idx, x.kind FROM runs r"
                    " LEFT JOIN samples s ON s.run_id = r.id"
                    " LEFT JOIN sentences x ON x.run_id = s.run_id AND x.sample_idx = s.sample_idx"
                    " ORDER BY r.run_key, s.sample_idx, x.sent_idx;"
                    "SELECT name, config_json, code_version FROM experiments ORDER BY id",
                    dump_row, f, &e);
        store_close(st);
    }
    if (f) fclose(f);
    return buf;
}

static void test_merge_dedupe_idempotent(void)
{
    const char *a_runs[] = {"k1:ok:first", "k2:oom:-", "k3:error:-"};
    const char *b_runs[] = {"k4:ok:fourth", "k1:ok:first"};   /* k1 again, other timing */
    const char *a = make_shard("a.db", a_runs, 3);
    const char *b = make_shard("b.db", b_runs, 2);
    const char *t = tmp_path("t.db");
    unlink(t);
    const char *shards[] = {a, b};
    struct merge_stats ms[2];
    struct eb_err e = {0};
    CHECK_MSG(merge_files(t, shards, 2, ms, &e) == 0, "%s", e.msg);
    CHECK(ms[0].copied == 2 && ms[0].present == 0 && ms[0].unfinished == 1);
    CHECK(ms[1].copied == 1 && ms[1].present == 1 && ms[1].unfinished == 0);
    CHECK(count(t, "SELECT count(*) FROM runs") == 3);
    CHECK(count(t, "SELECT count(*) FROM runs WHERE run_key = 'k3'") == 0);
    CHECK(count(t, "SELECT count(*) FROM samples") == 4);
    CHECK(count(t, "SELECT count(*) FROM sentences") == 2);
    CHECK(count(t, "SELECT count(*) FROM experiments") == 1);
    CHECK(count(t, "SELECT count(*) FROM runs WHERE experiment_id = "
                   "(SELECT id FROM experiments)") == 3);
    /* Samples and sentences hang off the target's run ids, not the shard's. */
    CHECK(count(t, "SELECT count(*) FROM samples s JOIN runs r ON r.id = s.run_id"
                   " WHERE r.run_key IN ('k1', 'k4')") == 4);
    CHECK(count(t, "SELECT count(*) FROM sentences x JOIN samples s ON s.run_id = x.run_id"
                   " AND s.sample_idx = x.sample_idx") == 2);
    CHECK(count(t, "SELECT count(*) FROM samples WHERE pss_mean = 0.1 + 0.2") == 4);
    /* the retention records come along, on the target's run ids */
    CHECK(count(t, "SELECT count(*) FROM retention x JOIN samples s ON s.run_id = x.run_id"
                   " AND s.sample_idx = x.sample_idx WHERE x.n_evicted_slots = 2") == 2);
    /* k1 keeps its first row (shard a's timing). */
    CHECK(count(t, "SELECT wall_s FROM runs WHERE run_key = 'k1'") == 1.0);
    CHECK(count(t, "SELECT accuracy FROM runs WHERE run_key = 'k1'") == 0.5);

    /* Again, in either order: nothing changes. */
    char *before = dump(t);
    const char *again[] = {b, a};
    CHECK_MSG(merge_files(t, again, 2, ms, &e) == 0, "%s", e.msg);
    CHECK(ms[0].copied == 0 && ms[0].present == 2 && ms[1].copied == 0 && ms[1].present == 2);
    char *after = dump(t);
    CHECK(before && after && strcmp(before, after) == 0);
    CHECK(count(t, "PRAGMA integrity_check") != -1);
    free(before);
    free(after);

    /* A finished run replaces an 'error' row of the target. */
    const char *c_runs[] = {"k3:ok:third"};
    const char *c = make_shard("c.db", c_runs, 1);
    const char *one[] = {c};
    const char *t2 = tmp_path("t2.db");
    unlink(t2);
    struct store *st = NULL;
    CHECK(store_open(t2, &st, &e) == 0);
    CHECK(put_run(st, 0, "k3", "error", "-", 1) == 0);
    store_close(st);
    CHECK_MSG(merge_files(t2, one, 1, ms, &e) == 0, "%s", e.msg);
    CHECK(count(t2, "SELECT count(*) FROM runs WHERE run_key = 'k3' AND status = 'ok'") == 1);
    CHECK(count(t2, "SELECT count(*) FROM runs") == 1);
}

static void test_merge_conflict(void)
{
    const char *a_runs[] = {"k1:ok:first"};
    const char *b_runs[] = {"k9:ok:new", "k1:ok:other"};   /* k1 with another text */
    const char *a = make_shard("ca.db", a_runs, 1);
    const char *b = make_shard("cb.db", b_runs, 2);
    const char *t = tmp_path("ct.db");
    unlink(t);
    const char *both[] = {a, b};
    struct merge_stats ms[2];
    struct eb_err e = {0};
    /* In one session the message names both shards... */
    CHECK(merge_files(t, both, 2, ms, &e) == -1);
    CHECK_MSG(strstr(e.msg, "k1") && strstr(e.msg, a) && strstr(e.msg, b) &&
              strstr(e.msg, "different results"), "%s", e.msg);
    /* ...and nothing of the conflicting shard was copied. */
    CHECK(count(t, "SELECT count(*) FROM runs") == 1);
    CHECK(count(t, "SELECT count(*) FROM runs WHERE run_key = 'k9'") == 0);
    CHECK(count(t, "SELECT text FROM samples WHERE sample_idx = 0") != -1);
    /* In a later session it names the target. */
    const char *only_b[] = {b};
    e.msg[0] = '\0';
    CHECK(merge_files(t, only_b, 1, ms, &e) == -1);
    CHECK_MSG(strstr(e.msg, t) && strstr(e.msg, b), "%s", e.msg);
    /* A missing file, a file that is no database, the target itself. */
    const char *bad[] = {tmp_path("none.db")};
    CHECK(merge_files(t, bad, 1, ms, &e) == -1 && strstr(e.msg, "no such results database"));
    CHECK(access(bad[0], F_OK) != 0);
    const char *self[] = {t};
    CHECK(merge_files(t, self, 1, ms, &e) == -1 && strstr(e.msg, "target itself"));
}

/* A shard with a write in progress: the merge sees the committed runs only,
 * and does not stall the writer. */
static void test_merge_while_written(void)
{
    const char *a_runs[] = {"k1:ok:first"};
    const char *a = make_shard("wa.db", a_runs, 1);
    struct store *w = NULL;
    struct eb_err e = {0};
    CHECK(store_open(a, &w, &e) == 0);
    /* The writer's next run, half written. */
    CHECK_MSG(store_query(w, "BEGIN IMMEDIATE; INSERT INTO runs (run_key, model, dataset, policy,"
                             " batch_size, batching, status, n_samples, finished_at) VALUES"
                             " ('k2', 'm', 'd', 'rkv', 1, 'ragged', 'ok', 1, 'now')",
                          NULL, NULL, &e) == 0, "%s", e.msg);
    const char *t = tmp_path("wt.db");
    unlink(t);
    const char *one[] = {a};
    struct merge_stats ms[1];
    CHECK_MSG(merge_files(t, one, 1, ms, &e) == 0, "%s", e.msg);
    CHECK(ms[0].copied == 1);
    CHECK(count(t, "SELECT count(*) FROM runs") == 1);
    /* The writer can still commit. */
    CHECK_MSG(store_query(w, "COMMIT", NULL, NULL, &e) == 0, "%s", e.msg);
    store_close(w);
    CHECK_MSG(merge_files(t, one, 1, ms, &e) == 0, "%s", e.msg);
    CHECK(ms[0].copied == 1 && ms[0].present == 1);
    CHECK(count(t, "SELECT count(*) FROM runs") == 2);
}

/* ---- the sbatch script ---------------------------------------------------- */

/* A shard written before schema version 3 (no runs.kv_type: its runs were
 * f32; its views then read no kv_type) merges into a new target as f32; a new shard's
 * kv_type is kept. */
static void test_merge_old_shard(void)
{
    const char *old_runs[] = {"o1:ok:old"}, *new_runs[] = {"n1:ok:new"};
    const char *a = make_shard("old.db", old_runs, 1), *b = make_shard("new.db", new_runs, 1);
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK_MSG(store_open(a, &st, &e) == 0 &&
          store_query(st, "DROP VIEW v_throughput_by_batch; DROP VIEW v_kv_by_budget; "
                          "ALTER TABLE runs DROP COLUMN kv_type; "
                          "PRAGMA user_version = 2", NULL, NULL, &e) == 0, "%s", e.msg);
    store_close(st);
    st = NULL;
    CHECK(store_open(b, &st, &e) == 0 &&
          store_query(st, "UPDATE runs SET kv_type = 'f16'", NULL, NULL, &e) == 0);
    store_close(st);
    CHECK(count(a, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'kv_type'") == 0);
    const char *t = tmp_path("t3.db");
    unlink(t);
    const char *shards[] = {a, b};
    struct merge_stats ms[2];
    CHECK_MSG(merge_files(t, shards, 2, ms, &e) == 0, "%s", e.msg);
    CHECK(ms[0].copied == 1 && ms[1].copied == 1);
    CHECK(count(t, "SELECT count(*) FROM runs WHERE run_key = 'o1' AND kv_type = 'f32'") == 1);
    CHECK(count(t, "SELECT count(*) FROM runs WHERE run_key = 'n1' AND kv_type = 'f16'") == 1);
}

static void test_slurm_script(void)
{
    struct slurm_job j;
    memset(&j, 0, sizeof j);
    j.name = "sweep";
    j.config = "/r/results/slurm/sweep/sweep.json";
    j.dir = "/r/results/slurm/sweep";
    j.workdir = "/r";
    j.binary = "/opt/it's/evictbench";
    j.shards = 12;
    j.cpus_per_task = 4;
    char *s = NULL;
    struct eb_err e = {0};
    CHECK(slurm_script(&j, &s, &e) == 0);
    CHECK(s && !strncmp(s, "#!/bin/sh\n", 10));
    CHECK(s && strstr(s, "\n#SBATCH --array=1-12\n"));
    CHECK(s && strstr(s, "\n#SBATCH --job-name=eb-sweep\n"));
    CHECK(s && strstr(s, "\n#SBATCH --cpus-per-task=4\n"));
    CHECK(s && strstr(s, "\n#SBATCH --chdir=/r\n"));
    CHECK(s && strstr(s, "'/opt/it'\\''s/evictbench' exp '/r/results/slurm/sweep/sweep.json'"
                         " --shard \"$I/12\" --db '/r/results/slurm/sweep'\"/shard-$I-of-12.db\""));
    CHECK(s && !strstr(s, "--device") && !strstr(s, "--partition") && !strstr(s, "--gpus"));
    free(s);
    j.gpus_per_task = 2;
    j.partition = "gpu";
    j.time = "2:00:00";
    j.mem = "64G";
    j.data_dir = "/data";
    CHECK(slurm_script(&j, &s, &e) == 0);
    CHECK(s && strstr(s, "\n#SBATCH --gpus-per-task=2\n") && strstr(s, " --device cuda") &&
          strstr(s, "\n#SBATCH --partition=gpu\n") && strstr(s, "\n#SBATCH --time=2:00:00\n") &&
          strstr(s, "\n#SBATCH --mem=64G\n") && strstr(s, "--data-dir '/data'"));
    free(s);
    j.partition = "gpu a";
    CHECK(slurm_script(&j, &s, &e) == -1 && strstr(e.msg, "--partition"));
}

int main(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/eb_test_cluster_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_shard_parse);
    RUN(test_assign_deterministic);
    RUN(test_assign_balance);
    RUN(test_point_work_and_view);
    RUN(test_merge_dedupe_idempotent);
    RUN(test_merge_conflict);
    RUN(test_merge_while_written);
    RUN(test_merge_old_shard);
    RUN(test_slurm_script);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (getenv("KEEP")) return test_summary("cluster");
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", tmp_root);
    return test_summary("cluster");
}
