/* tables.c - the paper tables as Markdown and LaTeX (booktabs), one table per
 * panel, from the results views.  See tables.h. */
#include "harness/report/tables.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/plots.h"
#include "harness/store/store.h"

#include "harness/report/table_grid.h"


/* ---- shared helpers ---------------------------------------------------- */

static int same(const char *a, const char *b)
{
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

struct span {
    const struct view_rows *t;
    int r0, r1;
};

static const char *cell(const struct span *p, int r, const char *col)
{
    return view_cell(p->t, r, view_col(p->t, col));
}

static double num(const struct span *p, int r, const char *col)
{
    return view_num(p->t, r, view_col(p->t, col));
}

static const char *first(const struct span *p, const char *col)
{
    for (int r = p->r0; r < p->r1; r++)
        if (cell(p, r, col)) return cell(p, r, col);
    return NULL;
}

static double first_num(const struct span *p, const char *col)
{
    for (int r = p->r0; r < p->r1; r++)
        if (isfinite(num(p, r, col))) return num(p, r, col);
    return NAN;
}

static double sum_num(const struct span *p, const char *col)
{
    double s = 0;
    for (int r = p->r0; r < p->r1; r++)
        if (isfinite(num(p, r, col))) s += num(p, r, col);
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Distinct finite values of a column, sorted; at most max. */
static int distinct(const struct span *p, const char *col, double *out, int max)
{
    int n = 0;
    for (int r = p->r0; r < p->r1; r++) {
        double v = num(p, r, col);
        int seen = !isfinite(v);
        for (int i = 0; i < n && !seen; i++) seen = out[i] == v;
        if (!seen && n < max) out[n++] = v;
    }
    qsort(out, (size_t)n, sizeof *out, cmp_double);
    return n;
}

static int index_of(const double *v, int n, double x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x) return i;
    return -1;
}

/* "greedy, at most 256 new tokens" */
static void protocol(const char *sampling, const char *max_new, char *out, size_t n)
{
    char s[200];
    describe_sampling(sampling, s, sizeof s);
    if (max_new) snprintf(out, n, "%s, at most %s new tokens", s, max_new);
    else snprintf(out, n, "%s", s);
}

static const char *plural(double n)
{
    return n == 1 ? "" : "s";
}

/* ---- the tables -------------------------------------------------------- */

struct out_files {
    FILE *md, *tex;
    const char *name;
    int count;                  /* tables written */
};

static void emit(struct out_files *o, const struct grid *g, const char *heading, const char *caption)
{
    char label[96];
    o->count++;
    snprintf(label, sizeof label, "tab:%s-%d", o->name, o->count);
    for (char *c = label; *c; c++)
        if (*c == '_') *c = '-';
    write_md(o->md, g, heading, caption);
    write_tex(o->tex, g, caption, label);
}

/* accuracy_by_budget and length_by_budget: rows policies, columns budgets. */
static int table_by_budget(struct out_files *o, const struct span *p, int is_length, char *why, size_t nwhy)
{
    double budgets[64];
    int nb = distinct(p, "budget", budgets, 64);
    if (nb == 0) {
        snprintf(why, nwhy, "no run with a budget");
        return 1;
    }
    const char *value_col = is_length ? "mean_gen_tokens" : "accuracy";
    double scale = is_length ? 1 : 100;
    double ref = first_num(p, is_length ? "fullkv_mean_gen_tokens" : "fullkv_accuracy");
    double fullkv_len = first_num(p, "fullkv_mean_gen_tokens");
    struct grid g;
    grid_init(&g, nb + 1);
    g.span_from = 1;
    grid_head(&g, 0, BEST_NONE, "Policy");
    for (int i = 0; i < nb; i++) {
        char h[64];
        if (isfinite(fullkv_len) && fullkv_len > 0)
            snprintf(h, sizeof h, "%g (%.0f%%)", budgets[i], 100 * budgets[i] / fullkv_len);
        else
            snprintf(h, sizeof h, "%g", budgets[i]);
        grid_head(&g, i + 1, is_length ? BEST_LOW : BEST_HIGH, h);
    }
    if (isfinite(ref)) {
        int r = grid_row(&g, 1);
        grid_set(&g, r, 0, "FullKV", NAN);
        for (int i = 0; i < nb; i++) grid_num(&g, r, i + 1, scale * ref, 1);
    }
    /* rows come ordered by policy, then budget; budget NULL rows are FullKV's own */
    int row = -1;
    const char *cur = NULL;
    for (int r = p->r0; r < p->r1; r++) {
        if (!isfinite(num(p, r, "budget"))) continue;
        const char *pol = cell(p, r, "policy");
        if (row < 0 || !same(cur, pol)) {
            row = grid_row(&g, 0);
            cur = pol;
            grid_set(&g, row, 0, policy_display_name(pol), NAN);
            for (int i = 0; i < nb; i++) grid_set(&g, row, i + 1, "--", NAN);
        }
        grid_num(&g, row, index_of(budgets, nb, num(p, r, "budget")) + 1, scale * num(p, r, value_col), 1);
    }
    char setting[128], proto[300], heading[600], caption[1200];
    describe_batching(first(p, "batch_size"), first(p, "batching"), setting, sizeof setting);
    protocol(first(p, "sampling"), first(p, "max_new_tokens"), proto, sizeof proto);
    snprintf(heading, sizeof heading, "%s on %s, %s, %s", first(p, "model"), first(p, "dataset"),
             setting, proto);
    double runs = sum_num(p, "n_runs"), traces = sum_num(p, "n_samples");
    char ratio[160] = "";
    if (isfinite(fullkv_len))
        snprintf(ratio, sizeof ratio, " (in parentheses: %% of FullKV's mean generation length, %.1f tokens)",
                 fullkv_len);
    snprintf(caption, sizeof caption,
             "%s of %s on %s by KV budget in tokens%s; %s. %.0f run%s, %.0f trace%s; %s%s. "
             "Bold: best per budget (%s).",
             is_length ? "Mean generated length (tokens)" : "Accuracy (pass@1, %)", first(p, "model"),
             first(p, "dataset"), ratio, setting, runs, plural(runs), traces, plural(traces), proto,
             is_length ? "" : ", pass@1 over all traces", is_length ? "shortest" : "highest");
    int rc = g.err ? -1 : 0;
    if (!rc) emit(o, &g, heading, caption);
    grid_free(&g);
    return rc;
}

static int table_accuracy(struct out_files *o, const struct span *p, char *why, size_t nwhy)
{
    return table_by_budget(o, p, 0, why, nwhy);
}

static int table_length(struct out_files *o, const struct span *p, char *why, size_t nwhy)
{
    return table_by_budget(o, p, 1, why, nwhy);
}

/* throughput: rows (policy, budget), columns batch sizes, then the largest batch. */
static int table_throughput(struct out_files *o, const struct span *p, char *why, size_t nwhy)
{
    (void)why, (void)nwhy;
    double bs[64];
    int nb = distinct(p, "batch_size", bs, 64);
    struct grid g;
    grid_init(&g, nb + 3);
    grid_head(&g, 0, BEST_NONE, "Policy");
    grid_head(&g, 1, BEST_NONE, "Budget");
    for (int i = 0; i < nb; i++) {
        char h[64];
        snprintf(h, sizeof h, "batch %g", bs[i]);
        grid_head(&g, i + 2, BEST_HIGH, h);
    }
    grid_head(&g, nb + 2, BEST_HIGH, "Largest batch");
    int row = -1;
    const char *cur_pol = NULL, *cur_b = NULL;
    for (int r = p->r0; r < p->r1; r++) {
        const char *pol = cell(p, r, "policy"), *b = cell(p, r, "budget");
        if (row < 0 || !same(cur_pol, pol) || !same(cur_b, b)) {
            row = grid_row(&g, 0);
            cur_pol = pol;
            cur_b = b;
            grid_set(&g, row, 0, policy_display_name(pol), NAN);
            grid_set(&g, row, 1, b ? b : "--", NAN);
            for (int i = 0; i < nb; i++) grid_set(&g, row, i + 2, "--", NAN);
            double mx = num(p, r, "max_ok_batch_size");
            grid_num(&g, row, nb + 2, mx, 0);
        }
        int c = index_of(bs, nb, num(p, r, "batch_size")) + 2;
        if (row < 0 || c < 2) continue;
        /* "ok" sorts before "oom": a point that also ran keeps its throughput */
        if (same(cell(p, r, "status"), "ok")) grid_num(&g, row, c, num(p, r, "tokens_per_s"), 1);
        else if (!isfinite(g.val[row * g.nc + c])) grid_set(&g, row, c, "OOM", NAN);
    }
    char proto[300], heading[600], caption[1200];
    protocol(first(p, "sampling"), first(p, "max_new_tokens"), proto, sizeof proto);
    const char *dev = first(p, "device");
    snprintf(heading, sizeof heading, "%s on %s, %s batching on %s, %s", first(p, "model"),
             first(p, "dataset"), first(p, "batching"), dev ? dev : "?", proto);
    double runs = sum_num(p, "n_runs"), traces = sum_num(p, "n_samples");
    snprintf(caption, sizeof caption,
             "Throughput (generated tokens/s) of %s on %s by batch size, %s batching on %s; OOM: "
             "out of memory; largest batch: the largest batch size that ran. %.0f run%s, %.0f "
             "trace%s; %s. Bold: best per column.",
             first(p, "model"), first(p, "dataset"), first(p, "batching"), dev ? dev : "?", runs,
             plural(runs), traces, plural(traces), proto);
    int rc = g.err ? -1 : 0;
    if (!rc) emit(o, &g, heading, caption);
    grid_free(&g);
    return rc;
}

static const char *step_name(const char *policy, const char *batching)
{
    if (same(policy, "skipkv-sent")) return "+ sentence scoring";
    if (same(policy, "skipkv-sent-steer")) return "+ adaptive steering";
    if (same(policy, "skipkv")) return same(batching, "grouped") ? "+ batch grouping (SkipKV)" : "SkipKV";
    if (same(policy, "seal-static")) return "static steering";
    return policy_display_name(policy);
}

/* ablation: one row per view row, in step order. */
static int table_ablation(struct out_files *o, const struct span *p, char *why, size_t nwhy)
{
    int variants = 0;
    for (int r = p->r0; r < p->r1; r++) {
        double s = num(p, r, "step");
        if (s >= 1 && s <= 4) variants = 1;
    }
    if (!variants) {
        snprintf(why, nwhy, "no SkipKV variant next to R-KV");
        return 1;
    }
    struct grid g;
    grid_init(&g, 5);
    grid_head(&g, 0, BEST_NONE, "Step");
    grid_head(&g, 1, BEST_NONE, "Policy");
    grid_head(&g, 2, BEST_NONE, "Batching");
    grid_head(&g, 3, BEST_HIGH, "Accuracy (%)");
    grid_head(&g, 4, BEST_LOW, "Length (tokens)");
    double ref_acc = first_num(p, "fullkv_accuracy"), ref_len = first_num(p, "fullkv_mean_gen_tokens");
    if (isfinite(ref_acc) || isfinite(ref_len)) {
        int r = grid_row(&g, 1);
        grid_set(&g, r, 0, "FullKV", NAN);
        grid_set(&g, r, 1, "fullkv", NAN);
        grid_set(&g, r, 2, "--", NAN);
        grid_num(&g, r, 3, 100 * ref_acc, 1);
        grid_num(&g, r, 4, ref_len, 1);
    }
    for (int r = p->r0; r < p->r1; r++) {
        int row = grid_row(&g, 0);
        const char *pol = cell(p, r, "policy"), *b = cell(p, r, "batching");
        grid_set(&g, row, 0, step_name(pol, b), NAN);
        grid_set(&g, row, 1, pol, NAN);
        grid_set(&g, row, 2, b, NAN);
        grid_num(&g, row, 3, 100 * num(p, r, "accuracy"), 1);
        grid_num(&g, row, 4, num(p, r, "mean_gen_tokens"), 1);
    }
    char proto[300], heading[600], caption[1200];
    protocol(first(p, "sampling"), first(p, "max_new_tokens"), proto, sizeof proto);
    const char *budget = first(p, "budget"), *bs = first(p, "batch_size");
    snprintf(heading, sizeof heading, "%s on %s, budget %s, batch %s, %s", first(p, "model"),
             first(p, "dataset"), budget ? budget : "none", bs ? bs : "?", proto);
    double runs = sum_num(p, "n_runs"), traces = sum_num(p, "n_samples");
    snprintf(caption, sizeof caption,
             "SkipKV ablation on %s, %s: KV budget %s, batch %s. %.0f run%s, %.0f trace%s; %s, "
             "pass@1 over all traces. Bold: best per column (FullKV is the reference).",
             first(p, "model"), first(p, "dataset"), budget ? budget : "none", bs ? bs : "?", runs,
             plural(runs), traces, plural(traces), proto);
    int rc = g.err ? -1 : 0;
    if (!rc) emit(o, &g, heading, caption);
    grid_free(&g);
    return rc;
}

/* Run counts and protocols that the PSS and fidelity views do not carry. */
struct extra {
    struct view_rows pss;       /* model, dataset, n_runs, n_protocols, sampling, max_new_tokens */
    struct view_rows fid;       /* model, dataset, sampling, max_new_tokens, n_runs */
};

/* pss: rows (policy, budget, outcome). */
static int table_pss(struct out_files *o, const struct span *p, const struct extra *x)
{
    struct grid g;
    grid_init(&g, 10);
    grid_head(&g, 0, BEST_NONE, "Policy");
    grid_head(&g, 1, BEST_NONE, "Budget");
    grid_head(&g, 2, BEST_NONE, "Traces");
    grid_head(&g, 3, BEST_NONE, "Outcome");
    grid_head(&g, 4, BEST_LOW, "Mean PSS");
    grid_head(&g, 5, BEST_LOW, "Max PSS");
    grid_head(&g, 6, BEST_LOW, "High-sim. pairs");
    grid_head(&g, 7, BEST_LOW, "Non-exec. thoughts");
    grid_head(&g, 8, BEST_NONE, "Sentences");
    grid_head(&g, 9, BEST_NONE, "Length (tokens)");
    for (int r = p->r0; r < p->r1; r++) {
        int row = grid_row(&g, 0);
        const char *b = cell(p, r, "budget");
        grid_set(&g, row, 0, policy_display_name(cell(p, r, "policy")), NAN);
        grid_set(&g, row, 1, b ? b : "--", NAN);
        grid_num(&g, row, 2, num(p, r, "n_samples"), 0);
        grid_set(&g, row, 3, same(cell(p, r, "correct"), "1") ? "correct" : "incorrect", NAN);
        grid_num(&g, row, 4, num(p, r, "mean_pss"), 3);
        grid_num(&g, row, 5, num(p, r, "mean_pss_max"), 3);
        grid_num(&g, row, 6, num(p, r, "mean_redundant_pairs"), 2);
        grid_num(&g, row, 7, num(p, r, "mean_nonexec"), 2);
        grid_num(&g, row, 8, num(p, r, "mean_sentences"), 1);
        grid_num(&g, row, 9, num(p, r, "mean_gen_tokens"), 1);
    }
    const char *model = first(p, "model"), *dataset = first(p, "dataset");
    char proto[300] = "sampling not recorded", heading[600], caption[1400];
    double runs = NAN;
    const struct view_rows *e = &x->pss;
    for (int k = 0; k < e->nrows; k++) {
        if (!same(view_cell(e, k, 0), model) || !same(view_cell(e, k, 1), dataset)) continue;
        runs = view_num(e, k, 2);
        if (view_num(e, k, 3) > 1) snprintf(proto, sizeof proto, "several sampling settings");
        else protocol(view_cell(e, k, 4), view_cell(e, k, 5), proto, sizeof proto);
    }
    double traces = sum_num(p, "n_samples");
    snprintf(heading, sizeof heading, "%s on %s", model, dataset);
    snprintf(caption, sizeof caption,
             "Redundancy of correct vs incorrect traces of %s on %s: mean and maximum sentence "
             "similarity (PSS), sentence pairs above the PSS threshold and non-execution thoughts per "
             "trace. %.0f run%s, %.0f trace%s; %s. Bold: least redundant per column.",
             model, dataset, runs, plural(runs), traces, plural(traces), proto);
    int rc = g.err ? -1 : 0;
    if (!rc) emit(o, &g, heading, caption);
    grid_free(&g);
    return rc;
}

/* fidelity: rows (policy, budget). */
static int table_fidelity(struct out_files *o, const struct span *p, const struct extra *x)
{
    struct grid g;
    grid_init(&g, 7);
    grid_head(&g, 0, BEST_NONE, "Policy");
    grid_head(&g, 1, BEST_NONE, "Budget");
    grid_head(&g, 2, BEST_NONE, "Traces");
    grid_head(&g, 3, BEST_LOW, "Mean KL (nats)");
    grid_head(&g, 4, BEST_HIGH, "Top-1 agreement (%)");
    grid_head(&g, 5, BEST_HIGH, "Mean first divergence");
    grid_head(&g, 6, BEST_HIGH, "Min first divergence");
    for (int r = p->r0; r < p->r1; r++) {
        int row = grid_row(&g, 0);
        const char *b = cell(p, r, "budget");
        grid_set(&g, row, 0, policy_display_name(cell(p, r, "policy")), NAN);
        grid_set(&g, row, 1, b ? b : "--", NAN);
        grid_num(&g, row, 2, num(p, r, "n_samples"), 0);
        grid_num(&g, row, 3, num(p, r, "mean_kl"), 4);
        grid_num(&g, row, 4, 100 * num(p, r, "top1_agree"), 1);
        grid_num(&g, row, 5, num(p, r, "mean_first_divergence"), 1);
        grid_num(&g, row, 6, num(p, r, "min_first_divergence"), 0);
    }
    const char *model = first(p, "model"), *dataset = first(p, "dataset");
    const char *sampling = cell(p, p->r0, "sampling"), *max_new = cell(p, p->r0, "max_new_tokens");
    double runs = NAN;
    const struct view_rows *e = &x->fid;
    for (int k = 0; k < e->nrows; k++)
        if (same(view_cell(e, k, 0), model) && same(view_cell(e, k, 1), dataset) &&
            same(view_cell(e, k, 2), sampling) && same(view_cell(e, k, 3), max_new))
            runs = view_num(e, k, 4);
    char proto[300], heading[600], caption[1400];
    protocol(sampling, max_new, proto, sizeof proto);
    double traces = sum_num(p, "n_samples");
    snprintf(heading, sizeof heading, "%s on %s, %s", model, dataset, proto);
    snprintf(caption, sizeof caption,
             "Fidelity to FullKV of %s on %s, replaying FullKV's traces: mean per-step "
             "KL(FullKV || policy), top-1 agreement, and the first step where free-running greedy "
             "decoding diverges. %.0f run%s, %.0f trace%s; %s. Bold: best per column.",
             model, dataset, runs, plural(runs), traces, plural(traces), proto);
    int rc = g.err ? -1 : 0;
    if (!rc) emit(o, &g, heading, caption);
    grid_free(&g);
    return rc;
}

/* ---- driver ------------------------------------------------------------ */

struct table_def {
    const char *name;
    const char *view;
    const char *sql;            /* rows ordered by the panel keys first */
    const char *panel[8];       /* NULL-terminated */
    int kind;                   /* 0 acc, 1 length, 2 throughput, 3 ablation, 4 pss, 5 fidelity */
};

static const struct table_def tables[] = {
    {"accuracy_by_budget", "v_accuracy_by_budget",
     "SELECT model, dataset, policy, budget, batch_size, batching, sampling, max_new_tokens, n_runs, "
     "n_samples, accuracy, fullkv_accuracy, fullkv_mean_gen_tokens, budget_ratio "
     "FROM v_accuracy_by_budget ORDER BY model, dataset, sampling, max_new_tokens, batch_size, "
     "batching, policy, budget",
     {"model", "dataset", "sampling", "max_new_tokens", "batch_size", "batching", NULL}, 0},
    {"length_by_budget", "v_length_by_budget",
     "SELECT model, dataset, policy, budget, batch_size, batching, sampling, max_new_tokens, n_runs, "
     "n_samples, mean_gen_tokens, fullkv_mean_gen_tokens, budget_ratio "
     "FROM v_length_by_budget ORDER BY model, dataset, sampling, max_new_tokens, batch_size, "
     "batching, policy, budget",
     {"model", "dataset", "sampling", "max_new_tokens", "batch_size", "batching", NULL}, 1},
    {"throughput", "v_throughput_by_batch",
     "SELECT model, dataset, policy, budget, batching, batch_size, status, device, kv_type, "
     "sampling, max_new_tokens, n_runs, n_samples, tokens_per_s, max_ok_batch_size "
     "FROM v_throughput_by_batch ORDER BY model, dataset, device, kv_type, batching, sampling, "
     "max_new_tokens, policy, budget, batch_size, status",
     {"model", "dataset", "device", "kv_type", "batching", "sampling", "max_new_tokens", NULL}, 2},
    {"ablation", "v_ablation",
     "SELECT model, dataset, budget, batch_size, batching, sampling, max_new_tokens, policy, step, "
     "n_runs, n_samples, accuracy, mean_gen_tokens, fullkv_accuracy, fullkv_mean_gen_tokens "
     "FROM v_ablation WHERE batching IN ('padded', 'grouped') ORDER BY model, dataset, budget, "
     "batch_size, sampling, max_new_tokens, step, policy, batching DESC",
     {"model", "dataset", "budget", "batch_size", "sampling", "max_new_tokens", NULL}, 3},
    {"pss", "v_pss",
     "SELECT model, dataset, policy, budget, correct, n_samples, mean_pss, mean_pss_max, "
     "mean_redundant_pairs, mean_nonexec, mean_sentences, mean_gen_tokens FROM v_pss "
     "ORDER BY model, dataset, policy, budget, correct DESC",
     {"model", "dataset", NULL}, 4},
    {"fidelity", "v_fidelity",
     "SELECT model, dataset, policy, budget, sampling, max_new_tokens, n_samples, mean_kl, "
     "top1_agree, mean_first_divergence, min_first_divergence FROM v_fidelity "
     "ORDER BY model, dataset, sampling, max_new_tokens, policy, budget",
     {"model", "dataset", "sampling", "max_new_tokens", NULL}, 5},
};

#define N_TABLES ((int)(sizeof tables / sizeof tables[0]))

const char *tables_name(int i)
{
    return i >= 0 && i < N_TABLES ? tables[i].name : NULL;
}

static void note(const struct tables_options *o, enum tables_event ev, const char *table, const char *text)
{
    if (o->note) o->note(o->ctx, ev, table, text);
}

static int same_panel(const struct view_rows *t, int a, int b, const int *cols, int n)
{
    for (int i = 0; i < n; i++)
        if (!same(view_cell(t, a, cols[i]), view_cell(t, b, cols[i]))) return 0;
    return 1;
}

static int make_table(struct store *s, const struct table_def *d, const struct extra *x,
                      const struct tables_options *o, struct eb_err *e)
{
    struct view_rows t;
    if (view_rows_load(s, d->sql, &t, e)) return eb_wrap(e, d->name);
    if (t.nrows == 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "skipped: %s has no rows", d->view);
        note(o, TABLES_SKIPPED, d->name, msg);
        view_rows_free(&t);
        return 0;
    }
    int cols[8], np = 0;
    for (; d->panel[np]; np++)
        if ((cols[np] = view_col(&t, d->panel[np])) < 0) {
            view_rows_free(&t);
            return eb_fail(e, "%s: column %s missing", d->name, d->panel[np]);
        }
    char md_path[4096], tex_path[4096];
    int w1 = snprintf(md_path, sizeof md_path, "%s/%s.md", o->out_dir, d->name);
    int w2 = snprintf(tex_path, sizeof tex_path, "%s/%s.tex", o->out_dir, d->name);
    if (w1 < 0 || w2 < 0 || (size_t)w1 >= sizeof md_path || (size_t)w2 >= sizeof tex_path) {
        view_rows_free(&t);
        return eb_fail(e, "%s: path too long", o->out_dir);
    }
    struct out_files of = {fopen(md_path, "w"), fopen(tex_path, "w"), d->name, 0};
    int rc = 0;
    if (!of.md || !of.tex) rc = eb_fail(e, "%s: cannot write: %s", !of.md ? md_path : tex_path, strerror(errno));
    if (rc == 0) {
        fprintf(of.md, "<!-- %s: generated by evictbench tables from %s; do not edit -->\n\n", d->name, d->view);
        fprintf(of.tex, "%% %s: generated by evictbench tables from %s; needs \\usepackage{booktabs}\n\n",
                d->name, d->view);
    }
    for (int r0 = 0; rc == 0 && r0 < t.nrows;) {
        struct span p = {&t, r0, r0};
        while (p.r1 < t.nrows && same_panel(&t, r0, p.r1, cols, np)) p.r1++;
        r0 = p.r1;
        char why[200] = "";
        int k;
        switch (d->kind) {
        case 0: k = table_accuracy(&of, &p, why, sizeof why); break;
        case 1: k = table_length(&of, &p, why, sizeof why); break;
        case 2: k = table_throughput(&of, &p, why, sizeof why); break;
        case 3: k = table_ablation(&of, &p, why, sizeof why); break;
        case 4: k = table_pss(&of, &p, x); break;
        default: k = table_fidelity(&of, &p, x); break;
        }
        if (k < 0) rc = eb_fail(e, "%s: out of memory", d->name);
        if (k == 1) {
            char msg[600];
            snprintf(msg, sizeof msg, "skipped a table of %s on %s: %s", view_cell(&t, p.r0, cols[0]),
                     view_cell(&t, p.r0, cols[1]), why);
            note(o, TABLES_SKIPPED, d->name, msg);
        }
    }
    int bad = 0;
    if (of.md) bad |= ferror(of.md) | fclose(of.md);
    if (of.tex) bad |= ferror(of.tex) | fclose(of.tex);
    if (rc == 0 && bad) rc = eb_fail(e, "%s: write failed", md_path);
    if (rc == 0 && of.count == 0) {
        remove(md_path);
        remove(tex_path);
        note(o, TABLES_SKIPPED, d->name, "skipped: no table had data");
    } else if (rc == 0) {
        note(o, TABLES_WRITTEN, d->name, md_path);
        note(o, TABLES_WRITTEN, d->name, tex_path);
    }
    view_rows_free(&t);
    return rc;
}

