/* grade_expr.c - a small LaTeX arithmetic evaluator standing in for sympy in
 * the reference's symbolic_equal.
 *
 * The reference parses each side with sympy's parse_latex (then parse_expr,
 * then latex2sympy) and calls two sides equal when they are the same
 * expression, simplify to the same thing, or - when both are constants -
 * evaluate to floats within rel_tol 1e-4.  We parse the LaTeX subset answers
 * use into a tree and decide numerically:
 *
 *  - constants: equal values (up to rounding of an exact identity) or
 *    isclose(rel_tol=1e-4);
 *  - free symbols: the two sides agree at several fixed points (an identity
 *    test for polynomials, rationals, roots and the functions we know).
 *
 * Parsing follows parse_latex's reading, not textbook LaTeX: \pi and every
 * unknown command are free symbols (so \pi vs 3.14159 is not equal, while
 * \frac{\pi}{2} vs \pi/2 is), letters are one-letter symbols multiplied
 * together, implicit multiplication binds tighter than * and / (1/2x is
 * 1/(2x)), a mixed number 2\frac{1}{2} is the product 1, NUMBER tokens may
 * group thousands with commas, "^23" is the power 23, and the longest prefix
 * that parses is the expression ("x,y" reads as x, "b+" as b).  Where
 * parse_latex fails, a plain float literal (".5") is still read, as parse_expr
 * would. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/grade/grade.h"
#include "harness/grade/grade_expr.h"
#include "harness/grade/grade_text.h"

static const struct { const char *name; enum func fn; } functions[] = {
    {"sin", F_SIN}, {"cos", F_COS}, {"tan", F_TAN}, {"sec", F_SEC}, {"csc", F_CSC},
    {"cot", F_COT}, {"arcsin", F_ASIN}, {"arccos", F_ACOS}, {"arctan", F_ATAN},
    {"sinh", F_SINH}, {"cosh", F_COSH}, {"tanh", F_TANH}, {"ln", F_LN}, {"log", F_LN},
    {"exp", F_EXP},
};

/* Commands that are operators or relations in parse_latex (or that it
 * rejects); anywhere outside their place they make the input unparseable. */
static const char *const not_atoms[] = {
    "cdot", "times", "div", "le", "ge", "leq", "geq", "lt", "gt", "neq", "leqslant",
    "geqslant", "pm", "mp", "cup", "cap", "in", "notin", "subset", "subseteq", "setminus",
    "to", "rightarrow", "Rightarrow", "implies", "iff", "ldots", "cdots", "dots", "vdots",
    "ddots", "begin", "end", "over", "choose", "mod", "pmod", "bmod", "equiv", "approx",
    "rfloor", "rceil", "right", "left", "int", "sum", "prod", "lim",
};

/* Parser state to return to when an optional continuation does not parse. */
struct mark {
    size_t i;
    int n, nsyms, nest, in_abs;
};

static struct mark mark_here(const struct parser *p)
{
    return (struct mark){p->i, p->n, p->syms->n, p->nest, p->in_abs};
}

/* Back to m; 0 when the failure was not lexical (the caller then stops
 * before the failed part, as parse_latex does), -1 otherwise. */
static int rewind_to(struct parser *p, struct mark m)
{
    if (p->fatal) return -1;
    p->i = m.i;
    p->n = m.n;
    p->syms->n = m.nsyms;
    p->nest = m.nest;
    p->in_abs = m.in_abs;
    return 0;
}

static int parse_add(struct parser *p);
static int parse_unary(struct parser *p);
static int parse_atom(struct parser *p);

static int node(struct parser *p, enum kind kind, int a, int b, double num)
{
    if (p->n >= MAX_NODES) return -1;
    p->nodes[p->n] = (struct node){kind, a, b, num};
    return p->n++;
}

/* Length of the command name after a backslash at s[i] (0 when none). */
static size_t command_len(const char *s)
{
    size_t n = 0;
    if (s[0] != '\\') return 0;
    while (isalpha((unsigned char)s[1 + n])) n++;
    return n;
}

static int command_is(const char *s, const char *name)
{
    size_t n = command_len(s);
    return n == strlen(name) && !strncmp(s + 1, name, n);
}

/* Skip white space, LaTeX spacing commands and \left / \right. */
static void skip(struct parser *p)
{
    for (;;) {
        const char *s = p->s + p->i;
        if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') { p->i++; continue; }
        if (s[0] == '\\' && s[1] && strchr(",;:! ", s[1])) { p->i += 2; continue; }
        if (command_is(s, "quad") || command_is(s, "qquad") || command_is(s, "left") ||
            command_is(s, "right") || command_is(s, "displaystyle")) {
            p->i += 1 + command_len(s);
            continue;
        }
        return;
    }
}

