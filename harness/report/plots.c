/* plots.c - export each figure's view to tab-separated data files and render
 * them with gnuplot (plots/NAME.gp) as PNG and SVG.  See plots.h and plots/README.md. */
#include "plots.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "store.h"

/* ---- view_rows --------------------------------------------------------- */

struct load_ctx {
    struct view_rows *t;
    int failed;
};

static char *dup_or_null(const char *s, int *failed)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *failed = 1;
    return d;
}

static int load_row(void *ctx, int ncols, const char *const *names, const char *const *values)
{
    struct load_ctx *c = ctx;
    struct view_rows *t = c->t;
    if (!t->names) {
        t->names = calloc((size_t)(ncols ? ncols : 1), sizeof *t->names);
        if (!t->names) return c->failed = 1;
        t->ncols = ncols;
        for (int i = 0; i < ncols; i++) t->names[i] = dup_or_null(names[i], &c->failed);
        if (c->failed) return 1;
    }
    if (t->nrows == t->cap) {
        int cap = t->cap ? t->cap * 2 : 64;
        char **cells = realloc(t->cells, (size_t)cap * (size_t)ncols * sizeof *cells);
        if (!cells) return c->failed = 1;
        t->cells = cells;
        t->cap = cap;
    }
    char **row = t->cells + (size_t)t->nrows * (size_t)ncols;
    for (int i = 0; i < ncols; i++) row[i] = dup_or_null(values[i], &c->failed);
    t->nrows++;
    return c->failed;
}

int view_rows_load(struct store *s, const char *sql, struct view_rows *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    struct load_ctx c = {out, 0};
    if (store_query(s, sql, load_row, &c, e) != 0) {
        view_rows_free(out);
        return -1;
    }
    if (c.failed) {
        view_rows_free(out);
        return eb_fail(e, "out of memory reading query results");
    }
    return 0;
}

void view_rows_free(struct view_rows *t)
{
    if (!t) return;
    for (int i = 0; i < t->ncols && t->names; i++) free(t->names[i]);
    for (size_t i = 0; i < (size_t)t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
    free(t->names);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

int view_col(const struct view_rows *t, const char *name)
{
    for (int i = 0; i < t->ncols; i++)
        if (t->names[i] && !strcmp(t->names[i], name)) return i;
    return -1;
}

const char *view_cell(const struct view_rows *t, int row, int col)
{
    if (row < 0 || row >= t->nrows || col < 0 || col >= t->ncols) return NULL;
    return t->cells[(size_t)row * (size_t)t->ncols + (size_t)col];
}

double view_num(const struct view_rows *t, int row, int col)
{
    const char *v = view_cell(t, row, col);
    if (!v || !*v) return NAN;
    char *end = NULL;
    double d = strtod(v, &end);
    return *end ? NAN : d;
}

/* ---- labels ------------------------------------------------------------ */

void describe_sampling(const char *sampling_json, char *out, size_t n)
{
    if (!n) return;
    if (!sampling_json || !*sampling_json) {
        snprintf(out, n, "sampling not recorded");
        return;
    }
    cJSON *j = cJSON_Parse(sampling_json);
    if (!cJSON_IsObject(j)) {
        snprintf(out, n, "sampling %s", sampling_json);
        cJSON_Delete(j);
        return;
    }
    const cJSON *greedy = cJSON_GetObjectItemCaseSensitive(j, "greedy");
    const cJSON *temp = cJSON_GetObjectItemCaseSensitive(j, "temperature");
    if (!temp) temp = cJSON_GetObjectItemCaseSensitive(j, "temp");
    const cJSON *top_p = cJSON_GetObjectItemCaseSensitive(j, "top_p");
    const cJSON *top_k = cJSON_GetObjectItemCaseSensitive(j, "top_k");
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(j, "n_samples");
    if (!count) count = cJSON_GetObjectItemCaseSensitive(j, "samples");
    if (!count) count = cJSON_GetObjectItemCaseSensitive(j, "n");
    size_t k = 0;
    if (cJSON_IsTrue(greedy) || (cJSON_IsNumber(temp) && temp->valuedouble == 0)) {
        k += (size_t)snprintf(out, n, "greedy");
    } else if (cJSON_IsNumber(temp)) {
        k += (size_t)snprintf(out, n, "T=%g", temp->valuedouble);
        if (k < n && cJSON_IsNumber(top_p) && top_p->valuedouble < 1)
            k += (size_t)snprintf(out + k, n - k, ", top-p=%g", top_p->valuedouble);
        if (k < n && cJSON_IsNumber(top_k) && top_k->valuedouble > 0)
            k += (size_t)snprintf(out + k, n - k, ", top-k=%g", top_k->valuedouble);
    } else {
        k += (size_t)snprintf(out, n, "sampling %s", sampling_json);
    }
    if (k < n && cJSON_IsNumber(count) && count->valuedouble > 1)
        snprintf(out + k, n - k, ", %g samples", count->valuedouble);
    cJSON_Delete(j);
}

void describe_batching(const char *batch_size, const char *batching, char *out, size_t n)
{
    if (!batch_size) batch_size = "?";
    if (!batching)
        snprintf(out, n, "batch %s", batch_size);
    else
        snprintf(out, n, "batch %s, %s", batch_size, batching);
}

const char *policy_display_name(const char *policy)
{
    /* the same display names as plots/palette.gp (policy_name) */
    static const char *const names[][2] = {
        {"fullkv", "FullKV"}, {"streamingllm", "StreamingLLM"}, {"h2o", "H2O"},
        {"snapkv", "SnapKV"}, {"rkv", "R-KV"}, {"skipkv", "SkipKV"}, {"skipkv-full", "SkipKV"},
        {"skipkv-sent", "SkipKV (sentence only)"}, {"skipkv-sent-steer", "SkipKV (no grouping)"},
        {"seal", "SEAL"}, {"seal-static", "static steering"}, {"vase", "VASE"},
        {"beaconkv", "BeaconKV"},
    };
    if (!policy) return "?";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(policy, names[i][0])) return names[i][1];
    return policy;
}

/* ---- a growing text buffer -------------------------------------------- */

struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
};

