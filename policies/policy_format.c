/* policy_format.c - a resolved policy written out: the canonical spec text
 * an instance carries, and the typed JSON a run key hashes and a run stores
 * (registry.h). */
#include <stdio.h>

#include "registry.h"

void policy_params_format(const struct policy_entry *entry, const struct policy_params *p,
                          char *buf, size_t size)
{
    size_t off = (size_t)snprintf(buf, size, "%s", entry->name);
    for (int i = 0; i < p->n && off < size; i++) {
        const struct param_def *d = p->def[i];
        char cb[32];
        if (d->type == PARAM_CHOICE)
            off += (size_t)snprintf(buf + off, size - off, "%s%s=%s", i ? "," : ":", d->key,
                                    policy_choice_name(d->choices, (int)p->val[i], cb, sizeof cb));
        else
            off += (size_t)snprintf(buf + off, size - off, "%s%s=%.10g", i ? "," : ":", d->key,
                                    p->val[i]);
    }
}

/* Parameter i as a JSON value of its type. */
static cJSON *param_value(const struct policy_params *p, int i)
{
    const struct param_def *d = p->def[i];
    char cb[64];
    if (d->type == PARAM_CHOICE)
        return cJSON_CreateString(policy_choice_name(d->choices, (int)p->val[i], cb, sizeof cb));
    if (d->type == PARAM_BOOL) return cJSON_CreateBool(p->val[i] != 0);
    return cJSON_CreateNumber(p->val[i]);
}

cJSON *policy_params_json(const struct policy_params *p, int given_only)
{
    cJSON *o = cJSON_CreateObject();
    for (int k = 0; o && k < p->n; k++) {
        int i = k;
        if (given_only) /* the value given k-th, if any */
            for (i = 0; i < p->n && p->given[i] != k + 1; i++) {}
        if (i == p->n) break;
        cJSON *v = param_value(p, i);
        if (!v || !cJSON_AddItemToObject(o, p->def[i]->key, v)) {
            cJSON_Delete(v);
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}
