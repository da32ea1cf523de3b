/* cmd_slurm.c - `evictbench slurm CONFIG --shards N` (write and submit the
 * job array) and `evictbench slurm-status CONFIG` (where its shards stand). */
#include "harness/cli/cmd_cluster.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/cli/cli.h"
#include "harness/cluster/shard.h"
#include "harness/cluster/slurm.h"
#include "harness/exp/config.h"
#include "harness/exp/runner.h"
#include "harness/store/store.h"
#include "harness/exp/sweep.h"
#include "util/repo_file.h"

static void print_slurm_help(void)
{
    printf("usage: evictbench slurm CONFIG.json|NAME --shards N [options]\n\n"
           "Runs an experiment config across a Slurm cluster: writes an sbatch script for a\n"
           "job array whose task I runs `evictbench exp CONFIG --shard I/N` into its own\n"
           "database, and submits it with sbatch.  Everything lives in\n"
           "results/slurm/<config>/: job.sbatch, the config copy the tasks read, the shard\n"
           "databases shard-I-of-N.db, the task logs and jobs.tsv (the job ids).  A killed\n"
           "or timed-out task continues its shard when resubmitted (--array I).  Then:\n"
           "  evictbench slurm-status CONFIG\n"
           "  evictbench merge results/slurm/<config>/shard-*-of-N.db --into results/results.db\n\n"
           "  --shards N           array tasks (shards of the points), 1..%d\n"
           "  --partition P        Slurm partition (default: the cluster's)\n"
           "  --gpus-per-task G    GPUs per task; G > 0 runs the tasks with --device cuda\n"
           "  --cpus-per-task C    CPU cores per task, the shard's --threads (default 1)\n"
           "  --time T             time limit per task, Slurm's format (e.g. 4:00:00)\n"
           "  --mem M              memory per task, Slurm's format (e.g. 32G)\n"
           "  --array LIST         submit only these tasks (e.g. 3 or 1,4-5): a resubmission\n"
           "  --data-dir DIR       dataset files the tasks read (default: the environment's\n"
           "                       $EVICTBENCH_DATA, else datasets/data)\n"
           "  --dry-run            print the script, write and submit nothing\n",
           SHARD_MAX);
}

