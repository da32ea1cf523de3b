/* model_view.c - the views of a model policies/ reads (model_view.h). */
#include "harness/exp/model_view.h"

#include <stdio.h>

static int text_encode(const void *self, const char *text, size_t len, int **ids, int *n_ids,
                       struct eb_err *e)
{
    return tokenizer_encode(self, text, len, 0, ids, n_ids, e);
}

static const char *text_token_bytes(const void *self, int id, size_t *len)
{
    return tokenizer_token_bytes(self, id, len);
}

static int text_find(const void *self, const char *token)
{
    return tokenizer_find(self, token);
}

struct token_text token_text_of(const struct tokenizer *tok)
{
    return (struct token_text){.self = tok, .n_vocab = tokenizer_n_vocab(tok),
                               .encode = text_encode, .token_bytes = text_token_bytes,
                               .find = text_find};
}

int sent_tokens_from_tokenizer(const struct tokenizer *tok, int check_space,
                               struct sent_tokens *out, struct eb_err *e)
{
    struct token_text tt = token_text_of(tok);
    return sent_tokens_from_text(&tt, check_space, out, e);
}

int steering_model_identity(const struct model_config *c, char *out, size_t cap,
                            struct eb_err *e)
{
    int n = snprintf(out, cap, "%s layers=%d embd=%d ff=%d heads=%d/%d head_dim=%d vocab=%d",
                     model_arch_name(c->arch), c->n_layer, c->n_embd, c->n_ff, c->n_head,
                     c->n_head_kv, c->head_dim, c->n_vocab);
    if (n < 0 || (size_t)n >= cap) return eb_fail(e, "steering: model identity does not fit");
    return 0;
}
