/* safetensors.c - validate a safetensors header and expose its tensors. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hfconfig.h"
#include "util/mapped.h"

struct safetensors {
    char *name;                 /* path, or the name given to open_memory */
    const unsigned char *base;  /* whole file */
    size_t size;
    void *map;                  /* non-NULL when we own an mmap */
    struct tensor_ref *tensors;
    int n_tensors;
    char **meta;                /* key, value, key, value, ... */
    int n_meta;
};

/* Largest tensor size in bytes (with every zero dimension taken as 1). */
#define SHAPE_MAX_BYTES ((uint64_t)1 << 62)

/* Largest integer a JSON number (a double) holds exactly. */
#define JSON_MAX_EXACT 9007199254740992.0

int safetensors_dtype_type(const char *dtype)
{
    if (strcmp(dtype, "F32") == 0) return EB_TYPE_F32;
    if (strcmp(dtype, "F16") == 0) return EB_TYPE_F16;
    if (strcmp(dtype, "BF16") == 0) return EB_TYPE_BF16;
    return -1;
}

static size_t dtype_size(int type)
{
    return type == EB_TYPE_F32 ? 4 : 2;
}

/* A non-negative integral JSON number that a double represents exactly. */
static int json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= JSON_MAX_EXACT)) return -1;
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return -1;
    *out = u;
    return 0;
}

/* A C0 control byte, DEL, or the lead byte of a UTF-8 C1 control (U+0080..U+009F). */
static int control_at(const unsigned char *s)
{
    return s[0] < 0x20 || s[0] == 0x7f || (s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f);
}

/* A tensor name is printable: a control character (newline, escape, ...)
 * would corrupt every message and table that shows it. */
static int check_tensor_name(const char *name, struct eb_err *e)
{
    for (size_t k = 0; name[k]; k++) {
        unsigned char c = (unsigned char)name[k];
        if (!control_at((const unsigned char *)name + k)) continue;
        char shown[64];
        size_t n = 0;
        for (; name[n] && n < sizeof shown - 1; n++)
            shown[n] = (unsigned char)name[n] < 0x20 || name[n] == 0x7f || name[n] & 0x80 ? '?'
                                                                                      : name[n];
        shown[n] = '\0';
        return eb_fail(e, "tensor name '%s%s' holds control character 0x%02x at byte %zu", shown,
                       name[n] ? "..." : "", c, k);
    }
    return 0;
}

