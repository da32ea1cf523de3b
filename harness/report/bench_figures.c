/* bench_figures.c - the figures of the long-context benchmarks (`bench
 * --contexts`, `bench --max-batch`): decode tokens/s and the speedup over
 * FullKV against context length, and decode tokens/s against batch size up
 * to the largest batch under a KV cap.  plots.c draws them after
 * plot_figures[]; plots/README.md lists their columns. */
#include "harness/report/plot_figures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *cell(const struct panel *p, int row, const char *name)
{
    return view_cell(p->t, row, view_col(p->t, name));
}

/* pol<i> and suf<i> (", budget B") of every series, and nseries. */
static void bench_series(const struct panel *p, struct sbuf *v)
{
    gp_int(v, "nseries", p->nblocks);
    for (int i = 0; i < p->nblocks; i++) {
        char name[32], suf[64] = "";
        const char *b = cell(p, p->block[i], "budget");
        if (b) snprintf(suf, sizeof suf, ", budget %s", b);
        snprintf(name, sizeof name, "pol%d", i + 1);
        gp_str(v, name, cell(p, p->block[i], "policy"));
        snprintf(name, sizeof name, "suf%d", i + 1);
        gp_str(v, name, suf);
    }
}

/* "set xtics (...)" at the distinct values of a column (only_ok: of the rows
 * that ran, so a cross one past the largest batch takes no tic), and any_oom. */
static void bench_axis(const struct panel *p, struct sbuf *v, const char *col, int only_ok)
{
    double x[64];
    int n = 0, c = view_col(p->t, col), cs = view_col(p->t, "status"), any_oom = 0;
    for (int r = p->r0; r < p->r1; r++) {
        double val = view_num(p->t, r, c);
        int oom = str_same(view_cell(p->t, r, cs), "oom"), seen = 0;
        any_oom |= oom;
        if (only_ok && oom) continue;
        for (int i = 0; i < n && !seen; i++) seen = x[i] == val;
        if (isfinite(val) && !seen && n < 64) x[n++] = val;
    }
    struct sbuf cmd = {0};
    sb_printf(&cmd, "set xtics (");
    for (int i = 0; i < n; i++) sb_printf(&cmd, "%s\"%g\" %g", i ? ", " : "", x[i], x[i]);
    sb_printf(&cmd, ")");
    gp_str(v, "xtics_cmd", cmd.oom ? "" : cmd.p);
    free(cmd.p);
    gp_int(v, "any_oom", any_oom);
}

static void bench_titles(const struct panel *p, struct sbuf *v, const char *what,
                         const char *setting)
{
    char t1[512], t2[512];
    const char *th = cell(p, p->r0, "threads");
    snprintf(t1, sizeof t1, "%s: %s, %s KV", what, cell(p, p->r0, "model"),
             cell(p, p->r0, "kv_type"));
    snprintf(t2, sizeof t2, "%s | %s, %s threads | context: %s | median of %s decode steps",
             setting, cell(p, p->r0, "device"), th && strcmp(th, "0") ? th : "all",
             cell(p, p->r0, "fill"), cell(p, p->r0, "n_new"));
    gp_str(v, "title1", t1);
    gp_str(v, "title2", t2);
}

static int vars_context(const struct panel *p, struct sbuf *v, const char *what, char *why,
                        size_t nwhy)
{
    int c = view_col(p->t, "decode_tok_s"), any = 0;
    for (int r = p->r0; r < p->r1 && !any; r++) any = isfinite(view_num(p->t, r, c));
    if (!any) {
        snprintf(why, nwhy, "no point ran (every one out of memory)");
        return 1;
    }
    char setting[64];
    snprintf(setting, sizeof setting, "batch %s", cell(p, p->r0, "batch_size"));
    bench_titles(p, v, what, setting);
    bench_series(p, v);
    bench_axis(p, v, "context", 0);
    return 0;
}

static int vars_throughput(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                           char *why, size_t nwhy)
{
    (void)c;
    return vars_context(p, v, "Decode throughput vs context", why, nwhy);
}

static int vars_speedup(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                        char *why, size_t nwhy)
{
    (void)c;
    return vars_context(p, v, "Decode speedup over FullKV vs context", why, nwhy);
}

static int vars_max_batch(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                          char *why, size_t nwhy)
{
    (void)c, (void)why, (void)nwhy;
    char setting[128];
    double cap = view_num(p->t, p->r0, view_col(p->t, "kv_cap_bytes"));
    snprintf(setting, sizeof setting, "K+V cap %.0f MiB", cap / 1048576.0);
    bench_titles(p, v, "Decode throughput vs batch size under a KV cap", setting);
    bench_series(p, v);
    bench_axis(p, v, "batch_size", 1);
    int cmax = view_col(p->t, "max_ok_batch_size");
    for (int i = 0; i < p->nblocks; i++) {
        char name[32];
        snprintf(name, sizeof name, "maxok%d", i + 1);
        gp_num(v, name, view_num(p->t, p->block[i], cmax));
    }
    return 0;
}

static const char context_columns[] =
    "model, device, threads, kv_type, fill, n_new, batch_size, context, policy, budget, "
    "status, est_bytes, decode_tok_s, decode_step_ms, compress_first_ms, kv_bytes, "
    "fullkv_tok_s, speedup, compress_in_fullkv_steps";

const struct figure bench_figures[] = {
    {"bench_throughput_vs_context", "v_bench_context", context_columns, NULL,
     {"model", "device", "threads", "kv_type", "batch_size", "fill", "n_new", NULL},
     {"policy", "budget", NULL}, "context", vars_throughput},
    {"bench_speedup_vs_context", "v_bench_context", context_columns, "policy <> 'fullkv'",
     {"model", "device", "threads", "kv_type", "batch_size", "fill", "n_new", NULL},
     {"policy", "budget", NULL}, "context", vars_speedup},
    {"bench_max_batch", "v_bench_max_batch",
     "model, device, threads, kv_type, fill, n_new, kv_cap_bytes, policy, budget, batch_size, "
     "context, status, est_bytes, decode_tok_s, decode_step_ms, max_ok_batch_size",
     NULL, {"model", "device", "threads", "kv_type", "kv_cap_bytes", "fill", "n_new", NULL},
     {"policy", "budget", NULL}, "batch_size", vars_max_batch},
};
const int bench_n_figures = (int)(sizeof bench_figures / sizeof bench_figures[0]);
