/* test_gguf.c - the GGUF reader on the committed tiny.gguf (every value type),
 * the default model when present, ~25 corrupted files built in memory, every
 * truncation of tiny.gguf, and the fuzz regression corpus. */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/quant.h"
#include "test.h"

#define TINY FIXTURE("tiny.gguf")
#define SMOLLM2 "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    *size = (size_t)n;
    return b;
}

/* An error must be one line that starts with the file's name. */
static int good_message(const struct eb_err *e, const char *name)
{
    size_t n = strlen(name);
    return strncmp(e->msg, name, n) == 0 && e->msg[n] == ':' && e->msg[n + 1] == ' ' &&
           strlen(e->msg) > n + 2 && !strchr(e->msg, '\n');
}

static int str_is(const char *s, size_t len, const char *want)
{
    return s && len == strlen(want) && memcmp(s, want, len) == 0;
}

/* Touches every accessor on every value (recursing into nested arrays). */
static void walk_value(const struct gguf_file *g, int64_t v, int depth, long *visited)
{
    int64_t i64;
    double f64;
    int b, et;
    const char *s;
    size_t len;
    uint64_t count;
    (*visited)++;
    (void)gguf_value_int(g, v, &i64);
    (void)gguf_value_float(g, v, &f64);
    (void)gguf_value_bool(g, v, &b);
    if (gguf_value_str(g, v, &s, &len) == 0 && len) (void)(volatile char)s[len - 1];
    if (gguf_value_arr_info(g, v, &et, &count) != 0 || depth > 16) return;
    (void)gguf_value_arr_data(g, v);
    for (uint64_t i = 0; i < count; i++) {
        (void)gguf_value_arr_int(g, v, i, &i64);
        (void)gguf_value_arr_float(g, v, i, &f64);
        int64_t c = gguf_value_arr_elem(g, v, i);
        if (c >= 0) walk_value(g, c, depth + 1, visited);
    }
}

static void walk_file(const struct gguf_file *g)
{
    long visited = 0;
    for (int k = 0; k < gguf_key_count(g); k++) {
        const char *name = gguf_key_name(g, k);
        CHECK(name != NULL && gguf_find_key(g, name) == k);
        walk_value(g, gguf_key_value(g, k), 0, &visited);
    }
    float row[512];
    for (int t = 0; t < gguf_tensor_count(g); t++) {
        const struct tensor_ref *r = gguf_tensor(g, t);
        CHECK(gguf_find_tensor(g, r->name) == r);
        int64_t n = r->ne[0] < 512 ? r->ne[0] : 0;
        if (n && quant_type_supported(r->type))
            CHECK(quant_dequantize(r->type, r->data, row, n) == 0);
    }
}

/* ---- tiny.gguf: every metadata type, arrays, nested arrays, tensors ---- */

