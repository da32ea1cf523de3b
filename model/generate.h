/* generate.h - batched generation: chunked prefill and ragged decode.
 *
 * generate() runs n requests with up to max_live of them in flight.  Every
 * forward pass mixes the decode tokens of sequences already generating with
 * chunks of prompts still being prefilled, without padding; a sequence stops
 * at any EOS id or at its token limit, its slot is refilled with the next
 * request, and the rest continue.  Each sequence has its own sampler (seeded
 * per request), so its tokens do not depend on what else is in the batch.
 *
 * Static left-padded batches are reproduced with gen_options.n_pad: pads are
 * stored in the cache and masked, not skipped.
 *
 * Hooks let a later layer watch, steer or compact without model/ knowing any
 * policy; requests that nobody makes cost nothing. */
#ifndef EB_GENERATE_H
#define EB_GENERATE_H

#include <stddef.h>

#include "../util/err.h"
#include "kvcache.h"
#include "model.h"
#include "sampler.h"

struct gen_request {
    const int *prompt;       /* host token ids, n_prompt >= 1 */
    int n_prompt;
    int max_new;             /* >= 1; clamped so prompt + new fits the context */
    struct sampler_params sampling;
};

enum gen_finish { GEN_FINISH_NONE = 0, GEN_FINISH_EOS = 1, GEN_FINISH_LENGTH = 2 };

struct gen_result {
    int *tokens;             /* malloc'd generated ids, the EOS token excluded */
    int n_tokens;
    enum gen_finish finish;
    size_t peak_kv_bytes;    /* this sequence's cache */
    double ttft_s;           /* from generate() start to its first token */
};

struct gen_hooks {
    void *ctx;
    /* Passed to every model_forward (fwd_seq.id is the request index). */
    const struct model_hooks *model;
    /* > 0: every cache keeps a ring of the last w post-RoPE queries per layer. */
    int recent_q_window;
    /* A request enters a slot (its cache is empty).  Return -1 to abort. */
    int (*begin_sequence)(void *ctx, int seq, const struct gen_request *r, struct kvcache *cache,
                          struct eb_err *e);
    /* A token was sampled for seq (also an EOS token).  The cache holds the
     * prompt and every earlier token; compaction here is allowed.  Return -1
     * to abort generation. */
    int (*on_step)(void *ctx, int seq, int token, struct kvcache *cache, struct eb_err *e);
    /* The sequence finished; r is final. */
    void (*end_sequence)(void *ctx, int seq, const struct gen_result *r);
    /* > 0: the hooks promise (by compacting in on_step) that no head of a
     * sequence ever holds more than this many slots after its prompt is in,
     * so each cache is allocated max(n_prompt + 1, kv_slot_limit) slots
     * instead of prompt + max_new: eviction really saves memory, and the
     * memory estimate (and so the largest feasible batch) reflects it.  An
     * append beyond the allocation is an error, never an overflow. */
    int kv_slot_limit;
    /* Backend bytes the hooks allocate while a generate of n_live sequences
     * in flight runs, whose caches hold at most max_slots slots (a policy's
     * scratch and views): the memory plan counts them (generate_plan).
     * NULL: none. */
    size_t (*device_bytes)(void *ctx, int n_live, int max_slots);
    /* Once per forward pass, after every sampled row's on_step (and after
     * finished sequences' end_sequence): the batch's compression point, where
     * hooks may compact every cache that on_step found due at once.  The
     * caches of sequences still in flight are those on_step saw.  Return -1
     * to abort generation. */
    int (*after_step)(void *ctx, struct eb_err *e);
};

struct gen_options {
    int max_live;            /* sequences in flight at once; 0: all */
    int prefill_chunk;       /* prompt tokens per forward pass; 0: 512 */
    int n_ctx;               /* context length; 0: the model's */
    const int *eos_ids;      /* NULL: the model's */
    int n_eos;
    int ignore_eos;          /* 1: run every sequence to max_new (benchmarks, golden tests) */
    int n_vocab_valid;       /* ids >= this are never sampled; 0: every row of the LM head */
    size_t mem_limit;        /* bytes for weights + KV + activations; 0: weights + available RAM */
    int host_sampling;       /* 1: download the logits and sample on the host even when the
                              * backend samples in its own memory (its `sample` op) */
    const struct gen_hooks *hooks;
    enum kv_type kv_type;    /* element type of every sequence's KV cache (0: f32) */
    /* NULL, or [n]: left padding of each request.  The first n_pad[i] tokens of
     * request i's prompt are pads (0 <= n_pad[i] < n_prompt).  They enter the
     * cache as pad slots (they take K+V bytes and count in every slot limit)
     * but no query attends to them, and they take positions -n_pad..-1, so
     * the real prompt starts at position 0: the positions Hugging Face derives
     * from the attention mask (cumsum - 1), hence a padded sequence generates
     * what it would alone.  (HF then gives the pads position 1; ours stay
     * ascending because policies binary-search slot positions.  Pads are
     * masked, so only their own unused K/V differ.)  Hooks can read a cache's
     * pads through its
     * left_pad field and pad flags; the pad rows of a forward are
     * fwd_seq.n_pad. */
    const int *n_pad;
    /* > 0 (benchmarks): once a request's prompt is in, its cache is extended
     * to fill_to slots by repeating the prompt's K/V (kvcache_fill_repeat)
     * before the first token's hooks run, so decode (and a policy's first
     * selection) sees a fill_to-slot context without a fill_to-token prefill.
     * The context check and the cache size count fill_to as the prompt. */
    int fill_to;
};

