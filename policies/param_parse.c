/* param_parse.c - the one parser of policy parameter values (see
 * param_parse.h) and the typed lookups policies read them with (registry.h). */
#include "param_parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

int policy_param_index(const struct policy_params *p, const char *key)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->def[i]->key, key)) return i;
    return -1;
}

/* A key the policy's row does not declare is a bug in the policy's code (a
 * misspelling, or a parameter moved to another row): stop at once instead of
 * reading a default that looks like a value.  Every registered policy is
 * created by make test (test_memplan), so a wrong key fails the suite. */
static int param_index_or_die(const struct policy_params *p, const char *key)
{
    int i = policy_param_index(p, key);
    if (i < 0) {
        char keys[512];
        param_list_keys(p, keys, sizeof keys);
        fprintf(stderr, "evictbench: internal error: a policy reads parameter '%s', which its "
                        "registry row does not declare (it has: %s)\n", key, keys);
        abort();
    }
    return i;
}

double policy_param(const struct policy_params *p, const char *key)
{
    return p->val[param_index_or_die(p, key)];
}

int policy_param_int(const struct policy_params *p, const char *key)
{
    return (int)p->val[param_index_or_die(p, key)];
}

static int choice_index(const char *choices, const char *v, size_t vlen)
{
    int idx = 0;
    for (const char *c = choices; *c; idx++) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == vlen && !strncmp(c, v, n)) return idx;
        if (!bar) break;
        c = bar + 1;
    }
    return -1;
}

const char *policy_choice_name(const char *choices, int idx, char *buf, size_t size)
{
    const char *c = choices;
    for (int i = 0; i < idx && c; i++) {
        c = strchr(c, '|');
        if (c) c++;
    }
    if (!c) return "?";
    const char *bar = strchr(c, '|');
    size_t n = bar ? (size_t)(bar - c) : strlen(c);
    if (n >= size) n = size - 1;
    memcpy(buf, c, n);
    buf[n] = '\0';
    return buf;
}

/* val[i] into the typed struct at its def's offset. */
static void put_typed(struct policy_params *p, int i)
{
    const struct param_def *d = p->def[i];
    if (d->type == PARAM_FLOAT) {
        double x = p->val[i];
        memcpy(p->typed + d->offset, &x, sizeof x);
    } else {
        int x = (int)p->val[i];
        memcpy(p->typed + d->offset, &x, sizeof x);
    }
}

int param_init(const char *policy, const struct param_def *own, const struct param_def *shared,
               struct policy_params *p, struct eb_err *e)
{
    memset(p, 0, sizeof *p);
    const struct param_def *tables[2] = {own, shared};
    for (int t = 0; t < 2; t++)
        for (const struct param_def *d = tables[t]; d && d->key; d++) {
            if (p->n == POLICY_MAX_PARAMS)
                return eb_fail(e, "policy %s: more than %d parameters", policy, POLICY_MAX_PARAMS);
            size_t width = d->type == PARAM_FLOAT ? sizeof(double) : sizeof(int);
            if (d->offset + width > sizeof p->typed)
                return eb_fail(e, "policy %s: parameter %s lies past the %d bytes of a "
                                  "parameter struct", policy, d->key, POLICY_TYPED_BYTES);
            p->def[p->n] = d;
            p->val[p->n] = d->def;
            put_typed(p, p->n++);
        }
    return 0;
}

void param_list_keys(const struct policy_params *p, char *buf, size_t size)
{
    size_t off = 0;
    snprintf(buf, size, "none");
    for (int i = 0; i < p->n && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : "", p->def[i]->key);
}

static int range_error(const char *policy, const struct param_def *d, const char *v,
                       struct eb_err *e)
{
    switch (d->type) {
    case PARAM_INT:
        return eb_fail(e, "policy %s: %s=%s: expected an integer in [%.0f, %.0f]", policy, d->key,
                       v, d->lo, d->hi);
    case PARAM_FLOAT:
        return eb_fail(e, "policy %s: %s=%s: expected a number in [%g, %g]", policy, d->key, v,
                       d->lo, d->hi);
    case PARAM_BOOL:
        return eb_fail(e, "policy %s: %s=%s: expected 0, 1, true or false", policy, d->key, v);
    case PARAM_CHOICE:
        return eb_fail(e, "policy %s: %s=%s: expected one of %s", policy, d->key, v, d->choices);
    }
    return -1;
}

/* Text v (NUL-terminated) as parameter d's type into *x: 0, or -1 when it
 * is not one (the caller reports it). */
static int read_text(const struct param_def *d, const char *v, double *x)
{
    char *end;
    errno = 0;
    switch (d->type) {
    case PARAM_INT:
        *x = (double)strtol(v, &end, 10);
        return errno || *end ? -1 : 0;
    case PARAM_FLOAT:
        *x = strtod(v, &end);
        return errno || *end || !isfinite(*x) ? -1 : 0;
    case PARAM_BOOL:
        *x = !strcmp(v, "1") || !strcmp(v, "true") ? 1 : 0;
        return *x == 1 || !strcmp(v, "0") || !strcmp(v, "false") ? 0 : -1;
    case PARAM_CHOICE:
        *x = choice_index(d->choices, v, strlen(v));
        return *x < 0 ? -1 : 0;
    }
    return -1;
}

