/* code_version.c - the build's name for messages and the experiments table
 * (see code_hash.h). */
#include <stdio.h>

#include "harness/exp/code_hash.h"

const char *code_version(void)
{
    static char v[48];
    if (!v[0]) snprintf(v, sizeof v, "code:%.16s%s", code_hash, code_hash_dirty ? "-dirty" : "");
    return v;
}
