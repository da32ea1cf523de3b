/* registry.c - model names (model/models.json) -> files, and how to get them.
 *
 * models.json maps a name to {"file": path relative to the repository root,
 * "how": how a user obtains it, "chat": default chat template}.  The registry
 * is found relative to the current directory (tests and make run from the
 * root) or to the running binary (./evictbench, build/evictbench).  When
 * EVICTBENCH_MODELS names a directory, a registry file is looked for there
 * first, by its base name. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hfconfig.h"
#include "modelfile.h"
#include "../util/repo_file.h"

#define REGISTRY_REL "model/models.json"

/* Find and parse models.json; root_dir receives the directory the registry's
 * relative paths are relative to ("." for the current directory). */
static cJSON *registry_load(char *root_dir, size_t cap, struct eb_err *e)
{
    char path[PATH_MAX + 32];
    if (eb_repo_file(REGISTRY_REL, path, sizeof path, root_dir, cap) == 0)
        return hf_json_load(path, e);
    eb_fail(e, "model registry %s not found (run from the evictbench directory)", REGISTRY_REL);
    return NULL;
}

static const char *entry_str(const cJSON *entry, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(entry, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "a, b, c" of every registry name, into out. */
static void known_names(const cJSON *reg, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    const cJSON *it;
    cJSON_ArrayForEach(it, reg) {
        int n = snprintf(out + used, cap - used, "%s%s", used ? ", " : "", it->string);
        if (n < 0 || (size_t)n >= cap - used) break;
        used += (size_t)n;
    }
}

int model_resolve(const char *path_or_name, char *out, size_t out_len, struct eb_err *e)
{
    if (!path_or_name || !*path_or_name) return eb_fail(e, "no model given");
    if (eb_path_exists(path_or_name)) {
        if (strlen(path_or_name) >= out_len) return eb_fail(e, "%s: path too long", path_or_name);
        snprintf(out, out_len, "%s", path_or_name);
        return 0;
    }
    char root[PATH_MAX];
    struct eb_err reg_err;
    cJSON *reg = registry_load(root, sizeof root, &reg_err);
    if (!reg)
        return eb_fail(e, "%s: no such file, and it cannot be looked up as a model name: %s",
                       path_or_name, reg_err.msg);
    int rc = -1;
    const cJSON *entry = cJSON_GetObjectItemCaseSensitive(reg, path_or_name);
    if (!cJSON_IsObject(entry)) {
        char names[400];
        known_names(reg, names, sizeof names);
        eb_fail(e, "%s: no such file and not a known model name (known: %s)", path_or_name, names);
        goto done;
    }
    const char *file = entry_str(entry, "file");
    const char *how = entry_str(entry, "how");
    if (!file) {
        eb_fail(e, "%s: registry entry '%s' has no \"file\"", REGISTRY_REL, path_or_name);
        goto done;
    }
    char cand[PATH_MAX * 2];
    const char *dir = getenv("EVICTBENCH_MODELS");
    if (dir && *dir) {
        snprintf(cand, sizeof cand, "%s/%s", dir, eb_base_name(file));
        if (eb_path_exists(cand)) goto found;
    }
    if (file[0] == '/' || strcmp(root, ".") == 0)
        snprintf(cand, sizeof cand, "%s", file);
    else
        snprintf(cand, sizeof cand, "%s/%s", root, file);
    if (eb_path_exists(cand)) goto found;
    eb_fail(e, "model '%s': file %s not found; obtain it with: %s", path_or_name, file,
            how ? how : "(the registry does not say)");
    goto done;
found:
    if (strlen(cand) >= out_len) {
        eb_fail(e, "%s: path too long", cand);
        goto done;
    }
    snprintf(out, out_len, "%s", cand);
    rc = 0;
done:
    cJSON_Delete(reg);
    return rc;
}

/* The entry named path_or_name, else the one whose file has the same base
 * name (case aside; trailing slashes of a directory ignored), or NULL. */
static const cJSON *registry_entry(const cJSON *reg, const char *path_or_name)
{
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s", path_or_name);
    size_t n = strlen(want);
    while (n > 1 && want[n - 1] == '/') want[--n] = '\0';
    const cJSON *it;
    cJSON_ArrayForEach(it, reg) if (strcmp(it->string, want) == 0) return it;
    cJSON_ArrayForEach(it, reg) {
        char file[PATH_MAX];
        const char *f = entry_str(it, "file");
        if (!f) continue;
        snprintf(file, sizeof file, "%s", f);
        size_t m = strlen(file);
        while (m > 1 && file[m - 1] == '/') file[--m] = '\0';
        if (strcasecmp(eb_base_name(file), eb_base_name(want)) == 0) return it;
    }
    return NULL;
}

/* Copy the registry entry's key (field NULL: its name) into out. */
static int registry_lookup(const char *path_or_name, const char *field, char *out, size_t out_len)
{
    if (!path_or_name || out_len == 0) return -1;
    char root[PATH_MAX];
    struct eb_err e;
    cJSON *reg = registry_load(root, sizeof root, &e);
    if (!reg) return -1;
    const cJSON *it = registry_entry(reg, path_or_name);
    const char *v = !it ? NULL : field ? entry_str(it, field) : it->string;
    int rc = v && strlen(v) < out_len ? 0 : -1;
    if (rc == 0) snprintf(out, out_len, "%s", v);
    cJSON_Delete(reg);
    return rc;
}

int model_registry_chat(const char *path_or_name, char *out, size_t out_len)
{
    return registry_lookup(path_or_name, "chat", out, out_len);
}

int model_registry_name(const char *path_or_name, char *out, size_t out_len)
{
    return registry_lookup(path_or_name, NULL, out, out_len);
}

int model_chat_template(const char *path_or_name, const char *name, enum chat_template *out,
                        struct eb_err *e)
{
    char def[32];
    if (!name) name = model_registry_chat(path_or_name, def, sizeof def) == 0 ? def : "raw";
    return chat_template_parse(name, out, e);
}
