/* fwd_runs.h - one fixed workload of forward passes whose logits two
 * builds of the same model must agree on (tests/test_layerfuse.c: fused
 * blocks against single ops; tests/test_join.c: joined projections
 * against separate ones): decode one token at a time, a prefill of N_TOK
 * tokens in one forward, and a ragged batch of three sequences.
 *
 * Static inline, as test_util.h: include after test.h and test_util.h. */
#ifndef EB_TEST_FWD_RUNS_H
#define EB_TEST_FWD_RUNS_H

#include "model/model.h"

enum { N_TOK = 40, N_SEQ = 3 };

/* Logits of: N_TOK tokens one at a time, then all at once, then a ragged
 * batch; out holds 3 * N_TOK rows.  Returns the jobs the backend started, or
 * -1 on failure. */
static inline long run_all(struct model *m, float *out)
{
    struct backend *be = m->be;
    int V = m->cfg.n_vocab, ids[N_TOK];
    for (int i = 0; i < N_TOK; i++) ids[i] = (i * 131 + 7) % V;
    unsigned long jobs0 = 0, jobs1 = 0, bar;
    be->thread_syncs(be, &jobs0, &bar);
    struct forward *f = NULL;
    struct kvcache *c[N_SEQ] = {0};
    struct eb_err e;
    long rc = -1;
    if (forward_create(m, N_TOK, N_TOK, &f, &e)) goto done;
    for (int s = 0; s < N_SEQ; s++)
        if (model_kvcache_create(m, 2 * N_TOK, &c[s], &e)) goto done;
    float *o = out;
    for (int i = 0; i < N_TOK; i++, o += V) { /* decode */
        struct fwd_seq q = {.id = 0, .cache = c[0], .tokens = ids + i, .n_tokens = 1,
                            .logits = FWD_LOGITS_LAST};
        struct fwd_batch b = {.seqs = &q, .n_seq = 1};
        if (model_forward(f, &b, NULL, &e)) goto done;
        memcpy(o, forward_logits(f), (size_t)V * sizeof *o);
    }
    struct fwd_seq q = {.id = 1, .cache = c[1], .tokens = ids, .n_tokens = N_TOK,
                        .logits = FWD_LOGITS_ALL};
    struct fwd_batch b = {.seqs = &q, .n_seq = 1};
    if (model_forward(f, &b, NULL, &e)) goto done;
    memcpy(o, forward_logits(f), (size_t)N_TOK * V * sizeof *o);
    o += (size_t)N_TOK * V;
    /* ragged: 5 + 20 + 15 new tokens onto caches holding 40, 40 and 0 */
    int len[N_SEQ] = {5, 20, 15}, at = 0;
    struct fwd_seq r[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) {
        r[s] = (struct fwd_seq){.id = s, .cache = c[s], .tokens = ids + at, .n_tokens = len[s],
                                .logits = FWD_LOGITS_ALL};
        at += len[s];
    }
    struct fwd_batch rb = {.seqs = r, .n_seq = N_SEQ};
    if (model_forward(f, &rb, NULL, &e)) goto done;
    memcpy(o, forward_logits(f), (size_t)N_TOK * V * sizeof *o);
    be->thread_syncs(be, &jobs1, &bar);
    rc = (long)(jobs1 - jobs0);
done:
    if (rc < 0) fprintf(stderr, "  %s\n", e.msg);
    for (int s = 0; s < N_SEQ; s++) kvcache_free(c[s]);
    forward_free(f);
    return rc;
}

#endif