/* Parse one tensor entry into t (name already set). */
static int parse_tensor(const cJSON *entry, const char *name, size_t data_size,
                        const unsigned char *data, struct tensor_ref *t, uint64_t *begin_out,
                        struct eb_err *e)
{
    if (!cJSON_IsObject(entry))
        return eb_fail(e, "tensor '%s': entry is not a JSON object", name);

    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    if (!cJSON_IsString(dtype))
        return eb_fail(e, "tensor '%s': missing dtype", name);
    int type = safetensors_dtype_type(dtype->valuestring);
    if (type < 0)
        return eb_fail(e, "tensor '%s' has dtype %.40s; only F32, F16 and BF16 are supported",
                       name, dtype->valuestring);

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    if (!cJSON_IsArray(shape))
        return eb_fail(e, "tensor '%s': missing shape", name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > 4)
        return eb_fail(e, "tensor '%s' has %d dimensions; at most 4 are supported", name, ndim);
    uint64_t dims[4] = {1, 1, 1, 1};
    uint64_t nelem = 1, span = 1;
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        if (json_uint(d, &dims[i]) != 0)
            return eb_fail(e, "tensor '%s': shape entry %d is not a non-negative integer", name, i);
        /* The byte size must stay well below overflow, and so must every
         * product of dimensions a reader forms from ne[] (span: the product
         * of the non-zero ones; a zero dimension does not excuse the others).
         * Real sizes are checked against the data section just below. */
        if (dims[i] > 1 && span > SHAPE_MAX_BYTES / dtype_size(type) / dims[i])
            return eb_fail(e, "tensor '%s': shape is absurdly large (its size overflows 2^62 "
                              "bytes)", name);
        if (dims[i] > 1) span *= dims[i];
        nelem *= dims[i];
        i++;
    }

    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    uint64_t begin, end;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        json_uint(cJSON_GetArrayItem(offs, 0), &begin) != 0 ||
        json_uint(cJSON_GetArrayItem(offs, 1), &end) != 0)
        return eb_fail(e, "tensor '%s': data_offsets must be two non-negative integers", name);
    if (begin > end)
        return eb_fail(e, "tensor '%s': data_offsets [%llu, %llu] are reversed", name,
                       (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return eb_fail(e, "tensor '%s': data_offsets end %llu is past the end of the data (%zu bytes)",
                       name, (unsigned long long)end, data_size);
    uint64_t need = nelem * dtype_size(type);
    if (end - begin != need)
        return eb_fail(e, "tensor '%s': data_offsets give %llu bytes but its shape and dtype need %llu",
                       name, (unsigned long long)(end - begin), (unsigned long long)need);

    t->type = type;
    t->n_dims = ndim > 0 ? ndim : 1;
    for (int k = 0; k < 4; k++) t->ne[k] = 1;
    for (int k = 0; k < ndim; k++) t->ne[k] = (int64_t)dims[ndim - 1 - k]; /* ggml order */
    t->data = data + begin;
    t->nbytes = (size_t)need;
    *begin_out = begin;
    return 0;
}

static int parse_metadata(struct safetensors *st, const cJSON *meta, struct eb_err *e)
{
    if (!cJSON_IsObject(meta))
        return eb_fail(e, "__metadata__ is not a JSON object");
    int n = cJSON_GetArraySize(meta);
    st->meta = eb_calloc((size_t)n * 2, sizeof *st->meta, e);
    if (!st->meta) return -1;
    const cJSON *kv;
    cJSON_ArrayForEach(kv, meta) {
        if (!cJSON_IsString(kv))
            return eb_fail(e, "__metadata__ value of '%s' is not a string", kv->string);
        st->meta[2 * st->n_meta] = strdup(kv->string);
        st->meta[2 * st->n_meta + 1] = strdup(kv->valuestring);
        st->n_meta++;
        if (!st->meta[2 * st->n_meta - 2] || !st->meta[2 * st->n_meta - 1])
            return eb_fail(e, "out of memory");
    }
    return 0;
}

struct span { uint64_t begin, end; int idx; };

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    const struct tensor_ref *x = a, *y = b;
    return strcmp(x->name, y->name);
}

/* Duplicates and overlaps, on copies so the file order is kept for callers. */
static int check_layout(const struct safetensors *st, const uint64_t *begins, struct eb_err *e)
{
    int n = st->n_tensors;
    if (n < 2) return 0;
    struct tensor_ref *by_name = eb_malloc((size_t)n * sizeof *by_name, e);
    struct span *spans = eb_malloc((size_t)n * sizeof *spans, e);
    int rc = -1;
    if (!by_name || !spans) goto done;

    /* cJSON keeps duplicate keys; the format forbids them. */
    memcpy(by_name, st->tensors, (size_t)n * sizeof *by_name);
    qsort(by_name, (size_t)n, sizeof *by_name, cmp_tensor_name);
    for (int i = 1; i < n; i++)
        if (strcmp(by_name[i - 1].name, by_name[i].name) == 0) {
            eb_fail(e, "tensor '%s' appears twice in the header", by_name[i].name);
            goto done;
        }

    int m = 0;
    for (int i = 0; i < n; i++) {
        if (st->tensors[i].nbytes == 0) continue; /* empty tensors occupy nothing */
        spans[m].begin = begins[i];
        spans[m].end = begins[i] + st->tensors[i].nbytes;
        spans[m].idx = i;
        m++;
    }
    qsort(spans, (size_t)m, sizeof *spans, cmp_span);
    for (int i = 1; i < m; i++)
        if (spans[i].begin < spans[i - 1].end) {
            eb_fail(e, "tensors '%s' and '%s' overlap in the data section",
                    st->tensors[spans[i - 1].idx].name, st->tensors[spans[i].idx].name);
            goto done;
        }
    rc = 0;
done:
    free(by_name);
    free(spans);
    return rc;
}

