/* report_figures.c - the report's figures: `evictbench plots` rendered into
 * <out>/figures, each SVG inlined with the data table it was drawn from. */
#include "harness/report/report_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIGS 256

struct fig_list {
    int n, skipped;
    char fig[MAX_FIGS][64];
    char path[MAX_FIGS][1024];
    struct sbuf notes;           /* why figures were skipped */
};

static void collect(void *ctx, enum plots_event ev, const char *figure, const char *text)
{
    struct fig_list *l = ctx;
    if (ev == PLOTS_FIGURE && l->n < MAX_FIGS) {
        snprintf(l->fig[l->n], sizeof l->fig[0], "%s", figure);
        snprintf(l->path[l->n], sizeof l->path[0], "%s", text);
        l->n++;
    } else if (ev == PLOTS_SKIPPED) {
        sb_printf(&l->notes, "<li>%s: ", figure);
        html_text(&l->notes, text);
        sb_printf(&l->notes, "</li>\n");
    }
}

/* The data file a figure was drawn from, as a table (the header once). */
static void data_table(struct sbuf *b, const char *tsv)
{
    char *text = report_slurp(tsv, NULL);
    if (!text) return;
    sb_printf(b, "<details><summary>data (");
    html_text(b, tsv);
    sb_printf(b, ")</summary>\n<table>\n");
    char *header = NULL;
    for (char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        char *next = line + len + (line[len] == '\n');
        line[len] = '\0';
        if (len && line[0] != '#' && !(header && !strcmp(header, line))) {
            int head = !header;
            if (head && !(header = strdup(line))) break;
            sb_printf(b, "<tr>");
            for (char *c = line; c;) {
                char *tab = strchr(c, '\t');
                if (tab) *tab = '\0';
                sb_printf(b, head ? "<th>" : "<td>");
                html_text(b, c);
                sb_printf(b, head ? "</th>" : "</td>");
                c = tab ? tab + 1 : NULL;
            }
            sb_printf(b, "</tr>\n");
        }
        line = next;
    }
    sb_printf(b, "</table></details>\n");
    free(header);
    free(text);
}

/* One figure: the SVG inline (its XML prolog dropped), then its data. */
static void inline_figure(struct sbuf *b, const char *fig, const char *path, const char *out_dir)
{
    char svg_path[1100], tsv[1200];
    snprintf(svg_path, sizeof svg_path, "%s.svg", path);
    const char *stem = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(tsv, sizeof tsv, "%s/figures/data/%s.tsv", out_dir, stem);
    char *svg = report_slurp(svg_path, NULL);
    const char *start = svg ? strstr(svg, "<svg") : NULL;
    sb_printf(b, "<figure id=\"fig-");
    html_text(b, stem);
    sb_printf(b, "\" data-figure=\"%s\">\n<div class=\"svg\">", fig);
    if (start) sb_printf(b, "%s", start);
    else sb_printf(b, "<p class=\"note\">(the SVG could not be read)</p>");
    sb_printf(b, "</div>\n<figcaption>");
    html_text(b, stem);
    sb_printf(b, " (<a href=\"figures/%s.png\">PNG</a>, <a href=\"figures/%s.svg\">SVG</a>)"
                 "</figcaption>\n", stem, stem);
    data_table(b, tsv);
    sb_printf(b, "</figure>\n");
    free(svg);
}

int report_figures(struct store *s, const struct report_options *o, struct sbuf *b,
                   int *n_figures, struct eb_err *e)
{
    *n_figures = 0;
    sb_printf(b, "<section id=\"figures\">\n<h2>Figures</h2>\n");
    struct eb_err ge = {0};
    if (plots_gnuplot_check(o->gnuplot, &ge) != 0) {
        sb_printf(b, "<p class=\"note\" id=\"no-figures\">No figures: ");
        html_text(b, ge.msg);
        sb_printf(b, "</p>\n</section>\n");
        return 0;
    }
    static struct fig_list l;
    memset(&l, 0, sizeof l);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/figures", o->out_dir);
    struct plots_options po = {dir, o->script_dir, o->gnuplot, 1, collect, &l, 0};
    if (plots_make(s, &po, e)) {
        free(l.notes.p);
        return eb_wrap(e, "figures");
    }
    sb_printf(b, "<p class=\"note\">Every figure of <code>evictbench plots</code>, drawn by "
                 "gnuplot from the data table under it (the rows of its view; plots/README.md "
                 "says which columns each figure reads).</p>\n");
    for (int i = 0; i < l.n; i++) inline_figure(b, l.fig[i], l.path[i], o->out_dir);
    if (l.notes.n) {
        sb_printf(b, "<p class=\"note\">Not drawn:</p>\n<ul class=\"note\">\n");
        sb_put(b, l.notes.p, l.notes.n);
        sb_printf(b, "</ul>\n");
    }
    sb_printf(b, "</section>\n");
    *n_figures = l.n;
    free(l.notes.p);
    return 0;
}
