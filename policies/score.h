/* score.h - what the policies share: per-token scores from the backend
 * primitives brought to the host, their combination and top-k selection in
 * plain C, pad handling, and per-sequence state tables.
 *
 * Tie rule (everywhere, and in tools/golden/policies_ref.py): among equal
 * scores the LOWER slot index ranks first; NaN ranks below everything. */
#ifndef EB_POLICY_SCORE_H
#define EB_POLICY_SCORE_H

#include "policy.h"

/* How pad slots (cache_view.pad) are treated by a scoring policy. */
enum pad_policy {
    PAD_KEEP = 0,        /* SkipKV code: final score +100, always kept, they use budget */
    PAD_EVICT_FIRST = 1  /* final score -100: evicted before any real token */
};
#define PAD_CHOICES "keep|evict-first"
/* Every real score lies in [-1, 1] for the windowed policies; H2O's sums can
 * grow larger, so it uses +/-PAD_SCORE_H2O. */
#define PAD_SCORE 100.0
#define PAD_SCORE_H2O 1e30

/* Host and backend scratch of one policy instance, grown on demand. */
struct score_buf {
    struct backend *be;
    float *dev;          /* backend: two rows of dev_cap floats */
    size_t dev_cap;
    float *host;         /* host: dev_cap floats */
    struct score_pair { double s; int i; } *pairs;
    int pairs_cap;
    float *rows;         /* host: downloaded key / query rows (score_host.c) */
    size_t rows_cap;
    double *work;        /* host: work_cap doubles */
    int work_cap;
};

void score_buf_free(struct score_buf *b);

/* Options of the §1.3 importance primitive. */
struct importance_opts {
    int window;          /* query rows used: the last `window` of cache_view.q */
    int softmax_all;     /* 0: softmax over the candidates only; 1: causal over all keys */
    enum score_gqa gqa;
    int kernel;          /* pooling kernel (odd); 1: no pooling */
    enum score_pool pool;
};

/* The backend's window attention arguments for the candidates [0, n_cand) of
 * (layer, kv head) seen by the last `rows` recorded queries, into out:
 * softmax over the candidates, scale 1/sqrt(head_dim), gqa as 0 (max); a
 * caller changes what differs. */
struct window_score_args score_window_args(const struct cache_view *cv, int layer, int kv_head,
                                          int rows, int n_cand, float *out);
/* Importance of the candidates [0, n_cand) of (layer, kv head) into out. */
int score_importance(struct score_buf *b, const struct cache_view *cv, int layer, int kv_head,
                     const struct importance_opts *o, int n_cand, double *out, struct eb_err *e);

/* R-KV redundancy (§5.2) of every slot [0, len) of (layer, kv head) into out. */
int score_redundancy(struct score_buf *b, const struct cache_view *cv, int layer, int kv_head,
                     float threshold, int no_match_zero_col0, double *out, struct eb_err *e);

/* Scores from rows brought to the host (score_host.c), for scorers no
 * backend primitive serves:
 *   L2 norm of each key [0, n) of (layer, kv head) into out; */
int score_key_norms(struct score_buf *b, const struct cache_view *cv, int layer, int kv_head,
                    int n, double *out, struct eb_err *e);
/*   the last recorded query's attention, each query head of the kv head's
 *   group softmaxed over all its slots (pads masked), the group's mean, for
 *   the candidates [0, n_cand) into out (TOVA's score, kvpress). */
int score_last_query_attn(struct score_buf *b, const struct cache_view *cv, int layer,
                          int kv_head, int n_cand, double *out, struct eb_err *e);

/*   (layer, kv head)'s first n keys, and its values when v is not NULL, as
 *   host rows [n][head_dim] in b (valid until b's next use), with b->work
 *   holding at least n doubles for the caller; -1 with e set when the cache
 *   exposes no such rows (KeyDiff, LagKV, Expected Attention). */
int score_host_kv(struct score_buf *b, const struct cache_view *cv, int layer, int kv_head,
                  int n, const float **k, const float **v, struct eb_err *e);

/* Replace the scores of pad slots: +pad_score (keep) or -pad_score (evict first). */
void score_apply_pads(double *z, int n, const unsigned char *pad, enum pad_policy pp,
                      double pad_score);

