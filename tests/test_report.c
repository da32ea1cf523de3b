/* test_report.c - `evictbench report` (harness/report/report.h) on a small
 * database made through the store API: FullKV, R-KV with retention records
 * and SnapKV without, outputs holding HTML.  Checked on the files, then in
 * headless Chromium from file:// through the DOM (SKIP without chromium):
 * the runs table holds the database's rows and values, sorting works, one
 * sample's evicted-token counts equal the database's, no console output,
 * and a screenshot that is not blank.  The same checks run once more on a
 * deliberately broken copy of the page and must fail there.  Bad input: a
 * database without runs, a version-4 database (migrated when writable, read
 * as it is read-only), runs without retention records. */
#include "test.h"
#include "test_util.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness/exp/retention.h"
#include "harness/report/report.h"

static char tmp[256];

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = '\0';
    fclose(f);
    return b;
}

/* ---- the database ---- */

/* Tokens of the R-KV output: the text is their concatenation. */
static const char *const RKV_TOKENS[] = {"Let", " me", " add", ": <b>", "3", "</b>", " &",
                                         " 4", " =", " 7", ".", " \\boxed{7}"};
enum { N_TOK = 12, N_PROMPT = 5, N_LAYER = 2, N_KV = 2, N_HEADS = N_LAYER * N_KV,
       N_POS = N_PROMPT + N_TOK };

static unsigned char *zip(const unsigned char *raw, size_t n, size_t *out_len)
{
    uLongf cap = compressBound((uLong)n);
    unsigned char *z = malloc(cap);
    if (z && compress2(z, &cap, raw, (uLong)n, 6) != Z_OK) {
        free(z);
        return NULL;
    }
    *out_len = cap;
    return z;
}

/* Step of (head, position): positions 1..3 leave head h at step 2 + h; the
 * generated positions 5..8 leave every head at step 6; head 0 also loses 10. */
static uint32_t step_of(int h, int p)
{
    if (p >= 1 && p <= 3) return (uint32_t)(2 + h);
    if (p >= N_PROMPT && p <= N_PROMPT + 3) return 6;
    if (h == 0 && p == N_PROMPT + 5) return 8;
    return 0;
}

static struct sample_retention ret;
static unsigned char *ret_steps, *ret_tb;
/* what the page must show: positions gone from every head, (position, head) pairs */
static long want_tokens, want_slots;

static void make_retention(void)
{
    unsigned char raw[N_HEADS * N_POS * 4], tb[N_TOK * 2];
    want_tokens = want_slots = 0;
    for (int p = 0; p < N_POS; p++) {
        int all = 1;
        for (int h = 0; h < N_HEADS; h++) {
            uint32_t v = step_of(h, p);
            unsigned char *d = raw + ((size_t)h * N_POS + p) * 4;
            d[0] = (unsigned char)v, d[1] = d[2] = d[3] = 0;
            want_slots += v != 0;
            all &= v != 0;
        }
        want_tokens += all;
    }
    for (int i = 0; i < N_TOK; i++) tb[2 * i] = (unsigned char)strlen(RKV_TOKENS[i]), tb[2 * i + 1] = 0;
    size_t ns = 0, nt = 0;
    ret_steps = zip(raw, sizeof raw, &ns);
    ret_tb = zip(tb, sizeof tb, &nt);
    ret = (struct sample_retention){N_LAYER, N_KV, N_PROMPT, N_POS, want_slots, want_tokens, 8,
                                    RETENTION_ENCODING, ret_steps, ns, ret_tb, nt};
}

static const char HTML_OUT[] = "I think <script>alert('x')</script> & </div> so \\boxed{7}";

