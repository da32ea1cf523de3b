/* jsonl.c - load a dataset from a JSON Lines file.
 *
 * The whole file is read and checked before anything is returned: one JSON
 * object per line (blank lines are skipped), valid UTF-8, the id / problem /
 * answer keys of the registry entry present and non-empty, ids unique.  Any
 * problem fails the load with "<file>:<line>: <what>", so a run never starts
 * on half a dataset.  Offset and limit then select a slice. */
#include "dataset.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s, struct eb_err *e)
{
    size_t n = strlen(s) + 1;
    char *p = eb_malloc(n, e);
    if (p) memcpy(p, s, n);
    return p;
}

/* Returns the byte offset of the first invalid UTF-8 sequence, or -1. */
static long utf8_invalid_at(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned min;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; }
        else return (long)i;
        if (i + len > n) return (long)i;
        unsigned cp = c & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return (long)i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (long)i;
        i += len;
    }
    return -1;
}

static int key_listed(const char *const *keys, const char *k)
{
    for (int i = 0; i < DATASET_MAX_KEYS && keys[i]; i++)
        if (strcmp(keys[i], k) == 0) return 1;
    return 0;
}

/* The first of `keys` present in obj, as text: strings as they are, numbers
 * in their shortest form, arrays/objects as compact JSON (test cases).
 * Sets *found_key; returns NULL with *what set when absent or unusable. */
static char *field_text(const cJSON *obj, const char *const *keys, const char **found_key,
                        const char **what, struct eb_err *e)
{
    *found_key = NULL;
    for (int i = 0; i < DATASET_MAX_KEYS && keys[i]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, keys[i]);
        if (!v) continue;
        *found_key = keys[i];
        if (cJSON_IsString(v)) {
            if (!v->valuestring[0]) { *what = "is empty"; return NULL; }
            return dup_str(v->valuestring, e);
        }
        if (cJSON_IsNumber(v) || cJSON_IsArray(v) || cJSON_IsObject(v)) {
            char *s = cJSON_PrintUnformatted(v);
            if (!s) { eb_fail(e, "out of memory printing JSON"); *what = NULL; return NULL; }
            char *p = dup_str(s, e);
            cJSON_free(s);
            if (!p) *what = NULL;
            return p;
        }
        *what = "is not a string";
        return NULL;
    }
    *what = "is missing";
    return NULL;
}

/* Everything but the mapped keys, as one compact JSON object. */
static char *extra_fields(const cJSON *obj, const struct dataset_spec *spec, struct eb_err *e)
{
    cJSON *extra = cJSON_CreateObject();
    if (!extra) { eb_fail(e, "out of memory"); return NULL; }
    for (const cJSON *f = obj->child; f; f = f->next) {
        if (key_listed(spec->problem_keys, f->string) || key_listed(spec->answer_keys, f->string) ||
            key_listed(spec->id_keys, f->string))
            continue;
        cJSON *copy = cJSON_Duplicate(f, 1);
        if (!copy) { cJSON_Delete(extra); eb_fail(e, "out of memory"); return NULL; }
        cJSON_AddItemToObject(extra, f->string, copy);
    }
    char *s = cJSON_PrintUnformatted(extra);
    cJSON_Delete(extra);
    if (!s) { eb_fail(e, "out of memory"); return NULL; }
    char *p = dup_str(s, e);
    cJSON_free(s);
    return p;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

/* Parse one line into *it.  On failure fills e with "<what>" (no location). */
static int parse_line(const struct dataset_spec *spec, const char *line, size_t len,
                      struct dataset_item *it, struct eb_err *e)
{
    if (strlen(line) != len) return eb_fail(e, "line contains a NUL byte");
    long bad = utf8_invalid_at((const unsigned char *)line, len);
    if (bad >= 0) return eb_fail(e, "invalid UTF-8 at byte %ld", bad + 1);

    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!obj) {
        long at = end ? (long)(end - line) + 1 : (long)len;
        return eb_fail(e, "invalid JSON near byte %ld", at);
    }
    size_t rest = (size_t)(end - line);
    while (rest < len && is_blank(line + rest, 1)) rest++;
    if (rest < len) {
        cJSON_Delete(obj);
        return eb_fail(e, "text after the JSON object at byte %zu", rest + 1);
    }
    if (!cJSON_IsObject(obj)) {
        cJSON_Delete(obj);
        return eb_fail(e, "expected a JSON object");
    }
    /* a mapped key given twice would be ambiguous (other keys go to extra) */
    for (const cJSON *a = obj->child; a; a = a->next) {
        if (!a->string || !(key_listed(spec->id_keys, a->string) ||
                            key_listed(spec->problem_keys, a->string) ||
                            key_listed(spec->answer_keys, a->string)))
            continue;
        for (const cJSON *b = a->next; b; b = b->next)
            if (b->string && strcmp(a->string, b->string) == 0) {
                eb_fail(e, "key \"%s\" appears twice", a->string);
                cJSON_Delete(obj);
                return -1;
            }
    }

    struct { const char *const *keys; char **dst; const char *role; } want[3] = {
        {spec->id_keys, &it->id, "id"},
        {spec->problem_keys, &it->problem, "problem"},
        {spec->answer_keys, &it->answer, "answer"},
    };
    for (int k = 0; k < 3; k++) {
        const char *found = NULL, *what = NULL;
        *want[k].dst = field_text(obj, want[k].keys, &found, &what, e);
        if (*want[k].dst) continue;
        if (what) {
            if (found)
                eb_fail(e, "%s field \"%s\" %s", want[k].role, found, what);
            else
                eb_fail(e, "%s field \"%s\" is missing", want[k].role, want[k].keys[0]);
        }
        dataset_item_free(it);
        cJSON_Delete(obj);
        return -1;
    }
    it->extra_json = extra_fields(obj, spec, e);
    cJSON_Delete(obj);
    if (!it->extra_json) { dataset_item_free(it); return -1; }
    return 0;
}

