/* backend.h - the compute backend interface (CPU now, CUDA later).
 *
 * Rule that keeps model/ backend-agnostic: every `float *` tensor argument is
 * backend memory obtained from be->alloc.  model/ may do pointer arithmetic on
 * it (offsets in floats) but never dereferences it; data crosses the boundary
 * only through upload/download.  Small metadata arrays (`const int *`
 * positions, ids, lengths; inv_freq) are HOST memory: a GPU backend copies them
 * itself; the forward pass also uploads each step's ids and positions once
 * (embed_weight_dev, layer_in_args.pos_dev) for the ops that read them there.
 * All activations are f32.  Weights may also live in a typed form
 * (struct weight: f16, bf16 or ggml's quantized blocks) that only the
 * backend reads; see weight_create.  kernels/ knows nothing of models or
 * policies. */
#ifndef EB_BACKEND_H
#define EB_BACKEND_H

#include <stddef.h>

enum rope_pairing {
    ROPE_PAIR_ADJACENT = 0, /* rotate (x[2i], x[2i+1]): llama.cpp NORM, llama-arch GGUF */
    ROPE_PAIR_HALF = 1      /* rotate (x[i], x[i+d/2]): HF rotate_half, qwen2 GGUF (NEOX) */
};

/* Element types of a weight matrix.  The values are ggml's type ids, so a GGUF
 * tensor's type maps one to one; the block layouts are ggml's (kernels/quant.h
 * has their sizes and the dequantizers). */
enum weight_type {
    WEIGHT_F32 = 0,
    WEIGHT_F16 = 1,
    WEIGHT_Q4_0 = 2,
    WEIGHT_Q4_1 = 3,
    WEIGHT_Q5_0 = 6,
    WEIGHT_Q5_1 = 7,
    WEIGHT_Q8_0 = 8,
    WEIGHT_Q4_K = 12,
    WEIGHT_Q5_K = 13,
    WEIGHT_Q6_K = 14,
    WEIGHT_BF16 = 30
};

/* A weight matrix [rows][cols] (rows = outputs, cols = inputs, row-major as
 * in HF and GGUF), in its type's block layout: each row is
 * cols / block_elems blocks.  Created and freed by the backend; model/ reads
 * only the descriptive fields. */
struct weight {
    enum weight_type type;   /* as stored; a backend may compute in another (see `held`) */
    enum weight_type held;   /* the type the backend keeps in its memory */
    int rows, cols;
    size_t row_bytes;        /* bytes of one row in the held type */
    size_t bytes;            /* resident bytes the backend owns for it (0 when borrowed) */
    const void *data;        /* backend memory (or the borrowed host bytes), held type */
    int interleave;          /* 0: row after row; 8: groups of 8 rows side by side (the CPU's
                              * AVX2 layout for Q4_K, cpu_q4k_x8.c); row_bytes is then a
                              * group's bytes / 8 */
    const struct weight *view_of; /* set on a part of a joined weight (weight_join): these
                              * rows live in view_of's memory; NULL otherwise */
    void *impl;              /* backend private */
};

/* Element type of a KV cache.  Activations and queries stay f32 whatever
 * it is; a 16-bit cache is converted on the fly (f32 accumulation).  Values
 * are stable (0 is f32, so a zeroed attn_args reads an f32 cache). */
enum kv_type {
    KV_F32 = 0,
    KV_F16 = 1,   /* IEEE half */
    KV_BF16 = 2   /* bfloat16: the top 16 bits of an f32 */
};
enum { KV_TYPE_COUNT = 3 };

/* "f32", "f16", "bf16" ("?" for anything else). */
const char *kv_type_name(enum kv_type t);
/* 0 and *out set when s names a type (as kv_type_name spells it), else -1. */
int kv_type_parse(const char *s, enum kv_type *out);
/* Bytes of one element (4 or 2); 0 for an unknown type. */
size_t kv_type_bytes(enum kv_type t);

