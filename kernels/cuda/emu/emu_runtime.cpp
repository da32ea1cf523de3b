/* emu_runtime.cpp - the CUDA runtime, as much of it as this backend calls,
 * on the CPU: kernels run block after block on the calling thread, a
 * block's threads as fibers that switch only at barriers and shuffles;
 * device memory is host memory (with a capacity, EMU_DEVICE_MIB, so the
 * pool and out-of-memory paths are exercised); a captured stream records its
 * launches and copies, and a graph replays them.
 *
 * The stream is asynchronous, as late as CUDA allows: launches, cuBLAS calls,
 * device-to-device copies, memsets and copies from pinned host memory are
 * queued and run only when the host must see their effect (a synchronize, a
 * copy to pageable host memory, an event waited on, a free).  Host code that
 * rewrites pinned memory a queued copy still reads, or frees what queued
 * work uses, then computes the wrong thing here every time, where a GPU
 * would only sometimes.  EMU_SYNC=1 runs each operation at once instead.  What a real launch would
 * refuse (a block over 1,024 threads, a grid's y or z over 65,535, over
 * 48 KiB of dynamic shared memory) fails the launch with CUDA's error.
 *
 * EMU_ORDER=reverse resumes a block's threads from the last to the first,
 * and runs the grid's blocks from the last to the first: a result that
 * changes with the order is a missing barrier, or a block that reads what
 * another block of the same launch writes. */
#include "kernels/cuda/emu/emu.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <vector>

#if !defined(__x86_64__)
#error "the CUDA emulator switches fibers with x86-64 code (emu_switch below)"
#endif

/* Built with AddressSanitizer (SAN=1), every device access is checked: a
 * block is exactly as long as asked, and ASan is told of each switch between
 * a thread's stack and the scheduler's, so it knows which stack is live. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

/* emu_switch(from, to): saves the callee-saved registers on the current
 * stack, stores its pointer in *from and resumes the stack `to` (a swap
 * without ucontext's signal-mask system call: two per resume otherwise). */
extern "C" void emu_switch(void **from, void *to);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".type emu_switch,@function\n"
        "emu_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size emu_switch, .-emu_switch\n"
        ".previous\n");

struct CUgraph_st {
    std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
    std::vector<std::function<void()>> ops;
};
struct CUevent_st {
    double t;
    unsigned long long seq; /* the stream operations queued up to its record */
};

