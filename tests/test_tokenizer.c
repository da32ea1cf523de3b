/* test_tokenizer.c - byte-level BPE against Hugging Face references.
 *
 * The fixtures (tests/fixtures/tok/, made by tools/golden/gen_tokens.py) hold
 * three reference tokenizers (SmolLM2, R1-Distill-Qwen, Llama 3) as
 * tokenizer.json files and, for ~300 strings each, the ids HF tokenizers gives
 * with added tokens matched and without.  Every id must be equal, and decode
 * must give the text back (NFC-normalized where the model normalizes). */
#include <dirent.h>
#include <time.h>

#include "model/bpe.h"
#include "model/gguf.h"
#include "model/unicode.h"
#include "test.h"
#include "tok_fixture.h"

static const char SMOL_GGUF[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

/* ---- Unicode ------------------------------------------------------------ */

static int nfc_is(const char *in, const char *want)
{
    char *out;
    size_t n;
    if (unicode_nfc(in, strlen(in), &out, &n) != 0) return 0;
    int ok = n == strlen(want) && memcmp(out, want, n) == 0;
    free(out);
    return ok;
}

static void test_unicode(void)
{
    unsigned int cp;
    CHECK(utf8_decode((const unsigned char *)"\xC3\xA9", 2, &cp) == 2 && cp == 0xE9);
    CHECK(utf8_decode((const unsigned char *)"\xF0\x9F\x98\x80", 4, &cp) == 4 && cp == 0x1F600);
    CHECK(utf8_decode((const unsigned char *)"\xC0\x80", 2, &cp) == 0);          /* overlong */
    CHECK(utf8_decode((const unsigned char *)"\xED\xA0\x80", 3, &cp) == 0);      /* surrogate */
    CHECK(utf8_decode((const unsigned char *)"\xF4\x90\x80\x80", 4, &cp) == 0);  /* > U+10FFFF */
    CHECK(utf8_decode((const unsigned char *)"\xE4\xBD", 2, &cp) == 0);          /* truncated */
    CHECK(utf8_validate((const unsigned char *)"ab\xFF", 3) == 2);
    CHECK(unicode_is_letter('a') && unicode_is_letter(0x4F60) && !unicode_is_letter('1'));
    CHECK(unicode_is_letter(0x1C89)); /* new in Unicode 16, a letter to the reference */
    CHECK(unicode_is_number(0x663) && unicode_is_number(0x216B) && !unicode_is_number('x'));
    CHECK(unicode_is_space(0x3000) && unicode_is_space(0x85) && !unicode_is_space(0x200B));
    CHECK(nfc_is("cafe\xCC\x81", "caf\xC3\xA9"));                       /* e + acute */
    CHECK(nfc_is("o\xCC\x82\xCC\xA3", "\xE1\xBB\x99"));                  /* reordered, composed */
    CHECK(nfc_is("o\xCC\xA3\xCC\x82", "\xE1\xBB\x99"));
    CHECK(nfc_is("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81")); /* Hangul L V T */
    CHECK(nfc_is("\xE2\x84\xAB", "\xC3\x85"));                           /* Angstrom sign */
    CHECK(nfc_is("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"));           /* excluded composite */
    CHECK(nfc_is("plain ascii", "plain ascii"));
}

/* ---- Pre-tokenizer scanners --------------------------------------------- */

#include "model/pretok.h"

/* Pre-tokens of text joined with '|'. */
static void pieces(enum pretok_kind k, const char *text, char *out, size_t cap)
{
    struct pretok_iter it;
    size_t a, b, o = 0;
    pretok_begin(&it, k, text, strlen(text));
    out[0] = 0;
    while (pretok_next(&it, &a, &b)) {
        if (o && o + 1 < cap) out[o++] = '|';
        for (size_t i = a; i < b && o + 1 < cap; i++) out[o++] = text[i];
        out[o] = 0;
    }
}

static void test_pretok(void)
{
    char buf[256];
    pieces(PRETOK_QWEN2, "Hello  world 12345\n\n x", buf, sizeof buf);
    CHECK_STR(buf, "Hello| | world| |1|2|3|4|5|\n\n| x");
    pieces(PRETOK_LLAMA3, "Hello  world 12345\n\n x", buf, sizeof buf);
    CHECK_STR(buf, "Hello| | world| |123|45|\n\n| x");
    pieces(PRETOK_QWEN2, "I'M don'T 'sa", buf, sizeof buf);
    CHECK_STR(buf, "I|'M| don|'T| '|sa");
    pieces(PRETOK_GPT2, "I'M don't  x", buf, sizeof buf);
    CHECK_STR(buf, "I|'|M| don|'t| | x");
    pieces(PRETOK_SMOLLM, "a  1b 22", buf, sizeof buf);
    CHECK_STR(buf, "a|  |1|b| |2|2");
    pieces(PRETOK_QWEN2, "x ...\n\ny\t", buf, sizeof buf);
    CHECK_STR(buf, "x| ...\n\n|y|\t");
    pieces(PRETOK_QWEN2, "", buf, sizeof buf);
    CHECK_STR(buf, "");
}

/* ---- Reference fixtures ------------------------------------------------- */

/* The three reference tokenizers, loaded once; index as in the fuzzer. */
static const char *const MODEL_NAMES[3] = { "r1-qwen", "llama3", "smollm2" };
static struct tokenizer *loaded[3];
static char load_why[3][512];
static int load_tried[3];

static struct tokenizer *fixture_tok(int which)
{
    if (!load_tried[which]) {
        load_tried[which] = 1;
        loaded[which] = tok_fixture_load(MODEL_NAMES[which], load_why[which], sizeof load_why[which]);
    }
    return loaded[which];
}

static struct tokenizer *qwen(void) { return fixture_tok(0); }

/* Encode every fixture string both ways and decode; returns failures. */
static int check_fixture_rows(const struct tokenizer *t, const char *fixture, int *n_rows)
{
    int n, bad = 0;
    cJSON **rows = tok_fixture_jsonl(fixture, &n);
    *n_rows = n;
    if (!rows) return -1;
    for (int r = 0; r < n; r++) {
        const char *text = cJSON_GetObjectItem(rows[r], "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(rows[r], "ids");
        const cJSON *want_plain = cJSON_GetObjectItem(rows[r], "ids_plain");
        const cJSON *want_dec = cJSON_GetObjectItem(rows[r], "decoded");
        if (!want_plain) want_plain = want;
        for (int special = 1; special >= 0; special--) {
            int *ids, nids;
            struct eb_err e = {0};
            if (tokenizer_encode(t, text, strlen(text), special, &ids, &nids, &e) != 0) {
                fprintf(stderr, "  %s row %d: encode failed: %s\n", fixture, r, e.msg);
                bad++;
                continue;
            }
            if (!tok_fixture_ids_equal(ids, nids, special ? want : want_plain)) {
                if (bad < 5) {
                    fprintf(stderr, "  %s row %d (parse_special=%d) differs for \"%s\"\n", fixture, r,
                            special, text);
                    tok_fixture_print_ids("got", ids, nids);
                }
                bad++;
            }
            char *dec;
            size_t dlen;
            const char *expect = want_dec ? want_dec->valuestring : text;
            if (tokenizer_decode(t, ids, nids, &dec, &dlen, &e) != 0 || strcmp(dec, expect) != 0) {
                if (bad < 5) fprintf(stderr, "  %s row %d: decode differs\n", fixture, r);
                bad++;
            }
            free(dec);
            free(ids);
        }
    }
    tok_fixture_free_rows(rows, n);
    return bad;
}

static void check_model(int which, int n_vocab, const char *pre, int bos, int eos)
{
    char fixture[256];
    const char *name = MODEL_NAMES[which];
    struct tokenizer *t = fixture_tok(which);
    const char *why = load_why[which];
    if (!t && strstr(why, "load failed")) CHECK_MSG(0, "%s", why);
    if (!t) SKIP("%s", why);
    CHECK(tokenizer_n_vocab(t) == n_vocab);
    CHECK_STR(tokenizer_pre_name(t), pre);
    CHECK(tokenizer_bos(t) == bos);
    CHECK(tokenizer_eos(t) == eos);
    snprintf(fixture, sizeof fixture, "tests/fixtures/tok/%s.jsonl", name);
    int n_rows, bad = check_fixture_rows(t, fixture, &n_rows);
    CHECK_MSG(n_rows >= 200, "%s has %d rows", fixture, n_rows);
    CHECK_MSG(bad == 0, "%d mismatches in %s", bad, fixture);
}

static void test_smollm2_json(void) { check_model(2, 49152, "smollm", 1, 2); }
static void test_r1_qwen_json(void) { check_model(0, 151665, "qwen2", 151646, 151643); }
static void test_llama3_json(void) { check_model(1, 128256, "llama-bpe", 128000, 128001); }

/* The same SmolLM2 fixture through the real model file's GGUF metadata. */
static void test_smollm2_gguf(void)
{
    if (access(SMOL_GGUF, R_OK) != 0) SKIP("%s absent (make deps fetches it)", SMOL_GGUF);
    struct eb_err e = {0};
    struct gguf_file *g;
    if (gguf_open(SMOL_GGUF, &g, &e) != 0) { CHECK_MSG(0, "%s", e.msg); return; }
    struct tokenizer *t;
    int rc = tokenizer_from_gguf(g, &t, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc == 0) {
        CHECK(tokenizer_n_vocab(t) == 49152);
        CHECK_STR(tokenizer_pre_name(t), "smollm");
        CHECK(tokenizer_bos(t) == 1 && tokenizer_eos(t) == 2);
        CHECK(tokenizer_find(t, "<|im_end|>") == 2);
        int n_rows, bad = check_fixture_rows(t, "tests/fixtures/tok/smollm2.jsonl", &n_rows);
        CHECK(n_rows >= 200);
        CHECK_MSG(bad == 0, "%d mismatches", bad);
        tokenizer_free(t);
    }
    gguf_close(g);
}

/* ---- Small GGUF and JSON tokenizers: construction and errors ------------ */

static void test_tiny_gguf(void)
{
    struct eb_err e = {0};
    struct gguf_file *g;
    struct tokenizer *t;
    if (gguf_open(FIXTURE("tok/tiny-ok.gguf"), &g, &e) != 0) { CHECK_MSG(0, "%s", e.msg); return; }
    CHECK_MSG(tokenizer_from_gguf(g, &t, &e) == 0, "%s", e.msg);
    gguf_close(g);
    if (!t) return;
    int *ids, n;
    CHECK(tokenizer_encode(t, "abc<|x|>ab", 10, 1, &ids, &n, &e) == 0);
    CHECK(n == 3 && ids[0] == 257 && ids[1] == 258 && ids[2] == 256);
    free(ids);
    CHECK(tokenizer_encode(t, "<|x|>", 5, 0, &ids, &n, &e) == 0);
    CHECK(n == 5); /* not matched: plain bytes '<' '|' 'x' '|' '>' */
    free(ids);
    CHECK(tokenizer_bos(t) == 258);
    tokenizer_free(t);

    static const struct { const char *file, *msg; } bad[] = {
        { "tok/tiny-unknown-pre.gguf", "unknown pre-tokenizer \"mystery\"" },
        { "tok/tiny-spm.gguf", "only \"gpt2\"" },
        { "tok/tiny-bad-merge.gguf", "merge 1: token not in the vocabulary" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/fixtures/%s", bad[i].file);
        if (gguf_open(path, &g, &e) != 0) { CHECK_MSG(0, "%s", e.msg); continue; }
        t = NULL;
        CHECK(tokenizer_from_gguf(g, &t, &e) == -1 && t == NULL);
        CHECK_MSG(strstr(e.msg, bad[i].msg) && strstr(e.msg, bad[i].file), "%s", e.msg);
        gguf_close(g);
    }
}

/* A byte-level vocabulary as JSON object members: all 256 byte characters. */
static void byte_vocab(char *out, size_t cap)
{
    size_t o = 0;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        unsigned int cp = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE
                              ? (unsigned int)b : 0x100 + (unsigned int)n++;
        unsigned char u[4];
        int k = utf8_encode(cp, u);
        if (b == '"' || b == '\\') o += (size_t)snprintf(out + o, cap - o, "\"\\%c\": %d, ", b, b);
        else o += (size_t)snprintf(out + o, cap - o, "\"%.*s\": %d, ", k, (char *)u, b);
    }
}

static int load_json(const char *extra_vocab, const char *merges, const char *pre, const char *norm,
                     struct tokenizer **t, struct eb_err *e)
{
    static char vocab[8192], json[16384];
    byte_vocab(vocab, sizeof vocab);
    snprintf(json, sizeof json,
             "{\"added_tokens\": [{\"id\": 300, \"content\": \"<think>\", \"special\": false}],"
             " \"normalizer\": %s, \"pre_tokenizer\": %s,"
             " \"model\": {\"type\": \"BPE\", \"vocab\": {%s %s}, \"merges\": %s}}",
             norm, pre, vocab, extra_vocab, merges);
    return tokenizer_from_json_text(json, strlen(json), "tiny.json", t, e);
}

static const char QWEN_PRE[] =
    "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}"
    "\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\","
    " \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}";

static void test_json_construction(void)
{
    struct eb_err e = {0};
    struct tokenizer *t;
    /* "aa" merges first (rank 0), so "aaa" -> "aa" + "a" (leftmost on ties). */
    const char *extra = "\"aa\": 256, \"ab\": 257, \"aab\": 258";
    for (int form = 0; form < 2; form++) {
        const char *merges = form ? "[[\"a\", \"a\"], [\"a\", \"b\"], [\"aa\", \"b\"]]"
                                  : "[\"a a\", \"a b\", \"aa b\"]";
        int rc = load_json(extra, merges, QWEN_PRE, "{\"type\": \"NFC\"}", &t, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        if (rc != 0) continue;
        int *ids, n;
        CHECK(tokenizer_encode(t, "aaa", 3, 1, &ids, &n, &e) == 0);
        CHECK(n == 2 && ids[0] == 256 && ids[1] == 'a');
        free(ids);
        CHECK(tokenizer_encode(t, "aab<think>", 10, 1, &ids, &n, &e) == 0);
        CHECK(n == 2 && ids[0] == 258 && ids[1] == 300);
        free(ids);
        CHECK(tokenizer_find(t, "<think>") == 300);
        CHECK(tokenizer_bos(t) == -1);
        tokenizer_free(t);
    }

    static const struct { const char *merges, *pre, *norm, *msg; } bad[] = {
        { "[\"a q\"]", QWEN_PRE, "null", "merged token not in the vocabulary" },
        { "[\"a\"]", QWEN_PRE, "null", "is not \"left right\"" },
        { "[[1, 2]]", QWEN_PRE, "null", "neither" },
        { "[]", QWEN_PRE, "{\"type\": \"NFKC\"}", "normalizer \"NFKC\" not supported" },
        { "[]", "null", "null", "no pre_tokenizer" },
        { "[]", "{\"type\": \"Whitespace\"}", "null", "pre_tokenizer not supported" },
        { "[]", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
                "{\"Regex\": \"\\\\w+\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\":"
                " \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}",
          "null", "unknown split regex" },
        { "[]", "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}", "null", "not supported" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t = NULL;
        CHECK(load_json(extra, bad[i].merges, bad[i].pre, bad[i].norm, &t, &e) == -1 && !t);
        CHECK_MSG(strstr(e.msg, bad[i].msg) && strncmp(e.msg, "tiny.json: ", 11) == 0, "case %zu: %s",
                  i, e.msg);
    }
    CHECK(tokenizer_from_json_text("{\"model\": ", 10, "x.json", &t, &e) == -1);
    CHECK_STR(e.msg, "x.json: malformed JSON");
    CHECK(tokenizer_from_json_text("{\"model\": {\"type\": \"Unigram\"}}", 30, "x.json", &t, &e) == -1);
    CHECK(strstr(e.msg, "only BPE") != NULL);
    CHECK(tokenizer_from_json("tests/fixtures/tok/no-such.json", &t, &e) == -1);
    CHECK(strstr(e.msg, "cannot open") != NULL);
}

/* ---- Encode/decode edge cases, streaming, speed ------------------------- */

static void test_bad_input(void)
{
    struct tokenizer *t = qwen();
    if (!t) SKIP("r1-qwen fixture unavailable");
    struct eb_err e = {0};
    int *ids = NULL, n = -1;
    CHECK(tokenizer_encode(t, "ok \xC3(", 5, 1, &ids, &n, &e) == -1 && ids == NULL && n == 0);
    CHECK_STR(e.msg, "tokenizer: invalid UTF-8 at byte 3");
    CHECK(tokenizer_encode(t, "\xED\xA0\x80", 3, 0, &ids, &n, &e) == -1);
    CHECK(tokenizer_encode(t, "", 0, 1, &ids, &n, &e) == 0 && n == 0 && ids != NULL);
    free(ids);
    int bad_ids[] = { 1, 151665 };
    char *out = NULL;
    CHECK(tokenizer_decode(t, bad_ids, 2, &out, NULL, &e) == -1 && out == NULL);
    CHECK(strstr(e.msg, "151665 out of range") != NULL);
    size_t len;
    CHECK(tokenizer_token_bytes(t, -1, &len) == NULL && tokenizer_token_bytes(t, 151665, &len) == NULL);
    const char *b = tokenizer_token_bytes(t, 198, &len);
    CHECK(b && len == 1 && b[0] == '\n');
    b = tokenizer_token_bytes(t, 151644, &len);
    CHECK(b && len == strlen("<\xEF\xBD\x9CUser\xEF\xBD\x9C>") && memcmp(b, "<\xEF\xBD\x9CUser", 8) == 0);
}

static void test_streaming(void)
{
    struct utf8_stream s = { { 0 }, 0 };
    char out[64];
    /* Byte by byte: nothing printed until a character is whole. */
    const char *text = "a\xE4\xBD\xA0\xF0\x9F\x98\x80";
    size_t total = 0;
    char all[64];
    for (size_t i = 0; i < strlen(text); i++) {
        size_t k = utf8_stream_feed(&s, text + i, 1, out, sizeof out);
        CHECK(k == 0 || k == 1 || k == 3 || k == 4);
        memcpy(all + total, out, k);
        total += k;
    }
    total += utf8_stream_finish(&s, all + total, sizeof all - total);
    CHECK(total == strlen(text) && memcmp(all, text, total) == 0);
    /* Bytes that can never be a character become U+FFFD; so does an unfinished tail. */
    size_t k = utf8_stream_feed(&s, "\xFFx\xE4\xBD", 4, out, sizeof out);
    CHECK(k == 4 && memcmp(out, "\xEF\xBF\xBDx", 4) == 0);
    k = utf8_stream_feed(&s, "y", 1, out, sizeof out);
    CHECK(k == 4 && memcmp(out, "\xEF\xBF\xBDy", 4) == 0);
    k = utf8_stream_feed(&s, "\xF0\x9F", 2, out, sizeof out);
    CHECK(k == 0);
    k = utf8_stream_finish(&s, out, sizeof out);
    CHECK(k == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0);

    /* Token by token with a real vocabulary: emoji and CJK split across tokens. */
    struct tokenizer *t = qwen();
    if (!t) SKIP("r1-qwen fixture unavailable");
    const char *s2 = "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 \xE9\xBE\x98\xE7\x8C\x81 ok";
    int *ids, n;
    struct eb_err e = {0};
    CHECK(tokenizer_encode(t, s2, strlen(s2), 1, &ids, &n, &e) == 0);
    int split_seen = 0;
    total = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *b = tokenizer_token_bytes(t, ids[i], &len);
        if (utf8_validate((const unsigned char *)b, len) != len) split_seen = 1;
        k = utf8_stream_feed(&s, b, len, out, sizeof out);
        CHECK(utf8_validate((const unsigned char *)out, k) == k);
        memcpy(all + total, out, k);
        total += k;
    }
    total += utf8_stream_finish(&s, all + total, sizeof all - total);
    CHECK(split_seen);
    CHECK(total == strlen(s2) && memcmp(all, s2, total) == 0);
    free(ids);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_speed(void)
{
    struct tokenizer *t = qwen();
    if (!t) SKIP("r1-qwen fixture unavailable");
    const char *para = "The quick brown fox, 12345 times: \\frac{a}{b} = 0.5!  \xE4\xBD\xA0\xE5\xA5\xBD "
                       "caf\xC3\xA9 \xF0\x9F\x98\x80\n\n";
    size_t plen = strlen(para), len = 0;
    char *text = malloc(21000);
    while (len + plen < 20480) { memcpy(text + len, para, plen); len += plen; }
    memset(text + len, 'x', 500); /* and one long pre-token */
    len += 500;
    int *ids, n;
    struct eb_err e = {0};
    double t0 = now_s();
    CHECK(tokenizer_encode(t, text, len, 1, &ids, &n, &e) == 0);
    double dt = now_s() - t0;
    fprintf(stderr, "  (encoded %zu bytes into %d tokens in %.1f ms)\n", len, n, dt * 1e3);
    CHECK_MSG(dt < 0.5, "%.3f s", dt);
    char *dec;
    size_t dlen;
    CHECK(tokenizer_decode(t, ids, n, &dec, &dlen, &e) == 0 && dlen == len && memcmp(dec, text, len) == 0);
    free(dec);
    free(ids);
    free(text);
}

/* ---- Fuzz corpus replay (same checks as tools/fuzz/fuzz_tokenizer.c) ----- */

/* What decode must give back for valid text: NFC for r1-qwen; elsewhere the
 * text less any byte whose token the vocabulary lacks (HF drops those). */
static char *expected_text(int which, const unsigned char *data, size_t size, size_t *len)
{
    char *out;
    if (which == 0) return unicode_nfc((const char *)data, size, &out, len) == 0 ? out : NULL;
    out = malloc(size + 1);
    *len = 0;
    for (size_t i = 0; i < size; i++) {
        char mapped[8] = { 0 };
        utf8_encode(bpe_byte_to_cp(data[i]), (unsigned char *)mapped);
        if (tokenizer_find(loaded[which], mapped) >= 0) out[(*len)++] = (char)data[i];
    }
    return out;
}

static int replay_one(int which, const unsigned char *data, size_t size, int special)
{
    const struct tokenizer *t = loaded[which];
    int *ids, n;
    struct eb_err e = {0};
    int valid = utf8_validate(data, size) == size;
    int rc = tokenizer_encode(t, (const char *)data, size, special, &ids, &n, &e);
    if (!valid) return rc == -1 && e.msg[0];
    if (rc != 0) return 0;
    char *dec, *want;
    size_t dlen, wlen;
    int ok = tokenizer_decode(t, ids, n, &dec, &dlen, &e) == 0;
    if (ok) {
        want = expected_text(which, data, size, &wlen);
        ok = want && dlen == wlen && memcmp(dec, want, wlen) == 0;
        free(want);
        free(dec);
    }
    free(ids);
    return ok;
}

static void test_fuzz_corpus(void)
{
    for (int k = 0; k < 3; k++) {
        if (!fixture_tok(k)) SKIP("%s fixture unavailable", MODEL_NAMES[k]);
    }
    const char *dir = "tests/fuzz_corpus/tokenizer";
    DIR *d = opendir(dir);
    if (!d) SKIP("%s absent", dir);
    struct dirent *de;
    int files = 0;
    static unsigned char buf[1 << 16];
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        size_t size = fread(buf, 1, sizeof buf, f);
        fclose(f);
        files++;
        /* As in the fuzzer: byte 0 picks the tokenizer and parse_special. */
        if (size == 0) continue;
        CHECK_MSG(replay_one((buf[0] >> 1) % 3, buf + 1, size - 1, buf[0] & 1), "%s", path);
    }
    closedir(d);
    CHECK(files > 0);
}

int main(void)
{
    RUN(test_unicode);
    RUN(test_pretok);
    RUN(test_smollm2_json);
    RUN(test_r1_qwen_json);
    RUN(test_llama3_json);
    RUN(test_smollm2_gguf);
    RUN(test_tiny_gguf);
    RUN(test_json_construction);
    RUN(test_bad_input);
    RUN(test_streaming);
    RUN(test_speed);
    RUN(test_fuzz_corpus);
    for (int k = 0; k < 3; k++) tokenizer_free(loaded[k]);
    return test_summary("tokenizer");
}
