/* cuda_layer_plan.h - the host side of the CUDA layer ops that needs no GPU
 * (plain C, tested on the CPU in tests/test_cuda_layer_plan.c): whether a
 * step is well formed, and the step's image that kv_table_step uploads once
 * per forward pass (the active slots, then the two flash launches' entries
 * and block maps: decode rows, one block per query; prefill chunks, one
 * block per q_prefill queries). */
#ifndef EB_CUDA_LAYER_PLAN_H
#define EB_CUDA_LAYER_PLAN_H

#include "kernels/backend.h"

#include <stddef.h>

/* A sequence of one of the step's flash launches. */
struct layer_entry {
    int seq;   /* index into the step */
    int z0;    /* its first block along z within its launch */
    int prow0; /* its first query row within its launch */
};

/* Layout of the image: [n_seq] kv_step_seq, [n_seq] layer_entry (decode
 * launch's entries first), then per launch (0: decode, 1: prefill) its zmap
 * [n_z] and rowmap [n_rows] (entry indices within the launch). */
struct layer_plan {
    int n_entry[2], n_z[2], n_rows[2];
    size_t o_entry, o_maps[2]; /* byte offsets of the entries and of each launch's zmap */
    size_t bytes;
};

/* Sequences with at most decode_max_new new tokens go to launch 0. */
void layer_plan_make(struct layer_plan *p, const struct kv_step_seq *seqs, int n_seq,
                     int decode_max_new, int q_prefill);
/* Writes the image of p (p->bytes) into buf. */
void layer_plan_write(const struct layer_plan *p, char *buf, const struct kv_step_seq *seqs,
                      int n_seq, int decode_max_new, int q_prefill);

/* The host mirror a step is checked against: per slot whether it is bound,
 * its cache type and capacity, and its lengths [max_seqs][n_heads] (n_heads
 * = layers x kv heads). */
struct layer_mirror {
    int max_seqs, n_heads;
    const int *bound, *type, *cap, *len;
};

/* NULL when the step is well formed (bound slots, each once, one cache type,
 * rows ascending without overlap, valid counts, room for n_new more in every
 * (layer, kv head)); else why not. */
const char *layer_step_problem(const struct layer_mirror *m, const struct kv_step_seq *s,
                               int n_seq);

#endif
