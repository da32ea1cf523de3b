/* test_safetensors.c - the safetensors reader: values written by the reference
 * writer (tools/golden/gen_safetensors.py), sharded checkpoints, corrupted
 * headers, and a replay of the fuzz corpus. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/quant.h"
#include "model/safetensors.h"
#include "test.h"

#define VALUES "tests/fixtures/st/values.safetensors"
#define LLAMA_DIR "tests/fixtures/st/llama"
#define CORPUS_DIR "tests/fuzz_corpus/safetensors"

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static int write_all(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static float elem(const struct tensor_ref *t, int64_t i)
{
    if (t->type == EB_TYPE_F32) {
        float v;
        memcpy(&v, (const char *)t->data + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, (const char *)t->data + 2 * i, 2);
    return t->type == EB_TYPE_F16 ? quant_f16_to_f32(h) : quant_bf16_to_f32(h);
}

static void check_values(const struct safetensors *st)
{
    CHECK(safetensors_tensor_count(st) == 5);
    CHECK_STR(safetensors_metadata(st, "format"), "pt");
    CHECK_STR(safetensors_metadata(st, "note"), "evictbench");
    CHECK(safetensors_metadata(st, "absent") == NULL);
    CHECK(safetensors_find(st, "absent") == NULL);

    const struct tensor_ref *t = safetensors_find(st, "f32_2x3");
    CHECK(t != NULL);
    if (t) {
        /* PyTorch shape [2, 3] -> ggml ne {3, 2}. */
        CHECK(t->type == EB_TYPE_F32 && t->n_dims == 2);
        CHECK(t->ne[0] == 3 && t->ne[1] == 2 && t->ne[2] == 1 && t->ne[3] == 1);
        CHECK(t->nbytes == 24);
        const float want[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
        for (int i = 0; i < 6; i++) CHECK(elem(t, i) == want[i]);
    }
    t = safetensors_find(st, "f16_vec");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->type == EB_TYPE_F16 && t->n_dims == 1 && t->ne[0] == 5 && t->nbytes == 10);
        const float want[5] = {0.25f, -2.0f, 65504.0f, 1.0f / 1024, -0.0f};
        for (int i = 0; i < 5; i++) CHECK(elem(t, i) == want[i]);
        CHECK(signbit(elem(t, 4)));
    }
    t = safetensors_find(st, "bf16_2x2x2");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->type == EB_TYPE_BF16 && t->n_dims == 3);
        CHECK(t->ne[0] == 2 && t->ne[1] == 2 && t->ne[2] == 2 && t->ne[3] == 1);
        for (int i = 0; i < 8; i++) CHECK(elem(t, i) == -0.5f * (float)i);
    }
    t = safetensors_find(st, "scalar");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->n_dims == 1 && t->ne[0] == 1 && t->nbytes == 4);
        CHECK(elem(t, 0) == 3.25f);
    }
    t = safetensors_find(st, "empty");
    CHECK(t != NULL);
    if (t) CHECK(t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 0 && t->nbytes == 0);
}

static void test_values(void)
{
    struct safetensors *st;
    struct eb_err e = {0};
    int rc = safetensors_open(VALUES, &st, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc != 0) return;
    check_values(st);
    struct stat sb;
    CHECK(stat(VALUES, &sb) == 0 && safetensors_file_size(st) == (size_t)sb.st_size);
    safetensors_close(st);
}

static void test_values_from_memory(void)
{
    size_t n;
    unsigned char *buf = read_all(VALUES, &n);
    CHECK(buf != NULL);
    if (!buf) return;
    struct safetensors *st;
    struct eb_err e = {0};
    int rc = safetensors_open_memory(buf, n, "values", &st, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc == 0) {
        check_values(st);
        safetensors_close(st);
    }
    free(buf);
}

static void test_dtype_names(void)
{
    CHECK(safetensors_dtype_type("F32") == EB_TYPE_F32);
    CHECK(safetensors_dtype_type("F16") == EB_TYPE_F16);
    CHECK(safetensors_dtype_type("BF16") == EB_TYPE_BF16);
    CHECK(safetensors_dtype_type("F64") == -1);
    CHECK(safetensors_dtype_type("f32") == -1);
}

/* 8-byte length + header + data_len bytes of data (data_len 0..64). */
static unsigned char *make_file(uint64_t declared_len, const char *header, size_t data_len,
                                size_t *size)
{
    size_t hl = strlen(header);
    *size = 8 + hl + data_len;
    unsigned char *b = calloc(1, *size);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(declared_len >> (8 * i));
    memcpy(b + 8, header, hl);
    return b;
}

