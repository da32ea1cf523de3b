/* table_grid.c - a table in memory, bold for the best cell of a column, and
 * its Markdown and LaTeX (booktabs) writers.  See table_grid.h. */
#include "harness/report/table_grid.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a table in memory ------------------------------------------------- */

void grid_init(struct grid *g, int nc)
{
    memset(g, 0, sizeof *g);
    g->nc = nc;
    g->span_from = -1;
    g->head = calloc((size_t)nc, sizeof *g->head);
    g->better = calloc((size_t)nc, sizeof *g->better);
    if (!g->head || !g->better) g->err = 1;
}

void grid_free(struct grid *g)
{
    for (int i = 0; g->head && i < g->nc; i++) free(g->head[i]);
    for (int i = 0; g->cell && i < g->nr * g->nc; i++) free(g->cell[i]);
    free(g->head);
    free(g->better);
    free(g->cell);
    free(g->val);
    free(g->is_ref);
    memset(g, 0, sizeof *g);
}

void grid_head(struct grid *g, int c, int better, const char *text)
{
    if (g->err || c < 0 || c >= g->nc) return;
    free(g->head[c]);
    if (!(g->head[c] = strdup(text))) g->err = 1;
    g->better[c] = better;
}

/* A new empty row; returns its index (-1 when out of memory). */
int grid_row(struct grid *g, int is_ref)
{
    if (g->err) return -1;
    if (g->nr == g->cap) {
        int cap = g->cap ? g->cap * 2 : 16;
        char **cell = realloc(g->cell, (size_t)cap * (size_t)g->nc * sizeof *cell);
        if (cell) g->cell = cell;
        double *val = realloc(g->val, (size_t)cap * (size_t)g->nc * sizeof *val);
        if (val) g->val = val;
        int *ref = realloc(g->is_ref, (size_t)cap * sizeof *ref);
        if (ref) g->is_ref = ref;
        if (!cell || !val || !ref) {
            g->err = 1;
            return -1;
        }
        g->cap = cap;
    }
    int r = g->nr++;
    for (int c = 0; c < g->nc; c++) {
        g->cell[r * g->nc + c] = NULL;
        g->val[r * g->nc + c] = NAN;
    }
    g->is_ref[r] = is_ref;
    return r;
}

void grid_set(struct grid *g, int r, int c, const char *text, double v)
{
    if (g->err || r < 0 || r >= g->nr || c < 0 || c >= g->nc) return;
    char **slot = &g->cell[r * g->nc + c];
    free(*slot);
    if (!(*slot = strdup(text ? text : ""))) g->err = 1;
    g->val[r * g->nc + c] = v;
}

/* A number with the given decimals, or the dash of "not measured". */
void grid_num(struct grid *g, int r, int c, double v, int decimals)
{
    char buf[64];
    if (!isfinite(v)) {
        grid_set(g, r, c, "--", NAN);
        return;
    }
    snprintf(buf, sizeof buf, "%.*f", decimals, v);
    /* bold compares what is shown: 91.66 and 91.74 both print 91.7 */
    grid_set(g, r, c, buf, strtod(buf, NULL));
}

int grid_bold(const struct grid *g, int r, int c)
{
    if (g->better[c] == BEST_NONE || g->is_ref[r]) return 0;
    double v = g->val[r * g->nc + c];
    if (!isfinite(v)) return 0;
    for (int k = 0; k < g->nr; k++) {
        double w = g->val[k * g->nc + c];
        if (g->is_ref[k] || !isfinite(w)) continue;
        if (g->better[c] == BEST_HIGH ? w > v : w < v) return 0;
    }
    return 1;
}

const char *grid_text(const struct grid *g, int r, int c)
{
    const char *s = g->cell[r * g->nc + c];
    return s ? s : "";
}

/* ---- writers ----------------------------------------------------------- */

/* Text columns (policy names, outcomes) are left-aligned, numbers right. */
int grid_left(const struct grid *g, int c)
{
    for (int r = 0; r < g->nr; r++) {
        const char *s = g->cell[r * g->nc + c];
        if (!s || !*s || !strcmp(s, "--") || !strcmp(s, "OOM")) continue;
        char *end = NULL;
        strtod(s, &end);
        if (*end) return 1;
    }
    return 0;
}

void md_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else if (*s == '\n' || *s == '\r') fputc(' ', f);
        else fputc(*s, f);
    }
}

void write_md(FILE *f, const struct grid *g, const char *heading, const char *caption)
{
    fputs("### ", f);
    md_text(f, heading);
    fputs("\n\nTable: ", f);
    md_text(f, caption);
    fputs("\n\n|", f);
    for (int c = 0; c < g->nc; c++) {
        fputc(' ', f);
        md_text(f, g->head[c] ? g->head[c] : "");
        fputs(" |", f);
    }
    fputs("\n|", f);
    for (int c = 0; c < g->nc; c++) fputs(grid_left(g, c) ? ":---|" : "---:|", f);
    fputc('\n', f);
    for (int r = 0; r < g->nr; r++) {
        fputc('|', f);
        for (int c = 0; c < g->nc; c++) {
            int bold = grid_bold(g, r, c);
            fputs(bold ? " **" : " ", f);
            md_text(f, grid_text(g, r, c));
            fputs(bold ? "** |" : " |", f);
        }
        fputc('\n', f);
    }
    fputc('\n', f);
}

void tex_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '\\': fputs("\\textbackslash{}", f); break;
        case '&': case '%': case '$': case '#': case '_': case '{': case '}':
            fputc('\\', f);
            fputc(*s, f);
            break;
        case '~': fputs("\\textasciitilde{}", f); break;
        case '^': fputs("\\textasciicircum{}", f); break;
        case '\n': case '\r': fputc(' ', f); break;
        default: fputc(*s, f);
        }
    }
}

void write_tex(FILE *f, const struct grid *g, const char *caption, const char *label)
{
    fputs("\\begin{table}[t]\n\\centering\n\\small\n\\caption{", f);
    tex_text(f, caption);
    fputs("}\n\\label{", f);
    fputs(label, f);
    fputs("}\n\\begin{tabular}{", f);
    for (int c = 0; c < g->nc; c++) fputc(grid_left(g, c) ? 'l' : 'r', f);
    fputs("}\n\\toprule\n", f);
    for (int c = 0; c < g->nc; c++) {
        if (c) fputs(" & ", f);
        tex_text(f, g->head[c] ? g->head[c] : "");
    }
    fputs(" \\\\\n\\midrule\n", f);
    for (int r = 0; r < g->nr; r++) {
        for (int c = 0; c < g->nc; c++) {
            if (c) fputs(" & ", f);
            if (g->is_ref[r] && g->span_from >= 0 && c == g->span_from && g->nc - c > 1) {
                fprintf(f, "\\multicolumn{%d}{c}{", g->nc - c);
                tex_text(f, grid_text(g, r, c));
                fputc('}', f);
                break;
            }
            int bold = grid_bold(g, r, c);
            if (bold) fputs("\\textbf{", f);
            tex_text(f, grid_text(g, r, c));
            if (bold) fputc('}', f);
        }
        fputs(" \\\\\n", f);
        if (g->is_ref[r] && r + 1 < g->nr && !g->is_ref[r + 1]) fputs("\\midrule\n", f);
    }
    fputs("\\bottomrule\n\\end{tabular}\n\\end{table}\n\n", f);
}
