/* device.h - the backend a command runs on, by --device.
 *
 * "cpu" (the default) is the thread-pool/BLAS backend every build has.  "cuda" or
 * "cuda:N" is the CUDA backend of kernels/cuda, present only in the binary
 * `make cuda` links (./evictbench-cuda); the plain build says so instead of
 * silently running on the CPU, and a CUDA build on a machine without a usable
 * GPU says why. */
#ifndef EB_DEVICE_H
#define EB_DEVICE_H

#include "kernels/backend.h"
#include "util/err.h"

/* Check a --device value without creating anything ("cpu", "cuda", "cuda:N"). */
int device_check(const char *device, struct eb_err *e);
/* Only the spelling (cpu, cuda, cuda:N), whatever this build has: a config
 * may name a GPU that another binary runs it on (device_name.c). */
int device_syntax_check(const char *device, struct eb_err *e);
/* "cuda" -> 0, "cuda:N" -> N; -1 when device is not a CUDA name. */
int device_cuda_index(const char *device);

/* device_check, then, for a CUDA device in a CUDA build, whether the GPU
 * can be used (backend_cuda_probe): one line saying why not.  Commands call
 * it before any work, so `--device cuda` on a machine without a GPU fails at
 * once, the same way from every command. */
int device_ready(const char *device, struct eb_err *e);

/* The KV cache element type asked for: an enum kv_type, or DEVICE_KV_AUTO
 * (the default): bf16 on a GPU, f32 (exact) on the CPU. */
enum { DEVICE_KV_AUTO = -1 };
/* The type a run on device (NULL: cpu) uses for `requested`. */
enum kv_type device_kv_type(const char *device, int requested);
/* "f32" | "f16" | "bf16" | "auto" into *out (an enum kv_type or
 * DEVICE_KV_AUTO); -1 for anything else. */
int device_kv_type_parse(const char *s, int *out);

/* Create the backend of device (NULL: "cpu"); threads applies to the CPU. */
int device_backend(const char *device, int threads, struct backend **out, struct eb_err *e);

/* 1 when this binary has the CUDA backend linked in. */
int device_has_cuda(void);

/* 1 when be is a CUDA backend (its device pool and sticky errors apply). */
int device_is_cuda(const struct backend *be);

#endif
