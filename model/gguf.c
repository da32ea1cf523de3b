/* gguf.c - GGUF v2/v3 reader: validates the whole file against its size, then
 * serves metadata and the tensor table from the mapping.
 *
 * Every value of the metadata (including each string or array inside an
 * array) is recorded once as a `struct val` in one flat vector, so lookups,
 * element i of a string array and arrays nested in arrays are O(1) and never
 * re-parse untrusted bytes.  Numeric array elements are not recorded: they are
 * packed and read in place. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant.h"
#include "util/mapped.h"

#define GGUF_MAGIC "GGUF"
#define DEFAULT_ALIGNMENT 32
#define MAX_NESTING 8          /* arrays inside arrays; deeper input is rejected */
#define MAX_KEY_LEN 65535      /* the spec's limit for keys */
#define MAX_NAME_LEN 256       /* tensor names (ggml itself allows 63) */

struct val {
    int type;                  /* enum gguf_vtype */
    int elem_type;             /* arrays only */
    uint64_t count;            /* arrays: elements; strings: bytes */
    size_t off;                /* payload: scalar bytes, string bytes, first array element */
    size_t child;              /* arrays of strings/arrays: index of element 0 in vals */
};

struct kv {
    char *key;                 /* NUL-terminated copy */
    size_t val;                /* index in vals */
};

struct gguf_file {
    char *path;
    const uint8_t *base;
    size_t size;
    int mapped;                /* base is our mmap */
    uint32_t version;
    size_t alignment;
    size_t data_start;
    struct kv *kvs;
    int n_kv;
    int *kv_sorted;            /* kv indices by key, for bsearch */
    struct val *vals;
    size_t n_vals, cap_vals;
    struct tensor_ref *tensors;
    int n_tensors;
    int *tensor_sorted;        /* tensor indices by name */
};

/* ---- bounded little-endian reader ---- */

struct reader {
    const uint8_t *p;
    size_t size, pos;
    struct eb_err *e;
    const char *path;
};