static int write_run(struct store *st, const char *key, const char *policy, int64_t budget,
                     double tps, const char *text0, int with_retention)
{
    static char rkv_text[256];
    rkv_text[0] = '\0';
    for (int i = 0; i < N_TOK; i++) strcat(rkv_text, RKV_TOKENS[i]);
    struct run_record r;
    run_record_init(&r);
    r.run_key = key, r.model = "qwen2.5-coder-1.5b", r.dataset = "gsm8k", r.data_limit = 2;
    r.policy = policy, r.budget = budget, r.batch_size = 16, r.batching = "continuous", r.status = "ok";
    r.sampling_json = "{\"greedy\":true}", r.max_new_tokens = 64, r.tokens_per_s = tps;
    r.peak_kv_bytes = (int64_t)(1000 * tps), r.wall_s = 100 / tps, r.gen_tokens = 2 * N_TOK;
    struct sample_record s[2];
    for (int i = 0; i < 2; i++) {
        sample_record_init(&s[i]);
        s[i].sample_idx = i, s[i].item_id = i ? "gsm8k-test-1" : "gsm8k-test-0";
        s[i].prompt_tokens = N_PROMPT, s[i].gen_tokens = N_TOK, s[i].finished = 1;
        s[i].correct = i == 0, s[i].ref_answer = "7", s[i].pred_answer = "7";
        s[i].text = i ? "Another answer: 8." : (text0 ? text0 : rkv_text);
    }
    if (with_retention) s[0].retention = &ret;
    struct sentence_record sent;
    sentence_record_init(&sent);
    sent.sample_idx = 0, sent.sent_idx = 0, sent.start_tok = N_PROMPT, sent.end_tok = N_PROMPT + 10;
    sent.kind = "others";
    struct eb_err e = {0};
    int rc = store_write_run(st, &r, s, 2, &sent, with_retention, &e);
    if (rc) fprintf(stderr, "  write_run: %s\n", e.msg);
    return rc;
}

static char db[300], empty_db[300], old_db[300];

/* Bench rows: FullKV and R-KV at two contexts, and one max-batch sweep. */
static int write_bench(struct store *st)
{
    static const int64_t ctx[2] = {1024, 4096};
    static const double tps[2][2] = {{24.5, 23.75}, {20.25, 24.125}};
    struct eb_err e = {0};
    for (int i = 0; i < 4; i++) {
        struct bench_record r;
        bench_record_init(&r);
        r.kind = "context", r.model = "qwen2.5-coder-1.5b", r.device = "cpu", r.kv_type = "f16";
        r.policy = i & 1 ? "rkv" : "fullkv", r.budget = i & 1 ? 1024 : STORE_NONE;
        r.fill = "repeat:gsm8k:64", r.status = "ok", r.code_version = "test", r.threads = 2;
        r.context = ctx[i / 2], r.batch_size = 1, r.n_new = 16, r.decode_tok_s = tps[i / 2][i & 1];
        r.decode_step_ms = 1000 / r.decode_tok_s, r.kv_bytes = 28 * r.context * 1024;
        r.compress_first_ms = i & 1 ? 45.5 * (1 + i / 2) : NAN;
        if (store_write_bench(st, &r, &e)) return fprintf(stderr, "  bench: %s\n", e.msg), -1;
    }
    struct bench_record m;
    bench_record_init(&m);
    m.kind = "max_batch", m.model = "qwen2.5-coder-1.5b", m.device = "cpu", m.kv_type = "f16";
    m.policy = "fullkv", m.budget = STORE_NONE, m.fill = "repeat:gsm8k:64", m.status = "ok";
    m.code_version = "test", m.threads = 2, m.kv_cap_bytes = 1 << 30, m.batch_size = 2;
    m.context = 4096, m.n_new = 4, m.decode_tok_s = 7.5, m.decode_step_ms = 266.7;
    if (store_write_bench(st, &m, &e)) return fprintf(stderr, "  bench: %s\n", e.msg), -1;
    return 0;
}

static void test_build(void)
{
    make_retention();
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK_MSG(store_open(db, &st, &e) == 0, "%s", e.msg);
    if (!st) return;
    /* tokens/s out of the table's default order, so that sorting shows */
    CHECK(write_run(st, "k-full", "fullkv", STORE_NONE, 30.5, HTML_OUT, 0) == 0);
    CHECK(write_run(st, "k-rkv", "rkv", 4, 10.25, NULL, 1) == 0);
    CHECK(write_run(st, "k-snap", "snapkv-decode", 4, 20.75, "The answer: 7 </div> &amp;", 0) == 0);
    CHECK(write_bench(st) == 0);
    store_close(st);
    CHECK(store_open(empty_db, &st, &e) == 0);
    store_close(st);
}

/* ---- the report ---- */

static int make_report(const char *dbp, const char *out, int readonly, struct report_summary *sum)
{
    struct store *st = NULL;
    struct eb_err e = {0};
    int rc = readonly ? store_open_readonly(dbp, &st, &e) : store_open_reader(dbp, &st, &e);
    struct report_options o = {dbp, out, "plots", NULL, "harness/report/site", NULL};
    if (rc == 0) rc = report_make(st, &o, sum, &e);
    if (rc) fprintf(stderr, "  report: %s\n", e.msg);
    store_close(st);
    return rc;
}

