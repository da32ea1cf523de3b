/* fuzz_gguf.c - libFuzzer entry for the GGUF reader: parse from memory, then
 * touch every metadata accessor (recursing into nested arrays), every tensor
 * and the first rows of each dequantizable tensor.  Built by tools/fuzz/build.sh. */
// fuzz-sources: model/gguf.c kernels/quant.c util/err.c util/mapped.c
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/quant.h"

static volatile uint64_t sink;   /* keeps the reads from being optimized away */

static void touch_value(const struct gguf_file *g, int64_t v, int depth)
{
    int64_t i64;
    double f64;
    int b, et;
    const char *s;
    size_t len;
    uint64_t count;
    sink += (uint64_t)gguf_value_type(g, v);
    if (gguf_value_int(g, v, &i64) == 0) sink += (uint64_t)i64;
    if (gguf_value_float(g, v, &f64) == 0) sink += (uint64_t)(f64 == f64);
    if (gguf_value_bool(g, v, &b) == 0) sink += (uint64_t)b;
    if (gguf_value_str(g, v, &s, &len) == 0 && len) sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
    if (gguf_value_arr_info(g, v, &et, &count) != 0) return;
    if (depth > 32) abort();   /* the reader limits nesting; deeper means a bug */
    const unsigned char *raw = gguf_value_arr_data(g, v);
    for (uint64_t i = 0; i < count; i++) {
        if (gguf_value_arr_int(g, v, i, &i64) == 0) sink += (uint64_t)i64;
        if (gguf_value_arr_float(g, v, i, &f64) == 0) sink += (uint64_t)(f64 == f64);
        int64_t c = gguf_value_arr_elem(g, v, i);
        if (c >= 0) touch_value(g, c, depth + 1);
    }
    if (raw && count) sink += raw[0];
    (void)gguf_value_arr_int(g, v, count, &i64);        /* one past the end must fail */
    if (gguf_value_arr_elem(g, v, count) != -1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file *g;
    struct eb_err e;
    memset(&e, 0, sizeof e);
    if (gguf_open_memory(data, size, "fuzz", &g, &e) != 0) {
        /* every failure must explain itself in one line naming the input */
        if (g != NULL || strncmp(e.msg, "fuzz: ", 6) != 0 || strchr(e.msg, '\n')) abort();
        return 0;
    }
    sink += gguf_version(g) + gguf_file_size(g) + gguf_alignment(g) + gguf_data_offset(g);
    for (int k = 0; k < gguf_key_count(g); k++) {
        const char *name = gguf_key_name(g, k);
        if (!name || gguf_find_key(g, name) != k) abort();
        sink += (uint64_t)gguf_key_type(g, k);
        touch_value(g, gguf_key_value(g, k), 0);
        int64_t i64;
        double f64;
        int b, et;
        uint64_t n;
        const char *s;
        size_t len;
        (void)gguf_get_int(g, name, &i64);
        (void)gguf_get_float(g, name, &f64);
        (void)gguf_get_bool(g, name, &b);
        (void)gguf_get_str(g, name, &s, &len);
        if (gguf_get_arr_info(g, name, &et, &n) == 0 && n > 0) {
            (void)gguf_get_arr_str(g, name, n - 1, &s, &len);
            (void)gguf_get_arr_int(g, name, n - 1, &i64);
            (void)gguf_get_arr_float(g, name, n - 1, &f64);
            (void)gguf_get_arr_data(g, name);
        }
    }
    float row[4096];
    for (int t = 0; t < gguf_tensor_count(g); t++) {
        const struct tensor_ref *r = gguf_tensor(g, t);
        if (!r || gguf_find_tensor(g, r->name) != r) abort();
        if (r->nbytes) sink += ((const unsigned char *)r->data)[r->nbytes - 1];
        if (!quant_type_supported(r->type)) continue;
        /* dequantize the first rows, up to the row buffer */
        int64_t n = r->ne[0], rows = tensor_nelements(r) / n;
        size_t rb = quant_row_bytes(r->type, n);
        if (rb == 0) abort();
        for (int64_t i = 0; i < rows && i < 4 && n <= 4096; i++)
            if (quant_dequantize(r->type, (const unsigned char *)r->data + i * rb, row, n) != 0)
                abort();
    }
    gguf_close(g);
    return 0;
}