struct attn_args {
    float *out;            /* [n_new][n_head*head_dim] */
    const float *q;        /* [n_new][n_head*head_dim], RoPE already applied */
    const void *k_cache;   /* [n_kv][cap][head_dim] of kv_type, keys stored post-RoPE */
    const void *v_cache;   /* [n_kv][cap][head_dim] of kv_type */
    enum kv_type kv_type;  /* element type of both caches */
    int cap;               /* slots per kv head */
    int n_head, n_kv, head_dim;
    int n_new;             /* queries: the tokens just appended at the end of every kv head */
    const int *kv_len;     /* host [n_kv]: valid slots per kv head, including the n_new new ones.
                              Query i attends slots [0, kv_len[h] - n_new + i] (causal). */
    float scale;           /* usually 1/sqrt(head_dim) */
    float *probs;          /* optional (NULL = skip): [n_head][n_new][cap] softmax probabilities;
                              slots a query cannot see are 0 */
    const unsigned char *slot_mask; /* optional (NULL = none): host [n_kv][cap]; 1 marks a slot
                              no query attends to (a pad): it gets no weight and probability 0.
                              A query that sees only masked slots outputs zeros. */
};

/* ---- layer-granular KV and attention (the decode path) ----
 *
 * One forward pass issues a bounded number of backend calls per layer,
 * whatever the batch size and head count.  The backend keeps a *KV table*: for
 * each slot of a batch, the sequence's cache buffers (per layer, K and V
 * [n_kv][cap][head_dim] of its kv_type), its lengths per (layer, kv head),
 * its pad flags and optionally its query ring.  On a GPU the whole table lives
 * in device memory; the host sends only
 *   - kv_table_bind, when a sequence enters a slot or its cache changed other
 *     than by kv_append (compaction, a direct kvcache_append): the cache's
 *     pointers, lengths and pad flags, once;
 *   - kv_table_step, once per forward pass: per active slot a few ints (where
 *     its new rows are, how many, how many are pads, where its query ring
 *     writes next);
 * and each layer then runs from device state alone:
 *   - kv_append: every new K and V row of every sequence and kv head (and the
 *     queries, into each ring) in one call; the table's lengths grow by the
 *     slot's n_new and the first n_pad new slots are flagged as pads, on the
 *     device, so nothing per head or per sequence crosses the bus;
 *   - attention_layer: the attention of every sequence of the step, with
 *     ragged lengths per sequence and per kv head and the pad masks, in one
 *     call.
 * model/ keeps its own host mirror of lengths and pads (policies read it) and
 * rebinds a slot whenever the mirror changed behind the table's back.
 * kernels/ still knows no model: a table is just slots of (buffers, lengths,
 * flags). */

struct kv_table; /* backend private */

/* kv_table_bind's result when memory (host or device) ran out: the caller
 * reports an out-of-memory (EB_ERR_NOMEM, a point's 'oom'), not a failure. */
enum { KV_TABLE_NOMEM = -2 };

/* A sequence's cache, as kv_table_bind reads it (host struct; buffers are
 * backend memory, lengths and flags host memory, copied by the call). */
struct kv_seq_desc {
    void *const *k, *const *v; /* [n_layer] backend buffers [n_kv][cap][head_dim] of kv_type */
    enum kv_type kv_type;
    int cap;                   /* slots per (layer, kv head) */
    const int *len;            /* host [n_layer][n_kv]: valid slots */
    const unsigned char *pad;  /* host [n_layer][n_kv][cap] pad flags (1 = pad), or NULL: none */
    float *const *q_ring;      /* [n_layer] backend rings of q_window rows of n_head*head_dim
                                  floats, or NULL: no ring */
    int q_window;
};

/* One active slot of a forward pass (kv_table_step). */
struct kv_step_seq {
    int slot;    /* table slot bound to the sequence */
    int row0;    /* its first row in the step's stacked activations (q, k, v, out) */
    int n_new;   /* its new tokens, >= 1 */
    int n_pad;   /* the first n_pad of them are pads, 0 <= n_pad <= n_new */
    int q_next;  /* ring slot its first new query goes to (ignored without a ring) */
};

/* What attention_layer computes (all backend memory but scale). */
struct attn_layer_args {
    int layer;
    float *out;          /* [T][n_head*head_dim], T = the step's stacked rows */
    const float *q;      /* [T][n_head*head_dim], RoPE applied */
    float scale;         /* usually 1/sqrt(head_dim) */
    float *probs;        /* optional (NULL = skip): the step's active sequences one after the
                            other in kv_table_step's order, sequence i taking
                            [n_head][n_new_i][cap_i] floats, as attn_args.probs */
};

/* ---- scoring primitives for eviction policies (kernels/cpu/cpu_score.c) ----
 * kernels/ does not know what a policy is: these are the per-token score
 * vectors a policy combines in plain C.  Each works on one kv head. */

enum score_gqa {
    SCORE_GQA_MAX = 0,  /* max of the group's logits, before the softmax */
    SCORE_GQA_MEAN = 1  /* mean of the group's logits, before the softmax */
};
enum score_pool { SCORE_POOL_MAX = 0, SCORE_POOL_AVG = 1 };