namespace emu {

uint3 thread_idx, block_idx;
dim3 block_dim, grid_dim;

namespace {

enum fiber_state { RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };

struct fiber {
    void *sp;
    fiber_state state;
    uint3 idx;
};

const size_t STACK_BYTES = 256 * 1024;
#if EMU_ASAN
const size_t LIVE_TOP_BYTES = 16 * 1024; /* holds fiber_entry's frame and the switch's */
#endif
const int MAX_THREADS = 1024;

void *scheduler_sp;
std::vector<fiber> fibers;

/* The threads' stacks, kept from launch to launch and freed at exit (a
 * leak checker would report them otherwise). */
struct stack_pool {
    std::vector<char *> stacks;
    ~stack_pool()
    {
        for (char *s : stacks) std::free(s);
    }
};
stack_pool pool;
int current = -1;                    /* the running fiber, -1: none */
const std::function<void()> *body_now;
std::vector<uint64_t> lane_value;    /* one per thread: what a shuffle offers */
std::vector<unsigned char> dyn_shared;
cudaError_t last_error = cudaSuccess;
bool capture_on;
std::vector<std::function<void()>> captured;
size_t device_cap, device_used;
std::map<void *, size_t> device_blocks;
std::map<void *, size_t> pinned_blocks; /* cudaMallocHost's */

/* The stream: operations queued and not yet run, and how many ever were
 * queued and run (an event waits for the count at its record). */
std::deque<std::function<void()>> queued;
unsigned long long ops_queued, ops_done;

double now_s()
{
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

void fail(const char *what)
{
    std::fprintf(stderr, "cuda emulator: %s\n", what);
    std::abort();
}

#if EMU_ASAN
/* The scheduler's stack, as ASan's fiber calls want it. */
const void *scheduler_stack_bottom;
size_t scheduler_stack_size;
#endif

/* Switches from the scheduler to thread t's stack and back. */
void resume_fiber(int t)
{
#if EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, pool.stacks[(size_t)t], STACK_BYTES);
#endif
    emu_switch(&scheduler_sp, fibers[(size_t)t].sp);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

/* Switches from the running thread's stack to the scheduler's; a finished
 * thread's stack is left for good (its fake frames dropped). */
void switch_to_scheduler(bool finished)
{
#if EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(finished ? nullptr : &fake, scheduler_stack_bottom,
                                   scheduler_stack_size);
#else
    (void)finished;
#endif
    emu_switch(&fibers[(size_t)current].sp, scheduler_sp);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, &scheduler_stack_bottom, &scheduler_stack_size);
#endif
}

void fiber_entry()
{
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_bottom, &scheduler_stack_size);
#endif
    (*body_now)();
    fibers[(size_t)current].state = DONE;
    switch_to_scheduler(true);
    fail("a finished thread resumed");
}

/* A fresh fiber's stack: six zero registers for emu_switch to pop, then
 * fiber_entry as the return address, entered with the stack aligned as
 * after a call. */
void *fresh_stack(char *base)
{
    uintptr_t top = ((uintptr_t)(base + STACK_BYTES)) & ~(uintptr_t)15;
    void **sp = (void **)(top - 8 * sizeof(void *));
    for (int i = 0; i < 6; i++) sp[i] = nullptr;
    sp[6] = (void *)fiber_entry;
    sp[7] = nullptr;
    return sp;
}

void yield_to_scheduler()
{
    if (current < 0) fail("a barrier outside a kernel");
    switch_to_scheduler(false);
}

/* EMU_ORDER=reverse, read once. */
bool reverse_order()
{
    static const bool reverse = [] {
        const char *o = std::getenv("EMU_ORDER");
        return o && std::strcmp(o, "reverse") == 0;
    }();
    return reverse;
}

/* Runs one block's threads as fibers to the end. */
void run_block_fibers(int n)
{
    for (int i = (int)pool.stacks.size(); i < n; i++) {
        char *s = (char *)std::malloc(STACK_BYTES);
        if (!s) fail("no memory for a thread's stack");
        pool.stacks.push_back(s);
    }
    fibers.assign((size_t)n, fiber());
    lane_value.assign((size_t)n, 0);
    for (int t = 0; t < n; t++) {
        fiber &f = fibers[(size_t)t];
        f.idx.x = (unsigned)t % block_dim.x;
        f.idx.y = ((unsigned)t / block_dim.x) % block_dim.y;
        f.idx.z = (unsigned)t / (block_dim.x * block_dim.y);
        f.state = RUNNABLE;
#if EMU_ASAN
        /* The last thread on this stack left the red zones of the frames it
         * never returned from marked: fiber_entry's and the switch's, at the
         * top (the rest unwound; clearing all 256 KiB made the run 12% slower). */
        ASAN_UNPOISON_MEMORY_REGION(pool.stacks[(size_t)t] + STACK_BYTES - LIVE_TOP_BYTES,
                                    LIVE_TOP_BYTES);
#endif
        f.sp = fresh_stack(pool.stacks[(size_t)t]);
    }
    const bool reverse = reverse_order();
    for (;;) {
        for (int i = 0; i < n; i++) {
            int t = reverse ? n - 1 - i : i;
            if (fibers[(size_t)t].state != RUNNABLE) continue;
            current = t;
            thread_idx = fibers[(size_t)t].idx;
            resume_fiber(t);
        }
        current = -1;
        /* Every fiber now waits or is done: release a warp whose live lanes
         * all reached its exchange, else the block at its barrier. */
        bool released = false, any_live = false, all_at_block = true;
        for (int w = 0; w < n; w += 32) {
            int live = 0, at_warp = 0;
            for (int t = w; t < n && t < w + 32; t++) {
                if (fibers[(size_t)t].state == DONE) continue;
                live++;
                if (fibers[(size_t)t].state == AT_WARP_BARRIER) at_warp++;
                if (fibers[(size_t)t].state != AT_BLOCK_BARRIER) all_at_block = false;
            }
            if (live) any_live = true;
            if (live && at_warp == live) {
                for (int t = w; t < n && t < w + 32; t++)
                    if (fibers[(size_t)t].state == AT_WARP_BARRIER) fibers[(size_t)t].state = RUNNABLE;
                released = true;
            }
        }
        if (!any_live) break;
        if (released) continue;
        if (!all_at_block)
            fail("deadlock: a warp's lanes wait at a shuffle while others wait at __syncthreads");
        for (int t = 0; t < n; t++)
            if (fibers[(size_t)t].state == AT_BLOCK_BARRIER) fibers[(size_t)t].state = RUNNABLE;
    }
}

/* What a GPU refuses at the launch itself, or success. */
cudaError_t launch_refused(dim3 grid, dim3 block, size_t shared)
{
    unsigned n = block.x * block.y * block.z;
    if (n == 0 || n > (unsigned)MAX_THREADS || block.z > 64 || grid.x == 0 || grid.y == 0 ||
        grid.z == 0 || grid.y > 65535 || grid.z > 65535)
        return cudaErrorInvalidConfiguration;
    if (shared > 48 * 1024) return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* Runs one launch now (its configuration was checked when it was queued). */
void run_grid(dim3 grid, dim3 block, size_t shared, const std::function<void()> &body)
{
    unsigned n = block.x * block.y * block.z;
    dyn_shared.assign(shared ? shared : 1, 0xA5); /* not zeroed, as on a GPU */
    block_dim = block;
    grid_dim = grid;
    body_now = &body;
    /* Reversed too under EMU_ORDER=reverse: a result that depends on which
     * block runs first (blocks run concurrently on a GPU) changes with it. */
    const bool reverse = reverse_order();
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                block_idx.x = reverse ? grid.x - 1 - x : x;
                block_idx.y = reverse ? grid.y - 1 - y : y;
                block_idx.z = reverse ? grid.z - 1 - z : z;
                run_block_fibers((int)n);
            }
}

} /* namespace */