static void check_tiny(const struct gguf_file *g)
{
    int64_t i;
    double f;
    int b, et;
    uint64_t n;
    const char *s;
    size_t len;

    CHECK(gguf_version(g) == 3);
    CHECK(gguf_alignment(g) == 64);
    CHECK(gguf_data_offset(g) % 64 == 0);
    CHECK(gguf_key_count(g) == 25);
    CHECK_STR(gguf_key_name(g, 0), "general.architecture");
    CHECK(gguf_key_name(g, 25) == NULL && gguf_key_name(g, -1) == NULL);
    CHECK(gguf_get_str(g, "general.architecture", &s, &len) == 0 && str_is(s, len, "tiny"));
    CHECK(gguf_get_int(g, "general.alignment", &i) == 0 && i == 64);

    CHECK(gguf_key_type(g, gguf_find_key(g, "test.u8")) == GGUF_UINT8);
    CHECK(gguf_get_int(g, "test.u8", &i) == 0 && i == 200);
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.i8")) == GGUF_INT8);
    CHECK(gguf_get_int(g, "test.i8", &i) == 0 && i == -100);
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.u16")) == GGUF_UINT16);
    CHECK(gguf_get_int(g, "test.u16", &i) == 0 && i == 60000);
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.i16")) == GGUF_INT16);
    CHECK(gguf_get_int(g, "test.i16", &i) == 0 && i == -30000);
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.u32")) == GGUF_UINT32);
    CHECK(gguf_get_int(g, "test.u32", &i) == 0 && i == 4000000000LL);
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.i32")) == GGUF_INT32);
    CHECK(gguf_get_int(g, "test.i32", &i) == 0 && i == -2000000000LL);
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.f32")) == GGUF_FLOAT32);
    CHECK(gguf_get_float(g, "test.f32", &f) == 0 && f == 0.15625);
    CHECK(gguf_get_int(g, "test.f32", &i) == -1);            /* a float is not an int */
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.bool")) == GGUF_BOOL);
    CHECK(gguf_get_bool(g, "test.bool", &b) == 0 && b == 1);
    CHECK(gguf_get_int(g, "test.bool", &i) == 0 && i == 1);  /* get_int accepts bool */
    CHECK(gguf_get_bool(g, "test.u8", &b) == -1);
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.string")) == GGUF_STRING);
    CHECK(gguf_get_str(g, "test.string", &s, &len) == 0 &&
          str_is(s, len, "h\xc3\xa9llo, \xe4\xb8\x96\xe7\x95\x8c"));
    CHECK(gguf_get_int(g, "test.string", &i) == -1);
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.u64")) == GGUF_UINT64);
    CHECK(gguf_get_int(g, "test.u64", &i) == -1);            /* 2^63+5 does not fit int64 */
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.i64")) == GGUF_INT64);
    CHECK(gguf_get_int(g, "test.i64", &i) == 0 && i == -(1LL << 62) - 3);
    CHECK(gguf_key_type(g, gguf_find_key(g, "test.f64")) == GGUF_FLOAT64);
    CHECK(gguf_get_float(g, "test.f64", &f) == 0 && f == -2.5e-300);
    CHECK(gguf_get_float(g, "test.i32", &f) == 0 && f == -2e9);  /* ints read as floats */

    CHECK(gguf_find_key(g, "no.such.key") == -1);
    CHECK(gguf_get_int(g, "no.such.key", &i) == -1);
    CHECK(gguf_get_str(g, "test.u8", &s, &len) == -1);

    /* numeric arrays */
    CHECK(gguf_get_arr_info(g, "test.arr_u8", &et, &n) == 0 && et == GGUF_UINT8 && n == 3);
    CHECK(gguf_get_arr_int(g, "test.arr_u8", 2, &i) == 0 && i == 255);
    const unsigned char *u8 = gguf_get_arr_data(g, "test.arr_u8");
    CHECK(u8 && u8[0] == 1 && u8[1] == 2 && u8[2] == 255);
    CHECK(gguf_get_arr_int(g, "test.arr_u8", 3, &i) == -1);  /* out of range */
    CHECK(gguf_get_arr_info(g, "test.arr_i16", &et, &n) == 0 && et == GGUF_INT16 && n == 3);
    CHECK(gguf_get_arr_int(g, "test.arr_i16", 0, &i) == 0 && i == -1);
    CHECK(gguf_get_arr_int(g, "test.arr_i16", 1, &i) == 0 && i == 300);
    CHECK(gguf_get_arr_int(g, "test.arr_i16", 2, &i) == 0 && i == -32768);
    CHECK(gguf_get_arr_info(g, "test.arr_u64", &et, &n) == 0 && et == GGUF_UINT64 && n == 2);
    CHECK(gguf_get_arr_int(g, "test.arr_u64", 1, &i) == 0 && i == 1LL << 40);
    CHECK(gguf_get_arr_info(g, "test.arr_f64", &et, &n) == 0 && et == GGUF_FLOAT64 && n == 2);
    CHECK(gguf_get_arr_float(g, "test.arr_f64", 1, &f) == 0 && f == -1.25);
    CHECK(gguf_get_arr_info(g, "test.arr_i32", &et, &n) == 0 && et == GGUF_INT32 && n == 4);
    CHECK(gguf_get_arr_int(g, "test.arr_i32", 1, &i) == 0 && i == -8);
    CHECK(gguf_get_arr_int(g, "test.arr_i32", 3, &i) == 0 && i == 2147483647);
    CHECK(gguf_get_arr_float(g, "test.arr_i32", 2, &f) == 0 && f == 9);
    CHECK(gguf_get_arr_info(g, "test.arr_f32", &et, &n) == 0 && et == GGUF_FLOAT32 && n == 2);
    CHECK(gguf_get_arr_float(g, "test.arr_f32", 0, &f) == 0 && f == 1.5);
    CHECK(gguf_get_arr_float(g, "test.arr_f32", 1, &f) == 0 && f == -0.25);
    CHECK(gguf_get_arr_int(g, "test.arr_f32", 1, &i) == -1);
    CHECK(gguf_get_arr_info(g, "test.arr_bool", &et, &n) == 0 && et == GGUF_BOOL && n == 3);
    CHECK(gguf_get_arr_int(g, "test.arr_bool", 0, &i) == 0 && i == 1);
    CHECK(gguf_get_arr_int(g, "test.arr_bool", 1, &i) == 0 && i == 0);
    CHECK(gguf_get_arr_info(g, "test.u8", &et, &n) == -1);   /* not an array */

    /* array of strings */
    CHECK(gguf_get_arr_info(g, "test.arr_str", &et, &n) == 0 && et == GGUF_STRING && n == 4);
    CHECK(gguf_get_arr_str(g, "test.arr_str", 0, &s, &len) == 0 && str_is(s, len, "alpha"));
    CHECK(gguf_get_arr_str(g, "test.arr_str", 1, &s, &len) == 0 && len == 0);
    CHECK(gguf_get_arr_str(g, "test.arr_str", 2, &s, &len) == 0 &&
          str_is(s, len, "\xc3\x9f\xe2\x98\x83"));
    CHECK(gguf_get_arr_str(g, "test.arr_str", 3, &s, &len) == 0 && str_is(s, len, "a b"));
    CHECK(gguf_get_arr_str(g, "test.arr_str", 4, &s, &len) == -1);
    CHECK(gguf_get_arr_data(g, "test.arr_str") == NULL);
    CHECK(gguf_get_arr_int(g, "test.arr_str", 0, &i) == -1);
    CHECK(gguf_get_arr_str(g, "test.arr_i32", 0, &s, &len) == -1);

    /* nested arrays: [[1,2,3],[4],[5,6]] */
    int64_t v = gguf_key_value(g, gguf_find_key(g, "test.nested"));
    CHECK(gguf_value_type(g, v) == GGUF_ARRAY);
    CHECK(gguf_value_arr_info(g, v, &et, &n) == 0 && et == GGUF_ARRAY && n == 3);
    static const int want_len[3] = {3, 1, 2};
    int next = 1;
    for (uint64_t k = 0; k < 3; k++) {
        int64_t inner = gguf_value_arr_elem(g, v, k);
        CHECK(gguf_value_arr_info(g, inner, &et, &n) == 0 && et == GGUF_INT32 &&
              n == (uint64_t)want_len[k]);
        for (uint64_t j = 0; j < n; j++)
            CHECK(gguf_value_arr_int(g, inner, j, &i) == 0 && i == next++);
    }
    CHECK(gguf_value_arr_elem(g, v, 3) == -1);
    CHECK(gguf_get_arr_str(g, "test.nested", 0, &s, &len) == -1);

    /* [["x","yz"],["w"]] */
    v = gguf_key_value(g, gguf_find_key(g, "test.nested_str"));
    CHECK(gguf_value_arr_info(g, v, &et, &n) == 0 && et == GGUF_ARRAY && n == 2);
    int64_t a0 = gguf_value_arr_elem(g, v, 0), a1 = gguf_value_arr_elem(g, v, 1);
    CHECK(gguf_value_arr_info(g, a0, &et, &n) == 0 && et == GGUF_STRING && n == 2);
    CHECK(gguf_value_str(g, gguf_value_arr_elem(g, a0, 1), &s, &len) == 0 && str_is(s, len, "yz"));
    CHECK(gguf_value_str(g, gguf_value_arr_elem(g, a1, 0), &s, &len) == 0 && str_is(s, len, "w"));

    /* [[[1],[2,3]],[[4,5,6]]] */
    v = gguf_key_value(g, gguf_find_key(g, "test.nested2"));
    int64_t m = gguf_value_arr_elem(g, gguf_value_arr_elem(g, v, 0), 1);
    CHECK(gguf_value_arr_info(g, m, &et, &n) == 0 && et == GGUF_INT32 && n == 2);
    CHECK(gguf_value_arr_int(g, m, 1, &i) == 0 && i == 3);
    m = gguf_value_arr_elem(g, gguf_value_arr_elem(g, v, 1), 0);
    CHECK(gguf_value_arr_int(g, m, 2, &i) == 0 && i == 6);
    const int32_t *raw = gguf_value_arr_data(g, m);
    CHECK(raw != NULL);
    CHECK(gguf_value_type(g, -1) == -1 && gguf_value_type(g, 1 << 30) == -1);
}

