/* cuda_selftest_util.h - what the self-test's case files share: a seeded
 * generator, tensors held by both backends, and the verdict line. */
#ifndef EB_CUDA_SELFTEST_UTIL_H
#define EB_CUDA_SELFTEST_UTIL_H

#include "kernels/cuda/backend_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

struct selftest {
    struct backend *cpu, *gpu;
    int *passed, *failed;
    uint64_t rng;
};

static inline float st_rnd(struct selftest *st) /* [-1, 1) */
{
    st->rng ^= st->rng >> 12;
    st->rng ^= st->rng << 25;
    st->rng ^= st->rng >> 27;
    return (float)((double)((st->rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0 * 2 - 1);
}

/* One line "ok|FAIL what detail"; a recorded CUDA failure fails the case. */
static inline void st_verdict(struct selftest *st, const char *what, bool ok, const char *detail)
{
    const char *err = backend_cuda_error(st->gpu);
    ok = ok && !err;
    printf("  %-4s %-36s %s%s\n", ok ? "ok" : "FAIL", what, detail, err ? err : "");
    ok ? (*st->passed)++ : (*st->failed)++;
}

/* The same bytes in both backends' memory (n floats). */
struct st_pair {
    float *c, *g;
    size_t n;
};

static inline st_pair st_make(struct selftest *st, const std::vector<float> &h)
{
    st_pair p = {st->cpu->alloc(st->cpu, h.size()), st->gpu->alloc(st->gpu, h.size()), h.size()};
    if (!p.c || !p.g) {
        fprintf(stderr, "cuda_selftest: out of memory\n");
        exit(1);
    }
    st->cpu->upload(st->cpu, p.c, h.data(), h.size());
    st->gpu->upload(st->gpu, p.g, h.data(), h.size());
    return p;
}

/* One backend's copy of h (exits when out of memory, as st_make). */
static inline float *st_upload(struct backend *be, const std::vector<float> &h)
{
    float *p = be->alloc(be, h.size());
    if (!p) {
        fprintf(stderr, "cuda_selftest: out of memory\n");
        exit(1);
    }
    be->upload(be, p, h.data(), h.size());
    return p;
}
static inline void st_drop(struct selftest *st, st_pair p)
{
    st->cpu->free(st->cpu, p.c);
    st->gpu->free(st->gpu, p.g);
}

/* Both sides' contents. */
static inline void st_fetch(struct selftest *st, st_pair p, std::vector<float> &c,
                            std::vector<float> &g)
{
    c.resize(p.n);
    g.resize(p.n);
    st->cpu->download(st->cpu, c.data(), p.c, p.n);
    st->gpu->download(st->gpu, g.data(), p.g, p.n);
}

/* The cases of cuda_selftest_magnitude.cu and cuda_selftest_layer.cu. */
void selftest_magnitude(struct selftest *st);
void selftest_layer(struct selftest *st);
/* cuda_selftest_fused.cu: the fused layer blocks against the single ops */
void selftest_fused(struct selftest *st);
/* cuda_selftest_batch.cu: the batched eviction ops */
void selftest_batch(struct selftest *st);
void selftest_batch_small(struct selftest *st); /* the same at a few hundred slots */
/* cuda_selftest_graph.cu: decode steps recorded and replayed as CUDA graphs,
 * on a backend of its own (made with EVICTBENCH_CUDA_GRAPH=1) on device */
void selftest_graph(struct selftest *st, int device);
/* Run last: a refused call leaves the backend failed. */
void selftest_layer_refusals(struct selftest *st);

#endif
