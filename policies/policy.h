/* policy.h - the eviction policy vtable.
 *
 * A policy sees the runtime only through the views below and answers with
 * keep-sets: for every (layer, kv head), the cache slots to keep.  It never
 * frees or moves cache memory; harness/exp/policy_glue.c validates the keep-sets
 * and model/ compacts.  Heavy math runs as backend primitives
 * (kernels/backend.h: window_scores, pool1d, key_redundancy) on the memory
 * the views point at; the policy combines the per-token scores in plain C
 * (policies/score.h).
 *
 * State is per sequence (begin_sequence .. end_sequence, keyed by the
 * sequence id): nothing carries over between sequences of a batch or between
 * batches.  Several sequences may be live at once. */
#ifndef EB_POLICY_H
#define EB_POLICY_H

#include <stddef.h>

#include "../kernels/backend.h"
#include "../util/err.h"

/* What a policy asks the runtime to record (FullKV asks for nothing). */
enum {
    POLICY_NEED_ATTN_PROBS = 1u << 0,  /* observe_attn: each step's attention probabilities */
    POLICY_NEED_RECENT_Q = 1u << 1,    /* cache_view.q: the last info.q_window queries per layer */
    POLICY_NEED_HIDDEN_LAST = 1u << 2  /* observe_hidden: final-norm hidden rows */
};

/* When select runs (harness/exp/policy_glue.c applies it; specs/policies.md §1.2). */
enum policy_schedule {
    POLICY_NEVER = 0,        /* fullkv */
    POLICY_DIVIDE = 1,       /* at prefill (prompt >= B), then at every step whose forward
                                follows a token count divisible by divide_length */
    POLICY_PREFILL_ONLY = 2, /* once, at prefill (original SnapKV) */
    POLICY_EVERY_STEP = 3,   /* after every forward (original H2O) */
    POLICY_DECODING = 4,     /* kvpress's DecodingPress: the prompt's forward never selects,
                                and every divide_length-th forward after it does (the count
                                starts at the prompt's end; policies/schedule.h) */
    POLICY_PREFILL_DECODING = 5 /* kvpress's PrefillDecodingPress: the prompt's forward
                                selects, then as POLICY_DECODING */
};

/* Filled by create. */
struct policy_info {
    unsigned needs;
    int q_window;            /* NEED_RECENT_Q: query rows per layer */
    int window;              /* slots always kept, whatever the budget (the most recent
                                ones, or StreamingLLM's sinks): a budget must exceed it */
    enum policy_schedule schedule;
    int divide_length;       /* POLICY_DIVIDE, POLICY_DECODING, POLICY_PREFILL_DECODING */
    const char *notice;      /* or NULL: a caveat the CLI prints whenever it runs the policy
                                (e.g. BeaconKV is an approximate reconstruction) */
    int slot_slack;          /* POLICY_EVERY_STEP policies that compact only now and then
                                (vase, rpc, beaconkv): slots a head may hold above the budget
                                before they do; -1: no bound (RPC's growing ratio budget) */
    /* POLICY_DIVIDE over the sequences one instance runs one after another.
     * Both 0 (the default): every sequence starts afresh.  compat=released sets
     * them to reproduce the papers' scripts, whose step flag (and, in R-KV's,
     * token count) outlives a sample (policies/schedule.h). */
    int divide_carry_flag;   /* a prefill selects only if the previous sequence's last
                                forward left the count divisible (the first one always) */
    int divide_carry_count;  /* the count runs on across sequences instead of restarting */
};

/* The tokenizer as the policies that read token text see it (seal, skipkv:
 * their sentence delimiters, check words, split tokens).  policies/ does not
 * include model/: harness/ fills this from model/'s tokenizer
 * (harness/exp/model_view.h). */
struct token_text {
    const void *self;        /* the tokenizer, passed back to each call */
    int n_vocab;
    /* len bytes of UTF-8 text to token ids, special tokens not parsed; *ids
     * malloc'd (the caller frees it, also when *n_ids is 0); -1 with e set */
    int (*encode)(const void *self, const char *text, size_t len, int **ids, int *n_ids,
                  struct eb_err *e);
    /* one token's raw bytes, or NULL */
    const char *(*token_bytes)(const void *self, int id, size_t *len);
    /* the id of an exact token string ("<think>"), or -1 */
    int (*find)(const void *self, const char *token);
};

