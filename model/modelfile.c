/* modelfile.c - open a GGUF file or an HF directory as one model description.
 *
 * Both sources end up as a struct model_config plus tensors under canonical
 * GGUF names; every tensor the architecture needs is checked for presence,
 * shape and a type we can dequantize before the caller sees the model. */
#include "modelfile.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "hfconfig.h"
#include "quant.h"
#include "safetensors.h"

struct model_file {
    int refs;                    /* model_file_retain / model_file_close */
    enum model_format format;
    struct model_config cfg;
    char path[PATH_MAX];
    char *dir;                   /* HF directory, else NULL */
    struct gguf_file *gguf;      /* GGUF source */
    struct st_checkpoint *ck;    /* safetensors source */
    struct tensor_ref *tensors;  /* safetensors: canonical names, sorted by name */
    int n_tensors;
    size_t bytes;
};

const char *model_arch_name(enum model_arch a)
{
    switch (a) {
    case ARCH_LLAMA: return "llama";
    case ARCH_QWEN2: return "qwen2";
    case ARCH_QWEN3: return "qwen3";
    }
    return "?";
}

static int arch_from_name(const char *s, enum model_arch *out)
{
    if (strcmp(s, "llama") == 0) *out = ARCH_LLAMA;
    else if (strcmp(s, "qwen2") == 0) *out = ARCH_QWEN2;
    else if (strcmp(s, "qwen3") == 0) *out = ARCH_QWEN3;
    else return -1;
    return 0;
}

/* ---- HF name <-> canonical name ---- */

static const char *const global_names[][2] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

