/* code_hash.h - the hashes of the sources this binary was built from.
 *
 * The Makefile generates their definitions (tools/code_hash.sh) at every
 * build: SHA-256 over the files that can change a measurement (util, model,
 * kernels, policies, datasets, harness/exp, harness/grade).
 *
 * A run key carries code_hash_policy() of its policy's registry row: the
 * common hash (everything but the .c and .h files of policies/), the files
 * of policies/ that no row names in .sources (shared helpers), and the
 * files its own row names (registry.c, the table, enters through what the
 * row resolves to: name and parameters, in the key).  So a changed shared source makes every point stale,
 * a changed policy file only that policy's points, and a new policy (its
 * files and its row) none. */
#ifndef EB_CODE_HASH_H
#define EB_CODE_HASH_H

#include <stddef.h>

#include "policies/registry.h"
#include "util/err.h"

/* One policies/ file and the SHA-256 (hex) of its contents. */
struct code_file {
    const char *path;      /* "policies/rkv.c" */
    const char *sha256;
};

extern const char code_hash[];            /* every file: 64 lowercase hex digits */
extern const char code_hash_common[];     /* without policies/ .c and .h files */
extern const struct code_file code_hash_files[];   /* ends with {NULL, NULL} */
extern const int code_hash_dirty;         /* 1: built from uncommitted changes */

/* "code:<first 16 hex digits of code_hash>" plus "-dirty" for a dirty tree:
 * how the experiments table and messages name the build. */
const char *code_version(void);

/* The code hash of a run of registry row `en` (64 hex digits and a NUL), as
 * above, from this build's tables and registry.  Fails when a row names a
 * file the build did not hash. */
int code_hash_policy(const struct policy_entry *en, char out[65], struct eb_err *e);
/* The same over given tables (tests): files ends with {NULL, NULL}, rows[n_rows]
 * is the registry whose .sources decide which files are shared. */
int code_hash_combine(const char *common, const struct code_file *files,
                      const struct policy_entry *rows, int n_rows,
                      const struct policy_entry *en, char out[65], struct eb_err *e);

#endif