static void check_tiny_tensors(const struct gguf_file *g)
{
    static const struct { const char *name; int type, n_dims; int64_t ne0, ne1; size_t nbytes; } want[] = {
        {"t.f32", EB_TYPE_F32, 2, 4, 3, 48},       {"t.f16", EB_TYPE_F16, 1, 8, 1, 16},
        {"t.bf16", EB_TYPE_BF16, 1, 16, 1, 32},    {"blk.0.q8_0", EB_TYPE_Q8_0, 2, 64, 2, 136},
        {"blk.0.q4_1", EB_TYPE_Q4_1, 2, 32, 2, 40}, {"blk.1.q4_k", EB_TYPE_Q4_K, 2, 256, 1, 144},
    };
    size_t exp_size;
    unsigned char *expected = read_all(FIXTURE("quant/tiny_tensors.bin"), &exp_size);
    CHECK_MSG(expected != NULL, "tests/fixtures/quant/tiny_tensors.bin missing");
    CHECK(gguf_tensor_count(g) == 6);
    CHECK(gguf_tensor(g, 6) == NULL && gguf_tensor(g, -1) == NULL);
    CHECK(gguf_find_tensor(g, "nope") == NULL);
    const unsigned char *data0 = gguf_tensor(g, 0) ? gguf_tensor(g, 0)->data : NULL;
    size_t pos = 0;
    for (int k = 0; k < 6 && k < gguf_tensor_count(g); k++) {
        const struct tensor_ref *t = gguf_tensor(g, k);
        CHECK_STR(t->name, want[k].name);
        CHECK(gguf_find_tensor(g, want[k].name) == t);
        CHECK(t->type == want[k].type && t->n_dims == want[k].n_dims);
        CHECK(t->ne[0] == want[k].ne0 && t->ne[1] == want[k].ne1 && t->ne[2] == 1 && t->ne[3] == 1);
        CHECK(t->nbytes == want[k].nbytes);
        CHECK(((const unsigned char *)t->data - data0) % 64 == 0);
        int64_t n = tensor_nelements(t);
        float *out = calloc((size_t)n, sizeof *out);
        CHECK(out && quant_dequantize(t->type, t->data, out, n) == 0);
        if (out && expected && pos + 4 * (size_t)n <= exp_size)
            CHECK_MSG(memcmp(out, expected + pos, 4 * (size_t)n) == 0, "tensor %s differs", t->name);
        pos += 4 * (size_t)n;
        free(out);
    }
    CHECK(pos == exp_size);
    free(expected);
}

