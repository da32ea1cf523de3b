/* tables.h - the paper tables rendered from the results database as Markdown
 * and LaTeX (booktabs) into one .md and one .tex file per table:
 *
 *   accuracy_by_budget   v_accuracy_by_budget: pass@1 (%) per policy and budget,
 *                        FullKV and the budget as % of FullKV's mean length
 *   length_by_budget     v_length_by_budget: mean generated tokens
 *   throughput           v_throughput_by_batch: tokens/s per batch size, OOM,
 *                        and the largest batch that ran
 *   ablation             v_ablation: accuracy and length per ablation step
 *   pss                  v_pss: redundancy of correct vs incorrect traces
 *   fidelity             v_fidelity: KL and top-1 agreement with FullKV
 *
 * One table per panel (model, dataset, batch setting, sampling); the best
 * value of each column is in bold (FullKV, the reference, is never bolded),
 * and the caption gives the run and trace counts and the sampling protocol.
 * A table whose view has no rows is skipped and reported, not written. */
#ifndef EB_TABLES_H
#define EB_TABLES_H

#include "util/err.h"

struct store;

enum tables_event {
    TABLES_WRITTEN,             /* text: a file written (.md or .tex) */
    TABLES_SKIPPED              /* text: why a table was not written */
};

typedef void (*tables_note_fn)(void *ctx, enum tables_event ev, const char *table,
                               const char *text);

struct tables_options {
    const char *out_dir;        /* created if needed */
    tables_note_fn note;        /* may be NULL */
    void *ctx;
};

/* Names of the tables (file stems), in order; NULL past the end. */
const char *tables_name(int i);

/* Write every table that has rows as <out_dir>/<name>.md and .tex (the
 * bench tables too). */
int tables_make(struct store *s, const struct tables_options *o, struct eb_err *e);
/* bench_context and bench_max_batch from the bench views (bench_tables.c). */
int bench_tables_make(struct store *s, const struct tables_options *o, struct eb_err *e);

#endif