static int expect(struct parser *p, char c)
{
    skip(p);
    if (p->s[p->i] != c) return -1;
    p->i++;
    return 0;
}

static int symbol(struct parser *p, const char *name, size_t n)
{
    if (n >= MAX_NAME) return -1;
    struct symtab *t = p->syms;
    for (int k = 0; k < t->n; k++)
        if (strlen(t->name[k]) == n && !strncmp(t->name[k], name, n)) return node(p, K_SYM, -1, -1, k);
    if (t->n >= MAX_SYMS) return -1;
    memcpy(t->name[t->n], name, n);
    t->name[t->n][n] = '\0';
    return node(p, K_SYM, -1, -1, t->n++);
}

/* NUMBER: digits, optional ",ddd" groups, optional ".digits"; "3." and an
 * integer with a leading zero ("03", as in 4.21e+03) are errors. */
static int parse_number(struct parser *p)
{
    const char *s = p->s;
    size_t i = p->i;
    struct gbuf b = {0};
    while (isdigit((unsigned char)s[i])) gbuf_putc(&b, s[i++]);
    while (s[i] == ',' && isdigit((unsigned char)s[i + 1]) && isdigit((unsigned char)s[i + 2]) &&
           isdigit((unsigned char)s[i + 3])) {
        gbuf_putn(&b, s + i + 1, 3);
        i += 4;
    }
    if (s[i] == '.') {
        if (!isdigit((unsigned char)s[i + 1])) { free(gbuf_take(&b)); p->fatal = 1; return -1; }
        gbuf_putc(&b, s[i++]);
        while (isdigit((unsigned char)s[i])) gbuf_putc(&b, s[i++]);
    }
    char *digits = gbuf_take(&b);
    if (!digits) return -1;
    if (digits[0] == '0' && isdigit((unsigned char)digits[1]) && !strchr(digits, '.')) {
        free(digits);  /* "03": sympy cannot sympify the token, parse_latex fails */
        p->fatal = 1;
        return -1;
    }
    double v = strtod(digits, NULL);
    free(digits);
    p->i = i;
    return node(p, K_NUM, -1, -1, v);
}

/* A letter with an optional subscript (x, x_1, x_{10}) is one symbol; x_1
 * and x_{1} are the same symbol. */
static int parse_letter(struct parser *p)
{
    const char *s = p->s;
    size_t i = p->i + 1;
    char name[MAX_NAME];
    size_t n = 0;
    name[n++] = s[p->i];
    if (s[i] == '_' && s[i + 1] == '{') {
        size_t j = i + 2;
        int depth = 1;
        for (; s[j]; j++) {
            depth += s[j] == '{' ? 1 : s[j] == '}' ? -1 : 0;
            if (!depth) break;
        }
        if (depth || j - (i + 2) + 2 >= MAX_NAME) return -1;
        name[n++] = '_';
        memcpy(name + n, s + i + 2, j - (i + 2));
        n += j - (i + 2);
        i = j + 1;
    } else if (s[i] == '_' && isalnum((unsigned char)s[i + 1])) {
        name[n++] = '_';
        name[n++] = s[i + 1];
        i += 2;
    }
    p->i = i;
    return symbol(p, name, n);
}

/* { expr } */
static int parse_braced(struct parser *p)
{
    if (expect(p, '{')) return -1;
    int e = parse_add(p);
    if (e < 0 || expect(p, '}')) return -1;
    return e;
}

/* Argument of \frac / \binom: a braced expression or one digit / letter / command. */
static int parse_arg(struct parser *p)
{
    skip(p);
    char c = p->s[p->i];
    if (c == '{') return parse_braced(p);
    if (isdigit((unsigned char)c)) { p->i++; return node(p, K_NUM, -1, -1, c - '0'); }
    if (isalpha((unsigned char)c)) { p->i++; return symbol(p, &p->s[p->i - 1], 1); }
    if (c == '\\') return parse_atom(p);
    return -1;
}

/* Exponent after '^': braced expression, a whole number, or one atom. */
static int parse_exponent(struct parser *p)
{
    skip(p);
    char c = p->s[p->i];
    if (c == '{') return parse_braced(p);
    if (isdigit((unsigned char)c)) return parse_number(p);
    if (isalpha((unsigned char)c)) { p->i++; return symbol(p, &p->s[p->i - 1], 1); }
    return parse_atom(p);
}