static char site[300];

static void test_files(void)
{
    snprintf(site, sizeof site, "%s/site", tmp);
    struct report_summary sum;
    CHECK(make_report(db, site, 0, &sum) == 0);
    CHECK(sum.n_runs == 3 && sum.n_problems == 2 && sum.n_retention == 1);
    CHECK_MSG(sum.n_bench_rows == 5, "%d bench rows in the report, the database has 5", sum.n_bench_rows);
    char path[400];
    snprintf(path, sizeof path, "%s/index.html", site);
    char *page = slurp(path);
    CHECK(page && strstr(page, "id=\"bench-context-table\"") && strstr(page, "id=\"bench-max-batch-table\"")
          && !strstr(page, "id=\"no-bench\""));
    free(page);
    snprintf(path, sizeof path, "%s/problems/p0001.html", site);
    page = slurp(path);
    CHECK(page != NULL);
    if (!page) return;
    /* model output holding HTML is text */
    CHECK(strstr(page, "I think &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;/div&gt;"));
    CHECK(!strstr(page, "<script>alert"));
    CHECK(strstr(page, "The answer: 7 &lt;/div&gt; &amp;amp;"));
    /* the retention data cannot close its script block */
    const char *json = strstr(page, "<script type=\"application/json\"");
    CHECK(json && strstr(json, "\\u003cb\\u003e") && !strstr(strstr(json, ">"), "<b>"));
    /* a run without records, and FullKV, say why they have no view */
    CHECK(strstr(page, "No retention view: FullKV evicts nothing"));
    CHECK(strstr(page, "No retention view: no retention record for this sample"));
    free(page);
    /* no runs: a page that says so */
    char empty_site[300];
    snprintf(empty_site, sizeof empty_site, "%s/empty", tmp);
    CHECK(make_report(empty_db, empty_site, 0, &sum) == 0 && sum.n_runs == 0);
    snprintf(path, sizeof path, "%s/index.html", empty_site);
    page = slurp(path);
    CHECK(page && strstr(page, "id=\"no-runs\"") && strstr(page, "holds no runs"));
    free(page);
}

/* A version-4 database: read as it is read-only (no retention table: the page
 * says so), migrated by a reader that may write (records absent: said too). */
static void test_older_schema(void)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", db, old_db);
    CHECK(system(cmd) == 0);
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK(store_open(old_db, &st, &e) == 0);
    if (!st) return;
    CHECK(store_query(st, "DROP VIEW v_bench_context; DROP VIEW v_bench_max_batch; DROP TABLE bench; "
                          "DROP TABLE retention; PRAGMA user_version = 4", NULL, NULL, &e) == 0);
    store_close(st);
    char out[300], path[400];
    struct report_summary sum;
    snprintf(out, sizeof out, "%s/old_ro", tmp);
    CHECK(make_report(old_db, out, 1, &sum) == 0 && sum.n_runs == 3 && sum.n_retention == 0);
    snprintf(path, sizeof path, "%s/index.html", out);
    char *page = slurp(path);
    CHECK(page && strstr(page, "(schema version 4)"));
    CHECK(page && strstr(page, "id=\"no-bench\"") && strstr(page, "holds no bench rows"));
    CHECK(sum.n_bench_rows == 0);
    free(page);
    snprintf(path, sizeof path, "%s/problems/p0001.html", out);
    page = slurp(path);
    CHECK(page && strstr(page, "written before schema version 5"));
    free(page);
    snprintf(out, sizeof out, "%s/old_rw", tmp);
    CHECK(make_report(old_db, out, 0, &sum) == 0 && sum.n_retention == 0);
    snprintf(path, sizeof path, "%s/index.html", out);
    page = slurp(path);
    char now[40];
    snprintf(now, sizeof now, "(schema version %d)", STORE_SCHEMA_VERSION);
    CHECK(page && strstr(page, now));
    free(page);
}

/* ---- in the browser ---- */

static const char *chromium(void)
{
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome", NULL};
    const char *env = getenv("EVICTBENCH_CHROMIUM");
    if (env && *env) return env;
    for (int i = 0; names[i]; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", names[i]);
        if (system(cmd) == 0) return names[i];
    }
    return NULL;
}

