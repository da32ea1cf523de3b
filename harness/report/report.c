/* report.c - `evictbench report`: the site's index page and its files
 * (see report.h). */
#include "harness/report/report_priv.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/store/store.h"
#include "util/repo_file.h"

char *report_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *g = realloc(buf, cap * 2);
            if (!g) {
                free(buf);
                buf = NULL;
            }
            buf = g;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* Copy report.css and report.js into the site. */
static int copy_assets(const struct report_options *o, struct eb_err *e)
{
    static const char *const names[] = {"report.css", "report.js"};
    for (int i = 0; i < 2; i++) {
        char src[4096], dst[4096];
        if (o->site_dir) {
            snprintf(src, sizeof src, "%s/%s", o->site_dir, names[i]);
        } else {
            char rel[64];
            snprintf(rel, sizeof rel, "harness/report/site/%s", names[i]);
            if (eb_repo_file(rel, src, sizeof src, NULL, 0) != 0)
                return eb_fail(e, "%s: not found (run from the repository, or give --site DIR)", rel);
        }
        size_t len = 0;
        char *text = report_slurp(src, &len);
        if (!text) return eb_fail(e, "%s: cannot read: %s", src, strerror(errno));
        struct sbuf b = {text, len, len + 1, 0};
        snprintf(dst, sizeof dst, "%s/%s", o->out_dir, names[i]);
        int rc = html_write(dst, &b, e);
        free(text);
        if (rc) return -1;
    }
    return 0;
}

static int count_rows(void *ctx, int n, const char *const *names, const char *const *values)
{
    (void)n, (void)names;
    *(long *)ctx = values[0] ? atol(values[0]) : 0;
    return 0;
}

static long long site_bytes;

static int add_size(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)path, (void)f;
    if (flag == FTW_F) site_bytes += st->st_size;
    return 0;
}

static void page_top(struct sbuf *b, const struct report_options *o, long version)
{
    html_head(b, "evictbench report", "");
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    sb_printf(b, "<h1>evictbench report</h1>\n<p class=\"meta\">From <code>");
    html_text(b, o->db_path);
    sb_printf(b, "</code> (schema version %ld), written %s.</p>\n", version, when);
}

int report_make(struct store *s, const struct report_options *o, struct report_summary *sum,
                struct eb_err *e)
{
    memset(sum, 0, sizeof *sum);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/problems", o->out_dir);
    if (plots_mkdirs(dir, e) || copy_assets(o, e)) return -1;
    long runs = 0, version = 0;
    if (store_query(s, "SELECT COUNT(*) FROM runs", count_rows, &runs, e) ||
        store_query(s, "PRAGMA user_version", count_rows, &version, e))
        return -1;
    sum->n_runs = (int)runs;
    struct sbuf b = {0};
    page_top(&b, o, version);
    int rc = 0;
    if (runs == 0) {
        sb_printf(&b, "<p id=\"no-runs\">This database holds no runs yet: run <code>evictbench "
                      "exp</code> (or <code>make exp</code>) to measure some, then "
                      "<code>evictbench report</code> again.</p>\n");
    } else {
        sb_printf(&b, "<nav><a href=\"#runs\">Runs</a><a href=\"#figures\">Figures</a>"
                      "<a href=\"#bench\">Benchmarks</a><a href=\"#problems\">Problems</a><a href=\"#provenance\">Provenance</a></nav>\n");
        rc = report_runs(s, &b, e);
        if (rc == 0) rc = report_figures(s, o, &b, &sum->n_figures, e);
        if (rc == 0) rc = report_bench(s, &b, &sum->n_bench_rows, e);
        if (rc == 0) rc = report_problems(s, o, &b, sum, e);
        if (rc == 0) rc = report_provenance(s, o, &b, e);
    }
    html_foot(&b, "");
    char path[4200];
    snprintf(path, sizeof path, "%s/index.html", o->out_dir);
    if (rc == 0) rc = html_write(path, &b, e);
    free(b.p);
    if (rc) return -1;
    site_bytes = 0;
    nftw(o->out_dir, add_size, 16, FTW_PHYS);
    sum->bytes = site_bytes;
    return 0;
}