static int parse_header(struct safetensors *st, struct eb_err *e)
{
    if (st->size < 8)
        return eb_fail(e, "file is %zu bytes, too small for a safetensors header", st->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | st->base[i];
    if (n < 2)
        return eb_fail(e, "header length %llu is too small", (unsigned long long)n);
    if (n > SAFETENSORS_MAX_HEADER)
        return eb_fail(e, "header length %llu exceeds the 100 MB cap", (unsigned long long)n);
    if (n > st->size - 8)
        return eb_fail(e, "header length %llu runs past the end of the file (%zu bytes)",
                       (unsigned long long)n, st->size);
    const unsigned char *data = st->base + 8 + n;
    size_t data_size = st->size - 8 - (size_t)n;

    /* Parse a NUL-terminated copy: cJSON then never reads past our buffer, and
     * an embedded NUL shows up as unparsed trailing bytes. */
    char *text = eb_malloc((size_t)n + 1, e);
    if (!text) return -1;
    memcpy(text, st->base + 8, (size_t)n);
    text[n] = '\0';

    int rc = -1;
    uint64_t *begins = NULL;
    cJSON *root = NULL;
    if (text[0] != '{') {
        eb_fail(e, "header does not start with '{'");
        goto done;
    }
    const char *end = NULL;
    root = cJSON_ParseWithOpts(text, &end, 0);
    if (!root) {
        size_t at = end && end >= text && end <= text + n ? (size_t)(end - text) : 0;
        eb_fail(e, "header is not valid JSON (near byte %zu of %llu)", at, (unsigned long long)n);
        goto done;
    }
    for (const char *p = end; p < text + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            eb_fail(e, "unexpected bytes after the header JSON (at byte %zu)", (size_t)(p - text));
            goto done;
        }
    if (!cJSON_IsObject(root)) {
        eb_fail(e, "header is not a JSON object");
        goto done;
    }

    int count = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
        if (strcmp(item->string, "__metadata__") != 0) count++;
    st->tensors = eb_calloc((size_t)count, sizeof *st->tensors, e);
    begins = eb_calloc((size_t)count, sizeof *begins, e);
    if (!st->tensors || !begins) goto done;

    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (st->meta) {
                eb_fail(e, "__metadata__ appears twice in the header");
                goto done;
            }
            if (parse_metadata(st, item, e) != 0) goto done;
            continue;
        }
        struct tensor_ref *t = &st->tensors[st->n_tensors];
        if (check_tensor_name(item->string, e) != 0) goto done;
        if (parse_tensor(item, item->string, data_size, data, t, &begins[st->n_tensors], e) != 0)
            goto done;
        t->name = strdup(item->string);
        if (!t->name) {
            eb_fail(e, "out of memory");
            goto done;
        }
        st->n_tensors++;
    }
    rc = check_layout(st, begins, e);
done:
    free(begins);
    cJSON_Delete(root);
    free(text);
    return rc;
}

static struct safetensors *st_new(const char *name, struct eb_err *e)
{
    struct safetensors *st = eb_calloc(1, sizeof *st, e);
    if (!st) return NULL;
    st->name = strdup(name);
    if (!st->name) {
        free(st);
        eb_fail(e, "out of memory");
        return NULL;
    }
    return st;
}

int safetensors_open_memory(const void *data, size_t size, const char *name,
                            struct safetensors **out, struct eb_err *e)
{
    *out = NULL;
    if (!name) name = "(memory)";
    struct safetensors *st = st_new(name, e);
    if (!st) return eb_wrap(e, name);
    st->base = data;
    st->size = size;
    if (parse_header(st, e) != 0) {
        safetensors_close(st);
        return eb_wrap(e, name);
    }
    *out = st;
    return 0;
}