/* Per-layer module names; ".weight" / ".bias" carry over unchanged. */
static const char *const layer_names[][2] = {
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Map names between the two schemes; from = 0 maps HF -> canonical, 1 the
 * reverse.  Returns 0 and fills out, or -1 for a name outside the scheme. */
static int map_name(const char *name, int from, char *out, size_t cap)
{
    int to = 1 - from;
    for (int i = 0; i < N_OF(global_names); i++)
        if (strcmp(name, global_names[i][from]) == 0)
            return snprintf(out, cap, "%s", global_names[i][to]) < (int)cap ? 0 : -1;

    const char *prefix[2] = {"model.layers.", "blk."};
    size_t plen = strlen(prefix[from]);
    if (strncmp(name, prefix[from], plen) != 0) return -1;
    const char *p = name + plen;
    /* Decimal layer number without leading zeros, so names map one to one. */
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    long layer = 0;
    while (*p >= '0' && *p <= '9') {
        layer = layer * 10 + (*p++ - '0');
        if (layer > 100000) return -1;
    }
    if (*p++ != '.') return -1;
    const char *suffix = strrchr(p, '.');
    if (!suffix || (strcmp(suffix, ".weight") != 0 && strcmp(suffix, ".bias") != 0)) return -1;
    size_t mlen = (size_t)(suffix - p);
    for (int i = 0; i < N_OF(layer_names); i++) {
        const char *m = layer_names[i][from];
        if (strlen(m) == mlen && strncmp(p, m, mlen) == 0) {
            int n = snprintf(out, cap, "%s%ld.%s%s", prefix[to], layer, layer_names[i][to], suffix);
            return n >= 0 && (size_t)n < cap ? 0 : -1;
        }
    }
    return -1;
}

/* ---- lookups ---- */

static int cmp_tensor_name(const void *a, const void *b)
{
    const struct tensor_ref *x = a, *y = b;
    return strcmp(x->name, y->name);
}

const struct tensor_ref *model_file_tensor(const struct model_file *mf, const char *name)
{
    if (mf->gguf) return gguf_find_tensor(mf->gguf, name);
    struct tensor_ref key = {0};
    key.name = name;
    return bsearch(&key, mf->tensors, (size_t)mf->n_tensors, sizeof key, cmp_tensor_name);
}

int model_file_tensor_count(const struct model_file *mf)
{
    return mf->gguf ? gguf_tensor_count(mf->gguf) : mf->n_tensors;
}

const struct tensor_ref *model_file_tensor_at(const struct model_file *mf, int idx)
{
    if (mf->gguf) return gguf_tensor(mf->gguf, idx);
    return idx >= 0 && idx < mf->n_tensors ? &mf->tensors[idx] : NULL;
}

const struct model_config *model_file_config(const struct model_file *mf) { return &mf->cfg; }
enum model_format model_file_format(const struct model_file *mf) { return mf->format; }
const char *model_file_path(const struct model_file *mf) { return mf->path; }
size_t model_file_bytes(const struct model_file *mf) { return mf->bytes; }
const struct gguf_file *model_file_gguf(const struct model_file *mf) { return mf->gguf; }
const char *model_file_dir(const struct model_file *mf) { return mf->dir; }

void model_file_drop_pages(const struct model_file *mf, const void *p, size_t n)
{
    if (mf->gguf) gguf_drop_pages(mf->gguf, p, n);
    if (mf->ck) st_checkpoint_drop_pages(mf->ck, p, n);
}

/* ---- required tensors ---- */

/* The tensor must exist with ne = {ne0, ne1} (ne1 = 0: a vector of ne0). */
static int need_tensor(const struct model_file *mf, const char *name, int64_t ne0, int64_t ne1,
                       struct eb_err *e)
{
    const struct tensor_ref *t = model_file_tensor(mf, name);
    char hf[256];
    int has_hf = mf->format == MODEL_FORMAT_SAFETENSORS && map_name(name, 1, hf, sizeof hf) == 0;
    if (!t) {
        if (has_hf)
            return eb_fail(e, "%s: missing tensor %s (%s)", mf->path, hf, name);
        return eb_fail(e, "%s: missing tensor %s", mf->path, name);
    }
    int64_t want1 = ne1 ? ne1 : 1;
    int ok = t->ne[0] == ne0 && t->ne[1] == want1 && t->ne[2] == 1 && t->ne[3] == 1;
    if (!ok) {
        char want[64];
        if (ne1) snprintf(want, sizeof want, "[%lld, %lld]", (long long)ne0, (long long)ne1);
        else snprintf(want, sizeof want, "[%lld]", (long long)ne0);
        return eb_fail(e, "%s: tensor %s has ne [%lld, %lld, %lld, %lld], expected %s (ggml order)",
                       mf->path, has_hf ? hf : name, (long long)t->ne[0], (long long)t->ne[1],
                       (long long)t->ne[2], (long long)t->ne[3], want);
    }
    if (!quant_type_supported(t->type))
        return eb_fail(e, "%s: tensor %s has type %s, which cannot be dequantized", mf->path,
                       name, quant_type_name(t->type));
    return 0;
}

static int check_tensors(const struct model_file *mf, struct eb_err *e)
{
    const struct model_config *c = &mf->cfg;
    int64_t q_dim = (int64_t)c->n_head * c->head_dim, kv_dim = (int64_t)c->n_head_kv * c->head_dim;
    if (need_tensor(mf, "token_embd.weight", c->n_embd, c->n_vocab, e) != 0 ||
        need_tensor(mf, "output_norm.weight", c->n_embd, 0, e) != 0)
        return -1;
    if (!c->tied_embeddings && need_tensor(mf, "output.weight", c->n_embd, c->n_vocab, e) != 0)
        return -1;
    if (model_file_tensor(mf, "rope_freqs.weight") &&
        need_tensor(mf, "rope_freqs.weight", c->rope_dims / 2, 0, e) != 0)
        return -1;
    struct { const char *name; int64_t ne0, ne1; int when; } per_layer[] = {
        {"attn_norm.weight", c->n_embd, 0, 1},
        {"attn_q.weight", c->n_embd, q_dim, 1},
        {"attn_k.weight", c->n_embd, kv_dim, 1},
        {"attn_v.weight", c->n_embd, kv_dim, 1},
        {"attn_output.weight", q_dim, c->n_embd, 1},
        {"attn_q.bias", q_dim, 0, c->has_qkv_bias},
        {"attn_k.bias", kv_dim, 0, c->has_qkv_bias},
        {"attn_v.bias", kv_dim, 0, c->has_qkv_bias},
        {"attn_q_norm.weight", c->head_dim, 0, c->has_qk_norm},
        {"attn_k_norm.weight", c->head_dim, 0, c->has_qk_norm},
        {"ffn_norm.weight", c->n_embd, 0, 1},
        {"ffn_gate.weight", c->n_embd, c->n_ff, 1},
        {"ffn_up.weight", c->n_embd, c->n_ff, 1},
        {"ffn_down.weight", c->n_ff, c->n_embd, 1},
    };
    char name[96];
    for (int l = 0; l < c->n_layer; l++)
        for (int i = 0; i < N_OF(per_layer); i++) {
            if (!per_layer[i].when) continue;
            snprintf(name, sizeof name, "blk.%d.%s", l, per_layer[i].name);
            if (need_tensor(mf, name, per_layer[i].ne0, per_layer[i].ne1, e) != 0) return -1;
        }
    return 0;
}

/* ---- GGUF ---- */

struct gguf_ctx {
    const struct gguf_file *g;
    const char *path;
    char arch[32];
};

/* "<arch>.<key>" as an integer in [min, max]; absent -> def, or an error if required. */
static int gguf_arch_int(const struct gguf_ctx *x, const char *key, int required, int64_t def,
                         int64_t min, int64_t max, int *out, struct eb_err *e)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", x->arch, key);
    int64_t v;
    if (gguf_find_key(x->g, full) < 0) {
        if (required) return eb_fail(e, "%s: missing metadata %s", x->path, full);
        v = def;
    } else if (gguf_get_int(x->g, full, &v) != 0) {
        return eb_fail(e, "%s: metadata %s is not an integer", x->path, full);
    }
    if (v < min || v > max)
        return eb_fail(e, "%s: metadata %s = %lld is out of range", x->path, full, (long long)v);
    *out = (int)v;
    return 0;
}

