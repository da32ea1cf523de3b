/* row_views.h - the memo behind a score context's views (row.h): host
 * buffers grown on demand, each view filled at most once per head. */
#ifndef EB_POLICY_ROW_VIEWS_H
#define EB_POLICY_ROW_VIEWS_H

#include "row.h"

struct row_views *row_views_new(struct eb_err *e);
void row_views_free(struct row_views *v);
/* A new head: every view stale; b is the scoring scratch of the backend
 * primitives, sum the head's attention sums [cap] (NULL: none kept). */
void row_views_begin(struct row_views *v, struct score_buf *b, const double *sum, int cap);

#endif
