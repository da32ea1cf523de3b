/* plot_figures.c - the figure table and each figure's gnuplot variables
 * (titles, axes, series names).  See plot_figures.h and plots/README.md. */
#include "harness/report/plot_figures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* ---- figures ----------------------------------------------------------- */


static int col_of(const struct panel *p, const char *name)
{
    return view_col(p->t, name);
}

static const char *first_cell(const struct panel *p, const char *name)
{
    int c = col_of(p, name);
    for (int r = p->r0; r < p->r1; r++) {
        const char *v = view_cell(p->t, r, c);
        if (v) return v;
    }
    return NULL;
}

static double first_num(const struct panel *p, const char *name)
{
    int c = col_of(p, name);
    for (int r = p->r0; r < p->r1; r++) {
        double v = view_num(p->t, r, c);
        if (isfinite(v)) return v;
    }
    return NAN;
}

static int any_num(const struct panel *p, const char *name)
{
    return isfinite(first_num(p, name));
}

/* FullKV mean generation length and accuracy for a panel's point. */
static int fullkv_lookup(const struct fig_ctx *c, const struct panel *p, double *mean_len,
                         double *accuracy)
{
    const struct view_rows *f = &c->fullkv;
    int cm = view_col(f, "model"), cd = view_col(f, "dataset"), cs = view_col(f, "sampling"),
        cx = view_col(f, "max_new_tokens");
    *mean_len = *accuracy = NAN;
    for (int r = 0; r < f->nrows; r++) {
        if (str_same(view_cell(f, r, cm), first_cell(p, "model")) &&
            str_same(view_cell(f, r, cd), first_cell(p, "dataset")) &&
            str_same(view_cell(f, r, cs), view_cell(p->t, p->r0, col_of(p, "sampling"))) &&
            str_same(view_cell(f, r, cx), view_cell(p->t, p->r0, col_of(p, "max_new_tokens")))) {
            *mean_len = view_num(f, r, view_col(f, "mean_gen_tokens"));
            *accuracy = view_num(f, r, view_col(f, "accuracy"));
            return 1;
        }
    }
    return 0;
}

static void title_sampling(const char *sampling, const char *max_new, char *out, size_t n)
{
    char s[200];
    describe_sampling(sampling, s, sizeof s);
    if (max_new) snprintf(out, n, "%s, at most %s new tokens", s, max_new);
    else snprintf(out, n, "%s", s);
}

/* title1 "<what>: <model> on <dataset>", title2 "<setting> | <sampling>". */
static void panel_titles(const struct panel *p, struct sbuf *v, const char *what, const char *setting)
{
    char t1[600], t2[600], samp[300];
    snprintf(t1, sizeof t1, "%s: %s on %s", what, first_cell(p, "model") ? first_cell(p, "model") : "?",
             first_cell(p, "dataset") ? first_cell(p, "dataset") : "?");
    title_sampling(view_cell(p->t, p->r0, col_of(p, "sampling")),
                   view_cell(p->t, p->r0, col_of(p, "max_new_tokens")), samp, sizeof samp);
    if (setting && *setting) snprintf(t2, sizeof t2, "%s | %s", setting, samp);
    else snprintf(t2, sizeof t2, "%s", samp);
    gp_str(v, "title1", t1);
    gp_str(v, "title2", t2);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Distinct finite values of a column in the panel, sorted; returns the count. */
static int distinct_nums(const struct panel *p, const char *name, double *out, int max)
{
    int c = col_of(p, name), n = 0;
    for (int r = p->r0; r < p->r1; r++) {
        double v = view_num(p->t, r, c);
        if (!isfinite(v)) continue;
        int seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = out[i] == v;
        if (!seen && n < max) out[n++] = v;
    }
    qsort(out, (size_t)n, sizeof *out, cmp_double);
    return n;
}

/* "set xtics ("128\n25%%" 128, ...)" for budgets, with the ratio to the FullKV
 * mean generation length under each budget when known; with position_by_index
 * the tics sit at 1, 2, ... (bar charts).  Also sets logx. */
static void budget_axis(const struct panel *p, struct sbuf *v, double fullkv_len, int position_by_index)
{
    double b[64];
    int n = distinct_nums(p, "budget", b, 64);
    struct sbuf cmd = {0};
    sb_printf(&cmd, "set xtics (");
    for (int i = 0; i < n; i++) {
        char ratio[32] = "";
        if (isfinite(fullkv_len) && fullkv_len > 0) {
            double pct = 100.0 * b[i] / fullkv_len;
            snprintf(ratio, sizeof ratio, pct < 10 ? "\\n%.1f%%%%" : "\\n%.0f%%%%", pct);
        }
        if (position_by_index) sb_printf(&cmd, "%s\"%g%s\" %d", i ? ", " : "", b[i], ratio, i + 1);
        else sb_printf(&cmd, "%s\"%g%s\" %g", i ? ", " : "", b[i], ratio, b[i]);
    }
    sb_printf(&cmd, ")");
    gp_str(v, "xtics_cmd", cmd.oom ? "" : cmd.p);
    free(cmd.p);
    gp_int(v, "logx", !position_by_index && n > 1 && b[0] > 0 && b[n - 1] / b[0] >= 4);
    gp_int(v, "has_ratio", isfinite(fullkv_len) && fullkv_len > 0);
    if (position_by_index) {
        gp_int(v, "nbudget", n);
        for (int i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, "bud%d", i + 1);
            gp_num(v, name, b[i]);
        }
    }
}