static int gguf_arch_float(const struct gguf_ctx *x, const char *key, int required, double def,
                           double *out, struct eb_err *e)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", x->arch, key);
    if (gguf_find_key(x->g, full) < 0) {
        if (required) return eb_fail(e, "%s: missing metadata %s", x->path, full);
        *out = def;
        return 0;
    }
    if (gguf_get_float(x->g, full, out) != 0)
        return eb_fail(e, "%s: metadata %s is not a number", x->path, full);
    return 0;
}

/* Stop tokens beyond eos: generation must end on the chat end markers too. */
static void add_stop_tokens(const struct gguf_file *g, struct model_config *c)
{
    static const char *const stops[] = {"<|im_end|>", "<|eot_id|>",
                                        "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81"
                                        "sentence\xef\xbd\x9c>"};
    int type;
    uint64_t count;
    if (gguf_get_arr_info(g, "tokenizer.ggml.tokens", &type, &count) != 0 || type != GGUF_STRING)
        return;
    for (uint64_t i = 0; i < count && i < (uint64_t)c->n_vocab; i++) {
        const char *s;
        size_t len;
        if (gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &s, &len) != 0) continue;
        for (int k = 0; k < N_OF(stops); k++)
            if (len == strlen(stops[k]) && memcmp(s, stops[k], len) == 0)
                model_config_add_eos(c, (int)i);
    }
}

static int gguf_token_id(const struct gguf_file *g, const char *key, const char *path,
                         int n_vocab, int *out, struct eb_err *e)
{
    int64_t v;
    *out = -1;
    if (gguf_find_key(g, key) < 0) return 0;
    if (gguf_get_int(g, key, &v) != 0) return eb_fail(e, "%s: metadata %s is not an integer", path, key);
    if (v < 0 || v >= n_vocab)
        return eb_fail(e, "%s: %s = %lld is outside the vocabulary (%d)", path, key, (long long)v,
                       n_vocab);
    *out = (int)v;
    return 0;
}

