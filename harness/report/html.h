/* html.h - writing HTML safely (private to harness/report/): text escaped
 * for element content and attributes, and JSON strings safe inside a
 * <script type="application/json"> block. */
#ifndef EB_HTML_H
#define EB_HTML_H

#include <stddef.h>

#include "harness/report/sbuf.h"
#include "util/err.h"

/* s as HTML text (& < > " ' escaped); NULL writes nothing. */
void html_text(struct sbuf *b, const char *s);
void html_text_n(struct sbuf *b, const char *s, size_t n);
/* s as a JSON string literal with '<', '>' and '&' as \u escapes (no
 * "</script>" can end the block); invalid UTF-8 bytes become U+FFFD. */
void json_str_n(struct sbuf *b, const char *s, size_t n);
void json_str(struct sbuf *b, const char *s);

/* The page's start (title escaped; css relative to the page) and end. */
void html_head(struct sbuf *b, const char *title, const char *root);
void html_foot(struct sbuf *b, const char *root);

/* Write b to path (through a temporary file renamed into place, so a page is
 * whole or absent). */
int html_write(const char *path, const struct sbuf *b, struct eb_err *e);

#endif
