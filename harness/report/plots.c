/* plots.c - export each figure's view to tab-separated data files and render
 * them with gnuplot (plots/NAME.gp) as PNG and SVG.  See plots.h and plots/README.md. */
#include "harness/report/plots.h"

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

#include "harness/store/store.h"

#include "harness/report/plot_figures.h"

int str_same(const char *a, const char *b)
{
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
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
    fprintf(f, "# %s: rows of %s for one panel; one block per series, each starting with "
               "the column names (scripts read columns by name); NULL = not measured\n",
            fig->name, fig->view);
    for (int b = 0; b < p->nblocks; b++) {
        if (b) fputs("\n\n", f);
        for (int c = 0; c < t->ncols; c++) fprintf(f, "%s%s", c ? "\t" : "", t->names[c]);
        fputc('\n', f);
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
    char data[4096], out[4096], script[4096], log[4096], palette[4096];
    if (path_of(data, sizeof data, data_dir, stem, ".tsv", e) ||
        path_of(script, sizeof script, scripts, fig->name, ".gp", e) ||
        path_of(palette, sizeof palette, data_dir, "palette", ".gp", e))
        return -1;
    if (write_data(data, p, fig, e)) return -1;
    note(o, PLOTS_DATA, fig->name, data);
    if (!o->render) return 0;
    char table[4096];
    for (int k = 0; k < 2 + (o->capture != 0); k++) {
        const char *fmt = k == 1 ? "svg" : "png";
        static const char *const ext[] = {".png", ".svg", ".png"};
        static const char *const logext[] = {".png.log", ".svg.log", ".table.log"};
        if (path_of(out, sizeof out, o->out_dir, stem, ext[k], e) ||
            path_of(log, sizeof log, data_dir, stem, logext[k], e) ||
            path_of(table, sizeof table, data_dir, stem, ".table", e))
            return -1;
        struct sbuf all = {0};
        sb_printf(&all, "%s", vars);
        gp_str(&all, "plotdir", scripts);
        gp_str(&all, "palette", palette);
        gp_str(&all, "datafile", data);
        gp_str(&all, "out", k == 2 ? "/dev/null" : out);
        gp_str(&all, "fmt", fmt);
        /* the third pass writes the drawn points instead of a figure */
        if (k == 2) gp_str(&all, "gp_table", table);
        int rc = all.oom ? eb_fail(e, "out of memory") : run_gnuplot(gnuplot, all.p, script, log, e);
        free(all.p);
        if (rc) return -1;
        if (k == 2) {
            note(o, PLOTS_TABLE, fig->name, table);
            continue;
        }
        struct stat st;
        if (stat(out, &st) != 0 || st.st_size == 0) return eb_fail(e, "%s: gnuplot wrote no figure", out);
    }
    if (path_of(out, sizeof out, o->out_dir, stem, "", e)) return -1;
    note(o, PLOTS_FIGURE, fig->name, out);
    return 0;
}

/* A panel's file stem: the figure name and the panel's key (sampling and
 * length left out, and an f32 kv_type), with "__2", "__3" ... when an earlier panel took it. */
static void panel_stem(struct sbuf *stem, const struct figure *fig, const struct panel *p,
                       const int *pcols, int np, char *const *stems, int nstems)
{
    sb_printf(stem, "%s", fig->name);
    for (int i = 0; i < np; i++) {
        const char *col = fig->panel[i];
        if (!strcmp(col, "sampling") || !strcmp(col, "max_new_tokens")) continue;
        /* the default cache type keeps the names figures had before kv_type */
        if (!strcmp(col, "kv_type") && str_same(view_cell(p->t, p->r0, pcols[i]), "f32")) continue;
        sb_put(stem, "__", 2);
        if (!strcmp(col, "batch_size")) sb_put(stem, "bs", 2);
        if (!strcmp(col, "budget")) sb_put(stem, "b", 1);
        slug_append(stem, view_cell(p->t, p->r0, pcols[i]));
    }
    if (stem->oom) return;
    size_t base = stem->n;
    for (int k = 2;; k++) {
        int taken = 0;
        for (int i = 0; i < nstems && !taken; i++) taken = !strcmp(stems[i], stem->p);
        if (!taken) break;
        stem->n = base;
        sb_printf(stem, "__%d", k);
    }
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
    int exists = view_exists(s, fig->view, e);
    if (exists != 1) {
        free(sql.p);
        if (exists < 0) return eb_wrap(e, fig->name);
        note(o, PLOTS_SKIPPED, fig->name, "skipped: the database predates its view (older schema)");
        return 0;
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

        struct sbuf stem = {0};
        panel_stem(&stem, fig, &p, pcols, np, stems, nstems);
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
    /* the registry's colours and names, fresh for every run */
    char palette[4200];
    snprintf(palette, sizeof palette, "%s/palette.gp", data_dir);
    if (plots_palette_write(palette, e)) return -1;
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
    for (int i = 0; rc == 0 && i < plot_n_figures; i++) rc = make_figure(s, &c, &plot_figures[i], o, data_dir, e);
    for (int i = 0; rc == 0 && i < bench_n_figures; i++) rc = make_figure(s, &c, &bench_figures[i], o, data_dir, e);
    view_rows_free(&c.fullkv);
    view_rows_free(&c.runs);
    return rc;
}
