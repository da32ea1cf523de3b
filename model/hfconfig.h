/* hfconfig.h - Hugging Face config.json (llama, qwen2, qwen3) -> struct model_config.
 *
 * Defaults follow transformers' config classes: num_key_value_heads = heads,
 * head_dim = hidden / heads, rope_theta = 10000, rms_norm_eps = 1e-6,
 * tie_word_embeddings = false.  rope_theta and the scaling may also come as
 * "rope_parameters" (newer transformers).  Qwen2 always has q/k/v biases;
 * llama and qwen3 have them when "attention_bias" is true; qwen3 has q/k norms.
 * The result has qk_permuted = 0 (HF half-split Q/K layout).  n_vocab is
 * vocab_size from the file; the model loader checks it against the weights. */
#ifndef EB_HFCONFIG_H
#define EB_HFCONFIG_H

#include <stddef.h>

#include "../util/err.h"
#include "modelfile.h"

typedef struct cJSON cJSON;

/* Parse config.json text; name is used in error messages
 * ("<name>: missing field hidden_size"). */
int hfconfig_parse(const char *json, size_t len, const char *name, struct model_config *cfg,
                   struct eb_err *e);
int hfconfig_load(const char *path, struct model_config *cfg, struct eb_err *e);

/* Add the eos ids of a generation_config.json ("eos_token_id": int or list) to
 * cfg, skipping ids already there. */
int hfconfig_load_generation(const char *path, struct model_config *cfg, struct eb_err *e);

/* Add one id to cfg->eos_ids unless present (silently ignores a full list). */
void model_config_add_eos(struct model_config *cfg, int id);

/* util/json_file.h's eb_json_load: read and parse a small JSON file (at most
 * 64 MB); NULL with e set on failure.  The caller frees with cJSON_Delete. */
cJSON *hf_json_load(const char *path, struct eb_err *e);

#endif
