/* plot_points.h - for tests/test_plots.c: the points a figure actually draws
 * (gnuplot's `set table` output, plots_options.capture) against the values of
 * the view's named columns.  Each figure states which plot and curves carry
 * its data and the SQL of what they must show, after the figure's scaling. */
#ifndef EB_TEST_PLOT_POINTS_H
#define EB_TEST_PLOT_POINTS_H

#define MAX_PTS 4096

struct pts {
    int n;
    double x[MAX_PTS], y[MAX_PTS];
};

static void pts_add(struct pts *p, double x, double y)
{
    if (p->n < MAX_PTS) p->x[p->n] = x, p->y[p->n] = y;
    p->n++;
}

/* Which curves of a captured table hold a figure's data points. */
struct drawn_spec {
    const char *fig;
    const char *ycol;           /* the view column the points show (after scaling) */
    int plot;                   /* the figure's plot command (0, or 1: the right panel) */
    int first;                  /* first curve; */
    int per_series;             /* curves taken: per_series * series (1 when 0) */
    int check_x;                /* 0: only y is the data (bar positions, jitter) */
    const char *sql;            /* x, y per point (or just y), every panel together */
};

/* KiB / MiB / GiB as plot_figures.c picks it: the panel's largest peak. */
#define KV_SCALE(v) "(" v ") / (CASE WHEN m >= 1073741824 THEN 1073741824.0 WHEN m >= 1048576 " \
    "THEN 1048576.0 WHEN m >= 1024 THEN 1024.0 ELSE 1.0 END)"

static const struct drawn_spec drawn_specs[] = {
    {"accuracy_vs_budget", "accuracy", 0, 0, 1, 1,
     "SELECT budget, 100.0 * accuracy FROM v_accuracy_by_budget WHERE budget IS NOT NULL "
     "AND accuracy IS NOT NULL"},
    {"length_vs_budget", "mean_gen_tokens", 0, 0, 1, 1,
     "SELECT budget, mean_gen_tokens FROM v_length_by_budget WHERE budget IS NOT NULL "
     "AND mean_gen_tokens IS NOT NULL"},
    {"peak_kv_vs_budget", "seq_peak_kv_bytes", 0, 0, 1, 1,
     "SELECT budget, " KV_SCALE("seq_peak_kv_bytes") " FROM (SELECT k.budget, k.seq_peak_kv_bytes, "
     "(SELECT MAX(MAX(o.seq_peak_kv_bytes), MAX(COALESCE(o.fullkv_seq_peak_kv_bytes, 0))) FROM "
     "v_kv_by_budget o WHERE o.model = k.model AND o.dataset = k.dataset AND o.kv_type IS k.kv_type "
     "AND o.sampling IS k.sampling AND o.max_new_tokens IS k.max_new_tokens AND o.batch_size IS "
     "k.batch_size AND o.batching IS k.batching AND o.budget IS NOT NULL AND o.seq_peak_kv_bytes "
     "IS NOT NULL) AS m FROM v_kv_by_budget k WHERE k.budget IS NOT NULL AND "
     "k.seq_peak_kv_bytes IS NOT NULL)"},
    {"throughput_vs_batch", "tokens_per_s", 0, 0, 1, 1,
     "SELECT batch_size, tokens_per_s FROM v_throughput_by_batch WHERE status = 'ok' "
     "AND tokens_per_s IS NOT NULL"},
    /* bs1, padded and grouped bars: three curves per series, one of them defined */
    {"batching_bs1_vs_padded_vs_grouped", "accuracy", 0, 0, 3, 0,
     "SELECT 100.0 * accuracy FROM v_batching b WHERE budget IS NOT NULL AND setting IN "
     "('bs1', 'padded', 'grouped') AND accuracy IS NOT NULL AND (SELECT COUNT(DISTINCT o.setting) "
     "FROM v_batching o WHERE o.model = b.model AND o.dataset = b.dataset AND o.sampling IS "
     "b.sampling AND o.max_new_tokens IS b.max_new_tokens AND o.policy = b.policy AND o.budget IS "
     "NOT NULL AND o.setting IN ('bs1', 'padded', 'grouped')) >= 2"},
    {"fidelity_vs_budget", "mean_kl", 0, 0, 1, 1,
     "SELECT budget, mean_kl FROM v_fidelity WHERE budget IS NOT NULL AND mean_kl IS NOT NULL"},
    {"fidelity_vs_budget", "top1_agree", 1, 0, 1, 1,
     "SELECT budget, 100.0 * top1_agree FROM v_fidelity WHERE budget IS NOT NULL "
     "AND top1_agree IS NOT NULL"},
    /* one bar curve per panel, bars in the view's step order */
    {"ablation", "accuracy", 0, 0, 0, 0, NULL},
    {"ablation", "mean_gen_tokens", 1, 0, 0, 0, NULL},
    /* the points (after the box plots): one curve per class present */
    {"pss_correct_vs_incorrect", "n_redundant_pairs", 0, -1, 1, 0,
     "SELECT n_redundant_pairs FROM v_pss_samples WHERE n_redundant_pairs IS NOT NULL"},
    {"pss_correct_vs_incorrect", "n_nonexec", 1, -1, 1, 0,
     "SELECT n_nonexec FROM v_pss_samples WHERE n_nonexec IS NOT NULL"},
};