int safetensors_open(const char *path, struct safetensors **out, struct eb_err *e)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return eb_fail(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return eb_fail(e, "%s: not a regular file", path);
    }
    struct safetensors *st = st_new(path, e);
    if (!st) {
        close(fd);
        return eb_wrap(e, path);
    }
    st->size = (size_t)sb.st_size;
    if (st->size >= 8) {
        void *m = mmap(NULL, st->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int err = errno;
            close(fd);
            safetensors_close(st);
            return eb_fail(e, "%s: cannot map: %s", path, strerror(err));
        }
        st->map = m;
        st->base = m;
    } else {
        st->base = (const unsigned char *)""; /* parse_header rejects it by size */
    }
    close(fd);
    if (parse_header(st, e) != 0) {
        safetensors_close(st);
        return eb_wrap(e, path);
    }
    *out = st;
    return 0;
}

void safetensors_close(struct safetensors *st)
{
    if (!st) return;
    for (int i = 0; i < st->n_tensors; i++) free((char *)st->tensors[i].name);
    free(st->tensors);
    for (int i = 0; i < 2 * st->n_meta; i++) free(st->meta[i]);
    free(st->meta);
    if (st->map) munmap(st->map, st->size);
    free(st->name);
    free(st);
}

size_t safetensors_file_size(const struct safetensors *st) { return st->size; }
int safetensors_tensor_count(const struct safetensors *st) { return st->n_tensors; }

const struct tensor_ref *safetensors_tensor(const struct safetensors *st, int idx)
{
    return idx >= 0 && idx < st->n_tensors ? &st->tensors[idx] : NULL;
}

