/* test_cuda_fault.c - how the CUDA backend tells its failures apart
 * (kernels/cuda/cuda_fault.c, plain C): only an allocation failure on a
 * context that is healthy once the error is cleared is an OOM, which is
 * reported once and leaves the backend usable for the next point; anything
 * else names the CUDA error and stays. */
#include "test.h"

#include "kernels/cuda/cuda_fault.h"

enum { RC_INVALID_VALUE = 1, RC_ILLEGAL_ADDRESS = 700, RC_LAUNCH_FAILURE = 719,
       BLAS_EXECUTION_FAILED = 13 };

static void test_classify(void)
{
    CHECK(cuda_fault_classify(CUDA_RC_SUCCESS, CUDA_RC_SUCCESS) == CUDA_FAULT_NONE);
    CHECK(cuda_fault_classify(CUDA_RC_MEMORY_ALLOCATION, CUDA_RC_SUCCESS) == CUDA_FAULT_OOM);
    /* an allocation failure whose context is broken after clearing: a failure */
    CHECK(cuda_fault_classify(CUDA_RC_MEMORY_ALLOCATION, RC_ILLEGAL_ADDRESS) == CUDA_FAULT_FAIL);
    /* cudaMalloc reporting an earlier launch's fault is not an OOM */
    CHECK(cuda_fault_classify(RC_ILLEGAL_ADDRESS, CUDA_RC_SUCCESS) == CUDA_FAULT_FAIL);
    CHECK(cuda_fault_classify(RC_LAUNCH_FAILURE, RC_LAUNCH_FAILURE) == CUDA_FAULT_FAIL);
    CHECK(cuda_fault_classify(RC_INVALID_VALUE, CUDA_RC_SUCCESS) == CUDA_FAULT_FAIL);
    CHECK(blas_fault_classify(BLAS_RC_SUCCESS, CUDA_RC_SUCCESS) == CUDA_FAULT_NONE);
    CHECK(blas_fault_classify(BLAS_RC_ALLOC_FAILED, CUDA_RC_SUCCESS) == CUDA_FAULT_OOM);
    CHECK(blas_fault_classify(BLAS_RC_ALLOC_FAILED, RC_ILLEGAL_ADDRESS) == CUDA_FAULT_FAIL);
    CHECK(blas_fault_classify(BLAS_EXECUTION_FAILED, CUDA_RC_SUCCESS) == CUDA_FAULT_FAIL);
}

/* A sweep: a point runs out of memory, is reported as oom once, and the
 * next point starts clean. */
static void test_oom_then_next_point(void)
{
    struct cuda_fault f = {0};
    struct eb_err e = {0};
    CHECK(cuda_fault_take(&f, &e) == 0);
    cuda_fault_record(&f, CUDA_FAULT_OOM, "cuda: attention splits",
                      "cudaErrorMemoryAllocation: out of memory");
    cuda_fault_record(&f, CUDA_FAULT_OOM, "cuda: later", "second");
    CHECK(cuda_fault_take(&f, &e) == -1 && e.kind == EB_ERR_NOMEM);
    CHECK_STR(e.msg, "cuda: attention splits: cudaErrorMemoryAllocation: out of memory");
    CHECK(f.kind == CUDA_FAULT_NONE);
    struct eb_err e2 = {0};
    CHECK(cuda_fault_take(&f, &e2) == 0 && e2.msg[0] == 0); /* usable again */
}

/* A failure is kept (the first one), replaces an OOM, and is never cleared. */
static void test_failure_sticks(void)
{
    struct cuda_fault f = {0};
    struct eb_err e = {0};
    cuda_fault_record(&f, CUDA_FAULT_NONE, "cuda: nothing", "nothing");
    CHECK(f.kind == CUDA_FAULT_NONE);
    cuda_fault_record(&f, CUDA_FAULT_OOM, "cuda: grow", "cudaErrorMemoryAllocation: out of memory");
    cuda_fault_record(&f, CUDA_FAULT_FAIL, "cuda: flash attention",
                      "cudaErrorIllegalAddress: an illegal memory access was encountered");
    cuda_fault_record(&f, CUDA_FAULT_FAIL, "cuda: add", "cudaErrorLaunchFailure: later");
    cuda_fault_record(&f, CUDA_FAULT_OOM, "cuda: grow", "cudaErrorMemoryAllocation: again");
    for (int i = 0; i < 2; i++) {
        CHECK(cuda_fault_take(&f, &e) == -1 && e.kind == EB_ERR_OTHER);
        CHECK(strstr(e.msg, "flash attention: cudaErrorIllegalAddress") != NULL);
    }
    CHECK(f.kind == CUDA_FAULT_FAIL);
}

static void test_long_message(void)
{
    struct cuda_fault f = {0};
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    cuda_fault_record(&f, CUDA_FAULT_FAIL, "cuda: op", big);
    CHECK(strlen(f.msg) == sizeof f.msg - 1);
    cuda_fault_record(&f, CUDA_FAULT_FAIL, NULL, NULL); /* kept: the first */
    CHECK(strncmp(f.msg, "cuda: op: xx", 12) == 0);
}

int main(void)
{
    RUN(test_classify);
    RUN(test_oom_then_next_point);
    RUN(test_failure_sticks);
    RUN(test_long_message);
    return test_summary("cuda_fault");
}