/* pol<i> and suf<i> for every block: the policy (for its colour and display
 * name, plots/palette.gp) and what follows it in the legend, plus nseries. */
static void series_vars(const struct panel *p, struct sbuf *v,
                        void (*suffix)(const struct panel *p, int row, char *out, size_t n))
{
    gp_int(v, "nseries", p->nblocks);
    for (int i = 0; i < p->nblocks; i++) {
        int row = p->block[i];
        char name[32], suf[256] = "";
        snprintf(name, sizeof name, "pol%d", i + 1);
        gp_str(v, name, view_cell(p->t, row, col_of(p, "policy")));
        if (suffix) suffix(p, row, suf, sizeof suf);
        snprintf(name, sizeof name, "suf%d", i + 1);
        gp_str(v, name, suf);
    }
}

static void batching_setting(const struct panel *p, char *out, size_t n)
{
    describe_batching(first_cell(p, "batch_size"), first_cell(p, "batching"), out, n);
}

/* accuracy_vs_budget, length_vs_budget */
static int vars_accuracy(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                         char *why, size_t nwhy)
{
    (void)c, (void)why, (void)nwhy;
    char setting[128];
    batching_setting(p, setting, sizeof setting);
    panel_titles(p, v, "Accuracy vs KV budget", setting);
    series_vars(p, v, NULL);
    gp_num(v, "ref", first_num(p, "fullkv_accuracy"));
    budget_axis(p, v, first_num(p, "fullkv_mean_gen_tokens"), 0);
    return 0;
}

static int vars_length(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                       char *why, size_t nwhy)
{
    (void)c, (void)why, (void)nwhy;
    char setting[128];
    batching_setting(p, setting, sizeof setting);
    panel_titles(p, v, "Generation length vs KV budget", setting);
    series_vars(p, v, NULL);
    gp_num(v, "ref", first_num(p, "fullkv_mean_gen_tokens"));
    budget_axis(p, v, first_num(p, "fullkv_mean_gen_tokens"), 0);
    return 0;
}

/* batching_bs1_vs_padded_vs_grouped */
static void suffix_setting(const struct panel *p, int row, char *out, size_t n)
{
    const char *bs = view_cell(p->t, row, col_of(p, "batch_size"));
    const char *set = view_cell(p->t, row, col_of(p, "setting"));
    if (set && !strcmp(set, "bs1")) snprintf(out, n, ", batch 1");
    else snprintf(out, n, ", batch %s %s", bs ? bs : "?", set ? set : "?");
}