static int need(struct reader *r, size_t n, const char *what)
{
    if (n > r->size - r->pos)
        return eb_fail(r->e, "%s: truncated file: %s at offset %zu needs %zu bytes, %zu left",
                       r->path, what, r->pos, n, r->size - r->pos);
    return 0;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int read_u32(struct reader *r, uint32_t *v, const char *what)
{
    if (need(r, 4, what)) return -1;
    *v = le32(r->p + r->pos);
    r->pos += 4;
    return 0;
}

static int read_u64(struct reader *r, uint64_t *v, const char *what)
{
    if (need(r, 8, what)) return -1;
    *v = le64(r->p + r->pos);
    r->pos += 8;
    return 0;
}

/* A gguf string: u64 length + bytes.  Sets *off and *len; checks it fits. */
static int read_str(struct reader *r, size_t *off, size_t *len, const char *what)
{
    uint64_t n;
    if (read_u64(r, &n, what)) return -1;
    if (n > r->size - r->pos)
        return eb_fail(r->e, "%s: %s: string length %llu at offset %zu runs past the end of the file (%zu bytes left)",
                       r->path, what, (unsigned long long)n, r->pos - 8, r->size - r->pos);
    *off = r->pos;
    *len = (size_t)n;
    r->pos += (size_t)n;
    return 0;
}

/* ---- metadata values ---- */

static size_t scalar_size(int type)
{
    switch (type) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static const char *vtype_name(int type)
{
    static const char *names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32",
                                  "float32", "bool", "string", "array", "uint64", "int64",
                                  "float64"};
    return type >= 0 && type <= GGUF_FLOAT64 ? names[type] : "?";
}

/* Reserve n slots in g->vals; returns the index of the first, or -1. */
static int vals_reserve(struct gguf_file *g, size_t n, size_t *first, struct eb_err *e)
{
    if (n > g->cap_vals - g->n_vals) {
        size_t cap = g->cap_vals ? g->cap_vals : 64;
        while (cap - g->n_vals < n) cap *= 2;
        struct val *v = realloc(g->vals, cap * sizeof *v);
        if (!v) return eb_fail(e, "%s: out of memory for %zu metadata values", g->path, cap);
        g->vals = v;
        g->cap_vals = cap;
    }
    *first = g->n_vals;
    g->n_vals += n;
    return 0;
}

static int parse_value(struct gguf_file *g, struct reader *r, int type, int depth,
                       size_t slot, const char *key)
{
    struct val v = {type, -1, 0, r->pos, 0};
    size_t sz = scalar_size(type);
    if (sz) {
        if (need(r, sz, key)) return -1;
        if (type == GGUF_BOOL && r->p[r->pos] > 1)
            return eb_fail(r->e, "%s: %s: bool value %u at offset %zu (must be 0 or 1)",
                           r->path, key, r->p[r->pos], r->pos);
        r->pos += sz;
    } else if (type == GGUF_STRING) {
        size_t len;
        if (read_str(r, &v.off, &len, key)) return -1;
        v.count = len;
    } else if (type == GGUF_ARRAY) {
        if (depth >= MAX_NESTING)
            return eb_fail(r->e, "%s: %s: arrays nested more than %d deep", r->path, key, MAX_NESTING);
        uint32_t et;
        uint64_t n;
        if (read_u32(r, &et, key) || read_u64(r, &n, key)) return -1;
        if (et > GGUF_FLOAT64)
            return eb_fail(r->e, "%s: %s: unknown array element type %u", r->path, key, et);
        /* smallest encoding of one element: a scalar, a string length, an array header */
        size_t min = scalar_size((int)et);
        if (!min) min = et == GGUF_STRING ? 8 : 12;
        if (n > (r->size - r->pos) / min)
            return eb_fail(r->e, "%s: %s: array of %llu %s elements cannot fit in the %zu bytes left",
                           r->path, key, (unsigned long long)n, vtype_name((int)et), r->size - r->pos);
        v.elem_type = (int)et;
        v.count = n;
        v.off = r->pos;
        if (scalar_size((int)et)) {
            if (et == GGUF_BOOL)
                for (uint64_t i = 0; i < n; i++)
                    if (r->p[r->pos + i] > 1)
                        return eb_fail(r->e, "%s: %s: bool element %llu is %u (must be 0 or 1)",
                                       r->path, key, (unsigned long long)i, r->p[r->pos + i]);
            r->pos += (size_t)n * min;
        } else {
            if (vals_reserve(g, (size_t)n, &v.child, r->e)) return -1;
            for (uint64_t i = 0; i < n; i++)
                if (parse_value(g, r, (int)et, depth + 1, v.child + (size_t)i, key)) return -1;
        }
    } else {
        return eb_fail(r->e, "%s: %s: unknown value type %u", r->path, key, (unsigned)type);
    }
    g->vals[slot] = v;
    return 0;
}

/* ---- sorting and lookup by name ---- */

struct name_ref { const char *name; int idx; };

static int cmp_name_ref(const void *a, const void *b)
{
    const struct name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sort n names into `order`; fails naming the first duplicate. */
static int sort_names(const char *const *names, int n, int *order, const char **dup,
                      struct eb_err *e)
{
    struct name_ref *refs = eb_malloc((size_t)n * sizeof *refs, e);
    if (!refs) return -1;
    for (int i = 0; i < n; i++) refs[i] = (struct name_ref){names[i], i};
    qsort(refs, (size_t)n, sizeof *refs, cmp_name_ref);
    *dup = NULL;
    for (int i = 0; i < n; i++) {
        order[i] = refs[i].idx;
        if (i > 0 && !*dup && strcmp(refs[i].name, refs[i - 1].name) == 0) *dup = refs[i].name;
    }
    free(refs);
    return 0;
}

static int find_sorted(const int *order, int n, const char *name,
                       const char *(*name_of)(const struct gguf_file *, int),
                       const struct gguf_file *g)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, name_of(g, order[mid]));
        if (c == 0) return order[mid];
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return -1;
}