struct policy_model {
    int n_layer, n_head, n_kv, head_dim;
    /* For policies that read token text or steer (seal, skipkv: policies/steering.h);
     * 0 / NULL when the caller has none (those policies then fail clearly). */
    int n_embd;
    const struct token_text *text;
    const char *model_name;       /* registry name or path; default vector vectors/<name>.bin */
    const char *model_identity;   /* harness/exp/model_view.h steering_model_identity();
                                     a vector must match it */
    const char *steer_vector;     /* steering vector file, or NULL */
};

struct seq_view {
    int n_prompt;
    int capacity;            /* slots per (layer, kv head) of this sequence's cache */
    const int *prompt;       /* host [n_prompt] token ids (NULL when the caller has none) */
};

struct step_view {
    int token;               /* just sampled (not yet in the cache) */
    int n_generated;         /* tokens sampled so far, this one included */
    int next_pos;            /* tokens processed so far = position of the next one */
    int selects_next;        /* the schedule selects after the next forward: the released
                                code's step flag (`is_newline`), raised by this forward */
};

/* One layer's attention probabilities of a forward's new queries (host copy). */
struct attn_view {
    int layer;
    const float *probs;      /* [n_head][n_new][cap]; slot j of kv head h is cache slot j */
    int n_head, n_new, cap;
    const int *kv_len;       /* [n_kv]: slots held, the n_new new ones included */
};

/* Read access to one sequence's cache.  len/pos/pad are host memory; k and q
 * point at backend memory (pass them to backend primitives, download to read). */
struct cache_view {
    struct backend *be;
    int n_layer, n_head, n_kv, head_dim;
    int capacity;                  /* slot stride of k, pos and pad */
    const int *len;                /* [n_layer][n_kv] */
    const int *pos;                /* [n_layer][n_kv][capacity]: original positions; ascending
                                      unless a policy keeps its cache in score order */
    const unsigned char *pad;      /* same layout as pos, 1 = pad slot; NULL: no pads */
    float *const *k;               /* [n_layer]: [n_kv][capacity][head_dim] post-RoPE keys;
                                      NULL when the rows come through `rows` */
    float *const *v;               /* [n_layer]: [n_kv][capacity][head_dim] values; may be NULL */
    /* When k is NULL (a cache stored in 16 bits): (layer, kv head)'s K
     * (which = 0) or V (1) rows [len][head_dim] as f32 backend memory,
     * converted on demand; valid until the next call for the same `which`
     * within this select.  NULL when neither k nor rows is set. */
    const float *(*rows)(const struct cache_view *v, int which, int layer, int kv_head);
    void *rows_ctx;
    float *const *q;               /* [n_layer]: [n_q][n_head*head_dim], oldest first; NULL
                                      unless NEED_RECENT_Q */
    int n_q;
    int next_pos;
    int at_prefill;                /* 1: the prompt has just entered the cache */
    /* The model's RoPE (host [head_dim / 2], enum rope_pairing), so a policy can
     * rotate a recorded post-RoPE query back to pre-RoPE (beaconkv); may be NULL. */
    const float *rope_inv_freq;
    int rope_pairing;
};

static inline int cache_view_len(const struct cache_view *v, int layer, int kv_head)
{
    return v->len[layer * v->n_kv + kv_head];
}
/* (layer, kv head)'s keys / values as f32 backend rows [len][head_dim]. */
static inline const float *cache_view_k(const struct cache_view *v, int layer, int kv_head)
{
    if (v->k) return v->k[layer] + (size_t)kv_head * v->capacity * v->head_dim;
    return v->rows ? v->rows(v, 0, layer, kv_head) : NULL;
}
static inline const float *cache_view_v(const struct cache_view *v, int layer, int kv_head)
{
    if (v->v) return v->v[layer] + (size_t)kv_head * v->capacity * v->head_dim;
    return !v->k && v->rows ? v->rows(v, 1, layer, kv_head) : NULL;
}
/* 1 when the view exposes value rows. */
static inline int cache_view_has_v(const struct cache_view *v)
{
    return v->v || (!v->k && v->rows);
}
static inline const unsigned char *cache_view_pad(const struct cache_view *v, int layer,
                                                  int kv_head)
{
    return v->pad ? v->pad + ((size_t)layer * v->n_kv + kv_head) * v->capacity : NULL;
}

