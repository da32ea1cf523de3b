/* cuda_fault.h - telling a CUDA failure apart (plain C, so the rules are
 * tested on a machine without a GPU: tests/test_cuda_fault.c).
 *
 * Only running out of memory (cudaErrorMemoryAllocation, or cuBLAS's
 * CUBLAS_STATUS_ALLOC_FAILED) is an OOM, and only when the context is still
 * healthy once that error is cleared: a point that ran out of memory is
 * recorded as `oom` and the next point runs on the same backend.  Every
 * other error (a fault of an earlier launch that cudaMalloc merely reports,
 * a bad launch, an error that stays after clearing: a sticky one) is a
 * failure whose message names the CUDA error, and the backend stays failed.
 *
 * The codes are the runtime's numeric values, pinned here so this file needs
 * no CUDA header; backend_cuda.cu checks them against the real enums at
 * compile time. */
#ifndef EB_CUDA_FAULT_H
#define EB_CUDA_FAULT_H

#include "util/err.h"

#include <stddef.h>

enum {
    CUDA_RC_SUCCESS = 0,
    CUDA_RC_MEMORY_ALLOCATION = 2, /* cudaErrorMemoryAllocation */
    BLAS_RC_SUCCESS = 0,
    BLAS_RC_ALLOC_FAILED = 3       /* CUBLAS_STATUS_ALLOC_FAILED */
};

enum cuda_fault_kind {
    CUDA_FAULT_NONE = 0,
    CUDA_FAULT_OOM = 1,  /* out of memory; the context was healthy after clearing it */
    CUDA_FAULT_FAIL = 2  /* anything else: the backend stays failed */
};

/* A backend's first failure. */
struct cuda_fault {
    enum cuda_fault_kind kind; /* CUDA_FAULT_NONE while all is well */
    char msg[256];
};

/* The kind of a CUDA runtime result rc.  `after` is the context's state once
 * the error was cleared (cudaGetLastError, then cudaDeviceSynchronize);
 * it is read only when rc is an allocation failure. */
enum cuda_fault_kind cuda_fault_classify(int rc, int after);
/* The same for a cuBLAS status (after: the CUDA runtime's state). */
enum cuda_fault_kind blas_fault_classify(int status, int after);

/* Records a failure of `kind` with the message "<what>: <detail>".  The first
 * failure is kept, except that a hard failure replaces a recorded OOM (the
 * context broke since).  NONE records nothing. */
void cuda_fault_record(struct cuda_fault *f, enum cuda_fault_kind kind, const char *what,
                       const char *detail);

/* 0 when nothing is recorded; else -1 with e set to the message (EB_ERR_NOMEM
 * for an OOM).  An OOM is reported once and then cleared, so the backend is
 * usable for the next point; a failure stays. */
int cuda_fault_take(struct cuda_fault *f, struct eb_err *e);

#endif
