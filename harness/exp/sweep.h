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
 * Each point carries its run_key (harness/exp/runkey.h): the hash of
 * everything that changes its result, including the prompt template text, the
 * model's identity (name and size of its weight files), the contents of the
 * dataset slice (sweep_data_hash) and the sources' hash (code_hash.h), so a
 * changed dataset line or policy source makes new keys. */
#ifndef EB_SWEEP_H
#define EB_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "harness/exp/config.h"
#include "harness/exp/runkey.h"

struct sweep_point {
    int index;                  /* 0-based position in the sweep */
    const char *model;          /* as the config names it (borrowed) */
    char *model_id;             /* "name@<bytes>" ("name@absent" when the file is missing) */
    char *dataset;              /* registry name */
    int data_offset;
    int data_limit;             /* -1: all */
    char data_hash[65];         /* sweep_data_hash of the slice */
    const char *policy;         /* borrowed from the config */
    char *params_json;          /* JSON object of this point's parameters */
    int64_t budget;             /* -1: none (fullkv) */
    int batch_size;
    enum exp_batching batching;
    char *sampling_json;
    char *extra_json;           /* max_total_tokens, max_kv_bytes, mode */
    char run_key[RUNKEY_HEX_LEN + 1];
};

struct sweep {
    const struct exp_config *cfg;
    struct sweep_point *pts;
    int n;
};

/* Policy names and parameters are validated through check (NULL: accept
 * everything); it returns 0 or -1 with e set.  A failure is reported with the
 * policy's JSON path. */
typedef int (*sweep_policy_check_fn)(const char *policy, const char *params_json,
                                     struct eb_err *e);

int sweep_expand(const struct exp_config *cfg, const char *data_dir, sweep_policy_check_fn check,
                 struct sweep *out, struct eb_err *e);
void sweep_free(struct sweep *s);

/* SHA-256 (hex) of the items of dataset[offset, offset + limit) in data_dir;
 * "absent" when it cannot be loaded. */
int sweep_data_hash(const char *dataset, const char *data_dir, int offset, int limit,
                    char out[65], struct eb_err *e);

/* "smollm2-135m synthetic:20 rkv{...} B=64 bs=4 ragged" into buf. */
void sweep_point_label(const struct sweep_point *p, char *buf, size_t cap);

/* The model identity used in run keys: "name@<bytes of its weight files>". */
int sweep_model_id(const char *model, char **out, struct eb_err *e);

#endif
