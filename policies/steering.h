/* steering.h - SEAL steering vectors (../shared/specs/policies.md §6, §7.5):
 * the vector file, the model identity it is checked against (steer_vector.c),
 * where steering fires and SkipKV's adaptive strength (steering.c), and
 * steering inside a policy (steerer.c).
 *
 * File format, version 1 (written by `evictbench calibrate`):
 *
 *   evictbench-steering-vector 1\n        magic line and format version
 *   key: value\n                           header lines, in any order:
 *     model           name the vector was made with (informational)
 *     model_identity  steering_model_identity() of that model
 *                     (harness/exp/model_view.h)
 *     model_hash      16 hex digits: FNV-1a 64 of model_identity
 *     layer           L: the vector lives in the residual stream entering
 *                     decoder layer L (HF hidden_states[L]; 0-based)
 *     dim             hidden size = number of floats that follow
 *     n_reflection n_transition n_execution   steps pooled per class
 *     n_correct n_incorrect                    responses used
 *     dataset max_new keywords think decoding created   how it was made (free
 *                     text; decoding: "greedy" or the sampling parameters)
 *   \n                                     an empty line ends the header
 *   dim float32, little-endian             V = mean(reflection U transition)
 *                                          - mean(execution)
 *
 * Unknown header keys are ignored (later versions may add some); a missing
 * required key (model_hash, layer, dim), a different version, a truncated or
 * overlong data part, or a non-finite value is an error. */
#ifndef EB_STEERING_H
#define EB_STEERING_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "sentences.h"

#define STEER_MAGIC "evictbench-steering-vector"
#define STEER_VERSION 1

struct steer_vector {
    int version;
    int layer, dim;
    int n_reflection, n_transition, n_execution;
    int n_correct, n_incorrect;
    int max_new;
    uint64_t model_hash;
    char model[128];
    char model_identity[256];
    char dataset[64];
    char keywords[32];
    char think[16];
    char decoding[96];
    char created[32];
    float *v;                 /* [dim], malloc'd */
};

/* The hash of a model identity (the text harness/exp/model_view.h's
 * steering_model_identity writes, which policy_model.model_identity
 * carries). */
uint64_t steering_hash(const char *s);

int steer_vector_save(const char *path, const struct steer_vector *sv, struct eb_err *e);
/* Load and check: expect_identity (NULL: any model) must hash to the file's
 * model_hash and expect_dim (0: any) must equal its dim. */
int steer_vector_load(const char *path, const char *expect_identity, int expect_dim,
                      struct steer_vector *out, struct eb_err *e);
void steer_vector_free(struct steer_vector *sv);

/* SEAL step classification (§6.2) of a step's text: the text is lower-cased
 * and stripped of spaces and newlines, then matched against the keyword
 * lists.  fixed_typo = 0 keeps the reference's "think differenly"; 1 spells
 * it "think differently". */
enum step_class { STEP_EXECUTION = 0, STEP_REFLECTION = 1, STEP_TRANSITION = 2 };
enum step_class steering_classify(const char *text, size_t len, int fixed_typo);

/* Where steering fires, as a sequence's tokens stream past (§6.6). */
enum think_mode {
    THINK_TAGS = 0,           /* inside <think> .. </think>: set if the prompt holds <think>
                                 anywhere and does not end with </think> (released SkipKV),
                                 then by <think> in the output, cleared by </think> */
    THINK_ALWAYS = 1          /* every generated token counts as thought (models without
                                 <think>, e.g. SmolLM2) */
};
struct steer_track {
    enum think_mode mode;
    int pairs;                /* sent_tokens_split_at's option */
    int prev;                 /* the previous token, -1 at the start */
    int n_prompt;
    int pos;                  /* position of the next token */
    int in_think;
    int open_seen;            /* <think> seen in the prompt */
};
void steer_track_begin(struct steer_track *st, enum think_mode mode, int pairs, int n_prompt);
/* Advance over token id at the next position; returns 1 when the hidden
 * state of this token is to be steered: a split token inside the thought,
 * generated (or the prompt's last token, the last position of the prefill). */