static int vars_batching(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                         char *why, size_t nwhy)
{
    int cs = col_of(p, "setting"), batched = 0;
    for (int r = p->r0; r < p->r1; r++)
        if (!str_same(view_cell(p->t, r, cs), "bs1")) batched = 1;
    if (!batched) {
        snprintf(why, nwhy, "only batch size 1 runs");
        return 1;
    }
    panel_titles(p, v, "Batching", "batch 1 vs padded vs grouped larger batches");
    series_vars(p, v, suffix_setting);
    for (int i = 0; i < p->nblocks; i++) {
        char name[32];
        snprintf(name, sizeof name, "set%d", i + 1);
        gp_str(v, name, view_cell(p->t, p->block[i], cs));
    }
    double len, acc;
    fullkv_lookup(c, p, &len, &acc);
    gp_num(v, "ref", acc);
    budget_axis(p, v, len, 1);
    return 0;
}

/* throughput_vs_batch */
static void suffix_budget(const struct panel *p, int row, char *out, size_t n)
{
    const char *b = view_cell(p->t, row, col_of(p, "budget"));
    if (b) snprintf(out, n, ", budget %s", b);
}

static int vars_throughput(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                           char *why, size_t nwhy)
{
    (void)c;
    if (!any_num(p, "tokens_per_s")) {
        snprintf(why, nwhy, "no run finished (every point out of memory)");
        return 1;
    }
    char setting[256];
    const char *dev = first_cell(p, "device"), *kv = first_cell(p, "kv_type");
    snprintf(setting, sizeof setting, "%s batching on %s, %s KV", first_cell(p, "batching"),
             dev ? dev : "?", kv ? kv : "f32");
    panel_titles(p, v, "Throughput vs batch size", setting);
    series_vars(p, v, suffix_budget);
    int cst = col_of(p, "status"), cmax = col_of(p, "max_ok_batch_size"), any_oom = 0;
    int cbs = col_of(p, "batch_size"), ctps = col_of(p, "tokens_per_s");
    for (int i = 0; i < p->nblocks; i++) {
        int oom = 0;
        for (int r = p->block[i]; r < p->block[i + 1]; r++)
            if (str_same(view_cell(p->t, r, cst), "oom")) oom = 1;
        any_oom |= oom;
        char name[32];
        snprintf(name, sizeof name, "oom%d", i + 1);
        gp_int(v, name, oom);
        double maxok = view_num(p->t, p->block[i], cmax), tps = NAN;
        for (int r = p->block[i]; r < p->block[i + 1]; r++)
            if (str_same(view_cell(p->t, r, cst), "ok") && view_num(p->t, r, cbs) == maxok)
                tps = view_num(p->t, r, ctps);
        snprintf(name, sizeof name, "maxok%d", i + 1);
        gp_num(v, name, maxok);
        snprintf(name, sizeof name, "maxtps%d", i + 1);
        gp_num(v, name, tps);
    }
    gp_int(v, "any_oom", any_oom);
    double bs[64];
    int n = distinct_nums(p, "batch_size", bs, 64);
    struct sbuf cmd = {0};
    sb_printf(&cmd, "set xtics (");
    for (int i = 0; i < n; i++) sb_printf(&cmd, "%s\"%g\" %g", i ? ", " : "", bs[i], bs[i]);
    sb_printf(&cmd, ")");
    gp_str(v, "xtics_cmd", cmd.oom ? "" : cmd.p);
    free(cmd.p);
    gp_int(v, "logx", n > 1 && bs[0] > 0 && bs[n - 1] / bs[0] >= 4);
    return 0;
}