static void test_tiny_file(void)
{
    struct gguf_file *g;
    struct eb_err e = {0};
    if (gguf_open(TINY, &g, &e) != 0) { CHECK_MSG(0, "%s", e.msg); return; }
    CHECK_STR(gguf_path(g), TINY);
    CHECK(gguf_file_size(g) == 2048);
    check_tiny(g);
    check_tiny_tensors(g);
    walk_file(g);
    gguf_close(g);
}

static void test_tiny_memory(void)
{
    size_t size;
    unsigned char *buf = read_all(TINY, &size);
    if (!buf) { CHECK_MSG(0, "%s missing", TINY); return; }
    struct gguf_file *g;
    struct eb_err e = {0};
    CHECK(gguf_open_memory(buf, size, "mem", &g, &e) == 0);
    if (g) {
        CHECK_STR(gguf_path(g), "mem");
        check_tiny(g);
        check_tiny_tensors(g);
        gguf_close(g);
    }
    free(buf);
}

/* Every prefix of tiny.gguf: fails (one good line) unless it still holds all tensor data. */
static void test_truncations(void)
{
    size_t size;
    unsigned char *full = read_all(TINY, &size);
    if (!full) { CHECK_MSG(0, "%s missing", TINY); return; }
    struct gguf_file *g;
    struct eb_err e;
    CHECK(gguf_open_memory(full, size, "t", &g, &e) == 0);
    size_t end = 0;
    for (int k = 0; g && k < gguf_tensor_count(g); k++) {
        const struct tensor_ref *t = gguf_tensor(g, k);
        size_t stop = (size_t)((const unsigned char *)t->data - full) + t->nbytes;
        if (stop > end) end = stop;
    }
    gguf_close(g);
    int bad = 0;
    for (size_t len = 0; len < size; len++) {
        unsigned char *part = malloc(len ? len : 1);   /* exact size: ASan sees over-reads */
        memcpy(part, full, len);
        memset(&e, 0, sizeof e);
        int rc = gguf_open_memory(part, len, "cut.gguf", &g, &e);
        if (len < end ? (rc != -1 || g != NULL || !good_message(&e, "cut.gguf")) : rc != 0) {
            if (bad++ < 3) fprintf(stderr, "    length %zu: rc %d msg '%s'\n", len, rc, e.msg);
        }
        if (rc == 0) gguf_close(g);
        free(part);
    }
    CHECK_MSG(bad == 0, "%d truncations misbehaved", bad);
    free(full);
}