static int absolute(const char *path, char *out, size_t cap, struct eb_err *e)
{
    if (path[0] == '/') {
        if ((size_t)snprintf(out, cap, "%s", path) >= cap) return eb_fail(e, "%s: path too long", path);
        return 0;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return eb_fail(e, "cannot read the working directory: %s", strerror(errno));
    if ((size_t)snprintf(out, cap, "%s/%s", cwd, path) >= cap) return eb_fail(e, "%s: path too long", path);
    return 0;
}

/* The config's points; 0 or -1 with e set. */
static int expand(const struct exp_config *cfg, const char *data_dir, struct sweep *sw,
                  struct eb_err *e)
{
    return sweep_expand(cfg, data_dir, sw, e);
}

static int write_file(const char *path, const char *text, struct eb_err *e)
{
    FILE *f = fopen(path, "w");
    if (!f) return eb_fail(e, "%s: cannot write: %s", path, strerror(errno));
    fputs(text, f);
    if (fclose(f) != 0) return eb_fail(e, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

static int valid_array(const char *v)
{
    if (!*v) return 0;
    for (const char *c = v; *c; c++)
        if (!((*c >= '0' && *c <= '9') || *c == ',' || *c == '-')) return 0;
    return 1;
}

/* Returned by the argument parsers when the command goes on; anything else is
 * the command's exit code (0 after --help, 2 for bad usage). */
#define ARGS_OK (-1)

struct slurm_opts {
    const char *config;         /* CONFIG as given */
    const char *array;          /* --array LIST, or NULL for every task */
    int dry_run;
    struct slurm_job job;       /* the options that go into the script */
};

/* Whether o is an option of `slurm` that takes a value. */
static int slurm_takes_value(const char *o)
{
    static const char *const names[] = {"--shards", "--partition", "--gpus-per-task",
                                        "--cpus-per-task", "--time", "--mem",
                                        "--array", "--data-dir"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (!strcmp(o, names[k])) return 1;
    return 0;
}

/* Store option o's value val into opts; 0, or 2 after a usage error. */
static int set_slurm_option(struct slurm_opts *opts, const char *o, const char *val)
{
    struct slurm_job *j = &opts->job;
    long v;
    if (!strcmp(o, "--shards")) {
        if (cli_int(o, val, 1, SHARD_MAX, &v)) return 2;
        j->shards = (int)v;
    } else if (!strcmp(o, "--gpus-per-task")) {
        if (cli_int(o, val, 0, 64, &v)) return 2;
        j->gpus_per_task = (int)v;
    } else if (!strcmp(o, "--cpus-per-task")) {
        if (cli_int(o, val, 1, 4096, &v)) return 2;
        j->cpus_per_task = (int)v;
    } else if (!strcmp(o, "--partition")) j->partition = val;
    else if (!strcmp(o, "--time")) j->time = val;
    else if (!strcmp(o, "--mem")) j->mem = val;
    else if (!strcmp(o, "--data-dir")) j->data_dir = val;
    else if (!strcmp(o, "--array")) {
        if (!valid_array(val)) return cli_errorf("--array: expected task numbers like 3 or 1,4-5, got '%s'", val), 2;
        opts->array = val;
    }
    return 0;
}

/* The command line of `slurm` into opts: ARGS_OK, or the exit code. */
static int parse_slurm_args(int argc, char **argv, struct slurm_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->job.cpus_per_task = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *val;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { print_slurm_help(); return 0; }
        if (!strcmp(o, "--dry-run")) { opts->dry_run = 1; continue; }
        if (o[0] != '-') {
            if (opts->config) return cli_errorf("slurm: more than one config given ('%s', '%s')", opts->config, o), 2;
            opts->config = o;
            continue;
        }
        if (!slurm_takes_value(o))
            return cli_errorf("slurm: unknown option '%s' (see evictbench slurm --help)", o), 2;
        if (!(val = cli_value(argc, argv, &i))) return 2;
        if (set_slurm_option(opts, o, val)) return 2;
    }
    if (!opts->config) return cli_error("slurm: missing CONFIG (a .json file or a name in experiments/)"), 2;
    if (!opts->job.shards) return cli_error("slurm: missing --shards N (see evictbench slurm --help)"), 2;
    return ARGS_OK;
}

/* Check the resources the tasks need and expand the points into sw; 0, or 1
 * after reporting the error.  A --dry-run only notes missing resources. */
static int check_and_expand(const struct slurm_opts *opts, const struct exp_config *cfg,
                            struct sweep *sw, struct eb_err *e)
{
    const struct slurm_job *j = &opts->job;
    /* Every task must find the model and data; check here, before queueing. */
    if (exp_config_check_resources(cfg, j->data_dir, e)) {
        if (!opts->dry_run) return cli_error(e->msg);
        fprintf(stderr, "evictbench: note: %s\n", e->msg);
    }
    if (expand(cfg, j->data_dir, sw, e)) return cli_error(e->msg);
    if (j->shards > sw->n)
        fprintf(stderr, "evictbench: note: %d shards for %d point(s): %d task(s) will have nothing to do\n",
                j->shards, sw->n, j->shards - sw->n);
    return 0;
}

/* The absolute paths the job's script names (the job points into it). */
struct slurm_paths {
    char dir_rel[4096], dir[4096], workdir[PATH_MAX], binary[PATH_MAX], cfg_copy[4096 + 300];
    char data_dir[PATH_MAX];
};

/* Resolve the program, working, job and data directories into p and point
 * j (a copy of opts->job) at them; 0, or 1 after reporting the error. */
static int resolve_job_paths(const struct slurm_opts *opts, const struct exp_config *cfg,
                             struct slurm_job *j, struct slurm_paths *p, struct eb_err *e)
{
    ssize_t bn = readlink("/proc/self/exe", p->binary, sizeof p->binary - 1);
    if (bn <= 0 || (size_t)bn >= sizeof p->binary - 1)
        return cli_errorf("slurm: cannot find this program's path: %s", strerror(errno));
    p->binary[bn] = '\0';
    if (!getcwd(p->workdir, sizeof p->workdir))
        return cli_errorf("slurm: cannot read the working directory: %s", strerror(errno));
    if (shard_job_dir(cfg->name, p->dir_rel, sizeof p->dir_rel, !opts->dry_run, e) ||
        absolute(p->dir_rel, p->dir, sizeof p->dir, e) ||
        (j->data_dir && absolute(j->data_dir, p->data_dir, sizeof p->data_dir, e)))
        return cli_error(e->msg);
    snprintf(p->cfg_copy, sizeof p->cfg_copy, "%s/%s.json", p->dir, eb_base_name(p->dir_rel));
    j->name = eb_base_name(p->dir_rel);
    j->config = p->cfg_copy;
    j->dir = p->dir;
    j->workdir = p->workdir;
    j->binary = p->binary;
    if (j->data_dir) j->data_dir = p->data_dir;
    return 0;
}

/* Write the config copy and the script, submit it and record the job; 0, or
 * 1 after reporting the error. */
static int submit_job(const struct slurm_opts *opts, const struct slurm_job *j,
                      const struct exp_config *cfg, const struct sweep *sw, const char *script,
                      struct eb_err *e)
{
    char script_path[4096 + 32], id[64];
    snprintf(script_path, sizeof script_path, "%s/job.sbatch", j->dir);
    char *copy = exp_config_json(cfg);
    if (!copy) return cli_error("slurm: out of memory");
    int bad = write_file(j->config, copy, e) || write_file(script_path, script, e) ||
              slurm_submit(script_path, opts->array, id, sizeof id, e);
    free(copy);
    if (bad) return cli_error(e->msg);
    char all[32];
    snprintf(all, sizeof all, "1-%d", j->shards);
    const char *tasks = opts->array ? opts->array : all;
    if (slurm_record_job(j->dir, id, tasks, j->shards, e))
        return cli_errorf("submitted job %s, but %s", id, e->msg);
    printf("%s\n", id);
    fprintf(stderr, "%s: submitted job %s (tasks %s of %d, %d point(s)); see evictbench slurm-status %s\n",
            cfg->name, id, tasks, j->shards, sw->n, opts->config);
    return 0;
}

/* Build the script for the loaded cfg and print it (--dry-run) or submit it;
 * the exit code. */
static int write_and_submit(const struct slurm_opts *opts, const struct exp_config *cfg,
                            struct sweep *sw, struct eb_err *e)
{
    struct slurm_job j = opts->job;
    struct slurm_paths paths;
    char *script = NULL;
    int rc = 1;
    if (check_and_expand(opts, cfg, sw, e) || resolve_job_paths(opts, cfg, &j, &paths, e)) return 1;
    if (slurm_script(&j, &script, e)) return cli_error(e->msg);
    if (opts->dry_run) {
        fputs(script, stdout);
        fprintf(stderr, "%s: %d point(s) in %d shard(s); --dry-run: nothing written or submitted\n",
                cfg->name, sw->n, j.shards);
        rc = 0;
    } else {
        rc = submit_job(opts, &j, cfg, sw, script, e);
    }
    free(script);
    return rc;
}

int cmd_slurm(int argc, char **argv)
{
    struct slurm_opts opts;
    int rc = parse_slurm_args(argc, argv, &opts);
    if (rc != ARGS_OK) return rc;
    struct eb_err e = {0};
    struct exp_config cfg;
    struct sweep sw;
    memset(&sw, 0, sizeof sw);
    if (exp_config_load(opts.config, &cfg, &e)) return cli_error(e.msg);
    /* GPU tasks run with --device cuda: their points' keys, and the config
     * copy that slurm-status expands, say so */
    if (opts.job.gpus_per_task > 0 && exp_config_set_device(&cfg, "cuda", &e)) {
        exp_config_free(&cfg);
        return cli_error(e.msg);
    }
    rc = write_and_submit(&opts, &cfg, &sw, &e);
    sweep_free(&sw);
    exp_config_free(&cfg);
    return rc;
}

/* ---- slurm-status --------------------------------------------------------- */

static void print_status_help(void)
{
    printf("usage: evictbench slurm-status CONFIG.json|NAME [options]\n\n"
           "Where the shards of a config submitted with `evictbench slurm` stand: per shard\n"
           "the Slurm state of its newest array task (squeue; sacct where accounting is\n"
           "enabled) and, from its database, the points done, out of memory, failed\n"
           "('error', retried when the task is resubmitted), running and still to run.\n\n"
           "  --shards N           the shard count (default: the last submission's)\n"
           "  --data-dir DIR       dataset files (as given to `slurm`)\n");
}

struct tally {
    const char *const *keys;    /* this shard's run keys */
    int n;
    int ok, oom, error;
};

static int tally_row(void *ctx, int n, const char *const *names, const char *const *values)
{
    (void)names;
    struct tally *t = ctx;
    if (n < 2 || !values[0] || !values[1]) return 0;
    for (int i = 0; i < t->n; i++) {
        if (strcmp(t->keys[i], values[0])) continue;
        if (!strcmp(values[1], "ok")) t->ok++;
        else if (!strcmp(values[1], "oom")) t->oom++;
        else t->error++;
        break;
    }
    return 0;
}

struct status_opts {
    const char *config, *data_dir;
    long shards;                /* 0: the last submission's */
};

/* The command line of `slurm-status` into opts: ARGS_OK, or the exit code. */
static int parse_status_args(int argc, char **argv, struct status_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { print_status_help(); return 0; }
        if (!strcmp(o, "--shards")) {
            const char *val = cli_value(argc, argv, &i);
            if (!val || cli_int(o, val, 1, SHARD_MAX, &opts->shards)) return 2;
        } else if (!strcmp(o, "--data-dir")) {
            if (!(opts->data_dir = cli_value(argc, argv, &i))) return 2;
        } else if (o[0] == '-') {
            return cli_errorf("slurm-status: unknown option '%s' (see evictbench slurm-status --help)", o), 2;
        } else if (opts->config) {
            return cli_errorf("slurm-status: more than one config given ('%s', '%s')", opts->config, o), 2;
        } else {
            opts->config = o;
        }
    }
    if (!opts->config) return cli_error("slurm-status: missing CONFIG (a .json file or a name in experiments/)"), 2;
    return ARGS_OK;
}

/* What slurm-status gathers; status_free releases it. */
struct status {
    struct exp_config cfg, copy;
    struct sweep sw;
    long shards;
    int *of;                    /* of[i]: the shard of point i */
    char (*states)[SLURM_STATE_LEN];
    char (*ids)[SLURM_ID_LEN];
    const char **keys;          /* scratch: one shard's run keys */
    char dir[4096], since[64];
    int have_queue, have_sacct;
};

static void status_free(struct status *st)
{
    free(st->states);
    free(st->ids);
    free(st->keys);
    free(st->of);
    sweep_free(&st->sw);
    exp_config_free(&st->copy);
    exp_config_free(&st->cfg);
}

/* The job's directory, first submission time and shard count; 0, or 1 after
 * reporting the error. */
static int find_submission(struct status *st, struct eb_err *e)
{
    int submitted = 0;
    if (shard_job_dir(st->cfg.name, st->dir, sizeof st->dir, 0, e) ||
        slurm_last_job(st->dir, &submitted, st->since, sizeof st->since, e))
        return cli_error(e->msg);
    if (!st->shards) st->shards = submitted;
    if (!st->shards)
        return cli_errorf("slurm-status: %s: no submission recorded in %s/jobs.tsv (give --shards N)",
                          st->cfg.name, st->dir);
    return 0;
}

/* The points and their shards, as the tasks see them, and room for the task
 * states; 0, or 1 after reporting the error. */
static int load_shard_points(struct status *st, const char *data_dir, struct eb_err *e)
{
    char copy_path[4096 + 300];
    /* The points as the tasks see them: from the config copy they read. */
    snprintf(copy_path, sizeof copy_path, "%s/%s.json", st->dir, eb_base_name(st->dir));
    const struct exp_config *use = &st->cfg;
    if (access(copy_path, R_OK) == 0) {
        if (exp_config_load(copy_path, &st->copy, e)) return cli_error(e->msg);
        use = &st->copy;
    }
    if (expand(use, data_dir, &st->sw, e) || shard_assign_sweep(&st->sw, (int)st->shards, &st->of, e))
        return cli_error(e->msg);
    st->states = calloc((size_t)st->shards, sizeof *st->states);
    st->ids = calloc((size_t)st->shards, sizeof *st->ids);
    st->keys = calloc((size_t)(st->sw.n ? st->sw.n : 1), sizeof *st->keys);
    if (!st->states || !st->ids || !st->keys) return cli_error("slurm-status: out of memory");
    return 0;
}

/* Count shard s's points by their status in its database into t (t->keys
 * filled here); 0, or 1 after reporting the error.  An unreadable database is
 * only noted. */
static int tally_shard(const struct status *st, int s, struct tally *t, struct eb_err *e)
{
    for (int i = 0; i < st->sw.n; i++)
        if (st->of[i] == s) st->keys[t->n++] = st->sw.pts[i].run_key;
    char db[4096];
    if (shard_default_db(st->cfg.name, s, (int)st->shards, db, sizeof db, 0, e)) return cli_error(e->msg);
    struct store *store = NULL;
    struct eb_err de = {0};
    if (access(db, F_OK) == 0) {
        if (store_open_readonly(db, &store, &de) ||
            store_query(store, "SELECT run_key, status FROM runs", tally_row, t, &de))
            fprintf(stderr, "evictbench: note: %s\n", de.msg);
        store_close(store);
    }
    return 0;
}

/* One row of the table: its points, done, oom, failed, running and left. */
struct status_row {
    int pts, ok, oom, err, run, left;
};

static void print_status_row(const char *name, const char *task, const char *state,
                             const struct status_row *r)
{
    printf("%-9s %-14s %-11s %6d %5d %4d %6d %7d %5d\n", name, task, state, r->pts, r->ok,
           r->oom, r->err, r->run, r->left);
}

/* Tally shard s and print its row, adding it to tot; 0, or 1 after
 * reporting the error. */
static int print_shard_row(const struct status *st, int s, struct status_row *tot, struct eb_err *e)
{
    struct tally t = {st->keys, 0, 0, 0, 0};
    if (tally_shard(st, s, &t, e)) return 1;
    const char *state = st->states[s - 1][0] ? st->states[s - 1]
                        : st->have_queue && !st->have_sacct ? "not queued" : "-";
    int left = t.n - t.ok - t.oom;
    int running = !strcmp(state, "RUNNING") && left > 0 ? 1 : 0;
    struct status_row r = {t.n, t.ok, t.oom, t.error, running, left - running};
    char name[32];
    snprintf(name, sizeof name, "%d/%ld", s, st->shards);
    print_status_row(name, st->ids[s - 1][0] ? st->ids[s - 1] : "-", state, &r);
    tot->pts += r.pts;
    tot->ok += r.ok;
    tot->oom += r.oom;
    tot->err += r.err;
    tot->run += r.run;
    tot->left += r.left;
    return 0;
}

/* The table of shards and the total; 0, or 1 after reporting the error. */
static int print_status_table(const struct status *st, struct eb_err *e)
{
    printf("%-9s %-14s %-11s %6s %5s %4s %6s %7s %5s\n", "shard", "task", "state", "points",
           "done", "oom", "failed", "running", "left");
    struct status_row tot = {0, 0, 0, 0, 0, 0};
    for (int s = 1; s <= st->shards; s++)
        if (print_shard_row(st, s, &tot, e)) return 1;
    print_status_row("total", "", "", &tot);
    if (!st->have_sacct)
        fprintf(stderr, "(sacct gave nothing: accounting is off, so a task that has left the queue "
                        "shows no state; its database says how far it got)\n");
    return 0;
}

int cmd_slurm_status(int argc, char **argv)
{
    struct status_opts opts;
    int rc = parse_status_args(argc, argv, &opts);
    if (rc != ARGS_OK) return rc;
    struct eb_err e = {0};
    struct status st;
    memset(&st, 0, sizeof st);
    st.shards = opts.shards;
    if (exp_config_load(opts.config, &st.cfg, &e)) return cli_error(e.msg);
    rc = 1;
    if (find_submission(&st, &e) || load_shard_points(&st, opts.data_dir, &e)) goto done;
    st.have_queue = slurm_task_states(eb_base_name(st.dir), st.since, (int)st.shards, st.states, st.ids,
                                      &st.have_sacct, &e) == 0;
    if (!st.have_queue) fprintf(stderr, "evictbench: note: no task states: %s\n", e.msg);
    rc = print_status_table(&st, &e);
done:
    status_free(&st);
    return rc;
}
