/* hfconfig.c - config.json and generation_config.json of HF checkpoints. */
#include "hfconfig.h"

#include "../util/json_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM_MAX (1 << 20) /* no dimension of a model in scope comes near */

cJSON *hf_json_load(const char *path, struct eb_err *e)
{
    return eb_json_load(path, e);
}

/* Integer field: absent or null -> def (or an error when required). */
static int get_int(const cJSON *root, const char *key, int required, int def, int min, int max,
                   int *out, const char *name, struct eb_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (required) return eb_fail(e, "%s: missing field %s", name, key);
        *out = def;
        return 0;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1e300;
    if (!(d >= min && d <= max) || (double)(long long)d != d)
        return eb_fail(e, "%s: field %s must be an integer in [%d, %d]", name, key, min, max);
    *out = (int)d;
    return 0;
}

static int get_num(const cJSON *obj, const char *key, int required, double def, double *out,
                   const char *name, struct eb_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        if (required) return eb_fail(e, "%s: missing field %s", name, key);
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v)) return eb_fail(e, "%s: field %s must be a number", name, key);
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *root, const char *key, int def, int *out, const char *name,
                    struct eb_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) return eb_fail(e, "%s: field %s must be true or false", name, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

void model_config_add_eos(struct model_config *cfg, int id)
{
    int cap = (int)(sizeof cfg->eos_ids / sizeof cfg->eos_ids[0]);
    if (id < 0) return;
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_ids[i] == id) return;
    if (cfg->n_eos < cap) cfg->eos_ids[cfg->n_eos++] = id;
}

/* "eos_token_id": int, list of ints, or null. */
static int parse_eos(const cJSON *root, struct model_config *cfg, const char *name,
                     struct eb_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsArray(v)) {
        const cJSON *x;
        cJSON_ArrayForEach(x, v) {
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > DIM_MAX * 16.0)
                return eb_fail(e, "%s: eos_token_id entries must be token ids", name);
            model_config_add_eos(cfg, (int)x->valuedouble);
        }
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > DIM_MAX * 16.0)
        return eb_fail(e, "%s: eos_token_id must be a token id or a list of them", name);
    model_config_add_eos(cfg, (int)v->valuedouble);
    return 0;
}

/* rope_scaling (or rope_parameters): null, "default", "linear" or "llama3". */
static int parse_rope_scaling(const cJSON *rs, struct model_config *cfg, const char *name,
                              struct eb_err *e)
{
    if (!rs || cJSON_IsNull(rs)) return 0;
    if (!cJSON_IsObject(rs)) return eb_fail(e, "%s: rope_scaling must be an object or null", name);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!t || cJSON_IsNull(t)) return 0;
    if (!cJSON_IsString(t)) return eb_fail(e, "%s: rope_scaling type must be a string", name);
    const char *type = t->valuestring;
    if (strcmp(type, "default") == 0) return 0;

    double factor;
    if (get_num(rs, "factor", 1, 0, &factor, name, e) != 0) return -1;
    if (!(factor >= 1.0 && factor <= 1e6))
        return eb_fail(e, "%s: rope_scaling factor %g is out of range", name, factor);
    cfg->rope_scaling.factor = (float)factor;
    if (strcmp(type, "linear") == 0) {
        cfg->rope_scaling.type = ROPE_SCALING_LINEAR;
        return 0;
    }
    if (strcmp(type, "llama3") != 0)
        return eb_fail(e, "%s: rope_scaling type '%.40s' is not supported (llama3, linear)", name,
                       type);
    double lo, hi;
    int orig;
    if (get_num(rs, "low_freq_factor", 1, 0, &lo, name, e) != 0 ||
        get_num(rs, "high_freq_factor", 1, 0, &hi, name, e) != 0 ||
        get_int(rs, "original_max_position_embeddings", 1, 0, 1, 1 << 30, &orig, name, e) != 0)
        return -1;
    if (!(lo > 0 && hi > lo && hi < 1e6))
        return eb_fail(e, "%s: rope_scaling needs 0 < low_freq_factor < high_freq_factor", name);
    cfg->rope_scaling.type = ROPE_SCALING_LLAMA3;
    cfg->rope_scaling.low_freq_factor = (float)lo;
    cfg->rope_scaling.high_freq_factor = (float)hi;
    cfg->rope_scaling.original_ctx = orig;
    return 0;
}

