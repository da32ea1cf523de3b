/* policies.h - what a policy file includes: the vtable (policy.h) and the
 * parameter tables (registry.h).  A policy file defines its `const struct
 * policy_ops` and `const struct param_def []`; registry.c declares them next
 * to the rows that name them, so a new policy touches that file and no other
 * (policies/README.md, "Adding a policy"). */
#ifndef EB_POLICIES_H
#define EB_POLICIES_H

#include "registry.h"

#endif