static int parse_function(struct parser *p, enum func fn)
{
    int power = -1, base = -1;
    skip(p);
    if (p->s[p->i] == '^') {
        p->i++;
        if ((power = parse_exponent(p)) < 0) return -1;
        skip(p);
    }
    if (fn == F_LN && p->s[p->i] == '_') {
        p->i++;
        if ((base = parse_arg(p)) < 0) return -1;
    }
    int arg = parse_unary(p);  /* "(x)" is an atom; "\sin 2x" takes the product */
    if (arg < 0) return -1;
    int f = base >= 0 ? node(p, K_LOG, arg, base, 0) : node(p, K_FUNC, arg, -1, fn);
    return power >= 0 ? node(p, K_POW, f, power, 0) : f;
}

/* Parse up to a closing command such as \rfloor. */
static int parse_until_command(struct parser *p, const char *close, enum kind kind)
{
    int e = parse_add(p);
    skip(p);
    if (e < 0 || !command_is(p->s + p->i, close)) return -1;
    p->i += 1 + strlen(close);
    return node(p, kind, e, -1, 0);
}

static int parse_command(struct parser *p)
{
    const char *s = p->s + p->i;
    size_t n = command_len(s);
    char name[32];
    if (n == 0 || n >= sizeof name) return -1;
    memcpy(name, s + 1, n);
    name[n] = '\0';
    p->i += 1 + n;
    if (!strcmp(name, "frac") || !strcmp(name, "dfrac") || !strcmp(name, "tfrac") ||
        !strcmp(name, "cfrac")) {
        int a = parse_arg(p), b = a < 0 ? -1 : parse_arg(p);
        return b < 0 ? -1 : node(p, K_DIV, a, b, 0);
    }
    if (!strcmp(name, "binom") || !strcmp(name, "dbinom") || !strcmp(name, "tbinom")) {
        int a = parse_arg(p), b = a < 0 ? -1 : parse_arg(p);
        return b < 0 ? -1 : node(p, K_BINOM, a, b, 0);
    }
    if (!strcmp(name, "sqrt")) {
        int index = -1;
        skip(p);
        if (p->s[p->i] == '[') {
            p->i++;
            if ((index = parse_add(p)) < 0 || expect(p, ']')) return -1;
        }
        int a = parse_braced(p);
        return a < 0 ? -1 : node(p, K_ROOT, a, index, 0);
    }
    if (!strcmp(name, "infty")) return node(p, K_NUM, -1, -1, INFINITY);
    if (!strcmp(name, "lfloor")) return parse_until_command(p, "rfloor", K_FLOOR);
    if (!strcmp(name, "lceil")) return parse_until_command(p, "rceil", K_CEIL);
    for (size_t k = 0; k < sizeof functions / sizeof functions[0]; k++)
        if (!strcmp(name, functions[k].name)) return parse_function(p, functions[k].fn);
    for (size_t k = 0; k < sizeof not_atoms / sizeof not_atoms[0]; k++)
        if (!strcmp(name, not_atoms[k])) return -1;
    return symbol(p, s, n + 1);  /* \pi, \theta, \mathbb, ...: a free symbol */
}

static int parse_group(struct parser *p, char close)
{
    p->i++;
    int e = parse_add(p);
    if (e < 0 || expect(p, close)) return -1;
    return e;
}

static int parse_atom(struct parser *p)
{
    skip(p);
    if (++p->nest > MAX_NEST) return -1;
    const char *s = p->s + p->i;
    int e = -1;
    if (isdigit((unsigned char)*s)) e = parse_number(p);
    else if (isalpha((unsigned char)*s)) e = parse_letter(p);
    else if (*s == '(') e = parse_group(p, ')');
    else if (*s == '[') e = parse_group(p, ']');
    else if (*s == '{') e = parse_group(p, '}');
    else if (*s == '|' && !p->in_abs) {
        p->in_abs++;
        int a = parse_group(p, '|');
        p->in_abs--;
        e = a < 0 ? -1 : node(p, K_ABS, a, -1, 0);
    } else if (s[0] == '\\' && s[1] == '{') {
        p->i += 2;
        int a = parse_add(p);
        skip(p);
        if (a >= 0 && p->s[p->i] == '\\' && p->s[p->i + 1] == '}') {
            p->i += 2;
            e = a;
        }
    } else if (*s == '\\') {
        e = parse_command(p);
    }
    p->nest--;
    return e;
}

