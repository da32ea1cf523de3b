/* test_runkey.c - SHA-256 test vectors, canonical JSON, and run keys that
 * ignore key order but change with every parameter. */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#include "harness/exp/runkey.h"
#include "util/sha256.h"

static void hex_of(const char *s, size_t n, char out[65]) { sha256_hex(s, n, out); }

static void test_sha256_vectors(void)
{
    char h[65];
    hex_of("abc", 3, h);
    CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hex_of("", 0, h);
    CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(two, strlen(two), h);
    CHECK_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* Lengths around the padding boundaries (55/56 bytes, one and two blocks);
 * expected digests from Python's hashlib. */
static void test_sha256_boundaries(void)
{
    static const struct { int n; const char *hex; } cases[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
    };
    char buf[128], h[65];
    memset(buf, 'a', sizeof buf);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hex_of(buf, (size_t)cases[i].n, h);
        CHECK_MSG(strcmp(h, cases[i].hex) == 0, "length %d: %s", cases[i].n, h);
    }
}

/* A million 'a' fed in uneven pieces through the streaming interface. */
static void test_sha256_streaming(void)
{
    static char chunk[1024];   /* steps below stay under 1010 */
    memset(chunk, 'a', sizeof chunk);
    struct sha256 c;
    sha256_init(&c);
    size_t left = 1000000, step = 1;
    while (left > 0) {
        size_t n = step < left ? step : left;
        sha256_update(&c, chunk, n);
        left -= n;
        step = step % 997 + 13;
    }
    unsigned char d[32];
    sha256_final(&c, d);
    char h[65];
    for (int i = 0; i < 32; i++) snprintf(h + 2 * i, 3, "%02x", d[i]);
    CHECK_STR(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_json_canonical(void)
{
    struct eb_err e = {0};
    char *a = NULL, *b = NULL;
    CHECK(json_canonical("{ \"b\": [1, 2.50, {\"z\":1,\"a\":true}], \"a\": \"x\\ty\", \"c\": null }",
                         &a, &e) == 0);
    CHECK_STR(a, "{\"a\":\"x\\ty\",\"b\":[1,2.5,{\"a\":true,\"z\":1}],\"c\":null}");
    /* Numbers have one spelling: 1.0, 1e0 and 1 are the same value. */
    CHECK(json_canonical("[1.0, 1e0, -0, 0.1, 1e300]", &b, &e) == 0);
    CHECK_STR(b, "[1,1,0,0.10000000000000001,1.0000000000000001e+300]");
    free(a);
    free(b);

    char *bad = (char *)1;
    CHECK(json_canonical("{\"a\":1,\"a\":2}", &bad, &e) == -1);
    CHECK(bad == NULL);
    CHECK(strstr(e.msg, "duplicate key \"a\"") != NULL);
    CHECK(json_canonical("{\"a\":", &bad, &e) == -1);
    CHECK(strstr(e.msg, "not valid JSON") != NULL);
    CHECK(json_canonical("{} trailing", &bad, &e) == -1);
}

static struct runkey_params base_params(void)
{
    struct runkey_params p = {
        .model = "smollm2-135m@sha256:0123",
        .dataset = "gsm8k",
        .data_hash = "d00d",
        .data_offset = 0,
        .data_limit = 50,
        .prompt_template = "<|user|>{problem}\nPlease reason step by step.",
        .policy = "rkv",
        .params_json = "{\"window\": 8, \"lambda\": 0.1, \"kernel\": 7}",
        .budget = 512,
        .batch_size = 10,
        .batching = "grouped",
        .sampling_json = "{\"greedy\": true}",
        .seed = 42,
        .max_new_tokens = 1024,
        .extra_json = NULL,
        .code_version = "abc1234",
    };
    return p;
}

static void key_of(const struct runkey_params *p, char out[65])
{
    struct eb_err e = {0};
    if (runkey_compute(p, out, &e) != 0) {
        fprintf(stderr, "  runkey_compute: %s\n", e.msg);
        out[0] = '\0';
    }
}

static void test_key_order_independent(void)
{
    struct runkey_params p = base_params(), q = base_params();
    q.params_json = "{\"kernel\":7,\n \"window\":8, \"lambda\":1e-1}";
    q.sampling_json = " { \"greedy\" : true } ";
    char a[65], b[65];
    key_of(&p, a);
    key_of(&q, b);
    CHECK(strlen(a) == RUNKEY_HEX_LEN);
    CHECK_STR(a, b);
    /* Stable across builds: the serialisation is part of the contract. */
    struct eb_err e = {0};
    char *text = NULL;
    CHECK(runkey_serialize(&p, &text, &e) == 0);
    CHECK_STR(text,
              "{\"batch_size\":10,\"batching\":\"grouped\",\"budget\":512,"
              "\"code_version\":\"abc1234\",\"data_limit\":50,\"data_offset\":0,\"data_sha256\":\"d00d\","
              "\"dataset\":\"gsm8k\",\"extra\":null,\"max_new_tokens\":1024,"
              "\"model\":\"smollm2-135m@sha256:0123\","
              "\"params\":{\"kernel\":7,\"lambda\":0.10000000000000001,\"window\":8},"
              "\"policy\":\"rkv\",\"prompt_template\":\"<|user|>{problem}\\nPlease reason step by step.\","
              "\"runkey_format\":2,\"sampling\":{\"greedy\":true},\"seed\":\"42\"}");
    char h[65];
    sha256_hex(text, strlen(text), h);
    CHECK_STR(h, a);
    free(text);
}

static void test_every_parameter_changes_key(void)
{
    char ref[65], k[65];
    struct runkey_params base = base_params();
    key_of(&base, ref);
    CHECK(ref[0] != '\0');
    struct runkey_params v[18];
    int n = 0;
    v[n] = base; v[n++].model = "smollm2-135m@sha256:0124";
    v[n] = base; v[n++].dataset = "math500";
    v[n] = base; v[n++].data_offset = 1;
    v[n] = base; v[n++].data_limit = -1;
    v[n] = base; v[n++].prompt_template = "<|user|>{problem}\nPlease reason step by step. ";
    v[n] = base; v[n++].policy = "skipkv";
    v[n] = base; v[n++].params_json = "{\"window\": 8, \"lambda\": 0.07, \"kernel\": 7}";
    v[n] = base; v[n++].budget = 768;
    v[n] = base; v[n++].batch_size = 1;
    v[n] = base; v[n++].batching = "padded";
    v[n] = base; v[n++].sampling_json = "{\"greedy\": false, \"temperature\": 0.6}";
    v[n] = base; v[n++].seed = 43;
    v[n] = base; v[n++].max_new_tokens = 1025;
    v[n] = base; v[n++].extra_json = "{\"max_kv_bytes\": 1000000}";
    v[n] = base; v[n++].code_version = "abc1235";
    v[n] = base; v[n++].data_hash = "d00e";
    v[n] = base; v[n++].params_json = NULL;
    v[n] = base; v[n++].seed = 42ULL + (1ULL << 60);    /* beyond a double's integers */
    char seen[18][65];
    for (int i = 0; i < n; i++) {
        key_of(&v[i], k);
        CHECK_MSG(k[0] && strcmp(k, ref) != 0, "variant %d gives the base key", i);
        memcpy(seen[i], k, sizeof k);
        for (int j = 0; j < i; j++) CHECK_MSG(strcmp(seen[j], k) != 0, "variants %d and %d collide", j, i);
    }
    /* Two seeds that a double would round to the same value stay distinct. */
    struct runkey_params s1 = base, s2 = base;
    s1.seed = (1ULL << 60);
    s2.seed = (1ULL << 60) + 1;
    char k1[65], k2[65];
    key_of(&s1, k1);
    key_of(&s2, k2);
    CHECK(strcmp(k1, k2) != 0);
}

static void test_bad_params_json(void)
{
    struct runkey_params p = base_params();
    p.params_json = "{\"window\": 8,}";
    char k[65] = "x";
    struct eb_err e = {0};
    CHECK(runkey_compute(&p, k, &e) == -1);
    CHECK(k[0] == '\0');
    CHECK(strstr(e.msg, "params: not valid JSON") != NULL);
    p = base_params();
    p.sampling_json = "{\"seed\": 1, \"seed\": 2}";
    CHECK(runkey_compute(&p, k, &e) == -1);
    CHECK(strstr(e.msg, "duplicate key") != NULL);
}

int main(void)
{
    RUN(test_sha256_vectors);
    RUN(test_sha256_boundaries);
    RUN(test_sha256_streaming);
    RUN(test_json_canonical);
    RUN(test_key_order_independent);
    RUN(test_every_parameter_changes_key);
    RUN(test_bad_params_json);
    return test_summary("runkey");
}