struct window_score_args {
    float *out;               /* [n_cand]: mean over the n_q rows of the softmax probabilities */
    const float *q;           /* [n_q][n_head*head_dim] post-RoPE queries, oldest first; the
                                 last row is the query of key len-1 */
    const float *k;           /* [len][head_dim]: the keys of kv head kv_head */
    int n_head, n_kv, kv_head, head_dim;
    int n_q;                  /* query rows, >= 1 */
    int len;                  /* keys held */
    int n_cand;               /* scored keys are [0, n_cand), 1 <= n_cand <= len */
    int softmax_all;          /* 0: softmax over the candidates only (no mask needed: they
                                 precede every query); 1: over every key row i can see,
                                 [0, len - n_q + i] (causal inside the window) */
    enum score_gqa gqa;       /* how the n_head/n_kv query heads of the group are pooled */
    const unsigned char *pad; /* host [len] or NULL: 1 marks a pad key (probability 0) */
    float scale;              /* usually 1/sqrt(head_dim) */
};

struct redundancy_args {
    float *out;               /* [len]: R = softmax_j(mean_i C[i][j]) */
    const float *k;           /* [len][head_dim] keys of one kv head */
    int len, head_dim;
    float threshold;          /* C[i][j] > threshold counts as similar (0.5) */
    int no_match_zero_col0;   /* reference quirk: a row with no similar key zeroes C[i][0] */
    const unsigned char *pad; /* host [len] or NULL: pad keys count as zero vectors */
};

/* ---- batched eviction (kernels/cpu/cpu_batch.c, kernels/cuda/cuda_batch.cu) ----
 * One compression of many sequences at once.  A *unit* is one (sequence,
 * layer, kv head); an op works on an array of units held in backend memory
 * (written with one upload), so nothing per unit or per head crosses the
 * bus and the number of calls does not depend on the batch.  Each unit's
 * result equals what the per-head primitives above compute for it, bit for
 * bit on the CPU. */

/* What scores a unit's candidates for batch_topk. */
enum batch_score {
    BATCH_SCORE_AGE = 0,   /* z[j] = -j: the oldest first (StreamingLLM's sinks) */
    BATCH_SCORE_IMP = 1,   /* z = imp */
    BATCH_SCORE_MIX = 2,   /* z = lambda * imp - (1 - lambda) * red, in double */
    BATCH_SCORE_KNORM = 3, /* z = -|k_j| (double sum of squares): the lowest norm first */
    BATCH_SCORE_Z = 4      /* z = unit.z: a row of scores in double (a layer's, shared by
                              a run of its kv heads, or a head's written by the caller) */
};

struct score_unit {        /* 96 bytes; every pointer is backend memory */
    const void *k;         /* [len][head_dim] keys of kv_type */
    const float *q;        /* query ring [q_ring][n_head*head_dim] of this layer; row i of
                              the n_q used is ring row (q_first + i) % q_ring, oldest first */
    float *imp;            /* [n_cand] out: window importance (pooled) */
    float *red;            /* [len] out: key redundancy */
    int *keep;             /* [n_select + len - n_cand] out: keep indices */
    double *z;             /* [n_cand] BATCH_SCORE_Z's row: a run's shared score
                              (head_mean_batch, last_query_attn_batch; every unit of the
                              run names the same row) or the caller's; NULL where unused */
    const float *add;      /* [n_cand] or NULL: added to the score (in double) before ranking */
    const unsigned char *pad; /* [len] pad flags (1: a left pad) or NULL (no pads): a
                              copy staged by the caller, so set only for a backend with
                              batch_pads; masked in the window scores, the
                              redundancy and the last query's attention as the
                              per-head primitives mask them, and ranked
                              at +-pad_score by batch_topk where use_pads */
    int kv_type;           /* enum kv_type of k */
    int kv_head, len, n_cand, n_select;
    int n_q, q_ring, q_first;
};

