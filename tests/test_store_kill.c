/* test_store_kill.c - a writer killed with SIGKILL at random moments never
 * leaves a partial run, and resuming (skipping the done run keys) completes the
 * set with nothing missing and nothing doubled.
 *
 * A child process writes a fixed set of runs (each with samples and
 * sentences, some recorded as OOM) the way the sweep runner does: skip a key
 * that is done, else write the run in one transaction.  The parent kills it
 * after a random delay, checks the database, and repeats; finally it resumes
 * in-process and checks that every run is there exactly as generated. */
#include "test.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/exp/runkey.h"
#include "harness/store/store.h"

#define N_RUNS 60
#define N_KILLS 8
#define MAX_SAMPLES 16
#define SENTS_PER_SAMPLE 4

static char tmp_dir[256], db[300];

static int is_oom(int i) { return i % 7 == 3; }
static int n_samples_of(int i) { return is_oom(i) ? 0 : 6 + i % (MAX_SAMPLES - 6); }
static int64_t gen_of(int i, int j) { return 50 + (i * 31 + j * 17) % 400; }

static int key_of(int i, char key[RUNKEY_HEX_LEN + 1])
{
    struct runkey_params p = {
        .model = "tiny@sha256:00",
        .dataset = "synthetic",
        .data_limit = -1,
        .prompt_template = "{problem}",
        .policy = i % 2 ? "rkv" : "skipkv",
        .params_json = "{}",
        .budget = 64 + 64 * (i % 4),
        .batch_size = 1 + i % 5,
        .batching = "padded",
        .sampling_json = "{\"greedy\":true}",
        .seed = (uint64_t)i,
        .max_new_tokens = 512,
        .code_version = "test",
    };
    struct eb_err e = {0};
    return runkey_compute(&p, key, &e);
}

static void mark(int fd, char c)
{
    if (fd >= 0 && write(fd, &c, 1) != 1) _exit(5);
}

/* Write every run not yet done; 0 when the whole set is in the database.
 * With progress_fd >= 0 it writes 'B' before and 'E' after each run write, so
 * the parent can tell a kill inside a write transaction from one between. */
static int write_all(const char *path, int progress_fd)
{
    struct store *s = NULL;
    struct eb_err e = {0};
    if (store_open(path, &s, &e) != 0) {
        fprintf(stderr, "  writer: %s\n", e.msg);
        return -1;
    }
    int64_t exp_id = 0;
    if (store_begin_experiment(s, "killtest", "{\"runs\":60}", "test", &exp_id, &e) != 0) {
        fprintf(stderr, "  writer: %s\n", e.msg);
        store_close(s);
        return -1;
    }
    static char text[MAX_SAMPLES][2048];
    static struct sample_record smp[MAX_SAMPLES];
    static struct sentence_record sent[MAX_SAMPLES * SENTS_PER_SAMPLE];
    int rc = 0;
    for (int i = 0; i < N_RUNS && rc == 0; i++) {
        char key[RUNKEY_HEX_LEN + 1];
        if (key_of(i, key) != 0) { rc = -1; break; }
        int done = store_run_done(s, key, &e);
        if (done < 0) { rc = -1; break; }
        if (done) continue;

        struct run_record r;
        run_record_init(&r);
        r.experiment_id = exp_id;
        r.run_key = key;
        r.model = "tiny";
        r.dataset = "synthetic";
        r.policy = i % 2 ? "rkv" : "skipkv";
        r.budget = 64 + 64 * (i % 4);
        r.batch_size = 1 + i % 5;
        r.batching = "padded";
        r.seed = (uint64_t)i;
        r.status = is_oom(i) ? "oom" : "ok";
        r.error = is_oom(i) ? "KV cache over max_kv_bytes" : NULL;
        int n = n_samples_of(i), n_sents = 0;
        int64_t total = 0;
        for (int j = 0; j < n; j++) {
            sample_record_init(&smp[j]);
            smp[j].sample_idx = j;
            smp[j].prompt_tokens = 40 + j;
            smp[j].gen_tokens = gen_of(i, j);
            smp[j].finished = 1;
            smp[j].correct = (i + j) % 3 == 0;
            for (int c = 0; c < (int)sizeof text[j] - 1; c++)
                text[j][c] = (char)('a' + (i + j + c) % 26);
            text[j][sizeof text[j] - 1] = '\0';
            smp[j].text = text[j];
            total += smp[j].gen_tokens;
            for (int k = 0; k < SENTS_PER_SAMPLE; k++) {
                struct sentence_record *x = &sent[n_sents++];
                sentence_record_init(x);
                x->sample_idx = j;
                x->sent_idx = k;
                x->start_tok = 10 * k;
                x->end_tok = 10 * k + 10;
                x->kind = k % 2 ? "non-execution" : "execution";
            }
        }
        r.gen_tokens = total;
        mark(progress_fd, 'B');
        int wrc = store_write_run(s, &r, smp, n, sent, n_sents, &e);
        mark(progress_fd, 'E');
        if (wrc < 0) {
            fprintf(stderr, "  writer: %s\n", e.msg);
            rc = -1;
        }
    }
    store_close(s);
    return rc;
}

