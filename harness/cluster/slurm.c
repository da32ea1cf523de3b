/* slurm.c - sbatch scripts, submission and task states through Slurm's own
 * commands. */
#include "harness/cluster/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- the script ---------------------------------------------------------- */

struct text {
    char *s;
    size_t n, cap;
    int failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
    if (t->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) { t->failed = 1; return; }
    if (t->n + (size_t)need + 1 > t->cap) {
        size_t cap = (t->n + (size_t)need + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) { t->failed = 1; return; }
        t->s = s;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
    va_end(ap);
    t->n += (size_t)need;
}

/* v as one single-quoted shell word. */
static void put_quoted(struct text *t, const char *v)
{
    put(t, "'");
    for (const char *c = v; *c; c++) {
        if (*c == '\'') put(t, "'\\''");
        else put(t, "%c", *c);
    }
    put(t, "'");
}

/* #SBATCH values are not parsed by a shell: refuse what would split them. */
static int plain_value(const char *what, const char *v, struct eb_err *e)
{
    for (const char *c = v; *c; c++)
        if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\'' || *c == '"' || *c == '#')
            return eb_fail(e, "slurm: %s '%s': no spaces, quotes or '#' allowed", what, v);
    return 0;
}

int slurm_script(const struct slurm_job *j, char **out, struct eb_err *e)
{
    *out = NULL;
    if (plain_value("job directory", j->dir, e) || plain_value("working directory", j->workdir, e) ||
        (j->partition && plain_value("--partition", j->partition, e)) ||
        (j->time && plain_value("--time", j->time, e)) || (j->mem && plain_value("--mem", j->mem, e)))
        return -1;
    struct text t = {0};
    put(&t, "#!/bin/sh\n"
            "# evictbench: experiment '%s' as %d shard(s), one per array task; task I runs\n"
            "# `evictbench exp --shard I/%d` into %s/shard-I-of-%d.db.\n"
            "# Written by `evictbench slurm`.  Resubmit a killed or timed-out task I with\n"
            "#   sbatch --array=I %s/job.sbatch\n"
            "# (it continues its shard); merge with\n"
            "#   evictbench merge %s/shard-*-of-%d.db --into results/results.db\n",
        j->name, j->shards, j->shards, j->dir, j->shards, j->dir, j->dir, j->shards);
    put(&t, "#SBATCH --job-name=eb-%s\n", j->name);
    put(&t, "#SBATCH --array=1-%d\n", j->shards);
    put(&t, "#SBATCH --output=%s/shard-%%a.job-%%A.log\n", j->dir);
    put(&t, "#SBATCH --chdir=%s\n", j->workdir);
    put(&t, "#SBATCH --ntasks=1\n");
    put(&t, "#SBATCH --cpus-per-task=%d\n", j->cpus_per_task);
    if (j->gpus_per_task > 0) put(&t, "#SBATCH --gpus-per-task=%d\n", j->gpus_per_task);
    if (j->partition) put(&t, "#SBATCH --partition=%s\n", j->partition);
    if (j->time) put(&t, "#SBATCH --time=%s\n", j->time);
    if (j->mem) put(&t, "#SBATCH --mem=%s\n", j->mem);
    put(&t, "set -eu\n"
            "I=${SLURM_ARRAY_TASK_ID:?not an array task}\n"
            "exec ");
    put_quoted(&t, j->binary);
    put(&t, " exp ");
    put_quoted(&t, j->config);
    put(&t, " --shard \"$I/%d\" --db ", j->shards);
    put_quoted(&t, j->dir);
    put(&t, "\"/shard-$I-of-%d.db\" --threads \"${SLURM_CPUS_PER_TASK:-%d}\"", j->shards,
        j->cpus_per_task);
    if (j->gpus_per_task > 0) put(&t, " --device cuda");
    if (j->data_dir) {
        put(&t, " --data-dir ");
        put_quoted(&t, j->data_dir);
    }
    put(&t, "\n");
    if (t.failed) {
        free(t.s);
        return eb_fail(e, "out of memory");
    }
    *out = t.s;
    return 0;
}

