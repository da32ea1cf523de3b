/* tokenizer_json.c - build the tokenizer from a Hugging Face tokenizer.json
 * (and the BOS/EOS names of a tokenizer_config.json beside it, if any).
 *
 * Only the byte-level BPE shapes of the supported models are accepted; the
 * pre-tokenizer's regex must be one we have a scanner for, so an unfamiliar
 * file fails loudly instead of tokenizing differently. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static const char QWEN2_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char LLAMA3_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char *str_of(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int is_type(const cJSON *obj, const char *type)
{
    const char *t = str_of(obj, "type");
    return t && strcmp(t, type) == 0;
}

/* A boolean field; dflt when absent. */
static int bool_of(const cJSON *obj, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return dflt;
}

static int byte_level_ok(const cJSON *p, int use_regex)
{
    return is_type(p, "ByteLevel") && !bool_of(p, "add_prefix_space", 0) &&
           bool_of(p, "use_regex", 1) == use_regex;
}

/* The llama.cpp name of the pre-tokenizer this JSON describes. */
static const char *recognise_pre(const cJSON *pre, struct eb_err *e)
{
    if (!pre || cJSON_IsNull(pre)) {
        eb_fail(e, "no pre_tokenizer (byte-level BPE needs one)");
        return NULL;
    }
    if (byte_level_ok(pre, 1)) return "gpt2";
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    if (is_type(pre, "Sequence") && cJSON_IsArray(list) && cJSON_GetArraySize(list) == 2) {
        const cJSON *a = cJSON_GetArrayItem(list, 0), *b = cJSON_GetArrayItem(list, 1);
        if (is_type(a, "Digits") && bool_of(a, "individual_digits", 0) && byte_level_ok(b, 1))
            return "smollm";
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(a, "pattern");
        const char *re = str_of(pat, "Regex");
        const char *behavior = str_of(a, "behavior");
        if (is_type(a, "Split") && re && behavior && strcmp(behavior, "Isolated") == 0 &&
            !bool_of(a, "invert", 0) && byte_level_ok(b, 0)) {
            if (strcmp(re, QWEN2_PATTERN) == 0) return "qwen2";
            if (strcmp(re, LLAMA3_PATTERN) == 0) return "llama-bpe";
            eb_fail(e, "pre_tokenizer: unknown split regex \"%.200s\"", re);
            return NULL;
        }
    }
    char *txt = cJSON_PrintUnformatted(pre);
    eb_fail(e, "pre_tokenizer not supported: %.300s", txt ? txt : "?");
    free(txt);
    return NULL;
}

/* 1 for NFC, 0 for none, -1 (e set) for anything else. */
static int recognise_normalizer(const cJSON *norm, struct eb_err *e)
{
    if (!norm || cJSON_IsNull(norm)) return 0;
    if (is_type(norm, "NFC")) return 1;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(norm, "normalizers");
    if (is_type(norm, "Sequence") && cJSON_IsArray(list)) {
        int n = cJSON_GetArraySize(list);
        if (n == 0) return 0;
        if (n == 1 && is_type(cJSON_GetArrayItem(list, 0), "NFC")) return 1;
    }
    const char *t = str_of(norm, "type");
    return eb_fail(e, "normalizer \"%.64s\" not supported (only NFC or none)", t ? t : "?");
}

static int id_of(const cJSON *v, int *id)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= (1 << 24) ||
        v->valuedouble != (double)(int)v->valuedouble)
        return -1;
    *id = (int)v->valuedouble;
    return 0;
}

/* One merge: "left right" or ["left", "right"]. */
static int add_merge(struct tokenizer *t, const cJSON *m, int rank, struct eb_err *e)
{
    if (cJSON_IsString(m)) {
        const char *s = m->valuestring, *sp = strchr(s, ' ');
        if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' '))
            return eb_fail(e, "merges[%d] is not \"left right\"", rank);
        return bpe_add_merge(&t->bpe, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), e);
    }
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2) {
        const cJSON *a = cJSON_GetArrayItem(m, 0), *b = cJSON_GetArrayItem(m, 1);
        if (cJSON_IsString(a) && cJSON_IsString(b))
            return bpe_add_merge(&t->bpe, a->valuestring, strlen(a->valuestring), b->valuestring,
                                 strlen(b->valuestring), e);
    }
    return eb_fail(e, "merges[%d] is neither \"left right\" nor [left, right]", rank);
}