static int parse_config(const cJSON *root, const char *name, struct model_config *cfg,
                        struct eb_err *e)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->bos_id = -1;
    if (!cJSON_IsObject(root)) return eb_fail(e, "%s: not a JSON object", name);

    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!mt) return eb_fail(e, "%s: missing field model_type", name);
    if (!cJSON_IsString(mt)) return eb_fail(e, "%s: model_type must be a string", name);
    int default_ctx;
    if (strcmp(mt->valuestring, "llama") == 0) {
        cfg->arch = ARCH_LLAMA;
        default_ctx = 2048;
    } else if (strcmp(mt->valuestring, "qwen2") == 0) {
        cfg->arch = ARCH_QWEN2;
        default_ctx = 32768;
    } else if (strcmp(mt->valuestring, "qwen3") == 0) {
        cfg->arch = ARCH_QWEN3;
        default_ctx = 32768;
    } else {
        return eb_fail(e, "%s: model_type '%.40s' is not supported (llama, qwen2, qwen3)", name,
                       mt->valuestring);
    }

    if (get_int(root, "hidden_size", 1, 0, 1, DIM_MAX, &cfg->n_embd, name, e) != 0 ||
        get_int(root, "intermediate_size", 1, 0, 1, DIM_MAX, &cfg->n_ff, name, e) != 0 ||
        get_int(root, "num_hidden_layers", 1, 0, 1, 4096, &cfg->n_layer, name, e) != 0 ||
        get_int(root, "num_attention_heads", 1, 0, 1, 4096, &cfg->n_head, name, e) != 0 ||
        get_int(root, "num_key_value_heads", 0, cfg->n_head, 1, 4096, &cfg->n_head_kv, name, e) != 0 ||
        get_int(root, "vocab_size", 0, 0, 1, 1 << 24, &cfg->n_vocab, name, e) != 0 ||
        get_int(root, "max_position_embeddings", 0, default_ctx, 1, 1 << 30, &cfg->n_ctx_train,
                name, e) != 0)
        return -1;
    if (cfg->n_head % cfg->n_head_kv != 0)
        return eb_fail(e, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                       name, cfg->n_head, cfg->n_head_kv);
    int def_hd = cfg->n_embd / cfg->n_head;
    if (get_int(root, "head_dim", 0, def_hd, 1, 4096, &cfg->head_dim, name, e) != 0) return -1;
    if (cfg->head_dim < 2 || cfg->head_dim % 2 != 0)
        return eb_fail(e, "%s: head_dim %d must be even (hidden_size %d / heads %d)", name,
                       cfg->head_dim, cfg->n_embd, cfg->n_head);
    cfg->rope_dims = cfg->head_dim;

    double eps;
    if (get_num(root, "rms_norm_eps", 0, 1e-6, &eps, name, e) != 0) return -1;
    if (!(eps > 0 && eps < 1)) return eb_fail(e, "%s: rms_norm_eps %g is out of range", name, eps);
    cfg->rms_eps = (float)eps;

    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0))
        return eb_fail(e, "%s: hidden_act must be \"silu\"", name);
    int sliding;
    if (get_bool(root, "use_sliding_window", 0, &sliding, name, e) != 0) return -1;
    if (sliding) return eb_fail(e, "%s: sliding-window attention is not supported", name);

    /* rope_theta at top level, or inside rope_parameters (which may also carry
     * the scaling type and factors). */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp))
        return eb_fail(e, "%s: rope_parameters must be an object", name);
    double theta;
    if (get_num(root, "rope_theta", 0, 10000.0, &theta, name, e) != 0) return -1;
    if (cJSON_IsObject(rp) && cJSON_GetObjectItemCaseSensitive(rp, "rope_theta") &&
        get_num(rp, "rope_theta", 1, 0, &theta, name, e) != 0)
        return -1;
    if (!(theta > 1 && theta < 1e12)) return eb_fail(e, "%s: rope_theta %g is out of range", name, theta);
    cfg->rope_theta = theta;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) rs = cJSON_IsObject(rp) ? rp : NULL;
    if (parse_rope_scaling(rs, cfg, name, e) != 0) return -1;

    if (get_bool(root, "tie_word_embeddings", 0, &cfg->tied_embeddings, name, e) != 0) return -1;
    int attn_bias;
    if (get_bool(root, "attention_bias", 0, &attn_bias, name, e) != 0) return -1;
    cfg->has_qkv_bias = cfg->arch == ARCH_QWEN2 ? 1 : attn_bias; /* Qwen2: bias=True, hard-coded */
    cfg->has_qk_norm = cfg->arch == ARCH_QWEN3;
    cfg->qk_permuted = 0;

    if (get_int(root, "bos_token_id", 0, -1, 0, DIM_MAX * 16, &cfg->bos_id, name, e) != 0) return -1;
    return parse_eos(root, cfg, name, e);
}

int hfconfig_parse(const char *json, size_t len, const char *name, struct model_config *cfg,
                   struct eb_err *e)
{
    /* NUL-terminated copy: the input need not be. */
    char *buf = eb_malloc(len + 1, e);
    if (!buf) return eb_wrap(e, name);
    memcpy(buf, json, len);
    buf[len] = '\0';
    cJSON *root = cJSON_ParseWithOpts(buf, NULL, 1);
    free(buf);
    if (!root) return eb_fail(e, "%s: malformed JSON", name);
    int rc = parse_config(root, name, cfg, e);
    cJSON_Delete(root);
    return rc;
}

int hfconfig_load(const char *path, struct model_config *cfg, struct eb_err *e)
{
    cJSON *root = hf_json_load(path, e);
    if (!root) return -1;
    int rc = parse_config(root, path, cfg, e);
    cJSON_Delete(root);
    return rc;
}

int hfconfig_load_generation(const char *path, struct model_config *cfg, struct eb_err *e)
{
    cJSON *root = hf_json_load(path, e);
    if (!root) return -1;
    int rc = 0;
    if (!cJSON_IsObject(root))
        rc = eb_fail(e, "%s: not a JSON object", path);
    else
        rc = parse_eos(root, cfg, path, e);
    cJSON_Delete(root);
    return rc;
}
