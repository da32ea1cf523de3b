/* sweep.h - a config expanded into the points it measures.
 *
 * Order: model x dataset x policy (x every combination of its list-valued
 * parameters) x budget x batching x batch size.  FullKV takes no budget, so it
 * gives one point per (batching, batch size); in fidelity mode it gives none
 * (it is the reference every point is compared with).  Batch size 1 has no
 * pads and nothing to refill, so it is one point recorded as "ragged"
 * whatever the batching list says; points that would repeat a run_key are
 * dropped.
 *
 * Each point (point.h) carries its run_key: the hash of its typed fields
 * and everything else that changes its result, including the prompt
 * template text, the model's identity (name and size of its weight files),
 * the contents of the dataset slice (sweep_data_hash) and the code hash of
 * the shared sources and its policy's own files (code_hash.h), so a changed
 * dataset line or source makes new keys, and a new policy none. */
#ifndef EB_SWEEP_H
#define EB_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "harness/exp/config.h"
#include "harness/exp/point.h"
#include "harness/exp/runkey.h"

struct sweep {
    const struct exp_config *cfg;
    struct point *pts;
    int n;
};

/* Expand cfg into typed points (point.h).  Policy names and parameters are
 * resolved by the policy registry here, once; a failure is reported with
 * the policy's JSON path. */
int sweep_expand(const struct exp_config *cfg, const char *data_dir, struct sweep *out,
                 struct eb_err *e);

/* Fill a point's derived fields (model identity, the dataset's registry
 * entry, family and content hash, sampling and extra JSON, run key) from
 * cfg; p's model, dataset, offset, limit, batch settings and budget are set
 * by the caller, its policy by point_set_policy*.  For `run`, which builds
 * its one point from flags. */
int sweep_point_finish(struct point *p, const struct exp_config *cfg, const char *data_dir,
                       struct eb_err *e);
void sweep_free(struct sweep *s);

/* SHA-256 (hex) of the items of dataset[offset, offset + limit) in data_dir;
 * "absent" when it cannot be loaded. */
int sweep_data_hash(const char *dataset, const char *data_dir, int offset, int limit,
                    char out[65], struct eb_err *e);

/* "smollm2-135m synthetic:20 rkv{...} B=64 bs=4 ragged" into buf. */
void sweep_point_label(const struct point *p, char *buf, size_t cap);

/* The model identity used in run keys: "name@<bytes of its weight files>". */
int sweep_model_id(const char *model, char **out, struct eb_err *e);

#endif
