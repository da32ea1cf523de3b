/* device_name.c - the spelling of a device: cpu, cuda, cuda:N (device.h).
 * Apart from the factory so that config parsing (and its fuzzer) needs no
 * backend. */
#include "harness/exp/device.h"

#include <stdlib.h>
#include <string.h>

/* "cuda" -> 0, "cuda:N" -> N; -1 when device is not a CUDA name. */
int device_cuda_index(const char *device)
{
    if (!strcmp(device, "cuda")) return 0;
    if (strncmp(device, "cuda:", 5) || !device[5]) return -1;
    char *end = NULL;
    long n = strtol(device + 5, &end, 10);
    return *end || n < 0 || n > 255 ? -1 : (int)n;
}

enum kv_type device_kv_type(const char *device, int requested)
{
    if (requested >= 0) return (enum kv_type)requested;
    return device && device_cuda_index(device) >= 0 ? KV_BF16 : KV_F32;
}

int device_kv_type_parse(const char *s, int *out)
{
    enum kv_type t;
    if (s && !strcmp(s, "auto")) {
        *out = DEVICE_KV_AUTO;
        return 0;
    }
    if (kv_type_parse(s, &t)) return -1;
    *out = (int)t;
    return 0;
}

int device_syntax_check(const char *device, struct eb_err *e)
{
    if (!device || !strcmp(device, "cpu") || device_cuda_index(device) >= 0) return 0;
    return eb_fail(e, "device %s: expected cpu, cuda or cuda:N", device);
}
