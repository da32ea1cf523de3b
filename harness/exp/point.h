/* point.h - one measured point of a sweep, typed.
 *
 * sweep_expand builds every point once from a config (and `run` builds its
 * one point from flags): the dataset's registry entry with its grading rule
 * and the family the per-model policy defaults are looked up by, the policy's
 * registry entry and its parameters resolved and typed (per-model defaults
 * included), the budget with one "none" value, the batch settings and the
 * weight mode.  Nothing downstream re-parses them: the runner opens the
 * policy from point.policy + point.params, and the run key hashes these
 * fields (point_run_key) plus the dataset slice's content hash and the code
 * hash.  params_json is the values the config (or spec) and the per-model
 * defaults gave, typed, as JSON text written once from point.params, kept
 * only to be stored (runs.params_json, for SQL) and shown in labels. */
#ifndef EB_POINT_H
#define EB_POINT_H

#include <stddef.h>
#include <stdint.h>

#include "datasets/dataset.h"
#include "harness/exp/config.h"
#include "harness/exp/runkey.h"
#include "model/model.h"
#include "policies/registry.h"

/* The one "no budget" value (FullKV; and the policies that never evict) is
 * POLICY_NO_BUDGET (policies/policy.h), from config to point to run key;
 * point_store_budget turns it into the store's NULL. */

struct point {
    int index;                       /* 0-based position in the sweep */
    const char *model;               /* as the config names it (borrowed) */
    char *model_id;                  /* "name@<bytes>" ("name@absent" when the file is missing) */
    enum model_weights weights;
    enum kv_type kv_type;            /* KV cache element type (the config's, resolved) */
    char *dataset;                   /* registry name */
    const struct dataset_spec *data; /* its registry entry: file, grader */
    const char *family;              /* policy-defaults family ("math", "aime", "gsm8k",
                                        "code") or NULL */
    int data_offset;
    int data_limit;                  /* -1: all */
    char data_hash[65];              /* sweep_data_hash of the slice */
    const struct policy_entry *policy;
    struct policy_params params;     /* typed, every parameter, defaults included */
    char *params_json;               /* for storage and labels only (see above) */
    int budget;                      /* tokens; POINT_NO_BUDGET: none */
    int batch_size;
    enum exp_batching batching;
    char *sampling_json;
    char *extra_json;                /* max_total_tokens, max_kv_bytes, mode, weights, device
                                        kind (cuda), steering vector */
    const char *device;              /* where it runs (the config's, borrowed); NULL: cpu */
    char run_key[RUNKEY_HEX_LEN + 1];
};

/* The grading rule of the point's dataset ("math" when unknown). */
const char *point_grader(const struct point *p);

/* Resolve policy name + params (a JSON object of the config's values, NULL:
 * {}) for p's model, dataset and budget into p->policy and p->params, once,
 * by the registry (policy_resolve_named: the per-model defaults of
 * policies/policy_defaults.json filled in), and check the budget.
 * p->params_json: the given values, typed (policy_params_json). */
int point_set_policy(struct point *p, const char *name, const cJSON *params, struct eb_err *e);

/* The same from a command-line spec NAME[:key=value,...] (`run --policy`),
 * by policy_resolve: the same point as the config's. */
int point_set_policy_spec(struct point *p, const char *spec, struct eb_err *e);
/* The budget as the store records it: STORE_NONE for POLICY_NO_BUDGET. */
int point_store_budget(const struct point *p);

/* p->run_key: the hash of the point's typed fields, the config's template,
 * sampling and limits, the slice's content hash and the code hash. */
int point_run_key(struct point *p, const struct exp_config *cfg, const char *template_key,
                  struct eb_err *e);

void point_free(struct point *p);

#endif
