/* policy_spec.c - resolving a policy as the user names it (a spec
 * NAME[:key=value,...] or a config's JSON object) into its registry entry
 * and typed parameters, once: table defaults, preset, the user's values,
 * then the per-model defaults (registry.h). */
#include <string.h>

#include "param_parse.h"
#include "policy_defaults.h"
#include "registry.h"

/* The entry's table defaults, then its preset. */
static int init_params(const struct policy_entry *en, struct policy_params *p, struct eb_err *e)
{
    if (param_init(en->name, en->params, policy_entry_shared(en), p, e)) return -1;
    return en->preset ? param_set_list(en->name, p, PARAM_FROM_PRESET, en->preset,
                                       strlen(en->preset), e)
                      : 0;
}

/* The per-model defaults of `at`, after the user's values. */
static int fill_defaults(const struct policy_entry *en, const struct policy_where *at,
                         struct policy_params *p, struct eb_err *e)
{
    if (!at || !at->model) return 0;
    return policy_defaults_fill(en, at, p, e);
}

int policy_resolve(const char *spec, const struct policy_where *at,
                   const struct policy_entry **entry, struct policy_params *out, struct eb_err *e)
{
    if (!spec) return eb_fail(e, "policy: no policy given");
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    const struct policy_entry *en = policy_registry_find_n(spec, nlen, e);
    if (!en || init_params(en, out, e)) return -1;
    if (colon) {
        if (colon[1] == '\0') return eb_fail(e, "policy %s: nothing after ':'", en->name);
        if (param_set_list(en->name, out, PARAM_FROM_USER, colon + 1, strlen(colon + 1), e))
            return -1;
    }
    if (fill_defaults(en, at, out, e)) return -1;
    *entry = en;
    return 0;
}

/* The parameters of a JSON object: inline (but "name"), or under "params". */
static int set_object(const struct policy_entry *en, const cJSON *obj, struct policy_params *p,
                      struct eb_err *e)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, obj) {
        if (!strcmp(item->string, "name")) continue;
        if (!strcmp(item->string, "params")) {
            if (!cJSON_IsObject(item))
                return eb_fail(e, "policy %s: \"params\" must be an object", en->name);
            const cJSON *sub;
            cJSON_ArrayForEach(sub, item)
                if (param_set_json(en->name, p, PARAM_FROM_USER, sub->string, sub, e)) return -1;
            continue;
        }
        if (param_set_json(en->name, p, PARAM_FROM_USER, item->string, item, e)) return -1;
    }
    return 0;
}

int policy_resolve_named(const char *name, const cJSON *params, const struct policy_where *at,
                         const struct policy_entry **entry, struct policy_params *out,
                         struct eb_err *e)
{
    if (!name) return eb_fail(e, "policy: no policy given");
    const struct policy_entry *en = policy_registry_find_n(name, strlen(name), e);
    if (!en || init_params(en, out, e)) return -1;
    if (params && !cJSON_IsObject(params))
        return eb_fail(e, "policy %s: the parameters are not a JSON object", en->name);
    if ((params && set_object(en, params, out, e)) || fill_defaults(en, at, out, e)) return -1;
    *entry = en;
    return 0;
}

int policy_parse(const char *spec, const struct policy_entry **entry, struct policy_params *out,
                 struct eb_err *e)
{
    return policy_resolve(spec, NULL, entry, out, e);
}

int policy_parse_json(const cJSON *j, const struct policy_entry **entry,
                      struct policy_params *out, struct eb_err *e)
{
    if (cJSON_IsString(j)) return policy_parse(j->valuestring, entry, out, e);
    if (!cJSON_IsObject(j))
        return eb_fail(e, "policy: expected a string \"NAME[:key=value,...]\" or an object with "
                          "\"name\"");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    if (!cJSON_IsString(name)) return eb_fail(e, "policy: the object has no string \"name\"");
    return policy_resolve_named(name->valuestring, j, NULL, entry, out, e);
}
