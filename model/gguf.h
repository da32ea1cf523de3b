/* gguf.h - reader for GGUF model files, versions 2 and 3.
 *
 * gguf_open validates the whole header, metadata and tensor table against the
 * file size (GGUF files are untrusted input) and mmaps the file; tensor data
 * pointers stay valid until gguf_close.  Keys and tensor names are returned as
 * NUL-terminated copies (names holding control bytes are rejected); string
 * values point into the file and are not NUL-terminated. */
#ifndef EB_GGUF_H
#define EB_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "tensor.h"

enum gguf_vtype {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3,
    GGUF_UINT32 = 4, GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7,
    GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12
};

struct gguf_file;

/* Open and validate; on failure returns -1 with e = "<path>: <what is wrong>". */
int gguf_open(const char *path, struct gguf_file **out, struct eb_err *e);
/* Parse from memory (used by the fuzzer and tests); the buffer must outlive the handle. */
int gguf_open_memory(const void *data, size_t size, const char *name,
                     struct gguf_file **out, struct eb_err *e);
void gguf_close(struct gguf_file *g);

uint32_t gguf_version(const struct gguf_file *g);
size_t gguf_file_size(const struct gguf_file *g);
const char *gguf_path(const struct gguf_file *g);
size_t gguf_alignment(const struct gguf_file *g);   /* general.alignment, default 32 */
size_t gguf_data_offset(const struct gguf_file *g); /* file offset of the tensor data */
/* Bytes [p, p + n) of the file will not be read again (a backend copied
 * them): let the kernel drop their pages from this process (a no-op unless
 * the file is mapped), so the copy does not count twice in memory. */
void gguf_drop_pages(const struct gguf_file *g, const void *p, size_t n);

/* Metadata.  Lookups return -1 (without setting an error) when the key is
 * absent or of an incompatible type.  get_int accepts any integer type or bool. */
int gguf_find_key(const struct gguf_file *g, const char *key); /* index or -1 */
int gguf_key_count(const struct gguf_file *g);
const char *gguf_key_name(const struct gguf_file *g, int idx);
int gguf_key_type(const struct gguf_file *g, int idx);                 /* enum gguf_vtype */
int gguf_get_int(const struct gguf_file *g, const char *key, int64_t *out);
int gguf_get_float(const struct gguf_file *g, const char *key, double *out); /* f32/f64/int */
int gguf_get_bool(const struct gguf_file *g, const char *key, int *out);
/* String value: pointer into the mapping (NOT NUL-terminated) + length. */
int gguf_get_str(const struct gguf_file *g, const char *key, const char **s, size_t *len);

/* Arrays: element type and count, then typed access. */
int gguf_get_arr_info(const struct gguf_file *g, const char *key, int *elem_type, uint64_t *count);
int gguf_get_arr_str(const struct gguf_file *g, const char *key, uint64_t i,
                     const char **s, size_t *len);
/* Element i of a numeric array converted to int64 / double. */
int gguf_get_arr_int(const struct gguf_file *g, const char *key, uint64_t i, int64_t *out);
int gguf_get_arr_float(const struct gguf_file *g, const char *key, uint64_t i, double *out);
/* Raw pointer to the elements of a numeric array (little-endian, packed). */
const void *gguf_get_arr_data(const struct gguf_file *g, const char *key);

/* Generic access to any metadata value, including strings and arrays inside
 * arrays (nested arrays).  A value is named by an id >= 0, valid while the
 * file is open; functions taking an id return -1 for a bad id or a value of
 * an incompatible type.  Numeric array elements have no ids: read them with
 * gguf_value_arr_int/float/data. */
int64_t gguf_key_value(const struct gguf_file *g, int key_idx);   /* id of a key's value */
int gguf_value_type(const struct gguf_file *g, int64_t v);       /* enum gguf_vtype */
int gguf_value_int(const struct gguf_file *g, int64_t v, int64_t *out);
int gguf_value_float(const struct gguf_file *g, int64_t v, double *out);
int gguf_value_bool(const struct gguf_file *g, int64_t v, int *out);
int gguf_value_str(const struct gguf_file *g, int64_t v, const char **s, size_t *len);
int gguf_value_arr_info(const struct gguf_file *g, int64_t v, int *elem_type, uint64_t *count);
/* Id of element i of an array of strings or of arrays; -1 otherwise. */
int64_t gguf_value_arr_elem(const struct gguf_file *g, int64_t v, uint64_t i);
int gguf_value_arr_int(const struct gguf_file *g, int64_t v, uint64_t i, int64_t *out);
int gguf_value_arr_float(const struct gguf_file *g, int64_t v, uint64_t i, double *out);
const void *gguf_value_arr_data(const struct gguf_file *g, int64_t v);

/* Tensors. */
int gguf_tensor_count(const struct gguf_file *g);
const struct tensor_ref *gguf_tensor(const struct gguf_file *g, int idx);
const struct tensor_ref *gguf_find_tensor(const struct gguf_file *g, const char *name);

#endif