/* The first column of the first row as an integer (-999 when there is none). */
static int first_int(void *c, int n, const char *const *names, const char *const *vals)
{
    (void)names;
    int64_t *v = c;
    if (n > 0 && vals[0]) *v = strtoll(vals[0], NULL, 10);
    return 1;
}

static int64_t get_int(struct store *s, const char *sql)
{
    struct eb_err e = {0};
    int64_t v = -999;
    if (store_query(s, sql, first_int, &v, &e) != 0) fprintf(stderr, "  query: %s\n", e.msg);
    return v;
}

static int integrity_ok(void *c, int n, const char *const *names, const char *const *vals)
{
    (void)names;
    int *ok = c;
    *ok = n == 1 && vals[0] && strcmp(vals[0], "ok") == 0;
    return 1;
}

/* The invariants that must hold after any kill; returns the number of runs present. */
static int64_t check_consistent(const char *when)
{
    struct store *s = NULL;
    struct eb_err e = {0};
    if (store_open(db, &s, &e) != 0) {
        CHECK_MSG(0, "%s: reopen: %s", when, e.msg);
        return -1;
    }
    int ok = 0;
    CHECK(store_query(s, "PRAGMA integrity_check", integrity_ok, &ok, &e) == 0);
    CHECK_MSG(ok, "%s: integrity_check is not ok", when);
    CHECK_MSG(get_int(s, "SELECT count(*) FROM pragma_foreign_key_check") == 0,
              "%s: foreign key violations", when);
    CHECK_MSG(get_int(s, "SELECT count(*) FROM (SELECT run_key FROM runs GROUP BY run_key "
                         "HAVING count(*) > 1)") == 0, "%s: duplicate run keys", when);
    CHECK_MSG(get_int(s, "SELECT count(*) FROM runs r WHERE n_samples != "
                         "(SELECT count(*) FROM samples s WHERE s.run_id = r.id)") == 0,
              "%s: a run whose sample rows differ from n_samples", when);
    CHECK_MSG(get_int(s, "SELECT count(*) FROM samples s WHERE "
                         "(SELECT count(*) FROM sentences t WHERE t.run_id = s.run_id "
                         "AND t.sample_idx = s.sample_idx) != 4") == 0,
              "%s: a sample without all its sentences", when);
    CHECK_MSG(get_int(s, "SELECT count(*) FROM samples WHERE run_id NOT IN (SELECT id FROM runs)")
                  == 0, "%s: orphan samples", when);
    CHECK_MSG(get_int(s, "SELECT count(*) FROM runs WHERE status = 'ok' AND "
                         "gen_tokens != (SELECT sum(gen_tokens) FROM samples WHERE run_id = runs.id)")
                  == 0, "%s: a run whose samples are not the ones written", when);
    int64_t n = get_int(s, "SELECT count(*) FROM runs");
    /* None yet if the kill came before the writer recorded it; never two. */
    int64_t n_exp = get_int(s, "SELECT count(*) FROM experiments");
    CHECK_MSG(n_exp == 1 || (n_exp == 0 && n == 0), "%s: %lld experiment rows", when,
              (long long)n_exp);
    store_close(s);
    return n;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_kill_and_resume(void)
{
    /* How long does one whole pass take here?  Kills land within it. */
    char scratch[320];
    snprintf(scratch, sizeof scratch, "%s/calibrate.db", tmp_dir);
    double t0 = now_s();
    CHECK(write_all(scratch, -1) == 0);
    double pass_s = now_s() - t0;

    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    int killed_midway = 0, killed_in_write = 0;
    int64_t before = 0;
    for (int round = 0; round < N_KILLS; round++) {
        int fds[2];
        CHECK(pipe(fds) == 0);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid < 0) return;
        if (pid == 0) {
            close(fds[0]);
            _exit(write_all(db, fds[1]) == 0 ? 0 : 1);
        }
        close(fds[1]);
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        /* Up to 1/N_KILLS of a pass, so on average the kills end about half way. */
        long delay_us = 1000 + (long)(rng % (uint64_t)(pass_s * 1e6 / N_KILLS + 1));
        sleep_us(delay_us);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        char buf[4096], last = 0;
        ssize_t got;
        while ((got = read(fds[0], buf, sizeof buf)) > 0) last = buf[got - 1];
        close(fds[0]);
        if (WIFSIGNALED(status) && last == 'B') killed_in_write++;
        char when[64];
        snprintf(when, sizeof when, "after kill %d (%ld us)", round + 1, delay_us);
        int64_t n = check_consistent(when);
        if (WIFSIGNALED(status) && n < N_RUNS) killed_midway++;
        CHECK_MSG(n >= before, "%s: runs went from %lld to %lld", when, (long long)before,
                  (long long)n);
        before = n;
    }
    CHECK_MSG(killed_midway >= N_KILLS / 2, "only %d of %d kills landed mid-sweep",
              killed_midway, N_KILLS);
    CHECK_MSG(killed_in_write >= 1, "no kill landed inside a run's write transaction");

    /* Resume: only the missing runs are written. */
    CHECK(write_all(db, -1) == 0);
    CHECK(check_consistent("after resume") == N_RUNS);

    struct store *s = NULL;
    struct eb_err e = {0};
    CHECK(store_open(db, &s, &e) == 0);
    if (!s) return;
    int64_t want_samples = 0, want_gen = 0;
    for (int i = 0; i < N_RUNS; i++) {
        char key[RUNKEY_HEX_LEN + 1], sql[256];
        CHECK(key_of(i, key) == 0);
        CHECK(store_run_done(s, key, &e) == 1);
        snprintf(sql, sizeof sql, "SELECT n_samples FROM runs WHERE run_key = '%s'", key);
        CHECK_MSG(get_int(s, sql) == n_samples_of(i), "run %d", i);
        want_samples += n_samples_of(i);
        for (int j = 0; j < n_samples_of(i); j++) want_gen += gen_of(i, j);
    }
    CHECK(get_int(s, "SELECT count(*) FROM samples") == want_samples);
    CHECK(get_int(s, "SELECT count(*) FROM sentences") == want_samples * SENTS_PER_SAMPLE);
    CHECK(get_int(s, "SELECT sum(gen_tokens) FROM samples") == want_gen);
    CHECK(get_int(s, "SELECT count(*) FROM runs WHERE status = 'oom'") ==
          get_int(s, "SELECT count(*) FROM runs WHERE n_samples = 0"));
    store_close(s);
    fprintf(stderr, "  kill test: pass %.0f ms; of %d kills %d mid-sweep, %d inside a write\n",
            pass_s * 1e3, N_KILLS, killed_midway, killed_in_write);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/eb_test_store_kill_XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(db, sizeof db, "%s/results.db", tmp_dir);
    RUN(test_kill_and_resume);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", tmp_dir);
    return test_summary("store_kill");
}
