/* test_plots.c - figures and tables from a results database: a database built
 * from tests/fixtures/plots/runs.tsv through the store API (several policies,
 * budgets, batch sizes and batching modes, out-of-memory points, correct and
 * incorrect traces, PSS and fidelity numbers), then
 *   - every figure's data files hold exactly the view's rows,
 *   - every figure is rendered as a non-empty PNG and SVG (SKIP without gnuplot),
 *   - figures and tables without rows are skipped, not drawn empty,
 *   - the Markdown and LaTeX tables carry the view's numbers, best in bold. */
#include "test.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/report/plots.h"
#include "policies/registry.h"
#include "harness/store/store.h"
#include "harness/report/tables.h"

/* ---- scratch space ----------------------------------------------------- */

static char tmp_root[256];

static void remove_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", dir);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) {
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* ---- the fixture database ---------------------------------------------- */

#define MAX_FIELDS 32
#define MAX_SAMPLES 16

/* Split s in place at sep; returns the number of fields. */
static int split(char *s, char sep, char **out, int max)
{
    int n = 0;
    out[n++] = s;
    for (char *c = s; *c && n < max; c++)
        if (*c == sep) {
            *c = '\0';
            out[n++] = c + 1;
        }
    return n;
}

static int64_t int_or_none(const char *s)
{
    return (!s || !strcmp(s, "-")) ? STORE_NONE : strtoll(s, NULL, 10);
}

static double num_or_nan(const char *s)
{
    return (!s || !strcmp(s, "-")) ? NAN : strtod(s, NULL);
}

/* Element i of a comma list ("-" or a short list: not measured). */
static const char *list_at(const char *list, int i, char *buf, size_t n)
{
    if (!strcmp(list, "-")) return "-";
    const char *c = list;
    for (int k = 0; k < i; k++) {
        c = strchr(c, ',');
        if (!c) return "-";
        c++;
    }
    size_t len = strcspn(c, ",");
    if (len >= n) len = n - 1;
    memcpy(buf, c, len);
    buf[len] = '\0';
    return buf;
}

/* Writes every run of the fixture; returns the number written, -1 on error. */
static int build_db(const char *db, const char *fixture, int only_first)
{
    FILE *f = fopen(fixture, "r");
    if (!f) return -1;
    struct store *s = NULL;
    struct eb_err e = {0};
    if (store_open(db, &s, &e) != 0) {
        fprintf(stderr, "  store_open: %s\n", e.msg);
        fclose(f);
        return -1;
    }
    char line[8192];
    int written = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        char *fl[MAX_FIELDS];
        int nf = split(line, '\t', fl, MAX_FIELDS);
        if (nf != 23) {
            fprintf(stderr, "  fixture: %d fields in a run line, expected 23\n", nf);
            rc = -1;
            break;
        }
        struct run_record r;
        run_record_init(&r);
        r.run_key = fl[0];
        r.model = fl[1];
        r.dataset = fl[2];
        r.data_offset = int_or_none(fl[3]);
        r.data_limit = int_or_none(fl[4]);
        r.policy = fl[5];
        r.budget = int_or_none(fl[6]);
        r.batch_size = int_or_none(fl[7]);
        r.batching = fl[8];
        r.sampling_json = fl[9];
        r.status = fl[10];
        r.max_new_tokens = 256;
        r.device = "cpu";
        r.seed = 42;
        struct sample_record smp[MAX_SAMPLES];
        int n = 0;
        char errbuf[64];
        if (strcmp(r.status, "ok") != 0) {
            snprintf(errbuf, sizeof errbuf, "out of memory at batch size %s", fl[7]);
            r.error = errbuf;
        } else {
            r.tokens_per_s = num_or_nan(fl[11]);
            r.peak_kv_bytes = int_or_none(fl[12]);
            int64_t total = 0;
            char b[64];
            for (; n < MAX_SAMPLES && strcmp(list_at(fl[13], n, b, sizeof b), "-"); n++) {
                struct sample_record *x = &smp[n];
                sample_record_init(x);
                x->sample_idx = n;
                x->prompt_tokens = 40;
                x->correct = atoi(list_at(fl[13], n, b, sizeof b));
                x->gen_tokens = int_or_none(list_at(fl[14], n, b, sizeof b));
                x->finished = x->gen_tokens < 256;
                x->peak_kv_bytes = int_or_none(list_at(fl[15], n, b, sizeof b));
                x->n_redundant_pairs = int_or_none(list_at(fl[16], n, b, sizeof b));
                x->n_nonexec = int_or_none(list_at(fl[17], n, b, sizeof b));
                x->pss_mean = num_or_nan(list_at(fl[18], n, b, sizeof b));
                x->pss_max = num_or_nan(list_at(fl[19], n, b, sizeof b));
                x->kl_mean = num_or_nan(list_at(fl[20], n, b, sizeof b));
                x->top1_agree = num_or_nan(list_at(fl[21], n, b, sizeof b));
                x->first_divergence = int_or_none(list_at(fl[22], n, b, sizeof b));
                total += x->gen_tokens;
            }
            r.gen_tokens = total;
            r.wall_s = r.tokens_per_s > 0 ? (double)total / r.tokens_per_s : NAN;
        }
        if (store_write_run(s, &r, smp, n, NULL, 0, &e) != 0) {
            fprintf(stderr, "  store_write_run %s: %s\n", r.run_key, e.msg);
            rc = -1;
        }
        written++;
        if (only_first) break;
    }
    fclose(f);
    store_close(s);
    return rc ? -1 : written;
}

/* ---- collecting what plots_make reports -------------------------------- */

#define MAX_EVENTS 512

struct events {
    int n;
    enum plots_event ev[MAX_EVENTS];
    char fig[MAX_EVENTS][64];
    char text[MAX_EVENTS][600];
};

static void collect(void *ctx, enum plots_event ev, const char *figure, const char *text)
{
    struct events *x = ctx;
    if (x->n >= MAX_EVENTS) return;
    x->ev[x->n] = ev;
    snprintf(x->fig[x->n], sizeof x->fig[0], "%s", figure);
    snprintf(x->text[x->n], sizeof x->text[0], "%s", text);
    x->n++;
}

static int count_events(const struct events *x, enum plots_event ev, const char *fig)
{
    int n = 0;
    for (int i = 0; i < x->n; i++) n += x->ev[i] == ev && !strcmp(x->fig[i], fig);
    return n;
}

/* ---- query helpers ----------------------------------------------------- */

/* Rows as lines of tab-separated text, NULL as "NULL", in query order. */
struct lines {
    char *buf;
    size_t n, cap;
    int rows;
};

static void lines_add(struct lines *l, const char *s, size_t len)
{
    if (l->n + len + 2 > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        while (cap < l->n + len + 2) cap *= 2;
        char *b = realloc(l->buf, cap);
        if (!b) exit(2);
        l->buf = b;
        l->cap = cap;
    }
    memcpy(l->buf + l->n, s, len);
    l->n += len;
    l->buf[l->n] = '\0';
}

