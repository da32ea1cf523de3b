/* test_modelfile.c - one model description from GGUF files, HF directories
 * and registry names: config fields per architecture, HF -> canonical name
 * mapping, values against tools/golden/gen_safetensors.py, sharded loading,
 * the SmolLM2 GGUF when present, registry lookups, and bad inputs. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/hfconfig.h"
#include "model/modelfile.h"
#include "model/quant.h"
#include "test.h"

#define ST_DIR "tests/fixtures/st"
#define SMOLLM2 "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static int has_eos(const struct model_config *c, int id)
{
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == id) return 1;
    return 0;
}

static struct model_file *open_ok(const char *path)
{
    struct model_file *mf = NULL;
    struct eb_err e = {0};
    int rc = model_file_open(path, &mf, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    return rc == 0 ? mf : NULL;
}

static void expect_open_fails(const char *path, const char *want)
{
    struct model_file *mf = NULL;
    struct eb_err e = {0};
    int rc = model_file_open(path, &mf, &e);
    CHECK_MSG(rc == -1 && mf == NULL, "%s opened, expected '%s'", path, want);
    if (rc == 0) model_file_close(mf);
    CHECK_MSG(strstr(e.msg, want) != NULL, "message '%s' lacks '%s'", e.msg, want);
}

/* Compare every tensor against <dir>/expected.json (written by the generator). */
static void check_expected(const struct model_file *mf, const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/expected.json", dir);
    struct eb_err e = {0};
    cJSON *rows = hf_json_load(path, &e);
    CHECK_MSG(rows != NULL, "%s", e.msg);
    if (!rows) return;
    const struct model_config *c = model_file_config(mf);
    int n_rows = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        const char *hf = cJSON_GetArrayItem(row, 0)->valuestring;
        const char *name = cJSON_GetArrayItem(row, 1)->valuestring;
        const cJSON *shape = cJSON_GetArrayItem(row, 2);
        const char *dtype = cJSON_GetArrayItem(row, 3)->valuestring;
        const cJSON *first = cJSON_GetArrayItem(row, 4);
        double sum = cJSON_GetArrayItem(row, 5)->valuedouble;
        n_rows++;
        const struct tensor_ref *t = model_file_tensor(mf, name);
        CHECK_MSG(t != NULL, "%s (%s) not found", name, hf);
        if (!t) continue;
        CHECK_STR(t->name, name);
        int nd = cJSON_GetArraySize(shape);
        CHECK(t->n_dims == nd);
        for (int k = 0; k < nd; k++)
            CHECK_MSG(t->ne[k] == (int64_t)cJSON_GetArrayItem(shape, nd - 1 - k)->valuedouble,
                      "%s ne[%d]", name, k);
        CHECK_STR(quant_type_name(t->type), dtype);
        int64_t n = tensor_nelements(t);
        float *v = malloc((size_t)n * sizeof *v);
        CHECK(v && quant_dequantize(t->type, t->data, v, n) == 0);
        if (v) {
            for (int k = 0; k < 4 && k < n; k++)
                CHECK_NEAR(v[k], cJSON_GetArrayItem(first, k)->valuedouble, 0);
            double s = 0;
            for (int64_t k = 0; k < n; k++) s += v[k];
            CHECK_NEAR(s, sum, 1e-9 * (double)n);
        }
        free(v);
    }
    /* Nothing else is exposed: a tied checkpoint has no lm_head here. */
    CHECK(model_file_tensor_count(mf) == n_rows);
    (void)c;
    cJSON_Delete(rows);
}

