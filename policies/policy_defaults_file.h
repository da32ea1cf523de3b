/* policy_defaults_file.h - the per-model defaults file, loaded and checked
 * once per process (policy_defaults_file.c), for the lookup in
 * policy_defaults.c.  Not for use elsewhere: policy_defaults.h is the
 * interface. */
#ifndef EB_POLICY_DEFAULTS_FILE_H
#define EB_POLICY_DEFAULTS_FILE_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "registry.h"

enum { DEFAULTS_MAX_BASES = 32 };

struct defaults_file {
    cJSON *root;
    char path[4096];
    const struct policy_entry *bases[DEFAULTS_MAX_BASES];  /* $.policies */
    int n_bases;
};

/* *out: the file, loaded and checked the first time a process asks for it
 * (again only when EVICTBENCH_POLICY_DEFAULTS names another one); the
 * process's copy, not to be freed.  1: no file; 0: loaded; -1: error (a bad
 * file: its path and the JSON path of what is wrong). */
int defaults_file_get(const struct defaults_file **out, struct eb_err *e);

/* A budget key ("768"): a positive decimal integer into *out; 0, or -1. */
int defaults_budget_key(const char *s, int64_t *out);

#endif