static int to_lines(void *ctx, int ncols, const char *const *names, const char *const *values)
{
    (void)names;
    struct lines *l = ctx;
    for (int i = 0; i < ncols; i++) {
        if (i) lines_add(l, "\t", 1);
        const char *v = values[i] ? values[i] : "NULL";
        lines_add(l, v, strlen(v));
    }
    lines_add(l, "\n", 1);
    l->rows++;
    return 0;
}

static int query_lines(const char *db, const char *sql, struct lines *l)
{
    struct store *s = NULL;
    struct eb_err e = {0};
    memset(l, 0, sizeof *l);
    lines_add(l, "", 0);
    if (store_open_readonly(db, &s, &e) != 0) {
        fprintf(stderr, "  open: %s\n", e.msg);
        return -1;
    }
    int rc = store_query(s, sql, to_lines, l, &e);
    if (rc) fprintf(stderr, "  query %s: %s\n", sql, e.msg);
    store_close(s);
    return rc;
}

static long query_int(const char *db, const char *sql)
{
    struct lines l;
    if (query_lines(db, sql, &l) != 0) return -1;
    long v = strtol(l.buf, NULL, 10);
    free(l.buf);
    return v;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort the lines of a text buffer (in place) so row sets can be compared. */
static char *sorted_lines(char *text)
{
    int n = 0;
    for (char *c = text; *c; c++) n += *c == '\n';
    char **v = calloc((size_t)n + 1, sizeof *v);
    int k = 0;
    for (char *c = text, *start = text; *c; c++)
        if (*c == '\n') {
            *c = '\0';
            v[k++] = start;
            start = c + 1;
        }
    qsort(v, (size_t)k, sizeof *v, cmp_str);
    struct lines out;
    memset(&out, 0, sizeof out);
    lines_add(&out, "", 0);
    for (int i = 0; i < k; i++) {
        lines_add(&out, v[i], strlen(v[i]));
        lines_add(&out, "\n", 1);
    }
    free(v);
    return out.buf;
}

/* ---- the figures, as the test expects them (plots/README.md) ------------ */

struct fig_spec {
    const char *name;
    const char *sql;            /* the view's rows every data file together must hold */
    const char *panels;         /* how many figures (panels) must be drawn */
};

static const struct fig_spec fig_specs[] = {
    {"accuracy_vs_budget",
     "SELECT model, dataset, policy, budget, batch_size, batching, sampling, max_new_tokens, "
     "n_runs, n_samples, accuracy, mean_gen_tokens, fullkv_accuracy, fullkv_mean_gen_tokens, "
     "budget_ratio FROM v_accuracy_by_budget WHERE budget IS NOT NULL",
     "SELECT COUNT(*) FROM (SELECT DISTINCT model, dataset, sampling, max_new_tokens, batch_size, "
     "batching FROM v_accuracy_by_budget WHERE budget IS NOT NULL)"},
    {"length_vs_budget",
     "SELECT model, dataset, policy, budget, batch_size, batching, sampling, max_new_tokens, "
     "n_runs, n_samples, mean_gen_tokens, min_gen_tokens, max_gen_tokens, mean_think_tokens, "
     "frac_finished, fullkv_mean_gen_tokens, length_ratio, budget_ratio FROM v_length_by_budget "
     "WHERE budget IS NOT NULL",
     "SELECT COUNT(*) FROM (SELECT DISTINCT model, dataset, sampling, max_new_tokens, batch_size, "
     "batching FROM v_length_by_budget WHERE budget IS NOT NULL)"},
    {"batching_bs1_vs_padded_vs_grouped",
     "SELECT model, dataset, policy, budget, sampling, max_new_tokens, batch_size, setting, n_runs, "
     "n_samples, accuracy, mean_gen_tokens, bs1_accuracy, delta_vs_bs1 FROM v_batching b WHERE "
     "budget IS NOT NULL AND setting IN ('bs1', 'padded', 'grouped') AND (SELECT COUNT(DISTINCT "
     "o.setting) FROM v_batching o WHERE o.model = b.model AND o.dataset = b.dataset AND "
     "o.sampling IS b.sampling AND o.max_new_tokens IS b.max_new_tokens AND o.policy = b.policy AND "
     "o.budget IS NOT NULL AND o.setting IN ('bs1', 'padded', 'grouped')) >= 2",
     "SELECT COUNT(*) FROM (SELECT DISTINCT model, dataset, sampling, max_new_tokens FROM v_batching "
     "WHERE budget IS NOT NULL AND setting IN ('padded', 'grouped'))"},
    {"throughput_vs_batch",
     "SELECT model, dataset, policy, budget, batching, batch_size, status, device, kv_type, "
     "sampling, max_new_tokens, n_runs, n_samples, gen_tokens, wall_s, tokens_per_s, "
     "peak_kv_bytes, max_ok_batch_size FROM v_throughput_by_batch",
     "SELECT COUNT(*) FROM (SELECT DISTINCT model, dataset, device, kv_type, batching, sampling, "
     "max_new_tokens FROM v_throughput_by_batch)"},
    {"pss_correct_vs_incorrect",
     "SELECT model, dataset, policy, budget, run_id, sample_idx, item_id, correct, gen_tokens, "
     "n_sentences, n_redundant_pairs, pss_max, pss_mean, n_nonexec FROM v_pss_samples",
     "SELECT COUNT(*) FROM (SELECT DISTINCT model, dataset, policy, budget FROM v_pss_samples)"},
    {"ablation",
     "SELECT model, dataset, budget, batch_size, batching, sampling, max_new_tokens, policy, step, "
     "n_runs, n_samples, accuracy, mean_gen_tokens, fullkv_accuracy, fullkv_mean_gen_tokens FROM "
     "v_ablation a WHERE batching IN ('padded', 'grouped') AND EXISTS (SELECT 1 FROM v_ablation o "
     "WHERE o.model = a.model AND o.dataset = a.dataset AND o.budget IS a.budget AND "
     "o.batch_size = a.batch_size AND o.sampling IS a.sampling AND o.max_new_tokens IS "
     "a.max_new_tokens AND o.batching IN ('padded', 'grouped') AND o.step BETWEEN 1 AND 4)",
     "SELECT COUNT(*) FROM (SELECT DISTINCT model, dataset, budget, batch_size, sampling, "
     "max_new_tokens FROM v_ablation WHERE batching IN ('padded', 'grouped') AND step BETWEEN 1 AND 4)"},
    {"fidelity_vs_budget",
     "SELECT model, dataset, policy, budget, sampling, max_new_tokens, n_samples, mean_kl, "
     "top1_agree, mean_first_divergence, min_first_divergence FROM v_fidelity WHERE budget IS NOT NULL",
     "SELECT COUNT(*) FROM (SELECT DISTINCT model, dataset, sampling, max_new_tokens FROM v_fidelity "
     "WHERE budget IS NOT NULL)"},
    {"peak_kv_vs_budget",
     "SELECT model, dataset, policy, budget, batch_size, batching, kv_type, sampling, "
     "max_new_tokens, n_runs, n_samples, seq_peak_kv_bytes, seq_max_peak_kv_bytes, "
     "seq_mean_kv_bytes, batch_peak_kv_bytes, fullkv_seq_peak_kv_bytes FROM v_kv_by_budget WHERE "
     "budget IS NOT NULL AND seq_peak_kv_bytes IS NOT NULL",
     "SELECT COUNT(*) FROM (SELECT DISTINCT model, dataset, kv_type, sampling, max_new_tokens, "
     "batch_size, batching FROM v_kv_by_budget WHERE budget IS NOT NULL AND "
     "seq_peak_kv_bytes IS NOT NULL)"},
};

#define N_SPECS ((int)(sizeof fig_specs / sizeof fig_specs[0]))

/* The data rows of every file a figure wrote (comments and blank lines dropped). */
static char *figure_data_rows(const struct events *x, const char *fig)
{
    struct lines all;
    memset(&all, 0, sizeof all);
    lines_add(&all, "", 0);
    for (int i = 0; i < x->n; i++) {
        if (x->ev[i] != PLOTS_DATA || strcmp(x->fig[i], fig)) continue;
        char *text = read_file(x->text[i], NULL);
        if (!text) continue;
        /* every block starts with the column names: not a row */
        int block_start = 1;
        for (char *c = text; *c;) {
            size_t len = strcspn(c, "\n");
            if (!len) block_start = 1;
            else if (c[0] != '#' && block_start) block_start = 0;
            else if (c[0] != '#') {
                lines_add(&all, c, len);
                lines_add(&all, "\n", 1);
            }
            c += len + (c[len] == '\n');
        }
        free(text);
    }
    return all.buf;
}

static int has_gnuplot(void)
{
    static int known = -1;
    if (known < 0) {
        struct eb_err e = {0};
        known = plots_gnuplot_check(NULL, &e) == 0;
        if (!known) fprintf(stderr, "  (gnuplot unusable: %s)\n", e.msg);
    }
    return known;
}

static char db_full[512], db_small[512];

#include "plot_points.h"

static int to_pts(void *ctx, int ncols, const char *const *names, const char *const *values)
{
    (void)names;
    struct pts *p = ctx;
    if (ncols == 1 && values[0]) pts_add(p, 0, strtod(values[0], NULL));
    else if (ncols == 2 && values[0] && values[1])
        pts_add(p, strtod(values[0], NULL), strtod(values[1], NULL));
    return 0;
}

/* sql with every whole-word occurrence of `from` replaced by `to` (static buffer). */
static const char *swap_column(const char *sql, const char *from, const char *to)
{
    static char out[8192];
    size_t n = 0, lf = strlen(from);
    for (const char *c = sql; *c && n + 64 < sizeof out;) {
        int word_start = c == sql || !(isalnum((unsigned char)c[-1]) || c[-1] == '_');
        int match = word_start && !strncmp(c, from, lf) &&
                    !(isalnum((unsigned char)c[lf]) || c[lf] == '_');
        if (match) {
            n += (size_t)snprintf(out + n, sizeof out - n, "%s", to);
            c += lf;
        } else {
            out[n++] = *c++;
        }
    }
    out[n] = '\0';
    return out;
}

/* The fixture can tell the figure's column from every other numeric column of
 * its view: reading any of them instead would draw other values. */
static void check_distinct(const char *db, const struct drawn_spec *sp, const char *sql,
                           struct pts *want)
{
    static const char *const text_cols[] = {"model", "dataset", "policy", "batching", "sampling",
                                            "setting", "status", "device", "kv_type", "item_id", NULL};
    const char *cols = NULL;
    for (int f = 0; f < N_SPECS && !cols; f++)
        if (!strcmp(fig_specs[f].name, sp->fig)) cols = fig_specs[f].sql + strlen("SELECT ");
    if (!cols) return;
    static struct pts alt;
    char name[64];
    for (const char *c = cols; strncmp(c, "FROM ", 5);) {
        size_t len = strcspn(c, ", ");
        snprintf(name, sizeof name, "%.*s", (int)len, c);
        c += len + strspn(c + len, ", ");
        int text = !strcmp(name, sp->ycol);
        for (int i = 0; text_cols[i] && !text; i++) text = !strcmp(name, text_cols[i]);
        if (text) continue;
        alt.n = 0;
        struct store *s = NULL;
        struct eb_err e = {0};
        if (store_open_readonly(db, &s, &e)) continue;
        int rc = store_query(s, swap_column(sql, sp->ycol, name), to_pts, &alt, &e);
        store_close(s);
        if (rc || alt.n != want->n) continue;
        pts_sort(&alt, sp->check_x);
        int same = 1;
        for (int i = 0; i < alt.n && same; i++) same = near_rel(alt.y[i], want->y[i]);
        CHECK_MSG(!same, "%s: the fixture draws the same points from %s as from %s; make "
                  "its values distinct", sp->fig, name, sp->ycol);
    }
}

/* Every point a figure draws equals its named column in the view (after the
 * figure's scaling): gnuplot's own `set table` of each panel, all panels
 * together, as a multiset against the view's rows. */
static void check_drawn(const char *db, const struct events *x)
{
    static struct pts got, want;
    for (int d = 0; d < N_DRAWN; d++) {
        const struct drawn_spec *sp = &drawn_specs[d];
        got.n = want.n = 0;
        int tables = 0;
        for (int i = 0; i < x->n; i++) {
            if (x->ev[i] != PLOTS_TABLE || strcmp(x->fig[i], sp->fig)) continue;
            char tsv[700];
            size_t len = strlen(x->text[i]) - strlen(".table");
            snprintf(tsv, sizeof tsv, "%.*s.tsv", (int)len, x->text[i]);
            CHECK_MSG(table_points(x->text[i], sp, data_blocks(tsv), &got) == 0, "%s: unreadable",
                      x->text[i]);
            tables++;
        }
        CHECK_MSG(tables > 0, "%s: no captured table", sp->fig);
        const char *sql = sp->sql ? sp->sql : ablation_sql(sp->plot);
        struct store *s = NULL;
        struct eb_err e = {0};
        CHECK(store_open_readonly(db, &s, &e) == 0);
        CHECK_MSG(store_query(s, sql, to_pts, &want, &e) == 0, "%s: %s", sp->fig, e.msg);
        store_close(s);
        CHECK_MSG(got.n == want.n && got.n > 0 && got.n <= MAX_PTS,
                  "%s (plot %d): %d points drawn, the view has %d", sp->fig, sp->plot, got.n, want.n);
        if (got.n != want.n || got.n > MAX_PTS) continue;
        pts_sort(&got, sp->check_x);
        pts_sort(&want, sp->check_x);
        check_distinct(db, sp, sql, &want);
        int i = 0;
        while (i < got.n && near_rel(got.x[i], want.x[i]) && near_rel(got.y[i], want.y[i])) i++;
        CHECK_MSG(i == got.n, "%s (plot %d): drawn (%g, %g), the view's column gives (%g, %g)",
                  sp->fig, sp->plot, got.x[i], got.y[i], want.x[i], want.y[i]);
    }
}

/* ---- tests: figures ---------------------------------------------------- */

static void test_fixture_database(void)
{
    if (file_size(FIXTURE("plots/runs.tsv")) <= 0) SKIP("tests/fixtures/plots/runs.tsv missing");
    CHECK(build_db(db_full, FIXTURE("plots/runs.tsv"), 0) == 37);
    CHECK(query_int(db_full, "SELECT COUNT(*) FROM runs WHERE status = 'oom'") == 2);
    CHECK(query_int(db_full, "SELECT COUNT(DISTINCT policy) FROM runs") >= 6);
    CHECK(query_int(db_full, "SELECT COUNT(*) FROM samples WHERE correct = 0") > 10);
    CHECK(query_int(db_full, "SELECT COUNT(*) FROM samples WHERE kl_mean IS NOT NULL") == 45);
    /* the first run alone: FullKV at batch 1, no budgets, no fidelity */
    CHECK(build_db(db_small, FIXTURE("plots/runs.tsv"), 1) == 1);
}

static void check_figures(const char *db, const struct events *x, int rendered)
{
    for (int f = 0; f < N_SPECS; f++) {
        const struct fig_spec *sp = &fig_specs[f];
        struct lines want;
        if (query_lines(db, sp->sql, &want) != 0) {
            CHECK(0);
            continue;
        }
        char *got = figure_data_rows(x, sp->name);
        char *ws = sorted_lines(want.buf), *gs = sorted_lines(got);
        CHECK_MSG(!strcmp(ws, gs), "%s: data files differ from the view's rows\n--- view\n%s--- files\n%s",
                  sp->name, ws, gs);
        long panels = query_int(db, sp->panels);
        CHECK_MSG(count_events(x, PLOTS_DATA, sp->name) == panels, "%s: %d data files, %ld panels",
                  sp->name, count_events(x, PLOTS_DATA, sp->name), panels);
        if (want.rows == 0) {
            CHECK_MSG(count_events(x, PLOTS_SKIPPED, sp->name) >= 1, "%s: no skip message", sp->name);
            CHECK(count_events(x, PLOTS_FIGURE, sp->name) == 0);
        }
        if (rendered) CHECK(count_events(x, PLOTS_FIGURE, sp->name) == panels);
        free(want.buf);
        free(got);
        free(ws);
        free(gs);
    }
    /* every figure reported exists as a non-empty PNG and SVG */
    for (int i = 0; i < x->n; i++) {
        if (x->ev[i] != PLOTS_FIGURE) continue;
        char path[700];
        snprintf(path, sizeof path, "%s.png", x->text[i]);
        size_t len = 0;
        char *png = read_file(path, &len);
        CHECK_MSG(png && len > 1000 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8), "%s: not a PNG", path);
        free(png);
        snprintf(path, sizeof path, "%s.svg", x->text[i]);
        char *svg = read_file(path, &len);
        CHECK_MSG(svg && len > 1000 && strstr(svg, "<svg") && strstr(svg, "</svg>"), "%s: not an SVG", path);
        free(svg);
    }
}

