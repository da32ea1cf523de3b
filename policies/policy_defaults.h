/* policy_defaults.h - per-model policy parameters from a data file.
 *
 * policies/policy_defaults.json (its "_doc" has the format and the
 * provenance of every number) holds the SEAL/SkipKV settings the papers'
 * scripts use per model, dataset and budget: tau, alpha0, gamma, layer.  The
 * harness adds them to a policy's parameters when it resolves them;
 * anything the user sets explicitly wins, and so does a preset's own
 * setting.  A key is added only where the policy's parameter table has it.
 *
 * The file: $EVICTBENCH_POLICY_DEFAULTS when set, else
 * policies/policy_defaults.json under the current directory, the running
 * binary's directory or its parent; read and checked once per process
 * (policy_defaults_file.c).  No file means no defaults; a malformed one (bad
 * JSON, an unknown key, a value the policy rejects) is an error naming the
 * file and the JSON path.  The registry applies the defaults when it
 * resolves a policy for a run (policy_resolve, registry.h): this file's
 * values go through the same parser as the user's. */
#ifndef EB_POLICY_DEFAULTS_H
#define EB_POLICY_DEFAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "registry.h"

/* Fill p, entry en's parameters with the user's values already in, with
 * the defaults of at->model on at->dataset at at->budget for the keys en has
 * that neither the user nor en's preset sets (p->from, PARAM_FROM_DEFAULTS).
 * model NULL, no file, or an unknown model: p unchanged; dataset NULL:
 * model-level defaults only; budget <= 0: no per-budget defaults. */
int policy_defaults_fill(const struct policy_entry *en, const struct policy_where *at,
                         struct policy_params *p, struct eb_err *e);

/* The dataset family a name belongs to ("math", "aime", "gsm8k", "code"), or
 * NULL. */
const char *policy_defaults_family(const char *dataset);

/* The key a model is looked up by: a registry name as is; a path by its
 * registry entry (model_name, NULL: none), else by its base name lower-cased
 * without a trailing "/" or ".gguf". */
void policy_defaults_model_key(const char *model, policy_model_name_fn model_name, char *out,
                               size_t cap);

/* The defaults file in use into out: 0, or -1 when there is none. */
int policy_defaults_path(char *out, size_t cap);

#endif
