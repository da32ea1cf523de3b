/* device.c - the backend factory behind --device (see device.h).
 *
 * One "no CUDA" mechanism: kernels/cuda/backend_cuda_stub.c.  The plain build
 * links its weak stubs (backend_cuda_linked() is 0 there and every entry
 * point fails with one line); `make cuda` links the real backend whole, whose
 * strong definitions replace them. */
#include "harness/exp/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/backend_cuda.h"

int device_has_cuda(void)
{
    return backend_cuda_linked();
}

int device_check(const char *device, struct eb_err *e)
{
    if (!device || !strcmp(device, "cpu")) return 0;
    if (device_cuda_index(device) < 0)
        return eb_fail(e, "--device %s: expected cpu, cuda or cuda:N", device);
    if (!device_has_cuda())
        return eb_fail(e, "--device %s: this build has no CUDA backend (make cuda builds "
                          "./evictbench-cuda with it)", device);
    return 0;
}

int device_is_cuda(const struct backend *be)
{
    return be && be->name && !strcmp(be->name, "cuda");
}

int device_ready(const char *device, struct eb_err *e)
{
    if (device_check(device, e)) return -1;
    if (!device || !strcmp(device, "cpu")) return 0;
    int idx = device_cuda_index(device);
    char why[256] = "";
    if (backend_cuda_probe(idx, why, sizeof why))
        return eb_fail(e, "--device %s: %s", device, why[0] ? why : "no usable GPU");
    return 0;
}

int device_backend(const char *device, int threads, struct backend **out, struct eb_err *e)
{
    *out = NULL;
    if (device_ready(device, e)) return -1;
    if (!device || !strcmp(device, "cpu")) {
        if (!(*out = backend_cpu_create(threads))) return eb_fail(e, "cannot create the CPU backend");
        return 0;
    }
    int idx = device_cuda_index(device);
    struct eb_err ce = {0};
    if (!(*out = backend_cuda_create(idx, &ce)))
        return eb_fail(e, "--device %s: cannot start the CUDA backend: %s", device,
                       ce.msg[0] ? ce.msg : "unknown reason");
    return 0;
}
