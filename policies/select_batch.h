/* select_batch.h - the shared selector for many sequences at once: a policy
 * on select.h states *what* scores its candidates as a plan (batch_plan), and
 * select_batch_run asks the backend's batched ops (backend.h, "batched
 * eviction") for every due sequence, layer and kv head together: one upload
 * of the unit descriptors, one window-importance call, one redundancy call
 * (R-KV), one top-k call.  The keep indices stay in backend memory for the
 * batched compaction (kvcache_compact_batch); their counts are known on the
 * host.  Gate, candidates, window and tie rule are select.h's.
 *
 * Scores that live on the host (H2O's accumulated attention, summed there by
 * observe_attn) are written by the policy into a row per head (host_scores),
 * uploaded in one call and ranked on the device like any other; the policy
 * is told the keep-sets once they are back on the host (kept).
 *
 * Per-layer keep-sets (TOVA, h2o-rkv) are runs of units, a layer's kv heads,
 * that share one score row: the heads' mean of their window importance
 * (head_mean_batch) or of the last query's attention (last_query_attn_batch);
 * every head of the run ranks that row.  A per-sequence addition to the
 * scores (SkipKV's sentence penalty, which lives on the host) is a row per
 * unit the policy writes on the host (add_row), uploaded once for the batch.
 *
 * Left-padded caches batch where the backend has batch_pads: their pad
 * flags are staged per unit and uploaded once (score_unit.pad).
 *
 * What does not batch keeps the per-sequence select: pads on a backend
 * without batch_pads, R-KV's batch0 bug, and the policies with their own
 * select (VaSE, RPC, BeaconKV, SEAL: state that moves with every sequence's
 * sentences, host-side rules). */
#ifndef EB_POLICY_SELECT_BATCH_H
#define EB_POLICY_SELECT_BATCH_H

#include "select.h"

/* What gives a per-layer plan the score its kv heads share. */
enum batch_shared {
    BATCH_SHARED_NONE = 0,       /* a keep-set per kv head */
    BATCH_SHARED_IMP_MEAN = 1,   /* the heads' mean of their window importance (h2o-rkv) */
    BATCH_SHARED_LAST_QUERY = 2  /* the heads' mean of the last query's attention (TOVA) */
};

struct batch_plan {
    enum batch_score score;      /* BATCH_SCORE_Z with shared or host_scores */
    enum batch_shared shared;    /* not NONE: one keep-set per layer */
    struct importance_opts imp;  /* BATCH_SCORE_IMP, _MIX */
    double lambda;               /* _MIX */
    float threshold;             /* _MIX: key redundancy */
    int no_match_zero_col0;
    int n_recent;                /* the newest slots always kept */
    int evict_above;             /* gate len > B instead of len >= B */
    enum keep_order order;
    /* the scorer's pad rule (select.h: use_pads, pads, pad_score): a pad
     * slot ranks at +pad_score (pad_keep) or -pad_score */
    int use_pads, pad_keep;
    double pad_score;
    int bf16;                    /* the scorer's score_dtype=bf16 (score_batch_args.bf16) */
    /* Optional: a row added to a head's candidate scores before ranking
     * (SkipKV's sentence penalty), written on the host into add[0, n_cand),
     * zeros on entry, for each selected head; policy is batch_job.policy.
     * 0, or -1 with e set. */
    int (*add_row)(void *policy, int seq, const struct cache_view *cv, int layer, int kv_head,
                   int n_cand, float *add, struct eb_err *e);
    /* Optional (H2O): a selected head's scores z[0, n_cand), written on the
     * host by the policy (score BATCH_SCORE_Z, a row per head).  0, or -1
     * with e set. */
    int (*host_scores)(void *policy, int seq, const struct cache_view *cv, int layer,
                       int kv_head, int n_cand, double *z, struct eb_err *e);
    /* Optional: each selected head's keep-set once it is on the host
     * (select_batch_kept; H2O's scores move with their slots). */
    void (*kept)(void *policy, int seq, int layer, int kv_head, const int *keep, int n);
    /* The instance the three callbacks above take (batch_job.policy); NULL:
     * the policy's own.  A wrapper passing on its inner's plan names the
     * inner's. */
    void *self;
};

