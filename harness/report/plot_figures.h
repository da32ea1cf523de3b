/* plot_figures.h - the figures plots.c draws: which view, which columns make
 * a panel and a series, and the gnuplot variables each figure sets.  Private
 * to harness/report/. */
#ifndef EB_PLOT_FIGURES_H
#define EB_PLOT_FIGURES_H

#include <stddef.h>

#include "harness/report/plots.h"
#include "harness/report/sbuf.h"

/* Rows [r0, r1) of a figure's query that make one panel, split into blocks
 * (series) at block[0..nblocks]. */
struct panel {
    const struct view_rows *t;
    int r0, r1;
    int nblocks;
    int *block;                 /* nblocks + 1 row indices */
};

/* Tables every figure may consult. */
struct fig_ctx {
    struct view_rows fullkv;    /* v_fullkv_ref */
    struct view_rows runs;      /* runs: id, batch_size, batching, sampling_json, max_new_tokens */
};

/* Adds the figure's gnuplot variables for a panel.  Returns 0, 1 to skip the
 * panel (why filled), -1 on error. */
typedef int (*fig_vars_fn)(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                           char *why, size_t nwhy);

struct figure {
    const char *name;
    const char *view;
    const char *columns;        /* the data file's columns, in order (plots/README.md) */
    const char *where;          /* NULL: every row of the view */
    const char *panel[8];       /* columns that make a panel; NULL-terminated */
    const char *series[4];      /* columns that make a series (block); NULL-terminated */
    const char *order_tail;     /* ORDER BY after panel and series columns */
    fig_vars_fn vars;
};

/* Equal strings, NULL equal only to NULL. */
int str_same(const char *a, const char *b);

extern const struct figure plot_figures[];
extern const int plot_n_figures;
/* The long-context benchmark figures (bench_figures.c), drawn after plot_figures. */
extern const struct figure bench_figures[];
extern const int bench_n_figures;

#endif
