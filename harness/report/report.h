/* report.h - `evictbench report`: a static, self-contained site from the
 * results database (index.html, one page per problem, report.css and
 * report.js copied from harness/report/site/), readable from file:// with
 * nothing fetched at view time.
 *
 * index.html: the runs table (sortable, filterable; each row's difference
 * from FullKV with standard errors), every figure as inline SVG with its
 * data table, the problems, and the provenance of every run (code hash,
 * model file and SHA-256, data-slice hash, config).  problems/<n>.html: the
 * question, the reference answer and each run's output side by side, marked
 * correct or incorrect, each as a retention view (see harness/exp/retention.h)
 * where the run recorded one, else a line saying why not. */
#ifndef EB_REPORT_H
#define EB_REPORT_H

#include "util/err.h"

struct store;

struct report_options {
    const char *db_path;        /* shown on the page */
    const char *out_dir;        /* the site; created as needed */
    const char *script_dir;     /* gnuplot scripts; NULL: "plots" */
    const char *gnuplot;        /* NULL: "gnuplot"; figures are skipped (and the page
                                   says why) when it cannot run */
    const char *site_dir;       /* report.css and report.js; NULL: harness/report/site
                                   found from the repository (util/repo_file.h) */
    const char *data_dir;       /* datasets (questions, slice hashes); NULL: the default */
};

struct report_summary {
    int n_runs, n_problems, n_figures, n_retention;
    int n_bench_rows;           /* rows of the bench section's tables */
    long long bytes;            /* the site's size */
};

int report_make(struct store *s, const struct report_options *o, struct report_summary *sum,
                struct eb_err *e);

#endif
