/* policy_defaults.h - per-model policy parameters from a data file.
 *
 * policies/policy_defaults.json (its "_doc" has the format and the
 * provenance of every number) holds the SEAL/SkipKV settings the papers'
 * scripts use per model, dataset and budget: tau, alpha0, gamma, layer.  The
 * harness adds them to a policy's parameters before the policy is built;
 * anything the user sets explicitly wins, and so does a preset's own
 * setting.  A key is added only where the policy's parameter table has it.
 *
 * The file: $EVICTBENCH_POLICY_DEFAULTS when set, else
 * policies/policy_defaults.json under the current directory, the running
 * binary's directory or its parent.  No file means no defaults; a malformed
 * one (bad JSON, an unknown key, a value the policy rejects) is an error
 * naming the file and the JSON path. */
#ifndef EB_POLICY_DEFAULTS_H
#define EB_POLICY_DEFAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

/* params_json (a JSON object; NULL or "" is {}) of policy on model/dataset
 * at budget, with the defaults added for the keys it does not set.  dataset
 * NULL: model-level defaults only; budget <= 0: no per-budget defaults.
 * *out_json is malloc'd (the caller frees); an unknown policy or model gives
 * the input unchanged. */
int policy_defaults_apply_json(const char *policy, const char *model, const char *dataset,
                               int64_t budget, const char *params_json, char **out_json,
                               struct eb_err *e);

/* The same for a spec NAME[:key=value,...]: the defaults are appended as
 * key=value items. */
int policy_defaults_apply_spec(const char *spec, const char *model, const char *dataset,
                               int64_t budget, char **out_spec, struct eb_err *e);

/* The dataset family a name belongs to ("math", "aime", "gsm8k", "code"), or
 * NULL. */
const char *policy_defaults_family(const char *dataset);

/* The key a model is looked up by: a registry name as is; a path by its
 * registry entry (same file base name), else by its base name lower-cased
 * without a trailing "/" or ".gguf". */
void policy_defaults_model_key(const char *model, char *out, size_t cap);

/* The defaults file in use into out: 0, or -1 when there is none. */
int policy_defaults_path(char *out, size_t cap);

#endif