struct score_batch_args {
    const struct score_unit *units; /* backend memory: n_units descriptors */
    int n_units;
    /* head_mean_batch, last_query_attn_batch: the units come in runs of
     * `run` (the kv heads of one layer of one sequence, equal len and
     * n_cand), n_units a multiple of it; each run's z is one row */
    int run;
    int max_len;                    /* >= every unit's len (a device sizes scratch by it) */
    int max_q;                      /* >= every unit's n_q (likewise; 0: not known) */
    int n_head, n_kv, head_dim;
    /* window_scores_batch, as window_score_args, then pooled as pool1d
     * (kernel 1: not pooled); scale as window_score_args.scale */
    float scale;
    int softmax_all;
    enum score_gqa gqa;
    int kernel;
    enum score_pool pool;
    /* key_redundancy_batch, as redundancy_args */
    float threshold;
    int no_match_zero_col0;
    /* batch_topk: z from `score`, plus unit.add where given; keep = the
     * n_select best candidates by score.h's tie rule (higher first, equal:
     * lower index, NaN last), best first or (by_position) ascending, then
     * the window [n_cand, len). */
    enum batch_score score;
    double lambda;
    int by_position;
    /* batch_topk, where use_pads: a pad slot's score is replaced by
     * +pad_score (pad_keep) or -pad_score, after the add (score_apply_pads) */
    int use_pads, pad_keep;
    double pad_score;
    /* batch_topk, where bf16: scores as a bf16 run stores them
     * (policies/score.h, score_dtype=bf16): _IMP and _MIX round imp (and
     * red) to bf16, _MIX then mixes in f32 steps each rounded to bf16
     * (z = bf16(bf16(imp * fl) - bf16(red * fr)), fl and fr lambda and
     * 1 - lambda as floats: policies/rkv.c); every score is then rounded to
     * bf16 after the add, before the pads */
    int bf16;
};

/* One (sequence, kv head) of one layer to compact (kv_gather_batch). */
struct gather_unit {       /* 32 bytes; backend memory */
    float *k, *v;          /* the head's K and V rows, row_words floats each */
    const int *keep;       /* [n_keep]: the rows to keep, in the order they land */
    int n_keep, row_words;
};

/* One row of the optional `sample` op: how model/sampler.c would pick a
 * token from it (greedy, or temperature + top-k + top-p), with the
 * sequence's uniform draw already taken on the host, so a device samples
 * exactly what the CPU would (kernels/cuda/README.md, "Sampling"). */
struct sample_row {
    int greedy;        /* 1: argmax, lowest id on ties; the fields below but n_valid unused */
    float temperature; /* > 0 */
    int top_k;         /* 0: no top-k cut */
    float top_p;       /* (0, 1] */
    int n_valid;       /* candidates are ids [0, min(n_valid, n_vocab)) */
    double u;          /* the sequence's uniform draw in [0, 1) */
};

/* A layer's attention input, fused (backend.layer_in): what
 *   xb = rmsnorm(x, attn_norm); q = xb wq^T + bq; k = ...; v = ...;
 *   [q_norm: rmsnorm of every head of q, of k]; rope(q, pos); rope(k, pos)
 * computes with the single ops, bit for bit.  xb is scratch [rows][n_embd]. */
struct layer_in_args {
    int rows, n_embd, n_head, n_kv, head_dim;
    const float *x, *attn_norm;
    float eps;
    const struct weight *wq, *wk, *wv;
    const float *bq, *bk, *bv;       /* or NULL */
    const float *q_norm, *k_norm;    /* both or neither */
    const int *pos;                  /* host [rows] */
    const float *inv_freq;           /* host [head_dim / 2] */
    enum rope_pairing pairing;
    float *xb, *q, *k, *v;
    /* The same in backend memory, for a backend that reads nothing from the
     * host inside a step (NULL: use the fields above).  wqkv: wq, wk and wv
     * joined (weight_join; the three are its views), bqkv their biases one
     * after the other ([rows of wqkv], bq..bv point into it) or NULL;
     * pos_dev: [rows] positions as int32, written once per step;
     * inv_freq_dev: [head_dim / 2], written once at load; qkv_out:
     * scratch for the joined product, [rows][(n_head + 2 n_kv) head_dim]
     * floats, or NULL. */
    const struct weight *wqkv;
    const float *bqkv;
    const int *pos_dev;
    const float *inv_freq_dev;
    float *qkv_out;
    /* RoPE fused with the KV append: when tab is not NULL, a backend that
     * serves the block also does kv_append(tab, layer, k, v, q) (after
     * kv_table_step), so k and v go to the caches as they are made.  It then
     * returns -1 where kv_append would (the slots must be bound again). */
    struct kv_table *tab;
    int layer;
};

/* The rest of a layer, fused (backend.layer_out): what
 *   x += att wo^T; xb = rmsnorm(x, ffn_norm);
 *   x += down(swiglu(xb gate^T, xb up^T))
 * computes with the single ops (matmul into scratch, then add), bit for bit.
 * xb [rows][n_embd], hb and hb2 [rows][n_ff] are scratch. */