void sync_block()
{
    if (current < 0) fail("__syncthreads outside a kernel");
    fibers[(size_t)current].state = AT_BLOCK_BARRIER;
    yield_to_scheduler();
}

uint64_t warp_exchange(uint64_t bits, int src_lane)
{
    if (current < 0) fail("a shuffle outside a kernel");
    int me = current, warp0 = me & ~31;
    lane_value[(size_t)me] = bits;
    fibers[(size_t)me].state = AT_WARP_BARRIER;
    yield_to_scheduler();
    int src = warp0 + src_lane;
    uint64_t got = src < (int)fibers.size() && fibers[(size_t)src].state != DONE
                       ? lane_value[(size_t)src]
                       : bits;
    /* Nobody may overwrite its value before every lane has read. */
    fibers[(size_t)me].state = AT_WARP_BARRIER;
    yield_to_scheduler();
    return got;
}

void *dynamic_shared()
{
    return dyn_shared.data();
}

namespace {

/* EMU_SYNC=1, read once. */
bool sync_each()
{
    static const bool on = [] {
        const char *v = std::getenv("EMU_SYNC");
        return v && std::strcmp(v, "1") == 0;
    }();
    return on;
}

/* Runs the queued operations, up to the first `upto` ever queued. */
void drain(unsigned long long upto = ~0ull)
{
    while (!queued.empty() && ops_done < upto) {
        std::function<void()> op = std::move(queued.front());
        queued.pop_front();
        op();
        ops_done++;
    }
}

void enqueue(std::function<void()> op)
{
    queued.push_back(std::move(op));
    ops_queued++;
    if (sync_each()) drain();
}

/* Queues a copy of n bytes that reads src when it runs. */
void queue_copy(void *dst, const void *src, size_t n)
{
    submit_op([dst, src, n]() {
        if (n) std::memmove(dst, src, n);
    });
}

/* The pinned host block (cudaMallocHost) holding p, if any. */
bool is_pinned(const void *p)
{
    auto it = pinned_blocks.upper_bound(const_cast<void *>(p));
    if (it == pinned_blocks.begin()) return false;
    --it;
    return (const char *)p < (const char *)it->first + it->second;
}

} /* namespace */

void submit(dim3 grid, dim3 block, size_t shared, std::function<void()> body)
{
    cudaError_t refused = launch_refused(grid, block, shared);
    if (refused != cudaSuccess) {
        last_error = refused;
        return;
    }
    submit_op([grid, block, shared, body]() { run_grid(grid, block, shared, body); });
}

void submit_op(std::function<void()> op)
{
    if (capture_on) {
        captured.push_back(std::move(op));
        return;
    }
    enqueue(std::move(op));
}

} /* namespace emu */

using namespace emu;

namespace {

size_t device_capacity()
{
    if (!device_cap) {
        const char *s = std::getenv("EMU_DEVICE_MIB");
        long mib = s ? std::atol(s) : 4096;
        device_cap = (size_t)(mib > 0 ? mib : 4096) << 20;
    }
    return device_cap;
}

cudaError_t record(cudaError_t e)
{
    if (e != cudaSuccess) last_error = e;
    return e;
}

} /* namespace */

