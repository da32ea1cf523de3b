/* bench_point.h - one measured point of the long-context benchmarks
 * (`bench --contexts`, `bench --max-batch`): a batch of sequences whose
 * caches are filled to a context, then decoded for a few steps with FullKV
 * or a policy at a budget. */
#ifndef EB_BENCH_POINT_H
#define EB_BENCH_POINT_H

#include <stddef.h>

#include "harness/exp/session.h"
#include "util/err.h"

/* The real prompts every point prefills: n sequences of len tokens of GSM8K
 * problem text (one text per sequence), or deterministic token ids when the
 * dataset or the tokenizer is missing.  fill names it for the bench rows:
 * "repeat:gsm8k:256" = the K/V of a 256-token real prefill, repeated. */
struct bench_src {
    int *ids;                /* [n][len] */
    int n, len;
    char fill[48];
};
int bench_src_make(struct session *s, int n, int len, struct bench_src *out, struct eb_err *e);
void bench_src_free(struct bench_src *b);

struct bench_point {
    const char *policy;      /* a policy spec; "fullkv" runs without one */
    int budget;              /* 0 for FullKV */
    int context;             /* slots every cache holds before decode (>= the source's len) */
    int batch;               /* sequences, <= the source's n */
    int n_new;               /* decode steps measured (<= 4096) */
    enum kv_type kv;
};

struct bench_result {
    int oom;                 /* 1: did not fit; est_bytes and error say why */
    size_t est_bytes;        /* generate()'s memory estimate */
    char error[512];
    double decode_tok_s, decode_step_ms;   /* median decode step (forward and sampling) */
    long prefill_tokens;
    double prefill_s;
    double compress_first_ms;              /* per sequence: its first selection, over `context` */
    double compress_ms_per_step;           /* policy time per later decode step of the batch */
    long compressions;
    size_t kv_bytes;                       /* peak K+V bytes of the batch */
    double peak_rss_mb;                    /* the process's peak during this point */
};

/* Split a comma-separated list in place into items; the count, or -1 for an
 * empty item or more than max. */
int bench_split(char *s, char **items, int max);

/* spec opened for the session's model at budget (the model's defaults from
 * policies/policy_defaults.json, no dataset; explicit parameters win). */
int bench_open_policy(struct session *s, const char *spec, int budget, struct session_policy *sp,
                      struct eb_err *e);

/* Measure p.  A point that does not fit in memory is r->oom = 1 and returns 0;
 * -1 only for real errors. */
int bench_point_run(struct session *s, const struct bench_src *src, const struct bench_point *p,
                    struct bench_result *r, struct eb_err *e);

/* Prompt tokens per forward pass of a bench point: every prompt at once,
 * up to BENCH_PREFILL_TOKENS (or one per sequence when the batch is larger),
 * so a batch of thousands does not size its forward buffers for all of
 * their prompts at once. */
enum { BENCH_PREFILL_TOKENS = 8192 };
int bench_prefill_chunk(int batch, int n_prompt);

#endif
