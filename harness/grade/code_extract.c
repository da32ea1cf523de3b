/* code_extract.c - the code grader's text side: the last fenced Python block
 * of a model's output, and output comparison line by line.  See code_grader.h. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness/grade/code_grader.h"

/* ---- extraction ------------------------------------------------------- */

static int python_tag(const char *s, size_t n)
{
    static const char *ok[] = {"python", "python3", "py"};
    size_t w = 0;
    while (w < n && s[w] != ' ' && s[w] != '\t' && s[w] != '\r') w++;
    if (w == 0) return 1;
    for (int i = 0; i < 3; i++)
        if (strlen(ok[i]) == w && strncasecmp(ok[i], s, w) == 0) return 1;
    return 0;
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

int code_extract_last_block(const char *text, char **code, struct eb_err *e)
{
    *code = NULL;
    const char *best = NULL, *best_end = NULL;
    const char *body = NULL;
    int in = 0, keep = 0;
    for (const char *ls = text; *ls;) {
        const char *le = strchr(ls, '\n');
        if (!le) le = ls + strlen(ls);
        const char *t = ls;
        while (t < le && (*t == ' ' || *t == '\t')) t++;
        int fence = le - t >= 3 && strncmp(t, "```", 3) == 0;
        if (fence && !in) {
            const char *tag = t + 3;
            while (tag < le && *tag == '`') tag++;
            while (tag < le && (*tag == ' ' || *tag == '\t')) tag++;
            in = 1;
            keep = python_tag(tag, (size_t)(le - tag));
            body = *le ? le + 1 : le;
        } else if (fence && in && blank(t + 3, (size_t)(le - t - 3))) {
            in = 0;
            if (keep) { best = body; best_end = ls; }
        }
        ls = *le ? le + 1 : le;
    }
    if (!best) return 0;  /* an unclosed block (truncated output) does not count */
    size_t n = (size_t)(best_end - best);
    char *c = eb_malloc(n + 1, e);
    if (!c) return -1;
    memcpy(c, best, n);
    c[n] = '\0';
    *code = c;
    return 0;
}

/* ---- comparison ------------------------------------------------------- */

int code_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

/* The line at *pos, trimmed of surrounding whitespace; 0 at the end. */
static int next_line(const char *s, size_t n, size_t *pos, const char **l, size_t *ll)
{
    if (*pos >= n) return 0;
    size_t a = *pos, b = a;
    while (b < n && s[b] != '\n') b++;
    *pos = b + 1;
    while (a < b && code_is_space(s[a])) a++;
    while (b > a && code_is_space(s[b - 1])) b--;
    *l = s + a;
    *ll = b - a;
    return 1;
}

/* The span of s without leading and trailing whitespace (so without blank
 * lines at either end). */
static void strip_span(const char *s, size_t n, size_t *a, size_t *b)
{
    *a = 0; *b = n;
    while (*a < *b && code_is_space(s[*a])) (*a)++;
    while (*b > *a && code_is_space(s[*b - 1])) (*b)--;
}

int code_outputs_match(const char *got, size_t got_len, const char *want)
{
    size_t ga, gb, wa, wb;
    strip_span(got, got_len, &ga, &gb);
    strip_span(want, strlen(want), &wa, &wb);
    size_t gp = 0, wp = 0;
    const char *g = got + ga, *w = want + wa;
    size_t gn = gb - ga, wn = wb - wa;
    for (;;) {
        const char *gl, *wl;
        size_t gll = 0, wll = 0;
        int gr = next_line(g, gn, &gp, &gl, &gll);
        int wr = next_line(w, wn, &wp, &wl, &wll);
        if (!gr || !wr) return !gr && !wr;
        if (gll != wll || memcmp(gl, wl, gll) != 0) return 0;
    }
}
