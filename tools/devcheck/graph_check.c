/* graph_check.c - gpu_check graph: decode steps replayed as CUDA graphs
 * against the same steps launched op by op (issue 37).
 *
 *   gpu_check graph --model PATH [--batch B] [--prompt-len L] [--steps N]
 *                   [--device cpu|cuda[:N]]
 *
 * The model is loaded twice in turn, on a backend without step graphs and
 * on one with them (EVICTBENCH_CUDA_GRAPH=1 at its creation), and both run
 * the same teacher-forced work through model_forward: B prompts of L tokens
 * in one ragged forward (bf16 caches, as generate keeps them on a GPU), then
 * N decode steps feeding fixed ids, the last sequence leaving the batch
 * halfway (a new shape: eager, captured again, replayed).  Every decode
 * step's logits are compared: the worst relative error (max|a - b| /
 * max|b| of a row) and the share of rows with the same top-1 token.  The
 * graph run must have replayed most steps.  The two runs differ only in
 * the attention's split of the keys across blocks (a replayed grid is fixed
 * for the caches' capacity), so the logits agree to the bf16 rounding of the
 * activations that it can flip.  One JSON line; exit 1 when a bound fails.
 * With --device cpu both runs are eager (the CPU records no graphs): the
 * check-only dry run of this tool. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/backend_cuda.h"
#include "model/model.h"
#include "tools/devcheck/gpu_check.h"
#include "tools/devcheck/graph_check.h"

/* Bounds: a replay reading stale positions, lengths or caches gives logits
 * unrelated to the eager ones (relative error near 1). */
static const double MAX_REL = 0.05;
static const double MIN_TOP1 = 0.8; /* random weights: flat logits, near-ties */

struct graph_run {
    float *logits;          /* [steps][batch][vocab], rows of sequences still in */
    int vocab;
    unsigned long captures, replays, discarded;
};

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Sequences in the batch at decode step s. */
static int live_at(int s, int steps, int batch)
{
    return batch > 1 && s >= steps / 2 ? batch - 1 : batch;
}

static int run_once(const char *path, const char *device, int graphs, int batch, int plen,
                    int steps, struct graph_run *out, struct eb_err *e)
{
    int dev = 0, rc = -1;
    if (graphs) setenv("EVICTBENCH_CUDA_GRAPH", "1", 1);
    else unsetenv("EVICTBENCH_CUDA_GRAPH");
    struct backend *be = !strcmp(device, "cpu") ? backend_cpu_create(0)
                         : cuda_device_parse(device, &dev, e) ? NULL
                                                              : backend_cuda_create(dev, e);
    unsetenv("EVICTBENCH_CUDA_GRAPH");
    struct model *m = NULL;
    struct forward *f = NULL;
    struct kvcache **c = calloc((size_t)batch, sizeof *c);
    struct fwd_seq *q = calloc((size_t)batch, sizeof *q);
    int *ids = malloc((size_t)batch * (plen + steps) * sizeof *ids);
    if (!be || !c || !q || !ids) {
        if (be || !e->msg[0]) eb_fail(e, "out of memory");
        goto done;
    }
    if (open_model(path, be, MODEL_WEIGHTS_NATIVE, &m, e)) goto done;
    int V = out->vocab = m->cfg.n_vocab;
    unsigned x = 2166136261u;
    for (int i = 0; i < batch * (plen + steps); i++) { /* ordinary-text-like ids */
        x = x * 1664525u + 1013904223u;
        ids[i] = 32 + (int)((x >> 8) % 1000u) % (V - 32);
    }
    if (forward_create(m, batch * plen, batch, &f, e)) goto done;
    enum kv_type kt = strcmp(device, "cpu") ? KV_BF16 : KV_F32;
    for (int b = 0; b < batch; b++)
        if (model_kvcache_create_as(m, plen + steps, kt, &c[b], e)) goto done;
    for (int b = 0; b < batch; b++)
        q[b] = (struct fwd_seq){.id = b, .cache = c[b], .tokens = ids + (size_t)b * (plen + steps),
                                .n_tokens = plen, .logits = FWD_LOGITS_LAST};
    struct fwd_batch fb = {q, batch, 0};
    if (model_forward(f, &fb, NULL, e) || backend_failed(be, e)) goto done;
    out->logits = malloc((size_t)steps * batch * V * sizeof *out->logits);
    if (!out->logits) {
        eb_fail(e, "out of memory");
        goto done;
    }
    for (int s = 0; s < steps; s++) {
        int n = live_at(s, steps, batch);
        for (int b = 0; b < n; b++) {
            q[b].tokens = ids + (size_t)b * (plen + steps) + plen + s;
            q[b].n_tokens = 1;
        }
        struct fwd_batch db = {q, n, 0};
        if (model_forward(f, &db, NULL, e) || backend_failed(be, e)) goto done;
        memcpy(out->logits + (size_t)s * batch * V, forward_logits(f),
               (size_t)n * V * sizeof *out->logits);
    }
    if (be->graph_counts) be->graph_counts(be, &out->captures, &out->replays, &out->discarded);
    rc = 0;
done:
    forward_free(f);
    for (int b = 0; c && b < batch; b++) kvcache_free(c[b]);
    free(c);
    free(q);
    free(ids);
    if (m) model_free(m);
    if (be) be->destroy(be);
    return rc;
}