/* Can an atom start here (for implicit multiplication)? */
static int starts_atom(struct parser *p)
{
    const char *s = p->s + p->i;
    if (isalnum((unsigned char)*s) || *s == '(' || *s == '[' || *s == '{') return 1;
    if (*s == '|') return !p->in_abs;
    if (s[0] == '\\' && s[1] == '{') return 1;
    size_t n = command_len(s);
    if (!n) return 0;
    for (size_t k = 0; k < sizeof not_atoms / sizeof not_atoms[0]; k++)
        if (strlen(not_atoms[k]) == n && !strncmp(s + 1, not_atoms[k], n)) return 0;
    return 1;
}

/* atom ('^' exponent | '!')* */
static int parse_postfix(struct parser *p)
{
    int a = parse_atom(p);
    while (a >= 0) {
        skip(p);
        char c = p->s[p->i];
        if (c == '^') {
            struct mark m = mark_here(p);
            p->i++;
            int e = parse_exponent(p);
            if (e < 0) return rewind_to(p, m) ? -1 : a;
            a = node(p, K_POW, a, e, 0);
        } else if (c == '!') {
            p->i++;
            a = node(p, K_FACT, a, -1, 0);
        } else {
            break;
        }
    }
    return a;
}

/* Implicit multiplication: postfix+ */
static int parse_implicit(struct parser *p)
{
    int a = parse_postfix(p);
    while (a >= 0) {
        skip(p);
        if (!starts_atom(p)) break;
        struct mark m = mark_here(p);
        int b = parse_postfix(p);
        if (b < 0) return rewind_to(p, m) ? -1 : a;
        a = node(p, K_MUL, a, b, 0);
    }
    return a;
}

static int parse_unary(struct parser *p)
{
    skip(p);
    if (++p->nest > MAX_NEST) return -1;
    int e;
    char c = p->s[p->i];
    if (c == '-') {
        p->i++;
        int a = parse_unary(p);
        e = a < 0 ? -1 : node(p, K_NEG, a, -1, 0);
    } else if (c == '+') {
        p->i++;
        e = parse_unary(p);
    } else {
        e = parse_implicit(p);
    }
    p->nest--;
    return e;
}

/* Explicit * / : \cdot \times \div */
static int parse_mul(struct parser *p)
{
    int a = parse_unary(p);
    while (a >= 0) {
        skip(p);
        struct mark m = mark_here(p);
        const char *s = p->s + p->i;
        enum kind k;
        if (*s == '*' || *s == '/' || *s == ':') { k = *s == '*' ? K_MUL : K_DIV; p->i++; }
        else if (command_is(s, "cdot") || command_is(s, "times")) { k = K_MUL; p->i += 1 + command_len(s); }
        else if (command_is(s, "div")) { k = K_DIV; p->i += 4; }
        else break;
        int b = parse_unary(p);
        if (b < 0) return rewind_to(p, m) ? -1 : a;
        a = node(p, k, a, b, 0);
    }
    return a;
}

static int parse_add(struct parser *p)
{
    int a = parse_mul(p);
    while (a >= 0) {
        skip(p);
        char c = p->s[p->i];
        if (c != '+' && c != '-') break;
        struct mark m = mark_here(p);
        p->i++;
        int b = parse_mul(p);
        if (b < 0) return rewind_to(p, m) ? -1 : a;
        a = node(p, c == '+' ? K_ADD : K_SUB, a, b, 0);
    }
    return a;
}

/* Characters parse_latex's lexer rejects anywhere in the input. */
static int lexable(const char *s)
{
    for (const char *c = s; *c; c++) {
        if ((unsigned char)*c >= 0x80 || strchr("&;%#\"?@~`$", *c)) return 0;
        if (c[0] == '\\' && c[1] == '\\') return 0;
    }
    return 1;
}

/* The whole input: expr ('=' expr)?.  Like parse_latex, the longest prefix
 * that parses is the expression and the rest is ignored ("x,y" is x, "b+" is
 * b), as long as every character is one its lexer knows. */
static int parse_top(struct parser *p)
{
    if (!lexable(p->s)) return -1;
    int a = parse_add(p);
    if (a < 0) return -1;
    skip(p);
    if (p->s[p->i] == '=') {
        struct mark m = mark_here(p);
        p->i++;
        int b = parse_add(p);
        if (b >= 0) return node(p, K_EQ, a, b, 0);
        if (rewind_to(p, m)) return -1;
    }
    return a;
}

/* See grade_expr.h. */
int parse_expression(struct parser *p, const char *s, struct symtab *syms)
{
    memset(p, 0, sizeof *p);
    p->s = s;
    p->syms = syms;
    int saved = syms->n;
    int root = parse_top(p);
    if (root >= 0) return root;
    syms->n = saved;
    double v;
    p->n = 0;
    if (gt_parse_float(s, &v) == 0) return node(p, K_NUM, -1, -1, v);
    return -1;
}
