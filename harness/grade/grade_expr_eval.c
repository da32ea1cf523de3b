/* grade_expr_eval.c - numeric evaluation of grade_expr.c's trees, and the
 * equality grade_symbolic_equal decides with it (see grade_expr.c for the
 * rules this follows). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/grade/grade.h"
#include "harness/grade/grade_expr.h"
#include "harness/grade/grade_text.h"

static double binomial(double n, double k)
{
    if (k == floor(k)) {
        if (k < 0) return 0;
        if (k <= 200) {
            double r = 1;
            for (int j = 1; j <= (int)k; j++) r = r * (n - k + j) / j;
            return r;
        }
    }
    return tgamma(n + 1) / (tgamma(k + 1) * tgamma(n - k + 1));
}

static double apply_function(enum func fn, double x)
{
    switch (fn) {
    case F_SIN: return sin(x);
    case F_COS: return cos(x);
    case F_TAN: return tan(x);
    case F_SEC: return 1 / cos(x);
    case F_CSC: return 1 / sin(x);
    case F_COT: return 1 / tan(x);
    case F_ASIN: return asin(x);
    case F_ACOS: return acos(x);
    case F_ATAN: return atan(x);
    case F_SINH: return sinh(x);
    case F_COSH: return cosh(x);
    case F_TANH: return tanh(x);
    case F_LN: return x > 0 ? log(x) : NAN;
    case F_EXP: return exp(x);
    }
    return NAN;
}

/* Value of node k with symbol values vals; *mag collects the largest operand
 * of a sum or difference, the scale against which rounding is judged (an
 * exact identity such as \sqrt{2}^2-2 = 0 leaves only rounding at that scale). */
static double eval(const struct node *nodes, int k, const double *vals, double *mag)
{
    const struct node *n = &nodes[k];
    double a = n->a >= 0 ? eval(nodes, n->a, vals, mag) : 0;
    double b = n->b >= 0 ? eval(nodes, n->b, vals, mag) : 0;
    double r;
    switch (n->kind) {
    case K_NUM: r = n->num; break;
    case K_SYM: r = vals[(int)n->num]; break;
    case K_ADD: r = a + b; break;
    case K_SUB: r = a - b; break;
    case K_MUL: r = a * b; break;
    case K_DIV: r = b == 0 ? NAN : a / b; break;
    case K_POW: r = pow(a, b); break;
    case K_NEG: r = -a; break;
    case K_FACT: r = (a < 0 && a == floor(a)) ? NAN : tgamma(a + 1); break;
    case K_ABS: r = fabs(a); break;
    case K_FLOOR: r = floor(a); break;
    case K_CEIL: r = ceil(a); break;
    case K_ROOT:
        if (a < 0) r = NAN;
        else r = n->b >= 0 ? pow(a, 1 / b) : sqrt(a);
        break;
    case K_BINOM: r = binomial(a, b); break;
    case K_FUNC: r = apply_function((enum func)(int)n->num, a); break;
    case K_LOG: r = (a > 0 && b > 0 && b != 1) ? log(a) / log(b) : NAN; break;
    case K_EQ: r = fabs(a - b); break;  /* |lhs - rhs|, the reference's equation test */
    default: r = NAN;
    }
    if (n->kind == K_ADD || n->kind == K_SUB || n->kind == K_EQ) {
        double m = fmax(fabs(a), fabs(b));  /* cancellation loses digits at this scale */
        if (isfinite(m) && m > *mag) *mag = m;
    }
    return r;
}

/* Value of symbol k at point t: spread over [0.3, 2.3], never an integer. */
static double point_value(int t, int k)
{
    double x = 0.5 + (t + 1) * 0.6180339887498949 + (k + 1) * 0.4142135623730951;
    return 0.3 + 2 * (x - floor(x)) + 1e-3 * (k + 1);
}

static int trees_equal(const struct parser *pa, int ra, const struct parser *pb, int rb, int nsyms)
{
    double vals[MAX_SYMS] = {0};
    if (nsyms == 0) {
        double ma = 0, mb = 0;
        double va = eval(pa->nodes, ra, vals, &ma), vb = eval(pb->nodes, rb, vals, &mb);
        if (isnan(va) || isnan(vb)) return 0;
        if (va == vb) return 1;
        if (!isfinite(va) || !isfinite(vb)) return 0;
        if (fabs(va - vb) <= 1e-13 * fmax(ma, mb)) return 1;  /* simplify(a - b) == 0 */
        return gt_isclose(vb, va, 1e-4);
    }
    int valid = 0;
    for (int t = 0; t < N_POINTS; t++) {
        for (int k = 0; k < nsyms; k++) vals[k] = point_value(t, k);
        double ma = 0, mb = 0;
        double va = eval(pa->nodes, ra, vals, &ma), vb = eval(pb->nodes, rb, vals, &mb);
        if (!isfinite(va) || !isfinite(vb)) continue;
        valid++;
        if (fabs(va - vb) > 1e-9 * fmax(fabs(va), fabs(vb)) + 1e-13 * fmax(ma, mb)) return 0;
    }
    return valid >= 3;
}

int grade_expr_value(const char *s, double *value)
{
    if (!s) return -1;
    struct symtab syms = {0};
    struct parser *p = malloc(sizeof *p);
    if (!p) return -1;
    int root = parse_expression(p, s, &syms), rc = -1;
    if (root >= 0 && syms.n == 0 && p->nodes[root].kind != K_EQ) {
        double mag = 0;
        *value = eval(p->nodes, root, NULL, &mag);
        rc = 0;
    }
    free(p);
    return rc;
}

int grade_symbolic_equal(const char *a, const char *b)
{
    if (!a || !b) return 0;
    struct symtab syms = {0};
    struct parser *pa = malloc(sizeof *pa), *pb = malloc(sizeof *pb);
    int eq = 0;
    if (pa && pb) {
        int ra = parse_expression(pa, a, &syms);
        int rb = parse_expression(pb, b, &syms);
        if (ra < 0 && rb < 0) {
            eq = !strcmp(a, b);  /* the reference compares the unparsed strings */
        } else if (ra >= 0 && rb >= 0) {
            /* an equation only matches an equation */
            if ((pa->nodes[ra].kind == K_EQ) == (pb->nodes[rb].kind == K_EQ))
                eq = trees_equal(pa, ra, pb, rb, syms.n);
        }
    }
    free(pa);
    free(pb);
    return eq;
}