static void test_plots_full(void)
{
    if (file_size(db_full) <= 0) SKIP("no fixture database");
    char out[600];
    snprintf(out, sizeof out, "%s/plots", tmp_root);
    static struct events x;
    x.n = 0;
    int render = has_gnuplot();
    struct plots_options o = {out, "plots", NULL, render, collect, &x, render};
    struct store *s = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_full, &s, &e) == 0);
    int rc = plots_make(s, &o, &e);
    CHECK_MSG(rc == 0, "plots_make: %s", e.msg);
    store_close(s);
    check_figures(db_full, &x, render);
    if (render) check_drawn(db_full, &x);
    /* every figure has data in the fixture */
    for (int i = 0; plots_figure_name(i); i++)
        CHECK_MSG(count_events(&x, PLOTS_DATA, plots_figure_name(i)) >= 1, "%s: no panel",
                  plots_figure_name(i));
    CHECK(count_events(&x, PLOTS_DATA, "accuracy_vs_budget") >= 4);
    /* the throughput data carries the out-of-memory points */
    char *thr = figure_data_rows(&x, "throughput_vs_batch");
    CHECK(thr && strstr(thr, "\toom\t"));
    free(thr);
    if (!render) SKIP("gnuplot with pngcairo and svg not available: data checked, figures not rendered");
}