int tables_make(struct store *s, const struct tables_options *o, struct eb_err *e)
{
    if (!o || !o->out_dir) return eb_fail(e, "tables: no output directory");
    if (plots_mkdirs(o->out_dir, e)) return -1;
    struct extra x;
    memset(&x, 0, sizeof x);
    if (view_rows_load(s, "SELECT p.model, p.dataset, COUNT(DISTINCT p.run_id), "
                          "COUNT(DISTINCT COALESCE(r.sampling_json, '') || '|' || "
                          "COALESCE(r.max_new_tokens, '')), MIN(r.sampling_json), "
                          "MIN(r.max_new_tokens) FROM v_pss_samples p JOIN runs r ON r.id = p.run_id "
                          "GROUP BY p.model, p.dataset", &x.pss, e) ||
        view_rows_load(s, "SELECT r.model, r.dataset_label, r.sampling_json, r.max_new_tokens, "
                          "COUNT(DISTINCT r.id) FROM v_run r JOIN samples s ON s.run_id = r.id "
                          "WHERE r.status = 'ok' AND (s.kl_mean IS NOT NULL OR s.top1_agree IS NOT NULL) "
                          "GROUP BY 1, 2, 3, 4", &x.fid, e)) {
        view_rows_free(&x.pss);
        return -1;
    }
    int rc = 0;
    for (int i = 0; rc == 0 && i < N_TABLES; i++) rc = make_table(s, &tables[i], &x, o, e);
    if (rc == 0) rc = bench_tables_make(s, o, e);
    view_rows_free(&x.pss);
    view_rows_free(&x.fid);
    return rc;
}
