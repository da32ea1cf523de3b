/* code_hash.h - the hash of the sources this binary was built from.
 *
 * The Makefile generates its definition (tools/code_hash.sh) at every build:
 * SHA-256 over the files that can change a measurement (util, model, kernels,
 * policies, datasets, harness/exp, harness/grade).  Run keys include it, so a
 * changed source makes every point stale and `exp` measures it again. */
#ifndef EB_CODE_HASH_H
#define EB_CODE_HASH_H

#include <stddef.h>

extern const char code_hash[];     /* 64 lowercase hex digits */
extern const int code_hash_dirty;  /* 1: built from uncommitted changes */

/* "code:<first 16 hex digits>" plus "-dirty" for a dirty tree: how the
 * experiments table and messages name the build. */
const char *code_version(void);

#endif