static void test_plots_skip_empty(void)
{
    if (file_size(db_small) <= 0) SKIP("no fixture database");
    char out[600];
    snprintf(out, sizeof out, "%s/plots_small", tmp_root);
    static struct events x;
    x.n = 0;
    int render = has_gnuplot();
    struct plots_options o = {out, "plots", NULL, render, collect, &x, 0};
    struct store *s = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_small, &s, &e) == 0);
    CHECK_MSG(plots_make(s, &o, &e) == 0, "plots_make: %s", e.msg);
    store_close(s);
    check_figures(db_small, &x, render);
    const char *empty[] = {"accuracy_vs_budget", "length_vs_budget", "batching_bs1_vs_padded_vs_grouped",
                           "ablation", "fidelity_vs_budget", "peak_kv_vs_budget"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        CHECK_MSG(count_events(&x, PLOTS_SKIPPED, empty[i]) == 1, "%s: not skipped", empty[i]);
        CHECK(count_events(&x, PLOTS_DATA, empty[i]) == 0);
        char path[700];
        snprintf(path, sizeof path, "%s/%s.png", out, empty[i]);
        CHECK(file_size(path) < 0);
    }
    if (!render) SKIP("gnuplot with pngcairo and svg not available: figures not rendered");
}

static void test_plots_errors(void)
{
    if (file_size(db_small) <= 0) SKIP("no fixture database");
    struct store *s = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_small, &s, &e) == 0);
    /* the output directory cannot be created: a file is in the way */
    char blocker[600];
    snprintf(blocker, sizeof blocker, "%s/blocker", tmp_root);
    FILE *f = fopen(blocker, "w");
    if (f) fclose(f);
    struct plots_options o = {blocker, "plots", NULL, 0, NULL, NULL, 0};
    CHECK(plots_make(s, &o, &e) == -1);
    CHECK(strstr(e.msg, "blocker") != NULL);
    /* a missing gnuplot is a clear error, not a crash */
    CHECK(plots_gnuplot_check("/nonexistent/gnuplot", &e) == -1);
    CHECK(strstr(e.msg, "gnuplot") != NULL);
    if (has_gnuplot()) {
        char out[600];
        snprintf(out, sizeof out, "%s/plots_bad", tmp_root);
        struct plots_options bad = {out, "plots", "/nonexistent/gnuplot", 1, NULL, NULL, 0};
        CHECK(plots_make(s, &bad, &e) == -1);
        CHECK_MSG(strstr(e.msg, "not found") != NULL, "%s", e.msg);
        /* a script directory without the scripts: gnuplot fails, the log is named */
        struct plots_options noscripts = {out, tmp_root, NULL, 1, NULL, NULL, 0};
        CHECK(plots_make(s, &noscripts, &e) == -1);
        CHECK_MSG(strstr(e.msg, ".log") != NULL, "%s", e.msg);
    }
    store_close(s);
}

