/* runner_priv.h - the runner's state and the steps its files share.
 * Private to harness/exp/.  Calls go one way: runner.c (the sweep and
 * generate mode) -> runner_fidelity.c (fidelity mode) -> the leaves
 * runner_sample.c (measurements, progress, records), runner_schedule.c
 * (requests, padding) and point_policy.c (the point's policy and its trace
 * rows), which call nothing of the files above them; everything that runs
 * a model goes through the session (session.h). */
#ifndef EB_RUNNER_PRIV_H
#define EB_RUNNER_PRIV_H

#include "datasets/dataset.h"
#include "harness/exp/policy_glue.h"
#include "harness/exp/runner.h"
#include "harness/exp/session.h"
#include "model/model_tokenizer.h"
#include "policies/registry.h"

struct runner {
    struct runner_opts o;
    /* backend and the model of the last point, kept loaded for the next one */
    struct session s;
    /* the prompts of the last point, tokenised */
    char *items_key;
    struct dataset ds;
    struct runner_item *items;
    int **item_ids;
    int n_items;
    /* progress across the sweep */
    int point, n_points;
    double sweep_t0;
    int points_run;
    double points_run_s;
    /* the claim on the point being run (several processes on one database) */
    char owner[128];           /* host:pid:start */
    struct store *claim_st;    /* NULL: no point claimed */
    const char *claim_key;
    double claim_renewed;      /* store_clock() of the last renewal */
};

/* Renew the running point's claim when a third of its lease has passed; a
 * failed renewal only loses the lease (the point may then run twice, never
 * be lost), so it is not an error. */
void runner_renew_claim(struct runner *r);

/* Measurements of one sequence, taken through the generation hooks. */
struct seq_meas {
    double t_first, t_last;    /* first and last sampled token */
    long steps;
    double kv_sum;             /* bytes summed over steps, for the mean */
    size_t kv_seen;            /* bytes at the last step (after any compaction) */
    int n_prompt;
    int compressions;
};

/* What the measuring hooks share across the sequences of a batch. */
struct meas_ctx {
    struct seq_meas *seq;            /* by request index of this generate call */
    size_t token_bytes;              /* K+V bytes one token adds to a cache */
    size_t kv_total;                 /* sum of kv_seen over live sequences */
    size_t kv_cap;                   /* 0: none */
    int kv_exceeded;
    size_t kv_peak_seen;
    double batch_kv_sum;             /* batch KV summed over steps, for the run's mean */
    long batch_kv_steps;
    volatile sig_atomic_t *stop;     /* continuous batching: abandon the batch when set */
    int stopped;
    /* progress of continuous batching */
    struct runner *r;
    const struct runner_progress *prog_base;
    int *samples_done;
    long *gen_tokens;                /* tokens of finished sequences */
    long tokens_before;              /* generated before this batch */
    long steps;                      /* tokens sampled in this batch so far */
    double t0, last_report;
};

int meas_begin(void *ctx, int seq, const struct gen_request *req, struct kvcache *cache,
               struct eb_err *e);
int meas_step(void *ctx, int seq, int token, struct kvcache *cache, struct eb_err *e);
void meas_end(void *ctx, int seq, const struct gen_result *res);
/* (prompt length, item) pairs sort by length, ties in item order. */
struct len_idx {
    int len, idx;
};

struct pad_buf {
    int *tokens;             /* the batch's padded prompts, [nb][maxlen] */
    size_t cap;
    int *n_pad;              /* [nb] pads of each request */
    int n_cap;
};

int cmp_len_idx(const void *a, const void *b);
void set_oom(struct run_output *o, const char *msg);
struct gen_request *make_requests(const struct exp_config *cfg, const struct point *pt,
                                         const struct runner_item *items, int n, struct eb_err *e);
void pad_buf_free(struct pad_buf *pb);
int pad_token(const struct runner *r);
int left_pad_batch(struct pad_buf *pb, struct gen_request *reqs, int nb, int maxlen,
                          int pad_id, struct eb_err *e);
void report(struct runner *r, const struct runner_progress *in);
void set_error(struct run_output *o, const char *msg);
char *stored_params(const struct point *pt, const char *spec,
                    long pad_tokens);
int fill_sample(struct runner *r, struct run_output *o, struct sample_record *s,
                const struct runner_item *it, const char *grader, int think_open,
                const struct gen_result *g, const struct seq_meas *ms, struct eb_err *e);
void run_record_of_point(struct run_record *run, const struct runner *r,
                         const struct exp_config *cfg, const struct point *pt);
const char *own(struct run_output *o, char *s);
int prompt_opens_think(const struct runner *r, const struct exp_config *cfg);
int sample_sentences(const struct session_policy *pp, int seq, int64_t sample_idx,
                     struct run_output *o, struct eb_err *e);
void sample_trace_stats(const struct session_policy *pp, int seq, struct sample_record *s);
/* The token-retention record of policy sequence seq as s->retention (owned by
 * o); none when the glue records none (retention off, or FullKV). */
int sample_retention(const struct session_policy *pp, int seq, const struct runner *r,
                     const struct gen_result *g, struct run_output *o, struct sample_record *s,
                     struct eb_err *e);
/* The point's policy for the session's model (FullKV: none). */
int point_policy_open(struct session_policy *pp, const struct runner *r,
                      const struct exp_config *cfg, const struct point *pt,
                      struct eb_err *e);
int run_fidelity(struct runner *r, const struct exp_config *cfg, const struct point *pt,
                 const struct runner_item *items, int n, struct run_output *out,
                 struct eb_err *e);

#endif
