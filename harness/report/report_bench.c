/* report_bench.c - the report's bench section: the rows of the long-context
 * benchmarks (views v_bench_context and v_bench_max_batch) as tables, or a
 * note saying the database has none and which command measures them.  The
 * bench figures themselves are drawn with the others (report_figures.c). */
#include "harness/report/report_priv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct bench_col {
    const char *name, *head;
    int text;           /* 1: left-aligned text; 0: a number */
    const char *fmt;    /* printf format of a number; NULL: as stored */
};

struct bench_view {
    const char *id, *title, *view, *sql;
    const struct bench_col *cols;
};

static const struct bench_col CONTEXT_COLS[] = {
    {"model", "model", 1, NULL}, {"kv_type", "KV", 1, NULL}, {"batch_size", "batch", 0, NULL},
    {"context", "context", 0, NULL}, {"policy", "policy", 1, NULL}, {"budget", "budget", 0, NULL},
    {"status", "status", 1, NULL}, {"decode_tok_s", "decode tokens/s", 0, "%.2f"},
    {"speedup", "x FullKV", 0, "%.2fx"}, {"compress_first_ms", "first compression ms", 0, "%.0f"},
    {"kv_bytes", "KV MiB", 0, "mib"}, {NULL, NULL, 0, NULL},
};

static const struct bench_col MAX_BATCH_COLS[] = {
    {"model", "model", 1, NULL}, {"kv_type", "KV", 1, NULL}, {"kv_cap_bytes", "KV cap MiB", 0, "mib"},
    {"policy", "policy", 1, NULL}, {"budget", "budget", 0, NULL}, {"batch_size", "batch", 0, NULL},
    {"status", "status", 1, NULL}, {"decode_tok_s", "decode tokens/s", 0, "%.2f"},
    {"max_ok_batch_size", "largest batch", 0, NULL}, {NULL, NULL, 0, NULL},
};

static const struct bench_view VIEWS[] = {
    {"bench-context-table", "Decode speed against context", "v_bench_context",
     "SELECT * FROM v_bench_context ORDER BY model, device, threads, kv_type, fill, "
     "n_new, batch_size, context, policy <> 'fullkv', policy, budget", CONTEXT_COLS},
    {"bench-max-batch-table", "The largest batch under a KV cap", "v_bench_max_batch",
     "SELECT * FROM v_bench_max_batch ORDER BY model, device, threads, kv_type, fill, "
     "n_new, kv_cap_bytes, policy <> 'fullkv', policy, budget, batch_size", MAX_BATCH_COLS},
};
enum { N_VIEWS = sizeof VIEWS / sizeof VIEWS[0] };

/* One cell: the stored value in data-v (what the tests compare), the text shown. */
static void bench_cell(struct sbuf *b, const struct view_rows *t, int r, const struct bench_col *c)
{
    int col = view_col(t, c->name);
    const char *raw = col >= 0 ? view_cell(t, r, col) : NULL;
    char shown[64];
    const char *text = raw;
    if (raw && !c->text && c->fmt) {
        double v = view_num(t, r, col);
        if (!strcmp(c->fmt, "mib")) snprintf(shown, sizeof shown, "%.0f", v / (1024.0 * 1024.0));
        else snprintf(shown, sizeof shown, c->fmt, v);
        text = isfinite(v) ? shown : raw;
    } else if (raw && !strcmp(c->name, "policy")) {
        text = policy_display_name(raw);
    }
    sb_printf(b, "<td%s data-v=\"", c->text ? " class=\"t\"" : "");
    html_text(b, raw ? raw : "");
    sb_printf(b, "\">");
    html_text(b, text ? text : "—");
    sb_printf(b, "</td>");
}

/* One view as a table; *n receives its row count (0: nothing written). */
static int bench_table(struct store *s, const struct bench_view *v, struct sbuf *b, int *n,
                       struct eb_err *e)
{
    *n = 0;
    int exists = view_exists(s, v->view, e);
    if (exists <= 0) return exists;
    struct view_rows t;
    if (view_rows_load(s, v->sql, &t, e)) return eb_wrap(e, v->view);
    *n = t.nrows;
    if (t.nrows) {
        sb_printf(b, "<h3>%s</h3>\n<table id=\"%s\" class=\"sortable\" data-view=\"%s\">\n"
                     "<thead><tr>", v->title, v->id, v->view);
        for (const struct bench_col *c = v->cols; c->name; c++)
            sb_printf(b, "<th data-col=\"%s\" data-type=\"%s\"%s>%s</th>", c->name,
                      c->text ? "text" : "num", c->text ? " class=\"t\"" : "", c->head);
        sb_printf(b, "</tr></thead>\n<tbody>\n");
        for (int r = 0; r < t.nrows; r++) {
            sb_printf(b, "<tr data-bench-row=\"%d\">", r + 1);
            for (const struct bench_col *c = v->cols; c->name; c++) bench_cell(b, &t, r, c);
            sb_printf(b, "</tr>\n");
        }
        sb_printf(b, "</tbody>\n</table>\n");
    }
    view_rows_free(&t);
    return 0;
}

int report_bench(struct store *s, struct sbuf *b, int *n_rows, struct eb_err *e)
{
    *n_rows = 0;
    sb_printf(b, "<section id=\"bench\">\n<h2>Benchmarks</h2>\n<p class=\"note\">What eviction "
                 "buys in speed and memory: decode tokens/s as the context grows, FullKV against "
                 "policies at a fixed budget, and the largest batch whose K+V fits a cap "
                 "(<code>evictbench bench --contexts</code>, <code>--max-batch</code>; their "
                 "figures are under Figures).</p>\n");
    for (int i = 0; i < N_VIEWS; i++) {
        int n = 0;
        if (bench_table(s, &VIEWS[i], b, &n, e)) return eb_wrap(e, "bench section");
        *n_rows += n;
    }
    if (*n_rows == 0)
        sb_printf(b, "<p id=\"no-bench\">This database holds no bench rows yet.  <code>make "
                     "exp</code> measures a short one (<code>make exp-bench</code>); "
                     "<code>make bench-long DB=...</code> measures the full curves, then "
                     "<code>evictbench report</code> shows them here.</p>\n");
    sb_printf(b, "</section>\n");
    return 0;
}