static void test_labels(void)
{
    char buf[200];
    describe_sampling("{\"greedy\":true}", buf, sizeof buf);
    CHECK_STR(buf, "greedy");
    describe_sampling("{\"temperature\":0.6,\"top_p\":0.95,\"n_samples\":64}", buf, sizeof buf);
    CHECK_STR(buf, "T=0.6, top-p=0.95, 64 samples");
    describe_sampling("{\"temperature\":0}", buf, sizeof buf);
    CHECK_STR(buf, "greedy");
    describe_sampling(NULL, buf, sizeof buf);
    CHECK_STR(buf, "sampling not recorded");
    describe_sampling("not json", buf, sizeof buf);
    CHECK_STR(buf, "sampling not json");
    describe_sampling("{\"greedy\":true}", buf, 3);
    CHECK_STR(buf, "gr");
    describe_batching("1", "padded", buf, sizeof buf);
    CHECK_STR(buf, "batch 1, padded");
    describe_batching("4", NULL, buf, sizeof buf);
    CHECK_STR(buf, "batch 4");
    describe_batching("10", "grouped", buf, sizeof buf);
    CHECK_STR(buf, "batch 10, grouped");
}

/* ---- tests: tables ------------------------------------------------------ */

#define PT_ROWS 64
#define PT_COLS 16

/* One table read back from Markdown or LaTeX: cells without markup, bold flags. */
struct ptable {
    int nr, nc;
    char caption[1600];
    char head[PT_COLS][80];
    char cell[PT_ROWS][PT_COLS][80];
    int bold[PT_ROWS][PT_COLS];
};

/* Copy a cell, dropping surrounding spaces, Markdown/LaTeX bold and escapes. */
static void clean_cell(const char *s, size_t len, char *out, size_t n, int *bold)
{
    while (len && (*s == ' ')) s++, len--;
    while (len && s[len - 1] == ' ') len--;
    *bold = 0;
    if (len >= 4 && !strncmp(s, "**", 2) && !strncmp(s + len - 2, "**", 2)) {
        s += 2, len -= 4, *bold = 1;
    } else if (len >= 9 && !strncmp(s, "\\textbf{", 8) && s[len - 1] == '}') {
        s += 8, len -= 9, *bold = 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < n; i++) {
        if (s[i] == '\\' && i + 1 < len && strchr("%_&#{}|$", s[i + 1])) i++;
        out[k++] = s[i];
    }
    out[k] = '\0';
}

/* Split one row at sep ("|" for Markdown, "&" for LaTeX); LaTeX \multicolumn{n}
 * is expanded to n equal cells. */
static void split_row(struct ptable *t, int r, const char *line, char sep, int is_head)
{
    int c = 0;
    const char *p = line;
    while (*p && c < PT_COLS) {
        const char *q = p;
        while (*q && *q != sep) {
            if (*q == '\\' && q[1]) q++;
            q++;
        }
        char buf[80];
        int bold = 0, span = 1;
        const char *cs = p;
        size_t len = (size_t)(q - p);
        while (len && *cs == ' ') cs++, len--;
        if (!strncmp(cs, "\\multicolumn{", 13)) {
            span = atoi(cs + 13);
            const char *body = strstr(cs, "}{c}{");
            if (body) {
                body += 5;
                len = (size_t)(q - body);
                while (len && (body[len - 1] == ' ' || body[len - 1] == '}')) len--;
                cs = body;
            }
        }
        clean_cell(cs, len, buf, sizeof buf, &bold);
        for (int k = 0; k < span && c < PT_COLS; k++, c++) {
            if (is_head) snprintf(t->head[c], sizeof t->head[c], "%s", buf);
            else {
                snprintf(t->cell[r][c], sizeof t->cell[r][c], "%s", buf);
                t->bold[r][c] = bold;
            }
        }
        p = *q ? q + 1 : q;
    }
    if (is_head) t->nc = c;
}

/* The Markdown table under the heading "### <heading>". */
static int md_table(const char *text, const char *heading, struct ptable *t)
{
    memset(t, 0, sizeof *t);
    char want[700];
    snprintf(want, sizeof want, "### %s\n", heading);
    const char *at = strstr(text, want);
    if (!at) return -1;
    at += strlen(want);
    const char *cap = strstr(at, "Table: ");
    if (cap) {
        size_t len = strcspn(cap, "\n");
        snprintf(t->caption, sizeof t->caption, "%.*s", (int)len, cap);
    }
    at = strstr(at, "\n|");
    if (!at) return -1;
    at++;
    int line_no = 0;
    while (*at == '|' && t->nr < PT_ROWS) {
        size_t len = strcspn(at, "\n");
        char line[1600];
        snprintf(line, sizeof line, "%.*s", (int)(len > 2 ? len - 2 : 0), at + 1);  /* drop outer | */
        if (line_no == 0) split_row(t, 0, line, '|', 1);
        else if (line_no > 1) split_row(t, t->nr++, line, '|', 0);
        line_no++;
        at += len + (at[len] == '\n');
    }
    return t->nc > 0 ? 0 : -1;
}

/* The LaTeX table whose caption holds every one of the given strings. */
static int tex_table(const char *text, const char *const *must, struct ptable *t)
{
    memset(t, 0, sizeof *t);
    for (const char *at = text; (at = strstr(at, "\\caption{")); at++) {
        size_t len = strcspn(at, "\n");
        char cap[1600];
        snprintf(cap, sizeof cap, "%.*s", (int)len, at);
        int ok = 1;
        for (int i = 0; must[i] && ok; i++) ok = strstr(cap, must[i]) != NULL;
        if (!ok) continue;
        snprintf(t->caption, sizeof t->caption, "%s", cap);
        const char *p = strstr(at, "\\toprule\n");
        const char *end = strstr(at, "\\bottomrule");
        if (!p || !end) return -1;
        p += 9;
        int head = 1;
        while (p < end && t->nr < PT_ROWS) {
            size_t l = strcspn(p, "\n");
            char line[1600];
            snprintf(line, sizeof line, "%.*s", (int)l, p);
            char *tail = strstr(line, " \\\\");
            if (tail) *tail = '\0';
            if (strncmp(line, "\\midrule", 8) != 0) {
                if (head) split_row(t, 0, line, '&', 1), head = 0;
                else split_row(t, t->nr++, line, '&', 0);
            }
            p += l + 1;
        }
        return t->nc > 0 ? 0 : -1;
    }
    return -1;
}

static int pt_col(const struct ptable *t, const char *head_prefix)
{
    for (int c = 0; c < t->nc; c++)
        if (!strncmp(t->head[c], head_prefix, strlen(head_prefix))) return c;
    return -1;
}

/* The row whose cells in columns c0 (and c1 when >= 0) read k0 (and k1). */
static int pt_row(const struct ptable *t, int c0, const char *k0, int c1, const char *k1)
{
    for (int r = 0; r < t->nr; r++)
        if (c0 >= 0 && !strcmp(t->cell[r][c0], k0) && (c1 < 0 || !strcmp(t->cell[r][c1], k1))) return r;
    return -1;
}