/* ---- running Slurm's commands --------------------------------------------- */

int slurm_run(char *const argv[], char **output, int *status, struct eb_err *e)
{
    *output = NULL;
    *status = -1;
    int fd[2];
    if (pipe(fd) != 0) return eb_fail(e, "%s: cannot create a pipe: %s", argv[0], strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc != 0) {
        close(fd[0]);
        if (rc == ENOENT)
            return eb_fail(e, "%s: not found in PATH (is this a Slurm login node?)", argv[0]);
        return eb_fail(e, "%s: cannot run it: %s", argv[0], strerror(rc));
    }
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    int nomem = !buf;
    for (;;) {
        if (!nomem && n + 1024 > cap) {
            char *b = realloc(buf, cap * 2);
            if (b) { buf = b; cap *= 2; } else nomem = 1;
        }
        char scratch[1024];
        char *dst = nomem ? scratch : buf + n;
        ssize_t got = read(fd[0], dst, 1023);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (!nomem) n += (size_t)got;
    }
    close(fd[0]);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    if (nomem) { free(buf); return eb_fail(e, "out of memory"); }
    buf[n] = '\0';
    *output = buf;
    *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    return 0;
}

/* The first line of text, for messages. */
static void first_line(const char *text, char *out, size_t cap)
{
    size_t n = strcspn(text, "\n");
    if (n >= cap) n = cap - 1;
    memcpy(out, text, n);
    out[n] = '\0';
}

int slurm_submit(const char *script, const char *array, char *id, size_t cap, struct eb_err *e)
{
    char arr[256];
    char *argv[5];
    int k = 0;
    argv[k++] = "sbatch";
    argv[k++] = "--parsable";
    if (array) {
        if ((size_t)snprintf(arr, sizeof arr, "--array=%s", array) >= sizeof arr)
            return eb_fail(e, "slurm: --array '%s' is too long", array);
        argv[k++] = arr;
    }
    argv[k++] = (char *)script;
    argv[k] = NULL;
    char *out = NULL;
    int status;
    if (slurm_run(argv, &out, &status, e) != 0) return -1;
    /* --parsable prints "<id>" or "<id>;<cluster>" as the last line. */
    char *last = out, *p = out;
    for (char *nl; (nl = strchr(p, '\n')); p = nl + 1)
        if (nl[1]) last = nl + 1;
    size_t n = strspn(last, "0123456789");
    if (status != 0 || n == 0 || n >= cap) {
        char line[300];
        first_line(out, line, sizeof line);
        int r = eb_fail(e, "sbatch %s: failed (exit %d): %s", script, status, line);
        free(out);
        return r;
    }
    memcpy(id, last, n);
    id[n] = '\0';
    free(out);
    return 0;
}