static int open_gguf(struct model_file *mf, struct eb_err *e)
{
    if (gguf_open(mf->path, &mf->gguf, e) != 0) return -1;
    mf->format = MODEL_FORMAT_GGUF;
    mf->bytes = gguf_file_size(mf->gguf);
    struct gguf_ctx x = {.g = mf->gguf, .path = mf->path};
    struct model_config *c = &mf->cfg;

    const char *s;
    size_t len;
    if (gguf_get_str(x.g, "general.architecture", &s, &len) != 0)
        return eb_fail(e, "%s: missing metadata general.architecture", mf->path);
    if (len >= sizeof x.arch) len = sizeof x.arch - 1;
    memcpy(x.arch, s, len);
    x.arch[len] = '\0';
    if (memchr(x.arch, '\0', len) || arch_from_name(x.arch, &c->arch) != 0)
        return eb_fail(e, "%s: architecture '%s' is not supported (llama, qwen2, qwen3)", mf->path,
                       x.arch);

    if (gguf_arch_int(&x, "block_count", 1, 0, 1, 4096, &c->n_layer, e) != 0 ||
        gguf_arch_int(&x, "embedding_length", 1, 0, 1, 1 << 20, &c->n_embd, e) != 0 ||
        gguf_arch_int(&x, "feed_forward_length", 1, 0, 1, 1 << 20, &c->n_ff, e) != 0 ||
        gguf_arch_int(&x, "attention.head_count", 1, 0, 1, 4096, &c->n_head, e) != 0 ||
        gguf_arch_int(&x, "attention.head_count_kv", 0, c->n_head, 1, 4096, &c->n_head_kv, e) != 0 ||
        gguf_arch_int(&x, "context_length", 1, 0, 1, 1 << 30, &c->n_ctx_train, e) != 0)
        return -1;
    if (c->n_head % c->n_head_kv != 0)
        return eb_fail(e, "%s: head_count %d is not a multiple of head_count_kv %d", mf->path,
                       c->n_head, c->n_head_kv);
    int value_len;
    if (gguf_arch_int(&x, "attention.key_length", 0, c->n_embd / c->n_head, 2, 4096, &c->head_dim, e) != 0 ||
        gguf_arch_int(&x, "attention.value_length", 0, c->head_dim, 1, 4096, &value_len, e) != 0 ||
        gguf_arch_int(&x, "rope.dimension_count", 0, c->head_dim, 2, c->head_dim, &c->rope_dims, e) != 0)
        return -1;
    if (value_len != c->head_dim || c->head_dim % 2 || c->rope_dims % 2)
        return eb_fail(e, "%s: key_length %d, value_length %d, rope dims %d are not supported",
                       mf->path, c->head_dim, value_len, c->rope_dims);

    double eps, theta;
    if (gguf_arch_float(&x, "attention.layer_norm_rms_epsilon", 1, 0, &eps, e) != 0 ||
        gguf_arch_float(&x, "rope.freq_base", 0, 10000.0, &theta, e) != 0)
        return -1;
    if (!(eps > 0 && eps < 1)) return eb_fail(e, "%s: rms epsilon %g is out of range", mf->path, eps);
    if (!(theta > 1 && theta < 1e12)) return eb_fail(e, "%s: rope freq_base %g is out of range", mf->path, theta);
    c->rms_eps = (float)eps;
    c->rope_theta = theta;

    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", x.arch);
    if (gguf_get_str(x.g, key, &s, &len) == 0 && !(len == 4 && memcmp(s, "none", 4) == 0)) {
        double factor;
        if (!(len == 6 && memcmp(s, "linear", 6) == 0))
            return eb_fail(e, "%s: rope scaling '%.*s' is not supported", mf->path,
                           (int)(len > 40 ? 40 : len), s);
        if (gguf_arch_float(&x, "rope.scaling.factor", 1, 0, &factor, e) != 0) return -1;
        if (!(factor >= 1 && factor <= 1e6))
            return eb_fail(e, "%s: rope scaling factor %g is out of range", mf->path, factor);
        c->rope_scaling.type = ROPE_SCALING_LINEAR;
        c->rope_scaling.factor = (float)factor;
    }

    const struct tensor_ref *emb = gguf_find_tensor(x.g, "token_embd.weight");
    if (!emb) return eb_fail(e, "%s: missing tensor token_embd.weight", mf->path);
    if (emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
        return eb_fail(e, "%s: token_embd.weight has %lld rows", mf->path, (long long)emb->ne[1]);
    c->n_vocab = (int)emb->ne[1];
    c->tied_embeddings = gguf_find_tensor(x.g, "output.weight") == NULL;
    c->qk_permuted = c->arch == ARCH_LLAMA; /* the converter permutes only llama Q/K */
    c->has_qkv_bias = gguf_find_tensor(x.g, "blk.0.attn_q.bias") != NULL;
    c->has_qk_norm = gguf_find_tensor(x.g, "blk.0.attn_q_norm.weight") != NULL;

    int id;
    if (gguf_token_id(x.g, "tokenizer.ggml.bos_token_id", mf->path, c->n_vocab, &c->bos_id, e) != 0)
        return -1;
    if (gguf_token_id(x.g, "tokenizer.ggml.eos_token_id", mf->path, c->n_vocab, &id, e) != 0) return -1;
    model_config_add_eos(c, id);
    if (gguf_token_id(x.g, "tokenizer.ggml.eot_token_id", mf->path, c->n_vocab, &id, e) != 0) return -1;
    model_config_add_eos(c, id);
    add_stop_tokens(x.g, c);
    return 0;
}

/* ---- HF directory ---- */

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int open_hf(struct model_file *mf, struct eb_err *e)
{
    char path[PATH_MAX + 64];
    mf->format = MODEL_FORMAT_SAFETENSORS;
    mf->dir = strdup(mf->path);
    if (!mf->dir) return eb_fail(e, "out of memory");
    struct model_config *c = &mf->cfg;

    snprintf(path, sizeof path, "%s/config.json", mf->path);
    if (!file_exists(path)) return eb_fail(e, "%s: no config.json (not a Hugging Face model directory)", mf->path);
    if (hfconfig_load(path, c, e) != 0) return -1;
    snprintf(path, sizeof path, "%s/generation_config.json", mf->path);
    if (file_exists(path) && hfconfig_load_generation(path, c, e) != 0) return -1;

    if (st_checkpoint_open(mf->path, &mf->ck, e) != 0) return -1;
    mf->bytes = st_checkpoint_bytes(mf->ck);

    int n = st_checkpoint_tensor_count(mf->ck);
    mf->tensors = eb_calloc((size_t)n, sizeof *mf->tensors, e);
    if (!mf->tensors) return -1;
    char name[256];
    for (int i = 0; i < n; i++) {
        const struct tensor_ref *t = st_checkpoint_tensor(mf->ck, i);
        /* Names outside the scheme (e.g. rotary_emb.inv_freq buffers) are not weights we use. */
        if (map_name(t->name, 0, name, sizeof name) != 0) continue;
        /* With tied embeddings the LM head is token_embd, as transformers ties it. */
        if (c->tied_embeddings && strcmp(name, "output.weight") == 0) continue;
        struct tensor_ref *dst = &mf->tensors[mf->n_tensors];
        *dst = *t;
        dst->name = strdup(name);
        if (!dst->name) return eb_fail(e, "out of memory");
        mf->n_tensors++;
    }
    qsort(mf->tensors, (size_t)mf->n_tensors, sizeof *mf->tensors, cmp_tensor_name);
    for (int i = 1; i < mf->n_tensors; i++)
        if (strcmp(mf->tensors[i - 1].name, mf->tensors[i].name) == 0)
            return eb_fail(e, "%s: two tensors map to %s", mf->path, mf->tensors[i].name);

    const struct tensor_ref *emb = model_file_tensor(mf, "token_embd.weight");
    if (!emb) return eb_fail(e, "%s: missing tensor model.embed_tokens.weight", mf->path);
    if (emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
        return eb_fail(e, "%s: model.embed_tokens.weight has %lld rows", mf->path, (long long)emb->ne[1]);
    if (c->n_vocab && c->n_vocab != emb->ne[1])
        return eb_fail(e, "%s: config vocab_size %d but model.embed_tokens.weight has %lld rows",
                       mf->path, c->n_vocab, (long long)emb->ne[1]);
    c->n_vocab = (int)emb->ne[1];
    if (c->bos_id >= c->n_vocab)
        return eb_fail(e, "%s: bos_token_id %d is outside the vocabulary (%d)", mf->path, c->bos_id, c->n_vocab);
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] >= c->n_vocab)
            return eb_fail(e, "%s: eos_token_id %d is outside the vocabulary (%d)", mf->path,
                           c->eos_ids[i], c->n_vocab);
    return 0;
}

