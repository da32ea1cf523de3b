/* code_hash_policy.c - a run's code hash: the shared sources and its own
 * policy's files, never another policy's (code_hash.h). */
#include "harness/exp/code_hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sha256.h"

/* 1 if the space-separated list `sources` names base (a file of policies/). */
static int names_file(const char *sources, const char *base)
{
    size_t n = strlen(base);
    for (const char *s = sources; s && *s;) {
        s += strspn(s, " ");
        size_t len = strcspn(s, " ");
        if (len == n && !strncmp(s, base, n)) return 1;
        s += len;
    }
    return 0;
}

/* The file's name inside policies/, or NULL for a path elsewhere. */
static const char *policy_base(const char *path)
{
    return strncmp(path, "policies/", 9) ? NULL : path + 9;
}

/* Every name in en->sources is among the hashed files, so no file of the
 * policy's own can fall out of its key by a typo. */
static int check_sources(const struct code_file *files, const struct policy_entry *en,
                         struct eb_err *e)
{
    for (const char *s = en->sources; s && *s;) {
        s += strspn(s, " ");
        size_t len = strcspn(s, " "), k = 0;
        if (!len) break;
        while (files[k].path) {
            const char *b = policy_base(files[k].path);
            if (b && strlen(b) == len && !strncmp(b, s, len)) break;
            k++;
        }
        if (!files[k].path)
            return eb_fail(e, "policy %s: its source '%.*s' is not a hashed file of policies/",
                           en->name, (int)len, s);
        s += len;
    }
    return 0;
}

/* 1 if the file belongs in en's hash: a shared file (no row names it) or one
 * of en's own. */
static int file_counts(const char *base, const struct policy_entry *rows, int n_rows,
                       const struct policy_entry *en)
{
    if (names_file(en->sources, base)) return 1;
    for (int i = 0; i < n_rows; i++)
        if (names_file(rows[i].sources, base)) return 0;
    return 1;
}

int code_hash_combine(const char *common, const struct code_file *files,
                      const struct policy_entry *rows, int n_rows,
                      const struct policy_entry *en, char out[65], struct eb_err *e)
{
    out[0] = '\0';
    if (check_sources(files, en, e)) return -1;
    size_t cap = strlen(common) + 16, n = 0;
    for (int k = 0; files[k].path; k++)
        cap += strlen(files[k].path) + strlen(files[k].sha256) + 2;
    char *text = malloc(cap);
    if (!text) return eb_fail(e, "out of memory");
    /* the same "path\nhash\n" lines the script hashes, after the common hash */
    n += (size_t)snprintf(text, cap, "common\n%s\n", common);
    for (int k = 0; files[k].path; k++) {
        const char *b = policy_base(files[k].path);
        if (b && !file_counts(b, rows, n_rows, en)) continue;
        n += (size_t)snprintf(text + n, cap - n, "%s\n%s\n", files[k].path, files[k].sha256);
    }
    sha256_hex(text, n, out);
    free(text);
    return 0;
}

int code_hash_policy(const struct policy_entry *en, char out[65], struct eb_err *e)
{
    int n;
    const struct policy_entry *rows = policy_registry(&n);
    return code_hash_combine(code_hash_common, code_hash_files, rows, n, en, out, e);
}