int slurm_record_job(const char *dir, const char *id, const char *array, int shards,
                     struct eb_err *e)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/jobs.tsv", dir) >= sizeof path)
        return eb_fail(e, "%s: path too long", dir);
    FILE *f = fopen(path, "a");
    if (!f) return eb_fail(e, "%s: cannot write: %s", path, strerror(errno));
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", gmtime(&now));
    fprintf(f, "%s\t%s\t%d\t%s\n", id, array, shards, when);
    if (fclose(f) != 0) return eb_fail(e, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

int slurm_last_job(const char *dir, int *shards, char *since, size_t cap, struct eb_err *e)
{
    *shards = 0;
    if (cap) since[0] = '\0';
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/jobs.tsv", dir) >= sizeof path)
        return eb_fail(e, "%s: path too long", dir);
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? 0 : eb_fail(e, "%s: cannot read: %s", path, strerror(errno));
    char line[512];
    int first = 1;
    while (fgets(line, sizeof line, f)) {
        char id[64], array[128], when[64];
        int n = 0;
        if (sscanf(line, "%63[^\t]\t%127[^\t]\t%d\t%63s", id, array, &n, when) != 4 || n < 1)
            continue;
        *shards = n;
        if (first && cap) {
            snprintf(since, cap, "%s", when);
            first = 0;
        }
    }
    fclose(f);
    return 0;
}

/* ---- task states ---------------------------------------------------------- */

/* "123_4" -> job 123, task 4; 0 when the line names no single array task
 * (e.g. "123_[5-8]", a pending range that squeue -r would have split). */
static int parse_task(const char *jobid, long *job, int *task)
{
    char *end;
    *job = strtol(jobid, &end, 10);
    if (end == jobid || *end != '_') return 0;
    const char *t = end + 1;
    long v = strtol(t, &end, 10);
    if (end == t || (*end && *end != '|')) return 0;
    *task = (int)v;
    return 1;
}

/* Lines "JOBID|STATE": keep each task's state of its newest job.  from_queue:
 * a live state wins over sacct's for the same job. */
static void take_states(const char *out, int shards, char (*states)[SLURM_STATE_LEN],
                        char (*ids)[SLURM_ID_LEN], long *jobs, int from_queue)
{
    const char *p = out;
    while (*p) {
        size_t len = strcspn(p, "\n");
        char line[256];
        if (len < sizeof line) {
            memcpy(line, p, len);
            line[len] = '\0';
            char *bar = strchr(line, '|');
            long job;
            int task;
            if (bar && parse_task(line, &job, &task) && task >= 1 && task <= shards) {
                char *state = bar + 1;
                state[strcspn(state, " |")] = '\0';  /* "CANCELLED by 0" -> "CANCELLED" */
                int i = task - 1;
                if (job > jobs[i] || (job == jobs[i] && from_queue)) {
                    jobs[i] = job;
                    snprintf(states[i], SLURM_STATE_LEN, "%s", state);
                    snprintf(ids[i], SLURM_ID_LEN, "%ld_%d", job, task);
                }
            }
        }
        p += len;
        if (*p) p++;
    }
}

int slurm_task_states(const char *name, const char *since, int shards,
                      char (*states)[SLURM_STATE_LEN], char (*ids)[SLURM_ID_LEN], int *have_sacct,
                      struct eb_err *e)
{
    *have_sacct = 0;
    long *jobs = eb_calloc((size_t)shards, sizeof *jobs, e);
    if (!jobs) return -1;
    for (int i = 0; i < shards; i++) {
        states[i][0] = ids[i][0] = '\0';
        jobs[i] = -1;
    }
    char job_name[300], start[96], user[48];
    snprintf(job_name, sizeof job_name, "--name=eb-%s", name);
    snprintf(user, sizeof user, "--user=%lu", (unsigned long)getuid());   /* not others' jobs */
    snprintf(start, sizeof start, "--starttime=%s", since && *since ? since : "now-7days");
    char *out = NULL;
    int status;
    char *sacct[] = {"sacct", "--noheader", "--parsable2", "--allocations", user, job_name,
                     start, "--format=JobID,State", NULL};
    if (slurm_run(sacct, &out, &status, e) == 0 && status == 0) {
        *have_sacct = 1;
        take_states(out, shards, states, ids, jobs, 0);
    }
    free(out);
    out = NULL;
    char *squeue[] = {"squeue", "--noheader", "--array", user, job_name, "--format=%i|%T", NULL};
    int rc = slurm_run(squeue, &out, &status, e);
    if (rc == 0 && status != 0) {
        char line[300];
        first_line(out, line, sizeof line);
        rc = eb_fail(e, "squeue: failed (exit %d): %s", status, line);
    }
    if (rc == 0) take_states(out, shards, states, ids, jobs, 1);
    free(out);
    free(jobs);
    return rc;
}
