/* cmd_plots.c - `evictbench plots` (figures through gnuplot) and
 * `evictbench tables` (Markdown and LaTeX) from the results database. */
#include "harness/cli/cmd_plots.h"

#include <stdio.h>
#include <string.h>

#include "harness/cli/cli.h"
#include "harness/report/plots.h"
#include "harness/store/store.h"
#include "harness/report/tables.h"

struct counts {
    int figures, data, skipped;
};

static void print_plots_event(void *ctx, enum plots_event ev, const char *figure, const char *text)
{
    struct counts *n = ctx;
    switch (ev) {
    case PLOTS_DATA: n->data++; break;
    case PLOTS_FIGURE:
        n->figures++;
        printf("%-34s %s.png, .svg\n", figure, text);
        break;
    case PLOTS_SKIPPED:
        n->skipped++;
        printf("%-34s %s\n", figure, text);
        break;
    case PLOTS_TABLE: break;
    }
}

static void print_plots_help(void)
{
    printf("usage: evictbench plots [--db PATH] [--out DIR] [--scripts DIR] [--gnuplot PATH] [--data-only]\n\n"
           "Exports every figure's view of the results database to tab-separated data files\n"
           "under DIR/data and renders them with gnuplot (pngcairo and svg terminals, no\n"
           "display needed) as DIR/<figure>__<panel>.png and .svg.  Figures whose view has\n"
           "no rows are skipped with a message.  plots/README.md lists the figures.\n\n"
           "  --db PATH       results database (default results/results.db)\n"
           "  --out DIR       output directory (default results/plots)\n"
           "  --scripts DIR   the gnuplot scripts (default plots)\n"
           "  --gnuplot PATH  gnuplot executable (default gnuplot on PATH)\n"
           "  --data-only     write the data files, do not run gnuplot\n");
}

static int open_db(const char *db, struct store **s)
{
    struct eb_err e = {0};
    if (store_open_reader(db, s, &e) != 0)
        return cli_errorf("%s (run an experiment first, e.g. make exp)", e.msg);
    return 0;
}

int cmd_plots(int argc, char **argv)
{
    const char *db = "results/results.db", *out = "results/plots", *scripts = "plots", *gnuplot = NULL;
    int data_only = 0;
    for (int i = 1; i < argc; i++) {
        const char **opt = NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { print_plots_help(); return 0; }
        if (!strcmp(argv[i], "--data-only")) { data_only = 1; continue; }
        if (!strcmp(argv[i], "--db")) opt = &db;
        else if (!strcmp(argv[i], "--out")) opt = &out;
        else if (!strcmp(argv[i], "--scripts")) opt = &scripts;
        else if (!strcmp(argv[i], "--gnuplot")) opt = &gnuplot;
        else return cli_errorf("plots: unknown argument '%s' (see evictbench plots --help)", argv[i]);
        if (!(*opt = cli_value(argc, argv, &i))) return 2;
    }
    struct eb_err e = {0};
    int render = !data_only, missing_gnuplot = 0;
    if (render && plots_gnuplot_check(gnuplot, &e) != 0) {
        render = 0;
        missing_gnuplot = 1;
    }
    struct store *s = NULL;
    if (open_db(db, &s)) return 1;
    struct counts n = {0, 0, 0};
    struct plots_options o = {out, scripts, gnuplot, render, print_plots_event, &n, 0};
    int rc = plots_make(s, &o, &e);
    store_close(s);
    if (rc) return cli_errorf("plots: %s", e.msg);
    if (missing_gnuplot)
        return cli_errorf("plots: %s; %d data files written to %s/data, no figures", e.msg, n.data, out);
    if (render) printf("%d figures (PNG and SVG) in %s, %d skipped\n", n.figures, out, n.skipped);
    else printf("%d data files in %s/data, %d skipped\n", n.data, out, n.skipped);
    return 0;
}

static void print_tables_event(void *ctx, enum tables_event ev, const char *table, const char *text)
{
    struct counts *n = ctx;
    if (ev == TABLES_WRITTEN) n->figures++;
    else n->skipped++;
    printf("%-22s %s\n", table, text);
}

static void print_tables_help(void)
{
    printf("usage: evictbench tables [--db PATH] [--out DIR]\n\n"
           "Renders the paper tables (accuracy and generation length by budget, throughput\n"
           "and largest batch, ablation, PSS of correct vs incorrect traces, fidelity) from\n"
           "the results database as DIR/<table>.md and DIR/<table>.tex (booktabs), one table\n"
           "per model, dataset and setting, best value per column in bold.\n\n"
           "  --db PATH   results database (default results/results.db)\n"
           "  --out DIR   output directory (default results/tables)\n");
}

int cmd_tables(int argc, char **argv)
{
    const char *db = "results/results.db", *out = "results/tables";
    for (int i = 1; i < argc; i++) {
        const char **opt = NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { print_tables_help(); return 0; }
        if (!strcmp(argv[i], "--db")) opt = &db;
        else if (!strcmp(argv[i], "--out")) opt = &out;
        else return cli_errorf("tables: unknown argument '%s' (see evictbench tables --help)", argv[i]);
        if (!(*opt = cli_value(argc, argv, &i))) return 2;
    }
    struct store *s = NULL;
    if (open_db(db, &s)) return 1;
    struct counts n = {0, 0, 0};
    struct tables_options o = {out, print_tables_event, &n};
    struct eb_err e = {0};
    int rc = tables_make(s, &o, &e);
    store_close(s);
    if (rc) return cli_errorf("tables: %s", e.msg);
    printf("%d files in %s, %d skipped\n", n.figures, out, n.skipped);
    return 0;
}
