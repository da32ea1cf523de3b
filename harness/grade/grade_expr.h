/* grade_expr.h - the expression tree of grade_expr.c's LaTeX parser, which
 * grade_expr_eval.c evaluates.  Private to harness/grade/. */
#ifndef EB_GRADE_EXPR_H
#define EB_GRADE_EXPR_H

#include <stddef.h>

#define MAX_NODES 1024
#define MAX_SYMS 24
#define MAX_NAME 48
#define MAX_NEST 64   /* bracket/command nesting; deeper input does not parse */
#define N_POINTS 6

enum kind {
    K_NUM, K_SYM, K_ADD, K_SUB, K_MUL, K_DIV, K_POW, K_NEG, K_FACT, K_ABS, K_FLOOR, K_CEIL,
    K_ROOT, K_BINOM, K_FUNC, K_LOG, K_EQ,
};

enum func {
    F_SIN, F_COS, F_TAN, F_SEC, F_CSC, F_COT, F_ASIN, F_ACOS, F_ATAN, F_SINH, F_COSH,
    F_TANH, F_LN, F_EXP,
};

struct node {
    enum kind kind;
    int a, b;      /* children (-1 none) */
    double num;    /* K_NUM value, K_SYM index, K_FUNC function */
};

struct symtab {
    int n;
    char name[MAX_SYMS][MAX_NAME];
};

struct parser {
    const char *s;
    size_t i;
    struct node nodes[MAX_NODES];
    int n;
    struct symtab *syms;
    int nest;
    int in_abs;
    int fatal;   /* a lexical error: no backtracking rescues the parse */
};

/* Parse s into p (sharing the symbol table); the root node's index, or -1
 * when nothing parses.  A plain float literal is accepted when the LaTeX
 * reading fails. */
int parse_expression(struct parser *p, const char *s, struct symtab *syms);

#endif
