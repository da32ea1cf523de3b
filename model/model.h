/* model.h - transformer weights on a backend, and the forward pass over a
 * ragged batch.
 *
 * model_load puts an open model file's weights on a backend.  Weight matrices
 * stay in the file's type with MODEL_WEIGHTS_NATIVE (quantized blocks, f16, bf16; the CPU
 * backend reads them in place from the file mapping, without a copy); with
 * weights = MODEL_WEIGHTS_F32 (exact mode) every tensor is dequantized to f32
 * as transformers computes.  Norms, biases and RoPE divisors are always f32.
 * The model keeps the file open as long as it reads from it, so the caller
 * may close it after loading either way.  model_forward runs the new tokens of
 * several sequences, concatenated into one [T][n_embd] activation so every
 * GEMM covers all of them, with attention per sequence over its own KV cache.
 *
 * Hooks (struct model_hooks) let a later layer look at or steer the
 * computation without model/ knowing why: they cost nothing when absent. */
#ifndef EB_MODEL_H
#define EB_MODEL_H

#include <stddef.h>

#include "../kernels/backend.h"
#include "../util/err.h"
#include "kvcache.h"
#include "modelfile.h"

struct model_layer_weights {
    float *attn_norm;                /* [n_embd] */
    struct weight *wq, *wk, *wv, *wo; /* [out][in] */
    float *bq, *bk, *bv;             /* qwen2 only, else NULL: three parts of bqkv */
    float *bqkv;                     /* [qd + 2 kvd]: bq, bk, bv one after the other */
    float *q_norm, *k_norm;          /* qwen3 only: [head_dim], else NULL */
    float *ffn_norm;                 /* [n_embd] */
    struct weight *w_gate, *w_up, *w_down;
    /* The backend's joined forms (weight_join), or NULL: wq, wk and wv (then
     * views of wqkv), w_gate and w_up (views of w_gate_up). */
    struct weight *wqkv, *w_gate_up;
};

/* How weight matrices are held. */
/* Exact mode stays the default (zeroed options, model_load) until runs record
 * the weight mode and decoding with 8-bit activations is batch-invariant:
 * bench, generate --weights native and model_load_opts ask for native. */
enum model_weights {
    MODEL_WEIGHTS_F32 = 0,   /* dequantized to f32: exact mode (default) */
    MODEL_WEIGHTS_NATIVE = 1 /* the file's type */
};

/* Whether q/k/v and gate/up are joined at load (backend.weight_join). */
enum model_join {
    MODEL_JOIN_AUTO = 0, /* where the backend gains by it (backend.prefers_joined) */
    MODEL_JOIN_ALWAYS,   /* wherever the backend can (tests of the layout) */
    MODEL_JOIN_NEVER     /* comparisons */
};

struct model_load_opts {
    enum model_weights weights;
    enum model_join join;
};

/* "native" / "f32"; parse returns -1 for anything else. */
const char *model_weights_name(enum model_weights w);
int model_weights_parse(const char *s, enum model_weights *out);

struct model {
    struct model_config cfg;
    struct backend *be;
    enum rope_pairing pairing;       /* from cfg.qk_permuted */
    float *inv_freq;                 /* host [head_dim/2], rope scaling applied */
    float *inv_freq_dev;             /* the same in backend memory (uploaded once), or NULL */
    struct weight *tok_embd;         /* [n_vocab][n_embd] */
    float *output_norm;              /* backend [n_embd] */
    struct weight *output;           /* [n_vocab][n_embd]; == tok_embd when tied */
    struct model_layer_weights *layers;
    size_t weight_bytes;             /* resident bytes of the weights: backend memory plus
                                        the file bytes read in place */
    enum model_weights weights;      /* as loaded */
    struct model_file *file;         /* retained while weights borrow its mapping, else NULL */
};

/* Exact mode (f32 weights; also opts NULL), or as opts say. */
int model_load(const struct model_file *mf, struct backend *be, struct model **out,
               struct eb_err *e);
int model_load_opts(const struct model_file *mf, struct backend *be,
                    const struct model_load_opts *opts, struct model **out, struct eb_err *e);
void model_free(struct model *m);

/* Resident bytes model_load will hold for this file's weights: exact mode
 * (model_weight_bytes) or as opts say.  Native weights are counted in the
 * file's layout; a backend may hold up to 1/32 more (the CPU repacks Q4_K 8
 * rows at a time for AVX2: 148 bytes a block instead of 144). */
size_t model_weight_bytes(const struct model_file *mf);
size_t model_weight_bytes_opts(const struct model_file *mf, const struct model_load_opts *opts);
/* The same for a backend that holds a matrix of n elements of a file type
 * in matrix_bytes(type, n, exact) bytes (exact: opts ask for f32 weights)
 * and vectors in f32: a device's weights before uploading them. */
size_t model_weight_bytes_held(const struct model_file *mf, const struct model_load_opts *opts,
                               size_t (*matrix_bytes)(int type, size_t n_elements, int exact));

/* The types the weight matrices are held in, most bytes first, joined by
 * '+' (e.g. "Q4_K+Q6_K"), into out. */
void model_weight_types(const struct model *m, char *out, size_t out_len);

/* Visit every weight matrix with its canonical tensor name (info, tests). */
void model_each_weight(const struct model *m,
                       void (*fn)(void *ctx, const char *name, const struct weight *w), void *ctx);

/* RoPE inverse frequencies for a config: inv_freq[i] = theta^(-2i/d), then
 * Llama-3 or linear scaling from cfg.rope_scaling, then division by
 * rope_freqs[i] when non-NULL (GGUF's precomputed Llama-3 divisors). */