static void sb_put(struct sbuf *b, const char *s, size_t len)
{
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)w < sizeof tmp) {
        sb_put(b, tmp, (size_t)w);
        return;
    }
    char *big = malloc((size_t)w + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)w + 1, fmt, ap);
    va_end(ap);
    sb_put(b, big, (size_t)w);
    free(big);
}

/* name='value'; as a gnuplot assignment: single-quoted strings have no
 * escapes except '' for a quote.  Line breaks would end the command. */
static void gp_str(struct sbuf *b, const char *name, const char *value)
{
    sb_printf(b, "%s='", name);
    for (const char *c = value ? value : ""; *c; c++) {
        if (*c == '\'') sb_put(b, "''", 2);
        else if (*c == '\n' || *c == '\r' || *c == '\t') sb_put(b, " ", 1);
        else sb_put(b, c, 1);
    }
    sb_put(b, "'; ", 3);
}

/* A real number: always written with a '.' or an exponent, since gnuplot
 * divides two integers as integers (5898240/1048576 is 5). */
static void gp_num(struct sbuf *b, const char *name, double v)
{
    char num[64];
    if (!isfinite(v)) {
        sb_printf(b, "%s=NaN; ", name);
        return;
    }
    snprintf(num, sizeof num, "%.10g", v);
    sb_printf(b, "%s=%s%s; ", name, num, strpbrk(num, ".e") ? "" : ".0");
}

static void gp_int(struct sbuf *b, const char *name, long v)
{
    sb_printf(b, "%s=%ld; ", name, v);
}

/* ---- files ------------------------------------------------------------- */