/* ---- corrupted files built in memory ---- */

enum variant {
    V_OK, V_BAD_MAGIC, V_VERSION1, V_VERSION4, V_BIG_ENDIAN, V_HUGE_TENSORS, V_HUGE_KV,
    V_LONG_STRING, V_BAD_VTYPE, V_BAD_ELEM_TYPE, V_HUGE_ARRAY, V_DEEP_NESTING, V_BAD_BOOL,
    V_DUP_KEY, V_ALIGN_48, V_ALIGN_0, V_ALIGN_STRING, V_NDIMS5, V_NDIMS0, V_DIM_ZERO,
    V_DIM_NEG, V_DIM_OVERFLOW, V_UNKNOWN_TYPE, V_ROW_NOT_BLOCKS, V_MISALIGNED,
    V_OFFSET_PAST_END, V_OFFSET_HUGE, V_OVERLAP, V_DUP_TENSOR, V_SHORT_DATA, V_EMPTY_KEY,
    V_NUL_IN_NAME, V_NEWLINE_IN_KEY, V_COUNT
};

static const char *const expect_msg[V_COUNT] = {
    [V_BAD_MAGIC] = "bad magic", [V_VERSION1] = "version 1 is not supported",
    [V_VERSION4] = "unsupported GGUF version 4", [V_BIG_ENDIAN] = "big-endian",
    [V_HUGE_TENSORS] = "tensor count", [V_HUGE_KV] = "metadata count",
    [V_LONG_STRING] = "runs past the end", [V_BAD_VTYPE] = "unknown value type 13",
    [V_BAD_ELEM_TYPE] = "unknown array element type 99", [V_HUGE_ARRAY] = "cannot fit",
    [V_DEEP_NESTING] = "nested more than", [V_BAD_BOOL] = "must be 0 or 1",
    [V_DUP_KEY] = "duplicate metadata key 'general.architecture'",
    [V_ALIGN_48] = "not a power of two", [V_ALIGN_0] = "not a power of two",
    [V_ALIGN_STRING] = "expected an integer", [V_NDIMS5] = "'a' has 5 dimensions",
    [V_NDIMS0] = "'a' has 0 dimensions", [V_DIM_ZERO] = "dimension 1 is 0",
    [V_DIM_NEG] = "dimension 0 is -5", [V_DIM_OVERFLOW] = "element count overflows",
    [V_UNKNOWN_TYPE] = "tensor 'a' has unknown type id 99",
    [V_ROW_NOT_BLOCKS] = "not a multiple of the Q8_0 block size 32",
    [V_MISALIGNED] = "not a multiple of the alignment 32",
    [V_OFFSET_PAST_END] = "runs past the end of the file",
    [V_OFFSET_HUGE] = "runs past the end of the file", [V_OVERLAP] = "overlaps",
    [V_DUP_TENSOR] = "duplicate tensor name 'a'", [V_SHORT_DATA] = "runs past the end of the file",
    [V_EMPTY_KEY] = "is empty", [V_NEWLINE_IN_KEY] = "contains the control character 0x0a", [V_NUL_IN_NAME] = "contains the control character 0x00",
};

struct out { unsigned char d[1024]; size_t n; };

