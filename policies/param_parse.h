/* param_parse.h - the one parser of policy parameter values.
 *
 * A value reaches a struct policy_params (policy.h) from a spec's
 * "key=value,..." text, from a JSON value (a config, the per-model defaults
 * file) or from a preset; all of them go through param_set_text /
 * param_set_json, so a bad value gets the same check and the same message
 * whatever its source.  Values are typed here, once: nothing downstream
 * parses them again. */
#ifndef EB_POLICY_PARAM_PARSE_H
#define EB_POLICY_PARAM_PARSE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "policy.h"

/* p: every parameter of own then shared (either may be NULL), at its table
 * default.  policy names the policy in messages. */
int param_init(const char *policy, const struct param_def *own, const struct param_def *shared,
               struct policy_params *p, struct eb_err *e);

/* Set key (klen bytes) from the text v (vlen bytes) as from says.  A user
 * value may be given once; an unknown key is an error listing the valid
 * ones. */
int param_set_text(const char *policy, struct policy_params *p, enum param_from from,
                   const char *key, size_t klen, const char *v, size_t vlen, struct eb_err *e);
/* The same from a JSON value: a string is read as text, a number or a bool
 * (1/0) as that number. */
int param_set_json(const char *policy, struct policy_params *p, enum param_from from,
                   const char *key, const cJSON *v, struct eb_err *e);
/* Every item of "key=value,key=value" (len bytes). */
int param_set_list(const char *policy, struct policy_params *p, enum param_from from,
                   const char *s, size_t len, struct eb_err *e);

/* "a, b, c": the keys of p ("none" without any). */
void param_list_keys(const struct policy_params *p, char *buf, size_t size);

#endif
