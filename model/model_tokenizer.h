/* model_tokenizer.h - the tokenizer that belongs to a model file: GGUF metadata
 * for .gguf files, tokenizer.json beside config.json for Hugging Face directories. */
#ifndef EB_MODEL_TOKENIZER_H
#define EB_MODEL_TOKENIZER_H

#include "modelfile.h"
#include "tokenizer.h"

int model_file_tokenizer(const struct model_file *mf, struct tokenizer **out, struct eb_err *e);

#endif
