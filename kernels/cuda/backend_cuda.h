/* backend_cuda.h - the CUDA backend (cuBLAS + simple kernels), built by
 * `make cuda` into kernels/cuda/build/libevictbench_cuda.a.
 *
 * It implements struct backend exactly as the CPU backend does: float*
 * tensors live in device memory, int* metadata and inv_freq stay on the host
 * (the backend copies them over itself). */
#ifndef EB_BACKEND_CUDA_H
#define EB_BACKEND_CUDA_H

/* backend.h has no C++ guards; its backend_cpu_create is a C function. */
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/backend.h"

/* A backend on CUDA device `device`; NULL when there is no such device or
 * cuBLAS cannot start (call backend_cuda_probe for the reason). */
struct backend *backend_cuda_create(int device);

/* Why backend_cuda_create(device) would fail, as one line written into msg;
 * returns 0 when the device is usable, -1 otherwise. */
int backend_cuda_probe(int device, char *msg, size_t msg_size);

/* The backend's ops return nothing, so the first CUDA/cuBLAS failure is kept
 * (sticky) and can be read here: NULL while everything has succeeded.
 * (alloc failing for lack of memory returns NULL and is not recorded.) */
const char *backend_cuda_error(const struct backend *be);

#ifdef __cplusplus
}
#endif

#endif
