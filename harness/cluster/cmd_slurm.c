/* cmd_slurm.c - `evictbench slurm CONFIG --shards N` (write and submit the
 * job array) and `evictbench slurm-status CONFIG` (where its shards stand). */
#include "harness/cluster/cmd_cluster.h"

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
    return sweep_expand(cfg, data_dir, runner_policy_check, sw, e);
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

int cmd_slurm(int argc, char **argv)
{
    const char *config = NULL, *array = NULL;
    struct slurm_job j;
    memset(&j, 0, sizeof j);
    j.cpus_per_task = 1;
    int dry_run = 0;
    long v;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *val;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { print_slurm_help(); return 0; }
        if (!strcmp(o, "--dry-run")) { dry_run = 1; continue; }
        if (o[0] != '-') {
            if (config) return cli_errorf("slurm: more than one config given ('%s', '%s')", config, o), 2;
            config = o;
            continue;
        }
        if (strcmp(o, "--shards") && strcmp(o, "--partition") && strcmp(o, "--gpus-per-task") &&
            strcmp(o, "--cpus-per-task") && strcmp(o, "--time") && strcmp(o, "--mem") &&
            strcmp(o, "--array") && strcmp(o, "--data-dir"))
            return cli_errorf("slurm: unknown option '%s' (see evictbench slurm --help)", o), 2;
        if (!(val = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(o, "--shards")) {
            if (cli_int(o, val, 1, SHARD_MAX, &v)) return 2;
            j.shards = (int)v;
        } else if (!strcmp(o, "--gpus-per-task")) {
            if (cli_int(o, val, 0, 64, &v)) return 2;
            j.gpus_per_task = (int)v;
        } else if (!strcmp(o, "--cpus-per-task")) {
            if (cli_int(o, val, 1, 4096, &v)) return 2;
            j.cpus_per_task = (int)v;
        } else if (!strcmp(o, "--partition")) j.partition = val;
        else if (!strcmp(o, "--time")) j.time = val;
        else if (!strcmp(o, "--mem")) j.mem = val;
        else if (!strcmp(o, "--data-dir")) j.data_dir = val;
        else if (!strcmp(o, "--array")) {
            if (!valid_array(val)) return cli_errorf("--array: expected task numbers like 3 or 1,4-5, got '%s'", val), 2;
            array = val;
        }
    }
    if (!config) return cli_error("slurm: missing CONFIG (a .json file or a name in experiments/)"), 2;
    if (!j.shards) return cli_error("slurm: missing --shards N (see evictbench slurm --help)"), 2;

    struct eb_err e = {0};
    struct exp_config cfg;
    struct sweep sw;
    memset(&sw, 0, sizeof sw);
    char dir_rel[4096], dir[4096], workdir[PATH_MAX], binary[PATH_MAX], cfg_copy[4096 + 300];
    char data_dir[PATH_MAX];
    char *script = NULL;
    int rc = 1;
    if (exp_config_load(config, &cfg, &e)) return cli_error(e.msg);
    /* Every task must find the model and data; check here, before queueing. */
    if (exp_config_check_resources(&cfg, j.data_dir, &e)) {
        if (!dry_run) { cli_error(e.msg); goto done; }
        fprintf(stderr, "evictbench: note: %s\n", e.msg);
    }
    if (expand(&cfg, j.data_dir, &sw, &e)) { cli_error(e.msg); goto done; }
    if (j.shards > sw.n)
        fprintf(stderr, "evictbench: note: %d shards for %d point(s): %d task(s) will have nothing to do\n",
                j.shards, sw.n, j.shards - sw.n);
    ssize_t bn = readlink("/proc/self/exe", binary, sizeof binary - 1);
    if (bn <= 0 || (size_t)bn >= sizeof binary - 1) {
        cli_errorf("slurm: cannot find this program's path: %s", strerror(errno));
        goto done;
    }
    binary[bn] = '\0';
    if (!getcwd(workdir, sizeof workdir)) {
        cli_errorf("slurm: cannot read the working directory: %s", strerror(errno));
        goto done;
    }
    if (shard_job_dir(cfg.name, dir_rel, sizeof dir_rel, !dry_run, &e) ||
        absolute(dir_rel, dir, sizeof dir, &e) ||
        (j.data_dir && absolute(j.data_dir, data_dir, sizeof data_dir, &e))) {
        cli_error(e.msg);
        goto done;
    }
    snprintf(cfg_copy, sizeof cfg_copy, "%s/%s.json", dir, eb_base_name(dir_rel));
    j.name = eb_base_name(dir_rel);
    j.config = cfg_copy;
    j.dir = dir;
    j.workdir = workdir;
    j.binary = binary;
    if (j.data_dir) j.data_dir = data_dir;
    if (slurm_script(&j, &script, &e)) { cli_error(e.msg); goto done; }
    if (dry_run) {
        fputs(script, stdout);
        fprintf(stderr, "%s: %d point(s) in %d shard(s); --dry-run: nothing written or submitted\n",
                cfg.name, sw.n, j.shards);
        rc = 0;
        goto done;
    }
    char script_path[4096 + 32], id[64];
    snprintf(script_path, sizeof script_path, "%s/job.sbatch", dir);
    if (write_file(cfg_copy, cfg.json, &e) || write_file(script_path, script, &e) ||
        slurm_submit(script_path, array, id, sizeof id, &e)) {
        cli_error(e.msg);
        goto done;
    }
    char all[32];
    snprintf(all, sizeof all, "1-%d", j.shards);
    if (slurm_record_job(dir, id, array ? array : all, j.shards, &e)) {
        cli_errorf("submitted job %s, but %s", id, e.msg);
        goto done;
    }
    printf("%s\n", id);
    fprintf(stderr, "%s: submitted job %s (tasks %s of %d, %d point(s)); see evictbench slurm-status %s\n",
            cfg.name, id, array ? array : all, j.shards, sw.n, config);
    rc = 0;
done:
    free(script);
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

int cmd_slurm_status(int argc, char **argv)
{
    const char *config = NULL, *data_dir = NULL;
    long shards = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { print_status_help(); return 0; }
        if (!strcmp(o, "--shards")) {
            const char *val = cli_value(argc, argv, &i);
            if (!val || cli_int(o, val, 1, SHARD_MAX, &shards)) return 2;
        } else if (!strcmp(o, "--data-dir")) {
            if (!(data_dir = cli_value(argc, argv, &i))) return 2;
        } else if (o[0] == '-') {
            return cli_errorf("slurm-status: unknown option '%s' (see evictbench slurm-status --help)", o), 2;
        } else if (config) {
            return cli_errorf("slurm-status: more than one config given ('%s', '%s')", config, o), 2;
        } else {
            config = o;
        }
    }
    if (!config) return cli_error("slurm-status: missing CONFIG (a .json file or a name in experiments/)"), 2;

    struct eb_err e = {0};
    struct exp_config cfg, copy;
    memset(&copy, 0, sizeof copy);
    struct sweep sw;
    memset(&sw, 0, sizeof sw);
    int *of = NULL, rc = 1, have_sacct = 0;
    char (*states)[SLURM_STATE_LEN] = NULL;
    char (*ids)[SLURM_ID_LEN] = NULL;
    const char **keys = NULL;
    if (exp_config_load(config, &cfg, &e)) return cli_error(e.msg);
    char dir[4096], since[64], copy_path[4096 + 300];
    int submitted = 0;
    if (shard_job_dir(cfg.name, dir, sizeof dir, 0, &e) ||
        slurm_last_job(dir, &submitted, since, sizeof since, &e)) {
        cli_error(e.msg);
        goto done;
    }
    if (!shards) shards = submitted;
    if (!shards) {
        cli_errorf("slurm-status: %s: no submission recorded in %s/jobs.tsv (give --shards N)",
                   cfg.name, dir);
        goto done;
    }
    /* The points as the tasks see them: from the config copy they read. */
    snprintf(copy_path, sizeof copy_path, "%s/%s.json", dir, eb_base_name(dir));
    const struct exp_config *use = &cfg;
    if (access(copy_path, R_OK) == 0) {
        if (exp_config_load(copy_path, &copy, &e)) { cli_error(e.msg); goto done; }
        use = &copy;
    }
    if (expand(use, data_dir, &sw, &e) || shard_assign_sweep(&sw, (int)shards, &of, &e)) {
        cli_error(e.msg);
        goto done;
    }
    states = calloc((size_t)shards, sizeof *states);
    ids = calloc((size_t)shards, sizeof *ids);
    keys = calloc((size_t)(sw.n ? sw.n : 1), sizeof *keys);
    if (!states || !ids || !keys) { cli_error("slurm-status: out of memory"); goto done; }
    int have_queue = slurm_task_states(eb_base_name(dir), since, (int)shards, states, ids, &have_sacct, &e) == 0;
    if (!have_queue) fprintf(stderr, "evictbench: note: no task states: %s\n", e.msg);

    printf("%-9s %-14s %-11s %6s %5s %4s %6s %7s %5s\n", "shard", "task", "state", "points",
           "done", "oom", "failed", "running", "left");
    int tot_pts = 0, tot_ok = 0, tot_oom = 0, tot_err = 0, tot_run = 0, tot_left = 0;
    for (int s = 1; s <= shards; s++) {
        struct tally t = {keys, 0, 0, 0, 0};
        for (int i = 0; i < sw.n; i++)
            if (of[i] == s) keys[t.n++] = sw.pts[i].run_key;
        char db[4096];
        if (shard_default_db(cfg.name, s, (int)shards, db, sizeof db, 0, &e)) { cli_error(e.msg); goto done; }
        struct store *st = NULL;
        struct eb_err de = {0};
        if (access(db, F_OK) == 0) {
            if (store_open_readonly(db, &st, &de) ||
                store_query(st, "SELECT run_key, status FROM runs", tally_row, &t, &de))
                fprintf(stderr, "evictbench: note: %s\n", de.msg);
            store_close(st);
        }
        const char *state = states[s - 1][0] ? states[s - 1] : have_queue && !have_sacct ? "not queued" : "-";
        int left = t.n - t.ok - t.oom;
        int running = !strcmp(state, "RUNNING") && left > 0 ? 1 : 0;
        char name[32];
        snprintf(name, sizeof name, "%d/%ld", s, shards);
        printf("%-9s %-14s %-11s %6d %5d %4d %6d %7d %5d\n", name, ids[s - 1][0] ? ids[s - 1] : "-",
               state, t.n, t.ok, t.oom, t.error, running, left - running);
        tot_pts += t.n;
        tot_ok += t.ok;
        tot_oom += t.oom;
        tot_err += t.error;
        tot_run += running;
        tot_left += left - running;
    }
    printf("%-9s %-14s %-11s %6d %5d %4d %6d %7d %5d\n", "total", "", "", tot_pts, tot_ok, tot_oom,
           tot_err, tot_run, tot_left);
    if (!have_sacct)
        fprintf(stderr, "(sacct gave nothing: accounting is off, so a task that has left the queue "
                        "shows no state; its database says how far it got)\n");
    rc = 0;
done:
    free(states);
    free(ids);
    free(keys);
    free(of);
    sweep_free(&sw);
    exp_config_free(&copy);
    exp_config_free(&cfg);
    return rc;
}
