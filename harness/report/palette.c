/* palette.c - the gnuplot palette (policy colours, point types, dashes and
 * display names) written from the style table (policy_style.h), so that
 * plots/ keeps no list of its own; a policy without a style is drawn by the
 * palette's fallbacks.  See plots.h. */
#include "harness/report/plots.h"

#include <stdio.h>
#include <stdlib.h>

#include "harness/report/policy_style.h"
#include "harness/report/sbuf.h"

/* 'text' as a gnuplot single-quoted string ('' for a quote; the styles'
 * names hold no line breaks, a test checks it). */
static void gp_quote(struct sbuf *b, const char *text)
{
    sb_put(b, "'", 1);
    for (const char *c = text; *c; c++) {
        if (*c == '\'') sb_put(b, "''", 2);
        else sb_put(b, c, 1);
    }
    sb_put(b, "'", 1);
}

/* One function f(args) = (p eq 'name') ? value : ... : fallback, over the
 * styles for which value() writes something (returns 1). */
static void gp_chain(struct sbuf *b, const char *head, const char *fallback,
                     int (*value)(struct sbuf *b, const struct policy_style *st))
{
    int n;
    const struct policy_style *st = policy_styles(&n);
    sb_printf(b, "%s = \\\n", head);
    for (int i = 0; i < n; i++) {
        struct sbuf v = {0};
        if (!value(&v, &st[i]) || v.oom) {
            b->oom |= v.oom;
            free(v.p);
            continue;
        }
        sb_put(b, "    (p eq ", 10);
        gp_quote(b, st[i].name);
        sb_printf(b, ") ? %s : \\\n", v.p);
        free(v.p);
    }
    sb_printf(b, "    %s\n\n", fallback);
}

static int rgb_of(struct sbuf *b, const struct policy_style *st)
{
    if (st->rgb < 0) return 0;
    sb_printf(b, "0x%06X", (unsigned)st->rgb & 0xFFFFFFu);
    return 1;
}

static int point_of(struct sbuf *b, const struct policy_style *st)
{
    if (st->point <= 0) return 0;
    sb_printf(b, "%d", st->point);
    return 1;
}

static int dash_of(struct sbuf *b, const struct policy_style *st)
{
    if (!st->dashed) return 0;
    sb_printf(b, "2");
    return 1;
}

static int name_of(struct sbuf *b, const struct policy_style *st)
{
    if (!st->display) return 0;
    gp_quote(b, st->display);
    return 1;
}

int plots_palette_text(char **out, struct eb_err *e)
{
    struct sbuf b = {0};
    *out = NULL;
    sb_printf(&b, "# palette.gp - written by evictbench from the policy styles\n"
                  "# (harness/report/policy_style.c); do not edit.  common.gp loads it.\n"
                  "#   policy_rgb(p, i)    colour 0xRRGGBB (for `lc rgb variable`); i: the series\n"
                  "#                       number, for a policy with no colour of its own\n"
                  "#   policy_color(p, i)  the same as a \"#rrggbb\" string\n"
                  "#   policy_pt(p, i)     point type\n"
                  "#   policy_dt(p)        dash type: 2 (dashed) for references such as FullKV\n"
                  "#   policy_name(p)      the name shown in legends and tables\n\n");
    gp_chain(&b, "policy_rgb(p, i)", "fallback_rgb(i)", rgb_of);
    sb_printf(&b, "policy_color(p, i) = sprintf('#%%06x', policy_rgb(p, i))\n\n");
    gp_chain(&b, "policy_pt(p, i)", "1 + (i % 6)", point_of);
    gp_chain(&b, "policy_dt(p)", "1", dash_of);
    gp_chain(&b, "policy_name(p)", "p", name_of);
    if (b.oom) {
        free(b.p);
        return eb_fail(e, "palette: out of memory");
    }
    *out = b.p;
    return 0;
}

int plots_palette_write(const char *path, struct eb_err *e)
{
    char *text;
    if (plots_palette_text(&text, e)) return -1;
    FILE *f = fopen(path, "w");
    if (!f) {
        free(text);
        return eb_fail(e, "%s: cannot write the palette", path);
    }
    int bad = fputs(text, f) < 0;
    bad |= fclose(f) != 0;
    free(text);
    return bad ? eb_fail(e, "%s: write failed", path) : 0;
}
