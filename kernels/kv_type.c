/* kv_type.c - names and sizes of the KV cache element types (kernels/backend.h). */
#include "kernels/backend.h"

#include <string.h>

static const char *const kv_names[KV_TYPE_COUNT] = {"f32", "f16", "bf16"};

const char *kv_type_name(enum kv_type t)
{
    return (int)t >= 0 && (int)t < KV_TYPE_COUNT ? kv_names[t] : "?";
}

int kv_type_parse(const char *s, enum kv_type *out)
{
    for (int t = 0; s && t < KV_TYPE_COUNT; t++)
        if (strcmp(s, kv_names[t]) == 0) {
            *out = (enum kv_type)t;
            return 0;
        }
    return -1;
}

size_t kv_type_bytes(enum kv_type t)
{
    switch (t) {
    case KV_F32: return 4;
    case KV_F16:
    case KV_BF16: return 2;
    }
    return 0;
}