/* Rows of a query as an array of column arrays (NULL as "NULL"). */
struct qrows {
    int n, nc;
    char v[128][12][96];
};

static int qrows_cb(void *ctx, int ncols, const char *const *names, const char *const *values)
{
    (void)names;
    struct qrows *q = ctx;
    if (q->n >= 128) return 1;
    q->nc = ncols < 12 ? ncols : 12;
    for (int i = 0; i < q->nc; i++) snprintf(q->v[q->n][i], 96, "%s", values[i] ? values[i] : "NULL");
    q->n++;
    return 0;
}

static struct qrows *query_rows(const char *db, const char *sql)
{
    static struct qrows q;
    memset(&q, 0, sizeof q);
    struct store *s = NULL;
    struct eb_err e = {0};
    if (store_open_readonly(db, &s, &e) != 0 || store_query(s, sql, qrows_cb, &q, &e) != 0)
        fprintf(stderr, "  query %s: %s\n", sql, e.msg);
    store_close(s);
    return &q;
}

static const char *fmt(double v, int decimals)
{
    static char buf[8][64];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%.*f", decimals, v);
    return buf[k];
}

/* Bold marks exactly the best non-FullKV value of column c. */
static void check_bold(const struct ptable *t, int c, int higher_better, const char *what)
{
    double best = higher_better ? -INFINITY : INFINITY;
    for (int r = 0; r < t->nr; r++) {
        if (!strcmp(t->cell[r][0], "FullKV")) continue;
        char *end;
        double v = strtod(t->cell[r][c], &end);
        if (end == t->cell[r][c] || *end) continue;
        if (higher_better ? v > best : v < best) best = v;
    }
    for (int r = 0; r < t->nr; r++) {
        double v = strtod(t->cell[r][c], NULL);
        int want = strcmp(t->cell[r][0], "FullKV") != 0 && isfinite(best) && v == best &&
                   strcmp(t->cell[r][c], "--") != 0 && strcmp(t->cell[r][c], "OOM") != 0;
        CHECK_MSG(t->bold[r][c] == want, "%s: row %d column %s bold=%d", what, r, t->head[c], t->bold[r][c]);
    }
}

static char tables_dir[600];

static void check_budget_table(const struct ptable *t, const char *db, int is_length, const char *what)
{
    struct qrows *q = query_rows(db, is_length ?
        "SELECT policy, budget, mean_gen_tokens, fullkv_mean_gen_tokens FROM v_length_by_budget "
        "WHERE model = 'tiny-qwen' AND batch_size = 1 AND batching = 'padded' AND budget IS NOT NULL" :
        "SELECT policy, budget, accuracy, fullkv_accuracy FROM v_accuracy_by_budget "
        "WHERE model = 'tiny-qwen' AND batch_size = 1 AND batching = 'padded' AND budget IS NOT NULL");
    CHECK(q->n == 9);
    for (int i = 0; i < q->n; i++) {
        char head[32];
        snprintf(head, sizeof head, "%s (", q->v[i][1]);
        int c = pt_col(t, head);
        int r = pt_row(t, 0, policy_display_name(q->v[i][0]), -1, NULL);
        double scale = is_length ? 1 : 100;
        CHECK_MSG(c > 0 && r >= 0, "%s: no cell for %s at %s", what, q->v[i][0], q->v[i][1]);
        if (c > 0 && r >= 0)
            CHECK_MSG(!strcmp(t->cell[r][c], fmt(scale * strtod(q->v[i][2], NULL), 1)),
                      "%s: %s at %s: %s, view %s", what, q->v[i][0], q->v[i][1], t->cell[r][c], q->v[i][2]);
        int rf = pt_row(t, 0, "FullKV", -1, NULL);
        CHECK(rf >= 0 && c > 0 && !strcmp(t->cell[rf][c], fmt(scale * strtod(q->v[i][3], NULL), 1)));
    }
    for (int c = 1; c < t->nc; c++) check_bold(t, c, !is_length, what);
    CHECK_MSG(strstr(t->caption, "10 runs, 50 traces") && strstr(t->caption, "greedy"),
              "%s: caption %s", what, t->caption);
}