static void test_llama_sharded(void)
{
    struct model_file *mf = open_ok(ST_DIR "/llama");
    if (!mf) return;
    const struct model_config *c = model_file_config(mf);
    CHECK(model_file_format(mf) == MODEL_FORMAT_SAFETENSORS);
    CHECK_STR(model_arch_name(c->arch), "llama");
    CHECK(c->n_layer == 2 && c->n_embd == 64 && c->n_ff == 8);
    CHECK(c->n_head == 4 && c->n_head_kv == 2 && c->head_dim == 16 && c->rope_dims == 16);
    CHECK(c->n_vocab == 256 && c->n_ctx_train == 131072);
    CHECK_NEAR(c->rms_eps, 1e-5, 1e-12);
    CHECK_NEAR(c->rope_theta, 500000.0, 0);
    CHECK(c->rope_scaling.type == ROPE_SCALING_LLAMA3);
    CHECK_NEAR(c->rope_scaling.factor, 8.0, 0);
    CHECK_NEAR(c->rope_scaling.low_freq_factor, 1.0, 0);
    CHECK_NEAR(c->rope_scaling.high_freq_factor, 4.0, 0);
    CHECK(c->rope_scaling.original_ctx == 8192);
    CHECK(!c->tied_embeddings && !c->qk_permuted && !c->has_qkv_bias && !c->has_qk_norm);
    CHECK(c->bos_id == 1);
    /* config says 2; generation_config.json adds 5 */
    CHECK(c->n_eos == 2 && has_eos(c, 2) && has_eos(c, 5));
    CHECK(model_file_gguf(mf) == NULL);
    CHECK_STR(model_file_dir(mf), ST_DIR "/llama");
    CHECK_STR(model_file_path(mf), ST_DIR "/llama");
    struct stat s1, s2;
    stat(ST_DIR "/llama/model-00001-of-00002.safetensors", &s1);
    stat(ST_DIR "/llama/model-00002-of-00002.safetensors", &s2);
    CHECK(model_file_bytes(mf) == (size_t)(s1.st_size + s2.st_size));
    const struct tensor_ref *out = model_file_tensor(mf, "output.weight");
    CHECK(out && out->ne[0] == 64 && out->ne[1] == 256 && out->type == EB_TYPE_F16);
    const struct tensor_ref *q = model_file_tensor(mf, "blk.1.attn_q.weight");
    CHECK(q && q->ne[0] == 64 && q->ne[1] == 64);
    const struct tensor_ref *k = model_file_tensor(mf, "blk.1.attn_k.weight");
    CHECK(k && k->ne[0] == 64 && k->ne[1] == 32);
    CHECK(model_file_tensor(mf, "model.layers.0.self_attn.q_proj.weight") == NULL);
    CHECK(model_file_tensor(mf, "blk.2.attn_q.weight") == NULL);
    for (int i = 0; i < model_file_tensor_count(mf); i++) {
        const struct tensor_ref *t = model_file_tensor_at(mf, i);
        CHECK(t && model_file_tensor(mf, t->name) == t);
    }
    CHECK(model_file_tensor_at(mf, model_file_tensor_count(mf)) == NULL);
    check_expected(mf, ST_DIR "/llama");
    model_file_close(mf);
}

static void test_qwen2(void)
{
    struct model_file *mf = open_ok(ST_DIR "/qwen2");
    if (!mf) return;
    const struct model_config *c = model_file_config(mf);
    CHECK(c->arch == ARCH_QWEN2);
    CHECK(c->n_layer == 2 && c->n_embd == 64 && c->n_head == 4 && c->n_head_kv == 2);
    CHECK(c->head_dim == 16 && c->n_vocab == 256 && c->n_ctx_train == 4096);
    CHECK_NEAR(c->rms_eps, 1e-6, 1e-13);
    CHECK_NEAR(c->rope_theta, 1e6, 0);
    CHECK(c->rope_scaling.type == ROPE_SCALING_LINEAR);
    CHECK_NEAR(c->rope_scaling.factor, 2.0, 0);
    CHECK(c->tied_embeddings && !c->qk_permuted && c->has_qkv_bias && !c->has_qk_norm);
    CHECK(c->bos_id == -1 && c->n_eos == 1 && c->eos_ids[0] == 3);
    CHECK(model_file_tensor(mf, "output.weight") == NULL);
    const struct tensor_ref *b = model_file_tensor(mf, "blk.0.attn_k.bias");
    CHECK(b && b->type == EB_TYPE_F32 && b->n_dims == 1 && b->ne[0] == 32);
    check_expected(mf, ST_DIR "/qwen2");
    model_file_close(mf);
}

