/* policy_style.h - how figures and tables show a policy, keyed by its name.
 *
 * Presentation only: the run key does not cover harness/report/, so a new
 * colour or display name makes no measurement stale, and a policy without a
 * row here is still drawn and named (the default style below).  palette.c
 * writes the gnuplot palette from this table; the tables and the HTML report
 * name policies with policy_display_name. */
#ifndef EB_POLICY_STYLE_H
#define EB_POLICY_STYLE_H

struct policy_style {
    const char *name;         /* the policy's registry (or stored) name, e.g. "rkv" */
    const char *display;      /* legend and table name, e.g. "R-KV" */
    int rgb;                  /* line colour 0xRRGGBB; -1: one by series number */
    int point;                /* gnuplot point type; 0: one by series number */
    int dashed;               /* 1: drawn dashed, as a reference (FullKV) */
};

/* Every styled name, in a stable order (the palette's). */
const struct policy_style *policy_styles(int *n);
/* The style of `name`; for a name without a row (or NULL), the default: its
 * own name as display name ("?" for NULL), colour and point type by series
 * number, solid.  Never NULL; the default's display points into `name`. */
struct policy_style policy_style_of(const char *name);
/* The display name of a policy ("rkv" -> "R-KV"); any other name is
 * returned as it is (NULL: "?"). */
const char *policy_display_name(const char *name);

#endif