/* Runs chromium on file://<abs>; mode "dump" (DOM to out) or "shot" (PNG to out).
 * err receives its stderr. */
static int browse(const char *mode, const char *page, const char *hash, const char *out,
                  const char *err)
{
    char abs[PATH_MAX], cmd[3 * PATH_MAX];
    if (!realpath(page, abs)) return -1;
    const char *base = "timeout 120 %s --headless --no-sandbox --disable-gpu --no-first-run "
                       "--enable-logging=stderr --v=0 --hide-scrollbars --window-size=1400,1000 ";
    int n = snprintf(cmd, sizeof cmd, base, chromium());
    if (!strcmp(mode, "dump"))
        snprintf(cmd + n, sizeof cmd - n, "--dump-dom 'file://%s%s' > '%s' 2> '%s'", abs, hash, out, err);
    else
        snprintf(cmd + n, sizeof cmd - n, "--screenshot='%s' 'file://%s' > /dev/null 2> '%s'", out, abs, err);
    return system(cmd);
}

struct fails {
    int n;
    char first[1200];
};

#define EXPECT(f, cond, ...) do { if (!(cond)) { if (!(f)->n++) snprintf((f)->first, \
    sizeof (f)->first, __VA_ARGS__); } } while (0)

/* A table of a dumped DOM (by id): per row (<tr ROW="id">), the id and the
 * data-v of the named column. */
static int dom_table(const char *dom, const char *table, const char *row, const char *col,
                     long *ids, double *vals, int max)
{
    char key[80], tr[80];
    snprintf(key, sizeof key, "id=\"%s\"", table);
    snprintf(tr, sizeof tr, "<tr %s=\"", row);
    const char *t = strstr(dom, key);
    const char *end = t ? strstr(t, "</table>") : NULL;
    if (!t || !end) return -1;
    int idx = -1, k = 0;
    snprintf(key, sizeof key, "data-col=\"%s\"", col);
    for (const char *c = strstr(t, "data-col=\""); c && c < end && idx < 0; c = strstr(c + 1, "data-col=\""), k++)
        if (!strncmp(c, key, strlen(key))) idx = k;
    if (idx < 0) return -1;
    int n = 0;
    for (const char *r = strstr(t, tr); r && r < end && n < max; r = strstr(r + 1, tr)) {
        ids[n] = atol(r + strlen(tr));
        const char *cell = r;
        for (int i = 0; i <= idx && cell; i++) cell = strstr(cell + 1, "<td");
        const char *v = cell ? strstr(cell, "data-v=\"") : NULL;
        vals[n++] = v && v[8] != '"' ? strtod(v + 8, NULL) : NAN;
    }
    return n;
}

/* The runs table's column, per run id. */
static int dom_column(const char *dom, const char *col, long *ids, double *vals, int max)
{
    return dom_table(dom, "runs-table", "data-run-id", col, ids, vals, max);
}

struct numbers {
    int n;
    double v[16];
};

static int add_number(void *ctx, int ncols, const char *const *names, const char *const *values)
{
    struct numbers *x = ctx;
    (void)names;
    if (ncols > 0 && x->n < 16) x->v[x->n++] = values[0] ? strtod(values[0], NULL) : NAN;
    return 0;
}

/* The first column of every row sql returns. */
static int db_numbers(const char *sql, struct numbers *out)
{
    struct store *st = NULL;
    struct eb_err e = {0};
    out->n = 0;
    if (store_open_readonly(db, &st, &e)) return -1;
    int rc = store_query(st, sql, add_number, out, &e);
    store_close(st);
    return rc;
}

/* What the bench tables show equals the bench views, row for row. */
static void check_bench_dom(const char *d, struct fails *f)
{
    static const char *const q[3][3] = {
        {"bench-context-table", "decode_tok_s", "SELECT decode_tok_s FROM v_bench_context ORDER BY "
         "model, device, threads, kv_type, fill, n_new, batch_size, context, policy <> 'fullkv', "
         "policy, budget"},
        {"bench-context-table", "compress_first_ms", "SELECT compress_first_ms FROM v_bench_context "
         "ORDER BY model, device, threads, kv_type, fill, n_new, batch_size, context, "
         "policy <> 'fullkv', policy, budget"},
        {"bench-max-batch-table", "decode_tok_s", "SELECT decode_tok_s FROM v_bench_max_batch"}};
    for (int t = 0; t < 3; t++) {
        long ids[16];
        double vals[16];
        struct numbers want;
        int n = dom_table(d, q[t][0], "data-bench-row", q[t][1], ids, vals, 16);
        EXPECT(f, db_numbers(q[t][2], &want) == 0 && n == want.n && n > 0,
               "%s: %d rows on the page, %d in the database", q[t][0], n, want.n);
        for (int i = 0; i < n && n == want.n; i++)
            EXPECT(f, vals[i] == want.v[i] || (isnan(vals[i]) && isnan(want.v[i])),
                   "%s row %d: %s %g on the page, %g in the database", q[t][0], i + 1, q[t][1],
                   vals[i], want.v[i]);
    }
}