/* pss_correct_vs_incorrect: the batching and sampling come from the runs. */
static void runs_setting(const struct fig_ctx *c, const struct panel *p, char *setting, size_t ns,
                         char *samp, size_t nsamp)
{
    const struct view_rows *u = &c->runs;
    int cid = view_col(u, "id"), cbs = view_col(u, "batch_size"), cb = view_col(u, "batching"),
        csj = view_col(u, "sampling_json"), cx = view_col(u, "max_new_tokens");
    int crun = col_of(p, "run_id");
    const char *bs = NULL, *b = NULL, *sj = NULL, *mx = NULL;
    int mixed_b = 0, mixed_s = 0, found = 0;
    for (int r = p->r0; r < p->r1; r++) {
        const char *id = view_cell(p->t, r, crun);
        for (int k = 0; k < u->nrows; k++) {
            if (!str_same(view_cell(u, k, cid), id)) continue;
            if (!found) {
                bs = view_cell(u, k, cbs);
                b = view_cell(u, k, cb);
                sj = view_cell(u, k, csj);
                mx = view_cell(u, k, cx);
                found = 1;
            } else {
                if (!str_same(bs, view_cell(u, k, cbs)) || !str_same(b, view_cell(u, k, cb))) mixed_b = 1;
                if (!str_same(sj, view_cell(u, k, csj)) || !str_same(mx, view_cell(u, k, cx))) mixed_s = 1;
            }
            break;
        }
    }
    if (mixed_b) snprintf(setting, ns, "several batch settings");
    else describe_batching(bs, b, setting, ns);
    if (mixed_s) snprintf(samp, nsamp, "several sampling settings");
    else title_sampling(sj, mx, samp, nsamp);
}

static int vars_pss(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                    char *why, size_t nwhy)
{
    int has_pairs = any_num(p, "n_redundant_pairs"), has_nonexec = any_num(p, "n_nonexec");
    if (!has_pairs && !has_nonexec) {
        snprintf(why, nwhy, "no high-similarity pair or non-execution counts");
        return 1;
    }
    char setting[256], samp[300], t1[600], t2[700];
    runs_setting(c, p, setting, sizeof setting, samp, sizeof samp);
    const char *budget = first_cell(p, "budget");
    snprintf(t1, sizeof t1, "Correct vs incorrect traces: %s on %s", first_cell(p, "model"),
             first_cell(p, "dataset"));
    snprintf(t2, sizeof t2, "%s%s%s | %s | %s", policy_display_name(first_cell(p, "policy")),
             budget ? ", budget " : "",
             budget ? budget : "", setting, samp);
    gp_str(v, "title1", t1);
    gp_str(v, "title2", t2);
    gp_int(v, "has_pairs", has_pairs);
    gp_int(v, "has_nonexec", has_nonexec);
    /* blocks are ordered correct first; say which block holds which */
    int cc = col_of(p, "correct"), idx_ok = -1, idx_bad = -1, n_ok = 0, n_bad = 0;
    for (int i = 0; i < p->nblocks; i++) {
        int n = p->block[i + 1] - p->block[i];
        if (str_same(view_cell(p->t, p->block[i], cc), "1")) idx_ok = i, n_ok = n;
        else idx_bad = i, n_bad = n;
    }
    gp_int(v, "idx_correct", idx_ok);
    gp_int(v, "idx_incorrect", idx_bad);
    gp_int(v, "n_correct", n_ok);
    gp_int(v, "n_incorrect", n_bad);
    /* means of the measured traces of each class: mean_pairs1 (correct), mean_pairs0 ... */
    const char *measures[2][2] = {{"n_redundant_pairs", "mean_pairs"}, {"n_nonexec", "mean_nonexec"}};
    for (int m = 0; m < 2; m++) {
        int col = col_of(p, measures[m][0]);
        for (int cls = 0; cls < 2; cls++) {
            double sum = 0;
            int n = 0;
            for (int r = p->r0; r < p->r1; r++) {
                double x = view_num(p->t, r, col);
                if (str_same(view_cell(p->t, r, cc), cls ? "1" : "0") && isfinite(x)) sum += x, n++;
            }
            char name[64];
            snprintf(name, sizeof name, "%s%d", measures[m][1], cls);
            gp_num(v, name, n ? sum / n : NAN);
        }
    }
    return 0;
}

