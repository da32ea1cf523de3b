// fuzz-sources: model/safetensors.c model/hfconfig.c util/json_file.c util/err.c util/mapped.c
// fuzz-libs: -lcjson
/* fuzz_safetensors.c - libFuzzer entry for the safetensors header parser.
 *
 * Each input is parsed twice from memory: as a whole file, and as the header
 * JSON alone, wrapped with a correct 8-byte length and 1 KB of data (random
 * mutations almost never keep the length prefix consistent, so the second
 * form is what reaches the tensor validation).  For every accepted tensor the
 * first and last byte are read, so ASan flags any pointer outside the buffer.
 * Built by tools/fuzz/build.sh; seeds and found inputs live in
 * tests/fuzz_corpus/safetensors/ (replayed, both ways, by test_safetensors). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

#define DATA_BYTES 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An accepted shape: every product of its non-zero dimensions, in bytes of
 * at least 2, stays within 2^62, and its size is its element count times 2
 * or 4 bytes (no wrap). */
static void check_shape(const struct tensor_ref *t)
{
    uint64_t span = 1, nelem = 1;
    for (int k = 0; k < 4; k++) {
        if (t->ne[k] < 0) __builtin_trap();
        uint64_t d = (uint64_t)t->ne[k];
        if (d > 1) {
            if (span > ((uint64_t)1 << 61) / d) __builtin_trap();
            span *= d;
        }
        nelem *= d;
    }
    if (t->nbytes % 2 != 0 || (nelem == 0 ? t->nbytes != 0
                                          : t->nbytes / 2 != nelem && t->nbytes / 4 != nelem))
        __builtin_trap();
}

static void parse(const uint8_t *buf, size_t size)
{
    struct safetensors *st;
    struct eb_err e;
    if (safetensors_open_memory(buf, size, "fuzz", &st, &e) != 0) return;
    volatile unsigned char sink = 0;
    for (int i = 0; i < safetensors_tensor_count(st); i++) {
        const struct tensor_ref *t = safetensors_tensor(st, i);
        if (t->nbytes) {
            const unsigned char *p = t->data;
            sink ^= p[0];
            sink ^= p[t->nbytes - 1];
        }
        if (safetensors_find(st, t->name) == NULL) __builtin_trap();
        check_shape(t);
        for (const unsigned char *c = (const unsigned char *)t->name; *c; c++)
            if (*c < 0x20 || *c == 0x7f || (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f))
                __builtin_trap(); /* control characters are rejected */
    }
    (void)safetensors_metadata(st, "format");
    (void)sink;
    safetensors_close(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse(data, size);
    /* Exact-size heap copy so ASan sees reads past the end. */
    uint8_t *buf = malloc(8 + size + DATA_BYTES);
    if (!buf) return 0;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)size >> (8 * i));
    memcpy(buf + 8, data, size);
    memset(buf + 8 + size, 0x5a, DATA_BYTES);
    parse(buf, 8 + size + DATA_BYTES);
    free(buf);
    return 0;
}
