/* tokenizer_gguf.c - build the tokenizer from GGUF metadata (tokenizer.ggml.*). */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer_internal.h"

/* String value of key as a NUL-terminated copy in buf; -1 if absent. */
static int get_str(const struct gguf_file *g, const char *key, char *buf, size_t cap)
{
    const char *s;
    size_t len;
    if (gguf_get_str(g, key, &s, &len) != 0) return -1;
    if (len >= cap) len = cap - 1;
    memcpy(buf, s, len);
    buf[len] = 0;
    return 0;
}

static int load(const struct gguf_file *g, struct tokenizer **out, struct eb_err *e)
{
    char model[32], pre[64];
    if (get_str(g, "tokenizer.ggml.model", model, sizeof model) != 0)
        return eb_fail(e, "no tokenizer.ggml.model in the metadata");
    if (strcmp(model, "gpt2") != 0)
        return eb_fail(e, "tokenizer.ggml.model is \"%s\"; only \"gpt2\" (byte-level BPE) is supported",
                       model);
    if (get_str(g, "tokenizer.ggml.pre", pre, sizeof pre) != 0)
        return eb_fail(e, "no tokenizer.ggml.pre in the metadata (the pre-tokenizer must be named)");

    int type;
    uint64_t n_tokens, n_merges = 0, n_types = 0;
    if (gguf_get_arr_info(g, "tokenizer.ggml.tokens", &type, &n_tokens) != 0 || type != GGUF_STRING)
        return eb_fail(e, "tokenizer.ggml.tokens missing or not a string array");
    if (n_tokens == 0 || n_tokens > (1u << 24))
        return eb_fail(e, "tokenizer.ggml.tokens: %llu tokens is out of range",
                       (unsigned long long)n_tokens);
    int have_merges = gguf_get_arr_info(g, "tokenizer.ggml.merges", &type, &n_merges) == 0;
    if (!have_merges || type != GGUF_STRING)
        return eb_fail(e, "tokenizer.ggml.merges missing or not a string array");
    if (n_merges > (1u << 24)) return eb_fail(e, "tokenizer.ggml.merges: too many merges");
    int have_types = gguf_get_arr_info(g, "tokenizer.ggml.token_type", &type, &n_types) == 0;
    if (have_types && n_types != n_tokens)
        return eb_fail(e, "tokenizer.ggml.token_type has %llu entries for %llu tokens",
                       (unsigned long long)n_types, (unsigned long long)n_tokens);

    struct tokenizer *t;
    if (tok_create((int)n_tokens, (int)n_merges, &t, e) != 0) return -1;
    if (tok_set_pre(t, pre, e) != 0) goto fail;
    /* Settings of the models' own tokenizer.json files, which GGUF does not carry. */
    t->nfc = t->pre == PRETOK_QWEN2;
    t->ignore_merges = t->pre == PRETOK_LLAMA3;

    for (uint64_t i = 0; i < n_tokens; i++) {
        const char *s;
        size_t len;
        if (gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &s, &len) != 0) {
            eb_fail(e, "tokenizer.ggml.tokens[%llu] unreadable", (unsigned long long)i);
            goto fail;
        }
        if (bpe_set_token(&t->bpe, (int)i, s, len, e) != 0) goto fail;
        int64_t ty = TOKEN_NORMAL;
        if (have_types && gguf_get_arr_int(g, "tokenizer.ggml.token_type", i, &ty) != 0) {
            eb_fail(e, "tokenizer.ggml.token_type[%llu] unreadable", (unsigned long long)i);
            goto fail;
        }
        t->type[i] = (ty >= 1 && ty <= 6) ? (int)ty : TOKEN_NORMAL;
    }
    if (bpe_index_vocab(&t->bpe, e) != 0) goto fail;

    for (uint64_t i = 0; i < n_merges; i++) {
        const char *s;
        size_t len;
        if (gguf_get_arr_str(g, "tokenizer.ggml.merges", i, &s, &len) != 0) {
            eb_fail(e, "tokenizer.ggml.merges[%llu] unreadable", (unsigned long long)i);
            goto fail;
        }
        const char *sp = memchr(s, ' ', len);
        if (!sp || sp == s || sp + 1 == s + len || memchr(sp + 1, ' ', (size_t)(s + len - sp - 1))) {
            eb_fail(e, "tokenizer.ggml.merges[%llu] is not \"left right\"", (unsigned long long)i);
            goto fail;
        }
        if (bpe_add_merge(&t->bpe, s, (size_t)(sp - s), sp + 1, (size_t)(s + len - sp - 1), e) != 0)
            goto fail;
    }

    int64_t v;
    if (gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v) == 0) {
        if (v < 0 || (uint64_t)v >= n_tokens) { eb_fail(e, "bos_token_id %lld out of range", (long long)v); goto fail; }
        t->bos = (int)v;
    }
    if (gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v) == 0) {
        if (v < 0 || (uint64_t)v >= n_tokens) { eb_fail(e, "eos_token_id %lld out of range", (long long)v); goto fail; }
        t->eos = (int)v;
    }
    if (tok_finish(t, e) != 0) goto fail;
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return -1;
}

int tokenizer_from_gguf(const struct gguf_file *g, struct tokenizer **out, struct eb_err *e)
{
    *out = NULL;
    if (load(g, out, e) != 0) return eb_wrap(e, gguf_path(g) ? gguf_path(g) : "gguf");
    return 0;
}