static const char *kv_name_of(const struct gguf_file *g, int i) { return g->kvs[i].key; }
static const char *tensor_name_of(const struct gguf_file *g, int i) { return g->tensors[i].name; }

/* A NUL-terminated copy of a key or tensor name read from the file.  Control
 * bytes (NUL, newline, ...) are rejected: names appear in error messages,
 * which must stay one line, and a NUL would make the copy ambiguous. */
static char *copy_name(const struct reader *r, size_t off, size_t len, const char *what,
                       struct eb_err *e)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = r->p[off + i];
        if (c < 0x20 || c == 0x7F) {
            eb_fail(e, "%s: %s at offset %zu contains the control character 0x%02x", r->path,
                    what, off, c);
            return NULL;
        }
    }
    char *s = eb_malloc(len + 1, e);
    if (!s) return NULL;
    memcpy(s, r->p + off, len);
    s[len] = 0;
    return s;
}

/* ---- header, metadata, tensor table ---- */

static int parse_kvs(struct gguf_file *g, struct reader *r, uint64_t n_kv)
{
    g->kvs = eb_calloc((size_t)n_kv, sizeof *g->kvs, r->e);
    if (!g->kvs) return -1;
    for (uint64_t i = 0; i < n_kv; i++) {
        char what[64];
        snprintf(what, sizeof what, "metadata key %llu", (unsigned long long)i);
        size_t off, len;
        if (read_str(r, &off, &len, what)) return -1;
        if (len == 0) return eb_fail(r->e, "%s: %s is empty", r->path, what);
        if (len > MAX_KEY_LEN)
            return eb_fail(r->e, "%s: %s is %zu bytes long (limit %d)", r->path, what, len, MAX_KEY_LEN);
        char *key = copy_name(r, off, len, what, r->e);
        if (!key) return -1;
        g->kvs[i].key = key;
        g->n_kv = (int)i + 1;
        char ctx[128];
        snprintf(ctx, sizeof ctx, "key '%.80s'", key);
        uint32_t type;
        if (read_u32(r, &type, ctx)) return -1;
        if (vals_reserve(g, 1, &g->kvs[i].val, r->e)) return -1;
        if (parse_value(g, r, (int)type, 0, g->kvs[i].val, ctx)) return -1;
    }
    const char **names = eb_malloc((size_t)g->n_kv * sizeof *names, r->e);
    g->kv_sorted = eb_malloc((size_t)g->n_kv * sizeof *g->kv_sorted, r->e);
    if (!names || !g->kv_sorted) { free(names); return -1; }
    for (int i = 0; i < g->n_kv; i++) names[i] = g->kvs[i].key;
    const char *dup;
    int rc = sort_names(names, g->n_kv, g->kv_sorted, &dup, r->e);
    free(names);
    if (rc) return -1;
    if (dup) return eb_fail(r->e, "%s: duplicate metadata key '%.200s'", r->path, dup);
    return 0;
}

static int parse_alignment(struct gguf_file *g, struct eb_err *e)
{
    g->alignment = DEFAULT_ALIGNMENT;
    int k = gguf_find_key(g, "general.alignment");
    if (k < 0) return 0;
    int type = gguf_key_type(g, k);
    int64_t a = 0;
    if (type == GGUF_BOOL || scalar_size(type) == 0 || type == GGUF_FLOAT32 || type == GGUF_FLOAT64)
        return eb_fail(e, "%s: general.alignment has type %s, expected an integer", g->path,
                       vtype_name(type));
    if (gguf_get_int(g, "general.alignment", &a)) a = -1; /* uint64 beyond int64 */
    if (a <= 0 || a > (1 << 30) || (a & (a - 1)) != 0)
        return eb_fail(e, "%s: general.alignment is %lld, not a power of two", g->path, (long long)a);
    g->alignment = (size_t)a;
    return 0;
}