const struct tensor_ref *safetensors_find(const struct safetensors *st, const char *name)
{
    for (int i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *safetensors_metadata(const struct safetensors *st, const char *key)
{
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
    return NULL;
}

/* ---- checkpoints ---- */

struct st_checkpoint {
    struct safetensors **shards;
    int n_shards;
    const struct tensor_ref **by_name; /* every tensor, sorted by name */
    const struct tensor_ref **in_order;
    int n_tensors;
    size_t bytes;
};

static int cmp_ref_name(const void *a, const void *b)
{
    const struct tensor_ref *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int path_join(char *out, size_t cap, const char *dir, const char *file, struct eb_err *e)
{
    int n = snprintf(out, cap, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= cap) return eb_fail(e, "%s: path too long", dir);
    return 0;
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int add_shard(struct st_checkpoint *ck, const char *path, struct eb_err *e)
{
    struct safetensors **s = realloc(ck->shards, (size_t)(ck->n_shards + 1) * sizeof *s);
    if (!s) return eb_fail(e, "out of memory");
    ck->shards = s;
    if (safetensors_open(path, &s[ck->n_shards], e) != 0) return -1;
    ck->n_shards++;
    return 0;
}

/* A shard name from the index must stay inside the checkpoint directory. */
static int plain_file_name(const char *s)
{
    return s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int open_sharded(struct st_checkpoint *ck, const char *dir, const char *index_path,
                        struct eb_err *e)
{
    cJSON *root = hf_json_load(index_path, e);
    if (!root) return -1;
    int rc = -1;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map)) {
        eb_fail(e, "%s: missing weight_map", index_path);
        goto done;
    }
    const cJSON *kv;
    char path[4096];
    /* Open each distinct shard once, in first-mention order. */
    cJSON_ArrayForEach(kv, map) {
        if (!cJSON_IsString(kv) || !plain_file_name(kv->valuestring)) {
            eb_fail(e, "%s: weight_map entry '%s' is not a plain shard file name", index_path,
                    kv->string);
            goto done;
        }
        int seen = 0;
        for (const cJSON *p = map->child; p != kv && !seen; p = p->next)
            seen = strcmp(p->valuestring, kv->valuestring) == 0;
        if (seen) continue;
        if (path_join(path, sizeof path, dir, kv->valuestring, e) != 0) goto done;
        if (add_shard(ck, path, e) != 0) goto done;
    }
    if (ck->n_shards == 0) {
        eb_fail(e, "%s: weight_map is empty", index_path);
        goto done;
    }
    /* Every mapped tensor must be where the index says. */
    cJSON_ArrayForEach(kv, map) {
        if (path_join(path, sizeof path, dir, kv->valuestring, e) != 0) goto done;
        int found = 0;
        for (int i = 0; i < ck->n_shards && !found; i++) {
            const struct safetensors *s = ck->shards[i];
            if (strcmp(s->name, path) == 0) found = safetensors_find(s, kv->string) != NULL;
        }
        if (!found) {
            eb_fail(e, "%s: tensor '%s' is not in its shard %s", index_path, kv->string,
                    kv->valuestring);
            goto done;
        }
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

static int build_index(struct st_checkpoint *ck, struct eb_err *e)
{
    int n = 0;
    for (int i = 0; i < ck->n_shards; i++) {
        n += ck->shards[i]->n_tensors;
        ck->bytes += ck->shards[i]->size;
    }
    ck->by_name = eb_calloc((size_t)n, sizeof *ck->by_name, e);
    ck->in_order = eb_calloc((size_t)n, sizeof *ck->in_order, e);
    if (!ck->by_name || !ck->in_order) return -1;
    for (int i = 0; i < ck->n_shards; i++)
        for (int j = 0; j < ck->shards[i]->n_tensors; j++)
            ck->in_order[ck->n_tensors++] = &ck->shards[i]->tensors[j];
    memcpy(ck->by_name, ck->in_order, (size_t)n * sizeof *ck->by_name);
    qsort(ck->by_name, (size_t)n, sizeof *ck->by_name, cmp_ref_name);
    for (int i = 1; i < n; i++)
        if (strcmp(ck->by_name[i - 1]->name, ck->by_name[i]->name) == 0)
            return eb_fail(e, "tensor '%s' appears in more than one shard", ck->by_name[i]->name);
    return 0;
}

int st_checkpoint_open(const char *dir, struct st_checkpoint **out, struct eb_err *e)
{
    *out = NULL;
    struct st_checkpoint *ck = eb_calloc(1, sizeof *ck, e);
    if (!ck) return -1;
    char index_path[4096], single_path[4096];
    int rc = -1;
    if (path_join(index_path, sizeof index_path, dir, "model.safetensors.index.json", e) != 0 ||
        path_join(single_path, sizeof single_path, dir, "model.safetensors", e) != 0)
        goto done;
    if (file_exists(index_path))
        rc = open_sharded(ck, dir, index_path, e);
    else if (file_exists(single_path))
        rc = add_shard(ck, single_path, e);
    else
        eb_fail(e, "%s: no model.safetensors or model.safetensors.index.json", dir);
    if (rc == 0) {
        rc = build_index(ck, e);
        if (rc != 0) eb_wrap(e, dir);
    }
done:
    if (rc != 0) {
        st_checkpoint_close(ck);
        return -1;
    }
    *out = ck;
    return 0;
}

void st_checkpoint_close(struct st_checkpoint *ck)
{
    if (!ck) return;
    for (int i = 0; i < ck->n_shards; i++) safetensors_close(ck->shards[i]);
    free(ck->shards);
    free(ck->by_name);
    free(ck->in_order);
    free(ck);
}

int st_checkpoint_tensor_count(const struct st_checkpoint *ck) { return ck->n_tensors; }
int st_checkpoint_shard_count(const struct st_checkpoint *ck) { return ck->n_shards; }
size_t st_checkpoint_bytes(const struct st_checkpoint *ck) { return ck->bytes; }

const struct tensor_ref *st_checkpoint_tensor(const struct st_checkpoint *ck, int idx)
{
    return idx >= 0 && idx < ck->n_tensors ? ck->in_order[idx] : NULL;
}

const struct tensor_ref *st_checkpoint_find(const struct st_checkpoint *ck, const char *name)
{
    struct tensor_ref key = {0};
    key.name = name;
    const struct tensor_ref *kp = &key;
    const struct tensor_ref **hit =
        bsearch(&kp, ck->by_name, (size_t)ck->n_tensors, sizeof *ck->by_name, cmp_ref_name);
    return hit ? *hit : NULL;
}

void st_checkpoint_drop_pages(const struct st_checkpoint *ck, const void *p, size_t n)
{
    for (int i = 0; i < ck->n_shards; i++)
        if (ck->shards[i]->map) mapped_drop_pages(ck->shards[i]->base, ck->shards[i]->size, p, n);
}
