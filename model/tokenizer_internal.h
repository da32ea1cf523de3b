/* tokenizer_internal.h - the tokenizer's insides, shared by the code that
 * builds it (tokenizer_gguf.c, tokenizer_json.c) and the code that runs it
 * (tokenizer.c).  Not for use outside model/. */
#ifndef EB_TOKENIZER_INTERNAL_H
#define EB_TOKENIZER_INTERNAL_H

#include "bpe.h"
#include "pretok.h"
#include "tokenizer.h"

/* GGUF token types (tokenizer.ggml.token_type). */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4,
       TOKEN_UNUSED = 5, TOKEN_BYTE = 6 };

struct tokenizer {
    struct bpe bpe;
    int *type;                 /* [n_vocab] */
    unsigned char **raw;       /* [n_vocab] bytes a token decodes to */
    int *raw_len;
    enum pretok_kind pre;
    char pre_name[32];
    int nfc;                   /* NFC-normalize text outside added tokens */
    int ignore_merges;
    int bos, eos;
    /* Added tokens (control / user-defined) sorted by first byte, then longest
     * first; added_first[c] .. added_first[c+1] is the run starting with byte c. */
    int *added;
    int n_added;
    int added_first[257];
};

/* Allocate a tokenizer of n_vocab tokens, all of type TOKEN_UNUSED and no text. */
int tok_create(int n_vocab, int n_merges_hint, struct tokenizer **out, struct eb_err *e);
/* Pre-tokenizer by its llama.cpp name; -1 (e set) for a name we do not know. */
int tok_set_pre(struct tokenizer *t, const char *name, struct eb_err *e);
/* After all tokens, merges and types are in: decode table and added-token index. */
int tok_finish(struct tokenizer *t, struct eb_err *e);

#endif