/* select's answer, allocated by the caller: per (layer, kv head) either -1
 * (leave the head as it is) or n_keep distinct slot indices in [0, len). */
struct keep_set {
    int n_layer, n_kv;
    int stride;                    /* >= the capacity of the cache */
    int *n_keep;                   /* [n_layer * n_kv] */
    int *idx;                      /* [n_layer * n_kv][stride] */
};

static inline int *keep_set_head(struct keep_set *ks, int layer, int kv_head)
{
    return ks->idx + ((size_t)layer * ks->n_kv + kv_head) * ks->stride;
}

/* Every head unchanged. */
static inline void keep_set_none(struct keep_set *ks)
{
    for (int i = 0; i < ks->n_layer * ks->n_kv; i++) ks->n_keep[i] = -1;
}

enum param_type { PARAM_INT, PARAM_FLOAT, PARAM_BOOL, PARAM_CHOICE };

/* One parameter of a policy's table.  Its value lands in the policy's own
 * parameter struct (policy_params.typed) at `offset`: an int for PARAM_INT,
 * PARAM_BOOL (0/1) and PARAM_CHOICE (the index), a double for PARAM_FLOAT.
 * So policy code reads `prm->window`, never a key; a misspelt key is an
 * error when the spec resolves (tests/test_registry.c checks every table's
 * offsets against its struct's size). */
struct param_def {
    const char *key;          /* NULL ends a table */
    enum param_type type;
    double def, lo, hi;       /* default and inclusive range; PARAM_CHOICE: index into choices */
    const char *choices;      /* PARAM_CHOICE: "a|b|c" */
    const char *help;
    size_t offset;            /* offsetof(the policy's parameter struct, this field) */
};

enum { POLICY_MAX_PARAMS = 24, POLICY_TYPED_BYTES = 256 };

/* Where a resolved value came from (policies/param_parse.h): the table's
 * default, the registry entry's preset, the user (config or spec), or the
 * per-model defaults file (policies/policy_defaults.h). */
enum param_from { PARAM_FROM_TABLE, PARAM_FROM_PRESET, PARAM_FROM_USER, PARAM_FROM_DEFAULTS };

/* A policy's parameters, typed and resolved once (registry.h): every
 * parameter of its entry, in table order (the entry's own table, then its
 * shared one), which is the order run keys hash them in. */
struct policy_params {
    int n;
    const struct param_def *def[POLICY_MAX_PARAMS];
    double val[POLICY_MAX_PARAMS];   /* an int, a 0/1 bool or a choice index is a whole double */
    unsigned char from[POLICY_MAX_PARAMS];   /* enum param_from */
    unsigned char given[POLICY_MAX_PARAMS];  /* user and per-model values: 1 + the order they
                                                came in (what a run stores); else 0 */
    /* The same values as the policy's parameter struct (param_def.offset),
     * kept in step with val by param_parse.c: what create reads, through
     * policy_typed(). */
    _Alignas(double) unsigned char typed[POLICY_TYPED_BYTES];
};

/* The policy's parameter struct (e.g. const struct snapkv_params *). */
static inline const void *policy_typed(const struct policy_params *p)
{
    return p->typed;
}

struct policy_trace_stats;   /* steering.h */
struct sent_info;            /* sentences.h */
struct batch_plan;           /* select_batch.h */
struct scorer;               /* select.h */