static void test_tables_full(void)
{
    if (file_size(db_full) <= 0) SKIP("no fixture database");
    snprintf(tables_dir, sizeof tables_dir, "%s/tables", tmp_root);
    struct store *s = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_full, &s, &e) == 0);
    struct tables_options o = {tables_dir, NULL, NULL};
    CHECK_MSG(tables_make(s, &o, &e) == 0, "tables_make: %s", e.msg);
    store_close(s);
    char path[700];
    for (int i = 0; tables_name(i); i++) {
        snprintf(path, sizeof path, "%s/%s.md", tables_dir, tables_name(i));
        CHECK_MSG(file_size(path) > 100, "%s missing", path);
        snprintf(path, sizeof path, "%s/%s.tex", tables_dir, tables_name(i));
        CHECK_MSG(file_size(path) > 100, "%s missing", path);
    }
    const char *panel = "tiny-qwen on gsm8k[0:5], batch 1, padded, greedy, at most 256 new tokens";
    const char *must[] = {"tiny-qwen", "batch 1, padded.", NULL};
    struct ptable *t = malloc(sizeof *t);
    for (int is_length = 0; t && is_length < 2; is_length++) {
        snprintf(path, sizeof path, "%s/%s.md", tables_dir, is_length ? "length_by_budget" : "accuracy_by_budget");
        char *md = read_file(path, NULL);
        snprintf(path, sizeof path, "%s/%s.tex", tables_dir, is_length ? "length_by_budget" : "accuracy_by_budget");
        char *tex = read_file(path, NULL);
        CHECK(md && md_table(md, panel, t) == 0);
        if (md && md_table(md, panel, t) == 0) check_budget_table(t, db_full, is_length, "markdown");
        CHECK(tex && tex_table(tex, must, t) == 0);
        if (tex && tex_table(tex, must, t) == 0) check_budget_table(t, db_full, is_length, "latex");
        CHECK(tex && strstr(tex, "\\toprule") && strstr(tex, "\\bottomrule") && strstr(tex, "\\multicolumn"));
        free(md);
        free(tex);
    }

    /* throughput: tokens/s, OOM and the largest batch */
    snprintf(path, sizeof path, "%s/throughput.md", tables_dir);
    char *md = read_file(path, NULL);
    snprintf(path, sizeof path, "%s/throughput.tex", tables_dir);
    char *tex = read_file(path, NULL);
    const char *must_thr[] = {"tiny-qwen", "continuous batching", NULL};
    for (int pass = 0; t && pass < 2; pass++) {
        int ok = pass ? (tex && tex_table(tex, must_thr, t) == 0)
                      : (md && md_table(md, "tiny-qwen on gsm8k[0:5], continuous batching on cpu, greedy, "
                                            "at most 256 new tokens", t) == 0);
        CHECK(ok);
        if (!ok) continue;
        struct qrows *q = query_rows(db_full,
            "SELECT policy, COALESCE(budget, '--'), batch_size, status, tokens_per_s, max_ok_batch_size "
            "FROM v_throughput_by_batch WHERE model = 'tiny-qwen' AND batching = 'continuous'");
        CHECK(q->n == 9);
        for (int i = 0; i < q->n; i++) {
            char head[32];
            snprintf(head, sizeof head, "batch %s", q->v[i][2]);
            int r = pt_row(t, 0, policy_display_name(q->v[i][0]), 1, q->v[i][1]);
            int c = pt_col(t, head), cm = pt_col(t, "Largest batch");
            CHECK(r >= 0 && c > 0 && cm > 0);
            if (r < 0 || c <= 0 || cm <= 0) continue;
            const char *want = !strcmp(q->v[i][3], "oom") ? "OOM" : fmt(strtod(q->v[i][4], NULL), 1);
            CHECK_MSG(!strcmp(t->cell[r][c], want), "throughput %s %s: %s vs %s", q->v[i][0], head,
                      t->cell[r][c], want);
            CHECK_STR(t->cell[r][cm], q->v[i][5]);
        }
        for (int c = 2; c < t->nc; c++) check_bold(t, c, 1, "throughput");
    }
    free(md);
    free(tex);

    /* ablation at budget 64, batch 4 */
    snprintf(path, sizeof path, "%s/ablation.md", tables_dir);
    md = read_file(path, NULL);
    CHECK(t && md && md_table(md, "tiny-qwen on gsm8k[0:5], budget 64, batch 4, greedy, at most 256 new tokens", t) == 0);
    if (t && md && t->nc) {
        struct qrows *q = query_rows(db_full,
            "SELECT policy, batching, accuracy, mean_gen_tokens, fullkv_accuracy FROM v_ablation "
            "WHERE budget = 64 AND batch_size = 4 AND batching IN ('padded', 'grouped')");
        CHECK(q->n == 7);
        int cp = pt_col(t, "Policy"), cb = pt_col(t, "Batching"), ca = pt_col(t, "Accuracy"),
            cl = pt_col(t, "Length");
        CHECK(t->nr == q->n + 1);
        for (int i = 0; i < q->n; i++) {
            int r = pt_row(t, cp, q->v[i][0], cb, q->v[i][1]);
            CHECK_MSG(r >= 0, "ablation row %s %s", q->v[i][0], q->v[i][1]);
            if (r < 0) continue;
            CHECK_STR(t->cell[r][ca], fmt(100 * strtod(q->v[i][2], NULL), 1));
            CHECK_STR(t->cell[r][cl], fmt(strtod(q->v[i][3], NULL), 1));
        }
        check_bold(t, ca, 1, "ablation accuracy");
        check_bold(t, cl, 0, "ablation length");
        CHECK(strstr(t->caption, "7 runs, 35 traces") != NULL);
    }
    free(md);

    /* PSS of correct vs incorrect traces */
    snprintf(path, sizeof path, "%s/pss.tex", tables_dir);
    tex = read_file(path, NULL);
    const char *must_pss[] = {"tiny-qwen", "correct vs incorrect", NULL};
    CHECK(t && tex && tex_table(tex, must_pss, t) == 0);
    if (t && tex && t->nc) {
        struct qrows *q = query_rows(db_full,
            "SELECT policy, COALESCE(budget, '--'), correct, mean_pss, mean_redundant_pairs, "
            "mean_nonexec, n_samples FROM v_pss WHERE model = 'tiny-qwen'");
        CHECK(q->n == 7 && t->nr == q->n);
        for (int i = 0; i < q->n; i++) {
            int r = -1;
            for (int k = 0; k < t->nr; k++)
                if (!strcmp(t->cell[k][0], policy_display_name(q->v[i][0])) && !strcmp(t->cell[k][1], q->v[i][1]) &&
                    !strcmp(t->cell[k][3], !strcmp(q->v[i][2], "1") ? "correct" : "incorrect"))
                    r = k;
            CHECK(r >= 0);
            if (r < 0) continue;
            CHECK_STR(t->cell[r][pt_col(t, "Mean PSS")], fmt(strtod(q->v[i][3], NULL), 3));
            CHECK_STR(t->cell[r][pt_col(t, "High-sim")], fmt(strtod(q->v[i][4], NULL), 2));
            CHECK_STR(t->cell[r][pt_col(t, "Non-exec")], fmt(strtod(q->v[i][5], NULL), 2));
            CHECK_STR(t->cell[r][pt_col(t, "Traces")], q->v[i][6]);
        }
        CHECK(strstr(t->caption, "4 runs, 20 traces") != NULL);
    }
    free(tex);

    /* fidelity */
    snprintf(path, sizeof path, "%s/fidelity.md", tables_dir);
    md = read_file(path, NULL);
    CHECK(t && md && md_table(md, "tiny-qwen on gsm8k[0:5], greedy, at most 256 new tokens", t) == 0);
    if (t && md && t->nc) {
        struct qrows *q = query_rows(db_full, "SELECT policy, budget, mean_kl, top1_agree FROM v_fidelity");
        CHECK(q->n == 9 && t->nr == 9);
        for (int i = 0; i < q->n; i++) {
            int r = pt_row(t, 0, policy_display_name(q->v[i][0]), 1, q->v[i][1]);
            CHECK(r >= 0);
            if (r < 0) continue;
            CHECK_STR(t->cell[r][pt_col(t, "Mean KL")], fmt(strtod(q->v[i][2], NULL), 4));
            CHECK_STR(t->cell[r][pt_col(t, "Top-1")], fmt(100 * strtod(q->v[i][3], NULL), 1));
        }
        check_bold(t, pt_col(t, "Mean KL"), 0, "fidelity KL");
        check_bold(t, pt_col(t, "Top-1"), 1, "fidelity top-1");
        CHECK(strstr(t->caption, "9 runs, 45 traces") != NULL);
    }
    free(md);
    free(t);
}

struct tevents {
    int written, skipped;
    char skipped_names[16][64];
};

static void tcollect(void *ctx, enum tables_event ev, const char *table, const char *text)
{
    (void)text;
    struct tevents *x = ctx;
    if (ev == TABLES_WRITTEN) x->written++;
    else if (x->skipped < 16) snprintf(x->skipped_names[x->skipped++], 64, "%s", table);
}

static void test_tables_skip_empty(void)
{
    if (file_size(db_small) <= 0) SKIP("no fixture database");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/tables_small", tmp_root);
    struct store *s = NULL;
    struct eb_err e = {0};
    CHECK(store_open_readonly(db_small, &s, &e) == 0);
    struct tevents x;
    memset(&x, 0, sizeof x);
    struct tables_options o = {dir, tcollect, &x};
    CHECK_MSG(tables_make(s, &o, &e) == 0, "tables_make: %s", e.msg);
    store_close(s);
    /* FullKV alone: throughput and PSS have rows; the rest are skipped, no empty files */
    const char *absent[] = {"accuracy_by_budget", "length_by_budget", "ablation", "fidelity"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s.md", dir, absent[i]);
        CHECK_MSG(file_size(path) < 0, "%s written", path);
        int skipped = 0;
        for (int k = 0; k < x.skipped; k++) skipped |= !strcmp(x.skipped_names[k], absent[i]);
        CHECK_MSG(skipped, "%s: no skip message", absent[i]);
    }
    CHECK(x.written == 4);
    char path[700];
    snprintf(path, sizeof path, "%s/pss.md", dir);
    CHECK(file_size(path) > 100);
}

