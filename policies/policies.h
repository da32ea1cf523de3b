/* policies.h - the policies the registry knows (each defined in its own file). */
#ifndef EB_POLICIES_H
#define EB_POLICIES_H

#include "registry.h"

extern const struct policy_ops fullkv_ops, streamingllm_ops, h2o_ops, h2o_rkv_ops, snapkv_ops,
    rkv_ops;
extern const struct param_def fullkv_params[], streamingllm_params[], h2o_params[],
    h2o_rkv_params[], snapkv_params[], rkv_params[];

/* VaSE family (policies/vase.c). */
extern const struct policy_ops vase_attnv_ops, vase_dkv_ops;
extern const struct param_def vase_attnv_params[], vase_dkv_params[];

/* SEAL steering and SkipKV (policies/seal.c, policies/skipkv.c). */
extern const struct policy_ops seal_ops, skipkv_ops;
extern const struct param_def seal_params[], skipkv_params[];

/* RPC and BeaconKV (policies/rpc.c, policies/beaconkv.c). */
extern const struct policy_ops rpc_ops, beaconkv_ops;
extern const struct param_def rpc_params[], beaconkv_params[];

#endif