/* In a 1400-pixel window, the runs table's right edge is inside the window:
 * measured by a copy of index.html that writes the numbers into its DOM. */
static void check_runs_width(const char *dir, struct fails *f, const char *dom, const char *err)
{
    char cmd[1600], page[400];
    snprintf(page, sizeof page, "%s/measure.html", dir);
    snprintf(cmd, sizeof cmd, "sed 's|</body>|<script>var r = document.getElementById(\"runs-table\")"
             ".getBoundingClientRect(); document.body.setAttribute(\"data-runs-right\", Math.ceil(r.right)); "
             "document.body.setAttribute(\"data-view-width\", document.documentElement.clientWidth);"
             "</script></body>|' '%s/index.html' > '%s'", dir, page);
    EXPECT(f, system(cmd) == 0, "could not write %s", page);
    EXPECT(f, browse("dump", page, "", dom, err) == 0, "chromium failed on %s", page);
    char *d = slurp(dom);
    const char *r = d ? strstr(d, "data-runs-right=\"") : NULL, *w = d ? strstr(d, "data-view-width=\"") : NULL;
    long right = r ? atol(r + 17) : -1, width = w ? atol(w + 17) : -1;
    EXPECT(f, r && w && right > 0 && right <= width && width >= 1300,
           "the runs table ends at %ld px in a window %ld px wide", right, width);
    free(d);
}

static double db_number(const char *sql)
{
    struct store *st = NULL;
    struct eb_err e = {0};
    if (store_open_readonly(db, &st, &e)) return NAN;
    double v = store_query_number(st, sql);
    store_close(st);
    return v;
}

/* The inflated image data of a PNG holds more than a few distinct byte values. */
static int png_not_blank(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static unsigned char buf[1 << 23], idat[1 << 23], raw[1 << 25];
    size_t n = fread(buf, 1, sizeof buf, f), ni = 0;
    fclose(f);
    if (n < 8 || memcmp(buf, "\x89PNG", 4)) return 0;
    for (size_t at = 8; at + 12 <= n;) {
        size_t len = (size_t)buf[at] << 24 | buf[at + 1] << 16 | buf[at + 2] << 8 | buf[at + 3];
        if (!memcmp(buf + at + 4, "IDAT", 4) && ni + len <= sizeof idat) {
            memcpy(idat + ni, buf + at + 8, len);
            ni += len;
        }
        at += 12 + len;
    }
    uLongf nr = sizeof raw;
    if (uncompress(raw, &nr, idat, ni) != Z_OK && nr == 0) return 0;
    int seen[256] = {0}, distinct = 0;
    for (uLongf i = 0; i < nr; i++) distinct += !seen[raw[i]]++;
    return distinct > 16;
}