struct policy_ops {
    const char *name;
    int (*create)(const struct policy_params *p, const struct policy_model *m, void **self,
                  struct policy_info *info, struct eb_err *e);
    void (*destroy)(void *self);
    /* Optional.  The sequence's cache is empty. */
    int (*begin_sequence)(void *self, int seq, const struct seq_view *sv, struct eb_err *e);
    void (*end_sequence)(void *self, int seq);
    /* The observe hooks return 0, or -1 with e set: generation then stops
     * with that error (no hook keeps an error for a later call to report). */
    /* Optional: a token was sampled. */
    int (*observe)(void *self, int seq, const struct step_view *s, struct eb_err *e);
    /* NEED_ATTN_PROBS: called during the forward, once per layer. */
    int (*observe_attn)(void *self, int seq, const struct attn_view *a, struct eb_err *e);
    /* NEED_HIDDEN_LAST: host rows [n][dim] of this sequence's new tokens. */
    int (*observe_hidden)(void *self, int seq, const float *rows, int n, int dim,
                          struct eb_err *e);
    /* Fill out for every (layer, kv head).  The policy may assume the keep-set
     * is applied (a failure to apply aborts generation). */
    int (*select)(void *self, int seq, const struct cache_view *cv, int budget,
                  struct keep_set *out, struct eb_err *e);
    /* Optional: modify this sequence's hidden rows (backend) after `layer`. */
    int (*steer)(void *self, int seq, int layer, struct backend *be, float *hidden, int n_rows,
                 int dim, struct eb_err *e);
    /* Optional, for policies that follow a trace's sentences (policy_trace_stats and
     * policy_trace_sentences in steering.h give the contracts): the statistics and
     * the sentences of seq's current trace, or of its last finished one. */
    int (*trace_stats)(const void *self, int seq, struct policy_trace_stats *out);
    int (*trace_sentences)(const void *self, int seq, struct sent_info **out, int *n,
                           struct eb_err *e);
    /* Optional: a rule of the policy's own on the budget, from its parameters
     * alone (no model), beyond the common ones (> 0, above the window).  Only
     * policy_budget_check (schedule.h) calls it, when a point or a policy is
     * built; 0, or -1 with e set. */
    /* Optional: backend bytes the instance allocates while a generate of
     * n_live sequences with caches of at most max_slots slots runs, beyond
     * the shared scoring scratch (policies/score.c), each block as
     * backend_alloc_bytes rounds it; the memory plan counts them
     * (tests/test_memplan.c).  NULL: nothing more. */
    size_t (*device_bytes)(const void *self, const struct policy_model *m, int n_live,
                           int max_slots);
    int (*check_budget)(const struct policy_params *p, int budget, struct eb_err *e);
    /* Optional: the batched form of select (policies/select_batch.h): 1 and
     * *out filled when this instance's selections at this budget can run for
     * many sequences at once; 0 (or NULL): select per sequence.  The plan must
     * pick the keep-sets select would. */
    int (*batch_plan)(const void *self, int budget, struct batch_plan *out);
    /* Optional: a parameter table shared with other policies (e.g. the
     * selector's options, select_params.h) whose parameters follow those of
     * the registry row's own table. */
    const struct param_def *shared_params;
    /* Optional: the window create will report (info.window, the slots always
     * kept) from the typed parameters, so that the budget is held against the
     * real window where a point is built, before any instance (`exp
     * --dry-run`: policy_entry_window, registry.h); policy_instantiate checks
     * the two agree.  NULL: the window is known once an instance exists.  (A
     * scorer row's configure gives it.) */
    int (*window_of)(const void *prm);
    /* Optional, for a policy that selects through the shared selector
     * (select.h): its scorer and the newest slots it always keeps, so that a
     * wrapper changing only the budgets (adakv.c, pyramidkv.c: wrap.h) ranks
     * by its scores.  The scorer's self is this instance's. */
    const struct scorer *(*scorer)(const void *self, int *n_recent);
};

/* The budget of a policy that evicts nothing (policy_keeps_all), from config
 * to point to run key; the store writes it as NULL. */
enum { POLICY_NO_BUDGET = 0 };

/* An instance: made by policy_create (policies/registry.h). */
struct policy {
    const char *name;              /* the registry row's (a preset's own name) */
    const struct policy_ops *ops;  /* the row's own, or row_ops below */
    struct policy_ops row_ops;     /* a scorer row's: row.c's vtable under the row's name */
    void *self;
    struct policy_info info;
    struct policy_params params;   /* resolved, as created */
    char spec[256];                /* "name:key=value,..." with every parameter resolved */
};

void policy_free(struct policy *p);

#endif
