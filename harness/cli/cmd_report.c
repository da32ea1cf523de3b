/* cmd_report.c - `evictbench report`: the static HTML report of a results
 * database (harness/report/report.h). */
#include "harness/cli/cmd_plots.h"

#include <stdio.h>
#include <string.h>

#include "harness/cli/cli.h"
#include "harness/report/report.h"
#include "harness/store/store.h"
#include "util/clock.h"

static void print_report_help(void)
{
    printf("usage: evictbench report [--db PATH] [--out DIR] [--scripts DIR] [--gnuplot PATH]\n"
           "                         [--site DIR] [--data DIR]\n\n"
           "Writes a static, self-contained site from the results database: DIR/index.html\n"
           "(the runs table, every figure as SVG with its data, the problems, provenance)\n"
           "and DIR/problems/*.html (each run's output side by side, with which tokens each\n"
           "policy kept).  Open DIR/index.html in a browser; nothing is fetched.\n\n"
           "  --db PATH       results database (default results/results.db)\n"
           "  --out DIR       the site (default results/report)\n"
           "  --scripts DIR   the gnuplot scripts (default plots)\n"
           "  --gnuplot PATH  gnuplot executable (default gnuplot on PATH; without one the\n"
           "                  report has no figures and says why)\n"
           "  --site DIR      report.css and report.js (default harness/report/site)\n"
           "  --data DIR      datasets, for the questions (default $EVICTBENCH_DATA or\n"
           "                  datasets/data)\n");
}

int cmd_report(int argc, char **argv)
{
    struct report_options o = {"results/results.db", "results/report", "plots", NULL, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        const char **opt = NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { print_report_help(); return 0; }
        if (!strcmp(argv[i], "--db")) opt = &o.db_path;
        else if (!strcmp(argv[i], "--out")) opt = &o.out_dir;
        else if (!strcmp(argv[i], "--scripts")) opt = &o.script_dir;
        else if (!strcmp(argv[i], "--gnuplot")) opt = &o.gnuplot;
        else if (!strcmp(argv[i], "--site")) opt = &o.site_dir;
        else if (!strcmp(argv[i], "--data")) opt = &o.data_dir;
        else return cli_errorf("report: unknown argument '%s' (see evictbench report --help)", argv[i]);
        if (!(*opt = cli_value(argc, argv, &i))) return 2;
    }
    struct eb_err e = {0};
    struct store *s = NULL;
    if (store_open_reader(o.db_path, &s, &e) != 0)
        return cli_errorf("report: %s (run an experiment first, e.g. make exp)", e.msg);
    double t0 = clock_now_s();
    struct report_summary sum;
    int rc = report_make(s, &o, &sum, &e);
    store_close(s);
    if (rc) return cli_errorf("report: %s", e.msg);
    printf("report: %d runs, %d problems (%d outputs with a retention view), %d figures, "
           "%d bench rows; %.1f MB in %.1f s\n%s/index.html\n", sum.n_runs, sum.n_problems,
           sum.n_retention, sum.n_figures, sum.n_bench_rows, sum.bytes / 1e6, clock_now_s() - t0, o.out_dir);
    return 0;
}
