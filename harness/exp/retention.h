/* retention.h - the token-retention record: for every position of a
 * sequence (prompt and generated) and every (layer, KV head) cache, the
 * decode step at which the position left that cache, or 0 when it never did.
 *
 * policy_glue notes each compaction here (retention_evict, before the slots
 * move); the runner encodes a finished sequence into one blob per sample
 * (retention_encode), stored in the `retention` table (results/schema.sql
 * documents the format).  Steps count sampled tokens: step k is the selection
 * that follows the k-th sampled token (1 = the prefill's). */
#ifndef EB_RETENTION_H
#define EB_RETENTION_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

struct kvcache;
struct tokenizer;

/* The blob's encoding, stored with it. */
#define RETENTION_ENCODING "zlib-u32le-head-major-v1"

struct retention_seq {
    int n_prompt;            /* real prompt tokens (left pads excluded) */
    int n_pos;               /* positions seen: 1 + the largest recorded */
    int cap_pos;
    uint32_t *step;          /* [cap_pos][n_heads], position-major while recording */
};

struct retention {
    int n_heads;             /* n_layer * n_kv */
    int n_kv;
    struct retention_seq *seqs;
    int n_seqs;
    double cost_s;           /* wall time spent recording */
};

int retention_create(int n_layer, int n_kv, struct retention **out, struct eb_err *e);
void retention_free(struct retention *r);

/* A new sequence seq with n_prompt real prompt tokens (forgets the old one). */
int retention_begin(struct retention *r, int seq, int n_prompt, struct eb_err *e);

/* Before kvcache_compact(c, layer, kv_head, keep, n_keep): every real
 * (non-pad) slot of that head not in keep leaves it at step. */
int retention_evict(struct retention *r, int seq, const struct kvcache *c, int layer, int kv_head,
                    const int *keep, int n_keep, int step, struct eb_err *e);

/* One sample's record. */
struct retention_blob {
    int n_layer, n_kv, n_prompt, n_positions;
    int64_t n_evicted_slots;     /* (position, head) pairs with a step */
    int64_t n_evicted_tokens;    /* positions gone from every head */
    int max_step;
    unsigned char *steps;        /* zlib of uint32 LE [n_heads][n_positions] */
    size_t steps_len;
    unsigned char *token_bytes;  /* zlib of uint16 LE per generated token: its bytes in
                                    the sample's text; NULL: they do not add up */
    size_t token_bytes_len;
};

/* Encode sequence seq with n_gen generated tokens (positions n_prompt ..
 * n_prompt + n_gen - 1).  tok may be NULL (no token_bytes); text_len is the
 * length of the decoded text they must add up to. */
int retention_encode(struct retention *r, int seq, int n_gen, const struct tokenizer *tok,
                     const int *tokens, size_t text_len, struct retention_blob *out,
                     struct eb_err *e);
void retention_blob_free(struct retention_blob *b);

/* The inverse of the steps field: n_heads * n_positions uint32 (malloc'd). */
int retention_decode_steps(const unsigned char *z, size_t len, size_t n_values, uint32_t **out,
                           struct eb_err *e);
/* The inverse of token_bytes: n uint16 as int (malloc'd). */
int retention_decode_token_bytes(const unsigned char *z, size_t len, size_t n, int **out,
                                 struct eb_err *e);

#endif
