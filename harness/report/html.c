/* html.c - escaping and page files for the report (see html.h). */
#include "harness/report/html.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void html_text_n(struct sbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        switch (s[i]) {
        case '&': sb_put(b, "&amp;", 5); break;
        case '<': sb_put(b, "&lt;", 4); break;
        case '>': sb_put(b, "&gt;", 4); break;
        case '"': sb_put(b, "&quot;", 6); break;
        case '\'': sb_put(b, "&#39;", 5); break;
        default: sb_put(b, s + i, 1);
        }
    }
}

void html_text(struct sbuf *b, const char *s)
{
    if (s) html_text_n(b, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return len;
}

void json_str_n(struct sbuf *b, const char *s, size_t n)
{
    sb_put(b, "\"", 1);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; s && i < n;) {
        unsigned char c = u[i];
        size_t len = utf8_len(u + i, n - i);
        if (!len) {
            sb_put(b, "\\ufffd", 6);
            i++;
            continue;
        }
        if (c == '"' || c == '\\') sb_printf(b, "\\%c", c);
        else if (c == '<' || c == '>' || c == '&' || c < 0x20) sb_printf(b, "\\u%04x", c);
        else sb_put(b, s + i, len);
        i += len;
    }
    sb_put(b, "\"", 1);
}

void json_str(struct sbuf *b, const char *s)
{
    if (!s) sb_put(b, "null", 4);
    else json_str_n(b, s, strlen(s));
}

void html_head(struct sbuf *b, const char *title, const char *root)
{
    sb_printf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    html_text(b, title);
    sb_printf(b, "</title>\n<link rel=\"stylesheet\" href=\"%sreport.css\">\n</head>\n<body>\n", root);
}

void html_foot(struct sbuf *b, const char *root)
{
    sb_printf(b, "<script src=\"%sreport.js\"></script>\n</body>\n</html>\n", root);
}

int html_write(const char *path, const struct sbuf *b, struct eb_err *e)
{
    if (b->oom) return eb_fail_nomem(e, "%s", path);
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return eb_fail(e, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return eb_fail(e, "%s: cannot write: %s", tmp, strerror(errno));
    size_t put = b->n ? fwrite(b->p, 1, b->n, f) : 0;
    if ((put != b->n) | ferror(f) | (fclose(f) != 0)) {
        remove(tmp);
        return eb_fail(e, "%s: write failed", tmp);
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return eb_fail(e, "%s: cannot rename into place: %s", path, strerror(errno));
    }
    return 0;
}