/* One due sequence as the batched selector sees it.  A left-padded one only
 * where the backend has batch_pads (harness/exp/policy_batch.c,
 * glue_batch_wants). */
struct batch_seq {
    int seq;                     /* the policy's sequence id */
    const struct cache_view *cv;
    const void *const *k;        /* [n_layer] the cache's K buffers, kv_type elements */
    enum kv_type kv_type;
    float *const *q_ring;        /* [n_layer] query rings of q_ring_rows rows, or NULL */
    int q_ring_rows, q_next, q_count;
    int padded;                  /* 1: the cache holds left pads (cv's pad flags staged) */
};

/* The due sequences and the backend scratch (sized by select_batch_floats). */
struct batch_job {
    struct backend *be;
    int n_seq;
    const struct batch_seq *seqs;
    int stride;                  /* slots per head in keep and the score rows, >= capacities */
    struct score_unit *units;    /* backend: n_seq * n_layer * n_kv descriptors */
    struct score_unit *units_host;
    float *imp, *red;            /* backend: n_seq * n_layer * n_kv rows of stride floats */
    double *z;                   /* backend: shared plans n_seq * n_layer rows of stride,
                                    host_scores one per head (as imp) */
    double *z_host;              /* host, host_scores: as z */
    float *add, *add_host;       /* backend and host, add_row: as imp */
    unsigned char *pad, *pad_host; /* backend and host: [n_units][stride] bytes, the pad
                                    flags of the units of left-padded caches, staged on
                                    the host and uploaded once (score_unit.pad) */
    void *policy;                /* the instance the plan's callbacks take (plan->self, or
                                    the policy's own) */
    int *keep_dev;               /* backend: [n_seq][n_layer * n_kv][stride] */
    int *n_keep;                 /* host [n_seq][n_layer * n_kv] out: kept slots, -1: unchanged */
    int sync;                    /* 1: wait for the backend at the score / select boundary */
    double score_s, select_s;    /* out: wall time of the two phases */
    int n_units;                 /* out: heads selected */
    int n_padded;                /* out: of them, heads of left-padded caches */
};

/* Backend floats of the descriptors and score rows of one job; rows of
 * doubles (shared: one per layer run; host_scores: one per head). */
size_t select_batch_unit_floats(int n_units);
size_t select_batch_score_floats(int n_units, int stride);
size_t select_batch_shared_floats(int n_runs, int stride);
/* Backend floats holding n_units rows of stride pad flags (bytes). */
size_t select_batch_pad_floats(int n_units, int stride);

/* 1 when plan scores with the window importance (imp rows); with the
 * redundancy (red rows).  Rows of doubles (z) plan needs for n sequences. */
int select_batch_uses_imp(const struct batch_plan *plan);
int select_batch_uses_red(const struct batch_plan *plan);
int select_batch_z_rows(const struct batch_plan *plan, int n_seq, int n_layer, int n_kv);

/* 1 when the backend has what plan needs. */
int select_batch_backend_ok(const struct backend *be, const struct batch_plan *plan);

/* Score and select every head of every sequence of job: job->n_keep and the
 * keep indices in job->keep_dev.  0, or -1 with e set. */
int select_batch_run(const struct batch_plan *plan, struct batch_job *job, int budget,
                     struct eb_err *e);

/* After the caller brought job's keep indices to the host (keep, laid out
 * as job->keep_dev): plan->kept for every selected head. */
void select_batch_kept(const struct batch_plan *plan, const struct batch_job *job,
                       const int *keep);

/* policy_ops.batch_plan of a plain selector policy: 1 with the gate,
 * order, pad rule, score precision and n_recent filled (the caller sets
 * the score, and for a per_layer scorer `shared`). */
int select_batch_plan_of(const struct scorer *sc, int n_recent, struct batch_plan *out);

#endif