static void test_qwen3(void)
{
    struct model_file *mf = open_ok(ST_DIR "/qwen3");
    if (!mf) return;
    const struct model_config *c = model_file_config(mf);
    CHECK(c->arch == ARCH_QWEN3);
    CHECK(c->n_embd == 64 && c->n_head == 4 && c->n_head_kv == 2);
    CHECK(c->head_dim == 8 && c->rope_dims == 8); /* explicit, != hidden / heads */
    CHECK(c->n_ctx_train == 40960);
    CHECK_NEAR(c->rope_theta, 1e6, 0); /* from rope_parameters */
    CHECK(c->rope_scaling.type == ROPE_SCALING_NONE);
    CHECK(c->tied_embeddings && !c->qk_permuted && !c->has_qkv_bias && c->has_qk_norm);
    CHECK(c->bos_id == 4 && c->n_eos == 2 && has_eos(c, 3) && has_eos(c, 6));
    const struct tensor_ref *qn = model_file_tensor(mf, "blk.1.attn_k_norm.weight");
    CHECK(qn && qn->ne[0] == 8);
    const struct tensor_ref *q = model_file_tensor(mf, "blk.0.attn_q.weight");
    CHECK(q && q->ne[0] == 64 && q->ne[1] == 32);
    const struct tensor_ref *o = model_file_tensor(mf, "blk.0.attn_output.weight");
    CHECK(o && o->ne[0] == 32 && o->ne[1] == 64);
    check_expected(mf, ST_DIR "/qwen3");
    model_file_close(mf);
}

static void test_tiny_gguf(void)
{
    struct model_file *mf = open_ok(ST_DIR "/tiny_qwen2.gguf");
    if (!mf) return;
    const struct model_config *c = model_file_config(mf);
    CHECK(model_file_format(mf) == MODEL_FORMAT_GGUF);
    CHECK(model_file_gguf(mf) != NULL && model_file_dir(mf) == NULL);
    CHECK(c->arch == ARCH_QWEN2 && c->n_layer == 1 && c->n_embd == 16 && c->n_ff == 8);
    CHECK(c->n_head == 2 && c->n_head_kv == 1 && c->head_dim == 8 && c->rope_dims == 8);
    CHECK(c->n_vocab == 40 && c->n_ctx_train == 512);
    CHECK_NEAR(c->rope_theta, 10000.0, 0); /* absent -> default */
    CHECK(c->tied_embeddings && !c->qk_permuted && c->has_qkv_bias && !c->has_qk_norm);
    CHECK(c->bos_id == 36);
    /* eos 36, eot 37 (<|im_end|>), and the R1 / Llama 3 end tokens found by text */
    CHECK(c->n_eos == 4 && has_eos(c, 36) && has_eos(c, 37) && has_eos(c, 38) && has_eos(c, 39));
    CHECK(c->eos_ids[0] == 36);
    struct stat sb;
    CHECK(stat(ST_DIR "/tiny_qwen2.gguf", &sb) == 0 && model_file_bytes(mf) == (size_t)sb.st_size);
    const struct tensor_ref *k = model_file_tensor(mf, "blk.0.attn_k.weight");
    CHECK(k && k->ne[0] == 16 && k->ne[1] == 8);
    model_file_close(mf);
}

static void test_smollm2_gguf(void)
{
    struct stat sb;
    if (stat(SMOLLM2, &sb) != 0) SKIP("%s absent (make deps fetches it)", SMOLLM2);
    struct model_file *mf = open_ok(SMOLLM2);
    if (!mf) return;
    const struct model_config *c = model_file_config(mf);
    CHECK(model_file_format(mf) == MODEL_FORMAT_GGUF);
    CHECK_STR(model_arch_name(c->arch), "llama");
    CHECK(c->n_layer == 30 && c->n_embd == 576 && c->n_ff == 1536);
    CHECK(c->n_head == 9 && c->n_head_kv == 3 && c->head_dim == 64 && c->rope_dims == 64);
    CHECK(c->n_vocab == 49152 && c->n_ctx_train == 8192);
    CHECK_NEAR(c->rope_theta, 100000.0, 0);
    CHECK_NEAR(c->rms_eps, 1e-5, 1e-10);
    CHECK(c->tied_embeddings && c->qk_permuted && !c->has_qkv_bias && !c->has_qk_norm);
    CHECK(c->bos_id == 1 && has_eos(c, 2)); /* 2 is <|im_end|> */
    CHECK(model_file_bytes(mf) == (size_t)sb.st_size);
    CHECK(model_file_tensor(mf, "output.weight") == NULL);
    CHECK(model_file_tensor(mf, "blk.29.ffn_down.weight") != NULL);
    model_file_close(mf);

    /* The registry name opens the same file (unless EVICTBENCH_MODELS points elsewhere). */
    if (getenv("EVICTBENCH_MODELS")) return;
    mf = open_ok("smollm2-135m");
    if (!mf) return;
    CHECK_STR(model_file_path(mf), SMOLLM2);
    CHECK(model_file_config(mf)->n_layer == 30);
    model_file_close(mf);
}