static void put(struct out *o, const void *p, size_t n) { memcpy(o->d + o->n, p, n); o->n += n; }
static void put32(struct out *o, uint32_t v)
{
    for (int i = 0; i < 4; i++) o->d[o->n++] = (unsigned char)(v >> (8 * i));
}
static void put64(struct out *o, uint64_t v)
{
    for (int i = 0; i < 8; i++) o->d[o->n++] = (unsigned char)(v >> (8 * i));
}
static void putstr(struct out *o, const char *s) { put64(o, strlen(s)); put(o, s, strlen(s)); }

/* A valid file (3 keys, F32 tensor "a" [8,2] and Q8_0 tensor "b" [32]) with one fault. */
static void build(enum variant v, struct out *o)
{
    o->n = 0;
    put(o, v == V_BAD_MAGIC ? "GGUG" : "GGUF", 4);
    put32(o, v == V_VERSION1 ? 1 : v == V_VERSION4 ? 4 : v == V_BIG_ENDIAN ? 0x03000000u : 3);
    put64(o, v == V_HUGE_TENSORS ? 1ULL << 40 : 2);
    put64(o, v == V_HUGE_KV ? UINT64_MAX : 3);

    putstr(o, "general.architecture");
    put32(o, GGUF_STRING);
    if (v == V_LONG_STRING) put64(o, 1ULL << 50); else putstr(o, "llama");

    putstr(o, "general.alignment");
    if (v == V_ALIGN_STRING) { put32(o, GGUF_STRING); putstr(o, "32"); }
    else { put32(o, GGUF_UINT32); put32(o, v == V_ALIGN_48 ? 48 : v == V_ALIGN_0 ? 0 : 32); }

    putstr(o, v == V_DUP_KEY ? "general.architecture" : v == V_EMPTY_KEY ? "" :
              v == V_NEWLINE_IN_KEY ? "test\narr" : "test.arr");
    if (v == V_BAD_VTYPE) { put32(o, 13); put32(o, 0); }
    else if (v == V_BAD_BOOL) { put32(o, GGUF_BOOL); o->d[o->n++] = 2; }
    else if (v == V_DEEP_NESTING) {
        put32(o, GGUF_ARRAY);
        for (int d = 0; d < 20; d++) { put32(o, GGUF_ARRAY); put64(o, 1); }
        put32(o, GGUF_INT32); put64(o, 0);
    } else {
        put32(o, GGUF_ARRAY);
        put32(o, v == V_BAD_ELEM_TYPE ? 99 : GGUF_INT32);
        put64(o, v == V_HUGE_ARRAY ? 1ULL << 60 : 2);
        put32(o, 1); put32(o, 2);
    }

    /* tensor "a": F32 [8, 2], 64 bytes at offset 0 */
    if (v == V_NUL_IN_NAME) { put64(o, 2); put(o, "a\0", 2); } else putstr(o, "a");
    uint32_t nd = v == V_NDIMS5 ? 5 : v == V_NDIMS0 ? 0 : 2;
    put32(o, nd);
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t dim = d == 0 ? 8 : 2;
        if (v == V_DIM_ZERO && d == 1) dim = 0;
        if (v == V_DIM_NEG && d == 0) dim = (uint64_t)-5;
        if (v == V_DIM_OVERFLOW) dim = 1ULL << 32;
        put64(o, dim);
    }
    put32(o, v == V_UNKNOWN_TYPE ? 99 : v == V_ROW_NOT_BLOCKS ? EB_TYPE_Q8_0 : EB_TYPE_F32);
    put64(o, 0);

    /* tensor "b": Q8_0 [32], 34 bytes at offset 64 */
    putstr(o, v == V_DUP_TENSOR ? "a" : "b");
    put32(o, 1);
    put64(o, 32);
    put32(o, EB_TYPE_Q8_0);
    put64(o, v == V_MISALIGNED ? 80 : v == V_OFFSET_PAST_END ? 1 << 20 :
             v == V_OFFSET_HUGE ? UINT64_MAX - 31 : v == V_OVERLAP ? 32 : 64);

    while (o->n % 32) o->d[o->n++] = 0;
    for (int k = 0; k < 16; k++) {                     /* a = 0, 1, ..., 15 */
        float x = (float)k;
        put(o, &x, 4);
    }
    put(o, "\x00\x3c", 2);                             /* b: d = 1.0, qs = 0..31 */
    for (int k = 0; k < 32; k++) o->d[o->n++] = (unsigned char)k;
    if (v == V_SHORT_DATA) o->n -= 10;
}