struct id_line { const char *id; int line; };

static int cmp_id_line(const void *a, const void *b)
{
    const struct id_line *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Finds a duplicate id; fills e with the later line. */
static int check_unique_ids(const char *path, const struct dataset *d, const int *lines,
                            struct eb_err *e)
{
    if (d->n < 2) return 0;
    struct id_line *v = eb_calloc((size_t)d->n, sizeof *v, e);
    if (!v) return -1;
    for (int i = 0; i < d->n; i++) { v[i].id = d->items[i].id; v[i].line = lines[i]; }
    qsort(v, (size_t)d->n, sizeof *v, cmp_id_line);
    /* report the duplicate that occurs first in the file */
    int best = -1;
    for (int i = 1; i < d->n; i++)
        if (strcmp(v[i].id, v[i - 1].id) == 0 && (best < 0 || v[i].line < v[best].line))
            best = i;
    int rc = 0;
    if (best >= 0) {
        int first = best - 1;
        while (first > 0 && strcmp(v[first - 1].id, v[best].id) == 0) first--;
        rc = eb_fail(e, "%s:%d: duplicate id \"%.100s\" (first on line %d)", path, v[best].line,
                     v[best].id, v[first].line);
    }
    free(v);
    return rc;
}

int dataset_load_file(const struct dataset_spec *spec, const char *path, int offset,
                      int limit, struct dataset *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    if (offset < 0) return eb_fail(e, "%s: offset %d is negative", path, offset);
    FILE *f = fopen(path, "rb");
    if (!f) return eb_fail(e, "%s: cannot open: %s", path, strerror(errno));

    struct dataset d = {.spec = spec};
    int cap = 0, lineno = 0, rc = 0;
    int *lines = NULL;
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t len;
    errno = 0;
    while ((len = getline(&buf, &bufcap, f)) != -1) {
        lineno++;
        if (is_blank(buf, (size_t)len)) continue;
        if (d.n == cap) {
            int ncap = cap ? cap * 2 : 64;
            struct dataset_item *ni = realloc(d.items, (size_t)ncap * sizeof *ni);
            int *nl = ni ? realloc(lines, (size_t)ncap * sizeof *nl) : NULL;
            if (ni) d.items = ni;
            if (nl) lines = nl;
            if (!ni || !nl) { rc = eb_fail(e, "%s: out of memory", path); break; }
            cap = ncap;
        }
        size_t n = (size_t)len;
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
        buf[n] = '\0';
        struct dataset_item it = {0};
        struct eb_err le;
        if (parse_line(spec, buf, n, &it, &le)) {
            rc = eb_fail(e, "%s:%d: %s", path, lineno, le.msg);
            break;
        }
        lines[d.n] = lineno;
        d.items[d.n++] = it;
    }
    if (!rc && ferror(f)) rc = eb_fail(e, "%s: read error: %s", path, strerror(errno));
    free(buf);
    fclose(f);
    if (!rc && d.n == 0) rc = eb_fail(e, "%s: no rows", path);
    if (!rc) rc = check_unique_ids(path, &d, lines, e);
    free(lines);
    if (!rc && offset >= d.n)
        rc = eb_fail(e, "%s: offset %d is past the last of its %d rows", path, offset, d.n);
    if (rc) { dataset_free(&d); return -1; }

    /* keep [offset, offset + limit) */
    int keep = d.n - offset;
    if (limit > 0 && limit < keep) keep = limit;
    for (int i = 0; i < offset; i++) dataset_item_free(&d.items[i]);
    for (int i = offset + keep; i < d.n; i++) dataset_item_free(&d.items[i]);
    memmove(d.items, d.items + offset, (size_t)keep * sizeof *d.items);
    d.n = keep;
    *out = d;
    return 0;
}
