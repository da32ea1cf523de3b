/* grade_text.c - UTF-8 and Python-string helpers for the grader (see grade_text.h). */
#include "harness/grade/grade_text.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void gbuf_grow(struct gbuf *b, size_t extra)
{
    if (b->oom) return;
    size_t need = b->n + extra + 1;
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 32;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return; }
    b->p = p;
    b->cap = cap;
}

void gbuf_putn(struct gbuf *b, const char *s, size_t n)
{
    gbuf_grow(b, n);
    if (b->oom) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void gbuf_puts(struct gbuf *b, const char *s) { gbuf_putn(b, s, strlen(s)); }
void gbuf_putc(struct gbuf *b, char c) { gbuf_putn(b, &c, 1); }

char *gbuf_take(struct gbuf *b)
{
    if (!b->oom && !b->p) gbuf_grow(b, 0);
    if (b->oom) { free(b->p); b->p = NULL; b->n = b->cap = 0; return NULL; }
    b->p[b->n] = '\0';
    char *p = b->p;
    b->p = NULL;
    b->n = b->cap = 0;
    return p;
}

char *gt_strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *gt_strdup(const char *s) { return gt_strndup(s, strlen(s)); }

char *gt_replace(const char *s, const char *from, const char *to)
{
    size_t fl = strlen(from);
    if (fl == 0) return gt_strdup(s);
    struct gbuf b = {0};
    const char *p = s, *q;
    while ((q = strstr(p, from))) {
        gbuf_putn(&b, p, (size_t)(q - p));
        gbuf_puts(&b, to);
        p = q + fl;
    }
    gbuf_puts(&b, p);
    return gbuf_take(&b);
}

int gt_step(char **s, char *next)
{
    if (!next) return -1;
    free(*s);
    *s = next;
    return 0;
}

/* ---- UTF-8 ---- */

size_t gt_u8len(const char *s)
{
    unsigned char c = (unsigned char)s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (c == 0) return 0;
    for (size_t i = 1; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) return 1;  /* truncated sequence */
    return n;
}

uint32_t gt_u8cp(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    switch (gt_u8len(s)) {
    case 2: return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    case 3: return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    case 4: return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
                   ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    default: return u[0];
    }
}

size_t gt_u8count(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; count++) {
        size_t l = gt_u8len(s + i);
        i += l ? l : 1;
    }
    return count;
}

size_t gt_u8last(const char *s, size_t n)
{
    size_t i = 0, last = 0;
    while (i < n) {
        last = i;
        size_t l = gt_u8len(s + i);
        i += l ? l : 1;
    }
    return last;
}

int gt_is_word_cp(uint32_t cp)
{
    if (cp < 0x80) return isalnum((int)cp) || cp == '_';
    if (cp < 0xC0) /* Latin-1 symbols; ª ² ³ µ ¹ º ¼ ½ ¾ are alphanumeric in Python */
        return cp == 0xAA || cp == 0xB2 || cp == 0xB3 || cp == 0xB5 || cp == 0xB9 ||
               cp == 0xBA || (cp >= 0xBC && cp <= 0xBE);
    if (cp == 0xD7 || cp == 0xF7) return 0;                    /* × ÷ */
    if (cp >= 0x2000 && cp <= 0x206F) return 0;                /* general punctuation */
    if (cp >= 0x20A0 && cp <= 0x20CF) return 0;                /* currency */
    if (cp == 0x2103 || cp == 0x2109 || cp == 0x2122) return 0; /* ℃ ℉ ™ */
    if (cp >= 0x2190 && cp <= 0x245F) return 0;                /* arrows, math operators, technical */
    if (cp >= 0x2500 && cp <= 0x2BFF) return 0;                /* box drawing, shapes, symbols */
    if (cp >= 0x3000 && cp <= 0x3003) return 0;                /* CJK punctuation */
    if (cp >= 0x3008 && cp <= 0x3011) return 0;
    if (cp >= 0xFF01 && cp <= 0xFF0F) return 0;                /* fullwidth punctuation */
    if (cp >= 0xFF1A && cp <= 0xFF20) return 0;
    return 1;
}

int gt_is_word_at(const char *s) { return *s && gt_is_word_cp(gt_u8cp(s)); }

int gt_is_space_cp(uint32_t cp)
{
    return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F) || cp == 0x85 ||
           cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

char *gt_strip(const char *s)
{
    size_t n = strlen(s), a = 0, z = n;
    while (a < n && gt_is_space_cp(gt_u8cp(s + a))) a += gt_u8len(s + a);
    while (z > a) {
        size_t last = a + gt_u8last(s + a, z - a);
        if (!gt_is_space_cp(gt_u8cp(s + last))) break;
        z = last;
    }
    return gt_strndup(s + a, z - a);
}

char *gt_strip_chars(const char *s, const char *chars, int left, int right)
{
    size_t n = strlen(s), a = 0, z = n;
    if (left) while (a < n && strchr(chars, s[a])) a++;
    if (right) while (z > a && strchr(chars, s[z - 1])) z--;
    return gt_strndup(s + a, z - a);
}

/* digitpart ::= digit (["_"] digit)*; returns its length (0 if none) and
 * appends the digits without underscores. */
static size_t digitpart(const char *s, struct gbuf *b)
{
    size_t i = 0;
    if (!isdigit((unsigned char)s[0])) return 0;
    while (isdigit((unsigned char)s[i])) {
        gbuf_putc(b, s[i++]);
        if (s[i] == '_' && isdigit((unsigned char)s[i + 1])) i++;
    }
    return i;
}

int gt_parse_float(const char *s, double *out)
{
    char *t = gt_strip(s);
    if (!t) return -1;
    const char *p = t;
    int neg = 0, rc = -1;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    if (!strcasecmp(p, "inf") || !strcasecmp(p, "infinity")) {
        *out = neg ? -INFINITY : INFINITY;
        free(t);
        return 0;
    }
    if (!strcasecmp(p, "nan")) {
        *out = NAN;
        free(t);
        return 0;
    }
    struct gbuf b = {0};
    gbuf_putc(&b, neg ? '-' : '+');
    size_t ni = digitpart(p, &b), nf = 0;
    p += ni;
    if (*p == '.') {
        gbuf_putc(&b, '.');
        p++;
        nf = digitpart(p, &b);
        p += nf;
    }
    if (ni + nf > 0 && (*p == 'e' || *p == 'E')) {
        const char *e = p + 1;
        struct gbuf eb = {0};
        gbuf_putc(&eb, 'e');
        if (*e == '+' || *e == '-') gbuf_putc(&eb, *e++);
        size_t ne = digitpart(e, &eb);
        char *es = gbuf_take(&eb);
        if (ne > 0 && es) { gbuf_puts(&b, es); p = e + ne; }
        free(es);
    }
    char *num = gbuf_take(&b);
    if (num && ni + nf > 0 && *p == '\0') {
        *out = strtod(num, NULL);
        rc = 0;
    }
    free(num);
    free(t);
    return rc;
}

int gt_isclose(double a, double b, double rel)
{
    if (a == b) return 1;
    if (isinf(a) || isinf(b) || isnan(a) || isnan(b)) return 0;
    double d = fabs(a - b), m = fmax(fabs(a), fabs(b));
    return d <= rel * m;
}

int gt_eq_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

size_t gt_count_char(const char *s, char c)
{
    size_t n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}
