// fuzz-sources: model/tokenizer.c model/tokenizer_json.c model/bpe.c model/pretok.c model/unicode.c model/unicode_data.c model/utf8_stream.c util/err.c
// fuzz-libs: -lcjson
/* fuzz_tokenizer.c - libFuzzer entry for the tokenizer.  The first input byte
 * picks one of the three reference tokenizers (tests/fixtures/tok/) and
 * parse_special; the rest is the text.  Valid UTF-8 must encode, every id be
 * in range, and decode give back the text (NFC-normalized for r1-qwen, less
 * any byte the vocabulary has no token for, as HF drops those), also when decoded
 * token by token through the streaming decoder; invalid UTF-8 must be refused
 * with a message.  Run from the repository root (it unpacks the fixtures with
 * the xz tool).  Built by tools/fuzz/build.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/bpe.h"
#include "model/tokenizer.h"
#include "model/unicode.h"

static struct tokenizer *toks[3];
static unsigned char has_byte[3][256]; /* does the vocabulary have this byte's token? */

static struct tokenizer *load(const char *name)
{
    char dir[] = "/tmp/eb_fuzz_tok_XXXXXX", cmd[1024], path[256];
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    snprintf(cmd, sizeof cmd, "xz -dc tests/fixtures/tok/%s.tokenizer.json.xz > %s", name, path);
    if (system(cmd) != 0) {
        fprintf(stderr, "fuzz_tokenizer: cannot unpack %s (run from the repository root)\n", name);
        exit(1);
    }
    struct eb_err e = {0};
    struct tokenizer *t;
    if (tokenizer_from_json(path, &t, &e) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", e.msg);
        exit(1);
    }
    unlink(path);
    rmdir(dir);
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    toks[0] = load("r1-qwen");
    toks[1] = load("llama3");
    toks[2] = load("smollm2");
    for (int k = 0; k < 3; k++) {
        for (int b = 0; b < 256; b++) {
            char mapped[8] = { 0 };
            utf8_encode(bpe_byte_to_cp((unsigned char)b), (unsigned char *)mapped);
            has_byte[k][b] = tokenizer_find(toks[k], mapped) >= 0;
        }
    }
    return 0;
}

/* Token by token through the streaming decoder: the same text when it is
 * valid UTF-8 (it may not be: SmolLM2 lacks the tokens of some lead bytes,
 * and a dropped lead byte strands its continuation bytes), and valid UTF-8
 * output in any case. */
static void check_stream(const struct tokenizer *t, const int *ids, int n, const char *want,
                         size_t want_len)
{
    struct utf8_stream s = { { 0 }, 0 };
    size_t cap = want_len * 3 + 64;
    char *out = malloc(cap);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *b = tokenizer_token_bytes(t, ids[i], &len);
        if (!b) abort();
        if (o + 3 * len + 16 > cap) abort();
        o += utf8_stream_feed(&s, b, len, out + o, cap - o);
    }
    o += utf8_stream_finish(&s, out + o, cap - o);
    if (utf8_validate((const unsigned char *)out, o) != o) abort();
    if (utf8_validate((const unsigned char *)want, want_len) == want_len &&
        (o != want_len || memcmp(out, want, o) != 0))
        abort();
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    int which = (data[0] >> 1) % 3;
    const struct tokenizer *t = toks[which];
    int special = data[0] & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int *ids, n;
    struct eb_err e = {0};
    int valid = utf8_validate((const unsigned char *)text, len) == len;
    int rc = tokenizer_encode(t, text, len, special, &ids, &n, &e);
    if (!valid) {
        if (rc != -1 || !e.msg[0]) abort();
        return 0;
    }
    if (rc != 0) abort();
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tokenizer_n_vocab(t)) abort();
    }
    char *dec, *want;
    size_t dlen, wlen;
    if (tokenizer_decode(t, ids, n, &dec, &dlen, &e) != 0) abort();
    /* Only r1-qwen normalizes; bytes without a token of their own are dropped. */
    if (which == 0) {
        if (unicode_nfc(text, len, &want, &wlen) != 0) abort();
    } else {
        want = malloc(len + 1);
        wlen = 0;
        for (size_t i = 0; i < len; i++) {
            if (has_byte[which][(unsigned char)text[i]]) want[wlen++] = text[i];
        }
    }
    if (dlen != wlen || memcmp(dec, want, wlen) != 0) abort();
    check_stream(t, ids, n, want, wlen);
    free(want);
    free(dec);
    free(ids);
    return 0;
}
