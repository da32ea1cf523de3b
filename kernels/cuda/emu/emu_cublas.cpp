/* emu_cublas.cpp - the cuBLAS calls this backend makes, on the CPU: each
 * product in f32 through OpenBLAS (16-bit operands widened exactly first),
 * queued as a stream operation so a captured step records it.  alpha and
 * beta are host pointers (cuBLAS's default pointer mode): read at the call,
 * as cuBLAS reads them when it records the call. */
#include "kernels/cuda/emu/emu.h"

#include <cblas.h>
#include <cublas_v2.h>

#include <cstdlib>
#include <vector>

struct cublasContext {
    cublasMath_t math;
};

namespace {

CBLAS_TRANSPOSE op_of(cublasOperation_t op)
{
    return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
}

/* n elements of `type` at p as f32; false for a type this emulator lacks. */
bool widen(std::vector<float> &out, const void *p, cudaDataType type, size_t n)
{
    out.resize(n);
    if (type == CUDA_R_32F) {
        std::memcpy(out.data(), p, n * sizeof(float));
    } else if (type == CUDA_R_16BF) {
        const __nv_bfloat16 *b = (const __nv_bfloat16 *)p;
        for (size_t i = 0; i < n; i++) out[i] = __bfloat162float(b[i]);
    } else if (type == CUDA_R_16F) {
        const __half *h = (const __half *)p;
        for (size_t i = 0; i < n; i++) out[i] = __half2float(h[i]);
    } else {
        return false;
    }
    return true;
}

} /* namespace */

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    *handle = new cublasContext{CUBLAS_DEFAULT_MATH};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    (void)handle;
    (void)stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes)
{
    (void)handle;
    return workspace || !bytes ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_EMULATED_ERROR";
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                              int m, int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc)
{
    (void)handle;
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    float al = *alpha, be = *beta;
    emu::submit_op([=]() {
        if (m && n)
            cblas_sgemm(CblasColMajor, op_of(ta), op_of(tb), m, n, k, al, A, lda, B, ldb, be, C,
                        ldc);
    });
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const void *alpha, const void *A,
                            cudaDataType a_type, int lda, const void *B, cudaDataType b_type,
                            int ldb, const void *beta, void *C, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)handle;
    (void)algo;
    if (m < 0 || n < 0 || k < 0 || c_type != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    float al = *(const float *)alpha, be = *(const float *)beta;
    size_t a_n = (size_t)lda * (size_t)(ta == CUBLAS_OP_N ? k : m);
    size_t b_n = (size_t)ldb * (size_t)(tb == CUBLAS_OP_N ? n : k);
    emu::submit_op([=]() {
        std::vector<float> a32, b32;
        if (!widen(a32, A, a_type, a_n) || !widen(b32, B, b_type, b_n)) std::abort();
        if (m && n)
            cblas_sgemm(CblasColMajor, op_of(ta), op_of(tb), m, n, k, al, a32.data(), lda,
                        b32.data(), ldb, be, (float *)C, ldc);
    });
    return CUBLAS_STATUS_SUCCESS;
}

} /* extern "C" */