void model_rope_inv_freq(const struct model_config *cfg, const float *rope_freqs, float *out);

/* ---- a model's shape without its weights (model_shape.c) ---- */

/* The config of "qwen7b" (DeepSeek-R1-Distill-Qwen-7B) or "llama8b"
 * (-Llama-8B) into out; -1 for another name. */
int model_shape_config(const char *name, struct model_config *out);
/* A model of c's shape whose weights are allocations on be with no data
 * written: for a backend that computes nothing (backend_tally_create(NULL)).
 * model_free frees it.  NULL when out of memory. */
struct model *model_shape_create(struct backend *be, const struct model_config *c);

/* ---- forward over a ragged batch ---- */

enum fwd_logits { FWD_LOGITS_NONE = 0, FWD_LOGITS_LAST = 1, FWD_LOGITS_ALL = 2 };

struct fwd_seq {
    int id;                  /* caller's sequence id, passed through to hooks */
    struct kvcache *cache;   /* receives the new tokens' K/V */
    const int *tokens;       /* host, n_tokens new tokens at positions cache->next_pos.. */
    int n_tokens;
    int n_pad;               /* the first n_pad tokens are left pads: stored as pad slots,
                                never attended to (0 for none) */
    enum fwd_logits logits;  /* which rows of this sequence want logits */
    /* filled by model_forward: */
    int row0;                /* first row of this sequence in the batch activation */
    int logit_row0;          /* first row of its logits in forward_logits() */
};

struct fwd_batch {
    struct fwd_seq *seqs;
    int n_seq;
    int n_rows;              /* filled: total tokens T */
};

enum {
    MODEL_NEED_ATTN_PROBS = 1u << 0,  /* call attn_probs for every (sequence, layer) */
    MODEL_NEED_HIDDEN_LAST = 1u << 1  /* call hidden_last with the final-norm hidden rows */
};

struct model_hooks {
    void *ctx;
    unsigned needs;
    /* After each layer's residual update.  hidden: backend rows [T][n_embd];
     * sequence s owns rows [seqs[s].row0, + n_tokens).  May modify them (steering)
     * through backend calls.  Return -1 with e set to abort the forward. */
    int (*after_layer)(void *ctx, const struct fwd_batch *b, int layer, float *hidden,
                       struct eb_err *e);
    /* MODEL_NEED_ATTN_PROBS: softmax probabilities of sequence s's new queries at
     * layer, backend [n_head][n_new][cap]; slot j of kv head h is key j of
     * kvcache_k(cache, layer, h).  Return -1 with e set to abort the forward. */
    int (*attn_probs)(void *ctx, const struct fwd_batch *b, int s, int layer, const float *probs,
                      int n_new, int cap, struct eb_err *e);
    /* MODEL_NEED_HIDDEN_LAST: the last layer's output after the final RMSNorm,
     * backend rows [T][n_embd].  Return -1 with e set to fail the forward (the
     * caches have advanced by then). */
    int (*hidden_last)(void *ctx, const struct fwd_batch *b, const float *hidden,
                       struct eb_err *e);
};

struct forward;

/* Scratch for batches of up to max_tokens new tokens and max_logit_rows rows of
 * logits. */
int forward_create(const struct model *m, int max_tokens, int max_logit_rows,
                   struct forward **out, struct eb_err *e);
void forward_free(struct forward *f);
/* Bytes forward_create allocates (backend + host), for memory estimates. */
size_t forward_alloc_bytes(const struct model_config *cfg, int max_tokens, int max_logit_rows);
/* Its backend part, each buffer as a rounding pool takes it (backend_alloc_bytes). */
size_t forward_device_bytes(const struct model_config *cfg, int max_tokens, int max_logit_rows);
/* Backend bytes of the attention probabilities a forward keeps for hooks
 * that observe them (MODEL_NEED_ATTN_PROBS): n_head floats for each of a
 * step's rows and each slot of its sequence's cache, at most `rows` rows
 * of caches of at most max_cap slots. */
size_t forward_probs_bytes(const struct model_config *cfg, int rows, int max_cap);

/* Run the batch: append every new token's K/V to its sequence's cache, advance
 * the caches, and leave the requested logits in forward_logits().  hooks may be
 * NULL.  Fails (nothing appended) if a batch exceeds the scratch sizes or a cache
 * is full. */
int model_forward(struct forward *f, struct fwd_batch *b, const struct model_hooks *hooks,
                  struct eb_err *e);
/* Host logits [rows][n_vocab] of the last model_forward. */
const float *forward_logits(const struct forward *f);
/* on = 1: later forwards leave the logits in backend memory
 * (forward_logits_dev) for a backend that samples there; forward_logits()
 * then holds only rows fetched with forward_logits_row(). */
void forward_logits_stay(struct forward *f, int on);
/* The same rows in backend memory (valid until the next model_forward). */
const float *forward_logits_dev(const struct forward *f);
/* Host copy of logits row `row` of the last model_forward (downloaded now:
 * for a batch run with logits_stay). */
const float *forward_logits_row(struct forward *f, int row);
/* Layers of the last model_forward whose attention input (*in) and rest
 * (*out) the backend ran as one fused block (backend.layer_in/layer_out)
 * rather than as single ops. */
void forward_fused_layers(const struct forward *f, int *in, int *out);

/* A KV cache shaped for this model: f32, or of element type `type`. */
int model_kvcache_create(const struct model *m, int capacity, struct kvcache **out,
                         struct eb_err *e);
int model_kvcache_create_as(const struct model *m, int capacity, enum kv_type type,
                            struct kvcache **out, struct eb_err *e);

#endif
