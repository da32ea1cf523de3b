/* runkey.c - canonical JSON of a run's parameters, hashed with SHA-256. */
#include "harness/exp/runkey.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sha256.h"

/* A growable string; `failed` latches the first allocation failure. */
struct sbuf {
    char *p;
    size_t n, cap;
    int failed;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->n + n + 1 > cap) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->failed = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void write_string(struct sbuf *b, const char *s)
{
    sb_puts(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];
        switch (*c) {
        case '"':  sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\r': sb_puts(b, "\\r"); break;
        case '\t': sb_puts(b, "\\t"); break;
        case '\b': sb_puts(b, "\\b"); break;
        case '\f': sb_puts(b, "\\f"); break;
        default:
            if (*c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *c);
                sb_puts(b, esc);
            } else {
                sb_put(b, (const char *)c, 1);   /* UTF-8 bytes pass through */
            }
        }
    }
    sb_puts(b, "\"");
}

/* One spelling per value: integers (exactly representable) without a point,
 * everything else with 17 significant digits, which round-trips a double. */
static void write_number(struct sbuf *b, double v)
{
    char num[40];
    if (v == 0)
        snprintf(num, sizeof num, "0");              /* also -0 */
    else if (v == floor(v) && fabs(v) < 9007199254740992.0)
        snprintf(num, sizeof num, "%.0f", v);
    else
        snprintf(num, sizeof num, "%.17g", v);
    sb_puts(b, num);
}

static int key_cmp(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string, y->string);
}

static int write_value(struct sbuf *b, const cJSON *v, struct eb_err *e)
{
    if (cJSON_IsNull(v)) { sb_puts(b, "null"); return 0; }
    if (cJSON_IsTrue(v)) { sb_puts(b, "true"); return 0; }
    if (cJSON_IsFalse(v)) { sb_puts(b, "false"); return 0; }
    if (cJSON_IsNumber(v)) { write_number(b, v->valuedouble); return 0; }
    if (cJSON_IsString(v)) { write_string(b, v->valuestring); return 0; }
    if (cJSON_IsArray(v)) {
        sb_puts(b, "[");
        int first = 1;
        for (const cJSON *c = v->child; c; c = c->next) {
            if (!first) sb_puts(b, ",");
            first = 0;
            if (write_value(b, c, e) != 0) return -1;
        }
        sb_puts(b, "]");
        return 0;
    }
    if (cJSON_IsObject(v)) {
        int n = cJSON_GetArraySize(v);
        const cJSON **kids = malloc((size_t)(n ? n : 1) * sizeof *kids);
        if (!kids) return eb_fail(e, "out of memory");
        int i = 0;
        for (const cJSON *c = v->child; c; c = c->next) kids[i++] = c;
        qsort(kids, (size_t)n, sizeof *kids, key_cmp);
        for (i = 1; i < n; i++) {
            if (strcmp(kids[i - 1]->string, kids[i]->string) == 0) {
                eb_fail(e, "duplicate key \"%s\" in an object", kids[i]->string);
                free(kids);
                return -1;
            }
        }
        sb_puts(b, "{");
        for (i = 0; i < n; i++) {
            if (i) sb_puts(b, ",");
            write_string(b, kids[i]->string);
            sb_puts(b, ":");
            if (write_value(b, kids[i], e) != 0) { free(kids); return -1; }
        }
        sb_puts(b, "}");
        free(kids);
        return 0;
    }
    return eb_fail(e, "unsupported JSON value");
}

static cJSON *parse_json(const char *json, const char *what, struct eb_err *e)
{
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithOpts(json, &end, 1);
    if (!v) {
        long at = end ? (long)(end - json) : 0;
        eb_fail(e, "%s: not valid JSON (near byte %ld)", what, at);
    }
    return v;
}

static int to_canonical(const cJSON *v, char **out, struct eb_err *e)
{
    struct sbuf b = {0};
    if (write_value(&b, v, e) != 0) { free(b.p); return -1; }
    if (b.failed || !b.p) { free(b.p); return eb_fail(e, "out of memory"); }
    *out = b.p;
    return 0;
}

int json_canonical(const char *json, char **out, struct eb_err *e)
{
    *out = NULL;
    if (!json) return eb_fail(e, "json: no text");
    cJSON *v = parse_json(json, "json", e);
    if (!v) return -1;
    int rc = to_canonical(v, out, e);
    cJSON_Delete(v);
    return rc;
}

static int add_string(cJSON *o, const char *key, const char *s)
{
    cJSON *v = s ? cJSON_CreateString(s) : cJSON_CreateNull();
    return v && cJSON_AddItemToObject(o, key, v) ? 0 : -1;
}

static int add_int(cJSON *o, const char *key, int64_t x)
{
    cJSON *v = cJSON_CreateNumber((double)x);
    return v && cJSON_AddItemToObject(o, key, v) ? 0 : -1;
}

static int add_json(cJSON *o, const char *key, const char *json, struct eb_err *e)
{
    cJSON *v = json ? parse_json(json, key, e) : cJSON_CreateNull();
    if (!v) return -1;
    if (!cJSON_AddItemToObject(o, key, v)) { cJSON_Delete(v); return eb_fail(e, "out of memory"); }
    return 0;
}

int runkey_serialize(const struct runkey_params *p, char **out, struct eb_err *e)
{
    *out = NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return eb_fail(e, "out of memory");
    char seed[24];
    /* The seed is a string: a JSON number (a double) cannot hold every uint64. */
    snprintf(seed, sizeof seed, "%" PRIu64, p->seed);
    int rc = 0;
    rc |= add_int(o, "runkey_format", RUNKEY_FORMAT);
    rc |= add_string(o, "model", p->model);
    rc |= add_string(o, "dataset", p->dataset);
    rc |= add_string(o, "data_sha256", p->data_hash);
    rc |= add_int(o, "data_offset", p->data_offset);
    rc |= add_int(o, "data_limit", p->data_limit);
    rc |= add_string(o, "prompt_template", p->prompt_template);
    rc |= add_string(o, "policy", p->policy);
    rc |= add_int(o, "budget", p->budget);
    rc |= add_int(o, "batch_size", p->batch_size);
    rc |= add_string(o, "batching", p->batching);
    rc |= add_string(o, "seed", seed);
    rc |= add_int(o, "max_new_tokens", p->max_new_tokens);
    rc |= add_string(o, "code_version", p->code_version);
    if (rc) { cJSON_Delete(o); return eb_fail(e, "out of memory"); }
    if (add_json(o, "params", p->params_json, e) != 0 ||
        add_json(o, "sampling", p->sampling_json, e) != 0 ||
        add_json(o, "extra", p->extra_json, e) != 0) {
        cJSON_Delete(o);
        return eb_wrap(e, "run key");
    }
    rc = to_canonical(o, out, e);
    cJSON_Delete(o);
    return rc ? eb_wrap(e, "run key") : 0;
}

int runkey_compute(const struct runkey_params *p, char out[RUNKEY_HEX_LEN + 1], struct eb_err *e)
{
    char *text;
    out[0] = '\0';
    if (runkey_serialize(p, &text, e) != 0) return -1;
    sha256_hex(text, strlen(text), out);
    free(text);
    return 0;
}
