/* emu.h - what a CUDA source of this backend sees when it is built for the
 * CPU emulator (kernels/cuda/emu/README.md): included first, before the
 * rewritten source.  The CUDA headers give the types (dim3, __nv_bfloat16,
 * the runtime's and cuBLAS's declarations); emu_runtime.cpp and
 * emu_cublas.cpp define the functions; what follows stands in for what only
 * nvcc provides: the thread and block indices, barriers, warp shuffles,
 * atomics, the device intrinsics, and the `<<<...>>>` launch (which
 * rewrite.sh turns into emu::launch(config).call(kernel, arguments)).
 *
 * A block's threads run as fibers on one host thread; a thread runs until it
 * reaches a barrier (or a shuffle), so a missing __syncthreads shows as a
 * wrong result when the threads are run in the other order (EMU_ORDER). */
#ifndef EB_CUDA_EMU_H
#define EB_CUDA_EMU_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>

#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
/* A block's static shared memory: blocks run one after another on one host
 * thread, so a function-local static is that block's. */
#define __shared__ static

namespace emu {

/* The running thread's indices (set by the scheduler before each resume). */
extern uint3 thread_idx, block_idx;
extern dim3 block_dim, grid_dim;

void sync_block();
/* Every live lane of the caller's warp passes `bits` and gets lane src's. */
uint64_t warp_exchange(uint64_t bits, int src_lane);
void *dynamic_shared();

/* Queue (or record, while a stream is captured) one launch of `body` over
 * the grid. */
void submit(dim3 grid, dim3 block, size_t shared, std::function<void()> body);
/* Queue a stream operation that is not a kernel (a copy, a cuBLAS call):
 * run now, or recorded while a stream is captured. */
void submit_op(std::function<void()> op);

/* One launch's configuration; call() binds the arguments as the launch
 * does (evaluated now, copied) and queues the kernel over the grid. */
struct launcher {
    dim3 grid, block;
    size_t shared;
    template <class F, class... A> void call(F kernel, A &&...args) const
    {
        std::tuple<std::decay_t<A>...> bound(std::forward<A>(args)...);
        submit(grid, block, shared, [kernel, bound]() { std::apply(kernel, bound); });
    }
};

inline launcher launch(dim3 grid, dim3 block, size_t shared = 0, cudaStream_t stream = 0)
{
    (void)stream;
    return launcher{grid, block, shared};
}

inline int lane_id()
{
    unsigned linear = thread_idx.x + block_dim.x * (thread_idx.y + block_dim.y * thread_idx.z);
    return (int)(linear & 31u);
}

template <class T> T exchange(T v, int src)
{
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    bits = warp_exchange(bits, src);
    T out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
}

} /* namespace emu */

#define threadIdx emu::thread_idx
#define blockIdx emu::block_idx
#define blockDim emu::block_dim
#define gridDim emu::grid_dim

inline void __syncthreads() { emu::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    (void)mask;
    (void)emu::warp_exchange(0, 0);
}
inline void __threadfence() {}
inline void __threadfence_block() {}

template <class T> T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    (void)mask;
    int lane = emu::lane_id();
    return emu::exchange(v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    (void)mask;
    int lane = emu::lane_id();
    int src = lane + (int)delta;
    if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
    return emu::exchange(v, src);
}
template <class T> T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    (void)mask;
    int lane = emu::lane_id();
    int src = lane - (int)delta;
    if (src < (lane & ~(width - 1))) src = lane;
    return emu::exchange(v, src);
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    (void)mask;
    int lane = emu::lane_id();
    int src = lane ^ lane_mask;
    if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
    return emu::exchange(v, src);
}

/* One host thread runs every fiber, and a fiber yields only at a barrier:
 * a read-modify-write is atomic as written. */
template <class T> T atomicAdd(T *p, T v)
{
    T old = *p;
    *p = old + v;
    return old;
}
template <class T> T atomicSub(T *p, T v)
{
    T old = *p;
    *p = old - v;
    return old;
}
template <class T> T atomicMax(T *p, T v)
{
    T old = *p;
    if (v > old) *p = v;
    return old;
}
template <class T> T atomicMin(T *p, T v)
{
    T old = *p;
    if (v < old) *p = v;
    return old;
}
template <class T> T atomicExch(T *p, T v)
{
    T old = *p;
    *p = v;
    return old;
}
template <class T> T atomicCAS(T *p, T cmp, T v)
{
    T old = *p;
    if (old == cmp) *p = v;
    return old;
}

/* Device intrinsics: the rounding-mode forms are the plain operations (the
 * emulator is built without contraction, so nothing is fused). */
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __double2float_rn(double a) { return (float)a; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
/* The bits of one 4-byte type as another's. */
template <class To, class From> inline To emu_bits_as(From x)
{
    static_assert(sizeof(To) == sizeof(From), "the same size");
    To y;
    std::memcpy(&y, &x, sizeof y);
    return y;
}
inline unsigned __float_as_uint(float x) { return emu_bits_as<unsigned>(x); }
inline float __uint_as_float(unsigned u) { return emu_bits_as<float>(u); }
inline int __float_as_int(float x) { return emu_bits_as<int>(x); }
inline float __int_as_float(int u) { return emu_bits_as<float>(u); }
template <class T> inline T __ldg(const T *p) { return *p; }

/* nvcc's device code has min and max overloads at global scope. */
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float max(float a, float b) { return fmaxf(a, b); }
inline float min(float a, float b) { return fminf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(double a, double b) { return fmin(a, b); }

#endif
