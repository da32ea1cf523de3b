/* cmd_exp.c - `evictbench exp CONFIG`, and what `run` (cmd_run.c) shares
 * with it: the common options and running a sweep into the store. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness/cli/cli.h"
#include "harness/cli/cmd_exp.h"
#include "harness/cli/exp_common.h"
#include "harness/exp/code_hash.h"
#include "harness/exp/config.h"
#include "harness/exp/device.h"
#include "harness/exp/runner.h"
#include "harness/store/store.h"
#include "harness/exp/sweep.h"
#include "harness/cluster/shard.h"

/* Set by the SIGINT handler; the runner stops after the current batch. */
static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig)
{
    (void)sig;
    if (stop_requested) _exit(130); /* a second ^C: leave now (the store stays consistent) */
    stop_requested = 1;
}

static void fmt_time(double s, char *buf, size_t cap)
{
    if (s < 0) { snprintf(buf, cap, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

static void print_progress(void *ctx, const struct runner_progress *p)
{
    const struct exp_common *c = ctx;
    if (c->quiet) return;
    char eta[32], seta[32];
    fmt_time(p->eta_s, eta, sizeof eta);
    fmt_time(p->sweep_eta_s, seta, sizeof seta);
    if (!strcmp(p->event, "skip")) {
        fprintf(stderr, "[%d/%d] skip (done before): %s\n", p->point, p->n_points, p->label);
    } else if (!strcmp(p->event, "batch")) {
        fprintf(stderr, "[%d/%d] %s: %d/%d samples, %.1f tok/s, ETA %s (sweep %s)\n", p->point,
                p->n_points, p->label, p->samples_done, p->n_samples, p->tokens_per_s, eta, seta);
    } else {
        fprintf(stderr, "[%d/%d] %s: %s (%d samples, %ld tokens, %.1f s)\n", p->point, p->n_points,
                p->event, p->label, p->n_samples, p->gen_tokens, p->elapsed_s);
    }
}

/* "done" (recorded under this key: a rerun skips it), "stale" (recorded for
 * the same point under another key: code, data or parameters changed), or
 * "new".  Without a database every point is new. */
static const char *point_state(struct store *st, const struct point *p, struct eb_err *e)
{
    if (!st) return "new";
    struct run_record r;
    run_record_init(&r);
    r.run_key = p->run_key;
    r.model = p->model;
    r.dataset = p->dataset;
    r.data_offset = p->data_offset;
    r.data_limit = p->data_limit >= 0 ? p->data_limit : STORE_NONE;
    r.policy = p->policy->name;
    r.budget = point_store_budget(p);
    r.batch_size = p->batch_size;
    r.batching = batching_name(p->batching);
    int done = store_run_done(st, p->run_key, e);
    if (done) return done > 0 ? "done" : NULL;
    int seen = store_point_seen(st, &r, e);
    return seen < 0 ? NULL : seen ? "stale" : "new";
}

static int print_points(const struct sweep *s, const char *db)
{
    struct eb_err e = {0};
    struct store *st = NULL;
    if (access(db, F_OK) == 0 && store_open_readonly(db, &st, &e)) return cli_error(e.msg);
    int n_done = 0, n_stale = 0;
    printf("code %s; state against %s\n", code_version(), st ? db : "(no database yet)");
    for (int i = 0; i < s->n; i++) {
        char label[512];
        sweep_point_label(&s->pts[i], label, sizeof label);
        const char *state = point_state(st, &s->pts[i], &e);
        if (!state) { store_close(st); return cli_error(e.msg); }
        n_done += state[0] == 'd';
        n_stale += state[0] == 's';
        printf("%4d  %.12s  %-5s  %s\n", i + 1, s->pts[i].run_key, state, label);
    }
    printf("%d point(s): %d done, %d stale, %d new\n", s->n, n_done, n_stale,
           s->n - n_done - n_stale);
    store_close(st);
    return 0;
}

/* Validate, expand and run a parsed config. */
static int run_config(struct exp_config *cfg, const struct exp_common *c)
{
    struct eb_err e = {0};
    struct sweep sw;
    if (exp_config_set_device(cfg, c->device, &e)) return cli_error(e.msg);
    if (!c->dry_run && device_ready(cfg->device, &e)) return cli_error(e.msg);
    if (!c->dry_run && exp_config_check_resources(cfg, c->data_dir, &e)) {
        cli_error(e.msg);
        if (strstr(e.msg, "$.models["))
            fprintf(stderr, "evictbench: or run the same sweep on a model you have: evictbench exp %s "
                            "--model NAME (make exp CONFIG=%s MODEL=NAME), e.g. qwen2.5-coder-1.5b, "
                            "which make deps fetches\n", cfg->name, cfg->name);
        return 1;
    }
    if (sweep_expand(cfg, c->data_dir, &sw, &e)) return cli_error(e.msg);
    if (cfg->n_budget_fracs) return exp_run_fractions(cfg, &sw, c);
    return exp_run_sweep(cfg, &sw, c);
}

int exp_run_sweep(struct exp_config *cfg, struct sweep *s, const struct exp_common *c)
{
    struct eb_err e = {0};
    struct sweep sw = *s;
    struct store *st = NULL;
    struct runner *r = NULL;
    int rc = 1;
    /* A shard runs its part of the points (harness/cluster/shard.h). */
    struct sweep part = sw, *todo = &sw;
    if (c->shard_count) {
        if (shard_view(&sw, c->shard_index, c->shard_count, &part, &e)) {
            sweep_free(&sw);
            return cli_error(e.msg);
        }
        todo = &part;
    }
    if (c->dry_run) {
        if (print_points(todo, c->db)) { if (todo != &sw) shard_view_free(&part); sweep_free(&sw); return 1; }
        if (todo != &sw) shard_view_free(&part);
        if (exp_config_check_resources(cfg, c->data_dir, &e))
            fprintf(stderr, "evictbench: note: %s\n", e.msg);
        sweep_free(&sw);
        return 0;
    }
    int64_t exp_id = 0;
    if (store_open(c->db, &st, &e) ||
        store_begin_experiment(st, cfg->name, cfg->json, code_version(), &exp_id, &e)) {
        cli_error(e.msg);
        goto done;
    }
    struct runner_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.data_dir = c->data_dir;
    ro.threads = (int)c->threads;
    ro.mem_limit = (size_t)c->mem_limit_mb << 20;
    ro.stop = &stop_requested;
    ro.progress = print_progress;
    ro.progress_ctx = (void *)c;
    ro.device = cfg->device ? cfg->device : "cpu";
    if (runner_create(&ro, &r, &e)) { cli_error(e.msg); goto done; }

    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    struct sweep_summary sum;
    int src = runner_sweep(r, todo, st, exp_id, &sum, &e);
    sigaction(SIGINT, &old, NULL);
    if (src) { cli_error(e.msg); goto done; }
    fprintf(stderr, "%s: %d point(s): %d run, %d skipped (done before), %d oom, %d error%s -> %s\n",
            cfg->name, sum.n_points, sum.ok, sum.skipped, sum.oom, sum.errors,
            sum.interrupted ? "; interrupted" : "", c->db);
    rc = sum.interrupted ? 130 : sum.errors ? 1 : 0;
done:
    runner_free(r);
    store_close(st);
    if (todo != &sw) shard_view_free(&part);
    sweep_free(&sw);
    return rc;
}

int exp_common_option(int argc, char **argv, int *i, struct exp_common *c)
{
    const char *o = argv[*i], *v;
    if (!strcmp(o, "--dry-run")) { c->dry_run = 1; return 1; }
    if (!strcmp(o, "--quiet")) { c->quiet = 1; return 1; }
    if (strcmp(o, "--db") && strcmp(o, "--data-dir") && strcmp(o, "--threads") &&
        strcmp(o, "--mem-limit") && strcmp(o, "--device"))
        return 0;
    if (!(v = cli_value(argc, argv, i))) return -1;
    if (!strcmp(o, "--db")) c->db = v;
    else if (!strcmp(o, "--device")) {
        struct eb_err e = {0};
        if (device_check(v, &e)) { cli_error(e.msg); return -1; }
        c->device = v;
    }
    else if (!strcmp(o, "--data-dir")) c->data_dir = v;
    else if (!strcmp(o, "--threads")) return cli_int(o, v, 1, 1024, &c->threads) ? -1 : 1;
    else if (!strcmp(o, "--mem-limit")) return cli_int(o, v, 1, 1L << 40, &c->mem_limit_mb) ? -1 : 1;
    return 1;
}

const char EXP_COMMON_HELP[] =
    "  --db FILE            results database (default results/results.db)\n"
    "  --data-dir DIR       dataset files (default $EVICTBENCH_DATA, else datasets/data)\n"
    "  --threads N          CPU threads (default: all cores)\n"
    "  --device D           cpu (default) or cuda[:N] (a build from make cuda)\n"
    "  --mem-limit MB       memory a batch may use; a batch that does not fit is 'oom'\n"
    "                       (default: weights + available RAM)\n"
    "  --dry-run            print the expanded points and their run keys, run nothing\n"
    "  --quiet              no progress on stderr\n";

int cmd_exp(int argc, char **argv)
{
    const char *config = NULL, *model = NULL;
    struct exp_common c = {0};  /* --db default: results/results.db, or the shard's own file */
    char shard_db[4096];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: evictbench exp CONFIG.json|NAME [options]\n\n"
                   "Runs every point of an experiment config (NAME: experiments/NAME.json) that\n"
                   "is not yet in the results database; a rerun resumes a killed sweep.\n\n%s"
                   "  --model NAME         run the sweep as written on this model (a registry name,\n"
                   "                       a .gguf file or a checkpoint directory) instead of the\n"
                   "                       config's models; run keys and the report name it\n"
                   "  --shard I/N          run only shard I of N (1 <= I <= N): the points split by\n"
                   "                       run key, balanced by samples x max tokens; default --db\n"
                   "                       results/slurm/<config>/shard-I-of-N.db (see `slurm`)\n",
                   EXP_COMMON_HELP);
            return 0;
        }
        int k = exp_common_option(argc, argv, &i, &c);
        if (k < 0) return 2;
        if (k) continue;
        if (!strcmp(argv[i], "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return 2;
            continue;
        }
        if (!strcmp(argv[i], "--shard")) {
            struct eb_err se = {0};
            const char *v = cli_value(argc, argv, &i);
            if (!v) return 2;
            if (shard_parse(v, &c.shard_index, &c.shard_count, &se)) return cli_error(se.msg), 2;
            continue;
        }
        if (argv[i][0] == '-') return cli_errorf("exp: unknown option '%s' (see evictbench exp --help)", argv[i]), 2;
        if (config) return cli_errorf("exp: more than one config given ('%s', '%s')", config, argv[i]), 2;
        config = argv[i];
    }
    if (!config) return cli_error("exp: missing CONFIG (a .json file or a name in experiments/)"), 2;
    struct exp_config cfg;
    struct eb_err e = {0};
    if (exp_config_load(config, &cfg, &e)) return cli_error(e.msg);
    if (exp_config_set_model(&cfg, model, &e)) {
        exp_config_free(&cfg);
        return cli_error(e.msg);
    }
    if (!c.db && c.shard_count) {
        if (shard_default_db(cfg.name, c.shard_index, c.shard_count, shard_db, sizeof shard_db,
                             !c.dry_run, &e)) {
            exp_config_free(&cfg);
            return cli_error(e.msg);
        }
        c.db = shard_db;
    }
    if (!c.db) c.db = "results/results.db";
    int rc = run_config(&cfg, &c);
    exp_config_free(&cfg);
    return rc;
}
