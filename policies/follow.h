/* follow.h - the component SEAL, SkipKV and fullkv-pss compose to follow a
 * trace's sentences and steer it: per sequence a sentence tracker
 * (sentences.h) and, when steering, a steering state (steering.h); the
 * finished traces' statistics and sentences (trace_stats.h); and the policy
 * hooks that only move them (begin, end, a sampled token, steer, the trace
 * statistics and sentences).  A policy keeps a struct follower and adds its
 * own steps (SkipKV: hidden rows, sentence comparison, alpha, eviction). */
#ifndef EB_POLICY_FOLLOW_H
#define EB_POLICY_FOLLOW_H

#include "score.h"
#include "sentences.h"
#include "steering.h"
#include "trace_stats.h"

struct follow_seq {
    struct sent_tracker tr;
    struct steer_seq st;
    int n_prompt;            /* the generation step is tr.n_tokens - n_prompt */
    double alpha;            /* the steering coefficient now (the statistics' alpha) */
    int failed;              /* a hook failed (reported then): the trackers are not consistent */
};

struct follow_opts {
    const char *name;        /* the policy's, for messages */
    int check_space;         /* sent_tokens_from_text */
    int steer;               /* 0: no steering state, alpha 0 in the statistics */
    int layer;               /* steering layer; 0: the vector file's */
    enum think_mode mode;
    int pairs;               /* split rule option */
    int dim;                 /* hidden size for representations; 0: labels only */
    float tau;
    double alpha0;           /* a sequence's alpha at its start */
};

struct follower {
    struct follow_opts o;
    struct sent_tokens tok;
    struct steerer sr;
    struct seq_table seqs;
    struct trace_stats_table done;   /* finished traces by sequence id */
};

/* The token sets from m's tokenizer and, when steering, the vector. */
int follower_open(struct follower *f, const struct follow_opts *o, const struct policy_model *m,
                  struct eb_err *e);
void follower_close(struct follower *f);

/* begin_sequence: the prompt's tokens tracked (and fed to steering). */
int follower_begin(struct follower *f, int seq, const struct seq_view *sv, struct eb_err *e);
/* The live sequence seq into *q (NULL when unknown: not an error); -1 with e
 * set when its tracking failed earlier. */
int follower_live(struct follower *f, int seq, struct follow_seq **q, struct eb_err *e);
/* end_sequence: the last sentences compared (when representations are kept),
 * the statistics and sentences stored, the state freed. */
void follower_end(struct follower *f, int seq);
/* observe: one sampled token into the tracker and the steering state. */
int follower_push(struct follower *f, struct follow_seq *q, int token, struct eb_err *e);
/* The steer hook with the sequence's alpha. */
int follower_steer(struct follower *f, int seq, int layer, struct backend *be, float *hidden,
                   int n_rows, int dim, struct eb_err *e);
int follower_trace_stats(const struct follower *f, int seq, struct policy_trace_stats *out);
int follower_trace_sentences(const struct follower *f, int seq, struct sent_info **out, int *n,
                             struct eb_err *e);

#endif