/* a * b for non-negative int64 values, failing on overflow. */
static int mul_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a != 0 && b > INT64_MAX / a) return -1;
    *out = a * b;
    return 0;
}

static int parse_tensor_info(struct gguf_file *g, struct reader *r, int i,
                             uint64_t *offsets)
{
    struct tensor_ref *t = &g->tensors[i];
    char what[64];
    snprintf(what, sizeof what, "tensor %d name", i);
    size_t off, len;
    if (read_str(r, &off, &len, what)) return -1;
    if (len == 0) return eb_fail(r->e, "%s: tensor %d has an empty name", r->path, i);
    if (len > MAX_NAME_LEN)
        return eb_fail(r->e, "%s: tensor %d name is %zu bytes long (limit %d)", r->path, i, len,
                       MAX_NAME_LEN);
    char *name = copy_name(r, off, len, what, r->e);
    if (!name) return -1;
    t->name = name;
    g->n_tensors = i + 1;

    char ctx[MAX_NAME_LEN + 32];
    snprintf(ctx, sizeof ctx, "tensor '%s'", name);
    uint32_t n_dims;
    if (read_u32(r, &n_dims, ctx)) return -1;
    if (n_dims < 1 || n_dims > 4)
        return eb_fail(r->e, "%s: tensor '%s' has %u dimensions (must be 1..4)", r->path, name, n_dims);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t v;
        if (read_u64(r, &v, ctx)) return -1;
        if (v == 0 || v > (uint64_t)INT64_MAX)
            return eb_fail(r->e, "%s: tensor '%s' dimension %u is %lld (must be positive)", r->path,
                           name, d, (long long)v);
        t->ne[d] = (int64_t)v;
        if (mul_i64(nel, t->ne[d], &nel))
            return eb_fail(r->e, "%s: tensor '%s' element count overflows", r->path, name);
    }
    uint32_t type;
    if (read_u32(r, &type, ctx)) return -1;
    int be = quant_block_elems((int)type);
    if (be == 0)
        return eb_fail(r->e, "%s: tensor '%s' has unknown type id %u", r->path, name, type);
    t->type = (int)type;
    if (t->ne[0] % be != 0)
        return eb_fail(r->e, "%s: tensor '%s' row length %lld is not a multiple of the %s block size %d",
                       r->path, name, (long long)t->ne[0], quant_type_name(t->type), be);
    int64_t rows = nel / t->ne[0];
    size_t row = quant_row_bytes(t->type, t->ne[0]);
    if (row == 0 || (uint64_t)rows > SIZE_MAX / row)
        return eb_fail(r->e, "%s: tensor '%s' byte size overflows", r->path, name);
    t->nbytes = row * (size_t)rows;
    if (read_u64(r, &offsets[i], ctx)) return -1;
    if (offsets[i] % g->alignment != 0)
        return eb_fail(r->e, "%s: tensor '%s' offset %llu is not a multiple of the alignment %zu",
                       r->path, name, (unsigned long long)offsets[i], g->alignment);
    return 0;
}

struct placed { uint64_t off; int idx; };