static int build(const cJSON *root, struct tokenizer **out, struct eb_err *e)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return eb_fail(e, "no \"model\" object");
    const char *mtype = str_of(model, "type");
    if (mtype && strcmp(mtype, "BPE") != 0)
        return eb_fail(e, "model type \"%.32s\" not supported (only BPE)", mtype);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return eb_fail(e, "model.vocab missing or not an object");
    if (merges && !cJSON_IsArray(merges)) return eb_fail(e, "model.merges is not an array");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added))
        return eb_fail(e, "added_tokens is not an array");

    const char *pre = recognise_pre(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), e);
    if (!pre) return -1;
    int nfc = recognise_normalizer(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), e);
    if (nfc < 0) return -1;

    int n_vocab = 0, id = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (id_of(it, &id) != 0) return eb_fail(e, "model.vocab: bad id for \"%.64s\"", it->string);
        if (id + 1 > n_vocab) n_vocab = id + 1;
    }
    if (cJSON_IsArray(added)) {
        cJSON_ArrayForEach(it, added) {
            if (id_of(cJSON_GetObjectItemCaseSensitive(it, "id"), &id) != 0 || !str_of(it, "content"))
                return eb_fail(e, "added_tokens: entry without a valid id and content");
            if (id + 1 > n_vocab) n_vocab = id + 1;
        }
    }
    int n_merges = merges ? cJSON_GetArraySize(merges) : 0;

    struct tokenizer *t;
    if (tok_create(n_vocab, n_merges, &t, e) != 0) return -1;
    if (tok_set_pre(t, pre, e) != 0) goto fail;
    t->nfc = nfc;
    t->ignore_merges = bool_of(model, "ignore_merges", 0);
    cJSON_ArrayForEach(it, vocab) {
        id_of(it, &id);
        if (bpe_set_token(&t->bpe, id, it->string, strlen(it->string), e) != 0) goto fail;
        t->type[id] = TOKEN_NORMAL;
    }
    if (cJSON_IsArray(added)) {
        cJSON_ArrayForEach(it, added) {
            id_of(cJSON_GetObjectItemCaseSensitive(it, "id"), &id);
            const char *content = str_of(it, "content");
            if (bpe_set_token(&t->bpe, id, content, strlen(content), e) != 0) goto fail;
            t->type[id] = bool_of(it, "special", 0) ? TOKEN_CONTROL : TOKEN_USER_DEFINED;
        }
    }
    if (bpe_index_vocab(&t->bpe, e) != 0) goto fail;
    int rank = 0;
    if (merges) {
        cJSON_ArrayForEach(it, merges) { /* not GetArrayItem: that walks the list each time */
            if (add_merge(t, it, rank++, e) != 0) goto fail;
        }
    }
    if (tok_finish(t, e) != 0) goto fail;
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return -1;
}

int tokenizer_from_json_text(const char *json, size_t len, const char *name,
                             struct tokenizer **out, struct eb_err *e)
{
    *out = NULL;
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return eb_fail(e, "%s: malformed JSON", name);
    int rc = build(root, out, e);
    cJSON_Delete(root);
    return rc != 0 ? eb_wrap(e, name) : 0;
}

static char *read_file(const char *path, size_t *len, struct eb_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) { eb_fail(e, "%s: cannot open", path); return NULL; }
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || n > (1L << 30) || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        eb_fail(e, "%s: cannot read (or larger than 1 GiB)", path);
        return NULL;
    }
    buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        eb_fail(e, "%s: read failed", path);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* "bos_token": "<s>" or {"content": "<s>", ...} in tokenizer_config.json. */
static int special_id(const struct tokenizer *t, const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    const char *s = cJSON_IsString(v) ? v->valuestring : str_of(v, "content");
    return s ? tokenizer_find(t, s) : -1;
}

/* BOS/EOS live in tokenizer_config.json, not in tokenizer.json. */
static void read_config(struct tokenizer *t, const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path + 1) : 0;
    char cfg_path[4096];
    if (dir + sizeof "tokenizer_config.json" > sizeof cfg_path) return;
    memcpy(cfg_path, path, dir);
    strcpy(cfg_path + dir, "tokenizer_config.json");
    struct eb_err ignored;
    size_t len;
    char *text = read_file(cfg_path, &len, &ignored);
    if (!text) return; /* optional */
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cfg) return;
    t->bos = special_id(t, cfg, "bos_token");
    t->eos = special_id(t, cfg, "eos_token");
    cJSON_Delete(cfg);
}

int tokenizer_from_json(const char *path, struct tokenizer **out, struct eb_err *e)
{
    *out = NULL;
    size_t len;
    char *text = read_file(path, &len, e);
    if (!text) return -1;
    int rc = tokenizer_from_json_text(text, len, path, out, e);
    free(text);
    if (rc == 0) read_config(*out, path);
    return rc;
}
