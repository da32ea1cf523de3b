/* grade_equal.c - the reference's math_equal(pred, ref) on normalised strings.
 *
 * Checks in the reference's order (spec section 4; Qwen2.5-Math grader.py at
 * a45202b): case-insensitive string equality; multiple-choice letter; numbers
 * (commas deleted, a trailing % means /100) compared with isclose(rel_tol=1e-4)
 * against ref, ref/100 and ref*100 - when both sides are numbers this is the
 * verdict; empty prediction; pmatrix vs {a,b} reference; bracket-insensitive
 * strings; tuples/intervals element-wise (bracket kinds ignored); pmatrix
 * cell-wise; equations.  A structural rule that fails does not decide: the
 * symbolic check runs last, and grade_expr.c stands in for sympy there. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "harness/grade/grade.h"
#include "harness/grade/grade_text.h"

/* Deeper nesting (e.g. "((((...))))") counts as not equal; the reference would
 * hit Python's recursion limit and count the pair as wrong too. */
#define MAX_DEPTH 64

static int equal_rec(const char *pred, const char *ref, int depth);

/* parse_digits: float() after deleting commas, or a trailing "%" / "\%" as /100. */
static int parse_digits(const char *s, double *v)
{
    char *t = gt_replace(s, ",", "");
    if (!t) return -1;
    int rc = gt_parse_float(t, v);
    size_t n = strlen(t);
    if (rc && n > 0 && t[n - 1] == '%') {
        t[--n] = '\0';
        if (n > 0 && t[n - 1] == '\\') t[--n] = '\0';
        if (!(rc = gt_parse_float(t, v))) *v /= 100;
    }
    free(t);
    return rc;
}

/* Returns 1 equal, 0 not equal, -1 when either side is not a plain number
 * (then the later checks decide). */
static int numerically_equal(const char *pred, const char *ref)
{
    double p, r;
    if (parse_digits(pred, &p) || parse_digits(ref, &r)) return -1;
    double candidates[3] = {r / 100, r, r * 100};  /* percentage leniency */
    for (int i = 0; i < 3; i++)
        if (gt_isclose(candidates[i], p, 1e-4)) return 1;
    return 0;
}

/* Python \b(A|B|C|D|E)\b on an upper-cased string: the last standalone letter. */
static int last_choice_letter(const char *s)
{
    int found = 0;
    for (const char *p = s; *p; p += gt_u8len(p)) {
        char c = (char)toupper((unsigned char)*p);
        if (c < 'A' || c > 'E') continue;
        int before = p == s ? 0 : gt_is_word_at(s + gt_u8last(s, (size_t)(p - s)));
        int after = gt_is_word_at(p + 1);
        if (!before && !after) found = c;
    }
    return found;
}

/* choice_answer_clean(pred) == ref for a reference that is one of A-E. */
static int choice_equal(const char *pred, const char *ref)
{
    char *a = gt_strip_chars(pred, "\n", 1, 1);
    char *b = a ? gt_strip_chars(a, ".", 0, 1) : NULL;
    char *c = b ? gt_strip_chars(b, "/", 0, 1) : NULL;
    char *d = c ? gt_strip_chars(c, " ", 1, 1) : NULL;
    char *e = d ? gt_strip_chars(d, ":", 1, 0) : NULL;
    int eq = 0;
    if (e) {
        int letter = last_choice_letter(e);
        if (letter) {
            eq = ref[0] == letter;
        } else {
            char *f = gt_strip(e);
            char *g = f ? gt_strip_chars(f, ".", 1, 1) : NULL;
            char *h = g ? gt_strip_chars(g, ".", 0, 1) : NULL;
            char *i = h ? gt_strip_chars(h, "/", 0, 1) : NULL;
            eq = i && !strcmp(i, ref);
            free(f); free(g); free(h); free(i);
        }
    }
    free(a); free(b); free(c); free(d); free(e);
    return eq;
}

static int has_format(const char *s, char open, char close)
{
    size_t n = strlen(s);
    return n > 0 && s[0] == open && s[n - 1] == close;
}

/* regex.match(r"(\(|\[).+(\)|\])", s): an opening bracket, at least one
 * character, then a closing bracket somewhere on the first line. */
static int is_list_format(const char *s)
{
    if (s[0] != '(' && s[0] != '[') return 0;
    if (!s[1] || s[1] == '\n') return 0;
    for (const char *p = s + 1 + gt_u8len(s + 1); *p && *p != '\n'; p++)
        if (*p == ')' || *p == ']') return 1;
    return 0;
}