/* ablation */
static int vars_ablation(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                         char *why, size_t nwhy)
{
    (void)c;
    int cstep = col_of(p, "step"), variants = 0;
    for (int r = p->r0; r < p->r1; r++) {
        double s = view_num(p->t, r, cstep);
        if (s >= 1 && s <= 4) variants = 1;
    }
    if (!variants) {
        snprintf(why, nwhy, "no SkipKV variant next to R-KV");
        return 1;
    }
    char setting[128];
    const char *budget = first_cell(p, "budget"), *bs = first_cell(p, "batch_size");
    snprintf(setting, sizeof setting, "budget %s, batch %s", budget ? budget : "none", bs ? bs : "?");
    panel_titles(p, v, "Ablation", setting);
    gp_int(v, "nbars", p->r1 - p->r0);
    gp_num(v, "ref_acc", first_num(p, "fullkv_accuracy"));
    gp_num(v, "ref_len", first_num(p, "fullkv_mean_gen_tokens"));
    return 0;
}

/* fidelity_vs_budget */
static int vars_fidelity(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                         char *why, size_t nwhy)
{
    int has_kl = any_num(p, "mean_kl"), has_top1 = any_num(p, "top1_agree");
    if (!has_kl && !has_top1) {
        snprintf(why, nwhy, "no KL or top-1 agreement measured");
        return 1;
    }
    panel_titles(p, v, "Fidelity to FullKV", "teacher-forced FullKV traces");
    series_vars(p, v, NULL);
    gp_int(v, "has_kl", has_kl);
    gp_int(v, "has_top1", has_top1);
    double len, acc;
    fullkv_lookup(c, p, &len, &acc);
    budget_axis(p, v, len, 0);
    return 0;
}

/* peak_kv_vs_budget */
static int vars_kv(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                   char *why, size_t nwhy)
{
    (void)why, (void)nwhy;
    char batching[128], setting[160];
    const char *kv = first_cell(p, "kv_type");
    batching_setting(p, batching, sizeof batching);
    snprintf(setting, sizeof setting, "%s, %s KV", batching, kv ? kv : "f32");
    panel_titles(p, v, "Peak KV memory per sequence vs budget", setting);
    series_vars(p, v, NULL);
    double ref = first_num(p, "fullkv_seq_peak_kv_bytes"), top = isfinite(ref) ? ref : 0;
    int cpk = col_of(p, "seq_peak_kv_bytes");
    for (int r = p->r0; r < p->r1; r++) {
        double x = view_num(p->t, r, cpk);
        if (isfinite(x) && x > top) top = x;
    }
    const char *unit = "bytes";
    double scale = 1;
    if (top >= 1024.0 * 1024 * 1024) unit = "GiB", scale = 1024.0 * 1024 * 1024;
    else if (top >= 1024.0 * 1024) unit = "MiB", scale = 1024.0 * 1024;
    else if (top >= 1024.0) unit = "KiB", scale = 1024.0;
    gp_str(v, "kvunit", unit);
    gp_num(v, "kvscale", scale);
    gp_num(v, "ref", ref);
    double len, acc;
    fullkv_lookup(c, p, &len, &acc);
    budget_axis(p, v, len, 0);
    return 0;
}