/* A policy name without a style row (a policy added to the registry only)
 * gets the default: its own name, colour and point type by series number
 * (the palette's fallbacks), solid; known names keep theirs. */
static void test_palette_default_style(void)
{
    struct policy_style d = policy_style_of("my-new-policy");
    CHECK_STR(d.name, "my-new-policy");
    CHECK_STR(d.display, "my-new-policy");
    CHECK(d.rgb == -1 && d.point == 0 && d.dashed == 0);
    CHECK_STR(policy_style_of(NULL).display, "?");
    CHECK_STR(policy_display_name(NULL), "?");
    struct policy_style k = policy_style_of("rkv");
    CHECK_STR(k.display, "R-KV");
    CHECK(k.rgb == 0x0072B2 && k.point == 5 && !k.dashed);
    struct policy_style f = policy_style_of("fullkv");
    CHECK(f.rgb == 0x000000 && f.point == 4 && f.dashed == 1);
    /* the palette names no unknown policy, so gnuplot falls back for it */
    char *gp = NULL;
    struct eb_err e = {0};
    CHECK_MSG(plots_palette_text(&gp, &e) == 0, "%s", e.msg);
    if (!gp) return;
    CHECK(strstr(gp, "my-new-policy") == NULL);
    CHECK(strstr(gp, "    fallback_rgb(i)\n") && strstr(gp, "    1 + (i % 6)\n") &&
          strstr(gp, "    1\n") && strstr(gp, "    p\n"));
    free(gp);
}

/* The palette comes from the style table (harness/report/policy_style.c):
 * every styled name's display name, colour, point type and dash appear in
 * the generated palette.gp, as the tables name them; gnuplot evaluates it to
 * the same values; and no script names a policy the registry does not have
 * (a dead entry) or carries its own list. */
static void test_palette_from_registry(void)
{
    char *gp = NULL;
    struct eb_err e = {0};
    CHECK_MSG(plots_palette_text(&gp, &e) == 0, "%s", e.msg);
    if (!gp) return;
    const char *rgb = strstr(gp, "policy_rgb(p, i) ="), *pt = strstr(gp, "policy_pt(p, i) =");
    const char *dt = strstr(gp, "policy_dt(p) ="), *nm = strstr(gp, "policy_name(p) =");
    CHECK(rgb && pt && dt && nm && rgb < pt && pt < dt && dt < nm);
    int n;
    const struct policy_style *st = policy_styles(&n);
    CHECK(n >= 20);
    for (int i = 0; rgb && pt && dt && nm && i < n; i++) {
        const struct policy_style *s = &st[i];
        CHECK_MSG(s->display && *s->display, "%s has no display name", s->name);
        if (!s->display) continue;
        for (const char *c = s->display; *c; c++) CHECK((unsigned char)*c >= 0x20);
        CHECK_STR(policy_display_name(s->name), s->display);
        char want[160];
        snprintf(want, sizeof want, "(p eq '%s') ? '%s' :", s->name, s->display);
        CHECK_MSG(strstr(nm, want) != NULL, "palette lacks %s", want);
        snprintf(want, sizeof want, "(p eq '%s') ? 0x%06X :", s->name, (unsigned)s->rgb);
        if (s->rgb >= 0) CHECK_MSG(strstr(rgb, want) && strstr(rgb, want) < pt, "lacks %s", want);
        snprintf(want, sizeof want, "(p eq '%s') ? %d :", s->name, s->point);
        if (s->point > 0) CHECK_MSG(strstr(pt, want) && strstr(pt, want) < dt, "lacks %s", want);
        snprintf(want, sizeof want, "(p eq '%s') ? 2 :", s->name);
        CHECK_MSG((strstr(dt, want) != NULL && strstr(dt, want) < nm) == (s->dashed != 0),
                  "%s: dash", s->name);
    }
    CHECK_STR(policy_display_name("fullkv"), "FullKV");
    CHECK_STR(policy_display_name("rpc"), "RPC");
    CHECK_STR(policy_display_name("my-new-policy"), "my-new-policy");
    CHECK_STR(policy_display_name("vase"), "vase"); /* the old dead entry: no such policy */
    /* gnuplot reads it as the figures do (common.gp defines fallback_rgb) */
    char path[600], cmd[1600], out[256] = "";
    snprintf(path, sizeof path, "%s/palette_eval.gp", tmp_root);
    if (has_gnuplot() && plots_palette_write(path, &e) == 0) {
        snprintf(cmd, sizeof cmd, "gnuplot -e \"fallback_rgb(i) = 7; load '%s'; print "
                 "policy_name('rpc') . '|' . policy_color('rkv', 0) . '|' . policy_dt('fullkv') . "
                 "'|' . policy_rgb('no-such', 3) . '|' . policy_name('no-such')\" 2>&1", path);
        FILE *f = popen(cmd, "r");
        if (f) {
            if (!fgets(out, sizeof out, f)) out[0] = '\0';
            pclose(f);
        }
        CHECK_STR(out, "RPC|#0072b2|2|7|no-such\n");
    }
    free(gp);
    /* no script keeps a list of its own */
    static const char *const scripts[] = {"ablation", "accuracy_vs_budget",
        "batching_bs1_vs_padded_vs_grouped", "common", "fidelity_vs_budget", "length_vs_budget",
        "peak_kv_vs_budget", "pss_correct_vs_incorrect", "throughput_vs_batch", NULL};
    for (int i = 0; scripts[i]; i++) {
        snprintf(path, sizeof path, "plots/%s.gp", scripts[i]);
        char *text = read_file(path, NULL);
        CHECK_MSG(text != NULL, "%s missing", path);
        /* a policy is compared as (p eq 'name'); fmt, settings and status otherwise */
        for (const char *at = text; at && (at = strstr(at, "(p eq '")); at++) {
            char key[64];
            if (sscanf(at, "(p eq '%63[^']'", key) != 1) continue;
            CHECK_MSG(policy_registry_find(key) != NULL, "%s names '%s', not a registry policy",
                      path, key);
        }
        free(text);
    }
    CHECK(access("plots/palette.gp", F_OK) != 0); /* the palette is generated, not kept */
}

int main(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/eb_test_plots_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(db_full, sizeof db_full, "%s/full.db", tmp_root);
    snprintf(db_small, sizeof db_small, "%s/small.db", tmp_root);
    RUN(test_labels);
    RUN(test_palette_from_registry);
    RUN(test_palette_default_style);
    RUN(test_fixture_database);
    RUN(test_plots_full);
    RUN(test_plots_skip_empty);
    RUN(test_plots_errors);
    RUN(test_tables_full);
    RUN(test_tables_skip_empty);
    if (!getenv("EB_KEEP_TMP")) remove_tree(tmp_root);
    else fprintf(stderr, "  kept %s\n", tmp_root);
    return test_summary("plots");
}