struct layer_out_args {
    int rows, n_embd, n_ff;
    float *x;
    const float *att;
    const struct weight *wo, *w_gate, *w_up, *w_down;
    const float *ffn_norm;
    float eps;
    float *xb, *hb, *hb2;
    /* w_gate and w_up joined (weight_join: gate's rows, then up's; the two
     * are its views), or NULL.  When set, hb has room for rows * 2 * n_ff
     * floats (running into hb2), so a backend may write the joined product
     * [rows][2 n_ff] there. */
    const struct weight *w_gate_up;
};

struct backend {
    const char *name;
    void *impl;

    /* Memory.  alloc returns NULL when out of memory (never aborts). */
    float *(*alloc)(struct backend *be, size_t n_floats);
    void (*free)(struct backend *be, float *p);
    void (*upload)(struct backend *be, float *dst, const float *src_host, size_t n);
    void (*download)(struct backend *be, float *dst_host, const float *src, size_t n);
    void (*copy)(struct backend *be, float *dst, const float *src, size_t n);
    void (*fill)(struct backend *be, float *dst, float value, size_t n);

    /* y[m][n] = x[m][k] . w[n][k]^T (+ bias[n] if bias != NULL).  Weights are
     * row-major [out][in] as in HF and GGUF.  f32 only: model weights go
     * through struct weight and matmul. */
    void (*gemm)(struct backend *be, float *y, const float *x, const float *w,
                 const float *bias, int m, int n, int k);
    /* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for each of `rows` rows of `dim`. y may equal x. */
    void (*rmsnorm)(struct backend *be, float *y, const float *x, const float *w,
                    int rows, int dim, float eps);
    /* Rotate x in place: rows of n_heads*head_dim; row r has position pos[r] (host).
     * Angle of pair i = (float)pos * inv_freq[i] (host, head_dim/2 entries). */
    void (*rope)(struct backend *be, float *x, int rows, int n_heads, int head_dim,
                 const int *pos, const float *inv_freq, enum rope_pairing pairing);
    /* y = silu(gate) * up, elementwise over n. y may equal gate. */
    void (*swiglu)(struct backend *be, float *y, const float *gate, const float *up, size_t n);
    /* y += x elementwise. */
    void (*add)(struct backend *be, float *y, const float *x, size_t n);
    /* y[i] = table[ids[i]] for n rows of dim (ids on host). */
    void (*embed)(struct backend *be, float *y, const float *table, const int *ids, int n, int dim);
    /* y[i] = x[rows[i]] for n rows of dim (rows on host), read-all-first: y may
     * overlap x (a tensor gathered onto itself) and gets what a copy of x would give. */
    void (*gather_rows)(struct backend *be, float *y, const float *x, const int *rows, int n, int dim);
    /* Causal attention of new queries over one sequence's cache (GQA: query head h
     * uses kv head h / (n_head / n_kv)).  The per-sequence form, for tests and
     * one-off callers; model_forward uses attention_layer. */
    void (*attention)(struct backend *be, const struct attn_args *a);

    void (*destroy)(struct backend *be);

    /* ---- typed weights ----
     * weight_create: a weight of `type` [rows][cols] from host bytes in the
     * type's block layout (rows * row bytes of kernels/quant.h).  borrow = 1
     * promises the bytes stay valid and unchanged until weight_free (e.g. a
     * read-only file mapping): a host-memory backend then uses them in place,
     * without a copy.  as_f32 = 1 asks for f32 in memory whatever the type
     * (exact mode).  A backend may hold a type it has no kernels for in
     * another form (w->held says which).  Returns NULL when the type or shape
     * is unsupported (callers check with quant_row_bytes first) or memory runs
     * out. */
    struct weight *(*weight_create)(struct backend *be, enum weight_type type, int rows, int cols,
                                    const void *host, int borrow, int as_f32);
    void (*weight_free)(struct backend *be, struct weight *w);
    /* y[m][rows] = x[m][cols] . W^T (+ bias[rows] if bias != NULL).  Quantized
     * weights may quantize x on the fly (8-bit blocks, as llama.cpp does), so
     * the result is close to, not bitwise equal to, the f32 product. */
    void (*matmul)(struct backend *be, float *y, const float *x, const struct weight *w,
                   const float *bias, int m);
    /* y[i] = row ids[i] of W, dequantized to f32, for n ids (host).  */
    void (*embed_weight)(struct backend *be, float *y, const struct weight *w, const int *ids,
                         int n);
    /* The same with ids in backend memory (int32, uploaded with the step's
     * positions), so a step reads nothing from the host (optional). */
    void (*embed_weight_dev)(struct backend *be, float *y, const struct weight *w,
                             const int *ids_dev, int n);

