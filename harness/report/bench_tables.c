/* bench_tables.c - the tables of the long-context benchmarks, as Markdown and
 * LaTeX: decode speed, speedup over FullKV and compression time against
 * context (bench_context, view v_bench_context), and the batch sweep under a
 * KV cap with the largest batch per policy (bench_max_batch, view
 * v_bench_max_batch).  One table per panel: model, device, threads, KV type,
 * fill (and the cap). */
#include "harness/report/tables.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/report/plots.h"
#include "harness/report/table_grid.h"

struct bench_table {
    const char *name, *view, *sql;
    const char *panel[8];
    int kind;                   /* 0: context, 1: max batch */
};

static const struct bench_table bench_tables[] = {
    {"bench_context", "v_bench_context",
     "SELECT model, device, threads, kv_type, fill, n_new, batch_size, context, policy, budget, "
     "status, est_bytes, decode_tok_s, decode_step_ms, speedup, compress_first_ms, "
     "compress_in_fullkv_steps, kv_bytes, peak_rss_mb, prefill_s FROM v_bench_context "
     "ORDER BY model, device, threads, kv_type, fill, n_new, batch_size, context, "
     "policy <> 'fullkv', policy, budget",
     {"model", "device", "threads", "kv_type", "fill", "n_new", NULL}, 0},
    {"bench_max_batch", "v_bench_max_batch",
     "SELECT model, device, threads, kv_type, fill, n_new, kv_cap_bytes, policy, budget, "
     "batch_size, context, status, est_bytes, decode_tok_s, decode_step_ms, max_ok_batch_size "
     "FROM v_bench_max_batch ORDER BY model, device, threads, kv_type, fill, n_new, "
     "kv_cap_bytes, policy <> 'fullkv', policy, budget, batch_size",
     {"model", "device", "threads", "kv_type", "fill", "n_new", "kv_cap_bytes", NULL}, 1},
};

static const char *cell(const struct view_rows *t, int r, const char *name)
{
    return view_cell(t, r, view_col(t, name));
}

static double num(const struct view_rows *t, int r, const char *name)
{
    return view_num(t, r, view_col(t, name));
}

static void policy_label(const struct view_rows *t, int r, char *out, size_t n)
{
    const char *b = cell(t, r, "budget");
    snprintf(out, n, "%s%s%s", policy_display_name(cell(t, r, "policy")), b ? " " : "", b ? b : "");
}

/* One row of the context table. */
static void context_row(struct grid *g, const struct view_rows *t, int r)
{
    char pol[96];
    int row = grid_row(g, !strcmp(cell(t, r, "policy"), "fullkv"));
    policy_label(t, r, pol, sizeof pol);
    grid_num(g, row, 0, num(t, r, "batch_size"), 0);
    grid_num(g, row, 1, num(t, r, "context"), 0);
    grid_set(g, row, 2, pol, NAN);
    if (!strcmp(cell(t, r, "status"), "oom")) {
        char est[64];
        snprintf(est, sizeof est, "oom (needs %.0f MiB)", num(t, r, "est_bytes") / 1048576.0);
        grid_set(g, row, 3, est, NAN);
        return;
    }
    grid_num(g, row, 3, num(t, r, "decode_tok_s"), 2);
    grid_num(g, row, 4, num(t, r, "decode_step_ms"), 1);
    grid_num(g, row, 5, num(t, r, "speedup"), 2);
    grid_num(g, row, 6, num(t, r, "compress_first_ms"), 0);
    grid_num(g, row, 7, num(t, r, "compress_in_fullkv_steps"), 1);
    grid_num(g, row, 8, num(t, r, "kv_bytes") / 1048576.0, 1);
    grid_num(g, row, 9, num(t, r, "peak_rss_mb"), 0);
    grid_num(g, row, 10, num(t, r, "prefill_s"), 2);
}

static void max_batch_row(struct grid *g, const struct view_rows *t, int r)
{
    char pol[96], bs[32];
    int row = grid_row(g, !strcmp(cell(t, r, "policy"), "fullkv"));
    policy_label(t, r, pol, sizeof pol);
    double b = num(t, r, "batch_size");
    snprintf(bs, sizeof bs, "%.0f%s", b, b == num(t, r, "max_ok_batch_size") ? " (largest)" : "");
    grid_set(g, row, 0, pol, NAN);
    grid_set(g, row, 1, bs, NAN);
    grid_num(g, row, 2, num(t, r, "context"), 0);
    grid_num(g, row, 3, num(t, r, "est_bytes") / 1048576.0, 1);
    if (!strcmp(cell(t, r, "status"), "oom")) {
        grid_set(g, row, 4, "oom (over the cap)", NAN);
        return;
    }
    grid_num(g, row, 4, num(t, r, "decode_tok_s"), 2);
    grid_num(g, row, 5, num(t, r, "decode_step_ms"), 1);
}

