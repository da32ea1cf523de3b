/* bpe.h - byte-level BPE: the vocabulary index, the merge table and the
 * merge loop for one pre-token.
 *
 * Vocabulary strings are kept in GPT-2's byte-to-unicode form (space is
 * U+0120 'Ġ', ...), as tokenizer.json and GGUF store them; the merge loop
 * works on symbol ids, starting from one symbol per input byte. */
#ifndef EB_BPE_H
#define EB_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

struct bpe {
    int n_vocab;
    char **text;         /* [n_vocab] vocab form, NUL-terminated (NULL = hole) */
    int *text_len;       /* [n_vocab] */
    int32_t *vocab_slot; /* open addressing: vocab form -> id, -1 empty */
    size_t vocab_mask;
    uint64_t *merge_key; /* open addressing: (left << 32 | right) + 1, 0 empty */
    int32_t *merge_rank;
    int32_t *merge_result;
    size_t merge_mask;
    int n_merges;
    int byte_id[256];    /* id of the single-byte token of each byte, -1 if none */
    unsigned char byte_utf8[256][3]; /* vocab form of each byte (UTF-8, 1 or 2 bytes) */
    unsigned char byte_utf8_len[256];
};

/* The GPT-2 byte-to-unicode map: code point standing for byte b, and the
 * inverse (byte of code point cp, or -1 if cp stands for no byte). */
unsigned int bpe_byte_to_cp(unsigned char b);
int bpe_cp_to_byte(unsigned int cp);

int bpe_init(struct bpe *b, int n_vocab, int n_merges_hint, struct eb_err *e);
void bpe_free(struct bpe *b);
/* Set token id's vocab-form text (copied).  Call before bpe_index_vocab. */
int bpe_set_token(struct bpe *b, int id, const char *s, size_t len, struct eb_err *e);
/* Build the vocab hash and the byte table once all tokens are set.
 * Duplicate strings keep their lowest id. */
int bpe_index_vocab(struct bpe *b, struct eb_err *e);
/* Id of the vocab-form string, or -1. */
int bpe_lookup(const struct bpe *b, const char *s, size_t len);
/* Add the merge "left right" with the next rank (call in rank order). */
int bpe_add_merge(struct bpe *b, const char *left, size_t llen, const char *right, size_t rlen,
                  struct eb_err *e);

/* Reusable scratch memory for bpe_encode_word. */
struct bpe_scratch {
    int32_t *id, *prev, *next;
    struct bpe_cand *heap;
    char *mapped;
    size_t cap, heap_cap, mapped_cap;
};
void bpe_scratch_free(struct bpe_scratch *sc);

/* Encode one pre-token (raw bytes) and append its ids to (*ids)[*n..], growing
 * *ids (capacity *cap).  ignore_merges: emit the whole pre-token as one id when
 * it is itself in the vocabulary (Llama 3). */
int bpe_encode_word(const struct bpe *b, const unsigned char *raw, size_t len, int ignore_merges,
                    struct bpe_scratch *sc, int **ids, size_t *n, size_t *cap, struct eb_err *e);

#endif
