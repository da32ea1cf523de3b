/* model_view.h - what policies/ sees of a model, filled here from model/:
 * policies/ includes no model/ header (make lint checks it), so harness/,
 * which knows both, hands each policy these views (policies/policy.h's
 * struct policy_model). */
#ifndef EB_MODEL_VIEW_H
#define EB_MODEL_VIEW_H

#include <stddef.h>

#include "model/modelfile.h"
#include "model/tokenizer.h"
#include "policies/policy.h"
#include "policies/sentences.h"
#include "util/err.h"

/* The view of tok (not NULL) for policy_model.text; it points at tok, which
 * must outlive it. */
struct token_text token_text_of(const struct tokenizer *tok);

/* sent_tokens_from_text on tok's view (calibrate, the tests). */
int sent_tokens_from_tokenizer(const struct tokenizer *tok, int check_space,
                               struct sent_tokens *out, struct eb_err *e);

/* A one-line identity of a model's architecture and shape (architecture,
 * layers, hidden size, heads, vocabulary), known before its weights load:
 * policy_model.model_identity, which a steering vector must match
 * (policies/steering.h).  Two fine-tunes of one architecture share it: a
 * vector's `model` name is what tells them apart for a reader. */
int steering_model_identity(const struct model_config *c, char *out, size_t cap,
                            struct eb_err *e);

#endif