#define N_DRAWN ((int)(sizeof drawn_specs / sizeof drawn_specs[0]))

/* The ablation's bars: accuracy (plot 0) and length (plot 1) of the rows drawn. */
static const char *ablation_sql(int plot)
{
    return plot == 0 ?
        "SELECT 100.0 * accuracy FROM v_ablation a WHERE batching IN ('padded', 'grouped') AND "
        "accuracy IS NOT NULL AND EXISTS (SELECT 1 FROM v_ablation o WHERE o.model = a.model AND "
        "o.dataset = a.dataset AND o.budget IS a.budget AND o.batch_size = a.batch_size AND "
        "o.sampling IS a.sampling AND o.max_new_tokens IS a.max_new_tokens AND o.batching IN "
        "('padded', 'grouped') AND o.step BETWEEN 1 AND 4)" :
        "SELECT mean_gen_tokens FROM v_ablation a WHERE batching IN ('padded', 'grouped') AND "
        "mean_gen_tokens IS NOT NULL AND EXISTS (SELECT 1 FROM v_ablation o WHERE o.model = "
        "a.model AND o.dataset = a.dataset AND o.budget IS a.budget AND o.batch_size = "
        "a.batch_size AND o.sampling IS a.sampling AND o.max_new_tokens IS a.max_new_tokens AND "
        "o.batching IN ('padded', 'grouped') AND o.step BETWEEN 1 AND 4)";
}

/* Series (blocks) in a data file: its header lines. */
static int data_blocks(const char *tsv)
{
    char *text = read_file(tsv, NULL);
    if (!text) return -1;
    int n = 0, start = 1;
    for (char *c = text; *c;) {
        size_t len = strcspn(c, "\n");
        if (!len) start = 1;
        else if (c[0] != '#' && start) n++, start = 0;
        c += len + (c[len] == '\n');
    }
    free(text);
    return n;
}

/* Adds the defined points of the chosen curves of one captured table. */
static int table_points(const char *table, const struct drawn_spec *sp, int series, struct pts *out)
{
    char *text = read_file(table, NULL);
    if (!text) return -1;
    int plot = -1, curve = -1, ncurves = 0;
    int want = sp->per_series ? sp->per_series * series : 1;
    for (char *c = text; *c;) {
        size_t len = strcspn(c, "\n");
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(len < 511 ? len : 511), c);
        c += len + (c[len] == '\n');
        int k, n;
        if (sscanf(line, "# Curve %d of %d", &k, &n) == 2) {
            if (k == 0) plot++;
            curve = k;
            ncurves = n;
            continue;
        }
        if (!len || line[0] == '#' || plot != sp->plot) continue;
        /* first < 0: the last `want` curves of the plot */
        int first = sp->first >= 0 ? sp->first : ncurves - want;
        if (curve < first || curve >= first + want) continue;
        double x, y;
        char type = line[strlen(line) - 1];
        if (sscanf(line, "%lf %lf", &x, &y) == 2 && type == 'i') pts_add(out, x, y);
    }
    free(text);
    return 0;
}

static int cmp_pt(const void *a, const void *b)
{
    const double *p = a, *q = b;
    if (p[0] != q[0]) return (p[0] > q[0]) - (p[0] < q[0]);
    return (p[1] > q[1]) - (p[1] < q[1]);
}

/* Sorts (x, y) pairs (y only: x set to 0). */
static void pts_sort(struct pts *p, int with_x)
{
    int n = p->n < MAX_PTS ? p->n : MAX_PTS;
    double *xy = malloc(sizeof(double) * 2 * (size_t)(n ? n : 1));
    if (!xy) return;
    for (int i = 0; i < n; i++) xy[2 * i] = with_x ? p->x[i] : 0, xy[2 * i + 1] = p->y[i];
    qsort(xy, (size_t)n, 2 * sizeof(double), cmp_pt);
    for (int i = 0; i < n; i++) p->x[i] = xy[2 * i], p->y[i] = xy[2 * i + 1];
    free(xy);
}

static int near_rel(double a, double b)
{
    return fabs(a - b) <= 1e-5 * fmax(1.0, fmax(fabs(a), fabs(b)));
}

#endif
