/* policy_defaults_file.c - policies/policy_defaults.json (see
 * policy_defaults.h): found, read and checked whole once per process.
 * Checking every key against the policies' parameter tables when it loads,
 * with the same parser a config's values go through, catches a typo ("tua")
 * instead of silently ignoring it. */
#include "policy_defaults_file.h"

#include "policy_defaults.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/json_file.h"
#include "../util/repo_file.h"
#include "param_parse.h"

#define DEFAULTS_REL "policies/policy_defaults.json"

static const char *const FAMILIES[] = {"math", "aime", "gsm8k", "code", NULL};

int policy_defaults_path(char *out, size_t cap)
{
    const char *env = getenv("EVICTBENCH_POLICY_DEFAULTS");
    if (env && *env) {
        if (!eb_path_exists(env) || strlen(env) >= cap) return -1;
        snprintf(out, cap, "%s", env);
        return 0;
    }
    return eb_repo_file(DEFAULTS_REL, out, cap, NULL, 0);
}

/* ---- loading and checking the file ---- */

static int is_family(const char *key)
{
    for (int i = 0; FAMILIES[i]; i++)
        if (!strcmp(FAMILIES[i], key)) return 1;
    return 0;
}

/* parent + ".key", or parent + "[\"key\"]" when key is not a plain word. */
static void json_path(char *out, size_t cap, const char *parent, const char *key)
{
    int plain = isalpha((unsigned char)key[0]) || key[0] == '_';
    for (const char *c = key; *c && plain; c++)
        plain = isalnum((unsigned char)*c) || *c == '_';
    if (plain) snprintf(out, cap, "%s.%s", parent, key);
    else snprintf(out, cap, "%s[\"%s\"]", parent, key);
}

int defaults_budget_key(const char *s, int64_t *out)
{
    if (!isdigit((unsigned char)s[0])) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < 1) return -1;
    *out = v;
    return 0;
}

/* Whether entry b has a parameter key. */
static int param_known(const struct policy_entry *b, const char *key)
{
    const struct param_def *tables[2] = {b->params, policy_entry_shared(b)};
    for (int t = 0; t < 2; t++)
        for (const struct param_def *d = tables[t]; d && d->key; d++)
            if (!strcmp(d->key, key)) return 1;
    return 0;
}

/* key = v at jp must be a parameter of some policy in $.policies, with a
 * value each policy having it accepts. */
static int check_param(const struct defaults_file *d, const char *jp, const char *key, const cJSON *v,
                       struct eb_err *e)
{
    if (!cJSON_IsNumber(v) && !cJSON_IsString(v) && !cJSON_IsBool(v))
        return eb_fail(e, "%s: %s: expected a number, a string or a bool", d->path, jp);
    int known = 0;
    for (int i = 0; i < d->n_bases; i++) {
        const struct policy_entry *b = d->bases[i];
        if (!param_known(b, key)) continue;
        known = 1;
        struct policy_params pp;
        struct eb_err sub;
        if (param_init(b->name, b->params, policy_entry_shared(b), &pp, &sub) ||
            param_set_json(b->name, &pp, PARAM_FROM_USER, key, v, &sub))
            return eb_fail(e, "%s: %s: %s", d->path, jp, sub.msg);
    }
    if (!known)
        return eb_fail(e, "%s: %s: no policy in $.policies has a parameter '%s'", d->path, jp, key);
    return 0;
}

/* A tau_by_budget or by_budget table. */
static int check_budget_table(const struct defaults_file *d, const char *jp, const cJSON *t,
                              int by_budget, struct eb_err *e)
{
    if (!cJSON_IsObject(t)) return eb_fail(e, "%s: %s: expected an object", d->path, jp);
    const cJSON *it;
    cJSON_ArrayForEach(it, t) {
        char q[512], r[600];
        json_path(q, sizeof q, jp, it->string);
        if (it->string[0] == '_') continue;
        int64_t b;
        if (defaults_budget_key(it->string, &b))
            return eb_fail(e, "%s: %s: a budget key must be a positive integer", d->path, q);
        if (!by_budget) {
            if (check_param(d, q, "tau", it, e)) return -1;
            continue;
        }
        if (!cJSON_IsObject(it))
            return eb_fail(e, "%s: %s: expected an object of parameters", d->path, q);
        const cJSON *p;
        cJSON_ArrayForEach(p, it) {
            if (p->string[0] == '_') continue;
            json_path(r, sizeof r, q, p->string);
            if (check_param(d, r, p->string, p, e)) return -1;
        }
    }
    return 0;
}