/* Parse buf and expect failure with want somewhere in the message. */
static void expect_bad(const unsigned char *buf, size_t size, const char *want)
{
    struct safetensors *st = (struct safetensors *)1;
    struct eb_err e = {0};
    int rc = safetensors_open_memory(buf, size, "bad", &st, &e);
    CHECK_MSG(rc == -1 && st == NULL, "accepted, expected '%s'", want);
    if (rc == 0) safetensors_close(st);
    CHECK_MSG(strncmp(e.msg, "bad: ", 5) == 0, "message '%s' does not start with the name", e.msg);
    CHECK_MSG(strstr(e.msg, want) != NULL, "message '%s' lacks '%s'", e.msg, want);
}

static void expect_bad_header(const char *header, size_t data_len, const char *want)
{
    size_t size;
    unsigned char *b = make_file(strlen(header), header, data_len, &size);
    expect_bad(b, size, want);
    free(b);
}

static void test_corrupt_sizes(void)
{
    unsigned char small[5] = {1, 0, 0, 0, 0};
    expect_bad(small, 0, "too small");
    expect_bad(small, sizeof small, "too small");
    size_t size;
    unsigned char *b = make_file(1000, "{}", 8, &size); /* length past EOF */
    expect_bad(b, size, "runs past the end of the file");
    free(b);
    b = make_file(200u * 1024 * 1024, "{}", 8, &size);
    expect_bad(b, size, "100 MB cap");
    free(b);
    b = make_file(UINT64_MAX, "{}", 8, &size);
    expect_bad(b, size, "100 MB cap");
    free(b);
    b = make_file(1, "{}", 0, &size);
    expect_bad(b, size, "too small");
    free(b);
}

static void test_corrupt_json(void)
{
    expect_bad_header("[\"x\"]   ", 0, "does not start with '{'");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", ", 0, "not valid JSON");
    expect_bad_header("{} trailing", 0, "unexpected bytes after the header JSON");
    /* A NUL inside the header ends the JSON early: the rest is not padding. */
    size_t size;
    unsigned char *b = make_file(8, "{}  {}  ", 0, &size);
    b[8 + 3] = '\0';
    expect_bad(b, size, "unexpected bytes");
    free(b);
    expect_bad_header("{\"a\": 5}", 0, "tensor 'a': entry is not a JSON object");
    expect_bad_header("{\"__metadata__\": {\"k\": 1}}", 0, "__metadata__ value of 'k' is not a string");
    expect_bad_header("{\"__metadata__\": [1]}", 0, "__metadata__ is not a JSON object");
}

static void test_corrupt_tensors(void)
{
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 8,
                      "tensor 'w': data_offsets end 16 is past the end of the data (8 bytes)");
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8,
                      "tensor 'w': data_offsets give 8 bytes but its shape and dtype need 12");
    expect_bad_header("{\"pos_ids\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 8,
                      "tensor 'pos_ids' has dtype I64; only F32, F16 and BF16 are supported");
    expect_bad_header("{\"w\": {\"dtype\": \"Q9\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 8,
                      "tensor 'w' has dtype Q9");
    expect_bad_header("{\"w\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
                      "tensor 'w': missing dtype");
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", 8,
                      "tensor 'w': missing shape");
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8,
                      "shape entry 0 is not a non-negative integer");
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 8]}}", 8,
                      "shape entry 0 is not a non-negative integer");
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,2], \"data_offsets\": [0, 8]}}", 8,
                      "has 5 dimensions");
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 4294967296],"
                      " \"data_offsets\": [0, 8]}}", 8, "absurdly large");
    /* 2^31 * 2^31 elements of 4 bytes wrap a 64-bit size to 0 bytes: once accepted with
     * data_offsets [0, 0] */
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [2147483648, 2147483648],"
                      " \"data_offsets\": [0, 0]}}", 8, "shape is absurdly large");
    expect_bad_header("{\"w\": {\"dtype\": \"BF16\", \"shape\": [1073741824, 1073741824, 4],"
                      " \"data_offsets\": [0, 0]}}", 8, "overflows 2^62 bytes");
    /* a zero dimension makes the tensor empty, but ne[1] * ne[2] would still overflow */
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [0, 4294967296, 4294967296],"
                      " \"data_offsets\": [0, 0]}}", 8, "shape is absurdly large");
    /* control characters in a tensor name: C0, DEL and UTF-8 C1 (U+0085) */
    expect_bad_header("{\"w\\nx\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
                      "tensor name 'w?x' holds control character 0x0a at byte 1");
    expect_bad_header("{\"\\u001b[31mred\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
                      8, "holds control character 0x1b at byte 0");
    expect_bad_header("{\"ok\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                      " \"a\\u007f\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8,
                      "holds control character 0x7f at byte 1");
    expect_bad_header("{\"w\\u0085\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
                      "tensor name 'w?" "?' holds control character 0xc2 at byte 1");
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}", 8,
                      "are reversed");
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0]}}", 8,
                      "data_offsets must be two non-negative integers");
    expect_bad_header("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 1e300]}}", 8,
                      "data_offsets must be two non-negative integers");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                      " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 16,
                      "tensors 'a' and 'b' overlap");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                      " \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}", 16,
                      "tensor 'a' appears twice");
}