static int starts_with(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static int is_matrix_format(const char *s)
{
    return (starts_with(s, "\\begin{pmatrix}") || starts_with(s, "\\begin{bmatrix}")) &&
           (ends_with(s, "\\end{pmatrix}") || ends_with(s, "\\end{bmatrix}"));
}

/* Split s on sep into a NULL-terminated array of malloc'd parts. */
static char **split(const char *s, const char *sep, size_t *count)
{
    size_t n = 1, sl = strlen(sep);
    for (const char *p = s; (p = strstr(p, sep)); p += sl) n++;
    char **parts = calloc(n + 1, sizeof *parts);
    if (!parts) return NULL;
    const char *p = s;
    for (size_t i = 0; i < n; i++) {
        const char *q = i + 1 < n ? strstr(p, sep) : p + strlen(p);
        if (!(parts[i] = gt_strndup(p, (size_t)(q - p)))) {
            for (size_t j = 0; j < i; j++) free(parts[j]);
            free(parts);
            return NULL;
        }
        p = q + sl;
    }
    *count = n;
    return parts;
}

static void free_parts(char **parts)
{
    if (!parts) return;
    for (char **p = parts; *p; p++) free(*p);
    free(parts);
}

/* Element-wise equality of two lists of strings (0 when the counts differ). */
static int parts_equal(char **a, size_t na, char **b, size_t nb, int depth)
{
    if (!a || !b || na != nb) return 0;
    for (size_t i = 0; i < na; i++)
        if (!equal_rec(a[i], b[i], depth + 1)) return 0;
    return 1;
}

/* compare_lists: drop the first and last character, split on every ','. */
static int compare_lists(const char *pred, const char *ref, int depth)
{
    size_t lp = strlen(pred), lr = strlen(ref);
    char *ip = gt_strndup(pred + 1, gt_u8last(pred, lp) - 1);
    char *ir = gt_strndup(ref + 1, gt_u8last(ref, lr) - 1);
    size_t np = 0, nr = 0;
    char **pp = ip ? split(ip, ",", &np) : NULL, **pr = ir ? split(ir, ",", &nr) : NULL;
    int eq = parts_equal(pp, np, pr, nr, depth);
    free_parts(pp);
    free_parts(pr);
    free(ip);
    free(ir);
    return eq;
}

/* The non-empty stripped rows between \begin{pmatrix} and \end{pmatrix}. */
static char **matrix_rows(const char *s, size_t *count)
{
    size_t n = strlen(s), k = 0;
    char *inner = gt_strndup(s + 15, n - 15 - 13);
    char **rows = inner ? split(inner, "\\\\", count) : NULL;
    free(inner);
    if (!rows) return NULL;
    for (size_t i = 0; i < *count; i++) {  /* strip in place, compacting empties away */
        char *t = gt_strip(rows[i]);
        free(rows[i]);
        rows[i] = NULL;
        if (!t) {  /* out of memory: free the kept rows and the rest */
            for (size_t j = i + 1; j < *count; j++) free(rows[j]);
            rows[k] = NULL;
            free_parts(rows);
            return NULL;
        }
        if (*t) rows[k++] = t;
        else free(t);
    }
    rows[k] = NULL;
    *count = k;
    return rows;
}

static int compare_matrices(const char *pred, const char *ref, int depth)
{
    size_t np = 0, nr = 0;
    char **rp = matrix_rows(pred, &np), **rr = matrix_rows(ref, &nr);
    int eq = rp && rr && np == nr;
    for (size_t i = 0; eq && i < np; i++) {
        size_t cp = 0, cr = 0;
        char **a = split(rp[i], "&", &cp), **b = split(rr[i], "&", &cr);
        eq = parts_equal(a, cp, b, cr, depth);
        free_parts(a);
        free_parts(b);
    }
    free_parts(rp);
    free_parts(rr);
    return eq;
}

/* str_to_pmatrix: the reference's {a,b,...} group (regex \{.*,.*\}: from the
 * first '{' that has a ',' and then a '}' after it, to the last '}') becomes
 * "\begin{pmatrix}a\b...\end{pmatrix}"; "" when there is none. */
static char *str_to_pmatrix(const char *ref)
{
    char *s = gt_strip(ref);
    if (!s) return NULL;
    const char *last_close = strrchr(s, '}');
    const char *open = NULL;
    for (const char *p = s; last_close && p < last_close; p++) {
        if (*p != '{') continue;
        const char *comma = strchr(p + 1, ',');
        if (comma && comma < last_close) { open = p; break; }
    }
    struct gbuf b = {0};
    if (open && !memchr(open, '\n', (size_t)(last_close - open))) {
        char *m = gt_strndup(open, (size_t)(last_close - open + 1));
        char *core = m ? gt_strip_chars(m, "{}", 1, 1) : NULL;
        char *rows = core ? gt_replace(core, ",", "\\") : NULL;
        if (rows) {
            gbuf_puts(&b, "\\begin{pmatrix}");
            gbuf_puts(&b, rows);
            gbuf_puts(&b, "\\end{pmatrix}");
        } else {
            b.oom = 1;
        }
        free(m);
        free(core);
        free(rows);
    }
    free(s);
    return gbuf_take(&b);
}

static char *remove_brackets(const char *s)
{
    struct gbuf b = {0};
    for (; *s; s++)
        if (!strchr("{}()", *s)) gbuf_putc(&b, *s);
    return gbuf_take(&b);
}

/* The reference's bracket-insensitive check. */
static int bracketless_equal(const char *pred, const char *ref)
{
    char *p, *r;
    if ((has_format(pred, '[', ']') && ref[0] != '(') || (has_format(pred, '(', ')') && ref[0] != '[')) {
        p = gt_strip_chars(pred, "[]()", 1, 1);
        r = gt_strip_chars(ref, "[]()", 1, 1);
    } else {
        p = gt_strdup(pred);
        r = gt_strdup(ref);
    }
    char *bp = p ? remove_brackets(p) : NULL, *br = r ? remove_brackets(r) : NULL;
    int eq = bp && br && gt_eq_nocase(bp, br);
    free(p); free(r); free(bp); free(br);
    return eq;
}

static int symbolic_equal(const char *a, const char *b)
{
    return grade_symbolic_equal(a, b);
}

/* "lhs - (rhs)" of an equation with one '='. */
static char *format_equation(const char *eq, int negate)
{
    const char *sign = strchr(eq, '=');
    char *l = gt_strndup(eq, (size_t)(sign - eq));
    char *ls = l ? gt_strip(l) : NULL, *rs = gt_strip(sign + 1);
    struct gbuf b = {0};
    if (ls && rs) {
        if (negate) gbuf_puts(&b, "-(");
        gbuf_puts(&b, ls);
        gbuf_puts(&b, " - (");
        gbuf_puts(&b, rs);
        gbuf_puts(&b, ")");
        if (negate) gbuf_puts(&b, ")");
    } else {
        b.oom = 1;
    }
    free(l); free(ls); free(rs);
    return gbuf_take(&b);
}

static int equations_equal(const char *pred, const char *ref)
{
    char *p = format_equation(pred, 0), *np = format_equation(pred, 1), *r = format_equation(ref, 0);
    int eq = p && np && r && (symbolic_equal(p, r) || symbolic_equal(np, r));
    free(p); free(np); free(r);
    return eq;
}

/* One '=' and a left side of at most two characters ("x = 3", "k=5"). */
static int is_simple_equation(const char *s)
{
    if (gt_count_char(s, '=') != 1) return 0;
    const char *eq = strchr(s, '=');
    char *l = gt_strndup(s, (size_t)(eq - s));
    char *ls = l ? gt_strip(l) : NULL;
    int simple = ls && gt_u8count(ls, strlen(ls)) <= 2;
    free(l);
    free(ls);
    return simple;
}

/* After the string and number checks: each structural rule may prove
 * equality; when none does, the symbolic check decides. */
static int structural_equal(const char *pred, const char *ref, int depth)
{
    if (bracketless_equal(pred, ref)) return 1;
    if (is_list_format(pred) && is_list_format(ref) && compare_lists(pred, ref, depth)) return 1;
    if (is_matrix_format(pred) && is_matrix_format(ref) && compare_matrices(pred, ref, depth))
        return 1;
    if (gt_count_char(pred, '=') == 1 && gt_count_char(ref, '=') == 1) {
        if (equations_equal(pred, ref)) return 1;
    } else if (is_simple_equation(pred) && !strchr(ref, '=')) {
        if (equal_rec(strchr(pred, '=') + 1, ref, depth + 1)) return 1;
    } else if (is_simple_equation(ref) && !strchr(pred, '=')) {
        if (equal_rec(pred, strchr(ref, '=') + 1, depth + 1)) return 1;
    }
    return symbolic_equal(pred, ref);
}

static int equal_rec(const char *pred, const char *ref, int depth)
{
    if (!pred || !ref || depth > MAX_DEPTH) return 0;
    char *sp = gt_strip(pred), *sr = gt_strip(ref);
    int eq = 0;
    if (!sp || !sr) goto done;
    if (gt_eq_nocase(sp, sr)) { eq = 1; goto done; }
    if (strlen(ref) == 1 && ref[0] >= 'A' && ref[0] <= 'E' && choice_equal(pred, ref)) {
        eq = 1;
        goto done;
    }
    int num = numerically_equal(pred, ref);  /* both numbers: this is the verdict */
    if (num >= 0) { eq = num; goto done; }
    if (!*pred) goto done;
    if (strstr(sp, "pmatrix") && !strstr(sr, "pmatrix")) {
        char *m = str_to_pmatrix(sr);
        if (!m) goto done;
        free(sr);
        sr = m;
    }
    eq = structural_equal(sp, sr, depth);
done:
    free(sp);
    free(sr);
    return eq;
}

int grade_math_equal(const char *pred, const char *ref)
{
    return equal_rec(pred, ref, 0);
}