static void heads(struct grid *g, int kind)
{
    static const char *const ctx[] = {"batch", "context", "policy", "decode tok/s", "step ms",
                                      "vs FullKV", "1st compression ms", "in FullKV steps",
                                      "decode KV MiB", "peak RSS MiB", "prefill s"};
    static const char *const mb[] = {"policy", "batch", "context", "K+V MiB", "decode tok/s",
                                     "step ms"};
    int n = kind ? 6 : 11;
    grid_init(g, n);
    for (int c = 0; c < n; c++) grid_head(g, c, BEST_NONE, kind ? mb[c] : ctx[c]);
}

static void caption(const struct view_rows *t, int r, int kind, char *out, size_t n)
{
    const char *th = cell(t, r, "threads");
    int w = snprintf(out, n, "%s, %s KV, %s, %s threads; context reached by %s; median of %s "
                     "decode steps", cell(t, r, "model"), cell(t, r, "kv_type"),
                     cell(t, r, "device"), th && strcmp(th, "0") ? th : "all", cell(t, r, "fill"),
                     cell(t, r, "n_new"));
    if (kind && w > 0 && (size_t)w < n)
        snprintf(out + w, n - (size_t)w, "; K+V cap %.0f MiB",
                 num(t, r, "kv_cap_bytes") / 1048576.0);
}

static int write_panel(FILE *md, FILE *tex, const struct bench_table *d, const struct view_rows *t,
                       int r0, int r1)
{
    struct grid g;
    heads(&g, d->kind);
    for (int r = r0; r < r1; r++) {
        if (d->kind) max_batch_row(&g, t, r);
        else context_row(&g, t, r);
    }
    char cap[512], label[64];
    caption(t, r0, d->kind, cap, sizeof cap);
    snprintf(label, sizeof label, "tab:%s", d->name);
    write_md(md, &g, d->kind ? "Largest batch under a KV cap" : "Decode speed vs context", cap);
    write_tex(tex, &g, cap, label);
    int err = g.err;
    grid_free(&g);
    return err ? -1 : 0;
}

static int same_panel(const struct view_rows *t, const struct bench_table *d, int a, int b)
{
    for (int i = 0; d->panel[i]; i++) {
        const char *x = cell(t, a, d->panel[i]), *y = cell(t, b, d->panel[i]);
        if (!x || !y ? x != y : strcmp(x, y) != 0) return 0;
    }
    return 1;
}

static int make_one(struct store *s, const struct bench_table *d, const struct tables_options *o,
                    struct eb_err *e)
{
    int exists = view_exists(s, d->view, e);
    if (exists < 0) return eb_wrap(e, d->name);
    if (!exists) {
        if (o->note) o->note(o->ctx, TABLES_SKIPPED, d->name, "skipped: the database predates the bench table");
        return 0;
    }
    struct view_rows t;
    if (view_rows_load(s, d->sql, &t, e)) return eb_wrap(e, d->name);
    if (t.nrows == 0) {
        if (o->note) o->note(o->ctx, TABLES_SKIPPED, d->name, "skipped: no bench rows");
        view_rows_free(&t);
        return 0;
    }
    char md_path[4096], tex_path[4096];
    snprintf(md_path, sizeof md_path, "%s/%s.md", o->out_dir, d->name);
    snprintf(tex_path, sizeof tex_path, "%s/%s.tex", o->out_dir, d->name);
    FILE *md = fopen(md_path, "w"), *tex = fopen(tex_path, "w");
    int rc = 0;
    if (!md || !tex) rc = eb_fail(e, "%s: cannot write: %s", !md ? md_path : tex_path, strerror(errno));
    if (rc == 0) {
        fprintf(md, "<!-- %s: generated by evictbench tables from %s; do not edit -->\n\n", d->name, d->view);
        fprintf(tex, "%% %s: generated by evictbench tables from %s; needs \\usepackage{booktabs}\n\n",
                d->name, d->view);
    }
    for (int r0 = 0, r1; rc == 0 && r0 < t.nrows; r0 = r1) {
        for (r1 = r0 + 1; r1 < t.nrows && same_panel(&t, d, r0, r1);) r1++;
        if (write_panel(md, tex, d, &t, r0, r1)) rc = eb_fail(e, "%s: out of memory", d->name);
    }
    int bad = (md && (ferror(md) | fclose(md))) | (tex && (ferror(tex) | fclose(tex)));
    if (rc == 0 && bad) rc = eb_fail(e, "%s: write failed", md_path);
    if (rc == 0 && o->note) {
        o->note(o->ctx, TABLES_WRITTEN, d->name, md_path);
        o->note(o->ctx, TABLES_WRITTEN, d->name, tex_path);
    }
    view_rows_free(&t);
    return rc;
}

int bench_tables_make(struct store *s, const struct tables_options *o, struct eb_err *e)
{
    for (size_t i = 0; i < sizeof bench_tables / sizeof bench_tables[0]; i++)
        if (make_one(s, &bench_tables[i], o, e)) return -1;
    return 0;
}