/* Accepted edge cases: padding after the JSON, empty tensors sharing an offset. */
static void test_accepted_edges(void)
{
    const char *h = "{\"a\": {\"dtype\": \"BF16\", \"shape\": [0], \"data_offsets\": [0, 0]},"
                    " \"b\": {\"dtype\": \"F16\", \"shape\": [2, 2], \"data_offsets\": [0, 8]},"
                    " \"c\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [8, 12]},"
                    " \"\\u00e9\\u00a0d\": {\"dtype\": \"F32\", \"shape\": [0, 65536, 65536],"
                    " \"data_offsets\": [12, 12]}}      ";
    size_t size;
    unsigned char *b = make_file(strlen(h), h, 12, &size);
    struct safetensors *st;
    struct eb_err e = {0};
    int rc = safetensors_open_memory(b, size, "edges", &st, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc == 0) {
        CHECK(safetensors_tensor_count(st) == 4);
        /* U+00E9 and U+00A0 are printable (0xc3 0xa9, 0xc2 0xa0): not C1 controls */
        CHECK(safetensors_find(st, "\xc3\xa9\xc2\xa0" "d") != NULL);
        const struct tensor_ref *t = safetensors_find(st, "b");
        CHECK(t && t->ne[0] == 2 && t->ne[1] == 2 && t->data == b + 8 + strlen(h));
        /* File order is kept. */
        CHECK_STR(safetensors_tensor(st, 0)->name, "a");
        CHECK_STR(safetensors_tensor(st, 2)->name, "c");
        CHECK(safetensors_tensor(st, 4) == NULL && safetensors_tensor(st, -1) == NULL);
        safetensors_close(st);
    }
    free(b);
}

static void test_open_errors(void)
{
    struct safetensors *st;
    struct eb_err e = {0};
    CHECK(safetensors_open("tests/fixtures/st/no-such.safetensors", &st, &e) == -1);
    CHECK(strstr(e.msg, "no-such.safetensors: cannot open") != NULL);
    CHECK(safetensors_open("tests/fixtures/st", &st, &e) == -1);
    CHECK(strstr(e.msg, "not a regular file") != NULL);
    /* A file that is not safetensors at all. */
    CHECK(safetensors_open(LLAMA_DIR "/config.json", &st, &e) == -1);
    CHECK_MSG(strstr(e.msg, "config.json: header length") != NULL, "%s", e.msg);
}

static void test_sharded(void)
{
    struct st_checkpoint *ck;
    struct eb_err e = {0};
    int rc = st_checkpoint_open(LLAMA_DIR, &ck, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc != 0) return;
    CHECK(st_checkpoint_shard_count(ck) == 2);
    /* 2 global + lm_head + 9 per layer x 2 layers */
    CHECK(st_checkpoint_tensor_count(ck) == 21);
    struct stat s1, s2;
    CHECK(stat(LLAMA_DIR "/model-00001-of-00002.safetensors", &s1) == 0);
    CHECK(stat(LLAMA_DIR "/model-00002-of-00002.safetensors", &s2) == 0);
    CHECK(st_checkpoint_bytes(ck) == (size_t)(s1.st_size + s2.st_size));
    const struct tensor_ref *t = st_checkpoint_find(ck, "model.layers.1.mlp.down_proj.weight");
    CHECK(t && t->type == EB_TYPE_F16 && t->ne[0] == 8 && t->ne[1] == 64);
    t = st_checkpoint_find(ck, "lm_head.weight");
    CHECK(t && t->ne[0] == 64 && t->ne[1] == 256);
    CHECK(st_checkpoint_find(ck, "model.layers.2.mlp.down_proj.weight") == NULL);
    for (int i = 0; i < st_checkpoint_tensor_count(ck); i++) {
        t = st_checkpoint_tensor(ck, i);
        CHECK(t && st_checkpoint_find(ck, t->name) == t);
    }
    st_checkpoint_close(ck);

    rc = st_checkpoint_open(FIXTURE("st/qwen2"), &ck, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc == 0) {
        CHECK(st_checkpoint_shard_count(ck) == 1);
        st_checkpoint_close(ck);
    }
}

