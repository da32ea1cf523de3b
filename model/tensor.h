/* tensor.h - a tensor as stored in a model file, before it is loaded.
 *
 * Types use GGUF's ggml type ids, so both readers (GGUF and safetensors)
 * describe tensors the same way.  Dimensions are in ggml order: ne[0] is the
 * fastest-varying (row length); an HF [out, in] weight has ne = {in, out}. */
#ifndef EB_TENSOR_H
#define EB_TENSOR_H

#include <stddef.h>
#include <stdint.h>

enum eb_type {
    EB_TYPE_F32 = 0,
    EB_TYPE_F16 = 1,
    EB_TYPE_Q4_0 = 2,
    EB_TYPE_Q4_1 = 3,
    EB_TYPE_Q5_0 = 6,
    EB_TYPE_Q5_1 = 7,
    EB_TYPE_Q8_0 = 8,
    EB_TYPE_Q8_1 = 9,
    EB_TYPE_Q2_K = 10,
    EB_TYPE_Q3_K = 11,
    EB_TYPE_Q4_K = 12,
    EB_TYPE_Q5_K = 13,
    EB_TYPE_Q6_K = 14,
    EB_TYPE_Q8_K = 15,
    EB_TYPE_BF16 = 30,
    EB_TYPE_COUNT_ = 40 /* upper bound for tables indexed by type id */
};

struct tensor_ref {
    const char *name;     /* canonical (GGUF-style) name, e.g. "blk.0.attn_q.weight" */
    int type;             /* enum eb_type */
    int n_dims;           /* 1..4 */
    int64_t ne[4];        /* ggml order; unused dims are 1 */
    const void *data;     /* mmap'd bytes, valid while the file is open */
    size_t nbytes;
};

static inline int64_t tensor_nelements(const struct tensor_ref *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

#endif