struct gen_stats {
    long prefill_tokens, decode_tokens;
    /* Wall time of the steps whose forward pass had prompt tokens / had
     * none: the forward, sampling and every hook (a policy's observation,
     * scoring and compaction), so decode_tokens / decode_s is the rate a
     * user gets. */
    double prefill_s, decode_s;
    double decode_forward_s;         /* of decode_s: the forward passes and sampling alone */
    long decode_steps;               /* forward passes without prompt tokens */
    size_t peak_kv_bytes;            /* sum over sequences in flight, at its largest */
    size_t est_bytes;                /* the memory estimate checked before starting */
    int forward_calls;
    /* Backend calls of a decode step's forward pass and sampling (a policy's
     * compression is not in it), fewest and most over the decode steps: 0
     * unless the model's backend counts calls (backend_count_create). */
    long decode_calls_min, decode_calls_max;
    /* Thread synchronisations of the decode steps (parallel jobs started,
     * barriers inside them), hooks included: 0 unless the backend counts
     * them (backend.thread_syncs, the CPU's). */
    unsigned long decode_jobs, decode_barriers;
    /* Of decode_forward_s, on a backend with a device clock (backend.time_*;
     * else both 0): the host's seconds blocked on the device, and the
     * device's own seconds for the same forward passes and sampling.  The
     * host's own work is decode_forward_s - decode_wait_s. */
    double decode_wait_s, decode_device_s;
    int device_clock;                /* 1 when the two above were measured */
    /* Layers the backend ran as fused blocks over the decode steps
     * (forward_fused_layers: attention input, and the rest of the layer). */
    long decode_fused_in, decode_fused_out;
    /* Decode steps run as one recorded graph (backend.graph_begin: replayed
     * or just captured), and of them the captures (a new batch shape or
     * binding, e.g. after a compaction); 0 where the backend has none. */
    long decode_graph_steps, decode_graph_captures;
    int graphs;                      /* 1 when the backend records step graphs */
};

/* Run all requests.  results[n] are filled (free with gen_results_free).  On
 * error nothing is left allocated in results.  stats may be NULL. */
int generate(const struct model *m, const struct gen_request *reqs, int n,
             const struct gen_options *opt, struct gen_result *results, struct gen_stats *stats,
             struct eb_err *e);
void gen_results_free(struct gen_result *results, int n);

/* The memory plan of a generate: what it will allocate, part by part. */
struct gen_mem_plan {
    size_t weights;  /* as given (already resident when generate runs) */
    size_t kv;       /* the caches of the max_live largest requests, query rings included */
    size_t forward;  /* the forward pass's buffers */
    size_t probs;    /* attention probabilities kept for hooks that observe them */
    size_t hooks;    /* what the hooks allocate (gen_hooks.device_bytes) */
    size_t device;   /* backend memory generate allocates: kv + forward + probs + hooks */
    size_t host;     /* host memory beside it: positions, pad flags, host logits */
    size_t total;    /* weights + device + host (SIZE_MAX on overflow) */
};
/* Every backend allocation is counted as a rounding pool takes it
 * (backend_alloc_bytes), so `device` covers what a generate allocates
 * through be->alloc (tests/test_memplan.c holds it to within 5%). */
void generate_plan(const struct model_config *cfg, size_t weight_bytes,
                   const struct gen_request *reqs, int n, const struct gen_options *opt,
                   struct gen_mem_plan *out);

/* The memory estimate: generate_plan's total (SIZE_MAX on overflow). */
size_t generate_estimate_bytes(const struct model_config *cfg, size_t weight_bytes,
                               const struct gen_request *reqs, int n,
                               const struct gen_options *opt);

/* What generate() checks before allocating anything: every request is
 * well-formed (non-empty prompt of valid ids that leaves room in the context,
 * max_new >= 1) and the estimate fits opt->mem_limit, or else the available
 * memory (plus weight_bytes when the weights are already loaded).  Callers can
 * run it before model_load, with model_weight_bytes(). */
int generate_check(const struct model_config *cfg, size_t weight_bytes, int weights_loaded,
                   const struct gen_request *reqs, int n, const struct gen_options *opt,
                   struct eb_err *e);

/* What generate() decides for one request, for a caller that replays a
 * sequence itself (teacher forcing, harness/exp/session_teacher.c): the new
 * tokens it may take (max_new clamped to the context), the slots its cache
 * gets (honouring hooks->kv_slot_limit) and whether a token ends it (the
 * EOS ids of opt or the model; never with ignore_eos). */
int generate_max_new(const struct model_config *c, const struct gen_options *opt,
                     const struct gen_request *r, int n_pad);
int generate_cache_slots(const struct model_config *c, const struct gen_options *opt,
                         const struct gen_request *r, int n_pad);
int generate_is_eos(const struct model *m, const struct gen_options *opt, int tok);

/* MemAvailable from /proc/meminfo, else sysconf's available pages. */
size_t generate_available_memory(void);

#endif
