/* test_quant.c - block sizes, f16/bf16 conversion, and dequantization of every
 * supported type against the gguf Python package (tests/fixtures/quant/<TYPE>.bin,
 * made by tools/golden/gen_quant.py; layout described there). */
#include <stdint.h>

#include "model/quant.h"
#include "model/tensor.h"
#include "test.h"

struct fixture {
    unsigned char *buf;
    uint32_t type, n, n_src, n_bytes;
    const float *src;           /* n_src values (unaligned-safe: buf is malloc'd, offsets are 4-multiples) */
    const unsigned char *blocks;
    const float *expected;
};

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Loads tests/fixtures/quant/<name>.bin; returns 0 when present and well-formed. */
static int load_fixture(const char *name, struct fixture *f)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/quant/%s.bin", name);
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->buf = malloc(size > 0 ? (size_t)size : 1);
    size_t got = f->buf ? fread(f->buf, 1, (size_t)size, fp) : 0;
    fclose(fp);
    if (size < 20 || got != (size_t)size || memcmp(f->buf, "EBQ1", 4) != 0) return -1;
    f->type = get_u32(f->buf + 4);
    f->n = get_u32(f->buf + 8);
    f->n_src = get_u32(f->buf + 12);
    f->n_bytes = get_u32(f->buf + 16);
    size_t need = 20 + 4 * (size_t)f->n_src + f->n_bytes + 4 * (size_t)f->n;
    if (need != (size_t)size || f->n_bytes % 4 != 0) return -1;
    f->src = (const float *)(f->buf + 20);
    f->blocks = f->buf + 20 + 4 * (size_t)f->n_src;
    f->expected = (const float *)(f->blocks + f->n_bytes);
    return 0;
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Dequantizes one fixture and compares with the reference: exact bits
 * (and within 1e-6 as the looser guarantee). */
static void check_type(const char *name, int type)
{
    struct fixture f;
    if (load_fixture(name, &f) != 0) {
        free(f.buf);
        CHECK_MSG(0, "fixture %s missing or malformed (run tools/golden/gen_quant.py)", name);
        return;
    }
    CHECK((int)f.type == type);
    CHECK(quant_row_bytes(type, f.n) == f.n_bytes);
    float *out = malloc((size_t)f.n * sizeof *out);
    CHECK(out != NULL);
    if (out && quant_dequantize(type, f.blocks, out, f.n) == 0) {
        int mismatches = 0, first = -1;
        double maxdiff = 0;
        for (uint32_t i = 0; i < f.n; i++) {
            float want;
            memcpy(&want, (const unsigned char *)f.expected + 4 * (size_t)i, 4);
            if (bits_of(out[i]) != bits_of(want)) {
                if (first < 0) first = (int)i;
                mismatches++;
            }
            double d = fabs((double)out[i] - (double)want);
            if (!(d <= maxdiff) && !(isinf(out[i]) && out[i] == want)) maxdiff = d;
        }
        CHECK_MSG(mismatches == 0, "%s: %d of %u values differ in bits (first at %d)", name,
                  mismatches, f.n, first);
        CHECK_MSG(maxdiff <= 1e-6, "%s: max abs diff %g", name, maxdiff);
    } else {
        CHECK_MSG(0, "%s: dequantize failed", name);
    }
    free(out);
    free(f.buf);
}

static void test_f32(void) { check_type("F32", EB_TYPE_F32); }
static void test_f16(void) { check_type("F16", EB_TYPE_F16); }
static void test_bf16(void) { check_type("BF16", EB_TYPE_BF16); }
static void test_q8_0(void) { check_type("Q8_0", EB_TYPE_Q8_0); }
static void test_q4_0(void) { check_type("Q4_0", EB_TYPE_Q4_0); }
static void test_q4_1(void) { check_type("Q4_1", EB_TYPE_Q4_1); }
static void test_q5_0(void) { check_type("Q5_0", EB_TYPE_Q5_0); }
static void test_q5_1(void) { check_type("Q5_1", EB_TYPE_Q5_1); }
static void test_q4_k(void) { check_type("Q4_K", EB_TYPE_Q4_K); }
static void test_q5_k(void) { check_type("Q5_K", EB_TYPE_Q5_K); }
static void test_q6_k(void) { check_type("Q6_K", EB_TYPE_Q6_K); }