/* A number as parameter d's type: an integer for INT, 0 or 1 for BOOL; a
 * choice is named, never numbered. */
static int read_number(const struct param_def *d, double v, double *x)
{
    *x = v;
    if (d->type == PARAM_CHOICE || !isfinite(v)) return -1;
    if (d->type == PARAM_INT) {
        if (v != floor(v) || fabs(v) > 1e15) return -1;
        *x = (double)(long long)v;  /* -0 reads as 0, as strtol's would */
    }
    return d->type == PARAM_BOOL && v != 0 && v != 1 ? -1 : 0;
}

/* Index of key in p for a value from `from`, or -1 with e set. */
static int find_key(const char *policy, const struct policy_params *p, enum param_from from,
                    const char *key, size_t klen, struct eb_err *e)
{
    char k[64], keys[256];
    if (klen == 0) return eb_fail(e, "policy %s: empty parameter name", policy);
    if (klen >= sizeof k) klen = sizeof k - 1;
    memcpy(k, key, klen);
    k[klen] = '\0';
    int i = policy_param_index(p, k);
    if (i < 0) {
        param_list_keys(p, keys, sizeof keys);
        return eb_fail(e, "policy %s: unknown parameter '%s' (valid: %s)", policy, k, keys);
    }
    if (from == PARAM_FROM_USER && p->from[i] == PARAM_FROM_USER)
        return eb_fail(e, "policy %s: parameter '%s' given twice", policy, k);
    return i;
}

/* The one place a checked value is stored: in range, its source noted. */
static int store(const char *policy, struct policy_params *p, int i, enum param_from from,
                 double x, const char *shown, struct eb_err *e)
{
    const struct param_def *d = p->def[i];
    if ((d->type == PARAM_INT || d->type == PARAM_FLOAT) && (x < d->lo || x > d->hi))
        return range_error(policy, d, shown, e);
    p->val[i] = x;
    put_typed(p, i);
    if ((from == PARAM_FROM_USER || from == PARAM_FROM_DEFAULTS) && !p->given[i]) {
        int n = 0;
        for (int j = 0; j < p->n; j++) n += p->given[j] != 0;
        p->given[i] = (unsigned char)(n + 1);
    }
    p->from[i] = (unsigned char)from;
    return 0;
}

int param_set_text(const char *policy, struct policy_params *p, enum param_from from,
                   const char *key, size_t klen, const char *v, size_t vlen, struct eb_err *e)
{
    char val[128];
    double x;
    int i = find_key(policy, p, from, key, klen, e);
    if (i < 0) return -1;
    if (vlen >= sizeof val) return range_error(policy, p->def[i], "(too long)", e);
    if (vlen == 0) return range_error(policy, p->def[i], "(empty)", e);
    memcpy(val, v, vlen);
    val[vlen] = '\0';
    if (read_text(p->def[i], val, &x)) return range_error(policy, p->def[i], val, e);
    return store(policy, p, i, from, x, val, e);
}

int param_set_json(const char *policy, struct policy_params *p, enum param_from from,
                   const char *key, const cJSON *v, struct eb_err *e)
{
    if (cJSON_IsString(v))
        return param_set_text(policy, p, from, key, strlen(key), v->valuestring,
                              strlen(v->valuestring), e);
    if (!cJSON_IsNumber(v) && !cJSON_IsBool(v))
        return eb_fail(e, "policy %s: parameter '%s' must be a number, a bool or a string",
                       policy, key);
    int i = find_key(policy, p, from, key, strlen(key), e);
    if (i < 0) return -1;
    double num = cJSON_IsBool(v) ? cJSON_IsTrue(v) : v->valuedouble, x;
    char shown[32];
    snprintf(shown, sizeof shown, "%.15g", num); /* the shortest spelling that reads back */
    if (strtod(shown, NULL) != num) snprintf(shown, sizeof shown, "%.17g", num);
    if (read_number(p->def[i], num, &x)) return range_error(policy, p->def[i], shown, e);
    return store(policy, p, i, from, x, shown, e);
}

int param_set_list(const char *policy, struct policy_params *p, enum param_from from,
                   const char *s, size_t len, struct eb_err *e)
{
    const char *end = s + len;
    while (s < end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *item_end = comma ? comma : end;
        const char *eq = memchr(s, '=', (size_t)(item_end - s));
        if (item_end == s) return eb_fail(e, "policy %s: empty parameter in the list", policy);
        if (!eq) {
            char keys[256];
            param_list_keys(p, keys, sizeof keys);
            return eb_fail(e, "policy %s: '%.*s' is not key=value (valid keys: %s)", policy,
                           (int)(item_end - s), s, keys);
        }
        if (param_set_text(policy, p, from, s, (size_t)(eq - s), eq + 1,
                           (size_t)(item_end - eq - 1), e))
            return -1;
        if (!comma) break;
        s = comma + 1;
        if (s == end) return eb_fail(e, "policy %s: empty parameter in the list", policy);
    }
    return 0;
}