const struct figure plot_figures[] = {
    {"accuracy_vs_budget", "v_accuracy_by_budget",
     "model, dataset, policy, budget, batch_size, batching, sampling, max_new_tokens, n_runs, "
     "n_samples, accuracy, mean_gen_tokens, fullkv_accuracy, fullkv_mean_gen_tokens, budget_ratio",
     "budget IS NOT NULL",
     {"model", "dataset", "sampling", "max_new_tokens", "batch_size", "batching", NULL},
     {"policy", NULL}, "budget", vars_accuracy},
    {"length_vs_budget", "v_length_by_budget",
     "model, dataset, policy, budget, batch_size, batching, sampling, max_new_tokens, n_runs, "
     "n_samples, mean_gen_tokens, min_gen_tokens, max_gen_tokens, mean_think_tokens, "
     "frac_finished, fullkv_mean_gen_tokens, length_ratio, budget_ratio",
     "budget IS NOT NULL",
     {"model", "dataset", "sampling", "max_new_tokens", "batch_size", "batching", NULL},
     {"policy", NULL}, "budget", vars_length},
    {"batching_bs1_vs_padded_vs_grouped", "v_batching",
     "model, dataset, policy, budget, sampling, max_new_tokens, batch_size, setting, n_runs, "
     "n_samples, accuracy, mean_gen_tokens, bs1_accuracy, delta_vs_bs1",
     /* only policies measured in at least two of the settings: a comparison */
     "budget IS NOT NULL AND setting IN ('bs1', 'padded', 'grouped') AND policy IN ("
     "SELECT o.policy FROM v_batching o WHERE o.model = v_batching.model AND "
     "o.dataset = v_batching.dataset AND o.sampling IS v_batching.sampling AND "
     "o.max_new_tokens IS v_batching.max_new_tokens AND o.budget IS NOT NULL AND "
     "o.setting IN ('bs1', 'padded', 'grouped') GROUP BY o.policy "
     "HAVING COUNT(DISTINCT o.setting) >= 2)",
     {"model", "dataset", "sampling", "max_new_tokens", NULL},
     {"policy", "batch_size", "setting", NULL}, "budget", vars_batching},
    {"throughput_vs_batch", "v_throughput_by_batch",
     "model, dataset, policy, budget, batching, batch_size, status, device, kv_type, sampling, "
     "max_new_tokens, n_runs, n_samples, gen_tokens, wall_s, tokens_per_s, peak_kv_bytes, "
     "max_ok_batch_size",
     NULL,
     {"model", "dataset", "device", "kv_type", "batching", "sampling", "max_new_tokens", NULL},
     {"policy", "budget", NULL}, "batch_size, status", vars_throughput},
    {"pss_correct_vs_incorrect", "v_pss_samples",
     "model, dataset, policy, budget, run_id, sample_idx, item_id, correct, gen_tokens, "
     "n_sentences, n_redundant_pairs, pss_max, pss_mean, n_nonexec",
     NULL,
     {"model", "dataset", "policy", "budget", NULL},
     {"correct", NULL}, "run_id, sample_idx", vars_pss},
    {"ablation", "v_ablation",
     "model, dataset, budget, batch_size, batching, sampling, max_new_tokens, policy, step, "
     "n_runs, n_samples, accuracy, mean_gen_tokens, fullkv_accuracy, fullkv_mean_gen_tokens",
     /* the papers' static batches; continuous / ragged runs are throughput points */
     "batching IN ('padded', 'grouped')",
     {"model", "dataset", "budget", "batch_size", "sampling", "max_new_tokens", NULL},
     {NULL}, "step, policy, batching DESC", vars_ablation},
    {"fidelity_vs_budget", "v_fidelity",
     "model, dataset, policy, budget, sampling, max_new_tokens, n_samples, mean_kl, top1_agree, "
     "mean_first_divergence, min_first_divergence",
     "budget IS NOT NULL",
     {"model", "dataset", "sampling", "max_new_tokens", NULL},
     {"policy", NULL}, "budget", vars_fidelity},
    {"peak_kv_vs_budget", "v_kv_by_budget",
     "model, dataset, policy, budget, batch_size, batching, kv_type, sampling, max_new_tokens, "
     "n_runs, n_samples, seq_peak_kv_bytes, seq_max_peak_kv_bytes, seq_mean_kv_bytes, "
     "batch_peak_kv_bytes, fullkv_seq_peak_kv_bytes",
     "budget IS NOT NULL AND seq_peak_kv_bytes IS NOT NULL",
     {"model", "dataset", "kv_type", "sampling", "max_new_tokens", "batch_size", "batching", NULL},
     {"policy", NULL}, "budget", vars_kv},
};

const int plot_n_figures = (int)(sizeof plot_figures / sizeof plot_figures[0]);

const char *plots_figure_name(int i)
{
    return i >= 0 && i < plot_n_figures ? plot_figures[i].name : NULL;
}