    /* ---- joined weights (optional; NULL: every projection keeps its own) ----
     * prefers_joined: 1 where products over joined weights are faster (the
     * model then joins at load by default; model_load_opts.join). */
    int prefers_joined;
    /* 1 where the batched eviction ops honour score_unit.pad, so left-padded
     * sequences compress with the batch; 0: they go one at a time */
    int batch_pads;
    /* One weight whose rows are parts[0]'s, then parts[1]'s, ... (all of one
     * held type, cols and layout), so that the projections of one activation
     * (q, k and v; gate and up) are one product.  On success each part
     * becomes a view of its rows in the joined weight (view_of set, bytes 0,
     * its own memory freed); free the parts before the joined weight.
     * NULL, with the parts untouched, when the backend keeps them apart
     * (their types or layouts differ, a row count it cannot split at) or
     * memory ran out. */
    struct weight *(*weight_join)(struct backend *be, struct weight *const *parts, int n);

    /* ---- fused layer blocks (optional) ----
     * One parallel job each, with only the barriers the data needs, instead
     * of one per op.  Return 0 when done, 1 when these weights or sizes are
     * not served (nothing written: the caller runs the single ops), -1 when
     * layer_in_args.tab's append was refused. */
    int (*layer_in)(struct backend *be, const struct layer_in_args *a);
    int (*layer_out)(struct backend *be, const struct layer_out_args *a);
    /* Thread synchronisations since the backend was created (optional):
     * parallel jobs started and barriers passed inside them. */
    void (*thread_syncs)(const struct backend *be, unsigned long *jobs, unsigned long *barriers);

    /* ---- scoring primitives (may be NULL on a backend that lacks them; the
     * policies then fail with a clear error).  Return 0, or -1 on bad
     * arguments or no scratch memory. ---- */
    /* Window attention importance: logits S = q k^T * scale, pooled over the
     * GQA group, softmax (see softmax_all), mean over the n_q rows. */
    int (*window_scores)(struct backend *be, const struct window_score_args *a);
    /* 1-D pooling with stride 1 and padding kernel/2 (kernel odd): max (pads
     * are -inf) or average (pads count as zeros, divided by kernel).  out != in. */
    int (*pool1d)(struct backend *be, float *out, const float *in, int n, int kernel,
                  enum score_pool mode);
    /* Key-key redundancy of one kv head: cosine matrix C of the normalised keys
     * (k / (|k| + 1e-8)) with a zero diagonal; in each row the largest column j
     * with C[i][j] > threshold is zeroed (the most recent near-duplicate is
     * protected); then the column mean over all rows, then a softmax. */
    int (*key_redundancy)(struct backend *be, const struct redundancy_args *a);

    /* ---- value-aware primitives (kernels/cpu/cpu_vscore.c; may be NULL: the
     * policies then compute on downloaded rows) ---- */
    /* out[i] = max_c x[i][c] - min_c x[i][c] for n rows of dim (VaSE's value range). */
    int (*row_range)(struct backend *be, float *out, const float *x, int n, int dim);

    /* ---- sampling in backend memory (optional; NULL: the caller downloads
     * the logits and samples on the host, as the CPU backend does) ----
     * tokens[r] (host) = the token model/sampler.c picks from row r of
     * logits [n_rows][n_vocab] (backend memory) with rows[r], or -1 when
     * that row must be sampled on the host from its logits (non-finite
     * logits, or a nucleus wider than the backend sorts).  0, or -1 on
     * failure. */
    int (*sample)(struct backend *be, int *tokens, const float *logits, int n_rows, int n_vocab,
                  const struct sample_row *rows);