/* The order a keep-set leaves the cache in.  The released code of R-KV,
 * SnapKV, H2O (R-KV's baseline) and SkipKV gathers the kept slots in
 * torch.topk order (best score first) and appends the window, so the next
 * compression's pooling runs over neighbours in that order; sorting by
 * position is the spec's reading (cache_order=position). */
enum keep_order {
    KEEP_BY_SCORE = 0,   /* best first (tie rule above), then the window */
    KEEP_BY_POSITION = 1 /* ascending slot index */
};
#define KEEP_ORDER_CHOICES "score|position"

/* compat=released: what the released scripts carry from one sample to the
 * next (policy_info.divide_carry_*): R-KV's modeling.py never resets its
 * token count, so the step flag and the count run on; SkipKV's
 * reset_for_new_sample resets the count but not the flag.  A later sample's
 * prefill then compresses only if the previous sample's last forward left the
 * count divisible by divide_length.  none (default): each sequence afresh. */
#define COMPAT_CHOICES "none|released"

/* Average pooling with an odd kernel, stride 1 and kernel/2 zero padding
 * that counts in the mean (PyTorch AvgPool1d's default), on host scores;
 * out != in.  The one host pooling (VaSE, RPC, BeaconKV). */
void score_avg_pool(const double *in, int n, int kernel, double *out);
/* The same in place through tmp[n]; kernel <= 1 leaves s as it is. */
void score_avg_pool_inplace(double *s, double *tmp, int n, int kernel);

/* The one comparator of the tie rule above, for qsort over struct score_pair
 * (vase_rules.c, vase_attnv.c and evict_rng.c rank with it too). */
int score_pair_cmp(const void *a, const void *b);

/* The k highest of s[0..n) (tie rule above), written to idx in ascending
 * index order.  0 <= k <= n. */
int score_topk(struct score_buf *b, const double *s, int n, int k, int *idx, struct eb_err *e);
/* The same, written best first. */
int score_topk_ranked(struct score_buf *b, const double *s, int n, int k, int *idx,
                      struct eb_err *e);

/* The usual keep-set of a head: topk(z[0..n_cand), n_select) in the given
 * order, then the window [n_cand, len) ascending; returns n_select + len - n_cand. */
int score_keep_topk_window(struct score_buf *b, const double *z, int n_cand, int len,
                           int n_select, enum keep_order order, int *keep, struct eb_err *e);

/* Per-sequence state, by sequence id. */
struct seq_table {
    void **state;
    int cap;
};
/* The slot of seq (grown as needed), or NULL with e set. */
void **seq_table_slot(struct seq_table *t, int seq, struct eb_err *e);
/* A new sequence (begin_sequence): seq's slot holds size zero bytes, what it
 * held before freed by free_state (may be NULL for none).  NULL with e set. */
void *seq_table_fresh(struct seq_table *t, int seq, size_t size, void (*free_state)(void *),
                      struct eb_err *e);
void *seq_table_get(const struct seq_table *t, int seq);
/* End seq: free its state (free_state may be NULL for none) and clear the
 * slot.  An id never begun or out of range is a no-op. */
void seq_table_drop(struct seq_table *t, int seq, void (*free_state)(void *));
void seq_table_free(struct seq_table *t, void (*free_state)(void *));

/* Precision the scores are combined in.  The released R-KV/SnapKV/H2O code
 * runs the model in bf16: the window importance, the redundancy and their
 * mix are bf16 tensors, so many scores tie.  SCORE_BF16 rounds those three
 * to bf16 (round to nearest even) as the released code stores them; the
 * logits stay f32.  Ties then follow the tie rule above (torch.topk leaves
 * the order of equal scores unspecified, on CPU as on GPU). */
enum score_dtype { SCORE_F32 = 0, SCORE_BF16 = 1 };
#define SCORE_DTYPE_CHOICES "f32|bf16"

/* x rounded to bf16 (nearest, ties to even), as a double. */
double score_bf16(double x);
/* Every x[0..n) through score_bf16 when dt is SCORE_BF16. */
void score_round(double *x, int n, enum score_dtype dt);

/* Fails with a clear message when the backend lacks a primitive. */
int score_check_backend(const struct backend *be, int need_redundancy, struct eb_err *e);

#endif
