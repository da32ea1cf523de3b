/* repo_file.h - finding the repository's own data files (model/models.json,
 * policies/policy_defaults.json) from wherever evictbench runs: the current
 * directory (tests and make run from the root), else the running binary's
 * directory or its parent (./evictbench, build/evictbench). */
#ifndef EB_REPO_FILE_H
#define EB_REPO_FILE_H

#include <stddef.h>

/* 1 when path names an existing file or directory. */
int eb_path_exists(const char *path);

/* The part of path after its last '/'. */
const char *eb_base_name(const char *path);

/* Find rel (a path relative to the repository root): 0 with its path in
 * out[cap] and, when root is not NULL, the root directory it was found under
 * in root[root_cap] ("." for the current directory); -1 when not found or a
 * path does not fit. */
int eb_repo_file(const char *rel, char *out, size_t cap, char *root, size_t root_cap);

#endif
