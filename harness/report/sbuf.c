/* sbuf.c - a growing text buffer and the gnuplot assignments written into it
 * (sbuf.h). */
#include "harness/report/sbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_put(struct sbuf *b, const char *s, size_t len)
{
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)w < sizeof tmp) {
        sb_put(b, tmp, (size_t)w);
        return;
    }
    char *big = malloc((size_t)w + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)w + 1, fmt, ap);
    va_end(ap);
    sb_put(b, big, (size_t)w);
    free(big);
}

/* name='value'; as a gnuplot assignment: single-quoted strings have no
 * escapes except '' for a quote.  Line breaks would end the command. */
void gp_str(struct sbuf *b, const char *name, const char *value)
{
    sb_printf(b, "%s='", name);
    for (const char *c = value ? value : ""; *c; c++) {
        if (*c == '\'') sb_put(b, "''", 2);
        else if (*c == '\n' || *c == '\r' || *c == '\t') sb_put(b, " ", 1);
        else sb_put(b, c, 1);
    }
    sb_put(b, "'; ", 3);
}

/* A real number: always written with a '.' or an exponent, since gnuplot
 * divides two integers as integers (5898240/1048576 is 5). */
void gp_num(struct sbuf *b, const char *name, double v)
{
    char num[64];
    if (!isfinite(v)) {
        sb_printf(b, "%s=NaN; ", name);
        return;
    }
    snprintf(num, sizeof num, "%.10g", v);
    sb_printf(b, "%s=%s%s; ", name, num, strpbrk(num, ".e") ? "" : ".0");
}

void gp_int(struct sbuf *b, const char *name, long v)
{
    sb_printf(b, "%s=%ld; ", name, v);
}