/* The F16 fixture's blocks are numpy's f32 -> f16 rounding of its inputs. */
static void test_f32_to_f16_matches_numpy(void)
{
    struct fixture f;
    if (load_fixture("F16", &f) != 0 || f.n_src != f.n) {
        free(f.buf);
        CHECK_MSG(0, "F16 fixture missing or has no inputs");
        return;
    }
    int bad = 0;
    for (uint32_t i = 0; i < f.n; i++) {
        float x;
        memcpy(&x, (const unsigned char *)f.src + 4 * (size_t)i, 4);
        uint16_t want = (uint16_t)(f.blocks[2 * i] | f.blocks[2 * i + 1] << 8);
        uint16_t got = quant_f32_to_f16(x);
        if (got != want) {
            if (bad++ < 5) fprintf(stderr, "    f32_to_f16(%a) = 0x%04x, want 0x%04x\n", x, got, want);
        }
    }
    CHECK(bad == 0);
    free(f.buf);
}

/* Every half value against the IEEE formula; and the round trip f16 -> f32 -> f16. */
static void test_f16_exhaustive(void)
{
    int bad = 0, badrt = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
        float got = quant_f16_to_f32((uint16_t)h);
        if (e == 31 && m != 0) {
            if (!isnan(got)) bad++;
            if (!isnan(quant_f16_to_f32(quant_f32_to_f16(got)))) badrt++;
            continue;
        }
        double want = e == 31 ? INFINITY
                    : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
        if (s) want = -want;
        if (bits_of(got) != bits_of((float)want)) bad++;
        if (quant_f32_to_f16(got) != h) badrt++;
    }
    CHECK_MSG(bad == 0, "%d half values convert wrongly", bad);
    CHECK_MSG(badrt == 0, "%d half values do not round-trip", badrt);
}

static void test_f32_to_f16_edges(void)
{
    CHECK(quant_f32_to_f16(0.0f) == 0x0000);
    CHECK(quant_f32_to_f16(-0.0f) == 0x8000);
    CHECK(quant_f32_to_f16(1.0f) == 0x3C00);
    CHECK(quant_f32_to_f16(65504.0f) == 0x7BFF);
    CHECK(quant_f32_to_f16(65519.99f) == 0x7BFF);
    CHECK(quant_f32_to_f16(65520.0f) == 0x7C00);   /* ties to even -> overflow */
    CHECK(quant_f32_to_f16(-1e10f) == 0xFC00);
    CHECK(quant_f32_to_f16(INFINITY) == 0x7C00);
    CHECK((quant_f32_to_f16(NAN) & 0x7C00) == 0x7C00 && (quant_f32_to_f16(NAN) & 0x3FF) != 0);
    CHECK(quant_f32_to_f16(ldexpf(1, -24)) == 0x0001);
    CHECK(quant_f32_to_f16(ldexpf(1, -25)) == 0x0000);            /* tie to even: 0 */
    CHECK(quant_f32_to_f16(ldexpf(3, -25)) == 0x0002);            /* 1.5 ulp -> 2 */
    CHECK(quant_f32_to_f16(ldexpf(1023, -24) + ldexpf(1, -25)) == 0x0400); /* carries to normal */
    CHECK(quant_f32_to_f16(1e-30f) == 0x0000);
    CHECK(quant_bf16_to_f32(0x3F80) == 1.0f);
    CHECK(quant_bf16_to_f32(0xC000) == -2.0f);
    CHECK(isinf(quant_bf16_to_f32(0x7F80)));
}