static int check_family(const struct defaults_file *d, const char *jp, const cJSON *fam,
                        struct eb_err *e)
{
    if (!cJSON_IsObject(fam)) return eb_fail(e, "%s: %s: expected an object", d->path, jp);
    const cJSON *it;
    cJSON_ArrayForEach(it, fam) {
        char q[512];
        if (it->string[0] == '_') continue;
        json_path(q, sizeof q, jp, it->string);
        int tau_table = !strcmp(it->string, "tau_by_budget");
        if (tau_table || !strcmp(it->string, "by_budget")) {
            if (check_budget_table(d, q, it, !tau_table, e)) return -1;
        } else if (check_param(d, q, it->string, it, e)) {
            return -1;
        }
    }
    return 0;
}

static int check_model(const struct defaults_file *d, const char *jp, const cJSON *m, struct eb_err *e)
{
    if (!cJSON_IsObject(m)) return eb_fail(e, "%s: %s: expected an object", d->path, jp);
    const cJSON *it;
    cJSON_ArrayForEach(it, m) {
        char q[512];
        if (it->string[0] == '_') continue;
        json_path(q, sizeof q, jp, it->string);
        if (is_family(it->string)) {
            if (check_family(d, q, it, e)) return -1;
        } else if (!strcmp(it->string, "tau_by_budget") || !strcmp(it->string, "by_budget")) {
            return eb_fail(e, "%s: %s: allowed only inside a dataset family (math, aime, gsm8k, "
                              "code)", d->path, q);
        } else if (cJSON_IsObject(it)) {
            return eb_fail(e, "%s: %s: not a dataset family (math, aime, gsm8k, code)", d->path,
                           q);
        } else if (check_param(d, q, it->string, it, e)) {
            return -1;
        }
    }
    return 0;
}

static int check_root(struct defaults_file *d, struct eb_err *e)
{
    const cJSON *root = d->root;
    if (!cJSON_IsObject(root)) return eb_fail(e, "%s: $: expected an object", d->path);
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (it->string[0] == '_' || !strcmp(it->string, "policies") ||
            !strcmp(it->string, "models"))
            continue;
        char q[512];
        json_path(q, sizeof q, "$", it->string);
        return eb_fail(e, "%s: %s: unknown key (expected policies, models, _doc)", d->path, q);
    }
    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(root, "policies");
    if (!cJSON_IsArray(pol) || cJSON_GetArraySize(pol) < 1)
        return eb_fail(e, "%s: $.policies: expected a non-empty list of policy names", d->path);
    int i = 0;
    cJSON_ArrayForEach(it, pol) {
        const struct policy_entry *en =
            cJSON_IsString(it) ? policy_registry_find(it->valuestring) : NULL;
        if (!en)
            return eb_fail(e, "%s: $.policies[%d]: not a policy name", d->path, i);
        if (d->n_bases == DEFAULTS_MAX_BASES)
            return eb_fail(e, "%s: $.policies: more than %d names", d->path, DEFAULTS_MAX_BASES);
        d->bases[d->n_bases++] = en;
        i++;
    }
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(root, "models");
    if (!cJSON_IsObject(models))
        return eb_fail(e, "%s: $.models: expected an object of model names", d->path);
    cJSON_ArrayForEach(it, models) {
        char q[512];
        if (it->string[0] == '_') continue;
        json_path(q, sizeof q, "$.models", it->string);
        if (check_model(d, q, it, e)) return -1;
    }
    return 0;
}

/* The file, kept for the process once loaded and checked. */
static struct defaults_file loaded;

int defaults_file_get(const struct defaults_file **out, struct eb_err *e)
{
    char path[sizeof loaded.path];
    if (policy_defaults_path(path, sizeof path)) return 1;
    *out = &loaded;
    if (loaded.root && !strcmp(loaded.path, path)) return 0;
    cJSON_Delete(loaded.root);
    memset(&loaded, 0, sizeof loaded);
    snprintf(loaded.path, sizeof loaded.path, "%s", path);
    loaded.root = eb_json_load(path, e);
    if (!loaded.root) return -1;
    if (check_root(&loaded, e)) {
        cJSON_Delete(loaded.root);
        loaded.root = NULL;
        return -1;
    }
    return 0;
}