static int cmp_placed(const void *a, const void *b)
{
    const struct placed *x = a, *y = b;
    if (x->off != y->off) return (x->off > y->off) - (x->off < y->off);
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Tensor data must lie inside the file and tensors must not overlap. */
static int place_tensors(struct gguf_file *g, const uint64_t *offsets, struct eb_err *e)
{
    if (g->n_tensors == 0) return 0;
    if (g->data_start > g->size)
        return eb_fail(e, "%s: truncated file: tensor data would start at offset %zu, file has %zu bytes",
                       g->path, g->data_start, g->size);
    size_t avail = g->size - g->data_start;
    struct placed *order = eb_malloc((size_t)g->n_tensors * sizeof *order, e);
    if (!order) return -1;
    for (int i = 0; i < g->n_tensors; i++) {
        struct tensor_ref *t = &g->tensors[i];
        order[i] = (struct placed){offsets[i], i};
        if (offsets[i] > avail || t->nbytes > avail - offsets[i]) {
            free(order);
            return eb_fail(e, "%s: tensor '%s' data (offset %llu, %zu bytes) runs past the end of the file (%zu data bytes)",
                           g->path, t->name, (unsigned long long)offsets[i], t->nbytes, avail);
        }
        t->data = g->base + g->data_start + offsets[i];
    }
    qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_placed);
    int rc = 0;
    for (int k = 1; k < g->n_tensors && rc == 0; k++) {
        const struct tensor_ref *a = &g->tensors[order[k - 1].idx], *b = &g->tensors[order[k].idx];
        if (order[k - 1].off + a->nbytes > order[k].off)
            rc = eb_fail(e, "%s: tensor '%s' (offset %llu, %zu bytes) overlaps tensor '%s' (offset %llu)",
                         g->path, a->name, (unsigned long long)order[k - 1].off, a->nbytes,
                         b->name, (unsigned long long)order[k].off);
    }
    free(order);
    return rc;
}

static int parse_tensors(struct gguf_file *g, struct reader *r, uint64_t n_tensors)
{
    g->tensors = eb_calloc((size_t)n_tensors, sizeof *g->tensors, r->e);
    uint64_t *offsets = eb_calloc((size_t)n_tensors, sizeof *offsets, r->e);
    if (!g->tensors || !offsets) { free(offsets); return -1; }
    int rc = 0;
    for (uint64_t i = 0; i < n_tensors && rc == 0; i++)
        rc = parse_tensor_info(g, r, (int)i, offsets);
    if (rc == 0) {
        size_t a = g->alignment;
        g->data_start = r->pos + (a - r->pos % a) % a;
        if (g->data_start < r->pos) rc = eb_fail(r->e, "%s: data offset overflows", g->path);
    }
    if (rc == 0) rc = place_tensors(g, offsets, r->e);
    free(offsets);
    if (rc) return -1;

    const char **names = eb_malloc((size_t)g->n_tensors * sizeof *names, r->e);
    g->tensor_sorted = eb_malloc((size_t)g->n_tensors * sizeof *g->tensor_sorted, r->e);
    if (!names || !g->tensor_sorted) { free(names); return -1; }
    for (int i = 0; i < g->n_tensors; i++) names[i] = g->tensors[i].name;
    const char *dup;
    rc = sort_names(names, g->n_tensors, g->tensor_sorted, &dup, r->e);
    free(names);
    if (rc) return -1;
    if (dup) return eb_fail(r->e, "%s: duplicate tensor name '%s'", r->path, dup);
    return 0;
}