    /* ---- batched eviction (see "batched eviction" above; each may be NULL:
     * callers then select and compact per sequence).  0, or -1 on bad
     * arguments or no memory. ---- */
    /* unit.imp of every unit: window_scores then pool1d. */
    int (*window_scores_batch)(struct backend *be, const struct score_batch_args *a);
    /* unit.red of every unit: key_redundancy. */
    int (*key_redundancy_batch)(struct backend *be, const struct score_batch_args *a);
    /* Each run's z (score_batch_args.run): the mean of its units' imp rows,
     * summed in double in unit order, then divided by run (a per-layer
     * keep-set from per-head scores). */
    int (*head_mean_batch)(struct backend *be, const struct score_batch_args *a);
    /* Each run's z from the last recorded query (ring row q_first + n_q - 1):
     * per unit, every query head of its kv head's group softmaxed over the
     * len keys in double (logit = the double dot product times
     * 1/sqrt(head_dim); a pad slot's logit -inf where unit.pad is given),
     * the group's mean of the candidates [0, n_cand);
     * then the mean over the run's units, as head_mean_batch. */
    int (*last_query_attn_batch)(struct backend *be, const struct score_batch_args *a);
    /* unit.keep of every unit (see score_batch_args). */
    int (*batch_topk)(struct backend *be, const struct score_batch_args *a);
    /* Every unit's K and V rows become rows keep[0, n_keep) in that order.
     * scratch: backend, n_units * unit_floats floats, unit_floats >=
     * n_keep * row_words of every unit (the rows move within their buffer). */
    int (*kv_gather_batch)(struct backend *be, const struct gather_unit *units, int n_units,
                           float *scratch, size_t unit_floats);
    /* Wait for all queued work (timing); NULL on a backend that never queues. */
    void (*sync)(struct backend *be);
    /* ---- the device's clock (optional; NULL on a backend whose ops are done
     * when they return: its host time is its device time) ----
     * time_mark: a point after the work queued so far (the last two are kept).
     * time_device_s: the device's seconds between the last two marks (waits
     * for the later one); 0 before two marks.
     * time_waited_s: the host's seconds blocked on the device (downloads,
     * syncs) since the backend was created.  Instrumentation, not work: a
     * counting wrapper passes them on uncounted. */
    void (*time_mark)(struct backend *be);
    double (*time_device_s)(struct backend *be);
    double (*time_waited_s)(const struct backend *be);

    /* ---- step graphs (optional; NULL where every op is launched on its
     * own, as on the CPU) ----
     * model/forward.c brackets a step's embedding and layers with
     * graph_begin and graph_end, after the step's parameters are in backend
     * memory (kv_table_step, the ids and positions upload).  graph_begin
     * gets the step's shape id (kernels/step_graph.h; 0: not to be recorded:
     * hooks run per layer, or a layer ran single ops) and answers its mode:
     *   STEP_EAGER: the ops run as always;
     *   STEP_CAPTURE: the ops are recorded, not run; graph_end runs the
     *     recording and keeps it;
     *   STEP_REPLAY: the ops are called with the step's arguments as always
     *     but only do their host bookkeeping (room checks, length mirrors);
     *     graph_end replays the recording, one launch.
     * graph_end(ok = 0) after a failed op ends a capture without running it.
     * It returns 0, or -1 when the graph failed to run.  graph_forget drops
     * the recording (owner's buffers freed).  graph_counts: recordings kept,
     * steps replayed, captures discarded (instrumentation). */
    int (*graph_begin)(struct backend *be, const void *owner, unsigned long shape);
    int (*graph_end)(struct backend *be, int ok);
    void (*graph_forget)(struct backend *be);
    void (*graph_counts)(const struct backend *be, unsigned long *captures,
                         unsigned long *replays, unsigned long *discarded);

    /* ---- typed KV caches (may be NULL on a backend with f32 caches only) ----
     * A cache of a 16-bit type is backend memory from alloc (n elements take
     * n * kv_type_bytes / sizeof(float) floats) addressed in its elements.
     * kv_store: row i of dst (dim elements of `type`) = row rows[i] (host
     * index) of the f32 rows src, rounded to nearest even; dst must not
     * overlap src.  kv_load: dst[i] = src[i] as f32, for n elements (exact). */
    void (*kv_store)(struct backend *be, void *dst, enum kv_type type, const float *src,
                     const int *rows, int n, int dim);
    void (*kv_load)(struct backend *be, float *dst, const void *src, enum kv_type type, size_t n);