/* Sizes as the gguf package's GGML_QUANT_SIZES lists them. */
static void test_sizes(void)
{
    static const struct { int type; int elems; size_t bytes; const char *name; int ok; } want[] = {
        {0, 1, 4, "F32", 1},      {1, 1, 2, "F16", 1},      {2, 32, 18, "Q4_0", 1},
        {3, 32, 20, "Q4_1", 1},   {6, 32, 22, "Q5_0", 1},   {7, 32, 24, "Q5_1", 1},
        {8, 32, 34, "Q8_0", 1},   {10, 256, 84, "Q2_K", 0}, {11, 256, 110, "Q3_K", 0},
        {12, 256, 144, "Q4_K", 1}, {13, 256, 176, "Q5_K", 1}, {14, 256, 210, "Q6_K", 1},
        {15, 256, 292, "Q8_K", 0}, {23, 256, 136, "IQ4_XS", 0}, {30, 1, 2, "BF16", 1},
        {39, 32, 17, "MXFP4", 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK(quant_block_elems(want[i].type) == want[i].elems);
        CHECK(quant_block_bytes(want[i].type) == want[i].bytes);
        CHECK_STR(quant_type_name(want[i].type), want[i].name);
        CHECK(quant_type_supported(want[i].type) == want[i].ok);
    }
    int unknown[] = {-1, 4, 5, 31, 32, 33, 40, 1000};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK(quant_block_elems(unknown[i]) == 0);
        CHECK(quant_block_bytes(unknown[i]) == 0);
        CHECK_STR(quant_type_name(unknown[i]), "?");
        CHECK(!quant_type_supported(unknown[i]));
    }
    CHECK(quant_row_bytes(EB_TYPE_Q4_K, 512) == 288);
    CHECK(quant_row_bytes(EB_TYPE_Q4_K, 100) == 0);
    CHECK(quant_row_bytes(EB_TYPE_Q8_0, 576) == 18 * 34);
    CHECK(quant_row_bytes(EB_TYPE_F32, 3) == 12);
    CHECK(quant_row_bytes(EB_TYPE_F32, -1) == 0);
    CHECK(quant_row_bytes(99, 32) == 0);
    CHECK(quant_row_bytes(EB_TYPE_F32, INT64_MAX) == 0);          /* bytes overflow */
}

static void test_bad_arguments(void)
{
    unsigned char blk[210] = {0};
    float out[256];
    CHECK(quant_dequantize(EB_TYPE_Q2_K, blk, out, 256) == -1);   /* known but unsupported */
    CHECK(quant_dequantize(77, blk, out, 32) == -1);
    CHECK(quant_dequantize(EB_TYPE_Q4_0, blk, out, 31) == -1);
    CHECK(quant_dequantize(EB_TYPE_Q6_K, blk, out, 128) == -1);
    CHECK(quant_dequantize(EB_TYPE_Q8_0, blk, out, -32) == -1);
    CHECK(quant_dequantize(EB_TYPE_Q6_K, blk, out, 0) == 0);
    CHECK(quant_dequantize(EB_TYPE_Q6_K, blk, out, 256) == 0);
    CHECK(out[0] == 0.0f && out[255] == 0.0f);
}

/* Blocks at odd addresses must work: file data is only as aligned as the file says. */
static void test_unaligned_source(void)
{
    struct fixture f;
    if (load_fixture("Q4_K", &f) != 0) { free(f.buf); CHECK(0); return; }
    unsigned char *copy = malloc(f.n_bytes + 1);
    float *a = malloc((size_t)f.n * sizeof *a), *b = malloc((size_t)f.n * sizeof *b);
    CHECK(copy && a && b);
    if (copy && a && b) {
        memcpy(copy + 1, f.blocks, f.n_bytes);
        CHECK(quant_dequantize(EB_TYPE_Q4_K, f.blocks, a, f.n) == 0);
        CHECK(quant_dequantize(EB_TYPE_Q4_K, copy + 1, b, f.n) == 0);
        CHECK(memcmp(a, b, (size_t)f.n * sizeof *a) == 0);
    }
    free(copy);
    free(a);
    free(b);
    free(f.buf);
}

int main(void)
{
    RUN(test_sizes);
    RUN(test_bad_arguments);
    RUN(test_f16_exhaustive);
    RUN(test_f32_to_f16_edges);
    RUN(test_f32_to_f16_matches_numpy);
    RUN(test_f32);
    RUN(test_f16);
    RUN(test_bf16);
    RUN(test_q8_0);
    RUN(test_q4_0);
    RUN(test_q4_1);
    RUN(test_q5_0);
    RUN(test_q5_1);
    RUN(test_q4_k);
    RUN(test_q5_k);
    RUN(test_q6_k);
    RUN(test_unaligned_source);
    return test_summary("quant");
}