static int parse(struct gguf_file *g, struct eb_err *e)
{
    struct reader r = {g->base, g->size, 0, e, g->path};
    if (g->size == 0) return eb_fail(e, "%s: empty file", g->path);
    if (g->size < 4 || memcmp(g->base, GGUF_MAGIC, 4) != 0)
        return eb_fail(e, "%s: not a GGUF file (bad magic)", g->path);
    r.pos = 4;
    uint32_t version;
    if (read_u32(&r, &version, "version")) return -1;
    if (version == 1)
        return eb_fail(e, "%s: GGUF version 1 is not supported (only versions 2 and 3)", g->path);
    if (version != 2 && version != 3) {
        if ((version & 0xFFFF) == 0 && (version >> 16) != 0)
            return eb_fail(e, "%s: big-endian GGUF files are not supported", g->path);
        return eb_fail(e, "%s: unsupported GGUF version %u (only versions 2 and 3)", g->path, version);
    }
    g->version = version;
    uint64_t n_tensors, n_kv;
    if (read_u64(&r, &n_tensors, "tensor count") || read_u64(&r, &n_kv, "metadata count")) return -1;
    /* A key-value pair takes at least 13 bytes and a tensor entry at least 33,
     * so larger counts cannot be honest; checking first bounds every allocation. */
    size_t left = r.size - r.pos;
    if (n_kv > left / 13)
        return eb_fail(e, "%s: metadata count %llu cannot fit in the %zu bytes left", g->path,
                       (unsigned long long)n_kv, left);
    if (n_tensors > left / 33)
        return eb_fail(e, "%s: tensor count %llu cannot fit in the %zu bytes left", g->path,
                       (unsigned long long)n_tensors, left);
    if (n_kv > INT32_MAX || n_tensors > INT32_MAX)
        return eb_fail(e, "%s: too many metadata keys or tensors", g->path);
    if (parse_kvs(g, &r, n_kv)) return -1;
    if (parse_alignment(g, e)) return -1;
    return parse_tensors(g, &r, n_tensors);
}

/* ---- open / close ---- */

static struct gguf_file *handle_new(const char *name, struct eb_err *e)
{
    struct gguf_file *g = eb_calloc(1, sizeof *g, e);
    if (!g) return NULL;
    size_t n = strlen(name);
    g->path = eb_malloc(n + 1, e);
    if (!g->path) { free(g); return NULL; }
    memcpy(g->path, name, n + 1);
    return g;
}

int gguf_open_memory(const void *data, size_t size, const char *name,
                     struct gguf_file **out, struct eb_err *e)
{
    *out = NULL;
    struct gguf_file *g = handle_new(name ? name : "<memory>", e);
    if (!g) return -1;
    g->base = data;
    g->size = data ? size : 0;
    if (parse(g, e)) { gguf_close(g); return -1; }
    *out = g;
    return 0;
}

int gguf_open(const char *path, struct gguf_file **out, struct eb_err *e)
{
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return eb_fail(e, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return eb_fail(e, "%s: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) { close(fd); return eb_fail(e, "%s: not a regular file", path); }
    if (st.st_size == 0) { close(fd); return eb_fail(e, "%s: empty file", path); }
    if ((uint64_t)st.st_size > SIZE_MAX) { close(fd); return eb_fail(e, "%s: file too large", path); }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) return eb_fail(e, "%s: mmap failed: %s", path, strerror(err));
    struct gguf_file *g = handle_new(path, e);
    if (!g) { munmap(map, (size_t)st.st_size); return -1; }
    g->base = map;
    g->size = (size_t)st.st_size;
    g->mapped = 1;
    if (parse(g, e)) { gguf_close(g); return -1; }
    *out = g;
    return 0;
}

void gguf_close(struct gguf_file *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) free(g->kvs[i].key);
    for (int i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->kvs);
    free(g->kv_sorted);
    free(g->vals);
    free(g->tensors);
    free(g->tensor_sorted);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g->path);
    free(g);
}

/* ---- accessors ---- */

uint32_t gguf_version(const struct gguf_file *g) { return g->version; }
size_t gguf_file_size(const struct gguf_file *g) { return g->size; }
const char *gguf_path(const struct gguf_file *g) { return g->path; }
size_t gguf_alignment(const struct gguf_file *g) { return g->alignment; }
size_t gguf_data_offset(const struct gguf_file *g) { return g->data_start; }

int gguf_find_key(const struct gguf_file *g, const char *key)
{
    if (!key || g->n_kv == 0) return -1;
    return find_sorted(g->kv_sorted, g->n_kv, key, kv_name_of, g);
}

int gguf_key_count(const struct gguf_file *g) { return g->n_kv; }

const char *gguf_key_name(const struct gguf_file *g, int idx)
{
    return idx >= 0 && idx < g->n_kv ? g->kvs[idx].key : NULL;
}