/* ---- open / close ---- */

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

int model_file_open(const char *path_or_name, struct model_file **out, struct eb_err *e)
{
    *out = NULL;
    struct model_file *mf = eb_calloc(1, sizeof *mf, e);
    if (!mf) return -1;
    mf->cfg.bos_id = -1;
    mf->refs = 1;
    int rc = model_resolve(path_or_name, mf->path, sizeof mf->path, e);
    if (rc == 0) {
        struct stat sb;
        if (stat(mf->path, &sb) != 0)
            rc = eb_fail(e, "%s: cannot stat", mf->path);
        else if (S_ISDIR(sb.st_mode))
            rc = open_hf(mf, e);
        else if (ends_with(mf->path, ".safetensors") || ends_with(mf->path, ".json"))
            rc = eb_fail(e, "%s: give the Hugging Face checkpoint directory, not one of its files",
                         mf->path);
        else
            rc = open_gguf(mf, e);
    }
    if (rc == 0) rc = check_tensors(mf, e);
    if (rc != 0) {
        model_file_close(mf);
        return -1;
    }
    *out = mf;
    return 0;
}

struct model_file *model_file_retain(const struct model_file *mf)
{
    struct model_file *m = (struct model_file *)mf; /* the count is not part of its value */
    m->refs++;
    return m;
}

void model_file_close(struct model_file *mf)
{
    if (!mf || --mf->refs > 0) return;
    for (int i = 0; i < mf->n_tensors; i++) free((char *)mf->tensors[i].name);
    free(mf->tensors);
    st_checkpoint_close(mf->ck);
    if (mf->gguf) gguf_close(mf->gguf);
    free(mf->dir);
    free(mf);
}