static void test_built_file_is_valid(void)
{
    struct out o;
    build(V_OK, &o);
    struct gguf_file *g;
    struct eb_err e = {0};
    if (gguf_open_memory(o.d, o.n, "ok", &g, &e) != 0) { CHECK_MSG(0, "%s", e.msg); return; }
    const struct tensor_ref *a = gguf_find_tensor(g, "a"), *b = gguf_find_tensor(g, "b");
    CHECK(a && b && a->nbytes == 64 && b->nbytes == 34);
    float out[32];
    CHECK(quant_dequantize(b->type, b->data, out, 32) == 0 && out[0] == 0 && out[31] == 31);
    CHECK(quant_dequantize(a->type, a->data, out, 16) == 0 && out[15] == 15);
    int64_t i;
    CHECK(gguf_get_arr_int(g, "test.arr", 1, &i) == 0 && i == 2);
    gguf_close(g);
}

static void test_corrupt_files(void)
{
    for (int v = 1; v < V_COUNT; v++) {
        struct out o;
        build((enum variant)v, &o);
        unsigned char *copy = malloc(o.n);        /* exact size for ASan */
        memcpy(copy, o.d, o.n);
        struct gguf_file *g = (struct gguf_file *)1;
        struct eb_err e = {0};
        int rc = gguf_open_memory(copy, o.n, "bad.gguf", &g, &e);
        CHECK_MSG(rc == -1 && g == NULL, "variant %d was accepted", v);
        CHECK_MSG(good_message(&e, "bad.gguf"), "variant %d: message '%s'", v, e.msg);
        CHECK_MSG(expect_msg[v] && strstr(e.msg, expect_msg[v]), "variant %d: '%s' lacks '%s'", v,
                  e.msg, expect_msg[v] ? expect_msg[v] : "?");
        if (rc == 0) gguf_close(g);
        free(copy);
    }
}

static void test_open_errors(void)
{
    struct gguf_file *g;
    struct eb_err e = {0};
    CHECK(gguf_open("tests/fixtures/no-such-file.gguf", &g, &e) == -1 && g == NULL);
    CHECK(good_message(&e, "tests/fixtures/no-such-file.gguf") && strstr(e.msg, "No such file"));
    CHECK(gguf_open("tests/fixtures", &g, &e) == -1 && strstr(e.msg, "not a regular file"));
    char path[] = "/tmp/evictbench_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        CHECK(gguf_open(path, &g, &e) == -1 && good_message(&e, path) && strstr(e.msg, "empty file"));
        unlink(path);
    }
    CHECK(gguf_open_memory(NULL, 0, NULL, &g, &e) == -1 && good_message(&e, "<memory>"));
    CHECK(gguf_open_memory("GGUF", 4, "four", &g, &e) == -1 && strstr(e.msg, "truncated"));
}

/* ---- the default model ---- */

/* Compare the tensor table with the gguf package's reading of the same file. */
static void check_against_table(const struct gguf_file *g)
{
    FILE *f = fopen(FIXTURE("quant/smollm2_tensors.txt"), "r");
    if (!f) { fprintf(stderr, "  note: smollm2_tensors.txt absent; table not compared\n"); return; }
    char line[512];
    int rows = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char name[256], v0[64], v1[64];
        int type, nd;
        long long ne[4], nbytes;
        if (sscanf(line, "%255s %d %d %lld %lld %lld %lld %lld %63s %63s", name, &type, &nd, &ne[0],
                   &ne[1], &ne[2], &ne[3], &nbytes, v0, v1) != 10) { bad++; continue; }
        rows++;
        const struct tensor_ref *t = gguf_find_tensor(g, name);
        if (!t || t->type != type || t->n_dims != nd || t->ne[0] != ne[0] || t->ne[1] != ne[1] ||
            t->ne[2] != ne[2] || t->ne[3] != ne[3] || (long long)t->nbytes != nbytes) {
            if (bad++ < 3) fprintf(stderr, "    tensor %s differs\n", name);
            continue;
        }
        float out[2048];
        if (t->ne[0] > 2048 || quant_dequantize(t->type, t->data, out, t->ne[0]) != 0 ||
            out[0] != (float)strtod(v0, NULL) || out[1] != (float)strtod(v1, NULL)) {
            if (bad++ < 3) fprintf(stderr, "    tensor %s first values differ\n", name);
        }
    }
    fclose(f);
    CHECK(rows == 272);
    CHECK_MSG(bad == 0, "%d tensors differ from the gguf package's reading", bad);
}