int gguf_key_type(const struct gguf_file *g, int idx)
{
    return idx >= 0 && idx < g->n_kv ? g->vals[g->kvs[idx].val].type : -1;
}

int64_t gguf_key_value(const struct gguf_file *g, int idx)
{
    return idx >= 0 && idx < g->n_kv ? (int64_t)g->kvs[idx].val : -1;
}

static const struct val *val_get(const struct gguf_file *g, int64_t v)
{
    return v >= 0 && (uint64_t)v < g->n_vals ? &g->vals[v] : NULL;
}

int gguf_value_type(const struct gguf_file *g, int64_t v)
{
    const struct val *x = val_get(g, v);
    return x ? x->type : -1;
}

/* A scalar of `type` at p as int64 (integers and bool) or -1. */
static int scalar_int(int type, const uint8_t *p, int64_t *out)
{
    switch (type) {
    case GGUF_UINT8: case GGUF_BOOL: *out = p[0]; return 0;
    case GGUF_INT8: *out = (int8_t)p[0]; return 0;
    case GGUF_UINT16: *out = (uint16_t)(p[0] | p[1] << 8); return 0;
    case GGUF_INT16: *out = (int16_t)(uint16_t)(p[0] | p[1] << 8); return 0;
    case GGUF_UINT32: *out = le32(p); return 0;
    case GGUF_INT32: *out = (int32_t)le32(p); return 0;
    case GGUF_UINT64: {
        uint64_t u = le64(p);
        if (u > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)u;
        return 0;
    }
    case GGUF_INT64: *out = (int64_t)le64(p); return 0;
    default: return -1;
    }
}

static int scalar_float(int type, const uint8_t *p, double *out)
{
    if (type == GGUF_FLOAT32) {
        uint32_t u = le32(p);
        float f;
        memcpy(&f, &u, sizeof f);
        *out = f;
        return 0;
    }
    if (type == GGUF_FLOAT64) {
        uint64_t u = le64(p);
        memcpy(out, &u, sizeof *out);
        return 0;
    }
    if (type == GGUF_BOOL) return -1;
    int64_t i;
    if (scalar_int(type, p, &i)) return -1;
    *out = (double)i;
    return 0;
}

int gguf_value_int(const struct gguf_file *g, int64_t v, int64_t *out)
{
    const struct val *x = val_get(g, v);
    return x ? scalar_int(x->type, g->base + x->off, out) : -1;
}

int gguf_value_float(const struct gguf_file *g, int64_t v, double *out)
{
    const struct val *x = val_get(g, v);
    return x ? scalar_float(x->type, g->base + x->off, out) : -1;
}

int gguf_value_bool(const struct gguf_file *g, int64_t v, int *out)
{
    const struct val *x = val_get(g, v);
    if (!x || x->type != GGUF_BOOL) return -1;
    *out = g->base[x->off];
    return 0;
}

int gguf_value_str(const struct gguf_file *g, int64_t v, const char **s, size_t *len)
{
    const struct val *x = val_get(g, v);
    if (!x || x->type != GGUF_STRING) return -1;
    *s = (const char *)g->base + x->off;
    *len = (size_t)x->count;
    return 0;
}

int gguf_value_arr_info(const struct gguf_file *g, int64_t v, int *elem_type, uint64_t *count)
{
    const struct val *x = val_get(g, v);
    if (!x || x->type != GGUF_ARRAY) return -1;
    if (elem_type) *elem_type = x->elem_type;
    if (count) *count = x->count;
    return 0;
}

int64_t gguf_value_arr_elem(const struct gguf_file *g, int64_t v, uint64_t i)
{
    const struct val *x = val_get(g, v);
    if (!x || x->type != GGUF_ARRAY || i >= x->count) return -1;
    if (x->elem_type != GGUF_STRING && x->elem_type != GGUF_ARRAY) return -1;
    return (int64_t)(x->child + (size_t)i);
}

