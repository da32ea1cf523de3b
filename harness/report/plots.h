/* plots.h - figures from the results database: every figure's view exported to
 * tab-separated data files, then rendered by gnuplot (plots/NAME.gp) as PNG and SVG.
 *
 * One figure is drawn per panel (e.g. per model, dataset and batch setting);
 * its data file holds the view's rows for that panel, one block (gnuplot
 * `index`) per series.  A figure whose view has no rows is skipped and
 * reported, never rendered empty.  plots/README.md lists the figures, the
 * view each reads and the columns of its data files.
 *
 * The view helpers (view_rows_*) and the label helpers are shared with
 * harness/tables.c. */
#ifndef EB_PLOTS_H
#define EB_PLOTS_H

#include <stddef.h>

#include "harness/report/policy_style.h"  /* policy_display_name */
#include "util/err.h"

struct store;

/* ---- query results held in memory ------------------------------------- */

/* Every row of one query, values as text (NULL for SQL NULL). */
struct view_rows {
    int ncols;
    int nrows;
    int cap;
    char **names;               /* ncols column names */
    char **cells;               /* nrows * ncols, row-major */
};

int view_rows_load(struct store *s, const char *sql, struct view_rows *out, struct eb_err *e);
void view_rows_free(struct view_rows *t);
/* 1: the database has the table or view `name`; 0: not (an older schema); -1: error. */
int view_exists(struct store *s, const char *name, struct eb_err *e);
/* Column index by name, -1 when absent. */
int view_col(const struct view_rows *t, const char *name);
/* Cell text; NULL for SQL NULL or an index out of range. */
const char *view_cell(const struct view_rows *t, int row, int col);
/* The cell as a number; NAN when NULL or not a number. */
double view_num(const struct view_rows *t, int row, int col);

/* ---- labels shared by figures and tables ------------------------------ */

/* "greedy", "T=0.6, top-p=0.95, 4 samples" ... from a runs.sampling_json. */
void describe_sampling(const char *sampling_json, char *out, size_t n);
/* policy_display_name ("rkv" -> "R-KV"): policy_style.h, the same names as
 * the generated palette's policy_name. */
/* "batch 10, padded" ("batch 10" when the mode is not known). */
void describe_batching(const char *batch_size, const char *batching, char *out, size_t n);

/* ---- rendering -------------------------------------------------------- */

enum plots_event {
    PLOTS_DATA,                 /* text: a data file written */
    PLOTS_FIGURE,               /* text: a figure written (path without .png/.svg) */
    PLOTS_SKIPPED,              /* text: why a figure or panel was not drawn */
    PLOTS_TABLE                 /* text: a captured `set table` file (o->capture) */
};

/* Called for every event; figure is the figure's name (e.g. "accuracy_vs_budget"). */
typedef void (*plots_note_fn)(void *ctx, enum plots_event ev, const char *figure,
                              const char *text);

struct plots_options {
    const char *out_dir;        /* figures go here, data files under <out_dir>/data */
    const char *script_dir;     /* the .gp scripts; NULL: "plots" */
    const char *gnuplot;        /* executable; NULL: "gnuplot" (found on PATH) */
    int render;                 /* 0: write the data files only */
    plots_note_fn note;         /* may be NULL */
    void *ctx;
    int capture;                /* 1: also write <out_dir>/data/<stem>.table, gnuplot's
                                   `set table` of the points each figure draws */
};

/* The gnuplot palette (policy_rgb, policy_color, policy_pt, policy_dt,
 * policy_name) from the policy registry's styles: as malloc'd text, or
 * written to path.  plots_make writes it to <out_dir>/data/palette.gp and
 * hands it to every script as `palette`. */
int plots_palette_text(char **out, struct eb_err *e);
int plots_palette_write(const char *path, struct eb_err *e);

/* Names of the figures, in the order they are made; NULL past the end. */
const char *plots_figure_name(int i);

/* Export and (when o->render) render every figure that has rows.  Directories
 * are created as needed.  Fails on the first error (a query, a file, gnuplot
 * exiting non-zero: the message then carries the tail of its log). */
int plots_make(struct store *s, const struct plots_options *o, struct eb_err *e);

/* 0 when the gnuplot executable runs and has the pngcairo and svg terminals;
 * -1 with the reason otherwise. */
int plots_gnuplot_check(const char *gnuplot, struct eb_err *e);

/* Create a directory and its parents (like mkdir -p). */
int plots_mkdirs(const char *path, struct eb_err *e);

#endif
