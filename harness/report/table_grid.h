/* table_grid.h - a table in memory and its Markdown and LaTeX writers
 * (harness/report/tables.c fills grids from the results views). */
#ifndef EB_TABLE_GRID_H
#define EB_TABLE_GRID_H

#include <stdio.h>

enum { BEST_NONE = 0, BEST_HIGH = 1, BEST_LOW = -1 };

/* Row-major cells; val holds the number behind a cell (NAN: none), for bold. */
struct grid {
    int nr, nc, cap;
    char **head;                /* nc */
    int *better;                /* nc: BEST_* */
    char **cell;                /* cap * nc */
    double *val;
    int *is_ref;                /* cap: a reference row (FullKV), never bold */
    int span_from;              /* >= 0: a reference row's value spans the columns from here */
    int err;
};

void grid_init(struct grid *g, int nc);
void grid_free(struct grid *g);
void grid_head(struct grid *g, int c, int better, const char *text);
int grid_row(struct grid *g, int is_ref);
void grid_set(struct grid *g, int r, int c, const char *text, double v);
void grid_num(struct grid *g, int r, int c, double v, int decimals);
int grid_bold(const struct grid *g, int r, int c);
const char *grid_text(const struct grid *g, int r, int c);
int grid_left(const struct grid *g, int c);
void md_text(FILE *f, const char *s);
void write_md(FILE *f, const struct grid *g, const char *heading, const char *caption);
void tex_text(FILE *f, const char *s);
void write_tex(FILE *f, const struct grid *g, const char *caption, const char *label);

#endif