int cmd_graph(int argc, char **argv)
{
    const char *model = NULL, *device = "cuda";
    int batch = 4, plen = 64, steps = 32;
    for (int i = 0; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt-len")) plen = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else return fprintf(stderr, "gpu_check: graph: unknown option %s\n", argv[i]), 2;
    }
    if (!model || batch < 1 || plen < 1 || steps < 4) {
        fprintf(stderr, "gpu_check: graph needs --model, a batch and prompt >= 1, steps >= 4\n");
        return 2;
    }
    struct graph_run eager = {0}, graphed = {0};
    struct eb_err e = {0};
    if (run_once(model, device, 0, batch, plen, steps, &eager, &e) ||
        run_once(model, device, 1, batch, plen, steps, &graphed, &e)) {
        fprintf(stderr, "gpu_check: graph: %s\n", e.msg);
        free(eager.logits);
        free(graphed.logits);
        return 1;
    }
    int V = eager.vocab == graphed.vocab ? eager.vocab : 0;
    double worst = 0.0;
    long rows = 0, same_top1 = 0;
    for (int s = 0; V > 0 && s < steps; s++)
        for (int b = 0; b < live_at(s, steps, batch); b++) {
            const float *g = graphed.logits + ((size_t)s * batch + b) * V;
            const float *r = eager.logits + ((size_t)s * batch + b) * V;
            double dmax = 0.0, rmax = 0.0;
            for (int i = 0; i < V; i++) {
                double d = fabs((double)g[i] - r[i]);
                dmax = d > dmax ? d : dmax;
                rmax = fabs((double)r[i]) > rmax ? fabs((double)r[i]) : rmax;
            }
            double rel = rmax > 0 ? dmax / rmax : dmax;
            worst = !(rel <= worst) ? rel : worst; /* a NaN stays the worst */
            same_top1 += argmax(g, V) == argmax(r, V);
            rows++;
        }
    double top1 = rows ? (double)same_top1 / rows : 0.0;
    /* decode steps as graphs: every step but the first two of each shape */
    long want = steps - (batch > 1 ? 4 : 2);
    int ok = V > 0 && worst <= MAX_REL && top1 >= MIN_TOP1 &&
             (!strcmp(device, "cpu") || (long)graphed.replays + (long)graphed.captures >= want);
    printf("{\"engine\": \"gpu_check-graph\", \"batch\": %d, \"prompt_len\": %d, \"steps\": %d, "
           "\"rows\": %ld, \"worst_rel\": %.3g, \"top1_agree\": %.3f, \"captures\": %lu, "
           "\"replays\": %lu, \"discarded\": %lu, \"ok\": %s}\n",
           batch, plen, steps, rows, worst, top1, graphed.captures, graphed.replays,
           graphed.discarded, ok ? "true" : "false");
    free(eager.logits);
    free(graphed.logits);
    return ok ? 0 : 1;
}
