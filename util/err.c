#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int vfail(struct eb_err *e, enum eb_err_kind kind, const char *fmt, va_list ap)
{
    if (!e) return -1;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    e->kind = kind;
    return -1;
}

int eb_fail(struct eb_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(e, EB_ERR_OTHER, fmt, ap);
    va_end(ap);
    return -1;
}

int eb_fail_nomem(struct eb_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(e, EB_ERR_NOMEM, fmt, ap);
    va_end(ap);
    return -1;
}

int eb_wrap(struct eb_err *e, const char *subject)
{
    if (!e) return -1;
    /* Build "<subject>: <old message>" by hand: snprintf of the old message
     * into itself would overlap, and the result may need truncating. */
    char tail[sizeof e->msg];
    memcpy(tail, e->msg, sizeof tail);
    tail[sizeof tail - 1] = '\0';
    size_t cap = sizeof e->msg - 1, n = 0;
    for (const char *parts[3] = {subject, ": ", tail}, **p = parts; p < parts + 3; p++) {
        size_t len = strlen(*p);
        if (len > cap - n) len = cap - n;
        memcpy(e->msg + n, *p, len);
        n += len;
    }
    e->msg[n] = '\0';
    return -1;
}

void *eb_malloc(size_t n, struct eb_err *e)
{
    void *p = malloc(n ? n : 1);
    if (!p) eb_fail_nomem(e, "out of memory allocating %zu bytes", n);
    return p;
}

void *eb_calloc(size_t count, size_t size, struct eb_err *e)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) eb_fail_nomem(e, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}