int plots_mkdirs(const char *path, struct eb_err *e)
{
    char buf[4096];
    if (!path || !*path) return eb_fail(e, "no directory given");
    if (strlen(path) >= sizeof buf) return eb_fail(e, "%s: path too long", path);
    strcpy(buf, path);
    for (char *c = buf + 1;; c++) {
        if (*c == '/' || *c == '\0') {
            char saved = *c;
            *c = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return eb_fail(e, "%s: cannot create directory: %s", buf, strerror(errno));
            *c = saved;
            if (!saved) break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return eb_fail(e, "%s: not a directory", path);
    return 0;
}

/* A name part for file names: letters, digits, '.', '-' and '+' kept, runs of
 * anything else become one '_'. */
static void slug_append(struct sbuf *b, const char *s)
{
    int last_us = 0;
    size_t start = b->n;
    for (const char *c = s ? s : "none"; *c; c++) {
        int keep = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                   (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '+';
        if (keep) {
            sb_put(b, c, 1);
            last_us = 0;
        } else if (!last_us) {
            sb_put(b, "_", 1);
            last_us = 1;
        }
    }
    while (!b->oom && b->n > start && b->p[b->n - 1] == '_') b->p[--b->n] = '\0';
    if (!b->oom && b->n == start) sb_put(b, "x", 1);
}

/* ---- gnuplot ----------------------------------------------------------- */

/* The last lines of a log file, for an error message. */
static void log_tail(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char buf[2048];
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len > (long)sizeof buf - 1) fseek(f, len - (long)sizeof buf + 1, SEEK_SET);
        else fseek(f, 0, SEEK_SET);
    }
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    /* keep the last ~300 characters, on one line */
    const char *start = got > 300 ? buf + got - 300 : buf;
    size_t k = 0;
    for (const char *c = start; *c && k + 1 < n; c++) out[k++] = (*c == '\n' || *c == '\r') ? ' ' : *c;
    out[k] = '\0';
}

/* Run `gnuplot -e vars script` with stdout and stderr going to log_path.
 * Returns 0 on exit status 0; the log is removed then. */
static int run_gnuplot(const char *gnuplot, const char *vars, const char *script,
                       const char *log_path, struct eb_err *e)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return eb_fail(e, "gnuplot: cannot fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        int null_fd = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            /* the command first, so that a failed figure can be rerun by hand */
            dprintf(fd, "# %s -e \"%s\" %s\n", gnuplot, vars, script);
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (null_fd >= 0) dup2(null_fd, 0);
        execlp(gnuplot, gnuplot, "-e", vars, script, (char *)NULL);
        dprintf(2, "cannot run %s: %s\n", gnuplot, strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return eb_fail(e, "gnuplot: waitpid: %s", strerror(errno));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        unlink(log_path);
        return 0;
    }
    char tail[400];
    log_tail(log_path, tail, sizeof tail);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return eb_fail(e, "%s: not found or not runnable (install gnuplot-nox): %s", gnuplot, tail);
    return eb_fail(e, "%s failed (%s; log %s): %s", script,
                   WIFEXITED(status) ? "non-zero exit" : "killed by a signal", log_path, tail);
}

int plots_gnuplot_check(const char *gnuplot, struct eb_err *e)
{
    if (!gnuplot) gnuplot = "gnuplot";
    char log_path[] = "/tmp/eb_gnuplot_check_XXXXXX";
    int fd = mkstemp(log_path);
    if (fd < 0) return eb_fail(e, "gnuplot check: cannot create a temporary file: %s", strerror(errno));
    close(fd);
    /* The script argument "-" would read stdin (/dev/null): nothing more to do. */
    int rc = run_gnuplot(gnuplot, "set terminal pngcairo; set terminal svg", "-", log_path, e);
    unlink(log_path);
    if (rc != 0) return eb_fail(e, "%s does not run with the pngcairo and svg terminals "
                                "(install gnuplot-nox)", gnuplot);
    return 0;
}

/* ---- figures ----------------------------------------------------------- */

/* Rows [r0, r1) of a figure's query that make one panel, split into blocks
 * (series) at block[0..nblocks]. */
struct panel {
    const struct view_rows *t;
    int r0, r1;
    int nblocks;
    int *block;                 /* nblocks + 1 row indices */
};

/* Tables every figure may consult. */
struct fig_ctx {
    struct view_rows fullkv;    /* v_fullkv_ref */
    struct view_rows runs;      /* runs: id, batch_size, batching, sampling_json, max_new_tokens */
};

/* Adds the figure's gnuplot variables for a panel.  Returns 0, 1 to skip the
 * panel (why filled), -1 on error. */
typedef int (*fig_vars_fn)(const struct fig_ctx *c, const struct panel *p, struct sbuf *v,
                           char *why, size_t nwhy);

struct figure {
    const char *name;
    const char *view;
    const char *columns;        /* the data file's columns, in order (plots/README.md) */
    const char *where;          /* NULL: every row of the view */
    const char *panel[7];       /* columns that make a panel; NULL-terminated */
    const char *series[4];      /* columns that make a series (block); NULL-terminated */
    const char *order_tail;     /* ORDER BY after panel and series columns */
    fig_vars_fn vars;
};

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

static int str_same(const char *a, const char *b)
{
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
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
    const char *dev = first_cell(p, "device");
    snprintf(setting, sizeof setting, "%s batching on %s", first_cell(p, "batching"), dev ? dev : "?");
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
    char setting[128];
    batching_setting(p, setting, sizeof setting);
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

static const struct figure figures[] = {
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
     "model, dataset, policy, budget, batching, batch_size, status, device, sampling, "
     "max_new_tokens, n_runs, n_samples, gen_tokens, wall_s, tokens_per_s, peak_kv_bytes, "
     "max_ok_batch_size",
     NULL,
     {"model", "dataset", "device", "batching", "sampling", "max_new_tokens", NULL},
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
     "model, dataset, policy, budget, batch_size, batching, sampling, max_new_tokens, n_runs, "
     "n_samples, seq_peak_kv_bytes, seq_max_peak_kv_bytes, seq_mean_kv_bytes, "
     "batch_peak_kv_bytes, fullkv_seq_peak_kv_bytes",
     "budget IS NOT NULL AND seq_peak_kv_bytes IS NOT NULL",
     {"model", "dataset", "sampling", "max_new_tokens", "batch_size", "batching", NULL},
     {"policy", NULL}, "budget", vars_kv},
};

#define N_FIGURES ((int)(sizeof figures / sizeof figures[0]))

const char *plots_figure_name(int i)
{
    return i >= 0 && i < N_FIGURES ? figures[i].name : NULL;
}

static void note(const struct plots_options *o, enum plots_event ev, const char *fig, const char *text)
{
    if (o->note) o->note(o->ctx, ev, fig, text);
}

/* Rows r and k agree on every listed column (NULL-aware). */
static int same_cols(const struct view_rows *t, int r, int k, const int *cols, int n)
{
    for (int i = 0; i < n; i++)
        if (!str_same(view_cell(t, r, cols[i]), view_cell(t, k, cols[i]))) return 0;
    return 1;
}

/* One data value for a tab-separated file: NULL as "NULL", no tabs or line breaks. */
static void write_cell(FILE *f, const char *v)
{
    if (!v) {
        fputs("NULL", f);
        return;
    }
    for (const char *c = v; *c; c++) fputc(*c == '\t' || *c == '\n' || *c == '\r' ? ' ' : *c, f);
}

static int write_data(const char *path, const struct panel *p, const struct figure *fig,
                      struct eb_err *e)
{
    FILE *f = fopen(path, "w");
    if (!f) return eb_fail(e, "%s: cannot write: %s", path, strerror(errno));
    const struct view_rows *t = p->t;
    fprintf(f, "# %s: rows of %s for one panel; one block per series; NULL = not measured\n# ",
            fig->name, fig->view);
    for (int c = 0; c < t->ncols; c++) fprintf(f, "%s%s", c ? "\t" : "", t->names[c]);
    fputc('\n', f);
    for (int b = 0; b < p->nblocks; b++) {
        if (b) fputs("\n\n", f);
        for (int r = p->block[b]; r < p->block[b + 1]; r++) {
            for (int c = 0; c < t->ncols; c++) {
                if (c) fputc('\t', f);
                write_cell(f, view_cell(t, r, c));
            }
            fputc('\n', f);
        }
    }
    if (ferror(f) | fclose(f)) return eb_fail(e, "%s: write failed", path);
    return 0;
}

static int resolve_cols(const struct view_rows *t, const char *const *names, int *out,
                        const char *fig, struct eb_err *e)
{
    int n = 0;
    for (; names[n]; n++) {
        out[n] = view_col(t, names[n]);
        if (out[n] < 0) return eb_fail(e, "%s: column %s missing from the query", fig, names[n]);
    }
    return n;
}

/* "<dir>/<stem><suffix>" into out; fails when it does not fit. */
static int path_of(char *out, size_t n, const char *dir, const char *stem, const char *suffix,
                   struct eb_err *e)
{
    int w = snprintf(out, n, "%s/%s%s", dir, stem, suffix);
    if (w < 0 || (size_t)w >= n) return eb_fail(e, "%s/%s%s: path too long", dir, stem, suffix);
    return 0;
}

/* Write one panel's data file and render it as PNG and SVG. */
static int emit_panel(const struct plots_options *o, const struct figure *fig,
                      const struct panel *p, const char *stem, const char *vars,
                      const char *data_dir, struct eb_err *e)
{
    const char *scripts = o->script_dir ? o->script_dir : "plots";
    const char *gnuplot = o->gnuplot ? o->gnuplot : "gnuplot";
    char data[4096], out[4096], script[4096], log[4096];
    if (path_of(data, sizeof data, data_dir, stem, ".tsv", e) ||
        path_of(script, sizeof script, scripts, fig->name, ".gp", e))
        return -1;
    if (write_data(data, p, fig, e)) return -1;
    note(o, PLOTS_DATA, fig->name, data);
    if (!o->render) return 0;
    for (int k = 0; k < 2; k++) {
        const char *fmt = k ? "svg" : "png";
        if (path_of(out, sizeof out, o->out_dir, stem, k ? ".svg" : ".png", e) ||
            path_of(log, sizeof log, data_dir, stem, k ? ".svg.log" : ".png.log", e))
            return -1;
        struct sbuf all = {0};
        sb_printf(&all, "%s", vars);
        gp_str(&all, "plotdir", scripts);
        gp_str(&all, "datafile", data);
        gp_str(&all, "out", out);
        gp_str(&all, "fmt", fmt);
        int rc = all.oom ? eb_fail(e, "out of memory") : run_gnuplot(gnuplot, all.p, script, log, e);
        free(all.p);
        if (rc) return -1;
        struct stat st;
        if (stat(out, &st) != 0 || st.st_size == 0) return eb_fail(e, "%s: gnuplot wrote no figure", out);
    }
    if (path_of(out, sizeof out, o->out_dir, stem, "", e)) return -1;
    note(o, PLOTS_FIGURE, fig->name, out);
    return 0;
}

static int make_figure(struct store *s, const struct fig_ctx *c, const struct figure *fig,
                       const struct plots_options *o, const char *data_dir, struct eb_err *e)
{
    struct sbuf sql = {0};
    sb_printf(&sql, "SELECT %s FROM %s", fig->columns, fig->view);
    if (fig->where) sb_printf(&sql, " WHERE %s", fig->where);
    sb_printf(&sql, " ORDER BY ");
    for (int i = 0; fig->panel[i]; i++) sb_printf(&sql, "%s, ", fig->panel[i]);
    for (int i = 0; fig->series[i]; i++)
        sb_printf(&sql, "%s%s, ", fig->series[i], !strcmp(fig->series[i], "correct") ? " DESC" : "");
    sb_printf(&sql, "%s", fig->order_tail);
    if (sql.oom) {
        free(sql.p);
        return eb_fail(e, "out of memory");
    }
    struct view_rows t;
    int rc = view_rows_load(s, sql.p, &t, e);
    free(sql.p);
    if (rc) return eb_wrap(e, fig->name);
    if (t.nrows == 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "skipped: %s has no rows%s%s", fig->view,
                 fig->where ? " where " : "", fig->where ? fig->where : "");
        note(o, PLOTS_SKIPPED, fig->name, msg);
        view_rows_free(&t);
        return 0;
    }
    int pcols[8], scols[8];
    int np = resolve_cols(&t, fig->panel, pcols, fig->name, e);
    int ns = np < 0 ? -1 : resolve_cols(&t, fig->series, scols, fig->name, e);
    int *block = ns < 0 ? NULL : calloc((size_t)t.nrows + 1, sizeof *block);
    char **stems = ns < 0 ? NULL : calloc((size_t)t.nrows, sizeof *stems);
    int nstems = 0;
    if (ns >= 0 && (!block || !stems)) eb_fail(e, "out of memory");
    rc = (ns < 0 || !block || !stems) ? -1 : 0;
    for (int r0 = 0; rc == 0 && r0 < t.nrows;) {
        struct panel p = {&t, r0, r0, 0, block};
        while (p.r1 < t.nrows && same_cols(&t, r0, p.r1, pcols, np)) p.r1++;
        r0 = p.r1;
        block[0] = p.r0;
        for (int r = p.r0 + 1; r <= p.r1; r++)
            if (r == p.r1 || !same_cols(&t, r - 1, r, scols, ns)) block[++p.nblocks] = r;

        /* file stem: figure name and the panel's key, sampling left out unless needed */
        struct sbuf stem = {0};
        sb_printf(&stem, "%s", fig->name);
        for (int i = 0; i < np; i++) {
            const char *col = fig->panel[i];
            if (!strcmp(col, "sampling") || !strcmp(col, "max_new_tokens")) continue;
            sb_put(&stem, "__", 2);
            if (!strcmp(col, "batch_size")) sb_put(&stem, "bs", 2);
            if (!strcmp(col, "budget")) sb_put(&stem, "b", 1);
            slug_append(&stem, view_cell(&t, p.r0, pcols[i]));
        }
        if (!stem.oom) {
            size_t base = stem.n;
            for (int k = 2;; k++) {
                int taken = 0;
                for (int i = 0; i < nstems && !taken; i++) taken = !strcmp(stems[i], stem.p);
                if (!taken) break;
                stem.n = base;
                sb_printf(&stem, "__%d", k);
            }
        }
        struct sbuf vars = {0};
        char why[200] = "";
        int skip = stem.oom ? -1 : fig->vars(c, &p, &vars, why, sizeof why);
        if (skip < 0 || stem.oom || vars.oom) {
            rc = eb_fail(e, "out of memory");
        } else if (skip == 1) {
            char msg[600];
            snprintf(msg, sizeof msg, "skipped %s: %s", stem.p, why);
            note(o, PLOTS_SKIPPED, fig->name, msg);
        } else {
            rc = emit_panel(o, fig, &p, stem.p, vars.p, data_dir, e);
            if (rc == 0 && !(stems[nstems++] = strdup(stem.p))) rc = eb_fail(e, "out of memory");
        }
        free(stem.p);
        free(vars.p);
    }
    for (int i = 0; stems && i < nstems; i++) free(stems[i]);
    free(stems);
    free(block);
    view_rows_free(&t);
    return rc ? eb_wrap(e, fig->name) : 0;
}

int plots_make(struct store *s, const struct plots_options *o, struct eb_err *e)
{
    if (!o || !o->out_dir) return eb_fail(e, "plots: no output directory");
    char data_dir[4096];
    if (snprintf(data_dir, sizeof data_dir, "%s/data", o->out_dir) >= (int)sizeof data_dir)
        return eb_fail(e, "%s: path too long", o->out_dir);
    if (plots_mkdirs(data_dir, e)) return -1;
    struct fig_ctx c;
    memset(&c, 0, sizeof c);
    if (view_rows_load(s, "SELECT model, dataset, sampling, max_new_tokens, accuracy, "
                          "mean_gen_tokens FROM v_fullkv_ref", &c.fullkv, e) ||
        view_rows_load(s, "SELECT id, batch_size, batching, sampling_json, max_new_tokens "
                          "FROM runs", &c.runs, e)) {
        view_rows_free(&c.fullkv);
        return -1;
    }
    int rc = 0;
    for (int i = 0; rc == 0 && i < N_FIGURES; i++) rc = make_figure(s, &c, &figures[i], o, data_dir, e);
    view_rows_free(&c.fullkv);
    view_rows_free(&c.runs);
    return rc;
}