/* A scratch directory with an index and copies of values.safetensors as shards. */
static int bad_index_case(const char *index_json, int n_copies, const char *want)
{
    char dir[] = "/tmp/eb_st_XXXXXX";
    if (!mkdtemp(dir)) return -1;
    size_t n;
    unsigned char *vals = read_all(VALUES, &n);
    char path[256];
    for (int i = 0; i < n_copies && vals; i++) {
        snprintf(path, sizeof path, "%s/s%d.safetensors", dir, i);
        write_all(path, vals, n);
    }
    free(vals);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_all(path, index_json, strlen(index_json));

    struct st_checkpoint *ck;
    struct eb_err e = {0};
    int rc = st_checkpoint_open(dir, &ck, &e);
    CHECK_MSG(rc == -1, "accepted, expected '%s'", want);
    if (rc == 0) st_checkpoint_close(ck);
    CHECK_MSG(strstr(e.msg, want) != NULL, "message '%s' lacks '%s'", e.msg, want);

    for (int i = 0; i < n_copies; i++) {
        snprintf(path, sizeof path, "%s/s%d.safetensors", dir, i);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}

static void test_sharded_errors(void)
{
    bad_index_case("{\"weight_map\": {\"scalar\": \"s0.safetensors\", \"f16_vec\": \"s1.safetensors\"}}",
                   2, "appears in more than one shard");
    bad_index_case("{\"weight_map\": {\"missing\": \"s0.safetensors\"}}", 1,
                   "tensor 'missing' is not in its shard s0.safetensors");
    bad_index_case("{\"weight_map\": {\"scalar\": \"../s0.safetensors\"}}", 1,
                   "is not a plain shard file name");
    bad_index_case("{\"weight_map\": {\"scalar\": \"s7.safetensors\"}}", 1,
                   "s7.safetensors: cannot open");
    bad_index_case("{\"metadata\": {}}", 1, "missing weight_map");
    bad_index_case("{\"weight_map\": {}}", 1, "weight_map is empty");
    bad_index_case("{\"weight_map\": ", 1, "malformed JSON");

    struct st_checkpoint *ck;
    struct eb_err e = {0};
    CHECK(st_checkpoint_open(FIXTURE("st"), &ck, &e) == -1);
    CHECK(strstr(e.msg, "no model.safetensors or model.safetensors.index.json") != NULL);
}

/* Parse buf (must fail cleanly or give tensors inside the buffer). */
static void replay_one(const unsigned char *buf, size_t n, const char *name)
{
    struct safetensors *st;
    struct eb_err e = {0};
    if (safetensors_open_memory(buf, n, name, &st, &e) == 0) {
        for (int i = 0; i < safetensors_tensor_count(st); i++) {
            const struct tensor_ref *t = safetensors_tensor(st, i);
            CHECK((const unsigned char *)t->data >= buf &&
                  (const unsigned char *)t->data + t->nbytes <= buf + n);
        }
        safetensors_close(st);
    } else {
        CHECK_MSG(e.msg[0] != '\0', "%s failed without a message", name);
    }
}

/* Every input the fuzzer found (and the seeds) must parse or fail cleanly,
 * read both ways as tools/fuzz/fuzz_safetensors.c does: as a whole file, and
 * as header JSON behind a correct length prefix with 1 KB of data. */
static void test_fuzz_corpus(void)
{
    DIR *d = opendir(CORPUS_DIR);
    if (!d) SKIP("%s absent", CORPUS_DIR);
    int files = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CORPUS_DIR, de->d_name);
        size_t n;
        unsigned char *buf = read_all(path, &n);
        if (!buf) continue;
        replay_one(buf, n, de->d_name);
        unsigned char *wrapped = malloc(8 + n + 1024);
        if (wrapped) {
            for (int i = 0; i < 8; i++) wrapped[i] = (unsigned char)((uint64_t)n >> (8 * i));
            memcpy(wrapped + 8, buf, n);
            memset(wrapped + 8 + n, 0x5a, 1024);
            replay_one(wrapped, 8 + n + 1024, de->d_name);
            free(wrapped);
        }
        free(buf);
        files++;
    }
    closedir(d);
    CHECK(files > 0);
}

int main(void)
{
    RUN(test_values);
    RUN(test_values_from_memory);
    RUN(test_dtype_names);
    RUN(test_corrupt_sizes);
    RUN(test_corrupt_json);
    RUN(test_corrupt_tensors);
    RUN(test_accepted_edges);
    RUN(test_open_errors);
    RUN(test_sharded);
    RUN(test_sharded_errors);
    RUN(test_fuzz_corpus);
    return test_summary("safetensors");
}