    /* ---- layer-granular KV and attention (see "layer-granular" above; NULL
     * on a backend without them: model_forward then fails with a clear
     * error).  All return 0, or -1 on bad arguments or no memory. ----
     * kv_table_create: a table of max_seqs slots, all unbound, for caches of
     * n_layer layers of n_kv heads of head_dim, queried by n_head heads. */
    struct kv_table *(*kv_table_create)(struct backend *be, int max_seqs, int n_layer, int n_kv,
                                        int n_head, int head_dim);
    void (*kv_table_free)(struct backend *be, struct kv_table *t);
    /* Slot `slot` now describes d (pointers, lengths, pad flags copied).
     * KV_TABLE_NOMEM when memory for it ran out, -1 on bad arguments or any
     * other failure; after either, bind the slot again before a step uses it. */
    int (*kv_table_bind)(struct backend *be, struct kv_table *t, int slot,
                         const struct kv_seq_desc *d);
    /* The slots of the next forward pass, in batch order (rows ascend with
     * it).  Every slot must be bound, hold the same kv_type, and have room for
     * n_new more slots in every (layer, kv head). */
    int (*kv_table_step)(struct backend *be, struct kv_table *t, int n_seq,
                         const struct kv_step_seq *seqs);
    /* Layer `layer` of every active slot: for each kv head h and new token i,
     * row row0 + i of k and v ([T][n_kv*head_dim] f32, RoPE applied to k) goes
     * to slot len[layer][h] + i in the cache's type (rounded to nearest even);
     * the lengths grow by n_new and the first n_pad new slots are pads.  Where
     * the slot has a query ring and q is not NULL, the last min(n_new, window)
     * rows of q ([T][n_head*head_dim]) go to ring slots q_next + i (mod
     * window), as kvcache_qring_push does. */
    int (*kv_append)(struct backend *be, struct kv_table *t, int layer, const float *k,
                     const float *v, const float *q);
    /* Causal attention of every active slot's new queries over its cache
     * after this layer's kv_append, as `attention` computes it per sequence:
     * query i of a slot sees its slots [0, len - n_new + i] of each kv head
     * except pads.  CPU: one parallel region per layer; a long cache is split
     * across threads by key blocks when there are fewer (sequence, kv head,
     * query) units than threads, merged with the online-softmax rule, in an
     * order that does not depend on the batch or the threads. */
    int (*attention_layer)(struct backend *be, struct kv_table *t,
                           const struct attn_layer_args *a);
};

/* ---- counting wrapper (kernels/backend_count.c) ----
 * A backend that forwards every call to `inner` and counts them: each op
 * called through it adds one (memory, compute and table ops alike).  It
 * takes ownership of inner (destroy frees both).  NULL when out of memory. */
struct backend *backend_count_create(struct backend *inner);
/* Calls counted so far on a counting backend; 0 on any other backend (so a
 * caller may ask any backend). */
unsigned long long backend_count_calls(const struct backend *be);

/* ---- memory tally (kernels/backend_tally.c) ----
 * A backend whose alloc/free count bytes, each allocation rounded up to
 * BACKEND_ALLOC_ALIGN as the CUDA device pool rounds it: the evidence that
 * generate's memory plan covers what a generate allocates
 * (tests/test_memplan.c).  Over `inner` it forwards every op (and owns
 * inner); with inner NULL it is tally-only: allocations reserve address
 * space but never touch memory, every op does nothing and downloads read
 * zeros, so a 7B-shaped batch can be planned without 7B of anything.  NULL
 * when out of memory. */
enum { BACKEND_ALLOC_ALIGN = 256 };
/* What alloc(n_floats) takes of a pool that rounds every block up to
 * BACKEND_ALLOC_ALIGN: the unit of every memory plan. */
static inline size_t backend_alloc_bytes(size_t n_floats)
{
    size_t bytes = (n_floats ? n_floats : 1) * sizeof(float);
    return (bytes + BACKEND_ALLOC_ALIGN - 1) / BACKEND_ALLOC_ALIGN * BACKEND_ALLOC_ALIGN;
}
struct backend_tally_usage {
    size_t live, peak; /* bytes allocated now, and at most since the last reset */
    long allocs;       /* allocations since the last reset */
};
struct backend *backend_tally_create(struct backend *inner);
/* Zeros on a backend that is not a tally. */
struct backend_tally_usage backend_tally_read(const struct backend *be);
void backend_tally_reset_peak(struct backend *be);

/* The CPU backend (its own thread pool, OpenBLAS for f32).  n_threads <= 0: every CPU
 * this process may run on.
 * Quantized matmul picks AVX-512 / AVX2 / scalar kernels from CPUID;
 * EVICTBENCH_CPU_SIMD=scalar (or avx2) in the environment caps the choice.
 * For tests, EVICTBENCH_CPU_FAIL_BIND=N (N >= 1) makes the backend's Nth
 * kv_table_bind fail as if its allocation failed (KV_TABLE_NOMEM). */
struct backend *backend_cpu_create(int n_threads);

#endif