/* Every browser check on the site in dir; failures counted in f. */
static void check_in_browser(const char *dir, struct fails *f)
{
    char index[400], page[400], dom[400], err[400], shot[400];
    snprintf(index, sizeof index, "%s/index.html", dir);
    snprintf(page, sizeof page, "%s/problems/p0001.html", dir);
    snprintf(dom, sizeof dom, "%s.dom", dir);
    snprintf(err, sizeof err, "%s.err", dir);
    snprintf(shot, sizeof shot, "%s.png", dir);
    long ids[16];
    double tps[16], acc[16];
    for (int dir_sort = 0; dir_sort < 2; dir_sort++) {
        EXPECT(f, browse("dump", index, dir_sort ? "#sort=tokens_per_s:desc" : "#sort=tokens_per_s:asc",
                         dom, err) == 0, "chromium failed on %s", index);
        char *d = slurp(dom), *log = slurp(err);
        int n = d ? dom_column(d, "tokens_per_s", ids, tps, 16) : -1;
        int na = d ? dom_column(d, "accuracy", ids, acc, 16) : -1;
        EXPECT(f, n == 3 && na == 3, "runs table: %d rows, the database has 3", n);
        for (int i = 0; i < n && n == 3; i++) {
            char sql[200];
            snprintf(sql, sizeof sql, "select tokens_per_s from runs where id = %ld", ids[i]);
            EXPECT(f, tps[i] == db_number(sql), "run %ld: tokens/s %g on the page", ids[i], tps[i]);
            snprintf(sql, sizeof sql, "select accuracy from runs where id = %ld", ids[i]);
            EXPECT(f, acc[i] == db_number(sql), "run %ld: accuracy %g on the page", ids[i], acc[i]);
            if (i) EXPECT(f, dir_sort ? tps[i - 1] > tps[i] : tps[i - 1] < tps[i],
                          "not sorted by tokens/s (%s)", dir_sort ? "desc" : "asc");
        }
        EXPECT(f, d && strstr(d, "data-ready=\"1\""), "the page's script did not finish");
        if (d && !dir_sort) check_bench_dom(d, f);
        EXPECT(f, log && !strstr(log, "CONSOLE"), "console output: %.200s",
               log && strstr(log, "CONSOLE") ? strstr(log, "CONSOLE") : "");
        free(d);
        free(log);
    }
    /* one sample's evicted counts, computed by the page from its record */
    EXPECT(f, browse("dump", page, "", dom, err) == 0, "chromium failed on %s", page);
    char *d = slurp(dom), *log = slurp(err);
    const char *art = d ? strstr(d, "data-run-id=\"2\" data-sample-idx=\"0\"") : NULL;
    const char *tok = art ? strstr(art, "class=\"n-evicted-tokens\">") : NULL;
    const char *slot = art ? strstr(art, "class=\"n-evicted-slots\">") : NULL;
    double db_tok = db_number("select n_evicted_tokens from retention where run_id = 2 and sample_idx = 0");
    double db_slot = db_number("select n_evicted_slots from retention where run_id = 2 and sample_idx = 0");
    EXPECT(f, tok && atol(tok + 25) == (long)db_tok && db_tok == want_tokens,
           "evicted tokens on the page %s, database %g", tok ? tok + 25 : "(none)", db_tok);
    EXPECT(f, slot && atol(slot + 24) == (long)db_slot && db_slot == want_slots,
           "evicted slots on the page %s, database %g", slot ? slot + 24 : "(none)", db_slot);
    EXPECT(f, d && strstr(d, "I think &lt;script&gt;"), "the HTML output is not shown as text");
    EXPECT(f, log && !strstr(log, "CONSOLE"), "console output on the problem page");
    free(d);
    free(log);
    EXPECT(f, browse("shot", index, "", shot, err) == 0 && png_not_blank(shot), "blank screenshot %s", shot);
    check_runs_width(dir, f, dom, err);
}

static void test_browser(void)
{
    if (!chromium()) SKIP("chromium not found (Debian package chromium; tools/deps.sh installs it)");
    struct fails f = {0, ""};
    check_in_browser(site, &f);
    CHECK_MSG(f.n == 0, "%d browser checks failed, first: %s", f.n, f.first);
    /* the same checks on a broken copy: the sort throws, the view never fills */
    char broken[300], cmd[1400];
    snprintf(broken, sizeof broken, "%s/broken", tmp);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && sed -i 's/var th = table.tHead.rows\\[0\\].cells\\[col\\];/"
             "throw new Error(\"broken\");/' '%s/report.js'", site, broken, broken);
    CHECK(system(cmd) == 0);
    struct fails g = {0, ""};
    check_in_browser(broken, &g);
    CHECK_MSG(g.n >= 3, "a broken page passed the browser checks (%d failures)", g.n);
    printf("  broken page: %d checks failed as they should (first: %s)\n", g.n, g.first);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/eb_test_report_XXXXXX");
    if (!mkdtemp(tmp)) return 2;
    snprintf(db, sizeof db, "%s/r.db", tmp);
    snprintf(empty_db, sizeof empty_db, "%s/empty.db", tmp);
    snprintf(old_db, sizeof old_db, "%s/old.db", tmp);
    RUN(test_build);
    RUN(test_files);
    RUN(test_older_schema);
    RUN(test_browser);
    free(ret_steps);
    free(ret_tb);
    if (!getenv("EB_KEEP_TMP")) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", tmp);
    }
    return test_summary("report");
}
