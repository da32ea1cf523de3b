/* device.c - the backend factory behind --device (see device.h). */
#include "harness/exp/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Defined only when kernels/cuda's backend object is linked (make cuda ->
 * evictbench-cuda).  Weak references resolve to NULL otherwise, so the plain
 * build needs neither the CUDA toolkit nor a stub. */
struct backend *backend_cuda_create(int device) __attribute__((weak));
int backend_cuda_probe(int device, char *msg, size_t msg_size) __attribute__((weak));

int device_has_cuda(void)
{
    return backend_cuda_create != NULL && backend_cuda_probe != NULL;
}

/* "cuda" -> 0, "cuda:N" -> N; -1 when device is not a CUDA name. */
static int cuda_index(const char *device)
{
    if (!strcmp(device, "cuda")) return 0;
    if (strncmp(device, "cuda:", 5) || !device[5]) return -1;
    char *end = NULL;
    long n = strtol(device + 5, &end, 10);
    return *end || n < 0 || n > 255 ? -1 : (int)n;
}

int device_check(const char *device, struct eb_err *e)
{
    if (!device || !strcmp(device, "cpu")) return 0;
    if (cuda_index(device) < 0)
        return eb_fail(e, "--device %s: expected cpu, cuda or cuda:N", device);
    if (!device_has_cuda())
        return eb_fail(e, "--device %s: this build has no CUDA backend (make cuda builds "
                          "./evictbench-cuda with it)", device);
    return 0;
}

int device_backend(const char *device, int threads, struct backend **out, struct eb_err *e)
{
    *out = NULL;
    if (device_check(device, e)) return -1;
    if (!device || !strcmp(device, "cpu")) {
        if (!(*out = backend_cpu_create(threads))) return eb_fail(e, "cannot create the CPU backend");
        return 0;
    }
    int idx = cuda_index(device);
    char why[256] = "";
    if (backend_cuda_probe(idx, why, sizeof why))
        return eb_fail(e, "--device %s: %s", device, why[0] ? why : "no usable GPU");
    if (!(*out = backend_cuda_create(idx)))
        return eb_fail(e, "--device %s: cannot start the CUDA backend", device);
    return 0;
}
