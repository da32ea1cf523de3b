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
#include <sys/stat.h>
#include <unistd.h>

#include "hfconfig.h"
#include "modelfile.h"

#define REGISTRY_REL "model/models.json"

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Find and parse models.json; root_dir receives the directory the registry's
 * relative paths are relative to ("." for the current directory). */
static cJSON *registry_load(char *root_dir, size_t cap, struct eb_err *e)
{
    char cand[PATH_MAX + 32];
    if (exists(REGISTRY_REL)) {
        snprintf(root_dir, cap, ".");
        return hf_json_load(REGISTRY_REL, e);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        const char *ups[] = {"", "/.."};
        for (int i = 0; i < 2; i++) {
            int n1 = snprintf(cand, sizeof cand, "%s%s/%s", exe, ups[i], REGISTRY_REL);
            int n2 = snprintf(root_dir, cap, "%s%s", exe, ups[i]);
            if (n1 > 0 && (size_t)n1 < sizeof cand && n2 > 0 && (size_t)n2 < cap && exists(cand))
                return hf_json_load(cand, e);
        }
    }
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
    if (exists(path_or_name)) {
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
        snprintf(cand, sizeof cand, "%s/%s", dir, base_name(file));
        if (exists(cand)) goto found;
    }
    if (file[0] == '/' || strcmp(root, ".") == 0)
        snprintf(cand, sizeof cand, "%s", file);
    else
        snprintf(cand, sizeof cand, "%s/%s", root, file);
    if (exists(cand)) goto found;
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

int model_registry_chat(const char *path_or_name, char *out, size_t out_len)
{
    if (!path_or_name || out_len == 0) return -1;
    char root[PATH_MAX];
    struct eb_err e;
    cJSON *reg = registry_load(root, sizeof root, &e);
    if (!reg) return -1;
    /* A path matches the entry whose file has the same base name. */
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s", path_or_name);
    size_t n = strlen(want);
    while (n > 1 && want[n - 1] == '/') want[--n] = '\0';
    int rc = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, reg) {
        const char *file = entry_str(it, "file");
        const char *chat = entry_str(it, "chat");
        if (!chat) continue;
        if (strcmp(it->string, want) == 0 ||
            (file && strcmp(base_name(file), base_name(want)) == 0)) {
            if (strlen(chat) < out_len) {
                snprintf(out, out_len, "%s", chat);
                rc = 0;
            }
            break;
        }
    }
    cJSON_Delete(reg);
    return rc;
}
