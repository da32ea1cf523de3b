/* registry_find.c - the registry's rows by name (registry.h), and whether a
 * row evicts nothing. */
#include "registry.h"

#include <stdio.h>
#include <string.h>

#include "row.h"
#include "schedule.h"

const struct param_def *policy_entry_shared(const struct policy_entry *en)
{
    return en->row ? en->row->shared_params : en->ops->shared_params;
}

int policy_entry_window(const struct policy_entry *en, const struct policy_params *p)
{
    struct eb_err e;
    if (en->row) return row_window(en->row, p, &e);
    return en->ops->window_of ? en->ops->window_of(policy_typed(p)) : -1;
}

int policy_entry_budget_check(const struct policy_entry *en, const struct policy_params *p,
                              int budget, struct eb_err *e)
{
    return policy_budget_check(en->name, en->row ? NULL : en->ops, p, policy_keeps_all(en, p),
                               policy_entry_window(en, p), budget, e);
}

const struct policy_entry *policy_registry_find(const char *name)
{
    int n;
    const struct policy_entry *en = policy_registry(&n);
    for (int i = 0; i < n; i++)
        if (!strcmp(en[i].name, name)) return &en[i];
    return NULL;
}

const struct policy_entry *policy_registry_find_n(const char *name, size_t len,
                                                  struct eb_err *e)
{
    int n;
    const struct policy_entry *en = policy_registry(&n);
    size_t off = 0;
    for (int i = 0; i < n; i++)
        if (strlen(en[i].name) == len && !strncmp(en[i].name, name, len)) return &en[i];
    if (!e) return NULL;
    char names[512];
    names[0] = '\0';
    for (int i = 0; i < n && off < sizeof names; i++)
        off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "",
                                en[i].name);
    if (len == 0) eb_fail(e, "policy: empty policy name (known: %s)", names);
    else eb_fail(e, "policy: unknown policy '%.*s' (known: %s)", (int)len, name, names);
    return NULL;
}

/* The one predicate: the row's flag (fullkv, seal) or evict = 0 among the
 * resolved parameters (a preset's, fullkv-pss, or the user's, skipkv:evict=0).
 * The spec and config forms below resolve first and ask it. */
int policy_keeps_all(const struct policy_entry *entry, const struct policy_params *p)
{
    for (int i = 0; p && i < p->n; i++)
        if (!strcmp(p->def[i]->key, "evict") && p->val[i] == 0) return 1;
    return entry->keeps_all;
}

int policy_spec_keeps_all(const char *spec)
{
    const struct policy_entry *en;
    struct policy_params pp;
    struct eb_err e = {0};
    /* a bad spec: 0 here; building its point reports why */
    return policy_parse(spec, &en, &pp, &e) ? 0 : policy_keeps_all(en, &pp);
}

int policy_named_keeps_all(const char *name, const cJSON *params)
{
    const struct policy_entry *en;
    struct policy_params pp;
    struct eb_err e = {0};
    return policy_resolve_named(name, params, NULL, &en, &pp, &e) ? 0 : policy_keeps_all(en, &pp);
}