static void test_smollm2(void)
{
    if (access(SMOLLM2, R_OK) != 0) SKIP("%s not present (make deps fetches it)", SMOLLM2);
    struct gguf_file *g;
    struct eb_err e = {0};
    if (gguf_open(SMOLLM2, &g, &e) != 0) { CHECK_MSG(0, "%s", e.msg); return; }
    const char *s;
    size_t len;
    int64_t i;
    CHECK(gguf_tensor_count(g) == 272);
    CHECK(gguf_get_str(g, "general.architecture", &s, &len) == 0 && str_is(s, len, "llama"));
    CHECK(gguf_get_int(g, "llama.block_count", &i) == 0 && i == 30);
    CHECK(gguf_get_int(g, "llama.embedding_length", &i) == 0 && i == 576);
    uint64_t n;
    int et;
    CHECK(gguf_get_arr_info(g, "tokenizer.ggml.tokens", &et, &n) == 0 && et == GGUF_STRING &&
          n == 49152);
    CHECK(gguf_get_arr_str(g, "tokenizer.ggml.tokens", n - 1, &s, &len) == 0 && len > 0);
    check_against_table(g);
    walk_file(g);

    /* Dequantize every row of every tensor; all values must be finite. */
    int counts[EB_TYPE_COUNT_] = {0}, nonfinite = 0, failed = 0;
    float *row = malloc(8192 * sizeof *row);
    for (int k = 0; row && k < gguf_tensor_count(g); k++) {
        const struct tensor_ref *t = gguf_tensor(g, k);
        counts[t->type]++;
        if (t->ne[0] > 8192 || !quant_type_supported(t->type)) { failed++; continue; }
        int64_t rows = tensor_nelements(t) / t->ne[0];
        size_t rb = quant_row_bytes(t->type, t->ne[0]);
        for (int64_t r = 0; r < rows; r++) {
            if (quant_dequantize(t->type, (const unsigned char *)t->data + r * rb, row, t->ne[0])) {
                failed++;
                break;
            }
            for (int64_t j = 0; j < t->ne[0]; j++) nonfinite += !isfinite(row[j]);
        }
    }
    free(row);
    CHECK(failed == 0 && nonfinite == 0);
    CHECK(counts[EB_TYPE_Q4_1] > 0 && counts[EB_TYPE_Q8_0] > 0);
    CHECK(counts[EB_TYPE_Q4_1] + counts[EB_TYPE_Q8_0] + counts[EB_TYPE_F32] == 272);
    gguf_close(g);
}

/* ---- fuzz regression corpus ---- */

static void test_fuzz_corpus(void)
{
    const char *dir = "tests/fuzz_corpus/gguf";
    DIR *d = opendir(dir);
    if (!d) { CHECK_MSG(0, "%s missing", dir); return; }
    int files = 0, ok = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t size;
        unsigned char *buf = read_all(path, &size);
        if (!buf) continue;
        files++;
        struct gguf_file *g;
        struct eb_err e = {0};
        if (gguf_open_memory(buf, size, de->d_name, &g, &e) == 0) {
            ok++;
            walk_file(g);
            gguf_close(g);
        } else {
            CHECK_MSG(good_message(&e, de->d_name), "%s: '%s'", de->d_name, e.msg);
        }
        free(buf);
    }
    closedir(d);
    CHECK(files > 0);
    fprintf(stderr, "  note: fuzz corpus: %d files replayed, %d valid\n", files, ok);
}

int main(void)
{
    RUN(test_tiny_file);
    RUN(test_tiny_memory);
    RUN(test_truncations);
    RUN(test_built_file_is_valid);
    RUN(test_corrupt_files);
    RUN(test_open_errors);
    RUN(test_smollm2);
    RUN(test_fuzz_corpus);
    return test_summary("gguf");
}