int steer_track_token(struct steer_track *st, const struct sent_tokens *tok, int id);

/* SkipKV's adaptive strength (§7.5): alpha = alpha0 - gamma * N_o, the code's
 * form (alpha0 < 0 subtracts; the paper writes alpha0 + gamma * N_o for the
 * subtraction strength). */
double steering_alpha(double alpha0, double gamma, int n_o);

/* ---- steering inside a policy (seal, skipkv) ---- */

#include "policy.h"

/* One policy instance's vector, on the backend once the first steer call
 * names the backend. */
struct steerer {
    struct steer_vector vec;
    int layer;                /* steer the residual stream entering this layer */
    enum think_mode mode;
    int pairs;                /* split rule option (sent_tokens_split_at) */
    const struct sent_tokens *tok;  /* borrowed */
    struct backend *be;
    float *dev;               /* backend [dim]: alpha * V */
    float *host;              /* host [dim] */
    double dev_alpha;         /* the alpha dev holds; NAN: none yet */
};

/* Load the vector for the model: m->steer_vector, else
 * vectors/<basename of m->model_name>.bin when it exists; checked against
 * m->model_identity (when set) and m->n_embd (when > 0).  layer 0 takes the
 * vector's own layer.  policy names the policy in messages. */
int steerer_open(struct steerer *s, const struct policy_model *m, int layer, enum think_mode mode,
                 const struct sent_tokens *tok, const char *policy, struct eb_err *e);
void steerer_close(struct steerer *s);

/* A sequence's token stream as the steer hook sees it: the prompt, then each
 * sampled token; `fed` counts the tokens whose rows have passed the steering
 * layer. */
struct steer_seq {
    struct steer_track tr;
    int *toks, n_toks, cap;
    int fed;
    long n_steered;           /* rows steered */
};
/* A new sequence with its prompt (sv->prompt must be set). */
int steer_seq_begin(struct steer_seq *q, enum think_mode mode, int pairs,
                    const struct seq_view *sv, struct eb_err *e);
int steer_seq_push(struct steer_seq *q, int token, struct eb_err *e);
void steer_seq_free(struct steer_seq *q);

/* The vtable's steer hook body: after layer s->layer - 1, add alpha * V to
 * every row whose token is a split token inside the thought. */
int steerer_apply(struct steerer *s, struct steer_seq *q, int layer, struct backend *be,
                  float *hidden, int n_rows, int dim, double alpha, struct eb_err *e);

/* ---- per-trace statistics (the observation interface for the harness) ---- */

struct policy_trace_stats {
    struct sent_stats s;      /* sentences, N_o, pairs above tau, PSS mean/max (skipkv) */
    double alpha;             /* the steering coefficient at the end (0: no steering) */
    long n_steered;           /* hidden rows steered */
    int valid;
};
/* The statistics of seq's current trace, or of its last finished one (kept
 * until the id is reused), through the policy's trace_stats entry (seal,
 * skipkv and their presets have one).  Returns -1 for policies without it or
 * an unknown sequence. */
int policy_trace_stats(const struct policy *p, int seq, struct policy_trace_stats *out);

/* The sentences of seq's current trace, or of its last finished one (kept
 * until the id is reused, as the statistics are), in order, through the
 * policy's trace_sentences entry (seal, skipkv and their presets): spans, labels, max_sim (NAN under seal and
 * skipkv's sentence=0, which build no representations) and evicted steps
 * (-1 unless skipkv's sentence penalty reached the sentence).  Returns 0
 * with *out malloc'd (the caller frees; NULL when *n is 0), 1 when the
 * policy keeps no sentences for seq (no trace_sentences entry, an unknown
 * sequence), -1 when they were lost or on out of memory (e set). */
int policy_trace_sentences(const struct policy *p, int seq, struct sent_info **out, int *n,
                           struct eb_err *e);

#endif
