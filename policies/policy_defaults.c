/* policy_defaults.c - per-model policy parameters from
 * policies/policy_defaults.json (see policy_defaults.h).
 *
 * The file is read and checked whole once per process (again only when its
 * path, size or modification time changes).  Checking every key against the
 * policies' parameter tables when it loads catches a typo ("tua") instead of
 * silently ignoring it. */
#include "policy_defaults.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sys/stat.h>

#include "../model/hfconfig.h"
#include "../model/modelfile.h"
#include "../util/repo_file.h"
#include "registry.h"

#define DEFAULTS_REL "policies/policy_defaults.json"

enum { MAX_BASES = 32 };

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

const char *policy_defaults_family(const char *dataset)
{
    if (!dataset) return NULL;
    const char *d = eb_base_name(dataset);
    if (!strncasecmp(d, "math", 4)) return "math";   /* math500, math_train_1000, ... */
    if (!strncasecmp(d, "aime", 4)) return "aime";
    if (!strncasecmp(d, "gsm8k", 5)) return "gsm8k";
    if (!strncasecmp(d, "livecodebench", 13)) return "code";
    return NULL;
}

void policy_defaults_model_key(const char *model, char *out, size_t cap)
{
    if (cap == 0) return;
    out[0] = '\0';
    if (!model) return;
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", model);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
    const char *base = eb_base_name(buf);
    if (model_registry_name(buf, out, cap) == 0) return;
    snprintf(out, cap, "%s", base);
    n = strlen(out);
    if (n > 5 && !strcasecmp(out + n - 5, ".gguf")) out[n - 5] = '\0';
    for (char *c = out; *c; c++) *c = (char)tolower((unsigned char)*c);
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

struct defaults {
    cJSON *root;
    char path[PATH_MAX];
    const struct policy_entry *bases[MAX_BASES];  /* $.policies */
    int n_bases;
};

/* A budget key: a positive integer in decimal. */
static int parse_budget(const char *s, int64_t *out)
{
    if (!isdigit((unsigned char)s[0])) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < 1) return -1;
    *out = v;
    return 0;
}

static int param_known(const struct param_def *defs, const char *key)
{
    for (int i = 0; defs[i].key; i++)
        if (!strcmp(defs[i].key, key)) return 1;
    return 0;
}

/* key = v at jp must be a parameter of some policy in $.policies, with a
 * value each policy having it accepts. */
static int check_param(const struct defaults *d, const char *jp, const char *key, const cJSON *v,
                       struct eb_err *e)
{
    if (!cJSON_IsNumber(v) && !cJSON_IsString(v) && !cJSON_IsBool(v))
        return eb_fail(e, "%s: %s: expected a number, a string or a bool", d->path, jp);
    int known = 0;
    for (int i = 0; i < d->n_bases; i++) {
        const struct policy_entry *b = d->bases[i];
        if (!param_known(b->params, key)) continue;
        known = 1;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "name", b->name)) {
            cJSON_Delete(o);
            return eb_fail(e, "out of memory");
        }
        cJSON *dup = cJSON_Duplicate(v, 1);
        if (!dup || !cJSON_AddItemToObject(o, key, dup)) {
            cJSON_Delete(dup);
            cJSON_Delete(o);
            return eb_fail(e, "out of memory");
        }
        const struct policy_entry *en;
        struct policy_params pp;
        struct eb_err sub;
        int rc = policy_parse_json(o, &en, &pp, &sub);
        cJSON_Delete(o);
        if (rc) return eb_fail(e, "%s: %s: %s", d->path, jp, sub.msg);
    }
    if (!known)
        return eb_fail(e, "%s: %s: no policy in $.policies has a parameter '%s'", d->path, jp, key);
    return 0;
}