extern "C" {

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = nullptr;
    if (device_used + bytes > device_capacity()) return record(cudaErrorMemoryAllocation);
    /* 256-byte aligned as cudaMalloc's.  Without ASan each block has 256
     * bytes of slack, so a read just past its end passes unseen, as it
     * mostly does on a GPU (within the allocator's granule); with ASan the
     * block ends where asked and such a read stops the run. */
    void *m = nullptr;
    size_t slack = EMU_ASAN ? 0 : (bytes + 255) / 256 * 256 - bytes + 256;
    if (posix_memalign(&m, 256, (bytes ? bytes : 1) + slack) != 0) m = nullptr;
    if (!m) return record(cudaErrorMemoryAllocation);
    std::memset(m, 0xA5, bytes); /* not zeroed, as on a GPU */
    device_used += bytes;
    device_blocks[m] = bytes;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    drain(); /* cudaFree waits for the device */
    auto it = device_blocks.find(p);
    if (it == device_blocks.end()) return record(cudaErrorInvalidValue);
    device_used -= it->second;
    device_blocks.erase(it);
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = std::malloc(bytes ? bytes : 1);
    if (!*p) return record(cudaErrorMemoryAllocation);
    pinned_blocks[*p] = bytes ? bytes : 1;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    if (!p) return cudaSuccess;
    drain(); /* as cudaFree */
    if (!pinned_blocks.erase(p)) return record(cudaErrorInvalidValue);
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    *total = device_capacity();
    *free_bytes = *total - device_used;
    return cudaSuccess;
}

/* A copy between device memory and the host waits for the work before it
 * and is done when it returns; one within the device is queued (CUDA's
 * "API synchronization behavior"). */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    if (capture_on) return record(cudaErrorStreamCaptureUnsupported);
    if (kind == cudaMemcpyDeviceToDevice) {
        queue_copy(dst, src, n);
        return cudaSuccess;
    }
    drain();
    if (n) std::memmove(dst, src, n);
    return cudaSuccess;
}

/* Queued, except where CUDA does the host side at once: a pageable source
 * is read now (into a staging copy), a pageable destination is written
 * before the call returns.  Pinned memory is read or written when the copy
 * runs. */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    (void)stream;
    if (!capture_on && kind == cudaMemcpyHostToDevice && !is_pinned(src)) {
        std::vector<unsigned char> now((const unsigned char *)src, (const unsigned char *)src + n);
        submit_op([dst, now]() {
            if (!now.empty()) std::memcpy(dst, now.data(), now.size());
        });
        return cudaSuccess;
    }
    if (!capture_on && kind == cudaMemcpyDeviceToHost && !is_pinned(dst)) {
        drain();
        if (n) std::memmove(dst, src, n);
        return cudaSuccess;
    }
    queue_copy(dst, src, n);
    return cudaSuccess;
}

/* Queued, as on a GPU for device memory. */
cudaError_t cudaMemset(void *dst, int value, size_t n)
{
    if (capture_on) return record(cudaErrorStreamCaptureUnsupported);
    submit_op([dst, value, n]() { std::memset(dst, value, n); });
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t stream)
{
    (void)stream;
    submit_op([dst, value, n]() { std::memset(dst, value, n); });
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    if (capture_on) return record(cudaErrorStreamCaptureUnsupported);
    drain();
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    (void)stream;
    return cudaDeviceSynchronize();
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    default: return "emulated CUDA error";
    }
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    default: return "cudaErrorEmulated";
    }
}

cudaError_t cudaSetDevice(int device)
{
    return device == 0 ? cudaSuccess : record(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int *device)
{
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    /* An empty CUDA_VISIBLE_DEVICES hides every device, as the driver does. */
    const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
    *count = visible && !*visible ? 0 : 1;
    return *count ? cudaSuccess : record(cudaErrorNoDevice);
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    (void)device;
    *value = attr == cudaDevAttrMultiProcessorCount ? 132 : 0;
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)
{
    (void)stream;
    (void)mode;
    if (capture_on) return record(cudaErrorIllegalState);
    capture_on = true;
    captured.clear();
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    (void)stream;
    if (!capture_on) return record(cudaErrorIllegalState);
    capture_on = false;
    *graph = new CUgraph_st{std::move(captured)};
    captured.clear();
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags)
{
    (void)flags;
    *exec = new CUgraphExec_st{graph->ops};
    return cudaSuccess;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo *info)
{
    if (info) std::memset(info, 0, sizeof *info);
    exec->ops = graph->ops;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    (void)stream;
    if (capture_on) return record(cudaErrorStreamCaptureUnsupported);
    /* each recorded operation queued as it is now: an update of exec later
     * leaves this launch as it was */
    for (const auto &op : exec->ops) enqueue(op);
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    delete graph;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    *event = new CUevent_st{0.0, 0};
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    drain(event->seq); /* its queued record writes it (CUDA defers the release instead) */
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    (void)stream;
    submit_op([event]() { event->t = now_s(); });
    event->seq = capture_on ? ~0ull : ops_queued; /* a recorded event: wait for everything */
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    drain(event->seq);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    drain(start->seq > end->seq ? start->seq : end->seq);
    *ms = (float)((end->t - start->t) * 1e3);
    return cudaSuccess;
}

} /* extern "C" */
