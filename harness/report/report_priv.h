/* report_priv.h - what the report's files share (private to harness/report/). */
#ifndef EB_REPORT_PRIV_H
#define EB_REPORT_PRIV_H

#include "harness/report/html.h"
#include "harness/report/plots.h"
#include "harness/report/report.h"

/* The runs table and the provenance section of index.html. */
int report_runs(struct store *s, struct sbuf *b, struct eb_err *e);
int report_provenance(struct store *s, const struct report_options *o, struct sbuf *b,
                      struct eb_err *e);
/* The figures section: rendered into <out_dir>/figures, inlined. */
int report_figures(struct store *s, const struct report_options *o, struct sbuf *b,
                   int *n_figures, struct eb_err *e);
/* The problem pages and the list of them on index.html. */
int report_problems(struct store *s, const struct report_options *o, struct sbuf *index,
                    struct report_summary *sum, struct eb_err *e);

/* The bench section: the bench views' rows as tables, or a note that there
 * are none; *n_rows receives their count. */
int report_bench(struct store *s, struct sbuf *b, int *n_rows, struct eb_err *e);

/* Whole file into memory (NUL-terminated); NULL when unreadable. */
char *report_slurp(const char *path, size_t *len);

#endif