/* A tau_by_budget or by_budget table. */
static int check_budget_table(const struct defaults *d, const char *jp, const cJSON *t,
                              int by_budget, struct eb_err *e)
{
    if (!cJSON_IsObject(t)) return eb_fail(e, "%s: %s: expected an object", d->path, jp);
    const cJSON *it;
    cJSON_ArrayForEach(it, t) {
        char q[512], r[600];
        json_path(q, sizeof q, jp, it->string);
        if (it->string[0] == '_') continue;
        int64_t b;
        if (parse_budget(it->string, &b))
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

static int check_family(const struct defaults *d, const char *jp, const cJSON *fam,
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

static int check_model(const struct defaults *d, const char *jp, const cJSON *m, struct eb_err *e)
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

static int check_root(struct defaults *d, struct eb_err *e)
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
        if (d->n_bases == MAX_BASES)
            return eb_fail(e, "%s: $.policies: more than %d names", d->path, MAX_BASES);
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

/* The file loaded and checked, kept for the process with what identifies
 * its version (path, size, modification time). */
static struct {
    struct defaults d;
    off_t size;
    struct timespec mtime;
} loaded;

static int same_version(const char *path, const struct stat *st)
{
    return loaded.d.root && !strcmp(loaded.d.path, path) && loaded.size == st->st_size &&
           loaded.mtime.tv_sec == st->st_mtim.tv_sec &&
           loaded.mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* *d: the file, loaded and checked once per version.  1: no file; 0: loaded
 * (d is the process's copy: do not free it); -1: error. */
static int defaults_load(const struct defaults **d, struct eb_err *e)
{
    char path[PATH_MAX];
    struct stat st;
    if (policy_defaults_path(path, sizeof path)) return 1;
    if (stat(path, &st) != 0) return eb_fail(e, "%s: cannot stat it", path);
    *d = &loaded.d;
    if (same_version(path, &st)) return 0;
    cJSON_Delete(loaded.d.root);
    memset(&loaded, 0, sizeof loaded);
    snprintf(loaded.d.path, sizeof loaded.d.path, "%s", path);
    loaded.d.root = hf_json_load(path, e);
    if (!loaded.d.root) return -1;
    if (check_root(&loaded.d, e)) {
        cJSON_Delete(loaded.d.root);
        loaded.d.root = NULL;
        return -1;
    }
    loaded.size = st.st_size;
    loaded.mtime = st.st_mtim;
    return 0;
}

/* ---- lookup ---- */

/* The entry of table whose budget is nearest to budget (a tie: the
 * smaller), or NULL. */
static const cJSON *nearest_budget(const cJSON *table, int64_t budget)
{
    const cJSON *best = NULL, *it;
    int64_t best_b = 0, best_dist = 0;
    cJSON_ArrayForEach(it, table) {
        int64_t b;
        if (it->string[0] == '_' || parse_budget(it->string, &b)) continue;
        int64_t dist = b > budget ? b - budget : budget - b;
        if (!best || dist < best_dist || (dist == best_dist && b < best_b)) {
            best = it;
            best_b = b;
            best_dist = dist;
        }
    }
    return best;
}

/* acc[key] = v (replacing an earlier level's value in place). */
static int put(cJSON *acc, const char *key, const cJSON *v, struct eb_err *e)
{
    cJSON *dup = cJSON_Duplicate(v, 1);
    if (!dup) return eb_fail(e, "out of memory");
    int ok = cJSON_GetObjectItemCaseSensitive(acc, key)
                 ? cJSON_ReplaceItemInObjectCaseSensitive(acc, key, dup)
                 : cJSON_AddItemToObject(acc, key, dup);
    if (!ok) {
        cJSON_Delete(dup);
        return eb_fail(e, "out of memory");
    }
    return 0;
}

/* The plain parameters of obj (no comments, families or tables) into acc. */
static int put_params(cJSON *acc, const cJSON *obj, struct eb_err *e)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        if (it->string[0] == '_' || cJSON_IsObject(it)) continue;
        if (put(acc, it->string, it, e)) return -1;
    }
    return 0;
}

/* Every default for the model at dataset family/budget, later levels
 * overriding earlier ones: model, family, tau_by_budget, by_budget. */
static int collect(const cJSON *model, const char *family, int64_t budget, cJSON *acc,
                   struct eb_err *e)
{
    if (put_params(acc, model, e)) return -1;
    const cJSON *fam = family ? cJSON_GetObjectItemCaseSensitive(model, family) : NULL;
    if (!cJSON_IsObject(fam)) return 0;
    if (put_params(acc, fam, e)) return -1;
    if (budget <= 0) return 0;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(fam, "tau_by_budget");
    const cJSON *hit = t ? nearest_budget(t, budget) : NULL;
    if (hit && put(acc, "tau", hit, e)) return -1;
    t = cJSON_GetObjectItemCaseSensitive(fam, "by_budget");
    hit = t ? nearest_budget(t, budget) : NULL;
    return hit ? put_params(acc, hit, e) : 0;
}

/* Whether a "key=value,..." list (len bytes) sets key. */
static int list_sets(const char *list, size_t len, const char *key)
{
    size_t klen = strlen(key);
    const char *end = list + len;
    for (const char *s = list; s && s < end;) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *item_end = comma ? comma : end;
        const char *eq = memchr(s, '=', (size_t)(item_end - s));
        size_t n = (size_t)((eq ? eq : item_end) - s);
        if (n == klen && !strncmp(s, key, klen)) return 1;
        s = comma ? comma + 1 : NULL;
    }
    return 0;
}

/* What the caller already sets: a JSON object (top level or under
 * "params") or a spec's key=value list. */
struct user_keys {
    const cJSON *obj;
    const char *list;
    size_t list_len;
};

static int user_sets(const struct user_keys *u, const char *key)
{
    if (u->obj) {
        if (cJSON_GetObjectItemCaseSensitive(u->obj, key)) return 1;
        const cJSON *sub = cJSON_GetObjectItemCaseSensitive(u->obj, "params");
        if (cJSON_IsObject(sub) && cJSON_GetObjectItemCaseSensitive(sub, key)) return 1;
    }
    return u->list && list_sets(u->list, u->list_len, key);
}

/* The defaults to add for entry en: *added is a new object (possibly empty)
 * of the keys en has that neither its preset nor the user sets. */
static int defaults_for(const struct policy_entry *en, const char *model, const char *dataset,
                        int64_t budget, const struct user_keys *u, cJSON **added,
                        struct eb_err *e)
{
    *added = cJSON_CreateObject();
    if (!*added) return eb_fail(e, "out of memory");
    if (!model) return 0;
    const struct defaults *d = NULL;
    int rc = defaults_load(&d, e);
    if (rc) {
        if (rc > 0) return 0;
        cJSON_Delete(*added);
        *added = NULL;
        return -1;
    }
    int applies = 0;
    for (int i = 0; i < d->n_bases; i++) applies |= d->bases[i]->ops == en->ops;
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(d->root, "models");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(models, model);
    if (!m) {
        char key[256];
        policy_defaults_model_key(model, key, sizeof key);
        m = cJSON_GetObjectItemCaseSensitive(models, key);
    }
    cJSON *acc = cJSON_CreateObject();
    rc = acc ? 0 : eb_fail(e, "out of memory");
    if (!rc && applies && m) {
        rc = collect(m, policy_defaults_family(dataset), budget, acc, e);
        const cJSON *it;
        cJSON_ArrayForEach(it, acc) {
            const char *k = it->string;
            if (rc) break;
            if (!param_known(en->params, k) || user_sets(u, k) ||
                (en->preset && list_sets(en->preset, strlen(en->preset), k)))
                continue;
            rc = put(*added, k, it, e);
        }
    }
    cJSON_Delete(acc);
    if (rc) {
        cJSON_Delete(*added);
        *added = NULL;
    }
    return rc;
}

int policy_defaults_apply_json(const char *policy, const char *model, const char *dataset,
                               int64_t budget, const char *params_json, char **out_json,
                               struct eb_err *e)
{
    *out_json = NULL;
    cJSON *user = cJSON_Parse(params_json && params_json[0] ? params_json : "{}");
    if (!cJSON_IsObject(user)) {
        cJSON_Delete(user);
        return eb_fail(e, "policy %s: the parameters are not a JSON object", policy);
    }
    const struct policy_entry *en = policy ? policy_registry_find(policy) : NULL;
    cJSON *added = NULL;
    struct user_keys u = {user, NULL, 0};
    if (en && defaults_for(en, model, dataset, budget, &u, &added, e)) {
        cJSON_Delete(user);
        return -1;
    }
    const cJSON *it;
    int rc = 0;
    if (added) cJSON_ArrayForEach(it, added)
        if (put(user, it->string, it, e)) { rc = -1; break; }
    cJSON_Delete(added);
    if (!rc && !(*out_json = cJSON_PrintUnformatted(user))) rc = eb_fail(e, "out of memory");
    cJSON_Delete(user);
    return rc;
}

/* v as a spec value: shortest decimal that reads back the same, 1/0, or
 * the string. */
static void spec_value(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsString(v)) {
        snprintf(buf, cap, "%s", v->valuestring);
    } else if (cJSON_IsBool(v)) {
        snprintf(buf, cap, "%d", cJSON_IsTrue(v) ? 1 : 0);
    } else {
        snprintf(buf, cap, "%.15g", v->valuedouble);
        if (strtod(buf, NULL) != v->valuedouble) snprintf(buf, cap, "%.17g", v->valuedouble);
    }
}

int policy_defaults_apply_spec(const char *spec, const char *model, const char *dataset,
                               int64_t budget, char **out_spec, struct eb_err *e)
{
    *out_spec = NULL;
    if (!spec) return eb_fail(e, "policy: no policy given");
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    char name[64];
    const struct policy_entry *en = NULL;
    /* Unknown names and bad lists pass through: policy_parse reports them. */
    if (nlen < sizeof name && !(colon && colon[1] == '\0')) {
        memcpy(name, spec, nlen);
        name[nlen] = '\0';
        en = policy_registry_find(name);
    }
    cJSON *added = NULL;
    struct user_keys u = {NULL, colon ? colon + 1 : NULL, colon ? strlen(colon + 1) : 0};
    if (en && defaults_for(en, model, dataset, budget, &u, &added, e)) return -1;
    size_t cap = strlen(spec) + 1;
    const cJSON *it;
    if (added) cJSON_ArrayForEach(it, added) cap += strlen(it->string) + 160;
    char *out = malloc(cap);
    if (!out) {
        cJSON_Delete(added);
        return eb_fail(e, "out of memory");
    }
    size_t off = (size_t)snprintf(out, cap, "%s", spec);
    int first = !colon;
    if (added) cJSON_ArrayForEach(it, added) {
        char val[128];
        spec_value(it, val, sizeof val);
        off += (size_t)snprintf(out + off, cap - off, "%s%s=%s", first ? ":" : ",", it->string,
                                val);
        first = 0;
    }
    cJSON_Delete(added);
    *out_spec = out;
    return 0;
}