/* ---- config.json ---- */

#define BASE_CFG "\"hidden_size\": 64, \"intermediate_size\": 32, \"num_hidden_layers\": 2, " \
                 "\"num_attention_heads\": 4"

static int parse_cfg(const char *json, struct model_config *c, struct eb_err *e)
{
    return hfconfig_parse(json, strlen(json), "cfg", c, e);
}

static void expect_cfg_fails(const char *json, const char *want)
{
    struct model_config c;
    struct eb_err e = {0};
    CHECK_MSG(parse_cfg(json, &c, &e) == -1, "accepted, expected '%s'", want);
    CHECK_MSG(strncmp(e.msg, "cfg: ", 5) == 0 && strstr(e.msg, want), "message '%s' lacks '%s'",
              e.msg, want);
}

static void test_config_defaults(void)
{
    struct model_config c;
    struct eb_err e = {0};
    int rc = parse_cfg("{\"model_type\": \"llama\", " BASE_CFG "}", &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK(c.arch == ARCH_LLAMA && c.n_head_kv == 4 && c.head_dim == 16 && c.rope_dims == 16);
    CHECK_NEAR(c.rope_theta, 10000.0, 0);
    CHECK_NEAR(c.rms_eps, 1e-6, 1e-13);
    CHECK(c.rope_scaling.type == ROPE_SCALING_NONE && !c.tied_embeddings && !c.has_qkv_bias);
    CHECK(c.bos_id == -1 && c.n_eos == 0 && c.n_vocab == 0 && c.n_ctx_train == 2048);

    rc = parse_cfg("{\"model_type\": \"qwen2\", " BASE_CFG ", \"eos_token_id\": 7,"
                   " \"rope_scaling\": null, \"attention_bias\": false}", &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK(c.arch == ARCH_QWEN2 && c.has_qkv_bias && c.n_eos == 1 && c.eos_ids[0] == 7);

    rc = parse_cfg("{\"model_type\": \"llama\", " BASE_CFG ", \"attention_bias\": true,"
                   " \"eos_token_id\": [1, 9, 1], \"rope_theta\": 500000,"
                   " \"rope_scaling\": {\"type\": \"llama3\", \"factor\": 32, \"low_freq_factor\": 1,"
                   " \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}}", &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK(c.has_qkv_bias && c.n_eos == 2 && c.eos_ids[0] == 1 && c.eos_ids[1] == 9);
    CHECK(c.rope_scaling.type == ROPE_SCALING_LLAMA3 && c.rope_scaling.factor == 32.0f);
    CHECK_NEAR(c.rope_theta, 500000.0, 0);

    /* newer transformers: everything inside rope_parameters */
    rc = parse_cfg("{\"model_type\": \"llama\", " BASE_CFG ", \"rope_parameters\": {\"rope_type\":"
                   " \"llama3\", \"rope_theta\": 500000.0, \"factor\": 8.0, \"low_freq_factor\": 1.0,"
                   " \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}", &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK(c.rope_scaling.type == ROPE_SCALING_LLAMA3 && c.rope_scaling.original_ctx == 8192);
    CHECK_NEAR(c.rope_theta, 500000.0, 0);
}

static void test_config_errors(void)
{
    expect_cfg_fails("{\"model_type\": \"llama\", \"intermediate_size\": 32, \"num_hidden_layers\": 2,"
                     " \"num_attention_heads\": 4}", "cfg: missing field hidden_size");
    expect_cfg_fails("{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 32,"
                     " \"num_hidden_layers\": 2}", "missing field num_attention_heads");
    expect_cfg_fails("{" BASE_CFG "}", "missing field model_type");
    expect_cfg_fails("{\"model_type\": \"mistral\", " BASE_CFG "}",
                     "model_type 'mistral' is not supported (llama, qwen2, qwen3)");
    expect_cfg_fails("{\"model_type\": \"llama\", " BASE_CFG, "malformed JSON");
    expect_cfg_fails("[1, 2]", "not a JSON object");
    expect_cfg_fails("{\"model_type\": \"llama\", \"hidden_size\": \"64\", \"intermediate_size\": 32,"
                     " \"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
                     "field hidden_size must be an integer");
    expect_cfg_fails("{\"model_type\": \"llama\", " BASE_CFG ", \"num_key_value_heads\": 3}",
                     "not a multiple of num_key_value_heads 3");
    expect_cfg_fails("{\"model_type\": \"llama\", " BASE_CFG ", \"rope_scaling\": {\"rope_type\": \"yarn\","
                     " \"factor\": 4}}", "rope_scaling type 'yarn' is not supported");
    expect_cfg_fails("{\"model_type\": \"llama\", " BASE_CFG ", \"rope_scaling\": {\"rope_type\": \"llama3\","
                     " \"factor\": 8}}", "missing field low_freq_factor");
    expect_cfg_fails("{\"model_type\": \"llama\", " BASE_CFG ", \"eos_token_id\": \"</s>\"}",
                     "eos_token_id must be a token id");
    expect_cfg_fails("{\"model_type\": \"qwen2\", " BASE_CFG ", \"use_sliding_window\": true}",
                     "sliding-window attention is not supported");
    expect_cfg_fails("{\"model_type\": \"llama\", " BASE_CFG ", \"hidden_act\": \"gelu\"}",
                     "hidden_act must be \"silu\"");
    expect_cfg_fails("{\"model_type\": \"llama\", " BASE_CFG ", \"head_dim\": 7}", "must be even");
}

/* ---- bad HF directories: a scratch dir with a config and a link to real weights ---- */

struct scratch {
    char dir[64];
    char cfg[128], weights[128];
};

static int scratch_make(struct scratch *s, const char *config_json, const char *weights_from)
{
    snprintf(s->dir, sizeof s->dir, "/tmp/eb_mf_XXXXXX");
    if (!mkdtemp(s->dir)) return -1;
    snprintf(s->cfg, sizeof s->cfg, "%s/config.json", s->dir);
    snprintf(s->weights, sizeof s->weights, "%s/model.safetensors", s->dir);
    FILE *f = fopen(s->cfg, "w");
    if (!f) return -1;
    fputs(config_json, f);
    fclose(f);
    char abs[PATH_MAX];
    if (weights_from && (!realpath(weights_from, abs) || symlink(abs, s->weights) != 0)) return -1;
    return 0;
}

static void scratch_remove(struct scratch *s)
{
    unlink(s->weights);
    unlink(s->cfg);
    rmdir(s->dir);
}

/* config.json for the qwen2 fixture's weights, with one thing changed */
#define CFG(type, layers, kv, tied, extra) "{\"model_type\": \"" type "\", \"hidden_size\": 64," \
    " \"intermediate_size\": 8, \"num_hidden_layers\": " #layers ", \"num_attention_heads\": 4," \
    " \"num_key_value_heads\": " #kv ", \"tie_word_embeddings\": " #tied extra "}"
#define QWEN2_CFG(extra) CFG("qwen2", 2, 2, true, extra)

static void bad_dir_case(const char *config_json, const char *weights_from, const char *want)
{
    struct scratch s;
    if (scratch_make(&s, config_json, weights_from) != 0) {
        CHECK_MSG(0, "cannot make a scratch directory");
        return;
    }
    expect_open_fails(s.dir, want);
    scratch_remove(&s);
}

static void test_bad_directories(void)
{
    const char *w = ST_DIR "/qwen2/model.safetensors";
    /* sanity: the scratch setup itself loads */
    struct scratch s;
    if (scratch_make(&s, QWEN2_CFG(""), w) == 0) {
        struct model_file *mf = open_ok(s.dir);
        if (mf) model_file_close(mf);
        scratch_remove(&s);
    }
    bad_dir_case(CFG("qwen2", 2, 4, true, ""), w,
                 "tensor model.layers.0.self_attn.k_proj.weight has ne [64, 32, 1, 1], expected [64, 64]");
    bad_dir_case(QWEN2_CFG(", \"vocab_size\": 300"), w,
                 "config vocab_size 300 but model.embed_tokens.weight has 256 rows");
    bad_dir_case(CFG("qwen2", 3, 2, true, ""), w,
                 "missing tensor model.layers.2.input_layernorm.weight (blk.2.attn_norm.weight)");
    bad_dir_case(CFG("qwen2", 2, 2, false, ""), w,
                 "missing tensor lm_head.weight (output.weight)");
    bad_dir_case(CFG("qwen3", 2, 2, true, ""), w,
                 "missing tensor model.layers.0.self_attn.q_norm.weight (blk.0.attn_q_norm.weight)");
    bad_dir_case(QWEN2_CFG(", \"eos_token_id\": 256"), w, "eos_token_id 256 is outside the vocabulary");
    bad_dir_case(QWEN2_CFG(""), ST_DIR "/values.safetensors",
                 "missing tensor model.embed_tokens.weight");
    bad_dir_case(QWEN2_CFG(""), NULL, "no model.safetensors or model.safetensors.index.json");
    bad_dir_case("{\"model_type\": \"gpt2\"}", w, "config.json: model_type 'gpt2' is not supported");
    bad_dir_case("{\"model_type\": \"llama\", \"hidden_size\": 64}", w,
                 "config.json: missing field intermediate_size");
    expect_open_fails(ST_DIR, "no config.json");
}

static void test_bad_files(void)
{
    expect_open_fails(ST_DIR "/qwen2/model.safetensors",
                      "model.safetensors: give the Hugging Face checkpoint directory");
    /* not GGUF */
    struct model_file *mf = NULL;
    struct eb_err e = {0};
    CHECK(model_file_open(ST_DIR "/llama/expected.json.x", &mf, &e) == -1 && mf == NULL);
    CHECK(model_file_open(ST_DIR "/qwen2/expected.json", &mf, &e) == -1 && mf == NULL);
    CHECK(model_file_open("tests/test.h", &mf, &e) == -1 && mf == NULL);
    CHECK_MSG(strncmp(e.msg, "tests/test.h: ", 14) == 0, "%s", e.msg);
    /* a GGUF truncated in its tensor data */
    char tmp[] = "/tmp/eb_mf_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    if (fd < 0) return;
    FILE *in = fopen(ST_DIR "/tiny_qwen2.gguf", "rb");
    char buf[4096];
    size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (in) fclose(in);
    CHECK(n == sizeof buf && write(fd, buf, n) == (ssize_t)n);
    close(fd);
    CHECK(model_file_open(tmp, &mf, &e) == -1);
    CHECK_MSG(strncmp(e.msg, tmp, strlen(tmp)) == 0, "%s", e.msg);
    unlink(tmp);
}

/* ---- registry ---- */

static void test_registry(void)
{
    char out[PATH_MAX];
    struct eb_err e = {0};
    /* a path passes through */
    CHECK(model_resolve(ST_DIR "/qwen2", out, sizeof out, &e) == 0);
    CHECK_STR(out, ST_DIR "/qwen2");

    /* a name whose file is absent says how to get it */
    struct stat sb;
    if (stat("models/DeepSeek-R1-Distill-Qwen-7B", &sb) != 0 && !getenv("EVICTBENCH_MODELS")) {
        CHECK(model_resolve("deepseek-r1-distill-qwen-7b", out, sizeof out, &e) == -1);
        CHECK_MSG(strstr(e.msg, "model 'deepseek-r1-distill-qwen-7b': file "
                                "models/DeepSeek-R1-Distill-Qwen-7B not found; obtain it with: on a "
                                "machine with access to the Hugging Face hub: huggingface-cli download "
                                "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B --local-dir "
                                "models/DeepSeek-R1-Distill-Qwen-7B") != NULL, "%s", e.msg);
        expect_open_fails("deepseek-r1-distill-qwen-7b", "obtain it with");
    }
    if (stat(SMOLLM2, &sb) != 0 && !getenv("EVICTBENCH_MODELS")) {
        CHECK(model_resolve("smollm2-135m", out, sizeof out, &e) == -1);
        CHECK_MSG(strstr(e.msg, "obtain it with: make deps") != NULL, "%s", e.msg);
    }

    /* an unknown name lists the known ones */
    CHECK(model_resolve("nope-1b", out, sizeof out, &e) == -1);
    CHECK_MSG(strstr(e.msg, "nope-1b: no such file and not a known model name (known: smollm2-135m, "
                            "qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, deepseek-r1-distill-qwen-1.5b") != NULL, "%s", e.msg);
    CHECK(strstr(e.msg, "deepseek-r1-distill-llama-8b") != NULL);
    CHECK(model_resolve("", out, sizeof out, &e) == -1);

    /* chat template defaults */
    char chat[16];
    CHECK(model_registry_chat("smollm2-135m", chat, sizeof chat) == 0);
    CHECK_STR(chat, "chatml");
    CHECK(model_registry_chat("deepseek-r1-distill-llama-8b", chat, sizeof chat) == 0);
    CHECK_STR(chat, "r1");
    CHECK(model_registry_chat("/somewhere/models/DeepSeek-R1-Distill-Qwen-14B/", chat, sizeof chat) == 0);
    CHECK_STR(chat, "r1");
    CHECK(model_registry_chat(SMOLLM2, chat, sizeof chat) == 0);
    CHECK_STR(chat, "chatml");
    CHECK(model_registry_chat("qwen3-8b", chat, sizeof chat) == 0);
    CHECK_STR(chat, "qwen3");
    CHECK(model_registry_chat("qwen2.5-coder-1.5b", chat, sizeof chat) == 0);
    CHECK_STR(chat, "qwen2.5");
    CHECK(model_registry_chat("/x/models/qwen2.5-coder-0.5b-instruct.gguf", chat, sizeof chat) == 0);
    CHECK_STR(chat, "qwen2.5");
    CHECK(model_registry_chat("nope-1b", chat, sizeof chat) == -1);

    /* registry names of names and of paths to entries' files */
    char name[64];
    CHECK(model_registry_name("smollm2-135m", name, sizeof name) == 0);
    CHECK_STR(name, "smollm2-135m");
    CHECK(model_registry_name("/x/models/SmolLM2-135M-Instruct.Q4_1.gguf", name, sizeof name) == 0);
    CHECK_STR(name, "smollm2-135m");
    CHECK(model_registry_name("/x/models/deepseek-r1-distill-qwen-14b/", name, sizeof name) == 0);
    CHECK_STR(name, "deepseek-r1-distill-qwen-14b");
    CHECK(model_registry_name("nope-1b", name, sizeof name) == -1);
    CHECK(model_registry_name("smollm2-135m", name, 4) == -1);

    /* the template to use: the given name, else the registry's, else raw */
    enum chat_template tpl;
    CHECK(model_chat_template("smollm2-135m", NULL, &tpl, &e) == 0 && tpl == CHAT_CHATML);
    CHECK(model_chat_template("qwen3-8b", NULL, &tpl, &e) == 0 && tpl == CHAT_QWEN3);
    CHECK(model_chat_template("smollm2-135m", "r1", &tpl, &e) == 0 && tpl == CHAT_R1);
    CHECK(model_chat_template("/x/unknown.gguf", NULL, &tpl, &e) == 0 && tpl == CHAT_RAW);
    CHECK(model_chat_template("smollm2-135m", "llama9", &tpl, &e) == -1 &&
          strstr(e.msg, "llama9") != NULL);
}

static void test_registry_models_dir(void)
{
    char dir[] = "/tmp/eb_models_XXXXXX";
    if (!mkdtemp(dir)) SKIP("cannot make a scratch directory");
    char file[128];
    snprintf(file, sizeof file, "%s/DeepSeek-R1-Distill-Qwen-1.5B", dir);
    mkdir(file, 0755);
    char *old = getenv("EVICTBENCH_MODELS");
    char *saved = old ? strdup(old) : NULL;
    setenv("EVICTBENCH_MODELS", dir, 1);
    char out[PATH_MAX];
    struct eb_err e = {0};
    CHECK(model_resolve("deepseek-r1-distill-qwen-1.5b", out, sizeof out, &e) == 0);
    CHECK_STR(out, file);
    /* found there, but empty: the directory loader says what is missing */
    expect_open_fails("deepseek-r1-distill-qwen-1.5b", "no config.json");
    if (saved) setenv("EVICTBENCH_MODELS", saved, 1);
    else unsetenv("EVICTBENCH_MODELS");
    free(saved);
    rmdir(file);
    rmdir(dir);
}

int main(void)
{
    RUN(test_llama_sharded);
    RUN(test_qwen2);
    RUN(test_qwen3);
    RUN(test_tiny_gguf);
    RUN(test_smollm2_gguf);
    RUN(test_config_defaults);
    RUN(test_config_errors);
    RUN(test_bad_directories);
    RUN(test_bad_files);
    RUN(test_registry);
    RUN(test_registry_models_dir);
    return test_summary("modelfile");
}