/* Address of numeric element i of array value x, or NULL. */
static const uint8_t *num_elem(const struct gguf_file *g, const struct val *x, uint64_t i)
{
    if (!x || x->type != GGUF_ARRAY || i >= x->count) return NULL;
    size_t sz = scalar_size(x->elem_type);
    if (!sz) return NULL;
    return g->base + x->off + (size_t)i * sz;
}

int gguf_value_arr_int(const struct gguf_file *g, int64_t v, uint64_t i, int64_t *out)
{
    const struct val *x = val_get(g, v);
    const uint8_t *p = num_elem(g, x, i);
    return p ? scalar_int(x->elem_type, p, out) : -1;
}

int gguf_value_arr_float(const struct gguf_file *g, int64_t v, uint64_t i, double *out)
{
    const struct val *x = val_get(g, v);
    const uint8_t *p = num_elem(g, x, i);
    return p ? scalar_float(x->elem_type, p, out) : -1;
}

const void *gguf_value_arr_data(const struct gguf_file *g, int64_t v)
{
    const struct val *x = val_get(g, v);
    if (!x || x->type != GGUF_ARRAY || !scalar_size(x->elem_type)) return NULL;
    return g->base + x->off;
}

/* Key-based accessors: the value of `key`, then the generic access above. */
static int64_t key_val(const struct gguf_file *g, const char *key)
{
    return gguf_key_value(g, gguf_find_key(g, key));
}

int gguf_get_int(const struct gguf_file *g, const char *key, int64_t *out)
{
    return gguf_value_int(g, key_val(g, key), out);
}

int gguf_get_float(const struct gguf_file *g, const char *key, double *out)
{
    return gguf_value_float(g, key_val(g, key), out);
}

int gguf_get_bool(const struct gguf_file *g, const char *key, int *out)
{
    return gguf_value_bool(g, key_val(g, key), out);
}

int gguf_get_str(const struct gguf_file *g, const char *key, const char **s, size_t *len)
{
    return gguf_value_str(g, key_val(g, key), s, len);
}

int gguf_get_arr_info(const struct gguf_file *g, const char *key, int *elem_type, uint64_t *count)
{
    return gguf_value_arr_info(g, key_val(g, key), elem_type, count);
}

int gguf_get_arr_str(const struct gguf_file *g, const char *key, uint64_t i,
                     const char **s, size_t *len)
{
    return gguf_value_str(g, gguf_value_arr_elem(g, key_val(g, key), i), s, len);
}

int gguf_get_arr_int(const struct gguf_file *g, const char *key, uint64_t i, int64_t *out)
{
    return gguf_value_arr_int(g, key_val(g, key), i, out);
}

int gguf_get_arr_float(const struct gguf_file *g, const char *key, uint64_t i, double *out)
{
    return gguf_value_arr_float(g, key_val(g, key), i, out);
}

const void *gguf_get_arr_data(const struct gguf_file *g, const char *key)
{
    return gguf_value_arr_data(g, key_val(g, key));
}

int gguf_tensor_count(const struct gguf_file *g) { return g->n_tensors; }

const struct tensor_ref *gguf_tensor(const struct gguf_file *g, int idx)
{
    return idx >= 0 && idx < g->n_tensors ? &g->tensors[idx] : NULL;
}

const struct tensor_ref *gguf_find_tensor(const struct gguf_file *g, const char *name)
{
    if (!name || g->n_tensors == 0) return NULL;
    int i = find_sorted(g->tensor_sorted, g->n_tensors, name, tensor_name_of, g);
    return i >= 0 ? &g->tensors[i] : NULL;
}

void gguf_drop_pages(const struct gguf_file *g, const void *p, size_t n)
{
    if (g->mapped) mapped_drop_pages(g->base, g->size, p, n);
}
