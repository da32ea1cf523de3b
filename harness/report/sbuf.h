/* sbuf.h - a growing text buffer, and gnuplot assignments written into one
 * (private to harness/report/). */
#ifndef EB_SBUF_H
#define EB_SBUF_H

#include <stddef.h>

/* A growing text buffer; oom latches the first allocation failure. */
struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
};

void sb_put(struct sbuf *b, const char *s, size_t len);
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* gnuplot assignments name='value'; / name=number; */
void gp_str(struct sbuf *b, const char *name, const char *value);
void gp_num(struct sbuf *b, const char *name, double v);
void gp_int(struct sbuf *b, const char *name, long v);

#endif
