/* policy_glue_priv.h - the glue's state, shared by policy_glue.c (hooks,
 * per-sequence selection) and policy_batch.c (the whole batch's
 * compression at after_step). */
#ifndef EB_POLICY_GLUE_PRIV_H
#define EB_POLICY_GLUE_PRIV_H

#include "harness/exp/policy_glue.h"
#include "policies/select_batch.h"

struct glue_seq {
    int n_steps;             /* tokens sampled so far */
    struct sched_seq sched;
    /* due for the batch's compression (policy_batch.c) */
    int queued;
    int token;               /* its step's token: inner on_step runs after the compression */
    int at_prefill;
    struct kvcache *cache;
};

/* Scratch of the batched compression, grown on demand (policy_glue_scratch_bytes
 * bounds it).  Backend buffers come from be->alloc. */
struct glue_batch {
    int on;                  /* 1: this policy and backend batch (policy_glue_set_batch) */
    struct batch_plan plan;
    int *due;                /* queued sequence ids, in on_step order */
    int n_due, due_cap;
    int n_cap, stride_cap;   /* what the buffers below hold: sequences x slots per head */
    size_t gather_cap;       /* floats of gather scratch per unit */
    struct score_unit *units, *units_host;
    float *imp, *red;
    double *z, *z_host;      /* backend / host: rows of doubles (per-layer plans, H2O) */
    float *add, *add_host;   /* backend / host: plans with added scores (SkipKV) */
    unsigned char *pad, *pad_host; /* backend / host: padded caches' pad flags per unit */
    int *keep_dev, *keep, *n_keep;          /* backend / host / host */
    struct gather_unit *gunits, *gunits_host;
    float *gscratch;
    struct batch_seq *bseq;
    struct cache_view *cv;
    struct kv_compact_seq *cseq;
    int64_t *freed;
    int time_phases;         /* 1: be->sync at the phase boundaries (policy_glue_time_phases) */
    int failed;              /* a dropped sequence's deferred inner on_step failed: err, */
    struct eb_err err;       /* reported by the next flush */
};

struct policy_glue {
    struct policy *p;
    int budget;
    const struct model *m;
    struct backend *be;
    struct policy_model pm;
    struct model_hooks mh;
    const struct gen_hooks *inner;
    struct glue_seq *seqs;
    int seqs_cap;
    float **qbuf;            /* [n_layer] backend, q_window rows of n_head * head_dim */
    float *host;             /* probabilities / hidden rows downloaded for the policy */
    size_t host_cap;
    struct keep_set ks;
    unsigned char *mark;     /* [ks.stride] duplicate check */
    struct policy_glue_stats st;
    double kv_bytes_sum;
    struct sched_run sched;  /* when to select, and what carries between sequences */
    struct retention *rec;   /* the token-retention record; NULL: off */
    struct glue_batch bt;
};

/* policy_batch.c */
void glue_batch_init(struct policy_glue *g);
void glue_batch_free(struct policy_glue *g);
/* 1 when seq's selection waits for the batch's (queued), 0 when it must run now. */
int glue_batch_wants(const struct policy_glue *g, const struct kvcache *c);
int glue_batch_queue(struct policy_glue *g, int seq, int token, int at_prefill,
                     struct kvcache *c, struct eb_err *e);
/* seq ends: out of the queue, its selection run alone, then its inner on_step. */
void glue_batch_drop(struct policy_glue *g, int seq);
/* One sequence's selection and compaction now (the per-sequence path). */
int glue_run_select(struct policy_glue *g, int seq, struct kvcache *c, int at_prefill,
                    struct eb_err *e);
/* The cache view run_select shows (shared by both paths). */
void glue_cache_view(const struct policy_glue *g, struct kvcache *c, int at_prefill,
                     struct cache_view *cv);
/* Retention of a compaction about to happen: every head of c that keep-set
 * (n_keep, keep with stride) shrinks. */
int glue_note_retention(struct policy_glue *g, int seq, const struct kvcache *c,
                        const int *n_keep, const int *keep, int stride, struct eb_err *e);

#endif
