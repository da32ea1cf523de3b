/* cuda_graph.cu - a decode step's embedding and layers as one CUDA graph
 * (kernels/backend.h, "step graphs"; EVICTBENCH_CUDA_GRAPH=1).
 *
 * Every op of the backend runs on the per-thread default stream (the
 * library is compiled with --default-stream per-thread, cuBLAS is set to it),
 * which a capture can record.  kernels/step_graph.c decides per step: the
 * first step of a shape runs eagerly, so that its ops size their scratch;
 * the second is captured (the ops launch into the recording, which
 * graph_end instantiates, or updates in place when only parameters moved,
 * and launches); later steps replay it, the ops doing only their host
 * bookkeeping.  What a replay must see fresh lives in device memory before
 * graph_begin: the ids and positions (model/forward.c's upload), the step's
 * rows and ring offsets (kv_table_step), the lengths (bumped on the device).
 * The attention's split grid is fixed for the caches' capacity while a
 * recording lives (cuda_layer.cu).  A scratch buffer reallocated by grow()
 * after the capture (by an op outside the step) would leave the recording
 * reading freed memory: the next step records again.  A capture that staged host memory (an
 * op that read host arguments) runs once and is not kept: its shape stays
 * eager. */
#include "kernels/cuda/cuda_internal.h"

#include <stdlib.h>
#include <string.h>

/* cuBLAS's recommended workspace on Hopper: a recording must not allocate. */
static const size_t BLAS_WORKSPACE = (size_t)32 << 20;

static void drop_exec(struct cuda_impl *im)
{
    if (im->graph_exec) cudaGraphExecDestroy(im->graph_exec); /* freed when done if in flight */
    im->graph_exec = NULL;
}

static int cuda_graph_begin(struct backend *be, const void *owner, unsigned long shape)
{
    struct cuda_impl *im = impl_of(be);
    if (failed(be)) shape = 0;
    int mode = step_graph_begin(&im->graph, owner, shape);
    if (mode == STEP_REPLAY && im->grown != im->graph_grown) {
        /* a scratch buffer the recording reads was reallocated since (by an
         * op outside the step): record the step again */
        step_graph_end(&im->graph, 0);
        drop_exec(im);
        mode = step_graph_begin(&im->graph, owner, shape);
    }
    if (mode != STEP_CAPTURE) return mode;
    /* Checked here, not at every step: a shape the flash kernel does not take
     * (or whose partials cannot be allocated) stays eager for good. */
    if (!cuda_layer_graphable(be)) {
        step_graph_end(&im->graph, 0);
        return step_graph_begin(&im->graph, owner, 0);
    }
    im->graph_tainted = false;
    if (!cuda_ok(be, cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed),
                 "step graph capture")) {
        step_graph_end(&im->graph, 0);
        return step_graph_begin(&im->graph, owner, 0);
    }
    return STEP_CAPTURE;
}

/* The recording made exec-able: the kept executable updated in place when
 * only parameters changed (grid sizes, pointers), else instantiated anew. */
static bool instantiate(struct backend *be, cudaGraph_t g, cudaGraphExec_t *out, bool reuse)
{
    struct cuda_impl *im = impl_of(be);
    if (reuse && im->graph_exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(im->graph_exec, g, &info) == cudaSuccess) {
            *out = im->graph_exec;
            return true;
        }
        cudaGetLastError(); /* an update refused is not a failure: instantiate */
        drop_exec(im);
    }
    return cuda_ok(be, cudaGraphInstantiate(out, g, 0), "step graph instantiate");
}

/* A capture ended: the recording runs now (the step's work was only
 * recorded) and is kept unless it read staged host memory. */
static int end_capture(struct backend *be, int ok)
{
    struct cuda_impl *im = impl_of(be);
    cudaGraph_t g = NULL;
    cudaError_t rc = cudaStreamEndCapture(cudaStreamPerThread, &g);
    if (!ok) { /* an op failed and said so: nothing of the step is wanted */
        if (g) cudaGraphDestroy(g);
        if (rc != cudaSuccess) cudaGetLastError();
        step_graph_end(&im->graph, 0);
        return 0;
    }
    if (failed(be) || !cuda_ok(be, rc, "step graph capture")) {
        if (g) cudaGraphDestroy(g);
        step_graph_end(&im->graph, 0);
        return -1;
    }
    bool keep = !im->graph_tainted;
    cudaGraphExec_t exec = NULL;
    bool ran = instantiate(be, g, &exec, keep) &&
               cuda_ok(be, cudaGraphLaunch(exec, cudaStreamPerThread), "step graph launch");
    cudaGraphDestroy(g);
    if (ran && keep) {
        im->graph_exec = exec;
        im->graph_grown = im->grown;
    } else if (exec) {
        if (exec == im->graph_exec) im->graph_exec = NULL;
        cudaGraphExecDestroy(exec); /* freed once it has run */
    }
    step_graph_end(&im->graph, ran && keep);
    return ran ? 0 : -1;
}

static int cuda_graph_end(struct backend *be, int ok)
{
    struct cuda_impl *im = impl_of(be);
    if (im->graph.mode == STEP_CAPTURE) return end_capture(be, ok);
    if (im->graph.mode != STEP_REPLAY) return 0;
    bool ran = false;
    if (ok && !failed(be)) {
        if (!im->graph_exec)
            cuda_fail(be, "step graph replay", "no recording");
        else
            ran = cuda_ok(be, cudaGraphLaunch(im->graph_exec, cudaStreamPerThread),
                          "step graph replay");
    }
    if (!ran) drop_exec(im);
    step_graph_end(&im->graph, ran);
    return ran || !ok ? 0 : -1;
}

static void cuda_graph_forget(struct backend *be)
{
    struct cuda_impl *im = impl_of(be);
    drop_exec(im);
    step_graph_forget(&im->graph);
}

static void cuda_graph_counts(const struct backend *be, unsigned long *captures,
                              unsigned long *replays, unsigned long *discarded)
{
    const struct step_graph *g = &impl_of(be)->graph;
    *captures = g->captures;
    *replays = g->replays;
    *discarded = g->discarded;
}

int cuda_graph_install(struct backend *be)
{
    struct cuda_impl *im = impl_of(be);
    const char *v = getenv("EVICTBENCH_CUDA_GRAPH");
    if (!v || strcmp(v, "1") != 0) return 0;
    if (!cuda_ok(be, cudaMalloc(&im->blas_ws, BLAS_WORKSPACE), "cuBLAS workspace") ||
        !blas_ok(be, cublasSetWorkspace(im->blas16, im->blas_ws, BLAS_WORKSPACE),
                 "cuBLAS workspace"))
        return -1;
    be->graph_begin = cuda_graph_begin;
    be->graph_end = cuda_graph_end;
    be->graph_forget = cuda_graph_forget;
    be->graph_counts = cuda_graph_counts;
    return 0;
}

void cuda_graph_release(struct backend *be)
{
    struct cuda_impl *im = impl_of(be);
    drop_exec(im);
    if (im->blas_ws) cudaFree(im->blas_ws);
    im->blas_ws = NULL;
}
