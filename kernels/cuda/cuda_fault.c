/* cuda_fault.c - see cuda_fault.h. */
#include "kernels/cuda/cuda_fault.h"

#include <stdio.h>

enum cuda_fault_kind cuda_fault_classify(int rc, int after)
{
    if (rc == CUDA_RC_SUCCESS) return CUDA_FAULT_NONE;
    if (rc == CUDA_RC_MEMORY_ALLOCATION && after == CUDA_RC_SUCCESS) return CUDA_FAULT_OOM;
    return CUDA_FAULT_FAIL;
}

enum cuda_fault_kind blas_fault_classify(int status, int after)
{
    if (status == BLAS_RC_SUCCESS) return CUDA_FAULT_NONE;
    if (status == BLAS_RC_ALLOC_FAILED && after == CUDA_RC_SUCCESS) return CUDA_FAULT_OOM;
    return CUDA_FAULT_FAIL;
}

void cuda_fault_record(struct cuda_fault *f, enum cuda_fault_kind kind, const char *what,
                       const char *detail)
{
    if (kind == CUDA_FAULT_NONE) return;
    if (f->kind == CUDA_FAULT_FAIL || (f->kind == CUDA_FAULT_OOM && kind == CUDA_FAULT_OOM))
        return;
    snprintf(f->msg, sizeof f->msg, "%s: %s", what ? what : "cuda", detail ? detail : "failed");
    f->kind = kind;
}

int cuda_fault_take(struct cuda_fault *f, struct eb_err *e)
{
    if (f->kind == CUDA_FAULT_NONE) return 0;
    if (f->kind == CUDA_FAULT_FAIL) return eb_fail(e, "%s", f->msg);
    eb_fail_nomem(e, "%s", f->msg);
    f->kind = CUDA_FAULT_NONE;
    f->msg[0] = 0;
    return -1;
}
